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
#include "ops/iq1.h"
#include "ops/iq2.h"
#include "ops/iq3.h"
#include "ops/iq4.h"
#include "ops/q4_0.h"
#include "ops/q4_k.h"
#include "ops/q8_0.h"
#include "ops/repack.h"
#include "ops/tq.h"
#include "ops/wtype.h"

TEST(wtype_rows_are_the_types_with_their_activations)
{
    /* weight rows: type, vec_dot_type, block, alignment, load-time form */
    static const struct { uint32_t type, act; uint64_t be, bb; size_t align; uint32_t packed; } want[] = {
        { GGUF_TYPE_F32, GGUF_TYPE_F32, 1, 4, 4, 0 },
        { GGUF_TYPE_F16, GGUF_TYPE_F16, 1, 2, 1, 0 },
        { GGUF_TYPE_BF16, GGUF_TYPE_BF16, 1, 2, 1, 0 },
        { GGUF_TYPE_Q8_0, GGUF_TYPE_Q8_0, 32, 34, 1, 0 },
        { GGUF_TYPE_Q1_0, GGUF_TYPE_Q8_0, 128, 18, 1, 0 },
        { GGUF_TYPE_Q2_0, GGUF_TYPE_Q8_0, 64, 18, 1, 0 },
        { GGUF_TYPE_Q4_0, GGUF_TYPE_Q8_0, 32, 18, 1, WT_Q4_0_X8 },
        { GGUF_TYPE_Q4_1, GGUF_TYPE_Q8_1, 32, 20, 1, 0 },
        { GGUF_TYPE_Q5_0, GGUF_TYPE_Q8_0, 32, 22, 1, 0 },
        { GGUF_TYPE_Q5_1, GGUF_TYPE_Q8_1, 32, 24, 1, 0 },
        { GGUF_TYPE_Q2_K, GGUF_TYPE_Q8_K, 256, 84, 1, 0 },
        { GGUF_TYPE_Q3_K, GGUF_TYPE_Q8_K, 256, 110, 1, 0 },
        { GGUF_TYPE_Q4_K, GGUF_TYPE_Q8_K, 256, 144, 1, WT_Q4_K_X8 },
        { GGUF_TYPE_Q5_K, GGUF_TYPE_Q8_K, 256, 176, 1, 0 },
        { GGUF_TYPE_Q6_K, GGUF_TYPE_Q8_K, 256, 210, 1, 0 },
        { GGUF_TYPE_IQ4_NL, GGUF_TYPE_Q8_0, 32, 18, 1, WT_IQ4_NL_X8 },
        { GGUF_TYPE_IQ4_XS, GGUF_TYPE_Q8_K, 256, 136, 1, 0 },
        { GGUF_TYPE_TQ1_0, GGUF_TYPE_Q8_K, 256, 54, 1, 0 },
        { GGUF_TYPE_TQ2_0, GGUF_TYPE_Q8_K, 256, 66, 1, 0 },
        { GGUF_TYPE_IQ3_XXS, GGUF_TYPE_Q8_K, 256, 98, 1, 0 },
        { GGUF_TYPE_IQ3_S, GGUF_TYPE_Q8_K, 256, 110, 1, 0 },
        { GGUF_TYPE_IQ2_XXS, GGUF_TYPE_Q8_K, 256, 66, 1, 0 },
        { GGUF_TYPE_IQ2_XS, GGUF_TYPE_Q8_K, 256, 74, 1, 0 },
        { GGUF_TYPE_IQ2_S, GGUF_TYPE_Q8_K, 256, 82, 1, 0 },
        { GGUF_TYPE_IQ1_S, GGUF_TYPE_Q8_K, 256, 50, 1, 0 },
        { GGUF_TYPE_IQ1_M, GGUF_TYPE_Q8_K, 256, 56, 1, 0 },
    };
    enum { NW = sizeof want / sizeof want[0] };
    CHECK_INT(wt_count(), NW + 7);
    CHECK(wt_at(NW + 7) == NULL);
    for (size_t i = 0; i < NW; i++) {
        const wt_type *t = wt_at(i);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK_INT(t->type, want[i].type);
        CHECK_INT(t->act, want[i].act);
        CHECK_INT(t->weight, 1);
        CHECK_INT(t->align, want[i].align);
        CHECK_INT(t->packed, want[i].packed);
        CHECK_INT(t->pack != NULL, want[i].packed != 0);
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
        /* a load-time form multiplies against its own (4x8) activations */
        if (t->packed) {
            const wt_type *p = wt_find(t->packed);
            CHECK(p != NULL && p->weight == 0 && p->mm_job != NULL && p->to_float == NULL);
            const wt_type *pa = p ? wt_find(p->act) : NULL;
            CHECK(pa != NULL && pa->from_float_cols != NULL && pa->from_float == NULL);
            CHECK(pa != NULL && pa->act_bytes(256) == a->act_bytes(256));
        }
    }
    /* the activation-only rows */
    CHECK(wt_find(GGUF_TYPE_Q8_1) && wt_find(GGUF_TYPE_Q8_1)->weight == 0);
    CHECK(wt_find(GGUF_TYPE_Q8_K) && wt_find(GGUF_TYPE_Q8_K)->weight == 0);
    CHECK_INT(wt_find(GGUF_TYPE_Q8_K)->act_bytes(512), 584);
    CHECK_INT(wt_find(GGUF_TYPE_Q8_1)->act_bytes(64), 72);
    CHECK(wt_find(GGUF_TYPE_Q3_K) && wt_find(GGUF_TYPE_Q3_K)->act == GGUF_TYPE_Q8_K);
    CHECK(wt_find(GGUF_TYPE_Q2_K) && wt_find(GGUF_TYPE_Q2_K)->act == GGUF_TYPE_Q8_K);
    CHECK(wt_find(GGUF_TYPE_MXFP4) == NULL);
    CHECK(wt_find(WT_IQ4_NL_X8) && wt_find(WT_IQ4_NL_X8)->act == WT_Q8_0_X4);
    char buf[200], tb[16];
    CHECK_STR(wt_names(buf, sizeof buf),
              "F32, F16, BF16, Q8_0, Q1_0, Q2_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, "
              "IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M");
    CHECK_STR(wt_names(buf, 9), "F32, F16");
    CHECK_STR(wt_type_name(WT_Q4_K_X8, tb), "Q4_K 8x8");
    CHECK_STR(wt_type_name(WT_IQ4_NL_X8, tb), "IQ4_NL 8x8");
    CHECK_STR(wt_type_name(WT_Q8_0_X4, tb), "q8_0 4x8");
    CHECK_STR(wt_type_name(GGUF_TYPE_Q6_K, tb), "Q6_K");
    /* load-time forms: Q4_0 / Q4_K with rows in eights, the plain matrix's bytes */
    CHECK_INT(wt_prepared_bytes(GGUF_TYPE_Q4_K, 16, 512), 16 * 2 * 144);
    CHECK_INT(wt_prepared_bytes(GGUF_TYPE_Q4_0, 8, 64), 8 * 2 * 18);
    CHECK_INT(wt_prepared_bytes(GGUF_TYPE_Q4_K, 12, 512), 0);
    CHECK_INT(wt_prepared_bytes(GGUF_TYPE_Q6_K, 16, 512), 0);
    CHECK_INT(wt_prepared_bytes(GGUF_TYPE_Q8_0, 16, 512), 0);
    CHECK_INT(wt_prepared_bytes(GGUF_TYPE_Q4_0, 16, 48), 0);
    CHECK_INT(wt_prepared_bytes(GGUF_TYPE_IQ4_NL, 8, 64), 8 * 2 * 18);
    CHECK_INT(wt_prepared_bytes(GGUF_TYPE_IQ4_NL, 12, 64), 0);
    CHECK_INT(wt_prepared_bytes(GGUF_TYPE_IQ4_XS, 16, 512), 0);   /* never repacked on AVX2 */
}

