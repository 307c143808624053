/*
 * test_forward.c -- fw_plan's verdicts on synthetic headers (built here, no
 * tensor data needed: the plan never reads any), and the forward pass on
 * stories260K against ids llama-server b11669 answered (SKIP without
 * ../shared).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "graph/forward.h"
#include "file/gguf.h"
#include "ops/f16.h"
#include "ops/vec.h"
#include "test.h"

/* ---- a tiny GGUF writer (header only) ---------------------------------- */

typedef struct {
    uint8_t b[16384];
    size_t n;
    uint8_t t[8192];       /* tensor infos, appended after the KVs */
    size_t tn;
    uint64_t n_kv, n_t, off;
} gb;

static void put(uint8_t *dst, size_t *n, const void *p, size_t len)
{
    memcpy(dst + *n, p, len);
    *n += len;
}
static void put_u32(uint8_t *d, size_t *n, uint32_t v) { put(d, n, &v, 4); }
static void put_u64(uint8_t *d, size_t *n, uint64_t v) { put(d, n, &v, 8); }
static void put_str(uint8_t *d, size_t *n, const char *s)
{
    put_u64(d, n, strlen(s));
    put(d, n, s, strlen(s));
}

static void kv_str(gb *g, const char *k, const char *v)
{
    put_str(g->b, &g->n, k);
    put_u32(g->b, &g->n, GGUF_VT_STRING);
    put_str(g->b, &g->n, v);
    g->n_kv++;
}
static void kv_u32(gb *g, const char *k, uint32_t v)
{
    put_str(g->b, &g->n, k);
    put_u32(g->b, &g->n, GGUF_VT_U32);
    put_u32(g->b, &g->n, v);
    g->n_kv++;
}
static void kv_f32(gb *g, const char *k, float v)
{
    put_str(g->b, &g->n, k);
    put_u32(g->b, &g->n, GGUF_VT_F32);
    put(g->b, &g->n, &v, 4);
    g->n_kv++;
}
static void kv_bool(gb *g, const char *k, int v)
{
    put_str(g->b, &g->n, k);
    put_u32(g->b, &g->n, GGUF_VT_BOOL);
    g->b[g->n++] = (uint8_t)v;
    g->n_kv++;
}
/* An array of n bools (the per-layer form of a key). */
static void kv_bools(gb *g, const char *k, size_t n)
{
    put_str(g->b, &g->n, k);
    put_u32(g->b, &g->n, GGUF_VT_ARRAY);
    put_u32(g->b, &g->n, GGUF_VT_BOOL);
    put_u64(g->b, &g->n, n);
    for (size_t i = 0; i < n; i++) g->b[g->n++] = (uint8_t)(i % 2);
    g->n_kv++;
}
static void tensor(gb *g, const char *name, uint32_t type, uint64_t d0, uint64_t d1)
{
    put_str(g->t, &g->tn, name);
    put_u32(g->t, &g->tn, d1 ? 2 : 1);
    put_u64(g->t, &g->tn, d0);
    if (d1) put_u64(g->t, &g->tn, d1);
    put_u32(g->t, &g->tn, type);
    put_u64(g->t, &g->tn, g->off);
    g->off += 4096;   /* offsets only; the plan reads no data */
    g->n_t++;
}

/* Parses the built header into *h. */
static int finish(gb *g, gguf_header *h)
{
    static uint8_t out[32768];
    size_t n = 0;
    put(out, &n, "GGUF", 4);
    put_u32(out, &n, 3);
    put_u64(out, &n, g->n_t);
    put_u64(out, &n, g->n_kv);
    put(out, &n, g->b, g->n);
    put(out, &n, g->t, g->tn);
    char err[256];
    uint64_t need;
    return gguf_parse(out, n, h, &need, err, sizeof err) == GGUF_OK ? 0 : -1;
}

/* Options for the model written by build(). */
typedef struct {
    const char *arch;
    uint32_t q_type, norm_type, n_kv_heads, rope_dims, experts;
    const char *scaling;
    float factor;
    int no_eps, extra_qkv, extra_bias, bad_k_shape, no_qnorm, untied, gate_q1;
    int qkv_bias;              /* attn_q/k/v.bias (qwen2); 2: attn_k.bias of the Q width */
    uint32_t bias_type;        /* their type (0: F32) */
    int out_bias, wo_bias;     /* output.bias, blk.0.attn_output.bias */
    uint64_t rope_freqs;       /* rope_freqs.weight of this many floats (0: none) */
    uint32_t rope_freqs_type;  /* its type (0: F32) */
    uint32_t layers;           /* block_count (0: 1) */
    uint32_t swa, swa_pattern; /* gemma3: attention.sliding_window, its pattern (0: absent) */
    int swa_pattern_arr;       /* the pattern as a per-layer array */
    float swa_base, softcap;   /* rope.freq_base_swa, final_logit_softcapping (0: absent) */
    int no_post_norm;          /* gemma3 without blk.0.post_ffw_norm.weight */
    float logit, residual, embd, att;   /* granite's multipliers (0: absent) */
    int finetuned;             /* granite: rope.scaling.finetuned 1 true, 2 false (0: absent) */
    int deepstack;             /* granite: a deepstack_mapping key */
    int longrope;              /* phi3: rope_factors_long/short.weight (n_rot/2 floats; 2: only long) */
    float rope_attn;           /* rope.scaling.attn_factor (0: absent) */
    uint64_t longrope_n;       /* the factors' length (0: n_rot/2) */
} spec;

