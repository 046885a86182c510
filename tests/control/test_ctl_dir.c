/* Directory bootstrap exchange among real processes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "control/ctl.h"
#include "util/error.h"

#define MEMBERS 3

static const struct ctl_versions versions = {7, 9};

static char dir[64];

static int member(uint32_t index)
{
    struct ctl *ctl;
    if (ctl_open_dir(dir, index, MEMBERS, &versions, &ctl) != 0)
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

static void test_members_agree_on_every_blob(void **state)
{
    (void)state;
    pid_t pids[MEMBERS];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        pids[i] = fork();
        if (pids[i] == 0)
            _exit(member(i));
    }
    for (uint32_t i = 0; i < MEMBERS; i++) {
        int status;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
}

static void test_missing_member_times_out_by_name(void **state)
{
    (void)state;
    char lonely[80];
    snprintf(lonely, sizeof lonely, "%s/lonely", dir);
    struct ctl *ctl;
    assert_int_equal(ctl_open_dir(lonely, 0, 3, &versions, &ctl), 0);
    uint32_t mine = 7, all[3];
    assert_int_equal(ctl_allgather(ctl, 9, &mine, sizeof mine, all, 50), SPINDLE_ETIMEDOUT);
    assert_non_null(strstr(spindle_errmsg(), "members 1, 2"));
    ctl_close(ctl);
    assert_int_equal(ctl_open_dir(lonely, 3, 3, &versions, &ctl), SPINDLE_EINVAL);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/spindle-ctl-XXXXXX");
    if (mkdtemp(dir) == NULL)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_members_agree_on_every_blob),
        cmocka_unit_test(test_missing_member_times_out_by_name),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    char cleanup[128];
    snprintf(cleanup, sizeof cleanup, "rm -rf %s", dir);
    if (system(cleanup) != 0)
        failed++;
    return failed;
}
