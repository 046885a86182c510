/*
 * The survivors' exchange: every survivor publishes one blob over the
 * control channel to the others (next view id, the suspected rows, the
 * joiner it admits, its next-view table descriptor and its frozen received
 * counts per subgroup), then commits.
 *
 * Suspicion spreads through the blobs: a survivor adopts any row another
 * suspects and starts again under the larger set S (a later blob of the
 * same tag replaces the earlier one at every receiver). A member's set
 * only grows. When every survivor's latest blob names exactly its set, and
 * it suspects nobody beyond it, it commits: it publishes that it holds all
 * blobs of S. It installs the view of S when
 *   (I1) every survivor of S committed S, or
 *   (I2) it is locked on S and so is every survivor of S it does not
 *        suspect, those being a majority of the previous view.
 * A committed member that is not locked leaves S (for a larger set) only
 * when a survivor of S names rows beyond S; a locked one never leaves S.
 * It locks once it holds the commitment of a majority and of every
 * survivor it does not suspect (the others failed after their blob), or
 * once another survivor locked.
 *
 * Why two members never install different views of the same number.
 * First, a survivor Y whose blob or commitment names rows beyond S never
 * commits S afterwards (its set only grows); if Y had committed S before,
 * it left S because of an earlier such survivor, and the first of that
 * chain never committed S. So once any member left S, (I1) cannot hold
 * for S. Now suppose S and T != S are both installed. By (I1) the
 * survivors of a set are a majority of the previous view (majority rule);
 * by (I2) the locked members are one. Two majorities share a member X.
 * (With tie_breaker, read quorum for majority: more than half, or half
 * with the previous view's leader; two quorums share a member too.) If
 * both were installed by (I1), X committed to both, so it left one of
 * them: contradiction. If S was installed by (I2), X is locked on S and
 * never left it; T is then a smaller set X committed to and left
 * ((I1) for T impossible) or one it is locked on too (impossible: one
 * lock). Members of one set hold the same blobs (they committed to them),
 * so they compute the same trim.
 *
 * A failure inside the change is folded into it (a survivor that has not
 * committed suspects the failed one and the others follow it) or, when
 * every live survivor had already committed, handled by the next change:
 * the failed member is a member of the installed view and is suspected
 * there at once (view_install.c).
 *
 * Modelled in models/view_change.pml (steps retry, exchange, commit;
 * docs/MODELS.md maps each to the code): change these rules there too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
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

static view_blob_hook_fn blob_hook;

/* Called only by tests (its purpose): */
// cppcheck-suppress unusedFunction
void view_test_blob(view_blob_hook_fn fn)
{
    blob_hook = fn;
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
    if (rc >= 0 && blob_hook != NULL)
        blob_hook(mine);
    if (rc >= 0)
        view_wire_encode_blob(mine, next->blobs + (size_t)self * next->blob_size, next->blob_size);
    return rc;
}

/*
 * Whether survivor id's received counts in its blob can be true: its row
 * only grows and it froze its counts at the wedge, before its blob, so no
 * count may be below what this member read in that row since (a smaller
 * one would pull the trim below what members delivered on the strength of
 * the larger). No count may come near overflow either (SMC_COUNTER_MAX).
 * A count above the truth cannot raise the trim (the smallest count of
 * any survivor): the others' counts bound it.
 */
static bool blob_counts_hold(struct view_membership *m, uint32_t rank, const struct view_blob *b,
                             char *why, size_t cap)
{
    const struct view *view = &m->current->view;
    uint64_t seen[SST_MAX_ROWS];
    for (uint32_t g = 0; g < view->num_subgroups; g++) {
        int senders = smc_group_received(m->current->smc, g, rank, seen, SST_MAX_ROWS);
        for (int s = 0; s < senders; s++) {
            uint64_t claimed = b->counts[(size_t)g * SST_MAX_ROWS + (uint32_t)s];
            if (claimed < seen[s] || claimed > SMC_COUNTER_MAX) {
                snprintf(why, cap,
                         "subgroup %u sender %d: received count %llu in its view blob, %llu in "
                         "its row",
                         g, s, (unsigned long long)claimed, (unsigned long long)seen[s]);
                return false;
            }
        }
    }
    return true;
}

