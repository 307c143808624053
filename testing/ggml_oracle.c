/*
 * ggml_oracle.c -- runs one kernel of llama.cpp b11669's ggml, in process, on
 * inputs read from files, and writes its output as raw bits, so a bankml test
 * can compare every bit of its own kernel with the reference.
 *
 * Why in process: llama-server only shows tokens; a kernel that is one ulp off
 * changes a token only now and then. Calling the shipped libggml-base.so and
 * the CPU backend the tools load (libggml-cpu-haswell.so by default) shows the
 * difference on the first row.
 *
 * Build (testing/oracle.mk, target build/ggml-oracle): compiled here with the
 * kit's headers, linked by name against the kit's libggml-base.so with
 * --allow-shlib-undefined (those libraries need a newer glibc than this
 * system's; they get it at run time from sid-run's loader). The CPU backend is
 * dlopen'ed from $GGML_BACKEND_PATH, which sid-run sets from LLAMA_ORACLE_CPU,
 * so this program uses the very backend the tools use.
 *
 * Usage: sid-run build/ggml-oracle [-t THREADS] OP ARGS... IN_FILES... OUT_FILE
 *
 *   types                                     one line per type: id name block bytes vec_dot_type
 *   quantize     TYPE K in.f32 out.bin        ggml_quantize_chunk (what llama-quantize does)
 *   quantize_cpu TYPE K in.f32 out.bin        the CPU backend's from_float (what mul_mat does to
 *                                             activations before vec_dot)
 *   dequantize   TYPE K in.bin out.f32        type traits to_float
 *   vec_dot      TYPE K x.bin y.bin out.f32   CPU type traits vec_dot of each row of x (TYPE) with
 *                                             each row of y (TYPE's vec_dot_type): out[c*R + r]
 *   mul_mat      TYPE K w.bin x.f32 out.f32   ggml_mul_mat(w, x) in a graph: w has M rows of K
 *                                             (TYPE), x has N columns of K (F32); out is N x M F32
 *   rms_norm     K EPS in.f32 out.f32         ggml_rms_norm over rows of K
 *   rms_norm_mul K EPS in.f32 w.f32 out.f32   ggml_mul(ggml_rms_norm(in), w) (llama's norm)
 *   rope_ext     D N_HEAD MODE BASE in.f32 pos.i32 out.f32
 *                                             ggml_rope_ext, in is D x N_HEAD x N_TOK, n_dims D,
 *                                             MODE 0 (llama) or 2 (neox: qwen3), freq_scale 1,
 *                                             ext_factor 0, attn_factor 1, beta 32/1
 *   swiglu       K gate.f32 up.f32 out.f32    ggml_swiglu_split(gate, up): silu(gate) * up
 *   soft_max     K N_TOK SCALE in.f32 mask.f16|- out.f32
 *                                             ggml_soft_max_ext; in is K x N_TOK x N_HEAD,
 *                                             mask K x N_TOK F16 (or - for none), max_bias 0
 *   flash_attn_ext D N_HEAD N_HEAD_KV SCALE q.f32 k.f16 v.f16 mask.f16 out.f32
 *                                             q is D x N_HEAD x N_TOK (F32), k and v are
 *                                             D x N_HEAD_KV x N_KV (F16, llama's cache layout),
 *                                             mask N_KV x N_TOK (F16); permuted as llama's
 *                                             build_attn_mha does, accumulator F32;
 *                                             out is D x N_HEAD x N_TOK F32
 *
 * TYPE is a ggml type name as ggml_type_name() prints it (f32, f16, bf16, q8_0, q1_0, q2_0, ...).
 * Counts not given (rows, tokens, heads of soft_max, KV length) come from the input file sizes.
 * -t sets the CPU backend's thread count for graph ops (default 1): it changes which thread
 * sums what, so it is part of what is reproduced. Exit status 0 on success, 2 on a usage or
 * input error (one line on stderr saying why).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

/* ---------------------------------------------------------------- the CPU backend */

