/* SST and predicate engine with real member processes on shared memory. */
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "control/ctl.h"
#include "sst/sst.h"
#include "sst/sst_impl.h"
#include "util/clock.h"
#include "util/error.h"

#define MAX_MEMBERS 4
#define ARRAY_WORDS 16

struct member {
    struct sst_engine *engine;
    struct sst_table *table;
    struct ctl *ctl;
    uint32_t index, count;
    int counter, guard, array, ack;
};

static char dir_template[] = "/tmp/spindle-sst-XXXXXX";
static char *base_dir;
static int run_number;

static uint32_t off(struct member *m, int column)
{
    return sst_column_offset(m->table->schema, column);
}

/* Creates the engine and table and connects to every other member. */
static int join_max_sleep_ms; /* 0: the engine default */
/* Side region size of member index of count (NULL: none). */
static size_t (*join_side_bytes)(uint32_t index, uint32_t count);
/* Failure upcall installed before the table exists (NULL: none). */
static sst_failure_fn join_on_failure;

static int member_join(struct member *m, uint32_t index, uint32_t count, int timeout_ms)
{
    memset(m, 0, sizeof *m);
    m->index = index;
    m->count = count;
    struct tp_config config = {.backend = "shm", .failure_timeout_ms = timeout_ms};
    struct sst_engine_options options;
    sst_engine_options_default(&options);
    if (join_max_sleep_ms > 0)
        options.max_sleep_ms = join_max_sleep_ms;
    options.announce_sleep = true; /* the wake test waits for a peer's sleep */
    if (sst_engine_create(&config, &options, &m->engine) != 0)
        return 10;
    if (join_on_failure != NULL)
        sst_engine_on_failure(m->engine, join_on_failure, NULL);
    struct sst_schema schema;
    sst_schema_init(&schema);
    m->counter = sst_schema_add_counter(&schema);
    m->guard = sst_schema_add_counter(&schema);
    /* The guarded data: ARRAY_WORDS adjacent counters pushed as one range,
     * as the SMC pushes its received_num columns. */
    m->array = sst_schema_add_counter(&schema);
    for (int w = 1; w < ARRAY_WORDS; w++)
        if (sst_schema_add_counter(&schema) != m->array + w ||
            sst_column_offset(&schema, m->array + w) !=
                sst_column_offset(&schema, m->array) + 8 * w)
            return 11;
    m->ack = sst_schema_add_counter(&schema);
    if (m->ack < 0 || sst_table_create(m->engine, &schema, count, index, &m->table) != 0)
        return 11;
    if (join_side_bytes != NULL &&
        sst_table_set_side_region(m->table, join_side_bytes(index, count), TP_MR_NONPINNED) != 0)
        return 14;
    char dir[128];
    snprintf(dir, sizeof dir, "%s/run%d", base_dir, run_number);
    struct sst_member_desc mine, all[MAX_MEMBERS];
    if (ctl_open_dir(dir, index, count, &(struct ctl_versions){1, 1}, 10000, &m->ctl) != 0 ||
        sst_table_export(m->table, &mine) != 0 ||
        ctl_allgather(m->ctl, 1, &mine, sizeof mine, all, 10000) != 0 ||
        sst_table_connect(m->table, all, 5000, NULL) != 0 || sst_engine_start(m->engine) != 0)
        return 12;
    return 0;
}

/* Barrier on the bootstrap channel. */
static int member_barrier(struct member *m, uint32_t tag)
{
    uint32_t mine = m->index, all[MAX_MEMBERS];
    return ctl_allgather(m->ctl, tag, &mine, sizeof mine, all, 20000) == 0 ? 0 : 13;
}

static void member_leave(struct member *m)
{
    sst_engine_destroy(m->engine);
    ctl_close(m->ctl);
}

static bool wait_until(struct member *m, uint32_t row, int column, uint64_t value, int timeout_ms)
{
    uint64_t deadline = sp_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (sst_read_u64(m->table, row, off(m, column)) < value) {
        if (sp_now_ns() > deadline)
            return false;
        sched_yield();
    }
    return true;
}

typedef int (*member_fn)(uint32_t index, uint32_t count);

