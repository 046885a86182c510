/*
 * verbs connections through librdmacm: the listener thread that accepts
 * incoming RC connections (doorbell receivers) and the active side that
 * connects one RC QP per peer.
 *
 * QPs are created by this backend on its own PD and CQs (not by
 * rdma_create_qp, which would bind them to librdmacm's device context) and
 * moved through INIT/RTR/RTS with attributes from rdma_init_qp_attr; the CM
 * exchange carries the QP number. The route's device must therefore be the
 * device this endpoint opened, which is checked by name.
 *
 * Both sides carry struct vb_cm_private (member id and the nonce of the
 * process) in the CM private data; the connecting side checks that the
 * process that accepted is the one whose descriptor it was given, so a
 * restarted process on the same host:port is not mistaken for it. The
 * listener refuses, before it creates anything, a request without that
 * identity and, once the view's member ids are given (tp_set_members), one
 * claiming an id outside them: its connection would be an RC QP with
 * remote-write access, and a member expects doorbells only from its view.
 * Without a key the claimed id is taken on trust, as on libfabric.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <netinet/in.h>

#include "transport/verbs/verbs_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "util/wire.h"

struct vb_cm_private {
    uint32_t id;
    uint64_t nonce;
};

/* The private data both sides send (VB_CM_WIRE bytes), in the wire codec:
 * u32 member id, u32 zero, u64 endpoint nonce. */
void vb_cm_encode(uint32_t id, uint64_t nonce, uint8_t out[VB_CM_WIRE])
{
    struct wire_writer w;
    wire_writer_init(&w, out, VB_CM_WIRE);
    wire_put_u32(&w, id);
    wire_put_zero(&w, 4);
    wire_put_u64(&w, nonce);
}

int vb_cm_decode(const uint8_t *buf, size_t len, uint32_t *id, uint64_t *nonce)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "verbs connection private data");
    if (len != VB_CM_WIRE)
        wire_fail(&r, "%zu bytes, not %u", len, VB_CM_WIRE);
    *id = wire_get_u32(&r, "member id");
    wire_get_zero(&r, 4, "pad");
    *nonce = wire_get_u64(&r, "nonce");
    return wire_finish(&r);
}

/* QP access: remote writes only. Whatever else the CM offers (remote read,
 * atomics) is not needed, and relaxed ordering would break T1/T2. */
#define VB_QP_ACCESS IBV_ACCESS_REMOTE_WRITE

int vb_sq_create_rc(struct vb_ep *ep, struct vb_sq **out)
{
    const struct verbs_api *api = verbs_api_get();
    struct vb_sq *sq = calloc(1, sizeof *sq);
    if (sq == NULL)
        return sp_error(SPINDLE_ENOMEM, "verbs: out of memory for a send queue");
    struct ibv_qp_init_attr attr = {
        .send_cq = ep->send_cq,
        .recv_cq = ep->recv_cq,
        .cap = {.max_send_wr = VB_SQ_DEPTH,
                .max_recv_wr = 1,
                .max_send_sge = 1,
                .max_recv_sge = 1,
                .max_inline_data = VB_MAX_INLINE},
        .qp_type = IBV_QPT_RC,
    };
    sq->qp = api->create_qp(ep->pd, &attr);
    if (sq->qp == NULL) {
        attr.cap.max_inline_data = 0; /* some devices cannot inline at all */
        sq->qp = api->create_qp(ep->pd, &attr);
    }
    if (sq->qp == NULL) {
        free(sq);
        return sp_error(SPINDLE_EIO, "verbs: ibv_create_qp (RC, %u WRs) on %s failed: %s",
                        VB_SQ_DEPTH, ep->dev_name, strerror(errno));
    }
    sq->max_inline = attr.cap.max_inline_data; /* what the device granted */
    pthread_mutex_init(&sq->lock, NULL);
    *out = sq;
    return 0;
}

void vb_sq_destroy(struct vb_sq *sq)
{
    if (sq == NULL)
        return;
    if (sq->qp != NULL)
        verbs_api_get()->destroy_qp(sq->qp);
    pthread_mutex_destroy(&sq->lock);
    free(sq);
}

