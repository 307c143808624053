/*
 * tokenizer_load.c -- loading a vocabulary (llama_vocab::impl::load, see
 * tokenizer_int.h): the GGUF keys, the `.pre` names bankml reproduces, merges,
 * the Unigram charsmap and token index, the special ids' defaults and the
 * overrides llama-vocab applies by token text and model name; tok_load,
 * tok_load_gguf, tok_free.
 */
#include "base/base.h"
#include "text/tokenizer_int.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * loading (llama_vocab::impl::load)
 * ---------------------------------------------------------------------- */

void tok_free(tok_vocab *v)
{
    if (!v) return;
    free(v->text);
    free(v->off);
    free(v->score);
    free(v->attr);
    free(v->tmap.slot);
    free(v->mtext);
    free(v->moff);
    free(v->mmap.slot);
    free(v->special);
    free(v->eog);
    free(v->xcda);
    free(v->repl);
    free(v->ugm_ids);
    free(v->ud_ids);
    free(v);
}

/* Typed reads of optional keys; llama.cpp's loader refuses a key of the
 * wrong type, and so do these (-1 with the reason). 0: absent, 1: read. */
static int key_str(const gguf_header *h, const char *k, const char **s, size_t *len,
                   char *err, size_t errlen)
{
    const gguf_kv *kv = gguf_kv_find(h, k);
    if (!kv) return 0;
    if (kv->type != GGUF_VT_STRING) {
        bk_err(err, errlen, "%s has value type %u, not string", k, kv->type);
        return -1;
    }
    *s = gguf_kv_str(kv, len);
    return 1;
}

static int key_bool(const gguf_header *h, const char *k, int *out, char *err, size_t errlen)
{
    const gguf_kv *kv = gguf_kv_find(h, k);
    if (!kv) return 0;
    if (kv->type != GGUF_VT_BOOL) {
        bk_err(err, errlen, "%s has value type %u, not bool", k, kv->type);
        return -1;
    }
    *out = kv->u != 0;
    return 1;
}

static int key_u32(const gguf_header *h, const char *k, uint32_t *out, char *err, size_t errlen)
{
    const gguf_kv *kv = gguf_kv_find(h, k);
    if (!kv) return 0;
    if (kv->type != GGUF_VT_U32) {
        bk_err(err, errlen, "%s has value type %u, not uint32", k, kv->type);
        return -1;
    }
    *out = (uint32_t)kv->u;
    return 1;
}

/* pre-tokenizer names -> (matcher set, flags), llama-vocab's table for the
 * regex sets implemented above */
enum { PF_IGNORE_MERGES = 1, PF_ADD_BOS = 2, PF_NO_CLEAN = 4, PF_NO_BOS = 8 };

static const struct { const char *name; uint8_t pre, flags; } pre_names[] = {
    { "default", PRE_DEFAULT, 0 },
    { "llama3", PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS },
    { "llama-v3", PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS },
    { "llama-bpe", PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS },
    { "falcon3", PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS },
    { "falcon-h1", PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS },
    { "pixtral", PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS },
    { "midm-2.0", PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS },
    { "lfm2", PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS },
    { "jina-v5-nano", PRE_LLAMA3, PF_IGNORE_MERGES | PF_ADD_BOS },
    { "dbrx", PRE_LLAMA3, 0 },
    { "smaug-bpe", PRE_LLAMA3, 0 },
    { "glm4", PRE_LLAMA3, PF_NO_BOS },
    { "chatglm-bpe", PRE_LLAMA3, PF_NO_BOS },
    { "deepseek-llm", PRE_DEEPSEEK_LLM, PF_NO_CLEAN },
    { "deepseek-coder", PRE_DEEPSEEK_CODER, PF_NO_CLEAN },
    { "falcon", PRE_FALCON, 0 },
    { "mpt", PRE_GPT2, 0 },
    { "gpt-2", PRE_GPT2, 0 },
    { "phi-2", PRE_GPT2, 0 },
    { "jina-es", PRE_GPT2, 0 },
    { "jina-de", PRE_GPT2, 0 },
    { "gigachat", PRE_GPT2, 0 },
    { "jina-v2-es", PRE_GPT2, 0 },
    { "jina-v2-de", PRE_GPT2, 0 },
    { "a.x-4.0", PRE_GPT2, 0 },
    { "mellum", PRE_GPT2, 0 },
    { "modern-bert", PRE_GPT2, 0 },
    { "jina-v1-en", PRE_GPT2, 0 },
    { "jina-v2-code", PRE_GPT2, 0 },
    { "roberta-bpe", PRE_GPT2, 0 },
    { "exaone4", PRE_GPT2, 0 },
    { "olmo", PRE_GPT2, 0 },
    { "jais", PRE_GPT2, 0 },
    { "trillion", PRE_GPT2, PF_NO_CLEAN },
    { "granite-docling", PRE_GPT2, PF_NO_CLEAN },
    { "starcoder", PRE_STARCODER, 0 },
    { "refact", PRE_STARCODER, 0 },
    { "command-r", PRE_STARCODER, PF_NO_CLEAN },
    { "smollm", PRE_STARCODER, PF_NO_CLEAN },
    { "codeshell", PRE_STARCODER, 0 },
    { "exaone", PRE_STARCODER, 0 },
    { "minerva-7b", PRE_STARCODER, 0 },
    { "mellum2", PRE_STARCODER, 0 },
    { "qwen2", PRE_QWEN2, PF_NO_CLEAN },
    { "deepseek-r1-qwen", PRE_QWEN2, PF_NO_CLEAN },
    { "kormo", PRE_QWEN2, PF_NO_CLEAN },
    { "f2llmv2", PRE_QWEN2, PF_NO_CLEAN },
    { "megrez", PRE_QWEN2, 0 },
    { "stablelm2", PRE_QWEN2, 0 },
    { "hunyuan", PRE_QWEN2, PF_NO_CLEAN },
    { "solar-open", PRE_QWEN2, PF_NO_CLEAN },
    { "grok-2", PRE_QWEN2, PF_NO_CLEAN },
    { "qwen35", PRE_QWEN35, PF_NO_CLEAN },
    { "gemma4", PRE_GEMMA4, 0 },
    { "tekken", PRE_TEKKEN, PF_NO_CLEAN | PF_IGNORE_MERGES | PF_ADD_BOS },
    { "gpt-4o", PRE_GPT4O, PF_NO_CLEAN },
    { "llama4", PRE_GPT4O, PF_NO_CLEAN },
    { "kanana2", PRE_GPT4O, PF_NO_CLEAN },
    { "talkie", PRE_GPT4O, PF_NO_CLEAN },
    { "minimax-m2", PRE_GPT4O, PF_NO_CLEAN },
};

