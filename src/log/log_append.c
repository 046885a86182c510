/* The batched appender (log/log_append.h). */
#include "log/log_append.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "log/log_direct.h"
#include "log/log_snapshot.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

#define DEFAULT_QUEUE_BYTES   ((size_t)8 << 20)
#define DEFAULT_SEGMENT_BYTES ((uint64_t)64 << 20)
/* Views kept for snapshots (log_appender_find_view): a snapshot names the
 * view its point counts in, usually the current one or the one before. */
#define KNOWN_VIEWS 8

/* A subgroup's cover point: its messages before (view_id, seq) are in a
 * snapshot. */
struct log_cover {
    bool set;
    uint64_t view_id, seq;
};

/* What a sealed segment holds (log.h): the last view record's id and, per
 * subgroup with messages there, the last message's point. */
struct log_segment_summary {
    bool has_view;
    uint64_t last_view_id;
    uint32_t count;
    struct {
        uint32_t subgroup;
        uint64_t view_id, seq;
    } last[];
};

/*
 * The queue is a bip buffer: queued bytes are region A = [a_start, a_end)
 * and, once A reached the end of the buffer, region B = [0, b_end) before
 * a_start. A record never straddles the end, so the writer takes at most
 * two stretches, in order, A then B.
 */
struct log_queue {
    size_t a_start, a_end, b_end;
    bool b_active;
};

struct log_appender {
    struct log *log;
    struct log_direct *direct; /* the writer's: how a batch reaches the disk */
    uint64_t segment_bytes;
    void (*on_durable)(void *ctx);
    void *on_durable_ctx;
    pthread_t writer;
    pthread_mutex_t lock;
    pthread_cond_t work;     /* the writer: records queued, or stop */
    pthread_cond_t progress; /* waiters: durable position moved, or an error */
    uint8_t *buf;
    size_t cap;
    struct log_queue queue;      /* under lock */
    uint64_t submitted_position; /* under lock: next position to assign */
    bool stopping;               /* under lock */
    int error;                   /* under lock: the writer's failure, sticky */
    char error_message[512];
    atomic_uint_fast64_t durable_position;
    atomic_uint_fast64_t durable_bytes;
    atomic_uint_fast64_t syncs;
    atomic_uint_fast64_t catch_up_writes; /* batches that took a second write before their sync */
    /* Compaction, under lock: the cover points, bumped generation on each
     * change; the writer compacts while compact_due. */
    struct log_cover covers[SPINDLE_MAX_SUBGROUPS];
    uint64_t cover_generation;
    uint64_t compacted_generation;
    bool compact_due;
    unsigned compact_holds; /* log_appender_hold_compaction: none while > 0 */
    int compact_error;
    char compact_message[512];
    atomic_uint_fast64_t segments_removed;
    /* Known views, under lock (log_appender_find_view). */
    struct log_view views[KNOWN_VIEWS];
    size_t view_count;
};

static bool queue_empty(const struct log_queue *q)
{
    return q->a_start == q->a_end && !q->b_active;
}

/* Reserves size contiguous bytes: true and *offset, or false. */
static bool queue_reserve(struct log_queue *q, size_t cap, size_t size, size_t *offset)
{
    if (q->b_active) {
        if (q->b_end + size > q->a_start)
            return false;
        *offset = q->b_end;
        q->b_end += size;
        return true;
    }
    if (q->a_end + size <= cap) {
        *offset = q->a_end;
        q->a_end += size;
        return true;
    }
    if (size > q->a_start)
        return false;
    q->b_active = true;
    *offset = 0;
    q->b_end = size;
    return true;
}

/* Frees what the writer took (a snapshot of the queue) once written. */
static void queue_release(struct log_queue *q, const struct log_queue *taken)
{
    if (taken->b_active) {
        /* A could not grow while B was active: all of it went. */
        q->a_start = taken->b_end;
        q->a_end = q->b_end;
        q->b_active = false;
    } else {
        q->a_start = taken->a_end;
        if (q->a_start == q->a_end && q->b_active) {
            q->a_start = 0;
            q->a_end = q->b_end;
            q->b_active = false;
        }
    }
    if (queue_empty(q))
        q->a_start = q->a_end = 0;
}

/* Records the writer's failure (the thread-local message is copied so that
 * callers on other threads can report it). Under lock. */
