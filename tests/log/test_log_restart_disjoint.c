/*
 * A total restart (docs/LOGS.md "Total restart") of a group whose logged
 * subgroups have disjoint members: subgroup 0 is members 0 and 1,
 * subgroup 1 is member 2 alone (or members 2 and 3, member 2 sending).
 * The member elected (0 or 1, whose logs hold more) holds nothing of
 * subgroup 1: the group keeps subgroup 1 as its source's log (member 2's)
 * holds it.
 *
 * 1. Members 0 and 1 stream into subgroup 0; member 2 sends SENT1
 *    messages into subgroup 1 and waits until they are globally
 *    persistent; then all are killed with SIGKILL at once.
 * 2. All three restart. Members 0 and 1 restart the group; member 2 joins
 *    it keeping its log of subgroup 1, which is unchanged (not started
 *    over), and replays it.
 *
 * With four members, member 3 is killed once the first SENT1 messages are
 * persistent and member 2 sends SENT1 more without it: at the restart,
 * member 3 takes what it lacks of subgroup 1 from member 2 (not from the
 * elected member, whose log holds none of it), and the logs of each
 * subgroup's members agree.
 *
 * And with four members where member 2 then takes a snapshot of subgroup 1
 * (after message SNAP_AT, past member 3's end), so that its log holds
 * subgroup 1 only from that snapshot on: member 3 is sent the snapshot and
 * the messages after it, stores it, replays it and the rest, and ends with
 * member 2's state of subgroup 1 (its count and checksum). Members 0 and 1
 * take a snapshot of subgroup 0 too (after message SNAP0_AT), so that the
 * elected log holds subgroup 0 only from there: members 2 and 3, which
 * hold none of it and keep subgroup 1, are sent that snapshot without
 * their logs starting over.
 *
 * And the same with a snapshot of subgroup 1 of BIG_STATE bytes and the
 * sources answering fetches in slices of FETCH_SLICE bytes: member 3
 * takes the stream in many slices (it counts them) and ends with member
 * 2's state, the whole snapshot checked at its replay.
 *
 * And when member 2 stays down: members 0 and 1 alone do not restart the
 * group (no member of logged subgroup 1 is heard, so its history is in no
 * log they hold): both time out, the elected one naming subgroup 1, and
 * no log changes.
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

#include "group/group_impl.h"
#include "log/log.h"
#include "log/log_snapshot.h"
#include "test_ports.h"
#include "util/crc32c.h"

#define MAX_MEMBERS 4
#define FAILURE_MS  1000
#define PAYLOAD     64
#define PERSISTED0  600 /* positions of subgroup 0 globally persistent before the kill */
#define SENT1       40  /* messages member 2 sends into subgroup 1 */
#define SNAP_AT     60  /* with a snapshot: the subgroup 1 message it is taken after */
#define SNAP0_AT    100 /* and the subgroup 0 message members 0 and 1 take theirs after */

static const uint32_t pair[] = {0, 1};
static const uint32_t second_pair[] = {2, 3};
static const uint32_t sender2[] = {2};
static char root[64];
static char members[128];
static uint32_t num_members = 3;
static bool with_snapshot; /* member 2 takes a snapshot of subgroup 1 */
static bool big_snapshot;  /* of BIG_STATE bytes, fetched in slices of FETCH_SLICE */
#define BIG_STATE   (320u << 10)
#define FETCH_SLICE 4096u

/* The latest global persistence frontier each member reported (of its
 * own subgroup) and its view, packed (view << 40 | frontier) so that both
 * are read at once, in memory shared with the parent; after them, whether
 * member 2 took its snapshot. */
static uint64_t *reported;
#define SNAPSHOT_TAKEN   reported[MAX_MEMBERS]
#define FRONTIER(packed) ((packed) & ((1ull << 40) - 1))
#define VIEW(packed)     ((packed) >> 40)

/* The application's state of subgroup 1: its messages, counted and
 * checksummed in delivery order. */
struct state1 {
    uint64_t count;
    uint32_t crc;
    uint32_t zero;
};

/* Where a snapshot of subgroup 1 is taken, and the state there. */
struct point1 {
    uint64_t view_id, seq;
    struct state1 state;
};

