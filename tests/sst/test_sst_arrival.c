/*
 * Arrival triggers (sst_predicate_set_arrival) over libfabric tcp: two
 * engines in one process, A asks (its counter, pushed to B) and B answers
 * (its counter set to the question, pushed back). While B's predicate
 * thread sleeps, B's transport progress thread answers in the arrival
 * trigger without waking it; a predicate that holds with no arrival
 * trigger still wakes the predicate thread at once, and a write that makes
 * no predicate hold wakes nobody. The predicate threads
 * sleep up to 5 s between heartbeats here, so an answer or a wake-up that
 * waited for the timer instead of a ring fails the 2 s bounds below.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include "sst/sst.h"
#include "test_fabric_util.h"
#include "util/clock.h"

#define ROUNDS   20
#define BOUND_NS (2ull * 1000000000ull)
#define SPECIAL  1000000u /* a question only the predicate thread answers */

struct side {
    struct sst_engine *engine;
    struct sst_table *table;
    uint32_t my_row, peer_row;
    uint32_t unwatched; /* offset of a counter no predicate reads */
};

struct answerer {
    struct side *b;
    uint64_t by_arrival; /* atomic: answers given by the arrival trigger */
    uint64_t by_thread;  /* atomic: answers given by the predicate thread */
    uint64_t special;    /* atomic: SPECIAL questions seen by the thread */
};

static uint64_t question(struct side *side)
{
    return sst_read_u64(side->table, side->peer_row, SST_ROW_HEADER);
}

static uint64_t answered(struct side *side)
{
    return sst_read_u64(side->table, side->my_row, SST_ROW_HEADER);
}

static bool unanswered(void *ctx)
{
    struct answerer *ans = ctx;
    return question(ans->b) > answered(ans->b) && question(ans->b) < SPECIAL;
}

static void answer(struct answerer *ans)
{
    sst_write_u64(ans->b->table, SST_ROW_HEADER, question(ans->b));
    assert_int_equal(sst_push(ans->b->table, SST_ROW_HEADER, 8, &ans->b->peer_row, 1), 0);
}

static void answer_on_thread(void *ctx)
{
    struct answerer *ans = ctx;
    answer(ans);
    __atomic_add_fetch(&ans->by_thread, 1, __ATOMIC_RELAXED);
}

static void answer_on_arrival(void *ctx)
{
    struct answerer *ans = ctx;
    answer(ans);
    __atomic_add_fetch(&ans->by_arrival, 1, __ATOMIC_RELAXED);
}

static bool special_asked(void *ctx)
{
    struct answerer *ans = ctx;
    return question(ans->b) == SPECIAL && __atomic_load_n(&ans->special, __ATOMIC_RELAXED) == 0;
}

static void note_special(void *ctx)
{
    struct answerer *ans = ctx;
    __atomic_store_n(&ans->special, 1, __ATOMIC_RELAXED);
}

static void open_side(struct side *side, uint32_t id)
{
    struct tp_config config = {.backend = "fabric",
                               .group_name = "arrival",
                               .self_id = id,
                               .provider = "tcp",
                               .host = "127.0.0.1",
                               .failure_timeout_ms = 10000};
    struct sst_engine_options options;
    sst_engine_options_default(&options);
    options.max_sleep_ms = 5000;
    assert_int_equal(sst_engine_create(&config, &options, &side->engine), 0);
    struct sst_schema schema;
    sst_schema_init(&schema);
    assert_true(sst_schema_add_counter(&schema) >= 0);
    int unwatched = sst_schema_add_counter(&schema);
    assert_true(unwatched > 0);
    side->unwatched = sst_column_offset(&schema, unwatched);
    side->my_row = id;
    side->peer_row = 1 - id;
    assert_int_equal(sst_table_create(side->engine, &schema, 2, id, &side->table), 0);
}

struct connecting {
    struct side *side;
    const struct sst_member_desc *descs;
    int rc;
};

static void *connect_side(void *arg)
{
    struct connecting *c = arg;
    uint64_t failed = 0;
    c->rc = sst_table_connect(c->side->table, c->descs, 20000, &failed);
    if (c->rc == 0 && failed != 0)
        c->rc = -1;
    return NULL;
}

/* Waits until B's predicate thread sleeps; false after 2 s. */
static bool until_asleep(struct side *b)
{
    uint64_t deadline = sp_now_ns() + BOUND_NS;
    while (!sst_engine_asleep(b->engine) && sp_now_ns() < deadline)
        sched_yield();
    return sst_engine_asleep(b->engine);
}

