/*
 * The send path of the public handle: in-place reservation and commit,
 * send, flush and barrier. Every call reaches the multicast of the current
 * view through the membership (view_acquire); a call that meets a view
 * change waits for it and retries on the new view (view_after_error).
 */
#include <string.h>

#include "group/group_impl.h"
#include "util/error.h"

/* The read side of smc_lock is held from a successful reserve to its
 * commit, so a view change never retires the multicast under an open slot. */
SPINDLE_API int spindle_reserve(spindle_group_t *group, uint32_t subgroup, size_t size,
                                unsigned flags, void **slot)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    for (;;) {
        struct smc_group *smc = view_acquire(&group->membership);
        int rc = smc_reserve(smc, subgroup, size, flags, slot);
        if (rc == 0)
            return 0;
        view_release(&group->membership);
        rc = view_after_error(&group->membership, smc, rc);
        if (rc != 1)
            return rc;
    }
}

SPINDLE_API int spindle_commit(spindle_group_t *group, uint32_t subgroup)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    /* The lock is still held from the reservation. */
    int rc = smc_commit(group->membership.current->smc, subgroup);
    if (rc != SPINDLE_EINVAL)
        view_release(&group->membership);
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
        struct smc_group *smc = view_acquire(&group->membership);
        int rc = smc_flush(smc, timeout_ms);
        view_release(&group->membership);
        if (rc == 0)
            return 0;
        rc = view_after_error(&group->membership, smc, rc);
        if (rc != 1)
            return rc;
    }
}

SPINDLE_API int spindle_barrier(spindle_group_t *group, int timeout_ms)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "barrier: group is NULL");
    return view_barrier(&group->membership, timeout_ms);
}
