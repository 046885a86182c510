/*
 * Application-thread side of SMC: in-place reserve/commit and flush.
 * Sending never posts a write here; the send step of the predicate does
 * (Spindle 3.2: "queues the sends, but does not initiate remote sends"),
 * except with smc_options.own_inline in an unordered subgroup, where
 * smc_commit runs the predicate's send and own-receive steps itself
 * (smc_own_pass), and in an atomic subgroup over a transport with the
 * arrival pass (libfabric), where a commit that finds the predicate
 * thread asleep and its sender idle sends itself (smc_commit_send_pass).
 * A commit takes no lock: it records the message's length and advances
 * committed (release). The message's position is assigned by the send
 * step that pushes it, under the engine lock (smc_predicate.c), so a
 * commit never waits for a predicate pass to end, nor wakes a committing
 * thread blocked on the lock at its end (at window 100 with three senders
 * on two CPUs, a sleep and a wake-up every few commits). Until it is
 * pushed, nothing outside this thread can tell the message from one not
 * yet committed: models/smc.pml's commit is that send step's assignment
 * (inlines commit, after_step: slot_free).
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "smc/smc_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

/* The row of the member furthest behind among those that still hold the
 * slot the commit `ahead` commits from now would reuse (0: the next one;
 * it has not delivered, or for unordered received, the message there), or
 * -1 when the slot is free. Slots free in commit order, so that slot free
 * means every one before it is free too. Furthest
 * behind, not the first found: a member stuck in its delivery upcall also
 * stops acknowledging what it receives, so the others cannot deliver either
 * and all hold the slot; the one that holds them back has the lowest
 * count. */
static int32_t slot_holder_ahead(struct smc_group *group, const struct smc_subgroup *sub,
                                 uint32_t ahead)
{
    uint64_t committed = __atomic_load_n(&sub->committed, __ATOMIC_ACQUIRE) + ahead;
    uint32_t window = sub->layout.window_size;
    if (committed < window)
        return -1;
    uint64_t old = committed - window; /* the message the slot holds */
    bool atomic = sub->layout.mode == SPINDLE_MODE_ATOMIC;
    if (!atomic && old >= __atomic_load_n(&sub->posted_mark, __ATOMIC_ACQUIRE))
        return (int32_t)group->my_row; /* this member's own post may still read it */
    /* Atomic: the old message is sequence position * S + rank; a member has
     * delivered it once its delivered_num exceeds that. Unordered: it was
     * delivered on receipt, so received_num[rank] > position suffices. A
     * message not yet pushed has no position (its slot still holds the
     * stale one of a window earlier), and every member holds it. */
    uint64_t need = UINT64_MAX;
    if (old < __atomic_load_n(&sub->pushed, __ATOMIC_ACQUIRE)) {
        uint64_t position = sub->slot_position[old % window];
        need =
            atomic ? position * sub->layout.num_senders + (uint64_t)sub->my_sender_rank : position;
    }
    uint32_t offset =
        atomic ? sub->delivered_offset : sub->received_offset + 8u * (uint32_t)sub->my_sender_rank;
    /* These counts come from the members' rows unchecked, on purpose: a
     * count above the truth frees the slot early for that member alone (it
     * misses a message of its own doing; the others' honest counts still
     * hold the slot for them), and one below it holds the window like a
     * slow member (slow_member_ms removes it). Neither is compared in a sum
     * that could overflow. */
    int32_t holder = -1;
    uint64_t lowest = need;
    for (uint32_t i = 0; i < sub->layout.num_members; i++) {
        uint64_t count = sst_read_u64(group->table, sub->layout.members[i], offset);
        if (count <= lowest) {
            lowest = count;
            holder = (int32_t)sub->layout.members[i];
        }
    }
    return holder;
}

static int32_t slot_holder(struct smc_group *group, const struct smc_subgroup *sub)
{
    return slot_holder_ahead(group, sub, 0);
}

bool smc_slot_free(struct smc_group *group, const struct smc_subgroup *sub)
{
    return slot_holder(group, sub) < 0;
}

/* Slots that must be free before a sender blocked on a full window is
 * woken: a quarter of the window. Woken when one slot frees, it commits
 * one message and blocks again, a sleep and a wake-up (two context
 * switches, on two CPUs shared by three members) per slot; a quarter
 * gives it a batch to fill per wake-up and the predicate a batch to push. */
static uint32_t wake_room(const struct smc_subgroup *sub)
{
    uint32_t quarter = sub->layout.window_size / 4;
    return quarter > 0 ? quarter : 1;
}

