/*
 * The send path of the public handle: in-place reservation and commit,
 * send, flush and barrier. Every call reaches the multicast of the current
 * view through the membership (view_acquire); a call that meets a view
 * change waits for it and retries on the new view (view_after_error),
 * except a non-blocking reserve, which returns SPINDLE_EAGAIN and is owed
 * a send_ready once the change is done.
 */
#include <string.h>

#include "group/group_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

/*
 * A reservation belongs to the thread that made it. The thread's first
 * open reservation on a group takes the read side of its smc_lock and its
 * last commit releases it, so a view change never retires the multicast
 * under an open slot. While it holds one, the thread's other calls into
 * that group neither take the lock again nor wait for a view change: the
 * change waits for this very thread, so they return SPINDLE_EAGAIN naming
 * the reservation to commit first.
 */
#define HELD_GROUPS    4  /* groups with open reservations, per thread */
#define HELD_SUBGROUPS 16 /* open reservations on one group, per thread */

struct held {
    spindle_group_t *group; /* NULL: a free record */
    uint32_t count;
    uint32_t subgroups[HELD_SUBGROUPS];
    /* false: made inside a default-mode upcall, without the read side of
     * smc_lock (struct group_upcall, lockless). */
    bool read_side;
};

static _Thread_local struct held held[HELD_GROUPS];

static struct held *held_find(const spindle_group_t *group)
{
    for (int i = 0; i < HELD_GROUPS; i++) {
        if (held[i].group == group)
            return &held[i];
    }
    return NULL;
}

static int held_index(const struct held *h, uint32_t subgroup)
{
    for (uint32_t i = 0; h != NULL && i < h->count; i++) {
        if (h->subgroups[i] == subgroup)
            return (int)i;
    }
    return -1;
}

/* rc from a call made while this thread holds h's reservations: when a
 * view change is what failed it, SPINDLE_EAGAIN naming what to commit. */
static int held_error(spindle_group_t *group, const struct held *h, const char *call, int rc)
{
    if ((rc != SPINDLE_ESHUTDOWN && rc != SPINDLE_EPEERFAILED) ||
        !view_change_pending(&group->membership))
        return rc;
    return sp_error(SPINDLE_EAGAIN,
                    "%s: a view change is under way and waits for the reservation this thread "
                    "holds on subgroup %u: commit it, then retry",
                    call, h->subgroups[0]);
}

/* The current multicast for a commit or a nested reserve of h. */
static struct smc_group *held_smc(spindle_group_t *group, const struct held *h)
{
    return h->read_side ? view_held(&group->membership) : view_upcall_smc(&group->membership);
}

/* rc of a reserve inside an upcall (either mode): a view change is not
 * waited for. */
static int upcall_error(spindle_group_t *group, int rc)
{
    if ((rc != SPINDLE_ESHUTDOWN && rc != SPINDLE_EPEERFAILED) ||
        !view_change_pending(&group->membership))
        return rc;
    return sp_error(SPINDLE_EAGAIN,
                    "reserve inside an upcall: a view change is under way and an upcall does not "
                    "wait for it; keep the message and send it after the change");
}

/* A reservation by a thread that already holds one on this group. */
static int reserve_nested(spindle_group_t *group, struct held *h, uint32_t subgroup, size_t size,
                          unsigned flags, void **slot)
{
    if (h->count == HELD_SUBGROUPS)
        return sp_error(SPINDLE_EINVAL,
                        "reserve: this thread already holds %d open reservations on the group, "
                        "the most one thread may",
                        HELD_SUBGROUPS);
    int rc = smc_reserve(held_smc(group, h), subgroup, size, flags, slot);
    const struct group_upcall *u = group_upcall_of(group);
    if (rc != 0 && u != NULL)
        return upcall_error(group, rc);
    if (rc != 0)
        return held_error(group, h, "reserve", rc);
    h->subgroups[h->count++] = subgroup;
    return 0;
}

/* A free entry of this thread's table of groups with open reservations in
 * *out; SPINDLE_EINVAL when all HELD_GROUPS are taken. */
static int held_free_slot(struct held **out)
{
    *out = held_find(NULL);
    if (*out == NULL)
        return sp_error(SPINDLE_EINVAL,
                        "reserve: this thread already holds open reservations on %d groups, "
                        "the most one thread may",
                        HELD_GROUPS);
    return 0;
}

/*
 * A reserve from inside a default-mode upcall of the group
 * (include/spindle/group.h, "Upcalls"): never waits, for the window or for
 * a view change, and takes no lock: the thread holds the engine lock or is
 * the membership thread, and the view cannot be retired under either.
 */
