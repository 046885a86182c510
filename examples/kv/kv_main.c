/*
 * spindle-kv: a replicated key-value service speaking RESP2 (docs/KV.md).
 *
 *   spindle-kv --local N --port P [options]   N replicas on this host, RESP
 *                                             on P, P+1, ..., P+N-1
 *   spindle-kv --config FILE --id I [options] one replica of a multi-host
 *                                             service ([member.N] sections)
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kv_server.h"

struct kv_args {
    struct kv_server_options server;
    unsigned local;
    unsigned control_port;
    const char *config;
    long id;
    const char *pid_dir;
    const char *log_dir;
    const char *join;   /* --join: a member's control address */
    const char *listen; /* --listen: this joiner's own control address */
    bool shard_given;
    int failure_timeout_ms;
};

static const char usage[] =
    "usage: spindle-kv --local N [--port P] [options]\n"
    "       spindle-kv --config FILE --id I [--port P] [options]\n"
    "       spindle-kv --join HOST:PORT --listen HOST:PORT [--port P] [options]\n"
    "  --local N               start N replicas on this host (TCP bootstrap on loopback),\n"
    "                          serving RESP on ports P .. P+N-1\n"
    "  --config FILE --id I    run replica I of the group the INI file describes\n"
    "  --join HOST:PORT        join a running service through a member's control address\n"
    "                          (with --local: 127.0.0.1:C+i), taking the state of its\n"
    "                          shard; --listen HOST:PORT is this replica's own\n"
    "  --shards S --shard K    with --join: the service has S shards (default 1) and\n"
    "                          this replica serves shard K (default 0)\n"
    "  --port P                RESP port (default 6379)\n"
    "  --bind ADDR             RESP listener address (default 127.0.0.1)\n"
    "  --control-port C        with --local: group bootstrap ports C .. C+N-1\n"
    "                          (default P+10000)\n"
    "  --requirepass PASS      clients must AUTH with PASS\n"
    "  --replicas R            replicas per shard: members i with the same (i / R) mod\n"
    "                          (members / R) form a shard (default: one shard of all)\n"
    "  --stale-reads           reads answered from the local copy by default\n"
    "                          (default: linearizable, ordered through the group)\n"
    "  --tick-ms MS            period of the ordered expiry ticks (default 100)\n"
    "  --failure-timeout-ms MS how long a silent replica may take to be removed\n"
    "                          (default 5000)\n"
    "  --log-dir DIR           logged shards: writes are answered once on stable storage\n"
    "                          at every replica of the shard; a restart of every replica\n"
    "                          recovers from the logs (with --local: DIR/replica-<id>)\n"
    "  --snapshot-every N      with --log-dir: snapshot the store into the log every N\n"
    "                          operations (default 50000, or twice the keys when more)\n"
    "  --pid-dir DIR           write DIR/replica-<id>.pid once each replica serves\n";

static int parse_unsigned(const char *text, const char *name, unsigned long min, unsigned long max,
                          unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    if (text[0] == '\0' || text[0] == '-' || *end != '\0' || errno != 0 || value < min ||
        value > max) {
        fprintf(stderr, "spindle-kv: %s '%s' is not a number in %lu..%lu\n", name, text, min, max);
        return -1;
    }
    *out = value;
    return 0;
}

enum {
    OPT_CONTROL_PORT = 256,
    OPT_REQUIREPASS,
    OPT_STALE,
    OPT_TICK,
    OPT_FAILURE,
    OPT_PID_DIR,
    OPT_REPLICAS,
    OPT_LOG_DIR,
    OPT_JOIN,
    OPT_LISTEN,
    OPT_SHARDS,
    OPT_SHARD,
    OPT_SNAPSHOT_EVERY
};

