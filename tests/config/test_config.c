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
#include <spindle/group.h>

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
    assert_string_equal(spindle_config_member(c, 0)->name, "ledger-a");
    assert_null(spindle_config_member(c, 1)->name); /* the library's default name */
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
    assert_false(c->group.dispatch);
    assert_int_equal(c->group.dispatch_queue_bytes, 0);
    assert_int_equal(c->group_p2p_window, 0);
    assert_false(c->group_own_inline);
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
                 "accept_key_file, log_dir, dispatch, dispatch_queue_bytes, admin_dir, "
                 "p2p_window, own_inline)");
    expect_error("[group]\nown_inline = yes\n", ":2: own_inline = yes: must be true or false");
    expect_error("[group]\ndispatch = sometimes\n",
                 ":2: dispatch = sometimes: must be true or false");
    expect_error("[group]\ndispatch_queue_bytes = -1\n",
                 ":2: dispatch_queue_bytes = -1: must be an integer between 0 and 1099511627776");
    expect_error("[group]\np2p_window = 2000\n",
                 ":2: p2p_window = 2000: must be between 0 and 1024");
    expect_error("[member.1]\nport = 70000\n", ":2: port = 70000: must be between 0 and 65535");
    expect_error("[member.1]\nport = 12ab\n",
                 ":2: port = 12ab: must be an integer between 0 and 65535");
    expect_error("[subgroup.0]\nmembers = 0, x\n",
                 ":2: members = 0, x: must be a list of member ids such as 0, 1, 2");
    expect_error("[subgroup.0]\nmode = chaotic\n",
                 ":2: mode = chaotic: must be atomic or unordered");
    expect_error("[group]\nname = a\nname = b\n",
                 ":3: name = b: duplicate key in [group] (first set on line 2)");
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
    expect_error("[member.0]\nname = two words\n",
                 ":2: name = two words: the member name 'two...' has byte 0x20 at 3: names are "
                 "printable ASCII without spaces");
    expect_error("[member.0]\nname = "
                 "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij1234\n",
                 ":2: name = abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij1234: "
                 "the member name must have 1 to 63 characters, not 64 or more");
    expect_error("[member.0]\nname = a\n[member.1]\nname = b\n[member.2]\nname = a\n",
                 ": [member.0] and [member.2] both have name a");
    expect_error("[member.0]\ncolour = red\n",
                 ":2: colour = red: unknown key in [member.0] (known: host, port, name)");
}

/* Loads text and returns the configuration (the test frees it). */
static struct spindle_config *expect_loads(const char *text)
{
    struct spindle_config *c = NULL;
    int rc = spindle_config_load(write_ini(text), &c);
    if (rc != 0)
        fail_msg("refused: %s", spindle_errmsg());
    assert_non_null(c);
    return c;
}

/* A file of one member and subgroup 0 with "key = value" added to it. */
static const char *subgroup_with(char *text, size_t size, const char *lines)
{
    snprintf(text, size, "[member.0]\n[subgroup.0]\nmembers = 0\n%s", lines);
    return text;
}

static void test_payload_and_window_limits_are_the_librarys(void **state)
{
    (void)state;
    char text[256], message[64];
    snprintf(message, sizeof message, "max_payload = %u\n", SPINDLE_MAX_PAYLOAD);
    struct spindle_config *c = expect_loads(subgroup_with(text, sizeof text, message));
    assert_int_equal(c->subgroups[0].max_payload, SPINDLE_MAX_PAYLOAD);
    spindle_config_free(c);
    snprintf(message, sizeof message, "max_payload = %u\n", SPINDLE_MAX_PAYLOAD + 1);
    expect_error(subgroup_with(text, sizeof text, message),
                 ":4: max_payload = 1048577: must be between 1 and 1048576");

    snprintf(message, sizeof message, "window_size = %u\n", SPINDLE_MAX_WINDOW);
    c = expect_loads(subgroup_with(text, sizeof text, message));
    assert_int_equal(c->subgroups[0].window_size, SPINDLE_MAX_WINDOW);
    spindle_config_free(c);
    snprintf(message, sizeof message, "window_size = %u\n", SPINDLE_MAX_WINDOW + 1);
    expect_error(subgroup_with(text, sizeof text, message),
                 ":4: window_size = 100001: must be between 1 and 100000");

    c = expect_loads("[bench]\nmessage_size = 1048576\n");
    assert_int_equal(c->bench.message_size, SPINDLE_MAX_PAYLOAD);
    spindle_config_free(c);
    expect_error("[bench]\nmessage_size = 1048577\n",
                 ":2: message_size = 1048577: must be between 1 and 1048576");
}

