/*
 * libFuzzer target: log_record_decode and log_segment_header_decode
 * (src/log/log_format.c), the records and segment headers read back from a
 * member's log, which opening treats as untrusted. The input is the bytes
 * of a log file from a record's start. An accepted record must name its
 * size within the input, re-encode to the very same bytes and decode again
 * to the same record; a short input must ask for more bytes than it has; a
 * refused one must be SPINDLE_EPROTO naming the offset. The same bytes are
 * tried as a segment header, which, accepted, must re-encode to itself.
 */
#include "fuzz_common.h"
#include "log/log_format.h"

static uint8_t again_bytes[LOG_MAX_RECORD];

static void check_same_record(const struct log_record *a, const struct log_record *b)
{
    FUZZ_CHECK(a->type == b->type && a->position == b->position);
    if (a->type == LOG_REC_VIEW) {
        FUZZ_CHECK(memcmp(&a->view, &b->view, sizeof a->view) == 0);
        return;
    }
    const struct log_message *x = &a->message, *y = &b->message;
    FUZZ_CHECK(x->subgroup == y->subgroup && x->sender_id == y->sender_id &&
               x->sender_index == y->sender_index && x->seq == y->seq && x->view_id == y->view_id &&
               x->length == y->length);
    FUZZ_CHECK(memcmp(x->payload, y->payload, x->length) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct log_record record, again;
    memset(&record, 0, sizeof record);
    size_t used = 0;
    int rc = log_record_decode(data, size, &record, &used);
    if (rc < 0) {
        fuzz_check_wire_refusal(rc, "log record");
    } else if (rc == 0) {
        FUZZ_CHECK(used > size && used <= LOG_MAX_RECORD);
    } else {
        FUZZ_CHECK(rc == 1 && used <= size);
        FUZZ_CHECK(log_record_check(&record) == 0);
        size_t len = log_record_encode(&record, again_bytes, sizeof again_bytes);
        fuzz_check_same_bytes(data, used, again_bytes, len);
        memset(&again, 0, sizeof again);
        size_t again_used = 0;
        FUZZ_CHECK(log_record_decode(again_bytes, len, &again, &again_used) == 1);
        FUZZ_CHECK(again_used == len);
        check_same_record(&record, &again);
    }
    uint64_t first = 0;
    rc = log_segment_header_decode(data, size, &first);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "log segment header");
        return 0;
    }
    uint8_t header[LOG_SEGMENT_HEADER_SIZE];
    log_segment_header_encode(first, header);
    fuzz_check_same_bytes(data, size, header, sizeof header);
    return 0;
}
