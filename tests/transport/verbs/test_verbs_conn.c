/*
 * The verbs backend's control path without an RDMA device: librdmacm
 * connection set-up, QP state transitions and DCT/DCI creation, driven
 * through struct verbs_api with a fake RDMA CM whose event channels are
 * eventfds and whose events are scripted. The tests assert:
 *   - an outgoing RC connection resolves the peer's address and route,
 *     creates one RC QP (send queue depth, inline size, CQs), moves it
 *     INIT -> RTR -> RTS with the CM's attributes but remote-write access
 *     only (never relaxed ordering), and carries this member's id and nonce
 *     in rdma_connect's private data;
 *   - REJECTED, UNREACHABLE, DISCONNECTED, a silent peer (timeout) and an
 *     answer from another process each become one error naming the peer's
 *     address, and every CM id, channel and QP is released (ASan checks);
 *   - the listener accepts a CONNECT_REQUEST with a receive-only QP whose
 *     receives are posted before RTR, carries its own identity in
 *     rdma_accept, rejects a request routed through another device, ignores
 *     ESTABLISHED, and releases everything when stopped;
 *   - the listener refuses, creating nothing, a request without a
 *     well-formed identity or, once the view's ids are given
 *     (tp_set_members), one claiming an id outside the view, logging why;
 *   - a peer's DISCONNECTED frees its incoming slot (QP and id released),
 *     so a listener with every slot taken accepts again;
 *   - the DCT is created on the SRQ with the DC key and remote-write access,
 *     the pool has VB_DCI_POOL DCIs, each created with the send queue depth
 *     and inline size and moved INIT -> RTR -> RTS, and a failed creation
 *     falls back to RC queue pairs with nothing left behind;
 *   - a whole endpoint opens on the fake device (DCT, DCIs, listener),
 *     advertises its DCT in its address, and closes without leaks;
 *   - an address descriptor the encoder cannot write (a NUL in the host, a
 *     nonzero pad) is refused naming the offset, and a region descriptor
 *     round-trips.
 */
#include <errno.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include <spindle/error.h>

#include "transport/transport.h"
#include "transport/verbs/verbs_impl.h"
#include "util/log.h"

#include "transport/verbs/verbs_fake.h"

extern const struct tp_ops tp_verbs_ops;

/* The private data both sides exchange (verbs_conn.c). */
struct cm_identity {
    uint32_t id;
    uint32_t pad;
    uint64_t nonce;
};

/* ---- a fake RDMA CM ------------------------------------------------------ */

/* An event channel: its fd is a semaphore eventfd counting queued events. */
struct fake_channel {
    struct rdma_event_channel channel; /* first: the backend sees this */
    pthread_mutex_t lock;
    struct rdma_cm_event *queue[16];
    unsigned head, tail;
};

/* What the active side's next steps answer (0: stay silent). */
enum { STEP_ADDR, STEP_ROUTE, STEP_CONNECT, STEPS };

static struct {
    _Atomic int channels, channels_freed, ids, ids_freed, qps, qps_freed;
    _Atomic int recvs_posted, srq_recvs_posted, disconnects, establishes, rejects, accepts;
    int answer[STEPS];        /* enum rdma_cm_event_type + 1 */
    int answer_status;        /* status of a failure event */
    struct cm_identity reply; /* accepting side's identity */
    int reply_len;
    int route_on_other_device;
    int resolve_timeout_ms;
    struct sockaddr_in resolved;
    struct rdma_conn_param connect_param, accept_param;
    struct cm_identity connect_priv, accept_priv;
    struct ibv_qp_init_attr qp_attr[8];
    unsigned qp_attrs;
    int fail_inline; /* create_qp fails when asked for inline data */
    sem_t answered;  /* posted by rdma_accept and rdma_reject */
} cm;

static struct ibv_device other_device = {.name = "other0"};
static struct ibv_context other_ctx = {.device = &other_device};

static void channel_push(struct rdma_event_channel *ch, struct rdma_cm_id *id,
                         enum rdma_cm_event_type type, int status, const void *priv, uint8_t len)
{
    struct fake_channel *fc = (struct fake_channel *)ch;
    struct rdma_cm_event *ev = calloc(1, sizeof *ev + len);
    assert_non_null(ev);
    ev->id = id;
    ev->event = type;
    ev->status = status;
    if (len > 0) {
        memcpy(ev + 1, priv, len);
        ev->param.conn.private_data = ev + 1;
        ev->param.conn.private_data_len = len;
    }
    pthread_mutex_lock(&fc->lock);
    assert_true(fc->tail - fc->head < 16);
    fc->queue[fc->tail++ % 16] = ev;
    pthread_mutex_unlock(&fc->lock);
    uint64_t one = 1;
    assert_int_equal(write(ch->fd, &one, sizeof one), sizeof one);
}

static struct rdma_event_channel *fake_create_channel(void)
{
    struct fake_channel *fc = calloc(1, sizeof *fc);
    assert_non_null(fc);
    fc->channel.fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
    assert_true(fc->channel.fd >= 0);
    pthread_mutex_init(&fc->lock, NULL);
    cm.channels++;
    return &fc->channel;
}

static void fake_destroy_channel(struct rdma_event_channel *ch)
{
    struct fake_channel *fc = (struct fake_channel *)ch;
    while (fc->head != fc->tail) /* events never fetched */
        free(fc->queue[fc->head++ % 16]);
    close(ch->fd);
    pthread_mutex_destroy(&fc->lock);
    free(fc);
    cm.channels_freed++;
}

static int fake_get_cm_event(struct rdma_event_channel *ch, struct rdma_cm_event **event)
{
    struct fake_channel *fc = (struct fake_channel *)ch;
    uint64_t value;
    assert_int_equal(read(ch->fd, &value, sizeof value), sizeof value);
    pthread_mutex_lock(&fc->lock);
    assert_true(fc->head != fc->tail);
    *event = fc->queue[fc->head++ % 16];
    pthread_mutex_unlock(&fc->lock);
    return 0;
}

static int fake_ack_cm_event(struct rdma_cm_event *event)
{
    free(event);
    return 0;
}

