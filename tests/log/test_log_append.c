/* The appender: one fdatasync per batch (records queued during its write
 * included), a durable position that only moves past synced records, a
 * bounded queue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "log/log.h"
#include "log/log_append.h"
#include "log_samples.h"
#include "util/error.h"

static char root[64];

struct fixture {
    struct log *log;
    struct log_appender *app;
};

static void start(struct fixture *f, const char *name, const struct log_appender_options *options)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    assert_int_equal(log_open(dir, LOG_OPEN_WRITE | LOG_OPEN_CREATE, &f->log, NULL), 0);
    assert_int_equal(log_appender_start(f->log, options, &f->app), 0);
}

static void stop(struct fixture *f)
{
    assert_int_equal(log_appender_stop(f->app), 0);
    log_close(f->log);
}

static void test_each_batch_takes_one_fdatasync(void **state)
{
    (void)state;
    struct fixture f;
    start(&f, "batches", NULL);
    struct log_record records[64];
    struct sample_payload payloads[64];
    uint64_t bytes = 0;
    for (int i = 0; i < 64; i++) {
        records[i] = sample_message((uint64_t)i, 4, &payloads[i]);
        bytes += log_record_size(&records[i]);
    }
    uint64_t end;
    assert_int_equal(log_appender_submit(f.app, records, 64, &end), 0);
    assert_int_equal(end, 64);
    assert_int_equal(log_appender_wait(f.app, end, 10000), 0);
    assert_int_equal(log_appender_durable(f.app), 64);
    assert_int_equal(log_appender_syncs(f.app), 1);
    assert_int_equal(log_appender_durable_bytes(f.app), bytes);
    /* Three more batches, each awaited: three more fdatasync calls. */
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 10; i++)
            records[i] = sample_message(end + (uint64_t)i, 4, &payloads[i]);
        assert_int_equal(log_appender_submit(f.app, records, 10, &end), 0);
        assert_int_equal(log_appender_wait(f.app, end, 10000), 0);
    }
    assert_int_equal(end, 94);
    assert_int_equal(log_appender_syncs(f.app), 4);
    stop(&f);
}

/* Batches submitted faster than the disk syncs share fdatasync calls:
 * never more calls than batches, and every record durable in the end. */
static void test_queued_batches_share_a_sync(void **state)
{
    (void)state;
    struct fixture f;
    start(&f, "shared", NULL);
    struct log_record record;
    struct sample_payload payload;
    uint64_t end = 0;
    for (uint64_t i = 0; i < 500; i++) {
        record = sample_message(i, 8, &payload);
        assert_int_equal(log_appender_submit(f.app, &record, 1, &end), 0);
    }
    assert_int_equal(log_appender_wait(f.app, end, 20000), 0);
    assert_int_equal(log_appender_durable(f.app), 500);
    assert_true(log_appender_syncs(f.app) <= 500);
    assert_true(log_appender_syncs(f.app) >= 1);
    stop(&f);
}

/* Records submitted while a batch is being written (the writer waits at
 * the held sync, its first write done) go out in a second write before
 * that batch's fdatasync: one sync makes both durable, and the log reads
 * back every record, in order, across the two writes. */
static void test_records_queued_during_a_write_share_its_sync(void **state)
{
    (void)state;
    struct fixture f;
    start(&f, "catch_up", NULL);
    struct log_record records[10];
    struct sample_payload payloads[10];
    for (int i = 0; i < 10; i++)
        records[i] = sample_message((uint64_t)i, 8, &payloads[i]);
    log_test_hold_syncs(true);
    uint64_t end;
    assert_int_equal(log_appender_submit(f.app, records, 1, &end), 0);
    assert_int_equal(log_test_wait_held_syncs(1, 10000), 0);
    assert_int_equal(log_appender_submit(f.app, records + 1, 9, &end), 0);
    assert_int_equal(end, 10);
    assert_int_equal(log_appender_durable(f.app), 0);
    log_test_hold_syncs(false);
    assert_int_equal(log_appender_wait(f.app, end, 10000), 0);
    assert_int_equal(log_appender_durable(f.app), 10);
    assert_int_equal(log_appender_syncs(f.app), 1);
    assert_int_equal(log_appender_catch_up_writes(f.app), 1);
    stop(&f);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/catch_up", root);
    struct log *log;
    assert_int_equal(log_open(dir, 0, &log, NULL), 0);
    struct log_reader reader;
    assert_int_equal(log_reader_open(&reader, log), 0);
    struct log_record record;
    for (uint64_t i = 0; i < 10; i++) {
        assert_int_equal(log_reader_next(&reader, &record), 1);
        assert_int_equal(record.position, i);
        assert_true(sample_message_matches(&record, i, 8));
    }
    assert_int_equal(log_reader_next(&reader, &record), 0);
    log_reader_close(&reader);
    log_close(log);
}

