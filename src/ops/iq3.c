/*
 * iq3.c -- IQ3_XXS and IQ3_S weights, bit-exact with llama.cpp b11669 (see
 * iq3.h for what the haswell build runs and the float orders).
 *
 * One decoder per type turns a super-block into its 256 signed values (grid
 * magnitude times sign), the 8 sub-block multipliers (2 ls + 1) and its
 * scale; the three kernels read that. Nothing is contracted into an FMA
 * behind our back: every FMA is an explicit fmaf.
 */
#pragma GCC optimize("fp-contract=off")
#include "ops/ops_util.h"
#include "ops/iq3.h"

#include "ops/f16.h"
#include "ops/iq_grids.h"
#include "ops/q4_k.h"
#include "ops/q8_0.h"

/* One decoded super-block: mag[e] the grid magnitude of value e, neg[e] its
 * sign bit, mul[s] sub-block s's odd multiplier 2 ls + 1 (ls 0..15). */
typedef struct {
    uint8_t mag[256], neg[256];
    int mul[8], ls[8];
} iq3_blk;

/* Run of 8 values at e0: two grid entries, then 8 sign bits. */
static void put_run(iq3_blk *b, int e0, uint32_t g1, uint32_t g2, uint8_t signs)
{
    for (int j = 0; j < 4; j++) {
        b->mag[e0 + j] = (uint8_t)(g1 >> 8 * j);
        b->mag[e0 + 4 + j] = (uint8_t)(g2 >> 8 * j);
    }
    for (int j = 0; j < 8; j++)
        b->neg[e0 + j] = (uint8_t)(signs >> j & 1);
}

static void xxs_decode(const uint8_t *w, iq3_blk *b)
{
    const uint8_t *qs = w + 2;
    for (int s = 0; s < 8; s++) {
        const uint32_t aux = ld_u32(w + 66 + 4 * s);
        b->ls[s] = (int)(aux >> 28);
        b->mul[s] = 2 * b->ls[s] + 1;
        for (int l = 0; l < 4; l++)
            put_run(b, 32 * s + 8 * l, bk_iq3xxs_grid[qs[8 * s + 2 * l]], bk_iq3xxs_grid[qs[8 * s + 2 * l + 1]],
                    iq_ksigns(aux >> 7 * l & 127));
    }
}

static void s_decode(const uint8_t *w, iq3_blk *b)
{
    const uint8_t *qs = w + 2, *qh = w + 66, *signs = w + 74, *sc = w + 106;
    for (int s = 0; s < 8; s++) {
        b->ls[s] = sc[s / 2] >> 4 * (s % 2) & 15;
        b->mul[s] = 2 * b->ls[s] + 1;
        for (int l = 0; l < 4; l++) {
            const int m = 2 * l;
            const uint32_t i1 = qs[8 * s + m] | (uint32_t)(qh[s] >> m & 1) << 8;
            const uint32_t i2 = qs[8 * s + m + 1] | (uint32_t)(qh[s] >> (m + 1) & 1) << 8;
            put_run(b, 32 * s + 8 * l, bk_iq3s_grid[i1], bk_iq3s_grid[i2], signs[4 * s + l]);
        }
    }
}

/* ---------------------------------------------------------------- dequantize */

int iq3_xxs_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    if (ops_check_row("IQ3_XXS", "super-blocks of 256 values", QK_K_BLOCK, IQ3_XXS_BYTES, w_len, n, w, y, err,
                      errlen))
        return -1;
    for (size_t blk = 0; blk < n / QK_K_BLOCK; blk++, w += IQ3_XXS_BYTES, y += QK_K_BLOCK) {
        iq3_blk b;
        xxs_decode(w, &b);
        const float d = f16_to_f32(q8_rd16(w));
        for (int s = 0; s < 8; s++) {
            const float db = d * (0.5f + (float)b.ls[s]) * 0.5f;
            for (int j = 32 * s; j < 32 * s + 32; j++)
                y[j] = db * (float)b.mag[j] * (b.neg[j] ? -1.0f : 1.0f);
        }
    }
    return 0;
}