static struct rdma_cm_id *new_id(struct rdma_event_channel *ch, struct ibv_context *verbs)
{
    struct rdma_cm_id *id = calloc(1, sizeof *id);
    assert_non_null(id);
    id->channel = ch;
    id->verbs = verbs;
    cm.ids++;
    return id;
}

static int fake_create_id(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *context,
                          enum rdma_port_space ps)
{
    assert_int_equal(ps, RDMA_PS_TCP);
    *id = new_id(ch, NULL);
    (*id)->context = context;
    return 0;
}

static int fake_destroy_id(struct rdma_cm_id *id)
{
    free(id);
    cm.ids_freed++;
    return 0;
}

/* Answers step with its scripted event (none when silent). */
static void answer(struct rdma_cm_id *id, int step, enum rdma_cm_event_type success)
{
    int type = cm.answer[step] == 0 ? -1 : cm.answer[step] - 1;
    if (type < 0)
        return;
    int ok = type == (int)success;
    if (ok && success == RDMA_CM_EVENT_CONNECT_RESPONSE)
        channel_push(id->channel, id, (enum rdma_cm_event_type)type, 0, &cm.reply,
                     (uint8_t)cm.reply_len);
    else
        channel_push(id->channel, id, (enum rdma_cm_event_type)type, ok ? 0 : cm.answer_status,
                     NULL, 0);
}

static int fake_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
                             int timeout_ms)
{
    assert_null(src);
    assert_int_equal(dst->sa_family, AF_INET);
    memcpy(&cm.resolved, dst, sizeof cm.resolved);
    cm.resolve_timeout_ms = timeout_ms;
    id->verbs = cm.route_on_other_device ? &other_ctx : &fake_ctx;
    answer(id, STEP_ADDR, RDMA_CM_EVENT_ADDR_RESOLVED);
    return 0;
}

static int fake_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
    (void)timeout_ms;
    answer(id, STEP_ROUTE, RDMA_CM_EVENT_ROUTE_RESOLVED);
    return 0;
}

static int fake_connect(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
    cm.connect_param = *param;
    assert_int_equal(param->private_data_len, sizeof cm.connect_priv);
    memcpy(&cm.connect_priv, param->private_data, sizeof cm.connect_priv);
    cm.connect_param.private_data = NULL;
    answer(id, STEP_CONNECT, RDMA_CM_EVENT_CONNECT_RESPONSE);
    return 0;
}

static int fake_accept(struct rdma_cm_id *id, struct rdma_conn_param *param)
{
    (void)id;
    cm.accept_param = *param;
    if (param->private_data_len >= sizeof cm.accept_priv)
        memcpy(&cm.accept_priv, param->private_data, sizeof cm.accept_priv);
    cm.accept_param.private_data = NULL;
    cm.accepts++;
    sem_post(&cm.answered);
    return 0;
}

static int fake_reject(struct rdma_cm_id *id, const void *data, uint8_t len)
{
    (void)id;
    (void)data;
    (void)len;
    cm.rejects++;
    sem_post(&cm.answered);
    return 0;
}

static int fake_establish(struct rdma_cm_id *id)
{
    (void)id;
    cm.establishes++;
    return 0;
}

static int fake_disconnect(struct rdma_cm_id *id)
{
    (void)id;
    cm.disconnects++;
    return 0;
}

static int fake_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
    struct sockaddr_in *bound = (struct sockaddr_in *)&id->route.addr.src_addr;
    memcpy(bound, addr, sizeof *bound);
    if (bound->sin_port == 0)
        bound->sin_port = htons(7471); /* an ephemeral port */
    id->verbs = &fake_ctx;
    return 0;
}

static int fake_listen(struct rdma_cm_id *id, int backlog)
{
    (void)id;
    assert_int_equal(backlog, VB_INCOMING_MAX);
    return 0;
}

/* What librdmacm's rdma_init_qp_attr offers for an RC QP, including access
 * the backend must not take (remote read, relaxed ordering). */
static int fake_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *attr, int *mask)
{
    (void)id;
    switch (attr->qp_state) {
    case IBV_QPS_INIT:
        *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        attr->port_num = 1;
        attr->qp_access_flags =
            IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_RELAXED_ORDERING;
        return 0;
    case IBV_QPS_RTR:
        *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        attr->path_mtu = IBV_MTU_4096;
        attr->dest_qp_num = 0x900;
        attr->rq_psn = 0x1234;
        return 0;
    case IBV_QPS_RTS:
        *mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
        attr->sq_psn = 0x5678;
        return 0;
    default:
        errno = EINVAL;
        return -1;
    }
}

static struct ibv_qp *fake_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
    (void)pd;
    if (cm.qp_attrs < 8)
        cm.qp_attr[cm.qp_attrs++] = *attr;
    if (cm.fail_inline && attr->cap.max_inline_data > 0) {
        errno = EINVAL;
        return NULL;
    }
    struct ibv_qp *qp = calloc(1, sizeof *qp);
    assert_non_null(qp);
    qp->context = &fake_ctx;
    qp->qp_num = 0x100 + (uint32_t)cm.qps++;
    qp->qp_type = attr->qp_type;
    return qp;
}

static int fake_destroy_qp(struct ibv_qp *qp)
{
    free(qp);
    cm.qps_freed++;
    return 0;
}

static int fake_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    (void)qp;
    (void)bad;
    assert_int_equal(wr->num_sge, 0); /* doorbells carry no payload */
    cm.recvs_posted++;
    return 0;
}

static struct verbs_api fake_api;

/* ---- fixture: an endpoint on the fake device, no listener --------------- */

static struct vb_ep *new_ep(void)
{
    struct vb_ep *ep = calloc(1, sizeof *ep);
    assert_non_null(ep);
    ep->ctx = &fake_ctx;
    ep->pd = &fake_pd;
    ep->send_cq = &fake_send_cq;
    ep->recv_cq = &fake_recv_cq;
    ep->port_num = 1;
    ep->lid = 5;
    ep->mtu = IBV_MTU_4096;
    ep->self_id = 3;
    ep->base.ops = &tp_verbs_ops;
    ep->nonce = 0x1122334455667788ull;
    ep->self_fd = -1;
    ep->stop_fd = -1;
    ep->timeout_ms = 2000;
    snprintf(ep->dev_name, sizeof ep->dev_name, "fake0");
    snprintf(ep->host, sizeof ep->host, "127.0.0.1");
    pthread_mutex_init(&ep->conn_lock, NULL);
    pthread_mutex_init(&ep->stats_lock, NULL);
    return ep;
}