TEST(wtype_activation_bytes)
{
    CHECK_INT(wt_find(GGUF_TYPE_F32)->act_bytes(256), 1024);
    CHECK_INT(wt_find(GGUF_TYPE_F16)->act_bytes(256), 1024);   /* rounded, kept widened */
    CHECK_INT(wt_find(GGUF_TYPE_Q8_0)->act_bytes(256), 272);
    CHECK_INT(wt_act_bytes_max(100), 400);
    CHECK_INT(wt_act_bytes_max(4096), 16384);
    CHECK_INT(wt_find(WT_Q8_K_X4)->act_bytes(256), 292);
    CHECK_INT(wt_find(WT_Q8_0_X4)->act_bytes(256), 272);
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
    const wt_matrix bad = { GGUF_TYPE_MXFP4, w8, ROWS, K, rb8, ROWS * rb8 };
    const wt_matrix *wb[1] = { &bad };
    CHECK(wt_mul_mat(pool, wb, ys, 1, x, N, act, cap, err, sizeof err) == -1);
    CHECK_STR(err, "weight type 39 has no kernel");
    CHECK(wt_mul_mat(pool, ws, ys, 1, x, N, act, 100, err, sizeof err) == -1);
    CHECK_STR(err, "activation scratch too small");
    free(act);
    free(w16);
    free(w8);
    par_destroy(pool);
}

/* Random blocks of `bytes` bytes whose first nscale halves are small fp16
 * scales (the rest random quants), rows x nb blocks. */
static uint8_t *rand_blocks(size_t rows, size_t nb, size_t bytes, size_t nscale, uint32_t seed)
{
    uint8_t *w = malloc(rows * nb * bytes);
    uint32_t z = seed;
    for (size_t i = 0; i < rows * nb * bytes; i++) {
        z = z * 1103515245u + 12345u;
        w[i] = (uint8_t)(z >> 16);
    }
    for (size_t b = 0; b < rows * nb; b++)
        for (size_t j = 0; j < nscale; j++) {
            const uint16_t h = (uint16_t)(0x2c00 + (b * 7 + j * 131) % 0x400);   /* 1/16 .. 1/8 */
            w[b * bytes + 2 * j] = (uint8_t)h;
            w[b * bytes + 2 * j + 1] = (uint8_t)(h >> 8);
        }
    return w;
}

