/*
 * repack.c -- b11669's interleaved Q4_K layout (q4_K_8x8) and its one-column
 * product, bit-exact with the haswell ggml_gemv_q4_K_8x8_q8_K (see repack.h
 * for the float order). AVX2+F16C+FMA chosen at run time (q8_simd()), the
 * portable C gives the same bits.
 */
#include "ops/ops_util.h"
#include "ops/repack.h"

#include "ops/f16.h"
#include "ops/iq4.h"
#include "ops/q4_k.h"
#include "ops/q8_0.h"

#include <math.h>
#include <stdio.h>
#include <string.h>


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

static void q4k_gemv_portable(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act, float *y)
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
/* Sub-block s of one Q4_Kx8 block against an activation whose 8-byte chunk
 * c of sub-block s sits at q8 + cstride*(4s + c) (8 for a plain Q8_K row,
 * 32 for one column of a Q8_Kx4 block): the 8 rows' scale * (q4 . q8) in
 * lanes 0..7, exact. Each chunk is broadcast to the four 64-bit lanes and
 * meets four rows' chunks (rows 0-3 and 4-7 in two registers); 16-bit sums
 * over the 4 chunks (at most 4*2*15*128 = 15360), times the row's scale into
 * 32 bits, then each row's two 32-bit halves are added. */
/* The 8 rows' scales of one sub-block as the 16-bit multipliers of the
 * rows' four 16-bit sums: s03 = [sc0 x4 | sc1 x4 | sc2 x4 | sc3 x4], s47 the
 * same for rows 4-7. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void x8_scale_vecs(const uint8_t sc[8], __m256i *s03, __m256i *s47)
{
    const __m256i w = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
    *s03 = _mm256_shuffle_epi8(w, _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3,
                                                   4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7));
    *s47 = _mm256_shuffle_epi8(w, _mm256_setr_epi8(8, 9, 8, 9, 8, 9, 8, 9, 10, 11, 10, 11, 10, 11, 10, 11,
                                                   12, 13, 12, 13, 12, 13, 12, 13, 14, 15, 14, 15, 14, 15, 14, 15));
}

/* The rows' 16-bit sums (p03: rows 0-3, four lanes each; p47) times their
 * scales into one int32 per row, rows 0..7 in order (exact). */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i x8_scaled_sum(__m256i p03, __m256i p47, __m256i s03, __m256i s47)
{
    /* hadd gives [r0 r1 r4 r5 | r2 r3 r6 r7]; the permute puts r0..r7 in order */
    const __m256i h = _mm256_hadd_epi32(_mm256_madd_epi16(p03, s03), _mm256_madd_epi16(p47, s47));
    return _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
}

__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i x8_subdot_avx2(const uint8_t *blk, const uint8_t *q8, size_t cstride, int s,
                                     const uint8_t sc[8])
{
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const uint8_t *q = blk + X8_QS + 256 * (s / 2);
    const int shift = (s & 1) * 4;
    __m256i p03 = _mm256_setzero_si256(), p47 = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        long long a8;
        memcpy(&a8, q8 + cstride * (size_t)(4 * s + c), 8);
        const __m256i av = _mm256_set1_epi64x(a8);
        const __m256i w03 = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(q + 64 * c)), shift), m4);
        const __m256i w47 = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(q + 64 * c + 32)), shift), m4);
        p03 = _mm256_add_epi16(p03, _mm256_maddubs_epi16(w03, av));
        p47 = _mm256_add_epi16(p47, _mm256_maddubs_epi16(w47, av));
    }
    __m256i s03, s47;
    x8_scale_vecs(sc, &s03, &s47);
    return x8_scaled_sum(p03, p47, s03, s47);
}

__attribute__((target("avx2,f16c,fma")))
static void q4k_gemv_avx2(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act, float *y)
{
    for (size_t g = 0; g < rows / 8; g++, y += 8) {
        __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *blk = wr + (g * nb + b) * Q4_KX8_BYTES, *a = act + b * Q8_K_BYTES;
            uint8_t sc[8][8], mn[8][8]; /* [sub-block][row] */
            __m256i isum = _mm256_setzero_si256(), imin = _mm256_setzero_si256();
            for (int s = 0; s < 8; s++) {
                k4_scales(blk + X8_SCALES + 12 * s, sc[s], mn[s]);
                /* x8_mins' integers: the 16-bit pair sum of the bsums times each row's min (exact in int32) */
                const int16_t q8s = (int16_t)(uint16_t)((uint16_t)rd_i16(a + 260 + 4 * s) +
                                                         (uint16_t)rd_i16(a + 262 + 4 * s));
                imin = _mm256_add_epi32(imin, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)mn[s])),
                                                                 _mm256_set1_epi32(q8s)));
                isum = _mm256_add_epi32(isum, x8_subdot_avx2(blk, a + 4, 8, s, sc[s]));
            }
            const __m256 ad = _mm256_set1_ps(rd_f32(a));
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + X8_D)));
            const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + X8_DMIN)));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, ad), acc);
            accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin), _mm256_mul_ps(dm, ad), accm);
        }
        _mm256_storeu_ps(y, _mm256_sub_ps(acc, accm));
    }
}
#endif

