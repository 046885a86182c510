/*
 * Private to the TCP control channel, shared by its three parts:
 *   ctl_tcp_mesh.c     listening, dialing, the two-way hello and set-up of
 *                      one connection per pair of members; close
 *   ctl_tcp_mailbox.c  framed blobs: outgoing queues, incoming mailboxes
 *                      (the latest blob of each tag per member), publish,
 *                      collect, allgather
 *   ctl_tcp_accept.c   the kept listener after set-up: connections not yet
 *                      identified, advanced without blocking by each round
 *                      of progress (handshake, hello, join request), capped
 *                      in number, per source and in time
 *   ctl_tcp_join.c     what an identified late connection becomes: a join
 *                      request, or a joiner connecting to its slot
 *
 * Locking: `lock` guards peers, members, the pending connections and the
 * pending join; every
 * function below whose comment says "lock held" expects it. Set-up
 * (ctl_tcp_setup) runs before the channel is shared, without the lock.
 *
 * Invariants: peers[j].fd is -1 for self, for slots never connected and
 * once a connection is dropped (error and why then say what happened). A
 * slot that was used is connected again only by a later holder of its id,
 * one whose hello names a larger admission (control/ctl_wire.h): that
 * connection replaces the slot's, mailbox and queue included.
 */
#ifndef SP_CONTROL_CTL_TCP_IMPL_H
#define SP_CONTROL_CTL_TCP_IMPL_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/ctl_auth.h"
#include "control/ctl_impl.h"
#include "control/ctl_wire.h"

/* How long an accepted connection may take to identify itself (and, for
 * a join request, to send it). */
#define CTL_HELLO_MS 1000
/*
 * Connections accepted after set-up that have not yet identified
 * themselves (ctl_tcp_accept.c): at most CTL_PENDING_MAX in all and
 * CTL_PENDING_PER_SOURCE from one source (an IPv4 address, or an IPv6
 * /64, what one host usually holds); a connection beyond the per-source
 * cap is closed as soon as it is accepted, and one beyond the total takes
 * the place of the oldest connection of the source holding the most.
 * Legitimately few are pending at once: one join request at a time is
 * kept (others are refused), and each admitted joiner connects to a
 * member once, within milliseconds. 32 leaves room for a burst of joiners
 * (a rack restarting) while it bounds what strangers can make a member
 * hold: 32 sockets in its poll set and 32 x (struct ctl_pending + a join
 * request of CTL_JOIN_REQUEST_MAX) ~ 300 KiB.
 * 8 per source lets several processes on one host (a whole group on one
 * machine, as in tests and benchmarks) join together, each with its
 * request, its slot connection and a retry, yet one hostile address holds
 * at most a quarter of the table; a joiner's connection is given a place
 * whatever strangers hold, and each slot is given back within
 * CTL_HELLO_MS.
 */
#define CTL_PENDING_MAX        32
#define CTL_PENDING_PER_SOURCE 8
/* Refusals of late connections are logged at most this many per second
 * (the rest are counted and summed up in the next line), so that a flood
 * of connections cannot flood the log. */
#define CTL_REFUSAL_LOG_PER_S 8
/* What a member queues for one peer that does not read: two largest blobs
 * (sealed, with their frame headers); beyond it the peer is dropped. */
#define CTL_PEER_OUT_MAX                                                                           \
    ((size_t)2 * CTL_BLOB_MAX + (size_t)4 * (CTL_SEAL_HEADER + CTL_SEAL_TAG) +                     \
     (size_t)2 * CTL_FRAME_SIZE)
/* Blobs kept per member: the latest one of each tag, at most this many
 * tags (the oldest is dropped first). */
#define CTL_BOX_TAGS 64

/* The latest blob of one tag from one member. */
struct ctl_msg {
    uint32_t tag, length;
    uint8_t *data;
};

/* One member's connection: what is queued for it, the frame being read,
 * and its mailbox. */
struct ctl_peer {
    int fd;
    struct ctl_sess sess; /* the connection's protection (pass-through: no key) */
    bool used;            /* a connection was set up in this slot */
    uint64_t admission;   /* the slot's holder's (its hello's); a late hello
                             must name a larger one */
    uint8_t *out;
    size_t out_len, out_sent, out_cap;
    uint8_t hdr_bytes[CTL_FRAME_SIZE];
    struct ctl_frame hdr; /* decoded once all its bytes are in */
    size_t got;
    uint8_t *body;
    struct ctl_msg box[CTL_BOX_TAGS];
    uint32_t box_len;
    int error;
    char why[160];
};

/* Where a pending connection is: the keyed handshake (control/ctl_auth.h),
 * the hello both ways, then for a join request its one frame. */
