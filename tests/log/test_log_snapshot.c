/*
 * Snapshots and compaction at the log's level: snapshot files read back as
 * written and any damage to one is found and named; compaction removes
 * exactly the sealed segments every cover point covers, and the records
 * after the cover point all stay readable in order; a crash between the
 * steps (a temporary file left behind, snapshots written but no segment
 * removed yet) reopens cleanly.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "log/log.h"
#include "log/log_append.h"
#include "log/log_snapshot.h"
#include "log_samples.h"
#include "util/error.h"

#define MESSAGES 600
#define SEGMENT  2048u

static char root[64];

static void subdir(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", root, name);
}

static void expect_message(const char *text, const char *says)
{
    if (strstr(text, says) == NULL)
        fail_msg("\"%s\" does not say \"%s\"", text, says);
}

/* The point just after sample message i (sample_message: seq i, view
 * 1 + i / 100), which covers messages 0..i of every subgroup. */
static void point_after(uint64_t i, uint64_t *view_id, uint64_t *seq)
{
    *view_id = 1 + i / 100;
    *seq = i + 1;
}

/* A log in dir of a view record (view 1), then MESSAGES sample messages
 * in batches of 10, in segments of SEGMENT bytes; the appender is left
 * running (its log in *log). */
static struct log_appender *fill_log(const char *dir, struct log **log)
{
    assert_int_equal(log_open(dir, LOG_OPEN_WRITE | LOG_OPEN_CREATE, log, NULL), 0);
    struct log_appender_options options = {.segment_bytes = SEGMENT};
    struct log_appender *app;
    assert_int_equal(log_appender_start(*log, &options, &app), 0);
    struct log_record view = sample_view(1);
    uint64_t end;
    assert_int_equal(log_appender_submit(app, &view, 1, &end), 0);
    struct log_record records[10];
    struct sample_payload payloads[10];
    for (uint64_t i = 0; i < MESSAGES; i += 10) {
        for (size_t n = 0; n < 10; n++)
            records[n] = sample_message(i + n, 4, &payloads[n]);
        assert_int_equal(log_appender_submit(app, records, 10, &end), 0);
        assert_int_equal(log_appender_wait(app, end, 10000), 0);
    }
    return app;
}

/* Reads the log in dir from its first record to its end: every record in
 * position order, message i (position i + 1) of the stream. Returns the
 * first position. */
