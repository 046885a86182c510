/*
 * Point-to-point messages between the members of a group (docs/P2P.md).
 *
 * Every ordered pair of members (sender, target) has a ring of
 * options.p2p_window slots in the target's memory, written by the sender
 * with one-sided writes over the group's own transport, as the multicast
 * rings are; the target's predicate thread takes what arrived and hands
 * each message to options.p2p_deliver. Messages of one pair are delivered
 * in the order they were sent, each once; nothing orders messages of
 * different pairs, or point-to-point messages against multicast ones.
 *
 * A message holds at most SPINDLE_P2P_MAX_PAYLOAD bytes. A query
 * (spindle_p2p_query) is a message that waits for one answer, which the
 * target gives with spindle_p2p_reply, from inside its p2p_deliver upcall
 * or later, from any thread.
 *
 * Views: rings belong to a view. A message the target has not taken when
 * the view changes is dropped (the sender learnt nothing more than that
 * spindle_p2p_send accepted it), and a query whose reply has not come
 * fails with SPINDLE_EPEERFAILED naming the view change; a reply is taken
 * only in the view its query was sent in. A target that fails makes sends
 * to it and queries waiting on it fail with SPINDLE_EPEERFAILED once it is
 * found failed: within options.failure_timeout_ms.
 *
 * Upcalls: p2p_deliver runs where deliver does (include/spindle/group.h,
 * "Upcalls"): on the predicate thread with the multicast's lock held, or,
 * in dispatch mode, queued with the multicast's deliveries and run by
 * spindle_dispatch. Inside any upcall of the group, spindle_p2p_send and
 * spindle_p2p_reply never wait: SPINDLE_EAGAIN when the ring to the target
 * is full; spindle_p2p_query refuses (SPINDLE_EINVAL: it would wait for
 * the thread it runs on).
 */
#ifndef SPINDLE_P2P_H
#define SPINDLE_P2P_H

#include <stddef.h>
#include <stdint.h>

#include <spindle/error.h>
#include <spindle/export.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spindle_group spindle_group_t;

/* Largest payload of one point-to-point message, query or reply (bytes). */
#define SPINDLE_P2P_MAX_PAYLOAD 4096u
/* Slots of one pair's ring when options.p2p_window is 0. */
#define SPINDLE_P2P_DEFAULT_WINDOW 16u
/* Largest options.p2p_window. */
#define SPINDLE_P2P_MAX_WINDOW 1024u

/* Flags of spindle_p2p_send and spindle_p2p_reply. */
#define SPINDLE_P2P_NONBLOCK 1u /* SPINDLE_EAGAIN instead of waiting for a free slot */

/* One delivered point-to-point message. */
struct spindle_p2p_message {
    uint32_t sender_id; /* the sender's member id */
    uint64_t view_id;   /* the view it was sent and delivered in */
    /* Non-zero: a query, which expects one spindle_p2p_reply. 0: a
     * one-way message (spindle_p2p_send). */
    uint64_t query_id;
    const void *data; /* valid until the upcall returns */
    uint32_t length;
};

/* Point-to-point delivery upcall (options.p2p_deliver): one message. */
typedef void (*spindle_p2p_deliver_fn)(void *ctx, const struct spindle_p2p_message *message);

/*
 * Sends length bytes (at most SPINDLE_P2P_MAX_PAYLOAD) to member target.
 * Returns once the message is in the ring to target (it is on its way;
 * delivered in order with this member's other messages to target).
 * Waits while that ring is full, unless flags has SPINDLE_P2P_NONBLOCK or
 * the call is made inside an upcall of the group: then SPINDLE_EAGAIN.
 * Errors: SPINDLE_EINVAL (NULL group, data NULL with length > 0, target is
 * this member, unknown flags), SPINDLE_EMSGSIZE (length above
 * SPINDLE_P2P_MAX_PAYLOAD; both named), SPINDLE_ENOENT (target is not in
 * the current view), SPINDLE_EPEERFAILED (target failed), SPINDLE_EPROTO
 * (target uses another p2p_window), SPINDLE_EAGAIN, SPINDLE_ESHUTDOWN, or
 * the group's failure (spindle_group_status). A view change under way is
 * waited for (outside upcalls) and the send goes to the new view.
 */
SPINDLE_API int spindle_p2p_send(spindle_group_t *group, uint32_t target, const void *data,
                                 size_t length, unsigned flags);

/*
 * Sends a query of length bytes to target and waits for its reply: copies
 * at most reply_capacity bytes of it into reply and stores its length in
 * *reply_length. timeout_ms < 0: no limit. Errors: those of
 * spindle_p2p_send (never SPINDLE_EAGAIN: it waits for room), and
 * SPINDLE_ETIMEDOUT (no reply within timeout_ms), SPINDLE_EPEERFAILED
 * (target failed, or the view changed before its reply came),
 * SPINDLE_EMSGSIZE (the reply is longer than reply_capacity: its first
 * reply_capacity bytes are copied and *reply_length says how long it
 * was), SPINDLE_EINVAL (called inside an upcall of the group; reply NULL
 * with reply_capacity > 0; reply_length NULL). Any application thread;
 * several may wait at once (at most 64 queries per group).
 */
SPINDLE_API int spindle_p2p_query(spindle_group_t *group, uint32_t target, const void *request,
                                  size_t length, void *reply, size_t reply_capacity,
                                  size_t *reply_length, int timeout_ms);

/*
 * Answers query (a message given to p2p_deliver whose query_id is not 0)
 * with length bytes: inside the upcall, or later from any thread (copy
 * the message's sender_id, view_id and query_id; data is not used).
 * Flags and errors as spindle_p2p_send, and SPINDLE_EINVAL when query is
 * NULL or a one-way message, SPINDLE_EPEERFAILED when the view changed
 * since the query came (the querier was told it failed).
 */
SPINDLE_API int spindle_p2p_reply(spindle_group_t *group, const struct spindle_p2p_message *query,
                                  const void *data, size_t length, unsigned flags);

#ifdef __cplusplus
}
#endif

#endif
