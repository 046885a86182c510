/*
 * The bytes spindle_dds exchanges: the sample header round-trips and each
 * bad field is refused by name; the history state round-trips through the
 * fifo and each malformed state is refused; the fifo drops its oldest;
 * history queries and replies round-trip and each bad field is refused.
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

/* A decoder's refusal: SPINDLE_EPROTO, its message naming words. */
static void query_refused(const uint8_t *bytes, size_t size, const char *words)
{
    struct dds_history_query query;
    assert_int_equal(dds_history_query_decode(bytes, size, 4, &query), SPINDLE_EPROTO);
    if (strstr(spindle_dds_errmsg(), words) == NULL)
        fail_msg("\"%s\" lacks \"%s\"", spindle_dds_errmsg(), words);
}

static void reply_refused(const uint8_t *bytes, size_t size, const char *words)
{
    struct dds_history_reply reply;
    assert_int_equal(dds_history_reply_decode(bytes, size, 4, &reply), SPINDLE_EPROTO);
    if (strstr(spindle_dds_errmsg(), words) == NULL)
        fail_msg("\"%s\" lacks \"%s\"", spindle_dds_errmsg(), words);
}

static void test_history_queries_round_trip_and_refuse_bad_fields(void **state)
{
    (void)state;
    uint8_t bytes[SPINDLE_P2P_MAX_PAYLOAD];
    struct dds_history_query query = {.topic = 3, .view_id = 9, .offset = 4056}, back;
    dds_history_query_encode(bytes, &query);
    assert_int_equal(dds_history_query_decode(bytes, DDS_HQUERY_SIZE, 4, &back), 0);
    assert_int_equal(back.topic, 3);
    assert_int_equal(back.view_id, 9);
    assert_int_equal(back.offset, 4056);
    query_refused(bytes, DDS_HQUERY_SIZE - 1, "23 bytes is not 24");
    assert_int_equal(dds_history_query_decode(bytes, DDS_HQUERY_SIZE, 3, &back), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_dds_errmsg(), "topic 3 is not below 3"));
    bytes[0] ^= 1;
    query_refused(bytes, DDS_HQUERY_SIZE, "magic");

    uint8_t chunk[100];
    memset(chunk, 7, sizeof chunk);
    struct dds_history_reply reply = {.status = DDS_HREPLY_OK,
                                      .topic = 2,
                                      .view_id = 9,
                                      .total = 300,
                                      .offset = 200,
                                      .chunk = chunk,
                                      .chunk_length = 100};
    size_t length = dds_history_reply_encode(bytes, &reply);
    assert_int_equal(length, DDS_HREPLY_HEADER + 100);
    struct dds_history_reply got;
    assert_int_equal(dds_history_reply_decode(bytes, length, 4, &got), 0);
    assert_int_equal(got.total, 300);
    assert_int_equal(got.offset, 200);
    assert_int_equal(got.chunk_length, 100);
    assert_memory_equal(got.chunk, chunk, 100);
    reply_refused(bytes, length - 1, "chunk length 100, 99 bytes follow");
    reply.total = 250; /* the chunk overruns the total */
    length = dds_history_reply_encode(bytes, &reply);
    reply_refused(bytes, length, "chunk of 100 bytes at offset 200 of 250");
    reply.total = 300;
    reply.status = DDS_HREPLY_OTHER_VIEW; /* carries nothing but its status */
    length = dds_history_reply_encode(bytes, &reply);
    reply_refused(bytes, length, "status 1 carries 100 bytes");
    reply = (struct dds_history_reply){.status = 3, .topic = 2};
    length = dds_history_reply_encode(bytes, &reply);
    reply_refused(bytes, length, "status 3");
    reply = (struct dds_history_reply){.status = DDS_HREPLY_INCOMPLETE, .topic = 2, .view_id = 9};
    length = dds_history_reply_encode(bytes, &reply);
    assert_int_equal(dds_history_reply_decode(bytes, length, 4, &got), 0);
    assert_int_equal(got.status, DDS_HREPLY_INCOMPLETE);
    reply_refused(bytes, DDS_HREPLY_HEADER - 1, "39 bytes");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_round_trips),
        cmocka_unit_test(test_header_refusals_name_the_field),
        cmocka_unit_test(test_history_round_trips_keeping_the_newest),
        cmocka_unit_test(test_history_queries_round_trip_and_refuse_bad_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
