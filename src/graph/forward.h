/*
 * forward.h -- the forward pass: a mapped GGUF of the llama, qwen2 or qwen3 graph to
 * logits, bit for bit as llama.cpp b11669's llama-server computes them on its
 * haswell CPU backend (libggml-cpu-haswell.so), so that greedy answers are
 * token-identical.
 *
 * Three stages, and two objects (llama2.c's TransformerWeights / RunState):
 *   1. fw_plan(): from the header alone, whether the graph plays (and the
 *      hyper-parameters it plays with), or the first reason it does not.
 *      No tensor byte is read.
 *   2. fw_weights_open(): binds the weights in the map (never copied; only
 *      the small F32 norm vectors are). The weights are immutable afterwards
 *      and shared by any number of sequences.
 *   3. fw_seq_new(): one sequence over the weights: its KV cache (kv.h: f16 or the fw_opts types), its
 *      position, its logits and every scratch buffer, allocated once (nothing
 *      is allocated per token). fw_eval() appends tokens at positions
 *      [n_past, n_past + n) in micro-batches of n_ubatch (512, llama-server's
 *      default), producing the last token's logits (or every token's, for
 *      tests); fw_truncate() cuts the cache back to a prefix (the server's
 *      prompt cache reuse).
 *
 * What decides the bits, and is therefore a parameter here:
 *   - n_ctx (per sequence): the KV cache size, rounded up to a multiple of
 *     256 as llama.cpp does. The attention sees n_kv = min(n_ctx, max(256,
 *     roundup256(used))) cells, and a one-token step takes the split-KV
 *     kernel once n_kv >= 512.
 *   - llama_threads: llama-server's -t. The split-KV kernel cuts the cells
 *     into that many chunks; the result depends on it. Our own pool size
 *     (n_threads / pool) never changes a bit.
 *   - n_ubatch: micro-batch size (512). Micro-batches of 64 or more rows take
 *     the tiled attention kernel, 2..63 rows the reference kernel.
 *
 * Threading: one fw_seq is driven by one thread at a time. Sequences on one
 * fw_weights share its pool, so they are evaluated one after another (one
 * thread, or a lock around fw_eval / fw_decode), never at the same time.
 * A sequence's results do not depend on the other sequences.
 */
#ifndef BANKML_FORWARD_H
#define BANKML_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "file/gguf.h"
#include "base/par.h"
#include "ops/kvq.h"

enum { FW_ARCH_LLAMA = 1, FW_ARCH_QWEN3 = 2, FW_ARCH_QWEN2 = 3, FW_ARCH_GEMMA3 = 4, FW_ARCH_GRANITE = 5,
       FW_ARCH_SMOLLM3 = 6, FW_ARCH_PHI3 = 7 };
#define FW_MAX_LAYERS 512
enum { FW_ROPE_NONE = 0, FW_ROPE_LINEAR = 1, FW_ROPE_YARN = 2 };

/* The hyper-parameters of a graph that plays, as llama.cpp derives them. */
typedef struct {
    int arch;                 /* FW_ARCH_* */
    uint32_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    uint32_t n_rot;           /* rotated dimensions per head ({arch}.rope.dimension_count, head_dim when
                                 absent); < head_dim only on phi3 (Phi-4-mini's partial RoPE) */
    uint32_t n_ctx_train;     /* {arch}.context_length */
    float rms_eps;
    int rope_neox;            /* 0: adjacent pairs (llama), 1: halves (qwen3) */
    int rope_scaling;         /* FW_ROPE_* */
    float rope_base;          /* freq_base */
    float freq_scale;         /* 1 / rope.scaling.factor (1 when none) */
    float ext_factor;         /* 1 for YaRN, else 0 */
    float attn_factor;        /* llama-context's yarn_attn_factor */
    float beta_fast, beta_slow;
    uint32_t n_ctx_orig;      /* YaRN original context (llama.cpp's n_ctx_orig_yarn): also what a
                                 sequence's context is compared with to choose LongRoPE's factors */
    float kq_scale;           /* 1/sqrt(head_dim); 1 for gemma3 (its Q is scaled instead) */
    float q_scale;            /* Q scaled after RoPE: gemma3 (llama.cpp's f_attention_scale:
                                 1/sqrt(head_dim), 27B: 1/sqrt(n_embd/n_head)), phi3
                                 (1/sqrt(head_dim)); 0: none */
    float embd_scale;         /* the embedding rows scaled (ggml_scale): gemma3 sqrtf(n_embd), granite
                                 {arch}.embedding_scale; 0: none */
    float residual_scale;     /* granite: each block's output scaled before its residual add; 0: none */
    float logit_mul;          /* granite: logits scaled by 1 / {arch}.logit_scale; 0: none */
    uint8_t rope_off[FW_MAX_LAYERS]; /* 1: layer il has no RoPE (smollm3: every 4th) */
    uint32_t n_swa;           /* {arch}.attention.sliding_window (gemma3), 0: none */
    uint8_t is_swa[FW_MAX_LAYERS]; /* 1: layer il attends to the last n_swa positions only */
    float rope_base_swa;      /* RoPE base of the sliding-window layers ({arch}.rope.freq_base_swa,
                                 10000 when absent); their freq_scale is 1 */
    int tied;                 /* no output.weight: logits from token_embd */
    uint32_t type_embd, type_output;   /* ggml type ids */
    size_t owned_bytes;       /* memory beyond the map the weights take: the
                                 load-time (repacked) forms of Q4_0 / Q4_K
                                 matrices, as b11669's CPU_REPACK buffer */
} fw_hparams;

