/*
 * The keyed control channel (control/ctl_auth.h): the handshake that
 * proves the group key both ways, the per-direction session keys, and the
 * sealed records every later byte travels in. libsodium does all of the
 * cryptography; this file only arranges it.
 */
#include "control/ctl_auth.h"

#include <errno.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "control/ctl_tcp_impl.h"
#include "util/error.h"

#define CTL_AUTH_LABEL  "spindle control v1"
#define CTL_KDF_CONTEXT "spdlctl1"

int ctl_crypto_init(void)
{
    /* Idempotent and thread-safe: 1 when already done. */
    if (sodium_init() < 0)
        return sp_error(SPINDLE_EIO, "control: libsodium failed to initialise");
    return 0;
}

void ctl_auth_proof(const uint8_t key[CTL_KEY_BYTES], enum ctl_role role,
                    const uint8_t nonce_d[CTL_NONCE_BYTES], const uint8_t nonce_a[CTL_NONCE_BYTES],
                    uint8_t proof[CTL_PROOF_BYTES])
{
    crypto_auth_hmacsha512256_state state;
    uint8_t letter = (uint8_t)role;
    crypto_auth_hmacsha512256_init(&state, key, CTL_KEY_BYTES);
    crypto_auth_hmacsha512256_update(&state, (const uint8_t *)CTL_AUTH_LABEL,
                                     sizeof CTL_AUTH_LABEL);
    crypto_auth_hmacsha512256_update(&state, &letter, 1);
    crypto_auth_hmacsha512256_update(&state, nonce_d, CTL_NONCE_BYTES);
    crypto_auth_hmacsha512256_update(&state, nonce_a, CTL_NONCE_BYTES);
    crypto_auth_hmacsha512256_final(&state, proof);
    sodium_memzero(&state, sizeof state);
}

int ctl_auth_verify(const struct ctl_keyring *keys, enum ctl_role role,
                    const uint8_t nonce_d[CTL_NONCE_BYTES], const uint8_t nonce_a[CTL_NONCE_BYTES],
                    const uint8_t proof[CTL_PROOF_BYTES])
{
    int found = -1;
    for (uint32_t k = 0; keys != NULL && k < keys->count && k < CTL_KEYS_MAX; k++) {
        uint8_t expected[CTL_PROOF_BYTES];
        ctl_auth_proof(keys->key[k], role, nonce_d, nonce_a, expected);
        if (found < 0 && sodium_memcmp(expected, proof, CTL_PROOF_BYTES) == 0)
            found = (int)k;
    }
    return found;
}

void ctl_sess_derive(struct ctl_sess *s, const uint8_t key[CTL_KEY_BYTES], enum ctl_role role,
                     const uint8_t nonce_d[CTL_NONCE_BYTES], const uint8_t nonce_a[CTL_NONCE_BYTES])
{
    uint8_t session[crypto_kdf_KEYBYTES];
    crypto_generichash_state state;
    crypto_generichash_init(&state, key, CTL_KEY_BYTES, sizeof session);
    crypto_generichash_update(&state, (const uint8_t *)CTL_AUTH_LABEL, sizeof CTL_AUTH_LABEL);
    crypto_generichash_update(&state, nonce_d, CTL_NONCE_BYTES);
    crypto_generichash_update(&state, nonce_a, CTL_NONCE_BYTES);
    crypto_generichash_final(&state, session, sizeof session);
    ctl_sess_clear(s);
    bool dialer = role == CTL_ROLE_DIALER;
    crypto_kdf_derive_from_key(dialer ? s->tx_key : s->rx_key, CTL_KEY_BYTES, 1, CTL_KDF_CONTEXT,
                               session);
    crypto_kdf_derive_from_key(dialer ? s->rx_key : s->tx_key, CTL_KEY_BYTES, 2, CTL_KDF_CONTEXT,
                               session);
    sodium_memzero(session, sizeof session);
    sodium_memzero(&state, sizeof state);
    s->keyed = true;
}

