/*
 * wtype.c -- the weight types' kernel table and the product driver that
 * reads it (see wtype.h). The kernels are the type files' (f16.c, q8_0.c,
 * q1_0.c, q2_0.c); this file only says which one each type takes.
 */
#include "ops/wtype.h"

#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "file/gguf.h"
#include "ops/q1_0.h"
#include "ops/q2_0.h"

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

/* ---- the table ------------------------------------------------------------ */

/* vec_dot_type as ggml-cpu's type_traits_cpu (b11669): F32 -> F32, F16 ->
 * F16, BF16 -> BF16, Q8_0 / Q1_0 / Q2_0 -> Q8_0. The order is the refusal's. */
static const wt_type table[] = {
    { GGUF_TYPE_F32, 1, GGUF_TYPE_F32, 4, f32_to_float, float_act_bytes, f32_act, float_mm_job },
    { GGUF_TYPE_F16, 1, GGUF_TYPE_F16, 1, f16_to_float, float_act_bytes, f16_act, float_mm_job },
    { GGUF_TYPE_BF16, 1, GGUF_TYPE_BF16, 1, bf16_to_float, float_act_bytes, bf16_act,
      float_mm_job },
    { GGUF_TYPE_Q8_0, 1, GGUF_TYPE_Q8_0, 1, q8_0_to_float, q8_act_bytes, q8_act, q8_0_job },
    { GGUF_TYPE_Q1_0, 1, GGUF_TYPE_Q8_0, 1, q1_0_to_float, NULL, NULL, q1_0_job },
    { GGUF_TYPE_Q2_0, 1, GGUF_TYPE_Q8_0, 1, q2_0_to_float, NULL, NULL, q2_0_job },
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

size_t wt_act_bytes_max(size_t k)
{
    size_t best = 0;
    for (size_t i = 0; i < N_TYPES; i++) {
        uint64_t be = 1, bb = 0;
        if (!table[i].act_bytes || !gguf_block_layout(table[i].type, &be, &bb)) continue;
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
    size_t k, arow;
    const wt_type *at;
} act_ctx;

static void act_job(void *ctx, size_t r0, size_t r1, int worker)
{
    const act_ctx *c = ctx;
    (void)worker;
    c->at->from_float(c->x + r0 * c->k, c->act + r0 * c->arow, c->k, r1 - r0);
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
    if (!at || !at->from_float || !at->act_bytes) {
        bk_err(err, errlen, "activation type %u has no conversion", ts[0]->act);
        return -1;
    }
    const size_t k = ws[0]->k, arow = at->act_bytes(k);
    if (n && arow > act_cap / n) {
        bk_err(err, errlen, "activation scratch too small");
        return -1;
    }
    act_ctx c = { x, act, k, arow, at };
    par_rows(pool, act_job, &c, n, 4);
    wt_mm mms[4];
    par_job jobs[4];
    for (size_t i = 0; i < nw; i++)
        if (ts[i]->mm_job(&mms[i], &jobs[i], ws[i], act, arow * n, n, ys[i], pool, err, errlen))
            return -1;
    par_jobs(pool, jobs, nw);
    return 0;
}
