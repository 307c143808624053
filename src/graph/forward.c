/*
 * forward.c -- the llama and qwen3 graphs, computed as llama.cpp b11669's
 * CPU backend computes them (see forward.h for the contract).
 *
 * Float order is everything here. Where the shipped libggml-cpu-haswell.so
 * fuses a multiply and an add (GCC contracted them, or an intrinsic does),
 * this file writes fmaf() explicitly; everywhere else it must NOT fuse, so
 * contraction is switched off for the whole file. The portable bodies are the
 * reference; the AVX2 versions (attention, SwiGLU, RMSNorm; chosen at run
 * time) only run independent per-element chains side by side in lanes, so
 * they give the same bits. RMSNorm, Q/K norm + RoPE, SwiGLU, the activation
 * quantization and attention run on the pool over whole rows or heads.
 */
#pragma GCC optimize("fp-contract=off")

#include "base/base.h"
#include "graph/forward.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/f16.h"
#include "ops/q1_0.h"
#include "ops/q2_0.h"
#include "ops/q8_0.h"

#define FW_TILE 64            /* ggml's GGML_FA_TILE_Q and GGML_FA_TILE_KV */
#define FW_SPLIT_KV_MIN 512   /* one-token steps split the cells from here */
#define FW_KV_PAD 256         /* llama.cpp pads n_ctx and n_kv to this */
#define FW_MAX_LLAMA_THREADS 256

#define INLINE static inline __attribute__((always_inline))

/* ---- weights ------------------------------------------------------------ */

/* One matrix as it lies in the map: rows of k values of one ggml type. */
typedef struct {
    uint32_t type;
    const uint8_t *data;
    size_t rows, k, row_bytes, size;
} fw_weight;

typedef struct {
    float *attn_norm, *ffn_norm, *q_norm, *k_norm;   /* owned copies (small) */
    fw_weight wq, wk, wv, wo, gate, up, down;
} fw_layer;

/* Per-worker attention scratch (floats). */
typedef struct {
    float *kt, *vt, *kq, *vkq, *qt, *ms, *part;
    uint16_t *vkq16;
} fw_scratch;

struct fw_model {
    fw_hparams hp;
    const gguf_map *map;
    const gguf_header *h;
    par_pool *pool;
    int own_pool;
    int llama_threads;
    size_t n_ctx, n_ubatch, n_past;
    size_t q_dim, kv_dim;
    fw_weight tok_embd, output;
    float *output_norm;
    fw_layer *layers;
    uint16_t *kcache, *vcache;   /* [layer][cell][kv_dim] f16 */
    /* activations for one micro-batch (token-major rows) */
    float *x, *xn, *q, *k, *v, *att, *ao, *g, *u, *fo, *xr, *rope;
    uint8_t *q8;
    size_t xr_len, q8_len;
    float *logits;              /* n_vocab: the last token's */
    fw_scratch *scr;
    int nscr;
    fw_tap_fn tap;
    void *tap_user;
    int simd;
    const fw_layer *cur;        /* the layer being evaluated (row jobs) */
};

/* ---- fw_plan ------------------------------------------------------------ */

static const gguf_kv *akv(const gguf_header *h, const char *arch, const char *key)
{
    char name[128];
    snprintf(name, sizeof name, "%s.%s", arch, key);
    return gguf_kv_find(h, name);
}

/* A required or optional u32 metadata value; -1 with a reason when it is
 * absent (required), an array, negative or too large. */
static int get_u32(const gguf_header *h, const char *arch, const char *key, int required,
                   uint32_t dflt, uint32_t *out, char *err, size_t errlen)
{
    const gguf_kv *kv = akv(h, arch, key);
    uint64_t u;
    if (!kv) {
        if (required) {
            bk_err(err, errlen, "%s.%s is missing", arch, key);
            return -1;
        }
        *out = dflt;
        return 0;
    }
    if (kv->type == GGUF_VT_ARRAY) {
        bk_err(err, errlen, "%s.%s: per-layer values are not supported", arch, key);
        return -1;
    }
    if (!gguf_kv_u64(kv, &u) || u > UINT32_MAX) {
        bk_err(err, errlen, "%s.%s is not an unsigned 32-bit integer", arch, key);
        return -1;
    }
    *out = (uint32_t)u;
    return 0;
}

static int get_f32(const gguf_header *h, const char *arch, const char *key, int required,
                   float dflt, float *out, char *err, size_t errlen)
{
    const gguf_kv *kv = akv(h, arch, key);
    double d;
    if (!kv) {
        if (required) {
            bk_err(err, errlen, "%s.%s is missing", arch, key);
            return -1;
        }
        *out = dflt;
        return 0;
    }
    if (kv->type == GGUF_VT_ARRAY || !gguf_kv_f64(kv, &d)) {
        bk_err(err, errlen, "%s.%s is not a number", arch, key);
        return -1;
    }
    *out = (float)d;
    return 0;
}

static int type_ok(uint32_t t)
{
    return t == GGUF_TYPE_F32 || t == GGUF_TYPE_F16 || t == GGUF_TYPE_BF16 ||
           t == GGUF_TYPE_Q8_0 || t == GGUF_TYPE_Q1_0 || t == GGUF_TYPE_Q2_0;
}

static int is_float_type(uint32_t t)
{
    return t == GGUF_TYPE_F32 || t == GGUF_TYPE_F16 || t == GGUF_TYPE_BF16;
}

/* Checks one tensor's presence, rank, shape and type. kind 0: a matrix
 * {d0, d1} of a supported weight type; kind 1: a vector {d0} of F32. */
static int check_tensor(const gguf_header *h, const char *name, int kind, uint64_t d0,
                        uint64_t d1, const gguf_tensor **out, char *err, size_t errlen)
{
    const gguf_tensor *t = gguf_tensor_find(h, name);
    char tb[16];
    if (!t) {
        bk_err(err, errlen, "%s is missing", name);
        return -1;
    }
    if (kind == 1) {
        if (t->n_dims != 1 || t->dims[0] != d0) {
            bk_err(err, errlen, "%s: shape is not {%llu}", name, (unsigned long long)d0);
            return -1;
        }
        if (t->type != GGUF_TYPE_F32) {
            bk_err(err, errlen, "%s: norm type %s is not supported (F32)", name,
                    gguf_type_name(t->type, tb));
            return -1;
        }
    } else {
        if (t->n_dims != 2 || t->dims[0] != d0 || t->dims[1] != d1) {
            bk_err(err, errlen, "%s: shape is not {%llu, %llu}", name, (unsigned long long)d0,
                    (unsigned long long)d1);
            return -1;
        }
        if (!type_ok(t->type)) {
            bk_err(err, errlen, "%s: type %s is not supported (F32, F16, BF16, Q8_0, Q1_0, Q2_0)",
                    name, gguf_type_name(t->type, tb));
            return -1;
        }
        uint64_t be = 0, bb = 0;
        if (!gguf_block_layout(t->type, &be, &bb) || d0 % be != 0) {
            bk_err(err, errlen, "%s: rows of %llu are not whole %s blocks", name,
                    (unsigned long long)d0, gguf_type_name(t->type, tb));
            return -1;
        }
        if (!is_float_type(t->type) && d0 % 32 != 0) {
            bk_err(err, errlen, "%s: rows of %llu are not whole q8_0 blocks", name,
                    (unsigned long long)d0);
            return -1;
        }
    }
    if (out) *out = t;
    return 0;
}

/* 1 when name is a tensor the graph reads (so anything else refuses). */
static int known_tensor(const char *name, uint32_t n_layer, int arch)
{
    static const char *top[] = { "token_embd.weight", "output_norm.weight", "output.weight" };
    static const char *blk[] = { "attn_norm.weight", "attn_q.weight", "attn_k.weight",
                                 "attn_v.weight", "attn_output.weight", "ffn_norm.weight",
                                 "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight" };
    for (size_t i = 0; i < sizeof top / sizeof *top; i++)
        if (strcmp(name, top[i]) == 0) return 1;
    if (strncmp(name, "blk.", 4) != 0) return 0;
    const char *p = name + 4;
    char *end;
    unsigned long il = strtoul(p, &end, 10);
    if (end == p || *end != '.' || il >= n_layer || (p[0] == '0' && end - p > 1)) return 0;
    const char *suf = end + 1;
    for (size_t i = 0; i < sizeof blk / sizeof *blk; i++)
        if (strcmp(suf, blk[i]) == 0) return 1;
    if (arch == FW_ARCH_QWEN3 &&
        (strcmp(suf, "attn_q_norm.weight") == 0 || strcmp(suf, "attn_k_norm.weight") == 0))
        return 1;
    return 0;
}

/* Why an unknown tensor refuses, in words a user can act on. */
static void unknown_reason(const char *name, char *err, size_t errlen)
{
    size_t n = strlen(name);
    if (strstr(name, "attn_qkv"))
        bk_err(err, errlen, "%s: fused QKV is not supported", name);
    else if (n > 5 && strcmp(name + n - 5, ".bias") == 0)
        bk_err(err, errlen, "%s: biases are not supported", name);
    else if (strstr(name, "rope_freqs") || strstr(name, "rope_factors"))
        bk_err(err, errlen, "%s: rope factors are not supported", name);
    else if (strstr(name, "_exps") || strstr(name, "ffn_gate_inp"))
        bk_err(err, errlen, "%s: experts are not supported", name);
    else if (strstr(name, "attn_q_norm") || strstr(name, "attn_k_norm"))
        bk_err(err, errlen, "%s: Q/K norms are not supported on this architecture", name);
    else
        bk_err(err, errlen, "%s: tensor not used by the graph", name);
}

