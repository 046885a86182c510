/*
 * Private state of the libfabric backend (fabric.c, fabric_conn.c,
 * fabric_progress.c, fabric_post.c).
 *
 * Owns: one fabric/domain/EQ/CQ/passive endpoint per tp_endpoint, one
 * progress thread, per-connection landing and staging rings.
 *
 * Data path (see fabric.c for the T1/T2 argument): a writer copies each
 * write, behind a 64-byte record header, into its staging ring and posts the
 * records of a batch that lie back to back (up to FAB_RUN_MAX bytes) as one
 * fi_writemsg with remote CQ data into the same position of the target's
 * landing ring. The remote CQ data names the incoming connection and the
 * ring position of the write's first record; each header says whether
 * another record of the same write follows it. The target's progress thread applies records in
 * posting order to the real region with aligned 8-byte release stores and returns credits (the
 * cumulative ring position consumed) with a small message, at once from a quarter ring, else from
 * its timer.
 *
 * Threads: the progress thread is the only reader of the CQ and EQ and the
 * only owner of incoming connections. Outgoing connections (tp_peer) are
 * written by the posting thread (serialised per peer by the caller) and
 * read by the progress thread through atomics only. Events for tp_poll pass
 * through a mutex-protected queue. Region lookups take the region mutex.
 *
 * Invariants: posted - acked <= ring size (credits: a record the target
 * applied has left the staging ring too); records of one connection are
 * applied in ring order; writes ask for a local completion only when
 * signaled or every signal_every-th operation (FI_SELECTIVE_COMPLETION),
 * and a connection's writes complete in posting order, so a completion
 * accounts for every operation before it; a connection that failed is never
 * written again; connection memory lives until tp_endpoint close (stale
 * completions may still name it).
 */
#ifndef SP_TRANSPORT_FABRIC_IMPL_H
#define SP_TRANSPORT_FABRIC_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "transport/transport.h"

#define FAB_RING_SIZE       (1u << 20)  /* landing/staging ring bytes per direction */
#define FAB_REC_ALIGN       64u         /* records start on 64-byte boundaries */
#define FAB_REC_HDR         64u         /* record header size */
#define FAB_CHUNK_MAX       (64u << 10) /* larger writes are split into chunks */
#define FAB_RUN_MAX         (64u << 10) /* bytes of back-to-back records posted as one write */
#define FAB_CREDIT_EAGER    (FAB_RING_SIZE / 4) /* returned at once from this much */
#define FAB_OPS_MAX         1024u               /* outstanding write operations per connection */
#define FAB_RECVS           64u                 /* receive buffers posted per connection */
#define FAB_MSG_SIZE        64u                 /* receive buffer size */
#define FAB_CONNS_MAX       1024u               /* incoming connections per endpoint */
#define FAB_CM_DATA_MAX     256u
#define FAB_HOST_MAX        128u
#define FAB_ADDR_WIRE       20u /* fixed part of an address descriptor, before the host */
#define FAB_DESC_MAX        (FAB_ADDR_WIRE + FAB_HOST_MAX - 1u) /* longest descriptor */
#define FAB_MR_WIRE         24u /* a region descriptor: magic, pad, region id, length */
#define FAB_MSG_WIRE        16u /* a control message: magic, kind, value */
#define FAB_MAC_BYTES       32u /* crypto_auth (HMAC-SHA-512-256) tag */
#define FAB_REQ_BODY        32u /* connection request: magic, id, three nonces */
#define FAB_REQ_WIRE        (FAB_REQ_BODY + FAB_MAC_BYTES) /* ... then its MAC */
#define FAB_ACC_BODY        32u /* accept: magic, index, ring address, key, size, pad */
#define FAB_ACC_WIRE        (FAB_ACC_BODY + FAB_MAC_BYTES) /* ... then its MAC */
#define FAB_KEYS_MAX        2u /* group keys accepted at once (a rotation: old and new) */
#define FAB_DEFAULT_FAIL_MS 5000

