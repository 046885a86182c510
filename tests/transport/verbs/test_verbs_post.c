/*
 * The verbs backend's logic without an RDMA device (fakes: verbs_fake.h).
 * The data path calls the header-inline verbs (ibv_post_send, ibv_poll_cq,
 * ibv_wr_*), which dispatch through function pointers in struct ibv_context
 * and struct ibv_qp_ex; the control path goes through struct verbs_api.
 * Fakes of both record what the backend asks for, and the tests assert:
 *   - a batch is ONE ibv_post_send (one doorbell) of a chained list, with
 *     the remote address, rkey and lkey of each write, inline flags by size
 *     and adjacent writes merged into one request;
 *   - every VB_SIGNAL_EVERY-th request is signaled (and the last one of a
 *     batch the caller wants reported), no others;
 *   - the send queue never holds more than VB_SQ_DEPTH requests: a batch
 *     that does not fit is refused with SPINDLE_EAGAIN before posting, and
 *     a signaled completion frees every earlier request;
 *   - an error completion reports the peer failed, once, and later posts
 *     to it fail with SPINDLE_EPEERFAILED (T4);
 *   - on the DC path every write carries the peer's DCT number, DC key and
 *     address handle; a hot peer starts a background RC connection, and
 *     once one is ready the peer drains its DC writes (its last DC batch is
 *     signaled, further posts wait) and then moves to its RC queue pair;
 *   - on a DCI shared by two peers, an error completion fails only the
 *     peer whose request failed; once the DCI drained it is reset (RESET,
 *     INIT, RTR, RTS) and the other peer's flushed requests are posted
 *     again in their order, before a DC-to-RC switch; a DCI that cannot be
 *     reset fails its peers;
 *   - registration asks for on-demand paging (not pinned, no pinned bytes)
 *     only for non-pinned regions on an ODP-capable device, and never for
 *     relaxed ordering;
 *   - with no RDMA device at all (this machine), opening the transport
 *     fails with SPINDLE_ENODEV and a message that says so.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <spindle/error.h>
#include <spindle/group.h>

#include "transport/transport.h"
#include "transport/verbs/verbs_impl.h"

#include "transport/verbs/verbs_fake.h"

extern const struct tp_ops tp_verbs_ops;

static struct rdma_event_channel *fake_create_event_channel(void)
{
    __atomic_fetch_add(&rec.cm_channels, 1, __ATOMIC_SEQ_CST);
    errno = ENODEV;
    return NULL;
}

static struct verbs_api fake_api;

/* ---- a fake endpoint with one peer ------------------------------------------ */

struct fixture {
    struct vb_ep ep;
    struct vb_peer peer;
    struct vb_sq *rc;
    struct vb_sq *dci;
    uint8_t local[8192];
    struct vb_mr mr;
    struct vb_rmr rmr;
    struct ibv_ah ah;
};

static struct vb_sq *new_sq(struct ibv_qp *qp, uint32_t max_inline)
{
    struct vb_sq *sq = calloc(1, sizeof *sq);
    assert_non_null(sq);
    sq->qp = qp;
    sq->max_inline = max_inline;
    atomic_init(&sq->posted, 0);
    atomic_init(&sq->completed, 0);
    atomic_init(&sq->broken, VB_SQ_OK);
    pthread_mutex_init(&sq->lock, NULL);
    return sq;
}

static int setup(void **state)
{
    memset(&rec, 0, sizeof rec);
    fake_ctx.ops.post_send = fake_post_send;
    fake_ctx.ops.poll_cq = fake_poll_cq;
    fake_api = *verbs_api_default();
    fake_api.reg_mr = fake_reg_mr;
    fake_api.dereg_mr = fake_dereg_mr;
    fake_api.advise_mr = fake_advise_mr;
    fake_api.rdma_create_event_channel = fake_create_event_channel;
    fake_api.modify_qp = fake_modify_qp;
    memset(&modifies, 0, sizeof modifies);
    verbs_api_set(&fake_api);
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->ep.send_cq = &fake_send_cq;
    f->ep.recv_cq = &fake_recv_cq;
    f->ep.timeout_ms = 100;
    snprintf(f->ep.dev_name, sizeof f->ep.dev_name, "fake0");
    pthread_mutex_init(&f->ep.stats_lock, NULL);
    pthread_mutex_init(&f->ep.conn_lock, NULL);
    f->rc = new_sq(&fake_rc_qp, 64);
    f->peer.ep = &f->ep;
    f->peer.sq = f->rc;
    f->peer.addr.id = 7;
    atomic_init(&f->peer.path, VB_PATH_RC);
    f->mr = (struct vb_mr){.mr = &fake_mr, .addr = f->local, .length = sizeof f->local};
    f->rmr = (struct vb_rmr){.addr = 0x7f0000100000ull, .length = 1 << 20, .rkey = 0xabcd};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    if (f->peer.rc_thread_started)
        pthread_join(f->peer.rc_thread, NULL);
    free(f->rc);
    free(f->dci);
    free(f);
    verbs_api_set(NULL);
    return 0;
}

static struct tp_write write_at(struct fixture *f, size_t local_offset, uint64_t remote_offset,
                                uint32_t length)
{
    return (struct tp_write){.local_mr = (struct tp_mr *)&f->mr,
                             .local = f->local + local_offset,
                             .remote = (struct tp_rmr *)&f->rmr,
                             .remote_offset = remote_offset,
                             .length = length};
}

static int post(struct fixture *f, const struct tp_write *w, unsigned n, unsigned flags)
{
    return tp_verbs_ops.post_writes((struct tp_peer *)&f->peer, w, n, flags, 99);
}

/* ---- tests ----------------------------------------------------------------- */

static void test_batch_is_one_chained_post(void **state)
{
    struct fixture *f = *state;
    struct tp_write w[3] = {write_at(f, 0, 4096, 8), write_at(f, 512, 8192, 200),
                            write_at(f, 1024, 64, 16)};
    assert_int_equal(post(f, w, 3, TP_POST_SIGNALED), 0);
    assert_int_equal(rec.post_calls, 1); /* one doorbell for the batch */
    assert_int_equal(rec.chain_lengths[0], 3);
    const uint64_t remote[3] = {4096, 8192, 64};
    const uint32_t length[3] = {8, 200, 16};
    for (unsigned i = 0; i < 3; i++) {
        const struct recorded_wr *r = &rec.wrs[i];
        assert_int_equal(r->opcode, IBV_WR_RDMA_WRITE);
        assert_int_equal(r->remote_addr, f->rmr.addr + remote[i]);
        assert_int_equal(r->rkey, 0xabcd);
        assert_int_equal(r->lkey, 0x1111);
        assert_int_equal(r->length, length[i]);
        assert_int_equal(r->local_addr, (uintptr_t)w[i].local);
        /* Inline up to the queue's max_inline (64 here): 8 and 16, not 200. */
        assert_int_equal((r->flags & IBV_SEND_INLINE) != 0, length[i] <= 64);
        /* Only the last, which the caller asked to be reported, is signaled. */
        assert_int_equal((r->flags & IBV_SEND_SIGNALED) != 0, i == 2);
    }
    assert_int_equal(atomic_load(&f->rc->posted), 3);
}

