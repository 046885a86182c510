/* SMC group construction: layout validation, the SST schema, lifecycle. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "smc/smc_impl.h"
#include "util/error.h"

int smc_layout_validate(const struct smc_layout *layout, uint32_t subgroup, uint32_t num_rows)
{
    if (layout->num_members == 0 || layout->num_members > num_rows)
        return sp_error(SPINDLE_EINVAL, "subgroup %u: num_members %u must be 1..%u", subgroup,
                        layout->num_members, num_rows);
    if (layout->num_senders > layout->num_members)
        return sp_error(SPINDLE_EINVAL, "subgroup %u: num_senders %u exceeds num_members %u",
                        subgroup, layout->num_senders, layout->num_members);
    if (layout->window_size == 0 || layout->window_size > SPINDLE_MAX_WINDOW)
        return sp_error(SPINDLE_EINVAL, "subgroup %u: window_size %u must be 1..%u", subgroup,
                        layout->window_size, SPINDLE_MAX_WINDOW);
    if (layout->max_payload == 0 || layout->max_payload > SPINDLE_MAX_PAYLOAD)
        return sp_error(SPINDLE_EINVAL, "subgroup %u: max_payload %u must be 1..%u", subgroup,
                        layout->max_payload, SPINDLE_MAX_PAYLOAD);
    uint64_t slot = SMC_HEADER_SIZE + (((uint64_t)layout->max_payload + 7) & ~7ull);
    if (slot * layout->window_size > SMC_MAX_RING_SIZE)
        return sp_error(SPINDLE_EINVAL,
                        "subgroup %u: window_size %u x slot %llu bytes exceeds the ring limit "
                        "of %u bytes",
                        subgroup, layout->window_size, (unsigned long long)slot, SMC_MAX_RING_SIZE);
    if (layout->mode != SPINDLE_MODE_ATOMIC && layout->mode != SPINDLE_MODE_UNORDERED)
        return sp_error(SPINDLE_EINVAL, "subgroup %u: mode %d is unknown", subgroup,
                        (int)layout->mode);
    for (uint32_t i = 0; i < layout->num_members; i++) {
        if (layout->members[i] >= num_rows)
            return sp_error(SPINDLE_EINVAL, "subgroup %u: member %u is not in the group of %u",
                            subgroup, layout->members[i], num_rows);
        if (smc_find_row(layout->members, i, layout->members[i]) >= 0)
            return sp_error(SPINDLE_EINVAL, "subgroup %u: member %u is listed twice", subgroup,
                            layout->members[i]);
    }
    for (uint32_t i = 0; i < layout->num_senders; i++) {
        if (smc_find_row(layout->members, layout->num_members, layout->senders[i]) < 0)
            return sp_error(SPINDLE_EINVAL, "subgroup %u: sender %u is not a member", subgroup,
                            layout->senders[i]);
        if (smc_find_row(layout->senders, i, layout->senders[i]) >= 0)
            return sp_error(SPINDLE_EINVAL, "subgroup %u: sender %u is listed twice", subgroup,
                            layout->senders[i]);
    }
    return 0;
}

/* Adds count (>= 1) counters that must be contiguous; returns the first
 * offset. */
static int add_counters(struct sst_schema *schema, uint32_t count, uint32_t *offset)
{
    if (count == 0)
        return sp_error(SPINDLE_EINVAL, "SST schema: a run of 0 counters");
    int first = sst_schema_add_counter(schema);
    if (first < 0)
        return first;
    for (uint32_t i = 1; i < count; i++) {
        int col = sst_schema_add_counter(schema);
        if (col < 0)
            return col;
        if (sst_column_offset(schema, col) != sst_column_offset(schema, first) + 8 * i)
            return sp_error(SPINDLE_EIO, "SST schema placed counter %u out of line", i);
    }
    *offset = sst_column_offset(schema, first);
    return 0;
}

