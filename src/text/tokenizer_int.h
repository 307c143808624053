/*
 * tokenizer_int.h -- the tokenizer's internals, shared by the files of
 * src/text that implement tokenizer.h. Internal to src/text: nothing outside
 * this folder includes it (tokenizer.h is the contract).
 *
 * Who defines what, in the order a prompt flows:
 *   tokenizer_unicode.c  code point classes (llama.cpp's tables), UTF-8,
 *                        GPT-2's byte alphabet
 *   tokenizer_pretok.c   the pre-tokenizers: one matcher per regex llama.cpp runs
 *   tokenizer.c          growable buffers, hash tables, the merge heap;
 *                        tok_tokenize (special tokens first, then the model),
 *                        pieces, detokenize, accessors
 *   tokenizer_spm.c      SentencePiece: score-driven merging of adjacent symbols
 *   tokenizer_bpe.c      byte-level BPE: rank-driven merging inside each pre-token
 *   tokenizer_wpm.c      WordPiece: BERT's normalizer, greedy longest-token words
 *   tokenizer_ugm.c      Unigram: SentencePiece's charsmap normalizer and Viterbi
 *   tokenizer_load.c     loading: the GGUF keys, the id defaults and the
 *                        overrides llama-vocab applies by token text and model
 *
 * Memory: functions that can run out return -1 (or set an `oom` flag the
 * caller checks); nothing here aborts.
 */
#ifndef BANKML_TOKENIZER_INT_H
#define BANKML_TOKENIZER_INT_H

#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer.h"

/* ----------------------------------------------------- buffers (tokenizer.c) */


/* A growable int32 list (token ids, piece lengths). */
typedef struct {
    int32_t *v;
    size_t n, cap;
    int oom;
} ivec;

/* Appends x; on running out of memory sets a->oom and drops x (and every
 * later push). */
void tk_ivec_push(ivec *a, int32_t x);

/* A growable byte string (words, merge keys). */
typedef struct {
    uint8_t *v;
    size_t n, cap;
} bbuf;

/* Appends p[0..n); 0, or -1 when memory runs out. */
int tk_bbuf_put(bbuf *b, const void *p, size_t n);

/* ------------------------------------------- code points (tokenizer_unicode.c) */

#define CP_MAX 0x110000u
#define CP_BAD 0xFFFFFFFFu     /* "outside the piece": no class at all */

/* Class byte of a code point: TOKU_* category in bits 0-3, TOKU_WS. Code
 * points past U+10FFFF are UNDEFINED, as in unicode_cpt_flags_from_cpt;
 * CP_BAD has no class (TOKU_NONE). */
unsigned tk_cp_class(uint32_t c);

/* Tests on a class byte. The TOKU_* constants come from
 * text/unicode_tables.h, which the files using these include. */
#define CL_CAT(k)  ((k) & 0x0f)
#define CL_WS(k)   (((k) & TOKU_WS) != 0)
#define CL_L(k)    (CL_CAT(k) == TOKU_LETTER)
#define CL_N(k)    (CL_CAT(k) == TOKU_NUMBER)
#define CL_M(k)    (CL_CAT(k) == TOKU_ACCENT_MARK)
#define CL_ANY(k)  ((k) != 0)   /* llama's flags.as_uint() != 0 */

/* unicode_tolower (one code point). */
uint32_t tk_cp_lower(uint32_t c);

/* unicode_cpts_normalize_nfd: llama.cpp's "NFD", the first code point of
 * the decomposition only (the base letter). */
uint32_t tk_cp_nfd(uint32_t c);

/* llama.cpp's lenient UTF-8 decoder (unicode_cpts_from_utf8): the code
 * point at s[*i] (i < n), *i moved past it; each byte that does not start a
 * well-formed sequence becomes U+FFFD on its own. */
uint32_t tk_utf8_next(const uint8_t *s, size_t n, size_t *i);

