/*
 * The public group API (include/spindle/group.h): bootstrap, one SST engine
 * per group handle, one smc_group for the (single, fixed) membership.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/group.h>

#include "group/group_impl.h"
#include "transport/transport.h"
#include "util/clock.h"
#include "util/crc32c.h"
#include "util/error.h"

enum { TAG_DESCS = 0x5350, TAG_READY, TAG_BARRIER_BASE = 0x40000000 };

SPINDLE_API void spindle_group_options_init(struct spindle_group_options *options)
{
    if (options == NULL)
        return;
    memset(options, 0, sizeof *options);
    options->transport = "shm";
    options->num_members = 1;
    options->bootstrap_kind = SPINDLE_BOOTSTRAP_AUTO;
    options->bootstrap_timeout_ms = 30000;
    options->failure_timeout_ms = 5000;
    options->batching = true;
    options->null_sends = true;
    options->early_unlock = true;
}

static int check_options(const struct spindle_group_options *options, uint32_t num_subgroups)
{
    if (options->join != NULL) /* self and num_members come from the group */
        return num_subgroups == 0 ? sp_error(SPINDLE_EINVAL, "num_subgroups 0: a group needs at "
                                                             "least one subgroup")
               : options->bootstrap_timeout_ms <= 0 || options->failure_timeout_ms <= 0
                   ? sp_error(SPINDLE_EINVAL,
                              "bootstrap_timeout_ms %d and failure_timeout_ms %d "
                              "must be > 0",
                              options->bootstrap_timeout_ms, options->failure_timeout_ms)
               : tp_backend_find(options->transport) == NULL ? SPINDLE_ENOTSUP
                                                             : 0;
    if (options->num_members == 0 || options->num_members > SPINDLE_MAX_MEMBERS)
        return sp_error(SPINDLE_EINVAL, "num_members %u must be 1..%u", options->num_members,
                        SPINDLE_MAX_MEMBERS);
    if (options->self >= options->num_members)
        return sp_error(SPINDLE_EINVAL, "self %u must be below num_members %u", options->self,
                        options->num_members);
    if (num_subgroups == 0)
        return sp_error(SPINDLE_EINVAL, "num_subgroups 0: a group needs at least one subgroup");
    if (options->bootstrap_timeout_ms <= 0)
        return sp_error(SPINDLE_EINVAL, "bootstrap_timeout_ms %d must be > 0",
                        options->bootstrap_timeout_ms);
    if (tp_backend_find(options->transport) == NULL)
        return SPINDLE_ENOTSUP; /* message names the transport and the built ones */
    if (options->failure_timeout_ms <= 0)
        return sp_error(SPINDLE_EINVAL, "failure_timeout_ms %d must be > 0",
                        options->failure_timeout_ms);
    return 0;
}

static int convert_subgroup(const struct spindle_subgroup_config *config, uint32_t index,
                            uint32_t num_rows, struct smc_layout *layout)
{
    memset(layout, 0, sizeof *layout);
    if (config->num_members > num_rows || config->num_members == 0)
        return sp_error(SPINDLE_EINVAL, "subgroup %u: num_members %u must be 1..%u", index,
                        config->num_members, num_rows);
    if (config->num_senders > config->num_members)
        return sp_error(SPINDLE_EINVAL, "subgroup %u: num_senders %u exceeds num_members %u", index,
                        config->num_senders, config->num_members);
    if (config->members == NULL || (config->num_senders > 0 && config->senders == NULL))
        return sp_error(SPINDLE_EINVAL, "subgroup %u: members or senders array is NULL", index);
    layout->num_members = config->num_members;
    memcpy(layout->members, config->members, config->num_members * sizeof(uint32_t));
    layout->num_senders = config->num_senders;
    if (config->num_senders > 0)
        memcpy(layout->senders, config->senders, config->num_senders * sizeof(uint32_t));
    layout->window_size = config->window_size;
    layout->max_payload = config->max_payload;
    layout->mode = config->mode;
    return smc_layout_validate(layout, index, num_rows);
}

int group_open_engine(struct spindle_group *group)
{
    const struct spindle_group_options *o = &group->options;
    struct tp_config config;
    memset(&config, 0, sizeof config);
    config.backend = o->transport;
    config.group_name = group->group_name;
    config.self_id = o->self;
    config.provider = o->provider;
    config.device = o->device;
    config.failure_timeout_ms = o->failure_timeout_ms;
    if (group->boot.kind == SPINDLE_BOOTSTRAP_TCP)
        config.host = group->boot.hosts[o->self].host;
    struct sst_engine_options engine_options;
    sst_engine_options_default(&engine_options);
    engine_options.early_unlock = o->early_unlock;
    int rc = sst_engine_create(&config, &engine_options, &group->engine);
    if (rc == 0)
        sst_engine_on_failure(group->engine, group_on_failure, group);
    return rc;
}

