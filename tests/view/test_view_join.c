/*
 * Joins with real processes over shm and a loopback TCP bootstrap.
 *
 * A join that meets the group's shutdown: members 1 and 2 have entered
 * spindle_group_shutdown (they are in its barrier) when a process asks to
 * join; member 0, the leader, has not, so it admits the joiner. Members in
 * the barrier must take part in the join's view change, the barrier must
 * restart in the new view with the joiner, and every shutdown, the
 * joiner's included, must succeed. The state handed over is checked too:
 * the joiner must load exactly the leader's delivery count as of its first
 * view, which is every message sent (all were flushed before the join).
 *
 * Ids given again: more processes join (and leave) one running group than
 * there are member ids; each gets an id no member of its view holds, ids
 * of departed joiners are given again (below the id of a joiner still in
 * the group too), and every join and leave succeeds. At the end two
 * joiners leave back to back: the second leave lands inside the view
 * change of the first, and the survivors must start that change again
 * under both (they read each other's second blob of the change).
 *
 * A joiner pointed at a hostile contact fails with an error within its
 * bootstrap timeout, never crashing or hanging: a contact that answers
 * every connection with garbage (with a key and without), one that
 * accepts and says nothing, and a leader that lies in its admission
 * (view_test_offer): members' addresses the joiner cannot reach, or the
 * joiner's id given to a member too. The lying leader's shutdown returns
 * in time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_ports.h"
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <spindle/spindle.h>

#include "view/view_impl.h"

#define MEMBERS  3
#define MESSAGES 200

#include "join_app.h"

static const uint32_t everyone[MEMBERS] = {0, 1, 2};

/* Member self: sends, flushes, then (1, 2) enters shutdown at once and
 * writes a byte to `closing` first; the leader waits for the joiner's byte
 * on `joined` before its own shutdown. */
static int member_main(const char *members, uint32_t self, int closing, int joined)
{
    struct app app = {0};
    struct spindle_group_options o;
    join_app_options(&o, &app, members);
    o.self = self;
    o.num_members = MEMBERS;
    struct spindle_subgroup_config sg = {everyone, MEMBERS, everyone,           MEMBERS,
                                         16,       64,      SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    if (spindle_group_create(&o, &sg, 1, &g) != 0)
        return 2;
    for (uint64_t i = 0; i < MESSAGES; i++)
        if (spindle_send(g, 0, &i, sizeof i, 0) != 0)
            return 3;
    if (spindle_flush(g, 20000) != 0)
        return 4;
    /* Every member's messages are in: flush waits for own messages only. */
    while (__atomic_load_n(&app.delivered, __ATOMIC_ACQUIRE) < MEMBERS * MESSAGES)
        usleep(1000);
    if (self != 0 && write(closing, "c", 1) != 1)
        return 5;
    if (self == 0) {
        char byte;
        if (read(joined, &byte, 1) != 1)
            return 6;
    }
    int rc = spindle_group_shutdown(g, 30000);
    uint64_t view = __atomic_load_n(&app.view_id, __ATOMIC_ACQUIRE);
    spindle_group_destroy(g);
    if (rc != 0) {
        fprintf(stderr, "member %u: shutdown: %s\n", self, spindle_errmsg());
        return 7;
    }
    return view == 1 ? 0 : 8; /* the join's view */
}

static int joiner_main(const char *contact, const char *self, int joined)
{
    struct app app = {0};
    struct spindle_group_options o;
    join_app_options(&o, &app, self);
    o.join = contact;
    struct spindle_subgroup_config sg = {everyone, 1, everyone, 0, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    if (spindle_group_create(&o, &sg, 1, &g) != 0) {
        fprintf(stderr, "joiner: %s\n", spindle_errmsg());
        return 20;
    }
    int id = spindle_group_self(g);
    if (write(joined, "j", 1) != 1)
        return 21;
    int rc = spindle_group_shutdown(g, 30000);
    spindle_group_destroy(g);
    if (rc != 0) {
        fprintf(stderr, "joiner: shutdown: %s\n", spindle_errmsg());
        return 22;
    }
    /* The state as of view 1: everything sent in view 0. */
    return id == MEMBERS && app.loaded == MEMBERS * MESSAGES ? 0 : 23;
}

static void test_join_while_members_shut_down(void **state)
{
    (void)state;
    char members[128], contact[32], self[32];
    uint16_t ports[MEMBERS + 1];
    for (int i = 0; i <= MEMBERS; i++)
        ports[i] = test_free_port();
    snprintf(members, sizeof members, "127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u", ports[0], ports[1],
             ports[2]);
    snprintf(contact, sizeof contact, "127.0.0.1:%u", ports[1]); /* redirected to 0 */
    snprintf(self, sizeof self, "127.0.0.1:%u", ports[3]);
    int closing[2], joined[2];
    assert_int_equal(pipe(closing), 0);
    assert_int_equal(pipe(joined), 0);
    pid_t pids[MEMBERS + 1];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(90);
            _exit(member_main(members, i, closing[1], joined[0]));
        }
    }
    /* Members 1 and 2 are entering their shutdown barrier. */
    for (int i = 0; i < MEMBERS - 1; i++) {
        char byte;
        assert_int_equal(read(closing[0], &byte, 1), 1);
    }
    pids[MEMBERS] = fork();
    assert_true(pids[MEMBERS] >= 0);
    if (pids[MEMBERS] == 0) {
        alarm(90);
        _exit(joiner_main(contact, self, joined[1]));
    }
    close(joined[1]);
    for (uint32_t i = 0; i <= MEMBERS; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("%s %u: status %d", i == MEMBERS ? "joiner" : "member", i, status);
    }
}

