/*
 * Bootstrap exchange over TCP. Every member listens on its own host:port;
 * member i connects to every member j < i (retrying until the deadline, as
 * peers start in any order) and accepts from every j > i, so each pair
 * shares exactly one connection. A connection opens with a hello frame
 * naming the sender's index; allgather sends one framed blob to every peer
 * and reads one from each, with non-blocking sockets in one poll loop so
 * that large blobs cannot deadlock on full socket buffers.
 *
 * Wire format (little-endian host order, all members run the same build):
 *   hello  { u32 magic 'SPOH', u32 version 1, u32 from_index, u32 num_members }
 *   frame  { u32 magic 'SPOF', u32 tag, u32 from_index, u32 length, u32 crc32c }
 *          followed by length payload bytes.
 * Everything received is validated; anything unexpected is SPINDLE_EPROTO
 * naming the member and the offending field. After a failed allgather the
 * streams are out of step: close the exchange.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "transport/oob_impl.h"
#include "util/clock.h"
#include "util/crc32c.h"
#include "util/error.h"
#include "util/log.h"

#define OOB_HELLO_MAGIC 0x484f5053u /* "SPOH" */
#define OOB_FRAME_MAGIC 0x464f5053u /* "SPOF" */
#define OOB_VERSION     1u
#define OOB_BLOB_MAX    (64u << 20)

struct oob_hello {
    uint32_t magic, version, from, num_members;
};

struct oob_frame {
    uint32_t magic, tag, from, length, crc;
};

struct oob_tcp {
    struct tp_oob base;
    uint32_t num_members, self;
    int *fds; /* per member; -1 for self */
    struct tp_oob_member *members;
};

static int oob_remaining_ms(uint64_t deadline)
{
    uint64_t now = sp_now_ns();
    return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

static int oob_resolve(const char *host, uint16_t port, int passive, struct addrinfo **out)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0};
    char service[8];
    snprintf(service, sizeof service, "%u", port);
    int rc = getaddrinfo(host, service, &hints, out);
    if (rc != 0)
        return sp_error(SPINDLE_EUNREACH, "oob: cannot resolve '%s': %s", host, gai_strerror(rc));
    return 0;
}

static int oob_listen(const struct tp_oob_member *me, int *out)
{
    struct addrinfo *ai = NULL;
    int rc = oob_resolve(me->host, me->port, 1, &ai);
    if (rc != 0)
        return rc;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0) {
        int err = errno;
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        if (err == EADDRINUSE)
            return sp_error(SPINDLE_EADDRINUSE, "oob: %s:%u is already in use", me->host, me->port);
        return sp_error(SPINDLE_EIO, "oob: cannot listen on %s:%u: %s", me->host, me->port,
                        strerror(err));
    }
    freeaddrinfo(ai);
    *out = fd;
    return 0;
}

/* Sends or receives exactly len bytes before the deadline (blocking fd). */
static int oob_io(int fd, void *buf, size_t len, int sending, uint64_t deadline)
{
    char *p = buf;
    while (len > 0) {
        struct pollfd pfd = {fd, sending ? POLLOUT : POLLIN, 0};
        int ms = oob_remaining_ms(deadline);
        if (ms == 0 || poll(&pfd, 1, ms) <= 0)
            return SPINDLE_ETIMEDOUT;
        ssize_t n = sending ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
                            : recv(fd, p, len, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n <= 0)
            return SPINDLE_EUNREACH;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Connects to a lower-indexed member, retrying while it is not yet up. */
static int oob_connect(struct oob_tcp *oob, uint32_t j, uint64_t deadline)
{
    const struct tp_oob_member *m = &oob->members[j];
    struct addrinfo *ai = NULL;
    int rc = oob_resolve(m->host, m->port, 0, &ai);
    if (rc != 0)
        return sp_error(SPINDLE_EUNREACH, "oob: member %u at %s:%u is unreachable: %s", m->id,
                        m->host, m->port, spindle_errmsg());
    int last_err = 0;
    while (oob_remaining_ms(deadline) > 0) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            freeaddrinfo(ai);
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            struct oob_hello hello = {OOB_HELLO_MAGIC, OOB_VERSION, oob->self, oob->num_members};
            if (oob_io(fd, &hello, sizeof hello, 1, deadline) != 0) {
                close(fd);
                return sp_error(SPINDLE_EUNREACH,
                                "oob: member %u at %s:%u dropped the "
                                "connection during the handshake",
                                m->id, m->host, m->port);
            }
            oob->fds[j] = fd;
            return 0;
        }
        last_err = errno;
        if (fd >= 0)
            close(fd);
        struct timespec pause = {0, 20 * 1000000L};
        nanosleep(&pause, NULL);
    }
    freeaddrinfo(ai);
    return sp_error(SPINDLE_EUNREACH, "oob: member %u at %s:%u is unreachable: %s", m->id, m->host,
                    m->port, last_err ? strerror(last_err) : "timed out");
}

