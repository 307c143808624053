/*
 * q1_0.h -- Q1_0 weights (ggml type 41): 1 bit per weight, against q8_0
 * activations (q8_0.h), bit-exact with llama.cpp b11669's
 * libggml-cpu-haswell.so.
 *
 * Block: 18 bytes for 128 weights: f16 scale d, then 16 bytes of sign bits
 * LSB-first; bit 1 is +d, bit 0 is -d. One block meets four q8_0 blocks.
 *
 * Float order (ggml_vec_dot_q1_0_q8_0, AVX2; every x86 Q1_0 product goes
 * through it: llamafile sgemm has no Q1_0 case, repack is NEON-only): per
 * weight block, eight lanes of four signed activation sums per q8 block K,
 * blk = da0*s0 then blk = fma(daK, sK, blk) for K = 1..3, then
 * acc = fma(d, blk, acc); finally ggml's hsum_float_8. The sign flip is an
 * int8 negation, so -128 stays -128 (as vpsubb wraps).
 */
#ifndef BANKML_Q1_0_H
#define BANKML_Q1_0_H

#include "ops/q8_0.h"

#define Q1_0_TYPE 41
#define Q1_0_BLOCK 128
#define Q1_0_BYTES 18

/* Dequantizes n values (n a multiple of 128) of a row of w_len bytes:
 * bit ? d : -d (ggml's dequantize_row_q1_0, used by get_rows). Returns 0, or
 * -1 with a reason in err. */
int q1_0_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y,
                    char *err, size_t errlen);

/* Dot product of one Q1_0 row of nblocks blocks with q8_0 activations of
 * 4*nblocks blocks (unchecked). */
float q1_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);

/* Checks shape and byte lengths (see q8_0_mm_init) and fills *m. */
int q1_0_mm_init(q8_mm *m, const uint8_t *w, size_t w_len, size_t rows,
                 size_t k, const uint8_t *act, size_t act_len, size_t ncols,
                 float *y, size_t y_len, char *err, size_t errlen);

/* par_rows_fn over a checked q8_mm: rows [r0, r1) of every column. */
void q1_0_mm_rows(void *m, size_t r0, size_t r1, int worker);

/* init + run on the pool (NULL pool: the caller alone). */
int q1_0_matmul(par_pool *p, const uint8_t *w, size_t w_len, size_t rows,
                size_t k, const uint8_t *act, size_t act_len, size_t ncols,
                float *y, size_t y_len, char *err, size_t errlen);

#endif