TEST(wtype_quantized_products_equal_their_kernels)
{
    enum { K = 512, N = 5 };
    char err[320];
    par_pool *pool = par_create(2, err, sizeof err);
    float x[8 * K];
    for (int i = 0; i < 8 * K; i++) x[i] = sinf((float)i * 0.11f) * (1.0f + (float)(i % 7));
    const size_t cap = 8 * wt_act_bytes_max(K);
    uint8_t *act = malloc(cap);
    /* Q4_K with 12 rows (not in eights: plain vec_dot against Q8_K rows) */
    uint8_t *wk = rand_blocks(12, K / 256, Q4_K_BYTES, 2, 7);
    const wt_matrix mk = { GGUF_TYPE_Q4_K, wk, 12, K, 2 * Q4_K_BYTES, 12 * 2 * Q4_K_BYTES };
    float got[8 * 16], want[8 * 16];
    uint8_t a8k[N * 2 * Q8_K_BYTES];
    for (int c = 0; c < N; c++) {
        CHECK(q8_k_quantize(x + c * K, K, a8k + c * 2 * Q8_K_BYTES, 2 * Q8_K_BYTES, err, sizeof err) == 0);
        for (int r = 0; r < 12; r++)
            want[c * 12 + r] = q4_k_vec_dot(wk + r * 2 * Q4_K_BYTES, a8k + c * 2 * Q8_K_BYTES, 2);
    }
    const wt_matrix *ws[1] = { &mk };
    float *const ys[1] = { got };
    CHECK(wt_mul_mat(pool, ws, ys, 1, x, N, act, cap, err, sizeof err) == 0);
    CHECK_MEM(got, want, N * 12 * sizeof(float));
    CHECK(want[0] != 0.0f && want[N * 12 - 1] != 0.0f);
    /* 8 columns: b11669's tiled K-quant kernel, one q4_k_tiled_dot per output
     * (another float order: some outputs differ from vec_dot's) */
    int tdiffer = 0;
    for (int c = 0; c < 8; c++) {
        CHECK(q8_k_quantize(x + c * K, K, a8k, 2 * Q8_K_BYTES, err, sizeof err) == 0);
        for (int r = 0; r < 12; r++) {
            want[c * 12 + r] = q4_k_tiled_dot(wk + r * 2 * Q4_K_BYTES, a8k, 2);
            tdiffer += want[c * 12 + r] != q4_k_vec_dot(wk + r * 2 * Q4_K_BYTES, a8k, 2);
        }
    }
    CHECK(wt_mul_mat(pool, ws, ys, 1, x, 8, act, cap, err, sizeof err) == 0);
    CHECK_MEM(got, want, 8 * 12 * sizeof(float));
    CHECK(tdiffer > 0);
    /* Q4_1 against q8_1 */
    uint8_t *w1 = rand_blocks(3, K / 32, Q4_1_BYTES, 2, 9);
    const wt_matrix m1 = { GGUF_TYPE_Q4_1, w1, 3, K, 16 * Q4_1_BYTES, 3 * 16 * Q4_1_BYTES };
    uint8_t a81[N * 16 * Q8_1_BYTES];
    for (int c = 0; c < N; c++) {
        CHECK(q8_1_quantize(x + c * K, K, a81 + c * 16 * Q8_1_BYTES, 16 * Q8_1_BYTES, err, sizeof err) == 0);
        for (int r = 0; r < 3; r++)
            want[c * 3 + r] = q4_1_vec_dot(w1 + r * 16 * Q4_1_BYTES, a81 + c * 16 * Q8_1_BYTES, 16);
    }
    const wt_matrix *w1s[1] = { &m1 };
    CHECK(wt_mul_mat(pool, w1s, ys, 1, x, N, act, cap, err, sizeof err) == 0);
    CHECK_MEM(got, want, N * 3 * sizeof(float));
    /* Q4_0 with 16 rows: the load-time 8x8 form, then the repacked product
     * for 1..8 columns equals x8_mul_mat (groups of 4 by gemm, the rest by
     * gemv), on one thread and on two */
    uint8_t *w0 = rand_blocks(16, K / 32, Q4_0_BYTES, 1, 11);
    const size_t wlen = 16 * 16 * Q4_0_BYTES;
    wt_matrix m0 = { GGUF_TYPE_Q4_0, w0, 16, K, 16 * Q4_0_BYTES, wlen };
    CHECK_INT(wt_prepared_bytes(GGUF_TYPE_Q4_0, 16, K), wlen);
    uint8_t *packed = malloc(wlen), *mine = malloc(wlen);
    CHECK(wt_prepare(&m0, packed, wlen - 1, err, sizeof err) == -1);
    CHECK_STR(err, "Q4_0 8x8 form needs 4608 bytes, not 4607");
    CHECK(wt_prepare(&m0, packed, wlen, err, sizeof err) == 0);
    CHECK_INT(m0.type, WT_Q4_0_X8);
    CHECK(m0.data == packed);
    CHECK(q4_0_repack8(w0, wlen, 16, K, mine, wlen, err, sizeof err) == 0);
    CHECK_MEM(packed, mine, wlen);
    CHECK(wt_prepare(&m0, packed, wlen, err, sizeof err) == -1);
    CHECK_STR(err, "Q4_0 8x8 matrix of 16 x 512 has no load-time form");
    uint8_t *work = malloc(x8_work_bytes(Q4_0_TYPE, K, 8));
    const wt_matrix *w0s[1] = { &m0 };
    for (size_t n = 1; n <= 8; n++) {
        CHECK(x8_mul_mat(NULL, Q4_0_TYPE, mine, wlen, 16, K, x, n, want, 16 * n, work,
                         x8_work_bytes(Q4_0_TYPE, K, n), err, sizeof err) == 0);
        CHECK(wt_mul_mat(pool, w0s, ys, 1, x, n, act, cap, err, sizeof err) == 0);
        CHECK_MEM(got, want, 16 * n * sizeof(float));
        CHECK(wt_mul_mat(NULL, w0s, ys, 1, x, n, act, cap, err, sizeof err) == 0);
        CHECK_MEM(got, want, 16 * n * sizeof(float));
    }
    /* the repacked product is not the plain one (another float order): the
     * first column through gemv vs vec_dot differs somewhere */
    uint8_t a80[16 * Q8_0_BYTES];
    CHECK(q8_0_quantize(x, K, a80, sizeof a80, err, sizeof err) == 0);
    int differ = 0;
    CHECK(wt_mul_mat(NULL, w0s, ys, 1, x, 1, act, cap, err, sizeof err) == 0);
    for (int r = 0; r < 16; r++)
        differ += got[r] != q4_0_vec_dot(w0 + r * 16 * Q4_0_BYTES, a80, 16);
    CHECK(differ > 0);
    free(work);
    free(mine);
    free(packed);
    free(w0);
    free(w1);
    free(wk);
    free(act);
    par_destroy(pool);
}

