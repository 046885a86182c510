/*
 * Configuration loading: the example file parses with the documented
 * values and defaults, every kind of mistake is reported as
 * "file:line: key = value: what is wrong" with SPINDLE_ECONFIG, and
 * SPINDLE_<SECTION>_<KEY> environment variables override the file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <spindle/config.h>
#include <spindle/error.h>

static char path[256];

static const char *write_ini(const char *text)
{
    snprintf(path, sizeof path, "/tmp/spindle-config-test-%d.ini", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_example_file_parses(void **state)
{
    (void)state;
    struct spindle_config *c = NULL;
    assert_int_equal(spindle_config_load(SPINDLE_EXAMPLE_INI, &c), 0);
    assert_string_equal(c->group.name, "demo");
    assert_string_equal(c->group.transport, "fabric");
    assert_string_equal(c->group.provider, "tcp");
    assert_null(c->group.device);
    assert_int_equal(c->group.failure_timeout_ms, 2000);
    assert_int_equal(c->num_members, 3);
    assert_int_equal(c->members[2].id, 2);
    assert_int_equal(c->members[2].port, 7012);
    assert_string_equal(spindle_config_member(c, 1)->host, "127.0.0.1");
    assert_null(spindle_config_member(c, 9));
    assert_int_equal(c->num_subgroups, 2);
    assert_int_equal(c->subgroups[0].num_members, 3);
    assert_int_equal(c->subgroups[0].num_senders, 3); /* default: all members */
    assert_int_equal(c->subgroups[0].mode, SPINDLE_MODE_ATOMIC);
    assert_int_equal(c->subgroups[1].num_senders, 1);
    assert_int_equal(c->subgroups[1].senders[0], 0);
    assert_int_equal(c->subgroups[1].window_size, 1000);
    assert_int_equal(c->subgroups[1].mode, SPINDLE_MODE_UNORDERED);
    assert_int_equal(c->bench.messages, 100000);
    spindle_config_free(c);
}

static void test_defaults_apply(void **state)
{
    (void)state;
    struct spindle_config *c = NULL;
    assert_int_equal(spindle_config_load(write_ini("[member.4]\n[subgroup.0]\nmembers = 4\n"), &c),
                     0);
    assert_string_equal(c->group.transport, "shm");
    assert_string_equal(c->group.provider, "tcp");
    assert_int_equal(c->group.failure_timeout_ms, 5000);
    assert_int_equal(c->group.slow_member_ms, 0);
    assert_false(c->group.tie_breaker);
    assert_null(c->group.key_file);
    assert_null(c->group.accept_key_file);
    assert_string_equal(c->members[0].host, "127.0.0.1");
    assert_int_equal(c->subgroups[0].window_size, 100);
    assert_int_equal(c->subgroups[0].max_payload, 1024);
    spindle_config_free(c);
}

/* Loads text and expects SPINDLE_ECONFIG with exactly message after the path. */
static void expect_error(const char *text, const char *message)
{
    struct spindle_config *c = NULL;
    const char *file = write_ini(text);
    assert_int_equal(spindle_config_load(file, &c), SPINDLE_ECONFIG);
    assert_null(c);
    char expected[512];
    snprintf(expected, sizeof expected, "%s%s", file, message);
    assert_string_equal(spindle_errmsg(), expected);
}

static void test_malformed_files_name_file_line_key_value(void **state)
{
    (void)state;
    expect_error("[group]\nname = x\n\n[subgroup.0]\nmembers = 0\nwindow_size = 0\n",
                 ":6: window_size = 0: must be between 1 and 100000");
    expect_error("[group]\ntransport = carrier-pigeon\n",
                 ":2: transport = carrier-pigeon: must be shm, fabric or verbs");
    expect_error("[group]\nslow_member_ms = -5\n",
                 ":2: slow_member_ms = -5: must be an integer between 0 and 3600000");
    expect_error("[group]\ntie_breaker = maybe\n",
                 ":2: tie_breaker = maybe: must be true or false");
    expect_error("[group]\ncolour = red\n",
                 ":2: colour = red: unknown key in [group] (known: name, transport, provider, "
                 "device, failure_timeout_ms, slow_member_ms, tie_breaker, log_level, key_file, "
                 "accept_key_file)");
    expect_error("[member.1]\nport = 70000\n", ":2: port = 70000: must be between 0 and 65535");
    expect_error("[member.1]\nport = 12ab\n",
                 ":2: port = 12ab: must be an integer between 0 and 65535");
    expect_error("[subgroup.0]\nmembers = 0, x\n",
                 ":2: members = 0, x: must be a list of member ids such as 0, 1, 2");
    expect_error("[subgroup.0]\nmode = chaotic\n",
                 ":2: mode = chaotic: must be atomic or unordered");
    expect_error("[group]\nname = a\nname = b\n", ":3: name = b: duplicate key in [group]");
    expect_error("[groups]\nname = a\n",
                 ":1: unknown section [groups] (expected group, member.N, subgroup.N or bench)");
    expect_error("[group]\nthis line has no equals sign\n",
                 ":2: syntax error (expected [section] or key = value)");
    expect_error("[member.0]\n[subgroup.0]\nmembers = 0, 7\n",
                 ":3: members: member 7 is not defined (no [member.7] section)");
    expect_error("[member.0]\n[member.1]\n[subgroup.0]\nmembers = 0\nsenders = 1\n",
                 ":5: senders: sender 1 is not a member of subgroup 0");
    expect_error("[group]\nkey_file =\n",
                 ":2: key_file = : must name a key file (spindle-keygen FILE)");
    expect_error("[group]\nlog_level = loud\n",
                 ":2: log_level = loud: must be error, warn, info or debug");
}

