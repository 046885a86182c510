/*
 * libFuzzer target: view_wire_decode_join_skips (src/view/view_wire.c), the
 * resends a joiner takes without delivering them, which it then applies to
 * its subgroups. An accepted message must hold 1..VIEW_JOIN_MAX_SKIPS
 * entries in increasing (subgroup, sender) order, each naming a subgroup
 * and sender within bounds and a count of 1..VIEW_JOIN_SKIP_MAX, re-encode
 * to the input and decode again to the same struct; a refused one must be
 * SPINDLE_EPROTO naming the offset.
 */
#include "fuzz_common.h"
#include "view/view_wire.h"

static struct view_join_skips skips, again;
static uint8_t bytes[VIEW_WIRE_JOIN_SKIPS_SIZE(VIEW_JOIN_MAX_SKIPS)];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int rc = view_wire_decode_join_skips(data, size, &skips);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "joiner's skips");
        return 0;
    }
    FUZZ_CHECK(skips.num_skips >= 1 && skips.num_skips <= VIEW_JOIN_MAX_SKIPS);
    for (uint32_t i = 0; i < skips.num_skips; i++) {
        const struct view_join_skip *s = &skips.skips[i];
        FUZZ_CHECK(s->subgroup < SPINDLE_MAX_SUBGROUPS && s->sender < SST_MAX_ROWS);
        FUZZ_CHECK(s->count >= 1 && s->count <= VIEW_JOIN_SKIP_MAX);
        FUZZ_CHECK(i == 0 || s->subgroup > s[-1].subgroup ||
                   (s->subgroup == s[-1].subgroup && s->sender > s[-1].sender));
    }
    size_t len = view_wire_encode_join_skips(&skips, bytes, sizeof bytes);
    FUZZ_CHECK(len == VIEW_WIRE_JOIN_SKIPS_SIZE(skips.num_skips));
    fuzz_check_same_bytes(data, size, bytes, len);
    FUZZ_CHECK(view_wire_decode_join_skips(bytes, len, &again) == 0);
    FUZZ_CHECK(again.num_skips == skips.num_skips && again.view_id == skips.view_id);
    FUZZ_CHECK(memcmp(again.skips, skips.skips, skips.num_skips * sizeof skips.skips[0]) == 0);
    return 0;
}
