/*
 * libfabric backend: connection set-up authenticated with the group key
 * (docs/SECURITY.md, "fabric backend").
 *
 * A request's body names the connector (member id, endpoint nonce), the
 * listener it means (the listener's random endpoint nonce, learnt from its
 * address descriptor) and a fresh random request nonce; its MAC proves the
 * connector holds a group key, and binds the request to that one listener.
 * The listener refuses a request whose (member, request nonce) it already
 * accepted, so a request seen on the network cannot be replayed. The
 * accept's MAC covers the accept and the whole request it answers, so the
 * connector knows which listener gave it the landing ring. With the
 * view's member ids given (tp_set_members), a request claiming another id
 * is refused, key or not (fabric_conn.c).
 *
 * The MAC is crypto_auth (HMAC-SHA-512-256) with a subkey of the group key
 * (crypto_kdf, context "spfabric"): the control channel's key is never used
 * for a second purpose.
 */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "transport/fabric/fabric_impl.h"
#include "util/error.h"

#define FAB_KDF_CONTEXT "spfabric"
#define FAB_KDF_ID      1u

_Static_assert(FAB_MAC_BYTES == crypto_auth_BYTES, "fabric MAC is a crypto_auth tag");
_Static_assert(FAB_MAC_BYTES == crypto_auth_KEYBYTES, "fabric subkey is a crypto_auth key");
_Static_assert(TP_KEY_BYTES == crypto_kdf_KEYBYTES, "a group key is a KDF master key");
_Static_assert(sizeof FAB_KDF_CONTEXT - 1 == crypto_kdf_CONTEXTBYTES, "KDF context length");

int fab_auth_init(struct fab_ep *ep, const struct tp_config *config)
{
    ep->num_auth_keys = 0;
    if (config->key_count == 0 || config->keys == NULL)
        return 0;
    if (config->key_count > FAB_KEYS_MAX)
        return sp_error(SPINDLE_EINVAL, "fabric: %u group keys given, at most %u",
                        config->key_count, FAB_KEYS_MAX);
    if (sodium_init() < 0)
        return sp_error(SPINDLE_EIO, "fabric: libsodium cannot start");
    for (uint32_t i = 0; i < config->key_count; i++)
        crypto_kdf_derive_from_key(ep->auth_keys[i], FAB_MAC_BYTES, FAB_KDF_ID, FAB_KDF_CONTEXT,
                                   config->keys[i]);
    ep->num_auth_keys = config->key_count;
    return 0;
}

void fab_auth_clear(struct fab_ep *ep)
{
    sodium_memzero(ep->auth_keys, sizeof ep->auth_keys);
    ep->num_auth_keys = 0;
}

int fab_set_keys(struct tp_endpoint *tep, const uint8_t (*keys)[TP_KEY_BYTES], uint32_t key_count)
{
    if (tep == NULL || keys == NULL)
        return sp_error(SPINDLE_EINVAL, "fabric set_keys: null argument");
    if (key_count == 0 || key_count > FAB_KEYS_MAX)
        return sp_error(SPINDLE_EINVAL, "fabric set_keys: %u group keys given, 1..%u", key_count,
                        FAB_KEYS_MAX);
    struct fab_ep *ep = fab_ep_of(tep);
    uint8_t derived[FAB_KEYS_MAX][FAB_MAC_BYTES];
    for (uint32_t i = 0; i < key_count; i++)
        crypto_kdf_derive_from_key(derived[i], FAB_MAC_BYTES, FAB_KDF_ID, FAB_KDF_CONTEXT, keys[i]);
    int rc = 0;
    pthread_mutex_lock(&ep->auth_lock);
    if (ep->num_auth_keys == 0) {
        rc = sp_error(SPINDLE_EINVAL, "fabric set_keys: the endpoint was opened without a group "
                                      "key; a key cannot be added to it");
    } else {
        sodium_memzero(ep->auth_keys, sizeof ep->auth_keys);
        memcpy(ep->auth_keys, derived, key_count * sizeof derived[0]);
        ep->num_auth_keys = key_count;
    }
    pthread_mutex_unlock(&ep->auth_lock);
    sodium_memzero(derived, sizeof derived);
    return rc;
}

