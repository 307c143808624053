/*
 * q2_0.c -- Q2_0 (group 64) weights against q8_0 activations, bit-exact with
 * llama.cpp b11669's ggml_vec_dot_q2_0_q8_0 in libggml-cpu-haswell.so (an
 * AVX2 kernel with even/odd block accumulators; see q2_0.h).
 *
 * Only the block arithmetic lives here: the walk over rows and columns, the
 * checks and the portable fallback are q8_0.c's shared driver (q8_kind). The
 * one-column kernel prepares the activation once per chunk of rows.
 */
#include "q2_0.h"

#include "f16.h"

#include <math.h>
#include <stdio.h>

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
        float d = f16_to_f32(q8_rd16(w));
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
        float d = f16_to_f32(q8_rd16(w));
        float *ac = acc[b & 1];
        for (int h = 0; h < 2; h++, a += Q8_0_BYTES) {
            float dd = d * f16_to_f32(q8_rd16(a));
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
    return q8_hsum8(sum);
}

#if Q8_X86
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

/* One half-block's lane sums: lane j is the exact integer sum of
 * (c - 1) * q over the four codes of dword j, as ggml's maddubs(c, q) -
 * maddubs(1, q) then madd(., 1); `ones_q` is maddubs(1, q), which depends on
 * the activation only and so is shared by every row that meets it. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256 half_sums(__m256i codes, __m256i q, __m256i ones_q)
{
    __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(codes, q), ones_q);
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

/* One weight block against one column: acc = fma(d*da0, s0, acc);
 * acc = fma(d*da1, s1, acc), ggml's chain for the accumulator of this
 * block's parity. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256 block_col(const float *h, const uint8_t *wb, const uint8_t *ab, __m256 acc)
{
    const __m256i ones8 = _mm256_set1_epi8(1);
    float d = h[q8_rd16(wb)];
    __m256i q0 = _mm256_loadu_si256((const __m256i *)(ab + 2));
    __m256i q1 = _mm256_loadu_si256((const __m256i *)(ab + Q8_0_BYTES + 2));
    __m256 s0 = half_sums(codes32(wb + 2), q0, _mm256_maddubs_epi16(ones8, q0));
    __m256 s1 = half_sums(codes32(wb + 10), q1, _mm256_maddubs_epi16(ones8, q1));
    float d0 = d * h[q8_rd16(ab)], d1 = d * h[q8_rd16(ab + Q8_0_BYTES)];
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d0), s0, acc);
    return _mm256_fmadd_ps(_mm256_set1_ps(d1), s1, acc);
}

/* One weight row against NC (1..4) columns, two accumulators per column.
 * Blocks go in pairs so the parity of each accumulator is fixed at compile
 * time: with a run-time index (b & 1) GCC kept them on the stack and every
 * fma waited on a store-to-load forward. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void row_cols_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t a_row,
                                 size_t nb, float *out, size_t out_stride, int NC)
{
    __m256 ev[4], od[4];
    for (int c = 0; c < 4; c++)
        ev[c] = od[c] = _mm256_setzero_ps();
    size_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const uint8_t *wb = w + b * Q2_0_BYTES;
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NC; c++) {
            const uint8_t *ab = a + c * a_row + b * 2 * Q8_0_BYTES;
            ev[c] = block_col(h, wb, ab, ev[c]);
            od[c] = block_col(h, wb + Q2_0_BYTES, ab + 2 * Q8_0_BYTES, od[c]);
        }
    }
    if (b < nb) { /* an odd last block joins the even accumulator */
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NC; c++)
            ev[c] = block_col(h, w + b * Q2_0_BYTES, a + c * a_row + b * 2 * Q8_0_BYTES, ev[c]);
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NC; c++)
        out[c * out_stride] = q8_hsum8_avx(_mm256_add_ps(ev[c], od[c]));
}

/* The one-column product's view of the activation, prepared once per call
 * (a chunk of rows) and shared by all its rows: maddubs(1, q) of each q8
 * block (the "- 1" part of every lane sum, which does not depend on the
 * weights) and the block's f32 scale. It changes no arithmetic: the lane sums
 * are the same exact integers and d * da the same float product. Measured:
 * 1.2-1.4x over the per-row form; two or four rows per pass sharing the
 * activation loads instead were 1.05x in L2 but slower on ggml-quantized
 * 4096x4096 weights, so rows stay one per pass (one weight stream). */
