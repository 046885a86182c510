/*
 * TCP control channel, late accepts: after set-up the listening socket
 * stays in every round of progress (ctl_progress), and what it accepts is
 * a stranger until it has identified itself. Strangers must not be able
 * to hold the channel or flood it, so an accepted connection is never
 * waited on: it is made non-blocking and put in a table of pending
 * connections, and each round of progress polls them with the members'
 * connections and moves each one as far as its socket allows, one stage
 * at a time (struct ctl_pending): with a key the handshake
 * (control/ctl_auth.h: nonce in, nonce out, proof in, proof out), then the
 * hello in and this member's own out, then for a join request its one
 * frame. An identified connection passes to ctl_tcp_join.c.
 *
 * Limits (control/ctl_tcp_impl.h): at most CTL_PENDING_MAX pending in all
 * and CTL_PENDING_PER_SOURCE from one source, a connection beyond the
 * per-source cap being closed at once (reset, not queued), one beyond the
 * total taking the place of the oldest entry of the busiest source; each
 * must finish within CTL_HELLO_MS of its accept or it is closed; one that
 * breaks the protocol is closed when it does; a pending connection makes
 * the member allocate no more than its join request (CTL_JOIN_REQUEST_MAX),
 * its session taking no larger record. Every refusal is logged with its reason, at
 * most CTL_REFUSAL_LOG_PER_S lines a second.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/ctl_tcp_impl.h"
#include "util/clock.h"
#include "util/crc32c.h"
#include "util/error.h"
#include "util/log.h"

/* Largest record a pending connection's session takes: its join request
 * is the largest thing it may send. */
#define CTL_PENDING_RECORD_MAX (CTL_JOIN_REQUEST_MAX + CTL_SEAL_TAG)
/* Connections accepted in one round at most (the rest wait in the
 * listener's backlog for the next round). */
#define CTL_ACCEPTS_PER_ROUND (2 * CTL_PENDING_MAX)

void ctl_pending_init(struct ctl_tcp *ctl)
{
    for (uint32_t i = 0; i < CTL_PENDING_MAX; i++)
        ctl->pending[i].fd = -1;
}

/* Closes fd with a reset: no lingering state on this side for a peer
 * that is refused before it said anything worth an answer. */
static void ctl_close_reset(int fd)
{
    struct linger reset = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    close(fd);
}

static void ctl_pending_free(struct ctl_pending *p, bool reset)
{
    if (p->fd >= 0 && reset)
        ctl_close_reset(p->fd);
    else if (p->fd >= 0)
        close(p->fd);
    ctl_sess_clear(&p->sess);
    free(p->body);
    memset(p, 0, sizeof *p); /* the nonces too */
    p->fd = -1;
}

void ctl_pending_close_all(struct ctl_tcp *ctl)
{
    for (uint32_t i = 0; ctl->pending != NULL && i < CTL_PENDING_MAX; i++)
        if (ctl->pending[i].fd >= 0)
            ctl_pending_free(&ctl->pending[i], false);
}

void ctl_log_refusal(struct ctl_tcp *ctl, const char *fmt, ...)
{
    uint32_t self = ctl->members[ctl->self].id;
    uint64_t second = sp_now_ns() / 1000000000ull;
    if (second != ctl->log_second) {
        if (ctl->log_suppressed > 0)
            SP_LOG_WARNING("control", "member %u dropped %u more connections (not logged)", self,
                           ctl->log_suppressed);
        ctl->log_second = second;
        ctl->log_lines = ctl->log_suppressed = 0;
    }
    if (ctl->log_lines >= CTL_REFUSAL_LOG_PER_S) {
        ctl->log_suppressed++;
        return;
    }
    ctl->log_lines++;
    char text[384];
    va_list args;
    va_start(args, fmt);
    vsnprintf(text, sizeof text, fmt, args);
    va_end(args);
    SP_LOG_WARNING("control", "member %u dropped a connection: %s", self, text);
}

/* What CTL_PENDING_PER_SOURCE counts of addr: an IPv4 address (mapped
 * ones included) or an IPv6 /64; and its name for the log. */
static void ctl_source_of(const struct sockaddr_storage *addr, uint8_t key[16], char *name,
                          size_t cap)
{
    char text[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    memset(key, 0, 16);
    if (addr->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
        memcpy(key, &in->sin_addr, 4);
        key[15] = 4;
        inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
        port = ntohs(in->sin_port);
    } else if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
        bool mapped = IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr);
        memcpy(key, in6->sin6_addr.s6_addr + (mapped ? 12 : 0), mapped ? 4 : 8);
        key[15] = mapped ? 4 : 6;
        inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
        port = ntohs(in6->sin6_port);
    }
    snprintf(name, cap, "%s:%u", text, port);
}