/* Suspects survivor id for what it sent (a malformed or lying blob): the
 * change goes on without it, as for a failure. */
static void reject(struct view_membership *m, uint32_t id, const char *what, const char *why)
{
    int rank = view_rank_of(&m->current->view, id);
    sp_log(SP_LOG_ERROR, "view", "view %llu: member %u sent %s (%s): it is removed",
           (unsigned long long)m->current->view.id, id, what, why);
    if (rank >= 0)
        view_suspect(m, (uint32_t)rank);
}

/* Decodes the blobs of the survivors in `have`; looks at what they name.
 * *all_same: every one names exactly next's set and joiner. A survivor
 * whose blob is malformed, names another view or lies about its counts is
 * suspected (*union_mask then grows) and its blob ignored. */
static void read_blobs(struct view_membership *m, struct view_next *next, uint64_t have,
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
        char why[256];
        int rank = view_rank_of(&m->current->view, id);
        if (id != m->config.self &&
            view_wire_decode_blob(next->blobs + (size_t)id * next->blob_size, next->blob_size,
                                  subgroups, b) < 0) {
            reject(m, id, "a malformed view blob", spindle_errmsg());
        } else if (b->view_id != view) {
            snprintf(why, sizeof why, "view %llu, not %llu", (unsigned long long)b->view_id,
                     (unsigned long long)view);
            reject(m, id, "a view blob of another view", why);
        } else if (id != m->config.self && rank >= 0 &&
                   !blob_counts_hold(m, (uint32_t)rank, b, why, sizeof why)) {
            reject(m, id, "a view blob with counts it cannot have", why);
        } else {
            *union_mask |= b->suspected;
            /* A different joiner: one side has not seen the announcement
             * yet (it will) or dropped the join for a failure (so will
             * this member, once it adopts the suspicion). */
            *all_same =
                *all_same && b->suspected == next->how.removed && b->joiner == next->how.joiner;
            continue;
        }
        *all_same = false;
        if (rank >= 0)
            *union_mask |= 1ull << rank;
    }
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
        read_blobs(m, next, have | (1ull << self), &union_mask, &all_same);
        if (union_mask != next->how.removed)
            view_adopt_suspicion(m, union_mask);
        /* Suspicion is checked first: a member that commits to a set it
         * already knows too small makes the others wait for it. */
        bool grew = view_suspicion_grew(m, next->how.removed);
        if (rc == 0 && all_same && !grew)
            return 0; /* every survivor's latest blob names exactly this set */
        rc = 0;
        if (grew)
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

/* What this member has seen of the other survivors in the commit step. */
struct commit_seen {
    uint64_t committed; /* their latest commitment names this set */
    uint64_t locked;    /* their lock names this set */
    uint64_t moved;     /* rows (previous view) beyond this set that one names */
};

/* Scratch space for reading the others' commitments, locks and blobs. */
struct commit_scratch {
    uint8_t *commits, *locks, *blobs;
    uint64_t *counts;
};

static void scratch_free(struct commit_scratch *s)
{
    free(s->commits);
    free(s->locks);
    free(s->blobs);
    free(s->counts);
}

static int scratch_alloc(struct commit_scratch *s, const struct view_next *next, uint32_t subgroups)
{
    s->commits = calloc(SPINDLE_MAX_MEMBERS, VIEW_WIRE_COMMIT_SIZE);
    s->locks = calloc(SPINDLE_MAX_MEMBERS, VIEW_WIRE_COMMIT_SIZE);
    s->blobs = calloc(SPINDLE_MAX_MEMBERS, next->blob_size);
    s->counts = calloc((size_t)SST_MAX_ROWS * (subgroups + 1u), 8);
    if (s->commits == NULL || s->locks == NULL || s->blobs == NULL || s->counts == NULL) {
        scratch_free(s);
        return sp_error(SPINDLE_ENOMEM, "no memory for commitments");
    }
    return 0;
}

