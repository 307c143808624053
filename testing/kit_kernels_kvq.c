/*
 * kit_kernels_kvq.c -- in-process oracle for src/ops/kvq.c (the KV cache's
 * row types) and src/ops/attn.c over them: the same inputs go through our
 * code and through llama.cpp b11669's own (libggml-cpu-haswell.so's type
 * traits and graphs), every output compared bit for bit.
 *
 *   from_float  kvq_from_float against the CPU type traits' from_float (what
 *               set_rows writes into the cache) for f32, f16, bf16, q8_0,
 *               q4_0, q4_1, q5_0, q5_1, iq4_nl: random rows of many scales,
 *               zeros, ties, one large value among small ones, a zero block
 *               and a block below 1e-15 after non-zero ones, exact ties
 *               between iq4_nl's values;
 *   to_float    kvq_to_float against ggml-base's to_float (v_to_float);
 *   fwht        kvq_fwht against a ggml_mul_mat graph hinted
 *               GGML_HINT_SRC0_IS_HADAMARD (llama_mul_mat_hadamard), n = 64,
 *               128, 256;
 *   attention   attn_flash over typed K/V rows against a ggml_flash_attn_ext
 *               graph (causal f16 mask, 1 and 2 threads; 1, 7 and 70 query
 *               rows; 300 and 700 cells), heads of 64 and 128 with GQA.
 *
 * Build and run: testing/oracle_kernels_kvq.py. Prints each mismatch and
 * ends with "N passed, N failed, N skipped"; exit 1 on any failure, 2 on
 * setup errors.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include "base/par.h"
#include "ops/attn.h"
#include "ops/kvq.h"
#include "ops/q8_0.h"

static const struct ggml_type_traits_cpu *(*traits_cpu)(enum ggml_type);
static ggml_backend_t (*backend_init)(void);
static void (*set_n_threads)(ggml_backend_t, int);

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
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
    if (!traits_cpu || !cpu_init || !backend_init || !set_n_threads) {
        fprintf(stderr, "%s lacks a CPU backend symbol\n", path);
        return -1;
    }
    cpu_init();
    return 0;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static float uni(void) { return (float)((next64() >> 40) * (1.0 / 16777216.0)); }
static float gauss(void) { return (uni() + uni() + uni() + uni() - 2.0f) * 1.7f; }
static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static long passed, failed;

static void verdict(const char *name, long bad, long total)
{
    if (bad) {
        failed++;
        printf("FAIL %s: %ld of %ld differ\n", name, bad, total);
    } else {
        passed++;
        printf("ok   %s\n", name);
    }
}

static long cmp_f32(const char *name, const float *got, const float *want, size_t n)
{
    long bad = 0;
    for (size_t i = 0; i < n; i++)
        if (fbits(got[i]) != fbits(want[i])) {
            if (bad < 4)
                printf("  %s [%zu]: ours %.9g (%08x) ggml %.9g (%08x)\n", name, i, got[i], fbits(got[i]), want[i],
                       fbits(want[i]));
            bad++;
        }
    return bad;
}

static long cmp_bytes(const char *name, const uint8_t *got, const uint8_t *want, size_t n)
{
    long bad = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            if (bad < 4) printf("  %s byte %zu: ours %02x ggml %02x\n", name, i, got[i], want[i]);
            bad++;
        }
    return bad;
}

static const kvq_type playing[] = {KVQ_F32,  KVQ_F16,  KVQ_BF16, KVQ_Q8_0,  KVQ_Q4_0,
                                   KVQ_Q4_1, KVQ_Q5_0, KVQ_Q5_1, KVQ_IQ4_NL};
#define N_PLAYING (sizeof playing / sizeof playing[0])

/* A row of n floats of one of several shapes. */
static void fill_row(float *x, size_t n, int shape)
{
    const float scale = powf(10.0f, (float)(next64() % 7) - 3.0f);
    for (size_t i = 0; i < n; i++) x[i] = gauss() * scale;
    if (shape == 1) memset(x, 0, n * sizeof *x);
    if (shape == 2)   /* halves and ties of the steps */
        for (size_t i = 0; i < n; i++) x[i] = (float)((int)(next64() % 33) - 16) * 0.5f;
    if (shape == 3)   /* one large value among small ones, negative at times */
        for (size_t i = 0; i < n; i += 32) x[i + next64() % 32] = (next64() & 1 ? -1.0f : 1.0f) * 1000.0f * scale;
    if (shape == 4)   /* all equal within a block */
        for (size_t i = 0; i < n; i++) x[i] = 0.25f;
    if (shape == 5) {   /* a zero block and a block below 1e-15 after non-zero ones */
        memset(x + 64, 0, 32 * sizeof *x);
        for (size_t i = 160; i < 192; i++) x[i] = gauss() * 1e-17f;
    }
    if (shape == 6) {   /* iq4_nl's ties: -127 * 2^e leads each block, so x * id is exact, the rest midpoints */
        static const int8_t v[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
        const float p2 = ldexpf(1.0f, (int)(next64() % 7) - 3);
        for (size_t i = 0; i < n; i++) {
            const int k = (int)(next64() % 15);
            x[i] = i % 32 == 0 ? -127.0f * p2 : 0.5f * (float)(v[k] + v[k + 1]) * p2;
        }
    }
}

/* iq4_nl leaves a block below 1e-15 with the codes its previous block left
 * in quantize_row_iq4_nl_ref's array, and its first block with the stack's:
 * on an all-zero row (shape 1) only each block's d (0) is ggml's to compare. */
static long cmp_row(kvq_type t, int shape, const uint8_t *got, const uint8_t *want, size_t rb)
{
    const kvq_info *in = kvq_info_of(t);
    if (t != KVQ_IQ4_NL || shape != 1) return cmp_bytes(in->name, got, want, rb);
    long bad = 0;
    for (size_t b = 0; b < rb; b += in->bytes) bad += cmp_bytes("iq4_nl d", got + b, want + b, 2);
    return bad;
}

static void check_rows(void)
{
    const size_t n = 256;
    float x[256], y[256], yw[256];
    uint8_t ours[1024], theirs[1024];
    for (size_t t = 0; t < N_PLAYING; t++) {
        const kvq_info *in = kvq_info_of(playing[t]);
        const enum ggml_type gt = (enum ggml_type)in->ggml;
        const size_t rb = kvq_row_bytes(playing[t], n);
        for (int shape = 0; shape < 7; shape++) {
            long bad = 0, badf = 0;
            for (int rep = 0; rep < 40; rep++) {
                fill_row(x, n, shape);
                kvq_from_float(playing[t], x, ours, n);
                if (traits_cpu(gt)->from_float) traits_cpu(gt)->from_float(x, theirs, (int64_t)n);
                else memcpy(theirs, x, rb);   /* f32: set_rows copies */
                bad += cmp_row(playing[t], shape, ours, theirs, rb) != 0;
                kvq_to_float(playing[t], theirs, y, n);
                if (ggml_get_type_traits(gt)->to_float) ggml_get_type_traits(gt)->to_float(theirs, yw, (int64_t)n);
                else memcpy(yw, theirs, n * sizeof(float));   /* f32: read as it is */
                badf += cmp_f32(in->name, y, yw, n) != 0;
            }
            char name[96];
            snprintf(name, sizeof name, "from_float %s shape %d (%s)", in->name, shape, q8_simd() ? "avx2" : "portable");
            verdict(name, bad, 40);
            snprintf(name, sizeof name, "to_float %s shape %d", in->name, shape);
            verdict(name, badf, 40);
        }
    }
}

static void check_fwht(ggml_backend_t be)
{
    for (size_t n = 64; n <= 256; n *= 2) {
        const size_t rows = 11;
        size_t mem = (n * n + 2 * n * rows) * sizeof(float) + 4 * ggml_tensor_overhead() + ggml_graph_overhead() + 65536;
        struct ggml_init_params ip = {mem, NULL, false};
        struct ggml_context *ctx = ggml_init(ip);
        struct ggml_tensor *H = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, (int64_t)n, (int64_t)n);
        struct ggml_tensor *X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, (int64_t)n, (int64_t)rows);
        memset(H->data, 0, n * n * sizeof(float));   /* the hint: src0 is not read */
        float *x = malloc(n * rows * sizeof(float));
        for (size_t i = 0; i < n * rows; i++) x[i] = ((float *)X->data)[i] = gauss() * 3.0f;
        struct ggml_tensor *Y = ggml_mul_mat(ctx, H, X);
        ggml_mul_mat_set_hint(Y, GGML_HINT_SRC0_IS_HADAMARD);
        struct ggml_cgraph *g = ggml_new_graph(ctx);
        ggml_build_forward_expand(g, Y);
        set_n_threads(be, 2);
        char name[64];
        snprintf(name, sizeof name, "fwht n=%zu", n);
        if (ggml_backend_graph_compute(be, g) != GGML_STATUS_SUCCESS) {
            failed++;
            printf("FAIL %s: compute failed\n", name);
        } else {
            kvq_fwht(x, n * rows, n);
            verdict(name, cmp_f32(name, x, (const float *)Y->data, n * rows), (long)(n * rows));
        }
        free(x);
        ggml_free(ctx);
    }
}