/* The pre-tokenizers llama.cpp knows but bankml has no matcher for. */
static const char *const pre_unsupported[] = {
    "deepseek-v3", "spark2_5", "youtu", "jais-2", "granite-embed-multi-311m", "sarvam-moe",
    "whitespace", "poro-chat", "viking", "bloom", "gpt3-finnish", "exaone-moe",
    "chameleon", "granite-embed-multi-97m",
    "tiny_aya", "cohere2moe", "superbpe", "bailingmoe", "bailingmoe2", "llada-moe",
    "seed-coder", "hunyuan-dense", "hy_v4", "joyai-llm", "kimi-k2", "ufakzeka", "afmoe",
    "laguna", "minicpm5",
};

/* Reads tokenizer.ggml.merges into the rank table; the first of equal
 * merge strings keeps its rank, as bpe_ranks.emplace does. */
static int load_merges(tok_vocab *v, const gguf_header *h, const uint8_t *b, size_t n,
                       char *err, size_t errlen)
{
    const gguf_kv *kv = gguf_kv_find(h, "tokenizer.ggml.merges");
    gguf_arr_iter it;
    size_t cap = 0, used = 0, i;
    const uint8_t *s;
    uint64_t len;
    if (!kv) { bk_err(err, errlen, "cannot find tokenizer merges in model file"); return -1; }
    if (kv->type != GGUF_VT_ARRAY || kv->arr_type != GGUF_VT_STRING) {
        bk_err(err, errlen, "invalid gguf type for tokenizer.ggml.merges");
        return -1;
    }
    if (kv->arr_n > INT32_MAX) { bk_err(err, errlen, "too many merges"); return -1; }
    v->n_merges = (size_t)kv->arr_n;
    v->moff = malloc((v->n_merges + 1) * sizeof *v->moff);
    if (!v->moff || tk_strmap_init(&v->mmap, v->n_merges)) goto oom;
    if (gguf_arr_begin(&it, kv, b, n, err, errlen)) return -1;
    for (i = 0; i < v->n_merges; i++) {
        size_t slot;
        int r = gguf_arr_next_str(&it, &s, &len, err, errlen);
        if (r < 0) return -1;
        if (r == 0) { bk_err(err, errlen, "tokenizer.ggml.merges ends early"); return -1; }
        if (bk_grow((void **)&v->mtext, &cap, used + (size_t)len + 1, 1)) goto oom;
        memcpy(v->mtext + used, s, (size_t)len);
        v->moff[i] = used;
        used += (size_t)len;
        v->moff[i + 1] = used;
        slot = (size_t)tk_hash_bytes(s, (size_t)len) & v->mmap.mask;
        for (;;) {
            int32_t q = v->mmap.slot[slot];
            if (q < 0) { v->mmap.slot[slot] = (int32_t)i; break; }
            if (v->moff[q + 1] - v->moff[q] == len && memcmp(v->mtext + v->moff[q], s, (size_t)len) == 0)
                break;
            slot = (slot + 1) & v->mmap.mask;
        }
    }
    return 0;
oom:
    bk_err(err, errlen, "out of memory");
    return -1;
}

