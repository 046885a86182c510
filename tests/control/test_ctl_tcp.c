/*
 * TCP control channel: three processes allgather blobs of two sizes; a
 * stray client speaking garbage during set-up is dropped; a member that
 * sends a garbage frame or a frame of the wrong length is rejected with
 * SPINDLE_EPROTO naming it; a taken port and an absent member are named.
 * After set-up, a hostile member's garbage, oversized or truncated frames
 * cut only that member off while the others go on exchanging; a member of
 * another group is refused at the hello, and a member of another build
 * (other layout versions) is refused with both versions named.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_ports.h"

#include <spindle/error.h>

#include "control/ctl.h"
#include "control/ctl_wire.h"
#include "util/crc32c.h"

/* The layout versions every member of these tests claims. */
static const struct ctl_versions versions = {7, 9};

/* Forging: a hello or frame header through the channel's own encoder,
 * optionally spoiled afterwards by the caller. */
static void forge_hello_of(uint8_t out[CTL_HELLO_SIZE], uint32_t from, uint32_t num_members,
                           const char *group, uint64_t admission)
{
    struct ctl_hello h = {from, num_members, ctl_group_hash(group), versions, admission};
    ctl_wire_encode_hello(&h, out);
}

static void forge_hello(uint8_t out[CTL_HELLO_SIZE], uint32_t from, uint32_t num_members,
                        const char *group)
{
    forge_hello_of(out, from, num_members, group, 0);
}

static void forge_frame(uint8_t out[CTL_FRAME_SIZE], uint32_t tag, uint32_t from, uint32_t length,
                        const void *payload, size_t crc_bytes)
{
    struct ctl_frame f = {tag, from, length, sp_crc32c(0, payload, crc_bytes)};
    ctl_wire_encode_frame(&f, out);
}

/* Overwrites the little-endian u32 at offset of a forged message. */
static void spoil_u32(uint8_t *message, size_t offset, uint32_t value)
{
    for (int i = 0; i < 4; i++)
        message[offset + i] = (uint8_t)(value >> (8 * i));
}

static int member_main(const struct ctl_member *members, uint32_t self)
{
    struct ctl *ctl = NULL;
    if (ctl_open_tcp("ctl-test", members, 3, self, &versions, NULL, 10000, &ctl) != 0) {
        fprintf(stderr, "member %u open: %s\n", self, spindle_errmsg());
        return 2;
    }
    char mine[32], all[3 * 32];
    snprintf(mine, sizeof mine, "blob of member %u", self);
    if (ctl_allgather(ctl, 1, mine, sizeof mine, all, 10000) != 0)
        return 3;
    for (uint32_t j = 0; j < 3; j++) {
        char expect[32];
        snprintf(expect, sizeof expect, "blob of member %u", j);
        if (strcmp(all + j * 32, expect) != 0)
            return 4;
    }
    /* A large blob: more than the socket buffers hold at once. */
    size_t big = 4u << 20;
    uint8_t *blob = malloc(big), *every = malloc(3 * big);
    for (size_t i = 0; i < big; i++)
        blob[i] = (uint8_t)(i * 31 + self);
    int rc = ctl_allgather(ctl, 2, blob, big, every, 20000);
    for (uint32_t j = 0; rc == 0 && j < 3; j++)
        for (size_t i = 0; i < big; i += 4099)
            if (every[j * big + i] != (uint8_t)(i * 31 + j))
                rc = 5;
    free(blob);
    free(every);
    ctl_close(ctl);
    return rc == 0 ? 0 : 5;
}

static void test_three_members_allgather(void **state)
{
    (void)state;
    struct ctl_member members[3];
    for (uint32_t i = 0; i < 3; i++)
        members[i] =
            (struct ctl_member){.host = "127.0.0.1", .id = 10 + i, .port = test_free_port()};
    pid_t pids[3];
    for (uint32_t i = 0; i < 3; i++) {
        pids[2 - i] = fork(); /* start the highest first: connects must retry */
        if (pids[2 - i] == 0)
            _exit(member_main(members, 2 - i));
    }
    for (int i = 0; i < 3; i++) {
        int status = 0;
        waitpid(pids[i], &status, 0);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
}

/* Reads until the other side closes (the member answers every hello with
 * its own; closing with that unread would reset the connection and lose
 * what was sent before). */
static void drain(int fd)
{
    char sink[64];
    while (read(fd, sink, sizeof sink) > 0)
        ;
}

static int dial(uint16_t port)
{
    struct sockaddr_in sin = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int tries = 0; tries < 500; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&sin, sizeof sin) == 0)
            return fd;
        close(fd);
        usleep(10000);
    }
    return -1;
}

