/*
 * Shared by the libFuzzer targets in tests/fuzz: one binary per decoder of
 * bytes that come from another process, plus the INI loader
 * (docs/FUZZING.md). A target hands libFuzzer's input to its decoder and
 * checks what the format promises (docs/WIRE.md): a refused input is
 * refused with the decoder's documented code and a message that says where,
 * and an accepted one re-encodes to the very same bytes and decodes again
 * to the same message. A broken promise aborts with a line on stderr naming
 * it; libFuzzer reports that as a crash and saves the input. Aborting is
 * fine here, in test code: the library itself never aborts.
 *
 * Structs are zeroed before every decode, so two decodes of the same bytes
 * compare equal with memcmp, padding included.
 */
#ifndef SPINDLE_TESTS_FUZZ_COMMON_H
#define SPINDLE_TESTS_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <spindle/error.h>

/* libFuzzer's entry points (no header declares them). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_UNUSED __attribute__((unused))

static FUZZ_UNUSED void fuzz_fail(const char *what, const char *file, int line)
{
    fprintf(stderr, "%s:%d: fuzz check failed: %s (last error: %s)\n", file, line, what,
            spindle_errmsg());
    abort();
}

/* Aborts, naming the condition, when cond is false. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond))                                                                               \
            fuzz_fail(#cond, __FILE__, __LINE__);                                                  \
    } while (0)

/* A wire codec decoder's refusal (util/wire.h): SPINDLE_EPROTO, and a
 * message that names the message and the offset of the wrong field. */
static FUZZ_UNUSED void fuzz_check_wire_refusal(int rc, const char *message_name)
{
    FUZZ_CHECK(rc == SPINDLE_EPROTO);
    const char *msg = spindle_errmsg();
    FUZZ_CHECK(strncmp(msg, message_name, strlen(message_name)) == 0);
    FUZZ_CHECK(strstr(msg, " at offset ") != NULL);
}

/* An accepted input re-encoded: the same length and the same bytes. */
static FUZZ_UNUSED void fuzz_check_same_bytes(const uint8_t *input, size_t size,
                                              const uint8_t *again, size_t again_len)
{
    FUZZ_CHECK(again_len == size);
    FUZZ_CHECK(memcmp(input, again, size) == 0);
}

/*
 * The record target's input (fuzz_fab_record.c), which the seed generator
 * writes too: u16 ring slot (the record's offset in 64-byte units, as the
 * CQ data carries it), u64 ring position applied so far, u64 length of the
 * target region, then the bytes found in the landing ring at that offset
 * (the 64-byte record header first). Integers little-endian.
 */
#define FUZZ_REC_PREFIX 18u

static FUZZ_UNUSED uint64_t fuzz_get_le(const uint8_t *at, unsigned bytes)
{
    uint64_t value = 0;
    for (unsigned i = 0; i < bytes; i++)
        value |= (uint64_t)at[i] << (8 * i);
    return value;
}

static FUZZ_UNUSED void fuzz_put_le(uint8_t *at, uint64_t value, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++)
        at[i] = (uint8_t)(value >> (8 * i));
}

#endif
