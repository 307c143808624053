/*
 * q4_k.c -- Q4_K, Q5_K, Q6_K weights and the Q8_K activation quantizer,
 * bit-exact with llama.cpp b11669 (see q4_k.h for what the haswell build
 * runs and the float orders).
 *
 * Every vec_dot is written twice: AVX2+F16C+FMA (chosen at run time through
 * q8_simd()) and portable C with ggml's eight integer lanes spelled out. The
 * integer parts are exact in both (no 16-bit saturation is reachable: the
 * largest pair of products is 63*128*2 = 16128), so only the float steps
 * decide the bits: the per-block scale products, one fma per lane and block,
 * and the final horizontal sums, in ggml's order.
 */
#include "ops/ops_util.h"
#include "ops/q4_k.h"

#include "ops/f16.h"
#include "ops/q8_0.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */


/* ---------------------------------------------------------------- Q8_K quantizer */

/* ggml's nearest_int: add 1.5*2^23 and read the low mantissa bits (the sum
 * is rounded once, to nearest even; valid for |v| < 2^22, and for anything
 * else the same bits ggml gets). */
static int nearest_int(float v)
{
    float s = v + 12582912.0f;
    return (int)(f32_bits(s) & 0x007fffffu) - 0x00400000;
}

void q8_k_quantize_blocks(const float *x, uint8_t *out, size_t nblocks)
{
    for (size_t b = 0; b < nblocks; b++, x += QK_K_BLOCK, out += Q8_K_BYTES) {
        float max = 0.0f, amax = 0.0f;
        for (int j = 0; j < QK_K_BLOCK; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        int8_t *qs = (int8_t *)(out + 4);
        if (amax == 0.0f) {
            memset(out, 0, Q8_K_BYTES);
            continue;
        }
        /* two roundings (the product, then nearest_int's sum), as in
         * ggml-base: this function is outside the target("fma") kernels */
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK_K_BLOCK; j++) {
            int v = nearest_int(iscale * x[j]);
            qs[j] = (int8_t)(uint8_t)(unsigned)(v < 127 ? v : 127);
        }
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int i = 0; i < 16; i++)
                sum += qs[16 * g + i];
            uint16_t s16 = (uint16_t)sum;
            out[260 + 2 * g] = (uint8_t)s16;
            out[261 + 2 * g] = (uint8_t)(s16 >> 8);
        }
        float d = 1.0f / iscale;
        memcpy(out, &d, 4);
    }
}

int q8_k_quantize(const float *x, size_t n, uint8_t *out, size_t out_len, char *err, size_t errlen)
{
    if (n % QK_K_BLOCK != 0) {
        if (err)
            snprintf(err, errlen, "q8_K quantizes whole blocks of 256 values, not %zu", n);
        return -1;
    }
    if (out_len < q8_k_row_bytes(n)) {
        if (err)
            snprintf(err, errlen, "q8_K output holds %zu bytes; %zu values need %zu", out_len, n,
                     q8_k_row_bytes(n));
        return -1;
    }
    if (n && (!x || !out)) {
        if (err)
            snprintf(err, errlen, "q8_K quantize given a NULL buffer");
        return -1;
    }
    q8_k_quantize_blocks(x, out, n / QK_K_BLOCK);
    return 0;
}

/* ---------------------------------------------------------------- dequantize */

int q4_k_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    if (ops_check_row("Q4_K", "super-blocks of 256 values", QK_K_BLOCK, Q4_K_BYTES, w_len, n, w, y, err, errlen) != 0)
        return -1;
    for (size_t b = 0; b < n / QK_K_BLOCK; b++, w += Q4_K_BYTES) {
        const float d = f16_to_f32(q8_rd16(w)), dmin = f16_to_f32(q8_rd16(w + 2));
        uint8_t sc[8], mn[8];
        k4_scales(w + 4, sc, mn);
        const uint8_t *q = w + 16;
        for (int g = 0; g < 4; g++, q += 32) {
            const float d1 = d * sc[2 * g], m1 = dmin * mn[2 * g];
            const float d2 = d * sc[2 * g + 1], m2 = dmin * mn[2 * g + 1];
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
    return 0;
}

int q5_k_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    if (ops_check_row("Q5_K", "super-blocks of 256 values", QK_K_BLOCK, Q5_K_BYTES, w_len, n, w, y, err, errlen) != 0)
        return -1;
    for (size_t b = 0; b < n / QK_K_BLOCK; b++, w += Q5_K_BYTES) {
        const float d = f16_to_f32(q8_rd16(w)), dmin = f16_to_f32(q8_rd16(w + 2));
        uint8_t sc[8], mn[8];
        k4_scales(w + 4, sc, mn);
        const uint8_t *qh = w + 16, *ql = w + 48;
        for (int g = 0; g < 4; g++, ql += 32) {
            const float d1 = d * sc[2 * g], m1 = dmin * mn[2 * g];
            const float d2 = d * sc[2 * g + 1], m2 = dmin * mn[2 * g + 1];
            const int lo = 2 * g, hi = 2 * g + 1; /* the fifth bit's place in qh */
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)((ql[l] & 0xF) + ((qh[l] >> lo & 1) << 4)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)((ql[l] >> 4) + ((qh[l] >> hi & 1) << 4)) - m2;
        }
    }
    return 0;
}