static void set_error(struct log_appender *app, int rc)
{
    app->error = rc;
    snprintf(app->error_message, sizeof app->error_message, "%s", spindle_errmsg());
    pthread_cond_broadcast(&app->progress);
}

static int report_error(const struct log_appender *app)
{
    return sp_error(app->error, "%s", app->error_message);
}

static unsigned sync_delay_ms; /* test hook: log_test_delay_syncs */

/* Used by tests only (tests/log/test_log_frontier.c: a member with a slow
 * disk). */
// cppcheck-suppress unusedFunction
void log_test_delay_syncs(unsigned ms)
{
    __atomic_store_n(&sync_delay_ms, ms, __ATOMIC_RELAXED);
}

static pthread_mutex_t sync_gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sync_gate_opened = PTHREAD_COND_INITIALIZER;
static pthread_cond_t sync_gate_reached = PTHREAD_COND_INITIALIZER;
static bool sync_gate_closed;   /* under sync_gate_lock: log_test_hold_syncs */
static unsigned sync_gate_held; /* under sync_gate_lock: writers waiting at it */

/* Used by tests only (tests/log/test_log_delivery.c: a disk that takes
 * nothing until the test says so). */
// cppcheck-suppress unusedFunction
void log_test_hold_syncs(bool hold)
{
    pthread_mutex_lock(&sync_gate_lock);
    sync_gate_closed = hold;
    if (!hold)
        pthread_cond_broadcast(&sync_gate_opened);
    pthread_mutex_unlock(&sync_gate_lock);
}

/* Used by tests only (tests/log/test_log_append.c: records submitted
 * while a batch is being written). */
// cppcheck-suppress unusedFunction
int log_test_wait_held_syncs(unsigned writers, int timeout_ms)
{
    struct timespec deadline = sp_deadline_in(CLOCK_REALTIME, timeout_ms);
    int rc = 0;
    pthread_mutex_lock(&sync_gate_lock);
    while (sync_gate_held < writers && rc == 0)
        if (pthread_cond_timedwait(&sync_gate_reached, &sync_gate_lock, &deadline) == ETIMEDOUT)
            rc = sp_error(SPINDLE_ETIMEDOUT, "log: %u of %u writers at the held sync within %d ms",
                          sync_gate_held, writers, timeout_ms);
    pthread_mutex_unlock(&sync_gate_lock);
    return rc;
}

static void sync_delay(void)
{
    pthread_mutex_lock(&sync_gate_lock);
    if (sync_gate_closed) {
        sync_gate_held++;
        pthread_cond_broadcast(&sync_gate_reached);
        while (sync_gate_closed)
            pthread_cond_wait(&sync_gate_opened, &sync_gate_lock);
        sync_gate_held--;
    }
    pthread_mutex_unlock(&sync_gate_lock);
    unsigned ms = __atomic_load_n(&sync_delay_ms, __ATOMIC_RELAXED);
    if (ms == 0)
        return;
    struct timespec pause = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
}

/* The stretches queued in `to` after those in `from` (two snapshots of the
 * queue taken by the writer, `to` the later): A grows until B starts, and
 * only B grows after that; only the writer frees. Returns their count. */
static int new_stretches(const struct log_appender *app, const struct log_queue *from,
                         const struct log_queue *to, struct iovec iov[2])
{
    int count = 0;
    if (from->b_active) {
        if (to->b_end > from->b_end)
            iov[count++] = (struct iovec){app->buf + from->b_end, to->b_end - from->b_end};
        return count;
    }
    if (to->a_end > from->a_end)
        iov[count++] = (struct iovec){app->buf + from->a_end, to->a_end - from->a_end};
    if (to->b_active && to->b_end > 0)
        iov[count++] = (struct iovec){app->buf, to->b_end};
    return count;
}

/* Writes what `to` holds past `from` at offset of the tail segment
 * (log_direct.h), without a sync; adds the bytes to *bytes. */
static int write_new(struct log_appender *app, const struct log_queue *from,
                     const struct log_queue *to, uint64_t offset, size_t *bytes)
{
    struct iovec iov[2];
    int count = new_stretches(app, from, to, iov);
    size_t length = 0;
    for (int i = 0; i < count; i++)
        length += iov[i].iov_len;
    if (length == 0)
        return 0;
    if (log_direct_write(app->direct, app->log, iov, count, length, offset) != 0)
        return -1;
    *bytes += length;
    return 0;
}

