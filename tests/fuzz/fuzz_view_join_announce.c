/*
 * libFuzzer target: view_wire_decode_join_announce (src/view/view_wire.c),
 * the leader's announcement of a joiner to the members. An accepted
 * announcement must name a member id below SST_MAX_ROWS and a host and
 * port, re-encode to the input and decode again to the same struct; a
 * refused one must be SPINDLE_EPROTO naming the offset.
 */
#include "fuzz_common.h"
#include "view/view_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct view_join_announce announce, again;
    memset(&announce, 0, sizeof announce);
    int rc = view_wire_decode_join_announce(data, size, &announce);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "join announcement");
        return 0;
    }
    FUZZ_CHECK(announce.id < SST_MAX_ROWS);
    FUZZ_CHECK(announce.address.host[0] != '\0' && announce.address.port != 0);
    static uint8_t bytes[VIEW_WIRE_JOIN_ANNOUNCE_SIZE];
    size_t len = view_wire_encode_join_announce(&announce, bytes, sizeof bytes);
    FUZZ_CHECK(len == sizeof bytes);
    fuzz_check_same_bytes(data, size, bytes, len);
    memset(&again, 0, sizeof again);
    FUZZ_CHECK(view_wire_decode_join_announce(bytes, len, &again) == 0);
    FUZZ_CHECK(memcmp(&announce, &again, sizeof announce) == 0);
    return 0;
}
