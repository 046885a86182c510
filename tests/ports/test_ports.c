/*
 * The tests' port reservation (tests/test_ports.h): ports sit below the
 * kernel's ephemeral range, are never handed out twice, a block locked by
 * another holder is passed over, and a forked child takes its own block.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "test_ports.h"

static void test_ports_are_below_the_ephemeral_range_and_never_repeat(void **state)
{
    (void)state;
    enum { COUNT = 3 * TEST_PORT_BLOCK + 5 }; /* spans four blocks */
    static uint16_t ports[COUNT];
    unsigned low = test_ports_ephemeral_low();
    for (unsigned i = 0; i < COUNT; i++) {
        ports[i] = test_free_port();
        assert_true(ports[i] >= TEST_PORT_LOW);
        assert_true(ports[i] < low);
        for (unsigned j = 0; j < i; j++)
            assert_int_not_equal(ports[i], ports[j]);
    }
    uint16_t run = test_port_run(TEST_PORT_BLOCK);
    assert_int_equal((run - TEST_PORT_LOW) % TEST_PORT_BLOCK, 0);
    assert_true(test_ports_bindable(run, TEST_PORT_BLOCK));
}

/* Exit status of a child: 0 when its first port is want, 1 when not. */
static int first_port_is(unsigned want)
{
    uint16_t port = test_free_port();
    if (port != want)
        fprintf(stderr, "child got port %u, want %u\n", port, want);
    return port == want ? 0 : 1;
}

/* In a lock directory of its own (TMPDIR), a child locks every block but
 * one, as other tests would; its reservation must land on the one left. */
static void test_a_locked_block_is_passed_over(void **state)
{
    (void)state;
    /* A block this process holds in the shared directory: nobody else
     * listens on it, so the child's bind check there cannot fail. */
    unsigned left = test_port_run(TEST_PORT_BLOCK);
    char dir[] = "/tmp/spindle-test-ports-test.XXXXXX";
    assert_non_null(mkdtemp(dir));
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        setenv("TMPDIR", dir, 1);
        char path[600];
        snprintf(path, sizeof path, "%s/spindle-test-ports", dir);
        if (mkdir(path, 0700) != 0)
            _exit(2);
        for (unsigned base = TEST_PORT_LOW; base + TEST_PORT_BLOCK <= test_ports_ephemeral_low();
             base += TEST_PORT_BLOCK) {
            if (base == left)
                continue;
            snprintf(path, sizeof path, "%s/spindle-test-ports/%u", dir, base);
            int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
            if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0)
                _exit(2);
        }
        _exit(first_port_is(left));
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    char rm[128];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    assert_int_equal(system(rm), 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* A forked child must not hand out the ports its parent hands out next. */
static void test_a_forked_child_takes_its_own_block(void **state)
{
    (void)state;
    uint16_t mine = test_free_port();
    int report[2];
    assert_int_equal(pipe(report), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        uint16_t port = test_free_port();
        _exit(write(report[1], &port, sizeof port) == (ssize_t)sizeof port ? 0 : 1);
    }
    uint16_t theirs = 0;
    assert_int_equal(read(report[0], &theirs, sizeof theirs), (ssize_t)sizeof theirs);
    assert_int_equal(waitpid(child, NULL, 0), child);
    close(report[0]);
    close(report[1]);
    uint16_t next = test_free_port();
    assert_int_not_equal((theirs - TEST_PORT_LOW) / TEST_PORT_BLOCK,
                         (mine - TEST_PORT_LOW) / TEST_PORT_BLOCK);
    assert_int_not_equal(theirs, next);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ports_are_below_the_ephemeral_range_and_never_repeat),
        cmocka_unit_test(test_a_locked_block_is_passed_over),
        cmocka_unit_test(test_a_forked_child_takes_its_own_block),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
