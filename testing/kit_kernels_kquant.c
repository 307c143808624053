/*
 * kit_kernels_kquant.c -- in-process oracle for src/ops/q4_k.c (Q4_K, Q5_K,
 * Q6_K, the Q8_K quantizer) and src/ops/q4_0.c (Q4_0, Q4_1, Q5_0, Q5_1, the
 * q8_1 quantizer): the same inputs go through our kernels and through
 * llama.cpp b11669's own (libggml-base.so's to_float, the CPU backend's
 * from_float and vec_dot, libggml-cpu-haswell.so by default), and every
 * output is compared bit for bit.
 *
 * What is compared, with our AVX2 kernels and again with our portable C
 * (q8_set_simd(0)):
 *   dequant   rows made by ggml_quantize_chunk, rows of random bytes with
 *             sane scales, and hostile rows (fp16 scales among +-0, +-inf,
 *             NaN, subnormals, +-65504; all-max codes) against to_float;
 *   quantize  Q8_K and q8_1 activations: random rows of many lengths and
 *             scales, zeros, +-max edges, ties, NaN, +-inf, subnormals,
 *             huge values, against from_float;
 *   vec_dot   row lengths from one block to thousands against the CPU type
 *             traits' vec_dot: ggml-made weights and activations, raw bytes
 *             (Q8_K bsums that do not match their qs), and hostile ones
 *             (a quarter of the activations -128, fp16/f32 specials among
 *             the scales);
 *   tiled     whole ggml_mul_mat graphs of plain Q4_K/Q5_K/Q6_K matrices
 *             times 7..65 columns (b11669's tiled K-quant kernel from 8),
 *             1 and 2 threads, f32 or hostile Q8_K activations, against
 *             our quantizer + one *_tiled_dot per output.
 *
 * Build and run: testing/oracle_kernels_kquant.py (as kit_kernels_quant.c).
 * Prints each mismatch (a few per case) and ends with
 * "N passed, N failed, N skipped"; exit 1 on any failure, 2 on setup errors.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include "ops/q2_k.h"
#include "ops/q4_0.h"
#include "ops/q4_k.h"
#include "ops/q8_0.h"
#include "ops/repack.h"
#include "base/par.h"

/* ---------------------------------------------------------------- the CPU backend */

static const struct ggml_type_traits_cpu *(*traits_cpu)(enum ggml_type);
static ggml_backend_t (*backend_init)(void);
static void (*set_n_threads)(ggml_backend_t, int);
static ggml_backend_buffer_type_t (*repack_buft)(void);
/* ggml::cpu::repack::gemv<block_q4_K, 8, 8, GGML_TYPE_Q8_K> (exported, C++ name) */
static void (*gemv_q4_K_8x8)(int n, float *s, size_t bs, const void *vx, const void *vy, int nr, int nc);
static void (*gemm_q4_K_8x8)(int n, float *s, size_t bs, const void *vx, const void *vy, int nr, int nc);
/* ggml_quantize_mat_t<8, GGML_TYPE_Q8_K>: jumps to ggml_quantize_mat_q8_K_4x8 */
static void (*quantize_mat_q8_K_4x8)(const float *x, void *vy, int64_t nrow, int64_t n_per_row);
static void (*gemv_q4_0_8x8)(int n, float *s, size_t bs, const void *vx, const void *vy, int nr, int nc);
static void (*gemm_q4_0_8x8)(int n, float *s, size_t bs, const void *vx, const void *vy, int nr, int nc);
/* ggml_quantize_mat_t<8, GGML_TYPE_Q8_0>: ggml_quantize_mat_q8_0_4x8 */
static void (*quantize_mat_q8_0_4x8)(const float *x, void *vy, int64_t nrow, int64_t n_per_row);

/* ggml logs each repacked tensor ("repack: repack tensor ... with q4_K_8x8")
 * to stderr; only warnings and errors are kept. */
static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static int load_cpu(void)
{
    ggml_log_set(quiet_log, NULL);
    const char *path = getenv("GGML_BACKEND_PATH");
    if (!path || !*path) {
        fprintf(stderr, "GGML_BACKEND_PATH is not set: run this under the kit's sid-run\n");
        return -1;
    }
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
        return -1;
    }
    void (*cpu_init)(void);
    *(void **)&traits_cpu = dlsym(lib, "ggml_get_type_traits_cpu");
    *(void **)&cpu_init = dlsym(lib, "ggml_cpu_init");
    *(void **)&backend_init = dlsym(lib, "ggml_backend_cpu_init");
    *(void **)&set_n_threads = dlsym(lib, "ggml_backend_cpu_set_n_threads");
    *(void **)&repack_buft = dlsym(lib, "_Z35ggml_backend_cpu_repack_buffer_typev");
    *(void **)&gemv_q4_K_8x8 = dlsym(lib, "_ZN4ggml3cpu6repack4gemvI10block_q4_KLl8ELl8EL9ggml_type15EEEviPfmPKvS7_ii");
    *(void **)&gemm_q4_K_8x8 = dlsym(lib, "_ZN4ggml3cpu6repack4gemmI10block_q4_KLl8ELl8EL9ggml_type15EEEviPfmPKvS7_ii");
    *(void **)&quantize_mat_q8_K_4x8 = dlsym(lib, "_Z19ggml_quantize_mat_tILl8EL9ggml_type15EEvPKfPvll");
    *(void **)&gemv_q4_0_8x8 = dlsym(lib, "_ZN4ggml3cpu6repack4gemvI10block_q4_0Ll8ELl8EL9ggml_type8EEEviPfmPKvS7_ii");
    *(void **)&gemm_q4_0_8x8 = dlsym(lib, "_ZN4ggml3cpu6repack4gemmI10block_q4_0Ll8ELl8EL9ggml_type8EEEviPfmPKvS7_ii");
    *(void **)&quantize_mat_q8_0_4x8 = dlsym(lib, "_Z19ggml_quantize_mat_tILl8EL9ggml_type8EEvPKfPvll");
    if (!traits_cpu || !cpu_init || !backend_init || !set_n_threads || !repack_buft || !gemv_q4_K_8x8 ||
        !gemm_q4_K_8x8 || !quantize_mat_q8_K_4x8 || !gemv_q4_0_8x8 || !gemm_q4_0_8x8 || !quantize_mat_q8_0_4x8) {
        fprintf(stderr, "%s lacks a CPU backend symbol\n", path);
        return -1;
    }
    cpu_init();
    return 0;
}

/* ---------------------------------------------------------------- helpers */

#define KIT_SEED 0x243f6a8885a308d3ULL
#include "kit_check.h"

static const char *mode_name(void) { return q8_simd() ? "avx2" : "portable"; }

/* ---------------------------------------------------------------- the types */

