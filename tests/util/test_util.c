/* Error reporting and CRC-32C. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "util/crc32c.h"
#include "util/error.h"

static void test_error_message_names_the_value(void **state)
{
    (void)state;
    int rc = sp_error(SPINDLE_EINVAL, "window_size %u must be >= 1", 0u);
    assert_int_equal(rc, SPINDLE_EINVAL);
    assert_string_equal(spindle_errmsg(), "window_size 0 must be >= 1");
}

static void test_every_code_has_a_distinct_description(void **state)
{
    (void)state;
    for (int a = SPINDLE_ERROR_MIN; a <= 0; a++) {
        assert_string_not_equal(spindle_strerror(a), "unknown error");
        for (int b = SPINDLE_ERROR_MIN; b < a; b++)
            assert_string_not_equal(spindle_strerror(a), spindle_strerror(b));
    }
    assert_string_equal(spindle_strerror(-1000), "unknown error");
}

static void test_crc32c_matches_known_vector(void **state)
{
    (void)state;
    /* RFC 3720 B.4 check value for "123456789". */
    assert_int_equal(sp_crc32c(0, "123456789", 9), 0xE3069283u);
    /* 32 bytes of zeros: 0x8A9136AA (RFC 3720 B.4). */
    unsigned char zeros[32] = {0};
    assert_int_equal(sp_crc32c(0, zeros, sizeof zeros), 0x8A9136AAu);
    /* Incremental equals one-shot. */
    uint32_t part = sp_crc32c(0, "1234", 4);
    assert_int_equal(sp_crc32c(part, "56789", 5), 0xE3069283u);
}

/* Bit by bit, the definition: what the table or the crc32 instruction
 * must agree with at every length and alignment. */
static uint32_t crc32c_bitwise(uint32_t crc, const unsigned char *p, size_t len)
{
    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return ~crc;
}

static void test_crc32c_agrees_with_the_definition_at_any_length(void **state)
{
    (void)state;
    unsigned char bytes[300];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (unsigned char)(i * 131 + 17);
    for (size_t offset = 0; offset < 9; offset++)
        for (size_t len = 0; len + offset <= sizeof bytes; len += 1 + len / 8)
            assert_int_equal(sp_crc32c(0x1234u, bytes + offset, len),
                             crc32c_bitwise(0x1234u, bytes + offset, len));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_message_names_the_value),
        cmocka_unit_test(test_every_code_has_a_distinct_description),
        cmocka_unit_test(test_crc32c_matches_known_vector),
        cmocka_unit_test(test_crc32c_agrees_with_the_definition_at_any_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
