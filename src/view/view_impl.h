/*
 * Private to src/view: what the files of the membership protocol share.
 *
 *   view_epoch.c        a view and its multicast: creation, the delivery
 *                       upcall, retirement
 *   view_start.c        the first view, the handle's hooks (acquire,
 *                       barrier, stop, leave)
 *   view_failure.c      failure reports, suspicion, wedge, waiting out a
 *                       change, the member's terminal state
 *   view_exchange.c     the survivors' blob exchange and commitment
 *   view_install.c      trim delivery, resends, install, the start of the
 *                       new view, the view upcall
 *   view_thread.c       the membership thread and its attempts
 *   view_join_leader.c  joins, the members' side (leader and others)
 *   view_join_joiner.c  joins, the joiner's side
 *   view_join_state.c   the joiner's state, streamed in chunks
 *
 * Protocol overview and safety argument: view_install.c and view/trim.h;
 * joins: view_join_leader.c.
 */
#ifndef SP_VIEW_VIEW_IMPL_H
#define SP_VIEW_VIEW_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "view/membership.h"
#include "view/view_wire.h"

/* Control-channel tags. The start-up exchange of the first view: */
enum { VIEW_TAG_DESCS = 0x5350, VIEW_TAG_READY = 0x5351 };
/* Barriers: the view and the barrier's number in it. */
#define VIEW_TAG_BARRIER_BASE 0x40000000u
static inline uint32_t view_barrier_tag(uint64_t view, uint32_t number)
{
    return VIEW_TAG_BARRIER_BASE + (((uint32_t)view & 0x3fffu) << 16) + (number & 0xffffu);
}
/* The change to view v: the survivors' blobs, their commitment to one
 * suspected set, their lock on it, and readiness in the new view. */
#define VIEW_TAG_CHANGE_BASE 0x20000000u
enum { STEP_BLOB = 0, STEP_COMMIT = 1, STEP_READY = 2, STEP_LOCK = 3 };
static inline uint32_t view_change_tag(uint64_t view, uint32_t step)
{
    return VIEW_TAG_CHANGE_BASE + (((uint32_t)view & 0x7ffffffu) << 2) + step;
}
/* The suspicion that starts the change to view v (view_wire.h,
 * struct view_suspect). */
#define VIEW_TAG_SUSPECT_BASE 0x80000000u
static inline uint32_t view_suspect_tag(uint64_t view)
{
    return VIEW_TAG_SUSPECT_BASE + ((uint32_t)view & 0x7fffffffu);
}
/* A join into view v: the joiner's descriptor to the leader, the leader's
 * announcement to the members, the view, the state and the resends to skip
 * for the joiner. */
#define VIEW_TAG_JOIN_BASE 0x10000000u
enum {
    JOIN_DESC = 0,
    JOIN_ANNOUNCE = 1,
    JOIN_VIEW = 2,
    JOIN_STATE = 3, /* even chunks of the state */
    JOIN_SKIPS = 4,
    JOIN_STATE_ACK = 5,
    JOIN_STATE_ODD = 6, /* odd chunks */
    JOIN_LOG_ENDS = 7,  /* where a restarting joiner's log ends */
};
static inline uint32_t view_join_tag(uint64_t view, uint32_t step)
{
    return VIEW_TAG_JOIN_BASE + (((uint32_t)view & 0x1ffffffu) << 3) + step;
}

/* A step of a view change waits this many failure timeouts for the
 * survivors: long enough for the failure detector to judge a silent one. */
#define EXCHANGE_TIMEOUTS 4

/* The next view while a change builds it. */
struct view_next {
    struct view_transition how;
    struct view_epoch *epoch; /* the next view and its multicast */
    uint8_t *blobs;           /* encoded blobs indexed by member id */
    size_t blob_size;
    struct view_blob *decoded; /* decoded blobs by member id (survivors only) */
    uint64_t *counts;          /* their counts, [SPINDLE_MAX_MEMBERS][subgroups][rows] */
};