/* Forged member 1: a stray garbage client first, then a proper hello and
 * the frame chosen by mode (0 garbage magic, 1 a well-formed frame of the
 * wrong length, 12 bytes where 16 are expected). */
static int forger_main(uint16_t port, int mode)
{
    int stray = dial(port);
    if (stray < 0)
        return 2;
    const char junk[] = "GET / HTTP/1.0\r\n\r\n";
    (void)!write(stray, junk, sizeof junk);
    int fd = dial(port);
    if (fd < 0)
        return 3;
    uint8_t h[CTL_HELLO_SIZE], f[CTL_FRAME_SIZE];
    forge_hello(h, 1, 2, "ctl-test");
    (void)!write(fd, h, sizeof h);
    char payload[16] = "sixteen bytes!!";
    forge_frame(f, 1, 1, mode == 1 ? 12u : 16u, payload, mode == 1 ? 12 : 16);
    if (mode == 0)
        spoil_u32(f, 0, 0xdeadbeefu);
    (void)!write(fd, f, sizeof f);
    (void)!write(fd, payload, 16);
    drain(fd); /* hold the connection until the member gives up */
    close(fd);
    close(stray);
    return 0;
}

static void run_forged(int mode, const char *expect)
{
    uint16_t port = test_free_port(), other = test_free_port();
    pid_t pid = fork();
    if (pid == 0)
        _exit(forger_main(port, mode));
    struct ctl_member members[2] = {{.host = "127.0.0.1", .id = 0, .port = port},
                                    {.host = "127.0.0.1", .id = 1, .port = other}};
    struct ctl *ctl = NULL;
    assert_int_equal(ctl_open_tcp("ctl-test", members, 2, 0, &versions, NULL, 10000, &ctl), 0);
    char mine[16] = "member zero ....", all[32];
    assert_int_equal(ctl_allgather(ctl, 1, mine, 16, all, 5000), SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "member 1"));
    assert_non_null(strstr(spindle_errmsg(), expect));
    ctl_close(ctl);
    int status = 0;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void test_garbage_frame_is_rejected(void **state)
{
    (void)state;
    run_forged(0, "garbage");
}

static void test_wrong_length_is_rejected(void **state)
{
    (void)state;
    run_forged(1, "12 bytes");
}

static void test_taken_port_and_absent_member_are_named(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(listen(fd, 1), 0);
    socklen_t len = sizeof sin;
    getsockname(fd, (struct sockaddr *)&sin, &len);
    uint16_t taken = ntohs(sin.sin_port);
    struct ctl_member members[2] = {{.host = "127.0.0.1", .id = 0, .port = taken},
                                    {.host = "127.0.0.1", .id = 1, .port = test_free_port()}};
    struct ctl *ctl = NULL;
    assert_int_equal(ctl_open_tcp("ctl-test", members, 2, 0, &versions, NULL, 500, &ctl),
                     SPINDLE_EADDRINUSE);
    char expect[32];
    snprintf(expect, sizeof expect, "127.0.0.1:%u", taken);
    assert_non_null(strstr(spindle_errmsg(), expect));
    close(fd);

    /* Member 1 waits for member 0, which never comes. */
    members[0].port = test_free_port();
    assert_int_equal(ctl_open_tcp("ctl-test", members, 2, 1, &versions, NULL, 300, &ctl),
                     SPINDLE_EUNREACH);
    assert_non_null(strstr(spindle_errmsg(), "member 0"));
    members[0].host = "no-such-host.invalid";
    assert_int_equal(ctl_open_tcp("ctl-test", members, 2, 1, &versions, NULL, 300, &ctl),
                     SPINDLE_EUNREACH);
    assert_non_null(strstr(spindle_errmsg(), "no-such-host.invalid"));
}

/*
 * Hostile member after set-up: member 2 is forged. It connects to members 0
 * and 1 with valid hellos, then sends each a bad frame chosen by mode:
 * 0 garbage magic, 1 a length beyond the 64 MiB limit, 2 a truncated frame
 * followed by closing the connection. Members 0 and 1 (real, in child
 * processes) must go on exchanging between themselves with publish/collect,
 * and collecting from member 2 must fail naming it and what it did.
 */
