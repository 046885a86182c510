/*
 * The persistence column of the multicast (smc_options.persist), with the
 * log played by the test: two members in one process (two engines over
 * shm, rows 0 and 1), row 0 the only sender, so sequence number k is
 * message k and the test's log position after k deliveries is k. The
 * durable position is the test's to move. Asserted:
 *   - nothing is persisted while nothing is durable, however much is
 *     delivered (600 delivery steps, more than the FIFO of marks holds);
 *   - a durable position moves each member's column to at most that
 *     position and, after the full FIFO was thinned, at most a few
 *     messages short of it;
 *   - the global frontier (the persisted upcall) only grows, never passes
 *     a member's column, and reaches the end;
 *   - with both predicate threads stopped (asleep for good), the thread
 *     that made a position durable moves the columns itself
 *     (smc_group_durable): each member's column reaches its peer's row and
 *     the frontier is reported at both; and it backs off, changing
 *     nothing, while another thread holds the engine lock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "smc/smc_impl.h"
#include "sst/sst.h"
#include "util/clock.h"

#define MESSAGES 600

struct member {
    struct sst_engine *engine;
    struct smc_group *group;
    uint64_t delivered; /* atomic */
    uint64_t frontier;  /* atomic: the last persisted upcall's */
    int wrong;          /* atomic: an upcall broke a rule */
};

static uint64_t durable; /* atomic: the log position both members have durable */

static void on_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    (void)m;
    struct member *member = ctx;
    __atomic_add_fetch(&member->delivered, n, __ATOMIC_RELEASE);
}

static uint64_t log_end(void *ctx)
{
    struct member *member = ctx;
    return __atomic_load_n(&member->delivered, __ATOMIC_ACQUIRE);
}

static uint64_t log_durable(void *ctx)
{
    (void)ctx;
    return __atomic_load_n(&durable, __ATOMIC_ACQUIRE);
}

static void on_persisted(void *ctx, uint32_t subgroup, uint64_t frontier)
{
    struct member *member = ctx;
    uint64_t last = __atomic_load_n(&member->frontier, __ATOMIC_RELAXED);
    if (subgroup != 0 || frontier <= last || frontier > log_durable(NULL) ||
        frontier > __atomic_load_n(&member->delivered, __ATOMIC_RELAXED))
        __atomic_store_n(&member->wrong, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&member->frontier, frontier, __ATOMIC_RELEASE);
}

static void start_pair(struct member m[2])
{
    struct tp_config config;
    memset(&config, 0, sizeof config);
    config.backend = "shm";
    config.group_name = "smc-frontier-test";
    config.failure_timeout_ms = 60000;
    struct smc_layout layout;
    memset(&layout, 0, sizeof layout);
    layout.num_members = 2;
    layout.members[1] = 1;
    layout.num_senders = 1;
    layout.window_size = 4;
    layout.max_payload = 8;
    layout.mode = SPINDLE_MODE_ATOMIC;
    struct sst_member_desc descs[2];
    memset(descs, 0, sizeof descs);
    for (uint32_t row = 0; row < 2; row++) {
        memset(&m[row], 0, sizeof m[row]);
        assert_int_equal(sst_engine_create(&config, NULL, &m[row].engine), 0);
        struct smc_options options = {.batching = true,
                                      .null_sends = true,
                                      .deliver = on_deliver,
                                      .deliver_ctx = &m[row],
                                      .persist_mark = log_end,
                                      .persist_durable = log_durable,
                                      .persisted = on_persisted};
        options.persist[0] = 1;
        assert_int_equal(
            smc_group_create(m[row].engine, &layout, 1, 2, row, &options, &m[row].group), 0);
        assert_int_equal(smc_group_export(m[row].group, &descs[row]), 0);
    }
    for (uint32_t row = 0; row < 2; row++) {
        assert_int_equal(smc_group_connect(m[row].group, descs, 5000, NULL), 0);
        assert_int_equal(smc_group_start(m[row].group), 0);
        assert_int_equal(sst_engine_start(m[row].engine), 0);
    }
}

static void stop_pair(struct member m[2])
{
    for (uint32_t row = 0; row < 2; row++)
        sst_engine_stop(m[row].engine);
    for (uint32_t row = 0; row < 2; row++) {
        smc_group_destroy(m[row].group);
        sst_engine_destroy(m[row].engine);
    }
}

static void wait_for(const uint64_t *counter, uint64_t want)
{
    uint64_t deadline = sp_now_ns() + 10ull * 1000000000ull;
    while (__atomic_load_n(counter, __ATOMIC_ACQUIRE) < want && sp_now_ns() < deadline) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    assert_true(__atomic_load_n(counter, __ATOMIC_ACQUIRE) >= want);
}

/* Makes position `to` durable and waits until both columns are within
 * `slack` below it (never above). */
