/*
 * Multi-process SMC behaviour through the public API: agreement across
 * overlapping subgroups, progress despite idle and delayed senders
 * (null-sends), quiescence of nulls, and slot reuse across ring wrap-around.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "smc/smc_procs.h"
#include "util/clock.h"

struct member_ctx {
    struct smc_proc_result *result;
    uint64_t total; /* atomic */
};

static void on_deliver(void *ctx, const struct spindle_message *messages, size_t count)
{
    struct member_ctx *m = ctx;
    for (size_t i = 0; i < count; i++)
        smc_proc_account(m->result, &messages[i]);
    __atomic_add_fetch(&m->total, count, __ATOMIC_RELEASE);
}

static int create(uint32_t self, uint32_t members, const char *dir,
                  const struct spindle_subgroup_config *subgroups, uint32_t count,
                  struct member_ctx *ctx, spindle_group_t **group)
{
    struct spindle_group_options options;
    smc_proc_options(&options, self, members, dir, on_deliver, ctx);
    return spindle_group_create(&options, subgroups, count, group);
}

/* Sends count messages of size bytes whose content depends on (self, g, i). */
static int send_many(spindle_group_t *group, uint32_t self, uint32_t g, uint32_t count,
                     uint32_t size, uint64_t delay_ns)
{
    for (uint32_t i = 0; i < count; i++) {
        void *slot;
        int rc = spindle_reserve(group, g, size, 0, &slot);
        if (rc < 0)
            return rc;
        for (uint32_t b = 0; b < size; b++)
            ((unsigned char *)slot)[b] = (unsigned char)(self * 31 + g * 7 + i + b);
        rc = spindle_commit(group, g);
        if (rc < 0)
            return rc;
        if (delay_ns > 0)
            sp_spin_ns(delay_ns);
    }
    return 0;
}

static int wait_total(struct member_ctx *ctx, uint64_t expected, int seconds)
{
    return smc_proc_wait_total(&ctx->total, expected, seconds);
}

static void finish(spindle_group_t *group, struct smc_proc_result *r, int rc, const char *what)
{
    if (rc < 0)
        smc_proc_fail(r, what, rc);
    int shut = spindle_group_shutdown(group, 20000);
    if (rc == 0 && shut < 0)
        smc_proc_fail(r, "shutdown", shut);
    spindle_group_destroy(group);
    if (rc == 0 && shut == 0 && r->ok == 0)
        r->ok = 1;
}

/* ---- overlapping subgroups ------------------------------------------ */

#define OVERLAP_MESSAGES 300
static const uint32_t all4[] = {0, 1, 2, 3};
static const uint32_t sg1_members[] = {0, 1, 2}, sg1_senders[] = {2, 0};
static const uint32_t sg2_members[] = {1, 2, 3}, sg2_senders[] = {3, 1};

static void overlap_member(uint32_t self, uint32_t members, const char *dir,
                           struct smc_proc_result *r)
{
    /* sg0: everyone sends; sg1, sg2: partial overlaps with their own sender
     * orders; sg3: unordered, everyone sends. Small windows force many
     * wrap-arounds. sg2's messages leave unused slot tails from none to
     * most of its 5000 bytes, so send batches both span slots and split
     * where a tail is long (smc_predicate.c, push_slots). */
    struct spindle_subgroup_config sg[4] = {
        {all4, 4, all4, 4, 4, 100, SPINDLE_MODE_ATOMIC},
        {sg1_members, 3, sg1_senders, 2, 3, 64, SPINDLE_MODE_ATOMIC},
        {sg2_members, 3, sg2_senders, 2, 7, 5000, SPINDLE_MODE_ATOMIC},
        {all4, 4, all4, 4, 5, 16, SPINDLE_MODE_UNORDERED},
    };
    struct member_ctx ctx = {r, 0};
    spindle_group_t *group;
    int rc = create(self, members, dir, sg, 4, &ctx, &group);
    if (rc < 0) {
        smc_proc_fail(r, "create", rc);
        return;
    }
    uint64_t expected = 0;
    for (uint32_t g = 0; g < 4; g++) {
        bool member = false;
        for (uint32_t i = 0; i < sg[g].num_members; i++)
            member |= sg[g].members[i] == self;
        if (member)
            expected += (uint64_t)sg[g].num_senders * OVERLAP_MESSAGES;
    }
    for (uint32_t i = 0; i < OVERLAP_MESSAGES && rc == 0; i++)
        for (uint32_t g = 0; g < 4 && rc == 0; g++)
            for (uint32_t s = 0; s < sg[g].num_senders; s++)
                if (sg[g].senders[s] == self)
                    rc = send_many(group, self, g, 1, 1 + (i * 37 + g) % sg[g].max_payload, 0);
    if (rc == 0)
        rc = wait_total(&ctx, expected, 60);
    finish(group, r, rc, rc == SPINDLE_ETIMEDOUT ? "waiting" : "send");
}