/* 256 slots of 1048568 + 8 bytes fill the 256 MiB ring exactly. */
static void test_ring_limit_is_the_librarys(void **state)
{
    (void)state;
    char text[256];
    assert_int_equal(SPINDLE_SLOT_BYTES(1048568) * 256, SPINDLE_MAX_RING_BYTES);
    struct spindle_config *c = expect_loads(
        subgroup_with(text, sizeof text, "window_size = 256\nmax_payload = 1048568\n"));
    assert_int_equal(c->subgroups[0].window_size, 256);
    spindle_config_free(c);
    expect_error(subgroup_with(text, sizeof text, "window_size = 257\nmax_payload = 1048568\n"),
                 ":5: max_payload = 1048568: window_size 257 x slot 1048576 bytes (max_payload "
                 "1048568) exceeds the ring limit of 268435456 bytes");
    expect_error(subgroup_with(text, sizeof text, "max_payload = 1048568\nwindow_size = 257\n"),
                 ":5: window_size = 257: window_size 257 x slot 1048576 bytes (max_payload "
                 "1048568) exceeds the ring limit of 268435456 bytes");
}

/* Appends printf-style text to a growing buffer. */
static void append(char **text, size_t *used, size_t *size, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char **text, size_t *used, size_t *size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (*used + (size_t)need + 1 > *size) {
        *size = (*used + (size_t)need + 1) * 2;
        *text = realloc(*text, *size);
        assert_non_null(*text);
    }
    va_start(ap, fmt);
    vsnprintf(*text + *used, *size - *used, fmt, ap);
    va_end(ap);
    *used += (size_t)need;
}

/* Every member id the library accepts (0..63, so 64 members) in sections
 * and lists; one more is refused naming the section or the list. */
static void test_member_limits_are_the_librarys(void **state)
{
    (void)state;
    char *text = NULL;
    size_t used = 0, size = 0;
    for (uint32_t id = 0; id < SPINDLE_MAX_MEMBERS; id++)
        append(&text, &used, &size, "[member.%u]\nport = %u\n", id, 7000 + id);
    append(&text, &used, &size, "[subgroup.0]\nmembers =");
    for (uint32_t id = 0; id < SPINDLE_MAX_MEMBERS; id++)
        append(&text, &used, &size, " %u", id);
    append(&text, &used, &size, "\n");
    struct spindle_config *c = expect_loads(text);
    assert_int_equal(c->num_members, SPINDLE_MAX_MEMBERS);
    assert_int_equal(c->members[SPINDLE_MAX_MEMBERS - 1].id, 63);
    assert_int_equal(c->subgroups[0].num_members, SPINDLE_MAX_MEMBERS);
    spindle_config_free(c);
    free(text);

    expect_error("[member.0]\n[member.64]\n",
                 ":2: [member.64]: member ids are 0..63 (at most 64 members)");
    expect_error("[member.4294967295]\n",
                 ":1: [member.4294967295]: member ids are 0..63 (at most 64 members)");
    expect_error("[member.0]\n[subgroup.0]\nmembers = 0, 64\n",
                 ":3: members = 0, 64: member id 64 is out of range: ids are 0..63 (at most 64 "
                 "members)");
}

static void test_subgroup_limits_are_the_librarys(void **state)
{
    (void)state;
    char *text = NULL;
    size_t used = 0, size = 0;
    append(&text, &used, &size, "[member.0]\n");
    for (uint32_t index = 0; index < SPINDLE_MAX_SUBGROUPS; index++)
        append(&text, &used, &size, "[subgroup.%u]\nmembers = 0\n", index);
    struct spindle_config *c = expect_loads(text);
    assert_int_equal(c->num_subgroups, SPINDLE_MAX_SUBGROUPS);
    assert_int_equal(c->subgroups[SPINDLE_MAX_SUBGROUPS - 1].index, 255);
    spindle_config_free(c);
    free(text);
    expect_error("[member.0]\n[subgroup.256]\nmembers = 0\n",
                 ":2: [subgroup.256]: subgroup ids are 0..255 (at most 256 subgroups)");
}

/* Duplicates are found however many keys came before: here 64 members'
 * two keys and 256 subgroups' three, then a repeat in each kind of
 * section, reopened or not. */
