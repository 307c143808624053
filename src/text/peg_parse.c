/*
 * peg_parse.c -- b11669's PEG executor (common_peg_arena::parse and its
 * parser_executor), see peg.h. One recursive descent over the arena; results
 * carry the AST node ids and the invalid UTF-8 runs they consumed, rule and
 * tag parsers turn them into AST nodes.
 */
#include "text/peg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int type;
    size_t start, end;
    size_t *nodes, nn, ncap;
    peg_bad_utf8 *bad;
    size_t nbad, bcap;
} pp_res;

typedef struct {
    const peg_arena *a;
    const char *in;
    size_t len;
    int lenient;
    peg_ast *ast;
    peg_trie *tries;            /* per parser id, built on first use (until) */
    unsigned char *built;
    int depth;
    const char *err;            /* set once: the parse stops */
} pp_ctx;

static pp_res pp_mk(int type, size_t start, size_t end)
{
    pp_res r;
    memset(&r, 0, sizeof r);
    r.type = type;
    r.start = start;
    r.end = end;
    return r;
}

static void pp_drop(pp_res *r)
{
    free(r->nodes);
    free(r->bad);
    r->nodes = NULL;
    r->bad = NULL;
    r->nn = r->ncap = r->nbad = r->bcap = 0;
}

static void pp_oom(pp_ctx *c) { if (!c->err) c->err = "out of memory while parsing"; }

static void pp_push_node(pp_ctx *c, pp_res *r, size_t id)
{
    if (r->nn == r->ncap) {
        size_t cap = r->ncap ? r->ncap * 2 : 4;
        size_t *n = realloc(r->nodes, cap * sizeof *n);
        if (!n) { pp_oom(c); return; }
        r->nodes = n;
        r->ncap = cap;
    }
    r->nodes[r->nn++] = id;
}

static void pp_push_bad(pp_ctx *c, pp_res *r, peg_bad_utf8 b)
{
    if (r->nbad == r->bcap) {
        size_t cap = r->bcap ? r->bcap * 2 : 4;
        peg_bad_utf8 *n = realloc(r->bad, cap * sizeof *n);
        if (!n) { pp_oom(c); return; }
        r->bad = n;
        r->bcap = cap;
    }
    r->bad[r->nbad++] = b;
}

/* moves src's nodes and runs to the end of dst's; src is emptied */
static void pp_take(pp_ctx *c, pp_res *dst, pp_res *src)
{
    if (dst->nn == 0 && dst->nbad == 0) {
        size_t *kn = dst->nodes;
        peg_bad_utf8 *kb = dst->bad;
        dst->nodes = src->nodes; dst->nn = src->nn; dst->ncap = src->ncap;
        dst->bad = src->bad; dst->nbad = src->nbad; dst->bcap = src->bcap;
        src->nodes = NULL; src->bad = NULL;
        free(kn);
        free(kb);
    } else {
        for (size_t i = 0; i < src->nn; i++) pp_push_node(c, dst, src->nodes[i]);
        for (size_t i = 0; i < src->nbad; i++) pp_push_bad(c, dst, src->bad[i]);
    }
    pp_drop(src);
}

static pp_res pp_parse(pp_ctx *c, size_t id, size_t pos);

static pp_res pp_literal(pp_ctx *c, const peg_parser *p, size_t start)
{
    size_t pos = start;
    for (size_t i = 0; i < p->str.n; i++) {
        if (pos >= c->len) return c->lenient ? pp_mk(PEG_NEED_MORE, start, pos) : pp_mk(PEG_FAIL, start, start);
        if (c->in[pos] != p->str.s[i]) return pp_mk(PEG_FAIL, start, start);
        pos++;
    }
    return pp_mk(PEG_SUCCESS, start, pos);
}

static pp_res pp_sequence(pp_ctx *c, const peg_parser *p, size_t start)
{
    pp_res acc = pp_mk(PEG_SUCCESS, start, start);
    size_t pos = start;
    for (size_t i = 0; i < p->nkids; i++) {
        pp_res r = pp_parse(c, p->kids[i], pos);
        if (r.type == PEG_FAIL) {
            size_t end = r.end;
            pp_drop(&r);
            pp_drop(&acc);
            return pp_mk(PEG_FAIL, start, end);
        }
        size_t end = r.end;
        int type = r.type;
        pp_take(c, &acc, &r);
        if (type == PEG_NEED_MORE) {
            acc.type = PEG_NEED_MORE;
            acc.end = end;
            return acc;
        }
        pos = end;
    }
    acc.end = pos;
    return acc;
}

