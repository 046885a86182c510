/*
 * The keyed control channel (control/ctl_auth.h, docs/SECURITY.md):
 * key files are refused unless private, regular and 32 bytes; the
 * handshake succeeds only with the same key (or a key of a rotating ring)
 * and each side's sealed records open only at the other; an altered, a
 * replayed and a reordered record are refused. Between real processes on
 * loopback: two members with one key exchange blobs; a member with another
 * key, a member with no key and a stranger are refused, the stranger
 * receiving nothing but a random nonce; a byte flipped or a record replayed
 * by a man in the middle fails that member's connection with the reason
 * named and logged (a stranger that reached the man in the middle first,
 * and hung up, keeps neither member out).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_ports.h"

#include <spindle/error.h>

#include "control/ctl.h"
#include "control/ctl_auth.h"
#include "control/ctl_wire.h"
#include "util/clock.h"

static const struct ctl_versions versions = {7, 9};
static char dir[64];

/* DIR/name holding len bytes of `fill`, with the given mode. */
static const char *key_file(const char *name, uint8_t fill, size_t len, mode_t mode)
{
    static char paths[8][128];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, 128, "%s/%s", dir, name);
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    uint8_t bytes[64];
    memset(bytes, fill, sizeof bytes);
    assert_int_equal(write(fd, bytes, len), (ssize_t)len);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
    return path;
}

