/* The replica's group, event loop and proposals (kv_server.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "kv_server_impl.h"

/* epoll tags: the upper half of data.u64 says what the lower half is. */
#define TAG_LISTEN  1ull
#define TAG_GROUP   2ull
#define TAG_TIMER   3ull
#define TAG_SIGNAL  4ull
#define TAG_CLIENT  5ull
#define TAG_PERSIST 6ull
#define TAG_SYNC    7ull

static uint64_t realtime_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
}

static void push_pending(struct kv_server *server, const struct kv_pending *pending)
{
    if (server->pending_count == server->pending_cap) {
        size_t cap = server->pending_cap < 64 ? 64 : server->pending_cap * 2;
        struct kv_pending *grown = malloc(cap * sizeof *grown);
        if (grown == NULL) {
            fprintf(stderr, "spindle-kv: out of memory for %zu requests in flight\n", cap);
            abort();
        }
        for (size_t i = 0; i < server->pending_count; i++)
            grown[i] = server->pending[(server->pending_head + i) % server->pending_cap];
        free(server->pending);
        server->pending = grown;
        server->pending_cap = cap;
        server->pending_head = 0;
    }
    server->pending[(server->pending_head + server->pending_count) % server->pending_cap] =
        *pending;
    server->pending_count++;
}

void kv_propose(struct kv_server *server, struct kv_conn *conn, uint64_t slot, uint64_t session,
                uint64_t request_id, const struct kv_arg *args, size_t count)
{
    kv_propose_kind(server, conn, slot, KV_OP_COMMAND, session, request_id, args, count);
}

void kv_propose_kind(struct kv_server *server, struct kv_conn *conn, uint64_t slot, uint8_t kind,
                     uint64_t session, uint64_t request_id, const struct kv_arg *args, size_t count)
{
    struct kv_buf *op = &server->scratch;
    op->len = 0;
    uint64_t counter = ++server->next_counter;
    kv_op_encode(op, kind, counter, realtime_ms(), session, request_id, args, count);
    if (op->len > KV_MAX_OP_BYTES) {
        char error[128];
        int n = snprintf(error, sizeof error,
                         "-ERR %s of %zu bytes exceeds the largest replicated operation "
                         "(%u bytes)\r\n",
                         kind == KV_OP_EXEC ? "transaction" : "command", op->len, KV_MAX_OP_BYTES);
        kv_client_reply(server, conn, slot, error, (size_t)n);
        return;
    }
    struct kv_pending pending = {counter, conn->fd, conn->id, slot};
    push_pending(server, &pending);
    server->ops_proposed++;
    kv_outbound_send(server, op);
}

uint32_t kv_member_shard(const struct kv_server *server, uint32_t member_id)
{
    if (server->num_shards <= 1 || member_id >= SPINDLE_MAX_MEMBERS)
        return 0;
    return server->shard_of[member_id];
}

/* The shard of member id of the first view: (id / replicas) mod shards. */
static uint32_t first_view_shard(const struct kv_server *server, uint32_t member_id)
{
    if (server->num_shards <= 1 || server->options->replicas == 0)
        return 0; /* one shard, or a joiner, whose group sizes its subgroups */
    return (member_id / server->options->replicas) % server->num_shards;
}

/* The shard's leader, its lowest-ranked member in the view, moves the state
 * machine's clock while keys may expire: every replica of the shard
 * expires them at the same point of the stream. */
static bool shard_leader(const struct kv_server *server)
{
    for (uint32_t r = 0; r < server->num_view_members; r++)
        if (kv_member_shard(server, server->view_members[r]) == server->my_shard)
            return server->view_members[r] == server->self;
    return false;
}

static void send_tick(struct kv_server *server)
{
    if (server->store.num_expiring == 0 || server->sync.phase != KV_SYNCED || !shard_leader(server))
        return;
    struct kv_buf *op = &server->scratch;
    op->len = 0;
    kv_op_encode(op, KV_OP_TICK, 0, realtime_ms(), 0, 0, NULL, 0);
    kv_outbound_send(server, op);
}

/* Operations whose map lines are loaded ahead at a time. */
#define KV_PREFETCH_OPS 32

/* A delivered operation of this replica: its client's reply. Own messages
 * arrive in the order they were sent, so the request is at the front. */
