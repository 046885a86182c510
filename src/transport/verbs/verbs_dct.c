/*
 * Dynamically connected transport (mlx5 DC) for the verbs backend.
 *
 * Each endpoint owns one DC target (DCT, receiving through an SRQ) and a
 * pool of VB_DCI_POOL DC initiators. A peer that advertises a DCT in its
 * address needs no QP of its own: connect() creates an address handle and
 * pins the peer to DCI (hash >> 32) % pool, so all of its writes go through one DCI
 * and keep posting order (T2). This is the hybrid of KRCore ("KRCORE: a
 * microsecond-scale RDMA control plane", DCT for cheap connection setup):
 * DC for the many cold peers, and an RC QP, connected in the background, for
 * a peer that becomes hot (more than VB_DCT_HOT_WRITES writes), because RC
 * avoids the DCI reconnect cost on every change of destination.
 *
 * Ordering across the switch (T2): before the first RC write, every DC write
 * of that peer must have completed. The first post after the RC QP is ready
 * goes through the DCI with its last request signaled; further posts return
 * SPINDLE_EAGAIN until that completion is polled, then the peer moves to RC.
 *
 * Probing: DC support is not a flag of mlx5dv_query_device; a device is DC
 * capable when it is an mlx5 device (mlx5dv_query_device succeeds) and the
 * DCT can be created. Otherwise one log line says RC queue pairs are used.
 *
 * The DCIs themselves (creation, posting, reset after an error completion)
 * live in verbs_dci.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <sys/random.h>

#include "transport/verbs/verbs_impl.h"
#include "util/error.h"
#include "util/log.h"

static void vb_dct_unsupported(struct vb_ep *ep, const char *why)
{
    sp_log(SP_LOG_INFO, "verbs", "DCT not supported by %s; using RC queue pairs (%s)", ep->dev_name,
           why);
}

#ifndef SPINDLE_HAVE_MLX5DV

int vb_dct_open(struct vb_ep *ep, int use_dct)
{
    if (use_dct)
        vb_dct_unsupported(ep, "built without mlx5dv");
    return 0;
}

void vb_dct_close(struct vb_ep *ep) {}

int vb_dct_peer_init(struct vb_ep *ep, struct vb_peer *peer)
{
    return sp_error(SPINDLE_ENOTSUP, "verbs: DC transport is not built");
}

void vb_dct_peer_fini(struct vb_peer *peer) {}

int vb_dct_post(struct vb_peer *peer, const struct tp_write *writes, unsigned count, unsigned flags,
                uint64_t cookie)
{
    return sp_error(SPINDLE_ENOTSUP, "verbs: DC transport is not built");
}

int vb_dct_ring(struct vb_peer *peer)
{
    return sp_error(SPINDLE_ENOTSUP, "verbs: DC transport is not built");
}

#else

static void vb_ah_attr(struct vb_ep *ep, const struct vb_addr *dst, struct ibv_ah_attr *ah)
{
    memset(ah, 0, sizeof *ah);
    ah->port_num = ep->port_num;
    ah->dlid = dst->lid;
    /* RoCE (lid 0) and cross-subnet IB need the global route header. */
    if (dst->lid == 0) {
        ah->is_global = 1;
        memcpy(ah->grh.dgid.raw, dst->gid, sizeof ah->grh.dgid.raw);
        ah->grh.sgid_index = 0;
        ah->grh.hop_limit = 64;
    }
}

