/*
 * cpgbench: throughput and delivery latency of Corosync CPG, for the side
 * by side comparison in scripts/compare-peers.sh (not part of the library's
 * build: the script compiles it with cc against libcpg).
 *
 *   cpgbench --local N [--size BYTES] [--window W | --rate MSGS_PER_S]
 *            [--duration S] [--warmup S] [--latency-out DIR]
 *   cpgbench --members N --id I --group NAME [the same workload flags]
 *
 * Forks N processes (or, with --members, is process I of a group of N
 * spread over hosts, each started on its own); each joins one CPG group
 * (named for the launcher's pid, or NAME), waits until the group has N
 * members, then sends with
 * cpg_mcast_joined(CPG_TYPE_AGREED) for the warm-up plus the duration:
 * either as fast as it can with at most W of its own messages sent and not
 * yet delivered back to it (the window), or paced at a fixed rate. The
 * payload carries the sender, its sequence number and the send time
 * (CLOCK_MONOTONIC; only the sender's own messages are timed, so the
 * clocks of different hosts never meet). Each process counts what it
 * delivered between the end of the warm-up and the end, checks that every
 * sender's messages arrive in sequence, and samples the latency of its own
 * messages (send to delivery back to it, as spindle-bench does). The
 * launcher prints one JSON line: msgs_per_s and mb_per_s per member (mean
 * over members), p50 (median of the members') and p99 (largest) latency.
 * Exit status 0, 1 when a process failed, 2 on a bad command line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <corosync/cpg.h>

#define MAX_PROCS    16
#define MAX_SAMPLES  (1u << 20)
#define HEADER_MAGIC 0x43504742u /* "CPGB" */

struct header {
    uint32_t magic;
    uint32_t sender; /* process index 0..N-1 */
    uint64_t seq;
    uint64_t sent_ns;
};

struct options {
    unsigned procs; /* processes in the group */
    int id;         /* --members: this process' index; -1: --local forks them all */
    const char *group;
    const char *latency_out; /* --latency-out DIR: DIR/member-<i>.latency */
    unsigned size, window, rate;
    double duration_s, warmup_s;
};

struct result {
    int ok;
    char error[160];
    uint64_t delivered; /* in the measured interval */
    double seconds;
    double p50_us, p99_us;
    uint64_t samples;
    uint64_t out_of_order;
};

struct proc {
    const struct options *opt;
    unsigned self;
    uint64_t members;             /* current group size */
    uint64_t delivered;           /* every delivery */
    uint64_t own_delivered;       /* own messages delivered back */
    uint64_t next_seq[MAX_PROCS]; /* expected next seq per sender */
    uint64_t out_of_order;
    uint64_t sample_from_ns, sample_to_ns;
    uint32_t *samples;
    uint64_t sample_count, seen, random;
};

static struct proc *the_proc; /* the callbacks' context (one per process) */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void keep_sample(struct proc *p, uint64_t ns)
{
    uint32_t v = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
    p->seen++;
    if (p->sample_count < MAX_SAMPLES) {
        p->samples[p->sample_count++] = v;
        return;
    }
    p->random ^= p->random << 13; /* a uniform reservoir past the capacity */
    p->random ^= p->random >> 7;
    p->random ^= p->random << 17;
    uint64_t at = p->random % p->seen;
    if (at < MAX_SAMPLES)
        p->samples[at] = v;
}

static void on_deliver(cpg_handle_t handle, const struct cpg_name *group, uint32_t nodeid,
                       uint32_t pid, void *msg, size_t len)
{
    struct proc *p = the_proc;
    struct header h;
    (void)handle, (void)group, (void)nodeid, (void)pid;
    if (len < sizeof h)
        return;
    memcpy(&h, msg, sizeof h);
    if (h.magic != HEADER_MAGIC || h.sender >= MAX_PROCS)
        return;
    uint64_t now = now_ns();
    p->delivered++;
    if (h.seq != p->next_seq[h.sender])
        p->out_of_order++;
    p->next_seq[h.sender] = h.seq + 1;
    if (h.sender == p->self) {
        p->own_delivered++;
        if (h.sent_ns >= p->sample_from_ns && h.sent_ns < p->sample_to_ns)
            keep_sample(p, now - h.sent_ns);
    }
}

