/*
 * kit_kernels_f16.c -- the in-process oracle (and benchmark) for src/ops/f16.c
 * and src/base/par.c: the shipped ggml (llama.cpp b11669, libggml-base.so and the
 * CPU backend libggml-cpu-haswell.so) and bankml's kernels compute the same
 * products on the same bytes, and every output element's bits are compared.
 *
 * Why in process: a product one ulp off changes a token only now and then;
 * comparing bits on the first element shows it at once, and the shape rules
 * (llamafile sgemm or vec_dot) are only proven by running both sides on both
 * sides of every rule.
 *
 * What is checked (one count per case):
 *   - fp16 -> fp32 over all 65,536 values, both our paths, against
 *     ggml_cpu_fp16_to_fp32; fp32 -> fp16 on ~17 million values (a stride
 *     over all floats plus every rounding boundary) against
 *     ggml_cpu_fp32_to_fp16; bf16 both ways.
 *   - ggml_vec_dot_f32/_f16/_bf16 against f16_vec_dot, row lengths 1..80,
 *     then up to 11008 (tails included), signed zeros.
 *   - ggml_get_rows for the three types.
 *   - ggml_mul_mat graphs, F32/F16/BF16 weights, 1 to 13 columns, rows
 *     multiple of 4 or not, k multiple of 8 or not, from 16 to 2,048; ggml
 *     with 1 and 2 threads; ours with the SIMD kernels on 1 and 2 pool
 *     threads, and the portable kernels, plus the multi-matrix call.
 *
 * Build and run (the kit's libraries need a newer glibc than this system's,
 * so their undefined symbols are left to the kit's loader, which sid-run
 * uses; the CPU backend is dlopen'ed from $GGML_BACKEND_PATH, set by sid-run):
 *   K=/root/.cache/bankml-oracle/root/usr
 *   gcc -std=gnu11 -O2 -Isrc -I$K/include -o /tmp/kit_kernels_f16 \
 *       testing/kit_kernels_f16.c src/ops/f16.c src/base/par.c \
 *       -L$K/lib/x86_64-linux-gnu -lggml-base -Wl,--allow-shlib-undefined \
 *       -ldl -lm -pthread
 *   /root/.cache/bankml-oracle/bin/sid-run /tmp/kit_kernels_f16 [--quick]
 *   /root/.cache/bankml-oracle/bin/sid-run /tmp/kit_kernels_f16 --bench
 *
 * Output: one line per mismatch, then "N passed, N failed, N skipped".
 * Exit 0 when nothing failed, 1 on a mismatch, 2 when the kit cannot be used.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml.h"
#include "ggml-cpu.h"

#include "ops/f16.h"
#include "kit_bench.h"
#include "base/par.h"

/* ---- the CPU backend's functions, by dlsym ---- */

typedef void (*vec_dot_fn)(int n, float *s, size_t bs, const void *x,
                           size_t bx, const void *y, size_t by, int nrc);
static struct {
    void *lib;
    void (*cpu_init)(void);
    enum ggml_status (*compute_with_ctx)(struct ggml_context *,
                                         struct ggml_cgraph *, int);
    struct ggml_cplan (*plan)(const struct ggml_cgraph *, int,
                              struct ggml_threadpool *);
    enum ggml_status (*compute)(struct ggml_cgraph *, struct ggml_cplan *);
    struct ggml_threadpool *(*tp_new)(struct ggml_threadpool_params *);
    void (*tp_free)(struct ggml_threadpool *);
    void (*tp_pause)(struct ggml_threadpool *);
    void (*tp_resume)(struct ggml_threadpool *);
    vec_dot_fn dot_f32, dot_f16, dot_bf16;
    void (*h2f)(const ggml_fp16_t *, float *, int64_t);
    void (*f2h)(const float *, ggml_fp16_t *, int64_t);
    void (*f2b)(const float *, ggml_bf16_t *, int64_t);
    void (*b2f)(const ggml_bf16_t *, float *, int64_t);
    int (*has_llamafile)(void);
} cpu;

