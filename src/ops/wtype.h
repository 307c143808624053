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
#include "ops/q4_k.h"
#include "ops/q8_0.h"
#include "ops/repack.h"

/* Load-time forms (b11669's CPU repack buffer on AVX2): a matrix whose row
 * names a `packed` form and whose row count is a multiple of 8 is converted
 * once at load (wt_prepare) into memory the weights own, and from then on
 * plays as the row `packed` names, with its own activation type. These ids
 * lie past every GGUF type id: WT_FORM | the GGUF type whose block geometry
 * the data keeps (a repacked matrix has the plain one's bytes; a 4x8
 * activation block is exactly 4 plain rows). */
#define WT_FORM 0x1000u
enum {
    WT_Q4_0_X8 = WT_FORM | 2,    /* q4_0_8x8: Q4_0 weights, 8 rows interleaved */
    WT_Q8_0_X4 = WT_FORM | 8,    /* its activations: q8_0 4x8 groups, the rest plain q8_0 */
    WT_Q4_K_X8 = WT_FORM | 12,   /* q4_K_8x8 */
    WT_Q8_K_X4 = WT_FORM | 15,   /* Q8_K 4x8 groups, the rest plain Q8_K */
    WT_IQ4_NL_X8 = WT_FORM | 20  /* iq4_nl_8x8: IQ4_NL weights, 8 rows interleaved (q8_0 4x8 activations) */
};

/* One matrix as it lies in the map: rows of k values of one ggml type. */
typedef struct {
    uint32_t type;            /* GGUF_TYPE_* */
    const uint8_t *data;
    size_t rows, k, row_bytes, size;   /* size: bytes readable at data */
} wt_matrix;

/* A product through a vec_dot kernel alone (ggml's plain mul_mat on x86:
 * every output is one vec_dot of a weight row and an activation row). */
typedef struct {
    float (*dot)(const uint8_t *w, const uint8_t *act, size_t nblocks);
    const uint8_t *w;
    size_t w_row, rows, nb;      /* bytes per weight row, rows, blocks per row */
    const uint8_t *act;
    size_t a_row, ncols;         /* bytes per activation row, columns */
    float *y;                    /* y[c*rows + r] */
    k_tile_fn tile;              /* NULL, or K_TILE_ROWS x K_TILE_COLS outputs of dot at once */
} wt_vd_mm;

/* One product's state during a pool wake (whichever kind fills it). */
typedef union {
    q8_mm q;
    f16_mm f;
    wt_vd_mm v;
    x8_mm x;
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
    /* Instead of from_float, for an activation type whose columns are
     * converted together (the 4x8 forms): columns [c0, c1) of a product of
     * ncols columns (c0 a multiple of 4), column c at x + c*k, into act at
     * c * act_bytes(k). NULL otherwise. */
    void (*from_float_cols)(const float *x, uint8_t *act, size_t k, size_t c0, size_t c1,
                            size_t ncols);
    /* Checks the product y = W act (n token rows, act already of type act,
     * act_len bytes) and fills *mm and *job for one par_jobs wake. NULL when
     * weight == 0. 0, or -1 with the reason. */
    int (*mm_job)(wt_mm *mm, par_job *job, const wt_matrix *w, const uint8_t *act,
                  size_t act_len, size_t n, float *y, const par_pool *pool, char *err,
                  size_t errlen);
    /* Weight rows: the load-time form (a WT_*_X8 id) a matrix of this type
     * takes when its row count is a multiple of 8, or 0 (plays from the
     * map), and the conversion into it (same byte size). */
    uint32_t packed;
    int (*pack)(const uint8_t *w, size_t w_len, size_t rows, size_t k, uint8_t *out,
                size_t out_len, char *err, size_t errlen);
} wt_type;

/* The row of a type, or NULL when the forward pass has no kernel for it. */
const wt_type *wt_find(uint32_t type);
/* The rows, in table order (i < wt_count()). */
size_t wt_count(void);
const wt_type *wt_at(size_t i);

/* A row's name: gguf_type_name for GGUF ids, "Q4_K 8x8" / "Q8_K 4x8" /
 * "IQ4_NL 8x8" for the load-time forms. Returns a static string or buf. */
const char *wt_type_name(uint32_t type, char buf[16]);

/* Bytes the load-time form of a rows x k matrix of `type` takes (b11669's
 * repack of Q4_0, Q4_K and IQ4_NL matrix-multiply weights with rows % 8 == 0), or 0
 * when the matrix plays from the map as it is. The planner counts these
 * bytes (fw_hparams.owned_bytes): they are memory beyond the map. */
size_t wt_prepared_bytes(uint32_t type, size_t rows, size_t k);
/* Converts *m into its load-time form in buf (len >=
 * wt_prepared_bytes(m->type, m->rows, m->k) > 0); *m then refers to buf and
 * to the form's row (m->type = WT_*_X8). Only for matrix-multiply weights:
 * never token_embd, whose rows get_rows reads plain, as ggml keeps it out of
 * the repack buffer. 0, or -1 with the reason (*m unchanged). */
int wt_prepare(wt_matrix *m, uint8_t *buf, size_t len, char *err, size_t errlen);

/* The weight types that play, "F32, F16, BF16, Q8_0, Q1_0, Q2_0, Q4_0,
 * Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, IQ3_XXS,
 * IQ3_S" in table order, written into buf (refusals quote it). Returns buf. */
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
