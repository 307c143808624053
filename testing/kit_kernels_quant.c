/*
 * kit_kernels_quant.c -- in-process oracle for src/ops/q8_0.c, src/ops/q1_0.c and
 * src/ops/q2_0.c: the same inputs go through our kernels and through llama.cpp
 * b11669's own (libggml-base.so and the CPU backend the tools load,
 * libggml-cpu-haswell.so by default), and every output is compared bit for
 * bit.
 *
 * Why in process: a kernel one ulp off changes a token only now and then;
 * comparing every element of every product shows it on the first row.
 *
 * What is compared, for Q8_0, Q1_0 and Q2_0, with our AVX2 kernels and again
 * with our portable C (q8_set_simd(0)):
 *   dequant   rows made by ggml_quantize_chunk and rows of random bytes
 *             (Q2_0 code 3, Q8_0 -128) against type traits to_float;
 *   quantize  q8_0 activations: random rows, amax 0, +-127 edges, halves,
 *             NaN in each of the 32 places, +-inf, subnormals, huge values,
 *             against the CPU backend's from_float (quantize_row_q8_0);
 *   vec_dot   row lengths from one block to thousands against the CPU type
 *             traits' vec_dot, with ggml-made activations and raw int8 ones;
 *   mul_mat   whole products through a ggml graph (ggml_mul_mat, F32
 *             activations, the backend quantizes them) with 1..13 columns,
 *             rows multiple of 4 or not, 1 and 2 threads on both sides.
 *
 * Build (from /work/main; K=/root/.cache/bankml-oracle/root/usr):
 *   gcc -std=gnu11 -D_GNU_SOURCE -O2 -Wall -Wextra -Isrc -Iinclude -c src/ops/q8_0.c src/ops/q1_0.c \
 *       src/ops/q2_0.c src/base/par.c   (objects; f16.c too once the kernels use it)
 *   gcc -std=gnu11 -D_GNU_SOURCE -O2 -Wall -Wextra -I$K/include -Isrc -o kit_kernels_quant \
 *       testing/kit_kernels_quant.c *.o -L$K/lib/x86_64-linux-gnu -lggml-base -ldl -lm \
 *       -pthread -Wl,--allow-shlib-undefined
 * Run: /root/.cache/bankml-oracle/bin/sid-run ./kit_kernels_quant [check|bench]
 * (testing/oracle_kernels_quant.py does both). The libraries need a newer
 * glibc than this system's: sid-run runs us under the kit's loader, and
 * --allow-shlib-undefined lets the link succeed against them.
 *
 * check prints each mismatch (at most a few per case) and ends with
 * "N passed, N failed, N skipped"; exit 1 on any failure, 2 on setup errors.
 * bench prints ns per weight block for each kernel, ours vs ggml's, on the
 * same data, alternating runs, 1 and 2 threads for the products.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include "kit_bench.h"
#include "base/par.h"
#include "ops/q1_0.h"
#include "ops/q2_0.h"
#include "ops/q8_0.h"

/* ---------------------------------------------------------------- the CPU backend */

static struct {
    void *lib;
    ggml_backend_t (*backend_init)(void);
    void (*set_n_threads)(ggml_backend_t, int);
    const struct ggml_type_traits_cpu *(*traits_cpu)(enum ggml_type);
    void (*cpu_init)(void);
    /* a persistent pool for the bench, as llama-server keeps one */
    struct ggml_threadpool *(*tp_new)(struct ggml_threadpool_params *);
    void (*tp_free)(struct ggml_threadpool *);
    void (*tp_pause)(struct ggml_threadpool *);
    void (*tp_resume)(struct ggml_threadpool *);
    void (*set_threadpool)(ggml_backend_t, struct ggml_threadpool *);
} cpu;

static int load_cpu(void)
{
    const char *path = getenv("GGML_BACKEND_PATH");
    if (!path || !*path) {
        fprintf(stderr, "GGML_BACKEND_PATH is not set: run this under the kit's sid-run\n");
        return -1;
    }
    cpu.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!cpu.lib) {
        fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
        return -1;
    }
    *(void **)&cpu.backend_init = dlsym(cpu.lib, "ggml_backend_cpu_init");
    *(void **)&cpu.set_n_threads = dlsym(cpu.lib, "ggml_backend_cpu_set_n_threads");
    *(void **)&cpu.traits_cpu = dlsym(cpu.lib, "ggml_get_type_traits_cpu");
    *(void **)&cpu.cpu_init = dlsym(cpu.lib, "ggml_cpu_init");
    *(void **)&cpu.tp_new = dlsym(cpu.lib, "ggml_threadpool_new");
    *(void **)&cpu.tp_free = dlsym(cpu.lib, "ggml_threadpool_free");
    *(void **)&cpu.tp_pause = dlsym(cpu.lib, "ggml_threadpool_pause");
    *(void **)&cpu.tp_resume = dlsym(cpu.lib, "ggml_threadpool_resume");
    *(void **)&cpu.set_threadpool = dlsym(cpu.lib, "ggml_backend_cpu_set_threadpool");
    if (!cpu.backend_init || !cpu.set_n_threads || !cpu.traits_cpu || !cpu.cpu_init || !cpu.tp_new ||
        !cpu.tp_free || !cpu.tp_pause || !cpu.tp_resume || !cpu.set_threadpool) {
        fprintf(stderr, "%s lacks a CPU backend symbol\n", path);
        return -1;
    }
    cpu.cpu_init();
    return 0;
}

