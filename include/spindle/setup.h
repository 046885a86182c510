/*
 * Group options in one call, from a configuration file (docs/CONFIG.md) or
 * from the environment a launcher gives each process (srun, a PMIx
 * launcher, spindle-run: docs/CONFIG.md "From a launcher").
 *
 *     struct spindle_group_setup setup;
 *     if (spindle_group_setup_from_env(NULL, &setup) != 0) { spindle_errmsg() ... }
 *     setup.options.deliver = on_deliver;
 *     rc = spindle_group_create(&setup.options, setup.subgroups, setup.num_subgroups, &group);
 *     ...
 *     spindle_group_setup_free(&setup);   (after spindle_group_create returned)
 *
 * A setup owns every string and array its options and subgroups point to
 * (nothing points into the configuration, which may be freed right after).
 * The application may change any field of options before creating the
 * group (callbacks, tolerate_failures, ...); pointers it stores there stay
 * its own.
 *
 * Subgroups: the configuration's [subgroup.N] sections (member ids are
 * group member indices; a subgroup without senders has every member send),
 * or, when it has none, one SPINDLE_MODE_ATOMIC subgroup of every member,
 * every member a sender, window SPINDLE_SETUP_DEFAULT_WINDOW and
 * max_payload SPINDLE_SETUP_DEFAULT_PAYLOAD.
 *
 * The configuration's [group] log_level is applied (spindle_log_set_level)
 * unless SPINDLE_LOG_LEVEL is set, which wins.
 */
#ifndef SPINDLE_SETUP_H
#define SPINDLE_SETUP_H

#include <stddef.h>
#include <stdint.h>

#include <spindle/config.h>
#include <spindle/export.h>
#include <spindle/group.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The one subgroup of a configuration without [subgroup.N] sections. */
#define SPINDLE_SETUP_DEFAULT_WINDOW  100u
#define SPINDLE_SETUP_DEFAULT_PAYLOAD 1024u
/* Port of local task 0 when SPINDLE_BASE_PORT is not set. */
#define SPINDLE_SETUP_DEFAULT_BASE_PORT 17400u

struct spindle_group_setup_storage; /* private */

/* Its options grow with struct spindle_group_options (<spindle/group.h>,
 * "Sized structs"), which moves the members after them: the functions
 * below take the sizes of options and of one subgroup as the program's
 * header declared them (macros pass them), lay the setup out as the
 * program sees it and allocate subgroups[] in the program's stride.
 * Nothing else is ever added to this struct. */
struct spindle_group_setup {
    struct spindle_group_options options; /* TCP bootstrap, self, num_members, file values */
    struct spindle_subgroup_config *subgroups;
    uint32_t num_subgroups;
    uint32_t local_rank; /* from_env: this process's index among the members on its host */
    struct spindle_group_setup_storage *storage;
};

/*
 * Member id of config (its [member.N] sections, ids 0..n-1 without gaps,
 * every one with a port) in a group of every member of the file, bootstrap
 * "host:port,..." in id order. Returns 0 and *out, or SPINDLE_ECONFIG
 * naming what the file lacks (a missing [member.N], a member without a
 * port, no members, a gap in the subgroup indices), SPINDLE_EINVAL when
 * id is not a member of the file or a size is below the first release's
 * struct, SPINDLE_ENOMEM. On failure *out holds nothing to free.
 */
SPINDLE_API int spindle_group_setup_from_config_sized(const struct spindle_config *config,
                                                      uint32_t id, struct spindle_group_setup *out,
                                                      size_t options_size, size_t subgroup_size);
#define spindle_group_setup_from_config(config, id, out)                                           \
    spindle_group_setup_from_config_sized((config), (id), (out),                                   \
                                          sizeof(struct spindle_group_options),                    \
                                          sizeof(struct spindle_subgroup_config))

/*
 * This process's member of a group started by a launcher. Rank and size
 * from SPINDLE_RANK/SPINDLE_SIZE, else Slurm (SLURM_PROCID, SLURM_NTASKS,
 * SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE, SLURM_LOCALID), else
 * PMIx (PMIX_RANK, size from SLURM_NTASKS or OMPI_COMM_WORLD_SIZE). Hosts
 * from SPINDLE_HOSTFILE when set, else Slurm's node list, else this host
 * (127.0.0.1). Each member's port is SPINDLE_BASE_PORT (default
 * SPINDLE_SETUP_DEFAULT_BASE_PORT) plus its index among the members on its
 * host. config may be NULL; otherwise it gives everything but the members
 * (transport, timeouts, keys, subgroups by rank, a member's name by id).
 * Returns 0 and *out, or SPINDLE_ECONFIG naming the variable and its value
 * that is malformed or missing, SPINDLE_ENOENT when the hostfile cannot be
 * read, SPINDLE_EINVAL for a size below the first release's struct,
 * SPINDLE_ENOMEM. On failure *out holds nothing to free.
 */
SPINDLE_API int spindle_group_setup_from_env_sized(const struct spindle_config *config,
                                                   struct spindle_group_setup *out,
                                                   size_t options_size, size_t subgroup_size);
#define spindle_group_setup_from_env(config, out)                                                  \
    spindle_group_setup_from_env_sized((config), (out), sizeof(struct spindle_group_options),      \
                                       sizeof(struct spindle_subgroup_config))

/* Releases what a setup owns; a zeroed or already freed setup is ignored,
 * and so is a size below the first release's options. */
SPINDLE_API void spindle_group_setup_free_sized(struct spindle_group_setup *setup,
                                                size_t options_size);
#define spindle_group_setup_free(setup)                                                            \
    spindle_group_setup_free_sized((setup), sizeof(struct spindle_group_options))

#ifdef __cplusplus
}
#endif

#endif
