/* The state machine's map, sessions, operations and snapshots (kv_store.h). */
#include "kv_store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_le.h"
#include "kv_map.h"

#define KV_SNAPSHOT_MAGIC  0x3253564bu /* "KVS2": key versions added to "KVS1" */
#define KV_INITIAL_BUCKETS 64u

/* FNV-1a: fixed, unseeded, so that every replica lays the table out alike. */
static uint64_t hash_bytes(uint64_t hash, const void *data, size_t len)
{
    const unsigned char *bytes = data;
    for (size_t i = 0; i < len; i++) {
        hash ^= bytes[i];
        hash *= 0x100000001b3ull;
    }
    return hash;
}

static uint64_t key_hash(const char *key, size_t key_len)
{
    return hash_bytes(0xcbf29ce484222325ull, key, key_len);
}

static void *xmalloc(size_t size)
{
    void *p = malloc(size == 0 ? 1 : size);
    if (p == NULL) {
        fprintf(stderr, "spindle-kv: out of memory allocating %zu bytes\n", size);
        abort();
    }
    return p;
}

static char *copy_bytes(const char *data, size_t len)
{
    char *copy = xmalloc(len);
    if (len > 0)
        memcpy(copy, data, len);
    return copy;
}

void kv_store_init(struct kv_store *store)
{
    memset(store, 0, sizeof *store);
    store->num_buckets = KV_INITIAL_BUCKETS;
    store->buckets = calloc(store->num_buckets, sizeof(struct kv_entry *));
    store->sessions = calloc(KV_MAX_SESSIONS, sizeof *store->sessions);
    if (store->buckets == NULL || store->sessions == NULL) {
        fprintf(stderr, "spindle-kv: out of memory creating the store\n");
        abort();
    }
}

static void free_entry(struct kv_entry *entry)
{
    free(entry->value);
    free(entry);
}

static void clear_sessions(struct kv_store *store)
{
    for (size_t i = 0; i < store->num_sessions; i++)
        for (uint32_t r = 0; r < store->sessions[i].num_results; r++)
            free(store->sessions[i].results[r].reply);
    store->num_sessions = 0;
}

void kv_store_free(struct kv_store *store)
{
    if (store->buckets != NULL)
        kv_map_clear(store);
    clear_sessions(store);
    free(store->buckets);
    free(store->sessions);
    memset(store, 0, sizeof *store);
}

bool kv_entry_live(const struct kv_store *store, const struct kv_entry *entry)
{
    return entry->expire_ms == 0 || entry->expire_ms > store->now_ms;
}

static struct kv_entry **find_slot(struct kv_store *store, const char *key, size_t key_len,
                                   uint64_t hash)
{
    struct kv_entry **slot = &store->buckets[hash & (store->num_buckets - 1)];
    while (*slot != NULL) {
        const struct kv_entry *e = *slot;
        if (e->hash == hash && e->key_len == key_len && memcmp(e->key, key, key_len) == 0)
            return slot;
        slot = &(*slot)->next;
    }
    return slot;
}

struct kv_entry *kv_map_find(struct kv_store *store, const char *key, size_t key_len)
{
    struct kv_entry *entry = *find_slot(store, key, key_len, key_hash(key, key_len));
    return entry != NULL && kv_entry_live(store, entry) ? entry : NULL;
}

/* The first key of a command operation, where kv_op_decode would find
 * argv[1]; false when there is none. Checks every length it reads. */
static bool op_first_key(const void *data, size_t len, const char **key, size_t *key_len)
{
    const unsigned char *bytes = data;
    if (len < KV_OP_HEADER || bytes[1] != KV_OP_COMMAND || kv_get_u32(bytes + 4) < 2)
        return false;
    size_t at = KV_OP_HEADER;
    for (int arg = 0; arg < 2; arg++) {
        if (len - at < 4)
            return false;
        uint32_t arg_len = kv_get_u32(bytes + at);
        at += 4;
        if (arg_len > len - at)
            return false;
        *key = (const char *)bytes + at;
        *key_len = arg_len;
        at += arg_len;
    }
    return true;
}

