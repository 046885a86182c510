/* Point-to-point slot headers (smc_p2p_wire.h). */
#include <string.h>

#include <spindle/error.h>

#include "smc/smc_p2p_wire.h"
#include "util/error.h"

#define WRITTEN     (1ull << 63)
#define KIND_SHIFT  56u
#define KIND_MASK   0x7full
#define TAG_SHIFT   24u
#define TAG_MASK    0xffffffffull
#define LENGTH_MASK 0xffffffull

static uint64_t tag_of(uint64_t position)
{
    return (position + 1) & TAG_MASK;
}

void smc_p2p_slot_encode(uint8_t *slot, uint64_t position, const struct smc_p2p_slot *header)
{
    uint64_t word0 = WRITTEN | ((uint64_t)header->kind << KIND_SHIFT) |
                     (tag_of(position) << TAG_SHIFT) | (header->length & LENGTH_MASK);
    memcpy(slot, &word0, 8);
    memcpy(slot + 8, &header->query_id, 8);
}

int smc_p2p_slot_decode(const uint8_t *slot, size_t slot_bytes, uint64_t position,
                        uint32_t max_payload, struct smc_p2p_slot *out)
{
    if (slot_bytes < SMC_P2P_HEADER_SIZE)
        return sp_error(SPINDLE_EPROTO, "p2p slot of %zu bytes is shorter than its %u-byte header",
                        slot_bytes, SMC_P2P_HEADER_SIZE);
    uint64_t word0, query_id;
    memcpy(&word0, slot, 8);
    memcpy(&query_id, slot + 8, 8);
    if ((word0 & WRITTEN) == 0)
        return sp_error(SPINDLE_EPROTO, "p2p slot of message %llu was never written",
                        (unsigned long long)position);
    uint64_t tag = (word0 >> TAG_SHIFT) & TAG_MASK;
    if (tag != tag_of(position))
        return sp_error(SPINDLE_EPROTO, "p2p slot names message tag %llu, expected %llu",
                        (unsigned long long)tag, (unsigned long long)tag_of(position));
    uint64_t kind = (word0 >> KIND_SHIFT) & KIND_MASK;
    if (kind < SMC_P2P_MESSAGE || kind > SMC_P2P_REPLY)
        return sp_error(SPINDLE_EPROTO, "p2p slot of message %llu has unknown kind %llu",
                        (unsigned long long)position, (unsigned long long)kind);
    uint64_t length = word0 & LENGTH_MASK;
    if (length > max_payload || length > slot_bytes - SMC_P2P_HEADER_SIZE)
        return sp_error(SPINDLE_EPROTO,
                        "p2p slot of message %llu has length %llu, above the limit of %u bytes",
                        (unsigned long long)position, (unsigned long long)length,
                        max_payload < slot_bytes - SMC_P2P_HEADER_SIZE
                            ? max_payload
                            : (unsigned)(slot_bytes - SMC_P2P_HEADER_SIZE));
    if ((kind == SMC_P2P_MESSAGE) != (query_id == 0))
        return sp_error(SPINDLE_EPROTO, "p2p slot of message %llu: kind %llu with query id %llu",
                        (unsigned long long)position, (unsigned long long)kind,
                        (unsigned long long)query_id);
    out->kind = (enum smc_p2p_kind)kind;
    out->length = (uint32_t)length;
    out->query_id = query_id;
    return 0;
}
