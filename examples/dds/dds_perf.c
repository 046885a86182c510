/*
 * spindle-dds-perf: one publisher and N subscribers of one topic, each a
 * process on this host (shm), the Spindle paper's Figure 18 setup. The
 * publisher writes --samples samples of --size bytes, built in place; each
 * subscriber times them from the first sample's source time to the last
 * delivery, and takes each sample's latency (delivery time less source
 * time, CLOCK_REALTIME on one host). One JSON line:
 *
 *   {"qos":"atomic","baseline":false,"subscribers":2,"size":10240,
 *    "samples":20000,"window":64,"samples_per_s":[...],"mb_per_s":[...],
 *    "samples_per_s_min":...,"mb_per_s_min":...,"latency_p50_us":...,
 *    "latency_p99_us":...,"latency_p999_us":...,"records_per_fdatasync":...}
 *
 * samples_per_s and mb_per_s are per subscriber (MB = 10^6 bytes);
 * latencies are over every subscriber's samples (the worst subscriber's
 * quantile); records_per_fdatasync is the first subscriber's log's (logged
 * QoS; 0 otherwise), what the raw append reference batches by.
 *
 *   spindle-dds-perf --qos unordered|atomic|volatile|logged --subscribers N
 *                    --size BYTES --samples K [--window W] [--baseline]
 *                    [--log-dir DIR]
 */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spindle_dds.h"

#define MAX_SUBSCRIBERS 8

struct perf_options {
    enum spindle_dds_qos qos;
    uint32_t subscribers, size, window;
    uint64_t samples;
    bool baseline;
    const char *log_dir;
};

struct sub_report {
    uint64_t received;
    double seconds;
    double latency_us[3]; /* p50, p99, p99.9 */
    uint32_t latencies_count;
    uint64_t log_records, log_syncs; /* logged: this member's log */
};

struct sub_state {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t received, first_source_ns, last_ns;
    uint32_t *latency_ns; /* one per sample, capped at 2^32-1 */
    uint64_t capacity;
};

