/*
 * spindle_group_setup_from_env: spindle-run's, Slurm's and PMIx's
 * variables become the member list (block distribution, one port per task
 * on a host), a hostfile maps ranks to hosts, a configuration gives the
 * rest, and every malformed or missing variable is named with its value.
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

static const char *const launch_vars[] = {
    "SPINDLE_RANK",        "SPINDLE_SIZE",
    "SPINDLE_LOCAL_RANK",  "SPINDLE_BASE_PORT",
    "SPINDLE_HOSTFILE",    "SLURM_PROCID",
    "SLURM_NTASKS",        "SLURM_LOCALID",
    "SLURM_STEP_NODELIST", "SLURM_STEP_TASKS_PER_NODE",
    "PMIX_RANK",           "OMPI_COMM_WORLD_SIZE",
    "SPINDLE_LOG_LEVEL",
};
static char hostfile[256], inifile[256];

static int clear_environment(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof launch_vars / sizeof *launch_vars; i++)
        unsetenv(launch_vars[i]);
    return 0;
}

static const char *write_file(char *path, const char *suffix, const char *text)
{
    snprintf(path, 256, "/tmp/spindle-setup-env-%d.%s", (int)getpid(), suffix);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void expect_bootstrap(const struct spindle_config *config, const char *bootstrap,
                             uint32_t self, uint32_t local_rank)
{
    struct spindle_group_setup setup;
    if (spindle_group_setup_from_env(config, &setup) != 0)
        fail_msg("spindle_group_setup_from_env: %s", spindle_errmsg());
    assert_string_equal(setup.options.bootstrap, bootstrap);
    assert_int_equal(setup.options.bootstrap_kind, SPINDLE_BOOTSTRAP_TCP);
    assert_int_equal(setup.options.self, self);
    assert_int_equal(setup.local_rank, local_rank);
    assert_int_equal(setup.num_subgroups, 1);
    assert_int_equal(setup.subgroups[0].num_members, setup.options.num_members);
    assert_int_equal(setup.subgroups[0].num_senders, setup.options.num_members);
    spindle_group_setup_free(&setup);
}

static void expect_refused(const struct spindle_config *config, int code, const char *message)
{
    struct spindle_group_setup setup;
    assert_int_equal(spindle_group_setup_from_env(config, &setup), code);
    if (strstr(spindle_errmsg(), message) == NULL)
        fail_msg("error '%s' does not say '%s'", spindle_errmsg(), message);
    assert_null(setup.storage);
}

static void test_spindle_run_puts_every_member_on_this_host(void **state)
{
    (void)state;
    setenv("SPINDLE_RANK", "1", 1);
    setenv("SPINDLE_SIZE", "3", 1);
    setenv("SPINDLE_LOCAL_RANK", "1", 1);
    expect_bootstrap(NULL, "127.0.0.1:17400,127.0.0.1:17401,127.0.0.1:17402", 1, 1);
    setenv("SPINDLE_BASE_PORT", "23000", 1);
    expect_bootstrap(NULL, "127.0.0.1:23000,127.0.0.1:23001,127.0.0.1:23002", 1, 1);
}

static void test_slurm_step_maps_tasks_in_blocks(void **state)
{
    (void)state;
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_NTASKS", "5", 1);
    setenv("SLURM_LOCALID", "1", 1);
    setenv("SLURM_STEP_NODELIST", "node[01-02],gpu7", 1);
    setenv("SLURM_STEP_TASKS_PER_NODE", "2(x2),1", 1);
    expect_bootstrap(NULL, "node01:17400,node01:17401,node02:17400,node02:17401,gpu7:17400", 3, 1);
    /* spindle-run's variables win over Slurm's. */
    setenv("SPINDLE_RANK", "0", 1);
    setenv("SPINDLE_SIZE", "2", 1);
    expect_bootstrap(NULL, "127.0.0.1:17400,127.0.0.1:17401", 0, 0);
}

