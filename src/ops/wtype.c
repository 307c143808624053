/*
 * wtype.c -- the weight types' kernel table and the product driver that
 * reads it (see wtype.h). The kernels are the type files' (f16.c, q8_0.c,
 * q1_0.c, q2_0.c, q4_0.c, q2_k.c, q4_k.c, iq4.c, tq.c, iq3.c, iq2.c, iq1.c, repack.c); this file only says which one
 * each type takes, plus the plain vec_dot product driver of the K-quants and
 * the legacy 4/5-bit types.
 */
#include "ops/wtype.h"

#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "file/gguf.h"
#include "ops/iq1.h"
#include "ops/iq2.h"
#include "ops/iq3.h"
#include "ops/iq4.h"
#include "ops/q1_0.h"
#include "ops/q2_0.h"
#include "ops/q2_k.h"
#include "ops/q4_0.h"
#include "ops/q4_k.h"
#include "ops/tq.h"

/* ---- float types: activations rounded to the type, widened back --------- */

static int f32_to_float(const uint8_t *row, size_t len, size_t n, float *y, char *err,
                        size_t errlen)
{
    (void)len; (void)err; (void)errlen;
    memcpy(y, row, n * sizeof(float));
    return 0;
}

static int f16_to_float(const uint8_t *row, size_t len, size_t n, float *y, char *err,
                        size_t errlen)
{
    (void)len; (void)err; (void)errlen;
    f16_to_f32_row((const uint16_t *)(const void *)row, y, n);
    return 0;
}

static int bf16_to_float(const uint8_t *row, size_t len, size_t n, float *y, char *err,
                         size_t errlen)
{
    (void)len; (void)err; (void)errlen;
    bf16_to_f32_row((const uint16_t *)(const void *)row, y, n);
    return 0;
}

static size_t float_act_bytes(size_t k) { return k * sizeof(float); }

#define FLOAT_ACT(name, type)                                                          \
    static void name(const float *x, uint8_t *y, size_t k, size_t rows)                \
    {                                                                                  \
        f16_round_act(type, x, (float *)(void *)y, rows * k);                          \
    }
FLOAT_ACT(f32_act, F16_T_F32)
FLOAT_ACT(f16_act, F16_T_F16)
FLOAT_ACT(bf16_act, F16_T_BF16)

/* A float matrix against activations rounded to its own type (f16.c). */
static int float_mm_job(wt_mm *mm, par_job *job, const wt_matrix *w, const uint8_t *act,
                        size_t act_len, size_t n, float *y, const par_pool *pool, char *err,
                        size_t errlen)
{
    (void)pool;
    if (act_len / sizeof(float) / w->k < n) {
        bk_err(err, errlen, "activations of %zu bytes hold fewer than %zu rows", act_len, n);
        return -1;
    }
    const f16_matrix fm = { (int)w->type, w->data, w->rows, w->k, w->row_bytes, w->size };
    return f16_mm_job(&mm->f, job, &fm, (const float *)(const void *)act, n, y, err, errlen);
}

/* ---- quantized types: against q8_0 activations ---------------------------- */

static size_t q8_act_bytes(size_t k) { return q8_0_row_bytes(k); }

static void q8_act(const float *x, uint8_t *y, size_t k, size_t rows)
{
    const size_t arow = q8_0_row_bytes(k);
    for (size_t t = 0; t < rows; t++)
        q8_0_quantize_blocks(x + t * k, y + t * arow, k / Q8_0_BLOCK);
}

/* name: a wt_type.mm_job over a type file's checker (init) and row job. */
#define Q8_ACT_JOB(name, init, rows_fn)                                                     \
    static int name(wt_mm *mm, par_job *job, const wt_matrix *w, const uint8_t *act,        \
                    size_t act_len, size_t n, float *y, const par_pool *pool, char *err,    \
                    size_t errlen)                                                          \
    {                                                                                       \
        if (init(&mm->q, w->data, w->size, w->rows, w->k, act, act_len, n, y, n * w->rows,  \
                 err, errlen))                                                              \
            return -1;                                                                      \
        job->fn = rows_fn;                                                                  \
        job->ctx = &mm->q;                                                                  \
        job->rows = w->rows;                                                                \
        job->chunk = q8_mm_chunk(&mm->q, pool);                                             \
        return 0;                                                                           \
    }
