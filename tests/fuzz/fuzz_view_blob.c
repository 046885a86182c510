/*
 * libFuzzer target: view_wire_decode_blob (src/view/view_wire.c), a
 * survivor's frozen receive counts and next descriptor in a view change.
 * The decoder takes the group's subgroup count; like a receiver, whose
 * mailbox expects one length per tag, the target derives it from the
 * input's length (capped at VIEW_JOIN_MAX_SUBGROUPS), so a blob whose own
 * count disagrees is exercised too. An accepted blob must name that count
 * and a valid joiner, re-encode to the input and decode again to the same
 * blob; a refused one must be SPINDLE_EPROTO naming the offset.
 */
#include <stdlib.h>

#include "fuzz_common.h"
#include "view/view_wire.h"

static uint64_t counts[VIEW_JOIN_MAX_SUBGROUPS * SST_MAX_ROWS];
static uint64_t counts_again[VIEW_JOIN_MAX_SUBGROUPS * SST_MAX_ROWS];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t per_subgroup = (size_t)SST_MAX_ROWS * 8u;
    size_t fixed = view_wire_blob_size(0);
    size_t fit = size > fixed ? (size - fixed) / per_subgroup : 0;
    uint32_t num_subgroups =
        (uint32_t)(fit < VIEW_JOIN_MAX_SUBGROUPS ? fit : VIEW_JOIN_MAX_SUBGROUPS);
    size_t num_counts = (size_t)num_subgroups * SST_MAX_ROWS;

    struct view_blob blob, again;
    memset(&blob, 0, sizeof blob);
    memset(counts, 0, num_counts * sizeof counts[0]);
    blob.counts = counts;
    int rc = view_wire_decode_blob(data, size, num_subgroups, &blob);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "view blob");
        return 0;
    }
    FUZZ_CHECK(blob.num_subgroups == num_subgroups);
    FUZZ_CHECK(blob.joiner == VIEW_NO_JOINER || blob.joiner < SST_MAX_ROWS);
    uint8_t *bytes = malloc(size);
    FUZZ_CHECK(bytes != NULL);
    size_t len = view_wire_encode_blob(&blob, bytes, size);
    fuzz_check_same_bytes(data, size, bytes, len);
    memset(&again, 0, sizeof again);
    memset(counts_again, 0, num_counts * sizeof counts_again[0]);
    again.counts = counts_again;
    FUZZ_CHECK(view_wire_decode_blob(bytes, len, num_subgroups, &again) == 0);
    FUZZ_CHECK(memcmp(counts, counts_again, num_counts * sizeof counts[0]) == 0);
    again.counts = counts;
    FUZZ_CHECK(memcmp(&blob, &again, sizeof blob) == 0);
    free(bytes);
    return 0;
}
