/*
 * Total restart (docs/LOGS.md "Total restart"): every member stopped, and
 * members start again with their logs. A member whose log holds an earlier
 * run does not start a new group; it finds the others over their control
 * addresses (the bootstrap list) and they elect the member whose log the
 * group restarts from:
 *
 *  - each restarting member answers queries on its control port with its
 *    status (view_wire.h, struct view_restart_status): its log's latest
 *    view and that view's members, its log's ends, and its vote;
 *  - in rounds, it asks every other member for theirs, and decides
 *    (view_restart_decide, modelled in models/restart.pml): it follows a
 *    member that already runs the restarted group; it votes for the best
 *    member it hears from (the latest view, then the most of that view's
 *    messages, then the lowest id), and keeps a vote for another until
 *    that one gives its vote away; it starts when it votes for itself and
 *    more than half of the latest view's members vote for it too;
 *  - the member that starts opens a group of one, in view latest + 1, with
 *    its log as the group's history (its replay upcall hands it over), and
 *    takes joins; the others join it through the join path with their
 *    logs (view_log_catchup.c), are sent what they lack, and take back
 *    their member ids and configured places;
 *  - a logged subgroup its log holds nothing of is kept as the log of its
 *    source (the member heard that holds the most of it) holds it: it
 *    names the sources, and their members take what they lack of it from
 *    the source before they join (view_restart_subgroup.c, view_restart_fetch.c).
 *
 * A member can vote for one member at a time and withdraws a vote only
 * once the member it voted for gave its own away, which a member that
 * started never does; two majorities of one view share a member, so at
 * most one member starts.
 */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log/log.h"
#include "log/log_snapshot.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "view/view_impl.h"

/* How long one query waits for its answer, and the pause between rounds. */
#define QUERY_TIMEOUT_MS 500
#define ROUND_PAUSE_MS   100
/* How often a waiting member says what it waits for. */
#define WAITING_REPORT_NS (3ull * 1000000000ull)

/* ---- the election's rules (pure) ----------------------------------- */

bool view_restart_better(const struct view_restart_status *a, const struct view_restart_status *b)
{
    if (a->latest_view != b->latest_view)
        return a->latest_view > b->latest_view;
    if (a->messages != b->messages)
        return a->messages > b->messages;
    return a->id < b->id;
}

static bool heard(const struct view_restart_round *round, uint32_t id)
{
    return id < SPINDLE_MAX_MEMBERS && ((round->heard >> id) & 1) != 0;
}

/* Whether member id votes for `for_whom` in this round. */
static bool votes_for(const struct view_restart_round *round, uint32_t id, uint32_t vote,
                      uint32_t for_whom)
{
    if (id == round->mine.id)
        return vote == for_whom;
    return heard(round, id) && round->peers[id].vote == for_whom;
}

void view_restart_decide(const struct view_restart_round *round, struct view_restart_decision *out)
{
    const struct view_restart_status *mine = &round->mine;
    memset(out, 0, sizeof *out);
    out->vote = mine->vote;
    out->action = VIEW_RESTART_WAIT;
    const struct view_restart_status *best = mine, *latest = mine;
    for (uint32_t id = 0; id < SPINDLE_MAX_MEMBERS; id++) {
        if (id == mine->id || !heard(round, id))
            continue;
        const struct view_restart_status *peer = &round->peers[id];
        if ((peer->flags & VIEW_RESTART_RUNNING) != 0) {
            out->action = VIEW_RESTART_FOLLOW;
            out->follow = id;
            return;
        }
        if (view_restart_better(peer, best))
            best = peer;
        if (peer->latest_view > latest->latest_view)
            latest = peer;
    }
    /* A vote moves only from oneself, or from a member that gave its own
     * vote away (it will never start): never while the member voted for
     * may still count it. */
    bool given_away = out->vote != mine->id && heard(round, out->vote) &&
                      round->peers[out->vote].vote != out->vote;
    if (out->vote == mine->id || given_away)
        out->vote = best->id;
    out->latest = latest->latest_view;
    out->num_latest = latest->num_members;
    for (uint32_t i = 0; i < latest->num_members; i++) {
        uint32_t id = latest->members[i];
        if (id != mine->id && !heard(round, id))
            out->missing |= 1ull << id;
        if (votes_for(round, id, out->vote, mine->id))
            out->voters++;
    }
    bool first_votes = votes_for(round, latest->members[0], out->vote, mine->id);
    bool majority = 2 * out->voters > out->num_latest ||
                    (round->tie_breaker && 2 * out->voters == out->num_latest && first_votes);
    out->unsourced = UINT32_MAX;
    for (uint32_t i = 0; i < mine->ends.count; i++) {
        uint32_t g = mine->ends.ends[i].subgroup;
        if (view_restart_source(round, latest, g) == SPINDLE_MAX_MEMBERS &&
            out->num_unsourced++ == 0)
            out->unsourced = g;
    }
    /* A logged subgroup none of whose members was heard: its history may
     * be in no log heard, and the group would restart without it. */
    if (out->vote == mine->id && majority && out->num_unsourced == 0)
        out->action = VIEW_RESTART_START;
}

