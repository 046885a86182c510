/*
 * Private to src/smc: reading spindle_group_options.bootstrap and opening
 * the bootstrap exchange it names (a local directory, or a TCP member list
 * "host:port,host:port,..."). Pure parsing plus ctl_open_*; not
 * thread-safe (one call per group creation).
 */
#ifndef SP_SMC_GROUP_BOOTSTRAP_H
#define SP_SMC_GROUP_BOOTSTRAP_H

#include <stdint.h>

#include <spindle/group.h>

#include "control/ctl.h"

#define GROUP_HOST_MAX 256

struct group_endpoint {
    char host[GROUP_HOST_MAX];
    uint16_t port;
};

/* Parsed bootstrap: either dir or hosts[num_members]. */
struct group_bootstrap {
    enum spindle_bootstrap_kind kind; /* DIR or TCP after parsing */
    char dir[4096];
    struct group_endpoint hosts[SPINDLE_MAX_MEMBERS];
};

/* Parses options->bootstrap for num_members members. SPINDLE_EINVAL names
 * the malformed entry or the count mismatch. */
int group_bootstrap_parse(const struct spindle_group_options *options, struct group_bootstrap *out);

/* Parses one "host:port"; SPINDLE_EINVAL names `what` and the text. */
int group_parse_endpoint(const char *text, const char *what, struct group_endpoint *out);

/* Opens the exchange for this member (TCP: refusing other groups). */
int group_bootstrap_open(const struct group_bootstrap *boot, const char *group_name, uint32_t self,
                         uint32_t num_members, int timeout_ms, struct ctl **out);

#endif
