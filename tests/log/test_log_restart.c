/*
 * Restart of one member from its log after the others compacted theirs
 * (docs/LOGS.md "Restart of one member"), with real processes: two members
 * and a joiner over shm and a loopback TCP bootstrap, one logged atomic
 * subgroup, 16 KiB log segments. Each process keeps an application state
 * built from the messages in order (their count and a running CRC-32C of
 * the payloads), the members snapshot it every SNAPSHOT_EVERY messages.
 *
 * 1. The joiner joins fresh (an empty log directory): it is sent the
 *    leader's whole log, replays it and delivers on; it then dies without
 *    a shutdown (_exit) after PHASE1 messages.
 * 2. The members go on for PHASE2 messages, taking snapshots: their logs
 *    are compacted past where the dead joiner's log ends.
 * 3. The joiner starts again (a larger incarnation, the same directory):
 *    it replays its own log, is then sent a reset (the leader's newest
 *    snapshot and the records after it, no more), and its state after
 *    spindle_group_create equals the members' at its join.
 * 4. PHASE3 more messages: all three end with the same state; the joiner's
 *    log holds, in order, exactly what the leader's holds over the same
 *    points, and what it was sent is bounded by the snapshot and the
 *    records after it.
 *
 * Two more runs check the choice between a suffix and a snapshot when the
 * leader's log still holds the suffix (snapshots every 500 messages, the
 * joiner's log made durable before it dies at 600, back at 1000): with a
 * small snapshot it is sent the snapshot and nothing else; with a
 * snapshot padded to 1 MiB, the 400 missing messages (about 104 KB).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <spindle/spindle.h>

#include "group/group_impl.h"
#include "log/log.h"
#include "log/log_catchup.h"
#include "test_ports.h"
#include "util/crc32c.h"

#define MEMBERS        2
#define FAILURE_MS     5000
#define PAYLOAD        200
#define SEGMENT_BYTES  (16u << 10)
#define SNAPSHOT_EVERY (sc.snapshot_every)
#define PHASE1         (sc.phases[0])
#define PHASE2         (sc.phases[1])
#define PHASE3         (sc.phases[2])
#define DIED           7
/* Bounds on every wait, so that a stuck process fails the test with what
 * it waited for well inside ctest's 240 s for the three runs: a child's own
 * wait (a count, its log, the bootstrap), the parent's wait for one run,
 * and the alarm that ends a child the parent can no longer end. */
#define CHILD_WAIT_MS 45000
#define RUN_WAIT_MS   70000
#define CHILD_ALARM_S 75

static const uint32_t everyone[MEMBERS] = {0, 1};

/* The run's shape, set before the processes are forked. */
struct scenario {
    uint64_t snapshot_every;
    uint64_t phases[3];
    size_t state_pad; /* zero bytes after the state in each snapshot */
};
static struct scenario sc;
static char root[64];

/* The application's state: what every process must agree on. */
struct state {
    uint64_t count;
    uint32_t crc;
    uint32_t pad;
};

struct app {
    pthread_mutex_t lock;
    struct state state;
    /* A snapshot due (taken by the main thread): the state after the
     * message at (view, seq). */
    bool due;
    struct state snap_state;
    uint64_t snap_view, snap_seq;
    bool snapshots;
    uint64_t delivered; /* messages delivered (not replayed) */
    /* replay */
    bool replay_wrong;
    uint64_t received_messages, received_snapshots;
    struct state received_snapshot;
};

static void apply(struct app *app, const void *data, size_t length)
{
    app->state.crc = sp_crc32c(app->state.crc, data, length);
    app->state.count++;
}

static void on_deliver(void *ctx, const struct spindle_message *m, size_t count)
{
    struct app *app = ctx;
    pthread_mutex_lock(&app->lock);
    for (size_t i = 0; i < count; i++) {
        apply(app, m[i].data, m[i].length);
        app->delivered++;
        if (app->snapshots && app->state.count % SNAPSHOT_EVERY == 0) {
            app->due = true;
            app->snap_state = app->state;
            app->snap_view = m[i].view_id;
            app->snap_seq = m[i].seq + 1;
        }
    }
    pthread_mutex_unlock(&app->lock);
}

