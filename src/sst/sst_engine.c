/*
 * The predicate engine: one thread per process evaluating every registered
 * predicate, posting the pushes its triggers queue after the lock is released
 * (Spindle 3.4), and polling adaptively: spin while there is work, then
 * announce sleep in the row header and block on the transport doorbell until
 * a peer pushes work and rings it (sst_thread.c).
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sst/sst_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

#define BATCH_MAX      256
#define REAP_EVENTS    16
#define WAKE_POLLER_NS 1000000ull /* ring our own doorbell this often while stuck */

void sst_stat_add(uint64_t *counter, uint64_t amount)
{
    __atomic_fetch_add(counter, amount, __ATOMIC_RELAXED);
}

void sst_engine_options_default(struct sst_engine_options *options)
{
    /* Short spin, and shorter still with few CPUs (sst_thread.c): on 2
     * cores shared by several members, a long spin steals the CPU the peer
     * needs to produce the work we wait for. */
    memset(options, 0, sizeof *options); /* no dedicated CPU, and any field added later */
    options->early_unlock = true;
    options->spin_us = 50;
    options->max_sleep_ms = 100;
}

int sst_engine_create(const struct tp_config *tp_config, const struct sst_engine_options *options,
                      struct sst_engine **out)
{
    struct sst_engine *engine = calloc(1, sizeof *engine);
    if (engine == NULL)
        return sp_error(SPINDLE_ENOMEM, "sst: out of memory for the engine");
    if (options != NULL)
        engine->options = *options;
    else
        sst_engine_options_default(&engine->options);
    if (engine->options.max_sleep_ms <= 0)
        engine->options.max_sleep_ms = 100;
    int rc = tp_open(tp_config, &engine->endpoint);
    if (rc != 0) {
        free(engine);
        return rc;
    }
    int timeout_ms = tp_config != NULL && tp_config->failure_timeout_ms > 0
                         ? tp_config->failure_timeout_ms
                         : tp_attr(engine->endpoint)->default_timeout_ms;
    engine->give_up_ns = (uint64_t)(timeout_ms > 0 ? timeout_ms : 5000) * 1000000ull;
    uint64_t beats_ns = 3ull * (uint64_t)engine->options.max_sleep_ms * 1000000ull;
    engine->stall_ns = engine->give_up_ns > beats_ns ? engine->give_up_ns : beats_ns;
    pthread_mutex_init(&engine->lock, NULL);
    pthread_mutex_init(&engine->post_lock, NULL);
    atomic_store(&engine->asleep, true); /* no thread yet */
    engine->next_predicate_id = 1;
    engine->arrival_hook = tp_set_arrival(engine->endpoint, sst_arrival, engine);
    *out = engine;
    return 0;
}

void sst_engine_destroy(struct sst_engine *engine)
{
    if (engine == NULL)
        return;
    sst_engine_stop(engine);
    (void)tp_set_arrival(engine->endpoint, NULL, NULL);
    while (engine->tables != NULL)
        sst_table_destroy(engine->tables);
    tp_close(engine->endpoint);
    pthread_mutex_destroy(&engine->lock);
    pthread_mutex_destroy(&engine->post_lock);
    free(engine->predicates);
    free(engine->peers);
    free(engine->pending);
    free(engine);
}

void sst_engine_stats(struct sst_engine *engine, struct sst_engine_stats *out)
{
    const uint64_t *src = (const uint64_t *)(const void *)&engine->stats;
    uint64_t *dst = (uint64_t *)(void *)out;
    for (size_t i = 0; i < sizeof *out / sizeof(uint64_t); i++)
        dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    struct tp_stats transport;
    memset(&transport, 0, sizeof transport);
    tp_stats(engine->endpoint, &transport);
    out->pinned_bytes = transport.pinned_bytes;
    out->wakeups_sent = transport.wakeups_sent;
}

void sst_engine_lock(struct sst_engine *engine)
{
    pthread_mutex_lock(&engine->lock);
}

bool sst_engine_asleep(const struct sst_engine *engine)
{
    return atomic_load_explicit(&engine->asleep, memory_order_relaxed);
}

bool sst_engine_trylock(struct sst_engine *engine)
{
    return pthread_mutex_trylock(&engine->lock) == 0;
}

void sst_engine_unlock(struct sst_engine *engine)
{
    sst_unlock_and_post(engine);
}

void sst_engine_wake(struct sst_engine *engine)
{
    /* A thread polling on its own CPU sees the work at its next pass. */
    if (atomic_load_explicit(&engine->polling, memory_order_relaxed))
        return;
    tp_doorbell_ring_self(engine->endpoint);
}

void sst_engine_on_failure(struct sst_engine *engine, sst_failure_fn fn, void *ctx)
{
    pthread_mutex_lock(&engine->lock);
    engine->on_failure = fn;
    engine->on_failure_ctx = ctx;
    pthread_mutex_unlock(&engine->lock);
}

