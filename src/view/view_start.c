/*
 * The first view and the hooks of the public handle: starting a group from
 * its member list, reaching the current multicast, barriers among the
 * members of the current view, and stopping (shutdown, leave, destroy).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/error.h"
#include "view/view_impl.h"

struct ctl_versions view_ctl_versions(void)
{
    struct ctl_versions versions = {SST_LAYOUT_VERSION, SMC_LAYOUT_VERSION};
    return versions;
}

void view_membership_init(struct view_membership *m, const struct view_config *config)
{
    memset(m, 0, sizeof *m);
    m->config = *config;
    pthread_rwlock_init(&m->smc_lock, NULL);
    pthread_mutex_init(&m->lock, NULL);
    pthread_mutex_init(&m->snapshot_lock, NULL);
    pthread_mutex_init(&m->wake_lock, NULL);
    pthread_mutex_init(&m->fetch_lock, NULL);
    pthread_cond_init(&m->cond, NULL);
}

/* Takes the members' identities into the first view: names must differ. */
static int take_identities(struct view_membership *m, const struct view_start_desc *starts,
                           uint32_t num_members)
{
    struct view *view = &m->current->view;
    for (uint32_t i = 0; i < num_members; i++) {
        for (uint32_t j = 0; j < i; j++)
            if (strcmp(starts[j].identity.name, starts[i].identity.name) == 0)
                return sp_error(SPINDLE_EINVAL, "members %u and %u both have the name '%s'", j, i,
                                starts[i].identity.name);
        view->identities[i] = starts[i].identity;
    }
    return 0;
}

/* Exchanges table descriptors and identities with every member and
 * connects the table. */
static int connect_members(struct view_membership *m, uint32_t num_members)
{
    int timeout = m->config.bootstrap_timeout_ms;
    struct view_start_desc mine;
    memset(&mine, 0, sizeof mine);
    mine.identity = m->config.identity;
    int rc = smc_group_export(m->current->smc, &mine.desc);
    if (rc < 0)
        return rc;
    uint8_t encoded[VIEW_WIRE_DESC_SIZE];
    view_wire_encode_desc(&mine, encoded, sizeof encoded);
    uint8_t *all = calloc(num_members, VIEW_WIRE_DESC_SIZE);
    struct view_start_desc *starts = calloc(num_members, sizeof *starts);
    struct sst_member_desc *descs = calloc(num_members, sizeof *descs);
    if (all == NULL || starts == NULL || descs == NULL)
        rc = sp_error(SPINDLE_ENOMEM, "no memory for %u member descriptors", num_members);
    if (rc == 0)
        rc = ctl_allgather(m->ctl, VIEW_TAG_DESCS, encoded, sizeof encoded, all, timeout);
    for (uint32_t i = 0; i < num_members && rc == 0; i++) {
        if (view_wire_decode_desc(all + (size_t)i * VIEW_WIRE_DESC_SIZE, VIEW_WIRE_DESC_SIZE,
                                  &starts[i]) < 0)
            rc = sp_error(SPINDLE_EPROTO, "member %u sent a malformed table descriptor: %s", i,
                          spindle_errmsg());
        descs[i] = starts[i].desc;
    }
    if (rc == 0)
        rc = take_identities(m, starts, num_members);
    if (rc == 0)
        rc = view_epoch_connect(m, m->current, descs, NULL);
    free(starts);
    free(all);
    free(descs);
    return rc;
}