static uint64_t read_in_order(const char *dir)
{
    struct log *log;
    assert_int_equal(log_open(dir, 0, &log, NULL), 0);
    assert_int_equal(log->end_position, MESSAGES + 1);
    uint64_t first = log->first_position;
    struct log_reader reader;
    assert_int_equal(log_reader_open(&reader, log), 0);
    struct log_record record;
    uint64_t position = first;
    int rc;
    while ((rc = log_reader_next(&reader, &record)) == 1) {
        assert_int_equal(record.position, position);
        if (position > 0)
            assert_true(sample_message_matches(&record, position - 1, 4));
        position++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(position, MESSAGES + 1);
    log_reader_close(&reader);
    log_close(log);
    return first;
}

/* Checks that compaction kept every record after message cut (position
 * cut + 1 on) and removed every sealed segment wholly before it. */
static void expect_compacted_to(const struct log *log, uint64_t cut)
{
    assert_true(log->first_position > 0);
    assert_true(log->first_position <= cut + 2);
    /* The first segment left holds an uncovered record, or is the tail. */
    assert_true(log->segment_count == 1 || log->segments[0].end_position > cut + 2);
}

static void test_compaction_keeps_every_record_after_the_cover(void **state)
{
    (void)state;
    char dir[128];
    subdir(dir, sizeof dir, "compact");
    struct log *log;
    struct log_appender *app = fill_log(dir, &log);
    size_t before = log->segment_count;
    assert_true(before > 10);
    uint64_t view_id, seq;
    point_after(299, &view_id, &seq);
    for (uint32_t g = 0; g < 3; g++)
        log_appender_cover(app, g, view_id, seq);
    assert_int_equal(log_appender_compact_wait(app, 10000), 0);
    assert_true(log_appender_segments_removed(app) > 0);
    assert_int_equal(log_appender_segments_removed(app), before - log->segment_count);
    expect_compacted_to(log, 299);
    /* An earlier point changes nothing. */
    for (uint32_t g = 0; g < 3; g++)
        log_appender_cover(app, g, 1, 5);
    assert_int_equal(log_appender_compact_wait(app, 10000), 0);
    expect_compacted_to(log, 299);
    assert_int_equal(log_appender_stop(app), 0);
    log_close(log);
    uint64_t first = read_in_order(dir);
    assert_true(first > 0 && first <= 301);
}

static void test_a_subgroup_without_a_cover_keeps_its_segments(void **state)
{
    (void)state;
    char dir[128];
    subdir(dir, sizeof dir, "uncovered");
    struct log *log;
    struct log_appender *app = fill_log(dir, &log);
    uint64_t view_id, seq;
    point_after(MESSAGES - 1, &view_id, &seq);
    /* Subgroup 2 has messages in every segment and no snapshot. */
    log_appender_cover(app, 0, view_id, seq);
    log_appender_cover(app, 1, view_id, seq);
    assert_int_equal(log_appender_compact_wait(app, 10000), 0);
    assert_int_equal(log_appender_segments_removed(app), 0);
    assert_int_equal(log->first_position, 0);
    /* Subgroup 2 covered before seq 100: its first uncovered message is
     * message 101 (position 102); the segments wholly before it go. */
    log_appender_cover(app, 2, 1, 100);
    assert_int_equal(log_appender_compact_wait(app, 10000), 0);
    expect_compacted_to(log, 100);
    /* Subgroup 2 covered too: the sealed segments go. */
    log_appender_cover(app, 2, view_id, seq);
    assert_int_equal(log_appender_compact_wait(app, 10000), 0);
    assert_int_equal(log->segment_count, 1);
    assert_int_equal(log_appender_stop(app), 0);
    log_close(log);
    read_in_order(dir);
}

/* A snapshot of subgroup at seq, view 3, with length bytes of state. */
static void write_snapshot(const char *dir, int dir_fd, uint32_t subgroup, uint64_t seq,
                           size_t length, uint8_t salt)
{
    uint8_t *bytes = malloc(length + 1);
    assert_non_null(bytes);
    for (size_t i = 0; i < length; i++)
        bytes[i] = (uint8_t)(i * 13 + salt);
    struct log_snapshot snap = {.subgroup = subgroup, .view_id = 3, .seq = seq, .position = 77};
    snap.view = sample_view(3).view;
    assert_int_equal(log_snapshot_write(dir_fd, dir, &snap, bytes, length), 0);
    free(bytes);
}

static int open_dir(const char *dir)
{
    mkdir(dir, 0700);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    return fd;
}

/* Lists dir; expects count files, returns the listing (free()). */
static struct log_snapshot_file *list(int dir_fd, const char *dir, bool remove_temps, size_t count)
{
    struct log_snapshot_file *files;
    size_t found;
    assert_int_equal(log_snapshot_list(dir_fd, dir, remove_temps, &files, &found), 0);
    assert_int_equal(found, count);
    return files;
}

static void damage(const char *dir, const char *name, off_t offset, off_t truncate_to)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    if (truncate_to >= 0) {
        assert_int_equal(ftruncate(fd, truncate_to), 0);
    } else {
        uint8_t byte;
        assert_int_equal(pread(fd, &byte, 1, offset), 1);
        byte ^= 0x40;
        assert_int_equal(pwrite(fd, &byte, 1, offset), 1);
    }
    close(fd);
}

static void test_snapshots_read_back_and_damage_is_named(void **state)
{
    (void)state;
    char dir[128];
    subdir(dir, sizeof dir, "snapshots");
    int dir_fd = open_dir(dir);
    write_snapshot(dir, dir_fd, 2, 50, 5000, 1);
    write_snapshot(dir, dir_fd, 2, 80, 7000, 2);
    write_snapshot(dir, dir_fd, 1, 10, 0, 3);
    struct log_snapshot_file *files = list(dir_fd, dir, false, 3);
    /* Sorted by subgroup, then point. */
    assert_int_equal(files[0].snap.subgroup, 1);
    assert_int_equal(files[1].snap.seq, 50);
    assert_int_equal(files[2].snap.seq, 80);
    for (size_t i = 0; i < 3; i++)
        assert_true(files[i].valid);
    assert_int_equal(files[2].snap.view.view_id, 3);
    assert_int_equal(files[2].snap.view.members[2], 9);
    assert_int_equal(files[2].snap.position, 77);
    struct log_snapshot snap;
    void *bytes;
    assert_int_equal(log_snapshot_read(dir_fd, dir, files[2].name, &snap, &bytes), 0);
    assert_int_equal(snap.state_length, 7000);
    assert_int_equal(((uint8_t *)bytes)[6999], (uint8_t)(6999 * 13 + 2));
    free(bytes);
    char newest[LOG_SNAPSHOT_NAME_SIZE + 1];
    snprintf(newest, sizeof newest, "%s", files[2].name);
    uint64_t state_at = files[2].file_size - 7000;
    free(files);
    /* A changed byte of the state: the newest is ignored, the one before
     * still counts. */
    damage(dir, newest, (off_t)state_at + 4321, -1);
    files = list(dir_fd, dir, false, 3);
    assert_true(files[1].valid);
    assert_false(files[2].valid);
    expect_message(files[2].why, "state's checksum");
    free(files);
    assert_int_equal(log_snapshot_read(dir_fd, dir, newest, &snap, &bytes), SPINDLE_EPROTO);
    expect_message(spindle_errmsg(), newest);
    damage(dir, newest, (off_t)state_at + 4321, -1); /* repaired */
    /* A changed header byte, then a torn file. */
    damage(dir, newest, 20, -1);
    files = list(dir_fd, dir, false, 3);
    assert_false(files[2].valid);
    expect_message(files[2].why, "log snapshot: checksum");
    free(files);
    damage(dir, newest, 20, -1);
    damage(dir, newest, 0, (off_t)state_at + 100);
    files = list(dir_fd, dir, false, 3);
    assert_false(files[2].valid);
    expect_message(files[2].why, "torn");
    free(files);
    /* A snapshot under another's name is not that one. */
    char from[256], to[256];
    snprintf(from, sizeof from, "%s/%s", dir, newest);
    snprintf(to, sizeof to, "%s/002-00000000000000000003-00000000000000000099.snap", dir);
    assert_int_equal(rename(from, to), 0);
    write_snapshot(dir, dir_fd, 2, 80, 700, 2);
    files = list(dir_fd, dir, false, 4);
    assert_true(files[2].valid);
    assert_false(files[3].valid);
    expect_message(files[3].why, "not what its name says");
    free(files);
    /* Pruning keeps the named ones of a subgroup only. */
    struct log_snapshot keep = {.view_id = 3, .seq = 80};
    assert_int_equal(log_snapshot_prune(dir_fd, dir, 2, &keep, 1), 0);
    files = list(dir_fd, dir, false, 2);
    assert_int_equal(files[0].snap.subgroup, 1);
    assert_int_equal(files[1].snap.seq, 80);
    free(files);
    close(dir_fd);
}

