/*
 * arch.c -- the architecture table (see arch.h). Each graph's tensors are
 * listed here once; the planner, the refusal of unknown tensors and the
 * bindings all read these lists.
 */
#include "graph/arch.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "graph/forward.h"

#define TOP(n, k, a, b, p, f) { n, k, a, b, p, offsetof(fw_top, f) }
#define LAY(n, k, a, b, f) { n, k, a, b, FW_REQUIRED, offsetof(fw_layer, f) }
#define LAY_OPT(n, k, a, b, f) { n, k, a, b, FW_OPTIONAL, offsetof(fw_layer, f) }

/* token_embd first (it decides n_vocab); output may be tied to it. */
static const fw_tensor_desc top_llama[] = {
    TOP("token_embd.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_VOCAB, FW_REQUIRED, tok_embd),
    TOP("output_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE, FW_REQUIRED, output_norm),
    TOP("output.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_VOCAB, FW_TIED, output),
};

/* llama's, with Llama 3.x's RoPE frequency factors (convert_hf_to_gguf writes
 * rope_scaling "llama3" as this one tensor; llama.cpp reads it for every
 * layer and divides each pair's theta by its factor). */
static const fw_tensor_desc top_llama3[] = {
    TOP("token_embd.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_VOCAB, FW_REQUIRED, tok_embd),
    TOP("output_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE, FW_REQUIRED, output_norm),
    TOP("output.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_VOCAB, FW_TIED, output),
    TOP("rope_freqs.weight", FW_NORM, FW_DIM_ROT2, FW_DIM_NONE, FW_OPTIONAL, rope_freqs),
};

/* phi3's: llama's, with LongRoPE's two factor tensors (Phi-3 128k, Phi-3.5, Phi-4-mini; llama.cpp reads
 * both for every layer and uses the long ones when the sequence's context exceeds the original). */
static const fw_tensor_desc top_phi3[] = {
    TOP("token_embd.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_VOCAB, FW_REQUIRED, tok_embd),
    TOP("output_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE, FW_REQUIRED, output_norm),
    TOP("output.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_VOCAB, FW_TIED, output),
    TOP("rope_factors_long.weight", FW_NORM, FW_DIM_ROT2, FW_DIM_NONE, FW_OPTIONAL, rope_long),
    TOP("rope_factors_short.weight", FW_NORM, FW_DIM_ROT2, FW_DIM_NONE, FW_OPTIONAL, rope_short),
};

/* The llama block: pre-norm attention, pre-norm SwiGLU feed-forward. */
#define LLAMA_LAYER                                                               \
    LAY("attn_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE, attn_norm),       \
    LAY("attn_q.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_Q, wq),                  \
    LAY("attn_k.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_KV, wk),                 \
    LAY("attn_v.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_KV, wv),                 \
    LAY("attn_output.weight", FW_MATRIX, FW_DIM_Q, FW_DIM_EMBD, wo),             \
    LAY("ffn_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE, ffn_norm),         \
    LAY("ffn_gate.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_FF, gate),             \
    LAY("ffn_up.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_FF, up),                 \
    LAY("ffn_down.weight", FW_MATRIX, FW_DIM_FF, FW_DIM_EMBD, down)

static const fw_tensor_desc layer_llama[] = { LLAMA_LAYER };

/* qwen2: llama's block with optional biases on Q, K and V (not on the
 * output), as llama.cpp's create_tensor_qkv reads them. */
static const fw_tensor_desc layer_qwen2[] = {
    LLAMA_LAYER,
    LAY_OPT("attn_q.bias", FW_NORM, FW_DIM_Q, FW_DIM_NONE, bq),
    LAY_OPT("attn_k.bias", FW_NORM, FW_DIM_KV, FW_DIM_NONE, bk),
    LAY_OPT("attn_v.bias", FW_NORM, FW_DIM_KV, FW_DIM_NONE, bv),
};

static const fw_tensor_desc layer_qwen3[] = {
    LLAMA_LAYER,
    LAY("attn_q_norm.weight", FW_NORM, FW_DIM_HEAD, FW_DIM_NONE, q_norm),
    LAY("attn_k_norm.weight", FW_NORM, FW_DIM_HEAD, FW_DIM_NONE, k_norm),
};

/* gemma3: llama's tensors (no biases), Q/K norms, and a norm after each
 * block (llama.cpp's attn_post_norm, ffn_post_norm). */
static const fw_tensor_desc layer_gemma3[] = {
    LLAMA_LAYER,
    LAY("attn_q_norm.weight", FW_NORM, FW_DIM_HEAD, FW_DIM_NONE, q_norm),
    LAY("attn_k_norm.weight", FW_NORM, FW_DIM_HEAD, FW_DIM_NONE, k_norm),
    LAY("post_attention_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE, attn_post_norm),
    LAY("post_ffw_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE, ffn_post_norm),
};

/* phi3: the fused Q/K/V matrix and the fused gate/up matrix (ffn_up, 2 n_ff
 * rows: gate then up, as ggml_swiglu splits it). */
static const fw_tensor_desc layer_phi3[] = {
    LAY("attn_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE, attn_norm),
    LAY("attn_qkv.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_QKV, wqkv),
    LAY("attn_output.weight", FW_MATRIX, FW_DIM_Q, FW_DIM_EMBD, wo),
    LAY("ffn_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE, ffn_norm),
    LAY("ffn_up.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_FF2, gate_up),
    LAY("ffn_down.weight", FW_MATRIX, FW_DIM_FF, FW_DIM_EMBD, down),
};

#define N(a) (sizeof a / sizeof *a)

static const fw_arch table[] = {
    { "llama", "Llama 2, Llama 3.1/3.2 (rope_freqs), SmolLM2", FW_ARCH_LLAMA, 0, 0, 0, 0, 0, 0, top_llama3,
      N(top_llama3), layer_llama, N(layer_llama) },
    { "qwen2", "Qwen2.5, Qwen2.5-Coder, DeepSeek-R1-Distill-Qwen", FW_ARCH_QWEN2, 1, 0, 0, 0, 0, 0, top_llama,
      N(top_llama), layer_qwen2, N(layer_qwen2) },
    { "qwen3", "Qwen3 (dense)", FW_ARCH_QWEN3, 1, 1, 0, 0, 0, 0, top_llama, N(top_llama), layer_qwen3,
      N(layer_qwen3) },
    { "gemma3", "Gemma 3 (270M, 1B, 4B, 12B, 27B text; GeGLU, sliding window: without --swa-full --cache-ram 0)",
      FW_ARCH_GEMMA3, 1, 1, 1, 0, 0, 0, top_llama, N(top_llama), layer_gemma3, N(layer_gemma3) },
    /* granite: llama's block with four multipliers; llama.cpp reads rope_freqs for it too */
    { "granite", "Granite 3.x (dense)", FW_ARCH_GRANITE, 0, 0, 0, 1, 0, 0, top_llama3, N(top_llama3),
      layer_llama, N(layer_llama) },
    /* smollm3: llama's block, every 4th layer without RoPE (no rope_freqs: llama.cpp does not read it) */
    { "smollm3", "SmolLM3", FW_ARCH_SMOLLM3, 0, 0, 0, 0, 4, 0, top_llama, N(top_llama), layer_llama,
      N(layer_llama) },
    /* phi3: fused matrices, LongRoPE, partial RoPE; its sliding_window key is read and dropped by
       llama.cpp (dense) */
    { "phi3", "Phi-3 mini/medium (4k, 128k), Phi-3.5 mini (LongRoPE), Phi-4-mini (partial RoPE)",
      FW_ARCH_PHI3, 1, 0, 0, 0, 0, 1, top_phi3, N(top_phi3), layer_phi3, N(layer_phi3) },
};

const fw_arch *fw_arch_find(const char *name, size_t len)
{
    for (size_t i = 0; i < N(table); i++)
        if (strlen(table[i].name) == len && memcmp(table[i].name, name, len) == 0)
            return &table[i];
    return NULL;
}

size_t fw_arch_count(void) { return N(table); }
const fw_arch *fw_arch_at(size_t i) { return i < N(table) ? &table[i] : NULL; }

const char *fw_arch_names(char *buf, size_t len)
{
    size_t n = 0;
    if (len) buf[0] = '\0';
    for (size_t i = 0; i < N(table) && n < len; i++) {
        int w = snprintf(buf + n, len - n, "%s%s", n ? ", " : "", table[i].name);
        if (w < 0) break;
        n += (size_t)w;
    }
    return buf;
}

const fw_tensor_desc *fw_arch_layer_tensor(const fw_arch *a, const char *suffix)
{
    for (size_t i = 0; i < a->n_layer; i++)
        if (strcmp(a->layer[i].name, suffix) == 0) return &a->layer[i];
    return NULL;
}

const fw_tensor_desc *fw_arch_top_tensor(const fw_arch *a, const char *name)
{
    for (size_t i = 0; i < a->n_top; i++)
        if (strcmp(a->top[i].name, name) == 0) return &a->top[i];
    return NULL;
}
