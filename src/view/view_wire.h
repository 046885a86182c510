/*
 * The membership protocol's messages in the one wire codec (util/wire.h):
 * what members send each other to start a group, change views and admit
 * joiners. Each message opens with the codec's header (u16 type, u16
 * version); the fields follow in the order of the structs below, integers
 * little-endian, addresses as a fixed-width host string (CTL_HOST_MAX - 1
 * bytes) and a u16 port, table descriptors as sst_desc_encode writes them,
 * subgroup layouts as a fixed-width record (VIEW_WIRE_LAYOUT_SIZE bytes).
 *
 * Every message but the join request and the join offer has a fixed size
 * for a given group (the control channel's mailboxes expect one length per
 * tag): counts that vary travel in fixed-width arrays whose unused entries
 * must be zero. Decoders are strict: another type or wire version, a
 * count or length out of range, a layout that breaks smc_layout_validate,
 * nonzero padding or trailing bytes fail with SPINDLE_EPROTO and a message
 * naming the message, the field, its offset and the value. Each decoder is
 * a libFuzzer target (tests/fuzz), which also checks that decode -> encode
 * -> decode gives the same message.
 *
 * Thread-safety: pure functions over caller-owned memory.
 */
#ifndef SP_VIEW_VIEW_WIRE_H
#define SP_VIEW_VIEW_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/ctl.h"
#include "smc/smc.h"
#include "sst/sst.h"
#include "util/wire.h"
#include "view/view.h"

enum view_wire_type {
    VIEW_WIRE_DESC = 0x5601,           /* a member's table descriptor (first view) */
    VIEW_WIRE_READY = 0x5602,          /* a member is ready in a view (start, barrier) */
    VIEW_WIRE_BLOB = 0x5603,           /* a survivor's frozen counts and next descriptor */
    VIEW_WIRE_COMMIT = 0x5604,         /* a survivor's commitment to one suspected set */
    VIEW_WIRE_JOIN_REQUEST = 0x5605,   /* a joiner asks any member */
    VIEW_WIRE_JOIN_OFFER = 0x5606,     /* the answer: admitted, redirected or refused */
    VIEW_WIRE_JOIN_DESC = 0x5607,      /* the joiner's table descriptor, to the leader */
    VIEW_WIRE_JOIN_ANNOUNCE = 0x5608,  /* the leader announces the joiner to the members */
    VIEW_WIRE_JOIN_VIEW = 0x5609,      /* the leader gives the joiner its view and state size */
    VIEW_WIRE_SUSPECT = 0x560a,        /* a member starts a change: whom it suspects */
    VIEW_WIRE_JOIN_SKIPS = 0x560b,     /* the resends the joiner takes without delivering */
    VIEW_WIRE_JOIN_STATE = 0x560c,     /* a chunk of the joiner's state */
    VIEW_WIRE_JOIN_STATE_ACK = 0x560d, /* the joiner took the state up to an offset */
    VIEW_WIRE_JOIN_LOG_ENDS = 0x560e,  /* where a restarted joiner's log ends */
    VIEW_WIRE_RESTART = 0x560f,        /* a restarting member's state (total restart) */
    VIEW_WIRE_RESTART_FETCH = 0x5610,  /* a restarting member asks a subgroup's source */
    VIEW_WIRE_RESTART_SLICE = 0x5611,  /* the source's answer: a slice of the catch-up stream */
};

/* Subgroups a joiner may bring (its request must fit one join frame). */
#define VIEW_JOIN_MAX_SUBGROUPS SPINDLE_MAX_SUBGROUPS
/* Longest reason text in a refusal or a dropped join, NUL included. */
#define VIEW_WHY_MAX 160
/* Longest group name, NUL included. */
#define VIEW_NAME_MAX 64
/* A joiner's state travels in chunks of at most this many bytes, two in
 * flight at most (docs/VIEWS.md, "State transfer"). */
#define VIEW_STATE_CHUNK (1u << 20)
/* JOIN_VIEW's state length of a state streamed by state_write, whose size
 * is not known before it ends. */
