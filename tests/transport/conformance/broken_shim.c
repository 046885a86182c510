/* Deliberately broken transports over shm (broken_shim.h). */
#include "broken_shim.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <spindle/error.h>

struct shim_ep {
    struct tp_endpoint base;
    struct tp_endpoint *inner;
};
struct shim_peer {
    struct tp_peer base;
    struct tp_peer *inner;
};
struct shim_mr {
    struct tp_mr base;
    struct tp_mr *inner;
};
struct shim_rmr {
    struct tp_rmr base;
    struct tp_rmr *inner;
};

static struct tp_ops tears_ops, reorders_ops;

#define INNER_EP(ep)   (((struct shim_ep *)(ep))->inner)
#define INNER_PEER(p)  (((struct shim_peer *)(p))->inner)
#define INNER_MR(mr)   (((struct shim_mr *)(mr))->inner)
#define INNER_RMR(rmr) (((struct shim_rmr *)(rmr))->inner)

/* Widens the window in which a reader sees the damage. */
static void pause_briefly(void)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do
        clock_gettime(CLOCK_MONOTONIC, &now);
    while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < 200);
}

static const struct tp_ops *inner_ops(void)
{
    return tp_backend_find("shm");
}

static int shim_open(const struct tp_config *config, struct tp_endpoint **out,
                     const struct tp_ops *ops)
{
    struct shim_ep *ep = calloc(1, sizeof *ep);
    if (ep == NULL)
        return SPINDLE_ENOMEM;
    struct tp_config inner = *config;
    inner.backend = "shm";
    int rc = tp_open(&inner, &ep->inner);
    if (rc != 0) {
        free(ep);
        return rc;
    }
    ep->base.ops = ops;
    *out = &ep->base;
    return 0;
}

static int tears_open(const struct tp_config *config, struct tp_endpoint **out)
{
    return shim_open(config, out, &tears_ops);
}

static int reorders_open(const struct tp_config *config, struct tp_endpoint **out)
{
    return shim_open(config, out, &reorders_ops);
}

static void shim_close(struct tp_endpoint *ep)
{
    tp_close(INNER_EP(ep));
    free(ep);
}

static int shim_address(struct tp_endpoint *ep, struct tp_desc *out)
{
    return tp_address(INNER_EP(ep), out);
}

static int shim_mr_alloc(struct tp_endpoint *ep, size_t length, unsigned flags, void **addr,
                         struct tp_mr **out)
{
    struct shim_mr *mr = calloc(1, sizeof *mr);
    if (mr == NULL)
        return SPINDLE_ENOMEM;
    int rc = tp_mr_alloc(INNER_EP(ep), length, flags, addr, &mr->inner);
    if (rc != 0) {
        free(mr);
        return rc;
    }
    mr->base.ops = ep->ops;
    *out = &mr->base;
    return 0;
}

static void shim_mr_free(struct tp_endpoint *ep, struct tp_mr *mr)
{
    if (mr == NULL)
        return;
    tp_mr_free(INNER_EP(ep), INNER_MR(mr));
    free(mr);
}

static int shim_mr_export(struct tp_mr *mr, struct tp_desc *out)
{
    return tp_mr_export(INNER_MR(mr), out);
}

static int shim_connect(struct tp_endpoint *ep, const struct tp_desc *peer_addr, int timeout_ms,
                        struct tp_peer **out)
{
    struct shim_peer *peer = calloc(1, sizeof *peer);
    if (peer == NULL)
        return SPINDLE_ENOMEM;
    int rc = tp_connect(INNER_EP(ep), peer_addr, timeout_ms, &peer->inner);
    if (rc != 0) {
        free(peer);
        return rc;
    }
    peer->base.ops = ep->ops;
    *out = &peer->base;
    return 0;
}

static void shim_disconnect(struct tp_endpoint *ep, struct tp_peer *peer)
{
    tp_disconnect(INNER_EP(ep), INNER_PEER(peer));
    free(peer);
}

static int shim_rmr_import(struct tp_peer *peer, const struct tp_desc *desc, struct tp_rmr **out)
{
    struct shim_rmr *rmr = calloc(1, sizeof *rmr);
    if (rmr == NULL)
        return SPINDLE_ENOMEM;
    int rc = tp_rmr_import(INNER_PEER(peer), desc, &rmr->inner);
    if (rc != 0) {
        free(rmr);
        return rc;
    }
    rmr->base.ops = peer->ops;
    *out = &rmr->base;
    return 0;
}

static int shim_rmr_import_slice(struct tp_peer *peer, const struct tp_desc *desc, uint64_t offset,
                                 uint64_t length, struct tp_rmr **out)
{
    struct shim_rmr *rmr = calloc(1, sizeof *rmr);
    if (rmr == NULL)
        return SPINDLE_ENOMEM;
    int rc = tp_rmr_import_slice(INNER_PEER(peer), desc, offset, length, &rmr->inner);
    if (rc != 0) {
        free(rmr);
        return rc;
    }
    rmr->base.ops = peer->ops;
    *out = &rmr->base;
    return 0;
}