/* The functions taken from the CPU backend library by dlsym. */
typedef struct {
    void *lib;
    ggml_backend_t (*backend_init)(void);
    void (*set_n_threads)(ggml_backend_t, int);
    const struct ggml_type_traits_cpu *(*traits_cpu)(enum ggml_type);
    void (*cpu_init)(void);
} CpuBackend;

static CpuBackend cpu;

/* Loads the backend the tools would load, so vec_dot and from_float are its SIMD versions. */
static int load_cpu(char *err, size_t errlen) {
    const char *path = getenv("GGML_BACKEND_PATH");
    if (!path || !*path) {
        snprintf(err, errlen, "GGML_BACKEND_PATH is not set: run this program under the kit's sid-run");
        return -1;
    }
    cpu.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!cpu.lib) {
        snprintf(err, errlen, "cannot load the CPU backend %s: %s", path, dlerror());
        return -1;
    }
    *(void **)&cpu.backend_init = dlsym(cpu.lib, "ggml_backend_cpu_init");
    *(void **)&cpu.set_n_threads = dlsym(cpu.lib, "ggml_backend_cpu_set_n_threads");
    *(void **)&cpu.traits_cpu = dlsym(cpu.lib, "ggml_get_type_traits_cpu");
    *(void **)&cpu.cpu_init = dlsym(cpu.lib, "ggml_cpu_init");
    if (!cpu.backend_init || !cpu.set_n_threads || !cpu.traits_cpu || !cpu.cpu_init) {
        snprintf(err, errlen, "%s lacks a CPU backend symbol", path);
        return -1;
    }
    cpu.cpu_init(); /* fills the F16 tables vec_dot and from_float read */
    return 0;
}

/* ---------------------------------------------------------------- files and arguments */

typedef struct {
    void *data;
    size_t size;
} Blob;

static int read_blob(const char *path, Blob *b, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    b->data = NULL;
    b->size = 0;
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, errlen, "%s: %s", path, buf ? "read error" : "out of memory");
        return -1;
    }
    b->data = buf;
    b->size = n;
    return 0;
}

static int write_out(const char *path, const void *data, size_t size, char *err, size_t errlen) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t put = size ? fwrite(data, 1, size, f) : 0;
    if (fclose(f) != 0 || put != size) {
        snprintf(err, errlen, "%s: write error", path);
        return -1;
    }
    return 0;
}

static int parse_type(const char *name, enum ggml_type *t, char *err, size_t errlen) {
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        const char *n = ggml_type_name((enum ggml_type)i);
        if (n && ggml_get_type_traits((enum ggml_type)i)->blck_size > 0 && strcasecmp(n, name) == 0) {
            *t = (enum ggml_type)i;
            return 0;
        }
    }
    snprintf(err, errlen, "unknown ggml type '%s' (try: types)", name);
    return -1;
}

static int parse_count(const char *s, int64_t *v, char *err, size_t errlen) {
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || *end || x <= 0 || x > (1LL << 40)) {
        snprintf(err, errlen, "'%s' is not a positive count", s);
        return -1;
    }
    *v = x;
    return 0;
}

static int parse_float(const char *s, float *v, char *err, size_t errlen) {
    char *end;
    errno = 0;
    *v = strtof(s, &end);
    if (errno || *end || end == s) {
        snprintf(err, errlen, "'%s' is not a number", s);
        return -1;
    }
    return 0;
}

/* How many rows of `row_bytes` a file of `size` bytes holds; an error if it is not whole. */
static int rows_of(const Blob *b, size_t row_bytes, const char *what, int64_t *rows, char *err,
                   size_t errlen) {
    if (row_bytes == 0 || b->size == 0 || b->size % row_bytes) {
        snprintf(err, errlen, "%s: %zu bytes is not a whole number of %zu-byte rows", what, b->size,
                 row_bytes);
        return -1;
    }
    *rows = (int64_t)(b->size / row_bytes);
    return 0;
}