#define REUSE_JOINS 70 /* more than the 64 member ids */

/* An initial member of the reuse test: in the group until its byte on
 * `stop` comes, then shuts down. */
static int staying_member(const char *members, uint32_t self, int stop)
{
    struct app app = {0};
    struct spindle_group_options o;
    join_app_options(&o, &app, members);
    o.self = self;
    o.num_members = MEMBERS;
    o.state_save = NULL;
    struct spindle_subgroup_config sg = {everyone, MEMBERS, everyone,           MEMBERS,
                                         16,       64,      SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    if (spindle_group_create(&o, &sg, 1, &g) != 0) {
        fprintf(stderr, "member %u: %s\n", self, spindle_errmsg());
        return 2;
    }
    char byte;
    if (read(stop, &byte, 1) != 1)
        return 3;
    int rc = spindle_group_shutdown(g, 30000);
    spindle_group_destroy(g);
    if (rc != 0) {
        fprintf(stderr, "member %u: shutdown: %s\n", self, spindle_errmsg());
        return 4;
    }
    return 0;
}

/* A joiner of the reuse test: joins, reports its id on `report`, leaves
 * when its byte on `leave` comes. */
static int passing_joiner(const char *contact, const char *self, int report, int leave)
{
    struct app app = {0};
    struct spindle_group_options o;
    join_app_options(&o, &app, self);
    o.join = contact;
    o.state_save = NULL;
    o.state_load = NULL;
    struct spindle_subgroup_config sg = {everyone, 1, everyone, 0, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    if (spindle_group_create(&o, &sg, 1, &g) != 0) {
        fprintf(stderr, "joiner at %s: %s\n", self, spindle_errmsg());
        return 20;
    }
    int32_t id = spindle_group_self(g);
    char byte;
    if (write(report, &id, sizeof id) != (ssize_t)sizeof id || read(leave, &byte, 1) != 1)
        return 21;
    int rc = spindle_group_leave(g, 30000);
    spindle_group_destroy(g);
    if (rc != 0) {
        fprintf(stderr, "joiner %d: leave: %s\n", id, spindle_errmsg());
        return 22;
    }
    return 0;
}

static void expect_exit_0(pid_t pid, const char *who, int index)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("%s %d: status %d", who, index, status);
}

static void test_ids_of_departed_joiners_are_given_again(void **state)
{
    (void)state;
    char members[128], contact[32];
    uint16_t ports[MEMBERS];
    for (int i = 0; i < MEMBERS; i++)
        ports[i] = test_free_port();
    snprintf(members, sizeof members, "127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u", ports[0], ports[1],
             ports[2]);
    snprintf(contact, sizeof contact, "127.0.0.1:%u", ports[2]);
    int stop[2], report[2];
    assert_int_equal(pipe(stop), 0);
    assert_int_equal(pipe(report), 0);
    pid_t pids[MEMBERS];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(240);
            _exit(staying_member(members, i, stop[0]));
        }
    }
    /* Two joiners are in the group at a time: the older one leaves before
     * the next one joins, so the next gets the older one's id (or, while
     * that departure is not installed yet, another free one). */
    pid_t joiner[REUSE_JOINS];
    int leave[REUSE_JOINS];
    int32_t ids[REUSE_JOINS];
    uint64_t seen = 0;
    int reused = 0, below_a_member = 0;
    for (int j = 0; j < REUSE_JOINS; j++) {
        if (j >= 2) {
            assert_int_equal(write(leave[j - 2], "l", 1), 1);
            close(leave[j - 2]);
            expect_exit_0(joiner[j - 2], "joiner", j - 2);
        }
        char self[32];
        snprintf(self, sizeof self, "127.0.0.1:%u", test_free_port());
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        joiner[j] = fork();
        assert_true(joiner[j] >= 0);
        if (joiner[j] == 0) {
            alarm(120);
            close(fds[1]);
            _exit(passing_joiner(contact, self, report[1], fds[0]));
        }
        close(fds[0]);
        leave[j] = fds[1];
        if (read(report[0], &ids[j], sizeof ids[j]) != (ssize_t)sizeof ids[j])
            fail_msg("joiner %d never reported its id", j);
        /* An id no member of its view holds. */
        assert_true(ids[j] >= MEMBERS && ids[j] < 64);
        if (j >= 1)
            assert_int_not_equal(ids[j], ids[j - 1]);
        if ((seen >> ids[j]) & 1)
            reused++;
        if (j >= 1 && ids[j] < ids[j - 1])
            below_a_member++;
        seen |= 1ull << ids[j];
    }
    for (int j = REUSE_JOINS - 2; j < REUSE_JOINS; j++) {
        assert_int_equal(write(leave[j], "l", 1), 1);
        close(leave[j]);
        expect_exit_0(joiner[j], "joiner", j);
    }
    for (uint32_t i = 0; i < MEMBERS; i++)
        assert_int_equal(write(stop[1], "s", 1), 1);
    for (uint32_t i = 0; i < MEMBERS; i++)
        expect_exit_0(pids[i], "member", (int)i);
    /* 70 joins into 61 free ids: ids were given again, some below the id
     * of the joiner that was in the group at the time. */
    assert_true(reused >= REUSE_JOINS - 61);
    assert_true(below_a_member > 0);
}