typedef struct {
    enum ggml_type type, act_type;
    const char *name;
    size_t blk, bytes, act_bytes; /* values per block; bytes per weight / activation block */
    int (*dequant)(const uint8_t *, size_t, size_t, float *, char *, size_t);
    float (*vec_dot)(const uint8_t *, const uint8_t *, size_t);
    /* fp16 scale offsets in a weight block (-1: none) */
    int s16[2];
} Kind;

static const Kind kinds[] = {
    {GGML_TYPE_Q4_K, GGML_TYPE_Q8_K, "Q4_K", 256, Q4_K_BYTES, Q8_K_BYTES, q4_k_dequantize, q4_k_vec_dot, {0, 2}},
    {GGML_TYPE_Q5_K, GGML_TYPE_Q8_K, "Q5_K", 256, Q5_K_BYTES, Q8_K_BYTES, q5_k_dequantize, q5_k_vec_dot, {0, 2}},
    {GGML_TYPE_Q6_K, GGML_TYPE_Q8_K, "Q6_K", 256, Q6_K_BYTES, Q8_K_BYTES, q6_k_dequantize, q6_k_vec_dot, {208, -1}},
    {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, "Q4_0", 32, Q4_0_BYTES, Q8_0_BYTES, q4_0_dequantize, q4_0_vec_dot, {0, -1}},
    {GGML_TYPE_Q4_1, GGML_TYPE_Q8_1, "Q4_1", 32, Q4_1_BYTES, Q8_1_BYTES, q4_1_dequantize, q4_1_vec_dot, {0, 2}},
    {GGML_TYPE_Q5_0, GGML_TYPE_Q8_0, "Q5_0", 32, Q5_0_BYTES, Q8_0_BYTES, q5_0_dequantize, q5_0_vec_dot, {0, -1}},
    {GGML_TYPE_Q5_1, GGML_TYPE_Q8_1, "Q5_1", 32, Q5_1_BYTES, Q8_1_BYTES, q5_1_dequantize, q5_1_vec_dot, {0, 2}},
    {GGML_TYPE_Q2_K, GGML_TYPE_Q8_K, "Q2_K", 256, Q2_K_BYTES, Q8_K_BYTES, q2_k_dequantize, q2_k_vec_dot, {80, 82}},
    {GGML_TYPE_Q3_K, GGML_TYPE_Q8_K, "Q3_K", 256, Q3_K_BYTES, Q8_K_BYTES, q3_k_dequantize, q3_k_vec_dot, {108, -1}},
};

static void fill_floats(float *x, size_t n)
{
    float scale = powf(10.0f, (float)(next64() % 9) - 4.0f);
    for (size_t i = 0; i < n; i++)
        x[i] = gauss() * scale;
}

static void make_weights(const Kind *t, uint8_t *w, size_t rows, size_t k)
{
    float *x = malloc(rows * k * sizeof(float));
    fill_floats(x, rows * k);
    ggml_quantize_chunk(t->type, x, w, 0, (int64_t)rows, (int64_t)k, NULL);
    free(x);
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* A random finite f16 scale, either sign, 2^-14 .. 2^3. */
static uint16_t rand_scale(void)
{
    uint16_t e = (uint16_t)(1 + next64() % 17), m = (uint16_t)(next64() & 0x3ff);
    return (uint16_t)((next64() & 1) << 15 | e << 10 | m);
}

/* fp16 specials: +-0, +-inf, +-max, subnormals, the smallest normal. With
 * nan, NaNs too (quiet, signalling, with payloads): dequantization is one
 * product per value, so a NaN's payload path is fixed; the dot products
 * leave NaN scales out, as kit_kernels_quant.c explains. */
static uint16_t special16(int nan)
{
    static const uint16_t sp[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7bff, 0xfbff, 0x0001, 0x83ff, 0x0400};
    static const uint16_t nans[] = {0x7e00, 0xfe00, 0x7c01, 0x7d55, 0xfc3f};
    if (nan && next64() % 3 == 0)
        return nans[next64() % (sizeof nans / sizeof *nans)];
    return sp[next64() % (sizeof sp / sizeof *sp)];
}

/* Weight blocks of random bytes with sane fp16 scales; hostile 1 puts an
 * fp16 special in about one scale in four (NaNs only if nan), hostile 2 also
 * sets every code to its maximum in one block in four. */
static void make_raw(const Kind *t, uint8_t *w, size_t nblocks, int hostile, int nan)
{
    for (size_t b = 0; b < nblocks; b++) {
        uint8_t *p = w + b * t->bytes;
        for (size_t i = 0; i < t->bytes; i++)
            p[i] = (uint8_t)next64();
        if (hostile == 2 && next64() % 4 == 0)
            memset(p, 0xff, t->bytes);
        for (int s = 0; s < 2; s++) {
            if (t->s16[s] < 0)
                continue;
            put16(p + t->s16[s], hostile && next64() % 4 == 0 ? special16(nan) : rand_scale());
        }
    }
}

/* Activation blocks of random bytes. Q8_K: a finite f32 d (2^-20..1, either
 * sign), random int8 and random int16 bsums (raw) or the true sums (when
 * consistent); q8_0/q8_1: fp16 d (and s). hostile: a quarter of the quants
 * -128 and specials among the scales (Q8_K: 0, -0, +-inf, +-FLT_MAX,
 * subnormal). */
static void make_act(enum ggml_type at, uint8_t *a, size_t nblocks, int hostile, int consistent)
{
    static const uint32_t f32sp[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f7fffffu,
                                     0xff7fffffu, 0x00000001u, 0x807fffffu};
    size_t bytes = at == GGML_TYPE_Q8_K ? Q8_K_BYTES : at == GGML_TYPE_Q8_1 ? Q8_1_BYTES : Q8_0_BYTES;
    size_t qs = at == GGML_TYPE_Q8_K ? 4 : at == GGML_TYPE_Q8_1 ? 4 : 2;
    size_t nq = at == GGML_TYPE_Q8_K ? 256 : 32;
    for (size_t b = 0; b < nblocks; b++) {
        uint8_t *p = a + b * bytes;
        for (size_t i = 0; i < bytes; i++)
            p[i] = (uint8_t)next64();
        if (hostile)
            for (size_t i = 0; i < nq; i++)
                if (next64() % 4 == 0)
                    p[qs + i] = 0x80;
        if (at == GGML_TYPE_Q8_K) {
            float d = ldexpf(uni() + 0.5f, -(int)(next64() % 21)) * (next64() & 1 ? -1.0f : 1.0f);
            if (hostile && next64() % 8 == 0)
                d = bitsf(f32sp[next64() % (sizeof f32sp / sizeof *f32sp)]);
            memcpy(p, &d, 4);
            if (consistent)
                for (int g = 0; g < 16; g++) {
                    int s = 0;
                    for (int i = 0; i < 16; i++)
                        s += (int8_t)p[4 + 16 * g + i];
                    put16(p + 260 + 2 * g, (uint16_t)s);
                }
        } else {
            put16(p, hostile && next64() % 8 == 0 ? special16(0) : rand_scale());
            if (at == GGML_TYPE_Q8_1)
                put16(p + 2, hostile && next64() % 8 == 0 ? special16(0) : rand_scale());
        }
    }
}

/* ---------------------------------------------------------------- dequant */

static void check_dequant(const Kind *t)
{
    const struct ggml_type_traits *tr = ggml_get_type_traits(t->type);
    size_t lens[] = {1, 2, 3, 7, 32};
    for (int mode = 0; mode < 4; mode++) {
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            size_t nb = lens[li], k = nb * t->blk;
            uint8_t *w = malloc(nb * t->bytes);
            float *a = malloc(k * sizeof(float)), *b = malloc(k * sizeof(float));
            if (mode == 0)
                make_weights(t, w, 1, k);
            else
                make_raw(t, w, nb, mode - 1, 1);
            char err[200], name[128];
            int rc = t->dequant(w, nb * t->bytes, k, a, err, sizeof err);
            tr->to_float(w, b, (int64_t)k);
            snprintf(name, sizeof name, "%s dequant %s %s k=%zu", t->name,
                     mode == 0 ? "quantized" : mode == 1 ? "raw" : mode == 2 ? "special scales" : "special+max codes",
                     mode_name(), k);
            if (rc != 0) {
                failed++;
                printf("FAIL %s: %s\n", name, err);
            } else {
                verdict(name, cmp_f32(name, a, b, k), (long)k);
            }
            free(w);
            free(a);
            free(b);
        }
    }
}

