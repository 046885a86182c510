/*
 * Shared checks for decoders of the wire codec (util/wire.h), used by the
 * codec unit tests. A codec under test is a pair of functions over bytes:
 * decode the message and encode it again. check_codec() proves, for one
 * valid encoded message, that:
 *   - it decodes, and re-encodes to the same bytes;
 *   - every truncation of it is refused with SPINDLE_EPROTO;
 *   - a trailing byte is refused, naming "trailing";
 *   - another wire version is refused, naming "wire version";
 *   - another message type is refused, naming "message type".
 * Include after cmocka.h.
 */
#ifndef SPINDLE_TESTS_WIRE_CHECK_H
#define SPINDLE_TESTS_WIRE_CHECK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/error.h>

/* Decodes len bytes and re-encodes into out (cap bytes); returns the
 * decoder's result, and the re-encoded size in *out_len. */
typedef int (*wire_roundtrip_fn)(const uint8_t *buf, size_t len, uint8_t *out, size_t cap,
                                 size_t *out_len);

static inline void check_codec(wire_roundtrip_fn roundtrip, const uint8_t *valid, size_t len)
{
    size_t cap = len + 64;
    uint8_t *copy = malloc(cap), *again = malloc(cap);
    assert_non_null(copy);
    assert_non_null(again);
    size_t again_len = 0;
    assert_int_equal(roundtrip(valid, len, again, cap, &again_len), 0);
    assert_int_equal(again_len, len);
    assert_memory_equal(again, valid, len);
    for (size_t cut = 0; cut < len; cut += (len > 4096 ? 97 : 1)) {
        memcpy(copy, valid, cut);
        assert_int_equal(roundtrip(copy, cut, again, cap, &again_len), SPINDLE_EPROTO);
    }
    memcpy(copy, valid, len);
    copy[len] = 0;
    assert_int_equal(roundtrip(copy, len + 1, again, cap, &again_len), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "trailing"));
    memcpy(copy, valid, len);
    copy[2] ^= 0x40; /* the version's low byte */
    assert_int_equal(roundtrip(copy, len, again, cap, &again_len), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "wire version"));
    memcpy(copy, valid, len);
    copy[0] ^= 0x01; /* the type's low byte */
    assert_int_equal(roundtrip(copy, len, again, cap, &again_len), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "message type"));
    free(copy);
    free(again);
}

#endif
