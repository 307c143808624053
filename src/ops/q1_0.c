/*
 * q1_0.c -- Q1_0 weights against q8_0 activations, bit-exact with
 * llama.cpp b11669's ggml_vec_dot_q1_0_q8_0 (haswell). See q1_0.h.
 *
 * Only the block arithmetic lives here: the walk over rows and columns, the
 * checks and the portable fallback are q8_0.c's shared driver (q8_kind).
 */
#include "ops/q1_0.h"

#include "ops/f16.h"

#include <math.h>
#include <stdio.h>

int q1_0_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y,
                    char *err, size_t errlen)
{
    if (n % Q1_0_BLOCK != 0) {
        if (err)
            snprintf(err, errlen, "Q1_0 rows hold whole blocks of 128 values, not %zu", n);
        return -1;
    }
    size_t need = n / Q1_0_BLOCK * Q1_0_BYTES;
    if (w_len < need) {
        if (err)
            snprintf(err, errlen, "Q1_0 row holds %zu bytes; %zu values need %zu", w_len, n, need);
        return -1;
    }
    for (size_t b = 0; b < n / Q1_0_BLOCK; b++, w += Q1_0_BYTES, y += Q1_0_BLOCK) {
        float d = f16_to_f32(q8_rd16(w)), nd = -d;
        for (int j = 0; j < Q1_0_BLOCK; j++)
            y[j] = (w[2 + j / 8] >> (j % 8)) & 1 ? d : nd;
    }
    return 0;
}

/* Portable: lane j of q8 block K sums the four activations 32K+4j.. with the
 * weight's sign applied as an int8 negation (so -128 stays -128). */
static float q1_dot_portable(const uint8_t *w, const uint8_t *a, size_t nb)
{
    float acc[8] = {0};
    for (size_t b = 0; b < nb; b++, w += Q1_0_BYTES) {
        float d = f16_to_f32(q8_rd16(w));
        float blk[8];
        for (int K = 0; K < 4; K++, a += Q8_0_BYTES) {
            float da = f16_to_f32(q8_rd16(a));
            const int8_t *q = (const int8_t *)(a + 2);
            for (int j = 0; j < 8; j++) {
                int s = 0;
                for (int e = 0; e < 4; e++) {
                    int idx = 32 * K + 4 * j + e;
                    int bit = (w[2 + idx / 8] >> (idx % 8)) & 1;
                    int v = q[4 * j + e];
                    s += bit ? v : (int8_t)(uint8_t)(-v);
                }
                blk[j] = K == 0 ? da * (float)s : fmaf(da, (float)s, blk[j]);
            }
        }
        for (int j = 0; j < 8; j++)
            acc[j] = fmaf(d, blk[j], acc[j]);
    }
    return q8_hsum8(acc);
}

#if Q8_X86
/* The four +-1 byte masks of one block: byte i of mask K is +1 where weight
 * 32K+i has bit 1, -1 where it has bit 0 (for vpsignb, which negates as an
 * int8 exactly as ggml's xor/sub does). */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void sign_masks(const uint8_t *qs, __m256i m[4])
{
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i one = _mm256_set1_epi8(1);
    _Pragma("GCC unroll 4")
    for (int K = 0; K < 4; K++) {
        int32_t word;
        __builtin_memcpy(&word, qs + 4 * K, 4);
        __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(word), spread);
        __m256i zero_bit = _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), _mm256_setzero_si256());
        m[K] = _mm256_or_si256(zero_bit, one); /* 0xff -> -1, 0x00 -> +1 */
    }
}

