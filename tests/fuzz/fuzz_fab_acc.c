/*
 * libFuzzer target: fab_acc_decode (src/transport/fabric/fabric_wire.c),
 * the parse of an accept's private data (where the connector's writes
 * land) in fab_handle_connected. The input is the private data. An
 * accepted message must name this build's ring size, re-encode
 * (fab_acc_encode) to the input and decode again to the same message; a
 * refusal is a wire codec refusal. Its MAC check (fab_acc_check,
 * fabric_auth.c) with the test key and request accepts exactly the
 * accepts whose MAC is the one fab_acc_seal makes, and refuses everything
 * else with SPINDLE_EAUTH.
 */
#include "fuzz_common.h"
#include "fuzz_fab_key.h"
#include "transport/fabric/fabric_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fab_acc_data acc;
    memset(&acc, 0, sizeof acc);
    int rc = fab_acc_decode(data, size, &acc);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "fabric accept");
        return 0;
    }
    FUZZ_CHECK(acc.ring_size == FAB_RING_SIZE);
    uint8_t again[FAB_ACC_WIRE];
    fab_acc_encode(&acc, again);
    fuzz_check_same_bytes(data, size, again, sizeof again);
    struct fab_acc_data acc_again;
    memset(&acc_again, 0, sizeof acc_again);
    FUZZ_CHECK(fab_acc_decode(again, sizeof again, &acc_again) == 0);
    FUZZ_CHECK(memcmp(&acc, &acc_again, sizeof acc) == 0);

    uint8_t key[FAB_MAC_BYTES], req[FAB_REQ_WIRE], sealed[FAB_ACC_WIRE];
    fuzz_fab_test_key(key);
    fuzz_fab_test_request(req);
    memcpy(sealed, data, sizeof sealed);
    fab_acc_seal(key, req, sealed);
    int authentic = memcmp(sealed, data, sizeof sealed) == 0;
    rc = fab_acc_check(key, req, data);
    FUZZ_CHECK(authentic ? rc == 0 : rc == SPINDLE_EAUTH);
    FUZZ_CHECK(fab_acc_check(key, req, sealed) == 0);
    return 0;
}
