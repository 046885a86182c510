/*
 * Private to src/smc: the state behind struct smc_group, shared by
 * smc_group.c (construction, layout), smc_send.c (reserve/commit/flush on
 * application threads) and smc_predicate.c (the predicate thread).
 *
 * Ownership of fields (who writes; everything else only reads):
 *   application thread, no lock: committed, slot_length[] (commit),
 *     reserve_open, reserve_size; a commit takes no lock (smc_send.c);
 *   predicate thread (or a holder of the engine lock), under the engine
 *     lock: pushed, next_position, slot_position[] and the slot header (a
 *     message's position is assigned when its slot is pushed), published,
 *     nulls, every receiver field, stats;
 *   atomics (read anywhere): committed, pushed, delivered_own, failed, stopped, wedged,
 *     reserve_waiting, room_wanted, flush_waiters, slow_row, frontier,
 *     frontier_held, delivered_through.
 */
#ifndef SP_SMC_SMC_IMPL_H
#define SP_SMC_SMC_IMPL_H

#include <pthread.h>

#include "smc/smc.h"
#include "smc/smc_p2p.h"

/* Delivered up to seq is durable once the log's durable position reaches
 * position (smc_options.persist_mark). */
struct smc_mark {
    uint64_t position;
    uint64_t seq;
};
/* Marks kept per subgroup (4 KiB); when full, every second one goes
 * (smc_predicate.c, halve_marks): the column then moves in coarser
 * steps. Even: a full FIFO halves exactly. */
#define SMC_PERSIST_MARKS 256u

/* A commit sends its atomic message itself (smc_commit_send_pass) only
 * when this sender's previous commit was at least this long before
 * (smc_send.c, commit_send_allowed). */
#define SMC_COMMIT_SEND_GAP_NS 5000000ull

/* What this member knows about one sender of one subgroup. */
struct smc_sender {
    uint32_t row;           /* the sender's SST row */
    uint64_t recv_position; /* positions received = my received_num[s] */
    uint64_t recv_app;      /* application messages received */
    uint64_t deliv_app;     /* application messages delivered */
    uint64_t *app_position; /* [W]: position of app message a at a % W */
    uint32_t *app_length;   /* [W]: its length, checked when it was received */
    uint64_t sent_seen;     /* the largest sent_num read from the sender's row */
    bool lied;              /* its row broke the protocol: nothing more is taken */
    /* Unordered subgroups, at a view change (smc_group_set_edge): the
     * sender's app messages below the survivors' edge, and in the next
     * view how many of its first (resent) messages to take without
     * delivering them again. */
    uint64_t edge_app;
    uint64_t skip;
};

struct smc_subgroup {
    struct smc_layout layout;
    uint32_t index;
    int my_member_rank; /* position in layout.members, -1 when not a member */
    int my_sender_rank; /* position in layout.senders, -1 when not a sender */
    uint32_t slot_size; /* header + payload rounded up to 8 */
    uint32_t num_peers;
    uint32_t peers[SST_MAX_ROWS]; /* member rows other than mine */

    /* Row offsets (identical in every row). */
    uint32_t received_offset; /* received_num[0..S-1], then delivered_num */
    uint32_t delivered_offset;
    uint32_t sent_offset; /* sent_num, then null_num */
    uint32_t null_offset;

    /* Rings, in the table's side region (smc_side_ring). Member only. */
    uint64_t ring_stride;                /* bytes of one sender's ring */
    uint64_t ring_at[SST_MAX_ROWS];      /* sender rank s's ring in my side region */
    uint64_t ring_at_peer[SST_MAX_ROWS]; /* sender: my ring in peers[i]'s region */

