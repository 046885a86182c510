/*
 * Control-channel codec: the messages members exchange over TCP to join,
 * change views, report the ragged-edge trim, leave and transfer state.
 *
 * Frame (all integers little-endian):
 *   offset 0  u32 magic    WIRE_MAGIC ("SPVC")
 *          4  u16 version  WIRE_VERSION
 *          6  u16 type     enum wire_type
 *          8  u64 group    wire_group_hash(group name): frames of another
 *                          group sharing a port are refused
 *         16  u32 length   payload bytes that follow
 *         20  u32 reserved must be 0
 *         24  payload
 * A frame is at most WIRE_MAX_FRAME bytes. Strings and descriptors carry
 * their length; reserved fields and padding must be zero and booleans 0/1,
 * so every accepted frame re-encodes to the same bytes.
 *
 * Decoding is strict and never reads outside the given buffer: truncation,
 * trailing bytes, a wrong magic, version or group, an unknown type, counts
 * that disagree with the length or exceed the limits, and descriptors that
 * violate view invariants all fail with SPINDLE_EPROTO and an sp_error
 * message naming the field, its offset and its value. Counts are checked
 * against the bytes left before anything is allocated.
 *
 * Thread-safety: pure functions; a decoded wire_msg belongs to the caller
 * (release it with wire_msg_clear). A decoded state chunk points into the
 * frame buffer, which must outlive it.
 */
#ifndef SP_VIEW_WIRE_H
#define SP_VIEW_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "view/trim.h"
#include "view/view.h"

#define WIRE_MAGIC       0x43565053u /* "SPVC" in memory order */
#define WIRE_VERSION     1
#define WIRE_HEADER_SIZE 24
#define WIRE_MAX_FRAME   (1u << 20) /* header included */
#define WIRE_MAX_PAYLOAD (WIRE_MAX_FRAME - WIRE_HEADER_SIZE)

enum wire_type {
    WIRE_JOIN_REQUEST = 1,  /* joiner -> any member */
    WIRE_JOIN_REPLY = 2,    /* member -> joiner: accepted, or go to the leader */
    WIRE_VIEW_PROPOSAL = 3, /* leader -> members: the next view */
    WIRE_VIEW_ACK = 4,      /* member -> leader: proposal accepted */
    WIRE_VIEW_COMMIT = 5,   /* leader -> members: install the view */
    WIRE_TRIM_REPORT = 6,   /* leader -> members: ragged-edge trims */
    WIRE_LEAVE = 7,         /* member -> leader: graceful departure */
    WIRE_STATE_CHUNK = 8,   /* old member -> joiner: application state */
    WIRE_TYPE_MAX = 8
};

enum wire_join_status {
    WIRE_JOIN_ACCEPTED = 0, /* the leader will propose a view with the joiner */
    WIRE_JOIN_REDIRECT = 1, /* not the leader: ask leader_host:leader_port */
    WIRE_JOIN_REJECTED = 2, /* refused; error says why (e.g. id in use) */
};

struct wire_join_request {
    struct view_member member; /* joiner id, control host:port, transport address */
};

struct wire_join_reply {
    uint16_t status; /* enum wire_join_status */
    int32_t error;   /* REJECTED: a negative SPINDLE_E* code; otherwise 0 */
    uint64_t view_id;
    uint32_t leader_id;
    uint16_t leader_port;
    char leader_host[VIEW_HOST_MAX];
};

struct wire_view_proposal {
    uint32_t leader_id;
    uint64_t prev_view_id;
    struct view view; /* view.id == prev_view_id + 1; owns its shards */
};

/* VIEW_ACK and LEAVE. */
struct wire_member_event {
    uint64_t view_id;
    uint32_t member_id;
};

struct wire_view_commit {
    uint64_t view_id;
    uint32_t leader_id;
};

struct wire_trim_entry {
    uint32_t subgroup;
    uint32_t shard;
    uint32_t num_senders;
    uint64_t trim[TRIM_MAX_SENDERS]; /* per sender, in round-robin order */
};

struct wire_trim_report {
    uint64_t view_id; /* the view being ended */
    uint32_t leader_id;
    uint32_t num_entries;
    struct wire_trim_entry *entries; /* heap on decode; caller's on encode */
};

#define WIRE_CHUNK_LAST 1u

struct wire_state_chunk {
    uint64_t view_id;
    uint32_t subgroup;
    uint32_t shard;
    uint64_t offset; /* of this chunk in the whole state */
    uint64_t total;  /* size of the whole state */
    uint32_t length;
    uint32_t flags;      /* WIRE_CHUNK_LAST exactly when offset + length == total */
    const uint8_t *data; /* length bytes; on decode, inside the frame */
};

struct wire_msg {
    enum wire_type type;
    union {
        struct wire_join_request join_request;
        struct wire_join_reply join_reply;
        struct wire_view_proposal proposal;
        struct wire_member_event ack;
        struct wire_view_commit commit;
        struct wire_trim_report trim;
        struct wire_member_event leave;
        struct wire_state_chunk chunk;
    } u;
};

struct wire_header {
    uint16_t version;
    uint16_t type;
    uint64_t group_hash;
    uint32_t payload_length;
};

/* 64-bit FNV-1a of the group name. */
uint64_t wire_group_hash(const char *group_name);

/* Name of a message type ("join-request"...), "unknown" otherwise. */
const char *wire_type_name(unsigned type);

/*
 * Encodes msg as one frame into buf. *len receives the frame size, also
 * when it does not fit: SPINDLE_EMSGSIZE when cap is too small or the frame
 * would exceed WIRE_MAX_FRAME; SPINDLE_EINVAL when msg breaks the rules the
 * decoder enforces (so nothing undecodable is ever sent).
 */
int wire_encode(uint64_t group_hash, const struct wire_msg *msg, uint8_t *buf, size_t cap,
                size_t *len);

/*
 * Parses and checks a frame header (len >= WIRE_HEADER_SIZE bytes). Used on
 * a stream: read the header, check it, then read payload_length bytes.
 * SPINDLE_EPROTO on any violation.
 */
int wire_header_parse(const uint8_t *buf, size_t len, uint64_t group_hash, struct wire_header *out);

/*
 * Decodes exactly one whole frame of len bytes. On success out holds the
 * message (release with wire_msg_clear); on failure out needs no release.
 * SPINDLE_EPROTO for malformed input, SPINDLE_ENOMEM.
 */
int wire_decode(const uint8_t *buf, size_t len, uint64_t group_hash, struct wire_msg *out);

/* Frees what a decoded message owns and zeroes it. */
void wire_msg_clear(struct wire_msg *msg);

#endif
