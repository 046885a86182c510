/*
 * Live streams across the slot header's position wrap: a slot header
 * carries position + 1 modulo 2^39 (smc_impl.h, smc_header), which no
 * ordinary run reaches. Here real members over shm start every sender's
 * stream just below 2^39 (the test hook smc_options.first_position, given
 * to every member through group_create_with) and stream across it, in an
 * atomic and in an unordered subgroup. One sender falls idle early, so in
 * the atomic subgroup the others' rounds go on through its nulls, across
 * the wrap too. Every message must be delivered once, in its sender's
 * order, with its contents, and none taken for a null (each member gets
 * every message); the sequence numbers show that the streams crossed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "group/group_impl.h"
#include "smc/smc_procs.h"

#define WRAP_MEMBERS  3
#define WRAP_MESSAGES 1500 /* per sender, but the last */
#define WRAP_FEW      40   /* the last sender's: it falls idle below the wrap */
#define WRAP_WINDOW   8    /* small: every slot is reused many times across the wrap */
#define WRAP_SIZE     24
#define WRAP_POINT    (1ull << 39)
#define WRAP_BELOW    500 /* streams start this many positions below WRAP_POINT */

struct wrap_ctx {
    struct smc_proc_result *result;
    uint64_t total;     /* atomic */
    uint64_t bad;       /* deliveries with wrong contents (predicate thread only) */
    uint64_t low, high; /* lowest and highest position delivered */
    uint32_t senders;
};

static uint32_t wrap_count(uint32_t sender)
{
    return sender == WRAP_MEMBERS - 1 ? WRAP_FEW : WRAP_MESSAGES;
}

/* Message index of sender: its index, its sender id, then bytes that
 * depend on both. */
static void fill(unsigned char *data, uint32_t sender, uint64_t index)
{
    memcpy(data, &index, 8);
    uint64_t who = sender;
    memcpy(data + 8, &who, 8);
    for (uint32_t b = 16; b < WRAP_SIZE; b++)
        data[b] = (unsigned char)(sender * 131 + index * 7 + b);
}

static void on_deliver(void *ctx, const struct spindle_message *messages, size_t count)
{
    struct wrap_ctx *w = ctx;
    for (size_t i = 0; i < count; i++) {
        const struct spindle_message *m = &messages[i];
        unsigned char want[WRAP_SIZE];
        fill(want, m->sender_id, m->sender_index);
        if (m->length != WRAP_SIZE || memcmp(m->data, want, WRAP_SIZE) != 0)
            w->bad++;
        uint64_t position = m->seq / w->senders;
        w->low = position < w->low ? position : w->low;
        w->high = position > w->high ? position : w->high;
        smc_proc_account(w->result, m);
    }
    __atomic_add_fetch(&w->total, count, __ATOMIC_RELEASE);
}

static int send_stream(spindle_group_t *group, uint32_t self)
{
    for (uint32_t i = 0; i < wrap_count(self); i++) {
        void *slot;
        int rc = spindle_reserve(group, 0, WRAP_SIZE, 0, &slot);
        if (rc < 0)
            return rc;
        fill(slot, self, i);
        rc = spindle_commit(group, 0);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static enum spindle_delivery_mode wrap_mode;

static void wrap_member(uint32_t self, uint32_t members, const char *dir, struct smc_proc_result *r)
{
    struct wrap_ctx w = {.result = r, .low = UINT64_MAX, .senders = members};
    uint32_t all[WRAP_MEMBERS] = {0, 1, 2};
    struct spindle_subgroup_config sub = {all,         members,   all,      members,
                                          WRAP_WINDOW, WRAP_SIZE, wrap_mode};
    struct spindle_group_options options;
    smc_proc_options(&options, self, members, dir, on_deliver, &w);
    struct group_test_options test = {.smc_first_position = WRAP_POINT - WRAP_BELOW};
    spindle_group_t *group = NULL;
    int rc = group_create_with(&options, &sub, 1, &test, &group);
    if (rc < 0) {
        smc_proc_fail(r, "group_create_with", rc);
        return;
    }
    uint64_t expected = 0;
    for (uint32_t s = 0; s < members; s++)
        expected += wrap_count(s);
    rc = send_stream(group, self);
    if (rc == 0)
        rc = smc_proc_wait_total(&w.total, expected, 20);
    if (rc < 0)
        smc_proc_fail(r, "streaming", rc);
    int shut = spindle_group_shutdown(group, 20000);
    if (rc == 0 && shut < 0)
        smc_proc_fail(r, "shutdown", shut);
    spindle_group_destroy(group);
    r->values[0] = w.bad;
    r->values[1] = w.low;
    r->values[2] = w.high;
    if (rc == 0 && shut == 0 && r->ok == 0)
        r->ok = 1;
}

static void run_across_wrap(enum spindle_delivery_mode mode)
{
    wrap_mode = mode;
    struct smc_proc_result results[WRAP_MEMBERS];
    assert_int_equal(smc_procs_run(WRAP_MEMBERS, wrap_member, results, 30), 0);
    for (uint32_t m = 0; m < WRAP_MEMBERS; m++) {
        const struct smc_proc_result *r = &results[m];
        if (r->ok != 1)
            fail_msg("member %u: %s", m, r->error);
        assert_int_equal(r->values[0], 0); /* contents */
        for (uint32_t s = 0; s < WRAP_MEMBERS; s++)
            assert_int_equal(r->from_sender[0][s], wrap_count(s)); /* once each, FIFO */
        assert_int_equal(r->delivered[0], 2 * WRAP_MESSAGES + WRAP_FEW);
        /* The streams began below the wrap (the first messages at the
         * first position) and went past it (the last message of a busy
         * sender at least WRAP_MESSAGES - 1 positions later). */
        assert_int_equal(r->values[1], WRAP_POINT - WRAP_BELOW);
        assert_true(r->values[2] >= WRAP_POINT - WRAP_BELOW + WRAP_MESSAGES - 1);
        assert_true(r->values[2] > WRAP_POINT);
        /* Atomic: one order everywhere. */
        if (mode == SPINDLE_MODE_ATOMIC)
            assert_int_equal(r->digest[0], results[0].digest[0]);
    }
}

static void test_atomic_stream_crosses_header_wrap(void **state)
{
    (void)state;
    run_across_wrap(SPINDLE_MODE_ATOMIC);
}

static void test_unordered_stream_crosses_header_wrap(void **state)
{
    (void)state;
    run_across_wrap(SPINDLE_MODE_UNORDERED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_atomic_stream_crosses_header_wrap),
        cmocka_unit_test(test_unordered_stream_crosses_header_wrap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
