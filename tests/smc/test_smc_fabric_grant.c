/*
 * On the libfabric backend a writer reaches only its own rings in a
 * peer's side region (smc_group_grant_writes): the peer's progress thread
 * checks each record against the writer's grants. Three members in one
 * process (three engines over the provider given as argv[1] on loopback,
 * member ids 10, 11, 12 for rows 0, 1, 2), one subgroup of all three,
 * rows 0 and 1 sending. The test posts as a writer would:
 *   - row 0's writes into its own ring and its own point-to-point ring at
 *     row 2 land;
 *   - row 0 writing into row 1's ring at row 2 fails row 2's connection
 *     with row 0 and leaves the bytes as they were;
 *   - row 1 writing into row 2's point-to-point ring at row 0 likewise.
 * And a member that receives from nobody (two members, row 0 the only
 * sender, the point-to-point rings' grants left out as if they were off)
 * still exports a side region no peer may write: row 1 writing there
 * fails row 0's connection with it and leaves the bytes 0. The grants
 * also name who may connect at all: an endpoint claiming member id 13,
 * in no row, is refused by every member.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "smc/smc_impl.h"
#include "sst/sst.h"
#include "sst/sst_impl.h"
#include "transport/fabric/test_fabric_util.h"

#define MEMBERS 3
#define ID_BASE 10u
#define FILLER  0xababababababababull

static const char *provider = "tcp";

struct member {
    struct sst_engine *engine;
    struct smc_group *group;
};

static void on_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    (void)ctx;
    (void)m;
    (void)n;
}

/* Creates the three members, grants as a view does, and connects them
 * (their engines not started: only the test writes). */
static void create_members(struct member *m)
{
    struct smc_layout layout;
    memset(&layout, 0, sizeof layout);
    layout.num_members = MEMBERS;
    for (uint32_t row = 0; row < MEMBERS; row++)
        layout.members[row] = layout.senders[row] = row;
    layout.num_senders = 2;
    layout.window_size = 4;
    layout.max_payload = 8;
    layout.mode = SPINDLE_MODE_ATOMIC;
    const uint32_t member_of_row[MEMBERS] = {ID_BASE, ID_BASE + 1, ID_BASE + 2};
    struct sst_member_desc descs[MEMBERS];
    memset(descs, 0, sizeof descs);
    for (uint32_t row = 0; row < MEMBERS; row++) {
        struct tp_config config = {.backend = "fabric",
                                   .group_name = "smc-fabric-grant-test",
                                   .self_id = member_of_row[row],
                                   .provider = provider,
                                   .host = "127.0.0.1",
                                   .failure_timeout_ms = 60000};
        memset(&m[row], 0, sizeof m[row]);
        assert_int_equal(sst_engine_create(&config, NULL, &m[row].engine), 0);
        struct smc_options options = {
            .batching = true, .null_sends = true, .deliver = on_deliver, .deliver_ctx = &m[row]};
        assert_int_equal(
            smc_group_create(m[row].engine, &layout, 1, MEMBERS, row, &options, &m[row].group), 0);
        assert_int_equal(smc_group_grant_writes(m[row].group, member_of_row), 0);
        assert_int_equal(smc_group_export(m[row].group, &descs[row]), 0);
    }
    for (uint32_t row = 0; row < MEMBERS; row++)
        assert_int_equal(smc_group_connect(m[row].group, descs, 5000, NULL), 0);
    /* What the writers post: the first word of their own side region (their
     * own ring, which no peer writes here). */
    for (uint32_t row = 0; row < 2; row++)
        memset(sst_side(smc_group_table(m[row].group)), 0xab, 8);
}

/* Two members, one subgroup of both, row 0 its only sender; the grants
 * made as a view makes them but without the point-to-point rings' (as if
 * they were off), then connected. Row 1 fills the first word of its side
 * region, what it posts. */
static void create_lone_sender(struct member *m)
{
    struct smc_layout layout;
    memset(&layout, 0, sizeof layout);
    layout.num_members = 2;
    layout.members[0] = 0;
    layout.members[1] = 1;
    layout.senders[0] = 0;
    layout.num_senders = 1;
    layout.window_size = 4;
    layout.max_payload = 8;
    layout.mode = SPINDLE_MODE_ATOMIC;
    const uint32_t member_of_row[2] = {ID_BASE, ID_BASE + 1};
    struct sst_member_desc descs[2];
    memset(descs, 0, sizeof descs);
    for (uint32_t row = 0; row < 2; row++) {
        struct tp_config config = {.backend = "fabric",
                                   .group_name = "smc-fabric-grant-lone-test",
                                   .self_id = member_of_row[row],
                                   .provider = provider,
                                   .host = "127.0.0.1",
                                   .failure_timeout_ms = 60000};
        memset(&m[row], 0, sizeof m[row]);
        assert_int_equal(sst_engine_create(&config, NULL, &m[row].engine), 0);
        struct smc_options options = {
            .batching = true, .null_sends = true, .deliver = on_deliver, .deliver_ctx = &m[row]};
        assert_int_equal(
            smc_group_create(m[row].engine, &layout, 1, 2, row, &options, &m[row].group), 0);
        assert_true(m[row].group->p2p.enabled);
        m[row].group->p2p.enabled = false;
        assert_int_equal(smc_group_grant_writes(m[row].group, member_of_row), 0);
        m[row].group->p2p.enabled = true;
        assert_int_equal(smc_group_export(m[row].group, &descs[row]), 0);
    }
    for (uint32_t row = 0; row < 2; row++)
        assert_int_equal(smc_group_connect(m[row].group, descs, 5000, NULL), 0);
    memset(sst_side(smc_group_table(m[1].group)), 0xab, 8);
}

