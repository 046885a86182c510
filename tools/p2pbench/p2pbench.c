/*
 * spindle-p2pbench: throughput and latency of point-to-point messages
 * (include/spindle/p2p.h) between two members forked on this host (shm).
 *
 * Member 0 sends --messages one-way messages of --size bytes to member 1
 * as fast as spindle_p2p_send takes them, then one query, which member 1
 * answers once every message before it is delivered (the pair's order):
 * the time from the first send to that reply gives the throughput. Then
 * --queries queries of --size bytes, each answered inside member 1's p2p
 * upcall with as many bytes: the round trips give the latency. Prints one
 * line of key=value figures. Uses the public API only; not installed.
 *
 * Usage: spindle-p2pbench [--messages N] [--size B] [--queries N]
 *                         [--window W] [--dispatch]
 */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <spindle/spindle.h>

struct bench {
    uint64_t messages, queries;
    uint32_t size, window;
    bool dispatch;
};

struct member {
    spindle_group_t *group;
    uint64_t received; /* member 1: one-way messages delivered */
    char reply[SPINDLE_P2P_MAX_PAYLOAD];
    uint32_t size;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_p2p(void *ctx, const struct spindle_p2p_message *m)
{
    struct member *s = ctx;
    if (m->query_id == 0) {
        s->received++;
        return;
    }
    spindle_group_t *group = __atomic_load_n(&s->group, __ATOMIC_ACQUIRE);
    /* The ring back holds p2p_window replies and member 0 waits for each
     * one: it is never full here. */
    int rc = spindle_p2p_reply(group, m, s->reply, s->size, 0);
    if (rc != 0)
        fprintf(stderr, "p2pbench: reply: %s\n", spindle_errmsg());
}

static void no_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    (void)ctx;
    (void)m;
    (void)n;
}

static void *dispatcher(void *arg)
{
    spindle_dispatch(arg, SPINDLE_DISPATCH_BLOCKING);
    return NULL;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int fail(const char *what)
{
    fprintf(stderr, "p2pbench: %s: %s\n", what, spindle_errmsg());
    return 1;
}

/* Member 0's measurements. */
static int measure(struct member *s, const struct bench *b)
{
    static char payload[SPINDLE_P2P_MAX_PAYLOAD];
    char reply[SPINDLE_P2P_MAX_PAYLOAD];
    size_t length;
    uint64_t start = now_ns();
    for (uint64_t i = 0; i < b->messages; i++)
        if (spindle_p2p_send(s->group, 1, payload, b->size, 0) != 0)
            return fail("send");
    if (spindle_p2p_query(s->group, 1, payload, 0, reply, sizeof reply, &length, 60000) != 0)
        return fail("query after the messages");
    double seconds = (double)(now_ns() - start) / 1e9;
    uint64_t *rtt = calloc(b->queries > 0 ? b->queries : 1, sizeof *rtt);
    if (rtt == NULL)
        return 1;
    for (uint64_t i = 0; i < b->queries; i++) {
        uint64_t t0 = now_ns();
        if (spindle_p2p_query(s->group, 1, payload, b->size, reply, sizeof reply, &length, 60000) !=
            0) {
            free(rtt);
            return fail("query");
        }
        rtt[i] = now_ns() - t0;
    }
    qsort(rtt, b->queries, sizeof *rtt, compare_u64);
    uint64_t median = b->queries > 0 ? rtt[b->queries / 2] : 0;
    uint64_t p99 = b->queries > 0 ? rtt[b->queries * 99 / 100] : 0;
    printf("size=%u window=%u dispatch=%d messages=%llu msgs_per_s=%.0f MB_per_s=%.1f "
           "queries=%llu rtt_median_us=%.1f rtt_p99_us=%.1f\n",
           b->size, b->window, b->dispatch ? 1 : 0, (unsigned long long)b->messages,
           (double)b->messages / seconds, (double)b->messages * b->size / seconds / 1e6,
           (unsigned long long)b->queries, (double)median / 1e3, (double)p99 / 1e3);
    fflush(stdout); /* the member leaves with _exit */
    free(rtt);
    return 0;
}

static int member_main(uint32_t self, const char *dir, const struct bench *b)
{
    static struct member s;
    s.size = b->size;
    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.self = self;
    o.num_members = 2;
    o.bootstrap = dir;
    o.admin_dir = "off";
    o.deliver = no_deliver;
    o.p2p_deliver = on_p2p;
    o.p2p_ctx = &s;
    o.p2p_window = b->window;
    o.dispatch = b->dispatch;
    static const uint32_t members[] = {0, 1}, senders[] = {0};
    struct spindle_subgroup_config sg = {members, 2, senders, 1, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *group;
    if (spindle_group_create(&o, &sg, 1, &group) != 0)
        return fail("create");
    __atomic_store_n(&s.group, group, __ATOMIC_RELEASE);
    pthread_t thread;
    if (b->dispatch && pthread_create(&thread, NULL, dispatcher, group) != 0)
        return 1;
    int rc = spindle_barrier(group, 30000) != 0 ? fail("barrier") : 0;
    if (rc == 0 && self == 0)
        rc = measure(&s, b);
    if (spindle_barrier(group, 120000) != 0 || spindle_group_shutdown(group, 30000) != 0)
        rc = fail("shutdown");
    if (b->dispatch)
        pthread_join(thread, NULL);
    spindle_group_destroy(group);
    return rc;
}

int main(int argc, char **argv)
{
    struct bench b = {.messages = 1000000, .queries = 20000, .size = 64, .window = 0};
    static const struct option longs[] = {
        {"messages", required_argument, 0, 'm'}, {"size", required_argument, 0, 's'},
        {"queries", required_argument, 0, 'q'},  {"window", required_argument, 0, 'w'},
        {"dispatch", no_argument, 0, 'd'},       {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        if (c == 'm')
            b.messages = strtoull(optarg, NULL, 10);
        else if (c == 's')
            b.size = (uint32_t)strtoul(optarg, NULL, 10);
        else if (c == 'q')
            b.queries = strtoull(optarg, NULL, 10);
        else if (c == 'w')
            b.window = (uint32_t)strtoul(optarg, NULL, 10);
        else if (c == 'd')
            b.dispatch = true;
        else
            return 2;
    }
    if (b.size > SPINDLE_P2P_MAX_PAYLOAD) {
        fprintf(stderr, "p2pbench: --size %u exceeds SPINDLE_P2P_MAX_PAYLOAD %u\n", b.size,
                SPINDLE_P2P_MAX_PAYLOAD);
        return 2;
    }
    char dir[] = "/tmp/spindle-p2pbench-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return 1;
    pid_t pids[2];
    for (uint32_t i = 0; i < 2; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(member_main(i, dir, &b));
    }
    int rc = 0;
    for (uint32_t i = 0; i < 2; i++) {
        int status = 0;
        waitpid(pids[i], &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            rc = 1;
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        rc = 1;
    return rc;
}
