/*
 * Sealed frames of spindle_dds's external client protocol
 * (examples/dds/dds_client_seal.h), driven directly, without sockets: a
 * client's and a member's ends of one keyed connection.
 *
 * - Frames open in order both ways and decode to what was sealed; the
 *   bytes on the wire do not carry the plaintext.
 * - Two frames fed swapped are refused as reordered, one fed twice as
 *   replayed, one with any single byte flipped (length, counter,
 *   ciphertext, tag) or cut short as altered (or too short for a seal); a
 *   refused frame leaves the receiving end as it was.
 * - Another key's frames, a frame reflected back to its sender and a
 *   plain frame after the handshake do not open.
 * - The largest frames fit DDS_CLIENT_MAX_FRAME sealed; without a key a
 *   seal is a pass-through, byte for byte.
 * - The client (spindle_dds_client_*) against a member played by a thread
 *   of the test: a sample altered, replayed or reordered on the wire is
 *   not handed out; the client leaves the connection with the refusal as
 *   its error, fails over (to the same member, its only one) and receives
 *   the next sample.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../examples/dds/dds_client_seal.h"
#include "../../examples/dds/dds_impl.h"

static const uint8_t group_key[DDS_CLIENT_KEY] = {7, 7, 7};
static const uint8_t nonce_m[DDS_CLIENT_NONCE] = {1, 2, 3};
static const uint8_t nonce_c[DDS_CLIENT_NONCE] = {4, 5, 6};

struct ends {
    struct dds_client_seal client, member;
};

static void derive_ends(struct ends *e, const uint8_t *member_key)
{
    dds_client_seal_derive(&e->client, group_key, 'C', nonce_m, nonce_c);
    dds_client_seal_derive(&e->member, member_key, 'M', nonce_m, nonce_c);
}

/* A SUBSCRIBE frame with this name, sealed by from: its whole bytes. */
static size_t seal_subscribe(struct dds_client_seal *from, const char *name, uint8_t *out,
                             size_t capacity)
{
    struct dds_client_frame frame = {.type = DDS_CLIENT_SUBSCRIBE};
    snprintf(frame.name, sizeof frame.name, "%s", name);
    size_t n = dds_client_frame_seal(from, out, capacity, &frame);
    assert_true(n > 4);
    assert_int_equal(dds_client_frame_length(out), n - 4);
    return n;
}

/* Opens a copy of the frame (out..out+n, length field first) at to: the
 * result, and the decoded name when it opened. */
static int open_copy(struct dds_client_seal *to, const uint8_t *sealed, size_t n, char *name)
{
    uint8_t copy[512];
    assert_true(n <= sizeof copy);
    memcpy(copy, sealed, n);
    uint8_t *body;
    size_t body_size;
    int rc = dds_client_frame_open(to, copy + 4, n - 4, &body, &body_size);
    if (rc != 0)
        return rc;
    struct dds_client_frame frame;
    assert_int_equal(dds_client_frame_decode(body, body_size, &frame), 0);
    assert_int_equal(frame.type, DDS_CLIENT_SUBSCRIBE);
    snprintf(name, SPINDLE_DDS_NAME_MAX, "%s", frame.name);
    return 0;
}

static void expect_refused(struct dds_client_seal *to, const uint8_t *sealed, size_t n,
                           const char *why)
{
    char name[SPINDLE_DDS_NAME_MAX];
    uint64_t rx_seq = to->rx_seq;
    assert_int_equal(open_copy(to, sealed, n, name), SPINDLE_EPROTO);
    if (strstr(spindle_dds_errmsg(), why) == NULL)
        fail_msg("refusal \"%s\" lacks \"%s\"", spindle_dds_errmsg(), why);
    assert_int_equal(to->rx_seq, rx_seq);
}

