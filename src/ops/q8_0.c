/*
 * q8_0.c -- Q8_0 weights and the q8_0 activation quantizer, bit-exact with
 * llama.cpp b11669's libggml-cpu-haswell.so (see q8_0.h for the float orders).
 *
 * Two implementations of every kernel: AVX2+F16C+FMA (chosen at run time)
 * and portable C that gives the same bits (fmaf where the binary has an FMA,
 * ggml's lane structure and horizontal-sum tree written out). Scales convert
 * through f16.h (exact, F16C semantics, NaN quieted with its payload).
 */
#include "base/base.h"
#include "ops/ops_util.h"
#include "ops/q8_0.h"

#include "ops/f16.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- dispatch */

/* -1: not decided yet; 0: portable; 1: SIMD. Every thread that decides
 * stores the same value; release/acquire so a thread that sees 1 also sees
 * the filled scale table. */
static _Atomic int simd_state = -1;
static _Atomic int simd_allowed = 1;

/* fp16 -> f32 of every half, as ggml's ggml_table_f32_f16. Why a table: the
 * kernels meet two to five fp16 scales per block; a table load is one load
 * uop where vpinsrw + vcvtph2ps are vector uops on the pipes the integer
 * products need (measured: Q1_0's vec_dot went from 0.85x to 1.1x ggml's,
 * Q2_0's from 0.97x to 1.0x). Same bits as F16C. Filled once, by q8_simd(),
 * only when the SIMD kernels are on; the driver hands it to them. */
static float f16_table[65536];
static pthread_once_t f16_table_once = PTHREAD_ONCE_INIT;

static void f16_table_fill(void)
{
    for (uint32_t h = 0; h < 65536; h++)
        f16_table[h] = f16_to_f32((uint16_t)h);
}

static int cpu_has_simd(void)
{
#if Q8_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && bk_cpu_f16c();
#else
    return 0;
#endif
}

int q8_simd(void)
{
    int s = atomic_load_explicit(&simd_state, memory_order_acquire);
    if (s < 0) {
        s = atomic_load_explicit(&simd_allowed, memory_order_relaxed) && cpu_has_simd();
        if (s)
            pthread_once(&f16_table_once, f16_table_fill);
        atomic_store_explicit(&simd_state, s, memory_order_release);
    }
    return s;
}

void q8_set_simd(int on)
{
    atomic_store(&simd_allowed, on != 0);
    atomic_store(&simd_state, -1);
}

/* ---------------------------------------------------------------- fp16 scales */


/* ---------------------------------------------------------------- shared helpers */

int q8_mm_check(q8_mm *m, const char *what, size_t blk, size_t bytes,
                const uint8_t *w, size_t w_len, size_t rows, size_t k,
                const uint8_t *act, size_t act_len, size_t ncols, float *y,
                size_t y_len, char *err, size_t errlen)
{
    if (k == 0 || k % blk != 0) {
        if (err)
            snprintf(err, errlen, "%s rows of %zu values are not whole %zu-value blocks", what, k, blk);
        return -1;
    }
    if (k % Q8_0_BLOCK != 0) {
        if (err)
            snprintf(err, errlen, "q8_0 activations need a multiple of 32 values, not %zu", k);
        return -1;
    }
    size_t w_row = k / blk * bytes, a_row = q8_0_row_bytes(k);
    if ((rows && w_row > SIZE_MAX / rows) || (ncols && a_row > SIZE_MAX / ncols) ||
        (ncols && rows > SIZE_MAX / ncols)) {
        if (err)
            snprintf(err, errlen, "%s product of %zu rows x %zu columns is too large", what, rows, ncols);
        return -1;
    }
    if (w_len < w_row * rows) {
        if (err)
            snprintf(err, errlen, "%s weights hold %zu bytes; %zu rows of %zu values need %zu", what,
                     w_len, rows, k, w_row * rows);
        return -1;
    }
    if (act_len < a_row * ncols) {
        if (err)
            snprintf(err, errlen, "q8_0 activations hold %zu bytes; %zu columns of %zu values need %zu",
                     act_len, ncols, k, a_row * ncols);
        return -1;
    }
    if (y_len < rows * ncols) {
        if (err)
            snprintf(err, errlen, "output holds %zu floats; %zu rows x %zu columns need %zu", y_len, rows,
                     ncols, rows * ncols);
        return -1;
    }
    if ((rows && ncols) && (!w || !act || !y)) {
        if (err)
            snprintf(err, errlen, "%s product given a NULL buffer", what);
        return -1;
    }
    m->w = w;
    m->w_row = w_row;
    m->rows = rows;
    m->k = k;
    m->act = act;
    m->a_row = a_row;
    m->ncols = ncols;
    m->y = y;
    return 0;
}

