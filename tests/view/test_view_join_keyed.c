/*
 * A join with a group key (docs/SECURITY.md), real processes over shm and
 * a loopback TCP bootstrap: two members holding key a send, then a joiner
 * holding key b is refused (it learns only that the contact closed the
 * handshake), and a joiner holding key a is admitted and loads the state
 * the leader handed over (sealed like every control frame): the leader's
 * delivery count as of the join, every message sent. The library also
 * refuses a key file that others may read, and a key with a directory
 * bootstrap, naming what is wrong. Running members change their keys
 * (spindle_group_set_keys) without a restart; given a transport and a
 * provider (argv[1], argv[2]: fabric tcp) the rotation runs over that
 * transport, whose endpoints take the new keys too.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_ports.h"

#include <spindle/spindle.h>

#define MEMBERS  2
#define MESSAGES 100

static char dir[64];
/* argv[1], argv[2]: the transport and libfabric provider (NULL: shm). */
static const char *transport, *provider;

#include "join_app.h"

/* DIR/name: 32 bytes of fill, of the given mode. */
static const char *key(const char *name, uint8_t fill, mode_t mode)
{
    static char paths[4][128];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, 128, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    uint8_t bytes[32];
    memset(bytes, fill, sizeof bytes);
    assert_int_equal(write(fd, bytes, sizeof bytes), (ssize_t)sizeof bytes);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
    return path;
}

static void options(struct spindle_group_options *o, struct app *app, const char *bootstrap,
                    const char *key_file)
{
    join_app_options(o, app, bootstrap);
    o->key_file = key_file;
    o->transport = transport;
    o->provider = provider;
}

static const uint32_t everyone[MEMBERS] = {0, 1};

/* A running member's key rotation, step by step on the parent's word:
 * commands come in on `in` (one byte, the step 1..3), each step's result
 * (0, or 1 when spindle_group_set_keys failed) goes out on `out`. */
struct rotation {
    const char *old_key, *new_key;
    int in, out;
};

/* Runs the three steps of a rotation from old_key to new_key (SECURITY.md
 * "Rotating the key") as the parent says; false when a read or a write
 * on the pipes failed. */
static bool rotate_on_command(spindle_group_t *g, const struct rotation *r)
{
    for (int step = 1; step <= 3; step++) {
        uint8_t word = 0;
        if (read(r->in, &word, 1) != 1 || word != step)
            return false;
        int rc = step == 1   ? spindle_group_set_keys(g, r->old_key, r->new_key)
                 : step == 2 ? spindle_group_set_keys(g, r->new_key, r->old_key)
                             : spindle_group_set_keys(g, r->new_key, NULL);
        uint8_t result = rc == 0 ? 0 : 1;
        if (rc != 0)
            fprintf(stderr, "rotation step %d: %s\n", step, spindle_errmsg());
        if (write(r->out, &result, 1) != 1)
            return false;
    }
    return true;
}

/* A member proving key_file and also accepting accept_key_file (may be
 * NULL): sends, waits for every message, rotates its keys when given a
 * rotation, waits when a joiner is expected for the join's view, then
 * shuts down (with the joiner). */
