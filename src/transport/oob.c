/* Bootstrap exchange: dispatch to the dir or TCP variant. */
#include "transport/oob_impl.h"

#include "util/error.h"

int tp_oob_allgather(struct tp_oob *oob, uint32_t tag, const void *mine, size_t length, void *all,
                     int timeout_ms)
{
    if (oob == NULL || mine == NULL || all == NULL || length == 0)
        return sp_error(SPINDLE_EINVAL, "oob allgather: null argument or zero length");
    return oob->vt->allgather(oob, tag, mine, length, all, timeout_ms);
}

int tp_oob_publish(struct tp_oob *oob, uint32_t tag, const void *blob, size_t length, uint64_t to)
{
    if (oob == NULL || (blob == NULL && length > 0))
        return sp_error(SPINDLE_EINVAL, "oob publish: null argument");
    return oob->vt->publish(oob, tag, blob, length, to);
}

int tp_oob_collect(struct tp_oob *oob, uint32_t tag, uint64_t from, void *all, size_t length,
                   int timeout_ms, uint64_t *have)
{
    if (oob == NULL || all == NULL || length == 0)
        return sp_error(SPINDLE_EINVAL, "oob collect: null argument or zero length");
    return oob->vt->collect(oob, tag, from, all, length, timeout_ms, have);
}

void tp_oob_close(struct tp_oob *oob)
{
    if (oob != NULL)
        oob->vt->close(oob);
}