int sst_engine_set_keys(struct sst_engine *engine, const uint8_t (*keys)[TP_KEY_BYTES],
                        uint32_t key_count)
{
    return tp_set_keys(engine->endpoint, keys, key_count);
}

/* ---- posting --------------------------------------------------------- */

static struct sst_stuck *stuck_find(struct sst_engine *engine, const struct tp_peer *peer)
{
    for (uint32_t i = 0; i < engine->num_stuck; i++) {
        if (engine->stuck[i].peer == peer)
            return &engine->stuck[i];
    }
    return NULL;
}

/* Records peer as stuck (post_lock held) and wakes the predicate thread to
 * report it. The list holds at most one entry per connected peer; were it
 * ever full, the entry is dropped and the transport's own failure report
 * (or the next stall) remains. */
static void stuck_add(struct sst_engine *engine, struct tp_peer *peer, int error)
{
    if (stuck_find(engine, peer) != NULL)
        return;
    if (engine->num_stuck == SST_STUCK_MAX) {
        SP_LOG_WARNING("sst", "stuck-peer list full; a failure is left to the transport");
        return;
    }
    engine->stuck[engine->num_stuck++] = (struct sst_stuck){peer, error, false};
    atomic_store(&engine->stuck_unreported, true);
    tp_doorbell_ring_self(engine->endpoint);
}

/* While a post waits for room: on the predicate thread, reap completions
 * (they free send-queue slots) and keep any failure for the thread to
 * report; elsewhere, wake the predicate thread so that it polls. */
static void reap_while_stuck(struct sst_engine *engine, uint64_t *last_wake)
{
    if (sst_on_predicate_thread(engine)) {
        struct tp_event events[REAP_EVENTS];
        int n = tp_poll(engine->endpoint, events, REAP_EVENTS);
        for (int i = 0; i < n; i++) {
            if (events[i].type == TP_EVENT_PEER_FAILED)
                stuck_add(engine, events[i].peer, events[i].error);
        }
        return;
    }
    uint64_t now = sp_now_ns();
    if (now - *last_wake >= WAKE_POLLER_NS) {
        *last_wake = now;
        tp_doorbell_ring_self(engine->endpoint);
    }
}

/* Posts one batch to one peer; post_lock held. Returns true when it was
 * posted (the caller may ring the peer). A full send queue or exhausted
 * credits are waited out (reaping meanwhile) for at most give_up_ns; then
 * the peer is failed rather than the batch dropped, and nothing more is
 * posted to it: a later guard must never reach a peer that missed the data
 * it guards. */
static bool post_batch(struct sst_engine *engine, struct tp_peer *peer, struct tp_write *writes,
                       unsigned count)
{
    if (stuck_find(engine, peer) != NULL)
        return false;
    uint64_t start = sp_now_ns(), last_wake = 0;
    int rc;
    while ((rc = tp_post_writes(peer, writes, count, 0, 0)) == SPINDLE_EAGAIN) {
        if (sp_now_ns() - start > engine->give_up_ns) {
            SP_LOG_WARNING("sst",
                           "no room to post %u writes to a peer for %llu ms (send queue or "
                           "credits full): failing that peer",
                           count, (unsigned long long)(engine->give_up_ns / 1000000));
            stuck_add(engine, peer, SPINDLE_ETIMEDOUT);
            break;
        }
        reap_while_stuck(engine, &last_wake);
        sched_yield();
    }
    if (rc == 0) {
        sst_stat_add(&engine->stats.writes_posted, count);
        sst_stat_add(&engine->stats.batches, 1);
        sst_stat_add(&engine->stats.doorbells, 1);
    } else if (rc != SPINDLE_EPEERFAILED && rc != SPINDLE_EAGAIN) {
        SP_LOG_WARNING("sst", "posting %u writes failed: %s", count, spindle_errmsg());
    }
    sst_stat_add(&engine->stats.post_ns, sp_now_ns() - start);
    return rc == 0;
}

void sst_report_stuck(struct sst_engine *engine)
{
    if (!atomic_exchange(&engine->stuck_unreported, false))
        return;
    struct sst_stuck found[SST_STUCK_MAX];
    uint32_t n = 0;
    pthread_mutex_lock(&engine->post_lock);
    for (uint32_t i = 0; i < engine->num_stuck; i++) {
        if (!engine->stuck[i].reported) {
            engine->stuck[i].reported = true;
            found[n++] = engine->stuck[i];
        }
    }
    pthread_mutex_unlock(&engine->post_lock);
    /* Outside post_lock: the failure callback may queue pushes. */
    for (uint32_t i = 0; i < n; i++)
        sst_peer_failed(engine, found[i].peer, found[i].error);
}

