/*
 * Private to src/smc: the state behind spindle_group_t, shared by
 * group_api.c (creation, send path, shutdown) and group_membership.c (the
 * membership thread that runs view changes when tolerate_failures is on).
 *
 * Threads and locks: application threads use `smc` only under smc_lock
 * (read side; spindle_reserve keeps it until spindle_commit). The
 * membership thread swaps `smc` and the view fields under the write
 * side. `lock`/`cond` protect suspected, changing, terminal and stop; the
 * engine's failure callback (predicate thread, engine lock held) only sets
 * bits in suspected and signals cond, because wedging takes the engine lock.
 *
 * Invariants: member_ids[r] is the member id of row r of the current view;
 * layouts hold the current view's subgroups in row numbers; a non-zero
 * terminal error is permanent (the member left the group, e.g. minority).
 */
#ifndef SP_SMC_GROUP_IMPL_H
#define SP_SMC_GROUP_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <spindle/group.h>

#include "group/group_bootstrap.h"
#include "smc/smc.h"

/* Control-channel tags of the change to view v: the survivors' blobs, their
 * commitment to one suspected set, and readiness in the new view. */
#define GROUP_TAG_VIEW_BASE 0x20000000u
enum { STEP_BLOB = 0, STEP_COMMIT = 1, STEP_READY = 2 };
static inline uint32_t group_view_tag(uint64_t view, uint32_t step)
{
    return GROUP_TAG_VIEW_BASE + (((uint32_t)view & 0x7ffffffu) << 2) + step;
}
/* Tags of a join into view v: the joiner's descriptor to the leader, the
 * leader's announcement to the members, the view and the state for the
 * joiner. */
#define GROUP_TAG_JOIN_BASE 0x10000000u
enum { JOIN_DESC = 0, JOIN_ANNOUNCE = 1, JOIN_VIEW = 2, JOIN_STATE = 3 };
static inline uint32_t group_join_tag(uint64_t view, uint32_t step)
{
    return GROUP_TAG_JOIN_BASE + (((uint32_t)view & 0x3ffffffu) << 2) + step;
}
/* A step of a view change waits this many failure timeouts for the
 * survivors: long enough for the failure detector to judge a silent one. */
#define EXCHANGE_TIMEOUTS 4
#define GROUP_NO_JOINER   UINT32_MAX

/* The joiner taking part in the next view change (at most one). */
struct group_joiner {
    bool active;
    uint32_t id;
    uint64_t view_id; /* the view it joins */
    struct group_endpoint address;
    struct sst_member_desc desc;
};

/* Per-view delivery context: maps rows to member ids for the upcall. */
struct group_view_ctx {
    struct spindle_group *group;
    uint64_t view_id;
    uint32_t member_ids[SST_MAX_ROWS];
};

struct spindle_group {
    struct spindle_group_options options;
    struct group_bootstrap boot;
    char group_name[64];
    struct ctl *ctl;
    struct sst_engine *engine;
    struct smc_group *smc;
    uint32_t barriers;
    bool engine_started;
    bool shut_down;
    /* Current view (tolerate_failures). */
    uint64_t view_id;
    uint32_t num_rows;
    uint32_t my_row;
    uint32_t num_subgroups;
    struct smc_layout *layouts;
    struct group_view_ctx *view_ctx;
    pthread_rwlock_t smc_lock;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t suspected; /* rows of the current view reported failed */
    bool joinable;      /* TCP bootstrap and tolerate_failures: joins are taken */
    uint32_t next_id;   /* member id the next joiner gets (ids are never reused) */
    struct group_joiner joiner;
    uint64_t detected_ns;
    bool changing;
    bool closing; /* in the shutdown barrier: departures are expected */
    bool stop;
    int terminal;
    char terminal_msg[256]; /* why the member stopped */
    bool thread_started;
    pthread_t thread;
};

/* Opens the SST engine for options (transport, self id, host). */
int group_open_engine(struct spindle_group *group);
/* Delivery upcall wrapper installed on every smc_group (maps sender rows to
 * member ids and stamps the view id). */
void group_deliver(void *ctx, const struct spindle_message *messages, size_t count);
/* Engine failure callback (predicate thread, engine lock held). */
void group_on_failure(void *ctx, struct sst_table *table, uint32_t row, int error);
/* Starts the membership thread; stops and joins it. */
int group_membership_start(struct spindle_group *group);
void group_membership_stop(struct spindle_group *group);
/*
 * Called by an application thread whose smc call failed with rc: waits
 * while a view change is in progress and returns 1 when the call should be
 * retried on the new view, else the error to report (rc, or the terminal
 * error such as SPINDLE_EMINORITY).
 */
int group_after_error(struct spindle_group *group, struct smc_group *used, int rc);
/* Returns once no view change is in progress. */
void group_wait_change(struct spindle_group *group);

/* Joins (group_join.c). group_join_create runs spindle_group_create's
 * work for a joiner (options.join set). group_join_poll is the membership
 * thread's idle step: answers a pending join request (the leader admits,
 * others redirect to it) and picks up the leader's announcement of a
 * joiner; returns true when a joiner is set for the next view change.
 * group_join_send_view gives the admitted joiner the next view's
 * descriptors and the state (leader only, after the trim was delivered);
 * group_join_abort tells it the join failed. */
int group_join_create(struct spindle_group *group, const struct spindle_subgroup_config *subgroups,
                      uint32_t num_subgroups);
bool group_join_poll(struct spindle_group *group);
int group_join_send_view(struct spindle_group *group, uint64_t view,
                         const struct sst_member_desc *descs);
void group_join_abort(struct spindle_group *group, int error, const char *why);
/* Default layout of the next view plus the user's layout function: rows
 * are the view's ranks; old_layouts are mapped through new_row (old row ->
 * new row, -1 gone); a joiner at row joiner_row (or -1) becomes a member of
 * every subgroup. */
int group_next_layouts(struct spindle_group *group, const struct smc_layout *old_layouts,
                       const int *new_row, uint32_t old_rows, int joiner_row,
                       const struct spindle_view_info *view, struct smc_layout *out);
/* Reports an installed view to the application (view upcall). */
void group_report_view(struct spindle_group *group, uint64_t left_mask, const uint32_t *old_ids,
                       uint32_t old_rows, uint32_t joined);

#endif