static int add_subgroup_columns(struct sst_schema *schema, struct smc_subgroup *sub)
{
    uint32_t senders = sub->layout.num_senders;
    /* Atomic subgroups carry persisted_num after delivered_num in every
     * member's row, logged or not: a member cannot know whether the
     * others log it, and rows must agree. */
    bool atomic = sub->layout.mode == SPINDLE_MODE_ATOMIC;
    int rc = add_counters(schema, senders + (atomic ? 2 : 1), &sub->received_offset);
    if (rc < 0)
        return rc;
    sub->delivered_offset = sub->received_offset + 8 * senders;
    sub->persisted_offset = atomic ? sub->delivered_offset + 8 : 0;
    rc = add_counters(schema, 2, &sub->sent_offset);
    if (rc < 0)
        return rc;
    sub->null_offset = sub->sent_offset + 8;
    return 0;
}

/* Where sub's rings are: in my side region, and (when I send) where my
 * ring sits in each peer's. */
static void place_rings(struct smc_group *group, const struct smc_side_shape *shape,
                        struct smc_subgroup *sub)
{
    sub->ring_stride = smc_ring_stride(&sub->layout);
    if (sub->my_member_rank < 0)
        return;
    for (uint32_t s = 0; s < sub->layout.num_senders; s++)
        sub->ring_at[s] = smc_side_ring(shape, sub->index, s, group->my_row);
    if (sub->my_sender_rank < 0)
        return;
    uint32_t mine = (uint32_t)sub->my_sender_rank;
    for (uint32_t i = 0; i < sub->num_peers; i++)
        sub->ring_at_peer[i] = smc_side_ring(shape, sub->index, mine, sub->peers[i]);
}

/* On a transport with a slice alignment, this member imports of each
 * peer's side region only its own slice (smc_side_slice). */
