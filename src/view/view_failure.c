/*
 * Failure reports and the wedge. The engine reports a failed row (shm: the
 * peer's pidfd; fabric: CQ errors, broken connections, credit timeouts;
 * any backend: an announced leave). The callback records it in `suspected`
 * and wakes the membership thread, which wedges the multicast (no sends,
 * received counters frozen) before the survivors exchange what they hold.
 * Suspicion also spreads through the exchange (view_adopt_suspicion).
 *
 * Application threads that meet a failure wait here for the change to end
 * (view_after_error); a member that could not complete one is stopped for
 * good, with the reason kept for view_status.
 */
#include <stdio.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "view/view_impl.h"

/* The others installed a view without this member (it was suspected: a
 * stopped or hung process that resumed, a partition that healed). It
 * stops for good: its calls return SPINDLE_EREMOVED saying so, and it
 * delivers nothing more. The multicast fails first, so that once
 * view_status says so, a send fails too. Engine lock held (predicate
 * thread). */
static void removed(struct view_membership *m, struct view_epoch *epoch)
{
    unsigned long long view = (unsigned long long)epoch->view.id;
    pthread_mutex_lock(&m->lock);
    bool stops = !m->stop && m->terminal == 0; /* not after leave or another end */
    pthread_mutex_unlock(&m->lock);
    if (stops)
        smc_group_fail(epoch->smc, SPINDLE_EREMOVED);
    pthread_mutex_lock(&m->lock);
    stops = stops && !m->stop && m->terminal == 0;
    if (stops) {
        char slow[64] = "";
        if (m->config.slow_member_ms > 0)
            snprintf(slow, sizeof slow, ", or held a sender's window full for %d ms",
                     m->config.slow_member_ms);
        char why[sizeof m->terminal_msg];
        snprintf(why, sizeof why,
                 "removed from the group: the other members of view %llu installed the next "
                 "view without it (they suspected it failed: it was stopped, hung or cut off "
                 "for longer than the failure timeout of %d ms%s; or it wrote a value the "
                 "protocol does not allow, such as a counter past what it could hold or a "
                 "ring slot's length past the largest message; or an administrator had it "
                 "removed, spindle-ctl remove)",
                 view, m->config.failure_timeout_ms, slow);
        view_stop_locked(m, SPINDLE_EREMOVED, why);
        sp_log(SP_LOG_ERROR, "view", "view %llu: %s", view, m->terminal_msg);
    }
    pthread_mutex_unlock(&m->lock);
}

void view_stop_locked(struct view_membership *m, int error, const char *why)
{
    if (m->terminal != 0)
        return;
    m->terminal = error;
    snprintf(m->terminal_msg, sizeof m->terminal_msg, "%s", why);
    if (m->config.stopped != NULL)
        m->config.stopped(m->config.stopped_ctx);
    pthread_cond_broadcast(&m->cond);
}

void view_on_failure(void *ctx, struct sst_table *table, uint32_t row, int error)
{
    struct view_membership *m = ctx;
    struct view_epoch *epoch = __atomic_load_n(&m->current, __ATOMIC_ACQUIRE);
    if (epoch == NULL || table != smc_group_table(epoch->smc) || row >= SST_MAX_ROWS)
        return;
    if (error == SPINDLE_EREMOVED) {
        removed(m, epoch);
        return;
    }
    if (!m->config.tolerate_failures) {
        smc_group_fail(epoch->smc, error < 0 ? error : SPINDLE_EPEERFAILED);
        return;
    }
    uint32_t id = epoch->view.member_ids[row];
    const char *name = epoch->view.identities[row].name;
    unsigned long long view = (unsigned long long)epoch->view.id;
    pthread_mutex_lock(&m->lock);
    if ((m->suspected & (1ull << row)) == 0) {
        if (m->suspected == 0)
            m->detected_ns = sp_now_ns();
        m->suspected |= 1ull << row;
        /* In shutdown too: the membership thread tells a member that
         * finished (it reached the shutdown barrier) from one that failed. */
        if (m->closing)
            sp_log(SP_LOG_DEBUG, "view",
                   "view %llu: member %u '%s' (row %u) went away during shutdown", view, id, name,
                   row);
        else if (error == SPINDLE_ESHUTDOWN)
            sp_log(SP_LOG_INFO, "view", "view %llu: member %u '%s' (row %u) left the group", view,
                   id, name, row);
        else
            sp_log(SP_LOG_WARN, "view", "view %llu: member %u '%s' (row %u) failed: %s", view, id,
                   name, row, spindle_strerror(error));
    }
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
}

