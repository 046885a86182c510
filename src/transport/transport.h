/*
 * The transport layer: one-sided writes between processes. Backends (shm,
 * the default; fabric, libfabric; verbs, rdma-core RC and mlx5 DCT) sit
 * behind one ops table, each in its own folder; layers above use only this
 * header. Like ibv_post_send over ops.post_send, every object carries its
 * backend's table and callers use the named inline wrappers below.
 *
 * Contract every backend meets (ARCHITECTURE.md; tested once for all of
 * them by tests/transport/conformance):
 *   T1 untorn words   an aligned 8-byte word written by one remote write is
 *                     never observed half-written by a local reader.
 *   T2 posting order  if write A is posted before write B to the same peer, a
 *                     reader that observes B's effect also observes A's, whether
 *                     A and B target the same region of that peer or two.
 *                     Nothing is promised about byte order inside one write:
 *                     a guard is always a separate, later write.
 *   T3 completion     once a signaled batch completes locally, its source
 *                     buffers may be reused and the data will reach the peer
 *                     unless the peer or link fails.
 *   T4 failure        a broken peer surfaces as SPINDLE_EPEERFAILED on that
 *                     peer (from post, poll or tp_peer_state), never as a
 *                     hang or a crash.
 *
 * Readers of remotely written memory use acquire loads (8-byte aligned words),
 * and writers place guards in a later write than the data they guard.
 *
 * Objects (each starts with its backend's ops table):
 *   tp_endpoint  one per process per backend instance. Owns the doorbell, the
 *                completion queue and (where needed) a progress thread.
 *   tp_mr        a local registered region that peers may write into.
 *   tp_peer      a connection to one remote endpoint (RC QP, DC address,
 *                libfabric endpoint or shared mapping).
 *   tp_rmr       a remote region of a peer, imported from its descriptor,
 *                whole or one slice of it (tp_rmr_import_slice).
 *
 * Descriptors (struct tp_desc) are small opaque byte strings that one process
 * exports and another imports; the layers above carry them over whatever
 * channel they have (bootstrap exchange, join message, view descriptor).
 *
 * Thread-safety: tp_post_writes, tp_doorbell_ring and tp_peer_state may be
 * called from any thread but calls for the same peer must be serialised by
 * the caller (the SST does this with its push lock). tp_poll and
 * tp_doorbell_wait are called by one thread per endpoint (the predicate
 * thread). Setup and teardown calls are single-threaded.
 */
#ifndef SP_TRANSPORT_H
#define SP_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TP_DESC_MAX  192
#define TP_KEY_BYTES 32u /* one group key (control/ctl.h CTL_KEY_BYTES) */

/* An opaque descriptor exported by one process for another. */
struct tp_desc {
    uint32_t len;
    uint8_t bytes[TP_DESC_MAX];
};

struct tp_ops;

/* The public part of every transport object: its backend's table. A
 * backend embeds these as the first member of its own structures. */
struct tp_endpoint {
    const struct tp_ops *ops;
};
struct tp_mr {
    const struct tp_ops *ops;
};
struct tp_peer {
    const struct tp_ops *ops;
};
struct tp_rmr {
    const struct tp_ops *ops;
};

/* Backend-independent endpoint configuration. Unused fields are ignored. */
struct tp_config {
    const char *backend;    /* "shm" (default when NULL), "fabric", "verbs" */
    const char *group_name; /* namespaces shm objects; must be unique per group */
    uint32_t self_id;       /* this member's id, for naming and logs */
    const char *provider;   /* fabric: libfabric provider name ("tcp", "sockets", ...) */
    const char *device;     /* verbs: device name, NULL = first active port */
    const char *host;       /* fabric/verbs: local address to listen on */
    uint16_t port;          /* fabric/verbs: listening port, 0 = ephemeral */
    int failure_timeout_ms; /* how long a silent/broken peer may take to be reported */
    int use_dct;            /* verbs: prefer DCT when the device supports it */
    /* The group's keys, the current one first (key_count 0: none). fabric
     * authenticates connection set-up with subkeys derived from them
     * (docs/SECURITY.md); the bytes are copied at open. */
    const uint8_t (*keys)[TP_KEY_BYTES];
    uint32_t key_count;
};

/* Registration flags. */
enum tp_mr_flags {
    TP_MR_REMOTE_WRITE = 1u << 0, /* peers may write into the region */
    TP_MR_NONPINNED = 1u << 1,    /* do not pin (ODP) where the backend can */
};

/* One write of a batch: length bytes from local (inside local_mr) to offset
 * remote_offset of remote. */