/* Accepts one connection and validates its hello; returns 1 when it named
 * a higher member not yet connected, 0 when it was dropped. */
static int oob_accept_one(struct oob_tcp *oob, int listen_fd, uint64_t deadline)
{
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return 0;
    struct oob_hello hello;
    /* A stray client gets at most a second to identify itself. */
    uint64_t hello_deadline = sp_now_ns() + 1000000000ull;
    if (hello_deadline > deadline)
        hello_deadline = deadline;
    int rc = oob_io(fd, &hello, sizeof hello, 0, hello_deadline);
    if (rc != 0 || hello.magic != OOB_HELLO_MAGIC || hello.version != OOB_VERSION ||
        hello.num_members != oob->num_members || hello.from <= oob->self ||
        hello.from >= oob->num_members || oob->fds[hello.from] >= 0) {
        SP_LOG_WARNING("oob",
                       "member %u dropped a connection that did not present a valid "
                       "hello",
                       oob->members[oob->self].id);
        close(fd);
        return 0;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    oob->fds[hello.from] = fd;
    return 1;
}

static int oob_accept_all(struct oob_tcp *oob, int listen_fd, uint64_t deadline)
{
    uint32_t missing = oob->num_members - 1 - oob->self;
    while (missing > 0) {
        struct pollfd pfd = {listen_fd, POLLIN, 0};
        int ms = oob_remaining_ms(deadline);
        if (ms > 0 && poll(&pfd, 1, ms) > 0) {
            missing -= (uint32_t)oob_accept_one(oob, listen_fd, deadline);
            continue;
        }
        if (ms > 0)
            continue;
        char names[256] = "";
        for (uint32_t j = oob->self + 1; j < oob->num_members; j++)
            if (oob->fds[j] < 0) {
                size_t used = strlen(names);
                snprintf(names + used, sizeof names - used, "%s%u", used ? ", " : "",
                         oob->members[j].id);
            }
        return sp_error(SPINDLE_ETIMEDOUT, "oob: members %s never connected", names);
    }
    return 0;
}

static const struct tp_oob_vtable oob_tcp_vtable;

static void oob_tcp_close(struct tp_oob *base)
{
    struct oob_tcp *oob = (struct oob_tcp *)base;
    for (uint32_t j = 0; j < oob->num_members; j++) {
        if (oob->fds[j] >= 0)
            close(oob->fds[j]);
        free((char *)oob->members[j].host);
    }
    free(oob->fds);
    free(oob->members);
    free(oob);
}

static int oob_tcp_setup(struct oob_tcp *oob, int timeout_ms)
{
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 30000) * 1000000ull;
    int listen_fd = -1;
    int rc = oob_listen(&oob->members[oob->self], &listen_fd);
    for (uint32_t j = 0; rc == 0 && j < oob->self; j++)
        rc = oob_connect(oob, j, deadline);
    if (rc == 0)
        rc = oob_accept_all(oob, listen_fd, deadline);
    if (listen_fd >= 0)
        close(listen_fd);
    for (uint32_t j = 0; rc == 0 && j < oob->num_members; j++)
        if (oob->fds[j] >= 0)
            fcntl(oob->fds[j], F_SETFL, fcntl(oob->fds[j], F_GETFL) | O_NONBLOCK);
    return rc;
}