bool kv_store_prefetch_bucket(const struct kv_store *store, const void *data, size_t len,
                              uint64_t *hash)
{
    const char *key;
    size_t key_len;
    if (!op_first_key(data, len, &key, &key_len))
        return false;
    *hash = key_hash(key, key_len);
    __builtin_prefetch(&store->buckets[*hash & (store->num_buckets - 1)]);
    return true;
}

void kv_store_prefetch_entry(const struct kv_store *store, uint64_t hash)
{
    const struct kv_entry *head = store->buckets[hash & (store->num_buckets - 1)];
    if (head != NULL)
        __builtin_prefetch(head);
}

void kv_store_prefetch_value(const struct kv_store *store, uint64_t hash)
{
    const struct kv_entry *head = store->buckets[hash & (store->num_buckets - 1)];
    if (head == NULL)
        return;
    if (head->hash == hash)
        __builtin_prefetch(head->value, 1); /* most writes overwrite it in place */
    else if (head->next != NULL)
        __builtin_prefetch(head->next);
}

/* Doubles the table. New entries go to the end of their chains, so a
 * chain's order is the same at every replica. */
static void grow(struct kv_store *store)
{
    size_t count = store->num_buckets * 2;
    struct kv_entry **buckets = calloc(count, sizeof(struct kv_entry *));
    if (buckets == NULL)
        return; /* longer chains, still correct */
    for (size_t b = 0; b < store->num_buckets; b++) {
        struct kv_entry *entry = store->buckets[b];
        while (entry != NULL) {
            struct kv_entry *next = entry->next;
            struct kv_entry **slot = &buckets[entry->hash & (count - 1)];
            while (*slot != NULL)
                slot = &(*slot)->next;
            entry->next = NULL;
            *slot = entry;
            entry = next;
        }
    }
    free(store->buckets);
    store->buckets = buckets;
    store->num_buckets = count;
}

void kv_map_set_expiry(struct kv_store *store, struct kv_entry *entry, uint64_t expire_ms)
{
    if (entry->expire_ms != 0)
        store->num_expiring--;
    if (expire_ms != 0)
        store->num_expiring++;
    entry->expire_ms = expire_ms;
    entry->version = store->applied;
}

struct kv_entry *kv_map_set(struct kv_store *store, const char *key, size_t key_len,
                            const char *value, size_t value_len, uint64_t expire_ms)
{
    uint64_t hash = key_hash(key, key_len);
    struct kv_entry **slot = find_slot(store, key, key_len, hash);
    struct kv_entry *entry = *slot;
    if (entry == NULL) {
        /* The key in the same block: a lookup reads one block less. */
        entry = xmalloc(sizeof *entry + key_len);
        memset(entry, 0, sizeof *entry);
        entry->hash = hash;
        entry->key = (char *)(entry + 1);
        if (key_len > 0)
            memcpy(entry->key, key, key_len);
        entry->key_len = key_len;
        *slot = entry;
        store->num_keys++;
    } else if (entry->value_len == value_len && value_len > 0) {
        /* A value of the same size (a counter, a fixed-size record: most
         * overwrites) goes where the old one was, without an allocation.
         * memmove: value may be the entry's own. */
        memmove(entry->value, value, value_len);
        kv_map_set_expiry(store, entry, expire_ms);
        return entry;
    } else {
        free(entry->value);
    }
    entry->value = copy_bytes(value, value_len);
    entry->value_len = value_len;
    kv_map_set_expiry(store, entry, expire_ms);
    if (store->num_keys > store->num_buckets)
        grow(store);
    return entry;
}

static void unlink_entry(struct kv_store *store, struct kv_entry **slot)
{
    struct kv_entry *entry = *slot;
    *slot = entry->next;
    if (entry->expire_ms != 0)
        store->num_expiring--;
    store->num_keys--;
    store->deleted_version = store->applied;
    free_entry(entry);
}

bool kv_map_delete(struct kv_store *store, const char *key, size_t key_len)
{
    struct kv_entry **slot = find_slot(store, key, key_len, key_hash(key, key_len));
    if (*slot == NULL)
        return false;
    bool live = kv_entry_live(store, *slot);
    unlink_entry(store, slot);
    return live;
}