struct tp_write {
    const void *local;
    struct tp_mr *local_mr;
    struct tp_rmr *remote;
    uint64_t remote_offset;
    uint32_t length;
};

/* Post flags. */
enum tp_post_flags {
    TP_POST_SIGNALED = 1u << 0, /* report a TP_EVENT_WRITE_DONE for this batch */
};

enum tp_event_type {
    TP_EVENT_WRITE_DONE = 1,  /* a signaled batch completed (T3); cookie is the post's */
    TP_EVENT_PEER_FAILED = 2, /* peer failed (T4); peer identifies it */
};

/* Process-local (never on the wire or in shared memory); fields ordered
 * for no padding, so initialise by name. */
struct tp_event {
    enum tp_event_type type;
    int error; /* SPINDLE_E* for PEER_FAILED */
    struct tp_peer *peer;
    uint64_t cookie;
};

/* Capabilities of a backend (struct tp_attr.caps). */
enum tp_caps {
    TP_CAP_CHEAP_DOORBELL = 1u << 0, /* ringing an awake peer costs ~nothing: ring freely */
    TP_CAP_NONPINNED = 1u << 1,      /* TP_MR_NONPINNED can avoid pinning (device permitting) */
    TP_CAP_CROSS_HOST = 1u << 2,     /* peers may live on other hosts */
};

/*
 * What a backend can do and how far: one const table per backend, in its
 * folder (shm/shm_attr.c, fabric/fabric_attr.c, verbs/verbs_attr.c). A
 * limit of 0 means the backend has none of its own (memory is the bound).
 * Features a device may lack (ODP, DCT) are probed at open and reported in
 * the log; the table says what the backend can use when they are there.
 */
struct tp_attr {
    unsigned caps;            /* enum tp_caps */
    uint32_t desc_len;        /* most bytes of a descriptor it exports (<= TP_DESC_MAX) */
    uint64_t max_write;       /* bytes of one write; larger writes are refused (0: none) */
    uint32_t max_batch;       /* work requests one post builds (0: none); more: EINVAL */
    uint32_t max_peers;       /* outgoing connections per endpoint (0: none) */
    uint32_t max_incoming;    /* incoming connections per endpoint (0: none) */
    uint32_t max_signaled;    /* signaled batches pending completion (0: none) */
    uint32_t inline_max;      /* bytes a write may carry inline (0: none) */
    int default_timeout_ms;   /* failure_timeout_ms when the config gives none */
    const char *failure_from; /* how a broken peer is noticed, for the docs and logs */
    /* Alignment (a power of two) a slice's offset and length need for
     * tp_rmr_import_slice to confine the importer to it; 0: the backend
     * imports the whole region whatever slice is asked (no confinement). */
    uint32_t slice_align;
};

/* Counters kept by every backend; read with tp_stats. */
struct tp_stats {
    uint64_t writes_posted;  /* work requests / write operations issued */
    uint64_t batches_posted; /* tp_post_writes calls that posted something */
    uint64_t doorbells;      /* NIC doorbells or equivalent (one per batch) */
    uint64_t bytes_written;  /* payload bytes posted */
    uint64_t wakeups_sent;   /* doorbell_ring calls that woke a sleeping peer */
    uint64_t sleeps;         /* doorbell_wait calls that actually slept */
    uint64_t pinned_bytes;   /* bytes currently pinned by registrations */
    uint64_t signaled;       /* signaled work requests */
};

/*
 * The ops table. Every entry but those marked optional must be present
 * (the registry refuses a backend with a missing one). Callers use the tp_* wrappers below, whose
 * comments give each operation's contract and failure values; errors come
 * with a message set through sp_error().
 */
/* Called by a backend's progress thread after it applied landed writes,
 * in place of the ring of its own doorbell (tp_set_arrival). */
typedef bool (*tp_arrival_fn)(void *ctx);

