/*
 * The administration endpoint (src/group/admin.c) and its tools: three
 * member processes of a shared-memory group, seen through spindle-stat
 * --json (read with jq) and steered with spindle-ctl: a member removed
 * from the group learns SPINDLE_EREMOVED while the others install a view
 * without it; a member asked to leave leaves gracefully, its messages
 * delivered, and its later calls say why they fail. A client of another
 * user is refused, garbage and oversized requests are answered with an
 * error while the member runs on, a stale socket is named as such and
 * replaced, and the request parser refuses what it should.
 *
 * Arguments: spindle-stat, spindle-ctl.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <spindle/spindle.h>

#include "../log/log_samples.h"
#include "group/admin.h"
#include "util/clock.h"

#define MEMBERS  3u
#define MESSAGES 200u /* per member */

static const char *stat_tool, *ctl_tool;
static char root[64];
static char admin_dir[128];
static const uint32_t ids[MEMBERS] = {0, 1, 2};

/* ---- one member process ---------------------------------------------- */

enum role {
    STAYS,      /* sees the view without the departed member, then shuts down */
    IS_REMOVED, /* learns SPINDLE_EREMOVED */
    LEAVES,     /* is asked to leave; its status and sends say so */
};

static uint64_t delivered;  /* atomic */
static uint64_t last_view;  /* atomic: the id of the last installed view */
static uint32_t view_count; /* atomic: its member count */

static void on_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    (void)ctx;
    (void)m;
    __atomic_add_fetch(&delivered, n, __ATOMIC_RELEASE);
}

static void on_view(void *ctx, const struct spindle_view_info *view)
{
    (void)ctx;
    __atomic_store_n(&view_count, view->num_members, __ATOMIC_RELEASE);
    __atomic_store_n(&last_view, view->view_id, __ATOMIC_RELEASE);
}

/* Polls until cond() or 30 s; false on the deadline. */
static bool wait_until(bool (*cond)(void *), void *arg)
{
    uint64_t deadline = sp_now_ns() + 30000000000ull;
    while (!cond(arg)) {
        if (sp_now_ns() > deadline)
            return false;
        struct timespec pause = {0, 2000000};
        nanosleep(&pause, NULL);
    }
    return true;
}

static bool status_is(void *arg)
{
    spindle_group_t *g = ((void **)arg)[0];
    int want = *(int *)((void **)arg)[1];
    return spindle_group_status(g) == want;
}

static bool in_view_one(void *arg)
{
    (void)arg;
    return __atomic_load_n(&last_view, __ATOMIC_ACQUIRE) >= 1 &&
           __atomic_load_n(&view_count, __ATOMIC_ACQUIRE) == MEMBERS - 1;
}

static bool all_delivered(void *arg)
{
    (void)arg;
    return __atomic_load_n(&delivered, __ATOMIC_ACQUIRE) == MEMBERS * MESSAGES;
}

/* Waits until the group's status is want, then checks that a send fails
 * with it and that the message says `says`. */
static int ends_with(spindle_group_t *g, int want, const char *says)
{
    void *arg[2] = {g, &want};
    if (!wait_until(status_is, arg))
        return 20;
    int rc = spindle_send(g, 0, "late", 4, 0);
    if (rc != want) {
        fprintf(stderr, "member: a send returned %d (%s), not %d\n", rc, spindle_errmsg(), want);
        return 21;
    }
    if (strstr(spindle_errmsg(), says) == NULL) {
        fprintf(stderr, "member: '%s' does not say '%s'\n", spindle_errmsg(), says);
        return 22;
    }
    return 0;
}

