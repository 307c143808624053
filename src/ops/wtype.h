/*
 * wtype.h -- the weight types' kernel table (ggml's type_traits_cpu habit):
 * one row per ggml type the forward pass plays, saying what the type
 * multiplies against and which kernels do it, so that the planner and the
 * graph choose a kernel by looking a row up, never by switching on the type.
 *
 * The file-level facts of a type (its name, values and bytes per block) stay
 * in src/file/gguf.c's table (gguf_type_info_of, gguf_block_layout): the
 * guard reads those. This table holds what the CPU does with the type.
 *
 * Adding a weight type: its kernel file in src/ops (e.g. q4_k.c/.h), its row
 * in gguf.c's table (name, block), its row here. A type whose activations are
 * of a type no row provides yet (Q4_K's vec_dot_type is Q8_K) also needs that
 * activation type's row here (weight = 0, with from_float and act_bytes).
 */
#ifndef BANKML_WTYPE_H
#define BANKML_WTYPE_H

#include <stddef.h>
#include <stdint.h>

#include "base/par.h"
#include "ops/f16.h"
#include "ops/q8_0.h"

/* One matrix as it lies in the map: rows of k values of one ggml type. */
typedef struct {
    uint32_t type;            /* GGUF_TYPE_* */
    const uint8_t *data;
    size_t rows, k, row_bytes, size;   /* size: bytes readable at data */
} wt_matrix;

/* One product's state during a pool wake (whichever kind fills it). */
typedef union {
    q8_mm q;
    f16_mm f;
} wt_mm;

typedef struct {
    uint32_t type;            /* GGUF_TYPE_* (the row's key) */
    int weight;               /* 1: plays as a weight type; 0: activations only */
    uint32_t act;             /* ggml's vec_dot_type: what activations become */
    size_t align;             /* alignment the kernels need of the data */
    /* get_rows: n values (whole blocks) of one row of len bytes, widened or
     * dequantized into y. 0, or -1 with the reason. NULL when weight == 0. */
    int (*to_float)(const uint8_t *row, size_t len, size_t n, float *y, char *err,
                    size_t errlen);
    /* As an activation type (rows that some row's act names): bytes of one
     * row of k values, and the conversion of rows x k floats into it (rows
     * one after another, act_bytes(k) bytes each). NULL otherwise. */
    size_t (*act_bytes)(size_t k);
    void (*from_float)(const float *x, uint8_t *y, size_t k, size_t rows);
    /* Checks the product y = W act (n token rows, act already of type act,
     * act_len bytes) and fills *mm and *job for one par_jobs wake. NULL when
     * weight == 0. 0, or -1 with the reason. */
    int (*mm_job)(wt_mm *mm, par_job *job, const wt_matrix *w, const uint8_t *act,
                  size_t act_len, size_t n, float *y, const par_pool *pool, char *err,
                  size_t errlen);
} wt_type;

/* The row of a type, or NULL when the forward pass has no kernel for it. */
const wt_type *wt_find(uint32_t type);
/* The rows, in table order (i < wt_count()). */
size_t wt_count(void);
const wt_type *wt_at(size_t i);

/* The weight types that play, "F32, F16, BF16, Q8_0, Q1_0, Q2_0" in table
 * order, written into buf (refusals quote it). Returns buf. */
const char *wt_names(char *buf, size_t len);

/* The largest act_bytes over the activation rows for rows of up to k values
 * (k rounded up to each activation type's block): the bytes per token row a
 * scratch for any product's activations needs. */
size_t wt_act_bytes_max(size_t k);

/* ys[i] = ws[i] x for n token rows of x (k = ws[0]->k floats each; every
 * matrix has that k; nw <= 4). Matrices that multiply against one activation
 * type share ONE conversion of x (into act, act_cap bytes) and ONE wake of
 * the pool, as ggml converts once per product; otherwise each goes alone.
 * 0, or -1 with the reason (no kernel, scratch too small, bad shape). */
int wt_mul_mat(par_pool *pool, const wt_matrix *const *ws, float *const *ys, size_t nw,
               const float *x, size_t n, uint8_t *act, size_t act_cap, char *err,
               size_t errlen);

#endif