const char *vb_qp_state_name(enum ibv_qp_state state)
{
    static const char *const names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
    return (unsigned)state < sizeof names / sizeof names[0] ? names[state] : "unknown";
}

/* Moves qp to state with the CM's attributes for id. */
static int vb_qp_to(struct rdma_cm_id *id, struct ibv_qp *qp, enum ibv_qp_state state)
{
    const struct verbs_api *api = verbs_api_get();
    struct ibv_qp_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.qp_state = state;
    int mask = 0;
    int rc = api->rdma_init_qp_attr(id, &attr, &mask);
    if (mask & IBV_QP_ACCESS_FLAGS)
        attr.qp_access_flags = VB_QP_ACCESS;
    if (rc == 0)
        rc = api->modify_qp(qp, &attr, mask);
    if (rc != 0)
        return sp_error(SPINDLE_EIO, "verbs: moving QP %u to %s failed: %s", qp->qp_num,
                        vb_qp_state_name(state), strerror(rc > 0 ? rc : errno));
    return 0;
}

static int vb_same_device(struct vb_ep *ep, struct rdma_cm_id *id, const char *what)
{
    if (id->verbs == NULL || strcmp(id->verbs->device->name, ep->dev_name) != 0)
        return sp_error(SPINDLE_EUNREACH, "verbs: %s uses device '%s', endpoint opened '%s'", what,
                        id->verbs ? id->verbs->device->name : "(none)", ep->dev_name);
    return 0;
}

/* ---- passive side ------------------------------------------------------ */

int vb_set_members(struct tp_endpoint *tep, const uint32_t *ids, uint32_t count)
{
    if (tep == NULL || ids == NULL || count == 0)
        return sp_error(SPINDLE_EINVAL, "verbs set_members: no member ids given");
    uint32_t *copy = malloc((size_t)count * sizeof *copy);
    if (copy == NULL)
        return sp_error(SPINDLE_ENOMEM, "verbs set_members: out of memory for %u ids", count);
    memcpy(copy, ids, (size_t)count * sizeof *copy);
    struct vb_ep *ep = (struct vb_ep *)tep;
    pthread_mutex_lock(&ep->conn_lock);
    uint32_t *old = ep->members;
    ep->members = copy;
    ep->num_members = count;
    pthread_mutex_unlock(&ep->conn_lock);
    free(old);
    return 0;
}

/* Checks, under conn_lock, the identity a connection request carries in
 * its first priv_len bytes of private data (IB CM pads it: the identity is
 * the first VB_CM_WIRE bytes): present and well formed, and naming a member
 * of the view when one was given. 0, or SPINDLE_EPROTO saying
 * why. */
static int vb_check_request(const struct vb_ep *ep, const uint8_t *priv, size_t priv_len)
{
    if (priv_len < VB_CM_WIRE)
        return sp_error(SPINDLE_EPROTO,
                        "verbs: connection request carries %zu bytes of private data, not the "
                        "%u of a member's id and nonce",
                        priv_len, VB_CM_WIRE);
    struct vb_cm_private claim;
    if (vb_cm_decode(priv, VB_CM_WIRE, &claim.id, &claim.nonce) != 0)
        return sp_error(SPINDLE_EPROTO, "verbs: connection request: %s", spindle_errmsg());
    bool admitted = ep->members == NULL;
    for (uint32_t i = 0; i < ep->num_members && !admitted; i++)
        admitted = ep->members[i] == claim.id;
    if (!admitted)
        return sp_error(SPINDLE_EPROTO,
                        "verbs: connection request claims member %u, which is not in this "
                        "member's view",
                        claim.id);
    return 0;
}

