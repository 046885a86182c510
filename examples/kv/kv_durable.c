/* Logged shards of the replica (kv_server_impl.h): replies held until
 * their operation is persistent at every replica of the shard, the replay
 * of the log at a restart, and snapshots that keep the log bounded
 * (docs/LOGS.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kv_server_impl.h"

/* Operations between two snapshots of the store into the log: at least
 * this many, and at least twice the keys the store holds, so the cost of
 * encoding and writing the store stays a bounded share of each
 * operation's however large the store grows, while the log stays within
 * a small multiple of the store's size. */
#define KV_SNAPSHOT_EVERY 50000u

void kv_hold_reply(struct kv_server *server, uint64_t view_id, uint64_t seq, int fd,
                   uint64_t conn_id, uint64_t slot, const struct kv_buf *reply)
{
    if (server->held_count == server->held_cap) {
        size_t cap = server->held_cap < 64 ? 64 : server->held_cap * 2;
        struct kv_held *grown = malloc(cap * sizeof *grown);
        if (grown == NULL) {
            fprintf(stderr, "spindle-kv: out of memory for %zu held replies\n", cap);
            abort();
        }
        for (size_t i = 0; i < server->held_count; i++)
            grown[i] = server->held[(server->held_head + i) % server->held_cap];
        free(server->held);
        server->held = grown;
        server->held_cap = cap;
        server->held_head = 0;
    }
    struct kv_held *held =
        &server->held[(server->held_head + server->held_count) % server->held_cap];
    held->view_id = view_id;
    held->seq = seq;
    held->fd = fd;
    held->conn_id = conn_id;
    held->slot = slot;
    held->reply = NULL;
    if (reply->len <= sizeof held->short_reply) {
        memcpy(held->short_reply, reply->data, reply->len);
    } else {
        held->reply = malloc(reply->len);
        if (held->reply == NULL) {
            fprintf(stderr, "spindle-kv: out of memory for a reply of %zu bytes\n", reply->len);
            abort();
        }
        memcpy(held->reply, reply->data, reply->len);
    }
    held->reply_len = reply->len;
    server->held_count++;
}

/* Answers the held replies whose operations are persistent now. Held
 * replies are in delivery order, so they are released from the front. */
void kv_release_persisted(struct kv_server *server)
{
    if (server->held_count == 0)
        return;
    uint64_t view_id = 0, global = 0;
    if (spindle_group_persisted(server->group, server->my_shard, &view_id, NULL, &global) < 0)
        return;
    while (server->held_count > 0) {
        struct kv_held *held = &server->held[server->held_head];
        /* A frontier of a later view covers every message of earlier ones
         * (the old view's last frontier is reported at the change). */
        if (held->view_id > view_id || (held->view_id == view_id && held->seq >= global))
            return;
        struct kv_conn *conn = kv_client_find(server, held->fd, held->conn_id);
        if (conn != NULL)
            kv_client_reply(server, conn, held->slot,
                            held->reply != NULL ? held->reply : held->short_reply, held->reply_len);
        free(held->reply);
        server->held_head = (server->held_head + 1) % server->held_cap;
        server->held_count--;
    }
}

void kv_persist_signalled(struct kv_server *server)
{
    /* The descriptor is drained first, then the flag cleared, then the
     * frontier asked for: an upcall that found the flag still set reported
     * a frontier this ask sees (the exchange acquires what it released),
     * and one after the exchange writes again, after the drain. */
    uint64_t counter;
    if (read(server->persist_fd, &counter, sizeof counter) < 0 && errno != EAGAIN)
        fprintf(stderr, "spindle-kv: reading the persistence eventfd: %s\n", strerror(errno));
    (void)__atomic_exchange_n(&server->persist_signalled, false, __ATOMIC_ACQ_REL);
    kv_release_persisted(server);
}

void kv_on_persisted(void *ctx, uint32_t subgroup, uint64_t view_id, uint64_t frontier)
{
    /* The predicate thread or the log's writer: wake the loop, which asks for
     * the frontier, unless an earlier report's wake-up is still unread (the
     * loop's ask then sees this frontier too). At most one write per turn
     * of the loop, where a busy member reports several frontiers. */
    (void)subgroup;
    (void)view_id;
    (void)frontier;
    struct kv_server *server = ctx;
    if (__atomic_exchange_n(&server->persist_signalled, true, __ATOMIC_ACQ_REL))
        return;
    uint64_t one = 1;
    if (write(server->persist_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        return; /* the loop also looks at every delivery */
}

int kv_on_replay(void *ctx, const struct spindle_replayed *item)
{
    struct kv_server *server = ctx;
    /* Every replica logs every shard's subgroup, but delivers only its
     * own: another shard's items come from a log catch-up of a joiner
     * admitted by a replica of that shard (the view's leader), and are not
     * this replica's state. */
    if (item->subgroup != server->my_shard)
        return 0;
    if (item->kind == SPINDLE_REPLAY_SNAPSHOT) {
        server->replayed_snapshots++;
        if (item->length == 0) {
            /* A catch-up that starts over: the state is empty until the
             * snapshots that follow, if any. */
            kv_store_free(&server->store);
            kv_store_init(&server->store);
            return 0;
        }
        char error[256];
        if (kv_snapshot_decode(&server->store, item->data, item->length, error, sizeof error) !=
            0) {
            fprintf(stderr, "spindle-kv: the snapshot in the log of subgroup %u is refused: %s\n",
                    item->subgroup, error);
            return SPINDLE_EPROTO;
        }
        return 0;
    }
    server->scratch.len = 0;
    kv_store_apply(&server->store, item->data, item->length, &server->op, &server->scratch);
    server->ops_applied++;
    server->replayed_ops++;
    return 0;
}

void kv_snapshot_now(struct kv_server *server)
{
    if (server->options->log_dir == NULL)
        return;
    struct kv_buf state = {0};
    kv_snapshot_encode(&server->store, &state);
    int rc = spindle_group_snapshot(server->group, server->my_shard, server->last_view,
                                    server->last_seq + 1, state.data, state.len);
    kv_buf_free(&state);
    if (rc < 0) {
        fprintf(stderr, "spindle-kv: replica %u: snapshot failed: %s: %s\n", server->self,
                spindle_strerror(rc), spindle_errmsg());
        return;
    }
    server->since_snapshot = 0;
    server->snapshots++;
}

/* Snapshots the store into the log now and then, from the loop (never in
 * an upcall), so that the log's older segments can go. */
void kv_maybe_snapshot(struct kv_server *server)
{
    uint64_t every = server->options->snapshot_every;
    if (every == 0) {
        /* A snapshot costs a copy of the store: not more often than the
         * store's size over two operations. */
        every = 2 * (uint64_t)server->store.num_keys;
        if (every < KV_SNAPSHOT_EVERY)
            every = KV_SNAPSHOT_EVERY;
    }
    if (server->options->log_dir != NULL && server->since_snapshot >= every)
        kv_snapshot_now(server);
}