int tp_oob_open_tcp(const struct tp_oob_member *members, uint32_t num_members, uint32_t self_index,
                    int timeout_ms, struct tp_oob **out)
{
    if (members == NULL || out == NULL || num_members == 0 || self_index >= num_members)
        return sp_error(SPINDLE_EINVAL, "oob: self index %u outside %u members", self_index,
                        num_members);
    for (uint32_t j = 0; j < num_members; j++)
        if (members[j].host == NULL || members[j].host[0] == '\0' || members[j].port == 0)
            return sp_error(SPINDLE_EINVAL, "oob: member %u needs a host and a non-zero port",
                            members[j].id);
    struct oob_tcp *oob = calloc(1, sizeof *oob);
    if (oob != NULL) {
        oob->fds = malloc(num_members * sizeof *oob->fds);
        oob->members = calloc(num_members, sizeof *oob->members);
    }
    if (oob == NULL || oob->fds == NULL || oob->members == NULL) {
        if (oob != NULL) {
            free(oob->fds);
            free(oob->members);
        }
        free(oob);
        return sp_error(SPINDLE_ENOMEM, "oob: out of memory for %u members", num_members);
    }
    oob->base.vt = &oob_tcp_vtable;
    oob->num_members = num_members;
    oob->self = self_index;
    int rc = 0;
    for (uint32_t j = 0; j < num_members; j++) {
        oob->fds[j] = -1;
        oob->members[j] = members[j];
        oob->members[j].host = strdup(members[j].host);
        if (oob->members[j].host == NULL)
            rc = sp_error(SPINDLE_ENOMEM, "oob: out of memory");
    }
    if (rc == 0)
        rc = oob_tcp_setup(oob, timeout_ms);
    if (rc != 0) {
        oob_tcp_close(&oob->base);
        return rc;
    }
    *out = &oob->base;
    return 0;
}

/* Per-peer progress of one allgather. */
struct oob_xfer {
    size_t sent, received;
    struct oob_frame in;
};

static int oob_check_frame(struct oob_tcp *oob, uint32_t j, const struct oob_frame *f, uint32_t tag,
                           size_t length)
{
    uint32_t id = oob->members[j].id;
    if (f->magic != OOB_FRAME_MAGIC)
        return sp_error(SPINDLE_EPROTO, "oob: member %u sent garbage (magic 0x%08x)", id, f->magic);
    if (f->from != j)
        return sp_error(SPINDLE_EPROTO, "oob: member %u claims to be index %u", id, f->from);
    if (f->tag != tag)
        return sp_error(SPINDLE_EPROTO, "oob: member %u sent tag %u, expected %u", id, f->tag, tag);
    if (f->length != length)
        return sp_error(SPINDLE_EPROTO, "oob: member %u sent %u bytes for tag %u, expected %zu", id,
                        f->length, tag, length);
    return 0;
}