static int load_cpu(void)
{
    const char *path = getenv("GGML_BACKEND_PATH");
    if (!path || !*path) {
        fprintf(stderr, "GGML_BACKEND_PATH is not set (run under sid-run)\n");
        return -1;
    }
    cpu.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!cpu.lib) {
        fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
        return -1;
    }
    struct { void **p; const char *name; } syms[] = {
        { (void **)&cpu.cpu_init, "ggml_cpu_init" },
        { (void **)&cpu.compute_with_ctx, "ggml_graph_compute_with_ctx" },
        { (void **)&cpu.plan, "ggml_graph_plan" },
        { (void **)&cpu.compute, "ggml_graph_compute" },
        { (void **)&cpu.tp_new, "ggml_threadpool_new" },
        { (void **)&cpu.tp_free, "ggml_threadpool_free" },
        { (void **)&cpu.tp_pause, "ggml_threadpool_pause" },
        { (void **)&cpu.tp_resume, "ggml_threadpool_resume" },
        { (void **)&cpu.dot_f32, "ggml_vec_dot_f32" },
        { (void **)&cpu.dot_f16, "ggml_vec_dot_f16" },
        { (void **)&cpu.dot_bf16, "ggml_vec_dot_bf16" },
        { (void **)&cpu.h2f, "ggml_cpu_fp16_to_fp32" },
        { (void **)&cpu.f2h, "ggml_cpu_fp32_to_fp16" },
        { (void **)&cpu.f2b, "ggml_cpu_fp32_to_bf16" },
        { (void **)&cpu.b2f, "ggml_cpu_bf16_to_fp32" },
        { (void **)&cpu.has_llamafile, "ggml_cpu_has_llamafile" },
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].p = dlsym(cpu.lib, syms[i].name);
        if (!*syms[i].p) {
            fprintf(stderr, "%s: no symbol %s\n", path, syms[i].name);
            return -1;
        }
    }
    cpu.cpu_init();
    /* follow the library's own build: llamafile's tinyBLAS or vec_dot */
    f16_set_llamafile(cpu.has_llamafile());
    return 0;
}

