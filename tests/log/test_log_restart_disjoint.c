/*
 * A total restart (docs/LOGS.md "Total restart") of a group whose logged
 * subgroups have disjoint members: subgroup 0 is members 0 and 1,
 * subgroup 1 is member 2 alone. A total restart takes every logged
 * subgroup from one member's log, and the member elected (0 or 1, whose
 * logs hold more) holds nothing of subgroup 1.
 *
 * 1. Members 0 and 1 stream into subgroup 0; member 2 sends SENT1
 *    messages into subgroup 1 and waits until they are globally
 *    persistent; then all three are killed with SIGKILL at once.
 * 2. All three restart. Members 0 and 1 restart the group; member 2 must
 *    not join it by starting its log over (which would lose subgroup 1's
 *    whole history): spindle_group_create fails with SPINDLE_EINVAL
 *    naming subgroup 1, and its log is unchanged.
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

#include "log/log.h"
#include "test_ports.h"
#include "util/crc32c.h"

#define MEMBERS    3
#define FAILURE_MS 1000
#define PAYLOAD    64
#define PERSISTED0 600 /* positions of subgroup 0 globally persistent before the kill */
#define SENT1      40  /* messages member 2 sends into subgroup 1 */

static const uint32_t pair[] = {0, 1};
static const uint32_t alone[] = {2};
static char root[64];
static char members[96];

/* The latest global persistence frontier each member reported (of its
 * own subgroup), in memory shared with the parent. */
static uint64_t *reported;

struct app {
    uint32_t self;
};

static void on_deliver(void *ctx, const struct spindle_message *m, size_t count)
{
    (void)ctx;
    (void)m;
    (void)count;
}

static int on_replay(void *ctx, const struct spindle_replayed *item)
{
    (void)ctx;
    (void)item;
    return 0;
}

static void on_persisted(void *ctx, uint32_t subgroup, uint64_t view_id, uint64_t frontier)
{
    const struct app *app = ctx;
    (void)subgroup;
    (void)view_id;
    __atomic_store_n(&reported[app->self], frontier, __ATOMIC_RELEASE);
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
    o.num_members = MEMBERS;
    o.failure_timeout_ms = FAILURE_MS;
    o.bootstrap_timeout_ms = boot_timeout_ms;
    o.tolerate_failures = true;
    o.deliver = on_deliver;
    o.deliver_ctx = app;
    o.replay = on_replay;
    o.replay_ctx = app;
    o.persisted = on_persisted;
    o.persisted_ctx = app;
    o.log_dir = dir;
    o.logged_subgroups = logged;
    o.num_logged_subgroups = 2;
    o.incarnation = incarnation;
    o.admin_dir = "off";
    struct spindle_subgroup_config sg[2] = {
        {pair, 2, pair, 2, 16, PAYLOAD, SPINDLE_MODE_ATOMIC},
        {alone, 1, alone, 1, 16, PAYLOAD, SPINDLE_MODE_ATOMIC},
    };
    spindle_group_t *g = NULL;
    created_rc = spindle_group_create(&o, sg, 2, &g);
    return created_rc == 0 ? g : NULL;
}

static int send_one(spindle_group_t *g, uint32_t subgroup, uint32_t self, uint64_t index)
{
    uint8_t payload[PAYLOAD];
    memset(payload, (int)(index * 7u + self), sizeof payload);
    memcpy(payload, &index, sizeof index);
    return spindle_send(g, subgroup, payload, sizeof payload, 0);
}

/* First life: members 0 and 1 stream until killed; member 2 sends SENT1
 * messages, then waits (on a pipe nobody writes) to be killed. */
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
    for (uint64_t i = 0; self < 2 || i < SENT1; i++)
        if (send_one(g, self < 2 ? 0 : 1, self, i) != 0) {
            fprintf(stderr, "member %u: send: %s\n", self, spindle_errmsg());
            return 13;
        }
    char byte;
    return read(never, &byte, 1) == 0 ? 0 : 14;
}

/* What a restarted member reports. */
struct second_life {
    int32_t create_rc;
    uint32_t self;
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

/* The records of member's log: how many, and a checksum over them. */
static uint64_t log_records(uint32_t member, uint32_t *crc, uint64_t *messages1)
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
    *messages1 = 0;
    int rc;
    while ((rc = log_reader_next(&reader, &record)) == 1) {
        all++;
        if (record.type != LOG_REC_MESSAGE)
            continue;
        *messages1 += record.message.subgroup == 1;
        *crc = sp_crc32c(*crc, &record.message.seq, sizeof record.message.seq);
        *crc = sp_crc32c(*crc, record.message.payload, record.message.length);
    }
    assert_int_equal(rc, 0);
    log_reader_close(&reader);
    log_close(log);
    return all;
}