/* One attention call: n_tok query rows at positions [first, first + n_tok)
 * over n_kv cells (the first first + n_tok written), K and V of types tk, tv. */
static void attn_case(ggml_backend_t be, par_pool *pool, size_t hd, size_t n_head, size_t n_head_kv, size_t n_tok,
                      size_t n_kv, kvq_type tk, kvq_type tv, int nt)
{
    const size_t kvd = hd * n_head_kv, qd = hd * n_head, first = n_kv - 256 + 7 - n_tok;
    const size_t kr = kvq_row_bytes(tk, kvd), vr = kvq_row_bytes(tv, kvd);
    size_t mem = n_tok * qd * 4 * 3 + n_kv * (kr + vr) + n_kv * n_tok * 2 + 8 * ggml_tensor_overhead() +
                 ggml_graph_overhead() + (1 << 20);
    struct ggml_init_params ip = {mem, NULL, false};
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *Q = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, (int64_t)hd, (int64_t)n_head, (int64_t)n_tok);
    struct ggml_tensor *K = ggml_new_tensor_3d(ctx, (enum ggml_type)kvq_info_of(tk)->ggml, (int64_t)hd,
                                               (int64_t)n_head_kv, (int64_t)n_kv);
    struct ggml_tensor *V = ggml_new_tensor_3d(ctx, (enum ggml_type)kvq_info_of(tv)->ggml, (int64_t)hd,
                                               (int64_t)n_head_kv, (int64_t)n_kv);
    struct ggml_tensor *Mk = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, (int64_t)n_kv, (int64_t)n_tok);
    float *q = malloc(n_tok * qd * sizeof(float)), *row = malloc(kvd * sizeof(float));
    for (size_t i = 0; i < n_tok * qd; i++) q[i] = ((float *)Q->data)[i] = gauss();
    memset(K->data, 0, n_kv * kr);
    memset(V->data, 0, n_kv * vr);
    for (size_t c = 0; c < first + n_tok; c++) {
        for (size_t i = 0; i < kvd; i++) row[i] = gauss();
        kvq_from_float(tk, row, (uint8_t *)K->data + c * kr, kvd);
        for (size_t i = 0; i < kvd; i++) row[i] = gauss();
        kvq_from_float(tv, row, (uint8_t *)V->data + c * vr, kvd);
    }
    uint16_t *mk = Mk->data;
    for (size_t t = 0; t < n_tok; t++)
        for (size_t c = 0; c < n_kv; c++) mk[t * n_kv + c] = c <= first + t ? 0 : 0xfc00;   /* 0 / -inf */
    const float scale = 1.0f / sqrtf((float)hd);
    struct ggml_tensor *O = ggml_flash_attn_ext(ctx, ggml_permute(ctx, Q, 0, 2, 1, 3), ggml_permute(ctx, K, 0, 2, 1, 3),
                                                ggml_permute(ctx, V, 0, 2, 1, 3), Mk, scale, 0.0f, 0.0f);
    ggml_prec_set_acc(O, GGML_PREC_F32);
    struct ggml_cgraph *g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, O);
    set_n_threads(be, nt);
    char name[160];
    snprintf(name, sizeof name, "attention K %s V %s hd=%zu heads %zu/%zu rows=%zu cells=%zu threads=%d",
             kvq_info_of(tk)->name, kvq_info_of(tv)->name, hd, n_head, n_head_kv, n_tok, n_kv, nt);
    if (ggml_backend_graph_compute(be, g) != GGML_STATUS_SUCCESS) {
        failed++;
        printf("FAIL %s: compute failed\n", name);
    } else {
        float *att = malloc(n_tok * qd * sizeof(float));
        attn_scratch *s = attn_scratch_new(par_threads(pool), hd);
        const attn_args a = {hd, n_head, n_head_kv, qd, kvd, scale, nt, q, att, K->data, V->data, tk, tv, kr, vr,
                             n_tok, first, n_kv, 0, NULL};
        attn_flash(pool, q8_simd(), &a, s);
        /* ggml's output: [hd, n_head, n_tok], the same layout as ours */
        verdict(name, cmp_f32(name, att, (const float *)O->data, n_tok * qd), (long)(n_tok * qd));
        attn_scratch_free(s);
        free(att);
    }
    free(q);
    free(row);
    ggml_free(ctx);
}