static int ctl_auth_io(int fd, void *buf, size_t len, int sending, uint64_t deadline,
                       const char **why)
{
    int rc = ctl_io(fd, buf, len, sending, deadline);
    if (rc == SPINDLE_ETIMEDOUT)
        *why = "the handshake timed out (the peer may hold another key, or none)";
    else if (rc != 0)
        *why = "the peer closed the connection during the handshake (it may hold another key, "
               "or none)";
    return rc != 0 ? SPINDLE_EUNREACH : 0;
}

int ctl_auth_dial(int fd, const struct ctl_keyring *keys, uint64_t deadline, struct ctl_sess *s,
                  const char **why)
{
    ctl_sess_clear(s);
    if (keys == NULL || keys->count == 0)
        return 0;
    uint8_t nonce_d[CTL_NONCE_BYTES], nonce_a[CTL_NONCE_BYTES], proof[CTL_PROOF_BYTES];
    randombytes_buf(nonce_d, sizeof nonce_d);
    int rc = ctl_auth_io(fd, nonce_d, sizeof nonce_d, 1, deadline, why);
    if (rc == 0)
        rc = ctl_auth_io(fd, nonce_a, sizeof nonce_a, 0, deadline, why);
    if (rc == 0) {
        ctl_auth_proof(keys->key[0], CTL_ROLE_DIALER, nonce_d, nonce_a, proof);
        rc = ctl_auth_io(fd, proof, sizeof proof, 1, deadline, why);
    }
    if (rc == 0)
        rc = ctl_auth_io(fd, proof, sizeof proof, 0, deadline, why);
    if (rc != 0)
        return rc;
    struct ctl_keyring mine = {.count = 1};
    memcpy(mine.key[0], keys->key[0], CTL_KEY_BYTES);
    int k = ctl_auth_verify(&mine, CTL_ROLE_ACCEPTOR, nonce_d, nonce_a, proof);
    ctl_keyring_clear(&mine);
    if (k < 0) {
        *why = "the peer's proof of the group key is wrong (it holds another key)";
        return SPINDLE_EAUTH;
    }
    ctl_sess_derive(s, keys->key[0], CTL_ROLE_DIALER, nonce_d, nonce_a);
    return 0;
}

void ctl_auth_nonce(uint8_t nonce[CTL_NONCE_BYTES])
{
    randombytes_buf(nonce, CTL_NONCE_BYTES);
}

int ctl_auth_answer(const struct ctl_keyring *keys, const uint8_t nonce_d[CTL_NONCE_BYTES],
                    const uint8_t nonce_a[CTL_NONCE_BYTES], const uint8_t proof_d[CTL_PROOF_BYTES],
                    uint8_t proof_a[CTL_PROOF_BYTES], struct ctl_sess *s, const char **why)
{
    /* Nothing but the nonce has left until the dialer proved the key. */
    int k = ctl_auth_verify(keys, CTL_ROLE_DIALER, nonce_d, nonce_a, proof_d);
    if (k < 0) {
        *why = "the peer's proof of the group key is wrong (another key, or none)";
        return SPINDLE_EAUTH;
    }
    ctl_auth_proof(keys->key[k], CTL_ROLE_ACCEPTOR, nonce_d, nonce_a, proof_a);
    ctl_sess_derive(s, keys->key[k], CTL_ROLE_ACCEPTOR, nonce_d, nonce_a);
    return 0;
}

/* The channel accepts through the steps alone (ctl_tcp_accept.c); this
 * blocking form is the acceptor's end of the handshake tests. */