void q4_k_x8_gemv(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act, float *y)
{
#if Q8_X86
    if (q8_simd()) {
        q4k_gemv_avx2(wr, rows, nb, act, y);
        return;
    }
#endif
    q4k_gemv_portable(wr, rows, nb, act, y);
}

/* ---------------------------------------------------------------- Q8_K 4x8 quantizer */

static inline float absf(float v) { uint32_t u; memcpy(&u, &v, 4); u &= 0x7fffffffu; memcpy(&v, &u, 4); return v; }

/* One column's iscale for one super-block (256 floats at x), as the AVX2
 * ggml_quantize_mat_q8_K_4x8: lane L of the running |x| maximum folds
 * x[8t+L], t = 0..31, in order; a lane's "positive" flag is set when a
 * non-negative x equals its maximum and cleared when the maximum grows past
 * it (compared after each 32 values); amax is q8_0's vmaxps tree over the
 * lanes; iscale = -127/amax when a flagged lane holds amax, else 127/amax
 * (0 when amax is 0). Returns iscale; *d = 1/iscale (0 when amax is 0). */
static float x4_iscale(const float *x, float *d)
{
    float m[8];
    int pos[8];
    for (int L = 0; L < 8; L++) {
        float v = absf(x[L]);
        for (int t = 1; t < 4; t++)
            v = maxps1(v, absf(x[8 * t + L]));
        int p = 0;
        for (int t = 0; t < 4; t++)
            p |= v == x[8 * t + L];
        for (int sb = 1; sb < 8; sb++) {
            const float prev = v;
            for (int t = 0; t < 4; t++)
                v = maxps1(v, absf(x[32 * sb + 8 * t + L]));
            p &= prev == v;
            for (int t = 0; t < 4; t++)
                p |= v == x[32 * sb + 8 * t + L];
        }
        m[L] = v;
        pos[L] = p;
    }
    const float h0 = maxps1(m[4], m[0]), h1 = maxps1(m[5], m[1]), h2 = maxps1(m[6], m[2]), h3 = maxps1(m[7], m[3]);
    const float amax = maxps1(maxps1(h0, h2), maxps1(h1, h3));
    int flagged = 0;
    for (int L = 0; L < 8; L++)
        flagged |= pos[L] && amax == m[L];
    float is = amax != 0.0f ? 127.0f / amax : 0.0f;
    if (flagged)
        is = amax != 0.0f ? -127.0f / amax : 0.0f;
    *d = amax != 0.0f ? 1.0f / is : 0.0f;
    return is;
}

/* bsums[16k + 4r + i] of a Q8_Kx4 block from its quants. */
static void x4_bsums(uint8_t *out)
{
    const int8_t *qs = (const int8_t *)(out + 16);
    for (int kk = 0; kk < 4; kk++)
        for (int r = 0; r < 4; r++)
            for (int i = 0; i < 4; i++) {
                int sum = 0;
                for (int u = 64 * kk + 16 * i; u < 64 * kk + 16 * i + 16; u++)
                    sum += qs[32 * (u / 8) + 8 * r + u % 8];
                uint8_t *p = out + 16 + 1024 + 2 * (16 * kk + 4 * r + i);
                p[0] = (uint8_t)sum;
                p[1] = (uint8_t)((unsigned)sum >> 8);
            }
}

static void q8k4_portable(const float *x, size_t k, uint8_t *out)
{
    for (size_t b = 0; b < k / QK_K_BLOCK; b++, out += Q8_KX4_BYTES) {
        float is[4];
        for (int r = 0; r < 4; r++) {
            float d;
            is[r] = x4_iscale(x + (size_t)r * k + 256 * b, &d);
            memcpy(out + 4 * r, &d, 4);
        }
        int8_t *qs = (int8_t *)(out + 16);
        for (int j = 0; j < 32; j++)
            for (int r = 0; r < 4; r++)
                for (int t = 0; t < 8; t++)
                    qs[32 * j + 8 * r + t] = cvt_pack(nearbyintf(x[(size_t)r * k + 256 * b + 8 * j + t] * is[r]));
        x4_bsums(out);
    }
}

#if Q8_X86
/* The same with ggml's vector steps: the 8-lane maximum and the lanes'
 * "positive" masks (vcmpeqps, ordered), vmovmskps, the divisions in scalar,
 * then the quants of the four columns 8 values at a time, packed and
 * permuted into one 32-byte store. */
