/*
 * libFuzzer target: view_wire_decode_commit (src/view/view_wire.c), a
 * survivor's commitment to one suspected set during a view change. An
 * accepted commitment must re-encode to the input and decode again to the
 * same struct; a refused one must be SPINDLE_EPROTO naming the offset.
 */
#include "fuzz_common.h"
#include "view/view_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct view_commit commit, again;
    memset(&commit, 0, sizeof commit);
    int rc = view_wire_decode_commit(data, size, &commit);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "view commitment");
        return 0;
    }
    uint8_t bytes[VIEW_WIRE_COMMIT_SIZE];
    size_t len = view_wire_encode_commit(&commit, bytes, sizeof bytes);
    FUZZ_CHECK(len == sizeof bytes);
    fuzz_check_same_bytes(data, size, bytes, len);
    memset(&again, 0, sizeof again);
    FUZZ_CHECK(view_wire_decode_commit(bytes, len, &again) == 0);
    FUZZ_CHECK(memcmp(&commit, &again, sizeof commit) == 0);
    return 0;
}
