/* Shared-memory backend: T1-T4 and the doorbell, with real processes. */
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
#include <unistd.h>

#include <cmocka.h>

#include "transport/transport.h"
#include "util/clock.h"
#include "util/error.h"

#define DATA_WORDS   8
#define GUARD_OFFSET 64
#define REGION_SIZE  4096
/* Every CHECKPOINT pairs the writer waits until the reader has seen its
 * latest guard, so the reader provably runs concurrently with the writes
 * (at least count / CHECKPOINT distinct observations) on any scheduler. */
#define CHECKPOINT 10000

static const struct tp_ops *ops;

static struct tp_endpoint *open_ep(int failure_timeout_ms)
{
    struct tp_config config = {.backend = "shm", .failure_timeout_ms = failure_timeout_ms};
    struct tp_endpoint *ep = NULL;
    assert_int_equal(ops->open(&config, &ep), 0);
    return ep;
}

/* Each data word carries g in its high half and ~g in its low half, so a
 * torn word is recognisable whatever the interleaving. */
static uint64_t encode(uint32_t g)
{
    return ((uint64_t)g << 32) | (uint32_t)~g;
}

static pid_t spawn_hog(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        volatile uint64_t spin = 0;
        for (;;)
            spin++;
    }
    return pid;
}

/* Child: streams data-then-guard writes for g = 1..count into the parent's
 * region, in batches of one to three pairs. */
static void writer_child(const struct tp_desc *address, const struct tp_desc *region,
                         uint32_t count, const uint64_t *reader_seen)
{
    struct tp_endpoint *ep = open_ep(1000);
    struct tp_peer *peer;
    struct tp_rmr *rmr;
    if (ops->connect(ep, address, 1000, &peer) != 0 || ops->rmr_import(peer, region, &rmr) != 0)
        _exit(3);
    void *local;
    struct tp_mr *mr;
    if (ops->mr_alloc(ep, REGION_SIZE, 0, &local, &mr) != 0)
        _exit(4);
    uint64_t *words = local;
    for (uint32_t g = 1; g <= count; g++) {
        for (int i = 0; i < DATA_WORDS; i++)
            words[i] = encode(g);
        words[DATA_WORDS] = g;
        struct tp_write batch[2] = {
            {words, mr, rmr, 0, DATA_WORDS * 8},
            {&words[DATA_WORDS], mr, rmr, GUARD_OFFSET, 8},
        };
        if (ops->post_writes(peer, batch, 2, 0, 0) != 0)
            _exit(5);
        if (g % CHECKPOINT == 0) {
            uint64_t deadline = sp_now_ns() + 30ull * 1000000000ull;
            while (__atomic_load_n(reader_seen, __ATOMIC_ACQUIRE) < g) {
                if (sp_now_ns() > deadline)
                    _exit(6);
                sched_yield();
            }
        }
    }
    _exit(0);
}

