/*
 * Bounds-checked little-endian reader and writer shared by the control-
 * channel codec (wire.c, wire_view.c). Internal to src/view.
 *
 * The reader never touches a byte at or past len. Its first failure is
 * sticky: rc becomes SPINDLE_EPROTO with a message naming the field and
 * the offset, later reads return 0 and leave the message alone, so a
 * decoder may read a group of fields and check rc once before acting on
 * them. The writer counts every byte it is asked to write but stores only
 * those that fit in cap, so one pass yields the frame size even when the
 * buffer is too small. Neither is thread-safe; each lives on one stack.
 */
#ifndef SP_VIEW_WIRE_CODEC_H
#define SP_VIEW_WIRE_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/error.h"
#include "view/wire.h"

struct wire_reader {
    const uint8_t *buf;
    size_t len;
    size_t pos;
    int rc;
};

struct wire_writer {
    uint8_t *buf;
    size_t cap;
    size_t pos;
};

/* True when n more bytes are available; records the failure otherwise. */
static inline int wire_need(struct wire_reader *r, size_t n, const char *field)
{
    if (r->rc < 0)
        return 0;
    if (r->len - r->pos >= n)
        return 1;
    r->rc = sp_error(SPINDLE_EPROTO, "truncated %s: need %zu bytes at offset %zu, %zu left", field,
                     n, r->pos, r->len - r->pos);
    return 0;
}

static inline size_t wire_left(const struct wire_reader *r)
{
    return r->rc < 0 ? 0 : r->len - r->pos;
}

static inline uint64_t wire_get(struct wire_reader *r, unsigned bytes, const char *field)
{
    if (!wire_need(r, bytes, field))
        return 0;
    uint64_t value = 0;
    for (unsigned i = 0; i < bytes; i++)
        value |= (uint64_t)r->buf[r->pos + i] << (8 * i);
    r->pos += bytes;
    return value;
}

static inline uint16_t wire_get_u16(struct wire_reader *r, const char *field)
{
    return (uint16_t)wire_get(r, 2, field);
}

static inline uint32_t wire_get_u32(struct wire_reader *r, const char *field)
{
    return (uint32_t)wire_get(r, 4, field);
}

static inline uint64_t wire_get_u64(struct wire_reader *r, const char *field)
{
    return wire_get(r, 8, field);
}

/* Reads a reserved u32 that must be zero. */
static inline void wire_get_zero32(struct wire_reader *r, const char *field)
{
    size_t at = r->pos;
    uint32_t value = wire_get_u32(r, field);
    if (r->rc == 0 && value != 0)
        r->rc = sp_error(SPINDLE_EPROTO, "%s at offset %zu must be 0, is %u", field, at, value);
}

/* Copies n bytes out; returns a pointer to them inside buf (or NULL). */
static inline const uint8_t *wire_get_bytes(struct wire_reader *r, size_t n, const char *field)
{
    if (!wire_need(r, n, field))
        return NULL;
    const uint8_t *at = r->buf + r->pos;
    r->pos += n;
    return at;
}

/* Records a semantic violation (if none is recorded yet). */
static inline void wire_fail(struct wire_reader *r, int rc)
{
    if (r->rc == 0)
        r->rc = rc;
}

static inline void wire_put(struct wire_writer *w, uint64_t value, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++, w->pos++)
        if (w->pos < w->cap)
            w->buf[w->pos] = (uint8_t)(value >> (8 * i));
}

static inline void wire_put_bytes(struct wire_writer *w, const void *data, size_t n)
{
    if (w->pos < w->cap) {
        size_t room = w->cap - w->pos;
        memcpy(w->buf + w->pos, data, n < room ? n : room);
    }
    w->pos += n;
}

/* View descriptors, members and trim reports (wire_view.c). */
int wire_encode_member(struct wire_writer *w, const struct view_member *member);
void wire_decode_member(struct wire_reader *r, struct view_member *member);
int wire_encode_view(struct wire_writer *w, const struct view *view);
void wire_decode_view(struct wire_reader *r, struct view *view);
int wire_encode_trim(struct wire_writer *w, const struct wire_trim_report *trim);
void wire_decode_trim(struct wire_reader *r, struct wire_trim_report *trim);

#endif
