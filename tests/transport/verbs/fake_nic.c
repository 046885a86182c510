/* A fake RDMA device that really moves bytes (fake_nic.h). */
#include "transport/verbs/fake_nic.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include "transport/verbs/verbs_impl.h"

#define FAKE_BASE_PORT 41000
#define FAKE_MAX_PIECE 256 /* bytes of the largest piece a write is cut into */

struct fake_ctx {
    struct ibv_context base;
    int index;
    bool dead;
    struct fake_ctx *next;
};

/* A completion channel: a pipe whose read end is the channel's fd, and the
 * CQs whose events are pending, in order. */
struct fake_comp_channel {
    struct ibv_comp_channel base;
    int wfd;
    struct fake_cq *events[256];
    unsigned head, count;
    struct fake_comp_channel *next;
};

struct fake_cq {
    struct ibv_cq base;
    struct ibv_wc *wcs;
    unsigned head, count, cap;
    bool armed;
    struct fake_comp_channel *channel;
    struct fake_cq *next;
};

/* A send work request as the NIC will execute it. */
struct fake_swr {
    uint64_t wr_id;
    enum ibv_wr_opcode opcode;
    unsigned flags;
    uint64_t local_addr;
    uint32_t length;
    uint32_t lkey;
    uint64_t remote_addr;
    uint32_t rkey;
    uint32_t imm;
    uint8_t *inlined; /* inline payload copied at post time, or NULL */
};

struct fake_qp {
    struct ibv_qp base;
    struct fake_ctx *ctx;
    struct fake_cq *scq, *rcq;
    struct fake_qp *remote; /* the connected queue pair */
    bool destroyed;
    bool error; /* in the error state: every request is flushed */
    struct fake_swr *sq;
    unsigned sq_head, sq_count, sq_cap;
    uint64_t *rq; /* receive wr_ids */
    unsigned rq_head, rq_count, rq_cap;
    struct fake_qp *next;
};

struct fake_mr {
    struct ibv_mr base;
    bool removed;
    struct fake_mr *next;
};

struct fake_event_channel {
    struct rdma_event_channel base;
    int wfd;
    struct rdma_cm_event *events[64];
    unsigned head, count;
    struct fake_event_channel *next;
};

struct fake_id {
    struct rdma_cm_id base;
    uint16_t port; /* bound (listener) or resolved (active) port */
    bool listening;
    struct fake_id *active; /* passive side: the connecting id */
    uint32_t active_qpn;    /* passive side: the connecting QP */
    struct fake_id *next;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work;
    pthread_t thread;
    bool running, stop;
    struct ibv_device device;
    struct ibv_device *device_list[2];
    struct ibv_pd pds[64];
    unsigned num_pds;
    struct fake_ctx *ctxs, *last_ctx;
    int num_ctxs;
    struct fake_cq *cqs;
    struct fake_comp_channel *channels;
    struct fake_qp *qps;
    struct fake_mr *mrs;
    struct fake_event_channel *event_channels;
    struct fake_id *ids;
    uint32_t next_qpn, next_key;
    uint16_t next_port;
    uint64_t rng;
} nic = {.lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER};

/* ---- helpers (lock held) ------------------------------------------------ */

static uint32_t nic_random(void)
{
    nic.rng ^= nic.rng << 13;
    nic.rng ^= nic.rng >> 7;
    nic.rng ^= nic.rng << 17;
    return (uint32_t)nic.rng;
}

/* Appends wc to cq and wakes its channel when armed. */
static void cq_push(struct fake_cq *cq, const struct ibv_wc *wc)
{
    if (cq == NULL)
        return;
    if (cq->count == cq->cap) {
        unsigned cap = cq->cap ? cq->cap * 2 : 1024;
        struct ibv_wc *grown = malloc(cap * sizeof *grown);
        if (grown == NULL)
            abort(); /* a test fixture out of memory */
        for (unsigned i = 0; i < cq->count; i++)
            grown[i] = cq->wcs[(cq->head + i) % cq->cap];
        free(cq->wcs);
        cq->wcs = grown;
        cq->head = 0;
        cq->cap = cap;
    }
    cq->wcs[(cq->head + cq->count) % cq->cap] = *wc;
    cq->count++;
    struct fake_comp_channel *ch = cq->channel;
    if (cq->armed && ch != NULL && ch->count < 256) {
        cq->armed = false;
        ch->events[(ch->head + ch->count) % 256] = cq;
        ch->count++;
        char byte = 1;
        ssize_t n = write(ch->wfd, &byte, 1);
        (void)n;
    }
}

