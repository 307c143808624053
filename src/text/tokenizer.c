/*
 * tokenizer.c -- GGUF vocabularies tokenized and detokenized exactly as
 * llama.cpp b11669 does (src/llama-vocab.cpp, src/unicode.cpp).
 *
 * The file reads top to bottom in the order a prompt flows:
 *   code point classes   llama.cpp's Unicode tables (unicode_tables.h)
 *   hash tables          token text -> id, merge pair -> rank
 *   pre-tokenizers       one hand-written matcher per regex llama.cpp runs,
 *                        reproducing its custom splitters and, for the
 *                        regexes it hands to std::regex, ECMAScript's
 *                        leftmost-first semantics over its "collapsed" text
 *   SentencePiece        score-driven merging of adjacent symbols
 *   byte-level BPE       rank-driven merging inside each pre-token
 *   WordPiece            BERT's normalizer, greedy longest-token words
 *   Unigram              SentencePiece's charsmap normalizer and Viterbi
 *   special tokens       cut out of the text before the model runs
 *   loading              the GGUF keys, the id defaults and the overrides
 *                        llama-vocab applies by token text and model name
 *   pieces               token_to_piece and detokenize
 *
 * Where llama.cpp has a quirk (lenient UTF-8 decoding that turns each bad
 * byte into U+FFFD before BPE, a byte fallback that drops bytes, the
 * clean-up passes of detokenize, Unigram's user-defined "prefix" match) the
 * quirk is reproduced, because "the same ids as llama-server" is the
 * contract.
 */
#include "base/base.h"
#include "text/tokenizer.h"

#include <errno.h>
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/unicode_tables.h"

/* ------------------------------------------------------------------------
 * errors and small helpers
 * ---------------------------------------------------------------------- */

/* Grows *p (elements of size sz) to hold at least need elements; capacity
 * doubles so appends stay amortised O(1). Returns 0, or -1 on overflow or
 * when memory runs out (the old block is kept). */
static int grow(void **p, size_t *cap, size_t need, size_t sz)
{
    size_t nc;
    void *q;
    if (need <= *cap) return 0;
    nc = *cap ? *cap : 16;
    while (nc < need) {
        if (nc > SIZE_MAX / 2) return -1;
        nc *= 2;
    }
    if (nc > SIZE_MAX / sz) return -1;
    q = realloc(*p, nc * sz);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

/* A growable int32 list (token ids, piece lengths). */
typedef struct {
    int32_t *v;
    size_t n, cap;
    int oom;
} ivec;

static void ivec_push(ivec *a, int32_t x)
{
    if (a->oom) return;
    if (grow((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v)) { a->oom = 1; return; }
    a->v[a->n++] = x;
}

/* ------------------------------------------------------------------------
 * code point classes
 *
 * llama.cpp classifies code points with its own tables (a fixed Unicode
 * version), so the pre-tokenizers here read the same data, regenerated
 * into unicode_tables.h by testing/gen_unicode_tables.py.
 * ---------------------------------------------------------------------- */

#define CP_MAX 0x110000u
#define CP_BAD 0xFFFFFFFFu     /* "outside the piece": no class at all */

/* Class byte of a code point: TOKU_* category in bits 0-3, TOKU_WS. Code
 * points past U+10FFFF are UNDEFINED, as in unicode_cpt_flags_from_cpt. */
static unsigned cp_class(uint32_t c)
{
    size_t lo = 0, hi = TOK_UNI_NRANGES - 1;
    if (c >= CP_MAX) return c == CP_BAD ? TOKU_NONE : TOKU_UNDEFINED;
    while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        if ((tok_uni_ranges[mid] >> 8) <= c) lo = mid;
        else hi = mid - 1;
    }
    return tok_uni_ranges[lo] & 0xff;
}

#define CL_CAT(k)  ((k) & 0x0f)
#define CL_WS(k)   (((k) & TOKU_WS) != 0)
#define CL_L(k)    (CL_CAT(k) == TOKU_LETTER)
#define CL_N(k)    (CL_CAT(k) == TOKU_NUMBER)
#define CL_M(k)    (CL_CAT(k) == TOKU_ACCENT_MARK)
#define CL_ANY(k)  ((k) != 0)   /* llama's flags.as_uint() != 0 */

/* unicode_tolower: the contractions of the pre-tokenizers compare lower
 * case, and WordPiece lower-cases whole words. */
static uint32_t cp_lower(uint32_t c)
{
    size_t lo = 0, hi = TOK_UNI_NLOWER;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tok_uni_lower[mid][0] < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < TOK_UNI_NLOWER && tok_uni_lower[lo][0] == c ? tok_uni_lower[lo][1] : c;
}

/* unicode_cpts_normalize_nfd: llama.cpp's "NFD" maps a code point to the
 * first code point of its decomposition only (the base letter), which is
 * all WordPiece's accent stripping needs. */
static uint32_t cp_nfd(uint32_t c)
{
    size_t lo = 0, hi = TOK_UNI_NNFD - 1;
    while (lo < hi) {               /* the last range starting at or before c */
        size_t mid = (lo + hi + 1) / 2;
        if (tok_uni_nfd[mid][0] <= c) lo = mid;
        else hi = mid - 1;
    }
    return c <= tok_uni_nfd[lo][1] ? tok_uni_nfd[lo][2] : c;
}

/* llama.cpp's lenient UTF-8 decoder (unicode_cpts_from_utf8, as b11669
 * behaves: measured against libllama, see the oracle suite): lead bytes
 * decide the length, continuation bytes must be 10xxxxxx, overlong forms
 * and code points past U+10FFFF are refused, surrogates pass; each byte
 * that does not start a well-formed sequence becomes U+FFFD on its own. */
static uint32_t utf8_next(const uint8_t *s, size_t n, size_t *i)
{
    size_t p = *i;
    uint8_t b = s[p];
    uint32_t c;
    if (b < 0x80) { *i = p + 1; return b; }
    if ((b & 0x40) == 0) goto bad;
    if ((b & 0x20) == 0) {
        if (p + 1 >= n || (s[p + 1] & 0xc0) != 0x80) goto bad;
        c = (uint32_t)(b & 0x1f) << 6 | (s[p + 1] & 0x3f);
        if (c < 0x80) goto bad;
        *i = p + 2;
        return c;
    }
    if ((b & 0x10) == 0) {
        if (p + 2 >= n || (s[p + 1] & 0xc0) != 0x80 || (s[p + 2] & 0xc0) != 0x80) goto bad;
        c = (uint32_t)(b & 0x0f) << 12 | (uint32_t)(s[p + 1] & 0x3f) << 6 | (s[p + 2] & 0x3f);
        if (c < 0x800) goto bad;
        *i = p + 3;
        return c;
    }
    if ((b & 0x08) == 0) {
        if (p + 3 >= n || (s[p + 1] & 0xc0) != 0x80 || (s[p + 2] & 0xc0) != 0x80 ||
            (s[p + 3] & 0xc0) != 0x80) goto bad;
        c = (uint32_t)(b & 0x07) << 18 | (uint32_t)(s[p + 1] & 0x3f) << 12 |
            (uint32_t)(s[p + 2] & 0x3f) << 6 | (s[p + 3] & 0x3f);
        if (c < 0x10000 || c >= CP_MAX) goto bad;
        *i = p + 4;
        return c;
    }
bad:
    *i = p + 1;
    return 0xFFFD;
}

/* Writes c as UTF-8 (1-4 bytes) into o; returns the length, 0 when c is
 * past U+10FFFF (llama.cpp throws there). */
static int utf8_put(uint32_t c, uint8_t *o)
{
    if (c < 0x80) { o[0] = (uint8_t)c; return 1; }
    if (c < 0x800) { o[0] = (uint8_t)(0xc0 | c >> 6); o[1] = (uint8_t)(0x80 | (c & 0x3f)); return 2; }
    if (c < 0x10000) {
        o[0] = (uint8_t)(0xe0 | c >> 12); o[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
        o[2] = (uint8_t)(0x80 | (c & 0x3f));
        return 3;
    }
    if (c < CP_MAX) {
        o[0] = (uint8_t)(0xf0 | c >> 18); o[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3f));
        o[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3f)); o[3] = (uint8_t)(0x80 | (c & 0x3f));
        return 4;
    }
    return 0;
}

/* The length SentencePiece and BPE give a symbol from its first byte
 * (unicode_len_utf8): 1 for ASCII and stray continuation bytes. */
static size_t utf8_len_of(uint8_t b)
{
    static const uint8_t len[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return len[b >> 4];
}

/* GPT-2's byte-to-unicode alphabet: printable Latin-1 bytes stand for
 * themselves, the other 68 take U+0100 onwards in byte order. */
static uint32_t gpt2_byte_cp(uint8_t b)
{
    unsigned n = 0, x;
    if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae) return b;
    for (x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || x >= 0xae)) n++;
    return 256 + n;
}

