/*
 * libfabric backend: the posting path (records into the staging ring, the
 * records of a batch that lie back to back posted as one fi_writemsg with
 * remote CQ data, FI_MORE on all but the last write of a batch) and the
 * doorbell (a futex word bumped by the progress thread whenever it applies
 * writes or queues an event).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "transport/fabric/fabric_impl.h"
#include "util/clock.h"
#include "util/error.h"

static uint64_t fab_rec_bytes(uint32_t length)
{
    return (FAB_REC_HDR + (uint64_t)length + FAB_REC_ALIGN - 1) / FAB_REC_ALIGN * FAB_REC_ALIGN;
}

/* Length of the next chunk of a write at dest offset off with len bytes
 * left: chunks end on 8-byte boundaries of the destination, so no aligned
 * word is split between two records. */
static uint32_t fab_chunk(uint64_t off, uint64_t len)
{
    uint64_t max = FAB_CHUNK_MAX - (off & 7u);
    return (uint32_t)(len < max ? len : max);
}

/* Where a record of size bytes starts when the ring position is pos:
 * records never wrap, they skip to the next ring start instead. */
static uint64_t fab_place(uint64_t pos, uint64_t size)
{
    if (pos % FAB_RING_SIZE + size > FAB_RING_SIZE)
        pos = (pos / FAB_RING_SIZE + 1) * FAB_RING_SIZE;
    return pos;
}

/* A place in a batch: write `index`, `done` bytes of it already taken. */
struct fab_cursor {
    unsigned index;
    uint64_t done;
};

/* Checks every write of the batch against its remote region. */
static int fab_check(const struct tp_write *writes, unsigned count)
{
    for (unsigned i = 0; i < count; i++) {
        const struct tp_write *w = &writes[i];
        if (w->remote == NULL || (w->local == NULL && w->length > 0))
            return sp_error(SPINDLE_EINVAL, "fabric post: write %u has no buffer or region", i);
        const struct fab_rmr *remote = fab_rmr_of(w->remote);
        if (w->remote_offset > remote->length || w->length > remote->length - w->remote_offset)
            return sp_error(SPINDLE_EINVAL,
                            "fabric post: write %u of %u bytes at offset %" PRIu64
                            " exceeds the remote region of %" PRIu64 " bytes",
                            i, w->length, w->remote_offset, remote->length);
    }
    return 0;
}

/* Most operations one part may hold: up to signal_every - 1 writes that
 * asked no completion stay counted in flight after they are done (nothing
 * reports them), so a part that fills what remains of ops_max still fits. */
static uint32_t fab_part_ops(const struct fab_conn *conn)
{
    return conn->ops_max - (conn->signal_every - 1);
}

/* Plans the next part of the batch from *from: as many records as one ring
 * and the operation limit hold. Sets the ring position after the part, its
 * operation count, and *to (index == count when the part ends the batch). */
static void fab_plan(struct fab_conn *conn, const struct tp_write *writes, unsigned count,
                     struct fab_cursor from, uint64_t *end, uint32_t *ops, struct fab_cursor *to)
{
    uint64_t start = atomic_load_explicit(&conn->posted, memory_order_relaxed);
    uint64_t pos = start;
    uint32_t n = 0;
    struct fab_cursor at = from;
    while (at.index < count) {
        const struct tp_write *w = &writes[at.index];
        uint64_t left = w->length - at.done;
        uint32_t chunk = fab_chunk(w->remote_offset + at.done, left);
        uint64_t size = fab_rec_bytes(chunk);
        uint64_t next = fab_place(pos, size) + size;
        if (n > 0 && (next - start > FAB_RING_SIZE || n + 1 > fab_part_ops(conn)))
            break;
        pos = next;
        n++;
        at.done += chunk;
        if (at.done == w->length) {
            at.index++;
            at.done = 0;
        }
    }
    *end = pos;
    *ops = n;
    *to = at;
}

