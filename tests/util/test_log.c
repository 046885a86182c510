/*
 * Logging owned by the application (include/spindle/log.h): the level from
 * SPINDLE_LOG_LEVEL until set, the application's sink receiving lines at
 * or above the level one at a time, stderr again with a NULL sink, and a
 * sink that logs through the library writing that line to stderr instead
 * of deadlocking.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <spindle/error.h>
#include <spindle/log.h>

#include "util/log.h"

struct captured {
    atomic_int lines, inside, most_inside;
    enum spindle_log_level level;
    char module[32], message[256];
};

static void capture(void *ctx, enum spindle_log_level level, const char *module,
                    const char *message)
{
    struct captured *c = ctx;
    int inside = atomic_fetch_add(&c->inside, 1) + 1;
    int most = atomic_load(&c->most_inside);
    while (inside > most && !atomic_compare_exchange_weak(&c->most_inside, &most, inside))
        ;
    c->level = level;
    snprintf(c->module, sizeof c->module, "%s", module);
    snprintf(c->message, sizeof c->message, "%s", message);
    atomic_fetch_add(&c->lines, 1);
    atomic_fetch_sub(&c->inside, 1);
}

/* Runs fn with stderr sent to a temporary file; returns what was written
 * (static buffer). */
static const char *stderr_during(void (*fn)(void))
{
    static char text[4096];
    fflush(stderr);
    FILE *file = tmpfile();
    assert_non_null(file);
    int saved = dup(STDERR_FILENO);
    assert_true(dup2(fileno(file), STDERR_FILENO) >= 0);
    fn();
    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    close(saved);
    rewind(file);
    size_t n = fread(text, 1, sizeof text - 1, file);
    text[n] = '\0';
    fclose(file);
    return text;
}

/* First, in a process that has logged nothing: the environment decides. */
static void test_level_comes_from_the_environment_until_set(void **state)
{
    (void)state;
    assert_int_equal(setenv("SPINDLE_LOG_LEVEL", "error", 1), 0);
    assert_int_equal(spindle_log_get_level(), SPINDLE_LOG_ERROR);
    assert_false(sp_log_enabled(SP_LOG_WARN));
    assert_int_equal(spindle_log_set_level(SPINDLE_LOG_INFO), 0);
    assert_int_equal(spindle_log_get_level(), SPINDLE_LOG_INFO);
    assert_true(sp_log_enabled(SP_LOG_INFO));
    assert_false(sp_log_enabled(SP_LOG_DEBUG));
}

static void test_out_of_range_levels_and_names_are_refused(void **state)
{
    (void)state;
    assert_int_equal(spindle_log_set_level(SPINDLE_LOG_WARN), 0);
    assert_int_equal(spindle_log_set_level((enum spindle_log_level)7), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "log level 7"));
    assert_int_equal(spindle_log_get_level(), SPINDLE_LOG_WARN);
    enum spindle_log_level level = SPINDLE_LOG_ERROR;
    assert_int_equal(spindle_log_parse_level("debug", &level), 0);
    assert_int_equal(level, SPINDLE_LOG_DEBUG);
    assert_int_equal(spindle_log_parse_level("verbose", &level), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "'verbose'"));
    assert_int_equal(level, SPINDLE_LOG_DEBUG);
}

static void test_sink_receives_lines_at_or_above_the_level(void **state)
{
    (void)state;
    static struct captured c;
    assert_int_equal(spindle_log_set_level(SPINDLE_LOG_INFO), 0);
    spindle_log_set_sink(capture, &c);
    SP_LOG_DBG("view", "not at this level");
    assert_int_equal(atomic_load(&c.lines), 0);
    SP_LOG_INFO_("view", "member %u joined", 4u);
    assert_int_equal(atomic_load(&c.lines), 1);
    assert_int_equal(c.level, SPINDLE_LOG_INFO);
    assert_string_equal(c.module, "view");
    assert_string_equal(c.message, "member 4 joined");
    SP_LOG_ERR("sst", "row %d", 2);
    assert_int_equal(atomic_load(&c.lines), 2);
    assert_int_equal(c.level, SPINDLE_LOG_ERROR);
    spindle_log_set_sink(NULL, NULL);
}

static void warn_once(void)
{
    SP_LOG_WARNING("control", "to stderr %d", 42);
}

static void test_null_sink_restores_stderr(void **state)
{
    (void)state;
    static struct captured c;
    spindle_log_set_sink(capture, &c);
    spindle_log_set_sink(NULL, NULL);
    const char *text = stderr_during(warn_once);
    char expect[64];
    snprintf(expect, sizeof expect, "spindle[%d] warn control: to stderr 42\n", (int)getpid());
    assert_string_equal(text, expect);
    assert_int_equal(atomic_load(&c.lines), 0);
}

static void *log_many(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000; i++)
        SP_LOG_WARNING("smc", "line %d", i);
    return NULL;
}

static void test_sink_is_called_one_line_at_a_time(void **state)
{
    (void)state;
    static struct captured c;
    spindle_log_set_sink(capture, &c);
    pthread_t threads[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, log_many, NULL), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(threads[i], NULL);
    spindle_log_set_sink(NULL, NULL);
    assert_int_equal(atomic_load(&c.lines), 4 * 2000);
    assert_int_equal(atomic_load(&c.most_inside), 1);
}

static atomic_int reentrant_calls;

static void reentrant(void *ctx, enum spindle_log_level level, const char *module,
                      const char *message)
{
    (void)ctx;
    (void)level;
    (void)module;
    (void)message;
    atomic_fetch_add(&reentrant_calls, 1);
    SP_LOG_WARNING("sink", "logged from inside the sink");
}

static void warn_through_reentrant_sink(void)
{
    spindle_log_set_sink(reentrant, NULL);
    SP_LOG_WARNING("view", "outer line");
    spindle_log_set_sink(NULL, NULL);
}

static void test_line_logged_inside_the_sink_goes_to_stderr(void **state)
{
    (void)state;
    const char *text = stderr_during(warn_through_reentrant_sink);
    assert_int_equal(atomic_load(&reentrant_calls), 1);
    assert_non_null(strstr(text, "warn sink: logged from inside the sink\n"));
    assert_null(strstr(text, "outer line"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_level_comes_from_the_environment_until_set),
        cmocka_unit_test(test_out_of_range_levels_and_names_are_refused),
        cmocka_unit_test(test_sink_receives_lines_at_or_above_the_level),
        cmocka_unit_test(test_null_sink_restores_stderr),
        cmocka_unit_test(test_sink_is_called_one_line_at_a_time),
        cmocka_unit_test(test_line_logged_inside_the_sink_goes_to_stderr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
