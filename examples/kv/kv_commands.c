/* The commands of the state machine (kv_store.h, kv_map.h). */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv_map.h"
#include "kv_slot.h"

/* Largest value INCR and APPEND may build (bytes). */
#define KV_MAX_VALUE (512u << 20)

struct cmd_ctx {
    struct kv_store *store;
    const struct kv_arg *args;
    size_t count;
    uint64_t time_ms;
    struct kv_buf *reply;
};

typedef void (*cmd_fn)(struct cmd_ctx *ctx);

struct command {
    const char *name;
    int arity; /* > 0: exactly; < 0: at least -arity (the name counts) */
    enum kv_command_class class;
    cmd_fn run;
};

static bool arg_is(const struct kv_arg *arg, const char *word)
{
    size_t len = strlen(word);
    return arg->len == len && strncasecmp(arg->ptr, word, len) == 0;
}

/* Parses a signed 64-bit decimal the way Redis does (no spaces, no '+',
 * no leading zeros). */
static bool parse_i64(const char *text, size_t len, int64_t *out)
{
    size_t i = 0;
    bool negative = false;
    if (len > 0 && text[0] == '-') {
        negative = true;
        i = 1;
    }
    if (i == len || (text[i] == '0' && len - i > 1) || (negative && text[i] == '0'))
        return false;
    uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t value = 0;
    for (; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return false;
        unsigned digit = (unsigned)(text[i] - '0');
        if (value > (limit - digit) / 10)
            return false;
        value = value * 10 + digit;
    }
    *out = negative ? (int64_t)(0 - value) : (int64_t)value;
    return true;
}

static bool arg_i64(const struct kv_arg *arg, int64_t *out)
{
    return parse_i64(arg->ptr, arg->len, out);
}

static void reply_not_integer(struct cmd_ctx *ctx)
{
    kv_resp_error(ctx->reply, "ERR value is not an integer or out of range");
}

static void cmd_get(struct cmd_ctx *ctx)
{
    struct kv_entry *e = kv_map_find(ctx->store, ctx->args[1].ptr, ctx->args[1].len);
    if (e == NULL)
        kv_resp_null(ctx->reply);
    else
        kv_resp_bulk(ctx->reply, e->value, e->value_len);
}

/* SET key value [NX|XX] [EX seconds|PX milliseconds|KEEPTTL] [GET]. The
 * expiry time is absolute, from the proposer's clock in the operation. */
static void cmd_set(struct cmd_ctx *ctx)
{
    bool nx = false, xx = false, keepttl = false, get = false;
    uint64_t expire_ms = 0;
    for (size_t i = 3; i < ctx->count; i++) {
        const struct kv_arg *a = &ctx->args[i];
        if (arg_is(a, "NX") && !xx) {
            nx = true;
        } else if (arg_is(a, "XX") && !nx) {
            xx = true;
        } else if (arg_is(a, "GET")) {
            get = true;
        } else if (arg_is(a, "KEEPTTL") && expire_ms == 0) {
            keepttl = true;
        } else if ((arg_is(a, "EX") || arg_is(a, "PX")) && i + 1 < ctx->count && expire_ms == 0 &&
                   !keepttl) {
            int64_t amount;
            bool seconds = arg_is(a, "EX");
            if (!arg_i64(&ctx->args[i + 1], &amount)) {
                reply_not_integer(ctx);
                return;
            }
            if (amount <= 0 || (seconds && amount > INT64_MAX / 1000 / 2) ||
                amount > INT64_MAX / 2) {
                kv_resp_errorf(ctx->reply, "ERR invalid expire time in 'set' command: %" PRId64,
                               amount);
                return;
            }
            expire_ms = ctx->time_ms + (uint64_t)amount * (seconds ? 1000u : 1u);
            i++;
        } else {
            kv_resp_errorf(ctx->reply, "ERR syntax error at SET option '%.*s'",
                           (int)(a->len > 32 ? 32 : a->len), a->ptr);
            return;
        }
    }
    const struct kv_arg *key = &ctx->args[1], *value = &ctx->args[2];
    struct kv_entry *old = kv_map_find(ctx->store, key->ptr, key->len);
    if (get) {
        if (old == NULL)
            kv_resp_null(ctx->reply);
        else
            kv_resp_bulk(ctx->reply, old->value, old->value_len);
    }
    if ((nx && old != NULL) || (xx && old == NULL)) {
        if (!get)
            kv_resp_null(ctx->reply);
        return;
    }
    if (keepttl && old != NULL)
        expire_ms = old->expire_ms;
    kv_map_set(ctx->store, key->ptr, key->len, value->ptr, value->len, expire_ms);
    if (!get)
        kv_resp_simple(ctx->reply, "OK");
}

