/*
 * The transport contract (src/transport/transport.h, ARCHITECTURE.md),
 * written once and run unchanged against every backend:
 *
 *   transport_conformance shm
 *   transport_conformance fabric:tcp
 *   transport_conformance fabric:sockets
 *   transport_conformance verbs-fake     (the verbs backend on a fake NIC
 *                                         that really moves bytes)
 *   transport_conformance broken         (the checks fail against shims that
 *                                         tear or reorder writes)
 *
 * T1/T2: a writer posts, more than a million times over, batches of three
 * writes: eight self-checking data words (value in the high half, its
 * complement in the low) into region 1, eight into region 2, and a guard in
 * region 1 after them; a reader polls its memory and counts torn words,
 * guards going backwards and data older than the guard it follows (in both
 * regions: sst_push_side relies on order across regions). T3: a source
 * buffer is overwritten as soon as its signaled batch completes; the target
 * must hold the old contents. T4: of two peers, one is killed; exactly it
 * is reported failed, once, and the other goes on. Doorbell: a ring after
 * arm is never lost, a ring wakes a waiter, and an unrung wait times out.
 *
 * Members are processes (shm, fabric) or threads (the fake NIC lives in one
 * process); they meet through shared memory and never wait on a timer for
 * each other. Every assertion could fail: the reader must observe progress,
 * and the broken shims must be caught.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "broken_shim.h"
#include "transport/transport.h"
#include "util/clock.h"
#include "util/error.h"
#ifdef SPINDLE_HAVE_VERBS
#include "transport/verbs/fake_nic.h"
#endif

#define REGION     4096
#define DATA_WORDS 8
#define GUARD_AT   512 /* byte offset of the guard in region 1 */
#ifndef ITERATIONS
#define ITERATIONS 340000u /* triples of writes: over a million writes */
#endif
#define CHECKPOINT 10000u /* the writer waits for the reader this often */
/* Triples of the T1/T2 streams for the backend under test: ITERATIONS, but
 * a quarter on libfabric's sockets provider, whose writes cost several
 * times tcp's, so that its two streams (still 255,000 writes each) do not
 * take minutes of every suite run. Set by choose(), before any member is
 * spawned. */
static uint32_t iterations = ITERATIONS;
#define SOURCE_RING 64u /* triples whose sources are in flight at most */
#define PER_POST    4u  /* triples per post */
#define T3_ROUNDS   200u
#define T3_BYTES    1024u
#define FAIL_MS     1000
/* The T1/T2 streams check ordering, not failure detection: on a loaded
 * machine (a CPU hog beside two members on two cores) a target's progress
 * thread can go unscheduled for over FAIL_MS, and a backend that counts
 * held credits as a stall (fabric) would then fail a live peer. */
#define STREAM_FAIL_MS 30000
/* T4 writes to a live peer while it waits for the killed one to be
 * reported: every backend here reports a killed peer by the loss of its
 * connection or process within milliseconds, but one starved for a second
 * beside a CPU-bound suite (sanitizers, ctest -j2, two cores) would be
 * declared failed by a 1 s timeout on held credits: a false report that
 * the test would take for T4 failing. */
#define T4_FAIL_MS 10000

#ifdef SPINDLE_HAVE_FABRIC
/* Two ThreadSanitizer reports come from inside libfabric 1.17 itself, in
 * uninstrumented code we do not own (see tests/transport/fabric). */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
    return "called_from_lib:libfabric.so.1\nmutex:_dl_call_fini\n";
}
#endif

/* ---- the backend under test ---------------------------------------------- */

static struct {
    const char *label;
    const char *backend;
    const char *provider;
    bool threads;              /* members are threads of this process */
    const struct tp_ops *shim; /* a broken shim instead of the registry */
} under_test;

/* Endpoints of thread members open one at a time (the fake NIC binds a
 * listener to the device opened last). */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
/* failure_timeout_ms of the endpoints opened next (set before members are
 * spawned, so forked members inherit it). */
static int fail_ms = FAIL_MS;

