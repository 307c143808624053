/*
 * tokenizer_core.c -- what the tokenizer's models share, at the bottom of
 * src/text's tokenizer files: growable buffers, the hash tables (token text
 * -> id, merge pair -> rank), the merge heap SentencePiece and BPE use, and
 * the byte tokens. See tokenizer_int.h.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "text/tokenizer_int.h"

/* Appends to a growable int32 list (ivec); out of memory sets a->oom. */
void tk_ivec_push(ivec *a, int32_t x)
{
    if (a->oom) return;
    if (bk_grow((void **)&a->v, &a->cap, a->n + 1, sizeof *a->v)) { a->oom = 1; return; }
    a->v[a->n++] = x;
}

/* Appends to a growable byte string (bbuf); -1 when memory runs out. */
int tk_bbuf_put(bbuf *b, const void *p, size_t n)
{
    if (bk_grow((void **)&b->v, &b->cap, b->n + n, 1)) return -1;
    memcpy(b->v + b->n, p, n);
    b->n += n;
    return 0;
}

uint64_t tk_hash_bytes(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i;
    for (i = 0; i < n; i++) { h ^= s[i]; h *= 0x100000001b3ull; }
    return h ^ (h >> 29);
}

/* Sizes the table for n entries (load <= 1/2). */
int tk_strmap_init(strmap *m, size_t n)
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

/* Token text -> id, TOK_NULL when absent. */
int32_t tk_find_token(const tok_vocab *v, const void *s, size_t n)
{
    size_t i = (size_t)tk_hash_bytes(s, n) & v->tmap.mask;
    for (;;) {
        int32_t id = v->tmap.slot[i];
        if (id < 0) return TOK_NULL;
        if (tlen(v, id) == n && memcmp(ttext(v, id), s, n) == 0) return id;
        i = (i + 1) & v->tmap.mask;
    }
}

/* Merge "left right" -> rank, -1 when absent. */
int32_t tk_find_merge(const tok_vocab *v, const void *s, size_t n)
{
    size_t i;
    if (!v->mmap.slot) return -1;
    i = (size_t)tk_hash_bytes(s, n) & v->mmap.mask;
    for (;;) {
        int32_t r = v->mmap.slot[i];
        if (r < 0) return -1;
        if (v->moff[r + 1] - v->moff[r] == n && memcmp(v->mtext + v->moff[r], s, n) == 0) return r;
        i = (i + 1) & v->mmap.mask;
    }
}

/* Maps a float score to a key where higher scores sort first. */
uint32_t tk_score_key(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);   /* ascending order */
    return ~u;                                         /* descending */
}

/* Splits w[0..n) into symbols of one UTF-8 character each (by lead byte,
 * cut short at the end), chained. */
sym *tk_make_symbols(const uint8_t *w, size_t n, size_t *count)
{
    size_t i = 0, k = 0, cap = n ? n : 1;
    sym *s = malloc(cap * sizeof *s);
    if (!s) return NULL;
    while (i < n) {
        size_t l = tk_utf8_len_of(w[i]);
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

void tk_heap_push(heap *h, pair p)
{
    size_t i;
    if (h->oom) return;
    if (bk_grow((void **)&h->v, &h->cap, h->n + 1, sizeof *h->v)) { h->oom = 1; return; }
    i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (h->v[up].key <= p.key) break;
        h->v[i] = h->v[up];
        i = up;
    }
    h->v[i] = p;
}

pair tk_heap_pop(heap *h)
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

/* The byte fallback of both models' SentencePiece side: <0xXX>, else the
 * byte itself as a token; llama.cpp throws when neither exists. */
int32_t tk_hex_byte_token(const tok_vocab *v, uint8_t b)
{
    static const char hx[] = "0123456789ABCDEF";
    char buf[6] = { '<', '0', 'x', hx[b >> 4], hx[b & 15], '>' };
    return tk_find_token(v, buf, 6);
}
