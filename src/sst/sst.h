/*
 * Shared state table (SST) and the predicate engine.
 *
 * An sst_engine is the per-process runtime: it owns the transport endpoint,
 * the one predicate thread, the predicate lock, and the peer connections
 * (cached by endpoint address, shared by every table). An sst_table is one
 * replicated table (one per membership/view): num_rows rows of a schema, one
 * per member; this process writes only row my_row and pushes byte ranges of
 * it to chosen rows' owners with one-sided writes. Other rows are read in
 * local memory.
 *
 * Invariants: every column is a counter and only grows; bytes a counter
 * guards (in the side region) are pushed before it (T2). Rows are
 * cache-line aligned, and a stride apart that is the transport's slice
 * alignment (whole pages on shm): each member imports only its own row of
 * a peer's table (tp_rmr_import_slice), so on shm it cannot write into the
 * others' rows. Every column is 8-byte aligned, so a counter is one
 * untorn word (T1). Readers use sst_read_u64 (acquire); the owner
 * updates with sst_write_u64 (release).
 *
 * Row layout: the first SST_ROW_HEADER bytes of each row belong to the SST
 * itself (heartbeat, sleep announcement, departure and removal notices);
 * schema columns follow.
 *
 * Liveness: the predicate thread bumps this member's heartbeat every
 * max_sleep_ms and watches every other connected row's. A row whose
 * heartbeat has not moved for the stall timeout (the transport's failure
 * timeout, at least three heartbeat periods; four times that while the
 * row has never beaten in this table, its owner may still be setting up) is reported
 * through the failure callback with SPINDLE_ETIMEDOUT: a stopped, swapped
 * out or hung process, or one stuck in a delivery upcall. When this
 * member's own thread was not running for half the stall timeout, nobody's
 * silence is judged: every watch starts again.
 *
 * Side region: a table may own one more region besides its rows, of a size
 * each member chooses for itself (0: none) and laid out by the layer above
 * (the SMC keeps its ring buffers there). It is registered with the flags
 * the owner asks for (typically TP_MR_NONPINNED), exported and imported
 * with the rows (whole, or only the slice that sst_table_set_side_slice
 * names: the bytes this member writes there), written with sst_push_side
 * through the same queue as row
 * pushes, and freed with the table. The SST gives it no schema: whatever
 * guards its bytes is a row column pushed in a later call (T2).
 *
 * Threads: predicates and triggers run on the predicate thread with the
 * engine lock held. Application threads take the same lock
 * (sst_engine_lock) to touch state shared with predicates, then call
 * sst_engine_wake. Pushes requested while the lock is held are collected
 * and posted after it is released (Spindle 3.4) unless early unlock is off.
 */
#ifndef SP_SST_H
#define SP_SST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

/* Version of the row layout (row header, column placement, side region
 * rules); members of builds with different versions refuse each other
 * (the control channel's hello carries it). Bump on any change. */
#define SST_LAYOUT_VERSION 3u
/* Rows, ring slots and the libfabric backend's record headers travel by
 * one-sided writes in the host's byte order, read in place by peers; the
 * wire codec (util/wire.h) is little-endian, so is every host libspindle
 * builds on, and members of one group therefore agree. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "libspindle's one-sided data path assumes a little-endian host");

#define SST_CACHE_LINE  64
#define SST_ROW_HEADER  64
#define SST_MAX_ROWS    64
#define SST_MAX_COLUMNS 4096

struct sst_engine;
struct sst_table;

/* ---- schema ---------------------------------------------------------- */

/* Every column is a counter: one 8-byte word that only grows. Bytes that
 * counters guard (the SMC's rings) live in the side region. */
struct sst_column {
    uint32_t offset; /* from the start of the row, a multiple of 8 */
};

struct sst_schema {
    uint32_t num_columns;
    uint32_t row_size; /* padded to SST_CACHE_LINE once finished */
    struct sst_column columns[SST_MAX_COLUMNS];
};

void sst_schema_init(struct sst_schema *schema);
/* Adds a counter right after the previous column (counters added one after
 * another are adjacent words, so a run of them is pushed as one range).
 * Returns the new column's index, or SPINDLE_EINVAL when the schema already
 * has SST_MAX_COLUMNS columns. */