/* A one-layer model (E 64, 2 heads of 32, FFN 128, vocab 32, every weight
 * type somewhere) that plays; each case below changes one thing. */
static int build_ok(const spec *s, gguf_header *h);

static const char *verdict_ok(const spec *s, fw_hparams *hp)
{
    static char err[256];
    gguf_header h;
    memset(&h, 0, sizeof h);
    if (build_ok(s, &h)) return "(header did not parse)";
    err[0] = 0;
    fw_hparams tmp;
    int rc = fw_plan(&h, hp ? hp : &tmp, err, sizeof err);
    gguf_header_free(&h);
    return rc == 0 ? "" : err;
}

static int build_ok(const spec *s, gguf_header *h)
{
    gb *g = calloc(1, sizeof *g);
    if (!g) return -1;
    const char *a = s->arch ? s->arch : "llama";
    char k[96];
    kv_str(g, "general.architecture", a);
#define K(x) (snprintf(k, sizeof k, "%s." x, a), k)
    kv_u32(g, K("context_length"), 2048);
    kv_u32(g, K("embedding_length"), 64);
    kv_u32(g, K("block_count"), s->layers ? s->layers : 1);
    kv_u32(g, K("feed_forward_length"), 128);
    kv_u32(g, K("attention.head_count"), 2);
    kv_u32(g, K("attention.head_count_kv"), s->n_kv_heads ? s->n_kv_heads : 1);
    if (!s->no_eps) kv_f32(g, K("attention.layer_norm_rms_epsilon"), 1e-5f);
    if (s->rope_dims) kv_u32(g, K("rope.dimension_count"), s->rope_dims);
    if (s->experts) kv_u32(g, K("expert_count"), s->experts);
    if (s->swa) kv_u32(g, K("attention.sliding_window"), s->swa);
    if (s->swa_pattern) kv_u32(g, K("attention.sliding_window_pattern"), s->swa_pattern);
    if (s->swa_pattern_arr) kv_bools(g, K("attention.sliding_window_pattern"), s->layers);
    if (s->swa_base != 0.0f) kv_f32(g, K("rope.freq_base_swa"), s->swa_base);
    if (s->softcap != 0.0f) kv_f32(g, K("final_logit_softcapping"), s->softcap);
    if (s->logit != 0.0f) kv_f32(g, K("logit_scale"), s->logit);
    if (s->residual != 0.0f) kv_f32(g, K("residual_scale"), s->residual);
    if (s->embd != 0.0f) kv_f32(g, K("embedding_scale"), s->embd);
    if (s->att != 0.0f) kv_f32(g, K("attention.scale"), s->att);
    if (s->finetuned) kv_bool(g, K("rope.scaling.finetuned"), s->finetuned == 1);
    if (s->deepstack) kv_u32(g, K("deepstack_mapping"), 0);
    if (s->rope_attn != 0.0f) kv_f32(g, K("rope.scaling.attn_factor"), s->rope_attn);
    if (s->scaling) {
        kv_str(g, K("rope.scaling.type"), s->scaling);
        kv_f32(g, K("rope.scaling.factor"), s->factor);
        kv_u32(g, K("rope.scaling.original_context_length"), 32768);
    }
#undef K
    uint32_t wt = s->q_type ? s->q_type : GGUF_TYPE_F16;
    uint32_t nt = s->norm_type ? s->norm_type : GGUF_TYPE_F32;
    uint32_t kvd = 32 * (s->n_kv_heads ? s->n_kv_heads : 1);
    tensor(g, "token_embd.weight", GGUF_TYPE_F16, 64, 32);
    tensor(g, "output_norm.weight", GGUF_TYPE_F32, 64, 0);
    if (s->untied) tensor(g, "output.weight", GGUF_TYPE_Q8_0, 64, 32);
    tensor(g, "blk.0.attn_norm.weight", nt, 64, 0);
    if (strcmp(a, "phi3") == 0) {   /* fused: Q + K + V rows, gate + up rows */
        tensor(g, "blk.0.attn_qkv.weight", wt, 64, 64 + 2 * kvd);
        tensor(g, "blk.0.attn_output.weight", GGUF_TYPE_F16, 64, 64);
        tensor(g, "blk.0.ffn_norm.weight", GGUF_TYPE_F32, 64, 0);
        tensor(g, "blk.0.ffn_up.weight", GGUF_TYPE_Q8_0, 64, 256);
        tensor(g, "blk.0.ffn_down.weight", GGUF_TYPE_BF16, 128, 64);
        if (s->longrope) {
            const uint64_t nf = s->longrope_n ? s->longrope_n : (s->rope_dims ? s->rope_dims : 32) / 2;
            tensor(g, "rope_factors_long.weight", GGUF_TYPE_F32, nf, 0);
            if (s->longrope == 1) tensor(g, "rope_factors_short.weight", GGUF_TYPE_F32, nf, 0);
        }
        int rc = finish(g, h);
        free(g);
        return rc;
    }
    tensor(g, "blk.0.attn_q.weight", wt, 64, 64);
    tensor(g, "blk.0.attn_k.weight", GGUF_TYPE_F16, 64, s->bad_k_shape ? 64 : kvd);
    tensor(g, "blk.0.attn_v.weight", GGUF_TYPE_F16, 64, kvd);
    tensor(g, "blk.0.attn_output.weight", GGUF_TYPE_F16, 64, 64);
    tensor(g, "blk.0.ffn_norm.weight", GGUF_TYPE_F32, 64, 0);
    tensor(g, "blk.0.ffn_gate.weight", s->gate_q1 ? GGUF_TYPE_Q1_0 : GGUF_TYPE_Q8_0, 64, 128);
    tensor(g, "blk.0.ffn_up.weight", GGUF_TYPE_Q2_0, 64, 128);
    tensor(g, "blk.0.ffn_down.weight", GGUF_TYPE_BF16, 128, 64);
    if (s->extra_qkv) tensor(g, "blk.0.attn_qkv.weight", GGUF_TYPE_F16, 64, 128);
    if (s->extra_bias) tensor(g, "blk.0.attn_q.bias", GGUF_TYPE_F32, 64, 0);
    if (s->qkv_bias) {
        uint32_t bt = s->bias_type ? s->bias_type : GGUF_TYPE_F32;
        tensor(g, "blk.0.attn_q.bias", bt, 64, 0);
        tensor(g, "blk.0.attn_k.bias", bt, s->qkv_bias == 2 ? 64 : kvd, 0);
        tensor(g, "blk.0.attn_v.bias", bt, kvd, 0);
    }
    if (s->wo_bias) tensor(g, "blk.0.attn_output.bias", GGUF_TYPE_F32, 64, 0);
    if (s->out_bias) tensor(g, "output.bias", GGUF_TYPE_F32, 32, 0);
    if (s->rope_freqs)
        tensor(g, "rope_freqs.weight", s->rope_freqs_type ? s->rope_freqs_type : GGUF_TYPE_F32,
               s->rope_freqs, 0);
    if (strcmp(a, "qwen3") == 0 || strcmp(a, "gemma3") == 0) {
        if (!s->no_qnorm) tensor(g, "blk.0.attn_q_norm.weight", GGUF_TYPE_F32, 32, 0);
        tensor(g, "blk.0.attn_k_norm.weight", GGUF_TYPE_F32, 32, 0);
    }
    if (strcmp(a, "gemma3") == 0) {
        tensor(g, "blk.0.post_attention_norm.weight", GGUF_TYPE_F32, 64, 0);
        if (!s->no_post_norm) tensor(g, "blk.0.post_ffw_norm.weight", GGUF_TYPE_F32, 64, 0);
    }
    int rc = finish(g, h);
    free(g);
    return rc;
}

