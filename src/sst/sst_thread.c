/*
 * Predicate registration and the predicate thread's loop with adaptive
 * polling: spin briefly after work (how long depends on the CPUs the
 * process may use), then announce sleep and block on the transport
 * doorbell, which every push that needs an answer rings. Every wait ends
 * at a ring; none is an uninterruptible nap. The thread never holds the
 * lock while sleeping or posting. With a dedicated CPU (poll_dedicated)
 * it is pinned there and never sleeps. It runs under the scheduling policy
 * of the thread that started it; a normal one asks for a short slice, a
 * real-time one (SCHED_FIFO, SCHED_RR) is kept.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sst/sst_impl.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"

#define EVENTS_MAX 16

/* The engine whose predicate thread is the calling thread, if any: triggers
 * may add or remove predicates while the thread already holds the lock. A
 * thread-local rather than comparing with engine->thread, which the creating
 * thread may not have stored yet when the first trigger runs. */
static _Thread_local const struct sst_engine *current_engine;
/* The engine whose arrival triggers the calling thread (a transport's
 * progress thread) runs now, or whose inline pass (sst_engine_run_inline)
 * it runs, lock held: as for current_engine, a trigger's sst_predicate_add
 * or _remove must not take the lock again. */
static _Thread_local const struct sst_engine *arrival_engine;

static bool holds_lock(const struct sst_engine *engine)
{
    return current_engine == engine || arrival_engine == engine;
}

int sst_predicate_add(struct sst_engine *engine, sst_predicate_fn predicate, sst_trigger_fn trigger,
                      void *ctx, enum sst_predicate_kind kind, uint64_t *id_out)
{
    if (predicate == NULL || trigger == NULL)
        return sp_error(SPINDLE_EINVAL, "sst: predicate and trigger must not be NULL");
    bool on_thread = holds_lock(engine);
    if (!on_thread)
        pthread_mutex_lock(&engine->lock);
    int rc = 0;
    if (engine->num_predicates == engine->cap_predicates) {
        uint32_t cap = engine->cap_predicates ? engine->cap_predicates * 2 : 16;
        struct sst_predicate *grown = realloc(engine->predicates, cap * sizeof *grown);
        if (grown == NULL)
            rc = sp_error(SPINDLE_ENOMEM, "sst: out of memory for predicates");
        else {
            engine->predicates = grown;
            engine->cap_predicates = cap;
        }
    }
    if (rc == 0) {
        uint64_t id = engine->next_predicate_id++;
        engine->predicates[engine->num_predicates++] =
            (struct sst_predicate){predicate, trigger, NULL, ctx, kind, id, false};
        if (id_out != NULL)
            *id_out = id;
    }
    if (!on_thread)
        pthread_mutex_unlock(&engine->lock);
    if (rc == 0)
        sst_engine_wake(engine);
    return rc;
}

int sst_predicate_set_arrival(struct sst_engine *engine, uint64_t id, sst_trigger_fn trigger)
{
    bool on_thread = holds_lock(engine);
    if (!on_thread)
        pthread_mutex_lock(&engine->lock);
    bool found = false;
    for (uint32_t i = 0; i < engine->num_predicates; i++) {
        if (engine->predicates[i].id == id && !engine->predicates[i].removed) {
            engine->predicates[i].arrival_trigger = trigger;
            found = true;
        }
    }
    if (!on_thread)
        pthread_mutex_unlock(&engine->lock);
    return found ? 0 : sp_error(SPINDLE_EINVAL, "sst: no predicate %llu", (unsigned long long)id);
}

void sst_predicate_remove(struct sst_engine *engine, uint64_t id)
{
    bool on_thread = holds_lock(engine);
    if (!on_thread)
        pthread_mutex_lock(&engine->lock);
    for (uint32_t i = 0; i < engine->num_predicates; i++) {
        if (engine->predicates[i].id == id) {
            engine->predicates[i].removed = true;
            engine->predicates_removed = true;
        }
    }
    if (!on_thread)
        pthread_mutex_unlock(&engine->lock);
}

