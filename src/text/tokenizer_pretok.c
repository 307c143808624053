/*
 * tokenizer_pretok.c -- the pre-tokenizers (see tokenizer_int.h): one
 * hand-written matcher per regex llama.cpp runs, reproducing its custom
 * splitters (unicode_regex_split_custom_*) and, for the regexes it hands to
 * std::regex, ECMAScript's leftmost-first semantics over its "collapsed"
 * text; tk_pretokenize() runs the stages of one `.pre` name.
 */
#include "text/tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

#include "text/unicode_tables.h"

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
    if (end > s->prev) tk_ivec_push(s->out, (int32_t)(end - s->prev));
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
            uint32_t d = tk_cp_lower(C(s, pos + 1));
            if (d == 's' || d == 't' || d == 'm' || d == 'd') { pos += 2; emit(s, pos); continue; }
            if (pos + 2 < s->b) {
                uint32_t e = tk_cp_lower(C(s, pos + 2));
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

/* The Tekken / GPT-4o regexes (llama-vocab's TEKKEN and GPT4O sets), which
 * llama.cpp hands to std::regex over the collapsed text:
 *   P?U*W+C? | P?U+W*C? | \p{N}{1,D} |  ?[^\s\p{L}\p{N}]+[\r\n/]*
 *   | \s*[\r\n]+ | \s+(?!\S) | \s+
 * with P = [^\r\n\p{L}\p{N}], U = (?=[\p{L}])[^a-z], W = (?=[\p{L}])[^A-Z]
 * and C the optional contraction ('[sS]|'[tT]|'[rR][eE]|... , GPT-4o only).
 * Collapsed, every non-ASCII letter is one byte 0xD2, so it is both U and W;
 * the ASCII letters are U (A-Z) or W (a-z). ECMAScript's backtracking makes
 * U*W+ take the most U's that still leave a W after them. digits is D
 * (1 for Tekken, 3 for GPT-4o). */
static int tek_u(const split *s, size_t p)
{
    return p < s->b && col_l(s, p) && !(s->cp[p] >= 'a' && s->cp[p] <= 'z');
}

static int tek_w(const split *s, size_t p)
{
    return p < s->b && col_l(s, p) && !(s->cp[p] >= 'A' && s->cp[p] <= 'Z');
}

static int tek_ws(const split *s, size_t p) { return p < s->b && col_s(s, p); }

/* the letters of the first two alternatives from q; their end, or 0 */
static size_t tek_letters(const split *s, size_t q)
{
    size_t m = 0, k, end;
    while (tek_u(s, q + m)) m++;
    for (k = m + 1; k-- > 0;)
        if (tek_w(s, q + k)) break;
    if (k <= m) {                   /* P?U*W+ : the most U's that leave a W */
        end = q + k;
        while (tek_w(s, end)) end++;
        return end;
    }
    return m > 0 ? q + m : 0;       /* P?U+W* (no W follows the U's) */
}

static size_t tek_contraction(const split *s, size_t p)
{
    uint32_t d, e;
    if (p + 1 >= s->b || s->cp[p] != '\'') return p;
    d = s->cp[p + 1] | 0x20;        /* the ASCII letters' case bit */
    if (s->cp[p + 1] < 'A' || s->cp[p + 1] > 'z') return p;
    if (d == 's' || d == 't' || d == 'm' || d == 'd') return p + 2;
    if (p + 2 >= s->b) return p;
    e = s->cp[p + 2] | 0x20;
    if (s->cp[p + 2] < 'A' || s->cp[p + 2] > 'z') return p;
    if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l')) return p + 3;
    return p;
}

static void split_tekken(split *s, size_t digits, int contractions)
{
    size_t pos = s->a;
    while (pos < s->b) {
        uint32_t c = s->cp[pos];
        size_t end = 0, ws, k;
        int pre = c != '\r' && c != '\n' && !col_l(s, pos) && !col_n(s, pos);
        if (pre) end = tek_letters(s, pos + 1);
        if (!end && col_l(s, pos)) end = tek_letters(s, pos);
        if (end) {
            pos = contractions ? tek_contraction(s, end) : end;
            emit(s, pos);
            continue;
        }
        if (col_n(s, pos)) {
            for (k = 0; k < digits && pos < s->b && col_n(s, pos); k++) pos++;
            emit(s, pos);
            continue;
        }
        end = pos + (c == ' ' && pos + 1 < s->b && !col_s(s, pos + 1) && !col_l(s, pos + 1) &&
                     !col_n(s, pos + 1));
        if (!col_s(s, end)) {       /*  ?[^\s\p{L}\p{N}]+[\r\n/]* */
            while (end < s->b && !col_s(s, end) && !col_l(s, end) && !col_n(s, end)) end++;
            while (end < s->b && (s->cp[end] == '\r' || s->cp[end] == '\n' || s->cp[end] == '/')) end++;
            pos = end;
            emit(s, pos);
            continue;
        }
        ws = 0;                     /* \s*[\r\n]+ : up to the run's last \r or \n */
        end = 0;
        while (tek_ws(s, pos + ws)) {
            if (s->cp[pos + ws] == '\r' || s->cp[pos + ws] == '\n') end = pos + ws + 1;
            ws++;
        }
        if (end) pos = end;
        else if (ws > 1 && pos + ws < s->b) pos += ws - 1;     /* \s+(?!\S) */
        else pos += ws;                                          /* \s+ */
        emit(s, pos);
    }
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
    ST_DSL_LETTERS, ST_DSL_PUNCT, ST_TRAILING_SPACE, ST_TEKKEN, ST_GPT4O, ST_END
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
    static const uint8_t st_tekken[] = { ST_TEKKEN, ST_END };
    static const uint8_t st_gpt4o[] = { ST_GPT4O, ST_END };
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
    case PRE_TEKKEN: return st_tekken;
    case PRE_GPT4O: return st_gpt4o;
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
    case ST_TEKKEN: split_tekken(s, 1, 0); break;
    case ST_GPT4O: split_tekken(s, 3, 1); break;
    }
}

int tk_pretokenize(int pre, const uint32_t *cp, const uint8_t *cls, size_t n, ivec *pieces)
{
    const uint8_t *st = stages_of(pre);
    ivec cur = {0}, next = {0};
    size_t i;
    tk_ivec_push(&cur, (int32_t)n);
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

