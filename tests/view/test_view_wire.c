/*
 * The membership protocol's messages (src/view/view_wire.c): every message
 * round-trips through its decoder and encoder unchanged; truncations,
 * trailing bytes, another wire version and another type are refused; and
 * each decoder refuses the semantic lies a peer could tell, naming them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/error.h"
#include "view/view_wire_samples.h"
#include "wire_check.h"

#define BUF (VIEW_WIRE_JOIN_VIEW_SIZE + 4096)

/* ---- decode + re-encode, one per message ------------------------------- */

static int rt_desc(const uint8_t *buf, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
    struct view_start_desc desc;
    int rc = view_wire_decode_desc(buf, len, &desc);
    *out_len = rc == 0 ? view_wire_encode_desc(&desc, out, cap) : 0;
    return rc;
}

static int rt_ready(const uint8_t *buf, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
    uint64_t view = 0;
    int rc = view_wire_decode_ready(buf, len, &view);
    *out_len = rc == 0 ? view_wire_encode_ready(view, out, cap) : 0;
    return rc;
}

static int rt_blob(const uint8_t *buf, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
    static uint64_t counts[SAMPLE_BLOB_SUBGROUPS * SST_MAX_ROWS];
    struct view_blob blob = {.counts = counts};
    int rc = view_wire_decode_blob(buf, len, SAMPLE_BLOB_SUBGROUPS, &blob);
    *out_len = rc == 0 ? view_wire_encode_blob(&blob, out, cap) : 0;
    return rc;
}

static int rt_commit(const uint8_t *buf, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
    struct view_commit commit;
    int rc = view_wire_decode_commit(buf, len, &commit);
    *out_len = rc == 0 ? view_wire_encode_commit(&commit, out, cap) : 0;
    return rc;
}

static int rt_suspect(const uint8_t *buf, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
    struct view_suspect suspect;
    int rc = view_wire_decode_suspect(buf, len, &suspect);
    *out_len = rc == 0 ? view_wire_encode_suspect(&suspect, out, cap) : 0;
    return rc;
}

static int rt_join_request(const uint8_t *buf, size_t len, uint8_t *out, size_t cap,
                           size_t *out_len)
{
    static struct view_join_request req;
    int rc = view_wire_decode_join_request(buf, len, &req);
    *out_len = rc == 0 ? view_wire_encode_join_request(&req, out, cap) : 0;
    return rc;
}

static int rt_join_offer(const uint8_t *buf, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
    static struct view_join_offer offer;
    static struct smc_layout layouts[VIEW_JOIN_MAX_SUBGROUPS];
    offer.layouts = layouts;
    int rc = view_wire_decode_join_offer(buf, len, &offer);
    *out_len = rc == 0 ? view_wire_encode_join_offer(&offer, out, cap) : 0;
    return rc;
}

static int rt_join_desc(const uint8_t *buf, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
    struct view_join_desc desc;
    int rc = view_wire_decode_join_desc(buf, len, &desc);
    *out_len = rc == 0 ? view_wire_encode_join_desc(&desc, out, cap) : 0;
    return rc;
}

static int rt_join_announce(const uint8_t *buf, size_t len, uint8_t *out, size_t cap,
                            size_t *out_len)
{
    struct view_join_announce a;
    int rc = view_wire_decode_join_announce(buf, len, &a);
    *out_len = rc == 0 ? view_wire_encode_join_announce(&a, out, cap) : 0;
    return rc;
}

static int rt_join_view(const uint8_t *buf, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
    static struct view_join_view jv;
    int rc = view_wire_decode_join_view(buf, len, &jv);
    *out_len = rc == 0 ? view_wire_encode_join_view(&jv, out, cap) : 0;
    return rc;
}

static int rt_join_skips(const uint8_t *buf, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
    static struct view_join_skips skips;
    int rc = view_wire_decode_join_skips(buf, len, &skips);
    *out_len = rc == 0 ? view_wire_encode_join_skips(&skips, out, cap) : 0;
    return rc;
}

