/*
 * libfabric backend: per-connection resources (endpoint, rings, receive
 * buffers, memory registration honouring the provider's mr_mode) and the
 * listener side of connection set-up. See fabric_impl.h for ownership.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport/fabric/fabric_impl.h"
#include "util/error.h"
#include "util/log.h"

/* Bytes of one connection's receive buffers (msgbuf). */
#define FAB_MSGBUF_SIZE ((size_t)FAB_RECVS * FAB_MSG_SIZE)

int fab_mr_register(struct fab_ep *ep, struct fab_conn *conn, void *buf, size_t len,
                    uint64_t access, struct fid_mr **mr, void **desc)
{
    int mode = ep->info->domain_attr->mr_mode;
    uint64_t key = 0;
    if (!(mode & FI_MR_PROV_KEY))
        key = __atomic_fetch_add(&ep->next_key, 1, __ATOMIC_RELAXED);
    int rc = fi_mr_reg(ep->domain, buf, len, access, 0, key, 0, mr, conn);
    if (rc == 0 && (mode & FI_MR_ENDPOINT)) {
        rc = fi_mr_bind(*mr, &conn->fep->fid, 0);
        if (rc == 0)
            rc = fi_mr_enable(*mr);
    }
    if (rc != 0) {
        if (*mr != NULL)
            fi_close(&(*mr)->fid);
        *mr = NULL;
        return sp_error(SPINDLE_EIO, "fabric: cannot register %zu bytes for %s: %s", len,
                        conn->name, fi_strerror(-rc));
    }
    *desc = fi_mr_desc(*mr);
    atomic_fetch_add(&ep->st_pinned, len);
    return 0;
}

static int fab_post_recv(struct fab_conn *conn, struct fab_ctx *ctx)
{
    ssize_t rc = fi_recv(conn->fep, ctx->buf, FAB_MSG_SIZE, conn->msg_desc, 0, &ctx->fi);
    if (rc != 0 && rc != -FI_EAGAIN)
        return sp_error(SPINDLE_EIO, "fabric: fi_recv on %s: %s", conn->name,
                        fi_strerror((int)-rc));
    return 0;
}

int fab_repost_recv(struct fab_conn *conn, struct fab_ctx *ctx)
{
    return fab_post_recv(conn, ctx);
}

static int fab_alloc_buffers(struct fab_ep *ep, struct fab_conn *conn)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    conn->ring = aligned_alloc(page, FAB_RING_SIZE);
    conn->msgbuf = aligned_alloc(page, FAB_MSGBUF_SIZE);
    if (conn->ring == NULL || conn->msgbuf == NULL)
        return sp_error(SPINDLE_ENOMEM, "fabric: cannot allocate rings for %s", conn->name);
    memset(conn->ring, 0, FAB_RING_SIZE);
    memset(conn->msgbuf, 0, FAB_MSGBUF_SIZE);
    uint64_t ring_access = conn->incoming ? FI_REMOTE_WRITE : FI_WRITE;
    int rc = fab_mr_register(ep, conn, conn->ring, FAB_RING_SIZE, ring_access, &conn->ring_mr,
                             &conn->ring_desc);
    if (rc == 0)
        rc = fab_mr_register(ep, conn, conn->msgbuf, FAB_MSGBUF_SIZE, FI_RECV | FI_SEND,
                             &conn->msg_mr, &conn->msg_desc);
    return rc;
}

