/*
 * The replica's outbound queue (kv_server_impl.h). The event loop sends
 * its operations itself, with non-blocking reserves: a reserve outside an
 * upcall never waits for the window nor for a view change (which, at the
 * member that admits a joiner, waits for the state_save that only this
 * loop dispatches: docs/DISPATCH.md). What meets SPINDLE_EAGAIN stays
 * here, in the order it was proposed (which keeps the loop's requests in
 * flight matched in that order), and goes out on a later turn of the
 * loop: send_ready, queued once the window has room or the new view takes
 * messages, makes the group's descriptor readable and so ends the wait.
 */
#include <stdio.h>
#include <string.h>

#include "kv_server_impl.h"

/* Multicasts one operation: 0, SPINDLE_EAGAIN (keep it), or the group's
 * error. more: others follow at once (SPINDLE_RESERVE_MORE), so the
 * predicate thread is woken once for the loop's turn, not per operation. */
static int send_one(struct kv_server *server, const char *op, uint32_t len, bool more)
{
    void *slot;
    unsigned flags = SPINDLE_RESERVE_NONBLOCK | (more ? SPINDLE_RESERVE_MORE : 0u);
    int rc = spindle_reserve(server->group, server->my_shard, len, flags, &slot);
    if (rc != 0)
        return rc;
    memcpy(slot, op, len);
    return spindle_commit(server->group, server->my_shard);
}

/* A failure other than a full window or a view change: nothing more goes
 * out (the loop learns why from spindle_dispatch). */
static void stop_sending(struct kv_server *server, int rc)
{
    fprintf(stderr, "spindle-kv: replica %u: multicast failed: %s: %s\n", server->self,
            spindle_strerror(rc), spindle_errmsg());
    server->send_failed = true;
    server->outbound.len = 0;
    server->outbound_at = 0;
}

void kv_outbound_send(struct kv_server *server, const struct kv_buf *op)
{
    if (server->send_failed)
        return;
    uint32_t len = (uint32_t)op->len;
    kv_buf_append(&server->outbound, &len, sizeof len);
    kv_buf_append(&server->outbound, op->data, op->len);
}

void kv_outbound_flush(struct kv_server *server)
{
    struct kv_buf *queue = &server->outbound;
    while (queue->len > server->outbound_at) {
        uint32_t len;
        memcpy(&len, queue->data + server->outbound_at, sizeof len);
        size_t next = server->outbound_at + sizeof len + len;
        int rc = send_one(server, queue->data + server->outbound_at + sizeof len, len,
                          next < queue->len);
        if (rc == SPINDLE_EAGAIN)
            break;
        if (rc != 0) {
            stop_sending(server, rc);
            return;
        }
        server->outbound_at = next;
    }
    /* Moved up once half of it went out: each byte is moved about once. */
    if (server->outbound_at == queue->len) {
        queue->len = 0;
        server->outbound_at = 0;
    } else if (server->outbound_at > queue->len / 2) {
        memmove(queue->data, queue->data + server->outbound_at, queue->len - server->outbound_at);
        queue->len -= server->outbound_at;
        server->outbound_at = 0;
    }
}
