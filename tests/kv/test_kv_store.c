/* spindle-kv's state machine (examples/kv/kv_store.h): commands applied as
 * encoded operations, expiry by ordered ticks only, sessions that run a
 * request once, digests and snapshots, and decoders that refuse bad bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kv_store.h"

static struct kv_buf reply_text;
static struct kv_op op;

/* Applies the command given as NULL-terminated words at time_ms in
 * session/request (0: none); returns its reply as a C string. */
static const char *apply_at(struct kv_store *store, uint64_t time_ms, uint64_t session,
                            uint64_t request, ...)
{
    struct kv_arg args[16];
    size_t count = 0;
    va_list words;
    va_start(words, request);
    for (const char *w = va_arg(words, const char *); w != NULL; w = va_arg(words, const char *)) {
        args[count].ptr = w;
        args[count].len = strlen(w);
        count++;
    }
    va_end(words);
    struct kv_buf encoded = {0};
    kv_op_encode(&encoded, KV_OP_COMMAND, 1, time_ms, session, request, args, count);
    reply_text.len = 0;
    kv_store_apply(store, encoded.data, encoded.len, &op, &reply_text);
    kv_buf_free(&encoded);
    kv_buf_append(&reply_text, "", 1);
    return reply_text.data;
}

#define APPLY(store, ...) apply_at((store), 1000, 0, 0, __VA_ARGS__, (const char *)NULL)

static void tick(struct kv_store *store, uint64_t time_ms)
{
    struct kv_buf encoded = {0};
    kv_op_encode(&encoded, KV_OP_TICK, 0, time_ms, 0, 0, NULL, 0);
    reply_text.len = 0;
    kv_store_apply(store, encoded.data, encoded.len, &op, &reply_text);
    assert_int_equal(reply_text.len, 0);
    kv_buf_free(&encoded);
}

static int setup(void **state)
{
    static struct kv_store store;
    kv_store_init(&store);
    *state = &store;
    return 0;
}

static int teardown(void **state)
{
    kv_store_free(*state);
    kv_buf_free(&reply_text);
    kv_argv_free(&op.argv);
    return 0;
}

static void test_set_get_del_and_options(void **state)
{
    struct kv_store *s = *state;
    assert_string_equal(APPLY(s, "SET", "k", "v"), "+OK\r\n");
    assert_string_equal(APPLY(s, "get", "k"), "$1\r\nv\r\n");
    assert_string_equal(APPLY(s, "SET", "k", "w", "NX"), "$-1\r\n");
    assert_string_equal(APPLY(s, "SET", "n", "w", "XX"), "$-1\r\n");
    assert_string_equal(APPLY(s, "SET", "k", "w", "XX", "GET"), "$1\r\nv\r\n");
    assert_string_equal(APPLY(s, "SET", "k", "w", "BOGUS"),
                        "-ERR syntax error at SET option 'BOGUS'\r\n");
    assert_string_equal(APPLY(s, "APPEND", "k", "xy"), ":3\r\n");
    assert_string_equal(APPLY(s, "STRLEN", "k"), ":3\r\n");
    assert_string_equal(APPLY(s, "MSET", "a", "1", "b", "2"), "+OK\r\n");
    assert_string_equal(APPLY(s, "MGET", "a", "zz", "b"), "*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n");
    assert_string_equal(APPLY(s, "EXISTS", "a", "b", "zz"), ":2\r\n");
    assert_string_equal(APPLY(s, "DBSIZE"), ":3\r\n");
    assert_string_equal(APPLY(s, "DEL", "a", "zz"), ":1\r\n");
    assert_string_equal(APPLY(s, "GET"), "-ERR wrong number of arguments for 'GET' command\r\n");
    assert_string_equal(APPLY(s, "FLUSHALL"), "+OK\r\n");
    assert_string_equal(APPLY(s, "DBSIZE"), ":0\r\n");
}

/* An overwrite with a value of the same size reuses the old value's
 * memory (kv_map_set): the value, its expiry and its version are still
 * the new write's. */