/* Runs fn in count forked processes; returns how many failed. */
static int run_members(member_fn fn, uint32_t count, pid_t *pids_out)
{
    run_number++;
    pid_t pids[MAX_MEMBERS];
    for (uint32_t i = 0; i < count; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(fn(i, count));
        if (pids_out != NULL)
            pids_out[i] = pids[i];
    }
    if (pids_out != NULL)
        return 0;
    int failed = 0;
    for (uint32_t i = 0; i < count; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            print_message("member %u exited with status %d\n", i,
                          WIFEXITED(status) ? WEXITSTATUS(status) : -1);
            failed++;
        }
    }
    return failed;
}

/* ---- rows converge, guarded arrays are never seen unguarded ------------ */

static int converge_member(uint32_t index, uint32_t count)
{
    struct member m;
    int rc = member_join(&m, index, count, 2000);
    if (rc != 0)
        return rc;
    const uint64_t rounds = 20000;
    uint64_t *array = (uint64_t *)(void *)(sst_row(m.table, index) + off(&m, m.array));
    uint64_t unguarded = 0;
    for (uint64_t g = 1; g <= rounds; g++) {
        sst_engine_lock(m.engine);
        for (int w = 0; w < ARRAY_WORDS; w++)
            __atomic_store_n(&array[w], g, __ATOMIC_RELAXED);
        sst_push(m.table, off(&m, m.array), ARRAY_WORDS * 8, NULL, 0);
        sst_write_u64(m.table, off(&m, m.guard), g);
        sst_push(m.table, off(&m, m.guard), 8, NULL, 0);
        sst_write_u64(m.table, off(&m, m.counter), g);
        sst_push(m.table, off(&m, m.counter), 8, NULL, 0);
        sst_engine_unlock(m.engine);
        /* Check the other rows as they stream in. */
        for (uint32_t row = 0; row < count; row++) {
            uint64_t guard = sst_read_u64(m.table, row, off(&m, m.guard));
            const uint64_t *theirs =
                (const uint64_t *)(const void *)(sst_row(m.table, row) + off(&m, m.array));
            for (int w = 0; w < ARRAY_WORDS; w++) {
                if (__atomic_load_n(&theirs[w], __ATOMIC_ACQUIRE) < guard)
                    unguarded++;
            }
        }
    }
    for (uint32_t row = 0; row < count; row++) {
        if (!wait_until(&m, row, m.counter, rounds, 20000))
            return 20;
    }
    if (unguarded != 0)
        return 21;
    struct sst_engine_stats stats;
    sst_engine_stats(m.engine, &stats);
    if (stats.pushes < rounds * 3 || stats.writes_posted == 0 || stats.doorbells == 0 ||
        stats.doorbells > stats.writes_posted)
        return 22;
    rc = member_barrier(&m, 2);
    member_leave(&m);
    return rc;
}

static void test_rows_converge_and_arrays_stay_guarded(void **state)
{
    (void)state;
    assert_int_equal(run_members(converge_member, 3, NULL), 0);
}

/* ---- side regions: pushes land at the owner's offset, guarded by a row -- */

/* Member owner's side region holds one ARRAY_WORDS slot per member, laid
 * out differently in every member (shifted by owner * SIDE_SKEW), so a
 * push whose remote offset were taken from the writer's own layout would
 * land in the wrong place. */
#define SIDE_SKEW 64u

static uint64_t side_slot(uint32_t owner, uint32_t writer)
{
    return (uint64_t)owner * SIDE_SKEW + (uint64_t)writer * ARRAY_WORDS * 8;
}

static size_t side_bytes(uint32_t index, uint32_t count)
{
    return (size_t)side_slot(index, count) + SIDE_SKEW; /* a zero tail too */
}

/* Every other member's slot holds `value` in every word; all other bytes of
 * the side region (skew, tail, gaps) are still zero. */
static bool side_image_is(struct member *m, uint64_t value)
{
    const uint8_t *side = sst_side(m->table);
    size_t size = m->table->side_size;
    for (size_t at = 0; at < size; at += 8) {
        uint64_t expected = 0;
        for (uint32_t writer = 0; writer < m->count; writer++)
            if (at >= side_slot(m->index, writer) &&
                at < side_slot(m->index, writer) + ARRAY_WORDS * 8)
                expected = value;
        if (__atomic_load_n((const uint64_t *)(const void *)(side + at), __ATOMIC_ACQUIRE) !=
            expected)
            return false;
    }
    return true;
}

