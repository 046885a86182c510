/*
 * Little-endian field access for the sample header, the history state and
 * the client frames (every spindle_dds byte layout is little-endian).
 */
#ifndef SPINDLE_DDS_LE_H
#define SPINDLE_DDS_LE_H

#include <stdint.h>

static inline void dds_put16(uint8_t *out, uint16_t value)
{
    out[0] = (uint8_t)value;
    out[1] = (uint8_t)(value >> 8);
}

static inline void dds_put32(uint8_t *out, uint32_t value)
{
    for (int i = 0; i < 4; i++)
        out[i] = (uint8_t)(value >> (8 * i));
}

static inline void dds_put64(uint8_t *out, uint64_t value)
{
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(value >> (8 * i));
}

static inline uint16_t dds_get16(const uint8_t *in)
{
    return (uint16_t)(in[0] | (in[1] << 8));
}

static inline uint32_t dds_get32(const uint8_t *in)
{
    return (uint32_t)in[0] | ((uint32_t)in[1] << 8) | ((uint32_t)in[2] << 16) |
           ((uint32_t)in[3] << 24);
}

static inline uint64_t dds_get64(const uint8_t *in)
{
    return (uint64_t)dds_get32(in) | ((uint64_t)dds_get32(in + 4) << 32);
}

#endif