static void quiet_log(enum ggml_log_level level, const char *text, void *ud)
{
    (void)ud;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

/* ---- counting ---- */

static int n_pass, n_fail, n_skip;

static void verdict(int ok, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void verdict(int ok, const char *fmt, ...)
{
    if (ok) { n_pass++; return; }
    n_fail++;
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Index of the first differing float (bitwise), or -1. */
static long first_diff(const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fbits(a[i]) != fbits(b[i])) return (long)i;
    return -1;
}

/* ---- data ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void)
{
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return rng;
}
/* Roughly symmetric values spread over several binades, as activations and
 * weights are; never NaN or inf. */
static float rnd(float scale)
{
    double u = (double)(next_u64() >> 11) / 9007199254740992.0;   /* [0,1) */
    double v = (double)(next_u64() >> 11) / 9007199254740992.0;
    double g = (u + v - 1.0) * 2.0;                               /* (-2,2) */
    int sh = (int)(next_u64() % 6);
    return (float)(g * scale / (double)(1 << sh));
}

static size_t esize(int t) { return t == F16_T_F32 ? 4 : 2; }
static const char *tname(int t)
{
    return t == F16_T_F32 ? "f32" : t == F16_T_F16 ? "f16" : "bf16";
}

/* Fills a weight buffer of n elements of type t. */
static void fill_w(int t, void *buf, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) {
        float f = rnd(scale);
        if (t == F16_T_F32) ((float *)buf)[i] = f;
        else if (t == F16_T_F16) ((uint16_t *)buf)[i] = f32_to_f16(f);
        else ((uint16_t *)buf)[i] = f32_to_bf16(f);
    }
}

/* ---- conversions ---- */

static void test_conversions(int quick)
{
    static uint16_t h[65536];
    static float a[65536], b[65536], c[65536];
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    cpu.h2f(h, a, 65536);
    f16_force_portable(0);
    f16_to_f32_row(h, b, 65536);
    for (int i = 0; i < 65536; i++) c[i] = f16_to_f32(h[i]);
    long d = first_diff(a, b, 65536);
    verdict(d < 0, "fp16->fp32 row (simd=%d): value 0x%04lx: ggml %08x ours %08x",
            f16_simd_active(), d, d < 0 ? 0 : fbits(a[d]), d < 0 ? 0 : fbits(b[d]));
    d = first_diff(a, c, 65536);
    verdict(d < 0, "fp16->fp32 scalar portable: value 0x%04lx: ggml %08x ours %08x",
            d, d < 0 ? 0 : fbits(a[d]), d < 0 ? 0 : fbits(c[d]));
    cpu.b2f((const ggml_bf16_t *)h, a, 65536);
    bf16_to_f32_row(h, b, 65536);
    d = first_diff(a, b, 65536);
    verdict(d < 0, "bf16->fp32: value 0x%04lx", d);

    /* fp32 -> fp16 / bf16: a stride over all 2^32 patterns, plus for every
     * half the float just below, at and above the midpoint to the next. */
    size_t stride = quick ? 65521 : 257;
    size_t nv = ((size_t)1 << 32) / stride + 1 + 65536 * 4;
    float *x = malloc(nv * sizeof *x);
    uint16_t *g = malloc(nv * 2), *o = malloc(nv * 2), *p = malloc(nv * 2);
    if (!x || !g || !o || !p) { printf("out of memory\n"); exit(2); }
    size_t m = 0;
    for (uint64_t u = 0; u < ((uint64_t)1 << 32); u += stride) x[m++] = bitsf((uint32_t)u);
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t lo = fbits(f16_to_f32((uint16_t)i));
        if ((i & 0x7c00) == 0x7c00) { x[m++] = bitsf(lo); continue; }
        uint32_t hi = fbits(f16_to_f32((uint16_t)(i + 1)));
        uint32_t mid = fbits((bitsf(lo) + bitsf(hi)) * 0.5f);  /* exact */
        x[m++] = bitsf(mid - 1); x[m++] = bitsf(mid); x[m++] = bitsf(mid + 1);
    }
    cpu.f2h(x, (ggml_fp16_t *)g, (int64_t)m);
    f32_to_f16_row(x, o, m);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < m; i++) if (g[i] != o[i] && !bad++) first = i;
    verdict(!bad, "fp32->fp16 row simd: %zu of %zu differ, first %08x: ggml %04x ours %04x",
            bad, m, fbits(x[first]), g[first], o[first]);
    for (size_t i = 0; i < m; i++) p[i] = f32_to_f16(x[i]);
    bad = 0;
    for (size_t i = 0; i < m; i++) if (g[i] != p[i] && !bad++) first = i;
    verdict(!bad, "fp32->fp16 scalar portable: %zu of %zu differ, first %08x: ggml %04x ours %04x",
            bad, m, fbits(x[first]), g[first], p[first]);
    cpu.f2b(x, (ggml_bf16_t *)g, (int64_t)m);
    f32_to_bf16_row(x, o, m);
    bad = 0;
    for (size_t i = 0; i < m; i++) if (g[i] != o[i] && !bad++) first = i;
    verdict(!bad, "fp32->bf16: %zu of %zu differ, first %08x: ggml %04x ours %04x",
            bad, m, fbits(x[first]), g[first], o[first]);
    free(x); free(g); free(o); free(p);
}

/* ---- vec_dot ---- */

static float ggml_dot(int t, size_t k, const void *w, const void *xq)
{
    float s = 0;
    vec_dot_fn f = t == F16_T_F32 ? cpu.dot_f32 : t == F16_T_F16 ? cpu.dot_f16 : cpu.dot_bf16;
    f((int)k, &s, 0, w, 0, xq, 0, 1);
    return s;
}

/* x as the vec_dot_type's bytes (xq) and rounded back to f32 (xr). */
static void act_for(int t, const float *x, size_t n, void *xq, float *xr)
{
    if (t == F16_T_F32) memcpy(xq, x, n * 4);
    else if (t == F16_T_F16) cpu.f2h(x, xq, (int64_t)n);
    else cpu.f2b(x, xq, (int64_t)n);
    f16_round_act(t, x, xr, n);
}

