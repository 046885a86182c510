/*
 * The bytes spindle_dds puts on the wire and hands joiners: the sample
 * header at the start of every ring payload, the history state, and the
 * history queries and replies. Every decoder reads bytes another process
 * wrote, so every field is checked before use (tests/fuzz/
 * fuzz_dds_sample.c, fuzz_dds_history.c, fuzz_dds_history_query.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dds_impl.h"
#include "dds_le.h"

static __thread char dds_message[512];

void dds_error_record(const char *format, ...)
{
    /* Formatted aside first: a message may wrap the previous one. */
    char text[sizeof dds_message];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    memcpy(dds_message, text, sizeof text);
}

const char *spindle_dds_errmsg(void)
{
    return dds_message;
}

void dds_sample_header_encode(uint8_t *out, const struct spindle_dds_sample_info *info)
{
    dds_put32(out, DDS_SAMPLE_MAGIC);
    dds_put16(out + 4, DDS_SAMPLE_VERSION);
    dds_put16(out + 6, (uint16_t)info->topic);
    dds_put32(out + 8, info->writer);
    dds_put32(out + 12, info->length);
    dds_put64(out + 16, info->seq);
    dds_put64(out + 24, info->source_timestamp_ns);
}

int dds_sample_header_decode(const uint8_t *bytes, size_t size,
                             struct spindle_dds_sample_info *info)
{
    if (bytes == NULL || size < SPINDLE_DDS_SAMPLE_HEADER)
        return dds_error(SPINDLE_EPROTO, "sample of %zu bytes is shorter than its %u-byte header",
                         size, SPINDLE_DDS_SAMPLE_HEADER);
    uint32_t magic = dds_get32(bytes);
    if (magic != DDS_SAMPLE_MAGIC)
        return dds_error(SPINDLE_EPROTO, "sample header: magic 0x%08x is not 0x%08x", magic,
                         DDS_SAMPLE_MAGIC);
    uint16_t version = dds_get16(bytes + 4);
    if (version != DDS_SAMPLE_VERSION)
        return dds_error(SPINDLE_EPROTO, "sample header: version %u is not %u", version,
                         DDS_SAMPLE_VERSION);
    struct spindle_dds_sample_info out = {
        .topic = dds_get16(bytes + 6),
        .writer = dds_get32(bytes + 8),
        .length = dds_get32(bytes + 12),
        .seq = dds_get64(bytes + 16),
        .source_timestamp_ns = dds_get64(bytes + 24),
    };
    if (out.topic >= SPINDLE_DDS_MAX_TOPICS)
        return dds_error(SPINDLE_EPROTO, "sample header: topic %u is not below %u", out.topic,
                         SPINDLE_DDS_MAX_TOPICS);
    if (out.writer >= SPINDLE_DDS_MAX_PARTICIPANTS)
        return dds_error(SPINDLE_EPROTO, "sample header: writer %u is not below %u", out.writer,
                         SPINDLE_DDS_MAX_PARTICIPANTS);
    if (out.length > size - SPINDLE_DDS_SAMPLE_HEADER)
        return dds_error(SPINDLE_EPROTO, "sample header: length %u exceeds the %zu bytes after it",
                         out.length, size - SPINDLE_DDS_SAMPLE_HEADER);
    if (out.seq == 0)
        return dds_error(SPINDLE_EPROTO, "sample header: sequence number 0 (they start at 1)");
    *info = out;
    return 0;
}

int dds_history_decode(const uint8_t *bytes, size_t size, uint32_t num_topics, dds_history_fn fn,
                       void *ctx)
{
    if (bytes == NULL || size < 8)
        return dds_error(SPINDLE_EPROTO, "history state of %zu bytes is shorter than its header",
                         size);
    if (dds_get32(bytes) != DDS_HISTORY_MAGIC)
        return dds_error(SPINDLE_EPROTO, "history state: magic 0x%08x is not 0x%08x",
                         dds_get32(bytes), DDS_HISTORY_MAGIC);
    uint32_t topics = dds_get32(bytes + 4);
    if (topics > num_topics)
        return dds_error(SPINDLE_EPROTO, "history state: %u topics, the configuration has %u",
                         topics, num_topics);
    size_t at = 8;
    for (uint32_t t = 0; t < topics; t++) {
        if (size - at < 8)
            return dds_error(SPINDLE_EPROTO, "history state: topic entry %u cut short at byte %zu",
                             t, at);
        uint32_t topic = dds_get32(bytes + at), count = dds_get32(bytes + at + 4);
        at += 8;
        if (topic >= num_topics)
            return dds_error(SPINDLE_EPROTO, "history state: topic %u is not below %u", topic,
                             num_topics);
        if (count > SPINDLE_DDS_MAX_HISTORY)
            return dds_error(SPINDLE_EPROTO, "history state: topic %u holds %u samples, over %u",
                             topic, count, SPINDLE_DDS_MAX_HISTORY);
        for (uint32_t i = 0; i < count; i++) {
            if (size - at < 4)
                return dds_error(SPINDLE_EPROTO,
                                 "history state: topic %u sample %u cut short at byte %zu", topic,
                                 i, at);
            uint32_t sample_size = dds_get32(bytes + at);
            at += 4;
            if (sample_size > size - at)
                return dds_error(SPINDLE_EPROTO,
                                 "history state: topic %u sample %u of %u bytes overruns the %zu "
                                 "left",
                                 topic, i, sample_size, size - at);
            struct spindle_dds_sample_info info;
            int rc = dds_sample_header_decode(bytes + at, sample_size, &info);
            if (rc == 0 && info.topic != topic)
                rc = dds_error(SPINDLE_EPROTO,
                               "history state: a sample of topic %u in the history of topic %u",
                               info.topic, topic);
            if (rc == 0)
                rc = fn(ctx, topic, bytes + at, sample_size);
            if (rc < 0)
                return rc;
            at += sample_size;
        }
    }
    if (at != size)
        return dds_error(SPINDLE_EPROTO, "history state: %zu bytes after its last topic",
                         size - at);
    return 0;
}

