/* Control-channel codec: round trips, strict validation, hostile input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/error.h"
#include "view/wire.h"
#include "view/wire_samples.h"

#define FRAME_CAP 4096

static uint64_t group(void)
{
    return wire_group_hash(SAMPLE_GROUP);
}

static void put_le(uint8_t *buf, size_t offset, uint64_t value, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++)
        buf[offset + i] = (uint8_t)(value >> (8 * i));
}

static uint64_t get_le(const uint8_t *buf, size_t offset, unsigned bytes)
{
    uint64_t value = 0;
    for (unsigned i = 0; i < bytes; i++)
        value |= (uint64_t)buf[offset + i] << (8 * i);
    return value;
}

/* Patches a field (after checking it holds what the layout says it does)
 * and expects decode to fail with EPROTO and a message containing what. */
static void expect_patch_rejected(enum wire_type type, size_t offset, unsigned bytes,
                                  uint64_t expect_old, uint64_t value, const char *what)
{
    uint8_t buf[FRAME_CAP];
    long len = sample_frame(type, buf, sizeof buf);
    assert_true(len > 0);
    assert_int_equal(get_le(buf, offset, bytes), expect_old);
    put_le(buf, offset, value, bytes);
    struct wire_msg msg;
    int rc = wire_decode(buf, (size_t)len, group(), &msg);
    if (rc == 0)
        wire_msg_clear(&msg);
    if (rc != SPINDLE_EPROTO)
        fail_msg("%s patched at offset %zu to %llu: decode returned %d", wire_type_name(type),
                 offset, (unsigned long long)value, rc);
    if (strstr(spindle_errmsg(), what) == NULL)
        fail_msg("rejection of %s offset %zu says \"%s\", expected \"%s\"", wire_type_name(type),
                 offset, spindle_errmsg(), what);
}

static void test_every_type_round_trips_byte_exact(void **state)
{
    (void)state;
    for (unsigned type = 1; type <= WIRE_TYPE_MAX; type++) {
        uint8_t buf[FRAME_CAP], again[FRAME_CAP];
        long len = sample_frame(type, buf, sizeof buf);
        assert_true(len > WIRE_HEADER_SIZE || type == 0);
        struct wire_msg msg;
        assert_int_equal(wire_decode(buf, (size_t)len, group(), &msg), 0);
        assert_int_equal(msg.type, type);
        size_t len2;
        assert_int_equal(wire_encode(group(), &msg, again, sizeof again, &len2), 0);
        assert_int_equal(len2, (size_t)len);
        assert_memory_equal(buf, again, (size_t)len);
        wire_msg_clear(&msg);
    }
}

static void test_decoded_fields_match_the_sample(void **state)
{
    (void)state;
    uint8_t buf[FRAME_CAP];
    long len = sample_frame(WIRE_VIEW_PROPOSAL, buf, sizeof buf);
    struct wire_msg msg, ref;
    assert_int_equal(wire_decode(buf, (size_t)len, group(), &msg), 0);
    assert_int_equal(sample_msg(WIRE_VIEW_PROPOSAL, &ref), 0);
    const struct view *got = &msg.u.proposal.view, *want = &ref.u.proposal.view;
    assert_int_equal(msg.u.proposal.prev_view_id, 12);
    assert_int_equal(got->id, 13);
    assert_int_equal(got->num_members, 4);
    assert_int_equal(got->num_subgroups, 2);
    assert_int_equal(got->num_shards, 3);
    for (uint32_t i = 0; i < 4; i++) {
        assert_int_equal(got->members[i].id, want->members[i].id);
        assert_string_equal(got->members[i].host, want->members[i].host);
        assert_int_equal(got->members[i].port, want->members[i].port);
        assert_int_equal(got->members[i].address.len, want->members[i].address.len);
        assert_memory_equal(got->members[i].address.bytes, want->members[i].address.bytes,
                            want->members[i].address.len);
    }
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(got->shards[i].subgroup, want->shards[i].subgroup);
        assert_int_equal(got->shards[i].shard_index, want->shards[i].shard_index);
        assert_int_equal(got->shards[i].num_senders, want->shards[i].num_senders);
        assert_memory_equal(got->shards[i].members, want->shards[i].members,
                            want->shards[i].num_members * sizeof(uint32_t));
    }
    assert_int_equal(view_validate(got), 0);
    wire_msg_clear(&msg);
    view_clear(&ref.u.proposal.view);

    len = sample_frame(WIRE_STATE_CHUNK, buf, sizeof buf);
    assert_int_equal(wire_decode(buf, (size_t)len, group(), &msg), 0);
    assert_int_equal(msg.u.chunk.length, sizeof sample_state);
    assert_ptr_equal(msg.u.chunk.data, buf + len - sizeof sample_state); /* zero copy */
    assert_memory_equal(msg.u.chunk.data, sample_state, sizeof sample_state);

    len = sample_frame(WIRE_TRIM_REPORT, buf, sizeof buf);
    assert_int_equal(wire_decode(buf, (size_t)len, group(), &msg), 0);
    assert_int_equal(msg.u.trim.num_entries, 3);
    assert_int_equal(msg.u.trim.entries[0].trim[3], 1003);
    assert_int_equal(msg.u.trim.entries[2].shard, 1);
    wire_msg_clear(&msg);
}

