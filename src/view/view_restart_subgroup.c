/*
 * The logged subgroups a total restart does not take from the restart
 * leader's log (docs/LOGS.md "Total restart", "Subgroups the restart
 * leader does not log"). A member logs only the subgroups it delivers, so
 * with disjoint subgroups (spindle-kv's shards) the log of the member L the
 * group restarts from holds nothing of some of them. For each of those, L
 * names in its running status the member whose log held the most of it
 * when it decided (its source, view_restart_source) and where that log
 * ends:
 *
 *  - a member of such a subgroup joins keeping its own log of it, once its
 *    log ends where the source's does; one that is behind first asks the
 *    source for the records it lacks (VIEW_WIRE_RESTART_FETCH, answered
 *    with a catch-up stream of that subgroup's messages and the view
 *    records up to the view restarted from, after the source's newest
 *    snapshot of it when the source's log holds it only from a snapshot
 *    past the asker's end, in slices: view_restart_fetch.c), checks them
 *    (view_log_intake.c, as a joiner checks its catch-up), stores the
 *    snapshot and appends the records, and replays its log as a joiner
 *    does (from the snapshot);
 *  - the leader checks the same before it sends a joiner its catch-up,
 *    and never resets a log that keeps such a subgroup;
 *  - the restarted group's layout keeps a subgroup none of whose members
 *    is in the view yet received by every member and sent by none, so
 *    that the first views (L alone, then the joiners one by one) are
 *    valid for a layout that puts each member in its own subgroup.
 */
#include <inttypes.h>
#include <string.h>

#include "log/log.h"
#include "log/log_snapshot.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "view/view_impl.h"

/* ---- the restart point's view of a subgroup ------------------------- */

enum point_kind {
    POINT_HELD,   /* the restart leader's log holds some of it */
    POINT_SOURCE, /* it holds none; a source is named */
    POINT_NONE,   /* it holds none and names no source */
};

static bool zero_end(uint64_t view_id, uint64_t seq)
{
    return view_id == 0 && seq == 0;
}

/* What the restart point says of subgroup g: its end (held or its
 * source's) and the source's id. */
static enum point_kind point_of(const struct view_restart_status *point, uint32_t g,
                                struct view_join_log_end *end, uint32_t *source)
{
    *end = (struct view_join_log_end){g, 0, 0};
    *source = SPINDLE_MAX_MEMBERS;
    for (uint32_t k = 0; k < point->ends.count; k++) {
        const struct view_join_log_end *theirs = &point->ends.ends[k];
        if (theirs->subgroup == g && !zero_end(theirs->view_id, theirs->seq)) {
            *end = *theirs;
            return POINT_HELD;
        }
    }
    for (uint32_t k = 0; k < point->num_sources; k++)
        if (point->sources[k].subgroup == g) {
            end->view_id = point->sources[k].view_id;
            end->seq = point->sources[k].seq;
            *source = point->sources[k].id;
            return POINT_SOURCE;
        }
    return POINT_NONE;
}

bool view_restart_point_end(const struct view_restart_status *point, uint32_t g,
                            struct view_join_log_end *end)
{
    uint32_t source;
    return point_of(point, g, end, &source) != POINT_NONE;
}

/* Whether member id is one of g's configured members. */
static bool configured_member(const struct view_restart *r, uint32_t g, uint32_t id)
{
    if (r->configured == NULL || g >= r->num_subgroups)
        return false;
    for (uint32_t i = 0; i < r->configured[g].num_members; i++)
        if (r->configured[g].members[i] == id)
            return true;
    return false;
}

int view_restart_check_subgroups(const struct view_restart *r,
                                 const struct view_join_log_ends *ends, uint32_t who,
                                 const char *whose)
{
    const struct view_restart_status *point = &r->running;
    if ((point->flags & VIEW_RESTART_ENDS) == 0)
        return 0;
    for (uint32_t i = 0; i < ends->count; i++) {
        const struct view_join_log_end *mine = &ends->ends[i];
        uint32_t g = mine->subgroup, source;
        struct view_join_log_end theirs;
        enum point_kind kind = point_of(point, g, &theirs, &source);
        bool none = zero_end(mine->view_id, mine->seq);
        if (kind == POINT_HELD || mine->view_id > point->latest_view)
            continue; /* sent what it lacks; or a view of the restarted group */
        if (kind == POINT_NONE && none)
            continue;
        if (kind == POINT_NONE)
            return sp_error(SPINDLE_EINVAL,
                            "the group restarted from a log of view %" PRIu64
                            " that holds nothing of logged subgroup %u (its member was not a "
                            "member of it, or had logged none of it), and names no member whose "
                            "log holds it, but %s holds it up to (%" PRIu64 ", %" PRIu64
                            "): this subgroup's history would be lost; not joining (docs/LOGS.md "
                            "\"Total restart\")",
                            point->latest_view, g, whose, mine->view_id, mine->seq);
        bool same = mine->view_id == theirs.view_id && mine->seq == theirs.seq;
        if (same || (none && !configured_member(r, g, who)))
            continue;
        return sp_error(SPINDLE_EINVAL,
                        "logged subgroup %u: the group restarted from view %" PRIu64
                        " keeps its history as member %u's log holds it, up to (%" PRIu64
                        ", %" PRIu64 "), but %s holds it up to (%" PRIu64 ", %" PRIu64
                        "): not the same history, and a log's part of a subgroup is never "
                        "started over; not joining (docs/LOGS.md \"Total restart\")",
                        g, point->latest_view, source, theirs.view_id, theirs.seq, whose,
                        mine->view_id, mine->seq);
    }
    return 0;
}