int dds_fifo_init(struct dds_fifo *fifo, uint32_t capacity)
{
    memset(fifo, 0, sizeof *fifo);
    fifo->items = calloc(capacity > 0 ? capacity : 1, sizeof *fifo->items);
    if (fifo->items == NULL)
        return dds_error(SPINDLE_ENOMEM, "no memory for a queue of %u samples", capacity);
    fifo->capacity = capacity;
    return 0;
}

void dds_fifo_free(struct dds_fifo *fifo)
{
    while (fifo->count > 0)
        dds_fifo_pop(fifo);
    free(fifo->items);
    fifo->items = NULL;
}

int dds_fifo_push(struct dds_fifo *fifo, const uint8_t *bytes, size_t size, bool from_history)
{
    if (fifo->capacity == 0)
        return 0;
    uint8_t *copy = malloc(size > 0 ? size : 1);
    if (copy == NULL)
        return dds_error(SPINDLE_ENOMEM, "no memory for a sample of %zu bytes", size);
    memcpy(copy, bytes, size);
    if (fifo->count == fifo->capacity) {
        dds_fifo_pop(fifo);
        fifo->dropped++;
    }
    struct dds_kept *slot = &fifo->items[(fifo->start + fifo->count) % fifo->capacity];
    slot->bytes = copy;
    slot->size = (uint32_t)size;
    slot->from_history = from_history;
    fifo->count++;
    return 0;
}

const struct dds_kept *dds_fifo_at(const struct dds_fifo *fifo, uint32_t i)
{
    return &fifo->items[(fifo->start + i) % fifo->capacity];
}

void dds_fifo_pop(struct dds_fifo *fifo)
{
    struct dds_kept *slot = &fifo->items[fifo->start];
    free(slot->bytes);
    slot->bytes = NULL;
    fifo->start = (fifo->start + 1) % fifo->capacity;
    fifo->count--;
}

int dds_history_encode(struct dds_fifo *const *fifos, uint32_t num_topics, uint8_t **out,
                       size_t *size)
{
    size_t total = 8;
    uint32_t topics = 0;
    for (uint32_t t = 0; t < num_topics; t++) {
        if (fifos[t] == NULL)
            continue;
        topics++;
        total += 8;
        for (uint32_t i = 0; i < fifos[t]->count; i++)
            total += 4 + dds_fifo_at(fifos[t], i)->size;
    }
    uint8_t *bytes = malloc(total);
    if (bytes == NULL)
        return dds_error(SPINDLE_ENOMEM, "no memory for a history state of %zu bytes", total);
    dds_put32(bytes, DDS_HISTORY_MAGIC);
    dds_put32(bytes + 4, topics);
    size_t at = 8;
    for (uint32_t t = 0; t < num_topics; t++) {
        if (fifos[t] == NULL)
            continue;
        dds_put32(bytes + at, t);
        dds_put32(bytes + at + 4, fifos[t]->count);
        at += 8;
        for (uint32_t i = 0; i < fifos[t]->count; i++) {
            const struct dds_kept *kept = dds_fifo_at(fifos[t], i);
            dds_put32(bytes + at, kept->size);
            memcpy(bytes + at + 4, kept->bytes, kept->size);
            at += 4 + kept->size;
        }
    }
    *out = bytes;
    *size = total;
    return 0;
}

void dds_history_query_encode(uint8_t *out, const struct dds_history_query *query)
{
    dds_put32(out, DDS_HQUERY_MAGIC);
    dds_put32(out + 4, query->topic);
    dds_put64(out + 8, query->view_id);
    dds_put64(out + 16, query->offset);
}

