/*
 * spindle-bench --raw: the efficiency reference. Two members of the chosen
 * transport; member 0 streams one-sided writes of msg_size bytes into
 * member 1 (batches of RAW_BATCH writes per doorbell, a ring of window
 * slots) and then measures 8-byte write latency by ping-pong (half the
 * round trip). Uses the internal transport layer directly.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "control/ctl.h"
#include "group/group_bootstrap.h"
#include "transport/transport.h"
#include "util/clock.h"

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
    const struct tp_ops *ops;
    struct tp_endpoint *ep;
    struct tp_mr *mr;
    uint8_t *base;
    struct tp_peer *peer;
    struct tp_rmr *rmr;
    size_t ping_offset; /* 8-byte word written by the other member */
    uint64_t outstanding;
    bool yield; /* give the core away while waiting (fabric) */
};

static int raw_open(const struct bench_config *config, const struct group_bootstrap *boot,
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
    c->ops = tp_backend_find(config->transport);
    c->yield = strcmp(config->transport, "fabric") == 0;
    if (c->ops == NULL)
        return SPINDLE_ENOTSUP;
    int rc = c->ops->open(&tp, &c->ep);
    if (rc == 0)
        rc = c->ops->mr_alloc(c->ep, region, TP_MR_REMOTE_WRITE, (void **)&c->base, &c->mr);
    return rc;
}

static int raw_connect(const struct group_bootstrap *boot, uint32_t self, uint32_t members,
                       struct raw_ctx *c)
{
    struct ctl *ctl;
    struct ctl_versions versions = {1, 1}; /* only spindle-bench --raw processes meet here */
    int rc = group_bootstrap_open(boot, "spindle-bench-raw", self, members, &versions, 60000, &ctl);
    if (rc < 0)
        return rc;
    struct raw_desc mine, all[2];
    memset(&mine, 0, sizeof mine);
    rc = c->ops->address(c->ep, &mine.address);
    if (rc == 0)
        rc = c->ops->mr_export(c->mr, &mine.region);
    if (rc == 0)
        rc = ctl_allgather(ctl, RAW_TAG_DESC, &mine, sizeof mine, all, 60000);
    uint32_t other = 1 - self;
    if (rc == 0)
        rc = c->ops->connect(c->ep, &all[other].address, 60000, &c->peer);
    if (rc == 0)
        rc = c->ops->rmr_import(c->peer, &all[other].region, &c->rmr);
    uint8_t one = 1, both[2];
    if (rc == 0)
        rc = ctl_allgather(ctl, RAW_TAG_DONE, &one, 1, both, 60000);
    ctl_close(ctl);
    return rc;
}

static void raw_reap(struct raw_ctx *c)
{
    struct tp_event events[32];
    int n = c->ops->poll(c->ep, events, 32);
    for (int i = 0; i < n; i++)
        if (events[i].type == TP_EVENT_WRITE_DONE && c->outstanding > 0)
            c->outstanding--;
}

static int raw_post(struct raw_ctx *c, const struct tp_write *writes, unsigned count)
{
    for (;;) {
        int rc = c->ops->post_writes(c->peer, writes, count, TP_POST_SIGNALED, 0);
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
            if (c->ops->peer_state(c->peer) < 0)
                return SPINDLE_EPEERFAILED;
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

static int raw_stream(const struct bench_config *config, struct raw_ctx *c, uint64_t count,
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

void bench_run_raw(const struct bench_config *config, uint32_t self, uint32_t members,
                   struct bench_result *result)
{
    memset(result, 0, sizeof *result);
    result->member = (int)self;
    struct raw_ctx c;
    memset(&c, 0, sizeof c);
    size_t stride = ((size_t)config->msg_size + 63) & ~(size_t)63;
    c.ping_offset = stride * config->window;
    struct spindle_group_options options;
    spindle_group_options_init(&options);
    options.num_members = members;
    options.bootstrap = config->members != NULL ? config->members : config->bootstrap_dir;
    struct group_bootstrap boot;
    int rc = group_bootstrap_parse(&options, &boot);
    if (rc == 0)
        rc = raw_open(config, &boot, self, &c, c.ping_offset + 64);
    if (rc == 0)
        rc = raw_connect(&boot, self, members, &c);
    uint64_t count = config->messages;
    if (rc == 0 && self == 0) {
        uint64_t start = sp_now_ns();
        rc = raw_stream(config, &c, count, stride);
        result->raw_seconds = (double)(sp_now_ns() - start) / 1e9;
        result->raw_writes = count;
        result->is_raw_reporter = 1;
    }
    if (rc == 0)
        rc = raw_pingpong(&c, self, &result->raw_latency_us);
    if (rc < 0)
        snprintf(result->error, sizeof result->error, "raw member %u: %s (%s)", self,
                 spindle_strerror(rc), spindle_errmsg());
    result->ok = rc == 0;
    if (c.ep != NULL) {
        if (c.mr != NULL)
            c.ops->mr_free(c.ep, c.mr);
        c.ops->close(c.ep);
    }
}
