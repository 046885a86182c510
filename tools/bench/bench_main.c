/*
 * spindle-bench: throughput/latency benchmark of libspindle groups.
 *
 *   spindle-bench --local N [options]        forks N members on this host
 *   spindle-bench --id I --members LIST ...  runs member I alone (TCP bootstrap)
 *   spindle-bench --config FILE --id I ...   runs member I of the group FILE describes
 *                                            (members, transport, subgroups, workload;
 *                                            flags override the workload)
 *
 * The launcher collects every member's result through a pipe, prints a
 * human summary and, last, one JSON line. Exit status: 0 when every member
 * succeeded, 1 when one failed, 2 on a bad command line.
 */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static const char usage[] =
    "usage: spindle-bench --local N [options]\n"
    "       spindle-bench --id I --members HOST:PORT,HOST:PORT,... [options]\n"
    "       spindle-bench --config FILE --id I [options]\n"
    "       spindle-bench --join HOST:PORT --listen HOST:PORT --tolerate-failures [options]\n"
    "\n"
    "Members and placement:\n"
    "  --local N              fork N members on this host (shm bootstrap in a temp dir)\n"
    "  --id I                 run only member I (0-based) of --members or of --config\n"
    "  --members LIST         host:port of every member, in member order (TCP bootstrap)\n"
    "  --control-port P       with --local: TCP bootstrap on 127.0.0.1:P, P+1, ... instead\n"
    "                         of a temp dir, so that other processes can --join the group\n"
    "  --join HOST:PORT       join the running group that has a member there (needs\n"
    "                         --tolerate-failures, --listen and the group's workload flags);\n"
    "                         the joiner receives, sends nothing, and exits 0 once every\n"
    "                         sender's messages of its views are in, continuing exactly from\n"
    "                         the delivery counts handed over by state transfer\n"
    "  --listen HOST:PORT     the joiner's own bootstrap address (later joiners reach it)\n"
    "  --leave-after MESSAGES with --join: once the joiner has delivered MESSAGES messages\n"
    "                         (counted from its join, all subgroups) it leaves the group\n"
    "                         (spindle_group_leave), writes its .end file saying \"left\"\n"
    "                         and exits 0; the others go on without it\n"
    "  --config FILE          INI file (docs/CONFIG.md): [member.N] host/port of every member\n"
    "                         (ids 0..N-1, fixed ports), [group] transport, provider,\n"
    "                         failure_timeout_ms, [subgroup.N] members, senders, window_size,\n"
    "                         max_payload, mode (all subgroups active), [bench] messages,\n"
    "                         message_size, duration_ms; the flags below override the file\n"
    "Workload:\n"
    "  --senders all|half|one which members send (default all; half = first N/2)\n"
    "  --msg-size BYTES       message size, 1..1048576 (default 1024)\n"
    "  --window SLOTS         ring slots per sender (default 100)\n"
    "  --messages PER_SENDER  messages each sender sends in each active subgroup (default 10000)\n"
    "  --subgroups N          subgroups, each holding every member (default 1)\n"
    "  --active-subgroups K   subgroups 0..K-1 carry traffic (default 1)\n"
    "  --delay-us US          busy-wait US microseconds after each send of a delayed sender\n"
    "  --delayed-senders K    the first K senders are delayed (default 1 when --delay-us)\n"
    "  --mode atomic|unordered  delivery guarantee (default atomic)\n"
    "  --rate MSGS_PER_S      pace each sender to at most this many messages per second\n"
    "                         (sleeping, not spinning; default: as fast as it can)\n"
    "  --duration SECONDS     a timed run instead of --messages: senders send for the\n"
    "                         warm-up plus SECONDS (decimals allowed), and the figures count\n"
    "                         what each member delivered after the warm-up; a progress line\n"
    "                         per second goes to stderr ([bench] duration_ms in --config)\n"
    "  --warmup SECONDS       the first part of a --duration run, left out of the figures\n"
    "                         (default 1)\n"
    "Transport:\n"
    "  --transport shm|fabric|verbs  (default shm)\n"
    "  --provider NAME        libfabric provider for --transport fabric (tcp, sockets, ...)\n"
    "Optimizations (all on by default):\n"
    "  --no-batching          one write per message, per ack, one upcall per delivery\n"
    "  --no-nulls             disable null-sends\n"
    "  --no-early-unlock      post writes while holding the predicate lock\n"
    "  --baseline             all three of the above\n"
    "  --own-inline           unordered: a sender delivers its own messages in its send call\n"
    "Output:\n"
    "  --trace DIR            write DIR/member-<id>.trace, one line per delivered message:\n"
    "                         <view> <subgroup> <sender_id> <sender_index> <length> <crc32c>\n"
    "                         (a joiner: DIR/member-<id>.<V>.trace, V the view it joined in,\n"
    "                         its incarnation: an id may be held by several processes over\n"
    "                         a run; until it knows its id it writes DIR/joining-<pid>.trace)\n"
    "  --latency-out DIR      write DIR/member-<id>.latency: the member's latency samples\n"
    "                         (send to own delivery, nanoseconds, one a line, sorted; a\n"
    "                         --duration run keeps at most 4194304, a uniform sample)\n"
    "  --tolerate-failures    keep running through view changes (member failures); the\n"
    "                         trace names view ids and the app index (first 8 payload\n"
    "                         bytes, --msg-size >= 8); --local writes DIR/member-<id>.pid,\n"
    "                         a joiner DIR/member-<id>.<V>.pid; a member that finishes\n"
    "                         or leaves writes DIR/member-<id>[.<V>].end: \"view <final\n"
    "                         view> members <id,id,...>\", then \" joined <V>\" for a\n"
    "                         joiner and \" left\" for one that left (--leave-after; its\n"
    "                         final view is the last one it was in)\n"
    "  --stop-file FILE       with --tolerate-failures: a harness ends the stream when its\n"
    "                         joins or kills are done (give every process of the group the\n"
    "                         same FILE): it writes \"hold\\n\" there, each sender writes\n"
    "                         the messages it has sent to FILE.<id> and pauses; then the\n"
    "                         harness writes \"COUNT\\n\" (at least every count reported)\n"
    "                         and the stream ends at COUNT per sender (at most --messages)\n"
    "  --failure-timeout-ms MS  a member silent this long is suspected and removed\n"
    "                         (default 5000; also for --local; overrides --config)\n"
    "  --slow-member-ms MS    a member that holds a sender's window full this long is\n"
    "                         removed (default 0: senders wait for it; overrides --config)\n"
    "  --tie-breaker          half of a view holding its leader goes on (two members\n"
    "                         survive the non-leader's failure; every member needs it)\n"
    "  --poll-cpus LIST       dedicated-CPU polling: member i's predicate thread is pinned\n"
    "                         to the i-th CPU of LIST (comma-separated; with --id, that\n"
    "                         member's) and never sleeps (default: adaptive polling)\n"
    "  --app-cpus LIST        pin member i's application thread (the one that sends and\n"
    "                         waits for deliveries) to the i-th CPU of LIST, e.g. with\n"
    "                         --poll-cpus 0,1 on two CPUs --app-cpus 1,0 commits on the\n"
    "                         peer's polling CPU (default: not pinned)\n"
    "  --realtime PRIO        the group's threads (the predicate thread among them) run\n"
    "                         SCHED_FIFO at PRIO: each member's application thread takes\n"
    "                         the policy for spindle_group_create, whose threads inherit\n"
    "                         it, and drops it after (needs root, CAP_SYS_NICE or\n"
    "                         RLIMIT_RTPRIO; default: normal scheduling)\n"
    "  --name NAME            this member's persistent name (with --local: NAME-<id>;\n"
    "                         default its control address, or member-<id>@<host>)\n"
    "  --incarnation N        this member's incarnation, larger at each restart under one\n"
    "                         name (default: the wall clock at start, in nanoseconds)\n"
    "  --key-file FILE        group key (spindle-keygen FILE): authenticate and encrypt\n"
    "                         the TCP control channel (every member and joiner needs the\n"
    "                         same; overrides --config's [group] key_file)\n"
    "  --accept-key-file FILE also accept connections proving this key (rotation:\n"
    "                         docs/SECURITY.md; overrides [group] accept_key_file)\n"
    "  --log-dir DIR          log every subgroup (docs/LOGS.md): each member appends what\n"
    "                         it delivers to its log in DIR (with --local: DIR/member-<id>,\n"
    "                         DIR created when missing); adds the log's figures to the\n"
    "                         report (overrides [group] log_dir; atomic subgroups only);\n"
    "                         run again over logs of members that were stopped, they\n"
    "                         restart from them and go on where the recovered log ends\n"
    "  --dispatch             dispatch mode (docs/DISPATCH.md): deliveries are queued and\n"
    "                         run by a thread of the bench's own in spindle_dispatch\n"
    "  --timeout SECONDS      give up when deliveries take longer (default 120), or when\n"
    "                         members are missing for longer (at most 60)\n"
    "  --help                 this text\n";

