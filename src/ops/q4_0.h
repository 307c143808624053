/*
 * q4_0.h -- the legacy 4- and 5-bit weight types Q4_0, Q4_1, Q5_0, Q5_1
 * (ggml types 2, 3, 6, 7: blocks of 32 values) and the q8_1 activations
 * (type 9) that Q4_1 and Q5_1 multiply against; Q4_0 and Q5_0 take q8_0
 * activations (q8_0.h's q8_0_quantize).
 *
 * Bit-exact with llama.cpp b11669 (libggml-base.so's to_float,
 * libggml-cpu-haswell.so's from_float and vec_dot), checked by
 * testing/oracle_kernels_kquant.py. What the haswell build runs (from its
 * disassembly):
 * - quantize_row_q8_1 (AVX2): q8_0's vmaxps tree and quants, plus
 *   s = fp16(d * (float)sum) where d = amax/127 before its fp16 rounding and
 *   sum is the wrapping int32 sum of the 32 vcvtps2dq results (before the
 *   saturating packs: a NaN or overflowing value counts INT32_MIN there).
 * - ggml_vec_dot_q4_0_q8_0 / q5_0_q8_0: values to signed bytes (-8..7,
 *   -16..15), vpsignb/vpmaddubsw/vpmaddwd lanes (an activation of -128
 *   against a negative weight counts -128*|w|, as vpsignb wraps), then
 *   acc = fma(dx*dy, lane, acc) per block and hsum_float_8.
 * - ggml_vec_dot_q4_1_q8_1 / q5_1_q8_1: unsigned values (0..15, 0..31) times
 *   signed bytes, acc = fma(dx*dy, lane, acc) (Q5_1: fma(lane, dx*dy, acc)),
 *   and summs += m*s, which gcc contracted into one vfmadd231ss per block;
 *   result hsum_float_8(acc) + summs.
 * The AVX2 kernels are chosen at run time (q8_simd()); the portable C gives
 * the same bits.
 *
 * Layouts (little-endian, byte-packed), f16 d (and m) first:
 *   Q4_0 18 bytes: d, qs[16]          value j: (qs[j] & 15) - 8, j+16: (qs[j] >> 4) - 8
 *   Q4_1 20 bytes: d, m, qs[16]       value = d*q + m
 *   Q5_0 22 bytes: d, qh[4], qs[16]   fifth bit of value j is bit j of qh; q - 16
 *   Q5_1 24 bytes: d, m, qh[4], qs[16]
 *   q8_1 36 bytes: d, s (= d * sum of qs, f16), qs[32]
 */
#ifndef BANKML_Q4_0_H
#define BANKML_Q4_0_H

#include <stddef.h>
#include <stdint.h>

#include "ops/q8_0.h"

#define Q4_0_TYPE 2
#define Q4_1_TYPE 3
#define Q5_0_TYPE 6
#define Q5_1_TYPE 7
#define Q8_1_TYPE 9

#define Q4_0_BLOCK 32 /* values per block, every type here */
#define Q4_0_BYTES 18
#define Q4_1_BYTES 20
#define Q5_0_BYTES 22
#define Q5_1_BYTES 24
#define Q8_1_BYTES 36

/* Bytes of q8_1 activations holding n values (n a multiple of 32). */
static inline size_t q8_1_row_bytes(size_t n) { return n / Q4_0_BLOCK * Q8_1_BYTES; }

/* Quantizes n floats (n a multiple of 32) into q8_1 blocks at out (out_len
 * bytes), as the haswell quantize_row_q8_1. Returns 0, or -1 with a reason
 * in err (may be NULL). */
int q8_1_quantize(const float *x, size_t n, uint8_t *out, size_t out_len,
                  char *err, size_t errlen);
/* Unchecked: nblocks blocks from 32*nblocks floats. */
void q8_1_quantize_blocks(const float *x, uint8_t *out, size_t nblocks);

/* Dequantize n values (n a multiple of 32) of a row of w_len bytes into y,
 * as ggml-base's dequantize_row_*: Q4_0/Q5_0 y = q*d, Q4_1/Q5_1 y = q*d + m
 * (a product and a sum, two roundings). Return 0, or -1 with a reason. */
int q4_0_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);
int q4_1_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);
int q5_0_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);
int q5_1_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);

/* Dot product of one weight row (nblocks blocks) with one activation row of
 * as many 32-value blocks: q8_0 for Q4_0/Q5_0, q8_1 for Q4_1/Q5_1
 * (unchecked). Bits of the haswell ggml_vec_dot_*; the signature is
 * q8_0.h's q8_dot_fn, so Q4_0 and Q5_0 can join its product driver. */
float q4_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float q4_1_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float q5_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);

/* Two-row by four-column tiles of q4_0_vec_dot / q5_0_vec_dot (each output
 * their bits), or NULL without AVX2 (k_tile_fn: q8_0.h). */
k_tile_fn q4_0_tile(void);
k_tile_fn q5_0_tile(void);
float q5_1_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);

#endif