/* ---------------------------------------------------------------- helpers */

#define KIT_SEED 0x9e3779b97f4a7c15ULL
#include "kit_check.h"

typedef struct {
    enum ggml_type type;
    const char *name;
    size_t blk, bytes;
    int (*dequant)(const uint8_t *, size_t, size_t, float *, char *, size_t);
    float (*vec_dot)(const uint8_t *, const uint8_t *, size_t);
    int (*matmul)(par_pool *, const uint8_t *, size_t, size_t, size_t, const uint8_t *, size_t,
                  size_t, float *, size_t, char *, size_t);
} Kind;

static const Kind kinds[] = {
    {GGML_TYPE_Q8_0, "Q8_0", Q8_0_BLOCK, Q8_0_BYTES, q8_0_dequantize, q8_0_vec_dot, q8_0_matmul},
    {GGML_TYPE_Q1_0, "Q1_0", Q1_0_BLOCK, Q1_0_BYTES, q1_0_dequantize, q1_0_vec_dot, q1_0_matmul},
    {GGML_TYPE_Q2_0, "Q2_0", Q2_0_BLOCK, Q2_0_BYTES, q2_0_dequantize, q2_0_vec_dot, q2_0_matmul},
};

/* Random floats with a per-row scale (some rows tiny, some large). */
static void fill_floats(float *x, size_t n)
{
    float scale = powf(10.0f, (float)(next64() % 9) - 4.0f);
    for (size_t i = 0; i < n; i++)
        x[i] = gauss() * scale;
}

/* Weights as a model file has them: random floats through ggml's quantizer. */
static void make_weights(const Kind *t, uint8_t *w, size_t rows, size_t k)
{
    float *x = malloc(rows * k * sizeof(float));
    fill_floats(x, rows * k);
    ggml_quantize_chunk(t->type, x, w, 0, (int64_t)rows, (int64_t)k, NULL);
    free(x);
}

/* A random finite f16 scale, positive or negative, 2^-14 .. 2^3. */
static uint16_t rand_scale(void)
{
    uint16_t e = (uint16_t)(1 + next64() % 17), m = (uint16_t)(next64() & 0x3ff);
    return (uint16_t)((next64() & 1) << 15 | e << 10 | m);
}

/* Blocks of random bytes with sane scales (codes and quants ggml's quantizer
 * never makes: Q2_0 code 3, Q8_0 -128). */
static void make_raw(uint8_t *w, size_t nblocks, size_t bytes)
{
    for (size_t b = 0; b < nblocks; b++) {
        uint16_t s = rand_scale();
        w[b * bytes] = (uint8_t)s;
        w[b * bytes + 1] = (uint8_t)(s >> 8);
        for (size_t i = 2; i < bytes; i++)
            w[b * bytes + i] = (uint8_t)next64();
    }
}

/* ---------------------------------------------------------------- checks */

static const char *mode_name(void) { return q8_simd() ? "avx2" : "portable"; }