/* The inverse: the byte a code point of that alphabet stands for, or -1. */
static int gpt2_cp_byte(uint32_t c)
{
    unsigned x, n = 0;
    if ((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff))
        return (int)c;
    if (c < 256 || c >= 256 + 68) return -1;
    for (x = 0; x < 256; x++) {
        if ((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || x >= 0xae) continue;
        if (256 + n == c) return (int)x;
        n++;
    }
    return -1;
}

/* ------------------------------------------------------------------------
 * hash tables: open addressing over byte strings
 * ---------------------------------------------------------------------- */

static uint64_t hash_bytes(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i;
    for (i = 0; i < n; i++) { h ^= s[i]; h *= 0x100000001b3ull; }
    return h ^ (h >> 29);
}

/* A set of strings stored elsewhere (by index), mapping each to a value. */
typedef struct {
    int32_t *slot;      /* index into the owner's arrays, -1 empty */
    size_t mask;
} strmap;

/* Sizes the table for n entries (load <= 1/2). */
static int strmap_init(strmap *m, size_t n)
{
    size_t cap = 16, i;
    while (cap < n * 2) {
        if (cap > SIZE_MAX / 4) return -1;
        cap *= 2;
    }
    m->slot = malloc(cap * sizeof *m->slot);
    if (!m->slot) return -1;
    for (i = 0; i < cap; i++) m->slot[i] = -1;
    m->mask = cap - 1;
    return 0;
}

/* ------------------------------------------------------------------------
 * the vocabulary
 * ---------------------------------------------------------------------- */

/* pre-tokenizers we reproduce (llama_vocab_pre_type's, by regex set) */
enum {
    PRE_DEFAULT, PRE_LLAMA3, PRE_DEEPSEEK_LLM, PRE_DEEPSEEK_CODER, PRE_FALCON,
    PRE_STARCODER, PRE_GPT2, PRE_QWEN2, PRE_QWEN35, PRE_GEMMA4
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

static size_t tlen(const tok_vocab *v, int32_t id)
{
    return v->off[id + 1] - v->off[id];
}

static const char *ttext(const tok_vocab *v, int32_t id)
{
    return v->text + v->off[id];
}

/* Token text -> id, TOK_NULL when absent. */
static int32_t find_token(const tok_vocab *v, const void *s, size_t n)
{
    size_t i = (size_t)hash_bytes(s, n) & v->tmap.mask;
    for (;;) {
        int32_t id = v->tmap.slot[i];
        if (id < 0) return TOK_NULL;
        if (tlen(v, id) == n && memcmp(ttext(v, id), s, n) == 0) return id;
        i = (i + 1) & v->tmap.mask;
    }
}

/* Merge "left right" -> rank, -1 when absent. */
static int32_t find_merge(const tok_vocab *v, const void *s, size_t n)
{
    size_t i;
    if (!v->mmap.slot) return -1;
    i = (size_t)hash_bytes(s, n) & v->mmap.mask;
    for (;;) {
        int32_t r = v->mmap.slot[i];
        if (r < 0) return -1;
        if (v->moff[r + 1] - v->moff[r] == n && memcmp(v->mtext + v->moff[r], s, n) == 0) return r;
        i = (i + 1) & v->mmap.mask;
    }
}

/* ------------------------------------------------------------------------
 * pre-tokenizers
 *
 * Text is first decoded into code points (utf8_next); each stage then
 * splits every piece the previous stage produced, the stretches a regex
 * does not match becoming pieces of their own (unicode_regex_split). A
 * stage appends piece lengths, in code points, to `out`.
 * ---------------------------------------------------------------------- */

typedef struct {
    const uint32_t *cp;         /* the whole text */
    const uint8_t *cls;         /* cp_class of each code point */
    size_t a, b;                /* the piece being split */
    size_t prev;                /* end of the last piece emitted */
    ivec *out;
} split;

static void emit(split *s, size_t end)
{
    if (end > s->prev) ivec_push(s->out, (int32_t)(end - s->prev));
    s->prev = end;
}

/* class / code point at p, "nothing" outside the piece (llama's
 * _get_flags / _get_cpt returning 0 / OUT_OF_RANGE) */
static unsigned K(const split *s, size_t p) { return p >= s->a && p < s->b ? s->cls[p] : 0; }
static uint32_t C(const split *s, size_t p) { return p >= s->a && p < s->b ? s->cp[p] : CP_BAD; }

/* The GPT-2 pattern, llama.cpp's unicode_regex_split_custom_gpt2:
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static void split_gpt2(split *s)
{
    size_t pos = s->a;
    while (pos < s->b) {
        uint32_t c = C(s, pos);
        unsigned k = K(s, pos), k2;
        size_t ws;
        if (c == '\'' && pos + 1 < s->b) {
            uint32_t d = C(s, pos + 1);
            if (d == 's' || d == 't' || d == 'm' || d == 'd') { pos += 2; emit(s, pos); continue; }
            if (pos + 2 < s->b) {
                uint32_t e = C(s, pos + 2);
                if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) {
                    pos += 3; emit(s, pos); continue;
                }
            }
        }
        k2 = c == ' ' ? K(s, pos + 1) : k;
        if (CL_L(k2)) {
            pos += c == ' ';
            while (CL_L(K(s, pos))) pos++;
            emit(s, pos);
            continue;
        }
        if (CL_N(k2)) {
            pos += c == ' ';
            while (CL_N(K(s, pos))) pos++;
            emit(s, pos);
            continue;
        }
        if (!(CL_WS(k2) || CL_L(k2) || CL_N(k2)) && CL_ANY(k2)) {
            pos += c == ' ';
            for (;;) {
                unsigned q = K(s, pos);
                if (CL_WS(q) || CL_L(q) || CL_N(q) || !CL_ANY(q)) break;
                pos++;
            }
            emit(s, pos);
            continue;
        }
        ws = 0;
        while (CL_WS(K(s, pos + ws))) ws++;
        if (ws > 1 && pos + ws < s->b) { pos += ws - 1; emit(s, pos); continue; }
        if (ws > 0) { pos += ws; emit(s, pos); continue; }
        pos++;
        emit(s, pos);
    }
}

/* The Llama 3 / Qwen2 / Qwen3.5 family (llama.cpp's custom llama3, qwen2
 * and qwen35 splitters):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * digits is D (3 for Llama 3, 1 for Qwen); marks adds \p{M} to the letter
 * runs and removes it from the punctuation runs (Qwen3.5). */
static void split_llama3(split *s, size_t digits, int marks)
{
    size_t pos = s->a;
#define LETTERISH(q) (CL_L(q) || (marks && CL_M(q)))
    while (pos < s->b) {
        uint32_t c = C(s, pos);
        unsigned k = K(s, pos), k2;
        size_t ws, last_rn;
        if (c == '\'' && pos + 1 < s->b) {
            uint32_t d = cp_lower(C(s, pos + 1));
            if (d == 's' || d == 't' || d == 'm' || d == 'd') { pos += 2; emit(s, pos); continue; }
            if (pos + 2 < s->b) {
                uint32_t e = cp_lower(C(s, pos + 2));
                if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) {
                    pos += 3; emit(s, pos); continue;
                }
            }
        }
        if (!(c == '\r' || c == '\n' || CL_N(k))) {
            if (LETTERISH(k) || LETTERISH(K(s, pos + 1))) {
                pos++;
                while (LETTERISH(K(s, pos))) pos++;
                emit(s, pos);
                continue;
            }
        }
        if (CL_N(k)) {
            size_t ini = pos;
            while (CL_N(K(s, pos))) {
                pos++;
                if (pos - ini >= digits) { emit(s, pos); ini = pos; }
            }
            emit(s, pos);
            continue;
        }
        k2 = c == ' ' ? K(s, pos + 1) : k;
        if (!(CL_WS(k2) || CL_L(k2) || CL_N(k2) || (marks && CL_M(k2))) && CL_ANY(k)) {
            pos += c == ' ';
            for (;;) {
                unsigned q = K(s, pos);
                if (CL_WS(q) || CL_L(q) || CL_N(q) || (marks && CL_M(q)) || !CL_ANY(q)) break;
                pos++;
            }
            while (C(s, pos) == '\r' || C(s, pos) == '\n') pos++;
            emit(s, pos);
            continue;
        }
        ws = 0;
        last_rn = 0;
        while (CL_WS(K(s, pos + ws))) {
            uint32_t d = C(s, pos + ws);
            if (d == '\r' || d == '\n') last_rn = pos + ws + 1;
            ws++;
        }
        if (last_rn > 0) { pos = last_rn; emit(s, pos); continue; }
        if (ws > 1 && pos + ws < s->b) { pos += ws - 1; emit(s, pos); continue; }
        if (ws > 0) { pos += ws; emit(s, pos); continue; }
        pos++;
        emit(s, pos);
    }
#undef LETTERISH
}

/* [^\n]+|[\n]+ : runs of newlines and runs of everything else (Gemma 4). */
static void split_newlines(split *s)
{
    size_t pos = s->a;
    while (pos < s->b) {
        int nl = s->cp[pos] == '\n';
        while (pos < s->b && (s->cp[pos] == '\n') == nl) pos++;
        emit(s, pos);
    }
}

/*
 * The regexes llama.cpp gives to std::regex. For those naming a Unicode
 * category it first "collapses" the text to one byte per code point (ASCII
 * kept, other white space -> 0x0B, else 0xD1 number, 0xD2 letter, 0xD3
 * punctuation, 0xD4 mark, 0xD5 symbol, 0xD0 anything else) and rewrites
 * \p{X} as a class of that byte plus X's ASCII members; the others run as
 * std::wregex over the code points, non-ASCII white space again as 0x0B.
 * Either way \s is ASCII white space plus 0x0B, and a class is tested on
 * that transformed character. The matchers below are those classes.
 */
static uint32_t wide_char(const split *s, size_t p)
{
    uint32_t c = s->cp[p];
    return c > 0x7f && CL_WS(s->cls[p]) ? 0x0b : c;
}

static int is_re_space(uint32_t w)
{
    return w == ' ' || (w >= 0x09 && w <= 0x0d);
}

/* collapsed categories: ASCII members of \p{N} \p{L} \p{P} \p{S} per
 * llama.cpp's k_ucat_map, the rest by class */
static int col_n(const split *s, size_t p)
{
    uint32_t c = s->cp[p];
    if (c < 0x80) return c >= '0' && c <= '9';
    return !CL_WS(s->cls[p]) && CL_N(s->cls[p]);
}

static int col_l(const split *s, size_t p)
{
    uint32_t c = s->cp[p];
    if (c < 0x80) return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
    return !CL_WS(s->cls[p]) && CL_L(s->cls[p]);
}

static int col_p(const split *s, size_t p)
{
    uint32_t c = s->cp[p];
    if (c < 0x80) return c && strchr("!\"#%&'()*,-./:;?@[\\]_{}", (int)c) != NULL;
    return !CL_WS(s->cls[p]) && CL_CAT(s->cls[p]) == TOKU_PUNCTUATION;
}

/* [\p{P}\$\+<=>\^~\|]+ (default) and the same with ` (Falcon) */
static int col_p_sym(const split *s, size_t p)
{
    uint32_t c = s->cp[p];
    if (c < 0x80 && c && strchr("$+<=>^~|", (int)c)) return 1;
    return col_p(s, p);
}

static int col_p_sym_tick(const split *s, size_t p)
{
    return s->cp[p] == '`' || col_p_sym(s, p);
}

static int col_s(const split *s, size_t p)
{
    return is_re_space(s->cp[p] < 0x80 ? s->cp[p] : wide_char(s, p));
}

static int w_space(const split *s, size_t p) { return is_re_space(wide_char(s, p)); }
static int w_rn(const split *s, size_t p) { return s->cp[p] == '\r' || s->cp[p] == '\n'; }
static int w_digit(const split *s, size_t p) { return s->cp[p] >= '0' && s->cp[p] <= '9'; }

typedef struct { uint32_t lo, hi; } cprange;

static int in_ranges(uint32_t c, const cprange *r, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (c >= r[i].lo && c <= r[i].hi) return 1;
    return 0;
}

/* [一-龥ࠀ-一가-퟿]+ of the DeepSeek pre-tokenizers */
static const cprange cjk_ranges[] = { {0x4e00, 0x9fa5}, {0x0800, 0x4e00}, {0xac00, 0xd7ff} };
static int w_cjk(const split *s, size_t p)
{
    return in_ranges(wide_char(s, p), cjk_ranges, sizeof cjk_ranges / sizeof *cjk_ranges);
}

/* DeepSeek LLM's letter class (the Latin, Greek, Cyrillic, Armenian,
 * Georgian, Cherokee, ... letters its tokenizer.json lists) */
static const cprange dsl_letters[] = {
    {0x41,0x5a}, {0x61,0x7a}, {0xb5,0xb5}, {0xc0,0xd6}, {0xd8,0xf6}, {0xf8,0x1ba},
    {0x1bc,0x1bf}, {0x1c4,0x293}, {0x295,0x2af}, {0x370,0x373}, {0x376,0x377},
    {0x37b,0x37d}, {0x37f,0x37f}, {0x386,0x386}, {0x388,0x38a}, {0x38c,0x38c},
    {0x38e,0x3a1}, {0x3a3,0x3f5}, {0x3f7,0x481}, {0x48a,0x52f}, {0x531,0x556},
    {0x10a0,0x10c5}, {0x13a0,0x13f5}, {0x13f8,0x13fd}, {0x1c90,0x1cba}, {0x1cbd,0x1cbf},
    {0x1d00,0x1d2b}, {0x1d6b,0x1d77}, {0x1d79,0x1d9a}, {0x1e00,0x1f15}, {0x1f18,0x1f1d},
    {0x1f20,0x1f45}, {0x1f48,0x1f4d}, {0x1f50,0x1f57}, {0x1f59,0x1f59}, {0x1f5b,0x1f5b},
    {0x1f5d,0x1f5d}, {0x1f5f,0x1f7d}, {0x1f80,0x1fb4}, {0x1fb6,0x1fbc}, {0x1fbe,0x1fbe},
    {0x1fc2,0x1fc4}, {0x1fc6,0x1fcc}, {0x1fd0,0x1fd3}, {0x1fd6,0x1fdb}, {0x1fe0,0x1fec},
    {0x1ff2,0x1ff4}, {0x1ff6,0x1ffc}, {0x2102,0x2102}, {0x2107,0x2107}, {0x210a,0x2113},
    {0x2115,0x2115}, {0x2119,0x211d}, {0x2124,0x2124}, {0x2126,0x2126}, {0x2128,0x2128},
    {0x212a,0x212d}, {0x212f,0x2134}, {0x2139,0x2139}, {0x213c,0x213f}, {0x2145,0x2149},
    {0x214e,0x214e}, {0x2183,0x2184}, {0x2c00,0x2c7b}, {0x2c7e,0x2ce4}, {0x2ceb,0x2cee},
    {0x2cf2,0x2cf3}, {0xa640,0xa66d}, {0xa680,0xa69b}, {0xa722,0xa76f}, {0xa771,0xa787},
    {0xa78b,0xa78e}, {0xab70,0xabbf}, {0xfb00,0xfb06}, {0xfb13,0xfb17}, {0xff21,0xff3a},
    {0xff41,0xff5a}, {0x10400,0x1044f}, {0x104b0,0x104d3}, {0x104d8,0x104fb},
    {0x10c80,0x10cb2}, {0x10cc0,0x10cf2}, {0x118a0,0x118df}, {0x1e900,0x1e943}
};
static int w_dsl_letter(const split *s, size_t p)
{
    return in_ranges(wide_char(s, p), dsl_letters, sizeof dsl_letters / sizeof *dsl_letters);
}

/* DeepSeek LLM's [!-/:-~！-／：-～‘-‟　-。] */
static const cprange dsl_punct[] = {
    {0x21,0x2f}, {0x3a,0x7e}, {0xff01,0xff0f}, {0xff1a,0xff5e}, {0x2018,0x201f}, {0x3000,0x3002}
};
static int w_dsl_punct(const split *s, size_t p)
{
    return in_ranges(wide_char(s, p), dsl_punct, sizeof dsl_punct / sizeof *dsl_punct);
}

typedef int (*cpred)(const split *, size_t);

/* X+ : each maximal run is a match */
static void re_runs(split *s, cpred x)
{
    size_t pos = s->a;
    while (pos < s->b) {
        if (!x(s, pos)) { pos++; continue; }
        emit(s, pos);
        while (pos < s->b && x(s, pos)) pos++;
        emit(s, pos);
    }
    emit(s, s->b);
}

/* X : every matching code point is a match of its own */
static void re_single(split *s, cpred x)
{
    size_t pos;
    for (pos = s->a; pos < s->b; pos++)
        if (x(s, pos)) { emit(s, pos); emit(s, pos + 1); }
    emit(s, s->b);
}

/* \s?X+ : leftmost-first, the optional space taken when X follows it */
static void re_opt_space_runs(split *s, cpred sp, cpred x)
{
    size_t pos = s->a;
    while (pos < s->b) {
        size_t st = pos;
        if (sp(s, pos) && pos + 1 < s->b && x(s, pos + 1)) pos++;
        else if (!x(s, pos)) { pos++; continue; }
        emit(s, st);
        while (pos < s->b && x(s, pos)) pos++;
        emit(s, pos);
    }
    emit(s, s->b);
}

/* [0-9][0-9][0-9] : left to right, non-overlapping */
static void re_triples(split *s)
{
    size_t pos = s->a;
    while (pos + 3 <= s->b) {
        if (w_digit(s, pos) && w_digit(s, pos + 1) && w_digit(s, pos + 2)) {
            emit(s, pos);
            pos += 3;
            emit(s, pos);
        } else {
            pos++;
        }
    }
    emit(s, s->b);
}

/* \s+$ : the white space that ends the piece */
static void re_trailing_space(split *s, cpred sp)
{
    size_t st = s->b;
    while (st > s->a && sp(s, st - 1)) st--;
    emit(s, st);
    emit(s, s->b);
}

/* The stages of one pre-tokenizer, applied to pieces[] (lengths in code
 * points) of cp[0..n). Returns the final pieces in *pieces, or -1 when
 * memory ran out. */
enum {
    ST_GPT2, ST_LLAMA3, ST_QWEN2, ST_QWEN35, ST_NEWLINES,
    ST_RUN_PSYM, ST_RUN_PSYM_TICK, ST_RUN_N, ST_SINGLE_N, ST_TRIPLES,
    ST_SINGLE_RN, ST_OPT_SPACE_L, ST_OPT_SPACE_P, ST_RUN_CJK,
    ST_DSL_LETTERS, ST_DSL_PUNCT, ST_TRAILING_SPACE, ST_END
};

static const uint8_t *stages_of(int pre)
{
    static const uint8_t st_default[] = { ST_RUN_PSYM, ST_GPT2, ST_RUN_N, ST_TRIPLES, ST_END };
    static const uint8_t st_llama3[] = { ST_LLAMA3, ST_END };
    static const uint8_t st_dsl[] = { ST_SINGLE_RN, ST_DSL_LETTERS, ST_DSL_PUNCT, ST_TRAILING_SPACE,
                                      ST_RUN_CJK, ST_RUN_N, ST_END };
    static const uint8_t st_dsc[] = { ST_SINGLE_RN, ST_OPT_SPACE_L, ST_OPT_SPACE_P, ST_RUN_CJK,
                                      ST_SINGLE_N, ST_END };
    static const uint8_t st_falcon[] = { ST_RUN_PSYM_TICK, ST_GPT2, ST_TRIPLES, ST_END };
    static const uint8_t st_starcoder[] = { ST_SINGLE_N, ST_GPT2, ST_END };
    static const uint8_t st_gpt2[] = { ST_GPT2, ST_END };
    static const uint8_t st_qwen2[] = { ST_QWEN2, ST_END };
    static const uint8_t st_qwen35[] = { ST_QWEN35, ST_END };
    static const uint8_t st_gemma4[] = { ST_NEWLINES, ST_END };
    switch (pre) {
    case PRE_LLAMA3: return st_llama3;
    case PRE_DEEPSEEK_LLM: return st_dsl;
    case PRE_DEEPSEEK_CODER: return st_dsc;
    case PRE_FALCON: return st_falcon;
    case PRE_STARCODER: return st_starcoder;
    case PRE_GPT2: return st_gpt2;
    case PRE_QWEN2: return st_qwen2;
    case PRE_QWEN35: return st_qwen35;
    case PRE_GEMMA4: return st_gemma4;
    default: return st_default;
    }
}

static void run_stage(split *s, int st)
{
    switch (st) {
    case ST_GPT2: split_gpt2(s); break;
    case ST_LLAMA3: split_llama3(s, 3, 0); break;
    case ST_QWEN2: split_llama3(s, 1, 0); break;
    case ST_QWEN35: split_llama3(s, 1, 1); break;
    case ST_NEWLINES: split_newlines(s); break;
    case ST_RUN_PSYM: re_runs(s, col_p_sym); break;
    case ST_RUN_PSYM_TICK: re_runs(s, col_p_sym_tick); break;
    case ST_RUN_N: re_runs(s, col_n); break;
    case ST_SINGLE_N: re_single(s, col_n); break;
    case ST_TRIPLES: re_triples(s); break;
    case ST_SINGLE_RN: re_single(s, w_rn); break;
    case ST_OPT_SPACE_L: re_opt_space_runs(s, col_s, col_l); break;
    case ST_OPT_SPACE_P: re_opt_space_runs(s, col_s, col_p); break;
    case ST_RUN_CJK: re_runs(s, w_cjk); break;
    case ST_DSL_LETTERS: re_opt_space_runs(s, w_space, w_dsl_letter); break;
    case ST_DSL_PUNCT: re_opt_space_runs(s, w_space, w_dsl_punct); break;
    case ST_TRAILING_SPACE: re_trailing_space(s, w_space); break;
    }
}

static int pretokenize(int pre, const uint32_t *cp, const uint8_t *cls, size_t n, ivec *pieces)
{
    const uint8_t *st = stages_of(pre);
    ivec cur = {0}, next = {0};
    size_t i;
    ivec_push(&cur, (int32_t)n);
    for (; *st != ST_END; st++) {
        size_t start = 0;
        next.n = 0;
        for (i = 0; i < cur.n; i++) {
            split s;
            s.cp = cp; s.cls = cls;
            s.a = start; s.b = start + (size_t)cur.v[i];
            s.prev = s.a;
            s.out = &next;
            run_stage(&s, *st);
            start = s.b;
        }
        if (next.oom) break;
        { ivec t = cur; cur = next; next = t; }
    }
    free(next.v);
    if (cur.oom || next.oom) { free(cur.v); return -1; }
    *pieces = cur;
    return 0;
}

/* ------------------------------------------------------------------------
 * merging: a binary heap of candidate pairs and a symbol chain
 * ---------------------------------------------------------------------- */

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

static void heap_push(heap *h, pair p)
{
    size_t i;
    if (h->oom) return;
    if (grow((void **)&h->v, &h->cap, h->n + 1, sizeof *h->v)) { h->oom = 1; return; }
    i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (h->v[up].key <= p.key) break;
        h->v[i] = h->v[up];
        i = up;
    }
    h->v[i] = p;
}