int sst_schema_add_counter(struct sst_schema *schema);
/* Byte offset of a column inside a row. */
static inline uint32_t sst_column_offset(const struct sst_schema *schema, int column)
{
    return schema->columns[column].offset;
}

/* ---- engine ---------------------------------------------------------- */

struct sst_engine_options {
    bool early_unlock;   /* post pushes after releasing the lock (Spindle 3.4) */
    uint32_t spin_us;    /* spin this long with no work before sleeping, given CPUs
                          * to spare (fewer CPUs: shorter, sst_thread.c) */
    int max_sleep_ms;    /* upper bound of one doorbell sleep (heartbeat period) */
    bool announce_sleep; /* push the SLEEP word even where the doorbell is cheap
                          * (always where it is not); lets tests see a sleep */
    bool poll_dedicated; /* pin the predicate thread to poll_cpu and never sleep */
    uint32_t poll_cpu;
};

void sst_engine_options_default(struct sst_engine_options *options);

struct sst_engine_stats {
    uint64_t pushes;        /* sst_push requests */
    uint64_t writes_posted; /* transport writes (work requests) */
    uint64_t batches;       /* post_writes calls */
    uint64_t doorbells;     /* transport doorbells (one per batch) */
    uint64_t wakeups_sent;  /* peer doorbells rung to wake a sleeper */
    uint64_t sleeps;        /* times the predicate thread slept */
    uint64_t passes;        /* predicate passes */
    uint64_t post_ns;       /* time spent posting writes */
    uint64_t pinned_bytes;  /* the transport's pinned_bytes figure (tp_stats) */
    uint64_t inline_passes; /* sst_engine_run_inline calls whose fn ran and returned true */
};

/* Opens the transport named in tp_config and prepares (not starts) the
 * predicate thread. SPINDLE_ENOTSUP naming an unknown or unbuilt backend,
 * SPINDLE_ENOMEM, or the backend's open error (SPINDLE_ENODEV, ...). */
int sst_engine_create(const struct tp_config *tp_config, const struct sst_engine_options *options,
                      struct sst_engine **out);
/* Stops the thread, destroys remaining tables, closes the transport. */
void sst_engine_destroy(struct sst_engine *engine);
/* Starts the predicate thread. SPINDLE_EINVAL when already started,
 * SPINDLE_EIO when the thread cannot be created. */
int sst_engine_start(struct sst_engine *engine);
/* Stops the predicate thread (returns after it has exited). */
void sst_engine_stop(struct sst_engine *engine);
void sst_engine_stats(struct sst_engine *engine, struct sst_engine_stats *out);

void sst_engine_lock(struct sst_engine *engine);
/* Takes the lock when no other thread holds it (the predicate thread
 * holds it through every pass); true when taken. Never blocks. */
bool sst_engine_trylock(struct sst_engine *engine);
void sst_engine_unlock(struct sst_engine *engine);
/* True while the predicate thread waits on its doorbell, or while none
 * runs (before sst_engine_start, after sst_engine_stop): a hint, since a
 * ring or a timeout may wake it at any moment. Never blocks. */
bool sst_engine_asleep(const struct sst_engine *engine);
/* Tells a possibly sleeping predicate thread that there is work. */
void sst_engine_wake(struct sst_engine *engine);
/*
 * Runs fn(ctx) on the calling thread in place of a wake-up of the
 * predicate thread, under the rules of the arrival pass
 * (sst_predicate_set_arrival): only where the transport has the arrival
 * hook (libfabric; elsewhere the thread's wake-up stays, and the call does
 * nothing), only while the predicate thread sleeps, and only with the lock
 * and the push lock both free (tried, never waited for). fn runs with the
 * lock held, as a trigger does, and what it pushed is posted before either
 * lock is released, so no pass of the predicate thread writes the row
 * between the queueing and the post (T2). fn returns false when it did
 * not do the work it was called for. Returns true when fn ran and returned
 * true; the predicate thread is then woken only when a predicate still
 * holds or a row announced its departure. Returns false when fn did not
 * run or returned false: the caller wakes the thread (sst_engine_wake).
 * Never called with the lock held (false at once on the predicate thread
 * or inside an arrival or inline pass).
 */