    /* Sender side (my_sender_rank >= 0). */
    uint64_t committed;      /* app messages committed (atomic) */
    uint64_t pushed;         /* app messages whose slots were pushed (atomic) */
    uint64_t next_position;  /* positions assigned (pushed messages and nulls) */
    uint64_t published;      /* sent_num value in my row */
    uint64_t nulls;          /* null_num value in my row */
    uint64_t *slot_position; /* [W]: position of my pushed message in each slot */
    uint32_t *slot_length;   /* [W]: payload bytes of my committed message in each slot */
    int reserve_open; /* atomic: 0, or a reservation is open: 1, 2 with SPINDLE_RESERVE_MORE */
    uint32_t reserve_size;
    int reserve_waiting; /* atomic: a reserver waits for a free slot */
    /* atomic: a non-blocking reserve found the window full; the predicate
     * calls smc_options.send_ready once a slot is free again. */
    int room_wanted;
    /* Unordered: app messages whose slots a finished pass posted (atomic,
     * set by the predicate thread at the start of each pass). A slot is
     * reused only once its message is posted here too: that the others
     * received it is learnt through memory another process wrote, which
     * orders nothing in this process. */
    uint64_t posted_mark;
    bool edge_set; /* unordered: resend_from holds (smc_group_set_edge) */
    /* atomic: a commit with SPINDLE_RESERVE_MORE left the predicate thread
     * unwoken; a reserve that finds the window full wakes it and clears
     * this. A plain commit wakes the thread but leaves this alone, so that
     * commits without the flag touch nothing on this line, which the
     * predicate thread writes at every delivery (at worst, one needless
     * wake at the next full window). In edge_set's padding: the fields
     * after it keep their places. */
    uint8_t quiet_commits;
    uint64_t resend_from; /* own app messages every survivor received */

    /* Receiver side (my_member_rank >= 0). */
    struct smc_sender *senders;    /* [S] */
    uint64_t delivered;            /* my delivered_num */
    uint64_t delivered_own;        /* atomic: my own app messages delivered */
    struct spindle_message *batch; /* [S * W] */
    bool ack_dirty;
    /* The last delivery step stopped at deliver_room, when the progress
     * token was held_token (predicate thread). */
    bool held;
    uint64_t held_token;

    /* Persistence (smc_options.persist; predicate thread unless noted). */
    bool persists;
    uint32_t persisted_offset; /* my persisted_num, right after delivered_num */
    uint64_t persisted;        /* its value */
    bool persist_dirty;        /* written, not yet pushed */
    uint64_t marked;           /* delivered count the newest mark covers */
    uint32_t mark_head, mark_count;
    struct smc_mark *marks;     /* [SMC_PERSIST_MARKS], a FIFO */
    uint64_t *column_seen;      /* [num_members]: each member's last good column */
    uint64_t frontier;          /* atomic: min of the members' columns */
    uint64_t frontier_reported; /* the last persisted upcall's value */
    /* atomic: delivered as of the last delivery upcall, stored before
     * delivered_own grows (smc_flush_persistent) */
    uint64_t delivered_through;

    /* The last commit that found every earlier message of this sender
     * delivered: committed after it, and when (CLOCK_MONOTONIC ns).
     * smc_send.c, commit_send_allowed; the committing thread only, and only
     * at such a commit: at the end, so that no field above moves, and
     * untouched by a busy sender's commits (the lines above are written by
     * the predicate thread at every pass). */
    uint64_t idle_commit;
    uint64_t idle_commit_ns;
};

struct smc_group {
    struct sst_engine *engine;
    struct sst_table *table;
    struct smc_options options;
    uint32_t num_rows;
    uint32_t my_row;
    uint32_t num_subgroups;
    struct smc_subgroup *subgroups;
    uint64_t predicate_id;
    bool started;
    int stopped; /* atomic */
    int wedged;  /* atomic: view change in progress, predicate idle */
    int failed;  /* atomic: 0 or the SPINDLE_E* code */
    /* atomic: the predicate runs (smc_group_start), so an own pass may
     * deliver (smc_options.own_inline) */
    int own_passes;
    int own_posting; /* atomic: own passes whose post is under way */

    /* Wakes application threads waiting for a slot or a flush. */
    pthread_mutex_t wait_lock;
    pthread_cond_t wait_cond;
    int flush_waiters; /* atomic */