bool view_restart_keeps(const struct view_restart_status *point,
                        const struct view_join_log_ends *ends, uint32_t *subgroup)
{
    for (uint32_t i = 0; i < ends->count; i++) {
        const struct view_join_log_end *mine = &ends->ends[i];
        struct view_join_log_end theirs;
        uint32_t source;
        if (!zero_end(mine->view_id, mine->seq) && mine->view_id <= point->latest_view &&
            point_of(point, mine->subgroup, &theirs, &source) == POINT_SOURCE) {
            *subgroup = mine->subgroup;
            return true;
        }
    }
    return false;
}

/* ---- the sources, at the member that starts ------------------------- */

void view_restart_name_sources(const struct view_restart_round *round,
                               struct view_restart_status *point)
{
    point->num_sources = 0;
    for (uint32_t i = 0; i < point->ends.count; i++) {
        const struct view_join_log_end *end = &point->ends.ends[i];
        if (!zero_end(end->view_id, end->seq))
            continue;
        uint32_t id = view_restart_source(round, &round->mine, end->subgroup);
        const struct view_restart_status *s = NULL;
        if (id == round->mine.id)
            s = &round->mine;
        else if (id < SPINDLE_MAX_MEMBERS && ((round->heard >> id) & 1) != 0)
            s = &round->peers[id];
        if (s == NULL)
            continue;
        struct view_restart_source *source = &point->sources[point->num_sources++];
        memset(source, 0, sizeof *source);
        source->subgroup = end->subgroup;
        source->id = id;
        for (uint32_t k = 0; k < s->ends.count; k++)
            if (s->ends.ends[k].subgroup == end->subgroup) {
                source->view_id = s->ends.ends[k].view_id;
                source->seq = s->ends.ends[k].seq;
            }
        sp_log(SP_LOG_INFO, "restart",
               "logged subgroup %u, of which this log holds nothing, is kept as member %u's log "
               "holds it, up to (%" PRIu64 ", %" PRIu64 ")",
               source->subgroup, source->id, source->view_id, source->seq);
    }
}

/* ---- the layout: a subgroup with no member yet ---------------------- */

int view_restart_layout_app(void *ctx, const struct spindle_view_info *view, uint32_t num_subgroups,
                            struct spindle_subgroup_layout *subgroups)
{
    const struct view_restart *r = ctx;
    int rc = r->app_layout(r->app_layout_ctx, view, num_subgroups, subgroups);
    if (rc < 0)
        return rc;
    /* Received by all and sent by none: nothing is delivered in it until
     * its own members are back, and the view is one the multicast takes. */
    for (uint32_t g = 0; g < num_subgroups; g++) {
        if (subgroups[g].num_members > 0)
            continue;
        for (uint32_t rank = 0; rank < view->num_members; rank++)
            subgroups[g].members[rank] = rank;
        subgroups[g].num_members = view->num_members;
        subgroups[g].num_senders = 0;
    }
    return 0;
}

int view_restart_take_subgroups(struct view_membership *m, const struct ctl_address *hosts,
                                uint32_t num_hosts, struct view_restart_status *mine)
{
    const struct view_restart *r = m->restart;
    const struct view_restart_status *point = &r->running;
    uint64_t deadline = sp_now_ns() + (uint64_t)m->config.bootstrap_timeout_ms * 1000000ull;
    for (uint32_t i = 0; i < mine->ends.count; i++) {
        struct view_join_log_end *end = &mine->ends.ends[i];
        uint32_t g = end->subgroup, source;
        struct view_join_log_end theirs;
        if (point_of(point, g, &theirs, &source) != POINT_SOURCE || source == mine->id)
            continue;
        bool none = zero_end(end->view_id, end->seq);
        if ((none && !configured_member(r, g, mine->id)) ||
            !log_point_before(end->view_id, end->seq, theirs.view_id, theirs.seq))
            continue; /* not its member, level with the source, or ahead (refused later) */
        if (source >= num_hosts)
            return sp_error(SPINDLE_EINVAL,
                            "logged subgroup %u's source, member %u, is not in the bootstrap "
                            "list: its address is not known",
                            g, source);
        struct view_restart_fetch req = {
            .asker = mine->id,
            .subgroup = g,
            .latest_view = point->latest_view,
            .next_view = mine->ends.next_view,
            .view_id = end->view_id,
            .seq = end->seq,
        };
        sp_log(SP_LOG_INFO, "restart",
               "this log holds logged subgroup %u up to (%" PRIu64 ", %" PRIu64
               "), its source member %u up to (%" PRIu64 ", %" PRIu64 "): asking it",
               g, end->view_id, end->seq, source, theirs.view_id, theirs.seq);
        int rc = view_restart_fetch_take(m, &hosts[source], source, &req, &mine->ends, deadline);
        if (rc < 0)
            return rc;
    }
    return 0;
}
