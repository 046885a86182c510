/*
 * spindle-rawbench: the raw one-sided write reference that spindle-bench's
 * figures are compared against. Two members of one transport backend:
 * member 0 streams one-sided writes of --msg-size bytes into member 1
 * (batches of RAW_BATCH writes per doorbell, a ring of --window slots) and
 * then both measure 8-byte write latency by ping-pong (half the round
 * trip). It drives the transport layer directly, below the SST and the
 * multicast, so it links the library's internals.
 *
 *   spindle-rawbench --local 2 [options]                  forks both members here
 *   spindle-rawbench --id I --members H:P,H:P [options]   runs member I (TCP bootstrap)
 *
 * Output: a summary line, then one JSON line (raw_msgs_per_s, raw_mb_per_s,
 * raw_latency_us) that scripts/perf.sh reads. Exit status: 0, 1 when a
 * member failed, 2 on a bad command line.
 */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spindle/spindle.h>

#include "control/ctl.h"
#include "group/group_bootstrap.h"
#include "rawappend.h"
#include "transport/transport.h"
#include "util/clock.h"

struct raw_config {
    const char *transport;
    const char *provider;
    const char *members; /* --members: TCP bootstrap */
    const char *bootstrap_dir;
    char group_name[64];
    uint32_t msg_size;
    uint32_t window;
    uint64_t messages;
    int id;
    bool local;
    /* --append DIR: the disk reference instead (rawappend.h) */
    struct raw_append_config append;
};

/* What a member reports (member 0 streams and reports the figures). */
struct raw_result {
    int ok;
    char error[256];
    int is_reporter;
    uint64_t writes;
    double seconds;
    double latency_us;
};

#define RAW_BATCH    16
#define RAW_PINGS    2000
#define RAW_WARMUP   100
#define RAW_TAG_DESC 0x7261
#define RAW_TAG_DONE 0x7262

struct raw_desc {
    struct tp_desc address;
    struct tp_desc region;
};

struct raw_ctx {
    struct tp_endpoint *ep;
    struct tp_mr *mr;
    uint8_t *base;
    struct tp_peer *peer;
    struct tp_rmr *rmr;
    size_t ping_offset; /* 8-byte word written by the other member */
    uint64_t outstanding;
    bool yield; /* give the core away while waiting (fabric) */
};

static int raw_open(const struct raw_config *config, const struct group_bootstrap *boot,
                    uint32_t self, struct raw_ctx *c, size_t region)
{
    struct tp_config tp;
    memset(&tp, 0, sizeof tp);
    tp.backend = config->transport;
    tp.group_name = config->group_name;
    tp.self_id = self;
    tp.provider = config->provider;
    tp.failure_timeout_ms = 5000;
    if (boot->kind == SPINDLE_BOOTSTRAP_TCP)
        tp.host = boot->hosts[self].host;
    c->yield = strcmp(config->transport, "fabric") == 0;
    int rc = tp_open(&tp, &c->ep);
    if (rc == 0)
        rc = tp_mr_alloc(c->ep, region, TP_MR_REMOTE_WRITE, (void **)&c->base, &c->mr);
    return rc;
}

static int raw_connect(const struct group_bootstrap *boot, uint32_t self, uint32_t members,
                       struct raw_ctx *c)
{
    struct ctl *ctl;
    struct ctl_versions versions = {1, 1}; /* only spindle-bench --raw processes meet here */
    int rc = group_bootstrap_open(boot, "spindle-bench-raw", self, members, &versions, NULL, 60000,
                                  &ctl);
    if (rc < 0)
        return rc;
    struct raw_desc mine, all[2];
    memset(&mine, 0, sizeof mine);
    rc = tp_address(c->ep, &mine.address);
    if (rc == 0)
        rc = tp_mr_export(c->mr, &mine.region);
    if (rc == 0)
        rc = ctl_allgather(ctl, RAW_TAG_DESC, &mine, sizeof mine, all, 60000);
    uint32_t other = 1 - self;
    if (rc == 0)
        rc = tp_connect(c->ep, &all[other].address, 60000, &c->peer);
    if (rc == 0)
        rc = tp_rmr_import(c->peer, &all[other].region, &c->rmr);
    uint8_t one = 1, both[2];
    if (rc == 0)
        rc = ctl_allgather(ctl, RAW_TAG_DONE, &one, 1, both, 60000);
    ctl_close(ctl);
    return rc;
}