int fw_plan(const gguf_header *h, fw_hparams *hp, char *err, size_t errlen)
{
    memset(hp, 0, sizeof *hp);
    const gguf_kv *akv0 = gguf_kv_find(h, "general.architecture");
    size_t alen = 0;
    const char *arch = gguf_kv_str(akv0, &alen);
    if (!arch) {
        bk_err(err, errlen, "general.architecture is missing");
        return -1;
    }
    if (strcmp(arch, "llama") == 0 && alen == 5) hp->arch = FW_ARCH_LLAMA;
    else if (strcmp(arch, "qwen3") == 0 && alen == 5) hp->arch = FW_ARCH_QWEN3;
    else {
        bk_err(err, errlen, "architecture %.64s is not supported (llama, qwen3)", arch);
        return -1;
    }
    uint32_t u;
    if (get_u32(h, arch, "context_length", 1, 0, &hp->n_ctx_train, err, errlen) ||
        get_u32(h, arch, "embedding_length", 1, 0, &hp->n_embd, err, errlen) ||
        get_u32(h, arch, "block_count", 1, 0, &hp->n_layer, err, errlen) ||
        get_u32(h, arch, "feed_forward_length", 1, 0, &hp->n_ff, err, errlen) ||
        get_u32(h, arch, "attention.head_count", 1, 0, &hp->n_head, err, errlen))
        return -1;
    if (hp->n_layer == 0 || hp->n_layer > 512) {
        bk_err(err, errlen, "%s.block_count %u is out of range (1 to 512)", arch, hp->n_layer);
        return -1;
    }
    if (hp->n_embd == 0 || hp->n_head == 0 || hp->n_ff == 0) {
        bk_err(err, errlen, "embedding, head count and feed-forward length must be positive");
        return -1;
    }
    if (get_u32(h, arch, "attention.head_count_kv", 0, hp->n_head, &hp->n_head_kv, err, errlen))
        return -1;
    if (hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv != 0) {
        bk_err(err, errlen, "%u heads are not a multiple of %u KV heads", hp->n_head, hp->n_head_kv);
        return -1;
    }
    if (get_u32(h, arch, "expert_count", 0, 0, &u, err, errlen)) return -1;
    if (u != 0) {
        bk_err(err, errlen, "experts are not supported (%s.expert_count %u)", arch, u);
        return -1;
    }
    const gguf_kv *ca = akv(h, arch, "attention.causal");
    uint64_t cv;
    if (ca && (!gguf_kv_u64(ca, &cv) || cv == 0)) {
        bk_err(err, errlen, "non-causal attention is not supported");
        return -1;
    }
    if (get_f32(h, arch, "attention.layer_norm_rms_epsilon", 1, 0, &hp->rms_eps, err, errlen))
        return -1;
    if (!(hp->rms_eps >= 0.0f)) {
        bk_err(err, errlen, "RMS epsilon is negative");
        return -1;
    }
    uint32_t dflt_head = hp->n_embd / hp->n_head, hk, hv, nrot;
    if (get_u32(h, arch, "attention.key_length", 0, dflt_head, &hk, err, errlen) ||
        get_u32(h, arch, "attention.value_length", 0, dflt_head, &hv, err, errlen))
        return -1;
    if (hk != hv) {
        bk_err(err, errlen, "value heads of %u differ from key heads of %u", hv, hk);
        return -1;
    }
    if (hk == 0 || hk % 2 != 0 || hk > 1024) {
        bk_err(err, errlen, "head size %u is not supported (even, 2 to 1024)", hk);
        return -1;
    }
    if (get_u32(h, arch, "rope.dimension_count", 0, hk, &nrot, err, errlen)) return -1;
    if (nrot != hk) {
        bk_err(err, errlen, "partial RoPE is not supported (%u of %u dimensions)", nrot, hk);
        return -1;
    }
    hp->head_dim = hk;
    hp->rope_neox = hp->arch == FW_ARCH_QWEN3;
    if (get_f32(h, arch, "rope.freq_base", 0, 10000.0f, &hp->rope_base, err, errlen)) return -1;
    if (!(hp->rope_base > 0.0f)) {
        bk_err(err, errlen, "RoPE base must be positive");
        return -1;
    }
    /* RoPE scaling as llama-model.cpp and llama-context.cpp derive it. */
    const gguf_kv *st = akv(h, arch, "rope.scaling.type");
    const char *stype = st ? gguf_kv_str(st, NULL) : "linear";
    if (!stype) {
        bk_err(err, errlen, "%s.rope.scaling.type is not a string", arch);
        return -1;
    }
    if (strcmp(stype, "none") == 0) hp->rope_scaling = FW_ROPE_NONE;
    else if (strcmp(stype, "linear") == 0) hp->rope_scaling = FW_ROPE_LINEAR;
    else if (strcmp(stype, "yarn") == 0) hp->rope_scaling = FW_ROPE_YARN;
    else {
        bk_err(err, errlen, "RoPE scaling %.32s is not supported (none, linear, yarn)", stype);
        return -1;
    }
    float factor = 0.0f, rope_attn = 1.0f;
    if (akv(h, arch, "rope.scaling.factor")) {
        if (get_f32(h, arch, "rope.scaling.factor", 1, 0, &factor, err, errlen)) return -1;
    } else if (get_f32(h, arch, "rope.scale_linear", 0, 0.0f, &factor, err, errlen)) {
        return -1;
    }
    if (get_f32(h, arch, "rope.scaling.attn_factor", 0, 1.0f, &rope_attn, err, errlen) ||
        get_u32(h, arch, "rope.scaling.original_context_length", 0, hp->n_ctx_train,
                &hp->n_ctx_orig, err, errlen))
        return -1;
    if (akv(h, arch, "rope.scaling.yarn_log_multiplier")) {
        bk_err(err, errlen, "YaRN log multiplier is not supported");
        return -1;
    }
    hp->freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
    if (hp->rope_scaling == FW_ROPE_NONE) hp->freq_scale = 1.0f;
    if (!(hp->freq_scale > 0.0f) || !isfinite(hp->freq_scale)) {
        bk_err(err, errlen, "RoPE scaling factor %g is not supported", (double)factor);
        return -1;
    }
    hp->ext_factor = hp->rope_scaling == FW_ROPE_YARN ? 1.0f : 0.0f;
    hp->attn_factor = 1.0f;
    hp->beta_fast = 32.0f;
    hp->beta_slow = 1.0f;
    if (hp->ext_factor != 0.0f) {
        /* llama-context: get_mscale(factor, 1) then the cancelling factor. */
        const float f = 1.0f / hp->freq_scale;
        float a = f <= 1.0f ? 1.0f : (0.1f * 1.0f * logf(f) + 1.0f);
        a *= 1.0f / (1.0f + 0.1f * logf(f));
        hp->attn_factor = a;
    }
    hp->attn_factor *= rope_attn;
    hp->kq_scale = 1.0f / sqrtf((float)hp->head_dim);

    /* Tensors: shapes and types, and nothing the graph would not read. */
    const gguf_tensor *te, *to = NULL;
    if (check_tensor(h, "token_embd.weight", 0, hp->n_embd, 0, NULL, err, errlen) &&
        !gguf_tensor_find(h, "token_embd.weight"))
        return -1;
    te = gguf_tensor_find(h, "token_embd.weight");
    if (te->n_dims != 2 || te->dims[0] != hp->n_embd || te->dims[1] == 0 ||
        te->dims[1] > INT32_MAX) {
        bk_err(err, errlen, "token_embd.weight: shape is not {%u, n_vocab}", hp->n_embd);
        return -1;
    }
    hp->n_vocab = (uint32_t)te->dims[1];
    if (check_tensor(h, "token_embd.weight", 0, hp->n_embd, hp->n_vocab, &te, err, errlen) ||
        check_tensor(h, "output_norm.weight", 1, hp->n_embd, 0, NULL, err, errlen))
        return -1;
    hp->type_embd = te->type;
    hp->tied = gguf_tensor_find(h, "output.weight") == NULL;
    if (!hp->tied &&
        check_tensor(h, "output.weight", 0, hp->n_embd, hp->n_vocab, &to, err, errlen))
        return -1;
    hp->type_output = hp->tied ? te->type : to->type;
    const uint64_t qd = (uint64_t)hp->head_dim * hp->n_head;
    const uint64_t kvd = (uint64_t)hp->head_dim * hp->n_head_kv;
    char nm[96];
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        struct { const char *s; int kind; uint64_t d0, d1; } want[] = {
            { "attn_norm.weight", 1, hp->n_embd, 0 },
            { "attn_q.weight", 0, hp->n_embd, qd },
            { "attn_k.weight", 0, hp->n_embd, kvd },
            { "attn_v.weight", 0, hp->n_embd, kvd },
            { "attn_output.weight", 0, qd, hp->n_embd },
            { "ffn_norm.weight", 1, hp->n_embd, 0 },
            { "ffn_gate.weight", 0, hp->n_embd, hp->n_ff },
            { "ffn_up.weight", 0, hp->n_embd, hp->n_ff },
            { "ffn_down.weight", 0, hp->n_ff, hp->n_embd },
            { "attn_q_norm.weight", 1, hp->head_dim, 0 },
            { "attn_k_norm.weight", 1, hp->head_dim, 0 },
        };
        size_t nw = hp->arch == FW_ARCH_QWEN3 ? 11 : 9;
        for (size_t i = 0; i < nw; i++) {
            snprintf(nm, sizeof nm, "blk.%u.%s", il, want[i].s);
            if (check_tensor(h, nm, want[i].kind, want[i].d0, want[i].d1, NULL, err, errlen))
                return -1;
        }
    }
    size_t expected = 2 + (hp->tied ? 0 : 1) +
                      (size_t)hp->n_layer * (hp->arch == FW_ARCH_QWEN3 ? 11 : 9);
    for (size_t i = 0; i < h->n_tensors; i++) {
        if (!known_tensor(h->tensors[i].name, hp->n_layer, hp->arch)) {
            unknown_reason(h->tensors[i].name, err, errlen);
            return -1;
        }
    }
    if (h->n_tensors != expected) {
        bk_err(err, errlen, "%zu tensors where the graph reads %zu (duplicates?)", h->n_tensors,
                expected);
        return -1;
    }
    return 0;
}

/* ---- ggml's vectorised exp, one lane at a time -------------------------- */

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* One lane of ggml_v_expf (AVX2): the same constants, fused steps and range
 * selection, so every lane gives the intrinsic's bits. */
INLINE float v_expf1(float x)
{
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const uint32_t e = f2u(z) << 23;
    const float k = u2f(e + f2u(1.0f));
    const int c = fabsf(n) > 126.0f;
    const float uu = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), uu,
                              fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                         uu, 0x1.ffffecp-1f * b);
    if (!c) return fmaf(k, j, k);
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = u2f(g + 0x7f000000u);
    const float s2 = u2f(e - g);
    if (fabsf(n) > 192.0f) return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

