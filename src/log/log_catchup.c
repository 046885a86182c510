/*
 * The catch-up stream's header and its parser (log/log_catchup.h).
 */
#include "log/log_catchup.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util/crc32c.h"
#include "util/error.h"
#include "util/wire.h"

static const uint8_t catchup_magic[8] = {'S', 'P', 'N', 'D', 'L', 'C', 'U', 'P'};

void log_catchup_header_encode(uint16_t flags, uint32_t snapshot_count,
                               uint8_t out[LOG_CATCHUP_HEADER_SIZE])
{
    struct wire_writer w;
    wire_writer_init(&w, out, LOG_CATCHUP_HEADER_SIZE);
    wire_put_bytes(&w, catchup_magic, sizeof catchup_magic);
    wire_put_u16(&w, LOG_CATCHUP_VERSION);
    wire_put_u16(&w, flags);
    wire_put_u32(&w, snapshot_count);
}

void log_catchup_snapshot_prefix_encode(uint64_t length, uint8_t out[LOG_CATCHUP_SNAPSHOT_PREFIX])
{
    struct wire_writer w;
    wire_writer_init(&w, out, LOG_CATCHUP_SNAPSHOT_PREFIX);
    wire_put_u64(&w, length);
}

int log_catchup_parser_init(struct log_catchup_parser *p, const struct log_catchup_sink *sink)
{
    memset(p, 0, sizeof *p);
    p->sink = *sink;
    p->carry = malloc(LOG_MAX_RECORD);
    if (p->carry == NULL)
        return sp_error(SPINDLE_ENOMEM, "no memory for a %u-byte catch-up record buffer",
                        (unsigned)LOG_MAX_RECORD);
    return 0;
}

void log_catchup_parser_free(struct log_catchup_parser *p)
{
    free(p->carry);
    p->carry = NULL;
    free(p->snapshot);
    p->snapshot = NULL;
}

/* Copies up to want - *have bytes of the input into dst; true once full. */
static bool gather(uint8_t *dst, size_t *have, size_t want, const uint8_t **data, size_t *length)
{
    size_t part = want - *have;
    if (part > *length)
        part = *length;
    if (part == 0)
        return *have == want;
    memcpy(dst + *have, *data, part);
    *have += part;
    *data += part;
    *length -= part;
    return *have == want;
}

static int take_header(struct log_catchup_parser *p)
{
    struct wire_reader r;
    wire_reader_init(&r, p->header, LOG_CATCHUP_HEADER_SIZE, "catch-up stream header");
    if (memcmp(p->header, catchup_magic, sizeof catchup_magic) != 0)
        wire_fail(&r, "bad magic");
    r.pos = sizeof catchup_magic;
    uint16_t version = wire_get_u16(&r, "version");
    if (r.rc == 0 && version != LOG_CATCHUP_VERSION) {
        r.pos -= 2;
        wire_fail(&r, "version %u, this build reads %u", version, LOG_CATCHUP_VERSION);
    }
    uint16_t flags = wire_get_u16(&r, "flags");
    if (r.rc == 0 && (flags & ~LOG_CATCHUP_RESET) != 0) {
        r.pos -= 2;
        wire_fail(&r, "unknown flags 0x%x", flags);
    }
    uint32_t count = wire_get_u32(&r, "snapshot count");
    if (r.rc == 0 && count > SPINDLE_MAX_SUBGROUPS) {
        r.pos -= 4;
        wire_fail(&r, "%u snapshots, more than one a subgroup (%u)", count, SPINDLE_MAX_SUBGROUPS);
    }
    int rc = wire_finish(&r);
    if (rc < 0)
        return rc;
    p->snapshots_left = count;
    p->offset = LOG_CATCHUP_HEADER_SIZE;
    return p->sink.on_header != NULL ? p->sink.on_header(p->sink.ctx, flags, count) : 0;
}

/* A whole snapshot's bytes: checked as a snapshot file is, then handed
 * over. */
static int take_snapshot(struct log_catchup_parser *p)
{
    struct log_snapshot snap;
    size_t size = 0;
    int rc = log_snapshot_decode(p->snapshot, p->snapshot_have, &snap, &size);
    if (rc == 0)
        rc = sp_error(SPINDLE_EPROTO, "a snapshot of %zu bytes ends in its header",
                      p->snapshot_have);
    else if (rc == 1 && snap.state_length != p->snapshot_have - size)
        rc = sp_error(SPINDLE_EPROTO,
                      "a snapshot of %zu bytes says it holds %" PRIu64
                      " bytes of state after %zu of header",
                      p->snapshot_have, snap.state_length, size);
    else if (rc == 1 && sp_crc32c(0, p->snapshot + size, p->snapshot_have - size) != snap.state_crc)
        rc = sp_error(SPINDLE_EPROTO, "a snapshot's state does not match its checksum");
    if (rc < 0)
        return sp_error(SPINDLE_EPROTO, "catch-up stream, snapshot at byte %" PRIu64 ": %s",
                        p->offset, spindle_errmsg());
    rc = p->sink.on_snapshot != NULL ? p->sink.on_snapshot(p->sink.ctx, &snap, p->snapshot + size)
                                     : 0;
    p->offset += LOG_CATCHUP_SNAPSHOT_PREFIX + p->snapshot_have;
    p->snapshots++;
    p->snapshots_left--;
    p->prefix_have = 0;
    p->snapshot_have = 0;
    return rc;
}

