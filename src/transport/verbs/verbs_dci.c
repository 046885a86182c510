/*
 * DC initiators (DCIs) of the verbs backend: creation, posting, and recovery
 * after an error completion.
 *
 * A DCI is shared by the peers pinned to it (dct.c). When one request fails
 * (say its target died), the DCI moves to the error state and every request
 * queued behind it completes with IBV_WC_WR_FLUSH_ERR, including those of
 * healthy peers. Only the peer of the failed request is failed. Flushed
 * requests are not failures: once the DCI has drained (the completion of
 * its last posted request was polled; a request that ends in error always
 * produces a completion, signaled or not), the DCI is reset (RESET, then
 * INIT/RTR/RTS with the attributes it was created with) and the flushed
 * requests of the peers that did not fail are posted again, in their
 * original order, before any new request of theirs (posts wait with
 * SPINDLE_EAGAIN meanwhile), so each peer's data still precedes its guard
 * (T2). An inline write is re-posted with the bytes it was first posted
 * with (kept with the request): its source, a counter, may have moved on
 * since, and a newer guard would overtake the data queued behind the
 * re-post, which readers would take for null messages. A gathered write
 * reads its source when the NIC executes it, the first time as well.
 * If the reset itself fails, the DCI stays dead and the peers whose
 * requests were flushed, and every later poster pinned to it, are failed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/verbs/verbs_impl.h"
#include "util/error.h"
#include "util/log.h"

#ifndef SPINDLE_HAVE_MLX5DV

int vb_dci_create(struct vb_ep *ep, unsigned index)
{
    return sp_error(SPINDLE_ENOTSUP, "verbs: DC transport is not built");
}

int vb_dci_emit(struct vb_ep *ep, unsigned dci, int n)
{
    return sp_error(SPINDLE_ENOTSUP, "verbs: DC transport is not built");
}

int vb_dci_error(struct vb_ep *ep, const struct ibv_wc *wc, struct vb_wrctx *ctx,
                 struct tp_event *ev)
{
    return vb_peer_failed_event(ctx->peer, wc->status, ev);
}

#else

int vb_qp_modify(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask, const char *what)
{
    int rc = verbs_api_get()->modify_qp(qp, attr, mask);
    if (rc != 0)
        return sp_error(SPINDLE_EIO, "verbs: moving %s to %s failed: %s", what,
                        vb_qp_state_name(attr->qp_state), strerror(rc > 0 ? rc : errno));
    return 0;
}

/* INIT, RTR, RTS: the same attributes at creation and after a reset. */
static int vb_dci_ready(struct vb_ep *ep, struct vb_sq *sq)
{
    char what[32];
    snprintf(what, sizeof what, "DCI %u", sq->dci_index);
    struct ibv_qp_attr qa = {.qp_state = IBV_QPS_INIT, .port_num = ep->port_num};
    if (vb_qp_modify(sq->qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT, what) != 0)
        return -1;
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTR;
    qa.path_mtu = ep->mtu;
    if (vb_qp_modify(sq->qp, &qa, IBV_QP_STATE | IBV_QP_PATH_MTU, what) != 0)
        return -1;
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTS;
    qa.timeout = 14;
    qa.retry_cnt = 7;
    qa.rnr_retry = 7;
    qa.max_rd_atomic = 1;
    return vb_qp_modify(sq->qp, &qa,
                        IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                            IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
                        what) == 0
               ? 0
               : -1;
}

int vb_dci_create(struct vb_ep *ep, unsigned index)
{
    const struct verbs_api *api = verbs_api_get();
    struct ibv_qp_init_attr_ex attr = {
        .qp_type = IBV_QPT_DRIVER,
        .send_cq = ep->send_cq,
        .recv_cq = ep->recv_cq,
        .cap = {.max_send_wr = VB_SQ_DEPTH, .max_send_sge = 1, .max_inline_data = VB_MAX_INLINE},
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
        .pd = ep->pd,
        .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
    };
    struct mlx5dv_qp_init_attr dv = {.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC,
                                     .dc_init_attr = {.dc_type = MLX5DV_DCTYPE_DCI}};
    struct vb_sq *sq = calloc(1, sizeof *sq);
    if (sq == NULL)
        return sp_error(SPINDLE_ENOMEM, "verbs: out of memory for DCI %u", index), -1;
    pthread_mutex_init(&sq->lock, NULL);
    sq->is_dci = 1;
    sq->dci_index = (uint8_t)index;
    ep->dci[index] = sq;
    sq->qp = api->mlx5dv_create_qp(ep->ctx, &attr, &dv);
    if (sq->qp == NULL)
        return sp_error(SPINDLE_EIO, "verbs: creating DCI %u on %s failed: %s", index, ep->dev_name,
                        strerror(errno)),
               -1;
    /* Inline payloads are kept for re-posting: at most VB_MAX_INLINE. */
    sq->max_inline =
        attr.cap.max_inline_data < VB_MAX_INLINE ? attr.cap.max_inline_data : VB_MAX_INLINE;
    if (vb_dci_ready(ep, sq) != 0)
        return -1;
    struct ibv_qp_ex *qpx = api->qp_to_qp_ex(sq->qp);
    ep->dci_ex[index] = qpx;
    ep->dci_mlx[index] = qpx != NULL ? api->mlx5dv_qp_ex_from_ibv_qp_ex(qpx) : NULL;
    if (ep->dci_mlx[index] == NULL)
        return sp_error(SPINDLE_EIO, "verbs: DCI %u has no extended post interface", index), -1;
    return 0;
}