bool smc_room_for_waiter(struct smc_group *group, const struct smc_subgroup *sub)
{
    return slot_holder_ahead(group, sub, wake_room(sub) - 1) < 0;
}

/* Counts a reserve that met a full window (held by row) and how long it
 * waited. Atomics, not the engine lock: the member holding the window may
 * be this one, its predicate thread stuck in a slow delivery upcall. */
static void count_full_window(struct smc_group *group, int32_t row, uint64_t waited_ns)
{
    __atomic_add_fetch(&group->window_full, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&group->window_full_ns, waited_ns, __ATOMIC_RELAXED);
    if (row >= 0)
        __atomic_store_n(&group->window_holder_row, row, __ATOMIC_RELAXED);
}

int smc_group_state_error(struct smc_group *group)
{
    int failed = __atomic_load_n(&group->failed, __ATOMIC_ACQUIRE);
    if (failed != 0)
        return sp_error(failed, "the group failed: a peer was lost (%s)", spindle_strerror(failed));
    if (__atomic_load_n(&group->stopped, __ATOMIC_ACQUIRE))
        return sp_error(SPINDLE_ESHUTDOWN, "the group is shut down");
    if (__atomic_load_n(&group->wedged, __ATOMIC_ACQUIRE))
        return sp_error(SPINDLE_ESHUTDOWN, "the group is wedged for a view change");
    return 0;
}

static void deadline_after(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_nsec += (long)ms * 1000000L;
    ts->tv_sec += ts->tv_nsec / 1000000000L;
    ts->tv_nsec %= 1000000000L;
}

/* With slow_member_ms, hands the member that has held this reserve's slot
 * since `since` (CLOCK_MONOTONIC ns) to the predicate thread to suspect,
 * once; true when it did. The holder changing restarts the clock: the
 * bound is how long one member held the window full without a break. */
static bool check_slow_holder(struct smc_group *group, const struct smc_subgroup *sub,
                              int32_t *holder, uint64_t *since)
{
    int32_t now_holder = slot_holder(group, sub);
    uint64_t now = sp_now_ns();
    if (now_holder != *holder) {
        *holder = now_holder;
        *since = now;
        return false;
    }
    if (now_holder < 0 || (uint32_t)now_holder == group->my_row ||
        now - *since < (uint64_t)group->options.slow_member_ms * 1000000ull)
        return false;
    SP_LOG_WARNING("smc", "row %d held the window of subgroup %u full for %llu ms: suspected",
                   now_holder, sub->index, (unsigned long long)((now - *since) / 1000000ull));
    __atomic_store_n(&group->slow_row, now_holder, __ATOMIC_RELEASE);
    sst_engine_wake(group->engine);
    return true;
}

/* Waits for room: the predicate wakes us once a quarter of the window is
 * free (smc_room_for_waiter), clearing reserve_waiting as it does, so one
 * wait costs one wake-up however many passes free slots meanwhile; the
 * flag is raised again before each check. A wait that ends otherwise (the
 * short timed wait only bounds the cost of a missed wake-up) goes on as
 * soon as one slot is free. */
static int wait_for_slot(struct smc_group *group, struct smc_subgroup *sub)
{
    int rc = 0;
    int32_t holder = -1;
    uint64_t since = 0;
    bool watch = group->options.slow_member_ms > 0;
    bool first = true;
    pthread_mutex_lock(&group->wait_lock);
    for (;;) {
        __atomic_store_n(&sub->reserve_waiting, 1, __ATOMIC_SEQ_CST);
        if (first)
            sst_engine_wake(group->engine);
        first = false;
        if (smc_slot_free(group, sub))
            break;
        rc = smc_group_state_error(group);
        if (rc < 0)
            break;
        if (watch && check_slow_holder(group, sub, &holder, &since))
            watch = false;
        struct timespec deadline;
        deadline_after(&deadline, 5);
        pthread_cond_timedwait(&group->wait_cond, &group->wait_lock, &deadline);
    }
    pthread_mutex_unlock(&group->wait_lock);
    __atomic_store_n(&sub->reserve_waiting, 0, __ATOMIC_RELEASE);
    return rc;
}

static int lookup_sender(struct smc_group *group, uint32_t subgroup, struct smc_subgroup **out)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    if (subgroup >= group->num_subgroups)
        return sp_error(SPINDLE_EINVAL, "subgroup %u is unknown (the group has %u)", subgroup,
                        group->num_subgroups);
    struct smc_subgroup *sub = &group->subgroups[subgroup];
    if (sub->my_sender_rank < 0)
        return sp_error(SPINDLE_EPERM, "member %u is not a sender of subgroup %u", group->my_row,
                        subgroup);
    *out = sub;
    return 0;
}