static void complete(struct fake_qp *qp, const struct fake_swr *wr, enum ibv_wc_status status)
{
    struct ibv_wc wc = {.wr_id = wr->wr_id,
                        .status = status,
                        .opcode = IBV_WC_RDMA_WRITE,
                        .qp_num = qp->base.qp_num};
    cq_push(qp->scq, &wc);
}

/* The registration of key (an rkey, or an lkey when local) covering
 * [addr, addr + length), or NULL. */
static struct fake_mr *mr_lookup(uint32_t key, bool local, uint64_t addr, uint32_t length)
{
    for (struct fake_mr *mr = nic.mrs; mr != NULL; mr = mr->next) {
        if (mr->removed || (local ? mr->base.lkey : mr->base.rkey) != key)
            continue;
        uint64_t start = (uintptr_t)mr->base.addr;
        if (addr < start || addr + length > start + mr->base.length || addr + length < addr)
            return NULL;
        return mr;
    }
    return NULL;
}

/* Copies one piece: whole aligned 8-byte words, bytes at the edges. */
static void copy_piece(uint8_t *dst, const uint8_t *src, size_t length)
{
    while (length > 0 && ((uintptr_t)dst & 7) != 0) {
        __atomic_store_n(dst++, *src++, __ATOMIC_RELEASE);
        length--;
    }
    while (length >= 8) {
        uint64_t word;
        if (((uintptr_t)src & 7) == 0)
            word = __atomic_load_n((const uint64_t *)(const void *)src, __ATOMIC_ACQUIRE);
        else
            memcpy(&word, src, 8);
        __atomic_store_n((uint64_t *)(void *)dst, word, __ATOMIC_RELEASE);
        dst += 8;
        src += 8;
        length -= 8;
    }
    while (length > 0) {
        __atomic_store_n(dst++, *src++, __ATOMIC_RELEASE);
        length--;
    }
}

/* Copies a write's payload in pieces cut at 8-byte boundaries of the
 * target, the pieces in an order of the NIC's choosing (forwards,
 * backwards or from the middle out). */
static void dma_write(uint8_t *dst, const uint8_t *src, uint32_t length)
{
    size_t cuts[64];
    unsigned pieces = 0;
    size_t at = 0;
    while (at < length && pieces < 63) {
        cuts[pieces++] = at;
        size_t piece = 8 * (1 + nic_random() % (FAKE_MAX_PIECE / 8));
        size_t to_boundary = 8 - ((uintptr_t)(dst + at) & 7);
        at += to_boundary < 8 ? to_boundary : piece;
    }
    cuts[pieces] = length;
    unsigned order = nic_random() % 3, start = pieces / 2;
    for (unsigned k = 0; k < pieces; k++) {
        unsigned i = order == 0 ? k : order == 1 ? pieces - 1 - k : (start + k) % pieces;
        size_t from = cuts[i], to = i + 1 < pieces ? cuts[i + 1] : length;
        if (to > length)
            to = length;
        if (from < to)
            copy_piece(dst + from, src + from, to - from);
    }
}

/* Moves qp to the error state: the failed request completes with status,
 * everything queued behind it is flushed. */
static void qp_fail(struct fake_qp *qp, const struct fake_swr *failed, enum ibv_wc_status status)
{
    qp->error = true;
    qp->base.state = IBV_QPS_ERR;
    complete(qp, failed, status);
    free(failed->inlined);
    while (qp->sq_count > 0) {
        struct fake_swr *wr = &qp->sq[qp->sq_head];
        complete(qp, wr, IBV_WC_WR_FLUSH_ERR);
        free(wr->inlined);
        qp->sq_head = (qp->sq_head + 1) % qp->sq_cap;
        qp->sq_count--;
    }
}

/* Executes the first request of qp. Returns false when it must wait (the
 * receiver has no receive posted). */
static bool execute(struct fake_qp *qp)
{
    struct fake_swr wr = qp->sq[qp->sq_head];
    struct fake_qp *target = qp->remote;
    bool reachable = target != NULL && !target->destroyed && !target->ctx->dead && !target->error;
    bool with_imm = wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
    if (reachable && with_imm && target->rq_count == 0)
        return false; /* receiver not ready: retry later, as RNR retries do */
    qp->sq_head = (qp->sq_head + 1) % qp->sq_cap;
    qp->sq_count--;
    if (!reachable) {
        qp_fail(qp, &wr, IBV_WC_RETRY_EXC_ERR);
        return true;
    }
    if (wr.length > 0) {
        if (wr.inlined == NULL && mr_lookup(wr.lkey, true, wr.local_addr, wr.length) == NULL) {
            qp_fail(qp, &wr, IBV_WC_LOC_PROT_ERR); /* the source is no longer registered */
            return true;
        }
        if (mr_lookup(wr.rkey, false, wr.remote_addr, wr.length) == NULL) {
            qp_fail(qp, &wr, IBV_WC_REM_ACCESS_ERR);
            return true;
        }
        const uint8_t *src =
            wr.inlined != NULL ? wr.inlined : (const uint8_t *)(uintptr_t)wr.local_addr;
        dma_write((uint8_t *)(uintptr_t)wr.remote_addr, src, wr.length);
    }
    if (with_imm) {
        uint64_t recv_id = target->rq[target->rq_head];
        target->rq_head = (target->rq_head + 1) % target->rq_cap;
        target->rq_count--;
        struct ibv_wc wc = {.wr_id = recv_id,
                            .status = IBV_WC_SUCCESS,
                            .opcode = IBV_WC_RECV_RDMA_WITH_IMM,
                            .wc_flags = IBV_WC_WITH_IMM,
                            .imm_data = wr.imm,
                            .qp_num = target->base.qp_num};
        cq_push(target->rcq, &wc);
    }
    if (wr.flags & IBV_SEND_SIGNALED)
        complete(qp, &wr, IBV_WC_SUCCESS);
    free(wr.inlined);
    return true;
}