/* One weight row against NC (1..4) columns; each column's chain is vec_dot's. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void q1_row_cols_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t a_row,
                                 size_t nb, float *out, size_t out_stride, int NC)
{
    const __m256i ones8 = _mm256_set1_epi8(1);
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + b * Q1_0_BYTES;
        __m256i m[4];
        sign_masks(wb + 2, m);
        __m256 d = _mm256_set1_ps(h[q8_rd16(wb)]);
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NC; c++) {
            const uint8_t *ab = a + c * a_row + b * 4 * Q8_0_BYTES;
            __m256 blk = _mm256_setzero_ps();
            _Pragma("GCC unroll 4")
            for (int K = 0; K < 4; K++) {
                const uint8_t *qb = ab + K * Q8_0_BYTES;
                __m256i q = _mm256_loadu_si256((const __m256i *)(qb + 2));
                __m256i s16 = _mm256_maddubs_epi16(ones8, _mm256_sign_epi8(q, m[K]));
                __m256 s = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, ones16));
                __m256 da = _mm256_set1_ps(h[q8_rd16(qb)]);
                blk = K == 0 ? _mm256_mul_ps(da, s) : _mm256_fmadd_ps(da, s, blk);
            }
            acc[c] = _mm256_fmadd_ps(d, blk, acc[c]);
        }
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NC; c++)
        out[c * out_stride] = q8_hsum8_avx(acc[c]);
}

Q8_COLS_FNS(cols_avx2_, q1_row_cols_avx2)

/* TWO weight rows against NC (1..4) columns: a 2 x NC tile. Why: with one
 * row at a time every row streams all the columns' activations from L2 again
 * (32 columns of 4096 values: 139 KB per row); a pair of rows shares each
 * activation load and scale broadcast, so that traffic per row halves. The
 * sign masks are built once per row and block as in q1_row_cols_avx2, and each
 * element's chain is q1_row_cols_avx2's (= vec_dot's): same lanes, same
 * per-block mul/fma order, same hsum. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void q1_rows2_cols_avx2(const float *h, const uint8_t *w, size_t w_row, const uint8_t *a,
                                   size_t a_row, size_t nb, float *out, size_t out_stride, int NC)
{
    const __m256i ones8 = _mm256_set1_epi8(1);
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc0[4], acc1[4];
    for (int c = 0; c < 4; c++)
        acc0[c] = acc1[c] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *wb0 = w + b * Q1_0_BYTES, *wb1 = wb0 + w_row;
        __m256i m0[4], m1[4];
        sign_masks(wb0 + 2, m0);
        sign_masks(wb1 + 2, m1);
        __m256 d0 = _mm256_set1_ps(h[q8_rd16(wb0)]), d1 = _mm256_set1_ps(h[q8_rd16(wb1)]);
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NC; c++) {
            const uint8_t *ab = a + c * a_row + b * 4 * Q8_0_BYTES;
            __m256 blk0 = _mm256_setzero_ps(), blk1 = _mm256_setzero_ps();
            _Pragma("GCC unroll 4")
            for (int K = 0; K < 4; K++) {
                const uint8_t *qb = ab + K * Q8_0_BYTES;
                __m256i q = _mm256_loadu_si256((const __m256i *)(qb + 2));
                __m256 da = _mm256_set1_ps(h[q8_rd16(qb)]);
                __m256i s16a = _mm256_maddubs_epi16(ones8, _mm256_sign_epi8(q, m0[K]));
                __m256i s16b = _mm256_maddubs_epi16(ones8, _mm256_sign_epi8(q, m1[K]));
                __m256 sa = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16a, ones16));
                __m256 sb = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16b, ones16));
                blk0 = K == 0 ? _mm256_mul_ps(da, sa) : _mm256_fmadd_ps(da, sa, blk0);
                blk1 = K == 0 ? _mm256_mul_ps(da, sb) : _mm256_fmadd_ps(da, sb, blk1);
            }
            acc0[c] = _mm256_fmadd_ps(d0, blk0, acc0[c]);
            acc1[c] = _mm256_fmadd_ps(d1, blk1, acc1[c]);
        }
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NC; c++) {
        out[c * out_stride] = q8_hsum8_avx(acc0[c]);
        out[c * out_stride + 1] = q8_hsum8_avx(acc1[c]);
    }
}

Q8_COLS2_FNS(cols2_avx2_, q1_rows2_cols_avx2)
#define COLS2_AVX2 Q8_COLS_TABLE(cols2_avx2_)

/* Decode (one column): R (1, 2 or 4) weight rows against one activation in a
 * single pass, each row with exactly vec_dot's chain. Why: one row alone is
 * bound by its own dependency chain (four fma of blk per block, then acc)
 * and re-reads every activation block and scale; R rows interleaved at the
 * level of each q8 block share the activation's load, its int8 negation and
 * its scale broadcast, and give the core R independent chains to overlap
 * (measured 1.3-1.5x the one-row kernel on 6144x2048 and 2048x6144).
 *
 * Per row and q8 block K the lane sums are ggml's exact integers: the sign
 * bytes are spread to one byte per weight (pshufb of the block's 16 bit
 * bytes, loaded once per block into both halves), `and` + `cmpeq` give 0xff
 * where the bit is 0, and a blend picks q or its int8 negation 0 - q (which
 * wraps -128 to -128 exactly as ggml's xor/sub does), then maddubs + madd
 * sum four bytes per lane. One op fewer per K than the xor/sub (or the
 * or/sign) form, and nothing depends on the activation's values, so there is
 * no slow path. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void q1_rows_1col(const float *h, const uint8_t *w, size_t w_row, const uint8_t *a, size_t nb,
                             float *y, int R)
{
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i ones8 = _mm256_set1_epi8(1);
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256i spread[4]; /* pattern K: byte i <- sign byte 4K + i/8 */
    for (int K = 0; K < 4; K++)
        spread[K] = _mm256_add_epi8(_mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                     2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
                                    _mm256_set1_epi8((char)(4 * K)));
    __m256 acc[4], blk[4];
    for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *ab = a + b * 4 * Q8_0_BYTES;
        __m256i sb[4];
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++)
            sb[r] = _mm256_broadcastsi128_si256(
                _mm_loadu_si128((const __m128i *)(w + r * w_row + b * Q1_0_BYTES + 2)));
        _Pragma("GCC unroll 4")
        for (int K = 0; K < 4; K++) {
            const uint8_t *qb = ab + K * Q8_0_BYTES;
            __m256i q = _mm256_loadu_si256((const __m256i *)(qb + 2));
            __m256i nq = _mm256_sub_epi8(_mm256_setzero_si256(), q);
            __m256 da = _mm256_set1_ps(h[q8_rd16(qb)]);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < R; r++) {
                __m256i v = _mm256_shuffle_epi8(sb[r], spread[K]);
                __m256i zero_bit = _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), _mm256_setzero_si256());
                __m256i sel = _mm256_blendv_epi8(q, nq, zero_bit);
                __m256 s = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(ones8, sel), ones16));
                blk[r] = K == 0 ? _mm256_mul_ps(da, s) : _mm256_fmadd_ps(da, s, blk[r]);
            }
        }
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++)
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(h[q8_rd16(w + r * w_row + b * Q1_0_BYTES)]), blk[r],
                                     acc[r]);
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        y[r] = q8_hsum8_avx(acc[r]);
}

