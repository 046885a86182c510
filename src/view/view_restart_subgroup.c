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
 *    past the asker's end), checks them (view_log_intake.c, as a joiner
 *    checks its catch-up), stores the snapshot and appends the records,
 *    and replays its log as a joiner does (from the snapshot);
 *  - the leader checks the same before it sends a joiner its catch-up,
 *    and never resets a log that keeps such a subgroup;
 *  - the restarted group's layout keeps a subgroup none of whose members
 *    is in the view yet received by every member and sent by none, so
 *    that the first views (L alone, then the joiners one by one) are
 *    valid for a layout that puts each member in its own subgroup.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log/log.h"
#include "log/log_catchup.h"
#include "log/log_snapshot.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "view/view_impl.h"

/* How long one fetch waits for its answer, and the pause before another. */
#define FETCH_TIMEOUT_MS 5000
#define FETCH_PAUSE_MS   100

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

/* ---- the source's side: answering a fetch -------------------------- */

/* A growing reply. */
struct reply {
    uint8_t *bytes;
    size_t length, cap;
};

static int reply_put(struct reply *out, const void *data, size_t length)
{
    if (out->length + length > CTL_BLOB_MAX - 64u)
        return sp_error(SPINDLE_EMSGSIZE,
                        "the answer would exceed %u bytes, one control frame, the most a "
                        "restart's fetch sends (docs/LOGS.md \"Subgroups L's log lacks\")",
                        CTL_BLOB_MAX - 64u);
    if (out->length + length > out->cap) {
        size_t cap = out->cap > 0 ? out->cap : 65536;
        while (cap < out->length + length)
            cap *= 2;
        uint8_t *grown = realloc(out->bytes, cap);
        if (grown == NULL)
            return sp_error(SPINDLE_ENOMEM, "no memory for a fetch's answer of %zu bytes", cap);
        out->bytes = grown;
        out->cap = cap;
    }
    memcpy(out->bytes + out->length, data, length);
    out->length += length;
    return 0;
}

/* Where the log in dir holds every message of g from: the older of its two
 * newest valid snapshots of g, or its only one, or the start. */
static int log_base_of(const struct log *log, uint32_t g, uint64_t *view_id, uint64_t *seq)
{
    struct log_snapshot_file *files = NULL;
    size_t count = 0;
    int rc = log_snapshot_list(log->dir_fd, log->dir, false, &files, &count);
    if (rc < 0)
        return rc;
    *view_id = *seq = 0;
    uint32_t seen = 0;
    /* Sorted by subgroup, then point: the newest come last. */
    for (size_t i = count; i-- > 0 && seen < 2;) {
        if (!files[i].valid || files[i].snap.subgroup != g)
            continue;
        *view_id = files[i].snap.view_id;
        *seq = files[i].snap.seq;
        seen++;
    }
    free(files);
    return 0;
}

/* Whether the asker lacks record (see struct view_restart_fetch), sent
 * after its snapshot when snap, else after its end. */
static bool fetch_lacks(const struct view_restart_fetch *req, const struct log_snapshot *snap,
                        const struct log_record *record)
{
    if (record->type == LOG_REC_VIEW)
        return record->view.view_id >= req->next_view && record->view.view_id <= req->latest_view;
    const struct log_message *msg = &record->message;
    uint64_t from_view = snap != NULL ? snap->view_id : req->view_id;
    uint64_t from_seq = snap != NULL ? snap->seq : req->seq;
    return msg->subgroup == req->subgroup && msg->view_id <= req->latest_view &&
           !log_point_before(msg->view_id, msg->seq, from_view, from_seq);
}

/* Reads the newest valid snapshot of g in log (one there is: its base is
 * one). A snapshot pruned since the listing (the source took a newer one
 * meanwhile) is SPINDLE_EAGAIN: the asker asks again. */