static int side_member(uint32_t index, uint32_t count)
{
    struct member m;
    int rc = member_join(&m, index, count, 2000);
    if (rc != 0)
        return rc;
    if (sst_side(m.table) == NULL || m.table->side_size != side_bytes(index, count))
        return 30;
    const uint64_t rounds = 20000;
    uint64_t *mine = (uint64_t *)(void *)(sst_side(m.table) + side_slot(index, index));
    uint32_t rows[MAX_MEMBERS];
    uint64_t remote[MAX_MEMBERS];
    uint32_t num_rows = 0;
    for (uint32_t row = 0; row < count; row++) {
        if (row == index)
            continue;
        rows[num_rows] = row;
        remote[num_rows++] = side_slot(row, index);
    }
    uint64_t unguarded = 0;
    for (uint64_t g = 1; g <= rounds; g++) {
        sst_engine_lock(m.engine);
        for (int w = 0; w < ARRAY_WORDS; w++)
            __atomic_store_n(&mine[w], g, __ATOMIC_RELAXED);
        if (sst_push_side(m.table, side_slot(index, index), ARRAY_WORDS * 8, rows, remote,
                          num_rows) != 0) {
            sst_engine_unlock(m.engine);
            return 31;
        }
        sst_write_u64(m.table, off(&m, m.guard), g);
        sst_push(m.table, off(&m, m.guard), 8, NULL, 0);
        sst_engine_unlock(m.engine);
        /* Whatever guard a row shows, its slot in my side region is at
         * least as new (T2 across the side region and the rows). */
        for (uint32_t row = 0; row < count; row++) {
            if (row == index)
                continue;
            uint64_t guard = sst_read_u64(m.table, row, off(&m, m.guard));
            const uint64_t *theirs =
                (const uint64_t *)(const void *)(sst_side(m.table) + side_slot(index, row));
            for (int w = 0; w < ARRAY_WORDS; w++)
                if (__atomic_load_n(&theirs[w], __ATOMIC_ACQUIRE) < guard)
                    unguarded++;
        }
    }
    for (uint32_t row = 0; row < count; row++)
        if (!wait_until(&m, row, m.guard, rounds, 20000))
            return 32;
    if (unguarded != 0)
        return 33;
    if (!side_image_is(&m, rounds))
        return 34;
    rc = member_barrier(&m, 2);
    member_leave(&m);
    return rc;
}

static void test_side_pushes_land_at_the_owners_offset_before_their_guard(void **state)
{
    (void)state;
    join_side_bytes = side_bytes;
    int failed = run_members(side_member, 3, NULL);
    join_side_bytes = NULL;
    assert_int_equal(failed, 0);
}

/* Two tables of one process (rows 0 and 1, two engines): only row 0 has a
 * side region. */
static void test_side_region_is_optional_and_checked(void **state)
{
    (void)state;
    struct tp_config config = {.backend = "shm", .failure_timeout_ms = 1000};
    struct sst_engine *engines[2];
    struct sst_table *tables[2];
    struct sst_schema schema;
    sst_schema_init(&schema);
    assert_true(sst_schema_add_counter(&schema) >= 0);
    for (uint32_t row = 0; row < 2; row++) {
        assert_int_equal(sst_engine_create(&config, NULL, &engines[row]), 0);
        assert_int_equal(sst_table_create(engines[row], &schema, 2, row, &tables[row]), 0);
    }
    assert_int_equal(sst_table_set_side_region(tables[0], 0, 0), SPINDLE_EINVAL);
    assert_int_equal(sst_table_set_side_region(tables[0], 1000, TP_MR_NONPINNED), 0);
    assert_int_equal(sst_table_set_side_region(tables[0], 1000, TP_MR_NONPINNED), SPINDLE_EINVAL);
    assert_non_null(sst_side(tables[0]));
    assert_int_equal(tables[0]->side_size, 1000);
    assert_null(sst_side(tables[1]));
    assert_int_equal(tables[1]->side_size, 0);

    struct sst_member_desc descs[2];
    for (uint32_t row = 0; row < 2; row++)
        assert_int_equal(sst_table_export(tables[row], &descs[row]), 0);
    assert_true(descs[0].side.len > 0);
    assert_int_equal(descs[1].side.len, 0);
    for (uint32_t row = 0; row < 2; row++)
        assert_int_equal(sst_table_connect(tables[row], descs, 1000, NULL), 0);
    assert_int_equal(sst_table_set_side_region(tables[1], 64, 0), SPINDLE_EINVAL);

    uint32_t other = 1;
    uint64_t remote = 0;
    sst_engine_lock(engines[0]);
    /* Row 1's owner has no side region; out-of-range local bytes. */
    assert_int_equal(sst_push_side(tables[0], 0, 8, &other, &remote, 1), SPINDLE_EINVAL);
    assert_int_equal(sst_push_side(tables[0], 996, 8, &other, &remote, 1), SPINDLE_EINVAL);
    sst_engine_unlock(engines[0]);
    other = 0;
    sst_engine_lock(engines[1]);
    /* No local side region at all. */
    assert_int_equal(sst_push_side(tables[1], 0, 8, &other, &remote, 1), SPINDLE_EINVAL);
    sst_engine_unlock(engines[1]);
    for (uint32_t row = 0; row < 2; row++)
        sst_engine_destroy(engines[row]);
}