/* ---------------------------------------------------------------- quantizers */

/* Edge blocks of 32 floats (as kit_kernels_quant.c's, plus Q8_K's own):
 * written into x, returns how many. */
static size_t edge32(float *x, size_t max_blocks)
{
    size_t nb = 0;
#define NEWB() (nb < max_blocks ? x + 32 * nb++ : NULL)
    float *b;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = 0.0f;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i & 1 ? -0.0f : 0.0f;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = (float)(i % 2 ? 127 : -127);
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 5 ? -254.0f : (float)i + 0.5f;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 0 ? 127.0f : (float)(i % 8) - 3.5f;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 31 ? -127.0f : (float)(i - 16) + 0.5f;
    for (int p = 0; p < 32; p++)
        if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == p ? NAN : gauss();
    for (int p = 0; p < 32; p += 3)
        for (int q = 0; q < 32; q += 5)
            if (q != p && (b = NEWB()))
                for (int i = 0; i < 32; i++)
                    b[i] = i == p ? NAN : i == q ? (q & 1 ? -100.0f : 100.0f) : gauss();
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 9 ? bitsf(0x7fa12345u) : gauss();
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 17 ? bitsf(0xffc00001u) : gauss();
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = NAN;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 7 ? INFINITY : gauss();
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 7 ? -INFINITY : (i == 2 ? 0.0f : gauss());
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 1 ? 1e-45f : 0.0f;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = bitsf(0x00000001u + (uint32_t)i * 3);
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 4 ? 3.0e38f : gauss() * 1e37f;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i % 3 ? -3.4e38f : 3.4e38f;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 0 ? 65504.0f * 127.0f : gauss();
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 0 ? 1e-6f : gauss() * 1e-7f;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 3 ? -5.0f : (i == 20 ? 5.0f : gauss()); /* tie of |max| */
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = (float)(i - 16) * 1e30f;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 0 ? 1e-38f : bitsf(0x00400000u + (uint32_t)i);
#undef NEWB
    return nb;
}

typedef int (*quant_fn)(const float *, size_t, uint8_t *, size_t, char *, size_t);

/* Quantizes nvals floats both ways (both outputs zeroed first: ggml leaves a
 * zero Q8_K block's bsums as they were) and compares the bytes. */
static void quant_case(const char *what, enum ggml_type at, quant_fn ours, size_t bytes, size_t blk,
                       const float *x, size_t nvals)
{
    const struct ggml_type_traits_cpu *tr = traits_cpu(at);
    size_t nb = nvals / blk;
    uint8_t *a = calloc(nb, bytes), *b = calloc(nb, bytes);
    char err[200], name[128];
    snprintf(name, sizeof name, "%s %s", what, mode_name());
    if (ours(x, nvals, a, nb * bytes, err, sizeof err) != 0) {
        failed++;
        printf("FAIL %s: %s\n", name, err);
    } else {
        tr->from_float(x, b, (int64_t)nvals);
        verdict(name, cmp_bytes(name, a, b, nb * bytes), (long)(nb * bytes));
    }
    free(a);
    free(b);
}

static void check_quantizers(void)
{
    enum { MAXB = 4096 };
    float *x = malloc((size_t)MAXB * 32 * sizeof(float));
    char name[128];
    struct { const char *n; enum ggml_type at; quant_fn f; size_t bytes, blk; } qs[] = {
        {"q8_K", GGML_TYPE_Q8_K, q8_k_quantize, Q8_K_BYTES, 256},
        {"q8_1", GGML_TYPE_Q8_1, q8_1_quantize, Q8_1_BYTES, 32},
    };
    for (size_t qi = 0; qi < 2; qi++) {
        size_t blk = qs[qi].blk, per = blk / 32;
        /* edge blocks of 32, one call; for Q8_K also each alone inside an
         * otherwise ordinary 256-block, and grouped 8 to a block */
        size_t ne = edge32(x, MAXB);
        size_t ne_round = ne / per * per;
        snprintf(name, sizeof name, "%s quantize edge blocks (%zu x 32)", qs[qi].n, ne_round);
        quant_case(name, qs[qi].at, qs[qi].f, qs[qi].bytes, blk, x, ne_round * 32);
        if (blk == 256) {
            float *e = malloc(32 * sizeof(float) * ne), *y = malloc(256 * sizeof(float) * ne);
            memcpy(e, x, 32 * sizeof(float) * ne);
            for (size_t i = 0; i < ne; i++) {
                fill_floats(y + 256 * i, 256);
                memcpy(y + 256 * i + 32 * (i % 8), e + 32 * i, 32 * sizeof(float));
            }
            snprintf(name, sizeof name, "q8_K quantize edge blocks inside ordinary ones (%zu)", ne);
            quant_case(name, qs[qi].at, qs[qi].f, qs[qi].bytes, blk, y, ne * 256);
            free(e);
            free(y);
        }
        size_t lens[] = {1, 2, 3, 4, 7, 8, 9, 16, 17, 33, 128, 384};
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            size_t nb = lens[li];
            if (nb * blk > (size_t)MAXB * 32)
                continue;
            for (size_t i = 0; i < nb; i++)
                fill_floats(x + blk * i, blk);
            snprintf(name, sizeof name, "%s quantize random %zu blocks", qs[qi].n, nb);
            quant_case(name, qs[qi].at, qs[qi].f, qs[qi].bytes, blk, x, nb * blk);
        }
        /* ties: values on .5 after scaling (Q8_K: max -127 gives iscale 1) */
        for (size_t i = 0; i < 64 * 32; i++)
            x[i] = (float)((int)(next64() % 253) - 126) + 0.5f * (float)(next64() & 1);
        for (size_t i = 0; i < 64 * 32; i += blk)
            x[i] = blk == 256 ? -127.0f : 127.0f;
        snprintf(name, sizeof name, "%s quantize ties", qs[qi].n);
        quant_case(name, qs[qi].at, qs[qi].f, qs[qi].bytes, blk, x, 64 * 32);
        /* +-max edges: the largest |x| positive, then negative, at every place */
        size_t nblk = 0;
        for (size_t p = 0; p < blk && nblk + 2 <= 64 * 32 / blk; p += blk / 16 + 1) {
            for (int sgn = 0; sgn < 2; sgn++, nblk++)
                for (size_t i = 0; i < blk; i++)
                    x[nblk * blk + i] = i == p ? (sgn ? -3.0f : 3.0f) : gauss() * 0.9f;
        }
        snprintf(name, sizeof name, "%s quantize +-max at each place (%zu blocks)", qs[qi].n, nblk);
        quant_case(name, qs[qi].at, qs[qi].f, qs[qi].bytes, blk, x, nblk * blk);
    }
    free(x);
}