static void *nic_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&nic.lock);
    while (!nic.stop) {
        bool progress = false;
        for (struct fake_qp *qp = nic.qps; qp != NULL; qp = qp->next) {
            /* A few requests per queue pair per round: the queue pairs of
             * different peers interleave, as on a NIC. */
            for (int n = 0; n < 8 && qp->sq_count > 0 && !qp->ctx->dead && !qp->error; n++) {
                if (!execute(qp))
                    break;
                progress = true;
            }
        }
        if (!progress) {
            /* Requests waiting for a receive are looked at again soon. */
            struct timespec wake;
            clock_gettime(CLOCK_REALTIME, &wake);
            wake.tv_nsec += 1000000;
            if (wake.tv_nsec >= 1000000000) {
                wake.tv_sec++;
                wake.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&nic.work, &nic.lock, &wake);
        }
    }
    pthread_mutex_unlock(&nic.lock);
    return NULL;
}

/* ---- data path (context ops) -------------------------------------------- */

static int fake_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    struct fake_qp *qp = (struct fake_qp *)ibqp;
    pthread_mutex_lock(&nic.lock);
    int rc = 0;
    for (; wr != NULL; wr = wr->next) {
        if (qp->destroyed || wr->num_sge > 1 ||
            (qp->base.state != IBV_QPS_RTS && qp->base.state != IBV_QPS_ERR)) {
            rc = EINVAL;
            break;
        }
        if (qp->error) { /* accepted, and flushed at once */
            struct fake_swr flushed = {.wr_id = wr->wr_id};
            complete(qp, &flushed, IBV_WC_WR_FLUSH_ERR);
            continue;
        }
        if (qp->sq_count == qp->sq_cap) {
            rc = ENOMEM;
            break;
        }
        struct fake_swr *s = &qp->sq[(qp->sq_head + qp->sq_count) % qp->sq_cap];
        *s = (struct fake_swr){.wr_id = wr->wr_id,
                               .opcode = wr->opcode,
                               .flags = wr->send_flags,
                               .remote_addr = wr->wr.rdma.remote_addr,
                               .rkey = wr->wr.rdma.rkey,
                               .imm = wr->imm_data};
        if (wr->num_sge == 1) {
            s->local_addr = wr->sg_list->addr;
            s->length = wr->sg_list->length;
            s->lkey = wr->sg_list->lkey;
        }
        if ((wr->send_flags & IBV_SEND_INLINE) && s->length > 0) {
            /* Inline data is copied at post time, as the driver does. */
            s->inlined = malloc(s->length);
            if (s->inlined == NULL) {
                rc = ENOMEM;
                break;
            }
            memcpy(s->inlined, (const void *)(uintptr_t)s->local_addr, s->length);
        }
        qp->sq_count++;
    }
    if (rc != 0 && bad != NULL)
        *bad = wr;
    pthread_cond_signal(&nic.work);
    pthread_mutex_unlock(&nic.lock);
    return rc;
}

static int fake_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    struct fake_qp *qp = (struct fake_qp *)ibqp;
    pthread_mutex_lock(&nic.lock);
    int rc = 0;
    for (; wr != NULL; wr = wr->next) {
        if (qp->rq_count == qp->rq_cap) {
            rc = ENOMEM;
            break;
        }
        qp->rq[(qp->rq_head + qp->rq_count) % qp->rq_cap] = wr->wr_id;
        qp->rq_count++;
    }
    if (rc != 0 && bad != NULL)
        *bad = wr;
    pthread_cond_signal(&nic.work);
    pthread_mutex_unlock(&nic.lock);
    return rc;
}

