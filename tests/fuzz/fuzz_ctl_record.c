/*
 * libFuzzer target: the keyed control channel's decoders
 * (src/control/ctl_auth.c) under a fixed test key. The input's first 32
 * bytes are a dialer's proof of the key, the rest a stream of sealed
 * records as a dialer sends them after the handshake. A proof is accepted
 * only when it is the true one; a record is opened only when it is the
 * genuine next record (sealing its plaintext at its counter gives the very
 * same bytes), and the first refused record ends the stream, as it ends a
 * connection. Nothing may read past the input or crash.
 */
#include "fuzz_common.h"
#include "fuzz_ctl_keys.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FUZZ_CHECK(ctl_crypto_init() == 0);
    uint8_t key[CTL_KEY_BYTES], nonce_d[CTL_NONCE_BYTES], nonce_a[CTL_NONCE_BYTES];
    uint8_t proof[CTL_PROOF_BYTES];
    fuzz_ctl_test_key(key);
    fuzz_ctl_nonces(nonce_d, nonce_a);
    if (size < CTL_PROOF_BYTES)
        return 0;
    struct ctl_keyring ring = {.count = 1};
    memcpy(ring.key[0], key, CTL_KEY_BYTES);
    ctl_auth_proof(key, CTL_ROLE_DIALER, nonce_d, nonce_a, proof);
    int k = ctl_auth_verify(&ring, CTL_ROLE_DIALER, nonce_d, nonce_a, data);
    FUZZ_CHECK(k == (memcmp(proof, data, CTL_PROOF_BYTES) == 0 ? 0 : -1));
    FUZZ_CHECK(ctl_auth_verify(&ring, CTL_ROLE_ACCEPTOR, nonce_d, nonce_a, proof) == -1);

    struct ctl_sess sealer, opener;
    fuzz_ctl_sessions(&sealer, &opener);
    size_t at = CTL_PROOF_BYTES;
    while (size - at >= CTL_SEAL_HEADER) {
        const uint8_t *header = data + at;
        uint32_t length = 0;
        uint64_t seq = opener.rx_seq;
        if (ctl_sess_check_header(&opener, header, &length) != 0) {
            FUZZ_CHECK(opener.why[0] != '\0');
            break;
        }
        if (size - at - CTL_SEAL_HEADER < length)
            break; /* the rest has not arrived */
        uint8_t *plain = malloc(length - CTL_SEAL_TAG + 1);
        FUZZ_CHECK(plain != NULL);
        int rc = ctl_sess_open(&opener, header, header + CTL_SEAL_HEADER, length, plain);
        if (rc != 0) {
            FUZZ_CHECK(rc == SPINDLE_EPROTO && opener.rx_seq == seq);
            FUZZ_CHECK(strstr(opener.why, "failed authentication") != NULL);
            free(plain);
            break;
        }
        FUZZ_CHECK(opener.rx_seq == seq + 1);
        size_t sealed = ctl_sess_sealed_size(&sealer, length - CTL_SEAL_TAG);
        uint8_t *again = malloc(sealed);
        FUZZ_CHECK(again != NULL);
        sealer.tx_seq = seq;
        ctl_sess_seal(&sealer, plain, length - CTL_SEAL_TAG, again);
        fuzz_check_same_bytes(header, CTL_SEAL_HEADER + length, again, sealed);
        free(again);
        free(plain);
        at += CTL_SEAL_HEADER + length;
    }
    ctl_sess_clear(&sealer);
    ctl_sess_clear(&opener);
    return 0;
}