static int reserve_in_upcall(spindle_group_t *group, uint32_t subgroup, size_t size, unsigned flags,
                             void **slot)
{
    flags |= SPINDLE_RESERVE_NONBLOCK;
    struct held *h = held_find(group);
    if (h != NULL)
        return reserve_nested(group, h, subgroup, size, flags, slot);
    int taken = held_free_slot(&h);
    if (taken < 0)
        return taken;
    int rc = smc_reserve(view_upcall_smc(&group->membership), subgroup, size, flags, slot);
    if (rc == 0) {
        *h = (struct held){.group = group, .count = 1, .subgroups = {subgroup}, .read_side = false};
        return 0;
    }
    return upcall_error(group, rc);
}

/*
 * A non-blocking reserve outside every upcall that met a view change:
 * marks subgroup owed a send_ready (group_send_change_done); true when
 * the mark is new. The mark comes before the caller looks at the change
 * again under the membership's lock, and change_done is called after the
 * change ended under that lock, so a change that ends meanwhile either
 * shows (the caller goes on and drops a mark it made) or finds the mark.
 */
static bool change_waiter_add(spindle_group_t *group, uint32_t subgroup)
{
    uint64_t bit = 1ull << (subgroup % 64);
    uint64_t was = __atomic_fetch_or(&group->change_waiters[subgroup / 64], bit, __ATOMIC_SEQ_CST);
    return (was & bit) == 0;
}

static void change_waiter_drop(spindle_group_t *group, uint32_t subgroup)
{
    __atomic_fetch_and(&group->change_waiters[subgroup / 64], ~(1ull << (subgroup % 64)),
                       __ATOMIC_SEQ_CST);
}

static int change_eagain(uint32_t subgroup)
{
    return sp_error(SPINDLE_EAGAIN,
                    "reserve on subgroup %u: a view change is under way and a non-blocking "
                    "reserve does not wait for it; send_ready is called once it is done",
                    subgroup);
}

void group_send_change_done(void *ctx)
{
    spindle_group_t *group = ctx;
    for (uint32_t word = 0; word < SPINDLE_MAX_SUBGROUPS / 64; word++) {
        uint64_t owed = __atomic_exchange_n(&group->change_waiters[word], 0, __ATOMIC_SEQ_CST);
        for (; owed != 0; owed &= owed - 1) {
            uint32_t subgroup = word * 64 + (uint32_t)__builtin_ctzll(owed);
            if (group->dispatch != NULL)
                group_dispatch_send_ready(group, subgroup);
            else
                group_upcall_send_ready_after_change(group, subgroup);
        }
    }
}

/* The multicast for a non-blocking reserve in *smc with the read side of
 * smc_lock held (true), or false when a view change holds the write side
 * (subgroup is then owed a send_ready). */
static bool nonblock_acquire(spindle_group_t *group, uint32_t subgroup, struct smc_group **smc)
{
    /* Only a view change takes the write side: when it ended between the
     * two looks, the lock is free again (or taken by the next change). */
    while (!view_try_acquire(&group->membership, smc)) {
        bool added = change_waiter_add(group, subgroup);
        if (view_changing(&group->membership))
            return false;
        if (added) /* the change ended meanwhile: nothing is owed */
            change_waiter_drop(group, subgroup);
    }
    return true;
}

/* rc of a non-blocking reserve in view (smc_lock released): 1 to retry on
 * the view installed meanwhile, SPINDLE_EAGAIN while the change is under
 * way, else the error to report. */
static int nonblock_error(spindle_group_t *group, uint32_t subgroup, uint64_t view, int rc)
{
    struct view_membership *m = &group->membership;
    if (rc != SPINDLE_ESHUTDOWN && rc != SPINDLE_EPEERFAILED)
        return view_after_error(m, view, rc); /* EREMOVED waits a moment for its reason */
    if (!m->config.tolerate_failures)
        return rc;
    bool added = change_waiter_add(group, subgroup);
    if (view_current_id(m) == view && view_change_pending(m))
        return change_eagain(subgroup);
    if (added) /* retried on the new view, or failed: nothing is owed */
        change_waiter_drop(group, subgroup);
    if (view_current_id(m) != view)
        return 1;
    int status = view_status(m);
    return status != 0 ? status : rc;
}