static int parse_args(int argc, char **argv, struct kv_args *a)
{
    static const struct option options[] = {
        {"local", required_argument, 0, 'l'},
        {"config", required_argument, 0, 'c'},
        {"id", required_argument, 0, 'i'},
        {"port", required_argument, 0, 'p'},
        {"bind", required_argument, 0, 'b'},
        {"control-port", required_argument, 0, OPT_CONTROL_PORT},
        {"requirepass", required_argument, 0, OPT_REQUIREPASS},
        {"stale-reads", no_argument, 0, OPT_STALE},
        {"tick-ms", required_argument, 0, OPT_TICK},
        {"failure-timeout-ms", required_argument, 0, OPT_FAILURE},
        {"pid-dir", required_argument, 0, OPT_PID_DIR},
        {"replicas", required_argument, 0, OPT_REPLICAS},
        {"log-dir", required_argument, 0, OPT_LOG_DIR},
        {"join", required_argument, 0, OPT_JOIN},
        {"listen", required_argument, 0, OPT_LISTEN},
        {"shards", required_argument, 0, OPT_SHARDS},
        {"shard", required_argument, 0, OPT_SHARD},
        {"snapshot-every", required_argument, 0, OPT_SNAPSHOT_EVERY},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    memset(a, 0, sizeof *a);
    a->server.port = 6379;
    a->server.tick_ms = 100;
    a->id = -1;
    unsigned long v = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'l':
            rc = parse_unsigned(optarg, "--local", 1, SPINDLE_MAX_MEMBERS, &v);
            a->local = (unsigned)v;
            break;
        case 'c':
            a->config = optarg;
            break;
        case 'i':
            rc = parse_unsigned(optarg, "--id", 0, SPINDLE_MAX_MEMBERS - 1, &v);
            a->id = (long)v;
            break;
        case 'p':
            rc = parse_unsigned(optarg, "--port", 1, 65535, &v);
            a->server.port = (unsigned)v;
            break;
        case 'b':
            a->server.bind = optarg;
            break;
        case OPT_CONTROL_PORT:
            rc = parse_unsigned(optarg, "--control-port", 1, 65535, &v);
            a->control_port = (unsigned)v;
            break;
        case OPT_REQUIREPASS:
            a->server.requirepass = optarg;
            break;
        case OPT_STALE:
            a->server.stale_reads = true;
            break;
        case OPT_TICK:
            rc = parse_unsigned(optarg, "--tick-ms", 1, 60000, &v);
            a->server.tick_ms = (unsigned)v;
            break;
        case OPT_FAILURE:
            rc = parse_unsigned(optarg, "--failure-timeout-ms", 100, 600000, &v);
            a->failure_timeout_ms = (int)v;
            break;
        case OPT_PID_DIR:
            a->pid_dir = optarg;
            break;
        case OPT_JOIN:
            a->join = optarg;
            break;
        case OPT_LISTEN:
            a->listen = optarg;
            break;
        case OPT_SHARDS:
            rc = parse_unsigned(optarg, "--shards", 1, SPINDLE_MAX_MEMBERS, &v);
            a->server.num_shards = (uint32_t)v;
            break;
        case OPT_SHARD:
            rc = parse_unsigned(optarg, "--shard", 0, SPINDLE_MAX_MEMBERS - 1, &v);
            a->server.shard = (uint32_t)v;
            a->shard_given = true;
            break;
        case OPT_LOG_DIR:
            a->log_dir = optarg;
            break;
        case OPT_SNAPSHOT_EVERY:
            rc = parse_unsigned(optarg, "--snapshot-every", 1, 1000000000ul, &v);
            a->server.snapshot_every = v;
            break;
        case OPT_REPLICAS:
            rc = parse_unsigned(optarg, "--replicas", 1, SPINDLE_MAX_MEMBERS, &v);
            a->server.replicas = (uint32_t)v;
            break;
        case 'h':
            fputs(usage, stdout);
            exit(0);
        default:
            fputs(usage, stderr);
            return -1;
        }
        if (rc != 0)
            return -1;
    }
    if (optind < argc) {
        fprintf(stderr, "spindle-kv: unexpected argument '%s'\n%s", argv[optind], usage);
        return -1;
    }
    if ((a->local > 0) + (a->config != NULL) + (a->join != NULL) != 1) {
        fprintf(stderr,
                "spindle-kv: give one of --local N, --config FILE with --id I, or --join\n%s",
                usage);
        return -1;
    }
    if (a->join != NULL && (a->listen == NULL || a->server.replicas > 0)) {
        fprintf(stderr, "spindle-kv: --join needs --listen HOST:PORT (this replica's control "
                        "address); the joiner's shard is --shards S --shard K, not --replicas\n");
        return -1;
    }
    if ((a->server.num_shards > 0 || a->shard_given) && a->join == NULL) {
        fprintf(stderr, "spindle-kv: --shards and --shard are for a joiner (--join); the first "
                        "replicas take theirs from --replicas\n");
        return -1;
    }
    uint32_t shards = a->server.num_shards > 0 ? a->server.num_shards : 1;
    if (a->join != NULL && a->server.shard >= shards) {
        fprintf(stderr, "spindle-kv: --shard %u is not below --shards %u\n", a->server.shard,
                shards);
        return -1;
    }
    if (a->server.snapshot_every > 0 && a->log_dir == NULL) {
        fprintf(stderr, "spindle-kv: --snapshot-every is for logged shards (--log-dir)\n");
        return -1;
    }
    if (a->config != NULL && a->id < 0) {
        fprintf(stderr, "spindle-kv: --config needs --id I (this replica's [member.I])\n");
        return -1;
    }
    if (a->local > 0 && a->server.port + a->local - 1 > 65535) {
        fprintf(stderr, "spindle-kv: --port %u with --local %u runs past port 65535\n",
                a->server.port, a->local);
        return -1;
    }
    if (a->local > 0 && a->server.replicas > a->local) {
        fprintf(stderr, "spindle-kv: --replicas %u is more than the %u replicas of --local\n",
                a->server.replicas, a->local);
        return -1;
    }
    if (a->local > 0 && a->control_port == 0)
        a->control_port = a->server.port + 10000;
    if (a->local > 0 && a->control_port + a->local - 1 > 65535) {
        fprintf(stderr, "spindle-kv: --control-port %u with --local %u runs past port 65535\n",
                a->control_port, a->local);
        return -1;
    }
    return 0;
}