bool sst_engine_run_inline(struct sst_engine *engine, bool (*fn)(void *ctx), void *ctx);
/* Whether sst_engine_run_inline can ever run anything on this engine (its
 * transport has the arrival hook). Never blocks. */
bool sst_engine_has_arrival(const struct sst_engine *engine);

/* Called on the predicate thread (lock held) when the transport reports a
 * peer failed, with the transport's error; when a peer announced that it
 * left (sst_engine_announce_leave), with SPINDLE_ESHUTDOWN; when a row's
 * heartbeat stalled or posting to its owner could make no progress, with
 * SPINDLE_ETIMEDOUT; row is that member's row in table. Called once per
 * table and row. When another row announced that this member was removed
 * (sst_table_announce_removed), called once per table with this member's
 * own row and SPINDLE_EREMOVED. */
typedef void (*sst_failure_fn)(void *ctx, struct sst_table *table, uint32_t row, int error);
void sst_engine_on_failure(struct sst_engine *engine, sst_failure_fn fn, void *ctx);
/* Replaces the group keys the engine's endpoint authenticates connection
 * set-up with (tp_set_keys; a backend without keys ignores them). The
 * transport's error. */
int sst_engine_set_keys(struct sst_engine *engine, const uint8_t (*keys)[TP_KEY_BYTES],
                        uint32_t key_count);
/* Marks this member's row as left in every table and pushes the row
 * headers to every peer, ringing their doorbells; peers then report the row
 * through the failure callback with SPINDLE_ESHUTDOWN. Lock not held. */
void sst_engine_announce_leave(struct sst_engine *engine);
/* Rings the doorbell of every connected peer not known to have failed, so
 * that sleeping predicate threads poll their transport now (a member that
 * saw a failure wakes the others to see it too). Lock not held. */
void sst_engine_alert(struct sst_engine *engine);

/* ---- predicates ------------------------------------------------------ */

typedef bool (*sst_predicate_fn)(void *ctx);
typedef void (*sst_trigger_fn)(void *ctx);

enum sst_predicate_kind { SST_PRED_ONE_TIME, SST_PRED_RECURRENT };

/* Registers a predicate/trigger pair; *id_out identifies it for removal.
 * May be called from a trigger. A true predicate counts as work for
 * adaptive polling. SPINDLE_EINVAL for a NULL predicate or trigger,
 * SPINDLE_ENOMEM. */
int sst_predicate_add(struct sst_engine *engine, sst_predicate_fn predicate, sst_trigger_fn trigger,
                      void *ctx, enum sst_predicate_kind kind, uint64_t *id_out);
/* Removes it; safe from a trigger and from other threads (takes the lock
 * unless called on the predicate thread). */
void sst_predicate_remove(struct sst_engine *engine, uint64_t id);
/*
 * Arrival trigger of predicate id: where the transport applies landed
 * writes on a progress thread of its own (libfabric), that thread runs,
 * after it applied some and while the predicate thread sleeps, every
 * arrival trigger whose predicate holds, with the lock held (taken only
 * if free), and posts what they pushed, instead of waking the predicate
 * thread for them: a thread wake-up less on each hop at light load. It
 * wakes the predicate thread as before when the lock or the push lock is
 * busy, and afterwards when any predicate still holds or a row announced
 * its departure. An arrival trigger must not block (it delays the
 * transport's own progress) and does a part of its trigger that is safe
 * there. SPINDLE_EINVAL for an unknown id.
 */
int sst_predicate_set_arrival(struct sst_engine *engine, uint64_t id, sst_trigger_fn trigger);

/* ---- tables ---------------------------------------------------------- */

/* A member's contribution to connecting a table: its endpoint address, its
 * table region and its side region (side.len == 0 when it has none). */
struct sst_member_desc {
    struct tp_desc address;
    struct tp_desc region;
    struct tp_desc side;
};

/* Bytes of an encoded struct sst_member_desc (util/wire.h). */
#define SST_DESC_WIRE_SIZE (3u * (2u + TP_DESC_MAX))
struct wire_writer;
struct wire_reader;
/* Encodes desc (three fixed-width descriptor fields). */
void sst_desc_encode(struct wire_writer *w, const struct sst_member_desc *desc);
/* Decodes one; a descriptor length above TP_DESC_MAX or nonzero padding
 * fails the reader (SPINDLE_EPROTO naming the field). */
