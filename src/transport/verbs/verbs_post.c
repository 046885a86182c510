/*
 * verbs data path: batched RDMA writes, completion polling and doorbells.
 *
 * A batch becomes one chained list of work requests handed to ONE
 * ibv_post_send call, so the NIC sees one doorbell per batch (Kalia et al.,
 * "Design Guidelines for High Performance RDMA Systems", doorbell batching).
 * Adjacent writes (contiguous local and remote ranges in the same regions)
 * are merged into one request. Small requests are sent inline (no DMA read
 * of the payload), and only every VB_SIGNAL_EVERY-th request is signaled:
 * a signaled completion retires every earlier request of its queue, which
 * is how the send queue is reclaimed (same paper, selective signaling).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "transport/verbs/verbs_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

static int vb_check_write(const struct tp_write *w, unsigned index)
{
    const struct vb_mr *mr = (const struct vb_mr *)w->local_mr;
    const struct vb_rmr *rmr = (const struct vb_rmr *)w->remote;
    if (mr == NULL || rmr == NULL || w->length == 0)
        return sp_error(SPINDLE_EINVAL, "verbs: write %u has no region or length 0", index);
    uintptr_t local = (uintptr_t)w->local, base = (uintptr_t)mr->addr;
    if (local < base || local - base > mr->length || mr->length - (local - base) < w->length)
        return sp_error(SPINDLE_EINVAL, "verbs: write %u (%u bytes) lies outside its local region",
                        index, w->length);
    if (w->remote_offset > rmr->length || rmr->length - w->remote_offset < w->length)
        return sp_error(SPINDLE_EINVAL,
                        "verbs: write %u at remote offset %llu (%u bytes) exceeds region of "
                        "%llu bytes",
                        index, (unsigned long long)w->remote_offset, w->length,
                        (unsigned long long)rmr->length);
    return 0;
}

/* True when w continues the previous request exactly: same regions, and
 * contiguous local and remote ranges. */
static int vb_continues(const struct ibv_send_wr *prev, const struct tp_write *prev_w,
                        const struct tp_write *w)
{
    const struct vb_rmr *rmr = (const struct vb_rmr *)w->remote;
    return prev_w->local_mr == w->local_mr && prev_w->remote == w->remote &&
           prev->sg_list->addr + prev->sg_list->length == (uintptr_t)w->local &&
           prev->wr.rdma.remote_addr + prev->sg_list->length == rmr->addr + w->remote_offset &&
           (uint64_t)prev->sg_list->length + w->length <= UINT32_MAX;
}

