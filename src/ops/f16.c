/*
 * f16.c -- float weights (F32, F16, BF16) with the bits of the shipped ggml
 * (libggml-cpu-haswell.so, llama.cpp b11669). See f16.h for the two paths.
 *
 * Float orders, as read from ggml v0.5.0's source and checked against the
 * b11669 haswell binary (objdump), written here in our own structure:
 *
 *   vec_dot, all three types: lanes acc[j][l] (j = 0..3, l = 0..7) take
 *   element 32*s + 8*j + l by FMA over the whole 32-element steps; then
 *   v[l] = (acc0 + acc2) + (acc1 + acc3); then t[l] = v[l] + v[l + 4].
 *     F32  (ggml_vec_dot_f32): r = (t0 + t1) + (t2 + t3) in float, then each
 *          tail element added in float as a separate multiply and add.
 *     F16  (ggml_vec_dot_f16): r as F32; if there is a tail, r is widened to
 *          double and each tail product (exact in float) added in double.
 *     BF16 (ggml_vec_dot_bf16): r = (t0 + t2) + (t1 + t3) (the source writes
 *          mul + add; GCC fused it into FMA in the shipped binary), then
 *          0.0 + r in double (so -0 becomes +0), tail added in double.
 *   sgemm element (llamafile tinyBLAS<8, __m256>, all three types): one
 *   8-lane FMA chain acc[l] over k, then t[l] = acc[l] + acc[l + 4] and
 *   (t0 + t2) + (t1 + t3).
 *
 * Nothing in this file may be contracted into an FMA behind our back: the
 * pragma below turns contraction off, and every FMA is an explicit
 * _mm256_fmadd_ps or fmaf.
 */
#pragma GCC optimize("fp-contract=off")

#include "base/base.h"
#include "ops/f16.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define F16_X86 1
#include <immintrin.h>
#define SIMD __attribute__((target("avx2,fma,f16c")))
#define SIMD_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline
#else
#define F16_X86 0
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "f16.c reads GGUF weights as little-endian bytes"
#endif

/* ------------------------------------------------------------------------
 * Path choice
 * ---------------------------------------------------------------------- */

static atomic_int simd_state;   /* 0 unknown, 1 simd, 2 portable */
static atomic_int force_port;

static int simd_on(void)
{
    if (atomic_load_explicit(&force_port, memory_order_relaxed)) return 0;
    int s = atomic_load_explicit(&simd_state, memory_order_relaxed);
    if (s == 0) {
#if F16_X86
        __builtin_cpu_init();
        s = (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && bk_cpu_f16c()) ? 1 : 2;
#else
        s = 2;
#endif
        atomic_store_explicit(&simd_state, s, memory_order_relaxed);
    }
    return s == 1;
}

int f16_simd_active(void) { return simd_on(); }

void f16_force_portable(int on)
{
    atomic_store_explicit(&force_port, on ? 1 : 0, memory_order_relaxed);
}

/* ------------------------------------------------------------------------
 * Scalar conversions (portable definitions; the F16C rows must agree)
 * ---------------------------------------------------------------------- */

static inline uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0) {
        if (man == 0) return bits_f(sign);
        /* subnormal half: renormalise; every one is a normal float */
        int e = -14;
        while (!(man & 0x400)) { man <<= 1; e--; }
        man &= 0x3ff;
        return bits_f(sign | ((uint32_t)(e + 127) << 23) | (man << 13));
    }
    if (exp == 31) {
        if (man == 0) return bits_f(sign | 0x7f800000u);
        return bits_f(sign | 0x7fc00000u | (man << 13));    /* quieted NaN */
    }
    return bits_f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t f32_to_f16(float f)
{
    uint32_t u = f_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)                                    /* NaN */
        return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));
    if (a >= 0x477ff000u)           /* >= 65520 rounds (ties to even) to inf */
        return (uint16_t)(sign | 0x7c00);
    if (a < 0x38800000u) {                      /* below the least normal */
        if (a <= 0x33000000u) return sign;      /* <= 2^-25: ties to 0 */
        uint32_t e = a >> 23;                   /* 103 .. 112 */
        uint32_t m = (a & 0x7fffff) | 0x800000;
        uint32_t s = 126 - e;                   /* 14 .. 23 */
        uint32_t q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t q = ((a >> 23) - 112) << 10 | ((a >> 13) & 0x3ff);
    uint32_t rem = a & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) q++;
    return (uint16_t)(sign | q);
}

