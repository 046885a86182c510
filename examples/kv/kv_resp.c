/* RESP2 parser and encoders (kv_resp.h). */
#include "kv_resp.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kv_buf_free(struct kv_buf *buf)
{
    free(buf->data);
    buf->data = NULL;
    buf->len = 0;
    buf->cap = 0;
}

void kv_buf_reserve(struct kv_buf *buf, size_t extra)
{
    if (buf->cap - buf->len >= extra)
        return;
    size_t cap = buf->cap < 64 ? 64 : buf->cap;
    while (cap - buf->len < extra)
        cap *= 2;
    char *data = realloc(buf->data, cap);
    if (data == NULL) {
        fprintf(stderr, "spindle-kv: out of memory growing a buffer to %zu bytes\n", cap);
        abort();
    }
    buf->data = data;
    buf->cap = cap;
}

void kv_buf_append(struct kv_buf *buf, const void *data, size_t len)
{
    if (len == 0)
        return;
    kv_buf_reserve(buf, len);
    memcpy(buf->data + buf->len, data, len);
    buf->len += len;
}

void kv_buf_consume(struct kv_buf *buf, size_t count)
{
    if (count >= buf->len) {
        buf->len = 0;
        return;
    }
    memmove(buf->data, buf->data + count, buf->len - count);
    buf->len -= count;
}

void kv_argv_free(struct kv_argv *argv)
{
    free(argv->items);
    argv->items = NULL;
    argv->count = 0;
    argv->cap = 0;
}

void kv_argv_push(struct kv_argv *argv, const char *ptr, size_t len)
{
    if (argv->count == argv->cap) {
        size_t cap = argv->cap < 8 ? 8 : argv->cap * 2;
        struct kv_arg *items = realloc(argv->items, cap * sizeof *items);
        if (items == NULL) {
            fprintf(stderr, "spindle-kv: out of memory for %zu arguments\n", cap);
            abort();
        }
        argv->items = items;
        argv->cap = cap;
    }
    argv->items[argv->count].ptr = ptr;
    argv->items[argv->count].len = len;
    argv->count++;
}

/* Finds the CRLF that ends the line starting at data[at]: its offset, or
 * -1 when the bytes end first. */
static long find_crlf(const char *data, size_t len, size_t at)
{
    for (size_t i = at; i + 1 < len; i++)
        if (data[i] == '\r' && data[i + 1] == '\n')
            return (long)i;
    return -1;
}

/* Writes the message into the caller's error buffer (both named error and
 * error_size where it is used) and gives KV_RESP_ERROR. */
#define FAIL(...) (snprintf(error, error_size, __VA_ARGS__), (long)KV_RESP_ERROR)

/* Reads the decimal number of a "*N" or "$N" line, data[start..end).
 * Returns 0, or -1 when it is not a number in -1..limit (the value is in
 * *value when it is a number at all). */
static int parse_count(const char *data, size_t start, size_t end, int64_t limit, int64_t *value)
{
    size_t i = start;
    bool negative = false;
    if (i < end && data[i] == '-') {
        negative = true;
        i++;
    }
    if (i == end || end - i > 18)
        return -1;
    int64_t number = 0;
    for (; i < end; i++) {
        if (data[i] < '0' || data[i] > '9')
            return -1;
        number = number * 10 + (data[i] - '0');
    }
    *value = negative ? -number : number;
    if (*value < -1 || *value > limit)
        return -1;
    return 0;
}

static long parse_inline(const char *data, size_t len, const struct kv_resp_limits *limits,
                         struct kv_argv *argv, char *error, size_t error_size)
{
    long crlf = -1;
    size_t end = 0;
    for (size_t i = 0; i < len; i++) {
        if (data[i] == '\n') {
            crlf = (long)i;
            break;
        }
    }
    if (crlf < 0) {
        if (len > limits->max_inline)
            return FAIL("Protocol error: inline command longer than %zu bytes", limits->max_inline);
        return KV_RESP_INCOMPLETE;
    }
    end = (size_t)crlf;
    if (end > limits->max_inline)
        return FAIL("Protocol error: inline command of %zu bytes (at most %zu)", end,
                    limits->max_inline);
    size_t line_end = end > 0 && data[end - 1] == '\r' ? end - 1 : end;
    size_t i = 0;
    while (i < line_end) {
        while (i < line_end && (data[i] == ' ' || data[i] == '\t'))
            i++;
        if (i == line_end)
            break;
        size_t start = i;
        while (i < line_end && data[i] != ' ' && data[i] != '\t')
            i++;
        if (argv->count == limits->max_args)
            return FAIL("Protocol error: inline command has more than %zu words", limits->max_args);
        kv_argv_push(argv, data + start, i - start);
    }
    return (long)end + 1;
}