/* ---- view_epoch.c ---------------------------------------------------- */

/*
 * Builds the epoch of view (moved in: the epoch owns its layouts now) and
 * its multicast on m's engine (not connected). SPINDLE_ENOMEM or the
 * multicast's error; view is cleared on failure.
 */
int view_epoch_create(struct view_membership *m, struct view *view, struct view_epoch **out);

/* Logged delivery (view_log.c, docs/LOGS.md). */
/* True when subgroup is logged (config.logged). */
bool view_logged(const struct view_config *config, uint32_t subgroup);
/* Opens m's log and starts its appender when config.log_dir is set and a
 * subgroup is logged (once; later calls do nothing). log_open's or
 * log_appender_start's error. */
int view_log_open(struct view_membership *m);
/* Stops the appender (syncing what is queued) and closes the log. */
void view_log_close(struct view_membership *m);
/* Names the started multicast whose persistence columns the log's writer
 * pushes itself after each sync (smc_group_durable), or NULL: none, from
 * before that multicast is stopped or freed (the writer holds wake_lock
 * while it uses it). Does nothing without a log. Never fails. */
void view_log_follow(struct view_membership *m, struct smc_group *group);
/*
 * Snapshots (view_log_snapshot.c, docs/LOGS.md "Snapshots and
 * compaction"). view_log_snapshots_open: after the appender started,
 * finds the snapshots in the log directory (removing temporary files,
 * logging a warning for each invalid one), and hands the appender their
 * views and cover points. SPINDLE_ENOMEM or the listing's error.
 */
int view_log_snapshots_open(struct view_membership *m);
void view_log_snapshots_close(struct view_membership *m);
/* The point of the older of subgroup's two newest snapshots, below which
 * the log may have been compacted: true and *view_id, *seq, or false when
 * there is none. Under snapshot_lock, with the log open. */
bool view_log_older_snapshot(const struct view_membership *m, uint32_t subgroup, uint64_t *view_id,
                             uint64_t *seq);
/* The same for the newest snapshot. */
bool view_log_newest_snapshot(const struct view_membership *m, uint32_t subgroup, uint64_t *view_id,
                              uint64_t *seq);
struct log_snapshot;
/* Stores a snapshot received at a join (a whole, checked one) as this
 * member's own: the file, the subgroup's newest point, its view record.
 * log_snapshot_write's errors. */
int view_log_snapshot_adopt(struct view_membership *m, const struct log_snapshot *snap,
                            const void *state);
/* Submits one record to the log's appender, waiting while its queue is
 * full; *end: the log position after it. The appender's error. */
int view_log_submit(struct view_membership *m, const struct log_record *record, uint64_t *end);
/*
 * Makes epoch's view durable in m's log before anything is delivered in
 * it (a view record: its members, and previous's delivered_num of each of
 * its previous_subgroups subgroups, the trim delivered up to; NULL for a
 * member's first view). Waits for the fdatasync; nothing when nothing is
 * logged. The appender's error.
 */
int view_log_view(struct view_membership *m, struct view_epoch *epoch, struct smc_group *previous,
                  uint32_t previous_subgroups);
/* smc_options.persist_mark of an epoch (ctx): the log position after
 * everything submitted so far. */
uint64_t view_log_mark(void *ctx);
/* smc_options.persisted of an epoch (ctx): stamps the view id, keeps the
 * frontier as the membership's last reported one and calls the
 * application's upcall (predicate thread, engine lock held). */
void view_log_persisted(void *ctx, uint32_t subgroup, uint64_t frontier);
/*
 * After a view change has met every survivor in the new view (each made
 * the old view's trim durable before it got there): reports the old
 * view's last frontier, its trim, in every logged subgroup where it grew,
 * then lets the new view's multicast report its own (smc_group_release_
 * frontier). Membership thread; takes the engine lock.
 */
