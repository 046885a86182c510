/*
 * libFuzzer target: dds_sample_header_decode (examples/dds/dds_sample.c),
 * the header of a spindle_dds sample that a publisher wrote into its ring
 * slot. Input: the whole ring payload. An accepted header must name a
 * topic and a writer within the limits, a sequence number above 0 and a
 * length within the payload, and re-encode to the input's first 32 bytes;
 * a refusal must be SPINDLE_EPROTO with a message naming the sample.
 */
#include "../../examples/dds/dds_impl.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct spindle_dds_sample_info info;
    memset(&info, 0, sizeof info);
    int rc = dds_sample_header_decode(data, size, &info);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EPROTO);
        FUZZ_CHECK(strstr(spindle_dds_errmsg(), "sample") != NULL);
        return 0;
    }
    FUZZ_CHECK(info.topic < SPINDLE_DDS_MAX_TOPICS);
    FUZZ_CHECK(info.writer < SPINDLE_DDS_MAX_PARTICIPANTS);
    FUZZ_CHECK(info.seq > 0);
    FUZZ_CHECK(info.length <= size - SPINDLE_DDS_SAMPLE_HEADER);
    uint8_t again[SPINDLE_DDS_SAMPLE_HEADER];
    dds_sample_header_encode(again, &info);
    fuzz_check_same_bytes(data, SPINDLE_DDS_SAMPLE_HEADER, again, sizeof again);
    return 0;
}