static void destroy_count(struct member *m, uint32_t count)
{
    for (uint32_t row = 0; row < count; row++) {
        smc_group_destroy(m[row].group);
        sst_engine_destroy(m[row].engine);
    }
}

static void destroy_members(struct member *m)
{
    destroy_count(m, MEMBERS);
}

static struct tp_peer *peer_of(struct member *from, uint32_t row)
{
    struct sst_table *table = smc_group_table(from->group);
    return from->engine->peers[table->peer_of_row[row]].peer;
}

/* Posts the first 8 bytes of from's side region to offset of row's. */
static void post_side(struct member *from, uint32_t row, uint64_t offset)
{
    struct sst_table *table = smc_group_table(from->group);
    struct tp_write write = {table->side, table->side_mr, table->side_rmr[row], offset, 8};
    assert_int_equal(tp_post_writes(peer_of(from, row), &write, 1, 0, 0), 0);
}

static uint64_t *side_at(struct member *at, uint64_t offset)
{
    return (uint64_t *)(void *)(sst_side(smc_group_table(at->group)) + offset);
}

/* The word at offset of at's side region, as its progress thread wrote it. */
static uint64_t side_word(struct member *at, uint64_t offset)
{
    return __atomic_load_n(side_at(at, offset), __ATOMIC_ACQUIRE);
}

/* Waits (at most 10 s) until at's connection to row reports a failure:
 * 1 when it did, and the failure names the grants. */
static int connection_fails(struct member *at, uint32_t row)
{
    struct tp_endpoint *ep = at->engine->endpoint;
    struct tp_peer *peer = peer_of(at, row);
    uint64_t deadline = sp_now_ns() + 10000000000ull;
    while (tp_peer_state(peer) == 0 && sp_now_ns() < deadline) {
        uint64_t token = tp_doorbell_arm(ep);
        struct tp_event ev;
        if (tp_poll(ep, &ev, 1) == 0)
            tp_doorbell_wait(ep, token, 50);
    }
    int state = tp_peer_state(peer);
    print_message("connection to row %u: %s\n", row, state != 0 ? spindle_errmsg() : "up");
    return state == SPINDLE_EPEERFAILED && strstr(spindle_errmsg(), "outside its grants") != NULL;
}

static void test_a_sender_writes_only_its_own_rings_at_a_peer(void **state)
{
    (void)state;
    struct member m[MEMBERS];
    create_members(m);
    const struct smc_subgroup *at2 = &m[2].group->subgroups[0];

    /* Its own ring and point-to-point ring at row 2 land. */
    assert_int_equal(m[0].group->subgroups[0].ring_at_peer[1], at2->ring_at[0]);
    assert_int_equal(side_word(&m[2], at2->ring_at[0]), 0);
    post_side(&m[0], 2, at2->ring_at[0]);
    assert_true(tf_wait_word(m[2].engine->endpoint, side_at(&m[2], at2->ring_at[0]), FILLER, 5000));
    assert_int_equal(m[0].group->p2p.at_peer[2], m[2].group->p2p.in_at[0]);
    post_side(&m[0], 2, m[0].group->p2p.at_peer[2]);
    assert_true(tf_wait_word(m[2].engine->endpoint, side_at(&m[2], m[2].group->p2p.in_at[0]),
                             FILLER, 5000));
    assert_int_equal(tp_peer_state(peer_of(&m[2], 0)), 0);

    /* Row 1's ring at row 2 it may not write. */
    post_side(&m[0], 2, at2->ring_at[1]);
    assert_true(connection_fails(&m[2], 0));
    assert_int_equal(side_word(&m[2], at2->ring_at[1]), 0);

    /* Nor may row 1 write row 2's point-to-point ring at row 0. */
    post_side(&m[1], 0, m[0].group->p2p.in_at[2]);
    assert_true(connection_fails(&m[0], 1));
    assert_int_equal(side_word(&m[0], m[0].group->p2p.in_at[2]), 0);
    destroy_members(m);
}

static void test_an_id_outside_the_view_cannot_connect(void **state)
{
    (void)state;
    struct member m[MEMBERS];
    create_members(m);
    struct tp_endpoint *stranger = NULL;
    assert_int_equal(tf_open(provider, ID_BASE + MEMBERS, 0, 2000, &stranger), 0);
    for (uint32_t row = 0; row < MEMBERS; row++) {
        struct tp_desc addr;
        struct tp_peer *peer = NULL;
        assert_int_equal(tp_address(m[row].engine->endpoint, &addr), 0);
        assert_int_equal(tp_connect(stranger, &addr, 5000, &peer), SPINDLE_EUNREACH);
        assert_null(peer);
    }
    tp_close(stranger);
    destroy_members(m);
}

static void test_a_member_that_receives_from_nobody_takes_no_writes(void **state)
{
    (void)state;
    struct member m[2];
    create_lone_sender(m);
    /* Row 0's own ring, which no peer has a reason to write. */
    assert_int_equal(side_word(&m[0], 0), 0);
    post_side(&m[1], 0, 0);
    assert_true(connection_fails(&m[0], 1));
    assert_int_equal(side_word(&m[0], 0), 0);
    destroy_count(m, 2);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        provider = argv[1];
    tf_require_provider(provider);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_sender_writes_only_its_own_rings_at_a_peer),
        cmocka_unit_test(test_a_member_that_receives_from_nobody_takes_no_writes),
        cmocka_unit_test(test_an_id_outside_the_view_cannot_connect),
    };
    return cmocka_run_group_tests_name(provider, tests, NULL, NULL);
}
