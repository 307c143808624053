/*
 * tokenizer_unicode.c -- code points as llama.cpp's tokenizers see them
 * (src/unicode.cpp, see tokenizer_int.h): classes, lower case and one-code-
 * point NFD from its own tables (unicode_tables.h, the only file that reads
 * them), its lenient UTF-8 decoder and encoder, and GPT-2's byte alphabet.
 */
#include "text/tokenizer_int.h"

#include "text/unicode_tables.h"

/* ------------------------------------------------------------------------
 * code point classes
 *
 * llama.cpp classifies code points with its own tables (a fixed Unicode
 * version), so the tokenizers here read the same data, regenerated
 * into unicode_tables.h by testing/gen_unicode_tables.py.
 * ---------------------------------------------------------------------- */

/* Class byte of a code point: TOKU_* category in bits 0-3, TOKU_WS. Code
 * points past U+10FFFF are UNDEFINED, as in unicode_cpt_flags_from_cpt. */
unsigned tk_cp_class(uint32_t c)
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

/* unicode_tolower: the contractions of the pre-tokenizers compare lower
 * case, and WordPiece lower-cases whole words. */
uint32_t tk_cp_lower(uint32_t c)
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
uint32_t tk_cp_nfd(uint32_t c)
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
uint32_t tk_utf8_next(const uint8_t *s, size_t n, size_t *i)
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
int tk_utf8_put(uint32_t c, uint8_t *o)
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
size_t tk_utf8_len_of(uint8_t b)
{
    static const uint8_t len[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return len[b >> 4];
}

/* GPT-2's byte-to-unicode alphabet: printable Latin-1 bytes stand for
 * themselves, the other 68 take U+0100 onwards in byte order. */
uint32_t tk_gpt2_byte_cp(uint8_t b)
{
    unsigned n = 0, x;
    if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae) return b;
    for (x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || x >= 0xae)) n++;
    return 256 + n;
}

/* The inverse: the byte a code point of that alphabet stands for, or -1. */
int tk_gpt2_cp_byte(uint32_t c)
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

