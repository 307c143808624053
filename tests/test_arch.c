/*
 * test_arch.c -- the architecture table (src/graph/arch.c): each graph's
 * tensor list, shapes, bindings and options as literals.
 */
#include "test.h"

#include <stddef.h>

#include "graph/arch.h"
#include "graph/forward.h"

static const char *LLAMA_LAYER[9] = {
    "attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
    "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
    "ffn_down.weight",
};

static void check_desc(const fw_tensor_desc *d, const char *name, int kind, int d0, int d1,
                       int presence, size_t off)
{
    CHECK_STR(d->name, name);
    CHECK_INT(d->kind, kind);
    CHECK_INT(d->d0, d0);
    CHECK_INT(d->d1, d1);
    CHECK_INT(d->presence, presence);
    CHECK_INT(d->off, off);
}

static void check_llama_layer(const fw_arch *a)
{
    for (size_t i = 0; i < 9; i++) CHECK_STR(a->layer[i].name, LLAMA_LAYER[i]);
    check_desc(&a->layer[0], "attn_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE, FW_REQUIRED,
               offsetof(fw_layer, attn_norm));
    check_desc(&a->layer[1], "attn_q.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_Q, FW_REQUIRED,
               offsetof(fw_layer, wq));
    check_desc(&a->layer[2], "attn_k.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_KV, FW_REQUIRED,
               offsetof(fw_layer, wk));
    check_desc(&a->layer[3], "attn_v.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_KV, FW_REQUIRED,
               offsetof(fw_layer, wv));
    check_desc(&a->layer[4], "attn_output.weight", FW_MATRIX, FW_DIM_Q, FW_DIM_EMBD,
               FW_REQUIRED, offsetof(fw_layer, wo));
    check_desc(&a->layer[5], "ffn_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE, FW_REQUIRED,
               offsetof(fw_layer, ffn_norm));
    check_desc(&a->layer[6], "ffn_gate.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_FF, FW_REQUIRED,
               offsetof(fw_layer, gate));
    check_desc(&a->layer[7], "ffn_up.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_FF, FW_REQUIRED,
               offsetof(fw_layer, up));
    check_desc(&a->layer[8], "ffn_down.weight", FW_MATRIX, FW_DIM_FF, FW_DIM_EMBD, FW_REQUIRED,
               offsetof(fw_layer, down));
    check_desc(&a->top[0], "token_embd.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_VOCAB,
               FW_REQUIRED, offsetof(fw_top, tok_embd));
    check_desc(&a->top[1], "output_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE, FW_REQUIRED,
               offsetof(fw_top, output_norm));
    check_desc(&a->top[2], "output.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_VOCAB, FW_TIED,
               offsetof(fw_top, output));
}

/* llama's and qwen's top-level tensors: llama reads Llama 3.x's RoPE
 * factors too, the qwens do not (llama.cpp's qwen2/qwen3 loaders do not
 * create rope_freqs). */
static void check_top(const fw_arch *a, int rope_freqs)
{
    CHECK_INT(a->n_top, rope_freqs ? 4 : 3);
    if (rope_freqs)
        check_desc(&a->top[3], "rope_freqs.weight", FW_NORM, FW_DIM_ROT2, FW_DIM_NONE,
                   FW_OPTIONAL, offsetof(fw_top, rope_freqs));
    else
        CHECK(fw_arch_top_tensor(a, "rope_freqs.weight") == NULL);
}

TEST(arch_table_llama)
{
    const fw_arch *a = fw_arch_find("llama", 5);
    CHECK(a != NULL);
    if (!a) return;
    CHECK(a == fw_arch_at(0));
    CHECK_STR(a->name, "llama");
    CHECK_STR(a->models, "Llama 2, Llama 3.1/3.2 (rope_freqs), SmolLM2");
    CHECK_INT(a->id, FW_ARCH_LLAMA);
    CHECK_INT(a->rope_neox, 0);
    CHECK_INT(a->qk_norm, 0);
    CHECK_INT(a->n_layer, 9);
    check_llama_layer(a);
    check_top(a, 1);
    CHECK(fw_arch_layer_tensor(a, "attn_q_norm.weight") == NULL);
    CHECK(fw_arch_layer_tensor(a, "attn_q.bias") == NULL);
    CHECK(fw_arch_layer_tensor(a, "ffn_up.weight") == &a->layer[7]);
    CHECK(fw_arch_top_tensor(a, "output.weight") == &a->top[2]);
    CHECK(fw_arch_top_tensor(a, "blk.0.attn_q.weight") == NULL);
}