#define FAB_ADDR_MAGIC 0x53504641u /* "SPFA" */
#define FAB_MR_MAGIC   0x5350464du /* "SPFM" */
#define FAB_REQ_MAGIC  0x53504652u
#define FAB_ACC_MAGIC  0x53504643u
#define FAB_MSG_MAGIC  0x5350464bu
#define FAB_REC_MAGIC  0x53505245u
#define FAB_REC_MORE   1u /* fab_rec_hdr.flags */

enum fab_msg_kind { FAB_MSG_CREDIT = 1, FAB_MSG_DOORBELL = 2, FAB_MSG_BYE = 3 };

enum fab_conn_state {
    FAB_CONN_CONNECTING = 0,
    FAB_CONN_CONNECTED = 1,
    FAB_CONN_FAILED = 2,
    FAB_CONN_CLOSED = 3,
};

/* Small control message (credits, doorbell, goodbye). */
struct fab_msg {
    uint32_t magic;
    uint32_t kind;
    uint64_t value;
};

/* Header at the start of every record in a landing ring. */
struct fab_rec_hdr {
    uint32_t magic;
    uint32_t length; /* payload bytes */
    uint64_t start;  /* virtual ring position of this record */
    uint64_t end;    /* virtual position after it (what the target acknowledges) */
    uint64_t region; /* target region id */
    uint64_t offset; /* byte offset inside the region */
    uint32_t flags;  /* FAB_REC_MORE: the same write carries another record at end */
    uint8_t pad[FAB_REC_HDR - 44];
};
_Static_assert(sizeof(struct fab_rec_hdr) == FAB_REC_HDR, "record header is 64 bytes");

/* Connection request private data (connector -> listener). With a group
 * key, mac authenticates the rest (fabric_auth.c); without, it is zero. */
struct fab_req_data {
    uint32_t magic;
    uint32_t src_id;
    uint64_t dst_nonce;  /* the nonce the connector expects the listener to have */
    uint64_t src_nonce;  /* the connector's own endpoint nonce */
    uint64_t conn_nonce; /* fresh random per request: a replay repeats it */
    uint8_t mac[FAB_MAC_BYTES];
};

/* Accept private data (listener -> connector): where to write. With a
 * group key, mac authenticates it and the request it answers. */
struct fab_acc_data {
    uint32_t magic;
    uint32_t conn_index;
    uint64_t ring_addr;
    uint64_t ring_key;
    uint32_t ring_size;
    uint8_t mac[FAB_MAC_BYTES];
};

/* A write grant (tp_mr_grant): member may write [offset, offset + length). */
struct fab_grant {
    uint32_t member;
    uint64_t offset;
    uint64_t length;
};

struct fab_ep;
struct fab_conn;

enum fab_ctx_kind { FAB_CTX_WRITE = 1, FAB_CTX_RECV = 2 };

/* Operation context handed to libfabric (FI_CONTEXT2 storage first). */
struct fab_ctx {
    struct fi_context2 fi;
    _Atomic int kind; /* enum fab_ctx_kind; stored last (release), read first (acquire) */
    struct fab_conn *conn;
    uint64_t end;    /* FAB_CTX_WRITE: ring position after this record */
    uint64_t seq;    /* FAB_CTX_WRITE: the connection's operation number (ops_posted) */
    uint64_t cookie; /* FAB_CTX_WRITE: batch cookie when signaled */
    int signaled;    /* FAB_CTX_WRITE: last write of a signaled batch */
    void *buf;       /* FAB_CTX_RECV: receive buffer */
};

/* One libfabric connection: outgoing (a tp_peer writes through it) or
 * incoming (a remote writer's records land in its ring). */
