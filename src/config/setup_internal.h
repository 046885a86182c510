/*
 * Internals of struct spindle_group_setup (include/spindle/setup.h).
 *
 * setup.c owns the setup's storage and fills options and subgroups from a
 * configuration and a member list; setup_env.c finds the member list in a
 * launcher's environment with the pure parsers of launch_parse.c (Slurm
 * host lists, tasks per node, hostfiles), which read untrusted text and
 * report every mistake with sp_error naming the variable and its value.
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
/* Frees every block of storage, then storage; NULL is ignored. */
void setup_storage_free(struct spindle_group_setup_storage *storage);

/* spindle_group_setup_from_config and _from_env into the library's own
 * layout of a setup (setup_sized.c lays it out as the program sees it):
 * the same returns; on failure *out holds nothing to free. */
int setup_from_config(const struct spindle_config *config, uint32_t id,
                      struct spindle_group_setup *out);
int setup_from_env(const struct spindle_config *config, struct spindle_group_setup *out);
/* Fills the bootstrap list, self, num_members, the configuration's values
 * (config may be NULL) and the subgroups. Returns 0, SPINDLE_ECONFIG (a
 * subgroup naming a member the group lacks, a gap in subgroup indices) or
 * SPINDLE_ENOMEM; the caller frees the setup on failure. */
int setup_finish(const struct spindle_config *config, uint32_t self,
                 const struct setup_member *members, uint32_t num_members,
                 struct spindle_group_setup *out);

/* Most hosts a host list, a tasks-per-node list or a hostfile may name:
 * more than SPINDLE_MAX_MEMBERS tasks never run on more hosts. */
#define LAUNCH_MAX_HOSTS 4096u
/* Longest host name (RFC 1035 total length). */
#define LAUNCH_HOST_MAX 255u

/* Hosts with their slots (tasks each takes in rank order). */
struct launch_hosts {
    uint32_t count;
    char **names;
    uint32_t *slots;
};

/* Releases what a parser put in hosts (and zeroes it); NULL-safe. */
void launch_hosts_free(struct launch_hosts *hosts);

/*
 * Expands a Slurm host list ("node[01-04,07],gpu[1-2]-ib,login"): items
 * split at commas outside brackets, each a text with bracket groups of
 * numbers and ranges, every group multiplied out; a range keeps the zero
 * padding of its first bound. slots are 1. name (the variable) and the
 * text are named in every error. Returns 0 and *out, SPINDLE_ECONFIG or
 * SPINDLE_ENOMEM (out holds nothing then).
 */
int launch_hostlist_expand(const char *name, const char *text, struct launch_hosts *out);

/*
 * Expands Slurm's tasks per node ("2(x3),1" = 2,2,2,1) into counts[0..*n),
 * at most max entries, each count at least 1. Returns 0 or SPINDLE_ECONFIG.
 */
int launch_tasks_per_node(const char *name, const char *text, uint32_t *counts, uint32_t max,
                          uint32_t *n);

/*
 * Parses a hostfile's text: one host per line, optionally "slots=N"
 * (default 1) after it, '#' to the end of a line a comment, blank lines
 * ignored. path names the file in errors ("path:line: ..."). Returns 0 and
 * *out, SPINDLE_ECONFIG or SPINDLE_ENOMEM.
 */
int launch_hostfile_parse(const char *path, const char *text, struct launch_hosts *out);

#endif
