/*
 * spindle-attack: a stranger without the group's key, against members'
 * control ports (tests/control/attack.sh, docs/SECURITY.md "Under
 * attack"). Not installed: a test and benchmark client.
 *
 *   spindle-attack --target HOST:PORT[,HOST:PORT...] [--sources PREFIX N]
 *                  [--idle N] [--garbage N] [--replay FILE N]
 *                  [--rate CONNECTIONS_PER_S] --seconds S
 *     keeps N idle connections, N connections sending random bytes, and N
 *     connections sending the bytes of FILE (captured from a real join
 *     with --record) open to the targets, round robin, each reopened when
 *     a member closes it, at most --rate new connections a second in all
 *     (default 1000); with --sources, connections come from PREFIX.1 ..
 *     PREFIX.N (for example 127.0.2 16) rather than one address. Prints
 *     one JSON line: connections opened, closed by the members, bytes sent
 *     and received, and the most bytes one connection received. SIGTERM
 *     ends it early, with the report.
 *
 *   spindle-attack --record PORT --to HOST:PORT --out FILE
 *     accepts one connection on 127.0.0.1:PORT, relays it both ways to
 *     HOST:PORT until either side closes, and writes what the dialer sent
 *     to FILE: frames to replay.
 *
 * Exit status 0 when the run went as asked, 1 on bad arguments or when
 * it could not reach any target.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ATTACK_MAX_CONNS   1024
#define ATTACK_MAX_TARGETS 16
#define ATTACK_CHUNK       4096

enum conn_kind { CONN_IDLE, CONN_GARBAGE, CONN_REPLAY };

struct conn {
    int fd; /* -1: to be (re)opened */
    enum conn_kind kind;
    size_t sent; /* of the replayed bytes */
    uint64_t received;
};

struct attack {
    struct sockaddr_in targets[ATTACK_MAX_TARGETS];
    uint32_t num_targets, next_target;
    char source_prefix[32];
    uint32_t num_sources, next_source;
    struct conn conns[ATTACK_MAX_CONNS];
    uint32_t num_conns, next_open;
    uint8_t *replay;
    size_t replay_len;
    uint32_t rate;
    /* What happened. */
    uint64_t opened, failed, closed, bytes_sent, bytes_received, most_received;
};

/* Set by SIGTERM and SIGINT: the attack ends and reports. */
static volatile sig_atomic_t stopping;

static void on_stop(int signal_number)
{
    (void)signal_number;
    stopping = 1;
}

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

static int parse_endpoint(const char *text, struct sockaddr_in *addr)
{
    char host[64];
    const char *colon = strrchr(text, ':');
    if (colon == NULL || (size_t)(colon - text) >= sizeof host)
        return -1;
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    char *end = NULL;
    unsigned long port = strtoul(colon + 1, &end, 10);
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_port = htons((uint16_t)port);
    if (*end != '\0' || port == 0 || port > 65535 || inet_pton(AF_INET, host, &addr->sin_addr) != 1)
        return -1;
    return 0;
}

static int parse_targets(struct attack *a, char *list)
{
    for (char *save = NULL, *item = strtok_r(list, ",", &save); item != NULL;
         item = strtok_r(NULL, ",", &save)) {
        if (a->num_targets == ATTACK_MAX_TARGETS ||
            parse_endpoint(item, &a->targets[a->num_targets]) != 0) {
            fprintf(stderr, "spindle-attack: bad or too many targets at '%s'\n", item);
            return -1;
        }
        a->num_targets++;
    }
    return a->num_targets > 0 ? 0 : -1;
}

static int read_file(const char *path, uint8_t **bytes, size_t *length)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        fprintf(stderr, "spindle-attack: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 1u << 20;
    *bytes = malloc(cap);
    *length = *bytes == NULL ? 0 : fread(*bytes, 1, cap, file);
    fclose(file);
    if (*length == 0) {
        fprintf(stderr, "spindle-attack: %s: nothing to replay\n", path);
        return -1;
    }
    return 0;
}

/* Opens c to the next target (non-blocking connect), from the next source
 * address when there are several. */
static void conn_open(struct attack *a, struct conn *c)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        a->failed++;
        return;
    }
    if (a->num_sources > 0) {
        char source[48];
        struct sockaddr_in from = {.sin_family = AF_INET};
        snprintf(source, sizeof source, "%s.%u", a->source_prefix, 1 + a->next_source);
        a->next_source = (a->next_source + 1) % a->num_sources;
        if (inet_pton(AF_INET, source, &from.sin_addr) != 1 ||
            bind(fd, (struct sockaddr *)&from, sizeof from) != 0) {
            close(fd);
            a->failed++;
            return;
        }
    }
    const struct sockaddr_in *to = &a->targets[a->next_target];
    a->next_target = (a->next_target + 1) % a->num_targets;
    if (connect(fd, (const struct sockaddr *)to, sizeof *to) != 0 && errno != EINPROGRESS) {
        close(fd);
        a->failed++;
        return;
    }
    c->fd = fd;
    c->sent = 0;
    c->received = 0;
    a->opened++;
}

