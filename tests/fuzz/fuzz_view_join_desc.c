/*
 * libFuzzer target: view_wire_decode_join_desc (src/view/view_wire.c), the
 * joiner's table descriptor as the leader receives it. An accepted message
 * must re-encode to the input and decode again to the same struct; a
 * refused one must be SPINDLE_EPROTO naming the offset.
 */
#include "fuzz_common.h"
#include "view/view_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct view_join_desc desc, again;
    memset(&desc, 0, sizeof desc);
    int rc = view_wire_decode_join_desc(data, size, &desc);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "joiner descriptor");
        return 0;
    }
    static uint8_t bytes[VIEW_WIRE_JOIN_DESC_SIZE];
    size_t len = view_wire_encode_join_desc(&desc, bytes, sizeof bytes);
    FUZZ_CHECK(len == sizeof bytes);
    fuzz_check_same_bytes(data, size, bytes, len);
    memset(&again, 0, sizeof again);
    FUZZ_CHECK(view_wire_decode_join_desc(bytes, len, &again) == 0);
    FUZZ_CHECK(memcmp(&desc, &again, sizeof desc) == 0);
    return 0;
}