static void run_torn_and_order(bool with_hog)
{
    const uint32_t count = 1000000; /* two writes each: 2 million writes */
    struct tp_endpoint *ep = open_ep(1000);
    void *addr;
    struct tp_mr *mr;
    assert_int_equal(ops->mr_alloc(ep, REGION_SIZE, TP_MR_REMOTE_WRITE, &addr, &mr), 0);
    struct tp_desc address, region;
    assert_int_equal(ops->address(ep, &address), 0);
    assert_int_equal(ops->mr_export(mr, &region), 0);
    uint64_t *reader_seen =
        mmap(NULL, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(reader_seen != MAP_FAILED);
    *reader_seen = 0;
    pid_t hog = with_hog ? spawn_hog() : -1;
    pid_t writer = fork();
    if (writer == 0)
        writer_child(&address, &region, count, reader_seen);

    const uint64_t *words = addr;
    uint64_t torn = 0, decreasing = 0, unguarded = 0, distinct = 0, last_guard = 0;
    uint64_t deadline = sp_now_ns() + 60ull * 1000000000ull;
    while (last_guard < count && sp_now_ns() < deadline) {
        uint64_t guard = __atomic_load_n(&words[GUARD_OFFSET / 8], __ATOMIC_ACQUIRE);
        if (guard < last_guard)
            decreasing++;
        if (guard != last_guard)
            distinct++;
        for (int i = 0; i < DATA_WORDS; i++) {
            uint64_t word = __atomic_load_n(&words[i], __ATOMIC_ACQUIRE);
            uint32_t high = (uint32_t)(word >> 32);
            if (word != 0 && word != encode(high))
                torn++;
            else if (high < guard)
                unguarded++;
        }
        if (guard > last_guard) {
            last_guard = guard;
            __atomic_store_n(reader_seen, last_guard, __ATOMIC_RELEASE);
        }
    }
    int status;
    assert_int_equal(waitpid(writer, &status, 0), writer);
    if (hog > 0) {
        kill(hog, SIGKILL);
        waitpid(hog, NULL, 0);
    }
    print_message("shm T1/T2%s: %u pairs, %llu distinct guards seen, torn %llu, decreasing %llu, "
                  "unguarded %llu\n",
                  with_hog ? " with CPU hog" : "", count, (unsigned long long)distinct,
                  (unsigned long long)torn, (unsigned long long)decreasing,
                  (unsigned long long)unguarded);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(last_guard, count);
    assert_true(distinct >= count / CHECKPOINT);
    assert_int_equal(torn, 0);
    assert_int_equal(decreasing, 0);
    assert_int_equal(unguarded, 0);
    munmap(reader_seen, sizeof(uint64_t));
    ops->mr_free(ep, mr);
    ops->close(ep);
}

static void test_writes_are_untorn_and_ordered(void **state)
{
    (void)state;
    run_torn_and_order(false);
}

static void test_writes_are_untorn_and_ordered_under_cpu_hog(void **state)
{
    (void)state;
    run_torn_and_order(true);
}

/* True when process pid's main thread is blocked in futex(2). */
static bool blocked_in_futex(pid_t pid)
{
    char path[64], line[64] = "";
    snprintf(path, sizeof path, "/proc/%d/syscall", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    bool in_futex = fgets(line, sizeof line, f) != NULL && strncmp(line, "202 ", 4) == 0;
    fclose(f);
    return in_futex;
}

/* Child: publishes its address on a pipe, then sleeps on its doorbell and
 * reports 1 if woken, 0 on timeout, followed by the wait duration in us. */
static void test_ring_wakes_sleeping_peer(void **state)
{
    (void)state;
    int to_parent[2];
    assert_int_equal(pipe(to_parent), 0);
    pid_t child = fork();
    if (child == 0) {
        struct tp_endpoint *ep = open_ep(60000);
        struct tp_desc address;
        ops->address(ep, &address);
        uint64_t token = ops->doorbell_arm(ep);
        if (write(to_parent[1], &address, sizeof address) != sizeof address)
            _exit(2);
        int rc = ops->doorbell_wait(ep, token, 20000);
        /* A ring between arm and wait must not be lost: ring self, wait. */
        uint64_t token2 = ops->doorbell_arm(ep);
        ops->doorbell_ring_self(ep);
        uint64_t start = sp_now_ns();
        int rc2 = ops->doorbell_wait(ep, token2, 20000);
        bool immediate = rc2 == 0 && sp_now_ns() - start < 1000000000ull;
        _exit(rc == 0 && immediate ? 0 : 1);
    }
    struct tp_desc address;
    assert_int_equal(read(to_parent[0], &address, sizeof address), (ssize_t)sizeof address);
    struct tp_endpoint *ep = open_ep(60000);
    struct tp_peer *peer;
    assert_int_equal(ops->connect(ep, &address, 1000, &peer), 0);
    /* Ring only once the child is blocked in futex(2) (syscall 202 on
     * x86_64, read from /proc): a ring before it sleeps would end its wait
     * without a wake-up and prove nothing. Then one ring must wake it. */
    uint64_t start = sp_now_ns();
    while (!blocked_in_futex(child)) {
        assert_true(sp_now_ns() - start < 15ull * 1000000000ull);
        sched_yield();
    }
    struct tp_stats stats = {0};
    assert_int_equal(ops->doorbell_ring(peer), 0);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    ops->stats(ep, &stats);
    assert_true(stats.wakeups_sent >= 1);
    ops->close(ep);
}

static void test_killed_peer_is_reported(void **state)
{
    (void)state;
    const int timeout_ms = 300;
    int to_parent[2];
    assert_int_equal(pipe(to_parent), 0);
    pid_t child = fork();
    if (child == 0) {
        struct tp_endpoint *ep = open_ep(timeout_ms);
        void *addr;
        struct tp_mr *mr;
        struct tp_desc descs[2];
        ops->mr_alloc(ep, REGION_SIZE, TP_MR_REMOTE_WRITE, &addr, &mr);
        ops->address(ep, &descs[0]);
        ops->mr_export(mr, &descs[1]);
        if (write(to_parent[1], descs, sizeof descs) != sizeof descs)
            _exit(2);
        for (;;)
            pause();
    }
    struct tp_desc descs[2];
    assert_int_equal(read(to_parent[0], descs, sizeof descs), (ssize_t)sizeof descs);
    struct tp_endpoint *ep = open_ep(timeout_ms);
    struct tp_peer *peer;
    struct tp_rmr *rmr;
    assert_int_equal(ops->connect(ep, &descs[0], 1000, &peer), 0);
    assert_int_equal(ops->rmr_import(peer, &descs[1], &rmr), 0);
    assert_int_equal(ops->peer_state(peer), 0);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    uint64_t killed = sp_now_ns();
    struct tp_event event = {0};
    int got = 0;
    while (got == 0 && sp_now_ns() - killed < (uint64_t)(timeout_ms + 2000) * 1000000ull) {
        got = ops->poll(ep, &event, 1);
        if (got == 0)
            ops->doorbell_wait(ep, ops->doorbell_arm(ep), 10);
    }
    uint64_t elapsed_ms = (sp_now_ns() - killed) / 1000000ull;
    print_message("killed peer reported after %llu ms\n", (unsigned long long)elapsed_ms);
    assert_int_equal(got, 1);
    assert_int_equal(event.type, TP_EVENT_PEER_FAILED);
    assert_ptr_equal(event.peer, peer);
    assert_true(elapsed_ms <= (uint64_t)timeout_ms);
    assert_int_equal(ops->peer_state(peer), SPINDLE_EPEERFAILED);
    uint64_t word = 7;
    void *addr;
    struct tp_mr *mr;
    assert_int_equal(ops->mr_alloc(ep, REGION_SIZE, 0, &addr, &mr), 0);
    memcpy(addr, &word, sizeof word);
    struct tp_write write_one = {addr, mr, rmr, 0, 8};
    assert_int_equal(ops->post_writes(peer, &write_one, 1, 0, 0), SPINDLE_EPEERFAILED);
    assert_int_equal(ops->poll(ep, &event, 1), 0); /* reported once */
    ops->rmr_release(peer, rmr);
    ops->mr_free(ep, mr);
    ops->close(ep);
}

static void test_bad_descriptors_and_ranges_are_rejected(void **state)
{
    (void)state;
    struct tp_endpoint *ep = open_ep(1000);
    struct tp_peer *peer;
    struct tp_desc garbage = {.len = 5, .bytes = "junk"};
    assert_int_equal(ops->connect(ep, &garbage, 100, &peer), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "length 5"));

    struct tp_desc address;
    assert_int_equal(ops->address(ep, &address), 0);
    struct tp_desc wrong_magic = address;
    wrong_magic.bytes[0] ^= 0xff;
    assert_int_equal(ops->connect(ep, &wrong_magic, 100, &peer), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "magic"));

    struct tp_desc no_such_pid = address;
    int32_t pid = 0x3ffffe; /* above the default pid_max */
    memcpy(no_such_pid.bytes + 16, &pid, sizeof pid);
    assert_int_equal(ops->connect(ep, &no_such_pid, 100, &peer), SPINDLE_EUNREACH);
    assert_non_null(strstr(spindle_errmsg(), "4194302"));

    /* Loopback connection to ourselves: writes beyond the region fail. */
    void *addr;
    struct tp_mr *mr;
    struct tp_rmr *rmr;
    struct tp_desc region;
    assert_int_equal(ops->mr_alloc(ep, REGION_SIZE, TP_MR_REMOTE_WRITE, &addr, &mr), 0);
    assert_int_equal(ops->mr_export(mr, &region), 0);
    assert_int_equal(ops->connect(ep, &address, 100, &peer), 0);
    assert_int_equal(ops->rmr_import(peer, &region, &rmr), 0);
    struct tp_write too_far = {addr, mr, rmr, REGION_SIZE - 4, 8};
    assert_int_equal(ops->post_writes(peer, &too_far, 1, 0, 0), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "offset 4092"));
    struct tp_write fine = {addr, mr, rmr, REGION_SIZE - 8, 8};
    assert_int_equal(ops->post_writes(peer, &fine, 1, TP_POST_SIGNALED, 42), 0);
    struct tp_event event;
    assert_int_equal(ops->poll(ep, &event, 1), 1);
    assert_int_equal(event.type, TP_EVENT_WRITE_DONE);
    assert_int_equal(event.cookie, 42);
    ops->rmr_release(peer, rmr);
    ops->mr_free(ep, mr);
    ops->close(ep);
}

static int setup(void **state)
{
    (void)state;
    ops = tp_backend_find("shm");
    return ops == NULL ? -1 : 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writes_are_untorn_and_ordered),
        cmocka_unit_test(test_writes_are_untorn_and_ordered_under_cpu_hog),
        cmocka_unit_test(test_ring_wakes_sleeping_peer),
        cmocka_unit_test(test_killed_peer_is_reported),
        cmocka_unit_test(test_bad_descriptors_and_ranges_are_rejected),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
