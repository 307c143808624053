/*
 * q4_0.c -- Q4_0, Q4_1, Q5_0, Q5_1 weights and the q8_1 activation
 * quantizer, bit-exact with llama.cpp b11669 (see q4_0.h for what the
 * haswell build runs and the float orders).
 *
 * Every kernel twice: AVX2+F16C+FMA (chosen at run time through q8_simd())
 * and portable C with ggml's eight lanes of four products written out.
 */
#include "ops/ops_util.h"
#include "ops/q4_0.h"

#include "ops/f16.h"
#include "ops/q8_0.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */


/* The 32 weight values of a block in ggml's byte order (0..15: low nibbles,
 * 16..31: high nibbles), with the fifth bits (qh, or NULL) adding 16 and an
 * offset subtracted (8, 16 or 0). */
static void unpack32(const uint8_t *qs, const uint8_t *qh, int off, int v[32])
{
    uint32_t h = qh ? ld_u32(qh) : 0;
    for (int j = 0; j < 16; j++) {
        v[j] = (qs[j] & 0xF) + (int)((h >> j & 1) << 4) - off;
        v[j + 16] = (qs[j] >> 4) + (int)((h >> (j + 16) & 1) << 4) - off;
    }
}

/* ---------------------------------------------------------------- q8_1 quantizer */

static void q8_1_portable(const float *x, uint8_t *out, size_t nblocks)
{
    for (size_t b = 0; b < nblocks; b++, x += 32, out += Q8_1_BYTES) {
        float lane[8];
        for (int j = 0; j < 8; j++) {
            float m = bits_f32(f32_bits(x[j]) & 0x7fffffffu);
            for (int s = 1; s < 4; s++)
                m = maxps1(m, bits_f32(f32_bits(x[8 * s + j]) & 0x7fffffffu));
            lane[j] = m;
        }
        float h0 = maxps1(lane[4], lane[0]), h1 = maxps1(lane[5], lane[1]);
        float h2 = maxps1(lane[6], lane[2]), h3 = maxps1(lane[7], lane[3]);
        float amax = maxps1(maxps1(h0, h2), maxps1(h1, h3));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        uint32_t sum = 0;
        for (int j = 0; j < 32; j++) {
            int32_t i = cvtps(x[j] * id);
            sum += (uint32_t)i;
            out[4 + j] = (uint8_t)(int8_t)(i > 127 ? 127 : i < -128 ? -128 : i);
        }
        uint16_t dh = f32_to_f16(d), sh = f32_to_f16((float)(int32_t)sum * d);
        out[0] = (uint8_t)dh;
        out[1] = (uint8_t)(dh >> 8);
        out[2] = (uint8_t)sh;
        out[3] = (uint8_t)(sh >> 8);
    }
}

#if Q8_X86
__attribute__((target("avx2,f16c,fma")))
static void q8_1_avx2(const float *x, uint8_t *out, size_t nblocks)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (size_t b = 0; b < nblocks; b++, x += 32, out += Q8_1_BYTES) {
        __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
        __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
        __m256 m = _mm256_and_ps(v0, absmask);
        m = _mm256_max_ps(m, _mm256_and_ps(v1, absmask));
        m = _mm256_max_ps(m, _mm256_and_ps(v2, absmask));
        m = _mm256_max_ps(m, _mm256_and_ps(v3, absmask));
        __m128 q = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
        q = _mm_max_ps(q, _mm_movehl_ps(q, q));
        q = _mm_max_ss(q, _mm_movehdup_ps(q));
        const float amax = _mm_cvtss_f32(q);
        const float d = amax / 127.0f;
        const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
        __m256i s8 = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
        s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
        const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        _mm256_storeu_si256((__m256i *)(out + 4), _mm256_permutevar8x32_epi32(packed, order));
        uint16_t dh = _cvtss_sh(d, 0), sh = _cvtss_sh((float)_mm_cvtsi128_si32(s4) * d, 0);
        memcpy(out, &dh, 2);
        memcpy(out + 2, &sh, 2);
    }
}
#endif

void q8_1_quantize_blocks(const float *x, uint8_t *out, size_t nblocks)
{
#if Q8_X86
    if (q8_simd()) {
        q8_1_avx2(x, out, nblocks);
        return;
    }
#endif
    q8_1_portable(x, out, nblocks);
}