static struct tp_endpoint *open_ep(int *fake_index)
{
    struct tp_config config = {.backend = under_test.backend,
                               .group_name = "conformance",
                               .provider = under_test.provider,
                               .host = "127.0.0.1",
                               .failure_timeout_ms = fail_ms};
    struct tp_endpoint *ep = NULL;
    pthread_mutex_lock(&open_lock);
#ifdef SPINDLE_HAVE_VERBS
    if (fake_index != NULL)
        *fake_index = fake_nic_contexts();
#else
    (void)fake_index;
#endif
    int rc = under_test.shim != NULL ? under_test.shim->open(&config, &ep) : tp_open(&config, &ep);
    pthread_mutex_unlock(&open_lock);
    if (rc != 0) {
        fprintf(stderr, "conformance: opening %s failed: %s\n", under_test.label, spindle_errmsg());
        return NULL;
    }
    return ep;
}

/* ---- members: processes or threads, meeting in shared memory ------------- */

/* What members share. Counters only grow; flags go 0 -> 1. */
struct shared {
    struct tp_desc address[3];
    struct tp_desc region1[3], region2[3];
    int fake_index[3];
    uint64_t ready[3];       /* member i published its descriptors */
    uint64_t reader_seen;    /* T1/T2: last guard the reader saw */
    uint64_t writer_done;    /* T1/T2: iterations posted */
    uint64_t writer_end;     /* T1/T2: every post of the writer completed */
    uint64_t writer_gave_up; /* T1/T2: the writer stopped on an error */
    uint64_t t3_ack;         /* T3: rounds the target checked */
    uint64_t ringer_go;      /* doorbell: the waiter's own checks are done */
    uint64_t armed;          /* doorbell: the waiter armed (count) */
    uint64_t ringing;        /* doorbell: rings about to be sent (count) */
    uint64_t rung;           /* doorbell: rings sent (count) */
    uint64_t release;        /* members may close and leave */
    int member_rc[3];
};

static struct shared *shared;

struct member {
    int index;
    int (*fn)(int index);
    pid_t pid;
    pthread_t thread;
};

static void *thread_main(void *arg)
{
    struct member *m = arg;
    shared->member_rc[m->index] = m->fn(m->index);
    return NULL;
}

static void spawn(struct member *m, int index, int (*fn)(int))
{
    m->index = index;
    m->fn = fn;
    if (under_test.threads) {
        assert_int_equal(pthread_create(&m->thread, NULL, thread_main, m), 0);
        return;
    }
    fflush(NULL);
    m->pid = fork();
    assert_true(m->pid >= 0);
    if (m->pid == 0)
        _exit(fn(index));
}

