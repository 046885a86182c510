/*
 * Dispatch mode (include/spindle/group.h, "Upcalls"; docs/DISPATCH.md),
 * with forked members on shm (sends from inside upcalls:
 * test_upcall_send.c):
 *  - an epoll loop takes every delivery on its own thread through the
 *    group's descriptor, each message once and in the same order at every
 *    member, and the descriptor says so once the member shut down;
 *  - a slow dispatcher with a small queue, atomic and unordered: the
 *    queue never passes its bound, the sender meets a full window
 *    (SPINDLE_EAGAIN, then waits), nothing is lost;
 *  - a member that leaves: the survivors take the view through dispatch,
 *    after every message of the old view and before every one of the new;
 *    with a full queue the trim is queued whole, past the bound;
 *  - a joiner's state is saved through dispatch, in order with upcalls.
 * And in one process: the errors of the dispatch calls.
 */
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>

#include "test_ports.h"

#include <spindle/spindle.h>

#include "forked_members.h"

/* ---- an epoll loop ------------------------------------------------------ */

#define LOOP_MESSAGES 3000

struct loop_member {
    spindle_group_t *group;
    uint32_t self;
    pthread_t loop_thread;
    uint64_t next_index[MAX_MEMBERS];
    uint64_t hash, count;
    int bad;
};

static void loop_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    struct loop_member *s = ctx;
    if (!pthread_equal(pthread_self(), s->loop_thread))
        s->bad = 1; /* not on the dispatching thread */
    for (size_t i = 0; i < n; i++) {
        uint64_t payload[2];
        if (m[i].sender_id >= MAX_MEMBERS || m[i].length != sizeof payload) {
            s->bad = 2;
            continue;
        }
        memcpy(payload, m[i].data, sizeof payload);
        /* Once each, in each sender's order, and the payload intact. */
        if (m[i].sender_index != s->next_index[m[i].sender_id] || payload[0] != m[i].sender_id ||
            payload[1] != m[i].sender_index)
            s->bad = 3;
        s->next_index[m[i].sender_id]++;
        s->hash = mix(mix(s->hash, m[i].sender_id), m[i].sender_index);
        s->count++;
    }
}

static void *loop_sender(void *arg)
{
    struct loop_member *s = arg;
    for (uint64_t i = 0; i < LOOP_MESSAGES; i++) {
        uint64_t payload[2] = {s->self, i};
        CHECK(spindle_send(s->group, 0, payload, sizeof payload, 0) == 0, "send %llu",
              (unsigned long long)i);
    }
    return NULL;
}

static int loop_member_main(uint32_t self, const char *dir, void *arg)
{
    (void)arg;
    static struct loop_member s;
    s.self = self;
    s.hash = 0xcbf29ce484222325ull;
    s.loop_thread = pthread_self();
    struct spindle_group_options o;
    options_for(&o, self, 3, dir);
    o.dispatch = true;
    o.dispatch_queue_bytes = 64 << 10; /* small: the loop lags, senders wait */
    o.deliver = loop_deliver;
    o.deliver_ctx = &s;
    struct spindle_subgroup_config sg = {all_ids, 3, all_ids, 3, 16, 64, SPINDLE_MODE_ATOMIC};
    CHECK(spindle_group_create(&o, &sg, 1, &s.group) == 0, "create");
    int fd = spindle_group_fd(s.group);
    CHECK(fd >= 0, "fd");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event event = {.events = EPOLLIN};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &event) == 0, "epoll_ctl");
    pthread_t sender;
    CHECK(pthread_create(&sender, NULL, loop_sender, &s) == 0, "sender thread");
    while (s.count < 3 * LOOP_MESSAGES) {
        struct epoll_event got;
        int ready = epoll_wait(ep, &got, 1, 20000);
        CHECK(ready == 1, "epoll_wait: nothing within 20 s at %llu", (unsigned long long)s.count);
        /* Readable means something is queued: a dispatch runs it. */
        int ran = spindle_dispatch(s.group, SPINDLE_DISPATCH_ALL);
        CHECK(ran > 0, "dispatch after readable: %d", ran);
    }
    pthread_join(sender, NULL);
    CHECK(s.bad == 0, "deliveries: %d", s.bad);
    CHECK(spindle_group_shutdown(s.group, 20000) == 0, "shutdown");
    /* Stopped: readable, and dispatch says why. */
    struct epoll_event got;
    CHECK(epoll_wait(ep, &got, 1, 5000) == 1, "readable after shutdown");
    CHECK(spindle_dispatch(s.group, SPINDLE_DISPATCH_ALL) == SPINDLE_ESHUTDOWN, "ESHUTDOWN");
    CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL) == 0, "epoll_ctl del");
    close(ep);
    spindle_group_destroy(s.group);
    struct result r = {.hash = s.hash, .delivered = s.count};
    report(&r);
    return 0;
}

