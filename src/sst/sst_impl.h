/*
 * Private state shared by the SST's files. The engine lock protects the
 * predicate list, the table list, the pending-push queue and the peer cache;
 * post_lock orders postings so batches reach the transport in the order
 * they were queued (T2 across threads), while the engine lock is already
 * released (Spindle 3.4).
 */
#ifndef SP_SST_IMPL_H
#define SP_SST_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "sst/sst.h"

#define SST_HEADER_HEARTBEAT 0
#define SST_HEADER_SLEEP     8
#define SST_HEADER_LEFT      16 /* non-zero: the member left the group on purpose */
#define SST_HEADER_REMOVED   24 /* rows the owner's next view dropped (a mask) */
#define SST_STALL_GRACE      4  /* times the stall timeout before a row's first beat */
/* Set in the SLEEP word by a predicate thread that polls on a dedicated
 * CPU (it never sleeps): pushers do not ring its doorbell. Only set, never
 * cleared, so the word still only grows; the sleep parity (bit 0) stays. */
#define SST_SLEEP_POLLING (1ull << 63)

struct sst_peer_ref {
    struct tp_desc address;
    struct tp_peer *peer;
    unsigned refs;
    bool failed;
};

/* A peer that posting gave up on, or whose failure posting reaped from the
 * transport: nothing more is posted to it, and the predicate thread
 * reports it through sst_peer_failed (post_lock). */
struct sst_stuck {
    struct tp_peer *peer;
    int error;
    bool reported;
};
#define SST_STUCK_MAX (2 * SST_MAX_ROWS)

#define SST_SPIN_SPARE_CPUS 4    /* this many CPUs or more: spin the full spin_us */
#define SST_SPIN_BRIEF_NS   5000 /* fewer (but more than one): spin at most this long */

struct sst_pending {
    uint32_t peer;          /* index into engine->peers */
    struct tp_peer *target; /* resolved, so posting needs no lock */
    bool ring;              /* ring the peer's doorbell after posting */
    struct tp_write write;
};

struct sst_predicate {
    sst_predicate_fn predicate;
    sst_trigger_fn trigger;
    sst_trigger_fn arrival_trigger; /* sst_predicate_set_arrival; NULL: none */
    void *ctx;
    enum sst_predicate_kind kind;
    uint64_t id;
    bool removed;
};

struct sst_table {
    struct sst_engine *engine;
    struct sst_schema *schema;
    uint32_t num_rows;
    uint32_t my_row;
    /* Bytes from one row to the next: the row rounded up to the
     * transport's slice alignment, so that each peer imports its own row
     * of another member's table and nothing else (tp_rmr_import_slice). */
    uint32_t row_stride;
    uint8_t *base;
    size_t size;
    struct tp_mr *mr;
    uint8_t *side; /* side region: NULL when this member has none */
    size_t side_size;
    struct tp_mr *side_mr;
    int32_t peer_of_row[SST_MAX_ROWS]; /* -1: self or not connected */
    struct tp_rmr *rmr[SST_MAX_ROWS];
    struct tp_rmr *side_rmr[SST_MAX_ROWS]; /* NULL: that owner has no side region */
    /* sst_table_set_side_slice: the part of each row owner's side region
     * this member imports (whole when side_sliced[row] is false). */
    bool side_sliced[SST_MAX_ROWS];
    uint64_t side_slice_offset[SST_MAX_ROWS];
    uint64_t side_slice_length[SST_MAX_ROWS];
    atomic_bool failed[SST_MAX_ROWS];
    /* Heartbeat watch (predicate thread, lock held): the last value read
     * from each row, when it last changed (0: not watched yet), and
     * whether it has changed since the watch started. */
    uint64_t beat_seen[SST_MAX_ROWS];
    uint64_t beat_at_ns[SST_MAX_ROWS];
    bool beat_moved[SST_MAX_ROWS];
    bool removed_reported; /* this member's removal was reported */
    /* sst_table_grant_rows: the member id of each row, which the endpoint
     * lets connect while this table exists (admit_members). */
    uint32_t member_of_row[SST_MAX_ROWS];
    bool members_known;
    struct sst_table *next;
};

struct sst_engine {
    struct tp_endpoint *endpoint;
    struct sst_engine_options options;
    pthread_mutex_t lock;
    pthread_mutex_t post_lock;
    pthread_t thread;
    bool started;
    atomic_bool running;
    /* The predicate thread polls on its dedicated CPU and never sleeps:
     * waking it is needless (set once, under the lock, by that thread). */
    atomic_bool polling;
    /* No pass is under way or about to start: the predicate thread waits
     * on its doorbell, or none runs (sst_engine_asleep). */
    atomic_bool asleep;
    /* The transport runs sst_arrival on its own progress thread
     * (tp_set_arrival took the hook): set once at creation. */
    bool arrival_hook;