static uint64_t realtime_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static void on_sample(void *ctx, const struct spindle_dds_sample_info *info, const void *data)
{
    (void)data;
    struct sub_state *s = ctx;
    uint64_t now = realtime_ns();
    uint64_t latency = now > info->source_timestamp_ns ? now - info->source_timestamp_ns : 0;
    pthread_mutex_lock(&s->lock);
    if (s->received == 0)
        s->first_source_ns = info->source_timestamp_ns;
    if (s->received < s->capacity)
        s->latency_ns[s->received] = latency > UINT32_MAX ? UINT32_MAX : (uint32_t)latency;
    s->received++;
    s->last_ns = now;
    if (s->received >= s->capacity)
        pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int fail(const char *who, const char *what)
{
    fprintf(stderr, "spindle-dds-perf: %s: %s: %s\n", who, what, spindle_dds_errmsg());
    return 1;
}

static int run_publisher(const struct spindle_dds_config *config, const struct perf_options *o)
{
    spindle_dds_participant_t *p;
    struct spindle_dds_participant_options po = {.baseline = o->baseline};
    if (spindle_dds_participant_create(config, "publisher", &po, &p) != 0)
        return fail("publisher", "create");
    spindle_dds_writer_t *writer;
    if (spindle_dds_writer_create(p, "perf", &writer) != 0)
        return fail("publisher", "writer");
    if (spindle_barrier(spindle_dds_participant_group(p), 60000) != 0)
        return fail("publisher", spindle_errmsg());
    for (uint64_t i = 0; i < o->samples; i++) {
        void *sample;
        if (spindle_dds_writer_loan(writer, o->size, false, &sample) != 0)
            return fail("publisher", "loan");
        memcpy(sample, &i, o->size < sizeof i ? o->size : sizeof i); /* built in place */
        if (spindle_dds_writer_write(writer, o->size) < 0)
            return fail("publisher", "write");
    }
    int rc = spindle_dds_participant_shutdown(p, 120000);
    spindle_dds_participant_destroy(p);
    return rc == 0 ? 0 : fail("publisher", "shutdown");
}

static int run_subscriber(const struct spindle_dds_config *config, const struct perf_options *o,
                          uint32_t index, int report_fd)
{
    char name[32];
    snprintf(name, sizeof name, "subscriber-%u", index);
    struct sub_state s = {.capacity = o->samples};
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.cond, NULL);
    s.latency_ns = calloc(o->samples, sizeof *s.latency_ns);
    if (s.latency_ns == NULL)
        return fail(name, "no memory for the latencies");
    spindle_dds_participant_t *p;
    struct spindle_dds_participant_options po = {.baseline = o->baseline};
    if (spindle_dds_participant_create(config, name, &po, &p) != 0)
        return fail(name, "create");
    spindle_dds_reader_t *reader;
    struct spindle_dds_reader_options ro = {.listener = on_sample, .listener_ctx = &s};
    if (spindle_dds_reader_create(p, "perf", &ro, &reader) != 0)
        return fail(name, "reader");
    if (spindle_barrier(spindle_dds_participant_group(p), 60000) != 0)
        return fail(name, spindle_errmsg());
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 600;
    pthread_mutex_lock(&s.lock);
    int wait_rc = 0;
    while (s.received < o->samples && wait_rc == 0)
        wait_rc = pthread_cond_timedwait(&s.cond, &s.lock, &deadline);
    pthread_mutex_unlock(&s.lock);
    if (wait_rc != 0)
        return fail(name, "timed out waiting for the samples");
    int rc = spindle_dds_participant_shutdown(p, 120000);
    struct spindle_stats stats;
    memset(&stats, 0, sizeof stats);
    (void)spindle_group_stats(spindle_dds_participant_group(p), &stats);
    spindle_dds_participant_destroy(p);
    if (rc != 0)
        return fail(name, "shutdown");
    struct sub_report r = {.received = s.received,
                           .seconds = (double)(s.last_ns - s.first_source_ns) / 1e9,
                           .latencies_count = (uint32_t)o->samples,
                           .log_records = stats.log_records_durable,
                           .log_syncs = stats.log_syncs};
    qsort(s.latency_ns, o->samples, sizeof *s.latency_ns, compare_u32);
    const double quantiles[3] = {0.50, 0.99, 0.999};
    for (int q = 0; q < 3; q++)
        r.latency_us[q] = s.latency_ns[(uint64_t)(quantiles[q] * (double)(o->samples - 1))] / 1e3;
    free(s.latency_ns);
    return write(report_fd, &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1;
}

static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sin;
    uint16_t port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sin, sizeof sin) == 0 &&
        getsockname(fd, (struct sockaddr *)&sin, &len) == 0)
        port = ntohs(sin.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static int build_config(const struct perf_options *o, const char *log_dir,
                        struct spindle_dds_config **out)
{
    char text[4096];
    int at = snprintf(text, sizeof text, "[dds]\ngroup = dds-perf-%d\nlog_dir = %s\n",
                      (int)getpid(), log_dir);
    for (uint32_t i = 0; i <= o->subscribers; i++) {
        uint16_t port = free_port();
        if (port == 0) {
            fprintf(stderr, "spindle-dds-perf: no free loopback port\n");
            return 1;
        }
        if (i == 0)
            at += snprintf(text + at, sizeof text - (size_t)at,
                           "[participant.0]\nname = publisher\nport = %u\n", port);
        else
            at += snprintf(text + at, sizeof text - (size_t)at,
                           "[participant.%u]\nname = subscriber-%u\nport = %u\n", i, i, port);
    }
    at += snprintf(text + at, sizeof text - (size_t)at,
                   "[topic.0]\nname = perf\nqos = %s\npublishers = 0\nsubscribers = ",
                   spindle_dds_qos_name(o->qos));
    for (uint32_t i = 1; i <= o->subscribers; i++)
        at += snprintf(text + at, sizeof text - (size_t)at, "%s%u", i > 1 ? "," : "", i);
    snprintf(text + at, sizeof text - (size_t)at,
             "\nmax_sample_size = %u\nwindow = %u\nhistory_depth = 16\n", o->size, o->window);
    if (spindle_dds_config_parse(text, strlen(text), "spindle-dds-perf", out) != 0) {
        fprintf(stderr, "spindle-dds-perf: %s\n", spindle_dds_errmsg());
        return 1;
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void print_line(const struct perf_options *o, const struct sub_report *reports)
{
    double min_rate = 0, worst[3] = {0, 0, 0};
    printf("{\"qos\":\"%s\",\"baseline\":%s,\"subscribers\":%u,\"size\":%u,\"samples\":%llu,"
           "\"window\":%u,\"samples_per_s\":[",
           spindle_dds_qos_name(o->qos), o->baseline ? "true" : "false", o->subscribers, o->size,
           (unsigned long long)o->samples, o->window);
    for (uint32_t i = 0; i < o->subscribers; i++) {
        double rate = reports[i].seconds > 0 ? (double)reports[i].received / reports[i].seconds : 0;
        printf("%s%.1f", i > 0 ? "," : "", rate);
        if (i == 0 || rate < min_rate)
            min_rate = rate;
        for (int q = 0; q < 3; q++)
            if (reports[i].latency_us[q] > worst[q])
                worst[q] = reports[i].latency_us[q];
    }
    printf("],\"mb_per_s\":[");
    for (uint32_t i = 0; i < o->subscribers; i++) {
        double rate = reports[i].seconds > 0 ? (double)reports[i].received / reports[i].seconds : 0;
        printf("%s%.2f", i > 0 ? "," : "", rate * o->size / 1e6);
    }
    printf("],\"samples_per_s_min\":%.1f,\"mb_per_s_min\":%.2f,\"latency_p50_us\":%.1f,"
           "\"latency_p99_us\":%.1f,\"latency_p999_us\":%.1f,\"records_per_fdatasync\":%.2f}\n",
           min_rate, min_rate * o->size / 1e6, worst[0], worst[1], worst[2],
           reports[0].log_syncs > 0 ? (double)reports[0].log_records / (double)reports[0].log_syncs
                                    : 0.0);
}

static int usage(const char *what)
{
    fprintf(stderr,
            "spindle-dds-perf: %s\n"
            "usage: spindle-dds-perf --qos unordered|atomic|volatile|logged --subscribers N\n"
            "                        --size BYTES --samples K [--window W] [--baseline]\n"
            "                        [--log-dir DIR]\n",
            what);
    return 2;
}

static int parse_args(int argc, char **argv, struct perf_options *o)
{
    static const struct option long_options[] = {
        {"qos", required_argument, 0, 'q'},     {"subscribers", required_argument, 0, 'n'},
        {"size", required_argument, 0, 's'},    {"samples", required_argument, 0, 'k'},
        {"window", required_argument, 0, 'w'},  {"baseline", no_argument, 0, 'b'},
        {"log-dir", required_argument, 0, 'l'}, {0, 0, 0, 0},
    };
    *o = (struct perf_options){
        .qos = SPINDLE_DDS_ATOMIC, .subscribers = 2, .size = 10240, .samples = 20000, .window = 64};
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
        unsigned long long v = 0;
        if (c == 'n' || c == 's' || c == 'k' || c == 'w') {
            errno = 0;
            v = strtoull(optarg, &end, 10);
            if (errno != 0 || *end != '\0' || v == 0)
                return usage("a count must be a positive number");
        }
        switch (c) {
        case 'q':
            if (spindle_dds_qos_parse(optarg, &o->qos) != 0)
                return usage(spindle_dds_errmsg());
            break;
        case 'n':
            if (v > MAX_SUBSCRIBERS)
                return usage("--subscribers must be 1..8");
            o->subscribers = (uint32_t)v;
            break;
        case 's':
            if (v > SPINDLE_DDS_MAX_SAMPLE || v < 8)
                return usage("--size must be 8..1048544");
            o->size = (uint32_t)v;
            break;
        case 'k':
            if (v > 100000000)
                return usage("--samples must be 1..100000000");
            o->samples = v;
            break;
        case 'w':
            if (v > SPINDLE_MAX_WINDOW)
                return usage("--window must be 1..100000");
            o->window = (uint32_t)v;
            break;
        case 'b':
            o->baseline = true;
            break;
        case 'l':
            o->log_dir = optarg;
            break;
        default:
            return usage("unknown option");
        }
    }
    if (optind != argc)
        return usage("unexpected argument");
    return 0;
}

int main(int argc, char **argv)
{
    struct perf_options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc;
    char scratch[] = "/var/tmp/spindle-dds-perf-XXXXXX";
    if (o.log_dir == NULL && mkdtemp(scratch) == NULL) {
        perror("spindle-dds-perf: mkdtemp");
        return 1;
    }
    struct spindle_dds_config *config;
    if (build_config(&o, o.log_dir != NULL ? o.log_dir : scratch, &config) != 0)
        return 1;
    pid_t pids[MAX_SUBSCRIBERS + 1];
    int fds[MAX_SUBSCRIBERS + 1][2];
    int failed = 0;
    uint32_t started = 0;
    for (; started <= o.subscribers && !failed; started++) {
        if (pipe(fds[started]) != 0) {
            failed = 1;
            break;
        }
        pids[started] = fork();
        if (pids[started] < 0) {
            close(fds[started][0]);
            close(fds[started][1]);
            failed = 1;
            break;
        }
        if (pids[started] == 0) {
            close(fds[started][0]);
            _exit(started == 0 ? run_publisher(config, &o)
                               : run_subscriber(config, &o, started, fds[started][1]));
        }
        close(fds[started][1]);
    }
    struct sub_report reports[MAX_SUBSCRIBERS];
    for (uint32_t i = 0; i < started; i++) {
        if (i > 0 && read(fds[i][0], &reports[i - 1], sizeof reports[i - 1]) !=
                         (ssize_t)sizeof reports[i - 1])
            failed = 1;
        close(fds[i][0]);
        int status;
        if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            failed = 1;
    }
    free(config);
    if (o.log_dir == NULL)
        nftw(scratch, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (failed) {
        fprintf(stderr, "spindle-dds-perf: a participant failed\n");
        return 1;
    }
    print_line(&o, reports);
    return 0;
}