void view_log_report_previous(struct view_membership *m);
/* smc_options.deliver_progress of an epoch (ctx): the log's durable
 * position, whose writer wakes the engine when it moves. */
uint64_t view_log_progress(void *ctx);
/* smc_options.deliver_room of an epoch (ctx). */
size_t view_log_room(void *ctx, uint32_t subgroup);
/* Appends count (<= 64) delivered messages of one subgroup, already
 * stamped with member ids and the view id, when it is logged. A failed
 * log fails the multicast (smc_group_fail). Predicate thread. */
void view_log_append(const struct view_epoch *epoch, const struct spindle_message *messages,
                     size_t count);
/* Stops and frees the epoch's multicast and the epoch. Safe on NULL. */
void view_epoch_free(struct view_epoch *epoch);
/* Connects the epoch's table to every row (descs by rank), within the
 * bootstrap timeout. The transport's connect or import error, naming the
 * peer (SPINDLE_EUNREACH, SPINDLE_ETIMEDOUT, SPINDLE_EPROTO); with failed
 * set (a view change), each new connection gets half the failure timeout,
 * and rows that cannot be connected are marked failed in the table and
 * set in *failed instead (only SPINDLE_ENOMEM is returned). */
int view_epoch_connect(struct view_membership *m, struct view_epoch *epoch,
                       const struct sst_member_desc *descs, uint64_t *failed);
/* Opens m's engine for config.transport with the member id and group
 * name; installs the failure callback. The engine's error. */
int view_open_engine(struct view_membership *m);
/* Opens the engine and makes view (taken over, cleared on failure) m's
 * current epoch: a member's first view. The errors of both. */
int view_open_first(struct view_membership *m, struct view *view);

/* ---- view_failure.c -------------------------------------------------- */

/* The engine's failure callback (predicate thread, engine lock held). */
void view_on_failure(void *ctx, struct sst_table *table, uint32_t row, int error);
/* Adds ranks another survivor suspects to ours. */
void view_adopt_suspicion(struct view_membership *m, uint64_t ranks);
/* Marks rank suspected (a joiner that never started, a member that a
 * joiner of the same name and a larger incarnation replaces). */
void view_suspect(struct view_membership *m, uint32_t rank);
/* Tells the other members of the current view whom this member suspects
 * as it starts the change to the next (mask: ranks; nothing when 0). */
void view_publish_suspicion(struct view_membership *m, uint64_t mask);
/* Adopts a suspicion another member of the current view published for
 * the next (membership thread, idle): a member that suspects nobody
 * itself still joins a change another one starts. */
void view_peek_suspicion(struct view_membership *m);
/* The member ids of the current view's suspected rows (membership
 * thread: the current view does not change under it). */
uint64_t view_suspected_ids(struct view_membership *m);
/* True when the suspected set is no longer `mask`. */
bool view_suspicion_grew(struct view_membership *m, uint64_t mask);
/* Stops sending in the current view and wakes sleeping peers. */
void view_wedge(struct view_membership *m);
/* Waits up to ms for news of the membership (a failure reported, a view
 * change begun or ended), whichever comes first. */
void view_wait_change_for(struct view_membership *m, int ms);
/* Returns once no view change is in progress. */
void view_wait_change(struct view_membership *m);
/* Records the terminal error that stops this member for good and why
 * (the first one stays: later calls do nothing), tells the handle
 * (view_config.stopped) and wakes the waiters. `lock` held. */
void view_stop_locked(struct view_membership *m, int error, const char *why);
/* ts = now (CLOCK_REALTIME) + ms, for pthread_cond_timedwait. */
void view_deadline_in(struct timespec *ts, int ms);
/* True while the current view has no change pending and the member is
 * not closing or stopped (membership thread). */
bool view_quiet(struct view_membership *m);

/* ---- view_exchange.c ------------------------------------------------- */

/*
 * Waits, in short rounds, for the latest blob of tag from every member of
 * `from`, up to EXCHANGE_TIMEOUTS failure timeouts. SPINDLE_ETIMEDOUT
 * naming `what` and the view, or the channel's error.
 */