static void test_adjacent_writes_are_merged(void **state)
{
    struct fixture *f = *state;
    /* [0,100) then [100,164) locally and remotely: one request of 164 bytes;
     * the third is contiguous locally but not remotely: its own request. */
    struct tp_write w[3] = {write_at(f, 0, 1000, 100), write_at(f, 100, 1100, 64),
                            write_at(f, 164, 5000, 8)};
    assert_int_equal(post(f, w, 3, 0), 0);
    assert_int_equal(rec.post_calls, 1);
    assert_int_equal(rec.chain_lengths[0], 2);
    assert_int_equal(rec.wrs[0].length, 164);
    assert_int_equal(rec.wrs[0].remote_addr, f->rmr.addr + 1000);
    assert_int_equal(rec.wrs[0].flags & IBV_SEND_INLINE, 0); /* 164 > 64 after merging */
    assert_int_equal(rec.wrs[1].length, 8);
    assert_int_equal(rec.wrs[1].remote_addr, f->rmr.addr + 5000);
}

static void test_every_nth_request_is_signaled(void **state)
{
    struct fixture *f = *state;
    unsigned signaled = 0;
    for (unsigned i = 0; i < 3 * VB_SIGNAL_EVERY; i++) {
        struct tp_write w = write_at(f, 0, 8 * (uint64_t)i, 8);
        assert_int_equal(post(f, &w, 1, 0), 0);
        int want = i % VB_SIGNAL_EVERY == VB_SIGNAL_EVERY - 1;
        assert_int_equal((rec.wrs[i].flags & IBV_SEND_SIGNALED) != 0, want);
        signaled += (unsigned)want;
    }
    assert_int_equal(signaled, 3);
    assert_int_equal(rec.post_calls, 3 * VB_SIGNAL_EVERY);
    struct tp_stats stats;
    memset(&stats, 0, sizeof stats);
    tp_verbs_ops.stats((struct tp_endpoint *)&f->ep, &stats);
    assert_int_equal(stats.writes_posted, 3 * VB_SIGNAL_EVERY);
}

static void complete(uint64_t wr_id, enum ibv_wc_status status)
{
    rec.pending_wc[rec.num_wc++] = (struct ibv_wc){.wr_id = wr_id, .status = status};
}

static void test_send_queue_never_overflows(void **state)
{
    struct fixture *f = *state;
    /* Fill the queue in batches of 32 non-adjacent writes. */
    struct tp_write w[32];
    for (unsigned round = 0; round < VB_SQ_DEPTH / 32; round++) {
        for (unsigned i = 0; i < 32; i++)
            w[i] = write_at(f, 0, 64 * (uint64_t)(round * 32 + i), 8);
        assert_int_equal(post(f, w, 32, 0), 0);
    }
    assert_int_equal(atomic_load(&f->rc->posted), VB_SQ_DEPTH);
    unsigned calls = rec.post_calls;
    /* Full: the next batch is refused before anything reaches the QP. */
    assert_int_equal(post(f, w, 1, 0), SPINDLE_EAGAIN);
    assert_int_equal(rec.post_calls, calls);
    /* The NIC completes the second signaled request: everything up to it
     * is reclaimed, so exactly that many fit again. */
    uint64_t id = rec.wrs[2 * VB_SIGNAL_EVERY - 1].wr_id;
    assert_true(rec.wrs[2 * VB_SIGNAL_EVERY - 1].flags & IBV_SEND_SIGNALED);
    complete(id, IBV_WC_SUCCESS);
    struct tp_event ev[8];
    assert_int_equal(tp_verbs_ops.poll((struct tp_endpoint *)&f->ep, ev, 8), 0);
    assert_int_equal(atomic_load(&f->rc->completed), 2 * VB_SIGNAL_EVERY);
    for (unsigned i = 0; i < 2 * VB_SIGNAL_EVERY; i++)
        w[i % 32] = write_at(f, 0, 64 * (uint64_t)i, 8);
    for (unsigned i = 0; i < 2 * VB_SIGNAL_EVERY / 32; i++)
        assert_int_equal(post(f, w, 32, 0), 0);
    assert_int_equal(post(f, w, 1, 0), SPINDLE_EAGAIN);
    assert_int_equal(atomic_load(&f->rc->posted) - atomic_load(&f->rc->completed), VB_SQ_DEPTH);
}

/* A batch builds at most VB_BATCH_MAX_WRS requests, and a batch of that size
 * fits even behind the longest unsignaled tail (which no completion can
 * reclaim yet), so "poll, then retry" never spins forever. */
static void test_largest_batch_fits_behind_unsignaled_tail(void **state)
{
    struct fixture *f = *state;
    static struct tp_write w[VB_BATCH_MAX_WRS + 1];
    /* The SST's largest batch (256 writes) plus a doorbell must fit. */
    assert_true(VB_BATCH_MAX_WRS >= 256 + 1);
    for (unsigned i = 0; i <= VB_BATCH_MAX_WRS; i++)
        w[i] = write_at(f, 0, 64 * (uint64_t)i, 8); /* same source: never merged */
    /* One request too many: refused before anything reaches the QP. */
    assert_int_equal(post(f, w, VB_BATCH_MAX_WRS + 1, 0), SPINDLE_EINVAL);
    assert_int_equal(rec.post_calls, 0);
    assert_int_equal(atomic_load(&f->rc->posted), 0);
    /* The longest unsignaled tail: VB_SIGNAL_EVERY-1 requests, none signaled. */
    for (unsigned i = 0; i < VB_SIGNAL_EVERY - 1; i++)
        assert_int_equal(post(f, &w[i], 1, 0), 0);
    for (unsigned i = 0; i < VB_SIGNAL_EVERY - 1; i++)
        assert_int_equal(rec.wrs[i].flags & IBV_SEND_SIGNALED, 0);
    /* The largest batch still fits: one chained post, queue exactly full. */
    unsigned calls = rec.post_calls;
    assert_int_equal(post(f, w, VB_BATCH_MAX_WRS, 0), 0);
    assert_int_equal(rec.post_calls, calls + 1);
    assert_int_equal(rec.chain_lengths[calls], VB_BATCH_MAX_WRS);
    assert_int_equal(atomic_load(&f->rc->posted), VB_SQ_DEPTH);
    assert_int_equal(post(f, w, 1, 0), SPINDLE_EAGAIN);
}

