/*
 * spindle-kv-writeload: the write load of docs/KV.md's etcd comparison.
 * Random keys of 100,000 with 16-byte values, one request outstanding on
 * each of CONNECTIONS connections spread over the given servers, sent
 * either as RESP SETs or to etcd's v3 HTTP/JSON gateway (POST
 * /v3/kv/put over keep-alive connections). THREADS threads, each with an
 * epoll set over its share of the connections and of the requests: on a
 * small host the generator's CPU time is taken from the servers it
 * measures, so it does as little per request as it can, the same for both
 * systems, and it has more than one thread so that, with every core busy,
 * the scheduler's share of one thread does not bound the rate.
 *
 * Usage: spindle-kv-writeload etcd|resp REQUESTS CONNECTIONS THREADS HOST:PORT...
 * Prints "writes/s N (W writes in S s) p50_ms X p99_ms Y"; the clock
 * starts once every connection is open. Exits 1 naming the server and its
 * reply when a write is refused or a connection fails, 2 on bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define KEYS            100000u
#define VALUE_LEN       16
#define BUF_SIZE        4096
#define MAX_CONNECTIONS 4096
#define MAX_THREADS     16

enum kind { KIND_RESP, KIND_ETCD };

struct server {
    char host[64];
    struct sockaddr_in addr;
};

struct conn {
    int fd;
    const struct server *server;
    char buf[BUF_SIZE];
    size_t len;
    uint64_t sent_ns;
};

struct run {
    enum kind kind;
    uint64_t requests;
    uint64_t sent;
    uint64_t done;
    uint64_t rng;
    uint64_t *latencies_ns;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: the keys only need to be spread, not unpredictable. */
static uint32_t next_key(struct run *run)
{
    run->rng ^= run->rng >> 12;
    run->rng ^= run->rng << 25;
    run->rng ^= run->rng >> 27;
    return (uint32_t)((run->rng * 2685821657736338717ull) >> 32) % KEYS;
}

/* The request for key into out; its length. */
static int make_request(const struct run *run, const struct server *server, uint32_t key, char *out,
                        size_t cap)
{
    char name[32];
    snprintf(name, sizeof name, "key:%012u", key);
    if (run->kind == KIND_RESP)
        return snprintf(out, cap, "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%d\r\n%s\r\n", strlen(name),
                        name, VALUE_LEN, "vvvvvvvvvvvvvvvv");
    /* etcd's gateway takes base64: "key:" + 12 digits is 16 bytes, so its
     * encoding has no padding; 16 'v's encode as below. */
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char key64[32];
    size_t at = 0;
    for (size_t i = 0; i + 2 < 16; i += 3) {
        uint32_t v = (uint32_t)(uint8_t)name[i] << 16 | (uint32_t)(uint8_t)name[i + 1] << 8 |
                     (uint8_t)name[i + 2];
        key64[at++] = b64[v >> 18];
        key64[at++] = b64[(v >> 12) & 63];
        key64[at++] = b64[(v >> 6) & 63];
        key64[at++] = b64[v & 63];
    }
    uint32_t last = (uint32_t)(uint8_t)name[15] << 16;
    key64[at++] = b64[last >> 18];
    key64[at++] = b64[(last >> 12) & 63];
    key64[at++] = '=';
    key64[at++] = '=';
    key64[at] = '\0';
    char body[128];
    int body_len = snprintf(body, sizeof body, "{\"key\":\"%s\",\"value\":\"%s\"}", key64,
                            "dnZ2dnZ2dnZ2dnZ2dnZ2dg==");
    return snprintf(out, cap,
                    "POST /v3/kv/put HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                    "Content-Length: %d\r\n\r\n%s",
                    server->host, body_len, body);
}

/* Length of one complete reply at the start of c->buf, 0 when more bytes
 * are needed, -1 (named on stderr) when the server refused the write. */
static long complete(enum kind kind, const struct conn *c)
{
    const char *buf = c->buf;
    size_t len = c->len;
    if (kind == KIND_RESP) {
        const char *end = memmem(buf, len, "\r\n", 2);
        if (end == NULL)
            return 0;
        if (buf[0] != '+') {
            fprintf(stderr, "spindle-kv-writeload: %s replied %.*s\n", c->server->host,
                    (int)(end - buf), buf);
            return -1;
        }
        return end - buf + 2;
    }
    const char *head_end = memmem(buf, len, "\r\n\r\n", 4);
    if (head_end == NULL)
        return 0;
    size_t head = (size_t)(head_end - buf) + 4;
    if (len < 12 || strncmp(buf, "HTTP/1.1 200", 12) != 0) {
        fprintf(stderr, "spindle-kv-writeload: %s replied %.*s\n", c->server->host,
                (int)(head < 200 ? head : 200), buf);
        return -1;
    }
    for (const char *line = buf; line < head_end;) {
        const char *eol = memmem(line, (size_t)(head_end - line) + 2, "\r\n", 2);
        if (strncasecmp(line, "content-length:", 15) == 0) {
            size_t total = head + strtoul(line + 15, NULL, 10);
            return len >= total ? (long)total : 0;
        }
        line = eol + 2;
    }
    fprintf(stderr, "spindle-kv-writeload: %s replied without a Content-Length\n", c->server->host);
    return -1;
}