static void wait_exit(pid_t pid, int want)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != want)
        fail_msg("process %d: status 0x%x, expected exit %d", (int)pid, status, want);
}

/* Runs the three members' first life and kills them once subgroup 1's
 * messages are persistent; returns the records of member 2's log and
 * their checksum. */
static uint64_t first_lives_killed(uint32_t *crc_before)
{
    strcpy(root, "/tmp/spindle-test-disjoint-XXXXXX");
    assert_non_null(mkdtemp(root));
    snprintf(members, sizeof members, "127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u", test_free_port(),
             test_free_port(), test_free_port());
    reported = mmap(NULL, MEMBERS * sizeof *reported, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(reported != MAP_FAILED);
    memset(reported, 0, MEMBERS * sizeof *reported);

    /* 1: kill -9 all three at once, subgroup 1's messages persistent. */
    int up[2], never[2];
    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(never), 0);
    pid_t first[MEMBERS];
    for (uint32_t i = 0; i < MEMBERS; i++) {
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
    for (int i = 0; i < MEMBERS; i++)
        assert_int_equal(read(up[0], &byte, 1), 1);
    bool enough = false;
    for (int i = 0; i < 60000 && !enough; i++) {
        enough = __atomic_load_n(&reported[2], __ATOMIC_ACQUIRE) >= SENT1 &&
                 (__atomic_load_n(&reported[0], __ATOMIC_ACQUIRE) >= PERSISTED0 ||
                  __atomic_load_n(&reported[1], __ATOMIC_ACQUIRE) >= PERSISTED0);
        if (!enough)
            usleep(1000);
    }
    assert_int_equal(kill(-first[0], SIGKILL), 0);
    if (!enough)
        fail_msg("frontiers %llu, %llu, %llu", (unsigned long long)reported[0],
                 (unsigned long long)reported[1], (unsigned long long)reported[2]);
    for (int i = 0; i < MEMBERS; i++) {
        int status = 0;
        assert_int_equal(waitpid(first[i], &status, 0), first[i]);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    }
    uint64_t messages1 = 0;
    uint64_t records = log_records(2, crc_before, &messages1);
    assert_int_equal(messages1, SENT1);
    return records;
}

static void remove_root(void)
{
    munmap(reported, MEMBERS * sizeof *reported);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
}

static void test_a_subgroup_the_restarted_log_lacks_is_not_started_over(void **unused)
{
    (void)unused;
    uint32_t crc_before = 0;
    uint64_t messages1 = 0;
    uint64_t records_before = first_lives_killed(&crc_before);

    /* 2: all three restart; member 2 refuses to join, its log intact. */
    int out[2], go[2];
    assert_int_equal(pipe(out), 0);
    assert_int_equal(pipe(go), 0);
    pid_t second[MEMBERS];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        second[i] = fork();
        assert_true(second[i] >= 0);
        if (second[i] == 0) {
            alarm(120);
            _exit(second_life(i, out[1], go[0]));
        }
    }
    struct second_life r[MEMBERS];
    int refused = 0;
    for (int i = 0; i < MEMBERS; i++) {
        assert_int_equal(read(out[0], &r[i], sizeof r[i]), (ssize_t)sizeof r[i]);
        if (r[i].create_rc != 0) {
            refused++;
            assert_int_equal(r[i].self, 2);
            assert_int_equal(r[i].create_rc, SPINDLE_EINVAL);
            assert_non_null(strstr(r[i].why, "holds nothing of logged subgroup 1"));
            assert_non_null(strstr(r[i].why, "not joining"));
            print_message("refused: %s\n", r[i].why);
        }
    }
    assert_int_equal(refused, 1);
    wait_exit(second[2], 0);
    uint32_t crc_after = 0;
    uint64_t records_after = log_records(2, &crc_after, &messages1);
    assert_int_equal(records_after, records_before);
    assert_int_equal(crc_after, crc_before);
    assert_int_equal(messages1, SENT1);
    assert_int_equal(write(go[1], "gg", 2), 2);
    wait_exit(second[0], 0);
    wait_exit(second[1], 0);
    remove_root();
}

static void test_no_restart_without_a_member_of_each_logged_subgroup(void **unused)
{
    (void)unused;
    uint32_t crc2 = 0, crc0 = 0, crc0_after = 0;
    uint64_t messages1 = 0;
    uint64_t records2 = first_lives_killed(&crc2);
    uint64_t records0 = log_records(0, &crc0, &messages1);

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
    assert_int_equal(log_records(2, &crc2_after, &messages1), records2);
    assert_int_equal(crc2_after, crc2);
    assert_int_equal(log_records(0, &crc0_after, &messages1), records0);
    assert_int_equal(crc0_after, crc0);
    remove_root();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_subgroup_the_restarted_log_lacks_is_not_started_over),
        cmocka_unit_test(test_no_restart_without_a_member_of_each_logged_subgroup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
