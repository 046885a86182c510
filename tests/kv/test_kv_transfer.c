/*
 * spindle-kv's shard state transfer on the wire and its member names
 * (examples/kv/kv_transfer.c): what a joiner and a donor accept from each
 * other, and the names the layout places replicas by.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kv_transfer.h"

static void test_member_names_round_trip_and_refuse_others(void **state)
{
    (void)state;
    char name[64], host[KV_HOST_MAX + 1];
    uint32_t shard;
    unsigned port;
    assert_true(kv_member_name_format(name, sizeof name, 1, "10.0.0.7", 6379));
    assert_string_equal(name, "shard1@10.0.0.7:6379");
    assert_true(kv_member_name_parse(name, 2, &shard, host, &port));
    assert_int_equal(shard, 1);
    assert_string_equal(host, "10.0.0.7");
    assert_int_equal(port, 6379);
    /* Shard 1 of a service of one shard, and names of other programs. */
    assert_false(kv_member_name_parse(name, 1, &shard, host, &port));
    static const char *const refused[] = {
        "127.0.0.1:16400", "shard@h:1",  "shard0h:1",      "shard0@:1",
        "shard0@h:",       "shard0@h:0", "shard0@h:65536", "shard0@h:1x",
        "shard0@h@i:1",    "shardx@h:1", "shard99999@h:1", "",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        assert_false(kv_member_name_parse(refused[i], 4, &shard, host, &port));
    char long_host[KV_HOST_MAX + 2];
    memset(long_host, 'h', sizeof long_host - 1);
    long_host[sizeof long_host - 1] = '\0';
    assert_false(kv_member_name_format(name, sizeof name, 0, long_host, 1));
    assert_false(kv_member_name_format(name, sizeof name, 0, "a b", 1));
    assert_false(kv_member_name_format(name, sizeof name, 0, "h", 0));
}

static void test_queries_round_trip_and_are_checked(void **state)
{
    (void)state;
    struct kv_buf buf = {0};
    struct kv_query query;
    char error[256];
    kv_query_encode(&buf, &(struct kv_query){0x0006000000000002ull, 4072});
    assert_int_equal(buf.len, KV_QUERY_BYTES);
    assert_int_equal(kv_query_decode(buf.data, buf.len, &query, error, sizeof error), 0);
    assert_true(query.token == 0x0006000000000002ull && query.offset == 4072);
    assert_int_equal(kv_query_decode(buf.data, buf.len - 1, &query, error, sizeof error), -1);
    assert_non_null(strstr(error, "23 bytes"));
    buf.data[0] ^= 1;
    assert_int_equal(kv_query_decode(buf.data, buf.len, &query, error, sizeof error), -1);
    assert_non_null(strstr(error, "magic"));
    kv_buf_free(&buf);
}

static void test_replies_must_continue_the_state_where_asked(void **state)
{
    (void)state;
    struct kv_buf buf = {0};
    struct kv_reply reply;
    char error[256];
    static const char chunk[] = "0123456789";
    kv_reply_encode(&buf, &(struct kv_reply){KV_REPLY_CHUNK, 30, 20, chunk, 10});
    assert_int_equal(kv_reply_decode(buf.data, buf.len, 20, &reply, error, sizeof error), 0);
    assert_true(reply.total == 30 && reply.chunk_len == 10);
    assert_memory_equal(reply.chunk, chunk, 10);
    /* Asked for another offset: refused, the message names both. */
    assert_int_equal(kv_reply_decode(buf.data, buf.len, 10, &reply, error, sizeof error), -1);
    assert_non_null(strstr(error, "offset 20 answers a query for offset 10"));
    /* A chunk past the state's end. */
    buf.len = 0;
    kv_reply_encode(&buf, &(struct kv_reply){KV_REPLY_CHUNK, 25, 20, chunk, 10});
    assert_int_equal(kv_reply_decode(buf.data, buf.len, 20, &reply, error, sizeof error), -1);
    assert_non_null(strstr(error, "runs past"));
    /* An empty chunk before the end would never finish. */
    buf.len = 0;
    kv_reply_encode(&buf, &(struct kv_reply){KV_REPLY_CHUNK, 25, 20, chunk, 0});
    assert_int_equal(kv_reply_decode(buf.data, buf.len, 20, &reply, error, sizeof error), -1);
    /* "Not here" carries nothing; an unknown status is refused. */
    buf.len = 0;
    kv_reply_encode(&buf, &(struct kv_reply){.status = KV_REPLY_NOT_HERE});
    assert_int_equal(kv_reply_decode(buf.data, buf.len, 0, &reply, error, sizeof error), 0);
    assert_int_equal(reply.status, KV_REPLY_NOT_HERE);
    buf.len = 0;
    kv_reply_encode(&buf, &(struct kv_reply){7, 0, 0, NULL, 0});
    assert_int_equal(kv_reply_decode(buf.data, buf.len, 0, &reply, error, sizeof error), -1);
    assert_non_null(strstr(error, "status 7"));
    kv_buf_free(&buf);
}

static void test_state_headers_name_their_shard(void **state)
{
    (void)state;
    struct kv_buf buf = {0};
    char error[256];
    uint32_t shard = 0;
    kv_state_header_encode(&buf, 3);
    assert_int_equal(kv_state_header_decode(buf.data, buf.len, &shard, error, sizeof error), 0);
    assert_int_equal(shard, 3);
    assert_int_equal(kv_state_header_decode(buf.data, 7, &shard, error, sizeof error), -1);
    buf.data[1] ^= 0x40;
    assert_int_equal(kv_state_header_decode(buf.data, buf.len, &shard, error, sizeof error), -1);
    assert_non_null(strstr(error, "magic"));
    kv_buf_free(&buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_member_names_round_trip_and_refuse_others),
        cmocka_unit_test(test_queries_round_trip_and_are_checked),
        cmocka_unit_test(test_replies_must_continue_the_state_where_asked),
        cmocka_unit_test(test_state_headers_name_their_shard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