static void test_same_size_overwrite_takes_value_expiry_and_version(void **state)
{
    struct kv_store *s = *state;
    APPLY(s, "SET", "k", "aaaa");
    uint64_t before = kv_store_version(s, "k", 1);
    assert_string_equal(APPLY(s, "SET", "k", "bbbb"), "+OK\r\n");
    assert_string_equal(APPLY(s, "GET", "k"), "$4\r\nbbbb\r\n");
    assert_true(kv_store_version(s, "k", 1) > before);
    assert_string_equal(APPLY(s, "SET", "k", "cc"), "+OK\r\n");
    assert_string_equal(APPLY(s, "GET", "k"), "$2\r\ncc\r\n");
    apply_at(s, 1000, 0, 0, "SET", "k", "dd", "PX", "10", NULL);
    assert_string_equal(APPLY(s, "PTTL", "k"), ":10\r\n");
    /* A plain SET clears the expiry, in place too. */
    assert_string_equal(APPLY(s, "SET", "k", "ee"), "+OK\r\n");
    assert_string_equal(APPLY(s, "PTTL", "k"), ":-1\r\n");
    assert_string_equal(APPLY(s, "SET", "k", "ff", "KEEPTTL"), "+OK\r\n");
    assert_string_equal(APPLY(s, "APPEND", "k", "g"), ":3\r\n");
    assert_string_equal(APPLY(s, "GET", "k"), "$3\r\nffg\r\n");
}

static void test_incr_checks_integers_and_overflow(void **state)
{
    struct kv_store *s = *state;
    assert_string_equal(APPLY(s, "INCR", "c"), ":1\r\n");
    assert_string_equal(APPLY(s, "INCRBY", "c", "41"), ":42\r\n");
    assert_string_equal(APPLY(s, "DECRBY", "c", "2"), ":40\r\n");
    assert_string_equal(APPLY(s, "DECR", "c"), ":39\r\n");
    assert_string_equal(APPLY(s, "INCRBY", "c", "x1"),
                        "-ERR value is not an integer or out of range\r\n");
    assert_string_equal(APPLY(s, "SET", "c", "9223372036854775807"), "+OK\r\n");
    assert_string_equal(APPLY(s, "INCR", "c"), "-ERR increment or decrement would overflow\r\n");
    assert_string_equal(APPLY(s, "SET", "t", "007"), "+OK\r\n");
    assert_string_equal(APPLY(s, "INCR", "t"), "-ERR value is not an integer or out of range\r\n");
}

static void test_cas_swaps_only_the_expected_value(void **state)
{
    struct kv_store *s = *state;
    assert_string_equal(APPLY(s, "CAS", "k", "a", "b"), ":0\r\n");
    APPLY(s, "SET", "k", "a");
    assert_string_equal(APPLY(s, "CAS", "k", "x", "b"), ":0\r\n");
    assert_string_equal(APPLY(s, "CAS", "k", "a", "b"), ":1\r\n");
    assert_string_equal(APPLY(s, "GET", "k"), "$1\r\nb\r\n");
}

