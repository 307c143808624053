/*
 * arch.h -- the architecture table: for each graph the forward pass plays,
 * the tensors it reads (name, kind, shape, where the binding goes) and its
 * options, written once. The planner (fw_plan) checks a file against a row,
 * refuses any tensor the row does not name, and fw_weights_open binds the
 * row's tensors; the graph walk reads the options.
 *
 * Adding an architecture whose operations are llama's with options (qwen2:
 * Q/K/V biases; llama: optional RoPE factors): one row here (and a field in
 * fw_layer or fw_top for each new tensor, with the line of the graph walk
 * that reads it). One whose operations differ (gemma3) also adds its graph
 * walk.
 */
#ifndef BANKML_ARCH_H
#define BANKML_ARCH_H

#include <stddef.h>
#include <stdint.h>

#include "ops/wtype.h"

/* A dimension of a tensor, named by the hyper-parameter it equals. */
enum {
    FW_DIM_NONE = 0,   /* (vectors: no second dimension) */
    FW_DIM_EMBD,       /* n_embd */
    FW_DIM_Q,          /* head_dim * n_head */
    FW_DIM_KV,         /* head_dim * n_head_kv */
    FW_DIM_FF,         /* n_ff */
    FW_DIM_HEAD,       /* head_dim */
    FW_DIM_VOCAB,      /* n_vocab (token_embd's second dimension decides it) */
    FW_DIM_ROT2,       /* n_rot / 2: one RoPE frequency factor per rotated pair */
    FW_DIM_QKV,        /* head_dim * (n_head + 2 * n_head_kv): a fused Q, K, V product */
    FW_DIM_FF2         /* 2 * n_ff: a fused gate and up product */
};

enum {
    FW_MATRIX = 0,     /* a weight matrix of a type in the ops table, bound in the map */
    FW_NORM = 1        /* an F32 vector (a norm, a bias, RoPE factors), copied */
};

enum {
    FW_REQUIRED = 0,
    FW_TIED = 1,       /* may be absent: then the token embedding is used */
    FW_OPTIONAL = 2    /* may be absent: then the field stays NULL and the graph skips it */
};

/* The bound tensors of one layer (fields for every architecture's tensors;
 * an architecture fills those its row names, the rest stay zero / NULL). */
typedef struct {
    float *attn_norm, *ffn_norm, *q_norm, *k_norm;   /* owned copies (small) */
    float *bq, *bk, *bv;      /* Q, K, V biases (qwen2), added after the products; owned */
    float *attn_post_norm, *ffn_post_norm;   /* gemma3: RMS norms of each block's output; owned */
    wt_matrix wq, wk, wv, wo, gate, up, down;
    wt_matrix wqkv, gate_up;  /* fused (phi3): bound, then wq/wk/wv and gate/up are row views of them */
} fw_layer;

/* The bound tensors outside the layers. */
typedef struct {
    wt_matrix tok_embd, output;
    float *output_norm;
    float *rope_freqs;        /* n_rot/2 RoPE frequency factors (Llama 3.x), or NULL; owned */
    float *rope_long, *rope_short;   /* phi3's LongRoPE factors (n_rot/2 each; either may be absent):
                                        long when a sequence's context exceeds n_ctx_orig; owned */
} fw_top;

typedef struct {
    const char *name;  /* "attn_q.weight" (after "blk.N.") or "token_embd.weight" */
    uint8_t kind;      /* FW_MATRIX or FW_NORM */
    uint8_t d0, d1;    /* FW_DIM_*: {d0, d1} for a matrix, {d0} for a norm */
    uint8_t presence;  /* FW_REQUIRED, FW_TIED or FW_OPTIONAL */
    size_t off;        /* offsetof in fw_layer (layer tensors) or fw_top */
} fw_tensor_desc;

typedef struct {
    const char *name;  /* general.architecture */
    const char *models;/* the model families whose files use this graph (help text) */
    int id;            /* FW_ARCH_* (forward.h) */
    int rope_neox;     /* 1: RoPE on halves (NEOX), 0: on adjacent pairs */
    int qk_norm;       /* 1: per-head RMS norms of Q and K before RoPE */
    int gemma;         /* 1: gemma3's block: embedding scaled by sqrt(n_embd), Q scaled after
                          RoPE (kq_scale 1), each block's output RMS-normed (attn_post_norm,
                          ffn_post_norm) before its residual add, GeGLU instead of SwiGLU,
                          sliding-window layers with their own RoPE base */
    int scales;        /* 1: granite's embedding, residual, attention and logit multipliers */
    int nope_step;     /* > 0: layers il with (il + 1) % nope_step == 0 have no RoPE (smollm3: 4) */
    int fused;         /* 1: attn_qkv and ffn_up (gate rows, then up rows) are fused (phi3), and Q is
                          scaled by 1/sqrt(head_dim) after RoPE (kq_scale 1) */
    const fw_tensor_desc *top;   /* the first is token_embd.weight */
    size_t n_top;
    const fw_tensor_desc *layer; /* in the planner's checking order */
    size_t n_layer;
} fw_arch;

/* The row for an architecture name (len bytes, not NUL-terminated), or NULL. */
const fw_arch *fw_arch_find(const char *name, size_t len);
/* The rows, in table order (i < fw_arch_count()). */
size_t fw_arch_count(void);
const fw_arch *fw_arch_at(size_t i);
/* The names that play, "llama, qwen3", written into buf. Returns buf. */
const char *fw_arch_names(char *buf, size_t len);

/* A layer tensor's descriptor by its suffix ("attn_q.weight"), or NULL. */
const fw_tensor_desc *fw_arch_layer_tensor(const fw_arch *a, const char *suffix);
/* A top-level tensor's descriptor by its name, or NULL. */
const fw_tensor_desc *fw_arch_top_tensor(const fw_arch *a, const char *name);

#endif