void kv_map_clear(struct kv_store *store)
{
    for (size_t b = 0; b < store->num_buckets; b++)
        while (store->buckets[b] != NULL)
            unlink_entry(store, &store->buckets[b]);
}

void kv_map_expire(struct kv_store *store)
{
    if (store->num_expiring == 0)
        return;
    for (size_t b = 0; b < store->num_buckets; b++) {
        struct kv_entry **slot = &store->buckets[b];
        while (*slot != NULL) {
            if (kv_entry_live(store, *slot))
                slot = &(*slot)->next;
            else
                unlink_entry(store, slot);
        }
    }
}

uint64_t kv_store_version(struct kv_store *store, const char *key, size_t key_len)
{
    const struct kv_entry *entry = kv_map_find(store, key, key_len);
    return entry != NULL ? entry->version : store->deleted_version;
}

size_t kv_store_size(const struct kv_store *store)
{
    return store->num_keys;
}

/* --- operations ------------------------------------------------------ */

void kv_op_encode(struct kv_buf *out, uint8_t kind, uint64_t counter, uint64_t time_ms,
                  uint64_t session, uint64_t request_id, const struct kv_arg *args, size_t count)
{
    size_t total = KV_OP_HEADER;
    for (size_t i = 0; i < count; i++)
        total += 4 + args[i].len;
    kv_buf_reserve(out, total);
    unsigned char head[4] = {KV_OP_VERSION, kind, 0, 0};
    kv_buf_append(out, head, 4);
    kv_put_u32(out, (uint32_t)count);
    kv_put_u64(out, counter);
    kv_put_u64(out, time_ms);
    kv_put_u64(out, session);
    kv_put_u64(out, request_id);
    for (size_t i = 0; i < count; i++) {
        kv_put_u32(out, (uint32_t)args[i].len);
        kv_buf_append(out, args[i].ptr, args[i].len);
    }
}

/* Writes the message into the caller's error buffer (error, error_size)
 * and gives -1. */
#define FAILF(...) (snprintf(error, error_size, __VA_ARGS__), -1)

int kv_op_decode(const void *data, size_t len, struct kv_op *op, char *error, size_t error_size)
{
    const unsigned char *bytes = data;
    op->kind = 0;
    op->argv.count = 0;
    if (len < KV_OP_HEADER)
        return FAILF("operation of %zu bytes is shorter than its %u-byte header", len,
                     KV_OP_HEADER);
    if (bytes[0] != KV_OP_VERSION)
        return FAILF("operation version %u (this replica knows %u)", bytes[0], KV_OP_VERSION);
    if (bytes[1] != KV_OP_COMMAND && bytes[1] != KV_OP_TICK && bytes[1] != KV_OP_SYNC &&
        bytes[1] != KV_OP_EXEC)
        return FAILF("unknown operation kind %u", bytes[1]);
    if (bytes[2] != 0 || bytes[3] != 0)
        return FAILF("operation reserved bytes %02x%02x are not zero", bytes[2], bytes[3]);
    uint32_t count = kv_get_u32(bytes + 4);
    if (count > (len - KV_OP_HEADER) / 4)
        return FAILF("operation claims %" PRIu32 " arguments in %zu bytes", count, len);
    size_t at = KV_OP_HEADER;
    for (uint32_t i = 0; i < count; i++) {
        if (len - at < 4)
            return FAILF("argument %" PRIu32 " length past the end", i);
        uint32_t arg_len = kv_get_u32(bytes + at);
        at += 4;
        if (arg_len > len - at)
            return FAILF("argument %" PRIu32 " of %" PRIu32 " bytes past the end (%zu left)", i,
                         arg_len, len - at);
        kv_argv_push(&op->argv, (const char *)bytes + at, arg_len);
        at += arg_len;
    }
    if (at != len)
        return FAILF("%zu bytes after the last argument", len - at);
    op->kind = bytes[1];
    op->counter = kv_get_u64(bytes + 8);
    op->time_ms = kv_get_u64(bytes + 16);
    op->session = kv_get_u64(bytes + 24);
    op->request_id = kv_get_u64(bytes + 32);
    return 0;
}