static void test_slurm_mistakes_are_named(void **state)
{
    (void)state;
    setenv("SLURM_PROCID", "2", 1);
    setenv("SLURM_NTASKS", "4", 1);
    setenv("SLURM_STEP_TASKS_PER_NODE", "2(x2)", 1);
    expect_refused(NULL, SPINDLE_ECONFIG, "SLURM_STEP_NODELIST is not set");
    setenv("SLURM_STEP_NODELIST", "n[1-2", 1);
    expect_refused(NULL, SPINDLE_ECONFIG, "SLURM_STEP_NODELIST 'n[1-2': '[' without ']'");
    setenv("SLURM_STEP_NODELIST", "n[1-3]", 1);
    expect_refused(NULL, SPINDLE_ECONFIG,
                   "SLURM_STEP_TASKS_PER_NODE '2(x2)' gives 2 nodes, SLURM_STEP_NODELIST "
                   "'n[1-3]' 3");
    setenv("SLURM_STEP_NODELIST", "n[1-2]", 1);
    setenv("SLURM_STEP_TASKS_PER_NODE", "1(x2)", 1);
    expect_refused(NULL, SPINDLE_ECONFIG, "SLURM_STEP_TASKS_PER_NODE: 2 slots for 4 tasks");
    setenv("SLURM_STEP_TASKS_PER_NODE", "2(x2)", 1);
    setenv("SLURM_LOCALID", "1", 1); /* cyclic distribution: rank 2 second on n1 */
    expect_refused(NULL, SPINDLE_ECONFIG, "SLURM_LOCALID 1, but rank 2 is task 0 of n2");
    setenv("SLURM_LOCALID", "0", 1);
    expect_bootstrap(NULL, "n1:17400,n1:17401,n2:17400,n2:17401", 2, 0);
    setenv("SLURM_NTASKS", "four", 1);
    expect_refused(NULL, SPINDLE_ECONFIG, "SLURM_NTASKS 'four': must be a number");
    setenv("SLURM_NTASKS", "2", 1);
    expect_refused(NULL, SPINDLE_ECONFIG, "SLURM_PROCID 2 is not below SLURM_NTASKS 2");
    setenv("SLURM_PROCID", "-1", 1);
    expect_refused(NULL, SPINDLE_ECONFIG, "SLURM_PROCID '-1': must be a number");
    unsetenv("SLURM_PROCID");
    expect_refused(NULL, SPINDLE_ECONFIG, "no launcher found");
}

