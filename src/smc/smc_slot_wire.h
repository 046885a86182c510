/*
 * The slot header of a multicast ring (smc.h "Positions"): the word a
 * sender writes in front of each application message in every receiver's
 * copy of its ring, the encoder smc_send.c writes it with, and the one
 * decoder a receiver reads it back with. Pure functions, no state: the
 * fuzz target tests/fuzz/fuzz_ring_slot.c drives the decoder with
 * arbitrary words.
 *
 * A slot is SMC_HEADER_SIZE bytes of header, then the payload:
 *   1 << 63 (written) | ((position + 1) mod 2^39) << 24 | length
 * The position is read relative to the one the receiver expects, which
 * never lags the sender's by 2^38 (the windows bound it), so the header
 * may wrap. The receiver reads the header on its hot path (receive_sender
 * in smc_predicate.c): the encoder and the decoder are inline, the
 * decoder's refusal (which formats the error) is not.
 *
 * Everything in the header was written by another process: a length
 * above max_payload, or beyond the slot, is a lie the decoder refuses
 * before anything reads the payload.
 */
#ifndef SP_SMC_SMC_SLOT_WIRE_H
#define SP_SMC_SMC_SLOT_WIRE_H

#include <stdint.h>

#include <spindle/error.h>

#define SMC_HEADER_SIZE    8u
#define SMC_LENGTH_BITS    24u
#define SMC_LENGTH_MASK    ((1u << SMC_LENGTH_BITS) - 1)
#define SMC_POSITION_BITS  (63u - SMC_LENGTH_BITS)
#define SMC_HEADER_WRITTEN (1ull << 63)
/* smc_header_distance: the header names no position at or after the
 * expected one (an older message, or a slot never written). */
#define SMC_HEADER_OLDER UINT64_MAX

/* The header of an application message of length bytes (at most
 * SMC_LENGTH_MASK) at position. */
static inline uint64_t smc_header(uint64_t position, uint32_t length)
{
    const uint64_t mask = (1ull << SMC_POSITION_BITS) - 1;
    return SMC_HEADER_WRITTEN | (((position + 1) & mask) << SMC_LENGTH_BITS) | length;
}

/*
 * How far after `next` (the position a receiver expects of the sender)
 * lies the position a slot header names: 0 when it names `next` (an
 * application message), d in [1, 2^38) when it names next + d (the
 * positions before it are nulls), SMC_HEADER_OLDER when it names an
 * earlier position or none (never written: positions up to sent_num are
 * nulls). Computed modulo 2^39, so that a stream of more than 2^39
 * positions (a sender that runs for months) goes on across the wrap
 * (tests/smc/test_smc_wrap.c streams across it, smc_options.first_position).
 */
static inline uint64_t smc_header_distance(uint64_t header, uint64_t next)
{
    const uint64_t mask = (1ull << SMC_POSITION_BITS) - 1;
    if ((header & SMC_HEADER_WRITTEN) == 0)
        return SMC_HEADER_OLDER;
    uint64_t named = (header >> SMC_LENGTH_BITS) & mask; /* position + 1 (mod 2^39) */
    uint64_t d = (named - (next + 1)) & mask;
    return d < (1ull << (SMC_POSITION_BITS - 1)) ? d : SMC_HEADER_OLDER;
}

enum smc_slot_kind {
    SMC_SLOT_MESSAGE = 1, /* the expected position holds an application message */
    SMC_SLOT_LATER = 2,   /* it names a later position: the ones before are nulls */
    SMC_SLOT_OLDER = 3,   /* an earlier position or none: nulls up to sent_num */
};

struct smc_slot_header {
    enum smc_slot_kind kind;
    uint32_t length;   /* payload bytes (MESSAGE and LATER) */
    uint64_t distance; /* positions after the expected one (LATER; 0 otherwise) */
};

/* The error of smc_slot_header_decode's refusal, out of line (cold):
 * records a message that starts "ring slot header" and names the length,
 * the position and the bound (spindle_errmsg). */
void smc_slot_header_refuse(uint64_t header, uint64_t expected, uint32_t max_payload,
                            uint32_t slot_size) __attribute__((cold));

/*
 * Reads header, the first word of a ring slot of slot_size bytes (header
 * included) whose sender the receiver expects at position `expected`, in
 * a subgroup whose messages carry at most max_payload bytes. 0 and *out
 * (kind, and for a written header at or after the expected position its
 * length and distance); SPINDLE_EPROTO (message: smc_slot_header_refuse) when such
 * a header has a length above max_payload or beyond the slot: the sender
 * lies, and nothing of the slot may be read. A header of an older
 * position is not checked: its slot is never read.
 */
static inline int smc_slot_header_decode(uint64_t header, uint64_t expected, uint32_t max_payload,
                                         uint32_t slot_size, struct smc_slot_header *out)
{
    uint64_t distance = smc_header_distance(header, expected);
    if (distance == SMC_HEADER_OLDER) {
        *out = (struct smc_slot_header){.kind = SMC_SLOT_OLDER};
        return 0;
    }
    uint32_t length = (uint32_t)(header & SMC_LENGTH_MASK);
    if (length > max_payload || (uint64_t)length + SMC_HEADER_SIZE > slot_size) {
        smc_slot_header_refuse(header, expected, max_payload, slot_size);
        return SPINDLE_EPROTO;
    }
    *out = (struct smc_slot_header){.kind = distance == 0 ? SMC_SLOT_MESSAGE : SMC_SLOT_LATER,
                                    .length = length,
                                    .distance = distance};
    return 0;
}

#endif
