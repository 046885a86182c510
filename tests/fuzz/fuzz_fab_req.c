/*
 * libFuzzer target: fab_req_decode (src/transport/fabric/fabric_wire.c),
 * the parse of a connection request's private data (who connects, which
 * endpoint it expects) in the listener's fab_handle_connreq. The input is
 * the private data. An accepted request re-encodes (fab_req_encode) to the
 * input and decodes again to the same request; a refusal is a wire codec
 * refusal. Its MAC check (fab_req_check, fabric_auth.c) with the test key
 * accepts exactly the requests whose MAC is the one fab_req_seal makes,
 * and refuses everything else with SPINDLE_EAUTH.
 */
#include "fuzz_common.h"
#include "fuzz_fab_key.h"
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

    uint8_t key[FAB_MAC_BYTES], sealed[FAB_REQ_WIRE];
    fuzz_fab_test_key(key);
    memcpy(sealed, data, sizeof sealed);
    fab_req_seal(key, sealed);
    int authentic = memcmp(sealed, data, sizeof sealed) == 0;
    rc = fab_req_check((const uint8_t(*)[FAB_MAC_BYTES]) & key, 1, data);
    FUZZ_CHECK(authentic ? rc == 0 : rc == SPINDLE_EAUTH);
    FUZZ_CHECK(fab_req_check((const uint8_t(*)[FAB_MAC_BYTES]) & key, 1, sealed) == 0);
    return 0;
}
