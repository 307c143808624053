/*
 * iq4.c -- IQ4_NL and IQ4_XS weights, bit-exact with llama.cpp b11669 (see
 * iq4.h for what the haswell build runs and the float orders).
 *
 * Every kernel twice: AVX2+F16C+FMA (chosen at run time through q8_simd())
 * and portable C with ggml's eight lanes of four products written out.
 * Nothing here may be contracted into an FMA behind our back: every FMA is
 * an explicit fmaf / _mm256_fmadd_ps.
 */
#pragma GCC optimize("fp-contract=off")
#include "ops/ops_util.h"
#include "ops/iq4.h"

#include "ops/f16.h"
#include "ops/q4_k.h"
#include "ops/q8_0.h"

/* ggml's kvalues_iq4nl: the type's definition (16 values, no table to
 * generate). */
static const int8_t iq4_kv[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113 };

int iq4_value(int c) { return iq4_kv[c & 15]; }
const int8_t *iq4_values(void) { return iq4_kv; }

/* The 32 values of one 16-byte run of codes, in ggml's order (0..15 the low
 * nibbles, 16..31 the high ones). */
static void iq4_unpack32(const uint8_t *qs, int v[32])
{
    for (int j = 0; j < 16; j++) {
        v[j] = iq4_kv[qs[j] & 15];
        v[j + 16] = iq4_kv[qs[j] >> 4];
    }
}

/* Sub-block s's 6-bit scale of an IQ4_XS super-block, minus 32. */
static int iq4_xs_scale(const uint8_t *blk, int s)
{
    const int sh = rd_i16(blk + 2) & 0xffff;
    const int lo = blk[4 + s / 2] >> (4 * (s % 2)) & 15;
    return (lo | (sh >> (2 * s) & 3) << 4) - 32;
}

/* ---------------------------------------------------------------- dequantize */

int iq4_nl_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    if (ops_check_row("IQ4_NL", "blocks of 32 values", IQ4_NL_BLOCK, IQ4_NL_BYTES, w_len, n, w, y, err,
                      errlen))
        return -1;
    for (size_t b = 0; b < n / IQ4_NL_BLOCK; b++, w += IQ4_NL_BYTES, y += 32) {
        const float d = f16_to_f32(q8_rd16(w));
        int v[32];
        iq4_unpack32(w + 2, v);
        for (int j = 0; j < 32; j++)
            y[j] = d * (float)v[j];
    }
    return 0;
}

