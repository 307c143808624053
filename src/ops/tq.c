/*
 * tq.c -- TQ1_0 and TQ2_0 weights, bit-exact with llama.cpp b11669 (see
 * tq.h for what the haswell build runs).
 *
 * Every kernel twice: AVX2 (chosen at run time through q8_simd()) and
 * portable C with the kernel's sixteen wrapping 16-bit lanes written out.
 * Nothing here is contracted behind our back: the one FMA per super-block
 * (gcc contracted ggml's _mm256_add_ps(_mm256_mul_ps(...)), measured) is
 * explicit.
 */
#pragma GCC optimize("fp-contract=off")
#include "ops/ops_util.h"
#include "ops/tq.h"

#include "ops/f16.h"
#include "ops/q4_k.h"
#include "ops/q8_0.h"

static const uint8_t tq_pow3[6] = { 1, 3, 9, 27, 81, 243 };

/* The byte holding value e (0..255) of a TQ1_0 super-block, already times
 * its digit's power of 3 (mod 256). */
static uint8_t tq1_byte(const uint8_t *blk, int e)
{
    if (e < 160) return (uint8_t)(blk[e % 32] * tq_pow3[e / 32]);
    if (e < 240) return (uint8_t)(blk[32 + (e - 160) % 16] * tq_pow3[(e - 160) / 16]);
    return (uint8_t)(blk[48 + (e - 240) % 4] * tq_pow3[(e - 240) / 4]);
}

/* dequantize_row_tq1_0's digit: ((uint16_t)q * 3) >> 8. */
static int tq1_ref_code(uint8_t q) { return (q * 3) >> 8; }

/* The AVX2 vec_dot's digit: a saturating -1, vpavgb twice, the top 2 bits. */
static int tq1_vec_code(uint8_t q)
{
    const int x = q ? q - 1 : 0, h = (x + 1) >> 1, r = (x + h + 1) >> 1;
    return r >> 6;
}

static int tq2_code(const uint8_t *blk, int e)
{
    return blk[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32)) & 3;
}

/* ---------------------------------------------------------------- dequantize */

int tq1_0_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    if (ops_check_row("TQ1_0", "super-blocks of 256 values", QK_K_BLOCK, TQ1_0_BYTES, w_len, n, w, y, err,
                      errlen))
        return -1;
    for (size_t b = 0; b < n / QK_K_BLOCK; b++, w += TQ1_0_BYTES, y += QK_K_BLOCK) {
        const float d = f16_to_f32(q8_rd16(w + 52));
        for (int e = 0; e < QK_K_BLOCK; e++)
            y[e] = (float)(tq1_ref_code(tq1_byte(w, e)) - 1) * d;
    }
    return 0;
}

int tq2_0_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    if (ops_check_row("TQ2_0", "super-blocks of 256 values", QK_K_BLOCK, TQ2_0_BYTES, w_len, n, w, y, err,
                      errlen))
        return -1;
    for (size_t b = 0; b < n / QK_K_BLOCK; b++, w += TQ2_0_BYTES, y += QK_K_BLOCK) {
        const float d = f16_to_f32(q8_rd16(w + 64));
        for (int e = 0; e < QK_K_BLOCK; e++)
            y[e] = (float)(tq2_code(w, e) - 1) * d;
    }
    return 0;
}

/* ---------------------------------------------------------------- vec_dot, portable */

/* One super-block: codes[e] (0..3) against the Q8_K block at a; adds its
 * eight lanes times d into acc as the kernel does. */
static void tq_block(const uint8_t codes[256], const uint8_t *a, float d, float acc[8])
{
    const int8_t *q8 = (const int8_t *)(a + 4);
    uint16_t l16[16];
    for (int m = 0; m < 16; m++)
        l16[m] = (uint16_t)(-rd_i16(a + 260 + 2 * m));
    for (int e = 0; e < 256; e++)
        l16[(e % 32) / 2] = (uint16_t)(l16[(e % 32) / 2] + codes[e] * q8[e]);
    for (int L = 0; L < 8; L++) {
        const int32_t lane = (int16_t)l16[2 * L] + (int16_t)l16[2 * L + 1];
        acc[L] = fmaf((float)lane, d, acc[L]); /* gcc contracted the kernel's mul + add */
    }
}

static float tq1_portable(const uint8_t *w, const uint8_t *a, size_t nb)
{
    float acc[8] = {0};
    for (size_t b = 0; b < nb; b++, w += TQ1_0_BYTES, a += Q8_K_BYTES) {
        uint8_t codes[256];
        for (int e = 0; e < 256; e++)
            codes[e] = (uint8_t)tq1_vec_code(tq1_byte(w, e));
        tq_block(codes, a, rd_f32(a) * f16_to_f32(q8_rd16(w + 52)), acc);
    }
    return q8_hsum8(acc);
}