static void vb_accept(struct vb_ep *ep, struct rdma_cm_id *id, const uint8_t *priv, size_t priv_len)
{
    const struct verbs_api *api = verbs_api_get();
    pthread_mutex_lock(&ep->conn_lock);
    /* A slot whose peer disconnected is taken again before a new one. */
    unsigned slot = 0;
    while (slot < ep->incoming_count && ep->incoming[slot].id != NULL)
        slot++;
    int rc = slot < VB_INCOMING_MAX
                 ? vb_check_request(ep, priv, priv_len)
                 : sp_error(SPINDLE_EINVAL, "verbs: all %u incoming connections are in use",
                            VB_INCOMING_MAX);
    if (rc == 0)
        rc = vb_same_device(ep, id, "incoming connection");
    struct vb_incoming *in = rc == 0 ? &ep->incoming[slot] : NULL;
    struct ibv_qp_init_attr attr = {
        .send_cq = ep->send_cq,
        .recv_cq = ep->recv_cq,
        .cap = {.max_send_wr = 1, .max_recv_wr = VB_RECVS, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };
    if (in != NULL) {
        in->qp = api->create_qp(ep->pd, &attr);
        rc = in->qp == NULL ? sp_error(SPINDLE_EIO,
                                       "verbs: ibv_create_qp for an incoming "
                                       "connection failed: %s",
                                       strerror(errno))
                            : 0;
    }
    if (rc == 0)
        rc = vb_qp_to(id, in->qp, IBV_QPS_INIT);
    if (rc == 0)
        rc = vb_post_recvs(in, VB_RECVS);
    if (rc == 0)
        rc = vb_qp_to(id, in->qp, IBV_QPS_RTR);
    if (rc == 0)
        rc = vb_qp_to(id, in->qp, IBV_QPS_RTS);
    if (rc == 0) {
        uint8_t mine[VB_CM_WIRE];
        vb_cm_encode(ep->self_id, ep->nonce, mine);
        struct rdma_conn_param param = {.private_data = mine,
                                        .private_data_len = sizeof mine,
                                        .qp_num = in->qp->qp_num,
                                        .responder_resources = 1,
                                        .initiator_depth = 1,
                                        .rnr_retry_count = 7};
        rc = api->rdma_accept(id, &param) == 0
                 ? 0
                 : sp_error(SPINDLE_EIO, "verbs: rdma_accept failed: %s", strerror(errno));
    }
    if (rc == 0) {
        in->id = id;
        if (slot == ep->incoming_count)
            ep->incoming_count++;
    } else {
        sp_log(SP_LOG_WARN, "verbs", "rejecting a connection: %s", spindle_errmsg());
        if (in != NULL && in->qp != NULL)
            api->destroy_qp(in->qp);
        if (in != NULL)
            in->qp = NULL;
        api->rdma_reject(id, NULL, 0);
        api->rdma_destroy_id(id);
    }
    pthread_mutex_unlock(&ep->conn_lock);
}

/* The peer of an accepted connection disconnected (or it never became
 * established): its slot is freed for a later connection. Its QP is
 * destroyed under conn_lock, which vb_drain_recv holds to re-post a
 * receive, so a receive is never posted to a destroyed QP; a completion
 * reaped after the slot was taken again re-posts on the new QP one receive
 * more than it lacks (refused: its queue is full) and counts one spurious
 * ring. Ids the listener does not hold (a rejected request's) are left. */
static void vb_release_incoming(struct vb_ep *ep, struct rdma_cm_id *id)
{
    const struct verbs_api *api = verbs_api_get();
    pthread_mutex_lock(&ep->conn_lock);
    for (unsigned i = 0; i < ep->incoming_count; i++) {
        struct vb_incoming *in = &ep->incoming[i];
        if (in->id != id)
            continue;
        api->destroy_qp(in->qp);
        api->rdma_destroy_id(in->id);
        in->qp = NULL;
        in->id = NULL;
        while (ep->incoming_count > 0 && ep->incoming[ep->incoming_count - 1].id == NULL)
            ep->incoming_count--;
        break;
    }
    pthread_mutex_unlock(&ep->conn_lock);
}

static void *vb_listener_main(void *arg)
{
    struct vb_ep *ep = arg;
    const struct verbs_api *api = verbs_api_get();
    for (;;) {
        struct pollfd fds[2] = {{.fd = ep->cm_channel->fd, .events = POLLIN},
                                {.fd = ep->stop_fd, .events = POLLIN}};
        if (poll(fds, 2, -1) < 0 && errno != EINTR)
            break;
        if (fds[1].revents & POLLIN)
            break;
        if (!(fds[0].revents & POLLIN))
            continue;
        struct rdma_cm_event *event = NULL;
        if (api->rdma_get_cm_event(ep->cm_channel, &event) != 0)
            continue;
        struct rdma_cm_id *id = event->id;
        enum rdma_cm_event_type type = event->event;
        /* The private data lives in the event: copy it before the ack. */
        uint8_t priv[VB_CM_WIRE];
        size_t priv_len = 0;
        if (event->param.conn.private_data != NULL) {
            priv_len = event->param.conn.private_data_len;
            memcpy(priv, event->param.conn.private_data,
                   priv_len < VB_CM_WIRE ? priv_len : VB_CM_WIRE);
        }
        api->rdma_ack_cm_event(event);
        if (type == RDMA_CM_EVENT_CONNECT_REQUEST)
            vb_accept(ep, id, priv, priv_len);
        else if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_CONNECT_ERROR ||
                 type == RDMA_CM_EVENT_UNREACHABLE)
            vb_release_incoming(ep, id);
    }
    return NULL;
}

