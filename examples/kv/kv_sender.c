/*
 * The replica's sender thread (kv_server_impl.h). The event loop is the
 * only thread that dispatches the group's upcalls, and a joiner's
 * state_save is among them; a reserve outside an upcall waits out a view
 * change, which waits for that state_save (docs/DISPATCH.md), so the loop
 * itself must never reserve. It queues encoded operations here instead,
 * and this thread multicasts them in the order they were queued (which
 * keeps the loop's requests in flight matched in that order).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kv_server_impl.h"

/* How long a sender that found the window full waits before trying again
 * when no send_ready came (ms). */
#define KV_SENDER_RETRY_MS 5

/* Sends one operation; false when the replica is stopping or the group
 * refused it. Called without the lock. */
static bool send_one(struct kv_server *server, const char *op, uint32_t len)
{
    for (;;) {
        void *slot;
        int rc =
            spindle_reserve(server->group, server->my_shard, len, SPINDLE_RESERVE_NONBLOCK, &slot);
        if (rc == 0) {
            memcpy(slot, op, len);
            spindle_commit(server->group, server->my_shard);
            return true;
        }
        if (rc != SPINDLE_EAGAIN) {
            fprintf(stderr, "spindle-kv: replica %u: multicast failed: %s: %s\n", server->self,
                    spindle_strerror(rc), spindle_errmsg());
            return false; /* the loop learns why from spindle_dispatch */
        }
        /* The window is full: send_ready wakes us, or the retry period. */
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += KV_SENDER_RETRY_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&server->send_lock);
        bool stopping = server->send_stopping;
        if (!stopping && !server->send_ready_seen)
            pthread_cond_timedwait(&server->send_wake, &server->send_lock, &until);
        server->send_ready_seen = false;
        stopping = server->send_stopping;
        pthread_mutex_unlock(&server->send_lock);
        if (stopping)
            return false;
    }
}

static void *sender_main(void *arg)
{
    struct kv_server *server = arg;
    struct kv_buf batch = {0};
    pthread_mutex_lock(&server->send_lock);
    for (;;) {
        while (!server->send_stopping && server->outbound.len == 0)
            pthread_cond_wait(&server->send_wake, &server->send_lock);
        if (server->send_stopping)
            break;
        struct kv_buf taken = server->outbound;
        server->outbound = batch;
        batch = taken;
        pthread_mutex_unlock(&server->send_lock);
        bool ok = true;
        for (size_t at = 0; ok && at < batch.len;) {
            uint32_t len;
            memcpy(&len, batch.data + at, sizeof len);
            ok = send_one(server, batch.data + at + sizeof len, len);
            at += sizeof len + len;
        }
        batch.len = 0;
        pthread_mutex_lock(&server->send_lock);
        if (!ok) {
            /* Stopping, or the group stopped: nothing more goes out. */
            server->send_stopping = true;
        }
    }
    pthread_mutex_unlock(&server->send_lock);
    kv_buf_free(&batch);
    return NULL;
}

int kv_sender_start(struct kv_server *server)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&server->send_wake, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0 || pthread_mutex_init(&server->send_lock, NULL) != 0) {
        fprintf(stderr, "spindle-kv: cannot create the sender's lock\n");
        return -1;
    }
    server->send_initialized = true;
    rc = pthread_create(&server->sender, NULL, sender_main, server);
    if (rc != 0) {
        fprintf(stderr, "spindle-kv: cannot start the sender thread: %s\n", strerror(rc));
        return -1;
    }
    server->sender_running = true;
    return 0;
}

void kv_sender_queue(struct kv_server *server, const struct kv_buf *op)
{
    uint32_t len = (uint32_t)op->len;
    pthread_mutex_lock(&server->send_lock);
    bool was_empty = server->outbound.len == 0;
    kv_buf_append(&server->outbound, &len, sizeof len);
    kv_buf_append(&server->outbound, op->data, op->len);
    if (was_empty)
        pthread_cond_signal(&server->send_wake);
    pthread_mutex_unlock(&server->send_lock);
}

void kv_sender_wake(struct kv_server *server)
{
    pthread_mutex_lock(&server->send_lock);
    server->send_ready_seen = true;
    pthread_cond_signal(&server->send_wake);
    pthread_mutex_unlock(&server->send_lock);
}

void kv_sender_stop(struct kv_server *server)
{
    if (server->sender_running) {
        pthread_mutex_lock(&server->send_lock);
        server->send_stopping = true;
        pthread_cond_broadcast(&server->send_wake);
        pthread_mutex_unlock(&server->send_lock);
        pthread_join(server->sender, NULL);
        server->sender_running = false;
    }
    if (server->send_initialized) {
        pthread_cond_destroy(&server->send_wake);
        pthread_mutex_destroy(&server->send_lock);
        server->send_initialized = false;
    }
}