/* Reads tokenizer.ggml.precompiled_charsmap (Unigram): a u32 size, that
 * many bytes of double array, then the replacement strings; refused as
 * llama.cpp refuses it. */
static int load_charsmap(tok_vocab *v, const gguf_header *h, const uint8_t *b, size_t n,
                         char *err, size_t errlen)
{
    const gguf_kv *kv = gguf_kv_find(h, "tokenizer.ggml.precompiled_charsmap");
    const uint8_t *p;
    size_t len;
    uint32_t blob;
    if (!kv) return 0;
    if (kv->type != GGUF_VT_ARRAY || (kv->arr_type != GGUF_VT_U8 && kv->arr_type != GGUF_VT_I8)) {
        bk_err(err, errlen, "invalid gguf type for tokenizer.ggml.precompiled_charsmap");
        return -1;
    }
    if (kv->off > n || n - kv->off < 12 || kv->arr_n > n - kv->off - 12) {
        bk_err(err, errlen, "tokenizer.ggml.precompiled_charsmap runs past the end of the file");
        return -1;
    }
    p = b + kv->off + 12;
    len = (size_t)kv->arr_n;
    if (len < 4) {
        bk_err(err, errlen, "precompiled_charsmap too small for xcda_blob_size header!");
        return -1;
    }
    blob = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    if ((size_t)blob >= len - 4) {
        bk_err(err, errlen, "Index out of array bounds in precompiled charsmap!");
        return -1;
    }
    v->xcda_n = blob / 4;
    v->repl_n = len - 4 - blob;
    v->xcda = malloc(v->xcda_n ? v->xcda_n * 4 : 1);
    v->repl = malloc(v->repl_n);
    if (!v->xcda || !v->repl) { bk_err(err, errlen, "out of memory"); return -1; }
    memcpy(v->xcda, p + 4, v->xcda_n * 4);      /* little-endian, as GGUF is */
    memcpy(v->repl, p + 4 + blob, v->repl_n);
    return 0;
}

/* Reads tokens, scores and token types. */
static int load_tokens(tok_vocab *v, const gguf_header *h, const uint8_t *b, size_t n,
                       char *err, size_t errlen)
{
    const gguf_kv *kt = gguf_kv_find(h, "tokenizer.ggml.tokens");
    const gguf_kv *ks = gguf_kv_find(h, "tokenizer.ggml.scores");
    const gguf_kv *ky = gguf_kv_find(h, "tokenizer.ggml.token_type");
    gguf_arr_iter it, is, iy;
    size_t cap = 0, used = 0;
    uint32_t i;
    if (!kt) { bk_err(err, errlen, "cannot find tokenizer vocab in model file"); return -1; }
    if (kt->type != GGUF_VT_ARRAY || kt->arr_type != GGUF_VT_STRING) {
        bk_err(err, errlen, "invalid gguf type for tokenizer.ggml.tokens");
        return -1;
    }
    if (kt->arr_n == 0 || kt->arr_n > INT32_MAX) {
        bk_err(err, errlen, "tokenizer.ggml.tokens holds %llu tokens", (unsigned long long)kt->arr_n);
        return -1;
    }
    v->n = (uint32_t)kt->arr_n;
    if (ks) {
        if (ks->type != GGUF_VT_ARRAY || (ks->arr_type != GGUF_VT_I32 && ks->arr_type != GGUF_VT_F32)) {
            bk_err(err, errlen, "invalid gguf type for tokenizer.ggml.scores");
            return -1;
        }
        if (ks->arr_n < v->n) {
            bk_err(err, errlen, "Index out of array bounds for scores (%llu < %u)",
                   (unsigned long long)ks->arr_n, v->n);
            return -1;
        }
        if (gguf_arr_begin(&is, ks, b, n, err, errlen)) return -1;
    }
    if (ky) {
        if (ky->type != GGUF_VT_ARRAY || ky->arr_type != GGUF_VT_I32) {
            bk_err(err, errlen, "invalid gguf type for tokenizer.ggml.token_type");
            return -1;
        }
        if (ky->arr_n < v->n) {
            bk_err(err, errlen, "Index out of array bounds for toktypes (%llu < %u)",
                   (unsigned long long)ky->arr_n, v->n);
            return -1;
        }
        if (gguf_arr_begin(&iy, ky, b, n, err, errlen)) return -1;
    }
    v->off = malloc(((size_t)v->n + 1) * sizeof *v->off);
    v->score = malloc((size_t)v->n * sizeof *v->score);
    v->attr = malloc((size_t)v->n * sizeof *v->attr);
    v->eog = calloc(v->n, 1);
    if (!v->off || !v->score || !v->attr || !v->eog || tk_strmap_init(&v->tmap, v->n)) goto oom;
    if (gguf_arr_begin(&it, kt, b, n, err, errlen)) return -1;
    for (i = 0; i < v->n; i++) {
        const uint8_t *s;
        uint64_t len;
        char empty[32];
        size_t slot;
        int r = gguf_arr_next_str(&it, &s, &len, err, errlen);
        if (r < 0) return -1;
        if (r == 0) { bk_err(err, errlen, "tokenizer.ggml.tokens ends early"); return -1; }
        if (len == 0) {     /* llama.cpp names empty tokens */
            len = (uint64_t)snprintf(empty, sizeof empty, "[EMPTY_%u]", i);
            s = (const uint8_t *)empty;
        }
        if (bk_grow((void **)&v->text, &cap, used + (size_t)len + 1, 1)) goto oom;
        memcpy(v->text + used, s, (size_t)len);
        v->off[i] = used;
        used += (size_t)len;
        v->off[i + 1] = used;
        if ((size_t)len > v->max_token_len) v->max_token_len = (size_t)len;
        slot = (size_t)tk_hash_bytes(s, (size_t)len) & v->tmap.mask;
        for (;;) {
            int32_t q = v->tmap.slot[slot];
            if (q < 0) { v->tmap.slot[slot] = (int32_t)i; break; }
            if (tlen(v, q) == len && memcmp(ttext(v, q), s, (size_t)len) == 0) {
                /* llama.cpp asserts (aborts) on this */
                bk_err(err, errlen, "tokens %d and %u have the same text", q, i);
                return -1;
            }
            slot = (slot + 1) & v->tmap.mask;
        }
        v->score[i] = 0.0f;
        if (ks) {
            double d;
            r = gguf_arr_next_f64(&is, &d, err, errlen);
            if (r <= 0) { if (r == 0) bk_err(err, errlen, "scores end early"); return -1; }
            v->score[i] = (float)d;
        }
        v->attr[i] = TOK_ATTR_NORMAL;
        if (ky) {
            int64_t t;
            r = gguf_arr_next_i64(&iy, &t, err, errlen);
            if (r <= 0) { if (r == 0) bk_err(err, errlen, "token types end early"); return -1; }
            switch (t) {
            case 1: v->attr[i] = TOK_ATTR_NORMAL; break;
            case 2: v->attr[i] = TOK_ATTR_UNKNOWN; break;
            case 3: v->attr[i] = TOK_ATTR_CONTROL; break;
            case 4: v->attr[i] = TOK_ATTR_USER_DEFINED; break;
            case 5: v->attr[i] = TOK_ATTR_UNUSED; break;
            case 6: v->attr[i] = TOK_ATTR_BYTE; break;
            default: v->attr[i] = TOK_ATTR_UNDEFINED; break;
            }
        }
    }
    return 0;
oom:
    bk_err(err, errlen, "out of memory");
    return -1;
}

