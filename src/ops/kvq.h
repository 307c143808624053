/*
 * kvq.h -- the KV cache's row types (llama-server b11669's -ctk/-ctv: f32,
 * f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1) and what its CPU backend
 * does with them, bit for bit (libggml-cpu-haswell.so):
 *
 *   - writing a row (set_rows, f32 -> the type): the CPU type traits'
 *     from_float: f16 through F16C, bf16 rounded to nearest even, q8_0 the
 *     AVX2 quantize_row_q8_0 (q8_0.h), q4_0/q4_1/q5_0/q5_1 ggml-base's
 *     quantize_row_*_ref (scalar: the largest magnitude's signed value over
 *     -8 or -16, or (max - min) over 15 or 31; q = (int8_t)(x*id + 8.5) and
 *     the like, truncated), iq4_nl ggml-base's quantize_row_iq4_nl_ref (no
 *     importance weights, no scale searched: codes of the nearest value to
 *     x / (max / -127), then the least-squares d weighted by x*x);
 *   - reading a V row (flash attention's v_to_float): ggml-base's
 *     dequantize_row_* (q8_0.h, q4_0.h, iq4.h);
 *   - a K row's dot product with a query (flash attention's kq_vec_dot): the
 *     query converted once per row to the K type's vec_dot_type (f32 as is,
 *     f16/bf16 rounded, q8_0 for q8_0/q4_0/q5_0/iq4_nl, q8_1 for q4_1/q5_1), then
 *     ggml_vec_dot_<K>_<vec_dot_type>;
 *   - the Hadamard rotation b11669 puts around a quantized cache
 *     (llama_mul_mat_hadamard, which the CPU backend runs as
 *     ggml_compute_forward_fwht): each run of n values scaled by 1/sqrtf(n),
 *     then butterflies (u + v, u - v) of width 1, 2, 4, ... n/2.
 */
#ifndef BANKML_KVQ_H
#define BANKML_KVQ_H

#include <stddef.h>
#include <stdint.h>

/* The cache types in llama-server's --help order; KVQ_F16 (0) is its default. */
typedef enum {
    KVQ_F16 = 0,
    KVQ_F32,
    KVQ_BF16,
    KVQ_Q8_0,
    KVQ_Q4_0,
    KVQ_Q4_1,
    KVQ_IQ4_NL,
    KVQ_Q5_0,
    KVQ_Q5_1,
    KVQ_COUNT
} kvq_type;

typedef struct {
    const char *name;        /* llama-server's spelling (ggml_type_name): "q8_0" */
    uint32_t ggml;           /* ggml / GGUF type id (slot files record it) */
    size_t blk, bytes;       /* values and bytes per block */
    int quantized;           /* ggml_is_quantized: rotation, and V needs flash attention */
} kvq_info;

/* The row of a type (t < KVQ_COUNT), else NULL. */
const kvq_info *kvq_info_of(kvq_type t);
/* The type llama-server names `name` ("q8_0"; exact, case-sensitive as its
 * kv_cache_type_from_str). 0 with *t set, or -1. */
int kvq_parse(const char *name, kvq_type *t);
/* The type of a ggml id, or -1 when no cache type has it. */
int kvq_of_ggml(uint32_t ggml);
/* "f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1" (its --help list). */
const char *kvq_names(void);

/* Bytes of one row of n values (n a multiple of the block; 0 otherwise). */
size_t kvq_row_bytes(kvq_type t, size_t n);
/* Writes n floats (n a multiple of the block) as one row of type t (a type
 * of the table). */
void kvq_from_float(kvq_type t, const float *x, uint8_t *y, size_t n);
/* Reads n values of a row of type t into floats (v_to_float). */
void kvq_to_float(kvq_type t, const uint8_t *x, float *y, size_t n);

/* Bytes a query of n values takes once converted for K rows of type t. */
size_t kvq_q_bytes(kvq_type t, size_t n);
/* Converts a query of n floats for dot products with K rows of type t. */
void kvq_q_convert(kvq_type t, const float *q, uint8_t *out, size_t n);
/* One K row (n values of type t) against a converted query: kq_vec_dot. */
float kvq_dot(kvq_type t, const uint8_t *krow, const uint8_t *qconv, size_t n);

/* The rotation llama-server b11669 gives a cache of these types and head
 * sizes (llama_kv_cache's attn_rot_k / attn_rot_v): for K the largest power
 * of two from 64 dividing head_k when K is quantized and head_k % 64 == 0,
 * for V 64 when V is quantized and head_v % 64 == 0; 0 (none) otherwise or
 * when disabled (LLAMA_ATTN_ROT_DISABLE set to a nonzero number). */
size_t kvq_rot_k(kvq_type tk, size_t head_k, int disabled);
size_t kvq_rot_v(kvq_type tv, size_t head_v, int disabled);
/* ggml_compute_forward_fwht over `total` floats in place, in runs of n (a
 * power of two dividing total). */
void kvq_fwht(float *x, size_t total, size_t n);

#endif
