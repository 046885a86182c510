/*
 * Joiners of a logged group (docs/LOGS.md "Restart of one member"). A
 * member that logs joins through the join path like any joiner, but its
 * state is its log:
 *
 *  - before it asks, it reads its log (its newest snapshot of each logged
 *    subgroup, then the messages after it) and hands that to the
 *    application's replay upcall, and notes where the log ends: per
 *    subgroup the point (view id, seq) after its last message or its
 *    snapshot, and the views whose records it holds (all zero for a fresh
 *    joiner, whose log is empty);
 *  - its join request says so (VIEW_JOIN_CATCHUP), and once admitted it
 *    sends the leader those ends;
 *  - the leader, at the start of the joiner's view, streams instead of the
 *    application's state what the joiner's log lacks (log/log_catchup.h),
 *    up to the view the joiner joins: when its own log holds every message
 *    after the joiner's ends, just those records, and the view records
 *    after the joiner's last; otherwise (its log was compacted past the
 *    joiner's end: it holds every message only after the older of its two
 *    newest snapshots, or after its only one) a reset: its newest snapshot
 *    of each subgroup that has one, then every record after them (a
 *    joiner of a restarted group keeping a subgroup no other log holds is
 *    never reset: it is sent, without the flag, the newest snapshot of
 *    each subgroup it is behind in so, then the records after them);
 *  - the joiner checks every snapshot and record (a subgroup it logs, in
 *    order, after its end, in a view it knows), stores them in its log
 *    (after a reset, a log started over) and hands them to the replay
 *    upcall, and only then writes the record of the view it joins. Its
 *    log then continues the leader's.
 *
 * The bytes sent are those of the missing records (or snapshots and the
 * records after them) plus a 16-byte header, 8 bytes a snapshot and the
 * chunks' framing.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log/log_catchup.h"
#include "log/log_snapshot.h"
#include "util/error.h"
#include "util/log.h"
#include "view/view_impl.h"

/* Hands one item to the application's replay upcall. */
static int replay(struct view_membership *m, const struct spindle_replayed *item)
{
    if (m->config.replay == NULL)
        return 0;
    int rc = m->config.replay(m->config.replay_ctx, item);
    /* Not "ask again": what was taken stays taken (appended to the log),
     * so another attempt would never hand this item over again. */
    if (rc == SPINDLE_EAGAIN)
        rc = SPINDLE_EINVAL;
    if (rc < 0)
        return sp_error(
            rc, "the replay upcall refused %s of subgroup %u at (%" PRIu64 ", %" PRIu64 ") (%s)",
            item->kind == SPINDLE_REPLAY_SNAPSHOT ? "the snapshot" : "the message", item->subgroup,
            item->view_id, item->seq, spindle_strerror(rc));
    return 0;
}

static int replay_message(struct view_membership *m, const struct log_message *msg, bool received)
{
    struct spindle_replayed item = {
        .kind = SPINDLE_REPLAY_MESSAGE,
        .subgroup = msg->subgroup,
        .view_id = msg->view_id,
        .seq = msg->seq,
        .sender = msg->sender_id,
        .sender_index = msg->sender_index,
        .data = msg->payload,
        .length = msg->length,
        .received = received,
    };
    return replay(m, &item);
}

static int replay_snapshot(struct view_membership *m, uint32_t subgroup, uint64_t view_id,
                           uint64_t seq, const void *state, size_t length, bool received)
{
    struct spindle_replayed item = {
        .kind = SPINDLE_REPLAY_SNAPSHOT,
        .subgroup = subgroup,
        .view_id = view_id,
        .seq = seq,
        .data = state,
        .length = length,
        .received = received,
    };
    return replay(m, &item);
}

/* The end entry of subgroup g in ends, or NULL. */
static struct view_join_log_end *end_of(struct view_join_log_ends *ends, uint32_t g)
{
    for (uint32_t i = 0; i < ends->count; i++)
        if (ends->ends[i].subgroup == g)
            return &ends->ends[i];
    return NULL;
}

/* Moves a subgroup's end to the point (view_id, seq) when it is later. */
static void advance_end(struct view_join_log_end *end, uint64_t view_id, uint64_t seq)
{
    if (log_point_before(end->view_id, end->seq, view_id, seq)) {
        end->view_id = view_id;
        end->seq = seq;
    }
}

/* ---- the joiner's own log ------------------------------------------- */

