/*
 * fabric backend, T4: a killed peer and a silent (stopped) peer each surface
 * as TP_EVENT_PEER_FAILED within the failure timeout, and a silent peer
 * never makes the writer block or queue without bound (credits run out and
 * posts are refused); a writer stopped together with its peer does not take
 * the peer for failed once both run again. Provider from argv[1].
 */
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_fabric_util.h"
#include "util/clock.h"

#define FAIL_MS 1500

static const char *provider = "tcp";

struct handoff {
    struct tp_desc addr;
    struct tp_desc region;
};

/* Child: opens an endpoint with a region, hands both over, connects back,
 * then waits to be killed. */
static int target_main(int in_fd, int out_fd)
{
    struct tp_endpoint *ep = NULL;
    struct tp_mr *mr = NULL;
    void *mem = NULL;
    struct handoff mine, theirs;
    if (tf_open(provider, 1, 0, FAIL_MS, &ep) != 0 ||
        tp_mr_alloc(ep, 1 << 20, TP_MR_REMOTE_WRITE, &mem, &mr) != 0 ||
        tp_address(ep, &mine.addr) != 0 || tp_mr_export(mr, &mine.region) != 0)
        return 2;
    if (tf_write_all(out_fd, &mine, sizeof mine) != 0 ||
        tf_read_all(in_fd, &theirs, sizeof theirs) != 0)
        return 3;
    struct tp_peer *back = NULL;
    if (tp_connect(ep, &theirs.addr, 10000, &back) != 0)
        return 4;
    char ready = 1;
    tf_write_all(out_fd, &ready, 1);
    for (;;)
        pause();
}

struct scene {
    pid_t child;
    struct tp_endpoint *ep;
    struct tp_peer *peer;
    struct tp_rmr *rmr;
    struct tp_mr *src_mr;
    void *src;
    int to_child, from_child;
};

static void scene_open(struct scene *s)
{
    int to_child[2], from_child[2];
    assert_int_equal(pipe(to_child), 0);
    assert_int_equal(pipe(from_child), 0);
    s->child = fork();
    assert_true(s->child >= 0);
    if (s->child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed assertion leaves no target behind */
        close(to_child[1]);
        close(from_child[0]);
        _exit(target_main(to_child[0], from_child[1]));
    }
    close(to_child[0]);
    close(from_child[1]);
    s->to_child = to_child[1];
    s->from_child = from_child[0];
    struct handoff theirs, mine;
    assert_int_equal(tf_open(provider, 0, 0, FAIL_MS, &s->ep), 0);
    assert_int_equal(tp_address(s->ep, &mine.addr), 0);
    assert_int_equal(tf_read_all(s->from_child, &theirs, sizeof theirs), 0);
    assert_int_equal(tf_write_all(s->to_child, &mine, sizeof mine), 0);
    assert_int_equal(tp_connect(s->ep, &theirs.addr, 10000, &s->peer), 0);
    assert_int_equal(tp_rmr_import(s->peer, &theirs.region, &s->rmr), 0);
    assert_int_equal(tp_mr_alloc(s->ep, 4096, 0, &s->src, &s->src_mr), 0);
    char ready;
    assert_int_equal(tf_read_all(s->from_child, &ready, 1), 0);
}

static void scene_close(struct scene *s)
{
    kill(s->child, SIGKILL);
    waitpid(s->child, NULL, 0);
    tp_rmr_release(s->peer, s->rmr);
    tp_close(s->ep);
    close(s->to_child);
    close(s->from_child);
}

/* Waits for PEER_FAILED on s->peer; returns the milliseconds it took. */
static double wait_failure(struct scene *s, uint64_t since, int limit_ms)
{
    uint64_t deadline = since + (uint64_t)limit_ms * 1000000ull;
    while (sp_now_ns() < deadline) {
        uint64_t token = tp_doorbell_arm(s->ep);
        struct tp_event ev[8];
        int n = tp_poll(s->ep, ev, 8);
        assert_true(n >= 0);
        for (int i = 0; i < n; i++)
            if (ev[i].type == TP_EVENT_PEER_FAILED && ev[i].peer == s->peer) {
                assert_int_equal(ev[i].error, SPINDLE_EPEERFAILED);
                return (double)(sp_now_ns() - since) / 1e6;
            }
        tp_doorbell_wait(s->ep, token, 50);
    }
    return -1;
}