/* ---------------------------------------------------------------- quantizer */

/* Portable quantize_row_q8_0 (AVX2 flavour): lane j of the max holds
 * x[j], x[8+j], x[16+j], x[24+j] folded in that order. */
static void quantize_portable(const float *x, uint8_t *out, size_t nblocks)
{
    for (size_t b = 0; b < nblocks; b++, x += 32, out += Q8_0_BYTES) {
        float lane[8];
        for (int j = 0; j < 8; j++) {
            float m = bits_f32(f32_bits(x[j]) & 0x7fffffffu);
            for (int s = 1; s < 4; s++)
                m = maxps1(m, bits_f32(f32_bits(x[8 * s + j]) & 0x7fffffffu));
            lane[j] = m;
        }
        float h0 = maxps1(lane[4], lane[0]), h1 = maxps1(lane[5], lane[1]);
        float h2 = maxps1(lane[6], lane[2]), h3 = maxps1(lane[7], lane[3]);
        float g0 = maxps1(h0, h2), g1 = maxps1(h1, h3);
        float amax = maxps1(g0, g1);
        float d = amax / 127.0f;
        uint16_t dh = f32_to_f16(d);
        out[0] = (uint8_t)dh;
        out[1] = (uint8_t)(dh >> 8);
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int j = 0; j < 32; j++) {
            float v = x[j] * id;
            out[2 + j] = (uint8_t)cvt_pack(nearbyintf(v));
        }
    }
}