/* Replays (when replaying) the newest valid snapshot of each logged
 * subgroup of log and moves the ends to their points. */
static int replay_snapshots(struct view_membership *m, const struct log *log,
                            struct view_join_log_ends *ends, struct view_log_summary *summary)
{
    bool replaying = summary == NULL;
    struct log_snapshot_file *files;
    size_t count;
    int rc = log_snapshot_list(log->dir_fd, log->dir, false, &files, &count);
    if (rc < 0)
        return rc;
    /* Sorted by subgroup, then point: a subgroup's newest is its last. */
    for (size_t i = 0; i < count && rc == 0; i++) {
        const struct log_snapshot_file *file = &files[i];
        if (!file->valid) {
            SP_LOG_WARNING("log", "%s: ignoring snapshot %s: %s", log->dir, file->name, file->why);
            continue;
        }
        bool newest = true;
        for (size_t k = i + 1; k < count; k++)
            if (files[k].valid && files[k].snap.subgroup == file->snap.subgroup)
                newest = false;
        struct view_join_log_end *end = end_of(ends, file->snap.subgroup);
        if (!newest || end == NULL)
            continue;
        struct log_snapshot snap;
        void *state = NULL;
        rc = log_snapshot_read(log->dir_fd, log->dir, file->name, &snap, &state);
        if (rc < 0)
            break;
        if (replaying)
            rc = replay_snapshot(m, snap.subgroup, snap.view_id, snap.seq, state,
                                 (size_t)snap.state_length, false);
        else if (!summary->any_view || snap.view.view_id > summary->latest.view_id) {
            /* Its view's record may be gone with compacted segments. */
            summary->any_view = true;
            summary->latest = snap.view;
        }
        free(state);
        advance_end(end, snap.view_id, snap.seq);
    }
    free(files);
    return rc;
}

/* Replays (when summary is NULL) the messages of log after each
 * subgroup's end so far (its snapshot's point) and moves the ends past
 * them and its view records; or fills summary instead. */