void sst_desc_decode(struct wire_reader *r, struct sst_member_desc *desc);

/* Creates this member's table of num_rows rows, my_row being its own, and
 * registers it with the engine's transport. SPINDLE_EINVAL for num_rows
 * 0 or above SST_MAX_ROWS, or my_row not below num_rows; SPINDLE_ENOMEM; otherwise the
 * transport's mr_alloc error. */
int sst_table_create(struct sst_engine *engine, const struct sst_schema *schema, uint32_t num_rows,
                     uint32_t my_row, struct sst_table **out);
/*
 * Gives the table a side region of size bytes (zeroed), registered with
 * flags | TP_MR_REMOTE_WRITE. Call at most once, after create and before
 * export and connect. SPINDLE_EINVAL for size 0, a second call or a call
 * after connect; otherwise the transport's mr_alloc error.
 */
int sst_table_set_side_region(struct sst_table *table, size_t size, unsigned flags);
/*
 * Confines this member to [offset, offset + length) of the side region of
 * row's owner: connect imports that slice of it and nothing else
 * (tp_rmr_import_slice), length 0 imports none of it. Without a call the
 * whole side region is imported. On a transport with a slice alignment
 * (sst_table_slice_align) offset and length must be multiples of it; the
 * owner's descriptor is checked against the slice when connecting.
 * SPINDLE_EINVAL for a row outside the table, this member's own row, a
 * misaligned slice or a call after connecting row.
 */
int sst_table_set_side_slice(struct sst_table *table, uint32_t row, uint64_t offset,
                             uint64_t length);
/* The transport's slice alignment (tp_attr.slice_align): 0 when peers
 * import whole regions. */
uint32_t sst_table_slice_align(const struct sst_table *table);
/*
 * Lets the member member_of_row[row] write only row `row` of this table,
 * for every row but ours (tp_mr_grant): on a backend that enforces grants
 * at the target (fabric), a member writing any other part of the table
 * has its connection failed. It also lets exactly the members of the
 * engine's granted tables connect to its endpoint from then on
 * (tp_set_members: this table's rows and those of any other granted table
 * still held, until that is destroyed). Call before exporting the table.
 * The transport's error, or SPINDLE_ENOMEM.
 */
int sst_table_grant_rows(struct sst_table *table, const uint32_t *member_of_row);
/*
 * Lets member write [offset, offset + length) of this table's side region
 * (tp_mr_grant; several grants add up). Once the side region has one
 * grant, on a backend that enforces them (fabric) a member writing outside
 * its grants there has its connection failed. A length of 0 grants member
 * nothing but counts as a grant: no peer may write a side region whose
 * only grant it is. Call before exporting the table. SPINDLE_EINVAL when the table has no side
 * region; otherwise the transport's grant error.
 */
int sst_table_grant_side(struct sst_table *table, uint32_t member, uint64_t offset,
                         uint64_t length);
/* Fills out with this member's descriptors; the transport's failure from
 * tp_address or tp_mr_export.  */
int sst_table_export(struct sst_table *table, struct sst_member_desc *out);
/*
 * Connects to every other row's owner; descs[i] is row i's descriptor
 * (descs[my_row] is ignored). With failed NULL, stops at the first row
 * that fails with the transport's failure from tp_connect or tp_mr_import
 * (SPINDLE_EUNREACH, SPINDLE_ETIMEDOUT, SPINDLE_EPROTO for a descriptor it
 * refuses) or SPINDLE_EPEERFAILED for a peer already known to have
 * failed; rows connected before it stay connected. With failed set, such
 * a row is instead marked failed (sst_row_failed), its bit set in *failed,
 * and the others are still connected; only SPINDLE_ENOMEM stops it.
 */
int sst_table_connect(struct sst_table *table, const struct sst_member_desc *descs, int timeout_ms,
                      uint64_t *failed);
void sst_table_destroy(struct sst_table *table);

/* Writes rows (a mask of rows of table that the next view drops) into this
 * member's row header and posts it to every connected row, those of failed
 * owners included (best effort: a dropped member that is in fact alive, a
 * stopped process that resumes, learns from it that it was removed; see
 * sst_failure_fn). Lock not held; posted when it returns. */
void sst_table_announce_removed(struct sst_table *table, uint64_t rows);