int q6_k_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen)
{
    if (ops_check_row("Q6_K", "super-blocks of 256 values", QK_K_BLOCK, Q6_K_BYTES, w_len, n, w, y, err, errlen) != 0)
        return -1;
    for (size_t b = 0; b < n / QK_K_BLOCK; b++, w += Q6_K_BYTES) {
        const float d = f16_to_f32(q8_rd16(w + 208));
        const uint8_t *ql = w, *qh = w + 128;
        const int8_t *sc = (const int8_t *)(w + 192);
        for (int h = 0; h < 2; h++, y += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0 & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2 & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
                /* ggml: d * sc * q, left to right: (d*sc) rounded, then *q */
                y[l + 0] = d * (float)sc[is + 0] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- vec_dot, portable */

/* Lane L (0..7) of ggml's 256-bit integer accumulators covers bytes 4L..4L+3
 * of every 32-byte chunk of values. */

/* Q4_K/Q5_K: sum over the four 64-value groups of scale * (nibble x q8) of
 * the lane's bytes; the fifth bits (qh, or NULL for Q4_K) add 16. */
static void k45_lanes(const uint8_t *ql, const uint8_t *qh, const int8_t *q8, const uint8_t sc[8],
                      int32_t lane[8])
{
    for (int L = 0; L < 8; L++) {
        int32_t s = 0;
        for (int g = 0; g < 4; g++) {
            int32_t lo = 0, hi = 0;
            for (int e = 4 * L; e < 4 * L + 4; e++) {
                int vl = ql[32 * g + e] & 0xF, vh = ql[32 * g + e] >> 4;
                if (qh) {
                    vl += (qh[e] >> (2 * g) & 1) << 4;
                    vh += (qh[e] >> (2 * g + 1) & 1) << 4;
                }
                lo += vl * q8[64 * g + e];
                hi += vh * q8[64 * g + 32 + e];
            }
            s += sc[2 * g] * lo + sc[2 * g + 1] * hi;
        }
        lane[L] = s;
    }
}

/* Q4_K/Q5_K min terms: vphaddw of the 16 bsums (pair sums, wrapping at 16
 * bits), then vpmaddwd with the 8 mins: four int32. */
static void k45_mins(const uint8_t *act, const uint8_t mn[8], int32_t prod[4])
{
    int16_t q8s[8];
    for (int k = 0; k < 8; k++)
        q8s[k] = (int16_t)(uint16_t)((uint16_t)rd_i16(act + 260 + 4 * k) + (uint16_t)rd_i16(act + 262 + 4 * k));
    for (int t = 0; t < 4; t++)
        prod[t] = (int32_t)((uint32_t)(mn[2 * t] * q8s[2 * t]) + (uint32_t)(mn[2 * t + 1] * q8s[2 * t + 1]));
}

static float q4k_portable(const uint8_t *w, const uint8_t *act, size_t nb)
{
    float acc[8] = {0}, accm[4] = {0};
    for (size_t i = 0; i < nb; i++, w += Q4_K_BYTES, act += Q8_K_BYTES) {
        const float ad = rd_f32(act);
        const float d = ad * f16_to_f32(q8_rd16(w));
        const float dmin = -ad * f16_to_f32(q8_rd16(w + 2));
        uint8_t sc[8], mn[8];
        k4_scales(w + 4, sc, mn);
        int32_t prod[4], lane[8];
        k45_mins(act, mn, prod);
        for (int t = 0; t < 4; t++)
            accm[t] = fmaf(dmin, (float)prod[t], accm[t]);
        k45_lanes(w + 16, NULL, (const int8_t *)(act + 4), sc, lane);
        for (int L = 0; L < 8; L++)
            acc[L] = fmaf(d, (float)lane[L], acc[L]);
    }
    float m0 = accm[2] + accm[0], m1 = accm[3] + accm[1];
    float m = m0 + m1;
    return m + q8_hsum8(acc);
}

static float q5k_portable(const uint8_t *w, const uint8_t *act, size_t nb)
{
    float acc[8] = {0}, summs = 0.0f;
    for (size_t i = 0; i < nb; i++, w += Q5_K_BYTES, act += Q8_K_BYTES) {
        const float ad = rd_f32(act);
        const float d = ad * f16_to_f32(q8_rd16(w));
        const float dmin = -ad * f16_to_f32(q8_rd16(w + 2));
        uint8_t sc[8], mn[8];
        k4_scales(w + 4, sc, mn);
        int32_t prod[4], lane[8];
        k45_mins(act, mn, prod);
        int32_t hs = (int32_t)(((uint32_t)prod[0] + (uint32_t)prod[1]) + ((uint32_t)prod[2] + (uint32_t)prod[3]));
        summs = fmaf(dmin, (float)hs, summs); /* gcc contracted summs += dmin*hs */
        k45_lanes(w + 48, w + 16, (const int8_t *)(act + 4), sc, lane);
        for (int L = 0; L < 8; L++)
            acc[L] = fmaf(d, (float)lane[L], acc[L]);
    }
    return q8_hsum8(acc) + summs;
}

/* Q6_K: value v (0..63) of chunk c (0..3) of half h at byte e. */
static int q6_val(const uint8_t *ql, const uint8_t *qh, int c, int e)
{
    switch (c) {
    case 0: return (ql[e] & 0xF) | (qh[e] & 3) << 4;
    case 1: return (ql[32 + e] & 0xF) | (qh[e] >> 2 & 3) << 4;
    case 2: return (ql[e] >> 4) | (qh[e] >> 4 & 3) << 4;
    default: return (ql[32 + e] >> 4) | (qh[e] >> 6 & 3) << 4;
    }
}

static float q6k_portable(const uint8_t *w, const uint8_t *act, size_t nb)
{
    float acc[8] = {0};
    for (size_t i = 0; i < nb; i++, w += Q6_K_BYTES, act += Q8_K_BYTES) {
        const float d = rd_f32(act) * f16_to_f32(q8_rd16(w + 208));
        const int8_t *sc = (const int8_t *)(w + 192), *q8 = (const int8_t *)(act + 4);
        for (int L = 0; L < 8; L++) {
            uint32_t s = 0;
            for (int h = 0; h < 2; h++)
                for (int c = 0; c < 4; c++) {
                    /* bytes 0..15 of a chunk take scale 8h+2c, bytes 16..31 the next */
                    const int scale = sc[8 * h + 2 * c + (L >= 4)];
                    int32_t p = 0;
                    for (int e = 4 * L; e < 4 * L + 4; e++)
                        p += q6_val(w + 64 * h, w + 128 + 32 * h, c, e) * q8[128 * h + 32 * c + e];
                    s += (uint32_t)(scale * p);
                }
            /* the -32 offset: 32 * (bsum * scale) over the lane's two 16-groups */
            int32_t sub = rd_i16(act + 260 + 4 * L) * sc[2 * L] + rd_i16(act + 262 + 4 * L) * sc[2 * L + 1];
            s -= (uint32_t)sub << 5;
            acc[L] = fmaf(d, (float)(int32_t)s, acc[L]);
        }
    }
    return q8_hsum8(acc);
}

/* ---------------------------------------------------------------- vec_dot, AVX2 */

#if Q8_X86
/* The 8 scales then the 8 mins as 16 bytes (ggml's utmp shuffle). */
static inline void k4_pack(const uint8_t *s12, uint8_t out[16])
{
    uint8_t sc[8], mn[8];
    k4_scales(s12, sc, mn);
    memcpy(out, sc, 8);
    memcpy(out + 8, mn, 8);
}

/* One super-block's eight integer lanes for Q4_K (qh NULL) or Q5_K. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i k45_sumi_avx2(const uint8_t *ql, const uint8_t *qh, const uint8_t *q8, __m256i scales)
{
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256i sumi = _mm256_setzero_si256();
    __m256i hb = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    for (int g = 0; g < 4; g++) {
        const __m256i sl = _mm256_shuffle_epi8(scales, _mm256_set1_epi16((short)((4 * g + 1) << 8 | 4 * g)));
        const __m256i sh = _mm256_shuffle_epi8(scales, _mm256_set1_epi16((short)((4 * g + 3) << 8 | (4 * g + 2))));
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(ql + 32 * g));
        __m256i lo = _mm256_and_si256(bits, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
        if (qh) {
            const __m256i one = _mm256_set1_epi8(1);
            lo = _mm256_add_epi8(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * g), one), 4));
            hi = _mm256_add_epi8(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * g + 1), one), 4));
        }
        const __m256i pl = _mm256_madd_epi16(sl, _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(q8 + 64 * g))));
        const __m256i ph = _mm256_madd_epi16(sh, _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 64 * g + 32))));
        sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
    }
    return sumi;
}

/* The four min products (vphaddw of the bsums, vpmaddwd with the mins). */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m128i k45_mins_avx2(const uint8_t *act, __m256i ms)
{
    const __m256i bs = _mm256_loadu_si256((const __m256i *)(act + 260));
    const __m128i q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    return _mm_madd_epi16(_mm256_extracti128_si256(ms, 1), q8s);
}

__attribute__((target("avx2,f16c,fma")))
static float q4k_avx2(const float *h16, const uint8_t *w, const uint8_t *act, size_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (size_t i = 0; i < nb; i++, w += Q4_K_BYTES, act += Q8_K_BYTES) {
        const float ad = rd_f32(act);
        const float d = ad * h16[q8_rd16(w)];
        const float dmin = -ad * h16[q8_rd16(w + 2)];
        uint8_t u[16];
        k4_pack(w + 4, u);
        const __m256i ms = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)u));
        accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(k45_mins_avx2(act, ms)), accm);
        const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(ms));
        const __m256i sumi = k45_sumi_avx2(w + 16, NULL, act + 4, scales);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    accm = _mm_add_ps(_mm_movehl_ps(accm, accm), accm);
    accm = _mm_add_ss(accm, _mm_movehdup_ps(accm));
    return _mm_cvtss_f32(accm) + q8_hsum8_avx(acc);
}

