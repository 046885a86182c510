/*
 * Logged delivery against a slow disk: through a log queue far smaller
 * than what is sent, every message is delivered and logged, the delivery
 * step stops at the queue's bound (the rest waits in the ring) and the
 * predicate thread never waits for the disk. The disk is held still until
 * the delivery step has stopped at the bound, so that the stop happens
 * however fast the disk and however slow the sender.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <spindle/spindle.h>

#include "group/group_impl.h"
#include "log/log.h"
#include "log/log_append.h"
#include "log_samples.h"
#include "util/clock.h"

#define MESSAGES 400
#define SIZE     60000 /* 24 MB in all through a 2 MiB queue */
/* Sent before the disk takes anything: more than the queue holds (two
 * records of the largest size: about 35 of these), fewer than the ring's
 * window of 64. */
#define HELD_AFTER 48

static char root[64];
static uint64_t delivered; /* atomic */

static void on_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    (void)ctx;
    (void)m;
    __atomic_add_fetch(&delivered, n, __ATOMIC_RELEASE);
}

static void test_a_small_log_queue_holds_delivery_back(void **state)
{
    (void)state;
    char bootstrap[128], log_dir[128];
    snprintf(bootstrap, sizeof bootstrap, "%s/bootstrap", root);
    snprintf(log_dir, sizeof log_dir, "%s/log", root);
    static const uint32_t self[] = {0};
    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.bootstrap = bootstrap;
    o.deliver = on_deliver;
    o.log_dir = log_dir;
    o.logged_subgroups = self; /* subgroup 0 */
    o.num_logged_subgroups = 1;
    struct spindle_subgroup_config sg = {self, 1, self, 1, 64, 65536, SPINDLE_MODE_ATOMIC};
    struct group_test_options test = {.log_queue_bytes = 2 * LOG_MAX_RECORD};
    spindle_group_t *g;
    assert_int_equal(group_create_with(&o, &sg, 1, &test, &g), 0);
    static uint8_t message[SIZE];
    struct spindle_stats stats;
    uint64_t deadline = sp_now_ns() + 60000000000ull;
    /* The disk takes nothing until the delivery step has stopped at the
     * full queue: more messages than the queue holds are sent first. */
    log_test_hold_syncs(true);
    for (uint32_t i = 0; i < MESSAGES; i++) {
        memset(message, (int)(i & 0xff), sizeof message);
        assert_int_equal(spindle_send(g, 0, message, sizeof message, 0), 0);
        if (i + 1 == HELD_AFTER) {
            do {
                assert_int_equal(spindle_group_stats(g, &stats), 0);
                assert_true(sp_now_ns() < deadline);
            } while (stats.log_deliveries_held == 0);
            log_test_hold_syncs(false);
        }
    }
    assert_int_equal(spindle_flush(g, 60000), 0);
    do {
        assert_int_equal(spindle_group_stats(g, &stats), 0);
        assert_true(sp_now_ns() < deadline);
    } while (stats.log_records_durable < MESSAGES + 1);
    assert_int_equal(__atomic_load_n(&delivered, __ATOMIC_ACQUIRE), MESSAGES);
    assert_int_equal(stats.log_records_durable, MESSAGES + 1);
    assert_true(stats.log_deliveries_held > 0);
    assert_int_equal(stats.log_queue_waits, 0);
    assert_int_equal(spindle_group_shutdown(g, 10000), 0);
    spindle_group_destroy(g);
    /* The log holds the view, then every message in order. */
    struct log *log;
    assert_int_equal(log_open(log_dir, 0, &log, NULL), 0);
    struct log_reader reader;
    assert_int_equal(log_reader_open(&reader, log), 0);
    struct log_record record;
    assert_int_equal(log_reader_next(&reader, &record), 1);
    assert_int_equal(record.type, LOG_REC_VIEW);
    for (uint32_t i = 0; i < MESSAGES; i++) {
        assert_int_equal(log_reader_next(&reader, &record), 1);
        assert_int_equal(record.type, LOG_REC_MESSAGE);
        assert_int_equal(record.message.sender_index, i);
        assert_int_equal(record.message.length, SIZE);
        assert_int_equal(record.message.payload[SIZE - 1], i & 0xff);
    }
    assert_int_equal(log_reader_next(&reader, &record), 0);
    log_reader_close(&reader);
    log_close(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_small_log_queue_holds_delivery_back),
    };
    return SAMPLE_RUN_IN_ROOT(root, "spindle-logdeliv", tests);
}