/* The status of member id in the round: this member's, a heard one's, or
 * NULL. */
static const struct view_restart_status *status_of(const struct view_restart_round *round,
                                                   uint32_t id)
{
    if (id == round->mine.id)
        return &round->mine;
    return heard(round, id) ? &round->peers[id] : NULL;
}

/* Whether member id is one of g's members in the latest view. */
static bool member_of(const struct view_restart_round *round,
                      const struct view_restart_status *latest, uint32_t g, uint32_t id)
{
    if (round->configured == NULL || g >= round->num_configured)
        return true;
    const struct smc_layout *c = &round->configured[g];
    bool any_in_view = false;
    for (uint32_t i = 0; i < c->num_members; i++)
        for (uint32_t k = 0; k < latest->num_members; k++)
            if (latest->members[k] == c->members[i]) {
                any_in_view = true;
                if (c->members[i] == id)
                    return true;
            }
    return !any_in_view; /* the default layout: received by all */
}

/* The end of subgroup g in a status: (0, 0) when its log holds none. */
static struct view_join_log_end end_in(const struct view_restart_status *s, uint32_t g)
{
    struct view_join_log_end end = {g, 0, 0};
    for (uint32_t i = 0; i < s->ends.count; i++)
        if (s->ends.ends[i].subgroup == g)
            end = s->ends.ends[i];
    return end;
}

uint32_t view_restart_source(const struct view_restart_round *round,
                             const struct view_restart_status *latest, uint32_t g)
{
    const struct view_restart_status *best = NULL;
    struct view_join_log_end best_end = {g, 0, 0};
    for (uint32_t k = 0; k < latest->num_members; k++) {
        uint32_t id = latest->members[k];
        const struct view_restart_status *s = status_of(round, id);
        if (s == NULL || !member_of(round, latest, g, id))
            continue;
        struct view_join_log_end end = end_in(s, g);
        bool more = log_point_before(best_end.view_id, best_end.seq, end.view_id, end.seq);
        bool less = log_point_before(end.view_id, end.seq, best_end.view_id, best_end.seq);
        if (best == NULL || more || (!less && view_restart_better(s, best))) {
            best = s;
            best_end = end;
        }
    }
    return best != NULL ? best->id : SPINDLE_MAX_MEMBERS;
}

/* ---- the layout of a restarted group ------------------------------- */

/*
 * The default layout of a restarted group: each member in the places the
 * application's subgroups give its member id, in the order they list them;
 * a subgroup none of whose members is in the view is received by all.
 */
static int restart_layout(void *ctx, const struct spindle_view_info *view, uint32_t num_subgroups,
                          struct spindle_subgroup_layout *subgroups)
{
    const struct view_restart *r = ctx;
    for (uint32_t g = 0; g < num_subgroups && g < r->num_subgroups; g++) {
        const struct smc_layout *c = &r->configured[g];
        struct spindle_subgroup_layout *out = &subgroups[g];
        out->num_members = out->num_senders = 0;
        for (uint32_t i = 0; i < c->num_members; i++)
            for (uint32_t rank = 0; rank < view->num_members; rank++)
                if (view->members[rank] == c->members[i])
                    out->members[out->num_members++] = rank;
        for (uint32_t i = 0; i < c->num_senders; i++)
            for (uint32_t rank = 0; rank < view->num_members; rank++)
                if (view->members[rank] == c->senders[i])
                    out->senders[out->num_senders++] = rank;
        if (out->num_members == 0) {
            for (uint32_t rank = 0; rank < view->num_members; rank++)
                out->members[rank] = rank;
            out->num_members = view->num_members;
            out->num_senders = 0;
        }
    }
    return 0;
}

