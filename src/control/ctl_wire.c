/* The control channel's hello and frame header (control/ctl_wire.h). */
#include "control/ctl_wire.h"

#include <string.h>

#include "util/crc32c.h"
#include "util/error.h"
#include "util/wire.h"

void ctl_wire_encode_hello(const struct ctl_hello *hello, uint8_t out[CTL_HELLO_SIZE])
{
    struct wire_writer w;
    wire_writer_init(&w, out, CTL_HELLO_SIZE);
    wire_put_header(&w, CTL_WIRE_HELLO);
    wire_put_u32(&w, CTL_HELLO_MAGIC);
    wire_put_u32(&w, hello->from);
    wire_put_u32(&w, hello->num_members);
    wire_put_u32(&w, hello->group);
    wire_put_u32(&w, hello->versions.table_layout);
    wire_put_u32(&w, hello->versions.ring_layout);
    wire_put_u64(&w, hello->admission);
    wire_put_zero(&w, 4);
}

int ctl_wire_decode_hello(const uint8_t *buf, size_t len, struct ctl_hello *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "control hello");
    memset(out, 0, sizeof *out);
    wire_get_header(&r, CTL_WIRE_HELLO);
    uint32_t magic = wire_get_u32(&r, "magic");
    if (r.rc == 0 && magic != CTL_HELLO_MAGIC) {
        r.pos -= 4;
        wire_fail(&r, "magic 0x%08x is not a libspindle hello", magic);
    }
    out->from = wire_get_u32(&r, "from");
    out->num_members = wire_get_u32(&r, "num_members");
    out->group = wire_get_u32(&r, "group");
    out->versions.table_layout = wire_get_u32(&r, "table layout version");
    out->versions.ring_layout = wire_get_u32(&r, "ring layout version");
    out->admission = wire_get_u64(&r, "admission");
    wire_get_zero(&r, 4, "reserved");
    return wire_finish(&r);
}

void ctl_wire_encode_frame(const struct ctl_frame *frame, uint8_t out[CTL_FRAME_SIZE])
{
    struct wire_writer w;
    wire_writer_init(&w, out, CTL_FRAME_SIZE);
    wire_put_header(&w, CTL_WIRE_FRAME);
    wire_put_u32(&w, frame->tag);
    wire_put_u32(&w, frame->from);
    wire_put_u32(&w, frame->length);
    wire_put_u32(&w, frame->crc);
}

int ctl_wire_decode_frame(const uint8_t *buf, size_t len, struct ctl_frame *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "control frame");
    memset(out, 0, sizeof *out);
    wire_get_header(&r, CTL_WIRE_FRAME);
    out->tag = wire_get_u32(&r, "tag");
    out->from = wire_get_u32(&r, "from");
    out->length = wire_get_u32(&r, "length");
    if (r.rc == 0 && out->length > CTL_BLOB_MAX) {
        r.pos -= 4;
        wire_fail(&r, "blob length %u exceeds %u", out->length, CTL_BLOB_MAX);
    }
    out->crc = wire_get_u32(&r, "crc32c");
    return wire_finish(&r);
}

int ctl_hello_compatible(const struct ctl_hello *peer, const struct ctl_versions *mine,
                         const char *who)
{
    if (peer->versions.table_layout != mine->table_layout)
        return sp_error(SPINDLE_EPROTO,
                        "%s runs table layout version %u, this member version %u: builds of "
                        "different layouts cannot share a group",
                        who, peer->versions.table_layout, mine->table_layout);
    if (peer->versions.ring_layout != mine->ring_layout)
        return sp_error(SPINDLE_EPROTO,
                        "%s runs ring layout version %u, this member version %u: builds of "
                        "different layouts cannot share a group",
                        who, peer->versions.ring_layout, mine->ring_layout);
    return 0;
}

uint32_t ctl_group_hash(const char *group_name)
{
    return group_name == NULL ? 0 : sp_crc32c(0, group_name, strlen(group_name));
}
