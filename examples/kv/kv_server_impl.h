/*
 * Internal to the replica (kv_server.c: group, loop and proposals;
 * kv_client.c: connections and commands). One thread, the loop's, touches
 * all of it.
 */
#ifndef KV_SERVER_IMPL_H
#define KV_SERVER_IMPL_H

#include <pthread.h>

#include "kv_resp.h"
#include "kv_server.h"
#include "kv_store.h"
#include "kv_transfer.h"

/* Replies a connection may wait for at once (pipelined requests). */
#define KV_PIPELINE 128u
/* Bytes of unparsed input a connection may hold. */
#define KV_MAX_INPUT (16u << 20)

struct kv_slot {
    char *data;
    size_t len;
    bool ready;
};

struct kv_conn {
    int fd;
    uint64_t id;
    uint32_t events; /* what epoll watches now */
    struct kv_buf in;
    struct kv_buf out;
    size_t out_sent;
    struct kv_slot slots[KV_PIPELINE];
    uint64_t head, tail; /* replies owed: slots head..tail-1 */
    bool authed;
    bool readonly; /* READONLY: stale reads from the local copy */
    bool closing;  /* QUIT or a protocol error: close once written */
    bool dirty;    /* on the server's list of connections to write */
    /* MULTI ... EXEC and WATCH (kv_multi.c). */
    bool in_multi;
    bool multi_failed;     /* a command was refused while queued: EXEC answers -EXECABORT */
    bool multi_has_keys;   /* a queued command or a watched key named a key */
    struct kv_buf queued;  /* per command: its argument count, then its arguments */
    size_t num_queued;     /* arguments in queued, counts included */
    size_t num_commands;   /* commands in queued */
    struct kv_buf watched; /* per watched key: the key, then the version seen */
    size_t num_watched;
};

/* A request of this replica's client waiting for its operation. */
struct kv_pending {
    uint64_t counter;
    int fd;
    uint64_t conn_id;
    uint64_t slot;
};

/* A reply of a logged shard, waiting for its operation to be persistent
 * at every replica of the shard. */
#define KV_SHORT_REPLY 24

struct kv_held {
    uint64_t view_id, seq;
    int fd;
    uint64_t conn_id;
    uint64_t slot;
    /* A reply of up to KV_SHORT_REPLY bytes (+OK, an integer: most of
     * them) is kept in short_reply, reply NULL, so holding it allocates
     * nothing; a longer one is a copy of its own. */
    char *reply;
    size_t reply_len;
    char short_reply[KV_SHORT_REPLY];
};

/* A joiner's shard state transfer (kv_sync.c). */
enum kv_sync_phase {
    KV_SYNCED = 0,     /* the store is the shard's */
    KV_SYNC_WAIT = 1,  /* waiting for a view with a replica of the shard to ask */
    KV_SYNC_MARK = 2,  /* the mark is multicast; deliveries before it are in the state */
    KV_SYNC_FETCH = 3, /* fetching the state; deliveries after the mark are held */
};

/* A state this replica hands to a joiner, by the joiner's member id. */
struct kv_donation {
    bool active;
    uint64_t token;
    struct kv_buf state;
};

struct kv_sync {
    enum kv_sync_phase phase;
    uint64_t token;    /* of the current attempt */
    uint64_t attempts; /* made; picks the next replica to ask */
    uint32_t donor;
    struct kv_buf held; /* operations delivered after the mark: u32 length + bytes each */
    int done_fd;        /* eventfd the fetch thread writes */
    /* The fetch thread, and what it shares with the loop under lock. */
    pthread_t thread;
    bool thread_running, lock_initialized;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stopping;
    bool job;           /* a fetch to start */
    uint64_t job_token; /* of the job */
    uint32_t job_donor;
    bool result_ready;
    uint64_t result_token;
    int result_rc;        /* 0, KV_REPLY_NOT_HERE + 1, or a negative SPINDLE_E* code */
    struct kv_buf result; /* the state fetched */
    char result_error[256];
    /* Donor side. */
    struct kv_donation donations[SPINDLE_MAX_MEMBERS];
};

