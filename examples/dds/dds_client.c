/*
 * The external client (spindle_dds.h "External clients"): one TCP
 * connection to a member's client listener at a time, the next member of
 * the list after a failure, its subscriptions made again there. Samples
 * that arrive while a reply is awaited wait in a bounded queue.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "dds_client_seal.h"
#include "dds_client_wire.h"
#include "dds_impl.h"

#define ADDRESS_MAX (SPINDLE_DDS_NAME_MAX + 8)

struct subscription {
    char name[SPINDLE_DDS_NAME_MAX];
    bool history;
};

struct spindle_dds_client {
    char members[SPINDLE_DDS_CLIENT_MAX_MEMBERS][ADDRESS_MAX];
    uint32_t num_members, current;
    bool keyed;
    uint8_t key[DDS_CLIENT_KEY];
    int timeout_ms;
    int fd; /* -1 between members */
    uint32_t member_id;
    uint64_t failovers;
    struct dds_client_seal seal; /* keyed after a keyed handshake, until disconnect */
    uint8_t *in;                 /* one frame, its length field first */
    uint8_t *body;               /* the frame read last: its type and body, opened */
    size_t body_size;
    struct dds_fifo queue; /* SAMPLE frames: type and body, opened */
    struct subscription subs[SPINDLE_DDS_MAX_TOPICS];
    uint32_t num_subs;
    uint64_t last_seq[SPINDLE_DDS_MAX_TOPICS][SPINDLE_DDS_MAX_PARTICIPANTS];
};

static int64_t now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static int left_ms(int64_t deadline)
{
    if (deadline < 0)
        return -1;
    int64_t left = deadline - now_ms();
    return left > 0 ? (int)left : 0;
}

static int64_t deadline_after(int timeout_ms)
{
    return timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
}

/* Waits for events on fd until the deadline: 1 ready, 0 timed out. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    int n;
    do
        n = poll(&pfd, 1, left_ms(deadline));
    while (n < 0 && errno == EINTR);
    return n > 0 ? 1 : 0;
}

static int read_exact(int fd, uint8_t *out, size_t size, int64_t deadline)
{
    size_t got = 0;
    while (got < size) {
        if (wait_fd(fd, POLLIN, deadline) == 0)
            return SPINDLE_ETIMEDOUT;
        ssize_t n = recv(fd, out + got, size - got, 0);
        if (n == 0)
            return dds_error(SPINDLE_EPEERFAILED, "the member closed the connection");
        if (n < 0 && errno != EINTR && errno != EAGAIN)
            return dds_error(SPINDLE_EPEERFAILED, "reading from the member: %s", strerror(errno));
        if (n > 0)
            got += (size_t)n;
    }
    return 0;
}

static int write_all(int fd, const uint8_t *bytes, size_t size)
{
    size_t sent = 0;
    while (sent < size) {
        ssize_t n = send(fd, bytes + sent, size - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return dds_error(SPINDLE_EPEERFAILED, "writing to the member: %s", strerror(errno));
        sent += (size_t)n;
    }
    return 0;
}

/* Waits until the deadline for a frame to begin, then reads it whole into
 * client->in (within the client's timeout: a frame once begun is never
 * left half read), opens it (client->body) and decodes it. 0,
 * SPINDLE_ETIMEDOUT (nothing began), SPINDLE_EPEERFAILED or SPINDLE_EPROTO
 * (a frame malformed, or refused by the seal: the connection is then
 * unusable). */
static int read_frame(spindle_dds_client_t *client, struct dds_client_frame *frame,
                      int64_t deadline)
{
    if (wait_fd(client->fd, POLLIN, deadline) == 0)
        return SPINDLE_ETIMEDOUT;
    int64_t frame_deadline = deadline_after(client->timeout_ms);
    int rc = read_exact(client->fd, client->in, 4, frame_deadline);
    uint32_t length = rc == 0 ? dds_client_frame_length(client->in) : 0;
    if (rc == 0 && length == 0)
        return dds_error(SPINDLE_EPROTO, "member %s sent a frame length out of 1..%u",
                         client->members[client->current], DDS_CLIENT_MAX_FRAME);
    if (rc == 0)
        rc = read_exact(client->fd, client->in + 4, length, frame_deadline);
    if (rc == SPINDLE_ETIMEDOUT) /* mid-frame: the stream cannot be resumed */
        return dds_error(SPINDLE_EPEERFAILED, "member %s stalled in the middle of a frame",
                         client->members[client->current]);
    if (rc < 0)
        return rc;
    rc = dds_client_frame_open(&client->seal, client->in + 4, length, &client->body,
                               &client->body_size);
    if (rc < 0) { /* the seal's refusal, with the member it came from */
        char why[256];
        snprintf(why, sizeof why, "%s", spindle_dds_errmsg());
        return dds_error(rc, "member %s: %s", client->members[client->current], why);
    }
    return dds_client_frame_decode(client->body, client->body_size, frame);
}

