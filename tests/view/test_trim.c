/* Ragged-edge trim: hand-checked cases and a randomized property test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/error.h"
#include "view/trim.h"

#define ROWS(...) ((const uint64_t[]){__VA_ARGS__})

static void test_all_senders_alive_failed_observer(void **state)
{
    (void)state;
    /* Rows 0,1 send; row 2 (a receiver only) failed. Row 2's counts are
     * garbage on purpose: failed rows must be ignored. */
    struct trim_input in = {.num_members = 3,
                            .num_senders = 2,
                            .sender_row = (const uint32_t[]){0, 1},
                            .received = ROWS(3, 2, 2, 3, 0, 0),
                            .failed_mask = 0x4};
    struct trim_result out;
    assert_int_equal(trim_compute(&in, &out), 0);
    assert_int_equal(out.num_survivors, 2);
    assert_int_equal(out.trim[0], 2);
    assert_int_equal(out.trim[1], 2);
    assert_int_equal(out.delivered_total, 4); /* rounds 0 and 1 complete */
    assert_int_equal(out.sender_delivered[0], 2);
    assert_int_equal(out.sender_delivered[1], 2);
    assert_int_equal(out.sender_known[0], 3);
    assert_int_equal(out.sender_known[1], 3);
    assert_false(out.sender_failed[0]);
}

static void test_failed_sender_cuts_delivery_at_its_trim(void **state)
{
    (void)state;
    /* Senders rows 0,1; sender 1 failed; row 2 survives. */
    struct trim_input in = {.num_members = 3,
                            .num_senders = 2,
                            .sender_row = (const uint32_t[]){0, 1},
                            .received = ROWS(5, 1, 9, 9, 4, 3),
                            .failed_mask = 0x2};
    struct trim_result out;
    assert_int_equal(trim_compute(&in, &out), 0);
    assert_int_equal(out.trim[0], 4);
    assert_int_equal(out.trim[1], 1);
    /* seq 3 = s1m1 is missing at row 0: it is skipped, and s0's
     * positions 2 and 3 (seq 4, 6) are delivered after it. */
    assert_int_equal(out.delivered_total, 7);
    assert_int_equal(out.sender_delivered[0], 4);
    assert_int_equal(out.sender_delivered[1], 1);
    assert_true(out.sender_failed[1]);
    assert_int_equal(out.sender_known[1], 3); /* s1 m1, m2 are dropped */
}

static void test_surviving_sender_gap_skips_only_its_positions(void **state)
{
    (void)state;
    /* Three senders, all alive; row 3 (receiver) failed. Row 1 lacks
     * sender 1's positions 1..3: they are skipped (resent in the next
     * view), and rounds 1..3 of senders 0 and 2, which every survivor
     * holds, are delivered. */
    struct trim_input in = {.num_members = 4,
                            .num_senders = 3,
                            .sender_row = (const uint32_t[]){0, 1, 2},
                            .received = ROWS(4, 4, 4, 4, 1, 4, 4, 4, 4, 0, 0, 0),
                            .failed_mask = 0x8};
    struct trim_result out;
    assert_int_equal(trim_compute(&in, &out), 0);
    assert_int_equal(out.delivered_total, 12); /* through seq 11 = s2m3 */
    assert_int_equal(out.sender_delivered[0], 4);
    assert_int_equal(out.sender_delivered[1], 1);
    assert_int_equal(out.sender_delivered[2], 4);
}