/* Copies a write's source into the landing record. The source is the
 * owner's live memory (an SST row): another thread may update it, one
 * atomic word at a time, while this post copies it, so aligned words are
 * read atomically (as a NIC reads them whole); the rest is plain bytes. */
static void fab_copy_source(uint8_t *dst, const uint8_t *src, size_t length)
{
    if (((uintptr_t)src & 7) != 0) {
        memcpy(dst, src, length);
        return;
    }
    for (; length >= 8; length -= 8, src += 8, dst += 8) {
        uint64_t word = __atomic_load_n((const uint64_t *)(const void *)src, __ATOMIC_RELAXED);
        memcpy(dst, &word, 8);
    }
    memcpy(dst, src, length);
}

/* 1 when the planned batch fits the credits and operation slots. A record
 * the target applied was sent in full, so the credits free the staging
 * ring as well as the landing ring. */
static int fab_fits(struct fab_conn *conn, uint64_t end, uint32_t ops)
{
    uint64_t released = atomic_load(&conn->acked);
    uint64_t in_flight = conn->ops_posted - atomic_load(&conn->ops_completed);
    return end - released <= FAB_RING_SIZE && in_flight + ops <= conn->ops_max;
}

/* Copies one record (header, then the chunk of w at destination offset
 * off) into the staging ring at the next place for it; returns its ring
 * position. Publishes posted past it: the credit for it may come back as
 * soon as the write that carries it is posted. */
static uint64_t fab_stage_record(struct fab_conn *conn, const struct tp_write *w, uint64_t off,
                                 uint32_t chunk)
{
    uint64_t size = fab_rec_bytes(chunk);
    uint64_t start = fab_place(atomic_load_explicit(&conn->posted, memory_order_relaxed), size);
    uint64_t ring_off = start % FAB_RING_SIZE;
    struct fab_rec_hdr hdr = {.magic = FAB_REC_MAGIC,
                              .length = chunk,
                              .start = start,
                              .end = start + size,
                              .region = fab_rmr_of(w->remote)->region,
                              .offset = off};
    memcpy(conn->ring + ring_off, &hdr, sizeof hdr);
    if (chunk > 0)
        fab_copy_source(conn->ring + ring_off + FAB_REC_HDR,
                        (const uint8_t *)w->local + (off - w->remote_offset), chunk);
    atomic_store_explicit(&conn->posted, start + size, memory_order_release);
    return start;
}

/* Marks the staged record at ring position start as followed, in the same
 * write, by another record at its end. */
static void fab_mark_more(struct fab_conn *conn, uint64_t start)
{
    uint8_t *flags = conn->ring + start % FAB_RING_SIZE + offsetof(struct fab_rec_hdr, flags);
    uint32_t value = FAB_REC_MORE;
    memcpy(flags, &value, sizeof value);
}

/* Posts one write carrying the staged records [start, end) of the ring
 * (contiguous: no skip inside). The CQ data names the first; each record's
 * header says whether another follows it. */
