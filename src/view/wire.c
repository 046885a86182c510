/* Control-channel framing and the fixed-shape messages. See wire.h. */
#include "view/wire.h"

#include <stdlib.h>
#include <string.h>

#include "view/wire_codec.h"

uint64_t wire_group_hash(const char *group_name)
{
    uint64_t hash = 0xcbf29ce484222325ull; /* FNV-1a offset basis */
    for (const unsigned char *p = (const unsigned char *)group_name; *p != '\0'; p++) {
        hash ^= *p;
        hash *= 0x100000001b3ull;
    }
    return hash;
}

const char *wire_type_name(unsigned type)
{
    static const char *const names[] = {
        [WIRE_JOIN_REQUEST] = "join-request",
        [WIRE_JOIN_REPLY] = "join-reply",
        [WIRE_VIEW_PROPOSAL] = "view-proposal",
        [WIRE_VIEW_ACK] = "view-ack",
        [WIRE_VIEW_COMMIT] = "view-commit",
        [WIRE_TRIM_REPORT] = "trim-report",
        [WIRE_LEAVE] = "leave",
        [WIRE_STATE_CHUNK] = "state-chunk",
    };
    if (type == 0 || type > WIRE_TYPE_MAX)
        return "unknown";
    return names[type];
}

/* ---- encoding -------------------------------------------------------- */

static int encode_join_reply(struct wire_writer *w, const struct wire_join_reply *reply)
{
    size_t host_len = strnlen(reply->leader_host, VIEW_HOST_MAX);
    bool rejected = reply->status == WIRE_JOIN_REJECTED;
    if (reply->status > WIRE_JOIN_REJECTED || host_len == VIEW_HOST_MAX ||
        (reply->status == WIRE_JOIN_REDIRECT && host_len == 0) ||
        (rejected != (reply->error < 0)) || reply->error < SPINDLE_ERROR_MIN)
        return sp_error(SPINDLE_EINVAL,
                        "join reply: status %u, error %d, leader host of %zu bytes is "
                        "inconsistent",
                        reply->status, reply->error, host_len);
    wire_put(w, reply->status, 2);
    wire_put(w, 0, 2);
    wire_put(w, (uint32_t)reply->error, 4);
    wire_put(w, reply->view_id, 8);
    wire_put(w, reply->leader_id, 4);
    wire_put(w, reply->leader_port, 2);
    wire_put(w, host_len, 2);
    wire_put_bytes(w, reply->leader_host, host_len);
    return 0;
}

static int encode_chunk(struct wire_writer *w, const struct wire_state_chunk *chunk)
{
    bool fits = chunk->offset <= chunk->total && chunk->length <= chunk->total - chunk->offset;
    bool last = fits && chunk->offset + chunk->length == chunk->total;
    if (!fits || (chunk->flags & ~WIRE_CHUNK_LAST) ||
        last != ((chunk->flags & WIRE_CHUNK_LAST) != 0) ||
        (chunk->length > 0 && chunk->data == NULL))
        return sp_error(SPINDLE_EINVAL,
                        "state chunk: offset %llu + length %u vs total %llu, flags 0x%x "
                        "inconsistent",
                        (unsigned long long)chunk->offset, chunk->length,
                        (unsigned long long)chunk->total, chunk->flags);
    wire_put(w, chunk->view_id, 8);
    wire_put(w, chunk->subgroup, 4);
    wire_put(w, chunk->shard, 4);
    wire_put(w, chunk->offset, 8);
    wire_put(w, chunk->total, 8);
    wire_put(w, chunk->length, 4);
    wire_put(w, chunk->flags, 4);
    if (chunk->length > 0)
        wire_put_bytes(w, chunk->data, chunk->length);
    return 0;
}

static int encode_payload(struct wire_writer *w, const struct wire_msg *msg)
{
    switch (msg->type) {
    case WIRE_JOIN_REQUEST:
        return wire_encode_member(w, &msg->u.join_request.member);
    case WIRE_JOIN_REPLY:
        return encode_join_reply(w, &msg->u.join_reply);
    case WIRE_VIEW_PROPOSAL:
        if (msg->u.proposal.prev_view_id == UINT64_MAX ||
            msg->u.proposal.view.id != msg->u.proposal.prev_view_id + 1)
            return sp_error(SPINDLE_EINVAL, "proposal: view id %llu does not follow %llu",
                            (unsigned long long)msg->u.proposal.view.id,
                            (unsigned long long)msg->u.proposal.prev_view_id);
        wire_put(w, msg->u.proposal.leader_id, 4);
        wire_put(w, 0, 4);
        wire_put(w, msg->u.proposal.prev_view_id, 8);
        return wire_encode_view(w, &msg->u.proposal.view);
    case WIRE_VIEW_ACK:
    case WIRE_LEAVE: {
        const struct wire_member_event *event =
            msg->type == WIRE_VIEW_ACK ? &msg->u.ack : &msg->u.leave;
        wire_put(w, event->view_id, 8);
        wire_put(w, event->member_id, 4);
        wire_put(w, 0, 4);
        return 0;
    }
    case WIRE_VIEW_COMMIT:
        wire_put(w, msg->u.commit.view_id, 8);
        wire_put(w, msg->u.commit.leader_id, 4);
        wire_put(w, 0, 4);
        return 0;
    case WIRE_TRIM_REPORT:
        return wire_encode_trim(w, &msg->u.trim);
    case WIRE_STATE_CHUNK:
        return encode_chunk(w, &msg->u.chunk);
    }
    return sp_error(SPINDLE_EINVAL, "cannot encode message type %d", (int)msg->type);
}