/* Three tables of one process (rows 0, 1 and 2, three engines) over shm:
 * rows are whole pages apart, each member imports only its own row of the
 * others' tables, a push still lands, and a write by row 1's owner into
 * row 2 of row 0's table is refused with that row left as it was. */
static void test_member_writes_only_its_row_of_a_peer_table(void **state)
{
    (void)state;
    struct tp_config config = {.backend = "shm", .failure_timeout_ms = 1000};
    struct sst_engine *engines[3];
    struct sst_table *tables[3];
    struct sst_member_desc descs[3];
    struct sst_schema schema;
    sst_schema_init(&schema);
    int counter = sst_schema_add_counter(&schema);
    assert_true(counter >= 0);
    uint32_t at = sst_column_offset(&schema, counter);
    for (uint32_t row = 0; row < 3; row++) {
        assert_int_equal(sst_engine_create(&config, NULL, &engines[row]), 0);
        assert_int_equal(sst_table_create(engines[row], &schema, 3, row, &tables[row]), 0);
        assert_int_equal(sst_table_export(tables[row], &descs[row]), 0);
        assert_int_equal(tables[row]->row_stride % 4096, 0);
    }
    for (uint32_t row = 0; row < 3; row++)
        assert_int_equal(sst_table_connect(tables[row], descs, 1000, NULL), 0);

    uint32_t to_row0 = 0;
    sst_engine_lock(engines[1]);
    sst_write_u64(tables[1], at, 77);
    assert_int_equal(sst_push(tables[1], at, 8, &to_row0, 1), 0);
    sst_engine_unlock(engines[1]); /* shm posts here, synchronously */
    assert_int_equal(sst_read_u64(tables[0], 1, at), 77);

    /* Row 1's owner, through its import of row 0's table: row 2 is not
     * its to write, nor its own row's neighbours' bytes. */
    uint32_t stride = tables[1]->row_stride;
    struct tp_peer *to_owner0 = engines[1]->peers[tables[1]->peer_of_row[0]].peer;
    const uint8_t *mine = sst_row(tables[1], 1);
    struct tp_write into_row2 = {mine, tables[1]->mr, tables[1]->rmr[0], 2ull * stride + at, 8};
    assert_int_equal(tp_post_writes(to_owner0, &into_row2, 1, 0, 0), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "outside the slice"));
    struct tp_write over_row1_end = {mine, tables[1]->mr, tables[1]->rmr[0], 2ull * stride - 4, 8};
    assert_int_equal(tp_post_writes(to_owner0, &over_row1_end, 1, 0, 0), SPINDLE_EINVAL);
    assert_int_equal(sst_read_u64(tables[0], 2, at), 0);
    struct tp_write into_row1 = {mine, tables[1]->mr, tables[1]->rmr[0], 1ull * stride + at, 8};
    assert_int_equal(tp_post_writes(to_owner0, &into_row1, 1, 0, 0), 0);
    for (uint32_t row = 0; row < 3; row++)
        sst_engine_destroy(engines[row]);
}

/* ---- predicates ---------------------------------------------------------- */

struct counts {
    int one_time, recurrent, removed_after;
    uint64_t recurrent_id;
    struct sst_engine *engine;
};

static bool always(void *ctx)
{
    (void)ctx;
    return true;
}

static void count_one_time(void *ctx)
{
    ((struct counts *)ctx)->one_time++;
}

static void count_recurrent(void *ctx)
{
    struct counts *c = ctx;
    if (++c->recurrent == 100)
        sst_predicate_remove(c->engine, c->recurrent_id); /* from its own trigger */
    else if (c->recurrent > 100)
        c->removed_after++;
}

