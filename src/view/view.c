/* Views: construction, validation and queries. See view.h. */
#include "view/view.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* Rank of id, or -1; records no error (used on success paths too). */
static int find_rank(const struct view *view, uint32_t id)
{
    for (uint32_t i = 0; i < view->num_members; i++)
        if (view->members[i].id == id)
            return (int)i;
    return -1;
}

void view_init(struct view *view, uint64_t id)
{
    memset(view, 0, sizeof *view);
    view->id = id;
}

void view_clear(struct view *view)
{
    free(view->shards);
    view_init(view, 0);
}

void view_clear_layout(struct view *view)
{
    view->num_subgroups = 0;
    view->num_shards = 0;
}

int view_copy(struct view *dst, const struct view *src)
{
    struct view_shard *shards = NULL;
    if (src->num_shards > 0) {
        shards = malloc(sizeof *shards * src->num_shards);
        if (shards == NULL)
            return sp_error(SPINDLE_ENOMEM, "view copy: %u shards", src->num_shards);
        memcpy(shards, src->shards, sizeof *shards * src->num_shards);
    }
    free(dst->shards);
    memcpy(dst, src, sizeof *dst);
    dst->shards = shards;
    dst->shards_capacity = src->num_shards;
    return 0;
}

int view_add_member(struct view *view, uint32_t id, const char *host, uint16_t port,
                    const struct tp_desc *address)
{
    if (view->num_members >= VIEW_MAX_MEMBERS)
        return sp_error(SPINDLE_EINVAL, "view %llu is full (%u members); cannot add member %u",
                        (unsigned long long)view->id, VIEW_MAX_MEMBERS, id);
    if (find_rank(view, id) >= 0)
        return sp_error(SPINDLE_EINVAL, "member id %u is already in view %llu", id,
                        (unsigned long long)view->id);
    size_t host_len = host != NULL ? strnlen(host, VIEW_HOST_MAX) : 0;
    if (host_len == 0 || host_len >= VIEW_HOST_MAX)
        return sp_error(SPINDLE_EINVAL, "member %u: control host must be 1..%d bytes", id,
                        VIEW_HOST_MAX - 1);
    if (address != NULL && address->len > TP_DESC_MAX)
        return sp_error(SPINDLE_EINVAL, "member %u: transport address length %u exceeds %d", id,
                        address->len, TP_DESC_MAX);
    struct view_member *member = &view->members[view->num_members];
    memset(member, 0, sizeof *member);
    member->id = id;
    member->port = port;
    memcpy(member->host, host, host_len);
    if (address != NULL)
        member->address = *address;
    view->num_members++;
    return 0;
}

int view_add_subgroup(struct view *view)
{
    if (view->num_subgroups >= VIEW_MAX_SUBGROUPS)
        return sp_error(SPINDLE_EINVAL, "too many subgroups (limit %d)", VIEW_MAX_SUBGROUPS);
    return (int)view->num_subgroups++;
}

/* Checks one shard's lists against the view: members known and unique,
 * senders a subsequence of members. */
static int check_shard_lists(const struct view *view, uint32_t subgroup, const uint32_t *members,
                             uint32_t num_members, const uint32_t *senders, uint32_t num_senders)
{
    if (num_members == 0 || num_members > VIEW_MAX_MEMBERS)
        return sp_error(SPINDLE_EINVAL, "subgroup %u: shard of %u members (must be 1..%d)",
                        subgroup, num_members, VIEW_MAX_MEMBERS);
    if (num_senders > num_members)
        return sp_error(SPINDLE_EINVAL, "subgroup %u: %u senders but only %u members", subgroup,
                        num_senders, num_members);
    uint64_t seen = 0;
    for (uint32_t i = 0; i < num_members; i++) {
        int rank = find_rank(view, members[i]);
        if (rank < 0)
            return sp_error(SPINDLE_EINVAL, "subgroup %u: shard member %u is not in view %llu",
                            subgroup, members[i], (unsigned long long)view->id);
        if (seen & (1ull << rank))
            return sp_error(SPINDLE_EINVAL, "subgroup %u: member %u listed twice in a shard",
                            subgroup, members[i]);
        seen |= 1ull << rank;
    }
    /* Senders keep member order: that order is the round-robin order. */
    uint32_t next_member = 0;
    for (uint32_t s = 0; s < num_senders; s++) {
        while (next_member < num_members && members[next_member] != senders[s])
            next_member++;
        if (next_member == num_members)
            return sp_error(SPINDLE_EINVAL,
                            "subgroup %u: sender %u is not a shard member, is repeated, or is "
                            "out of member order",
                            subgroup, senders[s]);
        next_member++;
    }
    return 0;
}