static uint8_t sample[BUF];

static void test_every_message_round_trips_and_refuses_damage(void **state)
{
    (void)state;
    size_t len;
    len = sample_desc(sample, sizeof sample);
    assert_int_equal(len, VIEW_WIRE_DESC_SIZE);
    check_codec(rt_desc, sample, len);
    len = sample_ready(sample, sizeof sample);
    assert_int_equal(len, VIEW_WIRE_READY_SIZE);
    check_codec(rt_ready, sample, len);
    len = sample_blob(sample, sizeof sample);
    assert_int_equal(len, view_wire_blob_size(SAMPLE_BLOB_SUBGROUPS));
    check_codec(rt_blob, sample, len);
    len = sample_commit(sample, sizeof sample);
    assert_int_equal(len, VIEW_WIRE_COMMIT_SIZE);
    check_codec(rt_commit, sample, len);
    len = sample_suspect(sample, sizeof sample);
    assert_int_equal(len, VIEW_WIRE_SUSPECT_SIZE);
    check_codec(rt_suspect, sample, len);
    len = sample_join_request(sample, sizeof sample);
    check_codec(rt_join_request, sample, len);
    len = sample_restart_join_request(sample, sizeof sample);
    check_codec(rt_join_request, sample, len);
    for (uint32_t kind = VIEW_OFFER_ADMIT; kind <= VIEW_OFFER_REFUSE; kind++) {
        len = sample_join_offer(kind, sample, sizeof sample);
        check_codec(rt_join_offer, sample, len);
    }
    len = sample_join_desc(sample, sizeof sample);
    assert_int_equal(len, VIEW_WIRE_JOIN_DESC_SIZE);
    check_codec(rt_join_desc, sample, len);
    len = sample_join_announce(sample, sizeof sample);
    assert_int_equal(len, VIEW_WIRE_JOIN_ANNOUNCE_SIZE);
    check_codec(rt_join_announce, sample, len);
    for (int dropped = 0; dropped < 2; dropped++) {
        len = sample_join_view(dropped, sample, sizeof sample);
        assert_int_equal(len, VIEW_WIRE_JOIN_VIEW_SIZE);
        check_codec(rt_join_view, sample, len);
    }
    len = sample_join_skips(sample, sizeof sample);
    assert_int_equal(len, VIEW_WIRE_JOIN_SKIPS_SIZE(2));
    check_codec(rt_join_skips, sample, len);
}

static void test_decoded_fields_are_the_encoded_ones(void **state)
{
    (void)state;
    size_t len = sample_join_offer(VIEW_OFFER_ADMIT, sample, sizeof sample);
    static struct smc_layout layouts[VIEW_JOIN_MAX_SUBGROUPS];
    static struct view_join_offer offer;
    offer.layouts = layouts;
    assert_int_equal(view_wire_decode_join_offer(sample, len, &offer), 0);
    assert_int_equal(offer.kind, VIEW_OFFER_ADMIT);
    assert_string_equal(offer.group_name, "orders");
    assert_int_equal(offer.id, 4);
    assert_int_equal(offer.view_id, 9);
    assert_true(offer.admission == (9ull << 16) + 1);
    assert_int_equal(offer.member_ids[1], 2);
    assert_string_equal(offer.addresses[2].host, "host4");
    assert_int_equal(offer.addresses[2].port, 7004);
    assert_int_equal(offer.layouts[1].mode, SPINDLE_MODE_UNORDERED);
    assert_int_equal(offer.layouts[0].num_senders, 2);

    len = sample_blob(sample, sizeof sample);
    static uint64_t counts[SAMPLE_BLOB_SUBGROUPS * SST_MAX_ROWS];
    struct view_blob blob = {.counts = counts};
    assert_int_equal(view_wire_decode_blob(sample, len, SAMPLE_BLOB_SUBGROUPS, &blob), 0);
    assert_int_equal(blob.suspected, 0x4);
    assert_int_equal(blob.joiner, VIEW_NO_JOINER);
    assert_int_equal(counts[5], 1005);
    assert_int_equal(counts[SST_MAX_ROWS], 77);
    assert_int_equal(blob.desc.region.len, 40);
    assert_int_equal(blob.desc.region.bytes[1], 9 * 3 + 1);
}

