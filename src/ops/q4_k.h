/*
 * q4_k.h -- the K-quant weight types Q4_K, Q5_K and Q6_K (ggml types 12, 13,
 * 14: super-blocks of 256 values) and the Q8_K activations they multiply
 * against (type 15; vec_dot_type of all three in ggml's CPU type traits).
 *
 * Bit-exact with llama.cpp b11669 (libggml-base.so for to_float and the Q8_K
 * quantizer, libggml-cpu-haswell.so for vec_dot), checked by
 * testing/oracle_kernels_kquant.py. What the haswell backend really runs
 * (read from its disassembly, not only from the source):
 * - Q8_K from_float is quantize_row_q8_K, which on x86 is a jump to
 *   ggml-base's quantize_row_q8_K_ref (scalar, no FMA in that library).
 * - vec_dot is the AVX2 ggml_vec_dot_q{4,5,6}_K_q8_K: exact integer lane sums
 *   (8 lanes), one fma per super-block and lane, then ggml's hsum_float_8;
 *   Q4_K adds its min terms in 4 lanes of their own, Q5_K in one scalar that
 *   gcc contracted into an fma (vfmadd231ss).
 * - to_float is ggml-base's scalar dequantize_row_q{4,5,6}_K (no FMA).
 * The AVX2 kernels are chosen at run time (q8_simd(), shared with q8_0.c);
 * the portable C gives the same bits (fmaf where the binary has an fma).
 *
 * Layouts (little-endian, byte-packed):
 *   Q8_K (292 bytes): f32 d, int8 qs[256], int16 bsums[16] (sum of each 16 qs)
 *   Q4_K (144 bytes): f16 d, f16 dmin, scales[12] (8 six-bit scales and mins),
 *                     qs[128] (nibbles: 64-value groups, low then high)
 *   Q5_K (176 bytes): f16 d, f16 dmin, scales[12], qh[32] (fifth bits), qs[128]
 *   Q6_K (210 bytes): ql[128], qh[64], int8 scales[16], f16 d
 */
#ifndef BANKML_Q4_K_H
#define BANKML_Q4_K_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ops/q8_0.h"

#define Q4_K_TYPE 12
#define Q5_K_TYPE 13
#define Q6_K_TYPE 14
#define Q8_K_TYPE 15

#define QK_K_BLOCK 256  /* values per super-block, every type here */
#define Q8_K_BYTES 292
#define Q4_K_BYTES 144
#define Q5_K_BYTES 176
#define Q6_K_BYTES 210

/* Bytes of Q8_K activations holding n values (n a multiple of 256). */
static inline size_t q8_k_row_bytes(size_t n) { return n / QK_K_BLOCK * Q8_K_BYTES; }

/* Quantizes n floats (n a multiple of 256) into n/256 Q8_K blocks at out
 * (out_len bytes), as quantize_row_q8_K_ref: max = the first x of largest
 * |x| (NaN never wins), iscale = -127/max, q = min(127, nearest_int(iscale*x))
 * through ggml's +12582912 trick (two roundings, no fma) stored as int8,
 * bsums the int16 sums of 16 q, d = 1/iscale. A block whose |x| maximum is 0
 * gets d = 0 and q = 0; ggml leaves its bsums as the buffer had them, ours
 * are written 0 (the products never read them then: d = 0 makes each term 0).
 * Returns 0, or -1 with a reason in err (may be NULL). */
int q8_k_quantize(const float *x, size_t n, uint8_t *out, size_t out_len,
                  char *err, size_t errlen);
/* Unchecked: nblocks blocks from 256*nblocks floats. */
void q8_k_quantize_blocks(const float *x, uint8_t *out, size_t nblocks);

/* Dequantize n values (n a multiple of 256) of a row of w_len bytes into y,
 * as ggml-base's dequantize_row_*: Q4_K y = (d*sc)*q - (dmin*m), Q5_K the
 * same with the fifth bit, Q6_K y = (d*sc)*(q-32) (each product a separate
 * float rounding, left to right). Return 0, or -1 with a reason. */
int q4_k_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);
int q5_k_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);
int q6_k_dequantize(const uint8_t *w, size_t w_len, size_t n, float *y, char *err, size_t errlen);

/* Dot product of one weight row with one Q8_K activation row, both nblocks
 * super-blocks (unchecked: the caller owns the lengths). Bits of
 * ggml_vec_dot_q4_K_q8_K / _q5_K_ / _q6_K_ (AVX2, haswell build) for any
 * bytes, incl. activations of -128 and bsums that do not match their qs
 * (Q4_K's pairwise bsum sums wrap at 16 bits, as vphaddw does). */
float q4_k_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float q5_k_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float q6_k_vec_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);

/* The same output as b11669's tiled K-quant matrix product computes it
 * (ggml_compute_forward_mul_mat_tiled, which the haswell backend takes for a
 * plain -- not repacked -- Q4_K/Q5_K/Q6_K matrix times 8 or more columns;
 * env GGML_CPU_TILED_MM, on by default). Per super-block exact integers s1 =
 * sum of scale * (q . q8) (Q6_K: (q - 32) . q8 from the codes, never the
 * bsums) and, for Q4_K/Q5_K, s2 = sum of min * (the two int16 bsums as
 * int32: no 16-bit wrap); r = d * (float)s1 with the weight's fp16 d, then
 * r = fma(-dmin, (float)s2, r); acc = fma(r, d8, acc) from +0, blocks in
 * order. The tiling and the thread split never change these bits.
 * Unchecked, as vec_dot. */
float q4_k_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float q5_k_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);
float q6_k_tiled_dot(const uint8_t *w, const uint8_t *act, size_t nblocks);

/* Q6_K's tile kernel (k_tile_fn: q8_0.h; each output the bits of
 * q6_k_tiled_dot), or NULL where only the one-output kernel runs (no AVX2). */
k_tile_fn q6_k_tiled_tile(void);
/* The same for plain Q4_K (rows not in eights) and Q5_K. */
k_tile_fn q4_k_tiled_tile(void);
k_tile_fn q5_k_tiled_tile(void);

/* The 8 six-bit scales (sc[0..7]) and mins (mn[0..7]) of a Q4_K/Q5_K
 * super-block's 12 scale bytes (ggml's get_scale_min_k4 for j = 0..7),
 * four bytes at a time: bytes 0-3 hold scales 0-3 (low 6 bits) and the top
 * bits of scales 4-7, bytes 4-7 the same for the mins, bytes 8-11 the low
 * nibbles of scales 4-7 and (high nibbles) of mins 4-7. */
static inline void k4_scales(const uint8_t *s12, uint8_t sc[8], uint8_t mn[8])
{
    uint32_t u0, u1, u2, t;
    memcpy(&u0, s12, 4);
    memcpy(&u1, s12 + 4, 4);
    memcpy(&u2, s12 + 8, 4);
    t = u0 & 0x3f3f3f3fu;
    memcpy(sc, &t, 4);
    t = (u2 & 0x0f0f0f0fu) | (((u0 >> 6) & 0x03030303u) << 4);
    memcpy(sc + 4, &t, 4);
    t = u1 & 0x3f3f3f3fu;
    memcpy(mn, &t, 4);
    t = ((u2 >> 4) & 0x0f0f0f0fu) | (((u1 >> 6) & 0x03030303u) << 4);
    memcpy(mn + 4, &t, 4);
}

#endif