/* ggml_vec_swiglu_f32: silu(g) * u in lanes of 8 through ggml_v_silu, the
 * tail through libm's expf. */
INLINE void swiglu_body(float *y, const float *g, const float *u, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (size_t l = 0; l < 8; l++) {
            const float x = g[i + l];
            const float ex = v_expf1(0.0f - x);
            y[i + l] = (x / (1.0f + ex)) * u[i + l];
        }
    for (; i < n; i++) y[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}

static void swiglu_c(float *y, const float *g, const float *u, size_t n) { swiglu_body(y, g, u, n); }

/* ---- RMSNorm, RoPE ------------------------------------------------------ */

/* ggml_rms_norm then ggml_mul (or the fused pair: same bits): the sum of
 * float squares in double, mean rounded to float, (x * scale) * w. */
static void rms_norm_rows(float *y, const float *x, const float *w, size_t rows, size_t n,
                          float eps)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        double sum = 0.0;
        for (size_t i = 0; i < n; i++) sum += (double)(xr[i] * xr[i]);
        const float mean = (float)(sum / (double)(int64_t)n);
        const float scale = 1.0f / sqrtf(mean + eps);
        for (size_t i = 0; i < n; i++) yr[i] = (xr[i] * scale) * w[i];
    }
}

/* ggml_rope_yarn_corr_dims (libggml-base). */
static void yarn_corr_dims(int n_dims, int n_ctx_orig, float base, float beta_fast,
                           float beta_slow, float dims[2])
{
    float a = (float)n_dims * logf((float)n_ctx_orig / (beta_fast * 2 * (float)M_PI)) /
              (2 * logf(base));
    float b = (float)n_dims * logf((float)n_ctx_orig / (beta_slow * 2 * (float)M_PI)) /
              (2 * logf(base));
    float start = floorf(a), end = ceilf(b);
    dims[0] = start > 0.0f ? start : 0.0f;
    dims[1] = (float)(n_dims - 1) < end ? (float)(n_dims - 1) : end;
}

/* The cos/sin table of one position, as ggml_rope_cache_init: theta is the
 * position times theta_scale^(i/2) by repeated products, then rope_yarn
 * (with the binary's fused YaRN mix and magnitude term) and sincosf. */
static void rope_cache(const fw_hparams *hp, int64_t pos, float *cache)
{
    const int n_dims = (int)hp->head_dim;
    const float theta_scale = powf(hp->rope_base, -2.0f / (float)n_dims);
    float corr[2] = { 0.0f, 0.0f };
    if (hp->ext_factor != 0.0f)
        yarn_corr_dims(n_dims, (int)hp->n_ctx_orig, hp->rope_base, hp->beta_fast, hp->beta_slow,
                       corr);
    float theta = (float)pos;
    for (int i0 = 0; i0 < n_dims; i0 += 2) {
        const float theta_extrap = theta;
        const float theta_interp = hp->freq_scale * theta_extrap;
        float th = theta_interp, mscale = hp->attn_factor;
        if (hp->ext_factor != 0.0f) {
            const float lo = corr[0], hi = corr[1];
            const float d = hi - lo;
            const float y = ((float)(i0 / 2) - lo) / (0.001f > d ? 0.001f : d);
            const float ramp = y > 1.0f ? 0.0f : 1.0f - (y >= 0.0f ? y : 0.0f);
            const float ramp_mix = hp->ext_factor * ramp;
            th = fmaf(theta_interp, 1.0f - ramp_mix, theta_extrap * ramp_mix);
            mscale = mscale * fmaf(logf(1.0f / hp->freq_scale), 0.1f, 1.0f);
        }
        float s, c;
        sincosf(th, &s, &c);
        cache[i0] = c * mscale;
        cache[i0 + 1] = s * mscale;
        theta *= theta_scale;
    }
}

/* rotate_pairs: x0*cos - x1*sin and x0*sin + x1*cos, each with one fused
 * step as GCC compiled them (fma(x0, cos, -(x1*sin)), fma(x0, sin, x1*cos)). */
INLINE void rope_body(float *x, size_t n_tok, size_t n_heads, size_t hd, int neox,
                      const float *table)
{
    const size_t half = hd / 2;
    for (size_t t = 0; t < n_tok; t++) {
        const float *cache = table + t * hd;
        for (size_t h = 0; h < n_heads; h++) {
            float *row = x + (t * n_heads + h) * hd;
            for (size_t i0 = 0; i0 < hd; i0 += 2) {
                const float c = cache[i0], s = cache[i0 + 1];
                float *p0 = neox ? row + i0 / 2 : row + i0;
                float *p1 = neox ? p0 + half : p0 + 1;
                const float x0 = *p0, x1 = *p1;
                *p0 = fmaf(x0, c, -(x1 * s));
                *p1 = fmaf(x0, s, x1 * c);
            }
        }
    }
}

static void rope_rows(float *x, size_t n_tok, size_t n_heads, size_t hd, int neox,
                      const float *table)
{
    rope_body(x, n_tok, n_heads, hd, neox, table);
}

/* ---- matrix products ------------------------------------------------------ */

static int is_quant(uint32_t t) { return !is_float_type(t); }

static int q_init(const fw_weight *w, q8_mm *mm, const uint8_t *act, size_t act_len,
                  size_t n, float *y, char *err, size_t errlen, par_rows_fn *fn)
{
    switch (w->type) {
    case GGUF_TYPE_Q8_0:
        *fn = q8_0_mm_rows;
        return q8_0_mm_init(mm, w->data, w->size, w->rows, w->k, act, act_len, n, y,
                            n * w->rows, err, errlen);
    case GGUF_TYPE_Q1_0:
        *fn = q1_0_mm_rows;
        return q1_0_mm_init(mm, w->data, w->size, w->rows, w->k, act, act_len, n, y,
                            n * w->rows, err, errlen);
    case GGUF_TYPE_Q2_0:
        *fn = q2_0_mm_rows;
        return q2_0_mm_init(mm, w->data, w->size, w->rows, w->k, act, act_len, n, y,
                            n * w->rows, err, errlen);
    default:
        bk_err(err, errlen, "weight type %u has no kernel", w->type);
        return -1;
    }
}

static f16_matrix as_f16(const fw_weight *w)
{
    f16_matrix fm = { (int)w->type, w->data, w->rows, w->k, w->row_bytes, w->size };
    return fm;
}

/* The activation of a product, quantized to q8_0 or rounded to the weights'
 * float type, token row by token row (each row alone, on the pool). */
typedef struct {
    const float *x;
    uint8_t *q8;
    float *xr;
    size_t k, arow;
    int type;                    /* the float type (rounding), or -1 (q8_0) */
} quant_ctx;

static void quant_job(void *ctx, size_t r0, size_t r1, int worker)
{
    const quant_ctx *c = ctx;
    (void)worker;
    if (c->type >= 0) {
        f16_round_act(c->type, c->x + r0 * c->k, c->xr + r0 * c->k, (r1 - r0) * c->k);
        return;
    }
    for (size_t t = r0; t < r1; t++)
        q8_0_quantize_blocks(c->x + t * c->k, c->q8 + t * c->arow, c->k / Q8_0_BLOCK);
}

/* ys[i] = ws[i] x for n token rows of x (k = ws[0]->k each): one wake of the
 * pool when the matrices share a kind (all quantized, or one float type),
 * with the activation rounded or quantized once, as ggml does per product. */
static int mm_group(fw_model *m, const fw_weight *const *ws, float *const *ys, size_t nw,
                    const float *x, size_t n, char *err, size_t errlen)
{
    const size_t k = ws[0]->k;
    int all_q = 1, same_f = 1;
    for (size_t i = 0; i < nw; i++) {
        if (!is_quant(ws[i]->type)) all_q = 0;
        if (ws[i]->type != ws[0]->type) same_f = 0;
    }
    if (all_q) {
        const size_t arow = q8_0_row_bytes(k);
        if (arow * n > m->q8_len) {
            bk_err(err, errlen, "q8_0 scratch too small");
            return -1;
        }
        quant_ctx qc = { x, m->q8, NULL, k, arow, -1 };
        par_rows(m->pool, quant_job, &qc, n, 4);
        q8_mm mms[4];
        par_job jobs[4];
        for (size_t i = 0; i < nw; i++) {
            par_rows_fn fn;
            if (q_init(ws[i], &mms[i], m->q8, arow * n, n, ys[i], err, errlen, &fn)) return -1;
            jobs[i].fn = fn;
            jobs[i].ctx = &mms[i];
            jobs[i].rows = ws[i]->rows;
            jobs[i].chunk = q8_mm_chunk(&mms[i], m->pool);
        }
        par_jobs(m->pool, jobs, nw);
        return 0;
    }
    if (same_f) {
        if (k * n > m->xr_len) {
            bk_err(err, errlen, "rounding scratch too small");
            return -1;
        }
        quant_ctx qc = { x, NULL, m->xr, k, 0, (int)ws[0]->type };
        par_rows(m->pool, quant_job, &qc, n, 4);
        f16_matrix fm[4];
        for (size_t i = 0; i < nw; i++) fm[i] = as_f16(ws[i]);
        return f16_mul_mat_multi(m->pool, fm, nw, m->xr, n, ys, err, errlen);
    }
    for (size_t i = 0; i < nw; i++)
        if (mm_group(m, &ws[i], &ys[i], 1, x, n, err, errlen)) return -1;
    return 0;
}

/* ---- attention -------------------------------------------------------------- */

typedef struct {
    fw_model *m;
    const uint16_t *kc, *vc;     /* this layer's cache */
    size_t n_tok, first, n_kv, nblocks;
    int path;                    /* 0 reference, 1 tiled, 2 split-KV */
} attn_ctx;

/* flash_attn_ext_f16_one_chunk for one query row over cells [c0, c1):
 * Q rounded to f16, f16 dot products, online softmax with an f16 V
 * accumulator (scale and fused multiply-add rounded to f16 each step),
 * S = fma(S, ms, vs). Writes M, S and the widened accumulator (partial) or
 * the normalised row (out). */