/* --- sessions -------------------------------------------------------- */

static struct kv_session *find_session(struct kv_store *store, uint64_t id)
{
    for (size_t i = 0; i < store->num_sessions; i++)
        if (store->sessions[i].id == id)
            return &store->sessions[i];
    return NULL;
}

/* A new session, taking the place of the least recently used one when the
 * table is full (decided by the applied count: the same everywhere). */
static struct kv_session *new_session(struct kv_store *store, uint64_t id)
{
    struct kv_session *session;
    if (store->num_sessions < KV_MAX_SESSIONS) {
        session = &store->sessions[store->num_sessions++];
    } else {
        session = &store->sessions[0];
        for (size_t i = 1; i < store->num_sessions; i++)
            if (store->sessions[i].last_used < session->last_used)
                session = &store->sessions[i];
        for (uint32_t r = 0; r < session->num_results; r++)
            free(session->results[r].reply);
    }
    memset(session, 0, sizeof *session);
    session->id = id;
    return session;
}

static const struct kv_result *find_result(const struct kv_session *session, uint64_t request_id)
{
    for (uint32_t r = 0; r < session->num_results; r++)
        if (session->results[r].request_id == request_id)
            return &session->results[r];
    return NULL;
}

/* True when request_id is older than every result a full ring keeps: its
 * result, if it ran, is forgotten, so it must not run again. */
static bool forgotten(const struct kv_session *session, uint64_t request_id)
{
    if (session->num_results < KV_SESSION_RESULTS)
        return false;
    for (uint32_t r = 0; r < session->num_results; r++)
        if (session->results[r].request_id < request_id)
            return false;
    return true;
}

static void remember(struct kv_session *session, uint64_t request_id, const char *reply,
                     size_t reply_len)
{
    struct kv_result *result = &session->results[session->next_result];
    if (session->num_results == KV_SESSION_RESULTS)
        free(result->reply);
    else
        session->num_results++;
    result->request_id = request_id;
    result->reply = copy_bytes(reply, reply_len);
    result->reply_len = reply_len;
    session->next_result = (session->next_result + 1) % KV_SESSION_RESULTS;
}

/* A client's command or transaction. */
static void run_op(struct kv_store *store, const struct kv_op *op, struct kv_buf *reply)
{
    if (op->kind == KV_OP_EXEC)
        kv_exec_apply(store, op->argv.items, op->argv.count, op->time_ms, reply);
    else
        kv_execute(store, op->argv.items, op->argv.count, op->time_ms, false, reply);
}

static void apply_in_session(struct kv_store *store, const struct kv_op *op, struct kv_buf *reply)
{
    struct kv_session *session = find_session(store, op->session);
    if (session == NULL)
        session = new_session(store, op->session);
    session->last_used = store->applied;
    const struct kv_result *done = find_result(session, op->request_id);
    if (done != NULL) {
        kv_buf_append(reply, done->reply, done->reply_len);
        return;
    }
    if (forgotten(session, op->request_id)) {
        kv_resp_errorf(reply,
                       "ERR request %" PRIu64 " of session %" PRIu64
                       " is older than the %u results kept",
                       op->request_id, op->session, KV_SESSION_RESULTS);
        return;
    }
    size_t start = reply->len;
    run_op(store, op, reply);
    remember(session, op->request_id, reply->data + start, reply->len - start);
}

void kv_store_apply(struct kv_store *store, const void *data, size_t len, struct kv_op *op,
                    struct kv_buf *reply)
{
    char error[256];
    store->applied++;
    if (kv_op_decode(data, len, op, error, sizeof error) != 0) {
        kv_resp_errorf(reply, "ERR undecodable operation: %s", error);
        return;
    }
    if (op->kind == KV_OP_TICK) {
        if (op->time_ms > store->now_ms)
            store->now_ms = op->time_ms;
        kv_map_expire(store);
        return;
    }
    if (op->kind == KV_OP_SYNC)
        return;
    if (op->argv.count == 0) {
        kv_resp_error(reply, "ERR empty command");
        return;
    }
    if (op->session != 0)
        apply_in_session(store, op, reply);
    else
        run_op(store, op, reply);
}