void view_adopt_suspicion(struct view_membership *m, uint64_t ranks)
{
    pthread_mutex_lock(&m->lock);
    if ((m->suspected | ranks) != m->suspected) {
        if (m->suspected == 0)
            m->detected_ns = sp_now_ns();
        m->suspected |= ranks;
        sp_log(SP_LOG_INFO, "view", "view %llu: adopting suspicion of rows %llx from a survivor",
               (unsigned long long)m->current->view.id, (unsigned long long)ranks);
    }
    pthread_mutex_unlock(&m->lock);
}

void view_suspect(struct view_membership *m, uint32_t rank)
{
    pthread_mutex_lock(&m->lock);
    if (m->suspected == 0)
        m->detected_ns = sp_now_ns();
    m->suspected |= 1ull << rank;
    pthread_mutex_unlock(&m->lock);
}

/*
 * A change starts where a failure is seen. The engine reports most
 * failures at every member sooner or later (a closed pidfd, a broken
 * connection, a heartbeat that stood still), but some suspicions are one
 * member's alone: a sender that a slow member held back, a leader whose
 * joiner is a later incarnation of a member. So a member that starts a
 * change publishes whom it suspects, and idle members look for it and
 * adopt it (suspicion spreads further through the blobs, view_exchange.c).
 */
void view_publish_suspicion(struct view_membership *m, uint64_t mask)
{
    const struct view *view = &m->current->view;
    if (mask == 0 || m->ctl == NULL)
        return;
    struct view_suspect suspect = {view->id + 1, mask};
    uint8_t bytes[VIEW_WIRE_SUSPECT_SIZE];
    view_wire_encode_suspect(&suspect, bytes, sizeof bytes);
    uint64_t in_view = view->num_members >= 64 ? ~0ull : (1ull << view->num_members) - 1;
    uint64_t to = 0;
    for (uint32_t rank = 0; rank < view->num_members; rank++)
        if (((in_view & ~mask) >> rank) & 1)
            to |= 1ull << view->member_ids[rank];
    (void)ctl_publish(m->ctl, view_suspect_tag(suspect.view_id), bytes, sizeof bytes, to);
}

void view_peek_suspicion(struct view_membership *m)
{
    const struct view *view = &m->current->view;
    if (m->ctl == NULL || view->num_members < 2)
        return;
    uint64_t from = view_member_mask(view) & ~(1ull << m->config.self);
    uint8_t all[SPINDLE_MAX_MEMBERS * VIEW_WIRE_SUSPECT_SIZE];
    uint64_t have = 0;
    (void)ctl_collect(m->ctl, view_suspect_tag(view->id + 1), from, all, VIEW_WIRE_SUSPECT_SIZE, 0,
                      &have);
    uint64_t in_view = view->num_members >= 64 ? ~0ull : (1ull << view->num_members) - 1;
    for (uint32_t id = 0; id < SPINDLE_MAX_MEMBERS; id++) {
        if (((have & from) >> id & 1) == 0)
            continue;
        struct view_suspect suspect;
        if (view_wire_decode_suspect(all + (size_t)id * VIEW_WIRE_SUSPECT_SIZE,
                                     VIEW_WIRE_SUSPECT_SIZE, &suspect) < 0 ||
            suspect.view_id != view->id + 1 || (suspect.suspected & ~in_view) != 0) {
            sp_log(SP_LOG_WARN, "view", "view %llu: ignoring a malformed suspicion from member %u",
                   (unsigned long long)view->id, id);
            continue;
        }
        /* A member the others suspect learns of its removal from the
         * table (SPINDLE_EREMOVED, view_on_failure): it does not take part
         * in the change that removes it. */
        if ((suspect.suspected >> view->my_rank) & 1)
            continue;
        sp_log(SP_LOG_INFO, "view", "view %llu: member %u suspects rows %llx",
               (unsigned long long)view->id, id, (unsigned long long)suspect.suspected);
        view_adopt_suspicion(m, suspect.suspected);
    }
}

