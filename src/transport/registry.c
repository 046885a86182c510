/*
 * Backend registry: maps a name to a compiled-in ops table, and refuses a
 * table that lacks an entry or whose limits make no sense, naming it.
 */
#include <stdio.h>
#include <string.h>

#include "transport/transport.h"
#include "util/error.h"

#ifdef SPINDLE_HAVE_SHM
extern const struct tp_ops tp_shm_ops;
#endif
#ifdef SPINDLE_HAVE_FABRIC
extern const struct tp_ops tp_fabric_ops;
#endif
#ifdef SPINDLE_HAVE_VERBS
extern const struct tp_ops tp_verbs_ops;
#endif

static const struct tp_ops *const backends[] = {
#ifdef SPINDLE_HAVE_SHM
    &tp_shm_ops,
#endif
#ifdef SPINDLE_HAVE_FABRIC
    &tp_fabric_ops,
#endif
#ifdef SPINDLE_HAVE_VERBS
    &tp_verbs_ops,
#endif
};

int tp_backend_check(const struct tp_ops *ops)
{
    if (ops == NULL || ops->name == NULL || ops->name[0] == '\0')
        return sp_error(SPINDLE_EINVAL, "transport backend without a name");
        /* Every entry, in table order, named in the message when missing. */
#define TP_REQUIRE(entry)                                                                          \
    if (ops->entry == NULL)                                                                        \
        return sp_error(SPINDLE_EINVAL, "transport '%s' lacks the '%s' operation", ops->name,      \
                        #entry);
    TP_REQUIRE(open)
    TP_REQUIRE(close)
    TP_REQUIRE(address)
    TP_REQUIRE(mr_alloc)
    TP_REQUIRE(mr_free)
    TP_REQUIRE(mr_export)
    TP_REQUIRE(connect)
    TP_REQUIRE(disconnect)
    TP_REQUIRE(rmr_import)
    TP_REQUIRE(rmr_import_slice)
    TP_REQUIRE(rmr_release)
    TP_REQUIRE(post_writes)
    TP_REQUIRE(poll)
    TP_REQUIRE(peer_state)
    TP_REQUIRE(doorbell_ring)
    TP_REQUIRE(doorbell_ring_self)
    TP_REQUIRE(doorbell_arm)
    TP_REQUIRE(doorbell_wait)
    TP_REQUIRE(stats)
#undef TP_REQUIRE
    const struct tp_attr *attr = ops->attr;
    if (attr == NULL)
        return sp_error(SPINDLE_EINVAL, "transport '%s' has no attribute table", ops->name);
    if (attr->desc_len == 0 || attr->desc_len > TP_DESC_MAX)
        return sp_error(SPINDLE_EINVAL, "transport '%s': descriptors of %u bytes (1..%u)",
                        ops->name, attr->desc_len, TP_DESC_MAX);
    if ((attr->slice_align & (attr->slice_align - 1)) != 0)
        return sp_error(SPINDLE_EINVAL, "transport '%s': slice alignment %u is not a power of two",
                        ops->name, attr->slice_align);
    if (attr->default_timeout_ms <= 0 || attr->failure_from == NULL)
        return sp_error(SPINDLE_EINVAL,
                        "transport '%s': a default failure timeout of %d ms, and how failures "
                        "are noticed, must be given",
                        ops->name, attr->default_timeout_ms);
    return 0;
}

const struct tp_ops *tp_backend_find(const char *name)
{
    size_t count = sizeof backends / sizeof backends[0];
    if (count == 0) {
        (void)sp_error(SPINDLE_ENOTSUP, "no transport backend is built");
        return NULL;
    }
    if (name == NULL || name[0] == '\0')
        name = backends[0]->name;
    char available[128] = "";
    for (size_t i = 0; i < count; i++) {
        if (strcmp(backends[i]->name, name) == 0) {
            if (tp_backend_check(backends[i]) < 0) {
                (void)sp_error(SPINDLE_ENOTSUP, "%s", spindle_errmsg());
                return NULL;
            }
            return backends[i];
        }
        size_t used = strlen(available);
        snprintf(available + used, sizeof available - used, "%s%s", i > 0 ? ", " : "",
                 backends[i]->name);
    }
    (void)sp_error(SPINDLE_ENOTSUP, "transport '%s' is unknown or not built (available: %s)", name,
                   available);
    return NULL;
}

int tp_open(const struct tp_config *config, struct tp_endpoint **out)
{
    const struct tp_ops *ops = tp_backend_find(config != NULL ? config->backend : NULL);
    if (ops == NULL)
        return SPINDLE_ENOTSUP;
    int rc = ops->open(config, out);
    if (rc == 0 && (*out == NULL || (*out)->ops != ops)) {
        if (*out != NULL)
            ops->close(*out);
        return sp_error(SPINDLE_EIO, "transport '%s' opened an endpoint without its table",
                        ops->name);
    }
    return rc;
}

int tp_slice_check(const char *backend, uint64_t offset, uint64_t length, uint64_t region_length,
                   uint32_t align)
{
    bool aligned = align == 0 || (offset % align == 0 && length % align == 0);
    if (length == 0 || offset > region_length || length > region_length - offset || !aligned)
        return sp_error(SPINDLE_EINVAL,
                        "%s: slice of %llu bytes at offset %llu is not a part of the %llu-byte "
                        "region aligned to %u bytes",
                        backend, (unsigned long long)length, (unsigned long long)offset,
                        (unsigned long long)region_length, align);
    return 0;
}