static int bad(const char *fmt, const char *value)
{
    fprintf(stderr, "spindle-bench: ");
    fprintf(stderr, fmt, value);
    fprintf(stderr, "\n(see spindle-bench --help)\n");
    return 2;
}

/* --poll-cpus or --app-cpus LIST (flag): CPU numbers, comma-separated, one
 * per member at most, into cpus and *count. */
static int parse_cpus(const char *text, const char *flag, uint32_t *cpus, uint32_t *count)
{
    char list[256];
    if (text == NULL) /* getopt gives every required_argument one */
        text = "";
    size_t length = strlen(text);
    bool ok = length > 0 && length < sizeof list && text[0] != ',' && text[length - 1] != ',' &&
              strstr(text, ",,") == NULL;
    snprintf(list, sizeof list, "%s", text);
    *count = 0;
    char *save = NULL;
    for (char *item = strtok_r(list, ",", &save); ok && item != NULL;
         item = strtok_r(NULL, ",", &save)) {
        char *end = NULL;
        unsigned long cpu = strtoul(item, &end, 10);
        ok = end != item && *end == '\0' && cpu < CPU_SETSIZE && *count < SPINDLE_MAX_MEMBERS;
        if (ok)
            cpus[(*count)++] = (uint32_t)cpu;
    }
    if (ok && *count > 0)
        return 0;
    fprintf(stderr,
            "spindle-bench: %s '%s': give CPU numbers below %d separated by commas, at "
            "most %u\n",
            flag, text, CPU_SETSIZE, (unsigned)SPINDLE_MAX_MEMBERS);
    return -1;
}