struct fab_conn {
    struct tp_peer base; /* an outgoing connection is the tp_peer */
    struct fab_ep *ep;
    struct fid_ep *fep;
    int incoming;
    _Atomic int state;
    _Atomic int error; /* SPINDLE_E* once failed */
    uint32_t remote_id;
    uint64_t remote_nonce;
    uint64_t conn_nonce;            /* the request's fresh nonce (replay check) */
    uint8_t req_wire[FAB_REQ_WIRE]; /* outgoing: the request sent, to check the accept */
    /* outgoing, with a group key: the subkey that sealed req_wire (the
     * endpoint's may change before the accept comes), wiped once used */
    uint8_t req_key[FAB_MAC_BYTES];
    int req_sealed;
    char name[FAB_HOST_MAX + 32]; /* "host:port" (outgoing) or "member N" */
    char why[160];                /* failure reason, set once before state turns FAILED */

    /* ring: staging (outgoing) or landing (incoming) */
    uint8_t *ring;
    struct fid_mr *ring_mr;
    void *ring_desc;
    /* control messages */
    uint8_t *msgbuf; /* FAB_RECVS receive buffers + send buffers */
    struct fid_mr *msg_mr;
    void *msg_desc;
    struct fab_ctx recv_ctx[FAB_RECVS];

    /* outgoing only */
    uint32_t remote_conn_index;
    uint64_t remote_ring_addr;
    uint64_t remote_ring_key;
    _Atomic uint64_t posted;           /* virtual ring position of the next record */
    _Atomic uint64_t last_progress_ns; /* last credit, local completion or idle->busy post */
    uint32_t ops_max;                  /* min(FAB_OPS_MAX, provider tx queue) */
    uint32_t signal_every;             /* a write asks for a completion this often (ops_max/4) */
    uint64_t ops_posted;               /* write operations posted */
    _Atomic uint64_t acked;            /* ring position the target has applied */
    _Atomic uint64_t completed;        /* ring position of the last local completion */
    _Atomic uint64_t ops_completed;    /* operations known complete (all before a completion) */
    _Atomic int starved;               /* a post found no credits */
    uint64_t rung_at;                  /* ops_posted at the last doorbell */
    struct fab_ctx ops[FAB_OPS_MAX];
    _Atomic int failure_reported;
    struct fab_conn *next_peer; /* list of outgoing connections */

    /* incoming only */
    uint64_t applied;     /* ring position applied so far */
    uint64_t credit_sent; /* last position reported to the writer */
    int bye;              /* the writer said goodbye: shutdown is not a failure */
};

/* A region from mr_alloc: plain zeroed memory (writes are applied by the
 * progress thread, never by the NIC). */
struct fab_region {
    uint64_t id;
    void *addr;
    size_t length;
    struct fab_grant *grants;
    uint32_t num_grants, cap_grants;
    /* Set by the first grant, even of 0 bytes: the region then takes only
     * granted writes. Unset: any connected member writes anywhere. */
    bool granted;
    struct fab_region *next;
};

struct fab_mr {
    struct tp_mr base;
    struct fab_ep *ep;
    struct fab_region region;
};

struct fab_rmr {
    struct tp_rmr base;
    uint64_t region;
    uint64_t length;
};

struct fab_event_queue {
    pthread_mutex_t lock;
    struct tp_event *events;
    size_t count, cap;
};

struct fab_ep {
    struct tp_endpoint base;
    struct tp_config config;
    char host[FAB_HOST_MAX];
    uint16_t port;
    uint64_t nonce;
    int failure_timeout_ms;
    /* subkeys of the group keys for connection set-up (fabric_auth.c),
     * under auth_lock: tp_set_keys replaces them while connecting and
     * accepting go on (read them with fab_auth_snapshot) */
    pthread_mutex_t auth_lock;
    uint8_t auth_keys[FAB_KEYS_MAX][FAB_MAC_BYTES];
    uint32_t num_auth_keys; /* 0: no key, requests are not authenticated */
    /* tp_set_members, under auth_lock: the member ids a request may claim
     * (members NULL: any, until the first call) */
    uint32_t *members;
    uint32_t num_members;

    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_eq *eq;
    struct fid_cq *cq;
    struct fid_pep *pep;
    uint64_t next_key;

    pthread_t progress;
    int progress_started;
    _Atomic int stop;

