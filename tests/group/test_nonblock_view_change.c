/*
 * A non-blocking reserve outside every upcall never waits out a view
 * change (include/spindle/group.h, spindle_reserve; docs/DISPATCH.md),
 * with forked members on shm, a joiner held up at the leader:
 *  - dispatch mode: the leader's only dispatching thread, while the
 *    joiner's state_save waits in its queue (the change waits for that
 *    thread), gets SPINDLE_EAGAIN at once from a SPINDLE_RESERVE_NONBLOCK
 *    reserve instead of blocking until the state_save times out; once it
 *    dispatches, the state is saved, the view installed and send_ready
 *    comes through the descriptor;
 *  - default mode: while state_save runs on the membership thread (held
 *    until the reserve returned), the same reserve gets SPINDLE_EAGAIN;
 *    send_ready follows on the membership thread once the view is in.
 * Either way the retry made on send_ready succeeds in the joiner's view:
 * all three members deliver it.
 */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>

#include "test_ports.h"

#include <spindle/spindle.h>

#include "forked_members.h"

#define FAILURE_TIMEOUT_MS 10000
#define PAYLOAD            UINT64_C(0x5eed)

struct member {
    spindle_group_t *group;
    uint32_t self;
    struct counter delivered;
    struct counter saves;      /* leader: state_save calls begun */
    struct counter may_save;   /* leader: state_save returns once this is 1 */
    struct counter send_ready; /* leader: send_ready calls for subgroup 0 */
    uint32_t size_at_ready;    /* leader: the group's size when send_ready came */
    int bad;
};

static void on_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    struct member *s = ctx;
    for (size_t i = 0; i < n; i++) {
        uint64_t value = 0;
        if (m[i].length != sizeof value || m[i].sender_id != 0) {
            s->bad = 1;
            continue;
        }
        memcpy(&value, m[i].data, sizeof value);
        if (value != PAYLOAD)
            s->bad = 2;
    }
    counter_add(&s->delivered, n);
}

static void on_send_ready(void *ctx, uint32_t subgroup)
{
    struct member *s = ctx;
    if (subgroup != 0) {
        s->bad = 3;
        return;
    }
    s->size_at_ready = spindle_group_size(s->group);
    counter_add(&s->send_ready, 1);
}

static int on_save(void *ctx, void **data, size_t *length)
{
    struct member *s = ctx;
    counter_add(&s->saves, 1);
    if (!counter_wait(&s->may_save, 1))
        s->bad = 4;
    *data = NULL;
    *length = 0;
    return 0;
}

static int on_load(void *ctx, const void *data, size_t length)
{
    (void)ctx;
    (void)data;
    return length == 0 ? 0 : SPINDLE_EINVAL;
}

struct setup {
    char members[128];
    char contact[32], self[32];
    int start[2]; /* the leader writes a byte once the group of two is up */
    bool dispatch;
};

static uint64_t elapsed_ms(const struct timespec *since)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)(now.tv_sec - since->tv_sec) * 1000u +
           (uint64_t)((now.tv_nsec - since->tv_nsec) / 1000000L);
}

/* A non-blocking reserve while the join is under way: SPINDLE_EAGAIN at
 * once, saying why. */
static void reserve_meets_the_change(struct member *s, struct result *r)
{
    struct timespec before;
    clock_gettime(CLOCK_MONOTONIC, &before);
    void *slot;
    int rc = spindle_reserve(s->group, 0, sizeof(uint64_t), SPINDLE_RESERVE_NONBLOCK, &slot);
    uint64_t took = elapsed_ms(&before);
    CHECK(rc == SPINDLE_EAGAIN, "reserve during the join: %d", rc);
    CHECK(strstr(spindle_errmsg(), "view change") != NULL, "EAGAIN does not say why: %s",
          spindle_errmsg());
    CHECK(took < FAILURE_TIMEOUT_MS / 2, "the reserve waited %llu ms", (unsigned long long)took);
    r->eagain = 1;
}

/* Dispatch mode: the only dispatcher is this thread, so the join's
 * state_save waits for it, and with it the whole change. */
static void leader_dispatches_through_the_join(struct member *s, struct result *r)
{
    counter_add(&s->may_save, 1); /* state_save itself does not wait */
    int fd = spindle_group_fd(s->group);
    CHECK(fd >= 0, "fd");
    /* Nothing is sent and no view upcall is set: what makes the descriptor
     * readable is the joiner's state_save, queued once the group of two
     * wedged and delivered its trim. */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK(poll(&p, 1, 60000) == 1, "no state_save queued");
    reserve_meets_the_change(s, r);
    CHECK(counter_get(&s->saves) == 0, "state_save ran before this thread dispatched");
    /* Dispatch until send_ready says the new view takes messages. */
    while (counter_get(&s->send_ready) == 0) {
        CHECK(poll(&p, 1, 60000) == 1, "no send_ready after the view change");
        CHECK(spindle_dispatch(s->group, SPINDLE_DISPATCH_ALL) >= 0, "dispatch");
    }
}

