/* Bootstrap exchange: dispatch to the dir or TCP variant. */
#include "transport/oob_impl.h"

#include "util/error.h"

int tp_oob_allgather(struct tp_oob *oob, uint32_t tag, const void *mine, size_t length,
                     void *all, int timeout_ms)
{
    if (oob == NULL || mine == NULL || all == NULL || length == 0)
        return sp_error(SPINDLE_EINVAL, "oob allgather: null argument or zero length");
    return oob->vt->allgather(oob, tag, mine, length, all, timeout_ms);
}

void tp_oob_close(struct tp_oob *oob)
{
    if (oob != NULL)
        oob->vt->close(oob);
}