static void test_reported_completion_and_failed_peer(void **state)
{
    struct fixture *f = *state;
    struct tp_write w = write_at(f, 0, 0, 8);
    assert_int_equal(post(f, &w, 1, TP_POST_SIGNALED), 0);
    complete(rec.wrs[0].wr_id, IBV_WC_SUCCESS);
    struct tp_event ev[4];
    assert_int_equal(tp_verbs_ops.poll((struct tp_endpoint *)&f->ep, ev, 4), 1);
    assert_int_equal(ev[0].type, TP_EVENT_WRITE_DONE);
    assert_int_equal(ev[0].cookie, 99);
    /* Two requests fail (retry exceeded, then flushed): one failure event. */
    assert_int_equal(post(f, &w, 1, TP_POST_SIGNALED), 0);
    assert_int_equal(post(f, &w, 1, TP_POST_SIGNALED), 0);
    complete(rec.wrs[1].wr_id, IBV_WC_RETRY_EXC_ERR);
    complete(rec.wrs[2].wr_id, IBV_WC_WR_FLUSH_ERR);
    assert_int_equal(tp_verbs_ops.poll((struct tp_endpoint *)&f->ep, ev, 4), 1);
    assert_int_equal(ev[0].type, TP_EVENT_PEER_FAILED);
    assert_ptr_equal(ev[0].peer, (struct tp_peer *)&f->peer);
    assert_int_equal(post(f, &w, 1, 0), SPINDLE_EPEERFAILED);
    assert_non_null(strstr(spindle_errmsg(), "peer 7"));
    assert_int_equal(tp_verbs_ops.doorbell_ring((struct tp_peer *)&f->peer), SPINDLE_EPEERFAILED);
}

/* A chain cut short by ibv_post_send leaves the queue in an unknown state:
 * the peer is failed, and reported once by the next poll although no
 * completion names it. */
static void test_mid_chain_failure_is_reported(void **state)
{
    struct fixture *f = *state;
    f->ep.peers = &f->peer;
    struct tp_write w[2] = {write_at(f, 0, 0, 8), write_at(f, 0, 64, 8)}; /* not mergeable */
    fail_mid_chain = 1;
    assert_int_equal(post(f, w, 2, 0), SPINDLE_EPEERFAILED);
    assert_non_null(strstr(spindle_errmsg(), "mid-chain"));
    struct tp_event ev[4];
    assert_int_equal(tp_verbs_ops.poll((struct tp_endpoint *)&f->ep, ev, 4), 1);
    assert_int_equal(ev[0].type, TP_EVENT_PEER_FAILED);
    assert_ptr_equal(ev[0].peer, (struct tp_peer *)&f->peer);
    assert_int_equal(tp_verbs_ops.poll((struct tp_endpoint *)&f->ep, ev, 4), 0);
    assert_int_equal(post(f, w, 1, 0), SPINDLE_EPEERFAILED);
    assert_int_equal(tp_verbs_ops.peer_state((struct tp_peer *)&f->peer), SPINDLE_EPEERFAILED);
    f->ep.peers = NULL;
}