/* Decides from the header alone whether the forward pass plays the file
 * (the architecture table in graph/arch.c, the weight types in ops/wtype.c).
 * Returns 0 with *hp filled, or -1 with the first reason it does not in err
 * (one line, e.g. "architecture gemma3 is not supported (llama, qwen3)",
 * "blk.0.attn_q.weight: type Q3_K is not supported (F32, F16, BF16, Q8_0,
 * Q1_0, Q2_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)", "blk.0.attn_qkv.weight: fused QKV is not supported"). */
int fw_plan(const gguf_header *h, fw_hparams *hp, char *err, size_t errlen);

/* The bound weights of one file (immutable once open). */
typedef struct fw_weights fw_weights;

typedef struct {
    int llama_threads;        /* llama-server's -t (split-KV chunking); 0 = 2 */
    size_t n_ubatch;          /* micro-batch; 0 = 512 */
    par_pool *pool;           /* borrowed pool, or NULL to create one of n_threads */
    int n_threads;            /* when pool is NULL; < 1 means 1 */
    int kv_type_k, kv_type_v; /* the cache's row types (kvq_type, ops/kvq.h: llama-server's
                                 -ctk / -ctv); 0 = f16 */
    int kv_rot_off;           /* LLAMA_ATTN_ROT_DISABLE: no Hadamard rotation around a
                                 quantized cache */
    int swa_small;            /* 1: a window model's window layers keep llama-server's default
                                 smaller cache (no --swa-full: pad256(min(n_ctx, n_swa +
                                 n_ubatch)) cells reused past the window, walked in cell
                                 order); 0: one full-size cache in position order (--swa-full,
                                 libllama's default) */
} fw_opts;

/* The KV cache every sequence on a fw_weights has (what a slot file records). */
typedef struct {
    kvq_type tk, tv;          /* row types */
    size_t k_row, v_row;      /* bytes of one cell's K row and V row in one layer */
    size_t rot_k, rot_v;      /* b11669's n_rot_k / n_rot_v: the Hadamard widths (0: none) */
} fw_kv_info;

/* The cache types of the weights' sequences. */
void fw_kv_info_of(const fw_weights *w, fw_kv_info *out);

/* One sequence's state over a fw_weights: KV cache, n_past, logits, scratch. */
typedef struct fw_seq fw_seq;

/* A hook called with named intermediate tensors (tests only): name is
 * llama.cpp's callback name ("attn_norm", "Qcur" after RoPE, "kqv_out",
 * "attn_out", "ffn_inp", "ffn_out", "l_out", "result_norm",
 * "result_output"), layer is the layer or -1, data holds rows x width floats
 * (token-major), ubatch_first the absolute position of the micro-batch's
 * first token. Rows of the last layer after the output selection are only
 * the output rows. */
typedef void (*fw_tap_fn)(void *user, const char *name, int layer,
                          const float *data, size_t rows, size_t width,
                          size_t ubatch_first);

/* Opens the weights over a map and its parsed header (both must outlive
 * the weights; opts may be NULL: the defaults). Runs fw_plan first, then
 * binds every tensor the architecture reads. Returns 0 with *out set, or -1
 * with *out NULL and the reason in err ("blk.3.ffn_up.weight: runs past the
 * end of the file", "llama threads 0 out of range (1 to 256)", "out of
 * memory", a cache type refused: "K cache type q8_0 with block size 32 does
 * not divide n_embd_head_k=48", llama-server's words). A borrowed pool must
 * outlive the weights. */
int fw_weights_open(fw_weights **out, const gguf_map *map, const gguf_header *h,
                    const fw_opts *opts, char *err, size_t errlen);
/* Frees the weights (NULL is a no-op). Every fw_seq on them must be freed
 * first. */
