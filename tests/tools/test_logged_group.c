/*
 * Logged delivery end to end: three member processes log subgroup 0 of
 * their group, each to a directory of its own, while subgroup 1 is not
 * logged; spindle-log then finds the three logs whole and in agreement.
 * And the options a logged group refuses, by name.
 */
#include <fcntl.h>
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

#include "../log/log_samples.h"
#include "log_tool_run.h"
#include "util/clock.h"

#define MEMBERS     3
#define MESSAGES    300 /* per sender, in subgroup 0 */
#define AFTER_LEAVE 100 /* per remaining sender, in view 1 */

static const char *tool;
static char root[64];
static const uint32_t ids[MEMBERS] = {0, 1, 2};

static uint64_t delivered[2]; /* per subgroup; atomic */
static uint64_t view_id;      /* the last installed; atomic */

static void on_view(void *ctx, const struct spindle_view_info *view)
{
    (void)ctx;
    __atomic_store_n(&view_id, view->view_id, __ATOMIC_RELEASE);
}

static void on_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    (void)ctx;
    __atomic_add_fetch(&delivered[m[0].subgroup], n, __ATOMIC_RELEASE);
}

static void member_options(struct spindle_group_options *o, uint32_t self, char *log_dir,
                           size_t size)
{
    static const uint32_t logged[] = {0};
    spindle_group_options_init(o);
    o->self = self;
    o->num_members = MEMBERS;
    snprintf(log_dir, size, "%s/member-%u", root, self);
    o->log_dir = log_dir;
    o->logged_subgroups = logged;
    o->num_logged_subgroups = 1;
    o->deliver = on_deliver;
}

/* Waits (polling, with a deadline) until *counter reaches want. */
static int reach(const uint64_t *counter, uint64_t want)
{
    uint64_t deadline = sp_now_ns() + 30000000000ull;
    while (__atomic_load_n(counter, __ATOMIC_ACQUIRE) < want) {
        if (sp_now_ns() > deadline)
            return -1;
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    return 0;
}

/* Sends count messages of member self to subgroup 0 (some to subgroup 1). */
static int send_stream(spindle_group_t *g, uint32_t self, uint32_t first, uint32_t count)
{
    char text[200];
    for (uint32_t i = first; i < first + count; i++) {
        int length =
            snprintf(text, sizeof text, "member %u message %u %.*s", self, i, (int)(i % 150),
                     "................................................"
                     "................................................"
                     "......................................................");
        if (spindle_send(g, 0, text, (size_t)length, 0) != 0 ||
            (i % 30 == 0 && spindle_send(g, 1, "unlogged", 8, 0) != 0))
            return -1;
    }
    return 0;
}

/* One member: MESSAGES each; then, with change, member 2 leaves and the
 * other two send AFTER_LEAVE more each in view 1. */
static int member(const char *bootstrap, uint32_t self, bool change)
{
    struct spindle_group_options o;
    char log_dir[128];
    member_options(&o, self, log_dir, sizeof log_dir);
    o.bootstrap = bootstrap;
    o.tolerate_failures = change;
    o.view_changed = on_view;
    struct spindle_subgroup_config sg[2] = {
        {ids, MEMBERS, ids, MEMBERS, 16, 200, SPINDLE_MODE_ATOMIC},
        {ids, MEMBERS, ids, MEMBERS, 16, 200, SPINDLE_MODE_ATOMIC},
    };
    spindle_group_t *g;
    if (spindle_group_create(&o, sg, 2, &g) != 0 || spindle_barrier(g, 30000) != 0) {
        fprintf(stderr, "member %u: %s\n", self, spindle_errmsg());
        return 2;
    }
    if (send_stream(g, self, 0, MESSAGES) != 0)
        return 3;
    if (spindle_flush(g, 30000) != 0 || reach(&delivered[0], MEMBERS * MESSAGES) != 0)
        return 4;
    /* The local frontier reaches the first view's record and every
     * delivered message of subgroup 0. */
    struct spindle_stats stats;
    uint64_t deadline = sp_now_ns() + 30000000000ull;
    do {
        if (spindle_group_stats(g, &stats) != 0 || sp_now_ns() > deadline)
            return 5;
    } while (stats.log_records_durable < MEMBERS * MESSAGES + 1);
    if (stats.log_records_durable != MEMBERS * MESSAGES + 1 || stats.log_syncs == 0 ||
        stats.log_syncs > MEMBERS * MESSAGES || stats.log_bytes_durable == 0)
        return 6;
    if (spindle_barrier(g, 30000) != 0)
        return 7;
    if (change && self == MEMBERS - 1) {
        int rc = spindle_group_leave(g, 30000);
        spindle_group_destroy(g);
        return rc == 0 ? 0 : 8;
    }
    if (change && (reach(&view_id, 1) != 0 || send_stream(g, self, MESSAGES, AFTER_LEAVE) != 0 ||
                   spindle_flush(g, 30000) != 0 ||
                   reach(&delivered[0], MEMBERS * MESSAGES + 2 * AFTER_LEAVE) != 0))
        return 9;
    if (spindle_group_shutdown(g, 10000) != 0)
        return 10;
    spindle_group_destroy(g);
    return 0;
}

/* Runs the three members (change: member 2 leaves half way); the log
 * directories land in dirs. */
static void run_members(bool change, const char *name, char dirs[MEMBERS][128])
{
    char bootstrap[128];
    snprintf(bootstrap, sizeof bootstrap, "%s/%s", root, name);
    pid_t pids[MEMBERS];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(90); /* a hang ends the member and fails the test */
            _exit(member(bootstrap, i, change));
        }
    }
    for (uint32_t i = 0; i < MEMBERS; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("member %u: status 0x%x", i, status);
    }
    for (uint32_t i = 0; i < MEMBERS; i++)
        snprintf(dirs[i], sizeof dirs[i], "%s/member-%u", root, i);
}

