/*
 * libFuzzer target: fab_req_decode (src/transport/fabric/fabric_wire.c),
 * the parse of a connection request's private data (who connects, which
 * endpoint it expects) in the listener's fab_handle_connreq. The input is
 * the private data. An accepted request re-encodes (fab_req_encode) to the
 * input and decodes again to the same request; a refusal is a wire codec
 * refusal.
 */
#include "fuzz_common.h"
#include "transport/fabric/fabric_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fab_req_data req;
    memset(&req, 0, sizeof req);
    int rc = fab_req_decode(data, size, &req);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "fabric connection request");
        return 0;
    }
    uint8_t again[FAB_REQ_WIRE];
    fab_req_encode(&req, again);
    fuzz_check_same_bytes(data, size, again, sizeof again);
    struct fab_req_data req_again;
    memset(&req_again, 0, sizeof req_again);
    FUZZ_CHECK(fab_req_decode(again, sizeof again, &req_again) == 0);
    FUZZ_CHECK(memcmp(&req, &req_again, sizeof req) == 0);
    return 0;
}