struct app {
    uint32_t self;
    uint64_t replayed[2];  /* messages replayed, by subgroup */
    uint64_t snapshots1;   /* snapshots of subgroup 1 replayed */
    uint32_t view_members; /* the current view's, set by the predicate thread */
    struct state1 state1;  /* set by the predicate thread (after the replay) */
    uint64_t delivered1;   /* state1.count, published to the main thread */
    struct point1 at;      /* the point after message SNAP_AT */
    uint64_t count0;       /* subgroup 0's messages delivered (predicate thread) */
    struct point1 at0;     /* the point after its message SNAP0_AT (its state: a count) */
    uint32_t at0_set;      /* published to the main thread */
};

static void apply1(struct state1 *state, const void *data, size_t length)
{
    state->count++;
    state->crc = sp_crc32c(state->crc, data, length);
}

static void on_deliver(void *ctx, const struct spindle_message *m, size_t count)
{
    struct app *app = ctx;
    for (size_t i = 0; i < count; i++) {
        if (m[i].subgroup == 0 && ++app->count0 == SNAP0_AT) {
            app->at0 = (struct point1){m[i].view_id, m[i].seq + 1, {.count = SNAP0_AT}};
            __atomic_store_n(&app->at0_set, 1, __ATOMIC_RELEASE);
        }
        if (m[i].subgroup != 1)
            continue;
        apply1(&app->state1, m[i].data, m[i].length);
        if (app->state1.count == SNAP_AT)
            app->at = (struct point1){m[i].view_id, m[i].seq + 1, app->state1};
    }
    __atomic_store_n(&app->delivered1, app->state1.count, __ATOMIC_RELEASE);
}

/* A big snapshot: the state, then bytes of a pattern up to BIG_STATE. */
static uint8_t big_byte(size_t i)
{
    return (uint8_t)(i * 31u + 7u + (i >> 12));
}

static bool big_tail_intact(const uint8_t *state)
{
    for (size_t i = sizeof(struct state1); i < BIG_STATE; i++)
        if (state[i] != big_byte(i))
            return false;
    return true;
}

static int on_replay(void *ctx, const struct spindle_replayed *item)
{
    struct app *app = ctx;
    if (item->kind == SPINDLE_REPLAY_MESSAGE && item->subgroup < 2)
        app->replayed[item->subgroup]++;
    if (item->subgroup != 1)
        return 0;
    if (item->kind == SPINDLE_REPLAY_MESSAGE) {
        apply1(&app->state1, item->data, item->length);
        return 0;
    }
    if (item->length != 0 && item->length != sizeof app->state1 &&
        (!big_snapshot || item->length != BIG_STATE || !big_tail_intact(item->data)))
        return SPINDLE_EINVAL;
    app->snapshots1++;
    memset(&app->state1, 0, sizeof app->state1);
    if (item->length > 0)
        memcpy(&app->state1, item->data, sizeof app->state1);
    return 0;
}

static void on_view(void *ctx, const struct spindle_view_info *view)
{
    struct app *app = ctx;
    __atomic_store_n(&app->view_members, view->num_members, __ATOMIC_RELEASE);
}

static void on_persisted(void *ctx, uint32_t subgroup, uint64_t view_id, uint64_t frontier)
{
    const struct app *app = ctx;
    (void)subgroup;
    __atomic_store_n(&reported[app->self], view_id << 40 | frontier, __ATOMIC_RELEASE);
}

static int created_rc;
static int boot_timeout_ms = 60000;

static spindle_group_t *open_member(struct app *app, uint32_t self, uint64_t incarnation)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/m%u", root, self);
    static const uint32_t logged[] = {0, 1};
    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.bootstrap = members;
    o.self = self;
    o.num_members = num_members;
    o.failure_timeout_ms = FAILURE_MS;
    o.bootstrap_timeout_ms = boot_timeout_ms;
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
    o.num_logged_subgroups = 2;
    o.incarnation = incarnation;
    o.admin_dir = "off";
    struct spindle_subgroup_config sg[2] = {
        {pair, 2, pair, 2, 16, PAYLOAD, SPINDLE_MODE_ATOMIC},
        {second_pair, num_members - 2, sender2, 1, 16, PAYLOAD, SPINDLE_MODE_ATOMIC},
    };
    struct group_test_options test = {.fetch_slice_bytes = big_snapshot ? FETCH_SLICE : 0};
    spindle_group_t *g = NULL;
    created_rc = group_create_with(&o, sg, 2, &test, &g);
    return created_rc == 0 ? g : NULL;
}