static void check_dequant(const Kind *t)
{
    const struct ggml_type_traits *tr = ggml_get_type_traits(t->type);
    size_t lens[] = {1, 2, 3, 7, 32};
    for (int raw = 0; raw < 2; raw++) {
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            size_t nb = lens[li], k = nb * t->blk;
            uint8_t *w = malloc(nb * t->bytes);
            float *a = malloc(k * sizeof(float)), *b = malloc(k * sizeof(float));
            if (raw)
                make_raw(w, nb, t->bytes);
            else
                make_weights(t, w, 1, k);
            char err[200], name[96];
            int rc = t->dequant(w, nb * t->bytes, k, a, err, sizeof err);
            tr->to_float(w, b, (int64_t)k);
            snprintf(name, sizeof name, "%s dequant %s %s k=%zu", t->name, raw ? "raw" : "quantized",
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

/* Edge-case activation blocks, 32 floats each, written into x; returns count. */
static size_t edge_blocks(float *x, size_t max_blocks)
{
    size_t nb = 0;
#define NEWB() (nb < max_blocks ? x + 32 * nb++ : NULL)
    float *b;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = 0.0f;               /* amax 0 */
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i & 1 ? -0.0f : 0.0f;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = (float)(i - 16) * 127.0f / 16.0f;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = (float)(i % 2 ? 127 : -127); /* +-127 */
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 5 ? -254.0f : (float)i + 0.5f; /* halves */
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 0 ? 127.0f : (float)(i % 8) - 3.5f;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 31 ? -127.0f : (float)(i - 16) + 0.5f;
    /* a NaN in each of the 32 places */
    for (int p = 0; p < 32; p++)
        if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == p ? NAN : gauss();
    /* a NaN at p and the block's largest magnitude at q: which of them the
     * vmaxps tree keeps depends on both places */
    for (int p = 0; p < 32; p++)
        for (int q = 0; q < 32; q++)
            if (q != p && (b = NEWB()))
                for (int i = 0; i < 32; i++)
                    b[i] = i == p ? NAN : i == q ? (q & 1 ? -100.0f : 100.0f) : gauss();
    /* a NaN with a payload and a negative NaN */
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 9 ? bitsf(0x7fa12345u) : gauss();
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 17 ? bitsf(0xffc00001u) : gauss();
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = (i == 3 || i == 12) ? NAN : gauss();
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = NAN;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 7 ? INFINITY : gauss();
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 7 ? -INFINITY : (i == 2 ? 0.0f : gauss());
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 1 ? 1e-45f : 0.0f;   /* id overflows */
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = bitsf(0x00000001u + (uint32_t)i * 3);
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 4 ? 3.0e38f : gauss() * 1e37f;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i % 3 ? -3.4e38f : 3.4e38f;
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 0 ? 65504.0f * 127.0f : gauss();
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 0 ? 1e-6f : gauss() * 1e-7f; /* d subnormal f16 */
    if ((b = NEWB())) for (int i = 0; i < 32; i++) b[i] = i == 0 ? 7.62939453e-6f * 127.0f : 1e-7f;
#undef NEWB
    return nb;
}

static void check_quantize(void)
{
    const struct ggml_type_traits_cpu *tr = cpu.traits_cpu(GGML_TYPE_Q8_0);
    enum { MAXB = 4096 };
    float *x = malloc(MAXB * 32 * sizeof(float));
    uint8_t *a = malloc(MAXB * Q8_0_BYTES), *b = malloc(MAXB * Q8_0_BYTES);
    char name[96], err[200];
    /* edge blocks, one call */
    size_t ne = edge_blocks(x, MAXB);
    snprintf(name, sizeof name, "q8_0 quantize edge blocks (%zu) %s", ne, mode_name());
    if (q8_0_quantize(x, ne * 32, a, ne * Q8_0_BYTES, err, sizeof err) != 0) {
        failed++;
        printf("FAIL %s: %s\n", name, err);
    } else {
        tr->from_float(x, b, (int64_t)(ne * 32));
        verdict(name, cmp_bytes(name, a, b, ne * Q8_0_BYTES), (long)(ne * Q8_0_BYTES));
    }
    /* the same blocks starting 1..7 blocks later: the quantizer takes its
     * scales eight blocks at a time, so each edge block meets every place in
     * a group of eight and the one-block tail */
    for (size_t sh = 1; sh < 8 && sh < ne; sh++) {
        snprintf(name, sizeof name, "q8_0 quantize edge blocks from %zu (%zu) %s", sh, ne - sh, mode_name());
        q8_0_quantize(x + 32 * sh, (ne - sh) * 32, a, (ne - sh) * Q8_0_BYTES, err, sizeof err);
        tr->from_float(x + 32 * sh, b, (int64_t)((ne - sh) * 32));
        verdict(name, cmp_bytes(name, a, b, (ne - sh) * Q8_0_BYTES), (long)((ne - sh) * Q8_0_BYTES));
    }
    /* random rows of several lengths and scales */
    size_t lens[] = {1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 33, 128, 384, 4096};
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
        size_t nb = lens[li];
        for (size_t i = 0; i < nb; i++)
            fill_floats(x + 32 * i, 32);
        snprintf(name, sizeof name, "q8_0 quantize random %zu blocks %s", nb, mode_name());
        q8_0_quantize(x, nb * 32, a, nb * Q8_0_BYTES, err, sizeof err);
        tr->from_float(x, b, (int64_t)(nb * 32));
        verdict(name, cmp_bytes(name, a, b, nb * Q8_0_BYTES), (long)(nb * Q8_0_BYTES));
    }
    /* values exactly on .5 after scaling (ties to even): amax 127 so id = 1 */
    for (size_t i = 0; i < 64; i++)
        for (int j = 0; j < 32; j++)
            x[32 * i + j] = j == 0 ? 127.0f : (float)((int)(next64() % 253) - 126) + 0.5f * (float)(next64() & 1);
    snprintf(name, sizeof name, "q8_0 quantize ties %s", mode_name());
    q8_0_quantize(x, 64 * 32, a, 64 * Q8_0_BYTES, err, sizeof err);
    tr->from_float(x, b, 64 * 32);
    verdict(name, cmp_bytes(name, a, b, 64 * Q8_0_BYTES), 64 * Q8_0_BYTES);
    free(x);
    free(a);
    free(b);
}

static void make_hostile_act(uint8_t *a, size_t nblocks);
static void sprinkle_special_scales(uint8_t *blocks, size_t nblocks, size_t bytes);

/* raw 0: ggml-quantized weights and activations; 1: raw bytes (int8 incl.
 * -128); 2: raw weights against hostile activations (a quarter -128) with
 * fp16 specials among both sides' scales: every single-row kernel
 * (q8_0/q1_0/q2_0_vec_dot call their own one-row kernels directly). */
static void check_vec_dot(const Kind *t)
{
    const struct ggml_type_traits_cpu *tr = cpu.traits_cpu(t->type);
    const struct ggml_type_traits_cpu *q8 = cpu.traits_cpu(GGML_TYPE_Q8_0);
    /* row lengths in weight blocks, from one block to thousands */
    size_t lens[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129, 255, 1000, 3071};
    for (int raw = 0; raw < 3; raw++) {
        for (size_t li = 0; li < sizeof lens / sizeof *lens; li++) {
            size_t nb = lens[li], k = nb * t->blk;
            if (t->type == GGML_TYPE_Q8_0 && nb > 2000)
                nb = 4 * nb, k = nb * t->blk;
            size_t qb = k / 32;
            uint8_t *w = malloc(nb * t->bytes), *act = malloc(qb * Q8_0_BYTES);
            float *x = malloc(k * sizeof(float));
            long bad = 0;
            int reps = nb < 100 ? 6 : 2;
            for (int rep = 0; rep < reps; rep++) {
                if (raw == 2) {
                    make_raw(w, nb, t->bytes);
                    make_hostile_act(act, qb);
                    sprinkle_special_scales(w, nb, t->bytes);
                    sprinkle_special_scales(act, qb, Q8_0_BYTES);
                } else if (raw) {
                    make_raw(w, nb, t->bytes);
                    make_raw(act, qb, Q8_0_BYTES); /* int8 incl. -128 */
                } else {
                    make_weights(t, w, 1, k);
                    fill_floats(x, k);
                    q8->from_float(x, act, (int64_t)k);
                }
                float ours = t->vec_dot(w, act, nb), want = 0;
                tr->vec_dot((int)k, &want, 0, w, 0, act, 0, 1);
                char name[96];
                snprintf(name, sizeof name, "%s vec_dot k=%zu", t->name, k);
                bad += cmp_f32(name, &ours, &want, 1);
            }
            char name[96];
            snprintf(name, sizeof name, "%s vec_dot %s k=%zu x%d %s", t->name,
                     raw == 2 ? "hostile(-128)+special scales" : raw ? "raw" : "quantized",
                     k, reps, mode_name());
            verdict(name, bad, reps);
            free(w);
            free(act);
            free(x);
        }
    }
}

/* Whole products: ggml_mul_mat in a graph vs ours; nthreads on both sides. */
static void check_mul_mat(const Kind *t, ggml_backend_t be, par_pool *pool, int nthreads)
{
    size_t rows_list[] = {1, 3, 4, 5, 8, 16, 17, 33, 64, 67};
    size_t cols_list[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13};
    /* 133: rows longer than 16,384 values, past the one-column kernels'
     * prepared-activation limit (a few shapes only) */
    size_t kb_list[] = {1, 3, 8, 133};
    cpu.set_n_threads(be, nthreads);
    for (size_t ki = 0; ki < sizeof kb_list / sizeof *kb_list; ki++) {
        size_t k = kb_list[ki] * (t->blk < 128 ? 128 : t->blk);
        for (size_t ri = 0; ri < sizeof rows_list / sizeof *rows_list; ri++) {
            for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++) {
                size_t rows = rows_list[ri], cols = cols_list[ci];
                if (kb_list[ki] > 8 && !((rows == 5 || rows == 17 || rows == 33) && (cols == 1 || cols == 2 || cols == 5)))
                    continue;
                size_t wbytes = rows * (k / t->blk) * t->bytes;
                size_t mem = wbytes + (k * cols + rows * cols) * sizeof(float) + 3 * ggml_tensor_overhead() +
                             ggml_graph_overhead() + 65536; /* alignment slack */
                struct ggml_init_params ip = {mem, NULL, false};
                struct ggml_context *ctx = ggml_init(ip);
                struct ggml_tensor *W = ggml_new_tensor_2d(ctx, t->type, (int64_t)k, (int64_t)rows);
                struct ggml_tensor *X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, (int64_t)k, (int64_t)cols);
                make_weights(t, W->data, rows, k);
                for (size_t c = 0; c < cols; c++)
                    fill_floats((float *)X->data + c * k, k);
                struct ggml_tensor *Y = ggml_mul_mat(ctx, W, X);
                struct ggml_cgraph *g = ggml_new_graph(ctx);
                ggml_build_forward_expand(g, Y);
                char name[128], err[200];
                snprintf(name, sizeof name, "%s mul_mat %zux%zu cols=%zu threads=%d %s", t->name, rows, k,
                         cols, nthreads, mode_name());
                if (ggml_backend_graph_compute(be, g) != GGML_STATUS_SUCCESS) {
                    failed++;
                    printf("FAIL %s: ggml graph compute failed\n", name);
                    ggml_free(ctx);
                    continue;
                }
                size_t arow = q8_0_row_bytes(k);
                uint8_t *act = malloc(arow * cols);
                float *y = malloc(rows * cols * sizeof(float));
                int rc = 0;
                for (size_t c = 0; c < cols && rc == 0; c++)
                    rc = q8_0_quantize((float *)X->data + c * k, k, act + c * arow, arow, err, sizeof err);
                if (rc == 0)
                    rc = t->matmul(pool, W->data, wbytes, rows, k, act, arow * cols, cols, y, rows * cols, err,
                                   sizeof err);
                if (rc != 0) {
                    failed++;
                    printf("FAIL %s: %s\n", name, err);
                } else {
                    verdict(name, cmp_f32(name, y, (const float *)Y->data, rows * cols), (long)(rows * cols));
                }
                free(act);
                free(y);
                ggml_free(ctx);
            }
        }
    }
}