static void test_keys_expire_only_by_ordered_ticks(void **state)
{
    struct kv_store *s = *state;
    /* Proposed at 1000 with PX 500: expires at 1500 of the ordered clock. */
    assert_string_equal(apply_at(s, 1000, 0, 0, "SET", "e", "v", "PX", "500", NULL), "+OK\r\n");
    assert_string_equal(apply_at(s, 1000, 0, 0, "SET", "f", "v", "EX", "1", NULL), "+OK\r\n");
    assert_string_equal(APPLY(s, "SET", "e", "v", "PX", "0"),
                        "-ERR invalid expire time in 'set' command: 0\r\n");
    uint64_t before = kv_store_digest(s);
    tick(s, 1499);
    assert_string_equal(APPLY(s, "EXISTS", "e"), ":1\r\n");
    assert_string_equal(APPLY(s, "PTTL", "e"), ":1\r\n");
    assert_int_equal(kv_store_digest(s), before);
    /* A write proposed later does not move the clock: only ticks do. */
    apply_at(s, 99999, 0, 0, "SET", "x", "1", NULL);
    assert_string_equal(APPLY(s, "EXISTS", "e"), ":1\r\n");
    tick(s, 1500);
    assert_string_equal(APPLY(s, "EXISTS", "e"), ":0\r\n");
    assert_int_equal(kv_store_size(s), 2);
    assert_string_equal(APPLY(s, "TTL", "f"), ":1\r\n");
    tick(s, 1200); /* a late tick does not move the clock back */
    assert_string_equal(APPLY(s, "EXISTS", "e"), ":0\r\n");
    tick(s, 2000);
    assert_int_equal(kv_store_size(s), 1);
    assert_string_equal(APPLY(s, "TTL", "x"), ":-1\r\n");
    assert_string_equal(APPLY(s, "TTL", "f"), ":-2\r\n");
}

static void test_expire_persist_setex_and_setnx_use_the_ordered_clock(void **state)
{
    struct kv_store *s = *state;
    APPLY(s, "SET", "k", "v");
    assert_string_equal(APPLY(s, "EXPIRE", "none", "10"), ":0\r\n");
    /* Proposed at 1000: expires at 1000 + 2000 of the ordered clock. */
    assert_string_equal(apply_at(s, 1000, 0, 0, "EXPIRE", "k", "2", NULL), ":1\r\n");
    assert_int_equal(s->num_expiring, 1);
    tick(s, 2999);
    assert_string_equal(APPLY(s, "EXISTS", "k"), ":1\r\n");
    assert_string_equal(APPLY(s, "PERSIST", "k"), ":1\r\n");
    assert_string_equal(APPLY(s, "PERSIST", "k"), ":0\r\n");
    assert_int_equal(s->num_expiring, 0);
    tick(s, 3000);
    assert_string_equal(APPLY(s, "EXISTS", "k"), ":1\r\n");
    assert_string_equal(apply_at(s, 3000, 0, 0, "PEXPIRE", "k", "5", NULL), ":1\r\n");
    tick(s, 3005);
    assert_string_equal(APPLY(s, "EXISTS", "k"), ":0\r\n");
    /* A time not in the future deletes the key, as in Redis. */
    APPLY(s, "SET", "gone", "v");
    assert_string_equal(APPLY(s, "EXPIRE", "gone", "-1"), ":1\r\n");
    assert_string_equal(APPLY(s, "EXISTS", "gone"), ":0\r\n");
    assert_string_equal(APPLY(s, "EXPIRE", "k", "x"),
                        "-ERR value is not an integer or out of range\r\n");
    assert_string_equal(APPLY(s, "EXPIRE", "k", "9223372036854775807"),
                        "-ERR invalid expire time in 'expire' command\r\n");
    assert_string_equal(apply_at(s, 4000, 0, 0, "PSETEX", "p", "100", "v", NULL), "+OK\r\n");
    assert_string_equal(APPLY(s, "SETEX", "p", "0", "v"),
                        "-ERR invalid expire time in 'setex' command\r\n");
    tick(s, 4099);
    assert_string_equal(APPLY(s, "GET", "p"), "$1\r\nv\r\n");
    tick(s, 4100);
    assert_string_equal(APPLY(s, "GET", "p"), "$-1\r\n");
    assert_string_equal(APPLY(s, "SETNX", "n", "1"), ":1\r\n");
    assert_string_equal(APPLY(s, "SETNX", "n", "2"), ":0\r\n");
    assert_string_equal(APPLY(s, "GET", "n"), "$1\r\n1\r\n");
}