int q8_1_quantize(const float *x, size_t n, uint8_t *out, size_t out_len, char *err, size_t errlen)
{
    if (n % Q4_0_BLOCK != 0) {
        if (err)
            snprintf(err, errlen, "q8_1 quantizes whole blocks of 32 values, not %zu", n);
        return -1;
    }
    if (out_len < q8_1_row_bytes(n)) {
        if (err)
            snprintf(err, errlen, "q8_1 output holds %zu bytes; %zu values need %zu", out_len, n,
                     q8_1_row_bytes(n));
        return -1;
    }
    if (n && (!x || !out)) {
        if (err)
            snprintf(err, errlen, "q8_1 quantize given a NULL buffer");
        return -1;
    }
    q8_1_quantize_blocks(x, out, n / Q4_0_BLOCK);
    return 0;
}

/* ---------------------------------------------------------------- dequantize */

/* One type's row: qs at byte qs_at, qh at qh_at (0: none), m at 2 when
 * has_m; y = q*d (+ m). ggml writes value j and j+16 in one loop turn; the
 * order of stores does not change a bit. */
static int dequant(const char *what, size_t bytes, size_t qs_at, size_t qh_at, int off, int has_m,
                   const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    if (ops_check_row(what, "blocks of 32 values", Q4_0_BLOCK, bytes, w_len, n, w, y, err, errlen) != 0)
        return -1;
    for (size_t b = 0; b < n / Q4_0_BLOCK; b++, w += bytes, y += 32) {
        const float d = f16_to_f32(q8_rd16(w));
        int v[32];
        unpack32(w + qs_at, qh_at ? w + qh_at : NULL, off, v);
        if (has_m) {
            const float m = f16_to_f32(q8_rd16(w + 2));
            for (int j = 0; j < 32; j++)
                y[j] = (float)v[j] * d + m;
        } else {
            for (int j = 0; j < 32; j++)
                y[j] = (float)v[j] * d;
        }
    }
    return 0;
}

int q4_0_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    return dequant("Q4_0", Q4_0_BYTES, 2, 0, 8, 0, w, w_len, n, y, err, errlen);
}

int q4_1_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    return dequant("Q4_1", Q4_1_BYTES, 4, 0, 0, 1, w, w_len, n, y, err, errlen);
}

int q5_0_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    return dequant("Q5_0", Q5_0_BYTES, 6, 2, 16, 0, w, w_len, n, y, err, errlen);
}

int q5_1_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    return dequant("Q5_1", Q5_1_BYTES, 8, 4, 0, 1, w, w_len, n, y, err, errlen);
}

/* ---------------------------------------------------------------- vec_dot, portable */

/* Signed values (Q4_0, Q5_0): vpsignb(x,x) * vpsignb(y,x) through vpmaddubsw,
 * four to a lane; -y of -128 stays -128 (the wrap). */
static int32_t lane_signed(const int *x, const int8_t *y)
{
    int32_t s = 0;
    for (int e = 0; e < 4; e++) {
        int ax = x[e] < 0 ? -x[e] : x[e];
        int sy = x[e] < 0 ? (int8_t)(uint8_t)(-(int)y[e]) : x[e] == 0 ? 0 : y[e];
        s += ax * sy;
    }
    return s;
}

static float dot_signed(size_t bytes, size_t qs_at, size_t qh_at, int off, const uint8_t *w,
                        const uint8_t *a, size_t nb)
{
    float acc[8] = {0};
    for (size_t b = 0; b < nb; b++, w += bytes, a += Q8_0_BYTES) {
        const float d = f16_to_f32(q8_rd16(w)) * f16_to_f32(q8_rd16(a));
        int v[32];
        unpack32(w + qs_at, qh_at ? w + qh_at : NULL, off, v);
        for (int L = 0; L < 8; L++)
            acc[L] = fmaf(d, (float)lane_signed(v + 4 * L, (const int8_t *)(a + 2 + 4 * L)), acc[L]);
    }
    return q8_hsum8(acc);
}