INLINE void ref_row_body(const attn_ctx *a, fw_scratch *s, const float *q, size_t hkv,
                         size_t pos, size_t c0, size_t c1, float *out, float *partial)
{
    const fw_model *m = a->m;
    const size_t hd = m->hp.head_dim, kvd = m->kv_dim;
    const float scale = m->hp.kq_scale;
    float *qf = s->qt;
    uint16_t *acc = s->vkq16;
    for (size_t d = 0; d < hd; d++) qf[d] = f16_to_f32(f32_to_f16(q[d]));
    memset(acc, 0, hd * sizeof *acc);
    float S = 0.0f, M = -INFINITY;
    for (size_t ic = c0; ic < c1; ic++) {
        if (ic > pos) continue;   /* the causal mask: -inf cells are skipped */
        const uint16_t *kr = a->kc + ic * kvd + hkv * hd;
        const uint16_t *vr = a->vc + ic * kvd + hkv * hd;
        float sc = f16_vec_dot(F16_T_F16, kr, qf, hd);
        sc = sc * scale;
        sc = sc + 0.0f;
        const float Mold = M;
        float ms = 1.0f, vs = 1.0f;
        if (sc > M) {
            M = sc;
            ms = expf(Mold - M);
            for (size_t d = 0; d < hd; d++) acc[d] = f32_to_f16(f16_to_f32(acc[d]) * ms);
        } else {
            vs = expf(sc - M);
        }
        for (size_t d = 0; d < hd; d++)
            acc[d] = f32_to_f16(fmaf(f16_to_f32(vr[d]), vs, f16_to_f32(acc[d])));
        S = fmaf(S, ms, vs);
    }
    if (partial) {
        partial[0] = M;
        partial[1] = S;
        for (size_t d = 0; d < hd; d++) partial[2 + d] = f16_to_f32(acc[d]);
    } else {
        const float inv = S == 0.0f ? 0.0f : 1.0f / S;
        for (size_t d = 0; d < hd; d++) out[d] = f16_to_f32(acc[d]) * inv;
    }
}

/* flash_attn_ext_tiled for up to 64 query rows of one head: f32 Q, K and V
 * tiles of 64 cells widened from f16, scores as one fused chain per cell,
 * scaled, masked; per row the tile maximum, rescale, ggml_v_expf softmax
 * summed lanes-then-double; V accumulated as one fused chain per cell. */
INLINE void tiled_body(const attn_ctx *a, fw_scratch *s, size_t head, size_t t0, size_t nr)
{
    const fw_model *m = a->m;
    const size_t hd = m->hp.head_dim, kvd = m->kv_dim, qd = m->q_dim;
    const size_t hkv = head / (m->hp.n_head / m->hp.n_head_kv);
    const float scale = m->hp.kq_scale;
    float *kt = s->kt, *vt = s->vt, *kq = s->kq, *vkq = s->vkq, *Ms = s->ms, *Ss = s->ms + FW_TILE;
    for (size_t r = 0; r < nr; r++) {
        Ms[r] = -INFINITY;
        Ss[r] = 0.0f;
    }
    memset(vkq, 0, nr * hd * sizeof(float));
    const size_t last_pos = a->first + t0 + nr - 1;
    for (size_t ic = 0; ic < a->n_kv && ic <= last_pos; ic += FW_TILE) {
        for (size_t tk = 0; tk < FW_TILE; tk++) {
            const uint16_t *kr = a->kc + (ic + tk) * kvd + hkv * hd;
            for (size_t d = 0; d < hd; d++) kt[tk * hd + d] = f16_to_f32(kr[d]);
        }
        for (size_t r = 0; r < nr; r++) {
            const size_t pos = a->first + t0 + r;
            if (pos < ic) { kq[r * FW_TILE] = NAN; continue; }   /* whole tile masked */
            const float *q = m->q + (t0 + r) * qd + head * hd;
            float *row = kq + r * FW_TILE;
            for (size_t tk = 0; tk < FW_TILE; tk++) {
                const float *kr = kt + tk * hd;
                float acc = 0.0f;
                for (size_t d = 0; d < hd; d++) acc = fmaf(kr[d], q[d], acc);
                acc = acc * scale;
                row[tk] = ic + tk <= pos ? acc + 0.0f : acc + -INFINITY;
            }
            float mx = -INFINITY;
            for (size_t tk = 0; tk < FW_TILE; tk++) mx = row[tk] > mx ? row[tk] : mx;
            const float Mold = Ms[r];
            const float Mnew = fmaxf(Mold, mx);
            if (Mnew > Mold) {
                const float ms = expf(Mold - Mnew);
                float *acc = vkq + r * hd;
                for (size_t d = 0; d < hd; d++) acc[d] = acc[d] * ms;
                Ss[r] *= ms;
            }
            Ms[r] = Mnew;
            double sum = 0.0;
            for (size_t tk = 0; tk < FW_TILE; tk += 8) {
                float l[8];
                for (int i = 0; i < 8; i++) {
                    l[i] = v_expf1(row[tk + i] - Mnew);
                    row[tk + i] = l[i];
                }
                const float s8 = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
                sum += (double)s8;
            }
            Ss[r] = (float)((double)Ss[r] + sum);
        }
        for (size_t tk = 0; tk < FW_TILE; tk++) {
            const uint16_t *vr = a->vc + (ic + tk) * kvd + hkv * hd;
            for (size_t d = 0; d < hd; d++) vt[tk * hd + d] = f16_to_f32(vr[d]);
        }
        for (size_t r = 0; r < nr; r++) {
            if (a->first + t0 + r < ic) continue;
            const float *p = kq + r * FW_TILE;
            float *acc = vkq + r * hd;
            for (size_t tk = 0; tk < FW_TILE; tk++) {
                const float w = p[tk];
                const float *vr = vt + tk * hd;
                for (size_t d = 0; d < hd; d++) acc[d] = fmaf(vr[d], w, acc[d]);
            }
        }
    }
    for (size_t r = 0; r < nr; r++) {
        const float inv = Ss[r] == 0.0f ? 0.0f : 1.0f / Ss[r];
        float *out = m->att + (t0 + r) * qd + head * hd;
        const float *acc = vkq + r * hd;
        for (size_t d = 0; d < hd; d++) out[d] = acc[d] * inv;
    }
}

/* The split-KV decode (one query row, n_kv >= 512): the cells cut into
 * llama_threads chunks, a reference pass per chunk, then the partials merged
 * in chunk order with the binary's fused steps. */
INLINE void split_body(const attn_ctx *a, fw_scratch *s, size_t head)
{
    const fw_model *m = a->m;
    const size_t hd = m->hp.head_dim, qd = m->q_dim;
    const size_t hkv = head / (m->hp.n_head / m->hp.n_head_kv);
    const size_t nth = (size_t)m->llama_threads;
    const size_t cs = (a->n_kv + nth - 1) / nth;
    const size_t pos = a->first;
    const float *q = m->q + head * hd;
    float *fin = s->vkq;
    float Mf = -INFINITY, Sf = 0.0f;
    memset(fin, 0, hd * sizeof(float));
    for (size_t c = 0; c < nth; c++) {
        const size_t c0 = c * cs;
        if (c0 >= a->n_kv) continue;
        const size_t c1 = c0 + cs < a->n_kv ? c0 + cs : a->n_kv;
        float *part = s->part;
        ref_row_body(a, s, q, hkv, pos, c0, c1, NULL, part);
        const float Mc = part[0], Sc = part[1];
        if (Sc == 0.0f) continue;
        const float Mn = fmaxf(Mf, Mc);
        const float so = expf(Mf - Mn);
        const float sn = expf(Mc - Mn);
        for (size_t d = 0; d < hd; d++) fin[d] = fmaf(fin[d], so, part[2 + d] * sn);
        Sf = fmaf(Sf, so, Sc * sn);
        Mf = Mn;
    }
    if (Sf != 0.0f) {
        const float inv = 1.0f / Sf;
        for (size_t d = 0; d < hd; d++) fin[d] = fin[d] * inv;
    }
    memcpy(m->att + head * hd, fin, hd * sizeof(float));
    (void)qd;
}

INLINE void attn_job_body(void *ctx, size_t r0, size_t r1, int worker)
{
    const attn_ctx *a = ctx;
    fw_model *m = a->m;
    fw_scratch *s = &m->scr[worker];
    const size_t hd = m->hp.head_dim, qd = m->q_dim;
    const size_t grp = m->hp.n_head / m->hp.n_head_kv;
    for (size_t j = r0; j < r1; j++) {
        if (a->path == 2) {
            split_body(a, s, j);
        } else if (a->path == 1) {
            const size_t head = j / a->nblocks, b = j % a->nblocks;
            const size_t t0 = b * FW_TILE;
            const size_t nr = a->n_tok - t0 < FW_TILE ? a->n_tok - t0 : FW_TILE;
            tiled_body(a, s, head, t0, nr);
        } else {
            const size_t head = j / a->n_tok, t = j % a->n_tok;
            ref_row_body(a, s, m->q + t * qd + head * hd, head / grp, a->first + t, 0, a->n_kv,
                         m->att + t * qd + head * hd, NULL);
        }
    }
}

static void attn_job_c(void *ctx, size_t r0, size_t r1, int worker)
{
    attn_job_body(ctx, r0, r1, worker);
}

/* ---- the same kernels in AVX2 lanes --------------------------------------------
 *
 * Everything below computes each element with exactly the operations of the
 * portable bodies above, in the same order: vector lanes only ever run
 * independent chains side by side (eight cells' score chains, eight columns'
 * V chains, eight elements of an f16 accumulator), never a sum split across
 * lanes. f16 <-> f32 goes through F16C, which rounds to nearest even as
 * f32_to_f16() does. Chosen at run time with q8_simd() (AVX2 + FMA + F16C). */

#if defined(__x86_64__) || defined(__i386__)
#define FW_X86 1
#include <immintrin.h>
#define AVX_TARGET __attribute__((target("avx2,fma,f16c")))
#define AVX_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* ggml_v_expf in eight lanes: v_expf1() lane for lane (fnmadd(n, c, x) is
 * fma(-n, c, x) exactly: negation commutes with rounding). */
