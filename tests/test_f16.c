/*
 * test_f16.c -- half/bfloat16 conversions on their edge values, the two
 * kernel paths (AVX2 and portable) agreeing bit for bit, ggml's reduction
 * order on inputs where order changes the result, and refusals of shapes
 * that lie about their bytes. The element-by-element proof against the
 * shipped ggml is testing/oracle_kernels_f16.py.
 */
#include <math.h>
#include <stdlib.h>

#include "ops/f16.h"
#include "test.h"

static uint32_t fb(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

TEST(f16_to_f32_edge_values)
{
    static const struct { uint16_t h; uint32_t f; } c[] = {
        { 0x0000, 0x00000000 }, { 0x8000, 0x80000000 }, { 0x0001, 0x33800000 },
        { 0x03ff, 0x387fc000 }, { 0x0400, 0x38800000 }, { 0x3c00, 0x3f800000 },
        { 0x7bff, 0x477fe000 }, { 0x7c00, 0x7f800000 }, { 0xfc00, 0xff800000 },
        { 0x7e00, 0x7fc00000 }, { 0x7c01, 0x7fc02000 }, { 0xfd55, 0xffeaa000 },
        { 0xc000, 0xc0000000 }, { 0x3555, 0x3eaaa000 },
    };
    for (int path = 0; path < 2; path++) {
        f16_force_portable(path);
        for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
            float row;
            f16_to_f32_row(&c[i].h, &row, 1);
            CHECK_U64(fb(f16_to_f32(c[i].h)), c[i].f);
            CHECK_U64(fb(row), c[i].f);
        }
    }
    f16_force_portable(0);
}

TEST(f32_to_f16_rounds_to_nearest_even)
{
    static const struct { uint32_t f; uint16_t h; } c[] = {
        { 0x3f800000, 0x3c00 },     /* 1 */
        { 0x3f801000, 0x3c00 },     /* 1 + 2^-11: tie, to even */
        { 0x3f803000, 0x3c02 },     /* 1 + 3*2^-11: tie, to even (up) */
        { 0x3f801001, 0x3c01 },     /* just above the tie */
        { 0x477fe000, 0x7bff },     /* 65504 */
        { 0x477fefff, 0x7bff },     /* just below 65520 */
        { 0x477ff000, 0x7c00 },     /* 65520: tie, to even = inf */
        { 0x7f7fffff, 0x7c00 },     /* max float */
        { 0x7f800000, 0x7c00 }, { 0xff800000, 0xfc00 },
        { 0x33800000, 0x0001 },     /* 2^-24 */
        { 0x33000000, 0x0000 },     /* 2^-25: tie to 0 */
        { 0x33000001, 0x0001 },
        { 0x33c00000, 0x0002 },     /* 1.5 * 2^-24: tie, to even */
        { 0x34200000, 0x0002 },     /* 2.5 * 2^-24: tie, to even */
        { 0x387fc000, 0x03ff },     /* largest subnormal */
        { 0x387fe000, 0x0400 },     /* rounds up into the normals */
        { 0x80000000, 0x8000 }, { 0x00000001, 0x0000 }, { 0x80000001, 0x8000 },
        { 0x7f800001, 0x7e00 },     /* signalling NaN: quieted */
        { 0xffc00000, 0xfe00 }, { 0x7fa00000, 0x7f00 }, { 0x7fffffff, 0x7fff },
    };
    for (int path = 0; path < 2; path++) {
        f16_force_portable(path);
        for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
            float x = bf(c[i].f);
            uint16_t row;
            f32_to_f16_row(&x, &row, 1);
            CHECK_INT(f32_to_f16(x), c[i].h);
            CHECK_INT(row, c[i].h);
        }
    }
    f16_force_portable(0);
}

TEST(f16_paths_agree_on_all_halves_and_a_float_sweep)
{
    if (!f16_simd_active()) SKIP("no AVX2+F16C on this CPU: one path only");
    static uint16_t h[65536];
    static float a[65536], b[65536];
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    f16_to_f32_row(h, a, 65536);
    for (int i = 0; i < 65536; i++) b[i] = f16_to_f32(h[i]);
    CHECK_MEM(a, b, sizeof a);
    /* every 65,537th float pattern, plus the midpoints between halves */
    size_t bad = 0, n = 0;
    float x[8];
    uint16_t s[8];
    for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += 65537) {
        x[n++] = bf((uint32_t)u);
        if (n == 8) {
            f32_to_f16_row(x, s, 8);
            for (int i = 0; i < 8; i++) bad += s[i] != f32_to_f16(x[i]);
            n = 0;
        }
    }
    for (uint32_t i = 0; i < 0x7bff; i++) {
        float m = (f16_to_f32((uint16_t)i) + f16_to_f32((uint16_t)(i + 1))) * 0.5f;
        float y[3] = { bf(fb(m) - 1), m, bf(fb(m) + 1) };
        uint16_t r[3];
        f32_to_f16_row(y, r, 3);
        for (int k = 0; k < 3; k++) bad += r[k] != f32_to_f16(y[k]);
    }
    CHECK_INT(bad, 0);
}

