/* What the rdma-core verbs backend can do and how far (transport.h). */
#include "transport/verbs/verbs_impl.h"

const struct tp_attr tp_verbs_attr = {
    /* Ringing is a zero-length write with immediate data: a work request,
     * not free, so callers ring only peers that announced they sleep.
     * ODP registration (TP_MR_NONPINNED) is used when the device has RC ODP
     * with remote write, probed at open. */
    .caps = TP_CAP_NONPINNED | TP_CAP_CROSS_HOST,
    .desc_len = VB_DESC_MAX,
    .max_write = 0, /* one work request per write; the device's max_msg_sz is the bound */
    /* Contiguous writes merge into one request; a batch needing more than
     * this many requests is refused (it could never fit the send queue). */
    .max_batch = VB_BATCH_MAX_WRS,
    .max_peers = VB_PEERS_MAX,
    .max_incoming = VB_INCOMING_MAX,
    .max_signaled = VB_SQ_DEPTH, /* per queue pair, with the unsignaled ones */
    .inline_max = VB_MAX_INLINE,
    .default_timeout_ms = VB_DEFAULT_TIMEOUT,
    .failure_from = "error completions and RDMA CM disconnects",
    /* One rkey covers a region: peers import whole regions. */
    .slice_align = 0,
};
