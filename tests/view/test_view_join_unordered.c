/*
 * A join into an unordered subgroup whose ragged edge is uneven: member 2
 * takes nothing from the sender (member 1) in view 0 (a test hook holds
 * its receipt), while the leader (member 0) delivers all of the first
 * FIRST messages. The join's view change resends them from the fewest any
 * survivor received (none); the leader's state, handed to the joiner,
 * already counts them. The joiner must take those resends without
 * delivering them: every process checks that it delivers the sender's
 * messages exactly once, in order, from where its state starts (the
 * joiner from FIRST, the others from 0) up to FIRST + SECOND, the second
 * batch being sent in the joiner's view.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_ports.h"
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spindle/spindle.h>

#include "smc/smc.h"

#define MEMBERS 3
#define SENDER  1u
#define FIRST   10u /* sent in view 0, fewer than the window */
#define SECOND  10u /* sent in the joiner's view */
#define WINDOW  16u

struct app {
    uint64_t next;    /* atomic: the index the sender's next message must carry */
    int wrong;        /* atomic: a message out of order or twice */
    uint64_t view_id; /* atomic: last view */
    uint64_t loaded;  /* atomic: the next index the loaded state named (a joiner's) */
};

static void on_deliver(void *ctx, const struct spindle_message *m, size_t count)
{
    struct app *app = ctx;
    for (size_t i = 0; i < count; i++) {
        uint64_t index = UINT64_MAX;
        if (m[i].length == sizeof index)
            memcpy(&index, m[i].data, sizeof index);
        uint64_t next = __atomic_load_n(&app->next, __ATOMIC_RELAXED);
        if (m[i].sender_id != SENDER || index != next) {
            fprintf(stderr, "pid %d: message %llu from %u, expected %llu from %u\n", (int)getpid(),
                    (unsigned long long)index, m[i].sender_id, (unsigned long long)next, SENDER);
            __atomic_store_n(&app->wrong, 1, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&app->next, index + 1, __ATOMIC_RELEASE);
    }
}

/* Member 2 holds the sender's messages until the joiner's view. */
static int holding = 1;

static bool hold(uint32_t subgroup, uint32_t sender_row)
{
    return subgroup == 0 && sender_row == SENDER && __atomic_load_n(&holding, __ATOMIC_ACQUIRE);
}

static void on_view(void *ctx, const struct spindle_view_info *view)
{
    struct app *app = ctx;
    __atomic_store_n(&app->view_id, view->view_id, __ATOMIC_RELEASE);
    if (view->view_id >= 1)
        __atomic_store_n(&holding, 0, __ATOMIC_RELEASE);
}

static int save(void *ctx, void **data, size_t *length)
{
    struct app *app = ctx;
    uint64_t *copy = malloc(sizeof *copy);
    if (copy == NULL)
        return SPINDLE_ENOMEM;
    *copy = __atomic_load_n(&app->next, __ATOMIC_ACQUIRE);
    *data = copy;
    *length = sizeof *copy;
    return 0;
}

static int load(void *ctx, const void *data, size_t length)
{
    struct app *app = ctx;
    uint64_t next = 0;
    if (length != sizeof next)
        return SPINDLE_EINVAL;
    memcpy(&next, data, sizeof next);
    __atomic_store_n(&app->loaded, next, __ATOMIC_RELEASE);
    __atomic_store_n(&app->next, next, __ATOMIC_RELEASE);
    return 0;
}

static const uint32_t everyone[MEMBERS] = {0, 1, 2};
static const uint32_t sender[1] = {SENDER};

static void options(struct spindle_group_options *o, struct app *app, const char *bootstrap)
{
    spindle_group_options_init(o);
    o->bootstrap = bootstrap;
    o->failure_timeout_ms = 1500;
    o->bootstrap_timeout_ms = 20000;
    o->tolerate_failures = true;
    o->deliver = on_deliver;
    o->deliver_ctx = app;
    o->view_changed = on_view;
    o->view_ctx = app;
    o->state_save = save;
    o->state_load = load;
    o->state_ctx = app;
}

static void wait_for(const uint64_t *value, uint64_t at_least)
{
    while (__atomic_load_n(value, __ATOMIC_ACQUIRE) < at_least)
        usleep(1000);
}

/* Ends a process: every message delivered once, in order, and a clean
 * shutdown. */
static int finish(spindle_group_t *g, struct app *app, const char *who)
{
    wait_for(&app->next, FIRST + SECOND);
    int rc = spindle_group_shutdown(g, 30000);
    if (rc != 0)
        fprintf(stderr, "%s: shutdown: %s\n", who, spindle_errmsg());
    spindle_group_destroy(g);
    if (__atomic_load_n(&app->wrong, __ATOMIC_ACQUIRE))
        return 9;
    return rc == 0 && __atomic_load_n(&app->next, __ATOMIC_ACQUIRE) == FIRST + SECOND ? 0 : 10;
}

/* Member self. The leader writes a byte on `ready` once it delivered the
 * first batch; the sender sends the second one in the joiner's view. */
static int member_main(const char *members, uint32_t self, int ready)
{
    struct app app = {0};
    struct spindle_group_options o;
    options(&o, &app, members);
    o.self = self;
    o.num_members = MEMBERS;
    if (self == 2)
        smc_test_hold_receive(hold);
    struct spindle_subgroup_config sg = {
        everyone, MEMBERS, sender, 1, WINDOW, 64, SPINDLE_MODE_UNORDERED};
    spindle_group_t *g = NULL;
    if (spindle_group_create(&o, &sg, 1, &g) != 0) {
        fprintf(stderr, "member %u: %s\n", self, spindle_errmsg());
        return 2;
    }
    for (uint64_t i = 0; self == SENDER && i < FIRST; i++)
        if (spindle_send(g, 0, &i, sizeof i, 0) != 0)
            return 3;
    if (self == 0) {
        wait_for(&app.next, FIRST);
        if (write(ready, "r", 1) != 1)
            return 4;
    }
    wait_for(&app.view_id, 1);
    for (uint64_t i = FIRST; self == SENDER && i < FIRST + SECOND; i++)
        if (spindle_send(g, 0, &i, sizeof i, 0) != 0) {
            fprintf(stderr, "sender: %s\n", spindle_errmsg());
            return 5;
        }
    char who[16];
    snprintf(who, sizeof who, "member %u", self);
    return finish(g, &app, who);
}

static int joiner_main(const char *contact, const char *self)
{
    struct app app = {0};
    struct spindle_group_options o;
    options(&o, &app, self);
    o.join = contact;
    struct spindle_subgroup_config sg = {
        everyone, 1, everyone, 0, WINDOW, 64, SPINDLE_MODE_UNORDERED};
    spindle_group_t *g = NULL;
    if (spindle_group_create(&o, &sg, 1, &g) != 0) {
        fprintf(stderr, "joiner: %s\n", spindle_errmsg());
        return 20;
    }
    /* The leader's state: everything of view 0 was delivered there. (Not
     * app.next: the joiner's engine runs before create returns, while it
     * waits for every member's readiness, so the second batch may already
     * be arriving; on_deliver checks that it goes on from the state.) */
    if (__atomic_load_n(&app.loaded, __ATOMIC_ACQUIRE) != FIRST) {
        fprintf(stderr, "joiner: the state starts at %llu, not %u\n",
                (unsigned long long)app.loaded, FIRST);
        spindle_group_destroy(g);
        return 21;
    }
    int rc = finish(g, &app, "joiner");
    return rc == 0 ? 0 : 20 + rc;
}

static void test_joiner_skips_resends_its_state_holds(void **state)
{
    (void)state;
    char members[128], contact[32], self[32];
    uint16_t ports[MEMBERS + 1];
    for (int i = 0; i <= MEMBERS; i++)
        ports[i] = test_free_port();
    snprintf(members, sizeof members, "127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u", ports[0], ports[1],
             ports[2]);
    snprintf(contact, sizeof contact, "127.0.0.1:%u", ports[0]);
    snprintf(self, sizeof self, "127.0.0.1:%u", ports[3]);
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pids[MEMBERS + 1];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(90);
            _exit(member_main(members, i, ready[1]));
        }
    }
    char byte;
    assert_int_equal(read(ready[0], &byte, 1), 1);
    pids[MEMBERS] = fork();
    assert_true(pids[MEMBERS] >= 0);
    if (pids[MEMBERS] == 0) {
        alarm(90);
        _exit(joiner_main(contact, self));
    }
    for (uint32_t i = 0; i <= MEMBERS; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("%s %u: status %d", i == MEMBERS ? "joiner" : "member", i, status);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_joiner_skips_resends_its_state_holds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
