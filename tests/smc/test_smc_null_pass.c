/*
 * The delivery rule (smc_predicate.c, smc_deliver_range): a member passes a
 * null it holds without waiting for every member to hold it; a message
 * still waits until every member holds it. Three members in one process
 * over shm, rows 0 and 1 send (ranks 0 and 1), row 2 receives only; row
 * 2's engine never runs and the test writes its row in the others' copies,
 * as its one-sided writes would. Row 1 sends one message (sequence 1); row
 * 0 answers with a null for its position 0 (sequence 0, Spindle 3.3). Row
 * 2 reports holding row 1's message but not row 0's null: rows 0 and 1
 * deliver the message. Under the rule that every position must be stable,
 * they could not (sequence 0 is missing at row 2).
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

struct member {
    struct sst_engine *engine;
    struct smc_group *group;
    uint64_t delivered; /* atomic */
    uint64_t seq;       /* atomic: sequence number of the last delivery */
    int32_t failed_row; /* atomic: -1 until a failure is reported */
};

static void on_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    struct member *member = ctx;
    __atomic_store_n(&member->seq, m[n - 1].seq, __ATOMIC_RELAXED);
    __atomic_add_fetch(&member->delivered, n, __ATOMIC_RELEASE);
}

static void on_failure(void *ctx, struct sst_table *table, uint32_t row, int error)
{
    (void)table;
    (void)error;
    struct member *member = ctx;
    __atomic_store_n(&member->failed_row, (int32_t)row, __ATOMIC_RELEASE);
}

static void create_members(struct member *m)
{
    struct tp_config config;
    memset(&config, 0, sizeof config);
    config.backend = "shm";
    config.group_name = "smc-null-pass-test";
    config.failure_timeout_ms = 60000; /* row 2 never beats */
    struct smc_layout layout;
    memset(&layout, 0, sizeof layout);
    layout.num_members = 3;
    for (uint32_t row = 0; row < 3; row++)
        layout.members[row] = layout.senders[row] = row;
    layout.num_senders = 2;
    layout.window_size = 4;
    layout.max_payload = 8;
    layout.mode = SPINDLE_MODE_ATOMIC;
    struct sst_member_desc descs[3];
    memset(descs, 0, sizeof descs);
    for (uint32_t row = 0; row < 3; row++) {
        memset(&m[row], 0, sizeof m[row]);
        m[row].failed_row = -1;
        assert_int_equal(sst_engine_create(&config, NULL, &m[row].engine), 0);
        sst_engine_on_failure(m[row].engine, on_failure, &m[row]);
        struct smc_options options = {
            .batching = true, .null_sends = true, .deliver = on_deliver, .deliver_ctx = &m[row]};
        assert_int_equal(
            smc_group_create(m[row].engine, &layout, 1, 3, row, &options, &m[row].group), 0);
        assert_int_equal(smc_group_export(m[row].group, &descs[row]), 0);
    }
    for (uint32_t row = 0; row < 3; row++)
        assert_int_equal(smc_group_connect(m[row].group, descs, 5000, NULL), 0);
}

/* Row 2's received_num of sender rank s, in member at's copy of row 2. */
static void write_row2_received(struct member *at, uint32_t s, uint64_t value)
{
    const struct smc_subgroup *sub = &at->group->subgroups[0];
    struct sst_table *table = smc_group_table(at->group);
    __atomic_store_n((uint64_t *)(void *)(sst_row(table, 2) + sub->received_offset + 8 * s), value,
                     __ATOMIC_RELEASE);
    sst_engine_alert(at->engine);
}

static bool wait_for(const uint64_t *counter, uint64_t value)
{
    uint64_t deadline = sp_now_ns() + 10ull * 1000000000ull;
    while (__atomic_load_n(counter, __ATOMIC_ACQUIRE) < value && sp_now_ns() < deadline) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return __atomic_load_n(counter, __ATOMIC_ACQUIRE) >= value;
}

static void test_a_null_held_here_is_passed_before_every_member_holds_it(void **state)
{
    (void)state;
    struct member m[3];
    create_members(m);
    for (uint32_t row = 0; row < 2; row++) {
        assert_int_equal(smc_group_start(m[row].group), 0);
        assert_int_equal(sst_engine_start(m[row].engine), 0);
    }
    void *slot;
    assert_int_equal(smc_reserve(m[1].group, 0, 8, 0, &slot), 0);
    memset(slot, 7, 8);
    assert_int_equal(smc_commit(m[1].group, 0), 0);
    /* Once row 0 has row 1's message and has answered with its null (row
     * 1 holds it), row 2 says it holds the message, never the null. */
    struct sst_table *table1 = smc_group_table(m[1].group);
    const struct smc_subgroup *sub1 = &m[1].group->subgroups[0];
    uint64_t deadline = sp_now_ns() + 10ull * 1000000000ull;
    while ((sst_read_u64(table1, 0, sub1->received_offset + 8) < 1 ||
            sst_read_u64(table1, 1, sub1->received_offset) < 1) &&
           sp_now_ns() < deadline) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    assert_true(sst_read_u64(table1, 0, sub1->received_offset + 8) >= 1);
    for (uint32_t row = 0; row < 2; row++)
        write_row2_received(&m[row], 1, 1);
    assert_true(wait_for(&m[0].delivered, 1));
    assert_true(wait_for(&m[1].delivered, 1));
    assert_int_equal(__atomic_load_n(&m[0].seq, __ATOMIC_RELAXED), 1);
    assert_int_equal(__atomic_load_n(&m[1].seq, __ATOMIC_RELAXED), 1);
    /* Row 2 still lacks sequence 0, and nobody was taken for a liar. */
    assert_int_equal(sst_read_u64(table1, 2, sub1->received_offset), 0);
    assert_int_equal(__atomic_load_n(&m[0].failed_row, __ATOMIC_ACQUIRE), -1);
    assert_int_equal(__atomic_load_n(&m[1].failed_row, __ATOMIC_ACQUIRE), -1);
    for (uint32_t row = 0; row < 2; row++)
        sst_engine_stop(m[row].engine);
    for (uint32_t row = 0; row < 3; row++) {
        smc_group_destroy(m[row].group);
        sst_engine_destroy(m[row].engine);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_null_held_here_is_passed_before_every_member_holds_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