float bf16_to_f32(uint16_t b) { return bits_f((uint32_t)b << 16); }

uint16_t f32_to_bf16(float f)
{
    uint32_t u = f_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1))) >> 16);
}

/* ------------------------------------------------------------------------
 * Row conversions
 * ---------------------------------------------------------------------- */

#if F16_X86
SIMD static void f16_to_f32_row_simd(const uint16_t *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(
            _mm_loadu_si128((const __m128i *)(const void *)(x + i))));
    for (; i < n; i++) y[i] = _cvtsh_ss(x[i]);
}

SIMD static void f32_to_f16_row_simd(const float *x, uint16_t *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), 0));
    for (; i < n; i++) y[i] = _cvtss_sh(x[i], 0);
}

/* x -> fp16 (RNE) -> f32, in registers. */
SIMD static void round_f16_simd(const float *x, float *y, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(
            _mm256_cvtps_ph(_mm256_loadu_ps(x + i), 0)));
    for (; i < n; i++) y[i] = _cvtsh_ss(_cvtss_sh(x[i], 0));
}
#endif

void f16_to_f32_row(const uint16_t *x, float *y, size_t n)
{
#if F16_X86
    if (simd_on()) { f16_to_f32_row_simd(x, y, n); return; }
#endif
    for (size_t i = 0; i < n; i++) y[i] = f16_to_f32(x[i]);
}

void f32_to_f16_row(const float *x, uint16_t *y, size_t n)
{
#if F16_X86
    if (simd_on()) { f32_to_f16_row_simd(x, y, n); return; }
#endif
    for (size_t i = 0; i < n; i++) y[i] = f32_to_f16(x[i]);
}

void bf16_to_f32_row(const uint16_t *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = bf16_to_f32(x[i]);
}

void f32_to_bf16_row(const float *x, uint16_t *y, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = f32_to_bf16(x[i]);
}

int f16_round_act(int type, const float *x, float *y, size_t n)
{
    switch (type) {
    case F16_T_F32:
        if (y != x) memmove(y, x, n * sizeof *y);
        return 0;
    case F16_T_F16:
#if F16_X86
        if (simd_on()) { round_f16_simd(x, y, n); return 0; }
#endif
        for (size_t i = 0; i < n; i++) y[i] = f16_to_f32(f32_to_f16(x[i]));
        return 0;
    case F16_T_BF16:
        for (size_t i = 0; i < n; i++) y[i] = bf16_to_f32(f32_to_bf16(x[i]));
        return 0;
    }
    return -1;
}

/* ------------------------------------------------------------------------
 * Matrix checks and get_rows
 * ---------------------------------------------------------------------- */

static size_t elt_size(int type)
{
    switch (type) {
    case F16_T_F32: return 4;
    case F16_T_F16: return 2;
    case F16_T_BF16: return 2;
    }
    return 0;
}

int f16_matrix_check(const f16_matrix *w, char *err, size_t errlen)
{
    size_t es = w ? elt_size(w->type) : 0;
    if (!w || es == 0) {
        bk_err(err, errlen, "weight type %d is not F32, F16 or BF16",
                w ? w->type : -1);
        return -1;
    }
    if (!w->data) {
        bk_err(err, errlen, "weight has no data (%zu x %zu)", w->rows, w->k);
        return -1;
    }
    if (w->k == 0 || w->rows == 0) {
        bk_err(err, errlen, "empty weight (%zu rows of %zu elements)",
                w->rows, w->k);
        return -1;
    }
    if (w->k > (size_t)INT32_MAX || w->k > SIZE_MAX / es) {
        bk_err(err, errlen, "weight rows of %zu elements are too long",
                w->k);
        return -1;
    }
    size_t need = w->k * es;
    if (w->row_bytes < need) {
        bk_err(err, errlen, "weight row stride %zu bytes < %zu bytes of data",
                w->row_bytes, need);
        return -1;
    }
    if (w->rows - 1 > (SIZE_MAX - need) / w->row_bytes ||
        (w->rows - 1) * w->row_bytes + need > w->size) {
        bk_err(err, errlen, "weight of %zu rows needs more than its %zu bytes",
                w->rows, w->size);
        return -1;
    }
    return 0;
}