static void cmd_del(struct cmd_ctx *ctx)
{
    int64_t removed = 0;
    for (size_t i = 1; i < ctx->count; i++)
        removed += kv_map_delete(ctx->store, ctx->args[i].ptr, ctx->args[i].len) ? 1 : 0;
    kv_resp_integer(ctx->reply, removed);
}

static void cmd_exists(struct cmd_ctx *ctx)
{
    int64_t found = 0;
    for (size_t i = 1; i < ctx->count; i++)
        found += kv_map_find(ctx->store, ctx->args[i].ptr, ctx->args[i].len) != NULL ? 1 : 0;
    kv_resp_integer(ctx->reply, found);
}

static void incr_by(struct cmd_ctx *ctx, int64_t delta)
{
    const struct kv_arg *key = &ctx->args[1];
    struct kv_entry *e = kv_map_find(ctx->store, key->ptr, key->len);
    int64_t value = 0;
    if (e != NULL && !parse_i64(e->value, e->value_len, &value)) {
        reply_not_integer(ctx);
        return;
    }
    if ((delta > 0 && value > INT64_MAX - delta) || (delta < 0 && value < INT64_MIN - delta)) {
        kv_resp_error(ctx->reply, "ERR increment or decrement would overflow");
        return;
    }
    value += delta;
    char text[32];
    int n = snprintf(text, sizeof text, "%" PRId64, value);
    kv_map_set(ctx->store, key->ptr, key->len, text, (size_t)n, e != NULL ? e->expire_ms : 0);
    kv_resp_integer(ctx->reply, value);
}

static void cmd_incr(struct cmd_ctx *ctx)
{
    incr_by(ctx, 1);
}

static void cmd_decr(struct cmd_ctx *ctx)
{
    incr_by(ctx, -1);
}

static void cmd_incrby(struct cmd_ctx *ctx)
{
    int64_t delta;
    if (!arg_i64(&ctx->args[2], &delta)) {
        reply_not_integer(ctx);
        return;
    }
    incr_by(ctx, delta);
}

static void cmd_decrby(struct cmd_ctx *ctx)
{
    int64_t delta;
    if (!arg_i64(&ctx->args[2], &delta) || delta == INT64_MIN) {
        reply_not_integer(ctx);
        return;
    }
    incr_by(ctx, -delta);
}

static void cmd_mget(struct cmd_ctx *ctx)
{
    kv_resp_array(ctx->reply, ctx->count - 1);
    for (size_t i = 1; i < ctx->count; i++) {
        struct kv_entry *e = kv_map_find(ctx->store, ctx->args[i].ptr, ctx->args[i].len);
        if (e == NULL)
            kv_resp_null(ctx->reply);
        else
            kv_resp_bulk(ctx->reply, e->value, e->value_len);
    }
}

static void cmd_mset(struct cmd_ctx *ctx)
{
    if (ctx->count % 2 == 0) {
        kv_resp_error(ctx->reply, "ERR wrong number of arguments for 'mset' command");
        return;
    }
    for (size_t i = 1; i + 1 < ctx->count; i += 2)
        kv_map_set(ctx->store, ctx->args[i].ptr, ctx->args[i].len, ctx->args[i + 1].ptr,
                   ctx->args[i + 1].len, 0);
    kv_resp_simple(ctx->reply, "OK");
}