static int fake_poll_cq(struct ibv_cq *ibcq, int num, struct ibv_wc *wc)
{
    struct fake_cq *cq = (struct fake_cq *)ibcq;
    pthread_mutex_lock(&nic.lock);
    int n = 0;
    while (n < num && cq->count > 0) {
        wc[n++] = cq->wcs[cq->head];
        cq->head = (cq->head + 1) % cq->cap;
        cq->count--;
    }
    pthread_mutex_unlock(&nic.lock);
    return n;
}

static int fake_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
    (void)solicited_only;
    pthread_mutex_lock(&nic.lock);
    ((struct fake_cq *)ibcq)->armed = true;
    pthread_mutex_unlock(&nic.lock);
    return 0;
}

/* ---- control path: device, PD, CQs, memory, QPs ------------------------- */

static struct ibv_device **fake_get_device_list(int *num)
{
    *num = 1;
    return nic.device_list;
}

static void fake_free_device_list(struct ibv_device **list)
{
    (void)list;
}

static struct ibv_context *fake_open_device(struct ibv_device *device)
{
    struct fake_ctx *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return NULL;
    ctx->base.device = device;
    ctx->base.ops.post_send = fake_post_send;
    ctx->base.ops.post_recv = fake_post_recv;
    ctx->base.ops.poll_cq = fake_poll_cq;
    ctx->base.ops.req_notify_cq = fake_req_notify_cq;
    pthread_mutex_lock(&nic.lock);
    ctx->index = nic.num_ctxs++;
    ctx->next = nic.ctxs;
    nic.ctxs = ctx;
    nic.last_ctx = ctx;
    pthread_mutex_unlock(&nic.lock);
    return &ctx->base;
}

static int fake_close_device(struct ibv_context *context)
{
    (void)context; /* kept until uninstall: ids may still point at it */
    return 0;
}

static int fake_query_device_ex(struct ibv_context *context, struct ibv_device_attr_ex *attr)
{
    (void)context;
    memset(attr, 0, sizeof *attr);
    attr->orig_attr.phys_port_cnt = 1;
    return 0;
}

static int fake_query_port(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr)
{
    (void)context;
    (void)port;
    memset(attr, 0, sizeof *attr);
    attr->state = IBV_PORT_ACTIVE;
    attr->lid = 1;
    attr->active_mtu = IBV_MTU_4096;
    return 0;
}

static int fake_query_gid(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid)
{
    (void)context;
    (void)port;
    (void)index;
    memset(gid, 0, sizeof *gid);
    return 0;
}

static struct ibv_pd *fake_alloc_pd(struct ibv_context *context)
{
    pthread_mutex_lock(&nic.lock);
    struct ibv_pd *pd = nic.num_pds < 64 ? &nic.pds[nic.num_pds++] : NULL;
    if (pd != NULL)
        pd->context = context;
    pthread_mutex_unlock(&nic.lock);
    return pd;
}

static int fake_dealloc_pd(struct ibv_pd *pd)
{
    (void)pd;
    return 0;
}

static struct ibv_comp_channel *fake_create_comp_channel(struct ibv_context *context)
{
    struct fake_comp_channel *ch = calloc(1, sizeof *ch);
    int fds[2];
    if (ch == NULL || pipe2(fds, O_CLOEXEC) != 0) {
        free(ch);
        return NULL;
    }
    ch->base.context = context;
    ch->base.fd = fds[0];
    ch->wfd = fds[1];
    pthread_mutex_lock(&nic.lock);
    ch->next = nic.channels;
    nic.channels = ch;
    pthread_mutex_unlock(&nic.lock);
    return &ch->base;
}

static int fake_destroy_comp_channel(struct ibv_comp_channel *channel)
{
    (void)channel; /* closed at uninstall */
    return 0;
}

static struct ibv_cq *fake_create_cq(struct ibv_context *context, int cqe, void *cq_context,
                                     struct ibv_comp_channel *channel, int comp_vector)
{
    (void)cqe;
    (void)comp_vector;
    struct fake_cq *cq = calloc(1, sizeof *cq);
    if (cq == NULL)
        return NULL;
    cq->base.context = context;
    cq->base.cq_context = cq_context;
    cq->base.channel = channel;
    cq->channel = (struct fake_comp_channel *)channel;
    pthread_mutex_lock(&nic.lock);
    cq->next = nic.cqs;
    nic.cqs = cq;
    pthread_mutex_unlock(&nic.lock);
    return &cq->base;
}

static int fake_destroy_cq(struct ibv_cq *ibcq)
{
    pthread_mutex_lock(&nic.lock);
    struct fake_cq *cq = (struct fake_cq *)ibcq;
    cq->channel = NULL; /* no more events; freed at uninstall */
    cq->armed = false;
    pthread_mutex_unlock(&nic.lock);
    return 0;
}