#if Q8_X86
/* The block's |x| maximum through ggml's vmaxps tree (operand order decides
 * which NaN survives: vmaxps returns its second source unless the first is
 * strictly greater). */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline float block_amax(__m256 v0, __m256 v1, __m256 v2, __m256 v3)
{
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_and_ps(v0, absmask);
    m = _mm256_max_ps(m, _mm256_and_ps(v1, absmask));
    m = _mm256_max_ps(m, _mm256_and_ps(v2, absmask));
    m = _mm256_max_ps(m, _mm256_and_ps(v3, absmask));
    __m128 q = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    q = _mm_max_ps(q, _mm_movehl_ps(q, q));
    q = _mm_max_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

/* x * id rounded half-to-even, vcvtps2dq, the two saturating packs, the
 * dword permute that undoes the packs' per-half order: the block's 32 int8. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void block_store(const float *x, __m256 id, uint8_t *qs)
{
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), id));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), id));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), id));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), id));
    __m256i w01 = _mm256_packs_epi32(i0, i1), w23 = _mm256_packs_epi32(i2, i3);
    _mm256_storeu_si256((__m256i *)qs, _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), order));
}

/* ggml's AVX2 quantize_row_q8_0 divides twice per block (d = amax/127 and
 * id = 127/amax), and scalar divisions are the slowest part of it. Here
 * eight blocks at a time first find their maxima, then take both divisions
 * as two vector divisions (the same IEEE quotient in every lane), the
 * `amax != 0` choice as a compare (NEQ_UQ: a NaN amax keeps 127/NaN, as the
 * scalar test does) and the fp16 rounding of the eight d as one vcvtps2ph
 * (round to nearest even, as _cvtss_sh(., 0)); then each block's quants.
 * Same bits as the one-block form, which still does the last nblocks % 8. */
__attribute__((target("avx2,f16c,fma")))
static void quantize_avx2(const float *x, uint8_t *out, size_t nblocks)
{
    size_t b = 0;
    for (; b + 8 <= nblocks; b += 8, x += 8 * 32, out += 8 * Q8_0_BYTES) {
        float am[8], idf[8];
        uint16_t dh[8];
        for (int j = 0; j < 8; j++) {
            const float *xb = x + 32 * j;
            am[j] = block_amax(_mm256_loadu_ps(xb), _mm256_loadu_ps(xb + 8), _mm256_loadu_ps(xb + 16),
                               _mm256_loadu_ps(xb + 24));
        }
        __m256 a = _mm256_loadu_ps(am);
        __m256 d = _mm256_div_ps(a, _mm256_set1_ps(127.0f));
        __m256 id = _mm256_div_ps(_mm256_set1_ps(127.0f), a);
        id = _mm256_and_ps(id, _mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_NEQ_UQ));
        _mm_storeu_si128((__m128i *)dh, _mm256_cvtps_ph(d, 0));
        _mm256_storeu_ps(idf, id);
        for (int j = 0; j < 8; j++) {
            memcpy(out + j * Q8_0_BYTES, &dh[j], 2);
            block_store(x + 32 * j, _mm256_set1_ps(idf[j]), out + j * Q8_0_BYTES + 2);
        }
    }
    for (; b < nblocks; b++, x += 32, out += Q8_0_BYTES) {
        float amax = block_amax(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8), _mm256_loadu_ps(x + 16),
                                _mm256_loadu_ps(x + 24));
        uint16_t dh = _cvtss_sh(amax / 127.0f, 0);
        memcpy(out, &dh, 2); /* x86 is little-endian: one 16-bit store */
        block_store(x, _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f), out + 2);
    }
}
#endif

void q8_0_quantize_blocks(const float *x, uint8_t *out, size_t nblocks)
{
#if Q8_X86
    if (q8_simd()) {
        quantize_avx2(x, out, nblocks);
        return;
    }
#endif
    quantize_portable(x, out, nblocks);
}

int q8_0_quantize(const float *x, size_t n, uint8_t *out, size_t out_len,
                  char *err, size_t errlen)
{
    if (n % Q8_0_BLOCK != 0) {
        if (err)
            snprintf(err, errlen, "q8_0 quantizes whole blocks of 32 values, not %zu", n);
        return -1;
    }
    if (out_len < q8_0_row_bytes(n)) {
        if (err)
            snprintf(err, errlen, "q8_0 output holds %zu bytes; %zu values need %zu", out_len, n,
                     q8_0_row_bytes(n));
        return -1;
    }
    if (n && (!x || !out)) {
        if (err)
            snprintf(err, errlen, "q8_0 quantize given a NULL buffer");
        return -1;
    }
    q8_0_quantize_blocks(x, out, n / Q8_0_BLOCK);
    return 0;
}

/* ---------------------------------------------------------------- dequantize */

int q8_0_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y,
                    char *err, size_t errlen)
{
    if (n % Q8_0_BLOCK != 0) {
        if (err)
            snprintf(err, errlen, "Q8_0 rows hold whole blocks of 32 values, not %zu", n);
        return -1;
    }
    if (w_len < q8_0_row_bytes(n)) {
        if (err)
            snprintf(err, errlen, "Q8_0 row holds %zu bytes; %zu values need %zu", w_len, n,
                     q8_0_row_bytes(n));
        return -1;
    }
    for (size_t b = 0; b < n / Q8_0_BLOCK; b++, w += Q8_0_BYTES, y += 32) {
        float d = f16_to_f32(q8_rd16(w));
        for (int j = 0; j < 32; j++)
            y[j] = (float)(int8_t)w[2 + j] * d;
    }
    return 0;
}

/* ---------------------------------------------------------------- vec_dot */