static void test_every_truncation_is_rejected(void **state)
{
    (void)state;
    for (unsigned type = 1; type <= WIRE_TYPE_MAX; type++) {
        uint8_t buf[FRAME_CAP];
        long len = sample_frame(type, buf, sizeof buf);
        for (long cut = 0; cut < len; cut++) {
            /* Exact-size copies so ASan catches any read past the end. */
            uint8_t *copy = malloc(cut > 0 ? (size_t)cut : 1);
            memcpy(copy, buf, (size_t)cut);
            struct wire_msg msg;
            assert_int_equal(wire_decode(copy, (size_t)cut, group(), &msg), SPINDLE_EPROTO);
            assert_true(strlen(spindle_errmsg()) > 0);
            /* Same cut with the header length agreeing: the payload parser
             * itself must notice the missing fields. */
            if (cut >= WIRE_HEADER_SIZE) {
                put_le(copy, 16, (uint64_t)(cut - WIRE_HEADER_SIZE), 4);
                assert_int_equal(wire_decode(copy, (size_t)cut, group(), &msg), SPINDLE_EPROTO);
            }
            free(copy);
        }
    }
}

static void test_header_violations_are_rejected(void **state)
{
    (void)state;
    expect_patch_rejected(WIRE_VIEW_ACK, 0, 4, WIRE_MAGIC, 0x12345678, "magic");
    expect_patch_rejected(WIRE_VIEW_ACK, 4, 2, WIRE_VERSION, 2, "version 2");
    expect_patch_rejected(WIRE_VIEW_ACK, 6, 2, WIRE_VIEW_ACK, 0, "unknown frame type 0");
    expect_patch_rejected(WIRE_VIEW_ACK, 6, 2, WIRE_VIEW_ACK, 9, "unknown frame type 9");
    expect_patch_rejected(WIRE_VIEW_ACK, 8, 8, group(), group() ^ 1, "group");
    expect_patch_rejected(WIRE_VIEW_ACK, 16, 4, 16, 17, "header says 17");
    expect_patch_rejected(WIRE_VIEW_ACK, 16, 4, 16, WIRE_MAX_PAYLOAD + 1, "exceeds");
    expect_patch_rejected(WIRE_VIEW_ACK, 20, 4, 0, 1, "reserved");
    expect_patch_rejected(WIRE_VIEW_ACK, 36, 4, 0, 5, "event reserved");
    /* Changing the type re-interprets the payload: still rejected. */
    expect_patch_rejected(WIRE_VIEW_ACK, 6, 2, WIRE_VIEW_ACK, WIRE_STATE_CHUNK, "truncated");

    /* Trailing bytes with a consistent header. */
    uint8_t buf[FRAME_CAP];
    long len = sample_frame(WIRE_LEAVE, buf, sizeof buf);
    buf[len] = 0;
    put_le(buf, 16, (uint64_t)(len + 1 - WIRE_HEADER_SIZE), 4);
    struct wire_msg msg;
    assert_int_equal(wire_decode(buf, (size_t)len + 1, group(), &msg), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "trailing"));

    /* Stream use: a header alone parses and announces the payload size. */
    len = sample_frame(WIRE_JOIN_REQUEST, buf, sizeof buf);
    struct wire_header header;
    assert_int_equal(wire_header_parse(buf, WIRE_HEADER_SIZE, group(), &header), 0);
    assert_int_equal(header.payload_length, (uint32_t)len - WIRE_HEADER_SIZE);
    assert_int_equal(header.type, WIRE_JOIN_REQUEST);
    assert_int_equal(wire_header_parse(buf, WIRE_HEADER_SIZE - 1, group(), &header),
                     SPINDLE_EPROTO);
}

/* Proposal layout: 24 leader, 28 reserved, 32 prev id, 40 view id, 48
 * members, 52 subgroups, 56 shards, 60 reserved, 64 member 0 (id, port at
 * 68, host length 70, address length 72, reserved 74, host 76). Members
 * are 42..45 bytes, so shards start at 238: subgroup, counts at 242/244,
 * member ids from 246, sender ids from 262; shard 1 at 278, shard 2 at 298. */
