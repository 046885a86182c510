/*
 * The predicate thread's scheduling policy (request_short_slice,
 * sst_thread.c): it runs under the policy of the thread that started it;
 * a real-time policy inherited that way is kept (it used to be replaced
 * by a normal thread's short slice), and a normal thread stays normal. The
 * real-time case needs the right to use SCHED_FIFO (root, CAP_SYS_NICE or
 * RLIMIT_RTPRIO) and is skipped without it.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sst/sst_impl.h"
#include "util/clock.h"

/* What the predicate thread reported from its trigger. */
struct seen {
    int policy;
    int priority;
    bool done;
};

static bool always(void *ctx)
{
    (void)ctx;
    return true;
}

static void record_policy(void *ctx)
{
    struct seen *seen = ctx;
    struct sched_param param;
    seen->policy = sched_getscheduler(0);
    seen->priority = sched_getparam(0, &param) == 0 ? param.sched_priority : -1;
    seen->done = true;
}

/* Starts an engine from the calling thread, lets its predicate thread
 * report its policy once, and stops it. */
static struct seen policy_of_predicate_thread(void)
{
    struct tp_config config = {.backend = "shm"};
    struct sst_engine *engine;
    assert_int_equal(sst_engine_create(&config, NULL, &engine), 0);
    struct seen seen = {.policy = -1, .priority = -1};
    assert_int_equal(
        sst_predicate_add(engine, always, record_policy, &seen, SST_PRED_ONE_TIME, NULL), 0);
    assert_int_equal(sst_engine_start(engine), 0);
    uint64_t deadline = sp_now_ns() + 10ull * 1000000000ull;
    bool done = false;
    while (!done && sp_now_ns() < deadline) {
        sst_engine_lock(engine);
        done = seen.done;
        sst_engine_unlock(engine);
        sched_yield();
    }
    sst_engine_stop(engine);
    sst_engine_destroy(engine);
    assert_true(done);
    return seen;
}

static void test_predicate_thread_keeps_an_inherited_realtime_policy(void **state)
{
    (void)state;
    int old_policy;
    struct sched_param old_param;
    assert_int_equal(pthread_getschedparam(pthread_self(), &old_policy, &old_param), 0);
    struct sched_param fifo = {.sched_priority = 1};
    int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &fifo);
    if (rc == EPERM)
        skip(); /* no right to a real-time policy here */
    assert_int_equal(rc, 0);
    struct seen seen = policy_of_predicate_thread();
    assert_int_equal(pthread_setschedparam(pthread_self(), old_policy, &old_param), 0);
    assert_int_equal(seen.policy, SCHED_FIFO);
    assert_int_equal(seen.priority, 1);
}

static void test_predicate_thread_of_a_normal_thread_stays_normal(void **state)
{
    (void)state;
    int policy;
    struct sched_param param;
    assert_int_equal(pthread_getschedparam(pthread_self(), &policy, &param), 0);
    if (policy != SCHED_OTHER)
        skip(); /* the test itself runs under another policy */
    struct seen seen = policy_of_predicate_thread();
    assert_int_equal(seen.policy, SCHED_OTHER);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_predicate_thread_keeps_an_inherited_realtime_policy),
        cmocka_unit_test(test_predicate_thread_of_a_normal_thread_stays_normal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