static void compact_predicates(struct sst_engine *engine)
{
    uint32_t kept = 0;
    for (uint32_t i = 0; i < engine->num_predicates; i++) {
        if (!engine->predicates[i].removed)
            engine->predicates[kept++] = engine->predicates[i];
    }
    engine->num_predicates = kept;
    engine->predicates_removed = false;
}

/* One pass over every predicate; lock held. Returns how many fired. Reads
 * the array afresh each step: triggers may add (realloc) or remove. */
static uint32_t run_predicates(struct sst_engine *engine)
{
    uint32_t fired = 0;
    for (uint32_t i = 0; i < engine->num_predicates; i++) {
        struct sst_predicate entry = engine->predicates[i];
        if (entry.removed || !entry.predicate(entry.ctx))
            continue;
        if (entry.kind == SST_PRED_ONE_TIME) {
            engine->predicates[i].removed = true;
            engine->predicates_removed = true;
        }
        entry.trigger(entry.ctx);
        fired++;
    }
    if (engine->predicates_removed)
        compact_predicates(engine);
    sst_stat_add(&engine->stats.passes, 1);
    return fired;
}

/* Reports rows whose member announced it left, once each; lock held. */
static void check_departures(struct sst_engine *engine)
{
    for (struct sst_table *table = engine->tables; table != NULL; table = table->next) {
        for (uint32_t row = 0; row < table->num_rows; row++) {
            if (row == table->my_row || atomic_load(&table->failed[row]) ||
                sst_read_u64(table, row, SST_HEADER_LEFT) == 0)
                continue;
            atomic_store(&table->failed[row], true);
            if (engine->on_failure != NULL)
                engine->on_failure(engine->on_failure_ctx, table, row, SPINDLE_ESHUTDOWN);
        }
    }
}

bool sst_on_predicate_thread(const struct sst_engine *engine)
{
    return current_engine == engine;
}

/* Reports rows whose heartbeat stood still for the stall timeout, once
 * each (sst.h, "Liveness"); lock held. */
static void check_stalls(struct sst_engine *engine, uint64_t now)
{
    bool restart = engine->watched_ns != 0 && now - engine->watched_ns > engine->stall_ns / 2;
    engine->watched_ns = now;
    for (struct sst_table *table = engine->tables; table != NULL; table = table->next) {
        for (uint32_t row = 0; row < table->num_rows; row++) {
            if (row == table->my_row || table->peer_of_row[row] < 0 ||
                atomic_load(&table->failed[row]))
                continue;
            uint64_t beat = sst_read_u64(table, row, SST_HEADER_HEARTBEAT);
            bool first = table->beat_at_ns[row] == 0;
            if (first || restart || beat != table->beat_seen[row]) {
                /* A row that has beaten in this table is set up. */
                table->beat_moved[row] |= beat != 0;
                table->beat_seen[row] = beat;
                table->beat_at_ns[row] = now;
                continue;
            }
            uint64_t limit =
                table->beat_moved[row] ? engine->stall_ns : SST_STALL_GRACE * engine->stall_ns;
            if (now - table->beat_at_ns[row] < limit)
                continue;
            atomic_store(&table->failed[row], true);
            SP_LOG_WARNING("sst", "row %u: heartbeat stood still for %llu ms: suspected", row,
                           (unsigned long long)((now - table->beat_at_ns[row]) / 1000000));
            if (engine->on_failure != NULL)
                engine->on_failure(engine->on_failure_ctx, table, row, SPINDLE_ETIMEDOUT);
        }
    }
}

/* Reports, once per table, that another row announced this member removed
 * (sst_table_announce_removed); lock held. */
static void check_removed(struct sst_engine *engine)
{
    for (struct sst_table *table = engine->tables; table != NULL; table = table->next) {
        if (table->removed_reported)
            continue;
        for (uint32_t row = 0; row < table->num_rows; row++) {
            if (row == table->my_row ||
                ((sst_read_u64(table, row, SST_HEADER_REMOVED) >> table->my_row) & 1) == 0)
                continue;
            table->removed_reported = true;
            SP_LOG_WARNING("sst", "row %u announced that this member (row %u) was removed", row,
                           table->my_row);
            if (engine->on_failure != NULL)
                engine->on_failure(engine->on_failure_ctx, table, table->my_row, SPINDLE_EREMOVED);
            break;
        }
    }
}

