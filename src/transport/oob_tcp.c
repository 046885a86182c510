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
 *   hello  { u32 magic 'SPOH', u32 version 2, u32 from_index, u32 num_members,
 *            u32 group (crc32c of the group name) }
 *   frame  { u32 magic 'SPOF', u32 tag, u32 from_index, u32 length, u32 crc32c }
 *          followed by length payload bytes.
 *
 * After set-up, each connection has an outgoing queue and an incoming
 * mailbox holding the latest blob of each tag (so a member may publish
 * ahead of others, and a later blob of a tag replaces an earlier one).
 * Everything received is validated: a frame with a bad magic, a false
 * sender, an oversized length or a wrong checksum drops that connection
 * with a logged reason, and waiting for that member then fails with
 * SPINDLE_EPROTO naming it. publish/collect/allgather may be called from
 * several threads (a mutex guards the connections; collect polls in short
 * slices so that one waiter does not hold the others up).
 *
 * Joins: the listening socket stays open after set-up. A process that
 * wants to join opens a short connection with a hello from OOB_JOIN_FROM
 * and one request frame; the member keeps it pending (one at a time) until
 * the membership layer answers with one frame, then closes it. A joiner
 * that was given a member id connects to every current member like a
 * higher-indexed member (hello from its id, which must be a slot at or
 * above the initial member count that was never used), and from then on
 * is a member of the framed exchange like any other. Slots are never
 * reused: a dropped connection's slot stays dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
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
#define OOB_VERSION     2u
#define OOB_BLOB_MAX    (64u << 20)

struct oob_hello {
    uint32_t magic, version, from, num_members, group;
};

struct oob_frame {
    uint32_t magic, tag, from, length, crc;
};

#define OOB_MAX_MEMBERS 64
/* Hello "from" of a join request connection. */
#define OOB_JOIN_FROM 0xffffffffu
/* Largest join request (the joiner's address and little else). */
#define OOB_JOIN_REQUEST_MAX 8192u
/* How long an accepted connection may take to identify itself. */
#define OOB_HELLO_MS 1000
/* Blobs kept per member: the latest one of each tag, at most this many
 * tags (the oldest is dropped first). */
#define OOB_BOX_TAGS 64

/* The latest blob of one tag from one member. */
struct oob_msg {
    uint32_t tag, length;
    uint8_t *data;
};

/* One member's connection: what is queued for it, the frame being read,
 * and its mailbox. fd is -1 for self and once the connection is dropped
 * (error and why then say what happened). */
struct oob_peer {
    int fd;
    bool used; /* a connection was ever set up in this slot */
    uint8_t *out;
    size_t out_len, out_sent, out_cap;
    struct oob_frame hdr;
    size_t got;
    uint8_t *body;
    struct oob_msg box[OOB_BOX_TAGS];
    uint32_t box_len;
    int error;
    char why[160];
};

struct oob_tcp {
    struct tp_oob base;
    uint32_t num_members, self; /* num_members: the initial members (slots above join) */
    uint32_t group;             /* crc32c of the group name, checked in every hello */
    int *fds;                   /* per slot during set-up; -1 for self */
    struct oob_peer *peers;     /* [OOB_MAX_MEMBERS] */
    struct tp_oob_member *members;
    int listen_fd; /* kept open after set-up for joiners; -1 when closed */
    int join_fd;   /* a pending join request's connection, or -1 */
    uint8_t *join; /* its request frame's payload */
    size_t join_len;
    pthread_mutex_t lock; /* peers: publish/collect may run on several threads */
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

/* Connects to host:port and sends hello, retrying while nothing listens
 * there yet. *fd on success; else an error naming `who`. */
static int oob_dial(const char *who, const char *host, uint16_t port, const struct oob_hello *hello,
                    uint64_t deadline, int *fd_out)
{
    struct addrinfo *ai = NULL;
    int rc = oob_resolve(host, port, 0, &ai);
    if (rc != 0)
        return sp_error(SPINDLE_EUNREACH, "oob: %s at %s:%u is unreachable: %s", who, host, port,
                        spindle_errmsg());
    int last_err = 0;
    while (oob_remaining_ms(deadline) > 0) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            freeaddrinfo(ai);
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            if (oob_io(fd, (void *)hello, sizeof *hello, 1, deadline) != 0) {
                close(fd);
                return sp_error(SPINDLE_EUNREACH,
                                "oob: %s at %s:%u dropped the connection during the handshake", who,
                                host, port);
            }
            *fd_out = fd;
            return 0;
        }
        last_err = errno;
        if (fd >= 0)
            close(fd);
        struct timespec pause = {0, 20 * 1000000L};
        nanosleep(&pause, NULL);
    }
    freeaddrinfo(ai);
    return sp_error(SPINDLE_EUNREACH, "oob: %s at %s:%u is unreachable: %s", who, host, port,
                    last_err ? strerror(last_err) : "timed out");
}