static void test_an_epoll_loop_takes_each_message_once_in_one_order(void **state)
{
    (void)state;
    struct result r[3];
    run_members(3, loop_member_main, NULL, r);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(r[i].delivered, 3 * LOOP_MESSAGES);
        assert_true(r[i].hash == r[0].hash);
    }
}

/* ---- a slow dispatcher with a small queue --------------------------------- */

#define SLOW_MESSAGES 1500
#define SLOW_PAYLOAD  1024
#define SLOW_QUEUE    (8 * (SPINDLE_DISPATCH_OVERHEAD + SLOW_PAYLOAD))

struct slow_member {
    spindle_group_t *group;
    uint64_t next_index, count;
    int bad;
};

static void slow_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    struct slow_member *s = ctx;
    for (size_t i = 0; i < n; i++) {
        uint64_t index;
        memcpy(&index, m[i].data, sizeof index);
        if (m[i].sender_index != s->next_index || index != s->next_index ||
            m[i].length != SLOW_PAYLOAD)
            s->bad = 1;
        s->next_index++;
        s->count++;
    }
}

static int slow_member_main(uint32_t self, const char *dir, void *arg)
{
    enum spindle_delivery_mode mode = *(const enum spindle_delivery_mode *)arg;
    static struct slow_member s;
    struct spindle_group_options o;
    options_for(&o, self, 2, dir);
    o.dispatch = true;
    o.dispatch_queue_bytes = self == 1 ? SLOW_QUEUE : 0;
    o.deliver = slow_deliver;
    o.deliver_ctx = &s;
    struct spindle_subgroup_config sg = {all_ids, 2, all_ids, 1, 32, SLOW_PAYLOAD, mode};
    CHECK(spindle_group_create(&o, &sg, 1, &s.group) == 0, "create");
    struct result r = {0};
    if (self == 0) {
        /* The sender dispatches on a thread of its own, until shutdown. */
        pthread_t dispatcher;
        CHECK(pthread_create(&dispatcher, NULL, blocking_dispatcher, s.group) == 0, "thread");
        static uint8_t payload[SLOW_PAYLOAD];
        for (uint64_t i = 0; i < SLOW_MESSAGES; i++) {
            memcpy(payload, &i, sizeof i);
            int rc = spindle_send(s.group, 0, payload, sizeof payload, SPINDLE_RESERVE_NONBLOCK);
            if (rc == SPINDLE_EAGAIN) {
                r.eagain++;
                rc = spindle_send(s.group, 0, payload, sizeof payload, 0); /* waits */
            }
            CHECK(rc == 0, "send %llu: %d", (unsigned long long)i, rc);
        }
        CHECK(spindle_group_shutdown(s.group, 30000) == 0, "shutdown");
        void *ended;
        pthread_join(dispatcher, &ended);
        CHECK((intptr_t)ended == SPINDLE_ESHUTDOWN, "blocking dispatch ended with %d",
              (int)(intptr_t)ended);
        struct spindle_stats st;
        CHECK(spindle_group_stats(s.group, &st) == 0, "stats");
        /* Held by the slow member (an unordered window may also be held
         * by this member's own posting, for a moment, and be named so). */
        CHECK(st.window_full > 0 && (st.window_holder == 1 || mode == SPINDLE_MODE_UNORDERED),
              "window_full %llu holder %d", (unsigned long long)st.window_full, st.window_holder);
    } else {
        /* A slow loop: one upcall at a time, a quarter of a millisecond
         * of work each. */
        int fd = spindle_group_fd(s.group);
        while (s.count < SLOW_MESSAGES) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            CHECK(poll(&p, 1, 20000) == 1, "poll at %llu", (unsigned long long)s.count);
            CHECK(spindle_dispatch(s.group, SPINDLE_DISPATCH_ONE) == 1, "dispatch one");
            struct timespec work = {0, 250000};
            nanosleep(&work, NULL);
        }
        struct spindle_stats st;
        CHECK(spindle_group_stats(s.group, &st) == 0, "stats");
        /* The bound held (no view change here, so no trim passed it), and
         * delivery was held at it. */
        CHECK(st.dispatch_queue_peak <= SLOW_QUEUE && st.dispatch_queue_peak > 0,
              "queue peak %llu, bound %u", (unsigned long long)st.dispatch_queue_peak,
              (unsigned)SLOW_QUEUE);
        CHECK(st.log_deliveries_held > 0, "never held");
        CHECK(spindle_group_shutdown(s.group, 30000) == 0, "shutdown");
        CHECK(spindle_dispatch(s.group, SPINDLE_DISPATCH_ONE) == SPINDLE_ESHUTDOWN, "after");
    }
    CHECK(s.bad == 0, "deliveries out of order");
    r.delivered = s.count;
    spindle_group_destroy(s.group);
    report(&r);
    return 0;
}

