/*
 * Internals of struct spindle_group_setup (include/spindle/setup.h).
 *
 * setup.c owns the setup's storage and fills options and subgroups from a
 * configuration and a member list.
 * Nothing here keeps global state; every function is thread-safe on its
 * own arguments (spindle_log_set_level aside).
 */
#ifndef SP_CONFIG_SETUP_INTERNAL_H
#define SP_CONFIG_SETUP_INTERNAL_H

#include <stdint.h>

#include <spindle/setup.h>

/* One member's TCP bootstrap address. */
struct setup_member {
    const char *host;
    uint16_t port;
};

/* Zeroes *out, sets the option defaults and allocates its storage. Returns
 * 0 or SPINDLE_ENOMEM. */
int setup_begin(struct spindle_group_setup *out);
/* Hands block (malloc'ed, may be NULL) to the setup; returns it, or NULL
 * (block freed) when it was NULL or the storage could not grow. */
void *setup_keep(struct spindle_group_setup *setup, void *block);
/* Frees the setup and returns code. */
int setup_fail(struct spindle_group_setup *setup, int code);
/* Fills the bootstrap list, self, num_members, the configuration's values
 * (config may be NULL) and the subgroups. Returns 0, SPINDLE_ECONFIG (a
 * subgroup naming a member the group lacks, a gap in subgroup indices) or
 * SPINDLE_ENOMEM; the caller frees the setup on failure. */
int setup_finish(const struct spindle_config *config, uint32_t self,
                 const struct setup_member *members, uint32_t num_members,
                 struct spindle_group_setup *out);

#endif