/* Writes everything queued, and what was queued while that write ran,
 * then syncs once. The write of a batch takes a disk round trip, and on a
 * busy member the next delivery often lands meanwhile: written at once
 * behind the first, it shares the batch's fdatasync instead of waiting for
 * its own (and this member's persistence column moves once for both). One
 * such catch-up write at most, so the first records wait for one more
 * write, never for a stream of them; none past the segment's size, where
 * the batch seals it. On success *taken and *position are what became
 * durable. Called without the lock. */
static int write_stretches(struct log_appender *app, struct log_queue *taken, uint64_t *position,
                           size_t *bytes)
{
    struct log *log = app->log;
    struct log_segment *seg = &log->segments[log->segment_count - 1];
    struct log_queue none = {taken->a_start, taken->a_start, 0, false};
    *bytes = 0;
    if (write_new(app, &none, taken, seg->size, bytes) != 0)
        goto failed;
    sync_delay(); /* the test hooks' slow disk: records queue meanwhile */
    if (seg->size + *bytes < app->segment_bytes) {
        pthread_mutex_lock(&app->lock);
        struct log_queue now = app->queue;
        uint64_t now_position = app->submitted_position;
        pthread_mutex_unlock(&app->lock);
        if (now_position != *position) {
            if (write_new(app, taken, &now, seg->size + *bytes, bytes) != 0)
                goto failed;
            *taken = now;
            *position = now_position;
            atomic_fetch_add_explicit(&app->catch_up_writes, 1, memory_order_relaxed);
        }
    }
    if (fdatasync(log->tail_fd) != 0)
        goto failed;
    return 0;
failed:;
    char name[LOG_SEGMENT_NAME_SIZE + 1];
    log_segment_name(seg->first_position, name);
    return sp_error(SPINDLE_EIO, "log: cannot append %zu bytes to %s/%s: %s", *bytes, log->dir,
                    name, errno != 0 ? strerror(errno) : "the disk took no bytes");
}

/* One batch: everything queued, written and synced; then the durable
 * position moves. Called with the lock held; drops it across the I/O. */
static int write_batch(struct log_appender *app)
{
    struct log_queue taken = app->queue;
    uint64_t position = app->submitted_position;
    pthread_mutex_unlock(&app->lock);
    size_t bytes;
    int rc = write_stretches(app, &taken, &position, &bytes);
    struct log *log = app->log;
    bool durable = rc == 0;
    bool sealed = false;
    if (durable) {
        struct log_segment *seg = &log->segments[log->segment_count - 1];
        seg->size += bytes;
        seg->end_position = position;
        log->end_position = position;
        atomic_fetch_add_explicit(&app->syncs, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&app->durable_bytes, bytes, memory_order_relaxed);
        /* Sealed: the next batch starts a segment (it was synced above),
         * and the zeros written ahead of its records go (log_direct.h):
         * a sealed segment's file is its records. Unsynced: a crash that
         * keeps them leaves zeros a reopen takes for the end. */
        if (seg->size >= app->segment_bytes) {
            if (ftruncate(log->tail_fd, (off_t)seg->size) != 0)
                SP_LOG_WARNING("log", "%s: cannot trim a sealed segment to %" PRIu64 " bytes: %s",
                               log->dir, seg->size, strerror(errno));
            rc = log_segment_start(log);
            sealed = rc == 0;
        }
    }
    pthread_mutex_lock(&app->lock);
    /* A newly sealed segment may be covered already. */
    if (sealed && app->cover_generation > 0)
        app->compact_due = true;
    if (durable) {
        /* The room first, then the position: whoever reads the position
         * (lock-free) and then the room finds the room that came with it
         * (smc_options.deliver_progress relies on it). */
        queue_release(&app->queue, &taken);
        atomic_store_explicit(&app->durable_position, position, memory_order_release);
        pthread_cond_broadcast(&app->progress);
    }
    if (rc < 0) {
        set_error(app, rc);
        return rc;
    }
    if (app->on_durable != NULL) {
        pthread_mutex_unlock(&app->lock);
        app->on_durable(app->on_durable_ctx);
        pthread_mutex_lock(&app->lock);
    }
    return 0;
}