int smc_reserve(struct smc_group *group, uint32_t subgroup, size_t size, unsigned flags,
                void **slot)
{
    struct smc_subgroup *sub = NULL;
    int rc = lookup_sender(group, subgroup, &sub);
    if (rc < 0)
        return rc;
    if (slot == NULL)
        return sp_error(SPINDLE_EINVAL, "reserve: slot pointer is NULL");
    if (size > sub->layout.max_payload)
        return sp_error(SPINDLE_EMSGSIZE, "message size %zu exceeds max_payload %u of subgroup %u",
                        size, sub->layout.max_payload, subgroup);
    rc = smc_group_state_error(group);
    if (rc < 0)
        return rc;
    /* The flag rides in reserve_open, on the line the commit writes anyway. */
    int closed = 0, open = (flags & SPINDLE_RESERVE_MORE) != 0 ? 2 : 1;
    if (!__atomic_compare_exchange_n(&sub->reserve_open, &closed, open, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return sp_error(SPINDLE_EINVAL, "subgroup %u already has an open reservation", subgroup);
    int32_t holder = slot_holder(group, sub);
    if (holder >= 0) {
        uint64_t began = sp_now_ns();
        count_full_window(group, holder, 0);
        if (flags & SPINDLE_RESERVE_NONBLOCK) {
            rc = sp_error(SPINDLE_EAGAIN, "subgroup %u: all %u slots of the window are in use",
                          subgroup, sub->layout.window_size);
            /* The predicate says when a slot is free (send_ready); a burst
             * of quiet commits ends here, so its messages go out. */
            bool quiet = __atomic_exchange_n(&sub->quiet_commits, 0, __ATOMIC_ACQ_REL) != 0;
            if ((group->options.send_ready != NULL &&
                 __atomic_exchange_n(&sub->room_wanted, 1, __ATOMIC_ACQ_REL) == 0) ||
                quiet)
                sst_engine_wake(group->engine);
        } else {
            rc = wait_for_slot(group, sub);
            count_full_window(group, -1, sp_now_ns() - began);
        }
        if (rc < 0) {
            __atomic_store_n(&sub->reserve_open, 0, __ATOMIC_RELEASE);
            return rc;
        }
    }
    uint64_t committed = __atomic_load_n(&sub->committed, __ATOMIC_ACQUIRE);
    uint32_t index = (uint32_t)(committed % sub->layout.window_size);
    sub->reserve_size = (uint32_t)size;
    *slot = smc_ring(group, sub, (uint32_t)sub->my_sender_rank) + (size_t)index * sub->slot_size +
            SMC_HEADER_SIZE;
    return 0;
}

/* Whether smc_commit sends and delivers its message itself (own pass,
 * smc_options.own_inline); lock held. Not during a view change (wedged:
 * the trim decides what is delivered) nor before the predicate runs (the
 * resends of view_install.c commit before the view starts). */
static bool own_pass_allowed(struct smc_group *group, const struct smc_subgroup *sub)
{
    return group->options.own_inline && sub->layout.mode == SPINDLE_MODE_UNORDERED &&
           sub->my_member_rank >= 0 && __atomic_load_n(&group->own_passes, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(&group->failed, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(&group->stopped, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(&group->wedged, __ATOMIC_ACQUIRE);
}

/* The commit itself, with or without the engine lock: only the thread
 * holding the reservation writes committed and slot_length. The slot
 * header and the position are the send step's (smc_predicate.c). */
static void commit_slot(struct smc_subgroup *sub)
{
    uint64_t committed = __atomic_load_n(&sub->committed, __ATOMIC_RELAXED);
    sub->slot_length[committed % sub->layout.window_size] = sub->reserve_size;
    __atomic_store_n(&sub->committed, committed + 1, __ATOMIC_RELEASE);
}

static int open_reservation(struct smc_group *group, uint32_t subgroup, struct smc_subgroup **sub)
{
    int rc = lookup_sender(group, subgroup, sub);
    if (rc < 0)
        return rc;
    if (__atomic_load_n(&(*sub)->reserve_open, __ATOMIC_ACQUIRE) == 0)
        return sp_error(SPINDLE_EINVAL, "subgroup %u has no open reservation to commit", subgroup);
    return 0;
}

/* Wakes the predicate thread after a commit, unless the reservation said
 * more follow (SPINDLE_RESERVE_MORE): then the burst's last commit, or a
 * reserve that finds the window full, wakes it once for all of them. */
static void wake_unless_more(struct smc_group *group, struct smc_subgroup *sub, bool more)
{
    if (!more) {
        sst_engine_wake(group->engine);
        return;
    }
    if (__atomic_load_n(&sub->quiet_commits, __ATOMIC_RELAXED) == 0)
        __atomic_store_n(&sub->quiet_commits, 1, __ATOMIC_RELEASE);
}

/*
 * Whether the committing thread may send its atomic message itself
 * (smc_commit_send_pass) rather than wake the predicate thread: only at
 * light load, when this commit and the one before it each found every
 * earlier message of this sender delivered and the two were at least
 * SMC_COMMIT_SEND_GAP_NS apart. Measured over libfabric tcp between three
 * namespaces on 2 busy vCPUs (docs/PERFORMANCE.md "Light load over
 * libfabric tcp: the committing thread's send"): at 10 messages a second
 * per sender the send saved the predicate thread's wake-up (p50 lower in
 * 15 of 20 pairs), at 1000 a second it cost more than it saved (higher in
 * 6 of 8: the committing thread, without the predicate thread's short
 * slice, loses its CPU to the first peer it wakes, with the second peer's
 * writes unposted). And a sender that commits faster than its messages
 * are delivered keeps Spindle 3.2's batching: without the previous commit
 * asked, 1.8% of the commits at window 100 left alone, in send batches of
 * 40 against 55. Not a logged subgroup (the persist step stays on the
 * predicate thread), not before the predicate runs, nor during a view
 * change. The committing thread only; the clock is read only when the
 * sender is idle.
 */
static bool commit_send_allowed(struct smc_group *group, struct smc_subgroup *sub)
{
    uint64_t committed = __atomic_load_n(&sub->committed, __ATOMIC_RELAXED);
    if (sub->layout.mode != SPINDLE_MODE_ATOMIC ||
        __atomic_load_n(&sub->pushed, __ATOMIC_ACQUIRE) + 1 != committed ||
        __atomic_load_n(&sub->delivered_own, __ATOMIC_ACQUIRE) + 1 != committed)
        return false;
    bool after_idle = sub->idle_commit + 1 == committed;
    uint64_t now = sp_now_ns(), before = sub->idle_commit_ns;
    sub->idle_commit = committed;
    sub->idle_commit_ns = now;
    return after_idle && now - before >= SMC_COMMIT_SEND_GAP_NS && !sub->persists &&
           sub->my_member_rank >= 0 && __atomic_load_n(&group->own_passes, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(&group->failed, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(&group->stopped, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(&group->wedged, __ATOMIC_ACQUIRE);
}

static int commit(struct smc_group *group, uint32_t subgroup, bool own_pass)
{
    struct smc_subgroup *sub = NULL;
    int rc = open_reservation(group, subgroup, &sub);
    if (rc < 0)
        return rc;
    if (own_pass && group->options.own_inline) {
        /* Committed under the lock, so that the predicate thread never
         * pushes (and publishes sent_num for) a message whose own pass is
         * to come: only one thread may write sent_num while another posts,
         * or a queued sent_num push, read when posted, exposes positions
         * whose data the later post carries (T2). */
        sst_engine_lock(group->engine);
        commit_slot(sub);
        if (own_pass_allowed(group, sub)) {
            /* The upcall may send again in this subgroup: the reservation
             * closes first. */
            __atomic_store_n(&sub->reserve_open, 0, __ATOMIC_RELEASE);
            smc_own_pass(group, sub);
            uint64_t pushed = sub->pushed;
            sst_engine_unlock(group->engine);
            smc_own_posted(group, sub, pushed);
            return 0;
        }
        sst_engine_unlock(group->engine);
    } else {
        commit_slot(sub);
    }
    bool more = __atomic_load_n(&sub->reserve_open, __ATOMIC_RELAXED) == 2;
    bool send_here =
        !more && sst_engine_has_arrival(group->engine) && commit_send_allowed(group, sub);
    __atomic_store_n(&sub->reserve_open, 0, __ATOMIC_RELEASE);
    if (send_here) {
        struct smc_commit_send what = {group, sub};
        if (sst_engine_run_inline(group->engine, smc_commit_send_pass, &what))
            return 0;
    }
    wake_unless_more(group, sub, more);
    return 0;
}

int smc_commit(struct smc_group *group, uint32_t subgroup)
{
    return commit(group, subgroup, false);
}

int smc_commit_own(struct smc_group *group, uint32_t subgroup)
{
    return commit(group, subgroup, true);
}

int smc_commit_locked(struct smc_group *group, uint32_t subgroup)
{
    struct smc_subgroup *sub = NULL;
    int rc = open_reservation(group, subgroup, &sub);
    if (rc < 0)
        return rc;
    commit_slot(sub);
    bool more = __atomic_load_n(&sub->reserve_open, __ATOMIC_RELAXED) == 2;
    __atomic_store_n(&sub->reserve_open, 0, __ATOMIC_RELEASE);
    /* The predicate sees it in this pass (a later subgroup) or the next:
     * a commit counts as work (subgroup_has_work). */
    wake_unless_more(group, sub, more);
    return 0;
}

int smc_cancel(struct smc_group *group, uint32_t subgroup)
{
    struct smc_subgroup *sub = NULL;
    int rc = open_reservation(group, subgroup, &sub);
    if (rc == 0)
        __atomic_store_n(&sub->reserve_open, 0, __ATOMIC_RELEASE);
    return rc;
}

/* Every member of sub received every position this member published
 * (received_num[m][my rank] >= my sent_num). */
static bool received_by_all(struct smc_group *group, const struct smc_subgroup *sub)
{
    uint64_t sent = sst_read_u64(group->table, group->my_row, sub->sent_offset);
    uint32_t offset = sub->received_offset + 8u * (uint32_t)sub->my_sender_rank;
    for (uint32_t i = 0; i < sub->layout.num_members; i++)
        if (sst_read_u64(group->table, sub->layout.members[i], offset) < sent)
            return false;
    return true;
}

/*
 * Atomic subgroups deliver a message once every member received it, so
 * delivering its own messages is enough. Unordered ones deliver on
 * receipt: this member's own delivery says nothing of the others, so a
 * flush also waits until every member received them (a member that leaves
 * right after, as spindle_group_leave does, must not take messages with it
 * that a survivor never got).
 */
static bool flushed(struct smc_group *group, const uint64_t *targets)
{
    for (uint32_t g = 0; g < group->num_subgroups; g++) {
        const struct smc_subgroup *sub = &group->subgroups[g];
        if (__atomic_load_n(&sub->delivered_own, __ATOMIC_ACQUIRE) < targets[g])
            return false;
        if (targets[g] > 0 && sub->layout.mode == SPINDLE_MODE_UNORDERED &&
            !received_by_all(group, sub))
            return false;
    }
    return true;
}

int smc_flush(struct smc_group *group, int timeout_ms)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    uint64_t *targets = calloc(group->num_subgroups > 0 ? group->num_subgroups : 1, 8);
    if (targets == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory to flush %u subgroups", group->num_subgroups);
    for (uint32_t g = 0; g < group->num_subgroups; g++) {
        const struct smc_subgroup *sub = &group->subgroups[g];
        bool delivers_own = sub->my_sender_rank >= 0 && sub->my_member_rank >= 0;
        targets[g] = delivers_own ? __atomic_load_n(&sub->committed, __ATOMIC_ACQUIRE) : 0;
    }
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : sp_now_ns() + (uint64_t)timeout_ms * 1000000u;
    int rc = 0;
    __atomic_add_fetch(&group->flush_waiters, 1, __ATOMIC_ACQ_REL);
    sst_engine_wake(group->engine);
    pthread_mutex_lock(&group->wait_lock);
    while (!flushed(group, targets)) {
        int failed = __atomic_load_n(&group->failed, __ATOMIC_ACQUIRE);
        if (failed != 0) {
            rc = sp_error(failed, "flush: the group failed (%s)", spindle_strerror(failed));
            break;
        }
        if (__atomic_load_n(&group->stopped, __ATOMIC_ACQUIRE)) {
            rc = sp_error(SPINDLE_ESHUTDOWN, "flush: the group is shut down");
            break;
        }
        if (__atomic_load_n(&group->wedged, __ATOMIC_ACQUIRE)) {
            rc = sp_error(SPINDLE_ESHUTDOWN, "flush: the group is wedged for a view change");
            break;
        }
        if (sp_now_ns() >= deadline) {
            rc = sp_error(SPINDLE_ETIMEDOUT, "flush: own messages not delivered within %d ms",
                          timeout_ms);
            break;
        }
        struct timespec wake;
        deadline_after(&wake, 5);
        pthread_cond_timedwait(&group->wait_cond, &group->wait_lock, &wake);
    }
    pthread_mutex_unlock(&group->wait_lock);
    __atomic_sub_fetch(&group->flush_waiters, 1, __ATOMIC_ACQ_REL);
    free(targets);
    return rc;
}
