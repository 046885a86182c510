/*
 * The launcher formats: Slurm host lists expand with ranges, several
 * bracket groups, prefixes and suffixes and zero padding; tasks per node
 * expand "N(xM)"; hostfiles take slots and comments. Every malformed input
 * is refused with SPINDLE_ECONFIG naming the variable (or file and line)
 * and the value, and leaves nothing allocated.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <spindle/error.h>

#include "config/setup_internal.h"

static void expect_message(const char *message)
{
    if (strstr(spindle_errmsg(), message) == NULL)
        fail_msg("error '%s' does not say '%s'", spindle_errmsg(), message);
}

/* Expands text and compares with the hosts in want, separated by spaces. */
static void expect_hosts(const char *text, const char *want)
{
    struct launch_hosts hosts;
    assert_int_equal(launch_hostlist_expand("SLURM_STEP_NODELIST", text, &hosts), 0);
    char joined[4096] = "";
    for (uint32_t i = 0; i < hosts.count; i++) {
        assert_int_equal(hosts.slots[i], 1);
        snprintf(joined + strlen(joined), sizeof joined - strlen(joined), "%s%s", i ? " " : "",
                 hosts.names[i]);
    }
    assert_string_equal(joined, want);
    launch_hosts_free(&hosts);
    assert_int_equal(hosts.count, 0);
}

static void test_host_lists_expand(void **state)
{
    (void)state;
    expect_hosts("login", "login");
    expect_hosts("node[01-04,07]", "node01 node02 node03 node04 node07");
    expect_hosts("n[8-10]", "n8 n9 n10");
    expect_hosts("n[008-010]", "n008 n009 n010");
    expect_hosts("a[1-2]b[3-4]", "a1b3 a1b4 a2b3 a2b4");
    expect_hosts("gpu[1-2]-ib,login,node[001-002]", "gpu1-ib gpu2-ib login node001 node002");
    expect_hosts("rack[1]-n[5,3].example.org", "rack1-n5.example.org rack1-n3.example.org");
    expect_hosts("x_y.z-1", "x_y.z-1");
}

static void expect_bad_list(const char *text, const char *message)
{
    struct launch_hosts hosts = {.count = 99};
    assert_int_equal(launch_hostlist_expand("SLURM_STEP_NODELIST", text, &hosts), SPINDLE_ECONFIG);
    char named[600];
    snprintf(named, sizeof named, "SLURM_STEP_NODELIST '%s': ", text);
    expect_message(named);
    expect_message(message);
    assert_int_equal(hosts.count, 0);
    assert_null(hosts.names);
}

static void test_malformed_host_lists_are_named(void **state)
{
    (void)state;
    expect_bad_list("", "no hosts");
    expect_bad_list("a,,b", "an empty host name");
    expect_bad_list("a,", "an empty host name");
    expect_bad_list("node[1-", "'[' without ']'");
    expect_bad_list("node1]", "']' without '['");
    expect_bad_list("node[[1]]", "brackets cannot nest");
    expect_bad_list("node[3-1]", "a range goes backwards");
    expect_bad_list("node[a-b]", "numbers and ranges");
    expect_bad_list("node[1,]", "not a number or a range");
    expect_bad_list("node[]", "not a number or a range");
    expect_bad_list("node[1-2-3]", "not a number or a range");
    expect_bad_list("node[-2]", "not a number or a range");
    expect_bad_list("node[1234567890]", "not a number or a range");
    expect_bad_list("bad host", "character ' ' cannot be in a host name");
    expect_bad_list("a;rm", "character ';'");
    expect_bad_list("n[0-99999]", "more than 4096 hosts");
    expect_bad_list("x[0-99][0-99]", "more than 4096 hosts");
    char longname[300];
    memset(longname, 'a', 256);
    longname[256] = '\0';
    expect_bad_list(longname, "longer than 255 characters");
    memset(longname, 'a', 254);
    strcpy(longname + 254, "[10-11]");
    expect_bad_list(longname, "longer than 255 characters");
}

