/*
 * q2_0.c -- Q2_0 (group 64) weights against q8_0 activations, bit-exact with
 * llama.cpp b11669's ggml_vec_dot_q2_0_q8_0 in libggml-cpu-haswell.so (an
 * AVX2 kernel with even/odd block accumulators; see q2_0.h).
 *
 * Only the block arithmetic lives here: the walk over rows and columns, the
 * checks and the portable fallback are q8_0.c's shared driver (q8_kind). The
 * one-column kernel prepares the activation once per chunk of rows.
 */
#include "ops/q2_0.h"

#include "ops/f16.h"

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
static float q2_dot_portable(const uint8_t *w, const uint8_t *a, size_t nb)
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
static inline void q2_row_cols_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t a_row,
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

/* The one-column product (decode) is bound by vector ALU throughput, not by
 * latency (two or four rows per pass sharing the activation measured no
 * faster), so it saves operations instead, without changing a bit:
 *
 * - Codes in four ops (the row kernel's codes32 takes six): pshufb puts code
 *   byte v of lane j in bytes 0 and 2 of dword j, then v | v << 6 (16-bit
 *   shift) leaves c0 at bit 0 and c2 at bit 4 of byte 0, c1 at bit 0 and c3
 *   at bit 4 of byte 1, and the mask 03 03 30 30 keeps x = (c0, c1, 16 c2,
 *   16 c3). maddubs(x, q) - (q0 + q1, 16 (q2 + q3)), then madd with
 *   (16, 1), is 16 times ggml's exact lane sum sum (c - 1) q (no int16 pair
 *   leaves +-12,288).
 * - The factor 16 goes into the activation's scale: da / 16 is exact (a
 *   power of two, far from subnormal for any fp16 da), so d * (da / 16) is
 *   exactly (d * da) / 16 and (d * da / 16) * (16 s) is exactly the real
 *   product (d * da) * s: fma rounds the same value, and acc gets ggml's
 *   bits (zeros, infinities and NaNs pass through the same way).
 * - Per call (a chunk of rows), once: the offset (q0 + q1, 16 (q2 + q3)) of
 *   every q8 block (maddubs with bytes 1 1 16 16) and da / 16.
 * Together ~10 vector ops per 32 weights instead of 12 (13 in ggml). */
#define PREP_MAX 512 /* q8 blocks (k <= 16,384); longer rows take row_cols */
typedef struct {
    __m256i off[PREP_MAX];
    float da16[PREP_MAX];
} q2_prep;

__attribute__((target("avx2,f16c,fma")))
static void prep_act(q2_prep *p, const float *h, const uint8_t *a, size_t nq)
{
    const __m256i w = _mm256_set1_epi32(0x10100101); /* bytes 1 1 16 16 */
    for (size_t i = 0; i < nq; i++, a += Q8_0_BYTES) {
        p->off[i] = _mm256_maddubs_epi16(w, _mm256_loadu_si256((const __m256i *)(a + 2)));
        p->da16[i] = h[q8_rd16(a)] * 0.0625f;
    }
}

/* Half h (0 or 1) of a block whose 16 code bytes are in both lanes of cb:
 * x = (c0, c1, 16 c2, 16 c3) per dword, dword j from code byte 8h + j. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i codes_x16(__m256i cb, int h)
{
    const char z = (char)0x80, b = (char)(8 * h);
    const __m256i idx = _mm256_setr_epi8(b, z, b, z, b + 1, z, b + 1, z, b + 2, z, b + 2, z, b + 3, z, b + 3, z,
                                         b + 4, z, b + 4, z, b + 5, z, b + 5, z, b + 6, z, b + 6, z, b + 7, z,
                                         b + 7, z);
    __m256i t = _mm256_shuffle_epi8(cb, idx);
    t = _mm256_or_si256(t, _mm256_slli_epi16(t, 6));
    return _mm256_and_si256(t, _mm256_set1_epi32(0x30300303));
}

/* Weight block b (codes cb, scale d) against q8 blocks i, i+1 of the
 * prepared activation, onto the accumulator of b's parity. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256 block_prep(__m256 d, __m256i cb, const uint8_t *ab, const q2_prep *p, size_t i,
                                __m256 acc)
{
    const __m256i w16 = _mm256_set1_epi32(0x00010010); /* int16 16, 1 */
    _Pragma("GCC unroll 2")
    for (int h = 0; h < 2; h++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)(ab + h * Q8_0_BYTES + 2));
        __m256i pr = _mm256_sub_epi16(_mm256_maddubs_epi16(codes_x16(cb, h), q), p->off[i + h]);
        __m256 s16 = _mm256_cvtepi32_ps(_mm256_madd_epi16(pr, w16));
        acc = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_broadcast_ss(&p->da16[i + h])), s16, acc);
    }
    return acc;
}