static int on_replay(void *ctx, const struct spindle_replayed *item)
{
    struct app *app = ctx;
    pthread_mutex_lock(&app->lock);
    if (item->kind == SPINDLE_REPLAY_SNAPSHOT) {
        if (item->length == 0) {
            memset(&app->state, 0, sizeof app->state);
        } else if (item->length == sizeof app->state + sc.state_pad) {
            memcpy(&app->state, item->data, sizeof app->state);
            if (item->received) {
                app->received_snapshots++;
                app->received_snapshot = app->state;
            }
        } else {
            app->replay_wrong = true;
        }
    } else {
        apply(app, item->data, item->length);
        app->received_messages += item->received;
    }
    pthread_mutex_unlock(&app->lock);
    return 0;
}

static struct state state_of(struct app *app)
{
    pthread_mutex_lock(&app->lock);
    struct state s = app->state;
    pthread_mutex_unlock(&app->lock);
    return s;
}

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Takes the snapshot the deliveries asked for, if any. */
static int snapshot_if_due(spindle_group_t *g, struct app *app)
{
    pthread_mutex_lock(&app->lock);
    bool due = app->due;
    struct state s = app->snap_state;
    uint64_t view = app->snap_view, seq = app->snap_seq;
    app->due = false;
    pthread_mutex_unlock(&app->lock);
    if (!due)
        return 0;
    uint8_t *bytes = calloc(1, sizeof s + sc.state_pad);
    if (bytes == NULL)
        return SPINDLE_ENOMEM;
    memcpy(bytes, &s, sizeof s);
    int rc = spindle_group_snapshot(g, 0, view, seq, bytes, sizeof s + sc.state_pad);
    free(bytes);
    return rc;
}

static spindle_group_t *open_member(struct app *app, const char *bootstrap, const char *join,
                                    uint32_t self, const char *name, uint64_t incarnation)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    static const uint32_t logged[] = {0};
    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.bootstrap = bootstrap;
    o.join = join;
    o.self = self;
    if (join == NULL)
        o.num_members = MEMBERS;
    o.failure_timeout_ms = FAILURE_MS;
    o.bootstrap_timeout_ms = CHILD_WAIT_MS;
    o.tolerate_failures = true;
    o.deliver = on_deliver;
    o.deliver_ctx = app;
    o.replay = on_replay;
    o.replay_ctx = app;
    o.log_dir = dir;
    o.logged_subgroups = logged;
    o.num_logged_subgroups = 1;
    o.member_name = name;
    o.incarnation = incarnation;
    struct spindle_subgroup_config sg = {
        everyone, join != NULL ? 1 : MEMBERS, everyone, join != NULL ? 0 : MEMBERS, 16,
        PAYLOAD,  SPINDLE_MODE_ATOMIC};
    struct group_test_options test = {.log_segment_bytes = SEGMENT_BYTES};
    spindle_group_t *g = NULL;
    if (group_create_with(&o, &sg, 1, &test, &g) != 0) {
        fprintf(stderr, "%s: %s\n", name, spindle_errmsg());
        return NULL;
    }
    return g;
}

/* Waits until the state holds count messages, taking due snapshots. */
static int await_count(spindle_group_t *g, struct app *app, uint64_t count)
{
    int64_t deadline = now_ms() + CHILD_WAIT_MS;
    while (now_ms() < deadline) {
        if (snapshot_if_due(g, app) < 0) {
            fprintf(stderr, "snapshot: %s\n", spindle_errmsg());
            return -1;
        }
        if (state_of(app).count >= count)
            return snapshot_if_due(g, app); /* the last delivery may have asked for one */
        usleep(1000);
    }
    fprintf(stderr, "pid %d: %llu of %llu messages after %d ms\n", (int)getpid(),
            (unsigned long long)state_of(app).count, (unsigned long long)count, CHILD_WAIT_MS);
    return -1;
}

