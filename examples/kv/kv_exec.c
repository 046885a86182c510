/* A transaction (MULTI ... EXEC) applied in one step of the ordered stream
 * (kv_store.h, KV_OP_EXEC). Every replica decides the same: the watched
 * versions it compares are the store's, which every replica has alike at
 * this point of the stream, and the commands run one after another with
 * nothing between them. */
#include <inttypes.h>
#include <stdio.h>

#include "kv_map.h"

/* A count or a version: decimal digits only, no sign, at most 2^63 - 1. */
static bool parse_count(const struct kv_arg *arg, uint64_t *out)
{
    uint64_t value = 0;
    if (arg->len == 0 || arg->len > 19)
        return false;
    for (size_t i = 0; i < arg->len; i++) {
        if (arg->ptr[i] < '0' || arg->ptr[i] > '9')
            return false;
        value = value * 10 + (uint64_t)(arg->ptr[i] - '0');
    }
    if (value > (uint64_t)INT64_MAX)
        return false;
    *out = value;
    return true;
}

/* Checks the shape of the arguments before anything runs, so a malformed
 * transaction changes nothing: 0 with the number of commands, or -1 with
 * the error in reply. */
static int check_shape(const struct kv_arg *args, size_t count, uint64_t *num_watched,
                       size_t *num_commands, struct kv_buf *reply)
{
    if (count == 0 || !parse_count(&args[0], num_watched) || *num_watched > (count - 1) / 2) {
        kv_resp_error(reply, "ERR malformed transaction: bad count of watched keys");
        return -1;
    }
    size_t at = 1 + 2 * (size_t)*num_watched;
    for (size_t i = 2; i < at; i += 2) {
        uint64_t version;
        if (!parse_count(&args[i], &version)) {
            kv_resp_errorf(reply, "ERR malformed transaction: bad version of watched key %zu",
                           i / 2);
            return -1;
        }
    }
    *num_commands = 0;
    while (at < count) {
        uint64_t argc;
        if (!parse_count(&args[at], &argc) || argc == 0 || argc > count - at - 1) {
            kv_resp_errorf(reply, "ERR malformed transaction: bad argument count of command %zu",
                           *num_commands);
            return -1;
        }
        at += 1 + (size_t)argc;
        (*num_commands)++;
    }
    return 0;
}

void kv_exec_apply(struct kv_store *store, const struct kv_arg *args, size_t count,
                   uint64_t time_ms, struct kv_buf *reply)
{
    uint64_t num_watched = 0;
    size_t num_commands = 0;
    if (check_shape(args, count, &num_watched, &num_commands, reply) != 0)
        return;
    for (uint64_t w = 0; w < num_watched; w++) {
        const struct kv_arg *key = &args[1 + 2 * w];
        uint64_t seen = 0;
        parse_count(&args[2 + 2 * w], &seen);
        if (kv_store_version(store, key->ptr, key->len) != seen) {
            kv_buf_append(reply, "*-1\r\n", 5); /* a watched key changed: EXEC aborts */
            return;
        }
    }
    kv_resp_array(reply, num_commands);
    size_t at = 1 + 2 * (size_t)num_watched;
    while (at < count) {
        uint64_t argc = 0;
        parse_count(&args[at], &argc);
        kv_execute(store, args + at + 1, (size_t)argc, time_ms, false, reply);
        at += 1 + (size_t)argc;
    }
}
