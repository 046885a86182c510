/*
 * libFuzzer target: fab_region_decode (src/transport/fabric/fabric.c), the
 * parse of a peer's libfabric region descriptor in tp_rmr_import. The input
 * is the descriptor's bytes. An accepted descriptor must name a nonzero
 * region and length, re-encode (fab_region_encode) to the input and decode
 * again to the same values; a refusal must be SPINDLE_EINVAL or
 * SPINDLE_EPROTO naming the backend.
 */
#include "fuzz_common.h"
#include "transport/fabric/fabric_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > TP_DESC_MAX)
        return 0; /* the wire carries at most TP_DESC_MAX bytes (sst_desc_decode) */
    struct tp_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.len = (uint32_t)size;
    memcpy(desc.bytes, data, size);
    uint64_t region = 0, length = 0;
    int rc = fab_region_decode(&desc, &region, &length);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EINVAL || rc == SPINDLE_EPROTO);
        FUZZ_CHECK(strncmp(spindle_errmsg(), "fabric ", 7) == 0);
        return 0;
    }
    FUZZ_CHECK(region != 0 && length != 0);
    struct tp_desc bytes;
    memset(&bytes, 0, sizeof bytes);
    fab_region_encode(region, length, &bytes);
    fuzz_check_same_bytes(data, size, bytes.bytes, bytes.len);
    uint64_t region_again = 0, length_again = 0;
    FUZZ_CHECK(fab_region_decode(&bytes, &region_again, &length_again) == 0);
    FUZZ_CHECK(region_again == region && length_again == length);
    return 0;
}
