/*
 * The committing thread's send (smc_commit_send_pass, through
 * sst_engine_run_inline): over libfabric tcp, a commit in an atomic
 * subgroup that finds its predicate thread asleep and its sender idle
 * posts the message itself instead of waking that thread; over shm (no
 * arrival hook) nothing runs inline. Three members in one process (three
 * engines on loopback, rows 0, 1, 2, all sending), predicate threads that
 * sleep up to 5 s between heartbeats:
 *   - one message at a time, each sent while its predicate thread sleeps,
 *     a sender's commits at least SMC_COMMIT_SEND_GAP_NS apart (the light
 *     load the path is for): most go out from the committing thread (the
 *     engines' inline_passes count them; without the path it stays 0),
 *     and every member delivers all of them in the same order, each
 *     sender's in its own order;
 *   - three threads sending at once through a window of 8, where commits
 *     meet the predicate thread awake, the arrival pass, a full window and
 *     each other: the same order everywhere, nothing lost or doubled.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>

#include "smc/smc_impl.h"
#include "sst/sst.h"
#include "sst/sst_impl.h"
#include "transport/fabric/test_fabric_util.h"

#define MEMBERS   3
#define ID_BASE   20u
#define ROUNDS    30
#define BURST     300
#define MAX_LOG   (MEMBERS * BURST)
#define WAIT_NS   (20ull * 1000000000ull)
#define ASLEEP_NS (2ull * 1000000000ull)

struct member {
    struct sst_engine *engine;
    struct smc_group *group;
    /* What the delivery upcalls saw, in order: the payload (sender row in
     * the high half, its index in the low half). Written under the engine
     * lock (one upcall at a time), count published with release. */
    uint64_t log[MAX_LOG];
    uint64_t count; /* atomic */
    bool bad;       /* atomic: a delivery whose header and payload disagree */
};

static void on_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    struct member *member = ctx;
    uint64_t count = __atomic_load_n(&member->count, __ATOMIC_RELAXED);
    for (size_t i = 0; i < n; i++) {
        /* One aligned word, read atomically: the slot is written again
         * by the transport's progress thread once every member delivered
         * it, an order that goes through the peers' sockets, which
         * ThreadSanitizer does not see. */
        uint64_t value = 0;
        if (m[i].length == sizeof value)
            value = __atomic_load_n((const uint64_t *)(const void *)m[i].data, __ATOMIC_RELAXED);
        if (m[i].length != sizeof value || value >> 32 != m[i].sender_id ||
            (value & 0xffffffffu) != m[i].sender_index || count >= MAX_LOG) {
            __atomic_store_n(&member->bad, true, __ATOMIC_RELAXED);
            continue;
        }
        member->log[count++] = value;
    }
    __atomic_store_n(&member->count, count, __ATOMIC_RELEASE);
}

/* Three members over the named backend, connected and started. */
static void create_members(struct member *m, const char *backend)
{
    struct smc_layout layout;
    memset(&layout, 0, sizeof layout);
    layout.num_members = MEMBERS;
    for (uint32_t row = 0; row < MEMBERS; row++)
        layout.members[row] = layout.senders[row] = row;
    layout.num_senders = MEMBERS;
    layout.window_size = 8;
    layout.max_payload = 8;
    layout.mode = SPINDLE_MODE_ATOMIC;
    const uint32_t member_of_row[MEMBERS] = {ID_BASE, ID_BASE + 1, ID_BASE + 2};
    struct sst_member_desc descs[MEMBERS];
    memset(descs, 0, sizeof descs);
    bool fabric = strcmp(backend, "fabric") == 0;
    for (uint32_t row = 0; row < MEMBERS; row++) {
        struct tp_config config = {.backend = backend,
                                   .group_name = "smc-commit-send-test",
                                   .self_id = member_of_row[row],
                                   .provider = fabric ? "tcp" : NULL,
                                   .host = fabric ? "127.0.0.1" : NULL,
                                   .failure_timeout_ms = 60000};
        struct sst_engine_options engine_options;
        sst_engine_options_default(&engine_options);
        engine_options.max_sleep_ms = 5000;
        memset(&m[row], 0, sizeof m[row]);
        assert_int_equal(sst_engine_create(&config, &engine_options, &m[row].engine), 0);
        struct smc_options options = {
            .batching = true, .null_sends = true, .deliver = on_deliver, .deliver_ctx = &m[row]};
        assert_int_equal(
            smc_group_create(m[row].engine, &layout, 1, MEMBERS, row, &options, &m[row].group), 0);
        if (fabric)
            assert_int_equal(smc_group_grant_writes(m[row].group, member_of_row), 0);
        assert_int_equal(smc_group_export(m[row].group, &descs[row]), 0);
    }
    for (uint32_t row = 0; row < MEMBERS; row++)
        assert_int_equal(smc_group_connect(m[row].group, descs, 5000, NULL), 0);
    for (uint32_t row = 0; row < MEMBERS; row++) {
        assert_int_equal(smc_group_start(m[row].group), 0);
        assert_int_equal(sst_engine_start(m[row].engine), 0);
    }
}