/* Checks that a quantized row length is a whole number of blocks. */
static int check_blocks(enum ggml_type t, int64_t k, char *err, size_t errlen) {
    int64_t bs = ggml_blck_size(t);
    if (k % bs) {
        snprintf(err, errlen, "%s rows must be a multiple of %lld long, not %lld", ggml_type_name(t),
                 (long long)bs, (long long)k);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- graphs */

/* One small graph: tensors made in a no_alloc context, allocated on the CPU backend. */
typedef struct {
    struct ggml_context *ctx;
    ggml_backend_t backend;
    ggml_backend_buffer_t buf;
} Graph;

static int graph_open(Graph *g, char *err, size_t errlen) {
    struct ggml_init_params p = {
        .mem_size = ggml_tensor_overhead() * 64 + ggml_graph_overhead(),
        .mem_buffer = NULL,
        .no_alloc = true,
    };
    memset(g, 0, sizeof *g);
    g->ctx = ggml_init(p);
    g->backend = g->ctx ? cpu.backend_init() : NULL;
    if (!g->backend) {
        snprintf(err, errlen, "cannot start ggml's CPU backend");
        return -1;
    }
    return 0;
}

/* Allocates every tensor, copies the inputs in, computes `out` and copies it to a new buffer. */
static int graph_run(Graph *g, int threads, struct ggml_tensor **in, Blob *inb, int n_in,
                     struct ggml_tensor *out, Blob *res, char *err, size_t errlen) {
    struct ggml_cgraph *gf = ggml_new_graph(g->ctx);
    ggml_build_forward_expand(gf, out);
    g->buf = ggml_backend_alloc_ctx_tensors(g->ctx, g->backend);
    if (!g->buf) {
        snprintf(err, errlen, "cannot allocate the graph's tensors");
        return -1;
    }
    for (int i = 0; i < n_in; i++) {
        if (ggml_nbytes(in[i]) != inb[i].size) {
            snprintf(err, errlen, "input %d: %zu bytes, the tensor needs %zu", i, inb[i].size,
                     ggml_nbytes(in[i]));
            return -1;
        }
        ggml_backend_tensor_set(in[i], inb[i].data, 0, inb[i].size);
    }
    cpu.set_n_threads(g->backend, threads);
    if (ggml_backend_graph_compute(g->backend, gf) != GGML_STATUS_SUCCESS) {
        snprintf(err, errlen, "ggml_backend_graph_compute failed");
        return -1;
    }
    res->size = ggml_nbytes(out);
    res->data = malloc(res->size);
    if (!res->data) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    ggml_backend_tensor_get(out, res->data, 0, res->size);
    return 0;
}

static void graph_close(Graph *g) {
    if (g->buf)
        ggml_backend_buffer_free(g->buf);
    if (g->backend)
        ggml_backend_free(g->backend);
    if (g->ctx)
        ggml_free(g->ctx);
}

/* ---------------------------------------------------------------- operations */

#define MAX_IN 4

typedef struct {
    int threads;
    int argc;    /* operands after the op name */
    char **argv;
    Blob in[MAX_IN];
    Blob out;
    char *err;
    size_t errlen;
} Call;

/* Reads operands argv[first..first+n-1] as input files ("-" leaves an empty blob). */
static int read_inputs(Call *c, int first, int n) {
    for (int i = 0; i < n; i++) {
        if (strcmp(c->argv[first + i], "-") == 0)
            continue;
        if (read_blob(c->argv[first + i], &c->in[i], c->err, c->errlen))
            return -1;
    }
    return 0;
}

static int op_types(Call *c) {
    for (int i = 0; i < GGML_TYPE_COUNT; i++) {
        const struct ggml_type_traits *t = ggml_get_type_traits((enum ggml_type)i);
        if (!t->type_name || t->blck_size == 0)
            continue;
        const struct ggml_type_traits_cpu *tc = cpu.traits_cpu((enum ggml_type)i);
        printf("%d %s %lld %zu %s\n", i, t->type_name, (long long)t->blck_size, t->type_size,
               tc->vec_dot ? ggml_type_name(tc->vec_dot_type) : "-");
    }
    (void)c;
    return 0;
}

/* quantize / quantize_cpu: TYPE K in.f32 out.bin */
static int op_quantize(Call *c, int use_cpu) {
    enum ggml_type t;
    int64_t k, rows;
    if (parse_type(c->argv[0], &t, c->err, c->errlen) || parse_count(c->argv[1], &k, c->err, c->errlen) ||
        check_blocks(t, k, c->err, c->errlen) || read_inputs(c, 2, 1) ||
        rows_of(&c->in[0], (size_t)k * sizeof(float), "input", &rows, c->err, c->errlen))
        return -1;
    size_t row = ggml_row_size(t, k);
    c->out.size = row * (size_t)rows;
    c->out.data = calloc(1, c->out.size);
    if (!c->out.data)
        return snprintf(c->err, c->errlen, "out of memory"), -1;
    if (use_cpu) {
        ggml_from_float_t f = cpu.traits_cpu(t)->from_float;
        if (!f)
            return snprintf(c->err, c->errlen, "%s has no CPU from_float", ggml_type_name(t)), -1;
        for (int64_t r = 0; r < rows; r++)
            f((const float *)c->in[0].data + r * k, (char *)c->out.data + (size_t)r * row, k);
    } else {
        ggml_quantize_chunk(t, c->in[0].data, c->out.data, 0, rows, k, NULL);
    }
    return 0;
}

/* dequantize: TYPE K in.bin out.f32 */
static int op_dequantize(Call *c) {
    enum ggml_type t;
    int64_t k, rows;
    if (parse_type(c->argv[0], &t, c->err, c->errlen) || parse_count(c->argv[1], &k, c->err, c->errlen) ||
        check_blocks(t, k, c->err, c->errlen) || read_inputs(c, 2, 1) ||
        rows_of(&c->in[0], ggml_row_size(t, k), "input", &rows, c->err, c->errlen))
        return -1;
    ggml_to_float_t f = ggml_get_type_traits(t)->to_float;
    if (!f)
        return snprintf(c->err, c->errlen, "%s has no to_float", ggml_type_name(t)), -1;
    c->out.size = (size_t)rows * (size_t)k * sizeof(float);
    c->out.data = malloc(c->out.size);
    if (!c->out.data)
        return snprintf(c->err, c->errlen, "out of memory"), -1;
    for (int64_t r = 0; r < rows; r++)
        f((const char *)c->in[0].data + (size_t)r * ggml_row_size(t, k), (float *)c->out.data + r * k, k);
    return 0;
}

/* vec_dot: TYPE K x.bin y.bin out.f32 -- every row of x against every row of y. */
static int op_vec_dot(Call *c) {
    enum ggml_type t;
    int64_t k, nx, ny;
    if (parse_type(c->argv[0], &t, c->err, c->errlen) || parse_count(c->argv[1], &k, c->err, c->errlen) ||
        check_blocks(t, k, c->err, c->errlen))
        return -1;
    const struct ggml_type_traits_cpu *tc = cpu.traits_cpu(t);
    if (!tc->vec_dot)
        return snprintf(c->err, c->errlen, "%s has no CPU vec_dot", ggml_type_name(t)), -1;
    if (check_blocks(tc->vec_dot_type, k, c->err, c->errlen) || read_inputs(c, 2, 2) ||
        rows_of(&c->in[0], ggml_row_size(t, k), "x", &nx, c->err, c->errlen) ||
        rows_of(&c->in[1], ggml_row_size(tc->vec_dot_type, k), "y", &ny, c->err, c->errlen))
        return -1;
    c->out.size = (size_t)nx * (size_t)ny * sizeof(float);
    c->out.data = malloc(c->out.size);
    if (!c->out.data)
        return snprintf(c->err, c->errlen, "out of memory"), -1;
    float *o = c->out.data;
    for (int64_t j = 0; j < ny; j++)
        for (int64_t i = 0; i < nx; i++)
            tc->vec_dot((int)k, &o[j * nx + i], 0,
                        (const char *)c->in[0].data + (size_t)i * ggml_row_size(t, k), 0,
                        (const char *)c->in[1].data + (size_t)j * ggml_row_size(tc->vec_dot_type, k), 0, 1);
    return 0;
}

/* mul_mat: TYPE K w.bin x.f32 out.f32 */
static int op_mul_mat(Call *c) {
    enum ggml_type t;
    int64_t k, m, n;
    Graph g;
    if (parse_type(c->argv[0], &t, c->err, c->errlen) || parse_count(c->argv[1], &k, c->err, c->errlen) ||
        check_blocks(t, k, c->err, c->errlen) || read_inputs(c, 2, 2) ||
        rows_of(&c->in[0], ggml_row_size(t, k), "w", &m, c->err, c->errlen) ||
        rows_of(&c->in[1], (size_t)k * sizeof(float), "x", &n, c->err, c->errlen) ||
        graph_open(&g, c->err, c->errlen))
        return -1;
    struct ggml_tensor *in[2];
    in[0] = ggml_new_tensor_2d(g.ctx, t, k, m);
    in[1] = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, k, n);
    struct ggml_tensor *out = ggml_mul_mat(g.ctx, in[0], in[1]);
    int rc = graph_run(&g, c->threads, in, c->in, 2, out, &c->out, c->err, c->errlen);
    graph_close(&g);
    return rc;
}

/* rms_norm / rms_norm_mul: K EPS in.f32 [w.f32] out.f32 */
static int op_rms_norm(Call *c, int with_weight) {
    int64_t k, rows;
    float eps;
    Graph g;
    if (parse_count(c->argv[0], &k, c->err, c->errlen) || parse_float(c->argv[1], &eps, c->err, c->errlen) ||
        read_inputs(c, 2, with_weight ? 2 : 1) ||
        rows_of(&c->in[0], (size_t)k * sizeof(float), "input", &rows, c->err, c->errlen) ||
        graph_open(&g, c->err, c->errlen))
        return -1;
    struct ggml_tensor *in[2];
    in[0] = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, k, rows);
    struct ggml_tensor *out = ggml_rms_norm(g.ctx, in[0], eps);
    if (with_weight) {
        in[1] = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, k);
        out = ggml_mul(g.ctx, out, in[1]);
    }
    int rc = graph_run(&g, c->threads, in, c->in, with_weight ? 2 : 1, out, &c->out, c->err, c->errlen);
    graph_close(&g);
    return rc;
}