static void test_doorbell_is_write_with_immediate(void **state)
{
    struct fixture *f = *state;
    f->ep.self_id = 3;
    assert_int_equal(tp_verbs_ops.doorbell_ring((struct tp_peer *)&f->peer), 0);
    assert_int_equal(rec.post_calls, 1);
    assert_int_equal(rec.wrs[0].opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
    assert_int_equal(rec.wrs[0].length, 0);
    assert_int_equal(atomic_load(&f->rc->posted), 1);
}

#ifdef SPINDLE_HAVE_MLX5DV
static struct ibv_qp fake_dci_qp = {.context = &fake_ctx, .qp_num = 0x77};

/* Puts the fixture's peer on the DC path through a one-DCI pool. */
static void use_dc(struct fixture *f)
{
    f->dci = new_sq(&fake_dci_qp, 64);
    f->dci->is_dci = 1;
    f->dci->dci_index = 0;
    f->ep.port_num = 1;
    f->ep.mtu = IBV_MTU_2048;
    for (unsigned i = 0; i < VB_DCI_POOL; i++) {
        f->ep.dci[i] = f->dci;
        f->ep.dci_ex[i] = &fake_dci_ex;
        f->ep.dci_mlx[i] = &fake_dci_mlx;
    }
    f->ep.dct_enabled = 1;
    f->peer.ah = &f->ah;
    f->peer.addr.dctn = 0x4242;
    f->peer.addr.dc_key = FAKE_DC_KEY;
    snprintf(f->peer.addr.host, sizeof f->peer.addr.host, "127.0.0.1");
    f->peer.addr.port = 9;
    f->peer.dci = 0;
    f->peer.sq = NULL;
    atomic_store(&f->peer.path, VB_PATH_DC);
}

static void test_dc_writes_carry_the_peer_address(void **state)
{
    struct fixture *f = *state;
    use_dc(f);
    struct tp_write w[2] = {write_at(f, 0, 0, 8), write_at(f, 256, 4096, 300)};
    assert_int_equal(post(f, w, 2, 0), 0);
    assert_int_equal(rec.post_calls, 0);   /* not through ibv_post_send */
    assert_int_equal(rec.dc_starts, 1);    /* one wr_start ... */
    assert_int_equal(rec.dc_completes, 1); /* ... one wr_complete: one doorbell */
    assert_int_equal(rec.num_wrs, 2);
    for (unsigned i = 0; i < 2; i++) {
        assert_ptr_equal(rec.wrs[i].ah, &f->ah);
        assert_int_equal(rec.wrs[i].dctn, 0x4242);
        assert_int_equal(rec.wrs[i].dc_key, FAKE_DC_KEY);
        assert_int_equal(rec.wrs[i].rkey, 0xabcd);
    }
    assert_int_equal(rec.wrs[0].remote_addr, f->rmr.addr);
    assert_int_equal(rec.wrs[1].length, 300);
    assert_int_equal(rec.wrs[1].lkey, 0x1111); /* 300 > 64: gathered, not inline */
    assert_int_equal(atomic_load(&f->dci->posted), 2);
}

static void test_hot_dc_peer_moves_to_rc(void **state)
{
    struct fixture *f = *state;
    use_dc(f);
    struct tp_write w = write_at(f, 0, 0, 8);
    /* Enough writes to make the peer hot: a background RC connection is
     * attempted (the fake CM fails it, so the peer stays on DC). */
    for (unsigned i = 0; i <= VB_DCT_HOT_WRITES; i++) {
        assert_int_equal(post(f, &w, 1, 0), 0);
        if (atomic_load(&f->dci->posted) - atomic_load(&f->dci->completed) >= VB_SQ_DEPTH - 1)
            atomic_store(&f->dci->completed, atomic_load(&f->dci->posted));
    }
    assert_true(f->peer.rc_thread_started);
    pthread_join(f->peer.rc_thread, NULL);
    f->peer.rc_thread_started = 0;
    assert_true(atomic_load(&rec.cm_channels) >= 1);
    assert_int_equal(atomic_load(&f->peer.rc_failed), 1);
    assert_int_equal(atomic_load(&f->peer.path), VB_PATH_DC);

    /* Now an RC queue pair is ready: the next DC batch is the last one and
     * is signaled; while it is in flight the peer cannot post. */
    f->peer.sq = f->rc;
    atomic_store(&f->peer.rc_ready, 1);
    unsigned before = rec.num_wrs;
    assert_int_equal(post(f, &w, 1, 0), 0);
    assert_true(rec.wrs[before % MAX_RECORDED].flags & IBV_SEND_SIGNALED);
    assert_int_equal(post(f, &w, 1, 0), SPINDLE_EAGAIN);
    /* A doorbell rung while draining is then the last DC request: it is
     * signaled too, and the switch waits for it. */
    before = rec.num_wrs;
    assert_int_equal(tp_verbs_ops.doorbell_ring((struct tp_peer *)&f->peer), 0);
    assert_int_equal(rec.num_wrs, before + 1);
    assert_int_equal(rec.wrs[before % MAX_RECORDED].opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
    assert_true(rec.wrs[before % MAX_RECORDED].flags & IBV_SEND_SIGNALED);
    atomic_store(&f->dci->completed, atomic_load(&f->dci->posted) - 1);
    assert_int_equal(post(f, &w, 1, 0), SPINDLE_EAGAIN);
    /* Its completion arrives: the peer moves to RC and posts there. */
    atomic_store(&f->dci->completed, atomic_load(&f->dci->posted));
    assert_int_equal(post(f, &w, 1, 0), 0);
    assert_int_equal(atomic_load(&f->peer.path), VB_PATH_RC);
    assert_int_equal(rec.post_calls, 1);
    assert_int_equal(atomic_load(&f->rc->posted), 1);
}

/* A second peer pinned to the fixture's DCI, with its own address. */
static struct vb_peer *second_dc_peer(struct fixture *f, struct ibv_ah *ah)
{
    struct vb_peer *other = calloc(1, sizeof *other);
    assert_non_null(other);
    *other = (struct vb_peer){.ep = &f->ep, .ah = ah, .dci = 0};
    other->addr.id = 8;
    other->addr.dctn = 0x4343;
    other->addr.dc_key = FAKE_DC_KEY;
    snprintf(other->addr.host, sizeof other->addr.host, "10.0.0.8");
    atomic_init(&other->path, VB_PATH_DC);
    f->peer.next = other;
    f->ep.peers = &f->peer;
    return other;
}

/* Peer A (the fixture's) and peer B share a DCI. A's write fails with a
 * remote error, B's queued writes are flushed: A is reported failed once, B
 * is not failed, the DCI goes RESET -> INIT -> RTR -> RTS with the
 * attributes it was created with, B's flushed requests are posted again in
 * their order (data before guard) and B's later posts succeed. */
static void test_dci_reset_reposts_flushed_writes_of_healthy_peers(void **state)
{
    struct fixture *f = *state;
    use_dc(f);
    struct ibv_ah ah_b;
    struct vb_peer *b = second_dc_peer(f, &ah_b);
    struct tp_peer *tb = (struct tp_peer *)b;
    struct tp_endpoint *ep = (struct tp_endpoint *)&f->ep;
    struct tp_write wa = write_at(f, 0, 0, 8);
    struct tp_write data_guard[2] = {write_at(f, 512, 4096, 100), write_at(f, 1024, 8192, 8)};
    struct tp_write wb = write_at(f, 2048, 12288, 16);
    uint8_t guard_as_posted[8], b_as_posted[16];
    memset(guard_as_posted, 0x11, sizeof guard_as_posted);
    memset(b_as_posted, 0x22, sizeof b_as_posted);
    memcpy((uint8_t *)f->local + 1024, guard_as_posted, 8);
    memcpy((uint8_t *)f->local + 2048, b_as_posted, 16);
    /* seq 0: A; 1, 2: B data, guard (reported); 3: A; 4: B; 5: B doorbell */
    assert_int_equal(post(f, &wa, 1, 0), 0);
    assert_int_equal(tp_verbs_ops.post_writes(tb, data_guard, 2, TP_POST_SIGNALED, 5), 0);
    assert_int_equal(post(f, &wa, 1, 0), 0);
    assert_int_equal(tp_verbs_ops.post_writes(tb, &wb, 1, 0, 6), 0);
    assert_int_equal(tp_verbs_ops.doorbell_ring(tb), 0);
    /* The sender moves on: its counters are newer than what was posted,
     * for data that will be queued behind the re-post. */
    memset((uint8_t *)f->local + 1024, 0x99, 8);
    memset((uint8_t *)f->local + 2048, 0x99, 16);
    assert_int_equal(rec.num_wrs, 6);
    assert_int_equal(atomic_load(&f->dci->posted), 6);

    /* A's request fails; the NIC flushes the rest, B's among them. */
    complete(rec.wrs[0].wr_id, IBV_WC_REM_ACCESS_ERR);
    for (unsigned i = 1; i < 4; i++)
        complete(rec.wrs[i].wr_id, IBV_WC_WR_FLUSH_ERR);
    struct tp_event ev[8];
    assert_int_equal(tp_verbs_ops.poll(ep, ev, 8), 1);
    assert_int_equal(ev[0].type, TP_EVENT_PEER_FAILED);
    assert_ptr_equal(ev[0].peer, (struct tp_peer *)&f->peer);
    assert_int_equal(atomic_load(&f->dci->broken), VB_SQ_DRAINING);
    /* Not drained yet: no reset, and B waits rather than overtake its
     * flushed requests. */
    assert_int_equal(modifies.count, 0);
    unsigned starts = rec.dc_starts;
    assert_int_equal(tp_verbs_ops.post_writes(tb, &wb, 1, 0, 6), SPINDLE_EAGAIN);
    assert_non_null(strstr(spindle_errmsg(), "being reset"));
    assert_int_equal(tp_verbs_ops.doorbell_ring(tb), SPINDLE_EAGAIN);
    assert_int_equal(rec.dc_starts, starts);

    /* The last flushes: the DCI has drained, is reset, B's requests go again. */
    complete(rec.wrs[4].wr_id, IBV_WC_WR_FLUSH_ERR);
    complete(rec.wrs[5].wr_id, IBV_WC_WR_FLUSH_ERR);
    assert_int_equal(tp_verbs_ops.poll(ep, ev, 8), 0); /* B is not reported */
    assert_int_equal(atomic_load(&f->peer.failed), 1);
    assert_int_equal(atomic_load(&b->failed), 0);
    assert_int_equal(atomic_load(&b->reported), 0);
    assert_int_equal(atomic_load(&f->dci->broken), VB_SQ_OK);
    assert_int_equal(assert_dci_transitions(0, &fake_dci_qp, 1, 1, IBV_MTU_2048), 4);
    assert_int_equal(modifies.count, 4);
    assert_int_equal(fake_dci_qp.state, IBV_QPS_RTS);

    /* One chain of B's four requests, in their order; A's is dropped. */
    assert_int_equal(rec.dc_starts, starts + 1);
    assert_int_equal(rec.dc_completes, starts + 1);
    assert_int_equal(rec.num_wrs, 10);
    const struct {
        enum ibv_wr_opcode opcode;
        uint64_t remote;
        uint32_t length;
        uint64_t local;
    } want[4] = {{IBV_WR_RDMA_WRITE, f->rmr.addr + 4096, 100, (uintptr_t)f->local + 512},
                 {IBV_WR_RDMA_WRITE, f->rmr.addr + 8192, 8, (uintptr_t)f->local + 1024},
                 {IBV_WR_RDMA_WRITE, f->rmr.addr + 12288, 16, (uintptr_t)f->local + 2048},
                 {IBV_WR_RDMA_WRITE_WITH_IMM, 0, 0, 0}};
    for (unsigned i = 0; i < 4; i++) {
        const struct recorded_wr *r = &rec.wrs[6 + i];
        assert_int_equal(r->opcode, want[i].opcode);
        assert_int_equal(r->remote_addr, want[i].remote);
        assert_int_equal(r->length, want[i].length);
        if (want[i].length > 64) /* gathered: from its source */
            assert_int_equal(r->local_addr, want[i].local);
        assert_ptr_equal(r->ah, &ah_b);
        assert_int_equal(r->dctn, 0x4343);
        assert_int_equal(r->dc_key, FAKE_DC_KEY);
        if (want[i].length > 0)
            assert_int_equal(r->rkey, 0xabcd);
        if (want[i].length > 0 && want[i].length <= 64)
            assert_true(r->flags & IBV_SEND_INLINE);
        const struct vb_wrctx *ctx = (const struct vb_wrctx *)(uintptr_t)r->wr_id;
        assert_ptr_equal(ctx->peer, b);
        assert_int_equal(ctx->seq_end, 7 + i);
    }
    /* Inline writes go again with the bytes first posted, not the newer
     * ones: a newer guard would overtake the data queued behind it. */
    assert_memory_equal(rec.wrs[7].inline_bytes, guard_as_posted, 8);
    assert_memory_equal(rec.wrs[8].inline_bytes, b_as_posted, 16);
    /* The guard still reports its batch (cookie 5), and is signaled. */
    assert_true(rec.wrs[7].flags & IBV_SEND_SIGNALED);
    /* Accounting: everything before the reset completed; four outstanding. */
    assert_int_equal(atomic_load(&f->dci->completed), 6);
    assert_int_equal(atomic_load(&f->dci->posted), 10);
    assert_int_equal(b->dc_last_seq, 10);
    complete(rec.wrs[7].wr_id, IBV_WC_SUCCESS);
    assert_int_equal(tp_verbs_ops.poll(ep, ev, 8), 1);
    assert_int_equal(ev[0].type, TP_EVENT_WRITE_DONE);
    assert_ptr_equal(ev[0].peer, tb);
    assert_int_equal(ev[0].cookie, 5);
    assert_int_equal(atomic_load(&f->dci->completed), 8);

    /* B posts again through the reset DCI; A stays failed. */
    assert_int_equal(tp_verbs_ops.post_writes(tb, &wb, 1, 0, 6), 0);
    assert_int_equal(rec.num_wrs, 11);
    assert_ptr_equal(rec.wrs[10].ah, &ah_b);
    assert_int_equal(rec.wrs[10].remote_addr, f->rmr.addr + 12288);
    assert_int_equal(atomic_load(&f->dci->posted), 11);
    assert_int_equal(post(f, &wa, 1, 0), SPINDLE_EPEERFAILED);
    assert_int_equal(tp_verbs_ops.poll(ep, ev, 8), 0); /* A was reported once */
    f->ep.peers = NULL;
    f->peer.next = NULL;
    free(b);
}

/* A peer draining from DC to RC whose last DC batch was flushed by another
 * peer's failure moves to RC only after its re-posted DC requests have
 * completed: no RC write overtakes them (T2). */
static void test_dci_reset_keeps_the_dc_to_rc_drain_order(void **state)
{
    struct fixture *f = *state;
    use_dc(f);
    struct ibv_ah ah_a;
    struct vb_peer *a = second_dc_peer(f, &ah_a); /* fails; the fixture's peer drains */
    struct tp_endpoint *ep = (struct tp_endpoint *)&f->ep;
    struct tp_write w = write_at(f, 0, 0, 8);
    assert_int_equal(tp_verbs_ops.post_writes((struct tp_peer *)a, &w, 1, 0, 1), 0); /* 0 */
    assert_int_equal(post(f, &w, 1, 0), 0);                                          /* 1 */
    f->peer.sq = f->rc;
    atomic_store(&f->peer.rc_ready, 1);
    assert_int_equal(post(f, &w, 1, 0), 0); /* 2: the last DC batch, signaled */
    assert_true(rec.wrs[2].flags & IBV_SEND_SIGNALED);
    assert_int_equal(f->peer.dc_last_seq, 3);
    complete(rec.wrs[0].wr_id, IBV_WC_REM_ACCESS_ERR);
    complete(rec.wrs[1].wr_id, IBV_WC_WR_FLUSH_ERR);
    complete(rec.wrs[2].wr_id, IBV_WC_WR_FLUSH_ERR);
    struct tp_event ev[8];
    assert_int_equal(tp_verbs_ops.poll(ep, ev, 8), 1);
    assert_ptr_equal(ev[0].peer, (struct tp_peer *)a);
    /* Re-posted at 3 and 4; everything before counts as completed. */
    assert_int_equal(rec.num_wrs, 5);
    assert_true(rec.wrs[4].flags & IBV_SEND_SIGNALED);
    assert_int_equal(atomic_load(&f->dci->completed), 3);
    assert_int_equal(f->peer.dc_last_seq, 5);
    assert_int_equal(post(f, &w, 1, 0), SPINDLE_EAGAIN);
    assert_int_equal(atomic_load(&f->peer.path), VB_PATH_DC);
    assert_int_equal(rec.post_calls, 0); /* nothing on the RC queue pair */
    complete(rec.wrs[4].wr_id, IBV_WC_SUCCESS);
    assert_int_equal(tp_verbs_ops.poll(ep, ev, 8), 0);
    assert_int_equal(post(f, &w, 1, 0), 0);
    assert_int_equal(atomic_load(&f->peer.path), VB_PATH_RC);
    assert_int_equal(rec.post_calls, 1);
    f->ep.peers = NULL;
    f->peer.next = NULL;
    free(a);
}

/* If the DCI cannot be reset, the peers whose requests were flushed are
 * failed (their writes are lost) and reported once; later posts of peers
 * pinned to the dead DCI fail instead of waiting for ever. */
static void test_failed_dci_reset_fails_the_flushed_peers(void **state)
{
    struct fixture *f = *state;
    use_dc(f);
    struct ibv_ah ah_b;
    struct vb_peer *b = second_dc_peer(f, &ah_b);
    struct tp_endpoint *ep = (struct tp_endpoint *)&f->ep;
    struct tp_write w = write_at(f, 0, 0, 8);
    assert_int_equal(post(f, &w, 1, 0), 0);
    assert_int_equal(tp_verbs_ops.post_writes((struct tp_peer *)b, &w, 1, 0, 1), 0);
    modifies.fail_state = IBV_QPS_RESET + 1;
    complete(rec.wrs[0].wr_id, IBV_WC_RETRY_EXC_ERR);
    complete(rec.wrs[1].wr_id, IBV_WC_WR_FLUSH_ERR);
    struct tp_event ev[8];
    assert_int_equal(tp_verbs_ops.poll(ep, ev, 8), 2);
    assert_ptr_equal(ev[0].peer, (struct tp_peer *)&f->peer);
    assert_int_equal(ev[1].type, TP_EVENT_PEER_FAILED);
    assert_ptr_equal(ev[1].peer, (struct tp_peer *)b);
    assert_int_equal(atomic_load(&f->dci->broken), VB_SQ_DEAD);
    assert_int_equal(atomic_load(&f->dci->completed), 2);
    unsigned starts = rec.dc_starts;
    assert_int_equal(tp_verbs_ops.post_writes((struct tp_peer *)b, &w, 1, 0, 1),
                     SPINDLE_EPEERFAILED);
    assert_int_equal(rec.dc_starts, starts);
    assert_int_equal(tp_verbs_ops.poll(ep, ev, 8), 0);
    /* A third peer on the dead DCI is failed by its first post, and reported. */
    struct vb_peer *c = calloc(1, sizeof *c);
    assert_non_null(c);
    *c = (struct vb_peer){.ep = &f->ep, .ah = &ah_b, .dci = 0};
    c->addr.id = 9;
    atomic_init(&c->path, VB_PATH_DC);
    b->next = c;
    assert_int_equal(tp_verbs_ops.post_writes((struct tp_peer *)c, &w, 1, 0, 1),
                     SPINDLE_EPEERFAILED);
    assert_non_null(strstr(spindle_errmsg(), "could not be reset"));
    assert_int_equal(tp_verbs_ops.doorbell_ring((struct tp_peer *)c), SPINDLE_EPEERFAILED);
    assert_int_equal(rec.dc_starts, starts);
    assert_int_equal(tp_verbs_ops.poll(ep, ev, 8), 1);
    assert_ptr_equal(ev[0].peer, (struct tp_peer *)c);
    f->ep.peers = NULL;
    f->peer.next = NULL;
    free(b);
    free(c);
}
#endif

/* ---- joining members: DC addressing from the descriptor, RC fallback ------- */

static unsigned ahs_created, ahs_destroyed, qps_created;
static struct ibv_ah fake_ahs[16];
static struct ibv_ah *fake_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
    (void)pd;
    (void)attr;
    return &fake_ahs[ahs_created++ % 16];
}
static int fake_destroy_ah(struct ibv_ah *ah)
{
    (void)ah;
    ahs_destroyed++;
    return 0;
}
static struct ibv_qp *fake_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
    (void)pd;
    (void)attr;
    qps_created++;
    errno = ENODEV;
    return NULL;
}