AVX_INLINE __m256 v_expf8(__m256 x)
{
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3f800000)));
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 c = _mm256_cmp_ps(an, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
    const __m256 uu = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b,
                                        _mm256_set1_ps(0x1.573e2ep-5f)),
                        uu,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b,
                                        _mm256_set1_ps(0x1.fffdb6p-2f))),
        uu, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    const __m256 near = _mm256_fmadd_ps(k, j, k);
    if (!_mm256_movemask_ps(c)) return near;
    const __m256i g = _mm256_and_si256(
        _mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
        _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256 big = _mm256_cmp_ps(an, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 far = _mm256_blendv_ps(_mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1),
                                        _mm256_mul_ps(s1, s1), big);
    return _mm256_blendv_ps(near, far, c);
}

AVX_INLINE float h16(uint16_t h) { return _cvtsh_ss(h); }
AVX_INLINE uint16_t r16(float f) { return (uint16_t)_cvtss_sh(f, 0); }
AVX_INLINE __m256 ld16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}
AVX_INLINE void st16(uint16_t *p, __m256 v)
{
    _mm_storeu_si128((__m128i *)(void *)p, _mm256_cvtps_ph(v, 0));
}

/* swiglu_body() in lanes: silu through v_expf8, the tail through expf. */
AVX_TARGET static void swiglu_avx(float *y, const float *g, const float *u, size_t n)
{
    size_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 ex = v_expf8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, ex)),
                                              _mm256_loadu_ps(u + i)));
    }
    for (; i < n; i++) y[i] = (g[i] / (1.0f + expf(-g[i]))) * u[i];
}

/* ref_row_body() with the f16 accumulator eight elements at a time. */
AVX_TARGET static void ref_row_avx(const attn_ctx *a, fw_scratch *s, const float *q, size_t hkv,
                                   size_t pos, size_t c0, size_t c1, float *out, float *partial)
{
    const fw_model *m = a->m;
    const size_t hd = m->hp.head_dim, kvd = m->kv_dim, h8 = hd / 8 * 8;
    const float scale = m->hp.kq_scale;
    float *qf = s->qt;
    uint16_t *acc = s->vkq16;
    size_t d;
    for (d = 0; d < h8; d += 8) {
        _mm256_storeu_ps(qf + d, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(q + d), 0)));
    }
    for (; d < hd; d++) qf[d] = h16(r16(q[d]));
    memset(acc, 0, hd * sizeof *acc);
    float S = 0.0f, M = -INFINITY;
    const size_t end = c1 < pos + 1 ? c1 : pos + 1;   /* cells past pos are masked */
    for (size_t ic = c0; ic < end; ic++) {
        const uint16_t *kr = a->kc + ic * kvd + hkv * hd;
        const uint16_t *vr = a->vc + ic * kvd + hkv * hd;
        float sc = f16_vec_dot(F16_T_F16, kr, qf, hd);
        sc = sc * scale;
        sc = sc + 0.0f;
        const float Mold = M;
        float ms = 1.0f, vs = 1.0f;
        if (sc > M) {
            M = sc;
            ms = expf(Mold - M);
            const __m256 vms = _mm256_set1_ps(ms);
            for (d = 0; d < h8; d += 8) {
                const __m256 t = _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(ld16(acc + d), vms), 0));
                st16(acc + d, _mm256_fmadd_ps(ld16(vr + d), _mm256_set1_ps(vs), t));
            }
            for (; d < hd; d++) {
                acc[d] = r16(h16(acc[d]) * ms);
                acc[d] = r16(fmaf(h16(vr[d]), vs, h16(acc[d])));
            }
        } else {
            vs = expf(sc - M);
            const __m256 vvs = _mm256_set1_ps(vs);
            for (d = 0; d < h8; d += 8)
                st16(acc + d, _mm256_fmadd_ps(ld16(vr + d), vvs, ld16(acc + d)));
            for (; d < hd; d++) acc[d] = r16(fmaf(h16(vr[d]), vs, h16(acc[d])));
        }
        S = fmaf(S, ms, vs);
    }
    if (partial) {
        partial[0] = M;
        partial[1] = S;
        for (d = 0; d < h8; d += 8) _mm256_storeu_ps(partial + 2 + d, ld16(acc + d));
        for (; d < hd; d++) partial[2 + d] = h16(acc[d]);
    } else {
        const float inv = S == 0.0f ? 0.0f : 1.0f / S;
        const __m256 vinv = _mm256_set1_ps(inv);
        for (d = 0; d < h8; d += 8) _mm256_storeu_ps(out + d, _mm256_mul_ps(ld16(acc + d), vinv));
        for (; d < hd; d++) out[d] = h16(acc[d]) * inv;
    }
}

/* tiled_body() in lanes. The K tile is stored transposed (kt[d * 64 + cell])
 * so that eight cells' score chains run in one register, each still summed
 * over d in order; V chains run over eight columns at a time, each still
 * summed over the cells in order. hd is a multiple of 8 on this path. */
AVX_TARGET static void tiled_avx(const attn_ctx *a, fw_scratch *s, size_t head, size_t t0,
                                 size_t nr)
{
    const fw_model *m = a->m;
    const size_t hd = m->hp.head_dim, kvd = m->kv_dim, qd = m->q_dim;
    const size_t hkv = head / (m->hp.n_head / m->hp.n_head_kv);
    const __m256 vscale = _mm256_set1_ps(m->hp.kq_scale);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    float *kt = s->kt, *vt = s->vt, *kq = s->kq, *vkq = s->vkq, *Ms = s->ms, *Ss = s->ms + FW_TILE;
    for (size_t r = 0; r < nr; r++) {
        Ms[r] = -INFINITY;
        Ss[r] = 0.0f;
    }
    memset(vkq, 0, nr * hd * sizeof(float));
    const size_t last_pos = a->first + t0 + nr - 1;
    for (size_t ic = 0; ic < a->n_kv && ic <= last_pos; ic += FW_TILE) {
        for (size_t tk = 0; tk < FW_TILE; tk++) {
            const uint16_t *kr = a->kc + (ic + tk) * kvd + hkv * hd;
            for (size_t d = 0; d < hd; d += 8) {
                float l[8];
                _mm256_storeu_ps(l, ld16(kr + d));
                for (int i = 0; i < 8; i++) kt[(d + (size_t)i) * FW_TILE + tk] = l[i];
            }
        }
        for (size_t r = 0; r < nr; r++) {
            const size_t pos = a->first + t0 + r;
            if (pos < ic) { kq[r * FW_TILE] = NAN; continue; }   /* whole tile masked */
            const float *q = m->q + (t0 + r) * qd + head * hd;
            float *row = kq + r * FW_TILE;
            __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0,
                   c6 = c0, c7 = c0;
            for (size_t d = 0; d < hd; d++) {
                const __m256 qb = _mm256_set1_ps(q[d]);
                const float *k = kt + d * FW_TILE;
                c0 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 0), qb, c0);
                c1 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 8), qb, c1);
                c2 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 16), qb, c2);
                c3 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 24), qb, c3);
                c4 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 32), qb, c4);
                c5 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 40), qb, c5);
                c6 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 48), qb, c6);
                c7 = _mm256_fmadd_ps(_mm256_loadu_ps(k + 56), qb, c7);
            }
            const __m256 cs[8] = { c0, c1, c2, c3, c4, c5, c6, c7 };
            /* cells ic + tk with tk > pos - ic are masked (-inf added) */
            const long lim = pos - ic >= FW_TILE ? FW_TILE : (long)(pos - ic);
            __m256 mx = ninf;
            for (int g = 0; g < 8; g++) {
                const __m256i idx = _mm256_add_epi32(lane, _mm256_set1_epi32(8 * g));
                const __m256 masked = _mm256_castsi256_ps(
                    _mm256_cmpgt_epi32(idx, _mm256_set1_epi32((int)lim)));
                const __m256 add = _mm256_blendv_ps(_mm256_setzero_ps(), ninf, masked);
                const __m256 v = _mm256_add_ps(_mm256_mul_ps(cs[g], vscale), add);
                _mm256_storeu_ps(row + 8 * g, v);
                mx = _mm256_max_ps(v, mx);
            }
            float ml[8];
            _mm256_storeu_ps(ml, mx);
            float mxs = -INFINITY;
            for (int i = 0; i < 8; i++) mxs = ml[i] > mxs ? ml[i] : mxs;
            const float Mold = Ms[r];
            const float Mnew = fmaxf(Mold, mxs);
            if (Mnew > Mold) {
                const float ms = expf(Mold - Mnew);
                const __m256 vms = _mm256_set1_ps(ms);
                float *acc = vkq + r * hd;
                for (size_t d = 0; d < hd; d += 8)
                    _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), vms));
                Ss[r] *= ms;
            }
            Ms[r] = Mnew;
            const __m256 vm = _mm256_set1_ps(Mnew);
            double sum = 0.0;
            for (size_t tk = 0; tk < FW_TILE; tk += 8) {
                const __m256 l = v_expf8(_mm256_sub_ps(_mm256_loadu_ps(row + tk), vm));
                _mm256_storeu_ps(row + tk, l);
                /* ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) */
                const __m128 h = _mm_add_ps(_mm256_castps256_ps128(l), _mm256_extractf128_ps(l, 1));
                const __m128 h2 = _mm_add_ps(h, _mm_movehl_ps(h, h));
                const float s8 = _mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2)));
                sum += (double)s8;
            }
            Ss[r] = (float)((double)Ss[r] + sum);
        }
        for (size_t tk = 0; tk < FW_TILE; tk++) {
            const uint16_t *vr = a->vc + (ic + tk) * kvd + hkv * hd;
            for (size_t d = 0; d < hd; d += 8) _mm256_storeu_ps(vt + tk * hd + d, ld16(vr + d));
        }
        for (size_t r = 0; r < nr; r++) {
            if (a->first + t0 + r < ic) continue;
            const float *p = kq + r * FW_TILE;
            float *acc = vkq + r * hd;
            size_t d = 0;
            for (; d + 32 <= hd; d += 32) {
                __m256 a0 = _mm256_loadu_ps(acc + d), a1 = _mm256_loadu_ps(acc + d + 8),
                       a2 = _mm256_loadu_ps(acc + d + 16), a3 = _mm256_loadu_ps(acc + d + 24);
                for (size_t tk = 0; tk < FW_TILE; tk++) {
                    const __m256 w = _mm256_set1_ps(p[tk]);
                    const float *v = vt + tk * hd + d;
                    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(v), w, a0);
                    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(v + 8), w, a1);
                    a2 = _mm256_fmadd_ps(_mm256_loadu_ps(v + 16), w, a2);
                    a3 = _mm256_fmadd_ps(_mm256_loadu_ps(v + 24), w, a3);
                }
                _mm256_storeu_ps(acc + d, a0);
                _mm256_storeu_ps(acc + d + 8, a1);
                _mm256_storeu_ps(acc + d + 16, a2);
                _mm256_storeu_ps(acc + d + 24, a3);
            }
            for (; d < hd; d += 8) {
                __m256 a0 = _mm256_loadu_ps(acc + d);
                for (size_t tk = 0; tk < FW_TILE; tk++)
                    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(vt + tk * hd + d),
                                         _mm256_set1_ps(p[tk]), a0);
                _mm256_storeu_ps(acc + d, a0);
            }
        }
    }
    for (size_t r = 0; r < nr; r++) {
        const float inv = Ss[r] == 0.0f ? 0.0f : 1.0f / Ss[r];
        const __m256 vinv = _mm256_set1_ps(inv);
        float *out = m->att + (t0 + r) * qd + head * hd;
        const float *acc = vkq + r * hd;
        for (size_t d = 0; d < hd; d += 8)
            _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), vinv));
    }
}

