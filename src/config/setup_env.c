/*
 * spindle_group_setup_from_env (include/spindle/setup.h): rank, size and
 * every member's host from a launcher's environment, ports from a base
 * port and each task's index on its host (docs/CONFIG.md "From a
 * launcher").
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_env.h"
#include "config/setup_internal.h"
#include "util/error.h"

/* Largest hostfile read (bytes). */
#define LAUNCH_HOSTFILE_MAX (1u << 20)

struct launch_env {
    uint32_t rank, size;
    const char *rank_var; /* which variable gave the rank */
    bool slurm;           /* rank from Slurm: hosts from its node list */
    struct launch_hosts hosts;
    const char **rank_host; /* [size]: each rank's host, into hosts */
};

/* The variable as a number 0..max; *present false when it is unset. */
static int env_number(const char *var, uint32_t max, uint32_t *out, bool *present)
{
    const char *text = cfg_env_get(var);
    *present = text != NULL;
    if (text == NULL)
        return 0;
    char *end = NULL;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 || value > max)
        return sp_error(SPINDLE_ECONFIG, "%s '%s': must be a number 0..%u", var, text, max);
    *out = (uint32_t)value;
    return 0;
}

static int env_required(const char *var, const char *why, uint32_t max, uint32_t *out)
{
    bool present;
    int rc = env_number(var, max, out, &present);
    if (rc == 0 && !present)
        return sp_error(SPINDLE_ECONFIG, "%s is not set (%s)", var, why);
    return rc;
}

/* Rank and size: spindle-run, else Slurm, else PMIx. */
static int launch_rank_size(struct launch_env *env)
{
    static const char *const rank_vars[] = {"SPINDLE_RANK", "SLURM_PROCID", "PMIX_RANK"};
    bool present = false;
    int rc = 0;
    for (size_t i = 0; i < sizeof rank_vars / sizeof *rank_vars && !present && rc == 0; i++) {
        env->rank_var = rank_vars[i];
        rc = env_number(env->rank_var, SPINDLE_MAX_MEMBERS - 1, &env->rank, &present);
    }
    if (rc != 0)
        return rc;
    if (!present)
        return sp_error(SPINDLE_ECONFIG,
                        "no launcher found: SPINDLE_RANK, SLURM_PROCID and PMIX_RANK are unset "
                        "(start under spindle-run, srun or a PMIx launcher)");
    env->slurm = strcmp(env->rank_var, "SLURM_PROCID") == 0;
    const char *size_var = "SPINDLE_SIZE";
    if (strcmp(env->rank_var, "PMIX_RANK") == 0)
        size_var = cfg_env_get("SLURM_NTASKS") != NULL ? "SLURM_NTASKS" : "OMPI_COMM_WORLD_SIZE";
    else if (env->slurm)
        size_var = "SLURM_NTASKS";
    rc = env_required(size_var, "the number of tasks", SPINDLE_MAX_MEMBERS, &env->size);
    if (rc != 0)
        return rc;
    if (env->size == 0 || env->rank >= env->size)
        return sp_error(SPINDLE_ECONFIG, "%s %u is not below %s %u", env->rank_var, env->rank,
                        size_var, env->size);
    return 0;
}

/* Block distribution: host i takes the next slots[i] ranks. */
static int launch_block_map(struct launch_env *env, const char *source)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < env->hosts.count; i++)
        total += env->hosts.slots[i];
    if (total < env->size)
        return sp_error(SPINDLE_ECONFIG, "%s: %llu slots for %u tasks", source,
                        (unsigned long long)total, env->size);
    uint32_t rank = 0;
    for (uint32_t i = 0; i < env->hosts.count && rank < env->size; i++)
        for (uint32_t s = 0; s < env->hosts.slots[i] && rank < env->size; s++)
            env->rank_host[rank++] = env->hosts.names[i];
    return 0;
}

static int launch_read_hostfile(struct launch_env *env, const char *path)
{
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return sp_error(SPINDLE_ENOENT, "SPINDLE_HOSTFILE '%s': %s", path, strerror(errno));
    char *text = malloc(LAUNCH_HOSTFILE_MAX + 1);
    if (text == NULL) {
        fclose(file);
        return sp_error(SPINDLE_ENOMEM, "out of memory reading SPINDLE_HOSTFILE '%s'", path);
    }
    size_t len = fread(text, 1, LAUNCH_HOSTFILE_MAX + 1, file);
    fclose(file);
    int rc = 0;
    if (len > LAUNCH_HOSTFILE_MAX)
        rc = sp_error(SPINDLE_ECONFIG, "SPINDLE_HOSTFILE '%s': larger than %u bytes", path,
                      LAUNCH_HOSTFILE_MAX);
    else if (memchr(text, '\0', len) != NULL)
        rc = sp_error(SPINDLE_ECONFIG, "SPINDLE_HOSTFILE '%s': not a text file", path);
    if (rc == 0) {
        text[len] = '\0';
        rc = launch_hostfile_parse(path, text, &env->hosts);
    }
    free(text);
    return rc != 0 ? rc : launch_block_map(env, path);
}