static pair heap_pop(heap *h)
{
    pair top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->v[c + 1].key < h->v[c].key) c++;
        if (last.key <= h->v[c].key) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

/* Splits w[0..n) into symbols of one UTF-8 character each (by lead byte,
 * cut short at the end), chained. */
static sym *make_symbols(const uint8_t *w, size_t n, size_t *count)
{
    size_t i = 0, k = 0, cap = n ? n : 1;
    sym *s = malloc(cap * sizeof *s);
    if (!s) return NULL;
    while (i < n) {
        size_t l = utf8_len_of(w[i]);
        if (l > n - i) l = n - i;
        s[k].start = (uint32_t)i;
        s[k].n = (uint32_t)l;
        s[k].prev = (int32_t)k - 1;
        i += l;
        s[k].next = i == n ? -1 : (int32_t)k + 1;
        k++;
    }
    *count = k;
    return s;
}

/* Maps a float score to a key where higher scores sort first. */
static uint32_t score_key(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);   /* ascending order */
    return ~u;                                         /* descending */
}

/* ---- SentencePiece (llm_tokenizer_spm_session) ---- */

static void spm_try_pair(const tok_vocab *v, const uint8_t *t, sym *s, int32_t l, int32_t r, heap *h)
{
    int32_t id;
    pair p;
    if (l < 0 || r < 0) return;
    id = find_token(v, t + s[l].start, (size_t)s[l].n + s[r].n);
    if (id == TOK_NULL) return;
    p.key = (uint64_t)score_key(v->score[id]) << 32 | (uint32_t)l;
    p.right = r;
    p.size = s[l].n + s[r].n;
    heap_push(h, p);
}

