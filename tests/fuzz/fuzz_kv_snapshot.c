/*
 * libFuzzer target: kv_snapshot_decode (examples/kv/kv_store.c), the state
 * a spindle-kv replica receives from another when it joins. The input is
 * a state as sent. An accepted one must encode again to a state that
 * decodes to an equal store (same digest, clock and size); a refused one
 * must name what was wrong and leave the store empty.
 */
#include "fuzz_common.h"
#include "kv_store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kv_store store, again;
    kv_store_init(&store);
    kv_store_init(&again);
    char error[256] = "";
    if (kv_snapshot_decode(&store, data, size, error, sizeof error) != 0) {
        FUZZ_CHECK(error[0] != '\0' && kv_store_size(&store) == 0);
    } else {
        struct kv_buf encoded = {0};
        kv_snapshot_encode(&store, &encoded);
        FUZZ_CHECK(kv_snapshot_decode(&again, encoded.data, encoded.len, error, sizeof error) == 0);
        FUZZ_CHECK(kv_store_digest(&again) == kv_store_digest(&store));
        FUZZ_CHECK(again.now_ms == store.now_ms && kv_store_size(&again) == kv_store_size(&store));
        kv_buf_free(&encoded);
    }
    kv_store_free(&store);
    kv_store_free(&again);
    return 0;
}
