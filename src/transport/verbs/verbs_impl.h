/*
 * Private state of the rdma-core verbs backend (verbs.c, verbs_api.c,
 * verbs_conn.c, verbs_post.c, verbs_dci.c, verbs_dct.c).
 *
 * Owns: one device context, protection domain, send CQ, doorbell (receive)
 * CQ with its completion channel, an eventfd for self-rings and a librdmacm
 * listener thread per tp_endpoint; one RC QP (or a DC address) per tp_peer.
 *
 * Every control-path call goes through struct verbs_api so unit tests can
 * substitute a fake device; the data path uses the header-inline verbs
 * (ibv_post_send, ibv_poll_cq, ...) which dispatch through the provider ops
 * of the object's ibv_context, so a fake context fakes them too.
 *
 * Threads: tp_post_writes/tp_doorbell_ring for one peer are serialised by the
 * caller; tp_poll and tp_doorbell_wait run on one thread. Send-queue
 * accounting (posted, completed) is written by the posting thread (posted)
 * and the polling thread (completed), so both are atomics. A DCI is shared
 * by several peers: posts to it, and its reset after an error completion
 * (done by the polling thread, verbs_dci.c), hold its lock. The listener
 * thread creates incoming connections, and frees those whose peer
 * disconnected, under conn_lock; the polling thread re-posts a doorbell
 * receive under it.
 *
 * Invariants: posted - completed <= VB_SQ_DEPTH per QP; every VB_SIGNAL_EVERY-th
 * work request of a QP is signaled, so at most VB_SIGNAL_EVERY-1 posted
 * requests are unreclaimable, and a batch builds at most VB_BATCH_MAX_WRS
 * requests so that it always fits once the rest is reclaimed; a DCI reset
 * happens only once every posted request has completed (in error or not)
 * and sets completed = posted before the flushed requests are posted again;
 * nothing is posted to a DCI between its first error completion and its
 * reset; a failed peer is never posted to again; peer memory lives until
 * endpoint close (flushed completions may still name it).
 */
#ifndef SP_TRANSPORT_VERBS_IMPL_H
#define SP_TRANSPORT_VERBS_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#ifdef SPINDLE_HAVE_MLX5DV
#include <infiniband/mlx5dv.h>
#endif

#include "transport/transport.h"

#define VB_SQ_DEPTH     512u               /* send work requests per QP */
#define VB_SIGNAL_EVERY (VB_SQ_DEPTH / 4u) /* signal one WR in this many */
/* Largest chain one batch may build. Up to VB_SIGNAL_EVERY-1 unsignaled
 * requests can stay unreclaimable (no later signaled completion retires
 * them yet), so a larger chain could be refused with SPINDLE_EAGAIN forever;
 * this bound keeps "poll, then retry" live. It covers the SST's largest
 * batch (256 writes) plus a doorbell. */
#define VB_BATCH_MAX_WRS   (VB_SQ_DEPTH - (VB_SIGNAL_EVERY - 1u))
#define VB_RECVS           32u                 /* doorbell receives per incoming QP */
#define VB_PEERS_MAX       48u                 /* outgoing peers per endpoint */
#define VB_INCOMING_MAX    64u                 /* incoming connections per endpoint */
#define VB_CQ_DEPTH        (VB_SQ_DEPTH * 64u) /* send CQ entries */
#define VB_RECV_CQ_DEPTH   (VB_RECVS * 80u)    /* doorbell CQ entries */
#define VB_MAX_INLINE      128u                /* requested inline size */
#define VB_HOST_MAX        64u
#define VB_ADDR_WIRE       56u /* fixed part of an address descriptor, before the host */
#define VB_DESC_MAX        (VB_ADDR_WIRE + VB_HOST_MAX - 1u) /* longest descriptor */
#define VB_CM_WIRE         16u   /* connection private data: id, pad, nonce */
#define VB_MR_WIRE         24u   /* a region descriptor: magic, rkey, address, length */
#define VB_DCI_POOL        4u    /* DC initiators per endpoint */
#define VB_DCT_HOT_WRITES  4096u /* writes before a peer gets its own RC QP */
#define VB_DEFAULT_TIMEOUT 5000

