/*
 * TCP control channel, set-up: every member listens on its own host:port;
 * member i connects to every member j < i (retrying until the deadline, as
 * peers start in any order) and accepts from every j > i, so each pair
 * shares exactly one connection. A connection opens with a two-way hello
 * (control/ctl_wire.h): the dialer names itself, the acceptor checks the
 * group, the wire and layout versions, the member count and the slot, and
 * answers with its own hello, so the dialer can check the same and name
 * both versions when the builds differ. Set-up accepts one connection at
 * a time, each given at most CTL_HELLO_MS, before the channel is shared;
 * once it runs, the kept listener's connections are taken without blocking
 * and under caps (ctl_tcp_accept.c).
 */
#include <arpa/inet.h>
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

#include "control/ctl_tcp_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

int ctl_remaining_ms(uint64_t deadline)
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
        return sp_error(SPINDLE_EUNREACH, "control: cannot resolve '%s': %s", host,
                        gai_strerror(rc));
    return 0;
}

/* True for 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104. */
static bool ctl_is_loopback(const struct sockaddr *addr)
{
    if (addr->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (addr->sa_family == AF_INET6) {
        const struct in6_addr *in6 = &((const struct sockaddr_in6 *)addr)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(in6) || (IN6_IS_ADDR_V4MAPPED(in6) && in6->s6_addr[12] == 127);
    }
    return false;
}

static int ctl_listen(const struct ctl_member *me, bool keyed, int *out)
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
            return sp_error(SPINDLE_EADDRINUSE, "control: %s:%u is already in use", me->host,
                            me->port);
        return sp_error(SPINDLE_EIO, "control: cannot listen on %s:%u: %s", me->host, me->port,
                        strerror(err));
    }
    if (!keyed && !ctl_is_loopback(ai->ai_addr))
        SP_LOG_WARNING("control",
                       "listening on %s:%u without a group key: anyone who reaches this address "
                       "can speak the group's control protocol (set key_file; docs/SECURITY.md)",
                       me->host, me->port);
    freeaddrinfo(ai);
    *out = fd;
    return 0;
}

int ctl_io(int fd, void *buf, size_t len, int sending, uint64_t deadline)
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

void ctl_tune(int fd, bool nonblock)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (nonblock)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

struct ctl_hello ctl_tcp_hello(const struct ctl_tcp *ctl, uint32_t from)
{
    struct ctl_hello hello = {from, ctl->num_members, ctl->group, ctl->versions, ctl->admission};
    return hello;
}

/* Authenticates (with a key), sends hello on a fresh connection and checks
 * the answering hello. */
static int ctl_handshake(int fd, const char *who, const char *host, uint16_t port,
                         const struct ctl_hello *hello, const struct ctl_versions *versions,
                         const struct ctl_keyring *keys, uint64_t deadline,
                         struct ctl_hello *answer, struct ctl_sess *sess)
{
    char label[96];
    snprintf(label, sizeof label, "control: %s at %s:%u", who, host, port);
    const char *why = NULL;
    int rc = ctl_auth_dial(fd, keys, deadline, sess, &why);
    if (rc != 0)
        return sp_error(rc, "%s failed authentication with the group key: %s", label, why);
    uint8_t bytes[CTL_HELLO_SIZE];
    ctl_wire_encode_hello(hello, bytes);
    rc = ctl_sess_write(sess, fd, bytes, sizeof bytes, deadline);
    if (rc == 0)
        rc = ctl_sess_read(sess, fd, bytes, sizeof bytes, deadline);
    if (rc == SPINDLE_EPROTO)
        return sp_error(SPINDLE_EPROTO, "%s sent a refused record: %s", label, sess->why);
    if (rc != 0)
        return sp_error(SPINDLE_EUNREACH, "%s dropped the connection during the handshake%s", label,
                        keys != NULL && keys->count > 0 ? "" : " (it may need a group key)");
    if (ctl_wire_decode_hello(bytes, sizeof bytes, answer) < 0)
        return sp_error(SPINDLE_EPROTO, "%s answered with a bad hello: %s", label,
                        spindle_errmsg());
    rc = ctl_hello_compatible(answer, versions, label);
    if (rc == 0 && hello->group != 0 && answer->group != hello->group)
        rc = sp_error(SPINDLE_EUNREACH, "%s belongs to another group", label);
    return rc;
}