static void shim_rmr_release(struct tp_peer *peer, struct tp_rmr *rmr)
{
    if (rmr == NULL)
        return;
    tp_rmr_release(INNER_PEER(peer), INNER_RMR(rmr));
    free(rmr);
}

/* Posts one inner write (the last one of a batch carries its signal). */
static int post_one(struct tp_peer *peer, const struct tp_write *w, const void *local,
                    uint64_t offset, uint32_t length, unsigned flags, uint64_t cookie)
{
    struct tp_write inner = {local, INNER_MR(w->local_mr), INNER_RMR(w->remote), offset, length};
    return tp_post_writes(INNER_PEER(peer), &inner, 1, flags, cookie);
}

static int tears_post(struct tp_peer *peer, const struct tp_write *writes, unsigned count,
                      unsigned flags, uint64_t cookie)
{
    for (unsigned i = 0; i < count; i++) {
        const struct tp_write *w = &writes[i];
        const uint8_t *src = w->local;
        for (uint32_t at = 0; at < w->length; at += 8) {
            uint32_t word = w->length - at < 8 ? w->length - at : 8;
            bool last = i + 1 == count && at + word == w->length;
            unsigned f = last ? flags : 0;
            int rc;
            if (word == 8) { /* high half first, then the low one */
                rc = post_one(peer, w, src + at + 4, w->remote_offset + at + 4, 4, 0, 0);
                pause_briefly();
                if (rc == 0)
                    rc = post_one(peer, w, src + at, w->remote_offset + at, 4, f, cookie);
            } else {
                rc = post_one(peer, w, src + at, w->remote_offset + at, word, f, cookie);
            }
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

static int reorders_post(struct tp_peer *peer, const struct tp_write *writes, unsigned count,
                         unsigned flags, uint64_t cookie)
{
    for (unsigned k = count; k-- > 0;) {
        const struct tp_write *w = &writes[k];
        int rc =
            post_one(peer, w, w->local, w->remote_offset, w->length, k == 0 ? flags : 0, cookie);
        if (rc != 0)
            return rc;
        pause_briefly();
    }
    return 0;
}

static int shim_poll(struct tp_endpoint *ep, struct tp_event *events, int max)
{
    /* Events name inner peers; the suites under test never compare them
     * for the broken shims. */
    return tp_poll(INNER_EP(ep), events, max);
}

static int shim_peer_state(struct tp_peer *peer)
{
    return tp_peer_state(INNER_PEER(peer));
}

static int shim_doorbell_ring(struct tp_peer *peer)
{
    return tp_doorbell_ring(INNER_PEER(peer));
}

static void shim_doorbell_ring_self(struct tp_endpoint *ep)
{
    tp_doorbell_ring_self(INNER_EP(ep));
}

static uint64_t shim_doorbell_arm(struct tp_endpoint *ep)
{
    return tp_doorbell_arm(INNER_EP(ep));
}

static int shim_doorbell_wait(struct tp_endpoint *ep, uint64_t token, int timeout_ms)
{
    return tp_doorbell_wait(INNER_EP(ep), token, timeout_ms);
}

static void shim_stats(struct tp_endpoint *ep, struct tp_stats *out)
{
    tp_stats(INNER_EP(ep), out);
}

static void fill(struct tp_ops *ops, const char *name,
                 int (*open)(const struct tp_config *, struct tp_endpoint **),
                 int (*post)(struct tp_peer *, const struct tp_write *, unsigned, unsigned,
                             uint64_t))
{
    *ops = (struct tp_ops){
        .name = name,
        .attr = inner_ops()->attr,
        .open = open,
        .close = shim_close,
        .address = shim_address,
        .mr_alloc = shim_mr_alloc,
        .mr_free = shim_mr_free,
        .mr_export = shim_mr_export,
        .connect = shim_connect,
        .disconnect = shim_disconnect,
        .rmr_import = shim_rmr_import,
        .rmr_import_slice = shim_rmr_import_slice,
        .rmr_release = shim_rmr_release,
        .post_writes = post,
        .poll = shim_poll,
        .peer_state = shim_peer_state,
        .doorbell_ring = shim_doorbell_ring,
        .doorbell_ring_self = shim_doorbell_ring_self,
        .doorbell_arm = shim_doorbell_arm,
        .doorbell_wait = shim_doorbell_wait,
        .stats = shim_stats,
    };
}

const struct tp_ops *broken_shim(enum broken_kind kind)
{
    if (kind == BROKEN_TEARS) {
        fill(&tears_ops, "shm-tearing", tears_open, tears_post);
        return &tears_ops;
    }
    fill(&reorders_ops, "shm-reordering", reorders_open, reorders_post);
    return &reorders_ops;
}