static int send_frame(spindle_dds_client_t *client, const struct dds_client_frame *frame)
{
    size_t n = dds_client_frame_seal(&client->seal, client->in, 4u + DDS_CLIENT_MAX_FRAME, frame);
    if (n == 0)
        return dds_error(SPINDLE_EMSGSIZE, "a frame above %u bytes", DDS_CLIENT_MAX_FRAME);
    return write_all(client->fd, client->in, n);
}

/* The text of an ERROR frame, as this thread's error. */
static int member_refused(const spindle_dds_client_t *client, const struct dds_client_frame *f)
{
    return dds_error(f->code, "member %s: %.*s", client->members[client->current], (int)f->length,
                     (const char *)f->data);
}

/* Sends frame and reads until the reply of type want; samples meanwhile
 * are queued. 0 and *reply, the member's refusal, or a connection error
 * (SPINDLE_EPEERFAILED, SPINDLE_ETIMEDOUT, SPINDLE_EPROTO). */
static int request(spindle_dds_client_t *client, const struct dds_client_frame *frame, uint8_t want,
                   struct dds_client_frame *reply)
{
    int rc = send_frame(client, frame);
    int64_t deadline = deadline_after(client->timeout_ms);
    while (rc == 0) {
        rc = read_frame(client, reply, deadline);
        if (rc == SPINDLE_ETIMEDOUT)
            return dds_error(SPINDLE_ETIMEDOUT, "member %s did not reply in %d ms",
                             client->members[client->current], client->timeout_ms);
        if (rc < 0)
            return rc;
        if (reply->type == want)
            return 0;
        if (reply->type == DDS_CLIENT_ERROR)
            return member_refused(client, reply);
        if (reply->type != DDS_CLIENT_SAMPLE)
            return dds_error(SPINDLE_EPROTO, "member %s sent an unexpected frame (type %u)",
                             client->members[client->current], reply->type);
        if (dds_fifo_push(&client->queue, client->body, client->body_size, false) < 0)
            client->queue.dropped++;
    }
    return rc;
}

static int dial(const char *address, int64_t deadline, int timeout_ms)
{
    char host[ADDRESS_MAX];
    snprintf(host, sizeof host, "%s", address);
    char *colon = strrchr(host, ':');
    if (colon == NULL)
        return dds_error(SPINDLE_EINVAL, "member address \"%s\" is not host:port", address);
    *colon = '\0';
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *info = NULL;
    int gai = getaddrinfo(host, colon + 1, &hints, &info);
    if (gai != 0)
        return dds_error(SPINDLE_EUNREACH, "member %s: %s", address, gai_strerror(gai));
    int fd = socket(info->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc = fd < 0 ? -1 : connect(fd, info->ai_addr, info->ai_addrlen);
    freeaddrinfo(info);
    int err = rc == 0 ? 0 : errno;
    if (fd >= 0 && rc != 0 && err == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) == 1) {
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
            err = errno;
    } else if (err == EINPROGRESS) {
        err = ETIMEDOUT;
    }
    if (err != 0) {
        if (fd >= 0)
            close(fd);
        return dds_error(SPINDLE_EUNREACH, "member %s: %s", address, strerror(err));
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* Blocking from here: reads wait in poll first; a write that cannot
     * go on for the timeout fails, as a failed member. */
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    struct timeval send_timeout = {.tv_sec = timeout_ms / 1000,
                                   .tv_usec = (suseconds_t)(timeout_ms % 1000) * 1000};
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof send_timeout);
    return fd;
}