static bool ctl_stage_sends(enum ctl_stage stage)
{
    return stage == CTL_AT_NONCE_OUT || stage == CTL_AT_PROOF_OUT || stage == CTL_AT_HELLO_OUT;
}

static const char *ctl_stage_name(enum ctl_stage stage)
{
    if (stage <= CTL_AT_PROOF_OUT)
        return "key handshake";
    return stage <= CTL_AT_HELLO_OUT ? "hello" : "join request";
}

/* Where the current reading stage's bytes go. */
static uint8_t *ctl_stage_target(struct ctl_pending *p)
{
    switch (p->stage) {
    case CTL_AT_NONCE:
        return p->nonce_d;
    case CTL_AT_HELLO:
        return p->hello_bytes;
    case CTL_AT_BODY:
        return p->body;
    default:
        return p->buf; /* the proof, the frame header */
    }
}

static void ctl_pending_expect(struct ctl_pending *p, enum ctl_stage stage, size_t want)
{
    p->stage = stage;
    p->want = want;
    p->done = 0;
}

/* Sets up a sending stage: bytes, sealed through the session when asked
 * (they fit in p->buf: a nonce, a proof or a sealed hello). */
static void ctl_pending_send(struct ctl_pending *p, enum ctl_stage stage, const void *bytes,
                             size_t length, bool sealed)
{
    if (sealed) {
        ctl_sess_seal(&p->sess, bytes, length, p->buf);
        length = ctl_sess_sealed_size(&p->sess, length);
    } else {
        memcpy(p->buf, bytes, length);
    }
    ctl_pending_expect(p, stage, length);
}

/* Moves the current stage's bytes without blocking: 1 once they are all
 * through, 0 when the socket takes or gives no more for now, -1 with *why
 * when the connection broke or sent a refused record. */