uint32_t sst_table_my_row(const struct sst_table *table);
/* True once row was reported through the failure callback (set before the
 * callback runs). Any thread. */
bool sst_row_failed(struct sst_table *table, uint32_t row);
/* Reports row (not this member's) through the failure callback with error,
 * as if the SST had found it failed, unless it was already reported: the
 * layer above suspects a member the SST cannot judge (one that keeps up too
 * slowly). Predicate thread, lock held. */
void sst_table_suspect(struct sst_table *table, uint32_t row, int error);
/* The layer above knows row is alive although its heartbeat has not moved
 * (a joiner still taking its state before it starts its table): row's
 * stall clock starts again, with the grace of a row that never beat if it
 * never did. Any thread but the predicate thread (it takes the lock). */
void sst_table_excuse(struct sst_table *table, uint32_t row);
/* The link to the owner of a row of table, for reports (spindle-stat). */
enum sst_link {
    SST_LINK_SELF,      /* this member's own row */
    SST_LINK_CONNECTED, /* connected and not known to have failed */
    SST_LINK_FAILED,    /* reported through the failure callback, or its peer failed */
    SST_LINK_NONE,      /* not connected (yet), or row outside the table */
};
/* The state of row's link. Takes the engine lock for a moment: any thread
 * but the predicate thread. */
enum sst_link sst_table_link(struct sst_table *table, uint32_t row);
/* The name of the engine's transport backend ("shm", "fabric", "verbs"). */
const char *sst_engine_backend(const struct sst_engine *engine);
/* Local copy of a row. */
uint8_t *sst_row(struct sst_table *table, uint32_t row);
/* Local mapping of this member's side region (NULL when it has none). */
uint8_t *sst_side(struct sst_table *table);

static inline uint64_t sst_read_u64(struct sst_table *table, uint32_t row, uint32_t offset)
{
    return __atomic_load_n((uint64_t *)(void *)(sst_row(table, row) + offset), __ATOMIC_ACQUIRE);
}

static inline void sst_write_u64(struct sst_table *table, uint32_t offset, uint64_t value)
{
    __atomic_store_n((uint64_t *)(void *)(sst_row(table, sst_table_my_row(table)) + offset), value,
                     __ATOMIC_RELEASE);
}

/*
 * Pushes bytes [offset, offset+length) of my row to the owners of the given
 * rows (all other rows when rows == NULL). Each call is one transport write
 * per target, in call order (T2): push data, then its guard in a later call.
 * Called with the engine lock held (from a trigger or by an application
 * thread), the writes are queued and posted, one batch and one doorbell per
 * peer, when the lock is released (or at once when early unlock is off).
 * Returns 0 or a negative code; a failed peer is skipped and reported
 * through the failure callback, not as an error here.
 */
int sst_push(struct sst_table *table, uint32_t offset, uint32_t length, const uint32_t *rows,
             uint32_t num_rows);

/*
 * Pushes bytes [local_offset, local_offset+length) of my side region to
 * offset remote_offsets[i] of the side region of rows[i]'s owner (my own
 * row is skipped). Side regions may be laid out differently in every
 * member, hence one remote offset per row. Queued exactly like sst_push:
 * same queue, same per-peer batch, call order kept, so a guard pushed later
 * with sst_push lands after these bytes (T2). That holds in every backend
 * across the two regions of one peer: shm writes with release stores in
 * posting order; fabric applies every record of a connection, whatever its
 * region, in ring order on one progress thread; verbs posts both on the
 * peer's one RC queue pair or pinned DCI, which executes in order (with ODP
 * too: a responder page fault is answered with an RNR NAK and the requester
 * resends from that packet on, so later writes cannot land first; reasoned
 * from the RC rules, not run on a NIC).
 * SPINDLE_EINVAL for a range outside my side region, an unknown row, or a
 * row of whose side region nothing is imported (its owner exported none,
 * or sst_table_set_side_slice gave an empty slice); a failed peer is
 * skipped. A remote range outside the imported slice is refused by the
 * transport when the batch is posted (logged, and the batch dropped).
 */
int sst_push_side(struct sst_table *table, uint64_t local_offset, uint32_t length,
                  const uint32_t *rows, const uint64_t *remote_offsets, uint32_t num_rows);

#endif