/* Rows [0, nrows) against one column: groups of four, then a pair, then one. */
Q8_GEMV_GROUPS(gemv_avx2, q1_rows_1col)

/* One row (q1_0_vec_dot), returning the float so the entry point reaches it
 * with a tail jump. */
__attribute__((target("avx2,f16c,fma")))
static float q1_dot1_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t nb)
{
    float r;
    q1_rows_1col(h, w, 0, a, nb, &r, 1);
    return r;
}
#define GEMV_AVX2 gemv_avx2
#else
#define GEMV_AVX2 NULL
#define COLS2_AVX2 Q8_NO_COLS2
#endif

/* The Q1_0 entry in the shared driver's table (q8_0.c). */
static const q8_kind Q1_KIND = {
    "Q1_0", Q1_0_BLOCK, Q1_0_BYTES, q1_dot_portable, Q8_COLS_TABLE(cols_avx2_), GEMV_AVX2, COLS2_AVX2,
};

/* One row: the one-row form of the decode kernel (the blend against 0 - q:
 * one op per 32 weights fewer than ggml's xor/sub, while the row kernel's
 * or/sign costs the same as ggml), called directly, as ggml's vec_dot is one
 * direct kernel. Measured 1.14-1.18x paired against 1.04-1.14x through the
 * row kernel (4096x4096, load 3.3-3.6). */
float q1_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return q1_dot1_avx2(q8_f16_table(), w, act, nblocks);
#endif
    return q1_dot_portable(w, act, nblocks);
}

int q1_0_mm_init(q8_mm *m, const uint8_t *w, size_t w_len, size_t rows,
                 size_t k, const uint8_t *act, size_t act_len, size_t ncols,
                 float *y, size_t y_len, char *err, size_t errlen)
{
    return q8_mm_check(m, "Q1_0", Q1_0_BLOCK, Q1_0_BYTES, w, w_len, rows, k, act, act_len, ncols, y,
                       y_len, err, errlen);
}

void q1_0_mm_rows(void *ctx, size_t r0, size_t r1, int worker)
{
    (void)worker;
    q8_kind_rows(&Q1_KIND, ctx, r0, r1);
}

int q1_0_matmul(par_pool *p, const uint8_t *w, size_t w_len, size_t rows,
                size_t k, const uint8_t *act, size_t act_len, size_t ncols,
                float *y, size_t y_len, char *err, size_t errlen)
{
    return q8_kind_matmul(&Q1_KIND, q1_0_mm_rows, p, w, w_len, rows, k, act, act_len, ncols, y, y_len,
                          err, errlen);
}
