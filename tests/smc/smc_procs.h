/*
 * Test helper: runs one scenario in N forked member processes that form a
 * group over shm with a fresh bootstrap directory, and collects each
 * member's struct smc_proc_result through a pipe. The parent never touches
 * the library, so each child is a clean process.
 */
#ifndef TESTS_SMC_PROCS_H
#define TESTS_SMC_PROCS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <spindle/spindle.h>

#define PROC_MAX_MEMBERS   8
#define PROC_MAX_SUBGROUPS 4

struct smc_proc_result {
    int ok;
    char error[256];
    uint64_t delivered[PROC_MAX_SUBGROUPS];
    uint32_t digest[PROC_MAX_SUBGROUPS];
    uint64_t from_sender[PROC_MAX_SUBGROUPS][PROC_MAX_MEMBERS];
    uint64_t values[4]; /* scenario-specific */
};

typedef void (*smc_proc_fn)(uint32_t self, uint32_t members, const char *dir,
                            struct smc_proc_result *result);

/* Runs fn in members processes; returns 0 when every child reported. */
static inline int smc_procs_run(uint32_t members, smc_proc_fn fn, struct smc_proc_result *results,
                                int timeout_s)
{
    char dir[] = "/tmp/spindle-smc-test-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return -1;
    pid_t pids[PROC_MAX_MEMBERS];
    int fds[PROC_MAX_MEMBERS][2];
    for (uint32_t i = 0; i < members; i++) {
        if (pipe(fds[i]) < 0)
            return -1;
        pids[i] = fork();
        if (pids[i] == 0) {
            alarm((unsigned)timeout_s); /* a hung child dies instead of hanging the suite */
            struct smc_proc_result r;
            memset(&r, 0, sizeof r);
            fn(i, members, dir, &r);
            ssize_t w = write(fds[i][1], &r, sizeof r);
            _exit(w == (ssize_t)sizeof r ? 0 : 1);
        }
        close(fds[i][1]);
    }
    int rc = 0;
    for (uint32_t i = 0; i < members; i++) {
        memset(&results[i], 0, sizeof results[i]);
        ssize_t got = read(fds[i][0], &results[i], sizeof results[i]);
        if (got != (ssize_t)sizeof results[i]) {
            snprintf(results[i].error, sizeof results[i].error, "member %u died", i);
            rc = -1;
        }
        close(fds[i][0]);
        int status;
        waitpid(pids[i], &status, 0);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        rc = -1;
    return rc;
}

/* Options of member self of members over shm, bootstrapped in dir,
 * delivering to deliver(ctx). */
static inline void smc_proc_options(struct spindle_group_options *options, uint32_t self,
                                    uint32_t members, const char *dir, spindle_deliver_fn deliver,
                                    void *ctx)
{
    spindle_group_options_init(options);
    options->self = self;
    options->num_members = members;
    options->bootstrap = dir;
    options->deliver = deliver;
    options->deliver_ctx = ctx;
}

/* Records a member's failure: what it was doing, the code and the
 * library's message. */
static inline void smc_proc_fail(struct smc_proc_result *r, const char *what, int rc)
{
    r->ok = 0;
    snprintf(r->error, sizeof r->error, "%s: %s: %s", what, spindle_strerror(rc), spindle_errmsg());
}

/* Waits until the delivery counter *total (atomic) reaches expected,
 * looking every 0.5 ms; 0, or SPINDLE_ETIMEDOUT after seconds. */
static inline int smc_proc_wait_total(const uint64_t *total, uint64_t expected, int seconds)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    time_t deadline = now.tv_sec + seconds;
    while (__atomic_load_n(total, __ATOMIC_ACQUIRE) < expected) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > deadline)
            return SPINDLE_ETIMEDOUT;
        struct timespec pause = {0, 500000};
        nanosleep(&pause, NULL);
    }
    return 0;
}

/* Folds one delivered message into the per-subgroup digest and counts. */
static inline void smc_proc_account(struct smc_proc_result *r, const struct spindle_message *m)
{
    uint32_t g = m->subgroup < PROC_MAX_SUBGROUPS ? m->subgroup : PROC_MAX_SUBGROUPS - 1;
    uint32_t h = r->digest[g];
    const unsigned char *p = m->data;
    h = h * 16777619u ^ m->sender_id;
    h = h * 16777619u ^ (uint32_t)m->sender_index;
    for (uint32_t i = 0; i < m->length; i++)
        h = (h ^ p[i]) * 16777619u;
    r->digest[g] = h;
    if (m->sender_id < PROC_MAX_MEMBERS) {
        /* Per-sender FIFO: sender_index must count 0, 1, 2, ... */
        if (m->sender_index != r->from_sender[g][m->sender_id] && r->ok >= 0) {
            snprintf(r->error, sizeof r->error, "subgroup %u sender %u: index %llu, expected %llu",
                     g, m->sender_id, (unsigned long long)m->sender_index,
                     (unsigned long long)r->from_sender[g][m->sender_id]);
            r->ok = -1;
        }
        r->from_sender[g][m->sender_id]++;
    }
    r->delivered[g]++;
}

#endif