static void test_pmix_takes_hosts_from_a_hostfile(void **state)
{
    (void)state;
    setenv("PMIX_RANK", "2", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    setenv("SPINDLE_HOSTFILE",
           write_file(hostfile, "hosts", "# two hosts\nalpha slots=2\nbeta # one\n"), 1);
    expect_bootstrap(NULL, "alpha:17400,alpha:17401,beta:17400", 2, 0);
    setenv("SLURM_NTASKS", "2", 1); /* size from Slurm when it is there */
    expect_refused(NULL, SPINDLE_ECONFIG, "PMIX_RANK 2 is not below SLURM_NTASKS 2");
    setenv("SLURM_NTASKS", "4", 1);
    expect_refused(NULL, SPINDLE_ECONFIG, ": 3 slots for 4 tasks");
    unsetenv("SLURM_NTASKS");
    write_file(hostfile, "hosts", "alpha\nbeta slots=many\n");
    expect_refused(NULL, SPINDLE_ECONFIG, "hosts:2: 'slots=many'");
    unlink(hostfile);
    expect_refused(NULL, SPINDLE_ENOENT, "SPINDLE_HOSTFILE '/tmp/spindle-setup-env-");
    unsetenv("SPINDLE_HOSTFILE"); /* without one: every task on this host */
    expect_bootstrap(NULL, "127.0.0.1:17400,127.0.0.1:17401,127.0.0.1:17402", 2, 2);
    unsetenv("OMPI_COMM_WORLD_SIZE");
    expect_refused(NULL, SPINDLE_ECONFIG, "OMPI_COMM_WORLD_SIZE is not set");
}

static void test_ports_stay_valid(void **state)
{
    (void)state;
    setenv("SPINDLE_RANK", "0", 1);
    setenv("SPINDLE_SIZE", "2", 1);
    setenv("SPINDLE_BASE_PORT", "65535", 1);
    expect_refused(NULL, SPINDLE_ECONFIG,
                   "SPINDLE_BASE_PORT 65535: task 1 of 127.0.0.1 would "
                   "need port 65536, above 65535");
    setenv("SPINDLE_BASE_PORT", "0", 1);
    expect_refused(NULL, SPINDLE_ECONFIG, "SPINDLE_BASE_PORT '0': must be a number 1..65535");
    setenv("SPINDLE_BASE_PORT", "80x", 1);
    expect_refused(NULL, SPINDLE_ECONFIG, "SPINDLE_BASE_PORT '80x'");
    unsetenv("SPINDLE_BASE_PORT");
    setenv("SPINDLE_LOCAL_RANK", "1", 1);
    expect_refused(NULL, SPINDLE_ECONFIG, "SPINDLE_LOCAL_RANK 1, but rank 0 is task 0");
    unsetenv("SPINDLE_LOCAL_RANK");
    setenv("SPINDLE_SIZE", "65", 1);
    expect_refused(NULL, SPINDLE_ECONFIG, "SPINDLE_SIZE '65': must be a number 0..64");
    unsetenv("SPINDLE_SIZE");
    expect_refused(NULL, SPINDLE_ECONFIG, "SPINDLE_SIZE is not set");
}

static void test_configuration_gives_the_rest(void **state)
{
    (void)state;
    struct spindle_config *config = NULL;
    write_file(inifile, "ini",
               "[group]\ntransport = fabric\nfailure_timeout_ms = 700\n"
               "[member.0]\n[member.1]\nname = second\n[member.2]\n"
               "[subgroup.0]\nmembers = 0, 1\nsenders = 1\nwindow_size = 8\n"
               "[subgroup.1]\nmembers = 0, 1, 2\nmode = unordered\n");
    assert_int_equal(spindle_config_load(inifile, &config), 0);
    setenv("SPINDLE_RANK", "1", 1);
    setenv("SPINDLE_SIZE", "3", 1);
    struct spindle_group_setup setup;
    assert_int_equal(spindle_group_setup_from_env(config, &setup), 0);
    assert_string_equal(setup.options.transport, "fabric");
    assert_int_equal(setup.options.failure_timeout_ms, 700);
    assert_string_equal(setup.options.member_name, "second");
    assert_int_equal(setup.num_subgroups, 2);
    assert_int_equal(setup.subgroups[0].num_members, 2);
    assert_int_equal(setup.subgroups[0].num_senders, 1);
    assert_int_equal(setup.subgroups[0].senders[0], 1);
    assert_int_equal(setup.subgroups[0].window_size, 8);
    assert_int_equal(setup.subgroups[1].mode, SPINDLE_MODE_UNORDERED);
    spindle_group_setup_free(&setup);
    /* A subgroup naming a rank the launcher did not start. */
    setenv("SPINDLE_SIZE", "2", 1);
    expect_refused(config, SPINDLE_ECONFIG,
                   "[subgroup.1] names member 2, but the group has members 0..1");
    spindle_config_free(config);
    unlink(inifile);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_spindle_run_puts_every_member_on_this_host, clear_environment),
        cmocka_unit_test_setup(test_slurm_step_maps_tasks_in_blocks, clear_environment),
        cmocka_unit_test_setup(test_slurm_mistakes_are_named, clear_environment),
        cmocka_unit_test_setup(test_pmix_takes_hosts_from_a_hostfile, clear_environment),
        cmocka_unit_test_setup(test_ports_stay_valid, clear_environment),
        cmocka_unit_test_setup(test_configuration_gives_the_rest, clear_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