static void test_killed_peer_is_reported_failed(void **state)
{
    (void)state;
    struct scene s;
    scene_open(&s);
    struct tp_write w = {s.src, s.src_mr, s.rmr, 0, 64};
    assert_int_equal(tp_post_writes(s.peer, &w, 1, TP_POST_SIGNALED, 1), 0);
    assert_int_equal(tp_peer_state(s.peer), 0);
    uint64_t t0 = sp_now_ns();
    kill(s.child, SIGKILL);
    waitpid(s.child, NULL, 0);
    double ms = wait_failure(&s, t0, FAIL_MS * 3);
    print_message("%s: killed peer reported after %.1f ms (timeout %d ms)\n", provider, ms,
                  FAIL_MS);
    assert_true(ms >= 0);
    assert_true(ms <= FAIL_MS + 1000);
    assert_int_equal(tp_peer_state(s.peer), SPINDLE_EPEERFAILED);
    assert_non_null(strstr(spindle_errmsg(), "member 1"));
    assert_int_equal(tp_post_writes(s.peer, &w, 1, 0, 0), SPINDLE_EPEERFAILED);
    scene_close(&s);
}

static void test_silent_peer_is_bounded_then_reported_failed(void **state)
{
    (void)state;
    struct scene s;
    scene_open(&s);
    kill(s.child, SIGSTOP);
    int status = 0;
    assert_int_equal(waitpid(s.child, &status, WUNTRACED), s.child); /* really stopped */
    assert_true(WIFSTOPPED(status));
    uint64_t t0 = sp_now_ns();
    /* Posting to a stopped peer must be refused once credits are gone. */
    uint64_t accepted = 0;
    int refused = 0;
    for (int i = 0; i < 100000 && !refused; i++) {
        struct tp_write w = {s.src, s.src_mr, s.rmr, (uint64_t)(i % 64) * 64, 64};
        int rc = tp_post_writes(s.peer, &w, 1, 0, 0);
        if (rc == SPINDLE_EAGAIN)
            refused = 1;
        else
            assert_int_equal(rc, 0);
        accepted += rc == 0;
    }
    print_message("%s: %" PRIu64 " writes accepted before credits ran out\n", provider, accepted);
    assert_true(refused);
    assert_true(accepted < 20000);
    double ms = wait_failure(&s, t0, FAIL_MS * 4);
    print_message("%s: silent peer reported after %.1f ms (timeout %d ms)\n", provider, ms,
                  FAIL_MS);
    assert_true(ms >= FAIL_MS * 0.9);
    assert_true(ms <= FAIL_MS + 2000);
    assert_int_equal(tp_peer_state(s.peer), SPINDLE_EPEERFAILED);
    kill(s.child, SIGCONT);
    scene_close(&s);
}

/* Sleeps ms milliseconds (the length of a simulated stop, not a wait for
 * anything). */
static void pause_ms(long ms)
{
    struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) != 0) {
    }
}

/* This whole process and its peer stop together (a machine so loaded that
 * neither runs) for longer than the failure timeout while a write is
 * outstanding; this process resumes first. Its progress thread was not
 * running either: the credit the peer could not return meanwhile is no
 * evidence against the peer, which returns it once it runs again. */
static void test_writer_stopped_with_its_peer_does_not_fail_it(void **state)
{
    (void)state;
    struct scene s;
    scene_open(&s);
    kill(s.child, SIGSTOP);
    int status = 0;
    assert_int_equal(waitpid(s.child, &status, WUNTRACED), s.child);
    assert_true(WIFSTOPPED(status));
    struct tp_write w = {s.src, s.src_mr, s.rmr, 0, 64};
    assert_int_equal(tp_post_writes(s.peer, &w, 1, 0, 0), 0); /* outstanding: the peer is stopped */
    pid_t parent = getpid(), target = s.child;
    pid_t stopper = fork();
    assert_true(stopper >= 0);
    if (stopper == 0) {
        kill(parent, SIGSTOP);
        pause_ms(FAIL_MS + 300);
        kill(parent, SIGCONT);
        pause_ms(300);
        kill(target, SIGCONT);
        _exit(0);
    }
    assert_int_equal(waitpid(stopper, &status, 0), stopper);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    double ms = wait_failure(&s, sp_now_ns(), FAIL_MS + 500);
    print_message("%s: peer failed %.1f ms after both resumed (-1: never)\n", provider, ms);
    assert_true(ms < 0);
    assert_int_equal(tp_peer_state(s.peer), 0);
    scene_close(&s);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        provider = argv[1];
    tf_require_provider(provider);
    if (tp_backend_find("fabric") == NULL) {
        fprintf(stderr, "FATAL: fabric backend not built: %s\n", spindle_errmsg());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_killed_peer_is_reported_failed),
        cmocka_unit_test(test_silent_peer_is_bounded_then_reported_failed),
        cmocka_unit_test(test_writer_stopped_with_its_peer_does_not_fail_it),
    };
    return cmocka_run_group_tests_name(provider, tests, NULL, NULL);
}
