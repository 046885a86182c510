/*
 * Private to src/group: reading spindle_group_options.bootstrap and opening
 * the control channel it names (a local directory, or a TCP member list
 * "host:port,host:port,..."). Pure parsing plus ctl_open_*; not
 * thread-safe (one call per group creation).
 */
#ifndef SP_GROUP_GROUP_BOOTSTRAP_H
#define SP_GROUP_GROUP_BOOTSTRAP_H

#include <stdint.h>

#include <spindle/group.h>

#include "control/ctl.h"

/* Parsed bootstrap: either dir or hosts[num_members]. */
struct group_bootstrap {
    enum spindle_bootstrap_kind kind; /* DIR or TCP after parsing */
    char dir[4096];
    struct ctl_address hosts[SPINDLE_MAX_MEMBERS];
};

/* Parses options->bootstrap for num_members members. SPINDLE_EINVAL names
 * the malformed entry or the count mismatch. */
int group_bootstrap_parse(const struct spindle_group_options *options, struct group_bootstrap *out);

/* Opens the control channel for member self (TCP: refusing other groups
 * and other builds, authenticated with keys when it holds any). The
 * channel's errors (control/ctl.h). */
int group_bootstrap_open(const struct group_bootstrap *boot, const char *group_name, uint32_t self,
                         uint32_t num_members, const struct ctl_versions *versions,
                         const struct ctl_keyring *keys, int timeout_ms, struct ctl **out);

#endif