int view_gather(struct view_membership *m, uint64_t from, uint64_t view, uint32_t tag, void *all,
                size_t length, const char *what);
/* Publishes a ready message for view to `to`. The channel's publish error
 * (SPINDLE_ENOMEM, SPINDLE_EIO). */
int view_publish_ready(struct view_membership *m, uint64_t view, uint32_t tag, uint64_t to);
/* Gathers ready messages of view from `from` and checks them
 * (SPINDLE_EPROTO naming a member whose message is malformed or names
 * another view). */
int view_gather_ready(struct view_membership *m, uint64_t from, uint64_t view, uint32_t tag,
                      int timeout_ms, const char *what);
/*
 * Publishes this member's blob for next and gathers every survivor's,
 * adopting suspicion they name, then commits (view_exchange.c has the
 * protocol). SPINDLE_ETIMEDOUT when the suspected set grew or a survivor
 * went on to a larger set (try again under it), SPINDLE_EMINORITY when the
 * survivors did not meet in time, SPINDLE_EUNREACH when this member locked
 * on the set and the others did not follow in time (final), SPINDLE_EPROTO
 * naming a member whose blob or commitment is malformed or disagrees.
 */
int view_exchange(struct view_membership *m, struct view_next *next);
/*
 * Test hook: fn is called by the membership thread of this process right
 * before it publishes its commitment to next's set (every survivor's blob
 * names that set). Tests use it to fail a member at exactly that step,
 * which random timing rarely hits. NULL (the default) turns it off; set it
 * before creating a group.
 */
typedef void (*view_commit_hook_fn)(struct view_membership *m, const struct view_next *next);
void view_test_before_commit(view_commit_hook_fn fn);
/*
 * Test hook: fn is called by the membership thread of this process right
 * after it installed a view that admits a joiner, before it meets the
 * others at its start (the joiner may already have its view). NULL, the
 * default, turns it off; set it before creating a group.
 */
typedef void (*view_meet_hook_fn)(struct view_membership *m, uint32_t joiner);
void view_test_before_meet(view_meet_hook_fn fn);
/*
 * Test hook: fn may change this process's blob right before it is encoded
 * and published (tests make a member lie in it). NULL, the default, turns
 * it off; set it before creating a group.
 */
typedef void (*view_blob_hook_fn)(struct view_blob *mine);
void view_test_blob(view_blob_hook_fn fn);
/*
 * Test hook: the leader passes every admission it answers a join request
 * with through fn before encoding it, so that a test can play a leader
 * that lies in its offer. NULL, the default, turns it off; set it before
 * creating a group.
 */
typedef void (*view_offer_hook_fn)(struct view_join_offer *offer);
void view_test_offer(view_offer_hook_fn fn);
/*
 * Waits, in short rounds, for the ready of every member of `from` that is
 * not suspected at the start of view (tag), up to EXCHANGE_TIMEOUTS
 * failure timeouts: a member that fails meanwhile is left to the next
 * change. SPINDLE_ETIMEDOUT naming the view, or the channel's error.
 */
int view_gather_survivors(struct view_membership *m, uint64_t from, uint64_t view, uint32_t tag);
/* The decoded blob of the survivor at rank `rank` of the next view. */
const struct view_blob *view_blob_of(const struct view_next *next, uint32_t rank);

/* ---- view_install.c -------------------------------------------------- */

/* One attempt at the next view for suspected mask and joiner.
 * SPINDLE_ETIMEDOUT when the survivors did not all meet (retry with the
 * then-current mask); any other error stops the member. */
int view_try_change(struct view_membership *m, uint64_t mask, uint32_t joiner);
/* Reports the installed current view to the application; detected_ns:
 * when the failure that began the change was detected (0: none). */
void view_report(struct view_membership *m, const struct view_transition *how,
                 uint64_t detected_ns);

