/*
 * Reservations belong to the thread that made it (include/spindle/group.h):
 * a commit without one, or from another thread, is refused and changes
 * nothing; one thread may hold reservations on several subgroups. With
 * real processes: a thread that holds a reservation while a member fails,
 * and meanwhile sends on another subgroup, gets SPINDLE_EAGAIN naming the
 * reservation instead of waiting for a view change that waits for it; once
 * it commits, the change completes and sending goes on in the new view.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <spindle/spindle.h>

static const uint32_t ids[] = {0, 1, 2};

struct sink {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t delivered[2]; /* per subgroup */
    uint64_t after;        /* "after" messages of member 0 in subgroup 1 */
    uint64_t view_id;
    uint32_t view_members;
};

static void on_deliver(void *ctx, const struct spindle_message *m, size_t count)
{
    struct sink *s = ctx;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < count; i++) {
        s->delivered[m[i].subgroup & 1]++;
        s->after += m[i].subgroup == 1 && m[i].sender_id == 0 && m[i].length == 5 &&
                    memcmp(m[i].data, "after", 5) == 0;
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void on_view(void *ctx, const struct spindle_view_info *view)
{
    struct sink *s = ctx;
    pthread_mutex_lock(&s->lock);
    s->view_id = view->view_id;
    s->view_members = view->num_members;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void sink_init(struct sink *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
}

/* Waits up to seconds until view_id >= view and `after` >= after. */
static bool sink_wait(struct sink *s, uint64_t view, uint64_t after, int seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += seconds;
    pthread_mutex_lock(&s->lock);
    while ((s->view_id < view || s->after < after) &&
           pthread_cond_timedwait(&s->cond, &s->lock, &ts) == 0)
        ;
    bool ok = s->view_id >= view && s->after >= after;
    pthread_mutex_unlock(&s->lock);
    return ok;
}

static uint64_t delivered(struct sink *s, int subgroup)
{
    pthread_mutex_lock(&s->lock);
    uint64_t n = s->delivered[subgroup];
    pthread_mutex_unlock(&s->lock);
    return n;
}

static int create(const char *dir, uint32_t self, uint32_t members, struct sink *s,
                  spindle_group_t **out)
{
    struct spindle_group_options o;
    spindle_group_options_init(&o);
    o.self = self;
    o.num_members = members;
    o.bootstrap = dir;
    o.failure_timeout_ms = 1500;
    o.tolerate_failures = true;
    o.deliver = on_deliver;
    o.deliver_ctx = s;
    o.view_changed = on_view;
    o.view_ctx = s;
    struct spindle_subgroup_config sg[2] = {
        {ids, members, ids, members, 8, 64, SPINDLE_MODE_ATOMIC},
        {ids, members, ids, members, 8, 64, SPINDLE_MODE_ATOMIC},
    };
    return spindle_group_create(&o, sg, 2, out);
}

static void remove_dir(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- one process ------------------------------------------------------- */

struct other_thread {
    spindle_group_t *group;
    int commit_rc;
    char message[256];
};

static void *commit_elsewhere(void *arg)
{
    struct other_thread *t = arg;
    t->commit_rc = spindle_commit(t->group, 0);
    snprintf(t->message, sizeof t->message, "%s", spindle_errmsg());
    return NULL;
}

static void test_a_reservation_belongs_to_its_thread(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/spindle-resv-%d", (int)getpid());
    struct sink s;
    sink_init(&s);
    spindle_group_t *g = NULL;
    assert_int_equal(create(dir, 0, 1, &s, &g), 0);

    /* Nothing reserved: refused, and nothing changes. */
    assert_int_equal(spindle_commit(g, 0), SPINDLE_EINVAL);
    assert_non_null(strstr(spindle_errmsg(), "subgroup 0 has no open reservation"));

    /* Another thread cannot commit this thread's reservation. */
    void *slot;
    assert_int_equal(spindle_reserve(g, 0, 5, 0, &slot), 0);
    memcpy(slot, "first", 5);
    struct other_thread t = {.group = g};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, commit_elsewhere, &t), 0);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(t.commit_rc, SPINDLE_EINVAL);
    assert_non_null(strstr(t.message, "no open reservation on this thread"));
    assert_int_equal(spindle_commit(g, 0), 0);

    /* One thread, two subgroups, committed in the other order. */
    void *a, *b;
    assert_int_equal(spindle_reserve(g, 0, 5, 0, &a), 0);
    assert_int_equal(spindle_reserve(g, 1, 5, 0, &b), 0);
    assert_int_equal(spindle_reserve(g, 1, 5, 0, &b), SPINDLE_EINVAL); /* already open */
    memcpy(a, "zero!", 5);
    memcpy(b, "one!!", 5);
    assert_int_equal(spindle_commit(g, 1), 0);
    assert_int_equal(spindle_commit(g, 1), SPINDLE_EINVAL); /* already committed */
    assert_int_equal(spindle_commit(g, 0), 0);
    /* A flush (from this thread, holding nothing) sees all three delivered. */
    assert_int_equal(spindle_flush(g, 10000), 0);
    assert_int_equal(delivered(&s, 0), 2);
    assert_int_equal(delivered(&s, 1), 1);
    assert_int_equal(spindle_group_shutdown(g, 10000), 0);
    spindle_group_destroy(g);
    remove_dir(dir);
}

/* ---- a view change while a reservation is open -------------------------- */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Member 0: holds a reservation on subgroup 0 while the parent kills member
 * 2, and sends on subgroup 1 until that fails. */
static int holder(const char *dir, int holding_fd)
{
    struct sink s;
    sink_init(&s);
    spindle_group_t *g = NULL;
    if (create(dir, 0, 3, &s, &g) != 0 || spindle_barrier(g, 30000) != 0)
        return 10;
    void *slot;
    if (spindle_reserve(g, 0, 4, 0, &slot) != 0)
        return 11;
    memcpy(slot, "held", 4);
    if (write(holding_fd, "h", 1) != 1)
        return 12;
    int rc = 0;
    uint64_t sent = 0;
    while (rc == 0) {
        rc = spindle_send(g, 1, &sent, sizeof sent, 0);
        sent += rc == 0;
    }
    if (rc != SPINDLE_EAGAIN || strstr(spindle_errmsg(), "reservation this thread holds on "
                                                         "subgroup 0") == NULL) {
        fprintf(stderr, "holder: send gave %d (%s) after %llu sends\n", rc, spindle_errmsg(),
                (unsigned long long)sent);
        return 13;
    }
    /* Flushing must not wait for the change either: SPINDLE_EAGAIN, or 0
     * at once when every message it sent was already delivered (on a
     * loaded machine the sends may all land before the kill does, and the
     * first send after the wedge fails without committing). */
    uint64_t began = now_ms();
    int flushed = spindle_flush(g, 30000);
    if ((flushed != SPINDLE_EAGAIN && flushed != 0) || now_ms() - began > 20000) {
        fprintf(stderr, "holder: flush gave %d (%s) after %llu ms\n", flushed, spindle_errmsg(),
                (unsigned long long)(now_ms() - began));
        return 14;
    }
    if (spindle_commit(g, 0) != 0)
        return 15;
    /* Now the change can install; this send waits for it and goes on. */
    if (spindle_send(g, 1, "after", 5, 0) != 0) {
        fprintf(stderr, "holder: send after the commit: %s\n", spindle_errmsg());
        return 16;
    }
    if (!sink_wait(&s, 1, 1, 30) || s.view_members != 2 || spindle_flush(g, 30000) != 0)
        return 17;
    if (spindle_group_shutdown(g, 10000) != 0)
        return 18;
    spindle_group_destroy(g);
    return 0;
}

static int bystander(const char *dir, uint32_t self)
{
    struct sink s;
    sink_init(&s);
    spindle_group_t *g = NULL;
    if (create(dir, self, 3, &s, &g) != 0 || spindle_barrier(g, 30000) != 0)
        return 20;
    if (self == 2)
        for (;;)
            pause(); /* killed by the test */
    if (!sink_wait(&s, 1, 1, 60) || s.view_members != 2)
        return 21;
    if (spindle_group_shutdown(g, 10000) != 0)
        return 22;
    spindle_group_destroy(g);
    return 0;
}

static void test_calls_under_an_open_reservation_do_not_wait_for_a_view_change(void **state)
{
    (void)state;
    char dir[] = "/tmp/spindle-resv-change-XXXXXX";
    assert_non_null(mkdtemp(dir));
    int holding[2];
    assert_int_equal(pipe(holding), 0);
    pid_t pids[3];
    for (uint32_t i = 0; i < 3; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(90); /* a deadlock ends the member and fails the test */
            close(holding[0]);
            _exit(i == 0 ? holder(dir, holding[1]) : bystander(dir, i));
        }
    }
    close(holding[1]);
    char byte;
    assert_int_equal(read(holding[0], &byte, 1), 1);
    kill(pids[2], SIGKILL);
    close(holding[0]);
    for (uint32_t i = 0; i < 3; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (i == 2) {
            assert_true(WIFSIGNALED(status));
            continue;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("member %u: status 0x%x", i, status);
    }
    remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_reservation_belongs_to_its_thread),
        cmocka_unit_test(test_calls_under_an_open_reservation_do_not_wait_for_a_view_change),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