/* Connects the fixture's endpoint to member id, whose descriptor advertises
 * a DCT; returns the connect() result and the peer in *out. */
static int connect_member(struct fixture *f, uint32_t id, struct vb_peer **out)
{
    struct vb_addr addr = {.port = 9,
                           .id = id,
                           .nonce =
                               id * 0x9e3779b97f4a7c15ull, /* varied bytes, like a random nonce */
                           .has_dct = 1,
                           .port_num = 1,
                           .lid = (uint16_t)(100 + id),
                           .dctn = 0x1000 + id,
                           .dc_key = FAKE_DC_KEY};
    snprintf(addr.host, sizeof addr.host, "10.0.0.%u", id);
    struct tp_desc desc;
    assert_int_equal(vb_addr_encode(&addr, &desc), 0);
    struct tp_peer *peer = NULL;
    int rc = tp_verbs_ops.connect((struct tp_endpoint *)&f->ep, &desc, 100, &peer);
    *out = (struct vb_peer *)peer;
    return rc;
}

static void free_connected_peers(struct fixture *f)
{
    while (f->ep.peers != NULL) {
        struct vb_peer *next = f->ep.peers->next;
        vb_dct_peer_fini(f->ep.peers);
        free(f->ep.peers);
        f->ep.peers = next;
    }
    f->ep.peer_count = 0;
}