/* Regression (tests/fuzz/fuzz_config): a file without members or
 * subgroups sorted NULL arrays with qsort, undefined behaviour that UBSan
 * reports (make asan). It loads, with nothing to sort. */
static void test_file_without_members_or_subgroups_loads(void **state)
{
    (void)state;
    struct spindle_config *c = NULL;
    assert_int_equal(spindle_config_load(write_ini("[group]\nname = lonely\n"), &c), 0);
    assert_string_equal(c->group.name, "lonely");
    assert_int_equal(c->num_members, 0);
    assert_int_equal(c->num_subgroups, 0);
    assert_null(spindle_config_member(c, 0));
    spindle_config_free(c);
    assert_int_equal(spindle_config_load(write_ini(""), &c), 0);
    assert_int_equal(c->num_members, 0);
    spindle_config_free(c);
}

static void test_missing_file_is_named(void **state)
{
    (void)state;
    struct spindle_config *c = NULL;
    assert_int_equal(spindle_config_load("/nonexistent/cluster.ini", &c), SPINDLE_ENOENT);
    assert_non_null(strstr(spindle_errmsg(), "/nonexistent/cluster.ini"));
}

static void test_environment_overrides_the_file(void **state)
{
    (void)state;
    struct spindle_config *c = NULL;
    setenv("SPINDLE_GROUP_PROVIDER", "sockets", 1);
    setenv("SPINDLE_MEMBER_3_PORT", "7103", 1);
    setenv("SPINDLE_SUBGROUP_0_WINDOW_SIZE", "7", 1);
    setenv("SPINDLE_GROUP_FAILURE_TIMEOUT_MS", "250", 1);
    setenv("SPINDLE_GROUP_SLOW_MEMBER_MS", "300", 1);
    setenv("SPINDLE_GROUP_TIE_BREAKER", "true", 1);
    setenv("SPINDLE_GROUP_KEY_FILE", "/etc/spindle/group.key", 1);
    const char *file = write_ini("[group]\nprovider = tcp\n[member.3]\nport = 7003\n"
                                 "[subgroup.0]\nmembers = 3\nwindow_size = 0\n");
    /* The file's invalid window_size is replaced, so it is never judged. */
    assert_int_equal(spindle_config_load(file, &c), 0);
    assert_string_equal(c->group.provider, "sockets");
    assert_int_equal(c->group.failure_timeout_ms, 250);
    assert_int_equal(c->group.slow_member_ms, 300);
    assert_true(c->group.tie_breaker);
    assert_string_equal(c->group.key_file, "/etc/spindle/group.key");
    assert_int_equal(c->members[0].port, 7103);
    assert_int_equal(c->subgroups[0].window_size, 7);
    spindle_config_free(c);

    setenv("SPINDLE_SUBGROUP_0_WINDOW_SIZE", "lots", 1);
    assert_int_equal(spindle_config_load(file, &c), SPINDLE_ECONFIG);
    assert_string_equal(spindle_errmsg(),
                        "SPINDLE_SUBGROUP_0_WINDOW_SIZE (environment): window_size = lots: "
                        "must be an integer between 1 and 100000");
    unsetenv("SPINDLE_GROUP_PROVIDER");
    unsetenv("SPINDLE_MEMBER_3_PORT");
    unsetenv("SPINDLE_SUBGROUP_0_WINDOW_SIZE");
    unsetenv("SPINDLE_GROUP_FAILURE_TIMEOUT_MS");
    unsetenv("SPINDLE_GROUP_SLOW_MEMBER_MS");
    unsetenv("SPINDLE_GROUP_TIE_BREAKER");
    unsetenv("SPINDLE_GROUP_KEY_FILE");
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_file_parses),
        cmocka_unit_test(test_defaults_apply),
        cmocka_unit_test(test_malformed_files_name_file_line_key_value),
        cmocka_unit_test(test_file_without_members_or_subgroups_loads),
        cmocka_unit_test(test_missing_file_is_named),
        cmocka_unit_test(test_environment_overrides_the_file),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
