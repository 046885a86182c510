/*
 * What the administration endpoint (src/group/admin.c) asks of the
 * membership: a copy of the current view for reports, the removal of a
 * member as a failure detector would have it, and a stop the application
 * did not ask for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "view/view_impl.h"

int view_snapshot(struct view_membership *m, struct view_snapshot *out)
{
    memset(out, 0, sizeof *out);
    struct smc_group *smc = view_acquire(m);
    if (smc == NULL) {
        view_release(m);
        return sp_error(SPINDLE_EINVAL, "the member has no view yet");
    }
    const struct view *view = &m->current->view;
    struct sst_table *table = smc_group_table(smc);
    out->layouts = calloc(view->num_subgroups, sizeof *out->layouts);
    out->delivered = calloc(view->num_subgroups, sizeof *out->delivered);
    if (out->layouts == NULL || out->delivered == NULL) {
        view_release(m);
        return sp_error(SPINDLE_ENOMEM, "no memory for a copy of %u subgroups",
                        view->num_subgroups);
    }
    pthread_mutex_lock(&m->lock);
    uint64_t suspected = m->suspected;
    out->changing = m->changing || m->suspected != 0;
    pthread_mutex_unlock(&m->lock);
    out->view_id = view->id;
    out->num_members = view->num_members;
    out->my_rank = view->my_rank;
    for (uint32_t rank = 0; rank < view->num_members; rank++) {
        struct view_snapshot_member *member = &out->members[rank];
        member->id = view->member_ids[rank];
        member->identity = view->identities[rank];
        member->link = sst_table_link(table, rank);
        member->suspected = (suspected >> rank) & 1;
    }
    out->num_subgroups = view->num_subgroups;
    memcpy(out->layouts, view->layouts, view->num_subgroups * sizeof *out->layouts);
    for (uint32_t g = 0; g < view->num_subgroups; g++)
        out->delivered[g] = smc_group_delivered(smc, g);
    memcpy(out->logged, m->config.logged, sizeof out->logged);
    out->backend = sst_engine_backend(m->engine);
    view_release(m);
    return 0;
}

void view_snapshot_free(struct view_snapshot *snapshot)
{
    free(snapshot->layouts);
    free(snapshot->delivered);
    snapshot->layouts = NULL;
    snapshot->delivered = NULL;
}

/* The rank of id in the current view and whether removing it leaves a
 * quorum (read side of smc_lock held). */
static int removal_rank(struct view_membership *m, uint32_t id, uint64_t suspected)
{
    const struct view *view = &m->current->view;
    unsigned long long view_id = (unsigned long long)view->id;
    int rank = view_rank_of(view, id);
    if (rank < 0)
        return sp_error(SPINDLE_ENOENT, "member %u is not in view %llu", id, view_id);
    if ((uint32_t)rank == view->my_rank)
        return sp_error(SPINDLE_EINVAL,
                        "member %u is this member: ask it to leave instead (spindle-ctl leave)",
                        id);
    uint64_t in_view = view->num_members >= 64 ? ~0ull : (1ull << view->num_members) - 1;
    uint64_t stay = in_view & ~suspected & ~(1ull << rank);
    if (!view_is_quorum(view, stay, m->config.tie_breaker))
        return sp_error(SPINDLE_EMINORITY,
                        "removing member %u would leave %u of the %u members of view %llu, not "
                        "a majority%s: the group would stop",
                        id, (unsigned)__builtin_popcountll(stay), view->num_members, view_id,
                        m->config.tie_breaker ? " nor half with the leader" : "");
    return rank;
}

int view_remove_member(struct view_membership *m, uint32_t id)
{
    if (!m->config.tolerate_failures)
        return sp_error(SPINDLE_ENOTSUP, "removing a member needs tolerate_failures (without "
                                         "it a departure fails the whole group)");
    pthread_rwlock_rdlock(&m->smc_lock);
    if (m->current == NULL) {
        pthread_rwlock_unlock(&m->smc_lock);
        return sp_error(SPINDLE_EINVAL, "the member has no view yet");
    }
    pthread_mutex_lock(&m->lock);
    int rc = 0;
    if (m->terminal != 0 || m->stop)
        rc = sp_error(SPINDLE_ESHUTDOWN, "this member has stopped or left: it removes nobody");
    else if (m->closing)
        rc = sp_error(SPINDLE_ESHUTDOWN, "this member is shutting down: it removes nobody");
    if (rc == 0)
        rc = removal_rank(m, id, m->suspected);
    if (rc >= 0) {
        if (m->suspected == 0)
            m->detected_ns = sp_now_ns();
        m->suspected |= 1ull << rc;
        sp_log(SP_LOG_WARN, "view",
               "view %llu: removing member %u '%s' at an administrator's "
               "request",
               (unsigned long long)m->current->view.id, id, m->current->view.identities[rc].name);
        pthread_cond_broadcast(&m->cond);
    }
    pthread_mutex_unlock(&m->lock);
    pthread_rwlock_unlock(&m->smc_lock);
    return rc < 0 ? rc : 0;
}

void view_set_terminal(struct view_membership *m, int error, const char *why)
{
    pthread_mutex_lock(&m->lock);
    view_stop_locked(m, error, why);
    pthread_mutex_unlock(&m->lock);
}