static int newest_snapshot(const struct log *log, uint32_t g, struct log_snapshot *snap,
                           void **state)
{
    struct log_snapshot_file *files = NULL;
    size_t count = 0;
    int rc = log_snapshot_list(log->dir_fd, log->dir, false, &files, &count);
    if (rc < 0)
        return rc;
    size_t newest = count;
    for (size_t i = 0; i < count; i++)
        if (files[i].valid && files[i].snap.subgroup == g)
            newest = i; /* sorted by subgroup, then point */
    rc = newest < count ? log_snapshot_read(log->dir_fd, log->dir, files[newest].name, snap, state)
                        : sp_error(SPINDLE_EAGAIN, "subgroup %u's snapshot is gone", g);
    if (rc == SPINDLE_ENOENT)
        rc = sp_error(SPINDLE_EAGAIN, "subgroup %u's snapshot %s was replaced while read", g,
                      files[newest].name);
    free(files);
    return rc;
}

/* Puts the stream's header and, when snap, that snapshot (as the
 * catch-up's reset sends it, but the asker's log does not start over). */
static int put_head(struct reply *out, const struct log_snapshot *snap, const void *state)
{
    uint8_t header[LOG_CATCHUP_HEADER_SIZE];
    log_catchup_header_encode(0, snap != NULL ? 1 : 0, header);
    int rc = reply_put(out, header, sizeof header);
    if (rc < 0 || snap == NULL)
        return rc;
    uint8_t head[LOG_SNAPSHOT_HEADER_SIZE + LOG_RECORD_HEADER_SIZE + 16u +
                 4u * SPINDLE_MAX_MEMBERS + 8u * SPINDLE_MAX_SUBGROUPS];
    size_t size = log_snapshot_encode(snap, head, sizeof head);
    uint8_t prefix[LOG_CATCHUP_SNAPSHOT_PREFIX];
    log_catchup_snapshot_prefix_encode(size + snap->state_length, prefix);
    rc = reply_put(out, prefix, sizeof prefix);
    if (rc == 0)
        rc = reply_put(out, head, size);
    if (rc == 0)
        rc = reply_put(out, state, (size_t)snap->state_length);
    return rc;
}

/* The catch-up stream of what the asker lacks of log_dir's log: the
 * records after its end; or, when this log holds the subgroup only from a
 * snapshot after that end, the newest snapshot of it and the records
 * after that. */
static int fetch_stream(const char *log_dir, const struct view_restart_fetch *req,
                        struct reply *out)
{
    struct log *log = NULL;
    int rc = log_open(log_dir, 0, &log, NULL);
    if (rc < 0)
        return rc;
    uint64_t base_view = 0, base_seq = 0;
    struct log_snapshot snap_buf, *snap = NULL;
    void *state = NULL;
    rc = log_base_of(log, req->subgroup, &base_view, &base_seq);
    if (rc == 0 && log_point_before(req->view_id, req->seq, base_view, base_seq)) {
        rc = newest_snapshot(log, req->subgroup, &snap_buf, &state);
        snap = rc == 0 ? &snap_buf : NULL;
    }
    if (rc == 0)
        rc = put_head(out, snap, state);
    free(state);
    struct log_reader reader;
    uint8_t *buf = rc == 0 ? malloc(LOG_MAX_RECORD) : NULL;
    if (rc == 0 && buf == NULL)
        rc = sp_error(SPINDLE_ENOMEM, "no memory for a log record");
    bool reading = rc == 0 && (rc = log_reader_open(&reader, log)) == 0;
    struct log_record record;
    while (rc == 0 && (rc = log_reader_next(&reader, &record)) == 1) {
        rc = 0;
        if (fetch_lacks(req, snap, &record))
            rc = reply_put(out, buf, log_record_encode(&record, buf, LOG_MAX_RECORD));
    }
    if (reading)
        log_reader_close(&reader);
    free(buf);
    log_close(log);
    if (rc == 0 && snap != NULL)
        sp_log(SP_LOG_INFO, "restart",
               "member %u's log of subgroup %u ends at (%" PRIu64 ", %" PRIu64
               "), before this log holds it from: sending it this log's snapshot at (%" PRIu64
               ", %" PRIu64 ") first",
               req->asker, req->subgroup, req->view_id, req->seq, snap->view_id, snap->seq);
    return rc < 0 ? rc : 0;
}

