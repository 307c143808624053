/*
 * chat_analyze_util.c -- the tools of b11669's template analysis
 * (common/chat-auto-parser-helpers.cpp, and the few parsers of
 * common/peg-parser.cpp the analysis builds): an arena of immutable strings
 * with std::string's find/substr rules, marker segmentation, the diff split,
 * and a small tagged PEG matcher.
 *
 * The matcher reproduces common_peg_arena::parse without the lenient flag:
 * literals and any() fail at the end of input, space() is isspace() in the C
 * locale, until() stops before the first position where a delimiter starts
 * or where what is left is a proper prefix of one (the trie's partial match),
 * repetitions stop at the end of input and on an empty match, and tags are
 * read in the AST's pre-order with the last one of a name winning.
 */
#include "text/chat_analyze_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ arena */

struct ca_block {
    ca_block *next;
    size_t used, cap;
    max_align_t data[];
};

void ca_throw(ca_ctx *C, const char *fmt, ...) {
    if (C->err && C->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(C->err, C->errlen, fmt, ap);
        va_end(ap);
    }
    longjmp(*C->on_error, 1);
}

void *ca_alloc(ca_ctx *C, size_t n) {
    n = (n + 15) & ~(size_t)15;
    ca_block *b = C->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = malloc(sizeof *b + cap);
        if (!b) ca_throw(C, "out of memory");
        b->next = C->blocks;
        b->used = 0;
        b->cap = cap;
        C->blocks = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

void ca_free_blocks(ca_block *b) {
    while (b) {
        ca_block *n = b->next;
        free(b);
        b = n;
    }
}

/* ------------------------------------------------------------ strings */

ca_str ca_s(ca_ctx *C, const char *p, size_t n) {
    char *d = ca_alloc(C, n + 1);
    if (n) memcpy(d, p, n);
    d[n] = 0;
    return (ca_str){d, n};
}

ca_str ca_lit(const char *s) { return (ca_str){s, strlen(s)}; }

ca_str ca_cat(ca_ctx *C, ca_str a, ca_str b) {
    char *d = ca_alloc(C, a.n + b.n + 1);
    if (a.n) memcpy(d, a.p, a.n);
    if (b.n) memcpy(d + a.n, b.p, b.n);
    d[a.n + b.n] = 0;
    return (ca_str){d, a.n + b.n};
}

ca_str ca_sub(ca_ctx *C, ca_str s, size_t pos, size_t n) {
    if (pos > s.n)
        ca_throw(C, "basic_string::substr: __pos (which is %zu) > this->size() (which is %zu)", pos, s.n);
    if (n > s.n - pos) n = s.n - pos;
    return ca_s(C, s.p + pos, n);
}

size_t ca_find(ca_str h, ca_str nd, size_t from) {
    if (from > h.n) return CA_NPOS;
    if (nd.n == 0) return from;
    for (size_t i = from; i + nd.n <= h.n; i++)
        if (h.p[i] == nd.p[0] && !memcmp(h.p + i, nd.p, nd.n)) return i;
    return CA_NPOS;
}

size_t ca_rfind(ca_str h, ca_str nd) {
    if (nd.n > h.n) return CA_NPOS;
    for (size_t i = h.n - nd.n + 1; i-- > 0;)
        if (!memcmp(h.p + i, nd.p, nd.n)) return i;
    return CA_NPOS;
}

size_t ca_find_c(ca_str h, char c, size_t from) {
    for (size_t i = from; i < h.n; i++)
        if (h.p[i] == c) return i;
    return CA_NPOS;
}

int ca_eq(ca_str a, ca_str b) { return a.n == b.n && (!a.n || !memcmp(a.p, b.p, a.n)); }
int ca_eq_c(ca_str a, const char *s) { return ca_eq(a, ca_lit(s)); }
int ca_has(ca_str h, const char *nd) { return ca_find(h, ca_lit(nd), 0) != CA_NPOS; }

int ca_ends_with(ca_str s, ca_str x) { return s.n >= x.n && (!x.n || !memcmp(s.p + s.n - x.n, x.p, x.n)); }

static int cau_sp(char c) { return isspace((unsigned char)c) != 0; }

ca_str ca_trim(ca_ctx *C, ca_str s) {
    size_t a = 0, e = s.n;
    while (a < e && cau_sp(s.p[a])) a++;
    while (e > a && cau_sp(s.p[e - 1])) e--;
    return ca_s(C, s.p + a, e - a);
}

ca_str ca_trim_leading(ca_ctx *C, ca_str s) {
    size_t a = 0;
    while (a < s.n && cau_sp(s.p[a])) a++;
    return ca_s(C, s.p + a, s.n - a);
}

/* ------------------------------------------------------------ segments */

ca_seg *ca_segmentize(ca_ctx *C, ca_str t, size_t *n) {
    ca_seg *out = ca_alloc(C, (t.n + 1) * sizeof *out);
    size_t k = 0, last = 0;
    int in = 0;
    char op = 0;
    for (size_t i = 0; i < t.n; i++) {
        char c = t.p[i];
        if (!in && (c == '<' || c == '[')) {
            if (last < i) out[k++] = (ca_seg){0, ca_s(C, t.p + last, i - last)};
            last = i;
            in = 1;
            op = c;
        } else if (in && ((op == '<' && c == '>') || (op == '[' && c == ']'))) {
            out[k++] = (ca_seg){1, ca_s(C, t.p + last, i - last + 1)};
            last = i + 1;
            in = 0;
        }
    }
    if (last < t.n) out[k++] = (ca_seg){0, ca_s(C, t.p + last, t.n - last)};
    *n = k;
    return out;
}

size_t ca_prune_ws(ca_ctx *C, ca_seg *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (ca_trim(C, s[i].v).n) s[k++] = s[i];
    return k;
}

static int cau_seg_eq(const ca_seg *a, const ca_seg *b) { return a->marker == b->marker && ca_eq(a->v, b->v); }

static size_t cau_prefix_len(ca_str a, ca_str b) {
    size_t i = 0;
    while (i < a.n && i < b.n && a.p[i] == b.p[i]) i++;
    return i;
}

static size_t cau_suffix_len(ca_str a, ca_str b) {
    size_t i = 0;
    while (i < a.n && i < b.n && a.p[a.n - 1 - i] == b.p[b.n - 1 - i]) i++;
    return i;
}

static ca_str cau_join(ca_ctx *C, const ca_seg *s, size_t from, size_t to) {
    size_t len = 0;
    for (size_t i = from; i < to; i++) len += s[i].v.n;
    char *d = ca_alloc(C, len + 1);
    size_t o = 0;
    for (size_t i = from; i < to; i++) {
        memcpy(d + o, s[i].v.p, s[i].v.n);
        o += s[i].v.n;
    }
    d[len] = 0;
    return (ca_str){d, len};
}

ca_diff ca_diff_split(ca_ctx *C, ca_str left, ca_str right) {
    ca_diff r = {ca_lit(""), ca_lit(""), ca_lit(""), ca_lit("")};
    size_t nl, nr;
    ca_seg *L = ca_segmentize(C, left, &nl), *R = ca_segmentize(C, right, &nr);
    if (!nl) { r.right = right; return r; }
    if (!nr) { r.left = left; return r; }
    size_t ls = 0, le = nl - 1, rs = 0, re = nr - 1;
    int lfc = 0, rfc = 0;
    while (ls != le && rs != re) {
        int adv = 0;
        if (cau_seg_eq(&L[ls], &R[rs])) {
            r.prefix = ca_cat(C, r.prefix, L[ls].v);
            ls++;
            rs++;
            adv = 1;
        }
        if (cau_seg_eq(&L[le], &R[re])) {
            r.suffix = ca_cat(C, L[le].v, r.suffix);
            if (ls != le) le--;
            else lfc = 1;
            if (rs != re) re--;
            else rfc = 1;
            adv = 1;
        }
        if (!adv) break;
    }
    if (ls == le && rs != re) {
        if (cau_seg_eq(&L[ls], &R[re])) {
            r.suffix = ca_cat(C, R[re].v, r.suffix);
            re--;
            lfc = 1;
        } else if (cau_seg_eq(&L[ls], &R[rs])) {
            r.prefix = ca_cat(C, r.prefix, R[rs].v);
            rs++;
            lfc = 1;
        }
    } else if (rs == re && ls != le) {
        if (cau_seg_eq(&L[le], &R[rs])) {
            r.suffix = ca_cat(C, L[le].v, r.suffix);
            le--;
            rfc = 1;
        } else if (cau_seg_eq(&L[ls], &R[rs])) {
            r.prefix = ca_cat(C, r.prefix, L[ls].v);
            ls++;
            rfc = 1;
        }
    } else if (ls == le && rs == re && cau_seg_eq(&L[ls], &R[rs]) && L[ls].marker) {
        r.prefix = ca_cat(C, r.prefix, R[rs].v);
        lfc = rfc = 1;
    }
    int text_suffix = !L[le].marker && !R[re].marker;
    int text_prefix = !R[rs].marker && !L[ls].marker;
    ca_str rl = cau_join(C, L, ls, lfc ? le : le + 1);
    ca_str rr = cau_join(C, R, rs, rfc ? re : re + 1);
    size_t sl = text_suffix ? cau_suffix_len(rl, rr) : 0;
    size_t pl = text_prefix ? cau_prefix_len((ca_str){rl.p, rl.n - sl}, (ca_str){rr.p, rr.n - sl}) : 0;
    r.prefix = ca_cat(C, r.prefix, ca_s(C, rl.p, pl));
    r.suffix = ca_cat(C, ca_s(C, rl.p + rl.n - sl, sl), r.suffix);
    r.left = ca_s(C, rl.p + pl, rl.n - pl - sl);
    r.right = ca_s(C, rr.p + pl, rr.n - pl - sl);
    if (!r.left.n && !r.right.n) {
        r.prefix = left;
        r.suffix = ca_lit("");
    }
    if (!r.left.n && r.right.n && left.n <= right.n && !memcmp(right.p, left.p, left.n)) {
        r.prefix = left;
        r.suffix = ca_lit("");
        r.right = ca_s(C, right.p + left.n, right.n - left.n);
    }
    return r;
}

ca_str ca_until_common_prefix(ca_ctx *C, ca_str full, ca_str left, ca_str right) {
    size_t n = cau_prefix_len(left, right);
    if (!n) return ca_lit("");
    size_t pos = ca_find(full, (ca_str){left.p, n}, 0);
    if (pos == CA_NPOS) return ca_lit("");
    return ca_s(C, full.p, pos);
}

/* ------------------------------------------------------------ PEG */

enum { PK_LIT, PK_SEQ, PK_CHOICE, PK_REP, PK_NOT, PK_ANY, PK_SPACE, PK_UNTIL, PK_END, PK_TAG };

typedef struct {
    int kind;
    ca_str s;              /* LIT */
    int *kids;             /* SEQ, CHOICE; UNTIL: unused */
    int nk;
    ca_str *delims;        /* UNTIL */
    int nd;
    int child, min, max;   /* REP, NOT, TAG */
    const char *tag;
} cau_node;

typedef struct {
    const char *tag;
    size_t a, b;
} cau_hit;

struct ca_peg {
    ca_ctx *C;
    cau_node *nodes;
    int n, cap;
    cau_hit *hits;         /* tags of the current parse, pre-order */
    size_t nh, caph;
    ca_str in;
};

ca_peg *ca_peg_new(ca_ctx *C) {
    ca_peg *P = ca_alloc(C, sizeof *P);
    memset(P, 0, sizeof *P);
    P->C = C;
    return P;
}

static int cau_add(ca_peg *P, cau_node nd) {
    if (P->n == P->cap) {
        int cap = P->cap ? P->cap * 2 : 32;
        cau_node *d = ca_alloc(P->C, (size_t)cap * sizeof *d);
        if (P->n) memcpy(d, P->nodes, (size_t)P->n * sizeof *d);
        P->nodes = d;
        P->cap = cap;
    }
    P->nodes[P->n] = nd;
    return P->n++;
}

int ca_p_lit(ca_peg *P, ca_str s) { return cau_add(P, (cau_node){.kind = PK_LIT, .s = s}); }
int ca_p_lit_c(ca_peg *P, const char *s) { return ca_p_lit(P, ca_lit(s)); }

static int cau_list(ca_peg *P, int kind, int n, va_list ap) {
    int *k = ca_alloc(P->C, (size_t)(n ? n : 1) * sizeof *k);
    for (int i = 0; i < n; i++) k[i] = va_arg(ap, int);
    return cau_add(P, (cau_node){.kind = kind, .kids = k, .nk = n});
}

int ca_p_seq(ca_peg *P, int n, ...) {
    va_list ap;
    va_start(ap, n);
    int id = cau_list(P, PK_SEQ, n, ap);
    va_end(ap);
    return id;
}

int ca_p_choice(ca_peg *P, int n, ...) {
    va_list ap;
    va_start(ap, n);
    int id = cau_list(P, PK_CHOICE, n, ap);
    va_end(ap);
    return id;
}

int ca_p_rep(ca_peg *P, int c, int min, int max) {
    return cau_add(P, (cau_node){.kind = PK_REP, .child = c, .min = min, .max = max});
}
int ca_p_not(ca_peg *P, int c) { return cau_add(P, (cau_node){.kind = PK_NOT, .child = c}); }
int ca_p_any(ca_peg *P) { return cau_add(P, (cau_node){.kind = PK_ANY}); }
int ca_p_space(ca_peg *P) { return cau_add(P, (cau_node){.kind = PK_SPACE}); }
int ca_p_end(ca_peg *P) { return cau_add(P, (cau_node){.kind = PK_END}); }
int ca_p_tag(ca_peg *P, const char *tag, int c) { return cau_add(P, (cau_node){.kind = PK_TAG, .child = c, .tag = tag}); }

int ca_p_until(ca_peg *P, int n, ...) {
    ca_str *d = ca_alloc(P->C, (size_t)(n ? n : 1) * sizeof *d);
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) d[i] = va_arg(ap, ca_str);
    va_end(ap);
    return cau_add(P, (cau_node){.kind = PK_UNTIL, .delims = d, .nd = n});
}