int dds_history_query_decode(const uint8_t *bytes, size_t size, uint32_t num_topics,
                             struct dds_history_query *query)
{
    if (bytes == NULL || size != DDS_HQUERY_SIZE)
        return dds_error(SPINDLE_EPROTO, "history query of %zu bytes is not %u", size,
                         DDS_HQUERY_SIZE);
    if (dds_get32(bytes) != DDS_HQUERY_MAGIC)
        return dds_error(SPINDLE_EPROTO, "history query: magic 0x%08x is not 0x%08x",
                         dds_get32(bytes), DDS_HQUERY_MAGIC);
    struct dds_history_query out = {
        .topic = dds_get32(bytes + 4),
        .view_id = dds_get64(bytes + 8),
        .offset = dds_get64(bytes + 16),
    };
    if (out.topic >= num_topics)
        return dds_error(SPINDLE_EPROTO, "history query: topic %u is not below %u", out.topic,
                         num_topics);
    if (out.offset >= DDS_HISTORY_MAX_BYTES)
        return dds_error(SPINDLE_EPROTO, "history query: offset %llu is not below %llu",
                         (unsigned long long)out.offset, (unsigned long long)DDS_HISTORY_MAX_BYTES);
    *query = out;
    return 0;
}

size_t dds_history_reply_encode(uint8_t *out, const struct dds_history_reply *reply)
{
    dds_put32(out, DDS_HREPLY_MAGIC);
    dds_put32(out + 4, reply->status);
    dds_put32(out + 8, reply->topic);
    dds_put32(out + 12, reply->chunk_length);
    dds_put64(out + 16, reply->view_id);
    dds_put64(out + 24, reply->total);
    dds_put64(out + 32, reply->offset);
    if (reply->chunk_length > 0)
        memcpy(out + DDS_HREPLY_HEADER, reply->chunk, reply->chunk_length);
    return DDS_HREPLY_HEADER + (size_t)reply->chunk_length;
}

/* What a reply of each status may carry: a chunk inside the history only
 * with DDS_HREPLY_OK, nothing else otherwise. */
static int check_reply_fields(const struct dds_history_reply *r)
{
    if (r->status != DDS_HREPLY_OK) {
        if (r->chunk_length != 0 || r->total != 0 || r->offset != 0)
            return dds_error(SPINDLE_EPROTO,
                             "history reply: status %u carries %u bytes, total %llu, offset %llu",
                             r->status, r->chunk_length, (unsigned long long)r->total,
                             (unsigned long long)r->offset);
        return 0;
    }
    if (r->total < DDS_HISTORY_MIN_BYTES || r->total > DDS_HISTORY_MAX_BYTES)
        return dds_error(SPINDLE_EPROTO, "history reply: total %llu is outside %u..%llu",
                         (unsigned long long)r->total, DDS_HISTORY_MIN_BYTES,
                         (unsigned long long)DDS_HISTORY_MAX_BYTES);
    if (r->offset >= r->total)
        return dds_error(SPINDLE_EPROTO, "history reply: offset %llu is not below total %llu",
                         (unsigned long long)r->offset, (unsigned long long)r->total);
    if (r->chunk_length == 0 || r->chunk_length > r->total - r->offset)
        return dds_error(SPINDLE_EPROTO,
                         "history reply: chunk of %u bytes at offset %llu of %llu (1..%llu)",
                         r->chunk_length, (unsigned long long)r->offset,
                         (unsigned long long)r->total, (unsigned long long)(r->total - r->offset));
    return 0;
}

int dds_history_reply_decode(const uint8_t *bytes, size_t size, uint32_t num_topics,
                             struct dds_history_reply *reply)
{
    if (bytes == NULL || size < DDS_HREPLY_HEADER || size > SPINDLE_P2P_MAX_PAYLOAD)
        return dds_error(SPINDLE_EPROTO, "history reply of %zu bytes is outside %u..%u", size,
                         DDS_HREPLY_HEADER, SPINDLE_P2P_MAX_PAYLOAD);
    if (dds_get32(bytes) != DDS_HREPLY_MAGIC)
        return dds_error(SPINDLE_EPROTO, "history reply: magic 0x%08x is not 0x%08x",
                         dds_get32(bytes), DDS_HREPLY_MAGIC);
    struct dds_history_reply out = {
        .status = dds_get32(bytes + 4),
        .topic = dds_get32(bytes + 8),
        .chunk_length = dds_get32(bytes + 12),
        .view_id = dds_get64(bytes + 16),
        .total = dds_get64(bytes + 24),
        .offset = dds_get64(bytes + 32),
        .chunk = bytes + DDS_HREPLY_HEADER,
    };
    if (out.status > DDS_HREPLY_INCOMPLETE)
        return dds_error(SPINDLE_EPROTO, "history reply: status %u is not 0..%u", out.status,
                         DDS_HREPLY_INCOMPLETE);
    if (out.topic >= num_topics)
        return dds_error(SPINDLE_EPROTO, "history reply: topic %u is not below %u", out.topic,
                         num_topics);
    if (out.chunk_length != size - DDS_HREPLY_HEADER)
        return dds_error(SPINDLE_EPROTO, "history reply: chunk length %u, %zu bytes follow",
                         out.chunk_length, size - DDS_HREPLY_HEADER);
    int rc = check_reply_fields(&out);
    if (rc < 0)
        return rc;
    *reply = out;
    return 0;
}
