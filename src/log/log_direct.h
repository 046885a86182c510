/*
 * How the appender's writer puts a batch on the tail segment (docs/LOGS.md
 * "Appending"): past the page cache where the filesystem allows it.
 *
 * A buffered write has the kernel copy every byte into the page cache
 * before fdatasync sends it to the disk; for a log written once and synced
 * at once that copy buys nothing, and on a virtual disk it took 44% of a
 * logged run's CPU (docs/PERFORMANCE.md "Logged delivery"). So the batch is
 * copied into an aligned staging buffer (LOG_DIRECT_STAGING bytes, reused)
 * and written with O_DIRECT in whole blocks, the last one padded with
 * zeros. The next batch rewrites that partial block, with the same bytes
 * first, as the start of its first direct write: the bytes are carried
 * over in the staging buffer, or read back from the file when the carry is
 * not theirs (a new segment, the first batch after opening).
 *
 * The file grows ahead of its records, LOG_DIRECT_AHEAD bytes of zeros at
 * a time (written, not a hole: an allocated block changes no metadata when
 * it is overwritten). A batch then rewrites blocks the file has, so
 * its fdatasync has neither a new length nor an allocation to write: one
 * data write and the disk's cache flush, where writing the partial block
 * through the page cache and growing the file took two more writes (the
 * block and the inode) per batch. Zeros past the last record are the end
 * of the segment to a reopen (log_store.c), never a torn tail.
 *
 * O_DIRECT is probed, not assumed: where the filesystem refuses it (at open
 * or at the first write: an alignment the device does not take) the
 * writer says so once, at info level, and writes buffered from then on,
 * with pwritev straight from the queue as before.
 *
 * Nothing here syncs: the caller's fdatasync of log->tail_fd makes both
 * kinds of write durable (one inode). Threads: the writer thread's alone.
 */
#ifndef SP_LOG_LOG_DIRECT_H
#define SP_LOG_LOG_DIRECT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "log/log.h"

/* The alignment of direct writes: a page covers the logical and physical
 * blocks of common disks and the filesystem's block. */
#define LOG_DIRECT_BLOCK 4096u
/* The staging buffer: a batch larger than this takes several direct
 * writes, which cost no more on the disks measured (1 MiB against 3 MiB). */
#define LOG_DIRECT_STAGING ((size_t)1 << 20)
/* Zeros kept ahead of the records: a file grows once per this much log. */
#define LOG_DIRECT_AHEAD ((uint64_t)1 << 20)
/* The zero buffer the space ahead is written from. */
#define LOG_DIRECT_ZEROS ((size_t)64 << 10)

struct log_direct;

/* A writer for the tail segments of log (writable), which the appender
 * seals once they hold segment_bytes (no zeros are written past that).
 * SPINDLE_ENOMEM. */
int log_direct_create(const struct log *log, uint64_t segment_bytes, struct log_direct **out);

/* Closes its file and frees it. Safe on NULL. */
void log_direct_destroy(struct log_direct *direct);

/*
 * Writes bytes, the count stretches of iov in order (iov is consumed), at
 * offset of log's tail segment, whose records end there (zeros may follow).
 * 0, or -1 with errno (0 when the disk took no bytes); the file may then
 * hold part of the batch, a torn tail for the next open to cut.
 */
int log_direct_write(struct log_direct *direct, struct log *log, struct iovec *iov, int count,
                     size_t bytes, uint64_t offset);

#endif
