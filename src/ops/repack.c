/*
 * repack.c -- b11669's interleaved Q4_K layout (q4_K_8x8) and its one-column
 * product, bit-exact with the haswell ggml_gemv_q4_K_8x8_q8_K (see repack.h
 * for the float order). AVX2+F16C+FMA chosen at run time (q8_simd()), the
 * portable C gives the same bits.
 */
#include "ops/repack.h"

#include "ops/f16.h"
#include "ops/q4_k.h"
#include "ops/q8_0.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static float rd_f32(const uint8_t *p) { float f; memcpy(&f, p, 4); return f; }
static int16_t rd_i16(const uint8_t *p) { return (int16_t)(uint16_t)(p[0] | p[1] << 8); }

/* Offsets inside one Q4_Kx8 block. */
#define X8_D 0
#define X8_DMIN 16
#define X8_SCALES 32
#define X8_QS 128

/* ---------------------------------------------------------------- repack */

/* One Q4_Kx8 block from the same super-block of 8 rows (in[i]: row i). */
static void make_x8(const uint8_t *const in[8], uint8_t *out)
{
    uint8_t sc[8][8], mn[8][8]; /* [row][sub-block] */
    for (int i = 0; i < 8; i++) {
        memcpy(out + X8_D + 2 * i, in[i], 2);
        memcpy(out + X8_DMIN + 2 * i, in[i] + 2, 2);
        k4_scales(in[i] + 4, sc[i], mn[i]);
    }
    for (int sub = 0; sub < 8; sub++) {
        uint8_t *o = out + X8_SCALES + 12 * sub;
        for (int j = 0; j < 4; j++) {
            o[j] = (uint8_t)((sc[j][sub] & 63) + ((sc[j + 4][sub] & 48) << 2));
            o[j + 4] = (uint8_t)((mn[j][sub] & 63) + ((mn[j + 4][sub] & 48) << 2));
            o[j + 8] = (uint8_t)((sc[j + 4][sub] & 15) + ((mn[j + 4][sub] & 15) << 4));
        }
    }
    /* quants: 8-byte piece i comes from row i % 8, bytes 8 * (i / 8) */
    for (int i = 0; i < 128; i++)
        memcpy(out + X8_QS + 8 * i, in[i % 8] + 16 + 8 * (i / 8), 8);
}

int q4_k_repack8(const uint8_t *w, size_t w_len, size_t rows, size_t k, uint8_t *out, size_t out_len,
                 char *err, size_t errlen)
{
    if (rows % 8 != 0 || k % QK_K_BLOCK != 0) {
        if (err)
            snprintf(err, errlen, "Q4_K repacking needs rows in eights and whole super-blocks, not %zu x %zu",
                     rows, k);
        return -1;
    }
    size_t nb = k / QK_K_BLOCK;
    if (rows && nb > SIZE_MAX / Q4_K_BYTES / rows) {
        if (err)
            snprintf(err, errlen, "Q4_K matrix of %zu x %zu is too large", rows, k);
        return -1;
    }
    size_t need = rows * nb * Q4_K_BYTES;
    if (w_len < need || out_len < need) {
        if (err)
            snprintf(err, errlen, "Q4_K repack of %zu x %zu needs %zu bytes in and out, given %zu and %zu", rows,
                     k, need, w_len, out_len);
        return -1;
    }
    if (need && (!w || !out)) {
        if (err)
            snprintf(err, errlen, "Q4_K repack given a NULL buffer");
        return -1;
    }
    for (size_t g = 0; g < rows / 8; g++)
        for (size_t x = 0; x < nb; x++) {
            const uint8_t *in[8];
            for (int i = 0; i < 8; i++)
                in[i] = w + ((8 * g + (size_t)i) * nb + x) * Q4_K_BYTES;
            make_x8(in, out + (g * nb + x) * Q4_KX8_BYTES);
        }
    return 0;
}

/* ---------------------------------------------------------------- gemv */

/* The min integers of one block for the 8 rows: vphaddw pair sums of the
 * bsums (16-bit wrap), times each row's 8 mins. */
static void x8_mins(const uint8_t *blk, const uint8_t *act, int32_t imin[8], uint8_t sc[8][8])
{
    int16_t q8s[8];
    for (int s = 0; s < 8; s++)
        q8s[s] = (int16_t)(uint16_t)((uint16_t)rd_i16(act + 260 + 4 * s) + (uint16_t)rd_i16(act + 262 + 4 * s));
    uint8_t mn[8][8]; /* [sub-block][row] */
    for (int s = 0; s < 8; s++)
        k4_scales(blk + X8_SCALES + 12 * s, sc[s], mn[s]);
    for (int j = 0; j < 8; j++) {
        uint32_t m = 0;
        for (int s = 0; s < 8; s++)
            m += (uint32_t)(mn[s][j] * q8s[s]);
        imin[j] = (int32_t)m;
    }
}