void kv_store_read(struct kv_store *store, const struct kv_arg *args, size_t count,
                   struct kv_buf *reply)
{
    kv_execute(store, args, count, store->now_ms, true, reply);
}

/* --- digest and snapshots -------------------------------------------- */

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

uint64_t kv_store_digest(const struct kv_store *store)
{
    /* A sum of per-item hashes: independent of the table's history. */
    uint64_t digest = mix(store->num_keys) + mix(store->deleted_version ^ 0x56455253494f4eull);
    for (size_t b = 0; b < store->num_buckets; b++) {
        for (const struct kv_entry *e = store->buckets[b]; e != NULL; e = e->next) {
            uint64_t h = hash_bytes(0xcbf29ce484222325ull, &e->key_len, sizeof e->key_len);
            h = hash_bytes(h, e->key, e->key_len);
            h = hash_bytes(h, e->value, e->value_len);
            h = hash_bytes(h, &e->expire_ms, sizeof e->expire_ms);
            h = hash_bytes(h, &e->version, sizeof e->version);
            digest += mix(h);
        }
    }
    for (size_t i = 0; i < store->num_sessions; i++) {
        const struct kv_session *s = &store->sessions[i];
        uint64_t h = hash_bytes(0x84222325cbf29ce4ull, &s->id, sizeof s->id);
        for (uint32_t r = 0; r < s->num_results; r++) {
            h += mix(
                hash_bytes(s->results[r].request_id, s->results[r].reply, s->results[r].reply_len));
        }
        digest += mix(h);
    }
    return digest;
}

void kv_snapshot_encode(const struct kv_store *store, struct kv_buf *out)
{
    kv_put_u32(out, KV_SNAPSHOT_MAGIC);
    kv_put_u64(out, store->now_ms);
    kv_put_u64(out, store->applied);
    kv_put_u64(out, store->deleted_version);
    kv_put_u64(out, store->num_keys);
    for (size_t b = 0; b < store->num_buckets; b++) {
        for (const struct kv_entry *e = store->buckets[b]; e != NULL; e = e->next) {
            kv_put_u32(out, (uint32_t)e->key_len);
            kv_buf_append(out, e->key, e->key_len);
            kv_put_u32(out, (uint32_t)e->value_len);
            kv_buf_append(out, e->value, e->value_len);
            kv_put_u64(out, e->expire_ms);
            kv_put_u64(out, e->version);
        }
    }
    kv_put_u32(out, (uint32_t)store->num_sessions);
    for (size_t i = 0; i < store->num_sessions; i++) {
        const struct kv_session *s = &store->sessions[i];
        kv_put_u64(out, s->id);
        kv_put_u64(out, s->last_used);
        kv_put_u32(out, s->num_results);
        kv_put_u32(out, s->next_result);
        for (uint32_t r = 0; r < s->num_results; r++) {
            kv_put_u64(out, s->results[r].request_id);
            kv_put_u32(out, (uint32_t)s->results[r].reply_len);
            kv_buf_append(out, s->results[r].reply, s->results[r].reply_len);
        }
    }
}

struct reader {
    const unsigned char *data;
    size_t len;
    size_t at;
};

static bool read_u32(struct reader *r, uint32_t *v)
{
    if (r->len - r->at < 4)
        return false;
    *v = kv_get_u32(r->data + r->at);
    r->at += 4;
    return true;
}

static bool read_u64(struct reader *r, uint64_t *v)
{
    if (r->len - r->at < 8)
        return false;
    *v = kv_get_u64(r->data + r->at);
    r->at += 8;
    return true;
}

static bool read_bytes(struct reader *r, const char **ptr, uint32_t *len)
{
    if (!read_u32(r, len) || r->len - r->at < *len)
        return false;
    *ptr = (const char *)r->data + r->at;
    r->at += *len;
    return true;
}

