/* The log on disk: what is written reads back, and what a crash or a bad
 * disk leaves is cut at the last whole record, never past it. */
#include <dirent.h>
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
#include "log_samples.h"
#include "util/error.h"

static char root[64];

static void subdir(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", root, name);
}

static void segment_path(char *out, size_t size, const char *dir, uint64_t first)
{
    char name[LOG_SEGMENT_NAME_SIZE + 1];
    log_segment_name(first, name);
    snprintf(out, size, "%s/%s", dir, name);
}

static void expect_message(int rc, const char *says)
{
    if (strstr(spindle_errmsg(), says) == NULL)
        fail_msg("rc %d, \"%s\" does not say \"%s\"", rc, spindle_errmsg(), says);
}

/* Reads the whole log in dir read-only: the count of records, each checked
 * against the stream of salt (first a view of id 7 when with_view). */
static uint64_t read_back(const char *dir, uint32_t salt, int with_view,
                          struct log_open_report *report)
{
    struct log *log;
    assert_int_equal(log_open(dir, 0, &log, report), 0);
    struct log_reader reader;
    assert_int_equal(log_reader_open(&reader, log), 0);
    struct log_record record;
    uint64_t count = 0;
    int rc;
    while ((rc = log_reader_next(&reader, &record)) == 1) {
        assert_int_equal(record.position, count);
        if (with_view && count == 0) {
            assert_int_equal(record.type, LOG_REC_VIEW);
            struct log_record want = sample_view(7);
            assert_int_equal(record.view.view_id, 7);
            assert_int_equal(record.view.member_count, 3);
            assert_memory_equal(record.view.members, want.view.members, 3 * sizeof(uint32_t));
            assert_int_equal(record.view.subgroup_count, 2);
            assert_memory_equal(record.view.delivered_through, want.view.delivered_through,
                                2 * sizeof(uint64_t));
        } else {
            assert_true(sample_message_matches(&record, count - (with_view ? 1 : 0), salt));
        }
        count++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(log->end_position, count);
    log_reader_close(&reader);
    log_close(log);
    return count;
}

static void test_records_read_back_as_written(void **state)
{
    (void)state;
    char dir[128];
    subdir(dir, sizeof dir, "round-trip");
    struct log *log;
    assert_int_equal(log_open(dir, LOG_OPEN_WRITE | LOG_OPEN_CREATE, &log, NULL), 0);
    struct log_appender *app;
    assert_int_equal(log_appender_start(log, NULL, &app), 0);
    struct log_record view = sample_view(7);
    uint64_t end;
    assert_int_equal(log_appender_submit(app, &view, 1, &end), 0);
    assert_int_equal(end, 1);
    assert_int_equal(log_appender_stop(app), 0);
    log_close(log);
    /* Reopened for writing, the log continues where it ended. */
    assert_int_equal(sample_append(dir, 0, 200, 11, 17, NULL), 0);
    struct log_open_report report;
    assert_int_equal(read_back(dir, 11, 1, &report), 201);
    assert_int_equal(report.tail_bytes, 0);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    char path[160];
    segment_path(path, sizeof path, dir, 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
}

/* Offsets of the record boundaries of the one-segment log in path:
 * ends[i] is where record i ends. */
static size_t record_ends(const char *path, uint64_t *ends, size_t max)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    uint8_t *bytes = malloc((size_t)st.st_size);
    assert_non_null(bytes);
    assert_int_equal(read(fd, bytes, (size_t)st.st_size), st.st_size);
    close(fd);
    size_t count = 0;
    size_t at = LOG_SEGMENT_HEADER_SIZE;
    while (at < (size_t)st.st_size) {
        /* The records, then (the tail segment) zeros written ahead. */
        size_t nonzero = at;
        while (nonzero < (size_t)st.st_size && bytes[nonzero] == 0)
            nonzero++;
        if (nonzero == (size_t)st.st_size)
            break;
        struct log_record record;
        size_t size;
        assert_int_equal(log_record_decode(bytes + at, (size_t)st.st_size - at, &record, &size), 1);
        at += size;
        assert_true(count < max);
        ends[count++] = at;
    }
    free(bytes);
    return count;
}

static void copy_file(const char *from, const char *to, uint64_t length)
{
    int in = open(from, O_RDONLY);
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(in >= 0 && out >= 0);
    uint8_t *bytes = malloc(length + 1);
    assert_non_null(bytes);
    assert_int_equal(read(in, bytes, length), (ssize_t)length);
    assert_int_equal(write(out, bytes, length), (ssize_t)length);
    free(bytes);
    close(in);
    close(out);
}

static void test_a_torn_tail_is_cut_and_reported(void **state)
{
    (void)state;
    char dir[128], path[160];
    subdir(dir, sizeof dir, "torn");
    assert_int_equal(sample_append(dir, 0, 40, 3, 8, NULL), 0);
    segment_path(path, sizeof path, dir, 0);
    uint64_t ends[64];
    assert_int_equal(record_ends(path, ends, 64), 40);
    /* A crash in the middle of record 39: its first 5 bytes reached the disk. */
    assert_int_equal(truncate(path, (off_t)(ends[38] + 5)), 0);
    struct log *log;
    struct log_open_report report;
    assert_int_equal(log_open(dir, LOG_OPEN_WRITE | LOG_OPEN_CREATE, &log, &report), 0);
    assert_int_equal(log->end_position, 39);
    assert_int_equal(report.tail_bytes, 5);
    assert_int_equal(report.tail_offset, ends[38]);
    assert_true(report.cut);
    assert_string_equal(report.tail_segment, "00000000000000000000.seg");
    log_close(log);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, (off_t)ends[38]);
    /* Cut once: the next open finds the log whole, and appending goes on. */
    assert_int_equal(sample_append(dir, 39, 1, 3, 1, NULL), 0);
    assert_int_equal(read_back(dir, 3, 0, &report), 40);
    assert_int_equal(report.tail_bytes, 0);
}

