/*
 * libFuzzer target: shm_desc_decode (src/transport/shm/shm.c), the parse
 * of a peer's shared-memory descriptor (an address for tp_connect, a region
 * for tp_rmr_import) before the backend opens /proc/<pid>/fd/<fd>. The input
 * is the descriptor's bytes (its length is the input's, as sst_desc_decode
 * delivers it), decoded as each kind. An accepted descriptor must hold a
 * positive pid, a non-negative fd and a nonzero length, re-encode to the
 * input and decode again to the same struct; a refusal must be
 * SPINDLE_EINVAL or SPINDLE_EPROTO with a message naming the backend.
 */
#include "fuzz_common.h"
#include "transport/shm/shm_impl.h"

static void check_kind(const struct tp_desc *desc, uint32_t kind)
{
    struct shm_wire wire, again;
    memset(&wire, 0, sizeof wire);
    int rc = shm_desc_decode(desc, kind, &wire);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EINVAL || rc == SPINDLE_EPROTO);
        FUZZ_CHECK(strncmp(spindle_errmsg(), "shm: ", 5) == 0);
        return;
    }
    FUZZ_CHECK(wire.kind == kind && wire.pid > 0 && wire.fd >= 0 && wire.length > 0);
    struct tp_desc bytes;
    shm_desc_encode(&wire, &bytes);
    fuzz_check_same_bytes(desc->bytes, desc->len, bytes.bytes, bytes.len);
    memset(&again, 0, sizeof again);
    FUZZ_CHECK(shm_desc_decode(&bytes, kind, &again) == 0);
    FUZZ_CHECK(memcmp(&wire, &again, sizeof wire) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > TP_DESC_MAX)
        return 0; /* the wire carries at most TP_DESC_MAX bytes (sst_desc_decode) */
    struct tp_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.len = (uint32_t)size;
    memcpy(desc.bytes, data, size);
    check_kind(&desc, SHM_KIND_ADDRESS);
    check_kind(&desc, SHM_KIND_REGION);
    return 0;
}