int f16_get_rows(const f16_matrix *w, const int32_t *ids, size_t nids,
                 float *out, char *err, size_t errlen)
{
    if (f16_matrix_check(w, err, errlen) != 0) return -1;
    for (size_t i = 0; i < nids; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= w->rows) {
            bk_err(err, errlen, "row id %ld out of range (%zu rows)",
                    (long)ids[i], w->rows);
            return -1;
        }
    }
    for (size_t i = 0; i < nids; i++) {
        const char *row = (const char *)w->data + (size_t)ids[i] * w->row_bytes;
        float *o = out + i * w->k;
        if (w->type == F16_T_F32) {
            memcpy(o, row, w->k * 4);
        } else if (w->type == F16_T_F16) {
            f16_to_f32_row((const uint16_t *)(const void *)row, o, w->k);
        } else {
            bf16_to_f32_row((const uint16_t *)(const void *)row, o, w->k);
        }
    }
    return 0;
}

static atomic_int llamafile_on;     /* 0: as the shipped b11669 haswell */

void f16_set_llamafile(int on)
{
    atomic_store_explicit(&llamafile_on, on ? 1 : 0, memory_order_relaxed);
}

int f16_llamafile(void)
{
    return atomic_load_explicit(&llamafile_on, memory_order_relaxed);
}

int f16_takes_sgemm(size_t rows, size_t k, size_t n)
{
    return n >= 2 && rows % 4 == 0 && k % 8 == 0;
}

/* ------------------------------------------------------------------------
 * Portable kernels (the definitions; fmaf where the binary has an FMA)
 * ---------------------------------------------------------------------- */

/* Weight element i of a row of the given type, as f32 (exact). */
static inline float w_at(int type, const void *w, size_t i)
{
    uint16_t h;
    switch (type) {
    case F16_T_F32: { float f; memcpy(&f, (const char *)w + 4 * i, 4); return f; }
    case F16_T_F16:
        memcpy(&h, (const char *)w + 2 * i, 2);
        return f16_to_f32(h);
    default:
        memcpy(&h, (const char *)w + 2 * i, 2);
        return bf16_to_f32(h);
    }
}

/* The tail and final reduction shared by both vec_dot paths: v are the
 * eight combined lanes (acc0 + acc2) + (acc1 + acc3); np the elements they
 * cover. */
static float vec_dot_finish(int type, const float v[8], const void *w,
                            const float *x, size_t np, size_t k)
{
    float t0 = v[0] + v[4], t1 = v[1] + v[5], t2 = v[2] + v[6],
          t3 = v[3] + v[7];
    if (type == F16_T_F32) {
        float r = (t0 + t1) + (t2 + t3);
        for (size_t i = np; i < k; i++) {
            float p = w_at(type, w, i) * x[i];
            r = r + p;
        }
        return r;
    }
    if (type == F16_T_F16) {
        float r = (t0 + t1) + (t2 + t3);
        if (np == k) return r;
        double d = r;
        for (size_t i = np; i < k; i++) d += (double)(w_at(type, w, i) * x[i]);
        return (float)d;
    }
    float r = (t0 + t2) + (t1 + t3);
    double d = 0.0;
    d += (double)r;
    for (size_t i = np; i < k; i++) d += (double)(w_at(type, w, i) * x[i]);
    return (float)d;
}

