/*
 * spindle-bench timing: own-message latency samples and the clock of a
 * time-based run (--duration).
 *
 * Latency: the sending thread notes each own message's commit time; the
 * delivery upcall (the library's predicate thread) turns the local delivery
 * of that message into a sample. A --messages run keeps every commit time
 * and every sample; a --duration run keeps commit times in a ring per
 * subgroup (an entry carries its message index, so a slot reused before its
 * message came back gives no sample rather than a wrong one) and at most
 * BENCH_MAX_SAMPLES samples (a uniform reservoir beyond that), and samples
 * only messages committed inside the measured interval.
 *
 * The run clock: a --duration run sends from start until start + warm-up +
 * duration; the figures count what was delivered between the end of the
 * warm-up and the end (the calling thread notes both edges as it passes
 * them; the end is duration after the moment it passed the first, so the
 * measured interval is never shorter than duration, only longer by how late
 * the thread passed the end), and a progress line goes to stderr every
 * second.
 */
#ifndef SPINDLE_BENCH_TIMING_H
#define SPINDLE_BENCH_TIMING_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define BENCH_MAX_SAMPLES (1u << 22)

struct bench_latency {
    uint64_t *commit_ns;    /* [subgroups * ring] */
    uint64_t *commit_index; /* [subgroups * ring] (duration runs: which message) */
    uint64_t ring;          /* entries per subgroup */
    bool wrap;              /* ring (duration run) rather than one entry per message */
    uint32_t *samples;      /* nanoseconds, saturated at UINT32_MAX */
    uint64_t count, capacity, seen;
    uint64_t random;         /* reservoir sampling state */
    uint64_t from_ns, to_ns; /* sample messages committed in [from_ns, to_ns) (atomics) */
};

/* Sizes the recorder for subgroups subgroups: one entry per message when
 * messages > 0, else a ring of at least 8 * window entries. Returns 0 or
 * SPINDLE_ENOMEM. */
int bench_latency_init(struct bench_latency *lat, uint32_t subgroups, uint64_t messages,
                       uint32_t window);
void bench_latency_release(struct bench_latency *lat);
/* Sending thread: message index of subgroup was committed at now. */
void bench_latency_commit(struct bench_latency *lat, uint32_t subgroup, uint64_t index,
                          uint64_t now);
/* Delivery upcall: own message index of subgroup was delivered at now. */
void bench_latency_deliver(struct bench_latency *lat, uint32_t subgroup, uint64_t index,
                           uint64_t now);
/* Samples only messages committed in [from_ns, to_ns) from now on (the
 * delivery upcall may be running). */
void bench_latency_window(struct bench_latency *lat, uint64_t from_ns, uint64_t to_ns);
/* After the run: sorts the samples; false when there are none. */
bool bench_latency_percentiles(struct bench_latency *lat, double *p50_us, double *p99_us);

/*
 * Persistence frontier lag (--log-dir): the time from a message's delivery
 * at this member to the global persistence frontier passing it (the
 * persisted upcall), one sample per message delivered in [from_ns, to_ns).
 * The delivery upcall notes runs of delivered messages per subgroup (the
 * sequence number after the run, its view, the time); the persisted upcall
 * turns every run below the frontier into samples. Both upcalls run under
 * the library's engine lock, but the bench reads the figures from its own
 * thread, hence the mutex.
 */
#define BENCH_LAG_RUNS    16384u     /* pending runs per subgroup; more are not sampled */
#define BENCH_LAG_SAMPLES (1u << 20) /* a uniform reservoir beyond that */

struct bench_lag_run {
    uint64_t view_id, seq_end, deliver_ns;
    uint32_t count;
};

struct bench_lag {
    pthread_mutex_t lock;
    uint32_t subgroups;
    struct bench_lag_run *runs; /* [subgroups * BENCH_LAG_RUNS], a ring per subgroup */
    uint32_t *head, *used;      /* [subgroups] */
    struct bench_latency samples;
    uint64_t dropped; /* messages not sampled: their subgroup's ring was full */
};

/* Sizes the recorder for subgroups subgroups. 0 or SPINDLE_ENOMEM. */
int bench_lag_init(struct bench_lag *lag, uint32_t subgroups);
void bench_lag_release(struct bench_lag *lag);
/* Delivery upcall: count messages of subgroup in view, the last with
 * sequence number seq_end - 1, delivered at now. */
void bench_lag_deliver(struct bench_lag *lag, uint32_t subgroup, uint64_t view_id, uint64_t seq_end,
                       uint32_t count, uint64_t now);
/* Persisted upcall: subgroup's frontier in view reached frontier at now. */
void bench_lag_persisted(struct bench_lag *lag, uint32_t subgroup, uint64_t view_id,
                         uint64_t frontier, uint64_t now);
/* Samples only messages delivered in [from_ns, to_ns) from now on. */
void bench_lag_window(struct bench_lag *lag, uint64_t from_ns, uint64_t to_ns);
/* Runs the frontier has not passed yet. */
uint64_t bench_lag_pending(struct bench_lag *lag);
/* After the run: false when there are no samples. */
bool bench_lag_percentiles(struct bench_lag *lag, double *p50_us, double *p99_us);

struct bench_clock {
    uint64_t start_ns, measure_ns, end_ns; /* the run's start, warm-up end, end */
    uint64_t duration_ns;                  /* the measured interval's length */
    uint64_t next_progress_ns;
    uint64_t last_delivered, last_ns;
    uint64_t measured_from, measured_to;       /* delivered counts at the two edges */
    uint64_t measured_from_ns, measured_to_ns; /* when they were read */
    bool measuring, ended;
    const char *who; /* "member 0", for the progress line */
    uint32_t msg_size;
    /* Sampled over the measured interval only (bench_clock_bound). */
    struct bench_latency *latency;
    struct bench_lag *lag;
};

/* A run of duration_ns after warmup_ns, starting now. */
void bench_clock_start(struct bench_clock *clock, uint64_t warmup_ns, uint64_t duration_ns,
                       uint32_t msg_size, const char *who);
/* Makes the samples of latency and lag (either may be NULL) those of the
 * clock's measured interval: messages committed (latency) or delivered
 * (lag) from the moment the count of deliveries is read at the end of the
 * warm-up until duration after it, which is where the interval ends (the
 * tick moves both edges when the thread passes the warm-up's end late).
 * Nothing is sampled during the warm-up. Call right after
 * bench_clock_start, before any message is sent. */
void bench_clock_bound(struct bench_clock *clock, struct bench_latency *latency,
                       struct bench_lag *lag);
/* Called often by the running thread with the current delivered count and
 * the members of the current view: notes the interval's edges, prints the
 * progress line when due. Returns true once the run's time is over. */
bool bench_clock_tick(struct bench_clock *clock, uint64_t delivered, uint32_t members,
                      bool progress);

#endif
