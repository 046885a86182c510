/*
 * libFuzzer target: vb_region_decode (src/transport/verbs/verbs.c), the
 * parse of a peer's verbs region descriptor (address, length, rkey) in
 * tp_rmr_import. The input is the descriptor's bytes. An accepted
 * descriptor must re-encode (vb_region_encode) to the input and decode
 * again to the same struct; a refusal must be SPINDLE_EINVAL or
 * SPINDLE_EPROTO naming the backend.
 */
#include "fuzz_common.h"
#include "transport/verbs/verbs_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > TP_DESC_MAX)
        return 0; /* the wire carries at most TP_DESC_MAX bytes (sst_desc_decode) */
    struct tp_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.len = (uint32_t)size;
    memcpy(desc.bytes, data, size);
    struct vb_region region, again;
    memset(&region, 0, sizeof region);
    int rc = vb_region_decode(&desc, &region);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EINVAL || rc == SPINDLE_EPROTO);
        FUZZ_CHECK(strncmp(spindle_errmsg(), "verbs: ", 7) == 0);
        return 0;
    }
    struct tp_desc bytes;
    memset(&bytes, 0, sizeof bytes);
    vb_region_encode(&region, &bytes);
    fuzz_check_same_bytes(data, size, bytes.bytes, bytes.len);
    memset(&again, 0, sizeof again);
    FUZZ_CHECK(vb_region_decode(&bytes, &again) == 0);
    /* Field by field: the decoder assigns a compound literal, whose padding
     * bytes are unspecified. */
    FUZZ_CHECK(again.addr == region.addr && again.length == region.length &&
               again.rkey == region.rkey);
    return 0;
}