/* Unsigned values (Q4_1, Q5_1) against q8_1: plain products. fma(d, lane)
 * and fma(lane, d) are the same operation. */
static float dot_min(size_t bytes, size_t qs_at, size_t qh_at, const uint8_t *w, const uint8_t *a, size_t nb)
{
    float acc[8] = {0}, summs = 0.0f;
    for (size_t b = 0; b < nb; b++, w += bytes, a += Q8_1_BYTES) {
        const float dx = f16_to_f32(q8_rd16(w)), dy = f16_to_f32(q8_rd16(a));
        summs = fmaf(f16_to_f32(q8_rd16(w + 2)), f16_to_f32(q8_rd16(a + 2)), summs);
        const float d = dx * dy;
        int v[32];
        unpack32(w + qs_at, qh_at ? w + qh_at : NULL, 0, v);
        const int8_t *y = (const int8_t *)(a + 4);
        for (int L = 0; L < 8; L++) {
            int32_t s = 0;
            for (int e = 4 * L; e < 4 * L + 4; e++)
                s += v[e] * y[e];
            acc[L] = fmaf(d, (float)s, acc[L]);
        }
    }
    return q8_hsum8(acc) + summs;
}

/* ---------------------------------------------------------------- vec_dot, AVX2 */

#if Q8_X86
/* 16 bytes of nibbles to 32 bytes: low nibbles then high nibbles. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i nibbles32(const uint8_t *qs)
{
    const __m128i t = _mm_loadu_si128((const __m128i *)qs);
    const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    return _mm256_and_si256(both, _mm256_set1_epi8(0xF));
}

/* 32 bits to 32 bytes: 0xFF where the bit is set. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i bits32(const uint8_t *qh)
{
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)ld_u32(qh)),
        _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0));
    const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfeLL); /* every bit but the byte's own */
    return _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi64x(-1));
}

/* qh_at 0: Q4_0 (values - 8); else Q5_0 (fifth bit clear: value - 16). */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline float dot_signed_avx2(const float *h, size_t bytes, size_t qs_at, size_t qh_at,
                                    const uint8_t *w, const uint8_t *a, size_t nb)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++, w += bytes, a += Q8_0_BYTES) {
        const float d = h[q8_rd16(w)] * h[q8_rd16(a)];
        __m256i x = nibbles32(w + qs_at);
        if (qh_at)
            x = _mm256_or_si256(x, _mm256_andnot_si256(bits32(w + qh_at), _mm256_set1_epi8((char)0xF0)));
        else
            x = _mm256_sub_epi8(x, _mm256_set1_epi8(8));
        const __m256i y = _mm256_loadu_si256((const __m256i *)(a + 2));
        const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)), acc);
    }
    return q8_hsum8_avx(acc);
}

__attribute__((target("avx2,f16c,fma"), always_inline))
static inline float dot_min_avx2(const float *h, size_t bytes, size_t qs_at, size_t qh_at, const uint8_t *w,
                                 const uint8_t *a, size_t nb)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps();
    __m128 summs = _mm_setzero_ps();
    for (size_t b = 0; b < nb; b++, w += bytes, a += Q8_1_BYTES) {
        const float d = h[q8_rd16(w)] * h[q8_rd16(a)];
        summs = _mm_fmadd_ss(_mm_set_ss(h[q8_rd16(w + 2)]), _mm_set_ss(h[q8_rd16(a + 2)]), summs);
        __m256i x = nibbles32(w + qs_at);
        if (qh_at)
            x = _mm256_or_si256(x, _mm256_and_si256(bits32(w + qh_at), _mm256_set1_epi8(0x10)));
        const __m256i y = _mm256_loadu_si256((const __m256i *)(a + 4));
        const __m256 s = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(x, y), ones));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), s, acc);
    }
    return q8_hsum8_avx(acc) + _mm_cvtss_f32(summs);
}

