/*
 * test_quant.c -- unit tests of src/ops/q8_0.c, src/ops/q1_0.c and src/ops/q2_0.c on
 * hand-made blocks with literal expected values, each run with the AVX2
 * kernels (when the CPU has them) and with the portable C. The bit-exact
 * comparison with ggml itself is testing/oracle_kernels_quant.py.
 */
#include "test.h"

#include <math.h>

#include "ops/q1_0.h"
#include "ops/q2_0.h"
#include "ops/q8_0.h"

static uint32_t fb(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* Runs body twice: SIMD (if present) then portable. */
#define BOTH_PATHS(body)                        \
    do {                                        \
        for (int simd_ = 1; simd_ >= 0; simd_--) { \
            q8_set_simd(simd_);                 \
            body;                               \
        }                                       \
        q8_set_simd(1);                         \
    } while (0)

TEST(q8_0_dequant_block)
{
    uint8_t b[Q8_0_BYTES];
    float y[32];
    put16(b, 0x3800); /* 0.5 */
    for (int i = 0; i < 32; i++)
        b[2 + i] = (uint8_t)(int8_t)(i * 9 - 128);
    CHECK_INT(q8_0_dequantize(b, sizeof b, 32, y, NULL, 0), 0);
    CHECK(y[0] == -64.0f);
    CHECK(y[1] == -59.5f);
    CHECK(y[31] == -52.5f); /* 31*9-128 = 151 wraps to -105 */
    char err[128];
    CHECK_INT(q8_0_dequantize(b, 33, 32, y, err, sizeof err), -1);
    CHECK_STR(err, "Q8_0 row holds 33 bytes; 32 values need 34");
    CHECK_INT(q8_0_dequantize(b, sizeof b, 31, y, err, sizeof err), -1);
}

TEST(q1_0_dequant_block)
{
    uint8_t b[Q1_0_BYTES] = {0};
    float y[128];
    put16(b, 0x4000); /* 2.0 */
    b[2] = 0x05;      /* weights 0 and 2 positive */
    b[17] = 0x80;     /* weight 127 positive */
    CHECK_INT(q1_0_dequantize(b, sizeof b, 128, y, NULL, 0), 0);
    CHECK(y[0] == 2.0f && y[1] == -2.0f && y[2] == 2.0f && y[3] == -2.0f);
    CHECK(y[126] == -2.0f && y[127] == 2.0f);
    char err[128];
    CHECK_INT(q1_0_dequantize(b, 17, 128, y, err, sizeof err), -1);
    CHECK_STR(err, "Q1_0 row holds 17 bytes; 128 values need 18");
}

TEST(q2_0_dequant_block)
{
    uint8_t b[Q2_0_BYTES];
    float y[64];
    put16(b, 0xbc00); /* -1.0 */
    for (int i = 0; i < 16; i++)
        b[2 + i] = 0xe4; /* codes 0,1,2,3 */
    CHECK_INT(q2_0_dequantize(b, sizeof b, 64, y, NULL, 0), 0);
    CHECK(y[0] == 1.0f);
    CHECK_U64(fb(y[1]), 0x80000000u); /* 0 * -1.0 is -0.0, as in ggml */
    CHECK(y[2] == -1.0f);
    CHECK(y[3] == -2.0f); /* code 3 (never made by ggml's quantizer) */
    CHECK(y[63] == -2.0f);
}

static void quant1(const float *x, uint8_t out[Q8_0_BYTES])
{
    CHECK_INT(q8_0_quantize(x, 32, out, Q8_0_BYTES, NULL, 0), 0);
}

TEST(q8_0_quantize_amax_zero)
{
    float x[32];
    uint8_t q[Q8_0_BYTES], want[Q8_0_BYTES] = {0};
    for (int i = 0; i < 32; i++)
        x[i] = i & 1 ? -0.0f : 0.0f;
    BOTH_PATHS({ quant1(x, q); CHECK_MEM(q, want, sizeof want); });
}

TEST(q8_0_quantize_ramp_ties_even)
{
    /* amax 16: d = f16(16/127) = 0x3008, id = 7.9375 exactly; -63.5 and
     * 63.5 round to even (-64, 64) */
    static const int8_t wq[32] = {-127, -119, -111, -103, -95, -87, -79, -71, -64, -56, -48,
                                  -40,  -32,  -24,  -16,  -8,  0,   8,   16,  24,  32,  40,
                                  48,   56,   64,   71,   79,  87,  95,  103, 111, 119};
    float x[32];
    uint8_t q[Q8_0_BYTES], want[Q8_0_BYTES] = {0x08, 0x30};
    for (int i = 0; i < 32; i++) {
        x[i] = (float)(i - 16);
        want[2 + i] = (uint8_t)wq[i];
    }
    BOTH_PATHS({ quant1(x, q); CHECK_MEM(q, want, sizeof want); });
}

TEST(q8_0_quantize_edges_127)
{
    float x[32];
    uint8_t q[Q8_0_BYTES], want[Q8_0_BYTES] = {0x08, 0x20}; /* f16(1/127) */
    for (int i = 0; i < 32; i++) {
        x[i] = i & 1 ? -1.0f : 1.0f;
        want[2 + i] = i & 1 ? 0x81 : 0x7f;
    }
    BOTH_PATHS({ quant1(x, q); CHECK_MEM(q, want, sizeof want); });
    /* id = 1 exactly: halves go to the even neighbour */
    for (int i = 0; i < 32; i++)
        x[i] = 0.0f;
    x[0] = 127.0f, x[1] = 0.5f, x[2] = 1.5f, x[3] = 2.5f, x[4] = -0.5f, x[5] = -1.5f, x[6] = -127.0f;
    /* d = f16(127/127) = 0x3c00; 127, 0, 2, 2, 0, -2, -127, then zeros */
    uint8_t want2[Q8_0_BYTES] = {0x00, 0x3c, 0x7f, 0x00, 0x02, 0x02, 0x00, 0xfe, 0x81};
    BOTH_PATHS({ quant1(x, q); CHECK_MEM(q, want2, sizeof want2); });
}

TEST(q8_0_quantize_nan)
{
    float x[32];
    uint8_t q[Q8_0_BYTES], want[Q8_0_BYTES];
    /* a NaN in place 27 reaches amax through the vmaxps tree: d NaN, all -128 */
    for (int i = 0; i < 32; i++)
        x[i] = 1.0f;
    x[27] = NAN;
    put16(want, 0x7e00);
    memset(want + 2, 0x80, 32);
    BOTH_PATHS({ quant1(x, q); CHECK_MEM(q, want, sizeof want); });
    /* in place 31 it is dropped by the tree: amax 1, only the NaN is -128 */
    x[27] = 1.0f;
    x[31] = NAN;
    put16(want, 0x2008);
    memset(want + 2, 0x7f, 32);
    want[2 + 31] = 0x80;
    BOTH_PATHS({ quant1(x, q); CHECK_MEM(q, want, sizeof want); });
}

TEST(q8_0_quantize_inf_and_tiny)
{
    float x[32] = {0};
    uint8_t q[Q8_0_BYTES], want[Q8_0_BYTES] = {0x00, 0x7c};
    /* +inf: d inf, id 0: finite values 0, inf*0 NaN -> -128 */
    x[0] = INFINITY;
    x[1] = 5.0f;
    want[2] = 0x80;
    BOTH_PATHS({ quant1(x, q); CHECK_MEM(q, want, sizeof want); });
    /* amax the least subnormal: d rounds to 0, id overflows to inf, every
     * value (0*inf NaN, tiny*inf inf) saturates to -128 */
    memset(x, 0, sizeof x);
    x[1] = 1e-45f;
    put16(want, 0x0000);
    memset(want + 2, 0x80, 32);
    BOTH_PATHS({ quant1(x, q); CHECK_MEM(q, want, sizeof want); });
}

TEST(q8_0_quantize_refuses)
{
    float x[64] = {0};
    uint8_t q[2 * Q8_0_BYTES];
    char err[128];
    CHECK_INT(q8_0_quantize(x, 33, q, sizeof q, err, sizeof err), -1);
    CHECK_STR(err, "q8_0 quantizes whole blocks of 32 values, not 33");
    CHECK_INT(q8_0_quantize(x, 64, q, sizeof q - 1, err, sizeof err), -1);
    CHECK_STR(err, "q8_0 output holds 67 bytes; 64 values need 68");
}

TEST(q8_0_vec_dot_exact)
{
    uint8_t w[Q8_0_BYTES], a[Q8_0_BYTES];
    put16(w, 0x3c00);
    put16(a, 0x3800);
    for (int i = 0; i < 32; i++)
        w[2 + i] = 1, a[2 + i] = 2;
    BOTH_PATHS(CHECK(q8_0_vec_dot(w, a, 1) == 32.0f));
    /* weight -1 against -128: ggml's vpsignb wraps, the product counts -128 */
    w[2] = 0xff;
    a[2] = 0x80;
    BOTH_PATHS(CHECK(q8_0_vec_dot(w, a, 1) == -33.0f));
}

TEST(q1_0_vec_dot_exact)
{
    uint8_t w[Q1_0_BYTES], a[4 * Q8_0_BYTES];
    put16(w, 0x3c00);
    memset(w + 2, 0xff, 16);
    w[2] = 0x00; /* weights 0..7 negative */
    for (int K = 0; K < 4; K++) {
        put16(a + K * Q8_0_BYTES, 0x3c00);
        memset(a + K * Q8_0_BYTES + 2, 1, 32);
    }
    BOTH_PATHS(CHECK(q1_0_vec_dot(w, a, 1) == 112.0f));
    a[2] = 0x80; /* -(-128) wraps to -128 */
    BOTH_PATHS(CHECK(q1_0_vec_dot(w, a, 1) == -15.0f));
}

TEST(q2_0_vec_dot_exact)
{
    uint8_t w[3 * Q2_0_BYTES], a[6 * Q8_0_BYTES];
    for (int b = 0; b < 3; b++) {
        put16(w + b * Q2_0_BYTES, 0x4000); /* 2.0 */
        memset(w + b * Q2_0_BYTES + 2, 0xe4, 16);
    }
    for (int b = 0; b < 6; b++) {
        put16(a + b * Q8_0_BYTES, 0x3c00);
        memset(a + b * Q8_0_BYTES + 2, 1, 32);
    }
    /* each group of four: -1 + 0 + 1 + 2 = 2; 16 groups * d 2 = 64 a block */
    BOTH_PATHS(CHECK(q2_0_vec_dot(w, a, 1) == 64.0f));
    BOTH_PATHS(CHECK(q2_0_vec_dot(w, a, 3) == 192.0f)); /* odd tail block */
}

/* One column through the decode kernels: Q1_0 and Q8_0 in row groups of 4,
 * 2, 1 (7 rows), Q2_0 with its prepared activation (5 rows); a -128 activation
 * must count as ggml counts it (negated it stays -128). */
TEST(quant_matmul_one_column_rows)
{
    uint8_t w1[7 * Q1_0_BYTES], a1[4 * Q8_0_BYTES];
    for (int r = 0; r < 7; r++) {
        uint8_t *b = w1 + r * Q1_0_BYTES;
        put16(b, 0x3c00);
        memset(b + 2, 0xff, 16);
        b[2] = (uint8_t)(0xff << r); /* weights 0..r-1 negative */
    }
    for (int K = 0; K < 4; K++) {
        put16(a1 + K * Q8_0_BYTES, 0x3c00);
        memset(a1 + K * Q8_0_BYTES + 2, 1, 32);
    }
    float y[7];
    char err[160];
    BOTH_PATHS({
        CHECK_INT(q1_0_matmul(NULL, w1, sizeof w1, 7, 128, a1, sizeof a1, 1, y, 7, err, sizeof err), 0);
        for (int r = 0; r < 7; r++)
            CHECK(y[r] == (float)(128 - 2 * r)); /* 128 - 2 * (negative weights) */
    });
    a1[2] = 0x80; /* activation 0 is -128: +w gives -128, -w wraps to -128 */
    BOTH_PATHS({
        CHECK_INT(q1_0_matmul(NULL, w1, sizeof w1, 7, 128, a1, sizeof a1, 1, y, 7, err, sizeof err), 0);
        CHECK(y[0] == -1.0f);                    /* 128 - 1 - 128 */
        for (int r = 1; r < 7; r++)
            CHECK(y[r] == (float)(1 - 2 * r));   /* 128 - 2r + 1 - 128 */
    });

    uint8_t w2[5 * 2 * Q2_0_BYTES], a2[4 * Q8_0_BYTES];
    for (int r = 0; r < 5; r++)
        for (int b = 0; b < 2; b++) {
            uint8_t *blk = w2 + (2 * r + b) * Q2_0_BYTES;
            put16(blk, (uint16_t)(0x3c00 + (r << 10))); /* 1, 2, 4, 8, 16 */
            memset(blk + 2, 0xaa, 16);                  /* every code 2: +1 */
        }
    for (int i = 0; i < 4; i++) {
        put16(a2 + i * Q8_0_BYTES, 0x3c00);
        memset(a2 + i * Q8_0_BYTES + 2, 1, 32);
    }
    a2[Q8_0_BYTES + 2] = 0x80; /* one -128 in the second q8 block */
    BOTH_PATHS({
        CHECK_INT(q2_0_matmul(NULL, w2, sizeof w2, 5, 128, a2, sizeof a2, 1, y, 5, err, sizeof err), 0);
        for (int r = 0; r < 5; r++)
            CHECK(y[r] == (float)((127 - 128) * (1 << r))); /* (127 ones - 128) * d */
    });

    /* Q8_0, 7 rows of 2 blocks in groups of 4, 2, 1: row r has scale r + 1
     * and weights 0..r-1 equal to -1, the rest +1; activation all 1. */
    static const uint16_t d8[7] = {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600, 0x4700}; /* 1..7 */
    uint8_t w8[7 * 2 * Q8_0_BYTES], a8[2 * Q8_0_BYTES];
    for (int r = 0; r < 7; r++)
        for (int b = 0; b < 2; b++) {
            uint8_t *blk = w8 + (2 * r + b) * Q8_0_BYTES;
            put16(blk, d8[r]);
            for (int i = 0; i < 32; i++)
                blk[2 + i] = 32 * b + i < r ? 0xff : 1;
        }
    for (int b = 0; b < 2; b++) {
        put16(a8 + b * Q8_0_BYTES, 0x3c00);
        memset(a8 + b * Q8_0_BYTES + 2, 1, 32);
    }
    BOTH_PATHS({
        CHECK_INT(q8_0_matmul(NULL, w8, sizeof w8, 7, 64, a8, sizeof a8, 1, y, 7, err, sizeof err), 0);
        for (int r = 0; r < 7; r++)
            CHECK(y[r] == (float)((r + 1) * (64 - 2 * r)));
    });
    a8[2] = 0x80; /* activation 0 is -128: +1 gives -128, and -1 wraps to -128 too */
    BOTH_PATHS({
        CHECK_INT(q8_0_matmul(NULL, w8, sizeof w8, 7, 64, a8, sizeof a8, 1, y, 7, err, sizeof err), 0);
        CHECK(y[0] == -65.0f); /* 63 - 128 */
        for (int r = 1; r < 7; r++)
            CHECK(y[r] == (float)((r + 1) * (-63 - 2 * r))); /* (64 - r) - (r - 1) - 128 */
    });
}

/* Several columns through the 2-row x 4-column tiles of Q1_0 and Q8_0: 5
 * rows (two pairs, then one row alone) by 5 columns (a group of 4, then 1).
 * Buffers are heap blocks of exactly the product's bytes, so under ASan a
 * tile reading past the last row or column fails. Row r has weights 0..r-1
 * negative, column c scale 2^c and all ones, except odd columns, whose
 * value 0 is -128 (negated it stays -128, as in ggml). */
TEST(quant_matmul_row_pairs_columns)
{
    enum { R = 5, C = 5 };
    char err[160];
    float *y = malloc(R * C * sizeof(float));
    uint8_t *w1 = malloc(R * Q1_0_BYTES), *a1 = malloc(C * 4 * Q8_0_BYTES);
    for (int r = 0; r < R; r++) {
        uint8_t *b = w1 + r * Q1_0_BYTES;
        put16(b, 0x3c00);
        memset(b + 2, 0xff, 16);
        b[2] = (uint8_t)(0xff << r);
    }
    for (int c = 0; c < C; c++)
        for (int K = 0; K < 4; K++) {
            uint8_t *q = a1 + (c * 4 + K) * Q8_0_BYTES;
            put16(q, (uint16_t)(0x3c00 + (c << 10)));
            memset(q + 2, 1, 32);
            if (K == 0 && c % 2)
                q[2] = 0x80;
        }
    BOTH_PATHS({
        CHECK_INT(q1_0_matmul(NULL, w1, R * Q1_0_BYTES, R, 128, a1, C * 4 * Q8_0_BYTES, C, y, R * C, err,
                              sizeof err), 0);
        for (int c = 0; c < C; c++)
            for (int r = 0; r < R; r++) {
                int v = c % 2 == 0 ? 128 - 2 * r : r == 0 ? -1 : 1 - 2 * r;
                CHECK(y[c * R + r] == (float)(v * (1 << c)));
            }
    });

    static const uint16_t d8[R] = {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500}; /* 1..5 */
    uint8_t *w8 = malloc(R * 2 * Q8_0_BYTES), *a8 = malloc(C * 2 * Q8_0_BYTES);
    for (int r = 0; r < R; r++)
        for (int b = 0; b < 2; b++) {
            uint8_t *blk = w8 + (2 * r + b) * Q8_0_BYTES;
            put16(blk, d8[r]);
            for (int i = 0; i < 32; i++)
                blk[2 + i] = 32 * b + i < r ? 0xff : 1;
        }
    for (int c = 0; c < C; c++)
        for (int b = 0; b < 2; b++) {
            uint8_t *q = a8 + (2 * c + b) * Q8_0_BYTES;
            put16(q, (uint16_t)(0x3c00 + (c << 10)));
            memset(q + 2, 1, 32);
            if (b == 0 && c % 2)
                q[2] = 0x80;
        }
    BOTH_PATHS({
        CHECK_INT(q8_0_matmul(NULL, w8, R * 2 * Q8_0_BYTES, R, 64, a8, C * 2 * Q8_0_BYTES, C, y, R * C, err,
                              sizeof err), 0);
        for (int c = 0; c < C; c++)
            for (int r = 0; r < R; r++) {
                int v = c % 2 == 0 ? (r + 1) * (64 - 2 * r) : r == 0 ? -65 : (r + 1) * (-63 - 2 * r);
                CHECK(y[c * R + r] == (float)(v * (1 << c)));
            }
    });
    free(w1);
    free(a1);
    free(w8);
    free(a8);
    free(y);
}

TEST(quant_matmul_columns)
{
    /* 2 Q2_0 rows x 3 columns; row 1 has scale 1 and codes 2 (+1) */
    uint8_t w[2 * Q2_0_BYTES], a[3 * 2 * Q8_0_BYTES];
    put16(w, 0x4000);
    memset(w + 2, 0xe4, 16);
    put16(w + Q2_0_BYTES, 0x3c00);
    memset(w + Q2_0_BYTES + 2, 0xaa, 16);
    for (int c = 0; c < 3; c++)
        for (int h = 0; h < 2; h++) {
            uint8_t *blk = a + (c * 2 + h) * Q8_0_BYTES;
            put16(blk, 0x3c00);
            memset(blk + 2, c + 1, 32);
        }
    float y[6];
    char err[160];
    BOTH_PATHS({
        CHECK_INT(q2_0_matmul(NULL, w, sizeof w, 2, 64, a, sizeof a, 3, y, 6, err, sizeof err), 0);
        CHECK(y[0] == 64.0f && y[1] == 64.0f);   /* column 0 */
        CHECK(y[2] == 128.0f && y[3] == 128.0f); /* column 1 */
        CHECK(y[4] == 192.0f && y[5] == 192.0f); /* column 2 */
    });
    CHECK_INT(q2_0_matmul(NULL, w, sizeof w - 1, 2, 64, a, sizeof a, 3, y, 6, err, sizeof err), -1);
    CHECK_STR(err, "Q2_0 weights hold 35 bytes; 2 rows of 64 values need 36");
    CHECK_INT(q1_0_matmul(NULL, w, sizeof w, 1, 64, a, sizeof a, 1, y, 6, err, sizeof err), -1);
    CHECK_STR(err, "Q1_0 rows of 64 values are not whole 128-value blocks");
    CHECK_INT(q8_0_matmul(NULL, w, sizeof w, 1, 32, a, 33, 1, y, 6, err, sizeof err), -1);
    CHECK_STR(err, "q8_0 activations hold 33 bytes; 1 columns of 32 values need 34");
    CHECK_INT(q2_0_matmul(NULL, w, sizeof w, 2, 64, a, sizeof a, 3, y, 5, err, sizeof err), -1);
    CHECK_STR(err, "output holds 5 floats; 2 rows x 3 columns need 6");
}

/* Chunks of a product: the pool's default for one column, capped at
 * Q8_MANY_COLS_CHUNK rows for several (the default is 128 on 4096 rows
 * and 2 threads, 32 on 1,000 rows). */
TEST(quant_mm_chunk_caps_many_columns)
{
    char err[160];
    par_pool *p = par_create(2, err, sizeof err);
    CHECK(p != NULL);
    if (!p) return;
    q8_mm m = {0};
    m.rows = 4096;
    m.ncols = 1;
    CHECK_INT(q8_mm_chunk(&m, p), 0);
    m.ncols = 32;
    CHECK_INT(q8_mm_chunk(&m, p), Q8_MANY_COLS_CHUNK);
    m.rows = 1000;
    CHECK_INT(q8_mm_chunk(&m, p), 32);
    m.ncols = 2;
    CHECK_INT(q8_mm_chunk(&m, NULL), Q8_MANY_COLS_CHUNK); /* one worker: 1000 / 16 -> 64 */
    m.rows = 100;
    CHECK_INT(q8_mm_chunk(&m, p), 16);
    par_destroy(p);
}