static int member_main(const char *members, uint32_t self, const char *key_file,
                       const char *accept_key_file, bool joiner_expected,
                       const struct rotation *rotation)
{
    struct app app = {0};
    struct spindle_group_options o;
    options(&o, &app, members, key_file);
    o.accept_key_file = accept_key_file;
    o.self = self;
    o.num_members = MEMBERS;
    if (!joiner_expected)
        o.bootstrap_timeout_ms = 5000;
    struct spindle_subgroup_config sg = {everyone, MEMBERS, everyone,           MEMBERS,
                                         16,       64,      SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    if (spindle_group_create(&o, &sg, 1, &g) != 0) {
        fprintf(stderr, "member %u: %s\n", self, spindle_errmsg());
        return 2;
    }
    for (uint64_t i = 0; i < MESSAGES; i++)
        if (spindle_send(g, 0, &i, sizeof i, 0) != 0)
            return 3;
    if (spindle_flush(g, 20000) != 0)
        return 4;
    while (__atomic_load_n(&app.delivered, __ATOMIC_ACQUIRE) < MEMBERS * MESSAGES)
        usleep(1000);
    if (rotation != NULL && !rotate_on_command(g, rotation))
        return 6;
    while (joiner_expected && __atomic_load_n(&app.view_id, __ATOMIC_ACQUIRE) < 1)
        usleep(1000);
    int rc = spindle_group_shutdown(g, 30000);
    spindle_group_destroy(g);
    return rc == 0 ? 0 : 5;
}

/* A joiner: 0 when admitted with the state of every message sent; 10
 * when refused in the handshake, as a joiner with another key must be. */
static int joiner_main(const char *contact, const char *self, const char *key_file, int timeout)
{
    struct app app = {0};
    struct spindle_group_options o;
    options(&o, &app, self, key_file);
    o.join = contact;
    o.bootstrap_timeout_ms = timeout;
    struct spindle_subgroup_config sg = {everyone, 1, everyone, 0, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    if (spindle_group_create(&o, &sg, 1, &g) != 0) {
        fprintf(stderr, "joiner: %s\n", spindle_errmsg());
        return strstr(spindle_errmsg(), "handshake") != NULL ? 10 : 20;
    }
    int rc = spindle_group_shutdown(g, 30000);
    spindle_group_destroy(g);
    return rc == 0 && app.loaded == MEMBERS * MESSAGES ? 0 : 21;
}

static int wait_exit(pid_t pid)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static pid_t spawn_joiner(const char *contact, const char *key_file, int timeout)
{
    char self[32];
    snprintf(self, sizeof self, "127.0.0.1:%u", test_free_port());
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(90);
        _exit(joiner_main(contact, self, key_file, timeout));
    }
    return pid;
}

static void test_keyed_join_admits_the_key_and_refuses_another(void **state)
{
    (void)state;
    const char *key_a = key("a.key", 0xa1, 0600), *key_b = key("b.key", 0xb2, 0600);
    char members[96], contact[32];
    uint16_t ports[MEMBERS] = {test_free_port(), test_free_port()};
    snprintf(members, sizeof members, "127.0.0.1:%u,127.0.0.1:%u", ports[0], ports[1]);
    snprintf(contact, sizeof contact, "127.0.0.1:%u", ports[0]);
    pid_t pids[MEMBERS];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(90);
            _exit(member_main(members, i, key_a, NULL, true, NULL));
        }
    }
    assert_int_equal(wait_exit(spawn_joiner(contact, key_b, 3000)), 10);
    assert_int_equal(wait_exit(spawn_joiner(contact, key_a, 20000)), 0);
    for (uint32_t i = 0; i < MEMBERS; i++)
        assert_int_equal(wait_exit(pids[i]), 0);
}

/* Halfway through a rotation member 0 still proves the old key and
 * accepts the new one, member 1 already proves the new one and accepts
 * the old: they form the group. Member 1 with the new key alone against
 * member 0 with the old alone does not. */
static void test_rotation_accepts_old_and_new_key(void **state)
{
    (void)state;
    const char *old_key = key("old.key", 0x01, 0600), *new_key = key("new.key", 0x02, 0600);
    char members[96];
    for (int round = 0; round < 2; round++) {
        snprintf(members, sizeof members, "127.0.0.1:%u,127.0.0.1:%u", test_free_port(),
                 test_free_port());
        pid_t pids[MEMBERS];
        for (uint32_t i = 0; i < MEMBERS; i++) {
            pids[i] = fork();
            assert_true(pids[i] >= 0);
            if (pids[i] == 0) {
                alarm(60);
                const char *accept = round == 0 ? (i == 0 ? new_key : old_key) : NULL;
                _exit(member_main(members, i, i == 0 ? old_key : new_key, accept, false, NULL));
            }
        }
        for (uint32_t i = 0; i < MEMBERS; i++) {
            int rc = wait_exit(pids[i]);
            if (round == 0)
                assert_int_equal(rc, 0);
            else
                assert_int_equal(rc, 2); /* neither could form the group */
        }
    }
}

/* Two running members with the old key are told to rotate, step by step
 * (both at each step): (old, new), (new, old), (new alone). Afterwards a
 * joiner with the old key is refused and one with the new key is
 * admitted and loads the state: the keys changed without a restart. */
