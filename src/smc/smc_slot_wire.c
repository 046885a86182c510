/* Multicast ring slot headers (smc_slot_wire.h): the refusal, kept out of
 * the receiver's inline path. */
#include "smc/smc_slot_wire.h"
#include "util/error.h"

void smc_slot_header_refuse(uint64_t header, uint64_t expected, uint32_t max_payload,
                            uint32_t slot_size)
{
    uint64_t distance = smc_header_distance(header, expected);
    unsigned length = (unsigned)(header & SMC_LENGTH_MASK);
    unsigned long long position = expected + distance;
    if (length > max_payload)
        sp_error_record("ring slot header of position %llu has length %u, above max_payload %u",
                        position, length, max_payload);
    else
        sp_error_record(
            "ring slot header of position %llu has length %u, beyond its slot of %u bytes",
            position, length, slot_size);
}
