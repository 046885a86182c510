/*
 * libFuzzer target: view_wire_decode_desc (src/view/view_wire.c), a
 * member's table descriptor in the start-up exchange; its three byte
 * strings are later handed to the transport. An accepted descriptor must
 * hold lengths within TP_DESC_MAX, re-encode to the input and decode again
 * to the same struct; a refused one must be SPINDLE_EPROTO naming the offset.
 */
#include <stdlib.h>

#include "fuzz_common.h"
#include "view/view_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sst_member_desc desc, again;
    memset(&desc, 0, sizeof desc);
    int rc = view_wire_decode_desc(data, size, &desc);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "table descriptor");
        return 0;
    }
    FUZZ_CHECK(desc.address.len <= TP_DESC_MAX && desc.region.len <= TP_DESC_MAX &&
               desc.side.len <= TP_DESC_MAX);
    uint8_t *bytes = malloc(size);
    FUZZ_CHECK(bytes != NULL);
    size_t len = view_wire_encode_desc(&desc, bytes, size);
    fuzz_check_same_bytes(data, size, bytes, len);
    memset(&again, 0, sizeof again);
    FUZZ_CHECK(view_wire_decode_desc(bytes, len, &again) == 0);
    FUZZ_CHECK(memcmp(&desc, &again, sizeof desc) == 0);
    free(bytes);
    return 0;
}
