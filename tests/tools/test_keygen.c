/*
 * spindle-keygen (tools/keygen): writes a 32-byte key of mode 0600 that the
 * library accepts, two runs give two different keys, and it never
 * overwrites an existing file nor follows a symlink planted at the name.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "control/ctl.h"

static const char *keygen;
static char dir[64];

/* Runs spindle-keygen path (stderr to DIR/err); its exit status. */
static int run_keygen(const char *path)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char err[96];
        snprintf(err, sizeof err, "%s/err", dir);
        int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        execl(keygen, keygen, path, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void read_file(const char *path, uint8_t *out, size_t len)
{
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, out, len), (ssize_t)len);
    close(fd);
}

static void test_keygen_writes_a_private_key_and_never_overwrites(void **state)
{
    (void)state;
    char first[96], second[96], link[96], err[96], text[512] = "";
    snprintf(first, sizeof first, "%s/first.key", dir);
    snprintf(second, sizeof second, "%s/second.key", dir);
    snprintf(link, sizeof link, "%s/link.key", dir);
    snprintf(err, sizeof err, "%s/err", dir);
    umask(022); /* the usual umask would leave 0644 to a plain creat */
    assert_int_equal(run_keygen(first), 0);
    struct stat st;
    assert_int_equal(lstat(first, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_size, 32);
    struct ctl_keyring ring = {0};
    assert_int_equal(ctl_key_load(first, &ring), 0);
    assert_int_equal(run_keygen(second), 0);
    assert_int_equal(ctl_key_load(second, &ring), 0);
    assert_memory_not_equal(ring.key[0], ring.key[1], CTL_KEY_BYTES);

    /* An existing key stays as it was. */
    uint8_t before[32], after[32];
    read_file(first, before, sizeof before);
    assert_int_equal(run_keygen(first), 1);
    read_file(first, after, sizeof after);
    assert_memory_equal(before, after, sizeof before);
    FILE *f = fopen(err, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    assert_non_null(strstr(text, "refusing to overwrite"));
    assert_non_null(strstr(text, first));

    /* A symlink at the name is not followed (its target is not created). */
    char target[96];
    snprintf(target, sizeof target, "%s/target.key", dir);
    assert_int_equal(symlink(target, link), 0);
    assert_int_equal(run_keygen(link), 1);
    assert_int_equal(access(target, F_OK), -1);
    assert_int_equal(run_keygen(""), 2); /* usage */
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_keygen PATH-TO-spindle-keygen\n");
        return 2;
    }
    keygen = argv[1];
    snprintf(dir, sizeof dir, "/tmp/spindle-keygen-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keygen_writes_a_private_key_and_never_overwrites),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? rc : 1;
}