static void gemv_portable(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act, float *y)
{
    for (size_t g = 0; g < rows / 8; g++, y += 8) {
        float acc[8] = {0}, accm[8] = {0};
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *blk = wr + (g * nb + b) * Q4_KX8_BYTES, *a = act + b * Q8_K_BYTES;
            const int8_t *q8 = (const int8_t *)(a + 4);
            const float ad = rd_f32(a);
            uint8_t sc[8][8]; /* [sub-block][row] */
            int32_t imin[8];
            x8_mins(blk, a, imin, sc);
            for (int j = 0; j < 8; j++) {
                int32_t isum = 0;
                for (int s = 0; s < 8; s++) {
                    /* sub-block s: group s/2, low nibbles when s is even */
                    int32_t dot = 0;
                    for (int v = 0; v < 32; v++) {
                        const int c = 4 * (s / 2) + v / 8; /* the row's 8-byte chunk */
                        const uint8_t q = blk[X8_QS + 64 * c + 8 * j + v % 8];
                        dot += (s & 1 ? q >> 4 : q & 0xF) * q8[32 * s + v];
                    }
                    isum += sc[s][j] * dot;
                }
                const float dj = f16_to_f32(q8_rd16(blk + X8_D + 2 * j));
                const float mj = f16_to_f32(q8_rd16(blk + X8_DMIN + 2 * j));
                acc[j] = fmaf((float)isum, dj * ad, acc[j]);
                accm[j] = fmaf((float)imin[j], mj * ad, accm[j]);
            }
        }
        for (int j = 0; j < 8; j++)
            y[j] = acc[j] - accm[j];
    }
}

#if Q8_X86
/* One group of 8 rows: per sub-block, each 8-byte chunk of the activation
 * broadcast to the four 64-bit lanes meets four rows' chunks (rows 0-3 and
 * 4-7 in two registers); 16-bit sums over the sub-block's 4 chunks (at most
 * 4*2*15*128 = 15360), times the row's scale into 32 bits, then the pairs
 * of 32-bit lanes of a row are added: isum, exact. */
__attribute__((target("avx2,f16c,fma")))
static void gemv_avx2(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act, float *y)
{
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (size_t g = 0; g < rows / 8; g++, y += 8) {
        __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *blk = wr + (g * nb + b) * Q4_KX8_BYTES, *a = act + b * Q8_K_BYTES;
            uint8_t sc[8][8];
            int32_t imin[8];
            x8_mins(blk, a, imin, sc);
            __m256i i03 = _mm256_setzero_si256(), i47 = _mm256_setzero_si256();
            for (int s = 0; s < 8; s++) {
                const uint8_t *q = blk + X8_QS + 256 * (s / 2);
                const int shift = (s & 1) * 4;
                __m256i p03 = _mm256_setzero_si256(), p47 = _mm256_setzero_si256();
                for (int c = 0; c < 4; c++) {
                    long long a8;
                    memcpy(&a8, a + 4 + 32 * s + 8 * c, 8);
                    const __m256i av = _mm256_set1_epi64x(a8);
                    const __m256i w03 = _mm256_and_si256(
                        _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(q + 64 * c)), shift), m4);
                    const __m256i w47 = _mm256_and_si256(
                        _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(q + 64 * c + 32)), shift), m4);
                    p03 = _mm256_add_epi16(p03, _mm256_maddubs_epi16(w03, av));
                    p47 = _mm256_add_epi16(p47, _mm256_maddubs_epi16(w47, av));
                }
                const __m256i s03 = _mm256_setr_epi64x(sc[s][0] * 0x0001000100010001LL, sc[s][1] * 0x0001000100010001LL,
                                                       sc[s][2] * 0x0001000100010001LL, sc[s][3] * 0x0001000100010001LL);
                const __m256i s47 = _mm256_setr_epi64x(sc[s][4] * 0x0001000100010001LL, sc[s][5] * 0x0001000100010001LL,
                                                       sc[s][6] * 0x0001000100010001LL, sc[s][7] * 0x0001000100010001LL);
                i03 = _mm256_add_epi32(i03, _mm256_madd_epi16(p03, s03));
                i47 = _mm256_add_epi32(i47, _mm256_madd_epi16(p47, s47));
            }
            /* hadd: [r0 r1 r4 r5 | r2 r3 r6 r7]; permute to r0..r7 */
            __m256i isum = _mm256_hadd_epi32(i03, i47);
            isum = _mm256_permutevar8x32_epi32(isum, _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
            const __m256 ad = _mm256_set1_ps(rd_f32(a));
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + X8_D)));
            const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + X8_DMIN)));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, ad), acc);
            accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)imin)),
                                   _mm256_mul_ps(dm, ad), accm);
        }
        _mm256_storeu_ps(y, _mm256_sub_ps(acc, accm));
    }
}
#endif

void q4_k_x8_gemv(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act, float *y)
{
#if Q8_X86
    if (q8_simd()) {
        gemv_avx2(wr, rows, nb, act, y);
        return;
    }
#endif
    gemv_portable(wr, rows, nb, act, y);
}