/* ---- view_thread.c --------------------------------------------------- */

/* Starts the membership thread (tolerate_failures only). SPINDLE_ENOMEM. */
int view_thread_start(struct view_membership *m);
/* Stops and joins it; safe when it never started. */
void view_thread_stop(struct view_membership *m);

/* ---- view_join_leader.c ---------------------------------------------- */

/*
 * The membership thread's idle step in a group that takes joins: answers
 * a pending join request (the leader admits, others redirect to it) and
 * picks up the leader's announcement of a joiner; true when a joiner is
 * set for the next view change.
 */
bool view_join_poll(struct view_membership *m);
/* Gives the admitted joiner the next view's descriptors (by rank), the
 * state and the resends to skip in the unordered subgroups (leader only,
 * after the trim was delivered and next's skips set). The channel's error. */
int view_join_send_view(struct view_membership *m, const struct view_epoch *next,
                        const struct sst_member_desc *descs);
/* Drops the active joiner, telling it why (leader only). */
void view_join_abort(struct view_membership *m, int error, const char *why);

/* ---- view_join_state.c ----------------------------------------------- */

/* Leader, at the start of the joiner's view (after its own ready): streams
 * the state, state (length bytes, from state_save) or state_write's, and
 * waits until the joiner took all of it. 0, or why the transfer failed
 * (the joiner stopped or refused: it is a failure of the new view). */
int view_join_send_state(struct view_membership *m, uint32_t joiner, uint64_t view,
                         const void *state, size_t length);
/* The same for a joiner restarting with its log: streams the records its
 * log lacks (view_log_catchup.c), as the bytes of its state. */
int view_join_send_catchup(struct view_membership *m, uint32_t joiner, uint64_t view);
/* Joiner: takes the state jv announced from the leader, chunk by chunk
 * (each within timeout_ms), into state_read, or gathered into *state
 * (malloc'ed, *length bytes) for state_load. 0, SPINDLE_EAGAIN when the
 * stream stopped, SPINDLE_EPROTO for a chunk that breaks the stream, or
 * state_read's refusal. */
int view_join_receive_state(struct view_membership *m, uint32_t leader,
                            const struct view_join_view *jv, void **state, size_t *length,
                            int timeout_ms);
/* ---- view_log_catchup.c ---------------------------------------------- */

/* A logged joiner (docs/LOGS.md "Restart of one member"), before it asks
 * to join: opens its log, hands its application what the log holds
 * (replay upcall) and sets m->log_ends to where it ends (all zero for a
 * fresh joiner). Nothing without logged subgroups. 0 or why not. */
int view_log_restart_open(struct view_membership *m);
/* What a member's log holds, read without handing anything over: the
 * logged subgroups' ends, its latest view record (a record's or a
 * snapshot's: any_view), and whether it holds anything at all (a view or
 * a snapshot: any_state). */
struct view_log_summary {
    struct view_join_log_ends ends;
    bool any_view, any_state;
    struct log_view latest;
};
int view_log_summary_read(struct view_membership *m, struct view_log_summary *out);
/* The joiner sends the leader where its log ends, for the view it joins. */
int view_log_send_ends(struct view_membership *m, uint32_t leader, uint64_t view);
/* Leader: writes the catch-up stream (log/log_catchup.h) for joiner, which
 * joins view, into out: the records after the ends it sent. */
int view_log_catchup_write(struct view_membership *m, uint32_t joiner, uint64_t view,
                           struct spindle_state_out *out);
/* Puts one snapshot of a catch-up stream (log/log_catchup.h) through
 * put(ctx, bytes, length): its prefix, its encoded head, then its state.
 * Shared by the join's catch-up and the restart's fetch answers. 0, or the
 * first error put returned. */
struct log_snapshot;
int view_catchup_put_snapshot(const struct log_snapshot *snap, const void *state,
                              int (*put)(void *ctx, const void *data, size_t length), void *ctx);