int iq3_s_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    if (ops_check_row("IQ3_S", "super-blocks of 256 values", QK_K_BLOCK, IQ3_S_BYTES, w_len, n, w, y, err,
                      errlen))
        return -1;
    for (size_t blk = 0; blk < n / QK_K_BLOCK; blk++, w += IQ3_S_BYTES, y += QK_K_BLOCK) {
        iq3_blk b;
        s_decode(w, &b);
        const float d = f16_to_f32(q8_rd16(w));
        for (int s = 0; s < 8; s++) {
            const float db = d * (float)b.mul[s];
            for (int j = 32 * s; j < 32 * s + 32; j++)
                y[j] = db * (float)b.mag[j] * (b.neg[j] ? -1.0f : 1.0f);
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- vec_dot */

/* vec_dot's eight lanes of one super-block: the sign goes on the activation
 * as vpsignb puts it (-(-128) wraps back to -128). No vpmaddubsw pair can
 * saturate (2 * 62 * 128 < 32768). */
static void vd_lanes(const iq3_blk *b, const int8_t *q8, int32_t lane[8])
{
    for (int L = 0; L < 8; L++)
        lane[L] = 0;
    for (int s = 0; s < 8; s++)
        for (int L = 0; L < 8; L++) {
            int32_t sum = 0;
            for (int e = 32 * s + 4 * L; e < 32 * s + 4 * L + 4; e++) {
                const int a = b->neg[e] ? (int8_t)(uint8_t)(-(int)q8[e]) : q8[e];
                sum += b->mag[e] * a;
            }
            lane[L] += b->mul[s] * sum;
        }
}

static float vec_dot(void (*decode)(const uint8_t *, iq3_blk *), size_t bytes, const uint8_t *w,
                     const uint8_t *a, size_t nb)
{
    float acc[8] = {0};
    for (size_t blk = 0; blk < nb; blk++, w += bytes, a += Q8_K_BYTES) {
        iq3_blk b;
        decode(w, &b);
        const float d = f16_to_f32(q8_rd16(w)) * rd_f32(a);
        int32_t lane[8];
        vd_lanes(&b, (const int8_t *)(a + 4), lane);
        for (int L = 0; L < 8; L++)
            acc[L] = fmaf(d, (float)lane[L], acc[L]);
    }
    return q8_hsum8(acc);
}

float iq3_xxs_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
    return 0.25f * vec_dot(xxs_decode, IQ3_XXS_BYTES, w, act, nblocks);
}

float iq3_s_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
    return vec_dot(s_decode, IQ3_S_BYTES, w, act, nblocks);
}

/* ---------------------------------------------------------------- tiled */

/* The tiled kernel's per-output chain: exact integer products. */
static float tiled_dot(void (*decode)(const uint8_t *, iq3_blk *), size_t bytes, float dscale,
                       const uint8_t *w, const uint8_t *a, size_t nb)
{
    float acc = 0.0f;
    for (size_t blk = 0; blk < nb; blk++, w += bytes, a += Q8_K_BYTES) {
        iq3_blk b;
        decode(w, &b);
        const int8_t *q8 = (const int8_t *)(a + 4);
        int32_t s1 = 0;
        for (int s = 0; s < 8; s++) {
            int32_t sum = 0;
            for (int e = 32 * s; e < 32 * s + 32; e++)
                sum += (b.neg[e] ? -(int)b.mag[e] : (int)b.mag[e]) * q8[e];
            s1 += b.mul[s] * sum;
        }
        const float r = f16_to_f32(q8_rd16(w)) * dscale * (float)s1;
        acc = fmaf(r, rd_f32(a), acc);
    }
    return acc;
}

float iq3_xxs_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
    return tiled_dot(xxs_decode, IQ3_XXS_BYTES, 0.25f, w, act, nblocks);
}

float iq3_s_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
    return tiled_dot(s_decode, IQ3_S_BYTES, 1.0f, w, act, nblocks);
}
