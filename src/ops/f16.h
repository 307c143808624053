/*
 * f16.h -- float weights (F32, F16, BF16) multiplied with the bits of the
 * shipped ggml (libggml-cpu-haswell.so, llama.cpp b11669), plus the half and
 * bfloat16 conversions and get_rows.
 *
 * ggml multiplies a float weight W (rows x k) by F32 activations X (k x n)
 * through ggml_compute_forward_mul_mat, which tries llamafile's tinyBLAS
 * first when the build has it, else runs vec_dot per element. The two give
 * different bits for the same row and column:
 *
 *   - "vec_dot" (ggml_vec_dot_f32 / _f16 / _bf16): four 8-lane accumulators
 *     over 32-element steps, a type-specific reduction and tail. The shipped
 *     libggml-cpu-haswell.so of b11669 is built WITHOUT llamafile
 *     (ggml_cpu_has_llamafile() returns 0), so this is its path for every
 *     float product, one column or many; the in-process oracle confirms it.
 *   - "sgemm" (llamafile tinyBLAS<8, __m256>), only in builds that have it:
 *     taken when n >= 2, rows % 4 == 0 and k % 8 == 0; each element is one
 *     8-lane FMA chain over the row, then a fixed horizontal sum. Off by
 *     default here (f16_set_llamafile), kept for builds that enable it.
 *
 * Before either, the activation is rounded to the weight's vec_dot_type:
 * F16 weights -> fp16 (round to nearest even, as vcvtps2ph imm 0), BF16
 * weights -> bf16 (ggml_compute_fp32_to_bf16: round to nearest even, NaN
 * quieted), F32 weights -> unchanged. The kernels read the rounded
 * activation widened back to f32 (exact), so one float buffer serves all.
 *
 * Fast path: x86-64 AVX2 + FMA + F16C, chosen once at run time. Portable C
 * (with fmaf where ggml's binary has an FMA) gives the same bits elsewhere.
 * The thread count never changes bits: each element is computed whole by one
 * worker.
 *
 * Little-endian hosts only (weights are read as the GGUF bytes).
 */
#ifndef BANKML_F16_H
#define BANKML_F16_H

#include <stddef.h>
#include <stdint.h>

#include "base/par.h"

/* Weight types, numbered as in GGUF / ggml. */
enum { F16_T_F32 = 0, F16_T_F16 = 1, F16_T_BF16 = 30 };

/* ---- scalar and row conversions (exact, identical on both paths) ---- */

/* fp16 -> fp32: exact for every value; a NaN keeps sign and payload and is
 * quieted (bit 22 set), as vcvtph2ps does. */
float f16_to_f32(uint16_t h);
/* fp32 -> fp16, round to nearest even; overflow -> inf; NaN -> quiet NaN with
 * the top payload bits (as vcvtps2ph with imm 0). */
uint16_t f32_to_f16(float f);
/* bf16 -> fp32: the 16 bits become the high half. */
float bf16_to_f32(uint16_t b);
/* fp32 -> bf16 as ggml_compute_fp32_to_bf16: NaN -> (bits >> 16) | 0x40,
 * otherwise round to nearest even on the high half. */
uint16_t f32_to_bf16(float f);

void f16_to_f32_row(const uint16_t *x, float *y, size_t n);
void f32_to_f16_row(const float *x, uint16_t *y, size_t n);
void bf16_to_f32_row(const uint16_t *x, float *y, size_t n);
void f32_to_bf16_row(const float *x, uint16_t *y, size_t n);

/* Rounds n activations to the vec_dot_type of weight type `type` and widens
 * them back to f32 (y may equal x): the values ggml's kernels see. F32 copies.
 * Returns 0, or -1 if the type is not F32/F16/BF16. */
int f16_round_act(int type, const float *x, float *y, size_t n);

/* ---- weights ---- */

/* A row-major weight matrix as it lies in the mapped file. */
typedef struct {
    int type;               /* F16_T_F32, F16_T_F16 or F16_T_BF16 */
    const void *data;
    size_t rows;            /* output features (ggml ne01) */
    size_t k;               /* elements per row (ggml ne00) */
    size_t row_bytes;       /* stride between rows; >= k * element size */
    size_t size;            /* bytes readable at data (checked, never exceeded) */
} f16_matrix;