    /* incoming connections, owned by the progress thread */
    struct fab_conn *incoming[FAB_CONNS_MAX];
    uint32_t num_incoming;

    /* outgoing connections; list guarded by cm_lock */
    pthread_mutex_t cm_lock;
    pthread_cond_t cm_cond;
    struct fab_conn *peers;

    pthread_mutex_t region_lock;
    struct fab_region *regions;
    uint64_t next_region;

    struct fab_event_queue eventq;

    /* doorbell */
    _Atomic uint32_t bell;
    _Atomic uint32_t sleepers;
    /* tp_set_arrival: called in place of the bell after records are
     * applied; arrival_lock is held around each call, so that a change
     * returns only once the old hook has finished. in_arrival (progress
     * thread only) is set while the hook runs, when records applied by a
     * post that drains the CQ inline ring the bell instead. */
    pthread_mutex_t arrival_lock;
    tp_arrival_fn arrival_fn; /* arrival_lock */
    void *arrival_ctx;        /* arrival_lock */
    int in_arrival;

    /* stats */
    _Atomic uint64_t st_writes, st_batches, st_doorbells, st_bytes, st_wakeups, st_sleeps,
        st_pinned, st_signaled;
};

extern const struct tp_ops tp_fabric_ops;

/* The backend's objects behind the public ones (each starts with it). */
static inline struct fab_ep *fab_ep_of(struct tp_endpoint *ep)
{
    return (struct fab_ep *)ep;
}
static inline struct fab_conn *fab_conn_of(struct tp_peer *peer)
{
    return (struct fab_conn *)peer;
}
static inline struct fab_mr *fab_mr_of(struct tp_mr *mr)
{
    return (struct fab_mr *)mr;
}
static inline struct fab_rmr *fab_rmr_of(struct tp_rmr *rmr)
{
    return (struct fab_rmr *)rmr;
}

/* fabric_conn.c */
/* Creates conn's endpoint from info, binds it to ep's queues, allocates
 * its rings and posts its receives. SPINDLE_EIO naming the libfabric call
 * that failed; SPINDLE_ENOMEM for the rings. */
int fab_conn_setup(struct fab_ep *ep, struct fab_conn *conn, struct fi_info *info, int incoming);
void fab_conn_teardown(struct fab_conn *conn);
/* Registers len bytes at buf for conn (bound to its endpoint when the
 * provider wants FI_MR_ENDPOINT). SPINDLE_EIO naming the size and peer. */
int fab_mr_register(struct fab_ep *ep, struct fab_conn *conn, void *buf, size_t len,
                    uint64_t access, struct fid_mr **mr, void **desc);
/* Sends one control message (fabric_wire.c) with fi_inject.
 * SPINDLE_EAGAIN, without a message, when the send queue is full (retry);
 * SPINDLE_EPEERFAILED when the provider refuses it. */
int fab_send_msg(struct fab_conn *conn, uint32_t kind, uint64_t value);
void fab_handle_connreq(struct fab_ep *ep, struct fi_eq_cm_entry *entry, size_t len);
/* Posts ctx's receive buffer again. SPINDLE_EIO naming the peer. */
int fab_repost_recv(struct fab_conn *conn, struct fab_ctx *ctx);

/*
 * fabric_auth.c: connection set-up authenticated with the group key
 * (docs/SECURITY.md). fab_auth_init derives one subkey per group key of
 * config (libsodium KDF, context "spfabric", so the control channel's key
 * serves one purpose only): 0, SPINDLE_EINVAL naming a key count above
 * FAB_KEYS_MAX, SPINDLE_EIO when libsodium cannot start. The rest is pure
 * (exposed for tests and tests/fuzz): fab_req_seal writes the MAC of a
 * request's body (which names both endpoints' nonces and a fresh one) with
 * key; fab_req_check returns the index of the key of keys that made the MAC
 * (compared in constant time), or SPINDLE_EAUTH. fab_acc_seal and
 * fab_acc_check do the same for an accept, over its body and the request
 * it answers.
 */