static void conn_close(struct attack *a, struct conn *c)
{
    close(c->fd);
    c->fd = -1;
    a->closed++;
    if (c->received > a->most_received)
        a->most_received = c->received;
}

/* Sends what c's kind sends when its socket is writable. */
static void conn_send(struct attack *a, struct conn *c)
{
    uint8_t garbage[512];
    const uint8_t *bytes = NULL;
    size_t length = 0;
    if (c->kind == CONN_GARBAGE) {
        length = 1 + (size_t)(rand() % (int)sizeof garbage);
        for (size_t i = 0; i < length; i++)
            garbage[i] = (uint8_t)rand();
        bytes = garbage;
    } else if (c->kind == CONN_REPLAY && c->sent < a->replay_len) {
        bytes = a->replay + c->sent;
        length = a->replay_len - c->sent;
    }
    if (length == 0)
        return;
    ssize_t n = send(c->fd, bytes, length, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
        a->bytes_sent += (uint64_t)n;
        c->sent += (size_t)n;
    }
}

/* Reads what a member sent on c; closes c when the member did. */
static void conn_receive(struct attack *a, struct conn *c)
{
    uint8_t sink[ATTACK_CHUNK];
    ssize_t n = recv(c->fd, sink, sizeof sink, MSG_DONTWAIT);
    if (n > 0) {
        c->received += (uint64_t)n;
        a->bytes_received += (uint64_t)n;
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        conn_close(a, c);
    }
}

static void run_attack(struct attack *a, uint64_t seconds)
{
    static struct pollfd pfds[ATTACK_MAX_CONNS];
    uint64_t start = now_ms(), end = start + seconds * 1000u;
    uint64_t budget_at = start, budget = 0;
    for (uint64_t now = start; now < end && !stopping; now = now_ms()) {
        /* New connections within the rate: a token per 1/rate s. */
        budget += (now - budget_at) * a->rate / 1000u;
        budget_at = now;
        if (budget > a->rate)
            budget = a->rate;
        /* From where the last round stopped: every kind gets its turn. */
        for (uint32_t k = 0; k < a->num_conns && budget > 0; k++) {
            struct conn *c = &a->conns[a->next_open];
            a->next_open = (a->next_open + 1) % a->num_conns;
            if (c->fd < 0) {
                conn_open(a, c);
                budget--;
            }
        }
        for (uint32_t i = 0; i < a->num_conns; i++) {
            const struct conn *c = &a->conns[i];
            bool sends =
                c->kind == CONN_GARBAGE || (c->kind == CONN_REPLAY && c->sent < a->replay_len);
            pfds[i] = (struct pollfd){c->fd, (short)(POLLIN | (sends ? POLLOUT : 0)), 0};
        }
        if (poll(pfds, a->num_conns, 10) <= 0)
            continue;
        for (uint32_t i = 0; i < a->num_conns; i++) {
            struct conn *c = &a->conns[i];
            if (c->fd < 0 || pfds[i].revents == 0)
                continue;
            if (pfds[i].revents & POLLOUT)
                conn_send(a, c);
            if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR))
                conn_receive(a, c);
        }
    }
    for (uint32_t i = 0; i < a->num_conns; i++)
        if (a->conns[i].fd >= 0)
            close(a->conns[i].fd); /* closed by us: not counted */
}

