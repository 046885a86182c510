/*
 * The control channel's own framing, in the one wire codec (util/wire.h).
 *
 * hello (CTL_HELLO_SIZE bytes), sent by both ends when a TCP connection
 * opens (the dialer first, then the acceptor answers with its own):
 *   header  u16 type CTL_WIRE_HELLO, u16 version WIRE_VERSION
 *   u32 magic         CTL_HELLO_MAGIC
 *   u32 from          the sender's member id, or CTL_JOIN_FROM for a
 *                     process that asks to join
 *   u32 num_members   the group's initial member count (0 from a joiner
 *                     that does not know it yet)
 *   u32 group         crc32c of the group name (0: any group, join only)
 *   u32 table_layout  the sender's SST layout version
 *   u32 ring_layout   the sender's ring layout version
 *   u64 admission     the admission that gave the sender its member id:
 *                     0 for the members that started the group; a joiner's
 *                     grows over the group's life (view_join_leader.c), so
 *                     a later holder of a reused id replaces an earlier one
 *   u32 reserved      0
 *
 * frame header (CTL_FRAME_SIZE bytes), before every blob:
 *   header  u16 type CTL_WIRE_FRAME, u16 version WIRE_VERSION
 *   u32 tag, u32 from, u32 length (<= CTL_BLOB_MAX), u32 crc32c of the blob
 *
 * Decoders are strict (util/wire.h) and name what was wrong; they are
 * libFuzzer targets (tests/fuzz). Thread-safety: pure functions.
 */
#ifndef SP_CONTROL_CTL_WIRE_H
#define SP_CONTROL_CTL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "control/ctl.h"

#define CTL_WIRE_HELLO  0x4301u
#define CTL_WIRE_FRAME  0x4302u
#define CTL_HELLO_MAGIC 0x484f5053u /* "SPOH" */
#define CTL_HELLO_SIZE  40u
#define CTL_FRAME_SIZE  20u
/* Hello "from" of a join request connection. */
#define CTL_JOIN_FROM 0xffffffffu

struct ctl_hello {
    uint32_t from;
    uint32_t num_members;
    uint32_t group;
    struct ctl_versions versions;
    uint64_t admission;
};

struct ctl_frame {
    uint32_t tag;
    uint32_t from;
    uint32_t length;
    uint32_t crc;
};

/* Encode into exactly CTL_HELLO_SIZE / CTL_FRAME_SIZE bytes. */
void ctl_wire_encode_hello(const struct ctl_hello *hello, uint8_t out[CTL_HELLO_SIZE]);
void ctl_wire_encode_frame(const struct ctl_frame *frame, uint8_t out[CTL_FRAME_SIZE]);
/* Decode len bytes. SPINDLE_EPROTO naming the field and value for a
 * message of another type, wire version, magic, length or with nonzero
 * reserved bytes; for a frame, also a length above CTL_BLOB_MAX. */
int ctl_wire_decode_hello(const uint8_t *buf, size_t len, struct ctl_hello *out);
int ctl_wire_decode_frame(const uint8_t *buf, size_t len, struct ctl_frame *out);

/* 0 when a peer's hello speaks this build's layouts; otherwise
 * SPINDLE_EPROTO naming `who`, the layout, its version and ours. */
int ctl_hello_compatible(const struct ctl_hello *peer, const struct ctl_versions *mine,
                         const char *who);

/* crc32c of a group name, as hellos carry it (0 for NULL). */
uint32_t ctl_group_hash(const char *group_name);

#endif
