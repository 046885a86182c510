/* What the libfabric backend can do and how far (transport.h). */
#include "transport/fabric/fabric_impl.h"

const struct tp_attr tp_fabric_attr = {
    /* A ring to an awake peer is one small message, never a system call
     * on the ringing side's critical path. */
    .caps = TP_CAP_CHEAP_DOORBELL | TP_CAP_CROSS_HOST,
    .desc_len = FAB_DESC_MAX,
    .max_write = 0, /* writes are cut into FAB_CHUNK_MAX records */
    .max_batch = 0, /* batches larger than a landing ring go out in parts */
    .max_peers = 0, /* outgoing connections are a list */
    .max_incoming = FAB_CONNS_MAX,
    .max_signaled = 0, /* completions queue up for tp_poll without bound */
    .inline_max = 0,   /* every write is staged in the connection's ring */
    .default_timeout_ms = FAB_DEFAULT_FAIL_MS,
    .failure_from = "connection errors and shutdowns, and credits held past failure_timeout_ms",
    /* A record names a region and an offset in it: peers import whole regions. */
    .slice_align = 0,
};