struct kv_server {
    struct kv_server_options *options;
    spindle_group_t *group;
    uint32_t self;
    int epoll_fd, listen_fd, group_fd, timer_fd, signal_fd;
    struct kv_store store;
    struct kv_resp_limits limits;
    struct kv_argv argv;
    struct kv_argv exec_argv; /* a transaction's arguments, while it is proposed */
    struct kv_op op;
    struct kv_buf scratch;
    /* Connections by descriptor. */
    struct kv_conn **conns;
    size_t num_conns_slots;
    uint64_t next_conn_id;
    size_t num_clients;
    int *dirty;
    size_t num_dirty, dirty_cap;
    /* Requests in flight, in the order they were proposed (a sender's
     * messages are delivered in its order). */
    struct kv_pending *pending;
    size_t pending_head, pending_count, pending_cap;
    uint64_t next_counter;
    /* Operations that met SPINDLE_EAGAIN, u32 length + bytes each, in the
     * order they were proposed, from outbound_at on (kv_outbound.c). */
    struct kv_buf outbound;
    size_t outbound_at;
    bool send_failed; /* the group refused one: nothing more goes out */
    /* Shards: subgroup s is shard s. */
    uint32_t num_shards;
    uint32_t my_shard;
    /* The current view. */
    uint64_t view_id;
    uint32_t view_members[SPINDLE_MAX_MEMBERS];
    uint32_t num_view_members;
    uint32_t my_rank;
    uint64_t delivered_seq; /* next seq after the last delivered message */
    uint64_t ops_proposed, ops_applied, stale_reads;
    /* Logged shards. */
    int persist_fd; /* eventfd the persisted upcall writes */
    /* Set (atomically) by the persisted upcall that wrote persist_fd, cleared
     * by the loop before it asks for the frontier: one write per wake-up of
     * the loop, however many frontiers the library reports meanwhile. */
    bool persist_signalled;
    struct kv_held *held;
    size_t held_head, held_count, held_cap;
    uint64_t last_view, last_seq; /* the last delivered message */
    uint64_t since_snapshot;      /* operations applied since the last snapshot */
    uint64_t snapshots;
    uint64_t replayed_snapshots, replayed_ops; /* of this shard, from the log at the start */
    /* Each member's shard and RESP address, from the names of the current
     * view (kv_transfer.h), and the most replicas each shard has had. */
    uint32_t shard_of[SPINDLE_MAX_MEMBERS];
    struct kv_endpoint endpoint_of[SPINDLE_MAX_MEMBERS];
    uint32_t most_replicas[SPINDLE_MAX_MEMBERS];
    char member_name[SPINDLE_MEMBER_NAME_MAX];
    struct kv_sync sync;
};

/* kv_server.c */
/* Multicasts an operation of a client request (or fills its slot with an
 * error when it cannot be); slot is the connection's reply slot. */
/* The shard of member id (ids 0..n-1 of the first view, and joiners). */
uint32_t kv_member_shard(const struct kv_server *server, uint32_t member_id);

void kv_propose(struct kv_server *server, struct kv_conn *conn, uint64_t slot, uint64_t session,
                uint64_t request_id, const struct kv_arg *args, size_t count);
/* The same for an operation of kind (KV_OP_COMMAND or KV_OP_EXEC). */
void kv_propose_kind(struct kv_server *server, struct kv_conn *conn, uint64_t slot, uint8_t kind,
                     uint64_t session, uint64_t request_id, const struct kv_arg *args,
                     size_t count);

/* kv_sync.c */
/* Before the group: the fetch thread and its eventfd. */
int kv_sync_init(struct kv_server *server);
/* A view was installed: donations end, and a joiner still without its
 * shard's state asks again in the new view. */
