/*
 * Membership: the current view of one member, the multicast that runs in
 * it, and the protocols that change it (failure report and wedge, exchange
 * and commit, trim delivery, resends and install, joins). The public handle
 * (src/group) owns one struct view_membership and drives it through the
 * functions below; nothing here knows the handle.
 *
 * Threads and locks: application threads reach the current multicast only
 * between view_acquire and view_release (the read side of smc_lock; a
 * reservation keeps it until its commit). The membership thread
 * (tolerate_failures) swaps the current epoch under the write side.
 * `lock`/`cond` protect suspected, changing, closing, stop, terminal, the
 * joiner and last_admission; the engine's failure callback (predicate thread,
 * engine lock held) only sets bits in suspected and signals cond, because
 * wedging takes the engine lock.
 *
 * Invariants: current->view.member_ids[r] is the member id of SST row r;
 * current->view.layouts hold its subgroups in ranks; the ids of one view
 * are distinct, and a joiner may get the id of a member that is gone (a
 * later holder of an id has a larger admission, view_join_leader.c); a
 * non-zero terminal error is permanent (the member left the group, e.g. in
 * a minority).
 */
#ifndef SP_VIEW_MEMBERSHIP_H
#define SP_VIEW_MEMBERSHIP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <spindle/group.h>
#include <spindle/p2p.h>

#include "control/ctl.h"
#include "log/log_append.h"
#include "smc/smc.h"
#include "sst/sst.h"
#include "transport/transport.h"
#include "view/view.h"

/* What the handle gives the membership layer, copied at creation. */
struct view_config {
    uint32_t self;        /* this member's id (a joiner learns it from the offer) */
    uint32_t num_initial; /* members the group started with */
    struct spindle_member_identity identity; /* this member's (checked) */
    int failure_timeout_ms;
    int slow_member_ms; /* 0: back-pressure only (spindle_group_options) */
    bool tie_breaker;   /* half the view with its leader is a quorum */
    int bootstrap_timeout_ms;
    const struct ctl_keyring *keys; /* the group key(s) of TCP channels; NULL: none */
    bool tolerate_failures;
    struct tp_config transport;       /* backend, provider, device, host */
    struct sst_engine_options engine; /* early unlock, polling */
    bool batching, null_sends;        /* Spindle 3.2, 3.3 */
    bool own_inline;                  /* smc_options.own_inline */
    spindle_deliver_fn deliver;
    void *deliver_ctx;
    spindle_view_fn view_changed;
    void *view_ctx;
    spindle_send_ready_fn send_ready; /* smc_options.send_ready, with member ids */
    void *send_ready_ctx;
    spindle_layout_fn layout;
    void *layout_ctx;
    spindle_state_save_fn state_save;
    spindle_state_write_fn state_write; /* or this, with state_save_ctx (not in dispatch mode) */
    void *state_save_ctx;
    spindle_state_load_fn state_load;
    spindle_state_read_fn state_read; /* or this */
    void *state_ctx;                  /* state_load's or state_read's */
    uint64_t smc_first_position;      /* test hook: smc_options.first_position (0) */
    /* Logged delivery (docs/LOGS.md): this member's log directory (NULL:
     * none) and the subgroups that log, one bit each. */
    const char *log_dir;
    uint64_t logged[SPINDLE_MAX_SUBGROUPS / 64];
    /*
     * A second bound on delivery, the application's (dispatch mode,
     * src/group): queue_room returns the bytes that may be delivered now
     * (each message costing queue_overhead + its length), queue_progress
     * a token that changes when that room may have grown (whoever changes
     * it calls view_wake). Composed with the log's bound: the smaller
     * room counts. NULL: none.
     */
    size_t (*queue_room)(void *ctx);
    uint64_t (*queue_progress)(void *ctx);
    void *queue_ctx;
    uint32_t queue_overhead;
    /* The view upcall runs as soon as a view is installed, before anything
     * is delivered in it (it only queues the view: dispatch mode), instead
     * of once its resends are in. */
    bool report_at_install;
    spindle_persisted_fn persisted; /* the persistence upcall, or NULL */
    void *persisted_ctx;
    /* Point-to-point (smc_options.p2p_window, .p2p_deliver): the ring
     * size, and the upcall of each message or query, with the sender's
     * member id and the view id; it returns 0, or SPINDLE_EAGAIN to leave
     * the message in the ring (a full dispatch queue). NULL: dropped. */
    uint32_t p2p_window;
    int (*p2p_deliver)(void *ctx, const struct spindle_p2p_message *message);
    void *p2p_ctx;
    /* A joiner restarting with its log: what its log holds and what it is
     * sent, handed back (view_log_catchup.c); may be NULL. */
    spindle_replay_fn replay;
    void *replay_ctx;
    /* Called once, as this member's terminal error is set (removed by the
     * others, cut off in a minority, a failed view change, a leave), with
     * `lock` held: it may only signal, never call into the membership
     * (dispatch mode makes the application's descriptor readable, so that
     * a loop learns of the stop at once: src/group). NULL: none. */
    void (*stopped)(void *ctx);
    void *stopped_ctx;
    /* Called on the membership thread, no lock held, once a view change
     * has ended (view_changing false again): installed, the new view
     * taking messages (smc_lock released), or failed, the member stopped.
     * Application threads that found the change under way may call again
     * (src/group wakes them with send_ready). NULL: none. */
    void (*change_done)(void *ctx);
    void *change_done_ctx;
};