static void on_confchg(cpg_handle_t handle, const struct cpg_name *group,
                       const struct cpg_address *members, size_t num_members,
                       const struct cpg_address *left, size_t num_left,
                       const struct cpg_address *joined, size_t num_joined)
{
    (void)handle, (void)group, (void)members, (void)left, (void)num_left, (void)joined,
        (void)num_joined;
    the_proc->members = num_members;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Dispatches what is pending, waiting up to timeout_ms for it. */
static cs_error_t pump(cpg_handle_t handle, int fd, int timeout_ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, timeout_ms) < 0 && errno != EINTR)
        return CS_ERR_LIBRARY;
    return cpg_dispatch(handle, CS_DISPATCH_ALL);
}

static int failed(struct result *r, const char *what, cs_error_t err)
{
    snprintf(r->error, sizeof r->error, "%s failed: corosync error %d", what, (int)err);
    return -1;
}

/* Sends message seq; CS_ERR_TRY_AGAIN when the IPC queue is full. */
static cs_error_t send_one(cpg_handle_t handle, struct proc *p, uint8_t *buf, uint64_t seq)
{
    struct header h = {HEADER_MAGIC, p->self, seq, now_ns()};
    memcpy(buf, &h, sizeof h);
    struct iovec iov = {buf, p->opt->size};
    return cpg_mcast_joined(handle, CPG_TYPE_AGREED, &iov, 1);
}

static int run_stream(cpg_handle_t handle, int fd, struct proc *p, struct result *r)
{
    const struct options *opt = p->opt;
    uint8_t *buf = calloc(1, opt->size);
    if (buf == NULL)
        return failed(r, "calloc", CS_ERR_NO_MEMORY);
    uint64_t start = now_ns(), measure = start + (uint64_t)(opt->warmup_s * 1e9),
             end = measure + (uint64_t)(opt->duration_s * 1e9);
    p->sample_from_ns = measure;
    p->sample_to_ns = end;
    uint64_t seq = 0, from = 0, from_ns = 0;
    int measuring = 0;
    cs_error_t err = CS_OK;
    for (uint64_t now = start; now < end; now = now_ns()) {
        if (!measuring && now >= measure) {
            measuring = 1;
            from = p->delivered;
            from_ns = now;
        }
        int may_send = opt->rate > 0 ? now >= start + seq * 1000000000ull / opt->rate
                                     : seq - p->own_delivered < opt->window;
        if (may_send) {
            err = send_one(handle, p, buf, seq);
            if (err == CS_OK) {
                seq++;
                err = cpg_dispatch(handle, CS_DISPATCH_ALL);
                continue;
            }
            if (err != CS_ERR_TRY_AGAIN)
                break;
        }
        int wait_ms = 1;
        if (opt->rate > 0 && !may_send) {
            uint64_t due = start + seq * 1000000000ull / opt->rate;
            wait_ms = due > now ? (int)((due - now) / 1000000) : 0;
        }
        err = pump(handle, fd, wait_ms);
        if (err != CS_OK && err != CS_ERR_TRY_AGAIN)
            break;
    }
    r->delivered = p->delivered - from;
    r->seconds = (double)(now_ns() - from_ns) / 1e9;
    /* Drain: own messages in flight come back (bounded). */
    uint64_t drain_end = now_ns() + 10000000000ull;
    while (err == CS_OK && p->own_delivered < seq && now_ns() < drain_end)
        err = pump(handle, fd, 10);
    free(buf);
    if (err != CS_OK && err != CS_ERR_TRY_AGAIN)
        return failed(r, "sending", err);
    if (p->own_delivered < seq) {
        snprintf(r->error, sizeof r->error, "%llu of %llu own messages came back",
                 (unsigned long long)p->own_delivered, (unsigned long long)seq);
        return -1;
    }
    return 0;
}

/* --latency-out DIR: DIR/member-<self>.latency, the sorted samples in
 * nanoseconds, one a line (spindle-bench --latency-out writes the same). */
static int write_samples(const char *dir, unsigned self, const struct proc *p, struct result *r)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/member-%u.latency", dir, self);
    FILE *file = fopen(path, "w");
    int ok = file != NULL;
    for (uint64_t i = 0; ok && i < p->sample_count; i++)
        ok = fprintf(file, "%u\n", p->samples[i]) > 0;
    if (file != NULL && fclose(file) != 0)
        ok = 0;
    if (!ok)
        snprintf(r->error, sizeof r->error, "--latency-out: cannot write %.100s: %s", path,
                 strerror(errno));
    return ok ? 0 : -1;
}

