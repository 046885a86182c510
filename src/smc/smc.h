/*
 * Small-message multicast (SMC): per-sender ring buffers beside the SST with
 * the Spindle techniques (opportunistic batching 3.2, null-sends 3.3, lock
 * release before posting 3.4 through the engine, batched delivery 3.5).
 *
 * An smc_group owns everything that belongs to one membership: the subgroup
 * layouts, one sst_table built for them, the per-subgroup sender/receiver
 * state and one recurrent predicate on the engine. A view change retires the
 * whole object (smc_group_stop + smc_group_destroy) and builds the next one;
 * nothing outlives it but the engine.
 *
 * Row layout, per subgroup g (same offsets in every row):
 *   received_num[S]  positions of sender s this member holds (counters)
 *   delivered_num    sequence numbers delivered (atomic) or messages
 *                    delivered (unordered)
 *   sent_num         positions this row's owner published (guard of its ring)
 *   persisted_num    atomic subgroups only: sequence numbers below which
 *                    this row's owner has every message it delivered on
 *                    stable storage (persistence frontier, written only
 *                    where smc_options.persist names the subgroup)
 *   sent_num         positions this row's owner published (guard of its ring)
 *   null_num         nulls this row's owner sent
 * received_num..delivered_num (..persisted_num) are contiguous so one write
 * acknowledges everything; sent_num and null_num likewise travel as one
 * write.
 *
 * Rings are not in the rows: they live in the table's side region
 * (sst_table_set_side_region), registered TP_MR_NONPINNED so that backends
 * able to (verbs with on-demand paging) do not pin them. Member m's side
 * region holds, for each subgroup g that m is a member of (in index order)
 * and each sender s of g (in round-robin order), s's ring: W slots of
 * (8-byte header + max_payload rounded to 8), the ring rounded up to a
 * cache line. It holds nothing for subgroups m is not in, so a member
 * allocates and registers ring memory only for its own subgroups; one that
 * is in none has no side region. That is the packed order, on transports
 * whose peers import whole regions; on one with a slice alignment (shm)
 * the rings are grouped by writer instead, one aligned slice per writer,
 * and each sender imports only its own slice of a peer's side region
 * (struct smc_side_shape); a writer's rings start SMC_RING_STAGGER x its
 * index (modulo the alignment) into its slice, so that slot k of
 * different senders does not lie at one page offset. Every member
 * computes every member's layout (smc_side_ring), so sender s copies its
 * ring from its own side region to its ring's offset in each peer's side
 * region, and the push of sent_num that follows guards it (T2 across the
 * two regions).
 *
 * Positions: a sender's stream is a sequence of positions 0, 1, 2, ...;
 * each holds an application message (in the ring) or a null. A slot header
 * is (1 << 63 | (position + 1 mod 2^39) << 24 | length): the top bit marks
 * a written slot, and the position is read relative to the one a receiver
 * expects (smc_slot_header_decode in smc_slot_wire.h, which also refuses
 * a length above max_payload), so streams longer than 2^39 positions go
 * on across the wrap; sent_num is pushed in a later write
 * than the slots it covers (T2), so a receiver that sees sent_num > p reads
 * slot headers that are current for every application message below p: the
 * position is an application message iff the next expected slot's header
 * names it, otherwise it is a null. Sequence number of position k of
 * sender rank s is k * S + s (Spindle 2.1).
 *
 * Invariants: sent_num in this member's row is written only by the
 * predicate thread, only to values whose ring data has already been pushed
 * (queued earlier), and at most once per subgroup per trigger; a slot is
 * reused only after every member's delivered_num (received_num in
 * unordered mode) passed the message it held.
 *
 * Threads: reserve/commit run on application threads; commit takes the
 * engine lock (smc_commit_locked: a caller that holds it, such as a
 * delivery callback). The predicate and its trigger run on the predicate
 * thread with the engine lock held; the delivery callback runs there too
 * (and, for the trim of a view change, on the thread that delivers it,
 * again with the engine lock held; with own_inline, a sender's own
 * unordered messages on the thread in smc_commit_own, lock held).
 */
#ifndef SP_SMC_SMC_H
#define SP_SMC_SMC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <spindle/group.h>

#include "smc/smc_slot_wire.h"
#include "sst/sst.h"

