/*
 * No doorbell for a dedicated poller (sst_table.c, enqueue): a predicate
 * thread that polls on a dedicated CPU never sleeps, announces it in its
 * row header's SLEEP word, and pushers then post to it without ringing;
 * a member that polls adaptively is still rung. Three engines in one
 * process over shm: row 1 polls on a CPU of its own, row 2 has no thread
 * (it would sleep); row 0's two peers go through a shim that counts
 * doorbell_ring calls. The dedicated engine also stops waking itself
 * (sst_engine_wake rings nothing).
 */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "sst/sst_impl.h"

#define ROWS 3

static const struct tp_ops *real_ops;
static struct tp_ops shim_ops;
static unsigned rings_of_row[ROWS];
static struct tp_peer *peer_of[ROWS];

static int shim_ring(struct tp_peer *peer)
{
    for (uint32_t row = 0; row < ROWS; row++)
        if (peer_of[row] == peer)
            rings_of_row[row]++;
    return real_ops->doorbell_ring(peer);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A CPU this process may run on. */
static uint32_t some_cpu(void)
{
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    for (uint32_t cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &set))
            return cpu;
    fail_msg("no CPU in the affinity mask");
    return 0;
}

/* The value of a counter of row `row` as seen in table, once it equals
 * want (or after 10 s). */
static uint64_t wait_for(struct sst_table *table, uint32_t row, uint32_t offset, uint64_t want)
{
    uint64_t deadline = now_ms() + 10000;
    uint64_t value;
    while ((value = sst_read_u64(table, row, offset)) != want && now_ms() < deadline) {
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    return value;
}

static void test_a_dedicated_poller_is_posted_to_without_a_ring(void **state)
{
    (void)state;
    struct sst_engine *engines[ROWS];
    struct sst_table *tables[ROWS];
    struct sst_member_desc descs[ROWS];
    memset(descs, 0, sizeof descs);
    struct tp_config config;
    memset(&config, 0, sizeof config);
    config.backend = "shm";
    config.group_name = "sst-polling-ring-test";
    config.failure_timeout_ms = 60000;
    struct sst_schema schema;
    sst_schema_init(&schema);
    int counter = sst_schema_add_counter(&schema);
    assert_true(counter >= 0);
    for (uint32_t row = 0; row < ROWS; row++) {
        struct sst_engine_options options;
        sst_engine_options_default(&options);
        if (row == 1) {
            options.poll_dedicated = true;
            options.poll_cpu = some_cpu();
        }
        assert_int_equal(sst_engine_create(&config, &options, &engines[row]), 0);
        assert_int_equal(sst_table_create(engines[row], &schema, ROWS, row, &tables[row]), 0);
        assert_int_equal(sst_table_export(tables[row], &descs[row]), 0);
    }
    for (uint32_t row = 0; row < ROWS; row++)
        assert_int_equal(sst_table_connect(tables[row], descs, 5000, NULL), 0);

    /* Row 1's thread announces its polling in its row header. */
    assert_int_equal(sst_engine_start(engines[1]), 0);
    uint64_t sleep = SST_SLEEP_POLLING;
    assert_int_equal(wait_for(tables[0], 1, SST_HEADER_SLEEP, sleep), sleep);
    assert_int_equal(sst_read_u64(tables[0], 2, SST_HEADER_SLEEP), 0);

    for (uint32_t row = 1; row < ROWS; row++) {
        peer_of[row] = engines[0]->peers[tables[0]->peer_of_row[row]].peer;
        real_ops = peer_of[row]->ops;
        peer_of[row]->ops = &shim_ops;
    }
    shim_ops = *real_ops;
    shim_ops.doorbell_ring = shim_ring;

    uint32_t offset = sst_column_offset(&schema, counter);
    for (uint64_t value = 1; value <= 3; value++) {
        sst_engine_lock(engines[0]);
        sst_write_u64(tables[0], offset, value);
        assert_int_equal(sst_push(tables[0], offset, 8, NULL, 0), 0);
        sst_engine_unlock(engines[0]);
    }

    /* Both peers hold the value; only the one that may sleep was rung. */
    assert_int_equal(wait_for(tables[1], 0, offset, 3), 3);
    assert_int_equal(sst_read_u64(tables[2], 0, offset), 3);
    assert_int_equal(rings_of_row[1], 0);
    assert_int_equal(rings_of_row[2], 3);

    /* Nor does the dedicated engine's own process wake it: its doorbell
     * sequence stays where it was. */
    uint64_t token = tp_doorbell_arm(engines[1]->endpoint);
    sst_engine_wake(engines[1]);
    assert_int_equal(tp_doorbell_arm(engines[1]->endpoint), token);

    for (uint32_t row = 1; row < ROWS; row++)
        peer_of[row]->ops = real_ops;
    for (uint32_t row = 0; row < ROWS; row++)
        sst_engine_destroy(engines[row]); /* stops its thread, destroys its table */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_dedicated_poller_is_posted_to_without_a_ring),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