/* Slurm's step: its node list and tasks per node, block distribution. */
static int launch_slurm_hosts(struct launch_env *env)
{
    const char *list = cfg_env_get("SLURM_STEP_NODELIST");
    const char *tasks = cfg_env_get("SLURM_STEP_TASKS_PER_NODE");
    if (list == NULL || tasks == NULL)
        return sp_error(SPINDLE_ECONFIG,
                        "%s is not set (Slurm gives it to every step; or set "
                        "SPINDLE_HOSTFILE)",
                        list == NULL ? "SLURM_STEP_NODELIST" : "SLURM_STEP_TASKS_PER_NODE");
    int rc = launch_hostlist_expand("SLURM_STEP_NODELIST", list, &env->hosts);
    if (rc != 0)
        return rc;
    uint32_t n = 0;
    rc = launch_tasks_per_node("SLURM_STEP_TASKS_PER_NODE", tasks, env->hosts.slots,
                               env->hosts.count, &n);
    if (rc == 0 && n != env->hosts.count)
        rc = sp_error(SPINDLE_ECONFIG,
                      "SLURM_STEP_TASKS_PER_NODE '%s' gives %u nodes, SLURM_STEP_NODELIST '%s' %u",
                      tasks, n, list, env->hosts.count);
    return rc != 0 ? rc : launch_block_map(env, "SLURM_STEP_TASKS_PER_NODE");
}

/* The members' hosts. */
static int launch_hosts(struct launch_env *env)
{
    const char *hostfile = cfg_env_get("SPINDLE_HOSTFILE");
    if (hostfile != NULL && hostfile[0] != '\0')
        return launch_read_hostfile(env, hostfile);
    if (env->slurm)
        return launch_slurm_hosts(env);
    for (uint32_t r = 0; r < env->size; r++)
        env->rank_host[r] = "127.0.0.1";
    return 0;
}

/* The rank's index among the ranks on its host. */
static uint32_t launch_local_index(const struct launch_env *env, uint32_t rank)
{
    uint32_t index = 0;
    for (uint32_t r = 0; r < rank; r++)
        index += strcmp(env->rank_host[r], env->rank_host[rank]) == 0;
    return index;
}

/* What the launcher says the local rank is must be what the map gives. */
static int launch_check_local(const struct launch_env *env, uint32_t local)
{
    const char *var = env->slurm ? "SLURM_LOCALID" : "SPINDLE_LOCAL_RANK";
    uint32_t given;
    bool present;
    int rc = env_number(var, SPINDLE_MAX_MEMBERS - 1, &given, &present);
    if (rc != 0 || !present || given == local)
        return rc;
    return sp_error(SPINDLE_ECONFIG,
                    "%s %u, but rank %u is task %u of %s in block order (%s): start the "
                    "tasks in block distribution",
                    var, given, env->rank, local, env->rank_host[env->rank],
                    cfg_env_get("SPINDLE_HOSTFILE") != NULL ? "SPINDLE_HOSTFILE" : "the node list");
}

static int launch_members(struct launch_env *env, struct spindle_group_setup *out,
                          struct setup_member *members)
{
    uint32_t base = SPINDLE_SETUP_DEFAULT_BASE_PORT;
    bool present;
    int rc = env_number("SPINDLE_BASE_PORT", 65535, &base, &present);
    if (rc == 0 && base == 0)
        rc = sp_error(SPINDLE_ECONFIG, "SPINDLE_BASE_PORT '%s': must be a number 1..65535",
                      cfg_env_get("SPINDLE_BASE_PORT"));
    for (uint32_t r = 0; rc == 0 && r < env->size; r++) {
        uint32_t port = base + launch_local_index(env, r);
        if (port > 65535)
            return sp_error(SPINDLE_ECONFIG,
                            "SPINDLE_BASE_PORT %u: task %u of %s would need port %u, above 65535",
                            base, port - base, env->rank_host[r], port);
        members[r] = (struct setup_member){env->rank_host[r], (uint16_t)port};
    }
    if (rc != 0)
        return rc;
    out->local_rank = launch_local_index(env, env->rank);
    return launch_check_local(env, out->local_rank);
}

int setup_from_env(const struct spindle_config *config, struct spindle_group_setup *out)
{
    if (out == NULL)
        return sp_error(SPINDLE_EINVAL, "spindle_group_setup_from_env: out is NULL");
    memset(out, 0, sizeof *out);
    struct launch_env env = {0};
    int rc = launch_rank_size(&env);
    if (rc != 0)
        return rc;
    rc = setup_begin(out);
    if (rc != 0)
        return rc;
    env.rank_host = setup_keep(out, calloc(env.size, sizeof *env.rank_host));
    struct setup_member *members = setup_keep(out, calloc(env.size, sizeof *members));
    if (env.rank_host == NULL || members == NULL)
        rc = sp_error(SPINDLE_ENOMEM, "out of memory for the member list");
    if (rc == 0)
        rc = launch_hosts(&env);
    if (rc == 0)
        rc = launch_members(&env, out, members);
    if (rc == 0)
        rc = setup_finish(config, env.rank, members, env.size, out);
    launch_hosts_free(&env.hosts); /* setup_finish copied the hosts into the member list */
    return rc != 0 ? setup_fail(out, rc) : 0;
}
