/*
 * Persistence frontiers (docs/LOGS.md "Persistence frontiers"), three
 * member processes over shm logging subgroup 0, each to its own directory:
 *   - every persisted upcall's frontier is larger than the last (in view
 *     order), no message below it is delivered after it, and at that very
 *     moment (the upcall reads the logs from disk) the log of every member
 *     of the view holds every message below it;
 *   - spindle_flush_persistent returns only once every member's log holds
 *     the caller's messages (read from disk right after it returns), and
 *     times out while the slow member's disk has not synced them;
 *   - a member whose disk is slow (its appender pauses before each
 *     fdatasync) holds the global frontier back while the others' local
 *     frontiers are ahead of it;
 *   - by the end the frontier reaches the last message;
 *   - when a member leaves, the survivors' last frontier of the old view is
 *     the trim their logs recorded with the next view, the leaver no
 *     longer counts, and flushes go on in the next view.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <spindle/spindle.h>

#include "log/log.h"
#include "log/log_append.h"
#include "log_samples.h"
#include "util/clock.h"

#define MEMBERS     3
#define MESSAGES    150 /* per sender and view */
#define MAX_SEQS    4096
#define SLOW_MEMBER 2
#define SLOW_MS     500 /* its pause before each fdatasync */

static char root[64];
static char dirs[MEMBERS][128];

/* One member process's record of what it saw (predicate thread, or the
 * membership thread at a view change: never both at once). */
static uint32_t self;
static uint64_t seqs[2][MAX_SEQS];        /* subgroup 0's delivered seqs, per view */
static uint32_t num_seqs[2];              /* atomic (the test's thread reads them) */
static uint64_t last_view, last_frontier; /* the last upcall */
static uint64_t frontier_of_view[2];      /* the last upcall's frontier per view */
static uint64_t upcalls;                  /* atomic */
static uint64_t view_now;                 /* atomic: the last installed view */
static uint32_t checked_members;          /* whose logs an upcall reads */
static pthread_mutex_t wrong_lock = PTHREAD_MUTEX_INITIALIZER;
static char wrong[512]; /* the first broken rule; "" */

static void broke(const char *fmt, ...)
{
    pthread_mutex_lock(&wrong_lock);
    if (wrong[0] == '\0') {
        va_list args;
        va_start(args, fmt);
        vsnprintf(wrong, sizeof wrong, fmt, args);
        va_end(args);
    }
    pthread_mutex_unlock(&wrong_lock);
}

static bool went_wrong(void)
{
    pthread_mutex_lock(&wrong_lock);
    bool any = wrong[0] != '\0';
    pthread_mutex_unlock(&wrong_lock);
    return any;
}

static void on_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        if (m[i].subgroup != 0 || m[i].view_id > 1)
            continue;
        uint32_t v = (uint32_t)m[i].view_id;
        if (v == last_view && m[i].seq < last_frontier)
            broke("seq %llu of view %u delivered after the frontier passed it (%llu)",
                  (unsigned long long)m[i].seq, v, (unsigned long long)last_frontier);
        uint32_t have = __atomic_load_n(&num_seqs[v], __ATOMIC_RELAXED);
        if (have < MAX_SEQS) {
            seqs[v][have] = m[i].seq;
            __atomic_store_n(&num_seqs[v], have + 1, __ATOMIC_RELEASE);
        }
    }
}

static void on_view(void *ctx, const struct spindle_view_info *view)
{
    (void)ctx;
    __atomic_store_n(&view_now, view->view_id, __ATOMIC_RELEASE);
}

/* Messages of subgroup 0 in view, with seq below bound and (sender >= 0)
 * of that sender, in the log in dir as it is on disk now; -1 when it
 * cannot be read. */
static long logged(const char *dir, uint64_t view, uint64_t bound, int sender)
{
    struct log *log;
    if (log_open(dir, 0, &log, NULL) != 0)
        return -1;
    struct log_reader reader;
    if (log_reader_open(&reader, log) != 0) {
        log_close(log);
        return -1;
    }
    long count = 0;
    struct log_record r;
    int rc;
    while ((rc = log_reader_next(&reader, &r)) == 1)
        if (r.type == LOG_REC_MESSAGE && r.message.subgroup == 0 &&
            (view == UINT64_MAX || r.message.view_id == view) && r.message.seq < bound &&
            (sender < 0 || r.message.sender_id == (uint32_t)sender))
            count++;
    log_reader_close(&reader);
    log_close(log);
    return rc == 0 ? count : -1;
}

