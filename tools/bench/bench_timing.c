/*
 * spindle-bench timing: latency samples and the --duration run clock
 * (bench_timing.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_timing.h"

int bench_latency_init(struct bench_latency *lat, uint32_t subgroups, uint64_t messages,
                       uint32_t window)
{
    *lat =
        (struct bench_latency){.from_ns = 0, .to_ns = UINT64_MAX, .random = 0x9E3779B97F4A7C15ull};
    lat->wrap = messages == 0;
    lat->ring = messages;
    lat->capacity = (uint64_t)subgroups * messages;
    if (lat->wrap) {
        /* A sender commits at most window messages past the oldest one not
         * yet received by all; its own delivery follows soon after, so
         * eight windows are plenty (a miss loses a sample, nothing else). */
        lat->ring = 4096;
        while (lat->ring < 8ull * window)
            lat->ring *= 2;
        lat->capacity = BENCH_MAX_SAMPLES;
    }
    size_t entries = (size_t)subgroups * lat->ring;
    lat->commit_ns = calloc(entries > 0 ? entries : 1, sizeof *lat->commit_ns);
    lat->commit_index =
        lat->wrap ? calloc(entries > 0 ? entries : 1, sizeof *lat->commit_index) : NULL;
    lat->samples = calloc(lat->capacity > 0 ? lat->capacity : 1, sizeof *lat->samples);
    if (lat->commit_ns == NULL || lat->samples == NULL || (lat->wrap && lat->commit_index == NULL))
        return SPINDLE_ENOMEM;
    return 0;
}

void bench_latency_release(struct bench_latency *lat)
{
    free(lat->commit_ns);
    free(lat->commit_index);
    free(lat->samples);
    lat->commit_ns = NULL;
    lat->commit_index = NULL;
    lat->samples = NULL;
}

void bench_latency_commit(struct bench_latency *lat, uint32_t subgroup, uint64_t index,
                          uint64_t now)
{
    if (!lat->wrap) {
        if (index < lat->ring)
            lat->commit_ns[(uint64_t)subgroup * lat->ring + index] = now;
        return;
    }
    /* The upcall may read a reused slot: index + 1 (0: empty) is stored
     * around the time, and read on both sides of it. */
    uint64_t slot = (uint64_t)subgroup * lat->ring + (index & (lat->ring - 1));
    __atomic_store_n(&lat->commit_index[slot], 0, __ATOMIC_RELEASE);
    __atomic_store_n(&lat->commit_ns[slot], now, __ATOMIC_RELEASE);
    __atomic_store_n(&lat->commit_index[slot], index + 1, __ATOMIC_RELEASE);
}

/* Keeps a sample; past the capacity, a uniform reservoir (Algorithm R). */
static void keep_sample(struct bench_latency *lat, uint32_t ns)
{
    lat->seen++;
    if (lat->count < lat->capacity) {
        lat->samples[lat->count++] = ns;
        return;
    }
    lat->random ^= lat->random << 13;
    lat->random ^= lat->random >> 7;
    lat->random ^= lat->random << 17;
    uint64_t at = lat->random % lat->seen;
    if (at < lat->capacity)
        lat->samples[at] = ns;
}

void bench_latency_deliver(struct bench_latency *lat, uint32_t subgroup, uint64_t index,
                           uint64_t now)
{
    uint64_t sent;
    if (!lat->wrap) {
        if (index >= lat->ring || lat->count >= lat->capacity)
            return;
        sent = lat->commit_ns[(uint64_t)subgroup * lat->ring + index];
    } else {
        uint64_t slot = (uint64_t)subgroup * lat->ring + (index & (lat->ring - 1));
        if (__atomic_load_n(&lat->commit_index[slot], __ATOMIC_ACQUIRE) != index + 1)
            return;
        sent = __atomic_load_n(&lat->commit_ns[slot], __ATOMIC_ACQUIRE);
        if (__atomic_load_n(&lat->commit_index[slot], __ATOMIC_ACQUIRE) != index + 1)
            return;
        if (sent < __atomic_load_n(&lat->from_ns, __ATOMIC_ACQUIRE) ||
            sent >= __atomic_load_n(&lat->to_ns, __ATOMIC_ACQUIRE))
            return;
    }
    keep_sample(lat, (uint32_t)(now - sent > UINT32_MAX ? UINT32_MAX : now - sent));
}