static void run_proc(const struct options *opt, unsigned self, const char *group_name,
                     struct result *r)
{
    struct proc p = {.opt = opt, .self = self, .random = 0x9E3779B97F4A7C15ull};
    the_proc = &p;
    p.samples = calloc(MAX_SAMPLES, sizeof *p.samples);
    cpg_callbacks_t callbacks = {.cpg_deliver_fn = on_deliver, .cpg_confchg_fn = on_confchg};
    cpg_handle_t handle;
    struct cpg_name group;
    group.length = (uint32_t)snprintf(group.value, sizeof group.value, "%s", group_name);
    cs_error_t err = cpg_initialize(&handle, &callbacks);
    if (p.samples == NULL || err != CS_OK) {
        failed(r, "cpg_initialize (is corosync running?)", err);
        return;
    }
    int fd = -1;
    err = cpg_fd_get(handle, &fd);
    if (err == CS_OK)
        err = cpg_join(handle, &group);
    if (err != CS_OK) {
        failed(r, "cpg_join", err);
        cpg_finalize(handle);
        return;
    }
    uint64_t deadline = now_ns() + 30000000000ull;
    while (err == CS_OK && p.members < opt->procs && now_ns() < deadline)
        err = pump(handle, fd, 10);
    if (p.members < opt->procs)
        snprintf(r->error, sizeof r->error, "the group has %llu of %u members after 30 s",
                 (unsigned long long)p.members, opt->procs);
    else if (run_stream(handle, fd, &p, r) == 0)
        r->ok = 1;
    r->out_of_order = p.out_of_order;
    if (p.sample_count > 0) {
        qsort(p.samples, p.sample_count, sizeof *p.samples, cmp_u32);
        r->p50_us = p.samples[p.sample_count / 2] / 1000.0;
        r->p99_us = p.samples[p.sample_count * 99 / 100] / 1000.0;
        r->samples = p.sample_count;
    }
    if (r->ok && opt->latency_out != NULL && write_samples(opt->latency_out, self, &p, r) < 0)
        r->ok = 0;
    cpg_leave(handle, &group);
    cpg_finalize(handle);
    free(p.samples);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The JSON line of results[0..count): count is procs, or 1 (--members). */
static void report(const struct options *opt, const struct result *results, unsigned count)
{
    double rate_sum = 0, p50s[MAX_PROCS], p99 = 0;
    uint64_t delivered = 0, out_of_order = 0;
    for (unsigned i = 0; i < count; i++) {
        rate_sum += results[i].seconds > 0 ? results[i].delivered / results[i].seconds : 0;
        delivered += results[i].delivered;
        out_of_order += results[i].out_of_order;
        p50s[i] = results[i].p50_us;
        if (results[i].p99_us > p99)
            p99 = results[i].p99_us;
    }
    qsort(p50s, count, sizeof p50s[0], cmp_double);
    double msgs_per_s = rate_sum / count;
    printf("{\"system\":\"corosync-cpg\",\"guarantee\":\"agreed\",\"members\":%u,\"senders\":%u,"
           "\"msg_size\":%u,\"window\":%u,\"rate\":%u,\"duration_s\":%.3f,\"warmup_s\":%.3f,"
           "\"messages_delivered\":%llu,\"msgs_per_s\":%.1f,\"mb_per_s\":%.3f,"
           "\"p50_latency_us\":%.2f,\"p99_latency_us\":%.2f,\"out_of_order\":%llu}\n",
           opt->procs, opt->procs, opt->size, opt->rate > 0 ? 0 : opt->window, opt->rate,
           opt->duration_s, opt->warmup_s, (unsigned long long)delivered, msgs_per_s,
           msgs_per_s * opt->size / 1e6, p50s[count / 2], p99, (unsigned long long)out_of_order);
}

static int usage(const char *what)
{
    fprintf(stderr,
            "cpgbench: %s\nusage: cpgbench --local N | --members N --id I --group NAME\n"
            "                [--size BYTES] [--window W | --rate MSGS_PER_S] [--duration S] "
            "[--warmup S] [--latency-out DIR]\n",
            what);
    return 2;
}

static int parse(int argc, char **argv, struct options *opt)
{
    *opt = (struct options){
        .procs = 0, .id = -1, .size = 1024, .window = 100, .duration_s = 10, .warmup_s = 1};
    unsigned local = 0;
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (value == NULL)
            return usage("every flag takes a value");
        if (strcmp(flag, "--latency-out") == 0) {
            opt->latency_out = value;
            i++;
            continue;
        }
        if (strcmp(flag, "--group") == 0) {
            if (strlen(value) == 0 || strlen(value) >= CPG_MAX_NAME_LENGTH)
                return usage("--group takes a name of 1 to 127 characters");
            opt->group = value;
            i++;
            continue;
        }
        double v = strtod(value, &end);
        if (end == value || *end != '\0' || v < 0)
            return usage("values are non-negative numbers");
        if ((strcmp(flag, "--local") == 0 || strcmp(flag, "--members") == 0) && v >= 1 &&
            v <= MAX_PROCS) {
            opt->procs = (unsigned)v;
            local += strcmp(flag, "--local") == 0;
        } else if (strcmp(flag, "--id") == 0 && v < MAX_PROCS)
            opt->id = (int)v;
        else if (strcmp(flag, "--size") == 0 && v >= sizeof(struct header) && v <= 1048576)
            opt->size = (unsigned)v;
        else if (strcmp(flag, "--window") == 0 && v >= 1)
            opt->window = (unsigned)v;
        else if (strcmp(flag, "--rate") == 0 && v >= 1)
            opt->rate = (unsigned)v;
        else if (strcmp(flag, "--duration") == 0 && v > 0)
            opt->duration_s = v;
        else if (strcmp(flag, "--warmup") == 0)
            opt->warmup_s = v;
        else {
            fprintf(stderr, "cpgbench: %s %s: unknown flag or value out of range\n", flag, value);
            return 2;
        }
        i++;
    }
    if (opt->procs == 0)
        return usage("give --local N or --members N (1..16)");
    if (local && (opt->id >= 0 || opt->group != NULL))
        return usage("--local forks every process: --id and --group go with --members");
    if (!local && (opt->id < 0 || (unsigned)opt->id >= opt->procs || opt->group == NULL))
        return usage("--members N needs --id I (0..N-1) and --group NAME");
    return 0;
}

