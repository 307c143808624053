/*
 * forward.c -- the llama, qwen2 and qwen3 graphs, computed as llama.cpp b11669's
 * CPU backend computes them (see forward.h for the contract): the planner,
 * the weights, a sequence, and the graph walk. The kernels it calls are in
 * src/ops (wtype.c's table for the matrix products, attn.c, vec.c); the
 * tensors each graph reads are in arch.c; the KV cache is kv.c.
 *
 * Float order is everything here. Where the shipped libggml-cpu-haswell.so
 * fuses a multiply and an add, the code writes fmaf() explicitly; everywhere
 * else it must NOT fuse, so contraction is switched off for the whole file
 * (the residual adds are the only float operations left in this file).
 */
#pragma GCC optimize("fp-contract=off")

#include "base/base.h"
#include "graph/forward.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/arch.h"
#include "graph/kv.h"
#include "ops/attn.h"
#include "ops/vec.h"
#include "ops/wtype.h"

#define FW_KV_PAD 256         /* llama.cpp pads n_ctx and n_kv to this */
#define FW_MAX_LLAMA_THREADS 256

/* ---- the weights and a sequence ------------------------------------------- */

struct fw_weights {
    fw_hparams hp;
    const fw_arch *arch;
    const gguf_map *map;
    const gguf_header *h;
    par_pool *pool;
    int own_pool;
    int llama_threads;
    size_t n_ubatch;
    size_t q_dim, kv_dim;
    int simd;
    int swa_small;              /* fw_opts.swa_small on a window model */
    fw_kv_info kvi;             /* the sequences' cache types and rotations */
    fw_top top;                 /* token_embd, output (tied: token_embd), output_norm */
    fw_layer *layers;
    uint8_t **owned;            /* load-time forms of matrices (wt_prepare), n_owned */
    size_t n_owned, owned_bytes;
};

static int fw_kv_types_open(fw_weights *w, const fw_opts *opts, char *err, size_t errlen);