/* split_body() over ref_row_avx(), the merge eight columns at a time. */
AVX_TARGET static void split_avx(const attn_ctx *a, fw_scratch *s, size_t head)
{
    const fw_model *m = a->m;
    const size_t hd = m->hp.head_dim, h8 = hd / 8 * 8;
    const size_t hkv = head / (m->hp.n_head / m->hp.n_head_kv);
    const size_t nth = (size_t)m->llama_threads;
    const size_t cs = (a->n_kv + nth - 1) / nth;
    const size_t pos = a->first;
    const float *q = m->q + head * hd;
    float *fin = s->vkq;
    float Mf = -INFINITY, Sf = 0.0f;
    size_t d;
    memset(fin, 0, hd * sizeof(float));
    for (size_t c = 0; c < nth; c++) {
        const size_t c0 = c * cs;
        if (c0 >= a->n_kv) continue;
        const size_t c1 = c0 + cs < a->n_kv ? c0 + cs : a->n_kv;
        float *part = s->part;
        ref_row_avx(a, s, q, hkv, pos, c0, c1, NULL, part);
        const float Mc = part[0], Sc = part[1];
        if (Sc == 0.0f) continue;
        const float Mn = fmaxf(Mf, Mc);
        const float so = expf(Mf - Mn);
        const float sn = expf(Mc - Mn);
        const __m256 vso = _mm256_set1_ps(so), vsn = _mm256_set1_ps(sn);
        for (d = 0; d < h8; d += 8)
            _mm256_storeu_ps(fin + d, _mm256_fmadd_ps(_mm256_loadu_ps(fin + d), vso,
                                                      _mm256_mul_ps(_mm256_loadu_ps(part + 2 + d), vsn)));
        for (; d < hd; d++) fin[d] = fmaf(fin[d], so, part[2 + d] * sn);
        Sf = fmaf(Sf, so, Sc * sn);
        Mf = Mn;
    }
    if (Sf != 0.0f) {
        const float inv = 1.0f / Sf;
        for (d = 0; d < hd; d++) fin[d] = fin[d] * inv;
    }
    memcpy(m->att + head * hd, fin, hd * sizeof(float));
}

AVX_TARGET static void attn_job_avx(void *ctx, size_t r0, size_t r1, int worker)
{
    const attn_ctx *a = ctx;
    fw_model *m = a->m;
    fw_scratch *s = &m->scr[worker];
    const size_t hd = m->hp.head_dim, qd = m->q_dim;
    const size_t grp = m->hp.n_head / m->hp.n_head_kv;
    for (size_t j = r0; j < r1; j++) {
        if (a->path == 2) {
            split_avx(a, s, j);
        } else if (a->path == 1) {
            const size_t head = j / a->nblocks, b = j % a->nblocks;
            const size_t t0 = b * FW_TILE;
            const size_t nr = a->n_tok - t0 < FW_TILE ? a->n_tok - t0 : FW_TILE;
            tiled_avx(a, s, head, t0, nr);
        } else {
            const size_t head = j / a->n_tok, t = j % a->n_tok;
            ref_row_avx(a, s, m->q + t * qd + head * hd, head / grp, a->first + t, 0, a->n_kv,
                        m->att + t * qd + head * hd, NULL);
        }
    }
}
#else
#define FW_X86 0
#endif

/* ---- row jobs on the pool --------------------------------------------------------
 *
 * RMSNorm, the per-head Q/K norm with RoPE, SwiGLU and the activation
 * quantization run over the pool, rows (or 8-aligned column segments of a
 * row) handed out whole: a row is computed exactly as alone. */

#if FW_X86
/* rms_norm_rows() for one row: the float squares eight at a time, widened
 * (exactly) and then summed one by one in double as before. */
AVX_TARGET static void rms_norm_avx(float *y, const float *x, const float *w, size_t rows,
                                    size_t n, float eps)
{
    const size_t n8 = n / 8 * 8;
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        double sum = 0.0;
        size_t i = 0;
        for (; i < n8; i += 8) {
            const __m256 v = _mm256_loadu_ps(xr + i);
            const __m256 sq = _mm256_mul_ps(v, v);
            double dl[8];
            _mm256_storeu_pd(dl, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
            _mm256_storeu_pd(dl + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
            for (int l = 0; l < 8; l++) sum += dl[l];
        }
        for (; i < n; i++) sum += (double)(xr[i] * xr[i]);
        const float mean = (float)(sum / (double)(int64_t)n);
        const float scale = 1.0f / sqrtf(mean + eps);
        const __m256 vs = _mm256_set1_ps(scale);
        for (i = 0; i < n8; i += 8)
            _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(xr + i), vs),
                                                   _mm256_loadu_ps(w + i)));
        for (; i < n; i++) yr[i] = (xr[i] * scale) * w[i];
    }
}

AVX_TARGET static void rope_rows_avx(float *x, size_t n_tok, size_t n_heads, size_t hd,
                                     int neox, const float *table)
{
    rope_body(x, n_tok, n_heads, hd, neox, table);   /* fmaf becomes one instruction */
}
#endif

/* RMSNorm of rows [r0, r1) of width n. */
typedef struct {
    float *y;
    const float *x, *w;
    size_t n;
    float eps;
    int simd;
} rms_ctx;

static void rms_job(void *ctx, size_t r0, size_t r1, int worker)
{
    const rms_ctx *c = ctx;
    (void)worker;
#if FW_X86
    if (c->simd) {
        rms_norm_avx(c->y + r0 * c->n, c->x + r0 * c->n, c->w, r1 - r0, c->n, c->eps);
        return;
    }
#endif
    rms_norm_rows(c->y + r0 * c->n, c->x + r0 * c->n, c->w, r1 - r0, c->n, c->eps);
}

/* Rows of rows x n; small batches stay on the caller (par_rows runs inline
 * when rows <= chunk). */
static void rms_pool(fw_model *m, float *y, const float *x, const float *w, size_t rows,
                     size_t n)
{
    rms_ctx c = { y, x, w, n, m->hp.rms_eps, m->simd };
    par_rows(m->pool, rms_job, &c, rows, 8);
}

/* The per-head rows of Q (first n_tok * n_head rows) then of K: qwen3's
 * head norm, then RoPE with the row's token's table. */
typedef struct {
    fw_model *m;
    size_t n_tok;
} qk_ctx;

static void qk_job(void *ctx, size_t r0, size_t r1, int worker)
{
    const qk_ctx *c = ctx;
    fw_model *m = c->m;
    const fw_hparams *hp = &m->hp;
    const size_t hd = hp->head_dim, nq = c->n_tok * hp->n_head;
    (void)worker;
    for (size_t j = r0; j < r1; j++) {
        const int is_q = j < nq;
        const size_t jj = is_q ? j : j - nq;
        const size_t nh = is_q ? hp->n_head : hp->n_head_kv;
        float *row = (is_q ? m->q : m->k) + jj * hd;
        const float *table = m->rope + (jj / nh) * hd;
        if (hp->arch == FW_ARCH_QWEN3) {
            const float *w = is_q ? m->cur->q_norm : m->cur->k_norm;
#if FW_X86
            if (m->simd) rms_norm_avx(row, row, w, 1, hd, hp->rms_eps);
            else
#endif
                rms_norm_rows(row, row, w, 1, hd, hp->rms_eps);
        }
#if FW_X86
        if (m->simd) rope_rows_avx(row, 1, 1, hd, hp->rope_neox, table);
        else
#endif
            rope_rows(row, 1, 1, hd, hp->rope_neox, table);
    }
}

/* SwiGLU over segments of FW_SEG columns (a multiple of 8, so the lanes of
 * 8 fall where they fall in a whole row; the last segment of a row takes the
 * scalar tail). */
#define FW_SEG 512
typedef struct {
    fw_model *m;
    size_t F, nseg;
} swiglu_ctx;

static void swiglu_job(void *ctx, size_t r0, size_t r1, int worker)
{
    const swiglu_ctx *c = ctx;
    float *g = c->m->g, *u = c->m->u;
    (void)worker;
    for (size_t j = r0; j < r1; j++) {
        const size_t t = j / c->nseg, c0 = (j % c->nseg) * FW_SEG;
        const size_t len = c->F - c0 < FW_SEG ? c->F - c0 : FW_SEG;
        float *gr = g + t * c->F + c0;
        const float *ur = u + t * c->F + c0;
#if FW_X86
        if (c->m->simd) { swiglu_avx(gr, gr, ur, len); continue; }
#endif
        swiglu_c(gr, gr, ur, len);
    }
}


/* ---- the model ---------------------------------------------------------------- */

static int bind_weight(fw_model *m, const char *name, fw_weight *w, char *err, size_t errlen)
{
    const gguf_tensor *t = gguf_tensor_find(m->h, name);
    if (!t) {
        bk_err(err, errlen, "%s is missing", name);
        return -1;
    }
    const uint8_t *p = gguf_map_tensor(m->map, m->h, t, err, errlen);
    if (!p) return -1;
    uint64_t off, len, be, bb;
    if (gguf_tensor_span(m->h, t, &off, &len, err, errlen)) return -1;
    if (!gguf_block_layout(t->type, &be, &bb)) {
        bk_err(err, errlen, "%s: type not readable", name);
        return -1;
    }
    w->type = t->type;
    w->data = p;
    w->k = (size_t)t->dims[0];
    w->rows = t->n_dims > 1 ? (size_t)t->dims[1] : 1;
    w->row_bytes = (size_t)(t->dims[0] / be * bb);
    w->size = (size_t)len;
    if ((uintptr_t)p % 4 != 0 && t->type == GGUF_TYPE_F32) {
        bk_err(err, errlen, "%s: F32 data is not 4-byte aligned", name);
        return -1;
    }
    return 0;
}