uint64_t view_suspected_ids(struct view_membership *m)
{
    pthread_mutex_lock(&m->lock);
    uint64_t ranks = m->suspected;
    pthread_mutex_unlock(&m->lock);
    const struct view *view = &m->current->view;
    uint64_t ids = 0;
    for (uint32_t rank = 0; rank < view->num_members; rank++)
        if ((ranks >> rank) & 1)
            ids |= 1ull << view->member_ids[rank];
    return ids;
}

bool view_suspicion_grew(struct view_membership *m, uint64_t mask)
{
    pthread_mutex_lock(&m->lock);
    bool grown = m->suspected != mask;
    pthread_mutex_unlock(&m->lock);
    return grown;
}

void view_wedge(struct view_membership *m)
{
    smc_group_wedge(m->current->smc);
    /* Survivors asleep on their doorbell would notice the failure only at
     * their next heartbeat: wake them so they see it and join at once. */
    sst_engine_alert(m->engine);
}

void view_deadline_in(struct timespec *ts, int ms)
{
    *ts = sp_deadline_in(CLOCK_REALTIME, ms);
}

/* Waits on cond while a change runs. Lock held. */
static void wait_change_locked(struct view_membership *m)
{
    while (m->changing && m->terminal == 0) {
        struct timespec ts;
        view_deadline_in(&ts, 1000);
        pthread_cond_timedwait(&m->cond, &m->lock, &ts);
    }
}

void view_wait_change_for(struct view_membership *m, int ms)
{
    struct timespec ts;
    view_deadline_in(&ts, ms);
    pthread_mutex_lock(&m->lock);
    if (m->terminal == 0 && !m->stop)
        pthread_cond_timedwait(&m->cond, &m->lock, &ts);
    pthread_mutex_unlock(&m->lock);
}

void view_wait_change(struct view_membership *m)
{
    pthread_mutex_lock(&m->lock);
    wait_change_locked(m);
    pthread_mutex_unlock(&m->lock);
}

bool view_quiet(struct view_membership *m)
{
    pthread_mutex_lock(&m->lock);
    bool quiet = m->suspected == 0 && !m->closing && !m->stop && m->terminal == 0;
    pthread_mutex_unlock(&m->lock);
    return quiet;
}

bool view_changing(struct view_membership *m)
{
    pthread_mutex_lock(&m->lock);
    bool changing = m->changing;
    pthread_mutex_unlock(&m->lock);
    return changing;
}

bool view_change_pending(struct view_membership *m)
{
    pthread_mutex_lock(&m->lock);
    bool pending = (m->suspected != 0 || m->changing) && !m->closing && !m->stop &&
                   m->terminal == 0 && m->config.tolerate_failures;
    pthread_mutex_unlock(&m->lock);
    return pending;
}

int view_status(struct view_membership *m)
{
    pthread_mutex_lock(&m->lock);
    int terminal = m->terminal;
    char why[sizeof m->terminal_msg];
    snprintf(why, sizeof why, "%s", m->terminal_msg);
    pthread_mutex_unlock(&m->lock);
    return terminal == 0 ? 0 : sp_error(terminal, "this member stopped: %s", why);
}

uint64_t view_current_id(const struct view_membership *m)
{
    return __atomic_load_n(&m->view_id, __ATOMIC_ACQUIRE);
}

int view_after_error(struct view_membership *m, uint64_t used_view, int rc)
{
    if (rc == SPINDLE_EREMOVED) {
        /* removed() fails the multicast before it records why: wait the
         * moment between. */
        struct timespec ts;
        view_deadline_in(&ts, 1000);
        pthread_mutex_lock(&m->lock);
        while (m->terminal == 0 && !m->stop && pthread_cond_timedwait(&m->cond, &m->lock, &ts) == 0)
            ;
        pthread_mutex_unlock(&m->lock);
        int status = view_status(m);
        return status != 0 ? status : rc;
    }
    if (!m->config.tolerate_failures || (rc != SPINDLE_ESHUTDOWN && rc != SPINDLE_EPEERFAILED))
        return rc;
    pthread_mutex_lock(&m->lock);
    wait_change_locked(m);
    int terminal = m->terminal;
    pthread_mutex_unlock(&m->lock);
    if (terminal != 0)
        return view_status(m);
    /* By view id, not by multicast: the next view's multicast may be
     * allocated where a retired one was (a caller that slept through a
     * whole view would take the new one for the one that failed it). */
    if (view_current_id(m) != used_view)
        return 1;
    return rc;
}