TEST(bf16_conversions)
{
    CHECK_INT(f32_to_bf16(1.0f), 0x3f80);
    CHECK_INT(f32_to_bf16(bf(0x3f808000)), 0x3f80);   /* tie, to even */
    CHECK_INT(f32_to_bf16(bf(0x3f818000)), 0x3f82);   /* tie, to even (up) */
    CHECK_INT(f32_to_bf16(bf(0x3f808001)), 0x3f81);
    CHECK_INT(f32_to_bf16(bf(0x7f800001)), 0x7fc0);   /* NaN | 0x40 */
    CHECK_INT(f32_to_bf16(bf(0xff800001)), 0xffc0);
    CHECK_INT(f32_to_bf16(bf(0x7f800000)), 0x7f80);
    CHECK_INT(f32_to_bf16(bf(0x7f7fffff)), 0x7f80);   /* max float rounds to inf */
    CHECK_INT(f32_to_bf16(-0.0f), 0x8000);
    CHECK_U64(fb(bf16_to_f32(0xc049)), 0xc0490000);
    float y[2];
    f16_round_act(F16_T_BF16, (float[]){ bf(0x3f818000), 2.0f }, y, 2);
    CHECK_U64(fb(y[0]), 0x3f820000);
    f16_round_act(F16_T_F16, (float[]){ bf(0x3f801000), bf(0x3f803000) }, y, 2);
    CHECK_U64(fb(y[0]), 0x3f800000);
    CHECK_U64(fb(y[1]), 0x3f804000);
    CHECK_INT(f16_round_act(2, y, y, 2), -1);
}

/* A weight row of all ones in the given type. */
static void ones(int type, void *w, size_t k)
{
    for (size_t i = 0; i < k; i++) {
        if (type == F16_T_F32) ((float *)w)[i] = 1.0f;
        else if (type == F16_T_F16) ((uint16_t *)w)[i] = 0x3c00;
        else ((uint16_t *)w)[i] = 0x3f80;
    }
}

TEST(vec_dot_follows_ggmls_order)
{
    int types[3] = { F16_T_F32, F16_T_F16, F16_T_BF16 };
    float w[64], x[64];
    for (int path = 0; path < 2; path++) {
        f16_force_portable(path);
        for (int t = 0; t < 3; t++) {
            /* lanes: acc0 = 2^24, acc1 = 1, acc2 = 1: (2^24 + 1) + 1 in
             * float is 2^24, where a left-to-right sum gives 2^24 + 2 */
            ones(types[t], w, 32);
            memset(x, 0, sizeof x);
            x[0] = 16777216.0f; x[8] = 1.0f; x[16] = 1.0f;
            CHECK_U64(fb(f16_vec_dot(types[t], w, x, 32)), 0x4b800000);
            /* tail: 1 + 2^-24 + 2^-24 -- in float each add ties back to 1;
             * F16 and BF16 add the tail in double and get 1 + 2^-23 */
            ones(types[t], w, 34);
            memset(x, 0, sizeof x);
            x[0] = 1.0f; x[32] = bf(0x33800000); x[33] = bf(0x33800000);
            CHECK_U64(fb(f16_vec_dot(types[t], w, x, 34)),
                      types[t] == F16_T_F32 ? 0x3f800000 : 0x3f800001);
            /* plain small dot, all tail */
            ones(types[t], w, 3);
            CHECK_U64(fb(f16_vec_dot(types[t], w, (float[]){ 4, 5, 6 }, 3)),
                      fb(15.0f));
        }
        /* tinyBLAS element: one 8-lane chain, (t0+t2)+(t1+t3):
         * lane 0 = 2^24, lanes 1 and 2 = 1: t0 = 2^24, t1 = 1, t2 = 1 */
        ones(F16_T_F32, w, 8);
        memset(x, 0, sizeof x);
        x[0] = 16777216.0f; x[1] = 1.0f; x[2] = 1.0f;
        CHECK_U64(fb(f16_sgemm_dot(F16_T_F32, w, x, 8)), 0x4b800000);
        x[2] = 0; x[4] = 1.0f;        /* t0 = 2^24 + 1 -> 2^24; + t1 */
        CHECK_U64(fb(f16_sgemm_dot(F16_T_F32, w, x, 8)), 0x4b800000);
        CHECK(isnan(f16_sgemm_dot(F16_T_F32, w, x, 7)));
    }
    f16_force_portable(0);
}