int view_add_shard(struct view *view, const uint32_t *members, uint32_t num_members,
                   const uint32_t *senders, uint32_t num_senders)
{
    if (view->num_subgroups == 0)
        return sp_error(SPINDLE_EINVAL, "view_add_shard before view_add_subgroup");
    uint32_t subgroup = view->num_subgroups - 1;
    int rc = check_shard_lists(view, subgroup, members, num_members, senders, num_senders);
    if (rc < 0)
        return rc;
    if (view->num_shards >= VIEW_MAX_SHARDS)
        return sp_error(SPINDLE_EINVAL, "too many shards (limit %d)", VIEW_MAX_SHARDS);
    if (view->num_shards == view->shards_capacity) {
        uint32_t capacity = view->shards_capacity ? view->shards_capacity * 2 : 4;
        struct view_shard *grown = realloc(view->shards, sizeof *grown * capacity);
        if (grown == NULL)
            return sp_error(SPINDLE_ENOMEM, "growing shard table to %u entries", capacity);
        view->shards = grown;
        view->shards_capacity = capacity;
    }
    uint32_t index = 0;
    if (view->num_shards > 0 && view->shards[view->num_shards - 1].subgroup == subgroup)
        index = view->shards[view->num_shards - 1].shard_index + 1;
    struct view_shard *shard = &view->shards[view->num_shards++];
    memset(shard, 0, sizeof *shard);
    shard->subgroup = subgroup;
    shard->shard_index = index;
    shard->num_members = num_members;
    shard->num_senders = num_senders;
    memcpy(shard->members, members, sizeof *members * num_members);
    if (num_senders > 0)
        memcpy(shard->senders, senders, sizeof *senders * num_senders);
    return (int)index;
}

int view_validate(const struct view *view)
{
    if (view->num_members > VIEW_MAX_MEMBERS)
        return sp_error(SPINDLE_EINVAL, "view %llu has %u members (limit %d)",
                        (unsigned long long)view->id, view->num_members, VIEW_MAX_MEMBERS);
    for (uint32_t i = 0; i < view->num_members; i++) {
        const struct view_member *member = &view->members[i];
        for (uint32_t j = 0; j < i; j++)
            if (view->members[j].id == member->id)
                return sp_error(SPINDLE_EINVAL, "member id %u appears twice in view %llu",
                                member->id, (unsigned long long)view->id);
        size_t host_len = strnlen(member->host, VIEW_HOST_MAX);
        if (host_len == 0 || host_len == VIEW_HOST_MAX)
            return sp_error(SPINDLE_EINVAL, "member %u has an empty or unterminated host",
                            member->id);
        if (member->address.len > TP_DESC_MAX)
            return sp_error(SPINDLE_EINVAL, "member %u: address length %u exceeds %d", member->id,
                            member->address.len, TP_DESC_MAX);
    }
    if (view->num_subgroups > VIEW_MAX_SUBGROUPS || view->num_shards > VIEW_MAX_SHARDS)
        return sp_error(SPINDLE_EINVAL, "view %llu: %u subgroups / %u shards exceed limits",
                        (unsigned long long)view->id, view->num_subgroups, view->num_shards);
    uint32_t expect_subgroup = 0, expect_index = 0;
    for (uint32_t i = 0; i < view->num_shards; i++) {
        const struct view_shard *shard = &view->shards[i];
        if (shard->subgroup >= view->num_subgroups || shard->subgroup < expect_subgroup)
            return sp_error(SPINDLE_EINVAL, "shard %u: subgroup %u out of order or range", i,
                            shard->subgroup);
        if (shard->subgroup != expect_subgroup)
            expect_index = 0;
        if (shard->shard_index != expect_index)
            return sp_error(SPINDLE_EINVAL, "subgroup %u: shard index %u, expected %u",
                            shard->subgroup, shard->shard_index, expect_index);
        int rc = check_shard_lists(view, shard->subgroup, shard->members, shard->num_members,
                                   shard->senders, shard->num_senders);
        if (rc < 0)
            return rc;
        expect_subgroup = shard->subgroup;
        expect_index++;
    }
    return 0;
}

