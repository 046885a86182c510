/*
 * The survivors' exchange: every survivor publishes one blob over the
 * control channel to the others (next view id, the suspected rows, the
 * joiner it admits, its next-view table descriptor and its frozen received
 * counts per subgroup), then commits.
 *
 * Suspicion spreads through the blobs: a survivor adopts any row another
 * suspects and starts again under the larger set (a later blob of the same
 * tag replaces the earlier one at every receiver). When every survivor's
 * latest blob names exactly its own set, it commits: it publishes that it
 * holds all blobs of the set and waits for every survivor's commitment. A
 * committed member never abandons the set, so two survivors can never
 * install different views of the same number.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/error.h"
#include "view/view_impl.h"

int view_gather(struct view_membership *m, uint64_t from, uint64_t view, uint32_t tag, void *all,
                size_t length, const char *what)
{
    uint64_t deadline =
        sp_now_ns() + EXCHANGE_TIMEOUTS * 1000000ull * (uint64_t)m->config.failure_timeout_ms;
    for (;;) {
        int rc = ctl_collect(m->ctl, tag, from, all, length, 20, NULL);
        if (rc == 0)
            return 0;
        if (sp_now_ns() >= deadline)
            return sp_error(SPINDLE_ETIMEDOUT,
                            "view %llu: the survivors did not complete the %s within %d ms (%s)",
                            (unsigned long long)view, what,
                            EXCHANGE_TIMEOUTS * m->config.failure_timeout_ms, spindle_errmsg());
    }
}

int view_publish_ready(struct view_membership *m, uint64_t view, uint32_t tag, uint64_t to)
{
    uint8_t ready[VIEW_WIRE_READY_SIZE];
    view_wire_encode_ready(view, ready, sizeof ready);
    return ctl_publish(m->ctl, tag, ready, sizeof ready, to);
}

/* Checks the ready messages of the members of from in all (by id). */
static int check_ready(const uint8_t *all, uint64_t from, uint64_t view, const char *what)
{
    for (uint32_t id = 0; id < SPINDLE_MAX_MEMBERS; id++) {
        if (((from >> id) & 1) == 0)
            continue;
        uint64_t named = 0;
        if (view_wire_decode_ready(all + (size_t)id * VIEW_WIRE_READY_SIZE, VIEW_WIRE_READY_SIZE,
                                   &named) < 0)
            return sp_error(SPINDLE_EPROTO, "member %u sent a malformed %s: %s", id, what,
                            spindle_errmsg());
        if (named != view)
            return sp_error(SPINDLE_EPROTO, "member %u is ready in view %llu, not %llu (%s)", id,
                            (unsigned long long)named, (unsigned long long)view, what);
    }
    return 0;
}