static void test_sealed_frames_open_in_order_both_ways(void **state)
{
    (void)state;
    struct ends e;
    derive_ends(&e, group_key);
    uint8_t wire[256], plain[256];
    char name[SPINDLE_DDS_NAME_MAX];
    for (int i = 0; i < 3; i++) {
        size_t n = seal_subscribe(&e.client, "temperature", wire, sizeof wire);
        struct dds_client_frame frame = {.type = DDS_CLIENT_SUBSCRIBE, .name = "temperature"};
        size_t p = dds_client_frame_encode(plain, sizeof plain, &frame);
        assert_int_equal(n, p + DDS_CLIENT_SEAL_OVERHEAD);
        assert_null(memmem(wire, n, "temperature", strlen("temperature")));
        assert_int_equal(open_copy(&e.member, wire, n, name), 0);
        assert_string_equal(name, "temperature");
    }
    uint8_t bytes[] = "a reading";
    struct dds_client_frame sample = {.type = DDS_CLIENT_SAMPLE,
                                      .topic = 3,
                                      .id = 1,
                                      .seq = 12,
                                      .time_ns = 99,
                                      .data = bytes,
                                      .length = sizeof bytes};
    size_t n = dds_client_frame_seal(&e.member, wire, sizeof wire, &sample);
    assert_true(n > 0);
    uint8_t *body;
    size_t body_size;
    struct dds_client_frame got;
    assert_int_equal(dds_client_frame_open(&e.client, wire + 4, n - 4, &body, &body_size), 0);
    assert_int_equal(dds_client_frame_decode(body, body_size, &got), 0);
    assert_int_equal(got.type, DDS_CLIENT_SAMPLE);
    assert_int_equal(got.seq, 12);
    assert_int_equal(got.length, sizeof bytes);
    assert_memory_equal(got.data, bytes, sizeof bytes);
    assert_int_equal(e.member.rx_seq, 3);
    assert_int_equal(e.client.rx_seq, 1);
}

/* Two frames the client sealed in turn, "first" and "second". */
struct two_frames {
    struct ends e;
    uint8_t first[128], second[128];
    size_t first_size, second_size;
};

static void seal_two(struct two_frames *t)
{
    derive_ends(&t->e, group_key);
    t->first_size = seal_subscribe(&t->e.client, "first", t->first, sizeof t->first);
    t->second_size = seal_subscribe(&t->e.client, "second", t->second, sizeof t->second);
}

static void test_swapped_frames_are_refused_as_reordered(void **state)
{
    (void)state;
    struct two_frames t;
    seal_two(&t);
    expect_refused(&t.e.member, t.second, t.second_size,
                   "sealed frame 1 arrived where frame 0 was due");
    char name[SPINDLE_DDS_NAME_MAX];
    assert_int_equal(open_copy(&t.e.member, t.first, t.first_size, name), 0);
    assert_string_equal(name, "first");
}

static void test_frame_fed_twice_is_refused_as_replayed(void **state)
{
    (void)state;
    struct two_frames t;
    seal_two(&t);
    char name[SPINDLE_DDS_NAME_MAX];
    assert_int_equal(open_copy(&t.e.member, t.first, t.first_size, name), 0);
    expect_refused(&t.e.member, t.first, t.first_size, "(replayed)");
    assert_int_equal(open_copy(&t.e.member, t.second, t.second_size, name), 0);
    assert_string_equal(name, "second");
    expect_refused(&t.e.member, t.second, t.second_size, "sealed frame 1 arrived again");
}

/* Every byte of a sealed frame, flipped, makes it refused; the frame
 * itself still opens after all of them. */
