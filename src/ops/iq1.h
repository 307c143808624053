/*
 * iq1.h -- the 1-bit grid weight types IQ1_S (ggml type 19) and IQ1_M (29):
 * super-blocks of 256 values against Q8_K activations, each run of 8 values
 * one entry of a codebook of -1, 0, 1 (iq_grids.h's bk_iq1s_grid, 11-bit
 * indices) plus a shift of +-IQ1S_DELTA (0.125) and a 3-bit scale ls
 * (multiplier 2 ls + 1) per 32 values (IQ1_S) or per 16 (IQ1_M).
 *
 * Bit-exact with llama.cpp b11669 (libggml-base.so's to_float,
 * libggml-cpu-haswell.so's vec_dot), checked by testing/oracle_kernels_iq.py.
 * What the haswell build runs (ggml-quants.c, ggml-cpu/arch/x86/quants.c,
 * the binary's float order confirmed by the oracle):
 * - dequantize_row_iq1_s / _m: dl = d * (float)(2 ls + 1),
 *   y = dl * ((float)g + delta), delta = -0.125f or 0.125f.
 * - ggml_vec_dot_iq1_s_q8_K (1-7 columns; never repacked): eight int32 lanes (lane L:
 *   values 4L..4L+3 of each run of 32) of (2 ls + 1) * g * q8 with the sign
 *   of g put on the activation (vpsignb: -(-128) stays -128, g = 0 gives 0);
 *   beside them one int sumi1 of the stored Q8_K bsums: per run of 32,
 *   (bsums[2s] + bsums[2s+1]) * (+-1) * (2 ls + 1). With d = da * dw:
 *   acc = fma(d, (float)lane, acc), acc1 = fma(d, (float)sumi1, acc1)
 *   (gcc contracts it); result hsum_float_8(acc) + 0.125f * acc1, the
 *   product rounded on its own (not contracted: a subnormal tells).
 * - ggml_vec_dot_iq1_m_q8_K: the same lanes with a multiplier per 16 values,
 *   and a second set of lanes of (2 ls + 1) * (+-q8) (the delta's sign put on
 *   the activation, vpsignb again); acc1 and acc2 by fma as above, result
 *   fma(0.125f, hsum_float_8(acc2), hsum_float_8(acc1)): here gcc fused it
 *   (a subnormal tells again).
 * - the tiled kernel (8+ columns): 8 times a value is the integer code
 *   8 g +- 1, so exact s1 = sum of (2 ls + 1) * (code . q8) per run of 16,
 *   r = (fp16 d * 0.125f) * (float)s1, acc = fma(r, da, acc) from +0.
 * Portable C only.
 *
 * Layouts (little-endian, byte-packed):
 *   IQ1_S 50 bytes: f16 d, qs[32] (index low 8 bits of run 4s+l), u16 qh[8]
 *     (run s of 32: bits 3l..3l+2 entry l's index bits 8-10, 12-14 ls, 15 the
 *     delta's sign).
 *   IQ1_M 56 bytes: qs[32] as IQ1_S, qh[16] (byte 2s+i: bits 0-2 index bits
 *     8-10 of entry 2i, bit 3 its delta sign; bits 4-6, 7 entry 2i+1's),
 *     u16 sc[4] (run s: 3-bit ls of its first 16 values at bit 6 (s % 2) of
 *     sc[s / 2], its second 16's at 6 (s % 2) + 3; the f16 d is the four top
 *     nibbles, sc[0]'s lowest).
 */
#ifndef BANKML_IQ1_H
#define BANKML_IQ1_H

#include <stddef.h>
#include <stdint.h>

#define IQ1_S_TYPE 19
#define IQ1_M_TYPE 29
#define IQ1_S_BYTES 50
#define IQ1_M_BYTES 56

/* Dequantize n values (whole super-blocks of 256) of a row of w_len bytes
 * into y, as ggml-base's dequantize_row_iq1_s / _m. 0, or -1 with a reason. */
int iq1_s_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);
int iq1_m_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);

/* One weight row (nblocks super-blocks) times one Q8_K row, unchecked:
 * vec_dot's bits (1-7 columns) and the tiled kernel's (8+ columns). */
float iq1_s_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float iq1_m_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float iq1_s_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float iq1_m_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);

#endif
