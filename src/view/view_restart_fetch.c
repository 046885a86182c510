/*
 * A restart fetch (docs/LOGS.md "Subgroups L's log lacks", docs/WIRE.md
 * "restart fetch"): a restarting member behind a logged subgroup's source
 * takes what its log lacks of that subgroup, as a catch-up stream
 * (log/log_catchup.h), in slices of at most VIEW_RESTART_SLICE_MAX bytes,
 * so that no part of it, a snapshot included, is bounded by one control
 * frame.
 *
 *  - The source builds the stream once per request (its view records and
 *    the subgroup's messages the asker lacks, after its newest snapshot
 *    of it when its log holds the subgroup only from past the asker's
 *    end), keeps it per asker with its CRC-32C, and answers each fetch
 *    with the slice at the offset asked. A stream is built again when the
 *    asker asks for offset 0 or another point, after FETCH_STREAM_IDLE_MS
 *    without a fetch, or when the source no longer holds it; it is
 *    dropped once its last slice is sent. Built again, it is the same
 *    stream unless the source's log changed below the restart view (a
 *    newer snapshot), which its total or checksum tells the asker.
 *  - The asker checks every slice before any of its bytes is taken
 *    (view_restart_slices_take: at the offset it holds, the stream's total
 *    and checksum unchanged, and at the last slice the checksum of all the
 *    bytes) and feeds it to the catch-up parser, which hands over whole
 *    snapshots and records only; each is checked (view_log_intake.c) and
 *    stored. A refused slice ends the fetch and the restart attempt: what
 *    the log took before it is whole, checked records after its end (a
 *    longer prefix of the source's history, which a later attempt goes
 *    on from), never a part of a record or a snapshot.
 *
 * Threads: the source answers on one thread at a time (the election's
 * answering thread, then the membership thread) under m->fetch_lock; the
 * asker fetches on the thread that restarts it.
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
#include "util/crc32c.h"
#include "util/error.h"
#include "util/log.h"
#include "view/view_impl.h"

/* How long one fetch waits for its answer, the pause before asking again,
 * and how long a source keeps a stream no fetch asks for. */
#define FETCH_TIMEOUT_MS     5000
#define FETCH_PAUSE_MS       100
#define FETCH_STREAM_IDLE_MS 60000

/* ---- the source's side: the stream ---------------------------------- */

/* A growing stream. */
struct reply {
    uint8_t *bytes;
    size_t length, cap;
};