/* ---------------------------------------------------------------- vec_dot */

/* mode 0: ggml-made weights and activations; 1: raw bytes (Q8_K bsums
 * random); 2: raw weights against hostile activations (-128 a quarter,
 * consistent bsums) with specials among both sides' scales; 3: max codes,
 * hostile activations, sane scales. */
static void check_vec_dot(const Kind *t)
{
    const struct ggml_type_traits_cpu *tr = traits_cpu(t->type), *q = traits_cpu(t->act_type);
    size_t lens_k[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100};
    size_t lens_0[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129, 255, 1000, 3071};
    const size_t *lens = t->blk == 256 ? lens_k : lens_0;
    size_t nl = t->blk == 256 ? sizeof lens_k / sizeof *lens_k : sizeof lens_0 / sizeof *lens_0;
    for (int mode = 0; mode < 4; mode++) {
        for (size_t li = 0; li < nl; li++) {
            size_t nb = lens[li], k = nb * t->blk;
            uint8_t *w = malloc(nb * t->bytes), *act = malloc(nb * t->act_bytes);
            float *x = malloc(k * sizeof(float));
            long bad = 0;
            int reps = nb < 40 ? 6 : 2;
            for (int rep = 0; rep < reps; rep++) {
                if (mode == 0) {
                    make_weights(t, w, 1, k);
                    fill_floats(x, k);
                    q->from_float(x, act, (int64_t)k);
                } else {
                    make_raw(t, w, nb, mode == 2 ? 1 : mode == 3 ? 2 : 0, 0);
                    if (mode == 3)
                        for (size_t b = 0; b < nb; b++) /* max codes everywhere, sane scales */
                            for (size_t i = 0; i < t->bytes; i++)
                                if ((int)i != t->s16[0] && (int)i != t->s16[0] + 1 && (int)i != t->s16[1] &&
                                    (int)i != t->s16[1] + 1)
                                    w[b * t->bytes + i] = 0xff;
                    make_act(t->act_type, act, nb, mode >= 2, mode >= 2);
                }
                float ours = t->vec_dot(w, act, nb), want = 0;
                tr->vec_dot((int)k, &want, 0, w, 0, act, 0, 1);
                char name[96];
                snprintf(name, sizeof name, "%s vec_dot k=%zu", t->name, k);
                bad += cmp_f32(name, &ours, &want, 1);
            }
            char name[128];
            snprintf(name, sizeof name, "%s vec_dot %s k=%zu x%d %s", t->name,
                     mode == 0 ? "quantized" : mode == 1 ? "raw" : mode == 2 ? "hostile(-128)+special scales"
                                                                             : "max codes+hostile(-128)",
                     k, reps, mode_name());
            verdict(name, bad, reps);
            free(w);
            free(act);
            free(x);
        }
    }
}



/* Q8_K 4x8 (interleaved) quantizer: four columns of nb super-blocks. */
static void quant4_case(const char *what, const float *x, size_t nb)
{
    size_t k = nb * 256, bytes = nb * Q8_KX4_BYTES;
    uint8_t *a = calloc(1, bytes), *b = calloc(1, bytes);
    char name[160];
    snprintf(name, sizeof name, "q8_K 4x8 quantize %s (%zu blocks) %s", what, nb, mode_name());
    q8_k_quantize4x8(x, k, a);
    quantize_mat_q8_K_4x8(x, b, 4, (int64_t)k);
    verdict(name, cmp_bytes(name, a, b, bytes), (long)bytes);
    free(a);
    free(b);
}

/* q8_0 4x8: four columns of nb blocks of 32 */
static void quant4_q80_case(const char *what, const float *x, size_t nb)
{
    size_t k = nb * 32, bytes = nb * Q8_0X4_BYTES;
    uint8_t *a = calloc(1, bytes), *b = calloc(1, bytes);
    char name[160];
    snprintf(name, sizeof name, "q8_0 4x8 quantize %s (%zu blocks) %s", what, nb, mode_name());
    q8_0_quantize4x8(x, k, a);
    quantize_mat_q8_0_4x8(x, b, 4, (int64_t)k);
    verdict(name, cmp_bytes(name, a, b, bytes), (long)bytes);
    free(a);
    free(b);
}