#define VIEW_STATE_STREAMED UINT64_MAX
/* Most skip entries: one per sender of every subgroup. */
#define VIEW_JOIN_MAX_SKIPS (SPINDLE_MAX_SUBGROUPS * SST_MAX_ROWS)
/* Largest skip count: an entry counts resends, a window or a few of them
 * (SPINDLE_MAX_WINDOW); a count beyond 32 bits is a lie. */
#define VIEW_JOIN_SKIP_MAX UINT32_MAX

#define VIEW_WIRE_ADDRESS_SIZE   (2u + (CTL_HOST_MAX - 1) + 2u)
#define VIEW_WIRE_IDENTITY_SIZE  (2u + (SPINDLE_MEMBER_NAME_MAX - 1) + 8u)
#define VIEW_WIRE_LAYOUT_SIZE    ((size_t)4 * (5u + 2u * SST_MAX_ROWS))
#define VIEW_WIRE_DESC_SIZE      (WIRE_HEADER_SIZE + SST_DESC_WIRE_SIZE + VIEW_WIRE_IDENTITY_SIZE)
#define VIEW_WIRE_READY_SIZE     (WIRE_HEADER_SIZE + 8u)
#define VIEW_WIRE_COMMIT_SIZE    (WIRE_HEADER_SIZE + 24u)
#define VIEW_WIRE_SUSPECT_SIZE   (WIRE_HEADER_SIZE + 16u)
#define VIEW_WIRE_JOIN_DESC_SIZE (WIRE_HEADER_SIZE + 20u + SST_DESC_WIRE_SIZE)
#define VIEW_WIRE_JOIN_ANNOUNCE_SIZE                                                               \
    (WIRE_HEADER_SIZE + 12u + VIEW_WIRE_ADDRESS_SIZE + VIEW_WIRE_IDENTITY_SIZE + SST_DESC_WIRE_SIZE)
#define VIEW_WIRE_JOIN_VIEW_SIZE                                                                   \
    (WIRE_HEADER_SIZE + 12u + (2u + VIEW_WHY_MAX - 1) + 16u + SST_MAX_ROWS * SST_DESC_WIRE_SIZE)
#define VIEW_WIRE_JOIN_SKIPS_SIZE(n) (WIRE_HEADER_SIZE + 12u + 16u * (size_t)(n))

/* A member's start-up message in the first view: its table and who it is. */
struct view_start_desc {
    struct sst_member_desc desc;
    struct spindle_member_identity identity;
};

/* A survivor's blob for the change to view_id. counts has num_subgroups *
 * SST_MAX_ROWS entries: per subgroup, received counts per sender. */
struct view_blob {
    uint64_t view_id;
    uint64_t suspected; /* rows of the previous view */
    uint32_t joiner;    /* member id of the joiner it admits, or VIEW_NO_JOINER */
    uint32_t num_subgroups;
    struct sst_member_desc desc; /* its table in the next view */
    uint64_t *counts;            /* caller's memory */
};

/* A survivor's commitment: it holds every blob of this set and will
 * install the view it describes (it never abandons it for a larger set). */
struct view_commit {
    uint64_t view_id;
    uint64_t suspected;
    uint32_t joiner;
};

/* A member that starts the change to view_id tells the others whom it
 * suspects (ranks of the view before), so that they join the change even
 * when they suspect nobody themselves. */
struct view_suspect {
    uint64_t view_id;
    uint64_t suspected; /* non-zero */
};

/* What a joiner's subgroup must share with the group's. */
struct view_join_subgroup {
    uint32_t window_size, max_payload, mode;
};

/* Flags of a join request: group-wide settings the joiner must share. */
#define VIEW_JOIN_TIE_BREAKER 1u
/* The joiner logs (docs/LOGS.md "Restart of one member"): it sends where
 * its log ends (struct view_join_log_ends) and is to be sent what its log
 * lacks instead of the application's state. */