SPINDLE_API int spindle_reserve(spindle_group_t *group, uint32_t subgroup, size_t size,
                                unsigned flags, void **slot)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    /* Inside an upcall a reserve never waits for the window, nor for a
     * view change: either may be waiting for this very thread (the default
     * mode's predicate thread; in dispatch mode, members whose queues are
     * full while their dispatching threads wait for windows, in a circle,
     * or a join whose state_save is queued behind this upcall). */
    const struct group_upcall *u = group_upcall_of(group);
    if (u != NULL && u->lockless)
        return reserve_in_upcall(group, subgroup, size, flags, slot);
    if (u != NULL)
        flags |= SPINDLE_RESERVE_NONBLOCK;
    struct held *h = held_find(group);
    if (h != NULL)
        return reserve_nested(group, h, subgroup, size, flags, slot);
    int taken = held_free_slot(&h);
    if (taken < 0)
        return taken;
    /* A non-blocking reserve outside every upcall waits neither for the
     * window nor for a view change, which may be waiting for this very
     * thread (in dispatch mode, a joiner's state_save queued for the loop
     * that sends): SPINDLE_EAGAIN during the change, and send_ready
     * follows once the new view takes messages. */
    bool nonblock = u == NULL && (flags & SPINDLE_RESERVE_NONBLOCK) != 0;
    if (nonblock && subgroup >= SPINDLE_MAX_SUBGROUPS)
        return sp_error(SPINDLE_EINVAL, "reserve: subgroup %u is beyond the most a group has, %u",
                        subgroup, SPINDLE_MAX_SUBGROUPS);
    for (;;) {
        struct smc_group *smc;
        if (!nonblock)
            smc = view_acquire(&group->membership);
        else if (!nonblock_acquire(group, subgroup, &smc))
            return change_eagain(subgroup);
        uint64_t view = view_current_id(&group->membership);
        int rc = smc_reserve(smc, subgroup, size, flags, slot);
        if (rc == 0) {
            *h = (struct held){
                .group = group, .count = 1, .subgroups = {subgroup}, .read_side = true};
            return 0;
        }
        view_release(&group->membership);
        if (u != NULL) /* a dispatch-mode upcall does not wait a view change out */
            return upcall_error(group, rc);
        rc = nonblock ? nonblock_error(group, subgroup, view, rc)
                      : view_after_error(&group->membership, view, rc);
        if (rc != 1)
            return rc;
    }
}

SPINDLE_API int spindle_commit(spindle_group_t *group, uint32_t subgroup)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    struct held *h = held_find(group);
    int index = held_index(h, subgroup);
    if (index < 0)
        return sp_error(SPINDLE_EINVAL, "subgroup %u has no open reservation on this thread",
                        subgroup);
    /* The read side of smc_lock is held from the reservation (or, inside
     * a default-mode upcall, the view cannot change meanwhile); a
     * deliver upcall's thread holds the engine lock already. */
    const struct group_upcall *u = group_upcall_of(group);
    struct smc_group *smc = held_smc(group, h);
    int rc;
    if (u == NULL && group->membership.config.own_inline) {
        /* Outside every upcall the commit may deliver this thread's own
         * message on it (own_inline): that upcall sees none of this
         * thread's reservations (it would drop them on return). */
        struct held outer = *h;
        *h = (struct held){0};
        rc = smc_commit_own(smc, subgroup);
        *h = outer;
    } else if (u == NULL) {
        rc = smc_commit(smc, subgroup);
    } else {
        rc = u->engine_locked ? smc_commit_locked(smc, subgroup) : smc_commit(smc, subgroup);
    }
    if (rc != 0)
        return rc;
    h->subgroups[index] = h->subgroups[--h->count];
    if (h->count == 0) {
        h->group = NULL;
        if (h->read_side)
            view_release(&group->membership);
    }
    return 0;
}

void group_drop_reservations(spindle_group_t *group)
{
    struct held *h = held_find(group);
    if (h == NULL)
        return;
    SP_LOG_WARNING("group",
                   "an upcall returned with %u reservations open (subgroup %u first): dropped, "
                   "nothing was sent",
                   h->count, h->subgroups[0]);
    struct smc_group *smc = held_smc(group, h);
    for (uint32_t i = 0; i < h->count; i++)
        smc_cancel(smc, h->subgroups[i]);
    if (h->read_side)
        view_release(&group->membership);
    *h = (struct held){0};
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
    int refused = group_upcall_refuse(group, "spindle_flush");
    if (refused < 0)
        return refused;
    struct held *h = held_find(group);
    if (h != NULL) {
        int rc = smc_flush(view_held(&group->membership), timeout_ms);
        return rc == 0 ? 0 : held_error(group, h, "flush", rc);
    }
    for (;;) {
        struct smc_group *smc = view_acquire(&group->membership);
        uint64_t view = view_current_id(&group->membership);
        int rc = smc_flush(smc, timeout_ms);
        view_release(&group->membership);
        if (rc == 0)
            return 0;
        rc = view_after_error(&group->membership, view, rc);
        if (rc != 1)
            return rc;
    }
}