Q8_ACT_JOB(q8_0_job, q8_0_mm_init, q8_0_mm_rows)
Q8_ACT_JOB(q1_0_job, q1_0_mm_init, q1_0_mm_rows)
Q8_ACT_JOB(q2_0_job, q2_0_mm_init, q2_0_mm_rows)

static int q8_0_to_float(const uint8_t *row, size_t len, size_t n, float *y, char *err,
                         size_t errlen)
{
    return q8_0_dequantize(row, len, n, y, err, errlen);
}

static int q1_0_to_float(const uint8_t *row, size_t len, size_t n, float *y, char *err,
                         size_t errlen)
{
    return q1_0_dequantize(row, len, n, y, err, errlen);
}

static int q2_0_to_float(const uint8_t *row, size_t len, size_t n, float *y, char *err,
                         size_t errlen)
{
    return q2_0_dequantize(row, len, n, y, err, errlen);
}

/* ---- K-quants and the legacy 4/5-bit types: one vec_dot per output --------- */

/* b11669's ggml_compute_forward_mul_mat on x86 for these types: the
 * activations converted row by row to the vec_dot type, then every output
 * y[c][r] = vec_dot(weight row r, activation row c) with nrows = 1 (the
 * chunking only decides who computes an output, never how); Q4_0 and Q5_0
 * with 2+ columns go through llamafile's tinyBLAS_Q0_AVX, whose chain per
 * output is vec_dot's (same lanes, fma order and hsum). */
static void wt_vd_rows(void *ctx, size_t r0, size_t r1, int worker)
{
    const wt_vd_mm *m = ctx;
    (void)worker;
    size_t r = r0;
    if (m->tile)
        for (; r + K_TILE_ROWS <= r1; r += K_TILE_ROWS) {
            const uint8_t *w = m->w + r * m->w_row;
            size_t c = 0;
            for (; c + K_TILE_COLS <= m->ncols; c += K_TILE_COLS)
                m->tile(w, m->w_row, m->act + c * m->a_row, m->a_row, m->nb, m->y + c * m->rows + r, m->rows);
            for (; c < m->ncols; c++)
                for (size_t i = 0; i < K_TILE_ROWS; i++)
                    m->y[c * m->rows + r + i] = m->dot(w + i * m->w_row, m->act + c * m->a_row, m->nb);
        }
    for (; r < r1; r++) {
        const uint8_t *w = m->w + r * m->w_row;
        for (size_t c = 0; c < m->ncols; c++)
            m->y[c * m->rows + r] = m->dot(w, m->act + c * m->a_row, m->nb);
    }
}

/* Checks and fills a vec_dot product: weights of blk values / bytes bytes
 * per block against activations of abytes bytes per block (same blk). */
static int wt_vd_init(wt_mm *mm, par_job *job, const wt_matrix *w, const uint8_t *act,
                      size_t act_len, size_t n, float *y, size_t blk, size_t bytes,
                      size_t abytes, float (*dot)(const uint8_t *, const uint8_t *, size_t),
                      k_tile_fn tile, char *err, size_t errlen)
{
    char tb[16];
    if (w->k == 0 || w->k % blk != 0) {
        bk_err(err, errlen, "%s rows of %zu values are not whole blocks of %zu",
               wt_type_name(w->type, tb), w->k, blk);
        return -1;
    }
    const size_t nb = w->k / blk, w_row = nb * bytes, a_row = nb * abytes;
    if (w->row_bytes != w_row || (w->rows && w_row > w->size / w->rows) ||
        (n && a_row > act_len / n)) {
        bk_err(err, errlen, "%s product of %zu x %zu x %zu: short weights or activations",
               wt_type_name(w->type, tb), w->rows, w->k, n);
        return -1;
    }
    mm->v = (wt_vd_mm){ dot, w->data, w_row, w->rows, nb, act, a_row, n, y, tile };
    job->fn = wt_vd_rows;
    job->ctx = &mm->v;
    job->rows = w->rows;
    job->chunk = 0;
    return 0;
}

