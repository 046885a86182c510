/* Redis transactions on a connection (kv_server_impl.h): MULTI queues the
 * state machine's commands, EXEC proposes them as one operation
 * (KV_OP_EXEC, applied by kv_exec.c in one step at every replica), DISCARD
 * drops them; WATCH records the versions of keys as this replica's copy has
 * them, and the ordered step aborts EXEC when one changed since. A replica
 * behind the stream records older versions: at worst a spurious abort,
 * never a missed change. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv_le.h"
#include "kv_server_impl.h"
#include "kv_slot.h"

static bool arg_is(const struct kv_arg *arg, const char *word)
{
    size_t len = strlen(word);
    return arg->len == len && strncasecmp(arg->ptr, word, len) == 0;
}

/* Appends one argument (u32 length, bytes) to a connection's list. */
static void put_arg(struct kv_buf *list, const char *ptr, size_t len)
{
    kv_put_u32(list, (uint32_t)len);
    kv_buf_append(list, ptr, len);
}

static void put_number(struct kv_buf *list, uint64_t value)
{
    char text[24];
    int n = snprintf(text, sizeof text, "%" PRIu64, value);
    put_arg(list, text, (size_t)n);
}

/* Pushes the arguments of list onto argv (pointing into list). */
static void push_args(struct kv_argv *argv, const struct kv_buf *list)
{
    for (size_t at = 0; at + 4 <= list->len;) {
        uint32_t len = kv_get_u32((const unsigned char *)list->data + at);
        kv_argv_push(argv, list->data + at + 4, len);
        at += 4 + len;
    }
}

static void end_multi(struct kv_conn *conn)
{
    conn->in_multi = false;
    conn->multi_failed = false;
    conn->multi_has_keys = false;
    conn->queued.len = 0;
    conn->num_queued = 0;
    conn->num_commands = 0;
}

static void unwatch(struct kv_conn *conn)
{
    conn->watched.len = 0;
    conn->num_watched = 0;
}

void kv_multi_free(struct kv_conn *conn)
{
    kv_buf_free(&conn->queued);
    kv_buf_free(&conn->watched);
}

/* WATCH key [key ...]: the keys must be in this replica's shard (they are
 * routed like EXISTS's). */
static void cmd_watch(struct kv_server *server, struct kv_conn *conn, const struct kv_arg *args,
                      size_t count, struct kv_buf *reply)
{
    if (count < 2) {
        kv_resp_error(reply, "ERR wrong number of arguments for 'watch' command");
        return;
    }
    if (server->sync.phase != KV_SYNCED) {
        kv_resp_errorf(reply, "LOADING spindle-kv is loading shard %u's state from member %u",
                       server->my_shard, server->sync.donor);
        return;
    }
    struct kv_argv *routed = &server->exec_argv;
    routed->count = 0;
    kv_argv_push(routed, "EXISTS", 6);
    for (size_t i = 1; i < count; i++)
        kv_argv_push(routed, args[i].ptr, args[i].len);
    if (!kv_client_route(server, routed->items, routed->count, reply))
        return;
    size_t bytes = 0;
    for (size_t i = 1; i < count; i++)
        bytes += 4 + args[i].len + 4 + 20;
    if (conn->watched.len + bytes > KV_MAX_OP_BYTES) {
        kv_resp_errorf(reply,
                       "ERR watched keys would exceed the largest replicated operation "
                       "(%u bytes)",
                       KV_MAX_OP_BYTES);
        return;
    }
    for (size_t i = 1; i < count; i++) {
        put_arg(&conn->watched, args[i].ptr, args[i].len);
        put_number(&conn->watched, kv_store_version(&server->store, args[i].ptr, args[i].len));
        conn->num_watched++;
    }
    conn->multi_has_keys = true;
    kv_resp_simple(reply, "OK");
}

/* Commands the replica answers itself, which are not replicated and so
 * cannot run in the ordered step of a transaction. */