static void test_altered_frame_is_refused(void **state)
{
    (void)state;
    struct ends e;
    derive_ends(&e, group_key);
    uint8_t sealed[128], altered[128];
    size_t n = seal_subscribe(&e.client, "pressure", sealed, sizeof sealed);
    for (size_t at = 0; at < n; at++) {
        memcpy(altered, sealed, n);
        altered[at] ^= 0x20;
        char name[SPINDLE_DDS_NAME_MAX];
        uint64_t rx_seq = e.member.rx_seq;
        /* The length field as the reader takes it: a frame of another size. */
        size_t size = at < 4 ? dds_client_frame_length(altered) : n - 4;
        if (size == 0 || size > n - 4)
            continue; /* a reader would wait for bytes that never come, or refuse the length */
        int rc = open_copy(&e.member, altered, 4 + size, name);
        if (rc != SPINDLE_EPROTO)
            fail_msg("byte %zu flipped: opened", at);
        assert_int_equal(e.member.rx_seq, rx_seq);
        /* A length made too small for a seal is refused before any key is used. */
        const char *why = size <= DDS_CLIENT_SEAL_OVERHEAD ? "cut short" : "failed authentication";
        if (strstr(spindle_dds_errmsg(), why) == NULL)
            fail_msg("byte %zu flipped: \"%s\" lacks \"%s\"", at, spindle_dds_errmsg(), why);
    }
    expect_refused(&e.member, sealed, n - 1, "failed authentication: altered");
    expect_refused(&e.member, sealed, DDS_CLIENT_SEAL_OVERHEAD + 4, "a sealed frame of 24 bytes");
    char name[SPINDLE_DDS_NAME_MAX];
    assert_int_equal(open_copy(&e.member, sealed, n, name), 0);
    assert_string_equal(name, "pressure");
}

static void test_other_key_reflection_and_plain_frames_do_not_open(void **state)
{
    (void)state;
    static const uint8_t other_key[DDS_CLIENT_KEY] = {8};
    struct ends e;
    derive_ends(&e, other_key);
    uint8_t sealed[128];
    size_t n = seal_subscribe(&e.client, "flow", sealed, sizeof sealed);
    expect_refused(&e.member, sealed, n, "sealed with another key");
    /* Each direction has its own key: the client's frame sent back to it. */
    expect_refused(&e.client, sealed, n, "failed authentication");
    derive_ends(&e, group_key);
    struct dds_client_seal plain = {0};
    n = seal_subscribe(&plain, "flow-and-a-name-long-enough-for-a-seal", sealed, sizeof sealed);
    expect_refused(&e.member, sealed, n, "failed authentication");
    n = seal_subscribe(&plain, "f", sealed, sizeof sealed);
    expect_refused(&e.member, sealed, n, "not sealed, or cut short");
}

static void test_largest_frames_fit_sealed(void **state)
{
    (void)state;
    struct ends e;
    derive_ends(&e, group_key);
    uint8_t *data = calloc(1, SPINDLE_DDS_MAX_SAMPLE);
    uint8_t *wire = malloc(4 + DDS_CLIENT_MAX_FRAME);
    assert_non_null(data);
    assert_non_null(wire);
    struct dds_client_frame publish = {
        .type = DDS_CLIENT_PUBLISH, .data = data, .length = SPINDLE_DDS_MAX_SAMPLE};
    memset(publish.name, 'n', SPINDLE_DDS_NAME_MAX - 1);
    struct dds_client_frame sample = {.type = DDS_CLIENT_SAMPLE,
                                      .id = 1,
                                      .seq = 1,
                                      .data = data,
                                      .length = SPINDLE_DDS_MAX_SAMPLE};
    const struct dds_client_frame *frames[] = {&publish, &sample};
    struct dds_client_seal *from[] = {&e.client, &e.member}, *to[] = {&e.member, &e.client};
    for (int i = 0; i < 2; i++) {
        size_t n = dds_client_frame_seal(from[i], wire, 4 + DDS_CLIENT_MAX_FRAME, frames[i]);
        assert_true(n > 0);
        assert_int_equal(dds_client_frame_length(wire), n - 4);
        assert_true(n - 4 <= 4 + DDS_CLIENT_FRAME_MARGIN + SPINDLE_DDS_MAX_SAMPLE);
        uint8_t *body;
        size_t body_size;
        struct dds_client_frame got;
        assert_int_equal(dds_client_frame_open(to[i], wire + 4, n - 4, &body, &body_size), 0);
        assert_int_equal(dds_client_frame_decode(body, body_size, &got), 0);
        assert_int_equal(got.length, SPINDLE_DDS_MAX_SAMPLE);
    }
    /* Too little room: nothing written, the counter unchanged. */
    assert_int_equal(dds_client_frame_seal(&e.client, wire, 100, &publish), 0);
    assert_int_equal(e.client.tx_seq, 1);
    free(wire);
    free(data);
}

