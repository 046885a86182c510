/* The wire codec's primitives (util/wire.h). */
#include "util/wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"

void wire_fail(struct wire_reader *r, const char *fmt, ...)
{
    if (r->rc < 0)
        return;
    char why[320];
    va_list args;
    va_start(args, fmt);
    vsnprintf(why, sizeof why, fmt, args);
    va_end(args);
    r->rc = sp_error(SPINDLE_EPROTO, "%s: %s at offset %zu", r->what != NULL ? r->what : "message",
                     why, r->pos);
}

/* True when n more bytes are there; records a truncation otherwise. */
static bool wire_need(struct wire_reader *r, size_t n, const char *field)
{
    if (r->rc < 0)
        return false;
    if (r->len - r->pos >= n)
        return true;
    wire_fail(r, "truncated %s: needs %zu bytes, %zu left", field, n, r->len - r->pos);
    return false;
}

uint64_t wire_get(struct wire_reader *r, unsigned bytes, const char *field)
{
    if (!wire_need(r, bytes, field))
        return 0;
    uint64_t value = 0;
    for (unsigned i = 0; i < bytes; i++)
        value |= (uint64_t)r->buf[r->pos + i] << (8 * i);
    r->pos += bytes;
    return value;
}

void wire_get_zero(struct wire_reader *r, size_t n, const char *field)
{
    if (!wire_need(r, n, field))
        return;
    for (size_t i = 0; i < n; i++) {
        if (r->buf[r->pos + i] != 0) {
            r->pos += i;
            wire_fail(r, "%s must be zero, byte %zu is 0x%02x", field, i, r->buf[r->pos]);
            return;
        }
    }
    r->pos += n;
}

void wire_get_blob(struct wire_reader *r, uint8_t *out, uint32_t *length, size_t width,
                   const char *field)
{
    *length = 0;
    uint16_t len = wire_get_u16(r, field);
    if (r->rc == 0 && len > width) {
        r->pos -= 2;
        wire_fail(r, "%s length %u exceeds %zu", field, len, width);
    }
    if (!wire_need(r, width, field))
        return;
    memcpy(out, r->buf + r->pos, len);
    r->pos += len;
    wire_get_zero(r, width - len, field);
    if (r->rc == 0)
        *length = len;
}

void wire_get_string(struct wire_reader *r, char *out, size_t cap, size_t width, const char *field)
{
    out[0] = '\0';
    size_t at = r->pos;
    uint16_t len = wire_get_u16(r, field);
    if (r->rc == 0 && (len >= cap || len > width)) {
        r->pos = at;
        wire_fail(r, "%s length %u exceeds %zu", field, len, (cap - 1 < width ? cap - 1 : width));
    }
    if (!wire_need(r, width, field))
        return;
    if (memchr(r->buf + r->pos, '\0', len) != NULL) {
        wire_fail(r, "%s holds a NUL byte", field);
        return;
    }
    memcpy(out, r->buf + r->pos, len);
    out[len] = '\0';
    r->pos += len;
    wire_get_zero(r, width - len, field);
    if (r->rc < 0)
        out[0] = '\0';
}

void wire_get_header(struct wire_reader *r, uint16_t type)
{
    uint16_t got_type = wire_get_u16(r, "message type");
    uint16_t version = wire_get_u16(r, "message version");
    if (r->rc < 0)
        return;
    r->pos = 0;
    if (version != WIRE_VERSION)
        wire_fail(r, "wire version %u, this build speaks version %u", version, WIRE_VERSION);
    else if (got_type != type)
        wire_fail(r, "message type %u, expected %u", got_type, type);
    else
        r->pos = WIRE_HEADER_SIZE;
}

int wire_finish(struct wire_reader *r)
{
    if (r->rc == 0 && r->pos != r->len)
        wire_fail(r, "%zu trailing bytes", r->len - r->pos);
    return r->rc;
}

void wire_put(struct wire_writer *w, uint64_t value, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++, w->pos++)
        if (w->pos < w->cap)
            w->buf[w->pos] = (uint8_t)(value >> (8 * i));
}

void wire_put_zero(struct wire_writer *w, size_t n)
{
    if (w->pos < w->cap) {
        size_t room = w->cap - w->pos;
        memset(w->buf + w->pos, 0, n < room ? n : room);
    }
    w->pos += n;
}

void wire_put_bytes(struct wire_writer *w, const void *data, size_t n)
{
    if (w->pos < w->cap && n > 0) {
        size_t room = w->cap - w->pos;
        memcpy(w->buf + w->pos, data, n < room ? n : room);
    }
    w->pos += n;
}

void wire_put_blob(struct wire_writer *w, const void *data, uint32_t length, size_t width)
{
    if (length > width)
        length = (uint32_t)width;
    wire_put_u16(w, (uint16_t)length);
    wire_put_bytes(w, data, length);
    wire_put_zero(w, width - length);
}

void wire_put_string(struct wire_writer *w, const char *text, size_t width)
{
    size_t len = text == NULL ? 0 : strnlen(text, width);
    wire_put_blob(w, text, (uint32_t)len, width);
}

void wire_put_header(struct wire_writer *w, uint16_t type)
{
    wire_put_u16(w, type);
    wire_put_u16(w, WIRE_VERSION);
}