// cppcheck-suppress unusedFunction
int ctl_auth_accept(int fd, const struct ctl_keyring *keys, uint64_t deadline, struct ctl_sess *s,
                    const char **why)
{
    ctl_sess_clear(s);
    if (keys == NULL || keys->count == 0)
        return 0;
    uint8_t nonce_d[CTL_NONCE_BYTES], nonce_a[CTL_NONCE_BYTES], proof[CTL_PROOF_BYTES];
    ctl_auth_nonce(nonce_a);
    int rc = ctl_auth_io(fd, nonce_d, sizeof nonce_d, 0, deadline, why);
    if (rc == 0)
        rc = ctl_auth_io(fd, nonce_a, sizeof nonce_a, 1, deadline, why);
    if (rc == 0)
        rc = ctl_auth_io(fd, proof, sizeof proof, 0, deadline, why);
    if (rc == 0)
        rc = ctl_auth_answer(keys, nonce_d, nonce_a, proof, proof, s, why);
    if (rc == 0)
        rc = ctl_auth_io(fd, proof, sizeof proof, 1, deadline, why);
    if (rc != 0)
        ctl_sess_clear(s);
    return rc;
}

size_t ctl_sess_sealed_size(const struct ctl_sess *s, size_t len)
{
    return s->keyed ? CTL_SEAL_HEADER + len + CTL_SEAL_TAG : len;
}

