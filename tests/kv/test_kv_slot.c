/* spindle-kv's keys to hash slots and shards (examples/kv/kv_slot.h), as
 * Redis Cluster computes them, and the routing of commands by their keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kv_slot.h"

static uint32_t slot_of(const char *key)
{
    return kv_key_slot(key, strlen(key));
}

static void test_slots_are_redis_cluster_slots(void **state)
{
    assert_int_equal(kv_crc16("123456789", 9), 0x31c3);
    assert_int_equal(slot_of("foo"), 12182);
    assert_int_equal(slot_of("b"), 3300);
    assert_int_equal(slot_of("user1000"), 3443);
    /* A hash tag: only what is between the first { and the next }. */
    assert_int_equal(slot_of("{user1000}.following"), 3443);
    assert_int_equal(slot_of("x{user1000}y{z}"), 3443);
    /* An empty tag hashes the whole key. */
    assert_int_not_equal(slot_of("{}foo"), slot_of("foo"));
    assert_int_equal(slot_of("{}foo"), kv_crc16("{}foo", 5) % KV_SLOTS);
    assert_int_equal(slot_of("{foo"), kv_crc16("{foo", 4) % KV_SLOTS);
}

static void test_shards_split_slots_into_ranges(void **state)
{
    assert_int_equal(kv_slot_shard(0, 1), 0);
    assert_int_equal(kv_slot_shard(16383, 1), 0);
    assert_int_equal(kv_slot_shard(8191, 2), 0);
    assert_int_equal(kv_slot_shard(8192, 2), 1);
    assert_int_equal(kv_slot_shard(16383, 3), 2);
}

static void test_commands_route_by_their_keys(void **state)
{
    uint32_t shard = 99, slot = 99;
    struct kv_arg get[] = {{"get", 3}, {"foo", 3}};
    assert_int_equal(kv_command_route(get, 2, 2, &shard, &slot), KV_ROUTE_SHARD);
    assert_int_equal(shard, 1);
    assert_int_equal(slot, 12182);
    struct kv_arg mset[] = {{"MSET", 4}, {"b", 1}, {"foo", 3}, {"{b}x", 4}, {"1", 1}};
    /* Values are not keys: "foo" is a value here. */
    assert_int_equal(kv_command_route(mset, 5, 2, &shard, &slot), KV_ROUTE_SHARD);
    assert_int_equal(shard, 0);
    struct kv_arg del[] = {{"DEL", 3}, {"b", 1}, {"foo", 3}};
    assert_int_equal(kv_command_route(del, 3, 2, &shard, &slot), KV_ROUTE_CROSS);
    assert_int_equal(kv_command_route(del, 3, 1, &shard, &slot), KV_ROUTE_SHARD);
    struct kv_arg dbsize[] = {{"DBSIZE", 6}};
    assert_int_equal(kv_command_route(dbsize, 1, 2, &shard, &slot), KV_ROUTE_NONE);
    struct kv_arg bare_get[] = {{"GET", 3}};
    assert_int_equal(kv_command_route(bare_get, 1, 2, &shard, &slot), KV_ROUTE_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots_are_redis_cluster_slots),
        cmocka_unit_test(test_shards_split_slots_into_ranges),
        cmocka_unit_test(test_commands_route_by_their_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