TEST(arch_table_qwen3)
{
    const fw_arch *a = fw_arch_find("qwen3", 5);
    CHECK(a != NULL);
    if (!a) return;
    CHECK(a == fw_arch_at(2));
    CHECK_INT(a->id, FW_ARCH_QWEN3);
    CHECK_STR(a->models, "Qwen3 (dense)");
    CHECK_INT(a->rope_neox, 1);
    CHECK_INT(a->qk_norm, 1);
    CHECK_INT(a->n_layer, 11);
    check_llama_layer(a);
    check_desc(&a->layer[9], "attn_q_norm.weight", FW_NORM, FW_DIM_HEAD, FW_DIM_NONE,
               FW_REQUIRED, offsetof(fw_layer, q_norm));
    check_desc(&a->layer[10], "attn_k_norm.weight", FW_NORM, FW_DIM_HEAD, FW_DIM_NONE,
               FW_REQUIRED, offsetof(fw_layer, k_norm));
    CHECK(fw_arch_layer_tensor(a, "attn_k_norm.weight") == &a->layer[10]);
    CHECK(fw_arch_layer_tensor(a, "attn_q.bias") == NULL);
    check_top(a, 0);
}

TEST(arch_table_qwen2)
{
    const fw_arch *a = fw_arch_find("qwen2", 5);
    CHECK(a != NULL);
    if (!a) return;
    CHECK(a == fw_arch_at(1));
    CHECK_STR(a->name, "qwen2");
    CHECK_STR(a->models, "Qwen2.5, Qwen2.5-Coder, DeepSeek-R1-Distill-Qwen");
    CHECK_INT(a->id, FW_ARCH_QWEN2);
    CHECK_INT(a->rope_neox, 1);
    CHECK_INT(a->qk_norm, 0);
    CHECK_INT(a->n_layer, 12);
    check_llama_layer(a);
    check_top(a, 0);
    check_desc(&a->layer[9], "attn_q.bias", FW_NORM, FW_DIM_Q, FW_DIM_NONE, FW_OPTIONAL,
               offsetof(fw_layer, bq));
    check_desc(&a->layer[10], "attn_k.bias", FW_NORM, FW_DIM_KV, FW_DIM_NONE, FW_OPTIONAL,
               offsetof(fw_layer, bk));
    check_desc(&a->layer[11], "attn_v.bias", FW_NORM, FW_DIM_KV, FW_DIM_NONE, FW_OPTIONAL,
               offsetof(fw_layer, bv));
    CHECK(fw_arch_layer_tensor(a, "attn_output.bias") == NULL);
    CHECK(fw_arch_layer_tensor(a, "attn_q_norm.weight") == NULL);
}

TEST(arch_table_names_and_lookups)
{
    char buf[96];
    CHECK_INT(fw_arch_count(), 7);
    CHECK(fw_arch_at(7) == NULL);
    CHECK_STR(fw_arch_names(buf, sizeof buf), "llama, qwen2, qwen3, gemma3, granite, smollm3, phi3");
    CHECK(fw_arch_find("llam", 4) == NULL);
    CHECK(fw_arch_find("llama2", 6) == NULL);
    CHECK(fw_arch_find("llama\0x", 7) == NULL);   /* the length counts */
    CHECK(fw_arch_find("qwen2", 5) == fw_arch_at(1));
    CHECK(fw_arch_find("qwen2moe", 8) == NULL);
    CHECK(fw_arch_find("gemma3", 6) == fw_arch_at(3));
    CHECK(fw_arch_find("gemma2", 6) == NULL);
}

TEST(arch_table_gemma3)
{
    const fw_arch *a = fw_arch_find("gemma3", 6);
    CHECK(a != NULL);
    if (!a) return;
    CHECK_STR(a->name, "gemma3");
    CHECK_STR(a->models, "Gemma 3 (270M, 1B, 4B, 12B, 27B text; GeGLU, sliding window: without --swa-full --cache-ram 0)");
    CHECK_INT(a->id, FW_ARCH_GEMMA3);
    CHECK_INT(a->rope_neox, 1);
    CHECK_INT(a->qk_norm, 1);
    CHECK_INT(a->gemma, 1);
    CHECK_INT(a->n_layer, 13);
    check_llama_layer(a);
    check_top(a, 0);
    check_desc(&a->layer[9], "attn_q_norm.weight", FW_NORM, FW_DIM_HEAD, FW_DIM_NONE,
               FW_REQUIRED, offsetof(fw_layer, q_norm));
    check_desc(&a->layer[10], "attn_k_norm.weight", FW_NORM, FW_DIM_HEAD, FW_DIM_NONE,
               FW_REQUIRED, offsetof(fw_layer, k_norm));
    check_desc(&a->layer[11], "post_attention_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE,
               FW_REQUIRED, offsetof(fw_layer, attn_post_norm));
    check_desc(&a->layer[12], "post_ffw_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE,
               FW_REQUIRED, offsetof(fw_layer, ffn_post_norm));
    CHECK(fw_arch_layer_tensor(a, "attn_q.bias") == NULL);
    /* the other graphs have none of gemma3's steps */
    CHECK_INT(fw_arch_at(0)->gemma + fw_arch_at(1)->gemma + fw_arch_at(2)->gemma, 0);
    CHECK_INT(a->scales + a->nope_step, 0);
}