static void test_one_time_and_recurrent_predicates(void **state)
{
    (void)state;
    struct tp_config config = {.backend = "shm"};
    struct sst_engine *engine;
    assert_int_equal(sst_engine_create(&config, NULL, &engine), 0);
    struct counts c = {.engine = engine};
    assert_int_equal(sst_predicate_add(engine, always, count_one_time, &c, SST_PRED_ONE_TIME, NULL),
                     0);
    assert_int_equal(
        sst_predicate_add(engine, always, count_recurrent, &c, SST_PRED_RECURRENT, &c.recurrent_id),
        0);
    assert_int_equal(sst_engine_start(engine), 0);
    uint64_t deadline = sp_now_ns() + 10ull * 1000000000ull;
    int seen = 0;
    while (seen < 100 && sp_now_ns() < deadline) {
        sst_engine_lock(engine);
        seen = c.recurrent;
        sst_engine_unlock(engine);
        sched_yield();
    }
    sst_engine_stop(engine);
    assert_int_equal(c.one_time, 1);
    assert_int_equal(c.recurrent, 100);
    assert_int_equal(c.removed_after, 0);
    assert_int_equal(sst_predicate_add(engine, NULL, count_one_time, &c, SST_PRED_ONE_TIME, NULL),
                     SPINDLE_EINVAL);
    sst_engine_destroy(engine);
}

/* ---- idle CPU and wake latency ------------------------------------------ */

static int report_fd = -1;

static bool ack_needed(void *ctx)
{
    struct member *m = ctx;
    return sst_read_u64(m->table, 0, off(m, m->counter)) >
           sst_read_u64(m->table, m->index, off(m, m->ack));
}