static int parse_u64(const char *text, const char *flag, uint64_t min, uint64_t max, uint64_t *out)
{
    if (text == NULL) { /* getopt_long gives every required_argument option one */
        fprintf(stderr, "spindle-bench: %s needs a value\n", flag);
        return -1;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || v < min || v > max) {
        fprintf(stderr, "spindle-bench: %s '%s' must be an integer in %llu..%llu\n", flag, text,
                (unsigned long long)min, (unsigned long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

/* SECONDS as a decimal number (millisecond resolution) in min_s..max_s,
 * into nanoseconds; -1 after printing what was wrong. */
static int parse_seconds(const char *text, const char *flag, double min_s, double max_s,
                         uint64_t *out_ns)
{
    char *end;
    errno = 0;
    double v = text != NULL ? strtod(text, &end) : NAN;
    if (text == NULL || errno != 0 || end == text || *end != '\0' || !isfinite(v) || v < min_s ||
        v > max_s) {
        fprintf(stderr, "spindle-bench: %s '%s' must be a number of seconds in %g..%g\n", flag,
                text != NULL ? text : "", min_s, max_s);
        return -1;
    }
    *out_ns = (uint64_t)llround(v * 1000.0) * 1000000ull;
    return 0;
}

enum {
    OPT_LOCAL = 256,
    OPT_ID,
    OPT_MEMBERS,
    OPT_SENDERS,
    OPT_MSG_SIZE,
    OPT_WINDOW,
    OPT_MESSAGES,
    OPT_SUBGROUPS,
    OPT_ACTIVE,
    OPT_DELAY,
    OPT_DELAYED,
    OPT_MODE,
    OPT_TRANSPORT,
    OPT_PROVIDER,
    OPT_NO_BATCHING,
    OPT_NO_NULLS,
    OPT_OWN_INLINE,
    OPT_NO_EARLY,
    OPT_BASELINE,
    OPT_TRACE,
    OPT_STOP_FILE,
    OPT_RAW,
    OPT_TOLERATE,
    OPT_TIMEOUT,
    OPT_CONFIG,
    OPT_CONTROL_PORT,
    OPT_RATE,
    OPT_FAILURE_TIMEOUT,
    OPT_SLOW_MEMBER,
    OPT_TIE_BREAKER,
    OPT_DISPATCH,
    OPT_POLL_CPUS,
    OPT_APP_CPUS,
    OPT_REALTIME,
    OPT_KEY_FILE,
    OPT_ACCEPT_KEY_FILE,
    OPT_LOG_DIR,
    OPT_JOIN,
    OPT_LISTEN,
    OPT_LEAVE_AFTER,
    OPT_NAME,
    OPT_INCARNATION,
    OPT_DURATION,
    OPT_WARMUP,
    OPT_LATENCY_OUT,
    OPT_HELP
};

static const struct option long_options[] = {
    {"local", required_argument, 0, OPT_LOCAL},
    {"id", required_argument, 0, OPT_ID},
    {"members", required_argument, 0, OPT_MEMBERS},
    {"senders", required_argument, 0, OPT_SENDERS},
    {"msg-size", required_argument, 0, OPT_MSG_SIZE},
    {"window", required_argument, 0, OPT_WINDOW},
    {"messages", required_argument, 0, OPT_MESSAGES},
    {"subgroups", required_argument, 0, OPT_SUBGROUPS},
    {"active-subgroups", required_argument, 0, OPT_ACTIVE},
    {"delay-us", required_argument, 0, OPT_DELAY},
    {"delayed-senders", required_argument, 0, OPT_DELAYED},
    {"mode", required_argument, 0, OPT_MODE},
    {"transport", required_argument, 0, OPT_TRANSPORT},
    {"provider", required_argument, 0, OPT_PROVIDER},
    {"no-batching", no_argument, 0, OPT_NO_BATCHING},
    {"no-nulls", no_argument, 0, OPT_NO_NULLS},
    {"own-inline", no_argument, 0, OPT_OWN_INLINE},
    {"no-early-unlock", no_argument, 0, OPT_NO_EARLY},
    {"baseline", no_argument, 0, OPT_BASELINE},
    {"trace", required_argument, 0, OPT_TRACE},
    {"stop-file", required_argument, 0, OPT_STOP_FILE},
    {"latency-out", required_argument, 0, OPT_LATENCY_OUT},
    {"raw", no_argument, 0, OPT_RAW}, /* moved to spindle-rawbench: refused, saying so */
    {"tolerate-failures", no_argument, 0, OPT_TOLERATE},
    {"timeout", required_argument, 0, OPT_TIMEOUT},
    {"config", required_argument, 0, OPT_CONFIG},
    {"control-port", required_argument, 0, OPT_CONTROL_PORT},
    {"rate", required_argument, 0, OPT_RATE},
    {"failure-timeout-ms", required_argument, 0, OPT_FAILURE_TIMEOUT},
    {"slow-member-ms", required_argument, 0, OPT_SLOW_MEMBER},
    {"tie-breaker", no_argument, 0, OPT_TIE_BREAKER},
    {"dispatch", no_argument, 0, OPT_DISPATCH},
    {"poll-cpus", required_argument, 0, OPT_POLL_CPUS},
    {"app-cpus", required_argument, 0, OPT_APP_CPUS},
    {"realtime", required_argument, 0, OPT_REALTIME},
    {"key-file", required_argument, 0, OPT_KEY_FILE},
    {"accept-key-file", required_argument, 0, OPT_ACCEPT_KEY_FILE},
    {"log-dir", required_argument, 0, OPT_LOG_DIR},
    {"join", required_argument, 0, OPT_JOIN},
    {"listen", required_argument, 0, OPT_LISTEN},
    {"leave-after", required_argument, 0, OPT_LEAVE_AFTER},
    {"name", required_argument, 0, OPT_NAME},
    {"incarnation", required_argument, 0, OPT_INCARNATION},
    {"duration", required_argument, 0, OPT_DURATION},
    {"warmup", required_argument, 0, OPT_WARMUP},
    {"help", no_argument, 0, OPT_HELP},
    {0, 0, 0, 0},
};

static uint32_t count_members(const char *list)
{
    uint32_t n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    return n;
}

/* Flags whose absence means something (parse_number notes them). */
enum { GIVEN_DELAYED = 1, GIVEN_DURATION = 2, GIVEN_WARMUP = 4 };

/* Applies one numeric option; -1 on a bad value. */
static int parse_number(int opt, const char *arg, struct bench_config *c, unsigned *given)
{
    uint64_t v;
    switch (opt) {
    case OPT_LOCAL:
        if (parse_u64(arg, "--local", 1, SPINDLE_MAX_MEMBERS, &v) < 0)
            return -1;
        c->local = (uint32_t)v;
        return 0;
    case OPT_ID:
        if (parse_u64(arg, "--id", 0, SPINDLE_MAX_MEMBERS - 1, &v) < 0)
            return -1;
        c->id = (int)v;
        return 0;
    case OPT_MSG_SIZE:
        if (parse_u64(arg, "--msg-size", 1, SPINDLE_MAX_PAYLOAD, &v) < 0)
            return -1;
        c->msg_size = (uint32_t)v;
        return 0;
    case OPT_WINDOW:
        if (parse_u64(arg, "--window", 1, SPINDLE_MAX_WINDOW, &v) < 0)
            return -1;
        c->window = (uint32_t)v;
        return 0;
    case OPT_MESSAGES:
        if (parse_u64(arg, "--messages", 1, 1ull << 32, &v) < 0)
            return -1;
        c->messages = v;
        c->messages_given = true;
        return 0;
    case OPT_SUBGROUPS:
        if (parse_u64(arg, "--subgroups", 1, 1024, &v) < 0)
            return -1;
        c->subgroups = (uint32_t)v;
        return 0;
    case OPT_ACTIVE:
        if (parse_u64(arg, "--active-subgroups", 1, 1024, &v) < 0)
            return -1;
        c->active_subgroups = (uint32_t)v;
        return 0;
    case OPT_DELAY:
        if (parse_u64(arg, "--delay-us", 0, 10000000, &v) < 0)
            return -1;
        c->delay_us = (uint32_t)v;
        return 0;
    case OPT_DELAYED:
        if (parse_u64(arg, "--delayed-senders", 0, SPINDLE_MAX_MEMBERS, &v) < 0)
            return -1;
        c->delayed_senders = (uint32_t)v;
        *given |= GIVEN_DELAYED;
        return 0;
    case OPT_TIMEOUT:
        if (parse_u64(arg, "--timeout", 1, 86400, &v) < 0)
            return -1;
        c->timeout_s = (uint32_t)v;
        return 0;
    case OPT_FAILURE_TIMEOUT:
        if (parse_u64(arg, "--failure-timeout-ms", 1, 3600000, &v) < 0)
            return -1;
        c->failure_timeout_ms = (int)v;
        return 0;
    case OPT_DISPATCH:
        c->dispatch = true;
        return 0;
    case OPT_TIE_BREAKER:
        c->tie_breaker = true;
        return 0;
    case OPT_POLL_CPUS:
        return parse_cpus(arg, "--poll-cpus", c->poll_cpus, &c->num_poll_cpus);
    case OPT_APP_CPUS:
        return parse_cpus(arg, "--app-cpus", c->app_cpus, &c->num_app_cpus);
    case OPT_REALTIME:
        if (parse_u64(arg, "--realtime", 1, 99, &v) < 0)
            return -1;
        c->realtime_priority = (int)v;
        return 0;
    case OPT_INCARNATION:
        if (parse_u64(arg, "--incarnation", 1, UINT64_MAX, &v) < 0)
            return -1;
        c->incarnation = v;
        return 0;
    case OPT_KEY_FILE:
        c->key_file = arg;
        return 0;
    case OPT_ACCEPT_KEY_FILE:
        c->accept_key_file = arg;
        return 0;
    case OPT_LOG_DIR:
        c->log_dir = arg;
        return 0;
    case OPT_LATENCY_OUT:
        c->latency_out = arg;
        return 0;
    case OPT_SLOW_MEMBER:
        if (parse_u64(arg, "--slow-member-ms", 0, 3600000, &v) < 0)
            return -1;
        c->slow_member_ms = (int)v;
        return 0;
    case OPT_RATE:
        if (parse_u64(arg, "--rate", 1, 100000000, &v) < 0)
            return -1;
        c->rate = (uint32_t)v;
        return 0;
    case OPT_CONTROL_PORT:
        if (parse_u64(arg, "--control-port", 1, 65535, &v) < 0)
            return -1;
        c->control_port = (uint32_t)v;
        return 0;
    case OPT_DURATION:
        if (parse_seconds(arg, "--duration", 0.001, 86400, &c->duration_ns) < 0)
            return -1;
        *given |= GIVEN_DURATION;
        return 0;
    case OPT_WARMUP:
        if (parse_seconds(arg, "--warmup", 0, 3600, &c->warmup_ns) < 0)
            return -1;
        *given |= GIVEN_WARMUP;
        return 0;
    case OPT_LEAVE_AFTER:
        if (parse_u64(arg, "--leave-after", 1, UINT64_MAX >> 1, &v) < 0)
            return -1;
        c->leave_after = v;
        return 0;
    default:
        return -1;
    }
}

static int parse_word(int opt, const char *arg, struct bench_config *c)
{
    if (arg == NULL) /* getopt_long gives every required_argument option one */
        return bad("%s--senders, --mode, --transport and --name need a value", "");
    switch (opt) {
    case OPT_NAME:
        /* The library checks the characters; the length leaves room for
         * --local's "-<id>". */
        if (strlen(arg) == 0 || strlen(arg) > SPINDLE_MEMBER_NAME_MAX - 4)
            return bad("--name '%s' must have 1 to 60 characters", arg);
        c->name = arg;
        return 0;
    case OPT_SENDERS:
        if (strcmp(arg, "all") == 0)
            c->senders = SENDERS_ALL;
        else if (strcmp(arg, "half") == 0)
            c->senders = SENDERS_HALF;
        else if (strcmp(arg, "one") == 0)
            c->senders = SENDERS_ONE;
        else
            return bad("--senders '%s' must be all, half or one", arg);
        return 0;
    case OPT_MODE:
        if (strcmp(arg, "atomic") == 0)
            c->mode = SPINDLE_MODE_ATOMIC;
        else if (strcmp(arg, "unordered") == 0)
            c->mode = SPINDLE_MODE_UNORDERED;
        else
            return bad("--mode '%s' must be atomic or unordered", arg);
        return 0;
    case OPT_TRANSPORT:
        if (strcmp(arg, "shm") != 0 && strcmp(arg, "fabric") != 0 && strcmp(arg, "verbs") != 0)
            return bad("--transport '%s' must be shm, fabric or verbs", arg);
        c->transport = arg;
        return 0;
    default:
        return 2;
    }
}

/* --duration and --warmup with each other, with --messages and with the
 * file's [bench] duration_ms (already in duration_ns): the command line
 * wins over the file. */
static int check_timing(struct bench_config *c, unsigned given)
{
    if ((given & GIVEN_DURATION) && c->messages_given)
        return bad("%s--duration and --messages cannot be combined: a run is either timed or "
                   "counted",
                   "");
    if (c->messages_given)
        c->duration_ns = 0; /* over the file's duration_ms */
    if ((given & GIVEN_WARMUP) && c->duration_ns == 0)
        return bad("%s--warmup goes with --duration (or [bench] duration_ms): a counted run has "
                   "no warm-up",
                   "");
    if (c->duration_ns > 0 && !(given & GIVEN_WARMUP))
        c->warmup_ns = 1000000000ull;
    if (c->duration_ns > 0 && c->tolerate_failures)
        return bad("%s--duration cannot be combined with --tolerate-failures or --join: those "
                   "runs end when every sender's --messages are in",
                   "");
    return 0;
}

static int check_config(struct bench_config *c, unsigned given)
{
    if (check_timing(c, given) != 0)
        return 2;
    if (c->stop_file != NULL && !c->tolerate_failures)
        return bad("%s--stop-file needs --tolerate-failures (the members agree on the senders' "
                   "counts)",
                   "");
    if (c->join != NULL) {
        if (c->local > 0 || c->id >= 0 || c->members != NULL)
            return bad("%s--join cannot be combined with --local, --id or --members", "");
        if (c->listen == NULL)
            return bad("%s--join needs --listen HOST:PORT (the joiner's own address)", "");
        if (!c->tolerate_failures)
            return bad("%s--join needs --tolerate-failures", "");
        if (c->msg_size < 8)
            return bad("%s--join needs --msg-size >= 8", "");
        return 0;
    }
    if (c->leave_after > 0)
        return bad("%s--leave-after goes with --join (a joiner leaves; the members stay)", "");
    if (c->control_port > 0 && c->local == 0)
        return bad("%s--control-port goes with --local", "");
    if (c->control_port > 0 && c->control_port + c->local > 65536)
        return bad("%s--control-port leaves no room for the members' ports", "");
    if (c->local == 0 && (c->id < 0 || c->members == NULL))
        return bad("%sgive --local N, or --id I with --members LIST", "");
    if (c->local > 0 && (c->id >= 0 || c->members != NULL))
        return bad("%s--local cannot be combined with --id/--members", "");
    if (c->members != NULL && (uint32_t)c->id >= count_members(c->members))
        return bad("--id is outside the --members list '%s'", c->members);
    if (c->active_subgroups > c->subgroups)
        return bad("%s--active-subgroups exceeds --subgroups", "");
    if (!(given & GIVEN_DELAYED))
        c->delayed_senders = c->delay_us > 0 ? 1 : 0;
    uint32_t members = c->local > 0 ? c->local : count_members(c->members);
    if (c->delayed_senders > bench_num_senders(c, members))
        return bad("%s--delayed-senders exceeds the number of senders", "");
    if (c->tolerate_failures && c->msg_size < 8)
        return bad("%s--tolerate-failures needs --msg-size >= 8: the first 8 payload bytes "
                   "carry the app index",
                   "");
    return 0;
}

/* --config FILE gives defaults that the other flags override: found first. */
static const char *find_config(int argc, char **argv)
{
    const char *path = NULL;
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", long_options, NULL)) != -1)
        if (opt == OPT_CONFIG)
            path = optarg;
    optind = 0; /* rescan from the start */
    return path;
}

static int parse_args(int argc, char **argv, struct bench_config *c)
{
    memset(c, 0, sizeof *c);
    c->id = -1;
    c->senders = SENDERS_ALL;
    c->msg_size = 1024;
    c->window = 100;
    c->messages = 10000;
    c->subgroups = 1;
    c->active_subgroups = 1;
    c->mode = SPINDLE_MODE_ATOMIC;
    c->transport = "shm";
    c->batching = c->null_sends = c->early_unlock = true;
    c->timeout_s = 120;
    const char *config_path = find_config(argc, argv);
    if (config_path != NULL && bench_config_load(c, config_path) != 0)
        return 2;
    unsigned given = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "", long_options, NULL)) != -1) {
        switch (opt) {
        case OPT_HELP:
            fputs(usage, stdout);
            exit(0);
        case OPT_MEMBERS:
            c->members = optarg;
            break;
        case OPT_JOIN:
            c->join = optarg;
            break;
        case OPT_LISTEN:
            c->listen = optarg;
            break;
        case OPT_PROVIDER:
            c->provider = optarg;
            break;
        case OPT_TRACE:
            c->trace_dir = optarg;
            break;
        case OPT_STOP_FILE:
            c->stop_file = optarg;
            break;
        case OPT_RAW:
            return bad("%s--raw moved to its own tool: spindle-rawbench --local 2 [--transport "
                       "...] measures the raw one-sided write reference",
                       "");
        case OPT_TOLERATE:
            c->tolerate_failures = true;
            break;
        case OPT_NO_BATCHING:
            c->batching = false;
            break;
        case OPT_NO_NULLS:
            c->null_sends = false;
            break;
        case OPT_OWN_INLINE:
            c->own_inline = true;
            break;
        case OPT_NO_EARLY:
            c->early_unlock = false;
            break;
        case OPT_BASELINE:
            c->batching = c->null_sends = c->early_unlock = false;
            break;
        case OPT_CONFIG:
            break;
        case OPT_SENDERS:
        case OPT_MODE:
        case OPT_TRANSPORT:
        case OPT_NAME:
            if (parse_word(opt, optarg, c) != 0)
                return 2;
            c->mode_given |= opt == OPT_MODE;
            break;
        case '?':
            return bad("unknown or incomplete option '%s'", argv[optind - 1]);
        default:
            if (parse_number(opt, optarg, c, &given) < 0)
                return 2;
        }
    }
    if (optind < argc)
        return bad("unexpected argument '%s'", argv[optind]);
    if (c->file != NULL && bench_config_finish(c) != 0)
        return 2;
    return check_config(c, given);
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}

/* Waits for every child; kills the rest once the deadline passes. With
 * killed (--tolerate-failures), a member killed with SIGKILL or stopped
 * from outside (SIGSTOP) is the experiment: it is marked in killed, and a
 * stopped one is killed once every other member is done. */
static int reap_children(const pid_t *pids, uint32_t n, uint64_t deadline_ns, bool *killed)
{
    int failed = 0;
    uint32_t left = n, stopped = 0;
    int done[SPINDLE_MAX_MEMBERS] = {0};
    bool is_stopped[SPINDLE_MAX_MEMBERS] = {false};
    while (left > 0) {
        for (uint32_t i = 0; i < n; i++) {
            int status;
            if (done[i] || waitpid(pids[i], &status,
                                   killed != NULL ? WNOHANG | WUNTRACED : WNOHANG) != pids[i])
                continue;
            if (killed != NULL && WIFSTOPPED(status)) {
                if (!is_stopped[i]) {
                    printf("member %u stopped by signal %d\n", i, WSTOPSIG(status));
                    is_stopped[i] = true;
                    killed[i] = true;
                    stopped++;
                }
                continue;
            }
            done[i] = 1;
            left--;
            if (is_stopped[i]) {
                is_stopped[i] = false; /* reaped after the kill below */
                stopped--;
            } else if (killed != NULL && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
                /* --tolerate-failures: a killed member is the experiment. */
                printf("member %u killed by signal %d\n", i, WTERMSIG(status));
                killed[i] = true;
            } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "spindle-bench: member %u %s %d\n", i,
                        WIFEXITED(status) ? "exited with status" : "died of signal",
                        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
                failed = 1;
            }
        }
        /* Only stopped members remain: the others are done with them. */
        if (left > 0 && left == stopped) {
            for (uint32_t i = 0; i < n; i++)
                if (is_stopped[i])
                    kill(pids[i], SIGKILL);
        }
        if (left > 0 && bench_now_ns() > deadline_ns) {
            for (uint32_t i = 0; i < n; i++)
                if (!done[i])
                    kill(pids[i], SIGKILL);
            fprintf(stderr, "spindle-bench: members did not finish in time; killed\n");
            deadline_ns = UINT64_MAX;
            failed = 1;
        }
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    return failed;
}

/* --tolerate-failures --trace DIR: DIR/member-<id>.pid lets a harness kill
 * a chosen member. */
static int write_pid_file(const struct bench_config *config, uint32_t id, pid_t pid)
{
    if (config->trace_dir == NULL)
        return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/member-%u.pid", config->trace_dir, id);
    FILE *file = fopen(path, "w");
    if (file == NULL || fprintf(file, "%d\n", (int)pid) < 0 || fclose(file) != 0) {
        perror("spindle-bench: writing the pid file");
        return 1;
    }
    return 0;
}

/* Forks the n (config->local, at least 1) members, collects their results
 * and reports them; the bootstrap (directory or member list) is set up by
 * run_local. */
static int run_local_members(const struct bench_config *config, uint32_t n)
{
    pid_t pids[SPINDLE_MAX_MEMBERS];
    int pipes[SPINDLE_MAX_MEMBERS][2];
    fflush(NULL);
    for (uint32_t i = 0; i < n; i++) {
        if (pipe(pipes[i]) < 0 || (pids[i] = fork()) < 0) {
            perror("spindle-bench: fork");
            return 1;
        }
        if (pids[i] == 0) {
            struct bench_result result;
            bench_run_member(config, i, n, &result);
            if (!result.ok) /* at once: the others may wait for it until their timeout */
                fprintf(stderr, "spindle-bench: %s\n", result.error);
            ssize_t w = write(pipes[i][1], &result, sizeof result);
            _exit(w == (ssize_t)sizeof result && result.ok ? 0 : 1);
        }
        close(pipes[i][1]);
        if (config->tolerate_failures && write_pid_file(config, i, pids[i]) != 0)
            return 1;
    }
    /* Results are smaller than a pipe buffer: children never block. */
    uint64_t deadline = bench_now_ns() + ((uint64_t)config->timeout_s + 120) * 1000000000ull +
                        config->warmup_ns + config->duration_ns;
    bool killed[SPINDLE_MAX_MEMBERS] = {false};
    int failed = reap_children(pids, n, deadline, config->tolerate_failures ? killed : NULL);
    struct bench_result *results = calloc(n, sizeof *results);
    uint32_t count = 0;
    for (uint32_t i = 0; i < n && results != NULL; i++) {
        if (killed[i]) {
            close(pipes[i][0]);
            continue;
        }
        uint32_t at = count++;
        ssize_t r = read(pipes[i][0], &results[at], sizeof results[at]);
        if (r != (ssize_t)sizeof results[at]) {
            results[at].ok = 0;
            fprintf(stderr, "spindle-bench: member %u reported nothing\n", i);
        }
        close(pipes[i][0]);
        if (!results[at].ok)
            failed = 1; /* the member printed why */
    }
    if (!failed && results != NULL && count > 0)
        bench_report(config, n, results, count);
    free(results);
    return failed ? 1 : 0;
}

static int run_local(struct bench_config *config)
{
    char dir[] = "/tmp/spindle-bench-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("spindle-bench: mkdtemp");
        return 1;
    }
    uint32_t n = config->local;
    char members[SPINDLE_MAX_MEMBERS * 24] = "";
    if (config->control_port > 0) {
        /* TCP bootstrap on loopback: the group then takes joiners. */
        for (uint32_t i = 0; i < n; i++)
            snprintf(members + strlen(members), sizeof members - strlen(members), "%s127.0.0.1:%u",
                     i > 0 ? "," : "", config->control_port + i);
        config->members = members;
    }
    config->bootstrap_dir = dir;
    snprintf(config->group_name, sizeof config->group_name, "bench-%d", (int)getpid());
    int rc = run_local_members(config, n);
    nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    /* Both point into this frame: the caller must not see them. */
    config->bootstrap_dir = NULL;
    if (config->members == members)
        config->members = NULL;
    return rc;
}

static int run_member(const struct bench_config *config)
{
    uint32_t members = config->join != NULL ? 0 : count_members(config->members);
    struct bench_result result;
    bench_run_member(config, (uint32_t)config->id, members, &result);
    if (!result.ok) {
        fprintf(stderr, "spindle-bench: %s\n", result.error);
        return 1;
    }
    bench_report(config, members, &result, 1);
    return 0;
}

int main(int argc, char **argv)
{
    struct bench_config config;
    int rc = parse_args(argc, argv, &config);
    if (rc == 0) {
        signal(SIGPIPE, SIG_IGN);
        rc = config.local > 0 ? run_local(&config) : run_member(&config);
    }
    bench_config_release(&config);
    return rc;
}
