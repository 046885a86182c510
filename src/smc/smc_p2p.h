/*
 * Point-to-point rings of one smc_group (docs/P2P.md): for every ordered
 * pair of rows (sender, target), a ring of window slots in the target's
 * side region, after its multicast rings, written by the sender with
 * one-sided writes and guarded by a counter in the sender's row.
 *
 * Row columns (same offsets in every row), after the subgroups':
 *   p2p_window       this row's ring size, published once; a sender writes
 *                    to a target only once it reads the target's window
 *                    and finds it equal to its own
 *   p2p_sent[N]      messages this row's owner wrote into row r's ring
 *                    (pushed to r only: the guard of that ring, T2)
 *   p2p_received[N]  messages this row's owner took from row s's ring
 *                    (pushed to s only: the sender's credit)
 * Side region of row m (struct smc_side_shape): N incoming rings, one per
 * sender s (packed: all after m's multicast rings; sliced: each in s's
 * slice, after s's multicast rings), then N outgoing staging rings that
 * sends copy from (to target r at out_base + r * ring_bytes).
 * Slot headers: smc_p2p_wire.h.
 *
 * Invariants: p2p_sent[r] - p2p_received[me] read in r's row <= window
 * (a sender reuses slot p % window only after r took message p - window);
 * both counters only grow; every counter and slot header read from a
 * peer is checked, and a peer that breaks them is suspected with
 * SPINDLE_EPROTO and nothing more is taken from it.
 *
 * Threads: sends run on application threads under the engine lock (or
 * inside a default-mode upcall, which holds it) and post after it is
 * released (Spindle 3.4); the predicate (its own, beside the multicast's)
 * takes what arrived, delivers it and pushes the credit back. Queries
 * wait on the group's wait_cond; the pending table is under wait_lock.
 */
#ifndef SP_SMC_SMC_P2P_H
#define SP_SMC_SMC_P2P_H

#include <stdbool.h>
#include <stdint.h>

#include "smc/smc_p2p_wire.h"
#include "sst/sst.h"

struct smc_group;
struct smc_layout;
struct smc_side_shape;

/* Queries one smc_group may have waiting at once. */
#define SMC_P2P_MAX_PENDING 64u

struct smc_p2p_pending {
    bool used, done;
    uint64_t id;
    uint32_t row;
    void *reply;
    size_t capacity;
    size_t length;
};

struct smc_p2p {
    bool enabled; /* the group has at least two rows */
    uint32_t window;
    uint64_t slot_bytes, ring_bytes;
    uint32_t window_offset, sent_offset, received_offset; /* row columns */
    uint64_t out_base;                                    /* my staging rings, in my side region */
    uint64_t in_at[SST_MAX_ROWS];       /* row s's ring to me, in my side region */
    uint64_t at_peer[SST_MAX_ROWS];     /* my ring to row r, in r's side region */
    uint64_t sent[SST_MAX_ROWS];        /* to row r (engine lock) */
    uint64_t received[SST_MAX_ROWS];    /* from row s (predicate thread) */
    uint64_t credit_seen[SST_MAX_ROWS]; /* r's p2p_received[me] (predicate thread) */
    bool lied[SST_MAX_ROWS];            /* predicate thread */
    bool config_pushed;                 /* engine lock */
    bool held;                          /* delivery stopped at the bound */
    uint64_t held_token;
    int waiters;                                         /* atomic: senders and queries waiting */
    uint64_t next_query;                                 /* wait_lock */
    struct smc_p2p_pending pending[SMC_P2P_MAX_PENDING]; /* wait_lock */
    uint64_t predicate_id;
    bool started;
};

/* Adds the columns (window, num_rows groups of two counters) to schema
 * and sets the sizes; 0 or the schema's error. window is the group's
 * smc_options.p2p_window (0: SPINDLE_P2P_DEFAULT_WINDOW). */
int smc_p2p_add_columns(struct smc_group *group, struct sst_schema *schema, uint32_t window);
/* Places the rings in this member's and every peer's side region, laid
 * out as shape says. */
void smc_p2p_place(struct smc_group *group, const struct smc_side_shape *shape);
/* Writes this member's window column (before the first push). */
void smc_p2p_init_row(struct smc_group *group);
/* Registers / removes the p2p predicate. */
int smc_p2p_start(struct smc_group *group);
void smc_p2p_stop(struct smc_group *group);

/*
 * Writes one message of header->kind into the ring to row. nonblock:
 * SPINDLE_EAGAIN when it is full, else waits (until deadline_ns,
 * CLOCK_MONOTONIC, UINT64_MAX: none; then SPINDLE_ETIMEDOUT). locked: the
 * caller holds the engine lock (a default-mode upcall; implies nonblock).
 * SPINDLE_EINVAL for a row outside the group or this member's own,
 * SPINDLE_EPEERFAILED when row failed, SPINDLE_EPROTO when its window
 * differs, SPINDLE_ESHUTDOWN when stopped or wedged, the group's failure.
 */
int smc_p2p_send(struct smc_group *group, uint32_t row, const struct smc_p2p_slot *header,
                 const void *data, bool nonblock, bool locked, uint64_t deadline_ns);
/*
 * Sends a query to row and waits for its reply (see spindle_p2p_query):
 * the errors of smc_p2p_send, SPINDLE_EAGAIN when SMC_P2P_MAX_PENDING
 * queries wait already, SPINDLE_ETIMEDOUT at deadline_ns,
 * SPINDLE_EPEERFAILED when row failed or the group stopped or wedged
 * before the reply came, SPINDLE_EMSGSIZE when the reply was longer than
 * capacity (*length says how long).
 */
int smc_p2p_query(struct smc_group *group, uint32_t row, const void *request, uint32_t length,
                  void *reply, size_t capacity, size_t *reply_length, uint64_t deadline_ns);

#endif