/* WELCOME, HELLO with the proof, READY with the member's. */
static int handshake(spindle_dds_client_t *client, int64_t deadline)
{
    struct dds_client_frame frame;
    const char *address = client->members[client->current];
    int rc = read_frame(client, &frame, deadline);
    if (rc == 0 && frame.type == DDS_CLIENT_ERROR)
        return member_refused(client, &frame);
    if (rc == 0 && frame.type != DDS_CLIENT_WELCOME)
        rc = dds_error(SPINDLE_EPROTO, "member %s did not open with WELCOME", address);
    if (rc < 0)
        return rc;
    bool member_keyed = frame.flags != 0;
    if (member_keyed && !client->keyed)
        return dds_error(SPINDLE_EAUTH,
                         "member %s: its group has a key; give the client its key_file", address);
    if (!member_keyed && client->keyed)
        return dds_error(SPINDLE_EAUTH,
                         "member %s does not use the group key this client has: not trusted",
                         address);
    uint8_t nonce_m[DDS_CLIENT_NONCE], nonce_c[DDS_CLIENT_NONCE];
    uint8_t proof[DDS_CLIENT_PROOF] = {0};
    memcpy(nonce_m, frame.nonce, sizeof nonce_m);
    rc = dds_client_random(nonce_c, sizeof nonce_c);
    if (rc == 0 && client->keyed)
        dds_client_proof(client->key, 'C', nonce_m, nonce_c, proof);
    struct dds_client_frame hello = {.type = DDS_CLIENT_HELLO, .nonce = nonce_c, .proof = proof};
    if (rc == 0)
        rc = send_frame(client, &hello);
    if (rc == 0)
        rc = read_frame(client, &frame, deadline);
    if (rc == 0 && frame.type == DDS_CLIENT_ERROR)
        return member_refused(client, &frame);
    if (rc == 0 && frame.type != DDS_CLIENT_READY)
        rc = dds_error(SPINDLE_EPROTO, "member %s did not answer HELLO with READY", address);
    if (rc == 0 && client->keyed &&
        !dds_client_proof_ok(client->key, 'M', nonce_m, nonce_c, frame.proof))
        rc = dds_error(SPINDLE_EAUTH, "member %s does not prove the group key", address);
    if (rc == 0)
        client->member_id = frame.id;
    if (rc == 0 && client->keyed) /* every frame from here on is sealed */
        dds_client_seal_derive(&client->seal, client->key, 'C', nonce_m, nonce_c);
    return rc == SPINDLE_ETIMEDOUT
               ? dds_error(rc, "member %s: no handshake in %d ms", address, client->timeout_ms)
               : rc;
}

static int subscribe_once(spindle_dds_client_t *client, const struct subscription *sub)
{
    struct dds_client_frame frame = {.type = DDS_CLIENT_SUBSCRIBE,
                                     .flags = sub->history ? DDS_CLIENT_FLAG_HISTORY : 0};
    memcpy(frame.name, sub->name, sizeof frame.name);
    struct dds_client_frame reply;
    return request(client, &frame, DDS_CLIENT_SUBSCRIBED, &reply);
}

static void disconnect(spindle_dds_client_t *client)
{
    if (client->fd >= 0)
        close(client->fd);
    client->fd = -1;
    dds_client_seal_clear(&client->seal); /* the next handshake is plain */
}

/* Connects to the members in turn from client->current on, each once,
 * and subscribes there again. 0, or the last member's error
 * (SPINDLE_EUNREACH unless every member refused the key). */
static int connect_any(spindle_dds_client_t *client)
{
    char tried[512] = "";
    size_t at = 0;
    int rc = SPINDLE_EUNREACH, auth_refusals = 0;
    for (uint32_t n = 0; n < client->num_members; n++) {
        disconnect(client);
        int64_t deadline = deadline_after(client->timeout_ms);
        rc = dial(client->members[client->current], deadline, client->timeout_ms);
        if (rc >= 0) {
            client->fd = rc;
            rc = handshake(client, deadline);
        }
        for (uint32_t i = 0; rc == 0 && i < client->num_subs; i++)
            rc = subscribe_once(client, &client->subs[i]);
        if (rc == 0)
            return 0;
        auth_refusals += rc == SPINDLE_EAUTH;
        at += (size_t)snprintf(tried + at, at < sizeof tried ? sizeof tried - at : 0, "%s%s",
                               at > 0 ? "; " : "", spindle_dds_errmsg());
        if (at >= sizeof tried)
            at = sizeof tried - 1;
        client->current = (client->current + 1) % client->num_members;
    }
    disconnect(client);
    int code = auth_refusals == (int)client->num_members ? SPINDLE_EAUTH : SPINDLE_EUNREACH;
    return dds_error(code, "no member answered: %s", tried);
}

/* After a failure of the member in use: the next one. */
static int fail_over(spindle_dds_client_t *client)
{
    disconnect(client);
    client->current = (client->current + 1) % client->num_members;
    client->failovers++;
    return connect_any(client);
}