/* One lane of ggml's vpsignb/vpmaddubsw/vpmaddwd: four products |x|*sign(y,x)
 * summed exactly (sign(-128) wraps, as vpsignb does). */
static inline int32_t lane_dot(const int8_t *x, const int8_t *y)
{
    int32_t s = 0;
    for (int e = 0; e < 4; e++) {
        int ax = x[e] < 0 ? -(int)x[e] : x[e];           /* 0..128, unsigned byte */
        int sy = x[e] < 0 ? (int8_t)(uint8_t)(-(int)y[e]) : (x[e] == 0 ? 0 : y[e]);
        s += ax * sy;
    }
    return s;
}

static float q8_dot_portable(const uint8_t *w, const uint8_t *a, size_t nb)
{
    float acc[8] = {0};
    for (size_t b = 0; b < nb; b++, w += Q8_0_BYTES, a += Q8_0_BYTES) {
        float d = f16_to_f32(q8_rd16(w)) * f16_to_f32(q8_rd16(a));
        const int8_t *x = (const int8_t *)(w + 2), *y = (const int8_t *)(a + 2);
        for (int j = 0; j < 8; j++)
            acc[j] = fmaf(d, (float)lane_dot(x + 4 * j, y + 4 * j), acc[j]);
    }
    return q8_hsum8(acc);
}

#if Q8_X86
/* One weight row against NC (1..4) columns: |x| and the weight scale are
 * taken once per block; each column keeps its own accumulator, so every
 * element has vec_dot's chain. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void q8_row_cols_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t a_row,
                                 size_t nb, float *out, size_t out_stride, int NC)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + b * Q8_0_BYTES;
        float dw = h[q8_rd16(wb)];
        __m256i x = _mm256_loadu_si256((const __m256i *)(wb + 2));
        __m256i ax = _mm256_sign_epi8(x, x);
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NC; c++) {
            const uint8_t *ab = a + c * a_row + b * Q8_0_BYTES;
            float d = dw * h[q8_rd16(ab)];
            __m256i y = _mm256_loadu_si256((const __m256i *)(ab + 2));
            __m256i p = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(y, x));
            __m256 s = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d), s, acc[c]);
        }
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NC; c++)
        out[c * out_stride] = q8_hsum8_avx(acc[c]);
}

Q8_COLS_FNS(cols_avx2_, q8_row_cols_avx2)

/* TWO weight rows against NC (1..4) columns: a 2 x NC tile. Why: one row at
 * a time streams every column's activations from L2 again per row; a pair of
 * rows shares each activation load and scale, halving that traffic. dw*da is
 * taken in every lane (vmulps of the two broadcasts), the same IEEE product
 * as ggml's scalar one; each element's chain is q8_row_cols_avx2's. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void q8_rows2_cols_avx2(const float *h, const uint8_t *w, size_t w_row, const uint8_t *a,
                                   size_t a_row, size_t nb, float *out, size_t out_stride, int NC)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc0[4], acc1[4];
    for (int c = 0; c < 4; c++)
        acc0[c] = acc1[c] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *wb0 = w + b * Q8_0_BYTES, *wb1 = wb0 + w_row;
        __m256 dw0 = _mm256_broadcast_ss(&h[q8_rd16(wb0)]), dw1 = _mm256_broadcast_ss(&h[q8_rd16(wb1)]);
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(wb0 + 2));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(wb1 + 2));
        __m256i ax0 = _mm256_sign_epi8(x0, x0), ax1 = _mm256_sign_epi8(x1, x1);
        _Pragma("GCC unroll 4")
        for (int c = 0; c < NC; c++) {
            const uint8_t *ab = a + c * a_row + b * Q8_0_BYTES;
            __m256 da = _mm256_broadcast_ss(&h[q8_rd16(ab)]);
            __m256i y = _mm256_loadu_si256((const __m256i *)(ab + 2));
            __m256 s0 = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(ax0, _mm256_sign_epi8(y, x0)), ones));
            __m256 s1 = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(ax1, _mm256_sign_epi8(y, x1)), ones));
            acc0[c] = _mm256_fmadd_ps(_mm256_mul_ps(dw0, da), s0, acc0[c]);
            acc1[c] = _mm256_fmadd_ps(_mm256_mul_ps(dw1, da), s1, acc1[c]);
        }
    }
    _Pragma("GCC unroll 4")
    for (int c = 0; c < NC; c++) {
        out[c * out_stride] = q8_hsum8_avx(acc0[c]);
        out[c * out_stride + 1] = q8_hsum8_avx(acc1[c]);
    }
}

Q8_COLS2_FNS(cols2_avx2_, q8_rows2_cols_avx2)
#define COLS2_AVX2 Q8_COLS_TABLE(cols2_avx2_)

/* One block of one row into the row's accumulator: ggml's vec_dot step
 * (acc = fma(dw*da, lane sums, acc), the scale product in scalar). */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline __m256 dot1_block(const float *h, const uint8_t *wb, const uint8_t *ab, __m256i ones, __m256 acc)
{
    float d = h[q8_rd16(wb)] * h[q8_rd16(ab)];
    __m256i x = _mm256_loadu_si256((const __m256i *)(wb + 2));
    __m256i y = _mm256_loadu_si256((const __m256i *)(ab + 2));
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones)), acc);
}

