/*
 * libFuzzer target: log_snapshot_decode (src/log/log_snapshot.c), the
 * header and view record of a snapshot file, read back from a member's log
 * directory and, for a restart, possibly written by another member. The
 * input is a snapshot file's first bytes. An accepted one must name its
 * size within the input, keep its promises (a subgroup below
 * SPINDLE_MAX_SUBGROUPS, a view record of the header's view that the
 * format can hold), re-encode to the very same bytes and decode again to
 * the same snapshot; a short input must ask for more bytes than it has; a
 * refused one must be SPINDLE_EPROTO naming the offset.
 */
#include "fuzz_common.h"
#include "log/log_snapshot.h"

static uint8_t again_bytes[LOG_SNAPSHOT_HEADER_SIZE + LOG_MAX_RECORD];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct log_snapshot snap, again;
    memset(&snap, 0, sizeof snap);
    size_t used = 0;
    int rc = log_snapshot_decode(data, size, &snap, &used);
    if (rc < 0) {
        fuzz_check_wire_refusal(rc, "log snapshot");
        return 0;
    }
    if (rc == 0) {
        FUZZ_CHECK(used > size);
        return 0;
    }
    FUZZ_CHECK(rc == 1 && used <= size);
    FUZZ_CHECK(snap.subgroup < SPINDLE_MAX_SUBGROUPS && snap.view.view_id == snap.view_id);
    struct log_record record;
    memset(&record, 0, sizeof record);
    record.type = LOG_REC_VIEW;
    record.view = snap.view;
    FUZZ_CHECK(log_record_check(&record) == 0);
    size_t len = log_snapshot_encode(&snap, again_bytes, sizeof again_bytes);
    fuzz_check_same_bytes(data, used, again_bytes, len);
    memset(&again, 0, sizeof again);
    size_t again_used = 0;
    FUZZ_CHECK(log_snapshot_decode(again_bytes, len, &again, &again_used) == 1);
    FUZZ_CHECK(again_used == len);
    FUZZ_CHECK(memcmp(&snap, &again, sizeof snap) == 0);
    return 0;
}
