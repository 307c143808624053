/*
 * tokenizer_ugm.c -- Unigram ("t5", see tokenizer_int.h): SentencePiece's
 * precompiled charsmap normalizer, an implicit trie of token texts, and the
 * Viterbi search of llm_tokenizer_ugm_session.
 */
#include "base/base.h"
#include "text/tokenizer_int.h"

#include <float.h>
#include <stdlib.h>

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
    *rn = (size_t)tk_utf8_put(tk_utf8_next(in, n, &p), tmp);
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
                        if (tk_bbuf_put(out, sp, 3)) goto oom;
                        prepended = 1;
                    }
                }
                if (tk_bbuf_put(out, r + i, 1)) goto oom;
            } else {
                in_word = 0;
                if (!merge && tk_bbuf_put(out, sp, 3)) goto oom;
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
int tk_ugm_tokenize(const tok_vocab *v, const uint8_t *t, size_t n, ivec *out,
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
        size_t cl = tk_utf8_len_of(s.v[off]), lo = 0, hi = v->ugm_n, d = 0;
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
        if (!(prev_unk && unk)) tk_ivec_push(out, best[off].id);
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