static void test_session_request_runs_once(void **state)
{
    struct kv_store *s = *state;
    assert_string_equal(apply_at(s, 1, 7, 1, "INCR", "c", NULL), ":1\r\n");
    assert_string_equal(apply_at(s, 1, 7, 1, "INCR", "c", NULL), ":1\r\n");
    assert_string_equal(apply_at(s, 1, 8, 1, "INCR", "c", NULL), ":2\r\n");
    assert_string_equal(apply_at(s, 1, 7, 2, "INCR", "c", NULL), ":3\r\n");
    assert_string_equal(APPLY(s, "GET", "c"), "$1\r\n3\r\n");
    for (uint64_t r = 3; r < 3 + KV_SESSION_RESULTS; r++)
        apply_at(s, 1, 7, r, "INCR", "d", NULL);
    /* Request 2's result is forgotten: it must not run again. */
    const char *old = apply_at(s, 1, 7, 2, "INCR", "c", NULL);
    assert_non_null(strstr(old, "ERR request 2 of session 7 is older"));
    assert_string_equal(APPLY(s, "GET", "c"), "$1\r\n3\r\n");
}

/* Applies MSET of keys k0..k299 (in reverse order when reverse): one
 * operation, so every key gets the same version. */
static void mset_300(struct kv_store *store, bool reverse)
{
    static char keys[300][8];
    struct kv_arg args[601] = {{"MSET", 4}};
    for (int i = 0; i < 300; i++) {
        int k = reverse ? 299 - i : i;
        snprintf(keys[k], sizeof keys[k], "k%d", k);
        args[1 + 2 * i] = (struct kv_arg){keys[k], strlen(keys[k])};
        args[2 + 2 * i] = (struct kv_arg){"v", 1};
    }
    struct kv_buf encoded = {0};
    kv_op_encode(&encoded, KV_OP_COMMAND, 1, 1000, 0, 0, args, 601);
    reply_text.len = 0;
    kv_store_apply(store, encoded.data, encoded.len, &op, &reply_text);
    kv_buf_free(&encoded);
}

static void test_digest_ignores_layout_and_sees_versions_and_expiry(void **state)
{
    struct kv_store *s = *state;
    struct kv_store other;
    kv_store_init(&other);
    mset_300(s, false);
    mset_300(&other, true); /* other chains in the buckets */
    assert_int_equal(kv_store_digest(s), kv_store_digest(&other));
    APPLY(&other, "SET", "tmp", "1");
    APPLY(&other, "DEL", "tmp");
    APPLY(s, "SET", "tmp", "1");
    APPLY(s, "SET", "tmp", "1");
    APPLY(s, "DEL", "tmp");
    /* The same map, but tmp was removed by a later operation in s. */
    assert_int_not_equal(kv_store_digest(s), kv_store_digest(&other));
    kv_store_free(&other);
    kv_store_init(&other);
    mset_300(&other, true);
    APPLY(&other, "SET", "tmp", "1");
    APPLY(&other, "SET", "tmp", "1");
    APPLY(&other, "DEL", "tmp");
    assert_int_equal(kv_store_digest(s), kv_store_digest(&other));
    APPLY(s, "SET", "k1", "v", "EX", "100");
    assert_int_not_equal(kv_store_digest(s), kv_store_digest(&other));
    APPLY(&other, "SET", "k1", "v", "EX", "100");
    assert_int_equal(kv_store_digest(s), kv_store_digest(&other));
    kv_store_free(&other);
}

/* Applies a transaction (KV_OP_EXEC) whose arguments are the given words
 * in session/request (0: none); returns its reply as a C string. */
static const char *exec_in(struct kv_store *store, uint64_t session, uint64_t request, ...)
{
    struct kv_arg args[32];
    size_t count = 0;
    va_list words;
    va_start(words, request);
    for (const char *w = va_arg(words, const char *); w != NULL; w = va_arg(words, const char *)) {
        args[count].ptr = w;
        args[count].len = strlen(w);
        count++;
    }
    va_end(words);
    struct kv_buf encoded = {0};
    kv_op_encode(&encoded, KV_OP_EXEC, 1, 1000, session, request, args, count);
    reply_text.len = 0;
    kv_store_apply(store, encoded.data, encoded.len, &op, &reply_text);
    kv_buf_free(&encoded);
    kv_buf_append(&reply_text, "", 1);
    return reply_text.data;
}