/* Zeros after the last record are the space written ahead, not a tail;
 * a byte that is not zero anywhere after it makes all of it a torn tail,
 * cut at the last whole record. */
static void test_zeros_end_a_segment_and_junk_after_them_is_cut(void **state)
{
    (void)state;
    char dir[128], path[160];
    subdir(dir, sizeof dir, "ahead");
    assert_int_equal(sample_append(dir, 0, 20, 4, 3, NULL), 0);
    segment_path(path, sizeof path, dir, 0);
    uint64_t ends[32];
    assert_int_equal(record_ends(path, ends, 32), 20);
    /* 64 KiB of zeros after the records, as the appender writes ahead
     * (whether or not this filesystem took its direct writes): a reopen
     * leaves them alone. */
    uint64_t zeros = 64 << 10;
    assert_int_equal(truncate(path, (off_t)(ends[19] + zeros)), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(read_back(dir, 4, 0, NULL), 20);
    struct log *log;
    struct log_open_report report;
    assert_int_equal(log_open(dir, LOG_OPEN_WRITE | LOG_OPEN_CREATE, &log, &report), 0);
    assert_int_equal(log->end_position, 20);
    assert_false(report.cut);
    assert_int_equal(report.tail_bytes, 0);
    log_close(log);
    struct stat again;
    assert_int_equal(stat(path, &again), 0);
    assert_int_equal(again.st_size, st.st_size);
    /* One byte that is not zero, far after the records. */
    int fd = open(path, O_RDWR);
    uint8_t byte = 0x01;
    assert_int_equal(pwrite(fd, &byte, 1, st.st_size - 1), 1);
    close(fd);
    assert_int_equal(log_open(dir, LOG_OPEN_WRITE | LOG_OPEN_CREATE, &log, &report), 0);
    assert_int_equal(log->end_position, 20);
    assert_true(report.cut);
    assert_int_equal(report.tail_offset, ends[19]);
    assert_int_equal(report.tail_bytes, zeros);
    log_close(log);
    assert_int_equal(stat(path, &again), 0);
    assert_int_equal(again.st_size, (off_t)ends[19]);
    /* Appending goes on after the cut. */
    assert_int_equal(sample_append(dir, 20, 5, 4, 2, NULL), 0);
    assert_int_equal(read_back(dir, 4, 0, &report), 25);
    assert_int_equal(report.tail_bytes, 0);
}

/* The records that survive damage at offset: those that end at or before
 * it (a cut there, or a changed byte inside the next record). */
static uint64_t whole_before(const uint64_t *ends, size_t count, uint64_t offset)
{
    uint64_t whole = 0;
    while (whole < count && ends[whole] <= offset)
        whole++;
    return whole;
}

static void test_damage_at_any_offset_keeps_exactly_the_whole_records(void **state)
{
    (void)state;
    char pristine[128], pristine_path[160];
    subdir(pristine, sizeof pristine, "pristine");
    assert_int_equal(sample_append(pristine, 0, 60, 5, 7, NULL), 0);
    segment_path(pristine_path, sizeof pristine_path, pristine, 0);
    uint64_t ends[64];
    size_t count = record_ends(pristine_path, ends, 64);
    assert_int_equal(count, 60);
    uint64_t size = ends[count - 1];
    srandom(20261125); /* fixed: a failure replays */
    for (int trial = 0; trial < 400; trial++) {
        char dir[128], path[160];
        snprintf(dir, sizeof dir, "%s/damaged-%d", root, trial);
        assert_int_equal(mkdir(dir, 0700), 0);
        segment_path(path, sizeof path, dir, 0);
        copy_file(pristine_path, path, size);
        uint64_t offset = (uint64_t)random() % size;
        int how = trial % 3; /* 0: cut at offset; 1: a byte changed there; 2: both, cut later */
        uint64_t length = size;
        if (how != 1)
            length = how == 0 ? offset : offset + 1 + (uint64_t)random() % (size - offset);
        if (how != 0) {
            int fd = open(path, O_RDWR);
            uint8_t byte;
            assert_int_equal(pread(fd, &byte, 1, (off_t)offset), 1);
            byte ^= (uint8_t)(1 + random() % 255);
            assert_int_equal(pwrite(fd, &byte, 1, (off_t)offset), 1);
            close(fd);
        }
        assert_int_equal(truncate(path, (off_t)length), 0);
        /* A changed byte spoils its record; a cut spoils the one it falls in. */
        uint64_t survivors = whole_before(ends, count, how == 0 ? length : offset);
        uint64_t kept = survivors == 0 ? LOG_SEGMENT_HEADER_SIZE : ends[survivors - 1];
        bool header_hit =
            how == 0 ? length < LOG_SEGMENT_HEADER_SIZE : offset < LOG_SEGMENT_HEADER_SIZE;
        struct log *log;
        struct log_open_report report;
        int rc = log_open(dir, LOG_OPEN_WRITE | LOG_OPEN_CREATE, &log, &report);
        if (rc != 0)
            fail_msg("trial %d (how %d, offset %llu): %s", trial, how, (unsigned long long)offset,
                     spindle_errmsg());
        assert_int_equal(log->end_position, survivors);
        assert_int_equal(report.segment_removed, header_hit);
        if (!header_hit) {
            assert_int_equal(report.tail_bytes, length - kept);
            assert_int_equal(report.cut, length != kept);
        }
        log_close(log);
        struct stat st;
        if (header_hit) {
            assert_int_equal(stat(path, &st), -1);
        } else {
            assert_int_equal(stat(path, &st), 0);
            assert_int_equal(st.st_size, (off_t)kept);
        }
        assert_int_equal(read_back(dir, 5, 0, &report), survivors);
        assert_int_equal(report.tail_bytes, 0);
    }
}

static void test_segments_roll_and_a_corrupt_sealed_one_is_refused(void **state)
{
    (void)state;
    char dir[128];
    subdir(dir, sizeof dir, "segments");
    struct log_appender_options options = {.segment_bytes = 4096};
    assert_int_equal(sample_append(dir, 0, 300, 9, 10, &options), 0);
    assert_int_equal(read_back(dir, 9, 0, NULL), 300);
    struct log *log;
    assert_int_equal(log_open(dir, 0, &log, NULL), 0);
    size_t segments = log->segment_count;
    assert_true(segments >= 5);
    for (size_t i = 1; i < segments; i++)
        assert_int_equal(log->segments[i].first_position, log->segments[i - 1].end_position);
    uint64_t second = log->segments[1].first_position;
    log_close(log);
    /* A byte changed inside a sealed segment is not a torn tail: refused,
     * nothing cut. */
    char path[160];
    segment_path(path, sizeof path, dir, 0);
    struct stat before;
    assert_int_equal(stat(path, &before), 0);
    int fd = open(path, O_RDWR);
    uint8_t byte = 0x5a;
    assert_int_equal(pwrite(fd, &byte, 1, LOG_SEGMENT_HEADER_SIZE + 30), 1);
    close(fd);
    int rc = log_open(dir, LOG_OPEN_WRITE | LOG_OPEN_CREATE, &log, NULL);
    assert_int_equal(rc, SPINDLE_EPROTO);
    expect_message(rc, "not a torn tail");
    struct stat after;
    assert_int_equal(stat(path, &after), 0);
    assert_int_equal(after.st_size, before.st_size);
    /* Without its first segment (as compaction will leave it), the log
     * starts at the second one's first position. */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(log_open(dir, 0, &log, NULL), 0);
    assert_int_equal(log->first_position, second);
    assert_int_equal(log->end_position, 300);
    log_close(log);
}

static void test_a_gap_between_segments_is_refused(void **state)
{
    (void)state;
    char dir[128], path[160];
    subdir(dir, sizeof dir, "gap");
    struct log_appender_options options = {.segment_bytes = 2048};
    assert_int_equal(sample_append(dir, 0, 120, 2, 10, &options), 0);
    struct log *log;
    assert_int_equal(log_open(dir, 0, &log, NULL), 0);
    assert_true(log->segment_count >= 3);
    uint64_t second = log->segments[1].first_position;
    log_close(log);
    segment_path(path, sizeof path, dir, second);
    assert_int_equal(unlink(path), 0);
    int rc = log_open(dir, 0, &log, NULL);
    assert_int_equal(rc, SPINDLE_EPROTO);
    expect_message(rc, "records are missing");
}

static void test_a_directory_not_the_callers_alone_is_refused(void **state)
{
    (void)state;
    char dir[128], link[128], path[160];
    subdir(dir, sizeof dir, "shared");
    assert_int_equal(sample_append(dir, 0, 3, 1, 3, NULL), 0);
    struct log *log;
    assert_int_equal(chmod(dir, 0777), 0);
    int rc = log_open(dir, 0, &log, NULL);
    assert_int_equal(rc, SPINDLE_EPERM);
    expect_message(rc, "mode 0777) is writable by group or others");
    assert_int_equal(chmod(dir, 0700), 0);
    subdir(link, sizeof link, "link-to-shared");
    assert_int_equal(symlink(dir, link), 0);
    rc = log_open(link, LOG_OPEN_WRITE | LOG_OPEN_CREATE, &log, NULL);
    assert_int_equal(rc, SPINDLE_EPERM);
    expect_message(rc, "is a symbolic link");
    /* A segment planted as a link to a file elsewhere is not followed. */
    segment_path(path, sizeof path, dir, 3);
    char target[160];
    segment_path(target, sizeof target, dir, 0);
    assert_int_equal(symlink(target, path), 0);
    rc = log_open(dir, 0, &log, NULL);
    assert_int_equal(rc, SPINDLE_EPERM);
    expect_message(rc, "is a symbolic link");
    assert_int_equal(unlink(path), 0);
    subdir(link, sizeof link, "missing");
    rc = log_open(link, 0, &log, NULL);
    assert_int_equal(rc, SPINDLE_ENOENT);
    expect_message(rc, "does not exist");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_read_back_as_written),
        cmocka_unit_test(test_a_torn_tail_is_cut_and_reported),
        cmocka_unit_test(test_zeros_end_a_segment_and_junk_after_them_is_cut),
        cmocka_unit_test(test_damage_at_any_offset_keeps_exactly_the_whole_records),
        cmocka_unit_test(test_segments_roll_and_a_corrupt_sealed_one_is_refused),
        cmocka_unit_test(test_a_gap_between_segments_is_refused),
        cmocka_unit_test(test_a_directory_not_the_callers_alone_is_refused),
    };
    return SAMPLE_RUN_IN_ROOT(root, "spindle-log", tests);
}
