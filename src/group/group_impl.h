/*
 * Private to src/group: the state behind spindle_group_t. The handle owns
 * its options, the parsed bootstrap and one membership (src/view), which
 * owns everything else (engine, control channel, views, multicast).
 *
 * Threads: the public calls may run on several application threads; what
 * they share lives in the membership and is locked there. shut_down is
 * set by shutdown/leave on the application thread that owns the handle.
 */
#ifndef SP_GROUP_GROUP_IMPL_H
#define SP_GROUP_GROUP_IMPL_H

#include <pthread.h>
#include <stdbool.h>

#include <spindle/group.h>

#include "group/group_bootstrap.h"
#include "view/membership.h"

struct group_dispatch;

struct spindle_group {
    struct spindle_group_options options;
    struct group_bootstrap boot;
    char group_name[64];
    struct ctl_keyring keys; /* from options.key_file; count 0: none */
    struct view_membership membership;
    /* shut_down: set by shutdown and leave, on the application's thread or
     * the administration endpoint's (end_lock serialises them). */
    pthread_mutex_t end_lock;
    bool shut_down;
    struct group_dispatch *dispatch; /* dispatch mode's queue; NULL: default mode */
    struct group_admin *admin;       /* the administration endpoint (group/admin.h); NULL: none */
    /* Subgroups, one bit each, where a non-blocking reserve outside an
     * upcall met a view change under way (SPINDLE_EAGAIN): send_ready is
     * owed to each once the change is done (group_send.c). Atomic. */
    uint64_t change_waiters[SPINDLE_MAX_SUBGROUPS / 64];
};

/* ---- group_upcall.c: the thread inside an upcall ------------------------
 *
 * Every upcall of a group (deliver, view_changed; in dispatch mode, each
 * one spindle_dispatch runs) marks its thread for its duration, so that
 * the public calls made from inside it neither wait for the thread they
 * run on nor take a lock it holds (include/spindle/group.h, "Upcalls").
 */
struct group_upcall {
    const spindle_group_t *group;
    /* The thread holds the engine lock (a default-mode deliver upcall):
     * a commit must not take it again. */
    bool engine_locked;
    /* The thread may not take the read side of smc_lock (a default-mode
     * upcall: the predicate thread, which a view change waits for under
     * the write side, or the membership thread, which takes it); the view
     * cannot be retired under it meanwhile, so none is needed. */
    bool lockless;
    struct group_upcall *outer; /* an upcall of another group around it */
};
/* The innermost upcall of group on this thread, or NULL. */
const struct group_upcall *group_upcall_of(const spindle_group_t *group);
/* Marks this thread as inside an upcall (u is filled by the caller and
 * lives until group_upcall_leave). */
void group_upcall_enter(struct group_upcall *u);
void group_upcall_leave(struct group_upcall *u);
/* SPINDLE_EINVAL naming call when this thread is inside an upcall of
 * group (the call would wait for this very thread), else 0. */
int group_upcall_refuse(const spindle_group_t *group, const char *call);
/* The default mode's deliver and view_changed upcalls (ctx: the group):
 * mark the thread and call the application's. */
void group_upcall_deliver(void *ctx, const struct spindle_message *messages, size_t count);
void group_upcall_view(void *ctx, const struct spindle_view_info *view);
void group_upcall_send_ready(void *ctx, uint32_t subgroup);
/* The default mode's send_ready owed after a view change, on the
 * membership thread (marked as its view upcall is). */
void group_upcall_send_ready_after_change(spindle_group_t *group, uint32_t subgroup);
/* view_config.change_done (ctx: the group): the send_ready upcalls owed to
 * subgroups whose non-blocking reserve met the change (group_send.c). */
void group_send_change_done(void *ctx);
/* view_config.p2p_deliver in the default mode: marks the thread and calls
 * options.p2p_deliver; 0. */
int group_upcall_p2p(void *ctx, const struct spindle_p2p_message *message);
/* Drops the reservations this thread left open on group (smc_cancel),
 * with a warning: made inside a default-mode upcall that returned. */