static pp_res pp_choice(pp_ctx *c, const peg_parser *p, size_t start)
{
    for (size_t i = 0; i < p->nkids; i++) {
        pp_res r = pp_parse(c, p->kids[i], start);
        if (r.type != PEG_FAIL) return r;
        pp_drop(&r);
    }
    return pp_mk(PEG_FAIL, start, start);
}

static pp_res pp_repetition(pp_ctx *c, const peg_parser *p, size_t start)
{
    pp_res acc = pp_mk(PEG_SUCCESS, start, start);
    size_t pos = start;
    int count = 0;
    while (p->max == -1 || count < p->max) {
        if (pos >= c->len) break;
        pp_res r = pp_parse(c, p->child, pos);
        if (r.type == PEG_SUCCESS) {
            if (r.end == pos) { pp_drop(&r); break; }
            pos = r.end;
            pp_take(c, &acc, &r);
            count++;
            continue;
        }
        if (r.type == PEG_NEED_MORE) {
            size_t end = r.end;
            pp_take(c, &acc, &r);
            acc.type = PEG_NEED_MORE;
            acc.end = end;
            return acc;
        }
        pp_drop(&r);
        break;
    }
    acc.end = pos;
    if (p->min > 0 && count < p->min) {
        if (pos >= c->len && c->lenient) { acc.type = PEG_NEED_MORE; return acc; }
        pp_drop(&acc);
        return pp_mk(PEG_FAIL, start, pos);
    }
    return acc;
}

static pp_res pp_chars(pp_ctx *c, const peg_parser *p, size_t start)
{
    size_t pos = start;
    int count = 0;
    while (p->max == -1 || count < p->max) {
        uint32_t cp;
        size_t used;
        int st = peg_utf8(c->in, c->len, pos, &cp, &used);
        if (st == 1) {
            if (count >= p->min) return pp_mk(PEG_SUCCESS, start, pos);
            return c->lenient ? pp_mk(PEG_NEED_MORE, start, pos) : pp_mk(PEG_FAIL, start, start);
        }
        if (st == 2) return count >= p->min ? pp_mk(PEG_SUCCESS, start, pos) : pp_mk(PEG_FAIL, start, start);
        int m = 0;
        for (size_t i = 0; i < p->nranges && !m; i++) m = cp >= p->ranges[i].start && cp <= p->ranges[i].end;
        if (p->negated) m = !m;
        if (!m) break;
        pos += used;
        count++;
    }
    if (count < p->min) {
        if (pos >= c->len && c->lenient) return pp_mk(PEG_NEED_MORE, start, pos);
        return pp_mk(PEG_FAIL, start, pos);
    }
    return pp_mk(PEG_SUCCESS, start, pos);
}