/* b11669's haswell backend multiplies a K-quant matrix that is not
 * repacked (Q2_K, Q3_K, Q5_K, Q6_K, a Q4_K whose rows are not in eights) by 8 or more
 * token columns (src1->ne[1] >= 8) with its tiled K-quant kernel
 * (ggml_compute_forward_mul_mat_tiled, GGML_CPU_TILED_MM on by default),
 * whose float order is not vec_dot's: each output is then q4_k.h's
 * (q2_k.h's) *_tiled_dot of the same Q8_K rows (measured on whole models: 7 columns
 * give vec_dot's bits, 8 the tiled kernel's). The tiles and the thread
 * split only decide who computes an output, never how. (Q4_0 / Q5_0 / Q4_1
 * / Q5_1 products keep vec_dot's bits at any column count.) */
#define WT_TILED_MIN_COLS 8

#define VD_JOB_T(name, blk, bytes, abytes, dot, tiled_dot, tile_of)                            \
    static int name(wt_mm *mm, par_job *job, const wt_matrix *w, const uint8_t *act,           \
                    size_t act_len, size_t n, float *y, const par_pool *pool, char *err,       \
                    size_t errlen)                                                             \
    {                                                                                          \
        float (*tdot_)(const uint8_t *, const uint8_t *, size_t) = tiled_dot;                  \
        k_tile_fn (*tile_)(void) = tile_of;                                                    \
        const int tiled = tdot_ && n >= WT_TILED_MIN_COLS;                                     \
        (void)pool;                                                                            \
        return wt_vd_init(mm, job, w, act, act_len, n, y, blk, bytes, abytes,                  \
                          tiled ? tdot_ : dot, tiled && tile_ ? tile_() : NULL, err, errlen);  \
    }
#define VD_JOB(name, blk, bytes, abytes, dot, tiled_dot) VD_JOB_T(name, blk, bytes, abytes, dot, tiled_dot, NULL)
/* A type whose products keep vec_dot's bits at every column count, with a
 * tile kernel of those bits (used from K_TILE_COLS columns). */
#define VD_JOB_V(name, blk, bytes, abytes, dot, tile_of)                                       \
    static int name(wt_mm *mm, par_job *job, const wt_matrix *w, const uint8_t *act,           \
                    size_t act_len, size_t n, float *y, const par_pool *pool, char *err,       \
                    size_t errlen)                                                             \
    {                                                                                          \
        (void)pool;                                                                            \
        return wt_vd_init(mm, job, w, act, act_len, n, y, blk, bytes, abytes, dot,             \
                          n >= K_TILE_COLS ? tile_of() : NULL, err, errlen);                   \
    }
VD_JOB_V(q4_0_job, Q4_0_BLOCK, Q4_0_BYTES, Q8_0_BYTES, q4_0_vec_dot, q4_0_tile)
VD_JOB(q4_1_job, Q4_0_BLOCK, Q4_1_BYTES, Q8_1_BYTES, q4_1_vec_dot, NULL)
VD_JOB_V(q5_0_job, Q4_0_BLOCK, Q5_0_BYTES, Q8_0_BYTES, q5_0_vec_dot, q5_0_tile)
VD_JOB(q5_1_job, Q4_0_BLOCK, Q5_1_BYTES, Q8_1_BYTES, q5_1_vec_dot, NULL)
VD_JOB_T(q4_k_job, QK_K_BLOCK, Q4_K_BYTES, Q8_K_BYTES, q4_k_vec_dot, q4_k_tiled_dot, q4_k_tiled_tile)
VD_JOB_T(q5_k_job, QK_K_BLOCK, Q5_K_BYTES, Q8_K_BYTES, q5_k_vec_dot, q5_k_tiled_dot, q5_k_tiled_tile)
VD_JOB_T(q6_k_job, QK_K_BLOCK, Q6_K_BYTES, Q8_K_BYTES, q6_k_vec_dot, q6_k_tiled_dot, q6_k_tiled_tile)
VD_JOB(q2_k_job, QK_K_BLOCK, Q2_K_BYTES, Q8_K_BYTES, q2_k_vec_dot, q2_k_tiled_dot)
VD_JOB(q3_k_job, QK_K_BLOCK, Q3_K_BYTES, Q8_K_BYTES, q3_k_vec_dot, q3_k_tiled_dot)
/* IQ4_XS: vec_dot below 8 columns, b11669's tiled kernel from 8 (its
 * <32, no min, BIAS 128> instance), as the K-quants. */
