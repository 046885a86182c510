/*
 * libFuzzer target: kv_op_decode and kv_store_apply (examples/kv), the
 * decoding and application of the operations spindle-kv's replicas
 * multicast to each other. The input is one delivered operation. An
 * accepted one must re-encode to the very same bytes, and applying it to
 * two stores must give the same reply and the same digest (applying is a
 * function of the store and the bytes); a refused one must name what was
 * wrong, be answered with an error and change nothing. The cache warming
 * of a delivered batch (kv_store_prefetch_*) reads the same bytes: it runs
 * on one of the two stores only, finds a key exactly when the operation
 * decodes as a command with one, and changes nothing there.
 */
#include "fuzz_common.h"
#include "kv_store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kv_op op = {0};
    struct kv_buf again = {0}, reply = {0}, reply2 = {0};
    char error[256] = "";
    int rc = kv_op_decode(data, size, &op, error, sizeof error);
    /* The seed's apply below decodes into op too. */
    bool has_key = rc == 0 && op.kind == KV_OP_COMMAND && op.argv.count >= 2;
    if (rc != 0) {
        FUZZ_CHECK(rc == -1 && error[0] != '\0' && op.kind == 0);
    } else {
        kv_op_encode(&again, op.kind, op.counter, op.time_ms, op.session, op.request_id,
                     op.argv.items, op.argv.count);
        fuzz_check_same_bytes(data, size, (const uint8_t *)again.data, again.len);
    }
    struct kv_store first, second;
    kv_store_init(&first);
    kv_store_init(&second);
    /* Some state for the operation to act on, the same in both. */
    static const struct kv_arg set[] = {{"SET", 3}, {"k", 1}, {"1", 1}, {"PX", 2}, {"5", 1}};
    struct kv_buf seed = {0};
    kv_op_encode(&seed, KV_OP_COMMAND, 1, 10, 3, 1, set, 5);
    kv_store_apply(&first, seed.data, seed.len, &op, &reply);
    kv_store_apply(&second, seed.data, seed.len, &op, &reply2);
    uint64_t before = kv_store_digest(&first);
    uint64_t hash = 0;
    bool keyed = kv_store_prefetch_bucket(&first, data, size, &hash);
    if (keyed) {
        kv_store_prefetch_entry(&first, hash);
        kv_store_prefetch_value(&first, hash);
    }
    if (rc == 0)
        FUZZ_CHECK(keyed == has_key);
    FUZZ_CHECK(kv_store_digest(&first) == before);
    reply.len = reply2.len = 0;
    kv_store_apply(&first, data, size, &op, &reply);
    kv_store_apply(&second, data, size, &op, &reply2);
    FUZZ_CHECK(reply.len == reply2.len && memcmp(reply.data, reply2.data, reply.len) == 0);
    FUZZ_CHECK(kv_store_digest(&first) == kv_store_digest(&second));
    if (rc != 0)
        FUZZ_CHECK(kv_store_digest(&first) == before && reply.len > 0 && reply.data[0] == '-');
    kv_store_free(&first);
    kv_store_free(&second);
    kv_argv_free(&op.argv);
    kv_buf_free(&again);
    kv_buf_free(&reply);
    kv_buf_free(&reply2);
    kv_buf_free(&seed);
    return 0;
}