static void answer(struct kv_server *server, const struct spindle_message *m, uint64_t counter,
                   const struct kv_buf *reply)
{
    while (server->pending_count > 0) {
        struct kv_pending *p = &server->pending[server->pending_head];
        if (p->counter > counter)
            return;
        struct kv_pending done = *p;
        server->pending_head = (server->pending_head + 1) % server->pending_cap;
        server->pending_count--;
        if (done.counter < counter)
            continue; /* cannot happen with FIFO delivery; nothing to answer */
        if (server->options->log_dir != NULL) {
            kv_hold_reply(server, m->view_id, m->seq, done.fd, done.conn_id, done.slot, reply);
            return;
        }
        struct kv_conn *conn = kv_client_find(server, done.fd, done.conn_id);
        if (conn != NULL) /* else the client went away */
            kv_client_reply(server, conn, done.slot, reply->data, reply->len);
        return;
    }
}

/* Starts loading the map's lines the next operations touch, a few stages
 * over the whole run so that their misses overlap (kv_store.h). */
static void prefetch_ops(const struct kv_store *store, const struct spindle_message *messages,
                         size_t count)
{
    uint64_t hashes[KV_PREFETCH_OPS];
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        if (kv_store_prefetch_bucket(store, messages[i].data, messages[i].length, &hashes[n]))
            n++;
    for (size_t i = 0; i < n; i++)
        kv_store_prefetch_entry(store, hashes[i]);
    for (size_t i = 0; i < n; i++)
        kv_store_prefetch_value(store, hashes[i]);
}

static void on_deliver(void *ctx, const struct spindle_message *messages, size_t count)
{
    struct kv_server *server = ctx;
    struct kv_buf *reply = &server->scratch;
    for (size_t i = 0; i < count; i++) {
        if (i % KV_PREFETCH_OPS == 0 && server->sync.phase == KV_SYNCED)
            prefetch_ops(&server->store, messages + i,
                         count - i < KV_PREFETCH_OPS ? count - i : KV_PREFETCH_OPS);
        const struct spindle_message *m = &messages[i];
        server->delivered_seq = m->seq + 1;
        server->last_view = m->view_id;
        server->last_seq = m->seq;
        if (server->sync.phase != KV_SYNCED) {
            kv_sync_deliver(server, m); /* a joiner still taking its shard's state */
            continue;
        }
        reply->len = 0;
        kv_store_apply(&server->store, m->data, m->length, &server->op, reply);
        server->ops_applied++;
        server->since_snapshot++;
        if (m->sender_id == server->self &&
            (server->op.kind == KV_OP_COMMAND || server->op.kind == KV_OP_EXEC))
            answer(server, m, server->op.counter, reply);
        else if (server->op.kind == KV_OP_SYNC && server->op.request_id == server->self &&
                 m->sender_id != server->self)
            kv_sync_donate(server, m->sender_id, server->op.counter);
    }
}

static void on_view(void *ctx, const struct spindle_view_info *view)
{
    struct kv_server *server = ctx;
    server->view_id = view->view_id;
    server->num_view_members = view->num_members;
    memcpy(server->view_members, view->members, view->num_members * sizeof *view->members);
    server->my_rank = view->my_rank;
    server->delivered_seq = 0; /* sequence numbers start again in each view */
    /* Shards and addresses by member name (kv_transfer.h); a name that
     * does not parse cannot be in a view: the layout refuses it. */
    uint32_t replicas[SPINDLE_MAX_MEMBERS] = {0};
    for (uint32_t r = 0; r < view->num_members && view->identities != NULL; r++) {
        uint32_t id = view->members[r], shard;
        char host[KV_HOST_MAX + 1];
        unsigned port;
        if (id >= SPINDLE_MAX_MEMBERS ||
            !kv_member_name_parse(view->identities[r].name, server->num_shards, &shard, host,
                                  &port))
            continue;
        server->shard_of[id] = shard;
        snprintf(server->endpoint_of[id].host, sizeof server->endpoint_of[id].host, "%s", host);
        server->endpoint_of[id].port = port;
        replicas[shard]++;
    }
    for (uint32_t s = 0; s < server->num_shards; s++)
        if (replicas[s] > server->most_replicas[s])
            server->most_replicas[s] = replicas[s];
    kv_sync_view(server);
    fprintf(stderr, "spindle-kv: replica %u: view %llu, %u members (%u joined, %u left)\n",
            server->self, (unsigned long long)view->view_id, view->num_members, view->num_joined,
            view->num_left);
}

/* The window has room again, or a view change that refused a send is
 * done: dispatching it ended the loop's wait, and the loop's turn sends
 * what is queued (kv_outbound_flush). */
static void on_send_ready(void *ctx, uint32_t subgroup)
{
    (void)ctx;
    (void)subgroup;
}

