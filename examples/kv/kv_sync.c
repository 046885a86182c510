/*
 * A joiner's shard state transfer (kv_server_impl.h, docs/KV.md "Joining a
 * shard"). The group's state transfer comes from the view's leader, which
 * serves one shard and does not know the joiner's; in a service of several
 * shards a joiner takes its shard's state from a replica of that shard:
 *
 * 1. The joiner multicasts a mark (KV_OP_SYNC) in its shard, naming a
 *    replica of the shard (the donor) and a token. Deliveries before the
 *    mark are dropped: they are in the state the donor will hand over.
 * 2. Each replica delivers the mark at the same point of the shard's
 *    stream; the donor encodes its store there and keeps it for the token.
 * 3. The joiner's fetch thread asks the donor for the state, a chunk per
 *    point-to-point query, while the loop holds the operations delivered
 *    after the mark.
 * 4. The joiner loads the state and applies the held operations: its store
 *    is then the shard's, and it serves clients (before: -LOADING).
 *
 * A view change, a donor that has no state for the token (it is itself
 * still loading, or is not of the shard) or a failed query starts again at
 * step 1, asking the next replica of the shard.
 *
 * A logged joiner (--log-dir) does the same: the library's log catch-up
 * comes from the view's leader, whose log holds only its own shard's
 * messages, so the joiner's shard state comes from here, and is written
 * into its log as a snapshot once loaded (kv_snapshot_now). A restart of
 * that joiner replays its log and then takes the state again in the same
 * way: what the shard delivered while it was down is in no log the
 * leader can send.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "kv_server_impl.h"

/* How long a query for a chunk may wait for its reply (ms). */
#define KV_SYNC_QUERY_MS 2000
/* Largest chunk of one reply. */
#define KV_SYNC_CHUNK (SPINDLE_P2P_MAX_PAYLOAD - KV_REPLY_HEADER)

/* One fetch: the state of token from donor, into *state. 0, the status
 * KV_REPLY_NOT_HERE + 1, or a negative code with a message in error. */
static int fetch(struct kv_server *server, uint32_t donor, uint64_t token, struct kv_buf *state,
                 char *error, size_t error_size)
{
    unsigned char reply_bytes[SPINDLE_P2P_MAX_PAYLOAD];
    struct kv_buf query = {0};
    int rc = 0;
    state->len = 0;
    for (;;) {
        pthread_mutex_lock(&server->sync.lock);
        bool stale = server->sync.stopping || server->sync.job;
        pthread_mutex_unlock(&server->sync.lock);
        if (stale) {
            snprintf(error, error_size, "the fetch was given up");
            rc = SPINDLE_ESHUTDOWN;
            break;
        }
        query.len = 0;
        kv_query_encode(&query, &(struct kv_query){token, state->len});
        size_t reply_len = 0;
        rc = spindle_p2p_query(server->group, donor, query.data, query.len, reply_bytes,
                               sizeof reply_bytes, &reply_len, KV_SYNC_QUERY_MS);
        if (rc < 0) {
            snprintf(error, error_size, "query to member %" PRIu32 ": %s: %s", donor,
                     spindle_strerror(rc), spindle_errmsg());
            break;
        }
        struct kv_reply reply;
        if (kv_reply_decode(reply_bytes, reply_len, state->len, &reply, error, error_size) != 0) {
            rc = SPINDLE_EPROTO;
            break;
        }
        if (reply.status == KV_REPLY_NOT_HERE) {
            snprintf(error, error_size, "member %" PRIu32 " holds no state for this joiner", donor);
            rc = KV_REPLY_NOT_HERE + 1;
            break;
        }
        kv_buf_append(state, reply.chunk, reply.chunk_len);
        if (state->len == reply.total)
            break;
    }
    kv_buf_free(&query);
    return rc;
}

static void *fetch_main(void *arg)
{
    struct kv_server *server = arg;
    struct kv_sync *sync = &server->sync;
    struct kv_buf state = {0};
    char error[256];
    pthread_mutex_lock(&sync->lock);
    for (;;) {
        while (!sync->stopping && !sync->job)
            pthread_cond_wait(&sync->wake, &sync->lock);
        if (sync->stopping)
            break;
        uint64_t token = sync->job_token;
        uint32_t donor = sync->job_donor;
        sync->job = false;
        pthread_mutex_unlock(&sync->lock);
        error[0] = '\0';
        int rc = fetch(server, donor, token, &state, error, sizeof error);
        pthread_mutex_lock(&sync->lock);
        struct kv_buf previous = sync->result;
        sync->result = state;
        state = previous;
        sync->result_token = token;
        sync->result_rc = rc;
        sync->result_ready = true;
        snprintf(sync->result_error, sizeof sync->result_error, "%s", error);
        uint64_t one = 1;
        if (write(sync->done_fd, &one, sizeof one) != (ssize_t)sizeof one)
            fprintf(stderr, "spindle-kv: replica %u: eventfd: %s\n", server->self, strerror(errno));
    }
    pthread_mutex_unlock(&sync->lock);
    kv_buf_free(&state);
    return NULL;
}