/* Writes a little-endian u32 into a message. */
static void poke_u32(uint8_t *at, uint32_t value)
{
    for (int i = 0; i < 4; i++)
        at[i] = (uint8_t)(value >> (8 * i));
}

static void expect_refused(int rc, const char *words)
{
    assert_int_equal(rc, SPINDLE_EPROTO);
    if (strstr(spindle_errmsg(), words) == NULL)
        fail_msg("'%s' does not name '%s'", spindle_errmsg(), words);
}

static void test_blob_of_another_group_shape_is_refused(void **state)
{
    (void)state;
    size_t len = sample_blob(sample, sizeof sample);
    static uint64_t counts[3 * SST_MAX_ROWS];
    struct view_blob blob = {.counts = counts};
    expect_refused(view_wire_decode_blob(sample, len, 3, &blob),
                   "subgroup count 2, the group has 3");
    /* A joiner id beyond any member id. */
    poke_u32(sample + WIRE_HEADER_SIZE + 16, 99);
    expect_refused(view_wire_decode_blob(sample, len, SAMPLE_BLOB_SUBGROUPS, &blob),
                   "joiner id 99");
}

static void test_lying_offers_are_refused(void **state)
{
    (void)state;
    static struct smc_layout layouts[VIEW_JOIN_MAX_SUBGROUPS];
    static struct view_join_offer offer;
    offer.layouts = layouts;
    size_t kind_at = WIRE_HEADER_SIZE;
    /* An unknown kind. */
    size_t len = sample_join_offer(VIEW_OFFER_REDIRECT, sample, sizeof sample);
    poke_u32(sample + kind_at, 7);
    expect_refused(view_wire_decode_join_offer(sample, len, &offer), "offer kind 7");
    /* A refusal with a positive "error". */
    len = sample_join_offer(VIEW_OFFER_REFUSE, sample, sizeof sample);
    poke_u32(sample + kind_at + 4, 5);
    expect_refused(view_wire_decode_join_offer(sample, len, &offer), "error code 5");
    /* A redirect to an empty host. */
    len = sample_join_offer(VIEW_OFFER_REDIRECT, sample, sizeof sample);
    memset(sample + kind_at + 4, 0, 2 + CTL_HOST_MAX - 1);
    expect_refused(view_wire_decode_join_offer(sample, len, &offer), "needs a host");
    /* An admission whose joiner row names another member. */
    len = sample_join_offer(VIEW_OFFER_ADMIT, sample, sizeof sample);
    size_t id_at = kind_at + 4 + 2 + VIEW_NAME_MAX - 1;
    poke_u32(sample + id_at, 2);
    expect_refused(view_wire_decode_join_offer(sample, len, &offer),
                   "joiner's row names member 4, not 2");
    /* An admission of 0 (the number of the members that started the group). */
    len = sample_join_offer(VIEW_OFFER_ADMIT, sample, sizeof sample);
    size_t admission_at = id_at + 5 * 4 + 8;
    memset(sample + admission_at, 0, 8);
    expect_refused(view_wire_decode_join_offer(sample, len, &offer), "not a joiner's place");
    /* The same member id in two rows. */
    len = sample_join_offer(VIEW_OFFER_ADMIT, sample, sizeof sample);
    size_t rows_at = admission_at + 8;
    size_t row_size = 4 + VIEW_WIRE_ADDRESS_SIZE + VIEW_WIRE_IDENTITY_SIZE;
    poke_u32(sample + rows_at + row_size, 0);
    expect_refused(view_wire_decode_join_offer(sample, len, &offer), "listed twice");
    /* Two rows with one name, a name with a space, an incarnation of 0. */
    len = sample_join_offer(VIEW_OFFER_ADMIT, sample, sizeof sample);
    size_t name_at = rows_at + 4 + VIEW_WIRE_ADDRESS_SIZE + 2;
    memcpy(sample + row_size + name_at, "node-0", 6);
    expect_refused(view_wire_decode_join_offer(sample, len, &offer),
                   "rows 0 and 1 both have the name 'node-0'");
    len = sample_join_offer(VIEW_OFFER_ADMIT, sample, sizeof sample);
    sample[name_at + 4] = ' ';
    expect_refused(view_wire_decode_join_offer(sample, len, &offer), "byte 0x20 at 4");
    len = sample_join_offer(VIEW_OFFER_ADMIT, sample, sizeof sample);
    memset(sample + name_at + SPINDLE_MEMBER_NAME_MAX - 1, 0, 8);
    expect_refused(view_wire_decode_join_offer(sample, len, &offer),
                   "member 'node-0' has incarnation 0");
    /* A layout whose sender is not a member. */
    len = sample_join_offer(VIEW_OFFER_ADMIT, sample, sizeof sample);
    size_t layout_at = rows_at + 3 * row_size;
    size_t senders_at = layout_at + 4 + 4 * SST_MAX_ROWS;
    poke_u32(sample + senders_at + 4, 2);
    poke_u32(sample + layout_at, 2); /* members 0, 1 only */
    poke_u32(sample + layout_at + 4 + 8, 0);
    expect_refused(view_wire_decode_join_offer(sample, len, &offer), "sender 2 is not a member");
    /* A used entry past the count must be zero. */
    len = sample_join_offer(VIEW_OFFER_ADMIT, sample, sizeof sample);
    poke_u32(sample + layout_at + 4 + 4 * 10, 3);
    expect_refused(view_wire_decode_join_offer(sample, len, &offer), "unused subgroup members");
    /* A name with a NUL inside its length, or bytes past it. */
    len = sample_join_offer(VIEW_OFFER_ADMIT, sample, sizeof sample);
    sample[kind_at + 4 + 2 + 1] = 0;
    expect_refused(view_wire_decode_join_offer(sample, len, &offer), "NUL");
    len = sample_join_offer(VIEW_OFFER_ADMIT, sample, sizeof sample);
    sample[kind_at + 4 + 2 + 40] = 'x';
    expect_refused(view_wire_decode_join_offer(sample, len, &offer), "group name must be zero");
}