TEST(wtype_iq4_products_equal_their_kernels)
{
    enum { K = 512 };
    char err[320];
    par_pool *pool = par_create(2, err, sizeof err);
    float x[8 * K];
    for (int i = 0; i < 8 * K; i++) x[i] = cosf((float)i * 0.13f) * (1.0f + (float)(i % 5));
    const size_t cap = 8 * wt_act_bytes_max(K);
    uint8_t *act = malloc(cap);
    float got[8 * 16], want[8 * 16];
    /* the values: ggml's kvalues_iq4nl, and a block of d = 1 dequantizes to them */
    CHECK_INT(iq4_value(0), -127);
    CHECK_INT(iq4_value(7), -10);
    CHECK_INT(iq4_value(8), 1);
    CHECK_INT(iq4_value(15), 113);
    uint8_t blk[IQ4_NL_BYTES] = { 0x00, 0x3c };
    for (int j = 0; j < 16; j++) blk[2 + j] = (uint8_t)(j | (15 - j) << 4);
    float y[32];
    CHECK(wt_find(GGUF_TYPE_IQ4_NL)->to_float(blk, sizeof blk, 32, y, err, sizeof err) == 0);
    CHECK(y[0] == -127.0f && y[8] == 1.0f && y[15] == 113.0f && y[16] == 113.0f && y[31] == -127.0f);
    /* IQ4_XS, 12 rows (never repacked): vec_dot at 1..7 columns, the tiled
     * kernel's chain at 8 (another float order: some outputs differ) */
    uint8_t *wx = rand_blocks(12, K / 256, IQ4_XS_BYTES, 1, 5);
    const wt_matrix mx = { GGUF_TYPE_IQ4_XS, wx, 12, K, 2 * IQ4_XS_BYTES, 12 * 2 * IQ4_XS_BYTES };
    const wt_matrix *ws[1] = { &mx };
    float *const ys[1] = { got };
    uint8_t a8k[8 * 2 * Q8_K_BYTES];
    int tdiffer = 0;
    for (int c = 0; c < 8; c++)
        CHECK(q8_k_quantize(x + c * K, K, a8k + c * 2 * Q8_K_BYTES, 2 * Q8_K_BYTES, err, sizeof err) == 0);
    for (int c = 0; c < 7; c++)
        for (int r = 0; r < 12; r++)
            want[c * 12 + r] = iq4_xs_vec_dot(wx + r * 2 * IQ4_XS_BYTES, a8k + c * 2 * Q8_K_BYTES, 2);
    CHECK(wt_mul_mat(pool, ws, ys, 1, x, 7, act, cap, err, sizeof err) == 0);
    CHECK_MEM(got, want, 7 * 12 * sizeof(float));
    for (int c = 0; c < 8; c++)
        for (int r = 0; r < 12; r++) {
            want[c * 12 + r] = iq4_xs_tiled_dot(wx + r * 2 * IQ4_XS_BYTES, a8k + c * 2 * Q8_K_BYTES, 2);
            tdiffer += want[c * 12 + r] != iq4_xs_vec_dot(wx + r * 2 * IQ4_XS_BYTES, a8k + c * 2 * Q8_K_BYTES, 2);
        }
    CHECK(wt_mul_mat(pool, ws, ys, 1, x, 8, act, cap, err, sizeof err) == 0);
    CHECK_MEM(got, want, 8 * 12 * sizeof(float));
    CHECK(tdiffer > 0);
    CHECK(want[0] != 0.0f && want[95] != 0.0f);
    /* IQ4_NL, 12 rows (plain): vec_dot at every column count */
    uint8_t *wn = rand_blocks(12, K / 32, IQ4_NL_BYTES, 1, 13);
    const wt_matrix mn = { GGUF_TYPE_IQ4_NL, wn, 12, K, 16 * IQ4_NL_BYTES, 12 * 16 * IQ4_NL_BYTES };
    const wt_matrix *wns[1] = { &mn };
    uint8_t a80[5 * 16 * Q8_0_BYTES];
    for (int c = 0; c < 5; c++) {
        CHECK(q8_0_quantize(x + c * K, K, a80 + c * 16 * Q8_0_BYTES, 16 * Q8_0_BYTES, err, sizeof err) == 0);
        for (int r = 0; r < 12; r++)
            want[c * 12 + r] = iq4_nl_vec_dot(wn + r * 16 * IQ4_NL_BYTES, a80 + c * 16 * Q8_0_BYTES, 16);
    }
    CHECK(wt_mul_mat(pool, wns, ys, 1, x, 5, act, cap, err, sizeof err) == 0);
    CHECK_MEM(got, want, 5 * 12 * sizeof(float));
    /* IQ4_NL, 16 rows: the load-time 8x8 form (Q4_0 8x8's layout, codes as
     * they are), its products at 1..8 columns equal x8_mul_mat's */
    uint8_t *w16 = rand_blocks(16, K / 32, IQ4_NL_BYTES, 1, 17);
    const size_t wlen = 16 * 16 * IQ4_NL_BYTES;
    wt_matrix m16 = { GGUF_TYPE_IQ4_NL, w16, 16, K, 16 * IQ4_NL_BYTES, wlen };
    uint8_t *packed = malloc(wlen), *mine = malloc(wlen);
    CHECK(wt_prepare(&m16, packed, wlen, err, sizeof err) == 0);
    CHECK_INT(m16.type, WT_IQ4_NL_X8);
    CHECK(iq4_nl_repack8(w16, wlen, 16, K, mine, wlen, err, sizeof err) == 0);
    CHECK_MEM(packed, mine, wlen);
    CHECK(q4_0_repack8(w16, wlen, 16, K, mine, wlen, err, sizeof err) == 0);   /* Q4_0's flips the codes */
    CHECK(memcmp(packed, mine, wlen) != 0);
    uint8_t *work = malloc(x8_work_bytes(IQ4_NL_TYPE, K, 8));
    const wt_matrix *w16s[1] = { &m16 };
    for (size_t n = 1; n <= 8; n++) {
        CHECK(x8_mul_mat(NULL, IQ4_NL_TYPE, packed, wlen, 16, K, x, n, want, 16 * n, work,
                         x8_work_bytes(IQ4_NL_TYPE, K, n), err, sizeof err) == 0);
        CHECK(wt_mul_mat(pool, w16s, ys, 1, x, n, act, cap, err, sizeof err) == 0);
        CHECK_MEM(got, want, 16 * n * sizeof(float));
    }
    CHECK(want[0] != 0.0f);
    free(work);
    free(mine);
    free(packed);
    free(w16);
    free(wn);
    free(wx);
    free(act);
    par_destroy(pool);
}

