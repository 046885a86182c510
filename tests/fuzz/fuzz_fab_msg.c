/*
 * libFuzzer target: fab_msg_decode (src/transport/fabric/fabric_wire.c),
 * the parse of a control message (credit return, doorbell, goodbye) a peer
 * sends on a libfabric connection, in the progress thread's
 * fab_handle_msg. The input is the message's bytes. An accepted message
 * must be of a known kind, re-encode (fab_msg_encode) to the input and
 * decode again to the same message; a refusal is a wire codec refusal.
 */
#include "fuzz_common.h"
#include "transport/fabric/fabric_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fab_msg msg;
    memset(&msg, 0, sizeof msg);
    int rc = fab_msg_decode(data, size, &msg);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "fabric control message");
        return 0;
    }
    FUZZ_CHECK(msg.kind == FAB_MSG_CREDIT || msg.kind == FAB_MSG_DOORBELL ||
               msg.kind == FAB_MSG_BYE);
    uint8_t again[FAB_MSG_WIRE];
    fab_msg_encode(&msg, again);
    fuzz_check_same_bytes(data, size, again, sizeof again);
    struct fab_msg msg_again;
    memset(&msg_again, 0, sizeof msg_again);
    FUZZ_CHECK(fab_msg_decode(again, sizeof again, &msg_again) == 0);
    FUZZ_CHECK(memcmp(&msg, &msg_again, sizeof msg) == 0);
    return 0;
}