static int fake_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
                             void **cq_context)
{
    struct fake_comp_channel *ch = (struct fake_comp_channel *)channel;
    char byte;
    if (read(ch->base.fd, &byte, 1) != 1)
        return -1;
    pthread_mutex_lock(&nic.lock);
    int rc = -1;
    if (ch->count > 0) {
        struct fake_cq *got = ch->events[ch->head];
        ch->head = (ch->head + 1) % 256;
        ch->count--;
        *cq = &got->base;
        *cq_context = got->base.cq_context;
        rc = 0;
    }
    pthread_mutex_unlock(&nic.lock);
    return rc;
}

static void fake_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
    (void)cq;
    (void)nevents;
}

static struct ibv_mr *fake_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
    struct fake_mr *mr = calloc(1, sizeof *mr);
    if (mr == NULL)
        return NULL;
    mr->base.pd = pd;
    mr->base.context = pd->context;
    mr->base.addr = addr;
    mr->base.length = length;
    pthread_mutex_lock(&nic.lock);
    mr->base.lkey = mr->base.rkey = nic.next_key++;
    if (!(access & IBV_ACCESS_REMOTE_WRITE))
        mr->base.rkey = 0; /* not remotely writable: no key opens it */
    mr->next = nic.mrs;
    nic.mrs = mr;
    pthread_mutex_unlock(&nic.lock);
    return &mr->base;
}

static int fake_dereg_mr(struct ibv_mr *ibmr)
{
    /* Under the lock: the NIC thread never copies into memory being freed. */
    pthread_mutex_lock(&nic.lock);
    ((struct fake_mr *)ibmr)->removed = true;
    pthread_mutex_unlock(&nic.lock);
    return 0;
}

static int fake_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
                          struct ibv_sge *sg_list, uint32_t num_sge)
{
    (void)pd;
    (void)advice;
    (void)flags;
    (void)sg_list;
    (void)num_sge;
    return 0;
}

static struct ibv_qp *fake_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
    struct fake_qp *qp = calloc(1, sizeof *qp);
    if (qp == NULL)
        return NULL;
    qp->sq_cap = attr->cap.max_send_wr > 0 ? attr->cap.max_send_wr : 1;
    qp->rq_cap = attr->cap.max_recv_wr > 0 ? attr->cap.max_recv_wr : 1;
    qp->sq = calloc(qp->sq_cap, sizeof *qp->sq);
    qp->rq = calloc(qp->rq_cap, sizeof *qp->rq);
    if (qp->sq == NULL || qp->rq == NULL) {
        free(qp->sq);
        free(qp->rq);
        free(qp);
        return NULL;
    }
    qp->base.context = pd->context;
    qp->base.pd = pd;
    qp->base.qp_type = attr->qp_type;
    qp->base.state = IBV_QPS_RESET;
    qp->ctx = (struct fake_ctx *)pd->context;
    qp->scq = (struct fake_cq *)attr->send_cq;
    qp->rcq = (struct fake_cq *)attr->recv_cq;
    pthread_mutex_lock(&nic.lock);
    qp->base.qp_num = nic.next_qpn++;
    qp->next = nic.qps;
    nic.qps = qp;
    pthread_mutex_unlock(&nic.lock);
    return &qp->base;
}

static int fake_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
    pthread_mutex_lock(&nic.lock);
    if (mask & IBV_QP_STATE) {
        ibqp->state = attr->qp_state;
        ((struct fake_qp *)ibqp)->error = attr->qp_state == IBV_QPS_ERR;
    }
    pthread_mutex_unlock(&nic.lock);
    return 0;
}

static int fake_destroy_qp(struct ibv_qp *ibqp)
{
    pthread_mutex_lock(&nic.lock);
    struct fake_qp *qp = (struct fake_qp *)ibqp;
    qp->destroyed = true;
    while (qp->sq_count > 0) { /* dropped with the queue pair */
        free(qp->sq[qp->sq_head].inlined);
        qp->sq_head = (qp->sq_head + 1) % qp->sq_cap;
        qp->sq_count--;
    }
    pthread_mutex_unlock(&nic.lock);
    return 0;
}

static struct fake_qp *qp_by_num(uint32_t qpn)
{
    for (struct fake_qp *qp = nic.qps; qp != NULL; qp = qp->next)
        if (qp->base.qp_num == qpn)
            return qp;
    return NULL;
}

/* ---- control path: the RDMA CM ----------------------------------------- */