#define EXEC(store, ...) exec_in((store), 0, 0, __VA_ARGS__, (const char *)NULL)

static void test_exec_runs_its_commands_in_one_step(void **state)
{
    struct kv_store *s = *state;
    uint64_t applied = s->applied;
    assert_string_equal(EXEC(s, "0", "3", "SET", "a", "1", "2", "INCR", "a", "2", "GET", "a"),
                        "*3\r\n+OK\r\n:2\r\n$1\r\n2\r\n");
    assert_int_equal(s->applied, applied + 1);
    /* An error while running is that command's reply; the others run. */
    assert_string_equal(EXEC(s, "0", "3", "SET", "t", "x", "2", "INCR", "t", "2", "INCR", "a"),
                        "*3\r\n+OK\r\n-ERR value is not an integer or out of range\r\n:3\r\n");
    assert_string_equal(EXEC(s, "0"), "*0\r\n");
    /* No nesting: EXEC inside is an unknown command. */
    assert_non_null(strstr(EXEC(s, "0", "1", "EXEC"), "-ERR unknown command 'EXEC'"));
    /* Under a session it runs once. */
    assert_string_equal(exec_in(s, 5, 1, "0", "2", "INCR", "a", NULL), "*1\r\n:4\r\n");
    assert_string_equal(exec_in(s, 5, 1, "0", "2", "INCR", "a", NULL), "*1\r\n:4\r\n");
    assert_string_equal(APPLY(s, "GET", "a"), "$1\r\n4\r\n");
}

static void test_exec_aborts_when_a_watched_key_changed(void **state)
{
    struct kv_store *s = *state;
    char seen[24], seen_absent[24];
    APPLY(s, "SET", "w", "1");
    snprintf(seen, sizeof seen, "%llu", (unsigned long long)kv_store_version(s, "w", 1));
    snprintf(seen_absent, sizeof seen_absent, "%llu",
             (unsigned long long)kv_store_version(s, "none", 4));
    APPLY(s, "SET", "other", "1"); /* another key: no abort */
    assert_string_equal(EXEC(s, "2", "w", seen, "none", seen_absent, "2", "INCR", "w"),
                        "*1\r\n:2\r\n");
    /* The transaction's own write changed w: the old version is stale. */
    assert_string_equal(EXEC(s, "1", "w", seen, "2", "INCR", "w"), "*-1\r\n");
    assert_string_equal(APPLY(s, "GET", "w"), "$1\r\n2\r\n");
    /* Rewriting the same value, or only the expiry, is a change. */
    snprintf(seen, sizeof seen, "%llu", (unsigned long long)kv_store_version(s, "w", 1));
    APPLY(s, "SET", "w", "2");
    assert_string_equal(EXEC(s, "1", "w", seen, "2", "INCR", "w"), "*-1\r\n");
    snprintf(seen, sizeof seen, "%llu", (unsigned long long)kv_store_version(s, "w", 1));
    APPLY(s, "EXPIRE", "w", "100");
    assert_string_equal(EXEC(s, "1", "w", seen, "2", "INCR", "w"), "*-1\r\n");
    /* An absent key created and deleted again is a change. */
    snprintf(seen_absent, sizeof seen_absent, "%llu",
             (unsigned long long)kv_store_version(s, "none", 4));
    APPLY(s, "SET", "none", "1");
    APPLY(s, "DEL", "none");
    assert_string_equal(EXEC(s, "1", "none", seen_absent, "2", "INCR", "w"), "*-1\r\n");
    /* Expiry by a tick is a change. */
    apply_at(s, 1000, 0, 0, "SET", "e", "v", "PX", "10", NULL);
    snprintf(seen, sizeof seen, "%llu", (unsigned long long)kv_store_version(s, "e", 1));
    tick(s, 2000);
    assert_string_equal(EXEC(s, "1", "e", seen, "2", "INCR", "w"), "*-1\r\n");
    assert_string_equal(APPLY(s, "GET", "w"), "$1\r\n2\r\n");
}