/* Connects to a lower-indexed member, retrying while it is not yet up. */
static int oob_connect(struct oob_tcp *oob, uint32_t j, uint64_t deadline)
{
    const struct tp_oob_member *m = &oob->members[j];
    struct oob_hello hello = {OOB_HELLO_MAGIC, OOB_VERSION, oob->self, oob->num_members,
                              oob->group};
    char who[32];
    snprintf(who, sizeof who, "member %u", m->id);
    return oob_dial(who, m->host, m->port, &hello, deadline, &oob->fds[j]);
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
    uint64_t hello_deadline = sp_now_ns() + OOB_HELLO_MS * 1000000ull;
    if (hello_deadline > deadline)
        hello_deadline = deadline;
    int rc = oob_io(fd, &hello, sizeof hello, 0, hello_deadline);
    const char *why = rc != 0                                 ? "no complete hello within 1 s"
                      : hello.magic != OOB_HELLO_MAGIC        ? "not a libspindle hello"
                      : hello.version != OOB_VERSION          ? "another protocol version"
                      : hello.group != oob->group             ? "a member of another group"
                      : hello.num_members != oob->num_members ? "another member count"
                      : hello.from <= oob->self || hello.from >= oob->num_members
                          ? "a member index it may not connect as"
                      : oob->fds[hello.from] >= 0 ? "a member index already connected"
                                                  : NULL;
    if (why != NULL) {
        SP_LOG_WARNING("oob", "member %u dropped a connection: %s", oob->members[oob->self].id,
                       why);
        close(fd);
        return 0;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    oob->fds[hello.from] = fd;
    return 1;
}

/* Reads one frame's payload (at most max bytes) from a fresh connection
 * before the deadline; *out is malloc'ed. */
static int oob_read_frame(int fd, uint32_t max, uint64_t deadline, uint8_t **out, size_t *length,
                          const char **why)
{
    struct oob_frame f;
    *out = NULL;
    if (oob_io(fd, &f, sizeof f, 0, deadline) != 0) {
        *why = "no complete frame in time";
        return SPINDLE_EPROTO;
    }
    if (f.magic != OOB_FRAME_MAGIC) {
        *why = "garbage instead of a frame";
        return SPINDLE_EPROTO;
    }
    if (f.length > max) {
        *why = "an oversized frame";
        return SPINDLE_EPROTO;
    }
    uint8_t *body = malloc(f.length > 0 ? f.length : 1);
    if (body == NULL) {
        *why = "no memory for the frame";
        return SPINDLE_ENOMEM;
    }
    if (oob_io(fd, body, f.length, 0, deadline) != 0 || sp_crc32c(0, body, f.length) != f.crc) {
        free(body);
        *why = "a truncated or corrupt frame";
        return SPINDLE_EPROTO;
    }
    *out = body;
    *length = f.length;
    return 0;
}

/* Writes one frame (tag 0) on a fresh connection before the deadline. */
static int oob_write_frame(int fd, uint32_t from, const void *blob, size_t length,
                           uint64_t deadline)
{
    struct oob_frame f = {OOB_FRAME_MAGIC, 0, from, (uint32_t)length, sp_crc32c(0, blob, length)};
    int rc = oob_io(fd, &f, sizeof f, 1, deadline);
    if (rc == 0 && length > 0)
        rc = oob_io(fd, (void *)blob, length, 1, deadline);
    return rc;
}

/* After set-up: accepts a connection on the kept listening socket. It is
 * a join request (kept pending for the membership layer) or a joiner that
 * was given a slot and now connects as a member; anything else is dropped
 * with a logged reason. Lock held. */
static void oob_accept_late(struct oob_tcp *oob)
{
    int fd = accept4(oob->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct oob_hello hello;
    uint64_t deadline = sp_now_ns() + OOB_HELLO_MS * 1000000ull;
    int rc = oob_io(fd, &hello, sizeof hello, 0, deadline);
    const char *why =
        rc != 0                          ? "no complete hello within 1 s"
        : hello.magic != OOB_HELLO_MAGIC ? "not a libspindle hello"
        : hello.version != OOB_VERSION   ? "another protocol version"
        /* a join request may leave the group open (0) */
        : hello.group != oob->group && !(hello.from == OOB_JOIN_FROM && hello.group == 0)
            ? "a member of another group"
            : NULL;
    if (why == NULL && hello.from == OOB_JOIN_FROM) {
        if (oob->join_fd >= 0) {
            why = "a join request while another one is pending";
        } else {
            uint8_t *request = NULL;
            size_t length = 0;
            if (oob_read_frame(fd, OOB_JOIN_REQUEST_MAX, deadline, &request, &length, &why) == 0) {
                oob->join_fd = fd;
                oob->join = request;
                oob->join_len = length;
                return;
            }
        }
    } else if (why == NULL) {
        why = hello.num_members != oob->num_members ? "another member count"
              : hello.from < oob->num_members || hello.from >= OOB_MAX_MEMBERS ||
                      hello.from <= oob->self
                  ? "a member index it may not connect as"
              : oob->peers[hello.from].used ? "a member index already used"
                                            : NULL;
    }
    if (why != NULL) {
        SP_LOG_WARNING("oob", "member %u dropped a connection: %s", oob->self, why);
        close(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    struct oob_peer *p = &oob->peers[hello.from];
    p->fd = fd;
    p->used = true;
    p->error = 0;
    SP_LOG_INFO_("oob", "member %u: joiner %u connected", oob->self, hello.from);
}

static int oob_accept_all(struct oob_tcp *oob, int listen_fd, uint64_t deadline)
{
    uint32_t missing = oob->self < oob->num_members ? oob->num_members - 1 - oob->self : 0;
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

static void oob_write(struct oob_tcp *oob, uint32_t j);
static void oob_progress(struct oob_tcp *oob, int ms);

static void oob_tcp_close(struct tp_oob *base)
{
    struct oob_tcp *oob = (struct oob_tcp *)base;
    /* Give what is still queued a moment to leave (a peer may be waiting
     * for it), without waiting on a peer that does not read. */
    uint64_t deadline = sp_now_ns() + 1000000000ull;
    for (;;) {
        bool pending = false;
        for (uint32_t j = 0; j < OOB_MAX_MEMBERS; j++)
            if (oob->peers[j].fd >= 0 && oob->peers[j].out_sent < oob->peers[j].out_len)
                pending = true;
        if (!pending || oob_remaining_ms(deadline) == 0)
            break;
        oob_progress(oob, 5);
    }
    if (oob->listen_fd >= 0)
        close(oob->listen_fd);
    if (oob->join_fd >= 0)
        close(oob->join_fd);
    free(oob->join);
    for (uint32_t j = 0; j < OOB_MAX_MEMBERS; j++) {
        if (oob->fds[j] >= 0)
            close(oob->fds[j]);
        free((char *)oob->members[j].host);
        struct oob_peer *p = &oob->peers[j];
        if (p->fd >= 0)
            close(p->fd);
        free(p->out);
        free(p->body);
        for (uint32_t i = 0; i < p->box_len; i++)
            free(p->box[i].data);
    }
    pthread_mutex_destroy(&oob->lock);
    free(oob->fds);
    free(oob->peers);
    free(oob->members);
    free(oob);
}

static int oob_tcp_setup(struct oob_tcp *oob, int timeout_ms)
{
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 30000) * 1000000ull;
    int listen_fd = -1;
    int rc = oob_listen(&oob->members[oob->self], &listen_fd);
    for (uint32_t j = 0; rc == 0 && j < oob->self; j++)
        if (oob->members[j].host != NULL)
            rc = oob_connect(oob, j, deadline);
    if (rc == 0)
        rc = oob_accept_all(oob, listen_fd, deadline);
    if (rc != 0 && listen_fd >= 0)
        close(listen_fd);
    if (rc == 0) {
        /* Kept for join requests and joiners (accepted during progress). */
        fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
        oob->listen_fd = listen_fd;
    }
    for (uint32_t j = 0; rc == 0 && j < OOB_MAX_MEMBERS; j++) {
        if (oob->fds[j] >= 0)
            fcntl(oob->fds[j], F_SETFL, fcntl(oob->fds[j], F_GETFL) | O_NONBLOCK);
        /* The connection now belongs to the framed exchange (closed there). */
        oob->peers[j].fd = oob->fds[j];
        oob->peers[j].used = oob->fds[j] >= 0 || j == oob->self;
        oob->fds[j] = -1;
    }
    return rc;
}

/* Opens the exchange for slot self_index: members[] has `slots` entries,
 * those with a NULL host are absent (gone, or not yet joined); the first
 * num_initial entries are the members that started the group. */
static int oob_tcp_open(const char *group_name, const struct tp_oob_member *members, uint32_t slots,
                        uint32_t num_initial, uint32_t self_index, int timeout_ms,
                        struct tp_oob **out)
{
    struct oob_tcp *oob = calloc(1, sizeof *oob);
    if (oob != NULL) {
        oob->fds = malloc(OOB_MAX_MEMBERS * sizeof *oob->fds);
        oob->peers = calloc(OOB_MAX_MEMBERS, sizeof *oob->peers);
        oob->members = calloc(OOB_MAX_MEMBERS, sizeof *oob->members);
    }
    if (oob == NULL || oob->fds == NULL || oob->peers == NULL || oob->members == NULL) {
        if (oob != NULL) {
            free(oob->fds);
            free(oob->peers);
            free(oob->members);
        }
        free(oob);
        return sp_error(SPINDLE_ENOMEM, "oob: out of memory for %u members", slots);
    }
    oob->base.vt = &oob_tcp_vtable;
    oob->num_members = num_initial;
    oob->self = self_index;
    oob->group = group_name == NULL ? 0 : sp_crc32c(0, group_name, strlen(group_name));
    oob->listen_fd = -1;
    oob->join_fd = -1;
    pthread_mutex_init(&oob->lock, NULL);
    int rc = 0;
    for (uint32_t j = 0; j < OOB_MAX_MEMBERS; j++) {
        oob->fds[j] = -1;
        oob->peers[j].fd = -1;
        oob->members[j].id = j;
        if (j >= slots || members[j].host == NULL)
            continue;
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

int tp_oob_open_tcp(const char *group_name, const struct tp_oob_member *members,
                    uint32_t num_members, uint32_t self_index, int timeout_ms, struct tp_oob **out)
{
    if (members == NULL || out == NULL || num_members == 0 || self_index >= num_members ||
        num_members > OOB_MAX_MEMBERS)
        return sp_error(SPINDLE_EINVAL, "oob: self index %u outside %u members (at most %u)",
                        self_index, num_members, OOB_MAX_MEMBERS);
    for (uint32_t j = 0; j < num_members; j++)
        if (members[j].host == NULL || members[j].host[0] == '\0' || members[j].port == 0)
            return sp_error(SPINDLE_EINVAL, "oob: member %u needs a host and a non-zero port",
                            members[j].id);
    return oob_tcp_open(group_name, members, num_members, num_members, self_index, timeout_ms, out);
}

int tp_oob_open_tcp_joiner(const char *group_name, const struct tp_oob_member *members,
                           uint32_t num_initial, uint32_t self_index, int timeout_ms,
                           struct tp_oob **out)
{
    if (members == NULL || out == NULL || num_initial == 0 || self_index < num_initial ||
        self_index >= OOB_MAX_MEMBERS)
        return sp_error(SPINDLE_EINVAL,
                        "oob: a joiner's slot %u must be at least the %u initial members and "
                        "below %u",
                        self_index, num_initial, OOB_MAX_MEMBERS);
    const struct tp_oob_member *me = &members[self_index];
    if (me->host == NULL || me->host[0] == '\0' || me->port == 0)
        return sp_error(SPINDLE_EINVAL, "oob: a joiner needs its own host and a non-zero port");
    return oob_tcp_open(group_name, members, self_index + 1, num_initial, self_index, timeout_ms,
                        out);
}

int tp_oob_join_ask(const char *group_name, const char *host, uint16_t port, const void *request,
                    size_t length, void **reply, size_t *reply_length, int timeout_ms)
{
    if (host == NULL || reply == NULL || reply_length == NULL || length > OOB_JOIN_REQUEST_MAX)
        return sp_error(SPINDLE_EINVAL, "oob: join request of %zu bytes (at most %u) or no host",
                        length, OOB_JOIN_REQUEST_MAX);
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 30000) * 1000000ull;
    struct oob_hello hello = {OOB_HELLO_MAGIC, OOB_VERSION, OOB_JOIN_FROM, 0,
                              group_name == NULL ? 0
                                                 : sp_crc32c(0, group_name, strlen(group_name))};
    int fd = -1;
    int rc = oob_dial("the join contact", host, port, &hello, deadline, &fd);
    if (rc != 0)
        return rc;
    rc = oob_write_frame(fd, OOB_JOIN_FROM, request, length, deadline);
    const char *why = "the connection broke";
    uint8_t *answer = NULL;
    if (rc == 0)
        rc = oob_read_frame(fd, OOB_BLOB_MAX, deadline, &answer, reply_length, &why);
    close(fd);
    if (rc != 0)
        return sp_error(SPINDLE_EUNREACH, "oob: %s:%u did not answer the join request: %s", host,
                        port, why);
    *reply = answer;
    return 0;
}

/* ---- framed exchange: outgoing queues, incoming mailboxes ------------- */

/* Appends bytes to member j's outgoing queue. Lock held. */
static int oob_queue(struct oob_tcp *oob, uint32_t j, const void *bytes, size_t length)
{
    struct oob_peer *p = &oob->peers[j];
    if (p->out_len + length > p->out_cap) {
        size_t cap = p->out_cap ? p->out_cap : 256;
        while (cap < p->out_len + length)
            cap *= 2;
        uint8_t *grown = realloc(p->out, cap);
        if (grown == NULL)
            return sp_error(SPINDLE_ENOMEM, "oob: out of memory queueing %zu bytes", length);
        p->out = grown;
        p->out_cap = cap;
    }
    memcpy(p->out + p->out_len, bytes, length);
    p->out_len += length;
    return 0;
}

/* Drops member j's connection, remembering why (error code and text). */
static void oob_drop(struct oob_tcp *oob, uint32_t j, int error, const char *why)
{
    struct oob_peer *p = &oob->peers[j];
    if (p->fd < 0)
        return;
    if (error == SPINDLE_EPROTO)
        SP_LOG_WARNING("oob", "member %u: dropping the connection of member %u: %s",
                       oob->members[oob->self].id, oob->members[j].id, why);
    close(p->fd);
    p->fd = -1;
    p->error = error;
    snprintf(p->why, sizeof p->why, "%s", why);
    free(p->body);
    p->body = NULL;
}

/* Stores a complete frame's blob as member j's latest for its tag. */
static void oob_store(struct oob_tcp *oob, uint32_t j)
{
    struct oob_peer *p = &oob->peers[j];
    struct oob_msg *slot = NULL;
    for (uint32_t i = 0; i < p->box_len; i++)
        if (p->box[i].tag == p->hdr.tag)
            slot = &p->box[i];
    if (slot == NULL) {
        if (p->box_len == OOB_BOX_TAGS) {
            free(p->box[0].data);
            memmove(p->box, p->box + 1, (OOB_BOX_TAGS - 1) * sizeof *p->box);
            p->box_len--;
        }
        slot = &p->box[p->box_len++];
        slot->data = NULL;
    }
    free(slot->data);
    slot->tag = p->hdr.tag;
    slot->length = p->hdr.length;
    slot->data = p->body;
    p->body = NULL;
}

/* Reads what member j has sent, frame by frame, into its mailbox. A frame
 * that breaks the format drops the connection (logged, reason kept). */
static void oob_read(struct oob_tcp *oob, uint32_t j)
{
    struct oob_peer *p = &oob->peers[j];
    char why[160];
    while (p->fd >= 0) {
        uint8_t *dst;
        size_t want;
        if (p->got < sizeof p->hdr) {
            dst = (uint8_t *)&p->hdr + p->got;
            want = sizeof p->hdr - p->got;
        } else {
            dst = p->body + (p->got - sizeof p->hdr);
            want = sizeof p->hdr + p->hdr.length - p->got;
        }
        ssize_t n = want > 0 ? recv(p->fd, dst, want, MSG_DONTWAIT) : 0;
        if (want > 0 && n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        if (want > 0 && n <= 0) {
            snprintf(why, sizeof why, "member %u %s", oob->members[j].id,
                     n == 0 ? "closed its connection" : strerror(errno));
            oob_drop(oob, j, SPINDLE_EUNREACH, why);
            return;
        }
        p->got += (size_t)n;
        if (p->got == sizeof p->hdr) {
            const struct oob_frame *f = &p->hdr;
            if (f->magic != OOB_FRAME_MAGIC)
                snprintf(why, sizeof why, "member %u sent garbage (magic 0x%08x)",
                         oob->members[j].id, f->magic);
            else if (f->from != j)
                snprintf(why, sizeof why, "member %u claims to be index %u", oob->members[j].id,
                         f->from);
            else if (f->length > OOB_BLOB_MAX)
                snprintf(why, sizeof why, "member %u sent an oversized blob of %u bytes (limit %u)",
                         oob->members[j].id, f->length, OOB_BLOB_MAX);
            else
                why[0] = '\0';
            if (why[0] != '\0') {
                oob_drop(oob, j, SPINDLE_EPROTO, why);
                return;
            }
            p->body = malloc(f->length > 0 ? f->length : 1);
            if (p->body == NULL) {
                oob_drop(oob, j, SPINDLE_ENOMEM, "out of memory for a blob");
                return;
            }
        }
        if (p->got >= sizeof p->hdr && p->got == sizeof p->hdr + p->hdr.length) {
            if (sp_crc32c(0, p->body, p->hdr.length) != p->hdr.crc) {
                snprintf(why, sizeof why, "member %u sent a corrupt blob for tag %u",
                         oob->members[j].id, p->hdr.tag);
                oob_drop(oob, j, SPINDLE_EPROTO, why);
                return;
            }
            oob_store(oob, j);
            p->got = 0;
        }
    }
}

/* Writes queued bytes to member j without blocking. */
static void oob_write(struct oob_tcp *oob, uint32_t j)
{
    struct oob_peer *p = &oob->peers[j];
    while (p->fd >= 0 && p->out_sent < p->out_len) {
        ssize_t n = send(p->fd, p->out + p->out_sent, p->out_len - p->out_sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        if (n < 0) {
            char why[160];
            snprintf(why, sizeof why, "sending to member %u failed: %s", oob->members[j].id,
                     strerror(errno));
            oob_drop(oob, j, SPINDLE_EUNREACH, why);
            return;
        }
        p->out_sent += (size_t)n;
    }
    if (p->out_sent == p->out_len)
        p->out_sent = p->out_len = 0;
}

/* One round of progress on every connection: waits up to ms for any. */
static void oob_progress(struct oob_tcp *oob, int ms)
{
    struct pollfd pfds[OOB_MAX_MEMBERS + 1];
    uint32_t n = OOB_MAX_MEMBERS;
    for (uint32_t j = 0; j < n; j++) {
        const struct oob_peer *p = &oob->peers[j];
        pfds[j] =
            (struct pollfd){p->fd, (short)(POLLIN | (p->out_len > p->out_sent ? POLLOUT : 0)), 0};
    }
    pfds[n] = (struct pollfd){oob->listen_fd, POLLIN, 0};
    if (poll(pfds, n + 1, ms) <= 0)
        return;
    if (pfds[n].fd >= 0 && (pfds[n].revents & POLLIN))
        oob_accept_late(oob);
    for (uint32_t j = 0; j < n; j++) {
        if (pfds[j].fd < 0 || pfds[j].revents == 0)
            continue;
        if (pfds[j].revents & POLLOUT)
            oob_write(oob, j);
        if (pfds[j].revents & (POLLIN | POLLHUP | POLLERR))
            oob_read(oob, j);
    }
}

static int oob_tcp_publish(struct tp_oob *base, uint32_t tag, const void *blob, size_t length,
                           uint64_t to)
{
    struct oob_tcp *oob = (struct oob_tcp *)base;
    if (length > OOB_BLOB_MAX)
        return sp_error(SPINDLE_EINVAL, "oob: blob of %zu bytes exceeds %u", length, OOB_BLOB_MAX);
    struct oob_frame f = {OOB_FRAME_MAGIC, tag, oob->self, (uint32_t)length,
                          sp_crc32c(0, blob, length)};
    int rc = 0;
    pthread_mutex_lock(&oob->lock);
    for (uint32_t j = 0; j < OOB_MAX_MEMBERS && rc == 0; j++) {
        if (j == oob->self || ((to >> j) & 1) == 0 || oob->peers[j].fd < 0)
            continue;
        rc = oob_queue(oob, j, &f, sizeof f);
        if (rc == 0)
            rc = oob_queue(oob, j, blob, length);
        if (rc == 0)
            oob_write(oob, j);
    }
    pthread_mutex_unlock(&oob->lock);
    return rc;
}

/* Copies member j's latest blob of tag: 1 when copied, 0 when none yet, an
 * error when its length differs. Lock held. */
static int oob_take(struct oob_tcp *oob, uint32_t j, uint32_t tag, void *out, size_t length)
{
    const struct oob_peer *p = &oob->peers[j];
    for (uint32_t i = 0; i < p->box_len; i++) {
        if (p->box[i].tag != tag)
            continue;
        if (p->box[i].length != length)
            return sp_error(SPINDLE_EPROTO, "oob: member %u sent %u bytes for tag %u, expected %zu",
                            oob->members[j].id, p->box[i].length, tag, length);
        memcpy(out, p->box[i].data, length);
        return 1;
    }
    return 0;
}

/* collect with member j's blob at all + j * stride (stride 0: one member). */
static int oob_collect_at(struct tp_oob *base, uint32_t tag, uint64_t from, void *all,
                          size_t length, size_t stride, int timeout_ms, uint64_t *have)
{
    struct oob_tcp *oob = (struct oob_tcp *)base;
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    uint64_t got = 0, want = from & ~(1ull << oob->self);
    int rc = 0;
    for (;;) {
        pthread_mutex_lock(&oob->lock);
        for (uint32_t j = 0; j < OOB_MAX_MEMBERS && rc == 0; j++) {
            if (((want >> j) & 1) == 0 || ((got >> j) & 1) != 0)
                continue;
            int r = oob_take(oob, j, tag, (uint8_t *)all + (size_t)j * stride, length);
            if (r < 0)
                rc = r;
            else if (r == 1)
                got |= 1ull << j;
            else if (oob->peers[j].fd < 0 && oob->peers[j].used) /* never used: may join */
                rc = sp_error(oob->peers[j].error ? oob->peers[j].error : SPINDLE_EUNREACH,
                              "oob: member %u is gone: %s", oob->members[j].id, oob->peers[j].why);
        }
        /* Done when every blob is here and what this member queued for
         * them has left too (they may be waiting for it). */
        bool flushed = true;
        for (uint32_t j = 0; j < OOB_MAX_MEMBERS; j++)
            if (((want >> j) & 1) && oob->peers[j].fd >= 0 &&
                oob->peers[j].out_sent < oob->peers[j].out_len)
                flushed = false;
        int ms = oob_remaining_ms(deadline);
        if (rc == 0 && (got != want || !flushed) && ms > 0)
            oob_progress(oob, ms < 5 ? ms : 5); /* short slices: others share the lock */
        pthread_mutex_unlock(&oob->lock);
        if (rc != 0 || (got == want && flushed))
            break;
        if (ms == 0) {
            char names[256] = "";
            for (uint32_t j = 0; j < OOB_MAX_MEMBERS; j++)
                if (((want & ~got) >> j) & 1) {
                    size_t used = strlen(names);
                    snprintf(names + used, sizeof names - used, "%s%u", used ? ", " : "",
                             oob->members[j].id);
                }
            rc = sp_error(SPINDLE_ETIMEDOUT, "oob: tag %u still waiting for members %s%s", tag,
                          names, got == want ? " (still sending to them)" : "");
            break;
        }
    }
    if (have != NULL)
        *have = got;
    return rc;
}

static int oob_tcp_collect(struct tp_oob *base, uint32_t tag, uint64_t from, void *all,
                           size_t length, int timeout_ms, uint64_t *have)
{
    return oob_collect_at(base, tag, from, all, length, length, timeout_ms, have);
}

static int oob_tcp_collect_one(struct tp_oob *base, uint32_t tag, uint32_t from, void *out,
                               size_t length, int timeout_ms)
{
    if (from >= OOB_MAX_MEMBERS)
        return sp_error(SPINDLE_EINVAL, "oob: no member %u", from);
    return oob_collect_at(base, tag, 1ull << from, out, length, 0, timeout_ms, NULL);
}

static int oob_tcp_allgather(struct tp_oob *base, uint32_t tag, const void *mine, size_t length,
                             void *all, int timeout_ms)
{
    struct oob_tcp *oob = (struct oob_tcp *)base;
    uint64_t everyone = oob->num_members >= 64 ? UINT64_MAX : (1ull << oob->num_members) - 1;
    memcpy((uint8_t *)all + (size_t)oob->self * length, mine, length);
    int rc = oob_tcp_publish(base, tag, mine, length, everyone);
    if (rc == 0)
        rc = oob_tcp_collect(base, tag, everyone, all, length, timeout_ms > 0 ? timeout_ms : 30000,
                             NULL);
    return rc;
}

static int oob_tcp_join_poll(struct tp_oob *base, int timeout_ms, void *request, size_t capacity,
                             size_t *length)
{
    struct oob_tcp *oob = (struct oob_tcp *)base;
    pthread_mutex_lock(&oob->lock);
    if (oob->join_fd < 0)
        oob_progress(oob, timeout_ms);
    int rc = 0;
    if (oob->join_fd >= 0) {
        if (oob->join_len > capacity) {
            SP_LOG_WARNING("oob", "member %u: refusing a join request of %zu bytes", oob->self,
                           oob->join_len);
            close(oob->join_fd);
            oob->join_fd = -1;
            free(oob->join);
            oob->join = NULL;
        } else {
            memcpy(request, oob->join, oob->join_len);
            *length = oob->join_len;
            rc = 1;
        }
    }
    pthread_mutex_unlock(&oob->lock);
    return rc;
}

static int oob_tcp_join_answer(struct tp_oob *base, const void *reply, size_t length)
{
    struct oob_tcp *oob = (struct oob_tcp *)base;
    pthread_mutex_lock(&oob->lock);
    int fd = oob->join_fd;
    oob->join_fd = -1;
    free(oob->join);
    oob->join = NULL;
    pthread_mutex_unlock(&oob->lock);
    if (fd < 0)
        return sp_error(SPINDLE_EINVAL, "oob: no join request is pending");
    int rc = oob_write_frame(fd, oob->self, reply, length, sp_now_ns() + 2000000000ull);
    close(fd);
    return rc == 0 ? 0 : sp_error(SPINDLE_EUNREACH, "oob: the joiner went away before the answer");
}

static void oob_tcp_add_member(struct tp_oob *base, uint32_t id, const char *host, uint16_t port)
{
    struct oob_tcp *oob = (struct oob_tcp *)base;
    if (id >= OOB_MAX_MEMBERS || host == NULL)
        return;
    pthread_mutex_lock(&oob->lock);
    char *copy = strdup(host);
    if (copy != NULL) {
        free((char *)oob->members[id].host);
        oob->members[id].host = copy;
        oob->members[id].port = port;
    }
    pthread_mutex_unlock(&oob->lock);
}

static const struct tp_oob_vtable oob_tcp_vtable = {
    .join_poll = oob_tcp_join_poll,
    .collect_one = oob_tcp_collect_one,
    .join_answer = oob_tcp_join_answer,
    .add_member = oob_tcp_add_member,
    .allgather = oob_tcp_allgather,
    .publish = oob_tcp_publish,
    .collect = oob_tcp_collect,
    .close = oob_tcp_close,
};