static int member(const char *bootstrap, const char *name, uint32_t self, enum role role, int go)
{
    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.self = self;
    o.num_members = MEMBERS;
    o.bootstrap = bootstrap;
    o.group_name = name;
    o.admin_dir = admin_dir;
    o.tolerate_failures = true;
    o.deliver = on_deliver;
    o.view_changed = on_view;
    struct spindle_subgroup_config sg = {ids, MEMBERS, ids, MEMBERS, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g;
    if (spindle_group_create(&o, &sg, 1, &g) != 0) {
        fprintf(stderr, "member %u: %s\n", self, spindle_errmsg());
        return 2;
    }
    for (uint32_t i = 0; i < MESSAGES; i++)
        if (spindle_send(g, 0, &i, sizeof i, 0) != 0)
            return 3;
    if (spindle_flush(g, 30000) != 0)
        return 4;
    int rc = 0;
    if (role == IS_REMOVED)
        rc = ends_with(g, SPINDLE_EREMOVED, "removed from the group");
    else if (role == LEAVES)
        rc = ends_with(g, SPINDLE_ESHUTDOWN, "at an administrator's request");
    else if (!wait_until(in_view_one, NULL))
        rc = 10;
    else if (!wait_until(all_delivered, NULL))
        rc = 13;
    if (role == STAYS) {
        char byte;
        if (read(go, &byte, 1) < 0) /* the test has seen what it wanted */
            rc = 11;
        if (rc == 0 && spindle_group_shutdown(g, 30000) != 0)
            rc = 12;
    }
    spindle_group_destroy(g);
    return rc;
}

/* ---- the test's side ------------------------------------------------- */

struct running {
    pid_t pids[MEMBERS];
    int go; /* closed: the members that stay shut down */
    char name[64];
};

static void start_members(struct running *run, const char *name, const enum role roles[MEMBERS])
{
    char bootstrap[128];
    snprintf(bootstrap, sizeof bootstrap, "%s/%s", root, name);
    snprintf(run->name, sizeof run->name, "%s", name);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    for (uint32_t i = 0; i < MEMBERS; i++) {
        run->pids[i] = fork();
        assert_true(run->pids[i] >= 0);
        if (run->pids[i] == 0) {
            close(fds[1]);
            alarm(90); /* a hang ends the member and fails the test */
            _exit(member(bootstrap, name, i, roles[i], fds[0]));
        }
    }
    close(fds[0]);
    run->go = fds[1];
}

static void expect_exit(pid_t pid, uint32_t id)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("member %u: status 0x%x", id, status);
}

static void finish(struct running *run, uint32_t gone)
{
    expect_exit(run->pids[gone], gone);
    close(run->go);
    for (uint32_t i = 0; i < MEMBERS; i++)
        if (i != gone)
            expect_exit(run->pids[i], i);
}

