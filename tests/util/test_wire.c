/*
 * The wire codec's primitives (src/util/wire.c): explicit little-endian
 * order whatever the host's, fixed-width strings and byte strings with
 * their length and zero padding, reserved bytes that must be zero, sticky
 * first failures that name the message, field and offset, and writers
 * that count what does not fit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "util/error.h"
#include "util/wire.h"

static void test_integers_are_little_endian(void **state)
{
    (void)state;
    uint8_t buf[16];
    struct wire_writer w;
    wire_writer_init(&w, buf, sizeof buf);
    wire_put_u16(&w, 0x0102);
    wire_put_u32(&w, 0x03040506u);
    wire_put_u64(&w, 0x0708090a0b0c0d0eull);
    const uint8_t expect[] = {0x02, 0x01, 0x06, 0x05, 0x04, 0x03, 0x0e,
                              0x0d, 0x0c, 0x0b, 0x0a, 0x09, 0x08, 0x07};
    assert_int_equal(w.pos, sizeof expect);
    assert_memory_equal(buf, expect, sizeof expect);
    struct wire_reader r;
    wire_reader_init(&r, buf, w.pos, "sample");
    assert_int_equal(wire_get_u16(&r, "a"), 0x0102);
    assert_int_equal(wire_get_u32(&r, "b"), 0x03040506u);
    assert_int_equal(wire_get_u64(&r, "c"), 0x0708090a0b0c0d0eull);
    assert_int_equal(wire_finish(&r), 0);
}

static void test_writer_counts_what_does_not_fit(void **state)
{
    (void)state;
    struct wire_writer w;
    wire_writer_init(&w, NULL, 0);
    wire_put_header(&w, 7);
    wire_put_string(&w, "host", 255);
    wire_put_u64(&w, 1);
    assert_int_equal(w.pos, 4 + 2 + 255 + 8);
    assert_false(wire_writer_fits(&w));
    uint8_t small[8];
    wire_writer_init(&w, small, sizeof small);
    wire_put_u64(&w, UINT64_MAX);
    wire_put_u64(&w, UINT64_MAX); /* counted, not stored */
    assert_int_equal(w.pos, 16);
    assert_false(wire_writer_fits(&w));
}

static void test_truncation_is_sticky_and_named(void **state)
{
    (void)state;
    uint8_t buf[6] = {1, 0, 0, 0, 2, 0};
    struct wire_reader r;
    wire_reader_init(&r, buf, sizeof buf, "probe");
    assert_int_equal(wire_get_u32(&r, "first"), 1);
    assert_int_equal(wire_get_u32(&r, "second"), 0);
    assert_int_equal(r.rc, SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "probe: truncated second"));
    assert_non_null(strstr(spindle_errmsg(), "offset 4"));
    /* Later reads return nothing and keep the first failure. */
    assert_int_equal(wire_get_u16(&r, "third"), 0);
    assert_int_equal(wire_finish(&r), SPINDLE_EPROTO);
    assert_null(strstr(spindle_errmsg(), "third"));
}

static void test_strings_need_zero_padding_and_no_nul(void **state)
{
    (void)state;
    uint8_t buf[2 + 8];
    struct wire_writer w;
    wire_writer_init(&w, buf, sizeof buf);
    wire_put_string(&w, "abc", 8);
    assert_int_equal(w.pos, 10);
    char out[16];
    struct wire_reader r;
    wire_reader_init(&r, buf, sizeof buf, "s");
    wire_get_string(&r, out, sizeof out, 8, "name");
    assert_int_equal(wire_finish(&r), 0);
    assert_string_equal(out, "abc");
    buf[2 + 5] = 'z'; /* padding */
    wire_reader_init(&r, buf, sizeof buf, "s");
    wire_get_string(&r, out, sizeof out, 8, "name");
    assert_int_equal(r.rc, SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "name must be zero"));
    assert_string_equal(out, "");
    buf[2 + 5] = 0;
    buf[2 + 1] = 0; /* a NUL inside the length */
    wire_reader_init(&r, buf, sizeof buf, "s");
    wire_get_string(&r, out, sizeof out, 8, "name");
    assert_non_null(strstr(spindle_errmsg(), "NUL"));
    buf[0] = 9; /* longer than the field */
    wire_reader_init(&r, buf, sizeof buf, "s");
    wire_get_string(&r, out, sizeof out, 8, "name");
    assert_non_null(strstr(spindle_errmsg(), "name length 9 exceeds 8"));
    buf[0] = 3;
    buf[2 + 1] = 'b';
    wire_reader_init(&r, buf, sizeof buf, "s");
    wire_get_string(&r, out, 3, 8, "name"); /* room for 2 characters */
    assert_non_null(strstr(spindle_errmsg(), "name length 3 exceeds 2"));
}

static void test_reserved_bytes_must_be_zero(void **state)
{
    (void)state;
    uint8_t buf[] = {0, 0, 0, 7};
    struct wire_reader r;
    wire_reader_init(&r, buf, 3, "b");
    wire_get_zero(&r, 3, "reserved");
    assert_int_equal(wire_finish(&r), 0);
    wire_reader_init(&r, buf, 4, "b");
    wire_get_zero(&r, 4, "reserved");
    assert_int_equal(r.rc, SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "reserved must be zero, byte 3 is 0x07"));
}

static void test_header_names_both_versions(void **state)
{
    (void)state;
    uint8_t buf[4];
    struct wire_writer w;
    wire_writer_init(&w, buf, sizeof buf);
    wire_put_header(&w, 0x1234);
    struct wire_reader r;
    wire_reader_init(&r, buf, sizeof buf, "thing");
    wire_get_header(&r, 0x1234);
    assert_int_equal(wire_finish(&r), 0);
    buf[2] = (uint8_t)(WIRE_VERSION + 1);
    wire_reader_init(&r, buf, sizeof buf, "thing");
    wire_get_header(&r, 0x1234);
    assert_int_equal(r.rc, SPINDLE_EPROTO);
    char expect[64];
    snprintf(expect, sizeof expect, "wire version %u, this build speaks version %u",
             WIRE_VERSION + 1, WIRE_VERSION);
    assert_non_null(strstr(spindle_errmsg(), expect));
    buf[2] = WIRE_VERSION;
    wire_reader_init(&r, buf, sizeof buf, "thing");
    wire_get_header(&r, 0x1235);
    assert_non_null(strstr(spindle_errmsg(), "message type 4660, expected 4661"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_integers_are_little_endian),
        cmocka_unit_test(test_writer_counts_what_does_not_fit),
        cmocka_unit_test(test_truncation_is_sticky_and_named),
        cmocka_unit_test(test_strings_need_zero_padding_and_no_nul),
        cmocka_unit_test(test_reserved_bytes_must_be_zero),
        cmocka_unit_test(test_header_names_both_versions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
