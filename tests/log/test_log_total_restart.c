/*
 * Total restart from the logs (docs/LOGS.md "Total restart"), with real
 * processes: three members over shm and a loopback TCP bootstrap, one
 * logged atomic subgroup in which all three send. Each process keeps an
 * application state built from the messages in order (their count and a
 * running CRC-32C), from the replay upcall and from deliveries.
 *
 * 1. The three stream until the global persistence frontier has passed
 *    PERSISTED positions; then all three are killed with SIGKILL at once.
 * 2. Member 2 alone restarts: a minority of the latest view, it waits,
 *    says for whom, and spindle_group_create fails with SPINDLE_ETIMEDOUT
 *    naming the members it did not hear; its log is unchanged.
 * 3. Members 0 and 1 restart: a majority; they elect one of them, which
 *    restarts the group from its log, and the other joins it; then member
 *    2 restarts and joins the running group. Each gets its member id back.
 *    Each sends AFTER more messages and waits for everyone's.
 * 4. All three end with the same state; their logs hold the same messages
 *    in the same order; the messages before the restart are exactly one
 *    killed member's log (nothing that was never delivered appears), and
 *    include every message below the frontier reported before the kill.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spindle/spindle.h>

#include "log/log.h"
#include "test_ports.h"
#include "util/crc32c.h"

#define MEMBERS    3
#define FAILURE_MS 1000
#define PAYLOAD    104
#define PERSISTED  1500 /* positions of view 0 globally persistent before the kill */
#define AFTER      300  /* messages each member sends after the restart */

static const uint32_t everyone[MEMBERS] = {0, 1, 2};
static char root[64];
static char members[96];

/* What the killed members reported, in memory shared with the parent. */
struct reported {
    uint64_t view, seq; /* the latest global persistence frontier */
};
static struct reported *reported;

struct state {
    uint64_t count;
    uint32_t crc;
    uint32_t pad;
};

struct app {
    pthread_mutex_t lock;
    struct state state;
    uint64_t after[MEMBERS]; /* messages sent after the restart, by sender */
    uint32_t self;
    uint32_t view_members;
};

/* The payload: the life it was sent in (1, 2), its sender, its number. */
struct payload {
    uint64_t life;
    uint64_t sender;
    uint64_t index;
    uint8_t fill[PAYLOAD - 24];
};

static void apply(struct app *app, const void *data, size_t length)
{
    app->state.crc = sp_crc32c(app->state.crc, data, length);
    app->state.count++;
    struct payload p;
    if (length == sizeof p) {
        memcpy(&p, data, sizeof p);
        if (p.life == 2 && p.sender < MEMBERS)
            app->after[p.sender]++;
    }
}

static void on_deliver(void *ctx, const struct spindle_message *m, size_t count)
{
    struct app *app = ctx;
    pthread_mutex_lock(&app->lock);
    for (size_t i = 0; i < count; i++)
        apply(app, m[i].data, m[i].length);
    pthread_mutex_unlock(&app->lock);
}

static int on_replay(void *ctx, const struct spindle_replayed *item)
{
    struct app *app = ctx;
    pthread_mutex_lock(&app->lock);
    if (item->kind == SPINDLE_REPLAY_SNAPSHOT && item->length == 0)
        memset(&app->state, 0, sizeof app->state); /* start over */
    else if (item->kind == SPINDLE_REPLAY_MESSAGE)
        apply(app, item->data, item->length);
    pthread_mutex_unlock(&app->lock);
    return item->kind == SPINDLE_REPLAY_SNAPSHOT && item->length > 0 ? SPINDLE_EINVAL : 0;
}

static void on_persisted(void *ctx, uint32_t subgroup, uint64_t view_id, uint64_t frontier)
{
    struct app *app = ctx;
    (void)subgroup;
    struct reported *r = &reported[app->self];
    __atomic_store_n(&r->seq, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&r->view, view_id, __ATOMIC_RELEASE);
    __atomic_store_n(&r->seq, frontier, __ATOMIC_RELEASE);
}

static void on_view(void *ctx, const struct spindle_view_info *view)
{
    struct app *app = ctx;
    pthread_mutex_lock(&app->lock);
    app->view_members = view->num_members;
    pthread_mutex_unlock(&app->lock);
}

static int created_rc; /* open_member's spindle_group_create */

