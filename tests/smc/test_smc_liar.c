/*
 * A peer that breaks the protocol is failed, not believed. Two members in
 * one process (two engines over shm, rows 0 and 1), subgroup: both
 * members, row 0 the only sender, window 4, max_payload 8. The test plays
 * the liar by writing into the other member's copy of the liar's row or
 * ring, as the liar's one-sided writes would, and asserts that the member
 * reports the liar's row failed with SPINDLE_EPROTO and delivers nothing
 * of what it was told:
 *   - a slot whose length exceeds max_payload,
 *   - a sent_num past SMC_COUNTER_MAX,
 *   - a sent_num that goes back,
 *   - a member that acknowledges more of a sender's positions than the
 *     sender published,
 *   - a member whose persisted_num (persistence frontier) passes what it
 *     can have delivered, or goes back;
 *   - point-to-point rings (smc_p2p.h): a p2p_sent past the window, a slot
 *     whose length exceeds SPINDLE_P2P_MAX_PAYLOAD, a slot that names
 *     another message; and a credit past what was sent refuses the send.
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
#include "sst/sst_impl.h"
#include "util/clock.h"

struct member {
    struct sst_engine *engine;
    struct smc_group *group;
    uint64_t delivered;     /* atomic */
    uint64_t p2p_delivered; /* atomic */
    int32_t failed_row;     /* atomic: -1 until a failure is reported */
    int failed_error;       /* atomic */
};

static void on_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    (void)m;
    struct member *member = ctx;
    __atomic_add_fetch(&member->delivered, n, __ATOMIC_RELEASE);
}

static int on_p2p(void *ctx, uint32_t row, const struct smc_p2p_slot *header, const void *data)
{
    (void)row;
    (void)header;
    (void)data;
    struct member *member = ctx;
    __atomic_add_fetch(&member->p2p_delivered, 1, __ATOMIC_RELEASE);
    return 0;
}

static void on_failure(void *ctx, struct sst_table *table, uint32_t row, int error)
{
    (void)table;
    struct member *member = ctx;
    __atomic_store_n(&member->failed_error, error, __ATOMIC_RELAXED);
    __atomic_store_n(&member->failed_row, (int32_t)row, __ATOMIC_RELEASE);
}

/* A log that is always durable (smc_options.persist_mark/durable). */
static uint64_t log_position(void *ctx)
{
    (void)ctx;
    return 0;
}

/* Creates n members of one group with the single subgroup layout, on
 * shm, and connects them (their engines not started). */
static void create_members(struct member *m, uint32_t n, const struct smc_layout *layout,
                           bool persist)
{
    struct tp_config config;
    memset(&config, 0, sizeof config);
    config.backend = "shm";
    config.group_name = "smc-liar-test";
    config.failure_timeout_ms = 60000; /* only the checks fail anyone here */
    struct sst_member_desc descs[3];
    memset(descs, 0, sizeof descs);
    assert_true(n <= 3);
    for (uint32_t row = 0; row < n; row++) {
        memset(&m[row], 0, sizeof m[row]);
        m[row].failed_row = -1;
        assert_int_equal(sst_engine_create(&config, NULL, &m[row].engine), 0);
        sst_engine_on_failure(m[row].engine, on_failure, &m[row]);
        struct smc_options options = {.batching = true,
                                      .null_sends = true,
                                      .deliver = on_deliver,
                                      .deliver_ctx = &m[row],
                                      .p2p_deliver = on_p2p};
        if (persist) {
            options.persist[0] = 1; /* subgroup 0 */
            options.persist_mark = log_position;
            options.persist_durable = log_position;
        }
        assert_int_equal(
            smc_group_create(m[row].engine, layout, 1, n, row, &options, &m[row].group), 0);
        assert_int_equal(smc_group_export(m[row].group, &descs[row]), 0);
    }
    for (uint32_t row = 0; row < n; row++)
        assert_int_equal(smc_group_connect(m[row].group, descs, 5000, NULL), 0);
}

/* A subgroup of n members whose first senders send, window 4, 8 bytes. */
static void small_layout(struct smc_layout *layout, uint32_t n, uint32_t senders)
{
    memset(layout, 0, sizeof *layout);
    layout->num_members = n;
    for (uint32_t row = 0; row < n; row++)
        layout->members[row] = layout->senders[row] = row;
    layout->num_senders = senders;
    layout->window_size = 4;
    layout->max_payload = 8;
    layout->mode = SPINDLE_MODE_ATOMIC;
}

static void start_pair_with(struct member m[2], bool persist)
{
    struct smc_layout layout;
    small_layout(&layout, 2, 1);
    create_members(m, 2, &layout, persist);
    for (uint32_t row = 0; row < 2; row++) {
        assert_int_equal(smc_group_start(m[row].group), 0);
        assert_int_equal(sst_engine_start(m[row].engine), 0);
    }
}