static void cmd_append(struct cmd_ctx *ctx)
{
    const struct kv_arg *key = &ctx->args[1], *more = &ctx->args[2];
    struct kv_entry *e = kv_map_find(ctx->store, key->ptr, key->len);
    if (e == NULL) {
        kv_map_set(ctx->store, key->ptr, key->len, more->ptr, more->len, 0);
        kv_resp_integer(ctx->reply, (int64_t)more->len);
        return;
    }
    if (e->value_len + more->len > KV_MAX_VALUE) {
        kv_resp_errorf(ctx->reply, "ERR string exceeds maximum allowed size (%u bytes)",
                       KV_MAX_VALUE);
        return;
    }
    char *value = realloc(e->value, e->value_len + more->len + 1);
    if (value == NULL) {
        kv_resp_error(ctx->reply, "ERR out of memory");
        return;
    }
    memcpy(value + e->value_len, more->ptr, more->len);
    e->version = ctx->store->applied;
    e->value = value;
    e->value_len += more->len;
    kv_resp_integer(ctx->reply, (int64_t)e->value_len);
}

static void cmd_strlen(struct cmd_ctx *ctx)
{
    struct kv_entry *e = kv_map_find(ctx->store, ctx->args[1].ptr, ctx->args[1].len);
    kv_resp_integer(ctx->reply, e != NULL ? (int64_t)e->value_len : 0);
}

/* Keys counted by DBSIZE, KEYS and SCAN: the live ones. */
static int64_t live_keys(const struct kv_store *store)
{
    int64_t live = 0;
    if (store->num_expiring == 0)
        return (int64_t)store->num_keys;
    for (size_t b = 0; b < store->num_buckets; b++)
        for (const struct kv_entry *e = store->buckets[b]; e != NULL; e = e->next)
            live += kv_entry_live(store, e) ? 1 : 0;
    return live;
}

static void cmd_dbsize(struct cmd_ctx *ctx)
{
    kv_resp_integer(ctx->reply, live_keys(ctx->store));
}

static void cmd_keys(struct cmd_ctx *ctx)
{
    const struct kv_arg *pattern = &ctx->args[1];
    struct kv_buf items = {0};
    size_t found = 0;
    for (size_t b = 0; b < ctx->store->num_buckets; b++) {
        for (const struct kv_entry *e = ctx->store->buckets[b]; e != NULL; e = e->next) {
            if (kv_entry_live(ctx->store, e) &&
                kv_glob_match(pattern->ptr, pattern->len, e->key, e->key_len)) {
                kv_resp_bulk(&items, e->key, e->key_len);
                found++;
            }
        }
    }
    kv_resp_array(ctx->reply, found);
    kv_buf_append(ctx->reply, items.data, items.len);
    kv_buf_free(&items);
}

/* SCAN cursor [MATCH pattern] [COUNT n]: the cursor is a bucket index. The
 * table only doubles, so a key present for the whole scan is returned at
 * least once (a doubling splits bucket b into b and b + old size). */
