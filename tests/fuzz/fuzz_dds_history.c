/*
 * libFuzzer target: dds_history_decode (examples/dds/dds_sample.c), the
 * history state of volatile and logged topics that a joiner receives from
 * the member admitting it. Input: the state. Every sample handed to the
 * callback must lie inside the input and carry a valid header of its
 * topic; an accepted state must re-encode (through the fifos the joiner
 * fills) to the very same bytes; a refusal must be SPINDLE_EPROTO naming
 * the history state or the sample.
 */
#include "../../examples/dds/dds_impl.h"
#include "fuzz_common.h"

#define FUZZ_TOPICS 8u

struct gathered {
    const uint8_t *input;
    size_t size;
    struct dds_fifo fifos[FUZZ_TOPICS];
    bool seen[FUZZ_TOPICS];
};

static int gather(void *ctx, uint32_t topic, const uint8_t *payload, size_t size)
{
    struct gathered *g = ctx;
    FUZZ_CHECK(topic < FUZZ_TOPICS);
    FUZZ_CHECK(payload >= g->input && payload + size <= g->input + g->size);
    struct spindle_dds_sample_info info;
    FUZZ_CHECK(dds_sample_header_decode(payload, size, &info) == 0);
    FUZZ_CHECK(info.topic == topic);
    /* Unbounded here, so that the re-encoding holds every sample. */
    struct dds_fifo *fifo = &g->fifos[topic];
    if (fifo->count == fifo->capacity) {
        struct dds_fifo bigger;
        FUZZ_CHECK(dds_fifo_init(&bigger, fifo->capacity * 2 + 1) == 0);
        for (uint32_t i = 0; i < fifo->count; i++) {
            const struct dds_kept *kept = dds_fifo_at(fifo, i);
            FUZZ_CHECK(dds_fifo_push(&bigger, kept->bytes, kept->size, true) == 0);
        }
        dds_fifo_free(fifo);
        *fifo = bigger;
    }
    FUZZ_CHECK(dds_fifo_push(fifo, payload, size, true) == 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gathered g = {.input = data, .size = size};
    for (uint32_t t = 0; t < FUZZ_TOPICS; t++)
        FUZZ_CHECK(dds_fifo_init(&g.fifos[t], 0) == 0);
    int rc = dds_history_decode(data, size, FUZZ_TOPICS, gather, &g);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EPROTO);
        const char *msg = spindle_dds_errmsg();
        FUZZ_CHECK(strstr(msg, "history state") != NULL || strstr(msg, "sample") != NULL);
    } else {
        /* Which topics the state listed, in its order: re-encode the same. */
        uint32_t topics = 0;
        memcpy(&topics, data + 4, 4);
        size_t at = 8;
        struct dds_fifo *order[FUZZ_TOPICS] = {NULL};
        bool ascending = true;
        uint32_t last = 0;
        for (uint32_t i = 0; i < topics; i++) {
            uint32_t topic, count;
            memcpy(&topic, data + at, 4);
            memcpy(&count, data + at + 4, 4);
            if (i > 0 && topic <= last)
                ascending = false;
            last = topic;
            if (order[topic] != NULL)
                ascending = false;
            order[topic] = &g.fifos[topic];
            at += 8;
            for (uint32_t s = 0; s < count; s++) {
                uint32_t n;
                memcpy(&n, data + at, 4);
                at += 4 + n;
            }
        }
        FUZZ_CHECK(at == size);
        if (ascending) { /* the encoder writes topics in ascending order, each once */
            uint8_t *again;
            size_t again_len;
            FUZZ_CHECK(dds_history_encode(order, FUZZ_TOPICS, &again, &again_len) == 0);
            fuzz_check_same_bytes(data, size, again, again_len);
            free(again);
        }
    }
    for (uint32_t t = 0; t < FUZZ_TOPICS; t++)
        dds_fifo_free(&g.fifos[t]);
    return 0;
}
