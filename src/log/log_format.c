/* Segment headers and records of a log (log/log_format.h, docs/LOGS.md). */
#include "log/log_format.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util/crc32c.h"
#include "util/error.h"
#include "util/wire.h"

static const uint8_t segment_magic[8] = {'S', 'P', 'N', 'D', 'L', 'L', 'O', 'G'};

static size_t body_size(const struct log_record *record)
{
    if (record->type == LOG_REC_MESSAGE)
        return LOG_MESSAGE_FIXED_SIZE + record->message.length;
    return 16u + 4u * record->view.member_count + 8u * record->view.subgroup_count;
}

int log_record_check(const struct log_record *record)
{
    if (record->type == LOG_REC_MESSAGE) {
        const struct log_message *m = &record->message;
        if (m->subgroup >= SPINDLE_MAX_SUBGROUPS || m->sender_id >= SPINDLE_MAX_MEMBERS ||
            m->length > SPINDLE_MAX_PAYLOAD || (m->length > 0 && m->payload == NULL))
            return sp_error(SPINDLE_EINVAL,
                            "log: message record of subgroup %u, sender id %u, %u bytes: the "
                            "limits are %u, %u and %u bytes with a payload",
                            m->subgroup, m->sender_id, m->length, SPINDLE_MAX_SUBGROUPS - 1,
                            SPINDLE_MAX_MEMBERS - 1, SPINDLE_MAX_PAYLOAD);
        return 0;
    }
    if (record->type != LOG_REC_VIEW)
        return sp_error(SPINDLE_EINVAL, "log: record type %u is not a message or a view",
                        record->type);
    const struct log_view *v = &record->view;
    if (v->member_count == 0 || v->member_count > SPINDLE_MAX_MEMBERS ||
        v->subgroup_count > SPINDLE_MAX_SUBGROUPS)
        return sp_error(SPINDLE_EINVAL,
                        "log: view record of %u members and %u subgroups: 1..%u members and at "
                        "most %u subgroups",
                        v->member_count, v->subgroup_count, SPINDLE_MAX_MEMBERS,
                        SPINDLE_MAX_SUBGROUPS);
    uint64_t seen = 0;
    for (uint32_t i = 0; i < v->member_count; i++) {
        if (v->members[i] >= SPINDLE_MAX_MEMBERS || (seen & (UINT64_C(1) << v->members[i])) != 0)
            return sp_error(SPINDLE_EINVAL,
                            "log: view %" PRIu64 " member id %u is out of "
                            "range or repeated",
                            v->view_id, v->members[i]);
        seen |= UINT64_C(1) << v->members[i];
    }
    return 0;
}

size_t log_record_size(const struct log_record *record)
{
    return LOG_RECORD_HEADER_SIZE + body_size(record);
}

static void put_body(struct wire_writer *w, const struct log_record *record)
{
    if (record->type == LOG_REC_MESSAGE) {
        const struct log_message *m = &record->message;
        wire_put_u32(w, m->subgroup);
        wire_put_u32(w, m->sender_id);
        wire_put_u64(w, m->sender_index);
        wire_put_u64(w, m->seq);
        wire_put_u64(w, m->view_id);
        wire_put_u32(w, m->length);
        wire_put_bytes(w, m->payload, m->length);
        return;
    }
    const struct log_view *v = &record->view;
    wire_put_u64(w, v->view_id);
    wire_put_u32(w, v->member_count);
    wire_put_u32(w, v->subgroup_count);
    for (uint32_t i = 0; i < v->member_count; i++)
        wire_put_u32(w, v->members[i]);
    for (uint32_t s = 0; s < v->subgroup_count; s++)
        wire_put_u64(w, v->delivered_through[s]);
}

size_t log_record_encode(const struct log_record *record, uint8_t *buf, size_t cap)
{
    size_t size = log_record_size(record);
    if (buf == NULL || cap < size)
        return size;
    struct wire_writer w;
    wire_writer_init(&w, buf, cap);
    wire_put_u32(&w, 0); /* the checksum, below */
    wire_put_u32(&w, (uint32_t)body_size(record));
    wire_put_u16(&w, record->type);
    wire_put_zero(&w, 6);
    wire_put_u64(&w, record->position);
    put_body(&w, record);
    uint32_t crc = sp_crc32c(0, buf + 4, size - 4);
    struct wire_writer at_crc;
    wire_writer_init(&at_crc, buf, 4);
    wire_put_u32(&at_crc, crc);
    return size;
}