static void test_tasks_per_node_expand(void **state)
{
    (void)state;
    uint32_t counts[8], n = 0;
    assert_int_equal(launch_tasks_per_node("T", "2(x3),1", counts, 8, &n), 0);
    assert_int_equal(n, 4);
    assert_int_equal(counts[0], 2);
    assert_int_equal(counts[2], 2);
    assert_int_equal(counts[3], 1);
    assert_int_equal(launch_tasks_per_node("T", "4", counts, 8, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(counts[0], 4);
    assert_int_equal(launch_tasks_per_node("T", "1,3(x1),12", counts, 8, &n), 0);
    assert_int_equal(n, 3);
    assert_int_equal(counts[1], 3);
    assert_int_equal(counts[2], 12);
}

static void expect_bad_tasks(const char *text, uint32_t max, const char *message)
{
    uint32_t counts[4], n = 7;
    assert_int_equal(launch_tasks_per_node("SLURM_STEP_TASKS_PER_NODE", text, counts, max, &n),
                     SPINDLE_ECONFIG);
    char named[200];
    snprintf(named, sizeof named, "SLURM_STEP_TASKS_PER_NODE '%s': ", text);
    expect_message(named);
    expect_message(message);
}

static void test_malformed_tasks_per_node_are_named(void **state)
{
    (void)state;
    expect_bad_tasks("", 4, "'' is not a task count");
    expect_bad_tasks("0", 4, "'0' is not a task count");
    expect_bad_tasks("2,", 4, "'' is not a task count");
    expect_bad_tasks("-1", 4, "'-1' is not a task count");
    expect_bad_tasks("2(x0)", 4, "'2(x0)' is not a task count");
    expect_bad_tasks("2(3)", 4, "'2(3)' is not a task count");
    expect_bad_tasks("2(x3", 4, "'2(x3' is not a task count");
    expect_bad_tasks("2(x)", 4, "'2(x)' is not a task count");
    expect_bad_tasks("2(x3)1", 4, "'2(x3)1' is not a task count");
    expect_bad_tasks("x", 4, "'x' is not a task count");
    expect_bad_tasks("1(x5)", 4, "more than 4 nodes");
    expect_bad_tasks("1(x3),1,1", 4, "more than 4 nodes");
}

static void test_hostfile_takes_slots_and_comments(void **state)
{
    (void)state;
    struct launch_hosts hosts;
    const char *text = "# the cluster\nnodeA slots=2\n\n  nodeB   # spare\r\n\tnodeC slots=1";
    assert_int_equal(launch_hostfile_parse("hf", text, &hosts), 0);
    assert_int_equal(hosts.count, 3);
    assert_string_equal(hosts.names[0], "nodeA");
    assert_int_equal(hosts.slots[0], 2);
    assert_string_equal(hosts.names[1], "nodeB");
    assert_int_equal(hosts.slots[1], 1);
    assert_string_equal(hosts.names[2], "nodeC");
    assert_int_equal(hosts.slots[2], 1);
    launch_hosts_free(&hosts);
}

static void expect_bad_hostfile(const char *text, const char *message)
{
    struct launch_hosts hosts;
    assert_int_equal(launch_hostfile_parse("hf", text, &hosts), SPINDLE_ECONFIG);
    expect_message(message);
    assert_int_equal(hosts.count, 0);
}

static void test_malformed_hostfiles_are_named(void **state)
{
    (void)state;
    expect_bad_hostfile("", "hf: no hosts");
    expect_bad_hostfile("# nothing\n\n", "hf: no hosts");
    expect_bad_hostfile("a\nnodeA slots=0\n", "hf:2: 'slots=0': slots must be a number >= 1");
    expect_bad_hostfile("nodeA slots=x\n", "hf:1: 'slots=x'");
    expect_bad_hostfile("nodeA slots=\n", "hf:1: 'slots='");
    expect_bad_hostfile("nodeA cpus=2\n", "hf:1: 'cpus=2': only slots=N may follow the host");
    expect_bad_hostfile("ok\n\nbad!host\n", "hf:3: host 'bad!host': character '!'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_lists_expand),
        cmocka_unit_test(test_malformed_host_lists_are_named),
        cmocka_unit_test(test_tasks_per_node_expand),
        cmocka_unit_test(test_malformed_tasks_per_node_are_named),
        cmocka_unit_test(test_hostfile_takes_slots_and_comments),
        cmocka_unit_test(test_malformed_hostfiles_are_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