static int vb_dct_create(struct vb_ep *ep)
{
    const struct verbs_api *api = verbs_api_get();
    struct ibv_srq_init_attr srq_attr = {.attr = {.max_wr = VB_RECVS * 4, .max_sge = 1}};
    ep->srq = api->create_srq(ep->pd, &srq_attr);
    if (ep->srq == NULL)
        return -1;
    struct ibv_qp_init_attr_ex attr = {
        .qp_type = IBV_QPT_DRIVER,
        .send_cq = ep->send_cq,
        .recv_cq = ep->recv_cq,
        .srq = ep->srq,
        .comp_mask = IBV_QP_INIT_ATTR_PD,
        .pd = ep->pd,
    };
    struct mlx5dv_qp_init_attr dv = {.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC,
                                     .dc_init_attr = {.dc_type = MLX5DV_DCTYPE_DCT}};
    dv.dc_init_attr.dct_access_key = ep->dc_key;
    ep->dct = api->mlx5dv_create_qp(ep->ctx, &attr, &dv);
    if (ep->dct == NULL)
        return -1;
    struct ibv_qp_attr qa = {.qp_state = IBV_QPS_INIT,
                             .port_num = ep->port_num,
                             .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
    if (vb_qp_modify(ep->dct, &qa,
                     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
                     "DCT") != 0)
        return -1;
    memset(&qa, 0, sizeof qa);
    qa.qp_state = IBV_QPS_RTR;
    qa.path_mtu = ep->mtu;
    qa.min_rnr_timer = 12;
    struct vb_addr self = {.lid = ep->lid};
    memcpy(self.gid, ep->gid.raw, sizeof self.gid);
    vb_ah_attr(ep, &self, &qa.ah_attr);
    if (vb_qp_modify(ep->dct, &qa,
                     IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV | IBV_QP_PATH_MTU, "DCT") != 0)
        return -1;
    ep->srq_in.srq = ep->srq;
    return vb_post_recvs(&ep->srq_in, VB_RECVS * 4) == 0 ? 0 : -1;
}

int vb_dct_open(struct vb_ep *ep, int use_dct)
{
    if (!use_dct)
        return 0;
    const struct verbs_api *api = verbs_api_get();
    struct mlx5dv_context dv = {.comp_mask = MLX5DV_CONTEXT_MASK_DC_ODP_CAPS};
    if (api->mlx5dv_query_device(ep->ctx, &dv) != 0) {
        vb_dct_unsupported(ep, "not an mlx5 device");
        return 0;
    }
    /* A DCT takes a write from any DCI that names its number and key; a
     * fixed key would let anyone on the fabric who guesses the number
     * write to this member's registered memory. Without randomness, no
     * DCT (RC connections are set up through the connection manager). */
    ep->dc_key = 0;
    while (ep->dc_key == 0)
        if (getrandom(&ep->dc_key, sizeof ep->dc_key, 0) != (ssize_t)sizeof ep->dc_key) {
            vb_dct_unsupported(ep, "no random DC key (getrandom failed)");
            return 0;
        }
    int ok = vb_dct_create(ep) == 0;
    for (unsigned i = 0; ok && i < VB_DCI_POOL; i++)
        ok = vb_dci_create(ep, i) == 0;
    if (!ok) {
        vb_dct_unsupported(ep, spindle_errmsg()[0] ? spindle_errmsg() : strerror(errno));
        vb_dct_close(ep);
        return 0;
    }
    ep->dct_enabled = 1;
    sp_log(SP_LOG_INFO, "verbs", "%s: DCT %u with %u DCIs", ep->dev_name, ep->dct->qp_num,
           VB_DCI_POOL);
    return 0;
}

void vb_dct_close(struct vb_ep *ep)
{
    const struct verbs_api *api = verbs_api_get();
    for (unsigned i = 0; i < VB_DCI_POOL; i++) {
        vb_sq_destroy(ep->dci[i]);
        ep->dci[i] = NULL;
    }
    if (ep->dct != NULL)
        api->destroy_qp(ep->dct);
    ep->dct = NULL;
    if (ep->srq != NULL)
        api->destroy_srq(ep->srq);
    ep->srq = NULL;
    ep->srq_in.srq = NULL;
    ep->dct_enabled = 0;
}

int vb_dct_peer_init(struct vb_ep *ep, struct vb_peer *peer)
{
    struct ibv_ah_attr attr;
    vb_ah_attr(ep, &peer->addr, &attr);
    peer->ah = verbs_api_get()->create_ah(ep->pd, &attr);
    if (peer->ah == NULL)
        return sp_error(SPINDLE_EUNREACH, "verbs: no address handle for peer %u (lid %u) on %s: %s",
                        peer->addr.id, peer->addr.lid, ep->dev_name, strerror(errno));
    /* The high half: FNV-1a's low bits depend only on the low bits of
     * each input byte, so similar nonces would share one DCI. */
    peer->dci = (unsigned)((peer->hash >> 32) % VB_DCI_POOL);
    atomic_store(&peer->path, VB_PATH_DC);
    return 0;
}

void vb_dct_peer_fini(struct vb_peer *peer)
{
    if (peer->ah != NULL)
        verbs_api_get()->destroy_ah(peer->ah);
    peer->ah = NULL;
}

static void *vb_rc_background(void *arg)
{
    struct vb_peer *peer = arg;
    if (vb_rc_connect(peer->ep, peer, peer->ep->timeout_ms) == 0) {
        atomic_store_explicit(&peer->rc_ready, 1, memory_order_release);
    } else {
        sp_log(SP_LOG_WARN, "verbs", "peer %u stays on DC: %s", peer->addr.id, spindle_errmsg());
        atomic_store_explicit(&peer->rc_failed, 1, memory_order_release);
    }
    return NULL;
}

/* A DCI whose reset failed stays in the error state, and its accounting
 * no longer advances: the peers pinned to it are failed (reported by the
 * next poll) rather than left at SPINDLE_EAGAIN for ever. While a DCI
 * drains and is reset after an error completion (verbs_dci.c), its peers
 * wait with SPINDLE_EAGAIN, so that their flushed requests are posted again
 * before anything newer. Returns 0 when the DCI is usable. */
static int vb_dci_check(struct vb_peer *peer, const struct vb_sq *sq)
{
    int state = atomic_load_explicit(&sq->broken, memory_order_acquire);
    if (state == VB_SQ_OK)
        return 0;
    if (state == VB_SQ_DRAINING)
        return sp_error(SPINDLE_EAGAIN,
                        "verbs: DCI %u of peer %u is being reset after an error completion",
                        peer->dci, peer->addr.id);
    char why[96];
    snprintf(why, sizeof why, "its DCI %u is in the error state and could not be reset", peer->dci);
    return vb_peer_fail(peer, why);
}

/* Moves a peer whose background RC QP is ready off DC once its DC writes
 * completed. Returns 1 when the peer now uses RC, 0 to stay on DC, or a
 * negative code (EAGAIN while draining). */
static int vb_dc_switch(struct vb_peer *peer, unsigned *flags)
{
    if (!atomic_load_explicit(&peer->rc_ready, memory_order_acquire))
        return 0;
    struct vb_sq *sq = peer->ep->dci[peer->dci];
    /* Under the DCI's lock: a reset (verbs_dci.c) counts every request as
     * completed before it re-posts this peer's flushed ones and moves
     * dc_last_seq past them; the peer must not switch in between. */
    pthread_mutex_lock(&sq->lock);
    int drained = atomic_load_explicit(&sq->broken, memory_order_relaxed) == VB_SQ_OK &&
                  atomic_load_explicit(&sq->completed, memory_order_acquire) >= peer->dc_last_seq;
    pthread_mutex_unlock(&sq->lock);
    if (drained) {
        atomic_store_explicit(&peer->path, VB_PATH_RC, memory_order_release);
        sp_log(SP_LOG_DEBUG, "verbs", "peer %u moved from DC to RC", peer->addr.id);
        return 1;
    }
    if (peer->dc_drain_sent)
        return sp_error(SPINDLE_EAGAIN,
                        "verbs: peer %u is moving to RC; its DC writes are still in flight",
                        peer->addr.id);
    /* This batch is the peer's last on DC: signal it to learn when it is done. */
    *flags |= VB_POST_FORCE_SIGNAL;
    peer->dc_drain_sent = 1;
    return 0;
}

int vb_dct_post(struct vb_peer *peer, const struct tp_write *writes, unsigned count, unsigned flags,
                uint64_t cookie)
{
    /* Before the RC switch too: DC writes flushed by a broken DCI must not
     * be overtaken by RC writes. */
    int rc = vb_dci_check(peer, peer->ep->dci[peer->dci]);
    if (rc != 0)
        return rc;
    int sw = vb_dc_switch(peer, &flags);
    if (sw < 0)
        return sw;
    if (sw == 1)
        return vb_post_writes((struct tp_peer *)peer, writes, count, flags, cookie);
    struct vb_ep *ep = peer->ep;
    struct vb_sq *sq = ep->dci[peer->dci];
    uint64_t bytes = 0, signaled = 0;
    pthread_mutex_lock(&sq->lock);
    /* Again under the lock: the polling thread may have seen an error since. */
    int n = vb_dci_check(peer, sq);
    if (n == 0)
        n = vb_build_chain(peer, sq, writes, count, flags, cookie);
    rc = n < 0 ? n : vb_dci_emit(ep, peer->dci, n);
    /* Counted under the lock: another peer pinned to this DCI reuses wrs. */
    for (int i = 0; rc == 0 && i < n; i++) {
        bytes += sq->sges[i].length;
        signaled += (sq->wrs[i].send_flags & IBV_SEND_SIGNALED) != 0;
    }
    pthread_mutex_unlock(&sq->lock);
    if (rc != 0) {
        if (flags & VB_POST_FORCE_SIGNAL)
            peer->dc_drain_sent = 0;
        return rc;
    }
    vb_stats_add(ep, (uint64_t)n, bytes, signaled);
    peer->writes += count;
    if (peer->writes > VB_DCT_HOT_WRITES && !peer->rc_thread_started &&
        !atomic_load(&peer->rc_failed)) {
        peer->rc_thread_started =
            pthread_create(&peer->rc_thread, NULL, vb_rc_background, peer) == 0;
    }
    return 0;
}

int vb_dct_ring(struct vb_peer *peer)
{
    struct vb_ep *ep = peer->ep;
    struct vb_sq *sq = ep->dci[peer->dci];
    int rc = vb_dci_check(peer, sq);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&sq->lock);
    rc = vb_dci_check(peer, sq);
    uint64_t posted = atomic_load_explicit(&sq->posted, memory_order_relaxed);
    if (rc == 0 &&
        posted - atomic_load_explicit(&sq->completed, memory_order_acquire) + 1 > VB_SQ_DEPTH)
        rc = sp_error(SPINDLE_EAGAIN, "verbs: DCI %u is full", peer->dci);
    if (rc == 0) {
        struct vb_wrctx *ctx = &sq->ctx[posted % VB_SQ_DEPTH];
        *ctx = (struct vb_wrctx){.peer = peer, .sq = sq, .seq_end = posted + 1};
        /* While the peer drains towards RC, the ring becomes its last DC
         * request (dc_last_seq), so it must be signaled too or the switch
         * would wait for some later signaled request of this DCI. */
        ctx->signaled = posted % VB_SIGNAL_EVERY == VB_SIGNAL_EVERY - 1 || peer->dc_drain_sent;
        struct ibv_send_wr *wr = &sq->wrs[0];
        memset(wr, 0, sizeof *wr);
        wr->wr_id = (uintptr_t)ctx;
        wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr->imm_data = htonl(ep->self_id);
        wr->send_flags = ctx->signaled ? IBV_SEND_SIGNALED : 0;
        rc = vb_dci_emit(ep, peer->dci, 1);
    }
    pthread_mutex_unlock(&sq->lock);
    if (rc == 0) {
        pthread_mutex_lock(&ep->stats_lock);
        ep->stats.wakeups_sent++;
        pthread_mutex_unlock(&ep->stats_lock);
    }
    return rc;
}

#endif
