/*
 * iq1.c -- IQ1_S and IQ1_M weights, bit-exact with llama.cpp b11669 (see
 * iq1.h for what the haswell build runs and the float orders). One decoder
 * per type gives a super-block's 256 grid values (-1, 0, 1), the delta sign
 * of each run of 8 and the scale of each run of 16; every FMA is an explicit
 * fmaf.
 */
#pragma GCC optimize("fp-contract=off")
#include "ops/ops_util.h"
#include "ops/iq1.h"

#include "ops/f16.h"
#include "ops/iq_grids.h"
#include "ops/q4_k.h"
#include "ops/q8_0.h"

typedef struct {
    int8_t g[256];
    uint8_t dneg[32]; /* run of 8 r: its delta is negative */
    int ls[16];       /* values 16h..16h+15 */
    uint16_t d16;     /* the f16 scale */
} iq1_blk;

static void iq1_run(iq1_blk *b, int r, uint32_t idx, int neg)
{
    const uint64_t e = bk_iq1s_grid[idx];
    for (int j = 0; j < 8; j++)
        b->g[8 * r + j] = (int8_t)(uint8_t)(e >> 8 * j);
    b->dneg[r] = (uint8_t)neg;
}

static void iq1s_decode(const uint8_t *w, iq1_blk *b)
{
    b->d16 = q8_rd16(w);
    for (int s = 0; s < 8; s++) {
        const uint32_t qh = q8_rd16(w + 34 + 2 * s);
        b->ls[2 * s] = b->ls[2 * s + 1] = (int)(qh >> 12 & 7);
        for (int l = 0; l < 4; l++)
            iq1_run(b, 4 * s + l, w[2 + 4 * s + l] | (qh >> 3 * l & 7) << 8, (qh & 0x8000) != 0);
    }
}

static void iq1m_decode(const uint8_t *w, iq1_blk *b)
{
    const uint8_t *qs = w, *qh = w + 32;
    uint16_t sc[4];
    for (int i = 0; i < 4; i++)
        sc[i] = q8_rd16(w + 48 + 2 * i);
    b->d16 = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    for (int s = 0; s < 8; s++) {
        b->ls[2 * s] = sc[s / 2] >> (6 * (s % 2)) & 7;
        b->ls[2 * s + 1] = sc[s / 2] >> (6 * (s % 2) + 3) & 7;
        for (int l = 0; l < 4; l++) {
            const uint32_t h = qh[2 * s + l / 2] >> (4 * (l % 2));
            iq1_run(b, 4 * s + l, qs[4 * s + l] | (h & 7) << 8, (h & 8) != 0);
        }
    }
}

typedef void (*iq1_decoder)(const uint8_t *, iq1_blk *);

/* ---------------------------------------------------------------- dequantize */

static int iq1_dequant(const char *name, iq1_decoder decode, size_t bytes, const uint8_t *w, size_t w_len, size_t n,
                       float *y, char *err, size_t errlen)
{
    if (ops_check_row(name, "super-blocks of 256 values", QK_K_BLOCK, bytes, w_len, n, w, y, err, errlen))
        return -1;
    for (size_t blk = 0; blk < n / QK_K_BLOCK; blk++, w += bytes, y += QK_K_BLOCK) {
        iq1_blk b;
        decode(w, &b);
        const float d = f16_to_f32(b.d16);
        for (int e = 0; e < 256; e++) {
            const float dl = d * (float)(2 * b.ls[e / 16] + 1);
            const float delta = b.dneg[e / 8] ? -0.125f : 0.125f;
            y[e] = dl * ((float)b.g[e] + delta);
        }
    }
    return 0;
}

int iq1_s_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    return iq1_dequant("IQ1_S", iq1s_decode, IQ1_S_BYTES, w, w_len, n, y, err, errlen);
}

int iq1_m_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    return iq1_dequant("IQ1_M", iq1m_decode, IQ1_M_BYTES, w, w_len, n, y, err, errlen);
}

/* ---------------------------------------------------------------- vec_dot */

/* vpsignb(a, s): a negated (wrapping) where s < 0, zero where s == 0. */
static int iq1_sign8(int a, int s)
{
    return s < 0 ? (int8_t)(uint8_t)(-a) : s == 0 ? 0 : a;
}