int iq4_xs_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    if (ops_check_row("IQ4_XS", "super-blocks of 256 values", IQ4_XS_BLOCK, IQ4_XS_BYTES, w_len, n, w, y,
                      err, errlen))
        return -1;
    for (size_t b = 0; b < n / IQ4_XS_BLOCK; b++, w += IQ4_XS_BYTES) {
        const float d = f16_to_f32(q8_rd16(w));
        for (int s = 0; s < 8; s++, y += 32) {
            const float dl = d * (float)iq4_xs_scale(w, s);
            int v[32];
            iq4_unpack32(w + 8 + 16 * s, v);
            for (int j = 0; j < 32; j++)
                y[j] = dl * (float)v[j];
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- portable dots */

/* vpsignb(v,v) * vpsignb(a,v) through vpmaddubsw, four to a lane: an
 * activation of -128 against a negative value stays -128 (the wrap). No
 * pair can saturate (2 * 127 * 128 < 32768). */
static int32_t iq4_lane(const int *v, const int8_t *a)
{
    int32_t s = 0;
    for (int e = 0; e < 4; e++) {
        const int av = v[e] < 0 ? -v[e] : v[e];
        const int sa = v[e] < 0 ? (int8_t)(uint8_t)(-(int)a[e]) : a[e];
        s += av * sa;
    }
    return s;
}

/* The 8 lanes of one 32-value run (codes at qs) against 32 activations. */
static void iq4_lanes(const uint8_t *qs, const int8_t *a, int32_t lane[8])
{
    int v[32];
    iq4_unpack32(qs, v);
    for (int L = 0; L < 8; L++)
        lane[L] = iq4_lane(v + 4 * L, a + 4 * L);
}

static float nl_vec_portable(const uint8_t *w, const uint8_t *a, size_t nb)
{
    float acc[2][8] = {{0}};
    size_t ib = 0;
    for (; ib + 1 < nb; ib += 2)
        for (int h = 0; h < 2; h++) {
            const uint8_t *wb = w + (ib + (size_t)h) * IQ4_NL_BYTES, *ab = a + (ib + (size_t)h) * Q8_0_BYTES;
            const float d = f16_to_f32(q8_rd16(ab)) * f16_to_f32(q8_rd16(wb));
            int32_t lane[8];
            iq4_lanes(wb + 2, (const int8_t *)(ab + 2), lane);
            for (int L = 0; L < 8; L++)
                acc[h][L] = fmaf(d, (float)lane[L], acc[h][L]);
        }
    float sum[8];
    for (int L = 0; L < 8; L++)
        sum[L] = acc[0][L] + acc[1][L];
    float s = q8_hsum8(sum);
    if (ib < nb) { /* the scalar tail: exact products */
        const uint8_t *wb = w + ib * IQ4_NL_BYTES, *ab = a + ib * Q8_0_BYTES;
        const float d = f16_to_f32(q8_rd16(ab)) * f16_to_f32(q8_rd16(wb));
        const int8_t *q8 = (const int8_t *)(ab + 2);
        int v[32];
        iq4_unpack32(wb + 2, v);
        int32_t s1 = 0, s2 = 0;
        for (int j = 0; j < 16; j++) {
            s1 += q8[j] * v[j];
            s2 += q8[j + 16] * v[j + 16];
        }
        s = fmaf(d, (float)(s1 + s2), s);
    }
    return s;
}

/* One super-block's exact lanes: sum over sub-blocks of (ls-32) * lane. */
static void xs_lanes(const uint8_t *w, const int8_t *q8, int32_t out[8])
{
    for (int L = 0; L < 8; L++)
        out[L] = 0;
    for (int s = 0; s < 8; s++) {
        int32_t lane[8];
        iq4_lanes(w + 8 + 16 * s, q8 + 32 * s, lane);
        const int ls = iq4_xs_scale(w, s);
        for (int L = 0; L < 8; L++)
            out[L] += ls * lane[L];
    }
}

static float xs_vec_portable(const uint8_t *w, const uint8_t *a, size_t nb)
{
    float acc[8] = {0};
    for (size_t b = 0; b < nb; b++, w += IQ4_XS_BYTES, a += Q8_K_BYTES) {
        const float d = f16_to_f32(q8_rd16(w)) * rd_f32(a);
        int32_t lane[8];
        xs_lanes(w, (const int8_t *)(a + 4), lane);
        for (int L = 0; L < 8; L++)
            acc[L] = fmaf(d, (float)lane[L], acc[L]);
    }
    return q8_hsum8(acc);
}

static float xs_tiled_portable(const uint8_t *w, const uint8_t *a, size_t nb)
{
    float acc = 0.0f;
    for (size_t b = 0; b < nb; b++, w += IQ4_XS_BYTES, a += Q8_K_BYTES) {
        int32_t lane[8];
        xs_lanes(w, (const int8_t *)(a + 4), lane);
        uint32_t s1 = 0;
        for (int L = 0; L < 8; L++)
            s1 += (uint32_t)lane[L];
        acc = fmaf(f16_to_f32(q8_rd16(w)) * (float)(int32_t)s1, rd_f32(a), acc);
    }
    return acc;
}

/* ---------------------------------------------------------------- AVX2 dots */

#if Q8_X86
/* 16 bytes of codes to the 32 values (low nibbles, then high nibbles). */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i iq4_vals32(const uint8_t *qs, __m128i lut)
{
    const __m128i m4 = _mm_set1_epi8(0xF);
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    const __m128i lo = _mm_shuffle_epi8(lut, _mm_and_si128(q, m4));
    const __m128i hi = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

/* vpmaddubsw(|v|, sign(a, v)): 16 exact pair sums. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i iq4_pairs(__m256i v, const uint8_t *a)
{
    const __m256i y = _mm256_loadu_si256((const __m256i *)a);
    return _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(y, v));
}

__attribute__((target("avx2,f16c,fma")))
static float nl_vec_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t nb)
{
    const __m128i lut = _mm_loadu_si128((const __m128i *)iq4_kv);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps();
    size_t ib = 0;
    for (; ib + 1 < nb; ib += 2) {
        const uint8_t *w1 = w + ib * IQ4_NL_BYTES, *a1 = a + ib * Q8_0_BYTES;
        const uint8_t *w2 = w1 + IQ4_NL_BYTES, *a2 = a1 + Q8_0_BYTES;
        const __m256i p1 = _mm256_madd_epi16(iq4_pairs(iq4_vals32(w1 + 2, lut), a1 + 2), ones);
        const __m256i p2 = _mm256_madd_epi16(iq4_pairs(iq4_vals32(w2 + 2, lut), a2 + 2), ones);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(h[q8_rd16(a1)] * h[q8_rd16(w1)]), _mm256_cvtepi32_ps(p1), acc1);
        acc2 = _mm256_fmadd_ps(_mm256_set1_ps(h[q8_rd16(a2)] * h[q8_rd16(w2)]), _mm256_cvtepi32_ps(p2), acc2);
    }
    float s = q8_hsum8_avx(_mm256_add_ps(acc1, acc2));
    if (ib < nb) {
        const uint8_t *wb = w + ib * IQ4_NL_BYTES, *ab = a + ib * Q8_0_BYTES;
        const int8_t *q8 = (const int8_t *)(ab + 2);
        int32_t s1 = 0, s2 = 0;
        for (int j = 0; j < 16; j++) {
            s1 += q8[j] * iq4_kv[wb[2 + j] & 15];
            s2 += q8[j + 16] * iq4_kv[wb[2 + j] >> 4];
        }
        s = fmaf(h[q8_rd16(ab)] * h[q8_rd16(wb)], (float)(s1 + s2), s);
    }
    return s;
}

/* One IQ4_XS super-block's exact lanes (vec_dot's sumi1 + sumi2). */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i xs_lanes_avx2(const uint8_t *w, const uint8_t *q8, __m128i lut)
{
    __m256i sum = _mm256_setzero_si256();
    for (int s = 0; s < 8; s++) {
        const __m256i p = iq4_pairs(iq4_vals32(w + 8 + 16 * s, lut), q8 + 32 * s);
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, _mm256_set1_epi16((short)iq4_xs_scale(w, s))));
    }
    return sum;
}

__attribute__((target("avx2,f16c,fma")))
static float xs_vec_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t nb)
{
    const __m128i lut = _mm_loadu_si128((const __m128i *)iq4_kv);
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++, w += IQ4_XS_BYTES, a += Q8_K_BYTES) {
        const __m256i sumi = xs_lanes_avx2(w, a + 4, lut);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(h[q8_rd16(w)] * rd_f32(a)), _mm256_cvtepi32_ps(sumi), acc);
    }
    return q8_hsum8_avx(acc);
}

__attribute__((target("avx2,f16c,fma")))
static float xs_tiled_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t nb)
{
    const __m128i lut = _mm_loadu_si128((const __m128i *)iq4_kv);
    float acc = 0.0f;
    for (size_t b = 0; b < nb; b++, w += IQ4_XS_BYTES, a += Q8_K_BYTES) {
        const __m256i v = xs_lanes_avx2(w, a + 4, lut);
        __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
        s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
        acc = fmaf(h[q8_rd16(w)] * (float)_mm_cvtsi128_si32(s), rd_f32(a), acc);
    }
    return acc;
}
#endif

float iq4_nl_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return nl_vec_avx2(q8_f16_table(), w, act, nblocks);
#endif
    return nl_vec_portable(w, act, nblocks);
}

float iq4_xs_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return xs_vec_avx2(q8_f16_table(), w, act, nblocks);
#endif
    return xs_vec_portable(w, act, nblocks);
}

float iq4_xs_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return xs_tiled_avx2(q8_f16_table(), w, act, nblocks);
#endif
    return xs_tiled_portable(w, act, nblocks);
}