/* Version of the ring and column layout above (slot headers, positions,
 * side-region placement); carried in the control channel's hello so that
 * members of incompatible builds refuse each other. Bump on any change. */
#define SMC_LAYOUT_VERSION 7u

/* Sliced layout: how far each writer's rings are moved into its slice,
 * per writer index (smc_side_ring): just over a slot of 1 KB messages, so
 * that up to three writers' slots k of that size sit on disjoint cache
 * sets; more writers wrap around the page. */
#define SMC_RING_STAGGER (17ull * SST_CACHE_LINE)

#define SMC_MAX_RING_SIZE SPINDLE_MAX_RING_BYTES /* bytes of one sender ring */
/* Bound of smc_options.first_position: half the positions a stream may use
 * before delivered_num (position * senders) could overflow. */
#define SMC_MAX_FIRST_POSITION (1ull << 57)

_Static_assert(SPINDLE_SLOT_BYTES(1) == SMC_HEADER_SIZE + 8,
               "SPINDLE_SLOT_BYTES must describe the ring's slots");
_Static_assert(SPINDLE_MAX_PAYLOAD < (1u << SMC_LENGTH_BITS),
               "a slot header's length field must hold SPINDLE_MAX_PAYLOAD");

struct smc_group;
struct smc_p2p_slot;

/* One subgroup: members/senders are SST rows (group member indices). */
struct smc_layout {
    uint32_t num_members;
    uint32_t members[SST_MAX_ROWS];
    uint32_t num_senders;
    uint32_t senders[SST_MAX_ROWS]; /* round-robin order */
    uint32_t window_size;
    uint32_t max_payload;
    enum spindle_delivery_mode mode;
};

struct smc_options {
    bool batching;
    bool null_sends;
    /* Unordered subgroups: smc_commit itself sends the message and
     * delivers it to this member (the deliver upcall then runs on the
     * committing thread, engine lock held) rather than waking the
     * predicate thread for it (spindle_group_options.own_inline). */
    bool own_inline;
    /* > 0: a reserve that waited this long for a slot another member holds
     * has that member suspected (sst_table_suspect); 0: it just waits. */
    int slow_member_ms;
    spindle_deliver_fn deliver;
    void *deliver_ctx;
    /* Bounded delivery (logged subgroups, view/view_log.c; the dispatch
     * queue, group/group_dispatch.c): called with deliver_ctx on the
     * predicate thread before each delivery step (an unordered
     * subgroup's: each receive step), it returns how many bytes the
     * subgroup may deliver now, each message counting deliver_overhead +
     * its length; the step stops before the first message past it (the
     * rest waits in the ring for a later pass: an unordered subgroup's
     * unacknowledged). The trim of a view change is delivered whole. NULL:
     * no bound. */
    size_t (*deliver_room)(void *ctx, uint32_t subgroup);
    uint32_t deliver_overhead;
    /* With deliver_room: a token (lock-free) that changes when the room
     * may have grown. A subgroup held at the bound is not tried again
     * until it changes, so the predicate thread may sleep meanwhile; who
     * changes it wakes the engine (sst_engine_wake). NULL: retried on
     * every pass. */
    uint64_t (*deliver_progress)(void *ctx);
    /* Called with deliver_ctx on the predicate thread (engine lock held,
     * like deliver) once a slot of subgroup is free again after a
     * non-blocking reserve of this member found its window full: an
     * application that answers from inside its upcalls learns when to
     * send what it kept. Once per such reserve at most. NULL: none. */
    void (*send_ready)(void *ctx, uint32_t subgroup);
    /* Test hook (0 in production): every sender's stream starts at this
     * position instead of 0, as if that many positions (nulls) had passed,
     * so that a short test crosses the slot header's 2^39 position wrap
     * (smc_impl.h, smc_header). Every member must be given the same value;
     * application message numbers (sender_index) still start at 0. Values
     * of SMC_MAX_FIRST_POSITION or more are refused.
     * Why the 64-bit SST counters themselves never overflow: the largest,
     * delivered_num, is a sequence number, position * senders + rank with
     * at most SST_MAX_ROWS = 64 senders, so positions must stay below
     * 2^64 / 64 = 2^58 (2.9e17). A sender's positions advance with its own
     * messages and with nulls, and nulls only answer messages received
     * (Spindle 3.3), so at most at the fastest sender's message rate: at
     * 10^8 messages a second per sender, beyond any transport here, 2^58
     * positions take 91 years, and each view change starts every counter
     * again from this value (a fresh table). */
    uint64_t first_position;
    /*
     * Persistence frontiers (logged subgroups, view/view_log.c; docs/LOGS.md
     * "Persistence frontiers"): in the atomic subgroups whose bit is set in
     * persist, this member keeps its persisted_num column, the sequence
     * numbers below which everything it delivered is on stable storage,
     * and pushes it with its acknowledgement (one write a pass). After each
     * delivery step it takes persist_mark(deliver_ctx), the position that
     * persist_durable(deliver_ctx) (lock-free) must reach for what was
     * delivered so far to be durable; whoever moves the durable position
     * wakes the engine. When the minimum of the members' columns (the
     * global frontier) grows, persisted(deliver_ctx, subgroup, frontier)
     * runs on the predicate thread, lock held, after the delivery upcalls
     * of every message below frontier. Other subgroups pay nothing but the
     * column's 8 bytes in the row.
     */
    uint64_t persist[SPINDLE_MAX_SUBGROUPS / 64];
    uint64_t (*persist_mark)(void *ctx);
    uint64_t (*persist_durable)(void *ctx);
    void (*persisted)(void *ctx, uint32_t subgroup, uint64_t frontier);
    /*
     * Point-to-point rings (smc_p2p.h): slots of each pair's ring (0:
     * SPINDLE_P2P_DEFAULT_WINDOW; every member must give the same), and
     * the upcall of each message or query taken from a ring, called with
     * deliver_ctx, the sender's row and the message, on the predicate
     * thread with the engine lock held. It returns 0 once it took the
     * message, or SPINDLE_EAGAIN to leave it in the ring for later (a
     * bounded queue is full; tried again once deliver_progress moves).
     * NULL: messages are taken and dropped.
     */
    uint32_t p2p_window;
    int (*p2p_deliver)(void *ctx, uint32_t row, const struct smc_p2p_slot *header,
                       const void *data);
};