#define VIEW_JOIN_CATCHUP 2u
/* The joiner follows a group restarted from its logs (docs/LOGS.md "Total
 * restart"): the request ends with the member id its log holds
 * (restart_id), which it is given back or refused, never another. */
#define VIEW_JOIN_RESTART 4u

struct view_join_request {
    struct ctl_address address; /* where the joiner listens */
    struct spindle_member_identity identity;
    uint32_t flags;         /* VIEW_JOIN_* */
    uint32_t num_subgroups; /* <= VIEW_JOIN_MAX_SUBGROUPS */
    struct view_join_subgroup subgroups[VIEW_JOIN_MAX_SUBGROUPS];
    uint32_t restart_id; /* VIEW_JOIN_RESTART: < SPINDLE_MAX_MEMBERS; else 0 */
};

enum view_offer_kind { VIEW_OFFER_ADMIT = 0, VIEW_OFFER_REDIRECT = 1, VIEW_OFFER_REFUSE = 2 };

/* The answer to a join request. ADMIT fills everything from group_name on;
 * layouts has num_subgroups entries (caller's memory of
 * VIEW_JOIN_MAX_SUBGROUPS entries on decode). */
struct view_join_offer {
    uint32_t kind;
    int32_t error;               /* REFUSE: SPINDLE_E* code (SPINDLE_EAGAIN: ask again) */
    char why[VIEW_WHY_MAX];      /* REFUSE */
    struct ctl_address redirect; /* REDIRECT: the leader */
    char group_name[VIEW_NAME_MAX];
    uint32_t id, num_initial, num_rows, my_row, num_subgroups;
    uint64_t view_id;
    uint64_t admission; /* non-zero; the joiner's hellos carry it */
    uint32_t member_ids[SST_MAX_ROWS];
    struct ctl_address addresses[SST_MAX_ROWS];              /* by row */
    struct spindle_member_identity identities[SST_MAX_ROWS]; /* by row */
    struct smc_layout *layouts;
};

struct view_join_desc {
    uint64_t view_id;
    uint32_t id;
    uint64_t admission; /* the offer's */
    struct sst_member_desc desc;
};

struct view_join_announce {
    uint64_t view_id;
    uint32_t id;
    struct ctl_address address;
    struct spindle_member_identity identity;
    struct sst_member_desc desc;
};

/* The joiner's view (descriptors of every row), the size of the state and
 * the number of skip entries that follow it, or why the join was dropped. */
struct view_join_view {
    uint64_t view_id;
    int32_t error; /* 0, or why the join was dropped (SPINDLE_EAGAIN: try again) */
    char why[VIEW_WHY_MAX];
    uint64_t state_length; /* bytes, 0: none, VIEW_STATE_STREAMED: not known */
    uint32_t num_skips;    /* <= VIEW_JOIN_MAX_SKIPS */
    uint32_t num_rows;
    struct sst_member_desc descs[SST_MAX_ROWS];
};

/*
 * Unordered subgroups: sender `sender` (its rank among the subgroup's
 * senders in the joiner's view) resends, at the start of that view, `count`
 * messages the leader delivered before it, so they are in the state: the
 * joiner takes them without delivering them (smc_group_skip). Entries come
 * in increasing (subgroup, sender) order, counts of at least one.
 */
struct view_join_skip {
    uint32_t subgroup;
    uint32_t sender;
    uint64_t count;
};
struct view_join_skips {
    uint64_t view_id;
    uint32_t num_skips;
    struct view_join_skip skips[VIEW_JOIN_MAX_SKIPS];
};

/* A chunk of a joiner's state: bytes [offset, offset + length) of it, the
 * last one with last set; error < 0 (and no bytes) when the leader's
 * state_write failed part way: the stream ends there. data points into the
 * decoded bytes. */
struct view_join_chunk {
    uint64_t view_id;
    uint64_t offset;
    uint32_t length; /* <= VIEW_STATE_CHUNK */
    bool last;
    int32_t error;
    const uint8_t *data;
};
#define VIEW_WIRE_JOIN_CHUNK_HEADER_SIZE (WIRE_HEADER_SIZE + 28u)
#define VIEW_WIRE_JOIN_CHUNK_MAX_SIZE    (VIEW_WIRE_JOIN_CHUNK_HEADER_SIZE + VIEW_STATE_CHUNK)