__attribute__((target("avx2,f16c,fma")))
static float q5k_avx2(const float *h16, const uint8_t *w, const uint8_t *act, size_t nb)
{
    __m256 acc = _mm256_setzero_ps();
    __m128 summs = _mm_setzero_ps();
    for (size_t i = 0; i < nb; i++, w += Q5_K_BYTES, act += Q8_K_BYTES) {
        const float ad = rd_f32(act);
        const float d = ad * h16[q8_rd16(w)];
        const float dmin = -ad * h16[q8_rd16(w + 2)];
        uint8_t u[16];
        k4_pack(w + 4, u);
        const __m256i ms = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)u));
        __m128i prod = k45_mins_avx2(act, ms);
        prod = _mm_add_epi32(prod, _mm_unpackhi_epi64(prod, prod));
        prod = _mm_add_epi32(prod, _mm_shuffle_epi32(prod, 1));
        /* ggml: summs += dmin * hsum, one vfmadd231ss in the binary */
        summs = _mm_fmadd_ss(_mm_set_ss(dmin), _mm_cvtepi32_ps(prod), summs);
        const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(ms));
        const __m256i sumi = k45_sumi_avx2(w + 48, w + 16, act + 4, scales);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return q8_hsum8_avx(acc) + _mm_cvtss_f32(summs);
}

