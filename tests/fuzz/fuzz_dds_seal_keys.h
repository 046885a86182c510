/*
 * The fixed test key and handshake nonces of the sealed DDS client frames'
 * fuzz target (fuzz_dds_client_sealed.c) and its seeds (fuzz_seeds.c):
 * both derive the same seals, so a seed is a stream the target opens.
 */
#ifndef SPINDLE_TESTS_FUZZ_DDS_SEAL_KEYS_H
#define SPINDLE_TESTS_FUZZ_DDS_SEAL_KEYS_H

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "../../examples/dds/dds_client_seal.h"

/* The client's end (it seals) and the member's (it opens). */
static inline void fuzz_dds_seals(struct dds_client_seal *client, struct dds_client_seal *member)
{
    uint8_t key[DDS_CLIENT_KEY], nonce_m[DDS_CLIENT_NONCE], nonce_c[DDS_CLIENT_NONCE];
    if (sodium_init() < 0)
        abort();
    for (uint32_t i = 0; i < DDS_CLIENT_KEY; i++)
        key[i] = (uint8_t)(0xd5 ^ (i * 29));
    memset(nonce_m, 0x4d, sizeof nonce_m);
    memset(nonce_c, 0x43, sizeof nonce_c);
    dds_client_seal_derive(client, key, 'C', nonce_m, nonce_c);
    dds_client_seal_derive(member, key, 'M', nonce_m, nonce_c);
}

#endif
