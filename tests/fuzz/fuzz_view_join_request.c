/*
 * libFuzzer target: view_wire_decode_join_request (src/view/view_wire.c),
 * sent by a process that is not (yet) a member to any member's join
 * listener: the least trusted message of all. An accepted request must name
 * a host and port and 1..VIEW_JOIN_MAX_SUBGROUPS subgroups, re-encode to the
 * input and decode again to the same struct; a refused one must be
 * SPINDLE_EPROTO naming the offset.
 */
#include <stdlib.h>

#include "fuzz_common.h"
#include "view/view_wire.h"

static struct view_join_request request, again;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(&request, 0, sizeof request);
    int rc = view_wire_decode_join_request(data, size, &request);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "join request");
        return 0;
    }
    FUZZ_CHECK(request.num_subgroups >= 1 && request.num_subgroups <= VIEW_JOIN_MAX_SUBGROUPS);
    FUZZ_CHECK(request.address.host[0] != '\0' && request.address.port != 0);
    uint8_t *bytes = malloc(size);
    FUZZ_CHECK(bytes != NULL);
    size_t len = view_wire_encode_join_request(&request, bytes, size);
    fuzz_check_same_bytes(data, size, bytes, len);
    memset(&again, 0, sizeof again);
    FUZZ_CHECK(view_wire_decode_join_request(bytes, len, &again) == 0);
    FUZZ_CHECK(memcmp(&request, &again, sizeof request) == 0);
    free(bytes);
    return 0;
}
