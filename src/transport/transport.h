/*
 * The transport layer: one-sided writes between processes behind one ops
 * table. Backends: shm (same host, default), fabric (libfabric), verbs (rdma-core
 * RC, with DCT in dct.c). Layers above use only this header.
 *
 * Contract every backend meets (ARCHITECTURE.md):
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
 * Objects:
 *   tp_endpoint  one per process per backend instance. Owns the doorbell, the
 *                completion queue and (where needed) a progress thread.
 *   tp_mr        a local registered region that peers may write into.
 *   tp_peer      a connection to one remote endpoint (RC QP, DC address,
 *                libfabric endpoint or shared mapping).
 *   tp_rmr       a remote region of a peer, imported from its descriptor.
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

#include <stddef.h>
#include <stdint.h>

#define TP_DESC_MAX 192

/* An opaque descriptor exported by one process for another. */
struct tp_desc {
    uint32_t len;
    uint8_t bytes[TP_DESC_MAX];
};

struct tp_endpoint;
struct tp_mr;
struct tp_peer;
struct tp_rmr;

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

struct tp_event {
    enum tp_event_type type;
    struct tp_peer *peer;
    uint64_t cookie;
    int error; /* SPINDLE_E* for PEER_FAILED */
};

/* Capabilities reported by a backend. */
enum tp_caps {
    TP_CAP_CHEAP_DOORBELL = 1u << 0, /* ringing an awake peer costs ~nothing: ring freely */
    TP_CAP_NONPINNED = 1u << 1,      /* TP_MR_NONPINNED really avoids pinning */
    TP_CAP_CROSS_HOST = 1u << 2,     /* peers may live on other hosts */
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
 * The ops table. Every function returns 0 (or a count) on success and a
 * negative SPINDLE_E* code on failure, with a message set through sp_error().
 */
struct tp_ops {
    const char *name;
    unsigned caps;

    /* Opens an endpoint. May block for device setup. Fails with
     * SPINDLE_ENODEV when the backend's hardware is absent. */
    int (*open)(const struct tp_config *config, struct tp_endpoint **out);
    /* Closes peers, regions and the endpoint. Never fails. */
    void (*close)(struct tp_endpoint *ep);
    /* Exports the endpoint's address for peers' connect. */
    int (*address)(struct tp_endpoint *ep, struct tp_desc *out);

    /* Allocates length bytes of zeroed, page-aligned memory and registers
     * it (flags: tp_mr_flags). This is how layers above obtain every region
     * peers write into: shm backs it with a shareable memory object, verbs
     * registers it pinned or with ODP. *addr receives the local mapping. */
    int (*mr_alloc)(struct tp_endpoint *ep, size_t length, unsigned flags, void **addr,
                    struct tp_mr **out);
    /* Deregisters and frees a region from mr_alloc. Never fails. */
    void (*mr_free)(struct tp_endpoint *ep, struct tp_mr *mr);
    /* Exports a region descriptor for peers' rmr_import. */
    int (*mr_export)(struct tp_mr *mr, struct tp_desc *out);

    /* Connects to the endpoint whose address is peer_addr. May block up to
     * timeout_ms; SPINDLE_EUNREACH names the peer when it cannot be reached. */
    int (*connect)(struct tp_endpoint *ep, const struct tp_desc *peer_addr, int timeout_ms,
                   struct tp_peer **out);
    /* Disconnects; later calls on the peer are invalid. Never fails. */
    void (*disconnect)(struct tp_endpoint *ep, struct tp_peer *peer);
    /* Imports a peer's region. */
    int (*rmr_import)(struct tp_peer *peer, const struct tp_desc *desc, struct tp_rmr **out);
    void (*rmr_release)(struct tp_peer *peer, struct tp_rmr *rmr);

    /* Posts count writes to one peer as one batch with one doorbell (T2
     * holds in array order). SPINDLE_EAGAIN when the send queue or credits
     * are full (nothing was posted; poll, then retry); SPINDLE_EPEERFAILED
     * when the peer is broken. Never blocks. */
    int (*post_writes)(struct tp_peer *peer, const struct tp_write *writes, unsigned count,
                       unsigned flags, uint64_t cookie);
    /* Reaps completions and failure reports; returns the number of events
     * stored in events (<= max). Never blocks. */
    int (*poll)(struct tp_endpoint *ep, struct tp_event *events, int max);
    /* 0 when the peer is believed alive, SPINDLE_EPEERFAILED otherwise. */
    int (*peer_state)(struct tp_peer *peer);

    /* Wakes the peer's tp_doorbell_wait if it sleeps. Cheap on backends with
     * TP_CAP_CHEAP_DOORBELL; otherwise call only when the peer announced it
     * sleeps. */
    int (*doorbell_ring)(struct tp_peer *peer);
    /* Wakes this endpoint's own waiter (e.g. an application thread queued
     * work for the predicate thread). Async-signal-safe where possible. */
    void (*doorbell_ring_self)(struct tp_endpoint *ep);
    /* Returns a token; a ring after this call makes doorbell_wait(token)
     * return at once. Call it, re-check for work, then wait (no lost wake-up). */
    uint64_t (*doorbell_arm)(struct tp_endpoint *ep);
    /* Sleeps until a ring newer than token, an event to poll, or timeout_ms.
     * Returns 0 when woken, SPINDLE_ETIMEDOUT on timeout. */
    int (*doorbell_wait)(struct tp_endpoint *ep, uint64_t token, int timeout_ms);

    void (*stats)(struct tp_endpoint *ep, struct tp_stats *out);
};

/* Finds a compiled-in backend by name ("shm", "fabric", "verbs"); NULL and
 * an sp_error message listing the available ones when unknown or not built. */
const struct tp_ops *tp_backend_find(const char *name);

#endif