static float *copy_norm(fw_model *m, const char *name, size_t n, char *err, size_t errlen)
{
    fw_weight w;
    if (bind_weight(m, name, &w, err, errlen)) return NULL;
    float *v = malloc(n * sizeof(float));
    if (!v) {
        bk_err(err, errlen, "out of memory");
        return NULL;
    }
    memcpy(v, w.data, n * sizeof(float));
    return v;
}

static void *alloc0(size_t n, size_t size, int *fail)
{
    if (*fail) return NULL;
    if (n == 0) n = 1;
    if (n > SIZE_MAX / size) {
        *fail = 1;
        return NULL;
    }
    void *p = calloc(n, size);
    if (!p) *fail = 1;
    return p;
}

static size_t max3(size_t a, size_t b, size_t c)
{
    size_t x = a > b ? a : b;
    return x > c ? x : c;
}

void fw_close(fw_model *m)
{
    if (!m) return;
    if (m->layers) {
        for (uint32_t i = 0; i < m->hp.n_layer; i++) {
            free(m->layers[i].attn_norm);
            free(m->layers[i].ffn_norm);
            free(m->layers[i].q_norm);
            free(m->layers[i].k_norm);
        }
    }
    free(m->layers);
    free(m->output_norm);
    free(m->kcache);
    free(m->vcache);
    free(m->x); free(m->xn); free(m->q); free(m->k); free(m->v); free(m->att);
    free(m->ao); free(m->g); free(m->u); free(m->fo); free(m->xr); free(m->rope);
    free(m->q8); free(m->logits);
    if (m->scr) {
        for (int i = 0; i < m->nscr; i++) {
            free(m->scr[i].kt); free(m->scr[i].vt); free(m->scr[i].kq); free(m->scr[i].vkq);
            free(m->scr[i].qt); free(m->scr[i].ms); free(m->scr[i].part); free(m->scr[i].vkq16);
        }
        free(m->scr);
    }
    if (m->own_pool) par_destroy(m->pool);
    free(m);
}

int fw_open(fw_model **out, const gguf_map *map, const gguf_header *h, const fw_opts *opts,
            char *err, size_t errlen)
{
    *out = NULL;
    fw_model *m = calloc(1, sizeof *m);
    if (!m) {
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    if (fw_plan(h, &m->hp, err, errlen)) {
        free(m);
        return -1;
    }
    const fw_hparams *hp = &m->hp;
    m->map = map;
    m->h = h;
    size_t want = opts && opts->n_ctx ? opts->n_ctx : 512;
    if (want > ((size_t)1 << 24)) {
        bk_err(err, errlen, "context of %zu tokens is too large", want);
        free(m);
        return -1;
    }
    m->n_ctx = (want + FW_KV_PAD - 1) / FW_KV_PAD * FW_KV_PAD;
    m->llama_threads = opts && opts->llama_threads ? opts->llama_threads : 2;
    if (m->llama_threads < 1 || m->llama_threads > FW_MAX_LLAMA_THREADS) {
        bk_err(err, errlen, "llama threads %d out of range (1 to %d)", m->llama_threads,
                FW_MAX_LLAMA_THREADS);
        free(m);
        return -1;
    }
    m->n_ubatch = opts && opts->n_ubatch ? opts->n_ubatch : 512;
    if (m->n_ubatch > 65536) {
        bk_err(err, errlen, "micro-batch of %zu is too large", m->n_ubatch);
        free(m);
        return -1;
    }
    if (opts && opts->pool) {
        m->pool = opts->pool;
    } else {
        m->pool = par_create(opts && opts->n_threads > 1 ? opts->n_threads : 1, err, errlen);
        if (!m->pool) {
            free(m);
            return -1;
        }
        m->own_pool = 1;
    }
    m->simd = q8_simd();
    m->q_dim = (size_t)hp->head_dim * hp->n_head;
    m->kv_dim = (size_t)hp->head_dim * hp->n_head_kv;

    char nm[96];
    int fail = 0;
    m->layers = alloc0(hp->n_layer, sizeof *m->layers, &fail);
    if (fail) goto oom;
    if (bind_weight(m, "token_embd.weight", &m->tok_embd, err, errlen)) goto bad;
    if (hp->tied) m->output = m->tok_embd;
    else if (bind_weight(m, "output.weight", &m->output, err, errlen)) goto bad;
    if (!(m->output_norm = copy_norm(m, "output_norm.weight", hp->n_embd, err, errlen))) goto bad;
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        fw_layer *L = &m->layers[il];
#define W(field, suffix)                                                      \
        snprintf(nm, sizeof nm, "blk.%u." suffix, il);                        \
        if (bind_weight(m, nm, &L->field, err, errlen)) goto bad;
#define N(field, suffix, n)                                                   \
        snprintf(nm, sizeof nm, "blk.%u." suffix, il);                        \
        if (!(L->field = copy_norm(m, nm, n, err, errlen))) goto bad;
        N(attn_norm, "attn_norm.weight", hp->n_embd)
        N(ffn_norm, "ffn_norm.weight", hp->n_embd)
        W(wq, "attn_q.weight") W(wk, "attn_k.weight") W(wv, "attn_v.weight")
        W(wo, "attn_output.weight") W(gate, "ffn_gate.weight") W(up, "ffn_up.weight")
        W(down, "ffn_down.weight")
        if (hp->arch == FW_ARCH_QWEN3) {
            N(q_norm, "attn_q_norm.weight", hp->head_dim)
            N(k_norm, "attn_k_norm.weight", hp->head_dim)
        }
#undef W
#undef N
    }
    /* Sizes: every product below is bounded (n_ctx <= 2^24, dims <= 2^32,
     * checked before multiplying by alloc0). */
    size_t cache_elems = (size_t)hp->n_layer * m->n_ctx;
    if (m->kv_dim && cache_elems > SIZE_MAX / m->kv_dim) goto oom;
    cache_elems *= m->kv_dim;
    m->kcache = alloc0(cache_elems, sizeof(uint16_t), &fail);
    m->vcache = alloc0(cache_elems, sizeof(uint16_t), &fail);
    const size_t nu = m->n_ubatch;
    const size_t kmax = max3(hp->n_embd, m->q_dim, hp->n_ff);
    m->x = alloc0(nu * hp->n_embd, sizeof(float), &fail);
    m->xn = alloc0(nu * hp->n_embd, sizeof(float), &fail);
    m->ao = alloc0(nu * hp->n_embd, sizeof(float), &fail);
    m->fo = alloc0(nu * hp->n_embd, sizeof(float), &fail);
    m->q = alloc0(nu * m->q_dim, sizeof(float), &fail);
    m->att = alloc0(nu * m->q_dim, sizeof(float), &fail);
    m->k = alloc0(nu * m->kv_dim, sizeof(float), &fail);
    m->v = alloc0(nu * m->kv_dim, sizeof(float), &fail);
    m->g = alloc0(nu * hp->n_ff, sizeof(float), &fail);
    m->u = alloc0(nu * hp->n_ff, sizeof(float), &fail);
    m->xr_len = nu * kmax;
    m->xr = alloc0(m->xr_len, sizeof(float), &fail);
    m->q8_len = nu * q8_0_row_bytes((kmax + 31) / 32 * 32);
    m->q8 = alloc0(m->q8_len, 1, &fail);
    m->rope = alloc0(nu * hp->head_dim, sizeof(float), &fail);
    m->logits = alloc0(hp->n_vocab, sizeof(float), &fail);
    m->nscr = par_threads(m->pool);
    m->scr = alloc0((size_t)m->nscr, sizeof *m->scr, &fail);
    for (int i = 0; !fail && i < m->nscr; i++) {
        fw_scratch *s = &m->scr[i];
        const size_t hd = hp->head_dim;
        s->kt = alloc0(FW_TILE * hd, sizeof(float), &fail);
        s->vt = alloc0(FW_TILE * hd, sizeof(float), &fail);
        s->kq = alloc0(FW_TILE * FW_TILE, sizeof(float), &fail);
        s->vkq = alloc0(FW_TILE * hd, sizeof(float), &fail);
        s->qt = alloc0(hd, sizeof(float), &fail);
        s->ms = alloc0(2 * FW_TILE, sizeof(float), &fail);
        s->part = alloc0(2 + hd, sizeof(float), &fail);
        s->vkq16 = alloc0(hd, sizeof(uint16_t), &fail);
    }
    if (fail) goto oom;
    *out = m;
    return 0;
oom:
    bk_err(err, errlen, "out of memory");
bad:
    fw_close(m);
    return -1;
}

const fw_hparams *fw_hp(const fw_model *m) { return &m->hp; }
size_t fw_n_ctx(const fw_model *m) { return m->n_ctx; }
size_t fw_n_past(const fw_model *m) { return m->n_past; }
const float *fw_logits(const fw_model *m) { return m->logits; }
void fw_set_tap(fw_model *m, fw_tap_fn fn, void *user) { m->tap = fn; m->tap_user = user; }

void fw_truncate(fw_model *m, size_t n)
{
    if (n < m->n_past) m->n_past = n;
}

int32_t fw_argmax(const float *logits, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return (int32_t)best;
}

static void tap(fw_model *m, const char *name, int layer, const float *d, size_t rows,
                size_t width, size_t first)
{
    if (m->tap && rows) m->tap(m->tap_user, name, layer, d, rows, width, first);
}