static uint64_t seed = 88172645463325252ull;
static float rnd(void)
{
    seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
    return (float)((double)(int64_t)(seed >> 11) / 4503599627370496.0 - 1.0)
           / (float)(1 << (seed % 5));
}

TEST(mul_mat_same_bits_for_paths_and_thread_counts)
{
    int types[3] = { F16_T_F32, F16_T_F16, F16_T_BF16 };
    const size_t shapes[][3] = { { 37, 100, 1 }, { 64, 96, 5 }, { 13, 45, 7 }, { 40, 32, 2 } };
    char err[200];
    par_pool *pools[4] = { NULL, par_create(2, err, sizeof err),
                           par_create(3, err, sizeof err), par_create(4, err, sizeof err) };
    for (int t = 0; t < 3; t++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int lf = 0; lf < 2; lf++) {
                f16_set_llamafile(lf);
                size_t rows = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
                size_t es = types[t] == F16_T_F32 ? 4 : 2;
                char *wb = malloc(rows * k * es);
                float *x = malloc(n * k * 4), *ref = malloc(rows * n * 4),
                      *y = malloc(rows * n * 4);
                for (size_t i = 0; i < rows * k; i++) {
                    float v = rnd();
                    if (types[t] == F16_T_F32) ((float *)(void *)wb)[i] = v;
                    else if (types[t] == F16_T_F16) ((uint16_t *)(void *)wb)[i] = f32_to_f16(v);
                    else ((uint16_t *)(void *)wb)[i] = f32_to_bf16(v);
                }
                for (size_t i = 0; i < n * k; i++) x[i] = rnd() * 3;
                f16_round_act(types[t], x, x, n * k);
                f16_matrix w = { types[t], wb, rows, k, k * es, rows * k * es };
                f16_force_portable(1);
                CHECK_INT(f16_mul_mat(NULL, &w, x, n, ref, err, sizeof err), 0);
                /* the portable product is, element by element, the dot */
                int sg = lf && f16_takes_sgemm(rows, k, n);
                float e = sg ? f16_sgemm_dot(types[t], wb + (rows - 1) * k * es, x + (n - 1) * k, k)
                             : f16_vec_dot(types[t], wb + (rows - 1) * k * es, x + (n - 1) * k, k);
                CHECK_U64(fb(ref[rows * n - 1]), fb(e));
                f16_force_portable(0);
                for (int p = 0; p < 4; p++) {
                    memset(y, 0xff, rows * n * 4);
                    CHECK_INT(f16_mul_mat(pools[p], &w, x, n, y, err, sizeof err), 0);
                    CHECK_MEM(y, ref, rows * n * 4);
                }
                free(wb); free(x); free(ref); free(y);
            }
    f16_set_llamafile(0);
    for (int p = 1; p < 4; p++) par_destroy(pools[p]);
}

TEST(mul_mat_small_exact_and_multi)
{
    float w[6] = { 1, 2, 3, 4, 5, 6 };
    float x[6] = { 1, 1, 1, 1, 0, -1 };
    float y[4], y2[4];
    char err[200];
    f16_matrix m = { F16_T_F32, w, 2, 3, 12, sizeof w };
    CHECK_INT(f16_mul_mat(NULL, &m, x, 2, y, err, sizeof err), 0);
    CHECK(y[0] == 6 && y[1] == 15 && y[2] == -2 && y[3] == -2);
    /* two matrices, one wake: the rows split in two, same bits */
    par_pool *p = par_create(2, err, sizeof err);
    f16_matrix ms[2] = { { F16_T_F32, w, 1, 3, 12, 12 }, { F16_T_F32, w + 3, 1, 3, 12, 12 } };
    float a[2], b[2];
    float *ys[2] = { a, b };
    CHECK_INT(f16_mul_mat_multi(p, ms, 2, x, 2, ys, err, sizeof err), 0);
    CHECK(a[0] == 6 && b[0] == 15 && a[1] == -2 && b[1] == -2);
    /* a 64-row F16 pair in one wake */
    uint16_t *wh = malloc(64 * 64 * 2);
    float *xs = malloc(64 * 4), *o1 = malloc(64 * 4), *o2 = malloc(64 * 4), *r1 = malloc(64 * 4);
    for (int i = 0; i < 64 * 64; i++) wh[i] = f32_to_f16(rnd());
    for (int i = 0; i < 64; i++) xs[i] = f16_to_f32(f32_to_f16(rnd()));
    f16_matrix hs[2] = { { F16_T_F16, wh, 32, 64, 128, 32 * 128 },
                         { F16_T_F16, wh + 32 * 64, 32, 64, 128, 32 * 128 } };
    float *os[2] = { o1, o2 };
    unsigned long w0 = par_wakes(p);
    CHECK_INT(f16_mul_mat_multi(p, hs, 2, xs, 1, os, err, sizeof err), 0);
    CHECK_INT(par_wakes(p) - w0, 1);
    f16_matrix whole = { F16_T_F16, wh, 64, 64, 128, 64 * 128 };
    CHECK_INT(f16_mul_mat(NULL, &whole, xs, 1, r1, err, sizeof err), 0);
    CHECK_MEM(o1, r1, 32 * 4);
    CHECK_MEM(o2, r1 + 32, 32 * 4);
    CHECK_INT(f16_mul_mat(NULL, &m, x, 1, y2, err, sizeof err), 0);
    CHECK(y2[0] == 6 && y2[1] == 15);
    free(wh); free(xs); free(o1); free(o2); free(r1);
    par_destroy(p);
}

