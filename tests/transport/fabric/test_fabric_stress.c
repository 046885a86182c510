/*
 * fabric backend, T1/T2 stress across two processes on loopback for the
 * provider given as argv[1]: a writer process posts (data, guard) batches,
 * data being eight self-checking words and the guard a later, separate
 * write; the reader process polls its memory and counts torn words,
 * decreasing values and guards seen ahead of their data. Run once quietly
 * and once next to a CPU-hog process. Every count of violations must be 0.
 *
 * Budget per phase: SPINDLE_STRESS_WRITES writes (default 1000000) or
 * SPINDLE_STRESS_SECONDS seconds (default 9), whichever comes first.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/select.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "test_fabric_util.h"
#include "util/clock.h"

#define DATA_WORDS   8
#define GUARD_OFFSET 128
#define REGION_BYTES 4096

static const char *provider = "tcp";
static const struct tp_ops *ops;

/* value in the high half, its complement in the low half: any tear between
 * two values of different writes breaks the relation. */
static uint64_t encode(uint32_t value)
{
    return ((uint64_t)value << 32) | (uint32_t)~value;
}

static int decode(uint64_t word, uint32_t *value)
{
    if (word == 0) {
        *value = 0;
        return 1;
    }
    *value = (uint32_t)(word >> 32);
    return (uint32_t)word == (uint32_t) ~*value;
}

static uint64_t env_u64(const char *name, uint64_t fallback)
{
    const char *text = getenv(name);
    return text != NULL && *text ? strtoull(text, NULL, 10) : fallback;
}

struct handoff {
    struct tp_desc addr;
    struct tp_desc region;
};

/* Writer process: connects and posts batches until the budget runs out;
 * reports the number of batches through the pipe. */
static int writer_main(int in_fd, int out_fd, uint64_t max_writes, uint64_t seconds)
{
    struct handoff h;
    if (tf_read_all(in_fd, &h, sizeof h) != 0)
        return 2;
    struct tp_endpoint *ep = NULL;
    struct tp_peer *peer = NULL;
    struct tp_rmr *rmr = NULL;
    struct tp_mr *mr = NULL;
    void *mem = NULL;
    if (tf_open(provider, 1, 0, 10000, &ep) != 0 || ops->connect(ep, &h.addr, 10000, &peer) != 0 ||
        ops->rmr_import(peer, &h.region, &rmr) != 0 || ops->mr_alloc(ep, 4096, 0, &mem, &mr) != 0) {
        fprintf(stderr, "writer setup: %s\n", spindle_errmsg());
        return 3;
    }
    uint64_t *buf = mem;
    uint64_t deadline = sp_now_ns() + seconds * 1000000000ull;
    uint32_t batches = 0;
    while ((uint64_t)batches * 2 < max_writes && sp_now_ns() < deadline) {
        uint32_t value = batches + 1;
        for (int k = 0; k < DATA_WORDS; k++)
            buf[k] = encode(value);
        buf[DATA_WORDS] = encode(value);
        struct tp_write w[2] = {{buf, mr, rmr, 0, DATA_WORDS * 8},
                                {buf + DATA_WORDS, mr, rmr, GUARD_OFFSET, 8}};
        uint64_t token = ops->doorbell_arm(ep);
        int rc = ops->post_writes(peer, w, 2, 0, 0);
        if (rc == SPINDLE_EAGAIN) {
            ops->doorbell_wait(ep, token, 10);
            continue;
        }
        if (rc != 0) {
            fprintf(stderr, "writer post: %s\n", spindle_errmsg());
            return 4;
        }
        batches++;
    }
    ops->doorbell_ring(peer);
    if (tf_write_all(out_fd, &batches, sizeof batches) != 0)
        return 5;
    char done;
    tf_read_all(in_fd, &done, 1); /* the reader has seen the last guard */
    ops->close(ep);
    return 0;
}

struct verdict {
    uint64_t torn, decreasing, unguarded, checks;
    uint32_t last_guard;
};

static void check_once(const uint64_t *mem, struct verdict *v, uint32_t *last_data)
{
    uint32_t guard, data;
    if (!decode(__atomic_load_n(&mem[GUARD_OFFSET / 8], __ATOMIC_ACQUIRE), &guard)) {
        v->torn++;
        return;
    }
    if (guard < v->last_guard)
        v->decreasing++;
    v->last_guard = guard;
    for (int k = 0; k < DATA_WORDS; k++) {
        if (!decode(__atomic_load_n(&mem[k], __ATOMIC_ACQUIRE), &data)) {
            v->torn++;
            continue;
        }
        if (data < guard)
            v->unguarded++; /* the guard overtook its data (T2) */
        if (data < last_data[k])
            v->decreasing++;
        last_data[k] = data;
    }
    v->checks++;
}