int wire_encode(uint64_t group_hash, const struct wire_msg *msg, uint8_t *buf, size_t cap,
                size_t *len)
{
    struct wire_writer w = {buf, cap, 0};
    wire_put(&w, WIRE_MAGIC, 4);
    wire_put(&w, WIRE_VERSION, 2);
    wire_put(&w, (uint16_t)msg->type, 2);
    wire_put(&w, group_hash, 8);
    wire_put(&w, 0, 4); /* length, patched below */
    wire_put(&w, 0, 4);
    int rc = encode_payload(&w, msg);
    *len = w.pos;
    if (rc < 0)
        return rc;
    if (w.pos > WIRE_MAX_FRAME)
        return sp_error(SPINDLE_EMSGSIZE, "%s frame of %zu bytes exceeds %u",
                        wire_type_name(msg->type), w.pos, WIRE_MAX_FRAME);
    if (w.pos > cap)
        return sp_error(SPINDLE_EMSGSIZE, "%s frame needs %zu bytes, buffer has %zu",
                        wire_type_name(msg->type), w.pos, cap);
    struct wire_writer length = {buf + 16, 4, 0};
    wire_put(&length, (uint32_t)(w.pos - WIRE_HEADER_SIZE), 4);
    return 0;
}

/* ---- decoding -------------------------------------------------------- */

int wire_header_parse(const uint8_t *buf, size_t len, uint64_t group_hash, struct wire_header *out)
{
    struct wire_reader r = {buf, len, 0, 0};
    uint32_t magic = wire_get_u32(&r, "frame magic");
    out->version = wire_get_u16(&r, "frame version");
    out->type = wire_get_u16(&r, "frame type");
    out->group_hash = wire_get_u64(&r, "frame group");
    out->payload_length = wire_get_u32(&r, "frame length");
    wire_get_zero32(&r, "frame reserved");
    if (r.rc < 0)
        return r.rc;
    if (magic != WIRE_MAGIC)
        return sp_error(SPINDLE_EPROTO, "bad frame magic 0x%08x (expected 0x%08x)", magic,
                        WIRE_MAGIC);
    if (out->version != WIRE_VERSION)
        return sp_error(SPINDLE_EPROTO, "unsupported frame version %u (expected %u)", out->version,
                        WIRE_VERSION);
    if (out->group_hash != group_hash)
        return sp_error(SPINDLE_EPROTO, "frame for group hash 0x%016llx, this group is 0x%016llx",
                        (unsigned long long)out->group_hash, (unsigned long long)group_hash);
    if (out->type == 0 || out->type > WIRE_TYPE_MAX)
        return sp_error(SPINDLE_EPROTO, "unknown frame type %u", out->type);
    if (out->payload_length > WIRE_MAX_PAYLOAD)
        return sp_error(SPINDLE_EPROTO, "%s payload of %u bytes exceeds %u",
                        wire_type_name(out->type), out->payload_length, WIRE_MAX_PAYLOAD);
    return 0;
}

static void decode_join_reply(struct wire_reader *r, struct wire_join_reply *reply)
{
    memset(reply, 0, sizeof *reply);
    reply->status = wire_get_u16(r, "join status");
    uint16_t reserved = wire_get_u16(r, "join reserved");
    reply->error = (int32_t)wire_get_u32(r, "join error");
    reply->view_id = wire_get_u64(r, "join view id");
    reply->leader_id = wire_get_u32(r, "join leader id");
    reply->leader_port = wire_get_u16(r, "join leader port");
    uint16_t host_len = wire_get_u16(r, "join leader host length");
    if (r->rc < 0)
        return;
    bool rejected = reply->status == WIRE_JOIN_REJECTED;
    if (reply->status > WIRE_JOIN_REJECTED || reserved != 0 || host_len >= VIEW_HOST_MAX ||
        (reply->status == WIRE_JOIN_REDIRECT && host_len == 0) || rejected != (reply->error < 0) ||
        reply->error < SPINDLE_ERROR_MIN) {
        wire_fail(r, sp_error(SPINDLE_EPROTO,
                              "join reply: status %u, reserved %u, error %d, leader host "
                              "length %u are inconsistent",
                              reply->status, reserved, reply->error, host_len));
        return;
    }
    const uint8_t *host = wire_get_bytes(r, host_len, "join leader host");
    if (r->rc < 0)
        return;
    if (memchr(host, 0, host_len) != NULL) {
        wire_fail(r, sp_error(SPINDLE_EPROTO, "join reply: leader host contains a NUL byte"));
        return;
    }
    memcpy(reply->leader_host, host, host_len);
}