void view_restart_fetch_answer(struct ctl *ctl, const char *log_dir, uint32_t self,
                               const uint8_t *bytes, size_t length)
{
    struct view_restart_fetch req;
    struct reply out = {0};
    int rc = view_wire_decode_restart_fetch(bytes, length, &req);
    if (rc == 0 && log_dir == NULL)
        rc = sp_error(SPINDLE_EINVAL, "member %u logs nothing", self);
    if (rc == 0)
        rc = fetch_stream(log_dir, &req, &out);
    if (rc == 0) {
        sp_log(SP_LOG_INFO, "restart",
               "sent member %u subgroup %u's records from (%" PRIu64 ", %" PRIu64 ") (%zu bytes)",
               req.asker, req.subgroup, req.view_id, req.seq, out.length);
        (void)ctl_join_answer(ctl, out.bytes, out.length);
        free(out.bytes);
        return;
    }
    free(out.bytes);
    struct view_join_offer offer;
    memset(&offer, 0, sizeof offer);
    offer.kind = VIEW_OFFER_REFUSE;
    offer.error = rc;
    snprintf(offer.why, sizeof offer.why, "member %u: %s", self, spindle_errmsg());
    sp_log(SP_LOG_WARN, "restart", "refused a fetch: %s", offer.why);
    size_t cap = view_wire_encode_join_offer(&offer, NULL, 0);
    uint8_t *reply = malloc(cap);
    if (reply == NULL) {
        (void)ctl_join_answer(ctl, NULL, 0);
        return;
    }
    (void)ctl_join_answer(ctl, reply, view_wire_encode_join_offer(&offer, reply, cap));
    free(reply);
}

/* ---- the asker's side ------------------------------------------------ */

/* Takes a fetch's stream into this member's log. */
struct intake {
    struct view_membership *m;
    struct view_log_intake check; /* over the asker's ends, the request's subgroup */
    uint64_t position;            /* the log's end after the last record appended */
    bool appended;
};

/* Not a reset (the asker's other subgroups stay), and at most the one
 * snapshot of the subgroup asked for. */
static int intake_header(void *ctx, uint16_t flags, uint32_t snapshot_count)
{
    const struct intake *in = ctx;
    if (flags != 0 || snapshot_count > 1)
        return sp_error(SPINDLE_EPROTO,
                        "%s sent a stream with flags 0x%x and %u snapshots, not a suffix after "
                        "at most one snapshot",
                        in->check.sender, flags, snapshot_count);
    return 0;
}

/* The source's snapshot: stored in this log, as a joiner stores the
 * leader's; the replay at the join starts from it. */
static int intake_snapshot(void *ctx, const struct log_snapshot *snap, const uint8_t *state)
{
    struct intake *in = ctx;
    int rc = view_log_intake_check_snapshot(&in->check, snap);
    if (rc == 0)
        rc = view_log_snapshot_adopt(in->m, snap, state);
    if (rc < 0)
        return rc;
    view_log_intake_took_snapshot(&in->check, snap);
    sp_log(SP_LOG_INFO, "restart", "took %s's snapshot at (%" PRIu64 ", %" PRIu64 ")",
           in->check.sender, snap->view_id, snap->seq);
    return 0;
}

static int intake_record(void *ctx, const struct log_record *record)
{
    struct intake *in = ctx;
    int rc = view_log_intake_check_record(&in->check, record);
    if (rc == 0)
        rc = view_log_submit(in->m, record, &in->position);
    if (rc < 0)
        return rc;
    in->appended = true;
    view_log_intake_took_record(&in->check, record);
    return 0;
}

/* Appends the stream in reply to this member's log, moving ends (its
 * log's: the subgroup's end, the next view) past what it took. */