int kv_sync_init(struct kv_server *server)
{
    struct kv_sync *sync = &server->sync;
    sync->done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (sync->done_fd < 0) {
        fprintf(stderr, "spindle-kv: eventfd: %s\n", strerror(errno));
        return -1;
    }
    if (pthread_mutex_init(&sync->lock, NULL) != 0 || pthread_cond_init(&sync->wake, NULL) != 0) {
        fprintf(stderr, "spindle-kv: cannot create the state transfer's lock\n");
        return -1;
    }
    sync->lock_initialized = true;
    int rc = pthread_create(&sync->thread, NULL, fetch_main, server);
    if (rc != 0) {
        fprintf(stderr, "spindle-kv: cannot start the state transfer thread: %s\n", strerror(rc));
        return -1;
    }
    sync->thread_running = true;
    return 0;
}

void kv_sync_stop(struct kv_server *server)
{
    struct kv_sync *sync = &server->sync;
    if (sync->thread_running) {
        pthread_mutex_lock(&sync->lock);
        sync->stopping = true;
        pthread_cond_broadcast(&sync->wake);
        pthread_mutex_unlock(&sync->lock);
        pthread_join(sync->thread, NULL);
        sync->thread_running = false;
    }
    if (sync->lock_initialized) {
        pthread_cond_destroy(&sync->wake);
        pthread_mutex_destroy(&sync->lock);
        sync->lock_initialized = false;
    }
    if (sync->done_fd >= 0)
        close(sync->done_fd);
    sync->done_fd = -1;
    kv_buf_free(&sync->held);
    kv_buf_free(&sync->result);
    for (uint32_t i = 0; i < SPINDLE_MAX_MEMBERS; i++)
        kv_buf_free(&sync->donations[i].state);
}

/* Step 1: multicasts a mark asking the next replica of the shard. */
static void start_attempt(struct kv_server *server)
{
    struct kv_sync *sync = &server->sync;
    uint32_t candidates[SPINDLE_MAX_MEMBERS], count = 0;
    for (uint32_t r = 0; r < server->num_view_members; r++) {
        uint32_t id = server->view_members[r];
        if (id != server->self && kv_member_shard(server, id) == server->my_shard)
            candidates[count++] = id;
    }
    sync->held.len = 0;
    if (count == 0) {
        fprintf(stderr,
                "spindle-kv: replica %u: no other replica of shard %u in view %" PRIu64
                " to take the shard's state from; waiting for one\n",
                server->self, server->my_shard, server->view_id);
        sync->phase = KV_SYNC_WAIT;
        return;
    }
    sync->donor = candidates[sync->attempts % count];
    sync->attempts++;
    sync->token = (uint64_t)server->self << 48 | sync->attempts;
    struct kv_buf *op = &server->scratch;
    op->len = 0;
    kv_op_encode(op, KV_OP_SYNC, sync->token, 0, 0, sync->donor, NULL, 0);
    kv_outbound_send(server, op);
    sync->phase = KV_SYNC_MARK;
}

void kv_sync_view(struct kv_server *server)
{
    struct kv_sync *sync = &server->sync;
    for (uint32_t i = 0; i < SPINDLE_MAX_MEMBERS; i++) {
        sync->donations[i].active = false;
        kv_buf_free(&sync->donations[i].state);
    }
    if (sync->phase != KV_SYNCED)
        start_attempt(server);
}

/* Step 3: the mark is delivered; the fetch thread asks the donor. */
static void start_fetch(struct kv_server *server)
{
    struct kv_sync *sync = &server->sync;
    sync->phase = KV_SYNC_FETCH;
    pthread_mutex_lock(&sync->lock);
    sync->job = true;
    sync->job_token = sync->token;
    sync->job_donor = sync->donor;
    sync->result_ready = false;
    pthread_cond_signal(&sync->wake);
    pthread_mutex_unlock(&sync->lock);
}

void kv_sync_deliver(struct kv_server *server, const struct spindle_message *m)
{
    struct kv_sync *sync = &server->sync;
    if (sync->phase == KV_SYNC_FETCH) {
        uint32_t len = m->length;
        kv_buf_append(&sync->held, &len, sizeof len);
        kv_buf_append(&sync->held, m->data, m->length);
        return;
    }
    char error[256];
    if (sync->phase == KV_SYNC_MARK && m->sender_id == server->self &&
        kv_op_decode(m->data, m->length, &server->op, error, sizeof error) == 0 &&
        server->op.kind == KV_OP_SYNC && server->op.counter == sync->token)
        start_fetch(server);
    /* Else: before the mark, in the state the donor hands over. */
}

void kv_sync_donate(struct kv_server *server, uint32_t joiner, uint64_t token)
{
    if (joiner >= SPINDLE_MAX_MEMBERS || server->sync.phase != KV_SYNCED)
        return; /* a replica still loading answers "not here" */
    struct kv_donation *d = &server->sync.donations[joiner];
    d->active = true;
    d->token = token;
    d->state.len = 0;
    kv_state_header_encode(&d->state, server->my_shard);
    kv_snapshot_encode(&server->store, &d->state);
}

