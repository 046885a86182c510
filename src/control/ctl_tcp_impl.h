/*
 * Private to the TCP control channel, shared by its three parts:
 *   ctl_tcp_mesh.c     listening, dialing, the two-way hello and set-up of
 *                      one connection per pair of members; close
 *   ctl_tcp_mailbox.c  framed blobs: outgoing queues, incoming mailboxes
 *                      (the latest blob of each tag per member), publish,
 *                      collect, allgather
 *   ctl_tcp_join.c     the kept listener after set-up: join requests and
 *                      joiners connecting to their slot
 *
 * Locking: `lock` guards peers, members and the pending join; every
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

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "control/ctl_auth.h"
#include "control/ctl_impl.h"
#include "control/ctl_wire.h"

/* How long an accepted connection may take to identify itself. */
#define CTL_HELLO_MS 1000
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

struct ctl_tcp {
    struct ctl base;
    uint32_t num_members, self; /* num_members: the initial members */
    uint32_t group;             /* ctl_group_hash of the group name, checked in every hello */
    uint64_t admission;         /* this member's, in its hellos (0: an initial member) */
    bool joiner;                /* dials every member; accepts nobody during set-up */
    struct ctl_versions versions;
    struct ctl_keyring keys; /* count 0: no key */
    int *fds;                /* per slot during set-up; -1 for self */
    struct ctl_peer *peers;  /* [CTL_MAX_MEMBERS] */
    struct ctl_member *members;
    int listen_fd; /* kept open after set-up for joiners; -1 when closed */
    int join_fd;   /* a pending join request's connection, or -1 */
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
/*
 * An acceptor's side of the hello: with a key, first the handshake
 * (control/ctl_auth.h), nothing said to a peer that fails it; then reads
 * the peer's hello on fd before the deadline, answers with this member's
 * own (whatever the peer's says, so that a member of another build or
 * group can name the difference), then decodes the peer's. 0, *out and
 * *sess (the connection's protection, to clear when dropped);
 * SPINDLE_EAUTH when the peer failed authentication; SPINDLE_ETIMEDOUT when
 * no complete hello came in time; SPINDLE_EPROTO naming what is wrong
 * (another wire version: both versions).
 */
int ctl_accept_hello(const struct ctl_tcp *ctl, int fd, uint64_t deadline, struct ctl_hello *out,
                     struct ctl_sess *sess);
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
/* One round of progress on every connection and the listener: waits up to
 * ms for any. Lock held. */
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

/* ---- ctl_tcp_join.c -------------------------------------------------- */

/* Accepts one connection on the kept listener: a join request (kept
 * pending) or a joiner connecting to its slot; anything else is dropped
 * with a logged reason. Lock held. */
void ctl_accept_late(struct ctl_tcp *ctl);
/* The TCP variant's join entries, with the contracts and failure values
 * of ctl_join_poll, ctl_join_answer and ctl_add_member (control/ctl.h). */
int ctl_tcp_join_poll(struct ctl *base, int timeout_ms, void *request, size_t capacity,
                      size_t *length);
int ctl_tcp_join_answer(struct ctl *base, const void *reply, size_t length);
void ctl_tcp_add_member(struct ctl *base, uint32_t id, const char *host, uint16_t port);
void ctl_tcp_remove_member(struct ctl *base, uint32_t id);
void ctl_tcp_expect_member(struct ctl *base, uint32_t id, uint64_t admission);

#endif
