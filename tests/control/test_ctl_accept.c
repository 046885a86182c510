/*
 * The control channel's late accept path against strangers (control/
 * ctl_tcp_accept.c, docs/SECURITY.md), with real sockets on loopback,
 * without a key and with one:
 *   - while 200 idle connections and 20 garbage-sending ones, reopened as
 *     soon as the member closes them, beset a member's control port, it
 *     and another member complete publish/collect round trips and a
 *     joiner is answered and connects to its slot, all within a bound an
 *     accept path that waits a second per connection cannot meet; the
 *     refusals are logged at most CTL_REFUSAL_LOG_PER_S lines a second;
 *   - connections beyond CTL_PENDING_PER_SOURCE from one address are
 *     reset at once while the earlier ones stay pending until their
 *     deadline, and another address still joins meanwhile; beyond
 *     CTL_PENDING_MAX in all, a new address is reset too;
 *   - a connection that dribbles a partial hello (or nonce) is closed at
 *     its deadline, no sooner, while the member's round trips go on.
 * Stranger sources are other loopback addresses (127.0.0.2 and up), so a
 * member's own traffic (127.0.0.1) is a source of its own.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_ports.h"

#include <spindle/error.h>

#include "control/ctl.h"
#include "control/ctl_tcp_impl.h"
#include "control/ctl_wire.h"
#include "util/clock.h"

#define GROUP "ctl-accept"
/* What the flood test allows for everything it does; an accept path that
 * gives each connection up to CTL_HELLO_MS needs 200 s for the idle
 * connections alone. */
#define FLOOD_BOUND_MS 10000
#define IDLE_FLOOD     200
#define GARBAGE_FLOOD  20
#define ROUND_TRIPS    30

static const struct ctl_versions versions = {7, 9};
static struct ctl_keyring group_key = {.count = 1};

static const struct ctl_keyring *keys_for(bool keyed)
{
    return keyed ? &group_key : NULL;
}

static uint64_t now_ms(void)
{
    return sp_now_ns() / 1000000u;
}

static int setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN); /* writes to connections the member reset */
    memset(group_key.key[0], 0x5a, CTL_KEY_BYTES);
    return ctl_crypto_init();
}

/* A connection to 127.0.0.1:port from loopback address `source`. */
static int dial_from(const char *source, uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in from = {.sin_family = AF_INET};
    struct sockaddr_in to = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    inet_pton(AF_INET, source, &from.sin_addr);
    if (fd < 0 || bind(fd, (struct sockaddr *)&from, sizeof from) != 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Whether the member has closed fd (end of stream or a reset), looking
 * for up to wait_ms; bytes it sent (its hello) are read past. */
static bool closed_by_member(int fd, int wait_ms)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    while (poll(&pfd, 1, wait_ms) == 1) {
        char sink[128];
        ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return true;
        if (n < 0)
            return false;
    }
    return false;
}

/* Runs the member's progress (no join request is expected) for ms. */
static void progress(struct ctl *ctl, int ms)
{
    char request[16];
    size_t length = 0;
    assert_int_equal(ctl_join_poll(ctl, ms, request, sizeof request, &length), 0);
}

/* ---- helpers run as child processes ----------------------------------- */

/* Member `self` of a two-member mesh that echoes: for tag 1, 2, ... it
 * collects member 0's blob and publishes it back under the same tag, until
 * the blob is "done". Exits 0, or 2 (open) / 3 (an exchange) failed. */
static pid_t run_echo_member(const struct ctl_member *members, const struct ctl_keyring *keys)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid != 0)
        return pid;
    struct ctl *ctl = NULL;
    if (ctl_open_tcp(GROUP, members, 2, 1, &versions, keys, 10000, &ctl) != 0)
        _exit(2);
    for (uint32_t tag = 1;; tag++) {
        char blob[8];
        if (ctl_collect_one(ctl, tag, 0, blob, sizeof blob, 30000) != 0)
            _exit(3);
        if (strcmp(blob, "done") == 0)
            break;
        if (ctl_publish(ctl, tag, blob, sizeof blob, 0x1) != 0)
            _exit(3);
    }
    ctl_close(ctl);
    _exit(0);
}

