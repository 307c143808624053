/*
 * test_wtype.c -- the weight types' kernel table (src/ops/wtype.c): every
 * row's activation type, block and alignment as literals, its agreement with
 * gguf.c's file table, and the product driver against the type files'
 * kernels called directly (the same bits).
 */
#include "test.h"

#include <math.h>
#include <stdlib.h>

#include "file/gguf.h"
#include "ops/f16.h"
#include "ops/q8_0.h"
#include "ops/wtype.h"

TEST(wtype_rows_are_the_six_types_with_their_activations)
{
    static const struct { uint32_t type, act; uint64_t be, bb; size_t align; } want[] = {
        { GGUF_TYPE_F32, GGUF_TYPE_F32, 1, 4, 4 },
        { GGUF_TYPE_F16, GGUF_TYPE_F16, 1, 2, 1 },
        { GGUF_TYPE_BF16, GGUF_TYPE_BF16, 1, 2, 1 },
        { GGUF_TYPE_Q8_0, GGUF_TYPE_Q8_0, 32, 34, 1 },
        { GGUF_TYPE_Q1_0, GGUF_TYPE_Q8_0, 128, 18, 1 },
        { GGUF_TYPE_Q2_0, GGUF_TYPE_Q8_0, 64, 18, 1 },
    };
    CHECK_INT(wt_count(), 6);
    CHECK(wt_at(6) == NULL);
    for (size_t i = 0; i < 6; i++) {
        const wt_type *t = wt_at(i);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK_INT(t->type, want[i].type);
        CHECK_INT(t->act, want[i].act);
        CHECK_INT(t->weight, 1);
        CHECK_INT(t->align, want[i].align);
        CHECK(wt_find(t->type) == t);
        CHECK(t->to_float != NULL && t->mm_job != NULL);
        /* the file table (the guard's) knows the same block */
        uint64_t be = 0, bb = 0;
        CHECK(gguf_block_layout(t->type, &be, &bb) == 1);
        CHECK_U64(be, want[i].be);
        CHECK_U64(bb, want[i].bb);
        /* the activation type has its own row, with a conversion */
        const wt_type *a = wt_find(t->act);
        CHECK(a != NULL && a->from_float != NULL && a->act_bytes != NULL);
        /* types that are their own activation convert; the others do not */
        CHECK_INT(t->from_float != NULL, t->act == t->type);
    }
    CHECK(wt_find(GGUF_TYPE_Q4_K) == NULL);
    CHECK(wt_find(GGUF_TYPE_Q8_K) == NULL);
    CHECK(wt_find(GGUF_TYPE_Q4_0) == NULL);
    char buf[128];
    CHECK_STR(wt_names(buf, sizeof buf), "F32, F16, BF16, Q8_0, Q1_0, Q2_0");
    CHECK_STR(wt_names(buf, 9), "F32, F16");
}

TEST(wtype_activation_bytes)
{
    CHECK_INT(wt_find(GGUF_TYPE_F32)->act_bytes(256), 1024);
    CHECK_INT(wt_find(GGUF_TYPE_F16)->act_bytes(256), 1024);   /* rounded, kept widened */
    CHECK_INT(wt_find(GGUF_TYPE_Q8_0)->act_bytes(256), 272);
    CHECK_INT(wt_act_bytes_max(100), 400);
    CHECK_INT(wt_act_bytes_max(4096), 16384);
}

