/*
 * A failure-driven view change, from the survivors' agreement to the new
 * view (tolerate_failures).
 *
 * Protocol (view/trim.h has the safety argument):
 *  1. The engine reports a failed row; the membership thread wedges the
 *     multicast (view_failure.c).
 *  2. Every survivor builds the next view locally (the previous view minus
 *     the suspected rows; majority rule against the previous view, else
 *     SPINDLE_EMINORITY), creates its next multicast, and publishes one
 *     blob over the group's control channel to the other survivors
 *     (view_exchange.c).
 *  3. Suspicion spreads through the blobs; when every survivor names the
 *     same set, each commits to it, and installs once all committed or a
 *     majority locked on it (view_exchange.c). A member that failed after
 *     its blob is then a member of the next view, marked failed when its
 *     table cannot be connected, and removed by the next change.
 *  4. Each survivor computes the trim itself (trim_compute is deterministic
 *     over identical inputs), delivers every message within it (Derecho's
 *     cleanup, view/trim.h), connects the next
 *     table (reusing connections to survivors), retires the old view,
 *     meets the others in the new view and resends its undelivered
 *     messages in their original order before any new one, then reports
 *     the view (this file).
 *
 * A survivor that cannot complete a step within EXCHANGE_TIMEOUTS failure
 * timeouts (the others never answered: it is probably cut off) stops with
 * SPINDLE_EMINORITY rather than install anything on its own.
 *
 * Departure from Derecho (deliberate): Derecho's leader computes the trim
 * and publishes it in the SST; members echo it, and a new leader adopts any
 * trim already echoed. Here no member acts before it holds every
 * survivor's frozen counts and commitment, and every member computes the
 * same trim from the same counts, so there is no leader whose failure needs
 * handling: a failure during the exchange restarts it under the larger
 * set or is left to the next change. The cost is liveness under
 * asymmetric suspicion (view_exchange.c): members may then wait out the
 * deadline and stop (never diverge).
 *
 * Steps 3 and 4 (trim, install, meet) are modelled in
 * models/view_change.pml (steps install, meet).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "view/trim.h"
#include "view/view_impl.h"

/* An own message to resend in the next view. */
struct resend {
    uint32_t subgroup;
    uint32_t length;
    void *data;
};

static void next_free(struct view_next *next)
{
    view_epoch_free(next->epoch);
    free(next->blobs);
    free(next->decoded);
    free(next->counts);
    memset(next, 0, sizeof *next);
}

/* Builds the next view: the survivors of mask in their old order, then the
 * joiner (VIEW_NO_JOINER: none), and its multicast. */
static int next_build(struct view_membership *m, uint64_t mask, uint32_t joiner,
                      struct view_next *next)
{
    memset(next, 0, sizeof *next);
    const struct view *current = &m->current->view;
    struct view view;
    int rc = view_next(current, mask, joiner, &view, &next->how);
    if (rc == 0 && joiner != VIEW_NO_JOINER) {
        pthread_mutex_lock(&m->lock);
        view.identities[view.num_members - 1] = m->joiner.identity;
        pthread_mutex_unlock(&m->lock);
    }
    if (rc == 0)
        rc = view_next_layouts(current, &next->how, m->config.layout, m->config.layout_ctx, &view);
    if (rc < 0) {
        view_clear(&view);
        return rc;
    }
    rc = view_epoch_create(m, &view, &next->epoch);
    /* Frontiers of the next view wait for the last of this one
     * (view_log_report_previous). */
    if (rc == 0)
        smc_group_hold_frontier(next->epoch->smc);
    return rc;
}

/*
 * Unordered subgroup g delivers on receipt, so its ragged edge is not
 * trimmed: every surviving sender resends what some survivor lacks (from
 * the fewest positions any survivor received, trim[s]) and every survivor
 * takes again, without delivering, the resends it already had, so each
 * survivor gets every message of a surviving sender once, in its order.
 * A failed sender's messages stay a gap-free prefix at each survivor (not
 * all-or-none: they may differ in length).
 */
static bool in_layout(const struct smc_layout *layout, uint32_t row)
{
    for (uint32_t i = 0; i < layout->num_members; i++)
        if (layout->members[i] == row)
            return true;
    return false;
}

