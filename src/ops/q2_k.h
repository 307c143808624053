/*
 * q2_k.h -- the K-quant weight types Q2_K and Q3_K (ggml types 10 and 11:
 * super-blocks of 256 values, 16 sub-blocks of 16) against Q8_K
 * activations (q4_k.h's quantizer; vec_dot_type of both in ggml's CPU type
 * traits).
 *
 * Bit-exact with llama.cpp b11669 (libggml-base.so for to_float,
 * libggml-cpu-haswell.so for the products), checked by
 * testing/oracle_kernels_kquant.py. What the haswell backend runs:
 * - to_float: ggml-base's scalar dequantize_row_q2_K / _q3_K (no FMA):
 *   Q2_K y = (d*sc)*q - (dmin*m), Q3_K y = (d*(sc-32))*(q - 4*!hbit).
 * - vec_dot (1..7 columns): the AVX2 ggml_vec_dot_q2_K_q8_K / _q3_K_:
 *   eight exact integer lanes (lane L = bytes 4L..4L+3 of each 32-value
 *   chunk), one fma per lane and super-block into ONE accumulator -- Q2_K
 *   first its mins, fma(-d8*dmin, m.bsums, acc) (vpmaddwd of the 16 mins
 *   with the 16 bsums: lane L = pairs 2L, 2L+1), then fma(d8*d, sumi, acc)
 *   -- and ggml's hsum_float_8.
 * - 8+ columns on these (never repacked on AVX2) matrices: b11669's tiled
 *   K-quant kernel, as q4_k.h's *_tiled_dot: s1 = sum of scale * (q . q8)
 *   over the 16 sub-blocks (Q3_K: q - 4 from the codes, scales - 32), Q2_K
 *   s2 = sum of min * bsum (int32), r = d * (float)s1, Q2_K r = fma(-dmin,
 *   (float)s2, r), acc = fma(r, d8, acc).
 * AVX2 chosen at run time (q8_simd()); the portable C gives the same bits.
 *
 * Layouts (little-endian, byte-packed):
 *   Q2_K (84 bytes):  scales[16] (low nibble scale, high nibble min),
 *                     qs[64] (2-bit codes: 128-value halves, 4 shifts of 32),
 *                     f16 d, f16 dmin
 *   Q3_K (110 bytes): hmask[32] (third bits, bit 4*half+shift/2), qs[64],
 *                     scales[12] (16 six-bit scales), f16 d
 */
#ifndef BANKML_Q2_K_H
#define BANKML_Q2_K_H

#include <stddef.h>
#include <stdint.h>

#define Q2_K_TYPE 10
#define Q3_K_TYPE 11
#define Q2_K_BYTES 84
#define Q3_K_BYTES 110

/* Dequantize n values (a multiple of 256) of a row of w_len bytes into y,
 * as ggml-base's dequantize_row_q2_K / _q3_K. 0, or -1 with a reason. */
int q2_k_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);
int q3_k_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);

/* One weight row against one Q8_K row, nblocks super-blocks each
 * (unchecked): the bits of ggml_vec_dot_q2_K_q8_K / _q3_K_ (AVX2, haswell)
 * and of the tiled kernel's output (8+ columns). Any bytes. */
float q2_k_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float q3_k_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float q2_k_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float q3_k_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);

/* The 16 Q3_K scales (minus 32: -32..31) of a block's 12 scale bytes. */
void k3_scales(const uint8_t *s12, int8_t sc[16]);

#endif
