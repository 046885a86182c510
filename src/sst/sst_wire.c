/* Table descriptors in the wire codec (sst/sst.h, util/wire.h). */
#include <string.h>

#include "sst/sst.h"
#include "util/wire.h"

void sst_desc_encode(struct wire_writer *w, const struct sst_member_desc *desc)
{
    wire_put_blob(w, desc->address.bytes, desc->address.len, TP_DESC_MAX);
    wire_put_blob(w, desc->region.bytes, desc->region.len, TP_DESC_MAX);
    wire_put_blob(w, desc->side.bytes, desc->side.len, TP_DESC_MAX);
}

void sst_desc_decode(struct wire_reader *r, struct sst_member_desc *desc)
{
    memset(desc, 0, sizeof *desc);
    wire_get_blob(r, desc->address.bytes, &desc->address.len, TP_DESC_MAX, "endpoint address");
    wire_get_blob(r, desc->region.bytes, &desc->region.len, TP_DESC_MAX, "table region");
    wire_get_blob(r, desc->side.bytes, &desc->side.len, TP_DESC_MAX, "side region");
}