static int replay_records(struct view_membership *m, const struct log *log,
                          struct view_join_log_ends *ends, struct view_log_summary *summary)
{
    struct view_join_log_ends *from = malloc(sizeof *from);
    if (from == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory to read the log");
    *from = *ends;
    struct log_reader reader;
    int rc = log_reader_open(&reader, log);
    if (rc < 0) {
        free(from);
        return rc;
    }
    struct log_record record;
    while (rc == 0 && (rc = log_reader_next(&reader, &record)) == 1) {
        rc = 0;
        if (record.type == LOG_REC_VIEW) {
            if (record.view.view_id >= ends->next_view)
                ends->next_view = record.view.view_id + 1;
            if (summary != NULL &&
                (!summary->any_view || record.view.view_id >= summary->latest.view_id)) {
                summary->any_view = true;
                summary->latest = record.view;
            }
            continue;
        }
        const struct log_message *msg = &record.message;
        struct view_join_log_end *end = end_of(ends, msg->subgroup);
        const struct view_join_log_end *snapshot = end_of(from, msg->subgroup);
        if (end == NULL ||
            log_point_before(msg->view_id, msg->seq, snapshot->view_id, snapshot->seq))
            continue;
        if (summary == NULL)
            rc = replay_message(m, msg, false);
        advance_end(end, msg->view_id, msg->seq + 1);
    }
    log_reader_close(&reader);
    free(from);
    return rc < 0 ? rc : 0;
}

/* The logged subgroups' ends, all at the start. */
static void first_ends(const struct view_membership *m, struct view_join_log_ends *ends)
{
    memset(ends, 0, sizeof *ends);
    for (uint32_t g = 0; g < SPINDLE_MAX_SUBGROUPS; g++)
        if (view_logged(&m->config, g))
            ends->ends[ends->count++].subgroup = g;
}

int view_log_summary_read(struct view_membership *m, struct view_log_summary *out)
{
    memset(out, 0, sizeof *out);
    first_ends(m, &out->ends);
    if (m->config.log_dir == NULL || out->ends.count == 0)
        return 0;
    /* Read as it is (a torn tail is left for the writable open to cut). */
    struct log *log = NULL;
    int rc = log_open(m->config.log_dir, 0, &log, NULL);
    if (rc == 0) {
        rc = replay_snapshots(m, log, &out->ends, out);
        if (rc == 0)
            rc = replay_records(m, log, &out->ends, out);
        log_close(log);
    } else if (rc == SPINDLE_ENOENT) {
        rc = 0;
    }
    /* A snapshot alone says that a view was installed: its record is gone
     * with the segments compaction removed, and the view before the
     * snapshot's point is not known. */
    for (uint32_t i = 0; i < out->ends.count && rc == 0; i++)
        out->any_state |= out->ends.ends[i].view_id > 0 || out->ends.ends[i].seq > 0;
    out->any_state |= out->any_view;
    return rc;
}

int view_log_restart_open(struct view_membership *m)
{
    if (m->config.log_dir == NULL || m->log_ends != NULL)
        return 0;
    struct view_join_log_ends *ends = calloc(1, sizeof *ends);
    if (ends == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the log's ends");
    first_ends(m, ends);
    if (ends->count == 0) {
        free(ends);
        return 0;
    }
    /* Read as it is; the writable open below cuts the same torn tail. */
    struct log *log = NULL;
    int rc = log_open(m->config.log_dir, 0, &log, NULL);
    if (rc == 0) {
        rc = replay_snapshots(m, log, ends, NULL);
        if (rc == 0)
            rc = replay_records(m, log, ends, NULL);
        log_close(log);
    } else if (rc == SPINDLE_ENOENT) {
        rc = 0; /* a fresh joiner */
    }
    if (rc == 0)
        rc = view_log_open(m);
    if (rc < 0) {
        free(ends);
        return rc;
    }
    m->log_ends = ends;
    if (ends->next_view > 0)
        sp_log(SP_LOG_INFO, "log", "%s: joining with the log (its last view %" PRIu64 ")",
               m->config.log_dir, ends->next_view - 1);
    return 0;
}

int view_log_send_ends(struct view_membership *m, uint32_t leader, uint64_t view)
{
    m->log_ends->join_view = view;
    size_t size = VIEW_WIRE_JOIN_LOG_ENDS_SIZE(m->log_ends->count);
    uint8_t *bytes = malloc(size);
    if (bytes == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the log's ends");
    view_wire_encode_join_log_ends(m->log_ends, bytes, size);
    int rc = ctl_publish(m->ctl, view_join_tag(view, JOIN_LOG_ENDS), bytes, size, 1ull << leader);
    free(bytes);
    return rc;
}

/* ---- the leader's side ---------------------------------------------- */

/* What the leader sends one joiner. */
struct catchup_plan {
    struct view_join_log_ends ends; /* the joiner's, then where to send from */
    bool reset;
    uint32_t snapshot_count;
    struct log_snapshot snapshots[SPINDLE_MAX_SUBGROUPS];
    void *states[SPINDLE_MAX_SUBGROUPS];
};

/* Takes and checks the ends joiner sent for view. */
static int take_ends(struct view_membership *m, uint32_t joiner, uint64_t view,
                     struct view_join_log_ends *ends)
{
    size_t cap = VIEW_WIRE_JOIN_LOG_ENDS_SIZE(SPINDLE_MAX_SUBGROUPS);
    uint8_t *bytes = malloc(cap);
    if (bytes == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the joiner's log ends");
    size_t length = 0;
    int rc = ctl_take_one(m->ctl, view_join_tag(view, JOIN_LOG_ENDS), joiner, bytes, cap, &length,
                          EXCHANGE_TIMEOUTS * m->config.failure_timeout_ms);
    if (rc < 0)
        rc = sp_error(rc, "joiner %u never said where its log ends (%s)", joiner, spindle_errmsg());
    else if (view_wire_decode_join_log_ends(bytes, length, ends) < 0)
        rc = sp_error(SPINDLE_EPROTO, "joiner %u: %s", joiner, spindle_errmsg());
    else if (ends->join_view != view)
        rc = sp_error(SPINDLE_EPROTO,
                      "joiner %u sent its log's ends for view %" PRIu64 ", not %" PRIu64, joiner,
                      ends->join_view, view);
    free(bytes);
    return rc;
}

/* Where this member's log holds every message of subgroup from: the older
 * of its two newest snapshots, or its only one, or the start. Under
 * snapshot_lock. */
static void log_base(const struct view_membership *m, uint32_t subgroup, uint64_t *view_id,
                     uint64_t *seq)
{
    *view_id = 0;
    *seq = 0;
    if (!view_log_older_snapshot(m, subgroup, view_id, seq))
        view_log_newest_snapshot(m, subgroup, view_id, seq);
}

/* Reads the newest snapshot of each subgroup in the plan that has one
 * (behind_only: of each whose end lies before where this log holds every
 * message of it). Under snapshot_lock (no snapshot is pruned meanwhile). */
static int read_snapshots(struct view_membership *m, struct catchup_plan *plan, bool behind_only)
{
    for (uint32_t i = 0; i < plan->ends.count; i++) {
        uint32_t g = plan->ends.ends[i].subgroup;
        uint64_t base_view, base_seq;
        log_base(m, g, &base_view, &base_seq);
        if (behind_only && !log_point_before(plan->ends.ends[i].view_id, plan->ends.ends[i].seq,
                                             base_view, base_seq))
            continue;
        struct log_snapshot point = {.subgroup = g};
        if (!view_log_newest_snapshot(m, g, &point.view_id, &point.seq))
            continue;
        char name[LOG_SNAPSHOT_NAME_SIZE + 1];
        log_snapshot_name(&point, name);
        uint32_t k = plan->snapshot_count;
        int rc = log_snapshot_read(m->log->dir_fd, m->log->dir, name, &plan->snapshots[k],
                                   &plan->states[k]);
        if (rc < 0)
            return rc;
        plan->snapshot_count++;
        /* Its messages are sent from the snapshot's point on. */
        plan->ends.ends[i].view_id = point.view_id;
        plan->ends.ends[i].seq = point.seq;
    }
    return 0;
}

/* True when the joiner lacks record, which lies before the view it joins. */
static bool lacks(const struct view_join_log_ends *ends, const struct log_record *record)
{
    if (record->type == LOG_REC_VIEW)
        return record->view.view_id >= ends->next_view;
    const struct log_message *msg = &record->message;
    for (uint32_t i = 0; i < ends->count; i++)
        if (ends->ends[i].subgroup == msg->subgroup)
            return !log_point_before(msg->view_id, msg->seq, ends->ends[i].view_id,
                                     ends->ends[i].seq);
    return false;
}

int view_catchup_put_snapshot(const struct log_snapshot *snap, const void *state,
                              int (*put)(void *ctx, const void *data, size_t length), void *ctx)
{
    uint8_t head[LOG_SNAPSHOT_HEADER_SIZE + LOG_RECORD_HEADER_SIZE + 16u +
                 4u * SPINDLE_MAX_MEMBERS + 8u * SPINDLE_MAX_SUBGROUPS];
    size_t size = log_snapshot_encode(snap, head, sizeof head);
    uint8_t prefix[LOG_CATCHUP_SNAPSHOT_PREFIX];
    log_catchup_snapshot_prefix_encode(size + snap->state_length, prefix);
    int rc = put(ctx, prefix, sizeof prefix);
    if (rc == 0)
        rc = put(ctx, head, size);
    if (rc == 0)
        rc = put(ctx, state, (size_t)snap->state_length);
    return rc;
}

static int state_out_put(void *out, const void *data, size_t length)
{
    return spindle_state_put(out, data, length);
}

/* Sends the plan's header and snapshots. */
static int stream_snapshots(const struct catchup_plan *plan, struct spindle_state_out *out)
{
    uint8_t header[LOG_CATCHUP_HEADER_SIZE];
    log_catchup_header_encode(plan->reset ? LOG_CATCHUP_RESET : 0, plan->snapshot_count, header);
    int rc = spindle_state_put(out, header, sizeof header);
    for (uint32_t k = 0; k < plan->snapshot_count && rc == 0; k++)
        rc = view_catchup_put_snapshot(&plan->snapshots[k], plan->states[k], state_out_put, out);
    return rc;
}

/* Calls fn for each record of this member's log before the record of
 * view (the joiner's own view, whose record it writes itself), reading a
 * copy of the log's list of segments: the appender's writer changes the
 * member's as it goes. The path is the open log's (the options' string is
 * the application's only during create). */
static int for_each_record(struct view_membership *m, uint64_t view,
                           int (*fn)(void *ctx, const struct log_record *record), void *ctx)
{
    struct log *log = NULL;
    int rc = log_open(m->log->dir, 0, &log, NULL);
    if (rc < 0)
        return rc;
    struct log_reader reader;
    rc = log_reader_open(&reader, log);
    if (rc < 0) {
        log_close(log);
        return rc;
    }
    struct log_record record;
    while (rc == 0 && (rc = log_reader_next(&reader, &record)) == 1) {
        if (record.type == LOG_REC_VIEW && record.view.view_id >= view)
            break;
        rc =
            record.type == LOG_REC_MESSAGE && record.message.view_id >= view ? 0 : fn(ctx, &record);
    }
    log_reader_close(&reader);
    log_close(log);
    return rc < 0 ? rc : 0;
}

/* The bytes of the two ways to catch a joiner up, counted in one pass. */
struct plan_costs {
    const struct view_join_log_ends *suffix, *reset;
    uint64_t suffix_bytes, reset_bytes;
};

static int count_record(void *ctx, const struct log_record *record)
{
    struct plan_costs *costs = ctx;
    if (lacks(costs->suffix, record))
        costs->suffix_bytes += log_record_size(record);
    if (lacks(costs->reset, record))
        costs->reset_bytes += log_record_size(record);
    return 0;
}

/*
 * The total restart's rules for a joiner's catch-up (view_restart_subgroup.c),
 * after the plan's own: a joiner holding a subgroup the restart's log holds
 * nothing of keeps it when it holds what the subgroup's source held, and is
 * refused otherwise, its log untouched. A joiner whose log went past the
 * point the restart recovered (it was not among the members the group
 * restarted from, and came back with options.join) starts over (*must_reset)
 * unless it keeps such a subgroup (*keeps): refused, since no other log
 * holds it.
 */
static int restart_rules(struct view_membership *m, uint32_t joiner,
                         const struct view_join_log_ends *ends, bool *must_reset, bool *keeps)
{
    char whose[48];
    snprintf(whose, sizeof whose, "joiner %u's log", joiner);
    int rc = view_restart_check_subgroups(m->restart, ends, joiner, whose);
    uint32_t kept = 0;
    *keeps = view_restart_keeps(&m->restart->running, ends, &kept);
    bool ahead = view_restart_ahead(ends, &m->restart->running);
    if (rc == 0 && ahead && *keeps)
        return sp_error(SPINDLE_EINVAL,
                        "joiner %u's log would start over, but it keeps logged subgroup %u, "
                        "which the restart leader's log holds nothing of (docs/LOGS.md \"Total "
                        "restart\")",
                        joiner, kept);
    if (rc == 0 && ahead) {
        sp_log(SP_LOG_WARN, "log",
               "joiner %u's log goes past the point the group restarted from: it starts over",
               joiner);
        *must_reset = true;
    }
    return rc;
}

/*
 * Decides what joiner is sent. A suffix, unless this member's log lacks
 * part of what follows the joiner's ends (a subgroup's end before where
 * its log holds every message), or its snapshots and the records after
 * them would be fewer bytes than the suffix: then a reset. A joiner of a
 * restarted group that keeps a subgroup is never reset: where it lacks
 * what this log holds only from a snapshot on, it is sent that snapshot
 * (flags 0), and the records after it.
 */
static int make_plan(struct view_membership *m, uint32_t joiner, uint64_t view,
                     struct catchup_plan *plan)
{
    struct view_join_log_ends *ends = &plan->ends;
    struct view_join_log_ends *from = malloc(sizeof *from);
    if (from == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for the joiner's catch-up");
    *from = *ends;
    from->next_view = 0;
    bool must_reset = false;
    uint64_t snapshot_bytes = 0;
    struct log_snapshot_file *files = NULL;
    size_t count = 0;
    pthread_mutex_lock(&m->snapshot_lock);
    int rc = log_snapshot_list(m->log->dir_fd, m->log->dir, false, &files, &count);
    for (uint32_t i = 0; i < ends->count && rc == 0; i++) {
        const struct view_join_log_end *end = &ends->ends[i];
        if (!view_logged(&m->config, end->subgroup)) {
            rc = sp_error(SPINDLE_EINVAL,
                          "joiner %u logs subgroup %u, which member %u does not log: every "
                          "member of a logged subgroup must log it",
                          joiner, end->subgroup, m->config.self);
            break;
        }
        uint64_t base_view, base_seq;
        log_base(m, end->subgroup, &base_view, &base_seq);
        must_reset |= log_point_before(end->view_id, end->seq, base_view, base_seq);
        /* A reset sends the newest snapshot and the messages after it. */
        struct view_join_log_end *reset_end = &from->ends[i];
        reset_end->view_id = reset_end->seq = 0;
        if (!view_log_newest_snapshot(m, end->subgroup, &reset_end->view_id, &reset_end->seq))
            continue;
        for (size_t k = 0; k < count; k++)
            if (files[k].valid && files[k].snap.subgroup == end->subgroup &&
                files[k].snap.view_id == reset_end->view_id && files[k].snap.seq == reset_end->seq)
                snapshot_bytes += LOG_CATCHUP_SNAPSHOT_PREFIX + files[k].file_size;
    }
    pthread_mutex_unlock(&m->snapshot_lock);
    free(files);
    bool keeps = false;
    if (rc == 0 && m->restart != NULL)
        rc = restart_rules(m, joiner, ends, &must_reset, &keeps);
    /* A reset starts the whole log over: never one that keeps a subgroup
     * no other log of the group holds. Behind only where this log holds a
     * subgroup from a snapshot on (the joiner logs this member's subgroup
     * and was never sent it, say), it is sent those snapshots instead, its
     * log kept. */
    bool behind_snapshots = rc == 0 && must_reset && keeps;
    if (behind_snapshots)
        must_reset = false;
    plan->reset = must_reset;
    if (rc == 0 && !must_reset && snapshot_bytes > 0 && !keeps) {
        struct plan_costs costs = {.suffix = ends, .reset = from};
        rc = for_each_record(m, view, count_record, &costs);
        plan->reset = rc == 0 && snapshot_bytes + costs.reset_bytes < costs.suffix_bytes;
    }
    free(from);
    if (rc == 0 && plan->reset) {
        for (uint32_t i = 0; i < ends->count; i++)
            ends->ends[i].view_id = ends->ends[i].seq = 0;
        ends->next_view = 0;
        pthread_mutex_lock(&m->snapshot_lock);
        rc = read_snapshots(m, plan, false);
        pthread_mutex_unlock(&m->snapshot_lock);
    } else if (rc == 0 && behind_snapshots) {
        pthread_mutex_lock(&m->snapshot_lock);
        rc = read_snapshots(m, plan, true);
        pthread_mutex_unlock(&m->snapshot_lock);
    }
    return rc;
}

/* Streams the records of this member's log that the plan says the joiner
 * lacks. */
struct record_stream {
    const struct catchup_plan *plan;
    struct spindle_state_out *out;
    uint8_t *buf; /* LOG_MAX_RECORD bytes */
    uint64_t records;
};

static int stream_record(void *ctx, const struct log_record *record)
{
    struct record_stream *st = ctx;
    if (!lacks(&st->plan->ends, record))
        return 0;
    size_t size = log_record_encode(record, st->buf, LOG_MAX_RECORD);
    st->records++;
    return spindle_state_put(st->out, st->buf, size);
}

int view_log_catchup_write(struct view_membership *m, uint32_t joiner, uint64_t view,
                           struct spindle_state_out *out)
{
    if (m->appender == NULL)
        return sp_error(SPINDLE_EINVAL, "joiner %u logs, but member %u logs nothing", joiner,
                        m->config.self);
    struct catchup_plan *plan = calloc(1, sizeof *plan);
    struct record_stream st = {.plan = plan, .out = out, .buf = malloc(LOG_MAX_RECORD)};
    int rc = plan != NULL && st.buf != NULL
                 ? take_ends(m, joiner, view, &plan->ends)
                 : sp_error(SPINDLE_ENOMEM, "no memory for the joiner's catch-up");
    if (rc == 0) {
        /* No segment may go while the log is read. */
        log_appender_hold_compaction(m->appender, true);
        rc = make_plan(m, joiner, view, plan);
        if (rc == 0)
            rc = stream_snapshots(plan, out);
        if (rc == 0)
            rc = for_each_record(m, view, stream_record, &st);
        log_appender_hold_compaction(m->appender, false);
    }
    if (rc == 0)
        sp_log(SP_LOG_INFO, "log", "catch-up of joiner %u: %s%u snapshots, %" PRIu64 " records",
               joiner, plan->reset ? "reset, " : "", plan->snapshot_count, st.records);
    for (uint32_t k = 0; plan != NULL && k < plan->snapshot_count; k++)
        free(plan->states[k]);
    free(plan);
    free(st.buf);
    return rc;
}

/* ---- the joiner's side ---------------------------------------------- */

struct view_log_catchup {
    struct view_membership *m;
    uint64_t view; /* the view it joins */
    struct log_catchup_parser parser;
    struct view_log_intake intake; /* over m->log_ends, up to the view before */
    uint64_t end_position;         /* the log's, after the last record appended */
    bool appended;
    uint64_t bytes;
};

/* A reset: the joiner's log starts over, and so does the application's
 * state (an empty snapshot of every subgroup, replaced by the snapshots
 * that follow). */
static int take_header(void *ctx, uint16_t flags, uint32_t snapshot_count)
{
    struct view_log_catchup *c = ctx;
    struct view_membership *m = c->m;
    c->bytes += LOG_CATCHUP_HEADER_SIZE + (uint64_t)snapshot_count * LOG_CATCHUP_SNAPSHOT_PREFIX;
    if ((flags & LOG_CATCHUP_RESET) == 0)
        return 0;
    sp_log(SP_LOG_INFO, "log", "%s: the log starts over from the leader's snapshots",
           m->config.log_dir);
    view_log_close(m);
    int rc = log_wipe(m->config.log_dir);
    if (rc == 0)
        rc = view_log_open(m);
    if (rc < 0)
        return rc;
    m->current->log = m->appender;
    m->current->frontiers = m->frontiers;
    view_log_intake_start_over(&c->intake);
    const struct view_join_log_ends *ends = m->log_ends;
    for (uint32_t i = 0; i < ends->count && rc == 0; i++)
        rc = replay_snapshot(m, ends->ends[i].subgroup, 0, 0, NULL, 0, true);
    return rc;
}

static int take_snapshot(void *ctx, const struct log_snapshot *snap, const uint8_t *state)
{
    struct view_log_catchup *c = ctx;
    struct view_membership *m = c->m;
    int rc = view_log_intake_check_snapshot(&c->intake, snap);
    if (rc == 0)
        rc = view_log_snapshot_adopt(m, snap, state);
    if (rc < 0)
        return rc;
    view_log_intake_took_snapshot(&c->intake, snap);
    c->bytes += log_snapshot_encode(snap, NULL, 0) + snap->state_length;
    return replay_snapshot(m, snap->subgroup, snap->view_id, snap->seq, state,
                           (size_t)snap->state_length, true);
}

/* Takes one record of the stream: checked, appended, replayed. */
static int take_record(void *ctx, const struct log_record *record)
{
    struct view_log_catchup *c = ctx;
    struct view_membership *m = c->m;
    int rc = view_log_intake_check_record(&c->intake, record);
    if (rc == 0)
        rc = view_log_submit(m, record, &c->end_position);
    if (rc < 0)
        return rc;
    c->appended = true;
    c->bytes += log_record_size(record);
    view_log_intake_took_record(&c->intake, record);
    return record->type == LOG_REC_VIEW ? 0 : replay_message(m, &record->message, true);
}

int view_log_catchup_begin(struct view_membership *m, uint64_t view, struct view_log_catchup **out)
{
    struct view_log_catchup *c = calloc(1, sizeof *c);
    if (c == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for a catch-up");
    c->m = m;
    c->view = view;
    /* A joiner never joins view 0, the group's first. */
    view_log_intake_init(&c->intake, "catch-up: the leader", m->log_ends, VIEW_LOG_ANY_SUBGROUP,
                         view - 1);
    struct log_catchup_sink sink = {
        .on_header = take_header,
        .on_snapshot = take_snapshot,
        .on_record = take_record,
        .ctx = c,
    };
    int rc = log_catchup_parser_init(&c->parser, &sink);
    if (rc < 0) {
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

int view_log_catchup_feed(struct view_log_catchup *c, const void *data, size_t length, bool last)
{
    int rc = log_catchup_feed(&c->parser, data, length);
    if (rc == 0 && last)
        rc = log_catchup_finish(&c->parser);
    return rc;
}

int view_log_catchup_end(struct view_log_catchup *c)
{
    if (c == NULL)
        return 0;
    struct view_membership *m = c->m;
    int rc = c->appended ? log_appender_wait(m->appender, c->end_position, -1) : 0;
    m->catchup_records += c->parser.records;
    m->catchup_bytes += c->bytes;
    if (c->parser.records > 0 || c->parser.snapshots > 0)
        sp_log(SP_LOG_INFO, "log",
               "%s: caught up %" PRIu64 " snapshots and %" PRIu64 " records (%" PRIu64 " bytes)",
               m->config.log_dir, c->parser.snapshots, c->parser.records, c->bytes);
    log_catchup_parser_free(&c->parser);
    free(c);
    return rc;
}
