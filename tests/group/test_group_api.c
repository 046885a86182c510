/*
 * Public group API in one process (a one-member group): parameter
 * validation names the bad value, role and size errors, in-place
 * send/deliver round trip, non-blocking reserve, statistics, and the
 * back-pressure statistics of a member whose delivery upcall blocks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>

#include <spindle/spindle.h>

#include "util/clock.h"

static char dir[64];
static const uint32_t self_only[] = {0};

struct sink {
    uint64_t count; /* atomic */
    uint64_t next_index;
    int bad;
};

static void on_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    struct sink *s = ctx;
    for (size_t i = 0; i < n; i++) {
        if (m[i].sender_id != 0 || m[i].sender_index != s->next_index || m[i].length != 5 ||
            memcmp(m[i].data, "hello", 5) != 0)
            s->bad = 1;
        s->next_index++;
    }
    __atomic_add_fetch(&s->count, n, __ATOMIC_RELEASE);
}

static void options_for(struct spindle_group_options *o, struct sink *sink)
{
    spindle_group_options_init(o);
    static unsigned n;
    snprintf(dir, sizeof dir, "/tmp/spindle-api-%d-%u", (int)getpid(), n++);
    o->bootstrap = dir;
    o->deliver = on_deliver;
    o->deliver_ctx = sink;
}

static struct spindle_subgroup_config one_subgroup(void)
{
    struct spindle_subgroup_config sg = {self_only, 1, self_only, 1, 4, 16, SPINDLE_MODE_ATOMIC};
    return sg;
}

static void cleanup_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void expect_einval(struct spindle_subgroup_config sg, const char *needle)
{
    struct spindle_group_options o;
    struct sink sink = {0};
    options_for(&o, &sink);
    spindle_group_t *g = NULL;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), SPINDLE_EINVAL);
    assert_null(g);
    if (strstr(spindle_errmsg(), needle) == NULL)
        fail_msg("message '%s' does not name '%s'", spindle_errmsg(), needle);
    cleanup_dir();
}

static void test_nonsense_parameters_are_rejected_with_the_value(void **state)
{
    (void)state;
    struct spindle_subgroup_config sg = one_subgroup();
    sg.window_size = 0;
    expect_einval(sg, "window_size 0");
    sg = one_subgroup();
    sg.max_payload = 1u << 30;
    expect_einval(sg, "max_payload 1073741824");
    sg = one_subgroup();
    static const uint32_t stranger[] = {5};
    sg.senders = stranger;
    expect_einval(sg, "sender 5 is not a member");
    sg = one_subgroup();
    sg.members = stranger;
    sg.senders = stranger;
    expect_einval(sg, "member 5");

    struct spindle_group_options o;
    struct sink sink = {0};
    options_for(&o, &sink);
    o.self = 3;
    spindle_group_t *g = NULL;
    sg = one_subgroup();
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "self 3"));
    o.self = 0;
    struct spindle_subgroup_config many[SPINDLE_MAX_SUBGROUPS + 1];
    for (uint32_t i = 0; i <= SPINDLE_MAX_SUBGROUPS; i++)
        many[i] = one_subgroup();
    assert_int_equal(spindle_group_create(&o, many, SPINDLE_MAX_SUBGROUPS + 1, &g), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "num_subgroups 257 exceeds the limit of 256"));
    o.transport = "carrier-pigeon";
    assert_int_not_equal(spindle_group_create(&o, &sg, 1, &g), 0);
    assert_non_null(strstr(spindle_errmsg(), "carrier-pigeon"));
    cleanup_dir();
}