/* Reads segment index of the log and sums up what it holds. */
static int summarize(struct log *log, size_t index, struct log_segment_summary **out)
{
    struct log_reader reader;
    int rc = log_reader_open(&reader, log);
    struct log_segment_summary *summary =
        rc == 0 ? calloc(1, sizeof *summary + SPINDLE_MAX_SUBGROUPS * sizeof summary->last[0])
                : NULL;
    if (rc == 0 && summary == NULL)
        rc = sp_error(SPINDLE_ENOMEM, "log: out of memory to compact %s", log->dir);
    if (rc == 0)
        log_reader_seek_segment(&reader, index);
    uint32_t slot[SPINDLE_MAX_SUBGROUPS]; /* index into last[] + 1; 0: none yet */
    memset(slot, 0, sizeof slot);
    struct log_record record;
    while (rc == 0 && reader.position < log->segments[index].end_position &&
           (rc = log_reader_next(&reader, &record)) == 1) {
        rc = 0;
        if (record.type == LOG_REC_VIEW) {
            summary->has_view = true;
            summary->last_view_id = record.view.view_id;
            continue;
        }
        const struct log_message *m = &record.message;
        if (slot[m->subgroup] == 0) {
            slot[m->subgroup] = ++summary->count;
            summary->last[summary->count - 1].subgroup = m->subgroup;
        }
        /* Within a subgroup the log is in delivery order: the last is the
         * latest. */
        summary->last[slot[m->subgroup] - 1].view_id = m->view_id;
        summary->last[slot[m->subgroup] - 1].seq = m->seq;
    }
    log_reader_close(&reader);
    if (rc < 0) {
        free(summary);
        return rc;
    }
    *out = summary;
    return 0;
}

static bool covered(const struct log_segment_summary *summary, const struct log_cover *covers,
                    bool any, uint64_t least_view)
{
    if (summary->has_view && (!any || summary->last_view_id > least_view))
        return false;
    for (uint32_t i = 0; i < summary->count; i++) {
        const struct log_cover *cover = &covers[summary->last[i].subgroup];
        if (!cover->set || !log_point_before(summary->last[i].view_id, summary->last[i].seq,
                                             cover->view_id, cover->seq))
            return false;
    }
    return true;
}

/* Removes the covered sealed segments, oldest first (writer thread, no
 * lock: nothing else touches the log's segments). */
static int compact(struct log_appender *app, const struct log_cover *covers)
{
    struct log *log = app->log;
    bool any = false;
    uint64_t least_view = UINT64_MAX;
    for (uint32_t g = 0; g < SPINDLE_MAX_SUBGROUPS; g++)
        if (covers[g].set) {
            any = true;
            least_view = covers[g].view_id < least_view ? covers[g].view_id : least_view;
        }
    while (log->segment_count > 1) {
        struct log_segment *seg = &log->segments[0];
        if (seg->summary == NULL) {
            int rc = summarize(log, 0, &seg->summary);
            if (rc < 0)
                return rc;
        }
        if (!covered(seg->summary, covers, any, least_view))
            return 0;
        int rc = log_segment_remove_first(log);
        if (rc < 0)
            return rc;
        atomic_fetch_add_explicit(&app->segments_removed, 1, memory_order_relaxed);
    }
    return 0;
}

/* One compaction with the cover points as they are now. Lock held;
 * dropped across the I/O. */
static void compact_step(struct log_appender *app)
{
    struct log_cover *covers = malloc(sizeof app->covers);
    uint64_t generation = app->cover_generation;
    app->compact_due = false;
    int rc;
    if (covers == NULL) {
        rc = sp_error(SPINDLE_ENOMEM, "log: out of memory to compact %s", app->log->dir);
    } else {
        memcpy(covers, app->covers, sizeof app->covers);
        pthread_mutex_unlock(&app->lock);
        rc = compact(app, covers);
        pthread_mutex_lock(&app->lock);
        free(covers);
    }
    app->compact_error = rc < 0 ? rc : 0;
    if (rc < 0) {
        snprintf(app->compact_message, sizeof app->compact_message, "%s", spindle_errmsg());
        SP_LOG_WARNING("log", "compaction stopped, the next snapshot retries it: %s",
                       app->compact_message);
    }
    app->compacted_generation = generation;
    pthread_cond_broadcast(&app->progress);
}

/* Compaction is due and nobody holds it off. Under lock. */
static bool compact_ready(const struct log_appender *app)
{
    return app->compact_due && app->compact_holds == 0;
}