/* Bytes ahead that the one-row kernel prefetches in its weight row. */
#define DOT1_PF_DIST 768
/* One row, returning the float, so q8_0_vec_dot reaches it with a tail jump
 * (no result slot on the stack, no second frame). Two blocks per turn on one
 * byte index shared by both rows, and one prefetch per turn (68 bytes, about
 * a cache line) 768 bytes ahead in the weight row. Why: ggml's loop is the
 * same block step with three loop-control ops per block; both wait on the one
 * fma chain per row (~1.6 ns per fma here), so the ops the core must carry
 * per block decide how far ahead it can reach into the next row. Measured
 * (docs/PERFORMANCE.md, Session 3, paired vs ggml): two blocks a turn
 * without the prefetch 0.97-1.13x in cache but 0.96-1.07x on a 4096x4096
 * matrix streaming from memory; this kernel 1.11-1.19x streaming and
 * 1.00-1.11x in cache. A prefetch every block cost up to 10 % in cache (and
 * more with gcc's second pointer); one every four blocks upset the hardware
 * prefetcher (0.60-0.96x streaming). A prefetch never faults, so the lines
 * it names past the row's end are harmless. */
__attribute__((target("avx2,f16c,fma")))
static float q8_dot1_avx2(const float *h, const uint8_t *w, const uint8_t *a, size_t nb)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps();
    size_t i = 0, pairs_end = nb / 2 * (2 * Q8_0_BYTES);
    for (; i < pairs_end; i += 2 * Q8_0_BYTES) {
        /* as one op on the shared index: written with _mm_prefetch, gcc
         * keeps a second pointer for it, one more add per turn */
        __asm__("prefetcht0 %c2(%0,%1)" : : "r"(w), "r"(i), "i"(DOT1_PF_DIST));
        acc = dot1_block(h, w + i, a + i, ones, acc);
        acc = dot1_block(h, w + i + Q8_0_BYTES, a + i + Q8_0_BYTES, ones, acc);
    }
    if (nb & 1)
        acc = dot1_block(h, w + i, a + i, ones, acc);
    return q8_hsum8_avx(acc);
}

/* Bytes ahead that each row stream of the decode kernel prefetches (15
 * blocks). Why: a large Q8_0 matrix streams from DRAM and 4 rows are 4
 * streams; measured on 4096x4096 one column, paired vs ggml over three
 * alternating rounds: 1.06-1.24x with it, 1.07-1.18x without (and the one-row
 * vec_dot 1.04-1.08x vs 0.95-1.02x, but 0.76-0.86x on rows already in cache,
 * so q8_0_vec_dot does not use it). */