static void cmd_scan(struct cmd_ctx *ctx)
{
    int64_t cursor, count = 10;
    const struct kv_arg *pattern = NULL;
    if (!arg_i64(&ctx->args[1], &cursor) || cursor < 0) {
        kv_resp_error(ctx->reply, "ERR invalid cursor");
        return;
    }
    for (size_t i = 2; i < ctx->count; i += 2) {
        if (i + 1 >= ctx->count) {
            kv_resp_error(ctx->reply, "ERR syntax error");
            return;
        }
        if (arg_is(&ctx->args[i], "MATCH")) {
            pattern = &ctx->args[i + 1];
        } else if (arg_is(&ctx->args[i], "COUNT")) {
            if (!arg_i64(&ctx->args[i + 1], &count) || count < 1) {
                kv_resp_error(ctx->reply, "ERR value is out of range, must be positive");
                return;
            }
        } else {
            kv_resp_errorf(ctx->reply, "ERR syntax error at SCAN option '%.*s'",
                           (int)(ctx->args[i].len > 32 ? 32 : ctx->args[i].len), ctx->args[i].ptr);
            return;
        }
    }
    struct kv_buf items = {0};
    size_t found = 0;
    size_t bucket = (size_t)cursor;
    for (int64_t visited = 0; bucket < ctx->store->num_buckets && visited < count;
         bucket++, visited++) {
        for (const struct kv_entry *e = ctx->store->buckets[bucket]; e != NULL; e = e->next) {
            if (kv_entry_live(ctx->store, e) &&
                (pattern == NULL ||
                 kv_glob_match(pattern->ptr, pattern->len, e->key, e->key_len))) {
                kv_resp_bulk(&items, e->key, e->key_len);
                found++;
            }
        }
    }
    char next[32];
    int n = snprintf(next, sizeof next, "%zu", bucket >= ctx->store->num_buckets ? 0 : bucket);
    kv_resp_array(ctx->reply, 2);
    kv_resp_bulk(ctx->reply, next, (size_t)n);
    kv_resp_array(ctx->reply, found);
    kv_buf_append(ctx->reply, items.data, items.len);
    kv_buf_free(&items);
}

static void cmd_flushall(struct cmd_ctx *ctx)
{
    if (ctx->count > 2 && !arg_is(&ctx->args[1], "SYNC") && !arg_is(&ctx->args[1], "ASYNC")) {
        kv_resp_error(ctx->reply, "ERR syntax error");
        return;
    }
    kv_map_clear(ctx->store);
    kv_resp_simple(ctx->reply, "OK");
}

/* CAS key expected new: sets key to new when its value is expected; 1 when
 * it did, 0 when the value differed or the key was absent. */
static void cmd_cas(struct cmd_ctx *ctx)
{
    const struct kv_arg *key = &ctx->args[1], *expected = &ctx->args[2], *value = &ctx->args[3];
    struct kv_entry *e = kv_map_find(ctx->store, key->ptr, key->len);
    if (e == NULL || e->value_len != expected->len ||
        memcmp(e->value, expected->ptr, expected->len) != 0) {
        kv_resp_integer(ctx->reply, 0);
        return;
    }
    kv_map_set(ctx->store, key->ptr, key->len, value->ptr, value->len, e->expire_ms);
    kv_resp_integer(ctx->reply, 1);
}

static void ttl_reply(struct cmd_ctx *ctx, bool millis)
{
    struct kv_entry *e = kv_map_find(ctx->store, ctx->args[1].ptr, ctx->args[1].len);
    if (e == NULL) {
        kv_resp_integer(ctx->reply, -2);
        return;
    }
    if (e->expire_ms == 0) {
        kv_resp_integer(ctx->reply, -1);
        return;
    }
    /* Against the later of the ordered clock (the last tick) and the
     * proposer's time in the operation: both are the same at every
     * replica. A key past its time lives until the next tick: 0 left. */
    uint64_t reference = ctx->store->now_ms > ctx->time_ms ? ctx->store->now_ms : ctx->time_ms;
    uint64_t left = e->expire_ms > reference ? e->expire_ms - reference : 0;
    kv_resp_integer(ctx->reply, (int64_t)(millis ? left : (left + 500) / 1000));
}

static void cmd_ttl(struct cmd_ctx *ctx)
{
    ttl_reply(ctx, false);
}

static void cmd_pttl(struct cmd_ctx *ctx)
{
    ttl_reply(ctx, true);
}

/* The expiry time of a relative amount given to a command (seconds or
 * milliseconds after the proposer's clock), or false with Redis's error
 * when it does not fit. */
