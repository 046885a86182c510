/*
 * Point-to-point messages (include/spindle/p2p.h, docs/P2P.md), with
 * forked members on shm: one pair's messages arrive in order and each
 * once, queries are answered from inside the p2p upcall, in the default
 * mode and in dispatch mode; bad targets and sizes are refused with the
 * value named; a target killed with SIGKILL while a query waits on it
 * fails the query with SPINDLE_EPEERFAILED within the failure timeout.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <spindle/spindle.h>

#include "forked_members.h"

#define MESSAGES 3000 /* one-way, from member 0 to member 1 */
#define QUERIES  200

/* A query asks for one of these; the payload is a uint64_t. */
enum ask { ASK_PLUS_ONE = 1, ASK_COUNT = 2, ASK_HANG = 3 };

static int hang_signal = SIGKILL; /* what member 2 does on ASK_HANG */

struct p2p_member {
    spindle_group_t *group;
    uint32_t self;
    uint64_t next; /* member 1: the next one-way message number expected */
    uint64_t queries;
    int bad;
    bool upcall_checked;
};

static void p2p_deliver(void *ctx, const struct spindle_p2p_message *m)
{
    struct p2p_member *s = ctx;
    spindle_group_t *group = __atomic_load_n(&s->group, __ATOMIC_ACQUIRE);
    uint64_t value[2] = {0, 0};
    if (m->length != sizeof value || group == NULL) {
        s->bad = 20;
        return;
    }
    memcpy(value, m->data, sizeof value);
    if (m->query_id == 0) {
        /* One-way: in the order member 0 sent them, each once. */
        if (m->sender_id != 0 || value[0] != s->next)
            s->bad = 21;
        s->next++;
        return;
    }
    if (!s->upcall_checked) {
        s->upcall_checked = true;
        size_t len;
        /* A query would wait for this very thread. */
        if (spindle_p2p_query(group, m->sender_id, value, sizeof value, NULL, 0, &len, 0) !=
                SPINDLE_EINVAL ||
            strstr(spindle_errmsg(), "inside an upcall") == NULL)
            s->bad = 22;
    }
    if (value[1] == ASK_HANG) {
        /* The target dies (SIGKILL) or stops (SIGSTOP: only its silence
         * tells) with the query unanswered. */
        raise(hang_signal);
    }
    s->queries++;
    uint64_t answer = value[1] == ASK_COUNT ? s->next : value[0] + 1;
    int rc = spindle_p2p_reply(group, m, &answer, sizeof answer, 0);
    if (rc != 0) {
        fprintf(stderr, "reply: %d %s\n", rc, spindle_errmsg());
        s->bad = 23;
    }
}

static void ignore_deliver(void *ctx, const struct spindle_message *m, size_t n)
{
    (void)ctx;
    (void)m;
    (void)n;
}