TEST(plan_refuses_architecture)
{
    spec s = { .arch = "gemma4" };
    CHECK_STR(verdict_ok(&s, NULL),
              "architecture gemma4 is not supported (llama, qwen2, qwen3, gemma3, granite, "
              "smollm3, phi3)");
}

TEST(plan_qwen2_biases)
{
    spec s;
    fw_hparams hp;
    memset(&s, 0, sizeof s); s.arch = "qwen2";
    CHECK_STR(verdict_ok(&s, &hp), "");            /* biases may be absent, as in llama.cpp */
    CHECK_INT(hp.arch, FW_ARCH_QWEN2);
    CHECK_INT(hp.rope_neox, 1);
    s.qkv_bias = 1;
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK_INT(hp.arch, FW_ARCH_QWEN2);
    s.qkv_bias = 2;
    CHECK_STR(verdict_ok(&s, NULL), "blk.0.attn_k.bias: shape is not {32}");
    s.qkv_bias = 1; s.bias_type = GGUF_TYPE_F16;
    CHECK_STR(verdict_ok(&s, NULL), "blk.0.attn_q.bias: bias type F16 is not supported (F32)");
    memset(&s, 0, sizeof s); s.arch = "qwen2"; s.qkv_bias = 1; s.wo_bias = 1;
    CHECK_STR(verdict_ok(&s, NULL), "blk.0.attn_output.bias: biases are not supported");
    memset(&s, 0, sizeof s); s.arch = "qwen2"; s.out_bias = 1;
    CHECK_STR(verdict_ok(&s, NULL), "output.bias: biases are not supported");
    memset(&s, 0, sizeof s); s.arch = "qwen2"; s.rope_freqs = 16;
    CHECK_STR(verdict_ok(&s, NULL), "rope_freqs.weight: rope factors are not supported");
    /* llama's graph has no Q/K/V biases (llama.cpp's would add them: refused) */
    memset(&s, 0, sizeof s); s.qkv_bias = 1;
    CHECK_STR(verdict_ok(&s, NULL), "blk.0.attn_q.bias: biases are not supported");
}

/* gemma3 (one layer of tensors, so the block count stays 1 where the
 * tensors are checked): the keys llama_model_gemma3 reads and its refusals. */