static bool answered_here(const struct kv_arg *name)
{
    static const char *const names[] = {"PING",    "ECHO",   "INFO",     "CLUSTER",
                                        "COMMAND", "SELECT", "READONLY", "READWRITE",
                                        "CONFIG",  "CLIENT", "UNWATCH"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (arg_is(name, names[i]))
            return true;
    return false;
}

/* A command inside MULTI: checked as Redis checks it at queue time (an
 * error here makes EXEC fail with -EXECABORT), then queued. */
static void queue_command(struct kv_server *server, struct kv_conn *conn, const struct kv_arg *args,
                          size_t count, struct kv_buf *reply)
{
    if (answered_here(&args[0])) {
        kv_resp_errorf(reply,
                       "ERR '%.*s' cannot be queued in a spindle-kv transaction (only "
                       "the replicated commands can)",
                       (int)(args[0].len > 32 ? 32 : args[0].len), args[0].ptr);
    } else if (arg_is(&args[0], "SESSION")) {
        kv_resp_error(reply, "ERR SESSION inside MULTI: send SESSION <id> <request> EXEC");
    } else if (!kv_command_valid(args, count, reply)) {
        /* unknown command or wrong number of arguments: the error is in reply */
    } else {
        uint32_t shard = 0, slot = 0;
        enum kv_route route =
            server->num_shards <= 1
                ? KV_ROUTE_NONE
                : kv_command_route(args, count, server->num_shards, &shard, &slot);
        bool other_shard = route == KV_ROUTE_SHARD && shard != server->my_shard;
        size_t bytes = 4 + 20;
        for (size_t i = 0; i < count; i++)
            bytes += 4 + args[i].len;
        if (route == KV_ROUTE_CROSS || (other_shard && conn->multi_has_keys)) {
            kv_resp_error(reply, "CROSSSLOT Keys in request don't hash to the same shard");
        } else if (other_shard) {
            kv_client_route(server, args, count, reply); /* -MOVED */
        } else if (conn->queued.len + conn->watched.len + bytes > KV_MAX_OP_BYTES) {
            kv_resp_errorf(reply,
                           "ERR transaction would exceed the largest replicated "
                           "operation (%u bytes)",
                           KV_MAX_OP_BYTES);
        } else {
            put_number(&conn->queued, count);
            for (size_t i = 0; i < count; i++)
                put_arg(&conn->queued, args[i].ptr, args[i].len);
            conn->num_queued += 1 + count;
            conn->num_commands++;
            conn->multi_has_keys = conn->multi_has_keys || route == KV_ROUTE_SHARD;
            kv_resp_simple(reply, "QUEUED");
            return;
        }
    }
    conn->multi_failed = true;
}

void kv_multi_exec(struct kv_server *server, struct kv_conn *conn, uint64_t session,
                   uint64_t request_id, struct kv_buf *reply)
{
    if (!conn->in_multi) {
        kv_resp_error(reply, "ERR EXEC without MULTI");
        return;
    }
    if (conn->multi_failed) {
        kv_resp_error(reply, "EXECABORT Transaction discarded because of previous errors.");
    } else if (server->sync.phase != KV_SYNCED) {
        kv_resp_errorf(reply, "LOADING spindle-kv is loading shard %u's state from member %u",
                       server->my_shard, server->sync.donor);
    } else {
        /* One operation: [W, (key, version) x W, (argc, args...) per command]. */
        struct kv_argv *argv = &server->exec_argv;
        char watched[24];
        int n = snprintf(watched, sizeof watched, "%zu", conn->num_watched);
        argv->count = 0;
        kv_argv_push(argv, watched, (size_t)n);
        push_args(argv, &conn->watched);
        push_args(argv, &conn->queued);
        kv_propose_kind(server, conn, conn->tail++, KV_OP_EXEC, session, request_id, argv->items,
                        argv->count);
        argv->count = 0;
    }
    end_multi(conn); /* EXEC forgets the watched keys, whatever its outcome */
    unwatch(conn);
}

bool kv_multi_command(struct kv_server *server, struct kv_conn *conn, const struct kv_arg *args,
                      size_t count, struct kv_buf *reply)
{
    const struct kv_arg *name = &args[0];
    if (arg_is(name, "MULTI")) {
        if (conn->in_multi) {
            kv_resp_error(reply, "ERR MULTI calls can not be nested");
        } else {
            conn->in_multi = true;
            kv_resp_simple(reply, "OK");
        }
    } else if (arg_is(name, "EXEC")) {
        kv_multi_exec(server, conn, 0, 0, reply);
    } else if (arg_is(name, "DISCARD")) {
        if (!conn->in_multi) {
            kv_resp_error(reply, "ERR DISCARD without MULTI");
            return true;
        }
        end_multi(conn);
        unwatch(conn);
        kv_resp_simple(reply, "OK");
    } else if (arg_is(name, "WATCH")) {
        if (conn->in_multi)
            kv_resp_error(reply, "ERR WATCH inside MULTI is not allowed");
        else
            cmd_watch(server, conn, args, count, reply);
    } else if (arg_is(name, "UNWATCH") && !conn->in_multi) {
        unwatch(conn);
        conn->multi_has_keys = false;
        kv_resp_simple(reply, "OK");
    } else if (conn->in_multi) {
        queue_command(server, conn, args, count, reply);
    } else {
        return false;
    }
    return true;
}