long kv_resp_parse(const char *data, size_t len, const struct kv_resp_limits *limits,
                   struct kv_argv *argv, char *error, size_t error_size)
{
    argv->count = 0;
    if (len == 0)
        return KV_RESP_INCOMPLETE;
    if (data[0] != '*')
        return parse_inline(data, len, limits, argv, error, error_size);
    long line = find_crlf(data, len, 1);
    if (line < 0) {
        if (len > 32)
            return FAIL("Protocol error: array count line has no CRLF");
        return KV_RESP_INCOMPLETE;
    }
    int64_t count = 0;
    if (parse_count(data, 1, (size_t)line, (int64_t)limits->max_args, &count) < 0)
        return FAIL("Protocol error: invalid multibulk length '%.*s' (at most %zu)",
                    (int)((size_t)line - 1 > 24 ? 24 : (size_t)line - 1), data + 1,
                    limits->max_args);
    size_t at = (size_t)line + 2;
    for (int64_t k = 0; k < count; k++) {
        if (at >= len)
            return KV_RESP_INCOMPLETE;
        if (data[at] != '$')
            return FAIL("Protocol error: expected '$', got '%c'", data[at]);
        line = find_crlf(data, len, at + 1);
        if (line < 0) {
            if (len - at > 32)
                return FAIL("Protocol error: bulk length line has no CRLF");
            return KV_RESP_INCOMPLETE;
        }
        int64_t bulk = 0;
        if (parse_count(data, at + 1, (size_t)line, (int64_t)limits->max_bulk, &bulk) < 0 ||
            bulk < 0)
            return FAIL("Protocol error: invalid bulk length '%.*s' (at most %zu)",
                        (int)((size_t)line - at - 1 > 24 ? 24 : (size_t)line - at - 1),
                        data + at + 1, limits->max_bulk);
        size_t start = (size_t)line + 2;
        if (len - start < (size_t)bulk + 2)
            return KV_RESP_INCOMPLETE;
        if (data[start + (size_t)bulk] != '\r' || data[start + (size_t)bulk + 1] != '\n')
            return FAIL("Protocol error: bulk string of %" PRId64 " bytes not followed by CRLF",
                        bulk);
        kv_argv_push(argv, data + start, (size_t)bulk);
        at = start + (size_t)bulk + 2;
    }
    return (long)at;
}

void kv_resp_simple(struct kv_buf *out, const char *text)
{
    kv_buf_append(out, "+", 1);
    kv_buf_append(out, text, strlen(text));
    kv_buf_append(out, "\r\n", 2);
}

void kv_resp_error(struct kv_buf *out, const char *text)
{
    kv_buf_append(out, "-", 1);
    /* An error is one line: CR and LF in it would end it early. */
    for (const char *c = text; *c != '\0'; c++)
        kv_buf_append(out, (*c == '\r' || *c == '\n') ? " " : c, 1);
    kv_buf_append(out, "\r\n", 2);
}

void kv_resp_integer(struct kv_buf *out, int64_t value)
{
    char text[32];
    int n = snprintf(text, sizeof text, ":%" PRId64 "\r\n", value);
    kv_buf_append(out, text, (size_t)n);
}

void kv_resp_bulk(struct kv_buf *out, const void *data, size_t len)
{
    char text[32];
    int n = snprintf(text, sizeof text, "$%zu\r\n", len);
    kv_buf_reserve(out, (size_t)n + len + 2);
    kv_buf_append(out, text, (size_t)n);
    kv_buf_append(out, data, len);
    kv_buf_append(out, "\r\n", 2);
}

void kv_resp_null(struct kv_buf *out)
{
    kv_buf_append(out, "$-1\r\n", 5);
}

void kv_resp_array(struct kv_buf *out, size_t count)
{
    char text[32];
    int n = snprintf(text, sizeof text, "*%zu\r\n", count);
    kv_buf_append(out, text, (size_t)n);
}