static void *writer_main(void *arg)
{
    struct log_appender *app = arg;
    pthread_mutex_lock(&app->lock);
    for (;;) {
        while (queue_empty(&app->queue) && !app->stopping && !compact_ready(app))
            pthread_cond_wait(&app->work, &app->lock);
        /* One of each at most per turn: neither starves the other. */
        if (compact_ready(app))
            compact_step(app);
        if (!queue_empty(&app->queue)) {
            if (write_batch(app) < 0)
                break;
        } else if (app->stopping && !compact_ready(app)) {
            break;
        }
    }
    pthread_mutex_unlock(&app->lock);
    return NULL;
}

/* Adds view to the known views, replacing one of the same id, else the
 * oldest when full. Under lock. */
static void note_view(struct log_appender *app, const struct log_view *view)
{
    size_t at = app->view_count;
    for (size_t i = 0; i < app->view_count; i++)
        if (app->views[i].view_id == view->view_id)
            at = i;
    if (at == KNOWN_VIEWS) {
        at = 0;
        for (size_t i = 1; i < app->view_count; i++)
            if (app->views[i].view_id < app->views[at].view_id)
                at = i;
    }
    if (at == app->view_count)
        app->view_count++;
    app->views[at] = *view;
}

void log_appender_note_view(struct log_appender *app, const struct log_view *view)
{
    pthread_mutex_lock(&app->lock);
    note_view(app, view);
    pthread_mutex_unlock(&app->lock);
}

int log_appender_find_view(struct log_appender *app, uint64_t view_id, struct log_view *view)
{
    int found = 0;
    pthread_mutex_lock(&app->lock);
    for (size_t i = 0; i < app->view_count && !found; i++)
        if (app->views[i].view_id == view_id) {
            *view = app->views[i];
            found = 1;
        }
    pthread_mutex_unlock(&app->lock);
    return found;
}

int log_appender_next_view(struct log_appender *app, uint64_t view_id, struct log_view *view)
{
    const struct log_view *next = NULL;
    pthread_mutex_lock(&app->lock);
    for (size_t i = 0; i < app->view_count; i++)
        if (app->views[i].view_id > view_id &&
            (next == NULL || app->views[i].view_id < next->view_id))
            next = &app->views[i];
    if (next != NULL)
        *view = *next;
    pthread_mutex_unlock(&app->lock);
    return next != NULL;
}

void log_appender_cover(struct log_appender *app, uint32_t subgroup, uint64_t view_id, uint64_t seq)
{
    if (subgroup >= SPINDLE_MAX_SUBGROUPS)
        return;
    pthread_mutex_lock(&app->lock);
    struct log_cover *cover = &app->covers[subgroup];
    if (!cover->set || log_point_before(cover->view_id, cover->seq, view_id, seq))
        *cover = (struct log_cover){true, view_id, seq};
    app->cover_generation++;
    app->compact_due = true;
    pthread_cond_signal(&app->work);
    pthread_mutex_unlock(&app->lock);
}

void log_appender_hold_compaction(struct log_appender *app, bool hold)
{
    pthread_mutex_lock(&app->lock);
    if (hold)
        app->compact_holds++;
    else if (app->compact_holds > 0 && --app->compact_holds == 0 && app->compact_due)
        pthread_cond_signal(&app->work);
    pthread_mutex_unlock(&app->lock);
}

/* Used by tests only (tests/log/test_log_snapshot.c), until the member's
 * statistics report it. */
// cppcheck-suppress unusedFunction
uint64_t log_appender_segments_removed(const struct log_appender *app)
{
    return atomic_load_explicit(&app->segments_removed, memory_order_relaxed);
}

static int init_sync(struct log_appender *app)
{
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        return -1;
    int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0 && pthread_cond_init(&app->progress, &attr) != 0)
        rc = -1;
    pthread_condattr_destroy(&attr);
    if (rc != 0)
        return -1;
    if (pthread_cond_init(&app->work, NULL) != 0) {
        pthread_cond_destroy(&app->progress);
        return -1;
    }
    if (pthread_mutex_init(&app->lock, NULL) != 0) {
        pthread_cond_destroy(&app->work);
        pthread_cond_destroy(&app->progress);
        return -1;
    }
    return 0;
}

static void destroy_sync(struct log_appender *app)
{
    pthread_mutex_destroy(&app->lock);
    pthread_cond_destroy(&app->work);
    pthread_cond_destroy(&app->progress);
}

