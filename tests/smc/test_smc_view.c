/*
 * SMC view-change hooks on a one-member group built from the internal API:
 * wedging stops sends, received counts are readable per sender,
 * deliver_trim refuses a trim this member cannot honour, an unordered
 * edge counts the resends still to skip from an earlier change, and a
 * message committed but never pushed (no position yet) is resent whole.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "smc/smc.h"
#include "sst/sst.h"

static uint64_t delivered;

static void on_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    (void)ctx;
    (void)m;
    __atomic_add_fetch(&delivered, n, __ATOMIC_RELEASE);
}

/* A started one-member group of one subgroup in mode, over shm; skip:
 * resends to take without delivering (unordered, smc_group_skip). */
static void open_group(enum spindle_delivery_mode mode, uint64_t skip,
                       struct sst_engine **engine_out, struct smc_group **group_out)
{
    struct tp_config config;
    memset(&config, 0, sizeof config);
    config.backend = "shm";
    config.group_name = "smc-view-test";
    config.failure_timeout_ms = 1000;
    struct sst_engine_options engine_options;
    sst_engine_options_default(&engine_options);
    struct sst_engine *engine;
    assert_int_equal(sst_engine_create(&config, &engine_options, &engine), 0);

    struct smc_layout layout;
    memset(&layout, 0, sizeof layout);
    layout.num_members = 1;
    layout.num_senders = 1;
    layout.window_size = 4;
    layout.max_payload = 8;
    layout.mode = mode;
    struct smc_options options = {
        .batching = true, .null_sends = true, .deliver = on_deliver, .deliver_ctx = NULL};
    struct smc_group *group;
    assert_int_equal(smc_group_create(engine, &layout, 1, 1, 0, &options, &group), 0);
    if (skip > 0)
        assert_int_equal(smc_group_skip(group, 0, 0, skip), 0);
    struct sst_member_desc desc;
    memset(&desc, 0, sizeof desc);
    assert_int_equal(smc_group_export(group, &desc), 0);
    assert_int_equal(smc_group_connect(group, &desc, 1000, NULL), 0);
    assert_int_equal(smc_group_start(group), 0);
    assert_int_equal(sst_engine_start(engine), 0);
    *engine_out = engine;
    *group_out = group;
}

static void send_and_flush(struct smc_group *group, int count)
{
    for (int i = 0; i < count; i++) {
        void *slot;
        assert_int_equal(smc_reserve(group, 0, 8, 0, &slot), 0);
        memset(slot, i, 8);
        assert_int_equal(smc_commit(group, 0), 0);
    }
    assert_int_equal(smc_flush(group, 10000), 0);
}

static void close_group(struct sst_engine *engine, struct smc_group *group)
{
    sst_engine_stop(engine);
    smc_group_destroy(group);
    sst_engine_destroy(engine);
}

static void test_wedge_then_trim_hooks(void **state)
{
    (void)state;
    struct sst_engine *engine;
    struct smc_group *group;
    __atomic_store_n(&delivered, 0, __ATOMIC_RELEASE);
    open_group(SPINDLE_MODE_ATOMIC, 0, &engine, &group);
    send_and_flush(group, 10);
    assert_int_equal(__atomic_load_n(&delivered, __ATOMIC_ACQUIRE), 10);

    smc_group_wedge(group);
    void *slot;
    assert_int_equal(smc_reserve(group, 0, 8, 0, &slot), SPINDLE_ESHUTDOWN);
    uint64_t received[1];
    assert_int_equal(smc_group_received(group, 0, 0, received, 1), 1);
    assert_int_equal(received[0], 10);
    assert_int_equal(smc_group_received(group, 3, 0, received, 1), SPINDLE_EINVAL);
    /* Everything within the trim is already delivered: a no-op. */
    uint64_t trim[1] = {10};
    assert_int_equal(smc_group_deliver_trim(group, 0, trim, 1, 10), 0);
    assert_int_equal(__atomic_load_n(&delivered, __ATOMIC_ACQUIRE), 10);
    assert_int_equal(smc_group_delivered(group, 0), 10);
    /* A trim beyond what this member holds is a protocol error. */
    trim[0] = 11;
    assert_int_equal(smc_group_deliver_trim(group, 0, trim, 1, 11), SPINDLE_EPROTO);
    assert_int_equal(smc_group_deliver_trim(group, 0, trim, 2, 11), SPINDLE_EINVAL);
    close_group(engine, group);
}

/* A view that began with 3 resends to skip (this member delivered them
 * before) and changed again after only 1 of them arrived: at the new edge
 * (0: a survivor received nothing of this view) the member is 3 messages
 * beyond it, the 1 it took and the 2 still to come, and must skip all 3 in
 * the next view, not 1 (which delivered 2 messages twice). */