__attribute__((target("avx2,f16c,fma")))
static void q8k4_avx2(const float *x, size_t k, uint8_t *out)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (size_t b = 0; b < k / QK_K_BLOCK; b++, out += Q8_KX4_BYTES) {
        __m256 isv[4];
        for (int r = 0; r < 4; r++) {
            const float *xr = x + (size_t)r * k + 256 * b;
            __m256 v[4], m, mask;
            for (int t = 0; t < 4; t++)
                v[t] = _mm256_loadu_ps(xr + 8 * t);
            m = _mm256_max_ps(_mm256_and_ps(v[0], absmask), _mm256_and_ps(v[1], absmask));
            m = _mm256_max_ps(m, _mm256_and_ps(v[2], absmask));
            m = _mm256_max_ps(m, _mm256_and_ps(v[3], absmask));
            mask = _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(m, v[0], _CMP_EQ_OQ), _mm256_cmp_ps(m, v[1], _CMP_EQ_OQ)),
                                _mm256_or_ps(_mm256_cmp_ps(m, v[2], _CMP_EQ_OQ), _mm256_cmp_ps(m, v[3], _CMP_EQ_OQ)));
            for (int sb = 1; sb < 8; sb++) {
                const __m256 prev = m;
                for (int t = 0; t < 4; t++) {
                    v[t] = _mm256_loadu_ps(xr + 32 * sb + 8 * t);
                    m = _mm256_max_ps(m, _mm256_and_ps(v[t], absmask));
                }
                mask = _mm256_and_ps(mask, _mm256_cmp_ps(prev, m, _CMP_EQ_OQ));
                const __m256 cur = _mm256_or_ps(
                    _mm256_or_ps(_mm256_cmp_ps(m, v[0], _CMP_EQ_OQ), _mm256_cmp_ps(m, v[1], _CMP_EQ_OQ)),
                    _mm256_or_ps(_mm256_cmp_ps(m, v[2], _CMP_EQ_OQ), _mm256_cmp_ps(m, v[3], _CMP_EQ_OQ)));
                mask = _mm256_or_ps(mask, cur);
            }
            __m128 q = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
            q = _mm_max_ps(q, _mm_movehl_ps(q, q));
            q = _mm_max_ss(q, _mm_movehdup_ps(q));
            const float amax = _mm_cvtss_f32(q);
            const int flagged = _mm256_movemask_ps(_mm256_and_ps(mask, _mm256_cmp_ps(_mm256_set1_ps(amax), m, _CMP_EQ_OQ)));
            float is = amax != 0.0f ? 127.0f / amax : 0.0f;
            if (flagged)
                is = amax != 0.0f ? -127.0f / amax : 0.0f;
            const float d = amax != 0.0f ? 1.0f / is : 0.0f;
            memcpy(out + 4 * r, &d, 4);
            isv[r] = _mm256_set1_ps(is);
        }
        for (int j = 0; j < 32; j++) {
            __m256i i[4];
            for (int r = 0; r < 4; r++)
                i[r] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + (size_t)r * k + 256 * b + 8 * j), isv[r]));
            const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
            _mm256_storeu_si256((__m256i *)(out + 16 + 32 * j), _mm256_permutevar8x32_epi32(p, order));
        }
        x4_bsums(out);
    }
}
#endif

void q8_k_quantize4x8(const float *x, size_t k, uint8_t *out)
{
#if Q8_X86
    if (q8_simd()) {
        q8k4_avx2(x, k, out);
        return;
    }
#endif
    q8k4_portable(x, k, out);
}

/* ---------------------------------------------------------------- gemm */

/* Column c of a Q8_Kx4 block: the pairwise bsum sums of sub-blocks 2sb and
 * 2sb+1 (vphaddw: 16-bit wrap). */
static void x4_q8s(const uint8_t *a4, int c, int sb, int16_t q[2])
{
    const uint8_t *p = a4 + 16 + 1024 + 2 * (16 * sb + 4 * c);
    q[0] = (int16_t)(uint16_t)((uint16_t)rd_i16(p) + (uint16_t)rd_i16(p + 2));
    q[1] = (int16_t)(uint16_t)((uint16_t)rd_i16(p + 4) + (uint16_t)rd_i16(p + 6));
}

static void gemm_portable(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act4, float *y, size_t ys)
{
    for (size_t g = 0; g < rows / 8; g++)
        for (int c = 0; c < 4; c++) {
            float acc[8] = {0}, accm[8] = {0};
            for (size_t b = 0; b < nb; b++) {
                const uint8_t *blk = wr + (g * nb + b) * Q4_KX8_BYTES, *a4 = act4 + b * Q8_KX4_BYTES;
                const int8_t *q8 = (const int8_t *)(a4 + 16);
                const float ad = rd_f32(a4 + 4 * c);
                uint8_t sc[8][8], mn[8][8]; /* [sub-block][row] */
                for (int s = 0; s < 8; s++)
                    k4_scales(blk + X8_SCALES + 12 * s, sc[s], mn[s]);
                for (int sb = 0; sb < 4; sb++) {
                    int16_t q8s[2];
                    x4_q8s(a4, c, sb, q8s);
                    for (int j = 0; j < 8; j++) {
                        int32_t isb = 0;
                        for (int h = 0; h < 2; h++) {
                            const int s = 2 * sb + h;
                            int32_t dot = 0;
                            for (int v = 0; v < 32; v++) {
                                const int u = 32 * s + v; /* value index in the super-block */
                                const uint8_t q = blk[X8_QS + 64 * (4 * sb + v / 8) + 8 * j + v % 8];
                                dot += (h ? q >> 4 : q & 0xF) * q8[32 * (u / 8) + 8 * c + u % 8];
                            }
                            isb += sc[s][j] * dot;
                        }
                        const int32_t imin = (int32_t)((uint32_t)(mn[2 * sb][j] * q8s[0]) + (uint32_t)(mn[2 * sb + 1][j] * q8s[1]));
                        const float dj = f16_to_f32(q8_rd16(blk + X8_D + 2 * j));
                        const float mj = f16_to_f32(q8_rd16(blk + X8_DMIN + 2 * j));
                        acc[j] = fmaf((float)isb, dj * ad, acc[j]);
                        accm[j] = fmaf((float)imin, mj * ad, accm[j]);
                    }
                }
            }
            for (int j = 0; j < 8; j++)
                y[(size_t)c * ys + 8 * g + (size_t)j] = acc[j] - accm[j];
        }
}

