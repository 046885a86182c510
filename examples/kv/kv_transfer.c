/* spindle-kv's shard state transfer on the wire (kv_transfer.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_le.h"
#include "kv_transfer.h"

#define QUERY_MAGIC 0x3151564bu /* "KVQ1", little-endian */
#define REPLY_MAGIC 0x3152564bu /* "KVR1" */
#define STATE_MAGIC 0x3153564bu /* "KVS1" */

#define FAILF(...) (snprintf(error, error_size, __VA_ARGS__), -1)

void kv_query_encode(struct kv_buf *out, const struct kv_query *query)
{
    kv_put_u32(out, QUERY_MAGIC);
    kv_put_u32(out, 0);
    kv_put_u64(out, query->token);
    kv_put_u64(out, query->offset);
}

int kv_query_decode(const void *data, size_t len, struct kv_query *query, char *error,
                    size_t error_size)
{
    const unsigned char *p = data;
    if (len != KV_QUERY_BYTES)
        return FAILF("state query of %zu bytes (a query has %u)", len, KV_QUERY_BYTES);
    if (kv_get_u32(p) != QUERY_MAGIC)
        return FAILF("state query magic %08" PRIx32 " is not %08x", kv_get_u32(p), QUERY_MAGIC);
    if (kv_get_u32(p + 4) != 0)
        return FAILF("state query reserved word %08" PRIx32 " is not zero", kv_get_u32(p + 4));
    query->token = kv_get_u64(p + 8);
    query->offset = kv_get_u64(p + 16);
    if (query->offset > KV_MAX_STATE_BYTES)
        return FAILF("state query offset %" PRIu64 " is past the largest state (%llu bytes)",
                     query->offset, (unsigned long long)KV_MAX_STATE_BYTES);
    return 0;
}

void kv_reply_encode(struct kv_buf *out, const struct kv_reply *reply)
{
    kv_put_u32(out, REPLY_MAGIC);
    kv_put_u32(out, reply->status);
    kv_put_u64(out, reply->total);
    kv_put_u64(out, reply->offset);
    kv_buf_append(out, reply->chunk, reply->chunk_len);
}

int kv_reply_decode(const void *data, size_t len, uint64_t offset, struct kv_reply *reply,
                    char *error, size_t error_size)
{
    const unsigned char *p = data;
    if (len < KV_REPLY_HEADER)
        return FAILF("state reply of %zu bytes is shorter than its %u-byte header", len,
                     KV_REPLY_HEADER);
    if (kv_get_u32(p) != REPLY_MAGIC)
        return FAILF("state reply magic %08" PRIx32 " is not %08x", kv_get_u32(p), REPLY_MAGIC);
    reply->status = kv_get_u32(p + 4);
    reply->total = kv_get_u64(p + 8);
    reply->offset = kv_get_u64(p + 16);
    reply->chunk = p + KV_REPLY_HEADER;
    reply->chunk_len = len - KV_REPLY_HEADER;
    if (reply->status == KV_REPLY_NOT_HERE) {
        if (reply->total != 0 || reply->offset != 0 || reply->chunk_len != 0)
            return FAILF("state reply 'not here' carries a state (total %" PRIu64
                         ", offset %" PRIu64 ", %zu bytes)",
                         reply->total, reply->offset, reply->chunk_len);
        return 0;
    }
    if (reply->status != KV_REPLY_CHUNK)
        return FAILF("state reply status %" PRIu32 " is unknown", reply->status);
    if (reply->total > KV_MAX_STATE_BYTES)
        return FAILF("state of %" PRIu64 " bytes is larger than %llu", reply->total,
                     (unsigned long long)KV_MAX_STATE_BYTES);
    if (reply->offset != offset)
        return FAILF("state chunk at offset %" PRIu64 " answers a query for offset %" PRIu64,
                     reply->offset, offset);
    if (reply->offset > reply->total || reply->chunk_len > reply->total - reply->offset)
        return FAILF("state chunk of %zu bytes at offset %" PRIu64 " runs past the state's %" PRIu64
                     " bytes",
                     reply->chunk_len, reply->offset, reply->total);
    if (reply->chunk_len == 0 && reply->offset < reply->total)
        return FAILF("empty state chunk at offset %" PRIu64 " of %" PRIu64, reply->offset,
                     reply->total);
    return 0;
}

void kv_state_header_encode(struct kv_buf *out, uint32_t shard)
{
    kv_put_u32(out, STATE_MAGIC);
    kv_put_u32(out, shard);
}

int kv_state_header_decode(const void *state, size_t len, uint32_t *shard, char *error,
                           size_t error_size)
{
    const unsigned char *p = state;
    if (len < KV_STATE_HEADER)
        return FAILF("state of %zu bytes is shorter than its %u-byte header", len, KV_STATE_HEADER);
    if (kv_get_u32(p) != STATE_MAGIC)
        return FAILF("state magic %08" PRIx32 " is not %08x", kv_get_u32(p), STATE_MAGIC);
    *shard = kv_get_u32(p + 4);
    return 0;
}

static bool host_char(char c)
{
    return c > ' ' && c < 0x7f && c != '@' && c != ':';
}

bool kv_member_name_format(char *name, size_t size, uint32_t shard, const char *host, unsigned port)
{
    size_t host_len = strlen(host);
    if (host_len == 0 || host_len > KV_HOST_MAX || port == 0 || port > 65535)
        return false;
    for (size_t i = 0; i < host_len; i++)
        if (!host_char(host[i]))
            return false;
    int n = snprintf(name, size, "shard%" PRIu32 "@%s:%u", shard, host, port);
    return n > 0 && (size_t)n < size;
}

/* A decimal number of 1..digits digits at *text, at most max. */
static bool parse_number(const char **text, unsigned digits, uint64_t max, uint64_t *value)
{
    const char *p = *text;
    uint64_t v = 0;
    unsigned n = 0;
    while (*p >= '0' && *p <= '9' && n < digits) {
        v = v * 10 + (uint64_t)(*p - '0');
        p++;
        n++;
    }
    if (n == 0 || v > max)
        return false;
    *text = p;
    *value = v;
    return true;
}

bool kv_member_name_parse(const char *name, uint32_t num_shards, uint32_t *shard,
                          char host[KV_HOST_MAX + 1], unsigned *port)
{
    uint64_t s, p;
    if (strncmp(name, "shard", 5) != 0)
        return false;
    const char *at = name + 5;
    if (!parse_number(&at, 4, UINT32_MAX, &s) || s >= num_shards || *at != '@')
        return false;
    const char *host_start = ++at;
    while (host_char(*at))
        at++;
    size_t host_len = (size_t)(at - host_start);
    if (host_len == 0 || host_len > KV_HOST_MAX || *at != ':')
        return false;
    at++;
    if (!parse_number(&at, 5, 65535, &p) || p == 0 || *at != '\0')
        return false;
    memcpy(host, host_start, host_len);
    host[host_len] = '\0';
    *shard = (uint32_t)s;
    *port = (unsigned)p;
    return true;
}