static struct rdma_event_channel *fake_create_event_channel(void)
{
    struct fake_event_channel *ch = calloc(1, sizeof *ch);
    int fds[2];
    if (ch == NULL || pipe2(fds, O_CLOEXEC) != 0) {
        free(ch);
        return NULL;
    }
    ch->base.fd = fds[0];
    ch->wfd = fds[1];
    pthread_mutex_lock(&nic.lock);
    ch->next = nic.event_channels;
    nic.event_channels = ch;
    pthread_mutex_unlock(&nic.lock);
    return &ch->base;
}

static void fake_destroy_event_channel(struct rdma_event_channel *channel)
{
    (void)channel; /* closed at uninstall */
}

/* Queues a CM event for id on its channel (lock held). */
static void cm_push(struct fake_id *id, enum rdma_cm_event_type type, int status, const void *data,
                    uint8_t len)
{
    struct fake_event_channel *ch = (struct fake_event_channel *)id->base.channel;
    struct rdma_cm_event *event = calloc(1, sizeof *event);
    if (event == NULL || ch == NULL || ch->count == 64) {
        free(event);
        return;
    }
    event->id = &id->base;
    event->event = type;
    event->status = status;
    if (len > 0) {
        void *copy = malloc(len);
        if (copy != NULL) {
            memcpy(copy, data, len);
            event->param.conn.private_data = copy;
            event->param.conn.private_data_len = len;
        }
    }
    ch->events[(ch->head + ch->count) % 64] = event;
    ch->count++;
    char byte = 1;
    ssize_t n = write(ch->wfd, &byte, 1);
    (void)n;
}

static int fake_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **out,
                          void *context, enum rdma_port_space ps)
{
    struct fake_id *id = calloc(1, sizeof *id);
    if (id == NULL)
        return -1;
    id->base.channel = channel;
    id->base.context = context;
    id->base.ps = ps;
    pthread_mutex_lock(&nic.lock);
    id->next = nic.ids;
    nic.ids = id;
    pthread_mutex_unlock(&nic.lock);
    *out = &id->base;
    return 0;
}

static int fake_destroy_id(struct rdma_cm_id *id)
{
    pthread_mutex_lock(&nic.lock);
    ((struct fake_id *)id)->listening = false;
    pthread_mutex_unlock(&nic.lock);
    return 0;
}

static uint16_t sockaddr_port(const struct sockaddr *addr)
{
    return addr->sa_family == AF_INET ? ntohs(((const struct sockaddr_in *)addr)->sin_port) : 0;
}

static struct fake_id *listener_on(uint16_t port)
{
    for (struct fake_id *id = nic.ids; id != NULL; id = id->next)
        if (id->listening && id->port == port)
            return id;
    return NULL;
}

static int fake_bind_addr(struct rdma_cm_id *cmid, struct sockaddr *addr)
{
    struct fake_id *id = (struct fake_id *)cmid;
    pthread_mutex_lock(&nic.lock);
    uint16_t port = sockaddr_port(addr);
    if (port == 0)
        port = nic.next_port++;
    int rc = 0;
    for (struct fake_id *other = nic.ids; other != NULL; other = other->next)
        if (other != id && other->port == port && other->listening)
            rc = -1;
    if (rc == 0) {
        id->port = port;
        struct sockaddr_in *bound = (struct sockaddr_in *)&cmid->route.addr.src_addr;
        *bound = *(const struct sockaddr_in *)addr;
        bound->sin_port = htons(port);
        /* The endpoint that binds is the one whose device was opened last
         * (endpoints open one at a time). */
        cmid->verbs = &nic.last_ctx->base;
    }
    pthread_mutex_unlock(&nic.lock);
    if (rc != 0)
        errno = EADDRINUSE;
    return rc;
}

static int fake_listen(struct rdma_cm_id *cmid, int backlog)
{
    (void)backlog;
    pthread_mutex_lock(&nic.lock);
    ((struct fake_id *)cmid)->listening = true;
    pthread_mutex_unlock(&nic.lock);
    return 0;
}

static int fake_resolve_addr(struct rdma_cm_id *cmid, struct sockaddr *src, struct sockaddr *dst,
                             int timeout_ms)
{
    (void)src;
    (void)timeout_ms;
    struct fake_id *id = (struct fake_id *)cmid;
    pthread_mutex_lock(&nic.lock);
    id->port = sockaddr_port(dst);
    cmid->verbs = &nic.last_ctx->base; /* same device for everyone */
    cm_push(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, 0);
    pthread_mutex_unlock(&nic.lock);
    return 0;
}

static int fake_resolve_route(struct rdma_cm_id *cmid, int timeout_ms)
{
    (void)timeout_ms;
    pthread_mutex_lock(&nic.lock);
    cm_push((struct fake_id *)cmid, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, 0);
    pthread_mutex_unlock(&nic.lock);
    return 0;
}

