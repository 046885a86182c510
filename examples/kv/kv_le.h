/*
 * Little-endian fields of spindle-kv's byte layouts (operations, snapshots,
 * the state transfer's queries and replies): appended to a kv_buf, or read
 * from bytes whose length the caller has checked.
 */
#ifndef KV_LE_H
#define KV_LE_H

#include <stdint.h>

#include "kv_resp.h"

static inline void kv_put_u32(struct kv_buf *out, uint32_t v)
{
    unsigned char b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    kv_buf_append(out, b, 4);
}

static inline void kv_put_u64(struct kv_buf *out, uint64_t v)
{
    kv_put_u32(out, (uint32_t)v);
    kv_put_u32(out, (uint32_t)(v >> 32));
}

static inline uint32_t kv_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t kv_get_u64(const unsigned char *p)
{
    return (uint64_t)kv_get_u32(p) | (uint64_t)kv_get_u32(p + 4) << 32;
}

#endif