static void test_send_errors_name_size_role_and_subgroup(void **state)
{
    (void)state;
    struct spindle_group_options o;
    struct sink sink = {0};
    options_for(&o, &sink);
    struct spindle_subgroup_config sg[2] = {one_subgroup(), one_subgroup()};
    sg[1].num_senders = 0; /* member 0 only listens in subgroup 1 */
    spindle_group_t *g;
    assert_int_equal(spindle_group_create(&o, sg, 2, &g), 0);
    void *slot;
    assert_int_equal(spindle_reserve(g, 0, 17, 0, &slot), SPINDLE_EMSGSIZE);
    assert_non_null(strstr(spindle_errmsg(), "17"));
    assert_non_null(strstr(spindle_errmsg(), "max_payload 16"));
    assert_int_equal(spindle_reserve(g, 1, 4, 0, &slot), SPINDLE_EPERM);
    assert_non_null(strstr(spindle_errmsg(), "not a sender of subgroup 1"));
    assert_int_equal(spindle_reserve(g, 7, 4, 0, &slot), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "subgroup 7"));
    assert_int_equal(spindle_commit(g, 0), SPINDLE_EINVAL); /* nothing reserved */
    assert_int_equal(spindle_group_shutdown(g, 5000), 0);
    assert_int_equal(spindle_send(g, 0, "hello", 5, 0), SPINDLE_ESHUTDOWN);
    spindle_group_destroy(g);
    cleanup_dir();
}

static void test_in_place_messages_are_delivered_in_order(void **state)
{
    (void)state;
    struct spindle_group_options o;
    struct sink sink = {0};
    options_for(&o, &sink);
    struct spindle_subgroup_config sg = one_subgroup();
    spindle_group_t *g;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), 0);
    /* 25 messages through a 4-slot window: the ring wraps six times. */
    for (int i = 0; i < 25; i++) {
        void *slot;
        assert_int_equal(spindle_reserve(g, 0, 5, 0, &slot), 0);
        memcpy(slot, "hello", 5);
        assert_int_equal(spindle_commit(g, 0), 0);
    }
    assert_int_equal(spindle_flush(g, 10000), 0);
    assert_int_equal(__atomic_load_n(&sink.count, __ATOMIC_ACQUIRE), 25);
    struct spindle_stats st;
    assert_int_equal(spindle_group_stats(g, &st), 0);
    assert_int_equal(st.messages_sent, 25);
    assert_int_equal(st.messages_delivered, 25);
    assert_int_equal(st.nulls_sent, 0);
    uint64_t in_hist = 0;
    for (int b = 0; b < SPINDLE_HIST_BUCKETS; b++)
        in_hist += st.delivery_batches[b];
    assert_int_equal(in_hist, st.delivery_batch_count);
    assert_int_equal(st.delivery_batch_messages, 25);
    assert_int_equal(spindle_group_shutdown(g, 5000), 0);
    spindle_group_destroy(g);
    assert_false(sink.bad);
    cleanup_dir();
}

static void test_nonblocking_reserve_reports_a_full_window(void **state)
{
    (void)state;
    struct spindle_group_options o;
    struct sink sink = {0};
    options_for(&o, &sink);
    struct spindle_subgroup_config sg = one_subgroup();
    spindle_group_t *g;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), 0);
    /* Fill the window faster than deliveries free it; a non-blocking
     * reserve either succeeds or says EAGAIN, never blocks or fails. */
    int sent = 0;
    uint64_t deadline = sp_now_ns() + 5000000000ull;
    while (sent < 200 && sp_now_ns() < deadline) {
        void *slot;
        int rc = spindle_reserve(g, 0, 5, SPINDLE_RESERVE_NONBLOCK, &slot);
        if (rc == SPINDLE_EAGAIN)
            continue;
        assert_int_equal(rc, 0);
        memcpy(slot, "hello", 5);
        assert_int_equal(spindle_commit(g, 0), 0);
        sent++;
    }
    assert_int_equal(sent, 200);
    assert_int_equal(spindle_flush(g, 10000), 0);
    assert_int_equal(__atomic_load_n(&sink.count, __ATOMIC_ACQUIRE), 200);
    assert_int_equal(spindle_group_shutdown(g, 5000), 0);
    spindle_group_destroy(g);
    cleanup_dir();
}

/* A delivery upcall that blocks until released. */
struct gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool open;
};