static bool expiry_after(struct cmd_ctx *ctx, const struct kv_arg *arg, bool seconds,
                         const char *command, int64_t *amount, uint64_t *expire_ms)
{
    if (!arg_i64(arg, amount)) {
        reply_not_integer(ctx);
        return false;
    }
    if ((seconds && (*amount > INT64_MAX / 1000 / 2 || *amount < INT64_MIN / 1000 / 2)) ||
        *amount > INT64_MAX / 2 || *amount < INT64_MIN / 2) {
        kv_resp_errorf(ctx->reply, "ERR invalid expire time in '%s' command", command);
        return false;
    }
    int64_t delta = *amount * (seconds ? 1000 : 1);
    *expire_ms = delta > 0 ? ctx->time_ms + (uint64_t)delta : 0;
    return true;
}

/* EXPIRE key seconds, PEXPIRE key milliseconds: 1 when the key exists (a
 * time not in the future deletes it, as in Redis), else 0. */
static void expire_command(struct cmd_ctx *ctx, bool seconds, const char *command)
{
    int64_t amount;
    uint64_t expire_ms;
    if (!expiry_after(ctx, &ctx->args[2], seconds, command, &amount, &expire_ms))
        return;
    const struct kv_arg *key = &ctx->args[1];
    struct kv_entry *e = kv_map_find(ctx->store, key->ptr, key->len);
    if (e == NULL) {
        kv_resp_integer(ctx->reply, 0);
        return;
    }
    if (amount <= 0)
        kv_map_delete(ctx->store, key->ptr, key->len);
    else
        kv_map_set_expiry(ctx->store, e, expire_ms);
    kv_resp_integer(ctx->reply, 1);
}

static void cmd_expire(struct cmd_ctx *ctx)
{
    expire_command(ctx, true, "expire");
}

static void cmd_pexpire(struct cmd_ctx *ctx)
{
    expire_command(ctx, false, "pexpire");
}

/* PERSIST key: 1 when the key had an expiry time and has none now. */
static void cmd_persist(struct cmd_ctx *ctx)
{
    struct kv_entry *e = kv_map_find(ctx->store, ctx->args[1].ptr, ctx->args[1].len);
    bool had = e != NULL && e->expire_ms != 0;
    if (had)
        kv_map_set_expiry(ctx->store, e, 0);
    kv_resp_integer(ctx->reply, had ? 1 : 0);
}

/* SETEX key seconds value, PSETEX key milliseconds value. */
static void setex_command(struct cmd_ctx *ctx, bool seconds, const char *command)
{
    int64_t amount;
    uint64_t expire_ms;
    if (!expiry_after(ctx, &ctx->args[2], seconds, command, &amount, &expire_ms))
        return;
    if (amount <= 0) {
        kv_resp_errorf(ctx->reply, "ERR invalid expire time in '%s' command", command);
        return;
    }
    const struct kv_arg *key = &ctx->args[1], *value = &ctx->args[3];
    kv_map_set(ctx->store, key->ptr, key->len, value->ptr, value->len, expire_ms);
    kv_resp_simple(ctx->reply, "OK");
}

static void cmd_setex(struct cmd_ctx *ctx)
{
    setex_command(ctx, true, "setex");
}

static void cmd_psetex(struct cmd_ctx *ctx)
{
    setex_command(ctx, false, "psetex");
}

/* SETNX key value: 1 when the key was set (it did not exist). */
static void cmd_setnx(struct cmd_ctx *ctx)
{
    const struct kv_arg *key = &ctx->args[1], *value = &ctx->args[2];
    if (kv_map_find(ctx->store, key->ptr, key->len) != NULL) {
        kv_resp_integer(ctx->reply, 0);
        return;
    }
    kv_map_set(ctx->store, key->ptr, key->len, value->ptr, value->len, 0);
    kv_resp_integer(ctx->reply, 1);
}

