/*
 * The bytes spindle_dds exchanges: the sample header round-trips and each
 * bad field is refused by name; the history state round-trips through the
 * fifo and each malformed state is refused; the fifo drops its oldest.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../../examples/dds/dds_impl.h"

static void test_header_round_trips(void **state)
{
    (void)state;
    uint8_t bytes[SPINDLE_DDS_SAMPLE_HEADER + 10] = {0};
    struct spindle_dds_sample_info in = {.topic = 63,
                                         .writer = 5,
                                         .seq = 0x0102030405060708ull,
                                         .source_timestamp_ns = 0xfedcba9876543210ull,
                                         .length = 10};
    dds_sample_header_encode(bytes, &in);
    struct spindle_dds_sample_info out;
    assert_int_equal(dds_sample_header_decode(bytes, sizeof bytes, &out), 0);
    assert_int_equal(out.topic, 63);
    assert_int_equal(out.writer, 5);
    assert_int_equal(out.seq, in.seq);
    assert_int_equal(out.source_timestamp_ns, in.source_timestamp_ns);
    assert_int_equal(out.length, 10);
    /* Little-endian on the wire whatever the host. */
    assert_int_equal(bytes[0], 0x53);
    assert_int_equal(bytes[16], 0x08);
}

static void refused(const uint8_t *bytes, size_t size, const char *words)
{
    struct spindle_dds_sample_info out;
    assert_int_equal(dds_sample_header_decode(bytes, size, &out), SPINDLE_EPROTO);
    if (strstr(spindle_dds_errmsg(), words) == NULL)
        fail_msg("message \"%s\" lacks \"%s\"", spindle_dds_errmsg(), words);
}

static void test_header_refusals_name_the_field(void **state)
{
    (void)state;
    uint8_t good[SPINDLE_DDS_SAMPLE_HEADER + 4];
    struct spindle_dds_sample_info in = {.topic = 1, .writer = 2, .seq = 3, .length = 4};
    dds_sample_header_encode(good, &in);
    uint8_t bad[sizeof good];
    refused(good, SPINDLE_DDS_SAMPLE_HEADER - 1, "shorter");
    refused(good, SPINDLE_DDS_SAMPLE_HEADER + 3, "length 4 exceeds");
    memcpy(bad, good, sizeof bad);
    bad[0] ^= 1;
    refused(bad, sizeof bad, "magic");
    memcpy(bad, good, sizeof bad);
    bad[4] = 2;
    refused(bad, sizeof bad, "version 2");
    memcpy(bad, good, sizeof bad);
    bad[6] = 64;
    refused(bad, sizeof bad, "topic 64");
    memcpy(bad, good, sizeof bad);
    bad[8] = 64;
    refused(bad, sizeof bad, "writer 64");
    memcpy(bad, good, sizeof bad);
    bad[16] = 0;
    refused(bad, sizeof bad, "sequence number 0");
}

struct seen {
    uint32_t count;
    uint32_t topics[8];
    uint64_t seqs[8];
};

static int remember(void *ctx, uint32_t topic, const uint8_t *payload, size_t size)
{
    struct seen *seen = ctx;
    struct spindle_dds_sample_info info;
    assert_int_equal(dds_sample_header_decode(payload, size, &info), 0);
    seen->topics[seen->count] = topic;
    seen->seqs[seen->count++] = info.seq;
    return 0;
}

static void push_sample(struct dds_fifo *fifo, uint32_t topic, uint64_t seq)
{
    uint8_t bytes[SPINDLE_DDS_SAMPLE_HEADER + 3] = {0};
    struct spindle_dds_sample_info info = {.topic = topic, .writer = 0, .seq = seq, .length = 3};
    dds_sample_header_encode(bytes, &info);
    assert_int_equal(dds_fifo_push(fifo, bytes, sizeof bytes, false), 0);
}

static void test_history_round_trips_keeping_the_newest(void **state)
{
    (void)state;
    struct dds_fifo a, c;
    assert_int_equal(dds_fifo_init(&a, 2), 0);
    assert_int_equal(dds_fifo_init(&c, 3), 0);
    for (uint64_t seq = 1; seq <= 5; seq++)
        push_sample(&a, 0, seq); /* keeps 4 and 5 */
    assert_int_equal(a.dropped, 3);
    push_sample(&c, 2, 9);
    struct dds_fifo *fifos[3] = {&a, NULL, &c};
    uint8_t *bytes;
    size_t size;
    assert_int_equal(dds_history_encode(fifos, 3, &bytes, &size), 0);
    struct seen seen = {0};
    assert_int_equal(dds_history_decode(bytes, size, 3, remember, &seen), 0);
    assert_int_equal(seen.count, 3);
    assert_int_equal(seen.topics[0], 0);
    assert_int_equal(seen.seqs[0], 4);
    assert_int_equal(seen.seqs[1], 5);
    assert_int_equal(seen.topics[2], 2);
    assert_int_equal(seen.seqs[2], 9);
    /* Cut anywhere, or with a byte more, it is refused. */
    for (size_t cut = 0; cut < size; cut++) {
        struct seen partial = {0};
        assert_int_equal(dds_history_decode(bytes, cut, 3, remember, &partial), SPINDLE_EPROTO);
    }
    uint8_t *longer = malloc(size + 1);
    memcpy(longer, bytes, size);
    longer[size] = 0;
    struct seen extra = {0};
    assert_int_equal(dds_history_decode(longer, size + 1, 3, remember, &extra), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_dds_errmsg(), "after its last topic"));
    /* Fewer topics than the state names. */
    assert_int_equal(dds_history_decode(bytes, size, 2, remember, &extra), SPINDLE_EPROTO);
    /* A sample filed under another topic. */
    bytes[8] = 1; /* topic 0's entry claims topic 1 */
    assert_int_equal(dds_history_decode(bytes, size, 3, remember, &extra), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_dds_errmsg(), "a sample of topic 0 in the history of topic 1"));
    free(longer);
    free(bytes);
    dds_fifo_free(&a);
    dds_fifo_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_round_trips),
        cmocka_unit_test(test_header_refusals_name_the_field),
        cmocka_unit_test(test_history_round_trips_keeping_the_newest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