/* The last global persistence frontier reported for a subgroup. */
struct view_frontier {
    uint64_t view_id;
    uint64_t seq;
};

/* One installed view and the multicast that runs in it. The epoch is the
 * delivery context of its smc_group (rows become member ids there). */
struct view_epoch {
    struct view view;
    const struct view_config *config;
    struct smc_group *smc;
    struct log_appender *log;  /* the member's (logged subgroups), or NULL */
    uint64_t *log_queue_waits; /* the membership's counter */
    /* The membership's last reported frontiers, by subgroup (engine lock). */
    struct view_frontier *frontiers;
    /* A view change's: the view before and its trims, delivered_num of
     * each of its subgroups at its end (view_log_view), reported as that
     * view's last frontier once every survivor has them durable. */
    uint64_t previous_view_id;
    uint32_t previous_subgroups;
    uint64_t *previous_trim;
};

/* The joiner taking part in the next view change (at most one). */
struct view_joiner {
    bool active;
    uint32_t id;
    uint64_t view_id; /* the view it joins */
    struct ctl_address address;
    struct spindle_member_identity identity;
    struct sst_member_desc desc;
    /* Leader: the state saved for it (state_save's bytes, or a stream of
     * state_write's), sent at the start of state_view. */
    bool has_state;
    bool catchup; /* it restarts with its log: it is sent the records it lacks */
    uint64_t state_view;
    void *state;
    size_t state_length;
};