/* What a member does at open (view_log_snapshots_open): cover each
 * subgroup at its second newest valid snapshot. */
static void cover_as_at_open(struct log_appender *app, int dir_fd, const char *dir)
{
    struct log_snapshot_file *files;
    size_t count;
    assert_int_equal(log_snapshot_list(dir_fd, dir, true, &files, &count), 0);
    struct log_snapshot newest[3] = {{0}}, older[3] = {{0}};
    bool has_newest[3] = {false}, has_older[3] = {false};
    for (size_t i = 0; i < count; i++) {
        if (!files[i].valid)
            continue;
        uint32_t g = files[i].snap.subgroup;
        older[g] = newest[g];
        has_older[g] = has_newest[g];
        newest[g] = files[i].snap;
        has_newest[g] = true;
    }
    free(files);
    for (uint32_t g = 0; g < 3; g++)
        if (has_older[g])
            log_appender_cover(app, g, older[g].view_id, older[g].seq);
}

static void test_a_crash_between_the_steps_reopens_cleanly(void **state)
{
    (void)state;
    char dir[128];
    subdir(dir, sizeof dir, "crash");
    struct log *log;
    struct log_appender *app = fill_log(dir, &log);
    size_t segments = log->segment_count;
    int dir_fd = log->dir_fd;
    /* Snapshots at messages 199 and 299 of every subgroup written, then a
     * crash before any segment went; and a temporary file of a third. */
    uint8_t state_bytes[64] = {7};
    for (uint32_t g = 0; g < 3; g++)
        for (uint64_t at = 199; at <= 299; at += 100) {
            struct log_snapshot snap = {.subgroup = g, .position = at + 2};
            point_after(at, &snap.view_id, &snap.seq);
            snap.view = sample_view(snap.view_id).view;
            assert_int_equal(
                log_snapshot_write(dir_fd, dir, &snap, state_bytes, sizeof state_bytes), 0);
        }
    char temp[256];
    snprintf(temp, sizeof temp, "%s/000-00000000000000000005-00000000000000000400.snap.tmp", dir);
    FILE *torn = fopen(temp, "w");
    assert_non_null(torn);
    fputs("SPNDLSNP torn", torn);
    fclose(torn);
    assert_int_equal(log_appender_stop(app), 0);
    log_close(log);
    /* Every file is still there: the log reads whole from position 0. */
    assert_int_equal(read_in_order(dir), 0);
    /* Reopened: the temporary file goes, compaction finishes. */
    assert_int_equal(log_open(dir, LOG_OPEN_WRITE, &log, NULL), 0);
    assert_int_equal(log->segment_count, segments);
    struct log_appender_options options = {.segment_bytes = SEGMENT};
    assert_int_equal(log_appender_start(log, &options, &app), 0);
    cover_as_at_open(app, log->dir_fd, dir);
    assert_int_equal(access(temp, F_OK), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(log_appender_compact_wait(app, 10000), 0);
    expect_compacted_to(log, 199);
    assert_int_equal(log_appender_stop(app), 0);
    log_close(log);
    uint64_t first = read_in_order(dir);
    assert_true(first > 0 && first <= 201);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compaction_keeps_every_record_after_the_cover),
        cmocka_unit_test(test_a_subgroup_without_a_cover_keeps_its_segments),
        cmocka_unit_test(test_snapshots_read_back_and_damage_is_named),
        cmocka_unit_test(test_a_crash_between_the_steps_reopens_cleanly),
    };
    return SAMPLE_RUN_IN_ROOT(root, "spindle-logsnap", tests);
}