static int carry_unordered_edge(struct view_membership *m, const struct view_next *next, uint32_t g,
                                const struct trim_result *result)
{
    const struct smc_layout *old = &m->current->view.layouts[g];
    const struct smc_layout *now = &next->epoch->view.layouts[g];
    int rc = smc_group_set_edge(m->current->smc, g, result->trim, old->num_senders);
    if (rc < 0 || !in_layout(old, m->current->view.my_rank) ||
        !in_layout(now, next->epoch->view.my_rank))
        return rc; /* nothing received here before, or nothing to receive */
    for (uint32_t s = 0; s < old->num_senders && rc == 0; s++) {
        int row = next->how.new_rank[old->senders[s]];
        uint64_t beyond = 0;
        if (row < 0)
            continue; /* a failed sender resends nothing */
        for (uint32_t t = 0; t < now->num_senders && rc == 0; t++)
            if (now->senders[t] == (uint32_t)row) {
                rc = smc_group_beyond_edge(m->current->smc, g, s, &beyond);
                if (rc == 0)
                    rc = smc_group_skip(next->epoch->smc, g, t, beyond);
            }
    }
    return rc;
}

/* Computes subgroup g's trim from the gathered counts and delivers the
 * messages within it (atomic), or carries its edge into the next view
 * (unordered). */
static int deliver_trim(struct view_membership *m, const struct view_next *next, uint32_t g)
{
    const struct view *current = &m->current->view;
    const struct smc_layout *old = &current->layouts[g];
    uint32_t members = old->num_members, senders = old->num_senders;
    if (senders == 0)
        return 0;
    uint32_t sender_row[SST_MAX_ROWS];
    uint64_t received[SST_MAX_ROWS * SST_MAX_ROWS];
    struct trim_input in = {members, senders, sender_row, received, 0, NULL};
    for (uint32_t i = 0; i < members; i++) {
        int rank = next->how.new_rank[old->members[i]];
        if (rank < 0)
            in.failed_mask |= 1ull << i;
        const uint64_t *counts =
            rank < 0 ? NULL : &view_blob_of(next, (uint32_t)rank)->counts[(size_t)g * SST_MAX_ROWS];
        for (uint32_t s = 0; s < senders; s++)
            received[i * senders + s] = counts == NULL ? 0 : counts[s];
        for (uint32_t s = 0; s < senders; s++)
            if (old->senders[s] == old->members[i])
                sender_row[s] = i;
    }
    struct trim_result result;
    int rc = trim_compute(&in, &result);
    if (old->mode == SPINDLE_MODE_UNORDERED)
        return rc == 0 ? carry_unordered_edge(m, next, g, &result) : rc;
    if (rc == 0)
        rc = smc_group_deliver_trim(m->current->smc, g, result.trim, senders,
                                    result.delivered_total);
    if (rc == 0)
        sp_log(SP_LOG_INFO, "view",
               "view %llu subgroup %u: trim delivers the messages within each sender's trim, "
               "through sequence number %llu",
               (unsigned long long)current->id, g, (unsigned long long)result.delivered_total);
    return rc;
}

static void resends_free(struct resend *list, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(list[i].data);
    free(list);
}

/* Copies this member's undelivered messages out of the old rings. */
static int collect_resends(struct view_membership *m, struct resend **out, size_t *count)
{
    struct smc_group *smc = m->current->smc;
    size_t cap = 0;
    *out = NULL;
    *count = 0;
    for (uint32_t g = 0; g < m->current->view.num_subgroups; g++) {
        uint64_t first = 0, n = 0;
        int rc = smc_group_undelivered(smc, g, &first, &n);
        if (rc < 0)
            return rc;
        for (uint64_t i = first; i < first + n; i++) {
            if (*count == cap) {
                cap = cap == 0 ? 64 : cap * 2;
                struct resend *grown = realloc(*out, cap * sizeof *grown);
                if (grown == NULL)
                    return sp_error(SPINDLE_ENOMEM, "no memory for %zu resends", cap);
                *out = grown;
            }
            struct resend *r = &(*out)[*count];
            const void *data = smc_group_message(smc, g, i, &r->length);
            if (data == NULL)
                return SPINDLE_EPROTO;
            r->subgroup = g;
            r->data = malloc(r->length > 0 ? r->length : 1);
            if (r->data == NULL)
                return sp_error(SPINDLE_ENOMEM, "no memory for a resend of %u bytes", r->length);
            memcpy(r->data, data, r->length);
            (*count)++;
        }
    }
    return 0;
}

