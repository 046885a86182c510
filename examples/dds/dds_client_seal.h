/*
 * Sealed frames of the external client protocol (docs/DDS.md "External
 * clients", "Security"): with a group key, every frame after the
 * handshake (WELCOME, HELLO, READY) is encrypted and authenticated, so
 * that a frame altered, replayed, reordered or dropped on the wire is
 * refused. The design is the control channel's (src/control/ctl_auth.h);
 * all cryptography is libsodium's.
 *
 * Keys, one per direction, from the group key and the handshake's nonces:
 *   session = BLAKE2b-256(keyed with the group key, label N_m N_c)
 *   client to member = crypto_kdf(session, id 1, "spdldds1"), member to
 *   client: id 2.
 * Fresh nonces on both sides make the keys of every connection new.
 *
 * Sealed frame:
 *   u32 length  the bytes after it: 8 + ciphertext
 *   u64 seq     the sender's frame counter in this direction, from 0
 *   ciphertext  XChaCha20-Poly1305-IETF of the frame's type and body
 *               (what dds_client_frame_encode writes after the length),
 *               nonce = seq (little-endian, zero-padded), additional data
 *               = the 12 bytes before it
 * The bound of DDS_CLIENT_MAX_FRAME covers the sealed frames too.
 *
 * Without a key a seal is a pass-through: the frames are the plain ones,
 * byte for byte.
 *
 * Thread-safety: a seal belongs to one connection; its sending half (seal)
 * and its receiving half (open) may each be used by one thread at a time.
 */
#ifndef SPINDLE_DDS_CLIENT_SEAL_H
#define SPINDLE_DDS_CLIENT_SEAL_H

#include "dds_client_wire.h"

#define DDS_CLIENT_SEAL_HEADER 12u /* length, seq */
#define DDS_CLIENT_SEAL_TAG    16u /* Poly1305 */
/* What sealing adds to a frame after its length field. */
#define DDS_CLIENT_SEAL_OVERHEAD (8u + DDS_CLIENT_SEAL_TAG)

struct dds_client_seal {
    bool keyed;
    uint8_t tx_key[DDS_CLIENT_KEY], rx_key[DDS_CLIENT_KEY];
    uint64_t tx_seq, rx_seq; /* the next frame's counter, each way */
};

/* Sets seal up (keyed, counters 0) for role's end ('C' client, 'M'
 * member) of a connection whose handshake proved key over the nonces.
 * libsodium is initialised already (dds_client_random, for the nonce). */
void dds_client_seal_derive(struct dds_client_seal *seal, const uint8_t key[DDS_CLIENT_KEY],
                            char role, const uint8_t nonce_m[DDS_CLIENT_NONCE],
                            const uint8_t nonce_c[DDS_CLIENT_NONCE]);
/* Wipes the keys: seal is a pass-through afterwards (between connections). */
void dds_client_seal_clear(struct dds_client_seal *seal);

/* Encodes frame with its length field into out (capacity bytes) and,
 * keyed, seals it, advancing the send counter: the bytes written, or 0
 * when it does not fit (the counter then stays). */
size_t dds_client_frame_seal(struct dds_client_seal *seal, uint8_t *out, size_t capacity,
                             const struct dds_client_frame *frame);
/* Opens one received frame's bytes after its length field (size of them),
 * in place: 0 with *body and *body_size the frame's type and body for
 * dds_client_frame_decode (without a key, the bytes as they are) and the
 * receive counter advanced; or SPINDLE_EPROTO naming what was wrong, the
 * receive counter unchanged: a size too small for a sealed frame (a plain
 * one, or cut short), a frame that does not authenticate (altered on the
 * wire, its counter included, or sealed with another key), or an
 * authentic frame whose counter was opened already (replayed) or is ahead
 * of the next (reordered, or frames dropped). After a refusal the
 * connection is unusable. */
int dds_client_frame_open(struct dds_client_seal *seal, uint8_t *bytes, size_t size, uint8_t **body,
                          size_t *body_size);

#endif