int fab_auth_init(struct fab_ep *ep, const struct tp_config *config);
/* Wipes the subkeys. */
void fab_auth_clear(struct fab_ep *ep);
/* The table's set_keys (tp_set_keys): derives the subkeys of keys and
 * replaces the endpoint's under auth_lock; later requests are made and
 * checked with them. SPINDLE_EINVAL for a key count of 0 or above
 * FAB_KEYS_MAX, or an endpoint opened without a key (its peers would
 * refuse every request it made). */
int fab_set_keys(struct tp_endpoint *tep, const uint8_t (*keys)[TP_KEY_BYTES], uint32_t key_count);
/* The table's set_members (tp_set_members): replaces, under auth_lock,
 * the member ids a connection request may claim. fab_member_admitted: true
 * when id is one of them, or no set was given. */
int fab_set_members(struct tp_endpoint *tep, const uint32_t *ids, uint32_t count);
bool fab_member_admitted(struct fab_ep *ep, uint32_t id);
/* Copies the current subkeys into out; their count (0: no key). Wipe out
 * after use (fab_auth_wipe). */
uint32_t fab_auth_snapshot(struct fab_ep *ep, uint8_t out[FAB_KEYS_MAX][FAB_MAC_BYTES]);
/* Zeroes len bytes of key material where the compiler cannot elide it. */
void fab_auth_wipe(void *bytes, size_t len);
void fab_req_seal(const uint8_t key[FAB_MAC_BYTES], uint8_t wire[FAB_REQ_WIRE]);
int fab_req_check(const uint8_t (*keys)[FAB_MAC_BYTES], uint32_t num_keys,
                  const uint8_t wire[FAB_REQ_WIRE]);
void fab_acc_seal(const uint8_t key[FAB_MAC_BYTES], const uint8_t req_wire[FAB_REQ_WIRE],
                  uint8_t acc_wire[FAB_ACC_WIRE]);
int fab_acc_check(const uint8_t key[FAB_MAC_BYTES], const uint8_t req_wire[FAB_REQ_WIRE],
                  const uint8_t acc_wire[FAB_ACC_WIRE]);

/*
 * fabric_grant.c: write grants (tp_mr_grant). fab_mr_grant is the table's
 * entry. fab_rec_granted is pure (exposed for tests/fuzz): 0 when region
 * was never granted or one of member's grants covers the record's payload;
 * SPINDLE_EPERM naming member, region, offset and length otherwise.
 * fab_region_grants_free releases a region's grants.
 */
int fab_mr_grant(struct tp_mr *mr, uint32_t peer_id, uint64_t offset, uint64_t length);
int fab_rec_granted(const struct fab_rec_hdr *hdr, const struct fab_region *region,
                    uint32_t member);
void fab_region_grants_free(struct fab_region *region);

/* fabric_progress.c */
void *fab_progress_main(void *arg);
void fab_conn_fail(struct fab_conn *conn, int error, const char *why);
void fab_event_push(struct fab_ep *ep, const struct tp_event *ev);
void fab_bell_ring(struct fab_ep *ep);
/* Records were applied: runs the arrival hook, or rings the bell when
 * there is none, it declined, or it is already running. Progress thread. */
void fab_records_applied(struct fab_ep *ep);
/* True on ep's progress thread. */
int fab_on_progress_thread(const struct fab_ep *ep);
/* Reads what the CQ holds now without waiting (credits, completions,
 * records): a post on the progress thread that lacks credits calls it,
 * since nobody else would read them. Progress thread only. */
void fab_drain_cq_now(struct fab_ep *ep);
/* tp_set_arrival. */
bool fab_set_arrival(struct tp_endpoint *tep, tp_arrival_fn fn, void *ctx);

/* fabric_post.c: the post_writes, doorbell_ring and doorbell_wait entries
 * of the table, with the failure values of tp_post_writes,
 * tp_doorbell_ring and tp_doorbell_wait (transport/transport.h). */