static int send_one(spindle_group_t *g, uint32_t subgroup, uint32_t self, uint64_t index)
{
    uint8_t payload[PAYLOAD];
    memset(payload, (int)(index * 7u + self), sizeof payload);
    memcpy(payload, &index, sizeof index);
    return spindle_send(g, subgroup, payload, sizeof payload, 0);
}

/* With four members: member 2 says when its first messages are
 * persistent, and the parent when member 3 is dead. */
static int phase[2], member3_dead[2];

/* Member 2 sends messages first..first + SENT1 - 1 into subgroup 1. */
static int send_batch(spindle_group_t *g, uint64_t first)
{
    for (uint64_t i = first; i < first + SENT1; i++)
        if (send_one(g, 1, 2, i) != 0) {
            fprintf(stderr, "member 2: send: %s\n", spindle_errmsg());
            return 13;
        }
    return 0;
}

/* First life: members 0 and 1 stream until killed; member 2 sends SENT1
 * messages (with four members: waits until they are persistent, for
 * member 3's death, then sends SENT1 more), then waits (on a pipe nobody
 * writes) to be killed; member 3 only receives. */
static int first_life(uint32_t self, int up, int never)
{
    struct app app = {.self = self};
    spindle_group_t *g = open_member(&app, self, 1);
    if (g == NULL) {
        fprintf(stderr, "member %u: %s\n", self, spindle_errmsg());
        return 10;
    }
    if (spindle_barrier(g, 60000) != 0)
        return 11;
    if (write(up, "x", 1) != 1)
        return 12;
    bool snapped0 = !with_snapshot;
    for (uint64_t i = 0; self < 2; i++) {
        if (send_one(g, 0, self, i) != 0) {
            fprintf(stderr, "member %u: send: %s\n", self, spindle_errmsg());
            return 13;
        }
        if (snapped0 || __atomic_load_n(&app.at0_set, __ATOMIC_ACQUIRE) == 0)
            continue;
        if (spindle_group_snapshot(g, 0, app.at0.view_id, app.at0.seq, &app.at0.state,
                                   sizeof app.at0.state) != 0) {
            fprintf(stderr, "member %u: snapshot: %s\n", self, spindle_errmsg());
            return 16;
        }
        snapped0 = true;
    }
    char byte;
    int rc = self == 2 ? send_batch(g, 0) : 0;
    if (rc == 0 && self == 2 && num_members == 4) {
        while (FRONTIER(__atomic_load_n(&reported[2], __ATOMIC_ACQUIRE)) < SENT1)
            usleep(1000);
        if (write(phase[1], "p", 1) != 1 || read(member3_dead[0], &byte, 1) != 1)
            return 15;
        /* Sent in the view without member 3, so that none is delivered
         * (at the ragged edge) in the one with it. */
        while (__atomic_load_n(&app.view_members, __ATOMIC_ACQUIRE) != 3)
            usleep(1000);
        rc = send_batch(g, SENT1);
    }
    if (rc == 0 && self == 2 && with_snapshot) {
        while (__atomic_load_n(&app.delivered1, __ATOMIC_ACQUIRE) < 2 * SENT1)
            usleep(1000);
        size_t length = big_snapshot ? BIG_STATE : sizeof app.at.state;
        uint8_t *state = malloc(length);
        if (state == NULL)
            return 17;
        memcpy(state, &app.at.state, sizeof app.at.state);
        for (size_t i = sizeof app.at.state; i < length; i++)
            state[i] = big_byte(i);
        int snapped = spindle_group_snapshot(g, 1, app.at.view_id, app.at.seq, state, length);
        free(state);
        if (snapped != 0) {
            fprintf(stderr, "member 2: snapshot: %s\n", spindle_errmsg());
            return 16;
        }
        __atomic_store_n(&SNAPSHOT_TAKEN, 1, __ATOMIC_RELEASE);
    }
    if (rc != 0)
        return rc;
    return read(never, &byte, 1) == 0 ? 0 : 14;
}

