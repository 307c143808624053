/*
 * repack.h -- the interleaved weight layouts llama.cpp b11669's CPU backend
 * builds at load on an AVX2 machine, and their products.
 *
 * What b11669 does (ggml-cpu/repack.cpp, ggml_repack_get_optimal_repack_type,
 * on haswell): every Q4_0 and Q4_K matrix whose row count is a multiple of 8
 * (and that sits in the repack buffer: matrix-multiply weights, never
 * token_embd) is stored as groups of 8 rows interleaved 8 bytes at a time
 * (`q4_0_8x8`, `q4_K_8x8`). Its mul_mat then quantizes the activation
 * columns in groups of 4 with the interleaved quantizer (Q8_K 4x8 for Q4_K,
 * ggml_quantize_mat_q8_K_4x8) and multiplies them with gemm; the columns past
 * the last multiple of 4 (all of them when there are fewer than 4) are
 * quantized by the plain from_float (q8_k_quantize: quantize_row_q8_K_ref)
 * and go through gemv, one column at a time. Rows are split among threads in
 * chunks aligned to 8 rows: the thread count never changes a bit.
 *
 * Float order of ggml_gemv_q4_K_8x8_q8_K (AVX2), per weight row j of a
 * group, all of it different from vec_dot's: per super-block the exact
 * integer sums isum = sum over the 8 sub-blocks of scale * (q4 . q8) and
 * imin = sum of min * (pairwise bsum sum, wrapping at 16 bits); then
 * acc = fma((float)isum, d_j * d_act, acc) and
 * accm = fma((float)imin, dmin_j * d_act, accm); the result is acc - accm.
 *
 * ggml_gemm_q4_K_8x8_q8_K (AVX2), per weight row j and activation column c:
 * the same integers, but taken per PAIR of sub-blocks (4 per super-block):
 * acc = fma((float)isum_pair, d_j * d_c, acc),
 * accm = fma((float)imin_pair, dmin_j * d_c, accm), result acc - accm. Its
 * activations come from ggml_quantize_mat_q8_K_4x8 (AVX2), which is not
 * quantize_row_q8_K: see q8_k_quantize4x8.
 */
#ifndef BANKML_REPACK_H
#define BANKML_REPACK_H

#include <stddef.h>
#include <stdint.h>

#include "base/par.h"

#define Q4_KX8_BYTES 1152 /* one super-block of 8 rows: d[8], dmin[8] (f16), scales[96], qs[1024] */

/* Bytes of a repacked Q4_K matrix of `rows` rows (a multiple of 8) of k
 * values (a multiple of 256): the same as the plain matrix. */
static inline size_t q4_kx8_bytes(size_t rows, size_t k) { return rows / 8 * (k / 256) * Q4_KX8_BYTES; }

/* Repacks a plain Q4_K matrix (rows x k, w_len bytes) into out (out_len
 * bytes) as b11669's repack_q4_K_to_q4_K_8_bl with interleave 8: for each
 * group of 8 rows and each super-block, the 8 f16 d, the 8 f16 dmin, the
 * scales and mins regrouped by sub-block (12 bytes per sub-block in the
 * 6-bit K format, "index" j = row j), and the quants 8 bytes per row in
 * turn. Returns 0, or -1 with a reason (rows not a multiple of 8, k not a
 * multiple of 256, short buffers). */
int q4_k_repack8(const uint8_t *w, size_t w_len, size_t rows, size_t k, uint8_t *out, size_t out_len,
                 char *err, size_t errlen);

/* y[r] for r in [0, rows): a repacked Q4_K matrix (rows a multiple of 8) times
 * one Q8_K activation row of k values (nb = k/256 blocks), with the bits of
 * ggml_gemv_q4_K_8x8_q8_K (AVX2) over those rows. Unchecked: the caller owns
 * the lengths (q4_kx8_bytes(rows, k) and k/256 Q8_K blocks). */
void q4_k_x8_gemv(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act, float *y);

/* Bytes of one Q8_Kx4 block: f32 d[4], int8 qs[1024] (8 values of column 0,
 * 8 of column 1, ... in turn), int16 bsums[64] (bsums[16k + 4c + i]: column
 * c, values 64k + 16i .. +15). */
#define Q8_KX4_BYTES 1168

/* Quantizes 4 activation columns (column r at x + r*k, k a multiple of 256)
 * into k/256 Q8_Kx4 blocks at out, as the AVX2 ggml_quantize_mat_q8_K_4x8 of
 * b11669: per column and super-block, amax through 8 vmaxps lanes and q8_0's
 * tree, the sign of the scale from whether a non-negative value holds the
 * maximum (tracked per lane as that kernel does; not quantize_row_q8_K_ref's
 * "first largest |x|"), iscale = -+127/amax, d = 1/iscale, q =
 * round-half-even(x*iscale) with vcvtps2dq and saturating packs (NaN, inf
 * and overflow give -128). Unchecked. */
void q8_k_quantize4x8(const float *x, size_t k, uint8_t *out);

/* y[c*y_stride + r] for the 4 columns c of act4 (k/256 = nb Q8_Kx4 blocks)
 * and rows r in [0, rows) of a repacked Q4_K matrix (rows a multiple of 8):
 * the bits of ggml_gemm_q4_K_8x8_q8_K (AVX2). Unchecked. */
void q4_k_x8_gemm4(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act4, float *y, size_t y_stride);