static int send_request(struct run *run, struct conn *c)
{
    char request[512];
    int n = make_request(run, c->server, next_key(run), request, sizeof request);
    c->sent_ns = now_ns();
    for (int at = 0; at < n;) {
        ssize_t w = send(c->fd, request + at, (size_t)(n - at), MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            fprintf(stderr, "spindle-kv-writeload: sending to %s: %s\n", c->server->host,
                    w < 0 ? strerror(errno) : "nothing sent");
            return -1;
        }
        at += (int)w;
    }
    run->sent++;
    return 0;
}

/* Reads what c has and answers every complete reply with the next
 * request. */
static int on_readable(struct run *run, struct conn *c)
{
    ssize_t r = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, 0);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (r <= 0) {
        fprintf(stderr, "spindle-kv-writeload: %s %s\n", c->server->host,
                r == 0 ? "closed the connection" : strerror(errno));
        return -1;
    }
    c->len += (size_t)r;
    for (;;) {
        long n = complete(run->kind, c);
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        memmove(c->buf, c->buf + n, c->len - (size_t)n);
        c->len -= (size_t)n;
        run->latencies_ns[run->done++] = now_ns() - c->sent_ns;
        if (run->sent < run->requests && send_request(run, c) != 0)
            return -1;
    }
    if (c->len == sizeof c->buf) {
        fprintf(stderr, "spindle-kv-writeload: %s sent a reply over %d bytes\n", c->server->host,
                BUF_SIZE);
        return -1;
    }
    return 0;
}

static int parse_server(const char *arg, struct server *out)
{
    const char *colon = strrchr(arg, ':');
    char *end;
    unsigned long port = colon == NULL ? 0 : strtoul(colon + 1, &end, 10);
    memset(out, 0, sizeof *out);
    out->addr.sin_family = AF_INET;
    if (colon == NULL || *end != '\0' || port == 0 || port > 65535 ||
        (size_t)(colon - arg) >= sizeof out->host) {
        fprintf(stderr, "spindle-kv-writeload: %s is not HOST:PORT\n", arg);
        return -1;
    }
    char host[sizeof out->host];
    memcpy(host, arg, (size_t)(colon - arg));
    host[colon - arg] = '\0';
    if (inet_pton(AF_INET, host, &out->addr.sin_addr) != 1) {
        fprintf(stderr, "spindle-kv-writeload: %s is not an IPv4 address\n", host);
        return -1;
    }
    out->addr.sin_port = htons((uint16_t)port);
    snprintf(out->host, sizeof out->host, "%s", arg);
    return 0;
}

