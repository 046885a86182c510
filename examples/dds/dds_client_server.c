/*
 * The participant's listener for external clients (dds_client_server.h,
 * docs/DDS.md "External clients").
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dds_client_seal.h"
#include "dds_client_server.h"
#include "dds_client_wire.h"

#define READ_CHUNK 65536u

struct connection {
    int fd;
    bool ready; /* the handshake passed */
    bool broken;
    uint8_t nonce_m[DDS_CLIENT_NONCE];
    /* Keyed after the HELLO when the group has a key: its sending half
     * under lock (with the output), its receiving half the listener's. */
    struct dds_client_seal seal;
    uint8_t *in;
    size_t in_len, in_cap;
    uint64_t subscribed;  /* bit per topic; atomic, set under the topic's lock */
    pthread_mutex_t lock; /* the output */
    uint8_t *out;
    size_t out_sent, out_len, out_cap;
};

struct dds_client_server {
    spindle_dds_participant_t *participant;
    int listen_fd, wake_fd;
    pthread_t thread;
    pthread_mutex_t lock; /* conns[] against the relay */
    struct connection *conns[DDS_CLIENT_MAX_CONNECTIONS];
    uint32_t num_conns;
    spindle_dds_writer_t *writers[SPINDLE_DDS_MAX_TOPICS]; /* opened for relayed publishes */
    bool keyed;
    uint8_t key[DDS_CLIENT_KEY];
    bool stop; /* atomic */
    /* Statistics, atomic: the relay and the listener thread count. */
    uint64_t accepted, refused, dropped;
};

static void wake(int fd)
{
    uint64_t one = 1;
    ssize_t n = write(fd, &one, sizeof one);
    (void)n; /* a counter at its limit is readable already */
}

/* Appends a frame, sealed when the connection is keyed, to the output
 * (connection's lock held): the output's order is the order of the
 * frames' counters. A droppable frame (a sample) is dropped (false: the
 * caller counts it) when the output's sealed bytes are at their limit; a
 * reply always goes (a connection that cannot grow is broken). */
static bool out_append(struct connection *c, const struct dds_client_frame *frame, bool droppable)
{
    size_t bound = 4u + DDS_CLIENT_FRAME_MARGIN + frame->length;
    if (droppable && c->out_len - c->out_sent + bound > DDS_CLIENT_OUT_LIMIT)
        return false;
    if (c->out_sent > 0 && c->out_len + bound > c->out_cap) {
        memmove(c->out, c->out + c->out_sent, c->out_len - c->out_sent);
        c->out_len -= c->out_sent;
        c->out_sent = 0;
    }
    if (c->out_len + bound > c->out_cap) {
        size_t cap = c->out_cap * 2 > c->out_len + bound ? c->out_cap * 2 : c->out_len + bound;
        uint8_t *grown = realloc(c->out, cap);
        if (grown == NULL) {
            c->broken = true;
            return false;
        }
        c->out = grown;
        c->out_cap = cap;
    }
    c->out_len +=
        dds_client_frame_seal(&c->seal, c->out + c->out_len, c->out_cap - c->out_len, frame);
    return true;
}

static void send_error(struct connection *c, int code, const char *text)
{
    struct dds_client_frame frame = {.type = DDS_CLIENT_ERROR, .code = code};
    size_t length = strnlen(text, DDS_CLIENT_TEXT);
    char printable[DDS_CLIENT_TEXT];
    for (size_t i = 0; i < length; i++)
        printable[i] = (char)(text[i] >= ' ' && text[i] <= '~' ? text[i] : '?');
    if (length == 0)
        printable[length++] = '?';
    frame.data = (const uint8_t *)printable;
    frame.length = (uint32_t)length;
    pthread_mutex_lock(&c->lock);
    out_append(c, &frame, false);
    pthread_mutex_unlock(&c->lock);
}

/* Sends what the output holds without blocking. false when the
 * connection is gone. */
static bool flush_out(struct connection *c)
{
    pthread_mutex_lock(&c->lock);
    bool ok = !c->broken;
    while (ok && c->out_sent < c->out_len) {
        ssize_t n = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0)
            c->out_sent += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else
            ok = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
        if (n <= 0)
            break;
    }
    if (c->out_sent == c->out_len)
        c->out_sent = c->out_len = 0;
    pthread_mutex_unlock(&c->lock);
    return ok;
}

