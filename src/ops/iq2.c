/*
 * iq2.c -- IQ2_XXS, IQ2_XS and IQ2_S weights, bit-exact with llama.cpp
 * b11669 (see iq2.h for what the haswell build runs and the float orders).
 *
 * One decoder per type turns a super-block into its 256 magnitudes and sign
 * bits and the 4-bit scale of each run of 16 values (IQ2_XXS: both halves
 * of a run of 32 share one); the three kernels read that. Every FMA is an
 * explicit fmaf.
 */
#pragma GCC optimize("fp-contract=off")
#include "ops/ops_util.h"
#include "ops/iq2.h"

#include "ops/f16.h"
#include "ops/iq_grids.h"
#include "ops/q4_k.h"
#include "ops/q8_0.h"

/* One decoded super-block: mag[e] the grid magnitude of value e, neg[e] its
 * sign bit, ls[h] the scale of values 16h..16h+15. */
typedef struct {
    uint8_t mag[256], neg[256];
    int ls[16];
} iq2_blk;

/* Run of 8 values at e0: one grid entry, then 8 sign bits. */
static void iq2_run(iq2_blk *b, int e0, uint64_t g, uint8_t signs)
{
    for (int j = 0; j < 8; j++) {
        b->mag[e0 + j] = (uint8_t)(g >> 8 * j);
        b->neg[e0 + j] = (uint8_t)(signs >> j & 1);
    }
}

static void iq2xxs_decode(const uint8_t *w, iq2_blk *b)
{
    for (int s = 0; s < 8; s++) {
        const uint8_t *q = w + 2 + 8 * s;
        const uint32_t aux = ld_u32(q + 4);
        b->ls[2 * s] = b->ls[2 * s + 1] = (int)(aux >> 28);
        for (int l = 0; l < 4; l++)
            iq2_run(b, 32 * s + 8 * l, bk_iq2xxs_grid[q[l]], iq_ksigns(aux >> 7 * l & 127));
    }
}

static void iq2xs_decode(const uint8_t *w, iq2_blk *b)
{
    const uint8_t *sc = w + 66;
    for (int s = 0; s < 8; s++) {
        b->ls[2 * s] = sc[s] & 15;
        b->ls[2 * s + 1] = sc[s] >> 4;
        for (int l = 0; l < 4; l++) {
            const uint32_t q = q8_rd16(w + 2 + 2 * (4 * s + l));
            iq2_run(b, 32 * s + 8 * l, bk_iq2xs_grid[q & 511], iq_ksigns(q >> 9));
        }
    }
}

static void iq2s_decode(const uint8_t *w, iq2_blk *b)
{
    const uint8_t *qs = w + 2, *signs = w + 34, *qh = w + 66, *sc = w + 74;
    for (int s = 0; s < 8; s++) {
        b->ls[2 * s] = sc[s] & 15;
        b->ls[2 * s + 1] = sc[s] >> 4;
        for (int l = 0; l < 4; l++) {
            const uint32_t idx = qs[4 * s + l] | ((uint32_t)qh[s] << (8 - 2 * l) & 0x300);
            iq2_run(b, 32 * s + 8 * l, bk_iq2s_grid[idx], signs[4 * s + l]);
        }
    }
}

typedef void (*iq2_decoder)(const uint8_t *, iq2_blk *);

/* ---------------------------------------------------------------- dequantize */

static int iq2_dequant(const char *name, iq2_decoder decode, size_t bytes, const uint8_t *w, size_t w_len, size_t n,
                      float *y, char *err, size_t errlen)
{
    if (ops_check_row(name, "super-blocks of 256 values", QK_K_BLOCK, bytes, w_len, n, w, y, err, errlen))
        return -1;
    for (size_t blk = 0; blk < n / QK_K_BLOCK; blk++, w += bytes, y += QK_K_BLOCK) {
        iq2_blk b;
        decode(w, &b);
        const float d = f16_to_f32(q8_rd16(w));
        for (int h = 0; h < 16; h++) {
            const float db = d * (0.5f + (float)b.ls[h]) * 0.25f;
            for (int j = 16 * h; j < 16 * h + 16; j++)
                y[j] = db * (float)b.mag[j] * (b.neg[j] ? -1.0f : 1.0f);
        }
    }
    return 0;
}