/* rope_ext: D N_HEAD MODE BASE in.f32 pos.i32 out.f32 */
static int op_rope(Call *c) {
    int64_t d, nh, mode, ntok, rows;
    float base;
    Graph g;
    if (parse_count(c->argv[0], &d, c->err, c->errlen) || parse_count(c->argv[1], &nh, c->err, c->errlen))
        return -1;
    mode = strtol(c->argv[2], NULL, 10);
    if (parse_float(c->argv[3], &base, c->err, c->errlen) || read_inputs(c, 4, 2) ||
        rows_of(&c->in[1], sizeof(int32_t), "pos", &ntok, c->err, c->errlen) ||
        rows_of(&c->in[0], (size_t)d * (size_t)nh * sizeof(float), "input", &rows, c->err, c->errlen))
        return -1;
    if (rows != ntok || d % 2)
        return snprintf(c->err, c->errlen, "input has %lld tokens, pos %lld (D must be even)", (long long)rows,
                        (long long)ntok), -1;
    if (graph_open(&g, c->err, c->errlen))
        return -1;
    struct ggml_tensor *in[2];
    in[0] = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, d, nh, ntok);
    in[1] = ggml_new_tensor_1d(g.ctx, GGML_TYPE_I32, ntok);
    /* n_ctx_orig only feeds YaRN's ramp, which ext_factor 0 turns off */
    struct ggml_tensor *out = ggml_rope_ext(g.ctx, in[0], in[1], NULL, (int)d, (int)mode, 4096, base, 1.0f,
                                            0.0f, 1.0f, 32.0f, 1.0f);
    int rc = graph_run(&g, c->threads, in, c->in, 2, out, &c->out, c->err, c->errlen);
    graph_close(&g);
    return rc;
}