static bool out_pending(struct connection *c)
{
    pthread_mutex_lock(&c->lock);
    bool pending = c->out_sent < c->out_len;
    pthread_mutex_unlock(&c->lock);
    return pending;
}

static void connection_free(struct connection *c)
{
    close(c->fd);
    dds_client_seal_clear(&c->seal);
    pthread_mutex_destroy(&c->lock);
    free(c->in);
    free(c->out);
    free(c);
}

/* Removes conns[index] (listener thread). */
static void drop_connection(struct dds_client_server *server, uint32_t index)
{
    pthread_mutex_lock(&server->lock);
    struct connection *c = server->conns[index];
    server->conns[index] = server->conns[--server->num_conns];
    server->conns[server->num_conns] = NULL;
    pthread_mutex_unlock(&server->lock);
    connection_free(c);
}

/* A protocol violation: the client is told why (best effort) and closed. */
static int fatal(struct connection *c, int code, const char *text)
{
    send_error(c, code, text);
    (void)flush_out(c);
    return code;
}

static void accept_one(struct dds_client_server *server)
{
    int fd = accept4(server->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return; /* the client gave up meanwhile, or no descriptor: it may retry */
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct connection *c = calloc(1, sizeof *c);
    if (c == NULL) {
        close(fd);
        return;
    }
    c->fd = fd;
    pthread_mutex_init(&c->lock, NULL);
    if (server->num_conns >= DDS_CLIENT_MAX_CONNECTIONS) {
        char text[128];
        snprintf(text, sizeof text, "participant %s serves %u clients already; try another member",
                 server->participant->self->name, DDS_CLIENT_MAX_CONNECTIONS);
        (void)fatal(c, SPINDLE_EAGAIN, text);
        connection_free(c);
        __atomic_fetch_add(&server->refused, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_fetch_add(&server->accepted, 1, __ATOMIC_RELAXED);
    (void)dds_client_random(c->nonce_m, sizeof c->nonce_m);
    struct dds_client_frame welcome = {
        .type = DDS_CLIENT_WELCOME, .flags = server->keyed ? 1 : 0, .nonce = c->nonce_m};
    pthread_mutex_lock(&c->lock);
    out_append(c, &welcome, false);
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_lock(&server->lock);
    server->conns[server->num_conns++] = c;
    pthread_mutex_unlock(&server->lock);
}

static int on_hello(struct dds_client_server *server, struct connection *c,
                    const struct dds_client_frame *frame)
{
    if (c->ready)
        return fatal(c, SPINDLE_EPROTO, "a second HELLO on one connection");
    uint8_t proof[DDS_CLIENT_PROOF] = {0};
    if (server->keyed) {
        if (!dds_client_proof_ok(server->key, 'C', c->nonce_m, frame->nonce, frame->proof))
            return fatal(c, SPINDLE_EAUTH,
                         "the group has a key and the client's HELLO does not prove it "
                         "(no key_file, or another key)");
        dds_client_proof(server->key, 'M', c->nonce_m, frame->nonce, proof);
    }
    c->ready = true;
    struct dds_client_frame ready = {
        .type = DDS_CLIENT_READY, .id = server->participant->self->id, .proof = proof};
    pthread_mutex_lock(&c->lock);
    out_append(c, &ready, false); /* the handshake's last plain frame */
    if (server->keyed)
        dds_client_seal_derive(&c->seal, server->key, 'M', c->nonce_m, frame->nonce);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

/* A SAMPLE frame of a ring payload whose header decoded into info. */
static struct dds_client_frame sample_frame(const struct spindle_dds_sample_info *info,
                                            const uint8_t *payload)
{
    return (struct dds_client_frame){.type = DDS_CLIENT_SAMPLE,
                                     .topic = (uint16_t)info->topic,
                                     .flags = info->from_history ? DDS_CLIENT_FLAG_HISTORY : 0,
                                     .id = info->writer,
                                     .seq = info->seq,
                                     .time_ns = info->source_timestamp_ns,
                                     .data = payload + SPINDLE_DDS_SAMPLE_HEADER,
                                     .length = info->length};
}

/* The reply, then (with the flag) the history, then (same topic lock) the
 * live stream: nothing between them is missed or doubled. */
static int on_subscribe(struct dds_client_server *server, struct connection *c,
                        const struct dds_client_frame *frame)
{
    spindle_dds_participant_t *p = server->participant;
    char text[256];
    const struct spindle_dds_topic_config *config =
        spindle_dds_config_topic(p->config, frame->name);
    if (config == NULL) {
        snprintf(text, sizeof text, "SUBSCRIBE: topic \"%s\" is not in the configuration",
                 frame->name);
        send_error(c, SPINDLE_ENOENT, text);
        return 0;
    }
    if ((((config->publishers | config->subscribers) >> p->self->id) & 1u) == 0) {
        snprintf(text, sizeof text,
                 "SUBSCRIBE: participant %s neither publishes nor subscribes topic %s, so it "
                 "receives none of its samples; use a member that does",
                 p->self->name, config->name);
        send_error(c, SPINDLE_EPERM, text);
        return 0;
    }
    struct dds_topic *topic = &p->topics[config->id];
    struct dds_client_frame reply = {
        .type = DDS_CLIENT_SUBSCRIBED, .topic = (uint16_t)config->id, .qos = (uint8_t)config->qos};
    memcpy(reply.name, config->name, sizeof reply.name);
    pthread_mutex_lock(&topic->lock);
    pthread_mutex_lock(&c->lock);
    out_append(c, &reply, false);
    for (uint32_t i = 0; (frame->flags & DDS_CLIENT_FLAG_HISTORY) && i < topic->history.count;
         i++) {
        const struct dds_kept *kept = dds_fifo_at(&topic->history, i);
        struct spindle_dds_sample_info info;
        if (dds_sample_header_decode(kept->bytes, kept->size, &info) != 0)
            continue;
        info.from_history = true;
        struct dds_client_frame sample = sample_frame(&info, kept->bytes);
        if (!out_append(c, &sample, true))
            __atomic_fetch_add(&server->dropped, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&c->lock);
    __atomic_fetch_or(&c->subscribed, 1ull << config->id, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&topic->lock);
    return 0;
}

/* Through the participant's writer of the topic, opened on the first
 * relayed publish (the participant must publish the topic and hold no
 * writer of its own for it). */
static int on_publish(struct dds_client_server *server, struct connection *c,
                      const struct dds_client_frame *frame)
{
    spindle_dds_participant_t *p = server->participant;
    char text[768];
    const struct spindle_dds_topic_config *config =
        spindle_dds_config_topic(p->config, frame->name);
    int rc = SPINDLE_ENOENT;
    int64_t seq = 0;
    if (config != NULL && server->writers[config->id] == NULL)
        rc = spindle_dds_writer_create(p, config->name, &server->writers[config->id]);
    if (config != NULL && server->writers[config->id] != NULL)
        seq = spindle_dds_write(server->writers[config->id], frame->data, frame->length);
    if (config == NULL)
        snprintf(text, sizeof text, "PUBLISH: topic \"%s\" is not in the configuration",
                 frame->name);
    else if (server->writers[config->id] == NULL || seq < 0)
        snprintf(text, sizeof text, "PUBLISH on %s through participant %s: %s", config->name,
                 p->self->name, spindle_dds_errmsg());
    if (config == NULL || server->writers[config->id] == NULL || seq < 0) {
        send_error(c, seq < 0 ? (int)seq : rc, text);
        return 0;
    }
    struct dds_client_frame reply = {.type = DDS_CLIENT_PUBLISHED,
                                     .topic = (uint16_t)config->id,
                                     .id = p->self->id,
                                     .seq = (uint64_t)seq};
    pthread_mutex_lock(&c->lock);
    out_append(c, &reply, false);
    pthread_mutex_unlock(&c->lock);
    return 0;
}

static int on_frame(struct dds_client_server *server, struct connection *c,
                    const struct dds_client_frame *frame)
{
    if (frame->type == DDS_CLIENT_HELLO)
        return on_hello(server, c, frame);
    if (frame->type == DDS_CLIENT_ERROR)
        return SPINDLE_ESHUTDOWN; /* the client says why it leaves */
    if (frame->type != DDS_CLIENT_SUBSCRIBE && frame->type != DDS_CLIENT_PUBLISH) {
        char text[96];
        snprintf(text, sizeof text, "a frame only a member sends (type %u) came from the client",
                 frame->type);
        return fatal(c, SPINDLE_EPROTO, text);
    }
    if (!c->ready)
        return fatal(c, SPINDLE_EPERM, "SUBSCRIBE or PUBLISH before the HELLO");
    return frame->type == DDS_CLIENT_SUBSCRIBE ? on_subscribe(server, c, frame)
                                               : on_publish(server, c, frame);
}

/* Decodes and serves every whole frame of the input. 0, or an error: the
 * connection is then closed. */
static int serve_input(struct dds_client_server *server, struct connection *c)
{
    size_t at = 0;
    int rc = 0;
    while (rc == 0 && c->in_len - at >= 4) {
        uint32_t length = dds_client_frame_length(c->in + at);
        if (length == 0) {
            char text[128];
            snprintf(text, sizeof text, "a frame length of %u bytes (1..%u)",
                     c->in[at] | (c->in[at + 1] << 8) | (c->in[at + 2] << 16) |
                         ((uint32_t)c->in[at + 3] << 24),
                     DDS_CLIENT_MAX_FRAME);
            return fatal(c, SPINDLE_EPROTO, text);
        }
        if (c->in_len - at < 4u + length)
            break;
        struct dds_client_frame frame;
        uint8_t *body;
        size_t body_size;
        rc = dds_client_frame_open(&c->seal, c->in + at + 4, length, &body, &body_size);
        if (rc == 0)
            rc = dds_client_frame_decode(body, body_size, &frame);
        if (rc != 0)
            return fatal(c, rc, spindle_dds_errmsg());
        rc = on_frame(server, c, &frame);
        at += 4u + length;
    }
    memmove(c->in, c->in + at, c->in_len - at);
    c->in_len -= at;
    return rc;
}

/* Reads what the socket holds. 0, or an error (closed, broken). */
static int read_input(struct dds_client_server *server, struct connection *c)
{
    for (;;) {
        size_t want = c->in_len >= 4 ? 4u + dds_client_frame_length(c->in) : 4u;
        if (want < c->in_len + READ_CHUNK)
            want = c->in_len + READ_CHUNK;
        if (want > c->in_cap) {
            uint8_t *grown = realloc(c->in, want);
            if (grown == NULL)
                return fatal(c, SPINDLE_ENOMEM, "the member has no memory for this frame");
            c->in = grown;
            c->in_cap = want;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, MSG_DONTWAIT);
        if (n == 0)
            return SPINDLE_ESHUTDOWN;
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : SPINDLE_EIO;
        c->in_len += (size_t)n;
        int rc = serve_input(server, c);
        if (rc < 0)
            return rc;
    }
}

static void serve_connections(struct dds_client_server *server, const struct pollfd *fds,
                              uint32_t count)
{
    /* Backwards: drop_connection moves the last into the hole. */
    for (uint32_t i = count; i-- > 0;) {
        struct connection *c = server->conns[i];
        bool ok = true;
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
            int rc = read_input(server, c);
            ok = rc == 0;
            if (rc < 0 && rc != SPINDLE_ESHUTDOWN && rc != SPINDLE_EIO) /* not a plain close */
                __atomic_fetch_add(&server->refused, 1, __ATOMIC_RELAXED);
        }
        ok = flush_out(c) && ok;
        if (!ok)
            drop_connection(server, i);
    }
}

static void *serve(void *arg)
{
    struct dds_client_server *server = arg;
    struct pollfd fds[DDS_CLIENT_MAX_CONNECTIONS + 2];
    while (!__atomic_load_n(&server->stop, __ATOMIC_ACQUIRE)) {
        uint32_t count = server->num_conns;
        for (uint32_t i = 0; i < count; i++)
            fds[i] =
                (struct pollfd){.fd = server->conns[i]->fd,
                                .events = POLLIN | (out_pending(server->conns[i]) ? POLLOUT : 0)};
        fds[count] = (struct pollfd){.fd = server->listen_fd, .events = POLLIN};
        fds[count + 1] = (struct pollfd){.fd = server->wake_fd, .events = POLLIN};
        if (poll(fds, count + 2, -1) < 0)
            continue; /* EINTR */
        if (fds[count + 1].revents & POLLIN) {
            uint64_t value;
            ssize_t n = read(server->wake_fd, &value, sizeof value);
            (void)n;
        }
        serve_connections(server, fds, count);
        if (fds[count].revents & POLLIN)
            accept_one(server);
    }
    return NULL;
}

static int listen_on(struct dds_client_server *server)
{
    const struct spindle_dds_participant_config *self = server->participant->self;
    char port[8];
    snprintf(port, sizeof port, "%u", self->client_port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *info = NULL;
    int gai = getaddrinfo(self->client_bind, port, &hints, &info);
    if (gai != 0)
        return dds_error(SPINDLE_EINVAL, "participant %s: client_bind %s: %s", self->name,
                         self->client_bind, gai_strerror(gai));
    int fd = socket(info->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    int rc = 0;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, info->ai_addr, info->ai_addrlen) != 0 || listen(fd, 16) != 0)
        rc = dds_error(errno == EADDRINUSE ? SPINDLE_EADDRINUSE : SPINDLE_EIO,
                       "participant %s: client listener on %s:%u: %s", self->name,
                       self->client_bind, self->client_port, strerror(errno));
    freeaddrinfo(info);
    if (rc < 0) {
        if (fd >= 0)
            close(fd);
        return rc;
    }
    server->listen_fd = fd;
    return 0;
}

int dds_client_server_start(spindle_dds_participant_t *participant, struct dds_client_server **out)
{
    struct dds_client_server *server = calloc(1, sizeof *server);
    if (server == NULL)
        return dds_error(SPINDLE_ENOMEM, "no memory for the client listener");
    server->participant = participant;
    server->listen_fd = server->wake_fd = -1;
    pthread_mutex_init(&server->lock, NULL);
    const char *key_file = participant->config->key_file;
    int rc = 0;
    if (key_file[0] != '\0') {
        rc = dds_client_key_load(key_file, server->key);
        server->keyed = rc == 0;
    }
    if (rc == 0)
        rc = listen_on(server);
    if (rc == 0) {
        server->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (server->wake_fd < 0)
            rc = dds_error(SPINDLE_EIO, "client listener: eventfd: %s", strerror(errno));
    }
    if (rc == 0 && pthread_create(&server->thread, NULL, serve, server) != 0)
        rc = dds_error(SPINDLE_EIO, "client listener: no thread");
    if (rc < 0) {
        if (server->listen_fd >= 0)
            close(server->listen_fd);
        if (server->wake_fd >= 0)
            close(server->wake_fd);
        pthread_mutex_destroy(&server->lock);
        sodium_memzero(server->key, sizeof server->key);
        free(server);
        return rc;
    }
    *out = server;
    return 0;
}

void dds_client_server_stop(struct dds_client_server *server)
{
    if (server == NULL)
        return;
    __atomic_store_n(&server->stop, true, __ATOMIC_RELEASE);
    wake(server->wake_fd);
    pthread_join(server->thread, NULL);
    while (server->num_conns > 0)
        drop_connection(server, server->num_conns - 1);
    close(server->listen_fd);
    close(server->wake_fd);
    pthread_mutex_destroy(&server->lock);
    sodium_memzero(server->key, sizeof server->key);
    free(server);
}

void dds_client_server_relay(struct dds_client_server *server,
                             const struct spindle_dds_sample_info *info, const uint8_t *payload)
{
    uint64_t bit = 1ull << info->topic;
    bool any = false;
    struct dds_client_frame frame = sample_frame(info, payload);
    pthread_mutex_lock(&server->lock);
    for (uint32_t i = 0; i < server->num_conns; i++) {
        struct connection *c = server->conns[i];
        if ((__atomic_load_n(&c->subscribed, __ATOMIC_ACQUIRE) & bit) == 0)
            continue;
        pthread_mutex_lock(&c->lock);
        if (!out_append(c, &frame, true))
            __atomic_fetch_add(&server->dropped, 1, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&c->lock);
        any = true;
    }
    pthread_mutex_unlock(&server->lock);
    if (any)
        wake(server->wake_fd);
}

void dds_client_server_stats(struct dds_client_server *server,
                             struct spindle_dds_client_stats *stats)
{
    pthread_mutex_lock(&server->lock);
    stats->connections = server->num_conns;
    pthread_mutex_unlock(&server->lock);
    stats->accepted = __atomic_load_n(&server->accepted, __ATOMIC_RELAXED);
    stats->refused = __atomic_load_n(&server->refused, __ATOMIC_RELAXED);
    stats->dropped_samples = __atomic_load_n(&server->dropped, __ATOMIC_RELAXED);
}