#if Q8_X86
/* Each sub-block's weights are decoded once for the four columns (chunk by
 * chunk), and its scales widened once; the integers are x8_subdot_avx2's
 * (exact), the float steps ggml_gemm_q4_K_8x8_q8_K's, column by column. */
__attribute__((target("avx2,f16c,fma")))
static void gemm_avx2(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act4, float *y, size_t ys)
{
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (size_t g = 0; g < rows / 8; g++) {
        __m256 acc[4], accm[4];
        for (int c = 0; c < 4; c++)
            acc[c] = accm[c] = _mm256_setzero_ps();
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *blk = wr + (g * nb + b) * Q4_KX8_BYTES, *a4 = act4 + b * Q8_KX4_BYTES;
            uint8_t sc[8][8], mn[8][8];
            for (int s = 0; s < 8; s++)
                k4_scales(blk + X8_SCALES + 12 * s, sc[s], mn[s]);
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + X8_D)));
            const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(blk + X8_DMIN)));
            __m256 ad[4];
            for (int c = 0; c < 4; c++)
                ad[c] = _mm256_set1_ps(rd_f32(a4 + 4 * c));
            for (int sb = 0; sb < 4; sb++) {
                __m256i isb[4];
                for (int h = 0; h < 2; h++) {
                    const int s = 2 * sb + h, shift = 4 * h;
                    const uint8_t *q = blk + X8_QS + 256 * sb;
                    __m256i p03[4], p47[4];
#pragma GCC unroll 4
                    for (int c = 0; c < 4; c++)
                        p03[c] = p47[c] = _mm256_setzero_si256();
#pragma GCC unroll 4
                    for (int ch = 0; ch < 4; ch++) {
                        const __m256i w03 = _mm256_and_si256(
                            _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(q + 64 * ch)), shift), m4);
                        const __m256i w47 = _mm256_and_si256(
                            _mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(q + 64 * ch + 32)), shift), m4);
#pragma GCC unroll 4
                        for (int c = 0; c < 4; c++) {
                            long long a8;
                            memcpy(&a8, a4 + 16 + 8 * c + 32 * (size_t)(4 * s + ch), 8);
                            const __m256i av = _mm256_set1_epi64x(a8);
                            p03[c] = _mm256_add_epi16(p03[c], _mm256_maddubs_epi16(w03, av));
                            p47[c] = _mm256_add_epi16(p47[c], _mm256_maddubs_epi16(w47, av));
                        }
                    }
                    __m256i s03, s47;
                    x8_scale_vecs(sc[s], &s03, &s47);
#pragma GCC unroll 4
                    for (int c = 0; c < 4; c++) {
                        const __m256i v = x8_scaled_sum(p03[c], p47[c], s03, s47);
                        isb[c] = h ? _mm256_add_epi32(isb[c], v) : v;
                    }
                }
                const __m256i m0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)mn[2 * sb]));
                const __m256i m1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)mn[2 * sb + 1]));
                for (int c = 0; c < 4; c++) {
                    int16_t q8s[2];
                    x4_q8s(a4, c, sb, q8s);
                    const __m256i imin = _mm256_add_epi32(_mm256_mullo_epi32(m0, _mm256_set1_epi32(q8s[0])),
                                                          _mm256_mullo_epi32(m1, _mm256_set1_epi32(q8s[1])));
                    acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isb[c]), _mm256_mul_ps(d, ad[c]), acc[c]);
                    accm[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin), _mm256_mul_ps(dm, ad[c]), accm[c]);
                }
            }
        }
        for (int c = 0; c < 4; c++)
            _mm256_storeu_ps(y + (size_t)c * ys + 8 * g, _mm256_sub_ps(acc[c], accm[c]));
    }
}
#endif

void q4_k_x8_gemm4(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act4, float *y, size_t y_stride)
{
#if Q8_X86
    if (q8_simd()) {
        gemm_avx2(wr, rows, nb, act4, y, y_stride);
        return;
    }
#endif
    gemm_portable(wr, rows, nb, act4, y, y_stride);
}

/* ---------------------------------------------------------------- Q4_0 8x8 */

#define Q40X8_QS 16 /* d[8] (f16) first */

/* Repacks a plain matrix of 32-value blocks of 18 bytes (f16 d, 16 bytes of
 * codes: Q4_0 or IQ4_NL) into 8x8 groups, every code byte XOR `flip` (Q4_0:
 * 0x88, IQ4_NL: 0). */