int fab_conn_setup(struct fab_ep *ep, struct fab_conn *conn, struct fi_info *info, int incoming)
{
    conn->ep = ep;
    conn->incoming = incoming;
    atomic_store(&conn->state, FAB_CONN_CONNECTING);
    int rc = fi_endpoint(ep->domain, info, &conn->fep, conn);
    if (rc != 0) {
        conn->fep = NULL;
        return sp_error(SPINDLE_EIO, "fabric: fi_endpoint for %s: %s", conn->name,
                        fi_strerror(-rc));
    }
    rc = fi_ep_bind(conn->fep, &ep->eq->fid, 0);
    if (rc == 0)
        rc = fi_ep_bind(conn->fep, &ep->cq->fid, FI_RECV);
    /* Sends complete selectively: a local completion wakes this endpoint's
     * progress thread through the CQ's wait object, which at light load
     * every push did (fabric_post.c asks for one only now and then). */
    if (rc == 0)
        rc = fi_ep_bind(conn->fep, &ep->cq->fid, FI_TRANSMIT | FI_SELECTIVE_COMPLETION);
    if (rc != 0)
        return sp_error(SPINDLE_EIO, "fabric: binding %s to queues: %s", conn->name,
                        fi_strerror(-rc));
    rc = fab_alloc_buffers(ep, conn);
    if (rc != 0)
        return rc;
    rc = fi_enable(conn->fep);
    if (rc != 0)
        return sp_error(SPINDLE_EIO, "fabric: fi_enable for %s: %s", conn->name, fi_strerror(-rc));
    size_t tx = info->tx_attr != NULL ? info->tx_attr->size : 0;
    conn->ops_max = tx > 64 && tx - 64 < FAB_OPS_MAX ? (uint32_t)(tx - 64) : FAB_OPS_MAX;
    conn->signal_every = conn->ops_max >= 4 ? conn->ops_max / 4 : 1;
    for (unsigned i = 0; i < FAB_RECVS; i++) {
        struct fab_ctx *ctx = &conn->recv_ctx[i];
        ctx->conn = conn;
        ctx->buf = conn->msgbuf + (size_t)i * FAB_MSG_SIZE;
        atomic_store_explicit(&ctx->kind, FAB_CTX_RECV, memory_order_release);
        rc = fab_post_recv(conn, ctx);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Releases every libfabric object and buffer; the struct itself stays. */
void fab_conn_teardown(struct fab_conn *conn)
{
    size_t pinned = 0;
    if (conn->fep != NULL) {
        fi_close(&conn->fep->fid);
        conn->fep = NULL;
    }
    if (conn->ring_mr != NULL) {
        fi_close(&conn->ring_mr->fid);
        conn->ring_mr = NULL;
        pinned += FAB_RING_SIZE;
    }
    if (conn->msg_mr != NULL) {
        fi_close(&conn->msg_mr->fid);
        conn->msg_mr = NULL;
        pinned += FAB_MSGBUF_SIZE;
    }
    if (conn->ep != NULL && pinned)
        atomic_fetch_sub(&conn->ep->st_pinned, pinned);
    free(conn->ring);
    free(conn->msgbuf);
    conn->ring = NULL;
    conn->msgbuf = NULL;
    fab_auth_wipe(conn->req_key, sizeof conn->req_key);
}

int fab_send_msg(struct fab_conn *conn, uint32_t kind, uint64_t value)
{
    struct fab_msg msg = {FAB_MSG_MAGIC, kind, value};
    uint8_t wire[FAB_MSG_WIRE];
    fab_msg_encode(&msg, wire);
    ssize_t rc = fi_inject(conn->fep, wire, sizeof wire, 0);
    if (rc == -FI_EAGAIN)
        return SPINDLE_EAGAIN;
    if (rc != 0)
        return sp_error(SPINDLE_EPEERFAILED, "fabric: message to %s failed: %s", conn->name,
                        fi_strerror((int)-rc));
    return 0;
}

static void fab_reject(struct fab_ep *ep, struct fi_info *info, const char *why)
{
    SP_LOG_WARNING("fabric", "rejecting a connection request on %s:%u: %s", ep->host, ep->port,
                   why);
    fi_reject(ep->pep, info->handle, NULL, 0);
}

/* Why a well-formed request from a key holder is still refused, or NULL:
 * a replay of a request this listener already accepted, or a second live
 * connection from the same endpoint. */
static const char *fab_request_refused(const struct fab_ep *ep, const struct fab_req_data *req,
                                       char *why, size_t len)
{
    for (uint32_t i = 0; i < ep->num_incoming; i++) {
        const struct fab_conn *c = ep->incoming[i];
        if (c->remote_id != req->src_id)
            continue;
        if (c->conn_nonce == req->conn_nonce) {
            snprintf(why, len,
                     "replayed request of member %u (request nonce %016llx accepted before)",
                     req->src_id, (unsigned long long)req->conn_nonce);
            return why;
        }
        int state = atomic_load(&c->state);
        if (c->remote_nonce == req->src_nonce && !c->bye &&
            (state == FAB_CONN_CONNECTING || state == FAB_CONN_CONNECTED)) {
            snprintf(why, len, "member %u already has a live connection from that endpoint",
                     req->src_id);
            return why;
        }
    }
    return NULL;
}

/* Checks the request's MAC with the group keys (keys, num_keys: the
 * endpoint's at the request's arrival): the index of the key that made it,
 * or -1 after rejecting the request. Without keys, a request that carries
 * a MAC is refused rather than taken unauthenticated. */
static int fab_request_authentic(struct fab_ep *ep, struct fi_info *info,
                                 const uint8_t wire[FAB_REQ_WIRE], const struct fab_req_data *req,
                                 const uint8_t (*keys)[FAB_MAC_BYTES], uint32_t num_keys)
{
    if (num_keys > 0) {
        int key = fab_req_check(keys, num_keys, wire);
        if (key < 0) {
            char why[200];
            snprintf(why, sizeof why,
                     "request claiming member %u is not authenticated with the group key",
                     req->src_id);
            fab_reject(ep, info, why);
        }
        return key;
    }
    static const uint8_t none[FAB_MAC_BYTES];
    if (memcmp(req->mac, none, sizeof none) != 0) {
        fab_reject(ep, info, "request carries a MAC but this endpoint has no group key");
        return -1;
    }
    return 0;
}

static void fab_accept_request(struct fab_ep *ep, struct fi_eq_cm_entry *entry,
                               const uint8_t wire[FAB_REQ_WIRE], const struct fab_req_data *request,
                               const uint8_t (*keys)[FAB_MAC_BYTES], uint32_t num_keys);

/* Progress thread: a writer asks to connect. Validates who it expects us to
 * be and, with a group key, that it holds the key and is no replay, before
 * allocating anything; gives it a landing ring and accepts. */
void fab_handle_connreq(struct fab_ep *ep, struct fi_eq_cm_entry *entry, size_t len)
{
    struct fab_req_data req;
    uint8_t wire[FAB_REQ_WIRE];
    size_t data_len = len > sizeof *entry ? len - sizeof *entry : 0;
    if (data_len < FAB_REQ_WIRE) {
        fab_reject(ep, entry->info, "request carries no spindle handshake");
        return;
    }
    /* Providers may pad private data: the request is its first bytes. */
    memcpy(wire, entry->data, FAB_REQ_WIRE);
    if (fab_req_decode(wire, FAB_REQ_WIRE, &req) != 0) {
        fab_reject(ep, entry->info, spindle_errmsg());
        return;
    }
    if (req.dst_nonce != ep->nonce) {
        fab_reject(ep, entry->info, "request is for another endpoint (stale address?)");
        return;
    }
    /* One copy of the keys for the check and the accept: tp_set_keys may
     * replace the endpoint's meanwhile. */
    uint8_t keys[FAB_KEYS_MAX][FAB_MAC_BYTES];
    uint32_t num_keys = fab_auth_snapshot(ep, keys);
    fab_accept_request(ep, entry, wire, &req, keys, num_keys);
    fab_auth_wipe(keys, sizeof keys);
}

/* fab_handle_connreq, once the request is well formed and for us. */
static void fab_accept_request(struct fab_ep *ep, struct fi_eq_cm_entry *entry,
                               const uint8_t wire[FAB_REQ_WIRE], const struct fab_req_data *request,
                               const uint8_t (*keys)[FAB_MAC_BYTES], uint32_t num_keys)
{
    const struct fab_req_data req = *request;
    int key = fab_request_authentic(ep, entry->info, wire, &req, keys, num_keys);
    if (key < 0)
        return;
    char why[200];
    if (!fab_member_admitted(ep, req.src_id)) {
        /* Its writes would be held to that id's grants: an id outside the
         * view is not one this member expects anything from. */
        snprintf(why, sizeof why, "request claims member %u, which is not in this member's view",
                 req.src_id);
        fab_reject(ep, entry->info, why);
        return;
    }
    if (fab_request_refused(ep, &req, why, sizeof why) != NULL) {
        fab_reject(ep, entry->info, why);
        return;
    }
    if (ep->num_incoming >= FAB_CONNS_MAX) {
        fab_reject(ep, entry->info, "too many incoming connections");
        return;
    }
    struct fab_conn *conn = calloc(1, sizeof *conn);
    if (conn == NULL) {
        fab_reject(ep, entry->info, "out of memory");
        return;
    }
    snprintf(conn->name, sizeof conn->name, "member %u (incoming)", req.src_id);
    conn->remote_id = req.src_id;
    conn->remote_nonce = req.src_nonce;
    conn->conn_nonce = req.conn_nonce;
    uint32_t index = ep->num_incoming;
    ep->incoming[ep->num_incoming++] = conn;
    int rc = fab_conn_setup(ep, conn, entry->info, 1);
    struct fab_acc_data acc = {FAB_ACC_MAGIC, index, 0, 0, FAB_RING_SIZE, {0}};
    if (rc == 0) {
        if (ep->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
            acc.ring_addr = (uint64_t)(uintptr_t)conn->ring;
        acc.ring_key = fi_mr_key(conn->ring_mr);
        uint8_t acc_wire[FAB_ACC_WIRE];
        fab_acc_encode(&acc, acc_wire);
        if (num_keys > 0)
            fab_acc_seal(keys[key], wire, acc_wire);
        rc = fi_accept(conn->fep, acc_wire, sizeof acc_wire);
        if (rc != 0)
            rc = sp_error(SPINDLE_EIO, "fi_accept: %s", fi_strerror(-rc));
    }
    if (rc != 0) {
        SP_LOG_WARNING("fabric", "cannot accept member %u: %s", req.src_id, spindle_errmsg());
        if (conn->fep == NULL)
            fi_reject(ep->pep, entry->info->handle, NULL, 0);
        fab_conn_teardown(conn);
        atomic_store(&conn->state, FAB_CONN_CLOSED);
    }
}
