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

int tp_oob_join_poll(struct tp_oob *oob, int timeout_ms, void *request, size_t capacity,
                     size_t *length)
{
    if (oob == NULL || oob->vt->join_poll == NULL)
        return 0;
    return oob->vt->join_poll(oob, timeout_ms, request, capacity, length);
}

int tp_oob_join_answer(struct tp_oob *oob, const void *reply, size_t length)
{
    if (oob == NULL || oob->vt->join_answer == NULL)
        return sp_error(SPINDLE_ENOTSUP, "oob: this bootstrap channel takes no joins");
    return oob->vt->join_answer(oob, reply, length);
}

void tp_oob_add_member(struct tp_oob *oob, uint32_t id, const char *host, uint16_t port)
{
    if (oob != NULL && oob->vt->add_member != NULL)
        oob->vt->add_member(oob, id, host, port);
}

int tp_oob_collect_one(struct tp_oob *oob, uint32_t tag, uint32_t from, void *out, size_t length,
                       int timeout_ms)
{
    if (oob == NULL || out == NULL || length == 0)
        return sp_error(SPINDLE_EINVAL, "oob collect: null argument or zero length");
    if (oob->vt->collect_one == NULL)
        return sp_error(SPINDLE_ENOTSUP, "oob: this bootstrap channel takes no joins");
    return oob->vt->collect_one(oob, tag, from, out, length, timeout_ms);
}