static spindle_group_t *open_member(struct app *app, uint32_t self, uint64_t incarnation,
                                    int timeout_ms)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/m%u", root, self);
    static const uint32_t logged[] = {0};
    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.bootstrap = members;
    o.self = self;
    o.num_members = MEMBERS;
    o.failure_timeout_ms = FAILURE_MS;
    o.bootstrap_timeout_ms = timeout_ms;
    o.tolerate_failures = true;
    o.deliver = on_deliver;
    o.deliver_ctx = app;
    o.replay = on_replay;
    o.replay_ctx = app;
    o.persisted = on_persisted;
    o.persisted_ctx = app;
    o.view_changed = on_view;
    o.view_ctx = app;
    o.log_dir = dir;
    o.logged_subgroups = logged;
    o.num_logged_subgroups = 1;
    o.incarnation = incarnation;
    o.admin_dir = "off";
    struct spindle_subgroup_config sg = {everyone, MEMBERS, everyone,           MEMBERS,
                                         16,       PAYLOAD, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    created_rc = spindle_group_create(&o, &sg, 1, &g);
    if (created_rc != 0) {
        fprintf(stderr, "member %u: %s\n", self, spindle_errmsg());
        return NULL;
    }
    return g;
}

static int send_one(spindle_group_t *g, uint64_t life, uint32_t self, uint64_t index)
{
    struct payload p;
    memset(&p, (int)(index * 7u + self), sizeof p);
    p.life = life;
    p.sender = self;
    p.index = index;
    return spindle_send(g, 0, &p, sizeof p, 0);
}

/* First life: streams until killed. */
static int first_life(uint32_t self, int up)
{
    struct app app = {.lock = PTHREAD_MUTEX_INITIALIZER, .self = self};
    spindle_group_t *g = open_member(&app, self, 1, 60000);
    if (g == NULL)
        return 10;
    if (spindle_barrier(g, 60000) != 0)
        return 11;
    if (write(up, "x", 1) != 1)
        return 12;
    for (uint64_t i = 0;; i++)
        if (send_one(g, 1, self, i) != 0) {
            fprintf(stderr, "member %u: send: %s\n", self, spindle_errmsg());
            return 13;
        }
}

/* What a restarted member reports. */
struct second_life {
    int32_t create_rc;
    int32_t self;
    bool waited_said; /* a minority's "waiting for a majority" line */
    char why[400];
    struct state end;
};

static bool waiting_said;

static void sink(void *ctx, enum spindle_log_level level, const char *module, const char *line)
{
    (void)ctx;
    (void)level;
    if (strcmp(module, "restart") == 0 && strstr(line, "waiting for a majority of view") != NULL)
        waiting_said = true;
}

static int second_life(uint32_t self, int timeout_ms, int out, int go)
{
    struct app app = {.lock = PTHREAD_MUTEX_INITIALIZER, .self = self};
    struct second_life r;
    memset(&r, 0, sizeof r);
    spindle_log_set_sink(sink, NULL);
    spindle_group_t *g = open_member(&app, self, 2, timeout_ms);
    r.create_rc = created_rc;
    r.waited_said = waiting_said;
    snprintf(r.why, sizeof r.why, "%s", g == NULL ? spindle_errmsg() : "");
    r.self = g != NULL ? spindle_group_self(g) : -1;
    if (g == NULL) {
        /* Report, then end. */
        return write(out, &r, sizeof r) == (ssize_t)sizeof r ? 0 : 20;
    }
    if (write(out, &r, sizeof r) != (ssize_t)sizeof r)
        return 21;
    for (uint64_t i = 0; i < AFTER; i++)
        if (send_one(g, 2, self, i) != 0) {
            fprintf(stderr, "member %u: send: %s\n", self, spindle_errmsg());
            return 22;
        }
    for (int i = 0; i < 120000; i++) {
        pthread_mutex_lock(&app.lock);
        bool done = app.after[0] >= AFTER && app.after[1] >= AFTER && app.after[2] >= AFTER;
        pthread_mutex_unlock(&app.lock);
        if (done)
            break;
        usleep(1000);
    }
    pthread_mutex_lock(&app.lock);
    r.end = app.state;
    bool done = app.after[0] == AFTER && app.after[1] == AFTER && app.after[2] == AFTER;
    pthread_mutex_unlock(&app.lock);
    if (!done)
        return 23;
    if (write(out, &r, sizeof r) != (ssize_t)sizeof r)
        return 24;
    char byte;
    if (read(go, &byte, 1) != 1)
        return 25;
    int rc = spindle_group_shutdown(g, 30000);
    spindle_group_destroy(g);
    return rc == 0 ? 0 : 26;
}