/* Joiner: takes the catch-up stream into its log and its application. */
struct view_log_catchup;
int view_log_catchup_begin(struct view_membership *m, uint64_t view, struct view_log_catchup **out);
int view_log_catchup_feed(struct view_log_catchup *c, const void *data, size_t length, bool last);
/* Frees it; the records it took are durable in the log when it returns 0. */
int view_log_catchup_end(struct view_log_catchup *c);

/* ---- view_log_intake.c ----------------------------------------------- */

/*
 * The checks of a catch-up stream a member takes into its log, one rule
 * for its two takers: a logged joiner taking what the leader sends
 * (view_log_catchup.c: any subgroup it logs) and a restarting member
 * taking one subgroup from that subgroup's source (view_restart_fetch.c).
 * A snapshot must be of a subgroup taken, at or after where the taker's
 * log of it ends, of no view after last_view; a view record of a view
 * after those the log holds, up to last_view; a message of a subgroup
 * taken, at or after its end (after the last one taken: in order), of no
 * view after last_view nor after the latest view whose record (or a
 * snapshot's) came first. A check returns 0 or SPINDLE_EPROTO naming the
 * sender and what was wrong; the took functions move ends (the taker's,
 * updated in place) past what was stored. One thread at a time.
 */
#define VIEW_LOG_ANY_SUBGROUP UINT32_MAX
struct view_log_intake {
    const char *sender;              /* names the sender in errors */
    struct view_join_log_ends *ends; /* the taker's log: each subgroup's end, next_view */
    uint32_t subgroup;               /* the one taken, or VIEW_LOG_ANY_SUBGROUP: any in ends */
    uint64_t last_view;
    bool any_view;       /* known_view is set */
    uint64_t known_view; /* the latest view whose record (or snapshot's) it holds */
};
void view_log_intake_init(struct view_log_intake *in, const char *sender,
                          struct view_join_log_ends *ends, uint32_t subgroup, uint64_t last_view);
int view_log_intake_check_snapshot(const struct view_log_intake *in,
                                   const struct log_snapshot *snap);
int view_log_intake_check_record(const struct view_log_intake *in, const struct log_record *record);
void view_log_intake_took_snapshot(struct view_log_intake *in, const struct log_snapshot *snap);
void view_log_intake_took_record(struct view_log_intake *in, const struct log_record *record);
/* A reset: the taker's log started over (every end at the start, no view). */
void view_log_intake_start_over(struct view_log_intake *in);

/* Any member: waits for the joiner's ready of view (tag) as long as its
 * state keeps arriving (its acknowledgements restart the wait of
 * EXCHANGE_TIMEOUTS failure timeouts). 0 or why not. */
int view_join_await_start(struct view_membership *m, uint32_t joiner, uint64_t view, uint32_t tag);

/* ---- view_restart.c (docs/LOGS.md "Total restart") -------------------- */

/* One round of a restarting member: its own status and the answers of the
 * members it heard from in this round (by member id). */
struct view_restart_round {
    struct view_restart_status mine;
    uint64_t heard; /* bit i: peers[i] answered in this round */
    struct view_restart_status peers[SPINDLE_MAX_MEMBERS];
    bool tie_breaker;
    /* The application's subgroups by member id (NULL: every member of
     * the latest view is taken for a member of each subgroup), for the
     * logged subgroups' sources. */
    const struct smc_layout *configured;
    uint32_t num_configured;
};
enum view_restart_action {
    VIEW_RESTART_WAIT = 0,   /* ask again */
    VIEW_RESTART_START = 1,  /* start the group from this member's log */
    VIEW_RESTART_FOLLOW = 2, /* join the running group through member `follow` */
};
struct view_restart_decision {
    enum view_restart_action action;
    uint32_t vote;       /* the member voted for from now on */
    uint32_t follow;     /* FOLLOW: a running member heard in this round */
    uint64_t latest;     /* the latest view heard of */
    uint32_t voters;     /* members of it voting for this member */
    uint32_t num_latest; /* members of it */
    uint64_t missing;    /* members of it not heard (ids, bit i) */
    /* Logged subgroups of which no member of the latest view was heard
     * (view_restart_source): how many, and the first. */
    uint32_t num_unsourced;
    uint32_t unsourced;
};
/*
 * The election's rules, pure (models/restart.pml): follow a running member
 * heard of; keep a vote for a member that was not heard or still stands
 * for itself; vote for the best member heard (the latest view, then the
 * most messages of it, then the lowest id) when voting for oneself or when
 * the member voted for gave its vote to another; start when voting for
 * oneself with more than half of the latest view's members (exactly half
 * holding its first member, with tie_breaker) voting so too, and once a
 * member of the latest view was heard for each logged subgroup (each has a
 * source: view_restart_source; its own logged subgroups are those of its
 * status's ends).
 */