/* What a restarted member reports. */
struct second_life {
    int32_t create_rc;
    uint32_t self;
    uint64_t replayed[2];
    uint64_t snapshots1;
    uint64_t slices;      /* of restart fetches it took */
    struct state1 state1; /* after the replay */
    char why[600];
};

static int second_life(uint32_t self, int out, int go)
{
    struct app app = {.self = self};
    struct second_life r;
    memset(&r, 0, sizeof r);
    r.self = self;
    spindle_group_t *g = open_member(&app, self, 2);
    r.create_rc = created_rc;
    memcpy(r.replayed, app.replayed, sizeof r.replayed);
    r.snapshots1 = app.snapshots1;
    r.state1 = app.state1; /* the group delivers nothing new in subgroup 1 */
    r.slices = g != NULL ? g->membership.fetch_slices_taken : 0;
    snprintf(r.why, sizeof r.why, "%s", g == NULL ? spindle_errmsg() : "");
    if (write(out, &r, sizeof r) != (ssize_t)sizeof r)
        return 20;
    if (g == NULL)
        return 0;
    char byte;
    if (read(go, &byte, 1) != 1)
        return 21;
    int rc = spindle_group_shutdown(g, 30000);
    spindle_group_destroy(g);
    return rc == 0 ? 0 : 22;
}

/* The records of member's log: how many; and of subgroup's messages, how
 * many and a checksum over them. */
static uint64_t log_records(uint32_t member, uint32_t subgroup, uint32_t *crc, uint64_t *messages)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/m%u", root, member);
    struct log *log = NULL;
    assert_int_equal(log_open(dir, 0, &log, NULL), 0);
    struct log_reader reader;
    assert_int_equal(log_reader_open(&reader, log), 0);
    struct log_record record;
    uint64_t all = 0;
    *crc = 0;
    *messages = 0;
    int rc;
    while ((rc = log_reader_next(&reader, &record)) == 1) {
        all++;
        if (record.type != LOG_REC_MESSAGE || record.message.subgroup != subgroup)
            continue;
        (*messages)++;
        *crc = sp_crc32c(*crc, &record.message.seq, sizeof record.message.seq);
        *crc = sp_crc32c(*crc, record.message.payload, record.message.length);
    }
    assert_int_equal(rc, 0);
    log_reader_close(&reader);
    log_close(log);
    return all;
}

/* How many valid snapshots of subgroup member's log directory holds. */
static size_t snapshots_of(uint32_t member, uint32_t subgroup)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/m%u", root, member);
    struct log *log = NULL;
    assert_int_equal(log_open(dir, 0, &log, NULL), 0);
    struct log_snapshot_file *files = NULL;
    size_t count = 0, found = 0;
    assert_int_equal(log_snapshot_list(log->dir_fd, log->dir, false, &files, &count), 0);
    for (size_t i = 0; i < count; i++)
        found += files[i].valid && files[i].snap.subgroup == subgroup;
    free(files);
    log_close(log);
    return found;
}

static void wait_exit(pid_t pid, int want)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != want)
        fail_msg("process %d: status 0x%x, expected exit %d", (int)pid, status, want);
}

/* Kills member 3 once member 2's first messages are persistent, and
 * returns the view they were persistent in. */
static uint64_t member3_killed(pid_t pid)
{
    char byte;
    assert_int_equal(read(phase[0], &byte, 1), 1);
    uint64_t view = VIEW(__atomic_load_n(&reported[2], __ATOMIC_ACQUIRE));
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_int_equal(write(member3_dead[1], "d", 1), 1);
    return view;
}

/* Whether the first lives went far enough to be killed: subgroup 1's
 * messages persistent (with four members, the second SENT1 in a view
 * after `view`, the one member 3 died in), and PERSISTED0 positions of
 * subgroup 0 (with four members, in member 2's latest view, so that
 * member 0 or 1 is the one elected). */
