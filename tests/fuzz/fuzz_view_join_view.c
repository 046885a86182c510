/*
 * libFuzzer target: view_wire_decode_join_view (src/view/view_wire.c), the
 * joiner's view (every row's descriptor) and the size of the state that
 * follows it (any size: it arrives in checked chunks). An accepted view must
 * bound the rows by SST_MAX_ROWS (at least one
 * unless the join was dropped), re-encode to the input and decode again to
 * the same struct; a refused one must be SPINDLE_EPROTO naming the offset.
 */
#include "fuzz_common.h"
#include "view/view_wire.h"

static struct view_join_view view, again;
static uint8_t bytes[VIEW_WIRE_JOIN_VIEW_SIZE];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(&view, 0, sizeof view);
    int rc = view_wire_decode_join_view(data, size, &view);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "joiner's view");
        return 0;
    }
    FUZZ_CHECK(view.error == 0 || view.state_length == 0);
    FUZZ_CHECK(view.num_rows <= SST_MAX_ROWS);
    FUZZ_CHECK(view.error < 0 || (view.error == 0 && view.num_rows >= 1));
    size_t len = view_wire_encode_join_view(&view, bytes, sizeof bytes);
    FUZZ_CHECK(len == sizeof bytes);
    fuzz_check_same_bytes(data, size, bytes, len);
    memset(&again, 0, sizeof again);
    FUZZ_CHECK(view_wire_decode_join_view(bytes, len, &again) == 0);
    FUZZ_CHECK(memcmp(&view, &again, sizeof view) == 0);
    return 0;
}
