/* The replica's client connections and the commands it answers itself
 * (kv_server_impl.h). */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kv_server_impl.h"
#include "kv_slot.h"

#define TAG_CLIENT 5ull

static bool arg_is(const struct kv_arg *arg, const char *word)
{
    size_t len = strlen(word);
    return arg->len == len && strncasecmp(arg->ptr, word, len) == 0;
}

static void mark_dirty(struct kv_server *server, struct kv_conn *conn)
{
    if (conn->dirty)
        return;
    if (server->num_dirty == server->dirty_cap) {
        size_t cap = server->dirty_cap < 16 ? 16 : server->dirty_cap * 2;
        int *grown = realloc(server->dirty, cap * sizeof *grown);
        if (grown == NULL) {
            fprintf(stderr, "spindle-kv: out of memory for %zu connections\n", cap);
            abort();
        }
        server->dirty = grown;
        server->dirty_cap = cap;
    }
    server->dirty[server->num_dirty++] = conn->fd;
    conn->dirty = true;
}

struct kv_conn *kv_client_find(struct kv_server *server, int fd, uint64_t conn_id)
{
    if (fd < 0 || (size_t)fd >= server->num_conns_slots)
        return NULL;
    struct kv_conn *conn = server->conns[fd];
    return conn != NULL && conn->id == conn_id ? conn : NULL;
}

/* Moves the replies that are ready, in request order, to the output. */
static void collect_ready(struct kv_conn *conn)
{
    while (conn->head < conn->tail) {
        struct kv_slot *slot = &conn->slots[conn->head % KV_PIPELINE];
        if (!slot->ready)
            return;
        kv_buf_append(&conn->out, slot->data, slot->len);
        free(slot->data);
        slot->data = NULL;
        slot->ready = false;
        conn->head++;
    }
}

void kv_client_reply(struct kv_server *server, struct kv_conn *conn, uint64_t slot_index,
                     const char *data, size_t len)
{
    if (slot_index == conn->head) {
        /* The oldest reply owed: straight to the output. */
        kv_buf_append(&conn->out, data, len);
        conn->head++;
    } else {
        struct kv_slot *slot = &conn->slots[slot_index % KV_PIPELINE];
        slot->data = malloc(len == 0 ? 1 : len);
        if (slot->data == NULL) {
            fprintf(stderr, "spindle-kv: out of memory for a reply of %zu bytes\n", len);
            abort();
        }
        memcpy(slot->data, data, len);
        slot->len = len;
        slot->ready = true;
    }
    collect_ready(conn);
    mark_dirty(server, conn);
}

/* A reply that is ready now, in its place among the connection's. */
static void reply_now(struct kv_server *server, struct kv_conn *conn, const struct kv_buf *reply)
{
    kv_client_reply(server, conn, conn->tail++, reply->data, reply->len);
}

static void close_conn(struct kv_server *server, struct kv_conn *conn)
{
    epoll_ctl(server->epoll_fd, EPOLL_CTL_DEL, conn->fd, NULL);
    close(conn->fd);
    server->conns[conn->fd] = NULL;
    for (uint64_t i = conn->head; i < conn->tail; i++)
        free(conn->slots[i % KV_PIPELINE].data);
    kv_buf_free(&conn->in);
    kv_buf_free(&conn->out);
    kv_multi_free(conn);
    server->num_clients--;
    free(conn);
}