static void slow_dispatcher(enum spindle_delivery_mode mode)
{
    struct result r[2];
    run_members(2, slow_member_main, &mode, r);
    assert_int_equal(r[0].delivered, SLOW_MESSAGES);
    assert_int_equal(r[1].delivered, SLOW_MESSAGES);
    assert_true(r[0].eagain > 0);
}

static void test_a_slow_dispatcher_holds_senders_back_within_its_bound(void **state)
{
    (void)state;
    slow_dispatcher(SPINDLE_MODE_ATOMIC);
}

/* Unordered subgroups deliver on receipt: the bound holds what is taken. */
static void test_a_slow_dispatcher_bounds_an_unordered_subgroup_too(void **state)
{
    (void)state;
    slow_dispatcher(SPINDLE_MODE_UNORDERED);
}

/* ---- a view change through dispatch -------------------------------------- */

#define FIRST_MESSAGES  200
#define SECOND_MESSAGES 100

struct vc_member {
    spindle_group_t *group;
    uint32_t self;
    pthread_t loop_thread;
    uint64_t hash;
    uint64_t views;
    uint64_t before_view[MAX_MEMBERS]; /* per sender, delivered before the view */
    uint64_t next_index[MAX_MEMBERS];
    struct counter delivered, viewed;
    int bad;
};

static void vc_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    struct vc_member *s = ctx;
    if (!pthread_equal(pthread_self(), s->loop_thread))
        s->bad = 20;
    for (size_t i = 0; i < n; i++) {
        /* sender_index counts in each view; the payload across them. */
        uint64_t index;
        memcpy(&index, m[i].data, sizeof index);
        if (m[i].sender_id >= MAX_MEMBERS || m[i].length != sizeof index ||
            index != s->next_index[m[i].sender_id]) {
            s->bad = 21;
            continue;
        }
        s->next_index[m[i].sender_id]++;
        /* In order with the view: view 0 before it, view 1 after. */
        if (m[i].view_id != (s->views == 0 ? 0u : 1u))
            s->bad = 22;
        if (s->views == 0)
            s->before_view[m[i].sender_id]++;
        s->hash = mix(mix(mix(s->hash, m[i].sender_id), index), m[i].view_id);
    }
    counter_add(&s->delivered, n);
}

static void vc_view(void *ctx, const struct spindle_view_info *view)
{
    struct vc_member *s = ctx;
    if (!pthread_equal(pthread_self(), s->loop_thread))
        s->bad = 23;
    if (view->view_id != 1 || view->num_members != 2 || view->num_left != 1 || view->left[0] != 2 ||
        strstr(view->left_identities[0].name, "member-2") == NULL)
        s->bad = 24;
    s->views++;
    s->hash = mix(s->hash, 1000 + view->view_id);
    counter_add(&s->viewed, 1);
}

