/*
 * libFuzzer target: view_wire_decode_desc (src/view/view_wire.c), a
 * member's table descriptor and identity in the start-up exchange; its
 * three byte strings are later handed to the transport. An accepted
 * descriptor must hold lengths within TP_DESC_MAX and a valid member name
 * with a non-zero incarnation, re-encode to the input and decode again
 * to the same struct; a refused one must be SPINDLE_EPROTO naming the offset.
 */
#include <stdlib.h>

#include "fuzz_common.h"
#include "util/name.h"
#include "view/view_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct view_start_desc start, again;
    memset(&start, 0, sizeof start);
    int rc = view_wire_decode_desc(data, size, &start);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "table descriptor");
        return 0;
    }
    const struct sst_member_desc *desc = &start.desc;
    FUZZ_CHECK(desc->address.len <= TP_DESC_MAX && desc->region.len <= TP_DESC_MAX &&
               desc->side.len <= TP_DESC_MAX);
    FUZZ_CHECK(sp_check_name(start.identity.name, "decoded") == 0 &&
               start.identity.incarnation != 0);
    uint8_t *bytes = malloc(size);
    FUZZ_CHECK(bytes != NULL);
    size_t len = view_wire_encode_desc(&start, bytes, size);
    fuzz_check_same_bytes(data, size, bytes, len);
    memset(&again, 0, sizeof again);
    FUZZ_CHECK(view_wire_decode_desc(bytes, len, &again) == 0);
    FUZZ_CHECK(memcmp(&start, &again, sizeof start) == 0);
    free(bytes);
    return 0;
}