static int setup(void **state)
{
    memset(&cm, 0, sizeof cm);
    memset(&rec, 0, sizeof rec);
    memset(&modifies, 0, sizeof modifies);
    assert_int_equal(sem_init(&cm.answered, 0, 0), 0);
    cm.answer[STEP_ADDR] = RDMA_CM_EVENT_ADDR_RESOLVED + 1;
    cm.answer[STEP_ROUTE] = RDMA_CM_EVENT_ROUTE_RESOLVED + 1;
    cm.answer[STEP_CONNECT] = RDMA_CM_EVENT_CONNECT_RESPONSE + 1;
    cm.reply = (struct cm_identity){.id = 8, .nonce = 0xabcdef0123456789ull};
    cm.reply_len = sizeof cm.reply;
    fake_ctx.device = &fake_device;
    fake_ctx.ops.post_send = fake_post_send;
    fake_ctx.ops.poll_cq = fake_poll_cq;
    fake_ctx.ops.post_recv = fake_post_recv;
    fake_api = *verbs_api_default();
    fake_install_device(&fake_api);
    fake_api.reg_mr = fake_reg_mr;
    fake_api.dereg_mr = fake_dereg_mr;
    fake_api.modify_qp = fake_modify_qp;
    fake_api.create_qp = fake_create_qp;
    fake_api.destroy_qp = fake_destroy_qp;
    fake_api.rdma_create_event_channel = fake_create_channel;
    fake_api.rdma_destroy_event_channel = fake_destroy_channel;
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
    verbs_api_set(&fake_api);
    struct vb_ep *ep = new_ep();
    *state = ep;
    return 0;
}

/* Closes the endpoint through the backend and checks nothing is left. */
static int teardown(void **state)
{
    tp_verbs_ops.close((struct tp_endpoint *)*state);
    verbs_api_set(NULL);
    sem_destroy(&cm.answered);
    assert_int_equal(cm.channels, cm.channels_freed);
    assert_int_equal(cm.ids, cm.ids_freed);
    assert_int_equal(cm.qps, cm.qps_freed);
    return 0;
}

/* Connects ep to member 8 at 10.0.0.8:7471 over RC (no DCT advertised). */
static int connect_peer(struct vb_ep *ep, struct vb_peer **out, int timeout_ms)
{
    struct vb_addr addr = {.port = 7471, .id = 8, .nonce = 0xabcdef0123456789ull, .port_num = 1};
    snprintf(addr.host, sizeof addr.host, "10.0.0.8");
    struct tp_desc desc;
    assert_int_equal(vb_addr_encode(&addr, &desc), 0);
    struct tp_peer *peer = NULL;
    int rc = tp_verbs_ops.connect((struct tp_endpoint *)ep, &desc, timeout_ms, &peer);
    *out = (struct vb_peer *)peer;
    return rc;
}

/* Asserts the RC state changes of qp from index first: INIT with remote
 * write access only, RTR and RTS with the CM's attributes. */