/* Embedding rows by get_rows: float types widened, quantized dequantized. */
static int embed(fw_model *m, const int32_t *ids, size_t n, char *err, size_t errlen)
{
    const fw_weight *w = &m->tok_embd;
    const size_t E = m->hp.n_embd;
    for (size_t t = 0; t < n; t++) {
        const uint8_t *row = w->data + (size_t)ids[t] * w->row_bytes;
        float *y = m->x + t * E;
        int rc = 0;
        switch (w->type) {
        case GGUF_TYPE_F32: memcpy(y, row, E * sizeof(float)); break;
        case GGUF_TYPE_F16: f16_to_f32_row((const uint16_t *)(const void *)row, y, E); break;
        case GGUF_TYPE_BF16: bf16_to_f32_row((const uint16_t *)(const void *)row, y, E); break;
        case GGUF_TYPE_Q8_0: rc = q8_0_dequantize(row, w->row_bytes, E, y, err, errlen); break;
        case GGUF_TYPE_Q1_0: rc = q1_0_dequantize(row, w->row_bytes, E, y, err, errlen); break;
        case GGUF_TYPE_Q2_0: rc = q2_0_dequantize(row, w->row_bytes, E, y, err, errlen); break;
        default: bk_err(err, errlen, "embedding type %u", w->type); return -1;
        }
        if (rc) return -1;
    }
    return 0;
}

/* One micro-batch: n tokens at positions [first, first + n). out_rows: the
 * token rows whose logits are wanted (NULL with n_out 0: none). */
static int ubatch(fw_model *m, const int32_t *ids, size_t n, size_t first, int all,
                  float *logits_out, char *err, size_t errlen)
{
    const fw_hparams *hp = &m->hp;
    const size_t E = hp->n_embd, F = hp->n_ff, hd = hp->head_dim;
    const size_t qd = m->q_dim, kvd = m->kv_dim;
    const int simd = m->simd;
    if (embed(m, ids, n, err, errlen)) return -1;
    for (size_t t = 0; t < n; t++) rope_cache(hp, (int64_t)(first + t), m->rope + t * hd);
    /* n_kv as llama_kv_cache::get_n_kv: the used cells padded to 256. */
    const size_t used = first + n;
    size_t n_kv = (used + FW_KV_PAD - 1) / FW_KV_PAD * FW_KV_PAD;
    if (n_kv < FW_KV_PAD) n_kv = FW_KV_PAD;
    if (n_kv > m->n_ctx) n_kv = m->n_ctx;
    /* Output rows of the last layer: every row, the last, or none. */
    const int last_ubatch = logits_out != NULL || all;
    const size_t n_out = all ? n : (last_ubatch ? 1 : 0);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        const fw_layer *L = &m->layers[il];
        const size_t cache_off = (size_t)il * m->n_ctx * kvd;
        m->cur = L;
        rms_pool(m, m->xn, m->x, L->attn_norm, n, E);
        tap(m, "attn_norm", (int)il, m->xn, n, E, first);
        const fw_weight *qkv[3] = { &L->wq, &L->wk, &L->wv };
        float *const ys[3] = { m->q, m->k, m->v };
        if (mm_group(m, qkv, ys, 3, m->xn, n, err, errlen)) return -1;
        qk_ctx qk = { m, n };
        par_rows(m->pool, qk_job, &qk, n * (hp->n_head + hp->n_head_kv), 16);
        tap(m, "Qcur", (int)il, m->q, n, qd, first);
        tap(m, "Kcur", (int)il, m->k, n, kvd, first);
        tap(m, "Vcur", (int)il, m->v, n, kvd, first);
        f32_to_f16_row(m->k, m->kcache + cache_off + first * kvd, n * kvd);
        f32_to_f16_row(m->v, m->vcache + cache_off + first * kvd, n * kvd);
        attn_ctx a = { m, m->kcache + cache_off, m->vcache + cache_off, n, first, n_kv, 0, 0 };
        size_t jobs;
        if (n == 1 && n_kv >= FW_SPLIT_KV_MIN) {
            a.path = 2;
            jobs = hp->n_head;
        } else if (n >= FW_TILE && hd % 8 == 0) {
            a.path = 1;
            a.nblocks = (n + FW_TILE - 1) / FW_TILE;
            jobs = hp->n_head * a.nblocks;
        } else {
            a.path = 0;
            jobs = hp->n_head * n;
        }
#if FW_X86
        par_rows(m->pool, simd ? attn_job_avx : attn_job_c, &a, jobs, 1);
#else
        par_rows(m->pool, attn_job_c, &a, jobs, 1);
#endif
        tap(m, "kqv_out", (int)il, m->att, n, qd, first);
        const fw_weight *wo[1] = { &L->wo };
        float *const yo[1] = { m->ao };
        if (mm_group(m, wo, yo, 1, m->att, n, err, errlen)) return -1;
        tap(m, "attn_out", (int)il, m->ao, n, E, first);
        size_t rows = n;
        if (il == hp->n_layer - 1 && !all) {
            if (n_out == 0) return 0;       /* nothing reads the last layer's rows */
            memmove(m->ao, m->ao + (n - 1) * E, E * sizeof(float));
            memmove(m->x, m->x + (n - 1) * E, E * sizeof(float));
            rows = 1;
        }
        for (size_t i = 0; i < rows * E; i++) m->x[i] = m->ao[i] + m->x[i];
        tap(m, "ffn_inp", (int)il, m->x, rows, E, first);
        rms_pool(m, m->xn, m->x, L->ffn_norm, rows, E);
        tap(m, "ffn_norm", (int)il, m->xn, rows, E, first);
        const fw_weight *gu[2] = { &L->gate, &L->up };
        float *const yg[2] = { m->g, m->u };
        if (mm_group(m, gu, yg, 2, m->xn, rows, err, errlen)) return -1;
        swiglu_ctx sw = { m, F, (F + FW_SEG - 1) / FW_SEG };
        par_rows(m->pool, swiglu_job, &sw, rows * sw.nseg, 8);
        tap(m, "ffn_swiglu", (int)il, m->g, rows, F, first);
        const fw_weight *dn[1] = { &L->down };
        float *const yd[1] = { m->fo };
        if (mm_group(m, dn, yd, 1, m->g, rows, err, errlen)) return -1;
        tap(m, "ffn_out", (int)il, m->fo, rows, E, first);
        for (size_t i = 0; i < rows * E; i++) m->x[i] = m->fo[i] + m->x[i];
        tap(m, "l_out", (int)il, m->x, rows, E, first);
    }
    const size_t rows = all ? n : 1;
    rms_pool(m, m->xn, m->x, m->output_norm, rows, E);
    tap(m, "result_norm", -1, m->xn, rows, E, first);
    /* Logits, a bounded number of rows at a time (the q8 / rounding scratch
     * holds n_ubatch rows). */
    const fw_weight *ow[1] = { &m->output };
    float *dst = all ? logits_out : m->logits;
    float *const yl[1] = { dst };
    if (mm_group(m, ow, yl, 1, m->xn, rows, err, errlen)) return -1;
    tap(m, "result_output", -1, dst, rows, hp->n_vocab, first);
    if (!all) {
        if (logits_out && logits_out != m->logits)
            memcpy(logits_out, m->logits, hp->n_vocab * sizeof(float));
    } else {
        memcpy(m->logits, logits_out + (rows - 1) * hp->n_vocab, hp->n_vocab * sizeof(float));
    }
    return 0;
}

int fw_eval(fw_model *m, const int32_t *ids, size_t n, float *logits, int all, char *err,
            size_t errlen)
{
    if (n == 0) {
        bk_err(err, errlen, "no tokens to evaluate");
        return -1;
    }
    if (n > m->n_ctx - m->n_past) {
        bk_err(err, errlen, "the context holds %zu tokens; %zu + %zu do not fit", m->n_ctx,
                m->n_past, n);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= m->hp.n_vocab) {
            bk_err(err, errlen, "token id %d is outside the vocabulary of %u", (int)ids[i],
                    m->hp.n_vocab);
            return -1;
        }
    }
    if (all && !logits) {
        bk_err(err, errlen, "all logits asked without a buffer");
        return -1;
    }
    size_t done = 0;
    while (done < n) {
        const size_t nb = n - done < m->n_ubatch ? n - done : m->n_ubatch;
        const int last = done + nb == n;
        float *lo = all ? logits + done * m->hp.n_vocab : (last ? m->logits : NULL);
        if (ubatch(m, ids + done, nb, m->n_past + done, all, lo, err, errlen)) return -1;
        done += nb;
    }
    m->n_past += n;
    if (!all && logits) memcpy(logits, m->logits, m->hp.n_vocab * sizeof(float));
    return 0;
}

int fw_decode(fw_model *m, int32_t id, float *logits, char *err, size_t errlen)
{
    return fw_eval(m, &id, 1, logits, 0, err, errlen);
}

/* ---- KV save/restore for the host prompt cache ---- */

/* Layout of a saved prefix: for each layer, its n K rows, then its n V rows
 * (f16, kv_dim values each). Only the cells [0, n) are copied, so a short
 * conversation costs what it holds, not the whole cache. */
size_t fw_kv_bytes(const fw_model *m, size_t n)
{
    if (n > m->n_ctx) return 0;
    /* n <= n_ctx <= 2^24 and kv_dim, n_layer fit the cache that was allocated */
    return (size_t)m->hp.n_layer * 2 * n * m->kv_dim * sizeof(uint16_t);
}

int fw_kv_save(const fw_model *m, size_t n, void *buf, size_t len)
{
    if (n > m->n_past || len != fw_kv_bytes(m, n)) return -1;
    const size_t row = n * m->kv_dim;
    uint16_t *out = buf;
    for (uint32_t il = 0; il < m->hp.n_layer; il++) {
        const size_t off = (size_t)il * m->n_ctx * m->kv_dim;
        memcpy(out, m->kcache + off, row * sizeof(uint16_t));
        out += row;
        memcpy(out, m->vcache + off, row * sizeof(uint16_t));
        out += row;
    }
    return 0;
}

int fw_kv_restore(fw_model *m, size_t n, const void *buf, size_t len)
{
    if (n > m->n_ctx || len != fw_kv_bytes(m, n)) return -1;
    const size_t row = n * m->kv_dim;
    const uint16_t *in = buf;
    for (uint32_t il = 0; il < m->hp.n_layer; il++) {
        const size_t off = (size_t)il * m->n_ctx * m->kv_dim;
        memcpy(m->kcache + off, in, row * sizeof(uint16_t));
        in += row;
        memcpy(m->vcache + off, in, row * sizeof(uint16_t));
        in += row;
    }
    m->n_past = n;
    return 0;
}
