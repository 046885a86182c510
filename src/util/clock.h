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

/* Busy-waits for ns nanoseconds (used to model sender delays in benchmarks). */
static inline void sp_spin_ns(uint64_t ns)
{
    uint64_t end = sp_now_ns() + ns;
    while (sp_now_ns() < end) {
        __builtin_ia32_pause();
    }
}

#endif