static void *vc_sender(void *arg)
{
    struct vc_member *s = arg;
    for (uint64_t i = 0; i < FIRST_MESSAGES; i++)
        CHECK(spindle_send(s->group, 0, &i, sizeof i, 0) == 0, "send %llu", (unsigned long long)i);
    if (s->self == 2) {
        CHECK(spindle_group_leave(s->group, 30000) == 0, "leave");
        return NULL;
    }
    CHECK(counter_wait(&s->viewed, 1), "no view");
    for (uint64_t i = FIRST_MESSAGES; i < FIRST_MESSAGES + SECOND_MESSAGES; i++)
        CHECK(spindle_send(s->group, 0, &i, sizeof i, 0) == 0, "send %llu", (unsigned long long)i);
    return NULL;
}

static int vc_member_main(uint32_t self, const char *dir, void *arg)
{
    (void)arg;
    static struct vc_member s;
    s.self = self;
    s.hash = 0xcbf29ce484222325ull;
    s.loop_thread = pthread_self();
    counter_init(&s.delivered);
    counter_init(&s.viewed);
    struct spindle_group_options o;
    options_for(&o, self, 3, dir);
    o.tolerate_failures = true;
    o.failure_timeout_ms = 3000;
    o.dispatch = true;
    o.deliver = vc_deliver;
    o.deliver_ctx = &s;
    o.view_changed = vc_view;
    o.view_ctx = &s;
    struct spindle_subgroup_config sg = {all_ids, 3, all_ids, 3, 16, 64, SPINDLE_MODE_ATOMIC};
    CHECK(spindle_group_create(&o, &sg, 1, &s.group) == 0, "create");
    pthread_t sender;
    CHECK(pthread_create(&sender, NULL, vc_sender, &s) == 0, "sender");
    /* The loop: this thread dispatches until the member is done (the
     * leaver: until its queue is empty after the leave). */
    uint64_t total = 3 * FIRST_MESSAGES + 2 * SECOND_MESSAGES;
    int fd = spindle_group_fd(s.group);
    for (;;) {
        if (self != 2 && counter_get(&s.delivered) == total && counter_get(&s.viewed) == 1)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        CHECK(poll(&p, 1, 20000) == 1, "poll: %llu delivered",
              (unsigned long long)counter_get(&s.delivered));
        int rc = spindle_dispatch(s.group, SPINDLE_DISPATCH_ALL);
        if (self == 2 && rc == SPINDLE_ESHUTDOWN)
            break;
        CHECK(rc > 0, "dispatch: %d", rc);
    }
    pthread_join(sender, NULL);
    CHECK(s.bad == 0, "bad %d", s.bad);
    struct result r = {.hash = s.hash, .delivered = counter_get(&s.delivered)};
    if (self != 2) {
        /* The leaver's messages all came before the view. */
        CHECK(s.before_view[2] == FIRST_MESSAGES, "%llu of the leaver's before the view",
              (unsigned long long)s.before_view[2]);
        CHECK(spindle_group_shutdown(s.group, 30000) == 0, "shutdown");
    }
    spindle_group_destroy(s.group);
    report(&r);
    return 0;
}

static void test_a_leave_reaches_the_dispatcher_in_order_with_deliveries(void **state)
{
    (void)state;
    struct result r[3];
    run_members(3, vc_member_main, NULL, r);
    assert_int_equal(r[0].delivered, 3 * FIRST_MESSAGES + 2 * SECOND_MESSAGES);
    assert_int_equal(r[1].delivered, r[0].delivered);
    assert_true(r[0].hash == r[1].hash);
}

/* ---- a trim past a full queue --------------------------------------------- */

#define TRIM_MESSAGES 12 /* fewer than the window: the leaver never waits for a slot */
#define TRIM_QUEUE    (4 * (SPINDLE_DISPATCH_OVERHEAD + 8) + 100) /* four messages */

struct trim_member {
    uint64_t count, views;
    int bad;
};

