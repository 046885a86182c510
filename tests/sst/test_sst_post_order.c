/*
 * Posting order (sst_engine.c, post_pending): one release of the engine
 * lock posts every peer's batch before it rings any peer's doorbell. On
 * shm a ring that wakes a sleeper is a futex wake, and on few CPUs the
 * woken thread often takes the ringer's CPU inside that call; had the
 * ringer not yet posted to its other peers, they would wait for it
 * (traced at light load: hundreds of microseconds). Three engines in one
 * process over shm; row 0's two peers go through a shim that records the
 * order of post_writes and doorbell_ring calls. No predicate thread runs:
 * the post happens when the test releases the lock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sst/sst_impl.h"

#define ROWS      3
#define MAX_CALLS 16

struct call {
    char kind; /* 'P' post_writes, 'R' doorbell_ring */
    const struct tp_peer *peer;
};

static const struct tp_ops *real_ops;
static struct tp_ops shim_ops;
static struct call calls[MAX_CALLS];
static unsigned num_calls;

static void record(char kind, const struct tp_peer *peer)
{
    if (num_calls < MAX_CALLS)
        calls[num_calls++] = (struct call){kind, peer};
}

static int shim_post(struct tp_peer *peer, const struct tp_write *writes, unsigned count,
                     unsigned flags, uint64_t cookie)
{
    record('P', peer);
    return real_ops->post_writes(peer, writes, count, flags, cookie);
}

static int shim_ring(struct tp_peer *peer)
{
    record('R', peer);
    return real_ops->doorbell_ring(peer);
}

static void test_every_peer_is_posted_to_before_any_doorbell_rings(void **state)
{
    (void)state;
    struct sst_engine *engines[ROWS];
    struct sst_table *tables[ROWS];
    struct sst_member_desc descs[ROWS];
    memset(descs, 0, sizeof descs);
    struct tp_config config;
    memset(&config, 0, sizeof config);
    config.backend = "shm";
    config.group_name = "sst-post-order-test";
    config.failure_timeout_ms = 60000;
    struct sst_schema schema;
    sst_schema_init(&schema);
    int counter = sst_schema_add_counter(&schema);
    assert_true(counter >= 0);
    for (uint32_t row = 0; row < ROWS; row++) {
        assert_int_equal(sst_engine_create(&config, NULL, &engines[row]), 0);
        assert_int_equal(sst_table_create(engines[row], &schema, ROWS, row, &tables[row]), 0);
        assert_int_equal(sst_table_export(tables[row], &descs[row]), 0);
    }
    for (uint32_t row = 0; row < ROWS; row++)
        assert_int_equal(sst_table_connect(tables[row], descs, 5000, NULL), 0);

    /* Row 0's peers (rows 1 and 2) through the shim. */
    struct tp_peer *peers[ROWS] = {NULL};
    for (uint32_t row = 1; row < ROWS; row++) {
        peers[row] = engines[0]->peers[tables[0]->peer_of_row[row]].peer;
        real_ops = peers[row]->ops;
        peers[row]->ops = &shim_ops;
    }
    shim_ops = *real_ops;
    shim_ops.post_writes = shim_post;
    shim_ops.doorbell_ring = shim_ring;

    uint32_t offset = sst_column_offset(&schema, counter);
    sst_engine_lock(engines[0]);
    sst_write_u64(tables[0], offset, 42);
    assert_int_equal(sst_push(tables[0], offset, 8, NULL, 0), 0);
    sst_engine_unlock(engines[0]);

    /* Both peers hold the value, each was posted to and rung once, and no
     * ring came before the last post. */
    for (uint32_t row = 1; row < ROWS; row++)
        assert_int_equal(sst_read_u64(tables[row], 0, offset), 42);
    assert_int_equal(num_calls, 4);
    unsigned posts = 0, rings = 0;
    for (unsigned i = 0; i < num_calls; i++) {
        if (calls[i].kind == 'P') {
            assert_int_equal(rings, 0); /* a ring before this post: fails here */
            posts++;
        } else {
            rings++;
        }
    }
    assert_int_equal(posts, 2);
    assert_int_equal(rings, 2);
    assert_true(calls[2].peer != calls[3].peer);

    for (uint32_t row = 1; row < ROWS; row++)
        peers[row]->ops = real_ops;
    for (uint32_t row = 0; row < ROWS; row++)
        sst_engine_destroy(engines[row]); /* destroys its table */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_peer_is_posted_to_before_any_doorbell_rings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
