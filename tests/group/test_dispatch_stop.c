/*
 * Dispatch mode, a member that stops on its own (include/spindle/group.h,
 * spindle_group_fd; docs/DISPATCH.md): its descriptor becomes readable the
 * moment it stops, though nothing is queued, so an event loop needs no
 * timer to learn of it. Forked members on shm: members 1 and 2 vanish
 * (exit without leaving) once the group is up; member 0, alone of three,
 * stops with SPINDLE_EMINORITY when it finds them gone. Nobody sends, and
 * no view is installed, so nothing but the stop can make its descriptor
 * readable: poll must return well before its bound, spindle_dispatch then
 * returns the error, and a thread blocked in SPINDLE_DISPATCH_BLOCKING
 * returns it too.
 */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>

#include <spindle/spindle.h>

#include "forked_members.h"

#define POLL_BOUND_MS 30000 /* far beyond the failure timeout: only a missing wake-up hits it */

static int minority_member_main(uint32_t self, const char *dir, void *arg)
{
    (void)arg;
    struct spindle_group_options o;
    options_for(&o, self, 3, dir);
    o.tolerate_failures = true;
    o.failure_timeout_ms = 500;
    o.dispatch = true;
    struct spindle_subgroup_config sg = {all_ids, 3, all_ids, 3, 4, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *group = NULL;
    CHECK(spindle_group_create(&o, &sg, 1, &group) == 0, "create");
    /* Everyone is up before anyone goes. */
    CHECK(spindle_barrier(group, 30000) == 0, "barrier");
    struct result r = {0};
    if (self != 0) {
        report(&r);
        _exit(0); /* a failure, not a leave: no shutdown, no destroy */
    }
    pthread_t blocked;
    CHECK(pthread_create(&blocked, NULL, blocking_dispatcher, group) == 0, "dispatcher");
    struct pollfd p = {.fd = spindle_group_fd(group), .events = POLLIN};
    int ready = poll(&p, 1, POLL_BOUND_MS);
    CHECK(ready == 1, "poll returned %d within %d ms; the status is %d", ready, POLL_BOUND_MS,
          spindle_group_status(group));
    CHECK(spindle_group_status(group) == SPINDLE_EMINORITY, "status %d",
          spindle_group_status(group));
    int rc = spindle_dispatch(group, SPINDLE_DISPATCH_ALL);
    CHECK(rc == SPINDLE_EMINORITY, "dispatch returned %d", rc);
    void *blocked_rc = NULL;
    pthread_join(blocked, &blocked_rc);
    CHECK((intptr_t)blocked_rc == SPINDLE_EMINORITY, "the blocking dispatcher returned %d",
          (int)(intptr_t)blocked_rc);
    /* Still readable: level-triggered, the stop does not go away. */
    CHECK(poll(&p, 1, 0) == 1, "the descriptor went quiet after the stop");
    spindle_group_destroy(group);
    report(&r);
    return 0;
}

static void test_a_member_in_a_minority_wakes_its_loop_at_once(void **state)
{
    (void)state;
    struct result r[3];
    run_members(3, minority_member_main, NULL, r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_member_in_a_minority_wakes_its_loop_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