static struct ctl_keyring ring_of(uint8_t fill)
{
    struct ctl_keyring ring = {0};
    assert_int_equal(
        ctl_key_load(key_file(fill == 0xa1 ? "a.key" : "b.key", fill, 32, 0600), &ring), 0);
    return ring;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/spindle-auth-XXXXXX");
    assert_non_null(mkdtemp(dir));
    assert_int_equal(ctl_crypto_init(), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

/* ---- key files ------------------------------------------------------- */

static void expect_key_refused(const char *path, int code, const char *what)
{
    struct ctl_keyring ring = {0};
    assert_int_equal(ctl_key_load(path, &ring), code);
    assert_int_equal(ring.count, 0);
    assert_non_null(strstr(spindle_errmsg(), path));
    assert_non_null(strstr(spindle_errmsg(), what));
}

static void test_key_files_must_be_private_regular_and_32_bytes(void **state)
{
    (void)state;
    struct ctl_keyring ring = {0};
    assert_int_equal(ctl_key_load(key_file("good.key", 7, 32, 0600), &ring), 0);
    assert_int_equal(ring.count, 1);
    assert_int_equal(ring.key[0][31], 7);
    assert_int_equal(ctl_key_load(key_file("ro.key", 8, 32, 0400), &ring), 0); /* a second key */
    assert_int_equal(ring.count, 2);
    assert_int_equal(ctl_key_load(key_file("third.key", 9, 32, 0600), &ring), SPINDLE_EINVAL);
    ctl_keyring_clear(&ring);
    assert_int_equal(ring.count, 0);

    expect_key_refused(key_file("open.key", 1, 32, 0644), SPINDLE_EINVAL, "mode 0644");
    expect_key_refused(key_file("group.key", 1, 32, 0640), SPINDLE_EINVAL, "mode 0640");
    expect_key_refused(key_file("short.key", 1, 31, 0600), SPINDLE_EINVAL, "holds 31 bytes");
    expect_key_refused(key_file("long.key", 1, 33, 0600), SPINDLE_EINVAL, "holds 33 bytes");
    char link[128];
    snprintf(link, sizeof link, "%s/link.key", dir);
    assert_int_equal(symlink(key_file("target.key", 1, 32, 0600), link), 0);
    expect_key_refused(link, SPINDLE_EINVAL, "symbolic link");
    expect_key_refused(dir, SPINDLE_EINVAL, "not a regular file");
    char missing[128];
    snprintf(missing, sizeof missing, "%s/missing.key", dir);
    expect_key_refused(missing, SPINDLE_ENOENT, "No such file");
}

/* ---- handshake and records over a socket pair ------------------------ */

struct dialer {
    int fd;
    const struct ctl_keyring *keys;
    struct ctl_sess sess;
    int rc;
};

static void *dial_thread(void *arg)
{
    struct dialer *d = arg;
    const char *why = NULL;
    d->rc = ctl_auth_dial(d->fd, d->keys, sp_now_ns() + 5000000000ull, &d->sess, &why);
    return NULL;
}

/* Runs the handshake over a fresh socket pair: the dialer with dial_keys
 * on a thread, the acceptor with accept_keys here. */
static int handshake(const struct ctl_keyring *dial_keys, const struct ctl_keyring *accept_keys,
                     struct dialer *d, struct ctl_sess *acceptor, int fds[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    memset(d, 0, sizeof *d);
    d->fd = fds[0];
    d->keys = dial_keys;
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, dial_thread, d), 0);
    const char *why = NULL;
    memset(acceptor, 0, sizeof *acceptor);
    int rc = ctl_auth_accept(fds[1], accept_keys, sp_now_ns() + 5000000000ull, acceptor, &why);
    if (rc != 0)
        close(fds[1]); /* as a member does: the dialer then sees the close */
    pthread_join(thread, NULL);
    return rc;
}

/* Writes raw bytes into fd and reads them back through s. */
static ssize_t receive(struct ctl_sess *s, int in, int out, const uint8_t *bytes, size_t len,
                       uint8_t *plain, size_t cap)
{
    assert_int_equal(write(in, bytes, len), (ssize_t)len);
    return ctl_sess_recv(s, out, plain, cap);
}

static void test_same_key_handshake_seals_both_ways(void **state)
{
    (void)state;
    struct ctl_keyring a = ring_of(0xa1);
    struct dialer d;
    struct ctl_sess acc;
    int fds[2];
    assert_int_equal(handshake(&a, &a, &d, &acc, fds), 0);
    assert_int_equal(d.rc, 0);
    assert_true(d.sess.keyed && acc.keyed);
    /* Each direction has its own key. */
    assert_memory_equal(d.sess.tx_key, acc.rx_key, CTL_KEY_BYTES);
    assert_memory_equal(d.sess.rx_key, acc.tx_key, CTL_KEY_BYTES);
    assert_memory_not_equal(d.sess.tx_key, d.sess.rx_key, CTL_KEY_BYTES);
    const char text[] = "the group's secret parameters";
    assert_int_equal(ctl_sess_write(&d.sess, fds[0], text, sizeof text, sp_now_ns() + 1000000000),
                     0);
    char got[sizeof text];
    assert_int_equal(ctl_sess_read(&acc, fds[1], got, sizeof got, sp_now_ns() + 1000000000), 0);
    assert_string_equal(got, text);
    assert_int_equal(ctl_sess_write(&acc, fds[1], "back", 5, sp_now_ns() + 1000000000), 0);
    assert_int_equal(ctl_sess_read(&d.sess, fds[0], got, 5, sp_now_ns() + 1000000000), 0);
    assert_string_equal(got, "back");
    ctl_sess_clear(&d.sess);
    ctl_sess_clear(&acc);
    close(fds[0]);
    close(fds[1]);
}

static void test_other_key_or_no_key_fails_the_handshake(void **state)
{
    (void)state;
    struct ctl_keyring a = ring_of(0xa1), b = ring_of(0xb2), none = {0};
    struct dialer d;
    struct ctl_sess acc;
    int fds[2];
    assert_int_equal(handshake(&b, &a, &d, &acc, fds), SPINDLE_EAUTH);
    assert_int_equal(d.rc, SPINDLE_EUNREACH); /* the acceptor closed without a word */
    assert_false(d.sess.keyed || acc.keyed);
    close(fds[0]);
    /* A rotating acceptor accepts the old key and the new one. */
    struct ctl_keyring both = b;
    memcpy(both.key[1], a.key[0], CTL_KEY_BYTES);
    both.count = 2;
    assert_int_equal(handshake(&a, &both, &d, &acc, fds), 0);
    assert_int_equal(d.rc, 0);
    assert_memory_equal(d.sess.tx_key, acc.rx_key, CTL_KEY_BYTES);
    ctl_sess_clear(&d.sess);
    ctl_sess_clear(&acc);
    close(fds[0]);
    close(fds[1]);
    /* No key on either side: nothing is said, nothing is sealed. */
    assert_int_equal(handshake(&none, NULL, &d, &acc, fds), 0);
    assert_int_equal(d.rc, 0);
    assert_false(d.sess.keyed || acc.keyed);
    struct pollfd pfd = {fds[1], POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 0), 0);
    close(fds[0]);
    close(fds[1]);
}

