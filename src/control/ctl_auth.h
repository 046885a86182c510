/*
 * The control channel's protection with a group key (docs/SECURITY.md,
 * docs/WIRE.md "Keyed connections"): mutual authentication of every TCP
 * connection before anything else is said, then every byte in records
 * sealed with an AEAD. All cryptography is libsodium's.
 *
 * Handshake (D dials, A accepts; each nonce 32 fresh random bytes):
 *   D -> A  nonce_d
 *   A -> D  nonce_a
 *   D -> A  proof_d = HMAC-SHA512-256(key, label "D" nonce_d nonce_a)
 *   A -> D  proof_a = HMAC-SHA512-256(key, label "A" nonce_d nonce_a)
 * The dialer proves first, so an acceptor says nothing but a random nonce
 * to a peer that has not proved the key, and tries each key of its ring on
 * the proof (a rotation accepts the old and the new key) before proving
 * with the one that matched. The role letter keeps one side's proof from
 * being reflected as the other's. Both then derive per-direction keys:
 *   session = BLAKE2b-256(keyed with key, label nonce_d nonce_a)
 *   d_to_a  = crypto_kdf(session, id 1, "spdlctl1"), a_to_d: id 2.
 *
 * Record (each sealed write):
 *   u32 length  ciphertext bytes (plaintext + CTL_SEAL_TAG)
 *   u64 seq     the sender's record counter in this direction, from 0
 *   ciphertext  XChaCha20-Poly1305-IETF of the plaintext, nonce = seq
 *               (little-endian, zero-padded), additional data = the 12
 *               header bytes
 * A record whose seq is not the next one (replayed, reordered, dropped) or
 * that does not authenticate (altered) fails the connection; so does one
 * longer than CTL_SEAL_MAX.
 *
 * Without a key (keyring NULL or empty) a session is a pass-through and
 * the wire is the unkeyed one byte for byte.
 *
 * Thread-safety: a session belongs to one connection and is used under its
 * owner's lock; the pure functions (tag, verify, derive, seal, open) may
 * run anywhere.
 */
#ifndef SP_CONTROL_CTL_AUTH_H
#define SP_CONTROL_CTL_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "control/ctl.h"

#define CTL_NONCE_BYTES 32u
#define CTL_PROOF_BYTES 32u
#define CTL_SEAL_HEADER 12u
#define CTL_SEAL_TAG    16u
/* Largest ciphertext of one record: a whole blob, sealed. */
#define CTL_SEAL_MAX (CTL_BLOB_MAX + CTL_SEAL_TAG)

enum ctl_role { CTL_ROLE_DIALER = 'D', CTL_ROLE_ACCEPTOR = 'A' };

/* One connection's protection: pass-through when !keyed. */
struct ctl_sess {
    bool keyed;
    uint8_t tx_key[CTL_KEY_BYTES], rx_key[CTL_KEY_BYTES];
    uint64_t tx_seq, rx_seq;
    /* The record being received, then its plaintext not yet taken. */
    uint8_t rec_header[CTL_SEAL_HEADER];
    size_t rec_got;
    uint32_t rec_len;
    uint8_t *rec;
    size_t plain_len, plain_off;
    uint32_t rec_max; /* largest record accepted (0: CTL_SEAL_MAX); smaller
                         while the peer is not yet a member */
    char why[160];    /* why the last record was refused */
};

/* Result of ctl_sess_recv for a record that was refused (s->why says
 * why); -1 keeps recv's meaning (errno). */
#define CTL_SESS_REFUSED (-2)

/* proof = HMAC-SHA512-256(key, label role nonce_d nonce_a). */
void ctl_auth_proof(const uint8_t key[CTL_KEY_BYTES], enum ctl_role role,
                    const uint8_t nonce_d[CTL_NONCE_BYTES], const uint8_t nonce_a[CTL_NONCE_BYTES],
                    uint8_t proof[CTL_PROOF_BYTES]);
/* The index of the key in keys that made proof for role (constant-time
 * per key), or -1 when none did. */
int ctl_auth_verify(const struct ctl_keyring *keys, enum ctl_role role,
                    const uint8_t nonce_d[CTL_NONCE_BYTES], const uint8_t nonce_a[CTL_NONCE_BYTES],
                    const uint8_t proof[CTL_PROOF_BYTES]);