/* A process that asks member 0 (at port) to join, expects "ok", then
 * connects to it as slot `slot` of a group of num_initial and exchanges a
 * blob each way (tag 9 out, tag 10 in). Exits 0, or 2/3/4 naming the step
 * that failed. */
static pid_t run_joiner(uint16_t port, uint32_t num_initial, uint32_t slot,
                        const struct ctl_keyring *keys)
{
    uint16_t own_port = test_free_port();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid != 0)
        return pid;
    void *reply = NULL;
    size_t length = 0;
    if (ctl_join_ask(GROUP, &versions, keys, "127.0.0.1", port, "let me in", 10, &reply, &length,
                     FLOOD_BOUND_MS) != 0 ||
        length != 3 || memcmp(reply, "ok", 3) != 0)
        _exit(2);
    free(reply);
    struct ctl_member members[CTL_MAX_MEMBERS];
    memset(members, 0, sizeof members);
    members[0] = (struct ctl_member){.host = "127.0.0.1", .id = 0, .port = port};
    members[slot] = (struct ctl_member){.host = "127.0.0.1", .id = slot, .port = own_port};
    struct ctl *ctl = NULL;
    if (ctl_open_tcp_joiner(GROUP, members, num_initial, slot, 1, &versions, keys, FLOOD_BOUND_MS,
                            &ctl) != 0)
        _exit(3);
    char blob[8] = "joined", got[8];
    if (ctl_publish(ctl, 9, blob, sizeof blob, 0x1) != 0 ||
        ctl_collect_one(ctl, 10, 0, got, sizeof got, FLOOD_BOUND_MS) != 0 ||
        strcmp(got, "member") != 0)
        _exit(4);
    ctl_close(ctl);
    _exit(0);
}

struct flooder {
    pid_t pid;
    int ready; /* reads 'r' once the member has taken the flood in, then the count of closes */
    int stop;  /* a byte written to it stops it */
};

/* A stranger's connection from source, connecting without blocking (so
 * that a full backlog cannot stop the flooder). */
