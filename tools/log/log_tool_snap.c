/* spindle-log: the snapshots beside a log, and the directory's size
 * (log_tool.h, docs/LOGS.md "Snapshots and compaction"). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "log/log_snapshot.h"
#include "log_tool.h"
#include "util/error.h"

int tool_snapshots(const struct log *log, bool remove_temps, const char *indent, uint64_t *bytes)
{
    struct log_snapshot_file *files;
    size_t count;
    int rc = log_snapshot_list(log->dir_fd, log->dir, remove_temps, &files, &count);
    if (rc < 0)
        return rc;
    int invalid = 0;
    *bytes = 0;
    printf("%ssnapshots: %zu\n", indent, count);
    for (size_t i = 0; i < count; i++) {
        const struct log_snapshot_file *file = &files[i];
        *bytes += file->file_size;
        if (!file->valid) {
            printf("%s  %s: ignored: %s\n", indent, file->name, file->why);
            invalid++;
            continue;
        }
        const struct log_snapshot *snap = &file->snap;
        printf("%s  %s: subgroup %u before view %" PRIu64 " seq %" PRIu64 ", %" PRIu64
               " bytes of state, taken at position %" PRIu64 ", view of %u members\n",
               indent, file->name, snap->subgroup, snap->view_id, snap->seq, snap->state_length,
               snap->position, snap->view.member_count);
    }
    free(files);
    return invalid;
}

uint64_t tool_segment_bytes(const struct log *log)
{
    uint64_t bytes = 0;
    for (size_t i = 0; i < log->segment_count; i++)
        bytes += log->segments[i].size;
    return bytes;
}
