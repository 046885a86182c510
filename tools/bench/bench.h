/*
 * spindle-bench internals: the parsed command line, one member's result
 * (sent from a forked member to the launcher through a pipe as one write),
 * the entry points (a group member, the report printer) and small helpers.
 * spindle-bench uses the public API only. Single-threaded apart from the
 * library's own threads.
 */
#ifndef SPINDLE_BENCH_H
#define SPINDLE_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <spindle/spindle.h>

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Busy-waits ns nanoseconds (a delayed sender's work between sends). */
static inline void bench_spin_ns(uint64_t ns)
{
    uint64_t end = bench_now_ns() + ns;
    while (bench_now_ns() < end)
        __builtin_ia32_pause();
}

/* SENDERS_FILE: each subgroup's senders from --config (all members without one). */
enum bench_senders { SENDERS_ALL, SENDERS_HALF, SENDERS_ONE, SENDERS_FILE };

struct bench_config {
    uint32_t local;      /* --local N (0: single member) */
    int id;              /* --id I (single member) */
    const char *members; /* --members host:port,... */
    const char *bootstrap_dir;
    enum bench_senders senders;
    uint32_t msg_size;
    uint32_t window;
    uint64_t messages; /* per sender per active subgroup */
    uint32_t subgroups;
    uint32_t active_subgroups;
    uint32_t delay_us;
    uint32_t delayed_senders;
    enum spindle_delivery_mode mode;
    const char *transport;
    const char *provider;
    const char *device; /* verbs device from --config ([group] device) */
    bool batching, null_sends, early_unlock;
    bool own_inline; /* --own-inline: spindle_group_options.own_inline */
    const char *trace_dir;
    const char *latency_out; /* --latency-out DIR: each member's latency samples there */
    bool tolerate_failures;  /* --tolerate-failures: survive view changes */
    const char *stop_file;   /* --stop-file: the harness ends the stream early */
    uint32_t timeout_s;
    char group_name[64];
    /* --config FILE: the loaded file (members, subgroups, [bench] defaults) */
    const char *config_path;
    struct spindle_config *file;
    struct spindle_group_setup setup;        /* --members built from the file */
    int failure_timeout_ms;                  /* 0: library default */
    int slow_member_ms;                      /* 0: back-pressure only */
    bool tie_breaker;                        /* half of a view with its leader goes on */
    uint32_t poll_cpus[SPINDLE_MAX_MEMBERS]; /* --poll-cpus: member i polls on poll_cpus[i] */
    uint32_t num_poll_cpus;                  /* 0: adaptive polling */
    uint32_t app_cpus[SPINDLE_MAX_MEMBERS];  /* --app-cpus: member i's sending and waiting
                                              * thread runs on app_cpus[i] */
    uint32_t num_app_cpus;                   /* 0: wherever the scheduler puts it */
    int realtime_priority;                   /* --realtime: SCHED_FIFO priority of the
                                              * group's threads (0: normal scheduling) */
    const char *key_file;                    /* --key-file / [group] key_file: the group key */
    const char *log_dir;         /* --log-dir / [group] log_dir: log every subgroup there */
    bool dispatch;               /* --dispatch / [group] dispatch: deliveries on a thread of
                                  * the bench's own, through spindle_dispatch */
    const char *accept_key_file; /* --accept-key-file: a second key accepted (rotation) */
    const char *name;            /* --name: member_name (--local: NAME-<id>); NULL: default */
    uint64_t incarnation;        /* --incarnation (0: the library's default) */
    bool mode_given;             /* --mode overrides the file's subgroup modes */
    uint32_t control_port;       /* --local --control-port: TCP bootstrap from this port */
    uint32_t rate;               /* --rate: messages per second per sender (0: unpaced) */
    const char *join;            /* --join HOST:PORT: join a running group */
    const char *listen;          /* --listen HOST:PORT: the joiner's own address */
    uint64_t leave_after; /* --leave-after: a joiner leaves after this many deliveries (0: stays) */
    uint64_t duration_ns; /* --duration / [bench] duration_ms: send this long (0: --messages) */
    uint64_t warmup_ns;   /* --warmup: the first part of a --duration run, not measured */
    bool messages_given;  /* --messages on the command line */
};

struct bench_result {
    int ok;
    int member;
    char error[256];
    uint64_t delivered;       /* in the measured interval (--duration: after the warm-up) */
    uint64_t delivered_total; /* over the whole run */
    uint64_t expected;
    double seconds; /* of the measured interval */
    /* The views this member was in (a joiner's differ from the launch). */
    uint32_t view_members_min, view_members_max, senders;
    uint64_t first_view, last_view;
    uint64_t messages_sent;
    uint64_t writes_posted;
    uint64_t doorbells;
    uint64_t nulls_sent;
    uint64_t post_ns;
    uint64_t pinned_bytes; /* the transport's pinned_bytes at the end */
    double p50_us, p99_us;
    int has_latency;
    uint64_t send_hist[SPINDLE_HIST_BUCKETS];
    uint64_t receive_hist[SPINDLE_HIST_BUCKETS];
    uint64_t delivery_hist[SPINDLE_HIST_BUCKETS];
    uint64_t send_batches, send_msgs;
    uint64_t receive_batches, receive_msgs;
    uint64_t delivery_batches, delivery_msgs;
    /* --log-dir: the member's log at the end (spindle_stats log_*). */
    uint64_t log_records, log_bytes, log_syncs;
    uint64_t log_catchup_records, log_catchup_bytes; /* a joiner restarted with its log */
    /* --log-dir: delivery here to the global persistence frontier passing
     * the message (the persisted upcall), per message. */
    double lag_p50_us, lag_p99_us;
    int has_lag;
};

/* Number of senders for the configuration (members of the group). */
uint32_t bench_num_senders(const struct bench_config *config, uint32_t members);

/* Runs group member `self` of `members`; fills result (ok = 0 on failure). */
void bench_run_member(const struct bench_config *config, uint32_t self, uint32_t members,
                      struct bench_result *result);

/* --config (bench_config.c): loads FILE as defaults before the other
 * flags are parsed, then checks the combination; both return 0 or 2 after
 * printing one message naming the culprit. */
int bench_config_load(struct bench_config *config, const char *path);
int bench_config_finish(struct bench_config *config);
void bench_config_release(struct bench_config *config);

/* Subgroup g as the group is created with it: from the file when there is
 * one (flags applied), else every member of members. all = 0..members-1. */
void bench_subgroup(const struct bench_config *config, uint32_t g, uint32_t members,
                    const uint32_t *all, struct spindle_subgroup_config *out);
/* self's rank among the senders of sub, or -1. */
int bench_sender_rank(const struct spindle_subgroup_config *sub, uint32_t self);
bool bench_is_member(const struct spindle_subgroup_config *sub, uint32_t self);

/* Prints the human summary, then the JSON line, for results[0..count). */
void bench_report(const struct bench_config *config, uint32_t members,
                  const struct bench_result *results, uint32_t count);

#endif
