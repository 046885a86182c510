/*
 * Shared by the multi-process tests of spindle_dds: participants forked
 * from the test, each running a role over a configuration text with free
 * loopback ports, reporting a struct dds_report through a pipe. Include
 * after <cmocka.h>.
 */
#ifndef SPINDLE_TESTS_DDS_FORKED_H
#define SPINDLE_TESTS_DDS_FORKED_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "spindle_dds.h"
#include "test_ports.h"

#define DDS_MAX_FORKED 6
#define DDS_WRITERS    3 /* participants 0, 1 and 2 may write */

/* A failed check in a participant: say what, and exit with 1. */
#define DDS_CHECK(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "participant check failed at %s:%d: ", __FILE__, __LINE__);            \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, " (%s | %s)\n", spindle_dds_errmsg(), spindle_errmsg());               \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

/* What a subscriber reports. */
struct dds_report {
    uint64_t received;
    uint64_t hash; /* over (writer, seq, bytes) in delivery order */
    uint64_t per_writer[DDS_WRITERS];
    uint64_t out_of_order; /* a writer's seq not one past its previous */
    uint64_t from_history;
    uint64_t first_seq;          /* of the first sample received */
    uint64_t history_after_live; /* a history sample after a live one */
};

/* A subscriber's state: the report, under a lock threads wait on. */
struct dds_sink {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct dds_report report;
    uint64_t last_seq[DDS_WRITERS];
    bool saw_live;
};

static inline uint64_t dds_mix(uint64_t hash, uint64_t value)
{
    hash ^= value;
    return hash * 0x100000001b3ull;
}

static inline void dds_sink_init(struct dds_sink *sink)
{
    memset(sink, 0, sizeof *sink);
    pthread_mutex_init(&sink->lock, NULL);
    pthread_cond_init(&sink->cond, NULL);
    sink->report.hash = 0xcbf29ce484222325ull;
}

/* The listener of every test reader. */
static inline void dds_sink_listener(void *ctx, const struct spindle_dds_sample_info *info,
                                     const void *data)
{
    struct dds_sink *sink = ctx;
    pthread_mutex_lock(&sink->lock);
    struct dds_report *r = &sink->report;
    r->hash = dds_mix(r->hash, info->writer);
    r->hash = dds_mix(r->hash, info->seq);
    const uint8_t *bytes = data;
    for (uint32_t i = 0; i < info->length; i++)
        r->hash = dds_mix(r->hash, bytes[i]);
    if (info->writer < DDS_WRITERS) {
        uint64_t *last = &sink->last_seq[info->writer];
        if (*last != 0 && info->seq != *last + 1)
            r->out_of_order++;
        *last = info->seq;
        r->per_writer[info->writer]++;
    }
    if (r->received == 0)
        r->first_seq = info->seq;
    if (info->from_history) {
        r->from_history++;
        if (sink->saw_live)
            r->history_after_live++;
    } else {
        sink->saw_live = true;
    }
    r->received++;
    pthread_cond_broadcast(&sink->cond);
    pthread_mutex_unlock(&sink->lock);
}

/* Waits until writer's samples reach want; false after 60 s. */
static inline bool dds_sink_wait(struct dds_sink *sink, uint32_t writer, uint64_t want)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    pthread_mutex_lock(&sink->lock);
    int rc = 0;
    while (sink->report.per_writer[writer] < want && rc == 0)
        rc = pthread_cond_timedwait(&sink->cond, &sink->lock, &deadline);
    bool reached = sink->report.per_writer[writer] >= want;
    pthread_mutex_unlock(&sink->lock);
    return reached;
}

static inline struct dds_report dds_sink_get(struct dds_sink *sink)
{
    pthread_mutex_lock(&sink->lock);
    struct dds_report r = sink->report;
    pthread_mutex_unlock(&sink->lock);
    return r;
}

/* Waits (a deadline of 60 s) until the participant's view has `members`. */
static inline bool dds_wait_view(spindle_dds_participant_t *p, uint32_t members)
{
    for (int waited_ms = 0; waited_ms < 60000; waited_ms++) {
        if (spindle_dds_participant_view_size(p) == members)
            return true;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL); /* polls a condition; the deadline bounds it */
    }
    return false;
}

