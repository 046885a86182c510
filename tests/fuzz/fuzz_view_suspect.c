/*
 * libFuzzer target: view_wire_decode_suspect (src/view/view_wire.c), the
 * rows a member suspects as it starts a view change. An accepted suspicion
 * names at least one row and must re-encode to the input and decode again to the
 * same struct; a refused one must be SPINDLE_EPROTO naming the offset.
 */
#include "fuzz_common.h"
#include "view/view_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct view_suspect suspect, again;
    memset(&suspect, 0, sizeof suspect);
    int rc = view_wire_decode_suspect(data, size, &suspect);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "suspicion");
        return 0;
    }
    FUZZ_CHECK(suspect.suspected != 0);
    uint8_t bytes[VIEW_WIRE_SUSPECT_SIZE];
    size_t len = view_wire_encode_suspect(&suspect, bytes, sizeof bytes);
    FUZZ_CHECK(len == sizeof bytes);
    fuzz_check_same_bytes(data, size, bytes, len);
    memset(&again, 0, sizeof again);
    FUZZ_CHECK(view_wire_decode_suspect(bytes, len, &again) == 0);
    FUZZ_CHECK(memcmp(&suspect, &again, sizeof suspect) == 0);
    return 0;
}