/* The byte fallback of both models' SentencePiece side: <0xXX>, else the
 * byte itself as a token; llama.cpp throws when neither exists. */
static int32_t hex_byte_token(const tok_vocab *v, uint8_t b)
{
    static const char hx[] = "0123456789ABCDEF";
    char buf[6] = { '<', '0', 'x', hx[b >> 4], hx[b & 15], '>' };
    return find_token(v, buf, 6);
}

static int spm_byte_token(const tok_vocab *v, uint8_t b, int32_t *id)
{
    *id = hex_byte_token(v, b);
    if (*id == TOK_NULL) *id = find_token(v, &b, 1);
    return *id == TOK_NULL ? -1 : 0;
}

static int spm_tokenize(const tok_vocab *v, const uint8_t *t, size_t n, ivec *out,
                        char *err, size_t errlen)
{
    size_t count, j;
    sym *s = make_symbols(t, n, &count);
    heap h = {0};
    int32_t i;
    if (!s) { bk_err(err, errlen, "out of memory"); return -1; }
    for (i = 1; i < (int32_t)count; i++) spm_try_pair(v, t, s, i - 1, i, &h);
    while (h.n && !h.oom) {
        pair p = heap_pop(&h);
        int32_t l = (int32_t)(uint32_t)p.key, r = p.right;
        if (s[l].n == 0 || s[r].n == 0 || s[l].n + s[r].n != p.size) continue;
        s[l].n += s[r].n;
        s[r].n = 0;
        s[l].next = s[r].next;
        if (s[r].next >= 0) s[s[r].next].prev = l;
        spm_try_pair(v, t, s, s[l].prev, l, &h);
        spm_try_pair(v, t, s, l, s[l].next, &h);
    }
    if (h.oom) { free(h.v); free(s); bk_err(err, errlen, "out of memory"); return -1; }
    free(h.v);
    for (i = count ? 0 : -1; i != -1; i = s[i].next) {
        int32_t id = find_token(v, t + s[i].start, s[i].n);
        if (id != TOK_NULL) { ivec_push(out, id); continue; }
        for (j = 0; j < s[i].n; j++) {
            uint8_t b = t[s[i].start + j];
            if (spm_byte_token(v, b, &id)) {
                free(s);
                bk_err(err, errlen, "the vocabulary has no token for byte 0x%02X", b);
                return -1;
            }
            ivec_push(out, id);
        }
    }
    free(s);
    return 0;
}

