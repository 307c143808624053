/*
 * iq4.h -- the non-linear 4-bit weight types IQ4_NL (ggml type 20, blocks
 * of 32 values against q8_0 activations) and IQ4_XS (type 23, super-blocks
 * of 256 against Q8_K), plain (as the map holds them). IQ4_NL's load-time
 * 8x8 form is repack.h's (it shares Q4_0 8x8's kernels, through a table).
 *
 * Both types map a 4-bit code c to iq4_value(c), ggml's kvalues_iq4nl:
 * -127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53 69 89 113 (never 0).
 *
 * Bit-exact with llama.cpp b11669 (libggml-base.so's to_float,
 * libggml-cpu-haswell.so's vec_dot and the tiled kernel), checked by testing/oracle_kernels_iq.py. What the haswell build
 * runs (read in ggml-cpu/arch/x86/quants.c and tiled/tiled*.cpp, confirmed
 * against the binary):
 * - dequantize_row_iq4_nl: y = d * value; dequantize_row_iq4_xs: per
 *   sub-block of 32, dl = d * (float)(ls - 32), y = dl * value (two
 *   roundings), ls the 6-bit scale (4 low bits in scales_l, 2 in scales_h).
 * - ggml_vec_dot_iq4_nl_q8_0 (one column): blocks in PAIRS, block 2i into
 *   accumulator 1 and 2i+1 into accumulator 2, each lane L (values 4L..4L+3)
 *   acc = fma(da*dw, lane, acc) with the lane from vpsignb/vpmaddubsw (an
 *   activation of -128 against a negative value wraps to -128*|v|); then
 *   hsum_float_8(acc1 + acc2); an odd last block is scalar C with exact
 *   products: s = fma(da*dw, (float)sum, s).
 * - A plain IQ4_NL matrix times 2+ columns: the same vec_dot per output
 *   (measured on whole ggml_mul_mat graphs: b11669 does not send IQ4_NL to
 *   llamafile's tinyBLAS, whose one-accumulator chain gives other bits,
 *   nor to the tiled kernel).
 * - ggml_vec_dot_iq4_xs_q8_K (1-7 columns): per super-block the exact lanes
 *   sum over sub-blocks of (ls-32) * lane, then acc = fma(dw*da, lane, acc),
 *   hsum_float_8 at the end.
 * - b11669's tiled kernel (8+ columns; tiled_run_microtile<32, no min,
 *   BIAS 128, no ACTBIAS>): per super-block the exact s1 = sum over
 *   sub-blocks of (ls-32) * (value . q8) with the same vpsignb wrap, then
 *   r = dw * (float)s1 and acc = fma(r, da, acc) from +0 (iq4_xs_tiled_dot).
 * The AVX2 kernels are chosen at run time (q8_simd()); the portable C gives
 * the same bits.
 *
 * Layouts (little-endian, byte-packed):
 *   IQ4_NL 18 bytes: f16 d, qs[16]   value j: code qs[j] & 15, j+16: qs[j] >> 4
 *   IQ4_XS 136 bytes: f16 d, u16 scales_h, scales_l[4], qs[128]: sub-block
 *     s (32 values) is qs[16s..16s+15] as one IQ4_NL block, its scale
 *     ls = (scales_l[s/2] >> 4*(s%2) & 15) | (scales_h >> 2s & 3) << 4.
 */
#ifndef BANKML_IQ4_H
#define BANKML_IQ4_H

#include <stddef.h>
#include <stdint.h>

#define IQ4_NL_TYPE 20
#define IQ4_XS_TYPE 23
#define IQ4_NL_BLOCK 32
#define IQ4_NL_BYTES 18
#define IQ4_XS_BLOCK 256
#define IQ4_XS_BYTES 136

/* The value of 4-bit code c (0..15). */
int iq4_value(int c);
/* The 16 values as signed bytes (ggml's kvalues_iq4nl, for table lookups). */
const int8_t *iq4_values(void);

/* Dequantize n values (whole blocks) of a row of w_len bytes into y, as
 * ggml-base's dequantize_row_iq4_nl / _iq4_xs. 0, or -1 with a reason. */
int iq4_nl_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);
int iq4_xs_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);

/* Dot products of one weight row (nblocks blocks) and one activation row
 * (q8_0 for IQ4_NL, Q8_K for IQ4_XS), unchecked; see above for which path
 * each reproduces. */
float iq4_nl_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float iq4_xs_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float iq4_xs_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);

#endif
