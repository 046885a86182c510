/*
 * An idle group costs next to no CPU: three member processes on shm with
 * the default options (heartbeats every max_sleep_ms, failure checks) and
 * no traffic. Each member measures its own CPU time over a 2.5 s window;
 * together they must stay under a quarter of one core (a predicate thread
 * that polled instead of sleeping on its doorbell would use a whole core
 * on its own), and every member's predicate thread must have slept.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <spindle/spindle.h>

#define MEMBERS   3
#define WINDOW_MS 2500
#define SETTLE_MS 200
#define BOUND_PCT 25 /* of one core, all members together */

static const uint32_t ids[] = {0, 1, 2};

/* What one member reports to the test through a pipe. */
struct idle_report {
    uint32_t self;
    int status; /* 0, or the step that failed */
    uint64_t cpu_us;
    uint64_t sleeps;
};

static void on_deliver(void *ctx, const struct spindle_message *m, size_t count)
{
    (void)ctx;
    (void)m;
    (void)count;
}

static uint64_t cpu_us_now(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (uint64_t)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000000u +
           (uint64_t)(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* One member: joins, stays idle for the window, reports. */
static struct idle_report idle_member(const char *dir, uint32_t self)
{
    struct idle_report report = {.self = self};
    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.self = self;
    o.num_members = MEMBERS;
    o.bootstrap = dir;
    o.deliver = on_deliver;
    struct spindle_subgroup_config sg = {ids, MEMBERS, ids, MEMBERS, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    if (spindle_group_create(&o, &sg, 1, &g) != 0 || spindle_barrier(g, 30000) != 0) {
        fprintf(stderr, "member %u: %s\n", self, spindle_errmsg());
        report.status = 1;
        return report;
    }
    /* The window starts once set-up traffic (barrier, first heartbeats) is
     * over; it measures what idling costs, not what joining costs. */
    pause_ms(SETTLE_MS);
    struct spindle_stats before, after;
    uint64_t cpu_before = cpu_us_now();
    if (spindle_group_stats(g, &before) != 0)
        report.status = 2;
    pause_ms(WINDOW_MS);
    report.cpu_us = cpu_us_now() - cpu_before;
    if (spindle_group_stats(g, &after) != 0)
        report.status = 3;
    report.sleeps = after.sleeps - before.sleeps;
    /* Leave together: one that left early would be a failure to the rest. */
    if (spindle_barrier(g, 30000) != 0 || spindle_group_shutdown(g, 10000) != 0)
        report.status = 4;
    spindle_group_destroy(g);
    return report;
}

static void test_idle_group_of_three_sleeps_and_costs_little_cpu(void **state)
{
    (void)state;
    char dir[] = "/tmp/spindle-idle-XXXXXX";
    assert_non_null(mkdtemp(dir));
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pids[MEMBERS];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(60); /* a hang ends the member and fails the test */
            close(fds[0]);
            struct idle_report report = idle_member(dir, i);
            ssize_t n = write(fds[1], &report, sizeof report);
            _exit(n == (ssize_t)sizeof report ? 0 : 9);
        }
    }
    close(fds[1]);
    struct idle_report reports[MEMBERS];
    uint32_t got = 0;
    while (got < MEMBERS && read(fds[0], &reports[got], sizeof reports[0]) == sizeof reports[0])
        got++;
    close(fds[0]);
    for (uint32_t i = 0; i < MEMBERS; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("member %u: status 0x%x", i, status);
    }
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(got, MEMBERS);
    uint64_t total_us = 0;
    for (uint32_t i = 0; i < MEMBERS; i++) {
        print_message("member %u: %llu us of CPU, %llu sleeps in %d ms\n", reports[i].self,
                      (unsigned long long)reports[i].cpu_us, (unsigned long long)reports[i].sleeps,
                      WINDOW_MS);
        assert_int_equal(reports[i].status, 0);
        /* Heartbeats wake it every max_sleep_ms (100 ms): it sleeps again
         * each time. A thread that never slept would report none. */
        assert_true(reports[i].sleeps > 0);
        total_us += reports[i].cpu_us;
    }
    print_message("idle group of %d: %.2f%% of one core over %d ms (bound %d%%)\n", MEMBERS,
                  100.0 * (double)total_us / (WINDOW_MS * 1000.0), WINDOW_MS, BOUND_PCT);
    assert_true(total_us < (uint64_t)WINDOW_MS * 1000u * BOUND_PCT / 100u);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_group_of_three_sleeps_and_costs_little_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
