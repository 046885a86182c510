/*
 * Private: dispatch between the bootstrap exchange variants (oob_dir.c,
 * oob_tcp.c). Each variant embeds struct tp_oob first in its own state and
 * fills in the vtable; oob.c implements the public tp_oob_allgather and
 * tp_oob_close by dispatching through it.
 */
#ifndef SP_TRANSPORT_OOB_IMPL_H
#define SP_TRANSPORT_OOB_IMPL_H

#include "transport/oob.h"

struct tp_oob_vtable {
    int (*allgather)(struct tp_oob *oob, uint32_t tag, const void *mine, size_t length, void *all,
                     int timeout_ms);
    int (*publish)(struct tp_oob *oob, uint32_t tag, const void *blob, size_t length, uint64_t to);
    int (*collect)(struct tp_oob *oob, uint32_t tag, uint64_t from, void *all, size_t length,
                   int timeout_ms, uint64_t *have);
    void (*close)(struct tp_oob *oob);
    /* Joins (TCP only; NULL in the directory variant). */
    int (*join_poll)(struct tp_oob *oob, int timeout_ms, void *request, size_t capacity,
                     size_t *length);
    int (*join_answer)(struct tp_oob *oob, const void *reply, size_t length);
    void (*add_member)(struct tp_oob *oob, uint32_t id, const char *host, uint16_t port);
    int (*collect_one)(struct tp_oob *oob, uint32_t tag, uint32_t from, void *out, size_t length,
                       int timeout_ms);
};

struct tp_oob {
    const struct tp_oob_vtable *vt;
};

#endif
