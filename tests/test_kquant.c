/*
 * test_kquant.c -- unit tests of src/ops/q4_k.c (Q4_K, Q6_K, Q8_K), q2_k.c
 * (Q2_K, Q3_K) and
 * src/ops/q4_0.c (Q4_0, Q4_1, Q5_0, q8_1) and src/ops/repack.c (Q4_K and Q4_0
 * 8x8) on hand-built blocks with literal
 * expected values, each run with the AVX2 kernels (when the CPU has them)
 * and with the portable C. The bit-exact comparison with ggml itself is
 * testing/oracle_kernels_kquant.py.
 */
#include "test.h"

#include "ops/q2_k.h"
#include "ops/q4_0.h"
#include "ops/q4_k.h"
#include "ops/q8_0.h"
#include "ops/repack.h"

static uint32_t fb(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

#define BOTH_PATHS(body)                           \
    do {                                           \
        for (int simd_ = 1; simd_ >= 0; simd_--) { \
            q8_set_simd(simd_);                    \
            body;                                  \
        }                                          \
        q8_set_simd(1);                            \
    } while (0)

/* One Q4_K block: d = 1, dmin = 0.5, scales {1,2,3,4,5,40,7,8}, mins
 * {0,1,2,3,4,5,6,50} (40 and 50 need the split 6-bit fields), low nibbles
 * l%16 and high nibbles 15-l%16. */
static void q4k_block(uint8_t *b)
{
    static const uint8_t sc[8] = {1, 2, 3, 4, 5, 40, 7, 8}, mn[8] = {0, 1, 2, 3, 4, 5, 6, 50};
    memset(b, 0, Q4_K_BYTES);
    put16(b, 0x3c00);
    put16(b + 2, 0x3800);
    uint8_t *s = b + 4;
    for (int j = 0; j < 4; j++) {
        s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        s[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        s[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | (mn[j + 4] & 0xF) << 4);
    }
    for (int l = 0; l < 128; l++)
        b[16 + l] = (uint8_t)((l % 16) | (15 - l % 16) << 4);
}

/* A Q8_K block of all-ones quants with d = 1 and true bsums (16 each). */
static void q8k_ones(uint8_t *a)
{
    float d = 1.0f;
    memcpy(a, &d, 4);
    memset(a + 4, 1, 256);
    for (int g = 0; g < 16; g++)
        put16(a + 260 + 2 * g, 16);
}

TEST(q4_k_scales_and_dequant)
{
    uint8_t b[Q4_K_BYTES], sc[8], mn[8];
    q4k_block(b);
    k4_scales(b + 4, sc, mn);
    CHECK_INT(sc[5], 40);
    CHECK_INT(mn[7], 50);
    CHECK_INT(sc[4], 5);
    CHECK_INT(mn[4], 4);
    float y[256];
    CHECK_INT(q4_k_dequantize(b, sizeof b, 256, y, NULL, 0), 0);
    CHECK(y[0] == 0.0f);             /* 1*0 - 0.5*0 */
    CHECK(y[32 + 1] == 27.5f);       /* 2*14 - 0.5*1 */
    CHECK(y[128 + 3] == 13.0f);      /* 5*3 - 0.5*4 */
    CHECK(y[128 + 32 + 3] == 477.5f); /* 40*12 - 0.5*5 */
    CHECK(y[192 + 32 + 1] == 87.0f); /* 8*14 - 0.5*50 */
    char err[128];
    CHECK_INT(q4_k_dequantize(b, sizeof b - 1, 256, y, err, sizeof err), -1);
    CHECK_STR(err, "Q4_K row holds 143 bytes; 256 values need 144");
}

TEST(q4_k_vec_dot_block)
{
    uint8_t b[Q4_K_BYTES], a[Q8_K_BYTES];
    q4k_block(b);
    q8k_ones(a);
    /* sum of sc*q: 70 * 240 = 16800; mins: 0.5 * 71 * 32 = 1136 */
    BOTH_PATHS(CHECK(q4_k_vec_dot(b, a, 1) == 15664.0f));
}

/* One Q6_K block: d = 0.5, scales i-8 (negative ones and a zero), ql 0x21,
 * qh 0b11100100: values -31, -15, 2, 18 in the four 32-value chunks. */
static void q6k_block(uint8_t *b)
{
    memset(b + 0, 0x21, 128);
    memset(b + 128, 0xe4, 64);
    for (int i = 0; i < 16; i++)
        b[192 + i] = (uint8_t)(int8_t)(i - 8);
    put16(b + 208, 0x3800);
}

TEST(q6_k_dequant_and_vec_dot)
{
    uint8_t b[Q6_K_BYTES], a[Q8_K_BYTES];
    q6k_block(b);
    float y[256];
    CHECK_INT(q6_k_dequantize(b, sizeof b, 256, y, NULL, 0), 0);
    CHECK(y[0] == 124.0f);            /* 0.5 * -8 * -31 */
    CHECK(y[32] == 45.0f);            /* 0.5 * -6 * -15 */
    CHECK(y[64] == -4.0f);            /* 0.5 * -4 * 2 */
    CHECK(y[96 + 16] == -9.0f);       /* 0.5 * -1 * 18 */
    CHECK_U64(fb(y[128]), 0x80000000u); /* (0.5 * 0) * -31 = -0 */
    CHECK(y[128 + 96 + 17] == 63.0f); /* 0.5 * 7 * 18 */
    q8k_ones(a);
    BOTH_PATHS(CHECK(q6_k_vec_dot(b, a, 1) == 5664.0f));
}

/* b11669's tiled K-quant product: the bsums are widened to int32 (no 16-bit
 * wrap) for Q4_K's mins, and Q6_K's -32 offset comes from the codes, not
 * the bsums, so activations whose bsums do not match their qs show it. */
TEST(k_tiled_dot_blocks)
{
    uint8_t b[Q4_K_BYTES], a[Q8_K_BYTES], b6[Q6_K_BYTES];
    q4k_block(b);
    q8k_ones(a);
    /* true bsums: r = 1*16800, fma(-0.5, 71*32, r) = 15664, acc = fma(r, 1, 0) */
    BOTH_PATHS(CHECK(q4_k_tiled_dot(b, a, 1) == 15664.0f));
    for (int g = 0; g < 16; g++)
        put16(a + 260 + 2 * g, 0x7fff);
    /* pairs 32767+32767 = 65534 (vec_dot's vphaddw wraps it to -2):
     * 16800 - 0.5 * 71 * 65534 = -2309657; vec_dot 16800 + 0.5 * 71 * 2 */
    BOTH_PATHS(CHECK(q4_k_tiled_dot(b, a, 1) == -2309657.0f));
    BOTH_PATHS(CHECK(q4_k_vec_dot(b, a, 1) == 16871.0f));
    q6k_block(b6);
    q8k_ones(a);
    BOTH_PATHS(CHECK(q6_k_tiled_dot(b6, a, 1) == 5664.0f));
    for (int g = 0; g < 16; g++)
        put16(a + 260 + 2 * g, 0);
    /* bsums 0: vec_dot loses its -32 * sum(q8) term (0.5 * 7232), tiled keeps it */
    BOTH_PATHS(CHECK(q6_k_tiled_dot(b6, a, 1) == 5664.0f));
    BOTH_PATHS(CHECK(q6_k_vec_dot(b6, a, 1) == 3616.0f));
    /* two blocks: acc = fma(r1, d8_1, fma(r0, d8_0, 0)) */
    uint8_t bb[2 * Q4_K_BYTES], aa[2 * Q8_K_BYTES];
    q4k_block(bb);
    q4k_block(bb + Q4_K_BYTES);
    q8k_ones(aa);
    q8k_ones(aa + Q8_K_BYTES);
    const float d8 = -0.25f;
    memcpy(aa + Q8_K_BYTES, &d8, 4);
    BOTH_PATHS(CHECK(q4_k_tiled_dot(bb, aa, 2) == 11748.0f));   /* 15664 - 0.25 * 15664 */
    BOTH_PATHS(CHECK(q5_k_tiled_dot(NULL, aa, 0) == 0.0f));
}

/* Q2_K: scales 2, mins 1 (0x12), codes t in chunk t (0xE4), d = 1, dmin =
 * 0.5: y = 2t - 0.5. Q3_K: scales 33 - 32 = 1, third bits set but one,
 * codes as Q2_K, d = 0.5: y = 0.5 * t, element 0 0.5 * (0 - 4). */
TEST(q2_k_q3_k_blocks)
{
    uint8_t b2[Q2_K_BYTES], b3[Q3_K_BYTES], a[Q8_K_BYTES];
    memset(b2, 0x12, 16);
    memset(b2 + 16, 0xE4, 64);
    put16(b2 + 80, 0x3c00);
    put16(b2 + 82, 0x3800);
    float y[256];
    CHECK_INT(q2_k_dequantize(b2, sizeof b2, 256, y, NULL, 0), 0);
    CHECK(y[0] == -0.5f && y[32] == 1.5f && y[64] == 3.5f && y[96] == 5.5f && y[128 + 96 + 17] == 5.5f);
    q8k_ones(a);
    /* sumi 2 * 64 * (0+1+2+3) = 768, mins 16 * 1 * 16 = 256: 768 - 0.5 * 256 */
    BOTH_PATHS(CHECK(q2_k_vec_dot(b2, a, 1) == 640.0f));
    BOTH_PATHS(CHECK(q2_k_tiled_dot(b2, a, 1) == 640.0f));
    memset(b3, 0xff, 32);
    b3[0] = 0xfe;
    memset(b3 + 32, 0xE4, 64);
    memset(b3 + 96, 0x11, 8);
    memset(b3 + 104, 0xAA, 4);
    put16(b3 + 108, 0x3800);
    int8_t sc[16];
    k3_scales(b3 + 96, sc);
    CHECK_INT(sc[0], 1);
    CHECK_INT(sc[15], 1);
    CHECK_INT(q3_k_dequantize(b3, sizeof b3, 256, y, NULL, 0), 0);
    CHECK(y[0] == -2.0f && y[1] == 0.0f && y[32] == 0.5f && y[96] == 1.5f && y[255] == 1.5f);
    /* 64 * (0+1+2+3) - 4 = 380, times 0.5 */
    BOTH_PATHS(CHECK(q3_k_vec_dot(b3, a, 1) == 190.0f));
    BOTH_PATHS(CHECK(q3_k_tiled_dot(b3, a, 1) == 190.0f));
    char err[128];
    CHECK_INT(q3_k_dequantize(b3, sizeof b3 - 1, 256, y, err, sizeof err), -1);
    CHECK_STR(err, "Q3_K row holds 109 bytes; 256 values need 110");
}

TEST(q8_k_quantize_known_blocks)
{
    float x[768] = {0};
    x[0] = -127.0f;  /* max: iscale = 1 */
    x[1] = 2.5f;     /* half to even: 2 */
    x[2] = -3.5f;    /* -4 */
    x[3] = 126.9f;   /* 127 */
    /* block 1 all zero; block 2: max 254 positive, iscale -0.5 */
    x[512] = 254.0f;
    x[513] = 3.0f;   /* -1.5 -> -2 */
    x[514] = -3.0f;  /* 1.5 -> 2 */
    x[515] = 1.0f;   /* -0.5 -> 0 */
    uint8_t q[3 * Q8_K_BYTES];
    memset(q, 0x55, sizeof q);
    CHECK_INT(q8_k_quantize(x, 768, q, sizeof q, NULL, 0), 0);
    float d;
    memcpy(&d, q, 4);
    CHECK(d == 1.0f);
    CHECK_INT((int8_t)q[4], -127);
    CHECK_INT((int8_t)q[5], 2);
    CHECK_INT((int8_t)q[6], -4);
    CHECK_INT((int8_t)q[7], 127);
    CHECK_INT((int16_t)(q[260] | q[261] << 8), -2);
    CHECK_INT(q[262] | q[263] << 8, 0);
    const uint8_t *z = q + Q8_K_BYTES;
    uint8_t zero[Q8_K_BYTES] = {0};
    CHECK_MEM(z, zero, Q8_K_BYTES);
    const uint8_t *c = q + 2 * Q8_K_BYTES;
    memcpy(&d, c, 4);
    CHECK(d == -2.0f);
    CHECK_INT((int8_t)c[4], -127);
    CHECK_INT((int8_t)c[5], -2);
    CHECK_INT((int8_t)c[6], 2);
    CHECK_INT((int8_t)c[7], 0);
    char err[128];
    CHECK_INT(q8_k_quantize(x, 300, q, sizeof q, err, sizeof err), -1);
    CHECK_STR(err, "q8_K quantizes whole blocks of 256 values, not 300");
}

TEST(q4_0_family_dequant)
{
    uint8_t b[Q5_1_BYTES];
    float y[32];
    /* Q4_0: d = 2, low nibble j, high nibble 15-j */
    put16(b, 0x4000);
    for (int j = 0; j < 16; j++)
        b[2 + j] = (uint8_t)(j | (15 - j) << 4);
    CHECK_INT(q4_0_dequantize(b, Q4_0_BYTES, 32, y, NULL, 0), 0);
    CHECK(y[0] == -16.0f);
    CHECK(y[15] == 14.0f);
    CHECK(y[16] == 14.0f);
    CHECK(y[31] == -16.0f);
    /* Q4_1: d = 0.5, m = -1 */
    put16(b, 0x3800);
    put16(b + 2, 0xbc00);
    for (int j = 0; j < 16; j++)
        b[4 + j] = (uint8_t)(j | (15 - j) << 4);
    CHECK_INT(q4_1_dequantize(b, Q4_1_BYTES, 32, y, NULL, 0), 0);
    CHECK(y[0] == -1.0f);
    CHECK(y[15] == 6.5f);
    CHECK(y[16] == 6.5f);
    /* Q5_0: d = 1, fifth bits 0xAAAAAAAA (odd places), nibbles 3 */
    put16(b, 0x3c00);
    b[2] = b[3] = b[4] = b[5] = 0xaa;
    memset(b + 6, 0x33, 16);
    CHECK_INT(q5_0_dequantize(b, Q5_0_BYTES, 32, y, NULL, 0), 0);
    CHECK(y[0] == -13.0f); /* 3 - 16 */
    CHECK(y[1] == 3.0f);   /* 3 + 16 - 16 */
    CHECK(y[17] == 3.0f);
    CHECK(y[30] == -13.0f);
}

TEST(q4_0_vec_dot_wraps_at_minus_128)
{
    uint8_t w[Q4_0_BYTES], a[Q8_0_BYTES];
    put16(w, 0x4000);
    for (int j = 0; j < 16; j++)
        w[2 + j] = (uint8_t)(j | (15 - j) << 4);
    put16(a, 0x3c00);
    memset(a + 2, 1, 32);
    a[2] = 0x80; /* -128 against the weight -8: vpsignb keeps -128, 8*-128 */
    /* (-1024 + 0 - 8) * 2 */
    BOTH_PATHS(CHECK(q4_0_vec_dot(w, a, 1) == -2064.0f));
}

TEST(q8_1_quantize_block)
{
    float x[32] = {0};
    x[0] = 127.0f;
    x[1] = -2.5f; /* -2 (half to even) */
    x[2] = 40.0f;
    x[5] = 0.5f;  /* 0 */
    uint8_t q[Q8_1_BYTES];
    BOTH_PATHS({
        memset(q, 0x55, sizeof q);
        CHECK_INT(q8_1_quantize(x, 32, q, sizeof q, NULL, 0), 0);
        CHECK_INT(q[0] | q[1] << 8, 0x3c00);     /* d = 1 */
        CHECK_INT(q[2] | q[3] << 8, 0x5928);     /* s = 165 */
        CHECK_INT((int8_t)q[4], 127);
        CHECK_INT((int8_t)q[5], -2);
        CHECK_INT((int8_t)q[6], 40);
        CHECK_INT((int8_t)q[9], 0);
    });
}

/* Eight Q4_K rows (row r: d = r+1, the block of q4k_block otherwise),
 * repacked, times all-ones Q8_K: 16800*(r+1) - 1136, as vec_dot gives. */
TEST(q4_k_repack8_gemv)
{
    uint8_t w[8 * Q4_K_BYTES], wr[8 * Q4_K_BYTES], a[Q8_K_BYTES];
    static const uint16_t d16[8] = {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600, 0x4700, 0x4800};
    for (int r = 0; r < 8; r++) {
        q4k_block(w + r * Q4_K_BYTES);
        put16(w + r * Q4_K_BYTES, d16[r]);
    }
    q8k_ones(a);
    CHECK_INT(q4_k_repack8(w, sizeof w, 8, 256, wr, sizeof wr, NULL, 0), 0);
    CHECK_INT(wr[2 * 3] | wr[2 * 3 + 1] << 8, 0x4400);  /* d of row 3 */
    CHECK_INT(wr[16 + 2 * 5] | wr[17 + 2 * 5] << 8, 0x3800); /* dmin of row 5 */
    CHECK_MEM(wr + 128 + 8 * 2, w + 2 * Q4_K_BYTES + 16, 8);   /* piece 2: row 2, bytes 0-7 */
    CHECK_MEM(wr + 128 + 8 * 9, w + 1 * Q4_K_BYTES + 16 + 8, 8); /* piece 9: row 1, bytes 8-15 */
    float y[8];
    BOTH_PATHS({
        q4_k_x8_gemv(wr, 8, 1, a, y);
        for (int r = 0; r < 8; r++)
            CHECK(y[r] == 16800.0f * (float)(r + 1) - 1136.0f);
    });
    char err[128];
    CHECK_INT(q4_k_repack8(w, sizeof w, 4, 256, wr, sizeof wr, err, sizeof err), -1);
    CHECK_STR(err, "Q4_K repacking needs rows in eights and whole super-blocks, not 4 x 256");
}

/* Q4_0 rows of all -8 (d = 1) against ones with one -128 (d = 1): the gemv
 * takes vpsignb on the weight, so -128 against -8 counts -1024 (as vec_dot);
 * the gemm takes it on the activation and counts the true +1024. */
TEST(q4_0_repack8_gemv_gemm_minus_128)
{
    uint8_t w[8 * Q4_0_BYTES], wr[8 * Q4_0_BYTES], a[Q8_0_BYTES], a4[Q8_0X4_BYTES];
    for (int r = 0; r < 8; r++) {
        put16(w + r * Q4_0_BYTES, 0x3c00);
        memset(w + r * Q4_0_BYTES + 2, 0, 16);
    }
    put16(a, 0x3c00);
    memset(a + 2, 1, 32);
    a[2] = 0x80;
    for (int c = 0; c < 4; c++)
        put16(a4 + 2 * c, 0x3c00);
    memset(a4 + 8, 1, 128);
    a4[8] = 0x80; /* column 0, value 0 */
    CHECK_INT(q4_0_repack8(w, sizeof w, 8, 32, wr, sizeof wr, NULL, 0), 0);
    CHECK_INT(wr[16], 0x88); /* nibbles 0 stored as 8 */
    float y[8], y4[32];
    BOTH_PATHS({
        CHECK(q4_0_vec_dot(w, a, 1) == -1272.0f);
        q4_0_x8_gemv(wr, 8, 1, a, y);
        for (int r = 0; r < 8; r++)
            CHECK(y[r] == -1272.0f); /* -1024 - 31*8 */
        q4_0_x8_gemm4(wr, 8, 1, a4, y4, 8);
        for (int r = 0; r < 8; r++) {
            CHECK(y4[r] == 776.0f);       /* 1024 - 31*8 */
            CHECK(y4[8 + r] == -256.0f);  /* 32 * -8 */
        }
    });
}

/* The whole repacked product: 8 Q4_0 rows of -8 (d = 1) times 5 columns of
 * ones (q8_0: d = fp16(1/127) = 0x2008, q = 127): columns 0-3 through the
 * 4x8 quantizer and gemm, column 4 through q8_0 and gemv, all
 * -8*127*32 * 0x2008 = -255.984375. */
TEST(x8_mul_mat_columns)
{
    uint8_t w[8 * Q4_0_BYTES], wr[8 * Q4_0_BYTES];
    for (int r = 0; r < 8; r++) {
        put16(w + r * Q4_0_BYTES, 0x3c00);
        memset(w + r * Q4_0_BYTES + 2, 0, 16);
    }
    CHECK_INT(q4_0_repack8(w, sizeof w, 8, 32, wr, sizeof wr, NULL, 0), 0);
    float x[5 * 32], y[40];
    for (int i = 0; i < 5 * 32; i++)
        x[i] = 1.0f;
    size_t wl = x8_work_bytes(2, 32, 5);
    CHECK_INT(wl, Q8_0X4_BYTES + Q8_0_BYTES);
    uint8_t work[Q8_0X4_BYTES + Q8_0_BYTES];
    BOTH_PATHS({
        memset(y, 0, sizeof y);
        CHECK_INT(x8_mul_mat(NULL, 2, wr, sizeof wr, 8, 32, x, 5, y, 40, work, sizeof work, NULL, 0), 0);
        for (int i = 0; i < 40; i++)
            CHECK(y[i] == -255.984375f);
    });
    char err[160];
    CHECK_INT(x8_mul_mat(NULL, 2, wr, sizeof wr, 8, 32, x, 5, y, 40, work, sizeof work - 1, err, sizeof err), -1);
    CHECK_STR(err, "repacked Q4_0 product: weights 144 of 144 bytes, output 40 of 40 floats, work 169 of 170 bytes");
}