/* ---- byte-level BPE (llm_tokenizer_bpe_session) ---- */

typedef struct {
    uint8_t *v;
    size_t n, cap;
} bbuf;

static int bbuf_put(bbuf *b, const void *p, size_t n)
{
    if (grow((void **)&b->v, &b->cap, b->n + n, 1)) return -1;
    memcpy(b->v + b->n, p, n);
    b->n += n;
    return 0;
}

static void bpe_try_pair(const tok_vocab *v, const uint8_t *w, sym *s, int32_t l, int32_t r,
                         heap *h, bbuf *key)
{
    int32_t rank;
    pair p;
    if (l < 0 || r < 0) return;
    key->n = 0;
    if (bbuf_put(key, w + s[l].start, s[l].n) || bbuf_put(key, " ", 1) ||
        bbuf_put(key, w + s[r].start, s[r].n)) { h->oom = 1; return; }
    rank = find_merge(v, key->v, key->n);
    if (rank < 0) return;
    p.key = (uint64_t)(uint32_t)rank << 32 | (uint32_t)l;
    p.right = r;
    p.size = s[l].n + s[r].n;
    heap_push(h, p);
}

/* Merges one pre-token w[0..n) and appends its ids. */
static int bpe_word(const tok_vocab *v, const uint8_t *w, size_t n, ivec *out, bbuf *key)
{
    size_t count, j;
    sym *s;
    heap h = {0};
    int32_t i, id;
    if (v->ignore_merges || v->pre == PRE_GEMMA4) {
        int whole = v->ignore_merges;
        if (!whole) {       /* Gemma 4: a run of newlines that is a token */
            whole = 1;
            for (j = 0; j < n; j++) if (w[j] != '\n') whole = 0;
        }
        if (whole && (id = find_token(v, w, n)) != TOK_NULL) { ivec_push(out, id); return 0; }
    }
    s = make_symbols(w, n, &count);
    if (!s) return -1;
    for (i = 1; i < (int32_t)count; i++) bpe_try_pair(v, w, s, i - 1, i, &h, key);
    while (h.n && !h.oom) {
        pair p = heap_pop(&h);
        int32_t l = (int32_t)(uint32_t)p.key, r = p.right;
        /* llama.cpp compares the pair's text; a pair only changes by one
         * of its symbols absorbing a neighbour, which empties the right
         * symbol or lengthens the pair, so the length check is the same */
        if (s[l].n == 0 || s[r].n == 0 || s[l].n + s[r].n != p.size) continue;
        s[l].n += s[r].n;
        s[r].n = 0;
        s[l].next = s[r].next;
        if (s[r].next >= 0) s[s[r].next].prev = l;
        bpe_try_pair(v, w, s, s[l].prev, l, &h, key);
        bpe_try_pair(v, w, s, l, s[l].next, &h, key);
    }
    free(h.v);
    if (h.oom) { free(s); return -1; }
    for (i = count ? 0 : -1; i != -1; i = s[i].next) {
        id = find_token(v, w + s[i].start, s[i].n);
        if (id != TOK_NULL) { ivec_push(out, id); continue; }
        /* llama.cpp looks each byte of the (encoded) symbol up as a
         * one-byte token and silently drops the bytes that are none */
        for (j = 0; j < s[i].n; j++) {
            uint8_t b = w[s[i].start + j];
            id = v->byte_encode ? find_token(v, &b, 1) : hex_byte_token(v, b);
            if (id != TOK_NULL) ivec_push(out, id);
        }
    }
    free(s);
    return 0;
}

/* Pre-tokenizes text[0..n) and merges every piece. */
static int bpe_tokenize(const tok_vocab *v, const uint8_t *t, size_t n, ivec *out,
                        char *err, size_t errlen)
{
    uint32_t *cp = NULL;
    uint8_t *cls = NULL;
    size_t ncp = 0, i = 0, k, start;
    ivec pieces = {0};
    bbuf word = {0}, key = {0};
    int rc = -1;
    if (n > SIZE_MAX / sizeof *cp) goto oom;
    cp = malloc((n ? n : 1) * sizeof *cp);
    cls = malloc(n ? n : 1);
    if (!cp || !cls) goto oom;
    while (i < n) {
        cp[ncp] = utf8_next(t, n, &i);
        cls[ncp] = (uint8_t)cp_class(cp[ncp]);
        ncp++;
    }
    if (ncp > INT32_MAX) { bk_err(err, errlen, "text too long"); goto out; }
    if (pretokenize(v->pre, cp, cls, ncp, &pieces)) goto oom;
    start = 0;
    for (k = 0; k < pieces.n; k++) {
        size_t end = start + (size_t)pieces.v[k], p;
        word.n = 0;
        for (p = start; p < end; p++) {
            uint8_t u[4], e[4];
            int m = utf8_put(cp[p], u), q;
            if (m == 0) {
                bk_err(err, errlen, "the text holds code point U+%X, past U+10FFFF", cp[p]);
                goto out;
            }
            if (!v->byte_encode) {
                if (bbuf_put(&word, u, (size_t)m)) goto oom;
                continue;
            }
            for (q = 0; q < m; q++) {
                int el = utf8_put(gpt2_byte_cp(u[q]), e);
                if (bbuf_put(&word, e, (size_t)el)) goto oom;
            }
        }
        if (word.n && bpe_word(v, word.v, word.n, out, &key)) goto oom;
        start = end;
    }
    rc = 0;
    goto out;
oom:
    bk_err(err, errlen, "out of memory");
out:
    free(cp);
    free(cls);
    free(pieces.v);
    free(word.v);
    free(key.v);
    return rc;
}

/* ---- WordPiece (llm_tokenizer_wpm_session) ---- */

/* The CJK ideograph blocks BERT makes one-character words of, as
 * llama.cpp lists them (Extension E starting at 0x2B920, copied from the
 * Hugging Face code, not 0x2B820). */