TEST(plan_gemma3)
{
    spec s;
    fw_hparams hp;
    memset(&s, 0, sizeof s); s.arch = "gemma3";
    CHECK_STR(verdict_ok(&s, &hp), "");              /* no window: every layer global */
    CHECK_INT(hp.arch, FW_ARCH_GEMMA3);
    CHECK_INT(hp.rope_neox, 1);
    CHECK_INT(hp.n_swa, 0);
    CHECK_INT(hp.is_swa[0], 0);
    CHECK(hp.kq_scale == 1.0f);                      /* Q is scaled instead */
    CHECK(hp.q_scale == 1.0f / sqrtf(32.0f));        /* 1/sqrt(head_dim) */
    CHECK(hp.embd_scale == sqrtf(64.0f));
    s.swa = 16;                                      /* window 16, pattern 6: layer 0 is a window one */
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK_INT(hp.n_swa, 16);
    CHECK_INT(hp.is_swa[0], 1);
    CHECK(hp.rope_base_swa == 10000.0f);             /* the default of rope_freq_base_train_swa */
    CHECK(hp.rope_base == 10000.0f);
    s.swa_pattern = 1;                               /* il % 1 < 0: none is a window layer */
    s.swa_base = 5000.0f;
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK_INT(hp.is_swa[0], 0);
    CHECK(hp.rope_base_swa == 5000.0f);
    s.swa_pattern = 0; s.swa_pattern_arr = 1; s.layers = 1;
    CHECK_STR(verdict_ok(&s, NULL), "gemma3.attention.sliding_window_pattern: per-layer arrays "
              "are not supported (a number is)");
    memset(&s, 0, sizeof s); s.arch = "gemma3"; s.softcap = 30.0f;
    CHECK_STR(verdict_ok(&s, NULL), "final logit soft-capping (30) is not supported");
    memset(&s, 0, sizeof s); s.arch = "gemma3"; s.no_post_norm = 1;
    CHECK_STR(verdict_ok(&s, NULL), "blk.0.post_ffw_norm.weight is missing");
    memset(&s, 0, sizeof s); s.arch = "gemma3"; s.no_qnorm = 1;
    CHECK_STR(verdict_ok(&s, NULL), "blk.0.attn_q_norm.weight is missing");
    /* the post-norms belong to gemma3's graph only */
    memset(&s, 0, sizeof s); s.arch = "qwen3";
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK(hp.q_scale == 0.0f && hp.embd_scale == 0.0f && hp.n_swa == 0);
}

/* GeGLU through ggml's gelu table: entries and the +-10 edges, as
 * ggml_vec_geglu_f32 (the table itself is held to the library's in
 * oracle_graphs: every entry). */
TEST(geglu_table_and_edges)
{
    const uint16_t *t = vec_gelu_table();
    CHECK_INT(t[0x0000], 0x0000);                    /* gelu(0) = 0 */
    CHECK_INT(t[0x3c00], 0x3abb);                    /* gelu(1) = 0.8412 -> f16 0.8413 */
    CHECK_INT(t[0xbc00], 0xb115);                    /* gelu(-1) = -0.1588 */
    float g[4] = { -10.0f, 10.0f, 1.0f, -20.0f }, u[4] = { 3.0f, 0.5f, 2.0f, 7.0f }, y[4];
    vec_geglu(y, g, u, 4);
    CHECK(y[0] == 0.0f);                             /* <= -10: 0 */
    CHECK(y[1] == 5.0f);                             /* >= 10: g * u */
    CHECK(y[2] == f16_to_f32(0x3abb) * 2.0f);        /* the table, widened, times u */
    CHECK(y[3] == 0.0f);
}

/* granite's multipliers and RoPE switch; smollm3's layers without RoPE. */
TEST(plan_granite_and_smollm3)
{
    spec s;
    fw_hparams hp;
    memset(&s, 0, sizeof s); s.arch = "granite";
    CHECK_STR(verdict_ok(&s, NULL), "granite.logit_scale is missing");   /* required, as in llama.cpp */
    s.logit = 8.0f;
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK_INT(hp.arch, FW_ARCH_GRANITE);
    CHECK_INT(hp.rope_neox, 0);
    CHECK(hp.logit_mul == 0.125f);
    CHECK(hp.residual_scale == 0.0f && hp.embd_scale == 0.0f);
    CHECK(hp.kq_scale == 1.0f / sqrtf(32.0f));       /* no attention.scale: 1/sqrt(head_dim) */
    CHECK_INT(hp.rope_off[0], 0);
    s.residual = 0.22f; s.embd = 12.0f; s.att = 0.015625f; s.finetuned = 1;
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK(hp.residual_scale == 0.22f && hp.embd_scale == 12.0f && hp.kq_scale == 0.015625f);
    CHECK_INT(hp.rope_off[0], 0);
    s.finetuned = 2;                                  /* false: no layer rotated */
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK_INT(hp.rope_off[0], 1);
    s.finetuned = 0; s.deepstack = 1;
    CHECK_STR(verdict_ok(&s, NULL), "granite.deepstack_mapping (multimodal deepstack) is not supported");
    memset(&s, 0, sizeof s); s.arch = "granite"; s.logit = 8.0f; s.wo_bias = 1;
    CHECK_STR(verdict_ok(&s, NULL), "blk.0.attn_output.bias: biases are not supported");
    memset(&s, 0, sizeof s); s.arch = "granite"; s.logit = 8.0f; s.rope_freqs = 16;
    CHECK_STR(verdict_ok(&s, &hp), "");               /* granite reads rope_freqs as llama does */
    memset(&s, 0, sizeof s); s.arch = "smollm3";
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK_INT(hp.arch, FW_ARCH_SMOLLM3);
    CHECK_INT(hp.rope_off[0], 0);                     /* (0 + 1) % 4 != 0 */
    CHECK(hp.logit_mul == 0.0f);
    s.rope_freqs = 16;
    CHECK_STR(verdict_ok(&s, NULL), "rope_freqs.weight: rope factors are not supported");
}

