/* Building the next view and the default layouts. See view.h. */
#include <string.h>

#include "util/error.h"
#include "view/view.h"

int view_apply_layout(struct view *next, const struct view *prev, view_layout_fn layout,
                      void *layout_ctx)
{
    view_clear_layout(next);
    int rc = (layout != NULL ? layout : view_layout_single)(layout_ctx, prev, next);
    if (rc < 0) {
        view_clear_layout(next);
        return rc;
    }
    rc = view_validate(next);
    if (rc < 0)
        view_clear_layout(next);
    return rc;
}

int view_make_next(const struct view *prev, uint64_t removed_mask,
                   const struct view_member *joiners, uint32_t num_joiners, view_layout_fn layout,
                   void *layout_ctx, struct view *next)
{
    view_clear(next);
    /* A change that removes half or more of prev could be the work of a
     * minority partition: refuse it (Derecho's partition rule). */
    int rc = view_check_majority(prev, removed_mask);
    if (rc < 0)
        return rc;
    next->id = prev->id + 1;
    for (uint32_t rank = 0; rank < prev->num_members; rank++) {
        if (removed_mask & (1ull << rank))
            continue;
        next->members[next->num_members++] = prev->members[rank];
    }
    for (uint32_t i = 0; i < num_joiners; i++) {
        const struct view_member *joiner = &joiners[i];
        rc = view_add_member(next, joiner->id, joiner->host, joiner->port, &joiner->address);
        if (rc < 0)
            goto fail;
    }
    rc = view_apply_layout(next, prev, layout, layout_ctx);
    if (rc < 0)
        goto fail;
    return 0;
fail:
    view_clear(next);
    return rc;
}

int view_layout_single(void *ctx, const struct view *prev, struct view *next)
{
    (void)ctx;
    (void)prev;
    if (next->num_members == 0)
        return sp_error(SPINDLE_EAGAIN, "view %llu has no members to lay out",
                        (unsigned long long)next->id);
    uint32_t ids[VIEW_MAX_MEMBERS];
    for (uint32_t i = 0; i < next->num_members; i++)
        ids[i] = next->members[i].id;
    int rc = view_add_subgroup(next);
    if (rc < 0)
        return rc;
    rc = view_add_shard(next, ids, next->num_members, ids, next->num_members);
    return rc < 0 ? rc : 0;
}

struct shard_fill {
    uint32_t count;
    uint32_t ids[VIEW_MAX_MEMBERS];
};

/* Rank of id in view, or -1 (no error recorded: absence is expected). */
static int rank_in(const struct view *view, uint32_t id)
{
    for (uint32_t i = 0; i < view->num_members; i++)
        if (view->members[i].id == id)
            return (int)i;
    return -1;
}

/* Keeps prev's surviving shard members where they were, when prev was laid
 * out with the same number of shards in one subgroup. Marks them used. */
static void keep_survivors(const struct view *prev, const struct view *next, uint32_t num_shards,
                           uint32_t shard_size, struct shard_fill *fill, uint64_t *used)
{
    if (prev == NULL || prev->num_subgroups != 1 || prev->num_shards != num_shards)
        return;
    for (uint32_t j = 0; j < num_shards; j++) {
        const struct view_shard *old = &prev->shards[j];
        for (uint32_t i = 0; i < old->num_members && fill[j].count < shard_size; i++) {
            int rank = rank_in(next, old->members[i]);
            if (rank < 0 || (*used & (1ull << rank)))
                continue;
            *used |= 1ull << rank;
            fill[j].ids[fill[j].count++] = old->members[i];
        }
    }
}

int view_layout_sharded(void *ctx, const struct view *prev, struct view *next)
{
    const struct view_sharding *sharding = ctx;
    if (sharding == NULL || sharding->num_shards == 0 || sharding->shard_size == 0 ||
        sharding->shard_size > VIEW_MAX_MEMBERS || sharding->num_senders > sharding->shard_size)
        return sp_error(SPINDLE_EINVAL,
                        "sharded layout needs num_shards >= 1, 1 <= shard_size <= %d and "
                        "num_senders <= shard_size",
                        VIEW_MAX_MEMBERS);
    uint32_t num_shards = sharding->num_shards, shard_size = sharding->shard_size;
    uint64_t needed = (uint64_t)num_shards * shard_size;
    if (needed > next->num_members)
        return sp_error(SPINDLE_EAGAIN, "view %llu has %u members; %u shards of %u need %llu",
                        (unsigned long long)next->id, next->num_members, num_shards, shard_size,
                        (unsigned long long)needed);
    /* needed <= 64 here, so at most 64 shards. */
    struct shard_fill fill[VIEW_MAX_MEMBERS];
    memset(fill, 0, sizeof fill);
    uint64_t used = 0;
    keep_survivors(prev, next, num_shards, shard_size, fill, &used);
    /* Deal the unassigned members in rank order to shards with vacancies,
     * cycling over shards: on a first view rank r lands in shard r % N. */
    uint32_t shard = 0;
    for (uint32_t rank = 0; rank < next->num_members; rank++) {
        if (used & (1ull << rank))
            continue;
        uint32_t tries = 0;
        while (fill[shard].count == shard_size && tries++ < num_shards)
            shard = (shard + 1) % num_shards;
        if (fill[shard].count == shard_size)
            break; /* every shard is full: the rest are spares */
        fill[shard].ids[fill[shard].count++] = next->members[rank].id;
        used |= 1ull << rank;
        shard = (shard + 1) % num_shards;
    }
    int rc = view_add_subgroup(next);
    if (rc < 0)
        return rc;
    uint32_t senders = sharding->num_senders ? sharding->num_senders : shard_size;
    for (uint32_t j = 0; j < num_shards; j++) {
        rc = view_add_shard(next, fill[j].ids, fill[j].count, fill[j].ids, senders);
        if (rc < 0)
            return rc;
    }
    return 0;
}