static int x8_repack_b32(const char *what, uint8_t flip, const uint8_t *w, size_t w_len, size_t rows, size_t k,
                         uint8_t *out, size_t out_len, char *err, size_t errlen)
{
    if (rows % 8 != 0 || k % 32 != 0) {
        if (err)
            snprintf(err, errlen, "%s repacking needs rows in eights and whole blocks, not %zu x %zu", what, rows,
                     k);
        return -1;
    }
    size_t nb = k / 32;
    if (rows && nb > SIZE_MAX / 18 / rows) {
        if (err)
            snprintf(err, errlen, "%s matrix of %zu x %zu is too large", what, rows, k);
        return -1;
    }
    size_t need = rows * nb * 18;
    if (w_len < need || out_len < need) {
        if (err)
            snprintf(err, errlen, "%s repack of %zu x %zu needs %zu bytes in and out, given %zu and %zu", what,
                     rows, k, need, w_len, out_len);
        return -1;
    }
    if (need && (!w || !out)) {
        if (err)
            snprintf(err, errlen, "%s repack given a NULL buffer", what);
        return -1;
    }
    for (size_t g = 0; g < rows / 8; g++)
        for (size_t x = 0; x < nb; x++) {
            uint8_t *o = out + (g * nb + x) * Q4_0X8_BYTES;
            for (int i = 0; i < 8; i++)
                memcpy(o + 2 * i, w + ((8 * g + (size_t)i) * nb + x) * 18, 2);
            /* 8-byte piece i: row i % 8, bytes 8 * (i / 8) */
            for (int i = 0; i < 16; i++) {
                const uint8_t *src = w + ((8 * g + (size_t)(i % 8)) * nb + x) * 18 + 2 + 8 * (i / 8);
                for (int t = 0; t < 8; t++)
                    o[Q40X8_QS + 8 * i + t] = src[t] ^ flip;
            }
        }
    return 0;
}

int q4_0_repack8(const uint8_t *w, size_t w_len, size_t rows, size_t k, uint8_t *out, size_t out_len,
                 char *err, size_t errlen)
{
    return x8_repack_b32("Q4_0", 0x88, w, w_len, rows, k, out, out_len, err, errlen);
}

int iq4_nl_repack8(const uint8_t *w, size_t w_len, size_t rows, size_t k, uint8_t *out, size_t out_len,
                   char *err, size_t errlen)
{
    return x8_repack_b32("IQ4_NL", 0, w, w_len, rows, k, out, out_len, err, errlen);
}

void q8_0_quantize4x8(const float *x, size_t k, uint8_t *out)
{
    for (size_t b = 0; b < k / 32; b++, out += Q8_0X4_BYTES) {
        uint8_t blk[4][34];
        for (int r = 0; r < 4; r++) {
            q8_0_quantize_blocks(x + (size_t)r * k + 32 * b, blk[r], 1);
            memcpy(out + 2 * r, blk[r], 2);
        }
        for (int j = 0; j < 4; j++)
            for (int r = 0; r < 4; r++)
                memcpy(out + 8 + 32 * j + 8 * r, blk[r] + 2 + 8 * j, 8);
    }
}

/* The code-to-value tables of the 8x8 forms of 32-value blocks: Q4_0's
 * flipped nibbles read as signed 4-bit numbers (ggml's signextendlut), and
 * IQ4_NL's values (kvalues_iq4nl). */
static const int8_t x8_lut_q40[16] = { 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1 };

/* Weight value v (0..31) of row j in a Q4_0x8 / IQ4_NLx8 block. */
static inline int q40x8_val(const int8_t *lut, const uint8_t *blk, int j, int v)
{
    const uint8_t byte = blk[Q40X8_QS + 64 * ((v % 16) / 8) + 8 * j + v % 8];
    return lut[v < 16 ? byte & 0xF : byte >> 4];
}

/* vpsignb(y, x) as a byte: -y when x < 0 (wrapping: -(-128) = -128), 0 when x = 0. */
static inline int sign8(int y, int x) { return x < 0 ? (int8_t)(uint8_t)(-y) : x == 0 ? 0 : y; }

static void q40_gemv_portable(const int8_t *lut, const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act, float *y)
{
    for (size_t g = 0; g < rows / 8; g++)
        for (int j = 0; j < 8; j++) {
            float acc = 0.0f;
            for (size_t b = 0; b < nb; b++) {
                const uint8_t *blk = wr + (g * nb + b) * Q4_0X8_BYTES, *a = act + b * 34;
                int32_t isum = 0;
                for (int v = 0; v < 32; v++) {
                    const int wv = q40x8_val(lut, blk, j, v);
                    isum += (wv < 0 ? -wv : wv) * sign8((int8_t)a[2 + v], wv); /* the weight's sign */
                }
                const float dj = f16_to_f32(q8_rd16(blk + 2 * j)), da = f16_to_f32(q8_rd16(a));
                acc = fmaf((float)isum, dj * da, acc);
            }
            y[8 * g + (size_t)j] = acc;
        }
}

