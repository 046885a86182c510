/*
 * The replicated state machine of spindle-kv: a map of byte-string keys to
 * byte-string values with absolute expiry times, the table of recent
 * results per client session (exactly-once retries), and the operations
 * that change them.
 *
 * Owns: the map, the session table, the state machine's clock (the time of
 * the last ordered tick), and the wire form of operations and snapshots.
 *
 * Determinism (what makes replicas equal): kv_store_apply is a function of
 * the store and the operation bytes alone. No replica's own clock is read:
 * expiry times are computed from the time the proposing replica put in the
 * operation, and keys expire only when a tick operation, ordered like any
 * write, carries the state machine's clock past them. Iteration order
 * (SCAN, KEYS) depends only on the keys and the history of the table.
 *
 * Threads: none of its own; a store belongs to the thread that applies.
 * Every decoder here checks every length against the bytes it was given.
 */
#ifndef KV_STORE_H
#define KV_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv_resp.h"

/* Sessions remembered at most, and results remembered per session. */
#define KV_MAX_SESSIONS    1024u
#define KV_SESSION_RESULTS 16u

/* Operation kinds. */
enum kv_op_kind {
    KV_OP_COMMAND = 1, /* a client command (argv), optionally in a session */
    KV_OP_TICK = 2,    /* advances the clock to time_ms; expired keys go */
    /* A joiner marks the point of the stream its shard's state is taken
     * at (docs/KV.md "Joining a shard"): counter is the joiner's token,
     * request_id the member id of the replica asked for the state. Changes
     * nothing in the store. */
    KV_OP_SYNC = 3,
    /* A transaction, MULTI ... EXEC (kv_exec.c): argv is the number W of
     * watched keys, W pairs (key, version seen), then each queued command
     * as its argument count followed by its arguments, all decimal counts.
     * Applied in one step: the watched versions are compared and, when
     * none changed, every command runs. */
    KV_OP_EXEC = 4,
};

/* Bytes of an encoded operation before its arguments. */
#define KV_OP_HEADER  40u
#define KV_OP_VERSION 1u

/* A decoded operation; argv points into the encoded bytes. */
struct kv_op {
    uint8_t kind;        /* enum kv_op_kind */
    uint64_t counter;    /* the proposing replica's request number (matches replies) */
    uint64_t time_ms;    /* the proposer's clock (CLOCK_REALTIME, ms) */
    uint64_t session;    /* 0: no session */
    uint64_t request_id; /* in the session */
    struct kv_argv argv;
};

/* Encodes an operation into out (appended). */
void kv_op_encode(struct kv_buf *out, uint8_t kind, uint64_t counter, uint64_t time_ms,
                  uint64_t session, uint64_t request_id, const struct kv_arg *args, size_t count);

/* Decodes data[0..len) into *op (op->argv is reused). 0, or -1 with a
 * message in error naming what was wrong. */
int kv_op_decode(const void *data, size_t len, struct kv_op *op, char *error, size_t error_size);

struct kv_entry;
struct kv_session;

struct kv_store {
    struct kv_entry **buckets;
    size_t num_buckets; /* a power of two; only grows */
    size_t num_keys;
    size_t num_expiring; /* keys with an expiry time */
    uint64_t now_ms;     /* the last ordered tick's time */
    uint64_t applied;    /* operations applied */
    /* Versions for WATCH: a key's version is the applied count of the
     * operation that last wrote it (value or expiry); an absent key's is
     * deleted_version, the applied count of the last removal of any key
     * (DEL, expiry, FLUSHALL). Both only grow, and are the same at every
     * replica that applied the same stream. */
    uint64_t deleted_version;
    struct kv_session *sessions;
    size_t num_sessions;
};

void kv_store_init(struct kv_store *store);
void kv_store_free(struct kv_store *store);

/*
 * Applies one encoded operation (as delivered) and writes the RESP reply
 * for its client into reply (appended; a tick's reply is empty). An
 * operation that does not decode is answered with an error and changes
 * nothing but the count of applied operations, the same at every replica.
 * Fills *op with the decoded operation when it decodes (op->kind 0 when
 * not).
 */
void kv_store_apply(struct kv_store *store, const void *data, size_t len, struct kv_op *op,
                    struct kv_buf *reply);

/*
 * Cache warming for a batch of operations about to be applied: with far
 * more keys than the cache holds, each lookup is a chain of dependent
 * misses (the bucket, then the entry, then the value), which the apply
 * loop otherwise waits out one operation at a time. Stage 1 starts loading
 * the bucket of an operation's first key (a command's argv[1]) and sets
 * *hash; it returns false when the operation has no such key. Stage 2,
 * once stage 1 ran over the batch, starts loading the entry at the head
 * of that bucket; stage 3, after stage 2, the value of that entry when it
 * holds the key, else the chain's next entry. None of them changes the
 * store or what kv_store_apply does.
 */
bool kv_store_prefetch_bucket(const struct kv_store *store, const void *data, size_t len,
                              uint64_t *hash);
void kv_store_prefetch_entry(const struct kv_store *store, uint64_t hash);
void kv_store_prefetch_value(const struct kv_store *store, uint64_t hash);

/* Command classes, for the server: where a command may run. */
enum kv_command_class {
    KV_CMD_UNKNOWN = 0,
    KV_CMD_READ = 1,  /* reads the map: ordered, or local for stale reads */
    KV_CMD_WRITE = 2, /* changes the map: ordered */
};
enum kv_command_class kv_command_class(const struct kv_arg *name);

/* COMMAND's reply: per command of the state machine, as Redis gives it, its
 * name, arity, flags and key positions (first, last, step). */
void kv_command_table(struct kv_buf *reply);

/* Checks a command at queue time (MULTI): true when it is one of the
 * state machine's with a valid argument count; else false with Redis's
 * error in reply (unknown command, wrong number of arguments). */
bool kv_command_valid(const struct kv_arg *args, size_t count, struct kv_buf *reply);

/* The version of key now (see deleted_version): what WATCH records. */
uint64_t kv_store_version(struct kv_store *store, const char *key, size_t key_len);

/* Applies a transaction's arguments (KV_OP_EXEC) at time_ms: *-1 when a
 * watched key's version changed, else an array of the commands' replies;
 * an error, changing nothing, when the arguments are malformed. */
void kv_exec_apply(struct kv_store *store, const struct kv_arg *args, size_t count,
                   uint64_t time_ms, struct kv_buf *reply);

/* Runs a read command on the local copy (stale read); reply appended. */
void kv_store_read(struct kv_store *store, const struct kv_arg *args, size_t count,
                   struct kv_buf *reply);

/* The digest of the map (keys, values, expiry times), the keys' versions
 * and the session table: replicas that applied the same operations have
 * equal digests, whatever the layout of their tables. */
uint64_t kv_store_digest(const struct kv_store *store);

/* Keys stored now, and those of them with an expiry time. */
size_t kv_store_size(const struct kv_store *store);

/* Snapshot for state transfer and logs: appends the whole state to out. */
void kv_snapshot_encode(const struct kv_store *store, struct kv_buf *out);
/* Replaces *store with the snapshot data[0..len). 0, or -1 with a message
 * naming what was wrong (the store is then empty). */
int kv_snapshot_decode(struct kv_store *store, const void *data, size_t len, char *error,
                       size_t error_size);

/* Redis-style glob match (*, ?, [set], [^set], [a-z], backslash escape). */
bool kv_glob_match(const char *pattern, size_t pattern_len, const char *text, size_t text_len);

#endif
