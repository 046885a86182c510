/*
 * Dedicated-CPU polling (spindle_group_options.poll_dedicated): two
 * member processes on shm, each with its predicate thread pinned to its
 * own CPU (the same one when the process may use only one), exchange
 * messages. Each member's predicate thread must be pinned to the CPU it
 * was given and must never have slept on its doorbell; every message is
 * delivered. A CPU the process may not use is refused, named.
 */
#include <dirent.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spindle/spindle.h>

#define MEMBERS  2
#define MESSAGES 200

static const uint32_t ids[] = {0, 1};

struct poll_report {
    int status; /* 0, or the step that failed */
    uint64_t sleeps, delivered;
    int pinned_threads; /* threads whose only CPU is the one given */
};

static void on_deliver(void *ctx, const struct spindle_message *m, size_t count)
{
    (void)m;
    __atomic_add_fetch((uint64_t *)ctx, count, __ATOMIC_RELEASE);
}

/* Threads of this process allowed exactly CPU cpu and no other. */
static int threads_pinned_to(uint32_t cpu)
{
    char want[32];
    snprintf(want, sizeof want, "Cpus_allowed_list:\t%u\n", cpu);
    DIR *tasks = opendir("/proc/self/task");
    int pinned = 0;
    for (struct dirent *e; tasks != NULL && (e = readdir(tasks)) != NULL;) {
        char path[300], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = e->d_name[0] == '.' ? NULL : fopen(path, "r");
        while (f != NULL && fgets(line, sizeof line, f) != NULL)
            if (strcmp(line, want) == 0)
                pinned++;
        if (f != NULL)
            fclose(f);
    }
    if (tasks != NULL)
        closedir(tasks);
    return pinned;
}

static struct poll_report poll_member(const char *dir, uint32_t self, uint32_t cpu)
{
    struct poll_report report = {0};
    uint64_t delivered = 0;
    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.self = self;
    o.num_members = MEMBERS;
    o.bootstrap = dir;
    o.deliver = on_deliver;
    o.deliver_ctx = &delivered;
    o.poll_dedicated = true;
    o.poll_cpu = cpu;
    struct spindle_subgroup_config sg = {ids, MEMBERS, ids, MEMBERS, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    if (spindle_group_create(&o, &sg, 1, &g) != 0) {
        fprintf(stderr, "member %u: %s\n", self, spindle_errmsg());
        report.status = 1;
        return report;
    }
    for (uint64_t i = 0; i < MESSAGES && report.status == 0; i++)
        if (spindle_send(g, 0, &i, sizeof i, 0) != 0)
            report.status = 2;
    while (report.status == 0 &&
           __atomic_load_n(&delivered, __ATOMIC_ACQUIRE) < (uint64_t)MEMBERS * MESSAGES)
        sched_yield();
    struct spindle_stats stats;
    if (spindle_group_stats(g, &stats) != 0)
        report.status = 3;
    report.sleeps = stats.sleeps;
    report.delivered = __atomic_load_n(&delivered, __ATOMIC_ACQUIRE);
    report.pinned_threads = threads_pinned_to(cpu);
    if (spindle_group_shutdown(g, 10000) != 0)
        report.status = 4;
    spindle_group_destroy(g);
    return report;
}

/* CPUs for member 0 and 1: the first two this process may use, or the
 * only one twice. */
static void two_cpus(uint32_t cpus[MEMBERS])
{
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    uint32_t found = 0;
    for (uint32_t cpu = 0; cpu < CPU_SETSIZE && found < MEMBERS; cpu++)
        if (CPU_ISSET(cpu, &set))
            cpus[found++] = cpu;
    assert_true(found > 0);
    if (found == 1)
        cpus[1] = cpus[0];
}

static void test_dedicated_pollers_are_pinned_and_never_sleep(void **state)
{
    (void)state;
    char dir[] = "/tmp/spindle-poll-XXXXXX";
    assert_non_null(mkdtemp(dir));
    uint32_t cpus[MEMBERS];
    two_cpus(cpus);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pids[MEMBERS];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(60);
            close(fds[0]);
            struct poll_report report = poll_member(dir, i, cpus[i]);
            ssize_t n = write(fds[1], &report, sizeof report);
            _exit(n == (ssize_t)sizeof report ? 0 : 9);
        }
    }
    close(fds[1]);
    struct poll_report reports[MEMBERS];
    uint32_t got = 0;
    while (got < MEMBERS && read(fds[0], &reports[got], sizeof reports[0]) == sizeof reports[0])
        got++;
    close(fds[0]);
    for (uint32_t i = 0; i < MEMBERS; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(got, MEMBERS);
    for (uint32_t i = 0; i < MEMBERS; i++) {
        assert_int_equal(reports[i].status, 0);
        assert_int_equal(reports[i].delivered, (uint64_t)MEMBERS * MESSAGES);
        assert_int_equal(reports[i].sleeps, 0);
        assert_true(reports[i].pinned_threads >= 1);
    }
}

static void test_cpu_the_process_may_not_use_is_refused(void **state)
{
    (void)state;
    char dir[] = "/tmp/spindle-poll-XXXXXX";
    assert_non_null(mkdtemp(dir));
    uint64_t delivered = 0;
    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.bootstrap = dir;
    o.deliver = on_deliver;
    o.deliver_ctx = &delivered;
    o.poll_dedicated = true;
    o.poll_cpu = CPU_SETSIZE - 1;
    struct spindle_subgroup_config sg = {ids, 1, ids, 1, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "poll_cpu 1023 is not a CPU"));
    assert_null(g);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dedicated_pollers_are_pinned_and_never_sleep),
        cmocka_unit_test(test_cpu_the_process_may_not_use_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
