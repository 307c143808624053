/*
 * vec.h -- the forward pass's vector operations, bit for bit as llama.cpp
 * b11669's haswell CPU backend: RMSNorm (ggml_rms_norm + ggml_mul), RoPE
 * (ggml_rope_cache_init, rotate_pairs), SwiGLU (ggml_vec_swiglu_f32), GeGLU
 * (ggml_vec_geglu_f32 through ggml_table_gelu_f16) and
 * ggml_v_expf, one lane at a time (v_expf1) and in eight AVX2 lanes (v_expf8).
 *
 * Each function with a simd argument has a portable body and an AVX2 twin
 * (simd != 0: AVX2 + FMA + F16C present, q8_simd()); both give the same bits,
 * the lanes only running independent per-element chains side by side.
 * Files that include this header compile with fp-contract off (the inline
 * bodies below must not fuse what they do not write as fmaf).
 */
#ifndef BANKML_VEC_H
#define BANKML_VEC_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/par.h"

#if defined(__x86_64__) || defined(__i386__)
#define VEC_X86 1
#include <immintrin.h>
#define AVX_TARGET __attribute__((target("avx2,fma,f16c")))
#define AVX_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))
#else
#define VEC_X86 0
#endif
#define VEC_INLINE static inline __attribute__((always_inline))

/* ---- ggml's vectorised exp, one lane at a time -------------------------- */

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* One lane of ggml_v_expf (AVX2): the same constants, fused steps and range
 * selection, so every lane gives the intrinsic's bits. */
VEC_INLINE float v_expf1(float x)
{
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const uint32_t e = f2u(z) << 23;
    const float k = u2f(e + f2u(1.0f));
    const int c = fabsf(n) > 126.0f;
    const float uu = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), uu,
                              fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                         uu, 0x1.ffffecp-1f * b);
    if (!c) return fmaf(k, j, k);
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = u2f(g + 0x7f000000u);
    const float s2 = u2f(e - g);
    if (fabsf(n) > 192.0f) return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

#if VEC_X86
/* ggml_v_expf in eight lanes: v_expf1() lane for lane (fnmadd(n, c, x) is
 * fma(-n, c, x) exactly: negation commutes with rounding). */
AVX_INLINE __m256 v_expf8(__m256 x)
{
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3f800000)));
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 c = _mm256_cmp_ps(an, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
    const __m256 uu = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b,
                                        _mm256_set1_ps(0x1.573e2ep-5f)),
                        uu,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b,
                                        _mm256_set1_ps(0x1.fffdb6p-2f))),
        uu, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    const __m256 near = _mm256_fmadd_ps(k, j, k);
    if (!_mm256_movemask_ps(c)) return near;
    const __m256i g = _mm256_and_si256(
        _mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
        _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256 big = _mm256_cmp_ps(an, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 far = _mm256_blendv_ps(_mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1),
                                        _mm256_mul_ps(s1, s1), big);
    return _mm256_blendv_ps(near, far, c);
}
#endif

/* RMSNorm of rows x n floats (token-major) with weights w: y may be x. */
void vec_rms_norm(int simd, float *y, const float *x, const float *w, size_t rows, size_t n,
                  float eps);
/* The same over the pool, whole rows per worker (small batches stay on the
 * caller: par_rows runs inline when the rows fit one chunk). */
void vec_rms_norm_pool(par_pool *pool, int simd, float *y, const float *x, const float *w,
                       size_t rows, size_t n, float eps);

/* What RoPE reads of the hyper-parameters (as llama-context derives them). */
typedef struct {
    uint32_t head_dim;        /* rotated dimensions: ggml_rope_ext's n_dims (rope.dimension_count; the
                                 whole head but for partial RoPE, Phi-4-mini) */
    float rope_base;          /* freq_base */
    float freq_scale;         /* 1 / scaling factor */
    float ext_factor;         /* 1 for YaRN, else 0 */
    float attn_factor;        /* YaRN magnitude */
    float beta_fast, beta_slow;
    uint32_t n_ctx_orig;      /* YaRN original context */
    const float *freq_factors;/* head_dim/2 factors dividing each pair's theta
                                 (ggml_rope_ext's c: Llama 3.x), or NULL */
} vec_rope_params;

/* The cos/sin table of one position: head_dim floats (cos, sin pairs); with
 * freq_factors, pair i's theta is theta / freq_factors[i] before the YaRN
 * mix, as ggml_rope_cache_init (the running theta itself is not divided). */
void vec_rope_cache(const vec_rope_params *hp, int64_t pos, float *cache);
/* Rotates the first n_rot floats (even, <= hd) of n_tok x n_heads rows of hd
 * floats with the token's table (table + t * hd, its first n_rot used);
 * neox: halves of the n_rot (pairs i, i + n_rot/2), else adjacent pairs; the
 * hd - n_rot others pass unchanged (ggml_rope_ext's n_dims < ne0). */
void vec_rope(int simd, float *x, size_t n_tok, size_t n_heads, size_t hd, size_t n_rot, int neox,
              const float *table);

/* y = silu(g) * u over n floats (y may be g). */
void vec_swiglu(int simd, float *y, const float *g, const float *u, size_t n);
/* g = silu(g) * u over rows x F floats, on the pool in segments of 512
 * columns (a multiple of 8: the lanes fall where they fall in a whole row). */
void vec_swiglu_pool(par_pool *pool, int simd, float *g, const float *u, size_t rows, size_t F);

/* ggml_table_gelu_f16: gelu (tanh form) of every f16 value, rounded to f16,
 * filled once (thread-safe) with the shipped build's float order. */
const uint16_t *vec_gelu_table(void);
/* y = gelu(g) * u over n floats as ggml_vec_geglu_f32 (GGML_GELU_FP16): 0 for
 * g <= -10, g * u for g >= 10, else table[f16(g)] widened times u (y may be g). */
void vec_geglu(float *y, const float *g, const float *u, size_t n);
/* g = gelu(g) * u over rows x F floats, on the pool in segments of 512. */
void vec_geglu_pool(par_pool *pool, float *g, const float *u, size_t rows, size_t F);

#endif