__attribute__((target("avx2,f16c,fma")))
static float q6k_avx2(const float *h16, const uint8_t *w, const uint8_t *act, size_t nb)
{
    const __m256i m15 = _mm256_set1_epi8(15);
    __m256 acc = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++, w += Q6_K_BYTES, act += Q8_K_BYTES) {
        const float d = rd_f32(act) * h16[q8_rd16(w + 208)];
        const __m128i sc = _mm_loadu_si128((const __m128i *)(w + 192));
        const __m256i bs = _mm256_loadu_si256((const __m256i *)(act + 260));
        const __m256i sub = _mm256_slli_epi32(_mm256_madd_epi16(bs, _mm256_cvtepi8_epi16(sc)), 5);
        __m256i sumi = _mm256_setzero_si256();
        for (int hf = 0; hf < 2; hf++) {
            const __m256i b1 = _mm256_loadu_si256((const __m256i *)(w + 64 * hf));
            const __m256i b2 = _mm256_loadu_si256((const __m256i *)(w + 64 * hf + 32));
            const __m256i bh = _mm256_loadu_si256((const __m256i *)(w + 128 + 32 * hf));
            __m256i v[4];
            v[0] = _mm256_or_si256(_mm256_and_si256(b1, m15), _mm256_slli_epi16(_mm256_and_si256(bh, _mm256_set1_epi8(3)), 4));
            v[1] = _mm256_or_si256(_mm256_and_si256(b2, m15), _mm256_slli_epi16(_mm256_and_si256(bh, _mm256_set1_epi8(12)), 2));
            v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m15), _mm256_and_si256(bh, _mm256_set1_epi8(48)));
            v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m15),
                                   _mm256_srli_epi16(_mm256_and_si256(bh, _mm256_set1_epi8((char)0xC0)), 2));
            for (int c = 0; c < 4; c++) {
                const int k = 8 * hf + 2 * c; /* scales k (bytes 0..15) and k+1 */
                const __m128i pick = _mm_set_epi64x((long long)(0x0101010101010101ULL * (uint64_t)(k + 1)),
                                                    (long long)(0x0101010101010101ULL * (uint64_t)k));
                const __m256i s16 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, pick));
                const __m256i q8 = _mm256_loadu_si256((const __m256i *)(act + 4 + 128 * hf + 32 * c));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(s16, _mm256_maddubs_epi16(v[c], q8)));
            }
        }
        sumi = _mm256_sub_epi32(sumi, sub);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return q8_hsum8_avx(acc);
}
#endif

