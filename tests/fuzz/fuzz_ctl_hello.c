/*
 * libFuzzer target: ctl_wire_decode_hello (src/control/ctl_wire.c), the
 * first bytes any TCP peer sends, before anything about it is known. An
 * accepted hello must re-encode to the input and decode again to the same
 * struct; a refused one must be SPINDLE_EPROTO naming the offset.
 */
#include "control/ctl_wire.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ctl_hello hello, again;
    memset(&hello, 0, sizeof hello);
    int rc = ctl_wire_decode_hello(data, size, &hello);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "control hello");
        return 0;
    }
    uint8_t bytes[CTL_HELLO_SIZE];
    ctl_wire_encode_hello(&hello, bytes);
    fuzz_check_same_bytes(data, size, bytes, sizeof bytes);
    memset(&again, 0, sizeof again);
    FUZZ_CHECK(ctl_wire_decode_hello(bytes, sizeof bytes, &again) == 0);
    FUZZ_CHECK(memcmp(&hello, &again, sizeof hello) == 0);
    return 0;
}