struct tp_ops {
    const char *name;
    const struct tp_attr *attr;
    int (*open)(const struct tp_config *config, struct tp_endpoint **out);
    void (*close)(struct tp_endpoint *ep);
    int (*address)(struct tp_endpoint *ep, struct tp_desc *out);
    int (*mr_alloc)(struct tp_endpoint *ep, size_t length, unsigned flags, void **addr,
                    struct tp_mr **out);
    void (*mr_free)(struct tp_endpoint *ep, struct tp_mr *mr);
    int (*mr_export)(struct tp_mr *mr, struct tp_desc *out);
    int (*connect)(struct tp_endpoint *ep, const struct tp_desc *peer_addr, int timeout_ms,
                   struct tp_peer **out);
    void (*disconnect)(struct tp_endpoint *ep, struct tp_peer *peer);
    int (*rmr_import)(struct tp_peer *peer, const struct tp_desc *desc, struct tp_rmr **out);
    int (*rmr_import_slice)(struct tp_peer *peer, const struct tp_desc *desc, uint64_t offset,
                            uint64_t length, struct tp_rmr **out);
    void (*rmr_release)(struct tp_peer *peer, struct tp_rmr *rmr);
    int (*post_writes)(struct tp_peer *peer, const struct tp_write *writes, unsigned count,
                       unsigned flags, uint64_t cookie);
    int (*poll)(struct tp_endpoint *ep, struct tp_event *events, int max);
    int (*peer_state)(struct tp_peer *peer);
    int (*doorbell_ring)(struct tp_peer *peer);
    void (*doorbell_ring_self)(struct tp_endpoint *ep);
    uint64_t (*doorbell_arm)(struct tp_endpoint *ep);
    int (*doorbell_wait)(struct tp_endpoint *ep, uint64_t token, int timeout_ms);
    void (*stats)(struct tp_endpoint *ep, struct tp_stats *out);
    /* Optional (NULL: tp_mr_grant does nothing). */
    int (*mr_grant)(struct tp_mr *mr, uint32_t peer_id, uint64_t offset, uint64_t length);
    /* Optional (NULL: tp_set_keys does nothing). */
    int (*set_keys)(struct tp_endpoint *ep, const uint8_t (*keys)[TP_KEY_BYTES],
                    uint32_t key_count);
    /* Optional (NULL: tp_set_members does nothing). */
    int (*set_members)(struct tp_endpoint *ep, const uint32_t *ids, uint32_t count);
    /* Optional (NULL: tp_set_arrival returns false). */
    bool (*set_arrival)(struct tp_endpoint *ep, tp_arrival_fn fn, void *ctx);
};

/* ---- registry (registry.c) ------------------------------------------- */

/* Finds a compiled-in backend by name ("shm", "fabric", "verbs"; NULL or
 * "": the default, the first built). NULL with SPINDLE_ENOTSUP recorded,
 * naming the backend and listing the built ones, when it is unknown, not
 * built, or its table is incomplete (tp_backend_check). */
const struct tp_ops *tp_backend_find(const char *name);
/* 0 when every entry of ops is present and its attributes are sane;
 * SPINDLE_EINVAL naming the backend and the first missing entry or bad
 * limit otherwise. */
int tp_backend_check(const struct tp_ops *ops);
/*
 * Opens an endpoint of the backend config->backend names. May block for
 * device setup. SPINDLE_ENOTSUP for an unknown backend, SPINDLE_ENODEV
 * when its hardware is absent, SPINDLE_EADDRINUSE naming a taken port,
 * SPINDLE_ENOMEM, SPINDLE_EIO naming the failing call.
 */
int tp_open(const struct tp_config *config, struct tp_endpoint **out);
/* For backends' rmr_import_slice: 0 when [offset, offset + length) is a
 * non-empty part of a region of region_length bytes with offset and
 * length multiples of align (0: any); SPINDLE_EINVAL naming the slice and
 * the region otherwise. */
int tp_slice_check(const char *backend, uint64_t offset, uint64_t length, uint64_t region_length,
                   uint32_t align);

/* ---- endpoint ---------------------------------------------------------- */

/* Closes peers, local regions and the endpoint. Regions imported from
 * peers are not released: release them first (tp_rmr_release). Never
 * fails. */
static inline void tp_close(struct tp_endpoint *ep)
{
    ep->ops->close(ep);
}
/*
 * Replaces the group keys the endpoint was opened with (tp_config.keys; a
 * rotation, docs/SECURITY.md): connection requests made and checked after
 * it returns use the new keys, the first to prove with, each to accept;
 * connections already up stay. May be called while the endpoint is in use.
 * A backend that does not use the keys (shm, verbs) does nothing and
 * returns 0. SPINDLE_EINVAL for key_count 0 or above what the backend
 * holds, or an endpoint opened without a key.
 */
static inline int tp_set_keys(struct tp_endpoint *ep, const uint8_t (*keys)[TP_KEY_BYTES],
                              uint32_t key_count)
{
    return ep->ops->set_keys != NULL ? ep->ops->set_keys(ep, keys, key_count) : 0;
}

/*
 * The member ids that may connect to ep from now on: ids[0..count),
 * replacing the set of any earlier call (before the first, any id may).
 * On a backend whose connection request claims the connector's member id
 * (fabric, where it binds the connection's writes to that id's grants;
 * verbs, whose RDMA CM private data carries it), a request claiming
 * another id is refused and the refusal logged with the id; the connector
 * sees SPINDLE_EUNREACH. Connections already up stay. May be called while
 * the endpoint is in use. Other backends (shm) do nothing and return 0.
 * SPINDLE_EINVAL for count 0 or ids NULL, SPINDLE_ENOMEM.
 */