static int wpm_is_cjk(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* One word w[0..n), already prefixed with U+2581, cut greedily from the
 * left into the longest tokens (bytes, not characters); when some part has
 * no token the whole word becomes the unknown token. */
static int wpm_word(const tok_vocab *v, const uint8_t *w, size_t n, ivec *out)
{
    size_t i = 0, mark = out->n;
    while (i < n) {
        size_t j = n - i > v->max_token_len + 1 ? i + v->max_token_len + 1 : n;
        int32_t id = TOK_NULL;
        for (; j > i; j--)
            if ((id = find_token(v, w + i, j - i)) != TOK_NULL) break;
        if (id == TOK_NULL) { out->n = mark; break; }
        ivec_push(out, id);
        i = j;
    }
    if (out->n == mark && !out->oom) {
        if (v->unk == TOK_NULL) return -1;
        ivec_push(out, v->unk);
    }
    return 0;
}

/* BERT's pre-tokenizer and WordPiece: white space separates words,
 * control characters, NUL and U+FFFD (so invalid UTF-8) vanish, each
 * punctuation mark, ASCII symbol and CJK ideograph is a word of its own;
 * with the normalizer's options letters are lower-cased and accents
 * stripped (llama.cpp's one-code-point NFD, then marks dropped). */
static int wpm_tokenize(const tok_vocab *v, const uint8_t *t, size_t n, ivec *out,
                        char *err, size_t errlen)
{
    bbuf word = {0};
    size_t i = 0;
    int rc = -1;
    if (bbuf_put(&word, "\xe2\x96\x81", 3)) goto oom;
    while (i < n) {
        uint32_t c = utf8_next(t, n, &i);
        unsigned k;
        uint8_t u[4], one[7] = { 0xe2, 0x96, 0x81 };
        int m;
        if (v->strip_accents) c = cp_nfd(c);
        k = cp_class(c);
        if (CL_WS(k)) {
            if (word.n > 3 && wpm_word(v, word.v, word.n, out)) goto no_unk;
            word.n = 3;
            continue;
        }
        if (c == 0 || c == 0xFFFD || CL_CAT(k) == TOKU_CONTROL) continue;
        if (v->strip_accents && CL_M(k)) continue;
        m = utf8_put(v->lowercase ? cp_lower(c) : c, u);
        if (CL_CAT(k) == TOKU_PUNCTUATION || (c < 0x7f && CL_CAT(k) == TOKU_SYMBOL) || wpm_is_cjk(c)) {
            if (word.n > 3 && wpm_word(v, word.v, word.n, out)) goto no_unk;
            word.n = 3;
            memcpy(one + 3, u, (size_t)m);
            if (wpm_word(v, one, 3 + (size_t)m, out)) goto no_unk;
        } else if (bbuf_put(&word, u, (size_t)m)) {
            goto oom;
        }
    }
    if (word.n > 3 && wpm_word(v, word.v, word.n, out)) goto no_unk;
    rc = 0;
    goto out;
no_unk:
    bk_err(err, errlen, "the vocabulary has no unknown token for a word it cannot spell");
    goto out;
oom:
    bk_err(err, errlen, "out of memory");
out:
    free(word.v);
    return rc;
}

/* ---- Unigram (llm_tokenizer_ugm_session) ---- */

/*
 * llama.cpp walks a trie of token texts; here the trie is implicit: the
 * ids sorted by text. The texts sharing a prefix of d bytes are one run of
 * that list, the one of length exactly d (if any) first, and one step
 * deeper narrows the run to those whose byte d is c.
 */
static unsigned edge_byte(const tok_vocab *v, int32_t id, size_t d)
{
    return tlen(v, id) > d ? (unsigned)(uint8_t)ttext(v, id)[d] + 1 : 0;
}

static int trie_step(const tok_vocab *v, const int32_t *ids, size_t *lo, size_t *hi, size_t d,
                     uint8_t c)
{
    size_t a = *lo, b = *hi, first;
    unsigned want = (unsigned)c + 1;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (edge_byte(v, ids[mid], d) < want) a = mid + 1;
        else b = mid;
    }
    first = a;
    b = *hi;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (edge_byte(v, ids[mid], d) <= want) a = mid + 1;
        else b = mid;
    }
    *lo = first;
    *hi = a;
    return first < a;
}

/* naive_trie::get_longest_prefix over the user-defined tokens: how deep
 * s[0..n) walks into the trie, whether or not a token ends there (a quirk
 * kept: "<ma" is "matched" by a token "<mask>"). */
static size_t ud_prefix(const tok_vocab *v, const uint8_t *s, size_t n)
{
    size_t lo = 0, hi = v->ud_n, d = 0;
    while (d < n && trie_step(v, v->ud_ids, &lo, &hi, d, s[d])) d++;
    return d;
}

/*
 * The precompiled charsmap (SentencePiece's normalizer, e.g. nmt_nfkc): a
 * XOR-compressed compact double array over input bytes (Kanda 2018) whose
 * leaves point at NUL-terminated replacement strings. Each 32-bit unit
 * packs BASE in bits 10-30 (shifted left 8 more when bit 9 is set), LEAF in
 * bit 8 and LCHECK in bits 0-7 (bit 31 set on value units, which then fail
 * every LCHECK); a value unit's low 31 bits are a replacement's offset.
 */
static int xcda_unit(const tok_vocab *v, size_t i, uint32_t *u)
{
    if (i >= v->xcda_n) return -1;
    *u = v->xcda[i];
    return 0;
}

static uint32_t xcda_base(uint32_t u)
{
    return (u >> 10) << ((u & (1u << 9)) >> 6);
}

/* The next piece of normalized text at in[off..n): the input itself when a
 * user-defined token's trie path matches there, else the replacement of the
 * charsmap's longest match, else one UTF-8 character unchanged (U+FFFD for
 * a byte that starts none). Sets *r, *rn; returns the input bytes consumed,
 * 0 when the charsmap is broken (llama.cpp throws; err says why). */
static size_t ugm_norm_prefix(const tok_vocab *v, const uint8_t *in, size_t n, size_t off,
                              const uint8_t **r, size_t *rn, uint8_t tmp[4],
                              char *err, size_t errlen)
{
    size_t len = ud_prefix(v, in + off, n - off), best_len = 0, best_off = 0, p, i;
    uint32_t node, u;
    if (len) { *r = in + off; *rn = len; return len; }
    if (v->xcda_n) {
        if (xcda_unit(v, 0, &u)) goto broken;
        node = xcda_base(u);
        for (p = off; p < n && in[p]; p++) {
            int leaf;
            node ^= in[p];
            if (xcda_unit(v, node, &u)) goto broken;
            if ((u & (0x80000000u | 0xff)) != in[p]) break;
            leaf = (u >> 8) & 1;
            node ^= xcda_base(u);
            if (leaf) {
                if (xcda_unit(v, node, &u)) goto broken;
                best_len = p - off + 1;
                best_off = u & 0x7fffffffu;
            }
        }
    }
    if (best_len) {
        if (best_off >= v->repl_n) goto broken;
        for (i = best_off; i < v->repl_n && v->repl[i]; i++) {}
        if (i == v->repl_n) {
            bk_err(err, errlen, "unterminated string in the precompiled charsmap");
            return 0;
        }
        *r = (const uint8_t *)v->repl + best_off;
        *rn = i - best_off;
        return best_len;
    }
    p = off;
    *rn = (size_t)utf8_put(utf8_next(in, n, &p), tmp);
    *r = tmp;
    return p - off;
broken:
    bk_err(err, errlen, "index out of bounds in the precompiled charsmap");
    return 0;
}

/* SentencePiece's normalization: the charsmap over the whole text, spaces
 * written as U+2581, one before the first word (add_space_prefix) or, with
 * remove_extra_whitespaces, one before every word and none elsewhere.
 * (treat_whitespace_as_suffix is never set by llama.cpp's loader.) */
static int ugm_normalize(const tok_vocab *v, const uint8_t *in, size_t n, bbuf *out,
                         char *err, size_t errlen)
{
    static const char sp[] = "\xe2\x96\x81";
    int merge = v->remove_extra_ws, prepended = 0, in_word = 0;
    size_t off = 0;
    while (off < n) {
        const uint8_t *r;
        uint8_t tmp[4];
        size_t rn, i, used = ugm_norm_prefix(v, in, n, off, &r, &rn, tmp, err, errlen);
        if (!used) return -1;
        for (i = 0; i < rn; i++) {
            if (r[i] != ' ') {
                if (!in_word) {
                    in_word = 1;
                    if (((v->add_space_prefix && !prepended) || merge)) {
                        if (bbuf_put(out, sp, 3)) goto oom;
                        prepended = 1;
                    }
                }
                if (bbuf_put(out, r + i, 1)) goto oom;
            } else {
                in_word = 0;
                if (!merge && bbuf_put(out, sp, 3)) goto oom;
            }
        }
        off += used;
    }
    return 0;
oom:
    bk_err(err, errlen, "out of memory");
    return -1;
}

/* the best segmentation of the normalized text up to one byte offset */
typedef struct {
    int32_t id;
    size_t from;
    double score;               /* double, as SentencePiece sums */
} ugm_best;

/* Unigram's Viterbi over the normalized text, one code point at a time:
 * every token starting there (user-defined ones scoring 0) may improve the
 * best score at its end; a code point no single token covers may also be
 * the unknown token at the lowest score minus 10. Ties keep the earlier
 * path. The best path is read backwards, runs of unknowns merged. */
static int ugm_tokenize(const tok_vocab *v, const uint8_t *t, size_t n, ivec *out,
                        char *err, size_t errlen)
{
    bbuf s = {0};
    ugm_best *best = NULL;
    size_t off, i, mark = out->n;
    int prev_unk = 0, rc = -1;
    if (ugm_normalize(v, t, n, &s, err, errlen)) goto out;
    if (s.n == 0) { rc = 0; goto out; }
    if (v->unk == TOK_NULL) {
        bk_err(err, errlen, "the vocabulary has no unknown token (Unigram needs one)");
        goto out;
    }
    if (s.n >= SIZE_MAX / sizeof *best) goto oom;
    best = malloc((s.n + 1) * sizeof *best);
    if (!best) goto oom;
    for (i = 0; i <= s.n; i++) { best[i].id = v->unk; best[i].from = 0; best[i].score = -DBL_MAX; }
    best[0].score = 0;
    for (off = 0; off < s.n;) {
        size_t cl = utf8_len_of(s.v[off]), lo = 0, hi = v->ugm_n, d = 0;
        double base = best[off].score, sc;
        int whole = 0;
        if (cl > s.n - off) cl = s.n - off;
        while (off + d < s.n && trie_step(v, v->ugm_ids, &lo, &hi, d, s.v[off + d])) {
            int32_t id = v->ugm_ids[lo];
            d++;
            if (tlen(v, id) != d) continue;
            if (d == cl) whole = 1;
            sc = base + ((v->attr[id] & TOK_ATTR_USER_DEFINED) ? 0.0 : (double)v->score[id]);
            if (sc > best[off + d].score) {
                best[off + d].id = id;
                best[off + d].from = off;
                best[off + d].score = sc;
            }
        }
        if (!whole) {
            sc = base + (double)v->unk_score;
            if (sc > best[off + cl].score) {
                best[off + cl].id = v->unk;
                best[off + cl].from = off;
                best[off + cl].score = sc;
            }
        }
        off += cl;
    }
    for (off = s.n;;) {
        int unk = best[off].id == v->unk;
        if (!(prev_unk && unk)) ivec_push(out, best[off].id);
        if (best[off].from == 0) break;
        prev_unk = unk;
        off = best[off].from;
    }
    if (out->oom) goto oom;
    for (i = 0; mark + i < out->n - 1 - i; i++) {
        int32_t x = out->v[mark + i];
        out->v[mark + i] = out->v[out->n - 1 - i];
        out->v[out->n - 1 - i] = x;
    }
    rc = 0;
    goto out;
oom:
    bk_err(err, errlen, "out of memory");
out:
    free(s.v);
    free(best);
    return rc;
}

