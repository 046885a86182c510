/*
 * libFuzzer target: vb_addr_decode (src/transport/verbs/verbs.c), the parse
 * of a peer's verbs address descriptor (host, port, GID, DCT number and
 * key) before tp_connect uses it. The input is the descriptor's bytes. An
 * accepted descriptor must yield a non-empty host, re-encode
 * (vb_addr_encode) to the input and decode again to the same struct; a
 * refusal must be SPINDLE_EINVAL or SPINDLE_EPROTO naming the backend.
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
    struct vb_addr addr, again;
    memset(&addr, 0, sizeof addr);
    int rc = vb_addr_decode(&desc, &addr);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EINVAL || rc == SPINDLE_EPROTO);
        FUZZ_CHECK(strncmp(spindle_errmsg(), "verbs: ", 7) == 0);
        return 0;
    }
    FUZZ_CHECK(addr.host[0] != '\0' && memchr(addr.host, '\0', sizeof addr.host) != NULL);
    struct tp_desc bytes;
    memset(&bytes, 0, sizeof bytes);
    FUZZ_CHECK(vb_addr_encode(&addr, &bytes) == 0);
    fuzz_check_same_bytes(data, size, bytes.bytes, bytes.len);
    memset(&again, 0, sizeof again);
    FUZZ_CHECK(vb_addr_decode(&bytes, &again) == 0);
    FUZZ_CHECK(memcmp(&addr, &again, sizeof addr) == 0);
    return 0;
}
