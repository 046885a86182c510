/*
 * libFuzzer target: smc_p2p_slot_decode (src/smc/smc_p2p_wire.c), the
 * header of a point-to-point ring slot that another member wrote into this
 * member's memory (docs/P2P.md). Input: the u64 message number the
 * receiver expects (little-endian), then the slot's bytes (its length is
 * the rest of the input). An accepted header must have a known kind, a
 * length within SPINDLE_P2P_MAX_PAYLOAD and the slot, a query id exactly
 * when it is a query or reply, and re-encode to the input's 16 header
 * bytes; a refusal must be SPINDLE_EPROTO naming the p2p slot.
 */
#include <spindle/p2p.h>

#include "fuzz_common.h"
#include "smc/smc_p2p_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint64_t position;
    memcpy(&position, data, 8);
    size_t slot_bytes = size - 8;
    /* Aligned, as a slot in the side region is. */
    uint64_t *slot = calloc(1, slot_bytes + 8);
    FUZZ_CHECK(slot != NULL);
    memcpy(slot, data + 8, slot_bytes);
    struct smc_p2p_slot header;
    memset(&header, 0, sizeof header);
    int rc = smc_p2p_slot_decode((const uint8_t *)slot, slot_bytes, position,
                                 SPINDLE_P2P_MAX_PAYLOAD, &header);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EPROTO);
        FUZZ_CHECK(strncmp(spindle_errmsg(), "p2p slot", 8) == 0);
        free(slot);
        return 0;
    }
    FUZZ_CHECK(header.kind >= SMC_P2P_MESSAGE && header.kind <= SMC_P2P_REPLY);
    FUZZ_CHECK(header.length <= SPINDLE_P2P_MAX_PAYLOAD);
    FUZZ_CHECK(header.length <= slot_bytes - SMC_P2P_HEADER_SIZE);
    FUZZ_CHECK((header.kind == SMC_P2P_MESSAGE) == (header.query_id == 0));
    uint8_t again[SMC_P2P_HEADER_SIZE];
    smc_p2p_slot_encode(again, position, &header);
    fuzz_check_same_bytes((const uint8_t *)slot, SMC_P2P_HEADER_SIZE, again, sizeof again);
    free(slot);
    return 0;
}