static pid_t children[SPINDLE_MAX_MEMBERS];
static unsigned num_children;

static void forward_signal(int signo)
{
    for (unsigned i = 0; i < num_children; i++)
        if (children[i] > 0)
            kill(children[i], signo);
}

static int run_replica(struct kv_args *a, unsigned id, const char *bootstrap, unsigned members)
{
    char pid_file[4096];
    struct kv_server_options *o = &a->server;
    spindle_group_options_init(&o->group);
    o->group.self = id;
    o->group.num_members = members;
    o->group.bootstrap = bootstrap;
    o->group.bootstrap_kind = SPINDLE_BOOTSTRAP_TCP;
    if (a->failure_timeout_ms > 0)
        o->group.failure_timeout_ms = a->failure_timeout_ms;
    for (unsigned i = 0; i < members; i++) {
        snprintf(o->endpoints[i].host, sizeof o->endpoints[i].host, "127.0.0.1");
        o->endpoints[i].port = a->server.port + i;
    }
    o->port = a->server.port + id;
    if (a->pid_dir != NULL) {
        snprintf(pid_file, sizeof pid_file, "%s/replica-%u.pid", a->pid_dir, id);
        o->pid_file = pid_file;
    }
    char log_dir[4096];
    if (a->log_dir != NULL) {
        snprintf(log_dir, sizeof log_dir, "%s/replica-%u", a->log_dir, id);
        o->log_dir = log_dir;
    }
    return kv_server_run(o);
}