static void q40_gemm_portable(const int8_t *lut, const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act4, float *y, size_t ys)
{
    for (size_t g = 0; g < rows / 8; g++)
        for (int c = 0; c < 4; c++)
            for (int j = 0; j < 8; j++) {
                float acc = 0.0f;
                for (size_t b = 0; b < nb; b++) {
                    const uint8_t *blk = wr + (g * nb + b) * Q4_0X8_BYTES, *a4 = act4 + b * Q8_0X4_BYTES;
                    int32_t isum = 0;
                    for (int v = 0; v < 32; v++) {
                        const int av = (int8_t)a4[8 + 32 * (v / 8) + 8 * c + v % 8];
                        /* the activation's sign: |a| as an unsigned byte (128 for -128) */
                        isum += (av < 0 ? -av : av) * sign8(q40x8_val(lut, blk, j, v), av);
                    }
                    const float dj = f16_to_f32(q8_rd16(blk + 2 * j)), da = f16_to_f32(q8_rd16(a4 + 2 * c));
                    acc = fmaf((float)isum, dj * da, acc);
                }
                y[(size_t)c * ys + 8 * g + (size_t)j] = acc;
            }
}

#if Q8_X86
/* One Q4_0x8 block against one 32-value activation whose 8-byte chunk c
 * sits at a + cstride*c: the 8 rows' exact sums in lanes 0..7. wsign: the
 * gemv's vpsignb on the weight (an activation of -128 against a negative
 * weight wraps), else the gemm's on the activation (exact). */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256i q40x8_dot_avx2(__m256i lut, const uint8_t *blk, const uint8_t *a, size_t cstride, int wsign,
                                     int narrow)
{
    const __m256i m4 = _mm256_set1_epi8(0xF), ones = _mm256_set1_epi16(1);
    __m256i s03 = _mm256_setzero_si256(), s47 = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        const uint8_t *q = blk + Q40X8_QS + 64 * (c & 1);
        const int shift = (c >> 1) * 4;
        long long a8;
        memcpy(&a8, a + cstride * (size_t)c, 8);
        const __m256i av = _mm256_set1_epi64x(a8);
        __m256i w03 = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)q), shift), m4);
        __m256i w47 = _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(q + 32)), shift), m4);
        w03 = _mm256_shuffle_epi8(lut, w03);
        w47 = _mm256_shuffle_epi8(lut, w47);
        __m256i p03, p47;
        if (wsign) {
            p03 = _mm256_maddubs_epi16(_mm256_sign_epi8(w03, w03), _mm256_sign_epi8(av, w03));
            p47 = _mm256_maddubs_epi16(_mm256_sign_epi8(w47, w47), _mm256_sign_epi8(av, w47));
        } else {
            p03 = _mm256_maddubs_epi16(_mm256_sign_epi8(av, av), _mm256_sign_epi8(w03, av));
            p47 = _mm256_maddubs_epi16(_mm256_sign_epi8(av, av), _mm256_sign_epi8(w47, av));
        }
        if (narrow) { /* Q4_0's codes: 16-bit sums over the 4 chunks, at most 4 * 2 * 8 * 128 = 8192 (exact) */
            s03 = _mm256_add_epi16(s03, p03);
            s47 = _mm256_add_epi16(s47, p47);
        } else {
            s03 = _mm256_add_epi32(s03, _mm256_madd_epi16(p03, ones));
            s47 = _mm256_add_epi32(s47, _mm256_madd_epi16(p47, ones));
        }
    }
    if (narrow) {
        s03 = _mm256_madd_epi16(s03, ones);
        s47 = _mm256_madd_epi16(s47, ones);
    }
    const __m256i h = _mm256_hadd_epi32(s03, s47);
    return _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
}

__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void q40_gemv_avx2_(const int8_t *lt, const float *h, const uint8_t *wr, size_t rows, size_t nb,
                                  const uint8_t *act, float *y, int narrow)
{
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lt));
    for (size_t g = 0; g < rows / 8; g++) {
        __m256 acc = _mm256_setzero_ps();
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *blk = wr + (g * nb + b) * Q4_0X8_BYTES, *a = act + b * 34;
            const __m256i isum = q40x8_dot_avx2(lut, blk, a + 2, 8, 1, narrow);
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, _mm256_set1_ps(h[q8_rd16(a)])), acc);
        }
        _mm256_storeu_ps(y + 8 * g, acc);
    }
}