static void test_empty_and_single_sender_cases(void **state)
{
    (void)state;
    struct trim_result out;
    /* Nothing received at all. */
    struct trim_input none = {.num_members = 2,
                              .num_senders = 2,
                              .sender_row = (const uint32_t[]){0, 1},
                              .received = ROWS(0, 0, 0, 0)};
    assert_int_equal(trim_compute(&none, &out), 0);
    assert_int_equal(out.delivered_total, 0);
    /* Sender 0 has nothing but sender 1 has plenty: its 7 are delivered,
     * through seq 13 = s1m6. */
    struct trim_input blocked = none;
    blocked.received = ROWS(0, 7, 0, 7);
    assert_int_equal(trim_compute(&blocked, &out), 0);
    assert_int_equal(out.delivered_total, 14);
    assert_int_equal(out.sender_delivered[0], 0);
    assert_int_equal(out.sender_delivered[1], 7);
    /* Only sender 1 lags: sender 0's 7, through seq 12 = s0m6. */
    blocked.received = ROWS(7, 0, 7, 0);
    assert_int_equal(trim_compute(&blocked, &out), 0);
    assert_int_equal(out.delivered_total, 13);
    /* No senders: nothing to deliver. */
    struct trim_input silent = {.num_members = 3, .num_senders = 0};
    assert_int_equal(trim_compute(&silent, &out), 0);
    assert_int_equal(out.delivered_total, 0);
    /* One sender: the trim is the prefix. */
    struct trim_input single = {.num_members = 3,
                                .num_senders = 1,
                                .sender_row = (const uint32_t[]){2},
                                .received = ROWS(6, 8, 11),
                                .failed_mask = 0x4};
    assert_int_equal(trim_compute(&single, &out), 0);
    assert_int_equal(out.delivered_total, 6);
    assert_true(out.sender_failed[0]);
}

static void test_rejects_bad_input(void **state)
{
    (void)state;
    struct trim_result out;
    struct trim_input in = {.num_members = 2,
                            .num_senders = 2,
                            .sender_row = (const uint32_t[]){0, 1},
                            .received = ROWS(3, 3, 3, 3),
                            .failed_mask = 0x3};
    assert_int_equal(trim_compute(&in, &out), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "surviving"));
    in.failed_mask = 0;
    in.sender_row = (const uint32_t[]){0, 2};
    assert_int_equal(trim_compute(&in, &out), SPINDLE_EINVAL);
    in.sender_row = (const uint32_t[]){0, 1};
    in.received = ROWS(3, TRIM_MAX_COUNT + 1, 3, 3);
    assert_int_equal(trim_compute(&in, &out), SPINDLE_EINVAL);
    in.received = ROWS(3, 3, 3, 3);
    in.num_senders = 3;
    assert_int_equal(trim_compute(&in, &out), SPINDLE_EINVAL);
    in.num_senders = 2;
    in.num_members = 0;
    assert_int_equal(trim_compute(&in, &out), SPINDLE_EINVAL);
    in.num_members = 2;
    in.received = NULL;
    assert_int_equal(trim_compute(&in, &out), SPINDLE_EINVAL);
}

static void test_delivered_past_own_holdings_is_a_protocol_error(void **state)
{
    (void)state;
    struct trim_result out;
    struct trim_input in = {.num_members = 2,
                            .num_senders = 2,
                            .sender_row = (const uint32_t[]){0, 1},
                            .received = ROWS(3, 2, 2, 3),
                            .delivered = ROWS(5, 4)};
    /* Row 0 passed seq 4 = s0m2, a null it holds that row 1 lacks. */
    assert_int_equal(trim_compute(&in, &out), 0);
    assert_int_equal(out.delivered_total, 4);
    /* Row 1 lacks seq 4 (s0m2): it cannot have passed it. */
    in.delivered = ROWS(4, 5);
    assert_int_equal(trim_compute(&in, &out), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "row 1"));
    /* A failed row's delivered count is not checked (it may be garbage). */
    in.failed_mask = 0x2;
    in.received = ROWS(3, 2, 0, 0);
    assert_int_equal(trim_compute(&in, &out), 0);
    assert_int_equal(out.delivered_total, 5); /* through seq 4 = s0m2 */
}

/* A survivor passed a null that another lacks, and the message after it,
 * stable when it was delivered, is delivered by all. Senders 0 and 1:
 * every row holds s0's positions 0 and 1 (messages, seq 0 and 2); only
 * row 0 holds s1's position 0 (a null, seq 1), which it passed before
 * delivering seq 2; row 2 failed. */
static void test_null_passed_by_one_survivor_keeps_later_message(void **state)
{
    (void)state;
    struct trim_input in = {.num_members = 3,
                            .num_senders = 2,
                            .sender_row = (const uint32_t[]){0, 1},
                            .received = ROWS(2, 1, 2, 0, 2, 0),
                            .failed_mask = 0x4,
                            .delivered = ROWS(3, 1, 0)};
    struct trim_result out;
    assert_int_equal(trim_compute(&in, &out), 0);
    assert_int_equal(out.trim[0], 2);
    assert_int_equal(out.trim[1], 0);
    /* Seq 2 (s0m1), delivered by row 0, is within the trim: row 1
     * delivers it too; seq 1 (s1m0) is skipped by both. The old prefix
     * trim stopped at seq 1 and rejected row 0's count. */
    assert_int_equal(out.delivered_total, 3);
    assert_int_equal(out.sender_delivered[0], 2);
    assert_int_equal(out.sender_delivered[1], 0);
}