void kv_client_accept(struct kv_server *server)
{
    for (;;) {
        int fd = accept4(server->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR)
                fprintf(stderr, "spindle-kv: accept: %s\n", strerror(errno));
            return;
        }
        if ((size_t)fd >= server->num_conns_slots) {
            size_t count = (size_t)fd * 2 + 16;
            struct kv_conn **grown = realloc(server->conns, count * sizeof(struct kv_conn *));
            if (grown == NULL) {
                close(fd);
                continue;
            }
            memset(grown + server->num_conns_slots, 0,
                   (count - server->num_conns_slots) * sizeof(struct kv_conn *));
            server->conns = grown;
            server->num_conns_slots = count;
        }
        struct kv_conn *conn = calloc(1, sizeof *conn);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLET,
                                 .data.u64 = TAG_CLIENT << 32 | (uint32_t)fd};
        if (conn == NULL || epoll_ctl(server->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            free(conn);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conn->fd = fd;
        conn->id = ++server->next_conn_id;
        conn->events = EPOLLIN;
        conn->authed = server->options->requirepass == NULL;
        conn->readonly = server->options->stale_reads;
        server->conns[fd] = conn;
        server->num_clients++;
    }
}

/* "shardS:slots=a-b,members=i;j,started=n,state=ok|degraded": the shard's
 * slot range and members in the current view, against the most it has had
 * in the views this replica saw. */
static void shard_line(struct kv_server *server, uint32_t shard, struct kv_buf *text)
{
    char line[128];
    uint32_t first =
        (uint32_t)(((uint64_t)shard * KV_SLOTS + server->num_shards - 1) / server->num_shards);
    uint32_t end = (uint32_t)(((uint64_t)(shard + 1) * KV_SLOTS + server->num_shards - 1) /
                              server->num_shards);
    int n = snprintf(line, sizeof line, "shard%u:slots=%u-%u,members=", shard, first, end - 1);
    kv_buf_append(text, line, (size_t)n);
    uint32_t now = 0, started = server->most_replicas[shard];
    for (uint32_t r = 0; r < server->num_view_members; r++) {
        if (kv_member_shard(server, server->view_members[r]) != shard)
            continue;
        n = snprintf(line, sizeof line, "%s%u", now > 0 ? ";" : "", server->view_members[r]);
        kv_buf_append(text, line, (size_t)n);
        now++;
    }
    n = snprintf(line, sizeof line, ",started=%u,state=%s\r\n", started,
                 now == 0        ? "down"
                 : now < started ? "degraded"
                                 : "ok");
    kv_buf_append(text, line, (size_t)n);
}