static void test_vec_dot(void)
{
    static const size_t big[] = { 96, 127, 128, 129, 255, 256, 257, 576, 1000,
                                  1024, 1536, 2047, 2048, 2049, 4096, 5000, 11008 };
    size_t lens[80 + sizeof big / sizeof big[0]], nl = 0;
    for (size_t k = 1; k <= 80; k++) lens[nl++] = k;
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) lens[nl++] = big[i];
    size_t kmax = 11008;
    void *w = malloc(kmax * 4), *xq = malloc(kmax * 4);
    float *x = malloc(kmax * 4), *xr = malloc(kmax * 4);
    int types[3] = { F16_T_F32, F16_T_F16, F16_T_BF16 };
    for (int ti = 0; ti < 3; ti++) {
        int t = types[ti];
        for (size_t li = 0; li < nl; li++) {
            size_t k = lens[li];
            for (int rep = 0; rep < 3; rep++) {
                fill_w(t, w, k, 1.0f);
                for (size_t i = 0; i < k; i++) x[i] = rnd(4.0f);
                if (rep == 2) {     /* signed zeros: -0 weights, +x */
                    for (size_t i = 0; i < k; i++) {
                        if (t == F16_T_F32) ((float *)w)[i] = -0.0f;
                        else ((uint16_t *)w)[i] = 0x8000;
                        x[i] = fabsf(x[i]);
                    }
                }
                act_for(t, x, k, xq, xr);
                float g = ggml_dot(t, k, w, xq);
                f16_force_portable(0);
                float s = f16_vec_dot(t, w, xr, k);
                f16_force_portable(1);
                float p = f16_vec_dot(t, w, xr, k);
                f16_force_portable(0);
                verdict(fbits(g) == fbits(s) && fbits(g) == fbits(p),
                        "vec_dot %s k=%zu rep %d: ggml %08x simd %08x portable %08x",
                        tname(t), k, rep, fbits(g), fbits(s), fbits(p));
            }
        }
    }
    free(w); free(xq); free(x); free(xr);
}

/* ---- graphs ---- */

typedef struct {
    struct ggml_context *ctx;
    struct ggml_cgraph *gf;
    struct ggml_tensor *w, *x, *y;
} graph;

static int build_mul_mat(graph *g, int t, size_t rows, size_t k, size_t n)
{
    size_t bytes = rows * k * esize(t) + n * k * 4 * 2 + rows * n * 4
                   + 4 * ggml_tensor_overhead() + ggml_graph_overhead()
                   + (1 << 20);
    struct ggml_init_params ip = { bytes, NULL, false };
    g->ctx = ggml_init(ip);
    if (!g->ctx) return -1;
    g->w = ggml_new_tensor_2d(g->ctx, (enum ggml_type)t, (int64_t)k, (int64_t)rows);
    g->x = ggml_new_tensor_2d(g->ctx, GGML_TYPE_F32, (int64_t)k, (int64_t)n);
    g->y = ggml_mul_mat(g->ctx, g->w, g->x);
    g->gf = ggml_new_graph(g->ctx);
    ggml_build_forward_expand(g->gf, g->y);
    return 0;
}

static par_pool *pool1, *pool2;

/* One product shape: ggml at 1 and 2 threads, ours SIMD at 1 and 2 pool
 * threads, portable on 1, and (for n <= 6) the multi call. */