/* dot_signed_avx2 for two rows by four columns: each block's weights
 * decoded once for the columns, each activation block loaded once for the
 * rows; every output keeps its own 8 lanes, the same fma per block and the
 * same final sum as the one-output kernel. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void tile24_signed_avx2(size_t bytes, size_t qs_at, size_t qh_at, const uint8_t *w, size_t w_row,
                                      const uint8_t *a, size_t a_row, size_t nb, float *y, size_t ys)
{
    const float *h = q8_f16_table();
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[8];
    for (int j = 0; j < 8; j++)
        acc[j] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        __m256i x[2], ax[2];
        float dw[2];
#pragma GCC unroll 2
        for (int r = 0; r < 2; r++) {
            const uint8_t *wb = w + r * w_row + b * bytes;
            dw[r] = h[q8_rd16(wb)];
            x[r] = nibbles32(wb + qs_at);
            if (qh_at)
                x[r] = _mm256_or_si256(x[r], _mm256_andnot_si256(bits32(wb + qh_at), _mm256_set1_epi8((char)0xF0)));
            else
                x[r] = _mm256_sub_epi8(x[r], _mm256_set1_epi8(8));
            ax[r] = _mm256_sign_epi8(x[r], x[r]);
        }
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const uint8_t *ab = a + c * a_row + b * Q8_0_BYTES;
            const float da = h[q8_rd16(ab)];
            const __m256i yv = _mm256_loadu_si256((const __m256i *)(ab + 2));
#pragma GCC unroll 2
            for (int r = 0; r < 2; r++) {
                const __m256i p = _mm256_maddubs_epi16(ax[r], _mm256_sign_epi8(yv, x[r]));
                acc[4 * r + c] = _mm256_fmadd_ps(_mm256_set1_ps(dw[r] * da), _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)),
                                                 acc[4 * r + c]);
            }
        }
    }
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 4; c++)
            y[c * ys + r] = q8_hsum8_avx(acc[4 * r + c]);
}

__attribute__((target("avx2,f16c,fma")))
static void q4_0_tile24_avx2(const uint8_t *w, size_t w_row, const uint8_t *a, size_t a_row, size_t nb, float *y,
                             size_t ys)
{
    tile24_signed_avx2(Q4_0_BYTES, 2, 0, w, w_row, a, a_row, nb, y, ys);
}

__attribute__((target("avx2,f16c,fma")))
static void q5_0_tile24_avx2(const uint8_t *w, size_t w_row, const uint8_t *a, size_t a_row, size_t nb, float *y,
                             size_t ys)
{
    tile24_signed_avx2(Q5_0_BYTES, 6, 2, w, w_row, a, a_row, nb, y, ys);
}

__attribute__((target("avx2,f16c,fma")))
static float q4_0_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t nb)
{
    return dot_signed_avx2(h, Q4_0_BYTES, 2, 0, w, a, nb);
}

__attribute__((target("avx2,f16c,fma")))
static float q5_0_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t nb)
{
    return dot_signed_avx2(h, Q5_0_BYTES, 6, 2, w, a, nb);
}

__attribute__((target("avx2,f16c,fma")))
static float q4_1_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t nb)
{
    return dot_min_avx2(h, Q4_1_BYTES, 4, 0, w, a, nb);
}

__attribute__((target("avx2,f16c,fma")))
static float q5_1_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t nb)
{
    return dot_min_avx2(h, Q5_1_BYTES, 8, 4, w, a, nb);
}
#endif

float q4_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return q4_0_avx2(q8_f16_table(), w, act, nblocks);
#endif
    return dot_signed(Q4_0_BYTES, 2, 0, 8, w, act, nblocks);
}

float q5_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return q5_0_avx2(q8_f16_table(), w, act, nblocks);
#endif
    return dot_signed(Q5_0_BYTES, 6, 2, 16, w, act, nblocks);
}

float q4_1_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return q4_1_avx2(q8_f16_table(), w, act, nblocks);
#endif
    return dot_min(Q4_1_BYTES, 4, 0, w, act, nblocks);
}

float q5_1_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return q5_1_avx2(q8_f16_table(), w, act, nblocks);
#endif
    return dot_min(Q5_1_BYTES, 8, 4, w, act, nblocks);
}

k_tile_fn q4_0_tile(void)
{
#if Q8_X86
    if (q8_simd())
        return q4_0_tile24_avx2;
#endif
    return NULL;
}

k_tile_fn q5_0_tile(void)
{
#if Q8_X86
    if (q8_simd())
        return q5_0_tile24_avx2;
#endif
    return NULL;
}