/* Sets up s (keyed, counters 0) for `role`'s end of a connection that
 * proved key over the two nonces. */
void ctl_sess_derive(struct ctl_sess *s, const uint8_t key[CTL_KEY_BYTES], enum ctl_role role,
                     const uint8_t nonce_d[CTL_NONCE_BYTES],
                     const uint8_t nonce_a[CTL_NONCE_BYTES]);

/*
 * The handshake on a fresh blocking connection, before the deadline. With
 * no key: 0 and a pass-through session, nothing sent. Otherwise 0 and a
 * keyed session; SPINDLE_EAUTH when the peer's proof is wrong (another
 * key, or none), SPINDLE_EUNREACH when the connection broke or timed out
 * (the peer may hold another key, or none: an acceptor closes silently);
 * *why says which.
 */
int ctl_auth_dial(int fd, const struct ctl_keyring *keys, uint64_t deadline, struct ctl_sess *s,
                  const char **why);
int ctl_auth_accept(int fd, const struct ctl_keyring *keys, uint64_t deadline, struct ctl_sess *s,
                    const char **why);
/*
 * The acceptor's handshake in steps, for a caller that does its own
 * non-blocking I/O (control/ctl_tcp_accept.c, the channel's only
 * acceptor); ctl_auth_accept is these around blocking reads and writes,
 * for a peer on a socket of its own (the handshake's tests). ctl_auth_nonce: a fresh nonce_a.
 * ctl_auth_answer: with nonce_d and proof_d read, checks the proof
 * against each key of keys; 0 with proof_a (to send) written and s set up
 * for the acceptor's end, or SPINDLE_EAUTH with *why (s untouched).
 */
void ctl_auth_nonce(uint8_t nonce[CTL_NONCE_BYTES]);
int ctl_auth_answer(const struct ctl_keyring *keys, const uint8_t nonce_d[CTL_NONCE_BYTES],
                    const uint8_t nonce_a[CTL_NONCE_BYTES], const uint8_t proof_d[CTL_PROOF_BYTES],
                    uint8_t proof_a[CTL_PROOF_BYTES], struct ctl_sess *s, const char **why);

/* Bytes that sealing len plaintext bytes puts on the wire. */
size_t ctl_sess_sealed_size(const struct ctl_sess *s, size_t len);
/* Seals len bytes into out (ctl_sess_sealed_size bytes); a pass-through
 * session copies. Advances the send counter. */
void ctl_sess_seal(struct ctl_sess *s, const void *in, size_t len, uint8_t *out);
/*
 * Opens one received record: header (CTL_SEAL_HEADER bytes) and its
 * ciphertext (the header's length) into plain (length - CTL_SEAL_TAG
 * bytes). 0 and the receive counter advanced; SPINDLE_EPROTO with s->why
 * naming an out-of-sequence counter (replayed, reordered or dropped), a
 * length above CTL_SEAL_MAX or below CTL_SEAL_TAG, or a record that does
 * not authenticate (altered, or sealed with another key).
 */
int ctl_sess_check_header(struct ctl_sess *s, const uint8_t header[CTL_SEAL_HEADER],
                          uint32_t *length);
int ctl_sess_open(struct ctl_sess *s, const uint8_t header[CTL_SEAL_HEADER], const uint8_t *cipher,
                  uint32_t length, uint8_t *plain);

/* Like recv(fd, buf, len, MSG_DONTWAIT) through the session: > 0 bytes of
 * plaintext, 0 when the peer closed, -1 with errno (EAGAIN: nothing yet),
 * CTL_SESS_REFUSED with s->why when a record was refused. */
ssize_t ctl_sess_recv(struct ctl_sess *s, int fd, void *buf, size_t len);
/* Exactly len bytes through the session before the deadline, on a
 * connection. 0, SPINDLE_ETIMEDOUT, SPINDLE_EUNREACH (closed), or
 * SPINDLE_EPROTO with s->why (a refused record); a write may also fail
 * with SPINDLE_ENOMEM. */
int ctl_sess_read(struct ctl_sess *s, int fd, void *buf, size_t len, uint64_t deadline);
int ctl_sess_write(struct ctl_sess *s, int fd, const void *buf, size_t len, uint64_t deadline);
/* Frees what s holds and wipes its keys; s is a pass-through afterwards. */
void ctl_sess_clear(struct ctl_sess *s);

#endif
