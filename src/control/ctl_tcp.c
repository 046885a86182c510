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
 * wants to join opens a short connection with a hello from CTL_JOIN_FROM
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

#include "control/ctl_impl.h"
#include "util/clock.h"
#include "util/crc32c.h"
#include "util/error.h"
#include "util/log.h"

#define CTL_HELLO_MAGIC 0x484f5053u /* "SPOH" */
#define CTL_FRAME_MAGIC 0x464f5053u /* "SPOF" */
#define CTL_VERSION     2u
#define CTL_BLOB_MAX    (64u << 20)

struct ctl_hello {
    uint32_t magic, version, from, num_members, group;
};

struct ctl_frame {
    uint32_t magic, tag, from, length, crc;
};

#define CTL_MAX_MEMBERS 64
/* Hello "from" of a join request connection. */
#define CTL_JOIN_FROM 0xffffffffu
/* Largest join request (the joiner's address and little else). */
#define CTL_JOIN_REQUEST_MAX 8192u
/* How long an accepted connection may take to identify itself. */
#define CTL_HELLO_MS 1000
/* Blobs kept per member: the latest one of each tag, at most this many
 * tags (the oldest is dropped first). */
#define CTL_BOX_TAGS 64

/* The latest blob of one tag from one member. */
struct ctl_msg {
    uint32_t tag, length;
    uint8_t *data;
};

/* One member's connection: what is queued for it, the frame being read,
 * and its mailbox. fd is -1 for self and once the connection is dropped
 * (error and why then say what happened). */
struct ctl_peer {
    int fd;
    bool used; /* a connection was ever set up in this slot */
    uint8_t *out;
    size_t out_len, out_sent, out_cap;
    struct ctl_frame hdr;
    size_t got;
    uint8_t *body;
    struct ctl_msg box[CTL_BOX_TAGS];
    uint32_t box_len;
    int error;
    char why[160];
};

struct ctl_tcp {
    struct ctl base;
    uint32_t num_members, self; /* num_members: the initial members (slots above join) */
    uint32_t group;             /* crc32c of the group name, checked in every hello */
    int *fds;                   /* per slot during set-up; -1 for self */
    struct ctl_peer *peers;     /* [CTL_MAX_MEMBERS] */
    struct ctl_member *members;
    int listen_fd; /* kept open after set-up for joiners; -1 when closed */
    int join_fd;   /* a pending join request's connection, or -1 */
    uint8_t *join; /* its request frame's payload */
    size_t join_len;
    pthread_mutex_t lock; /* peers: publish/collect may run on several threads */
};

static int ctl_remaining_ms(uint64_t deadline)
{
    uint64_t now = sp_now_ns();
    return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

static int ctl_resolve(const char *host, uint16_t port, int passive, struct addrinfo **out)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = passive ? AI_PASSIVE : 0};
    char service[8];
    snprintf(service, sizeof service, "%u", port);
    int rc = getaddrinfo(host, service, &hints, out);
    if (rc != 0)
        return sp_error(SPINDLE_EUNREACH, "control: cannot resolve '%s': %s", host, gai_strerror(rc));
    return 0;
}

static int ctl_listen(const struct ctl_member *me, int *out)
{
    struct addrinfo *ai = NULL;
    int rc = ctl_resolve(me->host, me->port, 1, &ai);
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
            return sp_error(SPINDLE_EADDRINUSE, "control: %s:%u is already in use", me->host, me->port);
        return sp_error(SPINDLE_EIO, "control: cannot listen on %s:%u: %s", me->host, me->port,
                        strerror(err));
    }
    freeaddrinfo(ai);
    *out = fd;
    return 0;
}

