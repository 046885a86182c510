/*
 * The thread inside an upcall (include/spindle/group.h, "Upcalls"). The
 * default mode's deliver upcall runs on the predicate thread with the
 * engine lock held, and its view upcall on the membership thread; a call
 * from inside either that waited for the window, a view change or a flush
 * would wait for the very thread it runs on. Each upcall therefore marks
 * its thread, and the public calls look for the mark: a reserve does not
 * wait, a commit does not take the lock again, and the calls that must
 * wait refuse.
 */
#include "group/group_impl.h"
#include "util/error.h"
#include "util/log.h"

/* Upcalls of different groups may nest (an upcall that calls into
 * another group, whose upcall runs on the same thread in dispatch mode). */
static _Thread_local struct group_upcall *innermost;

const struct group_upcall *group_upcall_of(const spindle_group_t *group)
{
    for (const struct group_upcall *u = innermost; u != NULL; u = u->outer)
        if (u->group == group)
            return u;
    return NULL;
}

void group_upcall_enter(struct group_upcall *u)
{
    u->outer = innermost;
    innermost = u;
}

void group_upcall_leave(struct group_upcall *u)
{
    innermost = u->outer;
}

int group_upcall_refuse(const spindle_group_t *group, const char *call)
{
    const struct group_upcall *u = group_upcall_of(group);
    if (u == NULL)
        return 0;
    return sp_error(SPINDLE_EINVAL,
                    "%s called from inside an upcall of the group: it would wait for %s, the "
                    "thread it runs on; call it from another thread or after the upcall returns",
                    call,
                    u->engine_locked ? "the predicate thread"
                    : u->lockless    ? "the membership thread"
                                     : "the dispatching thread");
}

void group_upcall_deliver(void *ctx, const struct spindle_message *messages, size_t count)
{
    spindle_group_t *group = ctx;
    struct group_upcall u = {.group = group, .engine_locked = true, .lockless = true};
    group_upcall_enter(&u);
    group->options.deliver(group->options.deliver_ctx, messages, count);
    group_upcall_leave(&u);
    group_drop_reservations(group);
}

void group_upcall_view(void *ctx, const struct spindle_view_info *view)
{
    spindle_group_t *group = ctx;
    struct group_upcall u = {.group = group, .engine_locked = false, .lockless = true};
    group_upcall_enter(&u);
    group->options.view_changed(group->options.view_ctx, view);
    group_upcall_leave(&u);
    group_drop_reservations(group);
}

void group_upcall_send_ready(void *ctx, uint32_t subgroup)
{
    spindle_group_t *group = ctx;
    struct group_upcall u = {.group = group, .engine_locked = true, .lockless = true};
    group_upcall_enter(&u);
    group->options.send_ready(group->options.send_ready_ctx, subgroup);
    group_upcall_leave(&u);
    group_drop_reservations(group);
}

void group_upcall_send_ready_after_change(spindle_group_t *group, uint32_t subgroup)
{
    struct group_upcall u = {.group = group, .engine_locked = false, .lockless = true};
    group_upcall_enter(&u);
    group->options.send_ready(group->options.send_ready_ctx, subgroup);
    group_upcall_leave(&u);
    group_drop_reservations(group);
}

int group_upcall_p2p(void *ctx, const struct spindle_p2p_message *message)
{
    spindle_group_t *group = ctx;
    struct group_upcall u = {.group = group, .engine_locked = true, .lockless = true};
    group_upcall_enter(&u);
    group->options.p2p_deliver(group->options.p2p_ctx, message);
    group_upcall_leave(&u);
    group_drop_reservations(group);
    return 0;
}