static int send_messages(spindle_group_t *g, struct app *app, uint64_t from, uint64_t count)
{
    uint8_t payload[PAYLOAD];
    for (uint64_t i = from; i < from + count; i++) {
        memset(payload, (int)(i * 31u), sizeof payload);
        memcpy(payload, &i, sizeof i);
        if (spindle_send(g, 0, payload, sizeof payload, 0) != 0) {
            fprintf(stderr, "send %llu: %s\n", (unsigned long long)i, spindle_errmsg());
            return -1;
        }
        if (snapshot_if_due(g, app) < 0)
            return -1;
    }
    return 0;
}

/* Control between the parent and a process: one byte each way. */
struct pipes {
    int up[2], go[2], out[2];
};

static void say(int fd)
{
    if (write(fd, "x", 1) != 1)
        _exit(90);
}

static void hear(int fd)
{
    char byte;
    if (read(fd, &byte, 1) != 1)
        _exit(91);
}

/* A member: up; sends (member 0) or follows phase by phase; reports its
 * state on out and shuts down. */
static int member_main(const char *members, uint32_t self, struct pipes *p)
{
    struct app app = {.lock = PTHREAD_MUTEX_INITIALIZER, .snapshots = true};
    char name[16];
    snprintf(name, sizeof name, "m%u", self);
    spindle_group_t *g = open_member(&app, members, NULL, self, name, 1);
    if (g == NULL)
        return 2;
    say(p->up[1]);
    uint64_t sent = 0, phases[] = {PHASE1, PHASE2, PHASE3};
    for (int phase = 0; phase < 3; phase++) {
        hear(p->go[0]);
        if (self == 0 && send_messages(g, &app, sent, phases[phase]) < 0)
            return 3;
        sent += phases[phase];
        if (await_count(g, &app, sent) < 0)
            return 4;
        say(p->up[1]);
    }
    struct state s = state_of(&app);
    if (write(p->out[1], &s, sizeof s) != (ssize_t)sizeof s)
        return 5;
    hear(p->go[0]);
    int rc = spindle_group_shutdown(g, 30000);
    spindle_group_destroy(g);
    return rc == 0 ? 0 : 6;
}

/* The joiner's first life: joins fresh, delivers PHASE1 messages, dies. */
static int first_life_main(const char *contact, const char *self)
{
    struct app app = {.lock = PTHREAD_MUTEX_INITIALIZER};
    spindle_group_t *g = open_member(&app, self, contact, 0, "j", 1);
    if (g == NULL)
        return 20;
    if (await_count(g, &app, PHASE1) < 0)
        return 21;
    /* Its log holds them all before it dies (its catch-up, its view, the
     * messages): where it ends is then known. */
    struct spindle_stats stats;
    for (int64_t deadline = now_ms() + CHILD_WAIT_MS;; usleep(1000)) {
        spindle_group_stats(g, &stats);
        pthread_mutex_lock(&app.lock);
        uint64_t delivered = app.delivered;
        pthread_mutex_unlock(&app.lock);
        /* What it was sent, the record of its view, what it delivered. */
        uint64_t want = stats.log_catchup_records + 1 + delivered;
        if (stats.log_records_durable >= want)
            break;
        if (now_ms() >= deadline) {
            fprintf(stderr, "the joiner's first life: %llu of %llu records durable after %d ms\n",
                    (unsigned long long)stats.log_records_durable, (unsigned long long)want,
                    CHILD_WAIT_MS);
            return 22;
        }
    }
    _exit(DIED); /* no shutdown: a crash, as far as its log knows */
}

/* What the restarted joiner reports. */
struct second_life {
    struct state at_join, end, received_snapshot;
    uint64_t received_snapshots, received_messages;
    uint64_t catchup_records, catchup_bytes;
    bool replay_wrong;
};