static int ctl_pending_io(struct ctl_pending *p, const char **why)
{
    while (p->done < p->want) {
        ssize_t n;
        if (ctl_stage_sends(p->stage))
            n = send(p->fd, p->buf + p->done, p->want - p->done, MSG_NOSIGNAL | MSG_DONTWAIT);
        else /* a pass-through session until the handshake keyed it */
            n = ctl_sess_recv(&p->sess, p->fd, ctl_stage_target(p) + p->done, p->want - p->done);
        if (n == CTL_SESS_REFUSED) {
            *why = p->sess.why;
            return -1;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 0;
        if (n <= 0) {
            *why = n == 0 ? "it closed the connection" : strerror(errno);
            return -1;
        }
        p->done += (size_t)n;
    }
    return 1;
}

/* The keyed handshake's reading stages are complete: answers them. */
static const char *ctl_pending_auth(struct ctl_tcp *ctl, struct ctl_pending *p, char *text,
                                    size_t cap)
{
    if (p->stage == CTL_AT_NONCE) {
        ctl_pending_send(p, CTL_AT_NONCE_OUT, p->nonce_a, CTL_NONCE_BYTES, false);
        return NULL;
    }
    uint8_t proof_a[CTL_PROOF_BYTES];
    const char *why = NULL;
    if (ctl_auth_answer(&ctl->keys, p->nonce_d, p->nonce_a, p->buf, proof_a, &p->sess, &why) != 0) {
        snprintf(text, cap, "a connection failed authentication: %s", why);
        return text;
    }
    p->sess.rec_max = CTL_PENDING_RECORD_MAX;
    ctl_pending_send(p, CTL_AT_PROOF_OUT, proof_a, sizeof proof_a, false);
    return NULL;
}

/* The join request's frame header is in: its body is read next. */
static const char *ctl_pending_header(struct ctl_pending *p, char *text, size_t cap)
{
    if (ctl_wire_decode_frame(p->buf, CTL_FRAME_SIZE, &p->frame) < 0) {
        snprintf(text, cap, "garbage instead of a join request (%s)", spindle_errmsg());
        return text;
    }
    if (p->frame.length > CTL_JOIN_REQUEST_MAX) {
        snprintf(text, cap, "an oversized join request of %u bytes (at most %u)", p->frame.length,
                 CTL_JOIN_REQUEST_MAX);
        return text;
    }
    p->body = malloc(p->frame.length > 0 ? p->frame.length : 1);
    if (p->body == NULL)
        return "no memory for its join request";
    ctl_pending_expect(p, CTL_AT_BODY, p->frame.length);
    return NULL;
}

/* The current stage is complete: sets up the next one, or *identified
 * once the connection said all it has to. NULL, or why it is refused. */
static const char *ctl_pending_next(struct ctl_tcp *ctl, struct ctl_pending *p, bool *identified,
                                    char *text, size_t cap)
{
    switch (p->stage) {
    case CTL_AT_NONCE:
    case CTL_AT_PROOF:
        return ctl_pending_auth(ctl, p, text, cap);
    case CTL_AT_NONCE_OUT:
        ctl_pending_expect(p, CTL_AT_PROOF, CTL_PROOF_BYTES);
        return NULL;
    case CTL_AT_PROOF_OUT:
        ctl_pending_expect(p, CTL_AT_HELLO, CTL_HELLO_SIZE);
        return NULL;
    case CTL_AT_HELLO: {
        /* Answered before it is judged, even when it will be refused: the
         * other side then names what differs (its build, its group). With
         * a key, only a peer that proved it gets this far. */
        uint8_t mine[CTL_HELLO_SIZE];
        struct ctl_hello hello = ctl_tcp_hello(ctl, ctl->self);
        ctl_wire_encode_hello(&hello, mine);
        ctl_pending_send(p, CTL_AT_HELLO_OUT, mine, sizeof mine, true);
        return NULL;
    }
    case CTL_AT_HELLO_OUT: {
        if (ctl_wire_decode_hello(p->hello_bytes, CTL_HELLO_SIZE, &p->hello) < 0) {
            snprintf(text, cap, "%s", spindle_errmsg());
            return text;
        }
        const char *why = ctl->setup ? ctl_setup_refusal(ctl, &p->hello, text, cap)
                                     : ctl_late_refusal(ctl, &p->hello, text, cap);
        if (why == NULL && !ctl->setup && p->hello.from == CTL_JOIN_FROM)
            ctl_pending_expect(p, CTL_AT_HEADER, CTL_FRAME_SIZE);
        else
            *identified = why == NULL;
        return why;
    }
    case CTL_AT_HEADER:
        return ctl_pending_header(p, text, cap);
    case CTL_AT_BODY:
        if (sp_crc32c(0, p->body, p->frame.length) != p->frame.crc)
            return "a corrupt join request";
        *identified = true;
        return NULL;
    }
    return "an unknown stage";
}

/* Advances p as far as its socket allows; closes it when it is refused. */
static void ctl_pending_step(struct ctl_tcp *ctl, struct ctl_pending *p)
{
    char text[256];
    const char *why = NULL;
    bool identified = false;
    while (why == NULL && !identified && ctl_pending_io(p, &why) == 1)
        why = ctl_pending_next(ctl, p, &identified, text, sizeof text);
    if (why == NULL && identified)
        why = ctl->setup ? ctl_setup_take(ctl, p) : ctl_late_take(ctl, p);
    if (why != NULL)
        ctl_log_refusal(ctl, "%s: %s", p->name, why);
    if (why != NULL || identified)
        ctl_pending_free(p, false);
}

/* The entry a newcomer takes when the table is full: the oldest entry of
 * the source holding the most. A stranger cannot then keep a joiner out
 * by holding the table, from however many addresses: the joiner's
 * connection gets in, and stays unless a whole table of connections from
 * sources at least as busy as its own arrives before it has said its
 * hello (milliseconds for a real one). */
static struct ctl_pending *ctl_pending_victim(struct ctl_tcp *ctl)
{
    struct ctl_pending *victim = &ctl->pending[0];
    uint32_t most = 0;
    for (uint32_t i = 0; i < CTL_PENDING_MAX; i++) {
        struct ctl_pending *p = &ctl->pending[i];
        uint32_t count = 0;
        for (uint32_t j = 0; j < CTL_PENDING_MAX; j++)
            if (memcmp(ctl->pending[j].source, p->source, sizeof p->source) == 0)
                count++;
        if (count > most || (count == most && p->deadline < victim->deadline)) {
            victim = p;
            most = count;
        }
    }
    return victim;
}

/* Takes fd (accepted from addr) into a free entry, or into the place of
 * the busiest source's oldest entry when the table is full
 * (ctl_pending_victim); closes it at once when its source holds
 * CTL_PENDING_PER_SOURCE entries. */
static void ctl_pending_add(struct ctl_tcp *ctl, int fd, const struct sockaddr_storage *addr)
{
    uint8_t source[16];
    char name[sizeof ctl->pending[0].name];
    ctl_source_of(addr, source, name, sizeof name);
    struct ctl_pending *slot = NULL;
    uint32_t same = 0;
    for (uint32_t i = 0; i < CTL_PENDING_MAX; i++) {
        struct ctl_pending *p = &ctl->pending[i];
        if (p->fd < 0 && slot == NULL)
            slot = p;
        else if (p->fd >= 0 && memcmp(p->source, source, sizeof source) == 0)
            same++;
    }
    /* During set-up every initial member may connect from one address (a
     * group on one host): no per-source cap then, only the table's. */
    if (!ctl->setup && same >= CTL_PENDING_PER_SOURCE) {
        ctl_log_refusal(ctl, "%s: %u connections from its address are pending already", name,
                        CTL_PENDING_PER_SOURCE);
        ctl_close_reset(fd);
        return;
    }
    if (slot == NULL) {
        slot = ctl_pending_victim(ctl);
        ctl_log_refusal(ctl, "%s: gave its place to %s (%u connections are pending already)",
                        slot->name, name, CTL_PENDING_MAX);
        ctl_pending_free(slot, true);
    }
    ctl_tune(fd, false); /* accepted non-blocking */
    slot->fd = fd;
    slot->deadline = sp_now_ns() + CTL_HELLO_MS * 1000000ull;
    memcpy(slot->source, source, sizeof source);
    snprintf(slot->name, sizeof slot->name, "%s", name);
    if (ctl->keys.count > 0) {
        ctl_auth_nonce(slot->nonce_a);
        ctl_pending_expect(slot, CTL_AT_NONCE, CTL_NONCE_BYTES);
    } else {
        ctl_pending_expect(slot, CTL_AT_HELLO, CTL_HELLO_SIZE);
    }
    ctl_pending_step(ctl, slot); /* what it sent already */
}

static void ctl_pending_accept(struct ctl_tcp *ctl)
{
    for (int round = 0; round < CTL_ACCEPTS_PER_ROUND; round++) {
        struct sockaddr_storage addr;
        socklen_t length = sizeof addr;
        memset(&addr, 0, sizeof addr);
        int fd = accept4(ctl->listen_fd, (struct sockaddr *)&addr, &length,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return; /* none left (EAGAIN), or one that failed on its way in */
        ctl_pending_add(ctl, fd, &addr);
    }
}

bool ctl_pending_any(const struct ctl_tcp *ctl)
{
    for (uint32_t i = 0; i < CTL_PENDING_MAX; i++)
        if (ctl->pending[i].fd >= 0)
            return true;
    return false;
}

uint32_t ctl_pending_poll_set(struct ctl_tcp *ctl, struct pollfd *pfds, int *ms)
{
    pfds[0] = (struct pollfd){ctl->listen_fd, POLLIN, 0};
    for (uint32_t i = 0; i < CTL_PENDING_MAX; i++) {
        const struct ctl_pending *p = &ctl->pending[i];
        short events = ctl_stage_sends(p->stage) ? POLLOUT : POLLIN;
        pfds[1 + i] = (struct pollfd){p->fd, (short)(p->fd >= 0 ? events : 0), 0};
        if (p->fd < 0)
            continue;
        int left = ctl_remaining_ms(p->deadline);
        if (*ms < 0 || left < *ms)
            *ms = left;
    }
    return 1 + CTL_PENDING_MAX;
}

void ctl_pending_progress(struct ctl_tcp *ctl, const struct pollfd *pfds, uint32_t count)
{
    for (uint32_t i = 0; i + 1 < count && i < CTL_PENDING_MAX; i++) {
        struct ctl_pending *p = &ctl->pending[i];
        if (p->fd >= 0 && pfds[1 + i].fd == p->fd && pfds[1 + i].revents != 0)
            ctl_pending_step(ctl, p);
    }
    uint64_t now = sp_now_ns();
    for (uint32_t i = 0; i < CTL_PENDING_MAX; i++) {
        struct ctl_pending *p = &ctl->pending[i];
        if (p->fd < 0 || now < p->deadline)
            continue;
        ctl_log_refusal(ctl, "%s: no complete %s within %u ms%s", p->name, ctl_stage_name(p->stage),
                        CTL_HELLO_MS,
                        p->stage <= CTL_AT_PROOF_OUT
                            ? ": it failed authentication with the group key (it may hold none)"
                            : "");
        ctl_pending_free(p, true);
    }
    if (count > 0 && pfds[0].fd >= 0 && (pfds[0].revents & POLLIN))
        ctl_pending_accept(ctl);
}
