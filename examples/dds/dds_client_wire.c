/*
 * The external client protocol's frames and the group-key proofs of its
 * handshake (dds_client_wire.h). The decoder reads bytes from another
 * process, members' and clients' alike: every field is checked.
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dds_client_wire.h"
#include "dds_impl.h"
#include "dds_le.h"

#define PROOF_LABEL "spindle-dds-client"

uint32_t dds_client_frame_length(const uint8_t *prefix)
{
    uint32_t length = dds_get32(prefix);
    return length >= 1 && length <= DDS_CLIENT_MAX_FRAME ? length : 0;
}

/* A cursor over a frame's body: every read checks what is left. */
struct cursor {
    const uint8_t *at;
    size_t left;
    bool short_read;
};

static const uint8_t *take(struct cursor *c, size_t n)
{
    if (c->left < n) {
        c->short_read = true;
        return NULL;
    }
    const uint8_t *at = c->at;
    c->at += n;
    c->left -= n;
    return at;
}

static uint64_t take_number(struct cursor *c, size_t n)
{
    const uint8_t *at = take(c, n);
    if (at == NULL)
        return 0;
    return n == 1 ? at[0] : n == 2 ? dds_get16(at) : n == 4 ? dds_get32(at) : dds_get64(at);
}

static const char *type_name(uint8_t type)
{
    static const char *const names[] = {"unknown",    "WELCOME", "HELLO",     "READY",  "SUBSCRIBE",
                                        "SUBSCRIBED", "PUBLISH", "PUBLISHED", "SAMPLE", "ERROR"};
    return type <= DDS_CLIENT_ERROR ? names[type] : names[0];
}

/* u8 length, then 1..SPINDLE_DDS_NAME_MAX-1 printable bytes without spaces. */
static bool take_name(struct cursor *c, char *name)
{
    size_t length = (size_t)take_number(c, 1);
    const uint8_t *bytes = take(c, length);
    if (bytes == NULL || length == 0 || length >= SPINDLE_DDS_NAME_MAX)
        return false;
    for (size_t i = 0; i < length; i++)
        if (bytes[i] <= ' ' || bytes[i] > '~')
            return false;
    memcpy(name, bytes, length);
    name[length] = '\0';
    return true;
}

static int refuse(uint8_t type, const char *field)
{
    return dds_error(SPINDLE_EPROTO, "client protocol: %s frame: bad %s", type_name(type), field);
}

static int decode_handshake(struct cursor *c, struct dds_client_frame *f)
{
    if (f->type == DDS_CLIENT_READY) {
        f->id = (uint32_t)take_number(c, 4);
        f->proof = take(c, DDS_CLIENT_PROOF);
        if (c->short_read || f->id >= SPINDLE_DDS_MAX_PARTICIPANTS)
            return refuse(f->type, "member id");
        return 0;
    }
    if (take_number(c, 4) != DDS_CLIENT_MAGIC || c->short_read)
        return refuse(f->type, "magic");
    if (take_number(c, 2) != DDS_CLIENT_VERSION || c->short_read)
        return refuse(f->type, "version (this side speaks 1)");
    if (f->type == DDS_CLIENT_WELCOME) {
        f->flags = (uint8_t)take_number(c, 1);
        if (f->flags > 1)
            return refuse(f->type, "keyed flag");
    }
    f->nonce = take(c, DDS_CLIENT_NONCE);
    if (f->type == DDS_CLIENT_HELLO)
        f->proof = take(c, DDS_CLIENT_PROOF);
    return c->short_read ? refuse(f->type, "length") : 0;
}