static void destroy_members(struct member *m)
{
    for (uint32_t row = 0; row < MEMBERS; row++)
        sst_engine_stop(m[row].engine);
    for (uint32_t row = 0; row < MEMBERS; row++) {
        smc_group_destroy(m[row].group);
        sst_engine_destroy(m[row].engine);
    }
}

static void send_one(struct member *member, uint32_t row, uint32_t index)
{
    void *slot = NULL;
    assert_int_equal(smc_reserve(member->group, 0, 8, 0, &slot), 0);
    uint64_t value = (uint64_t)row << 32 | index;
    memcpy(slot, &value, sizeof value);
    assert_int_equal(smc_commit(member->group, 0), 0);
}

/* Waits (bounded) until every member delivered total messages. */
static bool all_delivered(struct member *m, uint64_t total)
{
    uint64_t deadline = sp_now_ns() + WAIT_NS;
    for (uint32_t row = 0; row < MEMBERS; row++)
        while (__atomic_load_n(&m[row].count, __ATOMIC_ACQUIRE) < total && sp_now_ns() < deadline)
            sched_yield();
    for (uint32_t row = 0; row < MEMBERS; row++)
        if (__atomic_load_n(&m[row].count, __ATOMIC_ACQUIRE) < total)
            return false;
    return true;
}

/* Waits (bounded) until member's own messages are all delivered to it and
 * its predicate thread sleeps: what a commit needs to send itself. */
static bool idle_and_asleep(struct member *member)
{
    const struct smc_subgroup *sub = &member->group->subgroups[0];
    uint64_t deadline = sp_now_ns() + ASLEEP_NS;
    while ((__atomic_load_n(&sub->delivered_own, __ATOMIC_ACQUIRE) !=
                __atomic_load_n(&sub->committed, __ATOMIC_ACQUIRE) ||
            !sst_engine_asleep(member->engine)) &&
           sp_now_ns() < deadline)
        sched_yield();
    return sst_engine_asleep(member->engine);
}

/* Every member delivered the same total messages in the same order, and
 * each sender's in its index order (no gap, no duplicate). */
static void assert_same_order(struct member *m, uint64_t total, uint32_t per_sender)
{
    for (uint32_t row = 0; row < MEMBERS; row++) {
        assert_false(__atomic_load_n(&m[row].bad, __ATOMIC_RELAXED));
        assert_int_equal(__atomic_load_n(&m[row].count, __ATOMIC_ACQUIRE), total);
        assert_memory_equal(m[row].log, m[0].log, total * sizeof m[0].log[0]);
    }
    uint32_t next[MEMBERS] = {0};
    for (uint64_t i = 0; i < total; i++) {
        uint32_t sender = (uint32_t)(m[0].log[i] >> 32);
        assert_true(sender < MEMBERS);
        assert_int_equal(m[0].log[i] & 0xffffffffu, next[sender]);
        next[sender]++;
    }
    for (uint32_t row = 0; row < MEMBERS; row++)
        assert_int_equal(next[row], per_sender);
}

static uint64_t inline_passes(struct member *m)
{
    uint64_t sum = 0;
    for (uint32_t row = 0; row < MEMBERS; row++) {
        struct sst_engine_stats stats;
        sst_engine_stats(m[row].engine, &stats);
        sum += stats.inline_passes;
    }
    return sum;
}