static int take_stream(struct view_membership *m, const struct view_restart_fetch *req,
                       uint32_t source, const uint8_t *reply, size_t length,
                       struct view_join_log_ends *ends)
{
    char sender[64];
    snprintf(sender, sizeof sender, "subgroup %u's source, member %u,", req->subgroup, source);
    struct intake in = {.m = m};
    view_log_intake_init(&in.check, sender, ends, req->subgroup, req->latest_view);
    struct log_catchup_sink sink = {
        .on_header = intake_header,
        .on_snapshot = intake_snapshot,
        .on_record = intake_record,
        .ctx = &in,
    };
    struct log_catchup_parser parser;
    int rc = log_catchup_parser_init(&parser, &sink);
    if (rc < 0)
        return rc;
    rc = view_log_open(m);
    if (rc == 0)
        rc = log_catchup_feed(&parser, reply, length);
    if (rc == 0)
        rc = log_catchup_finish(&parser);
    if (in.appended) {
        int waited = log_appender_wait(m->appender, in.position, -1);
        rc = rc < 0 ? rc : waited;
    }
    view_log_close(m);
    if (rc == 0)
        sp_log(SP_LOG_INFO, "restart",
               "took %" PRIu64 " snapshots and %" PRIu64
               " records of subgroup %u's history from its source",
               parser.snapshots, parser.records, req->subgroup);
    log_catchup_parser_free(&parser);
    return rc;
}

/* One try: 1 when the source is not answering yet, 0 when taken. */
static int fetch_once(struct view_membership *m, const struct ctl_address *host, uint32_t source,
                      const struct view_restart_fetch *req, struct view_join_log_ends *ends)
{
    uint8_t bytes[VIEW_WIRE_RESTART_FETCH_SIZE];
    size_t size = view_wire_encode_restart_fetch(req, bytes, sizeof bytes);
    struct ctl_versions versions = view_ctl_versions();
    void *reply = NULL;
    size_t length = 0;
    if (ctl_join_ask(m->group_name, &versions, m->config.keys, host->host, host->port, bytes, size,
                     &reply, &length, FETCH_TIMEOUT_MS) < 0)
        return 1; /* between its election and its joining the group */
    int rc = 0;
    if (view_wire_type(reply, length) == VIEW_WIRE_JOIN_OFFER) {
        struct view_join_offer *offer = calloc(1, sizeof *offer);
        struct smc_layout *layouts = calloc(VIEW_JOIN_MAX_SUBGROUPS, sizeof *layouts);
        if (offer == NULL || layouts == NULL)
            rc = sp_error(SPINDLE_ENOMEM, "no memory for an answer");
        else
            offer->layouts = layouts;
        if (rc == 0 && view_wire_decode_join_offer(reply, length, offer) < 0)
            rc = sp_error(SPINDLE_EPROTO, "%s:%u answered a fetch with a malformed offer: %s",
                          host->host, host->port, spindle_errmsg());
        else if (rc == 0 && offer->kind == VIEW_OFFER_REFUSE && offer->error == SPINDLE_EAGAIN)
            rc = 1; /* busy (an election's answer to a non-query, a view change) */
        else if (rc == 0)
            rc = sp_error(offer->kind == VIEW_OFFER_REFUSE && offer->error < 0 ? offer->error
                                                                               : SPINDLE_EPROTO,
                          "%s:%u refused to send subgroup %u's history: %s", host->host, host->port,
                          req->subgroup, offer->why);
        free(layouts);
        free(offer);
    } else {
        rc = take_stream(m, req, source, reply, length, ends);
    }
    free(reply);
    return rc;
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
        int rc;
        while ((rc = fetch_once(m, &hosts[source], source, &req, &mine->ends)) == 1) {
            if (sp_now_ns() >= deadline)
                return sp_error(SPINDLE_ETIMEDOUT,
                                "logged subgroup %u's source, member %u (%s:%u), did not send "
                                "its history within %d ms",
                                g, source, hosts[source].host, hosts[source].port,
                                m->config.bootstrap_timeout_ms);
            struct timespec pause = {0, FETCH_PAUSE_MS * 1000000L};
            nanosleep(&pause, NULL);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}
