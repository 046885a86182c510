/*
 * libFuzzer target: dds_client_frame_open (examples/dds/dds_client_seal.c),
 * the sealed frames of spindle_dds's external client protocol with a group
 * key, as a member opens a client's (docs/DDS.md "External clients").
 * Input: a stream of frames, each its length field first, opened in turn
 * by one member's end (fuzz_dds_seal_keys.h) until one is refused, as the
 * listener closes the connection then. A refusal must be SPINDLE_EPROTO
 * with a message naming the client protocol's sealed frame, the receive
 * counter unchanged; an opened frame must advance the counter by one, and
 * when its body decodes, sealing it again under the same counter must
 * give the very bytes that came (nothing but the sealer makes a frame
 * that opens).
 */
#include "../../examples/dds/dds_impl.h"
#include "fuzz_common.h"
#include "fuzz_dds_seal_keys.h"

static uint8_t frame_bytes[4 + DDS_CLIENT_MAX_FRAME];
static uint8_t again[4 + DDS_CLIENT_MAX_FRAME];

/* One frame of the stream (4 + length bytes at data): false when refused. */
static bool open_one(struct dds_client_seal *member, const uint8_t *data, uint32_t length)
{
    memcpy(frame_bytes, data, 4u + length);
    uint64_t rx_seq = member->rx_seq;
    uint8_t *body;
    size_t body_size;
    int rc = dds_client_frame_open(member, frame_bytes + 4, length, &body, &body_size);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EPROTO);
        FUZZ_CHECK(strstr(spindle_dds_errmsg(), "client protocol: ") != NULL);
        FUZZ_CHECK(strstr(spindle_dds_errmsg(), "sealed frame") != NULL);
        FUZZ_CHECK(member->rx_seq == rx_seq);
        return false;
    }
    FUZZ_CHECK(member->rx_seq == rx_seq + 1);
    FUZZ_CHECK(body == frame_bytes + 4 + 8 && body_size + DDS_CLIENT_SEAL_OVERHEAD == length);
    struct dds_client_frame frame;
    if (dds_client_frame_decode(body, body_size, &frame) != 0) {
        FUZZ_CHECK(strstr(spindle_dds_errmsg(), "client protocol") != NULL);
        return true;
    }
    struct dds_client_seal client, unused;
    fuzz_dds_seals(&client, &unused);
    client.tx_seq = rx_seq;
    size_t n = dds_client_frame_seal(&client, again, sizeof again, &frame);
    fuzz_check_same_bytes(data, 4u + length, again, n);
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dds_client_seal client, member;
    fuzz_dds_seals(&client, &member);
    size_t at = 0;
    while (size - at >= 4) {
        uint32_t length = dds_client_frame_length(data + at);
        if (length == 0 || size - at - 4 < length)
            break; /* the listener refuses the length, or waits for the rest */
        if (!open_one(&member, data + at, length))
            break;
        at += 4u + length;
    }
    return 0;
}