static int fake_connect(struct rdma_cm_id *cmid, struct rdma_conn_param *param)
{
    struct fake_id *id = (struct fake_id *)cmid;
    pthread_mutex_lock(&nic.lock);
    struct fake_id *listener = listener_on(id->port);
    if (listener == NULL || ((struct fake_ctx *)listener->base.verbs)->dead) {
        cm_push(id, RDMA_CM_EVENT_REJECTED, ECONNREFUSED, NULL, 0);
    } else {
        struct fake_id *passive = calloc(1, sizeof *passive);
        if (passive != NULL) {
            passive->base.channel = listener->base.channel;
            passive->base.context = listener->base.context;
            passive->base.verbs = listener->base.verbs;
            passive->active = id;
            passive->active_qpn = param->qp_num;
            passive->next = nic.ids;
            nic.ids = passive;
            cm_push(passive, RDMA_CM_EVENT_CONNECT_REQUEST, 0, param->private_data,
                    param->private_data_len);
        }
    }
    pthread_mutex_unlock(&nic.lock);
    return 0;
}

static int fake_accept(struct rdma_cm_id *cmid, struct rdma_conn_param *param)
{
    struct fake_id *id = (struct fake_id *)cmid;
    pthread_mutex_lock(&nic.lock);
    struct fake_qp *mine = qp_by_num(param->qp_num), *theirs = qp_by_num(id->active_qpn);
    int rc = mine != NULL && theirs != NULL && id->active != NULL ? 0 : -1;
    if (rc == 0) {
        mine->remote = theirs;
        theirs->remote = mine;
        cm_push(id->active, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, param->private_data,
                param->private_data_len);
    }
    pthread_mutex_unlock(&nic.lock);
    return rc;
}

static int fake_reject(struct rdma_cm_id *cmid, const void *data, uint8_t len)
{
    struct fake_id *id = (struct fake_id *)cmid;
    pthread_mutex_lock(&nic.lock);
    if (id->active != NULL)
        cm_push(id->active, RDMA_CM_EVENT_REJECTED, ECONNREFUSED, data, len);
    pthread_mutex_unlock(&nic.lock);
    return 0;
}

static int fake_establish(struct rdma_cm_id *cmid)
{
    (void)cmid;
    return 0;
}

static int fake_disconnect(struct rdma_cm_id *cmid)
{
    (void)cmid; /* the queue pairs are destroyed next, which is what peers notice */
    return 0;
}

static int fake_init_qp_attr(struct rdma_cm_id *cmid, struct ibv_qp_attr *attr, int *mask)
{
    (void)cmid;
    switch (attr->qp_state) {
    case IBV_QPS_INIT:
        *mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
        attr->port_num = 1;
        break;
    case IBV_QPS_RTR:
        *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        attr->path_mtu = IBV_MTU_4096;
        break;
    default:
        *mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
    }
    return 0;
}

static int fake_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
    struct fake_event_channel *ch = (struct fake_event_channel *)channel;
    char byte;
    if (read(ch->base.fd, &byte, 1) != 1)
        return -1;
    pthread_mutex_lock(&nic.lock);
    int rc = -1;
    if (ch->count > 0) {
        *event = ch->events[ch->head];
        ch->head = (ch->head + 1) % 64;
        ch->count--;
        rc = 0;
    }
    pthread_mutex_unlock(&nic.lock);
    return rc;
}

static int fake_ack_cm_event(struct rdma_cm_event *event)
{
    free((void *)event->param.conn.private_data);
    free(event);
    return 0;
}

#ifdef SPINDLE_HAVE_MLX5DV
static int fake_mlx5dv_query_device(struct ibv_context *context, struct mlx5dv_context *out)
{
    (void)context;
    (void)out;
    return EOPNOTSUPP; /* not an mlx5 device: no DC, RC queue pairs */
}
#endif

static struct verbs_api fake_api;

/* ---- install, crash, uninstall ------------------------------------------ */

