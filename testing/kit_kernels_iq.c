/*
 * kit_kernels_iq.c -- in-process oracle for src/ops/iq4.c (IQ4_NL, IQ4_XS),
 * src/ops/tq.c (TQ1_0, TQ2_0) and repack.c's IQ4_NL 8x8 form: the same inputs go through our kernels and
 * through llama.cpp b11669's own (libggml-base.so's to_float, the CPU
 * backend libggml-cpu-haswell.so's vec_dot, repack buffer, exported gemv /
 * gemm and whole ggml_mul_mat graphs), every output compared bit for bit,
 * with our AVX2 kernels and again with our portable C (q8_set_simd(0)).
 *
 *   dequant   IQ4_NL / IQ4_XS rows made by ggml_quantize_chunk, random bytes
 *             with sane scales, hostile ones (fp16 specials, NaNs among them,
 *             all-max codes) against to_float;
 *   vec_dot   row lengths from 1 block to thousands (odd and even block
 *             counts: IQ4_NL pairs its blocks) against the type traits'
 *             vec_dot: ggml-made, raw, and hostile (a quarter of the
 *             activations -128, fp16/f32 specials among the scales);
 *   repack    IQ4_NL 8x8 bytes against ggml's repack buffer; our gemv/gemm
 *             against the exported ggml::cpu::repack::gemv/gemm<block_iq4_nl,
 *             8, 8>, quantized and hostile activations;
 *   mul_mat   whole graphs: a repacked IQ4_NL matrix times 1..17 columns; a
 *             plain IQ4_NL matrix (rows not in eights: vec_dot at every
 *             column count), a plain IQ4_XS matrix (vec_dot below 8
 *             columns, the tiled kernel from 8) and TQ1_0 / TQ2_0 ones
 *             (vec_dot at every column count) times 1..65 columns, f32
 *             activations or hostile q8 ones handed in as src1; 1 and 2
 *             threads;
 *   choice    which of these matrices b11669 repacks (rows in eights, IQ4_NL
 *             only).
 *
 * Build and run: testing/oracle_kernels_iq.py. Prints each mismatch (a few
 * per case) and ends with "N passed, N failed, N skipped"; exit 1 on any
 * failure, 2 on setup errors.
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

#include "base/par.h"
#include "ops/iq1.h"
#include "ops/iq2.h"
#include "ops/iq3.h"
#include "ops/iq4.h"
#include "ops/iq_grids.h"
#include "ops/q4_k.h"
#include "ops/q8_0.h"
#include "ops/repack.h"
#include "ops/tq.h"

static const struct ggml_type_traits_cpu *(*traits_cpu)(enum ggml_type);
static ggml_backend_t (*backend_init)(void);
static void (*set_n_threads)(ggml_backend_t, int);
static ggml_backend_buffer_type_t (*repack_buft)(void);
static void (*gemv_iq4_nl_8x8)(int n, float *s, size_t bs, const void *vx, const void *vy, int nr, int nc);
static void (*gemm_iq4_nl_8x8)(int n, float *s, size_t bs, const void *vx, const void *vy, int nr, int nc);
static void (*quantize_mat_q8_0_4x8)(const float *x, void *vy, int64_t nrow, int64_t n_per_row);

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
    *(void **)&gemv_iq4_nl_8x8 = dlsym(lib, "_ZN4ggml3cpu6repack4gemvI12block_iq4_nlLl8ELl8EL9ggml_type8EEEviPfmPKvS7_ii");
    *(void **)&gemm_iq4_nl_8x8 = dlsym(lib, "_ZN4ggml3cpu6repack4gemmI12block_iq4_nlLl8ELl8EL9ggml_type8EEEviPfmPKvS7_ii");
    *(void **)&quantize_mat_q8_0_4x8 = dlsym(lib, "_Z19ggml_quantize_mat_tILl8EL9ggml_type8EEvPKfPvll");
    if (!traits_cpu || !cpu_init || !backend_init || !set_n_threads || !repack_buft || !gemv_iq4_nl_8x8 ||
        !gemm_iq4_nl_8x8 || !quantize_mat_q8_0_4x8) {
        fprintf(stderr, "%s lacks a CPU backend symbol\n", path);
        return -1;
    }
    cpu_init();
    return 0;
}

/* ---------------------------------------------------------------- helpers */