static void decode_chunk(struct wire_reader *r, struct wire_state_chunk *chunk)
{
    memset(chunk, 0, sizeof *chunk);
    chunk->view_id = wire_get_u64(r, "chunk view id");
    chunk->subgroup = wire_get_u32(r, "chunk subgroup");
    chunk->shard = wire_get_u32(r, "chunk shard");
    chunk->offset = wire_get_u64(r, "chunk offset");
    chunk->total = wire_get_u64(r, "chunk total");
    chunk->length = wire_get_u32(r, "chunk length");
    chunk->flags = wire_get_u32(r, "chunk flags");
    if (r->rc < 0)
        return;
    bool fits = chunk->offset <= chunk->total && chunk->length <= chunk->total - chunk->offset;
    bool last = fits && chunk->offset + chunk->length == chunk->total;
    if (chunk->length != wire_left(r) || !fits || (chunk->flags & ~WIRE_CHUNK_LAST) ||
        last != ((chunk->flags & WIRE_CHUNK_LAST) != 0)) {
        wire_fail(r, sp_error(SPINDLE_EPROTO,
                              "state chunk: length %u (%zu bytes follow), offset %llu, total "
                              "%llu, flags 0x%x are inconsistent",
                              chunk->length, wire_left(r), (unsigned long long)chunk->offset,
                              (unsigned long long)chunk->total, chunk->flags));
        return;
    }
    chunk->data = wire_get_bytes(r, chunk->length, "chunk data");
}

static void decode_payload(struct wire_reader *r, struct wire_msg *out)
{
    switch (out->type) {
    case WIRE_JOIN_REQUEST:
        wire_decode_member(r, &out->u.join_request.member);
        return;
    case WIRE_JOIN_REPLY:
        decode_join_reply(r, &out->u.join_reply);
        return;
    case WIRE_VIEW_PROPOSAL:
        out->u.proposal.leader_id = wire_get_u32(r, "proposal leader id");
        wire_get_zero32(r, "proposal reserved");
        out->u.proposal.prev_view_id = wire_get_u64(r, "proposal previous view id");
        if (r->rc < 0)
            return;
        wire_decode_view(r, &out->u.proposal.view);
        if (r->rc == 0 && (out->u.proposal.prev_view_id == UINT64_MAX ||
                           out->u.proposal.view.id != out->u.proposal.prev_view_id + 1)) {
            wire_fail(r, sp_error(SPINDLE_EPROTO, "proposal: view id %llu does not follow %llu",
                                  (unsigned long long)out->u.proposal.view.id,
                                  (unsigned long long)out->u.proposal.prev_view_id));
            view_clear(&out->u.proposal.view);
        }
        return;
    case WIRE_VIEW_ACK:
    case WIRE_LEAVE: {
        struct wire_member_event *event = out->type == WIRE_VIEW_ACK ? &out->u.ack : &out->u.leave;
        event->view_id = wire_get_u64(r, "event view id");
        event->member_id = wire_get_u32(r, "event member id");
        wire_get_zero32(r, "event reserved");
        return;
    }
    case WIRE_VIEW_COMMIT:
        out->u.commit.view_id = wire_get_u64(r, "commit view id");
        out->u.commit.leader_id = wire_get_u32(r, "commit leader id");
        wire_get_zero32(r, "commit reserved");
        return;
    case WIRE_TRIM_REPORT:
        wire_decode_trim(r, &out->u.trim);
        return;
    case WIRE_STATE_CHUNK:
        decode_chunk(r, &out->u.chunk);
        return;
    }
}

int wire_decode(const uint8_t *buf, size_t len, uint64_t group_hash, struct wire_msg *out)
{
    memset(out, 0, sizeof *out);
    struct wire_header header;
    int rc = wire_header_parse(buf, len, group_hash, &header);
    if (rc < 0)
        return rc;
    if (len - WIRE_HEADER_SIZE != header.payload_length)
        return sp_error(SPINDLE_EPROTO, "%s frame: header says %u payload bytes, got %zu",
                        wire_type_name(header.type), header.payload_length, len - WIRE_HEADER_SIZE);
    struct wire_reader r = {buf + WIRE_HEADER_SIZE, header.payload_length, 0, 0};
    out->type = (enum wire_type)header.type;
    decode_payload(&r, out);
    if (r.rc == 0 && r.pos != r.len)
        r.rc = sp_error(SPINDLE_EPROTO, "%s payload: %zu trailing bytes after offset %zu",
                        wire_type_name(header.type), r.len - r.pos, r.pos);
    if (r.rc < 0) {
        wire_msg_clear(out);
        return r.rc;
    }
    return 0;
}

void wire_msg_clear(struct wire_msg *msg)
{
    if (msg->type == WIRE_VIEW_PROPOSAL)
        view_clear(&msg->u.proposal.view);
    else if (msg->type == WIRE_TRIM_REPORT)
        free(msg->u.trim.entries);
    memset(msg, 0, sizeof *msg);
}