/* A joiner's state. With one shard, the store; with several, the leader
 * (which admits joiners) does not know the joiner's shard here: it sends a
 * header that names no shard, and the joiner takes its shard's state from
 * a replica of that shard (kv_sync.c), so a joiner is sent its own shard's
 * state only. */
static int on_state_save(void *ctx, void **data, size_t *length)
{
    struct kv_server *server = ctx;
    struct kv_buf state = {0};
    if (server->num_shards > 1) {
        kv_state_header_encode(&state, KV_NO_SHARD);
    } else {
        kv_state_header_encode(&state, server->my_shard);
        kv_snapshot_encode(&server->store, &state);
    }
    *data = state.data;
    *length = state.len;
    return 0;
}

static int on_state_load(void *ctx, const void *data, size_t length)
{
    struct kv_server *server = ctx;
    char error[256];
    uint32_t shard;
    if (kv_state_header_decode(data, length, &shard, error, sizeof error) != 0) {
        fprintf(stderr, "spindle-kv: refusing the state sent to this joiner: %s\n", error);
        return SPINDLE_EPROTO;
    }
    if (shard != server->my_shard)
        return 0; /* no shard's: this joiner takes its own from a replica of it */
    if (kv_snapshot_decode(&server->store, (const char *)data + KV_STATE_HEADER,
                           length - KV_STATE_HEADER, error, sizeof error) != 0) {
        fprintf(stderr, "spindle-kv: refusing the state sent to this joiner: %s\n", error);
        return SPINDLE_EPROTO;
    }
    server->sync.phase = KV_SYNCED;
    return 0;
}

static int watch(struct kv_server *server, int fd, uint64_t tag)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag << 32 | (uint32_t)fd};
    return epoll_ctl(server->epoll_fd, EPOLL_CTL_ADD, fd, &ev);
}