/* "[dds] group ... [participant.N] port ..." with n fresh loopback ports;
 * topics are appended by the caller. */
static inline void dds_config_head(char *text, size_t size, uint32_t n, const char *founders)
{
    int at = snprintf(text, size, "[dds]\ngroup = dds-test-%d\nfailure_timeout_ms = 1000\n%s%s\n",
                      (int)getpid(), founders != NULL ? "founders = " : "",
                      founders != NULL ? founders : "");
    for (uint32_t i = 0; i < n; i++)
        at += snprintf(text + at, size - (size_t)at, "[participant.%u]\nname = p%u\nport = %u\n", i,
                       i, test_free_port());
}

typedef int (*dds_role_fn)(uint32_t id, const struct spindle_dds_config *config, int report_fd,
                           int signal_fd, void *arg);

struct dds_forked {
    pid_t pid;
    int report_fd; /* parent reads the report */
    int signal_fd; /* parent reads progress bytes */
};

static inline void dds_fork(struct dds_forked *out, uint32_t id,
                            const struct spindle_dds_config *config, dds_role_fn fn, void *arg)
{
    int report[2], signal_pipe[2];
    assert_int_equal(pipe(report), 0);
    assert_int_equal(pipe(signal_pipe), 0);
    out->pid = fork();
    assert_true(out->pid >= 0);
    if (out->pid == 0) {
        alarm(90);
        close(report[0]);
        close(signal_pipe[0]);
        _exit(fn(id, config, report[1], signal_pipe[1], arg));
    }
    close(report[1]);
    close(signal_pipe[1]);
    out->report_fd = report[0];
    out->signal_fd = signal_pipe[0];
}

/* Collects a participant's report (if it sends one) and checks its exit:
 * true when it exited with 0 and reported. */
static inline bool dds_collect(struct dds_forked *f, struct dds_report *report)
{
    memset(report, 0, sizeof *report);
    ssize_t got = read(f->report_fd, report, sizeof *report);
    close(f->report_fd);
    close(f->signal_fd);
    int status = 0;
    assert_int_equal(waitpid(f->pid, &status, 0), f->pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "participant pid %d: status 0x%x\n", (int)f->pid, status);
        return false;
    }
    return got == (ssize_t)sizeof *report;
}

/* The sample writer w writes as its seq-th: a length and bytes of both. */
static inline size_t dds_sample_fill(uint8_t *out, uint32_t writer, uint64_t seq)
{
    size_t length = 16 + (size_t)(seq % 48);
    for (size_t i = 0; i < length; i++)
        out[i] = (uint8_t)(writer * 31u + seq * 7u + i);
    return length;
}

static inline void dds_write_samples(spindle_dds_writer_t *writer, uint32_t id, uint64_t from,
                                     uint64_t to)
{
    for (uint64_t seq = from; seq <= to; seq++) {
        void *slot;
        DDS_CHECK(spindle_dds_writer_loan(writer, 64, false, &slot) == 0, "loan %llu",
                  (unsigned long long)seq);
        size_t length = dds_sample_fill(slot, id, seq);
        int64_t written = spindle_dds_writer_write(writer, length);
        DDS_CHECK(written == (int64_t)seq, "write %llu returned %lld", (unsigned long long)seq,
                  (long long)written);
    }
}

static inline void dds_send_report(int fd, const struct dds_report *report)
{
    DDS_CHECK(write(fd, report, sizeof *report) == (ssize_t)sizeof *report, "report");
}

/* A role's end: once the participant's view has `members`, the group
 * shuts down together, the participant is destroyed and the sink's report
 * is sent. Returns the role's exit status (0). */
static inline int dds_role_finish(spindle_dds_participant_t *p, uint32_t members,
                                  struct dds_sink *sink, int report_fd)
{
    DDS_CHECK(dds_wait_view(p, members), "a view of %u members", members);
    DDS_CHECK(spindle_dds_participant_shutdown(p, 30000) == 0, "shutdown");
    spindle_dds_participant_destroy(p);
    struct dds_report report = dds_sink_get(sink);
    dds_send_report(report_fd, &report);
    return 0;
}

#endif
