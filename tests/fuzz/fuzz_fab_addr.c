/*
 * libFuzzer target: fab_addr_decode (src/transport/fabric/fabric.c), the
 * parse of a peer's libfabric address descriptor before tp_connect resolves
 * its host and port. The input is the descriptor's bytes. An accepted
 * descriptor must yield a non-empty host that fits the buffer, re-encode
 * (fab_addr_encode) to the input and decode again to the same values; a
 * refusal must be SPINDLE_EINVAL or SPINDLE_EPROTO naming the backend.
 */
#include "fuzz_common.h"
#include "transport/fabric/fabric_impl.h"

struct fab_addr {
    char host[FAB_HOST_MAX];
    uint16_t port;
    uint64_t nonce;
    uint32_t id;
};

static int decode(const struct tp_desc *desc, struct fab_addr *out)
{
    memset(out, 0, sizeof *out);
    return fab_addr_decode(desc, out->host, sizeof out->host, &out->port, &out->nonce, &out->id);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > TP_DESC_MAX)
        return 0; /* the wire carries at most TP_DESC_MAX bytes (sst_desc_decode) */
    struct tp_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.len = (uint32_t)size;
    memcpy(desc.bytes, data, size);
    struct fab_addr addr, again;
    int rc = decode(&desc, &addr);
    if (rc != 0) {
        FUZZ_CHECK(rc == SPINDLE_EINVAL || rc == SPINDLE_EPROTO);
        FUZZ_CHECK(strncmp(spindle_errmsg(), "fabric: ", 8) == 0);
        return 0;
    }
    FUZZ_CHECK(addr.host[0] != '\0' && memchr(addr.host, '\0', sizeof addr.host) != NULL);
    struct tp_desc bytes;
    memset(&bytes, 0, sizeof bytes);
    FUZZ_CHECK(fab_addr_encode(addr.host, addr.port, addr.nonce, addr.id, &bytes) == 0);
    fuzz_check_same_bytes(data, size, bytes.bytes, bytes.len);
    FUZZ_CHECK(decode(&bytes, &again) == 0);
    FUZZ_CHECK(memcmp(&addr, &again, sizeof addr) == 0);
    return 0;
}
