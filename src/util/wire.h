/*
 * The one wire codec: every message that crosses between members (the
 * control channel's hello and frame header, table descriptors, view-change
 * blobs and commitments, join requests, offers and announcements, the
 * joiner's view and its state framing) is encoded and decoded with these
 * primitives, whatever channel carries it.
 *
 * Rules of the encoding:
 *  - integers are fixed width and explicitly little-endian, whatever the
 *    host's byte order;
 *  - every message opens with a message header: u16 type, u16 version
 *    (WIRE_VERSION). A decoder refuses another type or version with an error
 *    naming both values;
 *  - strings and byte strings travel in fixed-width fields: u16 length, then
 *    `width` bytes, the unused ones zero; a string holds no NUL byte;
 *  - reserved bytes and padding are zero, so that every accepted message
 *    re-encodes to the same bytes (decode -> encode -> decode is the
 *    identity, which the fuzz targets check);
 *  - a decoder consumes the whole buffer: trailing bytes are an error.
 *
 * The reader never touches a byte at or past len. Its first failure is
 * sticky: rc becomes SPINDLE_EPROTO with a message naming the message, the
 * field, its offset and the wrong value; later reads return zeroes, so a
 * decoder may read a group of fields and check rc once before acting on
 * them. The writer counts every byte it is asked to write but stores only
 * those that fit, so one pass with cap 0 yields a message's size.
 *
 * Thread-safety: none needed; readers and writers live on one stack.
 */
#ifndef SP_UTIL_WIRE_H
#define SP_UTIL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Version of every encoding in this codec; bumped on any change of one. */
#define WIRE_VERSION 5u
/* Bytes of the message header (u16 type, u16 version). */
#define WIRE_HEADER_SIZE 4u

struct wire_reader {
    const uint8_t *buf;
    size_t len;
    size_t pos;
    int rc;           /* 0, or the first failure (SPINDLE_EPROTO) */
    const char *what; /* the message being decoded, for error messages */
};

struct wire_writer {
    uint8_t *buf;
    size_t cap;
    size_t pos; /* bytes asked for so far (may exceed cap) */
};

static inline void wire_reader_init(struct wire_reader *r, const void *buf, size_t len,
                                    const char *what)
{
    r->buf = buf;
    r->len = buf == NULL ? 0 : len;
    r->pos = 0;
    r->rc = 0;
    r->what = what;
}

static inline void wire_writer_init(struct wire_writer *w, void *buf, size_t cap)
{
    w->buf = buf;
    w->cap = buf == NULL ? 0 : cap;
    w->pos = 0;
}

/* True when the writer held every byte asked of it. */
static inline bool wire_writer_fits(const struct wire_writer *w)
{
    return w->pos <= w->cap;
}

/* Bytes not yet read (0 once the reader failed). */
static inline size_t wire_left(const struct wire_reader *r)
{
    return r->rc < 0 ? 0 : r->len - r->pos;
}

/*
 * Records a semantic violation found by a decoder: "<what>: <fmt...> at
 * offset <pos>" with SPINDLE_EPROTO, unless a failure is already recorded.
 */
void wire_fail(struct wire_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reads an unsigned little-endian integer of `bytes` bytes (1, 2, 4, 8). */
uint64_t wire_get(struct wire_reader *r, unsigned bytes, const char *field);

static inline uint8_t wire_get_u8(struct wire_reader *r, const char *field)
{
    return (uint8_t)wire_get(r, 1, field);
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
static inline int32_t wire_get_i32(struct wire_reader *r, const char *field)
{
    return (int32_t)wire_get_u32(r, field);
}
/* n reserved bytes that must be zero. */
void wire_get_zero(struct wire_reader *r, size_t n, const char *field);
/*
 * A fixed-width string field: u16 length (< cap, and <= width), `width`
 * bytes of which the first `length` are the string (no NUL) and the rest
 * zero. out receives the NUL-terminated string (cap bytes).
 */
void wire_get_string(struct wire_reader *r, char *out, size_t cap, size_t width, const char *field);
/*
 * A fixed-width byte string: u16 length (<= width), then `width` bytes,
 * the unused ones zero. Copies length bytes to out and stores the length.
 */
void wire_get_blob(struct wire_reader *r, uint8_t *out, uint32_t *length, size_t width,
                   const char *field);
/*
 * Reads the message header and checks it: type must be `type` and the
 * version WIRE_VERSION; a mismatch names both values.
 */
void wire_get_header(struct wire_reader *r, uint16_t type);
/*
 * Ends a decode: fails on trailing bytes. Returns the reader's rc (0 or
 * SPINDLE_EPROTO, with the message set by the first failure).
 */
int wire_finish(struct wire_reader *r);

void wire_put(struct wire_writer *w, uint64_t value, unsigned bytes);
static inline void wire_put_u8(struct wire_writer *w, uint8_t value)
{
    wire_put(w, value, 1);
}
static inline void wire_put_u16(struct wire_writer *w, uint16_t value)
{
    wire_put(w, value, 2);
}
static inline void wire_put_u32(struct wire_writer *w, uint32_t value)
{
    wire_put(w, value, 4);
}
static inline void wire_put_u64(struct wire_writer *w, uint64_t value)
{
    wire_put(w, value, 8);
}
void wire_put_zero(struct wire_writer *w, size_t n);
void wire_put_bytes(struct wire_writer *w, const void *data, size_t n);
/* Writes a fixed-width string field (see wire_get_string); a string longer
 * than width is cut (callers keep their strings below the width). */
void wire_put_string(struct wire_writer *w, const char *text, size_t width);
/* Writes a fixed-width byte string (see wire_get_blob); length <= width. */
void wire_put_blob(struct wire_writer *w, const void *data, uint32_t length, size_t width);
void wire_put_header(struct wire_writer *w, uint16_t type);

#endif
