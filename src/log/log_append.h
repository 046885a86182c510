/*
 * The batched appender of a log (docs/LOGS.md "Appending"): callers submit
 * batches of records; a writer thread of its own writes everything queued
 * (past the page cache where it can, log/log_direct.h), and once more what
 * was queued during that write, and makes it durable with one fdatasync,
 * then publishes how far the log is durable.
 *
 * Records are copied into a bounded queue (queue_bytes) when submitted, so
 * the caller's buffers (ring slots) are free when submit returns. A batch
 * that does not fit is refused whole with SPINDLE_EAGAIN rather than
 * waiting: the submitter (the predicate thread, eventually) never blocks on
 * the disk and feels back-pressure instead, while the queue never grows.
 *
 * Threads: submit, wait and the readers may be called from any thread;
 * submit holds the queue's lock while it copies its batch, the writer only
 * to take or release a stretch of the queue, never across I/O. The
 * durable position and the fdatasync count are C11 atomics, read without
 * locks. Invariants: positions are assigned in submission order, durable
 * <= submitted, both only grow; a record is durable only when every record
 * before it is.
 */
#ifndef SP_LOG_LOG_APPEND_H
#define SP_LOG_LOG_APPEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log/log.h"

struct log_appender;

struct log_appender_options {
    size_t queue_bytes;     /* records submitted, not yet durable; 0: 8 MiB */
    uint64_t segment_bytes; /* a segment is sealed once it holds this much; 0: 64 MiB */
    /* Called on the writer thread, without locks, each time the durable
     * position moved, after the queue room that came with it was freed
     * (may be NULL). */
    void (*on_durable)(void *ctx);
    void *on_durable_ctx;
};

/*
 * Starts appending to log (opened with LOG_OPEN_WRITE; the appender owns it
 * until log_appender_stop) on a writer thread, creating the first segment
 * of an empty log. SPINDLE_EINVAL for a read-only log or a queue smaller
 * than two largest records (2 * LOG_MAX_RECORD: by the rule of
 * log_appender_room one then always fits an empty queue), SPINDLE_EIO,
 * SPINDLE_ENOMEM.
 */
int log_appender_start(struct log *log, const struct log_appender_options *options,
                       struct log_appender **out);

/*
 * Queues count records as one batch, assigning their positions (the
 * records' own position fields are ignored); *end_position (may be NULL)
 * receives the position after the batch, which log_appender_wait takes.
 * SPINDLE_EAGAIN when the queue has no room for the whole batch now
 * (nothing queued; retry once the durable position moved), SPINDLE_EMSGSIZE
 * when the batch is larger than the whole queue, SPINDLE_EINVAL for a
 * record the format cannot hold, the writer's error (naming the file) once
 * a write or fdatasync failed, SPINDLE_ESHUTDOWN while stopping.
 */
int log_appender_submit(struct log_appender *app, const struct log_record *records, size_t count,
                        uint64_t *end_position);

/*
 * Free bytes in the queue now. A batch of records fits when its bytes
 * (log_record_size) and those of its largest record together are no more
 * than this: at most one record's worth is wasted where the queue wraps.
 * Only submits make it smaller, so a single submitter may rely on it.
 */
size_t log_appender_room(struct log_appender *app);

/* One past the last record submitted (the position the next one gets):
 * once log_appender_durable reaches it, everything submitted so far is
 * durable. Any thread. */
uint64_t log_appender_end(struct log_appender *app);

/* One past the last durable record. Lock-free; any thread. */
uint64_t log_appender_durable(const struct log_appender *app);

/* fdatasync calls made for records so far (segment creation not counted). */
uint64_t log_appender_syncs(const struct log_appender *app);

/* Batches whose sync also took records queued while the batch was being
 * written (a second write before the one fdatasync). */
uint64_t log_appender_catch_up_writes(const struct log_appender *app);

/* Bytes of records made durable so far. */
uint64_t log_appender_durable_bytes(const struct log_appender *app);

/*
 * Waits until every record before position is durable. SPINDLE_ETIMEDOUT
 * after timeout_ms (< 0: no limit), the writer's error once it failed.
 */
int log_appender_wait(struct log_appender *app, uint64_t position, int timeout_ms);

/*
 * Writes and syncs what is queued, stops the writer and frees the
 * appender; the log is the caller's again. Returns the writer's error, if
 * it had one. Safe on NULL.
 */
int log_appender_stop(struct log_appender *app);

/*
 * Compaction (docs/LOGS.md "Snapshots and compaction"). The writer thread
 * removes sealed segments, oldest first, once everything in them is
 * covered: each message of a subgroup whose cover point it precedes, each
 * view record of a view no later than every cover point's view. A
 * subgroup without a cover point covers none of its messages. The tail is
 * never removed, and the writer does it between batches, so it never races
 * with a write.
 */

/*
 * Covers subgroup's messages before (view_id, seq) from now on (a point
 * before the current one is ignored) and has the writer look for segments
 * to remove. Any thread.
 */
void log_appender_cover(struct log_appender *app, uint32_t subgroup, uint64_t view_id,
                        uint64_t seq);

/*
 * Waits until the writer has removed what the cover points given so far
 * allow. SPINDLE_ETIMEDOUT after timeout_ms (< 0: no limit), or the error
 * of that compaction (SPINDLE_EIO naming the file), which stopped it but
 * not the appender: the next cover point tries again.
 */
int log_appender_compact_wait(struct log_appender *app, int timeout_ms);

/*
 * Holds compaction off (hold true) until as many calls with hold false:
 * no segment is removed meanwhile, so a reader of the log's files (a
 * joiner's catch-up, view_log_catchup.c) never sees one vanish. Cover
 * points given meanwhile take effect at the release. Any thread.
 */
void log_appender_hold_compaction(struct log_appender *app, bool hold);

/* Segments removed by compaction so far. Any thread. */
uint64_t log_appender_segments_removed(const struct log_appender *app);

/*
 * The views the appender knows: the last one found in the log at start and
 * the last ones submitted since (a few), or noted (log_appender_note_view).
 * 1 with *view when view_id is one of them, else 0. Any thread.
 */
int log_appender_find_view(struct log_appender *app, uint64_t view_id, struct log_view *view);

/* The view with the smallest id above view_id it knows: 1 and *view, or 0. */
int log_appender_next_view(struct log_appender *app, uint64_t view_id, struct log_view *view);

/* Adds a view record read elsewhere (a snapshot's) to those it knows. */
void log_appender_note_view(struct log_appender *app, const struct log_view *view);

/* Test hook: every fdatasync of this process's appenders is preceded by a
 * pause of ms milliseconds (a slow disk); 0, the default, turns it off. */
void log_test_delay_syncs(unsigned ms);
/* Test hook: while held, every fdatasync of this process's appenders waits
 * (a disk that takes nothing) until log_test_hold_syncs(false); the wait
 * comes after the batch's first write, before the records queued meanwhile
 * are taken (its catch-up write). */
void log_test_hold_syncs(bool hold);
/* Test hook: waits until `writers` writers wait at the held sync. 0, or
 * SPINDLE_ETIMEDOUT after timeout_ms. */
int log_test_wait_held_syncs(unsigned writers, int timeout_ms);

#endif