/* Counters of one smc_group (statistics of spindle_stats that SMC owns). */
struct smc_stats {
    uint64_t messages_sent; /* the sum of the subgroups' committed counts */
    uint64_t messages_delivered;
    uint64_t nulls_sent;
    uint64_t nulls_received;
    uint64_t send_batches[SPINDLE_HIST_BUCKETS];
    uint64_t receive_batches[SPINDLE_HIST_BUCKETS];
    uint64_t delivery_batches[SPINDLE_HIST_BUCKETS];
    uint64_t send_batch_count, send_batch_messages;
    uint64_t receive_batch_count, receive_batch_messages;
    uint64_t delivery_batch_count, delivery_batch_messages;
    /* Back-pressure: reserves that found the window full, the time they
     * waited for a slot, and the row of the member that held the last
     * full window (the first one found behind; -1: none yet). */
    uint64_t window_full, window_full_ns;
    int32_t window_holder_row;
    /* Delivery steps stopped at smc_options.deliver_room. */
    uint64_t deliveries_held;
};

/*
 * Validates one layout against a group of num_rows members. 0 or
 * SPINDLE_EINVAL naming the subgroup and the bad value.
 */
int smc_layout_validate(const struct smc_layout *layout, uint32_t subgroup, uint32_t num_rows);

/*
 * Offset of subgroup g's first ring in the packed side region of member
 * row (a transport without slice alignment): the rings of every earlier
 * subgroup that row is a member of come first. With g == num_subgroups it
 * is where row's rings end. Only meaningful for a g that row is a member
 * of (or num_subgroups). Layouts must be valid.
 */
uint64_t smc_ring_base(const struct smc_layout *layouts, uint32_t g, uint32_t row);
/* Bytes of one sender's ring in a subgroup of this layout. */
uint64_t smc_ring_stride(const struct smc_layout *layout);

/*
 * What every member's side region layout follows from (smc_side.c): the
 * group's layouts, its rows, the transport's slice alignment and the size
 * of one point-to-point ring (0: the group has none).
 *
 * align 0 (libfabric, verbs: peers import whole regions): packed, as
 * smc.h's "Rings" paragraph describes. align > 0 (shm): sliced. Row m's
 * side region is one slice per writer w (in row order), each starting on
 * an align boundary: w's ring in every subgroup (in index order) that w
 * sends in and m is a member of, then w's point-to-point ring to m; then
 * m's outgoing point-to-point staging rings, which nobody else writes.
 * One slice per writer rather than one per ring: a sender imports one
 * slice of each peer's side region however many subgroups they share,
 * and pads at most align - 1 bytes per writer, not per ring.
 */