static float f16_dot_portable(int type, const void *w, const float *x,
                              size_t k)
{
    float acc[4][8];
    memset(acc, 0, sizeof acc);
    size_t np = k & ~(size_t)31;
    for (size_t i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 8; l++) {
                size_t e = i + 8 * (size_t)j + (size_t)l;
                acc[j][l] = fmaf(w_at(type, w, e), x[e], acc[j][l]);
            }
    float v[8];
    for (int l = 0; l < 8; l++)
        v[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    return vec_dot_finish(type, v, w, x, np, k);
}

static float hsum8(const float a[8])
{
    float t0 = a[0] + a[4], t1 = a[1] + a[5], t2 = a[2] + a[6],
          t3 = a[3] + a[7];
    return (t0 + t2) + (t1 + t3);
}

static float sgemm_dot_portable(int type, const void *w, const float *x,
                                size_t k)
{
    float acc[8] = { 0 };
    for (size_t i = 0; i < k; i += 8)
        for (int l = 0; l < 8; l++)
            acc[l] = fmaf(w_at(type, w, i + (size_t)l), x[i + (size_t)l],
                          acc[l]);
    return hsum8(acc);
}

/* ------------------------------------------------------------------------
 * AVX2 + FMA + F16C kernels (same bits)
 * ---------------------------------------------------------------------- */

#define ROW_CHUNK 16            /* rows per pool chunk (a multiple of 4) */

#if F16_X86
/* Eight weights of a row from element i, widened to f32 (exact). */
SIMD_INLINE static __m256 load_w8(int type, const void *w, size_t i)
{
    if (type == F16_T_F32)
        return _mm256_loadu_ps((const float *)w + i);
    const __m128i h = _mm_loadu_si128(
        (const __m128i *)(const void *)((const uint16_t *)w + i));
    if (type == F16_T_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The horizontal sum of a tinyBLAS accumulator: (t0 + t2) + (t1 + t3) with
 * t[l] = a[l] + a[l + 4]. */
SIMD_INLINE static float hsum_m256(__m256 a)
{
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    return _mm_cvtss_f32(t);
}

SIMD_INLINE static float vec_dot_simd_t(int type, const void *w,
                                        const float *x, size_t k)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t np = k & ~(size_t)31;
    for (size_t i = 0; i < np; i += 32) {
        a0 = _mm256_fmadd_ps(load_w8(type, w, i), _mm256_loadu_ps(x + i), a0);
        a1 = _mm256_fmadd_ps(load_w8(type, w, i + 8), _mm256_loadu_ps(x + i + 8), a1);
        a2 = _mm256_fmadd_ps(load_w8(type, w, i + 16), _mm256_loadu_ps(x + i + 16), a2);
        a3 = _mm256_fmadd_ps(load_w8(type, w, i + 24), _mm256_loadu_ps(x + i + 24), a3);
    }
    float v[8];
    _mm256_storeu_ps(v, _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3)));
    return vec_dot_finish(type, v, w, x, np, k);
}

SIMD static float vec_dot_simd(int type, const void *w, const float *x,
                               size_t k)
{
    switch (type) {
    case F16_T_F32: return vec_dot_simd_t(F16_T_F32, w, x, k);
    case F16_T_F16: return vec_dot_simd_t(F16_T_F16, w, x, k);
    default: return vec_dot_simd_t(F16_T_BF16, w, x, k);
    }
}

SIMD static float sgemm_dot_simd(int type, const void *w, const float *x,
                                 size_t k)
{
    __m256 a = _mm256_setzero_ps();
    for (size_t i = 0; i < k; i += 8)
        a = _mm256_fmadd_ps(load_w8(type, w, i), _mm256_loadu_ps(x + i), a);
    return hsum_m256(a);
}

/* A 4-row by RN-column block of tinyBLAS elements: four weight rows from
 * w0 (stride ws bytes), RN activation columns from x0 (stride k floats),
 * results into y (column stride ldy). Each element is its own FMA chain, so
 * the blocking decides only the load pattern, never the bits. */
SIMD_INLINE static void tile4(int type, int RN, const char *w0, size_t ws,
                              const float *x0, size_t k, float *y, size_t ldy)
{
    __m256 c[3][4];
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 4; i++) c[j][i] = _mm256_setzero_ps();
    for (size_t l = 0; l < k; l += 8) {
        __m256 b[3];
        for (int j = 0; j < RN; j++) b[j] = _mm256_loadu_ps(x0 + (size_t)j * k + l);
        for (int i = 0; i < 4; i++) {
            __m256 a = load_w8(type, w0 + (size_t)i * ws, l);
            for (int j = 0; j < RN; j++) c[j][i] = _mm256_fmadd_ps(a, b[j], c[j][i]);
        }
    }
    for (int j = 0; j < RN; j++)
        for (int i = 0; i < 4; i++) y[(size_t)j * ldy + (size_t)i] = hsum_m256(c[j][i]);
}

