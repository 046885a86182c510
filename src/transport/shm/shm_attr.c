/* What the shared-memory backend can do and how far (transport.h). */
#include "transport/shm/shm_impl.h"

const struct tp_attr tp_shm_attr = {
    /* A ring is an atomic add and, only for a sleeper, a futex wake. */
    .caps = TP_CAP_CHEAP_DOORBELL,
    .desc_len = SHM_DESC_LEN,
    .max_write = 0,    /* a copy loop: bounded by the target region only */
    .max_batch = 0,    /* writes complete synchronously, no queue to fill */
    .max_peers = 0,    /* one mapping and one pidfd per peer */
    .max_incoming = 0, /* peers map our memory; nothing to accept */
    /* Completions wait in a queue for tp_poll; a post that would overflow
     * it is refused with SPINDLE_EAGAIN. */
    .max_signaled = SHM_EVENTS_MAX - SHM_FAILURE_SLOTS,
    .inline_max = 0,
    .default_timeout_ms = SHM_DEFAULT_MS,
    .failure_from = "the peer process's pidfd: its exit is seen at the next poll",
    /* A slice is mapped alone: its pages are all a peer maps of the region. */
    .slice_align = SHM_SLICE_ALIGN,
};