static void request_short_slice(void);

/* True when a row announced its departure or this member's removal and
 * it is not reported yet; lock held. */
static bool notice_pending(struct sst_engine *engine)
{
    for (struct sst_table *table = engine->tables; table != NULL; table = table->next) {
        for (uint32_t row = 0; row < table->num_rows; row++) {
            if (row == table->my_row || atomic_load(&table->failed[row]))
                continue;
            if (sst_read_u64(table, row, SST_HEADER_LEFT) != 0 ||
                (!table->removed_reported &&
                 ((sst_read_u64(table, row, SST_HEADER_REMOVED) >> table->my_row) & 1) != 0))
                return true;
        }
    }
    return false;
}

/* Runs the arrival triggers whose predicates hold; lock held. Removed
 * entries are left for the predicate thread to compact (it is woken then:
 * see sst_arrival). */
static void run_arrival_triggers(struct sst_engine *engine)
{
    for (uint32_t i = 0; i < engine->num_predicates; i++) {
        struct sst_predicate entry = engine->predicates[i];
        if (entry.removed || entry.arrival_trigger == NULL || !entry.predicate(entry.ctx))
            continue;
        entry.arrival_trigger(entry.ctx);
    }
}

/* Work left for the predicate thread after the arrival triggers; lock held. */
static bool thread_needed(struct sst_engine *engine)
{
    if (engine->predicates_removed || atomic_load(&engine->stuck_unreported) ||
        notice_pending(engine))
        return true;
    for (uint32_t i = 0; i < engine->num_predicates; i++) {
        const struct sst_predicate *entry = &engine->predicates[i];
        if (!entry->removed && entry->predicate(entry->ctx))
            return true;
    }
    return false;
}

/* Takes the lock and post_lock, both only tried, while the predicate
 * thread sleeps (checked again once they are held: a pass of that thread
 * starts under the lock, so none is under way or can start until they are
 * released). False, holding neither, otherwise. */
static bool lock_both_if_asleep(struct sst_engine *engine)
{
    if (!atomic_load(&engine->running) || !sst_engine_asleep(engine) || !sst_engine_trylock(engine))
        return false;
    if (pthread_mutex_trylock(&engine->post_lock) != 0) {
        pthread_mutex_unlock(&engine->lock);
        return false;
    }
    if (atomic_load(&engine->running) && sst_engine_asleep(engine))
        return true;
    pthread_mutex_unlock(&engine->post_lock);
    pthread_mutex_unlock(&engine->lock);
    return false;
}

/*
 * The transport's arrival hook (sst_predicate_set_arrival). Only while the
 * predicate thread sleeps: an awake one finds the work in its next pass.
 * Both locks are only tried, never waited for: a thread holding post_lock
 * may be waiting for credits that only this (progress) thread reads. With
 * post_lock taken before the pass, what the pass queues is posted before
 * anything queued after it, as sst_unlock_and_post keeps it; and it is
 * posted before the lock is released, so no pass of the predicate thread
 * writes the row in between (a push reads the row when posted: released
 * first, it could carry a guard newer than the data posted, T2). A pass
 * here is one the predicate thread would have run next (it sleeps, so none
 * is under way), so row writes and pushes keep their order.
 */