static int open_listener(struct kv_server *server)
{
    const char *bind_address = server->options->bind != NULL ? server->options->bind : "127.0.0.1";
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(server->options->port)};
    if (inet_pton(AF_INET, bind_address, &addr.sin_addr) != 1) {
        fprintf(stderr, "spindle-kv: bind address '%s' is not an IPv4 address\n", bind_address);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, 511) != 0) {
        fprintf(stderr, "spindle-kv: cannot listen on %s:%u: %s\n", bind_address,
                server->options->port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    server->listen_fd = fd;
    return 0;
}

static int open_timers(struct kv_server *server)
{
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    sigprocmask(SIG_BLOCK, &signals, NULL);
    server->signal_fd = signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
    server->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (server->signal_fd < 0 || server->timer_fd < 0) {
        fprintf(stderr, "spindle-kv: signalfd/timerfd: %s\n", strerror(errno));
        return -1;
    }
    unsigned tick = server->options->tick_ms > 0 ? server->options->tick_ms : 100;
    struct itimerspec period = {
        .it_interval = {tick / 1000, (long)(tick % 1000) * 1000000},
        .it_value = {tick / 1000, (long)(tick % 1000) * 1000000},
    };
    return timerfd_settime(server->timer_fd, 0, &period, NULL);
}

/* Each view's shards: every member of the view in the subgroup of the
 * shard its name gives, as a sender (a function of the view alone, as a
 * layout must be). A member whose name is not a spindle-kv replica's is
 * refused. */
static int layout_shards(void *ctx, const struct spindle_view_info *view, uint32_t num_subgroups,
                         struct spindle_subgroup_layout *subgroups)
{
    (void)ctx;
    for (uint32_t s = 0; s < num_subgroups; s++) {
        subgroups[s].num_members = 0;
        subgroups[s].num_senders = 0;
    }
    if (view->identities == NULL)
        return SPINDLE_EINVAL;
    for (uint32_t r = 0; r < view->num_members; r++) {
        uint32_t s;
        char host[KV_HOST_MAX + 1];
        unsigned port;
        if (!kv_member_name_parse(view->identities[r].name, num_subgroups, &s, host, &port))
            return SPINDLE_EINVAL;
        subgroups[s].members[subgroups[s].num_members++] = r;
        subgroups[s].senders[subgroups[s].num_senders++] = r;
    }
    return 0;
}

static int create_group(struct kv_server *server)
{
    struct spindle_group_options *o = &server->options->group;
    uint32_t replicas = server->options->replicas;
    server->num_shards =
        replicas == 0 || replicas >= o->num_members ? 1 : o->num_members / replicas;
    bool joining = o->join != NULL;
    if (joining) {
        server->num_shards = server->options->num_shards > 0 ? server->options->num_shards : 1;
        server->my_shard = server->options->shard;
    } else {
        for (uint32_t i = 0; i < o->num_members; i++) {
            server->shard_of[i] = first_view_shard(server, i);
            server->endpoint_of[i] = server->options->endpoints[i];
            server->most_replicas[server->shard_of[i]]++;
        }
        server->my_shard = first_view_shard(server, o->self);
    }
    /* A joiner of a sharded service takes its shard's state at its first
     * view (kv_sync.c). */
    server->sync.phase = joining && server->num_shards > 1 ? KV_SYNC_WAIT : KV_SYNCED;
    char *name = server->member_name;
    const char *host = joining
                           ? (server->options->bind != NULL ? server->options->bind : "127.0.0.1")
                           : server->options->endpoints[o->self].host;
    if (!kv_member_name_format(name, sizeof server->member_name, server->my_shard, host,
                               joining ? server->options->port
                                       : server->options->endpoints[o->self].port)) {
        fprintf(stderr, "spindle-kv: the address %s:%u does not fit a member name\n", host,
                server->options->port);
        return -1;
    }
    o->member_name = name;
    static uint32_t ids[SPINDLE_MAX_MEMBERS][SPINDLE_MAX_MEMBERS];
    struct spindle_subgroup_config shards[SPINDLE_MAX_MEMBERS];
    memset(shards, 0, sizeof shards);
    for (uint32_t s = 0; s < server->num_shards; s++) {
        shards[s] = (struct spindle_subgroup_config){
            .members = ids[s],
            .senders = ids[s],
            .window_size = KV_WINDOW,
            .max_payload = KV_MAX_OP_BYTES,
            .mode = SPINDLE_MODE_ATOMIC,
        };
    }
    for (uint32_t i = 0; i < o->num_members; i++) {
        struct spindle_subgroup_config *shard = &shards[first_view_shard(server, i)];
        ids[first_view_shard(server, i)][shard->num_members++] = i;
        shard->num_senders = shard->num_members;
    }
    static uint32_t logged[SPINDLE_MAX_MEMBERS];
    if (server->options->log_dir != NULL) {
        for (uint32_t s = 0; s < server->num_shards; s++)
            logged[s] = s;
        o->log_dir = server->options->log_dir;
        o->logged_subgroups = logged;
        o->num_logged_subgroups = server->num_shards;
        o->persisted = kv_on_persisted;
        o->persisted_ctx = server;
        o->replay = kv_on_replay;
        o->replay_ctx = server;
    }
    o->layout = layout_shards;
    o->layout_ctx = server;
    o->dispatch = true;
    o->tolerate_failures = true;
    o->deliver = on_deliver;
    o->deliver_ctx = server;
    o->view_changed = on_view;
    o->view_ctx = server;
    o->send_ready = on_send_ready;
    o->send_ready_ctx = server;
    o->state_save = on_state_save;
    o->state_load = on_state_load;
    o->state_ctx = server;
    o->p2p_deliver = kv_sync_on_query;
    o->p2p_ctx = server;
    int rc = spindle_group_create(o, shards, server->num_shards, &server->group);
    if (rc < 0) {
        fprintf(stderr, "spindle-kv: replica %u: joining the group failed: %s: %s\n", o->self,
                spindle_strerror(rc), spindle_errmsg());
        return -1;
    }
    server->self = (uint32_t)spindle_group_self(server->group);
    if (server->replayed_snapshots > 0 || server->replayed_ops > 0)
        fprintf(stderr,
                "spindle-kv: replica %u: replayed shard %u from its log: %llu snapshots, %llu "
                "operations%s\n",
                server->self, server->my_shard, (unsigned long long)server->replayed_snapshots,
                (unsigned long long)server->replayed_ops,
                server->sync.phase != KV_SYNCED
                    ? "; it takes the shard's state from a replica of the shard all the same"
                    : "");
    server->num_view_members = o->num_members;
    for (uint32_t i = 0; i < o->num_members; i++)
        server->view_members[i] = i;
    server->my_rank = server->self;
    if (o->join != NULL) {
        /* The first dispatched view says who is in. */
        server->num_view_members = 0;
    }
    server->group_fd = spindle_group_fd(server->group);
    return 0;
}

static int write_pid_file(const char *path)
{
    FILE *file = fopen(path, "w");
    if (file == NULL || fprintf(file, "%d\n", (int)getpid()) < 0 || fclose(file) != 0) {
        fprintf(stderr, "spindle-kv: cannot write the pid file %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int setup(struct kv_server *server)
{
    server->listen_fd = server->timer_fd = server->signal_fd = server->group_fd = -1;
    server->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    server->persist_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    server->sync.done_fd = -1;
    if (server->epoll_fd < 0 || server->persist_fd < 0 || open_timers(server) != 0 ||
        kv_sync_init(server) != 0 || create_group(server) != 0 || open_listener(server) != 0)
        return -1;
    if (watch(server, server->persist_fd, TAG_PERSIST) != 0 ||
        watch(server, server->sync.done_fd, TAG_SYNC) != 0) {
        fprintf(stderr, "spindle-kv: epoll_ctl: %s\n", strerror(errno));
        return -1;
    }
    if (watch(server, server->listen_fd, TAG_LISTEN) != 0 ||
        watch(server, server->group_fd, TAG_GROUP) != 0 ||
        watch(server, server->timer_fd, TAG_TIMER) != 0 ||
        watch(server, server->signal_fd, TAG_SIGNAL) != 0) {
        fprintf(stderr, "spindle-kv: epoll_ctl: %s\n", strerror(errno));
        return -1;
    }
    if (server->options->pid_file != NULL && write_pid_file(server->options->pid_file) != 0)
        return -1;
    fprintf(stderr, "spindle-kv: replica %u serving RESP on %s:%u\n", server->self,
            server->options->bind != NULL ? server->options->bind : "127.0.0.1",
            server->options->port);
    return 0;
}

/* One pass over what epoll reported; false when the replica must stop. */
static bool handle(struct kv_server *server, const struct epoll_event *ev)
{
    int fd = (int)(uint32_t)ev->data.u64;
    switch (ev->data.u64 >> 32) {
    case TAG_LISTEN:
        kv_client_accept(server);
        return true;
    case TAG_GROUP: {
        int rc = spindle_dispatch(server->group, SPINDLE_DISPATCH_ALL);
        if (rc < 0) {
            fprintf(stderr, "spindle-kv: replica %u stopped: %s: %s\n", server->self,
                    spindle_strerror(rc), spindle_errmsg());
            return false;
        }
        return true;
    }
    case TAG_TIMER: {
        uint64_t expirations;
        if (read(fd, &expirations, sizeof expirations) == (ssize_t)sizeof expirations)
            send_tick(server);
        return true;
    }
    case TAG_SIGNAL:
        return false;
    case TAG_PERSIST:
        kv_persist_signalled(server);
        return true;
    case TAG_SYNC:
        kv_sync_fetched(server);
        return true;
    default:
        kv_client_event(server, fd, ev->events);
        return true;
    }
}

static int loop(struct kv_server *server)
{
    struct epoll_event events[64];
    kv_outbound_flush(server); /* what setup proposed */
    for (;;) {
        int n = epoll_wait(server->epoll_fd, events, 64, -1);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "spindle-kv: epoll_wait: %s\n", strerror(errno));
            return 1;
        }
        for (int i = 0; i < n; i++)
            if (!handle(server, &events[i]))
                return (events[i].data.u64 >> 32) == TAG_SIGNAL ? 0 : 1;
        if (server->held_count > 0)
            kv_release_persisted(server);
        kv_outbound_flush(server);
        kv_maybe_snapshot(server);
        kv_client_flush(server);
        kv_outbound_flush(server); /* what pipelined input proposed */
    }
}

static void teardown(struct kv_server *server)
{
    kv_client_close_all(server);
    kv_sync_stop(server); /* its thread queries through the group */
    if (server->group != NULL) {
        epoll_ctl(server->epoll_fd, EPOLL_CTL_DEL, server->group_fd, NULL);
        spindle_group_destroy(server->group);
    }
    for (size_t i = 0; i < server->held_count; i++)
        free(server->held[(server->held_head + i) % server->held_cap].reply);
    free(server->held);
    int fds[] = {server->listen_fd, server->timer_fd, server->signal_fd, server->epoll_fd,
                 server->persist_fd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    kv_store_free(&server->store);
    kv_argv_free(&server->argv);
    kv_argv_free(&server->exec_argv);
    kv_argv_free(&server->op.argv);
    kv_buf_free(&server->scratch);
    kv_buf_free(&server->outbound);
    free(server->pending);
    free(server->conns);
    free(server->dirty);
}

int kv_server_run(struct kv_server_options *options)
{
    struct kv_server *server = calloc(1, sizeof *server);
    if (server == NULL)
        return 1;
    server->options = options;
    server->limits.max_args = 1024;
    server->limits.max_bulk = KV_MAX_OP_BYTES;
    server->limits.max_inline = 64u << 10;
    kv_store_init(&server->store);
    signal(SIGPIPE, SIG_IGN);
    int rc = setup(server) == 0 ? loop(server) : 1;
    teardown(server);
    free(server);
    return rc;
}