void bench_latency_window(struct bench_latency *lat, uint64_t from_ns, uint64_t to_ns)
{
    /* Every message committed after this call was committed after the
     * window moved: its commit_index store (release) publishes it. */
    __atomic_store_n(&lat->from_ns, from_ns, __ATOMIC_RELEASE);
    __atomic_store_n(&lat->to_ns, to_ns, __ATOMIC_RELEASE);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

bool bench_latency_percentiles(struct bench_latency *lat, double *p50_us, double *p99_us)
{
    if (lat->count == 0)
        return false;
    qsort(lat->samples, lat->count, sizeof *lat->samples, cmp_u32);
    /* Indexes of the percentiles, rounded down on purpose. */
    uint64_t p50 = lat->count / 2, p99 = lat->count * 99 / 100;
    *p50_us = lat->samples[p50] / 1000.0;
    *p99_us = lat->samples[p99] / 1000.0;
    return true;
}

int bench_lag_init(struct bench_lag *lag, uint32_t subgroups)
{
    memset(lag, 0, sizeof *lag);
    pthread_mutex_init(&lag->lock, NULL);
    lag->subgroups = subgroups;
    if (subgroups == 0)
        return 0; /* nothing logged: nothing recorded */
    size_t n = subgroups;
    lag->runs = calloc(n * BENCH_LAG_RUNS, sizeof *lag->runs);
    lag->head = calloc(n, sizeof *lag->head);
    lag->used = calloc(n, sizeof *lag->used);
    lag->samples = (struct bench_latency){
        .capacity = BENCH_LAG_SAMPLES, .to_ns = UINT64_MAX, .random = 0x9E3779B97F4A7C15ull};
    lag->samples.samples = calloc(BENCH_LAG_SAMPLES, sizeof *lag->samples.samples);
    if (lag->runs == NULL || lag->head == NULL || lag->used == NULL || lag->samples.samples == NULL)
        return SPINDLE_ENOMEM;
    return 0;
}

void bench_lag_release(struct bench_lag *lag)
{
    free(lag->runs);
    free(lag->head);
    free(lag->used);
    free(lag->samples.samples);
    pthread_mutex_destroy(&lag->lock);
    memset(lag, 0, sizeof *lag);
}

void bench_lag_deliver(struct bench_lag *lag, uint32_t subgroup, uint64_t view_id, uint64_t seq_end,
                       uint32_t count, uint64_t now)
{
    if (subgroup >= lag->subgroups)
        return;
    pthread_mutex_lock(&lag->lock);
    if (now < lag->samples.from_ns || now >= lag->samples.to_ns) {
        /* outside the measured interval */
    } else if (lag->used[subgroup] == BENCH_LAG_RUNS) {
        lag->dropped += count;
    } else {
        uint32_t at = (lag->head[subgroup] + lag->used[subgroup]++) % BENCH_LAG_RUNS;
        lag->runs[(size_t)subgroup * BENCH_LAG_RUNS + at] =
            (struct bench_lag_run){view_id, seq_end, now, count};
    }
    pthread_mutex_unlock(&lag->lock);
}

void bench_lag_persisted(struct bench_lag *lag, uint32_t subgroup, uint64_t view_id,
                         uint64_t frontier, uint64_t now)
{
    if (subgroup >= lag->subgroups)
        return;
    pthread_mutex_lock(&lag->lock);
    while (lag->used[subgroup] > 0) {
        const struct bench_lag_run *run =
            &lag->runs[(size_t)subgroup * BENCH_LAG_RUNS + lag->head[subgroup]];
        if (run->view_id == view_id && run->seq_end > frontier)
            break;
        /* A run of an earlier view than the frontier's is past too: each
         * view's last frontier closes it (a member that left no longer
         * counts). */
        if (run->view_id <= view_id) {
            uint64_t ns = now - run->deliver_ns;
            for (uint32_t i = 0; i < run->count; i++)
                keep_sample(&lag->samples, (uint32_t)(ns > UINT32_MAX ? UINT32_MAX : ns));
        } else {
            break; /* a later view's run (cannot be passed by this frontier) */
        }
        lag->head[subgroup] = (lag->head[subgroup] + 1) % BENCH_LAG_RUNS;
        lag->used[subgroup]--;
    }
    pthread_mutex_unlock(&lag->lock);
}

void bench_lag_window(struct bench_lag *lag, uint64_t from_ns, uint64_t to_ns)
{
    pthread_mutex_lock(&lag->lock);
    lag->samples.from_ns = from_ns;
    lag->samples.to_ns = to_ns;
    pthread_mutex_unlock(&lag->lock);
}

uint64_t bench_lag_pending(struct bench_lag *lag)
{
    uint64_t pending = 0;
    pthread_mutex_lock(&lag->lock);
    for (uint32_t g = 0; g < lag->subgroups; g++)
        pending += lag->used[g];
    pthread_mutex_unlock(&lag->lock);
    return pending;
}

bool bench_lag_percentiles(struct bench_lag *lag, double *p50_us, double *p99_us)
{
    if (lag->subgroups == 0)
        return false;
    pthread_mutex_lock(&lag->lock);
    bool any = bench_latency_percentiles(&lag->samples, p50_us, p99_us);
    pthread_mutex_unlock(&lag->lock);
    return any;
}

void bench_clock_start(struct bench_clock *clock, uint64_t warmup_ns, uint64_t duration_ns,
                       uint32_t msg_size, const char *who)
{
    uint64_t now = bench_now_ns();
    *clock = (struct bench_clock){.start_ns = now,
                                  .measure_ns = now + warmup_ns,
                                  .end_ns = now + warmup_ns + duration_ns,
                                  .duration_ns = duration_ns,
                                  .next_progress_ns = now + 1000000000ull,
                                  .last_ns = now,
                                  .measuring = warmup_ns == 0,
                                  .measured_from_ns = now,
                                  .who = who,
                                  .msg_size = msg_size};
}

/* The samples' window: the measured interval once it has started, empty
 * before. */
static void bound_samples(const struct bench_clock *clock)
{
    uint64_t from = clock->measuring ? clock->measured_from_ns : UINT64_MAX;
    uint64_t to = clock->measuring ? clock->end_ns : UINT64_MAX;
    if (clock->latency != NULL)
        bench_latency_window(clock->latency, from, to);
    if (clock->lag != NULL)
        bench_lag_window(clock->lag, from, to);
}

void bench_clock_bound(struct bench_clock *clock, struct bench_latency *latency,
                       struct bench_lag *lag)
{
    clock->latency = latency;
    clock->lag = lag;
    bound_samples(clock);
}

static void print_progress(struct bench_clock *clock, uint64_t delivered, uint32_t members,
                           uint64_t now)
{
    double seconds = (double)(now - clock->last_ns) / 1e9;
    double rate = seconds > 0 ? (double)(delivered - clock->last_delivered) / seconds : 0;
    fprintf(stderr, "progress: %s at %.0f s: %.0f msgs/s, %.2f MB/s delivered, %u members%s\n",
            clock->who, (double)(now - clock->start_ns) / 1e9, rate, rate * clock->msg_size / 1e6,
            members, now <= clock->measure_ns ? " (warm-up)" : "");
    clock->last_delivered = delivered;
    clock->last_ns = now;
}

bool bench_clock_tick(struct bench_clock *clock, uint64_t delivered, uint32_t members,
                      bool progress)
{
    if (clock->ended)
        return true;
    uint64_t now = bench_now_ns();
    if (!clock->measuring && now >= clock->measure_ns) {
        clock->measuring = true;
        clock->measured_from = delivered;
        clock->measured_from_ns = now;
        /* The interval is --duration long from the moment the count was
         * read, not from the planned edge: a sender blocked past that edge
         * (a full window on a loaded machine) would otherwise measure less
         * than it was asked to. */
        clock->end_ns = now + clock->duration_ns;
        bound_samples(clock);
    }
    if (now >= clock->end_ns) {
        clock->ended = true;
        clock->measured_to = delivered;
        clock->measured_to_ns = now;
    }
    if (progress && now >= clock->next_progress_ns) {
        print_progress(clock, delivered, members, now);
        clock->next_progress_ns += 1000000000ull;
        if (clock->next_progress_ns < now) /* a stall: no burst of lines after it */
            clock->next_progress_ns = now + 1000000000ull;
    }
    return clock->ended;
}
