/*
 * The libfabric backend's own messages between peers (fabric_impl.h), in
 * the one wire codec: control messages on a connection, and the private
 * data of a connection request and of its accept. Each starts with its
 * magic; what follows is fixed, and every reserved byte is zero. The MAC
 * that ends a request or an accept is checked by fabric_auth.c, not here.
 */
#include <string.h>

#include "transport/fabric/fabric_impl.h"
#include "util/error.h"
#include "util/wire.h"

/* Fails r unless the message is exactly `size` bytes. */
static void check_length(struct wire_reader *r, size_t size)
{
    if (r->len != size)
        wire_fail(r, "%zu bytes, not %zu", r->len, size);
}

static void check_magic(struct wire_reader *r, uint32_t want)
{
    size_t at = r->pos;
    uint32_t magic = wire_get_u32(r, "magic");
    if (r->rc == 0 && magic != want) {
        r->pos = at;
        wire_fail(r, "magic 0x%08x, not 0x%08x", magic, want);
    }
}

/* The MAC that ends a request or an accept: opaque bytes here. */
static void get_mac(struct wire_reader *r, uint8_t mac[FAB_MAC_BYTES])
{
    memset(mac, 0, FAB_MAC_BYTES);
    if (wire_left(r) < FAB_MAC_BYTES) {
        wire_fail(r, "no room for the %u-byte MAC", FAB_MAC_BYTES);
        return;
    }
    memcpy(mac, r->buf + r->pos, FAB_MAC_BYTES);
    r->pos += FAB_MAC_BYTES;
}

void fab_msg_encode(const struct fab_msg *msg, uint8_t out[FAB_MSG_WIRE])
{
    struct wire_writer w;
    wire_writer_init(&w, out, FAB_MSG_WIRE);
    wire_put_u32(&w, FAB_MSG_MAGIC);
    wire_put_u32(&w, msg->kind);
    wire_put_u64(&w, msg->value);
}

int fab_msg_decode(const uint8_t *buf, size_t len, struct fab_msg *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "fabric control message");
    check_length(&r, FAB_MSG_WIRE);
    check_magic(&r, FAB_MSG_MAGIC);
    size_t at = r.pos;
    out->magic = FAB_MSG_MAGIC;
    out->kind = wire_get_u32(&r, "kind");
    if (r.rc == 0 && out->kind != FAB_MSG_CREDIT && out->kind != FAB_MSG_DOORBELL &&
        out->kind != FAB_MSG_BYE) {
        r.pos = at;
        wire_fail(&r, "unknown kind %u", out->kind);
    }
    out->value = wire_get_u64(&r, "value");
    /* Only a credit return carries a value. */
    if (r.rc == 0 && out->kind != FAB_MSG_CREDIT && out->value != 0) {
        r.pos = at + 4;
        wire_fail(&r, "value %llu on a message of kind %u", (unsigned long long)out->value,
                  out->kind);
    }
    return wire_finish(&r);
}

void fab_req_encode(const struct fab_req_data *req, uint8_t out[FAB_REQ_WIRE])
{
    struct wire_writer w;
    wire_writer_init(&w, out, FAB_REQ_WIRE);
    wire_put_u32(&w, FAB_REQ_MAGIC);
    wire_put_u32(&w, req->src_id);
    wire_put_u64(&w, req->dst_nonce);
    wire_put_u64(&w, req->src_nonce);
    wire_put_u64(&w, req->conn_nonce);
    wire_put_bytes(&w, req->mac, FAB_MAC_BYTES);
}

int fab_req_decode(const uint8_t *buf, size_t len, struct fab_req_data *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "fabric connection request");
    check_length(&r, FAB_REQ_WIRE);
    check_magic(&r, FAB_REQ_MAGIC);
    out->magic = FAB_REQ_MAGIC;
    out->src_id = wire_get_u32(&r, "member id");
    out->dst_nonce = wire_get_u64(&r, "listener nonce");
    out->src_nonce = wire_get_u64(&r, "connector nonce");
    out->conn_nonce = wire_get_u64(&r, "request nonce");
    get_mac(&r, out->mac);
    return wire_finish(&r);
}

void fab_acc_encode(const struct fab_acc_data *acc, uint8_t out[FAB_ACC_WIRE])
{
    struct wire_writer w;
    wire_writer_init(&w, out, FAB_ACC_WIRE);
    wire_put_u32(&w, FAB_ACC_MAGIC);
    wire_put_u32(&w, acc->conn_index);
    wire_put_u64(&w, acc->ring_addr);
    wire_put_u64(&w, acc->ring_key);
    wire_put_u32(&w, acc->ring_size);
    wire_put_zero(&w, 4);
    wire_put_bytes(&w, acc->mac, FAB_MAC_BYTES);
}

int fab_acc_decode(const uint8_t *buf, size_t len, struct fab_acc_data *out)
{
    struct wire_reader r;
    wire_reader_init(&r, buf, len, "fabric accept");
    check_length(&r, FAB_ACC_WIRE);
    check_magic(&r, FAB_ACC_MAGIC);
    out->magic = FAB_ACC_MAGIC;
    out->conn_index = wire_get_u32(&r, "connection index");
    out->ring_addr = wire_get_u64(&r, "ring address");
    out->ring_key = wire_get_u64(&r, "ring key");
    size_t at = r.pos;
    out->ring_size = wire_get_u32(&r, "ring size");
    if (r.rc == 0 && out->ring_size != FAB_RING_SIZE) {
        r.pos = at;
        wire_fail(&r, "ring size %u, this build uses %u", out->ring_size, FAB_RING_SIZE);
    }
    wire_get_zero(&r, 4, "pad");
    get_mac(&r, out->mac);
    return wire_finish(&r);
}
