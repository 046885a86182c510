/*
 * The fixed subkey the fabric connection set-up targets (fuzz_fab_req.c,
 * fuzz_fab_acc.c) and their seeds (fuzz_seeds.c) authenticate with, and
 * the request the accept seeds answer: a seed is a message the target's
 * MAC check accepts.
 */
#ifndef SPINDLE_TESTS_FUZZ_FAB_KEY_H
#define SPINDLE_TESTS_FUZZ_FAB_KEY_H

#include <string.h>

#include "transport/fabric/fabric_impl.h"

static inline void fuzz_fab_test_key(uint8_t key[FAB_MAC_BYTES])
{
    for (uint32_t i = 0; i < FAB_MAC_BYTES; i++)
        key[i] = (uint8_t)(0xa5 ^ (i * 7));
}

static inline void fuzz_fab_test_request(uint8_t wire[FAB_REQ_WIRE])
{
    uint8_t key[FAB_MAC_BYTES];
    struct fab_req_data req = {FAB_REQ_MAGIC, 2, 0x1111, 0x2222, 0x3333, {0}};
    fuzz_fab_test_key(key);
    fab_req_encode(&req, wire);
    fab_req_seal(key, wire);
}

#endif