int fab_post_writes(struct tp_peer *peer, const struct tp_write *writes, unsigned count,
                    unsigned flags, uint64_t cookie);
int fab_doorbell_ring(struct tp_peer *peer);
void fab_doorbell_ring_self(struct tp_endpoint *tep);
uint64_t fab_doorbell_arm(struct tp_endpoint *tep);
int fab_doorbell_wait(struct tp_endpoint *tep, uint64_t token, int timeout_ms);

/* fabric.c: address descriptor codec, pure (exposed for tests and
 * tests/fuzz). The encoder returns SPINDLE_EINVAL for a host that is empty
 * or FAB_HOST_MAX bytes or longer. The decoder returns 0 with the host
 * (NUL-terminated in host_len bytes), port, nonce and member id;
 * SPINDLE_EINVAL for a descriptor of another size, magic or version, an
 * empty host or one that does not fit host_len; SPINDLE_EPROTO for a host
 * holding a NUL byte. An accepted descriptor re-encodes to the same bytes. */
int fab_addr_encode(const char *host, uint16_t port, uint64_t nonce, uint32_t id,
                    struct tp_desc *out);
int fab_addr_decode(const struct tp_desc *desc, char *host, size_t host_len, uint16_t *port,
                    uint64_t *nonce, uint32_t *id);

/* fabric.c: region descriptor codec, pure (exposed for tests/fuzz). The
 * encoder never fails. The decoder returns 0 with the region id and length;
 * SPINDLE_EINVAL for a descriptor that is not FAB_MR_WIRE bytes, has
 * another magic, or names region 0 or a length of 0; SPINDLE_EPROTO for a
 * nonzero pad. An accepted descriptor re-encodes to the same bytes. */
void fab_region_encode(uint64_t region, uint64_t length, struct tp_desc *out);
int fab_region_decode(const struct tp_desc *desc, uint64_t *region, uint64_t *length);

/* fabric_progress.c: the checks of a record a peer wrote into a landing
 * ring, pure (exposed for tests/fuzz). fab_rec_read copies the header at
 * ring offset off (ring holds FAB_RING_SIZE bytes) and checks that it is
 * the next record of a ring applied up to position applied: 0 and *hdr, or
 * SPINDLE_EPROTO when off leaves no room for a header, or the magic, start,
 * end or size is not that of the next record inside the ring.
 * fab_rec_fits returns 0 when the record's payload lies inside region, or
 * SPINDLE_EPROTO naming region, offset and length (region NULL: unknown). */
int fab_rec_read(const uint8_t *ring, uint64_t off, uint64_t applied, struct fab_rec_hdr *hdr);
int fab_rec_fits(const struct fab_rec_hdr *hdr, const struct fab_region *region);

/*
 * fabric_wire.c: the backend's own messages between peers, through the
 * wire codec (util/wire.h, little-endian): a control message (credits,
 * doorbell, goodbye) of FAB_MSG_WIRE bytes, the connection request's
 * private data (FAB_REQ_WIRE) and the accept's (FAB_ACC_WIRE). Encoders
 * never fail. Decoders take exactly their size (callers cut what a
 * provider pads private data with) and return 0, or SPINDLE_EPROTO naming
 * the field, its offset and value: another length or magic, an unknown
 * message kind, nonzero padding, a ring of another size. An accepted
 * message re-encodes to the same bytes (tests/fuzz/fuzz_fab_ctl.c).
 */
void fab_msg_encode(const struct fab_msg *msg, uint8_t out[FAB_MSG_WIRE]);
int fab_msg_decode(const uint8_t *buf, size_t len, struct fab_msg *out);
void fab_req_encode(const struct fab_req_data *req, uint8_t out[FAB_REQ_WIRE]);
int fab_req_decode(const uint8_t *buf, size_t len, struct fab_req_data *out);
void fab_acc_encode(const struct fab_acc_data *acc, uint8_t out[FAB_ACC_WIRE]);
int fab_acc_decode(const uint8_t *buf, size_t len, struct fab_acc_data *out);

#endif