static int fab_post_run(struct fab_conn *conn, uint64_t start, uint64_t end, uint64_t flags,
                        int signaled, uint64_t cookie)
{
    uint64_t ring_off = start % FAB_RING_SIZE;
    struct fab_ctx *ctx = &conn->ops[conn->ops_posted % FAB_OPS_MAX];
    ctx->conn = conn;
    ctx->end = end;
    ctx->seq = conn->ops_posted;
    ctx->signaled = signaled;
    ctx->cookie = cookie;
    /* Publishes the fields to the progress thread, which sees the
     * context again only through libfabric. */
    atomic_store_explicit(&ctx->kind, FAB_CTX_WRITE, memory_order_release);
    struct iovec iov = {conn->ring + ring_off, end - start};
    void *desc = conn->ring_desc;
    struct fi_rma_iov rma = {conn->remote_ring_addr + ring_off, end - start, conn->remote_ring_key};
    struct fi_msg_rma msg = {.msg_iov = &iov,
                             .desc = &desc,
                             .iov_count = 1,
                             .addr = 0,
                             .rma_iov = &rma,
                             .rma_iov_count = 1,
                             .context = &ctx->fi,
                             .data = ((uint64_t)conn->remote_conn_index << 16) |
                                     (ring_off / FAB_REC_ALIGN)};
    /* Only a signaled write, and one in signal_every for the operation
     * count, asks for a local completion (FI_SELECTIVE_COMPLETION): each
     * one wakes this endpoint's progress thread. */
    if (signaled || (conn->ops_posted + 1) % conn->signal_every == 0)
        flags |= FI_COMPLETION;
    ssize_t rc;
    /* Credits and the operation limit keep the provider's queue from
     * filling; a transient refusal mid-batch is retried so that a batch is
     * either wholly posted or not at all. */
    for (int tries = 0;; tries++) {
        rc = fi_writemsg(conn->fep, &msg, flags);
        if (rc != -FI_EAGAIN || tries > 100000)
            break;
        sched_yield();
    }
    if (rc != 0)
        return (int)rc;
    conn->ops_posted++;
    return 0;
}

/* The records of a part that lie back to back in the ring, up to
 * FAB_RUN_MAX bytes, go out as one write: the tcp provider turns every
 * write into its own send system call (and, with TCP_NODELAY, its own
 * segment and completions at both ends) whatever FI_MORE says, and an SST
 * push is typically a slot and two counters, three records. */
struct fab_run {
    uint64_t start, last, end; /* first record, last record, end; start == end: empty */
};

static int fab_flush_run(struct fab_conn *conn, struct fab_run *run, int part_end, int signaled,
                         uint64_t cookie, uint32_t *posted_ops)
{
    if (run->start == run->end)
        return 0;
    uint64_t fi_flags = FI_REMOTE_CQ_DATA | (part_end ? 0 : FI_MORE);
    int rc = fab_post_run(conn, run->start, run->end, fi_flags, signaled, cookie);
    if (rc != 0) {
        char why[160];
        snprintf(why, sizeof why, "fi_writemsg: %s", fi_strerror(-rc));
        fab_conn_fail(conn, SPINDLE_EPEERFAILED, why);
        return sp_error(SPINDLE_EPEERFAILED, "fabric peer %s (member %u) failed: %s", conn->name,
                        conn->remote_id, why);
    }
    run->start = run->end;
    (*posted_ops)++;
    return 0;
}

/* Posts the records of one part, [from, to). The last write of the part
 * goes without FI_MORE; only the end of the batch carries the signal. */
static int fab_post_part(struct fab_conn *conn, const struct tp_write *writes, unsigned count,
                         struct fab_cursor from, struct fab_cursor to, unsigned flags,
                         uint64_t cookie, uint32_t *posted_ops)
{
    struct fab_cursor at = from;
    uint64_t pos = atomic_load_explicit(&conn->posted, memory_order_relaxed);
    struct fab_run run = {pos, pos, pos};
    while (at.index < to.index || (at.index == to.index && at.done < to.done)) {
        const struct tp_write *w = &writes[at.index];
        uint64_t off = w->remote_offset + at.done;
        uint32_t chunk = fab_chunk(off, w->length - at.done);
        at.done += chunk;
        if (at.done == w->length) {
            at.index++;
            at.done = 0;
        }
        uint64_t size = fab_rec_bytes(chunk);
        /* The ring's end (reached or skipped to), or a full run, ends the
         * run: a write is contiguous in the ring. */
        if (run.end % FAB_RING_SIZE == 0 || fab_place(run.end, size) != run.end ||
            run.end + size - run.start > FAB_RUN_MAX) {
            int rc = fab_flush_run(conn, &run, 0, 0, cookie, posted_ops);
            if (rc != 0)
                return rc;
        }
        uint64_t start = fab_stage_record(conn, w, off, chunk);
        if (run.start == run.end)
            run.start = start;
        else
            fab_mark_more(conn, run.last);
        run.last = start;
        run.end = start + size;
    }
    return fab_flush_run(conn, &run, 1, to.index == count && (flags & TP_POST_SIGNALED), cookie,
                         posted_ops);
}