static int honest_main(const struct ctl_member *members, uint32_t self, int mode)
{
    struct ctl *ctl = NULL;
    if (ctl_open_tcp("ctl-test", members, 3, self, &versions, NULL, 10000, &ctl) != 0)
        return 2;
    char mine[24], all[3 * 24];
    snprintf(mine, sizeof mine, "honest blob %u", self);
    if (ctl_publish(ctl, 5, mine, sizeof mine, 0x7) != 0)
        return 3;
    if (ctl_collect(ctl, 5, 0x3, all, sizeof mine, 10000, NULL) != 0)
        return 4;
    char expect[24];
    snprintf(expect, sizeof expect, "honest blob %u", 1 - self);
    if (strcmp(all + (1 - self) * sizeof mine, expect) != 0)
        return 5;
    uint64_t have = 0;
    int rc = ctl_collect(ctl, 5, 0x4, all, sizeof mine, 5000, &have);
    /* Truncated then closed: a FIN or, with our blob unread, a reset. */
    const char *want = mode == 0   ? "garbage"
                       : mode == 1 ? "blob length 2147483647 exceeds"
                                   : "member 2 is gone";
    int expected_rc = mode == 2 ? SPINDLE_EUNREACH : SPINDLE_EPROTO;
    if (rc != expected_rc || have != 0 || strstr(spindle_errmsg(), "member 2") == NULL ||
        strstr(spindle_errmsg(), want) == NULL) {
        fprintf(stderr, "member %u: rc %d: %s\n", self, rc, spindle_errmsg());
        return 6;
    }
    ctl_close(ctl);
    return 0;
}

static void run_hostile(int mode)
{
    struct ctl_member members[3] = {{.host = "127.0.0.1", .id = 0, .port = test_free_port()},
                                    {.host = "127.0.0.1", .id = 1, .port = test_free_port()},
                                    {.host = "127.0.0.1", .id = 2, .port = 1}};
    pid_t pids[2];
    for (uint32_t i = 0; i < 2; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0)
            _exit(honest_main(members, i, mode));
    }
    int fds[2];
    for (uint32_t i = 0; i < 2; i++) {
        fds[i] = dial(members[i].port);
        assert_true(fds[i] >= 0);
        uint8_t h[CTL_HELLO_SIZE];
        forge_hello(h, 2, 3, "ctl-test");
        assert_int_equal(write(fds[i], h, sizeof h), (ssize_t)sizeof h);
    }
    for (uint32_t i = 0; i < 2; i++) {
        char payload[16] = "hostile payload";
        uint8_t f[CTL_FRAME_SIZE];
        forge_frame(f, 5, 2, mode == 1 ? 0x7fffffffu : mode == 2 ? 1000u : 16u, payload, 16);
        if (mode == 0)
            spoil_u32(f, 0, 0x0badf00du);
        assert_int_equal(write(fds[i], f, sizeof f), (ssize_t)sizeof f);
        assert_int_equal(write(fds[i], payload, 10), 10);
        if (mode == 2)
            close(fds[i]);
    }
    for (uint32_t i = 0; i < 2; i++) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        if (mode != 2)
            close(fds[i]);
    }
}

static void test_hostile_garbage_after_setup(void **state)
{
    (void)state;
    run_hostile(0);
}

static void test_hostile_oversized_after_setup(void **state)
{
    (void)state;
    run_hostile(1);
}

static void test_hostile_truncated_after_setup(void **state)
{
    (void)state;
    run_hostile(2);
}

/* A member of another group (same ports, same size) is refused at the
 * hello: the member never counts it as connected. */
static void test_other_group_is_refused(void **state)
{
    (void)state;
    uint16_t port = test_free_port();
    pid_t pid = fork();
    if (pid == 0) {
        int fd = dial(port);
        uint8_t h[CTL_HELLO_SIZE];
        forge_hello(h, 1, 2, "another-group");
        (void)!write(fd, h, sizeof h);
        drain(fd); /* until the member drops us */
        _exit(0);
    }
    struct ctl_member members[2] = {{.host = "127.0.0.1", .id = 0, .port = port},
                                    {.host = "127.0.0.1", .id = 1, .port = test_free_port()}};
    struct ctl *ctl = NULL;
    assert_int_equal(ctl_open_tcp("ctl-test", members, 2, 0, &versions, NULL, 1500, &ctl),
                     SPINDLE_ETIMEDOUT);
    assert_non_null(strstr(spindle_errmsg(), "members 1 never connected"));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
}

