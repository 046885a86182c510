/* Monotonic time helpers. Thread-safe. */
#ifndef SP_UTIL_CLOCK_H
#define SP_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t sp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The time on clock ms milliseconds (ms >= 0) from now, as the timed
 * waits take it (CLOCK_REALTIME for a default pthread_cond_timedwait). */
static inline struct timespec sp_deadline_in(clockid_t clock, int ms)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Busy-waits for ns nanoseconds (used to model sender delays in benchmarks). */
static inline void sp_spin_ns(uint64_t ns)
{
    uint64_t end = sp_now_ns() + ns;
    while (sp_now_ns() < end) {
        __builtin_ia32_pause();
    }
}

#endif