static int second_life_main(const char *contact, const char *self, struct pipes *p)
{
    struct app app = {.lock = PTHREAD_MUTEX_INITIALIZER};
    spindle_group_t *g = open_member(&app, self, contact, 0, "j", 2);
    if (g == NULL)
        return 30;
    struct second_life r;
    memset(&r, 0, sizeof r);
    r.at_join = state_of(&app);
    say(p->up[1]);
    if (await_count(g, &app, PHASE1 + PHASE2 + PHASE3) < 0)
        return 31;
    struct spindle_stats stats;
    spindle_group_stats(g, &stats);
    pthread_mutex_lock(&app.lock);
    r.end = app.state;
    r.received_snapshot = app.received_snapshot;
    r.received_snapshots = app.received_snapshots;
    r.received_messages = app.received_messages;
    r.replay_wrong = app.replay_wrong;
    pthread_mutex_unlock(&app.lock);
    r.catchup_records = stats.log_catchup_records;
    r.catchup_bytes = stats.log_catchup_bytes;
    if (write(p->out[1], &r, sizeof r) != (ssize_t)sizeof r)
        return 32;
    hear(p->go[0]);
    int rc = spindle_group_shutdown(g, 30000);
    spindle_group_destroy(g);
    return rc == 0 ? 0 : 33;
}

/* The processes of a run, as the parent sees them. The parent waits only
 * through watch_read and watch_exit, which end at the run's deadline and
 * notice a process that exits otherwise than it should, so a stuck or
 * failed process fails the test with what was awaited rather than leaving
 * the parent blocked on a pipe it holds the write end of itself. */
struct proc {
    pid_t pid;
    const char *name;
    int want; /* the exit status it should end with */
    bool exited;
    int status;
};
static struct proc procs[MEMBERS + 2];
static int num_procs;
static int64_t run_deadline;

/* Ends (SIGKILL) and reaps the processes of the run still alive. */
static void end_procs(void)
{
    for (int i = 0; i < num_procs; i++) {
        if (procs[i].exited)
            continue;
        kill(procs[i].pid, SIGKILL);
        while (waitpid(procs[i].pid, &procs[i].status, 0) < 0 && errno == EINTR)
            ;
        procs[i].exited = true;
    }
    num_procs = 0;
}

#define run_fail(...)                                                                              \
    do {                                                                                           \
        end_procs();                                                                               \
        fail_msg(__VA_ARGS__);                                                                     \
    } while (0)

static struct proc *add_proc(pid_t pid, const char *name, int want)
{
    assert_true(pid > 0);
    assert_true(num_procs < (int)(sizeof procs / sizeof procs[0]));
    procs[num_procs] = (struct proc){pid, name, want, false, 0};
    return &procs[num_procs++];
}

/* Reaps whichever processes have exited; fails the run on one that ended
 * otherwise than it should. */
static void reap(const char *awaiting)
{
    for (int i = 0; i < num_procs; i++) {
        struct proc *c = &procs[i];
        if (c->exited || waitpid(c->pid, &c->status, WNOHANG) != c->pid)
            continue;
        c->exited = true;
        if (!WIFEXITED(c->status) || WEXITSTATUS(c->status) != c->want)
            run_fail("%s (pid %d) ended with status 0x%x (expected exit %d) while the test "
                     "awaited %s",
                     c->name, (int)c->pid, c->status, c->want, awaiting);
    }
}

/* Reads size bytes of what the processes report on fd, by the run's deadline. */
static void watch_read(int fd, void *buffer, size_t size, const char *awaiting)
{
    size_t got = 0;
    while (got < size) {
        reap(awaiting);
        int64_t left = run_deadline - now_ms();
        if (left <= 0)
            run_fail("%d s after the run began: still awaiting %s (%zu of %zu bytes)",
                     RUN_WAIT_MS / 1000, awaiting, got, size);
        /* Short slices: a process's exit is noticed within one. */
        struct pollfd pfd = {fd, POLLIN, 0};
        int ready = poll(&pfd, 1, left < 100 ? (int)left : 100);
        if (ready < 0 && errno != EINTR)
            run_fail("poll awaiting %s: %s", awaiting, strerror(errno));
        if (ready <= 0)
            continue;
        ssize_t n = read(fd, (char *)buffer + got, size - got);
        if (n <= 0)
            run_fail("read awaiting %s: %zd", awaiting, n);
        got += (size_t)n;
    }
}