/* Checks a matrix's shape against its bytes: known type, k >= 1, rows >= 1,
 * row_bytes >= k * element, (rows - 1) * row_bytes + k * element <= size,
 * k <= INT32_MAX (ggml's limit). Returns 0, or -1 with a reason in err. */
int f16_matrix_check(const f16_matrix *w, char *err, size_t errlen);

/* get_rows: widens rows ids[0..nids) to f32 into out (nids * k floats).
 * Returns 0, or -1 with a reason (bad matrix, id out of range). */
int f16_get_rows(const f16_matrix *w, const int32_t *ids, size_t nids,
                 float *out, char *err, size_t errlen);

/* llamafile's shape rule: 1 when a build WITH llamafile would take tinyBLAS
 * for this product (n >= 2 && rows % 4 == 0 && k % 8 == 0). Products use it
 * only while f16_llamafile() is 1. */
int f16_takes_sgemm(size_t rows, size_t k, size_t n);
/* Whether products follow a llamafile build (1) or the shipped b11669
 * haswell backend, which has no llamafile (0, the default). Process-wide;
 * set it before products run (the oracle sets it from the library's own
 * ggml_cpu_has_llamafile()). */
void f16_set_llamafile(int on);
int f16_llamafile(void);

/* ---- dot products: one element each, the ggml function's bits ---- */
/* w: a weight row (its type's bytes); x: k activations already rounded by
 * f16_round_act. */

/* ggml_vec_dot_f32, ggml_vec_dot_f16, ggml_vec_dot_bf16 (haswell builds). */
float f16_vec_dot(int type, const void *w, const float *x, size_t k);
/* One tinyBLAS element (k % 8 == 0 required; returns NAN otherwise). */
float f16_sgemm_dot(int type, const void *w, const float *x, size_t k);

/* ---- matrix products ---- */

/* y = W x for n columns: x holds n columns of k floats (column c at
 * x + c * k), already rounded by f16_round_act for W's type; y receives
 * n columns of rows floats (y[c * rows + r], ggml's dst layout). The path
 * (vec_dot, or sgemm in a llamafile build) is chosen as ggml chooses it. pool may be NULL
 * (single thread). Returns 0, or -1 with a reason (bad matrix, n == 0). */
int f16_mul_mat(par_pool *pool, const f16_matrix *w, const float *x,
                size_t n, float *y, char *err, size_t errlen);

/* Several matrices with the same k against the same x, in ONE wake of the
 * pool (Q/K/V, gate/up): ys[i] receives n * ws[i].rows floats. All matrices
 * must have the same type (x is rounded once for it). At most 8 matrices.
 * Bits are those of f16_mul_mat on each matrix alone. */
int f16_mul_mat_multi(par_pool *pool, const f16_matrix *ws, size_t nw,
                      const float *x, size_t n, float *const *ys,
                      char *err, size_t errlen);

/* One product's state for a pool wake of several products (par_jobs): the
 * matrix (copied), its activations and output, and the plan mm_plan chose.
 * Filled by f16_mm_job; read only by the job it fills. */
typedef struct {
    f16_matrix w;
    const float *x;
    size_t n;
    float *y;
    int sgemm;
    int simd;
    size_t nrb;                 /* several columns: row blocks of the task grid */
    size_t cg;                  /* several columns: columns per task */
} f16_mm;

/* Checks one product y = W x (as f16_mul_mat) and fills *m and *j, the job
 * that f16_mul_mat_multi would give it, so that a caller can run products of
 * several kinds in one par_jobs wake. x: n columns already rounded by
 * f16_round_act; m must stay in place until the wake ends. 0, or -1 with the
 * reason (bad shape, no columns, overflow). */
int f16_mm_job(f16_mm *m, par_job *j, const f16_matrix *w, const float *x,
               size_t n, float *y, char *err, size_t errlen);

/* Convenience: rounds x (k * n floats) into scratch (k * n floats) for W's
 * type, then f16_mul_mat. scratch may equal x to round in place. */
int f16_mul_mat_f32(par_pool *pool, const f16_matrix *w, const float *x,
                    size_t n, float *scratch, float *y, char *err,
                    size_t errlen);

/* ---- path control (tests and benchmarks) ---- */

/* 1 when the AVX2+FMA+F16C kernels are in use. */
int f16_simd_active(void);
/* 1: force the portable C kernels; 0: back to the run-time choice. */
void f16_force_portable(int on);

#endif