/* swiglu: K gate.f32 up.f32 out.f32 */
static int op_swiglu(Call *c) {
    int64_t k, rows;
    Graph g;
    if (parse_count(c->argv[0], &k, c->err, c->errlen) || read_inputs(c, 1, 2) ||
        rows_of(&c->in[0], (size_t)k * sizeof(float), "gate", &rows, c->err, c->errlen) ||
        graph_open(&g, c->err, c->errlen))
        return -1;
    struct ggml_tensor *in[2];
    in[0] = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, k, rows);
    in[1] = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, k, rows);
    struct ggml_tensor *out = ggml_swiglu_split(g.ctx, in[0], in[1]);
    int rc = graph_run(&g, c->threads, in, c->in, 2, out, &c->out, c->err, c->errlen);
    graph_close(&g);
    return rc;
}

/* soft_max: K N_TOK SCALE in.f32 mask.f16|- out.f32 */
static int op_soft_max(Call *c) {
    int64_t k, ntok, rows;
    float scale;
    Graph g;
    if (parse_count(c->argv[0], &k, c->err, c->errlen) || parse_count(c->argv[1], &ntok, c->err, c->errlen) ||
        parse_float(c->argv[2], &scale, c->err, c->errlen) || read_inputs(c, 3, 2) ||
        rows_of(&c->in[0], (size_t)k * (size_t)ntok * sizeof(float), "input", &rows, c->err, c->errlen) ||
        graph_open(&g, c->err, c->errlen))
        return -1;
    int has_mask = c->in[1].data != NULL;
    struct ggml_tensor *in[2];
    in[0] = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, k, ntok, rows);
    in[1] = has_mask ? ggml_new_tensor_2d(g.ctx, GGML_TYPE_F16, k, ntok) : NULL;
    struct ggml_tensor *out = ggml_soft_max_ext(g.ctx, in[0], in[1], scale, 0.0f);
    int rc = graph_run(&g, c->threads, in, c->in, has_mask ? 2 : 1, out, &c->out, c->err, c->errlen);
    graph_close(&g);
    return rc;
}