#define VB_ADDR_MAGIC 0x53505641u /* "SPVA" */
#define VB_MR_MAGIC   0x5350564du /* "SPVM" */

/* Control-path entry points. Defaults are the real rdma-core functions;
 * tests install a fake table with verbs_api_set(). */
struct verbs_api {
    struct ibv_device **(*get_device_list)(int *num);
    void (*free_device_list)(struct ibv_device **list);
    struct ibv_context *(*open_device)(struct ibv_device *device);
    int (*close_device)(struct ibv_context *context);
    int (*query_device_ex)(struct ibv_context *context, struct ibv_device_attr_ex *attr);
    int (*query_port)(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr);
    int (*query_gid)(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
    int (*dealloc_pd)(struct ibv_pd *pd);
    struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *context);
    int (*destroy_comp_channel)(struct ibv_comp_channel *channel);
    struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe, void *cq_context,
                                struct ibv_comp_channel *channel, int comp_vector);
    int (*destroy_cq)(struct ibv_cq *cq);
    int (*get_cq_event)(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context);
    void (*ack_cq_events)(struct ibv_cq *cq, unsigned int nevents);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access);
    int (*dereg_mr)(struct ibv_mr *mr);
    int (*advise_mr)(struct ibv_pd *pd, enum ibv_advise_mr_advice advice, uint32_t flags,
                     struct ibv_sge *sg_list, uint32_t num_sge);
    struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
    int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
    int (*destroy_qp)(struct ibv_qp *qp);
    struct ibv_srq *(*create_srq)(struct ibv_pd *pd, struct ibv_srq_init_attr *attr);
    int (*destroy_srq)(struct ibv_srq *srq);
    struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
    int (*destroy_ah)(struct ibv_ah *ah);
    struct rdma_event_channel *(*rdma_create_event_channel)(void);
    void (*rdma_destroy_event_channel)(struct rdma_event_channel *channel);
    int (*rdma_create_id)(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
                          enum rdma_port_space ps);
    int (*rdma_destroy_id)(struct rdma_cm_id *id);
    int (*rdma_bind_addr)(struct rdma_cm_id *id, struct sockaddr *addr);
    int (*rdma_listen)(struct rdma_cm_id *id, int backlog);
    int (*rdma_resolve_addr)(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
                             int timeout_ms);
    int (*rdma_resolve_route)(struct rdma_cm_id *id, int timeout_ms);
    int (*rdma_connect)(struct rdma_cm_id *id, struct rdma_conn_param *param);
    int (*rdma_accept)(struct rdma_cm_id *id, struct rdma_conn_param *param);
    int (*rdma_reject)(struct rdma_cm_id *id, const void *data, uint8_t len);
    int (*rdma_establish)(struct rdma_cm_id *id);
    int (*rdma_disconnect)(struct rdma_cm_id *id);
    int (*rdma_init_qp_attr)(struct rdma_cm_id *id, struct ibv_qp_attr *attr, int *mask);
    int (*rdma_get_cm_event)(struct rdma_event_channel *channel, struct rdma_cm_event **event);
    int (*rdma_ack_cm_event)(struct rdma_cm_event *event);
#ifdef SPINDLE_HAVE_MLX5DV
    int (*mlx5dv_query_device)(struct ibv_context *context, struct mlx5dv_context *out);
    struct ibv_qp *(*mlx5dv_create_qp)(struct ibv_context *context,
                                       struct ibv_qp_init_attr_ex *attr,
                                       struct mlx5dv_qp_init_attr *mlx5_attr);
    struct ibv_qp_ex *(*qp_to_qp_ex)(struct ibv_qp *qp);
    struct mlx5dv_qp_ex *(*mlx5dv_qp_ex_from_ibv_qp_ex)(struct ibv_qp_ex *qp);
#endif
};

/* The table in use (never NULL). */
const struct verbs_api *verbs_api_get(void);
/* Installs api (NULL restores the real functions). For tests; call only
 * while no endpoint is open. */