/* ---------------------------------------------------------------- the tiled product */

/* b11669's ggml_compute_forward_mul_mat_tiled (haswell: its AVX2 microtile)
 * computes each output as one chain over the super-blocks, whatever the
 * tiling and the thread split: exact integer sums s1 = sum_s scale_s *
 * (q . q8)_s and (Q4_K/Q5_K) s2 = sum_s min_s * (bsum_2s + bsum_2s+1) (the
 * Q8_K bsums widened to int32: no 16-bit wrap), then r = d * (float)s1 with
 * the weight's own fp16 d (not d8*d as vec_dot), r -= dmin * (float)s2 in
 * one vfnmadd, and acc = fma(r, d8, acc) from acc = +0. Q6_K's -32 offset
 * is taken from the codes themselves (activations biased by +128 against
 * q - 32, the bias taken out again), never from the bsums. */
static inline float kt_step(float d, float dmin, int32_t s1, int32_t s2, float d8, float acc)
{
    float r = d * (float)s1;
    r = fmaf(-dmin, (float)s2, r);
    return fmaf(r, d8, acc);
}

/* s2: the 8 mins against the pairs of 16-value bsums, as int32. */
static int32_t kt_mins(const uint8_t *act, const uint8_t mn[8])
{
    int32_t s = 0;
    for (int k = 0; k < 8; k++)
        s += mn[k] * (rd_i16(act + 260 + 4 * k) + rd_i16(act + 262 + 4 * k));
    return s;
}

static int32_t kt_lane_sum(const int32_t lane[8])
{
    uint32_t s = 0;
    for (int L = 0; L < 8; L++)
        s += (uint32_t)lane[L];
    return (int32_t)s;
}

static float q45k_tiled_portable(const uint8_t *w, const uint8_t *act, size_t nb, int five)
{
    float acc = 0.0f;
    const size_t wb = five ? Q5_K_BYTES : Q4_K_BYTES;
    for (size_t i = 0; i < nb; i++, w += wb, act += Q8_K_BYTES) {
        uint8_t sc[8], mn[8];
        int32_t lane[8];
        k4_scales(w + 4, sc, mn);
        k45_lanes(w + (five ? 48 : 16), five ? w + 16 : NULL, (const int8_t *)(act + 4), sc, lane);
        acc = kt_step(f16_to_f32(q8_rd16(w)), f16_to_f32(q8_rd16(w + 2)), kt_lane_sum(lane),
                      kt_mins(act, mn), rd_f32(act), acc);
    }
    return acc;
}

static float q6k_tiled_portable(const uint8_t *w, const uint8_t *act, size_t nb)
{
    float acc = 0.0f;
    for (size_t i = 0; i < nb; i++, w += Q6_K_BYTES, act += Q8_K_BYTES) {
        const int8_t *sc = (const int8_t *)(w + 192), *q8 = (const int8_t *)(act + 4);
        int32_t s1 = 0;
        for (int h = 0; h < 2; h++)
            for (int c = 0; c < 4; c++)
                for (int half = 0; half < 2; half++) {
                    int32_t p = 0;
                    for (int e = 16 * half; e < 16 * half + 16; e++)
                        p += (q6_val(w + 64 * h, w + 128 + 32 * h, c, e) - 32) * q8[128 * h + 32 * c + e];
                    s1 += sc[8 * h + 2 * c + half] * p;
                }
        acc = fmaf(f16_to_f32(q8_rd16(w + 208)) * (float)s1, rd_f32(act), acc);
    }
    return acc;
}

#if Q8_X86
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline int32_t kt_hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtsi128_si32(s);
}

__attribute__((target("avx2,f16c,fma")))
static float q45k_tiled_avx2(const float *h16, const uint8_t *w, const uint8_t *act, size_t nb, int five)
{
    float acc = 0.0f;
    const size_t wb = five ? Q5_K_BYTES : Q4_K_BYTES;
    for (size_t i = 0; i < nb; i++, w += wb, act += Q8_K_BYTES) {
        uint8_t u[16];
        k4_pack(w + 4, u);
        const __m256i ms = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)u));
        const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(ms));
        const __m256i sumi = k45_sumi_avx2(w + (five ? 48 : 16), five ? w + 16 : NULL, act + 4, scales);
        acc = kt_step(h16[q8_rd16(w)], h16[q8_rd16(w + 2)], kt_hsum_epi32(sumi), kt_mins(act, u + 8),
                      rd_f32(act), acc);
    }
    return acc;
}