int main(int argc, char **argv)
{
    struct options opt;
    if (parse(argc, argv, &opt) != 0)
        return 2;
    if (opt.id >= 0) {
        struct result r = {0};
        run_proc(&opt, (unsigned)opt.id, opt.group, &r);
        if (!r.ok) {
            fprintf(stderr, "cpgbench: process %d: %s\n", opt.id, r.error);
            return 1;
        }
        report(&opt, &r, 1);
        return 0;
    }
    char group[64];
    snprintf(group, sizeof group, "cpgbench-%d", (int)getpid());
    pid_t pids[MAX_PROCS];
    int pipes[MAX_PROCS][2];
    fflush(NULL);
    for (unsigned i = 0; i < opt.procs; i++) {
        if (pipe(pipes[i]) < 0 || (pids[i] = fork()) < 0) {
            perror("cpgbench: fork");
            return 1;
        }
        if (pids[i] == 0) {
            struct result r = {0};
            run_proc(&opt, i, group, &r);
            ssize_t w = write(pipes[i][1], &r, sizeof r);
            _exit(w == (ssize_t)sizeof r && r.ok ? 0 : 1);
        }
        close(pipes[i][1]);
    }
    struct result results[MAX_PROCS];
    int bad = 0;
    for (unsigned i = 0; i < opt.procs; i++) {
        int status;
        if (read(pipes[i][0], &results[i], sizeof results[i]) != (ssize_t)sizeof results[i]) {
            fprintf(stderr, "cpgbench: process %u reported nothing\n", i);
            bad = 1;
        } else if (!results[i].ok) {
            fprintf(stderr, "cpgbench: process %u: %s\n", i, results[i].error);
            bad = 1;
        }
        waitpid(pids[i], &status, 0);
    }
    if (!bad)
        report(&opt, results, opt.procs);
    return bad;
}