static int build_smc(struct spindle_group *group, const struct spindle_subgroup_config *subgroups,
                     uint32_t num_subgroups)
{
    struct smc_layout *layouts = calloc(num_subgroups, sizeof *layouts);
    if (layouts == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for %u subgroup layouts", num_subgroups);
    int rc = 0;
    for (uint32_t g = 0; g < num_subgroups && rc == 0; g++)
        rc = convert_subgroup(&subgroups[g], g, group->options.num_members, &layouts[g]);
    group->layouts = layouts;
    group->num_subgroups = num_subgroups;
    group->num_rows = group->options.num_members;
    group->my_row = group->options.self;
    group->view_ctx = calloc(1, sizeof *group->view_ctx);
    if (group->view_ctx == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the view context");
    group->view_ctx->group = group;
    for (uint32_t r = 0; r < group->num_rows; r++)
        group->view_ctx->member_ids[r] = r;
    bool wrap = group->options.tolerate_failures;
    struct smc_options smc_options = {
        .batching = group->options.batching,
        .null_sends = group->options.null_sends,
        .deliver = wrap ? group_deliver : group->options.deliver,
        .deliver_ctx = wrap ? (void *)group->view_ctx : group->options.deliver_ctx,
    };
    if (rc == 0)
        rc = smc_group_create(group->engine, layouts, num_subgroups, group->options.num_members,
                              group->options.self, &smc_options, &group->smc);
    return rc;
}

static int connect_members(struct spindle_group *group)
{
    uint32_t n = group->options.num_members;
    int timeout = group->options.bootstrap_timeout_ms;
    struct sst_member_desc mine;
    memset(&mine, 0, sizeof mine);
    int rc = smc_group_export(group->smc, &mine);
    if (rc < 0)
        return rc;
    struct sst_member_desc *all = calloc(n, sizeof *all);
    if (all == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for %u member descriptors", n);
    rc = ctl_allgather(group->ctl, TAG_DESCS, &mine, sizeof mine, all, timeout);
    if (rc == 0)
        rc = smc_group_connect(group->smc, all, timeout);
    free(all);
    if (rc == 0)
        rc = smc_group_start(group->smc);
    if (rc == 0)
        rc = sst_engine_start(group->engine);
    if (rc == 0)
        group->engine_started = true;
    if (rc == 0) {
        /* Every member is connected before anyone sends. */
        uint8_t ready = 1, all_ready[SPINDLE_MAX_MEMBERS];
        rc = ctl_allgather(group->ctl, TAG_READY, &ready, 1, all_ready, timeout);
    }
    return rc;
}

/* Sets up this member's side of the group: a fresh one from the member
 * list, or (options.join) a joiner's; then the membership thread. */
static int create_member(struct spindle_group *group,
                         const struct spindle_subgroup_config *subgroups, uint32_t num_subgroups)
{
    const struct spindle_group_options *options = &group->options;
    if (options->join != NULL)
        return group_join_create(group, subgroups, num_subgroups);
    int rc = group_bootstrap_parse(options, &group->boot);
    if (rc == 0) {
        if (options->group_name != NULL)
            snprintf(group->group_name, sizeof group->group_name, "%s", options->group_name);
        else
            snprintf(group->group_name, sizeof group->group_name, "spindle-%08x",
                     sp_crc32c(0, options->bootstrap, strlen(options->bootstrap)));
        group->options.group_name = group->group_name;
        rc = group_open_engine(group);
    }
    if (rc == 0)
        rc = build_smc(group, subgroups, num_subgroups);
    if (rc == 0)
        rc = group_bootstrap_open(&group->boot, group->group_name, options->self,
                                  options->num_members, options->bootstrap_timeout_ms, &group->ctl);
    if (rc == 0)
        rc = connect_members(group);
    group->joinable = group->boot.kind == SPINDLE_BOOTSTRAP_TCP && options->tolerate_failures;
    group->next_id = options->num_members;
    return rc;
}

SPINDLE_API int spindle_group_create(const struct spindle_group_options *options,
                                     const struct spindle_subgroup_config *subgroups,
                                     uint32_t num_subgroups, spindle_group_t **out)
{
    if (options == NULL || out == NULL || (subgroups == NULL && num_subgroups > 0))
        return sp_error(SPINDLE_EINVAL, "spindle_group_create: null argument");
    int rc = check_options(options, num_subgroups);
    if (rc < 0)
        return rc;
    struct spindle_group *group = calloc(1, sizeof *group);
    if (group == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the group handle");
    group->options = *options;
    pthread_rwlock_init(&group->smc_lock, NULL);
    pthread_mutex_init(&group->lock, NULL);
    pthread_cond_init(&group->cond, NULL);
    rc = create_member(group, subgroups, num_subgroups);
    if (rc == 0)
        rc = group_membership_start(group);
    if (rc < 0) {
        spindle_group_destroy(group);
        return rc;
    }
    *out = group;
    return 0;
}

/* The read side of smc_lock is held from a successful reserve to its
 * commit, so a view change never retires the group under an open slot. */
SPINDLE_API int spindle_reserve(spindle_group_t *group, uint32_t subgroup, size_t size,
                                unsigned flags, void **slot)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    for (;;) {
        pthread_rwlock_rdlock(&group->smc_lock);
        struct smc_group *smc = group->smc;
        int rc = smc_reserve(smc, subgroup, size, flags, slot);
        if (rc == 0)
            return 0;
        pthread_rwlock_unlock(&group->smc_lock);
        rc = group_after_error(group, smc, rc);
        if (rc != 1)
            return rc;
    }
}

SPINDLE_API int spindle_commit(spindle_group_t *group, uint32_t subgroup)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    int rc = smc_commit(group->smc, subgroup);
    if (rc != SPINDLE_EINVAL)
        pthread_rwlock_unlock(&group->smc_lock);
    return rc;
}

SPINDLE_API int spindle_send(spindle_group_t *group, uint32_t subgroup, const void *data,
                             size_t size, unsigned flags)
{
    if (data == NULL && size > 0)
        return sp_error(SPINDLE_EINVAL, "send: data is NULL with size %zu", size);
    void *slot;
    int rc = spindle_reserve(group, subgroup, size, flags, &slot);
    if (rc < 0)
        return rc;
    if (size > 0)
        memcpy(slot, data, size);
    return spindle_commit(group, subgroup);
}

SPINDLE_API int spindle_flush(spindle_group_t *group, int timeout_ms)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    for (;;) {
        pthread_rwlock_rdlock(&group->smc_lock);
        struct smc_group *smc = group->smc;
        int rc = smc_flush(smc, timeout_ms);
        pthread_rwlock_unlock(&group->smc_lock);
        if (rc == 0)
            return 0;
        rc = group_after_error(group, smc, rc);
        if (rc != 1)
            return rc;
    }
}

SPINDLE_API int spindle_barrier(spindle_group_t *group, int timeout_ms)
{
    if (group == NULL || group->ctl == NULL)
        return sp_error(SPINDLE_EINVAL, "barrier: group is NULL or not bootstrapped");
    uint64_t deadline =
        sp_now_ns() + (uint64_t)(timeout_ms < 0 ? 1 << 30 : timeout_ms) * 1000000ull;
    for (;;) {
        /* The members of the current view meet under a tag naming the view
         * and the barrier's number in it. A view change meanwhile (a member
         * that will never arrive left) restarts the barrier in the new view,
         * where the numbering starts again for everyone. */
        uint8_t mine = 1, all[SPINDLE_MAX_MEMBERS];
        pthread_rwlock_rdlock(&group->smc_lock);
        uint64_t view = group->view_id, members = 0;
        for (uint32_t r = 0; r < group->num_rows; r++)
            members |= 1ull << group->view_ctx->member_ids[r];
        uint32_t tag =
            TAG_BARRIER_BASE + (((uint32_t)view & 0x3fffu) << 16) + (group->barriers++ & 0xffffu);
        pthread_rwlock_unlock(&group->smc_lock);
        int rc = ctl_publish(group->ctl, tag, &mine, 1, members);
        while (rc == 0) {
            uint64_t now = sp_now_ns();
            int ms = now >= deadline ? 0 : (int)((deadline - now) / 1000000u);
            rc = ctl_collect(group->ctl, tag, members, all, 1, ms < 50 ? ms : 50, NULL);
            if (rc == 0 || ms == 0 || __atomic_load_n(&group->view_id, __ATOMIC_ACQUIRE) != view)
                break;
            rc = 0;
        }
        if (rc == 0 || __atomic_load_n(&group->view_id, __ATOMIC_ACQUIRE) == view)
            return rc;
        group_wait_change(group);
    }
}

SPINDLE_API int spindle_group_stats(spindle_group_t *group, struct spindle_stats *out)
{
    if (group == NULL || out == NULL)
        return sp_error(SPINDLE_EINVAL, "stats: group or out is NULL");
    memset(out, 0, sizeof *out);
    struct smc_stats smc;
    pthread_rwlock_rdlock(&group->smc_lock);
    smc_group_stats(group->smc, &smc);
    pthread_rwlock_unlock(&group->smc_lock);
    struct sst_engine_stats engine;
    sst_engine_stats(group->engine, &engine);
    out->messages_sent = smc.messages_sent;
    out->messages_delivered = smc.messages_delivered;
    out->nulls_sent = smc.nulls_sent;
    out->nulls_received = smc.nulls_received;
    out->writes_posted = engine.writes_posted;
    out->doorbells = engine.doorbells;
    out->pushes = engine.pushes;
    out->post_ns = engine.post_ns;
    out->predicate_passes = engine.passes;
    out->sleeps = engine.sleeps;
    out->wakeups_sent = engine.wakeups_sent;
    out->pinned_bytes = engine.pinned_bytes;
    memcpy(out->send_batches, smc.send_batches, sizeof out->send_batches);
    memcpy(out->receive_batches, smc.receive_batches, sizeof out->receive_batches);
    memcpy(out->delivery_batches, smc.delivery_batches, sizeof out->delivery_batches);
    out->send_batch_count = smc.send_batch_count;
    out->send_batch_messages = smc.send_batch_messages;
    out->receive_batch_count = smc.receive_batch_count;
    out->receive_batch_messages = smc.receive_batch_messages;
    out->delivery_batch_count = smc.delivery_batch_count;
    out->delivery_batch_messages = smc.delivery_batch_messages;
    return 0;
}

SPINDLE_API int spindle_group_self(const spindle_group_t *group)
{
    return group == NULL ? -1 : (int)group->options.self;
}

SPINDLE_API int spindle_group_size(const spindle_group_t *group)
{
    return group == NULL ? -1 : (int)group->num_rows;
}

SPINDLE_API int spindle_group_shutdown(spindle_group_t *group, int timeout_ms)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    if (group->shut_down)
        return 0;
    int rc = spindle_flush(group, timeout_ms);
    /* From here on departures are the others finishing too: after this
     * member's barrier completes, every member has flushed and may exit at
     * once, which must not start a view change. */
    pthread_mutex_lock(&group->lock);
    group->closing = true;
    pthread_mutex_unlock(&group->lock);
    /* A member that stopped on its own (e.g. cut off in a minority) has
     * nobody to meet: skip the barrier. */
    int stopped = spindle_group_status(group);
    int barrier = stopped < 0 ? stopped : spindle_barrier(group, timeout_ms);
    if (rc == 0)
        rc = barrier;
    group->shut_down = true;
    group_membership_stop(group);
    if (group->engine_started) {
        sst_engine_stop(group->engine);
        group->engine_started = false;
    }
    smc_group_stop(group->smc);
    return rc;
}

