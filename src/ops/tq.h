/*
 * tq.h -- the ternary weight types TQ1_0 (ggml type 34) and TQ2_0 (type 35):
 * super-blocks of 256 values in {-1, 0, 1} times one f16 scale, against
 * Q8_K activations. b11669 multiplies them by vec_dot only (no repacked
 * form, no tiled kernel, no llamafile case), at every column count.
 *
 * Bit-exact with llama.cpp b11669 (libggml-base.so's to_float,
 * libggml-cpu-haswell.so's vec_dot), checked by testing/oracle_kernels_iq.py.
 * What the haswell build runs (ggml-cpu/arch/x86/quants.c, confirmed against
 * the binary):
 * - dequantize_row_tq1_0 / _tq2_0: y = (float)(code - 1) * d; TQ1_0's code of
 *   base-3 digit n of byte b is ((uint8_t)(b * 3^n) * 3) >> 8.
 * - ggml_vec_dot_tq1_0_q8_K / _tq2_0_q8_K (AVX2): codes 0..2 (TQ2_0: 0..3 as
 *   the bits say) times the activations through vpmaddubsw, summed in
 *   sixteen WRAPPING 16-bit lanes (lane m holds values 2m, 2m+1 of every run
 *   of 32) minus the Q8_K bsums[m] (the -1 of the codes, from the bsums as
 *   stored, right or not), then pairs of lanes widened to 8 int32 lanes and
 *   acc = fma((float)lane, da * dw, acc) per super-block (the source's
 *   mul + add, contracted by gcc in the binary: measured), hsum_float_8 at
 *   the end. TQ1_0's vector code extraction (a saturating -1, two vpavgb and the
 *   top two bits) is reproduced as the kernel does it.
 * The AVX2 kernels are chosen at run time (q8_simd()); the portable C gives
 * the same bits.
 *
 * Layouts (little-endian, byte-packed):
 *   TQ1_0 54 bytes: qs[48] (5 base-3 digits a byte: bytes 0..31 give values
 *     32n + b, bytes 32..47 values 160 + 16n + b, n the digit), qh[4] (4
 *     digits a byte: values 240 + 4n + b), f16 d.
 *   TQ2_0 66 bytes: qs[64] (value 128h + 32l + b is bits 2l of byte 32h + b),
 *     f16 d.
 */
#ifndef BANKML_TQ_H
#define BANKML_TQ_H

#include <stddef.h>
#include <stdint.h>

#define TQ1_0_TYPE 34
#define TQ2_0_TYPE 35
#define TQ1_0_BYTES 54
#define TQ2_0_BYTES 66

/* Dequantize n values (whole super-blocks of 256) of a row of w_len bytes
 * into y, as ggml-base's dequantize_row_tq1_0 / _tq2_0. 0, or -1 with a
 * reason. */
int tq1_0_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);
int tq2_0_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);

/* One weight row (nblocks super-blocks) times one Q8_K row, unchecked: the
 * bits of the haswell ggml_vec_dot_tq1_0_q8_K / _tq2_0_q8_K. */
float tq1_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float tq2_0_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);

#endif