static int vb_sockaddr(const char *host, uint16_t port, struct sockaddr_storage *out)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    char service[8];
    snprintf(service, sizeof service, "%u", port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0 || res == NULL)
        return sp_error(SPINDLE_EINVAL, "verbs: cannot resolve '%s': %s", host, gai_strerror(rc));
    memcpy(out, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

int vb_listen_start(struct vb_ep *ep)
{
    const struct verbs_api *api = verbs_api_get();
    struct sockaddr_storage addr;
    int rc = vb_sockaddr(ep->host, ep->port, &addr);
    if (rc != 0)
        return rc;
    ep->cm_channel = api->rdma_create_event_channel();
    if (ep->cm_channel == NULL)
        return sp_error(SPINDLE_EIO, "verbs: rdma_create_event_channel failed: %s",
                        strerror(errno));
    if (api->rdma_create_id(ep->cm_channel, &ep->listen_id, ep, RDMA_PS_TCP) != 0)
        return sp_error(SPINDLE_EIO, "verbs: rdma_create_id failed: %s", strerror(errno));
    if (api->rdma_bind_addr(ep->listen_id, (struct sockaddr *)&addr) != 0)
        return sp_error(errno == EADDRINUSE ? SPINDLE_EADDRINUSE : SPINDLE_EIO,
                        "verbs: cannot bind %s:%u: %s", ep->host, ep->port, strerror(errno));
    if (api->rdma_listen(ep->listen_id, (int)VB_INCOMING_MAX) != 0)
        return sp_error(SPINDLE_EIO, "verbs: rdma_listen on %s:%u failed: %s", ep->host, ep->port,
                        strerror(errno));
    struct sockaddr *bound = (struct sockaddr *)&ep->listen_id->route.addr.src_addr;
    if (bound->sa_family == AF_INET)
        ep->port = ntohs(((struct sockaddr_in *)bound)->sin_port);
    else if (bound->sa_family == AF_INET6)
        ep->port = ntohs(((struct sockaddr_in6 *)bound)->sin6_port);
    ep->stop_fd = eventfd(0, EFD_CLOEXEC);
    if (ep->stop_fd < 0)
        return sp_error(SPINDLE_EIO, "verbs: eventfd failed: %s", strerror(errno));
    if (pthread_create(&ep->listener, NULL, vb_listener_main, ep) != 0)
        return sp_error(SPINDLE_EIO, "verbs: cannot start the listener thread");
    ep->listener_started = 1;
    return 0;
}

void vb_listen_stop(struct vb_ep *ep)
{
    const struct verbs_api *api = verbs_api_get();
    if (ep->listener_started) {
        uint64_t one = 1;
        ssize_t n = write(ep->stop_fd, &one, sizeof one);
        (void)n;
        pthread_join(ep->listener, NULL);
        ep->listener_started = 0;
    }
    for (unsigned i = 0; i < ep->incoming_count; i++) {
        if (ep->incoming[i].id == NULL)
            continue; /* freed when its peer disconnected */
        api->rdma_disconnect(ep->incoming[i].id);
        api->destroy_qp(ep->incoming[i].qp);
        api->rdma_destroy_id(ep->incoming[i].id);
        ep->incoming[i].qp = NULL;
        ep->incoming[i].id = NULL;
    }
    ep->incoming_count = 0;
    if (ep->listen_id != NULL)
        api->rdma_destroy_id(ep->listen_id);
    ep->listen_id = NULL;
    if (ep->cm_channel != NULL)
        api->rdma_destroy_event_channel(ep->cm_channel);
    ep->cm_channel = NULL;
    if (ep->stop_fd >= 0)
        close(ep->stop_fd);
    ep->stop_fd = -1;
}

/* ---- active side ------------------------------------------------------- */

/* The error for an unexpected CM event: names the peer and what happened. */
static int vb_cm_error(const struct vb_peer *peer, enum rdma_cm_event_type got, int status,
                       enum rdma_cm_event_type want)
{
    if (got == RDMA_CM_EVENT_REJECTED)
        return sp_error(SPINDLE_EUNREACH,
                        "verbs: peer %u at %s:%u rejected the connection (status %d; is it "
                        "listening?)",
                        peer->addr.id, peer->addr.host, peer->addr.port, status);
    return sp_error(SPINDLE_EUNREACH,
                    "verbs: peer %u at %s:%u unreachable: %s instead of %s (status %d)",
                    peer->addr.id, peer->addr.host, peer->addr.port, rdma_event_str(got),
                    rdma_event_str(want), status);
}

/* Waits for CM event `want` on the peer's channel until deadline; with
 * reply, also copies the event's private data there (an error when it is
 * shorter than *reply). */
static int vb_cm_wait(struct vb_peer *peer, enum rdma_cm_event_type want, uint64_t deadline_ns,
                      struct vb_cm_private *reply)
{
    const struct verbs_api *api = verbs_api_get();
    for (;;) {
        uint64_t now = sp_now_ns();
        if (now >= deadline_ns)
            return sp_error(SPINDLE_EUNREACH, "verbs: peer %u at %s:%u: timed out waiting for %s",
                            peer->addr.id, peer->addr.host, peer->addr.port, rdma_event_str(want));
        struct pollfd pfd = {.fd = peer->channel->fd, .events = POLLIN};
        int ready = poll(&pfd, 1, (int)((deadline_ns - now) / 1000000u) + 1);
        if (ready <= 0)
            continue;
        struct rdma_cm_event *event = NULL;
        if (api->rdma_get_cm_event(peer->channel, &event) != 0)
            return sp_error(SPINDLE_EIO, "verbs: rdma_get_cm_event for peer %u at %s:%u: %s",
                            peer->addr.id, peer->addr.host, peer->addr.port, strerror(errno));
        enum rdma_cm_event_type got = event->event;
        int status = event->status;
        /* IB CM pads private data: the reply is its first VB_CM_WIRE bytes. */
        int have_reply = event->param.conn.private_data != NULL &&
                         event->param.conn.private_data_len >= VB_CM_WIRE;
        if (got == want && reply != NULL && have_reply &&
            vb_cm_decode(event->param.conn.private_data, VB_CM_WIRE, &reply->id, &reply->nonce) !=
                0)
            have_reply = 0;
        api->rdma_ack_cm_event(event);
        if (got != want)
            return vb_cm_error(peer, got, status, want);
        if (reply != NULL && !have_reply)
            return sp_error(SPINDLE_EUNREACH,
                            "verbs: peer %u at %s:%u accepted without identifying itself",
                            peer->addr.id, peer->addr.host, peer->addr.port);
        return 0;
    }
}

/* The process that accepted must be the one the descriptor names. */
static int vb_check_reply(const struct vb_peer *peer, const struct vb_cm_private *reply)
{
    if (reply->id == peer->addr.id && reply->nonce == peer->addr.nonce)
        return 0;
    return sp_error(SPINDLE_EUNREACH,
                    "verbs: peer %u at %s:%u answered as member %u with nonce %016llx, expected "
                    "%016llx: another process holds that address",
                    peer->addr.id, peer->addr.host, peer->addr.port, reply->id,
                    (unsigned long long)reply->nonce, (unsigned long long)peer->addr.nonce);
}

static uint64_t vb_deadline(int timeout_ms)
{
    return sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : VB_DEFAULT_TIMEOUT) * 1000000u;
}