static void raw_reap(struct raw_ctx *c)
{
    struct tp_event events[32];
    int n = tp_poll(c->ep, events, 32);
    for (int i = 0; i < n; i++)
        if (events[i].type == TP_EVENT_WRITE_DONE && c->outstanding > 0)
            c->outstanding--;
}

static int raw_post(struct raw_ctx *c, const struct tp_write *writes, unsigned count)
{
    for (;;) {
        int rc = tp_post_writes(c->peer, writes, count, TP_POST_SIGNALED, 0);
        if (rc == 0) {
            c->outstanding++;
            return 0;
        }
        if (rc != SPINDLE_EAGAIN)
            return rc;
        raw_reap(c);
        if (c->yield)
            sched_yield(); /* credits come back through the progress thread */
    }
}

static int raw_ping(struct raw_ctx *c, uint64_t value)
{
    uint64_t *word = (uint64_t *)(void *)(c->base + c->ping_offset);
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
    /* Lands in the peer's incoming word, just after its outgoing one. */
    struct tp_write w = {word, c->mr, c->rmr, c->ping_offset + 8, 8};
    return raw_post(c, &w, 1);
}

static int raw_wait(struct raw_ctx *c, uint64_t value)
{
    const uint64_t *word = (const uint64_t *)(const void *)(c->base + c->ping_offset + 8);
    uint64_t spins = 0;
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) < value) {
        if ((++spins & 63) == 0) {
            raw_reap(c);
            /* The peer exits right after its last write: that write may
             * have landed since the loop's test. */
            if (tp_peer_state(c->peer) < 0)
                return __atomic_load_n(word, __ATOMIC_ACQUIRE) >= value ? 0 : SPINDLE_EPEERFAILED;
            /* A transport with a progress thread (fabric) needs a core to
             * land the write we wait for; shm and verbs land it without us. */
            if (c->yield)
                sched_yield();
        }
    }
    return 0;
}

/* Both members lay out [outgoing word, incoming word] at ping_offset;
 * member 0 pings, member 1 answers each value. */
static int raw_pingpong(struct raw_ctx *c, uint32_t self, double *latency_us)
{
    uint64_t start = 0;
    for (uint64_t i = 1; i <= RAW_WARMUP + RAW_PINGS; i++) {
        if (i == RAW_WARMUP + 1)
            start = sp_now_ns();
        int rc = self == 0 ? raw_ping(c, i) : raw_wait(c, i);
        if (rc == 0)
            rc = self == 0 ? raw_wait(c, i) : raw_ping(c, i);
        if (rc < 0)
            return rc;
    }
    *latency_us = (double)(sp_now_ns() - start) / RAW_PINGS / 2.0 / 1000.0;
    return 0;
}

static int raw_stream(const struct raw_config *config, struct raw_ctx *c, uint64_t count,
                      size_t stride)
{
    struct tp_write writes[RAW_BATCH];
    uint64_t done = 0;
    while (done < count) {
        unsigned n = 0;
        while (n < RAW_BATCH && done + n < count) {
            size_t offset = ((done + n) % config->window) * stride;
            writes[n] =
                (struct tp_write){c->base + offset, c->mr, c->rmr, offset, config->msg_size};
            n++;
        }
        int rc = raw_post(c, writes, n);
        if (rc < 0)
            return rc;
        done += n;
        raw_reap(c);
    }
    while (c->outstanding > 0) {
        raw_reap(c);
        if (c->yield)
            sched_yield();
    }
    return 0;
}

/* Runs member self (0 measures, 1 echoes) of the two. */
static void run_raw(const struct raw_config *config, uint32_t self, struct raw_result *result)
{
    memset(result, 0, sizeof *result);
    struct raw_ctx c;
    memset(&c, 0, sizeof c);
    size_t stride = ((size_t)config->msg_size + 63) & ~(size_t)63;
    c.ping_offset = stride * config->window;
    struct spindle_group_options options;
    spindle_group_options_init(&options);
    options.num_members = 2;
    options.bootstrap = config->members != NULL ? config->members : config->bootstrap_dir;
    struct group_bootstrap boot;
    int rc = group_bootstrap_parse(&options, &boot);
    if (rc == 0)
        rc = raw_open(config, &boot, self, &c, c.ping_offset + 64);
    if (rc == 0)
        rc = raw_connect(&boot, self, 2, &c);
    if (rc == 0 && self == 0) {
        uint64_t start = sp_now_ns();
        rc = raw_stream(config, &c, config->messages, stride);
        result->seconds = (double)(sp_now_ns() - start) / 1e9;
        result->writes = config->messages;
        result->is_reporter = 1;
    }
    if (rc == 0)
        rc = raw_pingpong(&c, self, &result->latency_us);
    if (rc < 0)
        snprintf(result->error, sizeof result->error, "raw member %u: %s (%s)", self,
                 spindle_strerror(rc), spindle_errmsg());
    result->ok = rc == 0;
    if (c.ep != NULL) {
        if (c.mr != NULL)
            tp_mr_free(c.ep, c.mr);
        tp_close(c.ep);
    }
}