__attribute__((target("avx2,f16c,fma")))
static float q6k_tiled_avx2(const float *h16, const uint8_t *w, const uint8_t *act, size_t nb)
{
    const __m256i m15 = _mm256_set1_epi8(15), b32 = _mm256_set1_epi8(32);
    float acc = 0.0f;
    for (size_t i = 0; i < nb; i++, w += Q6_K_BYTES, act += Q8_K_BYTES) {
        const __m128i sc = _mm_loadu_si128((const __m128i *)(w + 192));
        __m256i sumi = _mm256_setzero_si256();
        for (int hf = 0; hf < 2; hf++) {
            const __m256i b1 = _mm256_loadu_si256((const __m256i *)(w + 64 * hf));
            const __m256i b2 = _mm256_loadu_si256((const __m256i *)(w + 64 * hf + 32));
            const __m256i bh = _mm256_loadu_si256((const __m256i *)(w + 128 + 32 * hf));
            __m256i v[4];
            v[0] = _mm256_or_si256(_mm256_and_si256(b1, m15), _mm256_slli_epi16(_mm256_and_si256(bh, _mm256_set1_epi8(3)), 4));
            v[1] = _mm256_or_si256(_mm256_and_si256(b2, m15), _mm256_slli_epi16(_mm256_and_si256(bh, _mm256_set1_epi8(12)), 2));
            v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m15), _mm256_and_si256(bh, _mm256_set1_epi8(48)));
            v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m15),
                                   _mm256_srli_epi16(_mm256_and_si256(bh, _mm256_set1_epi8((char)0xC0)), 2));
            for (int c = 0; c < 4; c++) {
                const int k = 8 * hf + 2 * c; /* scales k (bytes 0..15) and k+1 */
                const __m128i pick = _mm_set_epi64x((long long)(0x0101010101010101ULL * (uint64_t)(k + 1)),
                                                    (long long)(0x0101010101010101ULL * (uint64_t)k));
                const __m256i s16 = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, pick));
                const __m256i q8 = _mm256_loadu_si256((const __m256i *)(act + 4 + 128 * hf + 32 * c));
                /* scale * (q . q8 - 32 * sum q8), both exact */
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(s16, _mm256_maddubs_epi16(v[c], q8)));
                sumi = _mm256_sub_epi32(sumi, _mm256_madd_epi16(s16, _mm256_maddubs_epi16(b32, q8)));
            }
        }
        acc = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(h16[q8_rd16(w + 208)] * (float)kt_hsum_epi32(sumi)),
                                         _mm_set_ss(rd_f32(act)), _mm_set_ss(acc)));
    }
    return acc;
}
#endif

#if Q8_X86
/* Eight int32 vectors summed lane-wise into one: lane j is the sum of a[j]'s
 * eight lanes (integer adds: exact in any order). */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i kt_hsum8x8(const __m256i a[8])
{
    const __m256i t0 = _mm256_hadd_epi32(a[0], a[1]), t1 = _mm256_hadd_epi32(a[2], a[3]);
    const __m256i t2 = _mm256_hadd_epi32(a[4], a[5]), t3 = _mm256_hadd_epi32(a[6], a[7]);
    const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

/* A 2x4 tile's lanes: [row 0: columns 0-3 | row 1: columns 0-3]. The four
 * columns' Q8_K d in both halves, and the lanes' outputs into y. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256 kt_tile_d8(const uint8_t *const ac[4])
{
    const __m128 d = _mm_setr_ps(rd_f32(ac[0]), rd_f32(ac[1]), rd_f32(ac[2]), rd_f32(ac[3]));
    return _mm256_set_m128(d, d);
}

__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void kt_tile_store(__m256 accf, float *y, size_t ys)
{
    float out[8];
    _mm256_storeu_ps(out, accf);
    for (int r = 0; r < 2; r++)
        for (int c = 0; c < 4; c++)
            y[c * ys + r] = out[4 * r + c];
}

/* Two rows by four columns of q6_k_tiled_dot at once. Each weight chunk is
 * decoded once for the four columns and each activation chunk loaded once for
 * the two rows; s1 takes the -32 offset from the codes, as the one-output
 * kernel does (never from the bsums), and the float steps run
 * in eight independent lanes, one output each, as the one-output kernel runs
 * them: r = d * (float)s1, acc = fma(r, d8, acc) from +0, blocks in order. */
__attribute__((target("avx2,f16c,fma")))
static void q6k_tile24_avx2(const uint8_t *w, size_t w_row, const uint8_t *act, size_t a_row, size_t nb, float *y,
                            size_t ys)
{
    const float *h16 = q8_f16_table();
    const __m256i m15 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3), b32 = _mm256_set1_epi8(32);
    __m256 accf = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++) {
        const uint8_t *wr[2] = { w + i * Q6_K_BYTES, w + w_row + i * Q6_K_BYTES };
        const uint8_t *ac[4];
        for (int c = 0; c < 4; c++)
            ac[c] = act + c * a_row + i * Q8_K_BYTES;
        __m128i sc[2];
        __m256i acc[8];
        for (int r = 0; r < 2; r++)
            sc[r] = _mm_loadu_si128((const __m128i *)(wr[r] + 192));
        for (int j = 0; j < 8; j++)
            acc[j] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int hf = 0; hf < 2; hf++)