/* Moves bytes for peer j; returns 0, or an error. */
static int oob_pump(struct oob_tcp *oob, uint32_t j, struct oob_xfer *x, const uint8_t *out,
                    size_t out_len, uint8_t *in, uint32_t tag, size_t length, short revents)
{
    int fd = oob->fds[j];
    uint32_t id = oob->members[j].id;
    if ((revents & POLLOUT) && x->sent < out_len) {
        ssize_t n = send(fd, out + x->sent, out_len - x->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return sp_error(SPINDLE_EUNREACH, "oob: sending to member %u failed: %s", id,
                            strerror(errno));
        if (n > 0)
            x->sent += (size_t)n;
    }
    if (!(revents & (POLLIN | POLLHUP | POLLERR)))
        return 0;
    size_t total = sizeof x->in + length;
    if (x->received >= total)
        return 0;
    uint8_t *dst = x->received < sizeof x->in ? (uint8_t *)&x->in + x->received
                                              : in + (x->received - sizeof x->in);
    size_t want = x->received < sizeof x->in ? sizeof x->in - x->received : total - x->received;
    ssize_t n = recv(fd, dst, want, MSG_DONTWAIT);
    if (n == 0)
        return sp_error(SPINDLE_EUNREACH, "oob: member %u closed its connection", id);
    if (n < 0)
        return errno == EAGAIN || errno == EINTR
                   ? 0
                   : sp_error(SPINDLE_EUNREACH, "oob: receiving from member %u failed: %s", id,
                              strerror(errno));
    x->received += (size_t)n;
    if (x->received == sizeof x->in) {
        int rc = oob_check_frame(oob, j, &x->in, tag, length);
        if (rc != 0)
            return rc;
    }
    if (x->received == total && sp_crc32c(0, in, length) != x->in.crc)
        return sp_error(SPINDLE_EPROTO, "oob: member %u sent a corrupt blob for tag %u", id, tag);
    return 0;
}

static int oob_tcp_allgather(struct tp_oob *base, uint32_t tag, const void *mine, size_t length,
                             void *all, int timeout_ms)
{
    struct oob_tcp *oob = (struct oob_tcp *)base;
    if (length > OOB_BLOB_MAX)
        return sp_error(SPINDLE_EINVAL, "oob: blob of %zu bytes exceeds %u", length, OOB_BLOB_MAX);
    uint32_t n = oob->num_members;
    uint8_t *result = all;
    memcpy(result + (size_t)oob->self * length, mine, length);
    size_t out_len = sizeof(struct oob_frame) + length;
    uint8_t *out = malloc(out_len);
    struct oob_xfer *xfer = calloc(n, sizeof *xfer);
    struct pollfd *pfds = calloc(n, sizeof *pfds);
    int rc = 0;
    if (out == NULL || xfer == NULL || pfds == NULL)
        rc = sp_error(SPINDLE_ENOMEM, "oob: out of memory for a %zu-byte allgather", length);
    if (rc == 0) {
        struct oob_frame f = {OOB_FRAME_MAGIC, tag, oob->self, (uint32_t)length,
                              sp_crc32c(0, mine, length)};
        memcpy(out, &f, sizeof f);
        memcpy(out + sizeof f, mine, length);
    }
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 30000) * 1000000ull;
    while (rc == 0) {
        int busy = 0;
        for (uint32_t j = 0; j < n; j++) {
            pfds[j] = (struct pollfd){-1, 0, 0};
            if (j == oob->self)
                continue;
            int want_out = xfer[j].sent < out_len;
            int want_in = xfer[j].received < sizeof(struct oob_frame) + length;
            if (want_out || want_in) {
                pfds[j] = (struct pollfd){
                    oob->fds[j], (short)((want_out ? POLLOUT : 0) | (want_in ? POLLIN : 0)), 0};
                busy = 1;
            }
        }
        if (!busy)
            break;
        int ms = oob_remaining_ms(deadline);
        if (ms == 0 || poll(pfds, n, ms) == 0) {
            char names[256] = "";
            for (uint32_t j = 0; j < n; j++)
                if (pfds[j].fd >= 0) {
                    size_t used = strlen(names);
                    snprintf(names + used, sizeof names - used, "%s%u", used ? ", " : "",
                             oob->members[j].id);
                }
            rc = sp_error(SPINDLE_ETIMEDOUT,
                          "oob: allgather tag %u still waiting for members "
                          "%s",
                          tag, names);
            break;
        }
        for (uint32_t j = 0; j < n && rc == 0; j++)
            if (pfds[j].fd >= 0 && pfds[j].revents)
                rc = oob_pump(oob, j, &xfer[j], out, out_len, result + (size_t)j * length, tag,
                              length, pfds[j].revents);
    }
    free(out);
    free(xfer);
    free(pfds);
    return rc;
}

static const struct tp_oob_vtable oob_tcp_vtable = {
    .allgather = oob_tcp_allgather,
    .close = oob_tcp_close,
};
