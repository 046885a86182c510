/* spindle-kv's RESP2 codec (examples/kv/kv_resp.h): whole, split, pipelined
 * and inline commands, and the limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kv_resp.h"

static const struct kv_resp_limits limits = {.max_args = 8, .max_bulk = 16, .max_inline = 64};

static long parse(const char *text, size_t len, struct kv_argv *argv, char *error)
{
    return kv_resp_parse(text, len, &limits, argv, error, 256);
}

static void assert_arg(const struct kv_argv *argv, size_t i, const char *text)
{
    assert_true(i < argv->count);
    assert_int_equal(argv->items[i].len, strlen(text));
    assert_memory_equal(argv->items[i].ptr, text, strlen(text));
}

static void test_array_command_is_parsed_whole(void **state)
{
    const char *text = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n";
    struct kv_argv argv = {0};
    char error[256];
    assert_int_equal(parse(text, strlen(text), &argv, error), (long)strlen(text));
    assert_int_equal(argv.count, 3);
    assert_arg(&argv, 0, "SET");
    assert_arg(&argv, 1, "k");
    assert_arg(&argv, 2, "");
    kv_argv_free(&argv);
}

static void test_every_split_is_incomplete_until_the_end(void **state)
{
    const char *text = "*2\r\n$3\r\nGET\r\n$5\r\nhello\r\n";
    struct kv_argv argv = {0};
    char error[256];
    for (size_t len = 0; len < strlen(text); len++)
        assert_int_equal(parse(text, len, &argv, error), KV_RESP_INCOMPLETE);
    assert_int_equal(parse(text, strlen(text), &argv, error), (long)strlen(text));
    assert_arg(&argv, 1, "hello");
    kv_argv_free(&argv);
}

static void test_pipelined_commands_come_one_at_a_time(void **state)
{
    const char *text = "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nINCR\r\n$1\r\nc\r\n";
    struct kv_argv argv = {0};
    char error[256];
    long first = parse(text, strlen(text), &argv, error);
    assert_int_equal(first, 14);
    assert_arg(&argv, 0, "PING");
    long second = parse(text + first, strlen(text) - (size_t)first, &argv, error);
    assert_int_equal(first + second, (long)strlen(text));
    assert_arg(&argv, 0, "INCR");
    assert_arg(&argv, 1, "c");
    kv_argv_free(&argv);
}

static void test_inline_command_splits_on_spaces(void **state)
{
    const char *text = "set  key value\r\nrest";
    struct kv_argv argv = {0};
    char error[256];
    assert_int_equal(parse(text, strlen(text), &argv, error), 16);
    assert_int_equal(argv.count, 3);
    assert_arg(&argv, 0, "set");
    assert_arg(&argv, 2, "value");
    assert_int_equal(parse("ping", 4, &argv, error), KV_RESP_INCOMPLETE);
    kv_argv_free(&argv);
}

static void test_oversize_bulk_is_refused_naming_it(void **state)
{
    const char *text = "*1\r\n$17\r\n";
    struct kv_argv argv = {0};
    char error[256];
    assert_int_equal(parse(text, strlen(text), &argv, error), KV_RESP_ERROR);
    assert_non_null(strstr(error, "invalid bulk length '17' (at most 16)"));
    assert_int_equal(parse("*1\r\n$-1\r\n", 9, &argv, error), KV_RESP_ERROR);
    kv_argv_free(&argv);
}

static void test_oversize_array_is_refused_naming_it(void **state)
{
    struct kv_argv argv = {0};
    char error[256];
    assert_int_equal(parse("*9\r\n", 4, &argv, error), KV_RESP_ERROR);
    assert_non_null(strstr(error, "invalid multibulk length '9' (at most 8)"));
    assert_int_equal(parse("*x\r\n", 4, &argv, error), KV_RESP_ERROR);
    assert_int_equal(parse("*99999999999999999999\r\n", 23, &argv, error), KV_RESP_ERROR);
    kv_argv_free(&argv);
}

static void test_bulk_without_crlf_is_refused(void **state)
{
    const char *text = "*1\r\n$2\r\nabXY";
    struct kv_argv argv = {0};
    char error[256];
    assert_int_equal(parse(text, strlen(text), &argv, error), KV_RESP_ERROR);
    assert_non_null(strstr(error, "not followed by CRLF"));
    assert_int_equal(parse("*1\r\n+OK\r\n", 9, &argv, error), KV_RESP_ERROR);
    assert_non_null(strstr(error, "expected '$'"));
    kv_argv_free(&argv);
}

static void test_encoders_write_resp2(void **state)
{
    struct kv_buf out = {0};
    kv_resp_simple(&out, "OK");
    kv_resp_error(&out, "ERR two\r\nlines");
    kv_resp_integer(&out, -42);
    kv_resp_bulk(&out, "abc", 3);
    kv_resp_null(&out);
    kv_resp_array(&out, 2);
    const char *expected = "+OK\r\n-ERR two  lines\r\n:-42\r\n$3\r\nabc\r\n$-1\r\n*2\r\n";
    assert_int_equal(out.len, strlen(expected));
    assert_memory_equal(out.data, expected, out.len);
    kv_buf_consume(&out, 5);
    assert_memory_equal(out.data, "-ERR", 4);
    kv_buf_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_array_command_is_parsed_whole),
        cmocka_unit_test(test_every_split_is_incomplete_until_the_end),
        cmocka_unit_test(test_pipelined_commands_come_one_at_a_time),
        cmocka_unit_test(test_inline_command_splits_on_spaces),
        cmocka_unit_test(test_oversize_bulk_is_refused_naming_it),
        cmocka_unit_test(test_oversize_array_is_refused_naming_it),
        cmocka_unit_test(test_bulk_without_crlf_is_refused),
        cmocka_unit_test(test_encoders_write_resp2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