/* Every member is connected before anyone sends. */
static int meet_all(struct view_membership *m, uint32_t num_members)
{
    uint8_t mine[VIEW_WIRE_READY_SIZE];
    view_wire_encode_ready(0, mine, sizeof mine);
    uint8_t *all = calloc(num_members, VIEW_WIRE_READY_SIZE);
    if (all == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for %u ready messages", num_members);
    int rc = ctl_allgather(m->ctl, VIEW_TAG_READY, mine, sizeof mine, all,
                           m->config.bootstrap_timeout_ms);
    for (uint32_t i = 0; i < num_members && rc == 0; i++) {
        uint64_t view = 0;
        if (view_wire_decode_ready(all + (size_t)i * VIEW_WIRE_READY_SIZE, VIEW_WIRE_READY_SIZE,
                                   &view) < 0 ||
            view != 0)
            rc = sp_error(SPINDLE_EPROTO, "member %u sent a malformed start message: %s", i,
                          spindle_errmsg());
    }
    free(all);
    return rc;
}

int view_open_first(struct view_membership *m, struct view *view)
{
    int rc = view_open_engine(m);
    if (rc == 0)
        return view_epoch_create(m, view, &m->current);
    view_clear(view);
    return rc;
}

int view_prepare(struct view_membership *m, const char *group_name,
                 const struct smc_layout *layouts, uint32_t num_subgroups, uint32_t num_members)
{
    snprintf(m->group_name, sizeof m->group_name, "%s", group_name);
    struct view view;
    int rc = view_init_first(&view, num_members, m->config.self, layouts, num_subgroups);
    if (rc == 0)
        rc = view_open_first(m, &view);
    if (rc == 0)
        rc = view_log_view(m, m->current, NULL, 0);
    if (rc == 0)
        __atomic_store_n(&m->num_members, num_members, __ATOMIC_RELEASE);
    return rc;
}

int view_start(struct view_membership *m, struct ctl *ctl, const struct ctl_address *addresses)
{
    uint32_t num_members = m->current->view.num_members;
    m->ctl = ctl;
    if (addresses != NULL)
        memcpy(m->addresses, addresses, num_members * sizeof *addresses);
    m->joinable = addresses != NULL && m->config.tolerate_failures;
    int rc = connect_members(m, num_members);
    if (rc == 0)
        rc = smc_group_start(m->current->smc);
    if (rc == 0)
        view_log_follow(m, m->current->smc);
    if (rc == 0)
        rc = sst_engine_start(m->engine);
    if (rc == 0)
        m->engine_started = true;
    if (rc == 0)
        rc = meet_all(m, num_members);
    if (rc == 0)
        rc = view_thread_start(m);
    return rc;
}

struct smc_group *view_acquire(struct view_membership *m)
{
    pthread_rwlock_rdlock(&m->smc_lock);
    return m->current != NULL ? m->current->smc : NULL;
}

bool view_try_acquire(struct view_membership *m, struct smc_group **smc)
{
    if (pthread_rwlock_tryrdlock(&m->smc_lock) != 0)
        return false;
    *smc = m->current != NULL ? m->current->smc : NULL;
    return true;
}

void view_release(struct view_membership *m)
{
    pthread_rwlock_unlock(&m->smc_lock);
}

int32_t view_member_of_row(const struct view_membership *m, int32_t row)
{
    if (m->current == NULL || row < 0 || (uint32_t)row >= m->current->view.num_members)
        return -1;
    return (int32_t)m->current->view.member_ids[row];
}

int32_t view_row_of_member(const struct view_membership *m, uint32_t id)
{
    if (m->current == NULL)
        return -1;
    const struct view *view = &m->current->view;
    for (uint32_t row = 0; row < view->num_members; row++)
        if (view->member_ids[row] == id)
            return (int32_t)row;
    return -1;
}

struct smc_group *view_held(struct view_membership *m)
{
    return m->current != NULL ? m->current->smc : NULL;
}

int view_identity(struct view_membership *m, uint32_t id, struct spindle_member_identity *out,
                  bool lockless)
{
    if (!lockless)
        pthread_rwlock_rdlock(&m->smc_lock);
    const struct view_epoch *current = __atomic_load_n(&m->current, __ATOMIC_ACQUIRE);
    int rank = current != NULL ? view_rank_of(&current->view, id) : -1;
    if (rank >= 0)
        *out = current->view.identities[rank];
    uint64_t view = current != NULL ? current->view.id : 0;
    if (!lockless)
        pthread_rwlock_unlock(&m->smc_lock);
    if (rank < 0)
        return sp_error(SPINDLE_EINVAL, "member %u is not in view %llu", id,
                        (unsigned long long)view);
    return 0;
}

uint32_t view_size(const struct view_membership *m)
{
    return __atomic_load_n(&m->num_members, __ATOMIC_ACQUIRE);
}

/* One try of a barrier in the current view. 0, SPINDLE_ETIMEDOUT, or
 * 1 when the view changed meanwhile (try again in the new one). */
static int barrier_once(struct view_membership *m, uint64_t deadline)
{
    /* The members of the current view meet under a tag naming the view
     * and the barrier's number in it. A view change meanwhile (a member
     * that will never arrive left) restarts the barrier in the new view,
     * where the numbering starts again for everyone. */
    pthread_rwlock_rdlock(&m->smc_lock);
    uint64_t view = m->current->view.id, members = view_member_mask(&m->current->view);
    uint32_t tag = view_barrier_tag(view, __atomic_fetch_add(&m->barriers, 1, __ATOMIC_RELAXED));
    pthread_rwlock_unlock(&m->smc_lock);
    pthread_mutex_lock(&m->lock);
    m->in_barrier = true;
    m->barrier_view = view;
    m->barrier_tag = tag;
    pthread_mutex_unlock(&m->lock);
    int rc = view_publish_ready(m, view, tag, members);
    while (rc == 0) {
        uint64_t now = sp_now_ns();
        int ms = now >= deadline ? 0 : (int)((deadline - now) / 1000000u);
        rc = view_gather_ready(m, members, view, tag, ms < 50 ? ms : 50, "barrier");
        if (rc == 0 || ms == 0 || __atomic_load_n(&m->view_id, __ATOMIC_ACQUIRE) != view)
            break;
        /* A member's connection is gone (the channel says so at once): wait
         * for the view change that removes it rather than spin. */
        if (rc == SPINDLE_EUNREACH)
            view_wait_change_for(m, 50);
        rc = 0;
    }
    pthread_mutex_lock(&m->lock);
    m->in_barrier = false;
    pthread_mutex_unlock(&m->lock);
    if (rc == 0 || __atomic_load_n(&m->view_id, __ATOMIC_ACQUIRE) == view)
        return rc;
    return 1;
}

int view_barrier(struct view_membership *m, int timeout_ms)
{
    if (m->ctl == NULL || m->current == NULL)
        return sp_error(SPINDLE_EINVAL, "barrier: the group is not bootstrapped");
    uint64_t deadline =
        sp_now_ns() + (uint64_t)(timeout_ms < 0 ? 1 << 30 : timeout_ms) * 1000000ull;
    for (;;) {
        int rc = barrier_once(m, deadline);
        if (rc != 1)
            return rc;
        view_wait_change(m);
    }
}

void view_closing(struct view_membership *m)
{
    pthread_mutex_lock(&m->lock);
    m->closing = true;
    pthread_mutex_unlock(&m->lock);
}

void view_stop(struct view_membership *m)
{
    view_thread_stop(m);
    if (m->engine_started) {
        sst_engine_stop(m->engine);
        m->engine_started = false;
    }
    view_log_follow(m, NULL);
    if (m->current != NULL)
        smc_group_stop(m->current->smc);
}

void view_leave(struct view_membership *m)
{
    view_thread_stop(m);
    sst_engine_announce_leave(m->engine);
    view_stop(m);
}

void view_wake(struct view_membership *m)
{
    struct sst_engine *engine = __atomic_load_n(&m->engine, __ATOMIC_ACQUIRE);
    if (engine != NULL)
        sst_engine_wake(engine);
}

struct smc_group *view_upcall_smc(struct view_membership *m)
{
    struct view_epoch *epoch = __atomic_load_n(&m->current, __ATOMIC_ACQUIRE);
    return epoch != NULL ? epoch->smc : NULL;
}

void view_membership_destroy(struct view_membership *m)
{
    view_thread_stop(m);
    free(m->joiner.state);
    m->joiner.state = NULL;
    if (m->engine_started)
        sst_engine_stop(m->engine);
    view_log_follow(m, NULL); /* the log's writer outlives the multicast */
    view_epoch_free(m->current);
    m->current = NULL;
    view_log_close(m);
    free(m->log_ends);
    m->log_ends = NULL;
    if (m->restart != NULL)
        free(m->restart->configured);
    free(m->restart);
    m->restart = NULL;
    view_restart_streams_free(m);
    if (m->engine != NULL)
        sst_engine_destroy(m->engine);
    ctl_close(m->ctl);
    pthread_cond_destroy(&m->cond);
    pthread_mutex_destroy(&m->lock);
    pthread_mutex_destroy(&m->snapshot_lock);
    pthread_mutex_destroy(&m->wake_lock);
    pthread_mutex_destroy(&m->fetch_lock);
    pthread_rwlock_destroy(&m->smc_lock);
}
