/*
 * vec.c -- RMSNorm, RoPE and SwiGLU as llama.cpp b11669's CPU backend
 * computes them (see vec.h). Contraction is off for the whole file: where
 * the shipped binary fuses, the code says fmaf().
 */
#pragma GCC optimize("fp-contract=off")

#include "ops/vec.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "ops/f16.h"

#define INLINE VEC_INLINE
#define FW_X86 VEC_X86

/* ggml_vec_swiglu_f32: silu(g) * u in lanes of 8 through ggml_v_silu, the
 * tail through libm's expf. */
INLINE void swiglu_body(float *y, const float *g, const float *u, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (size_t l = 0; l < 8; l++) {
            const float x = g[i + l];
            const float ex = v_expf1(0.0f - x);
            y[i + l] = (x / (1.0f + ex)) * u[i + l];
        }
    for (; i < n; i++) y[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}

static void swiglu_c(float *y, const float *g, const float *u, size_t n) { swiglu_body(y, g, u, n); }

/* ---- RMSNorm, RoPE ------------------------------------------------------ */

/* ggml_rms_norm then ggml_mul (or the fused pair: same bits): the sum of
 * float squares in double, mean rounded to float, (x * scale) * w. */
static void rms_norm_rows(float *y, const float *x, const float *w, size_t rows, size_t n,
                          float eps)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        double sum = 0.0;
        for (size_t i = 0; i < n; i++) sum += (double)(xr[i] * xr[i]);
        const float mean = (float)(sum / (double)(int64_t)n);
        const float scale = 1.0f / sqrtf(mean + eps);
        for (size_t i = 0; i < n; i++) yr[i] = (xr[i] * scale) * w[i];
    }
}

/* ggml_rope_yarn_corr_dims (libggml-base). */
static void yarn_corr_dims(int n_dims, int n_ctx_orig, float base, float beta_fast,
                           float beta_slow, float dims[2])
{
    float a = (float)n_dims * logf((float)n_ctx_orig / (beta_fast * 2 * (float)M_PI)) /
              (2 * logf(base));
    float b = (float)n_dims * logf((float)n_ctx_orig / (beta_slow * 2 * (float)M_PI)) /
              (2 * logf(base));
    float start = floorf(a), end = ceilf(b);
    dims[0] = start > 0.0f ? start : 0.0f;
    dims[1] = (float)(n_dims - 1) < end ? (float)(n_dims - 1) : end;
}

/* The cos/sin table of one position, as ggml_rope_cache_init: theta is the
 * position times theta_scale^(i/2) by repeated products, then rope_yarn
 * (with the binary's fused YaRN mix and magnitude term) and sincosf. */
void vec_rope_cache(const vec_rope_params *hp, int64_t pos, float *cache)
{
    const int n_dims = (int)hp->head_dim;
    const float theta_scale = powf(hp->rope_base, -2.0f / (float)n_dims);
    float corr[2] = { 0.0f, 0.0f };
    if (hp->ext_factor != 0.0f)
        yarn_corr_dims(n_dims, (int)hp->n_ctx_orig, hp->rope_base, hp->beta_fast, hp->beta_slow,
                       corr);
    float theta = (float)pos;
    for (int i0 = 0; i0 < n_dims; i0 += 2) {
        const float theta_extrap = hp->freq_factors ? theta / hp->freq_factors[i0 / 2] : theta;
        const float theta_interp = hp->freq_scale * theta_extrap;
        float th = theta_interp, mscale = hp->attn_factor;
        if (hp->ext_factor != 0.0f) {
            const float lo = corr[0], hi = corr[1];
            const float d = hi - lo;
            const float y = ((float)(i0 / 2) - lo) / (0.001f > d ? 0.001f : d);
            const float ramp = y > 1.0f ? 0.0f : 1.0f - (y >= 0.0f ? y : 0.0f);
            const float ramp_mix = hp->ext_factor * ramp;
            th = fmaf(theta_interp, 1.0f - ramp_mix, theta_extrap * ramp_mix);
            mscale = mscale * fmaf(logf(1.0f / hp->freq_scale), 0.1f, 1.0f);
        }
        float s, c;
        sincosf(th, &s, &c);
        cache[i0] = c * mscale;
        cache[i0 + 1] = s * mscale;
        theta *= theta_scale;
    }
}

/* rotate_pairs: x0*cos - x1*sin and x0*sin + x1*cos, each with one fused
 * step as GCC compiled them (fma(x0, cos, -(x1*sin)), fma(x0, sin, x1*cos)). */