static float tq2_portable(const uint8_t *w, const uint8_t *a, size_t nb)
{
    float acc[8] = {0};
    for (size_t b = 0; b < nb; b++, w += TQ2_0_BYTES, a += Q8_K_BYTES) {
        uint8_t codes[256];
        for (int e = 0; e < 256; e++)
            codes[e] = (uint8_t)tq2_code(w, e);
        tq_block(codes, a, rd_f32(a) * f16_to_f32(q8_rd16(w + 64)), acc);
    }
    return q8_hsum8(acc);
}

/* ---------------------------------------------------------------- vec_dot, AVX2 */

#if Q8_X86
/* The kernel's digit of 32 bytes already multiplied by their power of 3. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i tq1_digits(__m256i q)
{
    q = _mm256_subs_epu8(q, _mm256_set1_epi8(1));
    q = _mm256_avg_epu8(q, _mm256_avg_epu8(q, _mm256_setzero_si256()));
    return _mm256_and_si256(_mm256_srli_epi16(q, 6), _mm256_set1_epi8(3));
}

/* x * 9 per byte (mod 256), as the kernel: (x << 3 with the byte's low bits
 * cleared) + x. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i tq1_times9(__m256i x)
{
    return _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16(x, 3), _mm256_set1_epi8(-8)), x);
}

__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256 tq_step(__m256i l16, const uint8_t *a, float d, __m256 acc)
{
    l16 = _mm256_sub_epi16(l16, _mm256_loadu_si256((const __m256i *)(a + 260)));
    const __m256i l32 = _mm256_madd_epi16(l16, _mm256_set1_epi16(1));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(l32), _mm256_set1_ps(d), acc);
}

__attribute__((target("avx2,f16c,fma")))
static float tq1_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++, w += TQ1_0_BYTES, a += Q8_K_BYTES) {
        const __m256i q0 = _mm256_loadu_si256((const __m256i *)w);
        const __m256i q1 = _mm256_add_epi8(q0, _mm256_add_epi8(q0, q0));
        const __m256i q2 = tq1_times9(q0), q3 = tq1_times9(q1), q4 = tq1_times9(q2);
        const __m256i qs[5] = { q0, q1, q2, q3, q4 };
        __m256i l16 = _mm256_setzero_si256();
        for (int n = 0; n < 5; n++)
            l16 = _mm256_add_epi16(l16, _mm256_maddubs_epi16(tq1_digits(qs[n]),
                                                            _mm256_loadu_si256((const __m256i *)(a + 4 + 32 * n))));
        /* bytes 32..47 (five digits of 16) and qh (four digits of 4) */
        const __m128i t0 = _mm_loadu_si128((const __m128i *)(w + 32));
        const __m128i t1 = _mm_add_epi8(t0, _mm_add_epi8(t0, t0));
        const __m256i t01 = _mm256_inserti128_si256(_mm256_castsi128_si256(t0), t1, 1);
        const __m256i t9 = tq1_times9(t01); /* [t0*9, t1*9] */
        const __m128i t2 = _mm256_castsi256_si128(t9), t3 = _mm256_extracti128_si256(t9, 1);
        const __m128i t4 = _mm256_castsi256_si128(tq1_times9(_mm256_castsi128_si256(t2)));
        uint8_t h5[16];
        for (int i = 0; i < 16; i++)
            h5[i] = (uint8_t)(w[48 + i % 4] * tq_pow3[i / 4]);
        const __m128i t5 = _mm_loadu_si128((const __m128i *)h5);
        const __m256i v[3] = { t01, _mm256_inserti128_si256(_mm256_castsi128_si256(t2), t3, 1),
                               _mm256_inserti128_si256(_mm256_castsi128_si256(t4), t5, 1) };
        for (int n = 0; n < 3; n++)
            l16 = _mm256_add_epi16(l16, _mm256_maddubs_epi16(tq1_digits(v[n]),
                                                            _mm256_loadu_si256((const __m256i *)(a + 164 + 32 * n))));
        acc = tq_step(l16, a, rd_f32(a) * h[q8_rd16(w + 52)], acc);
    }
    return q8_hsum8_avx(acc);
}

__attribute__((target("avx2,f16c,fma")))
static float tq2_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t nb)
{
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++, w += TQ2_0_BYTES, a += Q8_K_BYTES) {
        __m256i l16 = _mm256_setzero_si256();
        for (int j = 0; j < 64; j += 32) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(w + j));
            for (int l = 0; l < 4; l++) {
                const __m256i c = _mm256_and_si256(_mm256_srli_epi16(q, 2 * l), m3);
                const __m256i y = _mm256_loadu_si256((const __m256i *)(a + 4 + 4 * j + 32 * l));
                l16 = _mm256_add_epi16(l16, _mm256_maddubs_epi16(c, y));
            }
        }
        acc = tq_step(l16, a, rd_f32(a) * h[q8_rd16(w + 64)], acc);
    }
    return q8_hsum8_avx(acc);
}
#endif

float tq1_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return tq1_avx2(q8_f16_table(), w, act, nblocks);
#endif
    return tq1_portable(w, act, nblocks);
}

float tq2_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return tq2_avx2(q8_f16_table(), w, act, nblocks);
#endif
    return tq2_portable(w, act, nblocks);
}
