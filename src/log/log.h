/*
 * A member's log on disk (docs/LOGS.md): a directory of segment files
 * holding checksummed records, opened, repaired and read here; written by
 * the appender (log/log_append.h).
 *
 * Opening checks the directory (util/private_dir.h: the caller's alone, no
 * symbolic links) and every segment, record by record, as untrusted input.
 * Records are numbered by position from the log's first; positions run on
 * without a gap from one segment to the next. Only the last segment can end
 * in a torn or corrupt tail (the appender seals a segment with fdatasync
 * before it starts the next): opened for writing, that tail is cut at the
 * last whole record (ftruncate, or the segment removed when its header is
 * torn) and reported; a bad record anywhere else is refused.
 *
 * Threads: a struct log is used by one thread at a time (the appender's
 * writer thread once an appender owns it); readers of one log may run on
 * several threads, each with its own struct log_reader.
 */
#ifndef SP_LOG_LOG_H
#define SP_LOG_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log/log_format.h"

struct log_segment_summary;

struct log_segment {
    uint64_t first_position;
    uint64_t end_position; /* one past its last whole record */
    uint64_t size;         /* bytes: the header and its whole records */
    /* What a sealed segment holds, once compaction looked (log_append.c);
     * NULL before. Freed with the log. */
    struct log_segment_summary *summary;
};

struct log {
    char *dir; /* the path, for messages */
    int dir_fd;
    bool writable;
    struct log_segment *segments; /* in position order */
    size_t segment_count;
    size_t segment_cap;
    uint64_t first_position;   /* of the first record kept */
    uint64_t end_position;     /* one past the last whole record */
    int tail_fd;               /* writable: the last segment, open for writing; else -1 */
    bool has_last_view;        /* a view record was found at open: */
    struct log_view last_view; /* the last one */
};

/* What opening found past the last whole record. */
struct log_open_report {
    uint64_t tail_bytes;                          /* torn or corrupt bytes after it, 0 when whole */
    uint64_t tail_offset;                         /* where they start in tail_segment */
    char tail_segment[LOG_SEGMENT_NAME_SIZE + 1]; /* the segment's file name, "" when whole */
    bool segment_removed;                         /* its header was torn: the file went */
    bool cut;                                     /* the tail was cut (a writable open) */
    char why[256];                                /* what was wrong at tail_offset */
};

/* Open for writing: cut a torn tail, keep the last segment open for the
 * appender. */
#define LOG_OPEN_WRITE 1u
/* With LOG_OPEN_WRITE: create the directory (mode 0700) when missing. */
#define LOG_OPEN_CREATE 2u

/*
 * Opens the log in dir (flags: 0 to read, or LOG_OPEN_WRITE, with
 * LOG_OPEN_CREATE or not). report (may be
 * NULL) receives what was found past the last whole record; a read-only
 * open leaves it in place. SPINDLE_EPERM for a directory or file that is
 * not the caller's alone or is a symbolic link; SPINDLE_ENOENT for a
 * missing directory (unless LOG_OPEN_CREATE); SPINDLE_EPROTO naming the segment and
 * offset for corruption that is not a torn tail (a bad record in a sealed
 * segment, a gap between segments); SPINDLE_EIO; SPINDLE_ENOMEM.
 */
int log_open(const char *dir, unsigned flags, struct log **out, struct log_open_report *report);

/* Closes the log. Safe on NULL. */
void log_close(struct log *log);

/*
 * Creates a new last segment starting at log->end_position (exclusively,
 * mode 0600, header written and made durable with the directory entry) and
 * makes it the tail. Writable logs only; the caller made the previous tail
 * durable. SPINDLE_EIO naming the file.
 */
int log_segment_start(struct log *log);

/* Reads the records of a log in order. */
struct log_reader {
    const struct log *log;
    size_t segment; /* index into log->segments */
    int fd;         /* that segment, or -1 */
    uint64_t offset;
    uint64_t position; /* of the next record */
    uint8_t *buf;      /* LOG_MAX_RECORD bytes: the current record */
};

/* Starts at the log's first record. SPINDLE_ENOMEM. */
int log_reader_open(struct log_reader *reader, const struct log *log);

/*
 * The next record: 1 (a message's payload stays valid until the next call),
 * 0 at the end of the whole records found at open, SPINDLE_EPROTO or
 * SPINDLE_EIO naming the segment and offset when a file changed under it.
 */
int log_reader_next(struct log_reader *reader, struct log_record *record);

void log_reader_close(struct log_reader *reader);

/* Starts the reader at the first record of segment index instead. */
void log_reader_seek_segment(struct log_reader *reader, size_t index);

/*
 * Removes the first segment of a writable log holding more than one
 * (compaction: the caller made sure nothing it holds is needed): unlinks
 * its file, syncs the directory, and the log then starts at the next
 * segment. Oldest first, one directory sync each, so a crash at any point
 * leaves a log without a gap. SPINDLE_EINVAL when it is the last segment,
 * SPINDLE_EIO naming the file.
 */
int log_segment_remove_first(struct log *log);

/*
 * Removes every segment and snapshot of the log in dir (which no one has
 * open for writing), the last segment first and the directory synced
 * after each, so that a crash part way leaves a shorter log without a gap
 * (and its snapshots), never snapshots without the log before them. A
 * missing directory is no error. log_open's errors, SPINDLE_EIO naming the
 * file.
 */
int log_wipe(const char *dir);

/* Reads length bytes at offset of fd, through short reads and EINTR: 0,
 * or -1 with errno (0 for a file that ends first). For the log's readers
 * (segments, snapshots). */
int log_pread_all(int fd, void *buf, size_t length, uint64_t offset);

#endif
