/*
 * Failure-driven view changes for spindle_group_t (tolerate_failures).
 *
 * Protocol (view/trim.h has the safety argument):
 *  1. The engine reports a failed row (shm: the peer's pidfd; fabric: CQ
 *     errors, broken connections, credit timeouts; any: an announced leave).
 *     The callback records it in `suspected` and wakes the membership
 *     thread, which wedges the SMC group (no sends, received counters
 *     frozen).
 *  2. Every survivor builds the next view locally (the previous view minus
 *     the suspected rows; majority rule against the previous view, else
 *     SPINDLE_EMINORITY), creates its next smc_group, and publishes one
 *     blob over the group's control channel (the bootstrap channel: TCP
 *     between hosts, a directory on one host) to the other survivors: next
 *     view id, suspected rows, its next-view SST descriptor and its frozen
 *     received counts per subgroup.
 *  3. Suspicion spreads through the blobs: a survivor adopts any row another
 *     suspects and starts again under the larger set (a later blob of the
 *     same tag replaces the earlier one at every receiver). When every
 *     survivor's latest blob names exactly its own set, it commits: it
 *     publishes that it holds all blobs of the set and waits for every
 *     survivor's commitment. A committed member never abandons the set, so
 *     two survivors can never install different views of the same number.
 *  4. Each survivor computes the trim itself (trim_compute is deterministic
 *     over identical inputs), delivers exactly up to it, connects the next
 *     table (reusing connections to survivors), retires the old group,
 *     meets the others in the new view and resends its undelivered messages
 *     in their original order before any new one, then reports the view.
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
 * set. The cost is liveness in one narrow race: if a member commits to a
 * set just as another abandons it for a larger one, both wait out the
 * deadline and stop (never diverge).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "control/ctl.h"
#include "group/group_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "view/trim.h"

/* A survivor's commitment: it holds every blob of this set and will
 * install the view it describes (it never abandons it for a larger set). */
struct view_commit {
    uint64_t view_id;
    uint64_t suspected;
    uint64_t joiner; /* member id of the joiner, or GROUP_NO_JOINER */
};

/* What one survivor publishes for the next view. */
struct view_blob {
    uint64_t view_id;
    uint64_t suspected;
    uint64_t joiner; /* member id of the joiner it admits, or GROUP_NO_JOINER */
    struct sst_member_desc desc;
    uint64_t counts[]; /* [num_subgroups][SST_MAX_ROWS] received per sender */
};

/* The next view, built locally from the current one and a suspected mask. */
struct next_view {
    uint64_t mask;
    uint32_t joiner; /* member id of the joiner (last row), or GROUP_NO_JOINER */
    uint32_t num_rows;
    uint32_t my_row;
    int new_row[SST_MAX_ROWS]; /* old row -> new row, -1 when removed */
    struct smc_layout *layouts;
    struct group_view_ctx *ctx;
    struct smc_group *smc;
    uint64_t survivors;    /* member ids of the previous view's survivors (blob senders) */
    struct view_blob *all; /* indexed by member id */
    size_t blob_size;
};

/* An own message to resend in the next view. */
struct resend {
    uint32_t subgroup;
    uint32_t length;
    void *data;
};

void group_deliver(void *ctx, const struct spindle_message *messages, size_t count)
{
    const struct group_view_ctx *view = ctx;
    const struct spindle_group *group = view->group;
    if (group->options.deliver == NULL)
        return;
    struct spindle_message chunk[64];
    while (count > 0) {
        size_t n = count < 64 ? count : 64;
        for (size_t i = 0; i < n; i++) {
            chunk[i] = messages[i];
            chunk[i].sender_id = view->member_ids[messages[i].sender_id];
            chunk[i].view_id = view->view_id;
        }
        group->options.deliver(group->options.deliver_ctx, chunk, n);
        messages += n;
        count -= n;
    }
}