static void test_unordered_edge_counts_skips_still_pending(void **state)
{
    (void)state;
    struct sst_engine *engine;
    struct smc_group *group;
    __atomic_store_n(&delivered, 0, __ATOMIC_RELEASE);
    open_group(SPINDLE_MODE_UNORDERED, 3, &engine, &group);
    send_and_flush(group, 1);
    assert_int_equal(__atomic_load_n(&delivered, __ATOMIC_ACQUIRE), 0); /* taken, not delivered */
    smc_group_wedge(group);
    const uint64_t lowest[1] = {0};
    assert_int_equal(smc_group_set_edge(group, 0, lowest, 1), 0);
    uint64_t beyond = 0;
    assert_int_equal(smc_group_beyond_edge(group, 0, 0, &beyond), 0);
    assert_int_equal(beyond, 3);
    close_group(engine, group);
}

/* A commit takes no lock and the send step gives a message its position
 * and header (smc_send.c): a reservation committed once the group is
 * wedged is never pushed. The view change must still resend it, with its
 * length: beyond every survivor's edge (unordered), undelivered (atomic),
 * its length read from the commit, not from a header never written. */
static void commit_after_wedge_is_resent(enum spindle_delivery_mode mode)
{
    struct sst_engine *engine;
    struct smc_group *group;
    __atomic_store_n(&delivered, 0, __ATOMIC_RELEASE);
    open_group(mode, 0, &engine, &group);
    send_and_flush(group, 2);
    assert_int_equal(__atomic_load_n(&delivered, __ATOMIC_ACQUIRE), 2);
    void *slot;
    assert_int_equal(smc_reserve(group, 0, 5, 0, &slot), 0);
    memcpy(slot, "late!", 5);
    smc_group_wedge(group);
    assert_int_equal(smc_commit(group, 0), 0);
    if (mode == SPINDLE_MODE_UNORDERED) {
        const uint64_t lowest[1] = {2};
        assert_int_equal(smc_group_set_edge(group, 0, lowest, 1), 0);
    }
    uint64_t first = 0, count = 0;
    assert_int_equal(smc_group_undelivered(group, 0, &first, &count), 0);
    assert_int_equal(first, 2);
    assert_int_equal(count, 1);
    uint32_t length = 0;
    const void *data = smc_group_message(group, 0, 2, &length);
    assert_non_null(data);
    assert_int_equal(length, 5);
    assert_memory_equal(data, "late!", 5);
    close_group(engine, group);
}

static void test_unpushed_commit_is_resent_unordered(void **state)
{
    (void)state;
    commit_after_wedge_is_resent(SPINDLE_MODE_UNORDERED);
}

static void test_unpushed_commit_is_resent_atomic(void **state)
{
    (void)state;
    commit_after_wedge_is_resent(SPINDLE_MODE_ATOMIC);
}

/* A slot whose message is committed but not pushed has no position yet;
 * the slot still holds the position of the message a window earlier,
 * which every member delivered. It is held all the same: a reserve must
 * not reuse it (here the predicate thread is stopped, so nothing is
 * pushed), and once the thread runs again every message is delivered. */
static void test_unpushed_slot_is_not_reused(void **state)
{
    (void)state;
    struct sst_engine *engine;
    struct smc_group *group;
    __atomic_store_n(&delivered, 0, __ATOMIC_RELEASE);
    open_group(SPINDLE_MODE_ATOMIC, 0, &engine, &group);
    send_and_flush(group, 4); /* a whole window, delivered */
    sst_engine_stop(engine);
    void *slot;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(smc_reserve(group, 0, 8, 0, &slot), 0);
        memset(slot, 0x40 + i, 8);
        assert_int_equal(smc_commit(group, 0), 0);
    }
    assert_int_equal(smc_reserve(group, 0, 8, SPINDLE_RESERVE_NONBLOCK, &slot), SPINDLE_EAGAIN);
    assert_int_equal(sst_engine_start(engine), 0);
    assert_int_equal(smc_flush(group, 10000), 0);
    assert_int_equal(__atomic_load_n(&delivered, __ATOMIC_ACQUIRE), 8);
    close_group(engine, group);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wedge_then_trim_hooks),
        cmocka_unit_test(test_unordered_edge_counts_skips_still_pending),
        cmocka_unit_test(test_unpushed_commit_is_resent_unordered),
        cmocka_unit_test(test_unpushed_commit_is_resent_atomic),
        cmocka_unit_test(test_unpushed_slot_is_not_reused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