/* flash_attn_ext: D N_HEAD N_HEAD_KV SCALE q.f32 k.f16 v.f16 mask.f16 out.f32 */
static int op_flash_attn(Call *c) {
    int64_t d, nh, nkv_h, ntok, nkv;
    float scale;
    Graph g;
    if (parse_count(c->argv[0], &d, c->err, c->errlen) || parse_count(c->argv[1], &nh, c->err, c->errlen) ||
        parse_count(c->argv[2], &nkv_h, c->err, c->errlen) || parse_float(c->argv[3], &scale, c->err, c->errlen) ||
        read_inputs(c, 4, 4) ||
        rows_of(&c->in[0], (size_t)d * (size_t)nh * sizeof(float), "q", &ntok, c->err, c->errlen) ||
        rows_of(&c->in[1], (size_t)d * (size_t)nkv_h * 2, "k", &nkv, c->err, c->errlen))
        return -1;
    if (nh % nkv_h)
        return snprintf(c->err, c->errlen, "%lld heads are not a multiple of %lld KV heads", (long long)nh,
                        (long long)nkv_h), -1;
    if (graph_open(&g, c->err, c->errlen))
        return -1;
    struct ggml_tensor *in[4];
    in[0] = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F32, d, nh, ntok);
    in[1] = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F16, d, nkv_h, nkv);
    in[2] = ggml_new_tensor_3d(g.ctx, GGML_TYPE_F16, d, nkv_h, nkv);
    in[3] = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F16, nkv, ntok);
    struct ggml_tensor *q = ggml_permute(g.ctx, in[0], 0, 2, 1, 3);
    struct ggml_tensor *k = ggml_permute(g.ctx, in[1], 0, 2, 1, 3);
    struct ggml_tensor *v = ggml_permute(g.ctx, in[2], 0, 2, 1, 3);
    struct ggml_tensor *out = ggml_flash_attn_ext(g.ctx, q, k, v, in[3], scale, 0.0f, 0.0f);
    ggml_prec_set_acc(out, GGML_PREC_F32);
    int rc = graph_run(&g, c->threads, in, c->in, 4, out, &c->out, c->err, c->errlen);
    graph_close(&g);
    return rc;
}