/* The default mode: state_save runs on the membership thread, held until
 * this thread's reserve returned. */
static void leader_holds_state_save(struct member *s, struct result *r)
{
    CHECK(counter_wait(&s->saves, 1), "state_save never began");
    reserve_meets_the_change(s, r);
    counter_add(&s->may_save, 1);
    CHECK(counter_wait(&s->send_ready, 1), "no send_ready after the view change");
}

static void leader_sends_through_the_join(struct member *s, bool dispatch, int start_joiner,
                                          struct result *r)
{
    CHECK(write(start_joiner, "j", 1) == 1, "start the joiner");
    if (dispatch)
        leader_dispatches_through_the_join(s, r);
    else
        leader_holds_state_save(s, r);
    CHECK(counter_get(&s->saves) == 1, "state_save ran %llu times",
          (unsigned long long)counter_get(&s->saves));
    CHECK(s->size_at_ready == 3, "send_ready came in a view of %u", s->size_at_ready);
    void *slot;
    int rc = spindle_reserve(s->group, 0, sizeof(uint64_t), SPINDLE_RESERVE_NONBLOCK, &slot);
    CHECK(rc == 0, "reserve after send_ready: %d", rc);
    uint64_t value = PAYLOAD;
    memcpy(slot, &value, sizeof value);
    CHECK(spindle_commit(s->group, 0) == 0, "commit");
}

static int member_main(uint32_t self, const char *dir, void *arg)
{
    (void)dir;
    struct setup *setup = arg;
    static struct member s;
    s.self = self;
    counter_init(&s.delivered);
    counter_init(&s.saves);
    counter_init(&s.may_save);
    counter_init(&s.send_ready);
    join_wait_start(setup->start, self); /* the joiner, until the group of two is up */
    struct spindle_group_options o;
    options_for(&o, self, 2, self == 2 ? setup->self : setup->members);
    o.failure_timeout_ms = FAILURE_TIMEOUT_MS;
    o.bootstrap_timeout_ms = 30000;
    o.tolerate_failures = true;
    o.dispatch = setup->dispatch;
    o.deliver = on_deliver;
    o.deliver_ctx = &s;
    o.send_ready = on_send_ready;
    o.send_ready_ctx = &s;
    o.state_save = on_save;
    o.state_load = on_load;
    o.state_ctx = &s;
    if (self == 2)
        o.join = setup->contact;
    struct spindle_subgroup_config sg = {all_ids, 2, all_ids, 1, 8, 64, SPINDLE_MODE_ATOMIC};
    CHECK(spindle_group_create(&o, &sg, 1, &s.group) == 0, "create");
    struct result r = {0};
    if (self == 0) {
        leader_sends_through_the_join(&s, setup->dispatch, setup->start[1], &r);
        close(setup->start[1]);
    }
    pthread_t dispatcher;
    if (setup->dispatch)
        CHECK(pthread_create(&dispatcher, NULL, blocking_dispatcher, s.group) == 0, "dispatcher");
    CHECK(counter_wait(&s.delivered, 1), "the message sent after send_ready never came");
    r.delivered = counter_get(&s.delivered);
    CHECK(spindle_group_shutdown(s.group, 30000) == 0, "shutdown");
    if (setup->dispatch) {
        void *ended;
        pthread_join(dispatcher, &ended);
        CHECK((intptr_t)ended == SPINDLE_ESHUTDOWN, "dispatch ended with %d", (int)(intptr_t)ended);
    }
    CHECK(s.bad == 0, "bad %d", s.bad);
    spindle_group_destroy(s.group);
    report(&r);
    return 0;
}

static void run_join(bool dispatch)
{
    struct setup setup = {.dispatch = dispatch};
    join_addresses(setup.members, setup.contact, setup.self);
    assert_int_equal(pipe(setup.start), 0);
    struct result r[3];
    run_members(3, member_main, &setup, r);
    close(setup.start[0]);
    close(setup.start[1]);
    assert_int_equal(r[0].eagain, 1);
    for (int i = 0; i < 3; i++)
        assert_int_equal(r[i].delivered, 1); /* sent in the joiner's view */
}

static void test_nonblock_reserve_in_dispatch_mode_returns_eagain_during_a_join(void **state)
{
    (void)state;
    run_join(true);
}

static void test_nonblock_reserve_in_default_mode_returns_eagain_during_a_join(void **state)
{
    (void)state;
    run_join(false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nonblock_reserve_in_dispatch_mode_returns_eagain_during_a_join),
        cmocka_unit_test(test_nonblock_reserve_in_default_mode_returns_eagain_during_a_join),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