/* Hostile q8_0 activations: random scales, and int8 quants of which about a
 * quarter are -128 (the value whose int8 negation wraps; our quantizer never
 * makes it, a raw buffer can), the rest random. */
static void make_hostile_act(uint8_t *a, size_t nblocks)
{
    make_raw(a, nblocks, Q8_0_BYTES);
    for (size_t b = 0; b < nblocks; b++)
        for (size_t i = 2; i < Q8_0_BYTES; i++)
            if (next64() % 4 == 0)
                a[b * Q8_0_BYTES + i] = 0x80;
}

/* Overwrites about one block scale in eight with an fp16 special: +-0,
 * +-inf, the largest and smallest (subnormal) halves; scales are the first
 * two bytes of each block. inf * 0 and inf - inf make ggml's default NaN in
 * any operand order. NaN scales with payloads are left out: which of two
 * different NaNs an element ends with depends on the operand order of every
 * instruction, and neither our AVX2 nor our portable Q1_0/Q2_0 products
 * (before or after the row-group kernels) reproduce ggml's choice there. */
static void sprinkle_special_scales(uint8_t *blocks, size_t nblocks, size_t bytes)
{
    static const uint16_t sp[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7bff, 0xfbff, 0x0001, 0x83ff, 0x0400};
    for (size_t b = 0; b < nblocks; b++) {
        if (next64() % 8 != 0)
            continue;
        uint16_t v = sp[next64() % (sizeof sp / sizeof *sp)];
        blocks[b * bytes] = (uint8_t)v;
        blocks[b * bytes + 1] = (uint8_t)(v >> 8);
    }
}