/* ---- Q4_0 8x8 (q4_0_8x8 in llama.cpp's log) ----
 * Layout per 8 rows x 32 values: f16 d[8], then qs[128] in 8-byte pieces,
 * piece i from row i % 8, bytes 8*(i/8) of its 16, every nibble XOR 8 (so a
 * nibble read as a signed 4-bit number is the value q - 8).
 * ggml_gemv_q4_0_8x8_q8_0 (AVX2) per row j: isum over the 32 values with
 * vpsignb on the weight (so an activation of -128 against a negative weight
 * counts -128*|w|, as vec_dot does), acc = fma((float)isum, d_j * d_a, acc)
 * per block. ggml_gemm_q4_0_8x8_q8_0: the same but vpsignb on the
 * activation (-128 counts as 128 * -w: the exact product), activations from
 * ggml_quantize_mat_q8_0_4x8 (q8_0's quantizer per column, interleaved). */
#define Q4_0X8_BYTES 144
#define Q8_0X4_BYTES 136 /* f16 d[4], qs[128]: 8 values of column 0, 8 of column 1, ... */

/* Repacks a plain Q4_0 matrix (rows a multiple of 8, k of 32) as b11669's
 * repack_q4_0_to_q4_0_8_bl. Returns 0, or -1 with a reason. */
int q4_0_repack8(const uint8_t *w, size_t w_len, size_t rows, size_t k, uint8_t *out, size_t out_len,
                 char *err, size_t errlen);
/* 4 columns (column r at x + r*k) into k/32 Q8_0x4 blocks (unchecked). */
void q8_0_quantize4x8(const float *x, size_t k, uint8_t *out);
/* y[r], r < rows: repacked Q4_0 times one q8_0 row of nb blocks (unchecked). */
void q4_0_x8_gemv(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act, float *y);
/* y[c*y_stride + r]: repacked Q4_0 times the 4 columns of act4 (unchecked). */
void q4_0_x8_gemm4(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act4, float *y, size_t y_stride);

/* ---- IQ4_NL 8x8 (iq4_nl_8x8 in llama.cpp's log) ----
 * b11669 repacks an IQ4_NL matrix with rows in eights as Q4_0's (AVX2:
 * ggml_repack_get_optimal_repack_type, repack_iq4_nl_to_iq4_nl_8_bl): the
 * same layout, the code nibbles copied as they are (no XOR), and the same
 * gemv/gemm template (gemv_q4_b32_8x8_q8_0_lut_avx / gemm_..._lut_avx) with
 * the code-to-value table kvalues_iq4nl instead of Q4_0's sign extension:
 * every Q4_0 8x8 fact above holds with values -127..113 (no pair of
 * vpmaddubsw can saturate: 2 * 127 * 128 < 32768). Its activations are q8_0
 * 4x8 (ggml_quantize_mat_q8_0_4x8) and plain q8_0. */
int iq4_nl_repack8(const uint8_t *w, size_t w_len, size_t rows, size_t k, uint8_t *out, size_t out_len,
                   char *err, size_t errlen);
void iq4_nl_x8_gemv(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act, float *y);
void iq4_nl_x8_gemm4(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act4, float *y, size_t y_stride);

/* ---- the whole product, as b11669's repacked forward_mul_mat ----
 * y = W x for a repacked matrix of `type` (Q4_K_TYPE 12, Q4_0 2 or IQ4_NL 20), rows a
 * multiple of 8: x holds ncols columns of k floats (column c at x + c*k),
 * y[c*rows + r]. The columns in groups of 4 are quantized by the 4x8
 * quantizer and multiplied by gemm; the ncols % 4 last ones by the plain
 * quantizer (Q8_K ref / q8_0) and gemv. Rows are shared among the pool's
 * workers in whole 8-row groups (NULL pool: the caller alone); no bit depends
 * on the split. work: x8_work_bytes(type, k, ncols) bytes for the quantized
 * activations. Returns 0, or -1 with a reason (nothing is read on failure). */
size_t x8_work_bytes(int type, size_t k, size_t ncols);

/* ---- the same product in pieces, for the weight-type table (wtype.c) ----
 * The activations of ncols columns in ONE layout for both quantizers:
 * column c (or the group of 4 it starts) at act + c * a1, a1 the plain
 * activation row (Q8_K: 292 bytes per 256 values, q8_0: 34 per 32; a 4x8
 * block is exactly 4 plain rows long). x8_quantize_cols writes columns
 * [c0, c1) of x (column c at x + c*k) into that layout, c0 a multiple of 4:
 * groups of 4 below n4 = ncols - ncols % 4 through the 4x8 quantizer, the
 * rest through the plain one, as forward_mul_mat (unchecked). x8_mm_init
 * checks a product over such activations (act_len bytes) and fills *m;
 * x8_mm_rows (a par_rows_fn over rows / 8 groups of 8 rows) runs it. */
typedef struct {
    /* the type's kernels (Q4_K, Q4_0 or IQ4_NL 8x8) */
    void (*gemv)(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act, float *y);
    void (*gemm4)(const uint8_t *wr, size_t rows, size_t nb, const uint8_t *act4, float *y, size_t y_stride);
    const uint8_t *wr;
    size_t rows, nb, gbytes; /* blocks per row; bytes per 8-row group */
    const uint8_t *act4, *act1;
    size_t a4row, a1row, n4, ncols;
    float *y;
} x8_mm;
void x8_quantize_cols(int type, const float *x, size_t k, size_t c0, size_t c1, size_t ncols, uint8_t *act);
int x8_mm_init(x8_mm *m, int type, const uint8_t *wr, size_t wr_len, size_t rows, size_t k,
               const uint8_t *act, size_t act_len, size_t ncols, float *y, size_t y_len, char *err,
               size_t errlen);
void x8_mm_rows(void *m, size_t g0, size_t g1, int worker);
int x8_mul_mat(par_pool *p, int type, const uint8_t *wr, size_t wr_len, size_t rows, size_t k, const float *x,
               size_t ncols, float *y, size_t y_len, uint8_t *work, size_t work_len, char *err, size_t errlen);

#endif