static void trim_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    struct trim_member *s = ctx;
    for (size_t i = 0; i < n; i++) {
        uint64_t index;
        memcpy(&index, m[i].data, sizeof index);
        if (m[i].sender_id != 2 || index != s->count || s->views != 0 || m[i].view_id != 0)
            s->bad = 40;
        s->count++;
    }
}

static void trim_view(void *ctx, const struct spindle_view_info *view)
{
    struct trim_member *s = ctx;
    if (view->view_id != 1 || s->count != TRIM_MESSAGES)
        s->bad = 41; /* after every message of the trim */
    s->views++;
}

static int trim_member_main(uint32_t self, const char *dir, void *arg)
{
    (void)arg;
    static struct trim_member s;
    struct spindle_group_options o;
    options_for(&o, self, 3, dir);
    o.tolerate_failures = true;
    o.failure_timeout_ms = 3000;
    o.dispatch = true;
    o.dispatch_queue_bytes = TRIM_QUEUE;
    o.deliver = trim_deliver;
    o.deliver_ctx = &s;
    o.view_changed = trim_view;
    o.view_ctx = &s;
    struct spindle_subgroup_config sg = {all_ids, 3, all_ids, 3, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *group;
    CHECK(spindle_group_create(&o, &sg, 1, &group) == 0, "create");
    struct result r = {0};
    if (self == 2) {
        pthread_t dispatcher;
        CHECK(pthread_create(&dispatcher, NULL, blocking_dispatcher, group) == 0, "thread");
        for (uint64_t i = 0; i < TRIM_MESSAGES; i++)
            CHECK(spindle_send(group, 0, &i, sizeof i, 0) == 0, "send");
        CHECK(spindle_group_leave(group, 30000) == 0, "leave");
        pthread_join(dispatcher, NULL);
    } else {
        /* Nothing is dispatched until the leave's view is installed: the
         * queue is full at four messages and the trim brings the rest
         * (the size is all there is to wait on: looked at every ms). */
        for (int ms = 0; spindle_group_size(group) != 2; ms++) {
            CHECK(ms < 30000, "no view without member 2");
            struct timespec tick = {0, 1000000};
            nanosleep(&tick, NULL);
        }
        struct spindle_stats st;
        CHECK(spindle_group_stats(group, &st) == 0, "stats");
        /* Every message is queued at once: more than the bound allows. */
        uint64_t messages = TRIM_MESSAGES * (SPINDLE_DISPATCH_OVERHEAD + 8);
        CHECK(messages > TRIM_QUEUE && st.dispatch_queue_bytes >= messages,
              "queued %llu bytes, the messages alone are %llu, the bound %u",
              (unsigned long long)st.dispatch_queue_bytes, (unsigned long long)messages,
              (unsigned)TRIM_QUEUE);
        int ran;
        while ((ran = spindle_dispatch(group, SPINDLE_DISPATCH_ALL)) > 0)
            r.eagain += (uint64_t)ran;
        CHECK(ran == 0, "dispatch: %d", ran);
        CHECK(s.count == TRIM_MESSAGES && s.views == 1, "%llu messages, %llu views",
              (unsigned long long)s.count, (unsigned long long)s.views);
        CHECK(spindle_group_shutdown(group, 30000) == 0, "shutdown");
    }
    CHECK(s.bad == 0, "bad %d", s.bad);
    spindle_group_destroy(group);
    r.delivered = s.count;
    report(&r);
    return 0;
}

static void test_a_trim_is_queued_whole_past_a_full_queue(void **state)
{
    (void)state;
    struct result r[3];
    run_members(3, trim_member_main, NULL, r);
    assert_int_equal(r[0].delivered, TRIM_MESSAGES);
    assert_int_equal(r[1].delivered, TRIM_MESSAGES);
}

/* ---- a join: state_save through dispatch ----------------------------------- */

#define JOIN_HALF 1000 /* messages per member before the join, and after */

struct join_member {
    spindle_group_t *group;
    uint32_t self;
    bool joiner;
    pthread_t dispatcher;
    uint64_t saved;       /* leader: the count state_save handed over */
    uint64_t at_join;     /* leader: the count when the join's view came */
    uint64_t loaded;      /* joiner: the count state_load got */
    struct counter count; /* messages delivered */
    struct counter view;  /* the last view id + 1 */
    int start_joiner;     /* leader: a byte here once streaming */
    int bad;
};

static void join_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    struct join_member *s = ctx;
    if (!pthread_equal(pthread_self(), s->dispatcher))
        s->bad = 30;
    (void)m;
    if (s->self == 0 && !s->joiner) {
        /* A slow leader: upcalls queue up behind this one. */
        struct timespec work = {0, 20000L * (long)n};
        nanosleep(&work, NULL);
    }
    counter_add(&s->count, n);
    if (s->start_joiner >= 0 && counter_get(&s->count) >= JOIN_HALF / 2) {
        if (write(s->start_joiner, "j", 1) != 1)
            s->bad = 31;
        close(s->start_joiner);
        s->start_joiner = -1;
    }
}