TEST(wtype_tq_products_are_vec_dot_at_every_column_count)
{
    enum { K = 512, N = 9 };
    char err[320];
    float x[N * K];
    for (int i = 0; i < N * K; i++) x[i] = sinf((float)i * 0.07f) * (1.0f + (float)(i % 3));
    const size_t cap = N * wt_act_bytes_max(K);
    uint8_t *act = malloc(cap);
    /* TQ2_0: value 128h + 32l + b is bits 2l of byte 32h + b, minus 1, times d;
     * TQ1_0: base-3 digits, ((uint8_t)(byte * 3^n) * 3) >> 8 */
    uint8_t b2[TQ2_0_BYTES] = { 0 }, b1[TQ1_0_BYTES] = { 0 };
    b2[0] = 0x24;                  /* values 0, 32, 64, 96: codes 0, 1, 2, 0 */
    b2[64] = 0x00; b2[65] = 0x40;  /* d = 2 */
    b1[0] = 0xff;                  /* values 0, 32, 64, 96, 128 from 255 * 1, 3, 9, 27, 81 */
    b1[52] = 0x00; b1[53] = 0x3c;  /* d = 1 */
    float y[256];
    CHECK(wt_find(GGUF_TYPE_TQ2_0)->to_float(b2, sizeof b2, 256, y, err, sizeof err) == 0);
    CHECK(y[0] == -2.0f && y[32] == 0.0f && y[64] == 2.0f && y[96] == -2.0f && y[1] == -2.0f);
    CHECK(wt_find(GGUF_TYPE_TQ1_0)->to_float(b1, sizeof b1, 256, y, err, sizeof err) == 0);
    CHECK(y[0] == 1.0f && y[32] == 1.0f && y[64] == 1.0f && y[96] == 1.0f && y[128] == 1.0f && y[1] == -1.0f && y[255] == -1.0f);
    /* both multiply by vec_dot alone, 9 columns too (no tiled or repacked path) */
    static const struct { uint32_t type; size_t bytes; float (*dot)(const uint8_t *, const uint8_t *, size_t); } ts[] = {
        { GGUF_TYPE_TQ1_0, TQ1_0_BYTES, tq1_0_vec_dot }, { GGUF_TYPE_TQ2_0, TQ2_0_BYTES, tq2_0_vec_dot },
    };
    uint8_t a8k[N * 2 * Q8_K_BYTES];
    for (int c = 0; c < N; c++)
        CHECK(q8_k_quantize(x + c * K, K, a8k + c * 2 * Q8_K_BYTES, 2 * Q8_K_BYTES, err, sizeof err) == 0);
    for (int t = 0; t < 2; t++) {
        uint8_t *w = rand_blocks(16, K / 256, ts[t].bytes, 0, 3 + (uint32_t)t);
        for (int r = 0; r < 16 * 2; r++) {           /* a sane d at the block's end */
            w[r * ts[t].bytes + ts[t].bytes - 2] = 0x00;
            w[r * ts[t].bytes + ts[t].bytes - 1] = 0x2c;
        }
        const wt_matrix m = { ts[t].type, w, 16, K, 2 * ts[t].bytes, 16 * 2 * ts[t].bytes };
        const wt_matrix *ws[1] = { &m };
        float got[N * 16], want[N * 16];
        float *const ys[1] = { got };
        for (int c = 0; c < N; c++)
            for (int r = 0; r < 16; r++)
                want[c * 16 + r] = ts[t].dot(w + r * 2 * ts[t].bytes, a8k + c * 2 * Q8_K_BYTES, 2);
        CHECK(wt_mul_mat(NULL, ws, ys, 1, x, N, act, cap, err, sizeof err) == 0);
        CHECK_MEM(got, want, sizeof want);
        CHECK(want[0] != 0.0f);
        CHECK_INT(wt_prepared_bytes(ts[t].type, 16, K), 0);
        free(w);
    }
    free(act);
}

