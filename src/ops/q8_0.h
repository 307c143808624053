/*
 * q8_0.h -- Q8_0 weights (ggml type 8) and the q8_0 activations every
 * quantized weight type here multiplies against (Q8_0, Q1_0, Q2_0 all have
 * vec_dot_type q8_0 in ggml's CPU type traits).
 *
 * Bit-exact with llama.cpp b11669's libggml-cpu-haswell.so:
 * - q8_0_quantize reproduces quantize_row_q8_0 (the AVX2 one, not _ref):
 *   amax by vmaxps in ggml's order (so a NaN can be lost or kept exactly as
 *   there), d = amax/127 rounded to f16 (nearest even), id = 127/amax (0 when
 *   amax is 0), q = round-half-even(x*id) through vcvtps2dq and saturating
 *   packs (NaN, +-inf and overflow give -128).
 * - q8_0_vec_dot reproduces ggml_vec_dot_q8_0_q8_0 (AVX2): eight lanes of
 *   four-product integer sums, acc = fma(dw*da, lane, acc) block after block,
 *   then ggml's hsum_float_8. A weight of -128 against a negative activation
 *   is wrong the same way (vpsignb wraps).
 * - Products of two or more columns go through llamafile's tinyBLAS_Q0_AVX in
 *   ggml; every one of its tile shapes gives each element the same chain as
 *   vec_dot (same lanes, same fma order, same hsum), so one kernel serves both.
 *   The CPU backend has no repacked Q8_0 layout on x86 (repack.cpp: NEON/RVV).
 *
 * Layout: a block is 34 bytes: f16 scale d (little-endian), then 32 int8.
 *
 * Matrix products y = W x: W has `rows` rows of k values; x is `ncols`
 * columns of k values already quantized to q8_0 (ncols rows of k/32 blocks,
 * contiguous); y[c*rows + r] (ggml's dst layout: one column per token).
 * Rows are shared among the pool's workers in chunks; bits never depend on
 * the thread count.
 */
#ifndef BANKML_Q8_0_H
#define BANKML_Q8_0_H

#include <stddef.h>
#include <stdint.h>

#include "base/par.h"

#if (defined(__x86_64__) || defined(__i386__)) && !defined(BANKML_NO_SIMD)
#include <immintrin.h>
#define Q8_X86 1 /* AVX2+F16C+FMA kernels compiled (chosen at run time) */
#else
#define Q8_X86 0
#endif

#define Q8_0_TYPE 8
#define Q8_0_BLOCK 32  /* values per block */
#define Q8_0_BYTES 34  /* bytes per block */

/* Bytes of q8_0 data holding n values (n a multiple of 32). */
static inline size_t q8_0_row_bytes(size_t n) { return n / Q8_0_BLOCK * Q8_0_BYTES; }

/* One matrix product against q8_0 activations, checked once by a *_mm_init
 * of the weight's module, then run by rows (the par_rows_fn of that module)
 * so several matrices can share one wake of the pool (par_jobs). */
typedef struct {
    const uint8_t *w;    /* weight row r at w + r*w_row */
    size_t w_row;        /* bytes per weight row */
    size_t rows, k;      /* rows of W, values per row */
    const uint8_t *act;  /* column c at act + c*a_row (q8_0) */
    size_t a_row;        /* bytes per activation column */
    size_t ncols;        /* columns (tokens) */
    float *y;            /* y[c*rows + r] */
} q8_mm;

/* Quantizes n floats (n a multiple of 32) into n/32 q8_0 blocks at out, which
 * holds out_len bytes. Returns 0, or -1 with a reason in err (may be NULL). */
int q8_0_quantize(const float *x, size_t n, uint8_t *out, size_t out_len,
                  char *err, size_t errlen);

/* Unchecked inner quantizer: nblocks blocks from 32*nblocks floats. */
void q8_0_quantize_blocks(const float *x, uint8_t *out, size_t nblocks);

/* Dequantizes n values (n a multiple of 32) of a Q8_0 row of w_len bytes into
 * y: y = q * d, one float product each (ggml's dequantize_row_q8_0, which
 * get_rows uses). Returns 0, or -1 with a reason. */
int q8_0_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y,
                    char *err, size_t errlen);

/* Dot product of one Q8_0 weight row with one q8_0 activation row, both of
 * nblocks blocks (unchecked: the caller owns the lengths). */
float q8_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);

/* Checks a product's shape and byte lengths and fills *m. w_len: bytes of W
 * (>= rows rows of k values), act_len: bytes of the activations (>= ncols
 * rows), y_len: floats in y (>= rows*ncols). k must be a multiple of 32.
 * Returns 0, or -1 with a reason (nothing is read on failure). */
int q8_0_mm_init(q8_mm *m, const uint8_t *w, size_t w_len, size_t rows,
                 size_t k, const uint8_t *act, size_t act_len, size_t ncols,
                 float *y, size_t y_len, char *err, size_t errlen);

