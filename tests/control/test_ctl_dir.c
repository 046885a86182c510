/* Directory bootstrap exchange among real processes, and what it refuses. */
#include <dirent.h>
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
#include "util/error.h"

#define MEMBERS 3

static const struct ctl_versions versions = {7, 9};

static char dir[64];

/* A fresh directory under the test's own: dir/<name>. */
static void subdir(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", dir, name);
}

static int member_in(const char *where, uint32_t index)
{
    struct ctl *ctl;
    if (ctl_open_dir(where, index, MEMBERS, &versions, 10000, &ctl) != 0)
        return 2;
    for (uint32_t tag = 1; tag <= 2; tag++) {
        uint64_t mine[4] = {index, tag, index * 1000 + tag, 0xabcdef};
        uint64_t all[MEMBERS][4];
        if (ctl_allgather(ctl, tag, mine, sizeof mine, all, 10000) != 0)
            return 3;
        for (uint32_t i = 0; i < MEMBERS; i++) {
            if (all[i][0] != i || all[i][1] != tag || all[i][2] != i * 1000 + tag)
                return 4;
        }
    }
    ctl_close(ctl);
    return 0;
}

/* Runs the MEMBERS members in processes of their own and asserts each
 * agreed on every blob. */
static void run_group(const char *where)
{
    pid_t pids[MEMBERS];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(member_in(where, i));
    }
    for (uint32_t i = 0; i < MEMBERS; i++) {
        int status;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
}

/* Names in where, "." and ".." aside. */
static int entries(const char *where)
{
    DIR *listing = opendir(where);
    assert_non_null(listing);
    int count = 0;
    for (struct dirent *entry; (entry = readdir(listing)) != NULL;)
        count += strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0;
    closedir(listing);
    return count;
}

static void test_members_agree_on_every_blob(void **state)
{
    (void)state;
    char where[128];
    subdir(where, sizeof where, "agree");
    run_group(where);
}

static void test_files_are_gone_after_close(void **state)
{
    (void)state;
    char where[128];
    subdir(where, sizeof where, "gone");
    run_group(where);
    assert_int_equal(entries(where), 0);
    run_group(where); /* the directory serves a second run */
    assert_int_equal(entries(where), 0);
}

static void write_bytes(const char *path, const void *bytes, size_t length)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, length), (ssize_t)length);
    close(fd);
}

static void expect_refusal(const char *where, uint32_t self, int code, const char *says)
{
    struct ctl *ctl;
    assert_int_equal(ctl_open_dir(where, self, MEMBERS, &versions, 200, &ctl), code);
    if (strstr(spindle_errmsg(), says) == NULL)
        fail_msg("\"%s\" does not say \"%s\"", spindle_errmsg(), says);
}

static void test_directory_writable_by_others_is_refused(void **state)
{
    (void)state;
    char where[128];
    subdir(where, sizeof where, "open-to-all");
    assert_int_equal(mkdir(where, 0700), 0);
    assert_int_equal(chmod(where, 0777), 0);
    expect_refusal(where, 0, SPINDLE_EPERM, "mode 0777) is writable by group or others");
    assert_int_equal(chmod(where, 0720), 0);
    expect_refusal(where, 1, SPINDLE_EPERM, "writable by group or others");
    assert_int_equal(entries(where), 0);
}

/* As root: a directory given to nobody (65534). Otherwise: "/", which
 * belongs to root and to no one else can write. Both reach the owner
 * check. */
static void test_directory_of_another_user_is_refused(void **state)
{
    (void)state;
    char where[128] = "/";
    if (geteuid() == 0) {
        subdir(where, sizeof where, "not-mine");
        assert_int_equal(mkdir(where, 0700), 0);
        assert_int_equal(chown(where, 65534, 65534), 0);
    }
    expect_refusal(where, 0, SPINDLE_EPERM, "is owned by another user");
    char owner[32];
    snprintf(owner, sizeof owner, "owner uid %u", geteuid() == 0 ? 65534u : 0u);
    assert_non_null(strstr(spindle_errmsg(), owner));
}

static void test_symlinked_directory_is_refused(void **state)
{
    (void)state;
    char real[128], link[128];
    subdir(real, sizeof real, "real");
    subdir(link, sizeof link, "link-to-real");
    assert_int_equal(mkdir(real, 0700), 0);
    assert_int_equal(symlink(real, link), 0);
    expect_refusal(link, 0, SPINDLE_EPERM, "is a symbolic link");
}