    struct sst_predicate *predicates;
    uint32_t num_predicates, cap_predicates;
    uint64_t next_predicate_id;
    bool predicates_removed;

    struct sst_table *tables;
    struct sst_peer_ref *peers;
    uint32_t num_peers, cap_peers;

    struct sst_pending *pending;
    uint32_t num_pending, cap_pending;

    sst_failure_fn on_failure;
    void *on_failure_ctx;

    /* Posting that makes no progress this long fails the peer: the
     * transport's failure timeout (tp_config, or its default). */
    uint64_t give_up_ns;
    /* A row whose heartbeat stands still this long is reported; 0: never
     * (the failure timeout, at least three heartbeat periods). */
    uint64_t stall_ns;
    uint64_t watched_ns;                   /* the last heartbeat watch (predicate thread) */
    struct sst_stuck stuck[SST_STUCK_MAX]; /* post_lock */
    uint32_t num_stuck;                    /* post_lock */
    atomic_bool stuck_unreported;
    /* Predicate thread only: one of its posts rang a peer since it last
     * went to sleep (sst_spin_ns). */
    bool rang_peers;
    struct sst_engine_stats stats; /* updated with atomic adds */
};

/* Queues one write of my row's [offset, offset+length) to row's owner.
 * Lock held. 0 (also when the owner failed: nothing is queued), or
 * SPINDLE_ENOMEM. */
int sst_queue_write(struct sst_table *table, uint32_t row, uint32_t offset, uint32_t length,
                    bool ring);
/* Posts queued writes: called with the lock held; releases it (before
 * posting when early unlock is on, after otherwise). */
void sst_unlock_and_post(struct sst_engine *engine);
/* Posts queued writes with the lock and post_lock held (taken by the
 * caller), then releases both: nobody writes the row meanwhile, so a post
 * never carries a guard another thread wrote after it queued (T2). */
void sst_post_and_unlock_held(struct sst_engine *engine);
/* The transport's arrival hook (tp_set_arrival, sst_thread.c): while the
 * predicate thread sleeps, runs the arrival triggers on the transport's
 * progress thread; true when nothing is left for the predicate thread. */
bool sst_arrival(void *ctx);
void sst_stat_add(uint64_t *counter, uint64_t amount);
/* Peer cache: returns an index, connecting on first use. Lock held; it is
 * dropped while a new connection is made, so the predicate thread runs
 * meanwhile (the caller must not rely on anything it read under the lock
 * before). SPINDLE_ENOMEM, or the transport's connect error
 * (SPINDLE_EUNREACH naming the peer, SPINDLE_ETIMEDOUT). */
int sst_peer_get(struct sst_engine *engine, const struct tp_desc *address, int timeout_ms,
                 uint32_t *index);
/* Drops a reference; the last one disconnects. Lock and post_lock held (no
 * post may be in flight on the peer being disconnected). */
void sst_peer_put(struct sst_engine *engine, uint32_t index);
/* Marks rows owned by a failed peer and calls the failure callback. Lock held. */
void sst_peer_failed(struct sst_engine *engine, struct tp_peer *peer, int error);
/* Reports the peers posting gave up on (struct sst_stuck) that are not
 * reported yet, through sst_peer_failed. Lock held, post_lock not held. */
void sst_report_stuck(struct sst_engine *engine);
/* Forgets peer in the stuck list (it is being disconnected). Lock and
 * post_lock held. */
void sst_stuck_forget(struct sst_engine *engine, const struct tp_peer *peer);
/* True on the engine's predicate thread (the one thread that polls). */
bool sst_on_predicate_thread(const struct sst_engine *engine);
/* How long the predicate thread spins with no work before it sleeps on the
 * doorbell, in ns, given the CPUs the process may use (sst_thread.c): the
 * full spin_us with SST_SPIN_SPARE_CPUS or more, at most SST_SPIN_BRIEF_NS
 * with fewer (but more than one), none on one; and with fewer than
 * SST_SPIN_SPARE_CPUS, none either when its last posts rang a peer
 * (rang_peers). Never fails. */
uint64_t sst_spin_ns(long cpus, uint32_t spin_us, bool rang_peers);
/* Pushes the row header (heartbeat, sleep counter) of every table, without
 * ringing anyone. Lock held. */
void sst_push_headers(struct sst_engine *engine);

#endif