/* Two sessions of one key over fixed nonces, and a socket pair. */
static void sessions(struct ctl_sess *tx, struct ctl_sess *rx, int fds[2])
{
    struct ctl_keyring a = ring_of(0xa1);
    uint8_t nonce_d[CTL_NONCE_BYTES] = {1}, nonce_a[CTL_NONCE_BYTES] = {2};
    memset(tx, 0, sizeof *tx);
    memset(rx, 0, sizeof *rx);
    ctl_sess_derive(tx, a.key[0], CTL_ROLE_DIALER, nonce_d, nonce_a);
    ctl_sess_derive(rx, a.key[0], CTL_ROLE_ACCEPTOR, nonce_d, nonce_a);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    fcntl(fds[1], F_SETFL, O_NONBLOCK);
}

#define RECORD (CTL_SEAL_HEADER + 8 + CTL_SEAL_TAG)

static void test_altered_replayed_and_reordered_records_are_refused(void **state)
{
    (void)state;
    struct ctl_sess tx, rx;
    int fds[2];
    uint8_t first[RECORD], second[RECORD], plain[16];
    /* In order: both open. */
    sessions(&tx, &rx, fds);
    ctl_sess_seal(&tx, "record0", 8, first);
    ctl_sess_seal(&tx, "record1", 8, second);
    assert_int_equal(receive(&rx, fds[0], fds[1], first, RECORD, plain, sizeof plain), 8);
    assert_string_equal((char *)plain, "record0");
    assert_int_equal(receive(&rx, fds[0], fds[1], second, RECORD, plain, sizeof plain), 8);
    assert_string_equal((char *)plain, "record1");
    /* Replayed: the first record again. */
    assert_int_equal(receive(&rx, fds[0], fds[1], first, RECORD, plain, sizeof plain),
                     CTL_SESS_REFUSED);
    assert_non_null(strstr(rx.why, "out of sequence (counter 0, expected 2)"));
    ctl_sess_clear(&tx);
    ctl_sess_clear(&rx);
    close(fds[0]);
    close(fds[1]);

    /* Reordered: the second before the first. */
    sessions(&tx, &rx, fds);
    ctl_sess_seal(&tx, "record0", 8, first);
    ctl_sess_seal(&tx, "record1", 8, second);
    assert_int_equal(receive(&rx, fds[0], fds[1], second, RECORD, plain, sizeof plain),
                     CTL_SESS_REFUSED);
    assert_non_null(strstr(rx.why, "out of sequence (counter 1, expected 0)"));
    ctl_sess_clear(&tx);
    ctl_sess_clear(&rx);
    close(fds[0]);
    close(fds[1]);

    /* Altered: any one byte of the ciphertext, the tag or the length. */
    for (size_t at = 0; at < RECORD; at++) {
        if (at >= 4 && at < CTL_SEAL_HEADER)
            continue; /* the counter: out of sequence, above */
        sessions(&tx, &rx, fds);
        ctl_sess_seal(&tx, "record0", 8, first);
        first[at] ^= 0x01;
        ssize_t n = receive(&rx, fds[0], fds[1], first, RECORD, plain, sizeof plain);
        if (at < 4) { /* a longer length waits for bytes that never come */
            shutdown(fds[0], SHUT_WR);
            while (n == -1 && errno == EAGAIN)
                n = ctl_sess_recv(&rx, fds[1], plain, sizeof plain);
            assert_true(n == CTL_SESS_REFUSED || n == 0);
        } else {
            assert_int_equal(n, CTL_SESS_REFUSED);
            assert_non_null(strstr(rx.why, "record 0 failed authentication"));
        }
        ctl_sess_clear(&tx);
        ctl_sess_clear(&rx);
        close(fds[0]);
        close(fds[1]);
    }
}