/* phi3: the fused matrices in their shapes, Q scaled after RoPE, the
 * sliding-window key dropped (llama.cpp plays phi3 dense), LongRoPE refused. */
TEST(plan_phi3)
{
    spec s;
    fw_hparams hp;
    memset(&s, 0, sizeof s); s.arch = "phi3";
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK_INT(hp.arch, FW_ARCH_PHI3);
    CHECK_INT(hp.rope_neox, 1);
    CHECK(hp.q_scale == 1.0f / sqrtf(32.0f) && hp.kq_scale == 1.0f);
    s.swa = 2047;
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK_INT(hp.n_swa, 0);
    CHECK_INT(hp.is_swa[0], 0);
    s.n_kv_heads = 2;                               /* attn_qkv of 64 + 2 * 64 rows */
    CHECK_STR(verdict_ok(&s, &hp), "");
    /* LongRoPE (Phi-3.5): both factor tensors (or one: llama.cpp's are each optional), attn_factor read */
    memset(&s, 0, sizeof s); s.arch = "phi3"; s.longrope = 1; s.rope_attn = 1.1902381f;
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK_INT(hp.n_rot, 32);
    CHECK(hp.attn_factor == 1.1902381f && hp.freq_scale == 1.0f && hp.ext_factor == 0.0f);
    CHECK_INT(hp.n_ctx_orig, 2048);                 /* no original_context_length: n_ctx_train */
    s.longrope = 2;
    CHECK_STR(verdict_ok(&s, NULL), "");
    /* partial RoPE (Phi-4-mini: 96 of 128): the factors are n_rot/2 long */
    memset(&s, 0, sizeof s); s.arch = "phi3"; s.rope_dims = 16;
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK_INT(hp.n_rot, 16);
    CHECK_INT(hp.head_dim, 32);
    s.longrope = 1;
    CHECK_STR(verdict_ok(&s, NULL), "");
    s.longrope_n = 16;                              /* head_dim/2 factors: n_rot/2 wanted */
    CHECK_STR(verdict_ok(&s, NULL), "rope_factors_long.weight: shape is not {8}");
    memset(&s, 0, sizeof s); s.arch = "phi3"; s.rope_dims = 15;
    CHECK_STR(verdict_ok(&s, NULL), "partial RoPE is not supported (15 of 32 dimensions)");
    s.rope_dims = 34;
    CHECK_STR(verdict_ok(&s, NULL), "partial RoPE is not supported (34 of 32 dimensions)");
    /* separate Q/K/V are not phi3's tensors */
    memset(&s, 0, sizeof s); s.extra_qkv = 1;
    CHECK_STR(verdict_ok(&s, NULL), "blk.0.attn_qkv.weight: fused QKV is not supported");
}

TEST(plan_llama3_rope_freqs)
{
    spec s;
    fw_hparams hp;
    memset(&s, 0, sizeof s); s.rope_freqs = 16;   /* head 32: 16 pairs */
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK_INT(hp.arch, FW_ARCH_LLAMA);
    CHECK_INT(hp.rope_neox, 0);
    s.rope_freqs = 32;
    CHECK_STR(verdict_ok(&s, NULL), "rope_freqs.weight: shape is not {16}");
    s.rope_freqs = 16; s.rope_freqs_type = GGUF_TYPE_F16;
    CHECK_STR(verdict_ok(&s, NULL),
              "rope_freqs.weight: RoPE factor type F16 is not supported (F32)");
    memset(&s, 0, sizeof s); s.arch = "qwen3"; s.rope_freqs = 16;
    CHECK_STR(verdict_ok(&s, NULL), "rope_freqs.weight: rope factors are not supported");
}

TEST(plan_plays_llama_and_reads_hparams)
{
    spec s = { 0 };
    fw_hparams hp;
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK_INT(hp.arch, FW_ARCH_LLAMA);
    CHECK_INT(hp.n_layer, 1);
    CHECK_INT(hp.head_dim, 32);
    CHECK_INT(hp.n_head_kv, 1);
    CHECK_INT(hp.n_vocab, 32);
    CHECK_INT(hp.tied, 1);
    CHECK_INT(hp.rope_neox, 0);
    CHECK(hp.rope_base == 10000.0f);
    CHECK(hp.freq_scale == 1.0f && hp.ext_factor == 0.0f && hp.attn_factor == 1.0f);
    CHECK(hp.kq_scale == 1.0f / sqrtf(32.0f));
    s.untied = 1;
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK_INT(hp.tied, 0);
    CHECK_INT(hp.type_output, GGUF_TYPE_Q8_0);
}

