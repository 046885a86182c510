/*
 * Fuzz harness for the control-channel decoder (src/view/wire.c).
 *
 * Properties checked for every input:
 *   - decoding never crashes or reads outside the buffer (run under ASan);
 *   - a rejected input fails with SPINDLE_EPROTO and a non-empty reason;
 *   - an accepted input re-encodes to exactly the same bytes (the format
 *     is canonical, so nothing is silently ignored or normalised).
 * Each input is tried twice: as a whole frame, and as a payload behind a
 * valid header whose type is chosen by the first byte, so mutations reach
 * the payload parsers instead of dying at the magic check.
 *
 * As a normal test (the default build) main() runs a bounded, seeded
 * mutation loop over the valid sample frames plus purely random buffers:
 *     fuzz_wire [iterations]        (SPINDLE_TEST_SEED overrides the seed)
 * With libFuzzer, build with -DSPINDLE_LIBFUZZER, e.g.
 *     clang -fsanitize=fuzzer,address,undefined -DSPINDLE_LIBFUZZER -D_GNU_SOURCE \
 *       -Isrc -Iinclude -Ibuild/include -Itests tests/view/fuzz_wire.c \
 *       src/view/[a-z]*.c src/util/error.c -o fuzz_wire
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "view/wire.h"
#include "view/wire_samples.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned long accepted, rejected;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_wire: check failed: %s (%s:%d), last error \"%s\"\n", #cond,     \
                    __FILE__, __LINE__, spindle_errmsg());                                         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Decodes one frame held in an exact-size heap copy; returns the code. */
static int check_frame(const uint8_t *data, size_t size)
{
    uint8_t *copy = malloc(size ? size : 1);
    CHECK(copy != NULL);
    if (size)
        memcpy(copy, data, size);
    uint64_t group = wire_group_hash(SAMPLE_GROUP);
    struct wire_msg msg;
    int rc = wire_decode(copy, size, group, &msg);
    if (rc == 0) {
        accepted++;
        uint8_t *again = malloc(size);
        size_t len = 0;
        CHECK(again != NULL);
        CHECK(wire_encode(group, &msg, again, size, &len) == 0);
        CHECK(len == size);
        CHECK(memcmp(again, copy, size) == 0);
        free(again);
        wire_msg_clear(&msg);
    } else {
        rejected++;
        CHECK(rc == SPINDLE_EPROTO);
        CHECK(spindle_errmsg()[0] != '\0');
    }
    free(copy);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_frame(data, size);
    if (size == 0 || size - 1 > WIRE_MAX_PAYLOAD)
        return 0;
    /* The same bytes as the payload of a well-formed header. */
    size_t payload = size - 1;
    uint8_t *frame = malloc(WIRE_HEADER_SIZE + payload);
    CHECK(frame != NULL);
    struct wire_msg header_only = {.type = WIRE_VIEW_COMMIT};
    size_t len;
    CHECK(wire_encode(wire_group_hash(SAMPLE_GROUP), &header_only, frame, WIRE_HEADER_SIZE, &len) ==
          SPINDLE_EMSGSIZE); /* writes the header, reports the size */
    frame[6] = (uint8_t)(data[0] % WIRE_TYPE_MAX + 1);
    frame[7] = 0;
    for (int i = 0; i < 4; i++)
        frame[16 + i] = (uint8_t)(payload >> (8 * i));
    memcpy(frame + WIRE_HEADER_SIZE, data + 1, payload);
    check_frame(frame, WIRE_HEADER_SIZE + payload);
    free(frame);
    return 0;
}

#ifndef SPINDLE_LIBFUZZER

static uint64_t rng_state;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

#define CORPUS_CAP 4096

struct sample {
    uint8_t bytes[CORPUS_CAP];
    size_t len;
};

static const uint64_t interesting[] = {
    0,  1,  2,   0x7f, 0x80, 0xff, 0xffff,           0x7fffffff,           0xffffffff,
    64, 65, 192, 193,  255,  256,  WIRE_MAX_PAYLOAD, WIRE_MAX_PAYLOAD + 1, UINT64_MAX};

