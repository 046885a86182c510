/*
 * Private to src/control: dispatch between the two variants of the
 * channel (ctl_dir.c; ctl_tcp_*.c). Each variant embeds struct ctl first
 * in its own state and fills in the vtable; ctl.c implements the ctl_*
 * calls of control/ctl.h by dispatching through it. The join entries are
 * NULL in the directory variant.
 */
#ifndef SP_CONTROL_CTL_IMPL_H
#define SP_CONTROL_CTL_IMPL_H

#include "control/ctl.h"

struct ctl_vtable {
    int (*allgather)(struct ctl *ctl, uint32_t tag, const void *mine, size_t length, void *all,
                     int timeout_ms);
    int (*publish)(struct ctl *ctl, uint32_t tag, const void *blob, size_t length, uint64_t to);
    int (*collect)(struct ctl *ctl, uint32_t tag, uint64_t from, void *all, size_t length,
                   int timeout_ms, uint64_t *have);
    void (*close)(struct ctl *ctl);
    /* Joins (TCP only; NULL in the directory variant). */
    int (*join_poll)(struct ctl *ctl, int timeout_ms, void *request, size_t capacity,
                     size_t *length);
    int (*join_answer)(struct ctl *ctl, const void *reply, size_t length);
    void (*add_member)(struct ctl *ctl, uint32_t id, const char *host, uint16_t port);
    void (*remove_member)(struct ctl *ctl, uint32_t id);
    void (*expect_member)(struct ctl *ctl, uint32_t id, uint64_t admission);
    int (*collect_one)(struct ctl *ctl, uint32_t tag, uint32_t from, void *out, size_t length,
                       int timeout_ms);
    int (*take_one)(struct ctl *ctl, uint32_t tag, uint32_t from, void *out, size_t capacity,
                    size_t *length, int timeout_ms);
    /* Key rotation (TCP only; NULL in the directory variant). */
    int (*set_keys)(struct ctl *ctl, const struct ctl_keyring *keys);
};

struct ctl {
    const struct ctl_vtable *vt;
};

#endif