/* The grid lanes (lane L: values 4L..4L+3 of each run of 32) and, for IQ1_M,
 * the delta lanes. */
static void iq1_lanes(const iq1_blk *b, const int8_t *q8, int32_t lane[8], int32_t dlane[8])
{
    for (int L = 0; L < 8; L++)
        lane[L] = dlane[L] = 0;
    for (int s = 0; s < 8; s++)
        for (int L = 0; L < 8; L++) {
            int32_t sum = 0, dsum = 0;
            for (int e = 32 * s + 4 * L; e < 32 * s + 4 * L + 4; e++) {
                sum += (b->g[e] != 0) * iq1_sign8(q8[e], b->g[e]);
                dsum += iq1_sign8(q8[e], b->dneg[e / 8] ? -1 : 1);
            }
            const int mul = 2 * b->ls[2 * s + L / 4] + 1;
            lane[L] += mul * sum;
            dlane[L] += mul * dsum;
        }
}

float iq1_s_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
    float acc[8] = {0}, acc1 = 0.0f;
    for (size_t blk = 0; blk < nblocks; blk++, w += IQ1_S_BYTES, act += Q8_K_BYTES) {
        iq1_blk b;
        iq1s_decode(w, &b);
        int32_t lane[8], dlane[8];
        iq1_lanes(&b, (const int8_t *)(act + 4), lane, dlane);
        int32_t sumi1 = 0;
        for (int s = 0; s < 8; s++) {
            const int bs = (int16_t)q8_rd16(act + 260 + 4 * s) + (int16_t)q8_rd16(act + 262 + 4 * s);
            sumi1 += bs * (b.dneg[4 * s] ? -1 : 1) * (2 * b.ls[2 * s] + 1);
        }
        const float d = rd_f32(act) * f16_to_f32(b.d16);
        for (int L = 0; L < 8; L++)
            acc[L] = fmaf(d, (float)lane[L], acc[L]);
        acc1 = fmaf(d, (float)sumi1, acc1);
    }
    return q8_hsum8(acc) + 0.125f * acc1;
}

float iq1_m_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
    float acc1[8] = {0}, acc2[8] = {0};
    for (size_t blk = 0; blk < nblocks; blk++, w += IQ1_M_BYTES, act += Q8_K_BYTES) {
        iq1_blk b;
        iq1m_decode(w, &b);
        int32_t lane[8], dlane[8];
        iq1_lanes(&b, (const int8_t *)(act + 4), lane, dlane);
        const float d = rd_f32(act) * f16_to_f32(b.d16);
        for (int L = 0; L < 8; L++) {
            acc1[L] = fmaf(d, (float)lane[L], acc1[L]);
            acc2[L] = fmaf(d, (float)dlane[L], acc2[L]);
        }
    }
    return fmaf(0.125f, q8_hsum8(acc2), q8_hsum8(acc1));
}

/* ---------------------------------------------------------------- tiled */

/* The tiled kernel's per-output chain: the value times 8 is the integer
 * code 8 g +- 1; exact s1 = sum over runs of 16 of (2 ls + 1) * (code . q8),
 * r = (fp16 d * 0.125f) * (float)s1, acc = fma(r, da, acc). */
static float iq1_tdot(iq1_decoder decode, size_t bytes, const uint8_t *w, const uint8_t *a, size_t nb)
{
    float acc = 0.0f;
    for (size_t blk = 0; blk < nb; blk++, w += bytes, a += Q8_K_BYTES) {
        iq1_blk b;
        decode(w, &b);
        const int8_t *q8 = (const int8_t *)(a + 4);
        int32_t s1 = 0;
        for (int h = 0; h < 16; h++) {
            int32_t sum = 0;
            for (int e = 16 * h; e < 16 * h + 16; e++)
                sum += (8 * b.g[e] + (b.dneg[e / 8] ? -1 : 1)) * q8[e];
            s1 += (2 * b.ls[h] + 1) * sum;
        }
        const float r = f16_to_f32(b.d16) * 0.125f * (float)s1;
        acc = fmaf(r, rd_f32(a), acc);
    }
    return acc;
}

float iq1_s_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
    return iq1_tdot(iq1s_decode, IQ1_S_BYTES, w, act, nblocks);
}

float iq1_m_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
    return iq1_tdot(iq1m_decode, IQ1_M_BYTES, w, act, nblocks);
}