static void start_pair(struct member m[2])
{
    start_pair_with(m, false);
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

/* Writes value at offset of `row` in member `at`'s copy of the table, as
 * row's owner would with a one-sided write. */
static void write_row(struct member *at, uint32_t row, uint32_t offset, uint64_t value)
{
    struct sst_table *table = smc_group_table(at->group);
    __atomic_store_n((uint64_t *)(void *)(sst_row(table, row) + offset), value, __ATOMIC_RELEASE);
    sst_engine_alert(at->engine);
}

/* Waits (bounded) for member to report row failed; asserts the error. */
static void expect_failed(struct member *member, int32_t row)
{
    uint64_t deadline = sp_now_ns() + 10ull * 1000000000ull;
    while (__atomic_load_n(&member->failed_row, __ATOMIC_ACQUIRE) < 0 && sp_now_ns() < deadline) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(__atomic_load_n(&member->failed_row, __ATOMIC_ACQUIRE), row);
    assert_int_equal(__atomic_load_n(&member->failed_error, __ATOMIC_RELAXED), SPINDLE_EPROTO);
}

static const struct smc_subgroup *subgroup0(struct member *member)
{
    return &member->group->subgroups[0];
}

static void test_a_slot_longer_than_max_payload_fails_its_sender(void **state)
{
    (void)state;
    struct member m[2];
    start_pair(m);
    /* Row 0's message at position 0, 9 bytes long, in member 1's copy of
     * its ring, then its sent_num. */
    uint8_t *slot = smc_ring(m[1].group, subgroup0(&m[1]), 0);
    __atomic_store_n((uint64_t *)(void *)slot, smc_header(0, 9), __ATOMIC_RELEASE);
    write_row(&m[1], 0, subgroup0(&m[1])->sent_offset, 1);
    expect_failed(&m[1], 0);
    assert_int_equal(__atomic_load_n(&m[1].delivered, __ATOMIC_ACQUIRE), 0);
    stop_pair(m);
}

static void test_a_counter_past_the_bound_fails_its_owner(void **state)
{
    (void)state;
    struct member m[2];
    start_pair(m);
    write_row(&m[1], 0, subgroup0(&m[1])->sent_offset, SMC_COUNTER_MAX + 1);
    expect_failed(&m[1], 0);
    stop_pair(m);
}

static void test_a_counter_going_back_fails_its_owner(void **state)
{
    (void)state;
    struct member m[2];
    start_pair(m);
    /* Three null positions (no slot written), taken by member 1. */
    write_row(&m[1], 0, subgroup0(&m[1])->sent_offset, 3);
    struct sst_table *table = smc_group_table(m[1].group);
    uint64_t deadline = sp_now_ns() + 10ull * 1000000000ull;
    while (sst_read_u64(table, 1, subgroup0(&m[1])->received_offset) != 3 &&
           sp_now_ns() < deadline) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(sst_read_u64(table, 1, subgroup0(&m[1])->received_offset), 3);
    assert_int_equal(__atomic_load_n(&m[1].failed_row, __ATOMIC_ACQUIRE), -1);
    write_row(&m[1], 0, subgroup0(&m[1])->sent_offset, 2);
    expect_failed(&m[1], 0);
    stop_pair(m);
}

static void test_an_acknowledgement_of_more_than_was_sent_fails_its_owner(void **state)
{
    (void)state;
    struct member m[2];
    start_pair(m);
    /* Member 1 claims 5 positions of row 0, which published none. */
    write_row(&m[0], 1, subgroup0(&m[0])->received_offset, 5);
    expect_failed(&m[0], 1);
    assert_int_equal(__atomic_load_n(&m[0].delivered, __ATOMIC_ACQUIRE), 0);
    stop_pair(m);
}

/* ---- point-to-point rings ------------------------------------------------ */

/* Member 1's copy of the slot of message position in row 0's ring to it. */
static uint8_t *p2p_slot_from_row0(struct member *at, uint64_t position)
{
    const struct smc_p2p *p2p = &at->group->p2p;
    return sst_side(smc_group_table(at->group)) + p2p->in_at[0] +
           (position % p2p->window) * p2p->slot_bytes;
}

/* Row 0 tells member 1 it wrote count messages into its ring. */
static void p2p_publish_from_row0(struct member *at, uint64_t count)
{
    write_row(at, 0, at->group->p2p.sent_offset + 8 * 1, count);
}

static void test_a_p2p_count_past_the_window_fails_its_sender(void **state)
{
    (void)state;
    struct member m[2];
    start_pair(m);
    p2p_publish_from_row0(&m[1], m[1].group->p2p.window + 1);
    expect_failed(&m[1], 0);
    assert_int_equal(__atomic_load_n(&m[1].p2p_delivered, __ATOMIC_ACQUIRE), 0);
    stop_pair(m);
}

static void test_a_p2p_slot_longer_than_the_maximum_fails_its_sender(void **state)
{
    (void)state;
    struct member m[2];
    start_pair(m);
    struct smc_p2p_slot header = {SMC_P2P_MESSAGE, SPINDLE_P2P_MAX_PAYLOAD + 1, 0};
    smc_p2p_slot_encode(p2p_slot_from_row0(&m[1], 0), 0, &header);
    p2p_publish_from_row0(&m[1], 1);
    expect_failed(&m[1], 0);
    assert_int_equal(__atomic_load_n(&m[1].p2p_delivered, __ATOMIC_ACQUIRE), 0);
    stop_pair(m);
}

static void test_a_p2p_slot_of_another_lap_fails_its_sender(void **state)
{
    (void)state;
    struct member m[2];
    start_pair(m);
    /* The slot of message 0 still holds what message -window would have
     * left there: a stale lap, not the message announced. */
    uint32_t window = m[1].group->p2p.window;
    struct smc_p2p_slot header = {SMC_P2P_MESSAGE, 8, 0};
    smc_p2p_slot_encode(p2p_slot_from_row0(&m[1], 0), window, &header);
    p2p_publish_from_row0(&m[1], 1);
    expect_failed(&m[1], 0);
    assert_int_equal(__atomic_load_n(&m[1].p2p_delivered, __ATOMIC_ACQUIRE), 0);
    stop_pair(m);
}

static void test_a_p2p_credit_past_what_was_sent_refuses_the_send(void **state)
{
    (void)state;
    struct member m[2];
    start_pair(m);
    /* A message goes through first: row 1's window is published. */
    struct smc_p2p_slot header = {SMC_P2P_MESSAGE, 8, 0};
    uint64_t payload = 42;
    assert_int_equal(smc_p2p_send(m[0].group, 1, &header, &payload, false, false,
                                  sp_now_ns() + 10ull * 1000000000ull),
                     0);
    /* Once member 1's honest credit (1) is in, it claims 5 taken of the
     * one row 0 sent. */
    struct sst_table *table = smc_group_table(m[0].group);
    uint32_t credit = m[0].group->p2p.received_offset + 8 * 0;
    uint64_t deadline = sp_now_ns() + 10ull * 1000000000ull;
    while (sst_read_u64(table, 1, credit) != 1 && sp_now_ns() < deadline) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(sst_read_u64(table, 1, credit), 1);
    write_row(&m[0], 1, credit, 5);
    int rc = smc_p2p_send(m[0].group, 1, &header, &payload, true, false, UINT64_MAX);
    if (rc == SPINDLE_EPROTO) {
        assert_non_null(strstr(spindle_errmsg(), "claims 5 messages taken of 1 sent"));
    } else {
        /* The predicate found the lie first and failed the row. */
        assert_int_equal(rc, SPINDLE_EPEERFAILED);
        expect_failed(&m[0], 1);
    }
    stop_pair(m);
}

/* Member 0 sends n messages and waits until both delivered them. */
static void deliver_both(struct member m[2], uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        void *slot;
        assert_int_equal(smc_reserve(m[0].group, 0, 8, 0, &slot), 0);
        memset(slot, 0, 8);
        assert_int_equal(smc_commit(m[0].group, 0), 0);
    }
    uint64_t deadline = sp_now_ns() + 10ull * 1000000000ull;
    while ((__atomic_load_n(&m[0].delivered, __ATOMIC_ACQUIRE) < n ||
            __atomic_load_n(&m[1].delivered, __ATOMIC_ACQUIRE) < n) &&
           sp_now_ns() < deadline) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(__atomic_load_n(&m[1].delivered, __ATOMIC_ACQUIRE), n);
}

