/*
 * State transfer to a joiner, with real processes (two members and a
 * joiner over shm and a loopback TCP bootstrap):
 *
 * - A saved state above the 64 MiB one control-channel blob may carry
 *   arrives whole in state_load, byte for byte.
 * - A state handed over in pieces by state_write reaches a slow state_read
 *   in order, in chunks of at most 1 MiB, the last one marked; the
 *   transfer takes longer than the members' wait for a silent joiner (four
 *   failure timeouts), and they wait for it since it keeps progressing.
 * - A joiner whose state_read refuses its state fails to join with that
 *   error; the members go on, remove it and shut down.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <spindle/spindle.h>

#include "test_ports.h"

#define MEMBERS        2
#define FAILURE_MS     1000
#define BIG_STATE      ((64u << 20) + 3) /* past the old limit of one blob */
#define STREAMED_STATE ((20u << 20) + 5)
#define PIECE          100003
#define SLOW_READ_MS   250 /* 21 chunks: over 5 s, beyond 4 failure timeouts */
#define REFUSED_AT     (2u << 20)
#define JOINER_REFUSED 40

static const uint32_t everyone[MEMBERS] = {0, 1};

/* The state's byte at offset i: changes within and across chunks. */
static uint8_t byte_at(uint64_t i)
{
    return (uint8_t)(i * 7u + (i >> 20) * 13u + 1u);
}

enum scenario { SAVED_BIG, STREAMED, REFUSED };

struct app {
    enum scenario scenario;
    uint32_t view_members; /* atomic: members of the last view */
    uint64_t view_id;      /* atomic: the last view */
    /* joiner's reader */
    uint64_t next_offset;
    uint32_t chunks;
    bool ended, wrong;
};

static void on_deliver(void *ctx, const struct spindle_message *m, size_t count)
{
    (void)ctx;
    (void)m;
    (void)count;
}

static void on_view(void *ctx, const struct spindle_view_info *view)
{
    struct app *app = ctx;
    __atomic_store_n(&app->view_members, view->num_members, __ATOMIC_RELEASE);
    __atomic_store_n(&app->view_id, view->view_id, __ATOMIC_RELEASE);
}

static int save_big(void *ctx, void **data, size_t *length)
{
    (void)ctx;
    uint8_t *bytes = malloc(BIG_STATE);
    if (bytes == NULL)
        return SPINDLE_ENOMEM;
    for (uint64_t i = 0; i < BIG_STATE; i++)
        bytes[i] = byte_at(i);
    *data = bytes;
    *length = BIG_STATE;
    return 0;
}

static int load_big(void *ctx, const void *data, size_t length)
{
    struct app *app = ctx;
    const uint8_t *bytes = data;
    app->ended = true;
    if (length != BIG_STATE)
        return SPINDLE_EINVAL;
    for (uint64_t i = 0; i < length; i++)
        if (bytes[i] != byte_at(i))
            return SPINDLE_EINVAL;
    return 0;
}