/* ---- members over loopback ------------------------------------------- */

/* Runs fn with stderr (the library's log) going to a file; returns what
 * was logged (static). */
static const char *logged_during(int (*fn)(void *), void *arg, int *rc)
{
    static char text[8192];
    char path[96];
    snprintf(path, sizeof path, "%s/log", dir);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0 && saved >= 0);
    dup2(fd, 2);
    *rc = fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    text[n > 0 ? n : 0] = '\0';
    return text;
}

struct pair {
    struct ctl_member members[2];
    const struct ctl_keyring *keys;
    int timeout_ms;
    struct ctl *ctl;
};

static int open_member_0(void *arg)
{
    struct pair *p = arg;
    return ctl_open_tcp("ctl-test", p->members, 2, 0, &versions, p->keys, p->timeout_ms, &p->ctl);
}

/* A child: member 1 (reaching member 0 at port_of_0) with keys; allgathers
 * tag 1, publishes 1 MiB under tag 2, then waits for tag 3. Exits 0 when
 * all of it worked, 10 + the open's error code otherwise. */
static pid_t run_member_1(struct pair p, uint16_t port_of_0, const struct ctl_keyring *keys)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid != 0)
        return pid;
    p.members[0].port = port_of_0;
    struct ctl *ctl = NULL;
    int rc = ctl_open_tcp("ctl-test", p.members, 2, 1, &versions, keys, 5000, &ctl);
    if (rc != 0)
        _exit(rc == SPINDLE_EUNREACH && strstr(spindle_errmsg(), "handshake") != NULL ? 10 : 11);
    char mine[16] = "from member 1", all[32];
    size_t big = 1u << 20;
    uint8_t *blob = malloc(big), got[8];
    for (size_t i = 0; i < big; i++)
        blob[i] = (uint8_t)(i * 7);
    rc = ctl_allgather(ctl, 1, mine, sizeof mine, all, 5000);
    if (rc == 0 && strcmp(all, "from member 0") != 0)
        rc = 1;
    if (rc == 0)
        rc = ctl_publish(ctl, 2, blob, big, 0x1);
    if (rc == 0)
        rc = ctl_collect(ctl, 3, 0x1, got, sizeof got, 5000, NULL);
    free(blob);
    ctl_close(ctl);
    _exit(rc == 0 ? 0 : 2);
}

static int wait_exit(pid_t pid)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static struct pair two_members(const struct ctl_keyring *keys)
{
    struct pair p = {.keys = keys, .timeout_ms = 5000};
    for (uint32_t i = 0; i < 2; i++)
        p.members[i] = (struct ctl_member){.host = "127.0.0.1", .id = i, .port = test_free_port()};
    return p;
}

static void test_members_with_one_key_exchange(void **state)
{
    (void)state;
    struct ctl_keyring a = ring_of(0xa1);
    struct pair p = two_members(&a);
    pid_t pid = run_member_1(p, p.members[0].port, &a);
    assert_int_equal(open_member_0(&p), 0);
    char mine[16] = "from member 0", all[32];
    assert_int_equal(ctl_allgather(p.ctl, 1, mine, sizeof mine, all, 5000), 0);
    assert_string_equal(all + 16, "from member 1");
    size_t big = 1u << 20;
    uint8_t *blob = malloc(big);
    assert_int_equal(ctl_collect_one(p.ctl, 2, 1, blob, big, 5000), 0);
    for (size_t i = 0; i < big; i += 997)
        assert_int_equal(blob[i], (uint8_t)(i * 7));
    free(blob);
    assert_int_equal(ctl_publish(p.ctl, 3, "all done", 8, 0x2), 0);
    assert_int_equal(wait_exit(pid), 0);
    ctl_close(p.ctl);
}

/* Member 0 holds key a; member 1 holds `theirs` (another key, or none):
 * member 1 fails in the handshake, member 0 never counts it and logs why. */
static void expect_member_1_refused(const struct ctl_keyring *theirs)
{
    struct ctl_keyring a = ring_of(0xa1);
    struct pair p = two_members(&a);
    p.timeout_ms = 2500;
    pid_t pid = run_member_1(p, p.members[0].port, theirs);
    int rc;
    const char *log = logged_during(open_member_0, &p, &rc);
    assert_int_equal(rc, SPINDLE_ETIMEDOUT);
    assert_non_null(strstr(log, "failed authentication"));
    assert_int_equal(wait_exit(pid), 10);
}