VD_JOB(iq4_xs_job, IQ4_XS_BLOCK, IQ4_XS_BYTES, Q8_K_BYTES, iq4_xs_vec_dot, iq4_xs_tiled_dot)

/* A plain IQ4_NL matrix (rows not in eights, or a tied output's copy that is
 * not repacked): one ggml_vec_dot_iq4_nl_q8_0 per output at every column
 * count (measured: b11669 sends no IQ4_NL product to llamafile's tinyBLAS,
 * whose one-accumulator chain differs from vec_dot's paired one, nor to the
 * tiled kernel). */
VD_JOB(iq4_nl_job, IQ4_NL_BLOCK, IQ4_NL_BYTES, Q8_0_BYTES, iq4_nl_vec_dot, NULL)
/* TQ1_0 / TQ2_0: vec_dot at every column count (no repacked form, no tiled
 * or llamafile case in b11669: measured on whole graphs to 65 columns). */
VD_JOB(tq1_0_job, QK_K_BLOCK, TQ1_0_BYTES, Q8_K_BYTES, tq1_0_vec_dot, NULL)
VD_JOB(tq2_0_job, QK_K_BLOCK, TQ2_0_BYTES, Q8_K_BYTES, tq2_0_vec_dot, NULL)
/* IQ3_XXS / IQ3_S: vec_dot below 8 columns, b11669's tiled kernel from 8
 * (its <32, no min, BIAS 128, ACTBIAS> instance); never repacked. */
VD_JOB(iq3_xxs_job, QK_K_BLOCK, IQ3_XXS_BYTES, Q8_K_BYTES, iq3_xxs_vec_dot, iq3_xxs_tiled_dot)
VD_JOB(iq3_s_job, QK_K_BLOCK, IQ3_S_BYTES, Q8_K_BYTES, iq3_s_vec_dot, iq3_s_tiled_dot)
/* IQ2_XXS / IQ2_XS / IQ2_S: the same split (vec_dot below 8 columns, the
 * tiled kernel from 8), measured against whole ggml_mul_mat graphs. */
VD_JOB(iq2_xxs_job, QK_K_BLOCK, IQ2_XXS_BYTES, Q8_K_BYTES, iq2_xxs_vec_dot, iq2_xxs_tiled_dot)
VD_JOB(iq2_xs_job, QK_K_BLOCK, IQ2_XS_BYTES, Q8_K_BYTES, iq2_xs_vec_dot, iq2_xs_tiled_dot)
VD_JOB(iq2_s_job, QK_K_BLOCK, IQ2_S_BYTES, Q8_K_BYTES, iq2_s_vec_dot, iq2_s_tiled_dot)
/* IQ1_S / IQ1_M: the same split. */
VD_JOB(iq1_s_job, QK_K_BLOCK, IQ1_S_BYTES, Q8_K_BYTES, iq1_s_vec_dot, iq1_s_tiled_dot)
VD_JOB(iq1_m_job, QK_K_BLOCK, IQ1_M_BYTES, Q8_K_BYTES, iq1_m_vec_dot, iq1_m_tiled_dot)

#define TO_FLOAT(name, fn)                                                                     \
    static int name(const uint8_t *row, size_t len, size_t n, float *y, char *err,             \
                    size_t errlen)                                                             \
    {                                                                                          \
        return fn(row, len, n, y, err, errlen);                                                \
    }