void verbs_api_set(const struct verbs_api *api);
/* The table of real rdma-core functions. */
const struct verbs_api *verbs_api_default(void);

struct vb_ep;
struct vb_peer;

enum vb_wr_kind { VB_WR_WRITE = 1, VB_WR_DOORBELL = 2, VB_WR_RECV = 3 };

/* What a DCI request wrote, kept so that it can be posted again after the
 * DCI is reset (verbs_dci.c). The payload is read again from local memory. */
struct vb_wrsave {
    uint64_t remote_addr;
    uint64_t local_addr;
    uint32_t length;
    uint32_t lkey;
    uint32_t rkey;
    uint32_t imm_data; /* network order */
    uint8_t opcode;    /* enum ibv_wr_opcode */
    uint8_t num_sge;   /* 0 (doorbell) or 1 */
    uint8_t inlined;   /* posted inline, from bytes[] */
    /* An inline write's payload as posted: a re-post after a DCI reset
     * sends these bytes, not the source's current ones, which may be newer
     * than data still queued behind it (a guard must not overtake). */
    uint8_t bytes[VB_MAX_INLINE];
};

/* Context of one send work request (wr_id points here). Slot seq % depth of
 * the sending queue's ring; valid until the request is reclaimed. */
struct vb_wrctx {
    struct vb_peer *peer;
    struct vb_sq *sq;
    uint64_t seq_end; /* sq->posted after this request */
    uint64_t cookie;  /* batch cookie when report is set */
    uint8_t report;   /* emit TP_EVENT_WRITE_DONE on completion */
    uint8_t signaled;
    struct vb_wrsave req; /* DCI only: the request, for re-posting */
};

/* Verbs carries pointers as uint64_t: a work request's wr_id is the address
 * of its vb_wrctx (set by the poster, returned in the completion), and an
 * ibv_sge.addr is a local buffer address. These turn them back, so the
 * integer-to-pointer round trip is written in these two places only. It is
 * the idiom the verbs API is built on; an index into a table instead would
 * add a load and a bounds check to every completion. */
static inline struct vb_wrctx *vb_wrctx_of(uint64_t wr_id)
{
    return (struct vb_wrctx *)(uintptr_t)wr_id; /* NOLINT(performance-no-int-to-ptr) */
}

static inline const void *vb_local_addr(uint64_t addr)
{
    return (const void *)(uintptr_t)addr; /* NOLINT(performance-no-int-to-ptr) */
}

/* vb_sq.broken */
enum vb_sq_state {
    VB_SQ_OK = 0,
    VB_SQ_DRAINING = 1, /* error completion seen; waiting for the flushes, then reset */
    VB_SQ_DEAD = 2,     /* in the error state for good (RC, or a DCI whose reset failed) */
};

/* Send-queue accounting of one QP (RC QP or DCI). */
struct vb_sq {
    struct ibv_qp *qp;
    uint32_t max_inline;
    uint8_t is_dci;             /* a DC initiator shared by the peers pinned to it */
    uint8_t dci_index;          /* its index in vb_ep.dci */
    _Atomic uint64_t posted;    /* WRs posted (posting thread) */
    _Atomic uint64_t completed; /* WRs reclaimed (polling thread) */
    _Atomic int broken;         /* enum vb_sq_state */
    uint64_t error_seq;         /* DCI: sequence of the first request that completed in error */
    pthread_mutex_t lock;       /* DCI only: serialises peers sharing it and its reset */
    struct vb_wrctx ctx[VB_SQ_DEPTH];
    struct ibv_send_wr wrs[VB_SQ_DEPTH];
    struct ibv_sge sges[VB_SQ_DEPTH];
};

struct vb_mr {
    struct tp_mr base;
    struct ibv_mr *mr;
    void *addr;
    size_t length;
    int odp; /* registered with IBV_ACCESS_ON_DEMAND (not pinned) */
};

struct vb_rmr {
    struct tp_rmr base;
    uint64_t addr;
    uint64_t length;
    uint32_t rkey;
};

/* Decoded region descriptor: where the peer's region lives and its key. */
struct vb_region {
    uint64_t addr;
    uint64_t length;
    uint32_t rkey;
};

