/*
 * spindle-kv's shard state transfer on the wire (docs/KV.md "Joining a
 * shard"), and the member names that say which shard a replica serves.
 *
 * A replica's member name is "shard<S>@<host>:<port>": its shard and where
 * clients reach its RESP listener. The layout function places members by
 * it, and -MOVED and CLUSTER SLOTS name replicas by it, so a joiner serves
 * the shard it asked for and is found by clients.
 *
 * A joiner of a service of several shards takes its shard's state from a
 * replica of the shard over point-to-point queries: each
 * query asks for the bytes of one state (named by the joiner's token) from
 * an offset on, and each reply carries the next chunk. The state a member
 * hands over (state_save, or a donor's chunks) starts with a header naming
 * its shard.
 *
 * Everything here is pure and checks every length and value it is given:
 * these bytes come from other processes.
 */
#ifndef KV_TRANSFER_H
#define KV_TRANSFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv_resp.h"

/* Bytes of a query, and of a reply before its chunk. */
#define KV_QUERY_BYTES  24u
#define KV_REPLY_HEADER 24u
#define KV_STATE_HEADER 8u
/* Largest state a joiner accepts (bytes). */
#define KV_MAX_STATE_BYTES (1ull << 32)

/* Reply statuses. */
enum kv_reply_status {
    KV_REPLY_CHUNK = 0,    /* a chunk of the state */
    KV_REPLY_NOT_HERE = 1, /* this replica holds no state for the token: ask another */
};

struct kv_query {
    uint64_t token;
    uint64_t offset;
};

struct kv_reply {
    uint32_t status;   /* enum kv_reply_status */
    uint64_t total;    /* the state's length */
    uint64_t offset;   /* of the chunk */
    const void *chunk; /* points into the reply */
    size_t chunk_len;
};

void kv_query_encode(struct kv_buf *out, const struct kv_query *query);
/* 0, or -1 with a message in error naming what was wrong. */
int kv_query_decode(const void *data, size_t len, struct kv_query *query, char *error,
                    size_t error_size);

void kv_reply_encode(struct kv_buf *out, const struct kv_reply *reply);
/* Decodes a reply to a query for offset: a chunk must start there and end
 * within its total (at most KV_MAX_STATE_BYTES), and be non-empty unless
 * the state ends at offset. 0, or -1 with a message. */
int kv_reply_decode(const void *data, size_t len, uint64_t offset, struct kv_reply *reply,
                    char *error, size_t error_size);

/* The shard of a state_save of a service of several shards: no store
 * follows (the joiner takes its shard's from a replica of it). */
#define KV_NO_SHARD UINT32_MAX

/* The header of a handed-over state: appended to out. */
void kv_state_header_encode(struct kv_buf *out, uint32_t shard);
/* Reads the header of state[0..len); the snapshot follows at
 * KV_STATE_HEADER. 0, or -1 with a message. */
int kv_state_header_decode(const void *state, size_t len, uint32_t *shard, char *error,
                           size_t error_size);

/* Longest host in a member name. */
#define KV_HOST_MAX 48u

/* Writes "shard<S>@<host>:<port>" into name (size bytes). false when it
 * does not fit or host is not printable ASCII without spaces, '@' or ':'. */
bool kv_member_name_format(char *name, size_t size, uint32_t shard, const char *host,
                           unsigned port);
/* Parses a member name; false when it is not one spindle-kv gives (shard
 * not below num_shards, port not 1..65535, host empty or too long). */
bool kv_member_name_parse(const char *name, uint32_t num_shards, uint32_t *shard,
                          char host[KV_HOST_MAX + 1], unsigned *port);

#endif