static void test_a_batch_larger_than_the_queue_is_refused(void **state)
{
    (void)state;
    struct fixture f;
    struct log_appender_options options = {.queue_bytes = 2 * LOG_MAX_RECORD};
    start(&f, "bounded", &options);
    static uint8_t big[SPINDLE_MAX_PAYLOAD];
    struct log_record records[3];
    memset(records, 0, sizeof records);
    for (int i = 0; i < 3; i++) {
        records[i].type = LOG_REC_MESSAGE;
        records[i].message.length = SPINDLE_MAX_PAYLOAD;
        records[i].message.payload = big;
    }
    uint64_t end = 99;
    int rc = log_appender_submit(f.app, records, 3, &end);
    assert_int_equal(rc, SPINDLE_EMSGSIZE);
    assert_non_null(strstr(spindle_errmsg(), "queue_bytes"));
    assert_int_equal(end, 99);
    /* One fits, and nothing of the refused batch was queued before it. */
    assert_int_equal(log_appender_submit(f.app, records, 1, &end), 0);
    assert_int_equal(end, 1);
    assert_int_equal(log_appender_wait(f.app, end, 10000), 0);
    stop(&f);
}

static void test_bad_records_and_queues_are_refused_by_name(void **state)
{
    (void)state;
    struct fixture f;
    start(&f, "bad", NULL);
    struct log_record record;
    memset(&record, 0, sizeof record);
    record.type = LOG_REC_MESSAGE;
    record.message.subgroup = SPINDLE_MAX_SUBGROUPS;
    int rc = log_appender_submit(f.app, &record, 1, NULL);
    assert_int_equal(rc, SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "subgroup 256"));
    record = sample_view(3);
    record.view.members[1] = record.view.members[0];
    rc = log_appender_submit(f.app, &record, 1, NULL);
    assert_int_equal(rc, SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "repeated"));
    assert_int_equal(log_appender_wait(f.app, 0, 0), 0);
    rc = log_appender_wait(f.app, 1, 50);
    assert_int_equal(rc, SPINDLE_ETIMEDOUT);
    stop(&f);
    struct log *log;
    char dir[128];
    snprintf(dir, sizeof dir, "%s/bad", root);
    assert_int_equal(log_open(dir, 0, &log, NULL), 0);
    struct log_appender *app;
    rc = log_appender_start(log, NULL, &app);
    assert_int_equal(rc, SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "read-only"));
    log_close(log);
    assert_int_equal(log_open(dir, LOG_OPEN_WRITE | LOG_OPEN_CREATE, &log, NULL), 0);
    struct log_appender_options options = {.queue_bytes = 4096};
    rc = log_appender_start(log, &options, &app);
    assert_int_equal(rc, SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "queue_bytes 4096"));
    log_close(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_batch_takes_one_fdatasync),
        cmocka_unit_test(test_queued_batches_share_a_sync),
        cmocka_unit_test(test_records_queued_during_a_write_share_its_sync),
        cmocka_unit_test(test_a_batch_larger_than_the_queue_is_refused),
        cmocka_unit_test(test_bad_records_and_queues_are_refused_by_name),
    };
    return SAMPLE_RUN_IN_ROOT(root, "spindle-logapp", tests);
}