/* Reads one survivor's commitment or lock: *same when it names this set;
 * otherwise adds the rows it names beyond it to *moved. One that names a
 * smaller set is from a survivor that has not caught up (or is locked on
 * it): neither. */
static int read_commit(const uint8_t *buf, const struct view_commit *mine, uint32_t id,
                       const char *what, bool *same, uint64_t *moved)
{
    struct view_commit c;
    if (view_wire_decode_commit(buf, VIEW_WIRE_COMMIT_SIZE, &c) < 0)
        return sp_error(SPINDLE_EPROTO, "member %u sent a malformed %s: %s", id, what,
                        spindle_errmsg());
    if (c.view_id != mine->view_id)
        return sp_error(SPINDLE_EPROTO, "member %u sent a %s for view %llu, not %llu", id, what,
                        (unsigned long long)c.view_id, (unsigned long long)mine->view_id);
    *same = c.suspected == mine->suspected && c.joiner == mine->joiner;
    *moved |= c.suspected & ~mine->suspected;
    return 0;
}

/* Collects what the others in `others` published in the commit step. */
static int look(struct view_membership *m, const struct view_next *next,
                const struct view_commit *mine, uint64_t others, struct commit_scratch *s,
                struct commit_seen *seen)
{
    uint64_t view = mine->view_id;
    uint64_t have_commit = 0, have_lock = 0, have_blob = 0;
    memset(seen, 0, sizeof *seen);
    (void)ctl_collect(m->ctl, view_change_tag(view, STEP_COMMIT), others, s->commits,
                      VIEW_WIRE_COMMIT_SIZE, 20, &have_commit);
    (void)ctl_collect(m->ctl, view_change_tag(view, STEP_LOCK), others, s->locks,
                      VIEW_WIRE_COMMIT_SIZE, 0, &have_lock);
    (void)ctl_collect(m->ctl, view_change_tag(view, STEP_BLOB), others, s->blobs, next->blob_size,
                      0, &have_blob);
    uint32_t subgroups = m->current->view.num_subgroups;
    for (uint32_t id = 0; id < SPINDLE_MAX_MEMBERS; id++) {
        if (((others >> id) & 1) == 0)
            continue;
        bool same = false;
        int rc = 0;
        if ((have_commit >> id) & 1) {
            rc = read_commit(s->commits + (size_t)id * VIEW_WIRE_COMMIT_SIZE, mine, id,
                             "commitment", &same, &seen->moved);
            seen->committed |= same ? 1ull << id : 0;
        }
        if (rc == 0 && ((have_lock >> id) & 1)) {
            rc = read_commit(s->locks + (size_t)id * VIEW_WIRE_COMMIT_SIZE, mine, id, "lock", &same,
                             &seen->moved);
            seen->locked |= same ? 1ull << id : 0;
            seen->committed |= same ? 1ull << id : 0;
        }
        /* A survivor that has not committed shows a larger set only in
         * its latest blob. */
        struct view_blob b = {.counts = s->counts};
        if (rc == 0 && ((have_blob >> id) & 1)) {
            if (view_wire_decode_blob(s->blobs + (size_t)id * next->blob_size, next->blob_size,
                                      subgroups, &b) < 0)
                rc = sp_error(SPINDLE_EPROTO, "member %u sent a malformed view blob: %s", id,
                              spindle_errmsg());
            else
                seen->moved |= b.view_id == view ? b.suspected & ~mine->suspected : 0;
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

static view_commit_hook_fn before_commit;

/* Called only by tests (its purpose): */
// cppcheck-suppress unusedFunction
void view_test_before_commit(view_commit_hook_fn fn)
{
    before_commit = fn;
}

/* A quorum of the previous view (view_is_quorum: a majority, or half with
 * the leader under tie_breaker); the safety argument above needs only that
 * any two quorums share a member. */
static bool majority_of(const struct view_membership *m, const struct view *previous,
                        uint64_t ranks)
{
    return view_is_quorum(previous, ranks, m->config.tie_breaker);
}

/*
 * The commit step (see the top of this file). Publishes this member's
 * commitment to next's set S and waits until it may install:
 *  - every other survivor committed S; or
 *  - it is locked on S and every survivor it does not suspect is locked
 *    on S, those being a majority of the previous view.
 * Before it is locked, a survivor that names rows beyond S proves that S
 * can never be installed (that survivor never commits S), so this member
 * adopts them and the change starts again (SPINDLE_ETIMEDOUT). It locks on
 * S (publishes a lock, and from then on never leaves S) once it has the
 * commitment of a majority and of every survivor it does not suspect, or
 * once another survivor locked. SPINDLE_EMINORITY at the deadline when not
 * locked, SPINDLE_EUNREACH when locked (final), SPINDLE_EPROTO for a
 * malformed or inconsistent message.
 */
static int commit(struct view_membership *m, struct view_next *next)
{
    const struct view *previous = &m->current->view;
    uint64_t view = next->epoch->view.id;
    uint64_t self = 1ull << m->config.self;
    uint64_t others = next->how.survivors & ~self; /* the joiner does not commit */
    struct view_commit mine = {view, next->how.removed, next->how.joiner};
    uint8_t encoded[VIEW_WIRE_COMMIT_SIZE];
    view_wire_encode_commit(&mine, encoded, sizeof encoded);
    struct commit_scratch scratch;
    int rc = scratch_alloc(&scratch, next, previous->num_subgroups);
    if (rc < 0)
        return rc;
    if (before_commit != NULL)
        before_commit(m, next);
    rc = ctl_publish(m->ctl, view_change_tag(view, STEP_COMMIT), encoded, sizeof encoded,
                     next->how.survivors);
    bool locked = false;
    uint64_t deadline =
        sp_now_ns() + EXCHANGE_TIMEOUTS * 1000000ull * (uint64_t)m->config.failure_timeout_ms;
    while (rc == 0) {
        struct commit_seen seen;
        rc = look(m, next, &mine, others, &scratch, &seen);
        if (rc < 0)
            break;
        uint64_t waived = view_suspected_ids(m) & others;
        bool all = seen.committed == others;
        bool lock = all || seen.locked != 0 ||
                    ((seen.committed | waived) == others &&
                     majority_of(m, previous, seen.committed | self));
        if (!locked && !lock && seen.moved != 0) {
            view_adopt_suspicion(m, seen.moved);
            rc = sp_error(SPINDLE_ETIMEDOUT,
                          "view %llu: a survivor suspects rows %llx beyond this member's set",
                          (unsigned long long)view, (unsigned long long)seen.moved);
            break;
        }
        if (!locked && lock) {
            rc = ctl_publish(m->ctl, view_change_tag(view, STEP_LOCK), encoded, sizeof encoded,
                             next->how.survivors);
            locked = rc == 0;
        }
        if (rc < 0 || all)
            break;
        if (locked && (seen.locked | waived) == others &&
            majority_of(m, previous, seen.locked | self)) {
            sp_log(SP_LOG_WARN, "view",
                   "view %llu: installing without the commitment of suspected members %llx; "
                   "the next view change removes them",
                   (unsigned long long)view, (unsigned long long)(others & ~seen.committed));
            break;
        }
        if (sp_now_ns() >= deadline)
            rc =
                sp_error(locked ? SPINDLE_EUNREACH : SPINDLE_EMINORITY,
                         "view %llu: the survivors did not complete the commitment within %d ms "
                         "(committed %llx, locked %llx of %llx)",
                         (unsigned long long)view, EXCHANGE_TIMEOUTS * m->config.failure_timeout_ms,
                         (unsigned long long)seen.committed, (unsigned long long)seen.locked,
                         (unsigned long long)others);
    }
    scratch_free(&scratch);
    return rc;
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