static void test_end_is_past_the_last_position_within_a_trim(void **state)
{
    (void)state;
    struct trim_input in = {.num_members = 3,
                            .num_senders = 3,
                            .sender_row = (const uint32_t[]){0, 1, 2},
                            .received = ROWS(7, 5, 6, 7, 6, 6, 8, 5, 9)};
    struct trim_result out;
    assert_int_equal(trim_compute(&in, &out), 0);
    /* trim = {7,5,6}: last positions 18 (s0m6), 13 (s1m4), 17 (s2m5). */
    assert_int_equal(out.trim[0], 7);
    assert_int_equal(out.trim[1], 5);
    assert_int_equal(out.trim[2], 6);
    assert_int_equal(out.delivered_total, 19);
    assert_int_equal(out.sender_delivered[0], 7);
    assert_int_equal(out.sender_delivered[1], 5);
    assert_int_equal(out.sender_delivered[2], 6);
}

/* ---- property test ---------------------------------------------------- */

/* Sequence number n under S round-robin senders is message n / S of
 * sender n % S (Spindle 2.1). */
struct seq_msg {
    uint32_t sender;
    uint64_t index;
};

static struct seq_msg seq_message(uint32_t senders, uint64_t n)
{
    struct seq_msg msg = {(uint32_t)(n % senders), n / senders};
    return msg;
}

static uint64_t rng_state;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static uint64_t rng_below(uint64_t bound)
{
    return bound ? rng() % bound : 0;
}

struct scenario {
    uint32_t members, senders;
    uint32_t sender_row[TRIM_MAX_SENDERS];
    uint64_t sent[TRIM_MAX_SENDERS];
    uint64_t received[8 * 8];
    uint64_t delivered[8];
    uint64_t failed;
    uint16_t nulls[TRIM_MAX_SENDERS]; /* bit r: position r of s is a null */
};

static bool is_null(const struct scenario *sc, struct seq_msg msg)
{
    return (sc->nulls[msg.sender] >> msg.index) & 1;
}

static bool held_by_all(const struct scenario *sc, struct seq_msg msg)
{
    for (uint32_t row = 0; row < sc->members; row++)
        if (msg.index >= sc->received[row * sc->senders + msg.sender])
            return false;
    return true;
}

/* How far row can pass in round-robin order by the delivery rule
 * (smc_predicate.c): nulls it holds, messages every member holds. */
static uint64_t passable(const struct scenario *sc, uint32_t row)
{
    uint64_t n = 0;
    while (true) {
        struct seq_msg msg = seq_message(sc->senders, n);
        if (msg.index >= sc->received[row * sc->senders + msg.sender])
            return n;
        if (!is_null(sc, msg) && !held_by_all(sc, msg))
            return n;
        n++;
    }
}

/* Random wedged state consistent with FIFO per sender and with passes made
 * by the delivery rule while every member was alive. */
static void make_scenario(struct scenario *sc)
{
    memset(sc, 0, sizeof *sc);
    sc->members = 1 + (uint32_t)rng_below(8);
    for (uint32_t row = 0; row < sc->members; row++)
        if (rng_below(3) != 0 && sc->senders < sc->members)
            sc->sender_row[sc->senders++] = row;
    for (uint32_t s = 0; s < sc->senders; s++) {
        sc->sent[s] = rng_below(4) == 0 ? 0 : rng_below(12);
        sc->nulls[s] = (uint16_t)(rng_below(2) ? rng() : 0);
    }
    for (uint32_t row = 0; row < sc->members; row++)
        for (uint32_t s = 0; s < sc->senders; s++) {
            /* Mostly near the sender's count, sometimes far behind. */
            uint64_t lag = rng_below(2) ? rng_below(3) : rng_below(sc->sent[s] + 1);
            sc->received[row * sc->senders + s] = sc->sent[s] > lag ? sc->sent[s] - lag : 0;
        }
    for (uint32_t row = 0; row < sc->members; row++) {
        uint64_t most = sc->senders > 0 ? passable(sc, row) : 0;
        sc->delivered[row] = rng_below(2) ? most : rng_below(most + 1);
    }
    uint64_t all = (1ull << sc->members) - 1;
    do
        sc->failed = rng() & all & (rng_below(2) ? rng() : 0); /* often no failure */
    while ((sc->failed & all) == all);
}