static int confine_to_slices(struct smc_group *group, const struct smc_side_shape *shape)
{
    if (shape->align == 0)
        return 0;
    for (uint32_t row = 0; row < group->num_rows; row++) {
        if (row == group->my_row)
            continue;
        uint64_t offset, length;
        smc_side_slice(shape, group->my_row, row, &offset, &length);
        int rc = sst_table_set_side_slice(group->table, row, offset, length);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int init_subgroup(struct smc_group *group, struct smc_subgroup *sub, uint32_t index,
                         const struct smc_layout *layout)
{
    sub->layout = *layout;
    sub->index = index;
    sub->my_member_rank = smc_find_row(layout->members, layout->num_members, group->my_row);
    sub->my_sender_rank = smc_find_row(layout->senders, layout->num_senders, group->my_row);
    sub->slot_size = SMC_HEADER_SIZE + ((layout->max_payload + 7u) & ~7u);
    for (uint32_t i = 0; i < layout->num_members; i++)
        if (layout->members[i] != group->my_row)
            sub->peers[sub->num_peers++] = layout->members[i];
    uint32_t window = layout->window_size;
    uint32_t senders = layout->num_senders;
    if (sub->my_sender_rank >= 0) {
        sub->slot_position = calloc(window, sizeof *sub->slot_position);
        sub->slot_length = calloc(window, sizeof *sub->slot_length);
        if (sub->slot_position == NULL || sub->slot_length == NULL)
            return sp_error(SPINDLE_ENOMEM, "subgroup %u: no memory for %u slots", index, window);
    }
    bool persists = (group->options.persist[index / 64] >> (index % 64)) & 1;
    if (persists && layout->mode == SPINDLE_MODE_ATOMIC && sub->my_member_rank >= 0) {
        sub->persists = true;
        sub->marks = calloc(SMC_PERSIST_MARKS, sizeof *sub->marks);
        /* num_members >= 1 (validated); the analyzer cannot tell. */
        sub->column_seen =
            calloc(layout->num_members > 0 ? layout->num_members : 1, sizeof *sub->column_seen);
        if (sub->marks == NULL || sub->column_seen == NULL)
            return sp_error(SPINDLE_ENOMEM, "subgroup %u: no memory for persistence marks", index);
    }
    if (sub->my_member_rank < 0 || senders == 0)
        return 0;
    sub->senders = calloc(senders, sizeof *sub->senders);
    sub->batch = calloc((size_t)senders * window, sizeof *sub->batch);
    if (sub->senders == NULL || sub->batch == NULL)
        return sp_error(SPINDLE_ENOMEM, "subgroup %u: no memory for %u senders", index, senders);
    for (uint32_t s = 0; s < senders; s++) {
        sub->senders[s].row = layout->senders[s];
        sub->senders[s].app_position = calloc(window, sizeof(uint64_t));
        sub->senders[s].app_length = calloc(window, sizeof(uint32_t));
        if (sub->senders[s].app_position == NULL || sub->senders[s].app_length == NULL)
            return sp_error(SPINDLE_ENOMEM, "subgroup %u: no memory for sender %u", index, s);
    }
    return 0;
}

static void free_subgroup(struct smc_subgroup *sub)
{
    if (sub->senders != NULL)
        for (uint32_t s = 0; s < sub->layout.num_senders; s++) {
            free(sub->senders[s].app_position);
            free(sub->senders[s].app_length);
        }
    free(sub->senders);
    free(sub->batch);
    free(sub->slot_position);
    free(sub->slot_length);
    free(sub->marks);
    free(sub->column_seen);
}

/* The table (counters only) and its side region (this member's rings). */
static int build_table(struct smc_group *group, const struct smc_layout *layouts)
{
    struct sst_schema *schema = malloc(sizeof *schema);
    if (schema == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the SST schema");
    sst_schema_init(schema);
    int rc = 0;
    for (uint32_t g = 0; g < group->num_subgroups && rc == 0; g++)
        rc = add_subgroup_columns(schema, &group->subgroups[g]);
    if (rc == 0)
        rc = smc_p2p_add_columns(group, schema, group->options.p2p_window);
    if (rc == 0)
        rc = sst_table_create(group->engine, schema, group->num_rows, group->my_row, &group->table);
    free(schema);
    if (rc != 0)
        return rc;
    struct smc_side_shape shape = {
        .layouts = layouts,
        .num_subgroups = group->num_subgroups,
        .num_rows = group->num_rows,
        .align = sst_table_slice_align(group->table),
        .p2p_ring_bytes = group->p2p.enabled ? group->p2p.ring_bytes : 0,
    };
    for (uint32_t g = 0; g < group->num_subgroups; g++)
        place_rings(group, &shape, &group->subgroups[g]);
    smc_p2p_init_row(group);
    smc_p2p_place(group, &shape);
    uint64_t side = smc_side_size(&shape, group->my_row);
    if (side == 0)
        return 0;
    rc = sst_table_set_side_region(group->table, (size_t)side, TP_MR_NONPINNED);
    return rc != 0 ? rc : confine_to_slices(group, &shape);
}

/* smc_options.first_position (a test hook): every stream of every subgroup
 * starts at position first, in this member's state and in its own row
 * (the others' rows move from 0 past first with their first pushes, which
 * every member makes before anything it holds can be delivered). */
static void start_streams_at(struct smc_group *group, uint64_t first)
{
    for (uint32_t g = 0; g < group->num_subgroups; g++) {
        struct smc_subgroup *sub = &group->subgroups[g];
        uint32_t senders = sub->layout.num_senders;
        if (sub->my_sender_rank >= 0) {
            sub->next_position = first;
            sub->published = first;
            sst_write_u64(group->table, sub->sent_offset, first);
        }
        if (sub->my_member_rank < 0 || senders == 0)
            continue;
        for (uint32_t s = 0; s < senders; s++) {
            sub->senders[s].recv_position = first;
            sst_write_u64(group->table, sub->received_offset + 8 * s, first);
        }
        /* Atomic: sequence numbers below round first are all nulls. */
        sub->delivered = sub->layout.mode == SPINDLE_MODE_ATOMIC ? first * senders : 0;
        sst_write_u64(group->table, sub->delivered_offset, sub->delivered);
        if (sub->persists) {
            /* Nulls need no disk: the column starts where delivery does. */
            sub->marked = sub->persisted = sub->frontier_reported = sub->delivered;
            __atomic_store_n(&sub->delivered_through, sub->delivered, __ATOMIC_RELEASE);
            __atomic_store_n(&sub->frontier, sub->delivered, __ATOMIC_RELEASE);
            sst_write_u64(group->table, sub->persisted_offset, sub->persisted);
        }
    }
}

int smc_group_create(struct sst_engine *engine, const struct smc_layout *layouts,
                     uint32_t num_subgroups, uint32_t num_rows, uint32_t my_row,
                     const struct smc_options *options, struct smc_group **out)
{
    if (engine == NULL || layouts == NULL || options == NULL || out == NULL)
        return sp_error(SPINDLE_EINVAL, "smc_group_create: null argument");
    if (num_subgroups == 0)
        return sp_error(SPINDLE_EINVAL, "num_subgroups 0: a group needs at least one subgroup");
    if (num_rows == 0 || num_rows > SST_MAX_ROWS || my_row >= num_rows)
        return sp_error(SPINDLE_EINVAL, "member %u of %u is outside 0..%u", my_row, num_rows,
                        SST_MAX_ROWS - 1);
    for (uint32_t g = 0; g < num_subgroups; g++) {
        int rc = smc_layout_validate(&layouts[g], g, num_rows);
        if (rc < 0)
            return rc;
    }
    if (options->first_position >= SMC_MAX_FIRST_POSITION)
        return sp_error(SPINDLE_EINVAL, "first_position %llu must be below 2^57",
                        (unsigned long long)options->first_position);
    struct smc_group *group = calloc(1, sizeof *group);
    if (group == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the group");
    group->engine = engine;
    group->options = *options;
    group->num_rows = num_rows;
    group->my_row = my_row;
    group->num_subgroups = num_subgroups;
    group->window_holder_row = -1;
    group->slow_row = -1;
    pthread_mutex_init(&group->wait_lock, NULL);
    /* Waiters compute deadlines on CLOCK_MONOTONIC. */
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&group->wait_cond, &attr);
    pthread_condattr_destroy(&attr);
    int rc = 0;
    group->subgroups = calloc(num_subgroups, sizeof *group->subgroups);
    if (group->subgroups == NULL)
        rc = sp_error(SPINDLE_ENOMEM, "no memory for %u subgroups", num_subgroups);
    for (uint32_t g = 0; g < num_subgroups && rc == 0; g++)
        rc = init_subgroup(group, &group->subgroups[g], g, &layouts[g]);
    if (rc == 0)
        rc = build_table(group, layouts);
    if (rc == 0 && options->first_position > 0)
        start_streams_at(group, options->first_position);
    if (rc < 0) {
        smc_group_destroy(group);
        return rc;
    }
    *out = group;
    return 0;
}

/* Grants each other member, in my side region, its ring in every subgroup
 * it sends in and I belong to, and its point-to-point ring to me: the
 * bytes a writer imports of a peer's side region on a sliced transport
 * (smc_side_slice), named one ring at a time because the packed layout
 * scatters a writer's rings. First a grant of nothing (to myself): a
 * region never granted would take every peer's writes, and whether any
 * ring here has another writer depends on the subgroups and on the
 * point-to-point rings, so a member that receives from nobody still
 * exports a region no peer may write. */
static int grant_side(struct smc_group *group, const uint32_t *member_of_row)
{
    if (sst_side(group->table) == NULL)
        return 0;
    int none = sst_table_grant_side(group->table, member_of_row[group->my_row], 0, 0);
    if (none != 0)
        return none;
    for (uint32_t g = 0; g < group->num_subgroups; g++) {
        const struct smc_subgroup *sub = &group->subgroups[g];
        if (sub->my_member_rank < 0)
            continue;
        for (uint32_t s = 0; s < sub->layout.num_senders; s++) {
            uint32_t row = sub->layout.senders[s];
            if (row == group->my_row)
                continue;
            int rc = sst_table_grant_side(group->table, member_of_row[row], sub->ring_at[s],
                                          sub->ring_stride);
            if (rc != 0)
                return rc;
        }
    }
    const struct smc_p2p *p2p = &group->p2p;
    for (uint32_t row = 0; p2p->enabled && row < group->num_rows; row++) {
        if (row == group->my_row)
            continue;
        int rc = sst_table_grant_side(group->table, member_of_row[row], p2p->in_at[row],
                                      p2p->ring_bytes);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int smc_group_grant_writes(struct smc_group *group, const uint32_t *member_of_row)
{
    int rc = sst_table_grant_rows(group->table, member_of_row);
    return rc != 0 ? rc : grant_side(group, member_of_row);
}

int smc_group_export(struct smc_group *group, struct sst_member_desc *out)
{
    return sst_table_export(group->table, out);
}

int smc_group_connect(struct smc_group *group, const struct sst_member_desc *descs, int timeout_ms,
                      uint64_t *failed)
{
    return sst_table_connect(group->table, descs, timeout_ms, failed);
}

int smc_group_start(struct smc_group *group)
{
    int rc = sst_predicate_add(group->engine, smc_predicate, smc_trigger, group, SST_PRED_RECURRENT,
                               &group->predicate_id);
    if (rc == 0)
        rc = sst_predicate_set_arrival(group->engine, group->predicate_id, smc_arrival_trigger);
    if (rc == 0) {
        group->started = true;
        __atomic_store_n(&group->own_passes, 1, __ATOMIC_RELEASE);
    }
    if (rc == 0)
        rc = smc_p2p_start(group);
    return rc;
}

void smc_group_stop(struct smc_group *group)
{
    if (group == NULL)
        return;
    __atomic_store_n(&group->stopped, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&group->own_passes, 0, __ATOMIC_RELEASE);
    if (group->started) {
        sst_predicate_remove(group->engine, group->predicate_id);
        group->started = false;
    }
    smc_p2p_stop(group);
    smc_wake_waiters(group);
}

void smc_group_destroy(struct smc_group *group)
{
    if (group == NULL)
        return;
    smc_group_stop(group);
    if (group->table != NULL)
        sst_table_destroy(group->table);
    if (group->subgroups != NULL)
        for (uint32_t g = 0; g < group->num_subgroups; g++)
            free_subgroup(&group->subgroups[g]);
    free(group->subgroups);
    pthread_cond_destroy(&group->wait_cond);
    pthread_mutex_destroy(&group->wait_lock);
    free(group);
}

void smc_group_stats(struct smc_group *group, struct smc_stats *out, bool locked)
{
    if (!locked)
        sst_engine_lock(group->engine);
    *out = group->stats;
    if (!locked)
        sst_engine_unlock(group->engine);
    /* Commits take no lock (smc_send.c): counted from committed. */
    out->messages_sent = 0;
    for (uint32_t g = 0; g < group->num_subgroups; g++)
        out->messages_sent += __atomic_load_n(&group->subgroups[g].committed, __ATOMIC_RELAXED);
    out->window_full = __atomic_load_n(&group->window_full, __ATOMIC_RELAXED);
    out->window_full_ns = __atomic_load_n(&group->window_full_ns, __ATOMIC_RELAXED);
    out->window_holder_row = __atomic_load_n(&group->window_holder_row, __ATOMIC_RELAXED);
}

void smc_group_hold_frontier(struct smc_group *group)
{
    __atomic_store_n(&group->frontier_held, 1, __ATOMIC_RELEASE);
}

void smc_group_release_frontier(struct smc_group *group)
{
    sst_engine_lock(group->engine);
    __atomic_store_n(&group->frontier_held, 0, __ATOMIC_RELEASE);
    sst_engine_unlock(group->engine);
    sst_engine_wake(group->engine);
}

int smc_group_persisted(struct smc_group *group, uint32_t subgroup, uint64_t *local,
                        uint64_t *global)
{
    if (group == NULL || subgroup >= group->num_subgroups)
        return sp_error(SPINDLE_EINVAL, "subgroup %u is unknown (the group has %u)", subgroup,
                        group == NULL ? 0 : group->num_subgroups);
    struct smc_subgroup *sub = &group->subgroups[subgroup];
    if (!sub->persists)
        return sp_error(SPINDLE_EINVAL,
                        "subgroup %u has no persistence frontier here: it is not logged, or "
                        "this member is not in it",
                        subgroup);
    /* The column is this member's own row: an atomic word. */
    *local = sst_read_u64(group->table, group->my_row, sub->persisted_offset);
    *global = __atomic_load_n(&sub->frontier, __ATOMIC_ACQUIRE);
    return 0;
}

struct sst_table *smc_group_table(struct smc_group *group)
{
    return group->table;
}

void smc_group_fail(struct smc_group *group, int error)
{
    int expected = 0;
    __atomic_compare_exchange_n(&group->failed, &expected, error, false, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
    smc_wake_waiters(group);
}

/* The lock orders the wake after a waiter's check (a waiter that found
 * nothing is then in its wait); the broadcast comes after the unlock, so
 * that a woken waiter does not block at once on the lock still held. */
void smc_wake_waiters(struct smc_group *group)
{
    pthread_mutex_lock(&group->wait_lock);
    pthread_mutex_unlock(&group->wait_lock);
    pthread_cond_broadcast(&group->wait_cond);
}
