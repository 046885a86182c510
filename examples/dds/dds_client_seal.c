/*
 * Sealed frames of the external client protocol (dds_client_seal.h): the
 * per-direction keys, sealing and opening. libsodium does all of the
 * cryptography.
 */
#include <sodium.h>
#include <string.h>

#include "dds_client_seal.h"
#include "dds_impl.h"
#include "dds_le.h"

#define SEAL_LABEL   "spindle-dds-client-seal"
#define KDF_CONTEXT  "spdldds1" /* crypto_kdf_CONTEXTBYTES */
#define KDF_C_TO_M   1u
#define KDF_M_TO_C   2u
#define SEALED_FIRST (DDS_CLIENT_SEAL_HEADER - 4u) /* seq: where a sealed frame's bytes start */

_Static_assert(sizeof KDF_CONTEXT - 1 == crypto_kdf_CONTEXTBYTES, "a kdf context is 8 bytes");
_Static_assert(DDS_CLIENT_KEY == crypto_aead_xchacha20poly1305_ietf_KEYBYTES &&
                   DDS_CLIENT_KEY == crypto_kdf_KEYBYTES,
               "a direction's key is an AEAD key");
_Static_assert(DDS_CLIENT_SEAL_TAG == crypto_aead_xchacha20poly1305_ietf_ABYTES, "Poly1305 tag");
/* A SAMPLE sealed within the margin the member's output bound counts
 * (dds_client_server.c), and the largest body (a PUBLISH of the largest
 * sample under the longest name) sealed within the frame bound both sides
 * check. */
_Static_assert(DDS_CLIENT_SAMPLE_OVERHEAD + DDS_CLIENT_SEAL_OVERHEAD <=
                   4u + DDS_CLIENT_FRAME_MARGIN,
               "a sealed SAMPLE fits its margin");
_Static_assert(1u + SPINDLE_DDS_NAME_MAX + 4u + SPINDLE_DDS_MAX_SAMPLE + DDS_CLIENT_SEAL_OVERHEAD <=
                   DDS_CLIENT_MAX_FRAME,
               "a sealed frame fits DDS_CLIENT_MAX_FRAME");

void dds_client_seal_derive(struct dds_client_seal *seal, const uint8_t key[DDS_CLIENT_KEY],
                            char role, const uint8_t nonce_m[DDS_CLIENT_NONCE],
                            const uint8_t nonce_c[DDS_CLIENT_NONCE])
{
    uint8_t session[crypto_kdf_KEYBYTES];
    crypto_generichash_state state;
    crypto_generichash_init(&state, key, DDS_CLIENT_KEY, sizeof session);
    crypto_generichash_update(&state, (const uint8_t *)SEAL_LABEL, sizeof SEAL_LABEL);
    crypto_generichash_update(&state, nonce_m, DDS_CLIENT_NONCE);
    crypto_generichash_update(&state, nonce_c, DDS_CLIENT_NONCE);
    crypto_generichash_final(&state, session, sizeof session);
    dds_client_seal_clear(seal);
    bool client = role == 'C';
    crypto_kdf_derive_from_key(client ? seal->tx_key : seal->rx_key, DDS_CLIENT_KEY, KDF_C_TO_M,
                               KDF_CONTEXT, session);
    crypto_kdf_derive_from_key(client ? seal->rx_key : seal->tx_key, DDS_CLIENT_KEY, KDF_M_TO_C,
                               KDF_CONTEXT, session);
    sodium_memzero(session, sizeof session);
    sodium_memzero(&state, sizeof state);
    seal->keyed = true;
}

void dds_client_seal_clear(struct dds_client_seal *seal)
{
    sodium_memzero(seal, sizeof *seal);
}

/* The AEAD nonce of frame seq: its counter, little-endian, zero-padded.
 * A key is never used for two frames with one counter: each direction has
 * its own key, and each connection new keys. */
