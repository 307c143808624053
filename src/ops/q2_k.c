/*
 * q2_k.c -- Q2_K and Q3_K weights against Q8_K activations, bit-exact with
 * llama.cpp b11669 (see q2_k.h for what the haswell build runs).
 *
 * The integer part of each super-block is the same for vec_dot and for the
 * tiled product: ggml's eight exact lanes (AVX2 or portable), whose sum is
 * the tiled kernel's s1 (and, for Q2_K, whose min lanes sum to its s2); only
 * the float chains differ. No 16-bit saturation is reachable (the largest
 * vpmaddubsw pair is 2*4*128).
 */
#include "ops/ops_util.h"
#include "ops/q2_k.h"

#include "ops/f16.h"
#include "ops/q4_k.h"
#include "ops/q8_0.h"

#include <math.h>
#include <string.h>

void k3_scales(const uint8_t *s, int8_t sc[16])
{
    for (int j = 0; j < 16; j++) {
        const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
        const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (int8_t)((lo | hi << 4) - 32);
    }
}

/* ---------------------------------------------------------------- dequantize */

int q2_k_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    if (ops_check_row("Q2_K", "super-blocks of 256 values", QK_K_BLOCK, Q2_K_BYTES, w_len, n, w, y, err,
                      errlen) != 0)
        return -1;
    for (size_t b = 0; b < n / QK_K_BLOCK; b++, w += Q2_K_BYTES) {
        const float d = f16_to_f32(q8_rd16(w + 80)), dmin = f16_to_f32(q8_rd16(w + 82));
        const uint8_t *q = w + 16;
        for (int h = 0; h < 2; h++, q += 32)
            for (int t = 0; t < 4; t++)
                for (int half = 0; half < 2; half++) {
                    const uint8_t sc = w[8 * h + 2 * t + half];
                    const float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * (float)((q[16 * half + l] >> (2 * t)) & 3) - ml;
                }
    }
    return 0;
}

int q3_k_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    if (ops_check_row("Q3_K", "super-blocks of 256 values", QK_K_BLOCK, Q3_K_BYTES, w_len, n, w, y, err,
                      errlen) != 0)
        return -1;
    for (size_t b = 0; b < n / QK_K_BLOCK; b++, w += Q3_K_BYTES) {
        const float d = f16_to_f32(q8_rd16(w + 108));
        int8_t sc[16];
        k3_scales(w + 96, sc);
        const uint8_t *q = w + 32, *hm = w;
        for (int h = 0; h < 2; h++, q += 32)
            for (int t = 0; t < 4; t++)
                for (int half = 0; half < 2; half++) {
                    const float dl = d * (float)sc[8 * h + 2 * t + half];
                    const int bit = 4 * h + t;
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        *y++ = dl * (float)(((q[l] >> (2 * t)) & 3) - ((hm[l] >> bit & 1) ? 0 : 4));
                }
    }
    return 0;
}

/* ---------------------------------------------------------------- integer lanes, portable */

/* Lane L (0..7) covers bytes 4L..4L+3 of every 32-value chunk; chunk t of
 * half h takes scale 8h+2t for bytes 0..15 and 8h+2t+1 for bytes 16..31. */
static void q23_lanes(const uint8_t *w, const int8_t *q8, int three, int32_t sumi[8])
{
    int8_t s3[16];
    if (three) k3_scales(w + 96, s3);
    const uint8_t *qs = w + (three ? 32 : 16);
    for (int L = 0; L < 8; L++) {
        uint32_t s = 0;
        for (int h = 0; h < 2; h++)
            for (int t = 0; t < 4; t++) {
                const int k = 8 * h + 2 * t + (L >= 4);
                const int scale = three ? s3[k] : (w[k] & 0xF);
                int32_t p = 0;
                for (int e = 4 * L; e < 4 * L + 4; e++) {
                    int v = (qs[32 * h + e] >> (2 * t)) & 3;
                    if (three && !(w[e] >> (4 * h + t) & 1)) v -= 4;
                    p += v * q8[128 * h + 32 * t + e];
                }
                s += (uint32_t)(scale * p);
            }
        sumi[L] = (int32_t)s;
    }
}

/* Q2_K's min lanes: vpmaddwd of the 16 mins with the 16 bsums. */
static void q23_min_lanes(const uint8_t *w, const uint8_t *act, int32_t prod[8])
{
    for (int L = 0; L < 8; L++)
        prod[L] = (w[2 * L] >> 4) * rd_i16(act + 260 + 4 * L) + (w[2 * L + 1] >> 4) * rd_i16(act + 262 + 4 * L);
}

static int32_t q23_sum8(const int32_t v[8])
{
    uint32_t s = 0;
    for (int L = 0; L < 8; L++)
        s += (uint32_t)v[L];
    return (int32_t)s;
}

static float q23_dot_portable(const uint8_t *w, const uint8_t *act, size_t nb, int three, int tiled)
{
    float acc8[8] = {0}, acc = 0.0f;
    const size_t wb = three ? Q3_K_BYTES : Q2_K_BYTES;
    for (size_t i = 0; i < nb; i++, w += wb, act += Q8_K_BYTES) {
        const float d8 = rd_f32(act);
        const float wd = f16_to_f32(q8_rd16(w + (three ? 108 : 80)));
        const float wm = three ? 0.0f : f16_to_f32(q8_rd16(w + 82));
        int32_t sumi[8], prod[8] = {0};
        q23_lanes(w, (const int8_t *)(act + 4), three, sumi);
        if (!three) q23_min_lanes(w, act, prod);
        if (tiled) {
            float r = wd * (float)q23_sum8(sumi);
            if (!three) r = fmaf(-wm, (float)q23_sum8(prod), r);
            acc = fmaf(r, d8, acc);
            continue;
        }
        const float d = d8 * wd, dmin = -d8 * wm;
        for (int L = 0; L < 8; L++) {
            if (!three) acc8[L] = fmaf(dmin, (float)prod[L], acc8[L]);
            acc8[L] = fmaf(d, (float)sumi[L], acc8[L]);
        }
    }
    return tiled ? acc : q8_hsum8(acc8);
}