void group_on_failure(void *ctx, struct sst_table *table, uint32_t row, int error)
{
    struct spindle_group *group = ctx;
    struct smc_group *smc = __atomic_load_n(&group->smc, __ATOMIC_ACQUIRE);
    if (smc == NULL || table != smc_group_table(smc) || row >= SST_MAX_ROWS)
        return;
    if (!group->options.tolerate_failures) {
        smc_group_fail(smc, error < 0 ? error : SPINDLE_EPEERFAILED);
        return;
    }
    pthread_mutex_lock(&group->lock);
    if (group->closing) {
        sp_log(SP_LOG_DEBUG, "view", "view %llu: member %u (row %u) went away during shutdown",
               (unsigned long long)group->view_id, group->view_ctx->member_ids[row], row);
        pthread_mutex_unlock(&group->lock);
        return;
    }
    if ((group->suspected & (1ull << row)) == 0) {
        if (group->suspected == 0)
            group->detected_ns = sp_now_ns();
        group->suspected |= 1ull << row;
        if (error == SPINDLE_ESHUTDOWN)
            sp_log(SP_LOG_INFO, "view", "view %llu: member %u (row %u) left the group",
                   (unsigned long long)group->view_id, group->view_ctx->member_ids[row], row);
        else
            sp_log(SP_LOG_WARN, "view", "view %llu: member %u (row %u) failed: %s",
                   (unsigned long long)group->view_id, group->view_ctx->member_ids[row], row,
                   spindle_strerror(error));
    }
    pthread_cond_broadcast(&group->cond);
    pthread_mutex_unlock(&group->lock);
}

static void deadline_in(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

SPINDLE_API int spindle_group_status(spindle_group_t *group)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    pthread_mutex_lock(&group->lock);
    int terminal = group->terminal;
    char why[sizeof group->terminal_msg];
    snprintf(why, sizeof why, "%s", group->terminal_msg);
    pthread_mutex_unlock(&group->lock);
    return terminal == 0 ? 0 : sp_error(terminal, "this member stopped: %s", why);
}

void group_wait_change(struct spindle_group *group)
{
    pthread_mutex_lock(&group->lock);
    while (group->changing) {
        struct timespec ts;
        deadline_in(&ts, 1000);
        pthread_cond_timedwait(&group->cond, &group->lock, &ts);
    }
    pthread_mutex_unlock(&group->lock);
}

int group_after_error(struct spindle_group *group, struct smc_group *used, int rc)
{
    if (!group->options.tolerate_failures || (rc != SPINDLE_ESHUTDOWN && rc != SPINDLE_EPEERFAILED))
        return rc;
    pthread_mutex_lock(&group->lock);
    while (group->changing) {
        struct timespec ts;
        deadline_in(&ts, 1000);
        pthread_cond_timedwait(&group->cond, &group->lock, &ts);
    }
    int terminal = group->terminal;
    pthread_mutex_unlock(&group->lock);
    if (terminal != 0)
        return sp_error(terminal, "this member stopped: %s", group->terminal_msg);
    if (__atomic_load_n(&group->smc, __ATOMIC_ACQUIRE) != used)
        return 1;
    return rc;
}

/* Copies layout with removed rows dropped and the rest renumbered. */
static void map_layout(const struct smc_layout *old, const int *new_row, struct smc_layout *out)
{
    *out = *old;
    out->num_members = 0;
    out->num_senders = 0;
    for (uint32_t i = 0; i < old->num_members; i++)
        if (new_row[old->members[i]] >= 0)
            out->members[out->num_members++] = (uint32_t)new_row[old->members[i]];
    for (uint32_t s = 0; s < old->num_senders; s++)
        if (new_row[old->senders[s]] >= 0)
            out->senders[out->num_senders++] = (uint32_t)new_row[old->senders[s]];
}

static void next_free(struct next_view *next)
{
    if (next->smc != NULL) {
        smc_group_stop(next->smc);
        smc_group_destroy(next->smc);
    }
    free(next->layouts);
    free(next->ctx);
    free(next->all);
    memset(next, 0, sizeof *next);
}