static void ack(void *ctx)
{
    struct member *m = ctx;
    sst_write_u64(m->table, off(m, m->ack), sst_read_u64(m->table, 0, off(m, m->counter)));
    uint32_t row0 = 0;
    sst_push(m->table, off(m, m->ack), 8, &row0, 1);
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int idle_member(uint32_t index, uint32_t count)
{
    struct member m;
    int rc = member_join(&m, index, count, 2000);
    if (rc != 0)
        return rc;
    if (index != 0 && sst_predicate_add(m.engine, ack_needed, ack, &m, SST_PRED_RECURRENT, NULL))
        return 30;
    if ((rc = member_barrier(&m, 2)) != 0)
        return rc;
    /* Idle: 100 ms to settle, then one second measured. */
    struct timespec settle = {0, 100 * 1000000L}, window = {1, 0};
    nanosleep(&settle, NULL);
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    nanosleep(&window, NULL);
    getrusage(RUSAGE_SELF, &after);
    int64_t used_us = (after.ru_utime.tv_sec - before.ru_utime.tv_sec) * 1000000 +
                      (after.ru_utime.tv_usec - before.ru_utime.tv_usec) +
                      (after.ru_stime.tv_sec - before.ru_stime.tv_sec) * 1000000 +
                      (after.ru_stime.tv_usec - before.ru_stime.tv_usec);
    if ((rc = member_barrier(&m, 3)) != 0)
        return rc;
    uint64_t record[2] = {index, (uint64_t)used_us};
    if (write(report_fd, record, sizeof record) != sizeof record)
        return 31;
    if (index == 0) {
        /* Wake latency: wait until member 1 announces sleep, push, time the
         * ack (a round trip: wake, predicate, push back). Up to three rounds
         * of 25 trials; the best round's median is reported, so a burst of
         * load from elsewhere on the machine during one round is not taken
         * for the mechanism's latency. */
        enum { TRIALS = 25, ROUNDS = 3 };
        uint64_t latencies[TRIALS], best_median = UINT64_MAX, worst = 0, counter = 0;
        for (int round = 0; round < ROUNDS && best_median >= 1000000; round++) {
            for (uint32_t t = 0; t < TRIALS; t++) {
                uint64_t deadline = sp_now_ns() + 5ull * 1000000000ull;
                while ((sst_read_u64(m.table, 1, 8) & 1) == 0) {
                    if (sp_now_ns() > deadline)
                        return 32;
                    struct timespec nap = {0, 200000};
                    nanosleep(&nap, NULL);
                }
                uint64_t start = sp_now_ns();
                sst_engine_lock(m.engine);
                sst_write_u64(m.table, off(&m, m.counter), ++counter);
                uint32_t row1 = 1;
                sst_push(m.table, off(&m, m.counter), 8, &row1, 1);
                sst_engine_unlock(m.engine);
                if (!wait_until(&m, 1, m.ack, counter, 5000))
                    return 33;
                latencies[t] = sp_now_ns() - start;
            }
            qsort(latencies, TRIALS, sizeof latencies[0], compare_u64);
            if (latencies[TRIALS / 2] < best_median) {
                best_median = latencies[TRIALS / 2];
                worst = latencies[TRIALS - 1];
            }
        }
        uint64_t wake[3] = {1000, best_median, worst};
        if (write(report_fd, wake, sizeof wake) != sizeof wake)
            return 34;
    }
    if ((rc = member_barrier(&m, 4)) != 0)
        return rc;
    member_leave(&m);
    return 0;
}

static void test_idle_group_sleeps_and_push_wakes_it(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    report_fd = fds[1];
    join_max_sleep_ms = 2000;
    assert_int_equal(run_members(idle_member, 3, NULL), 0);
    join_max_sleep_ms = 0;
    close(fds[1]);
    uint64_t total_us = 0, median_ns = 0, worst_ns = 0, record[3];
    int members = 0;
    ssize_t got;
    while ((got = read(fds[0], record, 2 * sizeof(uint64_t))) == 2 * sizeof(uint64_t)) {
        if (record[0] == 1000) {
            assert_int_equal(read(fds[0], &record[2], sizeof(uint64_t)), sizeof(uint64_t));
            median_ns = record[1];
            worst_ns = record[2];
        } else {
            total_us += record[1];
            members++;
        }
    }
    close(fds[0]);
    print_message("idle group of 3: %.2f%% of one core over 1 s; wake latency median %.1f us, "
                  "worst %.1f us\n",
                  total_us / 10000.0, median_ns / 1000.0, worst_ns / 1000.0);
    assert_int_equal(members, 3);
    assert_true(total_us < 50000); /* < 5% of one core */
    assert_true(median_ns > 0);
    /* Members sleep up to 2000 ms per doorbell wait, and each push comes
     * within a poll (0.2 ms) of the member announcing its sleep: woken by
     * their timers, half of the trials would take about a second or more.
     * A median under 100 ms is the ring from the push; the bound says
     * nothing of speed (the benchmark reports the median), so a loaded
     * machine that delays the wake-up by milliseconds still passes. */
    assert_true(median_ns < 100000000);
}

/* ---- failure -------------------------------------------------------------- */

static int failures_seen;
static uint64_t rows_failed;     /* bit r: row r was reported failed */
static int go_fds[2] = {-1, -1}; /* closed by the test once every survivor reported */

/* The SST marks a row failed and reports it here, once (sst_engine_on_failure). */
static void on_failure(void *ctx, struct sst_table *table, uint32_t row, int error)
{
    (void)ctx;
    (void)table;
    (void)error;
    rows_failed |= 1ull << row;
    if (row == 2)
        failures_seen++;
}

static int survivor_member(uint32_t index, uint32_t count)
{
    struct member m;
    int rc = member_join(&m, index, count, 300);
    if (rc != 0)
        return rc;
    close(go_fds[1]);
    if ((rc = member_barrier(&m, 2)) != 0)
        return rc;
    if (index == 2) {
        if (write(report_fd, &index, sizeof index) != sizeof index)
            return 41;
        for (;;)
            pause(); /* killed by the test */
    }
    uint64_t deadline = sp_now_ns() + 10ull * 1000000000ull;
    bool seen = false;
    while (!seen && sp_now_ns() < deadline) {
        sst_engine_lock(m.engine);
        seen = failures_seen == 1 && rows_failed == 1ull << 2;
        sst_engine_unlock(m.engine);
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
    if (!seen)
        print_message("member %u: failures %d, rows failed 0x%llx\n", index, failures_seen,
                      (unsigned long long)rows_failed);
    /* Stay until every survivor has checked: a survivor that leaves early
     * would (rightly) be reported as failed to the one still checking. */
    if (write(report_fd, &index, sizeof index) != sizeof index)
        return 42;
    char go;
    while (read(go_fds[0], &go, 1) > 0)
        ;
    member_leave(&m);
    return seen ? 0 : 40;
}

static void test_killed_member_is_reported_to_survivors(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    report_fd = fds[1];
    assert_int_equal(pipe(go_fds), 0);
    pid_t pids[3];
    join_on_failure = on_failure;
    run_members(survivor_member, 3, pids);
    join_on_failure = NULL;
    close(go_fds[0]);
    /* Once the whole group is connected (member 2 says so after the
     * barrier), kill member 2 with -9. Survivors bound their own wait. */
    uint32_t ready;
    assert_int_equal(read(fds[0], &ready, sizeof ready), (ssize_t)sizeof ready);
    assert_int_equal(ready, 2);
    kill(pids[2], SIGKILL);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(read(fds[0], &ready, sizeof ready), (ssize_t)sizeof ready);
        assert_true(ready < 2);
    }
    close(go_fds[1]);
    close(fds[0]);
    close(fds[1]);
    for (int i = 0; i < 3; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        if (i < 2) {
            assert_true(WIFEXITED(status));
            assert_int_equal(WEXITSTATUS(status), 0);
        }
    }
}

/* ---- a peer that never takes writes is failed, not silently skipped ----- */

#define STUCK_TIMEOUT_MS 300

static const struct tp_ops *stuck_real_ops;
static struct tp_ops stuck_ops;
static struct sst_engine *stuck_engine;
static unsigned stuck_calls;       /* post_writes calls to the stuck peer */
static unsigned stuck_calls_after; /* ... made after posting gave up on it */
static uint64_t stuck_first_ns;    /* first refused post */
static int stuck_error;            /* error of the row 1 report */
static uint64_t stuck_reported_ns; /* when row 1 was reported */

/* The shim's post_writes: the peer's queue never has room. Called with
 * post_lock held, so reading the engine's stuck list is safe. */
static int stuck_post(struct tp_peer *peer, const struct tp_write *writes, unsigned count,
                      unsigned flags, uint64_t cookie)
{
    (void)writes;
    (void)count;
    (void)flags;
    (void)cookie;
    if (stuck_calls++ == 0)
        stuck_first_ns = sp_now_ns();
    for (uint32_t i = 0; i < stuck_engine->num_stuck; i++) {
        if (stuck_engine->stuck[i].peer == peer)
            stuck_calls_after++;
    }
    return SPINDLE_EAGAIN;
}

static void stuck_on_failure(void *ctx, struct sst_table *table, uint32_t row, int error)
{
    (void)ctx;
    (void)table;
    rows_failed |= 1ull << row;
    if (row == 1) {
        stuck_error = error;
        stuck_reported_ns = sp_now_ns();
    }
}

static int stuck_member(uint32_t index, uint32_t count)
{
    struct member m;
    int rc = member_join(&m, index, count, STUCK_TIMEOUT_MS);
    if (rc != 0)
        return rc;
    if ((rc = member_barrier(&m, 2)) != 0)
        return rc;
    if (index == 0) {
        /* Row 1's connection stops taking writes: swap its table for the
         * shim's under post_lock, where every post reads it. */
        stuck_engine = m.engine;
        pthread_mutex_lock(&m.engine->post_lock);
        struct tp_peer *peer = m.engine->peers[m.table->peer_of_row[1]].peer;
        stuck_real_ops = peer->ops;
        stuck_ops = *peer->ops;
        stuck_ops.post_writes = stuck_post;
        peer->ops = &stuck_ops;
        pthread_mutex_unlock(&m.engine->post_lock);
        /* This push waits for room until posting gives up; meanwhile the
         * predicate thread queues heartbeats to row 1 behind it. */
        sst_engine_lock(m.engine);
        sst_write_u64(m.table, off(&m, m.counter), 1);
        sst_push(m.table, off(&m, m.counter), 8, NULL, 0);
        sst_engine_unlock(m.engine);
        uint64_t deadline = sp_now_ns() + 10ull * 1000000000ull;
        bool reported = false;
        while (!reported && sp_now_ns() < deadline) {
            sst_engine_lock(m.engine);
            reported = (rows_failed & 2) != 0;
            sst_engine_unlock(m.engine);
            struct timespec nap = {0, 1000000};
            nanosleep(&nap, NULL);
        }
        /* More pushes and heartbeats: none may reach the failed peer. */
        for (uint64_t v = 2; v <= 50; v++) {
            sst_engine_lock(m.engine);
            sst_write_u64(m.table, off(&m, m.counter), v);
            sst_push(m.table, off(&m, m.counter), 8, NULL, 0);
            sst_engine_unlock(m.engine);
        }
        struct timespec beats = {0, 3 * 100 * 1000000L}; /* three heartbeat periods */
        nanosleep(&beats, NULL);
        pthread_mutex_lock(&m.engine->post_lock);
        unsigned calls = stuck_calls, after = stuck_calls_after;
        uint64_t first_ns = stuck_first_ns;
        pthread_mutex_unlock(&m.engine->post_lock);
        sst_engine_lock(m.engine);
        uint64_t failed = rows_failed;
        int error = stuck_error;
        uint64_t waited_ms = (stuck_reported_ns - first_ns) / 1000000;
        sst_engine_unlock(m.engine);
        if (!reported || failed != 2 || error != SPINDLE_ETIMEDOUT || calls == 0 || after != 0 ||
            waited_ms < STUCK_TIMEOUT_MS) {
            print_message("stuck: reported %d rows 0x%llx error %d calls %u after %u waited %llu "
                          "ms\n",
                          reported, (unsigned long long)failed, error, calls, after,
                          (unsigned long long)waited_ms);
            return 50;
        }
        /* The real table again, so that leaving disconnects normally. */
        pthread_mutex_lock(&m.engine->post_lock);
        m.engine->peers[m.table->peer_of_row[1]].peer->ops = stuck_real_ops;
        pthread_mutex_unlock(&m.engine->post_lock);
    }
    rc = member_barrier(&m, 3);
    member_leave(&m);
    return rc;
}

/* Posting to a peer whose queue stays full gives up after the failure
 * timeout and fails that peer (SPINDLE_ETIMEDOUT through the failure
 * upcall) instead of dropping the batch; nothing queued behind it, and
 * nothing pushed later, is posted to it: a guard must never reach a peer
 * that missed the data it guards. */
static void test_peer_that_takes_no_writes_is_failed(void **state)
{
    (void)state;
    join_on_failure = stuck_on_failure;
    int failed = run_members(stuck_member, 2, NULL);
    join_on_failure = NULL;
    assert_int_equal(failed, 0);
}

static void test_bad_schema_and_pushes_are_rejected(void **state)
{
    (void)state;
    struct sst_schema schema;
    sst_schema_init(&schema);
    for (int column = 0; column < SST_MAX_COLUMNS; column++)
        assert_int_equal(sst_schema_add_counter(&schema), column);
    assert_int_equal(sst_schema_add_counter(&schema), SPINDLE_EINVAL);
    sst_schema_init(&schema);
    assert_int_equal(sst_schema_add_counter(&schema), 0);
    struct tp_config config = {.backend = "shm"};
    struct sst_engine *engine;
    struct sst_table *table;
    assert_int_equal(sst_engine_create(&config, NULL, &engine), 0);
    assert_int_equal(sst_table_create(engine, &schema, 0, 0, &table), SPINDLE_EINVAL);
    assert_int_equal(sst_table_create(engine, &schema, 2, 0, &table), 0);
    assert_int_equal(sst_push(table, 100, 64, NULL, 0), SPINDLE_EINVAL);
    uint32_t bad_row = 9;
    assert_int_equal(sst_push(table, 0, 8, &bad_row, 1), SPINDLE_EINVAL);
    struct tp_config unknown = {.backend = "pigeon"};
    struct sst_engine *none;
    assert_int_equal(sst_engine_create(&unknown, NULL, &none), SPINDLE_ENOTSUP);
    sst_engine_destroy(engine);
}

int main(void)
{
    base_dir = mkdtemp(dir_template);
    if (base_dir == NULL)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_schema_and_pushes_are_rejected),
        cmocka_unit_test(test_one_time_and_recurrent_predicates),
        cmocka_unit_test(test_rows_converge_and_arrays_stay_guarded),
        cmocka_unit_test(test_side_region_is_optional_and_checked),
        cmocka_unit_test(test_member_writes_only_its_row_of_a_peer_table),
        cmocka_unit_test(test_side_pushes_land_at_the_owners_offset_before_their_guard),
        cmocka_unit_test(test_idle_group_sleeps_and_push_wakes_it),
        cmocka_unit_test(test_killed_member_is_reported_to_survivors),
        cmocka_unit_test(test_peer_that_takes_no_writes_is_failed),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    char cleanup[128];
    snprintf(cleanup, sizeof cleanup, "rm -rf %s", base_dir);
    if (system(cleanup) != 0)
        failed++;
    return failed;
}