#pragma GCC unroll 4
            for (int ch = 0; ch < 4; ch++) {
                const int k = 8 * hf + 2 * ch; /* scales k and k+1 */
                const __m128i pick = _mm_set_epi64x((long long)(0x0101010101010101ULL * (uint64_t)(k + 1)),
                                                    (long long)(0x0101010101010101ULL * (uint64_t)k));
                __m256i v[2], s16[2];
#pragma GCC unroll 2
                for (int r = 0; r < 2; r++) {
                    const __m256i b = _mm256_loadu_si256((const __m256i *)(wr[r] + 64 * hf + 32 * (ch & 1)));
                    const __m256i bh = _mm256_loadu_si256((const __m256i *)(wr[r] + 128 + 32 * hf));
                    const __m256i lo = ch < 2 ? _mm256_and_si256(b, m15) : _mm256_and_si256(_mm256_srli_epi16(b, 4), m15);
                    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bh, 2 * ch), m3);
                    v[r] = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
                    s16[r] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc[r], pick));
                }
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    const __m256i q8 = _mm256_loadu_si256((const __m256i *)(ac[c] + 4 + 128 * hf + 32 * ch));
                    const __m256i off = _mm256_maddubs_epi16(b32, q8); /* 32 * (pair sums of q8) */
#pragma GCC unroll 2
                    for (int r = 0; r < 2; r++) {
                        /* (q - 32) . q8 per pair: within int16 (|31 * 128 * 2| and 32 * 128 * 2 apart) */
                        const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(v[r], q8), off);
                        acc[4 * r + c] = _mm256_add_epi32(acc[4 * r + c], _mm256_madd_epi16(s16[r], p));
                    }
                }
            }
        const __m256i s1 = kt_hsum8x8(acc);
        const float d0 = h16[q8_rd16(wr[0] + 208)], d1 = h16[q8_rd16(wr[1] + 208)];
        const __m256 dv = _mm256_setr_ps(d0, d0, d0, d0, d1, d1, d1, d1);
        const __m256 d8 = kt_tile_d8(ac);
        accf = _mm256_fmadd_ps(_mm256_mul_ps(dv, _mm256_cvtepi32_ps(s1)), d8, accf);
    }
    kt_tile_store(accf, y, ys);
}
#endif