TEST(wtype_iq3_values_and_products)
{
    enum { K = 512, N = 9 };
    char err[320];
    float y[256];
    /* IQ3_XXS: entry 0 of the grid is 4,4,4,4, entry 255 is 4,28,52,62 (gguf-py's codebook, checked against
     * libggml by oracle_kernels_iq); d = 1, sub-block 0 scale ls = 3: db = (0.5 + 3) * 0.5 = 1.75; run 0's
     * sign field 1: value 0 negative and (odd parity) value 7 too */
    uint8_t bx[IQ3_XXS_BYTES] = { 0 };
    bx[0] = 0x00; bx[1] = 0x3c;
    bx[2 + 1] = 255;                              /* values 4..7: entry 255 */
    bx[66] = 0x01; bx[66 + 3] = 0x30;             /* signs 1, ls 3 */
    CHECK(wt_find(GGUF_TYPE_IQ3_XXS)->to_float(bx, sizeof bx, 256, y, err, sizeof err) == 0);
    CHECK(y[0] == -7.0f && y[1] == 7.0f && y[4] == 7.0f && y[5] == 49.0f && y[7] == -108.5f && y[32] == 1.0f);
    /* IQ3_S: entry 0 is 1,1,1,1; entry 256 (qh bit) 3,1,1,1... read from the table itself: scale ls 2 -> 5 */
    uint8_t bs[IQ3_S_BYTES] = { 0 };
    bs[0] = 0x00; bs[1] = 0x40;                   /* d = 2 */
    bs[106] = 0x02;                               /* sub-block 0: ls 2, multiplier 5 */
    bs[74] = 0x02;                                /* value 1 negative */
    CHECK(wt_find(GGUF_TYPE_IQ3_S)->to_float(bs, sizeof bs, 256, y, err, sizeof err) == 0);
    CHECK(y[0] == 10.0f && y[1] == -10.0f && y[32] == 2.0f);
    CHECK(wt_find(GGUF_TYPE_IQ3_S)->to_float(bs, 109, 256, y, err, sizeof err) == -1);
    CHECK_STR(err, "IQ3_S row holds 109 bytes; 256 values need 110");
    /* the product: vec_dot below 8 columns, the tiled dot from 8 (an activation of -128 under a minus sign
     * tells them apart: vec_dot's vpsignb keeps it -128) */
    uint8_t a[Q8_K_BYTES] = { 0 };
    const float one = 1.0f;
    memcpy(a, &one, 4);
    a[4 + 0] = 0x80;                              /* q8[0] = -128 against value 0 = -7 / 1.75 = -4 */
    CHECK(iq3_xxs_vec_dot(bx, a, 1) == 0.25f * 7.0f * 4.0f * -128.0f);
    CHECK(iq3_xxs_tiled_dot(bx, a, 1) == 0.25f * 7.0f * 4.0f * 128.0f);
    float x[N * K];
    for (int i = 0; i < N * K; i++) x[i] = cosf((float)i * 0.05f) * (1.0f + (float)(i % 5));
    const size_t cap = N * wt_act_bytes_max(K);
    uint8_t *act = malloc(cap);
    uint8_t a8k[N * 2 * Q8_K_BYTES];
    for (int c = 0; c < N; c++)
        CHECK(q8_k_quantize(x + c * K, K, a8k + c * 2 * Q8_K_BYTES, 2 * Q8_K_BYTES, err, sizeof err) == 0);
    static const struct {
        uint32_t type; size_t bytes;
        float (*dot)(const uint8_t *, const uint8_t *, size_t), (*tiled)(const uint8_t *, const uint8_t *, size_t);
    } ts[] = {
        { GGUF_TYPE_IQ3_XXS, IQ3_XXS_BYTES, iq3_xxs_vec_dot, iq3_xxs_tiled_dot },
        { GGUF_TYPE_IQ3_S, IQ3_S_BYTES, iq3_s_vec_dot, iq3_s_tiled_dot },
    };
    for (int t = 0; t < 2; t++) {
        uint8_t *w = rand_blocks(16, K / 256, ts[t].bytes, 0, 11 + (uint32_t)t);
        for (int r = 0; r < 16 * 2; r++) {           /* a sane d at the block's start */
            w[r * ts[t].bytes] = 0x00;
            w[r * ts[t].bytes + 1] = 0x2c;
        }
        const wt_matrix m = { ts[t].type, w, 16, K, 2 * ts[t].bytes, 16 * 2 * ts[t].bytes };
        const wt_matrix *ws[1] = { &m };
        for (int n = 7; n <= N; n += 2) {           /* 7 columns: vec_dot; 9: the tiled dot */
            float got[N * 16], want[N * 16];
            float *const ys[1] = { got };
            for (int c = 0; c < n; c++)
                for (int r = 0; r < 16; r++)
                    want[c * 16 + r] = (n >= 8 ? ts[t].tiled : ts[t].dot)(w + r * 2 * ts[t].bytes,
                                                                        a8k + c * 2 * Q8_K_BYTES, 2);
            CHECK(wt_mul_mat(NULL, ws, ys, 1, x, (size_t)n, act, cap, err, sizeof err) == 0);
            CHECK_MEM(got, want, (size_t)n * 16 * sizeof(float));
            CHECK(want[0] != 0.0f);
        }
        CHECK_INT(wt_prepared_bytes(ts[t].type, 16, K), 0);
        free(w);
    }
    free(act);
}