TO_FLOAT(q4_0_to_float, q4_0_dequantize)
TO_FLOAT(q4_1_to_float, q4_1_dequantize)
TO_FLOAT(q5_0_to_float, q5_0_dequantize)
TO_FLOAT(q5_1_to_float, q5_1_dequantize)
TO_FLOAT(q4_k_to_float, q4_k_dequantize)
TO_FLOAT(q5_k_to_float, q5_k_dequantize)
TO_FLOAT(q6_k_to_float, q6_k_dequantize)
TO_FLOAT(q2_k_to_float, q2_k_dequantize)
TO_FLOAT(q3_k_to_float, q3_k_dequantize)
TO_FLOAT(iq4_nl_to_float, iq4_nl_dequantize)
TO_FLOAT(iq4_xs_to_float, iq4_xs_dequantize)
TO_FLOAT(tq1_0_to_float, tq1_0_dequantize)
TO_FLOAT(tq2_0_to_float, tq2_0_dequantize)
TO_FLOAT(iq3_xxs_to_float, iq3_xxs_dequantize)
TO_FLOAT(iq3_s_to_float, iq3_s_dequantize)
TO_FLOAT(iq2_xxs_to_float, iq2_xxs_dequantize)
TO_FLOAT(iq2_xs_to_float, iq2_xs_dequantize)
TO_FLOAT(iq2_s_to_float, iq2_s_dequantize)
TO_FLOAT(iq1_s_to_float, iq1_s_dequantize)
TO_FLOAT(iq1_m_to_float, iq1_m_dequantize)

/* The activation types: q8_1 (Q4_1, Q5_1) and Q8_K (the K-quants), each
 * token row alone (quantize_row_q8_1 AVX2, quantize_row_q8_K_ref). */
static size_t q8_1_act_bytes(size_t k) { return q8_1_row_bytes(k); }
static size_t q8_k_act_bytes(size_t k) { return q8_k_row_bytes(k); }

static void q8_1_act(const float *x, uint8_t *y, size_t k, size_t rows)
{
    const size_t arow = q8_1_row_bytes(k);
    for (size_t t = 0; t < rows; t++)
        q8_1_quantize_blocks(x + t * k, y + t * arow, k / Q4_0_BLOCK);
}

static void q8_k_act(const float *x, uint8_t *y, size_t k, size_t rows)
{
    const size_t arow = q8_k_row_bytes(k);
    for (size_t t = 0; t < rows; t++)
        q8_k_quantize_blocks(x + t * k, y + t * arow, k / QK_K_BLOCK);
}

/* ---- the repacked forms (repack.c): b11669's q4_0_8x8 and q4_K_8x8 ---------- */

static void q8_0_x4_cols(const float *x, uint8_t *act, size_t k, size_t c0, size_t c1,
                         size_t ncols)
{
    x8_quantize_cols(Q4_0_TYPE, x, k, c0, c1, ncols, act);
}

static void q8_k_x4_cols(const float *x, uint8_t *act, size_t k, size_t c0, size_t c1,
                         size_t ncols)
{
    x8_quantize_cols(Q4_K_TYPE, x, k, c0, c1, ncols, act);
}

/* A repacked product over 8-row groups: the pool's chunks are whole groups,
 * so the thread count never changes a bit (as ggml's 8-aligned chunks). */
#define X8_JOB(name, type)                                                                     \
    static int name(wt_mm *mm, par_job *job, const wt_matrix *w, const uint8_t *act,           \
                    size_t act_len, size_t n, float *y, const par_pool *pool, char *err,       \
                    size_t errlen)                                                             \
    {                                                                                          \
        (void)pool;                                                                            \
        if (x8_mm_init(&mm->x, type, w->data, w->size, w->rows, w->k, act, act_len, n, y,      \
                       n * w->rows, err, errlen))                                              \
            return -1;                                                                         \
        job->fn = x8_mm_rows;                                                                  \
        job->ctx = &mm->x;                                                                     \
        job->rows = w->rows / 8;                                                               \
        job->chunk = 0;                                                                        \
        return 0;                                                                              \
    }
X8_JOB(q4_0_x8_job, Q4_0_TYPE)
X8_JOB(q4_k_x8_job, Q4_K_TYPE)
X8_JOB(iq4_nl_x8_job, IQ4_NL_TYPE)

/* ---- the table ------------------------------------------------------------ */

/* vec_dot_type as ggml-cpu's type_traits_cpu (b11669): F32 -> F32, F16 ->
 * F16, BF16 -> BF16, Q8_0 / Q1_0 / Q2_0 / Q4_0 / Q5_0 -> Q8_0, Q4_1 / Q5_1
 * -> Q8_1, Q2_K / Q3_K / Q4_K / Q5_K / Q6_K / IQ4_XS / TQ1_0 / TQ2_0 / IQ3_XXS /
 * IQ3_S / IQ2_XXS / IQ2_XS / IQ2_S / IQ1_S / IQ1_M -> Q8_K,
 * IQ4_NL -> Q8_0;
 * the repacked forms' (repack.cpp's
 * extra traits) the 4x8 interleaved quantizers. The order is the refusal's. */