static void assert_rc_transitions(unsigned first, const struct ibv_qp *qp)
{
    assert_true(first + 3 <= modifies.count);
    const struct recorded_modify *init = &modifies.calls[first], *rtr = init + 1, *rts = init + 2;
    assert_ptr_equal(init->qp, qp);
    assert_int_equal(init->attr.qp_state, IBV_QPS_INIT);
    assert_int_equal(init->mask,
                     IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    assert_int_equal(init->attr.qp_access_flags, IBV_ACCESS_REMOTE_WRITE);
    assert_false(init->attr.qp_access_flags & IBV_ACCESS_RELAXED_ORDERING);
    assert_ptr_equal(rtr->qp, qp);
    assert_int_equal(rtr->attr.qp_state, IBV_QPS_RTR);
    assert_int_equal(rtr->attr.dest_qp_num, 0x900);
    assert_int_equal(rtr->attr.path_mtu, IBV_MTU_4096);
    assert_true(rtr->mask & IBV_QP_DEST_QPN);
    assert_ptr_equal(rts->qp, qp);
    assert_int_equal(rts->attr.qp_state, IBV_QPS_RTS);
    assert_int_equal(rts->attr.sq_psn, 0x5678);
    for (unsigned i = first; i < first + 3; i++)
        assert_false(modifies.calls[i].attr.qp_access_flags & IBV_ACCESS_RELAXED_ORDERING);
}

/* ---- active side ---------------------------------------------------------- */

static void test_rc_connect_requests_the_right_qp(void **state)
{
    struct vb_ep *ep = *state;
    struct vb_peer *peer = NULL;
    assert_int_equal(connect_peer(ep, &peer, 1500), 0);
    assert_non_null(peer);
    /* Address resolution of the descriptor's host:port, within the timeout. */
    assert_int_equal(ntohs(cm.resolved.sin_port), 7471);
    assert_int_equal(cm.resolved.sin_addr.s_addr, inet_addr("10.0.0.8"));
    assert_int_equal(cm.resolve_timeout_ms, 1500);
    /* One RC QP with the send queue of VB_SQ_DEPTH requests and inline data. */
    assert_int_equal(cm.qps, 1);
    const struct ibv_qp_init_attr *qa = &cm.qp_attr[0];
    assert_int_equal(qa->qp_type, IBV_QPT_RC);
    assert_int_equal(qa->cap.max_send_wr, VB_SQ_DEPTH);
    assert_int_equal(qa->cap.max_inline_data, VB_MAX_INLINE);
    assert_int_equal(qa->cap.max_send_sge, 1);
    assert_ptr_equal(qa->send_cq, &fake_send_cq);
    assert_ptr_equal(qa->recv_cq, &fake_recv_cq);
    assert_int_equal(qa->sq_sig_all, 0); /* selective signaling */
    assert_non_null(peer->sq);
    assert_int_equal(peer->sq->max_inline, VB_MAX_INLINE);
    assert_int_equal(peer->sq->is_dci, 0);
    /* INIT before rdma_connect, RTR and RTS after the response. */
    assert_int_equal(modifies.count, 3);
    assert_rc_transitions(0, peer->sq->qp);
    /* rdma_connect carries the QP number and this member's identity. */
    assert_int_equal(cm.connect_param.qp_num, peer->sq->qp->qp_num);
    assert_int_equal(cm.connect_priv.id, 3);
    assert_int_equal(cm.connect_priv.nonce, 0x1122334455667788ull);
    assert_int_equal(cm.connect_param.retry_count, 7);
    assert_int_equal(cm.connect_param.rnr_retry_count, 7);
    assert_int_equal(cm.establishes, 1);
    assert_int_equal(atomic_load(&peer->path), VB_PATH_RC);
    /* A write goes out on it. */
    struct tp_desc mr_desc;
    void *addr = NULL;
    struct tp_mr *mr = NULL;
    assert_int_equal(tp_verbs_ops.mr_alloc((struct tp_endpoint *)ep, 4096, 0, &addr, &mr), 0);
    assert_int_equal(tp_verbs_ops.mr_export(mr, &mr_desc), 0);
    struct tp_rmr *rmr = NULL;
    assert_int_equal(tp_verbs_ops.rmr_import((struct tp_peer *)peer, &mr_desc, &rmr), 0);
    struct tp_write w = {.local_mr = mr, .local = addr, .remote = rmr, .length = 8};
    assert_int_equal(tp_verbs_ops.post_writes((struct tp_peer *)peer, &w, 1, 0, 0), 0);
    assert_int_equal(rec.post_calls, 1);
    tp_verbs_ops.rmr_release((struct tp_peer *)peer, rmr);
    tp_verbs_ops.mr_free((struct tp_endpoint *)ep, mr);
}

static void test_rc_connect_without_inline_retries_with_none(void **state)
{
    struct vb_ep *ep = *state;
    cm.fail_inline = 1;
    struct vb_peer *peer = NULL;
    assert_int_equal(connect_peer(ep, &peer, 1000), 0);
    assert_int_equal(cm.qp_attrs, 2);
    assert_int_equal(cm.qp_attr[0].cap.max_inline_data, VB_MAX_INLINE);
    assert_int_equal(cm.qp_attr[1].cap.max_inline_data, 0);
    assert_int_equal(cm.qp_attr[1].cap.max_send_wr, VB_SQ_DEPTH);
    assert_int_equal(peer->sq->max_inline, 0);
}

/* Connects with the active side's step answered by type; asserts one
 * error naming the peer and its address, and nothing left over. */
static void expect_connect_error(struct vb_ep *ep, int step, int type, int timeout_ms,
                                 const char *what)
{
    if (step >= 0)
        cm.answer[step] = type + 1;
    cm.answer_status = -ECONNREFUSED;
    struct vb_peer *peer = NULL;
    assert_int_equal(connect_peer(ep, &peer, timeout_ms), SPINDLE_EUNREACH);
    assert_null(peer);
    assert_null(ep->peers);
    const char *msg = spindle_errmsg();
    assert_non_null(strstr(msg, "peer 8 at 10.0.0.8:7471"));
    if (strstr(msg, what) == NULL)
        fail_msg("error '%s' does not say '%s'", msg, what);
    /* The failed attempt released its CM id, channel and QP. */
    assert_int_equal(cm.channels, cm.channels_freed);
    assert_int_equal(cm.ids, cm.ids_freed);
    assert_int_equal(cm.qps, cm.qps_freed);
    assert_int_equal(cm.establishes, 0);
}

static void test_rc_connect_rejected(void **state)
{
    expect_connect_error(*state, STEP_CONNECT, RDMA_CM_EVENT_REJECTED, 1000,
                         "rejected the connection");
    assert_int_equal(cm.qps, 1); /* created for the attempt, then destroyed */
}

static void test_rc_connect_unreachable(void **state)
{
    expect_connect_error(*state, STEP_CONNECT, RDMA_CM_EVENT_UNREACHABLE, 1000,
                         "unreachable: RDMA_CM_EVENT_UNREACHABLE");
}

static void test_rc_connect_address_error(void **state)
{
    expect_connect_error(*state, STEP_ADDR, RDMA_CM_EVENT_ADDR_ERROR, 1000,
                         "RDMA_CM_EVENT_ADDR_ERROR instead of RDMA_CM_EVENT_ADDR_RESOLVED");
    assert_int_equal(cm.qps, 0); /* no QP before the route is known */
}

static void test_rc_connect_route_error(void **state)
{
    expect_connect_error(*state, STEP_ROUTE, RDMA_CM_EVENT_ROUTE_ERROR, 1000,
                         "RDMA_CM_EVENT_ROUTE_ERROR");
}

static void test_rc_connect_disconnected_while_connecting(void **state)
{
    expect_connect_error(*state, STEP_CONNECT, RDMA_CM_EVENT_DISCONNECTED, 1000,
                         "RDMA_CM_EVENT_DISCONNECTED");
}

static void test_rc_connect_times_out(void **state)
{
    struct timespec before, after;
    clock_gettime(CLOCK_MONOTONIC, &before);
    /* The route is never resolved: the connect gives up after its timeout. */
    expect_connect_error(*state, STEP_ROUTE, -1, 60,
                         "timed out waiting for RDMA_CM_EVENT_ROUTE_RESOLVED");
    clock_gettime(CLOCK_MONOTONIC, &after);
    double elapsed =
        (double)(after.tv_sec - before.tv_sec) + (double)(after.tv_nsec - before.tv_nsec) / 1e9;
    assert_true(elapsed >= 0.055);
    assert_true(elapsed < 5.0);
}

static void test_rc_connect_to_another_process_is_refused(void **state)
{
    cm.reply.nonce = 0x42; /* a restarted process on the same host:port */
    expect_connect_error(*state, -1, 0, 1000, "another process holds that address");
    assert_non_null(strstr(spindle_errmsg(), "answered as member 8"));
}

static void test_rc_connect_without_identity_is_refused(void **state)
{
    cm.reply_len = 0;
    expect_connect_error(*state, -1, 0, 1000, "without identifying itself");
}

static void test_rc_route_through_another_device_is_refused(void **state)
{
    cm.route_on_other_device = 1;
    expect_connect_error(*state, -1, 0, 1000, "uses device 'other0', endpoint opened 'fake0'");
    assert_int_equal(cm.qps, 0);
}

/* ---- passive side: the listener thread ------------------------------------ */

static void wait_answered(void)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10; /* a bound against a hang, not a synchronisation */
    assert_int_equal(sem_timedwait(&cm.answered, &deadline), 0);
}