int vb_build_chain(struct vb_peer *peer, struct vb_sq *sq, const struct tp_write *writes,
                   unsigned count, unsigned flags, uint64_t cookie)
{
    unsigned n = 0;
    for (unsigned i = 0; i < count; i++) {
        int rc = vb_check_write(&writes[i], i);
        if (rc != 0)
            return rc;
        if (n > 0 && vb_continues(&sq->wrs[n - 1], &writes[i - 1], &writes[i])) {
            sq->sges[n - 1].length += writes[i].length;
            continue;
        }
        if (n == VB_BATCH_MAX_WRS)
            return sp_error(SPINDLE_EINVAL,
                            "verbs: batch of %u writes needs more than %u work requests (send "
                            "queue depth %u)",
                            count, VB_BATCH_MAX_WRS, VB_SQ_DEPTH);
        const struct vb_mr *mr = (const struct vb_mr *)writes[i].local_mr;
        const struct vb_rmr *rmr = (const struct vb_rmr *)writes[i].remote;
        sq->sges[n] = (struct ibv_sge){
            .addr = (uintptr_t)writes[i].local, .length = writes[i].length, .lkey = mr->mr->lkey};
        struct ibv_send_wr *wr = &sq->wrs[n];
        memset(wr, 0, sizeof *wr);
        wr->opcode = IBV_WR_RDMA_WRITE;
        wr->sg_list = &sq->sges[n];
        wr->num_sge = 1;
        wr->wr.rdma.remote_addr = rmr->addr + writes[i].remote_offset;
        wr->wr.rdma.rkey = rmr->rkey;
        n++;
    }
    uint64_t posted = atomic_load_explicit(&sq->posted, memory_order_relaxed);
    uint64_t completed = atomic_load_explicit(&sq->completed, memory_order_acquire);
    if (posted - completed + n > VB_SQ_DEPTH)
        return sp_error(SPINDLE_EAGAIN,
                        "verbs: send queue to peer %u is full (%llu of %u outstanding, batch "
                        "needs %u)",
                        peer->addr.id, (unsigned long long)(posted - completed), VB_SQ_DEPTH, n);
    for (unsigned i = 0; i < n; i++) {
        uint64_t seq = posted + i;
        struct ibv_send_wr *wr = &sq->wrs[i];
        struct vb_wrctx *ctx = &sq->ctx[seq % VB_SQ_DEPTH];
        int last = i + 1 == n;
        *ctx = (struct vb_wrctx){.peer = peer, .sq = sq, .seq_end = seq + 1};
        ctx->signaled = seq % VB_SIGNAL_EVERY == VB_SIGNAL_EVERY - 1 ||
                        (last && (flags & (TP_POST_SIGNALED | VB_POST_FORCE_SIGNAL)));
        ctx->report = last && (flags & TP_POST_SIGNALED);
        ctx->cookie = cookie;
        wr->wr_id = (uintptr_t)ctx;
        wr->next = last ? NULL : &sq->wrs[i + 1];
        wr->send_flags = ctx->signaled ? IBV_SEND_SIGNALED : 0;
        if (wr->sg_list->length <= sq->max_inline)
            wr->send_flags |= IBV_SEND_INLINE;
    }
    return (int)n;
}

/* Hands a built chain of n WRs to the QP with one ibv_post_send. */
static int vb_post_chain(struct vb_peer *peer, struct vb_sq *sq, int n)
{
    struct ibv_send_wr *bad = NULL;
    int rc = ibv_post_send(sq->qp, &sq->wrs[0], &bad);
    if (rc != 0) {
        if (bad != &sq->wrs[0]) {
            /* Part of the chain is on the wire; the queue state is unknown. */
            char why[128];
            snprintf(why, sizeof why, "ibv_post_send failed mid-chain: %s", strerror(rc));
            return vb_peer_fail(peer, why);
        }
        return sp_error(SPINDLE_EIO, "verbs: ibv_post_send to peer %u failed: %s", peer->addr.id,
                        strerror(rc));
    }
    atomic_store_explicit(&sq->posted, atomic_load(&sq->posted) + (uint64_t)n,
                          memory_order_release);
    uint64_t bytes = 0, signaled = 0;
    for (int i = 0; i < n; i++) {
        bytes += sq->sges[i].length;
        signaled += (sq->wrs[i].send_flags & IBV_SEND_SIGNALED) != 0;
    }
    vb_stats_add(peer->ep, (uint64_t)n, bytes, signaled);
    return 0;
}

int vb_post_writes(struct tp_peer *tpeer, const struct tp_write *writes, unsigned count,
                   unsigned flags, uint64_t cookie)
{
    struct vb_peer *peer = (struct vb_peer *)tpeer;
    if (atomic_load_explicit(&peer->failed, memory_order_acquire))
        return sp_error(SPINDLE_EPEERFAILED, "verbs: peer %u (%s:%u) failed", peer->addr.id,
                        peer->addr.host, peer->addr.port);
    if (count == 0)
        return 0;
    if (atomic_load_explicit(&peer->path, memory_order_acquire) == VB_PATH_DC)
        return vb_dct_post(peer, writes, count, flags, cookie);
    int n = vb_build_chain(peer, peer->sq, writes, count, flags, cookie);
    if (n < 0)
        return n;
    return vb_post_chain(peer, peer->sq, n);
}

/* ---- completions ------------------------------------------------------- */