static int resend_all(struct smc_group *smc, const struct resend *list, size_t count)
{
    size_t dropped = 0;
    for (size_t i = 0; i < count; i++) {
        void *slot = NULL;
        int rc = smc_reserve(smc, list[i].subgroup, list[i].length, 0, &slot);
        if (rc == SPINDLE_EPERM) {
            /* The layout function took this member off the subgroup's
             * senders: like a departed sender's, its undelivered messages
             * are delivered nowhere. */
            dropped++;
            continue;
        }
        if (rc < 0)
            return rc;
        memcpy(slot, list[i].data, list[i].length);
        rc = smc_commit(smc, list[i].subgroup);
        if (rc < 0)
            return rc;
    }
    if (dropped > 0)
        sp_log(SP_LOG_WARN, "view",
               "%zu undelivered messages dropped: no longer a sender of their subgroup", dropped);
    return 0;
}

void view_report(struct view_membership *m, const struct view_transition *how, uint64_t detected_ns)
{
    struct spindle_view_info info;
    view_describe(&m->current->view, how, &info);
    info.detected_ns = detected_ns;
    info.installed_ns = sp_now_ns();
    /* Who left and joined, by identity: ids are given again. */
    char who[256] = "";
    size_t at = 0;
    for (uint32_t i = 0; i < info.num_left + info.num_joined && at < sizeof who; i++) {
        bool left = i < info.num_left;
        const struct spindle_member_identity *identity =
            left ? &info.left_identities[i] : &info.joined_identities[i - info.num_left];
        int n = snprintf(who + at, sizeof who - at, "%s%s '%s' (incarnation %llu)",
                         i > 0 ? "," : ":", left ? " left" : " joined", identity->name,
                         (unsigned long long)identity->incarnation);
        at += n > 0 ? (size_t)n : 0;
    }
    sp_log(SP_LOG_INFO, "view", "view %llu installed: %u members, %u left, %u joined%s",
           (unsigned long long)info.view_id, info.num_members, info.num_left, info.num_joined, who);
    if (m->config.view_changed != NULL)
        m->config.view_changed(m->config.view_ctx, &info);
}

/* Swaps the next view in and retires the old one. Called with the write
 * side of smc_lock held, which the caller keeps until its resends are in.
 * Returns when the failure that began this change was detected (read under
 * the lock: a report in the new view may set it again at once). */
static uint64_t install(struct view_membership *m, struct view_next *next)
{
    struct view_epoch *old = m->current;
    view_log_follow(m, NULL); /* old->smc is freed below */
    smc_group_stop(old->smc);
    pthread_mutex_lock(&m->lock);
    uint64_t detected_ns = m->detected_ns;
    __atomic_store_n(&m->current, next->epoch, __ATOMIC_RELEASE);
    /* Suspicions that arrived during the change carry over, renumbered. */
    uint64_t carried = 0;
    for (uint32_t r = 0; r < old->view.num_members; r++)
        if (((m->suspected & ~next->how.removed) >> r) & 1)
            carried |= 1ull << next->how.new_rank[r];
    /* Reports on the next table before it became current were dropped
     * (view_on_failure takes only the current table's); the SST marks a
     * row failed before it reports it, so they are all found here. */
    struct sst_table *table = smc_group_table(next->epoch->smc);
    for (uint32_t r = 0; r < next->epoch->view.num_members; r++)
        if (r != next->epoch->view.my_rank && sst_row_failed(table, r))
            carried |= 1ull << r;
    m->suspected = carried;
    __atomic_store_n(&m->view_id, next->epoch->view.id, __ATOMIC_RELEASE);
    __atomic_store_n(&m->num_members, next->epoch->view.num_members, __ATOMIC_RELEASE);
    m->barriers = 0;
    m->joiner.active = false;
    pthread_mutex_unlock(&m->lock);
    /* A removed member that is in fact alive (stopped, hung, cut off)
     * learns from the old table that it was removed, before it goes. */
    if (next->how.removed != 0)
        sst_table_announce_removed(smc_group_table(old->smc), next->how.removed);
    /* Their ids may go to later joiners (view_join_leader.c). */
    for (uint32_t r = 0; r < old->view.num_members; r++)
        if ((next->how.removed >> r) & 1)
            ctl_remove_member(m->ctl, old->view.member_ids[r]);
    view_epoch_free(old);
    next->epoch = NULL;
    next_free(next);
    return detected_ns;
}

