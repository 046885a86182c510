/*
 * Sending from inside an upcall (include/spindle/group.h, "Upcalls";
 * docs/DISPATCH.md), with forked members on shm: request/reply answered
 * from inside the delivery upcall, three replies per request through a
 * reply window of two, in the default mode (the predicate thread, engine
 * lock held) and in dispatch mode (the dispatching thread): the reply's
 * reserve returns SPINDLE_EAGAIN (asserted) instead of waiting, send_ready
 * sends the rest, every reply arrives in order, and the calls that would
 * wait for the upcall's thread refuse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <spindle/spindle.h>

#include "forked_members.h"

/* ---- request/reply from inside the upcall ---------------------------------- */

#define REQUESTS 300
#define PARTS    3 /* replies per request: more than the reply window */

struct rr_member {
    spindle_group_t *group;
    uint32_t self;
    bool dispatch;
    /* member 1: replies owed and sent */
    uint64_t owed, sent, eagain;
    bool refused_checked;
    int bad;
    struct counter done; /* member 0: replies received; member 1: replies sent */
    uint64_t next_request;
};

/* Member 1 sends what it owes, until the window is full. */
static void rr_answer(struct rr_member *s)
{
    while (s->sent < s->owed) {
        uint64_t reply[2] = {s->sent / PARTS, s->sent % PARTS};
        int rc =
            spindle_send(__atomic_load_n(&s->group, __ATOMIC_ACQUIRE), 1, reply, sizeof reply, 0);
        if (rc == SPINDLE_EAGAIN) {
            s->eagain++; /* kept: sent from a later upcall */
            return;
        }
        if (rc != 0) {
            fprintf(stderr, "reply %llu: %d %s\n", (unsigned long long)s->sent, rc,
                    spindle_errmsg());
            s->bad = 10;
            return;
        }
        s->sent++;
        counter_add(&s->done, 1);
    }
}

static void rr_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    struct rr_member *s = ctx;
    spindle_group_t *group = __atomic_load_n(&s->group, __ATOMIC_ACQUIRE);
    if (group == NULL) {
        s->bad = 16; /* the barrier after create orders this */
        return;
    }
    if (!s->refused_checked) {
        /* Calls that would wait for this thread say so. */
        s->refused_checked = true;
        if (spindle_flush(group, 0) != SPINDLE_EINVAL ||
            spindle_barrier(group, 0) != SPINDLE_EINVAL ||
            strstr(spindle_errmsg(), "inside an upcall") == NULL)
            s->bad = 11;
        struct spindle_stats st;
        if (spindle_group_stats(group, &st) != 0)
            s->bad = 12;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t value[2];
        memcpy(value, m[i].data, sizeof value);
        if (m[i].subgroup == 0 && s->self == 1) {
            if (value[0] != s->next_request++)
                s->bad = 13;
            s->owed += PARTS;
        } else if (m[i].subgroup == 1 && s->self == 0) {
            uint64_t k = counter_get(&s->done);
            if (value[0] != k / PARTS || value[1] != k % PARTS)
                s->bad = 14;
            counter_add(&s->done, 1);
        }
    }
    if (s->self == 1)
        rr_answer(s);
}

/* A full window has a free slot again: send what is still owed. */
static void rr_send_ready(void *ctx, uint32_t subgroup)
{
    struct rr_member *s = ctx;
    if (subgroup != 1 || s->self != 1)
        s->bad = 15;
    rr_answer(s);
}

static int rr_member_main(uint32_t self, const char *dir, void *arg)
{
    static struct rr_member s;
    s.self = self;
    s.dispatch = *(const bool *)arg;
    counter_init(&s.done);
    struct spindle_group_options o;
    options_for(&o, self, 2, dir);
    o.dispatch = s.dispatch;
    o.deliver = rr_deliver;
    o.deliver_ctx = &s;
    o.send_ready = rr_send_ready;
    o.send_ready_ctx = &s;
    static const uint32_t first[] = {0}, second[] = {1};
    struct spindle_subgroup_config sg[2] = {
        {all_ids, 2, first, 1, 8, 64, SPINDLE_MODE_ATOMIC},  /* requests */
        {all_ids, 2, second, 1, 2, 64, SPINDLE_MODE_ATOMIC}, /* replies: a window of 2 */
    };
    spindle_group_t *group;
    CHECK(spindle_group_create(&o, sg, 2, &group) == 0, "create");
    /* Upcalls may run before create returns: the handle is theirs once
     * every member holds it (requests are sent after the barrier). */
    __atomic_store_n(&s.group, group, __ATOMIC_RELEASE);
    CHECK(spindle_barrier(group, 20000) == 0, "barrier");
    pthread_t dispatcher;
    if (s.dispatch)
        CHECK(pthread_create(&dispatcher, NULL, blocking_dispatcher, group) == 0, "thread");
    if (self == 0)
        for (uint64_t i = 0; i < REQUESTS; i++) {
            uint64_t request[2] = {i, 0};
            CHECK(spindle_send(group, 0, request, sizeof request, 0) == 0, "request");
        }
    CHECK(counter_wait(&s.done, REQUESTS * PARTS), "%s: %llu of %u replies",
          self == 0 ? "received" : "sent", (unsigned long long)counter_get(&s.done),
          REQUESTS * PARTS);
    CHECK(spindle_group_shutdown(group, 30000) == 0, "shutdown");
    if (s.dispatch) {
        void *ended;
        pthread_join(dispatcher, &ended);
        CHECK((intptr_t)ended == SPINDLE_ESHUTDOWN, "dispatch ended with %d", (int)(intptr_t)ended);
    }
    CHECK(s.bad == 0, "bad %d", s.bad);
    spindle_group_destroy(group);
    struct result r = {.eagain = s.eagain, .delivered = counter_get(&s.done)};
    report(&r);
    return 0;
}

static void request_reply(bool dispatch)
{
    struct result r[2];
    run_members(2, rr_member_main, &dispatch, r);
    assert_int_equal(r[0].delivered, REQUESTS * PARTS);
    assert_int_equal(r[1].delivered, REQUESTS * PARTS);
    /* The third reply of one upcall met a window of two still in use. */
    assert_true(r[1].eagain > 0);
}

static void test_replies_from_the_predicate_thread_meet_eagain_not_deadlock(void **state)
{
    (void)state;
    request_reply(false);
}

static void test_replies_from_the_dispatching_thread_meet_eagain_not_deadlock(void **state)
{
    (void)state;
    request_reply(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replies_from_the_predicate_thread_meet_eagain_not_deadlock),
        cmocka_unit_test(test_replies_from_the_dispatching_thread_meet_eagain_not_deadlock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