/* Forks the replicas and waits for them; SIGTERM and SIGINT are passed on. */
static int run_local(struct kv_args *a)
{
    if (a->log_dir != NULL && mkdir(a->log_dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "spindle-kv: cannot create --log-dir %s: %s\n", a->log_dir,
                strerror(errno));
        return 1;
    }
    char bootstrap[SPINDLE_MAX_MEMBERS * 24] = "";
    for (unsigned i = 0; i < a->local; i++)
        snprintf(bootstrap + strlen(bootstrap), sizeof bootstrap - strlen(bootstrap),
                 "%s127.0.0.1:%u", i > 0 ? "," : "", a->control_port + i);
    struct sigaction forward = {.sa_handler = forward_signal};
    sigemptyset(&forward.sa_mask);
    sigaction(SIGTERM, &forward, NULL);
    sigaction(SIGINT, &forward, NULL);
    fflush(NULL);
    for (unsigned i = 0; i < a->local; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("spindle-kv: fork");
            forward_signal(SIGTERM);
            break;
        }
        if (pid == 0)
            _exit(run_replica(a, i, bootstrap, a->local));
        children[num_children++] = pid;
    }
    int failed = 0;
    for (unsigned done = 0; done < num_children;) {
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        for (unsigned i = 0; i < num_children; i++) {
            if (children[i] != pid)
                continue;
            children[i] = 0;
            done++;
            if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
                fprintf(stderr, "spindle-kv: replica %u exited with status %d\n", i,
                        WEXITSTATUS(status));
                failed = 1;
            } else if (WIFSIGNALED(status)) {
                fprintf(stderr, "spindle-kv: replica %u was killed by signal %d\n", i,
                        WTERMSIG(status));
            }
        }
    }
    return failed;
}

static int run_configured(struct kv_args *a)
{
    struct spindle_config *config;
    int rc = spindle_config_load(a->config, &config);
    if (rc < 0) {
        fprintf(stderr, "spindle-kv: %s: %s\n", spindle_strerror(rc), spindle_errmsg());
        return 1;
    }
    struct spindle_group_setup setup;
    rc = spindle_group_setup_from_config(config, (uint32_t)a->id, &setup);
    /* Clients reach member i on its host at the same RESP port. */
    for (uint32_t i = 0; i < config->num_members; i++) {
        const struct spindle_config_member *member = &config->members[i];
        if (member->id >= SPINDLE_MAX_MEMBERS)
            continue;
        snprintf(a->server.endpoints[member->id].host, sizeof a->server.endpoints[0].host, "%s",
                 member->host != NULL ? member->host : "127.0.0.1");
        a->server.endpoints[member->id].port = a->server.port;
    }
    spindle_config_free(config);
    if (rc < 0) {
        fprintf(stderr, "spindle-kv: %s: %s\n", spindle_strerror(rc), spindle_errmsg());
        return 1;
    }
    /* The file's group options (transport, bootstrap, timeouts); the
     * replicated shard is the server's own subgroup. */
    a->server.group = setup.options;
    if (a->failure_timeout_ms > 0)
        a->server.group.failure_timeout_ms = a->failure_timeout_ms;
    char pid_file[4096];
    if (a->pid_dir != NULL) {
        snprintf(pid_file, sizeof pid_file, "%s/replica-%ld.pid", a->pid_dir, a->id);
        a->server.pid_file = pid_file;
    }
    a->server.log_dir = a->log_dir;
    rc = kv_server_run(&a->server);
    spindle_group_setup_free(&setup);
    return rc;
}

/* A replica joining a running service: the group gives it its member id
 * and the state of the member that admits it, or, with several shards, it
 * takes its shard's state from a replica of the shard (kv_sync.c), logged
 * or not. */
static int run_joiner(struct kv_args *a)
{
    struct kv_server_options *o = &a->server;
    spindle_group_options_init(&o->group);
    o->group.join = a->join;
    o->group.bootstrap = a->listen;
    o->group.bootstrap_kind = SPINDLE_BOOTSTRAP_TCP;
    o->group.num_members = 1; /* ignored by a join; sizes the subgroup's config */
    if (a->failure_timeout_ms > 0)
        o->group.failure_timeout_ms = a->failure_timeout_ms;
    o->log_dir = a->log_dir;
    char pid_file[4096];
    if (a->pid_dir != NULL) {
        snprintf(pid_file, sizeof pid_file, "%s/joiner-%d.pid", a->pid_dir, (int)getpid());
        o->pid_file = pid_file;
    }
    return kv_server_run(o);
}

int main(int argc, char **argv)
{
    struct kv_args args;
    if (parse_args(argc, argv, &args) != 0)
        return 2;
    if (args.join != NULL)
        return run_joiner(&args);
    return args.local > 0 ? run_local(&args) : run_configured(&args);
}