/* ---- this member's status, and answering others --------------------- */

/* The election of one restarting member. */
struct election {
    struct view_membership *m;
    const struct ctl_address *hosts;
    uint32_t num_initial;
    struct ctl *ctl; /* listening on this member's address */
    pthread_mutex_t lock;
    struct view_restart_status mine; /* under lock: the server answers with it */
    bool stop;
    pthread_t server;
    struct view_restart_round round;
};

/* Answers one query: with `status`, or a refusal of a join request (the
 * group is not running yet: ask again). */
static void answer_query(struct ctl *ctl, const uint8_t *bytes, size_t length,
                         const struct view_restart_status *status)
{
    size_t cap = VIEW_WIRE_RESTART_SIZE(SPINDLE_MAX_SUBGROUPS);
    uint8_t *reply = malloc(cap);
    if (reply == NULL) {
        (void)ctl_join_answer(ctl, NULL, 0);
        return;
    }
    size_t size;
    if (view_wire_type(bytes, length) == VIEW_WIRE_RESTART) {
        size = view_wire_encode_restart(status, reply, cap);
    } else {
        struct view_join_offer offer;
        memset(&offer, 0, sizeof offer);
        offer.kind = VIEW_OFFER_REFUSE;
        offer.error = SPINDLE_EAGAIN;
        snprintf(offer.why, sizeof offer.why,
                 "member %u is restarting from its log and waits for the others", status->id);
        size = view_wire_encode_join_offer(&offer, reply, cap);
    }
    (void)ctl_join_answer(ctl, reply, size);
    free(reply);
}

/* Answers queries while the election runs. */
static void *serve(void *arg)
{
    struct election *e = arg;
    uint8_t *request = malloc(CTL_JOIN_REQUEST_MAX);
    struct view_restart_status *mine = malloc(sizeof *mine);
    for (;;) {
        pthread_mutex_lock(&e->lock);
        bool stop = e->stop;
        pthread_mutex_unlock(&e->lock);
        if (stop || request == NULL || mine == NULL)
            break;
        size_t length = 0;
        if (ctl_join_poll(e->ctl, 50, request, CTL_JOIN_REQUEST_MAX, &length) != 1)
            continue;
        /* The vote as it is now, after the question came: an answer is
         * a read of this member's state during the asker's round
         * (models/restart.pml), never one from before it. */
        pthread_mutex_lock(&e->lock);
        *mine = e->mine;
        pthread_mutex_unlock(&e->lock);
        if (view_wire_type(request, length) == VIEW_WIRE_RESTART_FETCH)
            view_restart_fetch_answer(e->m, e->ctl, e->m->config.log_dir, mine->id, request,
                                      length);
        else
            answer_query(e->ctl, request, length, mine);
    }
    free(mine);
    free(request);
    return NULL;
}

void view_restart_answer(struct view_membership *m, const uint8_t *bytes, size_t length)
{
    struct view_restart_status asker;
    if (view_wire_decode_restart(bytes, length, &asker) < 0) {
        sp_log(SP_LOG_WARN, "restart", "ignoring a malformed restart query: %s", spindle_errmsg());
        (void)ctl_join_answer(m->ctl, NULL, 0);
        return;
    }
    struct view_restart_status status;
    memset(&status, 0, sizeof status);
    status.flags = VIEW_RESTART_RUNNING;
    if (m->restart != NULL) {
        status = m->restart->running;
        status.flags = VIEW_RESTART_RUNNING | VIEW_RESTART_ENDS;
    }
    /* Who answers: this member, in its current view. */
    status.id = m->config.self;
    status.vote = m->config.self;
    status.identity = m->config.identity;
    const struct view *view = &m->current->view;
    if (m->restart == NULL) {
        status.latest_view = view->id;
        status.num_members = view->num_members;
        memcpy(status.members, view->member_ids, view->num_members * sizeof view->member_ids[0]);
        status.ends.join_view = status.latest_view + 1;
    }
    sp_log(SP_LOG_INFO, "restart",
           "member %u (%s) restarting: told it the group runs in view %" PRIu64, asker.id,
           asker.identity.name, view->id);
    answer_query(m->ctl, bytes, length, &status);
}