/* Relays bytes from one socket to the other; false when the source closed. */
static bool relay(int from, int to, FILE *record)
{
    uint8_t buf[ATTACK_CHUNK];
    ssize_t n = recv(from, buf, sizeof buf, 0);
    if (n <= 0)
        return false;
    if (record != NULL && fwrite(buf, 1, (size_t)n, record) != (size_t)n)
        return false;
    for (ssize_t done = 0; done < n;) {
        ssize_t w = send(to, buf + done, (size_t)(n - done), MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        done += w;
    }
    return true;
}

static int run_record(const char *port_text, const char *to_text, const char *out)
{
    struct sockaddr_in listen_at, to;
    char local[64];
    snprintf(local, sizeof local, "127.0.0.1:%s", port_text);
    if (parse_endpoint(local, &listen_at) != 0 || parse_endpoint(to_text, &to) != 0) {
        fprintf(stderr, "spindle-attack: bad --record port or --to address\n");
        return 1;
    }
    int one = 1, listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(listener, (struct sockaddr *)&listen_at, sizeof listen_at) != 0 ||
        listen(listener, 1) != 0) {
        fprintf(stderr, "spindle-attack: cannot listen on %s: %s\n", local, strerror(errno));
        return 1;
    }
    printf("listening\n");
    fflush(stdout);
    int dialer = accept(listener, NULL, NULL);
    int member = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (dialer < 0 || connect(member, (struct sockaddr *)&to, sizeof to) != 0) {
        fprintf(stderr, "spindle-attack: cannot relay to %s: %s\n", to_text, strerror(errno));
        return 1;
    }
    FILE *record = fopen(out, "wb");
    if (record == NULL) {
        fprintf(stderr, "spindle-attack: %s: %s\n", out, strerror(errno));
        return 1;
    }
    struct pollfd pfds[2] = {{dialer, POLLIN, 0}, {member, POLLIN, 0}};
    while (poll(pfds, 2, -1) > 0) {
        if ((pfds[0].revents && !relay(dialer, member, record)) ||
            (pfds[1].revents && !relay(member, dialer, NULL)))
            break;
    }
    long length = ftell(record);
    fclose(record);
    close(dialer);
    close(member);
    close(listener);
    printf("recorded %ld bytes\n", length);
    return length > 0 ? 0 : 1;
}

static int add_conns(struct attack *a, enum conn_kind kind, const char *count_text)
{
    char *end = NULL;
    unsigned long count = strtoul(count_text, &end, 10);
    if (*end != '\0' || count > ATTACK_MAX_CONNS - a->num_conns) {
        fprintf(stderr, "spindle-attack: bad connection count '%s'\n", count_text);
        return -1;
    }
    for (unsigned long i = 0; i < count; i++)
        a->conns[a->num_conns++] = (struct conn){.fd = -1, .kind = kind};
    return 0;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: spindle-attack --target HOST:PORT[,...] [--sources PREFIX N] [--idle N]\n"
            "                      [--garbage N] [--replay FILE N] [--rate PER_S] --seconds S\n"
            "       spindle-attack --record PORT --to HOST:PORT --out FILE\n");
    return 1;
}

int main(int argc, char **argv)
{
    static struct attack a = {.rate = 1000};
    const char *record = NULL, *to = NULL, *out = NULL;
    uint64_t seconds = 0;
    srand((unsigned)now_ms());
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        bool more = i + 1 < argc, two = i + 2 < argc;
        if (strcmp(arg, "--target") == 0 && more) {
            if (parse_targets(&a, argv[++i]) != 0)
                return usage();
        } else if (strcmp(arg, "--sources") == 0 && two) {
            snprintf(a.source_prefix, sizeof a.source_prefix, "%s", argv[++i]);
            a.num_sources = (uint32_t)strtoul(argv[++i], NULL, 10);
            if (a.num_sources == 0 || a.num_sources > 254)
                return usage();
        } else if (strcmp(arg, "--idle") == 0 && more) {
            if (add_conns(&a, CONN_IDLE, argv[++i]) != 0)
                return 1;
        } else if (strcmp(arg, "--garbage") == 0 && more) {
            if (add_conns(&a, CONN_GARBAGE, argv[++i]) != 0)
                return 1;
        } else if (strcmp(arg, "--replay") == 0 && two) {
            if (read_file(argv[++i], &a.replay, &a.replay_len) != 0 ||
                add_conns(&a, CONN_REPLAY, argv[++i]) != 0)
                return 1;
        } else if (strcmp(arg, "--rate") == 0 && more) {
            a.rate = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (strcmp(arg, "--seconds") == 0 && more) {
            seconds = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(arg, "--record") == 0 && more) {
            record = argv[++i];
        } else if (strcmp(arg, "--to") == 0 && more) {
            to = argv[++i];
        } else if (strcmp(arg, "--out") == 0 && more) {
            out = argv[++i];
        } else {
            return usage();
        }
    }
    if (record != NULL)
        return to != NULL && out != NULL ? run_record(record, to, out) : usage();
    if (a.num_targets == 0 || seconds == 0 || a.num_conns == 0 || a.rate == 0)
        return usage();
    struct sigaction stop = {.sa_handler = on_stop};
    sigaction(SIGTERM, &stop, NULL);
    sigaction(SIGINT, &stop, NULL);
    run_attack(&a, seconds);
    printf("{\"opened\":%llu,\"failed\":%llu,\"closed_by_members\":%llu,\"bytes_sent\":%llu,"
           "\"bytes_received\":%llu,\"most_received_on_one\":%llu}\n",
           (unsigned long long)a.opened, (unsigned long long)a.failed, (unsigned long long)a.closed,
           (unsigned long long)a.bytes_sent, (unsigned long long)a.bytes_received,
           (unsigned long long)a.most_received);
    free(a.replay);
    return a.opened > 0 ? 0 : 1;
}