/* Writes c as UTF-8 (1-4 bytes) into o; returns the length, 0 when c is
 * past U+10FFFF (llama.cpp throws there). */
int tk_utf8_put(uint32_t c, uint8_t *o);

/* The length SentencePiece and BPE give a symbol from its first byte
 * (unicode_len_utf8): 1 for ASCII and stray continuation bytes. */
size_t tk_utf8_len_of(uint8_t b);

/* GPT-2's byte-to-unicode alphabet: the code point byte b stands for, and
 * the inverse (-1 for a code point outside the alphabet). */
uint32_t tk_gpt2_byte_cp(uint8_t b);
int tk_gpt2_cp_byte(uint32_t c);

/* ------------------------------------------------- hash tables (tokenizer.c) */

/* FNV-1a over p[0..n), folded; the hash of both tables. */
uint64_t tk_hash_bytes(const void *p, size_t n);

/* A set of strings stored elsewhere (by index), mapping each to a value. */
typedef struct {
    int32_t *slot;      /* index into the owner's arrays, -1 empty */
    size_t mask;
} strmap;

/* Sizes the table for n entries (load <= 1/2), every slot empty; 0, or -1
 * when memory runs out. */
int tk_strmap_init(strmap *m, size_t n);

/* ------------------------------------------------------------- the vocabulary */

/* pre-tokenizers we reproduce (llama_vocab_pre_type's, by regex set) */
enum {
    PRE_DEFAULT, PRE_LLAMA3, PRE_DEEPSEEK_LLM, PRE_DEEPSEEK_CODER, PRE_FALCON,
    PRE_STARCODER, PRE_GPT2, PRE_QWEN2, PRE_QWEN35, PRE_GEMMA4, PRE_TEKKEN, PRE_GPT4O
};

struct tok_vocab {
    int type;                   /* TOK_TYPE_SPM / TOK_TYPE_BPE */
    int pre;                    /* PRE_* (BPE only) */
    int byte_encode;            /* BPE words in GPT-2's byte alphabet */
    int escape_ws;              /* spaces become U+2581 before the model */
    int add_space_prefix, add_bos, add_eos, add_sep;
    int ignore_merges, clean_spaces;
    char model[32];
    char pre_name[64];

    uint32_t n;                 /* tokens */
    char *text;                 /* all token texts, back to back */
    size_t *off;                /* n + 1 offsets into text */
    float *score;
    uint32_t *attr;
    strmap tmap;                /* text -> id */

    size_t n_merges;
    char *mtext;                /* merge strings "left right", back to back */
    size_t *moff;               /* n_merges + 1 offsets */
    strmap mmap;                /* merge string -> rank (first one wins) */
    size_t max_token_len;       /* longest token text in bytes (WordPiece) */

    /* WordPiece: BertNormalizer options */
    int lowercase, strip_accents;

    /* Unigram: the SentencePiece normalizer and the token trie */
    int remove_extra_ws;        /* runs of spaces become one, leading one added */
    uint32_t *xcda;             /* the charsmap's double array ... */
    size_t xcda_n;
    char *repl;                 /* ... and its NUL-terminated replacements */
    size_t repl_n;
    int32_t *ugm_ids;           /* NORMAL / USER_DEFINED / UNUSED ids by text */
    size_t ugm_n;
    int32_t *ud_ids;            /* USER_DEFINED ids by text */
    size_t ud_n;
    float unk_score;            /* lowest NORMAL score minus 10 */

    int32_t bos, eos, eot, eom, unk, sep, pad, mask, nl;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;

    int32_t *special;           /* CONTROL / USER_DEFINED / UNKNOWN ids, longest first */
    size_t n_special;
    uint8_t *eog;               /* n flags */
};

/* The length and bytes (not NUL-terminated) of token id's text. */
static inline size_t tlen(const tok_vocab *v, int32_t id)
{
    return v->off[id + 1] - v->off[id];
}

