/* CRC-32C (Castagnoli), as used in delivery traces and logs. Thread-safe, pure. */
#ifndef SP_UTIL_CRC32C_H
#define SP_UTIL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of len bytes, continuing from crc (start with 0). */
uint32_t sp_crc32c(uint32_t crc, const void *data, size_t len);

#endif