static void on_persisted(void *ctx, uint32_t subgroup, uint64_t view, uint64_t frontier)
{
    (void)ctx;
    __atomic_add_fetch(&upcalls, 1, __ATOMIC_RELEASE);
    if (subgroup != 0 || view > 1) {
        broke("upcall for subgroup %u view %llu", subgroup, (unsigned long long)view);
        return;
    }
    if (view < last_view || (view == last_view && frontier <= last_frontier))
        broke("frontier (%llu, %llu) after (%llu, %llu)", (unsigned long long)view,
              (unsigned long long)frontier, (unsigned long long)last_view,
              (unsigned long long)last_frontier);
    last_view = view;
    last_frontier = frontier;
    frontier_of_view[view] = frontier;
    /* Every message below the frontier was delivered here (in seq order),
     * and is in the log of every member of the view that stays, now (a
     * leaver does not count for the old view's last frontier). */
    long delivered = 0;
    for (uint32_t i = 0; i < num_seqs[view]; i++)
        delivered += seqs[view][i] < frontier;
    for (uint32_t i = 0; i < checked_members; i++) {
        long held = logged(dirs[i], view, frontier, -1);
        if (held != delivered)
            broke("view %llu frontier %llu: member %u's log holds %ld messages below it, %ld "
                  "were delivered",
                  (unsigned long long)view, (unsigned long long)frontier, i, held, delivered);
    }
}

static int send_messages(spindle_group_t *g, uint32_t count)
{
    char text[120];
    for (uint32_t i = 0; i < count; i++) {
        int length = snprintf(text, sizeof text, "member %u message %u", self, i);
        if (spindle_send(g, 0, text, (size_t)length, 0) != 0)
            return -1;
    }
    return 0;
}

/* After spindle_flush_persistent: the first `members` members hold the
 * `count` messages this member sent (in whichever view). */
static int own_messages_logged(uint32_t members, long count)
{
    for (uint32_t i = 0; i < members; i++) {
        long held = logged(dirs[i], UINT64_MAX, UINT64_MAX, (int)self);
        if (held != count) {
            broke("after flush_persistent, member %u's log holds %ld of member %u's %ld messages",
                  i, held, self, count);
            return -1;
        }
    }
    return 0;
}

/* Waits until the global frontier of subgroup 0 equals the local one and
 * everything delivered; *global_behind is set when the local frontier
 * reached the end first while the global one was still short of it. */