static void check_scenario(const struct scenario *sc)
{
    struct trim_input in = {sc->members,  sc->senders, sc->sender_row,
                            sc->received, sc->failed,  sc->delivered};
    struct trim_result out;
    assert_int_equal(trim_compute(&in, &out), 0);
    uint64_t total = out.delivered_total;
    /* Oracle: trim[s] = min over survivors; the end is one past the last
     * position within a trim. */
    uint64_t end = 0;
    for (uint32_t s = 0; s < sc->senders; s++) {
        uint64_t trim = UINT64_MAX;
        for (uint32_t row = 0; row < sc->members; row++)
            if (!((sc->failed >> row) & 1) && sc->received[row * sc->senders + s] < trim)
                trim = sc->received[row * sc->senders + s];
        assert_int_equal(out.trim[s], trim);
        assert_int_equal(out.sender_delivered[s], trim);
        if (trim > 0 && (trim - 1) * sc->senders + s + 1 > end)
            end = (trim - 1) * sc->senders + s + 1;
    }
    assert_int_equal(total, end);
    /* Every survivor holds every position within the trim; every message
     * anyone (a failed member too) passed is within the trim, so the
     * cleanup delivers it at every survivor; what a member passed beyond
     * the end was nulls. */
    for (uint32_t row = 0; row < sc->members; row++) {
        for (uint64_t n = 0; n < total; n++) {
            struct seq_msg msg = seq_message(sc->senders, n);
            bool trimmed = msg.index < out.trim[msg.sender];
            if (trimmed && !((sc->failed >> row) & 1))
                assert_true(msg.index < sc->received[row * sc->senders + msg.sender]);
        }
        for (uint64_t n = 0; n < sc->delivered[row]; n++) {
            struct seq_msg msg = seq_message(sc->senders, n);
            if (!is_null(sc, msg))
                assert_true(msg.index < out.trim[msg.sender]);
            else if (n >= total)
                assert_true(msg.index < sc->received[row * sc->senders + msg.sender]);
        }
    }
    /* Failed senders are the failed rows. */
    for (uint32_t s = 0; s < sc->senders; s++)
        assert_int_equal(out.sender_failed[s], (sc->failed >> sc->sender_row[s]) & 1);
}

static void test_random_wedged_states_satisfy_virtual_synchrony(void **state)
{
    (void)state;
    const char *seed_text = getenv("SPINDLE_TEST_SEED");
    uint64_t seed = seed_text ? strtoull(seed_text, NULL, 0) : 0x5eed1234abcdull;
    rng_state = seed ? seed : 1;
    print_message("trim property seed 0x%llx\n", (unsigned long long)seed);
    unsigned failures_seen = 0, cuts_seen = 0;
    for (int iteration = 0; iteration < 20000; iteration++) {
        struct scenario sc;
        make_scenario(&sc);
        check_scenario(&sc);
        failures_seen += sc.failed != 0;
        cuts_seen += sc.senders > 1;
    }
    /* The generator must actually exercise failures and multi-sender cuts. */
    assert_true(failures_seen > 5000);
    assert_true(cuts_seen > 5000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_senders_alive_failed_observer),
        cmocka_unit_test(test_failed_sender_cuts_delivery_at_its_trim),
        cmocka_unit_test(test_surviving_sender_gap_skips_only_its_positions),
        cmocka_unit_test(test_empty_and_single_sender_cases),
        cmocka_unit_test(test_rejects_bad_input),
        cmocka_unit_test(test_delivered_past_own_holdings_is_a_protocol_error),
        cmocka_unit_test(test_null_passed_by_one_survivor_keeps_later_message),
        cmocka_unit_test(test_end_is_past_the_last_position_within_a_trim),
        cmocka_unit_test(test_random_wedged_states_satisfy_virtual_synchrony),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