static void test_without_a_key_a_seal_is_a_pass_through(void **state)
{
    (void)state;
    struct dds_client_seal plain = {0};
    uint8_t sealed[128], encoded[128];
    struct dds_client_frame frame = {.type = DDS_CLIENT_SUBSCRIBE, .name = "temperature"};
    size_t n = dds_client_frame_seal(&plain, sealed, sizeof sealed, &frame);
    assert_int_equal(n, dds_client_frame_encode(encoded, sizeof encoded, &frame));
    assert_memory_equal(sealed, encoded, n);
    uint8_t *body;
    size_t body_size;
    assert_int_equal(dds_client_frame_open(&plain, sealed + 4, n - 4, &body, &body_size), 0);
    assert_ptr_equal(body, sealed + 4);
    assert_int_equal(body_size, n - 4);
    assert_int_equal(plain.tx_seq, 0);
    /* Clearing a keyed seal makes it a pass-through again (a new connection). */
    struct dds_client_seal keyed;
    dds_client_seal_derive(&keyed, group_key, 'C', nonce_m, nonce_c);
    dds_client_seal_clear(&keyed);
    assert_false(keyed.keyed);
    assert_int_equal(dds_client_frame_seal(&keyed, sealed, sizeof sealed, &frame), n);
    assert_memory_equal(sealed, encoded, n);
}

/* A member played by a thread: no cmocka assertions off the main thread,
 * so each step says whether it went as it should. */
struct fake_member {
    int listen_fd;
    bool ok;
    uint8_t in[512], out[512], held[512];
};

/* One whole frame from fd into m->in, its length field first: its size,
 * 0 when the stream ended or the length is out of range. */
static size_t fake_read(int fd, struct fake_member *m)
{
    size_t want = 4, got = 0;
    while (got < want) {
        ssize_t n = recv(fd, m->in + got, want - got, 0);
        if (n <= 0)
            return 0;
        got += (size_t)n;
        if (got == 4 && want == 4) {
            want = 4 + dds_client_frame_length(m->in);
            if (want == 4 || want > sizeof m->in)
                return 0;
        }
    }
    return got;
}

/* Reads a frame, opens it with seal and decodes it: whether it is of type. */
static bool fake_expect(int fd, struct fake_member *m, struct dds_client_seal *seal, uint8_t type,
                        struct dds_client_frame *frame)
{
    size_t n = fake_read(fd, m);
    uint8_t *body;
    size_t body_size;
    return n > 0 && dds_client_frame_open(seal, m->in + 4, n - 4, &body, &body_size) == 0 &&
           dds_client_frame_decode(body, body_size, frame) == 0 && frame->type == type;
}

/* Seals frame into out and sends it: its size, 0 on failure. */
static size_t fake_send(int fd, struct dds_client_seal *seal, const struct dds_client_frame *frame,
                        uint8_t *out, size_t capacity)
{
    size_t n = dds_client_frame_seal(seal, out, capacity, frame);
    return n > 0 && send(fd, out, n, MSG_NOSIGNAL) == (ssize_t)n ? n : 0;
}

/* A client's connection up to SUBSCRIBED, as a keyed member: its fd, -1
 * when a step failed. */