/* The joiner has taken (loaded) the state up to taken bytes, or refused it
 * (error < 0: its state_read failed). */
struct view_join_state_ack {
    uint64_t view_id;
    uint64_t taken;
    int32_t error;
};
#define VIEW_WIRE_JOIN_STATE_ACK_SIZE (WIRE_HEADER_SIZE + 24u)

/* Where a logged joiner's log ends (docs/LOGS.md "Restart of one
 * member"), per logged subgroup: it holds every message of the subgroup
 * before (view_id, seq) (a count, like a persistence frontier: one past
 * the last message's seq), through its log or a snapshot, and the record
 * of every view before next_view that it needs. A fresh joiner's are all
 * zero. Sent to the leader for join_view, the view it joins. */
struct view_join_log_end {
    uint32_t subgroup; /* < SPINDLE_MAX_SUBGROUPS, increasing */
    uint64_t view_id;
    uint64_t seq;
};
struct view_join_log_ends {
    uint64_t join_view;
    uint64_t next_view; /* <= join_view */
    uint32_t count;     /* <= SPINDLE_MAX_SUBGROUPS */
    struct view_join_log_end ends[SPINDLE_MAX_SUBGROUPS];
};
#define VIEW_WIRE_JOIN_LOG_ENDS_SIZE(count) (WIRE_HEADER_SIZE + 24u + 24u * (count))

/*
 * Total restart (docs/LOGS.md "Total restart"): what a restarting member
 * says of itself in each query it sends another and in each answer, over
 * the join port (ctl_join_ask). Before the group is running: its log's
 * latest view and that view's members, how many messages of that view its
 * log holds, its log's ends, and whom it votes for. A member of the
 * restarted group answers with VIEW_RESTART_RUNNING, the view the group
 * restarted from in latest_view and, with VIEW_RESTART_ENDS, the restart
 * leader's ends (the point the group recovered up to).
 */
#define VIEW_RESTART_RUNNING 1u
#define VIEW_RESTART_ENDS    2u
/* A logged subgroup the restart point's log holds nothing of, and the
 * member the restart leader found holding the most of it (its source),
 * with where the source's log of it ends (docs/LOGS.md "Total restart"). */
struct view_restart_source {
    uint32_t subgroup; /* < SPINDLE_MAX_SUBGROUPS, increasing */
    uint32_t id;       /* a member of the latest view */
    uint64_t view_id;  /* <= latest_view */
    uint64_t seq;
};
struct view_restart_status {
    uint32_t id;    /* its member id (< SPINDLE_MAX_MEMBERS) */
    uint32_t vote;  /* the member id it votes for */
    uint32_t flags; /* VIEW_RESTART_* */
    struct spindle_member_identity identity;
    uint64_t latest_view;
    uint64_t messages; /* its log's messages of latest_view */
    uint32_t num_members;
    uint32_t members[SPINDLE_MAX_MEMBERS]; /* latest_view's, distinct, < 64 */
    struct view_join_log_ends ends;        /* join_view: latest_view + 1 */
    /* A running status with VIEW_RESTART_ENDS only (else none): the
     * sources of the subgroups its ends hold nothing of. */
    uint32_t num_sources;
    struct view_restart_source sources[SPINDLE_MAX_SUBGROUPS];
};
/* The bytes of a status with `count` ends and `sources` sources, and a
 * buffer's size for any status of up to `count` ends. */
#define VIEW_WIRE_RESTART_BYTES(count, sources)                                                    \
    (WIRE_HEADER_SIZE + 16u + VIEW_WIRE_IDENTITY_SIZE + 16u + 4u * SPINDLE_MAX_MEMBERS + 8u +      \
     24u * (size_t)(sources) + 16u + 24u * (size_t)(count))