SIMD_INLINE static void sgemm_block_t(int type, const char *w, size_t ws,
                                      size_t r0, size_t r1, const float *x,
                                      size_t k, size_t c0, size_t c1,
                                      float *y, size_t ldy)
{
    for (size_t r = r0; r < r1; r += 4) {
        const char *wr = w + r * ws;
        size_t c = c0;
        for (; c + 3 <= c1; c += 3)
            tile4(type, 3, wr, ws, x + c * k, k, y + c * ldy + r, ldy);
        if (c1 - c == 2) tile4(type, 2, wr, ws, x + c * k, k, y + c * ldy + r, ldy);
        else if (c1 - c == 1) tile4(type, 1, wr, ws, x + c * k, k, y + c * ldy + r, ldy);
    }
}

SIMD static void sgemm_block_simd(int type, const char *w, size_t ws,
                                  size_t r0, size_t r1, const float *x,
                                  size_t k, size_t c0, size_t c1, float *y,
                                  size_t ldy)
{
    switch (type) {
    case F16_T_F32: sgemm_block_t(F16_T_F32, w, ws, r0, r1, x, k, c0, c1, y, ldy); break;
    case F16_T_F16: sgemm_block_t(F16_T_F16, w, ws, r0, r1, x, k, c0, c1, y, ldy); break;
    default: sgemm_block_t(F16_T_BF16, w, ws, r0, r1, x, k, c0, c1, y, ldy); break;
    }
}

/* vec_dot over rows [r0, r1) for one column, two rows at a time so each
 * activation load feeds two chains (bits unchanged: each row keeps its own
 * four accumulators). The pair is r and r + half the range, not r and r + 1:
 * two weight streams one row apart (4 KiB for 2,048 halves) measured 1.1-1.4x
 * slower than streams half a chunk apart on matrices read from DRAM (in-process
 * A/B, 5632x2048 F16/BF16), and no slower on the others. */
SIMD_INLINE static void vec_rows_t(int type, const char *w, size_t ws,
                                   size_t r0, size_t r1, const float *x,
                                   size_t k, float *y)
{
    size_t np = k & ~(size_t)31;
    size_t h = (r1 - r0) / 2;
    for (size_t ra = r0; ra < r0 + h; ra++) {
        const char *wa = w + ra * ws, *wb = wa + h * ws;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        for (size_t i = 0; i < np; i += 32) {
            __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
            __m256 x2 = _mm256_loadu_ps(x + i + 16), x3 = _mm256_loadu_ps(x + i + 24);
            a0 = _mm256_fmadd_ps(load_w8(type, wa, i), x0, a0);
            b0 = _mm256_fmadd_ps(load_w8(type, wb, i), x0, b0);
            a1 = _mm256_fmadd_ps(load_w8(type, wa, i + 8), x1, a1);
            b1 = _mm256_fmadd_ps(load_w8(type, wb, i + 8), x1, b1);
            a2 = _mm256_fmadd_ps(load_w8(type, wa, i + 16), x2, a2);
            b2 = _mm256_fmadd_ps(load_w8(type, wb, i + 16), x2, b2);
            a3 = _mm256_fmadd_ps(load_w8(type, wa, i + 24), x3, a3);
            b3 = _mm256_fmadd_ps(load_w8(type, wb, i + 24), x3, b3);
        }
        float va[8], vb[8];
        _mm256_storeu_ps(va, _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3)));
        _mm256_storeu_ps(vb, _mm256_add_ps(_mm256_add_ps(b0, b2), _mm256_add_ps(b1, b3)));
        y[ra] = vec_dot_finish(type, va, wa, x, np, k);
        y[ra + h] = vec_dot_finish(type, vb, wb, x, np, k);
    }
    if ((r1 - r0) & 1) y[r1 - 1] = vec_dot_simd_t(type, w + (r1 - 1) * ws, x, k);
}

SIMD static void vec_rows_simd(int type, const char *w, size_t ws, size_t r0,
                               size_t r1, const float *x, size_t k, float *y)
{
    switch (type) {
    case F16_T_F32: vec_rows_t(F16_T_F32, w, ws, r0, r1, x, k, y); break;
    case F16_T_F16: vec_rows_t(F16_T_F16, w, ws, r0, r1, x, k, y); break;
    default: vec_rows_t(F16_T_BF16, w, ws, r0, r1, x, k, y); break;
    }
}