TEST(plan_refuses_each_reason)
{
    spec s;
    memset(&s, 0, sizeof s); s.q_type = GGUF_TYPE_MXFP4;
    CHECK_STR(verdict_ok(&s, NULL),
              "blk.0.attn_q.weight: type MXFP4 is not supported (F32, F16, BF16, Q8_0, Q1_0, Q2_0, "
              "Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M)");
    memset(&s, 0, sizeof s); s.q_type = GGUF_TYPE_Q4_K;   /* a kernel, but rows of 64 */
    CHECK_STR(verdict_ok(&s, NULL), "blk.0.attn_q.weight: rows of 64 are not whole Q4_K blocks");
    memset(&s, 0, sizeof s); s.norm_type = GGUF_TYPE_F16;
    CHECK_STR(verdict_ok(&s, NULL), "blk.0.attn_norm.weight: norm type F16 is not supported (F32)");
    memset(&s, 0, sizeof s); s.extra_qkv = 1;
    CHECK_STR(verdict_ok(&s, NULL), "blk.0.attn_qkv.weight: fused QKV is not supported");
    memset(&s, 0, sizeof s); s.extra_bias = 1;
    CHECK_STR(verdict_ok(&s, NULL), "blk.0.attn_q.bias: biases are not supported");
    memset(&s, 0, sizeof s); s.scaling = "longrope"; s.factor = 4.0f;
    CHECK_STR(verdict_ok(&s, NULL), "RoPE scaling longrope is not supported (none, linear, yarn)");
    memset(&s, 0, sizeof s); s.rope_dims = 16;
    CHECK_STR(verdict_ok(&s, NULL), "partial RoPE is not supported (16 of 32 dimensions)");
    memset(&s, 0, sizeof s); s.n_kv_heads = 3;
    CHECK_STR(verdict_ok(&s, NULL), "2 heads are not a multiple of 3 KV heads");
    memset(&s, 0, sizeof s); s.no_eps = 1;
    CHECK_STR(verdict_ok(&s, NULL), "llama.attention.layer_norm_rms_epsilon is missing");
    memset(&s, 0, sizeof s); s.experts = 8;
    CHECK_STR(verdict_ok(&s, NULL), "experts are not supported (llama.expert_count 8)");
    memset(&s, 0, sizeof s); s.bad_k_shape = 1;
    CHECK_STR(verdict_ok(&s, NULL), "blk.0.attn_k.weight: shape is not {64, 32}");
    memset(&s, 0, sizeof s); s.gate_q1 = 1;
    CHECK_STR(verdict_ok(&s, NULL), "blk.0.ffn_gate.weight: rows of 64 are not whole Q1_0 blocks");
    memset(&s, 0, sizeof s); s.arch = "qwen3"; s.no_qnorm = 1;
    CHECK_STR(verdict_ok(&s, NULL), "blk.0.attn_q_norm.weight is missing");
}

TEST(plan_qwen3_yarn)
{
    spec s;
    memset(&s, 0, sizeof s);
    s.arch = "qwen3";
    s.scaling = "yarn";
    s.factor = 4.0f;
    fw_hparams hp;
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK_INT(hp.arch, FW_ARCH_QWEN3);
    CHECK_INT(hp.rope_neox, 1);
    CHECK_INT(hp.rope_scaling, FW_ROPE_YARN);
    CHECK(hp.freq_scale == 0.25f);
    CHECK(hp.ext_factor == 1.0f);
    CHECK_INT(hp.n_ctx_orig, 32768);
    /* get_mscale(4) * 1/(1 + 0.1 ln 4): 1 within a rounding */
    CHECK(fabsf(hp.attn_factor - 1.0f) <= 2e-7f);
    /* the same file as llama: linear scaling with no factor plays unscaled */
    memset(&s, 0, sizeof s);
    s.scaling = "linear";
    s.factor = 0.0f;
    CHECK_STR(verdict_ok(&s, &hp), "");
    CHECK(hp.freq_scale == 1.0f);
}

/* RoPE frequency factors (Llama 3.x's rope_freqs) divide each pair's theta
 * before the rotation, as ggml_rope_cache_init; the running theta is not
 * divided, so the next pair is unchanged. */
TEST(rope_cache_freq_factors_divide_theta)
{
    vec_rope_params p = { 8, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f, 4096, NULL };
    float plain4[8], plain2[8], ones[8], fac[8];
    vec_rope_cache(&p, 4, plain4);
    vec_rope_cache(&p, 2, plain2);
    const float f1[4] = { 1.0f, 1.0f, 1.0f, 1.0f }, f[4] = { 2.0f, 1.0f, 1.0f, 8.0f };
    p.freq_factors = f1;
    vec_rope_cache(&p, 4, ones);
    CHECK(memcmp(ones, plain4, sizeof ones) == 0);
    p.freq_factors = f;
    vec_rope_cache(&p, 4, fac);
    CHECK(fac[0] == plain2[0] && fac[1] == plain2[1]);        /* 4 / 2 = theta at position 2 */
    CHECK(memcmp(fac + 2, plain4 + 2, 4 * sizeof(float)) == 0);
    CHECK(fac[0] != plain4[0]);
    const float ts = powf(10000.0f, -2.0f / 8.0f);
    float th = 4.0f;
    for (int i = 0; i < 3; i++) th *= ts;
    th = th / 8.0f;
    float sn, cs;
    sincosf(th, &sn, &cs);
    CHECK(fac[6] == cs && fac[7] == sn);
    CHECK(fac[6] != plain4[6]);
}