void kv_sync_view(struct kv_server *server);
/* A delivery while this replica has no state yet. */
void kv_sync_deliver(struct kv_server *server, const struct spindle_message *m);
/* A delivered mark naming this replica as the donor: keeps the state. */
void kv_sync_donate(struct kv_server *server, uint32_t joiner, uint64_t token);
/* p2p_deliver: a joiner's query for a chunk of its state. */
void kv_sync_on_query(void *ctx, const struct spindle_p2p_message *message);
/* The fetch thread finished (done_fd readable). */
void kv_sync_fetched(struct kv_server *server);
/* After the group stopped dispatching: ends the thread. */
void kv_sync_stop(struct kv_server *server);

/* kv_durable.c */
/* Keeps reply until its operation (view_id, seq) is persistent. */
void kv_hold_reply(struct kv_server *server, uint64_t view_id, uint64_t seq, int fd,
                   uint64_t conn_id, uint64_t slot, const struct kv_buf *reply);
/* Answers the held replies that are persistent now. */
void kv_release_persisted(struct kv_server *server);
/* persist_fd is readable: takes the signal, then answers what is persistent. */
void kv_persist_signalled(struct kv_server *server);
void kv_on_persisted(void *ctx, uint32_t subgroup, uint64_t view_id, uint64_t frontier);
int kv_on_replay(void *ctx, const struct spindle_replayed *item);
/* Snapshots the store into the log when enough was applied since. */
void kv_maybe_snapshot(struct kv_server *server);
/* Snapshots the store into the log now, at the point after the last
 * delivered message (logged replicas only; a failure is reported and
 * leaves the log as it was). From the loop, never in an upcall. */
void kv_snapshot_now(struct kv_server *server);

/* kv_outbound.c */
/* Multicasts an encoded operation now, or, when the window is full or a
 * view change is under way (or operations wait before it), queues it. */
void kv_outbound_send(struct kv_server *server, const struct kv_buf *op);
/* Sends what is queued, in order, until the group says SPINDLE_EAGAIN
 * again; each turn of the loop calls it. */
void kv_outbound_flush(struct kv_server *server);

/* kv_client.c */
void kv_client_accept(struct kv_server *server);
void kv_client_event(struct kv_server *server, int fd, uint32_t events);
/* Writes the dirty connections' output and reads on where they stopped. */
void kv_client_flush(struct kv_server *server);
/* The connection of fd when it is still conn_id, or NULL. */
struct kv_conn *kv_client_find(struct kv_server *server, int fd, uint64_t conn_id);
/* Fills reply slot of conn with data (copied) and queues it for writing. */
void kv_client_reply(struct kv_server *server, struct kv_conn *conn, uint64_t slot,
                     const char *data, size_t len);
void kv_client_close_all(struct kv_server *server);
/* Whether this replica may run the command args: its keys are in this
 * replica's shard, or it has none. Otherwise reply says where to go
 * (-MOVED) or that the keys span shards (-CROSSSLOT); false then. */
bool kv_client_route(struct kv_server *server, const struct kv_arg *args, size_t count,
                     struct kv_buf *reply);

/* kv_multi.c */
/* MULTI, EXEC, DISCARD, WATCH, UNWATCH, and every command of a connection
 * inside MULTI (queued, +QUEUED): true when it took the command, with its
 * reply in reply, or nothing there when EXEC was proposed (its slot waits
 * for the delivery). False for a command outside a transaction. */
bool kv_multi_command(struct kv_server *server, struct kv_conn *conn, const struct kv_arg *args,
                      size_t count, struct kv_buf *reply);
/* SESSION session-id request-id EXEC: the transaction under a session. */
void kv_multi_exec(struct kv_server *server, struct kv_conn *conn, uint64_t session,
                   uint64_t request_id, struct kv_buf *reply);
/* Frees a connection's transaction state. */
void kv_multi_free(struct kv_conn *conn);

#endif