static void check_quantize4x8(void)
{
    {
        float *e = malloc(4096 * 32 * sizeof(float));
        size_t ne = edge32(e, 4096) / 4;
        quant4_q80_case("edge blocks", e, ne);
        for (size_t i = 0; i < 4 * 40 * 32; i++)
            e[i] = gauss() * (float)(1 + i % 7);
        quant4_q80_case("random", e, 40);
        free(e);
    }
    enum { NB = 64 };
    float *x = malloc(4 * NB * 256 * sizeof(float)), *e = malloc(4096 * 32 * sizeof(float));
    size_t lens[] = {1, 2, 3, 16};
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        size_t nb = lens[li];
        for (size_t i = 0; i < 4 * nb; i++)
            fill_floats(x + 256 * i, 256);
        quant4_case("random", x, nb);
    }
    /* edge blocks of 32 placed into ordinary super-blocks, every place */
    size_t ne = edge32(e, 4096);
    size_t nb = (ne + 3) / 4 > NB ? NB : (ne + 3) / 4;
    for (size_t i = 0; i < 4 * nb; i++) {
        fill_floats(x + 256 * i, 256);
        if (i < ne)
            memcpy(x + 256 * i + 32 * (i % 8), e + 32 * i, 32 * sizeof(float));
    }
    quant4_case("edge blocks inside ordinary ones", x, nb);
    /* the sign of the scale: +m and -m in the same lane, other lanes, other
     * sub-blocks, either first; zeros; all-negative */
    nb = 0;
    for (int p = 0; p < 256 && nb < NB; p += 37)
        for (int q = 0; q < 256 && nb < NB; q += 29) {
            if (p == q)
                continue;
            for (int r = 0; r < 4; r++) {
                float *c = x + (size_t)r * NB * 256 + 256 * nb;
                for (int i = 0; i < 256; i++)
                    c[i] = gauss();
                c[p] = r & 1 ? 9.0f : -9.0f;
                c[q] = r & 1 ? -9.0f : 9.0f;
                if (r == 2)
                    c[(p + 8) % 256] = 9.5f;   /* a larger one later */
                if (r == 3)
                    for (int i = 0; i < 256; i++)
                        c[i] = -fabsf(c[i]) - 0.25f;
            }
            nb++;
        }
    /* quant4_case reads column r at x + r*k, k = nb*256: repack the layout */
    float *y = malloc(4 * nb * 256 * sizeof(float));
    for (int r = 0; r < 4; r++)
        memcpy(y + (size_t)r * nb * 256, x + (size_t)r * NB * 256, nb * 256 * sizeof(float));
    quant4_case("+-max ties and sign changes", y, nb);
    for (size_t i = 0; i < 4 * 256; i++)
        y[i] = (i / 256 == 1) ? 0.0f : (i / 256 == 2 ? -0.0f : gauss());
    quant4_case("zero columns", y, 1);
    free(y);
    free(x);
    free(e);
}

/* ---------------------------------------------------------------- repacked Q4_K */

/* A Q4_K weight of rows x k in ggml's repack buffer (set_tensor repacks
 * it, as llama.cpp's loader does); NULL if the buffer type refuses. */
typedef struct {
    struct ggml_context *ctx;
    ggml_backend_buffer_t buf;
    struct ggml_tensor *t;
} Repacked;

static int repack_ggml(Repacked *r, enum ggml_type type, const uint8_t *w, size_t rows, size_t k)
{
    struct ggml_init_params ip = {ggml_tensor_overhead() * 2, NULL, true};
    r->ctx = ggml_init(ip);
    r->t = ggml_new_tensor_2d(r->ctx, type, (int64_t)k, (int64_t)rows);
    ggml_backend_buffer_type_t bt = repack_buft();
    r->buf = ggml_backend_buft_alloc_buffer(bt, ggml_backend_buft_get_alloc_size(bt, r->t) + 64);
    if (!r->buf || ggml_backend_tensor_alloc(r->buf, r->t, ggml_backend_buffer_get_base(r->buf)) != GGML_STATUS_SUCCESS) {
        ggml_free(r->ctx);
        return -1;
    }
    ggml_backend_tensor_set(r->t, w, 0, ggml_nbytes(r->t));
    return 0;
}

static void repack_free(Repacked *r)
{
    ggml_backend_buffer_free(r->buf);
    ggml_free(r->ctx);
}

/* One repacked type: ours and ggml's pieces. */
typedef struct {
    const Kind *t;             /* the plain weight type */
    size_t blk;                /* values per activation block (256 or 32) */
    size_t abytes, a4bytes;    /* bytes per plain / 4-column activation block */
    int (*repack)(const uint8_t *, size_t, size_t, size_t, uint8_t *, size_t, char *, size_t);
    void (*gemv)(const uint8_t *, size_t, size_t, const uint8_t *, float *);
    void (*gemm)(const uint8_t *, size_t, size_t, const uint8_t *, float *, size_t);
    void (*quant4)(const float *, size_t, uint8_t *);
    int (*quant1)(const float *, size_t, uint8_t *, size_t, char *, size_t);
    void (**ggemv)(int, float *, size_t, const void *, const void *, int, int);
    void (**ggemm)(int, float *, size_t, const void *, const void *, int, int);
    void (**gquant4)(const float *, void *, int64_t, int64_t);
} RK;

/* Sets column c's scale in a 4-column activation block: f32 (Q8_Kx4) or
 * f16 (Q8_0x4). */
static void set_a4_scale(const RK *p, uint8_t *blk, int c)
{
    if (p->blk == 256) {
        float d = ldexpf(uni() + 0.5f, -(int)(next64() % 21));
        memcpy(blk + 4 * c, &d, 4);
    } else {
        put16(blk + 2 * c, rand_scale());
    }
}

/* The repacked bytes against ggml's repack buffer; ggml's exported gemv and
 * gemm against ours (ggml-made, raw and special-scale weights; ggml-made
 * and hostile -128 activations); whole ggml_mul_mat graphs on the repacked
 * weight for 1..17 columns (groups of 4 through the interleaved quantizer and
 * gemm, the rest through the plain quantizer and gemv), every column, 1 and
 * 2 threads. */
