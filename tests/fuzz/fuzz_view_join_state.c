/*
 * libFuzzer target: view_wire_decode_join_chunk,
 * view_wire_decode_join_state_ack and view_wire_decode_join_log_ends
 * (src/view/view_wire.c), a joiner's state in chunks, the joiner's
 * acknowledgements, which the leader paces the stream by, and where a
 * logged joiner's log ends, which the leader plans its catch-up by. Each
 * input goes to every decoder (their headers differ, so at most one
 * accepts). Accepted ends must name subgroups in range and increasing and
 * points before the view joined. An
 * accepted chunk must carry at most VIEW_STATE_CHUNK bytes, exactly the
 * bytes after its header, end below 2^64, carry none when it reports a
 * failure; an accepted message must re-encode to the input and decode
 * again to the same; a refused one must be SPINDLE_EPROTO naming the
 * offset.
 */
#include "fuzz_common.h"
#include "view/view_wire.h"

static uint8_t bytes[VIEW_WIRE_JOIN_CHUNK_MAX_SIZE];

static void chunk(const uint8_t *data, size_t size)
{
    struct view_join_chunk c, again;
    int rc = view_wire_decode_join_chunk(data, size, &c);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "state chunk");
        return;
    }
    FUZZ_CHECK(c.length <= VIEW_STATE_CHUNK);
    FUZZ_CHECK(size == VIEW_WIRE_JOIN_CHUNK_HEADER_SIZE + c.length);
    FUZZ_CHECK(c.data == data + VIEW_WIRE_JOIN_CHUNK_HEADER_SIZE);
    FUZZ_CHECK(c.offset <= UINT64_MAX - c.length);
    FUZZ_CHECK(c.error <= 0 && (c.error == 0 || (c.length == 0 && c.last)));
    size_t len = view_wire_encode_join_chunk(&c, bytes, sizeof bytes);
    fuzz_check_same_bytes(data, size, bytes, len);
    FUZZ_CHECK(view_wire_decode_join_chunk(bytes, len, &again) == 0);
    FUZZ_CHECK(again.view_id == c.view_id && again.offset == c.offset && again.length == c.length &&
               again.last == c.last && again.error == c.error);
}

static void ack(const uint8_t *data, size_t size)
{
    struct view_join_state_ack a, again;
    int rc = view_wire_decode_join_state_ack(data, size, &a);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "state acknowledgement");
        return;
    }
    FUZZ_CHECK(a.error <= 0);
    size_t len = view_wire_encode_join_state_ack(&a, bytes, sizeof bytes);
    FUZZ_CHECK(len == VIEW_WIRE_JOIN_STATE_ACK_SIZE);
    fuzz_check_same_bytes(data, size, bytes, len);
    FUZZ_CHECK(view_wire_decode_join_state_ack(bytes, len, &again) == 0);
    FUZZ_CHECK(memcmp(&a, &again, sizeof a) == 0);
}

static void log_ends(const uint8_t *data, size_t size)
{
    static struct view_join_log_ends e, again;
    int rc = view_wire_decode_join_log_ends(data, size, &e);
    if (rc != 0) {
        fuzz_check_wire_refusal(rc, "log ends");
        return;
    }
    FUZZ_CHECK(e.count <= SPINDLE_MAX_SUBGROUPS && e.next_view <= e.join_view);
    for (uint32_t i = 0; i < e.count; i++) {
        FUZZ_CHECK(e.ends[i].subgroup < SPINDLE_MAX_SUBGROUPS);
        FUZZ_CHECK(i == 0 || e.ends[i].subgroup > e.ends[i - 1].subgroup);
        FUZZ_CHECK(e.ends[i].view_id < e.join_view);
    }
    size_t len = view_wire_encode_join_log_ends(&e, bytes, sizeof bytes);
    FUZZ_CHECK(len == VIEW_WIRE_JOIN_LOG_ENDS_SIZE(e.count));
    fuzz_check_same_bytes(data, size, bytes, len);
    FUZZ_CHECK(view_wire_decode_join_log_ends(bytes, len, &again) == 0);
    FUZZ_CHECK(memcmp(&e, &again, sizeof e) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    chunk(data, size);
    ack(data, size);
    log_ends(data, size);
    return 0;
}