int iq2_xxs_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    return iq2_dequant("IQ2_XXS", iq2xxs_decode, IQ2_XXS_BYTES, w, w_len, n, y, err, errlen);
}

int iq2_xs_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    return iq2_dequant("IQ2_XS", iq2xs_decode, IQ2_XS_BYTES, w, w_len, n, y, err, errlen);
}

int iq2_s_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    return iq2_dequant("IQ2_S", iq2s_decode, IQ2_S_BYTES, w, w_len, n, y, err, errlen);
}

/* ---------------------------------------------------------------- vec_dot */

/* vec_dot's eight lanes of one super-block (lane L: values 4L..4L+3 of each
 * run of 32, so lanes 0-3 the first half's scale, 4-7 the second's); the
 * sign goes on the activation as vpsignb puts it (-(-128) wraps to -128). */
static void iq2_lanes(const iq2_blk *b, const int8_t *q8, int32_t lane[8])
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
            lane[L] += (2 * b->ls[2 * s + L / 4] + 1) * sum;
        }
}

static float iq2_vdot(iq2_decoder decode, size_t bytes, const uint8_t *w, const uint8_t *a, size_t nb)
{
    float acc[8] = {0};
    for (size_t blk = 0; blk < nb; blk++, w += bytes, a += Q8_K_BYTES) {
        iq2_blk b;
        decode(w, &b);
        const float d = f16_to_f32(q8_rd16(w)) * rd_f32(a);
        int32_t lane[8];
        iq2_lanes(&b, (const int8_t *)(a + 4), lane);
        for (int L = 0; L < 8; L++)
            acc[L] = fmaf(d, (float)lane[L], acc[L]);
    }
    return 0.125f * q8_hsum8(acc);
}

float iq2_xxs_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
    return iq2_vdot(iq2xxs_decode, IQ2_XXS_BYTES, w, act, nblocks);
}

float iq2_xs_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
    return iq2_vdot(iq2xs_decode, IQ2_XS_BYTES, w, act, nblocks);
}

float iq2_s_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
    return iq2_vdot(iq2s_decode, IQ2_S_BYTES, w, act, nblocks);
}

/* ---------------------------------------------------------------- tiled */

/* The tiled kernel's per-output chain: exact integer products. */
static float iq2_tdot(iq2_decoder decode, size_t bytes, const uint8_t *w, const uint8_t *a, size_t nb)
{
    float acc = 0.0f;
    for (size_t blk = 0; blk < nb; blk++, w += bytes, a += Q8_K_BYTES) {
        iq2_blk b;
        decode(w, &b);
        const int8_t *q8 = (const int8_t *)(a + 4);
        int32_t s1 = 0;
        for (int h = 0; h < 16; h++) {
            int32_t sum = 0;
            for (int e = 16 * h; e < 16 * h + 16; e++)
                sum += (b.neg[e] ? -(int)b.mag[e] : (int)b.mag[e]) * q8[e];
            s1 += (2 * b.ls[h] + 1) * sum;
        }
        const float r = f16_to_f32(q8_rd16(w)) * 0.125f * (float)s1;
        acc = fmaf(r, rd_f32(a), acc);
    }
    return acc;
}

float iq2_xxs_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
    return iq2_tdot(iq2xxs_decode, IQ2_XXS_BYTES, w, act, nblocks);
}

float iq2_xs_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
    return iq2_tdot(iq2xs_decode, IQ2_XS_BYTES, w, act, nblocks);
}

float iq2_s_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
    return iq2_tdot(iq2s_decode, IQ2_S_BYTES, w, act, nblocks);
}
