/*
 * Persistent member identities (name and incarnation), with real processes
 * over shm and a loopback TCP bootstrap.
 *
 * Two members of one group with one name: both creations fail, naming the
 * name. A restart: members a, b, c (incarnation 1) form a group and c is
 * frozen (SIGSTOP: to the others it looks alive, and the failure timeout
 * is a minute, far beyond the test). A process named c with incarnation 1
 * again is refused (not a later incarnation); one named c with incarnation
 * 2 is admitted, which needs the frozen c removed first: only its name can
 * have removed it, as the failure detector never fired. a and b must see
 * the view where c (1) left and the one where c (2) joined, with the
 * identities in spindle_view_info, and spindle_group_identity must give
 * every member's identity in the view the group ends in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_ports.h"
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spindle/spindle.h>

#define MEMBERS 3

static const uint32_t everyone[MEMBERS] = {0, 1, 2};
static const char *const names[MEMBERS] = {"a", "b", "c"};

/* What a member saw in its view upcalls (the membership thread writes,
 * the member's main thread reads: all atomic). */
struct seen {
    uint64_t c1_left, c2_joined; /* views where c (1) left and c (2) joined */
    uint32_t c2_id;
    int nameless; /* a view listed a member without an identity */
};

static int same(const struct spindle_member_identity *identity, const char *name,
                uint64_t incarnation)
{
    return strcmp(identity->name, name) == 0 && identity->incarnation == incarnation;
}

static void on_view(void *ctx, const struct spindle_view_info *view)
{
    struct seen *seen = ctx;
    for (uint32_t r = 0; r < view->num_members; r++)
        if (view->identities[r].name[0] == '\0' || view->identities[r].incarnation == 0)
            __atomic_store_n(&seen->nameless, 1, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < view->num_left; i++)
        if (same(&view->left_identities[i], "c", 1) && view->left[i] == 2)
            __atomic_store_n(&seen->c1_left, view->view_id, __ATOMIC_RELEASE);
    for (uint32_t i = 0; i < view->num_joined; i++)
        if (same(&view->joined_identities[i], "c", 2)) {
            __atomic_store_n(&seen->c2_id, view->joined[i], __ATOMIC_RELAXED);
            __atomic_store_n(&seen->c2_joined, view->view_id, __ATOMIC_RELEASE);
        }
}

static void options(struct spindle_group_options *o, const char *bootstrap, struct seen *seen)
{
    spindle_group_options_init(o);
    o->bootstrap = bootstrap;
    o->failure_timeout_ms = 60000;
    o->bootstrap_timeout_ms = 20000;
    o->tolerate_failures = true;
    o->view_changed = on_view;
    o->view_ctx = seen;
}

static const struct spindle_subgroup_config subgroup = {
    everyone, MEMBERS, everyone, MEMBERS, 16, 64, SPINDLE_MODE_ATOMIC};

/* The group as it ends: a (0), b (1) and c of incarnation 2 at c2_id. */
static int check_final(spindle_group_t *g, uint32_t c2_id)
{
    struct spindle_member_identity identity;
    if (spindle_group_identity(g, 0, &identity) != 0 || !same(&identity, "a", 1))
        return 1;
    if (spindle_group_identity(g, 1, &identity) != 0 || !same(&identity, "b", 1))
        return 1;
    if (spindle_group_identity(g, c2_id, &identity) != 0 || !same(&identity, "c", 2))
        return 1;
    /* The frozen c's id was given again, or is no member at all. */
    if (c2_id != 2 && spindle_group_identity(g, 2, &identity) != SPINDLE_EINVAL)
        return 1;
    return 0;
}

/* Member self of the restart test: reports "r" once in the group, shuts
 * down when its byte on `stop` comes, then checks what it saw. */