void sst_stuck_forget(struct sst_engine *engine, const struct tp_peer *peer)
{
    for (uint32_t i = 0; i < engine->num_stuck; i++) {
        if (engine->stuck[i].peer == peer) {
            engine->stuck[i] = engine->stuck[--engine->num_stuck];
            return;
        }
    }
}

/* Rings (enqueue decided which: always when cheap, else a sleeper) the
 * peers of one post_pending call, after every peer's writes are posted. */
struct ring_list {
    struct tp_peer *peers[SST_MAX_ROWS];
    uint32_t count;
};

static void ring_later(struct ring_list *rings, struct tp_peer *peer)
{
    for (uint32_t i = 0; i < rings->count; i++)
        if (rings->peers[i] == peer)
            return;
    if (rings->count == SST_MAX_ROWS) {
        (void)tp_doorbell_ring(peer); /* more peers than rows: ring at once */
        return;
    }
    rings->peers[rings->count++] = peer;
}

/*
 * Posts the queue grouped per peer, preserving order within each peer:
 * one batch, one doorbell per peer (Spindle 3.2). The doorbells are rung
 * after every peer's batch is posted, not after each: on shm a ring that
 * wakes a sleeper is a futex wake, and on few CPUs the woken thread often
 * takes this one's CPU inside that system call, for as long as the
 * scheduler keeps it off (hundreds of microseconds were traced at light
 * load). Posting everything first means every peer already holds its data
 * then: a peer woken meanwhile by someone else (the first peer's
 * acknowledgement) finds it, rather than waking to nothing and sleeping
 * again. A ring still follows its peer's writes (T2).
 */
static void post_pending(struct sst_engine *engine, struct sst_pending *pending, uint32_t count)
{
    struct tp_write writes[BATCH_MAX];
    struct ring_list rings = {.count = 0};
    bool *done = calloc(count, sizeof *done);
    for (uint32_t first = 0; first < count; first++) {
        if (done != NULL && done[first])
            continue;
        struct tp_peer *peer = pending[first].target;
        unsigned n = 0;
        bool ring = false, posted = true;
        for (uint32_t i = first; i < count; i++) {
            if ((done != NULL && done[i]) || pending[i].target != peer)
                continue;
            if (done == NULL && i != first)
                break; /* no memory for grouping: post one by one */
            if (n == BATCH_MAX) {
                posted = post_batch(engine, peer, writes, n) && posted;
                n = 0;
            }
            writes[n++] = pending[i].write;
            ring |= pending[i].ring;
            if (done != NULL)
                done[i] = true;
        }
        posted = post_batch(engine, peer, writes, n) && posted;
        if (ring && posted)
            ring_later(&rings, peer);
    }
    free(done);
    if (rings.count == 0)
        return;
    if (sst_on_predicate_thread(engine))
        engine->rang_peers = true; /* the thread sleeps without spinning (sst_spin_ns) */
    uint64_t start = sp_now_ns();
    for (uint32_t i = 0; i < rings.count; i++)
        (void)tp_doorbell_ring(rings.peers[i]);
    sst_stat_add(&engine->stats.post_ns, sp_now_ns() - start); /* as when rung per batch */
}

void sst_unlock_and_post(struct sst_engine *engine)
{
    uint32_t count = engine->num_pending;
    if (count == 0) {
        pthread_mutex_unlock(&engine->lock);
        return;
    }
    struct sst_pending *pending = malloc(count * sizeof *pending);
    if (pending == NULL) {
        /* Post in place, under the lock: correct, only slower. */
        pthread_mutex_lock(&engine->post_lock);
        post_pending(engine, engine->pending, count);
        engine->num_pending = 0;
        pthread_mutex_unlock(&engine->post_lock);
        pthread_mutex_unlock(&engine->lock);
        return;
    }
    memcpy(pending, engine->pending, count * sizeof *pending);
    engine->num_pending = 0;
    /* Taking post_lock before dropping the lock keeps batches in queue
     * order across threads, so a guard never overtakes its data (T2). */
    pthread_mutex_lock(&engine->post_lock);
    if (engine->options.early_unlock) {
        pthread_mutex_unlock(&engine->lock);
        post_pending(engine, pending, count);
        pthread_mutex_unlock(&engine->post_lock);
    } else {
        post_pending(engine, pending, count);
        pthread_mutex_unlock(&engine->post_lock);
        pthread_mutex_unlock(&engine->lock);
    }
    free(pending);
}

void sst_post_and_unlock_held(struct sst_engine *engine)
{
    if (engine->num_pending > 0)
        post_pending(engine, engine->pending, engine->num_pending);
    engine->num_pending = 0;
    pthread_mutex_unlock(&engine->post_lock);
    pthread_mutex_unlock(&engine->lock);
}