int ca_p_marker(ca_peg *P) {
    int a = ca_p_seq(P, 3, ca_p_lit_c(P, "<"), ca_p_until(P, 1, ca_lit(">")), ca_p_lit_c(P, ">"));
    int b = ca_p_seq(P, 3, ca_p_lit_c(P, "["), ca_p_until(P, 1, ca_lit("]")), ca_p_lit_c(P, "]"));
    return ca_p_choice(P, 2, a, b);
}

/* common_parse_utf8_codepoint's length: 0 when the bytes at i do not decode
 * (invalid, or cut by the end of input); *bad gets how many to skip then */
static size_t cau_utf8(ca_str in, size_t i, size_t *bad) {
    unsigned char c = (unsigned char)in.p[i];
    size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    *bad = 1;
    if (!n) return 0;
    if (i + n > in.n) { *bad = in.n - i; return 0; }
    for (size_t k = 1; k < n; k++)
        if (((unsigned char)in.p[i + k] & 0xC0) != 0x80) return 0;
    return n;
}

/* the trie's check_at: 2 complete, 1 partial (input ends inside a delimiter), 0 none */
static int cau_delim_at(const cau_node *nd, ca_str in, size_t pos) {
    int partial = 0;
    for (int k = 0; k < nd->nd; k++) {
        ca_str d = nd->delims[k];
        if (!d.n) continue;
        size_t left = in.n - pos;
        if (left >= d.n) {
            if (!memcmp(in.p + pos, d.p, d.n)) return 2;
        } else if (!memcmp(in.p + pos, d.p, left)) {
            partial = 1;
        }
    }
    return partial;
}