TEST(lying_shapes_are_refused)
{
    uint16_t w[12] = { 0 };
    float x[8] = { 0 }, y[8];
    char err[200];
    f16_matrix m = { F16_T_F16, w, 3, 4, 8, sizeof w - 2 };    /* 22 < 24 bytes */
    CHECK_INT(f16_mul_mat(NULL, &m, x, 1, y, err, sizeof err), -1);
    CHECK_STR(err, "weight of 3 rows needs more than its 22 bytes");
    m.size = sizeof w;
    m.row_bytes = 6;
    CHECK_INT(f16_matrix_check(&m, err, sizeof err), -1);
    CHECK_STR(err, "weight row stride 6 bytes < 8 bytes of data");
    m.row_bytes = 8;
    m.k = 0;
    CHECK_INT(f16_matrix_check(&m, err, sizeof err), -1);
    CHECK_STR(err, "empty weight (3 rows of 0 elements)");
    m.k = 4;
    m.type = 2;
    CHECK_INT(f16_matrix_check(&m, err, sizeof err), -1);
    CHECK_STR(err, "weight type 2 is not F32, F16 or BF16");
    m.type = F16_T_F16;
    m.rows = (size_t)1 << 62;
    CHECK_INT(f16_matrix_check(&m, err, sizeof err), -1);
    m.rows = 3;
    CHECK_INT(f16_matrix_check(&m, err, sizeof err), 0);
    CHECK_INT(f16_mul_mat(NULL, &m, x, 0, y, err, sizeof err), -1);
    CHECK_STR(err, "no activation columns (0)");
    f16_matrix two[2] = { m, m };
    two[1].k = 2;
    float *ys[2] = { y, y };
    CHECK_INT(f16_mul_mat_multi(NULL, two, 2, x, 1, ys, err, sizeof err), -1);
    CHECK_STR(err, "matrix 1 differs in type or row length from matrix 0 (k 4)");
    CHECK_INT(f16_mul_mat_multi(NULL, two, 9, x, 1, ys, err, sizeof err), -1);
    CHECK_STR(err, "9 matrices in one product; 1 to 8 allowed");
}

TEST(get_rows_widens_and_checks_ids)
{
    uint16_t w[6] = { 0x3c00, 0x7c00, 0x0001, 0xc000, 0x7e01, 0x8000 };
    float out[6];
    char err[200];
    f16_matrix m = { F16_T_F16, w, 3, 2, 4, sizeof w };
    CHECK_INT(f16_get_rows(&m, (int32_t[]){ 2, 0, 1 }, 3, out, err, sizeof err), 0);
    CHECK_U64(fb(out[0]), 0x7fc02000);
    CHECK_U64(fb(out[1]), 0x80000000);
    CHECK_U64(fb(out[2]), 0x3f800000);
    CHECK_U64(fb(out[3]), 0x7f800000);
    CHECK_U64(fb(out[4]), 0x33800000);
    CHECK_U64(fb(out[5]), 0xc0000000);
    m.type = F16_T_BF16;
    CHECK_INT(f16_get_rows(&m, (int32_t[]){ 1 }, 1, out, err, sizeof err), 0);
    CHECK_U64(fb(out[0]), 0x00010000);
    CHECK_U64(fb(out[1]), 0xc0000000);
    CHECK_INT(f16_get_rows(&m, (int32_t[]){ 3 }, 1, out, err, sizeof err), -1);
    CHECK_STR(err, "row id 3 out of range (3 rows)");
    CHECK_INT(f16_get_rows(&m, (int32_t[]){ -1 }, 1, out, err, sizeof err), -1);
    CHECK_STR(err, "row id -1 out of range (3 rows)");
}
