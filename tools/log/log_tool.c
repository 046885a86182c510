/*
 * spindle-log: checks, prints and compares the logs of logged subgroups
 * (docs/LOGS.md). See the usage text below.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "log_tool.h"
#include "util/error.h"

static const char usage[] =
    "NAME\n"
    "    spindle-log - check, print and compare libspindle member logs\n"
    "\n"
    "SYNOPSIS\n"
    "    spindle-log check DIR\n"
    "    spindle-log dump DIR\n"
    "    spindle-log summary DIR\n"
    "    spindle-log compare DIR DIR...\n"
    "\n"
    "DESCRIPTION\n"
    "    DIR is one member's log directory (options.log_dir). It must belong to the\n"
    "    user running the tool and be writable by nobody else; symbolic links are\n"
    "    refused. Every record is read as untrusted input: lengths, counts and\n"
    "    checksums are checked before use (docs/LOGS.md).\n"
    "\n"
    "    check    verifies every segment and record, and that each subgroup's messages\n"
    "             are in delivery order; cuts a torn or corrupt tail of the last\n"
    "             segment at its last whole record (as the library does when it opens\n"
    "             the log) and says how many bytes went; checks every snapshot (its\n"
    "             header, view and state checksum) and removes temporary snapshot files\n"
    "             a crash left.\n"
    "    dump     prints every record, one a line, after a line saying where the log\n"
    "             starts when compaction removed its beginning; changes nothing.\n"
    "    summary  prints the log's positions, segments, views, snapshots, the\n"
    "             directory's size, and per subgroup the messages, bytes and senders;\n"
    "             changes nothing.\n"
    "    compare  verifies that several members' logs agree where they overlap: the\n"
    "             same messages in the same order in each subgroup, the same members\n"
    "             and trim in each view they share. Changes nothing.\n"
    "\n"
    "EXIT STATUS\n"
    "    0  check: the log and its snapshots are whole (perhaps after a cut);\n"
    "       compare: the logs agree;\n"
    "       dump, summary: the log was read\n"
    "    1  the log is corrupt beyond a torn tail, a snapshot is corrupt, a log cannot\n"
    "       be read, or the logs differ\n"
    "    2  usage error\n";

static int fail(void)
{
    fprintf(stderr, "spindle-log: %s\n", spindle_errmsg());
    return 1;
}

static void print_tail(const char *dir, const struct log_open_report *report)
{
    if (report->tail_bytes == 0 && !report->segment_removed)
        return;
    printf("%s: %s %" PRIu64 " bytes of torn or corrupt tail in %s at offset %" PRIu64 " (%s)%s\n",
           dir, report->cut ? "cut" : "found", report->tail_bytes, report->tail_segment,
           report->tail_offset, report->why,
           report->segment_removed ? ": its header was torn, the file was removed"
           : report->cut           ? ""
                                   : "; spindle-log check cuts it");
}

static int check(const char *dir)
{
    struct tool_log tool;
    int rc = tool_load(dir, LOG_OPEN_WRITE, &tool);
    if (rc == 0) {
        print_tail(dir, &tool.report);
        printf("%s: whole: %" PRIu64 " records (positions [%" PRIu64 ", %" PRIu64 ")) in %zu "
               "segments\n",
               dir, tool.log->end_position - tool.log->first_position, tool.log->first_position,
               tool.log->end_position, tool.log->segment_count);
        uint64_t bytes;
        rc = tool_snapshots(tool.log, true, "", &bytes);
        if (rc > 0)
            rc = sp_error(SPINDLE_EPROTO,
                          "%s: %d snapshot%s corrupt (the library ignores %s and falls back to "
                          "the one before)",
                          dir, rc, rc == 1 ? " is" : "s are", rc == 1 ? "it" : "them");
    }
    tool_free(&tool);
    return rc == 0 ? 0 : fail();
}

static void print_payload(const struct log_message *m)
{
    printf(" data ");
    uint32_t shown = m->length < 16 ? m->length : 16;
    for (uint32_t i = 0; i < shown; i++)
        printf("%02x", m->payload[i]);
    printf("%s\n", shown < m->length ? "..." : "");
}

static void print_record(const struct log_record *record)
{
    if (record->type == LOG_REC_VIEW) {
        const struct log_view *v = &record->view;
        printf("%" PRIu64 " view %" PRIu64 " members", record->position, v->view_id);
        for (uint32_t i = 0; i < v->member_count; i++)
            printf("%c%u", i == 0 ? ' ' : ',', v->members[i]);
        printf(" delivered_through");
        for (uint32_t s = 0; s < v->subgroup_count; s++)
            printf("%c%" PRIu64, s == 0 ? ' ' : ',', v->delivered_through[s]);
        printf("%s\n", v->subgroup_count == 0 ? " -" : "");
        return;
    }
    const struct log_message *m = &record->message;
    printf("%" PRIu64 " message subgroup %u view %" PRIu64 " seq %" PRIu64
           " sender %u index %" PRIu64 " length %u",
           record->position, m->subgroup, m->view_id, m->seq, m->sender_id, m->sender_index,
           m->length);
    print_payload(m);
}

static int dump(const char *dir)
{
    struct log *log;
    struct log_open_report report;
    if (log_open(dir, 0, &log, &report) != 0)
        return fail();
    if (log->first_position > 0)
        printf("# the log starts at position %" PRIu64 ": the records before it were compacted "
               "into snapshots\n",
               log->first_position);
    struct log_reader reader;
    int rc = log_reader_open(&reader, log);
    struct log_record record;
    while (rc == 0 && (rc = log_reader_next(&reader, &record)) == 1) {
        print_record(&record);
        rc = 0;
    }
    if (rc == 0)
        print_tail(dir, &report);
    else
        fail();
    log_reader_close(&reader);
    log_close(log);
    return rc == 0 ? 0 : 1;
}

static void print_senders(const struct tool_stream *stream)
{
    uint64_t counts[SPINDLE_MAX_MEMBERS] = {0};
    uint64_t last_index[SPINDLE_MAX_MEMBERS] = {0};
    for (size_t i = 0; i < stream->count; i++) {
        counts[stream->entries[i].sender_id]++;
        last_index[stream->entries[i].sender_id] = stream->entries[i].sender_index;
    }
    printf("    senders:");
    for (uint32_t id = 0; id < SPINDLE_MAX_MEMBERS; id++)
        if (counts[id] > 0)
            printf(" %u (%" PRIu64 " messages, last index %" PRIu64 ")", id, counts[id],
                   last_index[id]);
    printf("\n");
}

static int summary(const char *dir)
{
    struct tool_log tool;
    if (tool_load(dir, 0, &tool) != 0) {
        tool_free(&tool);
        return fail();
    }
    const struct log *log = tool.log;
    printf("%s\n  positions [%" PRIu64 ", %" PRIu64 ") (%" PRIu64 " records, all on stable "
           "storage), %zu segments\n",
           dir, log->first_position, log->end_position, log->end_position - log->first_position,
           log->segment_count);
    print_tail(dir, &tool.report);
    uint64_t snapshot_bytes = 0;
    if (tool_snapshots(log, false, "  ", &snapshot_bytes) < 0) {
        tool_free(&tool);
        return fail();
    }
    uint64_t segment_bytes = tool_segment_bytes(log);
    printf("  directory: %" PRIu64 " bytes (segments %" PRIu64 ", snapshots %" PRIu64 ")\n",
           segment_bytes + snapshot_bytes, segment_bytes, snapshot_bytes);
    printf("  views: %zu\n", tool.view_count);
    for (size_t i = 0; i < tool.view_count; i++) {
        printf("    view %" PRIu64 ": %u members:", tool.views[i].view_id,
               tool.views[i].member_count);
        for (uint32_t m = 0; m < tool.views[i].member_count; m++)
            printf(" %u", tool.views[i].members[m]);
        printf("\n");
    }
    for (uint32_t s = 0; s < SPINDLE_MAX_SUBGROUPS; s++) {
        const struct tool_stream *stream = &tool.streams[s];
        if (stream->count == 0)
            continue;
        const struct tool_entry *first = &stream->entries[0];
        const struct tool_entry *last = &stream->entries[stream->count - 1];
        printf("  subgroup %u: %zu messages, %" PRIu64 " payload bytes, from view %" PRIu64
               " seq %" PRIu64 " to view %" PRIu64 " seq %" PRIu64 " (last at position %" PRIu64
               ")\n",
               s, stream->count, stream->bytes, first->view_id, first->seq, last->view_id,
               last->seq, last->position);
        print_senders(stream);
    }
    tool_free(&tool);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(usage, stdout);
        return 0;
    }
    const char *command = argc >= 2 ? argv[1] : "";
    bool one_dir = argc == 3 && argv[2][0] != '\0';
    if (strcmp(command, "check") == 0 && one_dir)
        return check(argv[2]);
    if (strcmp(command, "dump") == 0 && one_dir)
        return dump(argv[2]);
    if (strcmp(command, "summary") == 0 && one_dir)
        return summary(argv[2]);
    if (strcmp(command, "compare") == 0 && argc >= 4)
        return tool_compare(argv + 2, argc - 2);
    if (argc >= 2 && strcmp(command, "check") != 0 && strcmp(command, "dump") != 0 &&
        strcmp(command, "summary") != 0 && strcmp(command, "compare") != 0)
        fprintf(stderr, "spindle-log: unknown command \"%s\"\n", command);
    else if (argc >= 2)
        fprintf(stderr, "spindle-log: %s takes %s\n", command,
                strcmp(command, "compare") == 0 ? "two or more directories" : "one directory");
    fputs(usage, stderr);
    return 2;
}
