/*
 * libFuzzer target: dds_history_query_decode and dds_history_reply_decode
 * (examples/dds/dds_sample.c), the point-to-point messages by which a
 * member that joins a volatile topic asks a member of it for the history
 * at the start of a view, and the chunks it gets back. Input: the bytes of
 * one message, read as a query and as a reply. An accepted query names a
 * topic within the limit and re-encodes to the same bytes; an accepted
 * reply has a known status, a chunk inside the input and inside its total
 * (none unless the status is OK), and re-encodes to the same bytes; a
 * refusal must be SPINDLE_EPROTO naming the history query or reply.
 */
#include "../../examples/dds/dds_impl.h"
#include "fuzz_common.h"

#define FUZZ_TOPICS 8u

static void check_query(const uint8_t *data, size_t size)
{
    struct dds_history_query query;
    int rc = dds_history_query_decode(data, size, FUZZ_TOPICS, &query);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EPROTO);
        FUZZ_CHECK(strstr(spindle_dds_errmsg(), "history query") != NULL);
        return;
    }
    FUZZ_CHECK(query.topic < FUZZ_TOPICS);
    FUZZ_CHECK(query.offset < DDS_HISTORY_MAX_BYTES);
    uint8_t again[DDS_HQUERY_SIZE];
    dds_history_query_encode(again, &query);
    fuzz_check_same_bytes(data, size, again, sizeof again);
}

static void check_reply(const uint8_t *data, size_t size)
{
    struct dds_history_reply reply;
    int rc = dds_history_reply_decode(data, size, FUZZ_TOPICS, &reply);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EPROTO);
        FUZZ_CHECK(strstr(spindle_dds_errmsg(), "history reply") != NULL);
        return;
    }
    FUZZ_CHECK(reply.topic < FUZZ_TOPICS);
    FUZZ_CHECK(reply.status <= DDS_HREPLY_INCOMPLETE);
    FUZZ_CHECK(reply.chunk >= data && reply.chunk + reply.chunk_length == data + size);
    if (reply.status == DDS_HREPLY_OK) {
        FUZZ_CHECK(reply.chunk_length > 0 && reply.offset < reply.total);
        FUZZ_CHECK(reply.chunk_length <= reply.total - reply.offset);
        FUZZ_CHECK(reply.total <= DDS_HISTORY_MAX_BYTES);
    } else {
        FUZZ_CHECK(reply.chunk_length == 0 && reply.total == 0 && reply.offset == 0);
    }
    uint8_t *again = malloc(SPINDLE_P2P_MAX_PAYLOAD);
    FUZZ_CHECK(again != NULL);
    size_t length = dds_history_reply_encode(again, &reply);
    fuzz_check_same_bytes(data, size, again, length);
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_query(data, size);
    check_reply(data, size);
    return 0;
}