struct smc_side_shape {
    const struct smc_layout *layouts;
    uint32_t num_subgroups;
    uint32_t num_rows;
    uint32_t align;
    uint64_t p2p_ring_bytes;
};
/* Offset of the ring of sender_rank of subgroup g in row's side region
 * (row a member of g). */
uint64_t smc_side_ring(const struct smc_side_shape *shape, uint32_t g, uint32_t sender_rank,
                       uint32_t row);
/* Offset of writer's point-to-point ring to row, in row's side region. */
uint64_t smc_side_p2p_in(const struct smc_side_shape *shape, uint32_t writer, uint32_t row);
/* Offset of row's outgoing staging ring to target, in row's side region. */
uint64_t smc_side_p2p_out(const struct smc_side_shape *shape, uint32_t target, uint32_t row);
/* Bytes of row's side region (0: none). */
uint64_t smc_side_size(const struct smc_side_shape *shape, uint32_t row);
/* Sliced layout (align > 0): the align-aligned part [*offset, *offset +
 * *length) of row's side region that writer writes, every ring of its
 * there and nothing else (*length 0: it writes nothing there). */
void smc_side_slice(const struct smc_side_shape *shape, uint32_t writer, uint32_t row,
                    uint64_t *offset, uint64_t *length);

/*
 * Builds the group state and its SST table (not yet connected), with a side
 * region for the rings of this member's subgroups. Layouts are copied.
 * SPINDLE_EINVAL for a bad layout, SPINDLE_ENOMEM, or the table's error.
 */
int smc_group_create(struct sst_engine *engine, const struct smc_layout *layouts,
                     uint32_t num_subgroups, uint32_t num_rows, uint32_t my_row,
                     const struct smc_options *options, struct smc_group **out);
/* Lets each other member write only its own row of this member's table
 * (member_of_row: member ids by row; sst_table_grant_rows) and, in its
 * side region, only its own rings: its ring in each subgroup it sends in
 * and this member belongs to, and its point-to-point ring to this member
 * (sst_table_grant_side). Call before smc_group_export. The transport's
 * grant error. */
int smc_group_grant_writes(struct smc_group *group, const uint32_t *member_of_row);
/* This member's table descriptor, for the bootstrap exchange. The
 * transport's export error. */
int smc_group_export(struct smc_group *group, struct sst_member_desc *out);
/* Connects the table to every other member (descs indexed by row). The
 * transport's connect or import error, naming the peer; with failed set,
 * rows that cannot be connected are marked failed instead
 * (sst_table_connect). */
int smc_group_connect(struct smc_group *group, const struct sst_member_desc *descs, int timeout_ms,
                      uint64_t *failed);
/* Registers the predicate. SPINDLE_ENOMEM. */
int smc_group_start(struct smc_group *group);
/* Removes the predicate and fails waiting senders with SPINDLE_ESHUTDOWN. */
void smc_group_stop(struct smc_group *group);
/* Frees the state and the table (stop first). Safe on NULL. */
void smc_group_destroy(struct smc_group *group);

/* spindle_reserve / spindle_commit / spindle_flush on this view's
 * multicast, with the same failure values (include/spindle/group.h). A
 * reservation made with SPINDLE_RESERVE_MORE is committed without waking
 * the predicate thread; the next commit without it, or a non-blocking
 * reserve that finds the window full, wakes it. */
int smc_reserve(struct smc_group *group, uint32_t subgroup, size_t size, unsigned flags,
                void **slot);
int smc_commit(struct smc_group *group, uint32_t subgroup);
/* smc_commit for an application thread outside every upcall of the group:
 * with smc_options.own_inline, in an unordered subgroup of which this
 * member is a member, it posts the message and delivers it here itself,
 * the delivery callback running on the calling thread with the engine
 * lock held (smc_own_pass). The same failure values. */
int smc_commit_own(struct smc_group *group, uint32_t subgroup);
int smc_flush(struct smc_group *group, int timeout_ms);
/* smc_commit for a thread that already holds the engine lock (a delivery
 * upcall made inside the predicate, or inside a trim delivery): the same
 * failure values; the message goes out in this predicate pass or the
 * next. */
