/*
 * spindle_group_setup_from_config: the example file becomes options and
 * subgroups that outlive the configuration, a file without subgroups gets
 * one atomic subgroup of every member, the file's log level applies unless
 * SPINDLE_LOG_LEVEL is set, and every gap in the file is named.
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

#include <spindle/spindle.h>

static char path[256];

static struct spindle_config *load(const char *text)
{
    snprintf(path, sizeof path, "/tmp/spindle-setup-test-%d.ini", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    struct spindle_config *config = NULL;
    assert_int_equal(spindle_config_load(path, &config), 0);
    unlink(path);
    return config;
}

static void test_example_file_becomes_options_that_outlive_it(void **state)
{
    (void)state;
    struct spindle_config *config = NULL;
    assert_int_equal(spindle_config_load(SPINDLE_EXAMPLE_INI, &config), 0);
    struct spindle_group_setup setup;
    assert_int_equal(spindle_group_setup_from_config(config, 0, &setup), 0);
    spindle_config_free(config); /* the setup owns its copies */
    const struct spindle_group_options *o = &setup.options;
    assert_string_equal(o->bootstrap, "127.0.0.1:7010,127.0.0.1:7011,127.0.0.1:7012");
    assert_int_equal(o->bootstrap_kind, SPINDLE_BOOTSTRAP_TCP);
    assert_int_equal(o->self, 0);
    assert_int_equal(o->num_members, 3);
    assert_string_equal(o->transport, "fabric");
    assert_string_equal(o->provider, "tcp");
    assert_string_equal(o->group_name, "demo");
    assert_string_equal(o->member_name, "ledger-a");
    assert_int_equal(o->failure_timeout_ms, 2000);
    assert_null(o->device);
    assert_null(o->key_file);
    assert_true(o->batching); /* the library's defaults stay */
    assert_int_equal(setup.num_subgroups, 2);
    assert_int_equal(setup.subgroups[0].num_members, 3);
    assert_int_equal(setup.subgroups[0].num_senders, 3);
    assert_int_equal(setup.subgroups[0].members[2], 2);
    assert_int_equal(setup.subgroups[1].num_senders, 1);
    assert_int_equal(setup.subgroups[1].senders[0], 0);
    assert_int_equal(setup.subgroups[1].window_size, 1000);
    assert_int_equal(setup.subgroups[1].max_payload, 64);
    assert_int_equal(setup.subgroups[1].mode, SPINDLE_MODE_UNORDERED);
    spindle_group_setup_free(&setup);
    spindle_group_setup_free(&setup); /* a freed setup is ignored */
}

static void test_file_without_subgroups_gets_one_of_every_member(void **state)
{
    (void)state;
    struct spindle_config *config = load("[member.0]\nport = 9000\n[member.1]\nhost = "
                                         "h1\nport = 9001\nname = b\n");
    struct spindle_group_setup setup;
    assert_int_equal(spindle_group_setup_from_config(config, 1, &setup), 0);
    spindle_config_free(config);
    assert_string_equal(setup.options.bootstrap, "127.0.0.1:9000,h1:9001");
    assert_int_equal(setup.options.self, 1);
    assert_string_equal(setup.options.member_name, "b");
    assert_int_equal(setup.num_subgroups, 1);
    const struct spindle_subgroup_config *s = &setup.subgroups[0];
    assert_int_equal(s->num_members, 2);
    assert_int_equal(s->num_senders, 2);
    assert_int_equal(s->members[0], 0);
    assert_int_equal(s->senders[1], 1);
    assert_int_equal(s->window_size, SPINDLE_SETUP_DEFAULT_WINDOW);
    assert_int_equal(s->max_payload, SPINDLE_SETUP_DEFAULT_PAYLOAD);
    assert_int_equal(s->mode, SPINDLE_MODE_ATOMIC);
    spindle_group_setup_free(&setup);
}

static void test_dispatch_mode_comes_from_the_file(void **state)
{
    (void)state;
    struct spindle_config *config =
        load("[group]\ndispatch = true\ndispatch_queue_bytes = 1048576\n[member.0]\nport = 9000\n");
    struct spindle_group_setup setup;
    assert_int_equal(spindle_group_setup_from_config(config, 0, &setup), 0);
    assert_true(setup.options.dispatch);
    assert_int_equal(setup.options.dispatch_queue_bytes, 1048576);
    assert_false(setup.options.own_inline);
    spindle_group_setup_free(&setup);
    spindle_config_free(config);
    config = load("[group]\nown_inline = true\n[member.0]\nport = 9000\n");
    assert_int_equal(spindle_group_setup_from_config(config, 0, &setup), 0);
    assert_true(setup.options.own_inline);
    spindle_group_setup_free(&setup);
    spindle_config_free(config);
}