int vb_post_recvs(struct vb_incoming *in, unsigned n)
{
    /* WRITE_WITH_IMM with no payload consumes a receive without scatter. */
    struct ibv_recv_wr wr = {.wr_id = (uintptr_t)&in->recv_ctx, .num_sge = 0};
    for (unsigned i = 0; i < n; i++) {
        struct ibv_recv_wr *bad = NULL;
        int rc = in->srq != NULL ? ibv_post_srq_recv(in->srq, &wr, &bad)
                                 : ibv_post_recv(in->qp, &wr, &bad);
        if (rc != 0)
            return sp_error(SPINDLE_EIO, "verbs: ibv_post_recv failed: %s", strerror(rc));
    }
    return 0;
}

/* Reaps doorbell receives: counts rings and re-posts the receive. */
static int vb_drain_recv(struct vb_ep *ep)
{
    struct ibv_wc wc[16];
    int got, total = 0;
    while ((got = ibv_poll_cq(ep->recv_cq, 16, wc)) > 0) {
        for (int i = 0; i < got; i++) {
            struct vb_wrctx *ctx = vb_wrctx_of(wc[i].wr_id);
            if (wc[i].status != IBV_WC_SUCCESS || ctx == NULL)
                continue; /* flushed: the connection is gone */
            struct vb_incoming *in =
                (struct vb_incoming *)((char *)ctx - offsetof(struct vb_incoming, recv_ctx));
            /* Under conn_lock: the listener destroys the QP of a
             * disconnected peer under it (vb_release_incoming). */
            pthread_mutex_lock(&ep->conn_lock);
            if (in->qp != NULL || in->srq != NULL)
                vb_post_recvs(in, 1);
            pthread_mutex_unlock(&ep->conn_lock);
            total++;
        }
    }
    if (total > 0)
        atomic_fetch_add_explicit(&ep->rings, (uint64_t)total, memory_order_release);
    return total;
}

int vb_peer_fail(struct vb_peer *peer, const char *why)
{
    atomic_store_explicit(&peer->failed, 1, memory_order_release);
    atomic_store_explicit(&peer->ep->fail_pending, 1, memory_order_release);
    return sp_error(SPINDLE_EPEERFAILED, "verbs: peer %u (%s:%u) failed: %s", peer->addr.id,
                    peer->addr.host, peer->addr.port, why);
}

/* Reports peers marked failed by vb_peer_fail (at most max events; the rest
 * stay pending for the next poll). */
static int vb_report_pending(struct vb_ep *ep, struct tp_event *events, int max)
{
    if (max <= 0 || !atomic_exchange(&ep->fail_pending, 0))
        return 0;
    int stored = 0;
    for (struct vb_peer *p = __atomic_load_n(&ep->peers, __ATOMIC_ACQUIRE); p != NULL;
         p = p->next) {
        if (!atomic_load_explicit(&p->failed, memory_order_acquire) ||
            atomic_load_explicit(&p->reported, memory_order_acquire))
            continue;
        if (stored == max) {
            atomic_store(&ep->fail_pending, 1);
            break;
        }
        if (atomic_exchange(&p->reported, 1))
            continue;
        sp_log(SP_LOG_WARN, "verbs", "peer %u (%s:%u) failed", p->addr.id, p->addr.host,
               p->addr.port);
        events[stored++] = (struct tp_event){.type = TP_EVENT_PEER_FAILED,
                                             .peer = (struct tp_peer *)p,
                                             .error = SPINDLE_EPEERFAILED};
    }
    return stored;
}

int vb_peer_failed_event(struct vb_peer *peer, enum ibv_wc_status status, struct tp_event *ev)
{
    atomic_store_explicit(&peer->failed, 1, memory_order_release);
    if (atomic_exchange(&peer->reported, 1))
        return 0;
    sp_log(SP_LOG_WARN, "verbs", "peer %u (%s:%u) failed: %s", peer->addr.id, peer->addr.host,
           peer->addr.port, ibv_wc_status_str(status));
    *ev = (struct tp_event){
        .type = TP_EVENT_PEER_FAILED, .peer = (struct tp_peer *)peer, .error = SPINDLE_EPEERFAILED};
    return 1;
}