static int member_main(const char *members, uint32_t self, int ready, int stop)
{
    struct seen seen = {0};
    struct spindle_group_options o;
    options(&o, members, &seen);
    o.self = self;
    o.num_members = MEMBERS;
    o.member_name = names[self];
    o.incarnation = 1;
    spindle_group_t *g = NULL;
    if (spindle_group_create(&o, &subgroup, 1, &g) != 0) {
        fprintf(stderr, "member %u: %s\n", self, spindle_errmsg());
        return 2;
    }
    struct spindle_member_identity identity;
    if (spindle_group_identity(g, 2, &identity) != 0 || !same(&identity, "c", 1))
        return 3;
    char byte;
    if (write(ready, "r", 1) != 1 || read(stop, &byte, 1) != 1)
        return 4;
    /* The joiner is in (it reported so); this member's upcall for its view
     * may still be on its way. */
    while (__atomic_load_n(&seen.c2_joined, __ATOMIC_ACQUIRE) == 0)
        usleep(1000);
    int final = check_final(g, __atomic_load_n(&seen.c2_id, __ATOMIC_RELAXED));
    int rc = spindle_group_shutdown(g, 30000);
    spindle_group_destroy(g);
    if (rc != 0) {
        fprintf(stderr, "member %u: shutdown: %s\n", self, spindle_errmsg());
        return 5;
    }
    uint64_t left = __atomic_load_n(&seen.c1_left, __ATOMIC_ACQUIRE);
    uint64_t joined = __atomic_load_n(&seen.c2_joined, __ATOMIC_ACQUIRE);
    if (left == 0 || joined <= left) {
        fprintf(stderr, "member %u: c (1) left in view %llu, c (2) joined in view %llu\n", self,
                (unsigned long long)left, (unsigned long long)joined);
        return 6;
    }
    if (__atomic_load_n(&seen.nameless, __ATOMIC_RELAXED) != 0)
        return 7;
    return final == 0 ? 0 : 8;
}

/* A process named c with `incarnation` that joins through contact. With
 * incarnation 1 it must be refused, naming why; with 2 it must get in,
 * report "j" and shut down on its byte on `stop`. */
static int restarted_main(const char *contact, const char *self, uint64_t incarnation, int ready,
                          int stop)
{
    struct seen seen = {0};
    struct spindle_group_options o;
    options(&o, self, &seen);
    o.join = contact;
    o.member_name = "c";
    o.incarnation = incarnation;
    struct spindle_subgroup_config sg = subgroup;
    sg.num_members = 1;
    sg.num_senders = 0;
    spindle_group_t *g = NULL;
    int rc = spindle_group_create(&o, &sg, 1, &g);
    if (incarnation == 1) {
        if (rc == SPINDLE_EINVAL && strstr(spindle_errmsg(), "is not larger") != NULL)
            return 0;
        fprintf(stderr, "restart of incarnation 1: %d: %s\n", rc, spindle_errmsg());
        return 10;
    }
    if (rc != 0) {
        fprintf(stderr, "restart of incarnation 2: %s\n", spindle_errmsg());
        return 11;
    }
    struct spindle_member_identity identity;
    int id = spindle_group_self(g);
    if (spindle_group_identity(g, (uint32_t)id, &identity) != 0 || !same(&identity, "c", 2))
        return 12;
    char byte;
    if (write(ready, "j", 1) != 1 || read(stop, &byte, 1) != 1)
        return 13;
    rc = spindle_group_shutdown(g, 30000);
    spindle_group_destroy(g);
    return rc == 0 ? 0 : 14;
}

static pid_t spawn_member(const char *members, uint32_t self, int ready, int stop)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(120);
        _exit(member_main(members, self, ready, stop));
    }
    return pid;
}

static pid_t spawn_restart(const char *contact, uint64_t incarnation, int ready, int stop)
{
    char self[32];
    snprintf(self, sizeof self, "127.0.0.1:%u", test_free_port());
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(120);
        _exit(restarted_main(contact, self, incarnation, ready, stop));
    }
    return pid;
}

static void expect_exit(pid_t pid, int code, const char *who)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != code)
        fail_msg("%s: status %d, expected exit %d", who, status, code);
}

static void member_list(char *out, size_t cap, int count)
{
    size_t at = 0;
    for (int i = 0; i < count; i++)
        at += (size_t)snprintf(out + at, cap - at, "%s127.0.0.1:%u", i > 0 ? "," : "",
                               test_free_port());
}