static bool connection_error(int rc)
{
    return rc == SPINDLE_EPEERFAILED || rc == SPINDLE_ETIMEDOUT || rc == SPINDLE_EPROTO;
}

static int check_options(const struct spindle_dds_client_options *o)
{
    if (o == NULL || o->members == NULL || o->num_members == 0)
        return dds_error(SPINDLE_EINVAL, "a client needs at least one member address");
    if (o->num_members > SPINDLE_DDS_CLIENT_MAX_MEMBERS)
        return dds_error(SPINDLE_EINVAL, "%u member addresses, at most %u", o->num_members,
                         SPINDLE_DDS_CLIENT_MAX_MEMBERS);
    for (uint32_t i = 0; i < o->num_members; i++)
        if (o->members[i] == NULL || strlen(o->members[i]) >= ADDRESS_MAX)
            return dds_error(SPINDLE_EINVAL, "member address %u is missing or too long", i);
    return 0;
}

int spindle_dds_client_connect(const struct spindle_dds_client_options *options,
                               spindle_dds_client_t **out)
{
    int rc = check_options(options);
    if (rc < 0 || out == NULL)
        return rc < 0 ? rc : dds_error(SPINDLE_EINVAL, "NULL out");
    spindle_dds_client_t *client = calloc(1, sizeof *client);
    if (client == NULL)
        return dds_error(SPINDLE_ENOMEM, "no memory for a client");
    client->fd = -1;
    client->num_members = options->num_members;
    for (uint32_t i = 0; i < options->num_members; i++)
        snprintf(client->members[i], ADDRESS_MAX, "%s", options->members[i]);
    client->timeout_ms = options->timeout_ms > 0 ? options->timeout_ms : 10000;
    client->in = malloc(4u + DDS_CLIENT_MAX_FRAME);
    rc = client->in == NULL ? dds_error(SPINDLE_ENOMEM, "no memory for a client") : 0;
    if (rc == 0)
        rc =
            dds_fifo_init(&client->queue, options->queue_depth > 0 ? options->queue_depth : 65536u);
    if (rc == 0 && options->key_file != NULL) {
        rc = dds_client_key_load(options->key_file, client->key);
        client->keyed = rc == 0;
    }
    if (rc == 0)
        rc = connect_any(client);
    if (rc < 0) {
        spindle_dds_client_close(client);
        return rc;
    }
    *out = client;
    return 0;
}

void spindle_dds_client_close(spindle_dds_client_t *client)
{
    if (client == NULL)
        return;
    disconnect(client);
    dds_fifo_free(&client->queue);
    sodium_memzero(client->key, sizeof client->key);
    free(client->in);
    free(client);
}

int spindle_dds_client_subscribe(spindle_dds_client_t *client, const char *topic, bool history)
{
    if (client == NULL || topic == NULL || topic[0] == '\0' ||
        strlen(topic) >= SPINDLE_DDS_NAME_MAX)
        return dds_error(SPINDLE_EINVAL, "NULL client, or a topic name empty or too long");
    if (client->fd < 0 && connect_any(client) < 0)
        return SPINDLE_EUNREACH;
    struct subscription sub = {.history = history};
    snprintf(sub.name, sizeof sub.name, "%s", topic);
    for (uint32_t i = 0; i < client->num_subs; i++)
        if (strcmp(client->subs[i].name, topic) == 0)
            return dds_error(SPINDLE_EINVAL, "already subscribed to %s", topic);
    if (client->num_subs >= SPINDLE_DDS_MAX_TOPICS)
        return dds_error(SPINDLE_EINVAL, "subscribed to %u topics already", client->num_subs);
    int rc = subscribe_once(client, &sub);
    if (rc == 0 || connection_error(rc)) /* a failover subscribes it there */
        client->subs[client->num_subs++] = sub;
    if (connection_error(rc))
        rc = fail_over(client);
    return rc;
}