static bool far_enough(uint64_t view)
{
    uint64_t two = __atomic_load_n(&reported[2], __ATOMIC_ACQUIRE);
    if (FRONTIER(two) < SENT1 || (num_members == 4 && VIEW(two) <= view))
        return false;
    if (with_snapshot && __atomic_load_n(&SNAPSHOT_TAKEN, __ATOMIC_ACQUIRE) == 0)
        return false;
    for (uint32_t i = 0; i < 2; i++) {
        uint64_t mine = __atomic_load_n(&reported[i], __ATOMIC_ACQUIRE);
        if (FRONTIER(mine) >= PERSISTED0 && (num_members == 3 || VIEW(mine) == VIEW(two)))
            return true;
    }
    return false;
}

/* Runs the members' first life and kills them once subgroup 1's messages
 * are persistent (with four members: member 3 after the first SENT1 of
 * them); returns the records of member 2's log and the checksum of its
 * subgroup 1 messages. */
static uint64_t first_lives_killed(uint32_t *crc_before)
{
    strcpy(root, "/tmp/spindle-test-disjoint-XXXXXX");
    assert_non_null(mkdtemp(root));
    int used = 0;
    for (uint32_t i = 0; i < num_members; i++)
        used += snprintf(members + used, sizeof members - (size_t)used, "%s127.0.0.1:%u",
                         i > 0 ? "," : "", test_free_port());
    reported = mmap(NULL, (MAX_MEMBERS + 1) * sizeof *reported, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(reported != MAP_FAILED);
    memset(reported, 0, (MAX_MEMBERS + 1) * sizeof *reported);

    /* 1: kill -9 all at once, subgroup 1's messages persistent. */
    int up[2], never[2];
    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(never), 0);
    assert_int_equal(pipe(phase), 0);
    assert_int_equal(pipe(member3_dead), 0);
    pid_t first[MAX_MEMBERS];
    for (uint32_t i = 0; i < num_members; i++) {
        first[i] = fork();
        assert_true(first[i] >= 0);
        if (first[i] == 0) {
            setpgid(0, i == 0 ? 0 : first[0]);
            alarm(120);
            _exit(first_life(i, up[1], never[0]));
        }
        setpgid(first[i], i == 0 ? first[i] : first[0]);
    }
    char byte;
    for (uint32_t i = 0; i < num_members; i++)
        assert_int_equal(read(up[0], &byte, 1), 1);
    uint64_t view = num_members == 4 ? member3_killed(first[3]) : 0;
    bool enough = false;
    for (int i = 0; i < 60000 && !enough; i++) {
        enough = far_enough(view);
        if (!enough)
            usleep(1000);
    }
    assert_int_equal(kill(-first[0], SIGKILL), 0);
    if (!enough)
        fail_msg("frontiers %llx, %llx, %llx", (unsigned long long)reported[0],
                 (unsigned long long)reported[1], (unsigned long long)reported[2]);
    for (uint32_t i = 0; i < (num_members == 4 ? 3u : num_members); i++) {
        int status = 0;
        assert_int_equal(waitpid(first[i], &status, 0), first[i]);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    }
    for (int i = 0; i < 2; i++) {
        close(phase[i]);
        close(member3_dead[i]);
    }
    uint64_t messages1 = 0;
    uint64_t records = log_records(2, 1, crc_before, &messages1);
    assert_int_equal(messages1, num_members == 4 ? 2 * SENT1 : SENT1);
    return records;
}

static void remove_root(void)
{
    munmap(reported, (MAX_MEMBERS + 1) * sizeof *reported);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
}

/* Restarts every member; they report, then shut down together. */
static void second_lives(struct second_life *r)
{
    int out[2], go[2];
    assert_int_equal(pipe(out), 0);
    assert_int_equal(pipe(go), 0);
    pid_t second[MAX_MEMBERS];
    for (uint32_t i = 0; i < num_members; i++) {
        second[i] = fork();
        assert_true(second[i] >= 0);
        if (second[i] == 0) {
            alarm(120);
            _exit(second_life(i, out[1], go[0]));
        }
    }
    for (uint32_t i = 0; i < num_members; i++) {
        struct second_life one;
        assert_int_equal(read(out[0], &one, sizeof one), (ssize_t)sizeof one);
        assert_true(one.self < num_members);
        r[one.self] = one;
        if (one.create_rc != 0)
            print_message("member %u: %s\n", one.self, one.why);
    }
    char bytes[MAX_MEMBERS];
    memset(bytes, 'g', sizeof bytes);
    assert_int_equal(write(go[1], bytes, num_members), (ssize_t)num_members);
    for (uint32_t i = 0; i < num_members; i++)
        wait_exit(second[i], 0);
    for (int i = 0; i < 2; i++) {
        close(out[i]);
        close(go[i]);
    }
}