#define VIEW_WIRE_RESTART_SIZE(count) VIEW_WIRE_RESTART_BYTES(count, count)

/*
 * A restarting member's request to the source of a logged subgroup
 * (docs/LOGS.md "Total restart"): the records of the source's log it
 * lacks, up to the view the group restarted from (latest_view): the view
 * records from next_view on, and the messages of `subgroup` from (view_id,
 * seq) on. Answered by the slice of the catch-up stream (log/log_catchup.h)
 * that starts at `offset` (struct view_restart_slice) or a join offer that
 * refuses.
 */
struct view_restart_fetch {
    uint32_t asker;    /* < SPINDLE_MAX_MEMBERS */
    uint32_t subgroup; /* < SPINDLE_MAX_SUBGROUPS */
    uint64_t latest_view;
    uint64_t next_view; /* <= latest_view + 1 */
    uint64_t view_id;   /* <= latest_view */
    uint64_t seq;
    uint64_t offset; /* the stream's bytes the asker holds */
};
#define VIEW_WIRE_RESTART_FETCH_SIZE (WIRE_HEADER_SIZE + 48u)

/*
 * One slice of the catch-up stream a fetch is answered with: `length`
 * bytes at `offset` of a stream of `total` bytes whose CRC-32C is
 * `checksum` (the same in every slice of one stream: a stream the source
 * built again differently is told apart). The last slice ends the stream
 * (VIEW_RESTART_SLICE_LAST, set exactly when offset + length = total).
 * The bytes point into the decoded buffer.
 */
#define VIEW_RESTART_SLICE_LAST 1u
/* The most bytes one slice carries (well within one control frame), and
 * what a source sends unless a test sets less. */
#define VIEW_RESTART_SLICE_MAX     (32u << 20)
#define VIEW_RESTART_SLICE_DEFAULT (16u << 20)
struct view_restart_slice {
    uint64_t total;    /* >= 1 */
    uint64_t offset;   /* < total */
    uint32_t length;   /* 1 .. VIEW_RESTART_SLICE_MAX, offset + length <= total */
    uint32_t flags;    /* VIEW_RESTART_SLICE_LAST */
    uint32_t checksum; /* the whole stream's CRC-32C */
    const uint8_t *bytes;
};
#define VIEW_WIRE_RESTART_SLICE_HEADER_SIZE (WIRE_HEADER_SIZE + 32u)

/* The type of the wire message in buf (0 when too short for a header). */
uint16_t view_wire_type(const uint8_t *buf, size_t len);

/* Bytes of a blob of a group with num_subgroups subgroups. */
size_t view_wire_blob_size(uint32_t num_subgroups);

/*
 * Encoders write into buf (cap bytes) and return the message size, also
 * when it does not fit (then nothing usable was written: call again with a
 * buffer of that size). The fixed-size ones always return their _SIZE.
 */
size_t view_wire_encode_desc(const struct view_start_desc *desc, uint8_t *buf, size_t cap);
size_t view_wire_encode_ready(uint64_t view_id, uint8_t *buf, size_t cap);
size_t view_wire_encode_blob(const struct view_blob *blob, uint8_t *buf, size_t cap);
size_t view_wire_encode_commit(const struct view_commit *commit, uint8_t *buf, size_t cap);
size_t view_wire_encode_suspect(const struct view_suspect *suspect, uint8_t *buf, size_t cap);
size_t view_wire_encode_join_request(const struct view_join_request *request, uint8_t *buf,
                                     size_t cap);
size_t view_wire_encode_join_offer(const struct view_join_offer *offer, uint8_t *buf, size_t cap);
size_t view_wire_encode_join_desc(const struct view_join_desc *desc, uint8_t *buf, size_t cap);
size_t view_wire_encode_join_announce(const struct view_join_announce *announce, uint8_t *buf,
                                      size_t cap);
size_t view_wire_encode_join_view(const struct view_join_view *view, uint8_t *buf, size_t cap);
size_t view_wire_encode_join_skips(const struct view_join_skips *skips, uint8_t *buf, size_t cap);
size_t view_wire_encode_join_chunk(const struct view_join_chunk *chunk, uint8_t *buf, size_t cap);
size_t view_wire_encode_join_state_ack(const struct view_join_state_ack *ack, uint8_t *buf,
                                       size_t cap);