static int reply_put(struct reply *out, const void *data, size_t length)
{
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

static int reply_put_any(void *out, const void *data, size_t length)
{
    return reply_put(out, data, length);
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
    return view_catchup_put_snapshot(snap, state, reply_put_any, out);
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

/* ---- the source's side: the streams kept, and the slices ------------- */

/* A stream built for an asker (its request, offset 0). */
struct kept_stream {
    bool used;
    struct view_restart_fetch req;
    uint8_t *bytes;
    size_t length;
    uint32_t checksum;
    uint64_t touched_ns;
};

struct view_restart_streams {
    struct kept_stream by_asker[SPINDLE_MAX_MEMBERS];
};

static void drop(struct kept_stream *kept)
{
    free(kept->bytes);
    memset(kept, 0, sizeof *kept);
}

void view_restart_streams_free(struct view_membership *m)
{
    if (m->fetch_streams == NULL)
        return;
    for (uint32_t id = 0; id < SPINDLE_MAX_MEMBERS; id++)
        drop(&m->fetch_streams->by_asker[id]);
    free(m->fetch_streams);
    m->fetch_streams = NULL;
}

static bool same_request(const struct view_restart_fetch *a, const struct view_restart_fetch *b)
{
    return a->asker == b->asker && a->subgroup == b->subgroup && a->latest_view == b->latest_view &&
           a->next_view == b->next_view && a->view_id == b->view_id && a->seq == b->seq;
}

/* The stream for req, kept or built now (under m->fetch_lock). */
static int stream_for(struct view_membership *m, const char *log_dir,
                      const struct view_restart_fetch *req, struct kept_stream **out)
{
    if (m->fetch_streams == NULL) {
        m->fetch_streams = calloc(1, sizeof *m->fetch_streams);
        if (m->fetch_streams == NULL)
            return sp_error(SPINDLE_ENOMEM, "no memory for a fetch's streams");
    }
    uint64_t now = sp_now_ns();
    for (uint32_t id = 0; id < SPINDLE_MAX_MEMBERS; id++) {
        struct kept_stream *other = &m->fetch_streams->by_asker[id];
        if (other->used && now - other->touched_ns > FETCH_STREAM_IDLE_MS * 1000000ull)
            drop(other); /* an asker that went away */
    }
    struct kept_stream *kept = &m->fetch_streams->by_asker[req->asker];
    if (!kept->used || req->offset == 0 || !same_request(&kept->req, req)) {
        drop(kept);
        struct reply built = {0};
        int rc = fetch_stream(log_dir, req, &built);
        if (rc < 0) {
            free(built.bytes);
            return rc;
        }
        kept->used = true;
        kept->req = *req;
        kept->req.offset = 0;
        kept->bytes = built.bytes;
        kept->length = built.length;
        kept->checksum = sp_crc32c(0, built.bytes, built.length);
        if (req->offset > 0)
            sp_log(SP_LOG_INFO, "restart",
                   "built member %u's stream of subgroup %u again (%zu bytes) for offset %" PRIu64,
                   req->asker, req->subgroup, built.length, req->offset);
    }
    kept->touched_ns = now;
    *out = kept;
    return 0;
}

/* The slice at req->offset of its stream, malloc'ed into *answer. */
static int slice_answer(struct view_membership *m, const char *log_dir,
                        const struct view_restart_fetch *req, uint8_t **answer, size_t *length)
{
    struct kept_stream *kept = NULL;
    int rc = stream_for(m, log_dir, req, &kept);
    if (rc < 0)
        return rc;
    if (req->offset >= kept->length) {
        rc = sp_error(SPINDLE_EINVAL,
                      "member %u asked for offset %" PRIu64 " of subgroup %u's stream of %zu bytes",
                      req->asker, req->offset, req->subgroup, kept->length);
        drop(kept);
        return rc;
    }
    uint32_t most = m->fetch_slice_bytes > 0 && m->fetch_slice_bytes <= VIEW_RESTART_SLICE_MAX
                        ? m->fetch_slice_bytes
                        : VIEW_RESTART_SLICE_DEFAULT;
    size_t left = kept->length - (size_t)req->offset;
    struct view_restart_slice slice = {
        .total = kept->length,
        .offset = req->offset,
        .length = left < most ? (uint32_t)left : most,
        .checksum = kept->checksum,
        .bytes = kept->bytes + req->offset,
    };
    if (slice.length == left)
        slice.flags = VIEW_RESTART_SLICE_LAST;
    size_t size = VIEW_WIRE_RESTART_SLICE_HEADER_SIZE + slice.length;
    *answer = malloc(size);
    if (*answer == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for a slice of %u bytes", slice.length);
    *length = view_wire_encode_restart_slice(&slice, *answer, size);
    if (slice.offset == 0 || slice.flags != 0)
        sp_log(SP_LOG_INFO, "restart",
               "%s member %u subgroup %u's records from (%" PRIu64 ", %" PRIu64
               ") (%zu bytes, slices of up to %u)",
               slice.offset == 0 ? "sending" : "sent", req->asker, req->subgroup, req->view_id,
               req->seq, kept->length, most);
    if (slice.flags != 0)
        drop(kept); /* the last: asked again, it is built again */
    return 0;
}

void view_restart_fetch_answer(struct view_membership *m, struct ctl *ctl, const char *log_dir,
                               uint32_t self, const uint8_t *bytes, size_t length)
{
    struct view_restart_fetch req;
    uint8_t *answer = NULL;
    size_t answer_length = 0;
    int rc = view_wire_decode_restart_fetch(bytes, length, &req);
    if (rc == 0 && log_dir == NULL)
        rc = sp_error(SPINDLE_EINVAL, "member %u logs nothing", self);
    if (rc == 0) {
        pthread_mutex_lock(&m->fetch_lock);
        rc = slice_answer(m, log_dir, &req, &answer, &answer_length);
        pthread_mutex_unlock(&m->fetch_lock);
    }
    if (rc == 0) {
        (void)ctl_join_answer(ctl, answer, answer_length);
        free(answer);
        return;
    }
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

int view_restart_slices_take(struct view_restart_slices *s, const struct view_restart_slice *slice,
                             const char *sender)
{
    if (s->done)
        return sp_error(SPINDLE_EPROTO, "%s sent a slice at offset %" PRIu64 " after the last one",
                        sender, slice->offset);
    if (s->count > 0 && (slice->total != s->total || slice->checksum != s->checksum))
        return sp_error(SPINDLE_EPROTO,
                        "%s sent a slice of another stream: %" PRIu64
                        " bytes with checksum 0x%08x, after slices of %" PRIu64
                        " bytes with checksum 0x%08x",
                        sender, slice->total, slice->checksum, s->total, s->checksum);
    if (slice->offset != s->have)
        return sp_error(SPINDLE_EPROTO,
                        "%s sent a slice at offset %" PRIu64 " of its stream, but %" PRIu64
                        " bytes of it are taken",
                        sender, slice->offset, s->have);
    if (slice->length == 0 || slice->length > slice->total - slice->offset)
        return sp_error(SPINDLE_EPROTO,
                        "%s sent a slice of %u bytes at offset %" PRIu64 " past its total %" PRIu64,
                        sender, slice->length, slice->offset, slice->total);
    uint32_t crc = sp_crc32c(s->crc, slice->bytes, slice->length);
    bool last = slice->offset + slice->length == slice->total;
    if (last != ((slice->flags & VIEW_RESTART_SLICE_LAST) != 0))
        return sp_error(SPINDLE_EPROTO, "%s sent a slice ending at %" PRIu64 " of %" PRIu64 " %s",
                        sender, slice->offset + slice->length, slice->total,
                        last ? "not marked last" : "marked last");
    if (last && crc != slice->checksum)
        return sp_error(SPINDLE_EPROTO,
                        "%s sent a stream of %" PRIu64 " bytes whose checksum is 0x%08x, not the "
                        "0x%08x it announced",
                        sender, slice->total, crc, slice->checksum);
    s->total = slice->total;
    s->checksum = slice->checksum;
    s->crc = crc;
    s->have += slice->length;
    s->count++;
    s->done = last;
    return 0;
}

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

/* One ask for the slice at req->offset: 1 when the source does not answer
 * yet (or answers that it is busy), 0 and *slice (pointing into *reply,
 * which the caller frees) when it sent one, or why not. */
static int ask_slice(struct view_membership *m, const struct ctl_address *host,
                     const struct view_restart_fetch *req, const char *sender, void **reply,
                     struct view_restart_slice *slice)
{
    uint8_t bytes[VIEW_WIRE_RESTART_FETCH_SIZE];
    size_t size = view_wire_encode_restart_fetch(req, bytes, sizeof bytes);
    struct ctl_versions versions = view_ctl_versions();
    size_t length = 0;
    *reply = NULL;
    if (ctl_join_ask(m->group_name, &versions, m->config.keys, host->host, host->port, bytes, size,
                     reply, &length, FETCH_TIMEOUT_MS) < 0)
        return 1; /* between its election and its joining the group */
    if (view_wire_type(*reply, length) == VIEW_WIRE_RESTART_SLICE) {
        if (view_wire_decode_restart_slice(*reply, length, slice) == 0)
            return 0;
        return sp_error(SPINDLE_EPROTO, "%s (%s:%u) sent a malformed slice: %s", sender, host->host,
                        host->port, spindle_errmsg());
    }
    int rc = 0;
    struct view_join_offer *offer = calloc(1, sizeof *offer);
    struct smc_layout *layouts = calloc(VIEW_JOIN_MAX_SUBGROUPS, sizeof *layouts);
    if (offer == NULL || layouts == NULL)
        rc = sp_error(SPINDLE_ENOMEM, "no memory for an answer");
    else
        offer->layouts = layouts;
    if (rc == 0 && view_wire_decode_join_offer(*reply, length, offer) < 0)
        rc = sp_error(SPINDLE_EPROTO,
                      "%s (%s:%u) answered a fetch with neither a slice nor an offer: %s", sender,
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
    return rc;
}

/* Takes the stream slice by slice into parser, until its last slice or
 * the deadline. */
static int take_slices(struct view_membership *m, const struct ctl_address *host, uint32_t source,
                       struct view_restart_fetch req, const char *sender,
                       struct log_catchup_parser *parser, struct view_restart_slices *slices,
                       uint64_t deadline)
{
    while (!slices->done) {
        req.offset = slices->have;
        void *reply = NULL;
        struct view_restart_slice slice;
        int rc = ask_slice(m, host, &req, sender, &reply, &slice);
        if (rc == 0)
            rc = view_restart_slices_take(slices, &slice, sender);
        if (rc == 0)
            rc = log_catchup_feed(parser, slice.bytes, slice.length);
        free(reply);
        if (rc < 0)
            return rc;
        if (rc == 0)
            continue;
        if (sp_now_ns() >= deadline)
            return sp_error(SPINDLE_ETIMEDOUT,
                            "logged subgroup %u's source, member %u (%s:%u), did not send its "
                            "history within %d ms (%" PRIu64 " bytes of it taken)",
                            req.subgroup, source, host->host, host->port,
                            m->config.bootstrap_timeout_ms, slices->have);
        struct timespec pause = {0, FETCH_PAUSE_MS * 1000000L};
        nanosleep(&pause, NULL);
    }
    return log_catchup_finish(parser);
}

int view_restart_fetch_take(struct view_membership *m, const struct ctl_address *host,
                            uint32_t source, const struct view_restart_fetch *req,
                            struct view_join_log_ends *ends, uint64_t deadline)
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
    struct view_restart_slices slices = {0};
    rc = view_log_open(m);
    if (rc == 0)
        rc = take_slices(m, host, source, *req, sender, &parser, &slices, deadline);
    if (in.appended) {
        int waited = log_appender_wait(m->appender, in.position, -1);
        rc = rc < 0 ? rc : waited;
    }
    view_log_close(m);
    m->fetch_slices_taken += slices.count;
    if (rc == 0)
        sp_log(SP_LOG_INFO, "restart",
               "took %" PRIu64 " snapshots and %" PRIu64
               " records of subgroup %u's history from its source (%" PRIu64 " bytes in %" PRIu64
               " slices)",
               parser.snapshots, parser.records, req->subgroup, slices.have, slices.count);
    log_catchup_parser_free(&parser);
    return rc;
}
