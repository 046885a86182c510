/*
 * libFuzzer target: vb_cm_decode (src/transport/verbs/verbs_conn.c), the
 * parse of the private data a peer's rdma_accept carries (its member id
 * and endpoint nonce), in vb_cm_wait. The input is the private data. An
 * accepted message re-encodes (vb_cm_encode) to the input and decodes again
 * to the same values; a refusal is a wire codec refusal.
 */
#include "fuzz_common.h"
#include "transport/verbs/verbs_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t id = 0;
    uint64_t nonce = 0;
    int rc = vb_cm_decode(data, size, &id, &nonce);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "verbs connection private data");
        return 0;
    }
    uint8_t again[VB_CM_WIRE];
    vb_cm_encode(id, nonce, again);
    fuzz_check_same_bytes(data, size, again, sizeof again);
    uint32_t id_again = 0;
    uint64_t nonce_again = 0;
    FUZZ_CHECK(vb_cm_decode(again, sizeof again, &id_again, &nonce_again) == 0);
    FUZZ_CHECK(id_again == id && nonce_again == nonce);
    return 0;
}