size_t view_wire_encode_join_log_ends(const struct view_join_log_ends *ends, uint8_t *buf,
                                      size_t cap);
size_t view_wire_encode_restart(const struct view_restart_status *status, uint8_t *buf, size_t cap);
size_t view_wire_encode_restart_fetch(const struct view_restart_fetch *fetch, uint8_t *buf,
                                      size_t cap);
/* The slice's bytes follow its header (VIEW_WIRE_RESTART_SLICE_HEADER_SIZE
 * + length in all). */
size_t view_wire_encode_restart_slice(const struct view_restart_slice *slice, uint8_t *buf,
                                      size_t cap);

/*
 * Decoders: 0 and *out, or SPINDLE_EPROTO naming what was wrong. The blob
 * decoder takes the group's subgroup count (out->counts must hold
 * num_subgroups * SST_MAX_ROWS entries); the offer decoder needs
 * out->layouts to hold VIEW_JOIN_MAX_SUBGROUPS entries.
 */
int view_wire_decode_desc(const uint8_t *buf, size_t len, struct view_start_desc *out);
int view_wire_decode_ready(const uint8_t *buf, size_t len, uint64_t *view_id);
int view_wire_decode_blob(const uint8_t *buf, size_t len, uint32_t num_subgroups,
                          struct view_blob *out);
int view_wire_decode_commit(const uint8_t *buf, size_t len, struct view_commit *out);
int view_wire_decode_suspect(const uint8_t *buf, size_t len, struct view_suspect *out);
int view_wire_decode_join_request(const uint8_t *buf, size_t len, struct view_join_request *out);
int view_wire_decode_join_offer(const uint8_t *buf, size_t len, struct view_join_offer *out);
int view_wire_decode_join_desc(const uint8_t *buf, size_t len, struct view_join_desc *out);
int view_wire_decode_join_announce(const uint8_t *buf, size_t len, struct view_join_announce *out);
int view_wire_decode_join_view(const uint8_t *buf, size_t len, struct view_join_view *out);
int view_wire_decode_join_skips(const uint8_t *buf, size_t len, struct view_join_skips *out);
int view_wire_decode_join_chunk(const uint8_t *buf, size_t len, struct view_join_chunk *out);
int view_wire_decode_join_state_ack(const uint8_t *buf, size_t len,
                                    struct view_join_state_ack *out);
/* Also refuses subgroups out of range or not increasing, and an end of a
 * view after join_view. */
int view_wire_decode_join_log_ends(const uint8_t *buf, size_t len, struct view_join_log_ends *out);
/* Also refuses a vote or id of 64 or more, unknown flags, a member list
 * that is empty, repeats an id or has non-zero unused entries, sources
 * without VIEW_RESTART_RUNNING and VIEW_RESTART_ENDS, out of subgroup
 * order, of a member not in the list or of a point after the latest view,
 * and ends as the log ends' decoder does (join_view is latest_view + 1). */
int view_wire_decode_restart(const uint8_t *buf, size_t len, struct view_restart_status *out);
/* Also refuses an asker of 64 or more, a subgroup of SPINDLE_MAX_SUBGROUPS
 * or more, a latest view with none after it, a next view after latest + 1
 * and a point after the latest view. */
int view_wire_decode_restart_fetch(const uint8_t *buf, size_t len, struct view_restart_fetch *out);
/* Also refuses a total of 0, an offset not below the total, a length of 0
 * or above VIEW_RESTART_SLICE_MAX or past the total, unknown flags, a last
 * flag that does not match the slice's end, non-zero reserved bytes and a
 * byte count other than length. What one slice says against the slices
 * before it is the asker's to check (view_restart_slices_take). */
int view_wire_decode_restart_slice(const uint8_t *buf, size_t len, struct view_restart_slice *out);

#endif
