/*
 * View-change hooks of SMC: wedge the group, read the received counters the
 * ragged-edge trim is computed from, deliver exactly the messages within
 * the agreed trim (view/trim.h). The next view builds a fresh smc_group.
 */
#include "smc/smc_impl.h"
#include "util/error.h"

void smc_group_wedge(struct smc_group *group)
{
    sst_engine_lock(group->engine);
    __atomic_store_n(&group->wedged, 1, __ATOMIC_RELEASE);
    sst_engine_unlock(group->engine);
    smc_wake_waiters(group);
}

static int lookup(struct smc_group *group, uint32_t subgroup, struct smc_subgroup **out)
{
    if (group == NULL || subgroup >= group->num_subgroups)
        return sp_error(SPINDLE_EINVAL, "subgroup %u is unknown (the group has %u)", subgroup,
                        group == NULL ? 0 : group->num_subgroups);
    *out = &group->subgroups[subgroup];
    return 0;
}

int smc_group_received(struct smc_group *group, uint32_t subgroup, uint32_t row, uint64_t *received,
                       uint32_t cap)
{
    struct smc_subgroup *sub = NULL;
    int rc = lookup(group, subgroup, &sub);
    if (rc < 0)
        return rc;
    if (row >= group->num_rows)
        return sp_error(SPINDLE_EINVAL, "row %u is outside the group of %u", row, group->num_rows);
    uint32_t senders = sub->layout.num_senders;
    if (cap < senders)
        return sp_error(SPINDLE_EINVAL, "received: room for %u counts, subgroup %u has %u senders",
                        cap, subgroup, senders);
    for (uint32_t s = 0; s < senders; s++)
        received[s] = sst_read_u64(group->table, row, sub->received_offset + 8 * s);
    return (int)senders;
}

int smc_group_deliver_trim(struct smc_group *group, uint32_t subgroup, const uint64_t *trim,
                           uint32_t num_senders, uint64_t end)
{
    struct smc_subgroup *sub = NULL;
    int rc = lookup(group, subgroup, &sub);
    if (rc < 0)
        return rc;
    if (!__atomic_load_n(&group->wedged, __ATOMIC_ACQUIRE))
        return sp_error(SPINDLE_EINVAL, "deliver_trim: subgroup %u is not wedged", subgroup);
    if (num_senders != sub->layout.num_senders)
        return sp_error(SPINDLE_EINVAL, "deliver_trim: %u trims for subgroup %u of %u senders",
                        num_senders, subgroup, sub->layout.num_senders);
    if (sub->my_member_rank < 0 || num_senders == 0 || sub->layout.mode != SPINDLE_MODE_ATOMIC)
        return 0; /* unordered subgroups delivered on receipt */
    sst_engine_lock(group->engine);
    for (uint32_t s = 0; s < num_senders && rc == 0; s++)
        if (sub->senders[s].recv_position < trim[s])
            rc = sp_error(SPINDLE_EPROTO,
                          "subgroup %u: trim needs %llu positions of sender %u, this member "
                          "holds %llu",
                          subgroup, (unsigned long long)trim[s], s,
                          (unsigned long long)sub->senders[s].recv_position);
    struct smc_pass_limits limits = {trim, end, true};
    while (rc == 0 && sub->delivered < end)
        smc_deliver_range(group, sub, &limits, SIZE_MAX);
    /* Every survivor ends at the same count (the view records agree):
     * what this member passed beyond `end` was nulls it held (a message is
     * passed only once every member holds it, so within the trim), so
     * nothing delivered is dropped from the count. */
    if (rc == 0)
        sub->delivered = end;
    sst_engine_unlock(group->engine);
    return rc;
}

uint64_t smc_group_delivered(struct smc_group *group, uint32_t subgroup)
{
    if (subgroup >= group->num_subgroups)
        return 0;
    sst_engine_lock(group->engine);
    uint64_t delivered = group->subgroups[subgroup].delivered;
    sst_engine_unlock(group->engine);
    return delivered;
}

int smc_group_undelivered(struct smc_group *group, uint32_t subgroup, uint64_t *first,
                          uint64_t *count)
{
    struct smc_subgroup *sub = NULL;
    int rc = lookup(group, subgroup, &sub);
    if (rc < 0)
        return rc;
    *first = 0;
    *count = 0;
    if (sub->my_sender_rank < 0)
        return 0;
    uint64_t committed = __atomic_load_n(&sub->committed, __ATOMIC_ACQUIRE);
    uint64_t delivered = __atomic_load_n(&sub->delivered_own, __ATOMIC_ACQUIRE);
    if (sub->my_member_rank < 0 || delivered > committed)
        return sp_error(SPINDLE_EPROTO, "subgroup %u: own delivered %llu vs committed %llu",
                        subgroup, (unsigned long long)delivered, (unsigned long long)committed);
    if (sub->layout.mode == SPINDLE_MODE_UNORDERED && sub->edge_set)
        delivered = sub->resend_from;
    if (delivered > committed)
        return sp_error(SPINDLE_EPROTO, "subgroup %u: own edge %llu vs committed %llu", subgroup,
                        (unsigned long long)delivered, (unsigned long long)committed);
    *first = delivered;
    *count = committed - delivered;
    return 0;
}

/* The number of app messages below position `lowest` of the first `have`,
 * the last window of which sit at positions[a % window]: walks back from
 * `from` (messages from there on lie beyond lowest) while the message sits
 * at or beyond lowest, at most a window back from `have` (the slot of a
 * message a window back was reused, which needed every member, each
 * survivor included, to have received it: it lies below lowest). */