/* A member of another build (its rings have layout version 10, ours 9)
 * learns from the answering hello why it cannot join the mesh, with both
 * versions named; the member it dialed never counts it as connected. */
static void test_other_build_is_refused_naming_both_versions(void **state)
{
    (void)state;
    struct ctl_member members[2] = {{.host = "127.0.0.1", .id = 0, .port = test_free_port()},
                                    {.host = "127.0.0.1", .id = 1, .port = test_free_port()}};
    pid_t pid = fork();
    if (pid == 0) {
        struct ctl_versions newer = {versions.table_layout, versions.ring_layout + 1};
        struct ctl *ctl = NULL;
        int rc = ctl_open_tcp("ctl-test", members, 2, 1, &newer, NULL, 5000, &ctl);
        const char *msg = spindle_errmsg();
        _exit(rc == SPINDLE_EPROTO && strstr(msg, "member 0") != NULL &&
                      strstr(msg, "ring layout version 9, this member version 10") != NULL
                  ? 0
                  : 1);
    }
    struct ctl *ctl = NULL;
    assert_int_equal(ctl_open_tcp("ctl-test", members, 2, 0, &versions, NULL, 1500, &ctl),
                     SPINDLE_ETIMEDOUT);
    assert_non_null(strstr(spindle_errmsg(), "members 1 never connected"));
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- joins ------------------------------------------------------------ */

/* Opens a one-member exchange on a free port (the member a joiner asks). */
static struct ctl *open_single(uint16_t *port)
{
    struct ctl_member me = {.host = "127.0.0.1", .id = 0, .port = test_free_port()};
    struct ctl *ctl = NULL;
    assert_int_equal(ctl_open_tcp("ctl-test", &me, 1, 0, &versions, NULL, 5000, &ctl), 0);
    *port = me.port;
    return ctl;
}

/* Polls for a pending join request for up to 20 s. */
static int poll_request(struct ctl *ctl, char *request, size_t capacity, size_t *length)
{
    for (int i = 0; i < 2000; i++) {
        int rc = ctl_join_poll(ctl, 10, request, capacity, length);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void test_join_request_round_trip(void **state)
{
    (void)state;
    uint16_t port;
    struct ctl *ctl = open_single(&port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        void *reply = NULL;
        size_t length = 0;
        int rc = ctl_join_ask(NULL, &versions, NULL, "127.0.0.1", port, "let me in", 10, &reply,
                              &length, 10000);
        _exit(rc == 0 && length == 8 && memcmp(reply, "welcome", 8) == 0 ? 0 : 1);
    }
    char request[64];
    size_t length = 0;
    assert_int_equal(poll_request(ctl, request, sizeof request, &length), 1);
    assert_int_equal(length, 10);
    assert_string_equal(request, "let me in");
    assert_int_equal(ctl_join_answer(ctl, "welcome", 8), 0);
    assert_int_equal(ctl_join_answer(ctl, "again", 6), SPINDLE_EINVAL); /* answered once */
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    ctl_close(ctl);
}

/* Hostile connections to a member's kept listener: none may surface as a
 * join request or disturb the member; the valid request after them does. */
static void hostile_joiner(uint16_t port)
{
    signal(SIGPIPE, SIG_IGN); /* the member may drop us while we write */
    for (int mode = 0; mode < 8; mode++) {
        int fd = dial(port);
        uint8_t h[CTL_HELLO_SIZE], f[CTL_FRAME_SIZE];
        forge_hello(h, CTL_JOIN_FROM, 0, "ctl-test");
        uint32_t length = mode == 2 ? 1u << 20 : mode == 3 ? 100u : 16u;
        forge_frame(f, 0, CTL_JOIN_FROM, length, "0123456789abcdef", 16);
        if (mode == 0)
            spoil_u32(h, 4, 0x12345678u); /* garbage hello */
        if (mode == 1)
            spoil_u32(f, 0, 0x0badf00du); /* garbage frame */
        /* mode 2: an oversized request; mode 3: truncated (16 bytes, close) */
        if (mode == 4)
            forge_hello(h, CTL_JOIN_FROM, 0, "another-group");
        if (mode == 5)
            forge_hello(h, 0, 1, "ctl-test"); /* a slot it may not connect as */
        if (mode == 6)
            spoil_u32(h, 24, versions.ring_layout + 1); /* another build's rings */
        if (mode == 7)
            h[2] ^= 0x40; /* another wire version */
        (void)!write(fd, h, sizeof h);
        (void)!write(fd, f, sizeof f);
        (void)!write(fd, "0123456789abcdef", 16);
        if (mode != 3)
            drain(fd); /* until the member drops us */
        close(fd);
    }
    void *reply = NULL;
    size_t length = 0;
    int rc = ctl_join_ask("ctl-test", &versions, NULL, "127.0.0.1", port, "valid", 6, &reply,
                          &length, 10000);
    _exit(rc == 0 && length == 3 && memcmp(reply, "ok", 3) == 0 ? 0 : 1);
}

static void test_hostile_join_requests_are_dropped(void **state)
{
    (void)state;
    uint16_t port;
    struct ctl *ctl = open_single(&port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        hostile_joiner(port);
    char request[64];
    size_t length = 0;
    assert_int_equal(poll_request(ctl, request, sizeof request, &length), 1);
    assert_int_equal(length, 6);
    assert_string_equal(request, "valid");
    assert_int_equal(ctl_join_answer(ctl, "ok", 3), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    ctl_close(ctl);
}

/* A child process that joins member 0 (at port) in slot 1 with the given
 * admission, publishes `mine` under tag 9, expects "member" under tag 10
 * and exits 0 (or 2/3 naming the step that failed). */
static pid_t run_joiner(uint16_t port, uint64_t admission, const char *mine)
{
    uint16_t joiner_port = test_free_port();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid != 0)
        return pid;
    struct ctl_member members[CTL_MAX_MEMBERS];
    memset(members, 0, sizeof members);
    members[0] = (struct ctl_member){.host = "127.0.0.1", .id = 0, .port = port};
    members[1] = (struct ctl_member){.host = "127.0.0.1", .id = 1, .port = joiner_port};
    struct ctl *ctl = NULL;
    if (ctl_open_tcp_joiner("ctl-test", members, 1, 1, admission, &versions, NULL, 10000, &ctl) !=
        0)
        _exit(2);
    char blob[8] = {0}, got[2 * 8];
    snprintf(blob, sizeof blob, "%s", mine);
    if (ctl_publish(ctl, 9, blob, sizeof blob, 0x1) != 0 ||
        ctl_collect(ctl, 10, 0x1, got, sizeof blob, 10000, NULL) != 0 || strcmp(got, "member") != 0)
        _exit(3);
    ctl_close(ctl);
    _exit(0);
}

static void expect_exit_0(pid_t pid)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* Opens a connection claiming slot 1 with the given admission. */
static int claim_slot_1(uint16_t port, uint64_t admission)
{
    int fd = dial(port);
    uint8_t h[CTL_HELLO_SIZE];
    forge_hello_of(h, 1, 1, "ctl-test", admission);
    assert_int_equal(write(fd, h, sizeof h), (ssize_t)sizeof h);
    return fd;
}

/* Runs ctl's progress (through ctl_join_poll: no join request comes) until
 * the member closed fd, a connection it should refuse; fails the test when
 * it is still open after 5 s. */
static void expect_refused(struct ctl *ctl, int fd)
{
    for (int round = 0; round < 250; round++) {
        char request[16], bytes[64];
        size_t length = 0;
        assert_int_equal(ctl_join_poll(ctl, 20, request, sizeof request, &length), 0);
        struct pollfd pfd = {fd, POLLIN, 0};
        while (poll(&pfd, 1, 0) == 1) {
            ssize_t n = read(fd, bytes, sizeof bytes); /* its answering hello, then EOF */
            if (n <= 0) {
                close(fd);
                return;
            }
        }
    }
    fail_msg("the member kept a connection it should have refused");
}

/* A joiner given slot 1 connects to member 0 and exchanges blobs both ways;
 * a connection claiming the slot with the same admission is refused; a
 * later holder of the id (a larger admission) takes the slot over, with
 * nothing of the earlier holder's left in it, and the earlier admission
 * cannot take it back. */
static void test_joiner_slot_exchanges_and_passes_on(void **state)
{
    (void)state;
    uint16_t port;
    struct ctl *ctl = open_single(&port);
    pid_t pid = run_joiner(port, 5, "first");
    char got[2 * 8], blob[8] = "member";
    assert_int_equal(ctl_collect(ctl, 9, 0x2, got, 8, 10000, NULL), 0);
    assert_string_equal(got + 8, "first");
    assert_int_equal(ctl_publish(ctl, 10, blob, sizeof blob, 0x2), 0);
    expect_exit_0(pid);
    /* The same admission again is a stale or forged holder: dropped. */
    expect_refused(ctl, claim_slot_1(port, 5));
    uint64_t have = 0;
    assert_int_equal(ctl_collect(ctl, 11, 0x2, got, 8, 300, &have), SPINDLE_EUNREACH);
    assert_non_null(strstr(spindle_errmsg(), "member 1 is gone"));
    /* The member learns that member 1 left: what it sent is dropped. */
    ctl_remove_member(ctl, 1);
    assert_int_equal(ctl_collect(ctl, 9, 0x2, got, 8, 300, &have), SPINDLE_EUNREACH);
    assert_non_null(strstr(spindle_errmsg(), "left the group"));
    /* A later admission takes the id over: the member expects it (a
     * collect then waits for it instead of failing at once). */
    ctl_expect_member(ctl, 1, 6);
    pid = run_joiner(port, 6, "second");
    assert_int_equal(ctl_collect(ctl, 9, 0x2, got, 8, 10000, NULL), 0);
    assert_string_equal(got + 8, "second");
    assert_int_equal(ctl_publish(ctl, 10, blob, sizeof blob, 0x2), 0);
    expect_exit_0(pid);
    /* The earlier admission cannot take it back. */
    expect_refused(ctl, claim_slot_1(port, 5));
    expect_refused(ctl, claim_slot_1(port, 0)); /* a member that started the group */
    /* A third holder replaces the second without the member being told the
     * second left: its connection, not the second's blob, is what counts. */
    pid = run_joiner(port, 7, "third");
    for (int round = 0;; round++) {
        assert_true(round < 1000); /* 20 s */
        assert_int_equal(ctl_collect(ctl, 9, 0x2, got, 8, 10000, NULL), 0);
        if (strcmp(got + 8, "third") == 0)
            break;
        assert_string_equal(got + 8, "second"); /* until the third connected */
        char request[16];
        size_t length = 0;
        assert_int_equal(ctl_join_poll(ctl, 20, request, sizeof request, &length), 0);
    }
    assert_int_equal(ctl_publish(ctl, 10, blob, sizeof blob, 0x2), 0);
    expect_exit_0(pid);
    ctl_close(ctl);
}

/* A child joined in slot 1 that publishes "one" under tag 9, waits for tag
 * 10, publishes "two" under tag 9, and waits for tag 11. */
static pid_t run_republisher(uint16_t port)
{
    uint16_t joiner_port = test_free_port();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid != 0)
        return pid;
    struct ctl_member members[CTL_MAX_MEMBERS];
    memset(members, 0, sizeof members);
    members[0] = (struct ctl_member){.host = "127.0.0.1", .id = 0, .port = port};
    members[1] = (struct ctl_member){.host = "127.0.0.1", .id = 1, .port = joiner_port};
    struct ctl *ctl = NULL;
    char one[8] = "one", two[8] = "two", got[2 * 8];
    if (ctl_open_tcp_joiner("ctl-test", members, 1, 1, 1, &versions, NULL, 10000, &ctl) != 0 ||
        ctl_publish(ctl, 9, one, sizeof one, 0x1) != 0 ||
        ctl_collect(ctl, 10, 0x1, got, 8, 10000, NULL) != 0 ||
        ctl_publish(ctl, 9, two, sizeof two, 0x1) != 0 ||
        ctl_collect(ctl, 11, 0x1, got, 8, 10000, NULL) != 0)
        _exit(2);
    ctl_close(ctl);
    _exit(0);
}

/* A member that already holds a blob of a tag and has nothing left to
 * send still reads a later blob of the tag: a collect that finds every
 * blob present must look at the connections too, or it returns the
 * earlier one for ever (survivors that started a view change again under
 * a larger set never saw each other's new blobs). */
static void test_a_later_blob_of_a_tag_is_read(void **state)
{
    (void)state;
    uint16_t port;
    struct ctl *ctl = open_single(&port);
    pid_t pid = run_republisher(port);
    char got[2 * 8], blob[8] = "member";
    assert_int_equal(ctl_collect(ctl, 9, 0x2, got, 8, 10000, NULL), 0);
    assert_string_equal(got + 8, "one");
    assert_int_equal(ctl_publish(ctl, 10, blob, sizeof blob, 0x2), 0);
    /* The child's second blob is on its way: 10 s at most. */
    time_t deadline = time(NULL) + 10;
    for (;;) {
        assert_int_equal(ctl_collect(ctl, 9, 0x2, got, 8, 20, NULL), 0);
        if (strcmp(got + 8, "two") == 0)
            break;
        assert_string_equal(got + 8, "one");
        if (time(NULL) > deadline)
            fail_msg("the second blob of tag 9 was never read");
    }
    assert_int_equal(ctl_publish(ctl, 11, blob, sizeof blob, 0x2), 0);
    expect_exit_0(pid);
    ctl_close(ctl);
}

/*
 * A member that stops reading: member 1 opens the channel and then never
 * runs its progress again (it waits on a pipe), so its socket fills. Member
 * 0 publishes three largest blobs to it: the first two fit in
 * CTL_PEER_OUT_MAX (what the kernel took out of the queue aside), the
 * third does not, and member 1 is dropped as gone, named with the cause,
 * rather than member 0's memory growing without bound.
 */
static int silent_main(const struct ctl_member *members, int ready, int release)
{
    struct ctl *ctl = NULL;
    if (ctl_open_tcp("ctl-test", members, 2, 1, &versions, NULL, 10000, &ctl) != 0)
        return 2;
    char word = 1;
    if (write(ready, &word, 1) != 1 || read(release, &word, 1) != 1)
        return 3;
    ctl_close(ctl);
    return 0;
}

static void test_member_that_does_not_read_is_dropped_at_the_queue_cap(void **state)
{
    (void)state;
    struct ctl_member members[2] = {{.host = "127.0.0.1", .id = 0, .port = test_free_port()},
                                    {.host = "127.0.0.1", .id = 1, .port = test_free_port()}};
    int ready[2], release[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(release), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(silent_main(members, ready[1], release[0]));
    struct ctl *ctl = NULL;
    assert_int_equal(ctl_open_tcp("ctl-test", members, 2, 0, &versions, NULL, 10000, &ctl), 0);
    char word = 0;
    assert_int_equal(read(ready[0], &word, 1), 1);
    uint8_t *blob = calloc(1, CTL_BLOB_MAX);
    assert_non_null(blob);
    for (uint32_t tag = 1; tag <= 3; tag++)
        assert_int_equal(ctl_publish(ctl, tag, blob, CTL_BLOB_MAX, 0x2), 0);
    free(blob);
    char small[8];
    assert_int_equal(ctl_collect(ctl, 4, 0x2, small, sizeof small, 0, NULL), SPINDLE_EUNREACH);
    assert_non_null(strstr(spindle_errmsg(), "member 1 does not read"));
    ctl_close(ctl);
    assert_int_equal(write(release[1], &word, 1), 1);
    expect_exit_0(pid);
    close(ready[0]);
    close(ready[1]);
    close(release[0]);
    close(release[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_members_allgather),
        cmocka_unit_test(test_garbage_frame_is_rejected),
        cmocka_unit_test(test_wrong_length_is_rejected),
        cmocka_unit_test(test_taken_port_and_absent_member_are_named),
        cmocka_unit_test(test_hostile_garbage_after_setup),
        cmocka_unit_test(test_hostile_oversized_after_setup),
        cmocka_unit_test(test_hostile_truncated_after_setup),
        cmocka_unit_test(test_other_group_is_refused),
        cmocka_unit_test(test_other_build_is_refused_naming_both_versions),
        cmocka_unit_test(test_join_request_round_trip),
        cmocka_unit_test(test_hostile_join_requests_are_dropped),
        cmocka_unit_test(test_joiner_slot_exchanges_and_passes_on),
        cmocka_unit_test(test_a_later_blob_of_a_tag_is_read),
        cmocka_unit_test(test_member_that_does_not_read_is_dropped_at_the_queue_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