/* Sets A's counter to value and pushes it to B. */
static void ask(struct side *a, uint64_t value)
{
    sst_engine_lock(a->engine);
    sst_write_u64(a->table, SST_ROW_HEADER, value);
    assert_int_equal(sst_push(a->table, SST_ROW_HEADER, 8, &a->peer_row, 1), 0);
    sst_engine_unlock(a->engine);
}

/* Sets A's unwatched counter to value, pushes it to B, and waits (2 s at
 * most) until B's table holds it. */
static void write_unwatched(struct side *a, struct side *b, uint64_t value)
{
    sst_engine_lock(a->engine);
    sst_write_u64(a->table, a->unwatched, value);
    assert_int_equal(sst_push(a->table, a->unwatched, 8, &a->peer_row, 1), 0);
    sst_engine_unlock(a->engine);
    uint64_t deadline = sp_now_ns() + BOUND_NS;
    while (sst_read_u64(b->table, b->peer_row, b->unwatched) < value && sp_now_ns() < deadline)
        sched_yield();
    assert_int_equal(sst_read_u64(b->table, b->peer_row, b->unwatched), value);
}

/* Asks value and waits (2 s at most) for B's answer at A. */
static void ask_and_wait(struct side *a, uint64_t value)
{
    ask(a, value);
    uint64_t deadline = sp_now_ns() + BOUND_NS;
    while (sst_read_u64(a->table, a->peer_row, SST_ROW_HEADER) < value && sp_now_ns() < deadline)
        sched_yield();
    assert_int_equal(sst_read_u64(a->table, a->peer_row, SST_ROW_HEADER), value);
}

static void test_a_sleeping_peer_answers_on_arrival(void **state)
{
    (void)state;
    tf_require_provider("tcp");
    struct side a, b;
    open_side(&a, 0);
    open_side(&b, 1);
    struct sst_member_desc descs[2];
    assert_int_equal(sst_table_export(a.table, &descs[0]), 0);
    assert_int_equal(sst_table_export(b.table, &descs[1]), 0);
    struct answerer ans = {.b = &b};
    uint64_t id = 0;
    assert_int_equal(
        sst_predicate_add(b.engine, unanswered, answer_on_thread, &ans, SST_PRED_RECURRENT, &id),
        0);
    assert_int_equal(sst_predicate_set_arrival(b.engine, id, answer_on_arrival), 0);
    assert_int_equal(sst_predicate_set_arrival(b.engine, id + 100, answer_on_arrival),
                     SPINDLE_EINVAL);
    assert_int_equal(
        sst_predicate_add(b.engine, special_asked, note_special, &ans, SST_PRED_RECURRENT, NULL),
        0);
    assert_int_equal(sst_engine_start(a.engine), 0);
    assert_int_equal(sst_engine_start(b.engine), 0);
    struct connecting ca = {&a, descs, 0}, cb = {&b, descs, 0};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, connect_side, &cb), 0);
    connect_side(&ca);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(ca.rc, 0);
    assert_int_equal(cb.rc, 0);

    /* Every question is answered within the bound, most of them on
     * arrival (a heartbeat or a busy CPU may wake the thread first). */
    for (uint64_t round = 1; round <= ROUNDS; round++) {
        assert_true(until_asleep(&b));
        ask_and_wait(&a, round);
    }
    uint64_t by_arrival = __atomic_load_n(&ans.by_arrival, __ATOMIC_RELAXED);
    uint64_t by_thread = __atomic_load_n(&ans.by_thread, __ATOMIC_RELAXED);
    assert_int_equal(by_arrival + by_thread, ROUNDS);
    assert_true(by_arrival >= ROUNDS / 2);

    /* A write that makes no predicate hold wakes nobody: it lands while
     * B's thread sleeps, a question after it is answered (so B's progress
     * thread has dealt with the write), and the thread sleeps once more
     * only after the SPECIAL question below wakes it, not twice. */
    assert_true(until_asleep(&b));
    struct sst_engine_stats before, after;
    sst_engine_stats(b.engine, &before);
    write_unwatched(&a, &b, 1);
    ask_and_wait(&a, ROUNDS + 1);

    /* A predicate without an arrival trigger wakes the thread at once. */
    ask(&a, SPECIAL);
    uint64_t deadline = sp_now_ns() + BOUND_NS;
    while (__atomic_load_n(&ans.special, __ATOMIC_RELAXED) == 0 && sp_now_ns() < deadline)
        sched_yield();
    assert_int_equal(__atomic_load_n(&ans.special, __ATOMIC_RELAXED), 1);
    assert_true(until_asleep(&b));
    sst_engine_stats(b.engine, &after);
    assert_int_equal(after.sleeps, before.sleeps + 1);

    sst_engine_destroy(a.engine);
    sst_engine_destroy(b.engine);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_sleeping_peer_answers_on_arrival),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