/* A chunk: header, view 9, offset 2 MiB, the bytes of "state!" (last). */
static size_t sample_chunk(uint8_t *buf, size_t cap)
{
    static const uint8_t piece[] = "state!";
    struct view_join_chunk chunk = {9, 2u << 20, sizeof piece, true, 0, piece};
    return view_wire_encode_join_chunk(&chunk, buf, cap);
}

static void test_state_chunks_and_acknowledgements(void **state)
{
    (void)state;
    static struct view_join_chunk chunk;
    size_t len = sample_chunk(sample, sizeof sample);
    assert_int_equal(len, VIEW_WIRE_JOIN_CHUNK_HEADER_SIZE + 7);
    assert_int_equal(view_wire_decode_join_chunk(sample, len, &chunk), 0);
    assert_true(chunk.view_id == 9 && chunk.offset == (2u << 20) && chunk.length == 7);
    assert_true(chunk.last && chunk.error == 0);
    assert_memory_equal(chunk.data, "state!", 7);
    assert_ptr_equal(chunk.data, sample + VIEW_WIRE_JOIN_CHUNK_HEADER_SIZE);
    /* Fields at: view 4, offset 12, length 20, flags 24, error 28. */
    expect_refused(view_wire_decode_join_chunk(sample, len - 1, &chunk), "6 bytes follow");
    poke_u32(sample + 20, VIEW_STATE_CHUNK + 1);
    expect_refused(view_wire_decode_join_chunk(sample, len, &chunk), "exceeds 1048576");
    len = sample_chunk(sample, sizeof sample);
    poke_u32(sample + 24, 3);
    expect_refused(view_wire_decode_join_chunk(sample, len, &chunk), "unknown flags 0x3");
    len = sample_chunk(sample, sizeof sample);
    memset(sample + 12, 0xff, 8); /* offset 2^64 - 1: 7 bytes would end past it */
    expect_refused(view_wire_decode_join_chunk(sample, len, &chunk), "ends past 2^64");
    len = sample_chunk(sample, sizeof sample);
    poke_u32(sample + 28, (uint32_t)SPINDLE_EIO); /* a failure that carries bytes */
    expect_refused(view_wire_decode_join_chunk(sample, len, &chunk), "carries no bytes");
    len = sample_chunk(sample, sizeof sample);
    poke_u32(sample + 28, 5);
    expect_refused(view_wire_decode_join_chunk(sample, len, &chunk), "not a libspindle error");

    struct view_join_state_ack ack = {9, 12345, SPINDLE_EINVAL}, back;
    len = view_wire_encode_join_state_ack(&ack, sample, sizeof sample);
    assert_int_equal(len, VIEW_WIRE_JOIN_STATE_ACK_SIZE);
    assert_int_equal(view_wire_decode_join_state_ack(sample, len, &back), 0);
    assert_true(back.view_id == 9 && back.taken == 12345 && back.error == SPINDLE_EINVAL);
    sample[len - 1] = 1;
    expect_refused(view_wire_decode_join_state_ack(sample, len, &back), "reserved");
    expect_refused(view_wire_decode_join_state_ack(sample, len - 1, &back), "");
}