static void check_repack(const RK *p, ggml_backend_t be, par_pool *pool2)
{
    size_t rows_list[] = {8, 16, 24, 64, 136};
    size_t kb_list[] = {1, 2, 3, 7, 16};
    const Kind *t = p->t;
    for (size_t ri = 0; ri < sizeof rows_list / sizeof *rows_list; ri++)
        for (size_t ki = 0; ki < sizeof kb_list / sizeof *kb_list; ki++) {
            size_t rows = rows_list[ri], nb = kb_list[ki], k = nb * t->blk, wb = rows * nb * t->bytes;
            uint8_t *w = malloc(wb), *ours = malloc(wb), *act = malloc(nb * p->abytes);
            float *x = malloc(k * sizeof(float)), *y = malloc(rows * sizeof(float)), *want = malloc(rows * sizeof(float));
            char name[128], err[200];
            for (int mode = 0; mode < 3; mode++) {
                if (mode == 0)
                    make_weights(t, w, rows, k);
                else
                    make_raw(t, w, rows * nb, mode == 2 ? 1 : 0, 0);
                Repacked r;
                if (repack_ggml(&r, t->type, w, rows, k) != 0) {
                    failed++;
                    printf("FAIL repack buffer for %zux%zu\n", rows, k);
                    continue;
                }
                const char *mn = mode == 0 ? "quantized" : mode == 1 ? "raw" : "special scales";
                snprintf(name, sizeof name, "%s repack8 %s %zux%zu", t->name, mn, rows, k);
                if (p->repack(w, wb, rows, k, ours, wb, err, sizeof err) != 0) {
                    failed++;
                    printf("FAIL %s: %s\n", name, err);
                    repack_free(&r);
                    continue;
                }
                verdict(name, cmp_bytes(name, ours, r.t->data, wb), (long)wb);
                for (int am = 0; am < 2; am++) {
                    if (am == 0) {
                        fill_floats(x, k);
                        traits_cpu(t->act_type)->from_float(x, act, (int64_t)k);
                    } else {
                        make_act(t->act_type, act, nb, 1, next64() & 1);
                    }
                    (*p->ggemv)((int)k, want, rows, r.t->data, act, 1, (int)rows);
                    p->gemv(ours, rows, nb, act, y);
                    snprintf(name, sizeof name, "%s x8 gemv %s weights, %s activations %zux%zu %s", t->name, mn,
                             am ? "hostile(-128)" : "quantized", rows, k, mode_name());
                    verdict(name, cmp_f32(name, y, want, rows), (long)rows);
                }
                /* gemm: four columns, ggml-made (its own 4x8 quantizer) or hostile */
                for (int am = 0; am < 2; am++) {
                    uint8_t *a4 = malloc(nb * p->a4bytes);
                    float *x4 = malloc(4 * k * sizeof(float)), *y4 = malloc(4 * rows * sizeof(float)),
                          *w4 = malloc(4 * rows * sizeof(float));
                    if (am == 0) {
                        fill_floats(x4, 4 * k);
                        (*p->gquant4)(x4, a4, 4, (int64_t)k);
                    } else {
                        for (size_t i = 0; i < nb * p->a4bytes; i++)
                            a4[i] = next64() % 4 == 0 ? 0x80 : (uint8_t)next64();
                        for (size_t b = 0; b < nb; b++)
                            for (int c = 0; c < 4; c++)
                                set_a4_scale(p, a4 + b * p->a4bytes, c);
                    }
                    (*p->ggemm)((int)k, w4, rows, r.t->data, a4, 4, (int)rows);
                    p->gemm(ours, rows, nb, a4, y4, rows);
                    snprintf(name, sizeof name, "%s x8 gemm %s weights, %s activations %zux%zu %s", t->name, mn,
                             am ? "raw(-128)" : "quantized", rows, k, mode_name());
                    verdict(name, cmp_f32(name, y4, w4, 4 * rows), (long)(4 * rows));
                    free(a4);
                    free(x4);
                    free(y4);
                    free(w4);
                }
                repack_free(&r);
            }
            free(w);
            free(ours);
            free(act);
            free(x);
            free(y);
            free(want);
        }
    /* whole products on the repacked weight */
    size_t cols_list[] = {1, 2, 3, 4, 5, 6, 7, 8, 13, 16, 17};
    for (int nt = 1; nt <= 2; nt++) {
        set_n_threads(be, nt);
        for (size_t ri = 0; ri < sizeof rows_list / sizeof *rows_list; ri++)
            for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++) {
                size_t rows = rows_list[ri], cols = cols_list[ci], nb = 3 * (256 / t->blk), k = nb * t->blk;
                size_t wb = rows * nb * t->bytes;
                uint8_t *w = malloc(wb), *ours = malloc(wb), *act = malloc(nb * p->abytes);
                float *y = malloc(rows * sizeof(float));
                make_weights(t, w, rows, k);
                Repacked r;
                if (repack_ggml(&r, t->type, w, rows, k) != 0) {
                    failed++;
                    printf("FAIL repack buffer for %zux%zu\n", rows, k);
                    free(w);
                    free(ours);
                    free(act);
                    free(y);
                    continue;
                }
                size_t mem = (k * cols + rows * cols) * sizeof(float) + 3 * ggml_tensor_overhead() +
                             ggml_graph_overhead() + 65536;
                struct ggml_init_params ip = {mem, NULL, false};
                struct ggml_context *ctx = ggml_init(ip);
                struct ggml_tensor *X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, (int64_t)k, (int64_t)cols);
                for (size_t c = 0; c < cols; c++)
                    fill_floats((float *)X->data + c * k, k);
                struct ggml_tensor *Y = ggml_mul_mat(ctx, r.t, X);
                struct ggml_cgraph *g = ggml_new_graph(ctx);
                ggml_build_forward_expand(g, Y);
                char name[128], err[200];
                snprintf(name, sizeof name, "%s repacked mul_mat %zux%zu cols=%zu threads=%d %s",
                         t->name, rows, k, cols, nt, mode_name());
                if (ggml_backend_graph_compute(be, g) != GGML_STATUS_SUCCESS ||
                    p->repack(w, wb, rows, k, ours, wb, err, sizeof err) != 0) {
                    failed++;
                    printf("FAIL %s: compute or repack failed\n", name);
                } else {
                    /* ours: the whole product (x8_mul_mat: quantizers, column split, rows
                     * over the pool), then the pieces by hand */
                    size_t wl = x8_work_bytes(t->type, k, cols);
                    uint8_t *work = malloc(wl ? wl : 1);
                    float *yy = malloc(rows * cols * sizeof(float));
                    long bad = 0, total = (long)(rows * cols);
                    if (x8_mul_mat(nt == 1 ? NULL : pool2, t->type, ours, wb, rows, k, (const float *)X->data, cols, yy,
                                   rows * cols, work, wl, err, sizeof err) != 0) {
                        printf("  %s: %s\n", name, err);
                        bad++;
                    } else {
                        bad += cmp_f32(name, yy, (const float *)Y->data, rows * cols);
                    }
                    free(work);
                    free(yy);
                    uint8_t *a4 = malloc(nb * p->a4bytes);
                    float *y4 = malloc(4 * rows * sizeof(float));
                    for (size_t c = 0; c + 4 <= cols; c += 4) {
                        p->quant4((const float *)X->data + c * k, k, a4);
                        p->gemm(ours, rows, nb, a4, y4, rows);
                        bad += cmp_f32(name, y4, (const float *)Y->data + c * rows, 4 * rows);
                    }
                    free(a4);
                    free(y4);
                    for (size_t c = cols - cols % 4; c < cols; c++) {
                        p->quant1((const float *)X->data + c * k, k, act, nb * p->abytes, err, sizeof err);
                        p->gemv(ours, rows, nb, act, y);
                        bad += cmp_f32(name, y, (const float *)Y->data + c * rows, rows);
                    }
                    verdict(name, bad, total);
                }
                ggml_free(ctx);
                repack_free(&r);
                free(w);
                free(ours);
                free(act);
                free(y);
            }
    }
}


/* b11669's tiled K-quant product (ggml_compute_forward_mul_mat_tiled): whole
 * ggml_mul_mat graphs of a plain (not repacked) Q4_K / Q5_K / Q6_K matrix
 * times 7..65 columns at 1 and 2 threads, every output against ours: the
 * columns through our Q8_K quantizer, then one q*_k_tiled_dot per output at
 * 8+ columns (one vec_dot below: 7 columns show the threshold). Weights:
 * ggml-made, raw bytes, and raw with fp16 specials (no NaN) among the
 * scales; activations: f32 columns (ggml quantizes them with from_float) or
 * hostile Q8_K rows handed to the graph as src1 directly (a quarter of the
 * quants -128, bsums that do not match their qs, specials among the d). */