static void check_product(int t, size_t rows, size_t k, size_t n, int portable)
{
    graph g;
    if (build_mul_mat(&g, t, rows, k, n) != 0) {
        n_skip++;
        printf("SKIP %s %zux%zu n=%zu: ggml_init failed\n", tname(t), rows, k, n);
        return;
    }
    fill_w(t, g.w->data, rows * k, 1.0f);
    float *x = g.x->data;
    for (size_t i = 0; i < n * k; i++) x[i] = rnd(2.0f);
    size_t ny = rows * n;
    float *ref1 = malloc(ny * 4), *ref2 = malloc(ny * 4), *ours = malloc(ny * 4);
    float *xr = malloc(n * k * 4);
    cpu.compute_with_ctx(g.ctx, g.gf, 1);
    memcpy(ref1, g.y->data, ny * 4);
    memset(g.y->data, 0xff, ny * 4);
    cpu.compute_with_ctx(g.ctx, g.gf, 2);
    memcpy(ref2, g.y->data, ny * 4);
    long d = first_diff(ref1, ref2, ny);
    verdict(d < 0, "ggml itself %s %zux%zu n=%zu: 1 vs 2 threads differ at %ld",
            tname(t), rows, k, n, d);

    f16_matrix w = { t, g.w->data, rows, k, k * esize(t), rows * k * esize(t) };
    char err[200];
    f16_round_act(t, x, xr, n * k);
    const char *path = f16_llamafile() && f16_takes_sgemm(rows, k, n) ? "sgemm" : "vec_dot";
    struct { const char *name; par_pool *p; int port; } runs[3] = {
        { "simd 1 thread", pool1, 0 }, { "simd 2 threads", pool2, 0 },
        { "portable", pool1, 1 },
    };
    for (int r = 0; r < (portable ? 3 : 2); r++) {
        f16_force_portable(runs[r].port);
        memset(ours, 0xff, ny * 4);
        int rc = f16_mul_mat(runs[r].p, &w, xr, n, ours, err, sizeof err);
        f16_force_portable(0);
        if (rc != 0) {
            verdict(0, "mul_mat %s %zux%zu n=%zu (%s): refused: %s", tname(t),
                    rows, k, n, runs[r].name, err);
            continue;
        }
        d = first_diff(ref1, ours, ny);
        verdict(d < 0, "mul_mat %s %zux%zu n=%zu %s (%s): element %ld (row %ld col %ld) "
                "ggml %08x ours %08x", tname(t), rows, k, n, path, runs[r].name, d,
                d < 0 ? 0 : d % (long)rows, d < 0 ? 0 : d / (long)rows,
                d < 0 ? 0 : fbits(ref1[d]), d < 0 ? 0 : fbits(ours[d]));
    }
    if (n <= 6 && rows >= 4) {
        /* multi: the same matrix split in two row ranges plus itself */
        size_t h = rows / 2;
        f16_matrix ws[3] = { w, w, w };
        ws[0].rows = h;
        ws[1].data = (const char *)g.w->data + h * k * esize(t);
        ws[1].rows = rows - h;
        ws[1].size = (rows - h) * k * esize(t);
        float *y0 = malloc(h * n * 4), *y1 = malloc((rows - h) * n * 4),
              *y2 = malloc(ny * 4);
        float *ys[3] = { y0, y1, y2 };
        int rc = f16_mul_mat_multi(pool2, ws, 3, xr, n, ys, err, sizeof err);
        int ok = rc == 0 && first_diff(ref1, y2, ny) < 0;
        /* the halves are products of their own shape: compare with ours alone */
        if (ok) {
            float *s0 = malloc(h * n * 4), *s1 = malloc((rows - h) * n * 4);
            f16_mul_mat(pool1, &ws[0], xr, n, s0, err, sizeof err);
            f16_mul_mat(pool1, &ws[1], xr, n, s1, err, sizeof err);
            ok = first_diff(s0, y0, h * n) < 0 && first_diff(s1, y1, (rows - h) * n) < 0;
            free(s0); free(s1);
        }
        verdict(ok, "mul_mat_multi %s %zux%zu n=%zu: %s", tname(t), rows, k, n,
                rc ? err : "differs");
        free(y0); free(y1); free(y2);
    }
    free(ref1); free(ref2); free(ours); free(xr);
    ggml_free(g.ctx);
}

static void test_products(int quick)
{
    static const size_t rows_l[] = { 4, 7, 12, 13, 16, 20, 33, 64 };
    static const size_t k_l[] = { 16, 20, 24, 32, 40, 64, 72, 100, 256, 264, 1000, 2048 };
    static const size_t n_l[] = { 1, 2, 3, 4, 5, 6, 7, 13 };
    int types[3] = { F16_T_F32, F16_T_F16, F16_T_BF16 };
    for (int ti = 0; ti < 3; ti++)
        for (size_t ri = 0; ri < sizeof rows_l / sizeof rows_l[0]; ri++)
            for (size_t ki = 0; ki < sizeof k_l / sizeof k_l[0]; ki++)
                for (size_t ni = 0; ni < sizeof n_l / sizeof n_l[0]; ni++) {
                    if (quick && (ri + ki + ni) % 4) continue;
                    check_product(types[ti], rows_l[ri], k_l[ki], n_l[ni],
                                  (ri + ki + ni) % 3 == 0);
                }
    /* realistic shapes (SmolLM2-135M: 576 hidden, 1536 FFN) */
    static const size_t real[][2] = { { 576, 576 }, { 1536, 576 }, { 576, 1536 },
                                      { 192, 576 }, { 1000, 576 } };
    static const size_t rn[] = { 1, 2, 3, 8, 32, 67 };
    for (int ti = 0; ti < 3; ti++)
        for (size_t si = 0; si < sizeof real / sizeof real[0]; si++)
            for (size_t ni = 0; ni < sizeof rn / sizeof rn[0]; ni++) {
                if (quick && ni > 2) continue;
                check_product(types[ti], real[si][0], real[si][1], rn[ni], ni == 1);
            }
}

