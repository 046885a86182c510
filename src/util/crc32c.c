#include "util/crc32c.h"

#include <pthread.h>

/* Reflected polynomial 0x82F63B78, bytewise table built once. The SSE4.2
 * instruction would be faster, but traces are off the hot path. */
static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[i] = c;
    }
}

uint32_t sp_crc32c(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&table_once, build_table);
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < len; i++)
        crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}