static void test_running_members_rotate_their_key(void **state)
{
    (void)state;
    const char *old_key = key("run-old.key", 0x11, 0600), *new_key = key("run-new.key", 0x22, 0600);
    char members[96], contact[32];
    uint16_t ports[MEMBERS] = {test_free_port(), test_free_port()};
    snprintf(members, sizeof members, "127.0.0.1:%u,127.0.0.1:%u", ports[0], ports[1]);
    snprintf(contact, sizeof contact, "127.0.0.1:%u", ports[0]);
    pid_t pids[MEMBERS];
    int commands[MEMBERS][2], results[MEMBERS][2];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        assert_int_equal(pipe(commands[i]), 0);
        assert_int_equal(pipe(results[i]), 0);
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(90);
            struct rotation r = {old_key, new_key, commands[i][0], results[i][1]};
            _exit(member_main(members, i, old_key, NULL, true, &r));
        }
    }
    for (uint8_t step = 1; step <= 3; step++) {
        for (uint32_t i = 0; i < MEMBERS; i++)
            assert_int_equal(write(commands[i][1], &step, 1), 1);
        for (uint32_t i = 0; i < MEMBERS; i++) {
            uint8_t result = 0xff;
            assert_int_equal(read(results[i][0], &result, 1), 1);
            assert_int_equal(result, 0);
        }
    }
    assert_int_equal(wait_exit(spawn_joiner(contact, old_key, 3000)), 10);
    assert_int_equal(wait_exit(spawn_joiner(contact, new_key, 20000)), 0);
    for (uint32_t i = 0; i < MEMBERS; i++) {
        assert_int_equal(wait_exit(pids[i]), 0);
        close(commands[i][0]);
        close(commands[i][1]);
        close(results[i][0]);
        close(results[i][1]);
    }
}

/* spindle_group_set_keys refuses what it must, naming it, and leaves the
 * keys in use as they were: a group without a key, a NULL key file, a key
 * file others may read. */
static void test_set_keys_refusals_are_named(void **state)
{
    (void)state;
    struct app app = {0};
    struct spindle_group_options o;
    char members[64];
    snprintf(members, sizeof members, "127.0.0.1:%u", test_free_port());
    options(&o, &app, members, NULL);
    o.bootstrap_timeout_ms = 5000;
    struct spindle_subgroup_config sg = {everyone, 1, everyone, 1, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), 0);
    const char *good = key("set-good.key", 5, 0600);
    assert_int_equal(spindle_group_set_keys(g, good, NULL), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "created without a key"));
    assert_int_equal(spindle_group_shutdown(g, 5000), 0);
    spindle_group_destroy(g);

    snprintf(members, sizeof members, "127.0.0.1:%u", test_free_port());
    options(&o, &app, members, good);
    g = NULL;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), 0);
    assert_int_equal(spindle_group_set_keys(g, NULL, NULL), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "key_file is NULL"));
    const char *open_key = key("set-open.key", 6, 0644);
    assert_int_equal(spindle_group_set_keys(g, good, open_key), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), open_key));
    assert_non_null(strstr(spindle_errmsg(), "mode 0644"));
    assert_int_equal(spindle_group_set_keys(g, good, NULL), 0);
    assert_int_equal(spindle_group_shutdown(g, 5000), 0);
    spindle_group_destroy(g);
}

static void test_bad_key_options_are_named(void **state)
{
    (void)state;
    struct app app = {0};
    struct spindle_group_options o;
    char members[64];
    snprintf(members, sizeof members, "127.0.0.1:%u", test_free_port());
    const char *open_key = key("open.key", 1, 0644);
    options(&o, &app, members, open_key);
    struct spindle_subgroup_config sg = {everyone, 1, everyone, 1, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), open_key));
    assert_non_null(strstr(spindle_errmsg(), "mode 0644"));
    options(&o, &app, dir, key("good.key", 2, 0600));
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "needs a TCP bootstrap"));
    snprintf(members, sizeof members, "127.0.0.1:%u", test_free_port());
    options(&o, &app, members, NULL);
    o.accept_key_file = key("accept.key", 3, 0600);
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "needs key_file"));
    assert_null(g);
}

int main(int argc, char **argv)
{
    snprintf(dir, sizeof dir, "/tmp/spindle-join-key-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_key_options_are_named),
        cmocka_unit_test(test_keyed_join_admits_the_key_and_refuses_another),
        cmocka_unit_test(test_rotation_accepts_old_and_new_key),
        cmocka_unit_test(test_running_members_rotate_their_key),
        cmocka_unit_test(test_set_keys_refusals_are_named),
    };
    /* Over libfabric the rotation must reach the endpoint too: a joiner
     * holding only the new key connects to the members' endpoints. */
    const struct CMUnitTest over_fabric[] = {
        cmocka_unit_test(test_running_members_rotate_their_key),
    };
    int rc;
    if (argc > 2) {
        transport = argv[1];
        provider = argv[2];
        rc = cmocka_run_group_tests_name(provider, over_fabric, NULL, NULL);
    } else {
        rc = cmocka_run_group_tests(tests, NULL, NULL);
    }
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? rc : 1;
}