INLINE void rope_body(float *x, size_t n_tok, size_t n_heads, size_t hd, size_t n_rot, int neox,
                      const float *table)
{
    const size_t half = n_rot / 2;
    for (size_t t = 0; t < n_tok; t++) {
        const float *cache = table + t * hd;
        for (size_t h = 0; h < n_heads; h++) {
            float *row = x + (t * n_heads + h) * hd;
            for (size_t i0 = 0; i0 < n_rot; i0 += 2) {
                const float c = cache[i0], s = cache[i0 + 1];
                float *p0 = neox ? row + i0 / 2 : row + i0;
                float *p1 = neox ? p0 + half : p0 + 1;
                const float x0 = *p0, x1 = *p1;
                *p0 = fmaf(x0, c, -(x1 * s));
                *p1 = fmaf(x0, s, x1 * c);
            }
        }
    }
}

static void rope_rows(float *x, size_t n_tok, size_t n_heads, size_t hd, size_t n_rot, int neox,
                      const float *table)
{
    rope_body(x, n_tok, n_heads, hd, n_rot, neox, table);
}

#if FW_X86
/* swiglu_body() in lanes: silu through v_expf8, the tail through expf. */
AVX_TARGET static void swiglu_avx(float *y, const float *g, const float *u, size_t n)
{
    size_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 ex = v_expf8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, ex)),
                                              _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) y[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}

/* rms_norm_rows() for one row: the float squares eight at a time, widened
 * (exactly) and then summed one by one in double as before. */
AVX_TARGET static void rms_norm_avx(float *y, const float *x, const float *w, size_t rows,
                                    size_t n, float eps)
{
    const size_t n8 = n / 8 * 8;
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        double sum = 0.0;
        size_t i = 0;
        for (; i < n8; i += 8) {
            const __m256 v = _mm256_loadu_ps(xr + i);
            const __m256 sq = _mm256_mul_ps(v, v);
            double dl[8];
            _mm256_storeu_pd(dl, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
            _mm256_storeu_pd(dl + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
            for (int l = 0; l < 8; l++) sum += dl[l];
        }
        for (; i < n; i++) sum += (double)(xr[i] * xr[i]);
        const float mean = (float)(sum / (double)(int64_t)n);
        const float scale = 1.0f / sqrtf(mean + eps);
        const __m256 vs = _mm256_set1_ps(scale);
        for (i = 0; i < n8; i += 8)
            _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + i), vs),
                                                   _mm256_loadu_ps(w + i)));
        for (; i < n; i++) yr[i] = (xr[i] * scale) * w[i];
    }
}

AVX_TARGET static void rope_rows_avx(float *x, size_t n_tok, size_t n_heads, size_t hd,
                                     size_t n_rot, int neox, const float *table)
{
    rope_body(x, n_tok, n_heads, hd, n_rot, neox, table);   /* fmaf becomes one instruction */
}
#endif

/* RMSNorm of rows [r0, r1) of width n. */
typedef struct {
    float *y;
    const float *x, *w;
    size_t n;
    float eps;
    int simd;
} rms_ctx;

static void rms_job(void *ctx, size_t r0, size_t r1, int worker)
{
    const rms_ctx *c = ctx;
    (void)worker;
#if FW_X86
    if (c->simd) {
        rms_norm_avx(c->y + r0 * c->n, c->x + r0 * c->n, c->w, r1 - r0, c->n, c->eps);
        return;
    }
#endif
    rms_norm_rows(c->y + r0 * c->n, c->x + r0 * c->n, c->w, r1 - r0, c->n, c->eps);
}

void vec_rms_norm(int simd, float *y, const float *x, const float *w, size_t rows, size_t n,
                  float eps)
{
#if FW_X86
    if (simd) {
        rms_norm_avx(y, x, w, rows, n, eps);
        return;
    }
#endif
    (void)simd;
    rms_norm_rows(y, x, w, rows, n, eps);
}

void vec_rms_norm_pool(par_pool *pool, int simd, float *y, const float *x, const float *w,
                       size_t rows, size_t n, float eps)
{
    rms_ctx c = { y, x, w, n, eps, simd };
    par_rows(pool, rms_job, &c, rows, 8);
}