static int cmp_text(const void *pa, const void *pb, void *ctx)
{
    const tok_vocab *v = ctx;
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    size_t la = tlen(v, a), lb = tlen(v, b);
    int c = memcmp(ttext(v, a), ttext(v, b), la < lb ? la : lb);
    if (c) return c;
    return la < lb ? -1 : la > lb;
}

/* llm_tokenizer_ugm's constructor: the token tries and the unknown
 * token's score, from the attributes as the file gives them (before the
 * overrides by text that finish_specials applies, as in llama.cpp). */
static int ugm_init(tok_vocab *v, char *err, size_t errlen)
{
    float lo = FLT_MAX;
    uint32_t t;
    size_t n_ud = 0;
    for (t = 0; t < v->n; t++) n_ud += (v->attr[t] & TOK_ATTR_USER_DEFINED) != 0;
    v->ugm_ids = malloc((size_t)v->n * sizeof *v->ugm_ids);
    v->ud_ids = malloc((n_ud ? n_ud : 1) * sizeof *v->ud_ids);
    if (!v->ugm_ids || !v->ud_ids) { bk_err(err, errlen, "out of memory"); return -1; }
    for (t = 0; t < v->n; t++) {
        uint32_t at = v->attr[t];
        if ((at & TOK_ATTR_NORMAL) && v->score[t] < lo) lo = v->score[t];
        if (at & (TOK_ATTR_NORMAL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNUSED))
            v->ugm_ids[v->ugm_n++] = (int32_t)t;
        if (at & TOK_ATTR_USER_DEFINED) v->ud_ids[v->ud_n++] = (int32_t)t;
    }
    qsort_r(v->ugm_ids, v->ugm_n, sizeof *v->ugm_ids, cmp_text, v);
    qsort_r(v->ud_ids, v->ud_n, sizeof *v->ud_ids, cmp_text, v);
    v->unk_score = lo - 10.0f;
    return 0;
}

static int text_is(const tok_vocab *v, int32_t id, const char *s)
{
    size_t l = strlen(s);
    return tlen(v, id) == l && memcmp(ttext(v, id), s, l) == 0;
}