static void make_durable(struct member m[2], uint64_t to, uint64_t slack)
{
    __atomic_store_n(&durable, to, __ATOMIC_RELEASE);
    uint64_t deadline = sp_now_ns() + 10ull * 1000000000ull;
    for (uint32_t row = 0; row < 2; row++) {
        uint64_t local = 0, global = 0;
        sst_engine_wake(m[row].engine);
        do {
            assert_int_equal(smc_group_persisted(m[row].group, 0, &local, &global), 0);
            assert_true(local <= to);
            assert_true(global <= local);
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        } while (local + slack < to && sp_now_ns() < deadline);
        assert_true(local + slack >= to);
    }
}

static void test_the_column_follows_the_durable_position(void **state)
{
    (void)state;
    struct member m[2];
    __atomic_store_n(&durable, 0, __ATOMIC_RELEASE);
    start_pair(m);
    /* One message a step: MESSAGES delivery steps, MESSAGES marks. */
    for (uint64_t i = 0; i < MESSAGES; i++) {
        void *slot;
        assert_int_equal(smc_reserve(m[0].group, 0, 8, 0, &slot), 0);
        memcpy(slot, &i, 8);
        assert_int_equal(smc_commit(m[0].group, 0), 0);
        wait_for(&m[0].delivered, i + 1);
        wait_for(&m[1].delivered, i + 1);
    }
    for (uint32_t row = 0; row < 2; row++) {
        uint64_t local = 1, global = 1;
        assert_int_equal(smc_group_persisted(m[row].group, 0, &local, &global), 0);
        assert_int_equal(local, 0);
        assert_int_equal(global, 0);
    }
    /* 600 marks through a FIFO of 256 thin it three times: the oldest
     * survivors lie 8 apart, the later ones 4, 2 and 1. */
    make_durable(m, 150, 7);
    make_durable(m, 301, 3);
    make_durable(m, 520, 0);
    make_durable(m, MESSAGES, 0);
    for (uint32_t row = 0; row < 2; row++) {
        wait_for(&m[row].frontier, MESSAGES);
        assert_int_equal(__atomic_load_n(&m[row].frontier, __ATOMIC_ACQUIRE), MESSAGES);
        assert_int_equal(__atomic_load_n(&m[row].wrong, __ATOMIC_ACQUIRE), 0);
    }
    stop_pair(m);
}

static uint64_t peer_column(struct member m[2], uint32_t row, uint32_t of_row)
{
    uint32_t offset = m[row].group->subgroups[0].persisted_offset;
    return sst_read_u64(m[row].group->table, of_row, offset);
}

static void test_the_durable_pass_pushes_the_column_without_the_predicate_thread(void **state)
{
    (void)state;
    enum { SENT = 12 };
    struct member m[2];
    __atomic_store_n(&durable, 0, __ATOMIC_RELEASE);
    start_pair(m);
    for (uint64_t i = 0; i < SENT; i++) {
        void *slot;
        assert_int_equal(smc_reserve(m[0].group, 0, 8, 0, &slot), 0);
        memcpy(slot, &i, 8);
        assert_int_equal(smc_commit(m[0].group, 0), 0);
    }
    wait_for(&m[0].delivered, SENT);
    wait_for(&m[1].delivered, SENT);
    /* The pass that delivered also took its mark; after the stop no
     * predicate thread runs again. */
    for (uint32_t row = 0; row < 2; row++)
        sst_engine_stop(m[row].engine);
    __atomic_store_n(&durable, SENT, __ATOMIC_RELEASE);

    /* Busy lock: nothing is done, the caller is told to wake. */
    sst_engine_lock(m[0].engine);
    assert_false(smc_group_durable(m[0].group));
    sst_engine_unlock(m[0].engine);
    uint64_t local = 1, global = 1;
    assert_int_equal(smc_group_persisted(m[0].group, 0, &local, &global), 0);
    assert_int_equal(local, 0);

    /* Row 0 first: its column moves and reaches row 1's table; the
     * frontier waits for row 1's column. */
    assert_true(smc_group_durable(m[0].group));
    assert_int_equal(smc_group_persisted(m[0].group, 0, &local, &global), 0);
    assert_int_equal(local, SENT);
    assert_int_equal(global, 0);
    assert_int_equal(peer_column(m, 1, 0), SENT);
    assert_int_equal(__atomic_load_n(&m[0].frontier, __ATOMIC_ACQUIRE), 0);
    /* Row 1: both columns are in, so its frontier is reported at once. */
    assert_true(smc_group_durable(m[1].group));
    assert_int_equal(peer_column(m, 0, 1), SENT);
    assert_int_equal(__atomic_load_n(&m[1].frontier, __ATOMIC_ACQUIRE), SENT);
    /* Row 0's next sync sees row 1's column. */
    assert_true(smc_group_durable(m[0].group));
    assert_int_equal(__atomic_load_n(&m[0].frontier, __ATOMIC_ACQUIRE), SENT);
    for (uint32_t row = 0; row < 2; row++) {
        assert_int_equal(smc_group_persisted(m[row].group, 0, &local, &global), 0);
        assert_int_equal(global, SENT);
        assert_int_equal(__atomic_load_n(&m[row].wrong, __ATOMIC_ACQUIRE), 0);
    }
    stop_pair(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_column_follows_the_durable_position),
        cmocka_unit_test(test_the_durable_pass_pushes_the_column_without_the_predicate_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