static void seal_nonce(uint64_t seq, uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES])
{
    memset(nonce, 0, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
    dds_put64(nonce, seq);
}

size_t dds_client_frame_seal(struct dds_client_seal *seal, uint8_t *out, size_t capacity,
                             const struct dds_client_frame *frame)
{
    if (!seal->keyed)
        return dds_client_frame_encode(out, capacity, frame);
    if (capacity < DDS_CLIENT_SEAL_HEADER + DDS_CLIENT_SEAL_TAG)
        return 0;
    /* The plain frame's length field lands where the counter goes; its
     * type and body where the ciphertext goes, sealed in place. */
    size_t plain = dds_client_frame_encode(out + SEALED_FIRST,
                                           capacity - SEALED_FIRST - DDS_CLIENT_SEAL_TAG, frame);
    if (plain == 0)
        return 0;
    size_t body = plain - 4u;
    size_t length = SEALED_FIRST + body + DDS_CLIENT_SEAL_TAG;
    if (length > DDS_CLIENT_MAX_FRAME)
        return 0;
    dds_put32(out, (uint32_t)length);
    dds_put64(out + 4, seal->tx_seq);
    uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
    seal_nonce(seal->tx_seq, nonce);
    uint8_t *text = out + DDS_CLIENT_SEAL_HEADER;
    crypto_aead_xchacha20poly1305_ietf_encrypt(text, NULL, text, body, out, DDS_CLIENT_SEAL_HEADER,
                                               NULL, nonce, seal->tx_key);
    seal->tx_seq++;
    return 4u + length;
}

int dds_client_frame_open(struct dds_client_seal *seal, uint8_t *bytes, size_t size, uint8_t **body,
                          size_t *body_size)
{
    if (!seal->keyed) {
        *body = bytes;
        *body_size = size;
        return 0;
    }
    if (size <= SEALED_FIRST + DDS_CLIENT_SEAL_TAG || size > DDS_CLIENT_MAX_FRAME)
        return dds_error(SPINDLE_EPROTO,
                         "client protocol: a sealed frame of %zu bytes (%u..%u): not sealed, or "
                         "cut short",
                         size, SEALED_FIRST + DDS_CLIENT_SEAL_TAG + 1u, DDS_CLIENT_MAX_FRAME);
    /* Authenticated first, under the counter it carries: a frame refused
     * as replayed or reordered is one this connection's peer sealed. The
     * additional data is the header as it came: the length field before
     * these bytes, rebuilt from size, and the counter. */
    uint64_t seq = dds_get64(bytes);
    uint8_t header[DDS_CLIENT_SEAL_HEADER];
    dds_put32(header, (uint32_t)size);
    memcpy(header + 4, bytes, SEALED_FIRST);
    uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
    seal_nonce(seq, nonce);
    uint8_t *text = bytes + SEALED_FIRST;
    size_t text_size = size - SEALED_FIRST;
    if (crypto_aead_xchacha20poly1305_ietf_decrypt(text, NULL, NULL, text, text_size, header,
                                                   sizeof header, nonce, seal->rx_key) != 0)
        return dds_error(SPINDLE_EPROTO,
                         "client protocol: sealed frame (counter %llu, %llu due) failed "
                         "authentication: altered on the wire, or sealed with another key",
                         (unsigned long long)seq, (unsigned long long)seal->rx_seq);
    if (seq < seal->rx_seq)
        return dds_error(SPINDLE_EPROTO,
                         "client protocol: sealed frame %llu arrived again after frame %llu was "
                         "opened (replayed)",
                         (unsigned long long)seq, (unsigned long long)(seal->rx_seq - 1));
    if (seq > seal->rx_seq)
        return dds_error(SPINDLE_EPROTO,
                         "client protocol: sealed frame %llu arrived where frame %llu was due "
                         "(reordered, or frames dropped)",
                         (unsigned long long)seq, (unsigned long long)seal->rx_seq);
    seal->rx_seq++;
    *body = text;
    *body_size = text_size - DDS_CLIENT_SEAL_TAG;
    return 0;
}