int log_appender_start(struct log *log, const struct log_appender_options *options,
                       struct log_appender **out)
{
    *out = NULL;
    size_t cap =
        options != NULL && options->queue_bytes != 0 ? options->queue_bytes : DEFAULT_QUEUE_BYTES;
    if (!log->writable)
        return sp_error(SPINDLE_EINVAL, "log: %s was opened read-only: cannot append", log->dir);
    /* Two largest records: one fits even behind the waste at the end. */
    size_t least = (size_t)2 * LOG_MAX_RECORD;
    if (cap < least)
        return sp_error(SPINDLE_EINVAL,
                        "log: queue_bytes %zu is smaller than two largest records (%zu bytes)", cap,
                        least);
    if (log->segment_count == 0) {
        int rc = log_segment_start(log);
        if (rc < 0)
            return rc;
    }
    struct log_appender *app = calloc(1, sizeof *app);
    uint8_t *buf = malloc(cap);
    if (app == NULL || buf == NULL || init_sync(app) != 0) {
        free(buf);
        free(app);
        return sp_error(SPINDLE_ENOMEM, "log: out of memory for a %zu-byte queue", cap);
    }
    app->segment_bytes = options != NULL && options->segment_bytes != 0 ? options->segment_bytes
                                                                        : DEFAULT_SEGMENT_BYTES;
    int rc = log_direct_create(log, app->segment_bytes, &app->direct);
    if (rc < 0) {
        destroy_sync(app);
        free(buf);
        free(app);
        return rc;
    }
    app->log = log;
    app->buf = buf;
    app->cap = cap;
    app->submitted_position = log->end_position;
    if (options != NULL) {
        app->on_durable = options->on_durable;
        app->on_durable_ctx = options->on_durable_ctx;
    }
    atomic_init(&app->durable_position, log->end_position);
    atomic_init(&app->durable_bytes, 0);
    atomic_init(&app->syncs, 0);
    atomic_init(&app->catch_up_writes, 0);
    atomic_init(&app->segments_removed, 0);
    if (log->has_last_view)
        note_view(app, &log->last_view);
    int err = pthread_create(&app->writer, NULL, writer_main, app);
    if (err != 0) {
        destroy_sync(app);
        log_direct_destroy(app->direct);
        free(buf);
        free(app);
        return sp_error(SPINDLE_EIO, "log: cannot start the writer thread: %s", strerror(err));
    }
    *out = app;
    return 0;
}

/* Checks the batch and sizes it: 0, or the error. */
static int measure_batch(const struct log_appender *app, const struct log_record *records,
                         size_t count, size_t *total)
{
    *total = 0;
    for (size_t i = 0; i < count; i++) {
        int rc = log_record_check(&records[i]);
        if (rc < 0)
            return rc;
        *total += log_record_size(&records[i]);
    }
    if (*total > app->cap)
        return sp_error(SPINDLE_EMSGSIZE,
                        "log: a batch of %zu records, %zu bytes, exceeds the %zu-byte log queue "
                        "(queue_bytes): submit it in parts",
                        count, *total, app->cap);
    return 0;
}

int log_appender_submit(struct log_appender *app, const struct log_record *records, size_t count,
                        uint64_t *end_position)
{
    size_t total;
    int rc = measure_batch(app, records, count, &total);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&app->lock);
    if (app->error < 0)
        rc = report_error(app);
    else if (app->stopping)
        rc = sp_error(SPINDLE_ESHUTDOWN, "log: the appender of %s is stopping", app->log->dir);
    /* All or nothing: try the whole batch on a copy of the queue first. */
    struct log_queue trial = app->queue;
    size_t offset;
    for (size_t i = 0; rc == 0 && i < count; i++)
        if (!queue_reserve(&trial, app->cap, log_record_size(&records[i]), &offset))
            rc = sp_error(SPINDLE_EAGAIN,
                          "log: the queue of %s is full (%zu bytes awaiting fdatasync)",
                          app->log->dir, app->cap);
    for (size_t i = 0; rc == 0 && i < count; i++) {
        /* The member of the union the type names, not the whole record: a
         * message's copy is 50 bytes, a view's over 2 KiB. */
        struct log_record record;
        record.type = records[i].type;
        record.position = app->submitted_position++;
        if (record.type == LOG_REC_VIEW) {
            record.view = records[i].view;
            note_view(app, &record.view);
        } else {
            record.message = records[i].message;
        }
        size_t size = log_record_size(&record);
        queue_reserve(&app->queue, app->cap, size, &offset);
        log_record_encode(&record, app->buf + offset, size);
    }
    if (rc == 0 && count > 0)
        pthread_cond_signal(&app->work);
    if (rc == 0 && end_position != NULL)
        *end_position = app->submitted_position;
    pthread_mutex_unlock(&app->lock);
    return rc;
}

