/*
 * Internal to the state machine (kv_store.c, kv_commands.c): the map's
 * entries and sessions, and the operations on them the commands use.
 * Invariant: a key is in the map at most once; an entry whose expire_ms is
 * not 0 and not above store->now_ms is expired: commands treat it as
 * absent, and the next tick removes it.
 */
#ifndef KV_MAP_H
#define KV_MAP_H

#include "kv_store.h"

struct kv_entry {
    struct kv_entry *next;
    uint64_t hash;
    uint64_t expire_ms; /* 0: never */
    uint64_t version;   /* store->applied when last written (WATCH) */
    char *key;          /* the bytes after the entry, in the same allocation */
    size_t key_len;
    char *value;
    size_t value_len;
};

struct kv_result {
    uint64_t request_id;
    char *reply;
    size_t reply_len;
};

struct kv_session {
    uint64_t id;
    uint64_t last_used; /* store->applied when it was last used */
    uint32_t num_results;
    uint32_t next_result; /* ring position of the next result */
    struct kv_result results[KV_SESSION_RESULTS];
};

/* The live entry of key, or NULL (absent or expired). */
struct kv_entry *kv_map_find(struct kv_store *store, const char *key, size_t key_len);
/* Sets key to value (copied) with expire_ms (0: none); returns the entry. */
struct kv_entry *kv_map_set(struct kv_store *store, const char *key, size_t key_len,
                            const char *value, size_t value_len, uint64_t expire_ms);
/* Sets an entry's expiry, keeping the count of expiring keys. */
void kv_map_set_expiry(struct kv_store *store, struct kv_entry *entry, uint64_t expire_ms);
/* Removes key (live or expired); true when a live one was removed. */
bool kv_map_delete(struct kv_store *store, const char *key, size_t key_len);
/* Removes every key. */
void kv_map_clear(struct kv_store *store);
/* Removes the keys that expired at store->now_ms. */
void kv_map_expire(struct kv_store *store);
bool kv_entry_live(const struct kv_store *store, const struct kv_entry *entry);

/* Runs a command (args[0] is its name) at time_ms; reply appended.
 * read_only: only read commands run (others answer an error). */
void kv_execute(struct kv_store *store, const struct kv_arg *args, size_t count, uint64_t time_ms,
                bool read_only, struct kv_buf *reply);

#endif