static int frontier_reaches_end(spindle_group_t *g, bool *global_behind)
{
    uint64_t deadline = sp_now_ns() + 60000000000ull;
    for (;;) {
        uint64_t view, local, global;
        struct spindle_stats stats;
        if (spindle_group_persisted(g, 0, &view, &local, &global) != 0 ||
            spindle_group_stats(g, &stats) != 0)
            return -1;
        uint32_t n = __atomic_load_n(&num_seqs[view], __ATOMIC_ACQUIRE);
        uint64_t end = n > 0 ? seqs[view][n - 1] + 1 : 0;
        if (local >= end && global < local && global_behind != NULL)
            *global_behind = true;
        if (global > local)
            broke("global frontier %llu passed the local one %llu", (unsigned long long)global,
                  (unsigned long long)local);
        if (global >= end && global == local && end > 0)
            return 0;
        if (sp_now_ns() > deadline)
            return -1;
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
}

/* The scenario of one member; returns its exit status. Member 2's disk
 * is slow. leave: after a first round, members 0 and 1 send a second
 * one while member 2 leaves, and a third in view 1. */
static int member(const char *bootstrap, bool leave)
{
    static const uint32_t ids[MEMBERS] = {0, 1, 2};
    static const uint32_t logged_subgroups[] = {0};
    if (self == SLOW_MEMBER)
        log_test_delay_syncs(SLOW_MS);
    checked_members = leave ? MEMBERS - 1 : MEMBERS;
    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.self = self;
    o.num_members = MEMBERS;
    o.bootstrap = bootstrap;
    o.log_dir = dirs[self];
    o.logged_subgroups = logged_subgroups;
    o.num_logged_subgroups = 1;
    o.deliver = on_deliver;
    o.persisted = on_persisted;
    o.view_changed = on_view;
    o.tolerate_failures = leave;
    struct spindle_subgroup_config sg[2] = {
        {ids, MEMBERS, ids, MEMBERS, 16, 100, SPINDLE_MODE_ATOMIC},
        {ids, MEMBERS, ids, MEMBERS, 16, 100, SPINDLE_MODE_ATOMIC},
    };
    spindle_group_t *g;
    if (spindle_group_create(&o, sg, 2, &g) != 0 || spindle_barrier(g, 30000) != 0)
        return 2;
    if (spindle_flush_persistent(g, 1, 1000) != SPINDLE_EINVAL ||
        strstr(spindle_errmsg(), "subgroup 1 is not a logged subgroup") == NULL)
        return 3;
    if (send_messages(g, MESSAGES) != 0)
        return 4;
    /* The slow member's next fdatasync is at least SLOW_MS away. */
    if (spindle_flush_persistent(g, 0, 1) != SPINDLE_ETIMEDOUT)
        return 17;
    if (!leave && self != SLOW_MEMBER) {
        /* This member's frontier gets to the end of what it delivered
         * while the slow one holds the global frontier back. */
        bool global_behind = false;
        if (spindle_flush(g, 30000) != 0 || frontier_reaches_end(g, &global_behind) != 0)
            return 5;
        if (!global_behind)
            return 6;
    }
    if (spindle_flush_persistent(g, SPINDLE_ALL_SUBGROUPS, 60000) != 0)
        return 7;
    if (own_messages_logged(MEMBERS, MESSAGES) != 0)
        return 8;
    if (spindle_barrier(g, 30000) != 0 || frontier_reaches_end(g, NULL) != 0)
        return 9;
    if (leave && self == SLOW_MEMBER) {
        int rc = spindle_group_leave(g, 30000);
        spindle_group_destroy(g);
        return rc == 0 ? 0 : 10;
    }
    if (leave) {
        /* The second round meets the change: what view 0 delivered of it
         * its trim closes, the rest is resent in view 1; the wait goes on
         * there, without the leaver. */
        if (send_messages(g, MESSAGES) != 0 || spindle_flush_persistent(g, 0, 60000) != 0)
            return 11;
        uint64_t deadline = sp_now_ns() + 30000000000ull;
        while (__atomic_load_n(&view_now, __ATOMIC_ACQUIRE) < 1)
            if (sp_now_ns() > deadline)
                return 12;
        if (own_messages_logged(MEMBERS - 1, 2 * MESSAGES) != 0)
            return 13;
        if (send_messages(g, MESSAGES / 3) != 0 || spindle_flush_persistent(g, 0, 60000) != 0 ||
            own_messages_logged(MEMBERS - 1, 2 * MESSAGES + MESSAGES / 3) != 0)
            return 14;
        if (spindle_barrier(g, 30000) != 0 || frontier_reaches_end(g, NULL) != 0)
            return 15;
    }
    if (spindle_group_shutdown(g, 10000) != 0)
        return 16;
    spindle_group_destroy(g);
    return 0;
}

/* The view record of view 1 in this member's log: its trim of subgroup
 * 0 (the old view's delivered_num there), or UINT64_MAX. */
static uint64_t logged_trim(void)
{
    struct log *log;
    uint64_t trim = UINT64_MAX;
    if (log_open(dirs[self], 0, &log, NULL) != 0)
        return trim;
    struct log_reader reader;
    if (log_reader_open(&reader, log) == 0) {
        struct log_record r;
        while (log_reader_next(&reader, &r) == 1)
            if (r.type == LOG_REC_VIEW && r.view.view_id == 1 && r.view.subgroup_count > 0)
                trim = r.view.delivered_through[0];
        log_reader_close(&reader);
    }
    log_close(log);
    return trim;
}

static int member_main(const char *bootstrap, bool leave)
{
    int status = member(bootstrap, leave);
    if (status == 0 && leave && self != SLOW_MEMBER) {
        /* The old view's last frontier is its trim, as logged. */
        uint64_t trim = logged_trim();
        if (frontier_of_view[0] != trim) {
            broke("view 0's last frontier %llu, its trim %llu",
                  (unsigned long long)frontier_of_view[0], (unsigned long long)trim);
            status = 20;
        }
    }
    if (went_wrong()) {
        fprintf(stderr, "member %u: %s\n", self, wrong);
        return status != 0 ? status : 21;
    }
    if (status == 0 && __atomic_load_n(&upcalls, __ATOMIC_ACQUIRE) == 0)
        return 22;
    if (status != 0)
        fprintf(stderr, "member %u: status %d (%s)\n", self, status, spindle_errmsg());
    return status;
}

static void run_members(const char *name, bool leave)
{
    char bootstrap[128];
    snprintf(bootstrap, sizeof bootstrap, "%s/%s", root, name);
    for (uint32_t i = 0; i < MEMBERS; i++)
        snprintf(dirs[i], sizeof dirs[i], "%s/%s-member-%u", root, name, i);
    pid_t pids[MEMBERS];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(120); /* a hang ends the member and fails the test */
            self = i;
            _exit(member_main(bootstrap, leave));
        }
    }
    for (uint32_t i = 0; i < MEMBERS; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("member %u: status 0x%x", i, status);
    }
}

static void test_a_slow_disk_holds_the_global_frontier_back(void **state)
{
    (void)state;
    run_members("slow", false);
}

static void test_a_leaver_no_longer_counts_and_the_trim_closes_its_view(void **state)
{
    (void)state;
    run_members("leave", true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_slow_disk_holds_the_global_frontier_back),
        cmocka_unit_test(test_a_leaver_no_longer_counts_and_the_trim_closes_its_view),
    };
    return SAMPLE_RUN_IN_ROOT(root, "spindle-frontier", tests);
}