/* par_rows_fn: computes rows [r0, r1) of every column of a checked q8_mm. */
void q8_0_mm_rows(void *m, size_t r0, size_t r1, int worker);

/* init + run on the pool (NULL pool: the caller alone). */
int q8_0_matmul(par_pool *p, const uint8_t *w, size_t w_len, size_t rows,
                size_t k, const uint8_t *act, size_t act_len, size_t ncols,
                float *y, size_t y_len, char *err, size_t errlen);

/* Shared by q8_0.c, q1_0.c and q2_0.c: 1 when the AVX2+F16C+FMA kernels run
 * (CPU support, unless switched off), 0 for the portable C (same bits). */
int q8_simd(void);

/* A tile of a product through a one-output kernel dot(w, act, nblocks):
 * y[c*y_stride + r] for rows r < K_TILE_ROWS (w + r*w_row) and columns
 * c < K_TILE_COLS (act + c*a_row), each output the same bits as dot of its
 * row and column (the weight type's *_tile() names its dot). */
typedef void (*k_tile_fn)(const uint8_t *w, size_t w_row, const uint8_t *act, size_t a_row, size_t nblocks,
                          float *y, size_t y_stride);
#define K_TILE_ROWS 2
#define K_TILE_COLS 4
/* Test/bench hook: on = 0 forces the portable C; on = 1 allows SIMD again
 * (only if the CPU has it). Not for use while kernels run on other threads. */
void q8_set_simd(int on);

/* Shared checker for the three weight modules: fills *m for a weight type of
 * `blk` values and `bytes` bytes per block, after checking k, lengths and
 * overflow. `what` names the type in messages ("Q1_0"). */
int q8_mm_check(q8_mm *m, const char *what, size_t blk, size_t bytes,
                const uint8_t *w, size_t w_len, size_t rows, size_t k,
                const uint8_t *act, size_t act_len, size_t ncols, float *y,
                size_t y_len, char *err, size_t errlen);

/* ---- the product driver shared by Q8_0, Q1_0 and Q2_0 (additive) ----
 * A weight type hands the driver its block geometry and its hot loops; the
 * driver checks shapes (q8_mm_check), splits rows among the pool's workers
 * and walks the columns in groups of four (rows in pairs when the type has
 * cols2), so each type only writes what is
 * really its own: the per-block arithmetic. */

/* One weight row against NC = index+1 columns (column c at act + c*a_row),
 * nb weight blocks; writes y[c*y_stride]. h is the driver's fp16 -> f32
 * table of all 65,536 halves (F16C's bits), where the kernels read their
 * block scales, as ggml does: one load where vpinsrw + vcvtph2ps are vector
 * uops on the ports the integer products need. */
typedef void (*q8_cols_fn)(const float *h, const uint8_t *w, const uint8_t *act,
                           size_t a_row, size_t nb, float *y, size_t y_stride);
/* Rows [0, nrows) of W (row r at w + r*w_row) against ONE column: y[r]. */
typedef void (*q8_gemv_fn)(const float *h, const uint8_t *w, size_t w_row,
                           size_t nrows, const uint8_t *act, size_t nb,
                           float *y);
/* TWO weight rows (row 1 at w + w_row) against NC = index+1 columns: writes
 * y[c*y_stride] for row 0 and y[c*y_stride + 1] for row 1, each element with
 * exactly the chain q8_cols_fn gives it. */
typedef void (*q8_cols2_fn)(const float *h, const uint8_t *w, size_t w_row, const uint8_t *act,
                            size_t a_row, size_t nb, float *y, size_t y_stride);
/* Portable vec_dot of one row (nb weight blocks), same bits as the SIMD. */
typedef float (*q8_dot_fn)(const uint8_t *w, const uint8_t *act, size_t nb);

typedef struct {
    const char *name;     /* "Q1_0", in refusals */
    size_t blk, bytes;    /* values and bytes per weight block */
    q8_dot_fn dot;        /* portable kernel (always set) */
    q8_cols_fn cols[4];   /* SIMD kernels for 1..4 columns (NULL: none) */
    q8_gemv_fn gemv;      /* SIMD one-column kernel over many rows, or NULL
                             (then cols[0] row by row) */
    q8_cols2_fn cols2[4]; /* SIMD kernels for 2 rows x 1..4 columns, or
                             NULLs (then cols row by row) */
} q8_kind;

/* Rows [r0, r1) of every column of a checked product, with t's kernels. */
void q8_kind_rows(const q8_kind *t, const q8_mm *m, size_t r0, size_t r1);

/* Rows per chunk for a checked product on p (par_job.chunk): 0, the pool's
 * default, for one column; for several columns the default capped at
 * Q8_MANY_COLS_CHUNK rows. Why: a chunk of many columns is already long
 * work (128 rows x 32 columns of 4096 Q8_0 values ~ 0.6 ms), so the claims
 * cost nothing and smaller chunks only even out the end of the product when
 * the other core is busy: 4096x4096, 32 columns, 2 threads, three paired
 * rounds each (load 1.1): default (128) 0.94-1.11x ggml, 64 rows 1.02-1.15x,
 * 32 rows 0.97-1.12x. */
