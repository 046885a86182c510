/*
 * The fixed test key and handshake nonces of the keyed control channel's
 * fuzz target (fuzz_ctl_record.c) and its seeds (fuzz_seeds.c): both sides
 * derive the same sessions, so a seed is a record the target opens.
 */
#ifndef SPINDLE_TESTS_FUZZ_CTL_KEYS_H
#define SPINDLE_TESTS_FUZZ_CTL_KEYS_H

#include <string.h>

#include "control/ctl_auth.h"

static inline void fuzz_ctl_test_key(uint8_t key[CTL_KEY_BYTES])
{
    for (uint32_t i = 0; i < CTL_KEY_BYTES; i++)
        key[i] = (uint8_t)(0x5a ^ (i * 13));
}

/* The dialer's (sealing) and the acceptor's (opening) sessions, or the
 * nonces the proofs are made over. */
static inline void fuzz_ctl_nonces(uint8_t nonce_d[CTL_NONCE_BYTES],
                                   uint8_t nonce_a[CTL_NONCE_BYTES])
{
    memset(nonce_d, 0xd0, CTL_NONCE_BYTES);
    memset(nonce_a, 0xa0, CTL_NONCE_BYTES);
}

static inline void fuzz_ctl_sessions(struct ctl_sess *dialer, struct ctl_sess *acceptor)
{
    uint8_t key[CTL_KEY_BYTES], nonce_d[CTL_NONCE_BYTES], nonce_a[CTL_NONCE_BYTES];
    fuzz_ctl_test_key(key);
    fuzz_ctl_nonces(nonce_d, nonce_a);
    memset(dialer, 0, sizeof *dialer);
    memset(acceptor, 0, sizeof *acceptor);
    ctl_sess_derive(dialer, key, CTL_ROLE_DIALER, nonce_d, nonce_a);
    ctl_sess_derive(acceptor, key, CTL_ROLE_ACCEPTOR, nonce_d, nonce_a);
}

#endif