/* Takes snapshot bytes; *data and *length advance past what was used. */
static int feed_snapshot(struct log_catchup_parser *p, const uint8_t **data, size_t *length)
{
    if (p->prefix_have < LOG_CATCHUP_SNAPSHOT_PREFIX) {
        if (!gather(p->prefix, &p->prefix_have, LOG_CATCHUP_SNAPSHOT_PREFIX, data, length))
            return 0;
        struct wire_reader r;
        wire_reader_init(&r, p->prefix, LOG_CATCHUP_SNAPSHOT_PREFIX, "catch-up snapshot");
        p->snapshot_length = wire_get_u64(&r, "length");
        if (p->snapshot_length < LOG_SNAPSHOT_HEADER_SIZE || p->snapshot_length > SIZE_MAX / 2)
            return sp_error(SPINDLE_EPROTO,
                            "catch-up stream at byte %" PRIu64 ": a snapshot of %" PRIu64 " bytes",
                            p->offset, p->snapshot_length);
    }
    size_t want = (size_t)p->snapshot_length;
    size_t part = want - p->snapshot_have;
    if (part > *length)
        part = *length;
    /* Grown as bytes arrive, never to a length only announced. */
    if (p->snapshot_have + part > p->snapshot_cap) {
        size_t cap = p->snapshot_cap > 0 ? p->snapshot_cap : 4096;
        while (cap < p->snapshot_have + part)
            cap *= 2;
        if (cap > want)
            cap = want;
        uint8_t *grown = realloc(p->snapshot, cap);
        if (grown == NULL)
            return sp_error(SPINDLE_ENOMEM, "no memory for %zu bytes of a snapshot", cap);
        p->snapshot = grown;
        p->snapshot_cap = cap;
    }
    gather(p->snapshot, &p->snapshot_have, p->snapshot_have + part, data, length);
    return p->snapshot_have == want ? take_snapshot(p) : 0;
}

/* Decodes buf (len bytes) as the start of a record at the stream's
 * offset: 1 and *size for a whole one (handed over), 0 and *size the bytes
 * needed, or an error. */
static int decode_at(struct log_catchup_parser *p, const uint8_t *buf, size_t len, size_t *size)
{
    struct log_record record;
    int rc = log_record_decode(buf, len, &record, size);
    if (rc < 0)
        return sp_error(SPINDLE_EPROTO, "catch-up stream at byte %" PRIu64 ": %s", p->offset,
                        spindle_errmsg());
    if (rc == 0)
        return 0;
    rc = p->sink.on_record != NULL ? p->sink.on_record(p->sink.ctx, &record) : 0;
    p->offset += *size;
    p->records++;
    return rc < 0 ? rc : 1;
}

/* Takes record bytes; *data and *length advance past what was used. */
static int feed_records(struct log_catchup_parser *p, const uint8_t **data, size_t *length)
{
    size_t size = 0;
    int rc;
    if (p->have > 0) {
        /* Completes the carried record: as many bytes as its decoder asks
         * for (its header first, then the whole record). */
        rc = decode_at(p, p->carry, p->have, &size);
        if (rc == 0 && gather(p->carry, &p->have, size, data, length))
            rc = decode_at(p, p->carry, p->have, &size);
        if (rc != 0)
            p->have = 0;
        return rc < 0 ? rc : 0;
    }
    rc = decode_at(p, *data, *length, &size);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        *data += size;
        *length -= size;
        return 0;
    }
    /* Part of a record: kept for the next piece (the decoder checked that
     * a whole one fits LOG_MAX_RECORD once its header is in). */
    gather(p->carry, &p->have, *length, data, length);
    return 0;
}

int log_catchup_feed(struct log_catchup_parser *p, const uint8_t *data, size_t length)
{
    if (p->header_have < LOG_CATCHUP_HEADER_SIZE) {
        if (!gather(p->header, &p->header_have, LOG_CATCHUP_HEADER_SIZE, &data, &length))
            return 0;
        int rc = take_header(p);
        if (rc < 0)
            return rc;
    }
    while (length > 0) {
        int rc = p->snapshots_left > 0 ? feed_snapshot(p, &data, &length)
                                       : feed_records(p, &data, &length);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int log_catchup_finish(const struct log_catchup_parser *p)
{
    if (p->header_have < LOG_CATCHUP_HEADER_SIZE)
        return sp_error(SPINDLE_EPROTO, "catch-up stream: ended in its header, after %zu bytes",
                        p->header_have);
    if (p->snapshots_left > 0)
        return sp_error(SPINDLE_EPROTO, "catch-up stream: ended with %u snapshots to come",
                        p->snapshots_left);
    if (p->have > 0)
        return sp_error(SPINDLE_EPROTO,
                        "catch-up stream: ended %zu bytes into a record at byte %" PRIu64, p->have,
                        p->offset);
    return 0;
}