/* Decoded address descriptor. */
struct vb_addr {
    char host[VB_HOST_MAX];
    uint16_t port;
    uint32_t id;
    uint64_t nonce;
    uint8_t has_dct;
    uint8_t port_num;
    uint16_t lid;
    uint32_t dctn;
    uint64_t dc_key;
    uint8_t gid[16];
};

enum vb_path { VB_PATH_RC = 0, VB_PATH_DC = 1 };

struct vb_peer {
    struct tp_peer base;
    struct vb_ep *ep;
    struct vb_addr addr;
    uint64_t hash;
    _Atomic int failed;                 /* set by poll on an error completion */
    _Atomic int reported;               /* PEER_FAILED event emitted */
    _Atomic int path;                   /* enum vb_path */
    struct rdma_event_channel *channel; /* RC: this connection's CM channel */
    struct rdma_cm_id *id;
    struct vb_sq *sq; /* RC send queue (NULL while on DC) */
    /* DC path: */
    struct ibv_ah *ah;
    unsigned dci;          /* pinned DCI ((hash >> 32) % pool) */
    uint64_t dc_last_seq;  /* DCI sequence after this peer's last DC write */
    uint64_t writes;       /* writes posted (hot-peer detection) */
    _Atomic int rc_ready;  /* background RC connection finished */
    _Atomic int rc_failed; /* background RC connection failed: stay on DC */
    int dc_drain_sent;     /* a signaled DC write closes this peer's DC stream */
    pthread_t rc_thread;
    int rc_thread_started;
    struct vb_peer *next;
};

/* Incoming RC connection (doorbell receives). */
struct vb_incoming {
    struct rdma_cm_id *id;
    struct ibv_qp *qp;
    struct ibv_srq *srq; /* the DCT's SRQ instead of qp */
    struct vb_wrctx recv_ctx;
};

struct vb_ep {
    struct tp_endpoint base;
    struct ibv_context *ctx;
    char dev_name[IBV_SYSFS_NAME_MAX];
    uint8_t port_num;
    uint16_t lid;
    enum ibv_mtu mtu;
    union ibv_gid gid;
    struct ibv_pd *pd;
    struct ibv_comp_channel *channel;
    struct ibv_cq *send_cq;
    struct ibv_cq *recv_cq; /* doorbells; attached to channel */
    int odp_write;          /* RC ODP with remote write supported */
    int self_fd;            /* eventfd for doorbell_ring_self */
    uint32_t self_id;
    char host[VB_HOST_MAX];
    uint16_t port;
    uint64_t nonce;
    uint64_t dc_key; /* this DCT's access key: random, nonzero, advertised
                        only in the address (over the control channel) */
    int timeout_ms;

    /* librdmacm listener */
    struct rdma_event_channel *cm_channel;
    struct rdma_cm_id *listen_id;
    pthread_t listener;
    int listener_started;
    int stop_fd;
    pthread_mutex_t conn_lock;
    struct vb_incoming incoming[VB_INCOMING_MAX];
    unsigned incoming_count;
    /* tp_set_members, under conn_lock: the member ids a connection request
     * may claim in its private data (NULL: any, before the first call). */
    uint32_t *members;
    uint32_t num_members;

    struct vb_peer *peers;    /* published with release stores: vb_poll walks it */
    _Atomic int fail_pending; /* a peer failed outside a completion: vb_poll reports it */
    unsigned peer_count;

    /* DCT */
    int dct_enabled;
    struct ibv_srq *srq;
    struct vb_incoming srq_in; /* doorbell receives on the DCT's SRQ */
    struct ibv_qp *dct;
    struct vb_sq *dci[VB_DCI_POOL];
    void *dci_ex[VB_DCI_POOL];  /* struct ibv_qp_ex * */
    void *dci_mlx[VB_DCI_POOL]; /* struct mlx5dv_qp_ex * */

    _Atomic uint64_t rings;
    int stash_valid; /* a send completion doorbell_wait reaped for poll */
    struct ibv_wc stash;
    pthread_mutex_t stats_lock;
    struct tp_stats stats;
};