static void report(const struct raw_config *config, const struct raw_result *r)
{
    double msgs = r->seconds > 0 ? (double)r->writes / r->seconds : 0;
    double mb = msgs * config->msg_size / 1e6;
    printf("raw %s: %llu writes of %u B in %.3f s: %.0f writes/s, %.1f MB/s; 8-byte latency "
           "%.2f us\n",
           config->transport, (unsigned long long)r->writes, config->msg_size, r->seconds, msgs, mb,
           r->latency_us);
    printf("{\"raw\":true,\"transport\":\"%s\",\"msg_size\":%u,\"raw_writes\":%llu,"
           "\"seconds\":%.6f,\"raw_msgs_per_s\":%.1f,\"raw_mb_per_s\":%.3f,"
           "\"raw_latency_us\":%.3f}\n",
           config->transport, config->msg_size, (unsigned long long)r->writes, r->seconds, msgs, mb,
           r->latency_us);
}

/* Forks both members with a directory bootstrap; member 0's result is
 * reported. */
static int run_local(struct raw_config *config)
{
    char dir[] = "/tmp/spindle-rawbench-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("spindle-rawbench: mkdtemp");
        return 1;
    }
    config->bootstrap_dir = dir;
    snprintf(config->group_name, sizeof config->group_name, "rawbench-%d", (int)getpid());
    pid_t pids[2];
    int pipes[2][2];
    fflush(NULL);
    for (uint32_t i = 0; i < 2; i++) {
        if (pipe(pipes[i]) < 0 || (pids[i] = fork()) < 0) {
            perror("spindle-rawbench: fork");
            return 1;
        }
        if (pids[i] == 0) {
            struct raw_result result;
            run_raw(config, i, &result);
            if (!result.ok)
                fprintf(stderr, "spindle-rawbench: %s\n", result.error);
            ssize_t w = write(pipes[i][1], &result, sizeof result);
            _exit(w == (ssize_t)sizeof result && result.ok ? 0 : 1);
        }
        close(pipes[i][1]);
    }
    int failed = 0;
    struct raw_result results[2];
    for (uint32_t i = 0; i < 2; i++) {
        int status = 0;
        ssize_t r = read(pipes[i][0], &results[i], sizeof results[i]);
        close(pipes[i][0]);
        if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0 || r != (ssize_t)sizeof results[i] || !results[i].ok)
            failed = 1;
    }
    char cleanup[128];
    snprintf(cleanup, sizeof cleanup, "rm -rf %s", dir);
    if (system(cleanup) != 0)
        fprintf(stderr, "spindle-rawbench: could not remove %s\n", dir);
    if (!failed)
        report(config, &results[0]);
    return failed;
}

static const char usage[] =
    "usage: spindle-rawbench --local 2 [options]\n"
    "       spindle-rawbench --id I --members HOST:PORT,HOST:PORT [options]\n"
    "\n"
    "Raw one-sided write bandwidth (member 0 into member 1) and 8-byte write latency\n"
    "(ping-pong, half the round trip) of one transport: the reference for spindle-bench.\n"
    "  --local 2             fork both members on this host (directory bootstrap)\n"
    "  --id I --members LIST run member I (0 or 1) of two, TCP bootstrap on LIST\n"
    "  --transport shm|fabric|verbs  (default shm)\n"
    "  --provider NAME       libfabric provider for --transport fabric\n"
    "  --msg-size BYTES      bytes per write, 1..1048576 (default 1024)\n"
    "  --window SLOTS        ring slots written in turn (default 100)\n"
    "  --messages N          writes member 0 streams (default 100000)\n"
    "  --help                this text\n"
    "\n"
    "       spindle-rawbench --append DIR [--writers N] [--batch B] [--msg-size BYTES]\n"
    "                        [--messages N] [--direct]\n"
    "\n"
    "Raw append rate of the disk under DIR, the reference for logged delivery: N writer\n"
    "processes (default 3) each append --messages records (default 100000) of the size a\n"
    "logged --msg-size message takes to a file of their own, B records (default 1) per\n"
    "write and fdatasync; the files are removed afterwards. --direct: each batch in 4 KiB\n"
    "blocks with O_DIRECT, its last block padded with zeros (written again with the next\n"
    "batch), into space written with zeros 1 MiB ahead, as the log's writer appends.\n";