void kv_sync_on_query(void *ctx, const struct spindle_p2p_message *message)
{
    struct kv_server *server = ctx;
    if (message->query_id == 0)
        return; /* nothing sends one-way messages */
    char error[256];
    struct kv_query query;
    struct kv_reply reply = {.status = KV_REPLY_NOT_HERE};
    struct kv_donation *given = NULL; /* when the reply carries a chunk of it */
    struct kv_donation *d = &server->sync.donations[message->sender_id % SPINDLE_MAX_MEMBERS];
    if (kv_query_decode(message->data, message->length, &query, error, sizeof error) != 0) {
        fprintf(stderr, "spindle-kv: replica %u: refusing a state query from member %u: %s\n",
                server->self, message->sender_id, error);
    } else if (message->sender_id < SPINDLE_MAX_MEMBERS && d->active && d->token == query.token &&
               query.offset <= d->state.len) {
        size_t left = d->state.len - query.offset;
        given = d;
        reply = (struct kv_reply){
            .status = KV_REPLY_CHUNK,
            .total = d->state.len,
            .offset = query.offset,
            .chunk = d->state.data + query.offset,
            .chunk_len = left < KV_SYNC_CHUNK ? left : KV_SYNC_CHUNK,
        };
    }
    struct kv_buf *out = &server->scratch;
    out->len = 0;
    kv_reply_encode(out, &reply);
    int rc = spindle_p2p_reply(server->group, message, out->data, out->len, 0);
    if (rc < 0) /* the joiner's query times out and it asks again */
        fprintf(stderr, "spindle-kv: replica %u: state reply to member %u: %s: %s\n", server->self,
                message->sender_id, spindle_strerror(rc), spindle_errmsg());
    else if (given != NULL && reply.offset + reply.chunk_len == given->state.len) {
        given->active = false; /* handed over whole */
        kv_buf_free(&given->state);
    }
}

/* Step 4: loads the state and applies what was held. */
static int load(struct kv_server *server, const struct kv_buf *state, char *error,
                size_t error_size)
{
    uint32_t shard;
    if (kv_state_header_decode(state->data, state->len, &shard, error, error_size) != 0)
        return -1;
    if (shard != server->my_shard) {
        snprintf(error, error_size, "the state is of shard %" PRIu32 ", not %" PRIu32, shard,
                 server->my_shard);
        return -1;
    }
    if (kv_snapshot_decode(&server->store, state->data + KV_STATE_HEADER,
                           state->len - KV_STATE_HEADER, error, error_size) != 0)
        return -1;
    struct kv_buf *reply = &server->scratch;
    for (size_t at = 0; at < server->sync.held.len;) {
        uint32_t len;
        memcpy(&len, server->sync.held.data + at, sizeof len);
        reply->len = 0;
        kv_store_apply(&server->store, server->sync.held.data + at + sizeof len, len, &server->op,
                       reply);
        at += sizeof len + len;
    }
    return 0;
}

void kv_sync_fetched(struct kv_server *server)
{
    struct kv_sync *sync = &server->sync;
    uint64_t count;
    if (read(sync->done_fd, &count, sizeof count) != (ssize_t)sizeof count)
        return;
    pthread_mutex_lock(&sync->lock);
    bool ready = sync->result_ready && sync->result_token == sync->token && !sync->job;
    sync->result_ready = false;
    struct kv_buf state = sync->result;
    sync->result = (struct kv_buf){0};
    int rc = sync->result_rc;
    char error[256];
    snprintf(error, sizeof error, "%s", sync->result_error);
    pthread_mutex_unlock(&sync->lock);
    if (!ready || sync->phase != KV_SYNC_FETCH) {
        kv_buf_free(&state); /* of an attempt given up */
        return;
    }
    if (rc == 0 && load(server, &state, error, sizeof error) == 0) {
        fprintf(stderr,
                "spindle-kv: replica %u: took shard %u's state (%zu bytes, %zu keys) from member "
                "%u and %zu bytes of operations since\n",
                server->self, server->my_shard, state.len, kv_store_size(&server->store),
                sync->donor, sync->held.len);
        sync->phase = KV_SYNCED;
        kv_buf_free(&sync->held);
        /* A logged joiner's log holds none of its shard's history (the
         * catch-up came from the leader, of another shard) and, before
         * this state, only messages it dropped: the state goes into the
         * log as its shard's snapshot, from which a restart replays. */
        kv_snapshot_now(server);
    } else {
        fprintf(stderr, "spindle-kv: replica %u: taking shard %u's state from member %u: %s\n",
                server->self, server->my_shard, sync->donor, error);
        kv_store_free(&server->store);
        kv_store_init(&server->store);
        start_attempt(server);
    }
    kv_buf_free(&state);
}