/* Saves a request for a possible re-post; an inline payload is copied
 * (it is then posted from that copy, so the two cannot differ). */
static void vb_wr_save(const struct ibv_send_wr *wr, struct vb_wrsave *out)
{
    out->remote_addr = wr->wr.rdma.remote_addr;
    out->rkey = wr->wr.rdma.rkey;
    out->imm_data = wr->imm_data;
    out->opcode = (uint8_t)wr->opcode;
    out->num_sge = wr->num_sge > 0;
    out->inlined = 0;
    out->local_addr = 0;
    out->length = 0;
    out->lkey = 0;
    if (wr->num_sge > 0) {
        out->local_addr = wr->sg_list->addr;
        out->length = wr->sg_list->length;
        out->lkey = wr->sg_list->lkey;
        if ((wr->send_flags & IBV_SEND_INLINE) && out->length <= VB_MAX_INLINE) {
            memmove(out->bytes, vb_local_addr(out->local_addr), out->length);
            out->inlined = 1;
        }
    }
}

int vb_dci_emit(struct vb_ep *ep, unsigned dci, int n)
{
    struct vb_sq *sq = ep->dci[dci];
    struct ibv_qp_ex *qpx = ep->dci_ex[dci];
    struct mlx5dv_qp_ex *mqpx = ep->dci_mlx[dci];
    ibv_wr_start(qpx);
    for (int i = 0; i < n; i++) {
        const struct ibv_send_wr *wr = &sq->wrs[i];
        struct vb_wrctx *ctx = vb_wrctx_of(wr->wr_id);
        const struct vb_peer *peer = ctx->peer;
        qpx->wr_id = wr->wr_id;
        qpx->wr_flags = wr->send_flags;
        if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
            ibv_wr_rdma_write_imm(qpx, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, wr->imm_data);
        else
            ibv_wr_rdma_write(qpx, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr);
        mlx5dv_wr_set_dc_addr(mqpx, peer->ah, peer->addr.dctn, peer->addr.dc_key);
        vb_wr_save(wr, &ctx->req);
        if (wr->num_sge == 0)
            ibv_wr_set_sge_list(qpx, 0, NULL);
        else if (ctx->req.inlined)
            ibv_wr_set_inline_data(qpx, ctx->req.bytes, ctx->req.length);
        else
            ibv_wr_set_sge(qpx, wr->sg_list->lkey, wr->sg_list->addr, wr->sg_list->length);
    }
    int rc = ibv_wr_complete(qpx);
    if (rc != 0) {
        const struct vb_wrctx *first = vb_wrctx_of(sq->wrs[0].wr_id);
        return sp_error(SPINDLE_EIO, "verbs: posting to DCI %u for peer %u failed: %s", dci,
                        first->peer->addr.id, strerror(rc));
    }
    for (int i = 0; i < n; i++) {
        const struct vb_wrctx *ctx = vb_wrctx_of(sq->wrs[i].wr_id);
        ctx->peer->dc_last_seq = ctx->seq_end; /* the switch to RC waits for it */
    }
    uint64_t posted = atomic_load(&sq->posted) + (uint64_t)n;
    atomic_store_explicit(&sq->posted, posted, memory_order_release);
    return 0;
}

/* Builds the chain of the saved requests into sq->wrs from sequence
 * sq->posted on (the queue is empty after the reset) and posts it. */
static int vb_dci_repost(struct vb_ep *ep, struct vb_sq *sq, const struct vb_wrctx *saved,
                         unsigned n)
{
    if (n == 0)
        return 0;
    uint64_t base = atomic_load_explicit(&sq->posted, memory_order_relaxed);
    uint64_t bytes = 0, signaled = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct vb_wrsave *req = &saved[i].req;
        uint64_t seq = base + i;
        struct vb_wrctx *ctx = &sq->ctx[seq % VB_SQ_DEPTH];
        *ctx = (struct vb_wrctx){.peer = saved[i].peer,
                                 .sq = sq,
                                 .seq_end = seq + 1,
                                 .cookie = saved[i].cookie,
                                 .report = saved[i].report};
        /* Keep the signaling rule of the new position as well as the
         * original reason (a reported batch, the last DC batch before RC). */
        ctx->signaled = saved[i].signaled || seq % VB_SIGNAL_EVERY == VB_SIGNAL_EVERY - 1;
        struct ibv_send_wr *wr = &sq->wrs[i];
        memset(wr, 0, sizeof *wr);
        wr->wr_id = (uintptr_t)ctx;
        wr->next = i + 1 < n ? &sq->wrs[i + 1] : NULL;
        wr->opcode = (enum ibv_wr_opcode)req->opcode;
        wr->imm_data = req->imm_data;
        wr->wr.rdma.remote_addr = req->remote_addr;
        wr->wr.rdma.rkey = req->rkey;
        wr->send_flags = ctx->signaled ? IBV_SEND_SIGNALED : 0;
        if (req->num_sge) {
            /* An inline write goes again with the bytes it was first
             * posted with; a gathered one reads its source when the NIC
             * executes it, as the first time. */
            uint64_t addr = req->inlined ? (uintptr_t)req->bytes : req->local_addr;
            sq->sges[i] = (struct ibv_sge){.addr = addr, .length = req->length, .lkey = req->lkey};
            wr->sg_list = &sq->sges[i];
            wr->num_sge = 1;
            if (req->inlined)
                wr->send_flags |= IBV_SEND_INLINE;
            bytes += req->length;
        }
        signaled += ctx->signaled;
    }
    int rc = vb_dci_emit(ep, sq->dci_index, (int)n);
    if (rc == 0)
        vb_stats_add(ep, n, bytes, signaled);
    return rc;
}