static void test_listener_accepts_with_a_receive_qp(void **state)
{
    struct vb_ep *ep = *state;
    ep->port = 0;
    assert_int_equal(vb_listen_start(ep), 0);
    assert_int_equal(ep->port, 7471); /* the bound port is advertised */
    assert_int_equal(cm.channels, 1);

    struct cm_identity joiner = {.id = 9, .nonce = 77};
    struct rdma_cm_id *id = new_id(ep->cm_channel, &fake_ctx);
    channel_push(ep->cm_channel, id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &joiner, sizeof joiner);
    wait_answered();
    /* A QP that only receives doorbells: VB_RECVS receives, one send. */
    assert_int_equal(cm.qps, 1);
    assert_int_equal(cm.qp_attr[0].qp_type, IBV_QPT_RC);
    assert_int_equal(cm.qp_attr[0].cap.max_recv_wr, VB_RECVS);
    assert_int_equal(cm.qp_attr[0].cap.max_send_wr, 1);
    assert_int_equal(cm.recvs_posted, VB_RECVS);
    pthread_mutex_lock(&ep->conn_lock);
    assert_int_equal(ep->incoming_count, 1);
    struct ibv_qp *qp = ep->incoming[0].qp;
    pthread_mutex_unlock(&ep->conn_lock);
    assert_int_equal(modifies.count, 3);
    assert_rc_transitions(0, qp);
    /* rdma_accept names the QP and carries this member's identity. */
    assert_int_equal(cm.accept_param.qp_num, qp->qp_num);
    assert_int_equal(cm.accept_priv.id, 3);
    assert_int_equal(cm.accept_priv.nonce, 0x1122334455667788ull);
    assert_int_equal(cm.accept_param.rnr_retry_count, 7);
    assert_int_equal(cm.rejects, 0);

    /* ESTABLISHED changes nothing; a request routed through another device
     * is rejected (and, processed in order, tells us the events before it
     * were handled). */
    channel_push(ep->cm_channel, id, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
    struct rdma_cm_id *stray = new_id(ep->cm_channel, &other_ctx);
    channel_push(ep->cm_channel, stray, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &joiner, sizeof joiner);
    wait_answered();
    assert_int_equal(cm.rejects, 1);
    assert_int_equal(cm.qps, 1);
    pthread_mutex_lock(&ep->conn_lock);
    assert_int_equal(ep->incoming_count, 1);
    pthread_mutex_unlock(&ep->conn_lock);

    /* Stopping disconnects and releases the accepted connection (the
     * rejected id was released by the listener itself). */
    vb_listen_stop(ep);
    assert_int_equal(cm.ids, 3);
    assert_int_equal(cm.disconnects, 1);
    assert_int_equal(cm.qps_freed, 1);
    assert_int_equal(cm.ids, cm.ids_freed);
    assert_int_equal(cm.channels_freed, 1);
    assert_null(ep->cm_channel);
}

static void test_listener_rejects_when_the_qp_cannot_be_set_up(void **state)
{
    struct vb_ep *ep = *state;
    ep->port = 7000;
    assert_int_equal(vb_listen_start(ep), 0);
    assert_int_equal(ep->port, 7000);
    modifies.fail_state = IBV_QPS_RTR + 1;
    struct rdma_cm_id *id = new_id(ep->cm_channel, &fake_ctx);
    struct cm_identity joiner = {.id = 9, .nonce = 77};
    channel_push(ep->cm_channel, id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, &joiner, sizeof joiner);
    wait_answered();
    assert_int_equal(cm.rejects, 1);
    assert_int_equal(cm.qps, 1);
    assert_int_equal(cm.qps_freed, 1); /* nothing half set up is kept */
    vb_listen_stop(ep);
    assert_int_equal(cm.ids, 2);
    assert_int_equal(cm.ids_freed, 2);
    assert_int_equal(ep->incoming_count, 0);
    assert_int_equal(cm.disconnects, 0);
}

/* Runs one CONNECT_REQUEST carrying priv (len bytes) through the listener
 * with stderr captured into text; returns 1 when it was accepted. */
static int request(struct vb_ep *ep, const void *priv, uint8_t len, char *text, size_t size)
{
    int accepts = cm.accepts, rejects = cm.rejects;
    FILE *log = tmpfile();
    assert_non_null(log);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fileno(log), STDERR_FILENO) >= 0);
    struct rdma_cm_id *id = new_id(ep->cm_channel, &fake_ctx);
    channel_push(ep->cm_channel, id, RDMA_CM_EVENT_CONNECT_REQUEST, 0, priv, len);
    wait_answered();
    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    rewind(log);
    size_t got = fread(text, 1, size - 1, log);
    fclose(log);
    text[got] = '\0';
    assert_int_equal(cm.accepts + cm.rejects, accepts + rejects + 1);
    return cm.accepts > accepts;
}

/* The listener takes a request only with a well-formed identity and, once
 * the view's ids are given, only for a member of the view; a refused
 * request leaves nothing behind (no QP) and a log line saying why. */
