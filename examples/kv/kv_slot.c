/* Keys to hash slots and shards (kv_slot.h). */
#include "kv_slot.h"

#include <string.h>
#include <strings.h>

uint16_t kv_crc16(const char *data, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((uint16_t)(unsigned char)data[i] << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 0x8000u) ? (uint16_t)((crc << 1) ^ 0x1021u) : (uint16_t)(crc << 1);
    }
    return crc;
}

uint32_t kv_key_slot(const char *key, size_t key_len)
{
    const char *open = memchr(key, '{', key_len);
    if (open != NULL) {
        size_t start = (size_t)(open - key) + 1;
        const char *close = memchr(key + start, '}', key_len - start);
        if (close != NULL && close > key + start)
            return kv_crc16(key + start, (size_t)(close - key) - start) % KV_SLOTS;
    }
    return kv_crc16(key, key_len) % KV_SLOTS;
}

uint32_t kv_slot_shard(uint32_t slot, uint32_t num_shards)
{
    return (uint32_t)((uint64_t)slot * num_shards / KV_SLOTS);
}

struct key_spec {
    const char *name;
    unsigned first; /* index of the first key */
    unsigned step;  /* 0: one key; else every step-th argument to the end */
};

/* The commands with keys (kv_commands.c has the others). */
static const struct key_spec key_specs[] = {
    {"GET", 1, 0},    {"SET", 1, 0},     {"INCR", 1, 0},    {"DECR", 1, 0},  {"INCRBY", 1, 0},
    {"DECRBY", 1, 0}, {"APPEND", 1, 0},  {"STRLEN", 1, 0},  {"CAS", 1, 0},   {"TTL", 1, 0},
    {"PTTL", 1, 0},   {"DEL", 1, 1},     {"EXISTS", 1, 1},  {"MGET", 1, 1},  {"MSET", 1, 2},
    {"EXPIRE", 1, 0}, {"PEXPIRE", 1, 0}, {"PERSIST", 1, 0}, {"SETEX", 1, 0}, {"PSETEX", 1, 0},
    {"SETNX", 1, 0},
};

static const struct key_spec *find_spec(const struct kv_arg *name)
{
    for (size_t i = 0; i < sizeof key_specs / sizeof key_specs[0]; i++) {
        if (name->len == strlen(key_specs[i].name) &&
            strncasecmp(name->ptr, key_specs[i].name, name->len) == 0)
            return &key_specs[i];
    }
    return NULL;
}

bool kv_command_key_spec(const struct kv_arg *name, unsigned *first, unsigned *step)
{
    const struct key_spec *spec = find_spec(name);
    if (spec == NULL)
        return false;
    *first = spec->first;
    *step = spec->step;
    return true;
}

enum kv_route kv_command_route(const struct kv_arg *args, size_t count, uint32_t num_shards,
                               uint32_t *shard, uint32_t *slot)
{
    const struct key_spec *spec = count > 0 ? find_spec(&args[0]) : NULL;
    if (spec == NULL || count <= spec->first)
        return KV_ROUTE_NONE;
    *slot = kv_key_slot(args[spec->first].ptr, args[spec->first].len);
    *shard = kv_slot_shard(*slot, num_shards);
    if (spec->step == 0)
        return KV_ROUTE_SHARD;
    for (size_t i = spec->first + spec->step; i < count; i += spec->step)
        if (kv_slot_shard(kv_key_slot(args[i].ptr, args[i].len), num_shards) != *shard)
            return KV_ROUTE_CROSS;
    return KV_ROUTE_SHARD;
}