bool sst_arrival(void *ctx)
{
    /* The thread that answers here asks for the predicate thread's short
     * slice, to preempt a busy thread when its socket wakes it. */
    static _Thread_local bool sliced;
    if (!sliced) {
        sliced = true;
        request_short_slice();
    }
    struct sst_engine *engine = ctx;
    if (!lock_both_if_asleep(engine))
        return false;
    arrival_engine = engine;
    run_arrival_triggers(engine);
    arrival_engine = NULL;
    /* Also when no trigger ran: a write that makes no predicate hold (the
     * first of two acknowledgements, a heartbeat) leaves the woken thread
     * nothing to do but take a CPU the members that must answer need, and
     * leaves it awake, so the arrival that follows finds it so and must
     * wake it again (up to 7 such rings per message at 10 messages a
     * second, docs/PERFORMANCE.md). */
    bool handled = !thread_needed(engine);
    sst_post_and_unlock_held(engine);
    return handled;
}

/*
 * The committing thread's pass (sst.h): the same locks and the same order
 * as sst_arrival, on a thread that is neither the predicate thread nor the
 * transport's. Without the arrival hook (shm, verbs) the predicate
 * thread's wake-up stays: nothing else there answers what this pass's
 * pushes bring back while that thread sleeps.
 */
bool sst_engine_run_inline(struct sst_engine *engine, bool (*fn)(void *ctx), void *ctx)
{
    if (!engine->arrival_hook || holds_lock(engine) || !lock_both_if_asleep(engine))
        return false;
    arrival_engine = engine;
    bool done = fn(ctx);
    arrival_engine = NULL;
    bool wake = done && thread_needed(engine);
    sst_post_and_unlock_held(engine);
    if (done)
        sst_stat_add(&engine->stats.inline_passes, 1);
    if (wake)
        sst_engine_wake(engine);
    return done;
}

bool sst_engine_has_arrival(const struct sst_engine *engine)
{
    return engine->arrival_hook;
}

static void poll_transport(struct sst_engine *engine)
{
    struct tp_event events[EVENTS_MAX];
    int n = tp_poll(engine->endpoint, events, EVENTS_MAX);
    for (int i = 0; i < n; i++) {
        if (events[i].type == TP_EVENT_PEER_FAILED)
            sst_peer_failed(engine, events[i].peer, events[i].error);
    }
}

/* Adds delta to my row header word at offset in every table; lock held. */
static void bump_header(struct sst_engine *engine, uint32_t offset)
{
    for (struct sst_table *table = engine->tables; table != NULL; table = table->next) {
        uint64_t value = sst_read_u64(table, table->my_row, offset);
        sst_write_u64(table, offset, value + 1);
    }
    sst_push_headers(engine);
}

/* Blocks on the doorbell after a last check for work; returns true when
 * woken by a ring or found work (spin again), false on timeout. Where a
 * ring is not cheap (verbs), pushers ring only a row that announced sleep,
 * so the thread announces it first (odd SLEEP word, pushed) and withdraws
 * it after; where it is (shm, fabric), every push rings and the
 * announcement would only cost two writes to every peer per sleep. */
static bool sleep_on_doorbell(struct sst_engine *engine)
{
    bool announce = engine->options.announce_sleep ||
                    (tp_attr(engine->endpoint)->caps & TP_CAP_CHEAP_DOORBELL) == 0;
    uint64_t token = tp_doorbell_arm(engine->endpoint);
    pthread_mutex_lock(&engine->lock);
    if (announce)
        bump_header(engine, SST_HEADER_SLEEP); /* odd: asleep */
    uint32_t fired = run_predicates(engine);
    if (fired > 0 && announce)
        bump_header(engine, SST_HEADER_SLEEP);
    sst_unlock_and_post(engine);
    if (fired > 0)
        return true;
    sst_stat_add(&engine->stats.sleeps, 1);
    atomic_store_explicit(&engine->asleep, true, memory_order_relaxed);
    int rc = tp_doorbell_wait(engine->endpoint, token, engine->options.max_sleep_ms);
    atomic_store_explicit(&engine->asleep, false, memory_order_relaxed);
    if (announce) {
        pthread_mutex_lock(&engine->lock);
        bump_header(engine, SST_HEADER_SLEEP); /* even: awake */
        sst_unlock_and_post(engine);
    }
    return rc == 0;
}