size_t log_appender_room(struct log_appender *app)
{
    pthread_mutex_lock(&app->lock);
    const struct log_queue *q = &app->queue;
    size_t room = q->b_active ? q->a_start - q->b_end : (app->cap - q->a_end) + q->a_start;
    pthread_mutex_unlock(&app->lock);
    return room;
}

uint64_t log_appender_end(struct log_appender *app)
{
    pthread_mutex_lock(&app->lock);
    uint64_t end = app->submitted_position;
    pthread_mutex_unlock(&app->lock);
    return end;
}

uint64_t log_appender_durable(const struct log_appender *app)
{
    return atomic_load_explicit(&app->durable_position, memory_order_acquire);
}

uint64_t log_appender_syncs(const struct log_appender *app)
{
    return atomic_load_explicit(&app->syncs, memory_order_relaxed);
}

/* Used by tests only (tests/log/test_log_append.c), until the member's
 * statistics report it. */
// cppcheck-suppress unusedFunction
uint64_t log_appender_catch_up_writes(const struct log_appender *app)
{
    return atomic_load_explicit(&app->catch_up_writes, memory_order_relaxed);
}

uint64_t log_appender_durable_bytes(const struct log_appender *app)
{
    return atomic_load_explicit(&app->durable_bytes, memory_order_relaxed);
}

/* The CLOCK_MONOTONIC time timeout_ms from now (the conditions wait on
 * that clock); now itself for a negative timeout, which callers
 * do not wait with. */
static struct timespec deadline_after(int timeout_ms)
{
    return sp_deadline_in(CLOCK_MONOTONIC, timeout_ms >= 0 ? timeout_ms : 0);
}

int log_appender_wait(struct log_appender *app, uint64_t position, int timeout_ms)
{
    struct timespec deadline = deadline_after(timeout_ms);
    int rc = 0;
    pthread_mutex_lock(&app->lock);
    while (log_appender_durable(app) < position && app->error == 0 && rc == 0) {
        if (timeout_ms < 0)
            pthread_cond_wait(&app->progress, &app->lock);
        else if (pthread_cond_timedwait(&app->progress, &app->lock, &deadline) == ETIMEDOUT)
            rc = sp_error(SPINDLE_ETIMEDOUT,
                          "log: position %llu of %s not durable within %d ms (durable: %llu)",
                          (unsigned long long)position, app->log->dir, timeout_ms,
                          (unsigned long long)log_appender_durable(app));
    }
    if (rc == 0 && log_appender_durable(app) < position)
        rc = report_error(app);
    pthread_mutex_unlock(&app->lock);
    return rc;
}

/* Used by tests only (tests/log/test_log_compaction.c): a member never
 * waits for compaction. */
// cppcheck-suppress unusedFunction
int log_appender_compact_wait(struct log_appender *app, int timeout_ms)
{
    struct timespec deadline = deadline_after(timeout_ms);
    int rc = 0;
    pthread_mutex_lock(&app->lock);
    uint64_t wanted = app->cover_generation;
    while (app->compacted_generation < wanted && app->error == 0 && rc == 0) {
        if (timeout_ms < 0)
            pthread_cond_wait(&app->progress, &app->lock);
        else if (pthread_cond_timedwait(&app->progress, &app->lock, &deadline) == ETIMEDOUT)
            rc = sp_error(SPINDLE_ETIMEDOUT, "log: compaction of %s not done within %d ms",
                          app->log->dir, timeout_ms);
    }
    if (rc == 0 && app->compacted_generation < wanted)
        rc = report_error(app);
    else if (rc == 0 && app->compact_error < 0)
        rc = sp_error(app->compact_error, "%s", app->compact_message);
    pthread_mutex_unlock(&app->lock);
    return rc;
}

int log_appender_stop(struct log_appender *app)
{
    if (app == NULL)
        return 0;
    pthread_mutex_lock(&app->lock);
    app->stopping = true;
    pthread_cond_signal(&app->work);
    pthread_mutex_unlock(&app->lock);
    pthread_join(app->writer, NULL);
    int rc = app->error < 0 ? report_error(app) : 0;
    destroy_sync(app);
    log_direct_destroy(app->direct);
    free(app->buf);
    free(app);
    return rc;
}