static void join_view(void *ctx, const struct spindle_view_info *view)
{
    struct join_member *s = ctx;
    if (!pthread_equal(pthread_self(), s->dispatcher))
        s->bad = 32;
    if (view->view_id == 1) {
        if (view->num_joined != 1 || view->joined[0] != 2)
            s->bad = 33;
        s->at_join = counter_get(&s->count);
    }
    counter_add(&s->view, view->view_id + 1 - counter_get(&s->view));
}

static int join_save(void *ctx, void **data, size_t *length)
{
    struct join_member *s = ctx;
    if (!pthread_equal(pthread_self(), s->dispatcher))
        s->bad = 34; /* in dispatch mode it runs in spindle_dispatch */
    uint64_t *copy = malloc(sizeof *copy);
    if (copy == NULL)
        return SPINDLE_ENOMEM;
    s->saved = *copy = counter_get(&s->count);
    *data = copy;
    *length = sizeof *copy;
    return 0;
}

static int join_load(void *ctx, const void *data, size_t length)
{
    struct join_member *s = ctx;
    if (length != sizeof s->loaded)
        return SPINDLE_EINVAL;
    memcpy(&s->loaded, data, sizeof s->loaded);
    return 0;
}

static void *join_dispatcher(void *arg)
{
    struct join_member *s = arg;
    s->dispatcher = pthread_self(); /* before anything is dispatched */
    intptr_t rc = spindle_dispatch(s->group, SPINDLE_DISPATCH_BLOCKING);
    return (void *)rc;
}

struct join_setup {
    char members[128];
    char contact[32], self[32];
    int start[2];
};

static int join_member_main(uint32_t self, const char *dir, void *arg)
{
    (void)dir;
    struct join_setup *setup = arg;
    static struct join_member s;
    s.self = self;
    s.joiner = self == 2;
    s.start_joiner = self == 0 ? setup->start[1] : -1;
    counter_init(&s.count);
    counter_init(&s.view);
    join_wait_start(setup->start, self); /* the joiner, until the leader is streaming */
    struct spindle_group_options o;
    options_for(&o, self, 2, s.joiner ? setup->self : setup->members);
    o.failure_timeout_ms = 3000;
    o.bootstrap_timeout_ms = 20000;
    o.tolerate_failures = true;
    o.dispatch = true;
    o.deliver = join_deliver;
    o.deliver_ctx = &s;
    o.view_changed = join_view;
    o.view_ctx = &s;
    o.state_save = join_save;
    o.state_load = join_load;
    o.state_ctx = &s;
    if (s.joiner)
        o.join = setup->contact;
    struct spindle_subgroup_config sg = {all_ids, 2, all_ids, 2, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *group = NULL;
    CHECK(spindle_group_create(&o, &sg, 1, &group) == 0, "create");
    s.group = group;
    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, join_dispatcher, &s) == 0, "dispatcher");
    struct result r = {0};
    if (!s.joiner) {
        for (uint64_t i = 0; i < 2 * JOIN_HALF; i++) {
            if (i == JOIN_HALF) /* the second half in the joiner's view */
                CHECK(counter_wait(&s.view, 2), "no join");
            CHECK(spindle_send(group, 0, &i, sizeof i, 0) == 0, "send %llu", (unsigned long long)i);
        }
        CHECK(counter_wait(&s.count, 4 * JOIN_HALF), "delivered %llu",
              (unsigned long long)counter_get(&s.count));
        r.delivered = s.saved;
        r.hash = s.at_join;
    } else {
        /* The state plus what came after it is everything. */
        CHECK(counter_wait(&s.count, 4 * JOIN_HALF - s.loaded), "loaded %llu delivered %llu",
              (unsigned long long)s.loaded, (unsigned long long)counter_get(&s.count));
        r.delivered = s.loaded;
    }
    CHECK(spindle_group_shutdown(group, 30000) == 0, "shutdown");
    void *ended;
    pthread_join(thread, &ended);
    CHECK((intptr_t)ended == SPINDLE_ESHUTDOWN, "dispatch ended with %d", (int)(intptr_t)ended);
    CHECK(s.bad == 0, "bad %d", s.bad);
    spindle_group_destroy(group);
    report(&r);
    return 0;
}