int ctl_dial(const char *who, const char *host, uint16_t port, const struct ctl_hello *hello,
             const struct ctl_versions *versions, const struct ctl_keyring *keys, uint64_t deadline,
             int *fd_out, struct ctl_hello *answer, struct ctl_sess *sess)
{
    struct addrinfo *ai = NULL;
    int rc = ctl_resolve(host, port, 0, &ai);
    if (rc != 0)
        return sp_error(SPINDLE_EUNREACH, "control: %s at %s:%u is unreachable: %s", who, host,
                        port, spindle_errmsg());
    int last_err = 0;
    while (ctl_remaining_ms(deadline) > 0) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            freeaddrinfo(ai);
            ctl_tune(fd, false);
            rc = ctl_handshake(fd, who, host, port, hello, versions, keys, deadline, answer, sess);
            if (rc != 0) {
                ctl_sess_clear(sess);
                close(fd);
                return rc;
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

/* Connects to member j (a lower-indexed one, or any for a joiner),
 * retrying while it is not yet up. */
static int ctl_connect(struct ctl_tcp *ctl, uint32_t j, uint64_t deadline)
{
    const struct ctl_member *m = &ctl->members[j];
    struct ctl_hello hello = ctl_tcp_hello(ctl, ctl->self), answer;
    char who[32];
    snprintf(who, sizeof who, "member %u", m->id);
    int rc = ctl_dial(who, m->host, m->port, &hello, &ctl->versions, &ctl->keys, deadline,
                      &ctl->fds[j], &answer, &ctl->peers[j].sess);
    if (rc == 0 && answer.from != j) {
        ctl_sess_clear(&ctl->peers[j].sess);
        close(ctl->fds[j]);
        ctl->fds[j] = -1;
        rc = sp_error(SPINDLE_EUNREACH, "control: %s at %s:%u answered as slot %u, not %u", who,
                      m->host, m->port, answer.from, j);
    }
    if (rc == 0)
        ctl->peers[j].admission = answer.admission;
    return rc;
}

const char *ctl_setup_refusal(const struct ctl_tcp *ctl, const struct ctl_hello *hello, char *why,
                              size_t cap)
{
    if (hello->group != ctl->group)
        return "a member of another group";
    if (ctl_hello_compatible(hello, &ctl->versions, "the connecting member") < 0) {
        snprintf(why, cap, "%s", spindle_errmsg());
        return why;
    }
    if (hello->num_members != ctl->num_members)
        return "another member count";
    if (hello->from <= ctl->self || hello->from >= ctl->num_members)
        return "a member index it may not connect as";
    if (ctl->fds[hello->from] >= 0)
        return "a member index already connected";
    return NULL;
}

const char *ctl_setup_take(struct ctl_tcp *ctl, struct ctl_pending *p)
{
    uint32_t from = p->hello.from;
    ctl->fds[from] = p->fd;
    ctl->peers[from].sess = p->sess;
    ctl->peers[from].sess.rec_max = 0; /* a member: blobs up to CTL_BLOB_MAX */
    p->fd = -1;
    memset(&p->sess, 0, sizeof p->sess); /* passed on, not to be cleared */
    return NULL;
}

/* The members that have not connected yet, by id, into names. */
static uint32_t ctl_setup_missing(const struct ctl_tcp *ctl, char *names, size_t cap)
{
    uint32_t missing = 0;
    names[0] = '\0';
    for (uint32_t j = ctl->self + 1; !ctl->joiner && j < ctl->num_members; j++)
        if (ctl->fds[j] < 0) {
            size_t used = strlen(names);
            snprintf(names + used, cap - used, "%s%u", used ? ", " : "", ctl->members[j].id);
            missing++;
        }
    return missing;
}

/* Waits for the higher members to connect. What connects goes through the
 * pending table, as after set-up (ctl_tcp_accept.c), so that a stranger
 * that connects and says nothing holds up neither the members nor the
 * deadline; ctl->setup makes it judge hellos by ctl_setup_refusal. */
static int ctl_accept_all(struct ctl_tcp *ctl, uint64_t deadline)
{
    char names[256];
    int rc = 0;
    ctl->setup = true;
    while (rc == 0 && ctl_setup_missing(ctl, names, sizeof names) > 0) {
        struct pollfd pfds[1 + CTL_PENDING_MAX];
        int ms = ctl_remaining_ms(deadline);
        if (ms == 0) {
            rc = sp_error(SPINDLE_ETIMEDOUT, "control: members %s never connected", names);
            break;
        }
        uint32_t count = ctl_pending_poll_set(ctl, pfds, &ms);
        if (poll(pfds, count, ms) > 0 || ctl_pending_any(ctl))
            ctl_pending_progress(ctl, pfds, count);
    }
    ctl->setup = false;
    return rc;
}

static void ctl_tcp_close(struct ctl *base)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    /* Give what is still queued a moment to leave (a peer may be waiting
     * for it), without waiting on a peer that does not read. */
    uint64_t deadline = sp_now_ns() + 1000000000ull;
    pthread_mutex_lock(&ctl->lock);
    for (;;) {
        bool pending = false;
        for (uint32_t j = 0; j < CTL_MAX_MEMBERS; j++)
            if (ctl->peers[j].fd >= 0 && ctl->peers[j].out_sent < ctl->peers[j].out_len)
                pending = true;
        if (!pending || ctl_remaining_ms(deadline) == 0)
            break;
        ctl_progress(ctl, 5);
    }
    pthread_mutex_unlock(&ctl->lock);
    if (ctl->listen_fd >= 0)
        close(ctl->listen_fd);
    ctl_pending_close_all(ctl);
    if (ctl->join_fd >= 0)
        close(ctl->join_fd);
    ctl_sess_clear(&ctl->join_sess);
    ctl_keyring_clear(&ctl->keys);
    free(ctl->join);
    for (uint32_t j = 0; j < CTL_MAX_MEMBERS; j++) {
        if (ctl->fds[j] >= 0)
            close(ctl->fds[j]);
        free((char *)ctl->members[j].host);
        ctl_reset_slot(ctl, j);
    }
    pthread_mutex_destroy(&ctl->lock);
    free(ctl->fds);
    free(ctl->peers);
    free(ctl->members);
    free(ctl->pending);
    free(ctl);
}

static int ctl_tcp_setup(struct ctl_tcp *ctl, int timeout_ms)
{
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 30000) * 1000000ull;
    /* Non-blocking from the start: connections are accepted through the
     * pending table, during set-up and after it (for join requests and
     * joiners); ctl_tcp_close closes it on failure. */
    int rc = ctl_listen(&ctl->members[ctl->self], ctl->keys.count > 0, &ctl->listen_fd);
    if (rc == 0)
        fcntl(ctl->listen_fd, F_SETFL, fcntl(ctl->listen_fd, F_GETFL) | O_NONBLOCK);
    /* Members dial the lower slots; a joiner dials every member (its id
     * may be a reused one, below theirs) and waits for nobody. */
    uint32_t dial_below = ctl->joiner ? CTL_MAX_MEMBERS : ctl->self;
    for (uint32_t j = 0; rc == 0 && j < dial_below; j++)
        if (j != ctl->self && ctl->members[j].host != NULL)
            rc = ctl_connect(ctl, j, deadline);
    if (rc == 0)
        rc = ctl_accept_all(ctl, deadline);
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

static int ctl_tcp_set_keys(struct ctl *base, const struct ctl_keyring *keys)
{
    struct ctl_tcp *ctl = (struct ctl_tcp *)base;
    pthread_mutex_lock(&ctl->lock);
    int rc = 0;
    if (ctl->keys.count == 0)
        rc = sp_error(SPINDLE_EINVAL, "control: the channel was opened without a group key; "
                                      "a key cannot be added to a running group");
    else
        ctl->keys = *keys;
    pthread_mutex_unlock(&ctl->lock);
    return rc;
}

static const struct ctl_vtable ctl_tcp_vtable = {
    .allgather = ctl_tcp_allgather,
    .publish = ctl_tcp_publish,
    .collect = ctl_tcp_collect,
    .close = ctl_tcp_close,
    .join_poll = ctl_tcp_join_poll,
    .join_answer = ctl_tcp_join_answer,
    .add_member = ctl_tcp_add_member,
    .remove_member = ctl_tcp_remove_member,
    .expect_member = ctl_tcp_expect_member,
    .collect_one = ctl_tcp_collect_one,
    .take_one = ctl_tcp_take_one,
    .set_keys = ctl_tcp_set_keys,
};

static struct ctl_tcp *ctl_tcp_alloc(void)
{
    struct ctl_tcp *ctl = calloc(1, sizeof *ctl);
    if (ctl != NULL) {
        ctl->fds = malloc(CTL_MAX_MEMBERS * sizeof *ctl->fds);
        ctl->peers = calloc(CTL_MAX_MEMBERS, sizeof *ctl->peers);
        ctl->members = calloc(CTL_MAX_MEMBERS, sizeof *ctl->members);
        ctl->pending = calloc(CTL_PENDING_MAX, sizeof *ctl->pending);
    }
    if (ctl == NULL || ctl->fds == NULL || ctl->peers == NULL || ctl->members == NULL ||
        ctl->pending == NULL) {
        if (ctl != NULL) {
            free(ctl->fds);
            free(ctl->peers);
            free(ctl->members);
            free(ctl->pending);
        }
        free(ctl);
        return NULL;
    }
    return ctl;
}

/* Opens the exchange for slot self: members[] has `slots` entries, those
 * with a NULL host are absent (gone, or not yet joined); num_initial
 * members started the group. admission is 0 for those, a joiner's own
 * otherwise. */
static int ctl_tcp_open(const char *group_name, const struct ctl_member *members, uint32_t slots,
                        uint32_t num_initial, uint32_t self, uint64_t admission,
                        const struct ctl_versions *versions, const struct ctl_keyring *keys,
                        int timeout_ms, struct ctl **out)
{
    if (keys != NULL && keys->count > CTL_KEYS_MAX)
        return sp_error(SPINDLE_EINVAL, "control: %u keys (at most %u)", keys->count, CTL_KEYS_MAX);
    int rc = keys != NULL && keys->count > 0 ? ctl_crypto_init() : 0;
    if (rc != 0)
        return rc;
    struct ctl_tcp *ctl = ctl_tcp_alloc();
    if (ctl == NULL)
        return sp_error(SPINDLE_ENOMEM, "control: out of memory for %u members", slots);
    ctl->base.vt = &ctl_tcp_vtable;
    ctl->num_members = num_initial;
    ctl->self = self;
    ctl->admission = admission;
    ctl->joiner = admission != 0;
    ctl->group = ctl_group_hash(group_name);
    ctl->versions = *versions;
    if (keys != NULL)
        ctl->keys = *keys;
    ctl->listen_fd = -1;
    ctl->join_fd = -1;
    ctl_pending_init(ctl);
    pthread_mutex_init(&ctl->lock, NULL);
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
                 uint32_t self, const struct ctl_versions *versions, const struct ctl_keyring *keys,
                 int timeout_ms, struct ctl **out)
{
    if (members == NULL || out == NULL || versions == NULL || num_members == 0 ||
        self >= num_members || num_members > CTL_MAX_MEMBERS)
        return sp_error(SPINDLE_EINVAL, "control: self index %u outside %u members (at most %u)",
                        self, num_members, CTL_MAX_MEMBERS);
    for (uint32_t j = 0; j < num_members; j++)
        if (members[j].host == NULL || members[j].host[0] == '\0' || members[j].port == 0)
            return sp_error(SPINDLE_EINVAL, "control: member %u needs a host and a non-zero port",
                            members[j].id);
    return ctl_tcp_open(group_name, members, num_members, num_members, self, 0, versions, keys,
                        timeout_ms, out);
}

int ctl_open_tcp_joiner(const char *group_name, const struct ctl_member *members,
                        uint32_t num_initial, uint32_t self, uint64_t admission,
                        const struct ctl_versions *versions, const struct ctl_keyring *keys,
                        int timeout_ms, struct ctl **out)
{
    if (members == NULL || out == NULL || versions == NULL || num_initial == 0 ||
        self >= CTL_MAX_MEMBERS || admission == 0)
        return sp_error(SPINDLE_EINVAL,
                        "control: a joiner's slot %u must be below %u, with a non-zero admission",
                        self, CTL_MAX_MEMBERS);
    const struct ctl_member *me = &members[self];
    if (me->host == NULL || me->host[0] == '\0' || me->port == 0)
        return sp_error(SPINDLE_EINVAL, "control: a joiner needs its own host and a non-zero port");
    return ctl_tcp_open(group_name, members, CTL_MAX_MEMBERS, num_initial, self, admission,
                        versions, keys, timeout_ms, out);
}