static void get_message(struct wire_reader *r, struct log_message *m)
{
    m->subgroup = wire_get_u32(r, "subgroup");
    if (r->rc == 0 && m->subgroup >= SPINDLE_MAX_SUBGROUPS) {
        r->pos -= 4;
        wire_fail(r, "subgroup %u exceeds %u", m->subgroup, SPINDLE_MAX_SUBGROUPS - 1);
    }
    m->sender_id = wire_get_u32(r, "sender id");
    if (r->rc == 0 && m->sender_id >= SPINDLE_MAX_MEMBERS) {
        r->pos -= 4;
        wire_fail(r, "sender id %u exceeds %u", m->sender_id, SPINDLE_MAX_MEMBERS - 1);
    }
    m->sender_index = wire_get_u64(r, "sender index");
    m->seq = wire_get_u64(r, "sequence number");
    m->view_id = wire_get_u64(r, "view id");
    m->length = wire_get_u32(r, "payload length");
    if (r->rc == 0 && m->length != wire_left(r)) {
        r->pos -= 4;
        wire_fail(r, "payload length %u does not fill the body (%zu bytes left)", m->length,
                  wire_left(r) - 4);
    }
    m->payload = r->rc == 0 ? r->buf + r->pos : NULL;
    if (r->rc == 0)
        r->pos += m->length;
}

static void get_view(struct wire_reader *r, struct log_view *v)
{
    v->view_id = wire_get_u64(r, "view id");
    v->member_count = wire_get_u32(r, "member count");
    if (r->rc == 0 && (v->member_count == 0 || v->member_count > SPINDLE_MAX_MEMBERS)) {
        r->pos -= 4;
        wire_fail(r, "member count %u is outside 1..%u", v->member_count, SPINDLE_MAX_MEMBERS);
    }
    v->subgroup_count = wire_get_u32(r, "subgroup count");
    if (r->rc == 0 && v->subgroup_count > SPINDLE_MAX_SUBGROUPS) {
        r->pos -= 4;
        wire_fail(r, "subgroup count %u exceeds %u", v->subgroup_count, SPINDLE_MAX_SUBGROUPS);
    }
    if (r->rc == 0 && wire_left(r) != 4u * v->member_count + 8u * v->subgroup_count)
        wire_fail(r, "%zu body bytes left for %u members and %u subgroups", wire_left(r),
                  v->member_count, v->subgroup_count);
    uint64_t seen = 0;
    for (uint32_t i = 0; r->rc == 0 && i < v->member_count; i++) {
        v->members[i] = wire_get_u32(r, "member id");
        if (r->rc == 0 && (v->members[i] >= SPINDLE_MAX_MEMBERS ||
                           (seen & (UINT64_C(1) << v->members[i])) != 0)) {
            r->pos -= 4;
            wire_fail(r, "member id %u is out of range or repeated", v->members[i]);
        }
        if (r->rc == 0)
            seen |= UINT64_C(1) << v->members[i];
    }
    for (uint32_t s = 0; r->rc == 0 && s < v->subgroup_count; s++)
        v->delivered_through[s] = wire_get_u64(r, "delivered through");
}