void fake_nic_install(void)
{
    fake_api = *verbs_api_default();
    fake_api.get_device_list = fake_get_device_list;
    fake_api.free_device_list = fake_free_device_list;
    fake_api.open_device = fake_open_device;
    fake_api.close_device = fake_close_device;
    fake_api.query_device_ex = fake_query_device_ex;
    fake_api.query_port = fake_query_port;
    fake_api.query_gid = fake_query_gid;
    fake_api.alloc_pd = fake_alloc_pd;
    fake_api.dealloc_pd = fake_dealloc_pd;
    fake_api.create_comp_channel = fake_create_comp_channel;
    fake_api.destroy_comp_channel = fake_destroy_comp_channel;
    fake_api.create_cq = fake_create_cq;
    fake_api.destroy_cq = fake_destroy_cq;
    fake_api.get_cq_event = fake_get_cq_event;
    fake_api.ack_cq_events = fake_ack_cq_events;
    fake_api.reg_mr = fake_reg_mr;
    fake_api.dereg_mr = fake_dereg_mr;
    fake_api.advise_mr = fake_advise_mr;
    fake_api.create_qp = fake_create_qp;
    fake_api.modify_qp = fake_modify_qp;
    fake_api.destroy_qp = fake_destroy_qp;
    fake_api.rdma_create_event_channel = fake_create_event_channel;
    fake_api.rdma_destroy_event_channel = fake_destroy_event_channel;
    fake_api.rdma_create_id = fake_create_id;
    fake_api.rdma_destroy_id = fake_destroy_id;
    fake_api.rdma_bind_addr = fake_bind_addr;
    fake_api.rdma_listen = fake_listen;
    fake_api.rdma_resolve_addr = fake_resolve_addr;
    fake_api.rdma_resolve_route = fake_resolve_route;
    fake_api.rdma_connect = fake_connect;
    fake_api.rdma_accept = fake_accept;
    fake_api.rdma_reject = fake_reject;
    fake_api.rdma_establish = fake_establish;
    fake_api.rdma_disconnect = fake_disconnect;
    fake_api.rdma_init_qp_attr = fake_init_qp_attr;
    fake_api.rdma_get_cm_event = fake_get_cm_event;
    fake_api.rdma_ack_cm_event = fake_ack_cm_event;
#ifdef SPINDLE_HAVE_MLX5DV
    fake_api.mlx5dv_query_device = fake_mlx5dv_query_device;
#endif
    snprintf(nic.device.name, sizeof nic.device.name, "fakenic0");
    nic.device_list[0] = &nic.device;
    nic.device_list[1] = NULL;
    nic.next_qpn = 100;
    nic.next_key = 0x1000;
    nic.next_port = FAKE_BASE_PORT;
    nic.rng = 0x9e3779b97f4a7c15ull;
    nic.stop = false;
    if (pthread_create(&nic.thread, NULL, nic_main, NULL) != 0)
        abort(); /* the fixture cannot run without its NIC thread */
    nic.running = true;
    verbs_api_set(&fake_api);
}

int fake_nic_contexts(void)
{
    pthread_mutex_lock(&nic.lock);
    int n = nic.num_ctxs;
    pthread_mutex_unlock(&nic.lock);
    return n;
}

void fake_nic_crash(int index)
{
    pthread_mutex_lock(&nic.lock);
    for (struct fake_ctx *ctx = nic.ctxs; ctx != NULL; ctx = ctx->next)
        if (ctx->index == index)
            ctx->dead = true;
    pthread_cond_signal(&nic.work);
    pthread_mutex_unlock(&nic.lock);
}

void fake_nic_uninstall(void)
{
    verbs_api_set(NULL);
    if (nic.running) {
        pthread_mutex_lock(&nic.lock);
        nic.stop = true;
        pthread_cond_signal(&nic.work);
        pthread_mutex_unlock(&nic.lock);
        pthread_join(nic.thread, NULL);
        nic.running = false;
    }
    while (nic.qps != NULL) {
        struct fake_qp *qp = nic.qps;
        nic.qps = qp->next;
        while (qp->sq_count > 0) {
            free(qp->sq[qp->sq_head].inlined);
            qp->sq_head = (qp->sq_head + 1) % qp->sq_cap;
            qp->sq_count--;
        }
        free(qp->sq);
        free(qp->rq);
        free(qp);
    }
    while (nic.cqs != NULL) {
        struct fake_cq *cq = nic.cqs;
        nic.cqs = cq->next;
        free(cq->wcs);
        free(cq);
    }
    while (nic.mrs != NULL) {
        struct fake_mr *mr = nic.mrs;
        nic.mrs = mr->next;
        free(mr);
    }
    while (nic.channels != NULL) {
        struct fake_comp_channel *ch = nic.channels;
        nic.channels = ch->next;
        close(ch->base.fd);
        close(ch->wfd);
        free(ch);
    }
    while (nic.event_channels != NULL) {
        struct fake_event_channel *ch = nic.event_channels;
        nic.event_channels = ch->next;
        for (unsigned i = 0; i < ch->count; i++)
            fake_ack_cm_event(ch->events[(ch->head + i) % 64]);
        close(ch->base.fd);
        close(ch->wfd);
        free(ch);
    }
    while (nic.ids != NULL) {
        struct fake_id *id = nic.ids;
        nic.ids = id->next;
        free(id);
    }
    while (nic.ctxs != NULL) {
        struct fake_ctx *ctx = nic.ctxs;
        nic.ctxs = ctx->next;
        free(ctx);
    }
    nic.last_ctx = NULL;
    nic.num_ctxs = 0;
    nic.num_pds = 0;
}