#define R_WEIGHT(type, act, to_float, job) \
    { type, 1, act, 1, to_float, NULL, NULL, NULL, job, 0, NULL }
#define R_ACT(type, bytes, from) { type, 0, type, 1, NULL, bytes, from, NULL, NULL, 0, NULL }
static const wt_type table[] = {
    { GGUF_TYPE_F32, 1, GGUF_TYPE_F32, 4, f32_to_float, float_act_bytes, f32_act, NULL,
      float_mm_job, 0, NULL },
    { GGUF_TYPE_F16, 1, GGUF_TYPE_F16, 1, f16_to_float, float_act_bytes, f16_act, NULL,
      float_mm_job, 0, NULL },
    { GGUF_TYPE_BF16, 1, GGUF_TYPE_BF16, 1, bf16_to_float, float_act_bytes, bf16_act, NULL,
      float_mm_job, 0, NULL },
    { GGUF_TYPE_Q8_0, 1, GGUF_TYPE_Q8_0, 1, q8_0_to_float, q8_act_bytes, q8_act, NULL, q8_0_job,
      0, NULL },
    R_WEIGHT(GGUF_TYPE_Q1_0, GGUF_TYPE_Q8_0, q1_0_to_float, q1_0_job),
    R_WEIGHT(GGUF_TYPE_Q2_0, GGUF_TYPE_Q8_0, q2_0_to_float, q2_0_job),
    { GGUF_TYPE_Q4_0, 1, GGUF_TYPE_Q8_0, 1, q4_0_to_float, NULL, NULL, NULL, q4_0_job,
      WT_Q4_0_X8, q4_0_repack8 },
    R_WEIGHT(GGUF_TYPE_Q4_1, GGUF_TYPE_Q8_1, q4_1_to_float, q4_1_job),
    R_WEIGHT(GGUF_TYPE_Q5_0, GGUF_TYPE_Q8_0, q5_0_to_float, q5_0_job),
    R_WEIGHT(GGUF_TYPE_Q5_1, GGUF_TYPE_Q8_1, q5_1_to_float, q5_1_job),
    R_WEIGHT(GGUF_TYPE_Q2_K, GGUF_TYPE_Q8_K, q2_k_to_float, q2_k_job),
    R_WEIGHT(GGUF_TYPE_Q3_K, GGUF_TYPE_Q8_K, q3_k_to_float, q3_k_job),
    { GGUF_TYPE_Q4_K, 1, GGUF_TYPE_Q8_K, 1, q4_k_to_float, NULL, NULL, NULL, q4_k_job,
      WT_Q4_K_X8, q4_k_repack8 },
    R_WEIGHT(GGUF_TYPE_Q5_K, GGUF_TYPE_Q8_K, q5_k_to_float, q5_k_job),
    R_WEIGHT(GGUF_TYPE_Q6_K, GGUF_TYPE_Q8_K, q6_k_to_float, q6_k_job),
    { GGUF_TYPE_IQ4_NL, 1, GGUF_TYPE_Q8_0, 1, iq4_nl_to_float, NULL, NULL, NULL, iq4_nl_job,
      WT_IQ4_NL_X8, iq4_nl_repack8 },
    R_WEIGHT(GGUF_TYPE_IQ4_XS, GGUF_TYPE_Q8_K, iq4_xs_to_float, iq4_xs_job),
    R_WEIGHT(GGUF_TYPE_TQ1_0, GGUF_TYPE_Q8_K, tq1_0_to_float, tq1_0_job),
    R_WEIGHT(GGUF_TYPE_TQ2_0, GGUF_TYPE_Q8_K, tq2_0_to_float, tq2_0_job),
    R_WEIGHT(GGUF_TYPE_IQ3_XXS, GGUF_TYPE_Q8_K, iq3_xxs_to_float, iq3_xxs_job),
    R_WEIGHT(GGUF_TYPE_IQ3_S, GGUF_TYPE_Q8_K, iq3_s_to_float, iq3_s_job),
    R_WEIGHT(GGUF_TYPE_IQ2_XXS, GGUF_TYPE_Q8_K, iq2_xxs_to_float, iq2_xxs_job),
    R_WEIGHT(GGUF_TYPE_IQ2_XS, GGUF_TYPE_Q8_K, iq2_xs_to_float, iq2_xs_job),
    R_WEIGHT(GGUF_TYPE_IQ2_S, GGUF_TYPE_Q8_K, iq2_s_to_float, iq2_s_job),
    R_WEIGHT(GGUF_TYPE_IQ1_S, GGUF_TYPE_Q8_K, iq1_s_to_float, iq1_s_job),
    R_WEIGHT(GGUF_TYPE_IQ1_M, GGUF_TYPE_Q8_K, iq1_m_to_float, iq1_m_job),
    R_ACT(GGUF_TYPE_Q8_1, q8_1_act_bytes, q8_1_act),
    R_ACT(GGUF_TYPE_Q8_K, q8_k_act_bytes, q8_k_act),
    /* the load-time forms: weight = 0 (no file holds them), a product each */
    { WT_Q4_0_X8, 0, WT_Q8_0_X4, 1, NULL, NULL, NULL, NULL, q4_0_x8_job, 0, NULL },
    { WT_Q4_K_X8, 0, WT_Q8_K_X4, 1, NULL, NULL, NULL, NULL, q4_k_x8_job, 0, NULL },
    { WT_IQ4_NL_X8, 0, WT_Q8_0_X4, 1, NULL, NULL, NULL, NULL, iq4_nl_x8_job, 0, NULL },
    { WT_Q8_0_X4, 0, WT_Q8_0_X4, 1, NULL, q8_act_bytes, NULL, q8_0_x4_cols, NULL, 0, NULL },
    { WT_Q8_K_X4, 0, WT_Q8_K_X4, 1, NULL, q8_k_act_bytes, NULL, q8_k_x4_cols, NULL, 0, NULL },
};

