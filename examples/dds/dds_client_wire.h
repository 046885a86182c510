/*
 * The external client protocol of spindle_dds (docs/DDS.md "External
 * clients"): length-prefixed frames over TCP between a client that is not
 * a group member and a participant's listener, and the group-key proofs
 * of its handshake.
 *
 * A frame is u32 length (little-endian, the bytes after it: 1 ..
 * DDS_CLIENT_MAX_FRAME), then u8 type and the type's body. Every decoder
 * input comes from another process: dds_client_frame_decode checks each
 * field and each length before anything uses it (fuzz_dds_client_frame).
 * Stateless; thread-safe.
 */
#ifndef SPINDLE_DDS_CLIENT_WIRE_H
#define SPINDLE_DDS_CLIENT_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spindle_dds.h"

#define DDS_CLIENT_MAGIC   0x43434453u /* "SDCC" */
#define DDS_CLIENT_VERSION 1u
#define DDS_CLIENT_NONCE   32u
#define DDS_CLIENT_PROOF   32u /* HMAC-SHA512-256 */
#define DDS_CLIENT_KEY     32u /* a group key file's bytes (docs/SECURITY.md) */
#define DDS_CLIENT_TEXT    1024u
/* A frame's bytes on the wire, its length field, its fields and its seal
 * (dds_client_seal.h) included, are at most 4 + DDS_CLIENT_FRAME_MARGIN +
 * its data. */
#define DDS_CLIENT_FRAME_MARGIN 128u
/* The largest frame after its length field: a sample of the largest size
 * with its fields, sealed or not. */
#define DDS_CLIENT_MAX_FRAME (SPINDLE_DDS_MAX_SAMPLE + DDS_CLIENT_FRAME_MARGIN)
/* Bytes before a SAMPLE frame's data: length, type, topic, flags, writer,
 * seq, time, data length. */
#define DDS_CLIENT_SAMPLE_OVERHEAD (4u + 1u + 2u + 1u + 4u + 8u + 8u + 4u)

enum dds_client_type {
    DDS_CLIENT_WELCOME = 1,    /* member: magic, version, keyed, nonce */
    DDS_CLIENT_HELLO = 2,      /* client: magic, version, nonce, proof */
    DDS_CLIENT_READY = 3,      /* member: its participant id, proof */
    DDS_CLIENT_SUBSCRIBE = 4,  /* client: flags (history), topic name */
    DDS_CLIENT_SUBSCRIBED = 5, /* member: topic, qos, name */
    DDS_CLIENT_PUBLISH = 6,    /* client: topic name, bytes */
    DDS_CLIENT_PUBLISHED = 7,  /* member: topic, writer, seq */
    DDS_CLIENT_SAMPLE = 8,     /* member: topic, flags, writer, seq, time, bytes */
    DDS_CLIENT_ERROR = 9,      /* either: code, text */
};

#define DDS_CLIENT_FLAG_HISTORY 1u /* SUBSCRIBE: the member's history first; SAMPLE: from it */

/* One decoded frame; pointers point into the decoded bytes. */
struct dds_client_frame {
    uint8_t type;
    uint8_t flags;                   /* SUBSCRIBE, SAMPLE; WELCOME: 1 when keyed */
    uint16_t topic;                  /* SUBSCRIBED, PUBLISHED, SAMPLE */
    uint8_t qos;                     /* SUBSCRIBED */
    uint32_t id;                     /* READY: member id; PUBLISHED, SAMPLE: writer */
    uint64_t seq;                    /* PUBLISHED, SAMPLE: > 0 */
    uint64_t time_ns;                /* SAMPLE */
    int32_t code;                    /* ERROR: a negative SPINDLE_E* */
    const uint8_t *nonce;            /* WELCOME, HELLO */
    const uint8_t *proof;            /* HELLO, READY */
    char name[SPINDLE_DDS_NAME_MAX]; /* SUBSCRIBE, SUBSCRIBED, PUBLISH */
    const uint8_t *data;             /* PUBLISH, SAMPLE: bytes; ERROR: text (no NUL) */
    uint32_t length;
};

/* Decodes one frame's bytes after its length field (size of them). 0, or
 * SPINDLE_EPROTO naming the frame and the field that is wrong. */
int dds_client_frame_decode(const uint8_t *bytes, size_t size, struct dds_client_frame *frame);
/* Encodes frame with its length field into out (capacity bytes): the bytes
 * written, or 0 when it does not fit. */
size_t dds_client_frame_encode(uint8_t *out, size_t capacity, const struct dds_client_frame *frame);
/* The length field of a frame's first 4 bytes: 0 when it is out of
 * 1..DDS_CLIENT_MAX_FRAME (the stream is then unusable). */
uint32_t dds_client_frame_length(const uint8_t *prefix);

/* proof = HMAC-SHA512-256(key, "spindle-dds-client" role nonce_m nonce_c),
 * role 'C' (client) or 'M' (member). */
void dds_client_proof(const uint8_t key[DDS_CLIENT_KEY], char role,
                      const uint8_t nonce_m[DDS_CLIENT_NONCE],
                      const uint8_t nonce_c[DDS_CLIENT_NONCE], uint8_t proof[DDS_CLIENT_PROOF]);
/* Whether proof is key's for role (constant time). */
bool dds_client_proof_ok(const uint8_t key[DDS_CLIENT_KEY], char role,
                         const uint8_t nonce_m[DDS_CLIENT_NONCE],
                         const uint8_t nonce_c[DDS_CLIENT_NONCE],
                         const uint8_t proof[DDS_CLIENT_PROOF]);
/* Reads a group key file (32 bytes, mode 0600, no symlink: docs/SECURITY.md).
 * 0, or SPINDLE_EINVAL / SPINDLE_ENOENT / SPINDLE_EIO naming the file and
 * what is wrong with it. */
int dds_client_key_load(const char *path, uint8_t key[DDS_CLIENT_KEY]);
/* Fills bytes with random bytes (libsodium). 0, or SPINDLE_EIO. */
int dds_client_random(uint8_t *bytes, size_t size);

#endif