static int fake_accept(struct fake_member *m, struct dds_client_seal *seal)
{
    int fd = accept(m->listen_fd, NULL, NULL);
    struct dds_client_seal plain = {0};
    uint8_t nonce[DDS_CLIENT_NONCE], proof[DDS_CLIENT_PROOF];
    struct dds_client_frame frame;
    bool ok = fd >= 0 && dds_client_random(nonce, sizeof nonce) == 0 &&
              fake_send(fd, &plain,
                        &(struct dds_client_frame){
                            .type = DDS_CLIENT_WELCOME, .flags = 1, .nonce = nonce},
                        m->out, sizeof m->out) > 0 &&
              fake_expect(fd, m, &plain, DDS_CLIENT_HELLO, &frame) &&
              dds_client_proof_ok(group_key, 'C', nonce, frame.nonce, frame.proof);
    if (ok) {
        dds_client_proof(group_key, 'M', nonce, frame.nonce, proof);
        dds_client_seal_derive(seal, group_key, 'M', nonce, frame.nonce);
        ok = fake_send(fd, &plain,
                       &(struct dds_client_frame){.type = DDS_CLIENT_READY, .proof = proof}, m->out,
                       sizeof m->out) > 0 &&
             fake_expect(fd, m, seal, DDS_CLIENT_SUBSCRIBE, &frame) &&
             fake_send(fd, seal,
                       &(struct dds_client_frame){.type = DDS_CLIENT_SUBSCRIBED, .name = "in"},
                       m->out, sizeof m->out) > 0;
    }
    if (!ok && fd >= 0)
        close(fd);
    return ok ? fd : -1;
}

static struct dds_client_frame sample_of(uint64_t seq)
{
    static const uint8_t bytes[8] = "sealed!";
    return (struct dds_client_frame){
        .type = DDS_CLIENT_SAMPLE, .seq = seq, .data = bytes, .length = sizeof bytes};
}

/* Waits for the client to leave the connection. */
static bool fake_until_closed(int fd, struct fake_member *m)
{
    bool closed = fake_read(fd, m) == 0;
    close(fd);
    return closed;
}

/* Four connections: sample 1 altered; sample 1, then the same bytes
 * again; sample 2, then samples 3 and 4 swapped; sample 5. */
static void *fake_member_run(void *arg)
{
    struct fake_member *m = arg;
    struct dds_client_seal seal;
    struct dds_client_frame sample = sample_of(1);
    int fd = fake_accept(m, &seal);
    size_t n = fd >= 0 ? dds_client_frame_seal(&seal, m->out, sizeof m->out, &sample) : 0;
    m->ok = n > 0;
    if (n > 0)
        m->out[n - 1] ^= 0x80; /* the tag's last byte */
    m->ok = m->ok && send(fd, m->out, n, MSG_NOSIGNAL) == (ssize_t)n && fake_until_closed(fd, m);

    fd = m->ok ? fake_accept(m, &seal) : -1;
    n = fd >= 0 ? fake_send(fd, &seal, &sample, m->out, sizeof m->out) : 0;
    m->ok = n > 0 && send(fd, m->out, n, MSG_NOSIGNAL) == (ssize_t)n && fake_until_closed(fd, m);

    fd = m->ok ? fake_accept(m, &seal) : -1;
    struct dds_client_frame second = sample_of(2), third = sample_of(3), fourth = sample_of(4);
    size_t held = fd >= 0 ? fake_send(fd, &seal, &second, m->out, sizeof m->out) : 0;
    held = held > 0 ? dds_client_frame_seal(&seal, m->held, sizeof m->held, &third) : 0;
    m->ok = held > 0 && fake_send(fd, &seal, &fourth, m->out, sizeof m->out) > 0 &&
            send(fd, m->held, held, MSG_NOSIGNAL) == (ssize_t)held && fake_until_closed(fd, m);

    fd = m->ok ? fake_accept(m, &seal) : -1;
    struct dds_client_frame fifth = sample_of(5);
    m->ok = fd >= 0 && fake_send(fd, &seal, &fifth, m->out, sizeof m->out) > 0 &&
            fake_until_closed(fd, m);
    close(m->listen_fd);
    return NULL;
}