static void test_lying_requests_and_views_are_refused(void **state)
{
    (void)state;
    static struct view_join_request req;
    size_t len = sample_join_request(sample, sizeof sample);
    size_t identity_at = WIRE_HEADER_SIZE + VIEW_WIRE_ADDRESS_SIZE;
    size_t flags_at = identity_at + VIEW_WIRE_IDENTITY_SIZE;
    size_t count_at = flags_at + 4;
    memset(sample + identity_at, 0, 2 + SPINDLE_MEMBER_NAME_MAX - 1); /* an empty name */
    expect_refused(view_wire_decode_join_request(sample, len, &req),
                   "joiner name must have 1 to 63 characters, not 0");
    len = sample_join_request(sample, sizeof sample);
    poke_u32(sample + flags_at, 0x8); /* a setting this build does not know */
    expect_refused(view_wire_decode_join_request(sample, len, &req), "flags 0x8");
    poke_u32(sample + flags_at, VIEW_JOIN_RESTART); /* the restart id missing */
    expect_refused(view_wire_decode_join_request(sample, len, &req), "restart member id");
    poke_u32(sample + flags_at, VIEW_JOIN_TIE_BREAKER);
    assert_int_equal(view_wire_decode_join_request(sample, len, &req), 0);
    assert_int_equal(req.flags, VIEW_JOIN_TIE_BREAKER);
    poke_u32(sample + count_at, 4); /* 4 subgroups announced, 3 sent */
    expect_refused(view_wire_decode_join_request(sample, len, &req), "4 subgroups need 48 bytes");
    poke_u32(sample + count_at, 0);
    expect_refused(view_wire_decode_join_request(sample, len, &req), "subgroup count 0");
    len = sample_restart_join_request(sample, sizeof sample);
    assert_int_equal(view_wire_decode_join_request(sample, len, &req), 0);
    assert_true((req.flags & VIEW_JOIN_RESTART) != 0 && req.restart_id == 5);
    poke_u32(sample + len - 4, SPINDLE_MAX_MEMBERS); /* no such member id */
    expect_refused(view_wire_decode_join_request(sample, len, &req),
                   "restart member id 64 must be below 64");
    poke_u32(sample + flags_at, VIEW_JOIN_CATCHUP); /* the id, but no flag for it */
    expect_refused(view_wire_decode_join_request(sample, len, &req), "trailing bytes");

    struct view_suspect suspect;
    len = sample_suspect(sample, sizeof sample);
    memset(sample + WIRE_HEADER_SIZE + 8, 0, 8);
    expect_refused(view_wire_decode_suspect(sample, len, &suspect), "a suspicion of no rows");

    static struct view_join_view jv;
    len = sample_join_view(0, sample, sizeof sample);
    size_t state_at = WIRE_HEADER_SIZE + 12 + 2 + VIEW_WHY_MAX - 1;
    poke_u32(sample + state_at + 4, 1); /* 2^32 + 4096 bytes: a state has no limit */
    assert_int_equal(view_wire_decode_join_view(sample, len, &jv), 0);
    assert_int_equal(jv.state_length, (1ull << 32) + 4096);
    len = sample_join_view(0, sample, sizeof sample);
    poke_u32(sample + state_at + 8, VIEW_JOIN_MAX_SKIPS + 1);
    expect_refused(view_wire_decode_join_view(sample, len, &jv), "skip entries exceed");
    len = sample_join_view(0, sample, sizeof sample);
    poke_u32(sample + state_at + 12, 65);
    expect_refused(view_wire_decode_join_view(sample, len, &jv), "row count 65");
    len = sample_join_view(0, sample, sizeof sample);
    poke_u32(sample + state_at + 12, 2); /* row 2's descriptor is then unused */
    expect_refused(view_wire_decode_join_view(sample, len, &jv), "unused descriptor 2");
    len = sample_join_view(1, sample, sizeof sample);
    poke_u32(sample + state_at + 8, 1); /* skips in a dropped join */
    expect_refused(view_wire_decode_join_view(sample, len, &jv), "no state and no skips");
    len = sample_join_view(0, sample, sizeof sample);
    size_t desc_at = state_at + 16;
    sample[desc_at] = 0xff; /* an address length of 255 + ... > TP_DESC_MAX */
    sample[desc_at + 1] = 0x01;
    expect_refused(view_wire_decode_join_view(sample, len, &jv), "endpoint address length");

    /* Skips: entries at 16, each (subgroup, sender, count). */
    static struct view_join_skips skips;
    size_t entry_at = WIRE_HEADER_SIZE + 12;
    len = sample_join_skips(sample, sizeof sample);
    poke_u32(sample + entry_at - 4, 0);
    expect_refused(view_wire_decode_join_skips(sample, len, &skips), "skip count 0");
    len = sample_join_skips(sample, sizeof sample);
    poke_u32(sample + entry_at + 16, 0); /* (0, 0) after (0, 1) */
    expect_refused(view_wire_decode_join_skips(sample, len, &skips), "out of order");
    len = sample_join_skips(sample, sizeof sample);
    poke_u32(sample + entry_at, SPINDLE_MAX_SUBGROUPS);
    expect_refused(view_wire_decode_join_skips(sample, len, &skips), "beyond 256 subgroups");
    len = sample_join_skips(sample, sizeof sample);
    poke_u32(sample + entry_at + 4, SST_MAX_ROWS);
    expect_refused(view_wire_decode_join_skips(sample, len, &skips), "sender 64");
    len = sample_join_skips(sample, sizeof sample);
    memset(sample + entry_at + 8, 0, 8);
    expect_refused(view_wire_decode_join_skips(sample, len, &skips), "counts 0 resends");
    len = sample_join_skips(sample, sizeof sample);
    poke_u32(sample + entry_at + 12, 1); /* 2^32 + 12 */
    expect_refused(view_wire_decode_join_skips(sample, len, &skips), "counts 4294967308");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_message_round_trips_and_refuses_damage),
        cmocka_unit_test(test_decoded_fields_are_the_encoded_ones),
        cmocka_unit_test(test_blob_of_another_group_shape_is_refused),
        cmocka_unit_test(test_lying_offers_are_refused),
        cmocka_unit_test(test_lying_requests_and_views_are_refused),
        cmocka_unit_test(test_state_chunks_and_acknowledgements),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