static void cmd_debug(struct cmd_ctx *ctx)
{
    if (!arg_is(&ctx->args[1], "DIGEST") || ctx->count != 2) {
        kv_resp_errorf(ctx->reply, "ERR DEBUG subcommand '%.*s' not supported (only DIGEST)",
                       (int)(ctx->args[1].len > 32 ? 32 : ctx->args[1].len), ctx->args[1].ptr);
        return;
    }
    char text[17];
    snprintf(text, sizeof text, "%016" PRIx64, kv_store_digest(ctx->store));
    kv_resp_bulk(ctx->reply, text, 16);
}

static const struct command commands[] = {
    {"GET", 2, KV_CMD_READ, cmd_get},          {"SET", -3, KV_CMD_WRITE, cmd_set},
    {"DEL", -2, KV_CMD_WRITE, cmd_del},        {"EXISTS", -2, KV_CMD_READ, cmd_exists},
    {"INCR", 2, KV_CMD_WRITE, cmd_incr},       {"DECR", 2, KV_CMD_WRITE, cmd_decr},
    {"INCRBY", 3, KV_CMD_WRITE, cmd_incrby},   {"DECRBY", 3, KV_CMD_WRITE, cmd_decrby},
    {"MGET", -2, KV_CMD_READ, cmd_mget},       {"MSET", -3, KV_CMD_WRITE, cmd_mset},
    {"APPEND", 3, KV_CMD_WRITE, cmd_append},   {"STRLEN", 2, KV_CMD_READ, cmd_strlen},
    {"DBSIZE", 1, KV_CMD_READ, cmd_dbsize},    {"KEYS", 2, KV_CMD_READ, cmd_keys},
    {"SCAN", -2, KV_CMD_READ, cmd_scan},       {"FLUSHALL", -1, KV_CMD_WRITE, cmd_flushall},
    {"CAS", 4, KV_CMD_WRITE, cmd_cas},         {"TTL", 2, KV_CMD_READ, cmd_ttl},
    {"PTTL", 2, KV_CMD_READ, cmd_pttl},        {"DEBUG", -2, KV_CMD_READ, cmd_debug},
    {"EXPIRE", 3, KV_CMD_WRITE, cmd_expire},   {"PEXPIRE", 3, KV_CMD_WRITE, cmd_pexpire},
    {"PERSIST", 2, KV_CMD_WRITE, cmd_persist}, {"SETEX", 4, KV_CMD_WRITE, cmd_setex},
    {"PSETEX", 4, KV_CMD_WRITE, cmd_psetex},   {"SETNX", 3, KV_CMD_WRITE, cmd_setnx},
};

void kv_command_table(struct kv_buf *reply)
{
    size_t count = sizeof commands / sizeof commands[0];
    kv_resp_array(reply, count);
    for (size_t i = 0; i < count; i++) {
        const struct command *c = &commands[i];
        char name[16];
        size_t len = strlen(c->name);
        for (size_t k = 0; k <= len; k++)
            name[k] = (char)tolower((unsigned char)c->name[k]);
        struct kv_arg arg = {c->name, len};
        unsigned first = 0, step = 0;
        bool keys = kv_command_key_spec(&arg, &first, &step);
        kv_resp_array(reply, 6);
        kv_resp_bulk(reply, name, len);
        kv_resp_integer(reply, c->arity);
        kv_resp_array(reply, 1);
        kv_resp_simple(reply, c->class == KV_CMD_WRITE ? "write" : "readonly");
        kv_resp_integer(reply, keys ? first : 0);
        kv_resp_integer(reply, !keys ? 0 : step == 0 ? (int64_t)first : -1);
        kv_resp_integer(reply, !keys ? 0 : step == 0 ? 1 : step);
    }
}

static const struct command *lookup(const struct kv_arg *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (arg_is(name, commands[i].name))
            return &commands[i];
    return NULL;
}

enum kv_command_class kv_command_class(const struct kv_arg *name)
{
    const struct command *command = lookup(name);
    return command != NULL ? command->class : KV_CMD_UNKNOWN;
}