/* Decode (one column): rows [0, nrows) against one prepared activation. */
__attribute__((target("avx2,f16c,fma")))
static void gemv_avx2(const float *h, const uint8_t *w, size_t w_row, size_t nrows, const uint8_t *a,
                      size_t nb, float *y)
{
    if (2 * nb > PREP_MAX || nrows < 2) {
        for (size_t r = 0; r < nrows; r++)
            q2_row_cols_avx2(h, w + r * w_row, a, 0, nb, y + r, 0, 1);
        return;
    }
    q2_prep p;
    prep_act(&p, h, a, 2 * nb);
    for (size_t r = 0; r < nrows; r++, w += w_row) {
        __m256 ev = _mm256_setzero_ps(), od = _mm256_setzero_ps();
        size_t b = 0;
        for (; b + 2 <= nb; b += 2) {
            const uint8_t *wb = w + b * Q2_0_BYTES, *ab = a + b * 2 * Q8_0_BYTES;
            __m256i c0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(wb + 2)));
            __m256i c1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(wb + Q2_0_BYTES + 2)));
            ev = block_prep(_mm256_broadcast_ss(&h[q8_rd16(wb)]), c0, ab, &p, 2 * b, ev);
            od = block_prep(_mm256_broadcast_ss(&h[q8_rd16(wb + Q2_0_BYTES)]), c1, ab + 2 * Q8_0_BYTES, &p,
                            2 * b + 2, od);
        }
        if (b < nb) {
            const uint8_t *wb = w + b * Q2_0_BYTES;
            __m256i c0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(wb + 2)));
            ev = block_prep(_mm256_broadcast_ss(&h[q8_rd16(wb)]), c0, a + b * 2 * Q8_0_BYTES, &p, 2 * b, ev);
        }
        y[r] = q8_hsum8_avx(_mm256_add_ps(ev, od));
    }
}

/* Weight block (codes cb, scale d) against the two q8 blocks at ab, with
 * the decode kernel's 4-op codes and x16 fold but nothing prepared: the
 * offset maddubs and da / 16 are made here (a single row has nothing to
 * share them with). Same bits as block_prep. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256 block_1row(__m256 d, __m256i cb, const float *h, const uint8_t *ab, __m256 acc)
{
    const __m256i w16 = _mm256_set1_epi32(0x00010010);  /* int16 16, 1 */
    const __m256i w1116 = _mm256_set1_epi32(0x10100101); /* bytes 1 1 16 16 */
    _Pragma("GCC unroll 2")
    for (int hf = 0; hf < 2; hf++) {
        const uint8_t *qb = ab + hf * Q8_0_BYTES;
        __m256i q = _mm256_loadu_si256((const __m256i *)(qb + 2));
        __m256i pr = _mm256_sub_epi16(_mm256_maddubs_epi16(codes_x16(cb, hf), q), _mm256_maddubs_epi16(w1116, q));
        __m256 s16 = _mm256_cvtepi32_ps(_mm256_madd_epi16(pr, w16));
        __m256 da16 = _mm256_mul_ps(_mm256_broadcast_ss(&h[q8_rd16(qb)]), _mm256_set1_ps(0.0625f));
        acc = _mm256_fmadd_ps(_mm256_mul_ps(d, da16), s16, acc);
    }
    return acc;
}

/* One row (q2_0_vec_dot): ggml's even/odd accumulators, blocks in pairs. */
__attribute__((target("avx2,f16c,fma")))
static float q2_dot1_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t nb)
{
    __m256 ev = _mm256_setzero_ps(), od = _mm256_setzero_ps();
    size_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const uint8_t *wb = w + b * Q2_0_BYTES, *ab = a + b * 2 * Q8_0_BYTES;
        __m256i c0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(wb + 2)));
        __m256i c1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(wb + Q2_0_BYTES + 2)));
        ev = block_1row(_mm256_broadcast_ss(&h[q8_rd16(wb)]), c0, h, ab, ev);
        od = block_1row(_mm256_broadcast_ss(&h[q8_rd16(wb + Q2_0_BYTES)]), c1, h, ab + 2 * Q8_0_BYTES, od);
    }
    if (b < nb) {
        const uint8_t *wb = w + b * Q2_0_BYTES;
        __m256i c0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(wb + 2)));
        ev = block_1row(_mm256_broadcast_ss(&h[q8_rd16(wb)]), c0, h, a + b * 2 * Q8_0_BYTES, ev);
    }
    return q8_hsum8_avx(_mm256_add_ps(ev, od));
}

Q8_COLS_FNS(cols_avx2_, q2_row_cols_avx2)
#define GEMV_AVX2 gemv_avx2
#else
#define GEMV_AVX2 NULL
#endif

/* The Q2_0 entry in the shared driver's table (q8_0.c). */
static const q8_kind Q2_KIND = {
    "Q2_0", Q2_0_BLOCK, Q2_0_BYTES, q2_dot_portable, Q8_COLS_TABLE(cols_avx2_), GEMV_AVX2, Q8_NO_COLS2,
};

/* One row: q2_dot1_avx2 (the decode kernel's 4-op codes and x16 fold, ~12
 * vector ops per 32 weights instead of the row kernel's 13), called directly
 * as ggml's vec_dot is one direct kernel. Measured 1.08-1.16x paired where
 * the row kernel through the driver's table was 1.00-1.01x. */
float q2_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd()) {
        return q2_dot1_avx2(q8_f16_table(), w, act, nblocks);
    }
#endif
    return q2_dot_portable(w, act, nblocks);
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