static void test_listener_checks_the_claimed_identity(void **state)
{
    struct vb_ep *ep = *state;
    ep->port = 0;
    assert_int_equal(vb_listen_start(ep), 0);
    char text[1024];
    struct cm_identity member9 = {.id = 9, .nonce = 77}, stranger = {.id = 13, .nonce = 78};

    /* No view given yet: any well-formed id is taken (the first table's
     * ids are given before anyone learns this address). */
    assert_true(request(ep, &stranger, sizeof stranger, text, sizeof text));
    assert_int_equal(cm.qps, 1);

    uint32_t view[] = {0, 3, 9};
    struct tp_endpoint *tep = (struct tp_endpoint *)ep;
    assert_int_equal(tp_set_members(tep, view, 3), 0);
    assert_false(request(ep, &stranger, sizeof stranger, text, sizeof text));
    assert_non_null(strstr(text, "claims member 13, which is not in this member's view"));
    assert_false(request(ep, NULL, 0, text, sizeof text));
    assert_non_null(strstr(text, "0 bytes of private data"));
    assert_false(request(ep, &member9, 8, text, sizeof text));
    assert_non_null(strstr(text, "8 bytes of private data"));
    struct cm_identity padded = member9;
    padded.pad = 1;
    assert_false(request(ep, &padded, sizeof padded, text, sizeof text));
    assert_non_null(strstr(text, "pad"));
    assert_int_equal(cm.qps, 1); /* nothing was created for a refused request */

    /* A member of the view is taken; IB CM's padding past the identity is
     * ignored. */
    uint8_t long_priv[56] = {0};
    memcpy(long_priv, &member9, sizeof member9);
    assert_true(request(ep, long_priv, sizeof long_priv, text, sizeof text));
    assert_int_equal(cm.qps, 2);
    assert_int_equal(cm.accept_priv.id, 3);

    /* A later view without 9 refuses it. */
    uint32_t next[] = {0, 3};
    assert_int_equal(tp_set_members(tep, next, 2), 0);
    assert_false(request(ep, &member9, sizeof member9, text, sizeof text));
    assert_non_null(strstr(text, "claims member 9"));
    assert_int_equal(tp_set_members(tep, NULL, 0), SPINDLE_EINVAL);
    vb_listen_stop(ep);
    assert_int_equal(cm.qps_freed, 2);
}

/* An accepted connection whose peer disconnects gives its slot back: with
 * every slot taken a request is refused, and after one peer disconnects
 * the next request is accepted in its slot; the disconnected connection's
 * QP and id are released at once. */
static void test_listener_frees_the_slot_of_a_disconnected_peer(void **state)
{
    struct vb_ep *ep = *state;
    ep->port = 0;
    assert_int_equal(vb_listen_start(ep), 0);
    char text[1024];
    struct cm_identity joiner = {.id = 9, .nonce = 77};
    for (unsigned i = 0; i < VB_INCOMING_MAX; i++)
        assert_true(request(ep, &joiner, sizeof joiner, text, sizeof text));
    assert_false(request(ep, &joiner, sizeof joiner, text, sizeof text));
    assert_non_null(strstr(text, "incoming connections are in use"));
    assert_int_equal(cm.qps, VB_INCOMING_MAX);

    pthread_mutex_lock(&ep->conn_lock);
    struct rdma_cm_id *gone = ep->incoming[5].id;
    pthread_mutex_unlock(&ep->conn_lock);
    int ids_freed = cm.ids_freed;
    channel_push(ep->cm_channel, gone, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
    /* Handled in order: the answer to this request follows the release. */
    assert_true(request(ep, &joiner, sizeof joiner, text, sizeof text));
    assert_int_equal(cm.qps_freed, 1);
    assert_int_equal(cm.ids_freed, ids_freed + 1);
    assert_int_equal(cm.qps, VB_INCOMING_MAX + 1);
    pthread_mutex_lock(&ep->conn_lock);
    assert_int_equal(ep->incoming_count, VB_INCOMING_MAX);
    assert_non_null(ep->incoming[5].id);
    assert_non_null(ep->incoming[5].qp);
    pthread_mutex_unlock(&ep->conn_lock);

    /* The last slot freed shrinks the table; stopping releases the rest
     * once each. */
    pthread_mutex_lock(&ep->conn_lock);
    gone = ep->incoming[VB_INCOMING_MAX - 1].id;
    pthread_mutex_unlock(&ep->conn_lock);
    channel_push(ep->cm_channel, gone, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, 0);
    assert_true(request(ep, &joiner, sizeof joiner, text, sizeof text));
    assert_int_equal(cm.qps_freed, 2);
    vb_listen_stop(ep);
    assert_int_equal(cm.qps, cm.qps_freed);
    assert_int_equal(cm.disconnects, VB_INCOMING_MAX);
}

/* ---- DCT and DCI pool ------------------------------------------------------ */

#ifdef SPINDLE_HAVE_MLX5DV
static struct {
    struct ibv_qp_init_attr_ex attr[8];
    struct mlx5dv_qp_init_attr dv[8];
    unsigned creates;
    int fail_at; /* creation number (1-based) that fails; 0: none */
    unsigned srqs, srqs_freed;
    struct ibv_srq_init_attr srq_attr;
} dc;

static int fake_dv_query(struct ibv_context *context, struct mlx5dv_context *out)
{
    (void)context;
    assert_true(out->comp_mask & MLX5DV_CONTEXT_MASK_DC_ODP_CAPS);
    return 0;
}

static struct ibv_qp *fake_dv_create_qp(struct ibv_context *context,
                                        struct ibv_qp_init_attr_ex *attr,
                                        struct mlx5dv_qp_init_attr *dv)
{
    assert_ptr_equal(context, &fake_ctx);
    unsigned n = dc.creates++;
    if (n < 8) {
        dc.attr[n] = *attr;
        dc.dv[n] = *dv;
    }
    if (dc.fail_at == (int)n + 1) {
        errno = ENOMEM;
        return NULL;
    }
    struct ibv_qp *qp = calloc(1, sizeof *qp);
    assert_non_null(qp);
    qp->context = &fake_ctx;
    qp->qp_num = 0x200 + n;
    cm.qps++;
    return qp;
}

static struct ibv_qp_ex *fake_to_qp_ex(struct ibv_qp *qp)
{
    (void)qp;
    return &fake_dci_ex;
}

static struct mlx5dv_qp_ex *fake_to_dv_qp_ex(struct ibv_qp_ex *qp)
{
    assert_ptr_equal(qp, &fake_dci_ex);
    return &fake_dci_mlx;
}

static int fake_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    (void)srq;
    (void)bad;
    assert_int_equal(wr->num_sge, 0);
    cm.srq_recvs_posted++;
    return 0;
}