static void reply_unknown(struct kv_buf *reply, const struct kv_arg *args, size_t count)
{
    kv_resp_errorf(reply, "ERR unknown command '%.*s', with args beginning with: %s%.*s%s",
                   (int)(args[0].len > 64 ? 64 : args[0].len), args[0].ptr, count > 1 ? "'" : "",
                   count > 1 ? (int)(args[1].len > 64 ? 64 : args[1].len) : 0,
                   count > 1 ? args[1].ptr : "", count > 1 ? "'" : "");
}

bool kv_command_valid(const struct kv_arg *args, size_t count, struct kv_buf *reply)
{
    const struct command *command = count > 0 ? lookup(&args[0]) : NULL;
    if (command == NULL) {
        if (count > 0)
            reply_unknown(reply, args, count);
        else
            kv_resp_error(reply, "ERR empty command");
        return false;
    }
    if ((command->arity > 0 && count != (size_t)command->arity) ||
        (command->arity < 0 && count < (size_t)-command->arity)) {
        kv_resp_errorf(reply, "ERR wrong number of arguments for '%s' command", command->name);
        return false;
    }
    return true;
}

void kv_execute(struct kv_store *store, const struct kv_arg *args, size_t count, uint64_t time_ms,
                bool read_only, struct kv_buf *reply)
{
    const struct command *command = lookup(&args[0]);
    if (command == NULL) {
        reply_unknown(reply, args, count);
        return;
    }
    if ((command->arity > 0 && count != (size_t)command->arity) ||
        (command->arity < 0 && count < (size_t)-command->arity)) {
        kv_resp_errorf(reply, "ERR wrong number of arguments for '%s' command", command->name);
        return;
    }
    if (read_only && command->class != KV_CMD_READ) {
        kv_resp_errorf(reply, "ERR '%s' is not a read command", command->name);
        return;
    }
    struct cmd_ctx ctx = {store, args, count, time_ms, reply};
    command->run(&ctx);
}

/* --- glob ------------------------------------------------------------ */

/* Matches one [...] set at pattern[*at] against c; *at moves past it. */
static bool match_set(const char *pattern, size_t len, size_t *at, char c)
{
    size_t i = *at + 1;
    bool negate = i < len && pattern[i] == '^';
    bool found = false;
    if (negate)
        i++;
    while (i < len && pattern[i] != ']') {
        if (pattern[i] == '\\' && i + 1 < len) {
            i++;
            found = found || pattern[i] == c;
            i++;
        } else if (i + 2 < len && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
            char lo = pattern[i], hi = pattern[i + 2];
            if (lo > hi) {
                char t = lo;
                lo = hi;
                hi = t;
            }
            found = found || (c >= lo && c <= hi);
            i += 3;
        } else {
            found = found || pattern[i] == c;
            i++;
        }
    }
    *at = i; /* at the ']' (or the end) */
    return negate ? !found : found;
}

bool kv_glob_match(const char *pattern, size_t pattern_len, const char *text, size_t text_len)
{
    size_t p = 0, t = 0;
    size_t star_p = SIZE_MAX, star_t = 0;
    while (t < text_len) {
        if (p < pattern_len && pattern[p] == '*') {
            star_p = p++;
            star_t = t;
            continue;
        }
        if (p < pattern_len) {
            size_t next = p;
            bool ok;
            if (pattern[p] == '?') {
                ok = true;
            } else if (pattern[p] == '[') {
                ok = match_set(pattern, pattern_len, &next, text[t]);
            } else if (pattern[p] == '\\' && p + 1 < pattern_len) {
                next = p + 1;
                ok = pattern[next] == text[t];
            } else {
                ok = pattern[p] == text[t];
            }
            if (ok) {
                p = next + 1;
                t++;
                continue;
            }
        }
        if (star_p == SIZE_MAX)
            return false;
        p = star_p + 1;
        t = ++star_t;
    }
    while (p < pattern_len && pattern[p] == '*')
        p++;
    return p >= pattern_len;
}
