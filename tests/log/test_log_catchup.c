/*
 * The catch-up stream's parser (src/log/log_catchup.c): what a logged
 * joiner takes from the member that admits it. A stream cut into pieces of
 * any size gives what it gives whole; each kind of damage is refused,
 * naming the stream.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/error.h>

#include "log/log_catchup.h"
#include "util/crc32c.h"

static const char state_bytes[] = "the state of subgroup 1";

/* What the sink was handed. */
struct taken {
    int headers;
    uint16_t flags;
    uint32_t snapshot_count;
    int snapshots;
    uint64_t snapshot_seq;
    char state[64];
    int records;
    uint64_t last_seq;
};

static int on_header(void *ctx, uint16_t flags, uint32_t count)
{
    struct taken *t = ctx;
    t->headers++;
    t->flags = flags;
    t->snapshot_count = count;
    return 0;
}

static int on_snapshot(void *ctx, const struct log_snapshot *snap, const uint8_t *state)
{
    struct taken *t = ctx;
    t->snapshots++;
    t->snapshot_seq = snap->seq;
    assert_true(snap->state_length < sizeof t->state);
    memcpy(t->state, state, (size_t)snap->state_length);
    return 0;
}

static int on_record(void *ctx, const struct log_record *record)
{
    struct taken *t = ctx;
    t->records++;
    if (record->type == LOG_REC_MESSAGE)
        t->last_seq = record->message.seq;
    return 0;
}

/* A reset stream: one snapshot of subgroup 1 at (3, 40), then a view
 * record and 20 messages of 300 bytes. Returns its length. */
static size_t build(uint8_t *buf, size_t cap)
{
    size_t len = 0;
    log_catchup_header_encode(LOG_CATCHUP_RESET, 1, buf);
    len += LOG_CATCHUP_HEADER_SIZE;
    struct log_snapshot snap = {.subgroup = 1, .view_id = 3, .seq = 40, .position = 7};
    snap.view = (struct log_view){.view_id = 3, .member_count = 2, .members = {0, 4}};
    snap.state_length = sizeof state_bytes;
    snap.state_crc = sp_crc32c(0, state_bytes, sizeof state_bytes);
    size_t head = log_snapshot_encode(&snap, NULL, 0);
    log_catchup_snapshot_prefix_encode(head + sizeof state_bytes, buf + len);
    len += LOG_CATCHUP_SNAPSHOT_PREFIX;
    len += log_snapshot_encode(&snap, buf + len, cap - len);
    memcpy(buf + len, state_bytes, sizeof state_bytes);
    len += sizeof state_bytes;
    struct log_record view = {.type = LOG_REC_VIEW, .position = 9};
    view.view = (struct log_view){.view_id = 4, .member_count = 3, .members = {0, 4, 5}};
    len += log_record_encode(&view, buf + len, cap - len);
    static uint8_t payload[300];
    for (uint64_t i = 0; i < 20; i++) {
        memset(payload, (int)i, sizeof payload);
        struct log_record m = {.type = LOG_REC_MESSAGE, .position = 10 + i};
        m.message = (struct log_message){.subgroup = 1,
                                         .sender_id = 4,
                                         .sender_index = i,
                                         .seq = 40 + i,
                                         .view_id = 4,
                                         .length = sizeof payload,
                                         .payload = payload};
        len += log_record_encode(&m, buf + len, cap - len);
    }
    assert_true(len <= cap);
    return len;
}

/* Feeds buf in pieces of `piece` bytes (0: whole); returns the first
 * error, or finish's. */
static int parse(const uint8_t *buf, size_t len, size_t piece, struct taken *t)
{
    memset(t, 0, sizeof *t);
    struct log_catchup_sink sink = {on_header, on_snapshot, on_record, t};
    struct log_catchup_parser p;
    assert_int_equal(log_catchup_parser_init(&p, &sink), 0);
    int rc = 0;
    for (size_t at = 0; rc == 0 && at < len;) {
        size_t n = piece == 0 || len - at < piece ? len - at : piece;
        rc = log_catchup_feed(&p, buf + at, n);
        at += n;
    }
    if (rc == 0)
        rc = log_catchup_finish(&p);
    log_catchup_parser_free(&p);
    return rc;
}