#define N_TYPES (sizeof table / sizeof *table)

const wt_type *wt_find(uint32_t type)
{
    for (size_t i = 0; i < N_TYPES; i++)
        if (table[i].type == type) return &table[i];
    return NULL;
}

size_t wt_count(void) { return N_TYPES; }
const wt_type *wt_at(size_t i) { return i < N_TYPES ? &table[i] : NULL; }

const char *wt_names(char *buf, size_t len)
{
    size_t n = 0;
    if (len) buf[0] = '\0';
    for (size_t i = 0; i < N_TYPES; i++) {
        if (!table[i].weight) continue;
        char tb[16];
        int w = snprintf(buf + n, n < len ? len - n : 0, "%s%s", n ? ", " : "",
                         gguf_type_name(table[i].type, tb));
        if (w < 0) break;
        n += (size_t)w;
        if (n >= len) break;
    }
    return buf;
}

const char *wt_type_name(uint32_t type, char buf[16])
{
    switch (type) {
    case WT_Q4_0_X8: return "Q4_0 8x8";
    case WT_Q4_K_X8: return "Q4_K 8x8";
    case WT_IQ4_NL_X8: return "IQ4_NL 8x8";
    case WT_Q8_0_X4: return "q8_0 4x8";
    case WT_Q8_K_X4: return "Q8_K 4x8";
    }
    return gguf_type_name(type, buf);
}

size_t wt_prepared_bytes(uint32_t type, size_t rows, size_t k)
{
    const wt_type *t = wt_find(type);
    uint64_t be, bb;
    if (!t || !t->packed || !t->pack || rows == 0 || rows % 8 != 0 ||
        !gguf_block_layout(type, &be, &bb) || k == 0 || k % be != 0)
        return 0;
    const size_t row = k / (size_t)be * (size_t)bb;
    return row > SIZE_MAX / rows ? 0 : row * rows;
}

