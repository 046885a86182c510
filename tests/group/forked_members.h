/*
 * Shared by the tests of upcalls (test_dispatch.c, test_upcall_send.c):
 * members forked on shm that report a struct result to the test, a
 * counter threads wait on without sleeping, and CHECK, which fails a
 * member with the line and the library's last message. Include after
 * <cmocka.h> and <spindle/spindle.h>.
 */
#ifndef SPINDLE_TESTS_GROUP_FORKED_MEMBERS_H
#define SPINDLE_TESTS_GROUP_FORKED_MEMBERS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_ports.h"

#define MAX_MEMBERS 3

/* A failed check in a member: say what, and exit with 1. */
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "member check failed at %s:%d: ", __FILE__, __LINE__);                 \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " (%s)\n", spindle_errmsg());                                          \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

static const uint32_t all_ids[MAX_MEMBERS] __attribute__((unused)) = {0, 1, 2};

/* What a member reports to the test. */
struct result {
    uint64_t hash; /* of the sequence of upcalls it ran */
    uint64_t eagain;
    uint64_t delivered;
};

static inline uint64_t mix(uint64_t hash, uint64_t value)
{
    hash ^= value;
    return hash * 0x100000001b3ull;
}

/* A counter that threads wait on (no sleeping in place of a signal). */
struct counter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t value;
};

static inline void counter_init(struct counter *c)
{
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    c->value = 0;
}

static inline void counter_add(struct counter *c, uint64_t n)
{
    pthread_mutex_lock(&c->lock);
    c->value += n;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

static inline uint64_t counter_get(struct counter *c)
{
    pthread_mutex_lock(&c->lock);
    uint64_t value = c->value;
    pthread_mutex_unlock(&c->lock);
    return value;
}

/* Waits until the counter reaches at least want; false after 60 s. */
static inline bool counter_wait(struct counter *c, uint64_t want)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    pthread_mutex_lock(&c->lock);
    int rc = 0;
    while (c->value < want && rc == 0)
        rc = pthread_cond_timedwait(&c->cond, &c->lock, &deadline);
    bool reached = c->value >= want;
    pthread_mutex_unlock(&c->lock);
    return reached;
}

/* Forks members 0..n-1 running fn(self, dir, result fd), collects each
 * one's result and checks that it exited with 0. */
typedef int (*member_fn)(uint32_t self, const char *dir, void *arg);

static int result_fd __attribute__((unused)) = -1;

static inline void report(const struct result *r)
{
    CHECK(write(result_fd, r, sizeof *r) == (ssize_t)sizeof *r, "report");
}

static inline void run_members(uint32_t n, member_fn fn, void *arg, struct result *results)
{
    char dir[] = "/tmp/spindle-dispatch-XXXXXX";
    assert_non_null(mkdtemp(dir));
    pid_t pids[MAX_MEMBERS];
    int fds[MAX_MEMBERS][2];
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(pipe(fds[i]), 0);
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(90);
            close(fds[i][0]);
            result_fd = fds[i][1];
            _exit(fn(i, dir, arg));
        }
        close(fds[i][1]);
    }
    for (uint32_t i = 0; i < n; i++) {
        memset(&results[i], 0, sizeof results[i]);
        ssize_t got = read(fds[i][0], &results[i], sizeof results[i]);
        close(fds[i][0]);
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("member %u: status 0x%x", i, status);
        assert_int_equal(got, (ssize_t)sizeof results[i]);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static inline void options_for(struct spindle_group_options *o, uint32_t self, uint32_t n,
                               const char *dir)
{
    spindle_group_options_init(o);
    o->self = self;
    o->num_members = n;
    o->bootstrap = dir;
}

/* Addresses for a group of two on free ports and a joiner: members (both),
 * contact (member 1's, where the joiner asks) and self (the joiner's). */
static inline void join_addresses(char members[128], char contact[32], char self[32])
{
    uint16_t ports[3];
    for (int i = 0; i < 3; i++)
        ports[i] = test_free_port();
    snprintf(members, 128, "127.0.0.1:%u,127.0.0.1:%u", ports[0], ports[1]);
    snprintf(contact, 32, "127.0.0.1:%u", ports[1]);
    snprintf(self, 32, "127.0.0.1:%u", ports[2]);
}

/* The start pipe of a join test: the joiner (member 2) waits for the
 * leader's byte; each member keeps only the end it uses (the leader, 0,
 * its write end). */
static inline void join_wait_start(int start[2], uint32_t self)
{
    if (self == 2) {
        char byte;
        CHECK(read(start[0], &byte, 1) == 1, "start");
    }
    close(start[0]);
    if (self != 0)
        close(start[1]);
}

static inline void *blocking_dispatcher(void *arg)
{
    spindle_group_t *group = arg;
    intptr_t rc = spindle_dispatch(group, SPINDLE_DISPATCH_BLOCKING);
    return (void *)rc;
}

#endif