void view_restart_decide(const struct view_restart_round *round, struct view_restart_decision *out);
/*
 * The source of logged subgroup g in a round (docs/LOGS.md "Total
 * restart"): among this member and the members heard, those of the latest
 * view (latest: the status that names it) that are members of g there (by
 * round->configured; every member of that view when none of g's configured
 * members is in it, as the restart's default layout), the one whose log
 * holds the most of g (the latest end of g; ties by view_restart_better).
 * SPINDLE_MAX_MEMBERS when none was heard.
 */
uint32_t view_restart_source(const struct view_restart_round *round,
                             const struct view_restart_status *latest, uint32_t g);
/* True when a is the better member to restart from. */
bool view_restart_better(const struct view_restart_status *a, const struct view_restart_status *b);

/* Restart state of a member of a group that restarted from its logs. */
struct view_restart {
    struct view_restart_status running; /* what it answers restarting members */
    uint32_t self;                      /* this member's id in its log */
    /* Ids held for the members of the view restarted from and for the
     * members heard in the election; names[id] is the name heard with it,
     * or "" for a member of that view not heard. */
    uint64_t reserved;
    char names[SPINDLE_MAX_MEMBERS][SPINDLE_MEMBER_NAME_MAX];
    uint32_t num_subgroups;
    struct smc_layout *configured; /* the application's subgroups, by member id */
    /* The application's layout, which view_restart_layout_app wraps. */
    spindle_layout_fn app_layout;
    void *app_layout_ctx;
};
/* True when ends (a log's) go past the point a restarted group recovered
 * (point: a running status with VIEW_RESTART_ENDS; false without) in a
 * view up to the one it restarted from: that log holds messages the group
 * does not, which were never on every member's log. */
bool view_restart_ahead(const struct view_join_log_ends *ends,
                        const struct view_restart_status *point);
/*
 * Subgroups the restart point's log holds nothing of
 * (view_restart_subgroup.c). view_restart_point_end: the end the point
 * gives subgroup g (its own, or its source's) and true, or false when it
 * holds none and names no source.
 */
bool view_restart_point_end(const struct view_restart_status *point, uint32_t g,
                            struct view_join_log_end *end);
/* 0, or SPINDLE_EINVAL naming the subgroup (whose: the log, for the
 * message), when ends (member who's log) hold part of a logged subgroup
 * the restart point (r->running) holds nothing of, and either it names no
 * source for it or ends differ from the source's; or when who is one of
 * such a subgroup's configured members and its log holds none of what
 * the source's holds. */
int view_restart_check_subgroups(const struct view_restart *r,
                                 const struct view_join_log_ends *ends, uint32_t who,
                                 const char *whose);
/* True (and the first such subgroup) when ends hold part of a subgroup
 * the point takes from a source: that part stays (never reset). */
bool view_restart_keeps(const struct view_restart_status *point,
                        const struct view_join_log_ends *ends, uint32_t *subgroup);
/* Names in point (the starting member's status, its ends) the source of
 * each subgroup its ends hold nothing of, from the round it decided in. */