static void test_exec_refuses_malformed_transactions(void **state)
{
    struct kv_store *s = *state;
    APPLY(s, "SET", "a", "1");
    uint64_t digest = kv_store_digest(s);
    assert_non_null(strstr(EXEC(s, "x"), "bad count of watched keys"));
    assert_non_null(strstr(EXEC(s, "1", "a"), "bad count of watched keys"));
    assert_non_null(strstr(EXEC(s, "1", "a", "-1"), "bad version of watched key"));
    assert_non_null(strstr(EXEC(s, "0", "2", "SET", "a", "2", "GET"), "bad argument count"));
    assert_non_null(strstr(EXEC(s, "0", "0"), "bad argument count"));
    assert_non_null(
        strstr(EXEC(s, "0", "3", "SET", "a", "2", "99999999999999999999"), "bad argument count"));
    assert_int_equal(kv_store_digest(s), digest);
    assert_string_equal(APPLY(s, "GET", "a"), "$1\r\n1\r\n");
}

static void test_scan_returns_every_key_while_the_table_grows(void **state)
{
    struct kv_store *s = *state;
    for (int i = 0; i < 50; i++) {
        char key[16];
        snprintf(key, sizeof key, "a%d", i);
        APPLY(s, "SET", key, "1");
    }
    bool seen[50] = {false};
    char cursor[32] = "0";
    int round = 0;
    do {
        const char *r = APPLY(s, "SCAN", cursor, "MATCH", "a*", "COUNT", "8");
        const char *bulk = strchr(r + 4, '$');
        size_t len = strtoul(bulk + 1, NULL, 10);
        const char *value = strstr(bulk, "\r\n") + 2;
        memcpy(cursor, value, len);
        cursor[len] = '\0';
        for (const char *p = value; (p = strstr(p, "\r\na")) != NULL; p += 3)
            seen[strtol(p + 3, NULL, 10)] = true;
        if (round++ == 1) /* the table doubles during the scan */
            for (int i = 0; i < 200; i++) {
                char key[16];
                snprintf(key, sizeof key, "b%d", i);
                APPLY(s, "SET", key, "1");
            }
    } while (strcmp(cursor, "0") != 0);
    for (int i = 0; i < 50; i++)
        assert_true(seen[i]);
    assert_non_null(strstr(APPLY(s, "KEYS", "a4?"), "*10\r\n"));
    assert_non_null(strstr(APPLY(s, "KEYS", "a[1-2]"), "*2\r\n"));
}

static void test_glob_patterns(void **state)
{
    assert_true(kv_glob_match("h?llo", 5, "hello", 5));
    assert_true(kv_glob_match("h*o", 3, "heeello", 7));
    assert_true(kv_glob_match("h[ae]llo", 8, "hallo", 5));
    assert_false(kv_glob_match("h[^e]llo", 8, "hello", 5));
    assert_true(kv_glob_match("h[a-b]llo", 9, "hbllo", 5));
    assert_true(kv_glob_match("h\\*", 3, "h*", 2));
    assert_false(kv_glob_match("h\\*", 3, "hx", 2));
    assert_true(kv_glob_match("*", 1, "", 0));
    assert_false(kv_glob_match("a*b", 3, "aXc", 3));
}