int64_t spindle_dds_client_publish(spindle_dds_client_t *client, const char *topic,
                                   const void *data, size_t length, uint32_t *writer)
{
    if (client == NULL || topic == NULL || topic[0] == '\0' ||
        strlen(topic) >= SPINDLE_DDS_NAME_MAX || (data == NULL && length > 0))
        return dds_error(SPINDLE_EINVAL, "NULL client or data, or a bad topic name");
    if (length > SPINDLE_DDS_MAX_SAMPLE)
        return dds_error(SPINDLE_EMSGSIZE, "a sample of %zu bytes exceeds %u", length,
                         SPINDLE_DDS_MAX_SAMPLE);
    if (client->fd < 0 && connect_any(client) < 0)
        return SPINDLE_EUNREACH;
    struct dds_client_frame frame = {
        .type = DDS_CLIENT_PUBLISH, .data = data, .length = (uint32_t)length};
    snprintf(frame.name, sizeof frame.name, "%s", topic);
    struct dds_client_frame reply = {0};
    int rc = request(client, &frame, DDS_CLIENT_PUBLISHED, &reply);
    if (connection_error(rc)) {
        char was[ADDRESS_MAX + 64];
        snprintf(was, sizeof was, "%s (%s)", client->members[client->current],
                 spindle_dds_errmsg());
        rc = fail_over(client);
        if (rc < 0)
            return rc;
        return dds_error(SPINDLE_EPEERFAILED,
                         "member %s failed before confirming the sample: it may or may not "
                         "have been written; now through %s",
                         was, client->members[client->current]);
    }
    if (rc < 0)
        return rc;
    if (writer != NULL)
        *writer = reply.id;
    return (int64_t)reply.seq;
}

/* Fills the caller's info and buffer from a SAMPLE frame. */
static int hand_out(spindle_dds_client_t *client, const struct dds_client_frame *frame,
                    void *buffer, size_t capacity, struct spindle_dds_client_sample_info *info)
{
    uint64_t *last = &client->last_seq[frame->topic][frame->id];
    struct spindle_dds_client_sample_info out = {
        .sample = {.topic = frame->topic,
                   .writer = frame->id,
                   .seq = frame->seq,
                   .source_timestamp_ns = frame->time_ns,
                   .length = frame->length,
                   .from_history = (frame->flags & DDS_CLIENT_FLAG_HISTORY) != 0},
        .member = client->member_id,
        .duplicate = frame->seq <= *last,
        .missed = *last != 0 && frame->seq > *last + 1 ? frame->seq - *last - 1 : 0,
    };
    if (frame->seq > *last)
        *last = frame->seq;
    size_t n = frame->length < capacity ? frame->length : capacity;
    if (n > 0)
        memcpy(buffer, frame->data, n);
    if (info != NULL)
        *info = out;
    return (int)frame->length;
}

int spindle_dds_client_receive(spindle_dds_client_t *client, void *buffer, size_t capacity,
                               struct spindle_dds_client_sample_info *info, int timeout_ms)
{
    if (client == NULL || (buffer == NULL && capacity > 0))
        return dds_error(SPINDLE_EINVAL, "NULL client or buffer");
    struct dds_client_frame frame;
    if (client->queue.count > 0) {
        const struct dds_kept *kept = dds_fifo_at(&client->queue, 0);
        int rc = dds_client_frame_decode(kept->bytes, kept->size, &frame);
        rc = rc == 0 ? hand_out(client, &frame, buffer, capacity, info) : rc;
        dds_fifo_pop(&client->queue);
        return rc;
    }
    int64_t deadline = deadline_after(timeout_ms);
    for (;;) {
        int rc = client->fd < 0 ? connect_any(client) : 0;
        if (rc < 0)
            return rc;
        rc = read_frame(client, &frame, deadline);
        if (rc == SPINDLE_ETIMEDOUT)
            return SPINDLE_EAGAIN;
        if (rc == 0 && frame.type == DDS_CLIENT_SAMPLE)
            return hand_out(client, &frame, buffer, capacity, info);
        if (rc == 0 && frame.type == DDS_CLIENT_ERROR)
            continue; /* the member says why it closes: the read after it fails over */
        if (rc == 0)  /* a member's bug: its stream cannot be trusted further */
            dds_error_record("member %s sent an unexpected frame (type %u)",
                             client->members[client->current], frame.type);
        rc = fail_over(client);
        if (rc < 0)
            return rc;
    }
}

uint32_t spindle_dds_client_member(const spindle_dds_client_t *client)
{
    return client->member_id;
}

uint64_t spindle_dds_client_failovers(const spindle_dds_client_t *client)
{
    return client->failovers;
}

uint64_t spindle_dds_client_last_seq(const spindle_dds_client_t *client, uint32_t topic,
                                     uint32_t writer)
{
    if (client == NULL || topic >= SPINDLE_DDS_MAX_TOPICS || writer >= SPINDLE_DDS_MAX_PARTICIPANTS)
        return 0;
    return client->last_seq[topic][writer];
}

int spindle_dds_client_fd(const spindle_dds_client_t *client)
{
    if (client == NULL || client->fd < 0)
        return dds_error(SPINDLE_EINVAL, "the client has no connection");
    return client->fd;
}
