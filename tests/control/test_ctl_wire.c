/*
 * The control channel's own framing (src/control/ctl_wire.c): hello and
 * frame header round-trip and refuse damage (tests/wire_check.h); a hello
 * that is not a libspindle hello, a frame longer than the channel takes,
 * and builds of other layouts are refused, naming the values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "control/ctl_wire.h"
#include "util/error.h"
#include "wire_check.h"

static int rt_hello(const uint8_t *buf, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
    struct ctl_hello hello;
    int rc = ctl_wire_decode_hello(buf, len, &hello);
    *out_len = 0;
    if (rc == 0 && cap >= CTL_HELLO_SIZE) {
        ctl_wire_encode_hello(&hello, out);
        *out_len = CTL_HELLO_SIZE;
    }
    return rc;
}

static int rt_frame(const uint8_t *buf, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
    struct ctl_frame frame;
    int rc = ctl_wire_decode_frame(buf, len, &frame);
    *out_len = 0;
    if (rc == 0 && cap >= CTL_FRAME_SIZE) {
        ctl_wire_encode_frame(&frame, out);
        *out_len = CTL_FRAME_SIZE;
    }
    return rc;
}

static void test_hello_and_frame_round_trip_and_refuse_damage(void **state)
{
    (void)state;
    uint8_t hello_bytes[CTL_HELLO_SIZE], frame_bytes[CTL_FRAME_SIZE];
    struct ctl_hello hello = {3, 5, ctl_group_hash("orders"), {1, 2}, 0x123456789abcull};
    ctl_wire_encode_hello(&hello, hello_bytes);
    check_codec(rt_hello, hello_bytes, sizeof hello_bytes);
    struct ctl_hello back;
    assert_int_equal(ctl_wire_decode_hello(hello_bytes, sizeof hello_bytes, &back), 0);
    assert_int_equal(back.from, 3);
    assert_int_equal(back.num_members, 5);
    assert_int_equal(back.group, ctl_group_hash("orders"));
    assert_int_equal(back.versions.ring_layout, 2);
    assert_true(back.admission == 0x123456789abcull);
    struct ctl_frame frame = {0x20000011u, 4, 1234, 0xdeadbeefu};
    ctl_wire_encode_frame(&frame, frame_bytes);
    check_codec(rt_frame, frame_bytes, sizeof frame_bytes);
}

static void test_foreign_hello_and_oversized_frame_are_refused(void **state)
{
    (void)state;
    uint8_t bytes[CTL_HELLO_SIZE];
    struct ctl_hello hello = {1, 2, 3, {1, 1}, 0}, out;
    ctl_wire_encode_hello(&hello, bytes);
    bytes[4] ^= 0x55; /* magic */
    assert_int_equal(ctl_wire_decode_hello(bytes, sizeof bytes, &out), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "not a libspindle hello"));
    ctl_wire_encode_hello(&hello, bytes);
    bytes[CTL_HELLO_SIZE - 1] = 1; /* reserved */
    assert_int_equal(ctl_wire_decode_hello(bytes, sizeof bytes, &out), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "reserved"));

    uint8_t frame_bytes[CTL_FRAME_SIZE];
    struct ctl_frame frame = {1, 1, CTL_BLOB_MAX + 1, 0}, back;
    ctl_wire_encode_frame(&frame, frame_bytes);
    assert_int_equal(ctl_wire_decode_frame(frame_bytes, sizeof frame_bytes, &back), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "blob length 67108865 exceeds 67108864"));
}

static void test_other_layouts_are_named_with_both_versions(void **state)
{
    (void)state;
    struct ctl_versions mine = {1, 1};
    struct ctl_hello peer = {2, 3, 0, {1, 1}, 0};
    assert_int_equal(ctl_hello_compatible(&peer, &mine, "member 2"), 0);
    peer.versions.table_layout = 4;
    assert_int_equal(ctl_hello_compatible(&peer, &mine, "member 2"), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "member 2 runs table layout version 4, this member "
                                             "version 1"));
    peer.versions = (struct ctl_versions){1, 3};
    assert_int_equal(ctl_hello_compatible(&peer, &mine, "member 2"), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "ring layout version 3, this member version 1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hello_and_frame_round_trip_and_refuse_damage),
        cmocka_unit_test(test_foreign_hello_and_oversized_frame_are_refused),
        cmocka_unit_test(test_other_layouts_are_named_with_both_versions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