TEST(wtype_iq2_values_and_products)
{
    enum { K = 512, N = 9 };
    char err[320];
    float y[256];
    /* IQ2_XXS: grid entry 1 is 43,8,8,8,8,8,8,8 (gguf-py's codebook, checked against libggml by
     * oracle_kernels_iq); d = 1, run 0's scale ls 3: db = (0.5 + 3) * 0.25 = 0.875; its sign field 1: value 0
     * negative and (odd parity) value 7 too */
    uint8_t bx[IQ2_XXS_BYTES] = { 0 };
    bx[1] = 0x3c;
    bx[2] = 1;
    bx[6] = 0x01; bx[9] = 0x30;
    CHECK(wt_find(GGUF_TYPE_IQ2_XXS)->to_float(bx, sizeof bx, 256, y, err, sizeof err) == 0);
    CHECK(y[0] == -37.625f && y[1] == 7.0f && y[7] == -7.0f && y[8] == 7.0f && y[32] == 1.0f);
    /* IQ2_XS: d = 2, entry 2 (25,25,8,...) with sign field 1; scales 0x51: values 0-15 ls 1 (0.75), 16-31 ls 5 */
    uint8_t bxs[IQ2_XS_BYTES] = { 0 };
    bxs[1] = 0x40;
    bxs[2] = 2; bxs[3] = 0x02;
    bxs[66] = 0x51;
    CHECK(wt_find(GGUF_TYPE_IQ2_XS)->to_float(bxs, sizeof bxs, 256, y, err, sizeof err) == 0);
    CHECK(y[0] == -18.75f && y[1] == 18.75f && y[2] == 6.0f && y[7] == -6.0f && y[16] == 22.0f);
    /* IQ2_S: d = 1, entry 3 (8,43,8,...), value 1 negative, ls 2 (0.625) */
    uint8_t bs[IQ2_S_BYTES] = { 0 };
    bs[1] = 0x3c;
    bs[2] = 3; bs[34] = 0x02; bs[74] = 0x02;
    CHECK(wt_find(GGUF_TYPE_IQ2_S)->to_float(bs, sizeof bs, 256, y, err, sizeof err) == 0);
    CHECK(y[0] == 5.0f && y[1] == -26.875f && y[16] == 1.0f);
    CHECK(wt_find(GGUF_TYPE_IQ2_S)->to_float(bs, 81, 256, y, err, sizeof err) == -1);
    CHECK_STR(err, "IQ2_S row holds 81 bytes; 256 values need 82");
    /* vec_dot below 8 columns, the tiled dot from 8: -128 under a minus sign stays -128 in vec_dot */
    uint8_t a[Q8_K_BYTES] = { 0 };
    const float one = 1.0f;
    memcpy(a, &one, 4);
    a[4] = 0x80;
    CHECK(iq2_xxs_vec_dot(bx, a, 1) == -4816.0f);
    CHECK(iq2_xxs_tiled_dot(bx, a, 1) == 4816.0f);
    float x[N * K];
    for (int i = 0; i < N * K; i++) x[i] = sinf((float)i * 0.07f) * (1.0f + (float)(i % 3));
    const size_t cap = N * wt_act_bytes_max(K);
    uint8_t *act = malloc(cap);
    uint8_t a8k[N * 2 * Q8_K_BYTES];
    for (int c = 0; c < N; c++)
        CHECK(q8_k_quantize(x + c * K, K, a8k + c * 2 * Q8_K_BYTES, 2 * Q8_K_BYTES, err, sizeof err) == 0);
    static const struct {
        uint32_t type; size_t bytes;
        float (*dot)(const uint8_t *, const uint8_t *, size_t), (*tiled)(const uint8_t *, const uint8_t *, size_t);
    } ts[] = {
        { GGUF_TYPE_IQ2_XXS, IQ2_XXS_BYTES, iq2_xxs_vec_dot, iq2_xxs_tiled_dot },
        { GGUF_TYPE_IQ2_XS, IQ2_XS_BYTES, iq2_xs_vec_dot, iq2_xs_tiled_dot },
        { GGUF_TYPE_IQ2_S, IQ2_S_BYTES, iq2_s_vec_dot, iq2_s_tiled_dot },
    };
    for (int t = 0; t < 3; t++) {
        uint8_t *w = rand_blocks(16, K / 256, ts[t].bytes, 0, 21 + (uint32_t)t);
        for (int r = 0; r < 16 * 2; r++) {
            w[r * ts[t].bytes] = 0x00;
            w[r * ts[t].bytes + 1] = 0x2c;
        }
        const wt_matrix m = { ts[t].type, w, 16, K, 2 * ts[t].bytes, 16 * 2 * ts[t].bytes };
        const wt_matrix *ws[1] = { &m };
        for (int n = 7; n <= N; n += 2) {
            float got[N * 16], want[N * 16];
            float *const ys[1] = { got };
            for (int c = 0; c < n; c++)
                for (int r = 0; r < 16; r++)
                    want[c * 16 + r] = (n >= 8 ? ts[t].tiled : ts[t].dot)(w + r * 2 * ts[t].bytes,
                                                                        a8k + c * 2 * Q8_K_BYTES, 2);
            CHECK(wt_mul_mat(NULL, ws, ys, 1, x, (size_t)n, act, cap, err, sizeof err) == 0);
            CHECK_MEM(got, want, (size_t)n * 16 * sizeof(float));
            CHECK(want[0] != 0.0f);
        }
        CHECK_INT(wt_prepared_bytes(ts[t].type, 16, K), 0);
        free(w);
    }
    free(act);
}

