/*
 * q2_0.h -- Q2_0 weights (ggml type 42, group 64, "Q2_0_g64"): 2-bit codes
 * against q8_0 activations (q8_0.h), bit-exact with llama.cpp b11669's
 * libggml-cpu-haswell.so.
 *
 * Block: 18 bytes for 64 weights: f16 scale d, then 16 bytes of 2-bit codes
 * LSB-first (byte i holds weights 4i..4i+3); code c means (c - 1) * d, so
 * {-1, 0, +1, +2}. Code 3 never comes out of ggml's quantizer but is
 * accepted. One block meets two q8_0 blocks.
 *
 * Float order: b11669's haswell build has an AVX2 kernel (b11192 had only
 * the scalar one; read from the shipped binary, not the v0.5.0 source):
 * eight lanes, each the exact integer sum of four (c - 1) * q; two
 * accumulators, even weight blocks into one and odd into the other:
 *   acc = fma(d * da0, s0, acc); acc = fma(d * da1, s1, acc)
 * (da0, da1 the two q8 scales, s0, s1 the lane sums of the two halves);
 * an odd last block goes to the even accumulator; the result is ggml's
 * hsum_float_8 of (even + odd). Every x86 Q2_0 product goes through this
 * vec_dot (no sgemm case, no repack).
 */
#ifndef BANKML_Q2_0_H
#define BANKML_Q2_0_H

#include "ops/q8_0.h"

#define Q2_0_TYPE 42
#define Q2_0_BLOCK 64
#define Q2_0_BYTES 18

/* Dequantizes n values (n a multiple of 64) of a row of w_len bytes:
 * (float)(c - 1) * d (ggml's dequantize_row_q2_0). Returns 0, or -1 with a
 * reason in err. */
int q2_0_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y,
                    char *err, size_t errlen);

/* Dot product of one Q2_0 row of nblocks blocks with q8_0 activations of
 * 2*nblocks blocks (unchecked). */
float q2_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);

/* Checks shape and byte lengths (see q8_0_mm_init) and fills *m. */
int q2_0_mm_init(q8_mm *m, const uint8_t *w, size_t w_len, size_t rows,
                 size_t k, const uint8_t *act, size_t act_len, size_t ncols,
                 float *y, size_t y_len, char *err, size_t errlen);

/* par_rows_fn over a checked q8_mm: rows [r0, r1) of every column. */
void q2_0_mm_rows(void *m, size_t r0, size_t r1, int worker);

/* init + run on the pool (NULL pool: the caller alone). */
int q2_0_matmul(par_pool *p, const uint8_t *w, size_t w_len, size_t rows,
                size_t k, const uint8_t *act, size_t act_len, size_t ncols,
                float *y, size_t y_len, char *err, size_t errlen);

#endif
