/*
 * Application-thread side of the persistence frontier (smc.h,
 * smc_options.persist): waiting until own messages are on stable storage
 * at every member, and reading the frontiers. The predicate thread keeps
 * them (smc_predicate.c, persist_step).
 */
#include <stdlib.h>
#include <time.h>

#include "smc/smc_impl.h"
#include "util/clock.h"
#include "util/error.h"

/* What one subgroup's wait needs: own messages delivered (then the
 * delivered count they were delivered at), then the frontier past it. */
struct persist_target {
    uint64_t own; /* own messages committed before the call */
    uint64_t seq; /* sequence numbers the frontier must reach, once known */
    bool known;
    bool active;
};

/* Checks one target; true when it is met. */
static bool target_met(struct smc_group *group, const struct smc_subgroup *sub,
                       struct persist_target *target)
{
    if (!target->active)
        return true;
    if (!target->known) {
        if (__atomic_load_n(&sub->delivered_own, __ATOMIC_ACQUIRE) < target->own)
            return false;
        /* Everything delivered by the upcall that delivered the last own
         * message (or a later one): the frontier passing it passes that
         * message. */
        target->seq = __atomic_load_n(&sub->delivered_through, __ATOMIC_ACQUIRE);
        target->known = true;
    }
    return __atomic_load_n(&sub->frontier, __ATOMIC_ACQUIRE) >= target->seq;
}

static int check_subgroup(const struct smc_group *group, uint32_t subgroup)
{
    if (subgroup >= group->num_subgroups)
        return sp_error(SPINDLE_EINVAL,
                        "flush_persistent: subgroup %u is unknown (the group has %u)", subgroup,
                        group->num_subgroups);
    const struct smc_subgroup *sub = &group->subgroups[subgroup];
    /* A member of a subgroup that does not persist (the caller names
     * unlogged subgroups itself); a non-member has nothing to wait for. */
    if (!sub->persists && sub->my_member_rank >= 0)
        return sp_error(SPINDLE_EINVAL, "flush_persistent: subgroup %u has no persistence frontier",
                        subgroup);
    return 0;
}

static int wait_targets(struct smc_group *group, struct persist_target *targets,
                        uint64_t deadline_ns)
{
    int rc = 0;
    __atomic_add_fetch(&group->flush_waiters, 1, __ATOMIC_ACQ_REL);
    sst_engine_wake(group->engine);
    pthread_mutex_lock(&group->wait_lock);
    for (;;) {
        bool met = true;
        for (uint32_t g = 0; g < group->num_subgroups && met; g++)
            met = target_met(group, &group->subgroups[g], &targets[g]);
        if (met)
            break;
        int failed = __atomic_load_n(&group->failed, __ATOMIC_ACQUIRE);
        if (failed != 0) {
            rc = sp_error(failed, "flush_persistent: the group failed (%s)",
                          spindle_strerror(failed));
            break;
        }
        if (__atomic_load_n(&group->stopped, __ATOMIC_ACQUIRE) ||
            __atomic_load_n(&group->wedged, __ATOMIC_ACQUIRE)) {
            rc = sp_error(SPINDLE_ESHUTDOWN, "flush_persistent: the group is %s",
                          __atomic_load_n(&group->stopped, __ATOMIC_ACQUIRE)
                              ? "shut down"
                              : "wedged for a view change");
            break;
        }
        uint64_t now = sp_now_ns();
        if (now >= deadline_ns) {
            rc = sp_error(SPINDLE_ETIMEDOUT,
                          "flush_persistent: own messages not on stable storage at every "
                          "member in time");
            break;
        }
        /* Woken when the frontier or own deliveries move; the bounded
         * sleep covers a wake that came before this thread waited. */
        struct timespec wake;
        clock_gettime(CLOCK_MONOTONIC, &wake);
        wake.tv_nsec += 5000000L;
        wake.tv_sec += wake.tv_nsec / 1000000000L;
        wake.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&group->wait_cond, &group->wait_lock, &wake);
    }
    pthread_mutex_unlock(&group->wait_lock);
    __atomic_sub_fetch(&group->flush_waiters, 1, __ATOMIC_ACQ_REL);
    return rc;
}

int smc_flush_persistent(struct smc_group *group, uint32_t subgroup, uint64_t deadline_ns)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    bool all = subgroup == SMC_ALL_SUBGROUPS;
    if (!all) {
        int rc = check_subgroup(group, subgroup);
        if (rc < 0)
            return rc;
    }
    struct persist_target *targets =
        calloc(group->num_subgroups > 0 ? group->num_subgroups : 1, sizeof *targets);
    if (targets == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory to flush %u subgroups", group->num_subgroups);
    for (uint32_t g = 0; g < group->num_subgroups; g++) {
        const struct smc_subgroup *sub = &group->subgroups[g];
        if ((!all && g != subgroup) || !sub->persists || sub->my_sender_rank < 0)
            continue;
        targets[g].own = __atomic_load_n(&sub->committed, __ATOMIC_ACQUIRE);
        targets[g].active = targets[g].own > 0;
    }
    int rc = wait_targets(group, targets, deadline_ns);
    free(targets);
    return rc;
}