/* Waits for the member; returns its exit code. */
static int join(struct member *m)
{
    if (under_test.threads) {
        pthread_join(m->thread, NULL);
        return shared->member_rc[m->index];
    }
    int status = 0;
    assert_int_equal(waitpid(m->pid, &status, 0), m->pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Kills the member as a crash would: SIGKILL, or for the fake NIC its
 * device context dies (the thread is then released to return). */
static void kill_member(struct member *m)
{
    if (under_test.threads) {
#ifdef SPINDLE_HAVE_VERBS
        fake_nic_crash(shared->fake_index[m->index]);
#endif
        return;
    }
    kill(m->pid, SIGKILL);
    waitpid(m->pid, NULL, 0);
}

static uint64_t load(const uint64_t *word)
{
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

static void store(uint64_t *word, uint64_t value)
{
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
}

/* Waits until *word >= value, yielding; false after 60 s (a hang). */
static bool await(const uint64_t *word, uint64_t value)
{
    uint64_t deadline = sp_now_ns() + 60ull * 1000000000ull;
    while (load(word) < value) {
        if (sp_now_ns() > deadline)
            return false;
        sched_yield();
    }
    return true;
}

/* A member that owns an endpoint and two regions, publishes them, and
 * stays until released (or killed). */
struct target {
    struct tp_endpoint *ep;
    struct tp_mr *mr1, *mr2;
    uint64_t *mem1, *mem2;
};

static int target_open(int index, struct target *t)
{
    memset(t, 0, sizeof *t);
    t->ep = open_ep(&shared->fake_index[index]);
    if (t->ep == NULL)
        return 2;
    void *a1, *a2;
    if (tp_mr_alloc(t->ep, REGION, TP_MR_REMOTE_WRITE, &a1, &t->mr1) != 0 ||
        tp_mr_alloc(t->ep, REGION, TP_MR_REMOTE_WRITE | TP_MR_NONPINNED, &a2, &t->mr2) != 0 ||
        tp_address(t->ep, &shared->address[index]) != 0 ||
        tp_mr_export(t->mr1, &shared->region1[index]) != 0 ||
        tp_mr_export(t->mr2, &shared->region2[index]) != 0)
        return 3;
    t->mem1 = a1;
    t->mem2 = a2;
    store(&shared->ready[index], 1);
    return 0;
}

static void target_close(struct target *t)
{
    tp_mr_free(t->ep, t->mr1);
    tp_mr_free(t->ep, t->mr2);
    tp_close(t->ep);
}

/* A connection from ep to member index, with both of its regions. */
struct link {
    struct tp_peer *peer;
    struct tp_rmr *rmr1, *rmr2;
};

static int link_open(struct tp_endpoint *ep, int index, struct link *l)
{
    if (!await(&shared->ready[index], 1))
        return 4;
    if (tp_connect(ep, &shared->address[index], 30000, &l->peer) != 0 ||
        tp_rmr_import(l->peer, &shared->region1[index], &l->rmr1) != 0 ||
        tp_rmr_import(l->peer, &shared->region2[index], &l->rmr2) != 0) {
        fprintf(stderr, "conformance: connecting to member %d: %s\n", index, spindle_errmsg());
        return 5;
    }
    return 0;
}

/* Releases what link_open made: imported regions go back before the peer
 * is disconnected (tp_close does not release them). */
static void link_close(struct tp_endpoint *ep, struct link *l)
{
    tp_rmr_release(l->peer, l->rmr1);
    tp_rmr_release(l->peer, l->rmr2);
    tp_disconnect(ep, l->peer);
}

/* Takes the events there are, counting WRITE_DONE into *done; with none,
 * waits up to 1 ms on the doorbell. Sets *failed on any other event (a
 * failure report). */
static void reap_once(struct tp_endpoint *ep, uint64_t *done, bool *failed)
{
    struct tp_event events[32];
    int n = tp_poll(ep, events, 32);
    for (int i = 0; i < n; i++) {
        if (events[i].type != TP_EVENT_WRITE_DONE)
            *failed = true;
        else
            (*done)++;
    }
    if (n == 0)
        tp_doorbell_wait(ep, tp_doorbell_arm(ep), 1);
}

/* Polls until n WRITE_DONE events arrived (counting into *done); false
 * on a failure event or after 60 s. */
static bool reap(struct tp_endpoint *ep, uint64_t *done, uint64_t want)
{
    uint64_t deadline = sp_now_ns() + 60ull * 1000000000ull;
    bool failed = false;
    while (*done < want && !failed) {
        if (sp_now_ns() > deadline)
            return false;
        reap_once(ep, done, &failed);
    }
    return !failed;
}

/* Posts a batch, polling while the transport pushes back. Credits may come
 * back without a completion of ours (fabric: the target's acknowledgement
 * can trail the local completion), so a refused post is retried after
 * every poll, as the contract says, not only after a new completion.
 * SPINDLE_EPEERFAILED on a failure event, SPINDLE_ETIMEDOUT after 60 s of
 * refusals. */
static int post(struct tp_endpoint *ep, struct tp_peer *peer, const struct tp_write *w, unsigned n,
                unsigned flags, uint64_t cookie, uint64_t *done)
{
    uint64_t deadline = sp_now_ns() + 60ull * 1000000000ull;
    for (;;) {
        int rc = tp_post_writes(peer, w, n, flags, cookie);
        if (rc != SPINDLE_EAGAIN)
            return rc;
        bool failed = false;
        reap_once(ep, done, &failed);
        if (failed)
            return SPINDLE_EPEERFAILED;
        if (sp_now_ns() > deadline)
            return SPINDLE_ETIMEDOUT;
    }
}

/* ---- T1/T2 ---------------------------------------------------------------- */

static uint64_t encode(uint32_t g)
{
    return ((uint64_t)g << 32) | (uint32_t)~g;
}

/* Member 1: streams iterations (data 1, data 2, guard) triples into member
 * 0, PER_POST triples per post, every post signaled; a source slot is
 * reused only once the post that carried it completed (T3 allows nothing
 * earlier). */
static int t1_t2_stream(int index)
{
    (void)index;
    struct tp_endpoint *ep = open_ep(NULL);
    struct link l;
    if (ep == NULL || link_open(ep, 0, &l) != 0)
        return 2;
    size_t slot = 2 * DATA_WORDS * 8 + 8;
    void *base;
    struct tp_mr *mr;
    if (tp_mr_alloc(ep, SOURCE_RING * slot, 0, &base, &mr) != 0)
        return 3;
    uint64_t done = 0, posts = 0;
    for (uint32_t first = 1; first <= iterations; first += PER_POST) {
        uint32_t last = first + PER_POST - 1 < iterations ? first + PER_POST - 1 : iterations;
        posts++;
        if (posts > SOURCE_RING / PER_POST && !reap(ep, &done, posts - SOURCE_RING / PER_POST))
            return 4;
        struct tp_write batch[3 * PER_POST];
        unsigned n = 0;
        for (uint32_t g = first; g <= last; g++) {
            uint64_t *words = (uint64_t *)(void *)((uint8_t *)base + (g % SOURCE_RING) * slot);
            for (int i = 0; i < 2 * DATA_WORDS; i++)
                words[i] = encode(g);
            words[2 * DATA_WORDS] = g;
            batch[n++] = (struct tp_write){words, mr, l.rmr1, 0, DATA_WORDS * 8};
            batch[n++] = (struct tp_write){&words[DATA_WORDS], mr, l.rmr2, 0, DATA_WORDS * 8};
            batch[n++] = (struct tp_write){&words[2 * DATA_WORDS], mr, l.rmr1, GUARD_AT, 8};
        }
        int rc = post(ep, l.peer, batch, n, TP_POST_SIGNALED, posts, &done);
        if (rc != 0) {
            fprintf(stderr, "conformance: T1/T2 post %llu: %s\n", (unsigned long long)posts,
                    spindle_strerror(rc));
            return 5;
        }
        store(&shared->writer_done, last);
        /* The reader must run alongside: every CHECKPOINT triples, wait
         * until it has seen this post's guards. (first, not last: a shim
         * that reorders a post leaves first's guard in memory.) */
        if (last / CHECKPOINT != (first - 1) / CHECKPOINT && !await(&shared->reader_seen, first))
            return 6;
    }
    if (!reap(ep, &done, posts))
        return 7;
    store(&shared->writer_end, 1);
    await(&shared->release, 1);
    link_close(ep, &l);
    tp_mr_free(ep, mr);
    tp_close(ep);
    return 0;
}

/* The writer member: on an error the reader stops at once instead of
 * waiting out its deadline for guards that will not come. */
static int t1_t2_writer(int index)
{
    int rc = t1_t2_stream(index);
    if (rc != 0)
        store(&shared->writer_gave_up, 1);
    return rc;
}

struct t1_t2_counts {
    uint64_t torn, decreasing, unguarded, distinct, last_guard;
};

/* Member 0 reads while member 1 writes. */
static void run_t1_t2(bool with_hog, struct t1_t2_counts *c)
{
    memset(shared, 0, sizeof *shared);
    memset(c, 0, sizeof *c);
    fail_ms = STREAM_FAIL_MS;
    pid_t hog = -1;
    if (with_hog) {
        hog = fork();
        if (hog == 0) {
            volatile uint64_t spin = 0;
            for (;;)
                spin++;
        }
    }
    /* Members are forked before this process opens its endpoint: a fork
     * of a process with threads (libfabric's progress thread) may not
     * start threads of its own under ThreadSanitizer. */
    struct member writer;
    spawn(&writer, 1, t1_t2_writer);
    struct target t;
    assert_int_equal(target_open(0, &t), 0);
    const uint64_t *guard = &t.mem1[GUARD_AT / 8];
    uint32_t last_data[2][DATA_WORDS] = {{0}};
    uint64_t deadline = sp_now_ns() + 300ull * 1000000000ull;
    bool last_pass = false;
    while (c->last_guard < iterations && !last_pass && sp_now_ns() < deadline &&
           load(&shared->writer_gave_up) == 0) {
        /* A broken shim may never leave the last guard in memory: once its
         * writer is through, one more pass and the reader stops. A real
         * backend must show the last guard (T3: completed writes land). */
        last_pass = under_test.shim != NULL && load(&shared->writer_end) == 1;
        uint64_t g = load(guard);
        if (g < c->last_guard)
            c->decreasing++;
        if (g != c->last_guard)
            c->distinct++;
        for (int r = 0; r < 2; r++) {
            const uint64_t *data = r == 0 ? t.mem1 : t.mem2;
            for (int i = 0; i < DATA_WORDS; i++) {
                uint64_t word = load(&data[i]);
                uint32_t high = (uint32_t)(word >> 32);
                if (word != 0 && word != encode(high)) {
                    c->torn++;
                    continue;
                }
                if (high < g)
                    c->unguarded++; /* data older than the guard it follows */
                if (high < last_data[r][i])
                    c->decreasing++; /* a later write overtaken by an earlier one */
                last_data[r][i] = high;
            }
        }
        if (g > c->last_guard) {
            c->last_guard = g;
            store(&shared->reader_seen, g);
        }
        /* Two cores: a reader that never yields starves the progress
         * threads that land the writes (libfabric). */
        sched_yield();
    }
    store(&shared->release, 1);
    int rc = join(&writer);
    if (hog > 0) {
        kill(hog, SIGKILL);
        waitpid(hog, NULL, 0);
    }
    print_message("%s T1/T2%s: %u batches (%u writes), %llu distinct guards seen, torn %llu, "
                  "decreasing %llu, unguarded %llu, writer %d\n",
                  under_test.label, with_hog ? " next to a CPU hog" : "", iterations,
                  3 * iterations, (unsigned long long)c->distinct, (unsigned long long)c->torn,
                  (unsigned long long)c->decreasing, (unsigned long long)c->unguarded, rc);
    target_close(&t);
    fail_ms = FAIL_MS;
    if (under_test.shim == NULL)
        assert_int_equal(rc, 0);
}

static void check_t1_t2(bool with_hog)
{
    struct t1_t2_counts c;
    run_t1_t2(with_hog, &c);
    assert_int_equal(c.last_guard, iterations);
    assert_true(c.distinct >= iterations / CHECKPOINT); /* the reader really ran alongside */
    assert_int_equal(c.torn, 0);
    assert_int_equal(c.decreasing, 0);
    assert_int_equal(c.unguarded, 0);
}

static void test_t1_t2_words_untorn_and_writes_in_order(void **state)
{
    (void)state;
    check_t1_t2(false);
}

static void test_t1_t2_hold_next_to_a_cpu_hog(void **state)
{
    (void)state;
    check_t1_t2(true);
}

/* ---- T3 ------------------------------------------------------------------- */

static uint8_t pattern(uint32_t round, uint32_t i)
{
    return (uint8_t)(round * 31 + i * 7 + 1);
}

/* Member 1: writes a pattern, waits for its completion, overwrites the
 * source at once, then writes a guard that tells member 0 to look. */
static int t3_writer(int index)
{
    (void)index;
    struct tp_endpoint *ep = open_ep(NULL);
    struct link l;
    if (ep == NULL || link_open(ep, 0, &l) != 0)
        return 2;
    void *base;
    struct tp_mr *mr;
    if (tp_mr_alloc(ep, T3_BYTES + 64, 0, &base, &mr) != 0)
        return 3;
    uint8_t *src = base;
    uint64_t *guard = (uint64_t *)(void *)(src + T3_BYTES);
    uint64_t done = 0;
    for (uint32_t round = 1; round <= T3_ROUNDS; round++) {
        for (uint32_t i = 0; i < T3_BYTES; i++)
            src[i] = pattern(round, i);
        struct tp_write data = {src, mr, l.rmr1, 0, T3_BYTES};
        if (post(ep, l.peer, &data, 1, TP_POST_SIGNALED, round, &done) != 0)
            return 4;
        /* The completion must name this batch: its cookie, its peer. */
        struct tp_event ev;
        int n;
        uint64_t deadline = sp_now_ns() + 60ull * 1000000000ull;
        while ((n = tp_poll(ep, &ev, 1)) == 0 && sp_now_ns() < deadline)
            tp_doorbell_wait(ep, tp_doorbell_arm(ep), 1);
        if (n != 1 || ev.type != TP_EVENT_WRITE_DONE || ev.cookie != round || ev.peer != l.peer)
            return 5;
        done++;
        memset(src, 0xee, T3_BYTES); /* reused as soon as T3 allows */
        *guard = round;
        struct tp_write g = {guard, mr, l.rmr1, T3_BYTES, 8};
        if (post(ep, l.peer, &g, 1, TP_POST_SIGNALED, 0, &done) != 0 || !reap(ep, &done, done + 1))
            return 6;
        if (!await(&shared->t3_ack, round))
            return 7;
    }
    await(&shared->release, 1);
    link_close(ep, &l);
    tp_mr_free(ep, mr);
    tp_close(ep);
    return 0;
}

static void test_t3_source_is_reusable_once_completed(void **state)
{
    (void)state;
    memset(shared, 0, sizeof *shared);
    struct member writer;
    spawn(&writer, 1, t3_writer); /* before our endpoint: see run_t1_t2 */
    struct target t;
    assert_int_equal(target_open(0, &t), 0);
    const uint8_t *data = (const uint8_t *)t.mem1;
    uint64_t mismatched = 0, checked = 0;
    for (uint32_t round = 1; round <= T3_ROUNDS; round++) {
        if (!await(&t.mem1[T3_BYTES / 8], round))
            break;
        for (uint32_t i = 0; i < T3_BYTES; i++)
            if (__atomic_load_n(&data[i], __ATOMIC_ACQUIRE) != pattern(round, i))
                mismatched++;
        checked++;
        store(&shared->t3_ack, round);
    }
    store(&shared->release, 1);
    assert_int_equal(join(&writer), 0);
    target_close(&t);
    print_message("%s T3: %llu rounds checked, %llu bytes differed from the completed write\n",
                  under_test.label, (unsigned long long)checked, (unsigned long long)mismatched);
    assert_int_equal(checked, T3_ROUNDS);
    assert_int_equal(mismatched, 0);
}

/* ---- doorbell --------------------------------------------------------------- */

/* Member 1: rings member 0 when it has armed, twice. */
static int doorbell_ringer(int index)
{
    (void)index;
    if (!await(&shared->ringer_go, 1)) /* nothing may wake the waiter before */
        return 2;
    struct tp_endpoint *ep = open_ep(NULL);
    struct link l;
    if (ep == NULL || link_open(ep, 0, &l) != 0)
        return 2;
    for (uint64_t round = 1; round <= 2; round++) {
        if (!await(&shared->armed, round))
            return 3;
        store(&shared->ringing, round);
        if (tp_doorbell_ring(l.peer) != 0)
            return 4;
        store(&shared->rung, round);
    }
    await(&shared->release, 1);
    link_close(ep, &l);
    tp_close(ep);
    return 0;
}

static void test_doorbell_is_never_lost_and_wakes_a_waiter(void **state)
{
    (void)state;
    memset(shared, 0, sizeof *shared);
    struct member ringer;
    spawn(&ringer, 1, doorbell_ringer); /* before our endpoint: see run_t1_t2 */
    struct target t;
    assert_int_equal(target_open(0, &t), 0);
    /* A ring of its own between arm and wait ends the wait at once. */
    uint64_t token = tp_doorbell_arm(t.ep);
    tp_doorbell_ring_self(t.ep);
    assert_int_equal(tp_doorbell_wait(t.ep, token, 30000), 0);
    /* Nobody rings: the wait times out. */
    token = tp_doorbell_arm(t.ep);
    assert_int_equal(tp_doorbell_wait(t.ep, token, 50), SPINDLE_ETIMEDOUT);

    store(&shared->ringer_go, 1);
    /* A peer rings while this member waits (a lost ring would time out
     * after 30 s and fail). */
    token = tp_doorbell_arm(t.ep);
    store(&shared->armed, 1);
    int woken = tp_doorbell_wait(t.ep, token, 30000);
    while (woken == 0 && load(&shared->ringing) < 1) /* woken before the peer rang */
        woken = tp_doorbell_wait(t.ep, tp_doorbell_arm(t.ep), 30000);
    assert_int_equal(woken, 0);
    /* A peer's ring between arm and wait is not lost either. */
    token = tp_doorbell_arm(t.ep);
    store(&shared->armed, 2);
    assert_true(await(&shared->rung, 2));
    assert_int_equal(tp_doorbell_wait(t.ep, token, 30000), 0);
    store(&shared->release, 1);
    assert_int_equal(join(&ringer), 0);
    target_close(&t);
}

/* ---- T4 ------------------------------------------------------------------- */

static int idle_target(int index)
{
    struct target t;
    int rc = target_open(index, &t);
    if (rc != 0)
        return rc;
    /* Sleeps between looks rather than yield: a spinning member would
     * starve its own progress thread, which returns the credits of the
     * writes T4 keeps posting to it. Bounded as await is. */
    uint64_t deadline = sp_now_ns() + 60ull * 1000000000ull;
    struct timespec look = {0, 1000000};
    while (load(&shared->release) < 1 && sp_now_ns() < deadline)
        nanosleep(&look, NULL);
    target_close(&t);
    return 0;
}

static void test_t4_killed_peer_is_reported_once_and_alone(void **state)
{
    (void)state;
    memset(shared, 0, sizeof *shared);
    fail_ms = T4_FAIL_MS;
    struct member b, c;
    spawn(&b, 1, idle_target);
    spawn(&c, 2, idle_target);
    struct tp_endpoint *ep = open_ep(NULL);
    assert_non_null(ep);
    struct link to_b, to_c;
    assert_int_equal(link_open(ep, 1, &to_b), 0);
    assert_int_equal(link_open(ep, 2, &to_c), 0);
    void *base;
    struct tp_mr *mr;
    assert_int_equal(tp_mr_alloc(ep, REGION, 0, &base, &mr), 0);
    memset(base, 0x5a, 64);
    assert_int_equal(tp_peer_state(to_b.peer), 0);

    kill_member(&b);
    uint64_t killed = sp_now_ns();
    int failed_b = 0, failed_c = 0, done_c = 0;
    uint64_t deadline = killed + (uint64_t)(T4_FAIL_MS + 10000) * 1000000ull;
    /* Keep writing to both: a peer that is written to must notice. */
    while (failed_b == 0 && sp_now_ns() < deadline) {
        struct tp_write w_b = {base, mr, to_b.rmr1, 0, 64}, w_c = {base, mr, to_c.rmr1, 0, 64};
        int rc = tp_post_writes(to_b.peer, &w_b, 1, TP_POST_SIGNALED, 1);
        assert_true(rc == 0 || rc == SPINDLE_EPEERFAILED || rc == SPINDLE_EAGAIN);
        rc = tp_post_writes(to_c.peer, &w_c, 1, TP_POST_SIGNALED, 2);
        assert_true(rc == 0 || rc == SPINDLE_EAGAIN);
        struct tp_event events[16];
        int n = tp_poll(ep, events, 16);
        for (int i = 0; i < n; i++) {
            if (events[i].type == TP_EVENT_PEER_FAILED) {
                failed_b += events[i].peer == to_b.peer;
                failed_c += events[i].peer == to_c.peer;
                assert_int_equal(events[i].error, SPINDLE_EPEERFAILED);
            } else if (events[i].peer == to_c.peer) {
                done_c++;
            }
        }
        tp_doorbell_wait(ep, tp_doorbell_arm(ep), 5);
    }
    uint64_t took_ms = (sp_now_ns() - killed) / 1000000u;
    print_message("%s T4: killed peer reported after %llu ms (failure timeout %d ms)\n",
                  under_test.label, (unsigned long long)took_ms, T4_FAIL_MS);
    assert_int_equal(failed_b, 1);
    assert_int_equal(failed_c, 0);
    assert_int_equal(tp_peer_state(to_b.peer), SPINDLE_EPEERFAILED);
    struct tp_write w_b = {base, mr, to_b.rmr1, 0, 8};
    assert_int_equal(tp_post_writes(to_b.peer, &w_b, 1, 0, 0), SPINDLE_EPEERFAILED);
    /* Reported once; the other peer goes on. */
    uint64_t until = sp_now_ns() + 200ull * 1000000ull;
    while (sp_now_ns() < until) {
        struct tp_write w_c = {base, mr, to_c.rmr1, 0, 64};
        int rc = tp_post_writes(to_c.peer, &w_c, 1, TP_POST_SIGNALED, 3);
        assert_true(rc == 0 || rc == SPINDLE_EAGAIN);
        struct tp_event events[16];
        int n = tp_poll(ep, events, 16);
        for (int i = 0; i < n; i++) {
            assert_false(events[i].type == TP_EVENT_PEER_FAILED);
            done_c += events[i].peer == to_c.peer;
        }
        tp_doorbell_wait(ep, tp_doorbell_arm(ep), 5);
    }
    assert_int_equal(tp_peer_state(to_c.peer), 0);
    assert_true(done_c > 0);
    store(&shared->release, 1);
    link_close(ep, &to_b);
    link_close(ep, &to_c);
    tp_mr_free(ep, mr);
    tp_close(ep);
    fail_ms = FAIL_MS;
    assert_int_equal(join(&c), 0);
    if (under_test.threads)
        join(&b); /* its thread returns once released */
}

/* ---- bad input -------------------------------------------------------------- */

static void test_bad_descriptors_and_ranges_are_refused(void **state)
{
    (void)state;
    memset(shared, 0, sizeof *shared);
    struct target t;
    assert_int_equal(target_open(0, &t), 0);
    struct tp_peer *peer = NULL;
    struct tp_desc garbage = {.len = 5, .bytes = "junk"};
    int rc = tp_connect(t.ep, &garbage, 1000, &peer);
    assert_true(rc == SPINDLE_EINVAL || rc == SPINDLE_EPROTO);
    assert_true(spindle_errmsg()[0] != '\0');
    /* A connection to itself: writes past the end of a region are refused. */
    struct link self;
    assert_int_equal(link_open(t.ep, 0, &self), 0);
    void *base;
    struct tp_mr *mr;
    assert_int_equal(tp_mr_alloc(t.ep, REGION, 0, &base, &mr), 0);
    struct tp_write too_far = {base, mr, self.rmr1, REGION - 4, 8};
    assert_int_equal(tp_post_writes(self.peer, &too_far, 1, 0, 0), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "exceeds"));
    assert_non_null(strstr(spindle_errmsg(), "4092"));
    assert_int_equal(tp_peer_state(self.peer), 0); /* refused, not failed */
    *(uint64_t *)base = 77;
    struct tp_write last = {base, mr, self.rmr1, REGION - 8, 8};
    uint64_t done = 0;
    assert_int_equal(post(t.ep, self.peer, &last, 1, TP_POST_SIGNALED, 1, &done), 0);
    assert_true(reap(t.ep, &done, 1));
    assert_true(await(&t.mem1[REGION / 8 - 1], 77));
    link_close(t.ep, &self);
    tp_mr_free(t.ep, mr);
    target_close(&t);
}

/* ---- the broken shims are caught ---------------------------------------- */

static void test_broken_shims_are_caught(void **state)
{
    (void)state;
    struct t1_t2_counts c;
    under_test.shim = broken_shim(BROKEN_TEARS);
    under_test.label = "shm-tearing";
    assert_int_equal(tp_backend_check(under_test.shim), 0);
    run_t1_t2(false, &c);
    assert_true(c.torn > 0);
    under_test.shim = broken_shim(BROKEN_REORDERS);
    under_test.label = "shm-reordering";
    assert_int_equal(tp_backend_check(under_test.shim), 0);
    run_t1_t2(false, &c);
    assert_true(c.unguarded + c.decreasing > 0);
}

/* ---- main -------------------------------------------------------------------- */

static int choose(const char *name)
{
    under_test.label = name;
    if (strcmp(name, "shm") == 0 || strcmp(name, "broken") == 0) {
        under_test.backend = "shm";
        return 0;
    }
    if (strncmp(name, "fabric:", 7) == 0) {
        under_test.backend = "fabric";
        under_test.provider = name + 7;
        if (strcmp(under_test.provider, "sockets") == 0)
            iterations = ITERATIONS / 4;
        return 0;
    }
#ifdef SPINDLE_HAVE_VERBS
    if (strcmp(name, "verbs-fake") == 0) {
        under_test.backend = "verbs";
        under_test.threads = true;
        fake_nic_install();
        return 0;
    }
#endif
    fprintf(stderr, "conformance: unknown or unbuilt backend '%s'\n", name);
    return -1;
}

int main(int argc, char **argv)
{
    if (argc != 2 || choose(argv[1]) != 0) {
        fprintf(stderr, "usage: %s shm|fabric:PROVIDER|verbs-fake|broken\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
        return 2;
    const struct CMUnitTest contract[] = {
        cmocka_unit_test(test_t1_t2_words_untorn_and_writes_in_order),
        cmocka_unit_test(test_t1_t2_hold_next_to_a_cpu_hog),
        cmocka_unit_test(test_t3_source_is_reusable_once_completed),
        cmocka_unit_test(test_doorbell_is_never_lost_and_wakes_a_waiter),
        cmocka_unit_test(test_t4_killed_peer_is_reported_once_and_alone),
        cmocka_unit_test(test_bad_descriptors_and_ranges_are_refused),
    };
    const struct CMUnitTest broken[] = {
        cmocka_unit_test(test_broken_shims_are_caught),
    };
    int failed = strcmp(argv[1], "broken") == 0
                     ? cmocka_run_group_tests_name("broken", broken, NULL, NULL)
                     : cmocka_run_group_tests_name(argv[1], contract, NULL, NULL);
#ifdef SPINDLE_HAVE_VERBS
    if (under_test.threads)
        fake_nic_uninstall();
#endif
    munmap(shared, sizeof *shared);
    return failed;
}