/* SAMPLE and PUBLISHED: topic, [flags,] writer, seq [, time, bytes]. */
static int decode_sample(struct cursor *c, struct dds_client_frame *f)
{
    f->topic = (uint16_t)take_number(c, 2);
    if (f->type == DDS_CLIENT_SAMPLE)
        f->flags = (uint8_t)take_number(c, 1);
    f->id = (uint32_t)take_number(c, 4);
    f->seq = take_number(c, 8);
    if (c->short_read || f->topic >= SPINDLE_DDS_MAX_TOPICS)
        return refuse(f->type, "topic");
    if (f->flags > DDS_CLIENT_FLAG_HISTORY)
        return refuse(f->type, "flags");
    if (f->id >= SPINDLE_DDS_MAX_PARTICIPANTS)
        return refuse(f->type, "writer");
    if (f->seq == 0)
        return refuse(f->type, "sequence number (0)");
    if (f->type == DDS_CLIENT_PUBLISHED)
        return 0;
    f->time_ns = take_number(c, 8);
    f->length = (uint32_t)take_number(c, 4);
    if (c->short_read || f->length > SPINDLE_DDS_MAX_SAMPLE || f->length != c->left)
        return refuse(f->type, "data length");
    f->data = take(c, f->length);
    return 0;
}

static int decode_body(struct cursor *c, struct dds_client_frame *f)
{
    switch (f->type) {
    case DDS_CLIENT_WELCOME:
    case DDS_CLIENT_HELLO:
    case DDS_CLIENT_READY:
        return decode_handshake(c, f);
    case DDS_CLIENT_SUBSCRIBE:
        f->flags = (uint8_t)take_number(c, 1);
        if (c->short_read || f->flags > DDS_CLIENT_FLAG_HISTORY)
            return refuse(f->type, "flags");
        return take_name(c, f->name) ? 0 : refuse(f->type, "topic name");
    case DDS_CLIENT_SUBSCRIBED:
        f->topic = (uint16_t)take_number(c, 2);
        f->qos = (uint8_t)take_number(c, 1);
        if (c->short_read || f->topic >= SPINDLE_DDS_MAX_TOPICS || f->qos > SPINDLE_DDS_LOGGED)
            return refuse(f->type, "topic or qos");
        return take_name(c, f->name) ? 0 : refuse(f->type, "topic name");
    case DDS_CLIENT_PUBLISH:
        if (!take_name(c, f->name))
            return refuse(f->type, "topic name");
        f->length = (uint32_t)take_number(c, 4);
        if (c->short_read || f->length > SPINDLE_DDS_MAX_SAMPLE || f->length != c->left)
            return refuse(f->type, "data length");
        f->data = take(c, f->length);
        return 0;
    case DDS_CLIENT_PUBLISHED:
    case DDS_CLIENT_SAMPLE:
        return decode_sample(c, f);
    case DDS_CLIENT_ERROR:
        f->code = -(int32_t)take_number(c, 2);
        f->length = (uint32_t)take_number(c, 2);
        if (c->short_read || f->code >= 0 || f->code < SPINDLE_EAUTH)
            return refuse(f->type, "code");
        if (f->length == 0 || f->length > DDS_CLIENT_TEXT || f->length != c->left)
            return refuse(f->type, "text length");
        f->data = take(c, f->length);
        for (uint32_t i = 0; i < f->length; i++)
            if (f->data[i] < ' ' || f->data[i] > '~')
                return refuse(f->type, "text (not printable)");
        return 0;
    default:
        return dds_error(SPINDLE_EPROTO, "client protocol: unknown frame type %u", f->type);
    }
}

int dds_client_frame_decode(const uint8_t *bytes, size_t size, struct dds_client_frame *frame)
{
    memset(frame, 0, sizeof *frame);
    if (bytes == NULL || size == 0 || size > DDS_CLIENT_MAX_FRAME)
        return dds_error(SPINDLE_EPROTO, "client protocol: a frame of %zu bytes (1..%u)", size,
                         DDS_CLIENT_MAX_FRAME);
    struct cursor c = {.at = bytes + 1, .left = size - 1};
    frame->type = bytes[0];
    int rc = decode_body(&c, frame);
    if (rc == 0 && c.left != 0)
        rc = refuse(frame->type, "length (trailing bytes)");
    return rc;
}