void vec_rope(int simd, float *x, size_t n_tok, size_t n_heads, size_t hd, size_t n_rot, int neox,
              const float *table)
{
#if FW_X86
    if (simd) {
        rope_rows_avx(x, n_tok, n_heads, hd, n_rot, neox, table);
        return;
    }
#endif
    (void)simd;
    rope_rows(x, n_tok, n_heads, hd, n_rot, neox, table);
}

void vec_swiglu(int simd, float *y, const float *g, const float *u, size_t n)
{
#if FW_X86
    if (simd) {
        swiglu_avx(y, g, u, n);
        return;
    }
#endif
    (void)simd;
    swiglu_c(y, g, u, n);
}

/* SwiGLU over segments of FW_SEG columns (a multiple of 8, so the lanes of
 * 8 fall where they fall in a whole row; the last segment of a row takes the
 * scalar tail). */
#define FW_SEG 512
typedef struct {
    float *g;
    const float *u;
    size_t F, nseg;
    int simd;
} swiglu_ctx;

static void swiglu_job(void *ctx, size_t r0, size_t r1, int worker)
{
    const swiglu_ctx *c = ctx;
    (void)worker;
    for (size_t j = r0; j < r1; j++) {
        const size_t t = j / c->nseg, c0 = (j % c->nseg) * FW_SEG;
        const size_t len = c->F - c0 < FW_SEG ? c->F - c0 : FW_SEG;
        float *gr = c->g + t * c->F + c0;
        const float *ur = c->u + t * c->F + c0;
        vec_swiglu(c->simd, gr, gr, ur, len);
    }
}

void vec_swiglu_pool(par_pool *pool, int simd, float *g, const float *u, size_t rows, size_t F)
{
    swiglu_ctx sw = { g, u, F, (F + FW_SEG - 1) / FW_SEG, simd };
    par_rows(pool, swiglu_job, &sw, rows * sw.nseg, 8);
}

/* ---- GeGLU (gemma3) ------------------------------------------------------------ */

/* ggml_table_gelu_f16, as ggml_cpu_init fills it in the shipped haswell
 * build: for every f16 value x, f16(0.5f*x*(1 + tanhf(c*x*t))) with
 * t = fma(a*x, x, 1) -- the one multiply-add GCC fuses in that build (an
 * unfused t differs at one entry; measured over all 65,536 against the
 * library's ggml_gelu on F16, which reads the table). */
static uint16_t vec_gelu_tab[65536];
static pthread_once_t vec_gelu_once = PTHREAD_ONCE_INIT;

static void vec_gelu_fill(void)
{
    const float a = 0.044715f, c = 0.79788456080286535587989211986876f;
    for (uint32_t i = 0; i < 65536; i++) {
        const float x = f16_to_f32((uint16_t)i);
        const float t = fmaf(a * x, x, 1.0f);
        vec_gelu_tab[i] = f32_to_f16(0.5f * x * (1.0f + tanhf(c * x * t)));
    }
}

const uint16_t *vec_gelu_table(void)
{
    pthread_once(&vec_gelu_once, vec_gelu_fill);
    return vec_gelu_tab;
}

void vec_geglu(float *y, const float *g, const float *u, size_t n)
{
    const uint16_t *tab = vec_gelu_table();
    for (size_t i = 0; i < n; i++) {
        const float x = g[i];
        if (x <= -10.0f) y[i] = 0.0f;
        else if (x >= 10.0f) y[i] = x * u[i];
        else y[i] = f16_to_f32(tab[f32_to_f16(x)]) * u[i];
    }
}

typedef struct {
    float *g;
    const float *u;
    size_t F, nseg;
} geglu_ctx;

static void geglu_job(void *ctx, size_t r0, size_t r1, int worker)
{
    const geglu_ctx *c = ctx;
    (void)worker;
    for (size_t j = r0; j < r1; j++) {
        const size_t t = j / c->nseg, c0 = (j % c->nseg) * FW_SEG;
        const size_t len = c->F - c0 < FW_SEG ? c->F - c0 : FW_SEG;
        vec_geglu(c->g + t * c->F + c0, c->g + t * c->F + c0, c->u + t * c->F + c0, len);
    }
}

void vec_geglu_pool(par_pool *pool, float *g, const float *u, size_t rows, size_t F)
{
    geglu_ctx gc = { g, u, F, (F + FW_SEG - 1) / FW_SEG };
    vec_gelu_table();   /* filled before the workers read it */
    par_rows(pool, geglu_job, &gc, rows * gc.nseg, 8);
}