static int text_in(const tok_vocab *v, int32_t id, const char *const *list)
{
    for (; *list; list++)
        if (text_is(v, id, *list)) return 1;
    return 0;
}

/* The end-of-turn / FIM tokens llama-vocab finds by their text when the
 * GGUF names none. llama.cpp takes the first match in its hash map's
 * iteration order; bankml takes the highest id, which agrees on every
 * vocabulary in ../shared/vocab (see docs/modules/tokenizer.md). */
static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<end_of_utterance>", NULL };
static const char *const eom_texts[] = { "<|eom_id|>", NULL };
static const char *const fim_pre_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
    "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL };
static const char *const fim_suf_texts[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>",
    "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL };
static const char *const fim_mid_texts[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
    "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL };
static const char *const fim_pad_texts[] = { "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL };
static const char *const fim_rep_texts[] = {
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL };
static const char *const fim_sep_texts[] = { "<|file_sep|>", NULL };
/* texts that end generation whatever the ids say */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "[e~[", NULL };

static void find_by_text(tok_vocab *v, int32_t *id, const char *const *list)
{
    int32_t t;
    if (*id != TOK_NULL) return;
    for (t = (int32_t)v->n - 1; t >= 0; t--) {
        if (text_in(v, t, list)) {
            *id = t;
            v->attr[t] |= TOK_ATTR_CONTROL;
            return;
        }
    }
}

/* Does the NUL-terminated view of a token's text (what strstr sees in
 * llama.cpp) contain needle? */
static int text_has(const tok_vocab *v, int32_t id, const char *needle)
{
    size_t l = tlen(v, id), k = strlen(needle), i;
    const char *s = ttext(v, id);
    const char *nul = memchr(s, 0, l);
    if (nul) l = (size_t)(nul - s);
    for (i = 0; i + k <= l; i++)
        if (memcmp(s + i, needle, k) == 0) return 1;
    return 0;
}

static int cmp_special(const void *pa, const void *pb, void *ctx)
{
    const tok_vocab *v = ctx;
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    size_t la = tlen(v, a), lb = tlen(v, b);
    if (la != lb) return la > lb ? -1 : 1;
    return a < b ? -1 : a > b;
}

static int ascii_contains_ci(const char *hay, size_t n, const char *needle)
{
    size_t k = strlen(needle), i, j;
    for (i = 0; i + k <= n; i++) {
        for (j = 0; j < k; j++) {
            char c = hay[i + j];
            if (c >= 'A' && c <= 'Z') c = (char)(c + 32);
            if (c != needle[j]) break;
        }
        if (j == k) return 1;
    }
    return 0;
}

static int find_exact(const tok_vocab *v, const char *s, int32_t *id, char *err, size_t errlen)
{
    *id = tk_find_token(v, s, strlen(s));
    if (*id == TOK_NULL) {
        bk_err(err, errlen, "the vocabulary has no token '%s' (llama.cpp fails here)", s);
        return -1;
    }
    return 0;
}

/* The special ids, the end-of-generation set, the attribute overrides and
 * the special-token list, in llama-vocab's order. */
static int finish_specials(tok_vocab *v, const gguf_header *h, char *err, size_t errlen)
{
    static const struct { const char *key; size_t field; } keys[] = {
        { "tokenizer.ggml.bos_token_id", offsetof(tok_vocab, bos) },
        { "tokenizer.ggml.eos_token_id", offsetof(tok_vocab, eos) },
        { "tokenizer.ggml.eot_token_id", offsetof(tok_vocab, eot) },
        { "tokenizer.ggml.eom_token_id", offsetof(tok_vocab, eom) },
        { "tokenizer.ggml.unknown_token_id", offsetof(tok_vocab, unk) },
        { "tokenizer.ggml.seperator_token_id", offsetof(tok_vocab, sep) },
        { "tokenizer.ggml.padding_token_id", offsetof(tok_vocab, pad) },
        { "tokenizer.ggml.mask_token_id", offsetof(tok_vocab, mask) },
        { "tokenizer.ggml.fim_pre_token_id", offsetof(tok_vocab, fim_pre) },
        { "tokenizer.ggml.fim_suf_token_id", offsetof(tok_vocab, fim_suf) },
        { "tokenizer.ggml.fim_mid_token_id", offsetof(tok_vocab, fim_mid) },
        { "tokenizer.ggml.fim_pad_token_id", offsetof(tok_vocab, fim_pad) },
        { "tokenizer.ggml.fim_rep_token_id", offsetof(tok_vocab, fim_rep) },
        { "tokenizer.ggml.fim_sep_token_id", offsetof(tok_vocab, fim_sep) },
        { "tokenizer.ggml.prefix_token_id", offsetof(tok_vocab, fim_pre) },
        { "tokenizer.ggml.suffix_token_id", offsetof(tok_vocab, fim_suf) },
        { "tokenizer.ggml.middle_token_id", offsetof(tok_vocab, fim_mid) },
    };
    size_t i;
    int32_t t, end_id = TOK_NULL, s_id = TOK_NULL;
    int has_return = 0, has_call = 0, has_end = 0, has_flush = 0, has_tool_response = 0;
    int r, flag;
    const char *name = NULL, *arch = NULL;
    size_t name_len = 0, arch_len = 0;

    for (i = 0; i < sizeof keys / sizeof *keys; i++) {
        int32_t *id = (int32_t *)((char *)v + keys[i].field);
        uint32_t k;
        if (*id >= 0 && (uint32_t)*id >= v->n) *id = TOK_NULL;
        r = key_u32(h, keys[i].key, &k, err, errlen);
        if (r < 0) return -1;
        if (r && k < v->n) *id = (int32_t)k;
    }
    if ((r = key_bool(h, "tokenizer.ggml.add_bos_token", &flag, err, errlen)) < 0) return -1;
    if (r) v->add_bos = flag;
    if ((r = key_bool(h, "tokenizer.ggml.add_eos_token", &flag, err, errlen)) < 0) return -1;
    if (r) v->add_eos = flag;
    if ((r = key_bool(h, "tokenizer.ggml.add_sep_token", &flag, err, errlen)) < 0) return -1;
    if (r) v->add_sep = flag;
    if (v->pre == PRE_GEMMA4) v->add_bos = 1;

    find_by_text(v, &v->eot, eot_texts);
    find_by_text(v, &v->eom, eom_texts);
    find_by_text(v, &v->fim_pre, fim_pre_texts);
    find_by_text(v, &v->fim_suf, fim_suf_texts);
    find_by_text(v, &v->fim_mid, fim_mid_texts);
    find_by_text(v, &v->fim_pad, fim_pad_texts);
    find_by_text(v, &v->fim_rep, fim_rep_texts);
    find_by_text(v, &v->fim_sep, fim_sep_texts);

    /* control tokens named "unused" are unused */
    for (t = 0; t < (int32_t)v->n; t++)
        if ((v->attr[t] & TOK_ATTR_CONTROL) && text_has(v, t, "unused"))
            v->attr[t] |= TOK_ATTR_UNUSED;

    if (v->fim_pad != TOK_NULL) v->eog[v->fim_pad] = 1;
    if (v->fim_rep != TOK_NULL) v->eog[v->fim_rep] = 1;
    if (v->fim_sep != TOK_NULL) v->eog[v->fim_sep] = 1;
    for (t = 0; t < (int32_t)v->n; t++)
        if (text_in(v, t, eog_texts)) { v->eog[t] = 1; v->attr[t] |= TOK_ATTR_CONTROL; }
    /* gpt-oss: always rendered */
    for (t = 0; t < (int32_t)v->n; t++)
        if (text_is(v, t, "<|channel|>") || text_is(v, t, "<|message|>") ||
            text_is(v, t, "<|start|>") || text_is(v, t, "<|constrain|>"))
            v->attr[t] = TOK_ATTR_USER_DEFINED;
    if (v->eos != TOK_NULL) v->eog[v->eos] = 1;
    if (v->eot != TOK_NULL) v->eog[v->eot] = 1;
    if (v->eom != TOK_NULL) v->eog[v->eom] = 1;

    /* o200k_harmony / solar-open: <|end|> does not end generation there */
    for (t = 0; t < (int32_t)v->n; t++) {
        if (!v->eog[t]) continue;
        if (text_is(v, t, "<|return|>")) has_return = 1;
        else if (text_is(v, t, "<|call|>") || text_is(v, t, "<|calls|>")) has_call = 1;
        else if (text_is(v, t, "<|flush|>")) has_flush = 1;
        else if (text_is(v, t, "<|end|>")) { has_end = 1; end_id = t; }
    }
    if ((has_return && has_call && has_end) || (has_call && has_flush && has_end)) {
        v->eog[end_id] = 0;
        v->attr[end_id] = TOK_ATTR_USER_DEFINED;
    }
    /* Gemma 4 / PaddleOCR: </s> does not either */
    for (t = 0; t < (int32_t)v->n; t++) {
        if (!v->eog[t]) continue;
        if (text_is(v, t, "<|tool_response>")) has_tool_response = 1;
        else if (text_is(v, t, "</s>")) s_id = t;
    }
    if (has_tool_response && s_id != TOK_NULL) {
        v->eog[s_id] = 0;
        v->attr[s_id] = TOK_ATTR_NORMAL;
    }

    /* the special tokens cut out of text, longest first */
    for (t = 0; t < (int32_t)v->n; t++)
        if (v->attr[t] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN)) v->n_special++;
    v->special = malloc((v->n_special ? v->n_special : 1) * sizeof *v->special);
    if (!v->special) { bk_err(err, errlen, "out of memory"); return -1; }
    v->n_special = 0;
    for (t = 0; t < (int32_t)v->n; t++)
        if (v->attr[t] & (TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED | TOK_ATTR_UNKNOWN))
            v->special[v->n_special++] = t;
    qsort_r(v->special, v->n_special, sizeof *v->special, cmp_special, v);

    /* attributes by model name (llama-vocab's per-model table) */
    if (key_str(h, "general.name", &name, &name_len, err, errlen) < 0) return -1;
    if (key_str(h, "general.architecture", &arch, &arch_len, err, errlen) < 0) return -1;
    if (strstr(v->pre_name, "jina-v2-de") || strstr(v->pre_name, "jina-v2-es") ||
        strstr(v->pre_name, "jina-v2-code") ||
        (arch && (strstr(arch, "nomic-bert-moe") || strstr(arch, "jina-bert-v3")))) {
        t = tk_find_token(v, "<mask>", 6);
        if (t != TOK_NULL) v->attr[t] |= TOK_ATTR_LSTRIP;
    } else if (name && (ascii_contains_ci(name, name_len, "phi-3") ||
                        ascii_contains_ci(name, name_len, "phi3"))) {
        int32_t id;
        for (i = 0; i < v->n_special; i++) v->attr[v->special[i]] |= TOK_ATTR_RSTRIP;
        if (find_exact(v, "</s>", &id, err, errlen)) return -1;
        v->attr[id] |= TOK_ATTR_RSTRIP;
        if (find_exact(v, "<unk>", &id, err, errlen)) return -1;
        v->attr[id] &= ~(uint32_t)TOK_ATTR_RSTRIP;
        if (find_exact(v, "<s>", &id, err, errlen)) return -1;
        v->attr[id] &= ~(uint32_t)TOK_ATTR_RSTRIP;
        if (find_exact(v, "<|endoftext|>", &id, err, errlen)) return -1;
        v->attr[id] &= ~(uint32_t)TOK_ATTR_RSTRIP;
    } else if (name && ascii_contains_ci(name, name_len, "modern-bert")) {
        t = tk_find_token(v, "[MASK]", 6);
        if (t != TOK_NULL) v->attr[t] |= TOK_ATTR_LSTRIP;
    }
    return 0;
}

tok_vocab *tok_load_gguf(const gguf_header *h, const uint8_t *b, size_t n, char *err, size_t errlen)
{
    tok_vocab *v;
    const char *model = NULL, *pre = NULL;
    size_t model_len = 0, pre_len = 0, i;
    int r, flag, pflags = 0;

    if (!h) { bk_err(err, errlen, "no header"); return NULL; }
    v = calloc(1, sizeof *v);
    if (!v) { bk_err(err, errlen, "out of memory"); return NULL; }
    v->bos = v->eos = v->eot = v->eom = v->unk = v->sep = v->pad = v->mask = v->nl = TOK_NULL;
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = TOK_NULL;

    r = key_str(h, "tokenizer.ggml.model", &model, &model_len, err, errlen);
    if (r < 0) goto fail;
    if (r == 0) { bk_err(err, errlen, "the file has no vocabulary (tokenizer.ggml.model missing)"); goto fail; }
    if (key_str(h, "tokenizer.ggml.pre", &pre, &pre_len, err, errlen) < 0) goto fail;
    if (model_len >= sizeof v->model || strlen(model) != model_len) {
        bk_err(err, errlen, "unknown tokenizer model");
        goto fail;
    }
    memcpy(v->model, model, model_len + 1);
    if (pre) {
        if (pre_len >= sizeof v->pre_name || strlen(pre) != pre_len) {
            bk_err(err, errlen, "unknown pre-tokenizer type");
            goto fail;
        }
        memcpy(v->pre_name, pre, pre_len + 1);
    }

    if (strcmp(model, "llama") == 0) {
        v->type = TOK_TYPE_SPM;
        v->bos = 1; v->eos = 2; v->unk = 0;
        v->add_space_prefix = 1; v->add_bos = 1; v->escape_ws = 1;
    } else if (strcmp(model, "gpt2") == 0 || strcmp(model, "gemma4") == 0) {
        int gemma = model[1] == 'e';
        v->type = TOK_TYPE_BPE;
        v->byte_encode = 1;
        v->clean_spaces = 1;
        if (gemma) {
            memcpy(v->pre_name, "gemma4", 7);
        } else {
            v->bos = 11; v->eos = 11;
        }
        if (!v->pre_name[0]) {
            v->pre = PRE_DEFAULT;
        } else {
            for (i = 0; i < sizeof pre_names / sizeof *pre_names; i++)
                if (strcmp(v->pre_name, pre_names[i].name) == 0) break;
            if (i == sizeof pre_names / sizeof *pre_names) {
                size_t j;
                for (j = 0; j < sizeof pre_unsupported / sizeof *pre_unsupported; j++)
                    if (strcmp(v->pre_name, pre_unsupported[j]) == 0) break;
                if (j < sizeof pre_unsupported / sizeof *pre_unsupported)
                    bk_err(err, errlen, "pre-tokenizer '%s' is not supported by bankml yet", v->pre_name);
                else
                    bk_err(err, errlen, "unknown pre-tokenizer type: '%s'", v->pre_name);
                goto fail;
            }
            v->pre = pre_names[i].pre;
            pflags = pre_names[i].flags;
        }
        if (pflags & PF_IGNORE_MERGES) v->ignore_merges = 1;
        if (pflags & PF_ADD_BOS) v->add_bos = 1;
        if (pflags & PF_NO_CLEAN) v->clean_spaces = 0;
        if (pflags & PF_NO_BOS) v->bos = TOK_NULL;
        if (v->pre == PRE_GEMMA4) { v->escape_ws = 1; v->byte_encode = 0; }
    } else if (strcmp(model, "no_vocab") == 0 || strcmp(model, "none") == 0) {
        bk_err(err, errlen, "the model has no vocabulary (tokenizer.ggml.model '%s')", model);
        goto fail;
    } else if (strcmp(model, "bert") == 0) {
        v->type = TOK_TYPE_WPM;
        v->bos = 101; v->unk = 100; v->sep = 102; v->pad = 0; v->mask = 103;
        v->add_bos = 1; v->add_sep = 1; v->clean_spaces = 1;
    } else if (strcmp(model, "t5") == 0) {
        v->type = TOK_TYPE_UGM;
        v->eos = 1; v->unk = 2; v->pad = 0;
        v->add_eos = 1;
        if (load_charsmap(v, h, b, n, err, errlen)) goto fail;
    } else if (strcmp(model, "rwkv") == 0 || strcmp(model, "plamo2") == 0 ||
               strcmp(model, "hybriddna") == 0 || strcmp(model, "whitespace") == 0 ||
               strcmp(model, "test") == 0) {
        bk_err(err, errlen, "tokenizer model '%s' is not supported by bankml", model);
        goto fail;
    } else {
        bk_err(err, errlen, "unknown tokenizer: '%s'", model);
        goto fail;
    }
    if ((r = key_bool(h, "tokenizer.ggml.add_space_prefix", &flag, err, errlen)) < 0) goto fail;
    if (r) v->add_space_prefix = flag;
    if ((r = key_bool(h, "tokenizer.ggml.remove_extra_whitespaces", &flag, err, errlen)) < 0) goto fail;
    if (r) v->remove_extra_ws = flag;
    v->lowercase = 1;
    if ((r = key_bool(h, "tokenizer.ggml.normalizer.lowercase", &flag, err, errlen)) < 0) goto fail;
    if (r) v->lowercase = flag;
    v->strip_accents = v->lowercase;
    if ((r = key_bool(h, "tokenizer.ggml.normalizer.strip_accents", &flag, err, errlen)) < 0) goto fail;
    if (r) v->strip_accents = flag;

    if (load_tokens(v, h, b, n, err, errlen)) goto fail;
    if (v->type == TOK_TYPE_BPE && load_merges(v, h, b, n, err, errlen)) goto fail;
    if (v->type == TOK_TYPE_UGM && ugm_init(v, err, errlen)) goto fail;

    /* the newline token: <0x0A> for SentencePiece, the (default) padding
     * token for WordPiece, "\n" tokenized for the others */
    if (v->type == TOK_TYPE_SPM) {
        if (tk_spm_byte_token(v, '\n', &v->nl)) v->nl = TOK_NULL;   /* pad is still unset here */
    } else if (v->type == TOK_TYPE_WPM) {
        v->nl = v->pad;
    } else if (v->type == TOK_TYPE_UGM) {
        ivec nl = {0};
        if (tk_ugm_tokenize(v, (const uint8_t *)"\n", 1, &nl, err, errlen) || nl.oom) {
            free(nl.v);
            goto fail;
        }
        v->nl = nl.n ? nl.v[0] : v->pad;
        free(nl.v);
    } else {
        ivec nl = {0};
        if (tk_bpe_tokenize(v, (const uint8_t *)"\n", 1, &nl, err, errlen) || nl.oom) {
            free(nl.v);
            goto fail;
        }
        v->nl = nl.n ? nl.v[0] : TOK_NULL;
        free(nl.v);
    }
    if (finish_specials(v, h, err, errlen)) goto fail;
    return v;
fail:
    tok_free(v);
    return NULL;
}

tok_vocab *tok_load(const char *path, char *err, size_t errlen)
{
    gguf_map m;
    gguf_header h;
    tok_vocab *v;
    memset(&h, 0, sizeof h);
    if (gguf_map_open(path, &m, err, errlen)) return NULL;
    if (gguf_parse(m.p, m.len, &h, NULL, err, errlen) != GGUF_OK) {
        gguf_map_close(&m);
        gguf_header_free(&h);
        return NULL;
    }
    v = tok_load_gguf(&h, m.p, m.len, err, errlen);
    gguf_header_free(&h);
    gguf_map_close(&m);
    return v;
}