static pid_t start_hog(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        volatile uint64_t spin = 0;
        for (;;)
            spin++;
    }
    return pid;
}

static void run_phase(int with_hog)
{
    uint64_t max_writes = env_u64("SPINDLE_STRESS_WRITES", 1000000);
    uint64_t seconds = env_u64("SPINDLE_STRESS_SECONDS", 9);
    int to_child[2], from_child[2];
    assert_int_equal(pipe(to_child), 0);
    assert_int_equal(pipe(from_child), 0);
    pid_t writer = fork();
    assert_true(writer >= 0);
    if (writer == 0) {
        close(to_child[1]);
        close(from_child[0]);
        _exit(writer_main(to_child[0], from_child[1], max_writes, seconds));
    }
    close(to_child[0]);
    close(from_child[1]);
    pid_t hog = with_hog ? start_hog() : 0;

    struct tp_endpoint *ep = NULL;
    struct tp_mr *mr = NULL;
    void *mem = NULL;
    struct handoff h;
    assert_int_equal(tf_open(provider, 0, 0, 10000, &ep), 0);
    assert_int_equal(ops->mr_alloc(ep, REGION_BYTES, TP_MR_REMOTE_WRITE, &mem, &mr), 0);
    assert_int_equal(ops->address(ep, &h.addr), 0);
    assert_int_equal(ops->mr_export(mr, &h.region), 0);
    assert_int_equal(tf_write_all(to_child[1], &h, sizeof h), 0);

    struct verdict v = {0};
    uint32_t last_data[DATA_WORDS] = {0};
    uint32_t batches = 0;
    int reported = 0;
    uint64_t start = sp_now_ns(), deadline = start + (seconds + 30) * 1000000000ull;
    while (sp_now_ns() < deadline) {
        for (int i = 0; i < 256; i++)
            check_once(mem, &v, last_data);
        if (!reported) {
            struct timeval tv = {0, 0};
            fd_set set;
            FD_ZERO(&set);
            FD_SET(from_child[0], &set);
            if (select(from_child[0] + 1, &set, NULL, NULL, &tv) == 1) {
                assert_int_equal(tf_read_all(from_child[0], &batches, sizeof batches), 0);
                reported = 1;
            }
        } else if (v.last_guard == batches) {
            break;
        }
    }
    double elapsed = (double)(sp_now_ns() - start) / 1e9;
    check_once(mem, &v, last_data);
    char done = 1;
    tf_write_all(to_child[1], &done, 1);
    int status = 0;
    waitpid(writer, &status, 0);
    if (hog > 0) {
        kill(hog, SIGKILL);
        waitpid(hog, NULL, 0);
    }
    print_message("%s%s: %u batches (%u writes) in %.1f s, %.0f writes/s, %" PRIu64
                  " reader checks: torn %" PRIu64 " decreasing %" PRIu64 " unguarded %" PRIu64 "\n",
                  provider, with_hog ? " + cpu hog" : "", batches, batches * 2, elapsed,
                  batches * 2 / elapsed, v.checks, v.torn, v.decreasing, v.unguarded);
    assert_true(reported);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(v.last_guard, batches);
    assert_true(batches > 1000);
    assert_int_equal(v.torn, 0);
    assert_int_equal(v.decreasing, 0);
    assert_int_equal(v.unguarded, 0);
    ops->mr_free(ep, mr);
    ops->close(ep);
    close(to_child[1]);
    close(from_child[0]);
}

static void test_guarded_writes_are_never_torn_or_reordered(void **state)
{
    (void)state;
    run_phase(0);
}

static void test_guarded_writes_hold_next_to_a_cpu_hog(void **state)
{
    (void)state;
    run_phase(1);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        provider = argv[1];
    tf_require_provider(provider);
    ops = tp_backend_find("fabric");
    if (ops == NULL) {
        fprintf(stderr, "FATAL: fabric backend not built: %s\n", spindle_errmsg());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guarded_writes_are_never_torn_or_reordered),
        cmocka_unit_test(test_guarded_writes_hold_next_to_a_cpu_hog),
    };
    return cmocka_run_group_tests_name(provider, tests, NULL, NULL);
}