/* Turns one send completion into at most one event. */
static int vb_handle_wc(struct vb_ep *ep, const struct ibv_wc *wc, struct tp_event *ev)
{
    struct vb_wrctx *ctx = vb_wrctx_of(wc->wr_id);
    struct vb_peer *peer = ctx->peer;
    if (wc->status != IBV_WC_SUCCESS) {
        /* A DCI is shared: only the failed request's peer failed, and the
         * DCI is reset once it drained. */
        if (ctx->sq->is_dci)
            return vb_dci_error(ep, wc, ctx, ev);
        /* An RC QP is the peer's own: it is in the error state for good. */
        atomic_store_explicit(&ctx->sq->broken, VB_SQ_DEAD, memory_order_release);
        return vb_peer_failed_event(peer, wc->status, ev);
    }
    /* A signaled completion retires every earlier request of its queue. */
    if (ctx->seq_end > atomic_load_explicit(&ctx->sq->completed, memory_order_relaxed))
        atomic_store_explicit(&ctx->sq->completed, ctx->seq_end, memory_order_release);
    if (!ctx->report)
        return 0;
    *ev = (struct tp_event){
        .type = TP_EVENT_WRITE_DONE, .peer = (struct tp_peer *)peer, .cookie = ctx->cookie};
    return 1;
}

int vb_poll(struct tp_endpoint *tep, struct tp_event *events, int max)
{
    struct vb_ep *ep = (struct vb_ep *)tep;
    int stored = 0;
    vb_drain_recv(ep);
    stored += vb_report_pending(ep, events, max);
    if (ep->stash_valid && stored < max) {
        ep->stash_valid = 0;
        stored += vb_handle_wc(ep, &ep->stash, &events[stored]);
    }
    struct ibv_wc wc[32];
    while (stored < max) {
        int want = max - stored < 32 ? max - stored : 32;
        int got = ibv_poll_cq(ep->send_cq, want, wc);
        if (got < 0)
            return sp_error(SPINDLE_EIO, "verbs: ibv_poll_cq on %s failed (%d)", ep->dev_name, got);
        for (int i = 0; i < got; i++)
            stored += vb_handle_wc(ep, &wc[i], &events[stored]);
        if (got < want)
            break;
    }
    /* Peers failed while handling these completions (a DCI that could not
     * be reset) are reported now rather than by the next poll. */
    if (stored < max)
        stored += vb_report_pending(ep, events + stored, max - stored);
    return stored;
}

/* ---- doorbells --------------------------------------------------------- */

int vb_doorbell_ring(struct tp_peer *tpeer)
{
    struct vb_peer *peer = (struct vb_peer *)tpeer;
    if (atomic_load_explicit(&peer->failed, memory_order_acquire))
        return sp_error(SPINDLE_EPEERFAILED, "verbs: peer %u (%s:%u) failed", peer->addr.id,
                        peer->addr.host, peer->addr.port);
    if (atomic_load_explicit(&peer->path, memory_order_acquire) == VB_PATH_DC)
        return vb_dct_ring(peer);
    struct vb_sq *sq = peer->sq;
    uint64_t posted = atomic_load_explicit(&sq->posted, memory_order_relaxed);
    if (posted - atomic_load_explicit(&sq->completed, memory_order_acquire) + 1 > VB_SQ_DEPTH)
        return sp_error(SPINDLE_EAGAIN, "verbs: send queue to peer %u is full", peer->addr.id);
    struct vb_wrctx *ctx = &sq->ctx[posted % VB_SQ_DEPTH];
    *ctx = (struct vb_wrctx){.peer = peer, .sq = sq, .seq_end = posted + 1};
    ctx->signaled = posted % VB_SIGNAL_EVERY == VB_SIGNAL_EVERY - 1;
    struct ibv_send_wr *wr = &sq->wrs[0];
    memset(wr, 0, sizeof *wr);
    wr->wr_id = (uintptr_t)ctx;
    wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr->num_sge = 0;
    wr->imm_data = htonl(peer->ep->self_id);
    wr->send_flags = ctx->signaled ? IBV_SEND_SIGNALED : 0;
    struct ibv_send_wr *bad = NULL;
    int rc = ibv_post_send(sq->qp, wr, &bad);
    if (rc != 0)
        return sp_error(SPINDLE_EIO, "verbs: doorbell to peer %u failed: %s", peer->addr.id,
                        strerror(rc));
    atomic_store_explicit(&sq->posted, posted + 1, memory_order_release);
    pthread_mutex_lock(&peer->ep->stats_lock);
    peer->ep->stats.wakeups_sent++;
    pthread_mutex_unlock(&peer->ep->stats_lock);
    return 0;
}