/* Products of raw weights (random bits, codes and quants, incl. Q2_0 code 3
 * and Q8_0 -128) against raw or hostile activations, for every row-group
 * path of the one-column kernels (groups of 4 rows, then 2, then 1: row
 * counts 1..9 and odd ones past a chunk) and 1..6 columns, on one thread and
 * on the 2-thread pool; a third pass puts fp16 specials (zeros, infinities,
 * extremes) among the weight and activation scales. The reference is ggml's own vec_dot per element,
 * which is what its mul_mat runs for one column (and, for Q1_0/Q2_0, for any
 * number of columns; Q8_0's tinyBLAS gives every element vec_dot's chain). */
static void check_products_raw(const Kind *t, par_pool *pool, int nthreads)
{
    const struct ggml_type_traits_cpu *tr = cpu.traits_cpu(t->type);
    size_t rows_list[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 31, 33, 67};
    size_t nb_list[] = {1, 2, 3, 5, 16, 48}; /* weight blocks per row */
    for (int hostile = 0; hostile < 3; hostile++) {
        for (size_t ni = 0; ni < sizeof nb_list / sizeof *nb_list; ni++) {
            size_t nb = nb_list[ni], k = nb * t->blk, qb = k / 32, wrow = nb * t->bytes;
            size_t arow = qb * Q8_0_BYTES;
            for (size_t ri = 0; ri < sizeof rows_list / sizeof *rows_list; ri++) {
                size_t rows = rows_list[ri], maxc = 6;
                uint8_t *w = malloc(rows * wrow), *act = malloc(maxc * arow);
                float *y = malloc(rows * maxc * sizeof(float)), *want = malloc(rows * maxc * sizeof(float));
                make_raw(w, rows * nb, t->bytes);
                if (hostile == 1)
                    make_hostile_act(act, maxc * qb);
                else
                    make_raw(act, maxc * qb, Q8_0_BYTES);
                if (hostile == 2) {
                    sprinkle_special_scales(w, rows * nb, t->bytes);
                    sprinkle_special_scales(act, maxc * qb, Q8_0_BYTES);
                }
                long bad = 0, total = 0;
                char err[200], name[128];
                snprintf(name, sizeof name, "%s raw products %zux%zu cols=1..6 %s threads=%d %s", t->name, rows,
                         k, hostile == 1 ? "hostile(-128)" : hostile == 2 ? "special scales" : "raw", nthreads, mode_name());
                for (size_t cols = 1; cols <= maxc; cols++) {
                    for (size_t c = 0; c < cols; c++)
                        for (size_t r = 0; r < rows; r++)
                            tr->vec_dot((int)k, &want[c * rows + r], 0, w + r * wrow, 0, act + c * arow, 0, 1);
                    if (t->matmul(pool, w, rows * wrow, rows, k, act, cols * arow, cols, y, rows * cols, err,
                                  sizeof err) != 0) {
                        printf("  %s: %s\n", name, err);
                        bad++;
                        continue;
                    }
                    bad += cmp_f32(name, y, want, rows * cols);
                    total += (long)(rows * cols);
                }
                verdict(name, bad, total);
                free(w);
                free(act);
                free(y);
                free(want);
            }
        }
    }
}