static void gated_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    (void)m;
    (void)n;
    struct gate *gate = ctx;
    pthread_mutex_lock(&gate->lock);
    while (!gate->open)
        pthread_cond_wait(&gate->cond, &gate->lock);
    pthread_mutex_unlock(&gate->lock);
}

/* The member of a group of two that runs in a second thread: its
 * delivery upcall blocks until the gate opens. */
struct stuck_member {
    struct spindle_group_options options;
    struct spindle_subgroup_config sg;
    spindle_group_t *group;
    int created, shut;
};

static void *stuck_member_main(void *arg)
{
    struct stuck_member *s = arg;
    s->created = spindle_group_create(&s->options, &s->sg, 1, &s->group);
    return NULL;
}

static void *stuck_member_shutdown(void *arg)
{
    struct stuck_member *s = arg;
    s->shut = spindle_group_shutdown(s->group, 10000);
    return NULL;
}

/*
 * Member 1 of two is stuck in its first delivery upcall (it holds its own
 * predicate thread, not member 0's): member 0's four messages fill its
 * window of four, and the fifth reserve finds it full at once, held by
 * member 1, the member furthest behind.
 */
static void test_a_full_window_is_counted_with_the_member_holding_it(void **state)
{
    (void)state;
    static const uint32_t two[] = {0, 1}, first[] = {0};
    struct spindle_subgroup_config sg = {two, 2, first, 1, 4, 16, SPINDLE_MODE_ATOMIC};
    struct sink unused = {0};
    struct spindle_group_options o;
    options_for(&o, &unused);
    o.num_members = 2;
    struct gate gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    struct stuck_member stuck = {.options = o, .sg = sg};
    stuck.options.self = 1;
    stuck.options.deliver = gated_deliver;
    stuck.options.deliver_ctx = &gate;
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, stuck_member_main, &stuck), 0);
    spindle_group_t *g;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), 0);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(stuck.created, 0);
    struct spindle_stats st;
    assert_int_equal(spindle_group_stats(g, &st), 0);
    assert_int_equal(st.window_full, 0);
    assert_int_equal(st.window_holder, -1);
    for (int i = 0; i < 4; i++)
        assert_int_equal(spindle_send(g, 0, "hello", 5, 0), 0);
    void *slot;
    assert_int_equal(spindle_reserve(g, 0, 5, SPINDLE_RESERVE_NONBLOCK, &slot), SPINDLE_EAGAIN);
    assert_int_equal(spindle_group_stats(g, &st), 0);
    assert_int_equal(st.window_full, 1);
    assert_int_equal(st.window_full_ns, 0); /* it did not wait */
    assert_int_equal(st.window_holder, 1);
    pthread_mutex_lock(&gate.lock);
    gate.open = true;
    pthread_cond_broadcast(&gate.cond);
    pthread_mutex_unlock(&gate.lock);
    assert_int_equal(spindle_flush(g, 10000), 0);
    assert_int_equal(pthread_create(&thread, NULL, stuck_member_shutdown, &stuck), 0);
    assert_int_equal(spindle_group_shutdown(g, 10000), 0);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(stuck.shut, 0);
    spindle_group_destroy(stuck.group);
    spindle_group_destroy(g);
    cleanup_dir();
}

/* Busy for us microseconds: spaces the commits of a burst so that a
 * predicate thread woken by the first has time to take it (no sleep: the
 * test's thread stays the one that commits). */
static void spin_us(uint64_t us)
{
    uint64_t until = sp_now_ns() + us * 1000u;
    while (sp_now_ns() < until)
        ;
}

/*
 * SPINDLE_RESERVE_MORE: commits made with it do not wake the predicate
 * thread, so nothing of a burst is delivered before the commit that ends
 * it (one without the flag), and that commit sends the whole burst. Twenty
 * bursts of 15 quiet commits, 200 us apart, each begun once the thread
 * sleeps, then one plain commit: a thread woken at each commit delivers
 * part of nearly every burst early; only its heartbeat (every 100 ms) may
 * take one early here and there.
 * Then a burst ended by a reserve that finds the window full: that
 * reserve wakes the thread, and the burst is delivered without another
 * commit.
 */