/* Applies one random mutation to buf (length *len, capacity CORPUS_CAP). */
static void mutate(uint8_t *buf, size_t *len, const struct sample *corpus, size_t corpus_count)
{
    size_t at = *len ? rng() % *len : 0;
    switch (rng() % 8) {
    case 0: /* flip a bit */
        if (*len)
            buf[at] ^= (uint8_t)(1u << (rng() % 8));
        break;
    case 1: /* random byte */
        if (*len)
            buf[at] = (uint8_t)rng();
        break;
    case 2: { /* interesting little-endian value of width 1, 2, 4 or 8 */
        unsigned width = 1u << (rng() % 4);
        uint64_t value = interesting[rng() % (sizeof interesting / sizeof interesting[0])];
        for (unsigned i = 0; i < width && at + i < *len; i++)
            buf[at + i] = (uint8_t)(value >> (8 * i));
        break;
    }
    case 3: /* insert a byte */
        if (*len < CORPUS_CAP) {
            memmove(buf + at + 1, buf + at, *len - at);
            buf[at] = (uint8_t)rng();
            (*len)++;
        }
        break;
    case 4: /* delete a byte */
        if (*len) {
            memmove(buf + at, buf + at + 1, *len - at - 1);
            (*len)--;
        }
        break;
    case 5: /* truncate */
        *len = at;
        break;
    case 6: { /* splice the tail of another sample */
        const struct sample *other = &corpus[rng() % corpus_count];
        size_t from = other->len ? rng() % other->len : 0;
        size_t n = other->len - from;
        if (at + n > CORPUS_CAP)
            n = CORPUS_CAP - at;
        memcpy(buf + at, other->bytes + from, n);
        *len = at + n;
        break;
    }
    default: /* keep the header length consistent so the payload is parsed */
        if (*len >= WIRE_HEADER_SIZE)
            for (int i = 0; i < 4; i++)
                buf[16 + i] = (uint8_t)((*len - WIRE_HEADER_SIZE) >> (8 * i));
        break;
    }
}

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? strtol(argv[1], NULL, 0) : 20000;
    const char *seed_text = getenv("SPINDLE_TEST_SEED");
    uint64_t seed = seed_text ? strtoull(seed_text, NULL, 0) : 0xf022c0de5eedull;
    rng_state = seed ? seed : 1;

    static struct sample corpus[WIRE_TYPE_MAX];
    for (unsigned type = 1; type <= WIRE_TYPE_MAX; type++) {
        long len = sample_frame(type, corpus[type - 1].bytes, CORPUS_CAP);
        CHECK(len > 0);
        corpus[type - 1].len = (size_t)len;
        CHECK(check_frame(corpus[type - 1].bytes, (size_t)len) == 0);
    }
    unsigned long garbage = 0, garbage_rejected = 0;
    for (long i = 0; i < iterations; i++) {
        static uint8_t buf[CORPUS_CAP];
        size_t len;
        if (rng() % 8 == 0) {
            /* Pure garbage must never be accepted as a whole frame. */
            len = rng() % 600;
            for (size_t b = 0; b < len; b++)
                buf[b] = (uint8_t)rng();
            garbage++;
            garbage_rejected += check_frame(buf, len) != 0;
            LLVMFuzzerTestOneInput(buf, len);
            continue;
        }
        const struct sample *base = &corpus[rng() % WIRE_TYPE_MAX];
        memcpy(buf, base->bytes, base->len);
        len = base->len;
        for (unsigned m = 1 + rng() % 6; m > 0; m--)
            mutate(buf, &len, corpus, WIRE_TYPE_MAX);
        LLVMFuzzerTestOneInput(buf, len);
    }
    printf("fuzz_wire: seed 0x%llx, %ld iterations, %lu decodes accepted, %lu rejected, "
           "%lu/%lu garbage buffers rejected\n",
           (unsigned long long)seed, iterations, accepted, rejected, garbage_rejected, garbage);
    CHECK(garbage_rejected == garbage);
    /* The loop must exercise both outcomes, or it is not testing much. */
    CHECK(iterations < 1000 ||
          (accepted > (unsigned long)iterations / 50 && rejected > (unsigned long)iterations / 2));
    return 0;
}

#endif