int vb_rc_connect(struct vb_ep *ep, struct vb_peer *peer, int timeout_ms)
{
    const struct verbs_api *api = verbs_api_get();
    uint64_t deadline = vb_deadline(timeout_ms);
    struct sockaddr_storage dst;
    int rc = vb_sockaddr(peer->addr.host, peer->addr.port, &dst);
    if (rc != 0)
        return rc;
    peer->channel = api->rdma_create_event_channel();
    if (peer->channel == NULL ||
        api->rdma_create_id(peer->channel, &peer->id, peer, RDMA_PS_TCP) != 0)
        return sp_error(SPINDLE_EIO, "verbs: cannot create a CM id for peer %u at %s:%u: %s",
                        peer->addr.id, peer->addr.host, peer->addr.port, strerror(errno));
    int ms = timeout_ms > 0 ? timeout_ms : VB_DEFAULT_TIMEOUT;
    if (api->rdma_resolve_addr(peer->id, NULL, (struct sockaddr *)&dst, ms) != 0)
        return sp_error(SPINDLE_EUNREACH, "verbs: cannot resolve peer %u at %s:%u: %s",
                        peer->addr.id, peer->addr.host, peer->addr.port, strerror(errno));
    rc = vb_cm_wait(peer, RDMA_CM_EVENT_ADDR_RESOLVED, deadline, NULL);
    if (rc == 0 && api->rdma_resolve_route(peer->id, ms) != 0)
        rc = sp_error(SPINDLE_EUNREACH, "verbs: no route to peer %u at %s:%u: %s", peer->addr.id,
                      peer->addr.host, peer->addr.port, strerror(errno));
    if (rc == 0)
        rc = vb_cm_wait(peer, RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, NULL);
    char route[VB_HOST_MAX + 48];
    snprintf(route, sizeof route, "the route to peer %u at %s:%u", peer->addr.id, peer->addr.host,
             peer->addr.port);
    if (rc == 0)
        rc = vb_same_device(ep, peer->id, route);
    struct vb_sq *sq = NULL;
    if (rc == 0)
        rc = vb_sq_create_rc(ep, &sq);
    if (rc == 0)
        rc = vb_qp_to(peer->id, sq->qp, IBV_QPS_INIT);
    if (rc == 0) {
        uint8_t priv[VB_CM_WIRE];
        vb_cm_encode(ep->self_id, ep->nonce, priv);
        struct rdma_conn_param param = {.private_data = priv,
                                        .private_data_len = sizeof priv,
                                        .qp_num = sq->qp->qp_num,
                                        .responder_resources = 1,
                                        .initiator_depth = 1,
                                        .retry_count = 7,
                                        .rnr_retry_count = 7};
        if (api->rdma_connect(peer->id, &param) != 0)
            rc = sp_error(SPINDLE_EUNREACH, "verbs: rdma_connect to peer %u at %s:%u: %s",
                          peer->addr.id, peer->addr.host, peer->addr.port, strerror(errno));
    }
    struct vb_cm_private reply;
    if (rc == 0)
        rc = vb_cm_wait(peer, RDMA_CM_EVENT_CONNECT_RESPONSE, deadline, &reply);
    if (rc == 0)
        rc = vb_check_reply(peer, &reply);
    if (rc == 0)
        rc = vb_qp_to(peer->id, sq->qp, IBV_QPS_RTR);
    if (rc == 0)
        rc = vb_qp_to(peer->id, sq->qp, IBV_QPS_RTS);
    if (rc == 0 && api->rdma_establish(peer->id) != 0)
        rc = sp_error(SPINDLE_EIO, "verbs: rdma_establish failed: %s", strerror(errno));
    if (rc != 0) {
        vb_sq_destroy(sq);
        return rc;
    }
    peer->sq = sq;
    return 0;
}

void vb_rc_destroy(struct vb_ep *ep, struct vb_peer *peer)
{
    const struct verbs_api *api = verbs_api_get();
    if (peer->id != NULL && peer->sq != NULL)
        api->rdma_disconnect(peer->id);
    vb_sq_destroy(peer->sq);
    peer->sq = NULL;
    if (peer->id != NULL)
        api->rdma_destroy_id(peer->id);
    peer->id = NULL;
    if (peer->channel != NULL)
        api->rdma_destroy_event_channel(peer->channel);
    peer->channel = NULL;
}