static inline const char *ttext(const tok_vocab *v, int32_t id)
{
    return v->text + v->off[id];
}

/* Token text -> id, TOK_NULL when absent (tokenizer.c). */
int32_t tk_find_token(const tok_vocab *v, const void *s, size_t n);

/* Merge "left right" -> rank, -1 when absent or without merges (tokenizer.c). */
int32_t tk_find_merge(const tok_vocab *v, const void *s, size_t n);

/* ------------------------------------------- pre-tokenizers (tokenizer_pretok.c) */

/* Splits cp[0..n) (cls[i] = tk_cp_class(cp[i])) as pre-tokenizer pre (PRE_*)
 * does, every stage of its regex set in turn. On success *pieces holds the
 * piece lengths in code points (free pieces->v) and 0 is returned; -1 when
 * memory ran out. */
int tk_pretokenize(int pre, const uint32_t *cp, const uint8_t *cls, size_t n, ivec *pieces);

/* ------------------------------------------------ the merge heap (tokenizer.c) */

typedef struct {
    int32_t prev, next;
    uint32_t start, n;          /* bytes of the word / text */
} sym;

typedef struct {
    uint64_t key;               /* smaller pops first: priority << 32 | left */
    int32_t right;
    uint32_t size;              /* bytes of the pair when queued: a pair whose
                                   symbols changed since no longer adds up */
} pair;

typedef struct {
    pair *v;
    size_t n, cap;
    int oom;
} heap;

/* Pushes / pops (smallest key first; h->n > 0) a candidate pair; a push that
 * runs out of memory sets h->oom. */
void tk_heap_push(heap *h, pair p);
pair tk_heap_pop(heap *h);

/* Splits w[0..n) into symbols of one UTF-8 character each (by lead byte,
 * cut short at the end), chained; *count set. malloc'd, NULL when memory
 * runs out. */
sym *tk_make_symbols(const uint8_t *w, size_t n, size_t *count);

/* Maps a float score to a key where higher scores sort first. */
uint32_t tk_score_key(float f);

/* ------------------------------------------------------------------ the models */

/* Each model tokenizes one stretch of text t[0..n) (no special tokens in
 * it), appending ids to out; 0, or -1 with a reason in err (out of memory,
 * or where llama.cpp itself fails on the input). */

/* SentencePiece (tokenizer_spm.c): llm_tokenizer_spm_session. */
int tk_spm_tokenize(const tok_vocab *v, const uint8_t *t, size_t n, ivec *out,
                 char *err, size_t errlen);

/* The byte fallback of the SentencePiece side (tokenizer_spm.c): the token
 * <0xXX> for byte b or TOK_NULL; spm_byte_token also tries the byte itself
 * as a token and returns -1 when neither exists (llama.cpp throws). */
int32_t tk_hex_byte_token(const tok_vocab *v, uint8_t b);
int tk_spm_byte_token(const tok_vocab *v, uint8_t b, int32_t *id);

/* Byte-level BPE (tokenizer_bpe.c): pre-tokenizes, then merges every piece
 * (llm_tokenizer_bpe_session). */
int tk_bpe_tokenize(const tok_vocab *v, const uint8_t *t, size_t n, ivec *out,
                 char *err, size_t errlen);

/* WordPiece (tokenizer_wpm.c): BERT's pre-tokenizer and normalizer, then
 * greedy longest-token words (llm_tokenizer_wpm_session). */
int tk_wpm_tokenize(const tok_vocab *v, const uint8_t *t, size_t n, ivec *out,
                 char *err, size_t errlen);

/* Unigram (tokenizer_ugm.c): the charsmap normalizer, then Viterbi
 * (llm_tokenizer_ugm_session). */
int tk_ugm_tokenize(const tok_vocab *v, const uint8_t *t, size_t n, ivec *out,
                 char *err, size_t errlen);

#endif
