/*
 * iq3.h -- the 3-bit grid weight types IQ3_XXS (ggml type 18) and IQ3_S
 * (type 21): super-blocks of 256 values against Q8_K activations, each run
 * of 4 values one entry of a codebook (iq_grids.h), with 8 signs per run of
 * 8 and a 4-bit scale per sub-block of 32.
 *
 * Bit-exact with llama.cpp b11669 (libggml-base.so's to_float,
 * libggml-cpu-haswell.so's vec_dot and its tiled kernel), checked by
 * testing/oracle_kernels_iq.py. What the haswell build runs (read in
 * ggml-cpu/arch/x86/quants.c and a newer snapshot's tiled/tiled.cpp +
 * arch/x86/tiled-kernel.cpp, whose tiled_run_microtile<32, no min, BIAS 128,
 * ACTBIAS> is one of the seven instances the binary exports; confirmed
 * against the binary):
 * - dequantize_row_iq3_xxs: db = d * (0.5f + ls) * 0.5f, y = db * g * (+-1);
 *   dequantize_row_iq3_s: db = d * (float)(1 + 2 ls), y = db * g * (+-1)
 *   (each product rounded in that order), g the grid magnitude.
 * - ggml_vec_dot_iq3_xxs_q8_K / _iq3_s_q8_K (1-7 columns): per super-block,
 *   eight int32 lanes (lane L: values 4L..4L+3 of every sub-block of 32)
 *   summing (2 ls + 1) * g * sign(q8), the sign applied to the ACTIVATION
 *   with vpsignb (IQ3_S: xor/sub, the same bits), so an activation of -128
 *   under a minus sign stays -128; acc = fma(dw * da, (float)lane, acc);
 *   IQ3_XXS returns 0.25f * hsum_float_8(acc), IQ3_S hsum_float_8(acc).
 * - The tiled kernel (8+ columns): exact integers s1 = sum over sub-blocks
 *   of (2 ls + 1) * (value . q8) (the activations biased by +128 and the
 *   bias taken out again: no wrap, -128 counts as -128), then
 *   r = d' * (float)s1 with d' = fp16 d * 0.25f (IQ3_XXS) or d (IQ3_S), and
 *   acc = fma(r, da, acc) from +0, super-blocks in order; no horizontal sum.
 * Portable C only (no AVX2 twin yet): the integer lanes are exact and the
 * float steps are written out in ggml's order, so the bits are the same.
 *
 * Layouts (little-endian, byte-packed):
 *   IQ3_XXS 98 bytes: f16 d, qs[64] (grid indices: sub-block s, run l of 8
 *     values is entries qs[8s+2l], qs[8s+2l+1]), then per sub-block s a u32
 *     at 66 + 4s: four 7-bit sign fields (run l: bits 7l..7l+6, the 8th sign
 *     their parity) and the scale ls in bits 28..31.
 *   IQ3_S 110 bytes: f16 d, qs[64], qh[8] (entry m of sub-block s takes
 *     qh[s] bit m as its 9th index bit), signs[32] (run l of sub-block s:
 *     byte 4s + l, bit j value j), scales[4] (sub-block s: 4 bits of byte
 *     s/2, low nibble for even s).
 */
#ifndef BANKML_IQ3_H
#define BANKML_IQ3_H

#include <stddef.h>
#include <stdint.h>

#define IQ3_XXS_TYPE 18
#define IQ3_S_TYPE 21
#define IQ3_XXS_BYTES 98
#define IQ3_S_BYTES 110

/* Dequantize n values (whole super-blocks of 256) of a row of w_len bytes
 * into y, as ggml-base's dequantize_row_iq3_xxs / _iq3_s. 0, or -1 with a
 * reason. */
int iq3_xxs_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);
int iq3_s_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);

/* One weight row (nblocks super-blocks) times one Q8_K row, unchecked:
 * vec_dot's bits (1-7 columns) and the tiled kernel's (8+ columns). */
float iq3_xxs_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float iq3_s_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float iq3_xxs_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float iq3_s_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);

#endif