static void ctl_seal_nonce(uint64_t seq,
                           uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES])
{
    memset(nonce, 0, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
    for (int i = 0; i < 8; i++)
        nonce[i] = (uint8_t)(seq >> (8 * i));
}

void ctl_sess_seal(struct ctl_sess *s, const void *in, size_t len, uint8_t *out)
{
    if (!s->keyed) {
        memcpy(out, in, len);
        return;
    }
    uint32_t length = (uint32_t)(len + CTL_SEAL_TAG);
    for (int i = 0; i < 4; i++)
        out[i] = (uint8_t)(length >> (8 * i));
    for (int i = 0; i < 8; i++)
        out[4 + i] = (uint8_t)(s->tx_seq >> (8 * i));
    uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
    ctl_seal_nonce(s->tx_seq, nonce);
    crypto_aead_xchacha20poly1305_ietf_encrypt(out + CTL_SEAL_HEADER, NULL, in, len, out,
                                               CTL_SEAL_HEADER, NULL, nonce, s->tx_key);
    s->tx_seq++;
}

int ctl_sess_check_header(struct ctl_sess *s, const uint8_t header[CTL_SEAL_HEADER],
                          uint32_t *length)
{
    uint32_t len = 0;
    uint64_t seq = 0;
    for (int i = 0; i < 4; i++)
        len |= (uint32_t)header[i] << (8 * i);
    for (int i = 0; i < 8; i++)
        seq |= (uint64_t)header[4 + i] << (8 * i);
    if (seq != s->rx_seq)
        snprintf(s->why, sizeof s->why,
                 "a record out of sequence (counter %llu, expected %llu): replayed, reordered, "
                 "dropped or altered",
                 (unsigned long long)seq, (unsigned long long)s->rx_seq);
    else if (len < CTL_SEAL_TAG || len > (s->rec_max ? s->rec_max : CTL_SEAL_MAX))
        snprintf(s->why, sizeof s->why, "a record of %u bytes (%u..%u)", len, CTL_SEAL_TAG,
                 s->rec_max ? s->rec_max : CTL_SEAL_MAX);
    else {
        *length = len;
        return 0;
    }
    return SPINDLE_EPROTO;
}

int ctl_sess_open(struct ctl_sess *s, const uint8_t header[CTL_SEAL_HEADER], const uint8_t *cipher,
                  uint32_t length, uint8_t *plain)
{
    uint32_t expected;
    if (ctl_sess_check_header(s, header, &expected) != 0)
        return SPINDLE_EPROTO;
    uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
    ctl_seal_nonce(s->rx_seq, nonce);
    if (expected != length ||
        crypto_aead_xchacha20poly1305_ietf_decrypt(plain, NULL, NULL, cipher, length, header,
                                                   CTL_SEAL_HEADER, nonce, s->rx_key) != 0) {
        snprintf(s->why, sizeof s->why,
                 "record %llu failed authentication: altered, or sealed with another key",
                 (unsigned long long)s->rx_seq);
        return SPINDLE_EPROTO;
    }
    s->rx_seq++;
    return 0;
}

/* Reads raw bytes of the current record without blocking: 1 when it is
 * complete, 0 for EAGAIN, or recv's 0 / -1. */
static ssize_t ctl_sess_fill(struct ctl_sess *s, int fd)
{
    for (;;) {
        uint8_t *dst;
        size_t want;
        if (s->rec_got < CTL_SEAL_HEADER) {
            dst = s->rec_header + s->rec_got;
            want = CTL_SEAL_HEADER - s->rec_got;
        } else {
            dst = s->rec + (s->rec_got - CTL_SEAL_HEADER);
            want = CTL_SEAL_HEADER + s->rec_len - s->rec_got;
        }
        if (want == 0)
            return 1;
        ssize_t n = recv(fd, dst, want, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return errno == EINTR ? -1 : 0;
        if (n <= 0)
            return n == 0 ? -3 : -1;
        s->rec_got += (size_t)n;
        if (s->rec_got == CTL_SEAL_HEADER) {
            if (ctl_sess_check_header(s, s->rec_header, &s->rec_len) != 0)
                return CTL_SESS_REFUSED;
            s->rec = malloc(s->rec_len);
            if (s->rec == NULL) {
                snprintf(s->why, sizeof s->why, "no memory for a record of %u bytes", s->rec_len);
                return CTL_SESS_REFUSED;
            }
        }
    }
}

ssize_t ctl_sess_recv(struct ctl_sess *s, int fd, void *buf, size_t len)
{
    if (!s->keyed)
        return recv(fd, buf, len, MSG_DONTWAIT);
    if (s->plain_off == s->plain_len) {
        ssize_t got = ctl_sess_fill(s, fd);
        if (got == 0) {
            errno = EAGAIN;
            return -1;
        }
        if (got == -3)
            return 0;
        if (got < 0)
            return got;
        /* Decrypted in place: the plaintext is the record's first bytes. */
        if (ctl_sess_open(s, s->rec_header, s->rec, s->rec_len, s->rec) != 0)
            return CTL_SESS_REFUSED;
        s->plain_off = 0;
        s->plain_len = s->rec_len - CTL_SEAL_TAG;
        s->rec_got = 0;
        if (s->plain_len == 0) {
            free(s->rec);
            s->rec = NULL;
            errno = EAGAIN;
            return -1;
        }
    }
    size_t n = s->plain_len - s->plain_off < len ? s->plain_len - s->plain_off : len;
    memcpy(buf, s->rec + s->plain_off, n);
    s->plain_off += n;
    if (s->plain_off == s->plain_len) {
        free(s->rec);
        s->rec = NULL;
        s->plain_off = s->plain_len = 0;
    }
    return (ssize_t)n;
}

int ctl_sess_read(struct ctl_sess *s, int fd, void *buf, size_t len, uint64_t deadline)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = ctl_sess_recv(s, fd, p, len);
        if (n == CTL_SESS_REFUSED)
            return SPINDLE_EPROTO;
        if (n == 0)
            return SPINDLE_EUNREACH;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return SPINDLE_EUNREACH;
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        struct pollfd pfd = {fd, POLLIN, 0};
        int ms = ctl_remaining_ms(deadline);
        if (ms == 0 || poll(&pfd, 1, ms) <= 0)
            return SPINDLE_ETIMEDOUT;
    }
    return 0;
}

int ctl_sess_write(struct ctl_sess *s, int fd, const void *buf, size_t len, uint64_t deadline)
{
    if (!s->keyed)
        return ctl_io(fd, (void *)buf, len, 1, deadline);
    size_t size = ctl_sess_sealed_size(s, len);
    uint8_t *sealed = malloc(size);
    if (sealed == NULL)
        return sp_error(SPINDLE_ENOMEM, "control: no memory to seal %zu bytes", len);
    ctl_sess_seal(s, buf, len, sealed);
    int rc = ctl_io(fd, sealed, size, 1, deadline);
    free(sealed);
    return rc;
}

void ctl_sess_clear(struct ctl_sess *s)
{
    free(s->rec);
    sodium_memzero(s, sizeof *s);
}
