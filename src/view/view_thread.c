/*
 * The membership thread (tolerate_failures): idle, it polls for joins in a
 * group that takes them; woken by a failure report or a joiner, it runs a
 * view change, retrying under a larger suspected set while the set grows.
 * A change that fails stops the member for good (view_status).
 *
 * In spindle_group_shutdown a member still takes part in view changes:
 * a member that went away after publishing its ready at the shutdown
 * barrier is finishing (every member's barrier completes with that ready),
 * but one that went away before it failed, and the barrier can only
 * complete in a view without it.
 */
#include <stdio.h>

#include "util/error.h"
#include "util/log.h"
#include "view/view_impl.h"

/* Tries the next view under the suspected set; when the set grows during
 * an attempt, tries again under the larger one (at most once per member;
 * modelled in models/view_change.pml, step retry).
 * An attempt is never repeated under the same set: its rendezvous holds
 * descriptors of a next view that others may already have connected to. */
static int view_change(struct view_membership *m)
{
    view_wedge(m);
    int rc = SPINDLE_ETIMEDOUT;
    uint64_t tried = 0;
    uint32_t tried_joiner = VIEW_NO_JOINER;
    for (int attempt = 0; attempt <= SST_MAX_ROWS && rc == SPINDLE_ETIMEDOUT; attempt++) {
        pthread_mutex_lock(&m->lock);
        uint64_t mask = m->suspected;
        /* A join goes ahead only in a change without failures: the
         * joiner's table was made for the rows of the failure-free view. */
        uint32_t joiner = m->joiner.active && mask == 0 ? m->joiner.id : VIEW_NO_JOINER;
        bool drop = m->joiner.active && mask != 0;
        pthread_mutex_unlock(&m->lock);
        if (drop)
            view_join_abort(m, SPINDLE_EAGAIN,
                            "a member failed while the joiner was being admitted");
        if (attempt > 0 && mask == tried && joiner == tried_joiner)
            break; /* timed out with nothing new suspected: give up */
        tried = mask;
        tried_joiner = joiner;
        rc = view_check_majority(&m->current->view, mask, m->config.tie_breaker);
        if (rc < 0)
            return rc;
        view_publish_suspicion(m, mask);
        rc = view_try_change(m, mask, joiner);
        if (rc == SPINDLE_ETIMEDOUT)
            sp_log(SP_LOG_WARN, "view", "view %llu: survivors did not meet (%s)",
                   (unsigned long long)m->current->view.id, spindle_errmsg());
    }
    return rc;
}

/* True when every suspected member is one that reached this member's
 * shutdown barrier (it is finishing, no view change is needed). Lock held;
 * dropped while the control channel is read. */
static bool only_finishing(struct view_membership *m)
{
    if (!m->closing || !m->in_barrier || m->barrier_view != m->current->view.id)
        return false;
    uint32_t tag = m->barrier_tag;
    uint64_t view = m->barrier_view;
    pthread_mutex_unlock(&m->lock);
    uint64_t ids = view_suspected_ids(m);
    int rc = view_gather_ready(m, ids, view, tag, 0, "barrier");
    pthread_mutex_lock(&m->lock);
    return rc == 0;
}

/* Idle step: waits for a failure or a joiner, polling for joins and for
 * suspicions other members published. Lock held; returns with it held. */
static void idle(struct view_membership *m)
{
    /* A group that takes joins looks for join requests and announcements
     * every few milliseconds, others look for suspicions ten times a
     * second; failures wake it. A leader that is closing refuses new
     * requests. */
    bool poll = m->joinable;
    struct timespec ts;
    view_deadline_in(&ts, poll ? 15 : 100);
    pthread_cond_timedwait(&m->cond, &m->lock, &ts);
    if (m->suspected == 0 && !m->stop && !m->closing) {
        pthread_mutex_unlock(&m->lock);
        view_peek_suspicion(m);
        pthread_mutex_lock(&m->lock);
    }
    if (poll && (m->suspected == 0 || m->closing) && !m->stop) {
        pthread_mutex_unlock(&m->lock);
        view_join_poll(m);
        pthread_mutex_lock(&m->lock);
    }
}

static void *membership_main(void *arg)
{
    struct view_membership *m = arg;
    pthread_mutex_lock(&m->lock);
    while (!m->stop && m->terminal == 0) {
        /* In the shutdown barrier departures are the others finishing, but
         * a joiner the leader admitted before it got there still joins:
         * the barrier then restarts in the new view, with the joiner. */
        if (!m->joiner.active && (m->suspected == 0 || only_finishing(m))) {
            idle(m);
            continue;
        }
        m->changing = true;
        pthread_mutex_unlock(&m->lock);
        int rc = view_change(m);
        char why[sizeof m->terminal_msg];
        if (rc < 0) {
            snprintf(why, sizeof why, "%s", spindle_errmsg());
            sp_log(SP_LOG_ERROR, "view", "view change failed, member stops: %s", why);
            smc_group_wedge(m->current->smc);
        }
        pthread_mutex_lock(&m->lock);
        if (rc < 0) /* unless a removal notice came first */
            view_stop_locked(m, rc, why);
        m->changing = false;
        pthread_cond_broadcast(&m->cond);
        /* Also after a failed change: a sender waiting for it learns from
         * its next call that the member stopped. */
        if (m->config.change_done != NULL) {
            pthread_mutex_unlock(&m->lock);
            m->config.change_done(m->config.change_done_ctx);
            pthread_mutex_lock(&m->lock);
        }
        if (rc < 0)
            break;
    }
    pthread_mutex_unlock(&m->lock);
    return NULL;
}

int view_thread_start(struct view_membership *m)
{
    if (!m->config.tolerate_failures)
        return 0;
    if (pthread_create(&m->thread, NULL, membership_main, m) != 0)
        return sp_error(SPINDLE_ENOMEM, "cannot start the membership thread");
    m->thread_started = true;
    return 0;
}

void view_thread_stop(struct view_membership *m)
{
    if (!m->thread_started)
        return;
    pthread_mutex_lock(&m->lock);
    m->stop = true;
    pthread_cond_broadcast(&m->cond);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->thread, NULL);
    m->thread_started = false;
}
