/*
 * libFuzzer target: ctl_wire_decode_frame (src/control/ctl_wire.c), the
 * header a TCP peer sends before every blob; its length decides how much
 * the receiver allocates and reads. An accepted frame must re-encode to the
 * input, decode again to the same struct and announce at most CTL_BLOB_MAX
 * bytes; a refused one must be SPINDLE_EPROTO naming the offset.
 */
#include "control/ctl_wire.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ctl_frame frame, again;
    memset(&frame, 0, sizeof frame);
    int rc = ctl_wire_decode_frame(data, size, &frame);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "control frame");
        return 0;
    }
    FUZZ_CHECK(frame.length <= CTL_BLOB_MAX);
    uint8_t bytes[CTL_FRAME_SIZE];
    ctl_wire_encode_frame(&frame, bytes);
    fuzz_check_same_bytes(data, size, bytes, sizeof bytes);
    memset(&again, 0, sizeof again);
    FUZZ_CHECK(ctl_wire_decode_frame(bytes, sizeof bytes, &again) == 0);
    FUZZ_CHECK(memcmp(&frame, &again, sizeof frame) == 0);
    return 0;
}
