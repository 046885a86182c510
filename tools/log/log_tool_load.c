/* Loading a log for spindle-log (log_tool.h). */
#include "log_tool.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util/crc32c.h"
#include "util/error.h"

static int push_entry(struct tool_stream *stream, const struct tool_entry *entry)
{
    if (stream->count == stream->cap) {
        size_t cap = stream->cap == 0 ? 256 : stream->cap * 2;
        struct tool_entry *grown = realloc(stream->entries, cap * sizeof *grown);
        if (grown == NULL)
            return sp_error(SPINDLE_ENOMEM, "out of memory for %zu records", cap);
        stream->entries = grown;
        stream->cap = cap;
    }
    stream->entries[stream->count++] = *entry;
    return 0;
}

static int push_view(struct tool_log *tool, const struct log_view *view)
{
    if (tool->view_count > 0 && view->view_id <= tool->views[tool->view_count - 1].view_id)
        return sp_error(SPINDLE_EPROTO,
                        "%s: view %" PRIu64 " follows view %" PRIu64 ": installed views must grow",
                        tool->dir, view->view_id, tool->views[tool->view_count - 1].view_id);
    if (tool->view_count == tool->view_cap) {
        size_t cap = tool->view_cap == 0 ? 8 : tool->view_cap * 2;
        struct log_view *grown = realloc(tool->views, cap * sizeof *grown);
        if (grown == NULL)
            return sp_error(SPINDLE_ENOMEM, "out of memory for %zu views", cap);
        tool->views = grown;
        tool->view_cap = cap;
    }
    tool->views[tool->view_count++] = *view;
    return 0;
}

static int add_message(struct tool_log *tool, const struct log_record *record)
{
    const struct log_message *m = &record->message;
    struct tool_stream *stream = &tool->streams[m->subgroup];
    struct tool_entry entry = {
        .view_id = m->view_id,
        .seq = m->seq,
        .sender_index = m->sender_index,
        .position = record->position,
        .sender_id = m->sender_id,
        .length = m->length,
        .payload_crc = sp_crc32c(0, m->payload, m->length),
    };
    if (stream->count > 0) {
        const struct tool_entry *last = &stream->entries[stream->count - 1];
        if (entry.view_id < last->view_id ||
            (entry.view_id == last->view_id && entry.seq <= last->seq))
            return sp_error(SPINDLE_EPROTO,
                            "%s: position %" PRIu64 ": subgroup %u message (view %" PRIu64
                            ", seq %" PRIu64 ") follows (view %" PRIu64 ", seq %" PRIu64
                            "): out of delivery order",
                            tool->dir, record->position, m->subgroup, entry.view_id, entry.seq,
                            last->view_id, last->seq);
    }
    stream->bytes += m->length;
    return push_entry(stream, &entry);
}

int tool_load(const char *dir, unsigned flags, struct tool_log *tool)
{
    memset(tool, 0, sizeof *tool);
    tool->dir = dir;
    int rc = log_open(dir, flags, &tool->log, &tool->report);
    if (rc < 0)
        return rc;
    struct log_reader reader;
    rc = log_reader_open(&reader, tool->log);
    if (rc < 0)
        return rc;
    struct log_record record;
    while ((rc = log_reader_next(&reader, &record)) == 1) {
        rc = record.type == LOG_REC_VIEW ? push_view(tool, &record.view)
                                         : add_message(tool, &record);
        if (rc < 0)
            break;
    }
    log_reader_close(&reader);
    return rc;
}

void tool_free(struct tool_log *tool)
{
    for (size_t s = 0; s < SPINDLE_MAX_SUBGROUPS; s++)
        free(tool->streams[s].entries);
    free(tool->views);
    log_close(tool->log);
    memset(tool, 0, sizeof *tool);
}