#ifdef SPINDLE_HAVE_MLX5DV
static struct ibv_qp *fake_dv_create_qp(struct ibv_context *context,
                                        struct ibv_qp_init_attr_ex *attr,
                                        struct mlx5dv_qp_init_attr *dv)
{
    (void)context;
    (void)attr;
    (void)dv;
    qps_created++;
    errno = ENODEV;
    return NULL;
}

/* A new member is written to from its descriptor alone (an address handle,
 * no QP, no connection), each peer's writes stay on one DCI of the pool and
 * carry that peer's DCT number, key and address handle. */
static void test_new_member_is_written_through_its_pinned_dci(void **state)
{
    struct fixture *f = *state;
    ahs_created = ahs_destroyed = qps_created = 0;
    fake_api.create_ah = fake_create_ah;
    fake_api.destroy_ah = fake_destroy_ah;
    fake_api.create_qp = fake_create_qp;
    fake_api.mlx5dv_create_qp = fake_dv_create_qp;
    struct vb_sq *pool[VB_DCI_POOL];
    for (unsigned i = 0; i < VB_DCI_POOL; i++) {
        pool[i] = new_sq(NULL, 64);
        f->ep.dci[i] = pool[i];
        f->ep.dci_ex[i] = &fake_dci_ex;
        f->ep.dci_mlx[i] = &fake_dci_mlx;
    }
    f->ep.dct_enabled = 1;

    enum { MEMBERS = 8 };
    struct vb_peer *peers[MEMBERS];
    unsigned used = 0; /* bit i: some peer is pinned to DCI i */
    for (unsigned m = 0; m < MEMBERS; m++) {
        assert_int_equal(connect_member(f, m + 1, &peers[m]), 0);
        assert_int_equal(atomic_load(&peers[m]->path), VB_PATH_DC);
        assert_null(peers[m]->sq);
        assert_true(peers[m]->dci < VB_DCI_POOL);
        used |= 1u << peers[m]->dci;
    }
    /* No queue pair and no RDMA CM connection on the join path. */
    assert_int_equal(qps_created, 0);
    assert_int_equal(atomic_load(&rec.cm_channels), 0);
    assert_int_equal(ahs_created, MEMBERS);
    assert_true(used & (used - 1)); /* the peers spread over more than one DCI */

    /* Two peers on different DCIs, posted to alternately. */
    struct vb_peer *a = peers[0], *b = NULL;
    for (unsigned m = 1; m < MEMBERS && b == NULL; m++)
        if (peers[m]->dci != a->dci)
            b = peers[m];
    assert_non_null(b);
    struct tp_write wa[2] = {write_at(f, 0, 0, 8), write_at(f, 0, 64, 8)}; /* not mergeable */
    struct tp_write wb = write_at(f, 16, 128, 8);
    for (unsigned round = 0; round < 4; round++) {
        assert_int_equal(tp_verbs_ops.post_writes((struct tp_peer *)a, wa, 2, 0, 1), 0);
        assert_int_equal(tp_verbs_ops.post_writes((struct tp_peer *)b, &wb, 1, 0, 2), 0);
    }
    /* Each peer's requests went to its own DCI only, in posting order. */
    for (unsigned i = 0; i < VB_DCI_POOL; i++) {
        uint64_t want = (i == a->dci ? 8 : 0) + (i == b->dci ? 4 : 0);
        assert_int_equal(atomic_load(&pool[i]->posted), want);
    }
    assert_int_equal(rec.num_wrs, 12);
    assert_int_equal(rec.dc_starts, 8); /* one wr_start..wr_complete per batch */
    for (unsigned round = 0; round < 4; round++) {
        for (unsigned k = 0; k < 3; k++) {
            const struct recorded_wr *r = &rec.wrs[round * 3 + k];
            const struct vb_peer *p = k < 2 ? a : b;
            assert_int_equal(r->dctn, p->addr.dctn);
            assert_int_equal(r->dc_key, FAKE_DC_KEY);
            assert_ptr_equal(r->ah, p->ah);
        }
        assert_int_equal(rec.wrs[round * 3].remote_addr, f->rmr.addr);
        assert_int_equal(rec.wrs[round * 3 + 1].remote_addr, f->rmr.addr + 64);
    }
    free_connected_peers(f);
    assert_int_equal(ahs_destroyed, MEMBERS);
    for (unsigned i = 0; i < VB_DCI_POOL; i++) {
        free(pool[i]);
        f->ep.dci[i] = NULL;
    }
}