static void test_duplicates_are_found_among_many_keys(void **state)
{
    (void)state;
    char *base = NULL;
    size_t used = 0, size = 0;
    append(&base, &used, &size, "[group]\nname = many\n");
    for (uint32_t id = 0; id < SPINDLE_MAX_MEMBERS; id++)
        append(&base, &used, &size, "[member.%u]\nhost = 127.0.0.1\nport = %u\n", id, 7000 + id);
    for (uint32_t index = 0; index < SPINDLE_MAX_SUBGROUPS; index++)
        append(&base, &used, &size, "[subgroup.%u]\nmembers = 0\nwindow_size = 8\nmode = atomic\n",
               index);
    int lines = 2 + 3 * (int)SPINDLE_MAX_MEMBERS + 4 * (int)SPINDLE_MAX_SUBGROUPS;
    struct spindle_config *c = expect_loads(base);
    spindle_config_free(c);

    static const struct {
        const char *repeat;
        const char *says;
        int first_line;
    } cases[] = {
        {"window_size = 9\n", "window_size = 9: duplicate key in [subgroup.255]", -1},
        {"[subgroup.0]\nmode = unordered\n", "mode = unordered: duplicate key in [subgroup.0]",
         2 + 3 * 64 + 4},
        {"[member.63]\nport = 1\n", "port = 1: duplicate key in [member.63]", 2 + 3 * 64},
        {"[group]\nname = again\n", "name = again: duplicate key in [group]", 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = NULL;
        size_t text_used = 0, text_size = 0;
        append(&text, &text_used, &text_size, "%s%s", base, cases[i].repeat);
        int line = lines + (cases[i].repeat[0] == '[' ? 2 : 1);
        int first = cases[i].first_line > 0 ? cases[i].first_line : lines + cases[i].first_line;
        char expected[256];
        snprintf(expected, sizeof expected, ":%d: %s (first set on line %d)", line, cases[i].says,
                 first);
        expect_error(text, expected);
        free(text);
    }
    free(base);
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
    setenv("SPINDLE_GROUP_DISPATCH", "true", 1);
    setenv("SPINDLE_GROUP_DISPATCH_QUEUE_BYTES", "65536", 1);
    setenv("SPINDLE_GROUP_OWN_INLINE", "true", 1);
    setenv("SPINDLE_GROUP_KEY_FILE", "/etc/spindle/group.key", 1);
    const char *file = write_ini("[group]\nprovider = tcp\n[member.3]\nport = 7003\n"
                                 "[subgroup.0]\nmembers = 3\nwindow_size = 0\n");
    /* The file's invalid window_size is replaced, so it is never judged. */
    assert_int_equal(spindle_config_load(file, &c), 0);
    assert_string_equal(c->group.provider, "sockets");
    assert_int_equal(c->group.failure_timeout_ms, 250);
    assert_int_equal(c->group.slow_member_ms, 300);
    assert_true(c->group.tie_breaker);
    assert_true(c->group.dispatch);
    assert_int_equal(c->group.dispatch_queue_bytes, 65536);
    assert_true(c->group_own_inline);
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
    unsetenv("SPINDLE_GROUP_DISPATCH");
    unsetenv("SPINDLE_GROUP_DISPATCH_QUEUE_BYTES");
    unsetenv("SPINDLE_GROUP_KEY_FILE");
}

static void test_logged_subgroups_and_their_directory(void **state)
{
    (void)state;
    char text[256];
    struct spindle_config *c = expect_loads(
        subgroup_with(text, sizeof text, "logged = true\n[group]\nlog_dir = /var/lib/m0\n"));
    assert_true(c->subgroups[0].logged);
    assert_string_equal(c->group.log_dir, "/var/lib/m0");
    spindle_config_free(c);
    c = expect_loads(subgroup_with(text, sizeof text, ""));
    assert_false(c->subgroups[0].logged);
    assert_null(c->group.log_dir);
    spindle_config_free(c);
    expect_error(subgroup_with(text, sizeof text, "logged = yes\n"),
                 ":4: logged = yes: must be true or false");
    expect_error(subgroup_with(text, sizeof text, "mode = unordered\nlogged = true\n"),
                 ": [subgroup.0]: logged = true needs mode = atomic (an unordered subgroup's "
                 "members deliver in no order they share, so their logs could not agree)");
    expect_error("[group]\nlog_dir =\n", ":2: log_dir = : must name this member's log directory");
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
        cmocka_unit_test(test_payload_and_window_limits_are_the_librarys),
        cmocka_unit_test(test_ring_limit_is_the_librarys),
        cmocka_unit_test(test_member_limits_are_the_librarys),
        cmocka_unit_test(test_subgroup_limits_are_the_librarys),
        cmocka_unit_test(test_duplicates_are_found_among_many_keys),
        cmocka_unit_test(test_logged_subgroups_and_their_directory),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