int view_rank_of(const struct view *view, uint32_t id)
{
    int rank = find_rank(view, id);
    if (rank >= 0)
        return rank;
    return sp_error(SPINDLE_ENOENT, "member id %u is not in view %llu", id,
                    (unsigned long long)view->id);
}

int view_subgroup_shards(const struct view *view, uint32_t subgroup, uint32_t *first,
                         uint32_t *count)
{
    if (subgroup >= view->num_subgroups)
        return sp_error(SPINDLE_ENOENT, "subgroup %u unknown (view %llu has %u)", subgroup,
                        (unsigned long long)view->id, view->num_subgroups);
    uint32_t begin = 0;
    while (begin < view->num_shards && view->shards[begin].subgroup < subgroup)
        begin++;
    uint32_t end = begin;
    while (end < view->num_shards && view->shards[end].subgroup == subgroup)
        end++;
    *first = begin;
    *count = end - begin;
    return 0;
}

const struct view_shard *view_shard_get(const struct view *view, uint32_t subgroup,
                                        uint32_t shard_index)
{
    uint32_t first, count;
    if (view_subgroup_shards(view, subgroup, &first, &count) < 0)
        return NULL;
    if (shard_index >= count) {
        sp_error(SPINDLE_ENOENT, "subgroup %u has %u shards; no shard %u", subgroup, count,
                 shard_index);
        return NULL;
    }
    return &view->shards[first + shard_index];
}

int view_shard_member_rank(const struct view_shard *shard, uint32_t id)
{
    for (uint32_t i = 0; i < shard->num_members; i++)
        if (shard->members[i] == id)
            return (int)i;
    return -1;
}

int view_shard_sender_rank(const struct view_shard *shard, uint32_t id)
{
    for (uint32_t i = 0; i < shard->num_senders; i++)
        if (shard->senders[i] == id)
            return (int)i;
    return -1;
}

uint64_t view_all_mask(const struct view *view)
{
    if (view->num_members >= 64)
        return ~0ull;
    return (1ull << view->num_members) - 1;
}

int view_leader(const struct view *view, uint64_t suspected_mask)
{
    for (uint32_t rank = 0; rank < view->num_members; rank++)
        if (!(suspected_mask & (1ull << rank)))
            return (int)rank;
    return sp_error(SPINDLE_ENOENT, "every member of view %llu is suspected; no leader",
                    (unsigned long long)view->id);
}

bool view_is_majority(const struct view *view, uint64_t mask)
{
    uint32_t count = (uint32_t)__builtin_popcountll(mask & view_all_mask(view));
    return count * 2 > view->num_members;
}

int view_check_majority(const struct view *view, uint64_t suspected_mask)
{
    uint64_t alive = view_all_mask(view) & ~suspected_mask;
    if (view_is_majority(view, alive))
        return 0;
    return sp_error(SPINDLE_EMINORITY,
                    "view %llu: only %d of %u members are unsuspected (need more than half)",
                    (unsigned long long)view->id, __builtin_popcountll(alive), view->num_members);
}

static bool id_in_view(const struct view *view, uint32_t id)
{
    return find_rank(view, id) >= 0;
}

void view_diff(const struct view *prev, const struct view *next, uint32_t *joined,
               uint32_t *num_joined, uint32_t *left, uint32_t *num_left)
{
    uint32_t joined_count = 0, left_count = 0;
    for (uint32_t i = 0; i < next->num_members; i++)
        if (!id_in_view(prev, next->members[i].id)) {
            if (joined != NULL)
                joined[joined_count] = next->members[i].id;
            joined_count++;
        }
    for (uint32_t i = 0; i < prev->num_members; i++)
        if (!id_in_view(next, prev->members[i].id)) {
            if (left != NULL)
                left[left_count] = prev->members[i].id;
            left_count++;
        }
    if (num_joined != NULL)
        *num_joined = joined_count;
    if (num_left != NULL)
        *num_left = left_count;
}
