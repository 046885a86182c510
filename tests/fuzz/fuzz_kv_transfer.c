/*
 * libFuzzer target: spindle-kv's shard state transfer (examples/kv/
 * kv_transfer.c): what a donor reads from a joiner's query, what a joiner
 * reads from a donor's reply and from a handed-over state's header, and
 * the member names of other processes that the layout places replicas by.
 * The first byte picks the decoder (0 query, 1 reply, 2 state header,
 * 3 member name); for a reply, the next 8 bytes are the offset asked for.
 * An accepted input must encode back to the same bytes (names: format
 * back to the same name); a refused one must say why.
 */
#include "fuzz_common.h"
#include "kv_transfer.h"

static void query(const uint8_t *data, size_t size)
{
    struct kv_query q;
    char error[256] = "";
    if (kv_query_decode(data, size, &q, error, sizeof error) != 0) {
        FUZZ_CHECK(error[0] != '\0');
        return;
    }
    struct kv_buf again = {0};
    kv_query_encode(&again, &q);
    FUZZ_CHECK(again.len == size && memcmp(again.data, data, size) == 0);
    kv_buf_free(&again);
}

static void reply(const uint8_t *data, size_t size)
{
    if (size < 8)
        return;
    uint64_t offset;
    memcpy(&offset, data, sizeof offset);
    struct kv_reply r;
    char error[256] = "";
    if (kv_reply_decode(data + 8, size - 8, offset, &r, error, sizeof error) != 0) {
        FUZZ_CHECK(error[0] != '\0');
        return;
    }
    FUZZ_CHECK(r.status != KV_REPLY_CHUNK ||
               (r.offset == offset && r.offset + r.chunk_len <= r.total &&
                (r.chunk_len > 0 || r.offset == r.total)));
    struct kv_buf again = {0};
    kv_reply_encode(&again, &r);
    FUZZ_CHECK(again.len == size - 8 && memcmp(again.data, data + 8, size - 8) == 0);
    kv_buf_free(&again);
}

static void state_header(const uint8_t *data, size_t size)
{
    uint32_t shard;
    char error[256] = "";
    if (kv_state_header_decode(data, size, &shard, error, sizeof error) != 0) {
        FUZZ_CHECK(error[0] != '\0');
        return;
    }
    struct kv_buf again = {0};
    kv_state_header_encode(&again, shard);
    FUZZ_CHECK(again.len == KV_STATE_HEADER && memcmp(again.data, data, KV_STATE_HEADER) == 0);
    kv_buf_free(&again);
}

static void member_name(const uint8_t *data, size_t size)
{
    char name[128], host[KV_HOST_MAX + 1], back[128];
    if (size >= sizeof name)
        return;
    memcpy(name, data, size);
    name[size] = '\0';
    uint32_t shard;
    unsigned port;
    if (!kv_member_name_parse(name, 64, &shard, host, &port))
        return;
    FUZZ_CHECK(shard < 64 && port >= 1 && port <= 65535 && host[0] != '\0');
    /* Leading zeros parse but format without them: compare parsed values. */
    FUZZ_CHECK(kv_member_name_format(back, sizeof back, shard, host, port));
    uint32_t shard2;
    unsigned port2;
    char host2[KV_HOST_MAX + 1];
    FUZZ_CHECK(kv_member_name_parse(back, 64, &shard2, host2, &port2));
    FUZZ_CHECK(shard2 == shard && port2 == port && strcmp(host2, host) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    switch (data[0] % 4) {
    case 0:
        query(data + 1, size - 1);
        break;
    case 1:
        reply(data + 1, size - 1);
        break;
    case 2:
        state_header(data + 1, size - 1);
        break;
    default:
        member_name(data + 1, size - 1);
        break;
    }
    return 0;
}