/* Refusals: shapes the kernels do not support and lying lengths. */
static void check_refusals(void)
{
    uint8_t buf[1024] = {0};
    float y[64];
    char err[200];
    struct { const char *name; int rc; } cases[] = {
        {"Q1_0 k not a multiple of 128", q1_0_matmul(NULL, buf, sizeof buf, 1, 64, buf, sizeof buf, 1, y, 64, err, sizeof err)},
        {"Q2_0 k not a multiple of 64", q2_0_matmul(NULL, buf, sizeof buf, 1, 96, buf, sizeof buf, 1, y, 64, err, sizeof err)},
        {"Q8_0 short weights", q8_0_matmul(NULL, buf, 33, 1, 32, buf, sizeof buf, 1, y, 64, err, sizeof err)},
        {"Q1_0 short activations", q1_0_matmul(NULL, buf, sizeof buf, 1, 128, buf, 135, 1, y, 64, err, sizeof err)},
        {"Q2_0 short output", q2_0_matmul(NULL, buf, sizeof buf, 4, 64, buf, sizeof buf, 2, y, 7, err, sizeof err)},
        {"q8_0 quantize 31 values", q8_0_quantize((const float *)buf, 31, buf, sizeof buf, err, sizeof err)},
        {"Q8_0 dequant short row", q8_0_dequantize(buf, 33, 32, y, err, sizeof err)},
        {"Q2_0 huge product", q2_0_matmul(NULL, buf, sizeof buf, SIZE_MAX / 2, 64, buf, sizeof buf, 4, y, 64, err, sizeof err)},
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

static int run_check(void)
{
    ggml_backend_t be = cpu.backend_init();
    if (!be) {
        fprintf(stderr, "ggml_backend_cpu_init failed\n");
        return 2;
    }
    char err[200];
    par_pool *pool2 = par_create(2, err, sizeof err);
    if (!pool2) {
        fprintf(stderr, "par_create: %s\n", err);
        return 2;
    }
    for (int simd = 1; simd >= 0; simd--) {
        q8_set_simd(simd);
        if (simd && !q8_simd()) {
            skipped++;
            printf("SKIP avx2 kernels: this CPU lacks AVX2/FMA/F16C\n");
            continue;
        }
        check_quantize();
        for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
            check_dequant(&kinds[i]);
            check_vec_dot(&kinds[i]);
            check_mul_mat(&kinds[i], be, NULL, 1);
            check_mul_mat(&kinds[i], be, pool2, 2);
            check_products_raw(&kinds[i], NULL, 1);
            check_products_raw(&kinds[i], pool2, 2);
        }
    }
    q8_set_simd(1);
    check_refusals();
    par_destroy(pool2);
    ggml_backend_free(be);
    printf("%ld passed, %ld failed, %ld skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}

/* ---------------------------------------------------------------- bench */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    const Kind *t;
    const uint8_t *w, *act;
    size_t rows, k;
    float *y;
    const struct ggml_type_traits_cpu *tr;
} BenchVD;

/* ggml's side of a GEMV through its exported vec_dot, row by row (what
 * mul_mat's one-column path does per row). */
static void ggml_gemv(const BenchVD *b)
{
    size_t wrow = b->k / b->t->blk * b->t->bytes;
    for (size_t r = 0; r < b->rows; r++)
        b->tr->vec_dot((int)b->k, &b->y[r], 0, b->w + r * wrow, 0, b->act, 0, 1);
}

static void ours_gemv(const BenchVD *b)
{
    size_t wrow = b->k / b->t->blk * b->t->bytes;
    for (size_t r = 0; r < b->rows; r++)
        b->y[r] = b->t->vec_dot(b->w + r * wrow, b->act, b->k / b->t->blk);
}

/* Runs the two sides alternately `runs` times; prints min and median in ns
 * per weight block. */
static void report(const char *what, const char *type, double *ours, double *theirs, int runs, double blocks)
{
    /* the median of the per-run ratios: each run times both sides back to
     * back, so a burst of other load slows both and cancels out more than
     * in the ratio of separate minima or medians */
    double ratio[99];
    for (int r = 0; r < runs; r++)
        ratio[r] = theirs[r] / ours[r];
    qsort(ratio, (size_t)runs, sizeof(double), cmp_d);
    qsort(ours, (size_t)runs, sizeof(double), cmp_d);
    qsort(theirs, (size_t)runs, sizeof(double), cmp_d);
    double om = ours[0] / blocks, od = ours[runs / 2] / blocks;
    double gm = theirs[0] / blocks, gd = theirs[runs / 2] / blocks;
    printf("%-5s %-34s ours %7.3f / %7.3f  ggml %7.3f / %7.3f ns/block  speedup %.2fx (min) %.2fx (median)"
           " %.2fx (paired)\n", type, what, om, od, gm, gd, gm / om, gd / od, ratio[runs / 2]);
}

static int run_bench(int argc, char **argv)
{
    size_t rows = 4096, k = 4096;
    int runs = 9;
    if (argc > 2)
        rows = (size_t)atol(argv[2]);
    if (argc > 3)
        k = (size_t)atol(argv[3]);
    if (argc > 4)
        runs = atoi(argv[4]);
    if (runs < 1 || runs > 99)
        runs = 9;
    const char *only = argc > 5 ? argv[5] : NULL; /* one type ("Q2_0"), for quick reruns */
    ggml_backend_t be = cpu.backend_init();
    char err[200];
    par_pool *pool2 = par_create(2, err, sizeof err);
    if (!be || !pool2) {
        fprintf(stderr, "setup failed\n");
        return 2;
    }
    printf("bench: W %zu x %zu, %d alternating runs, min / median\n", rows, k, runs);
    double ours[99], theirs[99];
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        const Kind *t = &kinds[i];
        if (only && strcmp(only, t->name) != 0)
            continue;
        if (k % t->blk != 0) {
            printf("%-5s skipped: K %zu is not a multiple of its %zu-value blocks\n", t->name, k, t->blk);
            continue;
        }
        size_t wrow = k / t->blk * t->bytes, arow = q8_0_row_bytes(k), ncol = 32;
        uint8_t *w = malloc(rows * wrow), *act = malloc(arow * ncol);
        float *x = malloc(k * ncol * sizeof(float)), *y = malloc(rows * ncol * sizeof(float));
        make_weights(t, w, rows, k);
        for (size_t c = 0; c < ncol; c++)
            fill_floats(x + c * k, k);
        const struct ggml_type_traits_cpu *q8 = cpu.traits_cpu(GGML_TYPE_Q8_0);
        q8->from_float(x, act, (int64_t)(k * ncol));
        double blocks = (double)rows * (double)(k / t->blk);

        /* 1. activation quantizer (once, for Q8_0's row only): ns per 32-value block */
        if (i == 0) {
            uint8_t *qa = malloc(arow * ncol);
            for (int r = 0; r < runs; r++) {
                double t0 = now_ns();
                q8_0_quantize_blocks(x, qa, k * ncol / 32);
                double t1 = now_ns();
                q8->from_float(x, qa, (int64_t)(k * ncol));
                double t2 = now_ns();
                ours[r] = t1 - t0;
                theirs[r] = t2 - t1;
            }
            report("quantize q8_0 (per 32 values)", "q8_0", ours, theirs, runs, (double)(k * ncol / 32));
            free(qa);
        }
        /* one-thread timings with our second worker asleep (it spins
         * after the previous type's two-thread products otherwise) */
        par_pause(pool2);

        /* 2. GEMV through vec_dot, 1 thread */
        BenchVD bv = {t, w, act, rows, k, y, cpu.traits_cpu(t->type)};
        for (int r = 0; r < runs; r++) {
            double t0 = now_ns();
            ours_gemv(&bv);
            double t1 = now_ns();
            ggml_gemv(&bv);
            double t2 = now_ns();
            ours[r] = t1 - t0;
            theirs[r] = t2 - t1;
        }
        report("vec_dot GEMV 1 thread", t->name, ours, theirs, runs, blocks);

        /* 3. whole products: ours (act already quantized + matmul incl. our
         * quantize) vs ggml_mul_mat graph (which quantizes too), 1 and 2 threads,
         * 1 column (decode) and 32 columns (prefill). */
        size_t col_cases[] = {1, 32};
        for (int nt = 1; nt <= 2; nt++) {
            cpu.set_n_threads(be, nt);
            par_pause(pool2);
            /* ggml on a persistent pool, as llama-server runs it (without
             * one, every compute starts and joins its threads) */
            struct ggml_threadpool_params tpp = ggml_threadpool_params_default(nt);
            struct ggml_threadpool *tp = cpu.tp_new(&tpp);
            if (!tp) {
                fprintf(stderr, "ggml_threadpool_new failed\n");
                return 2;
            }
            cpu.set_threadpool(be, tp);
            for (size_t cc = 0; cc < 2; cc++) {
                size_t cols = col_cases[cc];
                size_t mem = rows * wrow + (k * cols + rows * cols) * sizeof(float) + 3 * ggml_tensor_overhead() +
                             ggml_graph_overhead() + 65536; /* alignment slack */
                struct ggml_init_params ip = {mem, NULL, false};
                struct ggml_context *ctx = ggml_init(ip);
                struct ggml_tensor *W = ggml_new_tensor_2d(ctx, t->type, (int64_t)k, (int64_t)rows);
                struct ggml_tensor *X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, (int64_t)k, (int64_t)cols);
                memcpy(W->data, w, rows * wrow);
                memcpy(X->data, x, k * cols * sizeof(float));
                struct ggml_tensor *Y = ggml_mul_mat(ctx, W, X);
                struct ggml_cgraph *g = ggml_new_graph(ctx);
                ggml_build_forward_expand(g, Y);
                uint8_t *qa = malloc(arow * cols);
                /* in blocks (BENCH_WARM untimed + BENCH_BLOCK timed runs a
                 * side), each side's pool alone and awake: kit_bench.h */
                for (int r0 = 0; r0 < runs; r0 += BENCH_BLOCK) {
                    int nr = runs - r0 < BENCH_BLOCK ? runs - r0 : BENCH_BLOCK;
                    cpu.tp_pause(tp);
                    if (nt > 1)
                        bench_wake(pool2);
                    for (int r = -BENCH_WARM; r < nr; r++) {
                        double t0 = now_ns();
                        q8_0_quantize_blocks(x, qa, k * cols / 32);
                        t->matmul(nt == 1 ? NULL : pool2, w, rows * wrow, rows, k, qa, arow * cols, cols, y,
                                  rows * cols, err, sizeof err);
                        if (r >= 0)
                            ours[r0 + r] = now_ns() - t0;
                    }
                    par_pause(pool2);
                    cpu.tp_resume(tp);
                    for (int r = -BENCH_WARM; r < nr; r++) {
                        double t0 = now_ns();
                        ggml_backend_graph_compute(be, g);
                        if (r >= 0)
                            theirs[r0 + r] = now_ns() - t0;
                    }
                }
                long bad = cmp_f32("bench product", y, (const float *)Y->data, rows * cols);
                char what[96];
                snprintf(what, sizeof what, "mul_mat %zu col%s %d thread%s%s", cols, cols > 1 ? "s" : "", nt,
                         nt > 1 ? "s" : "", bad ? " (BITS DIFFER)" : "");
                report(what, t->name, ours, theirs, runs, blocks * (double)cols);
                free(qa);
                ggml_free(ctx);
            }
            cpu.set_threadpool(be, NULL);
            cpu.tp_free(tp);
        }
        free(w);
        free(act);
        free(x);
        free(y);
    }
    par_destroy(pool2);
    ggml_backend_free(be);
    return 0;
}

int main(int argc, char **argv)
{
    if (load_cpu() != 0)
        return 2;
    if (argc > 1 && strcmp(argv[1], "bench") == 0)
        return run_bench(argc, argv);
    if (argc > 1 && strcmp(argv[1], "check") != 0) {
        fprintf(stderr, "usage: sid-run kit_kernels_quant [check | bench [ROWS [K [RUNS [TYPE]]]]]\n");
        return 2;
    }
    return run_check();
}