int group_next_layouts(struct spindle_group *group, const struct smc_layout *old_layouts,
                       const int *new_row, uint32_t old_rows, int joiner_row,
                       const struct spindle_view_info *view, struct smc_layout *out)
{
    (void)old_rows;
    for (uint32_t g = 0; g < group->num_subgroups; g++) {
        map_layout(&old_layouts[g], new_row, &out[g]);
        if (joiner_row >= 0)
            out[g].members[out[g].num_members++] = (uint32_t)joiner_row;
    }
    if (group->options.layout == NULL)
        return 0;
    struct spindle_subgroup_layout *user = calloc(group->num_subgroups, sizeof *user);
    if (user == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the layout of view %llu",
                        (unsigned long long)view->view_id);
    for (uint32_t g = 0; g < group->num_subgroups; g++) {
        user[g].num_members = out[g].num_members;
        memcpy(user[g].members, out[g].members, out[g].num_members * sizeof(uint32_t));
        user[g].num_senders = out[g].num_senders;
        memcpy(user[g].senders, out[g].senders, out[g].num_senders * sizeof(uint32_t));
    }
    int rc = group->options.layout(group->options.layout_ctx, view, group->num_subgroups, user);
    if (rc < 0)
        rc = sp_error(rc, "the layout function refused view %llu (%s)",
                      (unsigned long long)view->view_id, spindle_strerror(rc));
    for (uint32_t g = 0; g < group->num_subgroups && rc == 0; g++) {
        if (user[g].num_members > view->num_members || user[g].num_senders > user[g].num_members)
            rc = sp_error(SPINDLE_EINVAL,
                          "layout function, view %llu subgroup %u: %u members and %u senders "
                          "in a view of %u",
                          (unsigned long long)view->view_id, g, user[g].num_members,
                          user[g].num_senders, view->num_members);
        if (rc < 0)
            break;
        out[g].num_members = user[g].num_members;
        memcpy(out[g].members, user[g].members, user[g].num_members * sizeof(uint32_t));
        out[g].num_senders = user[g].num_senders;
        memcpy(out[g].senders, user[g].senders, user[g].num_senders * sizeof(uint32_t));
        rc = smc_layout_validate(&out[g], g, view->num_members);
        if (rc < 0)
            rc = sp_error(rc, "layout function, view %llu: %s", (unsigned long long)view->view_id,
                          spindle_errmsg());
    }
    free(user);
    return rc;
}

/* Builds the next view: the survivors of mask in their old order, then the
 * joiner (GROUP_NO_JOINER: none). */
