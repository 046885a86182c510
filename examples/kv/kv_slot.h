/*
 * Keys to shards, as Redis Cluster maps keys to hash slots, so that
 * `redis-cli -c` and cluster-aware clients follow spindle-kv's -MOVED
 * replies: slot = CRC16(key) mod 16384, where only the part between the
 * first '{' and the next '}' is hashed when that part is not empty (a hash
 * tag). Slots are split into equal ranges, one per shard.
 *
 * Threads: pure functions.
 */
#ifndef KV_SLOT_H
#define KV_SLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv_resp.h"

#define KV_SLOTS 16384u

/* CRC16-CCITT (XMODEM), the checksum of Redis Cluster's key slots. */
uint16_t kv_crc16(const char *data, size_t len);
/* The hash slot of key. */
uint32_t kv_key_slot(const char *key, size_t key_len);
/* The shard of slot among num_shards (equal ranges of slots). */
uint32_t kv_slot_shard(uint32_t slot, uint32_t num_shards);

/* Where the keys of a command are. */
enum kv_route {
    KV_ROUTE_NONE = 0,  /* no key: the shard of the replica that takes it */
    KV_ROUTE_SHARD = 1, /* every key in one shard: *shard, *slot (the first key's) */
    KV_ROUTE_CROSS = 2, /* keys in more than one shard */
};
/* The keys of the command named name: true with the index of its first key
 * and the step between keys (0: one key only); false when it has none. */
bool kv_command_key_spec(const struct kv_arg *name, unsigned *first, unsigned *step);

/* Routes the command args[0..count) (its name first) among num_shards. */
enum kv_route kv_command_route(const struct kv_arg *args, size_t count, uint32_t num_shards,
                               uint32_t *shard, uint32_t *slot);

#endif
