/*
 * spindle-log: one member's log loaded for checking, summing up and
 * comparing. Every message record is kept as a short entry (its fields and
 * a CRC-32C of its payload), per subgroup in log order; views in log order.
 * Loading also checks what the format cannot: in each subgroup, messages
 * come in delivery order (view id, then sequence number, strictly
 * increasing), and view ids grow.
 */
#ifndef SPINDLE_TOOLS_LOG_TOOL_H
#define SPINDLE_TOOLS_LOG_TOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log/log.h"

struct tool_entry {
    uint64_t view_id;
    uint64_t seq;
    uint64_t sender_index;
    uint64_t position;
    uint32_t sender_id;
    uint32_t length;
    uint32_t payload_crc;
};

struct tool_stream {
    struct tool_entry *entries;
    size_t count;
    size_t cap;
    uint64_t bytes; /* payload bytes */
};

struct tool_log {
    const char *dir;
    struct log *log;
    struct log_open_report report;
    struct tool_stream streams[SPINDLE_MAX_SUBGROUPS];
    struct log_view *views;
    size_t view_count;
    size_t view_cap;
};

/* Opens dir (flags as log_open) and loads every record. 0, or the error
 * with its message (spindle_errmsg). */
int tool_load(const char *dir, unsigned flags, struct tool_log *out);

void tool_free(struct tool_log *tool);

/* spindle-log compare: 0 when the logs agree, 1 when not (or unreadable). */
int tool_compare(char **dirs, int count);

/*
 * Prints the snapshots beside log, one a line after indent (an invalid one
 * with why it is ignored), removing temporary files a crash left when
 * remove_temps. Returns how many are invalid, or the listing's error;
 * *bytes: the snapshot files' size.
 */
int tool_snapshots(const struct log *log, bool remove_temps, const char *indent, uint64_t *bytes);

/* Bytes of the log's segments (their whole records). */
uint64_t tool_segment_bytes(const struct log *log);

#endif