static void test_snapshot_round_trip_and_truncation(void **state)
{
    struct kv_store *s = *state;
    APPLY(s, "SET", "a", "1");
    apply_at(s, 1000, 0, 0, "SET", "b", "2", "PX", "50", NULL);
    apply_at(s, 1, 9, 1, "INCR", "c", NULL);
    tick(s, 1010);
    struct kv_buf snap = {0};
    kv_snapshot_encode(s, &snap);
    struct kv_store copy;
    kv_store_init(&copy);
    char error[256];
    assert_int_equal(kv_snapshot_decode(&copy, snap.data, snap.len, error, sizeof error), 0);
    assert_int_equal(kv_store_digest(&copy), kv_store_digest(s));
    assert_int_equal(copy.now_ms, 1010);
    /* Versions came along (WATCH decides the same at a joiner). */
    assert_int_equal(kv_store_version(&copy, "a", 1), kv_store_version(s, "a", 1));
    assert_int_equal(kv_store_version(&copy, "b", 1), kv_store_version(s, "b", 1));
    assert_int_equal(copy.deleted_version, s->deleted_version);
    /* The session came along: request 1 does not run again. */
    assert_string_equal(apply_at(&copy, 1, 9, 1, "INCR", "c", NULL), ":1\r\n");
    for (size_t len = 0; len < snap.len; len++)
        assert_int_equal(kv_snapshot_decode(&copy, snap.data, len, error, sizeof error), -1);
    assert_int_equal(kv_store_size(&copy), 0);
    snap.data[0] ^= 1;
    assert_int_equal(kv_snapshot_decode(&copy, snap.data, snap.len, error, sizeof error), -1);
    assert_non_null(strstr(error, "not a spindle-kv snapshot"));
    kv_buf_free(&snap);
    kv_store_free(&copy);
}

static void test_operation_decoder_refuses_bad_bytes(void **state)
{
    struct kv_store *s = *state;
    struct kv_arg args[2] = {{"SET", 3}, {"k", 1}};
    struct kv_buf encoded = {0};
    kv_op_encode(&encoded, KV_OP_COMMAND, 5, 6, 7, 8, args, 2);
    char error[256];
    assert_int_equal(kv_op_decode(encoded.data, encoded.len, &op, error, sizeof error), 0);
    assert_int_equal(op.counter, 5);
    assert_int_equal(op.request_id, 8);
    assert_int_equal(op.argv.count, 2);
    for (size_t len = 0; len < encoded.len; len++)
        assert_int_equal(kv_op_decode(encoded.data, len, &op, error, sizeof error), -1);
    encoded.data[1] = 9;
    assert_int_equal(kv_op_decode(encoded.data, encoded.len, &op, error, sizeof error), -1);
    assert_string_equal(error, "unknown operation kind 9");
    /* Applied, it is answered with an error and changes nothing. */
    uint64_t digest = kv_store_digest(s);
    reply_text.len = 0;
    kv_store_apply(s, encoded.data, encoded.len, &op, &reply_text);
    assert_memory_equal(reply_text.data, "-ERR undecodable operation", 26);
    assert_int_equal(kv_store_digest(s), digest);
    kv_buf_free(&encoded);
}

static void test_command_table_names_key_positions(void **state)
{
    struct kv_buf table = {0};
    kv_command_table(&table);
    kv_buf_append(&table, "", 1);
    assert_non_null(strstr(table.data, "$3\r\nget\r\n:2\r\n*1\r\n+readonly\r\n:1\r\n:1\r\n:1\r\n"));
    assert_non_null(strstr(table.data, "$4\r\nmset\r\n:-3\r\n*1\r\n+write\r\n:1\r\n:-1\r\n:2\r\n"));
    assert_non_null(
        strstr(table.data, "$6\r\ndbsize\r\n:1\r\n*1\r\n+readonly\r\n:0\r\n:0\r\n:0\r\n"));
    kv_buf_free(&table);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_set_get_del_and_options, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_size_overwrite_takes_value_expiry_and_version,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_incr_checks_integers_and_overflow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cas_swaps_only_the_expected_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keys_expire_only_by_ordered_ticks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_expire_persist_setex_and_setnx_use_the_ordered_clock,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_session_request_runs_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_digest_ignores_layout_and_sees_versions_and_expiry,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_runs_its_commands_in_one_step, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_aborts_when_a_watched_key_changed, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_exec_refuses_malformed_transactions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scan_returns_every_key_while_the_table_grows, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_glob_patterns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_round_trip_and_truncation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_operation_decoder_refuses_bad_bytes, setup, teardown),
        cmocka_unit_test(test_command_table_names_key_positions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