/* Asks the scheduler for a short time slice (Linux 6.6+ EEVDF honours
 * sched_runtime for normal tasks as the requested slice; older kernels
 * ignore it or refuse, which is harmless). A shorter slice gives the thread
 * an earlier deadline when a doorbell wakes it, so it preempts a busy
 * thread instead of waiting for the end of that thread's slice: on a loaded
 * 2-core machine that is the difference between ~0.1 ms and ~4 ms wake-ups.
 *
 * A real-time policy the thread inherited from the one that started it
 * (the application ran under `chrt -f 1`, say) is kept: the request would
 * turn it back into a normal thread. A real-time thread woken while its
 * CPU is held by a thread that keeps it for milliseconds (a kernel worker,
 * another process) is placed on an idle CPU or preempts that thread; a
 * normal one was traced waiting there for milliseconds while the other
 * CPU idled (docs/PERFORMANCE.md, "The slowest one percent at light load
 * on shm"). */
static void request_short_slice(void)
{
    int policy = sched_getscheduler(0);
#ifdef SCHED_RESET_ON_FORK
    if (policy > 0)
        policy &= ~SCHED_RESET_ON_FORK;
#endif
    if (policy == SCHED_FIFO || policy == SCHED_RR)
        return;
#ifdef SYS_sched_setattr
    struct {
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
    } attr = {.size = 48, .policy = 0 /* SCHED_OTHER */, .runtime = 100000 /* ns */};
    (void)syscall(SYS_sched_setattr, 0, &attr, 0);
#endif
}

/*
 * How long the thread spins with no work before it sleeps on the doorbell.
 * A spin pays only when the work it waits for can arrive meanwhile, that
 * is when the threads that produce it (peers' predicate threads, this
 * process's application threads) have CPUs of their own. With few CPUs
 * shared by several members (3 members on 2 CPUs), a spin holds the very
 * CPU the answering member needs, and a futex wake costs less than the
 * spin: spin only a few microseconds, enough for an immediate follow-up,
 * and none on one CPU. With CPUs to spare, spin the full spin_us.
 *
 * After a post that rang peers, with few CPUs, do not spin at all: the
 * answer it waits for is at least a wake-up of another member away (tens
 * of microseconds), and the peers just rung need a CPU now; a spin only
 * holds one of the few from them (1000 messages a second, 3 members on 2
 * busy CPUs: a lower p50 in 32 of 52 alternated pairs, docs/PERFORMANCE.md).
 */
uint64_t sst_spin_ns(long cpus, uint32_t spin_us, bool rang_peers)
{
    uint64_t full_ns = (uint64_t)spin_us * 1000;
    if (cpus >= SST_SPIN_SPARE_CPUS)
        return full_ns;
    if (cpus <= 1 || rang_peers)
        return 0;
    return full_ns < SST_SPIN_BRIEF_NS ? full_ns : SST_SPIN_BRIEF_NS;
}

static long usable_cpus(void)
{
    cpu_set_t set;
    return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                       : sysconf(_SC_NPROCESSORS_ONLN);
}

/* Dedicated-CPU polling: pins the calling thread to cpu; the loop then
 * never sleeps. Returns false (logged) when the pin failed, and the thread
 * polls adaptively instead rather than spin on a CPU it shares. */
static bool pin_to(uint32_t cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (rc != 0)
        SP_LOG_WARNING("sst", "cannot pin the predicate thread to CPU %u (%s): polling adaptively",
                       cpu, strerror(rc));
    return rc == 0;
}

/* Tells every peer, in every table's row header, that this thread polls
 * on a dedicated CPU and never sleeps, so that nobody rings its doorbell
 * (enqueue, sst_table.c), and stops this process's own wakes of it
 * (sst_engine_wake); a table created later starts with the word set. */
static void announce_polling(struct sst_engine *engine)
{
    pthread_mutex_lock(&engine->lock);
    atomic_store(&engine->polling, true);
    for (struct sst_table *table = engine->tables; table != NULL; table = table->next) {
        uint64_t sleep = sst_read_u64(table, table->my_row, SST_HEADER_SLEEP);
        sst_write_u64(table, SST_HEADER_SLEEP, sleep | SST_SLEEP_POLLING);
    }
    sst_push_headers(engine);
    sst_unlock_and_post(engine);
}

