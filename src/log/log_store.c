/* Opening, repairing and reading a log directory (log/log.h). */
#include "log/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log/log_snapshot.h"
#include "util/error.h"
#include "util/private_dir.h"

int log_pread_all(int fd, void *buf, size_t length, uint64_t offset)
{
    for (size_t done = 0; done < length;) {
        ssize_t got = pread(fd, (uint8_t *)buf + done, length - done, (off_t)(offset + done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (got == 0)
                errno = 0;
            return -1;
        }
        done += (size_t)got;
    }
    return 0;
}

/*
 * The record at offset of a file whose first limit bytes count: 1 with
 * *record and *size, 0 when the bytes end inside it (torn), SPINDLE_EPROTO
 * from the decoder, SPINDLE_EIO. The header gives the length, which the
 * decoder checks before the body is read.
 */
static int read_record(int fd, uint64_t offset, uint64_t limit, uint8_t *buf,
                       struct log_record *record, size_t *size)
{
    size_t want = LOG_RECORD_HEADER_SIZE;
    for (int pass = 0; pass < 2; pass++) {
        if (want > limit - offset)
            return 0;
        if (log_pread_all(fd, buf, want, offset) != 0)
            return sp_error(SPINDLE_EIO, "cannot read %zu bytes: %s", want,
                            errno != 0 ? strerror(errno) : "the file shrank");
        int rc = log_record_decode(buf, want, record, size);
        if (rc != 0)
            return rc;
        want = *size;
    }
    return 0;
}

static int grow_segments(struct log *log)
{
    if (log->segment_count < log->segment_cap)
        return 0;
    size_t cap = log->segment_cap == 0 ? 8 : log->segment_cap * 2;
    struct log_segment *grown = realloc(log->segments, cap * sizeof *grown);
    if (grown == NULL)
        return sp_error(SPINDLE_ENOMEM, "log: out of memory for %zu segments", cap);
    log->segments = grown;
    log->segment_cap = cap;
    return 0;
}

static int compare_positions(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The first positions of the segment files in the directory, sorted. */
static int list_segments(const struct log *log, uint64_t **firsts, size_t *count)
{
    *firsts = NULL;
    *count = 0;
    int fd = dup(log->dir_fd);
    DIR *listing = fd >= 0 ? fdopendir(fd) : NULL;
    if (listing == NULL) {
        if (fd >= 0)
            close(fd);
        return sp_error(SPINDLE_EIO, "log: cannot list %s: %s", log->dir, strerror(errno));
    }
    rewinddir(listing);
    size_t cap = 0;
    int rc = 0;
    for (struct dirent *entry; rc == 0 && (entry = readdir(listing)) != NULL;) {
        uint64_t first;
        if (!log_segment_name_parse(entry->d_name, &first))
            continue;
        if (*count == cap) {
            cap = cap == 0 ? 16 : cap * 2;
            uint64_t *grown = realloc(*firsts, cap * sizeof *grown);
            if (grown == NULL) {
                rc = sp_error(SPINDLE_ENOMEM, "log: out of memory listing %s", log->dir);
                break;
            }
            *firsts = grown;
        }
        (*firsts)[(*count)++] = first;
    }
    closedir(listing);
    if (rc == 0 && *count > 0)
        qsort(*firsts, *count, sizeof **firsts, compare_positions);
    return rc;
}

/* 1 when the file holds only zero bytes from offset to its end (the space
 * the appender writes ahead of its records, log_direct.h), 0 when not,
 * SPINDLE_EIO. */
static int zeros_to_end(int fd, uint64_t offset, uint64_t file_size)
{
    uint8_t chunk[4096];
    while (offset < file_size) {
        size_t part =
            file_size - offset < sizeof chunk ? (size_t)(file_size - offset) : sizeof chunk;
        if (log_pread_all(fd, chunk, part, offset) != 0)
            return SPINDLE_EIO;
        for (size_t i = 0; i < part; i++)
            if (chunk[i] != 0)
                return 0;
        offset += part;
    }
    return 1;
}

/*
 * Checks one segment (fd, its name's first position) record by record.
 * 1 when every byte belongs to a whole record, or zeros follow the last
 * one (the space written ahead, not a tail to cut); 0 when it stops at a bad or
 * torn tail (seg->size is where, why says what; seg->size 0: the header);
 * SPINDLE_EPROTO for a header naming another position; SPINDLE_EIO.
 */
static int scan_segment(struct log *log, const char *name, int fd, uint8_t *buf,
                        struct log_segment *seg, char *why, size_t why_size)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return sp_error(SPINDLE_EIO, "log: cannot examine %s/%s: %s", log->dir, name,
                        strerror(errno));
    uint64_t file_size = (uint64_t)st.st_size;
    uint64_t named_first = seg->first_position;
    seg->end_position = named_first;
    seg->size = 0;
    uint8_t header[LOG_SEGMENT_HEADER_SIZE];
    size_t have = file_size < sizeof header ? (size_t)file_size : sizeof header;
    if (log_pread_all(fd, header, have, 0) != 0)
        return sp_error(SPINDLE_EIO, "log: cannot read %s/%s: %s", log->dir, name, strerror(errno));
    uint64_t first;
    if (log_segment_header_decode(header, have, &first) != 0) {
        snprintf(why, why_size, "%s", spindle_errmsg());
        return 0;
    }
    if (first != named_first)
        return sp_error(SPINDLE_EPROTO,
                        "log: %s/%s: its header says it starts at position %" PRIu64
                        ", its name at %" PRIu64 ": refusing a renamed segment",
                        log->dir, name, first, named_first);
    seg->size = LOG_SEGMENT_HEADER_SIZE;
    while (seg->size < file_size) {
        struct log_record record;
        size_t size;
        int rc = read_record(fd, seg->size, file_size, buf, &record, &size);
        if (rc == 0 || rc == SPINDLE_EPROTO) {
            /* No record is all zeros (its type is never 0), so zeros to
             * the end are the end; anything else after the last record is
             * a torn or corrupt tail. */
            int zeros = zeros_to_end(fd, seg->size, file_size);
            if (zeros < 0)
                return sp_error(SPINDLE_EIO, "log: cannot read %s/%s at offset %" PRIu64 ": %s",
                                log->dir, name, seg->size, strerror(errno));
            if (zeros == 1)
                return 1;
        }
        if (rc == 0) {
            snprintf(why, why_size, "the file ends inside a record (%" PRIu64 " bytes left)",
                     file_size - seg->size);
            return 0;
        }
        if (rc == SPINDLE_EPROTO) {
            snprintf(why, why_size, "%s", spindle_errmsg());
            return 0;
        }
        if (rc < 0)
            return sp_error(rc, "log: %s/%s at offset %" PRIu64 ": %s", log->dir, name, seg->size,
                            spindle_errmsg());
        if (record.position != seg->end_position) {
            snprintf(why, why_size, "record of position %" PRIu64 " where %" PRIu64 " was due",
                     record.position, seg->end_position);
            return 0;
        }
        if (record.type == LOG_REC_VIEW) {
            log->has_last_view = true;
            log->last_view = record.view;
        }
        seg->size += size;
        seg->end_position++;
    }
    return 1;
}

/* Cuts the last segment's bad tail (writable logs), or removes the
 * segment when its header is bad. */
static int cut_tail(struct log *log, const char *name, int fd, const struct log_segment *seg)
{
    if (seg->size == 0) {
        if (unlinkat(log->dir_fd, name, 0) != 0 || fsync(log->dir_fd) != 0)
            return sp_error(SPINDLE_EIO, "log: cannot remove torn segment %s/%s: %s", log->dir,
                            name, strerror(errno));
        return 0;
    }
    if (ftruncate(fd, (off_t)seg->size) != 0 || fdatasync(fd) != 0)
        return sp_error(SPINDLE_EIO, "log: cannot cut %s/%s at %" PRIu64 ": %s", log->dir, name,
                        seg->size, strerror(errno));
    return 0;
}

/* Opens, checks and (writable, last segment) repairs the segment starting
 * at first; the last one stays open as the tail when writable. */
static int open_segment(struct log *log, uint64_t first, bool last, uint8_t *buf,
                        struct log_open_report *report)
{
    char name[LOG_SEGMENT_NAME_SIZE + 1];
    log_segment_name(first, name);
    int fd;
    struct stat st;
    int rc = sp_private_file_open(log->dir_fd, log->dir, name, log->writable ? O_RDWR : O_RDONLY,
                                  "log", &fd, &st);
    if (rc == 0)
        return sp_error(SPINDLE_EIO, "log: %s/%s vanished while the log was opened", log->dir,
                        name);
    if (rc < 0)
        return rc;
    struct log_segment seg = {.first_position = first};
    char why[sizeof report->why];
    rc = scan_segment(log, name, fd, buf, &seg, why, sizeof why);
    if (rc >= 0 && log->segment_count > 0 && first != log->end_position)
        rc = sp_error(SPINDLE_EPROTO,
                      "log: %s/%s starts at position %" PRIu64 " but the segment before it "
                      "ends at %" PRIu64 ": records are missing",
                      log->dir, name, first, log->end_position);
    if (rc == 0 && !last)
        rc = sp_error(SPINDLE_EPROTO,
                      "log: %s/%s is corrupt at offset %" PRIu64 " (%s) and later segments "
                      "follow it: not a torn tail, refusing to cut",
                      log->dir, name, seg.size, why);
    if (rc == 0) {
        report->tail_bytes = (uint64_t)st.st_size - seg.size;
        report->tail_offset = seg.size;
        snprintf(report->tail_segment, sizeof report->tail_segment, "%s", name);
        snprintf(report->why, sizeof report->why, "%s", why);
        report->segment_removed = log->writable && seg.size == 0;
        if (log->writable) {
            rc = cut_tail(log, name, fd, &seg);
            report->cut = rc == 0;
        }
    }
    if (rc >= 0 && !report->segment_removed) {
        rc = grow_segments(log);
        if (rc == 0) {
            log->segments[log->segment_count++] = seg;
            log->end_position = seg.end_position;
        }
    } else if (rc >= 0) {
        log->end_position = first;
    }
    if (rc >= 0 && last && log->writable && !report->segment_removed)
        log->tail_fd = fd;
    else
        close(fd);
    return rc < 0 ? rc : 0;
}

int log_open(const char *dir, unsigned flags, struct log **out, struct log_open_report *report)
{
    *out = NULL;
    struct log_open_report ignored;
    if (report == NULL)
        report = &ignored;
    memset(report, 0, sizeof *report);
    struct log *log = calloc(1, sizeof *log);
    if (log == NULL)
        return sp_error(SPINDLE_ENOMEM, "log: out of memory");
    log->dir_fd = -1;
    log->tail_fd = -1;
    log->writable = (flags & LOG_OPEN_WRITE) != 0;
    log->dir = strdup(dir);
    if (log->dir == NULL) {
        free(log);
        return sp_error(SPINDLE_ENOMEM, "log: out of memory");
    }
    bool create = log->writable && (flags & LOG_OPEN_CREATE) != 0;
    int rc = sp_private_dir_open(dir, create, "log: log directory",
                                 "use a directory only its owner can write", &log->dir_fd);
    uint64_t *firsts = NULL;
    size_t count = 0;
    if (rc == 0)
        rc = list_segments(log, &firsts, &count);
    uint8_t *buf = rc == 0 && count > 0 ? malloc(LOG_MAX_RECORD) : NULL;
    if (rc == 0 && count > 0 && buf == NULL)
        rc = sp_error(SPINDLE_ENOMEM, "log: out of memory for a %u-byte record buffer",
                      (unsigned)LOG_MAX_RECORD);
    if (rc == 0 && count > 0)
        log->end_position = firsts[0];
    for (size_t i = 0; rc == 0 && i < count; i++)
        rc = open_segment(log, firsts[i], i + 1 == count, buf, report);
    free(buf);
    free(firsts);
    if (rc < 0) {
        log_close(log);
        return rc;
    }
    log->first_position =
        log->segment_count > 0 ? log->segments[0].first_position : log->end_position;
    *out = log;
    return 0;
}

void log_close(struct log *log)
{
    if (log == NULL)
        return;
    if (log->tail_fd >= 0)
        close(log->tail_fd);
    if (log->dir_fd >= 0)
        close(log->dir_fd);
    for (size_t i = 0; i < log->segment_count; i++)
        free(log->segments[i].summary);
    free(log->segments);
    free(log->dir);
    free(log);
}

int log_segment_remove_first(struct log *log)
{
    if (!log->writable || log->segment_count < 2)
        return sp_error(SPINDLE_EINVAL, "log: %s: only a sealed segment of a writable log can go",
                        log->dir);
    char name[LOG_SEGMENT_NAME_SIZE + 1];
    log_segment_name(log->segments[0].first_position, name);
    /* The directory is synced after each file: a crash between two
     * removals must not bring back an older file after a newer one went
     * (a gap, which log_open refuses). */
    if (unlinkat(log->dir_fd, name, 0) != 0 || fsync(log->dir_fd) != 0)
        return sp_error(SPINDLE_EIO, "log: cannot remove segment %s/%s: %s", log->dir, name,
                        strerror(errno));
    free(log->segments[0].summary);
    memmove(&log->segments[0], &log->segments[1],
            (log->segment_count - 1) * sizeof log->segments[0]);
    log->segment_count--;
    log->first_position = log->segments[0].first_position;
    return 0;
}

int log_wipe(const char *dir)
{
    struct log *log = NULL;
    int rc = log_open(dir, LOG_OPEN_WRITE, &log, NULL);
    if (rc == SPINDLE_ENOENT)
        return 0;
    if (rc < 0)
        return rc;
    /* The last segment first, the directory synced after each: a crash
     * part way leaves a shorter log without a gap. */
    while (rc == 0 && log->segment_count > 0) {
        char name[LOG_SEGMENT_NAME_SIZE + 1];
        log_segment_name(log->segments[log->segment_count - 1].first_position, name);
        if (log->segment_count == 1 && log->tail_fd >= 0) {
            close(log->tail_fd);
            log->tail_fd = -1;
        }
        if (unlinkat(log->dir_fd, name, 0) != 0 || fsync(log->dir_fd) != 0)
            rc = sp_error(SPINDLE_EIO, "log: cannot remove segment %s/%s: %s", log->dir, name,
                          strerror(errno));
        else
            log->segment_count--;
    }
    /* Then the snapshots, whose log went first. */
    struct log_snapshot_file *files = NULL;
    size_t count = 0;
    if (rc == 0)
        rc = log_snapshot_list(log->dir_fd, log->dir, true, &files, &count);
    for (size_t i = 0; rc == 0 && i < count; i++)
        if (i == 0 || files[i].snap.subgroup != files[i - 1].snap.subgroup)
            rc = log_snapshot_prune(log->dir_fd, log->dir, files[i].snap.subgroup, NULL, 0);
    free(files);
    log_close(log);
    return rc;
}

int log_segment_start(struct log *log)
{
    char name[LOG_SEGMENT_NAME_SIZE + 1];
    log_segment_name(log->end_position, name);
    int rc = grow_segments(log);
    if (rc < 0)
        return rc;
    int fd = openat(log->dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return sp_error(SPINDLE_EIO, "log: cannot create segment %s/%s: %s", log->dir, name,
                        strerror(errno));
    uint8_t header[LOG_SEGMENT_HEADER_SIZE];
    log_segment_header_encode(log->end_position, header);
    /* fchmod: 0600 whatever the umask left of it. The directory entry is
     * made durable too, or a crash could lose the whole segment. */
    if (fchmod(fd, 0600) != 0 || pwrite(fd, header, sizeof header, 0) != (ssize_t)sizeof header ||
        fdatasync(fd) != 0 || fsync(log->dir_fd) != 0) {
        int err = errno;
        close(fd);
        unlinkat(log->dir_fd, name, 0);
        return sp_error(SPINDLE_EIO, "log: cannot write segment %s/%s: %s", log->dir, name,
                        strerror(err));
    }
    if (log->tail_fd >= 0)
        close(log->tail_fd);
    log->tail_fd = fd;
    log->segments[log->segment_count++] = (struct log_segment){
        .summary = NULL,
        .first_position = log->end_position,
        .end_position = log->end_position,
        .size = LOG_SEGMENT_HEADER_SIZE,
    };
    if (log->segment_count == 1)
        log->first_position = log->end_position;
    return 0;
}

int log_reader_open(struct log_reader *reader, const struct log *log)
{
    memset(reader, 0, sizeof *reader);
    reader->log = log;
    reader->fd = -1;
    reader->position = log->first_position;
    reader->buf = malloc(LOG_MAX_RECORD);
    if (reader->buf == NULL)
        return sp_error(SPINDLE_ENOMEM, "log: out of memory for a %u-byte record buffer",
                        (unsigned)LOG_MAX_RECORD);
    return 0;
}

int log_reader_next(struct log_reader *reader, struct log_record *record)
{
    const struct log *log = reader->log;
    for (;;) {
        if (reader->segment >= log->segment_count)
            return 0;
        const struct log_segment *seg = &log->segments[reader->segment];
        char name[LOG_SEGMENT_NAME_SIZE + 1];
        log_segment_name(seg->first_position, name);
        if (reader->fd < 0) {
            struct stat st;
            int rc = sp_private_file_open(log->dir_fd, log->dir, name, O_RDONLY, "log", &reader->fd,
                                          &st);
            if (rc == 0)
                return sp_error(SPINDLE_EIO, "log: %s/%s vanished while it was read", log->dir,
                                name);
            if (rc < 0)
                return rc;
            reader->offset = LOG_SEGMENT_HEADER_SIZE;
        }
        if (reader->offset >= seg->size) {
            close(reader->fd);
            reader->fd = -1;
            reader->segment++;
            continue;
        }
        size_t size;
        int rc = read_record(reader->fd, reader->offset, seg->size, reader->buf, record, &size);
        if (rc == 1 && record->position != reader->position)
            rc =
                sp_error(SPINDLE_EPROTO, "record of position %" PRIu64 " where %" PRIu64 " was due",
                         record->position, reader->position);
        if (rc <= 0)
            return sp_error(rc < 0 ? rc : SPINDLE_EPROTO,
                            "log: %s/%s changed while it was read, at offset %" PRIu64 ": %s",
                            log->dir, name, reader->offset,
                            rc < 0 ? spindle_errmsg() : "a record ends past the whole ones");
        reader->offset += size;
        reader->position++;
        return 1;
    }
}

void log_reader_seek_segment(struct log_reader *reader, size_t index)
{
    if (reader->fd >= 0)
        close(reader->fd);
    reader->fd = -1;
    reader->segment = index;
    if (index < reader->log->segment_count)
        reader->position = reader->log->segments[index].first_position;
}

void log_reader_close(struct log_reader *reader)
{
    if (reader->fd >= 0)
        close(reader->fd);
    reader->fd = -1;
    free(reader->buf);
    reader->buf = NULL;
}