static inline int tp_set_members(struct tp_endpoint *ep, const uint32_t *ids, uint32_t count)
{
    return ep->ops->set_members != NULL ? ep->ops->set_members(ep, ids, count) : 0;
}
/* The backend's capabilities and limits. */
static inline const struct tp_attr *tp_attr(const struct tp_endpoint *ep)
{
    return ep->ops->attr;
}
/* The backend's name ("shm", ...). */
static inline const char *tp_name(const struct tp_endpoint *ep)
{
    return ep->ops->name;
}
/* Exports the endpoint's address for peers' tp_connect. SPINDLE_EINVAL
 * when it does not fit a descriptor. */
static inline int tp_address(struct tp_endpoint *ep, struct tp_desc *out)
{
    return ep->ops->address(ep, out);
}
/* Counters since open (reading them never blocks). */
static inline void tp_stats(struct tp_endpoint *ep, struct tp_stats *out)
{
    ep->ops->stats(ep, out);
}

/* ---- regions ----------------------------------------------------------- */

/*
 * Allocates length bytes of zeroed, page-aligned memory and registers it
 * (flags: tp_mr_flags). This is how layers above obtain every region peers
 * write into: shm backs it with a shareable memory object, verbs registers
 * it pinned or with ODP. *addr receives the local mapping. SPINDLE_EINVAL
 * for length 0, SPINDLE_ENOMEM, SPINDLE_EIO naming a failed registration.
 */
static inline int tp_mr_alloc(struct tp_endpoint *ep, size_t length, unsigned flags, void **addr,
                              struct tp_mr **out)
{
    return ep->ops->mr_alloc(ep, length, flags, addr, out);
}
/* Deregisters and frees a region from tp_mr_alloc. Never fails; NULL is
 * ignored. */
static inline void tp_mr_free(struct tp_endpoint *ep, struct tp_mr *mr)
{
    ep->ops->mr_free(ep, mr);
}
/* Exports a region descriptor for peers' tp_rmr_import. SPINDLE_EINVAL
 * when it does not fit a descriptor. */
static inline int tp_mr_export(struct tp_mr *mr, struct tp_desc *out)
{
    return mr->ops->mr_export(mr, out);
}

/*
 * Lets the member peer_id write [offset, offset + length) of the local
 * region mr (several grants add up). On a backend that enforces grants at
 * the target (fabric), once a region has a grant, a write into it from a
 * member outside its grants fails that member's connection and nothing of
 * it is applied; a region never granted takes writes anywhere from any
 * connected member. A grant of 0 bytes (offset within the region) lets
 * peer_id write nothing but counts as a grant: it is how an owner that
 * lets no peer write a region says so. Grant before the peer may write.
 * Other backends do nothing and return 0. SPINDLE_EINVAL naming a range
 * outside the region, SPINDLE_ENOMEM.
 */
static inline int tp_mr_grant(struct tp_mr *mr, uint32_t peer_id, uint64_t offset, uint64_t length)
{
    return mr->ops->mr_grant != NULL ? mr->ops->mr_grant(mr, peer_id, offset, length) : 0;
}

/* ---- peers ------------------------------------------------------------- */

/* Connects to the endpoint whose address is peer_addr. May block up to
 * timeout_ms. SPINDLE_EPROTO for a descriptor of another backend or a
 * malformed one, SPINDLE_EUNREACH naming the peer when it cannot be
 * reached, SPINDLE_ETIMEDOUT, SPINDLE_ENOMEM. */
static inline int tp_connect(struct tp_endpoint *ep, const struct tp_desc *peer_addr,
                             int timeout_ms, struct tp_peer **out)
{
    return ep->ops->connect(ep, peer_addr, timeout_ms, out);
}
/* Disconnects; later calls on the peer are invalid. No post may be in
 * flight on it. Never fails. */
static inline void tp_disconnect(struct tp_endpoint *ep, struct tp_peer *peer)
{
    ep->ops->disconnect(ep, peer);
}
/* Imports a peer's region. SPINDLE_EPROTO for a malformed descriptor or
 * one of another peer, SPINDLE_EUNREACH when the region is gone,
 * SPINDLE_ENOMEM. */