extern const struct tp_ops tp_verbs_ops;

/* verbs_post.c: the post_writes, poll, doorbell_ring and doorbell_wait
 * entries of the table, with the failure values of tp_post_writes, tp_poll,
 * tp_doorbell_ring and tp_doorbell_wait (transport/transport.h). */
int vb_post_writes(struct tp_peer *peer, const struct tp_write *writes, unsigned count,
                   unsigned flags, uint64_t cookie);
int vb_poll(struct tp_endpoint *ep, struct tp_event *events, int max);
int vb_doorbell_ring(struct tp_peer *peer);
void vb_doorbell_ring_self(struct tp_endpoint *ep);
uint64_t vb_doorbell_arm(struct tp_endpoint *ep);
int vb_doorbell_wait(struct tp_endpoint *ep, uint64_t token, int timeout_ms);
/* Builds the (merged) WR chain of a batch into sq->wrs; returns the number
 * of WRs or a negative code. Shared by the RC and DC paths. */
int vb_build_chain(struct vb_peer *peer, struct vb_sq *sq, const struct tp_write *writes,
                   unsigned count, unsigned flags, uint64_t cookie);
/* Posts receives for doorbells on an incoming QP. SPINDLE_EIO with
 * ibv_post_recv's reason. */
int vb_post_recvs(struct vb_incoming *in, unsigned n);
void vb_stats_add(struct vb_ep *ep, uint64_t writes, uint64_t bytes, uint64_t signaled);
/* Marks peer failed where no error completion will report it (a chain cut
 * short, a DCI in the error state); the next vb_poll emits its
 * TP_EVENT_PEER_FAILED. Returns SPINDLE_EPEERFAILED with why as the message. */
int vb_peer_fail(struct vb_peer *peer, const char *why);

/* verbs_conn.c */
/* Starts the RDMA CM listener and its thread. SPINDLE_EADDRINUSE for a
 * port in use; SPINDLE_EIO naming the call that failed. */
int vb_listen_start(struct vb_ep *ep);
void vb_listen_stop(struct vb_ep *ep);
/* Connects an RC QP to the peer's listener; fills peer->sq and peer->id.
 * SPINDLE_EUNREACH naming the peer when it cannot be resolved, routed or
 * connected before timeout_ms; SPINDLE_EIO for a local verbs failure. */
int vb_rc_connect(struct vb_ep *ep, struct vb_peer *peer, int timeout_ms);
void vb_rc_destroy(struct vb_ep *ep, struct vb_peer *peer);
/* Creates an RC QP on ep's PD/CQs with SQ accounting (also used by tests).
 * SPINDLE_ENOMEM; SPINDLE_EIO when ibv_create_qp fails. */
int vb_sq_create_rc(struct vb_ep *ep, struct vb_sq **out);
void vb_sq_destroy(struct vb_sq *sq);
/* "RESET", "INIT", "RTR", ... for error messages. */
const char *vb_qp_state_name(enum ibv_qp_state state);

/* verbs.c: address descriptor codec, pure (exposed for tests/fuzz). The
 * encoder returns SPINDLE_EINVAL for a host that is empty or VB_HOST_MAX
 * bytes or longer. The decoder returns 0 and *out; SPINDLE_EINVAL for a
 * descriptor of another size, magic or version, or an empty or too long
 * host; SPINDLE_EPROTO for a nonzero pad or a host holding a NUL byte. An
 * accepted descriptor re-encodes to the same bytes. */
int vb_addr_encode(const struct vb_addr *addr, struct tp_desc *out);
int vb_addr_decode(const struct tp_desc *desc, struct vb_addr *out);
/* Region descriptor codec, pure (exposed for tests/fuzz). The encoder
 * never fails. The decoder returns 0 and *out, or SPINDLE_EINVAL for a
 * descriptor that is not VB_MR_WIRE bytes or has another magic. */