/* A later part of a batch larger than one ring waits for credits: the
 * target's progress thread returns them without any help from its
 * application, and a peer that stops returning them is failed by our
 * progress thread after failure_timeout_ms. */
static int fab_wait_credits(struct fab_conn *conn, uint64_t end, uint32_t ops)
{
    while (!fab_fits(conn, end, ops)) {
        if (atomic_load(&conn->state) != FAB_CONN_CONNECTED)
            return sp_error(SPINDLE_EPEERFAILED,
                            "fabric peer %s (member %u) failed while a batch was posted: %s",
                            conn->name, conn->remote_id, conn->why);
        if (fab_on_progress_thread(conn->ep))
            fab_drain_cq_now(conn->ep); /* nobody else reads the credits */
        else
            sched_yield();
    }
    return 0;
}

/* 0 when conn can take writes; SPINDLE_EPEERFAILED with the reason it
 * failed, or SPINDLE_EINVAL when it is not connected (yet or any more);
 * what names the operation in the message. */
static int fab_conn_usable(struct fab_conn *conn, const char *what)
{
    int state = atomic_load(&conn->state);
    if (state == FAB_CONN_FAILED)
        return sp_error(SPINDLE_EPEERFAILED, "fabric peer %s (member %u) failed: %s", conn->name,
                        conn->remote_id, conn->why);
    if (state != FAB_CONN_CONNECTED)
        return sp_error(SPINDLE_EINVAL, "fabric %s: peer %s is not connected", what, conn->name);
    return 0;
}

/* A batch is posted in parts of at most one ring (and the provider's
 * operation limit), in order, so posting order (T2) holds across parts.
 * The first part is all-or-nothing: SPINDLE_EAGAIN with nothing posted when
 * it lacks credits. */
int fab_post_writes(struct tp_peer *peer, const struct tp_write *writes, unsigned count,
                    unsigned flags, uint64_t cookie)
{
    if (peer == NULL || (writes == NULL && count > 0))
        return sp_error(SPINDLE_EINVAL, "fabric post: null argument");
    struct fab_conn *conn = fab_conn_of(peer);
    int rc = fab_conn_usable(conn, "post");
    if (rc != 0)
        return rc;
    if (count == 0)
        return 0;
    rc = fab_check(writes, count);
    if (rc != 0)
        return rc;
    struct fab_cursor from = {0, 0}, to;
    uint64_t end = 0;
    uint32_t ops = 0;
    fab_plan(conn, writes, count, from, &end, &ops, &to);
    if (!fab_fits(conn, end, ops) && fab_on_progress_thread(conn->ep))
        fab_drain_cq_now(conn->ep); /* a post from the arrival hook: read credits here */
    if (!fab_fits(conn, end, ops)) {
        /* Ask the progress thread to ring our doorbell when credits return,
         * then re-check so a return that raced with us is not missed. */
        atomic_store(&conn->starved, 1);
        if (!fab_fits(conn, end, ops))
            return sp_error(SPINDLE_EAGAIN, "fabric post: no credits for %s", conn->name);
        atomic_store(&conn->starved, 0);
    }
    uint64_t start = atomic_load_explicit(&conn->posted, memory_order_relaxed);
    if (start == atomic_load(&conn->acked))
        atomic_store(&conn->last_progress_ns, sp_now_ns()); /* idle -> busy */

    uint32_t posted_ops = 0, parts = 0;
    for (;;) {
        rc = fab_post_part(conn, writes, count, from, to, flags, cookie, &posted_ops);
        if (rc != 0)
            return rc;
        parts++;
        if (to.index == count)
            break;
        from = to;
        fab_plan(conn, writes, count, from, &end, &ops, &to);
        rc = fab_wait_credits(conn, end, ops);
        if (rc != 0)
            return rc;
    }
    uint64_t bytes = 0;
    for (unsigned i = 0; i < count; i++)
        bytes += writes[i].length;
    struct fab_ep *ep = conn->ep;
    atomic_fetch_add_explicit(&ep->st_writes, posted_ops, memory_order_relaxed);
    atomic_fetch_add_explicit(&ep->st_batches, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&ep->st_doorbells, parts, memory_order_relaxed);
    atomic_fetch_add_explicit(&ep->st_bytes, bytes, memory_order_relaxed);
    if (flags & TP_POST_SIGNALED)
        atomic_fetch_add_explicit(&ep->st_signaled, 1, memory_order_relaxed);
    return 0;
}