/* ---------------------------------------------------------------- main */

typedef struct {
    const char *name;
    int n_args; /* operands after the op name, the output file included */
    int (*fn)(Call *);
} Op;

static int op_quantize_ref(Call *c) { return op_quantize(c, 0); }
static int op_quantize_cpu(Call *c) { return op_quantize(c, 1); }
static int op_rms_plain(Call *c) { return op_rms_norm(c, 0); }
static int op_rms_mul(Call *c) { return op_rms_norm(c, 1); }

static const Op ops[] = {
    {"types", 0, op_types},
    {"quantize", 4, op_quantize_ref},
    {"quantize_cpu", 4, op_quantize_cpu},
    {"dequantize", 4, op_dequantize},
    {"vec_dot", 5, op_vec_dot},
    {"mul_mat", 5, op_mul_mat},
    {"rms_norm", 4, op_rms_plain},
    {"rms_norm_mul", 5, op_rms_mul},
    {"rope_ext", 7, op_rope},
    {"swiglu", 4, op_swiglu},
    {"soft_max", 6, op_soft_max},
    {"flash_attn_ext", 9, op_flash_attn},
};

static void usage(void) {
    fprintf(stderr, "usage: sid-run ggml-oracle [-t THREADS] OP ARGS... IN_FILES... OUT_FILE\nops:");
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        fprintf(stderr, " %s", ops[i].name);
    fprintf(stderr, "\n(see the comment at the top of testing/ggml_oracle.c)\n");
}

int main(int argc, char **argv) {
    char err[512] = "";
    Call c;
    memset(&c, 0, sizeof c);
    c.threads = 1;
    c.err = err;
    c.errlen = sizeof err;
    int a = 1;
    if (a + 1 < argc && strcmp(argv[a], "-t") == 0) {
        c.threads = atoi(argv[a + 1]);
        if (c.threads < 1 || c.threads > 512) {
            fprintf(stderr, "ggml-oracle: -t wants 1..512 threads\n");
            return 2;
        }
        a += 2;
    }
    if (a >= argc) {
        usage();
        return 2;
    }
    const Op *op = NULL;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(argv[a], ops[i].name) == 0)
            op = &ops[i];
    if (!op || argc - a - 1 != op->n_args) {
        if (op)
            fprintf(stderr, "ggml-oracle: %s takes %d operands\n", op->name, op->n_args);
        usage();
        return 2;
    }
    if (load_cpu(err, sizeof err)) {
        fprintf(stderr, "ggml-oracle: %s\n", err);
        return 2;
    }
    c.argc = op->n_args;
    c.argv = argv + a + 1;
    int rc = op->fn(&c);
    if (rc == 0 && op->n_args > 0)
        rc = write_out(c.argv[c.argc - 1], c.out.data, c.out.size, err, sizeof err);
    for (int i = 0; i < MAX_IN; i++)
        free(c.in[i].data);
    free(c.out.data);
    if (rc) {
        fprintf(stderr, "ggml-oracle: %s: %s\n", op->name, err);
        return 2;
    }
    return 0;
}
