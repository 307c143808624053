/*
 * tokenizer.c -- GGUF vocabularies tokenized and detokenized exactly as
 * llama.cpp b11669 does (src/llama-vocab.cpp, src/unicode.cpp).
 *
 * The tokenizer is nine files sharing tokenizer_int.h, in the order a prompt
 * flows:
 *   tokenizer_unicode.c  code point classes (llama.cpp's Unicode tables in
 *                        unicode_tables.h), UTF-8, GPT-2's byte alphabet
 *   tokenizer.c          (this file) growable buffers, hash tables (token text
 *                        -> id, merge pair -> rank), the merge heap shared by
 *                        SentencePiece and BPE; special tokens cut out of the
 *                        text before the model runs (tok_tokenize); pieces
 *                        (token_to_piece, detokenize); accessors
 *   tokenizer_pretok.c   pre-tokenizers: one hand-written matcher per regex
 *                        llama.cpp runs, reproducing its custom splitters and,
 *                        for the regexes it hands to std::regex, ECMAScript's
 *                        leftmost-first semantics over its "collapsed" text
 *   tokenizer_spm.c      SentencePiece: score-driven merging of adjacent symbols
 *   tokenizer_bpe.c      byte-level BPE: rank-driven merging inside each pre-token
 *   tokenizer_wpm.c      WordPiece: BERT's normalizer, greedy longest-token words
 *   tokenizer_ugm.c      Unigram: SentencePiece's charsmap normalizer and Viterbi
 *   tokenizer_load.c     loading: the GGUF keys, the id defaults and the
 *                        overrides llama-vocab applies by token text and model name
 *
 * Where llama.cpp has a quirk (lenient UTF-8 decoding that turns each bad
 * byte into U+FFFD before BPE, a byte fallback that drops bytes, the
 * clean-up passes of detokenize, Unigram's user-defined "prefix" match) the
 * quirk is reproduced, because "the same ids as llama-server" is the
 * contract.
 */
#include "base/base.h"
#include "text/tokenizer.h"
#include "text/tokenizer_int.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * errors and small helpers
 * ---------------------------------------------------------------------- */

/* ------------------------------------------------------------------------
 * hash tables: open addressing over byte strings
 * ---------------------------------------------------------------------- */

/* ------------------------------------------------------------------------
 * merging: a binary heap of candidate pairs and a symbol chain (the types
 * are in tokenizer_int.h; SentencePiece and BPE both merge with them)
 * ---------------------------------------------------------------------- */

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
    if (bk_grow((void **)&f->v, &f->cap, f->n + 1, sizeof *f->v)) { f->oom = 1; return; }
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
        tk_ivec_push(&out, v->bos);
    }
    for (i = 0; i < fr.n; i++) {
        const frag *f = &fr.v[i];
        if (f->id != TOK_NULL) { tk_ivec_push(&out, f->id); prev_special = 1; continue; }
        if (v->type == TOK_TYPE_WPM || v->type == TOK_TYPE_UGM) {
            const uint8_t *t = (const uint8_t *)text + f->off;
            if (v->type == TOK_TYPE_WPM ? tk_wpm_tokenize(v, t, f->len, &out, err, errlen)
                                        : tk_ugm_tokenize(v, t, f->len, &out, err, errlen))
                goto fail;
            if (out.oom) goto oom;
            continue;
        }
        buf.n = 0;
        if (v->type == TOK_TYPE_SPM && v->add_space_prefix && prev_special)
            if (tk_bbuf_put(&buf, "\xe2\x96\x81", 3)) goto oom;
        if (v->escape_ws) {
            size_t p;
            for (p = 0; p < f->len; p++) {
                const char c = text[f->off + p];
                if (c == ' ' ? tk_bbuf_put(&buf, "\xe2\x96\x81", 3) : tk_bbuf_put(&buf, &c, 1)) goto oom;
            }
        } else if (tk_bbuf_put(&buf, text + f->off, f->len)) {
            goto oom;
        }
        if (buf.n > UINT32_MAX - 8) { bk_err(err, errlen, "text too long"); goto fail; }
        if (v->type == TOK_TYPE_SPM) {
            if (tk_spm_tokenize(v, buf.v, buf.n, &out, err, errlen)) goto fail;
        } else {
            if (tk_bpe_tokenize(v, buf.v, buf.n, &out, err, errlen)) goto fail;
        }
        prev_special = 0;
        if (out.oom) goto oom;
    }
    if (add_special && v->type == TOK_TYPE_WPM) {
        if (v->sep == TOK_NULL) {
            bk_err(err, errlen, "the vocabulary adds a SEP token but has none");
            goto fail;
        }
        tk_ivec_push(&out, v->sep);
    } else if (add_special && v->add_eos) {
        if (v->eos == TOK_NULL) {
            bk_err(err, errlen, "the vocabulary adds an EOS token but has none");
            goto fail;
        }
        tk_ivec_push(&out, v->eos);
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
            uint32_t c = tk_utf8_next((const uint8_t *)s, n, &i);
            int byte = tk_gpt2_cp_byte(c);
            if (byte >= 0) {
                jbuf_putc(out, (char)byte);
            } else {
                uint8_t u[4];
                int m = tk_utf8_put(c, u), q;
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
    if (!v->clean_spaces || out->len == start) return 0;   /* nothing new (out->p may still be NULL) */
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
    return tk_find_token(v, s, len);
}