/* Sends or receives exactly len bytes before the deadline (blocking fd). */
static int ctl_io(int fd, void *buf, size_t len, int sending, uint64_t deadline)
{
    char *p = buf;
    while (len > 0) {
        struct pollfd pfd = {fd, sending ? POLLOUT : POLLIN, 0};
        int ms = ctl_remaining_ms(deadline);
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
static int ctl_dial(const char *who, const char *host, uint16_t port, const struct ctl_hello *hello,
                    uint64_t deadline, int *fd_out)
{
    struct addrinfo *ai = NULL;
    int rc = ctl_resolve(host, port, 0, &ai);
    if (rc != 0)
        return sp_error(SPINDLE_EUNREACH, "control: %s at %s:%u is unreachable: %s", who, host, port,
                        spindle_errmsg());
    int last_err = 0;
    while (ctl_remaining_ms(deadline) > 0) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            freeaddrinfo(ai);
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            if (ctl_io(fd, (void *)hello, sizeof *hello, 1, deadline) != 0) {
                close(fd);
                return sp_error(SPINDLE_EUNREACH,
                                "control: %s at %s:%u dropped the connection during the handshake", who,
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
    return sp_error(SPINDLE_EUNREACH, "control: %s at %s:%u is unreachable: %s", who, host, port,
                    last_err ? strerror(last_err) : "timed out");
}

/* Connects to a lower-indexed member, retrying while it is not yet up. */
static int ctl_connect(struct ctl_tcp *ctl, uint32_t j, uint64_t deadline)
{
    const struct ctl_member *m = &ctl->members[j];
    struct ctl_hello hello = {CTL_HELLO_MAGIC, CTL_VERSION, ctl->self, ctl->num_members,
                              ctl->group};
    char who[32];
    snprintf(who, sizeof who, "member %u", m->id);
    return ctl_dial(who, m->host, m->port, &hello, deadline, &ctl->fds[j]);
}

/* Accepts one connection and validates its hello; returns 1 when it named
 * a higher member not yet connected, 0 when it was dropped. */
static int ctl_accept_one(struct ctl_tcp *ctl, int listen_fd, uint64_t deadline)
{
    int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return 0;
    struct ctl_hello hello;
    /* A stray client gets at most a second to identify itself. */
    uint64_t hello_deadline = sp_now_ns() + CTL_HELLO_MS * 1000000ull;
    if (hello_deadline > deadline)
        hello_deadline = deadline;
    int rc = ctl_io(fd, &hello, sizeof hello, 0, hello_deadline);
    const char *why = rc != 0                                 ? "no complete hello within 1 s"
                      : hello.magic != CTL_HELLO_MAGIC        ? "not a libspindle hello"
                      : hello.version != CTL_VERSION          ? "another protocol version"
                      : hello.group != ctl->group             ? "a member of another group"
                      : hello.num_members != ctl->num_members ? "another member count"
                      : hello.from <= ctl->self || hello.from >= ctl->num_members
                          ? "a member index it may not connect as"
                      : ctl->fds[hello.from] >= 0 ? "a member index already connected"
                                                  : NULL;
    if (why != NULL) {
        SP_LOG_WARNING("control", "member %u dropped a connection: %s", ctl->members[ctl->self].id,
                       why);
        close(fd);
        return 0;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ctl->fds[hello.from] = fd;
    return 1;
}

/* Reads one frame's payload (at most max bytes) from a fresh connection
 * before the deadline; *out is malloc'ed. */
static int ctl_read_frame(int fd, uint32_t max, uint64_t deadline, uint8_t **out, size_t *length,
                          const char **why)
{
    struct ctl_frame f;
    *out = NULL;
    if (ctl_io(fd, &f, sizeof f, 0, deadline) != 0) {
        *why = "no complete frame in time";
        return SPINDLE_EPROTO;
    }
    if (f.magic != CTL_FRAME_MAGIC) {
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
    if (ctl_io(fd, body, f.length, 0, deadline) != 0 || sp_crc32c(0, body, f.length) != f.crc) {
        free(body);
        *why = "a truncated or corrupt frame";
        return SPINDLE_EPROTO;
    }
    *out = body;
    *length = f.length;
    return 0;
}

/* Writes one frame (tag 0) on a fresh connection before the deadline. */
static int ctl_write_frame(int fd, uint32_t from, const void *blob, size_t length,
                           uint64_t deadline)
{
    struct ctl_frame f = {CTL_FRAME_MAGIC, 0, from, (uint32_t)length, sp_crc32c(0, blob, length)};
    int rc = ctl_io(fd, &f, sizeof f, 1, deadline);
    if (rc == 0 && length > 0)
        rc = ctl_io(fd, (void *)blob, length, 1, deadline);
    return rc;
}

/* After set-up: accepts a connection on the kept listening socket. It is
 * a join request (kept pending for the membership layer) or a joiner that
 * was given a slot and now connects as a member; anything else is dropped
 * with a logged reason. Lock held. */
static void ctl_accept_late(struct ctl_tcp *ctl)
{
    int fd = accept4(ctl->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    struct ctl_hello hello;
    uint64_t deadline = sp_now_ns() + CTL_HELLO_MS * 1000000ull;
    int rc = ctl_io(fd, &hello, sizeof hello, 0, deadline);
    const char *why =
        rc != 0                          ? "no complete hello within 1 s"
        : hello.magic != CTL_HELLO_MAGIC ? "not a libspindle hello"
        : hello.version != CTL_VERSION   ? "another protocol version"
        /* a join request may leave the group open (0) */
        : hello.group != ctl->group && !(hello.from == CTL_JOIN_FROM && hello.group == 0)
            ? "a member of another group"
            : NULL;
    if (why == NULL && hello.from == CTL_JOIN_FROM) {
        if (ctl->join_fd >= 0) {
            why = "a join request while another one is pending";
        } else {
            uint8_t *request = NULL;
            size_t length = 0;
            if (ctl_read_frame(fd, CTL_JOIN_REQUEST_MAX, deadline, &request, &length, &why) == 0) {
                ctl->join_fd = fd;
                ctl->join = request;
                ctl->join_len = length;
                return;
            }
        }
    } else if (why == NULL) {
        why = hello.num_members != ctl->num_members ? "another member count"
              : hello.from < ctl->num_members || hello.from >= CTL_MAX_MEMBERS ||
                      hello.from <= ctl->self
                  ? "a member index it may not connect as"
              : ctl->peers[hello.from].used ? "a member index already used"
                                            : NULL;
    }
    if (why != NULL) {
        SP_LOG_WARNING("control", "member %u dropped a connection: %s", ctl->self, why);
        close(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    struct ctl_peer *p = &ctl->peers[hello.from];
    p->fd = fd;
    p->used = true;
    p->error = 0;
    SP_LOG_INFO_("control", "member %u: joiner %u connected", ctl->self, hello.from);
}

static int ctl_accept_all(struct ctl_tcp *ctl, int listen_fd, uint64_t deadline)
{
    uint32_t missing = ctl->self < ctl->num_members ? ctl->num_members - 1 - ctl->self : 0;
    while (missing > 0) {
        struct pollfd pfd = {listen_fd, POLLIN, 0};
        int ms = ctl_remaining_ms(deadline);
        if (ms > 0 && poll(&pfd, 1, ms) > 0) {
            missing -= (uint32_t)ctl_accept_one(ctl, listen_fd, deadline);
            continue;
        }
        if (ms > 0)
            continue;
        char names[256] = "";
        for (uint32_t j = ctl->self + 1; j < ctl->num_members; j++)
            if (ctl->fds[j] < 0) {
                size_t used = strlen(names);
                snprintf(names + used, sizeof names - used, "%s%u", used ? ", " : "",
                         ctl->members[j].id);
            }
        return sp_error(SPINDLE_ETIMEDOUT, "control: members %s never connected", names);
    }
    return 0;
}

static const struct ctl_vtable ctl_tcp_vtable;

static void ctl_write(struct ctl_tcp *ctl, uint32_t j);
static void ctl_progress(struct ctl_tcp *ctl, int ms);

static void ctl_tcp_close(struct ctl *base)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    /* Give what is still queued a moment to leave (a peer may be waiting
     * for it), without waiting on a peer that does not read. */
    uint64_t deadline = sp_now_ns() + 1000000000ull;
    for (;;) {
        bool pending = false;
        for (uint32_t j = 0; j < CTL_MAX_MEMBERS; j++)
            if (ctl->peers[j].fd >= 0 && ctl->peers[j].out_sent < ctl->peers[j].out_len)
                pending = true;
        if (!pending || ctl_remaining_ms(deadline) == 0)
            break;
        ctl_progress(ctl, 5);
    }
    if (ctl->listen_fd >= 0)
        close(ctl->listen_fd);
    if (ctl->join_fd >= 0)
        close(ctl->join_fd);
    free(ctl->join);
    for (uint32_t j = 0; j < CTL_MAX_MEMBERS; j++) {
        if (ctl->fds[j] >= 0)
            close(ctl->fds[j]);
        free((char *)ctl->members[j].host);
        struct ctl_peer *p = &ctl->peers[j];
        if (p->fd >= 0)
            close(p->fd);
        free(p->out);
        free(p->body);
        for (uint32_t i = 0; i < p->box_len; i++)
            free(p->box[i].data);
    }
    pthread_mutex_destroy(&ctl->lock);
    free(ctl->fds);
    free(ctl->peers);
    free(ctl->members);
    free(ctl);
}

static int ctl_tcp_setup(struct ctl_tcp *ctl, int timeout_ms)
{
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 30000) * 1000000ull;
    int listen_fd = -1;
    int rc = ctl_listen(&ctl->members[ctl->self], &listen_fd);
    for (uint32_t j = 0; rc == 0 && j < ctl->self; j++)
        if (ctl->members[j].host != NULL)
            rc = ctl_connect(ctl, j, deadline);
    if (rc == 0)
        rc = ctl_accept_all(ctl, listen_fd, deadline);
    if (rc != 0 && listen_fd >= 0)
        close(listen_fd);
    if (rc == 0) {
        /* Kept for join requests and joiners (accepted during progress). */
        fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
        ctl->listen_fd = listen_fd;
    }
    for (uint32_t j = 0; rc == 0 && j < CTL_MAX_MEMBERS; j++) {
        if (ctl->fds[j] >= 0)
            fcntl(ctl->fds[j], F_SETFL, fcntl(ctl->fds[j], F_GETFL) | O_NONBLOCK);
        /* The connection now belongs to the framed exchange (closed there). */
        ctl->peers[j].fd = ctl->fds[j];
        ctl->peers[j].used = ctl->fds[j] >= 0 || j == ctl->self;
        ctl->fds[j] = -1;
    }
    return rc;
}

/* Opens the exchange for slot self_index: members[] has `slots` entries,
 * those with a NULL host are absent (gone, or not yet joined); the first
 * num_initial entries are the members that started the group. */
static int ctl_tcp_open(const char *group_name, const struct ctl_member *members, uint32_t slots,
                        uint32_t num_initial, uint32_t self_index, int timeout_ms, struct ctl **out)
{
    struct ctl_tcp *ctl = calloc(1, sizeof *ctl);
    if (ctl != NULL) {
        ctl->fds = malloc(CTL_MAX_MEMBERS * sizeof *ctl->fds);
        ctl->peers = calloc(CTL_MAX_MEMBERS, sizeof *ctl->peers);
        ctl->members = calloc(CTL_MAX_MEMBERS, sizeof *ctl->members);
    }
    if (ctl == NULL || ctl->fds == NULL || ctl->peers == NULL || ctl->members == NULL) {
        if (ctl != NULL) {
            free(ctl->fds);
            free(ctl->peers);
            free(ctl->members);
        }
        free(ctl);
        return sp_error(SPINDLE_ENOMEM, "control: out of memory for %u members", slots);
    }
    ctl->base.vt = &ctl_tcp_vtable;
    ctl->num_members = num_initial;
    ctl->self = self_index;
    ctl->group = group_name == NULL ? 0 : sp_crc32c(0, group_name, strlen(group_name));
    ctl->listen_fd = -1;
    ctl->join_fd = -1;
    pthread_mutex_init(&ctl->lock, NULL);
    int rc = 0;
    for (uint32_t j = 0; j < CTL_MAX_MEMBERS; j++) {
        ctl->fds[j] = -1;
        ctl->peers[j].fd = -1;
        ctl->members[j].id = j;
        if (j >= slots || members[j].host == NULL)
            continue;
        ctl->members[j] = members[j];
        ctl->members[j].host = strdup(members[j].host);
        if (ctl->members[j].host == NULL)
            rc = sp_error(SPINDLE_ENOMEM, "control: out of memory");
    }
    if (rc == 0)
        rc = ctl_tcp_setup(ctl, timeout_ms);
    if (rc != 0) {
        ctl_tcp_close(&ctl->base);
        return rc;
    }
    *out = &ctl->base;
    return 0;
}

int ctl_open_tcp(const char *group_name, const struct ctl_member *members, uint32_t num_members,
                 uint32_t self_index, int timeout_ms, struct ctl **out)
{
    if (members == NULL || out == NULL || num_members == 0 || self_index >= num_members ||
        num_members > CTL_MAX_MEMBERS)
        return sp_error(SPINDLE_EINVAL, "control: self index %u outside %u members (at most %u)",
                        self_index, num_members, CTL_MAX_MEMBERS);
    for (uint32_t j = 0; j < num_members; j++)
        if (members[j].host == NULL || members[j].host[0] == '\0' || members[j].port == 0)
            return sp_error(SPINDLE_EINVAL, "control: member %u needs a host and a non-zero port",
                            members[j].id);
    return ctl_tcp_open(group_name, members, num_members, num_members, self_index, timeout_ms, out);
}

int ctl_open_tcp_joiner(const char *group_name, const struct ctl_member *members,
                        uint32_t num_initial, uint32_t self_index, int timeout_ms, struct ctl **out)
{
    if (members == NULL || out == NULL || num_initial == 0 || self_index < num_initial ||
        self_index >= CTL_MAX_MEMBERS)
        return sp_error(SPINDLE_EINVAL,
                        "control: a joiner's slot %u must be at least the %u initial members and "
                        "below %u",
                        self_index, num_initial, CTL_MAX_MEMBERS);
    const struct ctl_member *me = &members[self_index];
    if (me->host == NULL || me->host[0] == '\0' || me->port == 0)
        return sp_error(SPINDLE_EINVAL, "control: a joiner needs its own host and a non-zero port");
    return ctl_tcp_open(group_name, members, self_index + 1, num_initial, self_index, timeout_ms,
                        out);
}

int ctl_join_ask(const char *group_name, const char *host, uint16_t port, const void *request,
                 size_t length, void **reply, size_t *reply_length, int timeout_ms)
{
    if (host == NULL || reply == NULL || reply_length == NULL || length > CTL_JOIN_REQUEST_MAX)
        return sp_error(SPINDLE_EINVAL, "control: join request of %zu bytes (at most %u) or no host",
                        length, CTL_JOIN_REQUEST_MAX);
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 30000) * 1000000ull;
    struct ctl_hello hello = {CTL_HELLO_MAGIC, CTL_VERSION, CTL_JOIN_FROM, 0,
                              group_name == NULL ? 0
                                                 : sp_crc32c(0, group_name, strlen(group_name))};
    int fd = -1;
    int rc = ctl_dial("the join contact", host, port, &hello, deadline, &fd);
    if (rc != 0)
        return rc;
    rc = ctl_write_frame(fd, CTL_JOIN_FROM, request, length, deadline);
    const char *why = "the connection broke";
    uint8_t *answer = NULL;
    if (rc == 0)
        rc = ctl_read_frame(fd, CTL_BLOB_MAX, deadline, &answer, reply_length, &why);
    close(fd);
    if (rc != 0)
        return sp_error(SPINDLE_EUNREACH, "control: %s:%u did not answer the join request: %s", host,
                        port, why);
    *reply = answer;
    return 0;
}

/* ---- framed exchange: outgoing queues, incoming mailboxes ------------- */

/* Appends bytes to member j's outgoing queue. Lock held. */
static int ctl_queue(struct ctl_tcp *ctl, uint32_t j, const void *bytes, size_t length)
{
    struct ctl_peer *p = &ctl->peers[j];
    if (p->out_len + length > p->out_cap) {
        size_t cap = p->out_cap ? p->out_cap : 256;
        while (cap < p->out_len + length)
            cap *= 2;
        uint8_t *grown = realloc(p->out, cap);
        if (grown == NULL)
            return sp_error(SPINDLE_ENOMEM, "control: out of memory queueing %zu bytes", length);
        p->out = grown;
        p->out_cap = cap;
    }
    memcpy(p->out + p->out_len, bytes, length);
    p->out_len += length;
    return 0;
}

/* Drops member j's connection, remembering why (error code and text). */
static void ctl_drop(struct ctl_tcp *ctl, uint32_t j, int error, const char *why)
{
    struct ctl_peer *p = &ctl->peers[j];
    if (p->fd < 0)
        return;
    if (error == SPINDLE_EPROTO)
        SP_LOG_WARNING("control", "member %u: dropping the connection of member %u: %s",
                       ctl->members[ctl->self].id, ctl->members[j].id, why);
    close(p->fd);
    p->fd = -1;
    p->error = error;
    snprintf(p->why, sizeof p->why, "%s", why);
    free(p->body);
    p->body = NULL;
}

/* Stores a complete frame's blob as member j's latest for its tag. */
static void ctl_store(struct ctl_tcp *ctl, uint32_t j)
{
    struct ctl_peer *p = &ctl->peers[j];
    struct ctl_msg *slot = NULL;
    for (uint32_t i = 0; i < p->box_len; i++)
        if (p->box[i].tag == p->hdr.tag)
            slot = &p->box[i];
    if (slot == NULL) {
        if (p->box_len == CTL_BOX_TAGS) {
            free(p->box[0].data);
            memmove(p->box, p->box + 1, (CTL_BOX_TAGS - 1) * sizeof *p->box);
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
static void ctl_read(struct ctl_tcp *ctl, uint32_t j)
{
    struct ctl_peer *p = &ctl->peers[j];
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
            snprintf(why, sizeof why, "member %u %s", ctl->members[j].id,
                     n == 0 ? "closed its connection" : strerror(errno));
            ctl_drop(ctl, j, SPINDLE_EUNREACH, why);
            return;
        }
        p->got += (size_t)n;
        if (p->got == sizeof p->hdr) {
            const struct ctl_frame *f = &p->hdr;
            if (f->magic != CTL_FRAME_MAGIC)
                snprintf(why, sizeof why, "member %u sent garbage (magic 0x%08x)",
                         ctl->members[j].id, f->magic);
            else if (f->from != j)
                snprintf(why, sizeof why, "member %u claims to be index %u", ctl->members[j].id,
                         f->from);
            else if (f->length > CTL_BLOB_MAX)
                snprintf(why, sizeof why, "member %u sent an oversized blob of %u bytes (limit %u)",
                         ctl->members[j].id, f->length, CTL_BLOB_MAX);
            else
                why[0] = '\0';
            if (why[0] != '\0') {
                ctl_drop(ctl, j, SPINDLE_EPROTO, why);
                return;
            }
            p->body = malloc(f->length > 0 ? f->length : 1);
            if (p->body == NULL) {
                ctl_drop(ctl, j, SPINDLE_ENOMEM, "out of memory for a blob");
                return;
            }
        }
        if (p->got >= sizeof p->hdr && p->got == sizeof p->hdr + p->hdr.length) {
            if (sp_crc32c(0, p->body, p->hdr.length) != p->hdr.crc) {
                snprintf(why, sizeof why, "member %u sent a corrupt blob for tag %u",
                         ctl->members[j].id, p->hdr.tag);
                ctl_drop(ctl, j, SPINDLE_EPROTO, why);
                return;
            }
            ctl_store(ctl, j);
            p->got = 0;
        }
    }
}

/* Writes queued bytes to member j without blocking. */
static void ctl_write(struct ctl_tcp *ctl, uint32_t j)
{
    struct ctl_peer *p = &ctl->peers[j];
    while (p->fd >= 0 && p->out_sent < p->out_len) {
        ssize_t n = send(p->fd, p->out + p->out_sent, p->out_len - p->out_sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        if (n < 0) {
            char why[160];
            snprintf(why, sizeof why, "sending to member %u failed: %s", ctl->members[j].id,
                     strerror(errno));
            ctl_drop(ctl, j, SPINDLE_EUNREACH, why);
            return;
        }
        p->out_sent += (size_t)n;
    }
    if (p->out_sent == p->out_len)
        p->out_sent = p->out_len = 0;
}

/* One round of progress on every connection: waits up to ms for any. */
static void ctl_progress(struct ctl_tcp *ctl, int ms)
{
    struct pollfd pfds[CTL_MAX_MEMBERS + 1];
    uint32_t n = CTL_MAX_MEMBERS;
    for (uint32_t j = 0; j < n; j++) {
        const struct ctl_peer *p = &ctl->peers[j];
        pfds[j] =
            (struct pollfd){p->fd, (short)(POLLIN | (p->out_len > p->out_sent ? POLLOUT : 0)), 0};
    }
    pfds[n] = (struct pollfd){ctl->listen_fd, POLLIN, 0};
    if (poll(pfds, n + 1, ms) <= 0)
        return;
    if (pfds[n].fd >= 0 && (pfds[n].revents & POLLIN))
        ctl_accept_late(ctl);
    for (uint32_t j = 0; j < n; j++) {
        if (pfds[j].fd < 0 || pfds[j].revents == 0)
            continue;
        if (pfds[j].revents & POLLOUT)
            ctl_write(ctl, j);
        if (pfds[j].revents & (POLLIN | POLLHUP | POLLERR))
            ctl_read(ctl, j);
    }
}

static int ctl_tcp_publish(struct ctl *base, uint32_t tag, const void *blob, size_t length,
                           uint64_t to)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    if (length > CTL_BLOB_MAX)
        return sp_error(SPINDLE_EINVAL, "control: blob of %zu bytes exceeds %u", length, CTL_BLOB_MAX);
    struct ctl_frame f = {CTL_FRAME_MAGIC, tag, ctl->self, (uint32_t)length,
                          sp_crc32c(0, blob, length)};
    int rc = 0;
    pthread_mutex_lock(&ctl->lock);
    for (uint32_t j = 0; j < CTL_MAX_MEMBERS && rc == 0; j++) {
        if (j == ctl->self || ((to >> j) & 1) == 0 || ctl->peers[j].fd < 0)
            continue;
        rc = ctl_queue(ctl, j, &f, sizeof f);
        if (rc == 0)
            rc = ctl_queue(ctl, j, blob, length);
        if (rc == 0)
            ctl_write(ctl, j);
    }
    pthread_mutex_unlock(&ctl->lock);
    return rc;
}

/* Copies member j's latest blob of tag: 1 when copied, 0 when none yet, an
 * error when its length differs. Lock held. */
static int ctl_take(struct ctl_tcp *ctl, uint32_t j, uint32_t tag, void *out, size_t length)
{
    const struct ctl_peer *p = &ctl->peers[j];
    for (uint32_t i = 0; i < p->box_len; i++) {
        if (p->box[i].tag != tag)
            continue;
        if (p->box[i].length != length)
            return sp_error(SPINDLE_EPROTO, "control: member %u sent %u bytes for tag %u, expected %zu",
                            ctl->members[j].id, p->box[i].length, tag, length);
        memcpy(out, p->box[i].data, length);
        return 1;
    }
    return 0;
}

/* collect with member j's blob at all + j * stride (stride 0: one member). */
static int ctl_collect_at(struct ctl *base, uint32_t tag, uint64_t from, void *all, size_t length,
                          size_t stride, int timeout_ms, uint64_t *have)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    uint64_t got = 0, want = from & ~(1ull << ctl->self);
    int rc = 0;
    for (;;) {
        pthread_mutex_lock(&ctl->lock);
        for (uint32_t j = 0; j < CTL_MAX_MEMBERS && rc == 0; j++) {
            if (((want >> j) & 1) == 0 || ((got >> j) & 1) != 0)
                continue;
            int r = ctl_take(ctl, j, tag, (uint8_t *)all + (size_t)j * stride, length);
            if (r < 0)
                rc = r;
            else if (r == 1)
                got |= 1ull << j;
            else if (ctl->peers[j].fd < 0 && ctl->peers[j].used) /* never used: may join */
                rc = sp_error(ctl->peers[j].error ? ctl->peers[j].error : SPINDLE_EUNREACH,
                              "control: member %u is gone: %s", ctl->members[j].id, ctl->peers[j].why);
        }
        /* Done when every blob is here and what this member queued for
         * them has left too (they may be waiting for it). */
        bool flushed = true;
        for (uint32_t j = 0; j < CTL_MAX_MEMBERS; j++)
            if (((want >> j) & 1) && ctl->peers[j].fd >= 0 &&
                ctl->peers[j].out_sent < ctl->peers[j].out_len)
                flushed = false;
        int ms = ctl_remaining_ms(deadline);
        if (rc == 0 && (got != want || !flushed) && ms > 0)
            ctl_progress(ctl, ms < 5 ? ms : 5); /* short slices: others share the lock */
        pthread_mutex_unlock(&ctl->lock);
        if (rc != 0 || (got == want && flushed))
            break;
        if (ms == 0) {
            char names[256] = "";
            for (uint32_t j = 0; j < CTL_MAX_MEMBERS; j++)
                if (((want & ~got) >> j) & 1) {
                    size_t used = strlen(names);
                    snprintf(names + used, sizeof names - used, "%s%u", used ? ", " : "",
                             ctl->members[j].id);
                }
            rc = sp_error(SPINDLE_ETIMEDOUT, "control: tag %u still waiting for members %s%s", tag,
                          names, got == want ? " (still sending to them)" : "");
            break;
        }
    }
    if (have != NULL)
        *have = got;
    return rc;
}

static int ctl_tcp_collect(struct ctl *base, uint32_t tag, uint64_t from, void *all, size_t length,
                           int timeout_ms, uint64_t *have)
{
    return ctl_collect_at(base, tag, from, all, length, length, timeout_ms, have);
}

static int ctl_tcp_collect_one(struct ctl *base, uint32_t tag, uint32_t from, void *out,
                               size_t length, int timeout_ms)
{
    if (from >= CTL_MAX_MEMBERS)
        return sp_error(SPINDLE_EINVAL, "control: no member %u", from);
    return ctl_collect_at(base, tag, 1ull << from, out, length, 0, timeout_ms, NULL);
}

static int ctl_tcp_allgather(struct ctl *base, uint32_t tag, const void *mine, size_t length,
                             void *all, int timeout_ms)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    uint64_t everyone = ctl->num_members >= 64 ? UINT64_MAX : (1ull << ctl->num_members) - 1;
    memcpy((uint8_t *)all + (size_t)ctl->self * length, mine, length);
    int rc = ctl_tcp_publish(base, tag, mine, length, everyone);
    if (rc == 0)
        rc = ctl_tcp_collect(base, tag, everyone, all, length, timeout_ms > 0 ? timeout_ms : 30000,
                             NULL);
    return rc;
}

static int ctl_tcp_join_poll(struct ctl *base, int timeout_ms, void *request, size_t capacity,
                             size_t *length)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    pthread_mutex_lock(&ctl->lock);
    if (ctl->join_fd < 0)
        ctl_progress(ctl, timeout_ms);
    int rc = 0;
    if (ctl->join_fd >= 0) {
        if (ctl->join_len > capacity) {
            SP_LOG_WARNING("control", "member %u: refusing a join request of %zu bytes", ctl->self,
                           ctl->join_len);
            close(ctl->join_fd);
            ctl->join_fd = -1;
            free(ctl->join);
            ctl->join = NULL;
        } else {
            memcpy(request, ctl->join, ctl->join_len);
            *length = ctl->join_len;
            rc = 1;
        }
    }
    pthread_mutex_unlock(&ctl->lock);
    return rc;
}

static int ctl_tcp_join_answer(struct ctl *base, const void *reply, size_t length)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    pthread_mutex_lock(&ctl->lock);
    int fd = ctl->join_fd;
    ctl->join_fd = -1;
    free(ctl->join);
    ctl->join = NULL;
    pthread_mutex_unlock(&ctl->lock);
    if (fd < 0)
        return sp_error(SPINDLE_EINVAL, "control: no join request is pending");
    int rc = ctl_write_frame(fd, ctl->self, reply, length, sp_now_ns() + 2000000000ull);
    close(fd);
    return rc == 0 ? 0 : sp_error(SPINDLE_EUNREACH, "control: the joiner went away before the answer");
}

static void ctl_tcp_add_member(struct ctl *base, uint32_t id, const char *host, uint16_t port)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    if (id >= CTL_MAX_MEMBERS || host == NULL)
        return;
    pthread_mutex_lock(&ctl->lock);
    char *copy = strdup(host);
    if (copy != NULL) {
        free((char *)ctl->members[id].host);
        ctl->members[id].host = copy;
        ctl->members[id].port = port;
    }
    pthread_mutex_unlock(&ctl->lock);
}

static const struct ctl_vtable ctl_tcp_vtable = {
    .join_poll = ctl_tcp_join_poll,
    .collect_one = ctl_tcp_collect_one,
    .join_answer = ctl_tcp_join_answer,
    .add_member = ctl_tcp_add_member,
    .allgather = ctl_tcp_allgather,
    .publish = ctl_tcp_publish,
    .collect = ctl_tcp_collect,
    .close = ctl_tcp_close,
};
