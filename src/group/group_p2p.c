/*
 * Point-to-point messages of the public handle (include/spindle/p2p.h):
 * member ids become rows of the current view, and the calls reach that
 * view's rings (smc/smc_p2p.h) through the membership, as the send path
 * does (group_send.c): outside upcalls a view change is waited out and the
 * call goes to the new view; inside one nothing waits.
 */
#include <stdio.h>
#include <string.h>

#include "group/group_impl.h"
#include "smc/smc_impl.h"
#include "util/clock.h"
#include "util/error.h"

/* rc with the smc layer's message, which names a row, restated with the
 * member id the application knows. */
static int name_target(int rc, const char *call, uint32_t target)
{
    if (rc >= 0 || rc == SPINDLE_EAGAIN)
        return rc;
    char why[256];
    snprintf(why, sizeof why, "%s", spindle_errmsg());
    return sp_error(rc, "%s to member %u: %s", call, target, why);
}

static int check_target(spindle_group_t *group, uint32_t target, size_t length, const char *call)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "%s: group is NULL", call);
    if (length > SPINDLE_P2P_MAX_PAYLOAD)
        return sp_error(SPINDLE_EMSGSIZE, "%s: length %zu exceeds SPINDLE_P2P_MAX_PAYLOAD %u", call,
                        length, SPINDLE_P2P_MAX_PAYLOAD);
    if ((int64_t)target == (int64_t)spindle_group_self(group))
        return sp_error(SPINDLE_EINVAL, "%s: member %u is this member; send to another one", call,
                        target);
    return 0;
}

/* The row of target in the current view (lock or upcall held), or
 * SPINDLE_ENOENT naming it. */
static int row_of(spindle_group_t *group, uint32_t target, const char *call, uint32_t *row)
{
    int32_t found = view_row_of_member(&group->membership, target);
    if (found < 0)
        return sp_error(SPINDLE_ENOENT, "%s: member %u is not in the current view %llu", call,
                        target, (unsigned long long)view_current_id(&group->membership));
    *row = (uint32_t)found;
    return 0;
}

/* Sends header's message to target: the common path of send and reply.
 * only_view: a reply's view (UINT64_MAX: any). */
static int p2p_send(spindle_group_t *group, uint32_t target, struct smc_p2p_slot *header,
                    const void *data, unsigned flags, uint64_t only_view, const char *call)
{
    if (data == NULL && header->length > 0)
        return sp_error(SPINDLE_EINVAL, "%s: data is NULL with length %u", call, header->length);
    if ((flags & ~SPINDLE_P2P_NONBLOCK) != 0)
        return sp_error(SPINDLE_EINVAL, "%s: unknown flags %#x (only SPINDLE_P2P_NONBLOCK)", call,
                        flags);
    const struct group_upcall *u = group_upcall_of(group);
    bool nonblock = u != NULL || (flags & SPINDLE_P2P_NONBLOCK) != 0;
    for (;;) {
        bool lockless = u != NULL && u->lockless;
        struct smc_group *smc =
            lockless ? view_upcall_smc(&group->membership) : view_acquire(&group->membership);
        uint64_t view = view_current_id(&group->membership);
        uint32_t row = 0;
        int rc = smc == NULL ? sp_error(SPINDLE_ESHUTDOWN, "%s: the group has no view", call)
                             : row_of(group, target, call, &row);
        if (rc == 0 && only_view != UINT64_MAX && only_view != view)
            rc = sp_error(SPINDLE_EPEERFAILED,
                          "%s: the query came in view %llu and the view is now %llu; its "
                          "querier was told it failed",
                          call, (unsigned long long)only_view, (unsigned long long)view);
        if (rc == 0)
            rc = name_target(smc_p2p_send(smc, row, header, data, nonblock,
                                          u != NULL && u->engine_locked, UINT64_MAX),
                             call, target);
        if (!lockless)
            view_release(&group->membership);
        if (rc != SPINDLE_ESHUTDOWN && rc != SPINDLE_EPEERFAILED)
            return rc;
        bool changing = rc == SPINDLE_ESHUTDOWN && view_change_pending(&group->membership);
        if (u != NULL && changing)
            return sp_error(SPINDLE_EAGAIN,
                            "%s inside an upcall: a view change is under way and an upcall does "
                            "not wait for it",
                            call);
        if (only_view != UINT64_MAX && changing)
            return sp_error(SPINDLE_EPEERFAILED,
                            "%s: the view of the query is ending; its querier is told it failed",
                            call);
        if (u != NULL || only_view != UINT64_MAX)
            return rc;
        rc = view_after_error(&group->membership, view, rc);
        if (rc != 1)
            return rc;
    }
}

SPINDLE_API int spindle_p2p_send(spindle_group_t *group, uint32_t target, const void *data,
                                 size_t length, unsigned flags)
{
    int rc = check_target(group, target, length, "p2p send");
    if (rc < 0)
        return rc;
    struct smc_p2p_slot header = {.kind = SMC_P2P_MESSAGE, .length = (uint32_t)length};
    return p2p_send(group, target, &header, data, flags, UINT64_MAX, "p2p send");
}

SPINDLE_API int spindle_p2p_reply(spindle_group_t *group, const struct spindle_p2p_message *query,
                                  const void *data, size_t length, unsigned flags)
{
    if (query == NULL || query->query_id == 0)
        return sp_error(SPINDLE_EINVAL, "p2p reply: %s",
                        query == NULL ? "query is NULL"
                                      : "the message is one-way (query_id 0): nothing waits for "
                                        "a reply");
    int rc = check_target(group, query->sender_id, length, "p2p reply");
    if (rc < 0)
        return rc;
    struct smc_p2p_slot header = {
        .kind = SMC_P2P_REPLY, .length = (uint32_t)length, .query_id = query->query_id};
    return p2p_send(group, query->sender_id, &header, data, flags, query->view_id, "p2p reply");
}

SPINDLE_API int spindle_p2p_query(spindle_group_t *group, uint32_t target, const void *request,
                                  size_t length, void *reply, size_t reply_capacity,
                                  size_t *reply_length, int timeout_ms)
{
    int rc = check_target(group, target, length, "p2p query");
    if (rc < 0)
        return rc;
    if (request == NULL && length > 0)
        return sp_error(SPINDLE_EINVAL, "p2p query: request is NULL with length %zu", length);
    if ((reply == NULL && reply_capacity > 0) || reply_length == NULL)
        return sp_error(SPINDLE_EINVAL, "p2p query: %s",
                        reply_length == NULL ? "reply_length is NULL"
                                             : "reply is NULL with a non-zero reply_capacity");
    rc = group_upcall_refuse(group, "spindle_p2p_query");
    if (rc < 0)
        return rc;
    uint64_t deadline =
        timeout_ms < 0 ? UINT64_MAX : sp_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    *reply_length = 0;
    struct smc_group *smc = view_acquire(&group->membership);
    uint32_t row = 0;
    rc = smc == NULL ? sp_error(SPINDLE_ESHUTDOWN, "p2p query: the group has no view")
                     : row_of(group, target, "p2p query", &row);
    if (rc == 0)
        rc = name_target(smc_p2p_query(smc, row, request, (uint32_t)length, reply, reply_capacity,
                                       reply_length, deadline),
                         "p2p query", target);
    view_release(&group->membership);
    return rc;
}