enum ctl_stage {
    CTL_AT_NONCE,     /* reading the dialer's nonce */
    CTL_AT_NONCE_OUT, /* sending ours */
    CTL_AT_PROOF,     /* reading the dialer's proof of the key */
    CTL_AT_PROOF_OUT, /* sending ours */
    CTL_AT_HELLO,     /* reading its hello */
    CTL_AT_HELLO_OUT, /* sending ours */
    CTL_AT_HEADER,    /* reading the join request's frame header */
    CTL_AT_BODY,      /* reading the join request */
};

/* A connection accepted on the kept listener, not yet identified. Its
 * buffers are fixed but for the join request (CTL_JOIN_REQUEST_MAX at
 * most), and its session takes no record larger than either. */
struct ctl_pending {
    int fd; /* -1: a free entry */
    enum ctl_stage stage;
    uint64_t deadline;  /* CLOCK_MONOTONIC ns: accepted + CTL_HELLO_MS */
    uint8_t source[16]; /* what CTL_PENDING_PER_SOURCE counts */
    char name[64];      /* its address, for the log */
    struct ctl_sess sess;
    uint8_t nonce_d[CTL_NONCE_BYTES], nonce_a[CTL_NONCE_BYTES];
    /* The bytes of the current stage: to read, or (sealed) to send. */
    uint8_t buf[CTL_HELLO_SIZE + CTL_SEAL_HEADER + CTL_SEAL_TAG];
    size_t want, done;
    uint8_t hello_bytes[CTL_HELLO_SIZE];
    struct ctl_hello hello;
    struct ctl_frame frame;
    uint8_t *body; /* the join request */
};

struct ctl_tcp {
    struct ctl base;
    uint32_t num_members, self; /* num_members: the initial members */
    uint32_t group;             /* ctl_group_hash of the group name, checked in every hello */
    uint64_t admission;         /* this member's, in its hellos (0: an initial member) */
    bool joiner;                /* dials every member; accepts nobody during set-up */
    bool setup;                 /* accepting the initial members (ctl_accept_all): pending
                                   connections are judged and taken as such */
    struct ctl_versions versions;
    struct ctl_keyring keys; /* count 0: no key */
    int *fds;                /* per slot during set-up; -1 for self */
    struct ctl_peer *peers;  /* [CTL_MAX_MEMBERS] */
    struct ctl_member *members;
    int listen_fd;                      /* kept open after set-up for joiners; -1 when closed */
    struct ctl_pending *pending;        /* [CTL_PENDING_MAX] */
    uint64_t log_second;                /* refusal log budget: the current second, */
    uint32_t log_lines, log_suppressed; /* lines logged in it, lines not */
    int join_fd;                        /* a pending join request's connection, or -1 */
    struct ctl_sess join_sess;
    uint8_t *join; /* its request frame's payload */
    size_t join_len;
    pthread_mutex_t lock;
};

/* ---- ctl_tcp_mesh.c -------------------------------------------------- */

/* Milliseconds left until deadline (CLOCK_MONOTONIC ns), rounded up; 0
 * once it passed (never fails). */
int ctl_remaining_ms(uint64_t deadline);
/* Sends or receives exactly len bytes before the deadline on a blocking
 * socket. SPINDLE_ETIMEDOUT, or SPINDLE_EUNREACH when the peer closed. */
int ctl_io(int fd, void *buf, size_t len, int sending, uint64_t deadline);
/* This member's hello for `from`. */
struct ctl_hello ctl_tcp_hello(const struct ctl_tcp *ctl, uint32_t from);
/* Why a connection accepted during set-up is refused (NULL: taken): it
 * must name a higher initial member not yet connected, of this group,
 * build and size. */
const char *ctl_setup_refusal(const struct ctl_tcp *ctl, const struct ctl_hello *hello, char *why,
                              size_t cap);
/* Takes an identified set-up connection over from pending entry p into
 * fds[] and its slot's session (p is left free); NULL. */
const char *ctl_setup_take(struct ctl_tcp *ctl, struct ctl_pending *p);
/*
 * Connects to host:port, authenticates with keys (when any), sends hello
 * and reads the answering hello, retrying while nothing listens there yet.
 * *fd_out, *sess and the peer's hello on success; SPINDLE_EUNREACH naming
 * `who` (unreachable, dropped during the handshake), SPINDLE_EAUTH when
 * its proof of the key is wrong, or SPINDLE_EPROTO naming both versions
 * when the peer runs an incompatible build.
 */
int ctl_dial(const char *who, const char *host, uint16_t port, const struct ctl_hello *hello,
             const struct ctl_versions *versions, const struct ctl_keyring *keys, uint64_t deadline,
             int *fd_out, struct ctl_hello *answer, struct ctl_sess *sess);
/* Sets TCP_NODELAY (and O_NONBLOCK when nonblock) on a connection. */
void ctl_tune(int fd, bool nonblock);

/* ---- ctl_tcp_mailbox.c ----------------------------------------------- */