#define KIT_SEED 0x452821e638d01377ULL
#include "kit_check.h"

static const char *mode_name(void) { return q8_simd() ? "avx2" : "portable"; }

/* ---------------------------------------------------------------- the types */

typedef struct {
    enum ggml_type type, act_type;
    const char *name;
    size_t blk, bytes, act_bytes;
    int (*dequant)(const uint8_t *, size_t, size_t, float *, char *, size_t);
    float (*vec_dot)(const uint8_t *, const uint8_t *, size_t);
    size_t d_at; /* the f16 d's offset in a block */
    float (*tiled)(const uint8_t *, const uint8_t *, size_t); /* 8+ columns, or NULL: vec_dot */
} Kind;

static const Kind kinds[] = {
    {GGML_TYPE_IQ4_NL, GGML_TYPE_Q8_0, "IQ4_NL", 32, IQ4_NL_BYTES, Q8_0_BYTES, iq4_nl_dequantize, iq4_nl_vec_dot, 0, NULL},
    {GGML_TYPE_IQ4_XS, GGML_TYPE_Q8_K, "IQ4_XS", 256, IQ4_XS_BYTES, Q8_K_BYTES, iq4_xs_dequantize, iq4_xs_vec_dot, 0, iq4_xs_tiled_dot},
    {GGML_TYPE_TQ1_0, GGML_TYPE_Q8_K, "TQ1_0", 256, TQ1_0_BYTES, Q8_K_BYTES, tq1_0_dequantize, tq1_0_vec_dot, 52, NULL},
    {GGML_TYPE_TQ2_0, GGML_TYPE_Q8_K, "TQ2_0", 256, TQ2_0_BYTES, Q8_K_BYTES, tq2_0_dequantize, tq2_0_vec_dot, 64, NULL},
    {GGML_TYPE_IQ3_XXS, GGML_TYPE_Q8_K, "IQ3_XXS", 256, IQ3_XXS_BYTES, Q8_K_BYTES, iq3_xxs_dequantize, iq3_xxs_vec_dot, 0,
     iq3_xxs_tiled_dot},
    {GGML_TYPE_IQ3_S, GGML_TYPE_Q8_K, "IQ3_S", 256, IQ3_S_BYTES, Q8_K_BYTES, iq3_s_dequantize, iq3_s_vec_dot, 0,
     iq3_s_tiled_dot},
    {GGML_TYPE_IQ2_XXS, GGML_TYPE_Q8_K, "IQ2_XXS", 256, IQ2_XXS_BYTES, Q8_K_BYTES, iq2_xxs_dequantize, iq2_xxs_vec_dot, 0,
     iq2_xxs_tiled_dot},
    {GGML_TYPE_IQ2_XS, GGML_TYPE_Q8_K, "IQ2_XS", 256, IQ2_XS_BYTES, Q8_K_BYTES, iq2_xs_dequantize, iq2_xs_vec_dot, 0,
     iq2_xs_tiled_dot},
    {GGML_TYPE_IQ2_S, GGML_TYPE_Q8_K, "IQ2_S", 256, IQ2_S_BYTES, Q8_K_BYTES, iq2_s_dequantize, iq2_s_vec_dot, 0,
     iq2_s_tiled_dot},
    {GGML_TYPE_IQ1_S, GGML_TYPE_Q8_K, "IQ1_S", 256, IQ1_S_BYTES, Q8_K_BYTES, iq1_s_dequantize, iq1_s_vec_dot, 0, iq1_s_tiled_dot},
    /* IQ1_M keeps its f16 scale in the top nibbles of its last 8 bytes: a sane f16 at 48 only moves one nibble */
    {GGML_TYPE_IQ1_M, GGML_TYPE_Q8_K, "IQ1_M", 256, IQ1_M_BYTES, Q8_K_BYTES, iq1_m_dequantize, iq1_m_vec_dot, 48, iq1_m_tiled_dot},
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
    float *imat = NULL; /* the IQ2/IQ1 quantizers want an importance matrix: a fixed positive one */
    if (ggml_quantize_requires_imatrix(t->type) || t->type == GGML_TYPE_IQ2_S || t->type == GGML_TYPE_IQ1_M) {
        imat = malloc(k * sizeof(float));
        for (size_t i = 0; i < k; i++)
            imat[i] = 0.5f + (float)(i % 7) * 0.25f;
    }
    ggml_quantize_chunk(t->type, x, w, 0, (int64_t)rows, (int64_t)k, imat);
    free(imat);
    free(x);
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

static uint16_t rand_scale(void)
{
    uint16_t e = (uint16_t)(1 + next64() % 17), m = (uint16_t)(next64() & 0x3ff);
    return (uint16_t)((next64() & 1) << 15 | e << 10 | m);
}

static uint16_t special16(int nan)
{
    static const uint16_t sp[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7bff, 0xfbff, 0x0001, 0x83ff, 0x0400};
    static const uint16_t nans[] = {0x7e00, 0xfe00, 0x7c01, 0x7d55, 0xfc3f};
    if (nan && next64() % 3 == 0)
        return nans[next64() % (sizeof nans / sizeof *nans)];
    return sp[next64() % (sizeof sp / sizeof *sp)];
}

/* Random weight bytes, a sane fp16 d; hostile 1: an fp16 special in about a
 * quarter of the d (NaNs only if nan); hostile 2: also every code and scale
 * bit set in a quarter of the blocks. */
static void make_raw(const Kind *t, uint8_t *w, size_t nblocks, int hostile, int nan)
{
    for (size_t b = 0; b < nblocks; b++) {
        uint8_t *p = w + b * t->bytes;
        for (size_t i = 0; i < t->bytes; i++)
            p[i] = (uint8_t)next64();
        if (hostile == 2 && next64() % 4 == 0)
            memset(p, 0xff, t->bytes);
        put16(p + t->d_at, hostile && next64() % 4 == 0 ? special16(nan) : rand_scale());
    }
}

/* Random activation blocks (q8_0: fp16 d; Q8_K: f32 d and bsums);
 * hostile: a quarter of the quants -128 and specials among the scales. */
static void make_act(enum ggml_type at, uint8_t *a, size_t nblocks, int hostile)
{
    static const uint32_t f32sp[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7f7fffffu,
                                     0xff7fffffu, 0x00000001u, 0x807fffffu};
    const int k8 = at == GGML_TYPE_Q8_K;
    size_t bytes = k8 ? Q8_K_BYTES : Q8_0_BYTES, qs = k8 ? 4 : 2, nq = k8 ? 256 : 32;
    for (size_t b = 0; b < nblocks; b++) {
        uint8_t *p = a + b * bytes;
        for (size_t i = 0; i < bytes; i++)
            p[i] = (uint8_t)next64();
        if (hostile)
            for (size_t i = 0; i < nq; i++)
                if (next64() % 4 == 0)
                    p[qs + i] = 0x80;
        if (k8) {
            float d = ldexpf(uni() + 0.5f, -(int)(next64() % 21)) * (next64() & 1 ? -1.0f : 1.0f);
            if (hostile && next64() % 8 == 0)
                d = bitsf(f32sp[next64() % (sizeof f32sp / sizeof *f32sp)]);
            memcpy(p, &d, 4);
        } else {
            put16(p, hostile && next64() % 8 == 0 ? special16(0) : rand_scale());
        }
    }
}

/* ---------------------------------------------------------------- dequant, vec_dot */

static void check_dequant(const Kind *t)
{
    const struct ggml_type_traits *tr = ggml_get_type_traits(t->type);
    size_t lens[] = {1, 2, 3, 7, 32};
    for (int mode = 0; mode < 4; mode++)
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

static void check_vec_dot(const Kind *t)
{
    const struct ggml_type_traits_cpu *tr = traits_cpu(t->type), *q = traits_cpu(t->act_type);
    size_t lens_k[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 64};
    size_t lens_0[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129, 255, 1000, 3071};
    const size_t *lens = t->blk == 256 ? lens_k : lens_0;
    size_t nl = t->blk == 256 ? sizeof lens_k / sizeof *lens_k : sizeof lens_0 / sizeof *lens_0;
    for (int mode = 0; mode < 4; mode++)
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
                        for (size_t b = 0; b < nb; b++) /* max codes, sane d */
                            for (size_t i = 0; i < t->bytes; i++)
                                if (i != t->d_at && i != t->d_at + 1)
                                    w[b * t->bytes + i] = 0xff;
                    make_act(t->act_type, act, nb, mode >= 2);
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

/* Every entry of the IQ3 grids against libggml-base.so: blocks whose codes
 * name each index in turn (all signs +, scale 15, d = 1), dequantized by
 * ggml's to_float, equal our grid entry times the block's step bit for bit.
 * One check per grid entry. */
static void check_grids(void)
{
    for (int ti = 0; ti < 2; ti++) {
        const enum ggml_type type = ti == 0 ? GGML_TYPE_IQ3_XXS : GGML_TYPE_IQ3_S;
        const size_t bytes = ti == 0 ? IQ3_XXS_BYTES : IQ3_S_BYTES, n = ti == 0 ? 256 : 512;
        const float step = ti == 0 ? 7.75f : 31.0f; /* d (0.5 + 15) 0.5; d (1 + 2 15) */
        for (size_t i0 = 0; i0 < n; i0 += 64) {
            uint8_t blk[IQ3_S_BYTES];
            memset(blk, 0, sizeof blk);
            put16(blk, 0x3c00); /* d = 1 */
            for (int m = 0; m < 64; m++) {
                const size_t idx = i0 + (size_t)m;
                blk[2 + m] = (uint8_t)idx;
                if (ti == 1 && idx & 256)
                    blk[66 + m / 8] |= (uint8_t)(1u << (m % 8));
            }
            if (ti == 0)
                for (int s = 0; s < 8; s++)
                    blk[66 + 4 * s + 3] = 0xf0; /* ls 15, no signs */
            else
                memset(blk + 106, 0xff, 4);
            float y[256];
            ggml_get_type_traits(type)->to_float(blk, y, 256);
            (void)bytes;
            for (int m = 0; m < 64; m++) {
                const size_t idx = i0 + (size_t)m;
                const uint32_t e = ti == 0 ? bk_iq3xxs_grid[idx] : bk_iq3s_grid[idx];
                long bad = 0;
                for (int j = 0; j < 4; j++) {
                    const float want = step * (float)(uint8_t)(e >> 8 * j);
                    if (memcmp(&y[4 * m + j], &want, 4) != 0)
                        bad++;
                }
                char name[64];
                snprintf(name, sizeof name, "%s grid entry %zu", ti == 0 ? "IQ3_XXS" : "IQ3_S", idx);
                verdict(name, bad, 4);
            }
        }
    }
}

/* ---------------------------------------------------------------- repacked IQ4_NL */

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

/* Repacked bytes, gemv and gemm pieces against ggml's exported ones. */
static void check_repack_pieces(void)
{
    const Kind *t = &kinds[0];
    size_t rows_list[] = {8, 16, 24, 64, 136};
    size_t kb_list[] = {1, 2, 3, 7, 16};
    for (size_t ri = 0; ri < sizeof rows_list / sizeof *rows_list; ri++)
        for (size_t ki = 0; ki < sizeof kb_list / sizeof *kb_list; ki++) {
            size_t rows = rows_list[ri], nb = kb_list[ki], k = nb * 32, wb = rows * nb * t->bytes;
            uint8_t *w = malloc(wb), *ours = malloc(wb), *act = malloc(nb * Q8_0_BYTES);
            float *x = malloc(4 * k * sizeof(float)), *y = malloc(4 * rows * sizeof(float)),
                  *want = malloc(4 * rows * sizeof(float));
            uint8_t *a4 = malloc(nb * Q8_0X4_BYTES);
            char name[160], err[200];
            for (int mode = 0; mode < 3; mode++) {
                if (mode == 0)
                    make_weights(t, w, rows, k);
                else
                    make_raw(t, w, rows * nb, mode == 2 ? 2 : 0, 0);
                Repacked r;
                if (repack_ggml(&r, t->type, w, rows, k) != 0) {
                    failed++;
                    printf("FAIL repack buffer for %zux%zu\n", rows, k);
                    continue;
                }
                const char *mn = mode == 0 ? "quantized" : mode == 1 ? "raw" : "special scales+max codes";
                snprintf(name, sizeof name, "IQ4_NL repack8 %s %zux%zu", mn, rows, k);
                if (iq4_nl_repack8(w, wb, rows, k, ours, wb, err, sizeof err) != 0) {
                    failed++;
                    printf("FAIL %s: %s\n", name, err);
                    repack_free(&r);
                    continue;
                }
                verdict(name, cmp_bytes(name, ours, r.t->data, wb), (long)wb);
                for (int am = 0; am < 2; am++) {
                    if (am == 0) {
                        fill_floats(x, k);
                        traits_cpu(GGML_TYPE_Q8_0)->from_float(x, act, (int64_t)k);
                    } else {
                        make_act(GGML_TYPE_Q8_0, act, nb, 1);
                    }
                    gemv_iq4_nl_8x8((int)k, want, rows, r.t->data, act, 1, (int)rows);
                    iq4_nl_x8_gemv(ours, rows, nb, act, y);
                    snprintf(name, sizeof name, "IQ4_NL x8 gemv %s weights, %s activations %zux%zu %s", mn,
                             am ? "hostile(-128)" : "quantized", rows, k, mode_name());
                    verdict(name, cmp_f32(name, y, want, rows), (long)rows);
                }
                for (int am = 0; am < 2; am++) {
                    if (am == 0) {
                        fill_floats(x, 4 * k);
                        quantize_mat_q8_0_4x8(x, a4, 4, (int64_t)k);
                    } else {
                        for (size_t i = 0; i < nb * Q8_0X4_BYTES; i++)
                            a4[i] = next64() % 4 == 0 ? 0x80 : (uint8_t)next64();
                        for (size_t b = 0; b < nb; b++)
                            for (int c = 0; c < 4; c++)
                                put16(a4 + b * Q8_0X4_BYTES + 2 * c, next64() % 8 == 0 ? special16(0) : rand_scale());
                    }
                    gemm_iq4_nl_8x8((int)k, want, rows, r.t->data, a4, 4, (int)rows);
                    iq4_nl_x8_gemm4(ours, rows, nb, a4, y, rows);
                    snprintf(name, sizeof name, "IQ4_NL x8 gemm %s weights, %s activations %zux%zu %s", mn,
                             am ? "raw(-128)" : "quantized", rows, k, mode_name());
                    verdict(name, cmp_f32(name, y, want, 4 * rows), (long)(4 * rows));
                }
                repack_free(&r);
            }
            free(w);
            free(ours);
            free(act);
            free(x);
            free(y);
            free(want);
            free(a4);
        }
}

/* Whole products on a repacked IQ4_NL weight: x8_mul_mat (quantizers,
 * column split, rows over the pool) against ggml_mul_mat. */
static void check_repack_mm(ggml_backend_t be, par_pool *pool2)
{
    const Kind *t = &kinds[0];
    size_t rows_list[] = {8, 24, 136};
    size_t cols_list[] = {1, 2, 3, 4, 5, 6, 7, 8, 13, 16, 17};
    for (int nt = 1; nt <= 2; nt++) {
        set_n_threads(be, nt);
        for (size_t ri = 0; ri < sizeof rows_list / sizeof *rows_list; ri++)
            for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++) {
                size_t rows = rows_list[ri], cols = cols_list[ci], nb = 9, k = nb * 32, wb = rows * nb * t->bytes;
                uint8_t *w = malloc(wb), *ours = malloc(wb);
                make_weights(t, w, rows, k);
                Repacked r;
                if (repack_ggml(&r, t->type, w, rows, k) != 0) {
                    failed++;
                    printf("FAIL repack buffer for %zux%zu\n", rows, k);
                    free(w);
                    free(ours);
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
                snprintf(name, sizeof name, "IQ4_NL repacked mul_mat %zux%zu cols=%zu threads=%d %s", rows, k, cols,
                         nt, mode_name());
                if (ggml_backend_graph_compute(be, g) != GGML_STATUS_SUCCESS ||
                    iq4_nl_repack8(w, wb, rows, k, ours, wb, err, sizeof err) != 0) {
                    failed++;
                    printf("FAIL %s: compute or repack failed\n", name);
                } else {
                    size_t wl = x8_work_bytes(IQ4_NL_TYPE, k, cols);
                    uint8_t *work = malloc(wl ? wl : 1);
                    float *yy = malloc(rows * cols * sizeof(float));
                    long bad = 0;
                    if (x8_mul_mat(nt == 1 ? NULL : pool2, IQ4_NL_TYPE, ours, wb, rows, k, (const float *)X->data,
                                   cols, yy, rows * cols, work, wl, err, sizeof err) != 0) {
                        printf("  %s: %s\n", name, err);
                        bad++;
                    } else {
                        bad += cmp_f32(name, yy, (const float *)Y->data, rows * cols);
                    }
                    verdict(name, bad, (long)(rows * cols));
                    free(work);
                    free(yy);
                }
                ggml_free(ctx);
                repack_free(&r);
                free(w);
                free(ours);
            }
    }
}

/* ---------------------------------------------------------------- plain products */

/* A plain (not repacked) matrix times cols columns in one ggml_mul_mat graph
 * against one dot per output: IQ4_NL vec_dot at every column count (b11669
 * sends it neither to tinyBLAS nor to the tiled kernel); IQ4_XS vec_dot below 8 columns, the tiled kernel from 8. amode 0:
 * f32 columns (ggml quantizes them, we quantize them with our quantizer);
 * 1: hostile q8 rows handed to the graph as src1. */
static void plain_case(const Kind *t, ggml_backend_t be, int nt, size_t rows, size_t nb, size_t cols, int wmode,
                       int amode)
{
    const size_t k = nb * t->blk, wb = rows * nb * t->bytes, arow = nb * t->act_bytes;
    size_t mem = wb + cols * (k * sizeof(float) + arow) + rows * cols * sizeof(float) + 4 * ggml_tensor_overhead() +
                 ggml_graph_overhead() + 65536;
    struct ggml_init_params ip = {mem, NULL, false};
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *W = ggml_new_tensor_2d(ctx, t->type, (int64_t)k, (int64_t)rows);
    uint8_t *w = W->data;
    if (wmode == 0)
        make_weights(t, w, rows, k);
    else
        make_raw(t, w, rows * nb, wmode == 2 ? 2 : 0, 0);
    uint8_t *act = malloc(cols * arow);
    struct ggml_tensor *X;
    char err[200];
    if (amode == 0) {
        X = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, (int64_t)k, (int64_t)cols);
        for (size_t c = 0; c < cols; c++) {
            fill_floats((float *)X->data + c * k, k);
            if (t->act_type == GGML_TYPE_Q8_K)
                q8_k_quantize((const float *)X->data + c * k, k, act + c * arow, arow, err, sizeof err);
            else
                q8_0_quantize((const float *)X->data + c * k, k, act + c * arow, arow, err, sizeof err);
        }
    } else {
        X = ggml_new_tensor_2d(ctx, t->act_type, (int64_t)k, (int64_t)cols);
        make_act(t->act_type, act, nb * cols, 1);
        memcpy(X->data, act, cols * arow);
    }
    struct ggml_tensor *Y = ggml_mul_mat(ctx, W, X);
    struct ggml_cgraph *g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, Y);
    char name[160];
    snprintf(name, sizeof name, "%s plain mul_mat %s weights, %s %zux%zu cols=%zu threads=%d %s", t->name,
             wmode == 0 ? "quantized" : wmode == 1 ? "raw" : "special scales+max codes",
             amode ? "hostile q8(-128)" : "f32", rows, k, cols, nt, mode_name());
    set_n_threads(be, nt);
    if (ggml_backend_graph_compute(be, g) != GGML_STATUS_SUCCESS) {
        failed++;
        printf("FAIL %s: compute failed\n", name);
    } else {
        float (*dot)(const uint8_t *, const uint8_t *, size_t) = t->tiled && cols >= 8 ? t->tiled : t->vec_dot;
        float *yy = malloc(rows * cols * sizeof(float));
        for (size_t c = 0; c < cols; c++)
            for (size_t r = 0; r < rows; r++)
                yy[c * rows + r] = dot(w + r * nb * t->bytes, act + c * arow, nb);
        verdict(name, cmp_f32(name, yy, (const float *)Y->data, rows * cols), (long)(rows * cols));
        free(yy);
    }
    free(act);
    ggml_free(ctx);
}

/* Development: BANKML_KIT_ONLY=TEXT runs only the types whose name holds TEXT
 * (the suite itself always runs everything). */
static int wanted(const char *name)
{
    const char *only = getenv("BANKML_KIT_ONLY");
    return !only || !*only || strstr(name, only) != NULL;
}

static void check_plain(ggml_backend_t be)
{
    const size_t shapes_nl[][2] = {{12, 1}, {33, 5}, {300, 18}}; /* rows (not in eights), blocks */
    const size_t shapes_xs[][2] = {{12, 1}, {33, 3}, {64, 2}, {300, 8}}; /* IQ4_XS is never repacked */
    const size_t cols_list[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 64, 65};
    for (int ti = 0; ti < (int)(sizeof kinds / sizeof *kinds); ti++) {
        if (!wanted(kinds[ti].name)) continue;
        const size_t(*shapes)[2] = ti == 0 ? shapes_nl : shapes_xs;
        const size_t ns = ti == 0 ? 3 : 4;
        for (int nt = 1; nt <= 2; nt++)
            for (size_t si = 0; si < ns; si++)
                for (size_t ci = 0; ci < sizeof cols_list / sizeof *cols_list; ci++)
                    for (int wmode = 0; wmode < 3; wmode++)
                        for (int amode = 0; amode < 2; amode++) {
                            if (shapes[si][0] == 300 && (wmode != 0 || amode != 0) && cols_list[ci] != 17)
                                continue;
                            plain_case(&kinds[ti], be, nt, shapes[si][0], shapes[si][1], cols_list[ci], wmode, amode);
                        }
    }
}

/* Which IQ4 weights b11669 repacks, asked as llama.cpp's loader asks. */
static void check_repack_choice(ggml_backend_t be)
{
    struct { enum ggml_type type; size_t rows; int want; } cases[] = {
        {GGML_TYPE_IQ4_NL, 16, 1}, {GGML_TYPE_IQ4_NL, 8, 1}, {GGML_TYPE_IQ4_NL, 12, 0},
        {GGML_TYPE_IQ4_NL, 20, 0}, {GGML_TYPE_IQ4_XS, 16, 0}, {GGML_TYPE_IQ4_XS, 64, 0},
        {GGML_TYPE_TQ1_0, 16, 0}, {GGML_TYPE_TQ2_0, 64, 0}, {GGML_TYPE_IQ3_XXS, 16, 0}, {GGML_TYPE_IQ3_S, 64, 0},
        {GGML_TYPE_IQ2_XXS, 16, 0}, {GGML_TYPE_IQ2_XS, 64, 0}, {GGML_TYPE_IQ2_S, 8, 0},
        {GGML_TYPE_IQ1_S, 16, 0}, {GGML_TYPE_IQ1_M, 64, 0},
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

static void check_refusals(void)
{
    uint8_t buf[1024] = {0};
    float y[512];
    char err[200];
    struct { const char *name; int rc; } cases[] = {
        {"IQ4_NL dequant 48 values", iq4_nl_dequantize(buf, sizeof buf, 48, y, err, sizeof err)},
        {"IQ4_NL dequant short row", iq4_nl_dequantize(buf, 35, 64, y, err, sizeof err)},
        {"IQ4_XS dequant 128 values", iq4_xs_dequantize(buf, sizeof buf, 128, y, err, sizeof err)},
        {"IQ4_XS dequant short row", iq4_xs_dequantize(buf, 135, 256, y, err, sizeof err)},
        {"IQ4_XS dequant NULL out", iq4_xs_dequantize(buf, sizeof buf, 256, NULL, err, sizeof err)},
        {"TQ1_0 dequant 128 values", tq1_0_dequantize(buf, sizeof buf, 128, y, err, sizeof err)},
        {"TQ2_0 dequant short row", tq2_0_dequantize(buf, 65, 256, y, err, sizeof err)},
        {"IQ3_XXS dequant 128 values", iq3_xxs_dequantize(buf, sizeof buf, 128, y, err, sizeof err)},
        {"IQ3_S dequant short row", iq3_s_dequantize(buf, 109, 256, y, err, sizeof err)},
        {"IQ2_XXS dequant 128 values", iq2_xxs_dequantize(buf, sizeof buf, 128, y, err, sizeof err)},
        {"IQ2_XS dequant short row", iq2_xs_dequantize(buf, 73, 256, y, err, sizeof err)},
        {"IQ2_S dequant NULL out", iq2_s_dequantize(buf, sizeof buf, 256, NULL, err, sizeof err)},
        {"IQ1_S dequant 128 values", iq1_s_dequantize(buf, sizeof buf, 128, y, err, sizeof err)},
        {"IQ1_M dequant short row", iq1_m_dequantize(buf, 55, 256, y, err, sizeof err)},
        {"IQ4_NL repack 12 rows", iq4_nl_repack8(buf, sizeof buf, 12, 32, buf, sizeof buf, err, sizeof err)},
        {"IQ4_NL repack short output", iq4_nl_repack8(buf, sizeof buf, 8, 64, buf, 287, err, sizeof err)},
        {"x8_mul_mat IQ4_NL short work", x8_mul_mat(NULL, IQ4_NL_TYPE, buf, sizeof buf, 8, 32, (const float *)buf, 1, y,
                                                    512, buf, 33, err, sizeof err)},
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
        fprintf(stderr, "usage: sid-run kit_kernels_iq [check]\n");
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
        for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
            if (!wanted(kinds[i].name)) continue;
            check_dequant(&kinds[i]);
            check_vec_dot(&kinds[i]);
        }
        if (wanted("IQ4_NL")) {
            check_repack_pieces();
            check_repack_mm(be, pool2);
        }
        check_plain(be);
    }
    q8_set_simd(1);
    check_grids();
    check_repack_choice(be);
    check_refusals();
    par_destroy(pool2);
    ggml_backend_free(be);
    printf("%ld passed, %ld failed, %ld skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