static int next_build(struct spindle_group *group, uint64_t mask, uint32_t joiner,
                      struct next_view *next)
{
    memset(next, 0, sizeof *next);
    next->mask = mask;
    next->joiner = joiner;
    next->ctx = calloc(1, sizeof *next->ctx);
    next->layouts = calloc(group->num_subgroups, sizeof *next->layouts);
    if (next->ctx == NULL || next->layouts == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the next view");
    next->ctx->group = group;
    next->ctx->view_id = group->view_id + 1;
    uint32_t left[SST_MAX_ROWS], num_left = 0;
    for (uint32_t r = 0; r < group->num_rows; r++) {
        next->new_row[r] = (mask >> r) & 1 ? -1 : (int)next->num_rows;
        if (next->new_row[r] >= 0) {
            next->survivors |= 1ull << group->view_ctx->member_ids[r];
            next->ctx->member_ids[next->num_rows++] = group->view_ctx->member_ids[r];
        } else {
            left[num_left++] = group->view_ctx->member_ids[r];
        }
    }
    int joiner_row = -1;
    if (joiner != GROUP_NO_JOINER) {
        joiner_row = (int)next->num_rows;
        next->ctx->member_ids[next->num_rows++] = joiner;
    }
    next->my_row = (uint32_t)next->new_row[group->my_row];
    struct spindle_view_info view = {
        .view_id = group->view_id + 1,
        .num_members = next->num_rows,
        .members = next->ctx->member_ids,
        .my_rank = next->my_row,
        .num_joined = joiner_row >= 0 ? 1 : 0,
        .joined = &joiner,
        .num_left = num_left,
        .left = left,
    };
    int rc = group_next_layouts(group, group->layouts, next->new_row, group->num_rows, joiner_row,
                                &view, next->layouts);
    if (rc < 0)
        return rc;
    struct smc_options options = {
        .batching = group->options.batching,
        .null_sends = group->options.null_sends,
        .deliver = group_deliver,
        .deliver_ctx = next->ctx,
    };
    return smc_group_create(group->engine, next->layouts, group->num_subgroups, next->num_rows,
                            next->my_row, &options, &next->smc);
}

/* The blob of the survivor that is row `row` of the next view. */
static const struct view_blob *blob_of(const struct next_view *next, uint32_t row)
{
    return (const void *)((const char *)next->all +
                          (size_t)next->ctx->member_ids[row] * next->blob_size);
}

/* True when the suspected set grew since next was built (more failures, or
 * a survivor's blob named more: suspicion spreads through the exchange). */
static bool suspicion_grew(struct spindle_group *group, const struct next_view *next)
{
    pthread_mutex_lock(&group->lock);
    bool grown = group->suspected != next->mask;
    pthread_mutex_unlock(&group->lock);
    return grown;
}

/* Adds rows another survivor suspects to ours (same view, same rows). */
static void adopt_suspicion(struct spindle_group *group, uint64_t rows)
{
    pthread_mutex_lock(&group->lock);
    if ((group->suspected | rows) != group->suspected) {
        if (group->suspected == 0)
            group->detected_ns = sp_now_ns();
        group->suspected |= rows;
        sp_log(SP_LOG_INFO, "view", "view %llu: adopting suspicion of rows %llx from a survivor",
               (unsigned long long)group->view_id, (unsigned long long)rows);
    }
    pthread_mutex_unlock(&group->lock);
}

/*
 * Waits, in short rounds, for the latest blob of tag from every member of
 * `from`, up to twice the failure timeout. Missing, unreachable or
 * misbehaving members are the failure detector's to judge; until the
 * deadline this keeps waiting for them.
 */
static int gather(struct spindle_group *group, uint64_t from, uint64_t view, uint32_t tag,
                  void *all, size_t length, const char *what)
{
    uint64_t deadline =
        sp_now_ns() + EXCHANGE_TIMEOUTS * 1000000ull * (uint64_t)group->options.failure_timeout_ms;
    for (;;) {
        int rc = ctl_collect(group->ctl, tag, from, all, length, 20, NULL);
        if (rc == 0)
            return 0;
        if (sp_now_ns() >= deadline)
            return sp_error(SPINDLE_ETIMEDOUT,
                            "view %llu: the survivors did not complete the %s within %d ms (%s)",
                            (unsigned long long)view, what,
                            EXCHANGE_TIMEOUTS * group->options.failure_timeout_ms,
                            spindle_errmsg());
    }
}

/*
 * Publishes this member's blob and gathers every survivor's, then commits:
 * a survivor that holds every blob for the suspected set says so and from
 * then on installs that view or stops, never a different one. Without the
 * commit, one survivor could install the view for a set that another had
 * just abandoned for a larger one, and they would deliver different trims.
 */
static int next_exchange(struct spindle_group *group, struct next_view *next)
{
    uint32_t members = SPINDLE_MAX_MEMBERS; /* blobs are indexed by member id, joiners too */
    next->blob_size = sizeof(struct view_blob) + (size_t)group->num_subgroups * SST_MAX_ROWS * 8;
    struct view_blob *mine = calloc(1, next->blob_size);
    next->all = calloc(members, next->blob_size);
    if (mine == NULL || next->all == NULL) {
        free(mine);
        return sp_error(SPINDLE_ENOMEM, "no memory for view blobs");
    }
    uint64_t view = group->view_id + 1;
    mine->view_id = view;
    mine->suspected = next->mask;
    mine->joiner = next->joiner;
    int rc = smc_group_export(next->smc, &mine->desc);
    for (uint32_t g = 0; g < group->num_subgroups && rc >= 0; g++)
        if (smc_group_received(group->smc, g, group->my_row, &mine->counts[g * SST_MAX_ROWS],
                               SST_MAX_ROWS) < 0)
            rc = SPINDLE_EPROTO;
    uint32_t self = group->view_ctx->member_ids[group->my_row];
    if (rc >= 0) {
        memcpy((char *)next->all + (size_t)self * next->blob_size, mine, next->blob_size);
        rc = ctl_publish(group->ctl, group_view_tag(view, STEP_BLOB), mine, next->blob_size,
                         next->survivors);
    }
    free(mine);
    uint64_t deadline =
        sp_now_ns() + EXCHANGE_TIMEOUTS * 1000000ull * (uint64_t)group->options.failure_timeout_ms;
    while (rc >= 0) {
        uint64_t have = 0;
        rc = ctl_collect(group->ctl, group_view_tag(view, STEP_BLOB), next->survivors, next->all,
                         next->blob_size, 20, &have);
        char why[256];
        snprintf(why, sizeof why, "%s", rc == 0 ? "" : spindle_errmsg());
        have |= 1ull << self;
        /* Suspicion spreads: adopt what arrived blobs name. A blob naming
         * a smaller set is stale (its member will publish again for this
         * set or stop): wait for the next one. */
        uint64_t union_mask = next->mask;
        bool all_same = true;
        for (uint32_t r = 0; r < next->num_rows; r++) {
            if (((next->survivors & have) >> next->ctx->member_ids[r] & 1) == 0)
                continue;
            const struct view_blob *b = blob_of(next, r);
            if (b->view_id != view)
                return sp_error(SPINDLE_EPROTO, "view blob of member %u names view %llu, not %llu",
                                next->ctx->member_ids[r], (unsigned long long)b->view_id,
                                (unsigned long long)view);
            union_mask |= b->suspected;
            /* A different joiner: one side has not seen the announcement
             * yet (it will) or dropped the join for a failure (so will
             * this member, once it adopts the suspicion). */
            all_same = all_same && b->suspected == next->mask && b->joiner == next->joiner;
        }
        if (union_mask != next->mask)
            adopt_suspicion(group, union_mask);
        if (rc == 0 && all_same)
            break; /* every survivor's latest blob names exactly this set */
        rc = 0;
        if (suspicion_grew(group, next)) {
            rc =
                sp_error(SPINDLE_ETIMEDOUT, "view %llu: more members suspected during the exchange",
                         (unsigned long long)view);
            break;
        }
        if (sp_now_ns() >= deadline) {
            /* Not a majority that this member can confirm: stop. */
            rc = sp_error(SPINDLE_EMINORITY,
                          "view %llu: the survivors did not complete the exchange within %d ms "
                          "(%s): this member cannot reach a majority and stops",
                          (unsigned long long)view,
                          EXCHANGE_TIMEOUTS * group->options.failure_timeout_ms, why);
            break;
        }
    }
    if (rc < 0)
        return rc;
    struct view_commit commit = {view, next->mask, next->joiner};
    struct view_commit commits[SPINDLE_MAX_MEMBERS];
    commits[self] = commit;
    rc = ctl_publish(group->ctl, group_view_tag(view, STEP_COMMIT), &commit, sizeof commit,
                     next->survivors);
    if (rc == 0)
        rc = gather(group, next->survivors, view, group_view_tag(view, STEP_COMMIT), commits,
                    sizeof commit, "commitment");
    for (uint32_t r = 0; r < next->num_rows && rc == 0; r++) {
        if (((next->survivors >> next->ctx->member_ids[r]) & 1) == 0)
            continue; /* the joiner does not commit */
        const struct view_commit *c = &commits[next->ctx->member_ids[r]];
        if (c->view_id != view || c->suspected != next->mask || c->joiner != next->joiner)
            rc = sp_error(SPINDLE_EPROTO, "member %u committed to view %llu without rows %llx",
                          next->ctx->member_ids[r], (unsigned long long)c->view_id,
                          (unsigned long long)c->suspected);
    }
    /* A commitment that cannot complete is final: stop (never abandon). */
    return rc == SPINDLE_ETIMEDOUT ? sp_error(SPINDLE_EUNREACH, "%s", spindle_errmsg()) : rc;
}

static const uint64_t *blob_counts(const struct next_view *next, uint32_t new_row, uint32_t g)
{
    return &blob_of(next, new_row)->counts[g * SST_MAX_ROWS];
}

/* Computes subgroup g's trim from the gathered counts and delivers up to it. */
static int deliver_trim(struct spindle_group *group, const struct next_view *next, uint32_t g)
{
    const struct smc_layout *old = &group->layouts[g];
    uint32_t members = old->num_members, senders = old->num_senders;
    if (senders == 0 || old->mode != SPINDLE_MODE_ATOMIC)
        return 0;
    uint32_t sender_row[SST_MAX_ROWS];
    uint64_t received[SST_MAX_ROWS * SST_MAX_ROWS];
    struct trim_input in = {members, senders, sender_row, received, 0, NULL};
    for (uint32_t i = 0; i < members; i++) {
        int row = next->new_row[old->members[i]];
        if (row < 0)
            in.failed_mask |= 1ull << i;
        for (uint32_t s = 0; s < senders; s++)
            received[i * senders + s] = row < 0 ? 0 : blob_counts(next, (uint32_t)row, g)[s];
        for (uint32_t s = 0; s < senders; s++)
            if (old->senders[s] == old->members[i])
                sender_row[s] = i;
    }
    struct trim_result result;
    int rc = trim_compute(&in, &result);
    if (rc == 0)
        rc = smc_group_deliver_upto(group->smc, g, result.delivered_total);
    if (rc == 0)
        sp_log(SP_LOG_INFO, "view", "view %llu subgroup %u: trim delivers %llu sequence numbers",
               (unsigned long long)group->view_id, g, (unsigned long long)result.delivered_total);
    return rc;
}

static void resends_free(struct resend *list, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(list[i].data);
    free(list);
}

/* Copies this member's undelivered messages out of the old rings. */
static int collect_resends(struct spindle_group *group, struct resend **out, size_t *count)
{
    size_t cap = 0;
    *out = NULL;
    *count = 0;
    for (uint32_t g = 0; g < group->num_subgroups; g++) {
        uint64_t first = 0, n = 0;
        int rc = smc_group_undelivered(group->smc, g, &first, &n);
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
            const void *data = smc_group_message(group->smc, g, i, &r->length);
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

void group_report_view(struct spindle_group *group, uint64_t left_mask, const uint32_t *old_ids,
                       uint32_t old_rows, uint32_t joined)
{
    uint32_t left[SST_MAX_ROWS], num_left = 0;
    for (uint32_t r = 0; r < old_rows; r++)
        if ((left_mask >> r) & 1)
            left[num_left++] = old_ids[r];
    struct spindle_view_info info = {
        .view_id = group->view_id,
        .num_members = group->num_rows,
        .members = group->view_ctx->member_ids,
        .my_rank = group->my_row,
        .num_joined = joined != GROUP_NO_JOINER ? 1 : 0,
        .joined = &joined,
        .left = left,
        .num_left = num_left,
        .detected_ns = group->detected_ns,
        .installed_ns = sp_now_ns(),
    };
    sp_log(SP_LOG_INFO, "view", "view %llu installed: %u members, %u left, %u joined",
           (unsigned long long)group->view_id, group->num_rows, num_left, info.num_joined);
    if (group->options.view_changed != NULL)
        group->options.view_changed(group->options.view_ctx, &info);
}

/* Swaps the next view in and retires the old one. Called with the write
 * side of smc_lock held, which the caller keeps until its resends are in. */
static void install(struct spindle_group *group, struct next_view *next)
{
    struct smc_group *old = group->smc;
    struct group_view_ctx *old_ctx = group->view_ctx;
    smc_group_stop(old);
    pthread_mutex_lock(&group->lock);
    __atomic_store_n(&group->smc, next->smc, __ATOMIC_RELEASE);
    /* Suspicions that arrived during the change carry over, renumbered. */
    uint64_t carried = 0;
    for (uint32_t r = 0; r < group->num_rows; r++)
        if (((group->suspected & ~next->mask) >> r) & 1)
            carried |= 1ull << next->new_row[r];
    group->suspected = carried;
    __atomic_store_n(&group->view_id, group->view_id + 1, __ATOMIC_RELEASE);
    group->num_rows = next->num_rows;
    group->my_row = next->my_row;
    group->view_ctx = next->ctx;
    free(group->layouts);
    group->layouts = next->layouts;
    group->barriers = 0;
    if (next->joiner != GROUP_NO_JOINER && next->joiner >= group->next_id)
        group->next_id = next->joiner + 1;
    group->joiner.active = false;
    pthread_mutex_unlock(&group->lock);
    smc_group_destroy(old);
    free(old_ctx);
    free(next->all);
    memset(next, 0, sizeof *next);
}

/* One attempt at the next view for suspected mask. SPINDLE_ETIMEDOUT when
 * the survivors did not all meet (retry with the then-current mask). */
static int try_change(struct spindle_group *group, uint64_t mask, uint32_t joiner)
{
    struct next_view next;
    struct resend *resends = NULL;
    size_t num_resends = 0;
    int timeout = group->options.bootstrap_timeout_ms;
    int rc = next_build(group, mask, joiner, &next);
    if (rc == 0)
        rc = next_exchange(group, &next);
    for (uint32_t g = 0; g < group->num_subgroups && rc == 0; g++)
        rc = deliver_trim(group, &next, g);
    struct sst_member_desc descs[SST_MAX_ROWS];
    for (uint32_t i = 0; i < next.num_rows && rc == 0; i++)
        descs[i] = next.ctx->member_ids[i] == joiner ? group->joiner.desc : blob_of(&next, i)->desc;
    /* The joiner gets the view and the state as of its end: every message
     * of the old view this member will ever deliver is delivered now. */
    if (rc == 0 && joiner != GROUP_NO_JOINER && next.my_row == 0)
        rc = group_join_send_view(group, group->view_id + 1, descs);
    if (rc == 0) {
        /* Connect the next view's table while the old one still holds its
         * peers: connections to survivors are reused rather than torn down
         * and rebuilt, which a peer would take for a failure. */
        rc = smc_group_connect(next.smc, descs, timeout);
    }
    if (rc == 0) {
        /* The write side waits out any reservation still open on the old
         * group: a message committed there after the wedge is not in the
         * trim, so it must be among the resends (the wedge already woke
         * senders blocked on a full window, so they release the lock). */
        pthread_rwlock_wrlock(&group->smc_lock);
        rc = collect_resends(group, &resends, &num_resends);
        if (rc < 0)
            pthread_rwlock_unlock(&group->smc_lock);
    }
    if (rc < 0) {
        resends_free(resends, num_resends);
        next_free(&next);
        return rc;
    }
    uint32_t old_ids[SST_MAX_ROWS], old_rows = group->num_rows;
    uint64_t survivors = next.survivors;
    memcpy(old_ids, group->view_ctx->member_ids, sizeof old_ids);
    install(group, &next);
    rc = smc_group_start(group->smc);
    uint8_t ready = 1, all_ready[SPINDLE_MAX_MEMBERS];
    if (rc == 0)
        rc = ctl_publish(group->ctl, group_view_tag(group->view_id, STEP_READY), &ready, 1,
                         survivors);
    if (rc == 0 && joiner != GROUP_NO_JOINER)
        rc = ctl_publish(group->ctl, group_view_tag(group->view_id, STEP_READY), &ready, 1,
                         1ull << joiner);
    if (rc == 0)
        rc = gather(group, survivors, group->view_id, group_view_tag(group->view_id, STEP_READY),
                    all_ready, 1, "start of the view");
    if (rc == 0 && joiner != GROUP_NO_JOINER &&
        gather(group, 1ull << joiner, group->view_id, group_view_tag(group->view_id, STEP_READY),
               all_ready, 1, "joiner's start") < 0) {
        /* A joiner lost on its way in is a failure in the new view, not a
         * reason to stop: the next change removes it. */
        sp_log(SP_LOG_WARN, "view", "view %llu: joiner %u never started (%s)",
               (unsigned long long)group->view_id, joiner, spindle_errmsg());
        pthread_mutex_lock(&group->lock);
        if (group->suspected == 0)
            group->detected_ns = sp_now_ns();
        group->suspected |= 1ull << (group->num_rows - 1);
        pthread_mutex_unlock(&group->lock);
    }
    sp_log(SP_LOG_DEBUG, "view", "view %llu ready (%d), %zu resends",
           (unsigned long long)group->view_id, rc, num_resends);
    if (rc == 0)
        rc = resend_all(group->smc, resends, num_resends);
    /* Only now may application threads send in the new view: their new
     * messages must follow the resends. */
    pthread_rwlock_unlock(&group->smc_lock);
    resends_free(resends, num_resends);
    if (rc == SPINDLE_ETIMEDOUT) /* installed: no retry under another set */
        rc = sp_error(SPINDLE_EUNREACH, "%s", spindle_errmsg());
    if (rc == 0)
        group_report_view(group, mask, old_ids, old_rows, joiner);
    return rc;
}

/* Tries the next view under the suspected set; when the set grows during
 * an attempt, tries again under the larger one (at most once per member).
 * An attempt is never repeated under the same set: its rendezvous holds
 * descriptors of a next view that others may already have connected to. */
static int view_change(struct spindle_group *group)
{
    smc_group_wedge(group->smc);
    /* Survivors asleep on their doorbell would notice the failure only at
     * their next heartbeat: wake them so they see it and join at once. */
    sst_engine_alert(group->engine);
    int rc = SPINDLE_ETIMEDOUT;
    uint64_t tried = 0;
    uint32_t tried_joiner = GROUP_NO_JOINER;
    for (int attempt = 0; attempt <= SST_MAX_ROWS && rc == SPINDLE_ETIMEDOUT; attempt++) {
        pthread_mutex_lock(&group->lock);
        uint64_t mask = group->suspected;
        /* A join goes ahead only in a change without failures: the
         * joiner's table was made for the rows of the failure-free view. */
        uint32_t joiner = group->joiner.active && mask == 0 ? group->joiner.id : GROUP_NO_JOINER;
        bool drop = group->joiner.active && mask != 0;
        pthread_mutex_unlock(&group->lock);
        if (drop)
            group_join_abort(group, SPINDLE_EAGAIN,
                             "a member failed while the joiner was being admitted");
        if (attempt > 0 && mask == tried && joiner == tried_joiner)
            break; /* timed out with nothing new suspected: give up */
        tried = mask;
        tried_joiner = joiner;
        uint32_t survivors = group->num_rows - (uint32_t)__builtin_popcountll(mask);
        if ((mask >> group->my_row) & 1)
            return sp_error(SPINDLE_EPEERFAILED, "this member was reported failed");
        if (2 * survivors <= group->num_rows)
            return sp_error(SPINDLE_EMINORITY,
                            "view %llu: only %u of %u members survive, not a majority: this "
                            "member is in a minority and stops",
                            (unsigned long long)group->view_id, survivors, group->num_rows);
        rc = try_change(group, mask, joiner);
        if (rc == SPINDLE_ETIMEDOUT)
            sp_log(SP_LOG_WARN, "view", "view %llu: survivors did not meet (%s)",
                   (unsigned long long)group->view_id, spindle_errmsg());
    }
    return rc;
}

static void *membership_main(void *arg)
{
    struct spindle_group *group = arg;
    pthread_mutex_lock(&group->lock);
    while (!group->stop) {
        /* In the shutdown barrier departures are the others finishing, but
         * a joiner the leader admitted before it got there still joins:
         * the barrier then restarts in the new view, with the joiner. */
        if (!group->joiner.active && (group->suspected == 0 || group->closing)) {
            /* Idle: a group that takes joins looks for join requests and
             * announcements every few milliseconds; failures wake it. A
             * leader that is closing refuses new requests. */
            bool poll = group->joinable;
            struct timespec ts;
            deadline_in(&ts, poll ? 15 : 1000);
            pthread_cond_timedwait(&group->cond, &group->lock, &ts);
            if (poll && (group->suspected == 0 || group->closing) && !group->stop) {
                pthread_mutex_unlock(&group->lock);
                group_join_poll(group);
                pthread_mutex_lock(&group->lock);
            }
            continue;
        }
        group->changing = true;
        pthread_mutex_unlock(&group->lock);
        int rc = view_change(group);
        char why[sizeof group->terminal_msg];
        if (rc < 0) {
            snprintf(why, sizeof why, "%s", spindle_errmsg());
            sp_log(SP_LOG_ERROR, "view", "view change failed, member stops: %s", why);
            smc_group_wedge(group->smc);
        }
        pthread_mutex_lock(&group->lock);
        if (rc < 0) {
            group->terminal = rc;
            snprintf(group->terminal_msg, sizeof group->terminal_msg, "%s", why);
        }
        group->changing = false;
        pthread_cond_broadcast(&group->cond);
        if (rc < 0)
            break;
    }
    pthread_mutex_unlock(&group->lock);
    return NULL;
}

int group_membership_start(struct spindle_group *group)
{
    if (!group->options.tolerate_failures)
        return 0;
    if (pthread_create(&group->thread, NULL, membership_main, group) != 0)
        return sp_error(SPINDLE_ENOMEM, "cannot start the membership thread");
    group->thread_started = true;
    return 0;
}

void group_membership_stop(struct spindle_group *group)
{
    if (!group->thread_started)
        return;
    pthread_mutex_lock(&group->lock);
    group->stop = true;
    pthread_cond_broadcast(&group->cond);
    pthread_mutex_unlock(&group->lock);
    pthread_join(group->thread, NULL);
    group->thread_started = false;
}