static void test_member_with_another_key_is_refused(void **state)
{
    (void)state;
    struct ctl_keyring b = ring_of(0xb2);
    expect_member_1_refused(&b);
}

static void test_member_without_a_key_is_refused(void **state)
{
    (void)state;
    expect_member_1_refused(NULL);
}

/* Connects to a loopback port, retrying while nothing listens there yet
 * (the member opens its port when the test gets to it); -1 when nothing
 * listened there for 10 s. */
static int connect_retrying(uint16_t port)
{
    struct sockaddr_in sin = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int tries = 0; tries < 1000; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&sin, sizeof sin) == 0)
            return fd;
        close(fd);
        usleep(10000);
    }
    return -1;
}

/* A stranger that speaks the unkeyed protocol (member 1's hello, naming
 * the group) and reads until the member closes: what it gets is the
 * member's nonce, 32 random bytes, and nothing of the group. */
static void test_stranger_receives_nothing_of_the_group(void **state)
{
    (void)state;
    struct ctl_keyring a = ring_of(0xa1);
    struct pair p = two_members(&a);
    p.timeout_ms = 2500;
    int pipe_fds[2];
    assert_int_equal(pipe(pipe_fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = connect_retrying(p.members[0].port);
        struct ctl_hello h = {1, 2, ctl_group_hash("ctl-test"), versions, 0};
        uint8_t hello[CTL_HELLO_SIZE], got[4096];
        ctl_wire_encode_hello(&h, hello);
        (void)!write(fd, hello, sizeof hello);
        size_t total = 0;
        ssize_t n;
        while (total < sizeof got && (n = read(fd, got + total, sizeof got - total)) > 0)
            total += (size_t)n;
        (void)!write(pipe_fds[1], got, total);
        _exit(0);
    }
    close(pipe_fds[1]);
    int rc;
    const char *log = logged_during(open_member_0, &p, &rc);
    assert_int_equal(rc, SPINDLE_ETIMEDOUT);
    assert_non_null(strstr(log, "failed authentication"));
    uint8_t got[4096];
    size_t total = 0;
    ssize_t n;
    while ((n = read(pipe_fds[0], got + total, sizeof got - total)) > 0)
        total += (size_t)n;
    close(pipe_fds[0]);
    assert_int_equal(wait_exit(pid), 0);
    assert_int_equal(total, CTL_NONCE_BYTES);
    uint32_t group = ctl_group_hash("ctl-test");
    assert_null(memmem(got, total, "ctl-test", 8));
    assert_null(memmem(got, total, "refus", 5));
    assert_null(memmem(got, total, "member", 6));
    assert_null(memmem(got, total, &group, sizeof group));
}

struct single {
    const char *host;
    const struct ctl_keyring *keys;
};

static int open_single(void *arg)
{
    struct single *one = arg;
    struct ctl_member me = {.host = one->host, .id = 0, .port = test_free_port()};
    struct ctl *ctl = NULL;
    int rc = ctl_open_tcp("ctl-test", &me, 1, 0, &versions, one->keys, 5000, &ctl);
    ctl_close(ctl);
    return rc;
}

/* Without a key, listening beyond loopback is logged as a warning; on
 * loopback, or with a key, it is not. */
static void test_unkeyed_listener_beyond_loopback_warns(void **state)
{
    (void)state;
    struct ctl_keyring a = ring_of(0xa1);
    struct single cases[] = {{"0.0.0.0", NULL}, {"127.0.0.1", NULL}, {"0.0.0.0", &a}};
    for (int i = 0; i < 3; i++) {
        int rc;
        const char *log = logged_during(open_single, &cases[i], &rc);
        assert_int_equal(rc, 0);
        bool warned = strstr(log, "without a group key") != NULL;
        assert_int_equal(warned, i == 0);
    }
}

/* ---- a man in the middle ---------------------------------------------- */

enum mitm_mode { MITM_FLIP, MITM_REPLAY };

#define MITM_LINKS 4 /* connections forwarded at most */

struct mitm;

struct mitm_link {
    struct mitm *mitm;
    int from; /* the dialer's connection */
};

struct mitm {
    int listen_fd;
    uint16_t target;
    enum mitm_mode mode;
    uint32_t record; /* the dialer's record to spoil, on each connection */
    pthread_t acceptor;
    uint32_t links; /* written by the acceptor only; read after joining it */
    struct mitm_link link[MITM_LINKS];
    pthread_t forwarder[MITM_LINKS];
};

/* Forwards one connection's bytes both ways; dialer-to-acceptor ones are
 * parsed into records after the handshake (nonce and proof, 64 bytes) and
 * record m->record is altered or sent twice. */
static void *mitm_forward(void *arg)
{
    const struct mitm_link *link = arg;
    const struct mitm *m = link->mitm;
    int from = link->from;
    int to = connect_retrying(m->target);
    if (to < 0) {
        close(from);
        return NULL;
    }
    /* The dialer's stream, held whole: small enough here (tags 1 and 2). */
    size_t cap = 4u << 20, len = 0, sent = 0, parsed = 2 * CTL_NONCE_BYTES;
    uint8_t *stream = malloc(cap);
    uint32_t index = 0;
    struct pollfd pfds[2] = {{from, POLLIN, 0}, {to, POLLIN, 0}};
    for (;;) {
        if (poll(pfds, 2, 10000) <= 0)
            break;
        if (pfds[1].revents) {
            uint8_t buf[4096];
            ssize_t n = read(to, buf, sizeof buf);
            if (n <= 0 || write(from, buf, (size_t)n) != n)
                break;
        }
        if (pfds[0].revents) {
            ssize_t n = read(from, stream + len, cap - len);
            if (n <= 0)
                break;
            len += (size_t)n;
            /* Forward every complete record, spoiling the chosen one. */
            size_t ready = len < parsed ? len : parsed;
            while (len >= parsed + CTL_SEAL_HEADER) {
                uint32_t rec = (uint32_t)stream[parsed] | (uint32_t)stream[parsed + 1] << 8 |
                               (uint32_t)stream[parsed + 2] << 16 |
                               (uint32_t)stream[parsed + 3] << 24;
                size_t end = parsed + CTL_SEAL_HEADER + rec;
                if (len < end)
                    break;
                if (index == m->record && m->mode == MITM_FLIP)
                    stream[parsed + CTL_SEAL_HEADER] ^= 0x20;
                if (index == m->record && m->mode == MITM_REPLAY) {
                    /* The record again, right after itself. */
                    memmove(stream + end + (end - parsed), stream + end, len - end);
                    memcpy(stream + end, stream + parsed, end - parsed);
                    len += end - parsed;
                    index++;
                    end += end - parsed;
                }
                index++;
                parsed = end;
                ready = parsed;
            }
            if (ready > sent && write(to, stream + sent, ready - sent) != (ssize_t)(ready - sent))
                break;
            if (ready > sent)
                sent = ready;
        }
    }
    free(stream);
    close(from);
    close(to);
    return NULL;
}

/* Accepts and forwards every connection, not just the first: the port is
 * an ephemeral one, which a process of another test that dials a port it
 * chose (and freed) may reach first, and member 1's connection must not
 * then wait unaccepted. Ends when the listener is shut down. */
static void *mitm_accept(void *arg)
{
    struct mitm *m = arg;
    for (;;) {
        int from = accept(m->listen_fd, NULL, NULL);
        if (from < 0 && (errno == EINTR || errno == ECONNABORTED))
            continue;
        if (from < 0)
            return NULL;
        if (m->links == MITM_LINKS) {
            close(from);
            continue;
        }
        struct mitm_link *link = &m->link[m->links];
        *link = (struct mitm_link){m, from};
        if (pthread_create(&m->forwarder[m->links], NULL, mitm_forward, link) == 0)
            m->links++;
        else
            close(from);
    }
}

static void mitm_start(struct mitm *m)
{
    assert_int_equal(pthread_create(&m->acceptor, NULL, mitm_accept, m), 0);
}

static void mitm_stop(struct mitm *m)
{
    shutdown(m->listen_fd, SHUT_RDWR); /* wakes the acceptor */
    pthread_join(m->acceptor, NULL);
    for (uint32_t i = 0; i < m->links; i++)
        pthread_join(m->forwarder[i], NULL);
    close(m->listen_fd);
}

static int open_listener(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(listen(fd, 4), 0);
    socklen_t len = sizeof sin;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    *port = ntohs(sin.sin_port);
    return fd;
}

struct collect_args {
    struct ctl *ctl;
    uint8_t *blob;
    size_t length;
    char all[32];
    int gathered;
};

/* Tag 1 by allgather, then tag 2. Both under the log capture: member 0
 * may read the spoiled record (and drop the connection) while allgather
 * still runs, since progress reads whatever has arrived. */
static int gather_then_collect(void *arg)
{
    struct collect_args *c = arg;
    char mine[16] = "from member 0";
    c->gathered = ctl_allgather(c->ctl, 1, mine, sizeof mine, c->all, 5000);
    return ctl_collect_one(c->ctl, 2, 1, c->blob, c->length, 5000);
}

/* Member 1 reaches member 0 through a man in the middle that spoils
 * member 1's record 3 (its records: hello, tag 1's header and blob, then
 * tag 2's header): member 0 has tag 1, then drops member 1's connection
 * naming why, and waiting for tag 2 fails with that reason. A stranger
 * reaches the man in the middle first and hangs up: member 0 drops its
 * connection and still takes member 1's. */
static void expect_spoiled_record_fails(enum mitm_mode mode, const char *reason)
{
    struct ctl_keyring a = ring_of(0xa1);
    struct pair p = two_members(&a);
    uint16_t mitm_port;
    struct mitm m = {.listen_fd = open_listener(&mitm_port),
                     .target = p.members[0].port,
                     .mode = mode,
                     .record = 3};
    int stranger = connect_retrying(mitm_port);
    assert_true(stranger >= 0);
    close(stranger);
    pid_t pid = run_member_1(p, mitm_port, &a);
    mitm_start(&m);
    assert_int_equal(open_member_0(&p), 0);
    struct collect_args c = {p.ctl, malloc(1u << 20), 1u << 20, {0}, -1};
    int rc;
    const char *log = logged_during(gather_then_collect, &c, &rc);
    free(c.blob);
    assert_int_equal(c.gathered, 0);
    assert_string_equal(c.all + 16, "from member 1");
    assert_non_null(strstr(log, "dropping the connection of member 1"));
    assert_non_null(strstr(log, reason));
    assert_int_equal(rc, SPINDLE_EPROTO);
    assert_non_null(strstr(spindle_errmsg(), "member 1"));
    assert_non_null(strstr(spindle_errmsg(), reason));
    ctl_close(p.ctl);
    assert_int_equal(wait_exit(pid), 2); /* member 1 lost its connection */
    mitm_stop(&m);
}

static void test_flipped_byte_fails_the_connection(void **state)
{
    (void)state;
    expect_spoiled_record_fails(MITM_FLIP, "record 3 failed authentication");
}

static void test_replayed_record_fails_the_connection(void **state)
{
    (void)state;
    expect_spoiled_record_fails(MITM_REPLAY, "out of sequence (counter 3, expected 4)");
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_files_must_be_private_regular_and_32_bytes),
        cmocka_unit_test(test_same_key_handshake_seals_both_ways),
        cmocka_unit_test(test_other_key_or_no_key_fails_the_handshake),
        cmocka_unit_test(test_altered_replayed_and_reordered_records_are_refused),
        cmocka_unit_test(test_members_with_one_key_exchange),
        cmocka_unit_test(test_member_with_another_key_is_refused),
        cmocka_unit_test(test_member_without_a_key_is_refused),
        cmocka_unit_test(test_stranger_receives_nothing_of_the_group),
        cmocka_unit_test(test_unkeyed_listener_beyond_loopback_warns),
        cmocka_unit_test(test_flipped_byte_fails_the_connection),
        cmocka_unit_test(test_replayed_record_fails_the_connection),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
