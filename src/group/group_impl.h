/*
 * Private to src/group: the state behind spindle_group_t. The handle owns
 * its options, the parsed bootstrap and one membership (src/view), which
 * owns everything else (engine, control channel, views, multicast).
 *
 * Threads: the public calls may run on several application threads; what
 * they share lives in the membership and is locked there. shut_down is
 * set by shutdown/leave on the application thread that owns the handle.
 */
#ifndef SP_GROUP_GROUP_IMPL_H
#define SP_GROUP_GROUP_IMPL_H

#include <pthread.h>
#include <stdbool.h>

#include <spindle/group.h>

#include "group/group_bootstrap.h"
#include "view/membership.h"

struct spindle_group {
    struct spindle_group_options options;
    struct group_bootstrap boot;
    char group_name[64];
    struct ctl_keyring keys; /* from options.key_file; count 0: none */
    struct view_membership membership;
    /* shut_down: set by shutdown and leave, on the application's thread or
     * the administration endpoint's (end_lock serialises them). */
    pthread_mutex_t end_lock;
    bool shut_down;
    struct group_admin *admin; /* the administration endpoint (group/admin.h); NULL: none */
};

/* Test hooks, set only by tests through this header (all members of a
 * group must be given the same). */
struct group_test_options {
    uint64_t smc_first_position; /* smc_options.first_position: streams start there */
    uint64_t log_queue_bytes;    /* the log appender's queue (0: its default) */
};

/* spindle_group_create with test hooks (test NULL: none, as the public
 * call). Returns what spindle_group_create returns. */
int group_create_with(const struct spindle_group_options *options,
                      const struct spindle_subgroup_config *subgroups, uint32_t num_subgroups,
                      const struct group_test_options *test, spindle_group_t **out);

/* 0 when a leave may start now, else why not (SPINDLE_ENOTSUP without
 * tolerate_failures, SPINDLE_ESHUTDOWN when the member left, shut down or
 * stopped). */
int group_can_leave(spindle_group_t *group);
/* spindle_group_leave, asked by someone other than the application: once
 * flushed, the member's status becomes SPINDLE_ESHUTDOWN with why
 * (spindle_group_status), so its later calls say why they fail. */
int group_leave_by(spindle_group_t *group, int timeout_ms, const char *why);

#endif
