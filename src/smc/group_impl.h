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

#include "smc/group_bootstrap.h"
#include "smc/smc.h"

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
    struct tp_oob *oob;
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
    uint64_t detected_ns;
    bool changing;
    bool closing; /* in the shutdown barrier: departures are expected */
    bool stop;
    int terminal;
    char terminal_msg[256]; /* why the member stopped */
    bool thread_started;
    pthread_t thread;
};

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

#endif