TEST(wtype_iq1_values_and_products)
{
    enum { K = 512, N = 9 };
    char err[320];
    float y[256];
    /* IQ1_S: d = 1; run 0 of 32: ls 2 (multiplier 5), delta -0.125 (bit 15); grid entry 0 (-1 in all 8) */
    uint8_t bx[IQ1_S_BYTES] = { 0 };
    bx[1] = 0x3c;
    bx[34] = 0x00; bx[35] = 0xa0;
    CHECK(wt_find(GGUF_TYPE_IQ1_S)->to_float(bx, sizeof bx, 256, y, err, sizeof err) == 0);
    CHECK(y[0] == -5.625f && y[31] == -5.625f && y[32] == -0.875f);
    /* IQ1_M: d = 1 (0x3c00 from the four top nibbles: byte 53 c, byte 55 3), run 0's first 16
     * values ls 1 (3), its second 16 ls 2 (5); entry 0's delta negative */
    uint8_t bm[IQ1_M_BYTES] = { 0 };
    bm[48] = 0x11; bm[49] = 0x00;                 /* sc[0]: ls 1 (bits 0-2), ls 2 (bits 3-5) */
    bm[53] = 0xc0; bm[55] = 0x30;                 /* d's nibbles 2 and 3: 0x3c00 */
    bm[32] = 0x08;
    CHECK(wt_find(GGUF_TYPE_IQ1_M)->to_float(bm, sizeof bm, 256, y, err, sizeof err) == 0);
    CHECK(y[0] == -3.375f && y[8] == -2.625f && y[16] == -4.375f && y[32] == -0.875f);
    CHECK(wt_find(GGUF_TYPE_IQ1_M)->to_float(bm, 55, 256, y, err, sizeof err) == -1);
    CHECK_STR(err, "IQ1_M row holds 55 bytes; 256 values need 56");
    float x[N * K];
    for (int i = 0; i < N * K; i++) x[i] = cosf((float)i * 0.03f) * (1.0f + (float)(i % 4));
    const size_t cap = N * wt_act_bytes_max(K);
    uint8_t *act = malloc(cap);
    uint8_t a8k[N * 2 * Q8_K_BYTES];
    for (int c = 0; c < N; c++)
        CHECK(q8_k_quantize(x + c * K, K, a8k + c * 2 * Q8_K_BYTES, 2 * Q8_K_BYTES, err, sizeof err) == 0);
    static const struct {
        uint32_t type; size_t bytes, d_at;
        float (*dot)(const uint8_t *, const uint8_t *, size_t), (*tiled)(const uint8_t *, const uint8_t *, size_t);
    } ts[] = {
        { GGUF_TYPE_IQ1_S, IQ1_S_BYTES, 0, iq1_s_vec_dot, iq1_s_tiled_dot },
        { GGUF_TYPE_IQ1_M, IQ1_M_BYTES, 48, iq1_m_vec_dot, iq1_m_tiled_dot },
    };
    for (int t = 0; t < 2; t++) {
        uint8_t *w = rand_blocks(16, K / 256, ts[t].bytes, 0, 31 + (uint32_t)t);
        for (int r = 0; r < 16 * 2; r++) {
            uint8_t *p = w + r * ts[t].bytes;
            if (t == 0) {
                p[0] = 0x00; p[1] = 0x2c;
            } else {                                   /* IQ1_M's d: the top nibbles 0x2c00 */
                p[49] &= 0x0f; p[51] &= 0x0f; p[53] = (uint8_t)((p[53] & 0x0f) | 0xc0); p[55] = (uint8_t)((p[55] & 0x0f) | 0x20);
            }
        }
        const wt_matrix m = { ts[t].type, w, 16, K, 2 * ts[t].bytes, 16 * 2 * ts[t].bytes };
        const wt_matrix *ws[1] = { &m };
        for (int n = 7; n <= N; n += 2) {
            float got[N * 16], want[N * 16];
            float *const ys[1] = { got };
            for (int c = 0; c < n; c++)
                for (int r = 0; r < 16; r++)
                    want[c * 16 + r] = (n >= 8 ? ts[t].tiled : ts[t].dot)(w + r * 2 * ts[t].bytes,
                                                                        a8k + c * 2 * Q8_K_BYTES, 2);
            CHECK(wt_mul_mat(NULL, ws, ys, 1, x, (size_t)n, act, cap, err, sizeof err) == 0);
            CHECK_MEM(got, want, (size_t)n * 16 * sizeof(float));
            CHECK(want[0] != 0.0f);
        }
        CHECK_INT(wt_prepared_bytes(ts[t].type, 16, K), 0);
        free(w);
    }
    free(act);
}