/* The next view's descriptors by rank: the survivors' from their blobs,
 * the joiner's from its announcement. */
static void next_descs(struct view_membership *m, const struct view_next *next,
                       struct sst_member_desc *descs)
{
    const struct view *view = &next->epoch->view;
    for (uint32_t rank = 0; rank < view->num_members; rank++)
        descs[rank] = view->member_ids[rank] == next->how.joiner ? m->joiner.desc
                                                                 : view_blob_of(next, rank)->desc;
}

/* Agreement and everything that must happen before the next view may be
 * installed: trim, the joiner's view, connections, resends collected
 * (with the write side of smc_lock held on success). */
static int prepare(struct view_membership *m, struct view_next *next, struct resend **resends,
                   size_t *num_resends)
{
    int rc = view_exchange(m, next);
    for (uint32_t g = 0; g < m->current->view.num_subgroups && rc == 0; g++)
        rc = deliver_trim(m, next, g);
    /* Durable views: the next view and the trim are on stable storage
     * before anything is delivered in it. */
    if (rc == 0)
        rc = view_log_view(m, next->epoch, m->current->smc, m->current->view.num_subgroups);
    const struct view *view = &next->epoch->view;
    struct sst_member_desc descs[SST_MAX_ROWS];
    if (rc == 0)
        next_descs(m, next, descs);
    /* The joiner gets the view and the state as of its end: every message
     * of the old view this member will ever deliver is delivered now. */
    if (rc == 0 && next->how.joiner != VIEW_NO_JOINER && view->my_rank == 0)
        rc = view_join_send_view(m, next->epoch, descs);
    /* Connect the next view's table while the old one still holds its
     * peers: connections to survivors are reused rather than torn down and
     * rebuilt, which a peer would take for a failure. A member that
     * cannot be connected (it failed after the others committed) is marked
     * failed in the next table: install() makes it a suspicion there, and
     * the next change removes it. */
    uint64_t unconnected = 0;
    if (rc == 0)
        rc = view_epoch_connect(m, next->epoch, descs, &unconnected);
    if (rc == 0 && unconnected != 0)
        sp_log(SP_LOG_WARN, "view",
               "view %llu: rows %llx of the next view failed before it started",
               (unsigned long long)view->id, (unsigned long long)unconnected);
    if (rc == 0) {
        /* The write side waits out any reservation still open on the old
         * view: a message committed there after the wedge is not in the
         * trim, so it must be among the resends (the wedge already woke
         * senders blocked on a full window, so they release the lock). */
        pthread_rwlock_wrlock(&m->smc_lock);
        rc = collect_resends(m, resends, num_resends);
        if (rc < 0)
            pthread_rwlock_unlock(&m->smc_lock);
    }
    return rc;
}

/* Gathers the survivors' ready messages, except from those suspected in
 * the new view meanwhile (the next change removes them). */
int view_gather_survivors(struct view_membership *m, uint64_t survivors, uint64_t view,
                          uint32_t tag)
{
    uint64_t deadline =
        sp_now_ns() + EXCHANGE_TIMEOUTS * 1000000ull * (uint64_t)m->config.failure_timeout_ms;
    for (;;) {
        uint64_t from = survivors & ~view_suspected_ids(m);
        int rc = view_gather_ready(m, from, view, tag, 20, "start of the view");
        /* A connection found broken is a failure about to be reported. */
        if (rc == 0 || (rc != SPINDLE_ETIMEDOUT && rc != SPINDLE_EUNREACH))
            return rc;
        if (sp_now_ns() >= deadline)
            return sp_error(SPINDLE_ETIMEDOUT,
                            "view %llu: the survivors did not complete the start of the view "
                            "within %d ms (%s)",
                            (unsigned long long)view,
                            EXCHANGE_TIMEOUTS * m->config.failure_timeout_ms, spindle_errmsg());
    }
}