struct view_membership {
    struct view_config config;
    char group_name[64];
    struct ctl *ctl;
    struct sst_engine *engine;
    bool engine_started;
    struct view_epoch *current;
    uint64_t view_id;     /* current->view.id, readable without the locks (atomic) */
    uint32_t num_members; /* current->view.num_members, likewise */
    /* Control addresses by member id (TCP groups; joiners are added). */
    struct ctl_address addresses[SPINDLE_MAX_MEMBERS];
    uint32_t barriers; /* barriers started in the current view */
    pthread_rwlock_t smc_lock;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t suspected;      /* ranks of the current view reported failed */
    bool joinable;           /* TCP bootstrap and tolerate_failures: joins are taken */
    uint64_t admission;      /* this member's: 0 if it started the group */
    uint64_t last_admission; /* the last one this member gave as leader */
    struct view_joiner joiner;
    uint64_t detected_ns;
    bool changing;
    bool closing; /* in spindle_group_shutdown: members that reached its
                     barrier may go at any moment */
    /* The barrier this member waits at (closing: a member that published
     * its ready there and then went is finishing, not failed). */
    bool in_barrier;
    uint64_t barrier_view;
    uint32_t barrier_tag;
    bool stop;
    int terminal;
    char terminal_msg[512]; /* why the member stopped */
    bool thread_started;
    pthread_t thread;
    /* Logged delivery (view_log.c): open from view_prepare to destroy. */
    struct log *log;
    struct log_appender *appender;
    uint64_t log_queue_waits;        /* atomic: spindle_stats.log_queue_waits */
    uint64_t log_queue_bytes;        /* test hook: the appender's queue (0: its default) */
    uint64_t log_segment_bytes;      /* test hook: the log's segment size (0: its default) */
    struct view_frontier *frontiers; /* [SPINDLE_MAX_SUBGROUPS], with the log */
    /* Held by the log's writer while it wakes the engine, and by a joiner
     * that destroys its engine after a failed attempt (the log stays open
     * across attempts, view_log.c). */
    pthread_mutex_t wake_lock;
    /* The started multicast whose persistence columns the log's writer
     * pushes itself after a sync (view_log_follow; wake_lock). NULL: none,
     * and the writer only wakes the engine. */
    struct smc_group *durable_group;
    /* Snapshots (view_log_snapshot.c): one taken at a time. */
    pthread_mutex_t snapshot_lock;
    struct view_snapshot_points *snapshot_points; /* [SPINDLE_MAX_SUBGROUPS], with the log */
    /* A joiner restarting with its log (view_log_catchup.c): where its log
     * ends (NULL: it has none, or it is not a joiner), and what its
     * catch-up brought (spindle_stats). */
    struct view_join_log_ends *log_ends;
    uint64_t catchup_records;
    uint64_t catchup_bytes;
    /* A group restarted from its logs (view_restart.c); NULL otherwise. */
    struct view_restart *restart;
    /* A source's catch-up streams for restarting members fetching a
     * subgroup, kept between the slices it answers with
     * (view_restart_fetch.c): allocated at the first fetch, under
     * fetch_lock (the election's answering thread, then the membership
     * thread). */
    pthread_mutex_t fetch_lock;
    struct view_restart_streams *fetch_streams;
    uint32_t fetch_slice_bytes;  /* test hook: a slice's bytes (0: VIEW_RESTART_SLICE_DEFAULT) */
    uint64_t fetch_slices_taken; /* slices this member took as an asker (tests read it) */
};

/*
 * Snapshots (view_log_snapshot.c, docs/LOGS.md "Snapshots and compaction").
 * Stores state as subgroup's snapshot at (view_id, seq) durably in the log
 * directory, keeps it and the one before, and lets the appender compact
 * below the one before. Any thread but the predicate thread (it writes and
 * syncs the file). SPINDLE_EINVAL naming a point past what was delivered,
 * before the newest snapshot, or in a view not kept; SPINDLE_EIO naming
 * the file; SPINDLE_ENOMEM.
 */
int view_log_snapshot(struct view_membership *m, uint32_t subgroup, uint64_t view_id, uint64_t seq,
                      const void *state, size_t length);

/* The versions this build's hellos carry (control/ctl.h). */
struct ctl_versions view_ctl_versions(void);

/* Prepares m (locks, config); nothing is opened yet. */
void view_membership_init(struct view_membership *m, const struct view_config *config);
/*
 * Prepares the group's first view: members 0..num_members-1 (ids = ranks),
 * this member at rank config.self; opens the engine (the transport) and
 * builds the multicast for layouts, not yet connected. The engine's or the
 * multicast's error (SPINDLE_EINVAL naming a bad layout, SPINDLE_ENODEV,
 * SPINDLE_ENOTSUP naming an unknown provider, ...) or SPINDLE_ENOMEM.
 */
int view_prepare(struct view_membership *m, const char *group_name,
                 const struct smc_layout *layouts, uint32_t num_subgroups, uint32_t num_members);