void fw_weights_close(fw_weights *w);
/* The hyper-parameters the weights play with (valid while w is open). */
const fw_hparams *fw_weights_hp(const fw_weights *w);
/* Bytes the weights hold beyond the map (the repacked matrices; equals
 * fw_weights_hp(w)->owned_bytes, which the planner computed from the header). */
size_t fw_weights_owned_bytes(const fw_weights *w);

/* A new, empty sequence over w (which must outlive it) with a cache of
 * n_ctx cells (llama-server -c; rounded up to 256; 0 = 512). Returns 0 with
 * *out set, or -1 with *out NULL and the reason ("context of N tokens is too
 * large", "out of memory"). */
int fw_seq_new(fw_seq **out, const fw_weights *w, size_t n_ctx, char *err, size_t errlen);
/* Frees the sequence (NULL is a no-op); its weights stay open. */
void fw_seq_free(fw_seq *s);
/* The weights the sequence reads. */
const fw_weights *fw_seq_weights(const fw_seq *s);

size_t fw_n_ctx(const fw_seq *s);     /* cache cells (after rounding) */
size_t fw_n_past(const fw_seq *s);    /* positions held in the cache */

/* Evaluates n token ids at positions [n_past, n_past + n) and advances
 * n_past. Logits: with all == 0, the last token's n_vocab logits go to
 * logits (if not NULL; also kept in fw_logits()); with all == 1, logits
 * receives n * n_vocab floats (token-major) and every row of the last layer
 * is computed. Returns 0, or -1 with a reason (id out of range, the context
 * is full: "the context holds 512 tokens; 510 + 3 do not fit"); on failure
 * n_past is unchanged but cache cells past it may have been written. */
int fw_eval(fw_seq *s, const int32_t *ids, size_t n, float *logits, int all,
            char *err, size_t errlen);

/* One token (a decode step): fw_eval(s, &id, 1, logits, 0, ...). */
int fw_decode(fw_seq *s, int32_t id, float *logits, char *err, size_t errlen);

/* The last token's logits of the last fw_eval (n_vocab floats, owned by s). */
const float *fw_logits(const fw_seq *s);

/* Keeps the first n positions (n >= n_past is a no-op). */
void fw_truncate(fw_seq *s, size_t n);

/* With fw_opts.swa_small on a window model: 1, and the lowest and highest
 * positions its window layers' cache holds (llama_memory_seq_pos_min /
 * _max, -1 when empty), and whether a cell has been reused (the cache
 * wrapped past its size). 0 otherwise (one full-size cache). */
int fw_swa_state(const fw_seq *s, int32_t *pos_min, int32_t *pos_max);

/* A context checkpoint of the window layers' cache (swa_small):
 * llama_state_seq_get_data with LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY, the
 * cells that hold a position in cell order, with their K and V rows in
 * every window layer. */
typedef struct fw_swa_ckpt fw_swa_ckpt;
/* NULL when s has no window cache or memory runs out. */
fw_swa_ckpt *fw_swa_save(const fw_seq *s);
void fw_swa_ckpt_free(fw_swa_ckpt *c);
/* Its restore (state_read): every window cell freed, then the saved ones
 * placed again by find_slot from the head (so compacted, in their saved
 * order) and their rows written; the global layers' cells and n_past are
 * left as they are (the caller truncates). 0, or -1 when no slot is found. */
int fw_swa_load(fw_seq *s, const fw_swa_ckpt *c);

/* Index of the largest logit; the lowest index wins a tie (as the greedy
 * sampler's stable sort). */
int32_t fw_argmax(const float *logits, size_t n);

/* Installs (or removes, with NULL) the test hook of one sequence. */
void fw_set_tap(fw_seq *s, fw_tap_fn fn, void *user);

/* ---- KV save/restore for the host prompt cache ---- */

/* Bytes that hold the K and V cells of positions [0, n) (0 when n > n_ctx). */
size_t fw_kv_bytes(const fw_seq *s, size_t n);
/* Copies the cells [0, n) (n <= n_past) into buf, which holds exactly
 * fw_kv_bytes(s, n) bytes. 0, or -1 when n or len do not fit. */
int fw_kv_save(const fw_seq *s, size_t n, void *buf, size_t len);
/* Puts back what fw_kv_save wrote (from any sequence on the same weights;
 * n must fit this one's n_ctx) and sets n_past = n. The last logits are not
 * restored: the caller evaluates at least one token before sampling.
 * 0, or -1 when n or len do not fit (the cache is then unchanged). */
int fw_kv_restore(fw_seq *s, size_t n, const void *buf, size_t len);

#endif