struct fw_seq {
    const fw_weights *w;
    size_t n_ctx, n_past;
    kv_cache kv;
    kv_swa sw;                  /* the window layers' cells (swa_small), else empty */
    /* activations for one micro-batch (token-major rows) */
    float *x, *xn, *q, *k, *v, *att, *ao, *g, *u, *fo, *rope;
    float *rope_swa;            /* the window layers' RoPE tables (gemma3), or NULL */
    const float *rope_factors;  /* the RoPE frequency factors this sequence uses (llama_model::
                                   get_rope_factors: rope_freqs, else LongRoPE's long or short by
                                   n_ctx), or NULL */
    uint8_t *kcast, *vcast;     /* an f32 cache's layer cast to f16 for attention, or NULL */
    uint8_t *act;               /* a product's converted activations */
    size_t act_len;
    float *logits;              /* n_vocab: the last token's */
    attn_scratch *scr;
    fw_tap_fn tap;
    void *tap_user;
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

/* Why an unknown tensor refuses, in words a user can act on. */
static void unknown_reason(const char *name, char *err, size_t errlen)
{
    size_t n = strlen(name);
    if (strstr(name, "attn_qkv"))
        bk_err(err, errlen, "%s: fused QKV is not supported", name);
    else if (n > 5 && strcmp(name + n - 5, ".bias") == 0)
        bk_err(err, errlen, "%s: biases are not supported", name);
    else if (strstr(name, "rope_factors_long") || strstr(name, "rope_factors_short"))
        bk_err(err, errlen, "%s: LongRoPE factors (Phi-3 128k, Phi-3.5, Phi-4-mini) are not supported",
               name);
    else if (strstr(name, "rope_freqs") || strstr(name, "rope_factors"))
        bk_err(err, errlen, "%s: rope factors are not supported", name);
    else if (strstr(name, "_exps") || strstr(name, "ffn_gate_inp"))
        bk_err(err, errlen, "%s: experts are not supported", name);
    else if (strstr(name, "attn_q_norm") || strstr(name, "attn_k_norm"))
        bk_err(err, errlen, "%s: Q/K norms are not supported on this architecture", name);
    else
        bk_err(err, errlen, "%s: tensor not used by the graph", name);
}

/* Checks one tensor's presence, rank, shape and type. kind FW_MATRIX: a
 * matrix {d0, d1} of a weight type in the ops table; FW_NORM: a vector {d0}
 * of F32. */
static int check_tensor(const gguf_header *h, const char *name, int kind, uint64_t d0,
                        uint64_t d1, const gguf_tensor **out, char *err, size_t errlen)
{
    const gguf_tensor *t = gguf_tensor_find(h, name);
    char tb[16];
    if (!t) {
        bk_err(err, errlen, "%s is missing", name);
        return -1;
    }
    if (kind == FW_NORM) {
        if (t->n_dims != 1 || t->dims[0] != d0) {
            bk_err(err, errlen, "%s: shape is not {%llu}", name, (unsigned long long)d0);
            return -1;
        }
        if (t->type != GGUF_TYPE_F32) {
            const size_t n = strlen(name);
            const char *what = n > 5 && strcmp(name + n - 5, ".bias") == 0 ? "bias"
                               : strstr(name, "rope_freqs") || strstr(name, "rope_factors")
                                   ? "RoPE factor" : "norm";
            bk_err(err, errlen, "%s: %s type %s is not supported (F32)", name, what,
                   gguf_type_name(t->type, tb));
            return -1;
        }
    } else {
        if (t->n_dims != 2 || t->dims[0] != d0 || t->dims[1] != d1) {
            bk_err(err, errlen, "%s: shape is not {%llu, %llu}", name, (unsigned long long)d0,
                    (unsigned long long)d1);
            return -1;
        }
        const wt_type *wt = wt_find(t->type);
        if (!wt || !wt->weight) {
            char names[256];
            bk_err(err, errlen, "%s: type %s is not supported (%s)", name,
                   gguf_type_name(t->type, tb), wt_names(names, sizeof names));
            return -1;
        }
        uint64_t be = 0, bb = 0;
        if (!gguf_block_layout(t->type, &be, &bb) || d0 % be != 0) {
            bk_err(err, errlen, "%s: rows of %llu are not whole %s blocks", name,
                    (unsigned long long)d0, gguf_type_name(t->type, tb));
            return -1;
        }
        /* the activations are converted to the vec_dot type in whole blocks */
        if (wt->act != t->type && (!gguf_block_layout(wt->act, &be, &bb) || d0 % be != 0)) {
            char an[16];
            const char *s = gguf_type_name(wt->act, tb);
            size_t i = 0;
            for (; s[i] && i + 1 < sizeof an; i++)
                an[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
            an[i] = '\0';
            bk_err(err, errlen, "%s: rows of %llu are not whole %s blocks", name,
                    (unsigned long long)d0, an);
            return -1;
        }
    }
    if (out) *out = t;
    return 0;
}

/* The value of a dimension of the architecture table for these hparams. */
static uint64_t dim_of(const fw_hparams *hp, int d)
{
    switch (d) {
    case FW_DIM_EMBD: return hp->n_embd;
    case FW_DIM_Q: return (uint64_t)hp->head_dim * hp->n_head;
    case FW_DIM_KV: return (uint64_t)hp->head_dim * hp->n_head_kv;
    case FW_DIM_FF: return hp->n_ff;
    case FW_DIM_HEAD: return hp->head_dim;
    case FW_DIM_VOCAB: return hp->n_vocab;
    case FW_DIM_ROT2: return hp->n_rot / 2;
    case FW_DIM_QKV: return (uint64_t)hp->head_dim * (hp->n_head + 2ull * hp->n_head_kv);
    case FW_DIM_FF2: return 2ull * hp->n_ff;
    }
    return 0;
}

/* 1 when name is a tensor the graph reads (so anything else refuses). */
static int known_tensor(const fw_arch *A, const char *name, uint32_t n_layer)
{
    if (fw_arch_top_tensor(A, name)) return 1;
    if (strncmp(name, "blk.", 4) != 0) return 0;
    const char *p = name + 4;
    char *end;
    unsigned long il = strtoul(p, &end, 10);
    if (end == p || *end != '.' || il >= n_layer || (p[0] == '0' && end - p > 1)) return 0;
    return fw_arch_layer_tensor(A, end + 1) != NULL;
}

/* The tensors of A: shapes and types, and nothing the graph would not read.
 * The first top tensor is the token embedding, whose second dimension is
 * n_vocab. */
static int plan_tensors(const gguf_header *h, const fw_arch *A, fw_hparams *hp, char *err,
                        size_t errlen)
{
    const char *emb = A->top[0].name;
    const gguf_tensor *te;
    if (check_tensor(h, emb, FW_MATRIX, hp->n_embd, 0, NULL, err, errlen) &&
        !gguf_tensor_find(h, emb))
        return -1;
    te = gguf_tensor_find(h, emb);
    if (te->n_dims != 2 || te->dims[0] != hp->n_embd || te->dims[1] == 0 ||
        te->dims[1] > INT32_MAX) {
        bk_err(err, errlen, "%s: shape is not {%u, n_vocab}", emb, hp->n_embd);
        return -1;
    }
    hp->n_vocab = (uint32_t)te->dims[1];
    if (check_tensor(h, emb, FW_MATRIX, hp->n_embd, hp->n_vocab, &te, err, errlen)) return -1;
    hp->type_embd = te->type;
    hp->type_output = te->type;
    const uint64_t n_embd = hp->n_embd;
    size_t expected = 1;
    for (size_t i = 1; i < A->n_top; i++) {
        const fw_tensor_desc *d = &A->top[i];
        const gguf_tensor *t = NULL;
        if (d->presence == FW_TIED && !gguf_tensor_find(h, d->name)) {
            hp->tied = 1;
            if (d->kind == FW_MATRIX)   /* the tied output's own repacked copy */
                hp->owned_bytes += wt_prepared_bytes(te->type, hp->n_vocab, (size_t)n_embd);
            continue;
        }
        if (d->presence == FW_OPTIONAL && !gguf_tensor_find(h, d->name)) continue;
        if (check_tensor(h, d->name, d->kind, dim_of(hp, d->d0), dim_of(hp, d->d1), &t, err,
                         errlen))
            return -1;
        if (d->kind == FW_MATRIX)
            hp->owned_bytes += wt_prepared_bytes(t->type, (size_t)t->dims[1], (size_t)t->dims[0]);
        if (d->presence == FW_TIED) hp->type_output = t->type;
        expected++;
    }
    char nm[96];
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        for (size_t i = 0; i < A->n_layer; i++) {
            const fw_tensor_desc *d = &A->layer[i];
            snprintf(nm, sizeof nm, "blk.%u.%s", il, d->name);
            const gguf_tensor *t = NULL;
            if (d->presence == FW_OPTIONAL && !gguf_tensor_find(h, nm)) continue;
            if (check_tensor(h, nm, d->kind, dim_of(hp, d->d0), dim_of(hp, d->d1), &t, err,
                             errlen))
                return -1;
            expected++;
            if (d->kind == FW_MATRIX)
                hp->owned_bytes +=
                    wt_prepared_bytes(t->type, (size_t)t->dims[1], (size_t)t->dims[0]);
        }
    }
    for (size_t i = 0; i < h->n_tensors; i++) {
        if (!known_tensor(A, h->tensors[i].name, hp->n_layer)) {
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

/* gemma3's own keys and constants, as llama_model_gemma3::load_arch_hparams
 * and its graph read them: the sliding window (a layer il is a window layer
 * when il % pattern < pattern - 1; pattern 6 when the key is absent), the
 * window layers' RoPE base, the query scale (27B, 62 layers: by n_embd /
 * n_head, else by the head size) and the embedding scale sqrtf(n_embd). */
static int plan_gemma(const gguf_header *h, const char *arch, fw_hparams *hp, char *err,
                      size_t errlen)
{
    if (get_u32(h, arch, "attention.sliding_window", 0, 0, &hp->n_swa, err, errlen)) return -1;
    if (hp->n_swa > 0) {
        const gguf_kv *pk = akv(h, arch, "attention.sliding_window_pattern");
        uint32_t np = 6;
        if (pk && pk->type == GGUF_VT_ARRAY) {
            bk_err(err, errlen, "%s.attention.sliding_window_pattern: per-layer arrays are not "
                   "supported (a number is)", arch);
            return -1;
        }
        if (get_u32(h, arch, "attention.sliding_window_pattern", 0, 6, &np, err, errlen))
            return -1;
        for (uint32_t il = 0; il < hp->n_layer; il++)
            hp->is_swa[il] = np == 0 || il % np < np - 1;
        if (get_f32(h, arch, "rope.freq_base_swa", 0, 10000.0f, &hp->rope_base_swa, err, errlen))
            return -1;
        if (!(hp->rope_base_swa > 0.0f)) {
            bk_err(err, errlen, "%s.rope.freq_base_swa must be positive", arch);
            return -1;
        }
    }
    float cap = 0.0f;
    if (get_f32(h, arch, "final_logit_softcapping", 0, 0.0f, &cap, err, errlen)) return -1;
    if (cap != 0.0f) {
        bk_err(err, errlen, "final logit soft-capping (%g) is not supported", (double)cap);
        return -1;
    }
    hp->q_scale = hp->n_layer == 62 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
                                    : 1.0f / sqrtf((float)hp->head_dim);
    hp->kq_scale = 1.0f;
    hp->embd_scale = sqrtf((float)hp->n_embd);
    return 0;
}

/* granite's multipliers, as llama_model_granite::load_arch_hparams reads
 * them (logit_scale required, the others 0 = unused), and its RoPE switch
 * (rope.scaling.finetuned false: no layer is rotated). */
static int plan_granite(const gguf_header *h, const char *arch, fw_hparams *hp, char *err,
                        size_t errlen)
{
    float logit = 0.0f, att = 0.0f;
    if (get_f32(h, arch, "logit_scale", 1, 0.0f, &logit, err, errlen) ||
        get_f32(h, arch, "residual_scale", 0, 0.0f, &hp->residual_scale, err, errlen) ||
        get_f32(h, arch, "embedding_scale", 0, 0.0f, &hp->embd_scale, err, errlen) ||
        get_f32(h, arch, "attention.scale", 0, 0.0f, &att, err, errlen))
        return -1;
    if (!(logit != 0.0f) || !isfinite(logit)) {
        bk_err(err, errlen, "%s.logit_scale %g is not supported (a finite, non-zero number)", arch,
               (double)logit);
        return -1;
    }
    hp->logit_mul = 1.0f / logit;
    if (att != 0.0f) hp->kq_scale = att;
    if (akv(h, arch, "deepstack_mapping")) {
        bk_err(err, errlen, "%s.deepstack_mapping (multimodal deepstack) is not supported", arch);
        return -1;
    }
    const gguf_kv *ft = akv(h, arch, "rope.scaling.finetuned");
    uint64_t fv = 1;
    if (ft && (ft->type == GGUF_VT_ARRAY || !gguf_kv_u64(ft, &fv))) {
        bk_err(err, errlen, "%s.rope.scaling.finetuned is not a boolean", arch);
        return -1;
    }
    if (fv == 0) memset(hp->rope_off, 1, hp->n_layer);
    return 0;
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
    const fw_arch *A = fw_arch_find(arch, alen);
    if (!A) {
        char names[128];
        bk_err(err, errlen, "architecture %.64s is not supported (%s)", arch,
               fw_arch_names(names, sizeof names));
        return -1;
    }
    hp->arch = A->id;
    uint32_t u;
    if (get_u32(h, arch, "context_length", 1, 0, &hp->n_ctx_train, err, errlen) ||
        get_u32(h, arch, "embedding_length", 1, 0, &hp->n_embd, err, errlen) ||
        get_u32(h, arch, "block_count", 1, 0, &hp->n_layer, err, errlen) ||
        get_u32(h, arch, "feed_forward_length", 1, 0, &hp->n_ff, err, errlen) ||
        get_u32(h, arch, "attention.head_count", 1, 0, &hp->n_head, err, errlen))
        return -1;
    if (hp->n_layer == 0 || hp->n_layer > FW_MAX_LAYERS) {
        bk_err(err, errlen, "%s.block_count %u is out of range (1 to %d)", arch, hp->n_layer,
               FW_MAX_LAYERS);
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
    /* phi3 rotates the first n_rot dimensions (ggml_rope_ext's n_dims); llama.cpp's other graphs here
       assert n_rot == head size (GGML_ASSERT in their builders: the server would abort) */
    if (nrot != hk && (A->id != FW_ARCH_PHI3 || nrot == 0 || nrot > hk || nrot % 2 != 0)) {
        bk_err(err, errlen, "partial RoPE is not supported (%u of %u dimensions)", nrot, hk);
        return -1;
    }
    hp->head_dim = hk;
    hp->n_rot = nrot;
    hp->rope_neox = A->rope_neox;
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
    if (A->gemma && plan_gemma(h, arch, hp, err, errlen)) return -1;
    if (A->scales && plan_granite(h, arch, hp, err, errlen)) return -1;
    if (A->fused) {   /* phi3: ggml_scale(Q, 1/sqrtf(head_dim)) after RoPE, attention scale 1 */
        hp->q_scale = 1.0f / sqrtf((float)hp->head_dim);
        hp->kq_scale = 1.0f;
    }
    for (uint32_t il = 0; A->nope_step && il < hp->n_layer; il++)
        hp->rope_off[il] = (il + 1) % (uint32_t)A->nope_step == 0;

    return plan_tensors(h, A, hp, err, errlen);
}

/* ---- the weights ---------------------------------------------------------------- */

static int bind_weight(fw_weights *w, const char *name, wt_matrix *m, char *err, size_t errlen)
{
    const gguf_tensor *t = gguf_tensor_find(w->h, name);
    if (!t) {
        bk_err(err, errlen, "%s is missing", name);
        return -1;
    }
    const uint8_t *p = gguf_map_tensor(w->map, w->h, t, err, errlen);
    if (!p) return -1;
    uint64_t off, len, be, bb;
    if (gguf_tensor_span(w->h, t, &off, &len, err, errlen)) return -1;
    if (!gguf_block_layout(t->type, &be, &bb)) {
        bk_err(err, errlen, "%s: type not readable", name);
        return -1;
    }
    m->type = t->type;
    m->data = p;
    m->k = (size_t)t->dims[0];
    m->rows = t->n_dims > 1 ? (size_t)t->dims[1] : 1;
    m->row_bytes = (size_t)(t->dims[0] / be * bb);
    m->size = (size_t)len;
    const wt_type *wt = wt_find(t->type);
    if (wt && (uintptr_t)p % wt->align != 0) {
        char tb[16];
        bk_err(err, errlen, "%s: %s data is not %zu-byte aligned", name,
               gguf_type_name(t->type, tb), wt->align);
        return -1;
    }
    return 0;
}

static float *copy_norm(fw_weights *w, const char *name, size_t n, char *err, size_t errlen)
{
    wt_matrix m;
    if (bind_weight(w, name, &m, err, errlen)) return NULL;
    float *v = malloc(n * sizeof(float));
    if (!v) {
        bk_err(err, errlen, "out of memory");
        return NULL;
    }
    memcpy(v, m.data, n * sizeof(float));
    return v;
}

/* Binds one tensor of the architecture table into base + d->off: a matrix
 * in the map, or a copied norm of d0 floats. */
static int bind_desc(fw_weights *w, const fw_tensor_desc *d, const char *name, void *base,
                     char *err, size_t errlen)
{
    char *slot = (char *)base + d->off;
    if (d->kind == FW_NORM) {
        float *v = copy_norm(w, name, (size_t)dim_of(&w->hp, d->d0), err, errlen);
        if (!v) return -1;
        memcpy(slot, &v, sizeof v);
        return 0;
    }
    return bind_weight(w, name, (wt_matrix *)(void *)slot, err, errlen);
}

/* b11669's load-time repack (the CPU_REPACK buffer): a matrix-multiply
 * weight whose type has a load-time form (wtype.h: Q4_0, Q4_K with rows in
 * eights) is converted once into memory the weights own; the map stays
 * read-only. Never token_embd (get_rows reads it plain, as ggml keeps it in
 * the mapped buffer); a tied output is its own repacked copy, as ggml's
 * duplicated output tensor is ("repack tensor token_embd.weight"). */
static int prepare_weight(fw_weights *w, wt_matrix *m, const char *name, char *err,
                          size_t errlen)
{
    const size_t need = wt_prepared_bytes(m->type, m->rows, m->k);
    if (!need) return 0;
    uint8_t *buf = malloc(need);
    if (!buf) {
        bk_err(err, errlen, "%s: out of memory for its %zu-byte repacked form", name, need);
        return -1;
    }
    w->owned[w->n_owned++] = buf;
    w->owned_bytes += need;
    char why[160];
    if (wt_prepare(m, buf, need, why, sizeof why)) {
        bk_err(err, errlen, "%s: %s", name, why);
        return -1;
    }
    return 0;
}

/* Rows [r0, r0 + n) of a bound matrix in the map, as a matrix of its own. */
static wt_matrix row_view(const wt_matrix *m, size_t r0, size_t n)
{
    wt_matrix v = *m;
    v.data = m->data + r0 * m->row_bytes;
    v.rows = n;
    v.size = n * m->row_bytes;
    return v;
}

/* phi3: wq, wk, wv as row views of attn_qkv, gate and up of ffn_up (gate
 * rows first: ggml_swiglu takes silu of the first half). Each output row of
 * a product is one row's dot products, so the views give the fused product's
 * bits; each view is prepared (repacked) on its own. */
static int split_fused(fw_weights *w, fw_layer *L, uint32_t il, char *err, size_t errlen)
{
    const size_t qd = w->q_dim, kvd = w->kv_dim, F = w->hp.n_ff;
    char nm[96];
    L->wq = row_view(&L->wqkv, 0, qd);
    L->wk = row_view(&L->wqkv, qd, kvd);
    L->wv = row_view(&L->wqkv, qd + kvd, kvd);
    L->gate = row_view(&L->gate_up, 0, F);
    L->up = row_view(&L->gate_up, F, F);
    wt_matrix *parts[5] = { &L->wq, &L->wk, &L->wv, &L->gate, &L->up };
    for (int i = 0; i < 5; i++) {
        snprintf(nm, sizeof nm, "blk.%u.%s", il, i < 3 ? "attn_qkv.weight" : "ffn_up.weight");
        if (prepare_weight(w, parts[i], nm, err, errlen)) return -1;
    }
    return 0;
}

static int bind_all(fw_weights *w, char *err, size_t errlen)
{
    const fw_arch *A = w->arch;
    w->owned = calloc((size_t)w->hp.n_layer * (A->n_layer + 5) + A->n_top, sizeof *w->owned);
    if (!w->owned) {
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < A->n_top; i++) {
        const fw_tensor_desc *d = &A->top[i];
        wt_matrix *m = (wt_matrix *)(void *)((char *)&w->top + d->off);
        if (d->presence == FW_TIED && w->hp.tied) {
            memcpy(m, &w->top.tok_embd, sizeof(wt_matrix));
        } else if (d->presence == FW_OPTIONAL && !gguf_tensor_find(w->h, d->name)) {
            continue;
        } else if (bind_desc(w, d, d->name, &w->top, err, errlen)) {
            return -1;
        }
        if (i > 0 && d->kind == FW_MATRIX && prepare_weight(w, m, d->name, err, errlen))
            return -1;
    }
    char nm[96];
    for (uint32_t il = 0; il < w->hp.n_layer; il++) {
        for (size_t i = 0; i < A->n_layer; i++) {
            const fw_tensor_desc *d = &A->layer[i];
            snprintf(nm, sizeof nm, "blk.%u.%s", il, d->name);
            if (d->presence == FW_OPTIONAL && !gguf_tensor_find(w->h, nm)) continue;
            if (bind_desc(w, d, nm, &w->layers[il], err, errlen)) return -1;
            if (d->off == offsetof(fw_layer, wqkv) || d->off == offsetof(fw_layer, gate_up))
                continue;   /* prepared as its views (split_fused) */
            if (d->kind == FW_MATRIX &&
                prepare_weight(w, (wt_matrix *)(void *)((char *)&w->layers[il] + d->off), nm,
                               err, errlen))
                return -1;
        }
        if (A->fused && split_fused(w, &w->layers[il], il, err, errlen)) return -1;
    }
    return 0;
}

void fw_weights_close(fw_weights *w)
{
    if (!w) return;
    if (w->layers) {
        for (uint32_t i = 0; i < w->hp.n_layer; i++) {
            free(w->layers[i].attn_norm);
            free(w->layers[i].ffn_norm);
            free(w->layers[i].q_norm);
            free(w->layers[i].k_norm);
            free(w->layers[i].bq);
            free(w->layers[i].bk);
            free(w->layers[i].bv);
            free(w->layers[i].attn_post_norm);
            free(w->layers[i].ffn_post_norm);
        }
    }
    free(w->layers);
    free(w->top.output_norm);
    free(w->top.rope_freqs);
    free(w->top.rope_long);
    free(w->top.rope_short);
    for (size_t i = 0; i < w->n_owned; i++) free(w->owned[i]);
    free(w->owned);
    if (w->own_pool) par_destroy(w->pool);
    free(w);
}

int fw_weights_open(fw_weights **out, const gguf_map *map, const gguf_header *h,
                    const fw_opts *opts, char *err, size_t errlen)
{
    *out = NULL;
    fw_weights *w = calloc(1, sizeof *w);
    if (!w) {
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    if (fw_plan(h, &w->hp, err, errlen)) {
        free(w);
        return -1;
    }
    const fw_hparams *hp = &w->hp;
    for (size_t i = 0; i < fw_arch_count(); i++)
        if (fw_arch_at(i)->id == hp->arch) w->arch = fw_arch_at(i);
    w->map = map;
    w->h = h;
    w->llama_threads = opts && opts->llama_threads ? opts->llama_threads : 2;
    if (w->llama_threads < 1 || w->llama_threads > FW_MAX_LLAMA_THREADS) {
        bk_err(err, errlen, "llama threads %d out of range (1 to %d)", w->llama_threads,
                FW_MAX_LLAMA_THREADS);
        free(w);
        return -1;
    }
    w->n_ubatch = opts && opts->n_ubatch ? opts->n_ubatch : 512;
    w->swa_small = opts && opts->swa_small && hp->n_swa > 0;
    if (w->n_ubatch > 65536) {
        bk_err(err, errlen, "micro-batch of %zu is too large", w->n_ubatch);
        free(w);
        return -1;
    }
    if (opts && opts->pool) {
        w->pool = opts->pool;
    } else {
        w->pool = par_create(opts && opts->n_threads > 1 ? opts->n_threads : 1, err, errlen);
        if (!w->pool) {
            free(w);
            return -1;
        }
        w->own_pool = 1;
    }
    w->simd = q8_simd();
    w->q_dim = (size_t)hp->head_dim * hp->n_head;
    w->kv_dim = (size_t)hp->head_dim * hp->n_head_kv;
    if (fw_kv_types_open(w, opts, err, errlen)) {
        fw_weights_close(w);
        return -1;
    }
    w->layers = calloc(hp->n_layer, sizeof *w->layers);
    if (!w->layers) {
        bk_err(err, errlen, "out of memory");
        fw_weights_close(w);
        return -1;
    }
    if (bind_all(w, err, errlen)) {
        fw_weights_close(w);
        return -1;
    }
    *out = w;
    return 0;
}

const fw_hparams *fw_weights_hp(const fw_weights *w) { return &w->hp; }
void fw_kv_info_of(const fw_weights *w, fw_kv_info *out) { *out = w->kvi; }

/* The cache types of opts, with llama-server b11669's load-time rules
 * (llama_init_from_model: a quantized type's block must divide the head
 * size). 0, or -1 with the reason. */
static int fw_kv_types_open(fw_weights *w, const fw_opts *opts, char *err, size_t errlen)
{
    const int tk = opts ? opts->kv_type_k : 0, tv = opts ? opts->kv_type_v : 0;
    const kvq_info *ik = kvq_info_of((kvq_type)tk), *iv = kvq_info_of((kvq_type)tv);
    const size_t hd = w->hp.head_dim;
    if (!ik || !iv) {
        bk_err(err, errlen, "cache type %d out of range", !ik ? tk : tv);
        return -1;
    }
    if (ik->quantized && hd % ik->blk) {
        bk_err(err, errlen, "K cache type %s with block size %zu does not divide n_embd_head_k=%zu",
               ik->name, ik->blk, hd);
        return -1;
    }
    if (iv->quantized && hd % iv->blk) {
        bk_err(err, errlen, "V cache type %s with block size %zu does not divide n_embd_head_v=%zu",
               iv->name, iv->blk, hd);
        return -1;
    }
    w->kvi.tk = (kvq_type)tk;
    w->kvi.tv = (kvq_type)tv;
    w->kvi.k_row = kvq_row_bytes(w->kvi.tk, w->kv_dim);
    w->kvi.v_row = kvq_row_bytes(w->kvi.tv, w->kv_dim);
    w->kvi.rot_k = kvq_rot_k(w->kvi.tk, hd, opts && opts->kv_rot_off);
    w->kvi.rot_v = kvq_rot_v(w->kvi.tv, hd, opts && opts->kv_rot_off);
    return 0;
}
size_t fw_weights_owned_bytes(const fw_weights *w) { return w->owned_bytes; }

/* ---- a sequence ------------------------------------------------------------------- */

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

void fw_seq_free(fw_seq *s)
{
    if (!s) return;
    kv_free(&s->kv);
    kv_swa_free(&s->sw);
    free(s->x); free(s->xn); free(s->q); free(s->k); free(s->v); free(s->att);
    free(s->ao); free(s->g); free(s->u); free(s->fo); free(s->rope); free(s->rope_swa);
    free(s->act); free(s->logits); free(s->kcast); free(s->vcast);
    attn_scratch_free(s->scr);
    free(s);
}

int fw_seq_new(fw_seq **out, const fw_weights *w, size_t n_ctx, char *err, size_t errlen)
{
    *out = NULL;
    size_t want = n_ctx ? n_ctx : 512;
    if (want > ((size_t)1 << 24)) {
        bk_err(err, errlen, "context of %zu tokens is too large", want);
        return -1;
    }
    fw_seq *s = calloc(1, sizeof *s);
    if (!s) {
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    const fw_hparams *hp = &w->hp;
    s->w = w;
    s->n_ctx = (want + FW_KV_PAD - 1) / FW_KV_PAD * FW_KV_PAD;
    s->rope_factors = w->top.rope_freqs ? w->top.rope_freqs
                      : s->n_ctx > hp->n_ctx_orig ? w->top.rope_long : w->top.rope_short;
    /* Sizes: every product below is bounded (n_ctx <= 2^24, dims <= 2^32,
     * checked before multiplying by alloc0). */
    int fail = kv_init(&s->kv, hp->n_layer, s->n_ctx, w->kv_dim, w->kvi.tk, w->kvi.tv) != 0;
    const size_t nu = w->n_ubatch;
    if (!fail && w->swa_small) {   /* llama_kv_cache_iswa's size_swa */
        size_t sz = hp->n_swa + nu < s->n_ctx ? hp->n_swa + nu : s->n_ctx;
        sz = (sz + FW_KV_PAD - 1) / FW_KV_PAD * FW_KV_PAD;
        fail = kv_swa_init(&s->sw, sz, nu) != 0;
    }
    const size_t kmax = max3(hp->n_embd, w->q_dim, hp->n_ff);
    s->x = alloc0(nu * hp->n_embd, sizeof(float), &fail);
    s->xn = alloc0(nu * hp->n_embd, sizeof(float), &fail);
    s->ao = alloc0(nu * hp->n_embd, sizeof(float), &fail);
    s->fo = alloc0(nu * hp->n_embd, sizeof(float), &fail);
    s->q = alloc0(nu * w->q_dim, sizeof(float), &fail);
    s->att = alloc0(nu * w->q_dim, sizeof(float), &fail);
    s->k = alloc0(nu * w->kv_dim, sizeof(float), &fail);
    s->v = alloc0(nu * w->kv_dim, sizeof(float), &fail);
    s->g = alloc0(nu * hp->n_ff, sizeof(float), &fail);
    s->u = alloc0(nu * hp->n_ff, sizeof(float), &fail);
    s->act_len = nu * wt_act_bytes_max(kmax);
    s->act = alloc0(s->act_len, 1, &fail);
    s->rope = alloc0(nu * hp->head_dim, sizeof(float), &fail);
    if (hp->n_swa) s->rope_swa = alloc0(nu * hp->head_dim, sizeof(float), &fail);
    s->logits = alloc0(hp->n_vocab, sizeof(float), &fail);
    if (w->kvi.tk == KVQ_F32) s->kcast = alloc0(s->n_ctx * w->kv_dim, sizeof(uint16_t), &fail);
    if (w->kvi.tv == KVQ_F32) s->vcast = alloc0(s->n_ctx * w->kv_dim, sizeof(uint16_t), &fail);
    if (!fail && !(s->scr = attn_scratch_new(par_threads(w->pool), hp->head_dim))) fail = 1;
    if (fail) {
        bk_err(err, errlen, "out of memory");
        fw_seq_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

const fw_weights *fw_seq_weights(const fw_seq *s) { return s->w; }
size_t fw_n_ctx(const fw_seq *s) { return s->n_ctx; }
size_t fw_n_past(const fw_seq *s) { return s->n_past; }
const float *fw_logits(const fw_seq *s) { return s->logits; }
void fw_set_tap(fw_seq *s, fw_tap_fn fn, void *user) { s->tap = fn; s->tap_user = user; }

void fw_truncate(fw_seq *s, size_t n)
{
    if (n < s->n_past) s->n_past = n;
    if (s->w->swa_small) kv_swa_rm(&s->sw, (int64_t)n, -1);   /* llama_memory_seq_rm(n, -1) */
}

struct fw_swa_ckpt {
    size_t n;                   /* cells saved */
    int32_t *pos;               /* their positions, in cell order */
    uint8_t *k, *v;             /* per window layer, n K rows, then n V rows */
};

void fw_swa_ckpt_free(fw_swa_ckpt *c)
{
    if (!c) return;
    free(c->pos);
    free(c->k);
    free(c->v);
    free(c);
}

fw_swa_ckpt *fw_swa_save(const fw_seq *s)
{
    const fw_weights *w = s->w;
    if (!w->swa_small) return NULL;
    fw_swa_ckpt *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    size_t nl = 0;
    for (uint32_t il = 0; il < w->hp.n_layer; il++) nl += w->hp.is_swa[il];
    c->n = s->sw.used;
    c->pos = malloc((c->n ? c->n : 1) * sizeof *c->pos);
    c->k = malloc(nl * c->n * s->kv.k_row + 1);
    c->v = malloc(nl * c->n * s->kv.v_row + 1);
    if (!c->pos || !c->k || !c->v) {
        fw_swa_ckpt_free(c);
        return NULL;
    }
    size_t j = 0;
    for (size_t i = 0; i < s->sw.size && j < c->n; i++) {
        if (s->sw.pos[i] < 0) continue;
        c->pos[j] = s->sw.pos[i];
        size_t l = 0;
        for (uint32_t il = 0; il < w->hp.n_layer; il++) {
            if (!w->hp.is_swa[il]) continue;
            memcpy(c->k + (l * c->n + j) * s->kv.k_row, kv_layer_k(&s->kv, il) + i * s->kv.k_row, s->kv.k_row);
            memcpy(c->v + (l * c->n + j) * s->kv.v_row, kv_layer_v(&s->kv, il) + i * s->kv.v_row, s->kv.v_row);
            l++;
        }
        j++;
    }
    return c;
}

int fw_swa_load(fw_seq *s, const fw_swa_ckpt *c)
{
    const fw_weights *w = s->w;
    if (!w->swa_small || !c) return -1;
    kv_swa_rm(&s->sw, 0, -1);
    if (c->n == 0) return 0;
    if (kv_swa_place_at(&s->sw, w->hp.n_swa, c->pos, c->n)) return -1;
    size_t l = 0;
    for (uint32_t il = 0; il < w->hp.n_layer; il++) {
        if (!w->hp.is_swa[il]) continue;
        uint8_t *kd = (uint8_t *)kv_layer_k(&s->kv, il), *vd = (uint8_t *)kv_layer_v(&s->kv, il);
        for (size_t j = 0; j < c->n; j++) {
            memcpy(kd + s->sw.idx[j] * s->kv.k_row, c->k + (l * c->n + j) * s->kv.k_row, s->kv.k_row);
            memcpy(vd + s->sw.idx[j] * s->kv.v_row, c->v + (l * c->n + j) * s->kv.v_row, s->kv.v_row);
        }
        l++;
    }
    return 0;
}

int fw_swa_state(const fw_seq *s, int32_t *pos_min, int32_t *pos_max)
{
    if (!s->w->swa_small) return 0;
    *pos_min = kv_swa_pos_min(&s->sw);
    *pos_max = kv_swa_pos_max(&s->sw);
    return 1;
}

int32_t fw_argmax(const float *logits, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return (int32_t)best;
}

/* ---- the graph walk -------------------------------------------------------------- */

static void tap(fw_seq *s, const char *name, int layer, const float *d, size_t rows,
                size_t width, size_t first)
{
    if (s->tap && rows) s->tap(s->tap_user, name, layer, d, rows, width, first);
}

/* ys[i] = ws[i] x through the ops table, with this sequence's scratch. */
static int mm(fw_seq *s, const wt_matrix *const *ws, float *const *ys, size_t nw,
              const float *x, size_t n, char *err, size_t errlen)
{
    return wt_mul_mat(s->w->pool, ws, ys, nw, x, n, s->act, s->act_len, err, errlen);
}

/* Embedding rows by get_rows: float types widened, quantized dequantized. */
static int embed(fw_seq *s, const int32_t *ids, size_t n, char *err, size_t errlen)
{
    const wt_matrix *m = &s->w->top.tok_embd;
    const wt_type *wt = wt_find(m->type);
    const size_t E = s->w->hp.n_embd;
    if (!wt || !wt->to_float) {
        bk_err(err, errlen, "embedding type %u", m->type);
        return -1;
    }
    for (size_t t = 0; t < n; t++)
        if (wt->to_float(m->data + (size_t)ids[t] * m->row_bytes, m->row_bytes, E, s->x + t * E,
                         err, errlen))
            return -1;
    return 0;
}

/* The per-head rows of Q (first n_tok * n_head rows) then of K: the head
 * norm where the architecture has one (qwen3), then RoPE with the row's
 * token's table. */
typedef struct {
    fw_seq *s;
    size_t n_tok;
    const float *rope;          /* this layer's RoPE tables (one per token), or NULL: none */
} qk_ctx;

static void qk_job(void *ctx, size_t r0, size_t r1, int worker)
{
    const qk_ctx *c = ctx;
    fw_seq *s = c->s;
    const fw_weights *w = s->w;
    const fw_hparams *hp = &w->hp;
    const size_t hd = hp->head_dim, nq = c->n_tok * hp->n_head;
    (void)worker;
    for (size_t j = r0; j < r1; j++) {
        const int is_q = j < nq;
        const size_t jj = is_q ? j : j - nq;
        const size_t nh = is_q ? hp->n_head : hp->n_head_kv;
        float *row = (is_q ? s->q : s->k) + jj * hd;
        const float *table = c->rope ? c->rope + (jj / nh) * hd : NULL;
        if (w->arch->qk_norm)
            vec_rms_norm(w->simd, row, row, is_q ? s->cur->q_norm : s->cur->k_norm, 1, hd,
                         hp->rms_eps);
        if (c->rope) vec_rope(w->simd, row, 1, 1, hd, hp->n_rot, hp->rope_neox, table);
    }
}

/* n_kv as llama_kv_cache::get_n_kv: the used cells padded to 256. */
static size_t n_kv_for(const fw_seq *s, size_t used)
{
    size_t n_kv = (used + FW_KV_PAD - 1) / FW_KV_PAD * FW_KV_PAD;
    if (n_kv < FW_KV_PAD) n_kv = FW_KV_PAD;
    if (n_kv > s->n_ctx) n_kv = s->n_ctx;
    return n_kv;
}

/* y[t][i] = y[t][i] + b[i] over rows x n floats (ggml_add of a bias row:
 * one rounding, in place); a NULL bias is none. */
static void add_bias(float *y, const float *b, size_t rows, size_t n)
{
    if (!b) return;
    for (size_t t = 0; t < rows; t++)
        for (size_t i = 0; i < n; i++) y[t * n + i] = y[t * n + i] + b[i];
}

/* build_attn_mha's ggml_cast of an f32 cache to f16 before flash
 * attention: the n_kv cells of one layer (kvd floats each) rounded into
 * dst. Returns dst. */
static const uint8_t *fw_kv_cast(uint8_t *dst, const uint8_t *src, size_t n_kv, size_t kvd)
{
    f32_to_f16_row((const float *)(const void *)src, (uint16_t *)(void *)dst, n_kv * kvd);
    return dst;
}

/* One layer's attention block for n rows at positions [first, first + n):
 * norm, Q/K/V, head norms + RoPE, the cache write, attention, the output
 * product (into s->ao). */
static int attention(fw_seq *s, uint32_t il, size_t n, size_t first, char *err, size_t errlen)
{
    const fw_weights *w = s->w;
    const fw_hparams *hp = &w->hp;
    const fw_layer *L = &w->layers[il];
    const size_t E = hp->n_embd, qd = w->q_dim, kvd = w->kv_dim;
    s->cur = L;
    vec_rms_norm_pool(w->pool, w->simd, s->xn, s->x, L->attn_norm, n, E, hp->rms_eps);
    tap(s, "attn_norm", (int)il, s->xn, n, E, first);
    const wt_matrix *qkv[3] = { &L->wq, &L->wk, &L->wv };
    float *const ys[3] = { s->q, s->k, s->v };
    if (mm(s, qkv, ys, 3, s->xn, n, err, errlen)) return -1;
    add_bias(s->q, L->bq, n, qd);
    add_bias(s->k, L->bk, n, kvd);
    add_bias(s->v, L->bv, n, kvd);
    const int swa = hp->n_swa && hp->is_swa[il];
    qk_ctx qk = { s, n, hp->rope_off[il] ? NULL : swa ? s->rope_swa : s->rope };
    par_rows(w->pool, qk_job, &qk, n * (hp->n_head + hp->n_head_kv), 16);
    if (!w->arch->fused) tap(s, "Qcur", (int)il, s->q, n, qd, first);
    tap(s, "Kcur", (int)il, s->k, n, kvd, first);
    tap(s, "Vcur", (int)il, s->v, n, kvd, first);
    if (hp->q_scale != 0.0f)   /* gemma3, phi3: ggml_scale of Q after RoPE, kq_scale 1 */
        for (size_t i = 0; i < n * qd; i++) s->q[i] = s->q[i] * hp->q_scale;
    if (w->arch->fused)   /* phi3 names the scaled Q "Qcur" too (the name the dump keeps) */
        tap(s, "Qcur", (int)il, s->q, n, qd, first);
    if (w->kvi.rot_k) {   /* llama_mul_mat_hadamard of Q and K (a quantized K cache) */
        kvq_fwht(s->q, n * qd, w->kvi.rot_k);
        kvq_fwht(s->k, n * kvd, w->kvi.rot_k);
    }
    if (w->kvi.rot_v) kvq_fwht(s->v, n * kvd, w->kvi.rot_v);
    const int cells = swa && w->swa_small;   /* the window layers' own cells */
    if (cells)
        for (size_t t = 0; t < n; t++)
            kv_write(&s->kv, il, s->sw.idx[t], s->k + t * kvd, s->v + t * kvd, 1);
    else
        kv_write(&s->kv, il, first, s->k, s->v, n);
    const size_t n_kv = cells ? kv_swa_n_kv(&s->sw) : n_kv_for(s, first + n);
    const attn_args a = { hp->head_dim, hp->n_head, hp->n_head_kv, qd, kvd, hp->kq_scale,
                          w->llama_threads, s->q, s->att,
                          s->kcast ? fw_kv_cast(s->kcast, kv_layer_k(&s->kv, il), n_kv, kvd)
                                   : kv_layer_k(&s->kv, il),
                          s->vcast ? fw_kv_cast(s->vcast, kv_layer_v(&s->kv, il), n_kv, kvd)
                                   : kv_layer_v(&s->kv, il),
                          s->kcast ? KVQ_F16 : w->kvi.tk, s->vcast ? KVQ_F16 : w->kvi.tv,
                          s->kcast ? kvd * 2 : s->kv.k_row, s->vcast ? kvd * 2 : s->kv.v_row,
                          n, first, n_kv, swa ? hp->n_swa : 0, cells ? s->sw.pos : NULL };
    attn_flash(w->pool, w->simd, &a, s->scr);
    tap(s, "kqv_out", (int)il, s->att, n, qd, first);
    if (w->kvi.rot_v) kvq_fwht(s->att, n * qd, w->kvi.rot_v);   /* and back (H H = I) */
    const wt_matrix *wo[1] = { &L->wo };
    float *const yo[1] = { s->ao };
    if (mm(s, wo, yo, 1, s->att, n, err, errlen)) return -1;
    tap(s, "attn_out", (int)il, s->ao, n, E, first);
    return 0;
}

/* One layer's feed-forward block over rows rows of s->x (the residual
 * stream, updated in place): norm, gate and up, SwiGLU (gemma3: GeGLU),
 * down, (gemma3: the post-norm,) residual. */
static int ffn(fw_seq *s, uint32_t il, size_t rows, size_t first, char *err, size_t errlen)
{
    const fw_weights *w = s->w;
    const fw_hparams *hp = &w->hp;
    const fw_layer *L = &w->layers[il];
    const size_t E = hp->n_embd, F = hp->n_ff;
    vec_rms_norm_pool(w->pool, w->simd, s->xn, s->x, L->ffn_norm, rows, E, hp->rms_eps);
    tap(s, "ffn_norm", (int)il, s->xn, rows, E, first);
    const wt_matrix *gu[2] = { &L->gate, &L->up };
    float *const yg[2] = { s->g, s->u };
    if (mm(s, gu, yg, 2, s->xn, rows, err, errlen)) return -1;
    if (w->arch->gemma) {
        vec_geglu_pool(w->pool, s->g, s->u, rows, F);
        tap(s, "ffn_geglu", (int)il, s->g, rows, F, first);
    } else {
        vec_swiglu_pool(w->pool, w->simd, s->g, s->u, rows, F);
        tap(s, "ffn_swiglu", (int)il, s->g, rows, F, first);
    }
    const wt_matrix *dn[1] = { &L->down };
    float *const yd[1] = { s->fo };
    if (mm(s, dn, yd, 1, s->g, rows, err, errlen)) return -1;
    tap(s, "ffn_out", (int)il, s->fo, rows, E, first);
    if (L->ffn_post_norm) {
        vec_rms_norm_pool(w->pool, w->simd, s->fo, s->fo, L->ffn_post_norm, rows, E, hp->rms_eps);
        tap(s, "ffn_post_norm", (int)il, s->fo, rows, E, first);
    }
    if (hp->residual_scale != 0.0f)   /* granite */
        for (size_t i = 0; i < rows * E; i++) s->fo[i] = s->fo[i] * hp->residual_scale;
    for (size_t i = 0; i < rows * E; i++) s->x[i] = s->fo[i] + s->x[i];
    tap(s, "l_out", (int)il, s->x, rows, E, first);
    return 0;
}

/* One micro-batch: n tokens at positions [first, first + n). logits_out:
 * where the last layer's logits go (all: every row; else the last row), or
 * NULL when this micro-batch has no output. */
static int ubatch(fw_seq *s, const int32_t *ids, size_t n, size_t first, int all,
                  float *logits_out, char *err, size_t errlen)
{
    const fw_weights *w = s->w;
    const fw_hparams *hp = &w->hp;
    const size_t E = hp->n_embd, hd = hp->head_dim;
    const vec_rope_params rp = { hp->n_rot, hp->rope_base, hp->freq_scale, hp->ext_factor,
                                 hp->attn_factor, hp->beta_fast, hp->beta_slow,
                                 hp->n_ctx_orig, s->rope_factors };
    if (w->swa_small && kv_swa_place(&s->sw, hp->n_swa, first, n)) {
        bk_err(err, errlen, "no cells for %zu tokens in the window layers' cache of %zu", n, s->sw.size);
        return -1;
    }
    if (embed(s, ids, n, err, errlen)) return -1;
    if (hp->embd_scale != 0.0f)   /* gemma3: ggml_scale(inp, sqrtf(n_embd)) */
        for (size_t i = 0; i < n * E; i++) s->x[i] = s->x[i] * hp->embd_scale;
    for (size_t t = 0; t < n; t++) vec_rope_cache(&rp, (int64_t)(first + t), s->rope + t * hd);
    if (s->rope_swa) {   /* the window layers: their own base, freq_scale 1 */
        vec_rope_params rs = rp;
        rs.rope_base = hp->rope_base_swa;
        rs.freq_scale = 1.0f;
        for (size_t t = 0; t < n; t++)
            vec_rope_cache(&rs, (int64_t)(first + t), s->rope_swa + t * hd);
    }
    /* Output rows of the last layer: every row, the last, or none. */
    const int last_ubatch = logits_out != NULL || all;
    const size_t n_out = all ? n : (last_ubatch ? 1 : 0);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        if (attention(s, il, n, first, err, errlen)) return -1;
        size_t rows = n;
        if (il == hp->n_layer - 1 && !all) {
            if (n_out == 0) return 0;       /* nothing reads the last layer's rows */
            memmove(s->ao, s->ao + (n - 1) * E, E * sizeof(float));
            memmove(s->x, s->x + (n - 1) * E, E * sizeof(float));
            rows = 1;
        }
        const fw_layer *L = &w->layers[il];
        if (L->attn_post_norm) {   /* gemma3 */
            vec_rms_norm_pool(w->pool, w->simd, s->ao, s->ao, L->attn_post_norm, rows, E,
                              hp->rms_eps);
            tap(s, "attn_post_norm", (int)il, s->ao, rows, E, first);
        }
        if (hp->residual_scale != 0.0f)   /* granite: ggml_scale before the add */
            for (size_t i = 0; i < rows * E; i++) s->ao[i] = s->ao[i] * hp->residual_scale;
        for (size_t i = 0; i < rows * E; i++) s->x[i] = s->ao[i] + s->x[i];
        tap(s, L->attn_post_norm ? "sa_out" : "ffn_inp", (int)il, s->x, rows, E, first);
        if (ffn(s, il, rows, first, err, errlen)) return -1;
    }
    const size_t rows = all ? n : 1;
    vec_rms_norm_pool(w->pool, w->simd, s->xn, s->x, w->top.output_norm, rows, E, hp->rms_eps);
    tap(s, "result_norm", -1, s->xn, rows, E, first);
    const wt_matrix *ow[1] = { &w->top.output };
    float *dst = all ? logits_out : s->logits;
    float *const yl[1] = { dst };
    if (mm(s, ow, yl, 1, s->xn, rows, err, errlen)) return -1;
    if (hp->logit_mul != 0.0f)   /* granite: ggml_scale(logits, 1 / logit_scale) */
        for (size_t i = 0; i < rows * hp->n_vocab; i++) dst[i] = dst[i] * hp->logit_mul;
    tap(s, "result_output", -1, dst, rows, hp->n_vocab, first);
    if (!all) {
        if (logits_out && logits_out != s->logits)
            memcpy(logits_out, s->logits, hp->n_vocab * sizeof(float));
    } else {
        memcpy(s->logits, logits_out + (rows - 1) * hp->n_vocab, hp->n_vocab * sizeof(float));
    }
    return 0;
}

int fw_eval(fw_seq *s, const int32_t *ids, size_t n, float *logits, int all, char *err,
            size_t errlen)
{
    const fw_weights *w = s->w;
    if (n == 0) {
        bk_err(err, errlen, "no tokens to evaluate");
        return -1;
    }
    if (n > s->n_ctx - s->n_past) {
        bk_err(err, errlen, "the context holds %zu tokens; %zu + %zu do not fit", s->n_ctx,
                s->n_past, n);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= w->hp.n_vocab) {
            bk_err(err, errlen, "token id %d is outside the vocabulary of %u", (int)ids[i],
                    w->hp.n_vocab);
            return -1;
        }
    }
    if (all && !logits) {
        bk_err(err, errlen, "all logits asked without a buffer");
        return -1;
    }
    size_t done = 0;
    while (done < n) {
        const size_t nb = n - done < w->n_ubatch ? n - done : w->n_ubatch;
        const int last = done + nb == n;
        float *lo = all ? logits + done * w->hp.n_vocab : (last ? s->logits : NULL);
        if (ubatch(s, ids + done, nb, s->n_past + done, all, lo, err, errlen)) return -1;
        done += nb;
    }
    s->n_past += n;
    if (!all && logits) memcpy(logits, s->logits, w->hp.n_vocab * sizeof(float));
    return 0;
}

int fw_decode(fw_seq *s, int32_t id, float *logits, char *err, size_t errlen)
{
    return fw_eval(s, &id, 1, logits, 0, err, errlen);
}

/* ---- KV save/restore for the host prompt cache ---- */

/* Only the cells [0, n) are copied, so a short conversation costs what it
 * holds, not the whole cache (layout: kv.h). */
size_t fw_kv_bytes(const fw_seq *s, size_t n) { return s->w->swa_small ? 0 : kv_bytes(&s->kv, n); }

/* Not with the window layers' own cells (swa_small): their layout is not a
 * prefix of cells, so these refuse (-1). */
int fw_kv_save(const fw_seq *s, size_t n, void *buf, size_t len)
{
    if (n > s->n_past || s->w->swa_small) return -1;
    return kv_save(&s->kv, n, buf, len);
}

int fw_kv_restore(fw_seq *s, size_t n, const void *buf, size_t len)
{
    if (s->w->swa_small) return -1;
    if (kv_restore(&s->kv, n, buf, len)) return -1;
    s->n_past = n;
    return 0;
}