#define PF_DIST 512
/* Decode (one column): R (1, 2 or 4) weight rows against one activation in a
 * single pass, each row with exactly vec_dot's chain (lane sums from
 * sign/maddubs/madd, cvt, acc = fma(dw*da, s, acc) block after block, hsum).
 * Why: row by row, every row re-loads each activation block and its scale
 * and one fma chain per row is all the core has to overlap; R rows
 * interleaved block by block load the activation's 32 bytes and broadcast
 * its scale once for the R rows and give R independent chains. The product
 * dw*da is taken in every lane (vmulps of the two broadcasts): the same IEEE
 * product as ggml's scalar one, without a scalar-to-vector move per row. */
__attribute__((target("avx2,f16c,fma"), always_inline))
static inline void q8_rows_1col(const float *h, const uint8_t *w, size_t w_row, const uint8_t *a, size_t nb,
                             float *y, int R)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[4];
    for (int r = 0; r < R; r++)
        acc[r] = _mm256_setzero_ps();
    for (size_t b = 0; b < nb; b++) {
        const uint8_t *ab = a + b * Q8_0_BYTES;
        __m256i q = _mm256_loadu_si256((const __m256i *)(ab + 2));
        __m256 da = _mm256_broadcast_ss(&h[q8_rd16(ab)]);
        _Pragma("GCC unroll 4")
        for (int r = 0; r < R; r++) {
            const uint8_t *wb = w + r * w_row + b * Q8_0_BYTES;
            _mm_prefetch((const char *)(wb + PF_DIST), _MM_HINT_T0);
            __m256i x = _mm256_loadu_si256((const __m256i *)(wb + 2));
            __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(q, x));
            __m256 s = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
            __m256 d = _mm256_mul_ps(_mm256_broadcast_ss(&h[q8_rd16(wb)]), da);
            acc[r] = _mm256_fmadd_ps(d, s, acc[r]);
        }
    }
    _Pragma("GCC unroll 4")
    for (int r = 0; r < R; r++)
        y[r] = q8_hsum8_avx(acc[r]);
}

/* Rows [0, nrows) against one column: groups of four, then a pair, then one. */
Q8_GEMV_GROUPS(gemv_avx2, q8_rows_1col)
#define GEMV_AVX2 gemv_avx2
#else
#define GEMV_AVX2 NULL
#define COLS2_AVX2 Q8_NO_COLS2
#endif

/* ---------------------------------------------------------------- products */

/* The Q8_0 entry in the shared driver's table (q8_0.c). */
static const q8_kind Q8_KIND = {
    "Q8_0", Q8_0_BLOCK, Q8_0_BYTES, q8_dot_portable, Q8_COLS_TABLE(cols_avx2_), GEMV_AVX2, COLS2_AVX2,
};

/* One row: the row kernel called directly (no table, no second call
 * level), as ggml's vec_dot is one direct kernel. Not the decode kernel's
 * one-row form: its prefetch made a streaming 4096x4096 row-by-row GEMV
 * 1.04-1.12x ggml but rows already in cache 0.76-0.86x (576x1152), where
 * both sides wait on the one fma chain per row (~1.5 ns per block, ggml's
 * order, which the bits forbid splitting); this kernel is 0.94-1.00x there. */
float q8_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks)
{
#if Q8_X86
    if (q8_simd())
        return q8_dot1_avx2(f16_table, w, act, nblocks);
#endif
    return q8_dot_portable(w, act, nblocks);
}

const float *q8_f16_table(void) { return f16_table; }

int q8_0_mm_init(q8_mm *m, const uint8_t *w, size_t w_len, size_t rows,
                 size_t k, const uint8_t *act, size_t act_len, size_t ncols,
                 float *y, size_t y_len, char *err, size_t errlen)
{
    return q8_mm_check(m, "Q8_0", Q8_0_BLOCK, Q8_0_BYTES, w, w_len, rows, k, act, act_len, ncols, y,
                       y_len, err, errlen);
}

void q8_0_mm_rows(void *ctx, size_t r0, size_t r1, int worker)
{
    (void)worker;
    q8_kind_rows(&Q8_KIND, ctx, r0, r1);
}