static void test_a_persisted_num_past_what_was_delivered_fails_its_owner(void **state)
{
    (void)state;
    struct member m[2];
    start_pair_with(m, true);
    deliver_both(m, 2);
    /* Two sequence numbers delivered, so member 0 (which received just
     * those) knows nobody can have persisted three. */
    uint64_t global = 0, local = 0;
    uint64_t deadline = sp_now_ns() + 10ull * 1000000000ull;
    while (global < 2 && sp_now_ns() < deadline) {
        assert_int_equal(smc_group_persisted(m[0].group, 0, &local, &global), 0);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(global, 2);
    assert_int_equal(__atomic_load_n(&m[0].failed_row, __ATOMIC_ACQUIRE), -1);
    write_row(&m[0], 1, subgroup0(&m[0])->persisted_offset, 3);
    expect_failed(&m[0], 1);
    assert_int_equal(smc_group_persisted(m[0].group, 0, &local, &global), 0);
    assert_int_equal(global, 2);
    stop_pair(m);
}

static void test_a_persisted_num_going_back_fails_its_owner(void **state)
{
    (void)state;
    struct member m[2];
    start_pair_with(m, true);
    deliver_both(m, 2);
    uint64_t global = 0, local = 0;
    uint64_t deadline = sp_now_ns() + 10ull * 1000000000ull;
    while (global < 2 && sp_now_ns() < deadline) {
        assert_int_equal(smc_group_persisted(m[0].group, 0, &local, &global), 0);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(global, 2);
    write_row(&m[0], 1, subgroup0(&m[0])->persisted_offset, 1);
    expect_failed(&m[0], 1);
    stop_pair(m);
}

/* ---- where a member can write --------------------------------------------- */

/* Posts 8 bytes of member `from`'s side region to offset of row's side
 * region, through from's import of it, as a member with a wrong offset
 * would. */
static int post_side(struct member *from, uint32_t row, uint64_t offset)
{
    struct sst_table *table = smc_group_table(from->group);
    struct tp_peer *peer = from->engine->peers[table->peer_of_row[row]].peer;
    struct tp_write write = {table->side, table->side_mr, table->side_rmr[row], offset, 8};
    return tp_post_writes(peer, &write, 1, 0, 0);
}

static uint64_t side_word(struct member *at, uint64_t offset)
{
    return __atomic_load_n((uint64_t *)(void *)(sst_side(smc_group_table(at->group)) + offset),
                           __ATOMIC_ACQUIRE);
}

/* On shm, sender 0 imports of member 2's side region only its own slice:
 * its ring and its point-to-point ring there. A write into sender 1's
 * ring or point-to-point ring at member 2 is refused and leaves member
 * 2's bytes as they were; a write into its own ring lands. */
static void test_a_sender_writes_only_its_own_rings_at_a_peer(void **state)
{
    (void)state;
    struct member m[3];
    struct smc_layout layout;
    small_layout(&layout, 3, 2);
    create_members(m, 3, &layout, false);
    const struct smc_subgroup *at2 = subgroup0(&m[2]);
    memset(sst_side(smc_group_table(m[0].group)), 0xab, 8);

    assert_int_equal(post_side(&m[0], 2, at2->ring_at[1]), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "outside the slice"));
    assert_int_equal(post_side(&m[0], 2, at2->ring_at[1] + at2->ring_stride - 8), SPINDLE_EINVAL);
    assert_int_equal(post_side(&m[0], 2, m[2].group->p2p.in_at[1]), SPINDLE_EINVAL);
    assert_int_equal(side_word(&m[2], at2->ring_at[1]), 0);
    assert_int_equal(side_word(&m[2], at2->ring_at[1] + at2->ring_stride - 8), 0);
    assert_int_equal(side_word(&m[2], m[2].group->p2p.in_at[1]), 0);

    /* Its own ring and point-to-point ring at member 2 it may write. */
    assert_int_equal(subgroup0(&m[0])->ring_at_peer[1], at2->ring_at[0]);
    assert_int_equal(post_side(&m[0], 2, at2->ring_at[0]), 0);
    assert_int_equal(side_word(&m[2], at2->ring_at[0]), 0xababababababababull);
    assert_int_equal(post_side(&m[0], 2, m[0].group->p2p.at_peer[2]), 0);
    assert_int_equal(m[0].group->p2p.at_peer[2], m[2].group->p2p.in_at[0]);
    assert_int_equal(side_word(&m[2], m[2].group->p2p.in_at[0]), 0xababababababababull);
    for (uint32_t row = 0; row < 3; row++) {
        smc_group_destroy(m[row].group);
        sst_engine_destroy(m[row].engine);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_slot_longer_than_max_payload_fails_its_sender),
        cmocka_unit_test(test_a_counter_past_the_bound_fails_its_owner),
        cmocka_unit_test(test_a_counter_going_back_fails_its_owner),
        cmocka_unit_test(test_an_acknowledgement_of_more_than_was_sent_fails_its_owner),
        cmocka_unit_test(test_a_persisted_num_past_what_was_delivered_fails_its_owner),
        cmocka_unit_test(test_a_persisted_num_going_back_fails_its_owner),
        cmocka_unit_test(test_a_p2p_count_past_the_window_fails_its_sender),
        cmocka_unit_test(test_a_p2p_slot_longer_than_the_maximum_fails_its_sender),
        cmocka_unit_test(test_a_p2p_slot_of_another_lap_fails_its_sender),
        cmocka_unit_test(test_a_p2p_credit_past_what_was_sent_refuses_the_send),
        cmocka_unit_test(test_a_sender_writes_only_its_own_rings_at_a_peer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