/* state_write: the streamed state in pieces of PIECE bytes. */
static int write_streamed(void *ctx, struct spindle_state_out *out)
{
    (void)ctx;
    static uint8_t piece[PIECE];
    for (uint64_t at = 0; at < STREAMED_STATE; at += PIECE) {
        size_t n = STREAMED_STATE - at < PIECE ? (size_t)(STREAMED_STATE - at) : PIECE;
        for (size_t i = 0; i < n; i++)
            piece[i] = byte_at(at + i);
        int rc = spindle_state_put(out, piece, n);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int save_small(void *ctx, void **data, size_t *length)
{
    (void)ctx;
    size_t n = 5u << 20;
    uint8_t *bytes = malloc(n);
    if (bytes == NULL)
        return SPINDLE_ENOMEM;
    for (size_t i = 0; i < n; i++)
        bytes[i] = byte_at(i);
    *data = bytes;
    *length = n;
    return 0;
}

/* state_read: checks order, chunk sizes and bytes; slow in STREAMED,
 * refusing at REFUSED_AT in REFUSED. */
static int read_state(void *ctx, uint64_t offset, const void *data, size_t length, bool last)
{
    struct app *app = ctx;
    if (offset == 0) {
        app->next_offset = 0;
        app->chunks = 0;
    }
    if (offset != app->next_offset || length > (1u << 20) || app->ended ||
        (!last && length != (1u << 20)))
        app->wrong = true;
    const uint8_t *bytes = data;
    for (size_t i = 0; i < length; i++)
        if (bytes[i] != byte_at(offset + i))
            app->wrong = true;
    app->next_offset = offset + length;
    app->chunks++;
    app->ended = last;
    if (app->scenario == REFUSED && offset >= REFUSED_AT)
        return SPINDLE_EINVAL;
    if (app->scenario == STREAMED) {
        struct timespec slow = {0, SLOW_READ_MS * 1000000L};
        nanosleep(&slow, NULL);
    }
    return 0;
}

static void options_for(struct spindle_group_options *o, struct app *app, const char *bootstrap)
{
    spindle_group_options_init(o);
    o->bootstrap = bootstrap;
    o->failure_timeout_ms = FAILURE_MS;
    o->bootstrap_timeout_ms = 30000;
    o->tolerate_failures = true;
    o->deliver = on_deliver;
    o->view_changed = on_view;
    o->view_ctx = app;
    o->state_ctx = app;
    switch (app->scenario) {
    case SAVED_BIG:
        o->state_save = save_big;
        o->state_load = load_big;
        break;
    case STREAMED:
        o->state_write = write_streamed;
        o->state_read = read_state;
        break;
    case REFUSED:
        o->state_save = save_small;
        o->state_read = read_state;
        break;
    }
}

/* A member: up, says so on `up`, waits for the parent's byte on `go`,
 * then for the view it expects (three members, or two again once a
 * refused joiner was removed), and shuts down. */
static int member_main(enum scenario scenario, const char *members, uint32_t self, int up, int go)
{
    struct app app = {.scenario = scenario};
    struct spindle_group_options o;
    options_for(&o, &app, members);
    o.self = self;
    o.num_members = MEMBERS;
    struct spindle_subgroup_config sg = {everyone, MEMBERS, everyone,           MEMBERS,
                                         16,       64,      SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    if (spindle_group_create(&o, &sg, 1, &g) != 0) {
        fprintf(stderr, "member %u: %s\n", self, spindle_errmsg());
        return 2;
    }
    char byte;
    if (write(up, "u", 1) != 1 || read(go, &byte, 1) != 1)
        return 3;
    /* View 1 holds the joiner; a refused one is removed in view 2. */
    uint64_t view = scenario == REFUSED ? 2 : 1;
    uint32_t want = scenario == REFUSED ? MEMBERS : MEMBERS + 1;
    while (__atomic_load_n(&app.view_id, __ATOMIC_ACQUIRE) < view ||
           __atomic_load_n(&app.view_members, __ATOMIC_ACQUIRE) != want)
        usleep(1000);
    int rc = spindle_group_shutdown(g, 30000);
    spindle_group_destroy(g);
    if (rc != 0) {
        fprintf(stderr, "member %u: shutdown: %s\n", self, spindle_errmsg());
        return 4;
    }
    return 0;
}

static int joiner_main(enum scenario scenario, const char *contact, const char *self)
{
    struct app app = {.scenario = scenario};
    struct spindle_group_options o;
    options_for(&o, &app, self);
    o.join = contact;
    o.bootstrap_timeout_ms = 60000;
    struct spindle_subgroup_config sg = {everyone, 1, everyone, 0, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    int rc = spindle_group_create(&o, &sg, 1, &g);
    if (scenario == REFUSED) {
        if (rc != SPINDLE_EINVAL || strstr(spindle_errmsg(), "state_read refused") == NULL) {
            fprintf(stderr, "joiner: expected the refusal, got %d: %s\n", rc, spindle_errmsg());
            return 41;
        }
        return app.wrong || app.next_offset != REFUSED_AT + (1u << 20) ? 42 : JOINER_REFUSED;
    }
    if (rc != 0) {
        fprintf(stderr, "joiner: %s\n", spindle_errmsg());
        return 20;
    }
    int id = spindle_group_self(g);
    rc = spindle_group_shutdown(g, 30000);
    spindle_group_destroy(g);
    if (rc != 0) {
        fprintf(stderr, "joiner: shutdown: %s\n", spindle_errmsg());
        return 22;
    }
    if (id != MEMBERS || !app.ended || app.wrong)
        return 23;
    if (scenario == STREAMED &&
        (app.next_offset != STREAMED_STATE || app.chunks != STREAMED_STATE / (1u << 20) + 1))
        return 24;
    return 0;
}

static void run(enum scenario scenario, int joiner_status)
{
    char members[64], contact[32], self[32];
    uint16_t ports[MEMBERS + 1];
    for (int i = 0; i <= MEMBERS; i++)
        ports[i] = test_free_port();
    snprintf(members, sizeof members, "127.0.0.1:%u,127.0.0.1:%u", ports[0], ports[1]);
    snprintf(contact, sizeof contact, "127.0.0.1:%u", ports[0]);
    snprintf(self, sizeof self, "127.0.0.1:%u", ports[2]);
    int up[2], go[2];
    assert_int_equal(pipe(up), 0);
    assert_int_equal(pipe(go), 0);
    pid_t pids[MEMBERS + 1];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(120);
            _exit(member_main(scenario, members, i, up[1], go[0]));
        }
    }
    for (int i = 0; i < MEMBERS; i++) {
        char byte;
        assert_int_equal(read(up[0], &byte, 1), 1);
    }
    pids[MEMBERS] = fork();
    assert_true(pids[MEMBERS] >= 0);
    if (pids[MEMBERS] == 0) {
        alarm(120);
        _exit(joiner_main(scenario, contact, self));
    }
    /* The members may shut down once they are in the expected view. */
    assert_int_equal(write(go[1], "gg", MEMBERS), MEMBERS);
    for (uint32_t i = 0; i <= MEMBERS; i++) {
        int status = 0;
        int want = i == MEMBERS ? joiner_status : 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != want)
            fail_msg("%s %u: status %d, expected exit %d", i == MEMBERS ? "joiner" : "member", i,
                     status, want);
    }
    close(up[0]);
    close(up[1]);
    close(go[0]);
    close(go[1]);
}

static void test_a_saved_state_above_64_mib_arrives_whole(void **state)
{
    (void)state;
    run(SAVED_BIG, 0);
}

static void test_a_written_state_reaches_a_slow_reader_in_chunks(void **state)
{
    (void)state;
    run(STREAMED, 0);
}

static void test_a_refused_state_fails_the_join_not_the_group(void **state)
{
    (void)state;
    run(REFUSED, JOINER_REFUSED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_saved_state_above_64_mib_arrives_whole),
        cmocka_unit_test(test_a_written_state_reaches_a_slow_reader_in_chunks),
        cmocka_unit_test(test_a_refused_state_fails_the_join_not_the_group),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
