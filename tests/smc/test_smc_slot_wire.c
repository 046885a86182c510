/*
 * The multicast ring slot header decoder (smc_slot_wire.h): what a
 * receiver makes of the word another member wrote at the start of a slot.
 * It takes a message at the expected position, passes over nulls to a
 * later one, ignores an older or unwritten slot, and refuses a length
 * above max_payload or beyond the slot with SPINDLE_EPROTO naming the
 * ring slot header, the position and the bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <spindle/spindle.h>

#include "smc/smc_slot_wire.h"

#define MAX_PAYLOAD 1000u
#define SLOT_SIZE   (SMC_HEADER_SIZE + 1000u)

static const uint64_t lap = 1ull << SMC_POSITION_BITS;

static void test_a_header_naming_the_expected_position_is_a_message(void **state)
{
    (void)state;
    const uint64_t expected[] = {0, 41, lap - 1, lap, 3 * lap + 17};
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        struct smc_slot_header out;
        assert_int_equal(smc_slot_header_decode(smc_header(expected[i], MAX_PAYLOAD), expected[i],
                                                MAX_PAYLOAD, SLOT_SIZE, &out),
                         0);
        assert_int_equal(out.kind, SMC_SLOT_MESSAGE);
        assert_int_equal(out.length, MAX_PAYLOAD);
        assert_int_equal(out.distance, 0);
    }
}

static void test_a_header_naming_a_later_position_gives_its_distance(void **state)
{
    (void)state;
    struct smc_slot_header out;
    assert_int_equal(smc_slot_header_decode(smc_header(45, 8), 41, MAX_PAYLOAD, SLOT_SIZE, &out),
                     0);
    assert_int_equal(out.kind, SMC_SLOT_LATER);
    assert_int_equal(out.distance, 4);
    assert_int_equal(out.length, 8);
    /* Across the wrap of the position bits. */
    assert_int_equal(
        smc_slot_header_decode(smc_header(lap + 2, 0), lap - 1, MAX_PAYLOAD, SLOT_SIZE, &out), 0);
    assert_int_equal(out.kind, SMC_SLOT_LATER);
    assert_int_equal(out.distance, 3);
}

static void test_an_older_or_unwritten_slot_names_nothing(void **state)
{
    (void)state;
    struct smc_slot_header out;
    assert_int_equal(smc_slot_header_decode(smc_header(40, 8), 41, MAX_PAYLOAD, SLOT_SIZE, &out),
                     0);
    assert_int_equal(out.kind, SMC_SLOT_OLDER);
    assert_int_equal(smc_slot_header_decode(0, 41, MAX_PAYLOAD, SLOT_SIZE, &out), 0);
    assert_int_equal(out.kind, SMC_SLOT_OLDER);
    /* Never read, so its length is not checked either. */
    assert_int_equal(
        smc_slot_header_decode(smc_header(40, SMC_LENGTH_MASK), 41, MAX_PAYLOAD, SLOT_SIZE, &out),
        0);
    assert_int_equal(out.kind, SMC_SLOT_OLDER);
}

static void test_a_length_above_max_payload_is_refused(void **state)
{
    (void)state;
    struct smc_slot_header out;
    assert_int_equal(
        smc_slot_header_decode(smc_header(41, MAX_PAYLOAD + 1), 41, MAX_PAYLOAD, SLOT_SIZE, &out),
        SPINDLE_EPROTO);
    assert_string_equal(spindle_errmsg(),
                        "ring slot header of position 41 has length 1001, above max_payload 1000");
    /* On a later position too: the sender lies before the slot is reached. */
    assert_int_equal(
        smc_slot_header_decode(smc_header(45, SMC_LENGTH_MASK), 41, MAX_PAYLOAD, SLOT_SIZE, &out),
        SPINDLE_EPROTO);
    assert_string_equal(
        spindle_errmsg(),
        "ring slot header of position 45 has length 16777215, above max_payload 1000");
}

static void test_a_length_beyond_the_slot_is_refused(void **state)
{
    (void)state;
    struct smc_slot_header out;
    assert_int_equal(
        smc_slot_header_decode(smc_header(41, 600), 41, MAX_PAYLOAD, SMC_HEADER_SIZE + 512, &out),
        SPINDLE_EPROTO);
    assert_string_equal(
        spindle_errmsg(),
        "ring slot header of position 41 has length 600, beyond its slot of 520 bytes");
    /* A slot smaller than its header holds no payload at all. */
    assert_int_equal(smc_slot_header_decode(smc_header(41, 0), 41, MAX_PAYLOAD, 4, &out),
                     SPINDLE_EPROTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_header_naming_the_expected_position_is_a_message),
        cmocka_unit_test(test_a_header_naming_a_later_position_gives_its_distance),
        cmocka_unit_test(test_an_older_or_unwritten_slot_names_nothing),
        cmocka_unit_test(test_a_length_above_max_payload_is_refused),
        cmocka_unit_test(test_a_length_beyond_the_slot_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