/* Every applied write already wakes the target, after its data is visible,
 * so a ring that follows a post costs nothing; only a ring with no write
 * since the previous one sends a message. */
int fab_doorbell_ring(struct tp_peer *peer)
{
    if (peer == NULL)
        return sp_error(SPINDLE_EINVAL, "fabric doorbell_ring: null peer");
    struct fab_conn *conn = fab_conn_of(peer);
    int rc = fab_conn_usable(conn, "doorbell");
    if (rc != 0)
        return rc;
    if (conn->ops_posted != conn->rung_at) {
        conn->rung_at = conn->ops_posted;
        return 0;
    }
    rc = fab_send_msg(conn, FAB_MSG_DOORBELL, 0);
    if (rc == SPINDLE_EAGAIN)
        return sp_error(SPINDLE_EAGAIN, "fabric doorbell: send queue to %s is full", conn->name);
    if (rc != 0) {
        fab_conn_fail(conn, SPINDLE_EPEERFAILED, spindle_errmsg());
        return sp_error(SPINDLE_EPEERFAILED, "fabric peer %s failed: %s", conn->name, conn->why);
    }
    atomic_fetch_add_explicit(&conn->ep->st_wakeups, 1, memory_order_relaxed);
    return 0;
}

void fab_doorbell_ring_self(struct tp_endpoint *tep)
{
    if (tep != NULL)
        fab_bell_ring(fab_ep_of(tep));
}

uint64_t fab_doorbell_arm(struct tp_endpoint *tep)
{
    return tep != NULL ? atomic_load(&fab_ep_of(tep)->bell) : 0;
}

int fab_doorbell_wait(struct tp_endpoint *tep, uint64_t token, int timeout_ms)
{
    if (tep == NULL)
        return sp_error(SPINDLE_EINVAL, "fabric doorbell_wait: null endpoint");
    struct fab_ep *ep = fab_ep_of(tep);
    uint32_t expected = (uint32_t)token;
    if (atomic_load(&ep->bell) != expected)
        return 0;
    uint64_t deadline = sp_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    atomic_fetch_add(&ep->sleepers, 1);
    atomic_fetch_add_explicit(&ep->st_sleeps, 1, memory_order_relaxed);
    for (;;) {
        if (atomic_load(&ep->bell) != expected)
            break;
        uint64_t now = sp_now_ns();
        if (now >= deadline)
            break;
        struct timespec rel = {(time_t)((deadline - now) / 1000000000ull),
                               (long)((deadline - now) % 1000000000ull)};
        syscall(SYS_futex, (uint32_t *)&ep->bell, FUTEX_WAIT_PRIVATE, expected, &rel, NULL, 0);
    }
    atomic_fetch_sub(&ep->sleepers, 1);
    if (atomic_load(&ep->bell) != expected)
        return 0;
    return sp_error(SPINDLE_ETIMEDOUT, "fabric doorbell_wait: no ring within %d ms", timeout_ms);
}