/*
 * A member that fails while a joiner starts its first view: member 2 dies
 * right after installing the view that admits the joiner, before it meets
 * the others at its start (a test hook). The joiner must not wait for it:
 * it starts with members 0 and 1, and the three of them, a majority of
 * the four, remove member 2 in the next view and shut down together.
 */
static void die_before_meet(struct view_membership *m, uint32_t joiner)
{
    (void)m;
    (void)joiner;
    raise(SIGKILL);
}

/* Waits (bounded by the process's alarm) until the view reaches `view`. */
static void wait_view(struct app *app, uint64_t view)
{
    while (__atomic_load_n(&app->view_id, __ATOMIC_ACQUIRE) < view)
        usleep(1000);
}

static int meet_member(const char *members, uint32_t self, int ready)
{
    struct app app = {0};
    struct spindle_group_options o;
    join_app_options(&o, &app, members);
    o.self = self;
    o.num_members = MEMBERS;
    o.state_save = NULL;
    if (self == 2)
        view_test_before_meet(die_before_meet);
    struct spindle_subgroup_config sg = {everyone, MEMBERS, everyone,           MEMBERS,
                                         16,       64,      SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    if (spindle_group_create(&o, &sg, 1, &g) != 0) {
        fprintf(stderr, "member %u: %s\n", self, spindle_errmsg());
        return 2;
    }
    if (write(ready, "r", 1) != 1)
        return 3;
    wait_view(&app, 2); /* view 1 admits the joiner, view 2 removes member 2 */
    int size = spindle_group_size(g);
    int rc = spindle_group_shutdown(g, 30000);
    spindle_group_destroy(g);
    if (rc != 0) {
        fprintf(stderr, "member %u: shutdown: %s\n", self, spindle_errmsg());
        return 4;
    }
    return size == MEMBERS ? 0 : 5;
}

static int meet_joiner(const char *contact, const char *self)
{
    struct app app = {0};
    struct spindle_group_options o;
    join_app_options(&o, &app, self);
    o.join = contact;
    o.state_save = NULL;
    o.state_load = NULL;
    struct spindle_subgroup_config sg = {everyone, 1, everyone, 0, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    if (spindle_group_create(&o, &sg, 1, &g) != 0) {
        fprintf(stderr, "joiner: %s\n", spindle_errmsg());
        return 20;
    }
    wait_view(&app, 2);
    int size = spindle_group_size(g);
    int rc = spindle_group_shutdown(g, 30000);
    spindle_group_destroy(g);
    if (rc != 0) {
        fprintf(stderr, "joiner: shutdown: %s\n", spindle_errmsg());
        return 21;
    }
    return size == MEMBERS ? 0 : 22;
}

static void test_a_member_failing_as_a_joiner_starts_is_removed(void **state)
{
    (void)state;
    char members[128], contact[32], self[32];
    uint16_t ports[MEMBERS];
    for (int i = 0; i < MEMBERS; i++)
        ports[i] = test_free_port();
    snprintf(members, sizeof members, "127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u", ports[0], ports[1],
             ports[2]);
    snprintf(contact, sizeof contact, "127.0.0.1:%u", ports[0]);
    snprintf(self, sizeof self, "127.0.0.1:%u", test_free_port());
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t pids[MEMBERS + 1];
    for (uint32_t i = 0; i < MEMBERS; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            alarm(90);
            _exit(meet_member(members, i, ready[1]));
        }
    }
    for (int i = 0; i < MEMBERS; i++) {
        char byte;
        assert_int_equal(read(ready[0], &byte, 1), 1);
    }
    pids[MEMBERS] = fork();
    assert_true(pids[MEMBERS] >= 0);
    if (pids[MEMBERS] == 0) {
        alarm(90);
        _exit(meet_joiner(contact, self));
    }
    expect_exit_0(pids[0], "member", 0);
    expect_exit_0(pids[1], "member", 1);
    expect_exit_0(pids[MEMBERS], "joiner", 0);
    int status = 0;
    assert_int_equal(waitpid(pids[2], &status, 0), pids[2]);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/* ---- a joiner pointed at a hostile contact ------------------------------ */

#define HOSTILE_TIMEOUT_MS 2000
#define HOSTILE_SLACK_MS   5000 /* a loaded machine: a bound against a hang */

enum contact_kind { CONTACT_GARBAGE, CONTACT_SILENT };

struct hostile {
    int listener;
    int stop[2];
    enum contact_kind kind;
    int held[64]; /* CONTACT_SILENT: connections held open, never answered */
    unsigned num_held;
    unsigned accepted;
};

/* Accepts connections until stop: answers each with 4 KiB of garbage and
 * closes it, or holds it open and says nothing. */
static void *hostile_main(void *arg)
{
    struct hostile *h = arg;
    uint8_t garbage[4096];
    for (size_t i = 0; i < sizeof garbage; i++)
        garbage[i] = (uint8_t)(i * 131u + 7u);
    for (;;) {
        struct pollfd fds[2] = {{.fd = h->listener, .events = POLLIN},
                                {.fd = h->stop[0], .events = POLLIN}};
        if (poll(fds, 2, -1) < 0 || (fds[1].revents & POLLIN))
            break;
        int fd = accept(h->listener, NULL, NULL);
        if (fd < 0)
            continue;
        h->accepted++;
        if (h->kind == CONTACT_GARBAGE) {
            ssize_t n = send(fd, garbage, sizeof garbage, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)n;
            close(fd);
        } else if (h->num_held < sizeof h->held / sizeof h->held[0]) {
            h->held[h->num_held++] = fd;
        } else {
            close(fd);
        }
    }
    return NULL;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Joins through contact with a bootstrap timeout of HOSTILE_TIMEOUT_MS
 * (and key_file, unless NULL): the join must fail, within the timeout and
 * the slack, with an error whose message holds why. Returns the error. */
static int join_must_fail(const char *contact, const char *key_file, const char *why)
{
    char self[32];
    snprintf(self, sizeof self, "127.0.0.1:%u", test_free_port());
    struct app app = {0};
    struct spindle_group_options o;
    join_app_options(&o, &app, self);
    o.join = contact;
    o.key_file = key_file;
    o.bootstrap_timeout_ms = HOSTILE_TIMEOUT_MS;
    struct spindle_subgroup_config sg = {everyone, 1, everyone, 0, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    uint64_t start = now_ms();
    int rc = spindle_group_create(&o, &sg, 1, &g);
    uint64_t took = now_ms() - start;
    if (rc == 0)
        spindle_group_destroy(g);
    assert_int_not_equal(rc, 0);
    assert_null(g);
    if (strstr(spindle_errmsg(), why) == NULL)
        fail_msg("the join through %s failed with %d (%s), not naming '%s'", contact, rc,
                 spindle_errmsg(), why);
    if (took > HOSTILE_TIMEOUT_MS + HOSTILE_SLACK_MS)
        fail_msg("the join through %s took %llu ms to fail: %s", contact, (unsigned long long)took,
                 spindle_errmsg());
    return rc;
}

static void hostile_contact(enum contact_kind kind, const char *key_file, const char *why)
{
    struct hostile h = {.kind = kind};
    h.listener = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(h.listener >= 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(h.listener, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(listen(h.listener, 64), 0);
    socklen_t len = sizeof sin;
    assert_int_equal(getsockname(h.listener, (struct sockaddr *)&sin, &len), 0);
    assert_int_equal(pipe(h.stop), 0);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, hostile_main, &h), 0);
    char contact[32];
    snprintf(contact, sizeof contact, "127.0.0.1:%u", ntohs(sin.sin_port));
    join_must_fail(contact, key_file, why);
    assert_int_equal(write(h.stop[1], "s", 1), 1);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_true(h.accepted >= 1); /* the joiner did reach it */
    for (unsigned i = 0; i < h.num_held; i++)
        close(h.held[i]);
    close(h.listener);
    close(h.stop[0]);
    close(h.stop[1]);
}

/* A 32-byte key file of mode 0600 in a new directory; *dir to remove. */
static void make_key(char *path, size_t size, char *dir)
{
    assert_non_null(mkdtemp(dir));
    snprintf(path, size, "%s/group.key", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    uint8_t key[32];
    for (size_t i = 0; i < sizeof key; i++)
        key[i] = (uint8_t)(i * 37u + 1u);
    assert_int_equal(write(fd, key, sizeof key), sizeof key);
    close(fd);
}

static void test_a_joiner_fails_in_time_against_a_contact_answering_garbage(void **state)
{
    (void)state;
    hostile_contact(CONTACT_GARBAGE, NULL, "answered with a bad hello");
    char key[64], dir[] = "/tmp/spindle-hostile-XXXXXX";
    make_key(key, sizeof key, dir);
    hostile_contact(CONTACT_GARBAGE, key, "failed authentication with the group key");
    unlink(key);
    rmdir(dir);
}

static void test_a_joiner_fails_in_time_against_a_silent_contact(void **state)
{
    (void)state;
    hostile_contact(CONTACT_SILENT, NULL, "could not join within 2000 ms");
}

/* Lies of a leader in its admission (view_test_offer). */
static uint16_t dead_port;

/* Every member's address names a port nobody listens on: well formed, so
 * the joiner acts on it and must give up connecting in time. */
static void lie_about_addresses(struct view_join_offer *offer)
{
    for (uint32_t row = 0; row < offer->num_rows; row++)
        offer->addresses[row].port = dead_port;
}

/* The joiner's id is also a member's: the decoder refuses the offer. */
static void lie_about_ids(struct view_join_offer *offer)
{
    offer->member_ids[offer->my_row] = offer->member_ids[0];
}

/* A lone member that lies in every admission it gives; it stays until its
 * byte on `stop` comes, then shuts down, which must succeed in time. */
static int lying_leader(const char *members, view_offer_hook_fn lie, int ready, int stop)
{
    view_test_offer(lie);
    struct app app = {0};
    struct spindle_group_options o;
    join_app_options(&o, &app, members);
    o.self = 0;
    o.num_members = 1;
    struct spindle_subgroup_config sg = {everyone, 1, everyone, 1, 16, 64, SPINDLE_MODE_ATOMIC};
    spindle_group_t *g = NULL;
    if (spindle_group_create(&o, &sg, 1, &g) != 0) {
        fprintf(stderr, "lying leader: %s\n", spindle_errmsg());
        return 2;
    }
    char byte;
    if (write(ready, "r", 1) != 1 || read(stop, &byte, 1) != 0)
        return 3;
    uint64_t start = now_ms();
    int rc = spindle_group_shutdown(g, 10000);
    uint64_t took = now_ms() - start;
    spindle_group_destroy(g);
    if (rc != 0 || took > 12000) {
        fprintf(stderr, "lying leader: shutdown %d after %llu ms: %s\n", rc,
                (unsigned long long)took, spindle_errmsg());
        return 4;
    }
    return 0;
}

static void lying_offer(view_offer_hook_fn lie, const char *why)
{
    char members[32];
    uint16_t port = test_free_port();
    dead_port = test_free_port();
    snprintf(members, sizeof members, "127.0.0.1:%u", port);
    int ready[2], stop[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(stop), 0);
    pid_t leader = fork();
    assert_true(leader >= 0);
    if (leader == 0) {
        alarm(90);
        close(ready[0]);
        close(stop[1]);
        _exit(lying_leader(members, lie, ready[1], stop[0]));
    }
    close(ready[1]);
    close(stop[0]);
    char byte;
    assert_int_equal(read(ready[0], &byte, 1), 1);
    join_must_fail(members, NULL, why);
    close(stop[1]);
    close(ready[0]);
    expect_exit_0(leader, "lying leader", 0);
}

static void test_a_joiner_fails_in_time_against_a_lying_offer(void **state)
{
    (void)state;
    lying_offer(lie_about_addresses, "is unreachable");
    lying_offer(lie_about_ids, "answered the join request with garbage");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_join_while_members_shut_down),
        cmocka_unit_test(test_ids_of_departed_joiners_are_given_again),
        cmocka_unit_test(test_a_member_failing_as_a_joiner_starts_is_removed),
        cmocka_unit_test(test_a_joiner_fails_in_time_against_a_contact_answering_garbage),
        cmocka_unit_test(test_a_joiner_fails_in_time_against_a_silent_contact),
        cmocka_unit_test(test_a_joiner_fails_in_time_against_a_lying_offer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
