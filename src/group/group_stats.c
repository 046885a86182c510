/* What the public handle reports: statistics, identity, size, status. */
#include <string.h>

#include "group/group_impl.h"
#include "util/error.h"
#include "util/sized.h"

/* Copies the multicast's and the engine's counters into out. */
static void fill_stats(const struct smc_stats *smc, const struct sst_engine_stats *engine,
                       struct spindle_stats *out)
{
    out->messages_sent = smc->messages_sent;
    out->messages_delivered = smc->messages_delivered;
    out->nulls_sent = smc->nulls_sent;
    out->nulls_received = smc->nulls_received;
    out->writes_posted = engine->writes_posted;
    out->doorbells = engine->doorbells;
    out->pushes = engine->pushes;
    out->post_ns = engine->post_ns;
    out->predicate_passes = engine->passes;
    out->sleeps = engine->sleeps;
    out->wakeups_sent = engine->wakeups_sent;
    out->pinned_bytes = engine->pinned_bytes;
    memcpy(out->send_batches, smc->send_batches, sizeof out->send_batches);
    memcpy(out->receive_batches, smc->receive_batches, sizeof out->receive_batches);
    memcpy(out->delivery_batches, smc->delivery_batches, sizeof out->delivery_batches);
    out->send_batch_count = smc->send_batch_count;
    out->send_batch_messages = smc->send_batch_messages;
    out->receive_batch_count = smc->receive_batch_count;
    out->receive_batch_messages = smc->receive_batch_messages;
    out->delivery_batch_count = smc->delivery_batch_count;
    out->delivery_batch_messages = smc->delivery_batch_messages;
    out->window_full = smc->window_full;
    out->window_full_ns = smc->window_full_ns;
}

/* The library's whole struct; spindle_group_stats_sized copies what the program has. */
static void group_stats(spindle_group_t *group, struct spindle_stats *out)
{
    memset(out, 0, sizeof *out);
    struct smc_stats smc;
    memset(&smc, 0, sizeof smc);
    smc.window_holder_row = -1;
    int32_t holder = -1;
    /* Inside a default-mode upcall the view cannot change, and smc_lock
     * must not be waited for (include/spindle/group.h, "Upcalls"). */
    const struct group_upcall *u = group_upcall_of(group);
    bool lockless = u != NULL && u->lockless;
    struct smc_group *current =
        lockless ? view_upcall_smc(&group->membership) : view_acquire(&group->membership);
    if (current != NULL) {
        smc_group_stats(current, &smc, u != NULL && u->engine_locked);
        /* Rows of the current view name member ids through it. */
        holder = view_member_of_row(&group->membership, smc.window_holder_row);
    }
    if (!lockless)
        view_release(&group->membership);
    struct sst_engine_stats engine;
    memset(&engine, 0, sizeof engine);
    if (group->membership.engine != NULL)
        sst_engine_stats(group->membership.engine, &engine);
    fill_stats(&smc, &engine, out);
    out->window_holder = holder;
    out->log_deliveries_held = smc.deliveries_held;
    out->log_queue_waits = __atomic_load_n(&group->membership.log_queue_waits, __ATOMIC_RELAXED);
    /* Set inside spindle_group_create, before the handle existed. */
    out->log_catchup_records = group->membership.catchup_records;
    out->log_catchup_bytes = group->membership.catchup_bytes;
    group_dispatch_stats(group->dispatch, &out->dispatch_queue_bytes, &out->dispatch_queue_peak);
    /* The appender lives from creation to destroy; its counters are atomics. */
    const struct log_appender *log = group->membership.appender;
    if (log != NULL) {
        out->log_records_durable = log_appender_durable(log);
        out->log_bytes_durable = log_appender_durable_bytes(log);
        out->log_syncs = log_appender_syncs(log);
    }
}

SPINDLE_API int spindle_group_stats_sized(spindle_group_t *group, struct spindle_stats *out,
                                          size_t stats_size)
{
    if (group == NULL || out == NULL)
        return sp_error(SPINDLE_EINVAL, "stats: group or out is NULL");
    int rc = sized_check("spindle_stats", stats_size, SIZED_STATS_MIN);
    if (rc < 0)
        return rc;
    struct spindle_stats full;
    group_stats(group, &full);
    sized_copy_out(out, stats_size, &full, sizeof full);
    return 0;
}

SPINDLE_API int spindle_group_status(spindle_group_t *group)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    return view_status(&group->membership);
}

SPINDLE_API int spindle_group_self(const spindle_group_t *group)
{
    return group == NULL ? -1 : (int)group->options.self;
}

SPINDLE_API int spindle_group_size(const spindle_group_t *group)
{
    return group == NULL ? -1 : (int)view_size(&group->membership);
}