static int bad(const char *what, const char *value)
{
    if (value != NULL)
        fprintf(stderr, "spindle-rawbench: %s '%s'\n", what, value);
    else
        fprintf(stderr, "spindle-rawbench: %s\n", what);
    fprintf(stderr, "(see spindle-rawbench --help)\n");
    return 2;
}

/* Parses an unsigned number in [min, max]; -1 when it is not one. */
static int number(const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, struct raw_config *c)
{
    static const struct option options[] = {
        {"local", required_argument, 0, 'l'},    {"id", required_argument, 0, 'i'},
        {"members", required_argument, 0, 'm'},  {"transport", required_argument, 0, 't'},
        {"provider", required_argument, 0, 'p'}, {"msg-size", required_argument, 0, 's'},
        {"window", required_argument, 0, 'w'},   {"messages", required_argument, 0, 'n'},
        {"append", required_argument, 0, 'a'},   {"writers", required_argument, 0, 'W'},
        {"batch", required_argument, 0, 'b'},    {"direct", no_argument, 0, 'D'},
        {"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
    };
    *c = (struct raw_config){
        .transport = "shm", .msg_size = 1024, .window = 100, .messages = 100000, .id = -1};
    c->append.writers = 3;
    c->append.batch = 1;
    snprintf(c->group_name, sizeof c->group_name, "spindle-rawbench");
    int opt;
    uint64_t v = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
        case 'l':
            if (number(optarg, 2, 2, &v) < 0)
                return bad("--local must be 2, not", optarg);
            c->local = true;
            break;
        case 'i':
            if (number(optarg, 0, 1, &v) < 0)
                return bad("--id must be 0 or 1, not", optarg);
            c->id = (int)v;
            break;
        case 'm':
            c->members = optarg;
            break;
        case 't':
            c->transport = optarg;
            break;
        case 'p':
            c->provider = optarg;
            break;
        case 's':
            if (number(optarg, 1, SPINDLE_MAX_PAYLOAD, &v) < 0)
                return bad("--msg-size must be 1..1048576, not", optarg);
            c->msg_size = (uint32_t)v;
            break;
        case 'w':
            if (number(optarg, 1, SPINDLE_MAX_WINDOW, &v) < 0)
                return bad("--window must be 1..100000, not", optarg);
            c->window = (uint32_t)v;
            break;
        case 'n':
            if (number(optarg, 1, 1ull << 32, &v) < 0)
                return bad("--messages must be 1..4294967296, not", optarg);
            c->messages = v;
            break;
        case 'a':
            c->append.dir = optarg;
            break;
        case 'W':
            if (number(optarg, 1, 64, &v) < 0)
                return bad("--writers must be 1..64, not", optarg);
            c->append.writers = (uint32_t)v;
            break;
        case 'D':
            c->append.direct = true;
            break;
        case 'b':
            if (number(optarg, 1, 1000000, &v) < 0)
                return bad("--batch must be 1..1000000, not", optarg);
            c->append.batch = (uint32_t)v;
            break;
        case 'h':
            fputs(usage, stdout);
            exit(0);
        default:
            return bad("unknown or incomplete option", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return bad("unexpected argument", argv[optind]);
    if (c->append.dir != NULL) {
        if (c->local || c->id >= 0 || c->members != NULL)
            return bad("--append measures the disk alone: no --local, --id or --members", NULL);
        c->append.msg_size = c->msg_size;
        c->append.records = c->messages;
        return 0;
    }
    if (c->append.direct)
        return bad("--direct is a way to --append", NULL);
    if (c->local == (c->id >= 0 || c->members != NULL))
        return bad("give --local 2, or --id I with --members LIST", NULL);
    if (!c->local && (c->id < 0 || c->members == NULL))
        return bad("--id and --members go together", NULL);
    return 0;
}

int main(int argc, char **argv)
{
    struct raw_config config;
    int rc = parse_args(argc, argv, &config);
    if (rc != 0)
        return rc;
    if (config.append.dir != NULL)
        return raw_append(&config.append);
    if (config.local)
        return run_local(&config);
    struct raw_result result;
    run_raw(&config, (uint32_t)config.id, &result);
    if (!result.ok) {
        fprintf(stderr, "spindle-rawbench: %s\n", result.error);
        return 1;
    }
    if (result.is_reporter)
        report(&config, &result);
    return 0;
}
