/*
 * iq2.h -- the 2-bit grid weight types IQ2_XXS (ggml type 16), IQ2_XS (17)
 * and IQ2_S (22): super-blocks of 256 values against Q8_K activations, each
 * run of 8 values one entry of a codebook of magnitudes 8, 25, 43
 * (iq_grids.h) with 8 signs, and a 4-bit scale ls per 32 values (IQ2_XXS)
 * or per 16 (IQ2_XS, IQ2_S): multiplier 2 ls + 1.
 *
 * Bit-exact with llama.cpp b11669 (libggml-base.so's to_float,
 * libggml-cpu-haswell.so's vec_dot and its tiled kernel), checked by
 * testing/oracle_kernels_iq.py. What the haswell build runs (read in
 * ggml-quants.c and ggml-cpu/arch/x86/quants.c; confirmed against the binary):
 * - dequantize_row_iq2_*: db = d * (0.5f + ls) * 0.25f, y = db * g * (+-1),
 *   each product rounded in that order, g the grid magnitude.
 * - ggml_vec_dot_iq2_*_q8_K (1-7 columns): per super-block, eight int32
 *   lanes (lane L: values 4L..4L+3 of every run of 32) summing
 *   (2 ls + 1) * g * sign(q8), the sign applied to the ACTIVATION (vpsignb,
 *   or xor/sub for IQ2_S: the same bits), so -128 under a minus sign stays
 *   -128; acc = fma(dw * da, (float)lane, acc); the row's result is
 *   0.125f * hsum_float_8(acc). No vpmaddubsw pair saturates
 *   (2 * 43 * 128 < 32768).
 * - the tiled kernel (8+ columns): exact integers s1 = sum of
 *   (2 ls + 1) * (value . q8) (no wrap: -128 counts as -128), then
 *   r = (fp16 d * 0.125f) * (float)s1 and acc = fma(r, da, acc) from +0,
 *   super-blocks in order.
 * Portable C only (no AVX2 twin yet): the integer lanes are exact and the
 * float steps are written out in ggml's order, so the bits are the same.
 *
 * Layouts (little-endian, byte-packed):
 *   IQ2_XXS 66 bytes: f16 d, then per run s of 32 values 8 bytes: 4 grid
 *     indices (run of 8 values l: byte l), then a u32 with four 7-bit sign
 *     fields (bits 7l..7l+6, the 8th sign their parity) and ls in bits 28..31.
 *   IQ2_XS 74 bytes: f16 d, u16 qs[32] (run 4s+l: 9-bit grid index, 7 sign
 *     bits above it), scales[8] (run s of 32: low nibble its first 16 values).
 *   IQ2_S 82 bytes: f16 d, qs[32] (grid index low 8 bits of run 4s+l),
 *     signs[32] (run 4s+l: bit j value j), qh[8] (run s: bits 2l..2l+1 are
 *     entry l's index bits 8-9), scales[8] as IQ2_XS.
 */
#ifndef BANKML_IQ2_H
#define BANKML_IQ2_H

#include <stddef.h>
#include <stdint.h>

#define IQ2_XXS_TYPE 16
#define IQ2_XS_TYPE 17
#define IQ2_S_TYPE 22
#define IQ2_XXS_BYTES 66
#define IQ2_XS_BYTES 74
#define IQ2_S_BYTES 82

/* Dequantize n values (whole super-blocks of 256) of a row of w_len bytes
 * into y, as ggml-base's dequantize_row_iq2_*. 0, or -1 with a reason. */
int iq2_xxs_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);
int iq2_xs_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);
int iq2_s_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);

/* One weight row (nblocks super-blocks) times one Q8_K row, unchecked:
 * vec_dot's bits (1-7 columns) and the tiled kernel's (8+ columns). */
float iq2_xxs_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float iq2_xs_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float iq2_s_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float iq2_xxs_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float iq2_xs_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float iq2_s_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);

#endif