int wt_prepare(wt_matrix *m, uint8_t *buf, size_t len, char *err, size_t errlen)
{
    const size_t need = wt_prepared_bytes(m->type, m->rows, m->k);
    const wt_type *t = wt_find(m->type);
    char tb[16];
    if (!need) {
        bk_err(err, errlen, "%s matrix of %zu x %zu has no load-time form",
               wt_type_name(m->type, tb), m->rows, m->k);
        return -1;
    }
    if (len < need) {
        bk_err(err, errlen, "%s 8x8 form needs %zu bytes, not %zu", wt_type_name(m->type, tb),
               need, len);
        return -1;
    }
    if (t->pack(m->data, m->size, m->rows, m->k, buf, len, err, errlen)) return -1;
    m->type = t->packed;
    m->data = buf;
    m->size = need;
    return 0;
}

size_t wt_act_bytes_max(size_t k)
{
    size_t best = 0;
    for (size_t i = 0; i < N_TYPES; i++) {
        uint64_t be = 1, bb = 0;
        /* a load-time form keeps the block geometry of the type it is made of */
        const uint32_t lt = table[i].type & ~WT_FORM;
        if (!table[i].act_bytes || !gguf_block_layout(lt, &be, &bb)) continue;
        const size_t kk = (k + (size_t)be - 1) / (size_t)be * (size_t)be;
        const size_t b = table[i].act_bytes(kk);
        if (b > best) best = b;
    }
    return best;
}

/* ---- the product driver ---------------------------------------------------- */

/* The activation of a product, converted token row by token row (each row
 * alone, on the pool). */
typedef struct {
    const float *x;
    uint8_t *act;
    size_t k, arow, n;
    const wt_type *at;
} act_ctx;

static void act_job(void *ctx, size_t r0, size_t r1, int worker)
{
    const act_ctx *c = ctx;
    (void)worker;
    c->at->from_float(c->x + r0 * c->k, c->act + r0 * c->arow, c->k, r1 - r0);
}

/* The same for the 4x8 forms: rows [g0, g1) are groups of 4 columns. */
static void act_cols_job(void *ctx, size_t g0, size_t g1, int worker)
{
    const act_ctx *c = ctx;
    (void)worker;
    const size_t c1 = 4 * g1 < c->n ? 4 * g1 : c->n;
    c->at->from_float_cols(c->x, c->act, c->k, 4 * g0, c1, c->n);
}

int wt_mul_mat(par_pool *pool, const wt_matrix *const *ws, float *const *ys, size_t nw,
               const float *x, size_t n, uint8_t *act, size_t act_cap, char *err,
               size_t errlen)
{
    const wt_type *ts[4];
    if (nw == 0 || nw > 4) {
        bk_err(err, errlen, "%zu matrices in one product; 1 to 4 allowed", nw);
        return -1;
    }
    int same = 1;
    for (size_t i = 0; i < nw; i++) {
        ts[i] = wt_find(ws[i]->type);
        if (!ts[i] || !ts[i]->mm_job) {
            bk_err(err, errlen, "weight type %u has no kernel", ws[i]->type);
            return -1;
        }
        if (ts[i]->act != ts[0]->act || ws[i]->k != ws[0]->k) same = 0;
    }
    if (!same) {
        for (size_t i = 0; i < nw; i++)
            if (wt_mul_mat(pool, &ws[i], &ys[i], 1, x, n, act, act_cap, err, errlen)) return -1;
        return 0;
    }
    const wt_type *at = wt_find(ts[0]->act);
    if (!at || !(at->from_float || at->from_float_cols) || !at->act_bytes) {
        bk_err(err, errlen, "activation type %u has no conversion", ts[0]->act);
        return -1;
    }
    const size_t k = ws[0]->k, arow = at->act_bytes(k);
    if (n && arow > act_cap / n) {
        bk_err(err, errlen, "activation scratch too small");
        return -1;
    }
    act_ctx c = { x, act, k, arow, n, at };
    if (at->from_float_cols)
        par_rows(pool, act_cols_job, &c, (n + 3) / 4, 1);
    else
        par_rows(pool, act_job, &c, n, 4);
    wt_mm mms[4];
    par_job jobs[4];
    for (size_t i = 0; i < nw; i++)
        if (ts[i]->mm_job(&mms[i], &jobs[i], ws[i], act, arow * n, n, ys[i], pool, err, errlen))
            return -1;
    par_jobs(pool, jobs, nw);
    return 0;
}