static void test_hostile_view_descriptors_are_rejected(void **state)
{
    (void)state;
    const enum wire_type P = WIRE_VIEW_PROPOSAL;
    expect_patch_rejected(P, 28, 4, 0, 1, "proposal reserved");
    expect_patch_rejected(P, 32, 8, 12, 13, "does not follow");
    expect_patch_rejected(P, 48, 4, 4, 0xffffffffu, "do not fit");
    expect_patch_rejected(P, 48, 4, 4, 0, "0 members");
    expect_patch_rejected(P, 48, 4, 4, 65, "65 members");
    expect_patch_rejected(P, 52, 4, 2, 1, "subgroup 1 (of 1");
    expect_patch_rejected(P, 56, 4, 3, 100000, "do not fit");
    expect_patch_rejected(P, 56, 4, 3, 4, "truncated");
    expect_patch_rejected(P, 70, 2, 14, 0, "host length 0");
    expect_patch_rejected(P, 70, 2, 14, 400, "host length 400");
    expect_patch_rejected(P, 72, 2, 16, TP_DESC_MAX + 1, "address length 193");
    expect_patch_rejected(P, 74, 2, 0, 1, "reserved 1");
    expect_patch_rejected(P, 76, 1, 'n', 0, "NUL");
    expect_patch_rejected(P, 64 + 42, 4, 101, 100, "already in view"); /* duplicate id */
    expect_patch_rejected(P, 242, 2, 4, 0, "0 members");
    expect_patch_rejected(P, 244, 2, 4, 5, "5 senders");
    expect_patch_rejected(P, 250, 4, 101, 100, "listed twice");
    expect_patch_rejected(P, 250, 4, 101, 555, "555 is not in view");
    expect_patch_rejected(P, 262, 4, 100, 101, "out of member order");
    expect_patch_rejected(P, 298, 4, 1, 0, "not before 1"); /* shard 2 back to subgroup 0 */
    expect_patch_rejected(P, 278, 4, 1, 5, "subgroup 5");
}

/* Trim report: 24 view, 32 leader, 36 entries, entry 0 at 40 (subgroup,
 * shard 44, senders 48, reserved 52, counts from 56), entry 1 at 88, entry
 * 2 at 112. Join reply: 24 status, 26 reserved, 28 error, 46 host length.
 * Chunk: 40 offset, 48 total, 56 length, 60 flags. */
static void test_hostile_counts_and_flags_are_rejected(void **state)
{
    (void)state;
    const enum wire_type T = WIRE_TRIM_REPORT, J = WIRE_JOIN_REPLY, C = WIRE_STATE_CHUNK;
    expect_patch_rejected(T, 36, 4, 3, 0xffffffffu, "entries");
    expect_patch_rejected(T, 36, 4, 3, 4, "truncated");
    expect_patch_rejected(T, 36, 4, 3, 2, "trailing");
    expect_patch_rejected(T, 48, 4, 4, 65, "65 senders");
    expect_patch_rejected(T, 48, 4, 4, 5, "truncated");
    expect_patch_rejected(T, 52, 4, 0, 7, "trim reserved");
    expect_patch_rejected(T, 56, 8, 1000, TRIM_MAX_COUNT + 1, "exceeds");
    expect_patch_rejected(T, 88, 4, 1, 0, "out of order");
    expect_patch_rejected(T, 116, 4, 1, 0, "out of order"); /* duplicate (1,0) */
    expect_patch_rejected(J, 24, 2, WIRE_JOIN_REDIRECT, 3, "status 3");
    expect_patch_rejected(J, 24, 2, WIRE_JOIN_REDIRECT, WIRE_JOIN_REJECTED, "error 0");
    expect_patch_rejected(J, 26, 2, 0, 1, "reserved 1");
    expect_patch_rejected(J, 28, 4, 0, (uint32_t)SPINDLE_EPROTO, "error -15");
    expect_patch_rejected(J, 46, 2, 14, 0, "host length 0");
    expect_patch_rejected(J, 46, 2, 14, 15, "truncated");
    expect_patch_rejected(C, 40, 8, 100, 101, "inconsistent");
    expect_patch_rejected(C, 40, 8, 100, UINT64_MAX, "inconsistent");
    expect_patch_rejected(C, 48, 8, 100 + sizeof sample_state, 1000, "inconsistent");
    expect_patch_rejected(C, 56, 4, sizeof sample_state, 5, "inconsistent");
    expect_patch_rejected(C, 56, 4, sizeof sample_state, 0xffffffffu, "inconsistent");
    expect_patch_rejected(C, 60, 4, WIRE_CHUNK_LAST, 0, "flags 0x0");
    expect_patch_rejected(C, 60, 4, WIRE_CHUNK_LAST, 3, "flags 0x3");
}