typedef struct {
    const Kind *t;
    float (*tiled)(const uint8_t *, const uint8_t *, size_t);
    k_tile_fn (*tile)(void); /* NULL, or the K_TILE_ROWS x K_TILE_COLS kernel bankml's product runs */
    size_t min_tiled_cols;   /* 8: b11669's tiled kernel from 8 columns; 0: vec_dot at every count */
} TK;

/* The product as src/ops/wtype.c's vec_dot driver walks it with a tile
 * kernel: whole tiles, then the leftover columns and rows one output each. */
static void tiles_product(k_tile_fn tile, float (*dot)(const uint8_t *, const uint8_t *, size_t), const uint8_t *w,
                          size_t w_row, size_t rows, const uint8_t *act, size_t arow, size_t cols, size_t nb, float *y)
{
    size_t r = 0;
    for (; r + K_TILE_ROWS <= rows; r += K_TILE_ROWS) {
        size_t c = 0;
        for (; c + K_TILE_COLS <= cols; c += K_TILE_COLS)
            tile(w + r * w_row, w_row, act + c * arow, arow, nb, y + c * rows + r, rows);
        for (; c < cols; c++)
            for (size_t i = 0; i < K_TILE_ROWS; i++)
                y[c * rows + r + i] = dot(w + (r + i) * w_row, act + c * arow, nb);
    }
    for (; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            y[c * rows + r] = dot(w + r * w_row, act + c * arow, nb);
}

static void tiled_case(const TK *p, ggml_backend_t be, int nt, size_t rows, size_t nb, size_t cols, int wmode,
                       int amode)
{
    const Kind *t = p->t;
    const size_t k = nb * t->blk, wb = rows * nb * t->bytes, arow = nb * t->act_bytes;
    size_t mem = wb + cols * (k * sizeof(float) + arow) + rows * cols * sizeof(float) +
                 4 * ggml_tensor_overhead() + ggml_graph_overhead() + 65536;
    struct ggml_init_params ip = {mem, NULL, false};
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *W = ggml_new_tensor_2d(ctx, t->type, (int64_t)k, (int64_t)rows);
    uint8_t *w = W->data;
    if (wmode == 0)
        make_weights(t, w, rows, k);
    else
        make_raw(t, w, rows * nb, wmode == 2 ? 1 : 0, 0);
    uint8_t *act = malloc(cols * arow);
    struct ggml_tensor *X;
    if (amode == 0) {
        X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, (int64_t)k, (int64_t)cols);
        for (size_t c = 0; c < cols; c++) {
            fill_floats((float *)X->data + c * k, k);
            if (t->act_type == GGML_TYPE_Q8_K)
                q8_k_quantize((const float *)X->data + c * k, k, act + c * arow, arow, NULL, 0);
            else
                q8_0_quantize((const float *)X->data + c * k, k, act + c * arow, arow, NULL, 0);
        }
    } else {
        X = ggml_new_tensor_2d(ctx, t->act_type, (int64_t)k, (int64_t)cols);
        make_act(t->act_type, act, nb * cols, 1, 0);
        memcpy(X->data, act, cols * arow);
    }
    struct ggml_tensor *Y = ggml_mul_mat(ctx, W, X);
    struct ggml_cgraph *g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, Y);
    char name[160];
    snprintf(name, sizeof name, "%s %s mul_mat %s weights, %s %zux%zu cols=%zu threads=%d %s", t->name,
             p->min_tiled_cols ? "tiled" : "plain", wmode == 0 ? "quantized" : wmode == 1 ? "raw" : "special scales",
             amode ? (t->act_type == GGML_TYPE_Q8_K ? "hostile Q8_K(-128, raw bsums)" : "hostile Q8_0(-128)") : "f32",
             rows, k, cols, nt, mode_name());
    set_n_threads(be, nt);
    if (ggml_backend_graph_compute(be, g) != GGML_STATUS_SUCCESS) {
        failed++;
        printf("FAIL %s: compute failed\n", name);
    } else {
        float *yy = malloc(rows * cols * sizeof(float));
        for (size_t c = 0; c < cols; c++)
            for (size_t r = 0; r < rows; r++)
                yy[c * rows + r] = (p->min_tiled_cols && cols >= p->min_tiled_cols ? p->tiled : t->vec_dot)(
                    w + r * nb * t->bytes, act + c * arow, nb);
        verdict(name, cmp_f32(name, yy, (const float *)Y->data, rows * cols), (long)(rows * cols));
        k_tile_fn tile = cols >= (p->min_tiled_cols ? p->min_tiled_cols : K_TILE_COLS) && p->tile ? p->tile() : NULL;
        if (tile) {
            char tname[200];
            snprintf(tname, sizeof tname, "%s, %dx%d tiles", name, K_TILE_ROWS, K_TILE_COLS);
            tiles_product(tile, p->min_tiled_cols ? p->tiled : t->vec_dot, w, nb * t->bytes, rows, act, arow, cols, nb, yy);
            verdict(tname, cmp_f32(tname, yy, (const float *)Y->data, rows * cols), (long)(rows * cols));
        }
        free(yy);
    }
    free(act);
    ggml_free(ctx);
}

static void check_tiled(ggml_backend_t be)
{
    /* Q4_0 (plain: rows not in eights) and Q5_0 keep vec_dot's bits at every column count; bankml runs
     * their 2x4 tiles from 4 columns */
    const TK tks[] = {{&kinds[0], q4_k_tiled_dot, q4_k_tiled_tile, 8}, {&kinds[1], q5_k_tiled_dot, q5_k_tiled_tile, 8},
                      {&kinds[2], q6_k_tiled_dot, q6_k_tiled_tile, 8}, {&kinds[7], q2_k_tiled_dot, NULL, 8},
                      {&kinds[8], q3_k_tiled_dot, NULL, 8}, {&kinds[3], NULL, q4_0_tile, 0},
                      {&kinds[5], NULL, q5_0_tile, 0}};
    const size_t shapes[][2] = {{12, 1}, {33, 3}, {300, 8}}; /* rows (not in eights), super-blocks */
    const size_t cols_list[] = {4, 5, 7, 8, 9, 13, 16, 17, 31, 64, 65};
    for (size_t i = 0; i < sizeof tks / sizeof *tks; i++)
        for (int nt = 1; nt <= 2; nt++)
            for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
                for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++)
                    for (int wmode = 0; wmode < 3; wmode++)
                        for (int amode = 0; amode < 2; amode++) {
                            /* the big shape: one weight/activation kind per column count */
                            if (si == 2 && (wmode != 0 || amode != 0) && cols_list[ci] != 17)
                                continue;
                            tiled_case(&tks[i], be, nt, shapes[si][0], shapes[si][1], cols_list[ci], wmode, amode);
                        }
}

/* Which weights b11669 repacks on this CPU, asked as llama.cpp's loader asks
 * (llama-model.cpp's buft_supported): the weight of a mul_mat placed in a
 * zero-size repack buffer, then ggml_backend_dev_supports_op. Expected: Q4_K,
 * Q4_0 (and IQ4_NL) with rows a multiple of 8; not Q5_K, Q6_K, Q4_1, Q5_0,
 * Q5_1, Q8_0, Q2_K (AVX-512 only), Q3_K, nor Q4_K / Q4_0 with other row
 * counts. */