/* The id a member following a total restart asks for (the one its log
 * holds): refused when a member of the view, or another name heard in
 * the election, holds it; a member of the restarted view not heard leaves
 * its id held with no name, for whichever log holds it. */
static int restart_id_of_log(const struct view_restart *r, const struct view *view,
                             const struct view_join_request *req, uint32_t *id)
{
    uint32_t wanted = req->restart_id;
    int rank = view_rank_of(view, wanted);
    if (rank >= 0)
        return sp_error(
            SPINDLE_EINVAL,
            "member id %u, which the log of '%s' holds, is held by '%s' in view %" PRIu64, wanted,
            req->identity.name, view->identities[rank].name, view->id);
    bool held = r != NULL && ((r->reserved >> wanted) & 1) != 0 && r->names[wanted][0] != '\0';
    if (held && strcmp(r->names[wanted], req->identity.name) != 0)
        return sp_error(SPINDLE_EINVAL,
                        "member id %u, which the log of '%s' holds, restarted as '%s'", wanted,
                        req->identity.name, r->names[wanted]);
    *id = wanted;
    return 0;
}

int view_restart_id(const struct view_restart *r, const struct view *view,
                    const struct view_join_request *req, uint32_t *id)
{
    if ((req->flags & VIEW_JOIN_RESTART) != 0)
        return restart_id_of_log(r, view, req, id);
    uint64_t taken = view_member_mask(view);
    uint64_t reserved = r != NULL ? r->reserved & ~taken : 0;
    for (uint32_t k = 0; k < SPINDLE_MAX_MEMBERS && reserved != 0; k++)
        if (((reserved >> k) & 1) != 0 && strcmp(r->names[k], req->identity.name) == 0) {
            *id = k;
            return 0;
        }
    for (uint32_t k = 0; k < SPINDLE_MAX_MEMBERS; k++)
        if (((taken >> k) & 1) == 0 && ((reserved >> k) & 1) == 0) {
            *id = k;
            return 0;
        }
    return sp_error(SPINDLE_EINVAL,
                    "no member id is free: %u in view %" PRIu64 ", the rest held for members "
                    "restarting from their logs",
                    view->num_members, view->id);
}

/* ---- the restarting member ----------------------------------------- */