static inline int tp_rmr_import(struct tp_peer *peer, const struct tp_desc *desc,
                                struct tp_rmr **out)
{
    return peer->ops->rmr_import(peer, desc, out);
}
/*
 * Imports the slice [offset, offset + length) of a peer's region: the part
 * the protocol lets this process write (its row of the peer's table). Write
 * offsets stay those of the whole region. On a backend with a slice_align
 * (tp_attr), the import maps nothing else of the region, and a post to an
 * offset outside the slice is refused with SPINDLE_EINVAL; other backends
 * import the whole region. The failures of tp_rmr_import, and
 * SPINDLE_EINVAL naming a slice that is empty, outside the region or not
 * aligned to slice_align.
 */
static inline int tp_rmr_import_slice(struct tp_peer *peer, const struct tp_desc *desc,
                                      uint64_t offset, uint64_t length, struct tp_rmr **out)
{
    return peer->ops->rmr_import_slice(peer, desc, offset, length, out);
}
/* Releases an imported region. Never fails; NULL is ignored. */
static inline void tp_rmr_release(struct tp_peer *peer, struct tp_rmr *rmr)
{
    peer->ops->rmr_release(peer, rmr);
}
/* 0 while the peer is believed alive, SPINDLE_EPEERFAILED otherwise. */
static inline int tp_peer_state(struct tp_peer *peer)
{
    return peer->ops->peer_state(peer);
}

/* ---- data path ------------------------------------------------------- */

/*
 * Posts count writes to one peer as one batch with one doorbell (T2 holds
 * in array order). Never blocks. SPINDLE_EAGAIN when the send queue or
 * credits are full (nothing was posted: poll, then retry); SPINDLE_EINVAL
 * naming a write outside the remote region (or the imported slice of it:
 * nothing of the batch was written) or above the backend's limits
 * (tp_attr); SPINDLE_EPEERFAILED when the peer is broken.
 */
static inline int tp_post_writes(struct tp_peer *peer, const struct tp_write *writes,
                                 unsigned count, unsigned flags, uint64_t cookie)
{
    return peer->ops->post_writes(peer, writes, count, flags, cookie);
}
/* Reaps completions and failure reports; returns the number of events
 * stored in events (<= max). Never blocks, never fails (a broken peer is
 * an event). */
static inline int tp_poll(struct tp_endpoint *ep, struct tp_event *events, int max)
{
    return ep->ops->poll(ep, events, max);
}

/* ---- doorbell ---------------------------------------------------------- */

/* Wakes the peer's tp_doorbell_wait if it sleeps. Cheap on backends with
 * TP_CAP_CHEAP_DOORBELL; otherwise call only when the peer announced it
 * sleeps. SPINDLE_EPEERFAILED when the peer is broken. */
static inline int tp_doorbell_ring(struct tp_peer *peer)
{
    return peer->ops->doorbell_ring(peer);
}
/* Wakes this endpoint's own waiter (e.g. an application thread queued work
 * for the predicate thread). Never fails. */
static inline void tp_doorbell_ring_self(struct tp_endpoint *ep)
{
    ep->ops->doorbell_ring_self(ep);
}
/* Returns a token; a ring after this call makes tp_doorbell_wait(token)
 * return at once. Call it, re-check for work, then wait (no lost
 * wake-up). */
static inline uint64_t tp_doorbell_arm(struct tp_endpoint *ep)
{
    return ep->ops->doorbell_arm(ep);
}
/* Sleeps until a ring newer than token, an event to poll, or timeout_ms.
 * 0 when woken, SPINDLE_ETIMEDOUT on timeout. */
static inline int tp_doorbell_wait(struct tp_endpoint *ep, uint64_t token, int timeout_ms)
{
    return ep->ops->doorbell_wait(ep, token, timeout_ms);
}
/*
 * Arrival hook, for a backend whose own progress thread applies landed
 * writes (fabric): after it applied some, it calls fn(ctx) on that thread
 * and rings its doorbell only when fn returns false; true says that fn
 * dealt with what arrived itself, so nobody needs waking. fn runs with no
 * backend lock held and may post writes and ring peers (tp_post_writes
 * does not wait there for credits that only this thread can read: it
 * reads the completion queue itself meanwhile, with fn not called again
 * inside). fn must not block, nor call tp_poll or tp_doorbell_wait.
 * NULL fn removes the hook; after tp_set_arrival returns, the previous fn
 * is not running and is not called again. Returns false where the backend
 * has no progress thread of its own (nothing is called). Not thread-safe
 * against itself: one caller (the SST engine) sets and clears it.
 */
static inline bool tp_set_arrival(struct tp_endpoint *ep, tp_arrival_fn fn, void *ctx)
{
    return ep->ops->set_arrival != NULL && ep->ops->set_arrival(ep, fn, ctx);
}

#endif
