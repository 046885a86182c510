/*
 * spindle-kv's replica: one member of the group that replicates the store,
 * serving RESP2 clients on an epoll loop (docs/KV.md).
 *
 * Owns: the group (dispatch mode: deliveries run on the loop's thread), the
 * listening socket, the client connections, the store, and the requests of
 * this replica's clients waiting for their operation to be delivered.
 *
 * Shards: each shard is an atomic subgroup of some members (kv_slot.h maps
 * keys to shards); a replica serves the keys of its own shard and answers
 * -MOVED for the others and -CROSSSLOT for commands whose keys span shards.
 *
 * Flow of a write (and of a read, unless stale reads are asked for): the
 * command becomes an operation (kv_store.h) carrying this replica's request
 * number, is multicast in the shard's atomic subgroup, is applied by every
 * replica in delivery order, and this replica answers its client from its
 * own application of it. A connection's replies leave in the order of its
 * requests, whatever the mix of ordered and local commands (pipelining).
 *
 * Threads: one, the loop's, which also runs the group's upcalls
 * (spindle_dispatch).
 */
#ifndef KV_SERVER_H
#define KV_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include <spindle/spindle.h>

/* Largest operation multicast (bytes): a command with its arguments. */
#define KV_MAX_OP_BYTES 16384u
/* Ring slots per sender. */
#define KV_WINDOW 256u

/* Where clients reach a replica's RESP listener (for -MOVED replies). */
struct kv_endpoint {
    char host[64];
    unsigned port;
};

struct kv_server_options {
    const char *bind;        /* address of the RESP listener; default 127.0.0.1 */
    unsigned port;           /* RESP port */
    const char *requirepass; /* NULL: no AUTH needed */
    bool stale_reads;        /* reads from the local copy by default */
    unsigned tick_ms;        /* period of the expiry ticks */
    const char *pid_file;    /* written once the replica serves; may be NULL */
    /* Replicas per shard: member id i serves shard (i / replicas) mod
     * (members / replicas). 0, or the member count: one shard of all. */
    uint32_t replicas;
    /* A joiner (group.join set): the service's shard count and the shard
     * it serves (below num_shards); num_shards 0 means 1. */
    uint32_t num_shards;
    uint32_t shard;
    /* Logged shards (docs/LOGS.md): the log directory of this replica, or
     * NULL. With one, a write is answered once it is on stable storage at
     * every replica of its shard, and a restart of every replica recovers
     * the store from the logs. */
    const char *log_dir;
    /* With log_dir: a snapshot of the store every snapshot_every operations
     * applied; 0: every KV_SNAPSHOT_EVERY (50,000), or twice as many as the
     * store has keys when that is more. */
    uint64_t snapshot_every;
    /* RESP addresses of the first view's members, by member id; a joiner's
     * is its bind address (127.0.0.1 by default) and port. Replicas learn
     * each other's from their member names. */
    struct kv_endpoint endpoints[SPINDLE_MAX_MEMBERS];
    /* Group options already holding bootstrap, self, num_members,
     * transport...; the server adds its upcalls and dispatch. */
    struct spindle_group_options group;
};

/* Runs one replica until SIGTERM or SIGINT (0) or until it stops on an
 * error (1, said on stderr). */
int kv_server_run(struct kv_server_options *options);

#endif