static void check_attention(ggml_backend_t be, par_pool *pool)
{
    static const kvq_type pairs[][2] = {{KVQ_Q8_0, KVQ_Q8_0}, {KVQ_Q4_0, KVQ_Q4_1}, {KVQ_Q5_0, KVQ_Q5_1},
                                        {KVQ_Q4_1, KVQ_F16}, {KVQ_F16, KVQ_Q5_0}, {KVQ_BF16, KVQ_BF16},
                                        {KVQ_BF16, KVQ_Q8_0}, {KVQ_F16, KVQ_BF16}, {KVQ_F16, KVQ_F16},
                                        {KVQ_IQ4_NL, KVQ_IQ4_NL}, {KVQ_IQ4_NL, KVQ_F16}, {KVQ_Q8_0, KVQ_IQ4_NL}};
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++)
        for (int hc = 0; hc < 2; hc++) {
            const size_t hd = hc ? 128 : 64, nh = hc ? 4 : 6, nkv = 2;
            attn_case(be, pool, hd, nh, nkv, 1, 768, pairs[p][0], pairs[p][1], 2);   /* past 512 cells */
            attn_case(be, pool, hd, nh, nkv, 7, 256, pairs[p][0], pairs[p][1], 1);
            attn_case(be, pool, hd, nh, nkv, 70, 512, pairs[p][0], pairs[p][1], 2);
        }
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (load_cpu()) return 2;
    ggml_backend_t be = backend_init();
    char perr[128];
    par_pool *pool = par_create(2, perr, sizeof perr);
    if (!be || !pool) {
        fprintf(stderr, "cannot start the backends\n");
        return 2;
    }
    for (int mode = 1; mode >= 0; mode--) {
        q8_set_simd(mode);
        check_rows();
        check_attention(be, pool);
    }
    q8_set_simd(1);
    check_fwht(be);
    par_destroy(pool);
    ggml_backend_free(be);
    printf("%ld passed, %ld failed, 0 skipped\n", passed, failed);
    return failed ? 1 : 0;
}