static struct ibv_srq *fake_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
    assert_ptr_equal(pd, &fake_pd);
    dc.srq_attr = *attr;
    struct ibv_srq *srq = calloc(1, sizeof *srq);
    assert_non_null(srq);
    srq->context = &fake_ctx;
    dc.srqs++;
    return srq;
}

static int fake_destroy_srq(struct ibv_srq *srq)
{
    free(srq);
    dc.srqs_freed++;
    return 0;
}

static void use_dc_fakes(void)
{
    memset(&dc, 0, sizeof dc);
    fake_ctx.ops.post_srq_recv = fake_post_srq_recv;
    fake_api.mlx5dv_query_device = fake_dv_query;
    fake_api.mlx5dv_create_qp = fake_dv_create_qp;
    fake_api.qp_to_qp_ex = fake_to_qp_ex;
    fake_api.mlx5dv_qp_ex_from_ibv_qp_ex = fake_to_dv_qp_ex;
    fake_api.create_srq = fake_create_srq;
    fake_api.destroy_srq = fake_destroy_srq;
}

static void test_dct_and_dci_pool_creation(void **state)
{
    struct vb_ep *ep = *state;
    use_dc_fakes();
    assert_int_equal(vb_dct_open(ep, 1), 0);
    assert_int_equal(ep->dct_enabled, 1);
    /* The DCT: on the SRQ, with the shared DC key. */
    assert_int_equal(dc.creates, 1 + VB_DCI_POOL);
    assert_int_equal(dc.srqs, 1);
    assert_int_equal(dc.srq_attr.attr.max_wr, VB_RECVS * 4);
    assert_int_equal(cm.srq_recvs_posted, VB_RECVS * 4);
    assert_int_equal(dc.attr[0].qp_type, IBV_QPT_DRIVER);
    assert_ptr_equal(dc.attr[0].srq, ep->srq);
    assert_ptr_equal(dc.attr[0].recv_cq, &fake_recv_cq);
    assert_ptr_equal(dc.attr[0].pd, &fake_pd);
    assert_true(dc.dv[0].comp_mask & MLX5DV_QP_INIT_ATTR_MASK_DC);
    assert_int_equal(dc.dv[0].dc_init_attr.dc_type, MLX5DV_DCTYPE_DCT);
    /* Its key is drawn at random for this endpoint, and nonzero. */
    assert_true(ep->dc_key != 0);
    assert_int_equal(dc.dv[0].dc_init_attr.dct_access_key, ep->dc_key);
    /* DCT: INIT with remote write only, then RTR with the port's MTU. */
    const struct recorded_modify *init = &modifies.calls[0], *rtr = &modifies.calls[1];
    assert_ptr_equal(init->qp, ep->dct);
    assert_int_equal(init->attr.qp_state, IBV_QPS_INIT);
    assert_true(init->mask & IBV_QP_ACCESS_FLAGS);
    assert_int_equal(init->attr.qp_access_flags, IBV_ACCESS_REMOTE_WRITE);
    assert_false(init->attr.qp_access_flags & IBV_ACCESS_RELAXED_ORDERING);
    assert_int_equal(init->attr.port_num, 1);
    assert_ptr_equal(rtr->qp, ep->dct);
    assert_int_equal(rtr->attr.qp_state, IBV_QPS_RTR);
    assert_int_equal(rtr->attr.path_mtu, IBV_MTU_4096);
    assert_int_equal(rtr->attr.min_rnr_timer, 12);
    assert_int_equal(rtr->attr.ah_attr.dlid, 5);
    assert_true(rtr->mask & IBV_QP_AV);
    /* VB_DCI_POOL DCIs, each with the send queue and inline size, moved
     * INIT -> RTR -> RTS, and none granted relaxed ordering. */
    unsigned next = 2;
    for (unsigned i = 0; i < VB_DCI_POOL; i++) {
        const struct ibv_qp_init_attr_ex *attr = &dc.attr[1 + i];
        assert_int_equal(dc.dv[1 + i].dc_init_attr.dc_type, MLX5DV_DCTYPE_DCI);
        assert_int_equal(attr->qp_type, IBV_QPT_DRIVER);
        assert_int_equal(attr->cap.max_send_wr, VB_SQ_DEPTH);
        assert_int_equal(attr->cap.max_inline_data, VB_MAX_INLINE);
        assert_ptr_equal(attr->send_cq, &fake_send_cq);
        assert_true(attr->send_ops_flags & IBV_QP_EX_WITH_RDMA_WRITE);
        assert_true(attr->send_ops_flags & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM);
        assert_non_null(ep->dci[i]);
        assert_int_equal(ep->dci[i]->is_dci, 1);
        assert_int_equal(ep->dci[i]->dci_index, i);
        assert_int_equal(ep->dci[i]->max_inline, VB_MAX_INLINE);
        assert_ptr_equal(ep->dci_ex[i], &fake_dci_ex);
        assert_ptr_equal(ep->dci_mlx[i], &fake_dci_mlx);
        next = assert_dci_transitions(next, ep->dci[i]->qp, 0, 1, IBV_MTU_4096);
        assert_int_equal(ep->dci[i]->qp->state, IBV_QPS_RTS);
    }
    assert_int_equal(modifies.count, next);
    for (unsigned i = 0; i < modifies.count; i++)
        assert_false(modifies.calls[i].attr.qp_access_flags & IBV_ACCESS_RELAXED_ORDERING);
    /* The address advertises the DCT. */
    struct tp_desc desc;
    struct vb_addr addr;
    assert_int_equal(tp_verbs_ops.address((struct tp_endpoint *)ep, &desc), 0);
    assert_int_equal(vb_addr_decode(&desc, &addr), 0);
    assert_int_equal(addr.has_dct, 1);
    assert_int_equal(addr.dctn, ep->dct->qp_num);
    assert_int_equal(addr.dc_key, ep->dc_key);
    vb_dct_close(ep);
    assert_int_equal(cm.qps_freed, 1 + VB_DCI_POOL);
    assert_int_equal(dc.srqs_freed, 1);
}