static void test_a_commit_to_a_sleeping_thread_is_sent_by_the_committer(void **state)
{
    (void)state;
    tf_require_provider("tcp");
    static struct member m[MEMBERS];
    create_members(m, "fabric");
    uint32_t asleep = 0;
    uint64_t sent_at[MEMBERS] = {0};
    for (uint32_t round = 0; round < ROUNDS; round++) {
        for (uint32_t row = 0; row < MEMBERS; row++) {
            /* Not a synchronisation: the pace of a lightly loaded sender. */
            while (sp_now_ns() - sent_at[row] < SMC_COMMIT_SEND_GAP_NS + 1000000ull)
                sched_yield();
            asleep += idle_and_asleep(&m[row]);
            sent_at[row] = sp_now_ns();
            send_one(&m[row], row, round);
            assert_true(all_delivered(m, (uint64_t)round * MEMBERS + row + 1));
        }
    }
    uint64_t sent_inline = inline_passes(m);
    print_message("%u of %u commits found their predicate thread asleep; %llu sent inline\n",
                  asleep, ROUNDS * MEMBERS, (unsigned long long)sent_inline);
    /* Nothing but the test's commits wakes a sleeping thread here (a
     * heartbeat every 5 s at most), and the arrival pass that delivers
     * the previous message holds the lock only briefly: most commits find
     * both locks free. */
    assert_true(sent_inline >= (uint64_t)asleep / 2);
    assert_true(asleep >= ROUNDS * MEMBERS / 2);
    assert_same_order(m, (uint64_t)ROUNDS * MEMBERS, ROUNDS);
    destroy_members(m);
}

struct burst {
    struct member *member;
    uint32_t row;
};

static void *send_burst(void *arg)
{
    struct burst *burst = arg;
    for (uint32_t i = 0; i < BURST; i++)
        send_one(burst->member, burst->row, i);
    return NULL;
}

static void test_senders_at_once_keep_one_order(void **state)
{
    (void)state;
    tf_require_provider("tcp");
    static struct member m[MEMBERS];
    create_members(m, "fabric");
    pthread_t threads[MEMBERS];
    struct burst bursts[MEMBERS];
    for (uint32_t row = 0; row < MEMBERS; row++) {
        bursts[row] = (struct burst){&m[row], row};
        assert_int_equal(pthread_create(&threads[row], NULL, send_burst, &bursts[row]), 0);
    }
    for (uint32_t row = 0; row < MEMBERS; row++)
        pthread_join(threads[row], NULL);
    assert_true(all_delivered(m, (uint64_t)BURST * MEMBERS));
    print_message("%llu of %u commits sent inline\n", (unsigned long long)inline_passes(m),
                  BURST * MEMBERS);
    assert_same_order(m, (uint64_t)BURST * MEMBERS, BURST);
    destroy_members(m);
}

static bool ran_inline;

static bool note_inline(void *ctx)
{
    (void)ctx;
    ran_inline = true;
    return true;
}

/* Over shm nothing answers on arrival while the predicate thread sleeps,
 * so the committing thread does not send either: its wake-up stays. */
static void test_shm_keeps_the_wake_up(void **state)
{
    (void)state;
    static struct member m[MEMBERS];
    create_members(m, "shm");
    assert_true(idle_and_asleep(&m[0]));
    ran_inline = false;
    assert_false(sst_engine_run_inline(m[0].engine, note_inline, NULL));
    assert_false(ran_inline);
    for (uint32_t round = 0; round < 5; round++)
        for (uint32_t row = 0; row < MEMBERS; row++)
            send_one(&m[row], row, round);
    assert_true(all_delivered(m, 5 * MEMBERS));
    assert_int_equal(inline_passes(m), 0);
    assert_same_order(m, 5 * MEMBERS, 5);
    destroy_members(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_commit_to_a_sleeping_thread_is_sent_by_the_committer),
        cmocka_unit_test(test_senders_at_once_keep_one_order),
        cmocka_unit_test(test_shm_keeps_the_wake_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