static void info_section(struct kv_server *server, struct kv_buf *text)
{
    char line[512];
    int n = snprintf(line, sizeof line,
                     "# Server\r\nredis_version:7.0.0\r\nredis_mode:spindle-kv\r\n"
                     "tcp_port:%u\r\n\r\n# Clients\r\nconnected_clients:%zu\r\n\r\n",
                     server->options->port, server->num_clients);
    kv_buf_append(text, line, (size_t)n);
    n = snprintf(line, sizeof line,
                 "# Replication\r\nrole:replica\r\nreplication:spindle-atomic-multicast\r\n"
                 "member_id:%u\r\nview_id:%" PRIu64 "\r\nmembers:",
                 server->self, server->view_id);
    kv_buf_append(text, line, (size_t)n);
    for (uint32_t i = 0; i < server->num_view_members; i++) {
        n = snprintf(line, sizeof line, "%s%u", i > 0 ? "," : "", server->view_members[i]);
        kv_buf_append(text, line, (size_t)n);
    }
    n = snprintf(line, sizeof line,
                 "\r\nshards:%u\r\nshard:%u\r\nshard_scope:DBSIZE, KEYS, SCAN and FLUSHALL act on "
                 "shard %u only\r\nshard_state:%s\r\n",
                 server->num_shards, server->my_shard, server->my_shard,
                 server->sync.phase == KV_SYNCED ? "synced" : "loading");
    kv_buf_append(text, line, (size_t)n);
    for (uint32_t s = 0; s < server->num_shards; s++)
        shard_line(server, s, text);
    uint64_t persisted_view = 0, persisted_local = 0, persisted_global = 0;
    if (server->options->log_dir != NULL &&
        spindle_group_persisted(server->group, server->my_shard, &persisted_view, &persisted_local,
                                &persisted_global) == 0) {
        n = snprintf(line, sizeof line,
                     "logged:yes\r\npersisted_view:%" PRIu64 "\r\npersisted_local:%" PRIu64
                     "\r\npersisted_global:%" PRIu64 "\r\nreplies_waiting_persistence:%zu\r\n",
                     persisted_view, persisted_local, persisted_global, server->held_count);
    } else {
        n = snprintf(line, sizeof line, "logged:no\r\n");
    }
    kv_buf_append(text, line, (size_t)n);
    n = snprintf(line, sizeof line,
                 "delivered_seq:%" PRIu64 "\r\napplied:%" PRIu64 "\r\n"
                 "reads:%s\r\nops_proposed:%" PRIu64 "\r\nops_applied:%" PRIu64
                 "\r\nstale_reads_served:%" PRIu64 "\r\nstate_clock_ms:%" PRIu64 "\r\n\r\n",
                 server->delivered_seq, server->store.applied,
                 server->options->stale_reads ? "stale" : "linearizable", server->ops_proposed,
                 server->ops_applied, server->stale_reads, server->store.now_ms);
    kv_buf_append(text, line, (size_t)n);
    /* Cluster-aware clients (redis-py's RedisCluster) look for it before
     * asking CLUSTER SLOTS. */
    static const char cluster[] = "# Cluster\r\ncluster_enabled:1\r\n\r\n";
    kv_buf_append(text, cluster, sizeof cluster - 1);
    n = snprintf(line, sizeof line, "# Persistence\r\nloading:%d\r\n\r\n",
                 server->sync.phase == KV_SYNCED ? 0 : 1);
    kv_buf_append(text, line, (size_t)n);
    n = snprintf(line, sizeof line, "# Keyspace\r\ndb0:keys=%zu,expires=%zu\r\n",
                 kv_store_size(&server->store), server->store.num_expiring);
    kv_buf_append(text, line, (size_t)n);
}

/* A member's node id in CLUSTER NODES: 40 hex digits from its member
 * name (its shard and address), the same at every replica and across
 * restarts. */
