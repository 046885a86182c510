/*
 * libFuzzer target: view_wire_decode_join_offer (src/view/view_wire.c),
 * the answer a joiner receives: admitted (a whole view: rows, addresses and
 * subgroup layouts it will build rings from), redirected or refused. An
 * accepted offer must keep the promises the joiner relies on (a known kind;
 * a refusal carries a libspindle error; an admission puts the joiner in the
 * last row under its own id, lists distinct member ids and only layouts
 * smc_layout_validate accepts), re-encode to the input and decode again to
 * the same offer; a refused one must be SPINDLE_EPROTO naming the offset.
 */
#include <stdlib.h>

#include "fuzz_common.h"
#include "view/view_wire.h"

static struct view_join_offer offer, again;
static struct smc_layout layouts[VIEW_JOIN_MAX_SUBGROUPS];
static struct smc_layout layouts_again[VIEW_JOIN_MAX_SUBGROUPS];

static void check_admission(const struct view_join_offer *admit)
{
    FUZZ_CHECK(admit->num_rows >= 1 && admit->num_rows <= SST_MAX_ROWS);
    FUZZ_CHECK(admit->my_row == admit->num_rows - 1);
    FUZZ_CHECK(admit->member_ids[admit->my_row] == admit->id);
    FUZZ_CHECK(admit->num_subgroups >= 1 && admit->num_subgroups <= VIEW_JOIN_MAX_SUBGROUPS);
    uint64_t seen = 0;
    for (uint32_t row = 0; row < admit->num_rows; row++) {
        FUZZ_CHECK(admit->member_ids[row] < SST_MAX_ROWS);
        FUZZ_CHECK(((seen >> admit->member_ids[row]) & 1) == 0);
        seen |= 1ull << admit->member_ids[row];
        FUZZ_CHECK(admit->addresses[row].host[0] != '\0' && admit->addresses[row].port != 0);
    }
    for (uint32_t g = 0; g < admit->num_subgroups; g++)
        FUZZ_CHECK(smc_layout_validate(&admit->layouts[g], g, admit->num_rows) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(&offer, 0, sizeof offer);
    memset(layouts, 0, sizeof layouts);
    offer.layouts = layouts;
    int rc = view_wire_decode_join_offer(data, size, &offer);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "join offer");
        return 0;
    }
    FUZZ_CHECK(offer.layouts == layouts);
    if (offer.kind == VIEW_OFFER_REFUSE)
        FUZZ_CHECK(offer.error < 0);
    else if (offer.kind == VIEW_OFFER_ADMIT)
        check_admission(&offer);
    else
        FUZZ_CHECK(offer.kind == VIEW_OFFER_REDIRECT);
    uint8_t *bytes = malloc(size);
    FUZZ_CHECK(bytes != NULL);
    size_t len = view_wire_encode_join_offer(&offer, bytes, size);
    fuzz_check_same_bytes(data, size, bytes, len);
    memset(&again, 0, sizeof again);
    memset(layouts_again, 0, sizeof layouts_again);
    again.layouts = layouts_again;
    FUZZ_CHECK(view_wire_decode_join_offer(bytes, len, &again) == 0);
    FUZZ_CHECK(memcmp(layouts, layouts_again, sizeof layouts) == 0);
    again.layouts = layouts;
    FUZZ_CHECK(memcmp(&offer, &again, sizeof offer) == 0);
    free(bytes);
    return 0;
}