static void *predicate_thread(void *arg)
{
    struct sst_engine *engine = arg;
    current_engine = engine;
    bool dedicated = engine->options.poll_dedicated && pin_to(engine->options.poll_cpu);
    if (dedicated)
        announce_polling(engine);
    else
        request_short_slice();
    uint64_t idle_since = sp_now_ns();
    uint64_t last_heartbeat = 0;
    const long cpus = usable_cpus();
    const uint64_t spin_ns =
        dedicated ? UINT64_MAX : sst_spin_ns(cpus, engine->options.spin_us, false);
    const uint64_t spin_after_ring_ns =
        dedicated ? UINT64_MAX : sst_spin_ns(cpus, engine->options.spin_us, true);
    const uint64_t heartbeat_ns = (uint64_t)engine->options.max_sleep_ms * 1000000;
    while (atomic_load(&engine->running)) {
        pthread_mutex_lock(&engine->lock);
        uint32_t fired = run_predicates(engine);
        poll_transport(engine);
        sst_report_stuck(engine);
        check_departures(engine);
        uint64_t now = sp_now_ns();
        if (now - last_heartbeat >= heartbeat_ns) {
            last_heartbeat = now;
            bump_header(engine, SST_HEADER_HEARTBEAT);
            check_stalls(engine, now);
            check_removed(engine);
        }
        sst_unlock_and_post(engine);
        if (fired > 0) {
            idle_since = now;
            continue;
        }
        if (now - idle_since < (engine->rang_peers ? spin_after_ring_ns : spin_ns)) {
            __builtin_ia32_pause();
            continue;
        }
        engine->rang_peers = false;    /* set again if the last check below rings */
        if (sleep_on_doorbell(engine)) /* at most max_sleep_ms: timers */
            idle_since = sp_now_ns();
    }
    atomic_store(&engine->polling, false); /* a restarted thread may not get its CPU */
    return NULL;
}

void sst_engine_announce_leave(struct sst_engine *engine)
{
    pthread_mutex_lock(&engine->lock);
    for (struct sst_table *table = engine->tables; table != NULL; table = table->next) {
        sst_write_u64(table, SST_HEADER_LEFT, 1);
        for (uint32_t row = 0; row < table->num_rows; row++) {
            if (row != table->my_row)
                (void)sst_queue_write(table, row, 0, SST_ROW_HEADER, true);
        }
    }
    sst_unlock_and_post(engine);
}

void sst_engine_alert(struct sst_engine *engine)
{
    pthread_mutex_lock(&engine->lock);
    pthread_mutex_lock(&engine->post_lock);
    for (uint32_t i = 0; i < engine->num_peers; i++) {
        struct sst_peer_ref *ref = &engine->peers[i];
        if (ref->refs > 0 && ref->peer != NULL && !ref->failed)
            (void)tp_doorbell_ring(ref->peer); /* a dead one is reported by poll */
    }
    pthread_mutex_unlock(&engine->post_lock);
    pthread_mutex_unlock(&engine->lock);
}

int sst_engine_start(struct sst_engine *engine)
{
    if (engine->started)
        return sp_error(SPINDLE_EINVAL, "sst: engine already started");
    atomic_store(&engine->running, true);
    atomic_store(&engine->asleep, false);
    int rc = pthread_create(&engine->thread, NULL, predicate_thread, engine);
    if (rc != 0) {
        atomic_store(&engine->running, false);
        atomic_store(&engine->asleep, true);
        return sp_error(SPINDLE_EIO, "sst: cannot start the predicate thread (error %d)", rc);
    }
    engine->started = true;
    return 0;
}

void sst_engine_stop(struct sst_engine *engine)
{
    if (!engine->started)
        return;
    atomic_store(&engine->running, false);
    sst_engine_wake(engine);
    pthread_join(engine->thread, NULL);
    atomic_store(&engine->asleep, true);
    engine->started = false;
}
