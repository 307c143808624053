/*
 * tokenizer_spm.c -- SentencePiece ("llama" vocabularies, see
 * tokenizer_int.h): score-driven merging of adjacent symbols, then the byte
 * fallback, as llm_tokenizer_spm_session does.
 */
#include "base/base.h"
#include "text/tokenizer_int.h"

#include <stdlib.h>

/* ---- SentencePiece (llm_tokenizer_spm_session) ---- */

static void spm_try_pair(const tok_vocab *v, const uint8_t *t, sym *s, int32_t l, int32_t r, heap *h)
{
    int32_t id;
    pair p;
    if (l < 0 || r < 0) return;
    id = tk_find_token(v, t + s[l].start, (size_t)s[l].n + s[r].n);
    if (id == TOK_NULL) return;
    p.key = (uint64_t)tk_score_key(v->score[id]) << 32 | (uint32_t)l;
    p.right = r;
    p.size = s[l].n + s[r].n;
    tk_heap_push(h, p);
}

int tk_spm_byte_token(const tok_vocab *v, uint8_t b, int32_t *id)
{
    *id = tk_hex_byte_token(v, b);
    if (*id == TOK_NULL) *id = tk_find_token(v, &b, 1);
    return *id == TOK_NULL ? -1 : 0;
}

int tk_spm_tokenize(const tok_vocab *v, const uint8_t *t, size_t n, ivec *out,
                        char *err, size_t errlen)
{
    size_t count, j;
    sym *s = tk_make_symbols(t, n, &count);
    heap h = {0};
    int32_t i;
    if (!s) { bk_err(err, errlen, "out of memory"); return -1; }
    for (i = 1; i < (int32_t)count; i++) spm_try_pair(v, t, s, i - 1, i, &h);
    while (h.n && !h.oom) {
        pair p = tk_heap_pop(&h);
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
        int32_t id = tk_find_token(v, t + s[i].start, s[i].n);
        if (id != TOK_NULL) { tk_ivec_push(out, id); continue; }
        for (j = 0; j < s[i].n; j++) {
            uint8_t b = t[s[i].start + j];
            if (tk_spm_byte_token(v, b, &id)) {
                free(s);
                bk_err(err, errlen, "the vocabulary has no token for byte 0x%02X", b);
                return -1;
            }
            tk_ivec_push(out, id);
        }
    }
    free(s);
    return 0;
}