static int fake_dv_query_fails(struct ibv_context *context, struct mlx5dv_context *out)
{
    (void)context;
    (void)out;
    return EOPNOTSUPP; /* not an mlx5 device */
}
#endif

/* Without DC, opening says so in one log line and members are connected
 * over RC (through the RDMA CM), even when their descriptors advertise a DCT. */
static void test_no_dc_falls_back_to_rc_with_a_log_line(void **state)
{
    struct fixture *f = *state;
    ahs_created = qps_created = 0;
    fake_api.create_ah = fake_create_ah;
    fake_api.destroy_ah = fake_destroy_ah;
    fake_api.create_qp = fake_create_qp;
#ifdef SPINDLE_HAVE_MLX5DV
    fake_api.mlx5dv_query_device = fake_dv_query_fails;
    fake_api.mlx5dv_create_qp = fake_dv_create_qp;
#endif
    FILE *log = tmpfile();
    assert_non_null(log);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(log), STDERR_FILENO) >= 0);
    int rc = vb_dct_open(&f->ep, 1);
    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    char text[1024] = "";
    rewind(log);
    size_t got = fread(text, 1, sizeof text - 1, log);
    fclose(log);
    text[got] = '\0';
    assert_int_equal(rc, 0);
    assert_int_equal(f->ep.dct_enabled, 0);
    assert_non_null(strstr(text, "DCT not supported by fake0; using RC queue pairs"));
    unsigned lines = 0;
    for (size_t i = 0; i < got; i++)
        lines += text[i] == '\n';
    assert_int_equal(lines, 1);
    assert_int_equal(qps_created, 0);

    /* A member advertising a DCT: RC connection through the CM (which the
     * fake fails), no address handle. */
    struct vb_peer *peer = NULL;
    assert_int_not_equal(connect_member(f, 3, &peer), 0);
    assert_null(peer);
    assert_int_equal(atomic_load(&rec.cm_channels), 1);
    assert_int_equal(ahs_created, 0);
    assert_null(f->ep.peers);
    free_connected_peers(f);
}

/* ---- vb_open on a fake device: DC is tried by default ----------------------- */

static unsigned dv_queries;

#ifdef SPINDLE_HAVE_MLX5DV
static int fake_dv_query_counted(struct ibv_context *context, struct mlx5dv_context *out)
{
    (void)context;
    (void)out;
    dv_queries++;
    return EOPNOTSUPP; /* not an mlx5 device */
}
#endif

/* Opens the transport on the fake device with info logging captured into
 * text. The fake RDMA CM cannot start the listener, so the open fails after
 * the DC probe. */
static int open_fake_device(char *text, size_t size)
{
    struct tp_config config = {.backend = "verbs", .group_name = "t", .host = "127.0.0.1"};
    struct tp_endpoint *ep = NULL;
    FILE *log = tmpfile();
    assert_non_null(log);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(log), STDERR_FILENO) >= 0);
    int rc = tp_verbs_ops.open(&config, &ep);
    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    rewind(log);
    size_t got = fread(text, 1, size - 1, log);
    fclose(log);
    text[got] = '\0';
    assert_null(ep);
    return rc;
}

/* The group API never sets tp_config.use_dct: opening must still probe DC
 * (one "DCT not supported" line here), unless SPINDLE_VERBS_DCT=0. */