/* The messages of a log directory, in order. */
struct entry {
    uint64_t view, seq;
    uint32_t crc;
};

static size_t read_log(uint32_t member, struct entry *out, size_t cap, uint64_t *records)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/m%u", root, member);
    struct log *log = NULL;
    assert_int_equal(log_open(dir, 0, &log, NULL), 0);
    struct log_reader reader;
    assert_int_equal(log_reader_open(&reader, log), 0);
    struct log_record record;
    size_t n = 0;
    uint64_t all = 0;
    int rc;
    while ((rc = log_reader_next(&reader, &record)) == 1) {
        all++;
        if (record.type != LOG_REC_MESSAGE)
            continue;
        assert_true(n < cap);
        out[n++] = (struct entry){record.message.view_id, record.message.seq,
                                  sp_crc32c(0, record.message.payload, record.message.length)};
    }
    assert_int_equal(rc, 0);
    log_reader_close(&reader);
    log_close(log);
    if (records != NULL)
        *records = all;
    return n;
}

static pid_t spawn_second(uint32_t self, int timeout_ms, int out[2], int go[2])
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(180);
        _exit(second_life(self, timeout_ms, out[1], go[0]));
    }
    return pid;
}

static void read_report(int fd, struct second_life *r)
{
    assert_int_equal(read(fd, r, sizeof *r), (ssize_t)sizeof *r);
}

static void wait_exit(pid_t pid, int want)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != want)
        fail_msg("process %d: status 0x%x, expected exit %d", (int)pid, status, want);
}