/* ---------------------------------------------------------------- integer lanes, AVX2 */

#if Q8_X86
/* The int16 scale of chunk t: 2t in the low 128 bits, 2t+1 in the high. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i q23_pick(__m256i scales, int t)
{
    const __m256i sh = _mm256_set_m128i(_mm_set1_epi16((short)((4 * t + 3) << 8 | (4 * t + 2))),
                                        _mm_set1_epi16((short)((4 * t + 1) << 8 | (4 * t))));
    return _mm256_shuffle_epi8(scales, sh);
}

/* One super-block's eight sumi lanes (and Q2_K's eight min lanes). */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i q23_lanes_avx2(const uint8_t *w, const uint8_t *act, int three, __m256i *prod)
{
    const __m256i m3 = _mm256_set1_epi8(3), mone = _mm256_set1_epi8(1);
    __m128i sc8;
    if (three) {
        int8_t s3[16];
        k3_scales(w + 96, s3);
        sc8 = _mm_loadu_si128((const __m128i *)s3);
    } else {
        const __m128i ms = _mm_loadu_si128((const __m128i *)w);
        sc8 = _mm_and_si128(ms, _mm_set1_epi8(0xF));
        const __m128i mins8 = _mm_and_si128(_mm_srli_epi16(ms, 4), _mm_set1_epi8(0xF));
        *prod = _mm256_madd_epi16(_mm256_cvtepi8_epi16(mins8), _mm256_loadu_si256((const __m256i *)(act + 260)));
    }
    const __m256i all = _mm256_cvtepi8_epi16(sc8);
    const __m128i lo = _mm256_castsi256_si128(all), hi = _mm256_extracti128_si256(all, 1);
    const __m256i scales[2] = {_mm256_set_m128i(lo, lo), _mm256_set_m128i(hi, hi)};
    const __m256i hbits = _mm256_loadu_si256((const __m256i *)w);
    const uint8_t *qs = w + (three ? 32 : 16), *q8 = act + 4;
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
        for (int t = 0; t < 4; t++) {
            const __m256i a = _mm256_loadu_si256((const __m256i *)(q8 + 128 * h + 32 * t));
            const __m256i ql = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * t), m3);
            __m256i p = _mm256_maddubs_epi16(ql, a);
            if (three) {
                const int bit = 4 * h + t;
                const __m256i qh = _mm256_slli_epi16(
                    _mm256_srli_epi16(_mm256_andnot_si256(hbits, _mm256_slli_epi16(mone, bit)), bit), 2);
                p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(qh, a));
            }
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(q23_pick(scales[h], t), p));
        }
    }
    return sumi;
}

__attribute__((target("avx2,f16c,fma"), always_inline))
static inline int32_t q23_hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

__attribute__((target("avx2,f16c,fma")))
static float q23_dot_avx2(const float *h16, const uint8_t *w, const uint8_t *act, size_t nb, int three,
                          int tiled)
{
    __m256 acc8 = _mm256_setzero_ps();
    float acc = 0.0f;
    const size_t wb = three ? Q3_K_BYTES : Q2_K_BYTES;
    for (size_t i = 0; i < nb; i++, w += wb, act += Q8_K_BYTES) {
        const float d8 = rd_f32(act);
        const float wd = h16[q8_rd16(w + (three ? 108 : 80))];
        const float wm = three ? 0.0f : h16[q8_rd16(w + 82)];
        __m256i prod = _mm256_setzero_si256();
        const __m256i sumi = q23_lanes_avx2(w, act, three, &prod);
        if (tiled) {
            __m128 r = _mm_set_ss(wd * (float)q23_hsum_epi32(sumi));
            if (!three)
                r = _mm_fnmadd_ss(_mm_set_ss(wm), _mm_set_ss((float)q23_hsum_epi32(prod)), r);
            acc = _mm_cvtss_f32(_mm_fmadd_ss(r, _mm_set_ss(d8), _mm_set_ss(acc)));
            continue;
        }
        if (!three)
            acc8 = _mm256_fmadd_ps(_mm256_set1_ps(-d8 * wm), _mm256_cvtepi32_ps(prod), acc8);
        acc8 = _mm256_fmadd_ps(_mm256_set1_ps(d8 * wd), _mm256_cvtepi32_ps(sumi), acc8);
    }
    return tiled ? acc : q8_hsum8_avx(acc8);
}
#endif

static float q23_dot(const uint8_t *w, const uint8_t *act, size_t nb, int three, int tiled)
{
#if Q8_X86
    if (q8_simd())
        return q23_dot_avx2(q8_f16_table(), w, act, nb, three, tiled);
#endif
    return q23_dot_portable(w, act, nb, three, tiled);
}

float q2_k_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks) { return q23_dot(w, act, nblocks, 0, 0); }
float q3_k_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks) { return q23_dot(w, act, nblocks, 1, 0); }
float q2_k_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks) { return q23_dot(w, act, nblocks, 0, 1); }
float q3_k_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks) { return q23_dot(w, act, nblocks, 1, 1); }