/* The next sample: its seq; the error of the connection it left behind
 * must name want, and the client must have failed over once more. */
static void expect_sample_after_refusal(spindle_dds_client_t *client, uint64_t seq,
                                        uint64_t failovers, const char *want)
{
    uint8_t buffer[16];
    struct spindle_dds_client_sample_info info;
    int rc = spindle_dds_client_receive(client, buffer, sizeof buffer, &info, 20000);
    if (rc < 0)
        fail_msg("receive: %d %s", rc, spindle_dds_errmsg());
    assert_int_equal(rc, 8);
    assert_string_equal((const char *)buffer, "sealed!");
    assert_int_equal(info.sample.seq, seq);
    assert_int_equal(spindle_dds_client_failovers(client), failovers);
    if (strstr(spindle_dds_errmsg(), want) == NULL)
        fail_msg("client's error \"%s\" lacks \"%s\"", spindle_dds_errmsg(), want);
}

static void test_client_refuses_member_frames_altered_replayed_or_reordered(void **state)
{
    (void)state;
    char dir[] = "/tmp/spindle-dds-seal-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char key_file[64], address[32];
    snprintf(key_file, sizeof key_file, "%s/key", dir);
    int key_fd = open(key_file, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(key_fd >= 0);
    assert_int_equal(write(key_fd, group_key, sizeof group_key), sizeof group_key);
    close(key_fd);
    struct fake_member *m = calloc(1, sizeof *m);
    assert_non_null(m);
    m->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sin;
    assert_int_equal(bind(m->listen_fd, (struct sockaddr *)&sin, sizeof sin), 0);
    assert_int_equal(listen(m->listen_fd, 4), 0);
    assert_int_equal(getsockname(m->listen_fd, (struct sockaddr *)&sin, &len), 0);
    snprintf(address, sizeof address, "127.0.0.1:%u", ntohs(sin.sin_port));
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, fake_member_run, m), 0);

    const char *members[1] = {address};
    struct spindle_dds_client_options o = {
        .members = members, .num_members = 1, .key_file = key_file, .timeout_ms = 20000};
    spindle_dds_client_t *client;
    assert_int_equal(spindle_dds_client_connect(&o, &client), 0);
    assert_int_equal(spindle_dds_client_subscribe(client, "in", false), 0);
    expect_sample_after_refusal(client, 1, 1,
                                ": client protocol: sealed frame (counter 1, 1 due) "
                                "failed authentication");
    expect_sample_after_refusal(client, 2, 2, "sealed frame 1 arrived again");
    expect_sample_after_refusal(client, 5, 3, "sealed frame 3 arrived where frame 2 was due");
    spindle_dds_client_close(client);
    pthread_join(thread, NULL);
    assert_true(m->ok);
    free(m);
    unlink(key_file);
    rmdir(dir);
}

int main(void)
{
    uint8_t unused;
    assert_int_equal(dds_client_random(&unused, 1), 0); /* initialises libsodium */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sealed_frames_open_in_order_both_ways),
        cmocka_unit_test(test_swapped_frames_are_refused_as_reordered),
        cmocka_unit_test(test_frame_fed_twice_is_refused_as_replayed),
        cmocka_unit_test(test_altered_frame_is_refused),
        cmocka_unit_test(test_other_key_reflection_and_plain_frames_do_not_open),
        cmocka_unit_test(test_largest_frames_fit_sealed),
        cmocka_unit_test(test_without_a_key_a_seal_is_a_pass_through),
        cmocka_unit_test(test_client_refuses_member_frames_altered_replayed_or_reordered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