#if Q8_X86
/* Two rows by four columns of q4_k_tiled_dot / q5_k_tiled_dot at once: each
 * 32-value piece of a row decoded once for the four columns, each activation
 * piece loaded once for the two rows; s1 and s2 the one-output kernel's exact
 * integers (s2: the mins against the bsum pairs, widened to 32 bits), the
 * float steps of kt_step in eight independent lanes. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void q45k_tile24_avx2(const uint8_t *w, size_t w_row, const uint8_t *act, size_t a_row, size_t nb,
                                    float *y, size_t ys, int five)
{
    const float *h16 = q8_f16_table();
    const size_t wb = five ? Q5_K_BYTES : Q4_K_BYTES;
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    const __m128i mpairs = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    __m256 accf = _mm256_setzero_ps();
    for (size_t i = 0; i < nb; i++) {
        const uint8_t *wr[2] = { w + i * wb, w + w_row + i * wb };
        const uint8_t *ac[4];
        for (int c = 0; c < 4; c++)
            ac[c] = act + c * a_row + i * Q8_K_BYTES;
        __m256i scales[2], mins2[2], hb[2];
        for (int r = 0; r < 2; r++) {
            uint8_t u[16];
            k4_pack(wr[r] + 4, u);
            const __m128i uv = _mm_loadu_si128((const __m128i *)u);
            scales[r] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(uv));
            mins2[r] = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(uv, mpairs));
            hb[r] = five ? _mm256_loadu_si256((const __m256i *)(wr[r] + 16)) : _mm256_setzero_si256();
        }
        __m256i acc[8], accm[8];
        for (int j = 0; j < 8; j++)
            acc[j] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int g = 0; g < 4; g++)
#pragma GCC unroll 2
            for (int half = 0; half < 2; half++) {
                const int lo_ = 4 * g + 2 * half;
                const __m256i pick = _mm256_set1_epi16((short)((lo_ + 1) << 8 | lo_));
                __m256i v[2], sv[2];
#pragma GCC unroll 2
                for (int r = 0; r < 2; r++) {
                    const __m256i bits = _mm256_loadu_si256((const __m256i *)(wr[r] + (five ? 48 : 16) + 32 * g));
                    v[r] = half ? _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4) : _mm256_and_si256(bits, m4);
                    if (five)
                        v[r] = _mm256_add_epi8(v[r], _mm256_slli_epi16(
                                                         _mm256_and_si256(_mm256_srli_epi16(hb[r], 2 * g + half), one), 4));
                    sv[r] = _mm256_shuffle_epi8(scales[r], pick);
                }
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    const __m256i q8 = _mm256_loadu_si256((const __m256i *)(ac[c] + 4 + 64 * g + 32 * half));
#pragma GCC unroll 2
                    for (int r = 0; r < 2; r++)
                        acc[4 * r + c] = _mm256_add_epi32(acc[4 * r + c],
                                                          _mm256_madd_epi16(sv[r], _mm256_maddubs_epi16(v[r], q8)));
                }
            }
        for (int c = 0; c < 4; c++) {
            const __m256i bs = _mm256_loadu_si256((const __m256i *)(ac[c] + 260));
            for (int r = 0; r < 2; r++)
                accm[4 * r + c] = _mm256_madd_epi16(bs, mins2[r]);
        }
        const __m256 s1 = _mm256_cvtepi32_ps(kt_hsum8x8(acc)), s2 = _mm256_cvtepi32_ps(kt_hsum8x8(accm));
        const float d0 = h16[q8_rd16(wr[0])], d1 = h16[q8_rd16(wr[1])];
        const float m0 = h16[q8_rd16(wr[0] + 2)], m1 = h16[q8_rd16(wr[1] + 2)];
        const __m256 dv = _mm256_setr_ps(d0, d0, d0, d0, d1, d1, d1, d1);
        const __m256 mv = _mm256_setr_ps(m0, m0, m0, m0, m1, m1, m1, m1);
        const __m256 d8 = kt_tile_d8(ac);
        const __m256 rr = _mm256_fnmadd_ps(mv, s2, _mm256_mul_ps(dv, s1));
        accf = _mm256_fmadd_ps(rr, d8, accf);
    }
    kt_tile_store(accf, y, ys);
}

__attribute__((target("avx2,f16c,fma")))
static void q4k_tile24_avx2(const uint8_t *w, size_t w_row, const uint8_t *act, size_t a_row, size_t nb, float *y,
                            size_t ys)
{
    q45k_tile24_avx2(w, w_row, act, a_row, nb, y, ys, 0);
}

__attribute__((target("avx2,f16c,fma")))
static void q5k_tile24_avx2(const uint8_t *w, size_t w_row, const uint8_t *act, size_t a_row, size_t nb, float *y,
                            size_t ys)
{
    q45k_tile24_avx2(w, w_row, act, a_row, nb, y, ys, 1);
}
#endif

k_tile_fn q4_k_tiled_tile(void)
{
#if Q8_X86
    if (q8_simd())
        return q4k_tile24_avx2;
#endif
    return NULL;
}

k_tile_fn q5_k_tiled_tile(void)
{
#if Q8_X86
    if (q8_simd())
        return q5k_tile24_avx2;
#endif
    return NULL;
}

k_tile_fn q6_k_tiled_tile(void)
{
#if Q8_X86
    if (q8_simd())
        return q6k_tile24_avx2;
#endif
    return NULL;
}

float q4_k_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return q45k_tiled_avx2(q8_f16_table(), w, act, nblocks, 0);
#endif
    return q45k_tiled_portable(w, act, nblocks, 0);
}

float q5_k_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return q45k_tiled_avx2(q8_f16_table(), w, act, nblocks, 1);
#endif
    return q45k_tiled_portable(w, act, nblocks, 1);
}

float q6_k_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return q6k_tiled_avx2(q8_f16_table(), w, act, nblocks);
#endif
    return q6k_tiled_portable(w, act, nblocks);
}

float q4_k_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return q4k_avx2(q8_f16_table(), w, act, nblocks);
#endif
    return q4k_portable(w, act, nblocks);
}

float q5_k_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return q5k_avx2(q8_f16_table(), w, act, nblocks);
#endif
    return q5k_portable(w, act, nblocks);
}

float q6_k_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return q6k_avx2(q8_f16_table(), w, act, nblocks);
#endif
    return q6k_portable(w, act, nblocks);
}