#define PREP_MAX 512 /* q8 blocks (k <= 16,384); longer rows take row_cols */
typedef struct {
    __m256i ones_q[PREP_MAX];
    float da[PREP_MAX];
} q2_prep;

__attribute__((target("avx2,f16c,fma")))
static void prep_act(q2_prep *p, const float *h, const uint8_t *a, size_t nq)
{
    const __m256i ones8 = _mm256_set1_epi8(1);
    for (size_t i = 0; i < nq; i++, a += Q8_0_BYTES) {
        p->ones_q[i] = _mm256_maddubs_epi16(ones8, _mm256_loadu_si256((const __m256i *)(a + 2)));
        p->da[i] = h[q8_rd16(a)];
    }
}

/* Weight block b of one row against q8 blocks 2b, 2b+1 of the prepared
 * activation, onto the accumulator of b's parity. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256 block_prep(const float *h, const uint8_t *wb, const uint8_t *ab, const q2_prep *p,
                                size_t i, __m256 acc)
{
    __m256i q0 = _mm256_loadu_si256((const __m256i *)(ab + 2));
    __m256i q1 = _mm256_loadu_si256((const __m256i *)(ab + Q8_0_BYTES + 2));
    __m256 d = _mm256_broadcast_ss(&h[q8_rd16(wb)]);
    __m256 s0 = half_sums(codes32(wb + 2), q0, p->ones_q[i]);
    __m256 s1 = half_sums(codes32(wb + 10), q1, p->ones_q[i + 1]);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_broadcast_ss(&p->da[i])), s0, acc);
    return _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_broadcast_ss(&p->da[i + 1])), s1, acc);
}

/* Decode (one column): rows [0, nrows) against one prepared activation. */
__attribute__((target("avx2,f16c,fma")))
static void gemv_avx2(const float *h, const uint8_t *w, size_t w_row, size_t nrows, const uint8_t *a,
                      size_t nb, float *y)
{
    if (2 * nb > PREP_MAX || nrows < 2) {
        for (size_t r = 0; r < nrows; r++)
            row_cols_avx2(h, w + r * w_row, a, 0, nb, y + r, 0, 1);
        return;
    }
    q2_prep p;
    prep_act(&p, h, a, 2 * nb);
    for (size_t r = 0; r < nrows; r++, w += w_row) {
        __m256 ev = _mm256_setzero_ps(), od = _mm256_setzero_ps();
        size_t b = 0;
        for (; b + 2 <= nb; b += 2) {
            const uint8_t *wb = w + b * Q2_0_BYTES, *ab = a + b * 2 * Q8_0_BYTES;
            ev = block_prep(h, wb, ab, &p, 2 * b, ev);
            od = block_prep(h, wb + Q2_0_BYTES, ab + 2 * Q8_0_BYTES, &p, 2 * b + 2, od);
        }
        if (b < nb)
            ev = block_prep(h, w + b * Q2_0_BYTES, a + b * 2 * Q8_0_BYTES, &p, 2 * b, ev);
        y[r] = q8_hsum8_avx(_mm256_add_ps(ev, od));
    }
}

Q8_COLS_FNS(cols_avx2_, row_cols_avx2)
#define GEMV_AVX2 gemv_avx2
#else
#define GEMV_AVX2 NULL
#endif

/* The Q2_0 entry in the shared driver's table (q8_0.c). */
static const q8_kind Q2_KIND = {
    "Q2_0", Q2_0_BLOCK, Q2_0_BYTES, vec_dot_portable, Q8_COLS_TABLE(cols_avx2_), GEMV_AVX2,
};

float q2_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
    return q8_kind_dot(&Q2_KIND, w, act, nblocks);
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
    (void)worker;
    q8_kind_rows(&Q2_KIND, ctx, r0, r1);
}

int q2_0_matmul(par_pool *p, const uint8_t *w, size_t w_len, size_t rows,
                size_t k, const uint8_t *act, size_t act_len, size_t ncols,
                float *y, size_t y_len, char *err, size_t errlen)
{
    return q8_kind_matmul(&Q2_KIND, q2_0_mm_rows, p, w, w_len, rows, k, act, act_len, ncols, y, y_len,
                          err, errlen);
}
