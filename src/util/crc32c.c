#include "util/crc32c.h"

#include <pthread.h>
#include <stdbool.h>
#include <string.h>

/* Reflected polynomial 0x82F63B78. Logged delivery checksums every byte it
 * logs on the predicate thread, so where the CPU has the SSE4.2 crc32
 * instruction (probed once at run time) it does the work eight bytes at a
 * time; elsewhere a bytewise table built once. */
static uint32_t table[256];
static bool hardware;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[i] = c;
    }
#if defined(__x86_64__)
    __builtin_cpu_init();
    hardware = __builtin_cpu_supports("sse4.2");
#endif
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const unsigned char *p,
                                                               size_t len)
{
    uint64_t c = crc;
    for (; len >= 8; p += 8, len -= 8) {
        uint64_t word;
        memcpy(&word, p, sizeof word);
        c = __builtin_ia32_crc32di(c, word);
    }
    uint32_t c32 = (uint32_t)c;
    for (; len > 0; p++, len--)
        c32 = __builtin_ia32_crc32qi(c32, *p);
    return c32;
}
#endif

uint32_t sp_crc32c(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&table_once, build_table);
    const unsigned char *p = data;
    crc = ~crc;
#if defined(__x86_64__)
    if (hardware)
        return ~crc32c_sse42(crc, p, len);
#endif
    for (size_t i = 0; i < len; i++)
        crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}