/* ------------------------------------------------------------------------
 * tokenize: special tokens first, then the model on each stretch of text
 * ---------------------------------------------------------------------- */

typedef struct {
    int32_t id;                 /* TOK_NULL for text */
    size_t off, len;
} frag;

typedef struct {
    frag *v;
    size_t n, cap;
    int oom;
} fragv;

static void frag_push(fragv *f, int32_t id, size_t off, size_t len)
{
    if (f->oom) return;
    if (grow((void **)&f->v, &f->cap, f->n + 1, sizeof *f->v)) { f->oom = 1; return; }
    f->v[f->n].id = id;
    f->v[f->n].off = off;
    f->v[f->n].len = len;
    f->n++;
}

static int c_isspace(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* tokenizer_st_partition: for each special token, longest first, every
 * occurrence in the remaining text becomes that token; LSTRIP / RSTRIP
 * tokens eat the white space beside them. */
static int partition(const tok_vocab *v, const char *text, size_t len, int parse_special,
                     fragv *out)
{
    fragv cur = {0}, nxt = {0};
    size_t si, fi;
    if (len) frag_push(&cur, TOK_NULL, 0, len);
    for (si = 0; si < v->n_special && !cur.oom; si++) {
        int32_t id = v->special[si];
        const char *st = ttext(v, id);
        size_t sl = tlen(v, id);
        uint32_t at = v->attr[id];
        if (!parse_special && (at & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN))) continue;
        if (sl > len || !memmem(text, len, st, sl)) continue;
        nxt.n = 0;
        for (fi = 0; fi < cur.n; fi++) {
            size_t base = cur.v[fi].off, blen = cur.v[fi].len;
            if (cur.v[fi].id != TOK_NULL) { frag_push(&nxt, cur.v[fi].id, 0, 0); continue; }
            for (;;) {
                const char *m = blen >= sl ? memmem(text + base, blen, st, sl) : NULL;
                size_t mo, left;
                if (!m) {
                    if (blen) frag_push(&nxt, TOK_NULL, base, blen);
                    break;
                }
                mo = (size_t)(m - text);
                left = mo - base;
                if (at & TOK_ATTR_LSTRIP)
                    while (left > 0 && c_isspace((unsigned char)text[base + left - 1])) left--;
                if (left) frag_push(&nxt, TOK_NULL, base, left);
                frag_push(&nxt, id, 0, 0);
                if (mo + sl >= base + blen) break;
                blen = base + blen - (mo + sl);
                base = mo + sl;
                if (at & TOK_ATTR_RSTRIP)
                    while (blen > 0 && c_isspace((unsigned char)text[base])) { base++; blen--; }
            }
        }
        { fragv t = cur; cur = nxt; nxt = t; }
    }
    free(nxt.v);
    if (cur.oom || nxt.oom) { free(cur.v); return -1; }
    *out = cur;
    return 0;
}

int tok_tokenize(const tok_vocab *v, const char *text, size_t len, int add_special,
                 int parse_special, int32_t **ids, size_t *n, char *err, size_t errlen)
{
    fragv fr = {0};
    ivec out = {0};
    bbuf buf = {0};
    size_t i;
    int prev_special = 1;
    *ids = NULL;
    *n = 0;
    if (!text && len) { bk_err(err, errlen, "no text"); return -1; }
    if (partition(v, text, len, parse_special, &fr)) goto oom;
    /* WordPiece always frames with [CLS] ... [SEP], whatever the flags say */
    if (add_special && (v->add_bos || v->type == TOK_TYPE_WPM)) {
        if (v->bos == TOK_NULL) {
            bk_err(err, errlen, "the vocabulary adds a BOS token but has none");
            goto fail;
        }
        ivec_push(&out, v->bos);
    }
    for (i = 0; i < fr.n; i++) {
        const frag *f = &fr.v[i];
        if (f->id != TOK_NULL) { ivec_push(&out, f->id); prev_special = 1; continue; }
        if (v->type == TOK_TYPE_WPM || v->type == TOK_TYPE_UGM) {
            const uint8_t *t = (const uint8_t *)text + f->off;
            if (v->type == TOK_TYPE_WPM ? wpm_tokenize(v, t, f->len, &out, err, errlen)
                                        : ugm_tokenize(v, t, f->len, &out, err, errlen))
                goto fail;
            if (out.oom) goto oom;
            continue;
        }
        buf.n = 0;
        if (v->type == TOK_TYPE_SPM && v->add_space_prefix && prev_special)
            if (bbuf_put(&buf, "\xe2\x96\x81", 3)) goto oom;
        if (v->escape_ws) {
            size_t p;
            for (p = 0; p < f->len; p++) {
                const char c = text[f->off + p];
                if (c == ' ' ? bbuf_put(&buf, "\xe2\x96\x81", 3) : bbuf_put(&buf, &c, 1)) goto oom;
            }
        } else if (bbuf_put(&buf, text + f->off, f->len)) {
            goto oom;
        }
        if (buf.n > UINT32_MAX - 8) { bk_err(err, errlen, "text too long"); goto fail; }
        if (v->type == TOK_TYPE_SPM) {
            if (spm_tokenize(v, buf.v, buf.n, &out, err, errlen)) goto fail;
        } else {
            if (bpe_tokenize(v, buf.v, buf.n, &out, err, errlen)) goto fail;
        }
        prev_special = 0;
        if (out.oom) goto oom;
    }
    if (add_special && v->type == TOK_TYPE_WPM) {
        if (v->sep == TOK_NULL) {
            bk_err(err, errlen, "the vocabulary adds a SEP token but has none");
            goto fail;
        }
        ivec_push(&out, v->sep);
    } else if (add_special && v->add_eos) {
        if (v->eos == TOK_NULL) {
            bk_err(err, errlen, "the vocabulary adds an EOS token but has none");
            goto fail;
        }
        ivec_push(&out, v->eos);
    }
    if (out.oom) goto oom;
    free(fr.v);
    free(buf.v);
    *ids = out.v;
    *n = out.n;
    if (!out.n) { free(out.v); *ids = NULL; }
    return 0;
oom:
    bk_err(err, errlen, "out of memory");
fail:
    free(fr.v);
    free(buf.v);
    free(out.v);
    return -1;
}

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
};