int smc_commit_locked(struct smc_group *group, uint32_t subgroup);
/* Drops the open reservation of subgroup (nothing was committed: the slot
 * stays free). SPINDLE_EINVAL when none is open. */
int smc_cancel(struct smc_group *group, uint32_t subgroup);

/* Every persisting subgroup (smc_flush_persistent). */
#define SMC_ALL_SUBGROUPS UINT32_MAX
/*
 * Waits until every message this member committed in subgroup
 * (SMC_ALL_SUBGROUPS: every persisting one) before the call is delivered
 * here and the global frontier passed it (min over the members' columns;
 * it waits for the frontier to pass what was delivered when its last own
 * message was). deadline_ns: CLOCK_MONOTONIC (sp_now_ns), UINT64_MAX for
 * none. SPINDLE_EINVAL for an unknown or non-persisting subgroup (named),
 * SPINDLE_ETIMEDOUT, the group's failure, SPINDLE_ESHUTDOWN when stopped
 * or wedged for a view change (the caller retries in the next view).
 */
int smc_flush_persistent(struct smc_group *group, uint32_t subgroup, uint64_t deadline_ns);
/*
 * This member's persisted_num and the global frontier of subgroup (in
 * sequence numbers of this multicast). SPINDLE_EINVAL for an unknown
 * subgroup, one that does not persist, or one this member is not in.
 * Any thread.
 */
int smc_group_persisted(struct smc_group *group, uint32_t subgroup, uint64_t *local,
                        uint64_t *global);
/*
 * The log's durable position moved (called by the thread that made it
 * durable, right after its sync). When the predicate thread sleeps (or
 * none runs) and no other thread holds the engine lock, raises this member's persisted_num columns
 * to the newest durable mark, pushes them, and reports a global frontier that grew (the persisted
 * upcall, on the calling thread), all under the lock as the predicate thread's persist step does:
 * so the predicate thread need not be woken only for that. Returns true when it did; false when the
 * caller must still wake the predicate thread (sst_engine_wake): it was awake or the lock busy (a
 * pass is under way or about to sleep, and the wake makes it look again), the group is stopped,
 * wedged or failed, or a delivery is held at the log queue's bound (the sync made room). Never
 * blocks.
 */
bool smc_group_durable(struct smc_group *group);
/* Holds the persisted upcall back (before smc_group_start) until
 * smc_group_release_frontier: a view change first reports the previous
 * view's last frontier. Release takes the engine lock. */
void smc_group_hold_frontier(struct smc_group *group);
void smc_group_release_frontier(struct smc_group *group);

/* The group's counters; locked: the caller holds the engine lock (a
 * delivery callback). */
void smc_group_stats(struct smc_group *group, struct smc_stats *out, bool locked);
struct sst_table *smc_group_table(struct smc_group *group);

/*
 * View-change hooks (ragged-edge trim, view/trim.h). smc_group_wedge stops
 * every step of the predicate (no sends, received counters frozen) and
 * fails later reserves with SPINDLE_ESHUTDOWN. smc_group_received copies
 * row's received_num[] of subgroup (one count per sender, round-robin
 * order) into received[0..cap). smc_group_deliver_trim delivers, in
 * round-robin order, every application message of sender s at a round
 * below trim[s] that is not yet delivered, whether stable or not (the trim
 * is the agreement), skips every position at or beyond its sender's trim,
 * and leaves delivered_num at `end` (one past the last position within a
 * trim: trim_result.delivered_total); SPINDLE_EPROTO when this member
 * lacks a position within the trim, SPINDLE_EINVAL when num_senders is not
 * the subgroup's. All return SPINDLE_EINVAL for an unknown subgroup or
 * row; deliver_trim requires a wedged group.
 */
void smc_group_wedge(struct smc_group *group);
int smc_group_received(struct smc_group *group, uint32_t subgroup, uint32_t row, uint64_t *received,
                       uint32_t cap);
int smc_group_deliver_trim(struct smc_group *group, uint32_t subgroup, const uint64_t *trim,
                           uint32_t num_senders, uint64_t end);
/* This member's delivered_num of subgroup (atomic: sequence numbers,
 * unordered: messages); 0 for an unknown subgroup. */