/* Meets the survivors (and the joiner) at the start of the new view. */
static int meet(struct view_membership *m, uint64_t survivors, uint32_t joiner)
{
    uint64_t view = m->current->view.id;
    uint32_t tag = view_change_tag(view, STEP_READY);
    uint64_t to = survivors | (joiner != VIEW_NO_JOINER ? 1ull << joiner : 0);
    int rc = view_publish_ready(m, view, tag, to);
    /* The leader streams the joiner its state once the survivors need not
     * wait for it; a transfer that fails is the joiner's failure. */
    bool lost = false;
    if (rc == 0 && joiner != VIEW_NO_JOINER && m->joiner.has_state &&
        m->joiner.state_view == view) {
        lost = (m->joiner.catchup ? view_join_send_catchup(m, joiner, view)
                                  : view_join_send_state(m, joiner, view, m->joiner.state,
                                                         m->joiner.state_length)) < 0;
        if (lost)
            sp_log(SP_LOG_WARN, "view", "view %llu: the state transfer to joiner %u failed: %s",
                   (unsigned long long)view, joiner, spindle_errmsg());
    }
    free(m->joiner.state);
    m->joiner.state = NULL;
    m->joiner.has_state = false;
    if (rc == 0)
        rc = view_gather_survivors(m, survivors, view, tag);
    if (rc == 0 && joiner != VIEW_NO_JOINER &&
        (lost || view_join_await_start(m, joiner, view, tag) < 0)) {
        /* A joiner lost on its way in is a failure in the new view, not a
         * reason to stop: the next change removes it. */
        sp_log(SP_LOG_WARN, "view", "view %llu: joiner %u never started (%s)",
               (unsigned long long)view, joiner, spindle_errmsg());
        view_suspect(m, m->current->view.num_members - 1);
    }
    return rc;
}

static view_meet_hook_fn before_meet;

/* Called only by tests (its purpose): */
// cppcheck-suppress unusedFunction
void view_test_before_meet(view_meet_hook_fn fn)
{
    before_meet = fn;
}

int view_try_change(struct view_membership *m, uint64_t mask, uint32_t joiner)
{
    struct view_next next;
    struct resend *resends = NULL;
    size_t num_resends = 0;
    int rc = next_build(m, mask, joiner, &next);
    if (rc == 0)
        rc = prepare(m, &next, &resends, &num_resends);
    if (rc < 0) {
        resends_free(resends, num_resends);
        next_free(&next);
        return rc;
    }
    struct view_transition how = next.how;
    uint64_t detected_ns = install(m, &next);
    /* Dispatch mode queues the view before anything is delivered in it,
     * so the application takes it in order with the deliveries. */
    if (m->config.report_at_install)
        view_report(m, &how, detected_ns);
    if (before_meet != NULL && joiner != VIEW_NO_JOINER)
        before_meet(m, joiner);
    rc = smc_group_start(m->current->smc);
    if (rc == 0)
        view_log_follow(m, m->current->smc);
    if (rc == 0)
        rc = meet(m, how.survivors, joiner);
    /* Every survivor made the old view's trim durable before it met us. */
    if (rc == 0)
        view_log_report_previous(m);
    sp_log(SP_LOG_DEBUG, "view", "view %llu ready (%d), %zu resends",
           (unsigned long long)m->current->view.id, rc, num_resends);
    if (rc == 0)
        rc = resend_all(m->current->smc, resends, num_resends);
    /* Only now may application threads send in the new view: their new
     * messages must follow the resends. */
    pthread_rwlock_unlock(&m->smc_lock);
    resends_free(resends, num_resends);
    if (rc == SPINDLE_ETIMEDOUT) /* installed: no retry under another set */
        rc = sp_error(SPINDLE_EUNREACH, "%s", spindle_errmsg());
    if (rc == 0 && !m->config.report_at_install)
        view_report(m, &how, detected_ns);
    return rc;
}
