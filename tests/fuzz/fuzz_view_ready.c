/*
 * libFuzzer target: view_wire_decode_ready (src/view/view_wire.c), the
 * message that opens a view and ends barriers. An accepted message must
 * re-encode to the input and decode again to the same view id; a refused
 * one must be SPINDLE_EPROTO naming the offset.
 */
#include "fuzz_common.h"
#include "view/view_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t view_id = 0, again = 0;
    int rc = view_wire_decode_ready(data, size, &view_id);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "ready");
        return 0;
    }
    uint8_t bytes[VIEW_WIRE_READY_SIZE];
    size_t len = view_wire_encode_ready(view_id, bytes, sizeof bytes);
    FUZZ_CHECK(len == sizeof bytes);
    fuzz_check_same_bytes(data, size, bytes, len);
    FUZZ_CHECK(view_wire_decode_ready(bytes, len, &again) == 0);
    FUZZ_CHECK(again == view_id);
    return 0;
}