static spindle_group_t *create(struct p2p_member *s, uint32_t self, uint32_t n, const char *dir,
                               bool dispatch, bool tolerate)
{
    s->self = self;
    struct spindle_group_options o;
    options_for(&o, self, n, dir);
    o.dispatch = dispatch;
    o.deliver = ignore_deliver;
    o.p2p_deliver = p2p_deliver;
    o.p2p_ctx = s;
    o.tolerate_failures = tolerate;
    if (tolerate)
        o.failure_timeout_ms = 1000;
    static const uint32_t first[] = {0};
    struct spindle_subgroup_config sg = {all_ids, n, first, 1, 8, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *group;
    CHECK(spindle_group_create(&o, &sg, 1, &group) == 0, "create");
    __atomic_store_n(&s->group, group, __ATOMIC_RELEASE);
    CHECK(spindle_barrier(group, 20000) == 0, "barrier");
    return group;
}

static uint64_t ask(spindle_group_t *group, uint32_t target, uint64_t value, enum ask what)
{
    uint64_t request[2] = {value, what}, answer = 0;
    size_t len = 0;
    int rc = spindle_p2p_query(group, target, request, sizeof request, &answer, sizeof answer, &len,
                               30000);
    CHECK(rc == 0 && len == sizeof answer, "query %llu: %d", (unsigned long long)value, rc);
    return answer;
}

/* Member 0's refusals, each naming what was wrong. */
static void check_refusals(spindle_group_t *group)
{
    static char big[SPINDLE_P2P_MAX_PAYLOAD + 1];
    CHECK(spindle_p2p_send(group, 1, big, sizeof big, 0) == SPINDLE_EMSGSIZE &&
              strstr(spindle_errmsg(), "4097") != NULL,
          "oversize");
    CHECK(spindle_p2p_send(group, 0, big, 8, 0) == SPINDLE_EINVAL &&
              strstr(spindle_errmsg(), "this member") != NULL,
          "self");
    CHECK(spindle_p2p_send(group, 7, big, 8, 0) == SPINDLE_ENOENT &&
              strstr(spindle_errmsg(), "member 7") != NULL,
          "unknown member");
    CHECK(spindle_p2p_send(group, 1, big, 8, 0x10) == SPINDLE_EINVAL, "flags");
    struct spindle_p2p_message one_way = {.sender_id = 1};
    CHECK(spindle_p2p_reply(group, &one_way, big, 8, 0) == SPINDLE_EINVAL &&
              strstr(spindle_errmsg(), "one-way") != NULL,
          "reply to a one-way message");
    size_t len;
    uint64_t small;
    uint64_t request[2] = {41, ASK_PLUS_ONE};
    CHECK(spindle_p2p_query(group, 1, request, sizeof request, &small, 4, &len, 30000) ==
                  SPINDLE_EMSGSIZE &&
              len == 8 && strstr(spindle_errmsg(), "8 bytes") != NULL,
          "short reply buffer");
}

static int ordered_member_main(uint32_t self, const char *dir, void *arg)
{
    static struct p2p_member s;
    bool dispatch = *(const bool *)arg;
    spindle_group_t *group = create(&s, self, 2, dir, dispatch, false);
    pthread_t dispatcher;
    if (dispatch)
        CHECK(pthread_create(&dispatcher, NULL, blocking_dispatcher, group) == 0, "thread");
    struct result r = {0};
    if (self == 0) {
        check_refusals(group);
        for (uint64_t i = 0; i < MESSAGES; i++) {
            uint64_t message[2] = {i, 0};
            CHECK(spindle_p2p_send(group, 1, message, sizeof message, 0) == 0, "send %llu",
                  (unsigned long long)i);
            if (i % (MESSAGES / QUERIES) == 0)
                CHECK(ask(group, 1, i, ASK_PLUS_ONE) == i + 1, "answer to %llu",
                      (unsigned long long)i);
        }
        /* Ordered behind every one-way message: all of them were taken. */
        r.delivered = ask(group, 1, 0, ASK_COUNT);
    }
    CHECK(spindle_barrier(group, 30000) == 0, "barrier");
    CHECK(spindle_group_shutdown(group, 30000) == 0, "shutdown");
    if (dispatch) {
        void *ended;
        pthread_join(dispatcher, &ended);
        CHECK((intptr_t)ended == SPINDLE_ESHUTDOWN, "dispatch ended with %d", (int)(intptr_t)ended);
    }
    CHECK(s.bad == 0, "bad %d", s.bad);
    if (self == 1) {
        r.delivered = s.next;
        r.eagain = s.queries;
    }
    spindle_group_destroy(group);
    report(&r);
    return 0;
}

static void ordered(bool dispatch)
{
    struct result r[2];
    run_members(2, ordered_member_main, &dispatch, r);
    assert_int_equal(r[0].delivered, MESSAGES);
    assert_int_equal(r[1].delivered, MESSAGES);
    assert_int_equal(r[1].eagain, QUERIES + 2); /* with the short-buffer and count queries */
}

static void test_p2p_messages_arrive_in_order_and_queries_are_answered_in_the_upcall(void **state)
{
    (void)state;
    ordered(false);
}

static void test_p2p_messages_go_through_the_dispatch_queue(void **state)
{
    (void)state;
    ordered(true);
}

/* ---- a target killed while a query waits --------------------------------- */

static int killed_member_main(uint32_t self, const char *dir, void *arg)
{
    (void)arg;
    static struct p2p_member s;
    spindle_group_t *group = create(&s, self, 3, dir, false, true);
    struct result r = {0};
    if (self == 0) {
        CHECK(ask(group, 2, 1, ASK_PLUS_ONE) == 2, "answer before the kill");
        uint64_t request[2] = {0, ASK_HANG}, answer;
        size_t len;
        struct timespec start, end;
        clock_gettime(CLOCK_MONOTONIC, &start);
        int rc = spindle_p2p_query(group, 2, request, sizeof request, &answer, sizeof answer, &len,
                                   60000);
        clock_gettime(CLOCK_MONOTONIC, &end);
        CHECK(rc == SPINDLE_EPEERFAILED, "query to the killed member returned %d", rc);
        int64_t ns =
            (int64_t)(end.tv_sec - start.tv_sec) * 1000000000 + (end.tv_nsec - start.tv_nsec);
        r.hash = (uint64_t)(ns / 1000000); /* ms */
        /* The next view holds no member 2. */
        int sent;
        while ((sent = spindle_p2p_send(group, 2, request, sizeof request, 0)) ==
               SPINDLE_EPEERFAILED)
            CHECK(spindle_group_status(group) == 0, "status");
        CHECK(sent == SPINDLE_ENOENT, "send to the removed member returned %d", sent);
        CHECK(ask(group, 1, 5, ASK_PLUS_ONE) == 6, "answer in the next view");
    }
    if (self == 2)
        for (;;)
            pause(); /* until the query that kills it (p2p_deliver, ASK_HANG) */
    if (self < 2) {
        CHECK(spindle_barrier(group, 30000) == 0, "barrier");
        CHECK(spindle_group_shutdown(group, 30000) == 0, "shutdown");
    }
    CHECK(s.bad == 0, "bad %d", s.bad);
    spindle_group_destroy(group);
    report(&r);
    return 0;
}

/* Member 2 dies or stops on a query of member 0; returns how long the
 * query took to fail (ms). */
static uint64_t query_a_lost_member(int signal)
{
    hang_signal = signal;
    char dir[] = "/tmp/spindle-p2p-XXXXXX";
    assert_non_null(mkdtemp(dir));
    pid_t pids[3];
    int fds[3][2];
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(pipe(fds[i]), 0);
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(90);
            close(fds[i][0]);
            result_fd = fds[i][1];
            _exit(killed_member_main(i, dir, NULL));
        }
        close(fds[i][1]);
    }
    struct result results[3];
    /* A stopped member 2 never reports: once the others have, it goes. */
    for (uint32_t i = 0; i < 2; i++) {
        ssize_t got = read(fds[i][0], &results[i], sizeof results[i]);
        assert_int_equal(got, (ssize_t)sizeof results[i]);
    }
    if (signal == SIGSTOP)
        kill(pids[2], SIGKILL);
    assert_int_equal(read(fds[2][0], &results[2], sizeof results[2]), 0);
    for (uint32_t i = 0; i < 3; i++) {
        close(fds[i][0]);
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (i == 2)
            assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("member %u: status 0x%x", i, status);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    fprintf(stderr, "query failed %llu ms after member 2 got signal %d\n",
            (unsigned long long)results[0].hash, signal);
    return results[0].hash;
}

static void test_a_query_to_a_killed_member_fails_within_the_failure_timeout(void **state)
{
    (void)state;
    /* failure_timeout_ms is 1000: shm sees a dead process at once. */
    assert_true(query_a_lost_member(SIGKILL) < 1000);
}

static void test_a_query_to_a_stopped_member_fails_after_its_silence(void **state)
{
    (void)state;
    /* Only the stalled heartbeat tells (failure_timeout_ms 1000); the
     * slack is for a loaded machine's view change. */
    assert_true(query_a_lost_member(SIGSTOP) < 3000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_p2p_messages_arrive_in_order_and_queries_are_answered_in_the_upcall),
        cmocka_unit_test(test_p2p_messages_go_through_the_dispatch_queue),
        cmocka_unit_test(test_a_query_to_a_killed_member_fails_within_the_failure_timeout),
        cmocka_unit_test(test_a_query_to_a_stopped_member_fails_after_its_silence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