void view_restart_name_sources(const struct view_restart_round *round,
                               struct view_restart_status *point);
/* The layout of a restarted group whose application gave one (ctx: the
 * struct view_restart): the application's, with a subgroup it leaves
 * without members received by every member and sent by none. */
int view_restart_layout_app(void *ctx, const struct spindle_view_info *view, uint32_t num_subgroups,
                            struct spindle_subgroup_layout *subgroups);
/*
 * Restart fetches (view_restart_fetch.c). view_restart_fetch_answer: a
 * source answers a VIEW_WIRE_RESTART_FETCH on ctl from the log in log_dir
 * (read only) with the slice at the offset asked of the catch-up stream
 * it keeps for the asker (built at offset 0, or when it holds none for
 * that request), or a refusal naming why. view_restart_streams_free drops
 * the streams kept (m->fetch_streams), at the membership's end.
 */
void view_restart_fetch_answer(struct view_membership *m, struct ctl *ctl, const char *log_dir,
                               uint32_t self, const uint8_t *bytes, size_t length);
void view_restart_streams_free(struct view_membership *m);
/* What an asker took of a stream so far. */
struct view_restart_slices {
    uint64_t total;    /* the stream's, from its first slice */
    uint64_t have;     /* bytes taken: the next slice's offset */
    uint32_t checksum; /* the stream's, as announced */
    uint32_t crc;      /* CRC-32C of the bytes taken */
    uint64_t count;    /* slices taken */
    bool done;         /* the last was taken */
};
/* 0 when slice (decoded) continues s: at offset s->have, of the same total
 * and checksum as the slices before, ending past none, its last flag set
 * exactly at the total, and the last one's bytes making a stream of the
 * checksum announced; s moves on. SPINDLE_EPROTO naming sender and the
 * value otherwise (s unchanged). */
int view_restart_slices_take(struct view_restart_slices *s, const struct view_restart_slice *slice,
                             const char *sender);
/* The asker: takes from source (at host) the stream req asks for, slice
 * by slice, until its end or deadline (sp_now_ns; SPINDLE_ETIMEDOUT while
 * the source does not answer), into this member's log (its snapshot
 * stored, its records appended: view_log_intake.c); ends (its log's) move
 * past what it took. 0, or why not (a refused slice, snapshot or record:
 * SPINDLE_EPROTO; the source's refusal). */
int view_restart_fetch_take(struct view_membership *m, const struct ctl_address *host,
                            uint32_t source, const struct view_restart_fetch *req,
                            struct view_join_log_ends *ends, uint64_t deadline);
/* A member that follows a restarted group (m->restart set): for each
 * subgroup the point takes from a source whose log ends after this
 * member's (mine->ends), of which it holds some or is a configured
 * member, asks the source (hosts: the bootstrap list) for what it lacks,
 * until the bootstrap timeout, and appends it to its log; mine->ends move
 * on. 0, or the error that stopped it. */
int view_restart_take_subgroups(struct view_membership *m, const struct ctl_address *hosts,
                                uint32_t num_hosts, struct view_restart_status *mine);
/* A member of a running group answers a restarting member's status. */
void view_restart_answer(struct view_membership *m, const uint8_t *bytes, size_t length);
/*
 * The member id the leader gives the joiner behind req in view (r: the
 * group's restart state, NULL when it did not restart from its logs):
 *  - a member following a total restart (VIEW_JOIN_RESTART) gets the id
 *    its log holds, req->restart_id, unless a member of view holds it or
 *    it is held for another name heard in the election;
 *  - any other joiner gets the id held for its name, else the lowest id
 *    neither in view nor held for a restarting member.
 * 0 with *id, or SPINDLE_EINVAL naming the id and who holds it (the
 * refusal's reason): never an id held for another member.
 */
int view_restart_id(const struct view_restart *r, const struct view *view,
                    const struct view_join_request *req, uint32_t *id);

#endif