static uint8_t *put_name(uint8_t *at, const char *name)
{
    size_t length = strnlen(name, SPINDLE_DDS_NAME_MAX - 1);
    *at++ = (uint8_t)length;
    memcpy(at, name, length);
    return at + length;
}

/* The body's size, before it is written (bounds the encoder). */
static size_t body_size(const struct dds_client_frame *f)
{
    size_t name = 1 + strnlen(f->name, SPINDLE_DDS_NAME_MAX - 1);
    switch (f->type) {
    case DDS_CLIENT_WELCOME:
        return 1 + 4 + 2 + 1 + DDS_CLIENT_NONCE;
    case DDS_CLIENT_HELLO:
        return 1 + 4 + 2 + DDS_CLIENT_NONCE + DDS_CLIENT_PROOF;
    case DDS_CLIENT_READY:
        return 1 + 4 + DDS_CLIENT_PROOF;
    case DDS_CLIENT_SUBSCRIBE:
        return 1 + 1 + name;
    case DDS_CLIENT_SUBSCRIBED:
        return 1 + 2 + 1 + name;
    case DDS_CLIENT_PUBLISH:
        return 1 + name + 4 + f->length;
    case DDS_CLIENT_PUBLISHED:
        return 1 + 2 + 4 + 8;
    case DDS_CLIENT_SAMPLE:
        return DDS_CLIENT_SAMPLE_OVERHEAD - 4 + f->length;
    case DDS_CLIENT_ERROR:
        return 1 + 2 + 2 + f->length;
    default:
        return 0;
    }
}

static uint8_t *encode_body(uint8_t *at, const struct dds_client_frame *f)
{
    switch (f->type) {
    case DDS_CLIENT_WELCOME:
    case DDS_CLIENT_HELLO:
        dds_put32(at, DDS_CLIENT_MAGIC);
        dds_put16(at + 4, DDS_CLIENT_VERSION);
        at += 6;
        if (f->type == DDS_CLIENT_WELCOME)
            *at++ = f->flags;
        memcpy(at, f->nonce, DDS_CLIENT_NONCE);
        at += DDS_CLIENT_NONCE;
        if (f->type == DDS_CLIENT_HELLO) {
            memcpy(at, f->proof, DDS_CLIENT_PROOF);
            at += DDS_CLIENT_PROOF;
        }
        return at;
    case DDS_CLIENT_READY:
        dds_put32(at, f->id);
        memcpy(at + 4, f->proof, DDS_CLIENT_PROOF);
        return at + 4 + DDS_CLIENT_PROOF;
    case DDS_CLIENT_SUBSCRIBE:
        *at++ = f->flags;
        return put_name(at, f->name);
    case DDS_CLIENT_SUBSCRIBED:
        dds_put16(at, f->topic);
        at[2] = f->qos;
        return put_name(at + 3, f->name);
    case DDS_CLIENT_PUBLISH:
        at = put_name(at, f->name);
        dds_put32(at, f->length);
        at += 4;
        break;
    case DDS_CLIENT_PUBLISHED:
    case DDS_CLIENT_SAMPLE:
        dds_put16(at, f->topic);
        at += 2;
        if (f->type == DDS_CLIENT_SAMPLE)
            *at++ = f->flags;
        dds_put32(at, f->id);
        dds_put64(at + 4, f->seq);
        at += 12;
        if (f->type == DDS_CLIENT_PUBLISHED)
            return at;
        dds_put64(at, f->time_ns);
        dds_put32(at + 8, f->length);
        at += 12;
        break;
    case DDS_CLIENT_ERROR:
        dds_put16(at, (uint16_t)-f->code);
        dds_put16(at + 2, (uint16_t)f->length);
        at += 4;
        break;
    default:
        return at;
    }
    if (f->length > 0)
        memcpy(at, f->data, f->length);
    return at + f->length;
}