static void watch_hear(int fd, size_t count, const char *awaiting)
{
    char bytes[MEMBERS + 1];
    assert_true(count <= sizeof bytes);
    watch_read(fd, bytes, count, awaiting);
}

/* Waits by the run's deadline for c to exit as it should. */
static void watch_exit(struct proc *c, const char *awaiting)
{
    while (!c->exited) {
        reap(awaiting);
        if (c->exited)
            break;
        if (now_ms() >= run_deadline)
            run_fail("%d s after the run began: still awaiting %s (pid %d)", RUN_WAIT_MS / 1000,
                     awaiting, (int)c->pid);
        usleep(10000); /* no signal to wait on for a child's exit in a cmocka test */
    }
}

static struct proc *spawn(int (*body)(const char *, const char *, struct pipes *), const char *a,
                          const char *b, struct pipes *p, const char *name, int want)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(CHILD_ALARM_S);
        _exit(body(a, b, p));
    }
    return add_proc(pid, name, want);
}

static int first_life(const char *contact, const char *self, struct pipes *p)
{
    (void)p;
    return first_life_main(contact, self);
}

/* The messages of a log directory, in order: (view, seq, payload CRC). */
struct entry {
    uint64_t view, seq;
    uint32_t crc;
};

static size_t read_log(const char *name, struct entry *out, size_t cap)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    struct log *log = NULL;
    assert_int_equal(log_open(dir, 0, &log, NULL), 0);
    struct log_reader reader;
    assert_int_equal(log_reader_open(&reader, log), 0);
    struct log_record record;
    size_t n = 0;
    int rc;
    while ((rc = log_reader_next(&reader, &record)) == 1) {
        if (record.type != LOG_REC_MESSAGE)
            continue;
        assert_true(n < cap);
        out[n++] = (struct entry){record.message.view_id, record.message.seq,
                                  sp_crc32c(0, record.message.payload, record.message.length)};
    }
    assert_int_equal(rc, 0);
    log_reader_close(&reader);
    log_close(log);
    return n;
}

/* The joiner's log agrees with the leader's where they overlap (both
 * compact: from the later of their first messages), and runs to the end. */
static void compare_logs(uint64_t total)
{
    size_t cap = total + 16;
    struct entry *leader = calloc(cap, sizeof *leader), *joiner = calloc(cap, sizeof *joiner);
    assert_non_null(leader);
    assert_non_null(joiner);
    size_t nl = read_log("m0", leader, cap), nj = read_log("j", joiner, cap);
    assert_true(nl > 0 && nj >= PHASE3 && nj <= total);
    const struct entry *from =
        leader[0].view > joiner[0].view ||
                (leader[0].view == joiner[0].view && leader[0].seq > joiner[0].seq)
            ? &leader[0]
            : &joiner[0];
    size_t al = 0, aj = 0;
    while (al < nl && (leader[al].view != from->view || leader[al].seq != from->seq))
        al++;
    while (aj < nj && (joiner[aj].view != from->view || joiner[aj].seq != from->seq))
        aj++;
    if (al == nl || aj == nj)
        fail_msg("the logs share no message: leader from (%llu, %llu), joiner from (%llu, %llu)",
                 (unsigned long long)leader[0].view, (unsigned long long)leader[0].seq,
                 (unsigned long long)joiner[0].view, (unsigned long long)joiner[0].seq);
    assert_int_equal(nl - al, nj - aj);
    for (size_t i = 0; i < nj - aj; i++)
        assert_memory_equal(&leader[al + i], &joiner[aj + i], sizeof joiner[0]);
    free(leader);
    free(joiner);
}