#define Q8_MANY_COLS_CHUNK 64
size_t q8_mm_chunk(const q8_mm *m, const par_pool *p);

/* Checks (as q8_mm_check with t's geometry) and runs the product on the pool
 * through rows_fn, the type's par_rows_fn. Returns 0, or -1 with a reason. */
int q8_kind_matmul(const q8_kind *t, par_rows_fn rows_fn, par_pool *p,
                   const uint8_t *w, size_t w_len, size_t rows, size_t k,
                   const uint8_t *act, size_t act_len, size_t ncols, float *y,
                   size_t y_len, char *err, size_t errlen);

/* Little-endian fp16 scale at p (blocks are byte-packed, so no aligned
 * 16-bit load). */
static inline uint16_t q8_rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* ggml's hsum_float_8 on eight lanes: (hi + lo) pairwise, then the two
 * halves of that, then the last pair. */
static inline float q8_hsum8(const float l[8])
{
    float h0 = l[4] + l[0], h1 = l[5] + l[1], h2 = l[6] + l[2], h3 = l[7] + l[3];
    float a0 = h0 + h2, a1 = h1 + h3;
    return a0 + a1;
}

/* The driver's fp16 -> f32 table of all 65,536 halves (F16C's bits); filled
 * once q8_simd() has answered 1, so call it only after that. For the
 * single-row vec_dot entries, which call their kernel directly. */
const float *q8_f16_table(void);

#if Q8_X86
/* q8_hsum8 on a register, in the same order. */
__attribute__((target("avx2,f16c,fma")))
static inline float q8_hsum8_avx(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Defines name##1 .. name##4, the q8_cols_fn table of an always_inline AVX2
 * kernel `body(h, w, act, a_row, nb, y, y_stride, NC)`: one function per column
 * count, so each is compiled with NC a constant (unrolled, accumulators in
 * registers). */
#define Q8_COLS_FN(name, body, NC)                                                              \
    __attribute__((target("avx2,f16c,fma"))) static void name##NC(                              \
        const float *h, const uint8_t *w, const uint8_t *a, size_t ar, size_t nb, float *y,     \
        size_t ys) { body(h, w, a, ar, nb, y, ys, NC); }
#define Q8_COLS_FNS(name, body) \
    Q8_COLS_FN(name, body, 1) Q8_COLS_FN(name, body, 2) Q8_COLS_FN(name, body, 3) Q8_COLS_FN(name, body, 4)
/* The q8_kind.cols initialiser for name##1 .. name##4. */
#define Q8_COLS_TABLE(name) {name##1, name##2, name##3, name##4}

/* The same for a q8_cols2_fn body `body(h, w, w_row, act, a_row, nb, y,
 * y_stride, NC)`. */
#define Q8_COLS2_FN(name, body, NC)                                                             \
    __attribute__((target("avx2,f16c,fma"))) static void name##NC(                              \
        const float *h, const uint8_t *w, size_t wr, const uint8_t *a, size_t ar, size_t nb,    \
        float *y, size_t ys) { body(h, w, wr, a, ar, nb, y, ys, NC); }
#define Q8_COLS2_FNS(name, body) \
    Q8_COLS2_FN(name, body, 1) Q8_COLS2_FN(name, body, 2) Q8_COLS2_FN(name, body, 3) Q8_COLS2_FN(name, body, 4)
/* Defines `static void name(h, w, w_row, nrows, act, nb, y)`, a one-column
 * product over rows [0, nrows) in groups of four, then a pair, then one,
 * from an always_inline kernel `rows(h, w, w_row, act, nb, y, R)` that keeps R
 * rows' chains side by side (Q1_0 and Q8_0 share this walk). */
#define Q8_GEMV_GROUPS(name, rows)                                                              \
    __attribute__((target("avx2,f16c,fma"))) static void name(                                 \
        const float *h, const uint8_t *w, size_t w_row, size_t nrows, const uint8_t *a,         \
        size_t nb, float *y)                                                                    \
    {                                                                                           \
        size_t r = 0;                                                                           \
        for (; r + 4 <= nrows; r += 4) rows(h, w + r * w_row, w_row, a, nb, y + r, 4);          \
        if (r + 2 <= nrows) {                                                                   \
            rows(h, w + r * w_row, w_row, a, nb, y + r, 2);                                     \
            r += 2;                                                                             \
        }                                                                                       \
        if (r < nrows) rows(h, w + r * w_row, w_row, a, nb, y + r, 1);                          \
    }
#else
#define Q8_COLS_TABLE(name) {NULL, NULL, NULL, NULL}
#endif
#define Q8_NO_COLS2 {NULL, NULL, NULL, NULL}

#endif