static void test_a_subgroup_the_restarted_log_lacks_is_kept_from_its_member(void **unused)
{
    (void)unused;
    num_members = 3;
    uint32_t crc_before = 0;
    uint64_t messages1 = 0;
    (void)first_lives_killed(&crc_before);

    /* 2: all three restart; member 2 joins keeping subgroup 1. */
    struct second_life r[MAX_MEMBERS];
    second_lives(r);
    for (uint32_t i = 0; i < num_members; i++)
        assert_int_equal(r[i].create_rc, 0);
    assert_int_equal(r[2].replayed[1], SENT1);
    uint32_t crc_after = 0;
    (void)log_records(2, 1, &crc_after, &messages1);
    assert_int_equal(messages1, SENT1);
    assert_int_equal(crc_after, crc_before);
    /* Subgroup 0 as the elected log holds it, at every member. */
    uint32_t crc0[3];
    uint64_t count0[3];
    for (uint32_t i = 0; i < num_members; i++)
        (void)log_records(i, 0, &crc0[i], &count0[i]);
    assert_true(count0[0] > 0);
    for (uint32_t i = 1; i < num_members; i++) {
        assert_int_equal(count0[i], count0[0]);
        assert_int_equal(crc0[i], crc0[0]);
    }
    remove_root();
}

static void
test_a_member_behind_in_a_subgroup_the_restarted_log_lacks_takes_it_from_its_source(void **unused)
{
    (void)unused;
    num_members = 4;
    uint32_t crc2 = 0;
    (void)first_lives_killed(&crc2);
    uint32_t crc = 0;
    uint64_t behind = 0;
    (void)log_records(3, 1, &crc, &behind);
    assert_int_equal(behind, SENT1); /* member 3 missed the second SENT1 */

    struct second_life r[MAX_MEMBERS];
    second_lives(r);
    for (uint32_t i = 0; i < num_members; i++)
        assert_int_equal(r[i].create_rc, 0);
    /* Member 3's state is subgroup 1's whole history. */
    assert_int_equal(r[2].replayed[1], 2 * SENT1);
    assert_int_equal(r[3].replayed[1], 2 * SENT1);
    uint32_t crc1[MAX_MEMBERS], crc0[MAX_MEMBERS];
    uint64_t count1[MAX_MEMBERS], count0[MAX_MEMBERS];
    for (uint32_t i = 0; i < num_members; i++) {
        (void)log_records(i, 1, &crc1[i], &count1[i]);
        (void)log_records(i, 0, &crc0[i], &count0[i]);
    }
    /* Subgroup 1's members agree, member 2's log of it unchanged. */
    assert_int_equal(count1[2], 2 * SENT1);
    assert_int_equal(crc1[2], crc2);
    assert_int_equal(count1[3], count1[2]);
    assert_int_equal(crc1[3], crc1[2]);
    /* Subgroup 0 as the elected log holds it, at every member. */
    assert_true(count0[0] > 0);
    for (uint32_t i = 1; i < num_members; i++) {
        assert_int_equal(count0[i], count0[0]);
        assert_int_equal(crc0[i], crc0[0]);
    }
    num_members = 3;
    remove_root();
}

