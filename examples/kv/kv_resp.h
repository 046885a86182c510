/*
 * RESP2, the Redis protocol, as spindle-kv speaks it with its clients.
 *
 * Owns: the byte buffer type the server and the state machine write replies
 * into (kv_buf), the parser of client requests (arrays of bulk strings, and
 * inline commands as telnet sends them) and the reply encoders.
 *
 * The parser is incremental and bounded: it is handed whatever bytes a
 * connection has received so far and either takes one whole command from
 * their start, says it needs more bytes, or refuses them with a protocol
 * error naming what was wrong (an array count or bulk length past the
 * limits, a missing CRLF, a byte where a digit belongs). It never reads past
 * the length it is given; argument pointers point into the caller's bytes.
 *
 * Threads: no shared state; a kv_buf or kv_argv belongs to one thread.
 */
#ifndef KV_RESP_H
#define KV_RESP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A growable byte buffer. Allocation failure aborts the process: the
 * server has no useful way to go on without memory for a reply. */
struct kv_buf {
    char *data;
    size_t len;
    size_t cap;
};

void kv_buf_free(struct kv_buf *buf);
void kv_buf_reserve(struct kv_buf *buf, size_t extra);
void kv_buf_append(struct kv_buf *buf, const void *data, size_t len);
/* Drops the first count bytes (count <= len). */
void kv_buf_consume(struct kv_buf *buf, size_t count);

/* One argument of a command: bytes, not NUL-terminated. */
struct kv_arg {
    const char *ptr;
    size_t len;
};

/* The arguments of one command, in a growable array. */
struct kv_argv {
    struct kv_arg *items;
    size_t count;
    size_t cap;
};

void kv_argv_free(struct kv_argv *argv);
void kv_argv_push(struct kv_argv *argv, const char *ptr, size_t len);

/* What the parser accepts at most. */
struct kv_resp_limits {
    size_t max_args;   /* elements of one command array */
    size_t max_bulk;   /* bytes of one bulk string */
    size_t max_inline; /* bytes of one inline command line */
};

/* kv_resp_parse results besides a positive byte count. */
#define KV_RESP_INCOMPLETE 0
#define KV_RESP_ERROR      (-1)

/*
 * Parses one command from the start of data[0..len). Returns the number of
 * bytes it took (> 0) with its arguments in *argv (pointing into data; an
 * empty line or empty array gives count 0), KV_RESP_INCOMPLETE when the
 * bytes end before the command does, or KV_RESP_ERROR with a message
 * ("Protocol error: ...") in error[0..error_size), after which the
 * connection cannot be read on.
 */
long kv_resp_parse(const char *data, size_t len, const struct kv_resp_limits *limits,
                   struct kv_argv *argv, char *error, size_t error_size);

/* Reply encoders: they append one RESP2 value to out. */
void kv_resp_simple(struct kv_buf *out, const char *text);
void kv_resp_error(struct kv_buf *out, const char *text);
/* An error reply formatted like printf (at most 511 bytes). A macro, not
 * a variadic function: the text is formatted on the caller's stack. */
#define kv_resp_errorf(out, ...)                                                                   \
    do {                                                                                           \
        char kv_error_text_[512];                                                                  \
        snprintf(kv_error_text_, sizeof kv_error_text_, __VA_ARGS__);                              \
        kv_resp_error((out), kv_error_text_);                                                      \
    } while (0)
void kv_resp_integer(struct kv_buf *out, int64_t value);
void kv_resp_bulk(struct kv_buf *out, const void *data, size_t len);
void kv_resp_null(struct kv_buf *out);
void kv_resp_array(struct kv_buf *out, size_t count);

#endif