/* The gemm: each chunk of weights decoded once for the four columns; the
 * integers are q40x8_dot_avx2's (exact), the float steps per column. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void q40_gemm_avx2_(const int8_t *lt, const float *h, const uint8_t *wr, size_t rows, size_t nb,
                                  const uint8_t *act4, float *y, size_t ys, int narrow)
{
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)lt));
    const __m256i m4 = _mm256_set1_epi8(0xF), ones = _mm256_set1_epi16(1);
    const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    for (size_t g = 0; g < rows / 8; g++) {
        __m256 acc[4];
        for (int c = 0; c < 4; c++)
            acc[c] = _mm256_setzero_ps();
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *blk = wr + (g * nb + b) * Q4_0X8_BYTES, *a4 = act4 + b * Q8_0X4_BYTES;
            const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)blk));
            __m256i s03[4], s47[4];
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++)
                s03[c] = s47[c] = _mm256_setzero_si256();
#pragma GCC unroll 4
            for (int ch = 0; ch < 4; ch++) {
                const uint8_t *q = blk + Q40X8_QS + 64 * (ch & 1);
                const int shift = (ch >> 1) * 4;
                const __m256i w03 = _mm256_shuffle_epi8(
                    lut, _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)q), shift), m4));
                const __m256i w47 = _mm256_shuffle_epi8(
                    lut, _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i *)(q + 32)), shift), m4));
#pragma GCC unroll 4
                for (int c = 0; c < 4; c++) {
                    long long a8;
                    memcpy(&a8, a4 + 8 + 8 * c + 32 * (size_t)ch, 8);
                    const __m256i av = _mm256_set1_epi64x(a8), aa = _mm256_sign_epi8(av, av);
                    const __m256i p03 = _mm256_maddubs_epi16(aa, _mm256_sign_epi8(w03, av));
                    const __m256i p47 = _mm256_maddubs_epi16(aa, _mm256_sign_epi8(w47, av));
                    if (narrow) { /* as q40x8_dot_avx2 */
                        s03[c] = _mm256_add_epi16(s03[c], p03);
                        s47[c] = _mm256_add_epi16(s47[c], p47);
                    } else {
                        s03[c] = _mm256_add_epi32(s03[c], _mm256_madd_epi16(p03, ones));
                        s47[c] = _mm256_add_epi32(s47[c], _mm256_madd_epi16(p47, ones));
                    }
                }
            }
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m256i hs = narrow ? _mm256_hadd_epi32(_mm256_madd_epi16(s03[c], ones), _mm256_madd_epi16(s47[c], ones))
                                          : _mm256_hadd_epi32(s03[c], s47[c]);
                const __m256i isum = _mm256_permutevar8x32_epi32(hs, order);
                const __m256 da = _mm256_set1_ps(h[q8_rd16(a4 + 2 * c)]);
                acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(d, da), acc[c]);
            }
        }
        for (int c = 0; c < 4; c++)
            _mm256_storeu_ps(y + (size_t)c * ys + 8 * g, acc[c]);
    }
}

/* Q4_0's codes (-8..7) keep 16-bit sums over a block; IQ4_NL's (up to
 * +-127) take them to 32 bits chunk by chunk. */
__attribute__((target("avx2,f16c,fma")))
static void q40_gemv_avx2(const int8_t *lt, const float *h, const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act, float *y)
{
    if (lt == x8_lut_q40)
        q40_gemv_avx2_(lt, h, wr, rows, nb, act, y, 1);
    else
        q40_gemv_avx2_(lt, h, wr, rows, nb, act, y, 0);
}

__attribute__((target("avx2,f16c,fma")))
static void q40_gemm_avx2(const int8_t *lt, const float *h, const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act4, float *y,
                          size_t ys)
{
    if (lt == x8_lut_q40)
        q40_gemm_avx2_(lt, h, wr, rows, nb, act4, y, ys, 1);
    else
        q40_gemm_avx2_(lt, h, wr, rows, nb, act4, y, ys, 0);
}
#endif

static void x8_b32_gemv(const int8_t *lut, const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act, float *y)
{
#if Q8_X86
    if (q8_simd()) {
        q40_gemv_avx2(lut, q8_f16_table(), wr, rows, nb, act, y);
        return;
    }
#endif
    q40_gemv_portable(lut, wr, rows, nb, act, y);
}

static void x8_b32_gemm4(const int8_t *lut, const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act4, float *y,
                         size_t y_stride)
{
#if Q8_X86
    if (q8_simd()) {
        q40_gemm_avx2(lut, q8_f16_table(), wr, rows, nb, act4, y, y_stride);
        return;
    }
#endif
    q40_gemm_portable(lut, wr, rows, nb, act4, y, y_stride);
}

void q4_0_x8_gemv(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act, float *y)
{
    x8_b32_gemv(x8_lut_q40, wr, rows, nb, act, y);
}

void q4_0_x8_gemm4(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act4, float *y, size_t y_stride)
{
    x8_b32_gemm4(x8_lut_q40, wr, rows, nb, act4, y, y_stride);
}

void iq4_nl_x8_gemv(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act, float *y)
{
    x8_b32_gemv(iq4_values(), wr, rows, nb, act, y);
}

void iq4_nl_x8_gemm4(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act4, float *y, size_t y_stride)
{
    x8_b32_gemm4(iq4_values(), wr, rows, nb, act4, y, y_stride);
}

/* ---------------------------------------------------------------- the product */

/* Groups [g0, g1) of 8 rows, every column. */
void x8_mm_rows(void *ctx, size_t g0, size_t g1, int worker)
{
    const x8_mm *m = ctx;
    (void)worker;
    const uint8_t *w = m->wr + g0 * m->gbytes;
    const size_t nr = (g1 - g0) * 8;
    for (size_t c = 0; c < m->n4; c += 4)
        m->gemm4(w, nr, m->nb, m->act4 + c / 4 * m->a4row, m->y + c * m->rows + 8 * g0, m->rows);
    for (size_t c = m->n4; c < m->ncols; c++)
        m->gemv(w, nr, m->nb, m->act1 + (c - m->n4) * m->a1row, m->y + c * m->rows + 8 * g0);
}

/* Per-type geometry: values per block, weight bytes per block, plain and
 * 4-column activation bytes per block. 0 for other types. */