/* granite and smollm3: llama's block with options (multipliers; layers
 * without RoPE). */
TEST(arch_table_granite_smollm3)
{
    const fw_arch *a = fw_arch_find("granite", 7);
    CHECK(a != NULL);
    if (!a) return;
    CHECK(a == fw_arch_at(4));
    CHECK_STR(a->models, "Granite 3.x (dense)");
    CHECK_INT(a->id, FW_ARCH_GRANITE);
    CHECK_INT(a->rope_neox, 0);
    CHECK_INT(a->qk_norm, 0);
    CHECK_INT(a->gemma, 0);
    CHECK_INT(a->scales, 1);
    CHECK_INT(a->nope_step, 0);
    CHECK_INT(a->n_layer, 9);
    check_llama_layer(a);
    check_top(a, 1);                                 /* rope_freqs, as llama */
    a = fw_arch_find("smollm3", 7);
    CHECK(a != NULL);
    if (!a) return;
    CHECK(a == fw_arch_at(5));
    CHECK_STR(a->models, "SmolLM3");
    CHECK_INT(a->id, FW_ARCH_SMOLLM3);
    CHECK_INT(a->rope_neox, 0);
    CHECK_INT(a->scales, 0);
    CHECK_INT(a->nope_step, 4);
    CHECK_INT(a->n_layer, 9);
    check_llama_layer(a);
    check_top(a, 0);
    CHECK_INT(fw_arch_at(0)->scales + fw_arch_at(0)->nope_step, 0);
}

/* phi3: the fused matrices, bound whole (the walk uses row views). */
TEST(arch_table_phi3)
{
    const fw_arch *a = fw_arch_find("phi3", 4);
    CHECK(a != NULL);
    if (!a) return;
    CHECK(a == fw_arch_at(6));
    CHECK_STR(a->models, "Phi-3 mini/medium (4k, 128k), Phi-3.5 mini (LongRoPE), Phi-4-mini (partial RoPE)");
    CHECK_INT(a->id, FW_ARCH_PHI3);
    CHECK_INT(a->rope_neox, 1);
    CHECK_INT(a->qk_norm + a->gemma + a->scales + a->nope_step, 0);
    CHECK_INT(a->fused, 1);
    CHECK_INT(a->n_layer, 6);
    check_desc(&a->layer[0], "attn_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE, FW_REQUIRED,
               offsetof(fw_layer, attn_norm));
    check_desc(&a->layer[1], "attn_qkv.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_QKV, FW_REQUIRED,
               offsetof(fw_layer, wqkv));
    check_desc(&a->layer[2], "attn_output.weight", FW_MATRIX, FW_DIM_Q, FW_DIM_EMBD, FW_REQUIRED,
               offsetof(fw_layer, wo));
    check_desc(&a->layer[3], "ffn_norm.weight", FW_NORM, FW_DIM_EMBD, FW_DIM_NONE, FW_REQUIRED,
               offsetof(fw_layer, ffn_norm));
    check_desc(&a->layer[4], "ffn_up.weight", FW_MATRIX, FW_DIM_EMBD, FW_DIM_FF2, FW_REQUIRED,
               offsetof(fw_layer, gate_up));
    check_desc(&a->layer[5], "ffn_down.weight", FW_MATRIX, FW_DIM_FF, FW_DIM_EMBD, FW_REQUIRED,
               offsetof(fw_layer, down));
    CHECK(fw_arch_layer_tensor(a, "attn_q.weight") == NULL);
    /* llama's three, then LongRoPE's factors (both optional, n_rot/2 each) and no rope_freqs */
    CHECK_INT(a->n_top, 5);
    check_desc(&a->top[3], "rope_factors_long.weight", FW_NORM, FW_DIM_ROT2, FW_DIM_NONE, FW_OPTIONAL,
               offsetof(fw_top, rope_long));
    check_desc(&a->top[4], "rope_factors_short.weight", FW_NORM, FW_DIM_ROT2, FW_DIM_NONE, FW_OPTIONAL,
               offsetof(fw_top, rope_short));
    CHECK(fw_arch_top_tensor(a, "rope_freqs.weight") == NULL);
    for (size_t i = 0; i < 6; i++) CHECK_INT(fw_arch_at(i)->fused, 0);
}