static int pp_hex(char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'); }

/* b11669's handle_escape_sequence: 0 ok (pos advanced), else the result to return */
static int pp_escape(pp_ctx *c, size_t *pos, char delim, pp_res *out, size_t start)
{
    size_t save = *pos;
    (*pos)++;
    if (*pos >= c->len) {
        if (!c->lenient) { *out = pp_mk(PEG_FAIL, start, start); return 1; }
        *out = pp_mk(PEG_NEED_MORE, start, save);
        return 1;
    }
    char ch = c->in[*pos];
    if (ch == delim || ch == '\\' || ch == '/' || ch == 'b' || ch == 'f' || ch == 'n' || ch == 'r' || ch == 't') { (*pos)++; return 0; }
    if (ch == 'u') {
        (*pos)++;
        for (int i = 0; i < 4; i++) {
            if (*pos >= c->len) {
                if (!c->lenient) { *out = pp_mk(PEG_FAIL, start, start); return 1; }
                *out = pp_mk(PEG_NEED_MORE, start, save);     /* the incomplete escape is suppressed */
                return 1;
            }
            if (!pp_hex(c->in[*pos])) { *out = pp_mk(PEG_FAIL, start, start); return 1; }
            (*pos)++;
        }
        return 0;
    }
    *out = pp_mk(PEG_FAIL, start, start);
    return 1;
}

static pp_res pp_string(pp_ctx *c, const peg_parser *p, size_t start)
{
    size_t pos = start;
    while (pos < c->len) {
        char ch = c->in[pos];
        if (ch == p->delim) return pp_mk(PEG_SUCCESS, start, pos);
        if (ch == '\\') {
            pp_res r;
            if (pp_escape(c, &pos, p->delim, &r, start)) return r;
        } else {
            uint32_t cp;
            size_t used;
            int st = peg_utf8(c->in, c->len, pos, &cp, &used);
            if (st == 1) return c->lenient ? pp_mk(PEG_NEED_MORE, start, pos) : pp_mk(PEG_FAIL, start, start);
            if (st == 2) return pp_mk(PEG_FAIL, start, start);
            pos += used;
        }
    }
    return c->lenient ? pp_mk(PEG_NEED_MORE, start, pos) : pp_mk(PEG_FAIL, start, pos);
}

static pp_res pp_until(pp_ctx *c, size_t id, const peg_parser *p, size_t start)
{
    if (!c->built[id]) {
        if (peg_trie_build(&c->tries[id], p->delims, p->ndelims)) { pp_oom(c); return pp_mk(PEG_FAIL, start, start); }
        c->built[id] = 1;
    }
    const peg_trie *t = &c->tries[id];
    pp_res r = pp_mk(PEG_SUCCESS, start, start);
    size_t pos = start, last = start;
    while (pos < c->len) {
        uint32_t cp;
        size_t used;
        int st = peg_utf8(c->in, c->len, pos, &cp, &used);
        if (st == 1 && c->lenient) { r.type = PEG_NEED_MORE; r.end = last; return r; }
        if (st != 0) {
            pp_push_bad(c, &r, (peg_bad_utf8){ pos, used });
            pos += used;
            last = pos;
            continue;
        }
        if (p->ndelims && peg_trie_check(t, c->in, c->len, pos) != 0) { r.end = pos; return r; }
        pos += used;
        last = pos;
    }
    r.end = last;
    if (last == c->len && c->lenient) r.type = PEG_NEED_MORE;
    return r;
}

static void pp_node(pp_ctx *c, const char *rule, const char *tag, pp_res *r)
{
    peg_ast *ast = c->ast;
    if (ast->n == ast->cap) {
        size_t cap = ast->cap ? ast->cap * 2 : 64;
        peg_ast_node *n = realloc(ast->nodes, cap * sizeof *n);
        if (!n) { pp_oom(c); return; }
        ast->nodes = n;
        ast->cap = cap;
    }
    peg_ast_node *nd = &ast->nodes[ast->n];
    memset(nd, 0, sizeof *nd);
    nd->rule = rule;
    nd->tag = tag;
    nd->start = r->start;
    nd->end = r->end;
    nd->partial = r->type == PEG_NEED_MORE;
    nd->kids = r->nodes;
    nd->nkids = r->nn;
    r->nodes = NULL;
    r->nn = r->ncap = 0;
    if (r->nbad) {
        nd->bad = malloc(r->nbad * sizeof *nd->bad);
        if (!nd->bad) { pp_oom(c); return; }
        memcpy(nd->bad, r->bad, r->nbad * sizeof *nd->bad);
        nd->nbad = r->nbad;
    }
    size_t id = ast->n++;
    pp_push_node(c, r, id);
}

static pp_res pp_parse(pp_ctx *c, size_t id, size_t pos)
{
    if (c->err) return pp_mk(PEG_FAIL, pos, pos);
    if (++c->depth > PEG_MAX_DEPTH) {
        c->err = "the answer nests deeper than the PEG parser's bound (PEG_MAX_DEPTH frames)";
        c->depth--;
        return pp_mk(PEG_FAIL, pos, pos);
    }
    const peg_parser *p = &c->a->p[id];
    pp_res r;
    switch (p->kind) {
    case PEG_EPSILON: r = pp_mk(PEG_SUCCESS, pos, pos); break;
    case PEG_START: r = pp_mk(pos == 0 ? PEG_SUCCESS : PEG_FAIL, pos, pos); break;
    case PEG_END: r = pp_mk(pos >= c->len ? PEG_SUCCESS : PEG_FAIL, pos, pos); break;
    case PEG_LITERAL: r = pp_literal(c, p, pos); break;
    case PEG_SEQUENCE: r = pp_sequence(c, p, pos); break;
    case PEG_CHOICE: r = pp_choice(c, p, pos); break;
    case PEG_REPETITION: r = pp_repetition(c, p, pos); break;
    case PEG_AND: {
        pp_res x = pp_parse(c, p->child, pos);
        r = pp_mk(x.type, pos, pos);
        pp_drop(&x);
        break;
    }
    case PEG_NOT: {
        pp_res x = pp_parse(c, p->child, pos);
        r = pp_mk(x.type == PEG_SUCCESS ? PEG_FAIL : x.type == PEG_NEED_MORE ? PEG_NEED_MORE : PEG_SUCCESS, pos, pos);
        pp_drop(&x);
        break;
    }
    case PEG_ANY: {
        uint32_t cp;
        size_t used;
        int st = peg_utf8(c->in, c->len, pos, &cp, &used);
        if (st == 1) r = pp_mk(c->lenient ? PEG_NEED_MORE : PEG_FAIL, pos, pos);
        else if (st == 2) r = pp_mk(PEG_FAIL, pos, pos);
        else r = pp_mk(PEG_SUCCESS, pos, pos + used);
        break;
    }
    case PEG_SPACE: {
        size_t e = pos;
        while (e < c->len && (c->in[e] == ' ' || (c->in[e] >= '\t' && c->in[e] <= '\r'))) e++;
        r = pp_mk(PEG_SUCCESS, pos, e);
        break;
    }
    case PEG_CHARS: r = pp_chars(c, p, pos); break;
    case PEG_STRING: r = pp_string(c, p, pos); break;
    case PEG_UNTIL: r = pp_until(c, id, p, pos); break;
    case PEG_RULE: case PEG_TAG:
        r = pp_parse(c, p->child, pos);
        if (r.type != PEG_FAIL) pp_node(c, p->kind == PEG_RULE ? p->str.s : "", p->kind == PEG_TAG ? p->str.s : "", &r);
        break;
    case PEG_REF: {
        size_t rid = peg_rule_id(c->a, p->str.s, p->str.n);
        if (rid == PEG_INVALID) { if (!c->err) c->err = "a ref names no rule"; r = pp_mk(PEG_FAIL, pos, pos); }
        else r = pp_parse(c, rid, pos);
        break;
    }
    case PEG_ATOMIC:
        r = pp_parse(c, p->child, pos);
        if (r.type == PEG_NEED_MORE) { free(r.nodes); r.nodes = NULL; r.nn = r.ncap = 0; }
        break;
    case PEG_SCHEMA: case PEG_GBNF: case PEG_AC: r = pp_parse(c, p->child, pos); break;
    default: r = pp_mk(PEG_FAIL, pos, pos); break;
    }
    c->depth--;
    return r;
}

int peg_parse(const peg_arena *a, const char *input, size_t len, size_t start, unsigned flags,
              peg_ast *ast, peg_result *res, char *err, size_t errlen)
{
    memset(ast, 0, sizeof *ast);
    memset(res, 0, sizeof *res);
    if (a->root == PEG_INVALID || a->root >= a->n) { snprintf(err, errlen, "No root parser set"); return -1; }
    pp_ctx c;
    memset(&c, 0, sizeof c);
    c.a = a;
    c.in = input;
    c.len = len;
    c.lenient = (flags & PEG_LENIENT) != 0;
    c.ast = ast;
    c.tries = calloc(a->n, sizeof *c.tries);
    c.built = calloc(a->n, 1);
    if (!c.tries || !c.built) {
        free(c.tries);
        free(c.built);
        snprintf(err, errlen, "out of memory while parsing");
        return -1;
    }
    pp_res r = pp_parse(&c, a->root, start);
    for (size_t i = 0; i < a->n; i++) if (c.built[i]) peg_trie_free(&c.tries[i]);
    free(c.tries);
    free(c.built);
    free(r.bad);
    if (c.err) {
        free(r.nodes);
        snprintf(err, errlen, "%s", c.err);
        return -1;
    }
    res->type = r.type;
    res->start = r.start;
    res->end = r.end;
    res->nodes = r.nodes;
    res->nnodes = r.nn;
    ast->mem = r.nodes;           /* freed with the AST */
    return 0;
}

void peg_ast_free(peg_ast *ast)
{
    for (size_t i = 0; i < ast->n; i++) {
        free(ast->nodes[i].kids);
        free(ast->nodes[i].bad);
    }
    free(ast->nodes);
    free(ast->mem);
    memset(ast, 0, sizeof *ast);
}

void peg_node_text(const peg_ast_node *nd, const char *input, jbuf *out)
{
    size_t seg = nd->start;
    for (size_t i = 0; i < nd->nbad; i++) {
        if (nd->bad[i].pos > seg) jbuf_put(out, input + seg, nd->bad[i].pos - seg);
        jbuf_put(out, "\xEF\xBF\xBD", 3);
        seg = nd->bad[i].pos + nd->bad[i].len;
    }
    if (nd->end > seg) jbuf_put(out, input + seg, nd->end - seg);
}