int view_gather_ready(struct view_membership *m, uint64_t from, uint64_t view, uint32_t tag,
                      int timeout_ms, const char *what)
{
    uint8_t *all = calloc(SPINDLE_MAX_MEMBERS, VIEW_WIRE_READY_SIZE);
    if (all == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the %s", what);
    from &= ~(1ull << m->config.self);
    int rc = timeout_ms < 0
                 ? view_gather(m, from, view, tag, all, VIEW_WIRE_READY_SIZE, what)
                 : ctl_collect(m->ctl, tag, from, all, VIEW_WIRE_READY_SIZE, timeout_ms, NULL);
    if (rc == 0)
        rc = check_ready(all, from, view, what);
    free(all);
    return rc;
}

const struct view_blob *view_blob_of(const struct view_next *next, uint32_t rank)
{
    return &next->decoded[next->epoch->view.member_ids[rank]];
}

/* Allocates the blob buffers of next and encodes this member's blob. */
static int prepare_blobs(struct view_membership *m, struct view_next *next, uint32_t self)
{
    uint32_t subgroups = m->current->view.num_subgroups;
    size_t per_member = (size_t)subgroups * SST_MAX_ROWS;
    next->blob_size = view_wire_blob_size(subgroups);
    next->blobs = calloc(SPINDLE_MAX_MEMBERS, next->blob_size);
    next->decoded = calloc(SPINDLE_MAX_MEMBERS, sizeof *next->decoded);
    next->counts = calloc(SPINDLE_MAX_MEMBERS * (per_member > 0 ? per_member : 1), 8);
    if (next->blobs == NULL || next->decoded == NULL || next->counts == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for view blobs");
    for (uint32_t id = 0; id < SPINDLE_MAX_MEMBERS; id++)
        next->decoded[id].counts = next->counts + (size_t)id * per_member;
    struct view_blob *mine = &next->decoded[self];
    mine->view_id = next->epoch->view.id;
    mine->suspected = next->how.removed;
    mine->joiner = next->how.joiner;
    mine->num_subgroups = subgroups;
    int rc = smc_group_export(next->epoch->smc, &mine->desc);
    for (uint32_t g = 0; g < subgroups && rc >= 0; g++)
        if (smc_group_received(m->current->smc, g, m->current->view.my_rank,
                               &mine->counts[(size_t)g * SST_MAX_ROWS], SST_MAX_ROWS) < 0)
            rc = SPINDLE_EPROTO;
    if (rc >= 0)
        view_wire_encode_blob(mine, next->blobs + (size_t)self * next->blob_size, next->blob_size);
    return rc;
}

/* Decodes the blobs of the survivors in `have`; looks at what they name.
 * *all_same: every one names exactly next's set and joiner. */
static int read_blobs(struct view_membership *m, struct view_next *next, uint64_t have,
                      uint64_t *union_mask, bool *all_same)
{
    uint32_t subgroups = m->current->view.num_subgroups;
    uint64_t view = next->epoch->view.id;
    *union_mask = next->how.removed;
    *all_same = true;
    for (uint32_t id = 0; id < SPINDLE_MAX_MEMBERS; id++) {
        if (((next->how.survivors & have) >> id & 1) == 0)
            continue;
        struct view_blob *b = &next->decoded[id];
        if (id != m->config.self &&
            view_wire_decode_blob(next->blobs + (size_t)id * next->blob_size, next->blob_size,
                                  subgroups, b) < 0)
            return sp_error(SPINDLE_EPROTO, "member %u sent a malformed view blob: %s", id,
                            spindle_errmsg());
        if (b->view_id != view)
            return sp_error(SPINDLE_EPROTO, "view blob of member %u names view %llu, not %llu", id,
                            (unsigned long long)b->view_id, (unsigned long long)view);
        *union_mask |= b->suspected;
        /* A different joiner: one side has not seen the announcement yet
         * (it will) or dropped the join for a failure (so will this
         * member, once it adopts the suspicion). */
        *all_same = *all_same && b->suspected == next->how.removed && b->joiner == next->how.joiner;
    }
    return 0;
}

/* Publishes and gathers blobs until every survivor names next's set. */
static int exchange_blobs(struct view_membership *m, struct view_next *next)
{
    uint32_t self = m->config.self;
    uint64_t view = next->epoch->view.id;
    uint32_t tag = view_change_tag(view, STEP_BLOB);
    int rc = prepare_blobs(m, next, self);
    if (rc >= 0)
        rc = ctl_publish(m->ctl, tag, next->blobs + (size_t)self * next->blob_size, next->blob_size,
                         next->how.survivors);
    uint64_t deadline =
        sp_now_ns() + EXCHANGE_TIMEOUTS * 1000000ull * (uint64_t)m->config.failure_timeout_ms;
    while (rc >= 0) {
        uint64_t have = 0;
        rc = ctl_collect(m->ctl, tag, next->how.survivors, next->blobs, next->blob_size, 20, &have);
        char why[256];
        snprintf(why, sizeof why, "%s", rc == 0 ? "" : spindle_errmsg());
        uint64_t union_mask;
        bool all_same;
        int bad = read_blobs(m, next, have | (1ull << self), &union_mask, &all_same);
        if (bad < 0)
            return bad;
        if (union_mask != next->how.removed)
            view_adopt_suspicion(m, union_mask);
        if (rc == 0 && all_same)
            return 0; /* every survivor's latest blob names exactly this set */
        rc = 0;
        if (view_suspicion_grew(m, next->how.removed))
            return sp_error(SPINDLE_ETIMEDOUT,
                            "view %llu: more members suspected during the exchange",
                            (unsigned long long)view);
        if (sp_now_ns() >= deadline)
            /* Not a majority that this member can confirm: stop. */
            return sp_error(SPINDLE_EMINORITY,
                            "view %llu: the survivors did not complete the exchange within %d ms "
                            "(%s): this member cannot reach a majority and stops",
                            (unsigned long long)view,
                            EXCHANGE_TIMEOUTS * m->config.failure_timeout_ms, why);
    }
    return rc;
}

/* Publishes this member's commitment and checks every survivor's. */
static int commit(struct view_membership *m, struct view_next *next)
{
    uint64_t view = next->epoch->view.id;
    uint32_t tag = view_change_tag(view, STEP_COMMIT);
    struct view_commit mine = {view, next->how.removed, next->how.joiner};
    uint8_t encoded[VIEW_WIRE_COMMIT_SIZE];
    view_wire_encode_commit(&mine, encoded, sizeof encoded);
    uint8_t *all = calloc(SPINDLE_MAX_MEMBERS, VIEW_WIRE_COMMIT_SIZE);
    if (all == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for commitments");
    uint64_t others = next->how.survivors & ~(1ull << m->config.self);
    int rc = ctl_publish(m->ctl, tag, encoded, sizeof encoded, next->how.survivors);
    if (rc == 0)
        rc = view_gather(m, others, view, tag, all, VIEW_WIRE_COMMIT_SIZE, "commitment");
    for (uint32_t id = 0; id < SPINDLE_MAX_MEMBERS && rc == 0; id++) {
        if (((others >> id) & 1) == 0)
            continue; /* the joiner does not commit */
        struct view_commit c;
        if (view_wire_decode_commit(all + (size_t)id * VIEW_WIRE_COMMIT_SIZE, VIEW_WIRE_COMMIT_SIZE,
                                    &c) < 0)
            rc = sp_error(SPINDLE_EPROTO, "member %u sent a malformed commitment: %s", id,
                          spindle_errmsg());
        else if (c.view_id != view || c.suspected != mine.suspected || c.joiner != mine.joiner)
            rc = sp_error(SPINDLE_EPROTO, "member %u committed to view %llu without rows %llx", id,
                          (unsigned long long)c.view_id, (unsigned long long)c.suspected);
    }
    free(all);
    /* A commitment that cannot complete is final: stop (never abandon). */
    return rc == SPINDLE_ETIMEDOUT ? sp_error(SPINDLE_EUNREACH, "%s", spindle_errmsg()) : rc;
}

/*
 * Without the commit, one survivor could install the view for a set that
 * another had just abandoned for a larger one, and they would deliver
 * different trims.
 */
int view_exchange(struct view_membership *m, struct view_next *next)
{
    int rc = exchange_blobs(m, next);
    return rc < 0 ? rc : commit(m, next);
}