/* What a run found. */
struct results {
    struct state ends[MEMBERS];
    struct second_life r;
};

static void run(struct results *out)
{
    strcpy(root, "/tmp/spindle-test-restart-XXXXXX");
    assert_non_null(mkdtemp(root));
    char members[64], contact[32], self[32];
    uint16_t ports[MEMBERS + 1];
    for (int i = 0; i <= MEMBERS; i++)
        ports[i] = test_free_port();
    snprintf(members, sizeof members, "127.0.0.1:%u,127.0.0.1:%u", ports[0], ports[1]);
    snprintf(contact, sizeof contact, "127.0.0.1:%u", ports[0]);
    snprintf(self, sizeof self, "127.0.0.1:%u", ports[2]);
    struct pipes mp, jp;
    assert_int_equal(pipe(mp.up), 0);
    assert_int_equal(pipe(mp.go), 0);
    assert_int_equal(pipe(mp.out), 0);
    assert_int_equal(pipe(jp.up), 0);
    assert_int_equal(pipe(jp.go), 0);
    assert_int_equal(pipe(jp.out), 0);
    num_procs = 0;
    run_deadline = now_ms() + RUN_WAIT_MS;
    struct proc *members_procs[MEMBERS];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            alarm(CHILD_ALARM_S);
            _exit(member_main(members, i, &mp));
        }
        members_procs[i] = add_proc(pid, i == 0 ? "member 0" : "member 1", 0);
    }
    watch_hear(mp.up[0], MEMBERS, "both members up");

    /* 1: the joiner's first life, fresh, then its death. */
    struct proc *first = spawn(first_life, contact, self, &jp, "the joiner's first life", DIED);
    assert_int_equal(write(mp.go[1], "gg", MEMBERS), MEMBERS);
    watch_hear(mp.up[0], MEMBERS, "phase 1 delivered at both members");
    watch_exit(first, "the joiner's first life to end with its log durable");

    /* 2: the members go on and compact. */
    assert_int_equal(write(mp.go[1], "gg", MEMBERS), MEMBERS);
    watch_hear(mp.up[0], MEMBERS, "phase 2 delivered at both members");

    /* 3: the joiner again, from its log. */
    struct proc *second = spawn(second_life_main, contact, self, &jp, "the restarted joiner", 0);
    watch_hear(jp.up[0], 1, "the restarted joiner's join");

    /* 4: the last phase; everyone reports. */
    assert_int_equal(write(mp.go[1], "gg", MEMBERS), MEMBERS);
    watch_hear(mp.up[0], MEMBERS, "phase 3 delivered at both members");
    struct state ends[MEMBERS];
    for (int i = 0; i < MEMBERS; i++)
        watch_read(mp.out[0], &ends[i], sizeof ends[i], "a member's final state");
    struct second_life r;
    watch_read(jp.out[0], &r, sizeof r, "the restarted joiner's report");
    assert_int_equal(write(mp.go[1], "gg", MEMBERS), MEMBERS);
    assert_int_equal(write(jp.go[1], "g", 1), 1);
    for (uint32_t i = 0; i < MEMBERS; i++)
        watch_exit(members_procs[i], "a member's shutdown");
    watch_exit(second, "the restarted joiner's shutdown");
    num_procs = 0;
    int *fds[] = {mp.up, mp.go, mp.out, jp.up, jp.go, jp.out};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        close(fds[i][0]);
        close(fds[i][1]);
    }

    uint64_t total = PHASE1 + PHASE2 + PHASE3;
    assert_int_equal(ends[0].count, total);
    assert_memory_equal(&ends[0], &ends[1], sizeof ends[0]);
    assert_false(r.replay_wrong);
    assert_memory_equal(&r.end, &ends[0], sizeof ends[0]);
    /* At its join it held everything phases 1 and 2 delivered: a received
     * snapshot (if any) and the messages after it on top of its own log. */
    assert_int_equal(r.at_join.count, PHASE1 + PHASE2);
    print_message("restarted: %llu snapshot(s) of %llu messages and %llu messages sent; %llu "
                  "records and %llu bytes in all\n",
                  (unsigned long long)r.received_snapshots,
                  (unsigned long long)r.received_snapshot.count,
                  (unsigned long long)r.received_messages, (unsigned long long)r.catchup_records,
                  (unsigned long long)r.catchup_bytes);
    compare_logs(total);
    out->ends[0] = ends[0];
    out->ends[1] = ends[1];
    out->r = r;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
}