/* SPINDLE_EINVAL unless subgroup (or, for SPINDLE_ALL_SUBGROUPS, some
 * subgroup) is logged here: only those have a persistence frontier. */
static int check_logged(const spindle_group_t *group, const char *call, uint32_t subgroup)
{
    const uint64_t *logged = group->membership.config.logged;
    if (subgroup == SPINDLE_ALL_SUBGROUPS) {
        for (uint32_t i = 0; i < SPINDLE_MAX_SUBGROUPS / 64; i++)
            if (logged[i] != 0)
                return 0;
        return sp_error(SPINDLE_EINVAL,
                        "%s: no subgroup is logged (options.logged_subgroups), so none has a "
                        "persistence frontier",
                        call);
    }
    if (subgroup >= SPINDLE_MAX_SUBGROUPS || ((logged[subgroup / 64] >> (subgroup % 64)) & 1) == 0)
        return sp_error(SPINDLE_EINVAL,
                        "%s: subgroup %u is not a logged subgroup (options.logged_subgroups): it "
                        "has no persistence frontier",
                        call, subgroup);
    return 0;
}

SPINDLE_API int spindle_flush_persistent(spindle_group_t *group, uint32_t subgroup, int timeout_ms)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    int rc = check_logged(group, "flush_persistent", subgroup);
    if (rc < 0)
        return rc;
    uint32_t which = subgroup == SPINDLE_ALL_SUBGROUPS ? SMC_ALL_SUBGROUPS : subgroup;
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : sp_now_ns() + (uint64_t)timeout_ms * 1000000u;
    struct held *h = held_find(group);
    if (h != NULL) {
        rc = smc_flush_persistent(view_held(&group->membership), which, deadline);
        return rc == 0 ? 0 : held_error(group, h, "flush_persistent", rc);
    }
    /* A view change fails the wait (the old view wedged); it goes on in
     * the next view, where the old view's deliveries are durable at every
     * survivor and own messages not delivered were resent. */
    for (;;) {
        struct smc_group *smc = view_acquire(&group->membership);
        uint64_t view = view_current_id(&group->membership);
        rc = smc_flush_persistent(smc, which, deadline);
        view_release(&group->membership);
        if (rc == 0)
            return 0;
        rc = view_after_error(&group->membership, view, rc);
        if (rc != 1)
            return rc;
    }
}

SPINDLE_API int spindle_group_persisted(spindle_group_t *group, uint32_t subgroup,
                                        uint64_t *view_id, uint64_t *local, uint64_t *global)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "group is NULL");
    int rc = subgroup == SPINDLE_ALL_SUBGROUPS
                 ? sp_error(SPINDLE_EINVAL, "persisted: name one subgroup")
                 : check_logged(group, "persisted", subgroup);
    if (rc < 0)
        return rc;
    uint64_t mine = 0, all = 0;
    struct smc_group *smc = view_acquire(&group->membership);
    uint64_t view = view_current_id(&group->membership);
    rc = smc != NULL ? smc_group_persisted(smc, subgroup, &mine, &all)
                     : sp_error(SPINDLE_EINVAL, "persisted: the group has no view yet");
    view_release(&group->membership);
    if (rc < 0)
        return rc;
    if (view_id != NULL)
        *view_id = view;
    if (local != NULL)
        *local = mine;
    if (global != NULL)
        *global = all;
    return 0;
}

SPINDLE_API int spindle_group_snapshot(spindle_group_t *group, uint32_t subgroup, uint64_t view_id,
                                       uint64_t seq, const void *state, size_t length)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "snapshot: group is NULL");
    int rc = subgroup == SPINDLE_ALL_SUBGROUPS
                 ? sp_error(SPINDLE_EINVAL, "snapshot: name one subgroup")
                 : check_logged(group, "snapshot", subgroup);
    if (rc < 0)
        return rc;
    return view_log_snapshot(&group->membership, subgroup, view_id, seq, state, length);
}

SPINDLE_API int spindle_barrier(spindle_group_t *group, int timeout_ms)
{
    if (group == NULL)
        return sp_error(SPINDLE_EINVAL, "barrier: group is NULL");
    int refused = group_upcall_refuse(group, "spindle_barrier");
    if (refused < 0)
        return refused;
    return view_barrier(&group->membership, timeout_ms);
}
