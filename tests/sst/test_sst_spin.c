/*
 * The predicate thread's spin policy (sst_spin_ns, sst_thread.c): with CPUs
 * to spare it spins the full spin_us; with two or three it spins at most a
 * few microseconds, and not at all once its posts rang a peer, whose answer
 * is a wake-up away and who needs one of those CPUs now; on one CPU never.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sst/sst_impl.h"

static void test_thread_that_rang_peers_on_few_cpus_sleeps_without_spinning(void **state)
{
    (void)state;
    /* Few CPUs: a brief spin, none after ringing. */
    assert_int_equal(sst_spin_ns(2, 50, false), SST_SPIN_BRIEF_NS);
    assert_int_equal(sst_spin_ns(3, 50, false), SST_SPIN_BRIEF_NS);
    assert_int_equal(sst_spin_ns(2, 2, false), 2000);
    assert_int_equal(sst_spin_ns(2, 50, true), 0);
    assert_int_equal(sst_spin_ns(3, 50, true), 0);
    /* One CPU: never. */
    assert_int_equal(sst_spin_ns(1, 50, false), 0);
    /* CPUs to spare: the full spin either way. */
    assert_int_equal(sst_spin_ns(4, 50, false), 50000);
    assert_int_equal(sst_spin_ns(8, 50, true), 50000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thread_that_rang_peers_on_few_cpus_sleeps_without_spinning),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