static void test_logged_delivery_comes_from_the_file(void **state)
{
    (void)state;
    struct spindle_config *config =
        load("[group]\nlog_dir = /var/lib/app/log\n[member.0]\nport = 9000\n"
             "[member.1]\nport = 9001\n[subgroup.0]\nmembers = 0,1\n"
             "[subgroup.1]\nmembers = 0,1\nlogged = true\n"
             "[subgroup.2]\nmembers = 0,1\nmode = unordered\n"
             "[subgroup.3]\nmembers = 1\nlogged = true\n");
    struct spindle_group_setup setup;
    assert_int_equal(spindle_group_setup_from_config(config, 0, &setup), 0);
    spindle_config_free(config); /* the setup owns its copies */
    assert_string_equal(setup.options.log_dir, "/var/lib/app/log");
    assert_int_equal(setup.options.num_logged_subgroups, 2);
    assert_int_equal(setup.options.logged_subgroups[0], 1);
    assert_int_equal(setup.options.logged_subgroups[1], 3);
    spindle_group_setup_free(&setup);

    config = load("[member.0]\nport = 9000\n[subgroup.0]\nmembers = 0\n");
    assert_int_equal(spindle_group_setup_from_config(config, 0, &setup), 0);
    assert_null(setup.options.log_dir);
    assert_int_equal(setup.options.num_logged_subgroups, 0);
    assert_null(setup.options.logged_subgroups);
    spindle_group_setup_free(&setup);
    spindle_config_free(config);
}

static void test_file_log_level_applies_unless_environment_names_one(void **state)
{
    (void)state;
    struct spindle_config *config = load("[group]\nlog_level = debug\n[member.0]\nport = 9000\n");
    struct spindle_group_setup setup;
    unsetenv("SPINDLE_LOG_LEVEL");
    spindle_log_set_level(SPINDLE_LOG_WARN);
    assert_int_equal(spindle_group_setup_from_config(config, 0, &setup), 0);
    assert_int_equal(spindle_log_get_level(), SPINDLE_LOG_DEBUG);
    spindle_group_setup_free(&setup);
    setenv("SPINDLE_LOG_LEVEL", "error", 1);
    spindle_log_set_level(SPINDLE_LOG_WARN);
    assert_int_equal(spindle_group_setup_from_config(config, 0, &setup), 0);
    assert_int_equal(spindle_log_get_level(), SPINDLE_LOG_WARN); /* left alone */
    spindle_group_setup_free(&setup);
    unsetenv("SPINDLE_LOG_LEVEL");
    spindle_config_free(config);
}

static void expect_refused(const char *text, uint32_t id, int code, const char *message)
{
    struct spindle_config *config = load(text);
    struct spindle_group_setup setup;
    assert_int_equal(spindle_group_setup_from_config(config, id, &setup), code);
    if (strstr(spindle_errmsg(), message) == NULL)
        fail_msg("error '%s' does not say '%s'", spindle_errmsg(), message);
    assert_null(setup.storage); /* nothing to free */
    spindle_config_free(config);
}

static void test_every_gap_in_the_file_is_named(void **state)
{
    (void)state;
    expect_refused("[group]\nname = x\n", 0, SPINDLE_ECONFIG, "the file defines no members");
    expect_refused("[member.0]\nport = 1\n[member.2]\nport = 3\n", 0, SPINDLE_ECONFIG,
                   "member ids must be 0..1 without gaps, but [member.1] is missing");
    expect_refused("[member.0]\nport = 1\n[member.1]\nhost = a\n", 0, SPINDLE_ECONFIG,
                   "[member.1] needs a port");
    expect_refused("[member.0]\nport = 1\n", 4, SPINDLE_EINVAL,
                   "id 4 is not a member (the file defines members 0..0)");
    expect_refused("[member.0]\nport = 1\n[subgroup.1]\nmembers = 0\n", 0, SPINDLE_ECONFIG,
                   "subgroup indices must be 0..0 without gaps, but [subgroup.0] is missing");
}

static void test_null_arguments_are_refused(void **state)
{
    (void)state;
    struct spindle_group_setup setup;
    assert_int_equal(spindle_group_setup_from_config(NULL, 0, &setup), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "config is NULL"));
    spindle_group_setup_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_file_becomes_options_that_outlive_it),
        cmocka_unit_test(test_file_without_subgroups_gets_one_of_every_member),
        cmocka_unit_test(test_dispatch_mode_comes_from_the_file),
        cmocka_unit_test(test_logged_delivery_comes_from_the_file),
        cmocka_unit_test(test_file_log_level_applies_unless_environment_names_one),
        cmocka_unit_test(test_every_gap_in_the_file_is_named),
        cmocka_unit_test(test_null_arguments_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