static void test_overlapping_subgroups_deliver_identically(void **state)
{
    (void)state;
    struct smc_proc_result res[4];
    assert_int_equal(smc_procs_run(4, overlap_member, res, 90), 0);
    for (uint32_t i = 0; i < 4; i++) {
        if (res[i].ok != 1)
            fail_msg("member %u: %s", i, res[i].error);
    }
    /* Atomic subgroups: the same digest at every member of the subgroup. */
    assert_int_equal(res[0].delivered[0], 4 * OVERLAP_MESSAGES);
    for (uint32_t i = 1; i < 4; i++)
        assert_int_equal(res[i].digest[0], res[0].digest[0]);
    assert_int_equal(res[0].delivered[1], 2 * OVERLAP_MESSAGES);
    assert_int_equal(res[1].digest[1], res[0].digest[1]);
    assert_int_equal(res[2].digest[1], res[0].digest[1]);
    assert_int_equal(res[3].delivered[1], 0);
    assert_int_equal(res[1].delivered[2], 2 * OVERLAP_MESSAGES);
    assert_int_equal(res[2].digest[2], res[1].digest[2]);
    assert_int_equal(res[3].digest[2], res[1].digest[2]);
    /* Unordered: everything arrives, per-sender FIFO (checked in the child). */
    for (uint32_t i = 0; i < 4; i++)
        for (uint32_t s = 0; s < 4; s++)
            assert_int_equal(res[i].from_sender[3][s], OVERLAP_MESSAGES);
}

/* ---- idle and delayed senders ---------------------------------------- */

#define STALL_MESSAGES 400

static void stall_member(uint32_t self, uint32_t members, const char *dir,
                         struct smc_proc_result *r)
{
    /* Member 0 streams, member 1 waits 100 us after every send, member 2 is
     * a sender that never sends. Round-robin order puts member 2 in every
     * round: only its nulls let the others' messages be delivered. */
    struct spindle_subgroup_config sg = {all4, members, all4, members, 8, 64, SPINDLE_MODE_ATOMIC};
    struct member_ctx ctx = {r, 0};
    spindle_group_t *group;
    int rc = create(self, members, dir, &sg, 1, &ctx, &group);
    if (rc < 0) {
        smc_proc_fail(r, "create", rc);
        return;
    }
    if (self < 2)
        rc = send_many(group, self, 0, STALL_MESSAGES, 64, self == 1 ? 100000 : 0);
    if (rc == 0)
        rc = wait_total(&ctx, 2 * STALL_MESSAGES, 60);
    struct spindle_stats stats;
    spindle_group_stats(group, &stats);
    r->values[0] = stats.nulls_sent;
    finish(group, r, rc, rc == SPINDLE_ETIMEDOUT ? "waiting (stalled?)" : "send");
}

static void test_idle_and_delayed_senders_do_not_stall_others(void **state)
{
    (void)state;
    struct smc_proc_result res[3];
    assert_int_equal(smc_procs_run(3, stall_member, res, 90), 0);
    for (uint32_t i = 0; i < 3; i++) {
        if (res[i].ok != 1)
            fail_msg("member %u: %s", i, res[i].error);
        assert_int_equal(res[i].from_sender[0][0], STALL_MESSAGES);
        assert_int_equal(res[i].from_sender[0][1], STALL_MESSAGES);
        assert_int_equal(res[i].from_sender[0][2], 0);
        assert_int_equal(res[i].digest[0], res[0].digest[0]);
    }
    /* The silent sender filled every round with nulls. */
    assert_true(res[2].values[0] >= STALL_MESSAGES - 1);
}

/* ---- quiescence ------------------------------------------------------ */

static void quiet_member(uint32_t self, uint32_t members, const char *dir,
                         struct smc_proc_result *r)
{
    struct spindle_subgroup_config sg = {all4, members, all4, members, 10, 32, SPINDLE_MODE_ATOMIC};
    struct member_ctx ctx = {r, 0};
    spindle_group_t *group;
    int rc = create(self, members, dir, &sg, 1, &ctx, &group);
    if (rc < 0) {
        smc_proc_fail(r, "create", rc);
        return;
    }
    /* Uneven counts so nulls are certainly needed at the end. */
    rc = send_many(group, self, 0, 100 + 50 * self, 32, 0);
    if (rc == 0)
        rc = wait_total(&ctx, 100ull * members + 50ull * members * (members - 1) / 2, 60);
    if (rc == 0)
        rc = spindle_barrier(group, 20000);
    struct spindle_stats before, after;
    spindle_group_stats(group, &before);
    /* Everyone is idle now; a second of silence must not produce a null
     * (Spindle 3.3, quiescence). */
    struct timespec second = {1, 0};
    nanosleep(&second, NULL);
    spindle_group_stats(group, &after);
    r->values[0] = before.nulls_sent;
    r->values[1] = after.nulls_sent;
    r->values[2] = after.writes_posted - before.writes_posted;
    r->values[3] = after.sleeps - before.sleeps;
    finish(group, r, rc, "send/wait");
}

static void test_null_counter_stays_still_when_all_idle(void **state)
{
    (void)state;
    struct smc_proc_result res[3];
    assert_int_equal(smc_procs_run(3, quiet_member, res, 90), 0);
    uint64_t nulls = 0;
    for (uint32_t i = 0; i < 3; i++) {
        if (res[i].ok != 1)
            fail_msg("member %u: %s", i, res[i].error);
        assert_int_equal(res[i].values[0], res[i].values[1]);
        /* An idle predicate thread goes to sleep on its doorbell. */
        assert_true(res[i].values[3] > 0);
        nulls += res[i].values[1];
        assert_int_equal(res[i].digest[0], res[0].digest[0]);
    }
    /* Members 0 and 1 sent fewer messages than 2: they must have sent
     * nulls to let member 2's last rounds through. */
    assert_true(nulls >= 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_overlapping_subgroups_deliver_identically),
        cmocka_unit_test(test_idle_and_delayed_senders_do_not_stall_others),
        cmocka_unit_test(test_null_counter_stays_still_when_all_idle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