    struct smc_stats stats; /* predicate thread / commit under the engine lock */
    /* Back-pressure counters of smc_stats, kept by application threads
     * (atomics): reserves that met a full window, time waited, holder. */
    uint64_t window_full, window_full_ns;
    int32_t window_holder_row;
    /* A member that held a waiting reserve's slot for slow_member_ms, for
     * the predicate thread to suspect (atomic; -1: none). */
    int32_t slow_row;
    /* The persisted upcall waits for smc_group_release_frontier (atomic). */
    int frontier_held;
    struct smc_p2p p2p; /* point-to-point rings (smc_p2p.c) */
};

/* Position of value in list[0..count), -1 when absent. */
static inline int smc_find_row(const uint32_t *list, uint32_t count, uint32_t value)
{
    for (uint32_t i = 0; i < count; i++)
        if (list[i] == value)
            return (int)i;
    return -1;
}

/* 0, or the error of a group that failed, stopped or is wedged
 * (smc_send.c). */
int smc_group_state_error(struct smc_group *group);

/* Local copy of the ring of sender_rank in sub (this member must be a
 * member of sub). */
static inline uint8_t *smc_ring(struct smc_group *group, const struct smc_subgroup *sub,
                                uint32_t sender_rank)
{
    return sst_side(group->table) + sub->ring_at[sender_rank];
}

/* Log2 bucket of a batch size n >= 1. */
static inline unsigned smc_bucket(uint64_t n)
{
    unsigned b = 63u - (unsigned)__builtin_clzll(n);
    return b < SPINDLE_HIST_BUCKETS ? b : SPINDLE_HIST_BUCKETS - 1;
}

/* True when my next slot in sub may be (re)used: every member delivered
 * (atomic) or received (unordered) the message it held. */
bool smc_slot_free(struct smc_group *group, const struct smc_subgroup *sub);
/* True when enough of my slots in sub are free to wake a sender blocked
 * on a full window (smc_send.c, wait_for_slot). */
bool smc_room_for_waiter(struct smc_group *group, const struct smc_subgroup *sub);

/* Wakes application threads blocked in reserve or flush. */
void smc_wake_waiters(struct smc_group *group);

/* What smc_deliver_range may pass. */
struct smc_pass_limits {
    /* deliverable[s]: a message of sender s at a round below it may be
     * delivered (every member holds it; at the trim: within the trim). */
    const uint64_t *deliverable;
    uint64_t bound; /* positions below it only */
    /* The trim of a view change: positions at or beyond deliverable[s]
     * are skipped (delivered nowhere) instead of stopping the walk. */
    bool at_trim;
};

/* Passes positions from delivered_num in round-robin order as far as the
 * delivery rule and limits allow, delivering the messages among them (one
 * message when batching is off; smc_predicate.c has the rule). Lock
 * held. */
void smc_deliver_range(struct smc_group *group, struct smc_subgroup *sub,
                       const struct smc_pass_limits *limits, size_t room);

/* The committing thread's pass over its own unordered message
 * (smc_options.own_inline; smc_predicate.c). Lock held; the caller then
 * posts (sst_engine_unlock) and calls smc_own_posted with the pushed
 * count read before unlocking. */
void smc_own_pass(struct smc_group *group, struct smc_subgroup *sub);
void smc_own_posted(struct smc_group *group, struct smc_subgroup *sub, uint64_t pushed);

/* The committing thread's send of its own atomic message(s) while the
 * predicate thread sleeps (sst_engine_run_inline; smc_predicate.c). ctx is
 * a struct smc_commit_send; lock held. False when the group is wedged,
 * stopped or failed, has a slow row to suspect, or other senders'
 * messages wait to be received or delivered: the caller wakes the
 * predicate thread. */
struct smc_commit_send {
    struct smc_group *group;
    struct smc_subgroup *sub;
};
bool smc_commit_send_pass(void *ctx);

bool smc_predicate(void *ctx);
void smc_trigger(void *ctx);
/* The receiving half of smc_trigger, for the transport's progress thread
 * (sst_predicate_set_arrival; smc_predicate.c has what it leaves out). */
void smc_arrival_trigger(void *ctx);

#endif
