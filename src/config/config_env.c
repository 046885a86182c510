/*
 * Every environment variable the library reads (config_env.h), listed by
 * spindle-info -e and docs/CONFIG.md "Environment variables".
 */
#include "config/config_env.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

static const struct cfg_env_var env_table[] = {
    /* The library itself. */
    {"SPINDLE_LOG_LEVEL", "error, warn, info, debug", "warn",
     "log level, read at the first log line until spindle_log_set_level() sets one; wins over "
     "the file's log_level in spindle_group_setup_from_config/_from_env",
     "[group] log_level"},
    {"XDG_RUNTIME_DIR", "path", "unset",
     "the user's runtime directory: administration sockets go to its spindle/ by default, and "
     "spindle-stat and spindle-ctl look there",
     NULL},
    {"SPINDLE_VERBS_DCT", "0, or anything else", "on",
     "verbs: 0 stops the backend from trying DC (dynamically connected) transport by default; "
     "unset or another value: DC where the device has it, RC otherwise",
     NULL},

    /* spindle_group_setup_from_env: spindle-run, Slurm, PMIx. */
    {"SPINDLE_RANK", "0 .. 63", "unset",
     "this process's member id (rank), as spindle-run sets it; looked for before SLURM_PROCID "
     "and PMIX_RANK",
     NULL},
    {"SPINDLE_SIZE", "1 .. 64", "unset", "the number of members, with SPINDLE_RANK", NULL},
    {"SPINDLE_LOCAL_RANK", "0 .. 63", "unset",
     "with SPINDLE_RANK: the rank's index among the ranks on its host, which must match the "
     "block layout",
     NULL},
    {"SPINDLE_BASE_PORT", "1 .. 65535", "17400",
     "port of the first task on each host; the task with index i on a host listens on base + i",
     NULL},
    {"SPINDLE_HOSTFILE", "path", "unset (Slurm's node list, else 127.0.0.1)",
     "the members' hosts: one host per line, optionally slots=N; ranks fill them in blocks", NULL},
    {"SLURM_PROCID", "0 .. 63", "unset", "under srun: this process's member id (rank)", NULL},
    {"SLURM_NTASKS", "1 .. 64", "unset",
     "under srun, or a PMIx launcher inside a Slurm job: the number of members", NULL},
    {"SLURM_STEP_NODELIST", "Slurm host list, e.g. node[01-04,07]", "unset",
     "under srun without SPINDLE_HOSTFILE: the members' hosts", NULL},
    {"SLURM_STEP_TASKS_PER_NODE", "Slurm task counts, e.g. 2(x3),1", "unset",
     "under srun without SPINDLE_HOSTFILE: how many ranks each host of SLURM_STEP_NODELIST takes",
     NULL},
    {"SLURM_LOCALID", "0 .. 63", "unset",
     "under srun: the task's index on its node, which must match the block layout", NULL},
    {"PMIX_RANK", "0 .. 63", "unset", "under a PMIx launcher: this process's member id (rank)",
     NULL},
    {"OMPI_COMM_WORLD_SIZE", "1 .. 64", "unset",
     "under a PMIx launcher without SLURM_NTASKS: the number of members", NULL},

    /* spindle_config_load: SPINDLE_<SECTION>_<KEY> replaces the file's key. */
    {"SPINDLE_GROUP_NAME", "text", "spindle", "group name; namespaces shared-memory objects",
     "[group] name"},
    {"SPINDLE_GROUP_TRANSPORT", "shm, fabric, verbs", "shm", "transport backend",
     "[group] transport"},
    {"SPINDLE_GROUP_PROVIDER", "libfabric provider name", "tcp",
     "for fabric: the libfabric provider (tcp, sockets, verbs, efa, ...)", "[group] provider"},
    {"SPINDLE_GROUP_DEVICE", "device name", "first active port",
     "for verbs: the RDMA device (e.g. mlx5_0)", "[group] device"},
    {"SPINDLE_GROUP_FAILURE_TIMEOUT_MS", "1 .. 3600000", "5000",
     "how long a silent or broken peer may take to be reported", "[group] failure_timeout_ms"},
    {"SPINDLE_GROUP_SLOW_MEMBER_MS", "0 .. 3600000", "0",
     "0: a slow member holds senders back; > 0: one that held a window full this long is removed",
     "[group] slow_member_ms"},
    {"SPINDLE_GROUP_TIE_BREAKER", "true, false", "false",
     "true: half of a view holding its leader is a quorum too", "[group] tie_breaker"},
    {"SPINDLE_GROUP_LOG_LEVEL", "error, warn, info, debug", "warn", "library log level",
     "[group] log_level"},
    {"SPINDLE_GROUP_KEY_FILE", "path", "none",
     "group key (spindle-keygen): authenticates and encrypts the control channel",
     "[group] key_file"},
    {"SPINDLE_GROUP_ACCEPT_KEY_FILE", "path", "none",
     "a second key accepted but not proved, for rotating the key", "[group] accept_key_file"},
    {"SPINDLE_GROUP_LOG_DIR", "path", "none",
     "this member's log directory for the subgroups with logged = true", "[group] log_dir"},
    {"SPINDLE_GROUP_DISPATCH", "true, false", "false",
     "queue deliveries and views for spindle_dispatch on the application's thread",
     "[group] dispatch"},
    {"SPINDLE_GROUP_DISPATCH_QUEUE_BYTES", "bytes, 0 = 8 MiB", "0",
     "most bytes of deliveries queued for spindle_dispatch", "[group] dispatch_queue_bytes"},
    {"SPINDLE_GROUP_P2P_WINDOW", "0 .. 1024, 0 = 16", "0",
     "slots of each point-to-point ring (every member the same)", "[group] p2p_window"},
    {"SPINDLE_GROUP_OWN_INLINE", "true, false", "false",
     "a sender's own unordered messages are delivered inside its send call", "[group] own_inline"},
    {"SPINDLE_GROUP_ADMIN_DIR", "path, or off", "$XDG_RUNTIME_DIR/spindle, else /tmp/spindle-<uid>",
     "where this member's administration socket goes (spindle-stat, spindle-ctl); off: none",
     "[group] admin_dir"},
    {"SPINDLE_MEMBER_<N>_HOST", "host name or address", "127.0.0.1",
     "where member N listens (a [member.N] the file defines)", "[member.N] host"},
    {"SPINDLE_MEMBER_<N>_PORT", "0 .. 65535", "0",
     "member N's listening port; 0 = ephemeral, one host only", "[member.N] port"},
    {"SPINDLE_MEMBER_<N>_NAME", "1 .. 63 printable ASCII characters, no space",
     "none (the library's default name)", "member N's persistent name, unique in the file",
     "[member.N] name"},
    {"SPINDLE_SUBGROUP_<N>_MEMBERS", "member ids, e.g. 0, 1, 2", "required",
     "subgroup N's members in rank order (a [subgroup.N] the file defines)",
     "[subgroup.N] members"},
    {"SPINDLE_SUBGROUP_<N>_SENDERS", "member ids", "all members",
     "the members of subgroup N that send", "[subgroup.N] senders"},
    {"SPINDLE_SUBGROUP_<N>_WINDOW_SIZE", "1 .. 100000", "100", "ring slots per sender",
     "[subgroup.N] window_size"},
    {"SPINDLE_SUBGROUP_<N>_MAX_PAYLOAD", "1 .. 1048576", "1024", "bytes per message",
     "[subgroup.N] max_payload"},
    {"SPINDLE_SUBGROUP_<N>_MODE", "atomic, unordered", "atomic",
     "total order once stable, or delivery on receipt", "[subgroup.N] mode"},
    {"SPINDLE_SUBGROUP_<N>_LOGGED", "true, false", "false",
     "log every message delivered in subgroup N (atomic subgroups only)", "[subgroup.N] logged"},
    {"SPINDLE_BENCH_MESSAGES", ">= 1", "100000", "spindle-bench: messages per sender",
     "[bench] messages"},
    {"SPINDLE_BENCH_MESSAGE_SIZE", "1 .. 1048576", "64", "spindle-bench: payload bytes",
     "[bench] message_size"},
    {"SPINDLE_BENCH_DURATION_MS", ">= 0", "0",
     "spindle-bench: send this long after the warm-up; 0 = until messages are sent",
     "[bench] duration_ms"},
};

const struct cfg_env_var *cfg_env_table(size_t *count)
{
    *count = sizeof env_table / sizeof env_table[0];
    return env_table;
}

/* name against a row's name, where "<N>" takes one or more digits. */
static int cfg_env_matches(const char *pattern, const char *name)
{
    while (*pattern != '\0') {
        if (strncmp(pattern, "<N>", 3) == 0) {
            if (!isdigit((unsigned char)*name))
                return 0;
            while (isdigit((unsigned char)*name))
                name++;
            pattern += 3;
        } else if (*pattern++ != *name++) {
            return 0;
        }
    }
    return *name == '\0';
}

const struct cfg_env_var *cfg_env_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < sizeof env_table / sizeof env_table[0]; i++)
        if (cfg_env_matches(env_table[i].name, name))
            return &env_table[i];
    return NULL;
}

const char *cfg_env_get(const char *name)
{
    if (cfg_env_find(name) == NULL) {
        SP_LOG_ERR("config",
                   "environment variable %s is read but not declared "
                   "(src/config/config_env.c); taken as unset",
                   name != NULL ? name : "(null)");
        return NULL;
    }
    return getenv(name);
}
