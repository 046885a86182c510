/* Writing past the page cache (log/log_direct.h): whole blocks direct, the
 * partial one padded with zeros, zeros written ahead; whatever the batch
 * sizes, only zeros follow the last record, nothing a reopen cuts, and
 * every record reads back. */
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
#include "log/log_direct.h"
#include "log_samples.h"
#include "util/error.h"

static char root[64];

/* Opens dir for writing: nothing to cut; a sealed segment's file exactly
 * as long as its records, the tail's followed by zeros only (the space
 * written ahead). Returns the log. */
static struct log *open_whole(const char *dir)
{
    struct log *log;
    struct log_open_report report;
    assert_int_equal(log_open(dir, LOG_OPEN_WRITE | LOG_OPEN_CREATE, &log, &report), 0);
    assert_int_equal(report.tail_bytes, 0);
    assert_false(report.cut);
    for (size_t i = 0; i < log->segment_count; i++) {
        char name[LOG_SEGMENT_NAME_SIZE + 1];
        log_segment_name(log->segments[i].first_position, name);
        struct stat st;
        assert_int_equal(fstatat(log->dir_fd, name, &st, 0), 0);
        uint64_t size = log->segments[i].size;
        if (i + 1 < log->segment_count) {
            assert_int_equal((uint64_t)st.st_size, size);
            continue;
        }
        assert_true((uint64_t)st.st_size >= size);
        int fd = openat(log->dir_fd, name, O_RDONLY);
        assert_true(fd >= 0);
        uint8_t byte;
        for (uint64_t at = size; at < (uint64_t)st.st_size; at++) {
            assert_int_equal(pread(fd, &byte, 1, (off_t)at), 1);
            assert_int_equal(byte, 0);
        }
        close(fd);
    }
    return log;
}

/* Reads the log in dir back: messages 0..count-1 of salt, in order. */
static void check_stream(const char *dir, uint64_t count, uint32_t salt)
{
    struct log *log = open_whole(dir);
    assert_int_equal(log->end_position, count);
    struct log_reader reader;
    assert_int_equal(log_reader_open(&reader, log), 0);
    struct log_record record;
    for (uint64_t i = 0; i < count; i++) {
        assert_int_equal(log_reader_next(&reader, &record), 1);
        assert_true(sample_message_matches(&record, i, salt));
    }
    assert_int_equal(log_reader_next(&reader, &record), 0);
    log_reader_close(&reader);
    log_close(log);
}

/* Batches of 1 to 64 records of 24 to 370 bytes end anywhere in a block;
 * small segments move the tail to new files between them. */
static void test_batches_ending_anywhere_read_back_whole(void **state)
{
    (void)state;
    char dir[128];
    snprintf(dir, sizeof dir, "%s/anywhere", root);
    struct log_appender_options options = {.segment_bytes = 64 << 10};
    uint64_t done = 0;
    for (size_t batch = 1; batch <= 64; batch = batch * 2 + 1) {
        assert_int_equal(sample_append(dir, done, 200, 7, batch, &options), 0);
        done += 200;
    }
    check_stream(dir, done, 7);
    struct log *log = open_whole(dir);
    assert_true(log->segment_count > 2);
    log_close(log);
}

/* Reopened in the middle of a block, the appender has no carry: it reads
 * the block's start back from the file before rewriting it. */
static void test_a_reopened_log_goes_on_mid_block(void **state)
{
    (void)state;
    char dir[128];
    snprintf(dir, sizeof dir, "%s/reopened", root);
    uint64_t done = 0;
    for (int round = 0; round < 6; round++) {
        assert_int_equal(sample_append(dir, done, 13, 11, 5, NULL), 0);
        done += 13;
        struct log *log = open_whole(dir);
        assert_int_not_equal(log->segments[log->segment_count - 1].size % LOG_DIRECT_BLOCK, 0);
        log_close(log);
    }
    check_stream(dir, done, 11);
}

/* One batch larger than the staging buffer, of records that straddle its
 * end: several direct writes, and the records whole across them. */
static void test_a_batch_larger_than_the_staging_buffer(void **state)
{
    (void)state;
    char dir[128];
    snprintf(dir, sizeof dir, "%s/large", root);
    struct log *log;
    assert_int_equal(log_open(dir, LOG_OPEN_WRITE | LOG_OPEN_CREATE, &log, NULL), 0);
    struct log_appender *app;
    assert_int_equal(log_appender_start(log, NULL, &app), 0);
    enum { COUNT = 40, LENGTH = 60001 };
    static uint8_t payloads[COUNT][LENGTH];
    struct log_record records[COUNT];
    memset(records, 0, sizeof records);
    size_t bytes = 0;
    for (int i = 0; i < COUNT; i++) {
        for (size_t b = 0; b < LENGTH; b++)
            payloads[i][b] = (uint8_t)(b * 13 + (size_t)i);
        records[i].type = LOG_REC_MESSAGE;
        records[i].message = (struct log_message){
            .seq = (uint64_t)i, .view_id = 1, .length = LENGTH, .payload = payloads[i]};
        bytes += log_record_size(&records[i]);
    }
    assert_true(bytes > 2 * LOG_DIRECT_STAGING);
    uint64_t end;
    assert_int_equal(log_appender_submit(app, records, COUNT, &end), 0);
    assert_int_equal(log_appender_wait(app, end, 20000), 0);
    assert_int_equal(log_appender_syncs(app), 1);
    assert_int_equal(log_appender_stop(app), 0);
    log_close(log);
    log = open_whole(dir);
    struct log_reader reader;
    assert_int_equal(log_reader_open(&reader, log), 0);
    struct log_record record;
    for (int i = 0; i < COUNT; i++) {
        assert_int_equal(log_reader_next(&reader, &record), 1);
        assert_int_equal(record.message.seq, (uint64_t)i);
        assert_int_equal(record.message.length, LENGTH);
        assert_memory_equal(record.message.payload, payloads[i], LENGTH);
    }
    assert_int_equal(log_reader_next(&reader, &record), 0);
    log_reader_close(&reader);
    log_close(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batches_ending_anywhere_read_back_whole),
        cmocka_unit_test(test_a_reopened_log_goes_on_mid_block),
        cmocka_unit_test(test_a_batch_larger_than_the_staging_buffer),
    };
    return SAMPLE_RUN_IN_ROOT(root, "spindle-logdirect", tests);
}