/* Drops member j's connection, remembering why. Lock held. */
void ctl_drop(struct ctl_tcp *ctl, uint32_t j, int error, const char *why);
/* Empties slot j for a new holder of its id: closes its connection and
 * frees its queue, partial frame and mailbox (used and admission are
 * cleared too: the caller sets them). Lock held. */
void ctl_reset_slot(struct ctl_tcp *ctl, uint32_t j);
/* Writes queued bytes to member j without blocking. Lock held. */
void ctl_write(struct ctl_tcp *ctl, uint32_t j);
/* Progress on every connection, the listener and the pending connections:
 * waits up to ms for any, and goes on up to ms while connections are
 * pending (until a member's connection has news or a join request is
 * in). Never waits past ms. Lock held. */
void ctl_progress(struct ctl_tcp *ctl, int ms);
/*
 * Reads one frame (payload at most max bytes) through sess from a fresh
 * blocking connection before the deadline; *out is malloc'ed.
 * SPINDLE_EPROTO (or SPINDLE_ENOMEM) with *why saying what was wrong.
 */
int ctl_read_frame(int fd, struct ctl_sess *sess, uint32_t max, uint64_t deadline, uint8_t **out,
                   size_t *length, const char **why);
/* Writes one frame (tag 0) through sess on a blocking connection before
 * the deadline. 0, SPINDLE_ETIMEDOUT, SPINDLE_EUNREACH or SPINDLE_ENOMEM. */
int ctl_write_frame(int fd, struct ctl_sess *sess, uint32_t from, const void *blob, size_t length,
                    uint64_t deadline);
/* The TCP variant's exchange entries, with the contracts and failure
 * values of ctl_allgather, ctl_publish, ctl_collect and ctl_collect_one
 * (control/ctl.h). */
int ctl_tcp_allgather(struct ctl *base, uint32_t tag, const void *mine, size_t length, void *all,
                      int timeout_ms);
int ctl_tcp_publish(struct ctl *base, uint32_t tag, const void *blob, size_t length, uint64_t to);
int ctl_tcp_collect(struct ctl *base, uint32_t tag, uint64_t from, void *all, size_t length,
                    int timeout_ms, uint64_t *have);
int ctl_tcp_collect_one(struct ctl *base, uint32_t tag, uint32_t from, void *out, size_t length,
                        int timeout_ms);
int ctl_tcp_take_one(struct ctl *base, uint32_t tag, uint32_t from, void *out, size_t capacity,
                     size_t *length, int timeout_ms);

/* ---- ctl_tcp_accept.c ------------------------------------------------ */

/* Marks every pending entry free (at open). */
void ctl_pending_init(struct ctl_tcp *ctl);
/* Closes every pending connection (at close). Lock held or not shared. */
void ctl_pending_close_all(struct ctl_tcp *ctl);
/* Whether any connection is pending. Lock held. */
bool ctl_pending_any(const struct ctl_tcp *ctl);
/* Adds the listener and the pending connections to pfds (at most
 * 1 + CTL_PENDING_MAX entries); returns how many were added and lowers
 * *ms to the nearest pending deadline. Lock held. */
uint32_t ctl_pending_poll_set(struct ctl_tcp *ctl, struct pollfd *pfds, int *ms);
/* After poll: accepts what waits on the listener (closing at once what
 * the caps refuse), advances each pending connection without blocking,
 * and closes those past their deadline; pfds as ctl_pending_poll_set
 * filled them. Never blocks. Lock held. */
void ctl_pending_progress(struct ctl_tcp *ctl, const struct pollfd *pfds, uint32_t count);
/* Logs why a late connection was refused, at most CTL_REFUSAL_LOG_PER_S
 * lines a second. Lock held. */
void ctl_log_refusal(struct ctl_tcp *ctl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- ctl_tcp_join.c -------------------------------------------------- */

/* Why a late connection's hello is refused (NULL: taken). Lock held. */
const char *ctl_late_refusal(const struct ctl_tcp *ctl, const struct ctl_hello *hello, char *why,
                             size_t cap);
/* Takes an identified late connection over from pending entry p: a join
 * request (kept pending for the membership layer) or a joiner connecting
 * to its slot. p's fd, session and request pass to the channel (p is
 * left free); 0, or a reason to refuse it (p untouched). Lock held. */
const char *ctl_late_take(struct ctl_tcp *ctl, struct ctl_pending *p);
/* The TCP variant's join entries, with the contracts and failure values
 * of ctl_join_poll, ctl_join_answer and ctl_add_member (control/ctl.h). */
int ctl_tcp_join_poll(struct ctl *base, int timeout_ms, void *request, size_t capacity,
                      size_t *length);
int ctl_tcp_join_answer(struct ctl *base, const void *reply, size_t length);
void ctl_tcp_add_member(struct ctl *base, uint32_t id, const char *host, uint16_t port);
void ctl_tcp_remove_member(struct ctl *base, uint32_t id);
void ctl_tcp_expect_member(struct ctl *base, uint32_t id, uint64_t admission);

#endif