static int decode_sessions(struct kv_store *store, struct reader *r, char *error, size_t error_size)
{
    uint32_t count = 0;
    if (!read_u32(r, &count))
        return FAILF("snapshot ends before its session count");
    if (count > KV_MAX_SESSIONS)
        return FAILF("snapshot has %" PRIu32 " sessions (at most %u)", count, KV_MAX_SESSIONS);
    for (uint32_t i = 0; i < count; i++) {
        struct kv_session *s = &store->sessions[store->num_sessions];
        memset(s, 0, sizeof *s);
        uint32_t num_results = 0;
        if (!read_u64(r, &s->id) || !read_u64(r, &s->last_used) || !read_u32(r, &num_results) ||
            !read_u32(r, &s->next_result))
            return FAILF("snapshot ends inside session %" PRIu32, i);
        /* A ring not yet full is filled from slot 0 on. */
        if (num_results > KV_SESSION_RESULTS || s->next_result >= KV_SESSION_RESULTS ||
            (num_results < KV_SESSION_RESULTS && s->next_result != num_results))
            return FAILF("session %" PRIu32 " has %" PRIu32 " results, next at %" PRIu32
                         " (at most %u, next after the last when not full)",
                         i, num_results, s->next_result, KV_SESSION_RESULTS);
        if (find_session(store, s->id) != NULL)
            return FAILF("snapshot holds session %" PRIu64 " twice", s->id);
        store->num_sessions++;
        for (uint32_t k = 0; k < num_results; k++) {
            const char *reply;
            uint32_t reply_len;
            if (!read_u64(r, &s->results[k].request_id) || !read_bytes(r, &reply, &reply_len))
                return FAILF("snapshot ends inside session %" PRIu32, i);
            s->results[k].reply = copy_bytes(reply, reply_len);
            s->results[k].reply_len = reply_len;
            s->num_results++;
        }
    }
    return 0;
}

static int decode_snapshot(struct kv_store *store, struct reader *r, char *error, size_t error_size)
{
    uint32_t magic = 0;
    uint64_t keys = 0;
    if (!read_u32(r, &magic) || magic != KV_SNAPSHOT_MAGIC)
        return FAILF("not a spindle-kv snapshot (magic %08" PRIx32 ")", magic);
    uint64_t deleted_version = 0;
    if (!read_u64(r, &store->now_ms) || !read_u64(r, &store->applied) ||
        !read_u64(r, &deleted_version) || !read_u64(r, &keys))
        return FAILF("snapshot of %zu bytes ends inside its header", r->len);
    if (keys > (r->len - r->at) / 24) /* two lengths and two times per key at least */
        return FAILF("snapshot claims %" PRIu64 " keys in %zu bytes", keys, r->len);
    for (uint64_t i = 0; i < keys; i++) {
        const char *key, *value;
        uint32_t key_len, value_len;
        uint64_t expire_ms, version;
        if (!read_bytes(r, &key, &key_len) || !read_bytes(r, &value, &value_len) ||
            !read_u64(r, &expire_ms) || !read_u64(r, &version))
            return FAILF("snapshot ends inside key %" PRIu64, i);
        if (*find_slot(store, key, key_len, key_hash(key, key_len)) != NULL)
            return FAILF("snapshot holds key %" PRIu64 " twice", i);
        kv_map_set(store, key, key_len, value, value_len, expire_ms)->version = version;
    }
    store->deleted_version = deleted_version;
    if (decode_sessions(store, r, error, error_size) != 0)
        return -1;
    if (r->at != r->len)
        return FAILF("%zu bytes after the snapshot's end", r->len - r->at);
    return 0;
}

int kv_snapshot_decode(struct kv_store *store, const void *data, size_t len, char *error,
                       size_t error_size)
{
    kv_store_free(store);
    kv_store_init(store);
    struct reader r = {data, len, 0};
    if (decode_snapshot(store, &r, error, error_size) != 0) {
        kv_store_free(store);
        kv_store_init(store);
        return -1;
    }
    return 0;
}
