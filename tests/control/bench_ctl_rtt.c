/*
 * Control-channel cost of the group key (docs/SECURITY.md "What the key
 * costs"): two processes over loopback TCP, member 0 publishes a blob to
 * member 1, which publishes it back; member 0 times each round trip. Prints
 * the median round trip of ROUNDS small blobs and of a few large ones (and
 * the large ones' throughput), with the key file given or without a key.
 * Not a test: a measurement, built with the tests.
 *
 * Usage: bench_ctl_rtt [KEY_FILE]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <netinet/in.h>

#include <spindle/error.h>

#include "control/ctl.h"
#include "test_ports.h"
#include "util/clock.h"

#define SMALL_ROUNDS 2000
#define SMALL_BYTES  64
#define LARGE_ROUNDS 40
#define LARGE_BYTES  (1u << 20)

static const struct ctl_versions versions = {1, 1};

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Round trips of `bytes`-byte blobs, tags from *tag on; median ns. */
static uint64_t rounds(struct ctl *ctl, uint32_t self, uint32_t count, size_t bytes, uint32_t *tag)
{
    uint8_t *blob = calloc(1, bytes);
    uint64_t *ns = calloc(count, sizeof *ns);
    for (uint32_t r = 0; r < count; r++, *tag += 2) {
        uint64_t start = sp_now_ns();
        if (self == 0) {
            blob[0] = (uint8_t)r;
            if (ctl_publish(ctl, *tag, blob, bytes, 0x2) != 0 ||
                ctl_collect_one(ctl, *tag + 1, 1, blob, bytes, 10000) != 0 || blob[0] != (uint8_t)r)
                exit(3);
        } else if (ctl_collect_one(ctl, *tag, 0, blob, bytes, 10000) != 0 ||
                   ctl_publish(ctl, *tag + 1, blob, bytes, 0x1) != 0) {
            exit(3);
        }
        ns[r] = sp_now_ns() - start;
    }
    qsort(ns, count, sizeof *ns, by_value);
    uint64_t median = ns[count / 2];
    free(ns);
    free(blob);
    return median;
}

int main(int argc, char **argv)
{
    struct ctl_keyring keys = {0};
    if (argc > 1 && ctl_key_load(argv[1], &keys) != 0) {
        fprintf(stderr, "bench_ctl_rtt: %s\n", spindle_errmsg());
        return 2;
    }
    struct ctl_member members[2] = {{.host = "127.0.0.1", .id = 0, .port = test_free_port()},
                                    {.host = "127.0.0.1", .id = 1, .port = test_free_port()}};
    pid_t pid = fork();
    uint32_t self = pid == 0 ? 1 : 0;
    struct ctl *ctl = NULL;
    if (ctl_open_tcp("bench", members, 2, self, &versions, &keys, 10000, &ctl) != 0) {
        fprintf(stderr, "bench_ctl_rtt: %s\n", spindle_errmsg());
        return 2;
    }
    uint32_t tag = 1;
    uint64_t small = rounds(ctl, self, SMALL_ROUNDS, SMALL_BYTES, &tag);
    uint64_t large = rounds(ctl, self, LARGE_ROUNDS, LARGE_BYTES, &tag);
    ctl_close(ctl);
    if (pid == 0)
        _exit(0);
    int status = 0;
    waitpid(pid, &status, 0);
    printf("%s: %u B round trip median %.1f us; %u MiB round trip median %.2f ms (%.0f MB/s "
           "each way)\n",
           keys.count > 0 ? "key" : "no key", SMALL_BYTES, small / 1e3, LARGE_BYTES >> 20,
           large / 1e6, 2.0 * LARGE_BYTES / (large / 1e9) / 1e6);
    ctl_keyring_clear(&keys);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