static uint64_t app_below_from(const uint64_t *positions, uint64_t have, uint64_t from,
                               uint32_t window, uint64_t lowest)
{
    uint64_t a = from;
    while (a > 0 && have - a < window && positions[(a - 1) % window] >= lowest)
        a--;
    return a;
}

static uint64_t app_below(const uint64_t *positions, uint64_t have, uint32_t window,
                          uint64_t lowest)
{
    return app_below_from(positions, have, have, window, lowest);
}

int smc_group_set_edge(struct smc_group *group, uint32_t subgroup, const uint64_t *lowest,
                       uint32_t num_senders)
{
    struct smc_subgroup *sub = NULL;
    int rc = lookup(group, subgroup, &sub);
    if (rc < 0)
        return rc;
    if (!__atomic_load_n(&group->wedged, __ATOMIC_ACQUIRE) ||
        sub->layout.mode != SPINDLE_MODE_UNORDERED || num_senders != sub->layout.num_senders)
        return sp_error(SPINDLE_EINVAL,
                        "set_edge: subgroup %u is not a wedged unordered subgroup of %u senders",
                        subgroup, num_senders);
    uint32_t window = sub->layout.window_size;
    sst_engine_lock(group->engine);
    for (uint32_t s = 0; s < num_senders && rc == 0 && sub->my_member_rank >= 0; s++) {
        struct smc_sender *sender = &sub->senders[s];
        if (lowest[s] > sender->recv_position)
            rc = sp_error(SPINDLE_EPROTO,
                          "subgroup %u: edge %llu of sender %u beyond what this member holds "
                          "(%llu positions)",
                          subgroup, (unsigned long long)lowest[s], s,
                          (unsigned long long)sender->recv_position);
        else
            sender->edge_app = app_below(sender->app_position, sender->recv_app, window, lowest[s]);
    }
    if (rc == 0 && sub->my_sender_rank >= 0) {
        /* Committed but unpushed messages have no position yet (the send
         * step assigns it): no member holds them, they lie beyond lowest. */
        uint64_t committed = __atomic_load_n(&sub->committed, __ATOMIC_ACQUIRE);
        uint64_t pushed = sub->pushed;
        if (committed - pushed > window)
            pushed = committed - window;
        sub->resend_from = app_below_from(sub->slot_position, committed, pushed, window,
                                          lowest[sub->my_sender_rank]);
        sub->edge_set = true;
    }
    sst_engine_unlock(group->engine);
    return rc;
}

int smc_group_beyond_edge(struct smc_group *group, uint32_t subgroup, uint32_t sender,
                          uint64_t *count)
{
    struct smc_subgroup *sub = NULL;
    int rc = lookup(group, subgroup, &sub);
    if (rc < 0)
        return rc;
    if (sub->my_member_rank < 0 || sender >= sub->layout.num_senders)
        return sp_error(SPINDLE_EINVAL, "subgroup %u: no sender %u here", subgroup, sender);
    const struct smc_sender *s = &sub->senders[sender];
    /* Plus the resends of an earlier change it has not taken yet: it
     * delivered those before this view, and they come again after the edge
     * (a second change before they arrived). */
    *count = s->recv_app - s->edge_app + s->skip;
    return 0;
}

int smc_group_skip(struct smc_group *group, uint32_t subgroup, uint32_t sender, uint64_t count)
{
    struct smc_subgroup *sub = NULL;
    int rc = lookup(group, subgroup, &sub);
    if (rc < 0)
        return rc;
    if (group->started || sub->my_member_rank < 0 || sender >= sub->layout.num_senders ||
        sub->layout.mode != SPINDLE_MODE_UNORDERED)
        return sp_error(SPINDLE_EINVAL, "skip: subgroup %u sender %u cannot take a skip", subgroup,
                        sender);
    sub->senders[sender].skip = count;
    return 0;
}

int smc_group_skipping(struct smc_group *group, uint32_t subgroup, uint32_t sender, uint64_t *count)
{
    struct smc_subgroup *sub = NULL;
    int rc = lookup(group, subgroup, &sub);
    if (rc < 0)
        return rc;
    if (sub->my_member_rank < 0 || sender >= sub->layout.num_senders)
        return sp_error(SPINDLE_EINVAL, "subgroup %u: no sender %u here", subgroup, sender);
    sst_engine_lock(group->engine);
    *count = sub->senders[sender].skip;
    sst_engine_unlock(group->engine);
    return 0;
}

const void *smc_group_message(struct smc_group *group, uint32_t subgroup, uint64_t index,
                              uint32_t *length)
{
    struct smc_subgroup *sub = NULL;
    uint64_t first = 0, count = 0;
    if (smc_group_undelivered(group, subgroup, &first, &count) < 0)
        return NULL;
    if (index < first || index >= first + count ||
        count > group->subgroups[subgroup].layout.window_size) {
        sp_error(SPINDLE_EINVAL, "subgroup %u: own message %llu is not in the undelivered range",
                 subgroup, (unsigned long long)index);
        return NULL;
    }
    sub = &group->subgroups[subgroup];
    uint8_t *slot = smc_ring(group, sub, (uint32_t)sub->my_sender_rank) +
                    (size_t)(index % sub->layout.window_size) * sub->slot_size;
    /* slot_length, not the header: an unpushed message has none yet. */
    *length = sub->slot_length[index % sub->layout.window_size];
    return slot + SMC_HEADER_SIZE;
}