void group_drop_reservations(spindle_group_t *group);

/* ---- group_dispatch.c: dispatch mode ------------------------------------ */

/* Creates the queue of a group in dispatch mode (options.dispatch), for
 * subgroups whose largest max_payload is largest_payload. SPINDLE_EINVAL
 * naming a dispatch_queue_bytes below one such message, SPINDLE_EIO when
 * the eventfd cannot be made, SPINDLE_ENOMEM. */
int group_dispatch_create(const struct spindle_group_options *options, uint32_t largest_payload,
                          struct group_dispatch **out);
/* Nothing more will be queued (shutdown, leave): the fd becomes readable
 * and a blocked dispatcher returns once the queue is empty. */
void group_dispatch_close(struct group_dispatch *dispatch);
/* view_config.stopped in dispatch mode: the member stopped on its own
 * (removed, a minority); the descriptor becomes readable and a blocked
 * dispatcher returns once the queue is empty. Membership lock held: it
 * takes only the queue's. */
void group_dispatch_stopped(void *ctx);
/* Bytes queued now and at most so far (spindle_stats); 0 on NULL. */
void group_dispatch_stats(struct group_dispatch *dispatch, uint64_t *bytes, uint64_t *peak);
/* Frees what is still queued without running it and closes the fd. Safe
 * on NULL. */
void group_dispatch_destroy(struct group_dispatch *dispatch);
/* The membership's hooks (ctx: the group): view_config.deliver,
 * .view_changed, .queue_room and .queue_progress in dispatch mode. */
void group_dispatch_deliver(void *ctx, const struct spindle_message *messages, size_t count);
void group_dispatch_view(void *ctx, const struct spindle_view_info *view);
void group_dispatch_send_ready(void *ctx, uint32_t subgroup);
/* view_config.p2p_deliver in dispatch mode: queues a copy of the message
 * (0), or SPINDLE_EAGAIN when the queue has no room for it (it stays in
 * its ring until spindle_dispatch frees some). */
int group_dispatch_p2p(void *ctx, const struct spindle_p2p_message *message);
/* view_config.state_save in dispatch mode (membership thread): queues the
 * application's state_save behind every upcall queued so far and waits
 * for a dispatching thread to run it, at most failure_timeout_ms once it
 * is not running (then SPINDLE_ETIMEDOUT: the joiner is refused, and the
 * queued call is skipped). What state_save returns otherwise. */
int group_dispatch_state_save(void *ctx, void **data, size_t *length);
size_t group_dispatch_room(void *ctx);
uint64_t group_dispatch_progress(void *ctx);

/* Test hooks, set only by tests through this header (all members of a
 * group must be given the same). */
struct group_test_options {
    uint64_t smc_first_position; /* smc_options.first_position: streams start there */
    uint64_t log_queue_bytes;    /* the log appender's queue (0: its default) */
    uint64_t log_segment_bytes;  /* the log's segment size (0: its default) */
    uint32_t fetch_slice_bytes;  /* a restart fetch's slices (0: VIEW_RESTART_SLICE_DEFAULT) */
};

/* spindle_group_create with test hooks (test NULL: none, as the public
 * call). Returns what spindle_group_create returns. */
int group_create_with(const struct spindle_group_options *options,
                      const struct spindle_subgroup_config *subgroups, uint32_t num_subgroups,
                      const struct group_test_options *test, spindle_group_t **out);

/* 0 when a leave may start now, else why not (SPINDLE_ENOTSUP without
 * tolerate_failures, SPINDLE_ESHUTDOWN when the member left, shut down or
 * stopped). */
int group_can_leave(spindle_group_t *group);
/* spindle_group_leave, asked by someone other than the application: once
 * flushed, the member's status becomes SPINDLE_ESHUTDOWN with why
 * (spindle_group_status), so its later calls say why they fail. */
int group_leave_by(spindle_group_t *group, int timeout_ms, const char *why);

#endif