static void node_id(uint32_t shard, const struct kv_endpoint *at, char id[41])
{
    char name[sizeof at->host + 32];
    snprintf(name, sizeof name, "shard%" PRIu32 "@%s:%u", shard, at->host, at->port);
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = name; *p != '\0'; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    uint64_t g = (h ^ 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
    snprintf(id, 41, "%016" PRIx64 "%016" PRIx64 "%08" PRIx32, h, g, (uint32_t)(g >> 17));
}

/* CLUSTER NODES: a line per replica of the current view, in Redis
 * Cluster's form, the lowest-ranked replica of each shard as its master
 * (it holds the shard's slots) and the others as its replicas; every one
 * serves reads and writes alike. For redis-cli --cluster and
 * redis-benchmark --cluster. */
static void cluster_nodes(struct kv_server *server, struct kv_buf *reply)
{
    struct kv_buf text = {0};
    char master_of[SPINDLE_MAX_MEMBERS][41];
    bool has_master[SPINDLE_MAX_MEMBERS] = {false};
    for (uint32_t r = 0; r < server->num_view_members; r++) {
        uint32_t id = server->view_members[r], shard = kv_member_shard(server, id);
        char line[512], me[41];
        const struct kv_endpoint *at = &server->endpoint_of[id];
        node_id(shard, at, me);
        bool master = !has_master[shard];
        if (master) {
            memcpy(master_of[shard], me, sizeof me);
            has_master[shard] = true;
        }
        int n =
            snprintf(line, sizeof line, "%s %s:%u@0 %s%s %s 0 0 %" PRIu64 " connected", me,
                     at->host, at->port, id == server->self ? "myself," : "",
                     master ? "master" : "slave", master ? "-" : master_of[shard], server->view_id);
        kv_buf_append(&text, line, (size_t)n);
        if (master) {
            uint64_t shards = server->num_shards;
            n = snprintf(line, sizeof line, " %" PRIu64 "-%" PRIu64,
                         (shard * (uint64_t)KV_SLOTS + shards - 1) / shards,
                         ((shard + 1) * (uint64_t)KV_SLOTS + shards - 1) / shards - 1);
            kv_buf_append(&text, line, (size_t)n);
        }
        kv_buf_append(&text, "\n", 1);
    }
    kv_resp_bulk(reply, text.data, text.len);
    kv_buf_free(&text);
}

/* CLUSTER SLOTS: per shard, its slot range and its replicas in the current
 * view (the first one listed is the shard's leader), so that cluster-aware
 * clients find every key's shard; CLUSTER KEYSLOT key; CLUSTER NODES. */
static void cmd_cluster(struct kv_server *server, const struct kv_arg *args, size_t count,
                        struct kv_buf *reply)
{
    if (count == 3 && arg_is(&args[1], "KEYSLOT")) {
        kv_resp_integer(reply, kv_key_slot(args[2].ptr, args[2].len));
        return;
    }
    if (count == 2 && arg_is(&args[1], "NODES")) {
        cluster_nodes(server, reply);
        return;
    }
    if (count != 2 || !arg_is(&args[1], "SLOTS")) {
        kv_resp_error(reply, "ERR CLUSTER subcommand not supported (SLOTS, NODES and KEYSLOT are)");
        return;
    }
    uint32_t live = 0;
    for (uint32_t s = 0; s < server->num_shards; s++)
        for (uint32_t r = 0; r < server->num_view_members; r++)
            if (kv_member_shard(server, server->view_members[r]) == s) {
                live++;
                break;
            }
    kv_resp_array(reply, live);
    for (uint32_t s = 0; s < server->num_shards; s++) {
        uint32_t replicas = 0;
        for (uint32_t r = 0; r < server->num_view_members; r++)
            replicas += kv_member_shard(server, server->view_members[r]) == s ? 1 : 0;
        if (replicas == 0)
            continue;
        uint64_t shards = server->num_shards;
        kv_resp_array(reply, 2 + replicas);
        kv_resp_integer(reply, (int64_t)((s * (uint64_t)KV_SLOTS + shards - 1) / shards));
        kv_resp_integer(reply, (int64_t)(((s + 1) * (uint64_t)KV_SLOTS + shards - 1) / shards) - 1);
        for (uint32_t r = 0; r < server->num_view_members; r++) {
            uint32_t id = server->view_members[r];
            if (kv_member_shard(server, id) != s)
                continue;
            const struct kv_endpoint *at = &server->endpoint_of[id];
            char node[32];
            int n = snprintf(node, sizeof node, "spindle-kv-member-%u", id);
            kv_resp_array(reply, 3);
            kv_resp_bulk(reply, at->host, strlen(at->host));
            kv_resp_integer(reply, at->port);
            kv_resp_bulk(reply, node, (size_t)n);
        }
    }
}

static void cmd_info(struct kv_server *server, struct kv_buf *reply)
{
    struct kv_buf text = {0};
    info_section(server, &text);
    kv_resp_bulk(reply, text.data, text.len);
    kv_buf_free(&text);
}

static void cmd_auth(struct kv_server *server, struct kv_conn *conn, const struct kv_arg *args,
                     size_t count, struct kv_buf *reply)
{
    const char *pass = server->options->requirepass;
    if (count < 2 || count > 3) {
        kv_resp_error(reply, "ERR wrong number of arguments for 'auth' command");
        return;
    }
    if (pass == NULL) {
        kv_resp_error(reply, "ERR AUTH <password> called without any password configured for "
                             "the default user. Are you sure your configuration is correct?");
        return;
    }
    const struct kv_arg *given = &args[count - 1];
    bool user_ok = count == 2 || arg_is(&args[1], "default");
    if (user_ok && given->len == strlen(pass) && memcmp(given->ptr, pass, given->len) == 0) {
        conn->authed = true;
        kv_resp_simple(reply, "OK");
    } else {
        kv_resp_error(reply, "WRONGPASS invalid username-password pair or user is disabled.");
    }
}

/* -MOVED names a member of the key's shard in the current view. */
bool kv_client_route(struct kv_server *server, const struct kv_arg *args, size_t count,
                     struct kv_buf *reply)
{
    if (server->num_shards <= 1)
        return true;
    uint32_t shard = 0, slot = 0;
    enum kv_route route = kv_command_route(args, count, server->num_shards, &shard, &slot);
    if (route == KV_ROUTE_NONE || (route == KV_ROUTE_SHARD && shard == server->my_shard))
        return true;
    if (route == KV_ROUTE_CROSS) {
        kv_resp_error(reply, "CROSSSLOT Keys in request don't hash to the same shard");
        return false;
    }
    for (uint32_t r = 0; r < server->num_view_members; r++) {
        uint32_t id = server->view_members[r];
        if (kv_member_shard(server, id) != shard)
            continue;
        const struct kv_endpoint *at = &server->endpoint_of[id];
        kv_resp_errorf(reply, "MOVED %u %s:%u", slot, at->host, at->port);
        return false;
    }
    kv_resp_errorf(reply, "CLUSTERDOWN shard %u of slot %u has no replica in view %" PRIu64, shard,
                   slot, server->view_id);
    return false;
}

/* SESSION session-id request-id command [args...]: the command runs once
 * per (session, request id), however often it is sent (docs/KV.md). */
static void cmd_session(struct kv_server *server, struct kv_conn *conn, const struct kv_arg *args,
                        size_t count, struct kv_buf *reply)
{
    char text[32];
    uint64_t ids[2];
    if (count < 4) {
        kv_resp_error(reply, "ERR wrong number of arguments for 'session' command");
        return;
    }
    for (int i = 0; i < 2; i++) {
        char *end;
        size_t len = args[1 + i].len < sizeof text - 1 ? args[1 + i].len : sizeof text - 1;
        memcpy(text, args[1 + i].ptr, len);
        text[len] = '\0';
        errno = 0;
        ids[i] = strtoull(text, &end, 10);
        if (len == 0 || *end != '\0' || errno != 0 || text[0] == '-' || ids[i] == 0) {
            kv_resp_errorf(reply, "ERR SESSION %s '%s' is not a positive integer",
                           i == 0 ? "session id" : "request id", text);
            return;
        }
    }
    if (count == 4 && arg_is(&args[3], "EXEC")) {
        kv_multi_exec(server, conn, ids[0], ids[1], reply);
        return;
    }
    if (kv_command_class(&args[3]) != KV_CMD_WRITE && kv_command_class(&args[3]) != KV_CMD_READ) {
        kv_store_read(&server->store, args + 3, count - 3, reply); /* its error */
        return;
    }
    if (!kv_client_route(server, args + 3, count - 3, reply))
        return;
    kv_propose(server, conn, conn->tail++, ids[0], ids[1], args + 3, count - 3);
}

/* Runs one command; false when the connection must close after writing. */
static void run_command(struct kv_server *server, struct kv_conn *conn, const struct kv_arg *args,
                        size_t count)
{
    struct kv_buf reply = {0};
    const struct kv_arg *name = &args[0];
    if (arg_is(name, "AUTH")) {
        cmd_auth(server, conn, args, count, &reply);
    } else if (arg_is(name, "QUIT")) {
        kv_resp_simple(&reply, "OK");
        conn->closing = true;
    } else if (!conn->authed) {
        kv_resp_error(&reply, "NOAUTH Authentication required.");
    } else if (!(arg_is(name, "SESSION") && count == 4 && arg_is(&args[3], "EXEC")) &&
               kv_multi_command(server, conn, args, count, &reply)) {
        if (reply.len == 0)
            return; /* EXEC proposed */
    } else if (arg_is(name, "PING")) {
        if (count > 1)
            kv_resp_bulk(&reply, args[1].ptr, args[1].len);
        else
            kv_resp_simple(&reply, "PONG");
    } else if (arg_is(name, "ECHO") && count == 2) {
        kv_resp_bulk(&reply, args[1].ptr, args[1].len);
    } else if (arg_is(name, "CLUSTER") && count > 1) {
        cmd_cluster(server, args, count, &reply);
    } else if (arg_is(name, "INFO")) {
        cmd_info(server, &reply);
    } else if (arg_is(name, "READONLY") || arg_is(name, "READWRITE")) {
        conn->readonly = arg_is(name, "READONLY");
        kv_resp_simple(&reply, "OK");
    } else if (arg_is(name, "COMMAND") && count == 1) {
        kv_command_table(&reply); /* where cluster-aware clients find the keys */
    } else if (arg_is(name, "COMMAND") ||
               (arg_is(name, "CONFIG") && count > 1 && arg_is(&args[1], "GET"))) {
        kv_resp_array(&reply, 0); /* clients ask at start; nothing to tell them */
    } else if (arg_is(name, "CLIENT") && count > 1 &&
               (arg_is(&args[1], "SETNAME") || arg_is(&args[1], "SETINFO"))) {
        kv_resp_simple(&reply, "OK");
    } else if (arg_is(name, "SELECT") && count == 2) {
        if (args[1].len == 1 && args[1].ptr[0] == '0')
            kv_resp_simple(&reply, "OK");
        else
            kv_resp_error(&reply, "ERR DB index is out of range (spindle-kv has database 0)");
    } else if (server->sync.phase != KV_SYNCED &&
               (arg_is(name, "SESSION") || kv_command_class(name) != KV_CMD_UNKNOWN)) {
        kv_resp_errorf(&reply, "LOADING spindle-kv is loading shard %u's state from member %u",
                       server->my_shard, server->sync.donor);
    } else if (arg_is(name, "SESSION")) {
        cmd_session(server, conn, args, count, &reply);
        if (reply.len == 0)
            return;
    } else {
        enum kv_command_class class = kv_command_class(name);
        if (class != KV_CMD_UNKNOWN && !kv_client_route(server, args, count, &reply)) {
            reply_now(server, conn, &reply);
            kv_buf_free(&reply);
            return;
        }
        if (class == KV_CMD_WRITE || (class == KV_CMD_READ && !conn->readonly)) {
            kv_propose(server, conn, conn->tail++, 0, 0, args, count);
            return;
        }
        if (class == KV_CMD_READ)
            server->stale_reads++;
        kv_store_read(&server->store, args, count, &reply); /* stale read, or its error */
    }
    reply_now(server, conn, &reply);
    kv_buf_free(&reply);
}

/* Parses and runs the commands conn has received, while it may owe more
 * replies. */
static void process_input(struct kv_server *server, struct kv_conn *conn)
{
    size_t used = 0;
    while (!conn->closing && conn->tail - conn->head < KV_PIPELINE) {
        char error[256];
        long n = kv_resp_parse(conn->in.data + used, conn->in.len - used, &server->limits,
                               &server->argv, error, sizeof error);
        if (n == KV_RESP_INCOMPLETE) {
            if (conn->in.len - used >= KV_MAX_INPUT) {
                snprintf(error, sizeof error, "Protocol error: request larger than %u bytes",
                         KV_MAX_INPUT);
                n = KV_RESP_ERROR;
            } else {
                break;
            }
        }
        if (n == KV_RESP_ERROR) {
            struct kv_buf reply = {0};
            kv_resp_errorf(&reply, "ERR %s", error);
            reply_now(server, conn, &reply);
            kv_buf_free(&reply);
            conn->closing = true;
            break;
        }
        used += (size_t)n;
        if (server->argv.count > 0)
            run_command(server, conn, server->argv.items, server->argv.count);
    }
    kv_buf_consume(&conn->in, used);
}

/* Client sockets are edge-triggered: a level-triggered one reported ready
 * is polled again at the next epoll_wait only to find it drained, once per
 * request. So read_in reads until the socket is drained (a short read) or
 * re-arms the descriptor when it stops before (events 0 forces the
 * EPOLL_CTL_MOD, which reports a socket still readable). */
static void update_events(struct kv_server *server, struct kv_conn *conn)
{
    uint32_t events = 0;
    if (!conn->closing && conn->tail - conn->head < KV_PIPELINE && conn->in.len < KV_MAX_INPUT)
        events |= EPOLLIN;
    if (conn->out_sent < conn->out.len)
        events |= EPOLLOUT;
    if (events == conn->events)
        return;
    struct epoll_event ev = {.events = events | EPOLLET,
                             .data.u64 = TAG_CLIENT << 32 | (uint32_t)conn->fd};
    epoll_ctl(server->epoll_fd, EPOLL_CTL_MOD, conn->fd, &ev);
    conn->events = events;
}

/* Writes what conn has to say; false when it is closed. */
static bool write_out(struct kv_server *server, struct kv_conn *conn)
{
    while (conn->out_sent < conn->out.len) {
        ssize_t n = send(conn->fd, conn->out.data + conn->out_sent, conn->out.len - conn->out_sent,
                         MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            close_conn(server, conn);
            return false;
        }
        conn->out_sent += (size_t)n;
    }
    if (conn->out_sent == conn->out.len) {
        conn->out.len = 0;
        conn->out_sent = 0;
        if (conn->closing && conn->head == conn->tail) {
            close_conn(server, conn);
            return false;
        }
    }
    return true;
}

static void read_in(struct kv_server *server, struct kv_conn *conn)
{
    for (;;) {
        if (conn->in.len >= KV_MAX_INPUT) {
            conn->events = 0; /* not drained: re-armed once the input shrinks */
            break;
        }
        kv_buf_reserve(&conn->in, 16384);
        ssize_t n = recv(conn->fd, conn->in.data + conn->in.len, conn->in.cap - conn->in.len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        if (n <= 0) {
            /* The client is gone: replies still owed are dropped. */
            close_conn(server, conn);
            return;
        }
        conn->in.len += (size_t)n;
        if ((size_t)n < 16384)
            break;
    }
    process_input(server, conn);
    mark_dirty(server, conn);
}

void kv_client_event(struct kv_server *server, int fd, uint32_t events)
{
    struct kv_conn *conn = (size_t)fd < server->num_conns_slots ? server->conns[fd] : NULL;
    if (conn == NULL)
        return;
    if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLIN)) {
        close_conn(server, conn);
        return;
    }
    if (events & EPOLLIN)
        read_in(server, conn);
    else
        mark_dirty(server, conn);
}

void kv_client_flush(struct kv_server *server)
{
    /* Entries may be added while walking (process_input replies). */
    for (size_t i = 0; i < server->num_dirty; i++) {
        struct kv_conn *conn = server->conns[server->dirty[i]];
        if (conn == NULL || !conn->dirty)
            continue;
        conn->dirty = false;
        if (!write_out(server, conn))
            continue;
        if (conn->in.len > 0 && conn->tail - conn->head < KV_PIPELINE) {
            process_input(server, conn);
            if (conn->out.len > conn->out_sent && !write_out(server, conn))
                continue;
        }
        update_events(server, conn);
    }
    server->num_dirty = 0;
}

void kv_client_close_all(struct kv_server *server)
{
    for (size_t fd = 0; fd < server->num_conns_slots; fd++)
        if (server->conns[fd] != NULL)
            close_conn(server, server->conns[fd]);
}