TEST(wtype_to_float_widens_and_dequantizes)
{
    const uint16_t h[4] = { 0x3c00, 0xc000, 0x3800, 0x0000 };   /* 1, -2, 0.5, 0 */
    float y[32];
    char err[128];
    CHECK(wt_find(GGUF_TYPE_F16)->to_float((const uint8_t *)h, 8, 4, y, err, sizeof err) == 0);
    CHECK(y[0] == 1.0f && y[1] == -2.0f && y[2] == 0.5f && y[3] == 0.0f);
    const uint16_t b[2] = { 0x3f80, 0x4040 };                     /* bf16 1, 3 */
    CHECK(wt_find(GGUF_TYPE_BF16)->to_float((const uint8_t *)b, 4, 2, y, err, sizeof err) == 0);
    CHECK(y[0] == 1.0f && y[1] == 3.0f);
    float x[32], back[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(i - 16) * 0.25f;
    uint8_t q[34];
    CHECK(q8_0_quantize(x, 32, q, sizeof q, err, sizeof err) == 0);
    CHECK(q8_0_dequantize(q, sizeof q, 32, back, err, sizeof err) == 0);
    CHECK(wt_find(GGUF_TYPE_Q8_0)->to_float(q, sizeof q, 32, y, err, sizeof err) == 0);
    CHECK_MEM(y, back, sizeof back);
    CHECK(y[31] != 0.0f);
}

/* A small random matrix of rows x k in type t (F16 or Q8_0). */
static uint8_t *make_matrix(uint32_t t, size_t rows, size_t k, size_t *row_bytes)
{
    float *f = malloc(rows * k * sizeof *f);
    uint32_t z = 12345;
    for (size_t i = 0; i < rows * k; i++) {
        z = z * 1103515245u + 12345u;
        f[i] = (float)((int)(z >> 16) % 2001 - 1000) / 997.0f;
    }
    *row_bytes = t == GGUF_TYPE_F16 ? k * 2 : q8_0_row_bytes(k);
    uint8_t *w = malloc(rows * *row_bytes);
    char err[64];
    for (size_t r = 0; r < rows; r++) {
        if (t == GGUF_TYPE_F16)
            f32_to_f16_row(f + r * k, (uint16_t *)(void *)(w + r * *row_bytes), k);
        else
            q8_0_quantize(f + r * k, k, w + r * *row_bytes, *row_bytes, err, sizeof err);
    }
    free(f);
    return w;
}

TEST(wtype_mul_mat_equals_the_kernels_called_directly)
{
    enum { ROWS = 12, K = 64, N = 3 };
    char err[256];
    par_pool *pool = par_create(2, err, sizeof err);
    CHECK(pool != NULL);
    size_t rb16, rb8;
    uint8_t *w16 = make_matrix(GGUF_TYPE_F16, ROWS, K, &rb16);
    uint8_t *w8 = make_matrix(GGUF_TYPE_Q8_0, ROWS, K, &rb8);
    float x[N * K];
    for (int i = 0; i < N * K; i++) x[i] = sinf((float)i * 0.37f);
    /* direct: F16 through f16_mul_mat_f32, Q8_0 through q8_0_matmul */
    float want16[N * ROWS], want8[N * ROWS], scratch[N * K];
    const f16_matrix fm = { F16_T_F16, w16, ROWS, K, rb16, ROWS * rb16 };
    CHECK(f16_mul_mat_f32(pool, &fm, x, N, scratch, want16, err, sizeof err) == 0);
    uint8_t qa[N * 68];
    for (int c = 0; c < N; c++)
        CHECK(q8_0_quantize(x + c * K, K, qa + c * 68, 68, err, sizeof err) == 0);
    CHECK(q8_0_matmul(pool, w8, ROWS * rb8, ROWS, K, qa, sizeof qa, N, want8, N * ROWS, err,
                      sizeof err) == 0);
    /* through the table: both in one call (different activations: two wakes) */
    const wt_matrix m16 = { GGUF_TYPE_F16, w16, ROWS, K, rb16, ROWS * rb16 };
    const wt_matrix m8 = { GGUF_TYPE_Q8_0, w8, ROWS, K, rb8, ROWS * rb8 };
    float got16[N * ROWS], got8[N * ROWS], got8b[N * ROWS];
    const size_t cap = N * wt_act_bytes_max(K);
    uint8_t *act = malloc(cap);
    const wt_matrix *ws[2] = { &m16, &m8 };
    float *const ys[2] = { got16, got8 };
    CHECK(wt_mul_mat(pool, ws, ys, 2, x, N, act, cap, err, sizeof err) == 0);
    CHECK_MEM(got16, want16, sizeof want16);
    CHECK_MEM(got8, want8, sizeof want8);
    /* two Q8_0 matrices share one quantization and one wake: same bits */
    const wt_matrix *w2[2] = { &m8, &m8 };
    float *const y2[2] = { got8, got8b };
    CHECK(wt_mul_mat(pool, w2, y2, 2, x, N, act, cap, err, sizeof err) == 0);
    CHECK_MEM(got8, want8, sizeof want8);
    CHECK_MEM(got8b, want8, sizeof want8);
    /* refusals: a type without a kernel, a scratch too small */
    const wt_matrix bad = { GGUF_TYPE_Q4_K, w8, ROWS, K, rb8, ROWS * rb8 };
    const wt_matrix *wb[1] = { &bad };
    CHECK(wt_mul_mat(pool, wb, ys, 1, x, N, act, cap, err, sizeof err) == -1);
    CHECK_STR(err, "weight type 12 has no kernel");
    CHECK(wt_mul_mat(pool, ws, ys, 1, x, N, act, 100, err, sizeof err) == -1);
    CHECK_STR(err, "activation scratch too small");
    free(act);
    free(w16);
    free(w8);
    par_destroy(pool);
}