/* Member 0's open channel, with the others' blobs for tag 5 collected. */
static int collect_from_1(struct ctl *ctl)
{
    uint64_t all[MEMBERS] = {0}, have = 0;
    return ctl_collect(ctl, 5, 1u << 1, all, sizeof all[0], 0, &have);
}

static void test_planted_symlinks_are_refused(void **state)
{
    (void)state;
    char where[128], elsewhere[128], path[256], target[256];
    subdir(where, sizeof where, "planted");
    subdir(elsewhere, sizeof elsewhere, "elsewhere");
    assert_int_equal(mkdir(elsewhere, 0700), 0);
    struct ctl *ctl;
    assert_int_equal(ctl_open_dir(where, 0, MEMBERS, &versions, 1000, &ctl), 0);

    /* member 1's hello, pointing at a file */
    snprintf(path, sizeof path, "%s/%u.1", where, 0xffffffffu);
    snprintf(target, sizeof target, "%s/secret", elsewhere);
    write_bytes(target, "not a hello", 11);
    assert_int_equal(symlink(target, path), 0);
    assert_int_equal(collect_from_1(ctl), SPINDLE_EPERM);
    assert_non_null(strstr(spindle_errmsg(), "is a symbolic link"));
    assert_non_null(strstr(spindle_errmsg(), path));
    assert_int_equal(unlink(path), 0);

    /* the same name, pointing at a copy of this run's own hello of member 0
     * (the right name and content) in another directory */
    char hello0[256];
    snprintf(hello0, sizeof hello0, "%s/%u.0", where, 0xffffffffu);
    uint8_t bytes[256];
    int fd = open(hello0, O_RDONLY);
    assert_true(fd >= 0);
    ssize_t length = read(fd, bytes, sizeof bytes);
    close(fd);
    assert_true(length > 16);
    snprintf(target, sizeof target, "%s/%u.1", elsewhere, 0xffffffffu);
    write_bytes(target, bytes, (size_t)length);
    assert_int_equal(symlink(target, path), 0);
    assert_int_equal(collect_from_1(ctl), SPINDLE_EPERM);
    assert_non_null(strstr(spindle_errmsg(), "is a symbolic link"));
    ctl_close(ctl);

    /* a run file planted as a link stops member 0 and the others */
    snprintf(target, sizeof target, "%s/%u.0", elsewhere, 0xffffffffu);
    write_bytes(target, bytes, (size_t)length);
    assert_int_equal(symlink(target, hello0), 0);
    expect_refusal(where, 0, SPINDLE_EPERM, "is a symbolic link");
    expect_refusal(where, 2, SPINDLE_EPERM, "is a symbolic link");
}