static void test_a_joiners_state_is_saved_in_order_with_dispatched_upcalls(void **state)
{
    (void)state;
    struct join_setup setup;
    join_addresses(setup.members, setup.contact, setup.self);
    assert_int_equal(pipe(setup.start), 0);
    struct result r[3];
    run_members(3, join_member_main, &setup, r);
    /* The leader saved exactly what it had dispatched when the join's
     * view came, and the joiner loaded it. */
    assert_int_equal(r[0].delivered, r[0].hash);
    assert_int_equal(r[2].delivered, r[0].delivered);
    assert_true(r[0].delivered > 0);
}

/* ---- errors, in one process ---------------------------------------------- */

static void test_dispatch_calls_name_what_is_wrong(void **state)
{
    (void)state;
    char dir[] = "/tmp/spindle-dispatch-XXXXXX";
    assert_non_null(mkdtemp(dir));
    struct spindle_group_options o;
    options_for(&o, 0, 1, dir);
    struct spindle_subgroup_config sg = {all_ids, 1, all_ids, 1, 4, 4096, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    o.dispatch = true;
    o.dispatch_queue_bytes = 1000;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "dispatch_queue_bytes 1000"));
    assert_non_null(strstr(spindle_errmsg(), "max_payload 4096"));
    o.dispatch = false;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), 0);
    assert_int_equal(spindle_group_fd(g), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "dispatch mode"));
    assert_int_equal(spindle_dispatch(g, SPINDLE_DISPATCH_ALL), SPINDLE_EINVAL);
    assert_int_equal(spindle_dispatch(NULL, SPINDLE_DISPATCH_ALL), SPINDLE_EINVAL);
    assert_int_equal(spindle_group_fd(NULL), SPINDLE_EINVAL);
    assert_int_equal(spindle_group_shutdown(g, 5000), 0);
    spindle_group_destroy(g);
    o.dispatch = true;
    o.dispatch_queue_bytes = 0;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), 0);
    assert_int_equal(spindle_dispatch(g, 7), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "flags 7"));
    assert_int_equal(spindle_dispatch(g, SPINDLE_DISPATCH_ONE), 0); /* nothing queued */
    assert_int_equal(spindle_group_shutdown(g, 5000), 0);
    assert_int_equal(spindle_dispatch(g, SPINDLE_DISPATCH_ONE), SPINDLE_ESHUTDOWN);
    spindle_group_destroy(g);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch_calls_name_what_is_wrong),
        cmocka_unit_test(test_an_epoll_loop_takes_each_message_once_in_one_order),
        cmocka_unit_test(test_a_slow_dispatcher_holds_senders_back_within_its_bound),
        cmocka_unit_test(test_a_slow_dispatcher_bounds_an_unordered_subgroup_too),
        cmocka_unit_test(test_a_leave_reaches_the_dispatcher_in_order_with_deliveries),
        cmocka_unit_test(test_a_trim_is_queued_whole_past_a_full_queue),
        cmocka_unit_test(test_a_joiners_state_is_saved_in_order_with_dispatched_upcalls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
