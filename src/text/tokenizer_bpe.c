/*
 * tokenizer_bpe.c -- byte-level BPE ("gpt2", and "gemma4"'s raw-UTF-8
 * variant, see tokenizer_int.h): the text pre-tokenized, each piece mapped
 * to GPT-2's byte alphabet and merged by rank, as llm_tokenizer_bpe_session
 * does.
 */
#include "base/base.h"
#include "text/tokenizer_int.h"

#include <stdlib.h>

/* ---- byte-level BPE (llm_tokenizer_bpe_session) ---- */

static void bpe_try_pair(const tok_vocab *v, const uint8_t *w, sym *s, int32_t l, int32_t r,
                         heap *h, bbuf *key)
{
    int32_t rank;
    pair p;
    if (l < 0 || r < 0) return;
    key->n = 0;
    if (tk_bbuf_put(key, w + s[l].start, s[l].n) || tk_bbuf_put(key, " ", 1) ||
        tk_bbuf_put(key, w + s[r].start, s[r].n)) { h->oom = 1; return; }
    rank = tk_find_merge(v, key->v, key->n);
    if (rank < 0) return;
    p.key = (uint64_t)(uint32_t)rank << 32 | (uint32_t)l;
    p.right = r;
    p.size = s[l].n + s[r].n;
    tk_heap_push(h, p);
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
        if (whole && (id = tk_find_token(v, w, n)) != TOK_NULL) { tk_ivec_push(out, id); return 0; }
    }
    s = tk_make_symbols(w, n, &count);
    if (!s) return -1;
    for (i = 1; i < (int32_t)count; i++) bpe_try_pair(v, w, s, i - 1, i, &h, key);
    while (h.n && !h.oom) {
        pair p = tk_heap_pop(&h);
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
        id = tk_find_token(v, w + s[i].start, s[i].n);
        if (id != TOK_NULL) { tk_ivec_push(out, id); continue; }
        /* llama.cpp looks each byte of the (encoded) symbol up as a
         * one-byte token and silently drops the bytes that are none */
        for (j = 0; j < s[i].n; j++) {
            uint8_t b = w[s[i].start + j];
            id = v->byte_encode ? tk_find_token(v, &b, 1) : tk_hex_byte_token(v, b);
            if (id != TOK_NULL) tk_ivec_push(out, id);
        }
    }
    free(s);
    return 0;
}

/* Pre-tokenizes text[0..n) and merges every piece. */
int tk_bpe_tokenize(const tok_vocab *v, const uint8_t *t, size_t n, ivec *out,
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
        cp[ncp] = tk_utf8_next(t, n, &i);
        cls[ncp] = (uint8_t)tk_cp_class(cp[ncp]);
        ncp++;
    }
    if (ncp > INT32_MAX) { bk_err(err, errlen, "text too long"); goto out; }
    if (tk_pretokenize(v->pre, cp, cls, ncp, &pieces)) goto oom;
    start = 0;
    for (k = 0; k < pieces.n; k++) {
        size_t end = start + (size_t)pieces.v[k], p;
        word.n = 0;
        for (p = start; p < end; p++) {
            uint8_t u[4], e[4];
            int m = tk_utf8_put(cp[p], u), q;
            if (m == 0) {
                bk_err(err, errlen, "the text holds code point U+%X, past U+10FFFF", cp[p]);
                goto out;
            }
            if (!v->byte_encode) {
                if (tk_bbuf_put(&word, u, (size_t)m)) goto oom;
                continue;
            }
            for (q = 0; q < m; q++) {
                int el = tk_utf8_put(tk_gpt2_byte_cp(u[q]), e);
                if (tk_bbuf_put(&word, e, (size_t)el)) goto oom;
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