void vb_doorbell_ring_self(struct tp_endpoint *tep)
{
    struct vb_ep *ep = (struct vb_ep *)tep;
    atomic_fetch_add_explicit(&ep->rings, 1, memory_order_release);
    uint64_t one = 1;
    ssize_t n = write(ep->self_fd, &one, sizeof one);
    (void)n; /* a full eventfd is already readable */
}

uint64_t vb_doorbell_arm(struct tp_endpoint *tep)
{
    struct vb_ep *ep = (struct vb_ep *)tep;
    return atomic_load_explicit(&ep->rings, memory_order_acquire);
}

/* Arms both CQs, then checks for work that raced with arming. */
static int vb_arm_and_check(struct vb_ep *ep, uint64_t token)
{
    /* A self-ring counted in rings that an earlier wait already returned
     * for would leave the eventfd readable and end the next sleep at once:
     * empty it first. A ring after this read counts in rings before it
     * writes the eventfd, so it is seen below or wakes the poll. */
    uint64_t stale;
    ssize_t drained = read(ep->self_fd, &stale, sizeof stale);
    (void)drained; /* EAGAIN: nothing was pending */
    ibv_req_notify_cq(ep->recv_cq, 0);
    ibv_req_notify_cq(ep->send_cq, 0);
    vb_drain_recv(ep);
    if (atomic_load_explicit(&ep->rings, memory_order_acquire) != token)
        return 1;
    if (!ep->stash_valid && ibv_poll_cq(ep->send_cq, 1, &ep->stash) == 1)
        ep->stash_valid = 1;
    return ep->stash_valid;
}

int vb_doorbell_wait(struct tp_endpoint *tep, uint64_t token, int timeout_ms)
{
    struct vb_ep *ep = (struct vb_ep *)tep;
    const struct verbs_api *api = verbs_api_get();
    if (vb_arm_and_check(ep, token))
        return 0;
    pthread_mutex_lock(&ep->stats_lock);
    ep->stats.sleeps++;
    pthread_mutex_unlock(&ep->stats_lock);
    struct pollfd fds[2] = {{.fd = ep->channel->fd, .events = POLLIN},
                            {.fd = ep->self_fd, .events = POLLIN}};
    int rc = poll(fds, 2, timeout_ms < 0 ? -1 : timeout_ms);
    if (rc < 0 && errno != EINTR)
        return sp_error(SPINDLE_EIO, "verbs: poll on the completion channel failed: %s",
                        strerror(errno));
    if (rc > 0 && (fds[0].revents & POLLIN)) {
        struct ibv_cq *cq = NULL;
        void *cq_ctx = NULL;
        if (api->get_cq_event(ep->channel, &cq, &cq_ctx) == 0)
            api->ack_cq_events(cq, 1);
        vb_drain_recv(ep);
    }
    if (rc > 0 && (fds[1].revents & POLLIN)) {
        uint64_t value;
        ssize_t n = read(ep->self_fd, &value, sizeof value);
        (void)n;
    }
    if (rc > 0 || atomic_load_explicit(&ep->rings, memory_order_acquire) != token)
        return 0;
    return sp_error(SPINDLE_ETIMEDOUT, "verbs: doorbell wait timed out after %d ms", timeout_ms);
}
