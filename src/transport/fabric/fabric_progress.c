/*
 * libfabric backend: the progress thread. It is the only reader of the
 * endpoint's CQ and EQ. It blocks in fi_cq_sread (which also drives the
 * providers that need target-side progress, such as tcp), applies landed
 * records to their regions, returns credits, handles connection events and
 * turns errors, shutdowns and stalled credits into TP_EVENT_PEER_FAILED.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "transport/fabric/fabric_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

#define FAB_WAIT_MS  10 /* upper bound on EQ/timer latency; the CQ wakes us at once */
#define FAB_CQ_BATCH 64

void fab_bell_ring(struct fab_ep *ep)
{
    atomic_fetch_add(&ep->bell, 1);
    if (atomic_load(&ep->sleepers) > 0)
        syscall(SYS_futex, (uint32_t *)&ep->bell, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* The endpoint whose progress thread the calling thread is, if any. */
static _Thread_local const struct fab_ep *progress_of;

int fab_on_progress_thread(const struct fab_ep *ep)
{
    return progress_of == ep;
}

bool fab_set_arrival(struct tp_endpoint *tep, tp_arrival_fn fn, void *ctx)
{
    struct fab_ep *ep = fab_ep_of(tep);
    pthread_mutex_lock(&ep->arrival_lock);
    ep->arrival_fn = fn;
    ep->arrival_ctx = ctx;
    pthread_mutex_unlock(&ep->arrival_lock);
    return true;
}

void fab_records_applied(struct fab_ep *ep)
{
    int handled = 0;
    if (!ep->in_arrival) {
        pthread_mutex_lock(&ep->arrival_lock);
        if (ep->arrival_fn != NULL) {
            ep->in_arrival = 1;
            handled = ep->arrival_fn(ep->arrival_ctx);
            ep->in_arrival = 0;
        }
        pthread_mutex_unlock(&ep->arrival_lock);
    }
    if (!handled)
        fab_bell_ring(ep);
}

void fab_event_push(struct fab_ep *ep, const struct tp_event *ev)
{
    struct fab_event_queue *q = &ep->eventq;
    pthread_mutex_lock(&q->lock);
    if (q->count == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        struct tp_event *grown = realloc(q->events, cap * sizeof *grown);
        if (grown == NULL) {
            pthread_mutex_unlock(&q->lock);
            SP_LOG_ERR("fabric", "out of memory queueing an event; event dropped");
            return;
        }
        q->events = grown;
        q->cap = cap;
    }
    q->events[q->count++] = *ev;
    pthread_mutex_unlock(&q->lock);
    fab_bell_ring(ep);
}

static struct fab_conn *fab_find_peer_by_nonce(struct fab_ep *ep, uint64_t nonce)
{
    for (struct fab_conn *c = ep->peers; c != NULL; c = c->next_peer)
        if (c->remote_nonce == nonce && atomic_load(&c->state) == FAB_CONN_CONNECTED)
            return c;
    return NULL;
}

static void fab_conn_fail_at(struct fab_conn *conn, int error, const char *why,
                             enum sp_log_level level);

/* Marks conn failed once. An outgoing connection that was in use reports
 * TP_EVENT_PEER_FAILED; an incoming one fails the outgoing connection to
 * the same endpoint (a member whose writes cannot reach us is broken). */
void fab_conn_fail(struct fab_conn *conn, int error, const char *why)
{
    fab_conn_fail_at(conn, error, why, SP_LOG_WARN);
}

/* fab_conn_fail, logging the failure at level (a peer that said goodbye
 * and then closed is reported all the same, but is no cause for alarm). */
static void fab_conn_fail_at(struct fab_conn *conn, int error, const char *why,
                             enum sp_log_level level)
{
    struct fab_ep *ep = conn->ep;
    pthread_mutex_lock(&ep->cm_lock);
    int state = atomic_load(&conn->state);
    if (state == FAB_CONN_FAILED || state == FAB_CONN_CLOSED) {
        pthread_mutex_unlock(&ep->cm_lock);
        return;
    }
    snprintf(conn->why, sizeof conn->why, "%s", why);
    atomic_store(&conn->error, error);
    atomic_store(&conn->state, FAB_CONN_FAILED);
    struct fab_conn *also = NULL;
    if (conn->incoming)
        also = fab_find_peer_by_nonce(ep, conn->remote_nonce);
    pthread_cond_broadcast(&ep->cm_cond);
    pthread_mutex_unlock(&ep->cm_lock);

    if (state == FAB_CONN_CONNECTED)
        sp_log(level, "fabric", "connection %s (member %u) failed: %s", conn->name, conn->remote_id,
               why);
    if (!conn->incoming && state == FAB_CONN_CONNECTED) {
        if (atomic_exchange(&conn->failure_reported, 1) == 0) {
            struct tp_event ev = {
                .type = TP_EVENT_PEER_FAILED, .peer = &conn->base, .error = SPINDLE_EPEERFAILED};
            fab_event_push(ep, &ev);
        }
    }
    if (also != NULL) {
        char reason[200];
        snprintf(reason, sizeof reason, "its connection to us broke: %s", why);
        fab_conn_fail_at(also, error, reason, level);
    }
}

static struct fab_region *fab_region_find(struct fab_ep *ep, uint64_t id)
{
    for (struct fab_region *r = ep->regions; r != NULL; r = r->next)
        if (r->id == id)
            return r;
    return NULL;
}

/* Copies with aligned 8-byte release stores (T1); edge bytes one at a time. */
static void fab_apply_copy(uint8_t *dst, const uint8_t *src, size_t len)
{
    while (len > 0 && ((uintptr_t)dst & 7u) != 0) {
        __atomic_store_n(dst++, *src++, __ATOMIC_RELEASE);
        len--;
    }
    while (len >= 8) {
        uint64_t word;
        memcpy(&word, src, 8);
        __atomic_store_n((uint64_t *)(void *)dst, word, __ATOMIC_RELEASE);
        dst += 8;
        src += 8;
        len -= 8;
    }
    while (len > 0) {
        __atomic_store_n(dst++, *src++, __ATOMIC_RELEASE);
        len--;
    }
}

static uint64_t fab_rec_size(uint32_t length)
{
    return (FAB_REC_HDR + (uint64_t)length + FAB_REC_ALIGN - 1) / FAB_REC_ALIGN * FAB_REC_ALIGN;
}

int fab_rec_read(const uint8_t *ring, uint64_t off, uint64_t applied, struct fab_rec_hdr *hdr)
{
    if (off > FAB_RING_SIZE - FAB_REC_HDR)
        return sp_error(SPINDLE_EPROTO, "record offset %" PRIu64 " outside the ring", off);
    memcpy(hdr, ring + off, sizeof *hdr);
    uint64_t size = fab_rec_size(hdr->length);
    /* The next record starts where the last one ended, or at the ring's
     * start when it would not fit before the end (the writer skips). */
    int in_order =
        hdr->start == applied || (hdr->start % FAB_RING_SIZE == 0 && hdr->start > applied &&
                                  hdr->start - applied < FAB_RING_SIZE);
    /* A record followed by another of the same write cannot end the ring:
     * a write never wraps. */
    int flags_ok = (hdr->flags & ~FAB_REC_MORE) == 0 &&
                   !((hdr->flags & FAB_REC_MORE) && off + size == FAB_RING_SIZE);
    if (hdr->magic != FAB_REC_MAGIC || hdr->start % FAB_RING_SIZE != off || !in_order ||
        hdr->end != hdr->start + size || off + size > FAB_RING_SIZE || !flags_ok)
        return sp_error(SPINDLE_EPROTO,
                        "record at %" PRIu64 " is malformed or out of order (start %" PRIu64
                        ", applied %" PRIu64 ")",
                        off, hdr->start, applied);
    return 0;
}

int fab_rec_fits(const struct fab_rec_hdr *hdr, const struct fab_region *region)
{
    if (region == NULL || hdr->offset > region->length ||
        hdr->length > region->length - hdr->offset)
        return sp_error(SPINDLE_EPROTO,
                        "write to region %" PRIu64 " at %" PRIu64 "+%u is out of bounds",
                        hdr->region, hdr->offset, hdr->length);
    return 0;
}

/* Applies one record at ring offset off of an incoming connection into
 * *hdr. Returns 0, or an error after which the connection is failed. */
static int fab_apply_one(struct fab_ep *ep, struct fab_conn *conn, uint64_t off,
                         struct fab_rec_hdr *out)
{
    struct fab_rec_hdr hdr;
    int rc = fab_rec_read(conn->ring, off, conn->applied, &hdr);
    if (rc != 0)
        return rc;
    *out = hdr;
    pthread_mutex_lock(&ep->region_lock);
    struct fab_region *region = fab_region_find(ep, hdr.region);
    if (region == NULL && hdr.region != 0 && hdr.region < ep->next_region) {
        /* A region freed while a peer still pushed to it (a member tearing
         * down after the shutdown barrier): nobody reads it any more. */
        pthread_mutex_unlock(&ep->region_lock);
        conn->applied = hdr.end;
        return 0;
    }
    rc = fab_rec_fits(&hdr, region);
    if (rc == 0)
        rc = fab_rec_granted(&hdr, region, conn->remote_id);
    if (rc != 0 || region == NULL) { /* fab_rec_fits refuses an unknown region */
        pthread_mutex_unlock(&ep->region_lock);
        return rc != 0 ? rc : SPINDLE_EPROTO;
    }
    fab_apply_copy((uint8_t *)region->addr + hdr.offset, conn->ring + off + FAB_REC_HDR,
                   hdr.length);
    pthread_mutex_unlock(&ep->region_lock);
    conn->applied = hdr.end;
    return 0;
}

/* Applies the records of one write, the first at ring offset off, the
 * others back to back after it while a header says another follows (all of
 * a write has landed once its completion is read). Returns 0, or an error
 * after which the connection is failed. */
static int fab_apply_record(struct fab_ep *ep, struct fab_conn *conn, uint64_t off)
{
    for (;;) {
        struct fab_rec_hdr hdr;
        int rc = fab_apply_one(ep, conn, off, &hdr);
        if (rc != 0 || (hdr.flags & FAB_REC_MORE) == 0)
            return rc;
        off = hdr.end % FAB_RING_SIZE;
    }
}

static void fab_handle_msg(struct fab_ep *ep, struct fab_conn *conn, const void *buf, size_t len)
{
    struct fab_msg msg;
    if (fab_msg_decode(buf, len, &msg) != 0) {
        fab_conn_fail(conn, SPINDLE_EPROTO, spindle_errmsg());
        return;
    }
    if (msg.kind == FAB_MSG_CREDIT && !conn->incoming) {
        uint64_t posted = atomic_load(&conn->posted);
        if (msg.value > posted || msg.value < atomic_load(&conn->acked)) {
            fab_conn_fail(conn, SPINDLE_EPROTO, "credit return beyond what was posted");
            return;
        }
        atomic_store(&conn->acked, msg.value);
        atomic_store(&conn->last_progress_ns, sp_now_ns());
        if (atomic_exchange(&conn->starved, 0))
            fab_bell_ring(ep);
    } else if (msg.kind == FAB_MSG_DOORBELL && conn->incoming) {
        fab_bell_ring(ep);
    } else if (msg.kind == FAB_MSG_BYE && conn->incoming) {
        conn->bye = 1;
    } else {
        fab_conn_fail(conn, SPINDLE_EPROTO, "unexpected control message");
    }
}

/* Handles one completion; returns 1 when a record was applied. */
static int fab_handle_completion(struct fab_ep *ep, const struct fi_cq_data_entry *e)
{
    int applied = 0;
    struct fab_ctx *ctx = e->op_context;
    int kind = ctx != NULL ? atomic_load_explicit(&ctx->kind, memory_order_acquire) : 0;
    /* Some providers (sockets) flag the writer's own completion with
     * FI_REMOTE_CQ_DATA too: our write contexts identify those. */
    int own_write = kind == FAB_CTX_WRITE;
    if ((e->flags & FI_REMOTE_CQ_DATA) && !own_write) {
        uint32_t index = (uint32_t)(e->data >> 16) & 0xffffu;
        struct fab_conn *conn = index < ep->num_incoming ? ep->incoming[index] : NULL;
        int state = conn != NULL ? atomic_load(&conn->state) : FAB_CONN_CLOSED;
        if (state == FAB_CONN_CONNECTING || state == FAB_CONN_CONNECTED) {
            if (fab_apply_record(ep, conn, (e->data & 0xffffu) * FAB_REC_ALIGN) == 0)
                applied = 1;
            else
                fab_conn_fail(conn, SPINDLE_EPROTO, spindle_errmsg());
        }
        /* With FI_RX_CQ_DATA the write consumed one of our receives. */
        if (kind == FAB_CTX_RECV && atomic_load(&ctx->conn->state) <= FAB_CONN_CONNECTED)
            fab_repost_recv(ctx->conn, ctx);
        return applied;
    }
    if (kind == 0)
        return 0;
    struct fab_conn *conn = ctx->conn;
    if (atomic_load(&conn->state) > FAB_CONN_CONNECTED)
        return 0;
    if (kind == FAB_CTX_WRITE) {
        /* A connection's writes complete in posting order: this one
         * accounts for the unsignaled ones before it too. */
        if (ctx->end > atomic_load(&conn->completed))
            atomic_store(&conn->completed, ctx->end);
        if (ctx->seq + 1 > atomic_load(&conn->ops_completed))
            atomic_store(&conn->ops_completed, ctx->seq + 1);
        atomic_store(&conn->last_progress_ns, sp_now_ns());
        if (atomic_exchange(&conn->starved, 0))
            fab_bell_ring(ep); /* a poster may wait for operation slots */
        if (ctx->signaled) {
            struct tp_event ev = {
                .type = TP_EVENT_WRITE_DONE, .peer = &conn->base, .cookie = ctx->cookie};
            fab_event_push(ep, &ev);
        }
    } else if (kind == FAB_CTX_RECV) {
        fab_handle_msg(ep, conn, ctx->buf, e->len);
        if (atomic_load(&conn->state) <= FAB_CONN_CONNECTED)
            fab_repost_recv(conn, ctx);
    }
    return 0;
}

static void fab_handle_cq_error(struct fab_ep *ep)
{
    struct fi_cq_err_entry err = {0};
    if (fi_cq_readerr(ep->cq, &err, 0) <= 0)
        return;
    struct fab_ctx *ctx = err.op_context;
    if (ctx == NULL || atomic_load_explicit(&ctx->kind, memory_order_acquire) == 0)
        return;
    /* Cancellations follow a shutdown, which the EQ reports (and which
     * tells a goodbye from a failure); they are not failures themselves. */
    if (err.err == FI_ECANCELED)
        return;
    char why[160];
    snprintf(why, sizeof why, "completion error: %s", fi_strerror(err.err));
    fab_conn_fail(ctx->conn, SPINDLE_EPEERFAILED, why);
}

/* Returns credits to writers: those that have a quarter ring or more to come
 * back, or (all) every writer with any. A return is a message the writer's
 * progress thread must wake for, so it is not sent per drain: at light load
 * that was a send here and a wake-up there for every record, on the CPUs the
 * members that must answer need. Holding less than a quarter ring never
 * starves a writer (it may have a whole ring outstanding: with the target
 * caught up, three quarters stay free), and the timer returns the rest
 * within FAB_WAIT_MS, well inside any failure timeout. */
static void fab_return_credits(struct fab_ep *ep, int all)
{
    for (uint32_t i = 0; i < ep->num_incoming; i++) {
        struct fab_conn *conn = ep->incoming[i];
        if (atomic_load(&conn->state) != FAB_CONN_CONNECTED || conn->applied == conn->credit_sent)
            continue;
        if (!all && conn->applied - conn->credit_sent < FAB_CREDIT_EAGER)
            continue;
        int rc = fab_send_msg(conn, FAB_MSG_CREDIT, conn->applied);
        if (rc == 0)
            conn->credit_sent = conn->applied;
        else if (rc != SPINDLE_EAGAIN)
            fab_conn_fail(conn, SPINDLE_EPEERFAILED, spindle_errmsg());
    }
}

static void fab_drain_cq(struct fab_ep *ep, int timeout_ms)
{
    struct fi_cq_data_entry entries[FAB_CQ_BATCH];
    /* A non-blocking read first: it drives progress over data a provider
     * has already pulled off the socket, which would not wake an fd wait. */
    ssize_t n = fi_cq_read(ep->cq, entries, FAB_CQ_BATCH);
    if (n == -FI_EAGAIN)
        n = fi_cq_sread(ep->cq, entries, FAB_CQ_BATCH, NULL, timeout_ms);
    for (int rounds = 0;; rounds++) {
        if (n == -FI_EAVAIL) {
            fab_handle_cq_error(ep);
        } else if (n > 0) {
            int applied = 0;
            for (ssize_t i = 0; i < n; i++)
                applied |= fab_handle_completion(ep, &entries[i]);
            /* Wake the readers (or answer here, fab_records_applied)
             * before anything else: a credit return is a send, and the
             * reader's answer is what a message waits for. */
            if (applied)
                fab_records_applied(ep);
            fab_return_credits(ep, 0);
        } else {
            break;
        }
        if (rounds == 64)
            break; /* let the EQ and the timers have a turn */
        n = fi_cq_read(ep->cq, entries, FAB_CQ_BATCH);
    }
}

void fab_drain_cq_now(struct fab_ep *ep)
{
    struct fi_cq_data_entry entries[FAB_CQ_BATCH];
    ssize_t n = fi_cq_read(ep->cq, entries, FAB_CQ_BATCH);
    if (n == -FI_EAVAIL) {
        fab_handle_cq_error(ep);
        return;
    }
    int applied = 0;
    for (ssize_t i = 0; i < n; i++)
        applied |= fab_handle_completion(ep, &entries[i]);
    if (applied)
        fab_records_applied(ep); /* the bell: the hook is the caller */
    /* All of them, not only a quarter ring's: the peer may be just as
     * stuck posting to us from its own progress thread, and this thread's
     * timer, which returns the rest, does not run while it waits here. */
    fab_return_credits(ep, 1);
}

static void fab_handle_connected(struct fab_ep *ep, struct fab_conn *conn,
                                 const struct fi_eq_cm_entry *entry, size_t len)
{
    if (!conn->incoming) {
        struct fab_acc_data acc;
        if (len < sizeof *entry + FAB_ACC_WIRE) {
            fab_conn_fail(conn, SPINDLE_EPROTO, "accept carried no landing ring");
            return;
        }
        /* Providers may pad private data: the accept is its first bytes. */
        if (fab_acc_decode(entry->data, FAB_ACC_WIRE, &acc) != 0) {
            fab_conn_fail(conn, SPINDLE_EPROTO, spindle_errmsg());
            return;
        }
        int forged =
            conn->req_sealed && fab_acc_check(conn->req_key, conn->req_wire, entry->data) != 0;
        fab_auth_wipe(conn->req_key, sizeof conn->req_key);
        if (forged) {
            fab_conn_fail(conn, SPINDLE_EAUTH, spindle_errmsg());
            return;
        }
        conn->remote_conn_index = acc.conn_index;
        conn->remote_ring_addr = acc.ring_addr;
        conn->remote_ring_key = acc.ring_key;
    }
    pthread_mutex_lock(&ep->cm_lock);
    if (atomic_load(&conn->state) == FAB_CONN_CONNECTING)
        atomic_store(&conn->state, FAB_CONN_CONNECTED);
    pthread_cond_broadcast(&ep->cm_cond);
    pthread_mutex_unlock(&ep->cm_lock);
}

/* An incoming connection ended: release its ring now (only this thread
 * touches it) unless the writer said goodbye, in which case it is no fault. */
static void fab_incoming_ended(struct fab_conn *conn, const char *why)
{
    if (conn->bye) {
        atomic_store(&conn->state, FAB_CONN_CLOSED);
    } else {
        fab_conn_fail(conn, SPINDLE_EPEERFAILED, why);
        atomic_store(&conn->state, FAB_CONN_CLOSED);
    }
    fab_conn_teardown(conn);
}

/* The writer's goodbye may sit in the CQ behind the shutdown the EQ
 * reports (one provider progress call can produce both): read what the CQ
 * already holds before judging the shutdown. */
static void fab_read_cq_now(struct fab_ep *ep, const struct fab_conn *conn)
{
    struct fi_cq_data_entry entries[FAB_CQ_BATCH];
    for (int rounds = 0; !conn->bye && rounds < 64; rounds++) {
        ssize_t n = fi_cq_read(ep->cq, entries, FAB_CQ_BATCH);
        if (n == -FI_EAVAIL) {
            fab_handle_cq_error(ep);
            continue;
        }
        if (n <= 0)
            break;
        int applied = 0;
        for (ssize_t i = 0; i < n; i++)
            applied |= fab_handle_completion(ep, &entries[i]);
        if (applied)
            fab_bell_ring(ep);
    }
}

static void fab_incoming_shutdown(struct fab_ep *ep, struct fab_conn *conn)
{
    fab_read_cq_now(ep, conn);
    if (atomic_load(&conn->state) != FAB_CONN_CLOSED)
        fab_incoming_ended(conn, "connection shut down");
}

/* The target of an outgoing connection closed it. If that endpoint said
 * goodbye on its own connection to us, it is leaving, not crashing: still
 * a failure of the connection (T4), but logged quietly. */
static void fab_outgoing_shutdown(struct fab_ep *ep, struct fab_conn *conn)
{
    int leaving = 0;
    for (uint32_t i = 0; i < ep->num_incoming && !leaving; i++) {
        struct fab_conn *in = ep->incoming[i];
        if (in->remote_nonce != conn->remote_nonce)
            continue;
        fab_read_cq_now(ep, in);
        leaving = in->bye;
    }
    fab_conn_fail_at(conn, SPINDLE_EPEERFAILED,
                     leaving ? "connection shut down by a departing peer" : "connection shut down",
                     leaving ? SP_LOG_DEBUG : SP_LOG_WARN);
}

static void fab_drain_eq(struct fab_ep *ep)
{
    union {
        struct fi_eq_cm_entry entry;
        uint8_t bytes[sizeof(struct fi_eq_cm_entry) + FAB_CM_DATA_MAX];
    } buf;
    for (;;) {
        uint32_t event;
        ssize_t n = fi_eq_read(ep->eq, &event, &buf, sizeof buf, 0);
        if (n == -FI_EAGAIN)
            return;
        /* Outgoing connections are listed under cm_lock before fi_connect:
         * taking it orders their set-up before our reads of them (the event
         * itself travelled through libfabric, invisible to the memory model
         * checkers). */
        pthread_mutex_lock(&ep->cm_lock);
        pthread_mutex_unlock(&ep->cm_lock);
        if (n == -FI_EAVAIL) {
            struct fi_eq_err_entry err = {0};
            if (fi_eq_readerr(ep->eq, &err, 0) <= 0)
                return;
            struct fab_conn *conn = err.fid != NULL ? err.fid->context : NULL;
            if (conn != NULL && err.fid != &ep->pep->fid) {
                char why[160];
                /* A refusal's reason is in the listener's log only. */
                snprintf(why, sizeof why, "%s%s", fi_strerror(err.err),
                         err.err == FI_ECONNREFUSED && !conn->incoming
                             ? " (a listener refuses a request without the group key it holds, "
                               "a replay or a duplicate; its log names why)"
                             : "");
                if (conn->incoming && atomic_load(&conn->state) != FAB_CONN_CLOSED)
                    fab_incoming_ended(conn, why);
                else
                    fab_conn_fail(conn, SPINDLE_EUNREACH, why);
            }
            continue;
        }
        if (n < 0)
            return;
        if (event == FI_CONNREQ) {
            fab_handle_connreq(ep, &buf.entry, (size_t)n);
            fi_freeinfo(buf.entry.info);
            continue;
        }
        struct fab_conn *conn = buf.entry.fid != NULL ? buf.entry.fid->context : NULL;
        if (conn == NULL || atomic_load(&conn->state) == FAB_CONN_CLOSED)
            continue;
        if (event == FI_CONNECTED)
            fab_handle_connected(ep, conn, &buf.entry, (size_t)n);
        else if (event == FI_SHUTDOWN && conn->incoming)
            fab_incoming_shutdown(ep, conn);
        else if (event == FI_SHUTDOWN)
            fab_outgoing_shutdown(ep, conn);
    }
}

/* Declares peers failed whose credits have been outstanding too long.
 * last_check: when this thread last checked (0: never). */
static void fab_check_timers(struct fab_ep *ep, uint64_t last_check)
{
    uint64_t now = sp_now_ns();
    uint64_t limit = (uint64_t)ep->failure_timeout_ms * 1000000ull;
    /* This thread did not run for half the timeout (its process stopped or
     * starved): it read no credit meanwhile, and on a loaded machine the
     * peer was often starved with it. That silence says nothing about the
     * peer: every outstanding clock starts again, as the SST's heartbeat
     * watch does (sst.h, "Liveness"). A peer that stays silent is still
     * reported one timeout later. */
    bool restart = last_check != 0 && now - last_check > limit / 2;
    struct fab_conn *stalled[16];
    int n = 0;
    pthread_mutex_lock(&ep->cm_lock);
    for (struct fab_conn *c = ep->peers; c != NULL && n < 16; c = c->next_peer) {
        if (atomic_load(&c->state) != FAB_CONN_CONNECTED)
            continue;
        /* Outstanding: records not yet applied remotely (they hold
         * credits; an applied record was sent in full, and a write that
         * asked no completion would never report one). */
        uint64_t since = atomic_load(&c->last_progress_ns);
        uint64_t posted = atomic_load(&c->posted);
        int outstanding = posted != atomic_load(&c->acked);
        if (outstanding && restart)
            atomic_store(&c->last_progress_ns, now);
        else if (outstanding && since != 0 && now > since + limit)
            stalled[n++] = c;
    }
    pthread_mutex_unlock(&ep->cm_lock);
    for (int i = 0; i < n; i++) {
        char why[96];
        snprintf(why, sizeof why, "no credit returned for %d ms", ep->failure_timeout_ms);
        fab_conn_fail(stalled[i], SPINDLE_EPEERFAILED, why);
    }
}

void *fab_progress_main(void *arg)
{
    struct fab_ep *ep = arg;
    progress_of = ep;
    uint64_t last_timer = 0;
    while (!atomic_load(&ep->stop)) {
        fab_drain_cq(ep, FAB_WAIT_MS);
        fab_drain_eq(ep);
        uint64_t now = sp_now_ns();
        if (now - last_timer > FAB_WAIT_MS * 1000000ull) {
            fab_check_timers(ep, last_timer);
            fab_return_credits(ep, 1);
            last_timer = now;
        }
    }
    return NULL;
}
