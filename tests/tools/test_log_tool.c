/* spindle-log: check cuts a torn tail and refuses corruption it cannot
 * cut, compare accepts logs that agree where they overlap and names where
 * two part, dump and summary print what is there. */
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

#include "../log/log_samples.h"
#include "log/log.h"
#include "log/log_snapshot.h"
#include "log_tool_run.h"

static const char *tool;
static char root[64];
static char output[1 << 16];

/* Runs spindle-log with up to three arguments (NULL-ended); its exit
 * status, its stdout and stderr in output. */
static int run(const char *a, const char *b, const char *c, const char *d)
{
    const char *args[] = {tool, a, b, c, d, NULL};
    return log_tool_run(root, output, sizeof output, args);
}

static void expect_output(const char *says)
{
    if (strstr(output, says) == NULL)
        fail_msg("spindle-log said \"%s\", not \"%s\"", output, says);
}

static void member_dir(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", root, name);
}

static void test_compare_accepts_a_prefix_and_names_a_divergence(void **state)
{
    (void)state;
    char a[128], b[128], c[128], d[128];
    member_dir(a, sizeof a, "a");
    member_dir(b, sizeof b, "b");
    member_dir(c, sizeof c, "c");
    member_dir(d, sizeof d, "d");
    assert_int_equal(sample_append(a, 0, 120, 6, 16, NULL), 0);
    assert_int_equal(sample_append(b, 0, 90, 6, 16, NULL), 0); /* a prefix of a */
    assert_int_equal(run("compare", a, b, NULL), 0);
    expect_output("agree: 90 messages");
    /* c agrees up to 50, then holds another payload at the same place. */
    assert_int_equal(sample_append(c, 0, 50, 6, 16, NULL), 0);
    assert_int_equal(sample_append(c, 50, 40, 7, 16, NULL), 0);
    assert_int_equal(run("compare", a, b, c), 1);
    expect_output("the same place holds different messages");
    /* d lacks message 60 of a: one holds a message the other lacks. */
    assert_int_equal(sample_append(d, 0, 60, 6, 16, NULL), 0);
    assert_int_equal(sample_append(d, 63, 20, 6, 16, NULL), 0);
    assert_int_equal(run("compare", d, a, NULL), 1);
    expect_output("one holds a message the other lacks");
    assert_int_equal(run("compare", a, NULL, NULL), 2);
    expect_output("two or more directories");
}

static void test_check_cuts_a_torn_tail_and_refuses_worse(void **state)
{
    (void)state;
    char dir[128], path[192];
    member_dir(dir, sizeof dir, "torn");
    assert_int_equal(sample_append(dir, 0, 30, 1, 8, NULL), 0);
    snprintf(path, sizeof path, "%s/00000000000000000000.seg", dir);
    /* The last record's last 3 bytes lost (the zeros written ahead of
     * the records go too). */
    struct log *log;
    assert_int_equal(log_open(dir, 0, &log, NULL), 0);
    uint64_t records_end = log->segments[log->segment_count - 1].size;
    log_close(log);
    assert_int_equal(truncate(path, (off_t)(records_end - 3)), 0);
    assert_int_equal(run("summary", dir, NULL, NULL), 0);
    expect_output("spindle-log check cuts it");
    expect_output("positions [0, 29) (29 records");
    assert_int_equal(run("check", dir, NULL, NULL), 0);
    expect_output("cut ");
    expect_output("whole: 29 records");
    assert_int_equal(run("check", dir, NULL, NULL), 0);
    if (strstr(output, "cut ") != NULL)
        fail_msg("a second check cut again: %s", output);
    assert_int_equal(run("dump", dir, NULL, NULL), 0);
    expect_output("28 message subgroup 1 view 1 seq 28 sender 3 index 5 length");
    /* A sealed segment changed in the middle: not a torn tail. */
    member_dir(dir, sizeof dir, "sealed");
    struct log_appender_options options = {.segment_bytes = 2048};
    assert_int_equal(sample_append(dir, 0, 100, 1, 10, &options), 0);
    snprintf(path, sizeof path, "%s/00000000000000000000.seg", dir);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    uint8_t byte = 0xee;
    assert_int_equal(pwrite(fd, &byte, 1, 100), 1);
    close(fd);
    assert_int_equal(run("check", dir, NULL, NULL), 1);
    expect_output("not a torn tail");
    member_dir(dir, sizeof dir, "nowhere");
    assert_int_equal(run("check", dir, NULL, NULL), 1);
    expect_output("does not exist");
    assert_int_equal(run("frobnicate", dir, NULL, NULL), 2);
    expect_output("unknown command \"frobnicate\"");
}

/* Snapshots: summary lists them with the directory's size, check names a
 * corrupt one and fails, dump says where a compacted log starts. */
static void test_snapshots_are_listed_checked_and_the_start_named(void **state)
{
    (void)state;
    char dir[128], path[256];
    member_dir(dir, sizeof dir, "snapshots");
    struct log_appender_options options = {.segment_bytes = 2048};
    assert_int_equal(sample_append(dir, 0, 100, 1, 10, &options), 0);
    int dir_fd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(dir_fd >= 0);
    struct log_snapshot snap = {.subgroup = 1, .view_id = 1, .seq = 40};
    snap.view = sample_view(1).view;
    assert_int_equal(log_snapshot_write(dir_fd, dir, &snap, "state", 5), 0);
    snap.seq = 60;
    assert_int_equal(log_snapshot_write(dir_fd, dir, &snap, "later", 5), 0);
    assert_int_equal(run("summary", dir, NULL, NULL), 0);
    expect_output("snapshots: 2");
    expect_output("001-00000000000000000001-00000000000000000060.snap: subgroup 1 before view 1 "
                  "seq 60, 5 bytes of state");
    expect_output("directory: ");
    assert_int_equal(run("check", dir, NULL, NULL), 0);
    /* The last byte of the newer one's state changed. */
    snprintf(path, sizeof path, "%s/001-00000000000000000001-00000000000000000060.snap", dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "X", 1, st.st_size - 1), 1);
    close(fd);
    assert_int_equal(run("check", dir, NULL, NULL), 1);
    expect_output("ignored: corrupt: the state's checksum");
    expect_output("1 snapshot is corrupt");
    /* The first segment compacted away. */
    snprintf(path, sizeof path, "%s/00000000000000000000.seg", dir);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(run("dump", dir, NULL, NULL), 0);
    expect_output("# the log starts at position ");
    close(dir_fd);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 1;
    tool = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compare_accepts_a_prefix_and_names_a_divergence),
        cmocka_unit_test(test_check_cuts_a_torn_tail_and_refuses_worse),
        cmocka_unit_test(test_snapshots_are_listed_checked_and_the_start_named),
    };
    return SAMPLE_RUN_IN_ROOT(root, "spindle-logtool", tests);
}