static void test_encoder_refuses_what_the_decoder_would_reject(void **state)
{
    (void)state;
    uint8_t buf[FRAME_CAP];
    size_t len;
    struct wire_msg msg;
    sample_msg(WIRE_STATE_CHUNK, &msg);
    msg.u.chunk.flags = 0;
    assert_int_equal(wire_encode(group(), &msg, buf, sizeof buf, &len), SPINDLE_EINVAL);
    sample_msg(WIRE_JOIN_REPLY, &msg);
    msg.u.join_reply.status = WIRE_JOIN_REJECTED;
    assert_int_equal(wire_encode(group(), &msg, buf, sizeof buf, &len), SPINDLE_EINVAL);
    msg.u.join_reply.error = SPINDLE_EINVAL;
    assert_int_equal(wire_encode(group(), &msg, buf, sizeof buf, &len), 0);
    sample_msg(WIRE_JOIN_REQUEST, &msg);
    msg.u.join_request.member.host[0] = '\0';
    assert_int_equal(wire_encode(group(), &msg, buf, sizeof buf, &len), SPINDLE_EINVAL);
    sample_msg(WIRE_TRIM_REPORT, &msg);
    msg.u.trim.entries[1].shard = 0;
    msg.u.trim.entries[1].subgroup = 0;
    assert_int_equal(wire_encode(group(), &msg, buf, sizeof buf, &len), SPINDLE_EINVAL);
    sample_msg(WIRE_VIEW_PROPOSAL, &msg);
    msg.u.proposal.prev_view_id = 3;
    assert_int_equal(wire_encode(group(), &msg, buf, sizeof buf, &len), SPINDLE_EINVAL);
    view_clear(&msg.u.proposal.view);
    msg.type = (enum wire_type)42;
    assert_int_equal(wire_encode(group(), &msg, buf, sizeof buf, &len), SPINDLE_EINVAL);
}

static void test_size_limits(void **state)
{
    (void)state;
    uint8_t small[30];
    size_t len = 0;
    struct wire_msg msg;
    sample_msg(WIRE_JOIN_REQUEST, &msg);
    assert_int_equal(wire_encode(group(), &msg, small, sizeof small, &len), SPINDLE_EMSGSIZE);
    assert_int_equal(len, WIRE_HEADER_SIZE + 12 + 14 + 24); /* needed size is reported */
    /* A chunk whose frame would pass 1 MiB is refused by the encoder. */
    uint8_t *data = calloc(1, WIRE_MAX_FRAME);
    uint8_t *frame = malloc(WIRE_MAX_FRAME + 64);
    sample_msg(WIRE_STATE_CHUNK, &msg);
    msg.u.chunk.offset = 0;
    msg.u.chunk.data = data;
    msg.u.chunk.length = msg.u.chunk.total = WIRE_MAX_PAYLOAD - 40 + 1;
    assert_int_equal(wire_encode(group(), &msg, frame, WIRE_MAX_FRAME + 64, &len),
                     SPINDLE_EMSGSIZE);
    /* One byte less fits exactly and decodes. */
    msg.u.chunk.length = msg.u.chunk.total = WIRE_MAX_PAYLOAD - 40;
    assert_int_equal(wire_encode(group(), &msg, frame, WIRE_MAX_FRAME + 64, &len), 0);
    assert_int_equal(len, WIRE_MAX_FRAME);
    struct wire_msg out;
    assert_int_equal(wire_decode(frame, len, group(), &out), 0);
    free(data);
    free(frame);
}

static void test_group_hash_is_fnv1a(void **state)
{
    (void)state;
    assert_true(wire_group_hash("") == 0xcbf29ce484222325ull);
    assert_true(wire_group_hash("a") == 0xaf63dc4c8601ec8cull);
    assert_true(wire_group_hash("g1") != wire_group_hash("g2"));
    assert_string_equal(wire_type_name(WIRE_TRIM_REPORT), "trim-report");
    assert_string_equal(wire_type_name(0), "unknown");
    assert_string_equal(wire_type_name(99), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_type_round_trips_byte_exact),
        cmocka_unit_test(test_decoded_fields_match_the_sample),
        cmocka_unit_test(test_every_truncation_is_rejected),
        cmocka_unit_test(test_header_violations_are_rejected),
        cmocka_unit_test(test_hostile_view_descriptors_are_rejected),
        cmocka_unit_test(test_hostile_counts_and_flags_are_rejected),
        cmocka_unit_test(test_encoder_refuses_what_the_decoder_would_reject),
        cmocka_unit_test(test_size_limits),
        cmocka_unit_test(test_group_hash_is_fnv1a),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
