/*
 * spindle-bench's --duration clock (tools/bench/bench_timing.c): the
 * measured interval is never shorter than the duration asked for, even when
 * the running thread passes the end of the warm-up late (a sender blocked on
 * a full window of a loaded machine), and it counts the deliveries between
 * the two moments it read them; the latency and persistence-lag samples
 * are those of that same interval.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "bench.h"
#include "bench_timing.h"

static void pause_ms(long ms)
{
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) != 0) {
    }
}

/* Ticks until the clock says the run is over, the count growing by one
 * each tick; returns the ticks taken (bounded). */
static uint64_t tick_to_end(struct bench_clock *clock, uint64_t delivered)
{
    uint64_t ticks = 0;
    while (!bench_clock_tick(clock, delivered + ticks, 2, false) && ticks < 100000) {
        pause_ms(1);
        ticks++;
    }
    return ticks;
}

/* The thread first ticks 150 ms after a 20 ms warm-up ended: the 100 ms
 * measured interval starts then, and lasts 100 ms from there. */
static void test_a_late_warmup_edge_still_measures_the_whole_duration(void **state)
{
    (void)state;
    const uint64_t ms = 1000000ull;
    struct bench_clock clock;
    bench_clock_start(&clock, 20 * ms, 100 * ms, 64, "member 0");
    pause_ms(170);
    assert_false(bench_clock_tick(&clock, 1000, 2, false));
    assert_true(clock.measuring);
    assert_int_equal(clock.measured_from, 1000);
    uint64_t ticks = tick_to_end(&clock, 1000);
    assert_true(clock.ended);
    assert_true(clock.measured_to_ns - clock.measured_from_ns >= 100 * ms);
    assert_int_equal(clock.measured_to - clock.measured_from, ticks);
}

/* Without a warm-up the interval starts with the clock. */
static void test_no_warmup_measures_from_the_start(void **state)
{
    (void)state;
    const uint64_t ms = 1000000ull;
    struct bench_clock clock;
    bench_clock_start(&clock, 0, 30 * ms, 64, "member 0");
    assert_true(clock.measuring);
    uint64_t ticks = tick_to_end(&clock, 0);
    assert_true(clock.ended);
    assert_true(clock.measured_to_ns - clock.measured_from_ns >= 30 * ms);
    assert_int_equal(clock.measured_to, ticks);
}

/* The thread passes a 20 ms warm-up's end 150 ms late, after the planned
 * end of a 100 ms interval: a message committed (or delivered) before that
 * is not sampled, one committed (delivered) after it, in the interval the
 * rate counts, is. */
static void test_samples_follow_a_late_warmup_edge(void **state)
{
    (void)state;
    const uint64_t ms = 1000000ull;
    struct bench_clock clock;
    struct bench_latency latency;
    struct bench_lag lag;
    assert_int_equal(bench_latency_init(&latency, 1, 0, 16), 0);
    assert_int_equal(bench_lag_init(&lag, 1), 0);
    bench_clock_start(&clock, 20 * ms, 100 * ms, 64, "member 0");
    bench_clock_bound(&clock, &latency, &lag);
    pause_ms(170);
    uint64_t before = bench_now_ns();
    bench_latency_commit(&latency, 0, 0, before);
    bench_lag_deliver(&lag, 0, 1, 1, 1, before);
    assert_false(bench_clock_tick(&clock, 0, 2, false));
    uint64_t after = bench_now_ns();
    assert_true(after >= clock.measured_from_ns && after < clock.end_ns);
    bench_latency_commit(&latency, 0, 1, after);
    bench_lag_deliver(&lag, 0, 1, 2, 1, after);
    bench_latency_deliver(&latency, 0, 0, after + ms);
    bench_latency_deliver(&latency, 0, 1, after + ms);
    bench_lag_persisted(&lag, 0, 1, 2, after + ms);
    assert_int_equal(latency.count, 1);
    assert_int_equal(latency.samples[0], ms);
    assert_int_equal(lag.samples.count, 1);
    assert_int_equal(lag.samples.samples[0], ms);
    bench_latency_release(&latency);
    bench_lag_release(&lag);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_late_warmup_edge_still_measures_the_whole_duration),
        cmocka_unit_test(test_no_warmup_measures_from_the_start),
        cmocka_unit_test(test_samples_follow_a_late_warmup_edge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