/*
 * Starts the prepared first view: exchanges table descriptors over ctl
 * (taken over by m, closed by view_membership_destroy), meets every
 * member, then starts the membership thread. addresses (NULL for a
 * directory group) are the members' control addresses, which joiners are
 * told. The exchange's errors (SPINDLE_ETIMEDOUT naming missing members,
 * SPINDLE_EPROTO naming one that sent a malformed descriptor), the
 * transport's connection errors, or SPINDLE_ENOMEM.
 */
int view_start(struct view_membership *m, struct ctl *ctl, const struct ctl_address *addresses);
/*
 * Joins a running group through contact (any member): asks for admission
 * until admitted or the bootstrap timeout passes, takes on the id and view
 * the leader offers, receives the state, and starts. self is where this
 * process listens. subgroups must match the group's count, windows,
 * payloads and modes. SPINDLE_EINVAL naming a mismatch or a bad argument,
 * SPINDLE_ETIMEDOUT with the last reason, or the leader's refusal.
 */
int view_join(struct view_membership *m, const struct ctl_address *self,
              const struct ctl_address *contact, const struct spindle_subgroup_config *subgroups,
              uint32_t num_subgroups);
/*
 * True when this member's log holds an earlier run (a view or a snapshot):
 * spindle_group_create then restarts the group from the logs rather than
 * start a new one. 0 (false), 1, or the log's error.
 */
int view_restart_wanted(struct view_membership *m);
/*
 * Total restart of this member (options without join): hosts[num_initial]
 * are the members' control addresses, this member's at config.self;
 * layouts the application's subgroups (members and senders by id).
 * Elects with the others which member's log the group restarts from,
 * waiting (and logging whom it waits for) until a majority of the latest
 * view is back, then starts the group from its own log or joins the
 * member that did. 0 once a member of the restarted group, else
 * SPINDLE_ETIMEDOUT (after bootstrap_timeout_ms, naming the members
 * waited for), SPINDLE_EINVAL (its log holds a later view than the group
 * restarted from), or the error of starting or joining.
 */
int view_restart(struct view_membership *m, const struct ctl_address *hosts, uint32_t num_initial,
                 const struct smc_layout *layouts, uint32_t num_subgroups,
                 const struct spindle_subgroup_config *subgroups);
/* Stops the membership thread, the engine and the multicast, and frees
 * everything. Safe on a membership that never started. */
void view_membership_destroy(struct view_membership *m);

/* The current multicast, with the read side of smc_lock held until
 * view_release (NULL before the first view). */
struct smc_group *view_acquire(struct view_membership *m);
/* As view_acquire, but false (nothing held) instead of waiting while a
 * view change holds the write side: the change is under way. */
bool view_try_acquire(struct view_membership *m, struct smc_group **smc);
void view_release(struct view_membership *m);
/* The row of member id in the current view, or -1 when it is not in it
 * (read side of smc_lock held, or inside an upcall: view_upcall_smc). */
int32_t view_row_of_member(const struct view_membership *m, uint32_t id);
/* The member id of row in the current view, or -1 for a row outside it
 * (read side of smc_lock held: view_acquire). */
int32_t view_member_of_row(const struct view_membership *m, int32_t row);
/* The current multicast, for a thread that already holds the read side of
 * smc_lock (an open reservation): takes nothing. */
struct smc_group *view_held(struct view_membership *m);
/* True while a view change is wanted or under way and the member has not
 * stopped: a thread holding smc_lock's read side must not wait for it. */
bool view_change_pending(struct view_membership *m);
/* True while the membership thread runs a view change (from before it
 * takes smc_lock's write side until after change_done is due; under
 * `lock`, so what a caller did before it asked happens before that
 * change's change_done). */
bool view_changing(struct view_membership *m);
/* The current view's id (stable while the read side of smc_lock is held). */
uint64_t view_current_id(const struct view_membership *m);
/*
 * Called by an application thread whose smc call in view used_view (its
 * view_current_id under view_acquire) failed with rc: waits while a view
 * change is in progress and returns 1 when the call should be retried on
 * the new view, else the error to report (rc, or the terminal error such
 * as SPINDLE_EMINORITY with its reason).
 */