SPINDLE_API int spindle_group_leave(spindle_group_t *group, int timeout_ms)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    if (!group->options.tolerate_failures)
        return sp_error(SPINDLE_ENOTSUP, "leave needs tolerate_failures (without it the "
                                         "departure of a member fails the group)");
    if (group->shut_down)
        return sp_error(SPINDLE_ESHUTDOWN, "leave: the member already left or shut down");
    /* Once flushed, every own message is stable, i.e. received by every
     * member, so the survivors' trim delivers all of them. */
    int rc = spindle_flush(group, timeout_ms);
    if (rc != 0)
        return rc;
    group_membership_stop(group);
    sst_engine_announce_leave(group->engine);
    group->shut_down = true;
    if (group->engine_started) {
        sst_engine_stop(group->engine);
        group->engine_started = false;
    }
    smc_group_stop(group->smc);
    return 0;
}

SPINDLE_API void spindle_group_destroy(spindle_group_t *group)
{
    if (group == NULL)
        return;
    group_membership_stop(group);
    if (group->engine_started)
        sst_engine_stop(group->engine);
    smc_group_destroy(group->smc);
    if (group->engine != NULL)
        sst_engine_destroy(group->engine);
    ctl_close(group->ctl);
    free(group->layouts);
    free(group->view_ctx);
    pthread_cond_destroy(&group->cond);
    pthread_mutex_destroy(&group->lock);
    pthread_rwlock_destroy(&group->smc_lock);
    free(group);
}