static void test_get_rows(void)
{
    int types[3] = { F16_T_F32, F16_T_F16, F16_T_BF16 };
    for (int ti = 0; ti < 3; ti++) {
        int t = types[ti];
        size_t rows = 50, k = 37, nid = 9;
        size_t bytes = rows * k * 4 + nid * k * 4 + 4 * ggml_tensor_overhead()
                       + ggml_graph_overhead() + (1 << 16);
        struct ggml_init_params ip = { bytes, NULL, false };
        struct ggml_context *ctx = ggml_init(ip);
        struct ggml_tensor *w = ggml_new_tensor_2d(ctx, (enum ggml_type)t, (int64_t)k, (int64_t)rows);
        struct ggml_tensor *ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, (int64_t)nid);
        fill_w(t, w->data, rows * k, 3.0f);
        if (t != F16_T_F32)   /* specials: inf, NaN, subnormal, -0 */
            memcpy(w->data, (uint16_t[]){ 0x7c00, 0x7e01, 0x0001, 0x8000,
                                          0x7f80, 0xffc1, 0x0080 }, 14);
        int32_t *id = ids->data;
        for (size_t i = 0; i < nid; i++) id[i] = (int32_t)((i * 17) % rows);
        struct ggml_tensor *out = ggml_get_rows(ctx, w, ids);
        struct ggml_cgraph *gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
        cpu.compute_with_ctx(ctx, gf, 1);
        float *ours = malloc(nid * k * 4);
        f16_matrix m = { t, w->data, rows, k, k * esize(t), rows * k * esize(t) };
        char err[200];
        int rc = f16_get_rows(&m, id, nid, ours, err, sizeof err);
        long d = rc ? 0 : first_diff(out->data, ours, nid * k);
        verdict(rc == 0 && d < 0, "get_rows %s: %s at %ld", tname(t), rc ? err : "differs", d);
        free(ours);
        ggml_free(ctx);
    }
}