uint64_t smc_group_delivered(struct smc_group *group, uint32_t subgroup);

/*
 * Resend support (wedged group, after deliver_trim): *first = this member's
 * own application messages of subgroup delivered, *count = committed ones
 * not delivered. They are still in the ring (a slot is reused only after
 * every member delivered it). smc_group_message returns the payload of own
 * application message index (first <= index < first + count) and its
 * length; NULL with SPINDLE_EINVAL outside that range.
 */
int smc_group_undelivered(struct smc_group *group, uint32_t subgroup, uint64_t *first,
                          uint64_t *count);
const void *smc_group_message(struct smc_group *group, uint32_t subgroup, uint64_t index,
                              uint32_t *length);
/*
 * Counters a peer writes into this member's table (sent_num, received_num,
 * delivered_num), and the received counts a survivor reports at a view
 * change, are checked before use: none may exceed SMC_COUNTER_MAX. An
 * honest member needs over four years at 10^9 positions a second to get
 * there, and below it received * senders + rank (at most 64 senders) and
 * the other sums of the predicate cannot overflow 64 bits.
 */
#define SMC_COUNTER_MAX (1ull << 57)

/*
 * Ragged edge of an unordered subgroup (it delivers on receipt, so nothing
 * is trimmed; instead surviving senders resend what some survivor lacks,
 * and receivers take again, without delivering, what they already had).
 * smc_group_set_edge (wedged group) takes lowest[s], the fewest positions
 * of sender s that any survivor received: from then on
 * smc_group_undelivered starts at this member's first own message at or
 * beyond lowest[my sender rank], and smc_group_beyond_edge gives how many
 * of sender s's messages this member delivered beyond lowest[s] (its
 * resends to skip in the next view: those it received past lowest[s], and
 * those of an earlier change's resends it was still to skip).
 * smc_group_skip sets that count for sender s of subgroup in a group that
 * has not started; smc_group_skipping reads what is left of it (a joiner's
 * leader hands its own over: the joiner's state holds those messages).
 * SPINDLE_EINVAL for
 * an unknown subgroup or sender, a group not wedged, or a subgroup that is
 * not unordered; SPINDLE_EPROTO when lowest[s] lies beyond what this
 * member received.
 */
int smc_group_set_edge(struct smc_group *group, uint32_t subgroup, const uint64_t *lowest,
                       uint32_t num_senders);
int smc_group_beyond_edge(struct smc_group *group, uint32_t subgroup, uint32_t sender,
                          uint64_t *count);
int smc_group_skip(struct smc_group *group, uint32_t subgroup, uint32_t sender, uint64_t count);
int smc_group_skipping(struct smc_group *group, uint32_t subgroup, uint32_t sender,
                       uint64_t *count);
/*
 * Test hook: while fn returns true for (subgroup, sender row), this
 * process takes nothing more from that sender of that subgroup (it stays
 * in the ring, unacknowledged), so tests can hold one receiver behind the
 * others at a view change. NULL, the default, turns it off; set it before
 * creating a group.
 */
typedef bool (*smc_hold_hook_fn)(uint32_t subgroup, uint32_t sender_row);
void smc_test_hold_receive(smc_hold_hook_fn fn);
/*
 * Test hook: this process writes fn(subgroup, position, header) as the
 * slot header of each message it sends (the send step writes headers)
 * instead of the header itself, so that a test can play a member patched
 * to lie in its ring slots. NULL, the default, turns it off; set it before
 * creating a group.
 */
typedef uint64_t (*smc_header_hook_fn)(uint32_t subgroup, uint64_t position, uint64_t header);
void smc_test_send_header(smc_header_hook_fn fn);
/*
 * Test hook: this process writes fn(subgroup, sender rank, received) as its
 * received_num of that sender instead of the count itself, so that a test
 * can play a member patched to acknowledge messages it was never sent.
 * NULL, the default, turns it off; set it before creating a group.
 */
typedef uint64_t (*smc_ack_hook_fn)(uint32_t subgroup, uint32_t sender_rank, uint64_t received);
void smc_test_ack_value(smc_ack_hook_fn fn);
/* Marks the group failed with error (from the engine's failure callback):
 * waiting senders and flushes return it. Lock held. */
void smc_group_fail(struct smc_group *group, int error);

#endif