/* vec_dot of one weight row against RN columns (stride k floats) over the
 * 32-element steps [i0, i1): each weight vector is widened once and feeds RN
 * columns, each column keeping its own four accumulators acc[j][0..3] (read
 * at the start, written back at the end, so a row can be walked in pieces
 * and still get vec_dot's one chain per accumulator). */
SIMD_INLINE static void vec_tile_run(int type, int RN, const char *w,
                                     const float *x0, size_t k, size_t i0,
                                     size_t i1, __m256 acc[][4])
{
    __m256 c[3][4];
    _Pragma("GCC unroll 3")
    for (int j = 0; j < RN; j++)
        _Pragma("GCC unroll 4")
        for (int q = 0; q < 4; q++) c[j][q] = acc[j][q];
    for (size_t i = i0; i < i1; i += 32) {
        _Pragma("GCC unroll 4")
        for (int q = 0; q < 4; q++) {
            __m256 a = load_w8(type, w, i + 8 * (size_t)q);
            _Pragma("GCC unroll 3")
            for (int j = 0; j < RN; j++)
                c[j][q] = _mm256_fmadd_ps(
                    a, _mm256_loadu_ps(x0 + (size_t)j * k + i + 8 * (size_t)q),
                    c[j][q]);
        }
    }
    _Pragma("GCC unroll 3")
    for (int j = 0; j < RN; j++)
        _Pragma("GCC unroll 4")
        for (int q = 0; q < 4; q++) acc[j][q] = c[j][q];
}

/* The end of RN elements: ggml's lane fold of the four accumulators, then
 * vec_dot_finish (horizontal order and the tail past the last whole step). */
SIMD_INLINE static void vec_tile_finish(int type, int RN, const char *w,
                                        const float *x0, size_t k,
                                        __m256 acc[][4], float *y, size_t ldy)
{
    size_t np = k & ~(size_t)31;
    for (int j = 0; j < RN; j++) {
        float v[8];
        _mm256_storeu_ps(v, _mm256_add_ps(_mm256_add_ps(acc[j][0], acc[j][2]),
                                          _mm256_add_ps(acc[j][1], acc[j][3])));
        y[(size_t)j * ldy] = vec_dot_finish(type, v, w, x0 + (size_t)j * k, np, k);
    }
}

/* Activation elements per piece of a row: three f32 columns of 1,024
 * (12 KiB) stay in L1 while the task's rows stream past. */
#define VB_STEP 1024

/* Rows [r0, r1) (at most ROW_CHUNK) by columns [c0, c1) of vec_dot elements
 * (y column stride ldy). Loop order: for each group of three columns, for
 * each piece of VB_STEP activation elements, every row of the task. Why: the
 * earlier rows-outer order re-read every column from L2 for each row (32 B
 * of activation per FMA); here the activation piece is read from L1 and only
 * the weights (2 or 4 bytes per element, shared by three columns) come from
 * L2. Each element's accumulators wait in acc between pieces, so the bits
 * are vec_dot's. */
SIMD_INLINE static void vec_block_t(int type, const char *w, size_t ws,
                                    size_t r0, size_t r1, const float *x,
                                    size_t k, size_t c0, size_t c1, float *y,
                                    size_t ldy)
{
    size_t np = k & ~(size_t)31;
    __m256 acc[ROW_CHUNK][3][4];
    for (size_t c = c0, rn = 0; c < c1; c += rn) {
        /* groups of three; four left go as two and two, since a group of
         * one widens each weight vector for a single column */
        rn = c1 - c == 4 ? 2 : c1 - c >= 3 ? 3 : c1 - c;
        const float *xc = x + c * k;
        for (size_t r = r0; r < r1; r++)
            for (int j = 0; j < 3; j++)
                for (int q = 0; q < 4; q++) acc[r - r0][j][q] = _mm256_setzero_ps();
        for (size_t i0 = 0; i0 < np; i0 += VB_STEP) {
            size_t i1 = np - i0 > VB_STEP ? i0 + VB_STEP : np;
            for (size_t r = r0; r < r1; r++) {
                const char *wr = w + r * ws;
                if (rn == 3) vec_tile_run(type, 3, wr, xc, k, i0, i1, acc[r - r0]);
                else if (rn == 2) vec_tile_run(type, 2, wr, xc, k, i0, i1, acc[r - r0]);
                else vec_tile_run(type, 1, wr, xc, k, i0, i1, acc[r - r0]);
            }
        }
        for (size_t r = r0; r < r1; r++)
            vec_tile_finish(type, (int)rn, w + r * ws, xc, k, acc[r - r0], y + c * ldy + r, ldy);
    }
}

