/*
 * q2_0.c -- Q2_0 (group 64) weights against q8_0 activations, bit-exact with
 * llama.cpp b11669's ggml_vec_dot_q2_0_q8_0 in libggml-cpu-haswell.so (an
 * AVX2 kernel with even/odd block accumulators; see q2_0.h).
 */
#include "q2_0.h"

#include "f16.h"

#include <math.h>
#include <stdio.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define Q2_X86 1
#else
#define Q2_X86 0
#endif

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* ggml's hsum_float_8 (see q8_0.c). */
static inline float hsum8(const float l[8])
{
    float h0 = l[4] + l[0], h1 = l[5] + l[1], h2 = l[6] + l[2], h3 = l[7] + l[3];
    float a0 = h0 + h2, a1 = h1 + h3;
    return a0 + a1;
}

int q2_0_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y,
                    char *err, size_t errlen)
{
    if (n % Q2_0_BLOCK != 0) {
        if (err)
            snprintf(err, errlen, "Q2_0 rows hold whole blocks of 64 values, not %zu", n);
        return -1;
    }
    size_t need = n / Q2_0_BLOCK * Q2_0_BYTES;
    if (w_len < need) {
        if (err)
            snprintf(err, errlen, "Q2_0 row holds %zu bytes; %zu values need %zu", w_len, n, need);
        return -1;
    }
    for (size_t b = 0; b < n / Q2_0_BLOCK; b++, w += Q2_0_BYTES, y += Q2_0_BLOCK) {
        float d = f16_to_f32(rd16(w));
        for (int j = 0; j < Q2_0_BLOCK; j++)
            y[j] = (float)(((w[2 + j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
    }
    return 0;
}

/* Portable: lane j of half h is the exact sum over the four codes of byte
 * 8h+j of (c - 1) * q; block b feeds accumulator b & 1. */
static float vec_dot_portable(const uint8_t *w, const uint8_t *a, size_t nb)
{
    float acc[2][8] = {{0}};
    for (size_t b = 0; b < nb; b++, w += Q2_0_BYTES) {
        float d = f16_to_f32(rd16(w));
        float *ac = acc[b & 1];
        for (int h = 0; h < 2; h++, a += Q8_0_BYTES) {
            float dd = d * f16_to_f32(rd16(a));
            const int8_t *q = (const int8_t *)(a + 2);
            for (int j = 0; j < 8; j++) {
                int byte = w[2 + 8 * h + j], s = 0;
                for (int e = 0; e < 4; e++)
                    s += (((byte >> (2 * e)) & 3) - 1) * q[4 * j + e];
                ac[j] = fmaf(dd, (float)s, ac[j]);
            }
        }
    }
    float sum[8];
    for (int j = 0; j < 8; j++)
        sum[j] = acc[0][j] + acc[1][j];
    return hsum8(sum);
}

#if Q2_X86
__attribute__((target("avx2,f16c,fma")))
static inline float hsum8_avx(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The 32 codes of one half-block (8 bytes) as bytes 0..3 in lane order:
 * dword j holds the four codes of byte j. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i codes32(const uint8_t *p)
{
    long long q;
    __builtin_memcpy(&q, p, 8);
    __m256i b = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(q));
    b = _mm256_or_si256(b, _mm256_slli_epi32(b, 12)); /* codes 0,1 | 2,3 twelve bits up */
    b = _mm256_or_si256(b, _mm256_slli_epi32(b, 6));  /* each code lands at bit 8e */
    return _mm256_and_si256(b, _mm256_set1_epi8(3));
}

/* One weight row against NC (1..4) columns, two accumulators per column. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void row_cols_avx2(const uint8_t *w, const uint8_t *a, size_t a_row, size_t nb,
                                 float *out, size_t out_stride, int NC)
{
    const __m256i ones8 = _mm256_set1_epi8(1);
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[4][2];
    for (int c = 0; c < 4; c++)
        acc[c][0] = acc[c][1] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + b * Q2_0_BYTES;
        float d = _cvtsh_ss(rd16(wb));
        __m256i c0 = codes32(wb + 2), c1 = codes32(wb + 10);
        int par = (int)(b & 1);
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NC; c++) {
            const uint8_t *ab = a + c * a_row + b * 2 * Q8_0_BYTES;
            __m256i q0 = _mm256_loadu_si256((const __m256i *)(ab + 2));
            __m256i q1 = _mm256_loadu_si256((const __m256i *)(ab + Q8_0_BYTES + 2));
            __m256i p0 = _mm256_sub_epi16(_mm256_maddubs_epi16(c0, q0), _mm256_maddubs_epi16(ones8, q0));
            __m256i p1 = _mm256_sub_epi16(_mm256_maddubs_epi16(c1, q1), _mm256_maddubs_epi16(ones8, q1));
            __m256 s0 = _mm256_cvtepi32_ps(_mm256_madd_epi16(p0, ones16));
            __m256 s1 = _mm256_cvtepi32_ps(_mm256_madd_epi16(p1, ones16));
            float d0 = d * _cvtsh_ss(rd16(ab)), d1 = d * _cvtsh_ss(rd16(ab + Q8_0_BYTES));
            __m256 t = _mm256_fmadd_ps(_mm256_set1_ps(d0), s0, acc[c][par]);
            acc[c][par] = _mm256_fmadd_ps(_mm256_set1_ps(d1), s1, t);
        }
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NC; c++)
        out[c * out_stride] = hsum8_avx(_mm256_add_ps(acc[c][0], acc[c][1]));
}

__attribute__((target("avx2,f16c,fma")))
static float vec_dot_avx2(const uint8_t *w, const uint8_t *a, size_t nb)
{
    float r;
    row_cols_avx2(w, a, 0, nb, &r, 0, 1);
    return r;
}

__attribute__((target("avx2,f16c,fma")))
static void mm_rows_avx2(const q8_mm *m, size_t r0, size_t r1)
{
    size_t nb = m->k / Q2_0_BLOCK;
    for (size_t r = r0; r < r1; r++) {
        const uint8_t *w = m->w + r * m->w_row;
        size_t c = 0;
        for (; c + 4 <= m->ncols; c += 4)
            row_cols_avx2(w, m->act + c * m->a_row, m->a_row, nb, m->y + c * m->rows + r, m->rows, 4);
        switch (m->ncols - c) {
        case 3: row_cols_avx2(w, m->act + c * m->a_row, m->a_row, nb, m->y + c * m->rows + r, m->rows, 3); break;
        case 2: row_cols_avx2(w, m->act + c * m->a_row, m->a_row, nb, m->y + c * m->rows + r, m->rows, 2); break;
        case 1: row_cols_avx2(w, m->act + c * m->a_row, m->a_row, nb, m->y + c * m->rows + r, m->rows, 1); break;
        default: break;
        }
    }
}
#endif

float q2_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q2_X86
    if (q8_simd())
        return vec_dot_avx2(w, act, nblocks);
#endif
    return vec_dot_portable(w, act, nblocks);
}

int q2_0_mm_init(q8_mm *m, const uint8_t *w, size_t w_len, size_t rows,
                 size_t k, const uint8_t *act, size_t act_len, size_t ncols,
                 float *y, size_t y_len, char *err, size_t errlen)
{
    return q8_mm_check(m, "Q2_0", Q2_0_BLOCK, Q2_0_BYTES, w, w_len, rows, k, act, act_len, ncols, y,
                       y_len, err, errlen);
}

void q2_0_mm_rows(void *ctx, size_t r0, size_t r1, int worker)
{
    const q8_mm *m = ctx;
    (void)worker;
#if Q2_X86
    if (q8_simd()) {
        mm_rows_avx2(m, r0, r1);
        return;
    }
#endif
    size_t nb = m->k / Q2_0_BLOCK;
    for (size_t c = 0; c < m->ncols; c++)
        for (size_t r = r0; r < r1; r++)
            m->y[c * m->rows + r] = vec_dot_portable(m->w + r * m->w_row, m->act + c * m->a_row, nb);
}

int q2_0_matmul(par_pool *p, const uint8_t *w, size_t w_len, size_t rows,
                size_t k, const uint8_t *act, size_t act_len, size_t ncols,
                float *y, size_t y_len, char *err, size_t errlen)
{
    q8_mm m;
    if (q2_0_mm_init(&m, w, w_len, rows, k, act, act_len, ncols, y, y_len, err, errlen) != 0)
        return -1;
    if (rows && ncols)
        par_rows(p, q2_0_mm_rows, &m, rows, 0);
    return 0;
}