/* ---- stories260K against llama-server ------------------------------------- */

/* llama-server b11669 -t 2 -c 512 -np 1, /completion with "prompt":
 * [1, 403, 407, 261, 378] ("Once upon a time" with BOS), temperature 0,
 * top_k 1, cache_prompt false, n_predict 48: ", there was a little girl
 * named Lily. She loved to play outside in the park. ..." */
static const int32_t PROMPT[] = { 1, 403, 407, 261, 378 };
static const int32_t WANT[48] = {
    432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337,
    410, 408, 419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394,
    261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335, 312, 432,
};

typedef struct {
    gguf_map map;
    gguf_header h;
    fw_weights *w;
    fw_seq *m;
} opened;

static int open_stories(opened *o, size_t n_ctx, int threads)
{
    const char *p = test_shared("models/stories260K.gguf");
    char err[256];
    uint64_t need;
    memset(o, 0, sizeof *o);
    if (!p || gguf_map_open(p, &o->map, err, sizeof err)) return -1;
    if (gguf_parse(o->map.p, o->map.len, &o->h, &need, err, sizeof err) != GGUF_OK) return -1;
    fw_opts opts = { 2, 512, NULL, threads, 0, 0, 0, 0 };
    if (fw_weights_open(&o->w, &o->map, &o->h, &opts, err, sizeof err) ||
        fw_seq_new(&o->m, o->w, n_ctx, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    return 0;
}

static void close_stories(opened *o)
{
    fw_seq_free(o->m);
    fw_weights_close(o->w);
    gguf_header_free(&o->h);
    gguf_map_close(&o->map);
}

TEST(stories260K_greedy_equals_llama_server)
{
    if (!test_shared("models/stories260K.gguf")) SKIP("../shared/models/stories260K.gguf is absent");
    opened o;
    CHECK(open_stories(&o, 512, 2) == 0);
    if (!o.m) return;
    char err[256];
    float *lg = malloc(512 * sizeof(float));
    CHECK(fw_eval(o.m, PROMPT, 5, lg, 0, err, sizeof err) == 0);
    int32_t got[48];
    for (int i = 0; i < 48; i++) {
        got[i] = fw_argmax(lg, 512);
        if (i < 47) CHECK(fw_decode(o.m, got[i], lg, err, sizeof err) == 0);
    }
    CHECK_MEM(got, WANT, sizeof WANT);
    CHECK_INT(fw_n_past(o.m), 5 + 47);
    free(lg);
    close_stories(&o);
}

TEST(stories260K_truncate_and_threads_keep_bits)
{
    if (!test_shared("models/stories260K.gguf")) SKIP("../shared/models/stories260K.gguf is absent");
    opened a, b;
    CHECK(open_stories(&a, 600, 1) == 0);
    CHECK(open_stories(&b, 600, 3) == 0);
    if (!a.m || !b.m) return;
    CHECK_INT(fw_n_ctx(a.m), 768);   /* 600 rounded up to 256s, as llama.cpp */
    char err[256];
    int32_t ids[300];
    for (int i = 0; i < 300; i++) ids[i] = (int32_t)(3 + (i * 37) % 509);
    float *la = malloc(512 * sizeof(float)), *lb = malloc(512 * sizeof(float));
    /* pool of 1 vs 3: the same bits (only llama_threads shapes them) */
    CHECK(fw_eval(a.m, ids, 300, la, 0, err, sizeof err) == 0);
    CHECK(fw_eval(b.m, ids, 300, lb, 0, err, sizeof err) == 0);
    CHECK_MEM(la, lb, 512 * sizeof(float));
    /* a decode step past 256 cells (split-KV), then back to a prefix */
    CHECK(fw_decode(a.m, 5, la, err, sizeof err) == 0);
    CHECK(fw_decode(b.m, 5, lb, err, sizeof err) == 0);
    CHECK_MEM(la, lb, 512 * sizeof(float));
    fw_truncate(a.m, 299);
    CHECK_INT(fw_n_past(a.m), 299);
    CHECK(fw_eval(a.m, ids + 299, 1, la, 0, err, sizeof err) == 0);
    fw_truncate(b.m, 0);
    CHECK(fw_eval(b.m, ids, 299, lb, 0, err, sizeof err) == 0);
    CHECK(fw_eval(b.m, ids + 299, 1, lb, 0, err, sizeof err) == 0);
    CHECK_MEM(la, lb, 512 * sizeof(float));
    /* errors: an id outside the vocabulary, a full context */
    int32_t bad = 512;
    CHECK(fw_eval(a.m, &bad, 1, la, 0, err, sizeof err) == -1);
    CHECK_STR(err, "token id 512 is outside the vocabulary of 512");
    int32_t *many = calloc(500, sizeof *many);
    CHECK(fw_eval(a.m, many, 500, la, 0, err, sizeof err) == -1);
    CHECK_STR(err, "the context holds 768 tokens; 300 + 500 do not fit");
    CHECK_INT(fw_n_past(a.m), 300);
    free(many);
    free(la);
    free(lb);
    close_stories(&a);
    close_stories(&b);
}

/* Two sequences on one fw_weights, their steps interleaved, give each the
 * bits it gives alone on weights of its own; a prefix saved from one and
 * restored into a third continues with the same bits. */
TEST(stories260K_two_sequences_share_weights)
{
    if (!test_shared("models/stories260K.gguf")) SKIP("../shared/models/stories260K.gguf is absent");
    opened a1, b1, sh;
    CHECK(open_stories(&a1, 600, 2) == 0);
    CHECK(open_stories(&b1, 600, 2) == 0);
    CHECK(open_stories(&sh, 600, 2) == 0);
    if (!a1.m || !b1.m || !sh.m) return;
    char err[256];
    fw_seq *b = NULL, *c = NULL;
    CHECK(fw_seq_new(&b, sh.w, 600, err, sizeof err) == 0);
    CHECK(fw_seq_new(&c, sh.w, 300, err, sizeof err) == 0);
    if (!b || !c) return;
    fw_seq *a = sh.m;
    CHECK(fw_seq_weights(a) == sh.w && fw_seq_weights(b) == sh.w);
    CHECK_INT(fw_weights_hp(sh.w)->n_vocab, 512);
    CHECK_INT(fw_n_ctx(c), 512);
    int32_t ia[300], ib[200];
    for (int i = 0; i < 300; i++) ia[i] = (int32_t)(3 + (i * 37) % 509);
    for (int i = 0; i < 200; i++) ib[i] = (int32_t)(7 + (i * 53) % 501);
    enum { V = 512 };
    float *wa = malloc(3 * V * sizeof(float)), *wb = malloc(2 * V * sizeof(float));
    float *g = malloc(V * sizeof(float));
    /* alone, each on its own weights */
    CHECK(fw_eval(a1.m, ia, 300, wa, 0, err, sizeof err) == 0);
    CHECK(fw_decode(a1.m, 5, wa + V, err, sizeof err) == 0);
    CHECK(fw_decode(a1.m, 9, wa + 2 * V, err, sizeof err) == 0);
    CHECK(fw_eval(b1.m, ib, 200, wb, 0, err, sizeof err) == 0);
    CHECK(fw_decode(b1.m, 11, wb + V, err, sizeof err) == 0);
    /* shared weights, interleaved */
    CHECK(fw_eval(a, ia, 300, g, 0, err, sizeof err) == 0);
    CHECK_MEM(g, wa, V * sizeof(float));
    CHECK(fw_eval(b, ib, 200, g, 0, err, sizeof err) == 0);
    CHECK_MEM(g, wb, V * sizeof(float));
    CHECK(fw_decode(a, 5, g, err, sizeof err) == 0);
    CHECK_MEM(g, wa + V, V * sizeof(float));
    CHECK(fw_decode(b, 11, g, err, sizeof err) == 0);
    CHECK_MEM(g, wb + V, V * sizeof(float));
    CHECK_MEM(fw_logits(b), wb + V, V * sizeof(float));
    CHECK(memcmp(fw_logits(a), fw_logits(b), V * sizeof(float)) != 0);
    CHECK_INT(fw_n_past(a), 301);
    CHECK_INT(fw_n_past(b), 201);
    /* a's 301 cells into c (another n_ctx, the same weights), then a step */
    size_t nb = fw_kv_bytes(a, 301);
    CHECK_INT(nb, fw_kv_bytes(c, 301));
    void *buf = malloc(nb);
    CHECK(fw_kv_save(a, 301, buf, nb) == 0);
    CHECK(fw_kv_save(a, 302, buf, nb) == -1);        /* past n_past */
    CHECK(fw_kv_restore(c, 301, buf, nb - 1) == -1);  /* wrong length */
    CHECK(fw_kv_restore(c, 301, buf, nb) == 0);
    CHECK_INT(fw_n_past(c), 301);
    CHECK(fw_decode(c, 9, g, err, sizeof err) == 0);
    CHECK_MEM(g, wa + 2 * V, V * sizeof(float));
    free(buf);
    free(g);
    free(wa);
    free(wb);
    fw_seq_free(b);
    fw_seq_free(c);
    close_stories(&a1);
    close_stories(&b1);
    close_stories(&sh);
}

TEST(seq_new_refuses_a_huge_context)
{
    if (!test_shared("models/stories260K.gguf")) SKIP("../shared/models/stories260K.gguf is absent");
    opened o;
    CHECK(open_stories(&o, 512, 1) == 0);
    if (!o.m) return;
    char err[256];
    fw_seq *s = (fw_seq *)&o;   /* must be reset to NULL on failure */
    CHECK(fw_seq_new(&s, o.w, ((size_t)1 << 24) + 1, err, sizeof err) == -1);
    CHECK(s == NULL);
    CHECK_STR(err, "context of 16777217 tokens is too large");
    fw_opts bad = { 0, 512, NULL, 1, 0, 0, 0, 0 };
    bad.llama_threads = 300;
    fw_weights *w = (fw_weights *)&o;
    CHECK(fw_weights_open(&w, &o.map, &o.h, &bad, err, sizeof err) == -1);
    CHECK(w == NULL);
    CHECK_STR(err, "llama threads 300 out of range (1 to 256)");
    close_stories(&o);
}