int fab_set_members(struct tp_endpoint *tep, const uint32_t *ids, uint32_t count)
{
    if (tep == NULL || ids == NULL || count == 0)
        return sp_error(SPINDLE_EINVAL, "fabric set_members: no member ids given");
    uint32_t *copy = malloc((size_t)count * sizeof *copy);
    if (copy == NULL)
        return sp_error(SPINDLE_ENOMEM, "fabric set_members: out of memory for %u ids", count);
    memcpy(copy, ids, (size_t)count * sizeof *copy);
    struct fab_ep *ep = fab_ep_of(tep);
    pthread_mutex_lock(&ep->auth_lock);
    uint32_t *old = ep->members;
    ep->members = copy;
    ep->num_members = count;
    pthread_mutex_unlock(&ep->auth_lock);
    free(old);
    return 0;
}

bool fab_member_admitted(struct fab_ep *ep, uint32_t id)
{
    pthread_mutex_lock(&ep->auth_lock);
    bool admitted = ep->members == NULL;
    for (uint32_t i = 0; i < ep->num_members && !admitted; i++)
        admitted = ep->members[i] == id;
    pthread_mutex_unlock(&ep->auth_lock);
    return admitted;
}

uint32_t fab_auth_snapshot(struct fab_ep *ep, uint8_t out[FAB_KEYS_MAX][FAB_MAC_BYTES])
{
    pthread_mutex_lock(&ep->auth_lock);
    uint32_t count = ep->num_auth_keys;
    memcpy(out, ep->auth_keys, count * sizeof ep->auth_keys[0]);
    pthread_mutex_unlock(&ep->auth_lock);
    return count;
}

void fab_auth_wipe(void *bytes, size_t len)
{
    sodium_memzero(bytes, len);
}

void fab_req_seal(const uint8_t key[FAB_MAC_BYTES], uint8_t wire[FAB_REQ_WIRE])
{
    crypto_auth(wire + FAB_REQ_BODY, wire, FAB_REQ_BODY, key);
}

int fab_req_check(const uint8_t (*keys)[FAB_MAC_BYTES], uint32_t num_keys,
                  const uint8_t wire[FAB_REQ_WIRE])
{
    for (uint32_t i = 0; i < num_keys; i++)
        if (crypto_auth_verify(wire + FAB_REQ_BODY, wire, FAB_REQ_BODY, keys[i]) == 0)
            return (int)i;
    return sp_error(SPINDLE_EAUTH, "fabric connection request: MAC does not match the group key");
}

/* The accept's MAC input: its body, then the request it answers. */
static void fab_acc_input(const uint8_t req_wire[FAB_REQ_WIRE],
                          const uint8_t acc_wire[FAB_ACC_WIRE],
                          uint8_t out[FAB_ACC_BODY + FAB_REQ_WIRE])
{
    memcpy(out, acc_wire, FAB_ACC_BODY);
    memcpy(out + FAB_ACC_BODY, req_wire, FAB_REQ_WIRE);
}

void fab_acc_seal(const uint8_t key[FAB_MAC_BYTES], const uint8_t req_wire[FAB_REQ_WIRE],
                  uint8_t acc_wire[FAB_ACC_WIRE])
{
    uint8_t input[FAB_ACC_BODY + FAB_REQ_WIRE];
    fab_acc_input(req_wire, acc_wire, input);
    crypto_auth(acc_wire + FAB_ACC_BODY, input, sizeof input, key);
}

int fab_acc_check(const uint8_t key[FAB_MAC_BYTES], const uint8_t req_wire[FAB_REQ_WIRE],
                  const uint8_t acc_wire[FAB_ACC_WIRE])
{
    uint8_t input[FAB_ACC_BODY + FAB_REQ_WIRE];
    fab_acc_input(req_wire, acc_wire, input);
    if (crypto_auth_verify(acc_wire + FAB_ACC_BODY, input, sizeof input, key) != 0)
        return sp_error(SPINDLE_EAUTH,
                        "fabric accept: MAC does not match the group key and our request "
                        "(a listener without the key, or not the one we asked)");
    return 0;
}