SIMD static void vec_block_simd(int type, const char *w, size_t ws, size_t r0,
                                size_t r1, const float *x, size_t k, size_t c0,
                                size_t c1, float *y, size_t ldy)
{
    switch (type) {
    case F16_T_F32: vec_block_t(F16_T_F32, w, ws, r0, r1, x, k, c0, c1, y, ldy); break;
    case F16_T_F16: vec_block_t(F16_T_F16, w, ws, r0, r1, x, k, c0, c1, y, ldy); break;
    default: vec_block_t(F16_T_BF16, w, ws, r0, r1, x, k, c0, c1, y, ldy); break;
    }
}
#endif

/* ------------------------------------------------------------------------
 * Public dot products
 * ---------------------------------------------------------------------- */

float f16_vec_dot(int type, const void *w, const float *x, size_t k)
{
#if F16_X86
    if (simd_on()) return vec_dot_simd(type, w, x, k);
#endif
    return f16_dot_portable(type, w, x, k);
}

float f16_sgemm_dot(int type, const void *w, const float *x, size_t k)
{
    if (k % 8 != 0) return NAN;
#if F16_X86
    if (simd_on()) return sgemm_dot_simd(type, w, x, k);
#endif
    return sgemm_dot_portable(type, w, x, k);
}

/* ------------------------------------------------------------------------
 * Matrix products on the pool
 * ---------------------------------------------------------------------- */

#ifndef CG_BYTES
#define CG_BYTES (256u * 1024u) /* activation bytes per task: about L2 */
#endif


/* One column (decode): a chunk is rows [r0, r1). */
static void mm_vec_rows(void *vctx, size_t r0, size_t r1, int worker)
{
    const f16_mm *m = vctx;
    const f16_matrix *w = &m->w;
    const char *wd = w->data;
    (void)worker;
#if F16_X86
    if (m->simd) {
        vec_rows_simd(w->type, wd, w->row_bytes, r0, r1, m->x, w->k, m->y);
        return;
    }
#endif
    for (size_t r = r0; r < r1; r++)
        m->y[r] = f16_dot_portable(w->type, wd + r * w->row_bytes, m->x, w->k);
}

/* Several columns: chunk index t is one task, ROW_CHUNK rows by cg columns;
 * consecutive tasks share their columns (row blocks vary fastest), so a
 * column group stays in cache while the weight streams past. */
static void mm_tasks(void *vctx, size_t t0, size_t t1, int worker)
{
    const f16_mm *m = vctx;
    const f16_matrix *w = &m->w;
    const char *wd = w->data;
    (void)worker;
    for (size_t t = t0; t < t1; t++) {
        size_t rb = t % m->nrb, cgi = t / m->nrb;
        size_t r0 = rb * ROW_CHUNK;
        size_t r1 = r0 + ROW_CHUNK < w->rows ? r0 + ROW_CHUNK : w->rows;
        size_t c0 = cgi * m->cg;
        size_t c1 = c0 + m->cg < m->n ? c0 + m->cg : m->n;
#if F16_X86
        if (m->simd) {
            if (m->sgemm)
                sgemm_block_simd(w->type, wd, w->row_bytes, r0, r1, m->x,
                                 w->k, c0, c1, m->y, w->rows);
            else
                vec_block_simd(w->type, wd, w->row_bytes, r0, r1, m->x,
                               w->k, c0, c1, m->y, w->rows);
            continue;
        }
#endif
        for (size_t c = c0; c < c1; c++)
            for (size_t r = r0; r < r1; r++) {
                const char *wr = wd + r * w->row_bytes;
                const float *xc = m->x + c * w->k;
                m->y[c * w->rows + r] = m->sgemm
                    ? sgemm_dot_portable(w->type, wr, xc, w->k)
                    : f16_dot_portable(w->type, wr, xc, w->k);
            }
    }
}