int log_record_decode(const uint8_t *buf, size_t len, struct log_record *record, size_t *size)
{
    *size = LOG_RECORD_HEADER_SIZE;
    if (len < LOG_RECORD_HEADER_SIZE)
        return 0;
    struct wire_reader r;
    wire_reader_init(&r, buf, LOG_RECORD_HEADER_SIZE, "log record");
    uint32_t crc = wire_get_u32(&r, "checksum");
    uint32_t body = wire_get_u32(&r, "body length");
    if (body > LOG_MAX_BODY) {
        r.pos -= 4;
        wire_fail(&r, "body length %u exceeds %u", body, (unsigned)LOG_MAX_BODY);
        return r.rc;
    }
    *size = LOG_RECORD_HEADER_SIZE + (size_t)body;
    if (len < *size)
        return 0;
    uint32_t actual = sp_crc32c(0, buf + 4, *size - 4);
    if (actual != crc) {
        r.pos = 0;
        wire_fail(&r, "checksum 0x%08x does not match the record's 0x%08x", crc, actual);
        return r.rc;
    }
    record->type = wire_get_u16(&r, "type");
    wire_get_zero(&r, 6, "reserved");
    record->position = wire_get_u64(&r, "position");
    if (r.rc < 0)
        return r.rc;
    /* The body's offsets count from the record's start, as the header's do. */
    wire_reader_init(&r, buf, *size, "log record");
    r.pos = LOG_RECORD_HEADER_SIZE;
    if (record->type == LOG_REC_MESSAGE) {
        get_message(&r, &record->message);
    } else if (record->type == LOG_REC_VIEW) {
        get_view(&r, &record->view);
    } else {
        r.pos = 8;
        wire_fail(&r, "type %u is not a message (%u) or a view (%u)", record->type, LOG_REC_MESSAGE,
                  LOG_REC_VIEW);
    }
    int rc = wire_finish(&r);
    return rc < 0 ? rc : 1;
}

void log_segment_header_encode(uint64_t first_position, uint8_t out[LOG_SEGMENT_HEADER_SIZE])
{
    struct wire_writer w;
    wire_writer_init(&w, out, LOG_SEGMENT_HEADER_SIZE);
    wire_put_bytes(&w, segment_magic, sizeof segment_magic);
    wire_put_u16(&w, LOG_FORMAT_VERSION);
    wire_put_u16(&w, LOG_SEGMENT_HEADER_SIZE);
    wire_put_zero(&w, 4);
    wire_put_u64(&w, first_position);
    wire_put_zero(&w, 4);
    wire_put_u32(&w, sp_crc32c(0, out, LOG_SEGMENT_HEADER_SIZE - 4));
}

int log_segment_header_decode(const uint8_t *buf, size_t len, uint64_t *first_position)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "log segment header");
    if (len < LOG_SEGMENT_HEADER_SIZE) {
        wire_fail(&r, "truncated: %zu of %u bytes", len, LOG_SEGMENT_HEADER_SIZE);
        return r.rc;
    }
    if (memcmp(buf, segment_magic, sizeof segment_magic) != 0) {
        wire_fail(&r, "magic is not \"SPNDLLOG\": not a segment of a log");
        return r.rc;
    }
    r.pos = sizeof segment_magic;
    uint16_t version = wire_get_u16(&r, "version");
    if (r.rc == 0 && version != LOG_FORMAT_VERSION) {
        r.pos -= 2;
        wire_fail(&r, "format version %u is not %u, the version this build reads", version,
                  LOG_FORMAT_VERSION);
    }
    uint16_t header_size = wire_get_u16(&r, "header size");
    if (r.rc == 0 && header_size != LOG_SEGMENT_HEADER_SIZE) {
        r.pos -= 2;
        wire_fail(&r, "header size %u is not %u", header_size, LOG_SEGMENT_HEADER_SIZE);
    }
    wire_get_zero(&r, 4, "reserved");
    *first_position = wire_get_u64(&r, "first position");
    wire_get_zero(&r, 4, "reserved");
    uint32_t crc = wire_get_u32(&r, "checksum");
    if (r.rc == 0 && crc != sp_crc32c(0, buf, LOG_SEGMENT_HEADER_SIZE - 4)) {
        r.pos -= 4;
        wire_fail(&r, "checksum 0x%08x does not match the header's 0x%08x", crc,
                  sp_crc32c(0, buf, LOG_SEGMENT_HEADER_SIZE - 4));
    }
    return wire_finish(&r);
}

void log_segment_name(uint64_t first_position, char name[LOG_SEGMENT_NAME_SIZE + 1])
{
    snprintf(name, LOG_SEGMENT_NAME_SIZE + 1, "%020" PRIu64 ".seg", first_position);
}

int log_segment_name_parse(const char *name, uint64_t *first_position)
{
    if (strlen(name) != LOG_SEGMENT_NAME_SIZE || strcmp(name + 20, ".seg") != 0)
        return 0;
    uint64_t value = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9')
            return 0;
        unsigned digit = (unsigned)(name[i] - '0');
        if (value > (UINT64_MAX - digit) / 10)
            return 0;
        value = value * 10 + digit;
    }
    *first_position = value;
    return 1;
}