void vb_region_encode(const struct vb_region *region, struct tp_desc *out);
int vb_region_decode(const struct tp_desc *desc, struct vb_region *out);
/* verbs_conn.c: the private data of rdma_connect and rdma_accept (member
 * id and endpoint nonce), pure (exposed for tests/fuzz). The encoder never
 * fails; the decoder takes exactly VB_CM_WIRE bytes (callers cut IB CM's
 * padding) and returns 0, or SPINDLE_EPROTO naming another length or a
 * nonzero pad. An accepted message re-encodes to the same bytes. */
void vb_cm_encode(uint32_t id, uint64_t nonce, uint8_t out[VB_CM_WIRE]);
int vb_cm_decode(const uint8_t *buf, size_t len, uint32_t *id, uint64_t *nonce);
/* The table's set_members (tp_set_members): replaces, under conn_lock, the
 * member ids an incoming connection request may claim. SPINDLE_EINVAL for
 * no ids, SPINDLE_ENOMEM. */
int vb_set_members(struct tp_endpoint *tep, const uint32_t *ids, uint32_t count);

/* Marks peer failed after an error completion with status and fills ev with
 * its TP_EVENT_PEER_FAILED; returns 1, or 0 when it was reported before. */
int vb_peer_failed_event(struct vb_peer *peer, enum ibv_wc_status status, struct tp_event *ev);

/* verbs_dci.c (DC initiators; without SPINDLE_HAVE_MLX5DV no DCI exists) */
/* Creates DCI index of the pool and moves it to RTS. Returns 0 or -1 with
 * the reason in spindle_errmsg(). */
int vb_dci_create(struct vb_ep *ep, unsigned index);
/* Emits the n requests built in sq->wrs (each names its peer in wr_id) on
 * DCI dci under one wr_start/wr_complete and saves them for re-posting.
 * Caller holds the DCI's lock. Returns 0 or SPINDLE_EIO. */
int vb_dci_emit(struct vb_ep *ep, unsigned dci, int n);
/* Handles an error completion of a DCI request (ctx names it): the peer of
 * a request that failed (any status but IBV_WC_WR_FLUSH_ERR) is failed and
 * reported in ev; flushed requests are not failures. When the DCI has
 * drained, it is reset (RESET, INIT, RTR, RTS) and the flushed requests of
 * peers that did not fail are posted again in their order. Returns the
 * number of events stored in ev (0 or 1). Called by the polling thread. */
int vb_dci_error(struct vb_ep *ep, const struct ibv_wc *wc, struct vb_wrctx *ctx,
                 struct tp_event *ev);
/* Moves a qp through a state change with the modify_qp of the injected
 * table; what names the QP in the error. Returns 0 or SPINDLE_EIO. */
int vb_qp_modify(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask, const char *what);

/* verbs_dct.c (no-ops returning "not available" without SPINDLE_HAVE_MLX5DV) */
/* Probes DC support and creates the DCT and DCI pool when use_dct; logs once
 * when DC is not available. Returns 0 also when DC is simply absent. */
int vb_dct_open(struct vb_ep *ep, int use_dct);
void vb_dct_close(struct vb_ep *ep);
/* Prepares a peer for the DC path (address handle, DCI). SPINDLE_EUNREACH
 * when no address handle to the peer can be made; SPINDLE_ENOTSUP without
 * SPINDLE_HAVE_MLX5DV. */
int vb_dct_peer_init(struct vb_ep *ep, struct vb_peer *peer);
void vb_dct_peer_fini(struct vb_peer *peer);
/* Posts a batch through the peer's DCI (or its RC QP once it switched),
 * with the failure values of tp_post_writes; SPINDLE_ENOTSUP without
 * SPINDLE_HAVE_MLX5DV. */
int vb_dct_post(struct vb_peer *peer, const struct tp_write *writes, unsigned count, unsigned flags,
                uint64_t cookie);
/* Rings a DC peer's doorbell (zero-length write with immediate to its
 * DCT), with the failure values of tp_doorbell_ring; SPINDLE_ENOTSUP
 * without SPINDLE_HAVE_MLX5DV. */
int vb_dct_ring(struct vb_peer *peer);

/* Internal post flag: signal the last request without reporting it. */
#define VB_POST_FORCE_SIGNAL (1u << 31)

#endif