/* The pre-tokenizers llama.cpp knows but bankml has no matcher for. */
static const char *const pre_unsupported[] = {
    "deepseek-v3", "spark2_5", "youtu", "jais-2", "granite-embed-multi-311m", "sarvam-moe",
    "whitespace", "poro-chat", "viking", "tekken", "bloom", "gpt3-finnish", "exaone-moe",
    "chameleon", "gpt-4o", "llama4", "kanana2", "talkie", "granite-embed-multi-97m",
    "tiny_aya", "cohere2moe", "superbpe", "bailingmoe", "bailingmoe2", "llada-moe",
    "seed-coder", "hunyuan-dense", "hy_v4", "joyai-llm", "kimi-k2", "ufakzeka", "afmoe",
    "laguna", "minimax-m2", "minicpm5",
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
    if (!v->moff || strmap_init(&v->mmap, v->n_merges)) goto oom;
    if (gguf_arr_begin(&it, kv, b, n, err, errlen)) return -1;
    for (i = 0; i < v->n_merges; i++) {
        size_t slot;
        int r = gguf_arr_next_str(&it, &s, &len, err, errlen);
        if (r < 0) return -1;
        if (r == 0) { bk_err(err, errlen, "tokenizer.ggml.merges ends early"); return -1; }
        if (grow((void **)&v->mtext, &cap, used + (size_t)len + 1, 1)) goto oom;
        memcpy(v->mtext + used, s, (size_t)len);
        v->moff[i] = used;
        used += (size_t)len;
        v->moff[i + 1] = used;
        slot = (size_t)hash_bytes(s, (size_t)len) & v->mmap.mask;
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
    if (!v->off || !v->score || !v->attr || !v->eog || strmap_init(&v->tmap, v->n)) goto oom;
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
        if (grow((void **)&v->text, &cap, used + (size_t)len + 1, 1)) goto oom;
        memcpy(v->text + used, s, (size_t)len);
        v->off[i] = used;
        used += (size_t)len;
        v->off[i + 1] = used;
        if ((size_t)len > v->max_token_len) v->max_token_len = (size_t)len;
        slot = (size_t)hash_bytes(s, (size_t)len) & v->tmap.mask;
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
    *id = find_token(v, s, strlen(s));
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
        t = find_token(v, "<mask>", 6);
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
        t = find_token(v, "[MASK]", 6);
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
        if (spm_byte_token(v, '\n', &v->nl)) v->nl = TOK_NULL;   /* pad is still unset here */
    } else if (v->type == TOK_TYPE_WPM) {
        v->nl = v->pad;
    } else if (v->type == TOK_TYPE_UGM) {
        ivec nl = {0};
        if (ugm_tokenize(v, (const uint8_t *)"\n", 1, &nl, err, errlen) || nl.oom) {
            free(nl.v);
            goto fail;
        }
        v->nl = nl.n ? nl.v[0] : v->pad;
        free(nl.v);
    } else {
        ivec nl = {0};
        if (bpe_tokenize(v, (const uint8_t *)"\n", 1, &nl, err, errlen) || nl.oom) {
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

/* ------------------------------------------------------------------------
 * pieces and detokenize
 * ---------------------------------------------------------------------- */

/* The piece of a token with special=true (llama's token-to-piece cache),
 * appended to out; llama_decode_text for byte-level BPE. */
static void put_piece(const tok_vocab *v, int32_t id, jbuf *out)
{
    uint32_t at = v->attr[id];
    const char *s = ttext(v, id);
    size_t n = tlen(v, id), i;
    if (at & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL | TOK_ATTR_USER_DEFINED)) {
        jbuf_put(out, s, n);
        return;
    }
    if (at & TOK_ATTR_NORMAL) {
        if (v->type != TOK_TYPE_BPE || v->escape_ws) {
            for (i = 0; i < n; i++) {
                if (i + 3 <= n && memcmp(s + i, "\xe2\x96\x81", 3) == 0) { jbuf_putc(out, ' '); i += 2; }
                else jbuf_putc(out, s[i]);
            }
            return;
        }
        i = 0;
        while (i < n) {
            uint32_t c = utf8_next((const uint8_t *)s, n, &i);
            int byte = gpt2_cp_byte(c);
            if (byte >= 0) {
                jbuf_putc(out, (char)byte);
            } else {
                uint8_t u[4];
                int m = utf8_put(c, u), q;
                jbuf_puts(out, "[UNK_BYTE_0x");
                for (q = 0; q < m; q++) jbuf_printf(out, "%02x", u[q]);
                jbuf_put(out, s, n);
                jbuf_putc(out, ']');
            }
        }
        return;
    }
    if (at & TOK_ATTR_BYTE) {
        /* "<0xXX>": the two hex digits at offset 3, as strtol reads them */
        char hx[3] = { n > 3 ? s[3] : 0, n > 4 ? s[4] : 0, 0 };
        jbuf_putc(out, (char)strtol(hx, NULL, 16));
    }
}

int tok_piece(const tok_vocab *v, int32_t id, int special, jbuf *out)
{
    size_t before = out->len;
    if (id < 0 || (uint32_t)id >= v->n) return -1;
    if (!special && (v->attr[id] & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL))) return 0;
    put_piece(v, id, out);
    return (int)(out->len - before);
}

int tok_detokenize(const tok_vocab *v, const int32_t *ids, size_t n, int remove_special,
                   int unparse_special, jbuf *out, char *err, size_t errlen)
{
    size_t i, start = out->len, total;
    int remove_space = v->add_space_prefix;
    char *t;
    for (i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= v->n) {
            bk_err(err, errlen, "token id %d is out of range (vocabulary of %u)", ids[i], v->n);
            return -1;
        }
    if (remove_special && v->add_bos && n > 0 && ids[0] == v->bos) { remove_space = 0; ids++; n--; }
    if (remove_special && v->add_eos && n > 0 && ids[n - 1] == v->eos) n--;
    for (i = 0; i < n; i++) {
        size_t at = out->len;
        tok_piece(v, ids[i], unparse_special, out);
        if (remove_space && out->len > at && out->p[at] == ' ') {
            memmove(out->p + at, out->p + at + 1, out->len - at - 1);
            out->len--;
            out->p[out->len] = 0;
        }
        remove_space = 0;
    }
    if (out->oom) { bk_err(err, errlen, "out of memory"); return -1; }
    if (!v->clean_spaces) return 0;
    /* llama_detokenize's clean-up passes over the new text */
    t = out->p + start;
    total = out->len - start;
    {
        size_t k = total ? 1 : 0, j;
        for (j = 1; j < total; j++) {           /* " ?", " !", " .", " ," */
            char x = t[j];
            if (t[j - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) k--;
            t[k++] = x;
        }
        total = k;
        k = total ? 1 : 0;
        for (j = 1; j < total; j++) {           /* " ' " */
            char x = t[j];
            if (x == '\'' && j + 1 < total && t[j - 1] == ' ' && t[j + 1] == ' ') {
                k--;
                t[++j] = '\0';
            }
            t[k++] = x;
        }
        total = k;
        k = total ? 1 : 0;
        for (j = 1; j < total; j++) {           /* " 's", " 'm", " 're", " 've" */
            char x = t[j];
            if (t[j - 1] == ' ' && x == '\'' && j + 1 < total) {
                char x1 = t[j + 1];
                if (x1 == 's' || x1 == 'm') k--;
                else if (j + 2 < total && ((x1 == 'r' && t[j + 2] == 'e') || (x1 == 'v' && t[j + 2] == 'e'))) k--;
            }
            t[k++] = x;
        }
        total = k;
    }
    out->len = start + total;
    out->p[out->len] = 0;
    return 0;
}

/* ------------------------------------------------------------------------
 * accessors
 * ---------------------------------------------------------------------- */

int tok_is_eog(const tok_vocab *v, int32_t id)
{
    return id >= 0 && (uint32_t)id < v->n && v->eog[id];
}

int32_t tok_n_tokens(const tok_vocab *v) { return (int32_t)v->n; }
int tok_type(const tok_vocab *v) { return v->type; }
const char *tok_model_name(const tok_vocab *v) { return v->model; }
const char *tok_pre_name(const tok_vocab *v) { return v->pre_name; }
int tok_add_bos(const tok_vocab *v) { return v->add_bos; }
int tok_add_eos(const tok_vocab *v) { return v->add_eos; }
int tok_add_space_prefix(const tok_vocab *v) { return v->add_space_prefix; }
int32_t tok_bos(const tok_vocab *v) { return v->bos; }
int32_t tok_eos(const tok_vocab *v) { return v->eos; }
int32_t tok_eot(const tok_vocab *v) { return v->eot; }
int32_t tok_eom(const tok_vocab *v) { return v->eom; }
int32_t tok_unk(const tok_vocab *v) { return v->unk; }
int32_t tok_pad(const tok_vocab *v) { return v->pad; }
int32_t tok_sep(const tok_vocab *v) { return v->sep; }
int32_t tok_mask(const tok_vocab *v) { return v->mask; }
int32_t tok_nl(const tok_vocab *v) { return v->nl; }
int32_t tok_fim_pre(const tok_vocab *v) { return v->fim_pre; }
int32_t tok_fim_suf(const tok_vocab *v) { return v->fim_suf; }
int32_t tok_fim_mid(const tok_vocab *v) { return v->fim_mid; }
int32_t tok_fim_pad(const tok_vocab *v) { return v->fim_pad; }
int32_t tok_fim_rep(const tok_vocab *v) { return v->fim_rep; }
int32_t tok_fim_sep(const tok_vocab *v) { return v->fim_sep; }

const char *tok_text(const tok_vocab *v, int32_t id, size_t *len)
{
    if (id < 0 || (uint32_t)id >= v->n) { if (len) *len = 0; return NULL; }
    if (len) *len = tlen(v, id);
    return ttext(v, id);
}

float tok_score(const tok_vocab *v, int32_t id)
{
    return id >= 0 && (uint32_t)id < v->n ? v->score[id] : 0.0f;
}

uint32_t tok_attr(const tok_vocab *v, int32_t id)
{
    return id >= 0 && (uint32_t)id < v->n ? v->attr[id] : 0;
}

int32_t tok_find(const tok_vocab *v, const char *s, size_t len)
{
    return find_token(v, s, len);
}