static void test_reserve_more_holds_the_wake_until_the_burst_ends(void **state)
{
    (void)state;
    enum { BURSTS = 20, QUIET = 15, WINDOW = 16 };
    struct spindle_group_options o;
    struct sink sink = {0};
    options_for(&o, &sink);
    struct spindle_subgroup_config sg = {self_only, 1,  self_only,          1,
                                         WINDOW,    16, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g;
    assert_int_equal(spindle_group_create(&o, &sg, 1, &g), 0);
    uint64_t expected = 0;
    int early = 0;
    for (int burst = 0; burst < BURSTS; burst++) {
        /* A burst starts once the thread has gone to sleep (after the last
         * burst, or after a heartbeat's pass): an awake thread takes what
         * is committed, with or without the flag. */
        struct spindle_stats st;
        assert_int_equal(spindle_group_stats(g, &st), 0);
        uint64_t sleeps = st.sleeps;
        while (st.sleeps == sleeps) {
            spin_us(100);
            assert_int_equal(spindle_group_stats(g, &st), 0);
        }
        for (int i = 0; i < QUIET; i++) {
            void *slot;
            assert_int_equal(spindle_reserve(g, 0, 5, SPINDLE_RESERVE_MORE, &slot), 0);
            memcpy(slot, "hello", 5);
            assert_int_equal(spindle_commit(g, 0), 0);
            spin_us(200);
        }
        if (__atomic_load_n(&sink.count, __ATOMIC_ACQUIRE) > expected)
            early++;
        void *slot;
        assert_int_equal(spindle_reserve(g, 0, 5, 0, &slot), 0);
        memcpy(slot, "hello", 5);
        assert_int_equal(spindle_commit(g, 0), 0);
        expected += QUIET + 1;
        assert_int_equal(spindle_flush(g, 10000), 0);
        assert_int_equal(__atomic_load_n(&sink.count, __ATOMIC_ACQUIRE), expected);
    }
    print_message("bursts with a message delivered before their last commit: %d of %d\n", early,
                  BURSTS);
    assert_true(early <= BURSTS / 4);
    /* A burst that fills the window: the reserve that finds it full wakes
     * the thread, which delivers the burst and frees the window. */
    for (int i = 0; i < WINDOW; i++) {
        void *slot;
        assert_int_equal(spindle_reserve(g, 0, 5, SPINDLE_RESERVE_MORE, &slot), 0);
        memcpy(slot, "hello", 5);
        assert_int_equal(spindle_commit(g, 0), 0);
    }
    expected += WINDOW;
    void *slot;
    int rc = spindle_reserve(g, 0, 5, SPINDLE_RESERVE_NONBLOCK | SPINDLE_RESERVE_MORE, &slot);
    if (rc == 0) { /* a heartbeat's pass took the burst first: end it plainly */
        memcpy(slot, "hello", 5);
        assert_int_equal(spindle_commit(g, 0), 0);
        expected++;
    } else {
        assert_int_equal(rc, SPINDLE_EAGAIN);
    }
    uint64_t deadline = sp_now_ns() + 10000000000ull;
    while (__atomic_load_n(&sink.count, __ATOMIC_ACQUIRE) < expected && sp_now_ns() < deadline)
        spin_us(100);
    assert_int_equal(__atomic_load_n(&sink.count, __ATOMIC_ACQUIRE), expected);
    assert_int_equal(spindle_group_shutdown(g, 5000), 0);
    spindle_group_destroy(g);
    assert_false(sink.bad);
    cleanup_dir();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nonsense_parameters_are_rejected_with_the_value),
        cmocka_unit_test(test_send_errors_name_size_role_and_subgroup),
        cmocka_unit_test(test_in_place_messages_are_delivered_in_order),
        cmocka_unit_test(test_nonblocking_reserve_reports_a_full_window),
        cmocka_unit_test(test_a_full_window_is_counted_with_the_member_holding_it),
        cmocka_unit_test(test_reserve_more_holds_the_wake_until_the_burst_ends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