static void test_open_tries_dc_by_default(void **state)
{
    (void)state;
    dv_queries = 0;
    fake_install_device(&fake_api);
#ifdef SPINDLE_HAVE_MLX5DV
    fake_api.mlx5dv_query_device = fake_dv_query_counted;
#endif
    static char text[4096];
    unsetenv("SPINDLE_VERBS_DCT");
    assert_int_not_equal(open_fake_device(text, sizeof text), 0);
    assert_non_null(strstr(text, "DCT not supported by fake0; using RC queue pairs"));
    assert_non_null(strstr(spindle_errmsg(), "rdma_create_event_channel"));
    assert_int_equal(atomic_load(&rec.cm_channels), 1); /* got past the DC probe */
#ifdef SPINDLE_HAVE_MLX5DV
    assert_int_equal(dv_queries, 1);
#endif

    setenv("SPINDLE_VERBS_DCT", "0", 1);
    assert_int_not_equal(open_fake_device(text, sizeof text), 0);
    unsetenv("SPINDLE_VERBS_DCT");
    assert_null(strstr(text, "DCT not supported"));
    assert_int_equal(atomic_load(&rec.cm_channels), 2);
#ifdef SPINDLE_HAVE_MLX5DV
    assert_int_equal(dv_queries, 1);
#endif
}

static void test_registration_flags(void **state)
{
    struct fixture *f = *state;
    void *addr = NULL;
    struct tp_mr *mr = NULL;
    struct tp_stats stats;
    struct tp_endpoint *ep = (struct tp_endpoint *)&f->ep;
    /* ODP-capable device, non-pinned region: on demand, nothing pinned. */
    f->ep.odp_write = 1;
    assert_int_equal(
        tp_verbs_ops.mr_alloc(ep, 10000, TP_MR_REMOTE_WRITE | TP_MR_NONPINNED, &addr, &mr), 0);
    assert_true(rec.reg_access & IBV_ACCESS_ON_DEMAND);
    assert_true(rec.reg_access & IBV_ACCESS_REMOTE_WRITE);
    assert_false(rec.reg_access & IBV_ACCESS_RELAXED_ORDERING);
    memset(&stats, 0, sizeof stats);
    tp_verbs_ops.stats(ep, &stats);
    assert_int_equal(stats.pinned_bytes, 0);
    tp_verbs_ops.mr_free(ep, mr);
    /* Pinned region (the SST): registered normally, counted as pinned. */
    assert_int_equal(tp_verbs_ops.mr_alloc(ep, 10000, TP_MR_REMOTE_WRITE, &addr, &mr), 0);
    assert_false(rec.reg_access & IBV_ACCESS_ON_DEMAND);
    assert_false(rec.reg_access & IBV_ACCESS_RELAXED_ORDERING);
    tp_verbs_ops.stats(ep, &stats);
    assert_true(stats.pinned_bytes >= 10000);
    tp_verbs_ops.mr_free(ep, mr);
    tp_verbs_ops.stats(ep, &stats);
    assert_int_equal(stats.pinned_bytes, 0);
    /* No ODP on the device: a non-pinned region has to be pinned. */
    f->ep.odp_write = 0;
    assert_int_equal(
        tp_verbs_ops.mr_alloc(ep, 4096, TP_MR_REMOTE_WRITE | TP_MR_NONPINNED, &addr, &mr), 0);
    assert_false(rec.reg_access & IBV_ACCESS_ON_DEMAND);
    tp_verbs_ops.stats(ep, &stats);
    assert_int_equal(stats.pinned_bytes, 4096);
    tp_verbs_ops.mr_free(ep, mr);
}

/* The real rdma-core on a machine without an RDMA device. */
static void test_no_device_is_a_clear_error(void **state)
{
    (void)state;
    verbs_api_set(NULL);
    int num = 0;
    struct ibv_device **list = ibv_get_device_list(&num);
    if (list != NULL)
        ibv_free_device_list(list);
    if (num > 0) {
        /* A machine with a device: the open must then work instead. */
        struct tp_config config = {.backend = "verbs", .group_name = "t", .host = "127.0.0.1"};
        struct tp_endpoint *ep = NULL;
        int rc = tp_verbs_ops.open(&config, &ep);
        assert_true(rc == 0 || rc == SPINDLE_EIO || rc == SPINDLE_EUNREACH);
        if (rc == 0)
            tp_verbs_ops.close(ep);
        return;
    }
    struct tp_config config = {.backend = "verbs", .group_name = "t", .host = "127.0.0.1"};
    struct tp_endpoint *ep = NULL;
    assert_int_equal(tp_verbs_ops.open(&config, &ep), SPINDLE_ENODEV);
    assert_null(ep);
    assert_non_null(strstr(spindle_errmsg(), "no RDMA device"));
}

/* The device named in the group options reaches the backend: with the real
 * rdma-core and no such device, group creation fails naming it. */
static void test_group_passes_the_device(void **state)
{
    (void)state;
    verbs_api_set(NULL);
    int num = 0;
    struct ibv_device **list = ibv_get_device_list(&num);
    if (list != NULL)
        ibv_free_device_list(list);
    char dir[] = "/tmp/spindle-verbs-dev-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.transport = "verbs";
    o.device = "no-such-rdma-device";
    o.bootstrap = dir;
    o.num_members = 1;
    uint32_t self = 0;
    struct spindle_subgroup_config sg = {&self, 1, &self, 1, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *group = NULL;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &group), SPINDLE_ENODEV);
    assert_null(group);
    assert_non_null(strstr(spindle_errmsg(), "no-such-rdma-device"));
    rmdir(dir);
}

int main(void)
{
    /* The DC probe tests read the info lines the backend logs; the library
     * takes its level from the environment once, at its first log call. */
    setenv("SPINDLE_LOG_LEVEL", "info", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_batch_is_one_chained_post, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adjacent_writes_are_merged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_nth_request_is_signaled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_send_queue_never_overflows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_largest_batch_fits_behind_unsignaled_tail, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_reported_completion_and_failed_peer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mid_chain_failure_is_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(test_doorbell_is_write_with_immediate, setup, teardown),
#ifdef SPINDLE_HAVE_MLX5DV
        cmocka_unit_test_setup_teardown(test_dc_writes_carry_the_peer_address, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hot_dc_peer_moves_to_rc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dci_reset_reposts_flushed_writes_of_healthy_peers,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_dci_reset_fails_the_flushed_peers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_dci_reset_keeps_the_dc_to_rc_drain_order, setup,
                                        teardown),
#endif
#ifdef SPINDLE_HAVE_MLX5DV
        cmocka_unit_test_setup_teardown(test_new_member_is_written_through_its_pinned_dci, setup,
                                        teardown),
#endif
        cmocka_unit_test_setup_teardown(test_no_dc_falls_back_to_rc_with_a_log_line, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_open_tries_dc_by_default, setup, teardown),
        cmocka_unit_test_setup_teardown(test_registration_flags, setup, teardown),
        cmocka_unit_test(test_no_device_is_a_clear_error),
        cmocka_unit_test(test_group_passes_the_device),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