static void test_a_restarted_member_replaces_its_earlier_incarnation(void **state)
{
    (void)state;
    char members[128];
    member_list(members, sizeof members, MEMBERS);
    char contact[32];
    snprintf(contact, sizeof contact, "%.*s", (int)(strchr(members, ',') - members), members);
    int ready[2], stop[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(stop), 0);
    pid_t pids[MEMBERS];
    for (uint32_t i = 0; i < MEMBERS; i++)
        pids[i] = spawn_member(members, i, ready[1], stop[0]);
    char byte;
    for (int i = 0; i < MEMBERS; i++)
        assert_int_equal(read(ready[0], &byte, 1), 1);
    assert_int_equal(kill(pids[2], SIGSTOP), 0);

    expect_exit(spawn_restart(contact, 1, ready[1], stop[0]), 0, "restart of incarnation 1");
    pid_t restarted = spawn_restart(contact, 2, ready[1], stop[0]);
    assert_int_equal(read(ready[0], &byte, 1), 1);
    assert_int_equal(byte, 'j');

    for (int i = 0; i < 3; i++) /* a, b and the new c */
        assert_int_equal(write(stop[1], "s", 1), 1);
    expect_exit(pids[0], 0, "member a");
    expect_exit(pids[1], 0, "member b");
    expect_exit(restarted, 0, "restart of incarnation 2");
    assert_int_equal(kill(pids[2], SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(pids[2], &status, 0), pids[2]);
}

/* Both members of a group of two are named "twin". */
static int twin_main(const char *members, uint32_t self)
{
    struct spindle_group_options o;
    options(&o, members, NULL);
    o.view_changed = NULL; /* it never gets a view */
    o.self = self;
    o.num_members = 2;
    o.member_name = "twin";
    struct spindle_subgroup_config sg = subgroup;
    sg.num_members = sg.num_senders = 2;
    spindle_group_t *g = NULL;
    int rc = spindle_group_create(&o, &sg, 1, &g);
    if (rc == SPINDLE_EINVAL &&
        strstr(spindle_errmsg(), "members 0 and 1 both have the name 'twin'") != NULL)
        return 0;
    fprintf(stderr, "twin %u: %d: %s\n", self, rc, spindle_errmsg());
    spindle_group_destroy(g);
    return 1;
}

static void test_two_members_of_one_name_are_refused(void **state)
{
    (void)state;
    char members[96];
    member_list(members, sizeof members, 2);
    pid_t pids[2];
    for (uint32_t i = 0; i < 2; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(60);
            _exit(twin_main(members, i));
        }
    }
    expect_exit(pids[0], 0, "twin 0");
    expect_exit(pids[1], 0, "twin 1");
}

/* Names the library takes and refuses, before anything is opened. */
static void test_member_names_are_checked(void **state)
{
    (void)state;
    struct spindle_group_options o;
    options(&o, "127.0.0.1:1", NULL);
    o.view_changed = NULL;
    struct spindle_subgroup_config sg = subgroup;
    sg.num_members = sg.num_senders = 1;
    o.num_members = 1;
    char long_name[SPINDLE_MEMBER_NAME_MAX + 1];
    memset(long_name, 'x', SPINDLE_MEMBER_NAME_MAX);
    long_name[SPINDLE_MEMBER_NAME_MAX] = '\0';
    const char *bad[] = {"", "with space", "tab\there", long_name};
    const char *why[] = {"not 0", "byte 0x20 at 4", "byte 0x09 at 3", "or more"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.member_name = bad[i];
        spindle_group_t *g = NULL;
        assert_int_equal(spindle_group_create(&o, &sg, 1, &g), SPINDLE_EINVAL);
        assert_null(g);
        if (strstr(spindle_errmsg(), why[i]) == NULL)
            fail_msg("name %zu: '%s' does not say '%s'", i, spindle_errmsg(), why[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_member_names_are_checked),
        cmocka_unit_test(test_two_members_of_one_name_are_refused),
        cmocka_unit_test(test_a_restarted_member_replaces_its_earlier_incarnation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
