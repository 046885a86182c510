/*
 * libFuzzer target: the catch-up stream's parser (src/log/log_catchup.c),
 * the bytes a logged joiner takes from the member that admits it: a
 * header, snapshots, log records. The first input byte picks how the rest
 * is cut into pieces (as chunks may cut a record anywhere); the same bytes
 * are also parsed in one piece, and both parses must agree: the same
 * outcome, the same snapshots and records in the same order. Every record
 * handed over must re-encode to a whole valid record, every snapshot to a
 * header and view record that decode again; a refusal is SPINDLE_EPROTO
 * naming the stream or SPINDLE_ENOMEM.
 */
#include "fuzz_common.h"
#include "log/log_catchup.h"
#include "util/crc32c.h"

static uint8_t record_buf[LOG_MAX_RECORD];

/* What a parse saw: a running checksum of everything handed over. */
struct seen {
    uint32_t crc;
    uint64_t records, snapshots;
    bool header;
};

static int on_header(void *ctx, uint16_t flags, uint32_t count)
{
    struct seen *s = ctx;
    FUZZ_CHECK(!s->header);
    FUZZ_CHECK((flags & ~LOG_CATCHUP_RESET) == 0 && count <= SPINDLE_MAX_SUBGROUPS);
    s->header = true;
    s->crc = sp_crc32c(s->crc, &flags, sizeof flags);
    s->crc = sp_crc32c(s->crc, &count, sizeof count);
    return 0;
}

static int on_snapshot(void *ctx, const struct log_snapshot *snap, const uint8_t *state)
{
    struct seen *s = ctx;
    FUZZ_CHECK(s->header);
    FUZZ_CHECK(sp_crc32c(0, state, (size_t)snap->state_length) == snap->state_crc);
    size_t size = log_snapshot_encode(snap, record_buf, sizeof record_buf);
    struct log_snapshot again;
    size_t used = 0;
    FUZZ_CHECK(size <= sizeof record_buf);
    FUZZ_CHECK(log_snapshot_decode(record_buf, size, &again, &used) == 1 && used == size);
    s->crc = sp_crc32c(s->crc, record_buf, size);
    s->crc = sp_crc32c(s->crc, state, (size_t)snap->state_length);
    s->snapshots++;
    return 0;
}

static int on_record(void *ctx, const struct log_record *record)
{
    struct seen *s = ctx;
    FUZZ_CHECK(s->header);
    size_t size = log_record_encode(record, record_buf, sizeof record_buf);
    FUZZ_CHECK(size <= sizeof record_buf);
    struct log_record again;
    size_t used = 0;
    FUZZ_CHECK(log_record_decode(record_buf, size, &again, &used) == 1 && used == size);
    s->crc = sp_crc32c(s->crc, record_buf, size);
    s->records++;
    return 0;
}

/* Parses data in pieces of at most `piece` bytes (0: one piece). */
static int parse(const uint8_t *data, size_t size, size_t piece, struct seen *seen)
{
    memset(seen, 0, sizeof *seen);
    struct log_catchup_sink sink = {on_header, on_snapshot, on_record, seen};
    struct log_catchup_parser p;
    if (log_catchup_parser_init(&p, &sink) < 0)
        return SPINDLE_ENOMEM;
    int rc = 0;
    size_t at = 0;
    while (rc == 0 && at < size) {
        size_t n = piece == 0 || size - at < piece ? size - at : piece;
        rc = log_catchup_feed(&p, data + at, n);
        at += n;
    }
    if (rc == 0)
        rc = log_catchup_finish(&p);
    if (rc < 0) {
        FUZZ_CHECK(rc == SPINDLE_EPROTO || rc == SPINDLE_ENOMEM);
        FUZZ_CHECK(rc != SPINDLE_EPROTO || strstr(spindle_errmsg(), "catch-up") != NULL);
    }
    log_catchup_parser_free(&p);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = 1u + data[0] % 64u;
    struct seen whole, pieces;
    int rc_whole = parse(data + 1, size - 1, 0, &whole);
    int rc_pieces = parse(data + 1, size - 1, piece, &pieces);
    FUZZ_CHECK(rc_whole == rc_pieces);
    FUZZ_CHECK(whole.records == pieces.records && whole.snapshots == pieces.snapshots);
    FUZZ_CHECK(whole.crc == pieces.crc);
    return 0;
}
