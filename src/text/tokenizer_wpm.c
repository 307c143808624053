/*
 * tokenizer_wpm.c -- WordPiece ("bert", see tokenizer_int.h): BERT's
 * pre-tokenizer and normalizer, then greedy longest-token words, as
 * llm_tokenizer_wpm_session does.
 */
#include "base/base.h"
#include "text/tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

#include "text/unicode_tables.h"

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
            if ((id = tk_find_token(v, w + i, j - i)) != TOK_NULL) break;
        if (id == TOK_NULL) { out->n = mark; break; }
        tk_ivec_push(out, id);
        i = j;
    }
    if (out->n == mark && !out->oom) {
        if (v->unk == TOK_NULL) return -1;
        tk_ivec_push(out, v->unk);
    }
    return 0;
}

/* BERT's pre-tokenizer and WordPiece: white space separates words,
 * control characters, NUL and U+FFFD (so invalid UTF-8) vanish, each
 * punctuation mark, ASCII symbol and CJK ideograph is a word of its own;
 * with the normalizer's options letters are lower-cased and accents
 * stripped (llama.cpp's one-code-point NFD, then marks dropped). */
int tk_wpm_tokenize(const tok_vocab *v, const uint8_t *t, size_t n, ivec *out,
                        char *err, size_t errlen)
{
    bbuf word = {0};
    size_t i = 0;
    int rc = -1;
    if (tk_bbuf_put(&word, "\xe2\x96\x81", 3)) goto oom;
    while (i < n) {
        uint32_t c = tk_utf8_next(t, n, &i);
        unsigned k;
        uint8_t u[4], one[7] = { 0xe2, 0x96, 0x81 };
        int m;
        if (v->strip_accents) c = tk_cp_nfd(c);
        k = tk_cp_class(c);
        if (CL_WS(k)) {
            if (word.n > 3 && wpm_word(v, word.v, word.n, out)) goto no_unk;
            word.n = 3;
            continue;
        }
        if (c == 0 || c == 0xFFFD || CL_CAT(k) == TOKU_CONTROL) continue;
        if (v->strip_accents && CL_M(k)) continue;
        m = tk_utf8_put(v->lowercase ? tk_cp_lower(c) : c, u);
        if (CL_CAT(k) == TOKU_PUNCTUATION || (c < 0x7f && CL_CAT(k) == TOKU_SYMBOL) || wpm_is_cjk(c)) {
            if (word.n > 3 && wpm_word(v, word.v, word.n, out)) goto no_unk;
            word.n = 3;
            memcpy(one + 3, u, (size_t)m);
            if (wpm_word(v, one, 3 + (size_t)m, out)) goto no_unk;
        } else if (tk_bbuf_put(&word, u, (size_t)m)) {
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