int q8_0_matmul(par_pool *p, const uint8_t *w, size_t w_len, size_t rows,
                size_t k, const uint8_t *act, size_t act_len, size_t ncols,
                float *y, size_t y_len, char *err, size_t errlen)
{
    return q8_kind_matmul(&Q8_KIND, q8_0_mm_rows, p, w, w_len, rows, k, act, act_len, ncols, y, y_len,
                          err, errlen);
}

/* ---------------------------------------------------------------- the shared driver */

/* Why one driver: the three weight types differ only in their per-block
 * arithmetic; the walk over rows and column groups, the portable fallback and
 * the checks are the same and live here once. Rows outer, columns inner, so a
 * weight row is read from memory once and reused from L1 by every group of
 * four columns; with cols2, rows go by pairs so each column's activations are
 * streamed from L2 once per two rows (4096x4096, 32 columns, paired vs ggml:
 * Q1_0 1.54-1.75x / 2 threads 1.16-1.32x against 1.30-1.51x / 0.93-1.16x one
 * row at a time; Q8_0 1.57-1.67x / 1.16-1.23x against 1.48-1.52x /
 * 1.12-1.13x). The odd last row of a chunk takes the one-row kernels. */
void q8_kind_rows(const q8_kind *t, const q8_mm *m, size_t r0, size_t r1)
{
    size_t nb = m->k / t->blk;
    if (!q8_simd() || !t->cols[0]) {
        for (size_t c = 0; c < m->ncols; c++)
            for (size_t r = r0; r < r1; r++)
                m->y[c * m->rows + r] = t->dot(m->w + r * m->w_row, m->act + c * m->a_row, nb);
        return;
    }
    if (m->ncols == 1 && t->gemv) {
        t->gemv(f16_table, m->w + r0 * m->w_row, m->w_row, r1 - r0, m->act, nb, m->y + r0);
        return;
    }
    size_t r = r0;
    if (t->cols2[0])
        for (; r + 2 <= r1; r += 2) {
            const uint8_t *w = m->w + r * m->w_row;
            for (size_t c = 0; c < m->ncols; c += 4) {
                size_t nc = m->ncols - c < 4 ? m->ncols - c : 4;
                t->cols2[nc - 1](f16_table, w, m->w_row, m->act + c * m->a_row, m->a_row, nb,
                                 m->y + c * m->rows + r, m->rows);
            }
        }
    for (; r < r1; r++) {
        const uint8_t *w = m->w + r * m->w_row;
        for (size_t c = 0; c < m->ncols; c += 4) {
            size_t nc = m->ncols - c < 4 ? m->ncols - c : 4;
            t->cols[nc - 1](f16_table, w, m->act + c * m->a_row, m->a_row, nb, m->y + c * m->rows + r,
                            m->rows);
        }
    }
}

/* rows_fn is the type's own par_rows_fn (a thin call of q8_kind_rows with
 * its table), so the pool's context stays the bare q8_mm that forward.c's
 * par_jobs lists also pass. */
int q8_kind_matmul(const q8_kind *t, par_rows_fn rows_fn, par_pool *p,
                   const uint8_t *w, size_t w_len, size_t rows, size_t k,
                   const uint8_t *act, size_t act_len, size_t ncols, float *y,
                   size_t y_len, char *err, size_t errlen)
{
    q8_mm m;
    if (q8_mm_check(&m, t->name, t->blk, t->bytes, w, w_len, rows, k, act, act_len, ncols, y, y_len, err,
                    errlen) != 0)
        return -1;
    if (rows && ncols)
        par_rows(p, rows_fn, &m, rows, q8_mm_chunk(&m, p));
    return 0;
}

size_t q8_mm_chunk(const q8_mm *m, const par_pool *p)
{
    if (m->ncols < 2)
        return 0;
    size_t c = par_default_chunk(p, m->rows);
    return c < Q8_MANY_COLS_CHUNK ? c : Q8_MANY_COLS_CHUNK;
}