/* Fills one matrix's context and pool job. */
static void mm_plan(f16_mm *m, par_job *j, const f16_matrix *w,
                    const float *x, size_t n, float *y, int simd)
{
    m->w = *w;
    m->x = x;
    m->n = n;
    m->y = y;
    m->simd = simd;
    m->sgemm = f16_llamafile() && f16_takes_sgemm(w->rows, w->k, n);
    j->ctx = m;
    if (n >= 2) {
        /* columns per task: a multiple of 3 (the register tile) whose
         * activations fit in about 256 KiB of cache */
        size_t cg = (CG_BYTES) / (w->k * sizeof(float));
        cg = cg / 3 * 3;
        if (cg < 3) cg = 3;
        if (cg > n) cg = n;
        m->cg = cg;
        m->nrb = (w->rows + ROW_CHUNK - 1) / ROW_CHUNK;
        j->fn = mm_tasks;
        j->rows = m->nrb * ((n + cg - 1) / cg);
        j->chunk = 1;
    } else {
        m->cg = 0;
        m->nrb = 0;
        j->fn = mm_vec_rows;
        j->rows = w->rows;
        j->chunk = ROW_CHUNK;
    }
}

#define MULTI_MAX 8

int f16_mul_mat_multi(par_pool *pool, const f16_matrix *ws, size_t nw,
                      const float *x, size_t n, float *const *ys, char *err,
                      size_t errlen)
{
    if (nw == 0 || nw > MULTI_MAX) {
        bk_err(err, errlen, "%zu matrices in one product; 1 to %zu allowed",
                nw, (size_t)MULTI_MAX);
        return -1;
    }
    if (n == 0 || !x) {
        bk_err(err, errlen, "no activation columns (%zu)", n);
        return -1;
    }
    for (size_t i = 0; i < nw; i++) {
        if (f16_matrix_check(&ws[i], err, errlen) != 0) return -1;
        if (ws[i].type != ws[0].type || ws[i].k != ws[0].k) {
            bk_err(err, errlen, "matrix %zu differs in type or row length "
                    "from matrix 0 (k %zu)", i, ws[0].k);
            return -1;
        }
        if (!ys[i]) {
            bk_err(err, errlen, "matrix %zu has no output", i);
            return -1;
        }
    }
    if (n > SIZE_MAX / ws[0].k) {
        bk_err(err, errlen, "%zu columns of %zu elements overflow", n, ws[0].k);
        return -1;
    }
    int simd = simd_on();
    f16_mm m[MULTI_MAX];
    par_job jobs[MULTI_MAX];
    for (size_t i = 0; i < nw; i++)
        mm_plan(&m[i], &jobs[i], &ws[i], x, n, ys[i], simd);
    par_jobs(pool, jobs, nw);
    return 0;
}

int f16_mm_job(f16_mm *m, par_job *j, const f16_matrix *w, const float *x,
               size_t n, float *y, char *err, size_t errlen)
{
    if (n == 0 || !x || !y) {
        bk_err(err, errlen, "no activation columns (%zu) or no output", n);
        return -1;
    }
    if (f16_matrix_check(w, err, errlen) != 0) return -1;
    if (n > SIZE_MAX / w->k) {
        bk_err(err, errlen, "%zu columns of %zu elements overflow", n, w->k);
        return -1;
    }
    mm_plan(m, j, w, x, n, y, simd_on());
    return 0;
}

int f16_mul_mat(par_pool *pool, const f16_matrix *w, const float *x,
                size_t n, float *y, char *err, size_t errlen)
{
    float *const ys[1] = { y };
    return f16_mul_mat_multi(pool, w, 1, x, n, ys, err, errlen);
}

int f16_mul_mat_f32(par_pool *pool, const f16_matrix *w, const float *x,
                    size_t n, float *scratch, float *y, char *err,
                    size_t errlen)
{
    if (f16_matrix_check(w, err, errlen) != 0) return -1;
    if (n == 0 || n > SIZE_MAX / w->k) {
        bk_err(err, errlen, "bad column count %zu for rows of %zu", n, w->k);
        return -1;
    }
    f16_round_act(w->type, x, scratch, n * w->k);
    return f16_mul_mat(pool, w, scratch, n, y, err, errlen);
}