size_t dds_client_frame_encode(uint8_t *out, size_t capacity, const struct dds_client_frame *frame)
{
    size_t body = body_size(frame);
    if (body == 0 || body > DDS_CLIENT_MAX_FRAME || 4 + body > capacity)
        return 0;
    dds_put32(out, (uint32_t)body);
    out[4] = frame->type;
    uint8_t *end = encode_body(out + 5, frame);
    return (size_t)(end - out);
}

void dds_client_proof(const uint8_t key[DDS_CLIENT_KEY], char role,
                      const uint8_t nonce_m[DDS_CLIENT_NONCE],
                      const uint8_t nonce_c[DDS_CLIENT_NONCE], uint8_t proof[DDS_CLIENT_PROOF])
{
    crypto_auth_hmacsha512256_state state;
    uint8_t letter = (uint8_t)role;
    crypto_auth_hmacsha512256_init(&state, key, DDS_CLIENT_KEY);
    crypto_auth_hmacsha512256_update(&state, (const uint8_t *)PROOF_LABEL, sizeof PROOF_LABEL);
    crypto_auth_hmacsha512256_update(&state, &letter, 1);
    crypto_auth_hmacsha512256_update(&state, nonce_m, DDS_CLIENT_NONCE);
    crypto_auth_hmacsha512256_update(&state, nonce_c, DDS_CLIENT_NONCE);
    crypto_auth_hmacsha512256_final(&state, proof);
    sodium_memzero(&state, sizeof state);
}

bool dds_client_proof_ok(const uint8_t key[DDS_CLIENT_KEY], char role,
                         const uint8_t nonce_m[DDS_CLIENT_NONCE],
                         const uint8_t nonce_c[DDS_CLIENT_NONCE],
                         const uint8_t proof[DDS_CLIENT_PROOF])
{
    uint8_t want[DDS_CLIENT_PROOF];
    dds_client_proof(key, role, nonce_m, nonce_c, want);
    bool ok = sodium_memcmp(want, proof, DDS_CLIENT_PROOF) == 0;
    sodium_memzero(want, sizeof want);
    return ok;
}

int dds_client_random(uint8_t *bytes, size_t size)
{
    if (sodium_init() < 0)
        return dds_error(SPINDLE_EIO, "libsodium failed to initialise");
    randombytes_buf(bytes, size);
    return 0;
}

/* The checks of src/control/ctl_key.c, on the opened descriptor. */
int dds_client_key_load(const char *path, uint8_t key[DDS_CLIENT_KEY])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        int err = errno;
        if (err == ELOOP)
            return dds_error(SPINDLE_EINVAL, "key file %s is a symbolic link; name the file itself",
                             path);
        return dds_error(err == ENOENT ? SPINDLE_ENOENT : SPINDLE_EIO, "key file %s: %s", path,
                         strerror(err));
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = dds_error(SPINDLE_EIO, "key file %s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = dds_error(SPINDLE_EINVAL, "key file %s is not a regular file", path);
    else if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0)
        rc = dds_error(SPINDLE_EINVAL,
                       "key file %s has mode %04o: group or others may use it (chmod 600 it)", path,
                       (unsigned)(st.st_mode & 07777));
    else if (st.st_size != DDS_CLIENT_KEY)
        rc = dds_error(SPINDLE_EINVAL, "key file %s holds %lld bytes, a key is %u", path,
                       (long long)st.st_size, DDS_CLIENT_KEY);
    else if (read(fd, key, DDS_CLIENT_KEY) != (ssize_t)DDS_CLIENT_KEY)
        rc = dds_error(SPINDLE_EIO, "key file %s: a short read", path);
    close(fd);
    if (rc != 0)
        sodium_memzero(key, DDS_CLIENT_KEY);
    return rc;
}