static int open_conn(int epfd, struct conn *c)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (c->fd < 0 ||
        connect(c->fd, (const struct sockaddr *)&c->server->addr, sizeof c->server->addr) != 0 ||
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
        fprintf(stderr, "spindle-kv-writeload: connecting to %s: %s\n", c->server->host,
                strerror(errno));
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        fprintf(stderr, "spindle-kv-writeload: epoll_ctl: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int drive(struct run *run, struct conn *conns, unsigned count, int epfd)
{
    for (unsigned i = 0; i < count && run->sent < run->requests; i++)
        if (send_request(run, &conns[i]) != 0)
            return -1;
    struct epoll_event events[256];
    while (run->done < run->requests) {
        int n = epoll_wait(epfd, events, 256, 60000);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "spindle-kv-writeload: %s\n",
                    n == 0 ? "no reply for 60 s" : strerror(errno));
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (on_readable(run, events[i].data.ptr) != 0)
                return -1;
    }
    return 0;
}

/* Prints the rate and the latency percentiles of done requests. */
static void report(uint64_t *latencies_ns, uint64_t done, double seconds)
{
    qsort(latencies_ns, done, sizeof *latencies_ns, compare_u64);
    uint64_t p50 = latencies_ns[done / 2];
    uint64_t p99 = latencies_ns[done * 99 / 100];
    printf("writes/s %.0f (%llu writes in %.2f s) p50_ms %.3f p99_ms %.3f\n",
           (double)done / seconds, (unsigned long long)done, seconds, (double)p50 / 1e6,
           (double)p99 / 1e6);
}

/* One thread's share: its connections, its epoll set, its requests. */
struct worker {
    struct run run;
    struct conn *conns;
    unsigned count;
    int epfd;
    int rc;
    pthread_t thread;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    w->rc = drive(&w->run, w->conns, w->count, w->epfd);
    return NULL;
}

/* Opens w's connections (the first of them is conns[first]); 0, or -1
 * named on stderr. */
static int open_worker(struct worker *w, const struct server *servers, int num_servers,
                       unsigned first)
{
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (w->epfd < 0) {
        fprintf(stderr, "spindle-kv-writeload: epoll_create1: %s\n", strerror(errno));
        return -1;
    }
    for (unsigned i = 0; i < w->count; i++) {
        w->conns[i].server = &servers[(first + i) % (unsigned)num_servers];
        if (open_conn(w->epfd, &w->conns[i]) != 0)
            return -1;
    }
    return 0;
}

/* Runs the requests over every worker once all connections are open;
 * 0, or 1 named on stderr. */
static int run_load(const struct run *total, const struct server *servers, int num_servers,
                    struct conn *conns, unsigned count, unsigned threads)
{
    struct worker workers[MAX_THREADS];
    memset(workers, 0, sizeof workers);
    int rc = 0;
    unsigned opened = 0, first = 0;
    uint64_t offset = 0;
    for (unsigned t = 0; t < threads; t++) {
        struct worker *w = &workers[t];
        w->epfd = -1;
        w->run = *total;
        w->run.requests = total->requests / threads + (t < total->requests % threads ? 1 : 0);
        w->run.latencies_ns = total->latencies_ns + offset;
        w->run.rng = total->rng + t * 0x9e3779b97f4a7c15ull;
        offset += w->run.requests;
        w->conns = conns + first;
        w->count = count / threads + (t < count % threads ? 1 : 0);
        if (rc == 0 && open_worker(w, servers, num_servers, first) != 0)
            rc = 1;
        first += w->count;
        opened = t + 1;
    }
    uint64_t started = now_ns();
    unsigned running = 0;
    for (; rc == 0 && running < threads; running++)
        if (pthread_create(&workers[running].thread, NULL, worker_main, &workers[running]) != 0) {
            fprintf(stderr, "spindle-kv-writeload: cannot start a thread\n");
            rc = 1;
        }
    for (unsigned t = 0; t < running; t++) {
        pthread_join(workers[t].thread, NULL);
        if (workers[t].rc != 0)
            rc = 1;
    }
    double seconds = (double)(now_ns() - started) / 1e9;
    uint64_t done = 0;
    for (unsigned t = 0; rc == 0 && t < threads; t++) {
        memmove(total->latencies_ns + done, workers[t].run.latencies_ns,
                workers[t].run.done * sizeof *total->latencies_ns);
        done += workers[t].run.done;
    }
    if (rc == 0)
        report(total->latencies_ns, done, seconds);
    for (unsigned i = 0; i < count; i++)
        if (conns[i].fd > 0)
            close(conns[i].fd);
    for (unsigned t = 0; t < opened; t++)
        if (workers[t].epfd >= 0)
            close(workers[t].epfd);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 6 || (strcmp(argv[1], "etcd") != 0 && strcmp(argv[1], "resp") != 0)) {
        fprintf(stderr, "usage: spindle-kv-writeload etcd|resp REQUESTS CONNECTIONS THREADS "
                        "HOST:PORT...\n");
        return 2;
    }
    struct run run = {.kind = strcmp(argv[1], "etcd") == 0 ? KIND_ETCD : KIND_RESP,
                      .rng = 0x9e3779b97f4a7c15ull};
    char *end;
    run.requests = strtoull(argv[2], &end, 10);
    bool bad = *end != '\0';
    unsigned long count = strtoul(argv[3], &end, 10);
    bad = bad || *end != '\0';
    unsigned long threads = strtoul(argv[4], &end, 10);
    if (bad || *end != '\0' || run.requests == 0 || count == 0 || count > MAX_CONNECTIONS ||
        threads == 0 || threads > MAX_THREADS || threads > count) {
        fprintf(stderr,
                "spindle-kv-writeload: REQUESTS must be over 0, CONNECTIONS 1..%d and THREADS "
                "1..%d, at most CONNECTIONS\n",
                MAX_CONNECTIONS, MAX_THREADS);
        return 2;
    }
    int num_servers = argc - 5;
    struct server *servers = calloc((size_t)num_servers, sizeof *servers);
    struct conn *conns = calloc(count, sizeof *conns);
    run.latencies_ns = malloc(run.requests * sizeof *run.latencies_ns);
    int rc = 0;
    if (servers == NULL || conns == NULL || run.latencies_ns == NULL) {
        fprintf(stderr, "spindle-kv-writeload: out of memory\n");
        rc = 1;
    }
    for (int i = 0; rc == 0 && i < num_servers; i++)
        if (parse_server(argv[5 + i], &servers[i]) != 0)
            rc = 2;
    if (rc == 0)
        rc = run_load(&run, servers, num_servers, conns, (unsigned)count, (unsigned)threads);
    free(run.latencies_ns);
    free(conns);
    free(servers);
    return rc;
}
