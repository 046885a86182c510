/*
 * The slot header of a point-to-point ring (smc_p2p.c): what a sender
 * writes in front of each message in the target's memory, and the one
 * decoder that reads it back. Pure functions, no state: the fuzz target
 * tests/fuzz/fuzz_p2p_slot.c drives the decoder with arbitrary bytes.
 *
 * A slot is SMC_P2P_HEADER_SIZE bytes of header, then the payload:
 *   word 0: 1 << 63 (written) | kind << 56 | tag << 24 | length
 *           tag: (position + 1) mod 2^32, the sender's message number to
 *           this target, so that a receiver tells a current slot from one
 *           left by the previous lap of the ring;
 *   word 1: query id (0 for a one-way message, non-zero otherwise).
 * Everything in it was written by another process: the decoder checks
 * every field before anything is used.
 */
#ifndef SP_SMC_SMC_P2P_WIRE_H
#define SP_SMC_SMC_P2P_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define SMC_P2P_HEADER_SIZE 16u

enum smc_p2p_kind {
    SMC_P2P_MESSAGE = 1, /* one-way, spindle_p2p_send */
    SMC_P2P_QUERY = 2,   /* expects a reply, spindle_p2p_query */
    SMC_P2P_REPLY = 3,   /* answers a query, spindle_p2p_reply */
};

struct smc_p2p_slot {
    enum smc_p2p_kind kind;
    uint32_t length;
    uint64_t query_id;
};

/* Bytes of one slot that carries at most max_payload bytes (a multiple
 * of 8). */
static inline uint64_t smc_p2p_slot_bytes(uint32_t max_payload)
{
    return SMC_P2P_HEADER_SIZE + (((uint64_t)max_payload + 7u) & ~(uint64_t)7u);
}

/* Writes the header of message number position into slot (8-byte
 * aligned, at least SMC_P2P_HEADER_SIZE bytes). */
void smc_p2p_slot_encode(uint8_t *slot, uint64_t position, const struct smc_p2p_slot *header);

/*
 * Reads the header of slot (slot_bytes long) that must hold message
 * number position of its sender. 0 and *out; SPINDLE_EPROTO naming what
 * is wrong: the slot is not written, names another position, has an
 * unknown kind, a length above max_payload or beyond the slot, a query id
 * of 0 on a query or reply, or one on a one-way message.
 */
int smc_p2p_slot_decode(const uint8_t *slot, size_t slot_bytes, uint64_t position,
                        uint32_t max_payload, struct smc_p2p_slot *out);

#endif
