/*
 * libFuzzer target: dds_client_frame_decode (examples/dds/dds_client_wire.c),
 * a frame of spindle_dds's external client protocol, which a member reads
 * from a client and a client from a member (docs/DDS.md "External
 * clients"). Input: a frame's bytes after its length field. An accepted
 * frame must keep its fields within the limits (topic, writer, a sequence
 * number above 0 where it has one, a data length within the input) and
 * re-encode to the same bytes; a refusal must be SPINDLE_EPROTO with a
 * message naming the client protocol.
 */
#include "../../examples/dds/dds_client_wire.h"
#include "../../examples/dds/dds_impl.h"
#include "fuzz_common.h"

static uint8_t again[4 + DDS_CLIENT_MAX_FRAME];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dds_client_frame frame;
    int rc = dds_client_frame_decode(data, size, &frame);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EPROTO);
        FUZZ_CHECK(strstr(spindle_dds_errmsg(), "client protocol") != NULL);
        return 0;
    }
    FUZZ_CHECK(frame.topic < SPINDLE_DDS_MAX_TOPICS);
    FUZZ_CHECK(frame.length <= size);
    if (frame.type == DDS_CLIENT_SAMPLE || frame.type == DDS_CLIENT_PUBLISHED) {
        FUZZ_CHECK(frame.id < SPINDLE_DDS_MAX_PARTICIPANTS);
        FUZZ_CHECK(frame.seq > 0);
    }
    if (frame.data != NULL)
        FUZZ_CHECK(frame.data >= data && frame.data + frame.length == data + size);
    size_t n = dds_client_frame_encode(again, sizeof again, &frame);
    FUZZ_CHECK(n == 4 + size);
    FUZZ_CHECK(dds_client_frame_length(again) == size);
    fuzz_check_same_bytes(data, size, again + 4, n - 4);
    return 0;
}