static void snapshot_case(void)
{
    num_members = 4;
    with_snapshot = true;
    uint32_t crc = 0, crc2 = 0;
    (void)first_lives_killed(&crc2);
    uint64_t behind = 0;
    (void)log_records(3, 1, &crc, &behind);
    assert_int_equal(behind, SENT1); /* member 3's end lies before the snapshot */

    struct second_life r[MAX_MEMBERS];
    second_lives(r);
    for (uint32_t i = 0; i < num_members; i++)
        assert_int_equal(r[i].create_rc, 0);
    /* Both rebuilt subgroup 1 from the snapshot, then the messages after. */
    for (uint32_t i = 2; i < 4; i++) {
        assert_int_equal(r[i].snapshots1, 1);
        assert_int_equal(r[i].replayed[1], 2 * SENT1 - SNAP_AT);
    }
    assert_int_equal(r[2].state1.count, 2 * SENT1);
    assert_int_equal(r[3].state1.count, r[2].state1.count);
    assert_int_equal(r[3].state1.crc, r[2].state1.crc);
    /* Member 3's log holds its own first messages, then those after the
     * snapshot's point. */
    (void)log_records(3, 1, &crc, &behind);
    assert_int_equal(behind, SENT1 + 2 * SENT1 - SNAP_AT);
    /* Member 2's log of subgroup 1 is kept whole (not started over), and
     * members 2 and 3 were sent the elected log's snapshot of subgroup 0. */
    (void)log_records(2, 1, &crc, &behind);
    assert_int_equal(behind, 2 * SENT1);
    assert_int_equal(crc, crc2);
    assert_int_equal(snapshots_of(2, 1), 1);
    assert_int_equal(snapshots_of(3, 1), 1);
    assert_int_equal(snapshots_of(2, 0), 1);
    assert_int_equal(snapshots_of(3, 0), 1);
    /* Member 3 fetched: in one slice, or in many (the big snapshot). */
    if (big_snapshot)
        assert_true(r[3].slices > BIG_STATE / FETCH_SLICE);
    else
        assert_int_equal(r[3].slices, 1);
    assert_int_equal(r[2].slices, 0);
    with_snapshot = false;
    num_members = 3;
    remove_root();
}

static void test_a_member_behind_a_source_s_snapshot_takes_the_snapshot_then_the_rest(void **unused)
{
    (void)unused;
    snapshot_case();
}

static void test_a_snapshot_larger_than_a_slice_is_fetched_in_many_slices(void **unused)
{
    (void)unused;
    big_snapshot = true;
    snapshot_case();
    big_snapshot = false;
}

static void test_no_restart_without_a_member_of_each_logged_subgroup(void **unused)
{
    (void)unused;
    uint32_t crc2 = 0, crc0 = 0, crc0_after = 0;
    uint64_t messages1 = 0;
    num_members = 3;
    with_snapshot = false;
    uint64_t records2 = first_lives_killed(&crc2);
    uint64_t records0 = log_records(0, 0, &crc0, &messages1);

    /* Members 0 and 1 restart, member 2 stays down. */
    boot_timeout_ms = 3000;
    int out[2], go[2];
    assert_int_equal(pipe(out), 0);
    assert_int_equal(pipe(go), 0);
    pid_t second[2];
    for (uint32_t i = 0; i < 2; i++) {
        second[i] = fork();
        assert_true(second[i] >= 0);
        if (second[i] == 0) {
            alarm(60);
            _exit(second_life(i, out[1], go[0]));
        }
    }
    boot_timeout_ms = 60000;
    int named = 0;
    for (int i = 0; i < 2; i++) {
        struct second_life r;
        assert_int_equal(read(out[0], &r, sizeof r), (ssize_t)sizeof r);
        print_message("member %u: %s\n", r.self, r.why);
        assert_int_equal(r.create_rc, SPINDLE_ETIMEDOUT);
        named += strstr(r.why, "no member of logged subgroup 1") != NULL;
    }
    assert_int_equal(named, 1); /* the elected one; the other waited for it */
    wait_exit(second[0], 0);
    wait_exit(second[1], 0);
    uint32_t crc2_after = 0;
    assert_int_equal(log_records(2, 1, &crc2_after, &messages1), records2);
    assert_int_equal(crc2_after, crc2);
    assert_int_equal(log_records(0, 0, &crc0_after, &messages1), records0);
    assert_int_equal(crc0_after, crc0);
    remove_root();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_subgroup_the_restarted_log_lacks_is_kept_from_its_member),
        cmocka_unit_test(
            test_a_member_behind_in_a_subgroup_the_restarted_log_lacks_takes_it_from_its_source),
        cmocka_unit_test(test_a_member_behind_a_source_s_snapshot_takes_the_snapshot_then_the_rest),
        cmocka_unit_test(test_a_snapshot_larger_than_a_slice_is_fetched_in_many_slices),
        cmocka_unit_test(test_no_restart_without_a_member_of_each_logged_subgroup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