static void test_pieces_of_any_size_give_what_the_whole_gives(void **state)
{
    (void)state;
    static uint8_t buf[16384];
    size_t len = build(buf, sizeof buf);
    struct taken whole;
    assert_int_equal(parse(buf, len, 0, &whole), 0);
    assert_int_equal(whole.headers, 1);
    assert_int_equal(whole.flags, LOG_CATCHUP_RESET);
    assert_int_equal(whole.snapshot_count, 1);
    assert_int_equal(whole.snapshots, 1);
    assert_int_equal(whole.snapshot_seq, 40);
    assert_string_equal(whole.state, state_bytes);
    assert_int_equal(whole.records, 21);
    assert_int_equal(whole.last_seq, 59);
    /* Every piece size from one byte up, so that pieces end inside the
     * header, on the snapshot's length (its state not yet allocated), in
     * a record's header and in its body. */
    for (size_t piece = 1; piece <= 400; piece++) {
        struct taken t;
        assert_int_equal(parse(buf, len, piece, &t), 0);
        assert_memory_equal(&t, &whole, sizeof t);
    }
}

static void expect_refused(const uint8_t *buf, size_t len, const char *says)
{
    struct taken t;
    int rc = parse(buf, len, 7, &t);
    if (rc != SPINDLE_EPROTO || strstr(spindle_errmsg(), says) == NULL)
        fail_msg("rc %d, \"%s\" does not say \"%s\"", rc, spindle_errmsg(), says);
}

static void test_damage_is_refused_naming_the_stream(void **state)
{
    (void)state;
    static uint8_t buf[16384], bad[16384];
    size_t len = build(buf, sizeof buf);
    memcpy(bad, buf, len);
    bad[0] = 'X';
    expect_refused(bad, len, "bad magic");
    memcpy(bad, buf, len);
    bad[8] = 2;
    expect_refused(bad, len, "version 2");
    memcpy(bad, buf, len);
    bad[10] = 0x80;
    expect_refused(bad, len, "unknown flags");
    memcpy(bad, buf, len);
    bad[12] = 0x01;
    bad[13] = 0x01; /* 257 snapshots */
    expect_refused(bad, len, "257 snapshots");
    /* The state's last byte: its checksum no longer matches. */
    memcpy(bad, buf, len);
    size_t state_at = LOG_CATCHUP_HEADER_SIZE + LOG_CATCHUP_SNAPSHOT_PREFIX;
    while (memcmp(bad + state_at, state_bytes, sizeof state_bytes) != 0)
        state_at++;
    bad[state_at + 2] ^= 1;
    expect_refused(bad, len, "checksum");
    /* A snapshot length shorter than a snapshot's header. */
    memcpy(bad, buf, len);
    memset(bad + LOG_CATCHUP_HEADER_SIZE, 0, LOG_CATCHUP_SNAPSHOT_PREFIX);
    bad[LOG_CATCHUP_HEADER_SIZE] = 10;
    expect_refused(bad, len, "a snapshot of 10 bytes");
    /* A changed byte in the last record. */
    memcpy(bad, buf, len);
    bad[len - 5] ^= 0x40;
    expect_refused(bad, len, "catch-up stream at byte");
    /* Cut in a record, in a snapshot, in the header. */
    expect_refused(buf, len - 1, "ended");
    expect_refused(buf, state_at, "snapshots to come");
    expect_refused(buf, 5, "ended in its header");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pieces_of_any_size_give_what_the_whole_gives),
        cmocka_unit_test(test_damage_is_refused_naming_the_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