static void expect_tool(const char *const *args, int status, const char *says)
{
    static char out[1 << 18];
    int got = log_tool_run(root, out, sizeof out, args);
    if (got != status || strstr(out, says) == NULL)
        fail_msg("spindle-log %s: status %d, said: %s", args[1], got, out);
}

static void test_three_members_log_the_same_messages(void **state)
{
    (void)state;
    char dirs[MEMBERS][128];
    run_members(false, "steady", dirs);
    const char *compare[] = {tool, "compare", dirs[0], dirs[1], dirs[2], NULL};
    expect_tool(compare, 0, "agree: 900 messages and 1 views");
    for (uint32_t i = 0; i < MEMBERS; i++) {
        const char *check[] = {tool, "check", dirs[i], NULL};
        expect_tool(check, 0, "whole: 901 records");
    }
    for (uint32_t i = 0; i < MEMBERS; i++) {
        char cleanup[400];
        snprintf(cleanup, sizeof cleanup, "rm -rf %s", dirs[i]);
        assert_int_equal(system(cleanup), 0);
    }
}

/* Member 2 leaves: the survivors record view 1 and its trim before they
 * deliver in it, and their logs still agree with the leaver's. */
static void test_a_view_change_is_logged_before_its_messages(void **state)
{
    (void)state;
    char dirs[MEMBERS][128];
    run_members(true, "change", dirs);
    const char *compare[] = {tool, "compare", dirs[0], dirs[1], dirs[2], NULL};
    expect_tool(compare, 0, "agree: 1100 messages and 2 views");
    const char *leaver[] = {tool, "check", dirs[2], NULL};
    expect_tool(leaver, 0, "whole: 901 records");
    const char *survivor[] = {tool, "check", dirs[0], NULL};
    expect_tool(survivor, 0, "whole: 1102 records");
    /* View 1's record precedes every message delivered in it. */
    const char *summary[] = {tool, "dump", dirs[1], NULL};
    expect_tool(summary, 0, "901 view 1 members 0,1 delivered_through ");
}

static void expect_refusal(const struct spindle_group_options *o,
                           const struct spindle_subgroup_config *sg, const char *says)
{
    spindle_group_t *g = NULL;
    assert_int_equal(spindle_group_create(o, sg, 1, &g), SPINDLE_EINVAL);
    assert_null(g);
    if (strstr(spindle_errmsg(), says) == NULL)
        fail_msg("\"%s\" does not say \"%s\"", spindle_errmsg(), says);
}

static void test_logging_an_unordered_subgroup_is_refused(void **state)
{
    (void)state;
    struct spindle_group_options o;
    char log_dir[128], bootstrap[128];
    member_options(&o, 0, log_dir, sizeof log_dir);
    o.num_members = 1;
    snprintf(bootstrap, sizeof bootstrap, "%s/alone", root);
    o.bootstrap = bootstrap;
    struct spindle_subgroup_config sg = {ids, 1, ids, 1, 4, 16, SPINDLE_MODE_UNORDERED};
    expect_refusal(&o, &sg, "subgroup 0 is unordered and cannot be logged");
    sg.mode = SPINDLE_MODE_ATOMIC;
    o.log_dir = NULL;
    expect_refusal(&o, &sg, "1 logged subgroups but no log_dir");
    o.log_dir = log_dir;
    static const uint32_t missing[] = {3};
    o.logged_subgroups = missing;
    expect_refusal(&o, &sg, "logged_subgroups[0] is 3, but the group has 1 subgroups");
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 1;
    tool = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_members_log_the_same_messages),
        cmocka_unit_test(test_a_view_change_is_logged_before_its_messages),
        cmocka_unit_test(test_logging_an_unordered_subgroup_is_refused),
    };
    return SAMPLE_RUN_IN_ROOT(root, "spindle-logged", tests);
}