static int x8_geometry(int type, size_t *blk, size_t *wbytes, size_t *a1, size_t *a4)
{
    if (type == Q4_K_TYPE) {
        *blk = QK_K_BLOCK, *wbytes = Q4_K_BYTES, *a1 = Q8_K_BYTES, *a4 = Q8_KX4_BYTES;
        return 1;
    }
    if (type == 2 /* Q4_0 */ || type == IQ4_NL_TYPE) {
        *blk = 32, *wbytes = 18, *a1 = 34, *a4 = Q8_0X4_BYTES;
        return 1;
    }
    return 0;
}

size_t x8_work_bytes(int type, size_t k, size_t ncols)
{
    size_t blk, wb, a1, a4;
    if (!x8_geometry(type, &blk, &wb, &a1, &a4) || k % blk)
        return 0;
    size_t nb = k / blk, n4 = ncols - ncols % 4;
    if (nb > SIZE_MAX / 2 / a4 || (nb && ncols > SIZE_MAX / 2 / (nb * a4)))
        return 0;
    return n4 / 4 * nb * a4 + (ncols - n4) * nb * a1;
}

void x8_quantize_cols(int type, const float *x, size_t k, size_t c0, size_t c1, size_t ncols, uint8_t *act)
{
    size_t blk, wb, a1, a4;
    if (!x8_geometry(type, &blk, &wb, &a1, &a4)) return;
    const size_t nb = k / blk, arow = nb * a1, n4 = ncols - ncols % 4;
    size_t c = c0;
    for (; c + 4 <= c1 && c + 4 <= n4; c += 4) {
        if (type == Q4_K_TYPE)
            q8_k_quantize4x8(x + c * k, k, act + c * arow);
        else
            q8_0_quantize4x8(x + c * k, k, act + c * arow);
    }
    for (; c < c1; c++) {
        if (type == Q4_K_TYPE)
            q8_k_quantize_blocks(x + c * k, act + c * arow, nb);
        else
            q8_0_quantize_blocks(x + c * k, act + c * arow, nb);
    }
}

int x8_mm_init(x8_mm *m, int type, const uint8_t *wr, size_t wr_len, size_t rows, size_t k,
               const uint8_t *act, size_t act_len, size_t ncols, float *y, size_t y_len, char *err,
               size_t errlen)
{
    size_t blk, wb, a1, a4;
    if (!x8_geometry(type, &blk, &wb, &a1, &a4)) {
        if (err)
            snprintf(err, errlen, "weight type %d has no repacked product", type);
        return -1;
    }
    const char *what = type == Q4_K_TYPE ? "Q4_K" : type == IQ4_NL_TYPE ? "IQ4_NL" : "Q4_0";
    if (rows % 8 != 0 || k == 0 || k % blk != 0) {
        if (err)
            snprintf(err, errlen, "repacked %s products need rows in eights and whole blocks, not %zu x %zu", what,
                     rows, k);
        return -1;
    }
    size_t nb = k / blk;
    if ((rows && nb > SIZE_MAX / wb / rows) || (ncols && rows > SIZE_MAX / ncols) ||
        (ncols && k > SIZE_MAX / sizeof(float) / ncols)) {
        if (err)
            snprintf(err, errlen, "repacked %s product of %zu x %zu x %zu is too large", what, rows, k, ncols);
        return -1;
    }
    size_t need_w = rows * nb * wb, need_a = x8_work_bytes(type, k, ncols);
    if (wr_len < need_w || y_len < rows * ncols || act_len < need_a) {
        if (err)
            snprintf(err, errlen, "repacked %s product: weights %zu of %zu bytes, output %zu of %zu floats, "
                     "work %zu of %zu bytes", what, wr_len, need_w, y_len, rows * ncols, act_len, need_a);
        return -1;
    }
    if (rows && ncols && (!wr || !act || !y)) {
        if (err)
            snprintf(err, errlen, "repacked %s product given a NULL buffer", what);
        return -1;
    }
    const size_t n4 = ncols - ncols % 4;
    *m = (x8_mm){type == Q4_K_TYPE ? q4_k_x8_gemv : type == IQ4_NL_TYPE ? iq4_nl_x8_gemv : q4_0_x8_gemv,
                 type == Q4_K_TYPE ? q4_k_x8_gemm4 : type == IQ4_NL_TYPE ? iq4_nl_x8_gemm4 : q4_0_x8_gemm4, wr, rows, nb, 8 * nb * wb, act, act + n4 * nb * a1, nb * a4, nb * a1, n4,
                 ncols, y};
    return 0;
}

int x8_mul_mat(par_pool *p, int type, const uint8_t *wr, size_t wr_len, size_t rows, size_t k, const float *x,
               size_t ncols, float *y, size_t y_len, uint8_t *work, size_t work_len, char *err, size_t errlen)
{
    x8_mm m;
    if (x8_mm_init(&m, type, wr, wr_len, rows, k, work, work_len, ncols, y, y_len, err, errlen)) return -1;
    if (rows && ncols && !x) {
        if (err)
            snprintf(err, errlen, "repacked product given a NULL buffer");
        return -1;
    }
    /* the activations, as forward_mul_mat: groups of 4 columns through the
     * interleaved quantizer, the rest through the plain one */
    x8_quantize_cols(type, x, k, 0, ncols, ncols, work);
    par_rows(p, x8_mm_rows, &m, rows / 8, 0);
    return 0;
}