/* Fails the peers (not failed yet) of saved requests: their flushed
 * requests cannot be delivered. */
static void vb_dci_fail_saved(const struct vb_wrctx *saved, unsigned n, const char *why)
{
    for (unsigned i = 0; i < n; i++)
        if (!atomic_load_explicit(&saved[i].peer->failed, memory_order_acquire))
            vb_peer_fail(saved[i].peer, why);
}

/* The DCI has drained: every request up to sq->posted has completed, with
 * success before sq->error_seq and in error from it on. Caller holds the
 * DCI's lock. */
static void vb_dci_recover(struct vb_ep *ep, struct vb_sq *sq)
{
    uint64_t posted = atomic_load_explicit(&sq->posted, memory_order_relaxed);
    unsigned span = (unsigned)(posted - sq->error_seq);
    struct vb_wrctx *saved = calloc(span > 0 ? span : 1, sizeof *saved);
    unsigned n = 0;
    for (uint64_t seq = sq->error_seq; seq < posted; seq++) {
        const struct vb_wrctx *ctx = &sq->ctx[seq % VB_SQ_DEPTH];
        if (atomic_load_explicit(&ctx->peer->failed, memory_order_acquire))
            continue; /* the failed peer's own requests are dropped */
        if (saved != NULL)
            saved[n++] = *ctx;
        else
            vb_peer_fail(ctx->peer, "out of memory re-posting the requests of its reset DCI");
    }
    atomic_store_explicit(&sq->completed, posted, memory_order_release);
    if (saved == NULL) {
        atomic_store_explicit(&sq->broken, VB_SQ_DEAD, memory_order_release);
        return;
    }
    char what[32];
    snprintf(what, sizeof what, "DCI %u", sq->dci_index);
    struct ibv_qp_attr qa = {.qp_state = IBV_QPS_RESET};
    int rc = vb_qp_modify(sq->qp, &qa, IBV_QP_STATE, what);
    if (rc == 0)
        rc = vb_dci_ready(ep, sq);
    if (rc == 0)
        rc = vb_dci_repost(ep, sq, saved, n);
    if (rc != 0) {
        char why[160];
        snprintf(why, sizeof why, "DCI %u could not be reset after an error completion (%s)",
                 sq->dci_index, spindle_errmsg());
        sp_log(SP_LOG_WARN, "verbs", "%s", why);
        atomic_store_explicit(&sq->broken, VB_SQ_DEAD, memory_order_release);
        vb_dci_fail_saved(saved, n, why);
    } else {
        sp_log(SP_LOG_INFO, "verbs",
               "DCI %u reset after an error completion; %u flushed requests posted again",
               sq->dci_index, n);
        atomic_store_explicit(&sq->broken, VB_SQ_OK, memory_order_release);
    }
    free(saved);
}

int vb_dci_error(struct vb_ep *ep, const struct ibv_wc *wc, struct vb_wrctx *ctx,
                 struct tp_event *ev)
{
    struct vb_sq *sq = ctx->sq;
    int stored = 0;
    pthread_mutex_lock(&sq->lock);
    int state = atomic_load_explicit(&sq->broken, memory_order_relaxed);
    if (state == VB_SQ_OK) {
        /* Completions of one queue arrive in order: this is the first
         * request that did not complete; all before it did. */
        sq->error_seq = ctx->seq_end - 1;
        state = VB_SQ_DRAINING;
        atomic_store_explicit(&sq->broken, state, memory_order_release);
        sp_log(SP_LOG_WARN, "verbs", "DCI %u: %s on a request to peer %u; resetting it",
               sq->dci_index, ibv_wc_status_str(wc->status), ctx->peer->addr.id);
    }
    if (wc->status != IBV_WC_WR_FLUSH_ERR)
        stored = vb_peer_failed_event(ctx->peer, wc->status, ev);
    if (state == VB_SQ_DRAINING &&
        ctx->seq_end == atomic_load_explicit(&sq->posted, memory_order_relaxed))
        vb_dci_recover(ep, sq);
    pthread_mutex_unlock(&sq->lock);
    return stored;
}

#endif