/* Sent in a reset: the header, the snapshot (64-byte header, a view
 * record of at most 2344 bytes, the state) and the records after it (each
 * message 24 + 36 + PAYLOAD bytes; a few view records). */
static void check_reset_bytes(const struct second_life *r)
{
    uint64_t view_records = r->catchup_records - r->received_messages;
    assert_true(view_records <= 4);
    uint64_t bound = LOG_CATCHUP_HEADER_SIZE + LOG_CATCHUP_SNAPSHOT_PREFIX + 64 + 2344 +
                     sizeof(struct state) + sc.state_pad +
                     r->received_messages * (24 + 36 + PAYLOAD) + view_records * 2344;
    if (r->catchup_bytes > bound || r->catchup_bytes < r->received_messages * (24 + 36 + PAYLOAD))
        fail_msg("catch-up of %llu bytes for %llu messages; bound %llu",
                 (unsigned long long)r->catchup_bytes, (unsigned long long)r->received_messages,
                 (unsigned long long)bound);
}

static void test_a_member_restarts_through_a_snapshot_after_compaction(void **unused)
{
    (void)unused;
    sc = (struct scenario){.snapshot_every = 64, .phases = {600, 1400, 400}};
    struct results res;
    run(&res);
    const struct second_life *r = &res.r;
    /* It started from the leader's snapshot, not its own old log. */
    assert_int_equal(r->received_snapshots, 1);
    assert_true(r->received_snapshot.count >= PHASE1);
    assert_int_equal(r->received_snapshot.count + r->received_messages, r->at_join.count);
    assert_true(r->received_messages < PHASE1 + PHASE2);
    check_reset_bytes(r);
}

static void test_a_small_snapshot_is_sent_rather_than_a_longer_suffix(void **unused)
{
    (void)unused;
    sc = (struct scenario){.snapshot_every = 500, .phases = {600, 400, 200}};
    struct results res;
    run(&res);
    /* The snapshot at 1000 and nothing after it. */
    assert_int_equal(res.r.received_snapshots, 1);
    assert_int_equal(res.r.received_snapshot.count, PHASE1 + PHASE2);
    assert_int_equal(res.r.received_messages, 0);
    check_reset_bytes(&res.r);
}

static void test_a_suffix_is_sent_rather_than_a_larger_snapshot(void **unused)
{
    (void)unused;
    sc = (struct scenario){.snapshot_every = 500, .phases = {600, 400, 200}, .state_pad = 1u << 20};
    struct results res;
    run(&res);
    /* No snapshot: the messages after the joiner's log, as logged. */
    const struct second_life *r = &res.r;
    assert_int_equal(r->received_snapshots, 0);
    assert_true(r->received_messages > 0 && r->received_messages <= PHASE2);
    uint64_t view_records = r->catchup_records - r->received_messages;
    assert_true(view_records <= 4);
    assert_true(r->catchup_bytes <= LOG_CATCHUP_HEADER_SIZE +
                                        r->received_messages * (24 + 36 + PAYLOAD) +
                                        view_records * 2344);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_member_restarts_through_a_snapshot_after_compaction),
        cmocka_unit_test(test_a_small_snapshot_is_sent_rather_than_a_longer_suffix),
        cmocka_unit_test(test_a_suffix_is_sent_rather_than_a_larger_snapshot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