static void check_repack_choice(ggml_backend_t be)
{
    struct { enum ggml_type type; size_t rows; int want; } cases[] = {
        {GGML_TYPE_Q4_K, 16, 1},   {GGML_TYPE_Q4_0, 16, 1},  {GGML_TYPE_IQ4_NL, 16, 1},
        {GGML_TYPE_Q4_K, 12, 0},   {GGML_TYPE_Q4_0, 20, 0},  {GGML_TYPE_Q5_K, 16, 0},
        {GGML_TYPE_Q6_K, 16, 0},   {GGML_TYPE_Q4_1, 16, 0},  {GGML_TYPE_Q5_0, 16, 0},
        {GGML_TYPE_Q5_1, 16, 0},   {GGML_TYPE_Q8_0, 16, 0},  {GGML_TYPE_Q8_0, 64, 0},
        {GGML_TYPE_Q2_K, 16, 0},   {GGML_TYPE_Q3_K, 16, 0},  {GGML_TYPE_Q2_K, 64, 0},
    };
    ggml_backend_dev_t dev = ggml_backend_get_device(be);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct ggml_init_params ip = {ggml_tensor_overhead() * 4, NULL, true};
        struct ggml_context *ctx = ggml_init(ip);
        struct ggml_tensor *W = ggml_new_tensor_2d(ctx, cases[i].type, 512, (int64_t)cases[i].rows);
        struct ggml_tensor *X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 512, 3);
        struct ggml_tensor *Y = ggml_mul_mat(ctx, W, X);
        ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(repack_buft(), 0);
        W->buffer = buf;
        int got = ggml_backend_dev_supports_op(dev, Y) ? 1 : 0;
        W->buffer = NULL;
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
        if (got == cases[i].want) {
            passed++;
        } else {
            failed++;
            printf("FAIL repack choice: %s with %zu rows %s repacked\n", ggml_type_name(cases[i].type),
                   cases[i].rows, got ? "is" : "is not");
        }
    }
}

/* ---------------------------------------------------------------- refusals */

static void check_refusals(void)
{
    uint8_t buf[1024] = {0};
    float y[512];
    char err[200];
    struct { const char *name; int rc; } cases[] = {
        {"q8_K quantize 255 values", q8_k_quantize((const float *)buf, 255, buf, sizeof buf, err, sizeof err)},
        {"q8_K short output", q8_k_quantize((const float *)buf, 256, buf, 291, err, sizeof err)},
        {"q8_1 quantize 31 values", q8_1_quantize((const float *)buf, 31, buf, sizeof buf, err, sizeof err)},
        {"q8_1 short output", q8_1_quantize((const float *)buf, 64, buf, 71, err, sizeof err)},
        {"Q4_K dequant 128 values", q4_k_dequantize(buf, sizeof buf, 128, y, err, sizeof err)},
        {"Q5_K dequant short row", q5_k_dequantize(buf, 175, 256, y, err, sizeof err)},
        {"Q6_K dequant short row", q6_k_dequantize(buf, 209, 256, y, err, sizeof err)},
        {"Q4_0 dequant 48 values", q4_0_dequantize(buf, sizeof buf, 48, y, err, sizeof err)},
        {"Q4_1 dequant short row", q4_1_dequantize(buf, 19, 32, y, err, sizeof err)},
        {"Q5_0 dequant short row", q5_0_dequantize(buf, 43, 64, y, err, sizeof err)},
        {"Q5_1 dequant NULL out", q5_1_dequantize(buf, sizeof buf, 32, NULL, err, sizeof err)},
        {"Q4_K repack 12 rows", q4_k_repack8(buf, sizeof buf, 12, 256, buf, sizeof buf, err, sizeof err)},
        {"Q4_K repack short input", q4_k_repack8(buf, 1000, 8, 256, buf, 2000, err, sizeof err)},
        {"Q4_0 repack 4 rows", q4_0_repack8(buf, sizeof buf, 4, 32, buf, sizeof buf, err, sizeof err)},
        {"x8_mul_mat of Q6_K", x8_mul_mat(NULL, 14, buf, sizeof buf, 8, 256, (const float *)buf, 1, y, 512, buf, sizeof buf, err, sizeof err)},
        {"x8_mul_mat short work", x8_mul_mat(NULL, 2, buf, sizeof buf, 8, 32, (const float *)buf, 1, y, 512, buf, 33, err, sizeof err)},
        {"Q4_0 repack short output", q4_0_repack8(buf, sizeof buf, 8, 64, buf, 287, err, sizeof err)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (cases[i].rc == -1) {
            passed++;
        } else {
            failed++;
            printf("FAIL refusal: %s was accepted\n", cases[i].name);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "check") != 0) {
        fprintf(stderr, "usage: sid-run kit_kernels_kquant [check]\n");
        return 2;
    }
    if (load_cpu() != 0)
        return 2;
    ggml_backend_t be = backend_init();
    char perr[200];
    par_pool *pool2 = par_create(2, perr, sizeof perr);
    if (!be || !pool2) {
        fprintf(stderr, "setup failed: ggml_backend_cpu_init or par_create (%s)\n", be ? perr : "backend");
        return 2;
    }
    for (int simd = 1; simd >= 0; simd--) {
        q8_set_simd(simd);
        if (simd && !q8_simd()) {
            skipped++;
            printf("SKIP avx2 kernels: this CPU lacks AVX2/FMA/F16C\n");
            continue;
        }
        check_quantizers();
        for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
            check_dequant(&kinds[i]);
            check_vec_dot(&kinds[i]);
        }
        check_quantize4x8();
        const RK rks[] = {
            {&kinds[0], 256, Q8_K_BYTES, Q8_KX4_BYTES, q4_k_repack8, q4_k_x8_gemv, q4_k_x8_gemm4, q8_k_quantize4x8,
             q8_k_quantize, &gemv_q4_K_8x8, &gemm_q4_K_8x8, &quantize_mat_q8_K_4x8},
            {&kinds[3], 32, Q8_0_BYTES, Q8_0X4_BYTES, q4_0_repack8, q4_0_x8_gemv, q4_0_x8_gemm4, q8_0_quantize4x8,
             q8_0_quantize, &gemv_q4_0_8x8, &gemm_q4_0_8x8, &quantize_mat_q8_0_4x8},
        };
        for (size_t i = 0; i < sizeof rks / sizeof *rks; i++)
            check_repack(&rks[i], be, pool2);
        check_tiled(be);
    }
    q8_set_simd(1);
    check_repack_choice(be);
    check_refusals();
    par_destroy(pool2);
    ggml_backend_free(be);
    printf("%ld passed, %ld failed, %ld skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