static void test_the_group_restarts_from_its_logs_once_a_majority_is_back(void **unused)
{
    (void)unused;
    strcpy(root, "/tmp/spindle-test-total-XXXXXX");
    assert_non_null(mkdtemp(root));
    snprintf(members, sizeof members, "127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u", test_free_port(),
             test_free_port(), test_free_port());
    reported = mmap(NULL, MEMBERS * sizeof *reported, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(reported != MAP_FAILED);
    memset(reported, 0, MEMBERS * sizeof *reported);

    /* 1: stream, then kill -9 everyone once enough is globally persistent. */
    int up[2];
    assert_int_equal(pipe(up), 0);
    pid_t first[MEMBERS];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        first[i] = fork();
        assert_true(first[i] >= 0);
        /* One process group, killed by one call: all three stop at once,
         * none lives on to start a view change without the others. */
        pid_t group = i == 0 ? 0 : first[0];
        if (first[i] == 0) {
            setpgid(0, group);
            alarm(180);
            _exit(first_life(i, up[1]));
        }
        setpgid(first[i], i == 0 ? first[i] : first[0]);
    }
    char byte;
    for (int i = 0; i < MEMBERS; i++)
        assert_int_equal(read(up[0], &byte, 1), 1);
    bool enough = false;
    for (int i = 0; i < 60000 && !enough; i++) {
        for (int k = 0; k < MEMBERS; k++)
            enough |= __atomic_load_n(&reported[k].seq, __ATOMIC_ACQUIRE) >= PERSISTED;
        if (!enough)
            usleep(1000);
    }
    assert_int_equal(kill(-first[0], SIGKILL), 0);
    if (!enough)
        fail_msg("no frontier reached %d: %llu, %llu, %llu", PERSISTED,
                 (unsigned long long)reported[0].seq, (unsigned long long)reported[1].seq,
                 (unsigned long long)reported[2].seq);
    for (int i = 0; i < MEMBERS; i++) {
        int status = 0;
        assert_int_equal(waitpid(first[i], &status, 0), first[i]);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    }
    /* The latest frontier anyone reported: every log holds what is below. */
    struct reported frontier = {0, 0};
    for (int k = 0; k < MEMBERS; k++)
        if (reported[k].view > frontier.view ||
            (reported[k].view == frontier.view && reported[k].seq > frontier.seq))
            frontier = reported[k];
    size_t cap = 200000;
    struct entry *before[MEMBERS];
    size_t nb[MEMBERS];
    uint64_t records2 = 0;
    for (uint32_t i = 0; i < MEMBERS; i++) {
        before[i] = calloc(cap, sizeof *before[i]);
        assert_non_null(before[i]);
        nb[i] = read_log(i, before[i], cap, i == 2 ? &records2 : NULL);
    }

    /* 2: member 2 alone waits, and gives up naming whom it waited for. */
    int out[2], go[2];
    assert_int_equal(pipe(out), 0);
    assert_int_equal(pipe(go), 0);
    /* A timeout below the 3 s between waiting reports: the report must
     * come anyway, however the rounds fall. */
    pid_t alone = spawn_second(2, 2000, out, go);
    struct second_life minority;
    read_report(out[0], &minority);
    wait_exit(alone, 0);
    assert_int_equal(minority.create_rc, SPINDLE_ETIMEDOUT);
    assert_non_null(strstr(minority.why, "of the 3 members of view 0, more than half"));
    assert_non_null(strstr(minority.why, "1 voted for this member, which votes for member 2"));
    assert_non_null(strstr(minority.why, "not heard: 0 (127.0.0.1:"));
    assert_true(minority.waited_said);
    uint64_t records2_after = 0;
    struct entry *scratch = calloc(cap, sizeof *scratch);
    assert_non_null(scratch);
    assert_int_equal(read_log(2, scratch, cap, &records2_after), nb[2]);
    assert_int_equal(records2_after, records2); /* it wrote nothing */

    /* 3: members 0 and 1 restart the group; member 2 joins it later. */
    pid_t second[MEMBERS];
    struct second_life r[MEMBERS];
    second[0] = spawn_second(0, 60000, out, go);
    second[1] = spawn_second(1, 60000, out, go);
    read_report(out[0], &r[0]);
    read_report(out[0], &r[1]);
    second[2] = spawn_second(2, 60000, out, go);
    read_report(out[0], &r[2]);
    bool self_seen[MEMBERS] = {false};
    for (int i = 0; i < MEMBERS; i++) {
        if (r[i].create_rc != 0)
            fail_msg("a restart failed: %s", r[i].why);
        assert_true(r[i].self >= 0 && r[i].self < MEMBERS);
        self_seen[r[i].self] = true;
    }
    /* Member ids come back: each process forked as member k is k again. */
    for (int i = 0; i < MEMBERS; i++)
        assert_true(self_seen[i]);

    /* 4: everyone's messages; the same state everywhere. */
    struct state ends[MEMBERS];
    for (int i = 0; i < MEMBERS; i++) {
        read_report(out[0], &r[i]);
        ends[i] = r[i].end;
    }
    assert_int_equal(write(go[1], "ggg", MEMBERS), MEMBERS);
    for (int i = 0; i < MEMBERS; i++)
        wait_exit(second[i], 0);
    assert_memory_equal(&ends[0], &ends[1], sizeof ends[0]);
    assert_memory_equal(&ends[0], &ends[2], sizeof ends[0]);

    struct entry *after[MEMBERS];
    size_t na[MEMBERS];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        after[i] = calloc(cap, sizeof *after[i]);
        assert_non_null(after[i]);
        na[i] = read_log(i, after[i], cap, NULL);
    }
    assert_int_equal(na[0], na[1]);
    assert_int_equal(na[0], na[2]);
    assert_memory_equal(after[0], after[1], na[0] * sizeof *after[0]);
    assert_memory_equal(after[0], after[2], na[0] * sizeof *after[0]);
    assert_int_equal(ends[0].count, na[0]);
    /* The recovered part (view 0, the only view before the kill) is one
     * killed member's whole log: nothing that was not delivered. */
    size_t recovered = 0;
    while (recovered < na[0] && after[0][recovered].view == 0)
        recovered++;
    assert_int_equal(na[0] - recovered, MEMBERS * AFTER);
    bool is_one = false;
    for (int i = 0; i < MEMBERS; i++)
        is_one |=
            nb[i] == recovered && memcmp(before[i], after[0], recovered * sizeof *after[0]) == 0;
    assert_true(is_one);
    /* Everything below the reported frontier is in it. */
    assert_int_equal(frontier.view, 0);
    size_t below = 0;
    while (below < nb[0] && before[0][below].seq < frontier.seq)
        below++;
    assert_true(below > 0 && below <= recovered);
    assert_memory_equal(before[0], after[0], below * sizeof *after[0]);
    print_message("killed at frontier %llu; logs held %zu, %zu, %zu messages; recovered %zu\n",
                  (unsigned long long)frontier.seq, nb[0], nb[1], nb[2], recovered);

    for (int i = 0; i < MEMBERS; i++) {
        free(before[i]);
        free(after[i]);
    }
    free(scratch);
    munmap(reported, MEMBERS * sizeof *reported);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_group_restarts_from_its_logs_once_a_majority_is_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
