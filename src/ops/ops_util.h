/*
 * ops_util.h -- the small helpers the weight-type kernel files of src/ops
 * share (internal to src/ops): float bits, little-endian reads, the x86
 * instruction semantics ggml's kernels depend on, and the shape check of a
 * row of blocks. Each is defined once, here.
 */
#ifndef BANKML_OPS_UTIL_H
#define BANKML_OPS_UTIL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Little-endian reads from a byte stream (GGUF blocks). */
static inline float rd_f32(const uint8_t *p) { float f; memcpy(&f, p, 4); return f; }
static inline int16_t rd_i16(const uint8_t *p) { return (int16_t)(uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t ld_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* vmaxps semantics: the second operand unless the first is strictly greater
 * (so a NaN in either place yields the second). */
static inline float maxps1(float a, float b) { return a > b ? a : b; }

/* vcvtps2dq under round-to-nearest-even: NaN and out of range give INT32_MIN. */
static inline int32_t cvtps(float v)
{
    float r = nearbyintf(v);
    return r >= -2147483648.0f && r < 2147483648.0f ? (int32_t)r : INT32_MIN;
}

/* vcvtps2dq of an already integral float (NaN and out of range give
 * INT32_MIN), then the two saturating packs to int8. */
static inline int8_t cvt_pack(float r)
{
    int32_t i = r >= -2147483648.0f && r < 2147483648.0f ? (int32_t)r : INT32_MIN;
    return (int8_t)(i > 127 ? 127 : i < -128 ? -128 : i);
}

/* The shape check every checked entry shares: n values in whole blocks of
 * `block` (named `unit` in the message, e.g. "blocks of 32 values"), held in
 * w_len bytes at `bytes` a block, and both buffers there. 0, or -1 with
 * the reason. */
static inline int ops_check_row(const char *what, const char *unit, size_t block, size_t bytes, size_t w_len,
                                size_t n, const void *w, const void *y, char *err, size_t errlen)
{
    if (n % block != 0) {
        if (err) snprintf(err, errlen, "%s rows hold whole %s, not %zu", what, unit, n);
        return -1;
    }
    if (w_len < n / block * bytes) {
        if (err) snprintf(err, errlen, "%s row holds %zu bytes; %zu values need %zu", what, w_len, n, n / block * bytes);
        return -1;
    }
    if (n && (!w || !y)) {
        if (err) snprintf(err, errlen, "%s given a NULL buffer", what);
        return -1;
    }
    return 0;
}

#endif