int view_after_error(struct view_membership *m, uint64_t used_view, int rc);
/* 0 while the member takes part; the terminal error (with its reason in
 * the message) once it stopped. */
int view_status(struct view_membership *m);
/* The identity of member id in the current view: 0, or SPINDLE_EINVAL
 * when it is not a member of it. lockless: from inside a default-mode
 * upcall (view_upcall_smc), without smc_lock. */
int view_identity(struct view_membership *m, uint32_t id, struct spindle_member_identity *out,
                  bool lockless);
/* Members in the current view (lock-free: callable from any thread). */
uint32_t view_size(const struct view_membership *m);
/*
 * Collective over the control channel among the members of the current
 * view; a view change meanwhile restarts it in the new view. SPINDLE_EINVAL
 * before the first view, SPINDLE_ETIMEDOUT naming missing members.
 */
int view_barrier(struct view_membership *m, int timeout_ms);
/* From now on departures are the others finishing: no view change. */
void view_closing(struct view_membership *m);
/* Stops the membership thread, the predicate thread and the multicast
 * (shutdown). Idempotent. */
void view_stop(struct view_membership *m);
/* Announces this member's departure in the SST and stops (leave). */
void view_leave(struct view_membership *m);
/* Wakes the predicate thread (config.queue_progress moved). Any thread;
 * nothing before the engine is open. */
void view_wake(struct view_membership *m);
/* The current multicast for a thread inside a delivery or view upcall of
 * m (no lock taken: the upcall's own thread, or the engine lock it runs
 * under, keeps the view from being retired meanwhile). */
struct smc_group *view_upcall_smc(struct view_membership *m);

/* ---- view_admin.c: what the administration endpoint (src/group) asks -- */

/* One member of the current view, as a report shows it. */
struct view_snapshot_member {
    uint32_t id;
    struct spindle_member_identity identity;
    enum sst_link link; /* of this member's table to that member's row */
    bool suspected;     /* reported failed in the current view */
};

/* A copy of the current view and its multicast's figures. */
struct view_snapshot {
    uint64_t view_id;
    uint32_t num_members;
    uint32_t my_rank;
    struct view_snapshot_member members[VIEW_MAX_MEMBERS]; /* by rank */
    uint32_t num_subgroups;
    struct smc_layout *layouts;                  /* [num_subgroups], in ranks of this view */
    uint64_t *delivered;                         /* [num_subgroups]: this member's delivered_num */
    uint64_t logged[SPINDLE_MAX_SUBGROUPS / 64]; /* config.logged */
    const char *backend;                         /* the transport's name */
    bool changing;                               /* a view change is wanted or under way */
};

/* Fills out from the current view (read side of smc_lock, and the engine
 * lock for a moment per subgroup and member): any thread but the predicate
 * thread. SPINDLE_EINVAL before the first view, SPINDLE_ENOMEM; out is
 * freed with view_snapshot_free either way. */
int view_snapshot(struct view_membership *m, struct view_snapshot *out);
void view_snapshot_free(struct view_snapshot *snapshot);
/*
 * Has member id removed from the group as a failure detector would: this
 * member suspects it, and the members install a view without it (the
 * removed member, if alive, learns SPINDLE_EREMOVED). Any thread.
 * SPINDLE_ENOTSUP without tolerate_failures, SPINDLE_ESHUTDOWN when this
 * member stopped or is shutting down, SPINDLE_EINVAL for this member
 * itself, SPINDLE_ENOENT for an id not in the current view,
 * SPINDLE_EMINORITY when the others would not be a quorum without it.
 */
int view_remove_member(struct view_membership *m, uint32_t id);
/* Stops the member for good with error and why (view_status), unless it
 * already stopped: what an application sees after a leave it did not ask
 * for. */
void view_set_terminal(struct view_membership *m, int error, const char *why);

#endif