static void test_files_are_private_to_the_owner(void **state)
{
    (void)state;
    char where[128], path[256];
    subdir(where, sizeof where, "private");
    mode_t old = umask(0);
    struct ctl *ctl;
    int rc = ctl_open_dir(where, 0, MEMBERS, &versions, 1000, &ctl);
    umask(old);
    assert_int_equal(rc, 0);
    uint32_t blob = 42;
    assert_int_equal(ctl_publish(ctl, 5, &blob, sizeof blob, ~0ull), 0);
    struct stat st;
    assert_int_equal(stat(where, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    snprintf(path, sizeof path, "%s/%u.0", where, 0xffffffffu);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    snprintf(path, sizeof path, "%s/5.0", where);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    ctl_close(ctl);
    assert_int_equal(entries(where), 0);
}

/* What a crashed run leaves: an unlocked run file, hellos and blobs of
 * its own nonce, and a temporary file under a name this run will use. */
static void plant_crashed_run(const char *where)
{
    uint8_t stale[16 + 64];
    memset(stale, 0x5a, sizeof stale);
    char path[256];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        snprintf(path, sizeof path, "%s/%u.%u", where, 0xffffffffu, i);
        write_bytes(path, stale, sizeof stale);
        for (uint32_t tag = 1; tag <= 2; tag++) {
            snprintf(path, sizeof path, "%s/%u.%u", where, tag, i);
            write_bytes(path, stale, 16 + 4 * sizeof(uint64_t));
        }
        snprintf(path, sizeof path, "%s/.1.%u.0.tmp", where, i);
        write_bytes(path, stale, 3);
    }
}

static void test_a_crashed_run_is_ignored(void **state)
{
    (void)state;
    char where[128];
    subdir(where, sizeof where, "crashed");
    assert_int_equal(mkdir(where, 0700), 0);
    plant_crashed_run(where);
    run_group(where);
    assert_int_equal(entries(where), 0);
}

/* A blob of another run that appears while this run is open (member 0
 * cleared the directory at the start) is ignored, not read as current. */
static void test_a_blob_of_another_run_is_ignored(void **state)
{
    (void)state;
    char where[128], path[256];
    subdir(where, sizeof where, "other-run");
    struct ctl *first;
    assert_int_equal(ctl_open_dir(where, 0, MEMBERS, &versions, 1000, &first), 0);
    uint8_t stale[16 + sizeof(uint64_t)];
    memset(stale, 0x5a, sizeof stale);
    snprintf(path, sizeof path, "%s/%u.1", where, 0xffffffffu);
    write_bytes(path, stale, sizeof stale);
    snprintf(path, sizeof path, "%s/5.1", where);
    write_bytes(path, stale, sizeof stale);
    assert_int_equal(collect_from_1(first), SPINDLE_ETIMEDOUT);

    struct ctl *second;
    assert_int_equal(ctl_open_dir(where, 1, MEMBERS, &versions, 1000, &second), 0);
    uint64_t blob = 77, all[MEMBERS] = {0}, have = 0;
    assert_int_equal(ctl_publish(second, 5, &blob, sizeof blob, ~0ull), 0);
    assert_int_equal(ctl_collect(first, 5, 1u << 1, all, sizeof all[0], 1000, &have), 0);
    assert_int_equal(all[1], 77);
    assert_int_equal(have, 1u << 1);
    ctl_close(second);
    ctl_close(first);
}

static void test_a_running_group_keeps_its_directory(void **state)
{
    (void)state;
    char where[128];
    subdir(where, sizeof where, "busy");
    struct ctl *ctl;
    assert_int_equal(ctl_open_dir(where, 0, MEMBERS, &versions, 1000, &ctl), 0);
    expect_refusal(where, 0, SPINDLE_EADDRINUSE, "is in use");
    ctl_close(ctl);
}

static void test_a_member_waits_for_member_0(void **state)
{
    (void)state;
    char where[128];
    subdir(where, sizeof where, "no-leader");
    expect_refusal(where, 1, SPINDLE_ETIMEDOUT, "member 0 did not start a run");
}

static void test_missing_member_times_out_by_name(void **state)
{
    (void)state;
    char lonely[128];
    subdir(lonely, sizeof lonely, "lonely");
    struct ctl *ctl;
    assert_int_equal(ctl_open_dir(lonely, 0, 3, &versions, 1000, &ctl), 0);
    uint32_t mine = 7, all[3];
    assert_int_equal(ctl_allgather(ctl, 9, &mine, sizeof mine, all, 50), SPINDLE_ETIMEDOUT);
    assert_non_null(strstr(spindle_errmsg(), "members 1, 2"));
    ctl_close(ctl);
    assert_int_equal(ctl_open_dir(lonely, 3, 3, &versions, 1000, &ctl), SPINDLE_EINVAL);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/spindle-ctl-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_members_agree_on_every_blob),
        cmocka_unit_test(test_missing_member_times_out_by_name),
        cmocka_unit_test(test_files_are_gone_after_close),
        cmocka_unit_test(test_directory_writable_by_others_is_refused),
        cmocka_unit_test(test_directory_of_another_user_is_refused),
        cmocka_unit_test(test_symlinked_directory_is_refused),
        cmocka_unit_test(test_planted_symlinks_are_refused),
        cmocka_unit_test(test_files_are_private_to_the_owner),
        cmocka_unit_test(test_a_crashed_run_is_ignored),
        cmocka_unit_test(test_a_blob_of_another_run_is_ignored),
        cmocka_unit_test(test_a_running_group_keeps_its_directory),
        cmocka_unit_test(test_a_member_waits_for_member_0),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    char cleanup[128];
    snprintf(cleanup, sizeof cleanup, "rm -rf %s", dir);
    if (system(cleanup) != 0)
        failed++;
    return failed;
}
