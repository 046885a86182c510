/*
 * libFuzzer target: smc_slot_header_decode (src/smc/smc_slot_wire.h), the
 * header of a multicast ring slot that another member wrote into this
 * member's copy of its ring (docs/FUZZING.md). Input, little-endian: the
 * u64 header word, the u64 position the receiver expects of its sender,
 * the u32 max_payload of the subgroup and the u32 size of a slot (header
 * included); 24 bytes exactly.
 *
 * An accepted header that names the expected position or a later one must
 * have a length within max_payload and the slot, a distance below 2^38
 * (0 exactly for a message here), and re-encode through smc_header (what
 * smc_send.c writes) at the position it names to the same word; one of an
 * older position must be unwritten or name a position at most 2^38 before
 * the expected one, and re-encode there to the same word. A refusal must
 * be SPINDLE_EPROTO naming the ring slot header, of a written header at or
 * after the expected position whose length exceeds a bound.
 */
#include "fuzz_common.h"
#include "smc/smc_slot_wire.h"

#define INPUT_SIZE 24u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size != INPUT_SIZE)
        return 0;
    uint64_t header, expected;
    uint32_t max_payload, slot_size;
    memcpy(&header, data, 8);
    memcpy(&expected, data + 8, 8);
    memcpy(&max_payload, data + 16, 4);
    memcpy(&slot_size, data + 20, 4);
    const uint64_t mask = (1ull << SMC_POSITION_BITS) - 1;
    uint32_t length = (uint32_t)(header & SMC_LENGTH_MASK);
    bool too_long = length > max_payload || (uint64_t)length + SMC_HEADER_SIZE > slot_size;

    struct smc_slot_header out;
    memset(&out, 0, sizeof out);
    int rc = smc_slot_header_decode(header, expected, max_payload, slot_size, &out);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EPROTO);
        FUZZ_CHECK(strncmp(spindle_errmsg(), "ring slot header", 16) == 0);
        FUZZ_CHECK(smc_header_distance(header, expected) != SMC_HEADER_OLDER);
        FUZZ_CHECK(too_long);
        return 0;
    }
    switch (out.kind) {
    case SMC_SLOT_MESSAGE:
    case SMC_SLOT_LATER:
        FUZZ_CHECK((out.kind == SMC_SLOT_MESSAGE) == (out.distance == 0));
        FUZZ_CHECK(out.distance < (1ull << (SMC_POSITION_BITS - 1)));
        FUZZ_CHECK(out.length <= max_payload);
        FUZZ_CHECK((uint64_t)out.length + SMC_HEADER_SIZE <= slot_size);
        FUZZ_CHECK(smc_header(expected + out.distance, out.length) == header);
        break;
    case SMC_SLOT_OLDER: {
        FUZZ_CHECK(out.length == 0 && out.distance == 0);
        if ((header & SMC_HEADER_WRITTEN) == 0)
            break;
        uint64_t named = (header >> SMC_LENGTH_BITS) & mask; /* position + 1 */
        uint64_t back = (expected + 1 - named) & mask;
        FUZZ_CHECK(back >= 1 && back <= (1ull << (SMC_POSITION_BITS - 1)));
        FUZZ_CHECK(smc_header(expected - back, length) == header);
        break;
    }
    default:
        FUZZ_CHECK(!"a known kind");
    }
    return 0;
}
