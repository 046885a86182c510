/*
 * Snapshots of a logged subgroup's state (docs/LOGS.md "Snapshots and
 * compaction"): files in the member's log directory beside its segments,
 * each holding the application's state after every message of one
 * subgroup before (view id, seq), the view record of that view, and a
 * header that says so.
 *
 * A snapshot is written to a temporary name, synced, renamed into place and
 * the directory synced, so a crash leaves the old file set or the new one,
 * never a half-written snapshot under a snapshot's name (a temporary file
 * left behind is removed by the next writable listing). Bytes read back are
 * untrusted, since a snapshot may come from another member: the header, the
 * embedded view record and the state's checksum are all checked before it
 * counts, and one that fails is reported with the reason and ignored.
 *
 * Threads: the functions keep no state. The directory descriptor is the
 * log's (log->dir_fd), which does not change while the log is open; the
 * files touched here are never the segments, so they may run beside the
 * appender's writer.
 */
#ifndef SP_LOG_LOG_SNAPSHOT_H
#define SP_LOG_LOG_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log/log_format.h"

#define LOG_SNAPSHOT_VERSION     1u
#define LOG_SNAPSHOT_HEADER_SIZE 64u
/* "<subgroup, 3 digits>-<view id, 20>-<seq, 20>.snap": names sort by
 * subgroup, then (view id, seq). */
#define LOG_SNAPSHOT_NAME_SIZE 50u
/* The temporary name adds ".tmp". */
#define LOG_SNAPSHOT_TEMP_SUFFIX ".tmp"

struct log_snapshot {
    uint32_t subgroup;
    /* The state holds every message of subgroup delivered before
     * (view_id, seq): of an earlier view, or of view_id with a sequence
     * number below seq (a count, like a persistence frontier). */
    uint64_t view_id;
    uint64_t seq;
    /* The log's end when it was taken: every record it covers lies below. */
    uint64_t position;
    uint64_t state_length;
    uint32_t state_crc;   /* CRC-32C of the state */
    struct log_view view; /* the view record of view_id (its members, trim) */
};

/*
 * Encodes the header and the view record (what precedes the state) into
 * buf when cap is enough; returns their size either way. The view record
 * is a log record of type view at position 0.
 */
size_t log_snapshot_encode(const struct log_snapshot *snap, uint8_t *buf, size_t cap);

/*
 * Decodes the header and view record at the start of buf (len bytes; the
 * state may follow). 1 and *size (their bytes) when valid; 0 when buf
 * holds only part of them, *size then the bytes needed so far;
 * SPINDLE_EPROTO ("log snapshot: <field> ... at offset N") for a bad
 * magic, version, size, reserved byte, checksum, view record, or a view
 * record of another view than the header's.
 */
int log_snapshot_decode(const uint8_t *buf, size_t len, struct log_snapshot *snap, size_t *size);

/* Writes the file name of snap into name. */
void log_snapshot_name(const struct log_snapshot *snap, char name[LOG_SNAPSHOT_NAME_SIZE + 1]);

/* 1 with subgroup, view id and seq when name is a snapshot's, else 0. */
int log_snapshot_name_parse(const char *name, uint32_t *subgroup, uint64_t *view_id, uint64_t *seq);

/*
 * Writes snap (state_length and state_crc are set here from length and
 * state) and its state durably under its name in dir_fd (dir, for
 * messages): a temporary file created exclusively (mode 0600), written,
 * fdatasync'd, renamed over the name, then the directory fsync'd. A file
 * of the same name is replaced. SPINDLE_EIO naming the file; nothing is
 * left under the snapshot's name then.
 */
int log_snapshot_write(int dir_fd, const char *dir, struct log_snapshot *snap, const void *state,
                       size_t length);

/* A snapshot file found in a directory. */
struct log_snapshot_file {
    char name[LOG_SNAPSHOT_NAME_SIZE + 1];
    struct log_snapshot snap; /* valid: the header; else what its name says */
    uint64_t file_size;
    bool valid;
    char why[256]; /* !valid: what is wrong with it */
};

/*
 * Lists the snapshot files of dir_fd, each checked whole (header, view
 * record, the state's checksum, the name against the header), sorted by
 * subgroup, then (view id, seq). remove_temps: temporary files a crash
 * left are removed (then the directory synced). 0 with *files (free()) and
 * *count; SPINDLE_EPERM for a snapshot that is a symbolic link or not the
 * caller's; SPINDLE_EIO; SPINDLE_ENOMEM. An invalid snapshot is listed
 * with its reason, not refused.
 */
int log_snapshot_list(int dir_fd, const char *dir, bool remove_temps,
                      struct log_snapshot_file **files, size_t *count);

/*
 * Reads the state of a snapshot file, checking it whole again: 0 with
 * *snap and *state (malloc'd, free(); NULL for an empty state),
 * SPINDLE_EPROTO naming the file and what is wrong, SPINDLE_ENOENT,
 * SPINDLE_EPERM, SPINDLE_EIO, SPINDLE_ENOMEM.
 */
int log_snapshot_read(int dir_fd, const char *dir, const char *name, struct log_snapshot *snap,
                      void **state);

/*
 * Removes every snapshot file of subgroup except those named keep (count
 * of them, may be 0), then syncs the directory. 0, or SPINDLE_EIO naming
 * the file.
 */
int log_snapshot_prune(int dir_fd, const char *dir, uint32_t subgroup,
                       const struct log_snapshot *keep, size_t keep_count);

/* 1 when (view_a, seq_a) comes before (view_b, seq_b), else 0. */
static inline int log_point_before(uint64_t view_a, uint64_t seq_a, uint64_t view_b, uint64_t seq_b)
{
    return view_a < view_b || (view_a == view_b && seq_a < seq_b);
}

#endif