/* Runs command (sh); its exit status, its stdout and stderr in out. */
static int run(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run(char *out, size_t size, const char *fmt, ...)
{
    char command[2048];
    va_list args;
    va_start(args, fmt);
    vsnprintf(command, sizeof command, fmt, args);
    va_end(args);
    char path[128], full[2300];
    snprintf(path, sizeof path, "%s/command-output", root);
    snprintf(full, sizeof full, "(%s) >%s 2>&1", command, path);
    int status = system(full);
    FILE *file = fopen(path, "r");
    assert_non_null(file);
    size_t got = fread(out, 1, size - 1, file);
    out[got] = '\0';
    fclose(file);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Runs the command until it exits 0 (30 s at most): a jq -e check of a
 * member's report that holds once the member got there. */
static void until_true(const char *what, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void until_true(const char *what, const char *fmt, ...)
{
    char command[2048], out[8192];
    va_list args;
    va_start(args, fmt);
    vsnprintf(command, sizeof command, fmt, args);
    va_end(args);
    uint64_t deadline = sp_now_ns() + 30000000000ull;
    while (run(out, sizeof out, "%s", command) != 0) {
        if (sp_now_ns() > deadline)
            fail_msg("%s: still not so after 30 s; last: %s", what, out);
        struct timespec pause = {0, 20000000};
        nanosleep(&pause, NULL);
    }
}

static void expect_run(int status, const char *says, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void expect_run(int status, const char *says, const char *fmt, ...)
{
    char command[2048], out[16384];
    va_list args;
    va_start(args, fmt);
    vsnprintf(command, sizeof command, fmt, args);
    va_end(args);
    int got = run(out, sizeof out, "%s", command);
    if (got != status || strstr(out, says) == NULL)
        fail_msg("%s: status %d (want %d), said: %s (want '%s')", command, got, status, out, says);
}

/* Every member of run reports view 0 of three members and all their
 * messages delivered. */
static void wait_for_the_group(const struct running *run)
{
    for (uint32_t i = 0; i < MEMBERS; i++)
        until_true("a member's first report",
                   "%s --json --dir %s %s/%u | jq -e '.ok and .member.id == %u and .view.id == 0 "
                   "and ([.view.members[].id] == [0,1,2]) and .view.leader == 0 "
                   "and .counters.messages_delivered == %u and .counters.messages_sent == %u "
                   "and .subgroups[0].senders == [0,1,2] and .subgroups[0].mode == \"atomic\" "
                   "and .subgroups[0].window_size == 16 and .subgroups[0].max_payload == 64 "
                   "and .transport.name == \"shm\" and .transport.peers_connected == 2 "
                   "and .transport.peers_failed == 0 and .status.code == 0 "
                   "and ([.view.members[].link] | map(select(. == \"self\")) | length) == 1'",
                   stat_tool, admin_dir, run->name, i, i, MEMBERS * MESSAGES, MESSAGES);
}

/* Member `asker` of run reports view 1 without member gone. (Its
 * counters are the new view's: the members check that they delivered
 * every message of the first view, the departed member's too.) */
static void wait_for_view_one(const struct running *run, uint32_t asker, uint32_t gone)
{
    until_true("the view without the departed member",
               "%s --json --dir %s %s/%u | jq -e '.view.id == 1 and "
               "([.view.members[].id] | index(%u) == null) and (.view.members | length) == 2 "
               "and .transport.peers_connected == 1 and .status.code == 0'",
               stat_tool, admin_dir, run->name, asker, gone);
}

static void test_remove_takes_a_member_out(void **state)
{
    (void)state;
    static const enum role roles[MEMBERS] = {STAYS, STAYS, IS_REMOVED};
    struct running group;
    start_members(&group, "removal", roles);
    wait_for_the_group(&group);
    /* spindle-stat without a member: every member, one JSON line each. */
    expect_run(0, "3", "%s --json --dir %s removal | jq -s length", stat_tool, admin_dir);
    expect_run(0, "View 0, leader 0, 3 members", "%s --dir %s removal/1", stat_tool, admin_dir);
    expect_run(1, "member 0 is this member", "%s --dir %s remove removal/0 0", ctl_tool, admin_dir);
    expect_run(1, "member 9 is not in view 0", "%s --dir %s remove removal/0 9", ctl_tool,
               admin_dir);
    expect_run(1, "'x' is not a member id", "%s --dir %s remove removal/0 x", ctl_tool, admin_dir);
    expect_run(1, "no such member", "%s --dir %s remove removal/7 1", ctl_tool, admin_dir);
    expect_run(0, "suspected: the members install a view without it",
               "%s --dir %s remove removal/0 2", ctl_tool, admin_dir);
    wait_for_view_one(&group, 0, 2);
    wait_for_view_one(&group, 1, 2);
    /* Member 2 exits once it learned SPINDLE_EREMOVED; its socket goes. */
    expect_exit(group.pids[2], 2);
    char socket_path[256];
    snprintf(socket_path, sizeof socket_path, "%s/removal-2.sock", admin_dir);
    assert_int_equal(access(socket_path, F_OK), -1);
    expect_run(1, "no such member", "%s --dir %s removal/2", stat_tool, admin_dir);
    close(group.go);
    expect_exit(group.pids[0], 0);
    expect_exit(group.pids[1], 1);
}

static void test_leave_makes_a_member_leave(void **state)
{
    (void)state;
    static const enum role roles[MEMBERS] = {STAYS, STAYS, LEAVES};
    struct running group;
    start_members(&group, "leaving", roles);
    wait_for_the_group(&group);
    expect_run(0, "accepted", "%s --dir %s leave leaving/2", ctl_tool, admin_dir);
    wait_for_view_one(&group, 0, 2);
    wait_for_view_one(&group, 1, 2);
    finish(&group, 2);
}

/* Connects to path, sends length bytes of request, and reads the answer. */
static void ask_raw(const char *path, const char *request, size_t length, char *answer, size_t size)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    assert_true(strlen(path) < sizeof address.sun_path);
    memcpy(address.sun_path, path, strlen(path) + 1);
    assert_int_equal(connect(fd, (struct sockaddr *)&address, sizeof address), 0);
    /* A request the member cuts short may find the socket closed. */
    (void)send(fd, request, length, MSG_NOSIGNAL);
    size_t have = 0;
    ssize_t got;
    while (have + 1 < size && (got = read(fd, answer + have, size - 1 - have)) > 0)
        have += (size_t)got;
    answer[have] = '\0';
    close(fd);
}

static void expect_answer(const char *path, const char *request, size_t length, const char *says)
{
    char answer[4096];
    ask_raw(path, request, length, answer, sizeof answer);
    if (strncmp(answer, "{\"ok\":false", 11) != 0 || strstr(answer, says) == NULL)
        fail_msg("request of %zu bytes: answer '%s' does not say '%s'", length, answer, says);
}

static uint32_t as_nobody(uint32_t uid)
{
    (void)uid;
    return 65534;
}

/* One member in this process: what a client of another user, garbage, an
 * oversized request and a stale socket get. */
static void test_endpoint_refuses_strangers_and_garbage(void **state)
{
    (void)state;
    char bootstrap[128], path[256];
    snprintf(bootstrap, sizeof bootstrap, "%s/alone", root);
    snprintf(path, sizeof path, "%s/alone-0.sock", admin_dir);
    /* Sockets whose processes are gone: named as stale; at creation the
     * member's own is replaced and another member's removed. */
    char other[256];
    snprintf(other, sizeof other, "%s/other-5.sock", admin_dir);
    assert_int_equal(mkdir(admin_dir, 0700) == 0 || errno == EEXIST, 1);
    const char *stale_paths[2] = {path, other};
    for (int i = 0; i < 2; i++) {
        int stale = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un address = {.sun_family = AF_UNIX};
        assert_true(strlen(stale_paths[i]) < sizeof address.sun_path);
        memcpy(address.sun_path, stale_paths[i], strlen(stale_paths[i]) + 1);
        assert_int_equal(bind(stale, (struct sockaddr *)&address, sizeof address), 0);
        close(stale);
    }
    expect_run(1, "stale socket", "%s --dir %s alone/0", stat_tool, admin_dir);
    expect_run(1, "stale socket", "%s --dir %s", stat_tool, admin_dir); /* nobody answered */

    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.bootstrap = bootstrap;
    o.group_name = "alone";
    o.admin_dir = admin_dir;
    struct spindle_subgroup_config sg = {ids, 1, ids, 1, 4, 16, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(access(other, F_OK), -1);
    expect_run(0, "\"ok\":true", "%s --json --dir %s alone/0", stat_tool, admin_dir);

    /* Garbage, an oversized line, unknown commands: an error each. */
    expect_answer(path, "\x01\x02garbage\n", 10, "byte 0x01 at offset 0 is not printable");
    char big[1000];
    memset(big, 'a', sizeof big);
    expect_answer(path, big, sizeof big, "no newline in the first 256 bytes");
    expect_answer(path, "reboot now\n", 11, "unknown command 'reboot'");
    expect_answer(path, "stats yaml\n", 11, "stats takes json or text");
    expect_answer(path, "remove 64\n", 10, "'64' is not a member id");
    expect_answer(path, "remove\n", 7, "remove needs a member id");
    /* Leave needs tolerate_failures: refused, the member stays. */
    expect_answer(path, "leave\n", 6, "leave needs tolerate_failures");
    /* A client that says nothing is dropped after ADMIN_CLIENT_MS. */
    expect_answer(path, "", 0, "no complete line within 1000 ms");
    expect_run(0, "Status: running", "%s --dir %s alone/0", stat_tool, admin_dir);
    assert_int_equal(spindle_group_status(g), 0);

    /* Another user: the directory keeps it out, and the peer's uid too
     * (as the endpoint would see a client of uid 65534). */
    expect_run(1, "permission denied",
               "setpriv --reuid=65534 --regid=65534 --clear-groups %s "
               "--dir %s alone/0",
               stat_tool, admin_dir);
    admin_test_peer_uid(as_nobody);
    expect_answer(path, "stats\n", 6, "uid 65534 may not use this endpoint");
    admin_test_peer_uid(NULL);
    expect_run(0, "\"ok\":true", "%s --json --dir %s alone/0", stat_tool, admin_dir);

    spindle_group_destroy(g);
    assert_int_equal(access(path, F_OK), -1);
}

/* "off" starts no endpoint; a directory of others is refused. */
static void test_endpoint_off_and_a_bad_directory(void **state)
{
    (void)state;
    char bootstrap[128], path[256], open_dir[128];
    snprintf(bootstrap, sizeof bootstrap, "%s/quiet", root);
    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.bootstrap = bootstrap;
    o.group_name = "quiet";
    o.admin_dir = "off";
    struct spindle_subgroup_config sg = {ids, 1, ids, 1, 4, 16, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), 0);
    snprintf(path, sizeof path, "%s/quiet-0.sock", admin_dir);
    assert_int_equal(access(path, F_OK), -1);
    spindle_group_destroy(g);

    snprintf(open_dir, sizeof open_dir, "%s/open", root);
    assert_int_equal(mkdir(open_dir, 0777), 0);
    assert_int_equal(chmod(open_dir, 0777), 0);
    o.admin_dir = open_dir;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), SPINDLE_EPERM);
    if (strstr(spindle_errmsg(), "writable by group or others") == NULL)
        fail_msg("'%s' does not say why", spindle_errmsg());
}

static void expect_parse(const char *line, int rc, enum admin_command command, uint32_t id,
                         const char *says)
{
    struct admin_request request;
    assert_int_equal(admin_request_parse(line, strlen(line), &request), rc);
    if (rc == 0) {
        assert_int_equal(request.command, command);
        assert_int_equal(request.member, id);
        char again[64];
        int length = admin_request_format(&request, again, sizeof again);
        assert_true(length > 0);
        struct admin_request reparsed;
        assert_int_equal(admin_request_parse(again, (size_t)length, &reparsed), 0);
        assert_memory_equal(&request, &reparsed, sizeof request);
    } else if (strstr(spindle_errmsg(), says) == NULL) {
        fail_msg("'%s': '%s' does not say '%s'", line, spindle_errmsg(), says);
    }
}

static void test_request_parser(void **state)
{
    (void)state;
    expect_parse("stats", 0, ADMIN_STATS, 0, NULL);
    expect_parse("  stats   json ", 0, ADMIN_STATS, 0, NULL);
    expect_parse("stats text", 0, ADMIN_STATS_TEXT, 0, NULL);
    expect_parse("leave", 0, ADMIN_LEAVE, 0, NULL);
    expect_parse("remove 63", 0, ADMIN_REMOVE, 63, NULL);
    expect_parse("remove 0", 0, ADMIN_REMOVE, 0, NULL);
    expect_parse("", SPINDLE_EINVAL, 0, 0, "admin request: empty");
    expect_parse("   ", SPINDLE_EINVAL, 0, 0, "admin request: empty");
    expect_parse("remove 007", SPINDLE_EINVAL, 0, 0, "'007' is not a member id");
    expect_parse("remove -1", SPINDLE_EINVAL, 0, 0, "'-1' is not a member id");
    expect_parse("remove 1 2", SPINDLE_EINVAL, 0, 0, "remove takes one member id");
    expect_parse("leave now", SPINDLE_EINVAL, 0, 0, "leave takes no argument");
    expect_parse("stats json text", SPINDLE_EINVAL, 0, 0, "stats takes json or text");
    expect_parse("a b c d", SPINDLE_EINVAL, 0, 0, "more than 3 words");
    expect_parse("stats\t", SPINDLE_EINVAL, 0, 0, "byte 0x09 at offset 5");
    expect_parse("STATS", SPINDLE_EINVAL, 0, 0, "unknown command 'STATS'");
    char line[ADMIN_REQUEST_MAX + 1];
    memset(line, ' ', sizeof line);
    memcpy(line, "stats", 5);
    line[ADMIN_REQUEST_MAX] = '\0';
    expect_parse(line, SPINDLE_EINVAL, 0, 0, "longer than the 255");
    line[ADMIN_REQUEST_MAX - 1] = '\0';
    expect_parse(line, 0, ADMIN_STATS, 0, NULL);
    struct admin_request request = {ADMIN_REMOVE, 64};
    char out[64];
    assert_int_equal(admin_request_format(&request, out, sizeof out), SPINDLE_EINVAL);
}

static int setup_dirs(void **state)
{
    (void)state;
    snprintf(admin_dir, sizeof admin_dir, "%s/admin", root);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 1;
    stat_tool = argv[1];
    ctl_tool = argv[2];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_request_parser, setup_dirs),
        cmocka_unit_test_setup(test_endpoint_refuses_strangers_and_garbage, setup_dirs),
        cmocka_unit_test_setup(test_endpoint_off_and_a_bad_directory, setup_dirs),
        cmocka_unit_test_setup(test_remove_takes_a_member_out, setup_dirs),
        cmocka_unit_test_setup(test_leave_makes_a_member_leave, setup_dirs),
    };
    return SAMPLE_RUN_IN_ROOT(root, "spindle-admin", tests);
}
