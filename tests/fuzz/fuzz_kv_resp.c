/*
 * libFuzzer target: kv_resp_parse (examples/kv/kv_resp.c), spindle-kv's
 * parser of the bytes a client sends. The input is a connection's bytes,
 * parsed command after command as the server does. Every command taken
 * must lie within the input, with its arguments inside what it took, and
 * parse again to the same arguments from exactly its own bytes; a refusal
 * must say "Protocol error"; an incomplete command must stay incomplete on
 * every shorter prefix of the same bytes.
 */
#include "fuzz_common.h"
#include "kv_resp.h"

static const struct kv_resp_limits limits = {.max_args = 64, .max_bulk = 512, .max_inline = 256};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kv_argv argv = {0}, again = {0};
    const char *text = (const char *)data;
    char error[256];
    size_t at = 0;
    for (int commands = 0; commands < 256 && at < size; commands++) {
        long n = kv_resp_parse(text + at, size - at, &limits, &argv, error, sizeof error);
        if (n == KV_RESP_ERROR) {
            FUZZ_CHECK(strncmp(error, "Protocol error: ", 16) == 0);
            break;
        }
        if (n == KV_RESP_INCOMPLETE) {
            for (size_t len = size - at; len-- > 0 && len + 8 > size - at;)
                FUZZ_CHECK(kv_resp_parse(text + at, len, &limits, &again, error, sizeof error) ==
                           KV_RESP_INCOMPLETE);
            break;
        }
        FUZZ_CHECK(n > 0 && (size_t)n <= size - at);
        FUZZ_CHECK(argv.count <= limits.max_args);
        for (size_t i = 0; i < argv.count; i++) {
            FUZZ_CHECK(argv.items[i].ptr >= text + at);
            FUZZ_CHECK(argv.items[i].ptr + argv.items[i].len <= text + at + (size_t)n);
            FUZZ_CHECK(argv.items[i].len <= limits.max_bulk);
        }
        FUZZ_CHECK(kv_resp_parse(text + at, (size_t)n, &limits, &again, error, sizeof error) == n);
        FUZZ_CHECK(again.count == argv.count);
        for (size_t i = 0; i < argv.count; i++)
            FUZZ_CHECK(again.items[i].ptr == argv.items[i].ptr &&
                       again.items[i].len == argv.items[i].len);
        at += (size_t)n;
    }
    kv_argv_free(&argv);
    kv_argv_free(&again);
    return 0;
}