static void test_failed_dci_creation_falls_back_to_rc(void **state)
{
    struct vb_ep *ep = *state;
    use_dc_fakes();
    dc.fail_at = 3; /* the second DCI */
    assert_int_equal(vb_dct_open(ep, 1), 0);
    assert_int_equal(ep->dct_enabled, 0);
    assert_null(ep->dct);
    assert_null(ep->srq);
    for (unsigned i = 0; i < VB_DCI_POOL; i++)
        assert_null(ep->dci[i]);
    assert_int_equal(cm.qps, 2); /* the DCT and the first DCI, both destroyed */
    assert_int_equal(cm.qps_freed, 2);
    assert_int_equal(dc.srqs_freed, 1);
}

static void test_failed_dci_transition_falls_back_to_rc(void **state)
{
    struct vb_ep *ep = *state;
    use_dc_fakes();
    modifies.fail_state = IBV_QPS_RTS + 1; /* only DCIs go to RTS */
    assert_int_equal(vb_dct_open(ep, 1), 0);
    assert_int_equal(ep->dct_enabled, 0);
    assert_int_equal(cm.qps, 2);
    assert_int_equal(cm.qps_freed, 2);
}

/* A whole endpoint on the fake device: DC, the DCI pool and the listener
 * come up, and closing releases every object. */
static void test_open_and_close_on_a_fake_device(void **state)
{
    (void)state;
    use_dc_fakes();
    unsetenv("SPINDLE_VERBS_DCT");
    struct tp_config config = {
        .backend = "verbs", .group_name = "t", .host = "127.0.0.1", .self_id = 4};
    struct tp_endpoint *tep = NULL;
    assert_int_equal(tp_verbs_ops.open(&config, &tep), 0);
    struct vb_ep *ep = (struct vb_ep *)tep;
    assert_int_equal(ep->dct_enabled, 1);
    assert_int_equal(dc.creates, 1 + VB_DCI_POOL);
    assert_true(ep->listener_started);
    assert_int_equal(ep->port, 7471);
    struct tp_desc desc;
    struct vb_addr addr;
    assert_int_equal(tp_verbs_ops.address(tep, &desc), 0);
    assert_int_equal(vb_addr_decode(&desc, &addr), 0);
    assert_int_equal(addr.id, 4);
    assert_int_equal(addr.port, 7471);
    assert_int_equal(addr.has_dct, 1);
    assert_string_equal(addr.host, "127.0.0.1");
    tp_verbs_ops.close(tep);
    assert_int_equal(cm.qps, cm.qps_freed);
    assert_int_equal(dc.srqs, dc.srqs_freed);
    assert_int_equal(cm.channels, 1);
    assert_int_equal(cm.channels_freed, 1);
}
#endif

/* Regression (tests/fuzz/fuzz_vb_addr): a peer's address descriptor with a
 * NUL inside the host (which cut it short) or a nonzero pad (which was
 * ignored) decoded to an address that re-encodes to other bytes; a DCT
 * advertised without a key is refused. */
static void test_descriptors_the_encoder_cannot_write_are_refused(void **state)
{
    (void)state;
    struct vb_addr addr = {.port = 7471, .id = 8, .nonce = 5, .port_num = 1}, back;
    snprintf(addr.host, sizeof addr.host, "10.0.0.2");
    struct tp_desc desc;
    assert_int_equal(vb_addr_encode(&addr, &desc), 0);
    assert_int_equal(vb_addr_decode(&desc, &back), 0);
    desc.bytes[VB_ADDR_WIRE + 2] = '\0'; /* "10\0.0.2" */
    assert_int_equal(vb_addr_decode(&desc, &back), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "NUL byte at offset 58"));
    assert_int_equal(vb_addr_encode(&addr, &desc), 0);
    desc.bytes[28] = 1; /* the pad after the DCT number */
    assert_int_equal(vb_addr_decode(&desc, &back), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "pad is 0x1, not 0, at offset 28"));
    /* A DCT with no key (a guessable target), or a has_dct that is no
     * flag. */
    addr.has_dct = 1;
    addr.dctn = 77;
    assert_int_equal(vb_addr_encode(&addr, &desc), 0);
    assert_int_equal(vb_addr_decode(&desc, &back), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "has_dct 1 with DC key 0"));
    addr.dc_key = 0x1234;
    assert_int_equal(vb_addr_encode(&addr, &desc), 0);
    assert_int_equal(vb_addr_decode(&desc, &back), 0);
    assert_int_equal(back.dc_key, 0x1234);
    addr.has_dct = 2;
    assert_int_equal(vb_addr_encode(&addr, &desc), 0);
    assert_int_equal(vb_addr_decode(&desc, &back), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "has_dct 2"));

    struct vb_region region = {0x7f0000001000ull, 4096, 0xabcd}, region_back;
    vb_region_encode(&region, &desc);
    assert_int_equal(desc.len, VB_MR_WIRE);
    assert_int_equal(vb_region_decode(&desc, &region_back), 0);
    assert_int_equal(region_back.addr, region.addr);
    assert_int_equal(region_back.length, 4096);
    assert_int_equal(region_back.rkey, 0xabcd);
    desc.len--;
    assert_int_equal(vb_region_decode(&desc, &region_back), SPINDLE_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_rc_connect_requests_the_right_qp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rc_connect_without_inline_retries_with_none, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rc_connect_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rc_connect_unreachable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rc_connect_address_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rc_connect_route_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rc_connect_disconnected_while_connecting, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rc_connect_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rc_connect_to_another_process_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rc_connect_without_identity_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_rc_route_through_another_device_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_listener_accepts_with_a_receive_qp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listener_rejects_when_the_qp_cannot_be_set_up, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_listener_checks_the_claimed_identity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listener_frees_the_slot_of_a_disconnected_peer, setup,
                                        teardown),
        cmocka_unit_test(test_descriptors_the_encoder_cannot_write_are_refused),
#ifdef SPINDLE_HAVE_MLX5DV
        cmocka_unit_test_setup_teardown(test_dct_and_dci_pool_creation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_dci_creation_falls_back_to_rc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_dci_transition_falls_back_to_rc, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_open_and_close_on_a_fake_device, setup, teardown),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
