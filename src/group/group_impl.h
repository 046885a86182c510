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
    bool shut_down;
};

#endif
