/*
 * A client of spindle_dds's external client protocol played by hand over
 * a socket, for the tests of tests/dds: the handshake with or without the
 * group key, frames sealed and opened with the seal of the handshake,
 * bytes the real client would never send, and the member's ERROR frames
 * checked. Every step asserts (cmocka), so these run on the test's main
 * thread only. Include after cmocka.h.
 */
#ifndef SPINDLE_TESTS_DDS_CLIENT_RAW_H
#define SPINDLE_TESTS_DDS_CLIENT_RAW_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "../../examples/dds/dds_client_seal.h"

/* How long a step waits for the member. */
#define RAW_WAIT_MS 25000

/* Reads one frame from fd into in (4 + DDS_CLIENT_MAX_FRAME bytes), waiting
 * up to timeout_ms for its first byte, and opens it with seal: 1 and
 * *frame, 0 on timeout. */
static inline int raw_read_sealed(int fd, uint8_t *in, struct dds_client_seal *seal,
                                  struct dds_client_frame *frame, int timeout_ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, timeout_ms) == 0)
        return 0;
    size_t want = 4, got = 0;
    while (got < want) {
        ssize_t n = recv(fd, in + got, want - got, 0);
        assert_true(n > 0);
        got += (size_t)n;
        if (got == 4 && want == 4)
            want = 4 + dds_client_frame_length(in);
    }
    assert_true(want > 4);
    uint8_t *body;
    size_t body_size;
    assert_int_equal(dds_client_frame_open(seal, in + 4, want - 4, &body, &body_size), 0);
    assert_int_equal(dds_client_frame_decode(body, body_size, frame), 0);
    return 1;
}

static inline int raw_read_frame(int fd, uint8_t *in, struct dds_client_frame *frame,
                                 int timeout_ms)
{
    struct dds_client_seal plain = {0};
    return raw_read_sealed(fd, in, &plain, frame, timeout_ms);
}

/* Seals frame with seal and sends it; the bytes sent in out (256 bytes). */
static inline size_t raw_send_sealed(int fd, struct dds_client_seal *seal,
                                     const struct dds_client_frame *frame, uint8_t *out)
{
    size_t n = dds_client_frame_seal(seal, out, 256, frame);
    assert_true(n > 0);
    assert_int_equal(send(fd, out, n, MSG_NOSIGNAL), (ssize_t)n);
    return n;
}

static inline void raw_send(int fd, const struct dds_client_frame *frame)
{
    struct dds_client_seal plain = {0};
    uint8_t out[256];
    raw_send_sealed(fd, &plain, frame, out);
}

/* A connection to the member at port; rcvbuf > 0: a receive buffer that
 * small and fixed (no autotuning). */
static inline int raw_connect(uint16_t port, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0)
        assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf), 0);
    struct sockaddr_in sin = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof sin), 0);
    return fd;
}

/* The handshake by hand on fd, with key (its proofs both ways) or without
 * (NULL: zeros); seal is then set up for the client's end. */
static inline void raw_handshake(int fd, const uint8_t *key, uint8_t *in,
                                 struct dds_client_seal *seal)
{
    struct dds_client_frame frame;
    assert_int_equal(raw_read_frame(fd, in, &frame, RAW_WAIT_MS), 1);
    assert_int_equal(frame.type, DDS_CLIENT_WELCOME);
    assert_int_equal(frame.flags, key != NULL);
    uint8_t nonce_m[DDS_CLIENT_NONCE], nonce_c[DDS_CLIENT_NONCE], proof[DDS_CLIENT_PROOF] = {0};
    memcpy(nonce_m, frame.nonce, sizeof nonce_m);
    assert_int_equal(dds_client_random(nonce_c, sizeof nonce_c), 0);
    if (key != NULL)
        dds_client_proof(key, 'C', nonce_m, nonce_c, proof);
    raw_send(
        fd, &(struct dds_client_frame){.type = DDS_CLIENT_HELLO, .nonce = nonce_c, .proof = proof});
    assert_int_equal(raw_read_frame(fd, in, &frame, RAW_WAIT_MS), 1);
    assert_int_equal(frame.type, DDS_CLIENT_READY);
    memset(seal, 0, sizeof *seal);
    if (key != NULL) {
        assert_true(dds_client_proof_ok(key, 'M', nonce_m, nonce_c, frame.proof));
        dds_client_seal_derive(seal, key, 'C', nonce_m, nonce_c);
    }
}

static inline int raw_keyed_client(uint16_t port, const uint8_t key[DDS_CLIENT_KEY], uint8_t *in,
                                   struct dds_client_seal *seal)
{
    int fd = raw_connect(port, 0);
    raw_handshake(fd, key, in, seal);
    return fd;
}

/* frame is the member's ERROR of code, its text naming want. */
static inline void expect_error_frame(const struct dds_client_frame *frame, int code,
                                      const char *want)
{
    assert_int_equal(frame->type, DDS_CLIENT_ERROR);
    assert_int_equal(frame->code, code);
    char text[DDS_CLIENT_TEXT + 1];
    memcpy(text, frame->data, frame->length);
    text[frame->length] = '\0';
    if (strstr(text, want) == NULL)
        fail_msg("member's error \"%s\" lacks \"%s\"", text, want);
}

/* Connects, reads the WELCOME, sends bytes; the member's ERROR text. */
static inline void expect_refusal(uint16_t port, const uint8_t *bytes, size_t size,
                                  const char *want)
{
    int fd = raw_connect(port, 0);
    struct timeval timeout = {.tv_sec = 30};
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout), 0);
    uint8_t in[2048];
    size_t got = 0;
    assert_int_equal(send(fd, bytes, size, MSG_NOSIGNAL), (ssize_t)size);
    for (ssize_t n; (n = recv(fd, in + got, sizeof in - got, 0)) > 0;)
        got += (size_t)n;
    close(fd);
    /* WELCOME, then the ERROR, then the end of the stream. */
    assert_true(got > 4);
    uint32_t first = dds_client_frame_length(in);
    assert_true(first > 0 && 4 + first + 4 <= got);
    struct dds_client_frame frame;
    uint32_t second = dds_client_frame_length(in + 4 + first);
    assert_int_equal(4 + first + 4 + second, got);
    assert_int_equal(dds_client_frame_decode(in + 8 + first, second, &frame), 0);
    expect_error_frame(&frame, frame.code, want);
}

/* The member's sealed ERROR on fd, then the end of the stream. */
static inline void expect_sealed_refusal(int fd, uint8_t *in, struct dds_client_seal *seal,
                                         const char *want)
{
    struct dds_client_frame frame;
    assert_int_equal(raw_read_sealed(fd, in, seal, &frame, RAW_WAIT_MS), 1);
    expect_error_frame(&frame, SPINDLE_EPROTO, want);
    assert_int_equal(recv(fd, in, 1, 0), 0);
    close(fd);
}

#endif