int view_restart_wanted(struct view_membership *m)
{
    struct view_log_summary *summary = malloc(sizeof *summary);
    if (summary == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory to read the log");
    int rc = view_log_summary_read(m, summary);
    if (rc == 0)
        rc = summary->any_state ? 1 : 0;
    free(summary);
    return rc;
}

/* This member's status from its log. */
static int read_status(struct view_membership *m, struct view_restart_status *out)
{
    struct view_log_summary *summary = malloc(sizeof *summary);
    if (summary == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory to read the log");
    int rc = view_log_summary_read(m, summary);
    if (rc == 0 && !summary->any_view)
        rc = sp_error(SPINDLE_EINVAL, "%s holds no view record to restart from", m->config.log_dir);
    if (rc == 0) {
        memset(out, 0, sizeof *out);
        out->id = m->config.self;
        out->vote = m->config.self;
        out->identity = m->config.identity;
        out->latest_view = summary->latest.view_id;
        out->num_members = summary->latest.member_count;
        memcpy(out->members, summary->latest.members,
               summary->latest.member_count * sizeof summary->latest.members[0]);
        out->ends = summary->ends;
        out->ends.join_view = out->latest_view + 1;
        /* How far into its latest view its log goes: its subgroups'
         * positions there (sequence numbers count alike everywhere). */
        for (uint32_t i = 0; i < out->ends.count; i++)
            if (out->ends.ends[i].view_id == out->latest_view)
                out->messages += out->ends.ends[i].seq;
    }
    free(summary);
    return rc;
}

/* Asks member id for its status (into the round when it answers). */
static void ask(struct election *e, uint32_t id, const uint8_t *query, size_t length)
{
    struct view_membership *m = e->m;
    const struct ctl_address *host = &e->hosts[id];
    struct ctl_versions versions = view_ctl_versions();
    void *reply = NULL;
    size_t reply_length = 0;
    if (ctl_join_ask(m->group_name, &versions, m->config.keys, host->host, host->port, query,
                     length, &reply, &reply_length, QUERY_TIMEOUT_MS) < 0)
        return;
    struct view_restart_status *peer = &e->round.peers[id];
    if (view_wire_type(reply, reply_length) != VIEW_WIRE_RESTART) {
        free(reply); /* a busy member refused the query: ask again */
        return;
    }
    if (view_wire_decode_restart(reply, reply_length, peer) < 0)
        sp_log(SP_LOG_WARN, "restart", "%s:%u answered with a malformed status: %s", host->host,
               host->port, spindle_errmsg());
    else if (peer->id != id && (peer->flags & VIEW_RESTART_RUNNING) == 0)
        sp_log(SP_LOG_WARN, "restart", "%s:%u, member %u in the bootstrap list, says it is %u",
               host->host, host->port, id, peer->id);
    else
        e->round.heard |= 1ull << id;
    free(reply);
}

/* Names the members of the latest view that were not heard. */
static void describe_missing(const struct election *e, uint64_t missing, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (uint32_t id = 0; id < SPINDLE_MAX_MEMBERS && used < cap; id++) {
        if (((missing >> id) & 1) == 0)
            continue;
        int n = id < e->num_initial
                    ? snprintf(out + used, cap - used, "%s%u (%s:%u)", used > 0 ? ", " : "", id,
                               e->hosts[id].host, e->hosts[id].port)
                    : snprintf(out + used, cap - used,
                               "%s%u (not in the "
                               "bootstrap list)",
                               used > 0 ? ", " : "", id);
        used += n > 0 ? (size_t)n : 0;
    }
}

static void report_waiting(const struct election *e, const struct view_restart_decision *d)
{
    char missing[512];
    describe_missing(e, d->missing, missing, sizeof missing);
    if (d->vote != e->mine.id && !heard(&e->round, d->vote))
        sp_log(SP_LOG_WARN, "restart",
               "waiting for member %u (%s:%u), which this member voted to restart from and "
               "which does not answer",
               d->vote, d->vote < e->num_initial ? e->hosts[d->vote].host : "?",
               d->vote < e->num_initial ? e->hosts[d->vote].port : 0);
    else if (d->vote != e->mine.id)
        sp_log(SP_LOG_INFO, "restart", "waiting for member %u to restart the group", d->vote);
    else if (d->num_unsourced > 0)
        sp_log(SP_LOG_WARN, "restart",
               "waiting for a member of logged subgroup %u (%u logged subgroup(s) of view %" PRIu64
               " have no member heard; missing: %s)",
               d->unsourced, d->num_unsourced, d->latest, missing[0] != '\0' ? missing : "none");
    else
        sp_log(SP_LOG_WARN, "restart",
               "waiting for a majority of view %" PRIu64 " (%u of its %u members voted to "
               "restart from this member's log; missing: %s)",
               d->latest, d->voters, d->num_latest, missing[0] != '\0' ? missing : "none");
}

/* The election's end without a member heard of some logged subgroup. */
static int no_source(const struct election *e, const struct view_restart_decision *d,
                     const char *missing)
{
    return sp_error(SPINDLE_ETIMEDOUT,
                    "no restart within %d ms: no member of logged subgroup %u (%u logged "
                    "subgroup(s) without one) in view %" PRIu64
                    " was heard, so that subgroup's history may be in no log of the restarted "
                    "group; not restarting without it (not heard: %s; docs/LOGS.md \"Total "
                    "restart\")",
                    e->m->config.bootstrap_timeout_ms, d->unsourced, d->num_unsourced, d->latest,
                    missing[0] != '\0' ? missing : "none");
}

/* Runs rounds until this member starts or follows, or time is up. */
static int elect(struct election *e, struct view_restart_decision *d)
{
    struct view_membership *m = e->m;
    size_t cap = VIEW_WIRE_RESTART_SIZE(SPINDLE_MAX_SUBGROUPS);
    uint8_t *query = malloc(cap);
    if (query == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for a restart query");
    uint64_t start = sp_now_ns(), reported = start;
    uint64_t deadline = start + (uint64_t)m->config.bootstrap_timeout_ms * 1000000ull;
    int rc = 0;
    for (;;) {
        pthread_mutex_lock(&e->lock);
        e->round.mine = e->mine;
        pthread_mutex_unlock(&e->lock);
        size_t length = view_wire_encode_restart(&e->round.mine, query, cap);
        e->round.heard = 0;
        for (uint32_t id = 0; id < e->num_initial; id++)
            if (id != e->mine.id)
                ask(e, id, query, length);
        view_restart_decide(&e->round, d);
        if (d->vote != e->round.mine.vote)
            sp_log(SP_LOG_INFO, "restart", "member %u votes to restart from member %u", e->mine.id,
                   d->vote);
        pthread_mutex_lock(&e->lock);
        e->mine.vote = d->vote;
        pthread_mutex_unlock(&e->lock);
        if (d->action != VIEW_RESTART_WAIT)
            break;
        uint64_t now = sp_now_ns();
        if (now >= deadline) {
            /* Said at least once, whatever the timeout and however late
             * this round ends on a loaded host. */
            if (reported == start)
                report_waiting(e, d);
            char missing[512];
            describe_missing(e, d->missing, missing, sizeof missing);
            if (d->num_unsourced > 0 && d->vote == e->mine.id)
                rc = no_source(e, d, missing);
            else
                rc = sp_error(SPINDLE_ETIMEDOUT,
                              "no restart within %d ms: of the %u members of view %" PRIu64
                              ", more than half must vote for one; %u voted for this member, "
                              "which votes for member %u; not heard: %s",
                              m->config.bootstrap_timeout_ms, d->num_latest, d->latest, d->voters,
                              d->vote, missing[0] != '\0' ? missing : "none");
            break;
        }
        if (now - reported >= WAITING_REPORT_NS) {
            report_waiting(e, d);
            reported = now;
        }
        struct timespec pause = {0, ROUND_PAUSE_MS * 1000000L};
        nanosleep(&pause, NULL);
    }
    free(query);
    return rc;
}

/* Stops answering; the channel stays open. */
static void stop_serving(struct election *e)
{
    pthread_mutex_lock(&e->lock);
    e->stop = true;
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->server, NULL);
}

/* The restarted group's state kept at this member. */
static int keep_restart(struct view_membership *m, const struct election *e,
                        const struct view_restart_status *leader, const struct smc_layout *layouts,
                        uint32_t num_subgroups)
{
    struct view_restart *r = calloc(1, sizeof *r);
    struct smc_layout *configured = calloc(num_subgroups, sizeof *configured);
    if (r == NULL || configured == NULL) {
        free(r);
        free(configured);
        return sp_error(SPINDLE_ENOMEM, "no memory for the restart");
    }
    memcpy(configured, layouts, num_subgroups * sizeof *layouts);
    r->configured = configured;
    r->num_subgroups = num_subgroups;
    r->running = *leader;
    r->running.flags = VIEW_RESTART_RUNNING | (leader->flags & VIEW_RESTART_ENDS);
    r->self = e->mine.id;
    /* Members that restart get their ids back when they join: those of
     * the view restarted from, heard or not (a joiner new to the group
     * never takes one), and those heard, with their names. */
    for (uint32_t i = 0; i < leader->num_members && i < SPINDLE_MAX_MEMBERS; i++)
        if (leader->members[i] < SPINDLE_MAX_MEMBERS)
            r->reserved |= 1ull << leader->members[i];
    for (uint32_t id = 0; id < SPINDLE_MAX_MEMBERS; id++) {
        const struct view_restart_status *s = id == e->mine.id       ? &e->mine
                                              : heard(&e->round, id) ? &e->round.peers[id]
                                                                     : NULL;
        if (s == NULL)
            continue;
        r->reserved |= 1ull << id;
        snprintf(r->names[id], sizeof r->names[id], "%s", s->identity.name);
    }
    m->restart = r;
    if (m->config.layout == NULL) {
        m->config.layout = restart_layout;
    } else {
        r->app_layout = m->config.layout;
        r->app_layout_ctx = m->config.layout_ctx;
        m->config.layout = view_restart_layout_app;
    }
    m->config.layout_ctx = r;
    return 0;
}

/* The layout refused a first view of the elected member alone (a subgroup
 * it leaves empty is filled in: view_restart_layout_app). */
static int alone_refused(int rc)
{
    char why[512];
    snprintf(why, sizeof why, "%s", spindle_errmsg());
    return sp_error(rc,
                    "a total restart opens its first view with the elected member alone, and "
                    "the layout refused that view (%s) (docs/LOGS.md \"Total restart\")",
                    why);
}

/* Starts the restarted group at this member: a group of one in view
 * latest + 1, whose history is this member's log. */
static int start_group(struct view_membership *m, struct election *e)
{
    const struct view_restart_status *mine = &e->mine;
    m->config.num_initial = e->num_initial;
    m->addresses[mine->id] = e->hosts[mine->id];
    m->admission = 1;
    int rc = view_log_restart_open(m);
    /* The layout of view latest + 1 from a view of this member alone. */
    struct view alone, view;
    memset(&view, 0, sizeof view);
    if (rc == 0)
        rc = view_init_first(&alone, 1, 0, m->restart->configured, m->restart->num_subgroups);
    if (rc == 0) {
        alone.id = mine->latest_view;
        alone.member_ids[0] = mine->id;
        alone.identities[0] = m->config.identity;
        struct view_transition how;
        memset(&how, 0, sizeof how);
        how.joiner = VIEW_NO_JOINER;
        how.new_rank[0] = 0;
        how.survivors = 1ull << mine->id;
        view.id = mine->latest_view + 1;
        view.num_members = 1;
        view.my_rank = 0;
        view.member_ids[0] = mine->id;
        view.identities[0] = m->config.identity;
        rc = view_next_layouts(&alone, &how, m->config.layout, m->config.layout_ctx, &view);
        view_clear(&alone);
        if (rc < 0)
            rc = alone_refused(rc);
    }
    if (rc == 0)
        rc = view_open_first(m, &view);
    else
        view_clear(&view);
    if (rc == 0)
        rc = view_log_view(m, m->current, NULL, 0);
    if (rc == 0 && m->log_ends != NULL)
        m->log_ends->next_view = m->current->view.id + 1;
    struct sst_member_desc desc;
    if (rc == 0)
        rc = smc_group_export(m->current->smc, &desc);
    if (rc == 0)
        rc = view_epoch_connect(m, m->current, &desc, NULL);
    m->ctl = e->ctl;
    e->ctl = NULL;
    m->joinable = true;
    if (rc == 0)
        rc = smc_group_start(m->current->smc);
    if (rc == 0)
        view_log_follow(m, m->current->smc);
    if (rc == 0)
        rc = sst_engine_start(m->engine);
    if (rc == 0)
        m->engine_started = true;
    if (rc < 0)
        return rc;
    __atomic_store_n(&m->view_id, m->current->view.id, __ATOMIC_RELEASE);
    __atomic_store_n(&m->num_members, 1u, __ATOMIC_RELEASE);
    struct view_transition how;
    memset(&how, 0, sizeof how);
    how.joiner = mine->id;
    view_report(m, &how, 0);
    sp_log(SP_LOG_INFO, "restart",
           "member %u restarts the group from its log in view %" PRIu64 " (its latest was %" PRIu64
           ")",
           mine->id, m->current->view.id, mine->latest_view);
    return view_thread_start(m);
}

bool view_restart_ahead(const struct view_join_log_ends *ends,
                        const struct view_restart_status *point)
{
    if ((point->flags & VIEW_RESTART_ENDS) == 0)
        return false;
    for (uint32_t i = 0; i < ends->count; i++) {
        const struct view_join_log_end *end = &ends->ends[i];
        if (end->view_id > point->latest_view)
            continue; /* a view of the restarted group */
        /* The point's end of it, or its source's; (0, 0) when neither. */
        struct view_join_log_end theirs;
        (void)view_restart_point_end(point, end->subgroup, &theirs);
        if (log_point_before(theirs.view_id, theirs.seq, end->view_id, end->seq))
            return true;
    }
    return false;
}

/* Joins the restarted group through the running member the round heard. */
static int follow(struct view_membership *m, struct election *e, uint32_t via,
                  const struct spindle_subgroup_config *subgroups, uint32_t num_subgroups)
{
    const struct view_restart_status *running = &e->round.peers[via];
    const struct view_restart_status *mine = &e->mine;
    if ((running->flags & VIEW_RESTART_ENDS) != 0 && running->latest_view < mine->latest_view)
        return sp_error(SPINDLE_EINVAL,
                        "the group restarted from view %" PRIu64 ", but this member's log (%s) "
                        "holds view %" PRIu64
                        ": a later view went on without it, or the group restarted without "
                        "the members that had it; move the log aside to join as a new member",
                        running->latest_view, m->config.log_dir, mine->latest_view);
    /* What it lacks of a subgroup the point takes from a source. */
    ctl_close(e->ctl);
    e->ctl = NULL;
    int rc = view_restart_take_subgroups(m, e->hosts, e->num_initial, &e->mine);
    if (rc < 0)
        return rc;
    char whose[PATH_MAX + 32];
    snprintf(whose, sizeof whose, "this member's log (%s)", m->config.log_dir);
    int refused = view_restart_check_subgroups(m->restart, &mine->ends, mine->id, whose);
    if (refused < 0)
        return refused;
    uint32_t kept = 0;
    if (view_restart_ahead(&mine->ends, running) && view_restart_keeps(running, &mine->ends, &kept))
        return sp_error(SPINDLE_EINVAL,
                        "%s holds messages past the point the group restarted from, and starting "
                        "it over would lose logged subgroup %u, which the group keeps as this "
                        "log holds it; not joining (docs/LOGS.md \"Total restart\")",
                        m->config.log_dir, kept);
    if (view_restart_ahead(&mine->ends, running)) {
        SP_LOG_WARNING("restart",
                       "%s holds messages past the point the group restarted from (they were "
                       "never on every member's log); the log starts over from the group's",
                       m->config.log_dir);
        rc = log_wipe(m->config.log_dir);
        if (rc < 0)
            return rc;
    }
    sp_log(SP_LOG_INFO, "restart", "member %u joins the restarted group through member %u",
           mine->id, via);
    return view_join(m, &e->hosts[mine->id], &e->hosts[via], subgroups, num_subgroups);
}

int view_restart(struct view_membership *m, const struct ctl_address *hosts, uint32_t num_initial,
                 const struct smc_layout *layouts, uint32_t num_subgroups,
                 const struct spindle_subgroup_config *subgroups)
{
    if (!m->config.tolerate_failures)
        return sp_error(SPINDLE_EINVAL,
                        "%s holds the log of an earlier run: restarting from it needs "
                        "tolerate_failures (remove the directory to start a new group)",
                        m->config.log_dir);
    struct election *e = calloc(1, sizeof *e);
    if (e == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the restart");
    e->m = m;
    e->hosts = hosts;
    e->num_initial = num_initial;
    e->round.tie_breaker = m->config.tie_breaker;
    e->round.configured = layouts;
    e->round.num_configured = num_subgroups;
    pthread_mutex_init(&e->lock, NULL);
    int rc = read_status(m, &e->mine);
    struct ctl_member members[SPINDLE_MAX_MEMBERS];
    memset(members, 0, sizeof members);
    uint32_t self = m->config.self;
    members[self] =
        (struct ctl_member){.host = hosts[self].host, .id = self, .port = hosts[self].port};
    struct ctl_versions versions = view_ctl_versions();
    if (rc == 0)
        rc = ctl_open_tcp_joiner(m->group_name, members, num_initial, self, 1, &versions,
                                 m->config.keys, m->config.bootstrap_timeout_ms, &e->ctl);
    bool serving = rc == 0 && pthread_create(&e->server, NULL, serve, e) == 0;
    if (rc == 0 && !serving)
        rc = sp_error(SPINDLE_ENOMEM, "cannot start the restart's answering thread");
    if (rc == 0)
        sp_log(SP_LOG_INFO, "restart",
               "member %u restarts from %s: latest view %" PRIu64 " (%u members), %" PRIu64
               " positions of it",
               self, m->config.log_dir, e->mine.latest_view, e->mine.num_members, e->mine.messages);
    struct view_restart_decision d;
    memset(&d, 0, sizeof d);
    if (rc == 0)
        rc = elect(e, &d);
    if (serving)
        stop_serving(e);
    /* The restart point: this member's log when it starts the group,
     * else what the running member told (when it knows it). */
    struct view_restart_status leader = e->mine;
    leader.flags = VIEW_RESTART_ENDS;
    if (d.action == VIEW_RESTART_FOLLOW)
        leader = e->round.peers[d.follow];
    else if (rc == 0 && d.action == VIEW_RESTART_START)
        view_restart_name_sources(&e->round, &leader);
    if (rc == 0)
        rc = keep_restart(m, e, &leader, layouts, num_subgroups);
    if (rc == 0)
        rc = d.action == VIEW_RESTART_START ? start_group(m, e)
                                            : follow(m, e, d.follow, subgroups, num_subgroups);
    ctl_close(e->ctl);
    pthread_mutex_destroy(&e->lock);
    free(e);
    return rc;
}