static void cau_hit_insert(ca_peg *P, size_t at, const char *tag, size_t a, size_t b) {
    if (P->nh == P->caph) {
        size_t cap = P->caph ? P->caph * 2 : 16;
        cau_hit *d = ca_alloc(P->C, cap * sizeof *d);
        if (P->nh) memcpy(d, P->hits, P->nh * sizeof *d);
        P->hits = d;
        P->caph = cap;
    }
    memmove(P->hits + at + 1, P->hits + at, (P->nh - at) * sizeof *P->hits);
    P->hits[at] = (cau_hit){tag, a, b};
    P->nh++;
}

/* returns the end position, or CA_NPOS on failure (tags of a failure dropped) */
static size_t cau_parse(ca_peg *P, int id, size_t pos) {
    const cau_node *nd = &P->nodes[id];
    ca_str in = P->in;
    size_t mark = P->nh;
    if (++P->C->steps > CA_MAX_STEPS)
        ca_throw(P->C, "the template's renders are too large to analyse (over %llu parser steps)", CA_MAX_STEPS);
    switch (nd->kind) {
    case PK_LIT:
        if (in.n - pos < nd->s.n || (nd->s.n && memcmp(in.p + pos, nd->s.p, nd->s.n))) return CA_NPOS;
        return pos + nd->s.n;
    case PK_SEQ:
        for (int i = 0; i < nd->nk; i++) {
            pos = cau_parse(P, nd->kids[i], pos);
            if (pos == CA_NPOS) { P->nh = mark; return CA_NPOS; }
        }
        return pos;
    case PK_CHOICE:
        for (int i = 0; i < nd->nk; i++) {
            size_t e = cau_parse(P, nd->kids[i], pos);
            if (e != CA_NPOS) return e;
        }
        return CA_NPOS;
    case PK_REP: {
        int count = 0;
        while (nd->max == -1 || count < nd->max) {
            if (pos >= in.n) break;
            size_t m2 = P->nh;
            size_t e = cau_parse(P, nd->child, pos);
            if (e == CA_NPOS) break;
            if (e == pos) { P->nh = m2; break; }
            pos = e;
            count++;
        }
        if (nd->min > 0 && count < nd->min) { P->nh = mark; return CA_NPOS; }
        return pos;
    }
    case PK_NOT: {
        size_t e = cau_parse(P, nd->child, pos);
        P->nh = mark;
        return e == CA_NPOS ? pos : CA_NPOS;
    }
    case PK_ANY: {
        size_t bad;
        if (pos >= in.n) return CA_NPOS;
        size_t n = cau_utf8(in, pos, &bad);
        return n ? pos + n : CA_NPOS;
    }
    case PK_SPACE:
        while (pos < in.n && cau_sp(in.p[pos])) pos++;
        return pos;
    case PK_UNTIL:
        while (pos < in.n) {
            size_t bad, n = cau_utf8(in, pos, &bad);
            if (!n) { pos += bad; continue; }
            if (cau_delim_at(nd, in, pos)) return pos;
            pos += n;
            P->C->steps++;
        }
        return pos;
    case PK_END:
        return pos >= in.n ? pos : CA_NPOS;
    case PK_TAG: {
        size_t e = cau_parse(P, nd->child, pos);
        if (e == CA_NPOS) return CA_NPOS;
        cau_hit_insert(P, mark, nd->tag, pos, e);
        return e;
    }
    }
    return CA_NPOS;
}

int ca_peg_parse(ca_peg *P, int root, ca_str in) {
    P->in = in;
    P->nh = 0;
    if (cau_parse(P, root, 0) == CA_NPOS) { P->nh = 0; return 0; }
    return 1;
}

int ca_peg_parse_anywhere(ca_peg *P, int root, ca_str in) {
    if (!in.n) return ca_peg_parse(P, root, in);
    P->in = in;
    for (size_t i = 0; i < in.n; i++) {
        P->nh = 0;
        if (cau_parse(P, root, i) != CA_NPOS) return 1;
    }
    P->nh = 0;
    return 0;
}

ca_str ca_peg_tag(ca_peg *P, const char *tag) {
    ca_str r = ca_lit("");
    for (size_t i = 0; i < P->nh; i++)
        if (!strcmp(P->hits[i].tag, tag)) r = ca_s(P->C, P->in.p + P->hits[i].a, P->hits[i].b - P->hits[i].a);
    return r;
}