/* ---- benchmark ---- */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void bench_one(int t, size_t rows, size_t k, size_t n, int nth, int reps)
{
    graph g;
    if (build_mul_mat(&g, t, rows, k, n) != 0) return;
    fill_w(t, g.w->data, rows * k, 1.0f);
    float *x = g.x->data;
    for (size_t i = 0; i < n * k; i++) x[i] = rnd(2.0f);
    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(nth);
    struct ggml_threadpool *tp = cpu.tp_new(&tpp);
    struct ggml_cplan cp = cpu.plan(g.gf, nth, tp);
    void *work = cp.work_size ? malloc(cp.work_size) : NULL;
    cp.work_data = work;
    par_pool *pool = nth == 1 ? pool1 : pool2;
    f16_matrix w = { t, g.w->data, rows, k, k * esize(t), rows * k * esize(t) };
    float *xr = malloc(n * k * 4), *y = malloc(rows * n * 4);
    char err[200];
    double *tg = malloc(reps * sizeof *tg), *to = malloc(reps * sizeof *to);
    /* in blocks, each side's pool alone and awake (kit_bench.h) */
    for (int r0 = 0; r0 < reps; r0 += BENCH_BLOCK) {
        int nr = reps - r0 < BENCH_BLOCK ? reps - r0 : BENCH_BLOCK;
        par_pause(pool);
        cpu.tp_resume(tp);
        for (int r = -BENCH_WARM; r < nr; r++) {
            double t0 = now_ns();
            cpu.compute(g.gf, &cp);
            if (r >= 0) tg[r0 + r] = now_ns() - t0;
        }
        cpu.tp_pause(tp);
        bench_wake(pool);
        for (int r = -BENCH_WARM; r < nr; r++) {
            double t0 = now_ns();
            if (t == F16_T_F32) f16_mul_mat(pool, &w, x, n, y, err, sizeof err);
            else f16_mul_mat_f32(pool, &w, x, n, xr, y, err, sizeof err);
            if (r >= 0) to[r0 + r] = now_ns() - t0;
        }
    }
    int same = first_diff(g.y->data, y, rows * n) < 0;
    /* median of the per-run ratios (both sides timed back to back in each
     * run, so bursts of other load cancel more than in separate medians) */
    double *pr = malloc(reps * sizeof *pr);
    for (int r = 0; r < reps; r++) pr[r] = tg[r] / to[r];
    qsort(pr, (size_t)reps, sizeof *pr, cmp_d);
    qsort(tg, (size_t)reps, sizeof *tg, cmp_d);
    qsort(to, (size_t)reps, sizeof *to, cmp_d);
    double el = (double)(rows * n);
    printf("%-5s %6zu x %5zu n=%-3zu %-7s t=%d  ns/elem ggml %8.2f/%8.2f  ours %8.2f/%8.2f"
           "  speedup %.3f/%.3f paired %.3f  bits %s\n",
           tname(t), rows, k, n, f16_llamafile() && f16_takes_sgemm(rows, k, n) ? "sgemm" : "vec_dot",
           nth, tg[0] / el, tg[reps / 2] / el, to[0] / el, to[reps / 2] / el,
           tg[0] / to[0], tg[reps / 2] / to[reps / 2], pr[reps / 2], same ? "same" : "DIFFER");
    fflush(stdout);
    free(pr); free(tg); free(to); free(xr); free(y); free(work);
    cpu.tp_free(tp);
    ggml_free(g.ctx);
}

static void bench(int reps, int only, int prefill)
{
    printf("min/median of %d alternating runs; ns per output element "
           "(= per row for n=1)\n", reps);
    int types[3] = { F16_T_F32, F16_T_F16, F16_T_BF16 };
    static const size_t shapes[][3] = {
        { 2048, 2048, 1 }, { 5632, 2048, 1 }, { 2048, 5632, 1 }, { 1536, 576, 1 },
        { 2048, 2048, 32 }, { 1536, 576, 64 }, { 2048, 2048, 7 }, { 2047, 2048, 32 },
    };
    for (int nth = 1; nth <= 2; nth++)
        for (int ti = 0; ti < 3; ti++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                if ((only < 0 || types[ti] == only) && (!prefill || shapes[s][2] > 1))
                    bench_one(types[ti], shapes[s][0], shapes[s][1], shapes[s][2], nth, reps);
}

int main(int argc, char **argv)
{
    int quick = 0, do_bench = 0, reps = 15, only = -1, prefill = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--bench")) do_bench = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = atoi(argv[++i]); /* GGUF type number */
        else if (!strcmp(argv[i], "--prefill")) prefill = 1;          /* shapes of n > 1 only */
        else { fprintf(stderr, "usage: %s [--quick] [--bench [--reps N] [--only TYPE] [--prefill]]\n", argv[0]); return 2; }
    }
    ggml_log_set(quiet_log, NULL);
    if (load_cpu() != 0) return 2;
    char err[200];
    pool1 = par_create(1, err, sizeof err);
    pool2 = par_create(2, err, sizeof err);
    if (!pool1 || !pool2) { fprintf(stderr, "pool: %s\n", err); return 2; }
    if (!f16_simd_active()) printf("note: SIMD kernels not active on this CPU\n");
    printf("library llamafile: %d (products follow it)\n", f16_llamafile());
    if (do_bench) {
        bench(reps < 3 ? 3 : reps, only, prefill);
    } else {
        test_conversions(quick);
        test_vec_dot();
        test_get_rows();
        test_products(quick);
        printf("%d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
    }
    par_destroy(pool1);
    par_destroy(pool2);
    return n_fail ? 1 : 0;
}