static int flood_dial(const char *source, uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in from = {.sin_family = AF_INET};
    struct sockaddr_in to = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    inet_pton(AF_INET, source, &from.sin_addr);
    if (fd < 0 || bind(fd, (struct sockaddr *)&from, sizeof from) != 0 ||
        (connect(fd, (struct sockaddr *)&to, sizeof to) != 0 && errno != EINPROGRESS)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* One event on stranger connection pfd: true when the member closed it.
 * Once connected, garbage ones send 64 bytes of HTTP (a garbage hello, or
 * a nonce and a wrong proof); idle ones say nothing. */
static bool flood_event(struct pollfd *pfd, bool garbage)
{
    if (pfd->events == POLLOUT) {
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(pfd->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0)
            return err != ECONNREFUSED;
        char junk[64] = "GET / HTTP/1.0\r\nHost: spindle\r\n\r\n";
        if (garbage)
            (void)!send(pfd->fd, junk, sizeof junk, MSG_NOSIGNAL);
        pfd->events = POLLIN;
        return false;
    }
    char sink[256];
    ssize_t n = recv(pfd->fd, sink, sizeof sink, 0);
    return n == 0 || (n < 0 && errno != EAGAIN); /* n > 0: the member's hello or nonce */
}

/* A child holding count connections from source to port, opening each
 * again as soon as the member closes it, until stopped; it reports ready
 * once the member has closed all but CTL_PENDING_PER_SOURCE of the first
 * count (it has accepted them), and at the end how many it closed. */
static struct flooder run_flooder(const char *source, uint16_t port, int count, bool garbage)
{
    int ready[2], stop[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(stop), 0);
    struct flooder f = {fork(), ready[0], stop[1]};
    assert_true(f.pid >= 0);
    if (f.pid != 0) {
        close(ready[1]);
        close(stop[0]);
        return f;
    }
    close(ready[0]);
    close(stop[1]);
    struct pollfd pfds[1 + IDLE_FLOOD];
    pfds[0] = (struct pollfd){stop[0], POLLIN, 0};
    for (int i = 0; i < count; i++)
        pfds[1 + i] = (struct pollfd){flood_dial(source, port), POLLOUT, 0};
    uint32_t closes = 0;
    bool told = false;
    while (poll(pfds, (nfds_t)(1 + count), -1) >= 0 && pfds[0].revents == 0) {
        for (int i = 1; i <= count; i++) {
            if (pfds[i].fd >= 0 && (pfds[i].revents == 0 || !flood_event(&pfds[i], garbage)))
                continue;
            if (pfds[i].fd >= 0) {
                close(pfds[i].fd);
                closes++;
            }
            pfds[i] = (struct pollfd){flood_dial(source, port), POLLOUT, 0};
        }
        if (!told && closes >= (uint32_t)(count - CTL_PENDING_PER_SOURCE))
            told = write(ready[1], "r", 1) == 1;
    }
    (void)!write(ready[1], &closes, sizeof closes);
    _exit(0);
}

/* Stops f; returns how many of its connections the member closed. */
static uint32_t stop_flooder(struct flooder f)
{
    /* A byte, not a close: a flooder forked later holds this end too. */
    assert_int_equal(write(f.stop, "s", 1), 1);
    close(f.stop);
    uint32_t closes = 0;
    assert_int_equal(read(f.ready, &closes, sizeof closes), (ssize_t)sizeof closes);
    close(f.ready);
    int status = 0;
    assert_int_equal(waitpid(f.pid, &status, 0), f.pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return closes;
}

static void expect_exit_0(pid_t pid)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Waits (FLOOD_BOUND_MS at most) for a joiner's "let me in" and answers
 * "ok". */
static void answer_join(struct ctl *ctl)
{
    char request[16];
    size_t length = 0;
    int asked = 0;
    for (uint64_t give_up = now_ms() + FLOOD_BOUND_MS; asked == 0 && now_ms() < give_up;)
        asked = ctl_join_poll(ctl, 10, request, sizeof request, &length);
    assert_int_equal(asked, 1);
    assert_string_equal(request, "let me in");
    assert_int_equal(ctl_join_answer(ctl, "ok", 3), 0);
}

/* Opens member 0 of a two-member mesh whose member 1 echoes. */
static struct ctl *open_echo_pair(const struct ctl_keyring *keys, uint16_t *port, pid_t *echo)
{
    struct ctl_member members[2];
    for (uint32_t i = 0; i < 2; i++)
        members[i] = (struct ctl_member){.host = "127.0.0.1", .id = i, .port = test_free_port()};
    *echo = run_echo_member(members, keys);
    struct ctl *ctl = NULL;
    assert_int_equal(ctl_open_tcp(GROUP, members, 2, 0, &versions, keys, 10000, &ctl), 0);
    *port = members[0].port;
    return ctl;
}

/* One round trip through the echoing member 1; returns its milliseconds. */
static uint64_t round_trip(struct ctl *ctl, uint32_t tag)
{
    uint64_t start = now_ms();
    char blob[8], got[8];
    snprintf(blob, sizeof blob, "rt %u", tag);
    assert_int_equal(ctl_publish(ctl, tag, blob, sizeof blob, 0x2), 0);
    assert_int_equal(ctl_collect_one(ctl, tag, 1, got, sizeof got, FLOOD_BOUND_MS), 0);
    assert_string_equal(got, blob);
    return now_ms() - start;
}

static void finish_echo(struct ctl *ctl, uint32_t tag, pid_t echo)
{
    char done[8] = "done";
    assert_int_equal(ctl_publish(ctl, tag, done, sizeof done, 0x2), 0);
    expect_exit_0(echo);
    ctl_close(ctl);
}

/* ---- a flood of strangers --------------------------------------------- */

/* The member's log (stderr) goes to a file while the flood lasts. */
static int log_to_file(FILE **file, int *saved)
{
    fflush(stderr);
    *file = tmpfile();
    assert_non_null(*file);
    *saved = dup(2);
    assert_true(*saved >= 0);
    return dup2(fileno(*file), 2);
}

/* Restores stderr; returns how many refusal lines were logged. */
static uint32_t refusals_logged(FILE *file, int saved)
{
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(file);
    char line[512];
    uint32_t count = 0;
    while (fgets(line, sizeof line, file) != NULL)
        if (strstr(line, "dropped a connection") != NULL ||
            strstr(line, "more connections (not logged)") != NULL)
            count++;
    fclose(file);
    return count;
}

static void run_flood(bool keyed)
{
    const struct ctl_keyring *keys = keys_for(keyed);
    uint16_t port;
    pid_t echo;
    struct ctl *ctl = open_echo_pair(keys, &port, &echo);
    FILE *log;
    int saved;
    assert_true(log_to_file(&log, &saved) >= 0);
    uint64_t start = now_ms();
    struct flooder idle = run_flooder("127.0.0.2", port, IDLE_FLOOD, false);
    struct flooder junk = run_flooder("127.0.0.3", port, GARBAGE_FLOOD, true);
    /* The member's progress is what lets the strangers' connects through. */
    struct pollfd ready[2] = {{idle.ready, POLLIN, 0}, {junk.ready, POLLIN, 0}};
    for (int waiting = 2; waiting > 0;) {
        assert_true(now_ms() - start < FLOOD_BOUND_MS);
        progress(ctl, 10);
        if (poll(ready, 2, 0) <= 0)
            continue;
        for (int i = 0; i < 2; i++) {
            char byte;
            if (ready[i].revents == 0)
                continue;
            assert_int_equal(read(ready[i].fd, &byte, 1), 1);
            ready[i].fd = -1; /* poll skips it from now on */
            waiting--;
        }
    }
    /* Round trips for two deadlines at least: the strangers' pending
     * connections expire and are replaced meanwhile. */
    uint64_t worst = 0;
    uint32_t tag = 1;
    for (; tag <= ROUND_TRIPS || now_ms() - start < 2 * CTL_HELLO_MS; tag++) {
        uint64_t took = round_trip(ctl, tag);
        worst = took > worst ? took : worst;
    }
    /* A joiner is answered and connects to its slot, flood or not. */
    pid_t joiner = run_joiner(port, 2, 2, keys);
    answer_join(ctl);
    char got[8], blob[8] = "member";
    assert_int_equal(ctl_collect_one(ctl, 9, 2, got, sizeof got, FLOOD_BOUND_MS), 0);
    assert_string_equal(got, "joined");
    assert_int_equal(ctl_publish(ctl, 10, blob, sizeof blob, 1u << 2), 0);
    expect_exit_0(joiner);
    uint64_t elapsed = now_ms() - start;
    uint32_t idle_closed = stop_flooder(idle), junk_closed = stop_flooder(junk);
    uint32_t lines = refusals_logged(log, saved);
    printf("flood%s: %u round trips and a join in %llu ms (worst round trip %llu ms); the member "
           "closed %u idle and %u garbage connections and logged %u lines\n",
           keyed ? " (keyed)" : "", tag - 1, (unsigned long long)elapsed, (unsigned long long)worst,
           idle_closed, junk_closed, lines);
    assert_true(elapsed < FLOOD_BOUND_MS);
    /* Those beyond the cap per source were refused at once, not queued. */
    assert_true(idle_closed >= IDLE_FLOOD - CTL_PENDING_PER_SOURCE);
    assert_true(junk_closed >= GARBAGE_FLOOD - CTL_PENDING_PER_SOURCE);
    /* A line a refusal would be hundreds; the budget allows a few a second
     * (and one summing up the rest). */
    assert_true(lines > 0);
    assert_true(lines <= (CTL_REFUSAL_LOG_PER_S + 1) * (elapsed / 1000 + 2));
    finish_echo(ctl, tag, echo);
}

static void test_flood_holds_neither_round_trips_nor_joins(void **state)
{
    (void)state;
    run_flood(false);
}

static void test_flood_holds_neither_round_trips_nor_joins_keyed(void **state)
{
    (void)state;
    run_flood(true);
}

/* ---- caps ------------------------------------------------------------- */

static struct ctl *open_single(const struct ctl_keyring *keys, uint16_t *port)
{
    struct ctl_member me = {.host = "127.0.0.1", .id = 0, .port = test_free_port()};
    struct ctl *ctl = NULL;
    assert_int_equal(ctl_open_tcp(GROUP, &me, 1, 0, &versions, keys, 5000, &ctl), 0);
    *port = me.port;
    return ctl;
}

/* Runs the member's progress until every connection of fds[from..to) is
 * closed or 5 s passed; *at[i] is when fds[i] was seen closed. */
static void progress_until_closed(struct ctl *ctl, const int *fds, uint64_t *at, int from, int to)
{
    uint64_t give_up = now_ms() + 5000;
    for (int open = to - from; open > 0 && now_ms() < give_up;) {
        progress(ctl, 5);
        for (int i = from; i < to; i++)
            if (at[i] == 0 && closed_by_member(fds[i], 0)) {
                at[i] = now_ms();
                open--;
            }
    }
}

/* A join from 127.0.0.1 to the member at port, answered. */
static void join_round_trip(struct ctl *ctl, uint16_t port, const struct ctl_keyring *keys)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        void *reply = NULL;
        size_t length = 0;
        int rc = ctl_join_ask(GROUP, &versions, keys, "127.0.0.1", port, "let me in", 10, &reply,
                              &length, 5000);
        _exit(rc == 0 && length == 3 && memcmp(reply, "ok", 3) == 0 ? 0 : 1);
    }
    answer_join(ctl);
    expect_exit_0(pid);
}

static void run_per_source_cap(bool keyed)
{
    const struct ctl_keyring *keys = keys_for(keyed);
    uint16_t port;
    struct ctl *ctl = open_single(keys, &port);
    enum { EXTRA = 3, ALL = CTL_PENDING_PER_SOURCE + EXTRA };
    int fds[ALL];
    uint64_t at[ALL] = {0};
    uint64_t opened = now_ms();
    for (int i = 0; i < ALL; i++) {
        fds[i] = dial_from("127.0.0.4", port);
        assert_true(fds[i] >= 0);
    }
    /* Accepted in order: those beyond the cap are reset at once... */
    progress_until_closed(ctl, fds, at, CTL_PENDING_PER_SOURCE, ALL);
    for (int i = CTL_PENDING_PER_SOURCE; i < ALL; i++)
        assert_true(at[i] != 0);
    /* ...while the earlier ones are still pending. */
    for (int i = 0; i < CTL_PENDING_PER_SOURCE; i++)
        assert_false(closed_by_member(fds[i], 0));
    assert_true(now_ms() - opened < CTL_HELLO_MS);
    /* Another address is not held up by this one's connections. */
    join_round_trip(ctl, port, keys);
    /* The earlier ones go at their deadline, not before. */
    progress_until_closed(ctl, fds, at, 0, CTL_PENDING_PER_SOURCE);
    for (int i = 0; i < CTL_PENDING_PER_SOURCE; i++) {
        assert_true(at[i] != 0);
        assert_true(at[i] - opened >= CTL_HELLO_MS);
    }
    for (int i = 0; i < ALL; i++)
        close(fds[i]);
    ctl_close(ctl);
}

static void test_per_source_cap_resets_the_extra_connections(void **state)
{
    (void)state;
    run_per_source_cap(false);
}

static void test_per_source_cap_resets_the_extra_connections_keyed(void **state)
{
    (void)state;
    run_per_source_cap(true);
}

/* Dials count connections to port, the i-th from 127.0.1.(1 + i / per). */
static void fill_from(int *fds, int count, int per, uint16_t port)
{
    for (int i = 0; i < count; i++) {
        char source[32];
        snprintf(source, sizeof source, "127.0.1.%d", 1 + i / per);
        fds[i] = dial_from(source, port);
        assert_true(fds[i] >= 0);
    }
}

/* One connection from a quiet address, then four addresses with eight
 * (the last seven) fill the table; a join from yet another address still
 * gets in: it takes the place of the oldest connection of a busiest
 * address, not of the oldest one, and the others stay pending. */
static void run_full_table_gives_way(bool keyed)
{
    const struct ctl_keyring *keys = keys_for(keyed);
    uint16_t port;
    struct ctl *ctl = open_single(keys, &port);
    int fds[CTL_PENDING_MAX];
    uint64_t at[CTL_PENDING_MAX] = {0};
    uint64_t opened = now_ms();
    fds[0] = dial_from("127.0.1.9", port);
    assert_true(fds[0] >= 0);
    fill_from(fds + 1, CTL_PENDING_MAX - 1, CTL_PENDING_PER_SOURCE, port);
    /* Every one is taken in: none is reset while the table fills. */
    progress(ctl, 50);
    for (int i = 0; i < CTL_PENDING_MAX; i++)
        assert_false(closed_by_member(fds[i], 0));
    join_round_trip(ctl, port, keys);
    progress_until_closed(ctl, fds, at, 1, 2);
    assert_true(at[1] != 0);
    assert_false(closed_by_member(fds[0], 0));
    for (int i = 2; i < CTL_PENDING_MAX; i++)
        assert_false(closed_by_member(fds[i], 0));
    assert_true(now_ms() - opened < CTL_HELLO_MS);
    for (int i = 0; i < CTL_PENDING_MAX; i++)
        close(fds[i]);
    ctl_close(ctl);
}

static void test_full_table_gives_way_to_another_address(void **state)
{
    (void)state;
    run_full_table_gives_way(false);
}

static void test_full_table_gives_way_to_another_address_keyed(void **state)
{
    (void)state;
    run_full_table_gives_way(true);
}

/* CTL_PENDING_MAX addresses fill the table with one connection each; one
 * more, from the first of them, takes the place of the oldest (its own
 * address's), and the table keeps the others. */
static void test_full_table_of_single_addresses_gives_the_oldest_place(void **state)
{
    (void)state;
    uint16_t port;
    struct ctl *ctl = open_single(NULL, &port);
    enum { ALL = CTL_PENDING_MAX + 1 };
    int fds[ALL];
    uint64_t at[ALL] = {0};
    uint64_t opened = now_ms();
    fill_from(fds, CTL_PENDING_MAX, 1, port);
    fds[CTL_PENDING_MAX] = dial_from("127.0.1.1", port);
    assert_true(fds[CTL_PENDING_MAX] >= 0);
    progress_until_closed(ctl, fds, at, 0, 1);
    assert_true(at[0] != 0);
    for (int i = 1; i < ALL; i++)
        assert_false(closed_by_member(fds[i], 0));
    assert_true(now_ms() - opened < CTL_HELLO_MS);
    for (int i = 0; i < ALL; i++)
        close(fds[i]);
    ctl_close(ctl);
}

/* ---- a dribbled hello --------------------------------------------------- */

struct dribbler {
    pthread_t thread;
    uint16_t port;
    size_t length;    /* bytes that would complete the stage; one fewer is sent */
    atomic_int state; /* 0 connecting, 1 dribbling, 2 closed by the member */
    uint64_t opened, closed;
};

/* Sends one byte every 50 ms of a message it never completes, watching
 * for the member to close the connection. */
static void *dribble(void *arg)
{
    struct dribbler *d = arg;
    uint8_t hello[CTL_HELLO_SIZE];
    struct ctl_hello h = {1, 1, ctl_group_hash(GROUP), versions, 5};
    ctl_wire_encode_hello(&h, hello);
    d->opened = now_ms();
    int fd = dial_from("127.0.0.5", d->port);
    atomic_store(&d->state, fd >= 0 ? 1 : 2);
    for (size_t sent = 0; fd >= 0; sent++) {
        if (sent + 1 < d->length)
            (void)!send(fd, hello + sent, 1, MSG_NOSIGNAL);
        if (closed_by_member(fd, 50))
            break;
    }
    d->closed = now_ms();
    atomic_store(&d->state, 2);
    if (fd >= 0)
        close(fd);
    return NULL;
}

static void run_dribble(bool keyed)
{
    const struct ctl_keyring *keys = keys_for(keyed);
    uint16_t port;
    pid_t echo;
    struct ctl *ctl = open_echo_pair(keys, &port, &echo);
    struct dribbler d = {.port = port, .length = keyed ? CTL_NONCE_BYTES : CTL_HELLO_SIZE};
    atomic_init(&d.state, 0);
    assert_int_equal(pthread_create(&d.thread, NULL, dribble, &d), 0);
    uint64_t worst = 0;
    uint32_t tag = 1, during = 0;
    uint64_t give_up = now_ms() + FLOOD_BOUND_MS;
    for (int seen; (seen = atomic_load(&d.state)) != 2 && now_ms() < give_up;) {
        uint64_t took = round_trip(ctl, tag++);
        worst = took > worst ? took : worst;
        during += seen == 1 && atomic_load(&d.state) == 1; /* all of it while dribbling */
    }
    pthread_join(d.thread, NULL);
    printf("dribble%s: closed after %llu ms; %u round trips while it dribbled, the worst of all "
           "%llu ms\n",
           keyed ? " (keyed)" : "", (unsigned long long)(d.closed - d.opened), during,
           (unsigned long long)worst);
    assert_true(d.closed - d.opened >= CTL_HELLO_MS);
    assert_true(d.closed - d.opened < CTL_HELLO_MS + 3000);
    /* The member never waited on it: round trips went on while it
     * dribbled, none as long as the deadline a blocking accept would have
     * waited out (at most one round trip gets through there). */
    assert_true(during >= 3);
    assert_true(worst < CTL_HELLO_MS);
    finish_echo(ctl, tag, echo);
}

static void test_dribbled_hello_is_closed_at_its_deadline(void **state)
{
    (void)state;
    run_dribble(false);
}

static void test_dribbled_nonce_is_closed_at_its_deadline_keyed(void **state)
{
    (void)state;
    run_dribble(true);
}

/* ---- set-up ------------------------------------------------------------ */

struct opener {
    struct ctl_member members[2];
    const struct ctl_keyring *keys;
    struct ctl *ctl;
    int rc;
};

static void *open_member_0(void *arg)
{
    struct opener *o = arg;
    o->rc = ctl_open_tcp(GROUP, o->members, 2, 0, &versions, o->keys, 20000, &o->ctl);
    return NULL;
}

/* Dials port from source until something listens there. */
static int dial_when_listening(const char *source, uint16_t port)
{
    for (int tries = 0; tries < 500; tries++) {
        int fd = dial_from(source, port);
        if (fd >= 0)
            return fd;
        usleep(10000);
    }
    return -1;
}

/* Strangers connect to member 0 while it waits for member 1 during
 * set-up, and say nothing: member 1, started after them, still gets in
 * at once rather than after a second per stranger (set-up accepts
 * through the pending table too). */
static void run_setup_is_not_held(bool keyed)
{
    enum { STRANGERS = 10 };
    struct opener o = {.members = {{.host = "127.0.0.1", .id = 0, .port = test_free_port()},
                                   {.host = "127.0.0.1", .id = 1, .port = test_free_port()}},
                       .keys = keys_for(keyed)};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, open_member_0, &o), 0);
    int strangers[STRANGERS];
    for (int i = 0; i < STRANGERS; i++) {
        char source[32];
        snprintf(source, sizeof source, "127.0.3.%d", 1 + i);
        strangers[i] = dial_when_listening(source, o.members[0].port);
        assert_true(strangers[i] >= 0);
    }
    uint64_t started = now_ms();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct ctl *ctl = NULL;
        int rc = ctl_open_tcp(GROUP, o.members, 2, 1, &versions, o.keys, 20000, &ctl);
        ctl_close(ctl);
        _exit(rc == 0 ? 0 : 1);
    }
    pthread_join(thread, NULL);
    uint64_t took = now_ms() - started;
    assert_int_equal(o.rc, 0);
    expect_exit_0(pid);
    /* The blocking acceptor took CTL_HELLO_MS per stranger here: 10 s. */
    assert_true(took < STRANGERS * CTL_HELLO_MS / 2);
    for (int i = 0; i < STRANGERS; i++)
        close(strangers[i]);
    ctl_close(o.ctl);
}

static void test_setup_is_not_held_by_silent_strangers(void **state)
{
    (void)state;
    run_setup_is_not_held(false);
}

static void test_setup_is_not_held_by_silent_strangers_keyed(void **state)
{
    (void)state;
    run_setup_is_not_held(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flood_holds_neither_round_trips_nor_joins),
        cmocka_unit_test(test_flood_holds_neither_round_trips_nor_joins_keyed),
        cmocka_unit_test(test_per_source_cap_resets_the_extra_connections),
        cmocka_unit_test(test_per_source_cap_resets_the_extra_connections_keyed),
        cmocka_unit_test(test_full_table_gives_way_to_another_address),
        cmocka_unit_test(test_full_table_gives_way_to_another_address_keyed),
        cmocka_unit_test(test_full_table_of_single_addresses_gives_the_oldest_place),
        cmocka_unit_test(test_dribbled_hello_is_closed_at_its_deadline),
        cmocka_unit_test(test_dribbled_nonce_is_closed_at_its_deadline_keyed),
        cmocka_unit_test(test_setup_is_not_held_by_silent_strangers),
        cmocka_unit_test(test_setup_is_not_held_by_silent_strangers_keyed),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
