/*
 * peg_grammar.c -- common_peg_arena::build_grammar of b11669 (see
 * peg_grammar.h).
 */
#include "sampling/peg_grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampling/json_schema.h"

typedef struct {
    const peg_arena *a;
    gbnf_builder *b;
    int code;                   /* JSON_SCHEMA_OK until a step fails */
    jbuf why;
    unsigned char *reach;       /* per rule entry: reachable */
    unsigned char *visited;     /* per parser id (rules): visited */
    int depth;
} pgm;

static void pgm_fail(pgm *g, int code, const char *msg, size_t n)
{
    if (g->code != JSON_SCHEMA_OK) return;
    g->code = code;
    jbuf_reset(&g->why);
    jbuf_put(&g->why, msg, n);
}

static const peg_parser *pgm_at(pgm *g, size_t id)
{
    if (id >= g->a->n) { pgm_fail(g, JSON_SCHEMA_LIMIT, "the PEG arena refers to a parser it does not have", 48); return NULL; }
    return &g->a->p[id];
}

static int pgm_schema_delegates(pgm *g, const peg_parser *p)
{
    if (!p->schema.s) return 1;
    if (!p->flag) return 0;
    char err[128];
    json_value *v = json_parse(p->schema.s, p->schema.n, err, sizeof err);
    if (!v) { pgm_fail(g, JSON_SCHEMA_LIMIT, err, strlen(err)); return 1; }
    int may = 0;
    json_schema_may_be_string(v, &may);
    json_free(v);
    return may;
}

/* effective_parser: through tag, atomic and delegating schema parsers */
static peg_kind pgm_effective(pgm *g, size_t id)
{
    for (int guard = 0; guard < 100000; guard++) {
        const peg_parser *p = pgm_at(g, id);
        if (!p) return PEG_EPSILON;
        if (p->kind == PEG_TAG || p->kind == PEG_ATOMIC) id = p->child;
        else if (p->kind == PEG_SCHEMA && pgm_schema_delegates(g, p)) id = p->child;
        else return p->kind;
    }
    return PEG_EPSILON;
}

static void pgm_class_char(jbuf *o, uint32_t c)
{
    static const char hex[] = "0123456789ABCDEF";
    if (c == '-' || c == ']' || c == '[' || c == '\\') { jbuf_putc(o, '\\'); jbuf_putc(o, (char)c); return; }
    if (c == '\n') { jbuf_puts(o, "\\n"); return; }
    if (c == '\t') { jbuf_puts(o, "\\t"); return; }
    if (c == '\r') { jbuf_puts(o, "\\r"); return; }
    if (c >= 0x20 && c <= 0x7E) { jbuf_putc(o, (char)c); return; }
    int digits = c <= 0xFF ? 2 : c <= 0xFFFF ? 4 : 8;
    jbuf_puts(o, digits == 2 ? "\\x" : digits == 4 ? "\\u" : "\\U");
    for (int i = digits - 1; i >= 0; i--) jbuf_putc(o, hex[(c >> (i * 4)) & 0xF]);
}

static void pgm_class(jbuf *o, const uint32_t *cs, size_t n, int negate)
{
    jbuf_puts(o, negate ? "[^" : "[");
    for (size_t i = 0; i < n; i++) pgm_class_char(o, cs[i]);
    jbuf_putc(o, ']');
}

static void pgm_state_name(jbuf *o, const char *prefix, size_t s)
{
    jbuf_puts(o, prefix);
    if (s == 0) return;
    jbuf_printf(o, s < 10 ? "-0%zu" : "-%zu", s);
}

/* gbnf_ac_grammar with the excluding (until) or including (ac) rule bodies */
static void pgm_ac(pgm *g, const char *prefix, const peg_str *words, size_t n, int including, jbuf *out)
{
    peg_trie t;
    if (peg_trie_build(&t, words, n) || peg_ac_build(&t)) {
        peg_trie_free(&t);
        pgm_fail(g, JSON_SCHEMA_LIMIT, "out of memory", 13);
        return;
    }
    size_t ns = t.nstates;
    size_t *dest = malloc((t.nalpha ? t.nalpha : 1) * sizeof *dest);
    uint32_t *tmp = malloc((t.nalpha ? t.nalpha : 1) * sizeof *tmp);
    unsigned char *used = malloc(t.nalpha ? t.nalpha : 1);
    jbuf rhs, name;
    jbuf_init(&rhs);
    jbuf_init(&name);
    if (!dest || !tmp || !used) pgm_fail(g, JSON_SCHEMA_LIMIT, "out of memory", 13);
    for (size_t q = 0; q < ns && dest && tmp && used && g->code == JSON_SCHEMA_OK; q++) {
        if (t.match[q] >= 0) continue;
        size_t ncomp = 0, nspec = 0;
        for (size_t i = 0; i < t.nalpha; i++) dest[i] = peg_ac_next(&t, q, t.alphabet[i]);
        jbuf_reset(&rhs);
        /* completing chars (dest terminal), then buckets by destination state, ascending */
        for (size_t i = 0; i < t.nalpha; i++) if (t.match[dest[i]] >= 0) tmp[ncomp++] = t.alphabet[i];
        int first = 1;
        if (including && ncomp) { pgm_class(&rhs, tmp, ncomp, 0); first = 0; }
        if (!including) jbuf_putc(&rhs, '|');
        memset(used, 0, t.nalpha);
        for (;;) {
            size_t best = 0;
            int found = 0;
            for (size_t i = 0; i < t.nalpha; i++)
                if (!used[i] && dest[i] != 0 && t.match[dest[i]] < 0 && (!found || dest[i] < best)) { best = dest[i]; found = 1; }
            if (!found) break;
            size_t k = 0;
            for (size_t i = 0; i < t.nalpha; i++) if (!used[i] && dest[i] == best) { tmp[k++] = t.alphabet[i]; used[i] = 1; }
            if (including) {
                if (!first) jbuf_puts(&rhs, " | ");
                pgm_class(&rhs, tmp, k, 0);
                jbuf_putc(&rhs, ' ');
                pgm_state_name(&rhs, prefix, best);
                first = 0;
            } else {
                jbuf_putc(&rhs, ' ');
                pgm_class(&rhs, tmp, k, 0);
                jbuf_putc(&rhs, ' ');
                pgm_state_name(&rhs, prefix, best);
                jbuf_puts(&rhs, " |");
            }
        }
        for (size_t i = 0; i < t.nalpha; i++) if (dest[i] != 0 || t.match[dest[i]] >= 0) tmp[nspec++] = t.alphabet[i];
        if (including) { if (!first) jbuf_puts(&rhs, " | "); }
        else jbuf_putc(&rhs, ' ');
        pgm_class(&rhs, tmp, nspec, 1);
        jbuf_putc(&rhs, ' ');
        pgm_state_name(&rhs, prefix, 0);
        jbuf_reset(&name);
        pgm_state_name(&name, prefix, q);
        if (gbnf_builder_add_rule(g->b, name.p, name.len, rhs.p, rhs.len, NULL)) pgm_fail(g, JSON_SCHEMA_LIMIT, "out of memory", 13);
    }
    if (g->code == JSON_SCHEMA_OK && t.match[0] >= 0)
        if (gbnf_builder_add_rule(g->b, prefix, strlen(prefix), "|", 1, NULL)) pgm_fail(g, JSON_SCHEMA_LIMIT, "out of memory", 13);
    jbuf_puts(out, prefix);
    free(dest);
    free(tmp);
    free(used);
    jbuf_free(&rhs);
    jbuf_free(&name);
    peg_trie_free(&t);
}

static void pgm_suffix(jbuf *o, int min, int max)
{
    if (min == 0 && max == 1) jbuf_putc(o, '?');
    else if (min == 0 && max == -1) jbuf_putc(o, '*');
    else if (min == 1 && max == -1) jbuf_putc(o, '+');
    else if (max == -1) jbuf_printf(o, "{%d,}", min);
    else if (min == max) { if (min != 1) jbuf_printf(o, "{%d}", min); }
    else jbuf_printf(o, "{%d,%d}", min, max);
}

static void pgm_gbnf(pgm *g, size_t id, jbuf *out);

static void pgm_child_into(pgm *g, size_t child, jbuf *out, int wrap_seq)
{
    jbuf c;
    jbuf_init(&c);
    pgm_gbnf(g, child, &c);
    peg_kind k = pgm_effective(g, child);
    int wrap = k == PEG_CHOICE || (wrap_seq && k == PEG_SEQUENCE);
    if (wrap) jbuf_putc(out, '(');
    jbuf_put(out, c.p ? c.p : "", c.len);
    if (wrap) jbuf_putc(out, ')');
    jbuf_free(&c);
}

static void pgm_gbnf(pgm *g, size_t id, jbuf *out)
{
    const peg_parser *p = pgm_at(g, id);
    if (!p || g->code != JSON_SCHEMA_OK) return;
    if (++g->depth > PEG_MAX_DEPTH) {
        pgm_fail(g, JSON_SCHEMA_LIMIT, "the PEG arena nests deeper than PEG_MAX_DEPTH", 45);
        g->depth--;
        return;
    }
    char prefix[48];
    switch (p->kind) {
    case PEG_LITERAL: gbnf_format_literal(out, p->str.s, p->str.n); break;
    case PEG_SEQUENCE: {
        int any = 0;
        for (size_t i = 0; i < p->nkids; i++) {
            jbuf c;
            jbuf_init(&c);
            pgm_gbnf(g, p->kids[i], &c);
            if (c.len) {
                if (any) jbuf_putc(out, ' ');
                peg_kind k = pgm_effective(g, p->kids[i]);
                int wrap = k == PEG_CHOICE || k == PEG_SEQUENCE;
                if (wrap) jbuf_putc(out, '(');
                jbuf_put(out, c.p, c.len);
                if (wrap) jbuf_putc(out, ')');
                any = 1;
            }
            jbuf_free(&c);
        }
        break;
    }
    case PEG_CHOICE:
        for (size_t i = 0; i < p->nkids; i++) {
            if (i) jbuf_puts(out, " | ");
            pgm_child_into(g, p->kids[i], out, 0);
        }
        break;
    case PEG_REPETITION:
        pgm_child_into(g, p->child, out, 1);
        pgm_suffix(out, p->min, p->max);
        break;
    case PEG_ANY: jbuf_putc(out, '.'); break;
    case PEG_SPACE: jbuf_puts(out, "space"); break;
    case PEG_CHARS:
        jbuf_put(out, p->str.s, p->str.n);
        pgm_suffix(out, p->min, p->max);
        break;
    case PEG_STRING:
        jbuf_puts(out, "( [^");
        jbuf_putc(out, p->delim);
        jbuf_puts(out, "\\\\] | \"\\\\\" ( [");
        jbuf_putc(out, p->delim);
        jbuf_puts(out, "\\\\/ bfnrt] | \"u\" [0-9a-fA-F]{4} ) )*");
        break;
    case PEG_UNTIL:
        if (!p->ndelims) { jbuf_puts(out, ".*"); break; }
        snprintf(prefix, sizeof prefix, "until-%zu", id);
        pgm_ac(g, prefix, p->delims, p->ndelims, 0, out);
        break;
    case PEG_AC:
        snprintf(prefix, sizeof prefix, "ac-%zu", id);
        pgm_ac(g, prefix, p->delims, p->ndelims, 1, out);
        break;
    case PEG_SCHEMA:
        if (pgm_schema_delegates(g, p)) { pgm_gbnf(g, p->child, out); break; }
        {
            char err[128];
            json_value *v = json_parse(p->schema.s, p->schema.n, err, sizeof err);
            if (!v) { pgm_fail(g, JSON_SCHEMA_LIMIT, err, strlen(err)); break; }
            jbuf r;
            jbuf_init(&r);
            int code = gbnf_builder_add_schema(g->b, p->str.s, p->str.n, v, &r);
            if (code != JSON_SCHEMA_OK) pgm_fail(g, code, r.p ? r.p : "", r.len);
            else jbuf_put(out, r.p ? r.p : "", r.len);
            jbuf_free(&r);
            json_free(v);
        }
        break;
    case PEG_RULE: case PEG_REF: jbuf_put(out, p->str.s, p->str.n); break;
    case PEG_TAG: case PEG_ATOMIC: pgm_gbnf(g, p->child, out); break;
    case PEG_GBNF: jbuf_put(out, p->str.s, p->str.n); break;
    default: break;           /* epsilon, start, end, and, not: nothing */
    }
    g->depth--;
}

static size_t pgm_rule_index(const peg_arena *a, const char *name, size_t n)
{
    for (size_t i = 0; i < a->nrules; i++)
        if (a->rules[i].name.n == n && memcmp(a->rules[i].name.s, name, n) == 0) return i;
    return PEG_INVALID;
}

/* collect_reachable_rules from id: marks rule entries by their parsers' names */
static void pgm_reach(pgm *g, size_t id, int depth)
{
    const peg_parser *p = pgm_at(g, id);
    if (!p) return;
    if (depth > PEG_MAX_DEPTH) { pgm_fail(g, JSON_SCHEMA_LIMIT, "the PEG arena nests deeper than PEG_MAX_DEPTH", 45); return; }
    switch (p->kind) {
    case PEG_SEQUENCE: case PEG_CHOICE:
        for (size_t i = 0; i < p->nkids; i++) pgm_reach(g, p->kids[i], depth + 1);
        break;
    case PEG_REPETITION: case PEG_AND: case PEG_NOT: case PEG_TAG: case PEG_ATOMIC: case PEG_GBNF: case PEG_AC: case PEG_SCHEMA:
        pgm_reach(g, p->child, depth + 1);
        break;
    case PEG_RULE: {
        size_t ri = pgm_rule_index(g->a, p->str.s, p->str.n);
        if (g->visited[id]) break;
        g->visited[id] = 1;
        /* visited is by name in b11669: one visit per name */
        for (size_t i = 0; i < g->a->n; i++)
            if (g->a->p[i].kind == PEG_RULE && g->a->p[i].str.n == p->str.n && memcmp(g->a->p[i].str.s, p->str.s, p->str.n) == 0) g->visited[i] = 1;
        if (ri != PEG_INVALID) g->reach[ri] = 1;
        pgm_reach(g, p->child, depth + 1);
        break;
    }
    case PEG_REF: {
        size_t rid = peg_rule_id(g->a, p->str.s, p->str.n);
        if (rid == PEG_INVALID) pgm_fail(g, JSON_SCHEMA_LIMIT, "Rule not found (a ref names no rule)", 36);
        else pgm_reach(g, rid, depth + 1);
        break;
    }
    default: break;
    }
}

static int pgm_cmp(const void *x, const void *y)
{
    const peg_str *a = *(const peg_str *const *)x, *b = *(const peg_str *const *)y;
    size_t n = a->n < b->n ? a->n : b->n;
    int c = memcmp(a->s, b->s, n);
    return c ? c : (a->n < b->n ? -1 : a->n > b->n);
}

static void pgm_run(pgm *g, int lazy)
{
    const peg_arena *a = g->a;
    if (lazy) {
        for (size_t i = 0; i < a->nrules; i++) {
            const peg_parser *p = pgm_at(g, a->rules[i].id);
            if (p && p->kind == PEG_RULE && p->flag) {
                g->reach[i] = 1;
                memset(g->visited, 0, a->n);     /* a fresh collect_reachable_rules per trigger */
                pgm_reach(g, a->rules[i].id, 0);
            }
        }
    } else if (a->root != PEG_INVALID) {
        pgm_reach(g, a->root, 0);
    }
    jbuf body;
    jbuf_init(&body);
    for (size_t i = 0; i < a->nrules && g->code == JSON_SCHEMA_OK; i++) {
        if (!g->reach[i]) continue;
        const peg_parser *p = pgm_at(g, a->rules[i].id);
        if (!p || p->kind != PEG_RULE) continue;
        jbuf_reset(&body);
        pgm_gbnf(g, p->child, &body);
        if (gbnf_builder_add_rule(g->b, p->str.s, p->str.n, body.p ? body.p : "", body.len, NULL)) pgm_fail(g, JSON_SCHEMA_LIMIT, "out of memory", 13);
    }
    jbuf_reset(&body);
    if (lazy) {
        const peg_str **names = malloc((a->nrules ? a->nrules : 1) * sizeof *names);
        size_t k = 0;
        if (!names) { pgm_fail(g, JSON_SCHEMA_LIMIT, "out of memory", 13); jbuf_free(&body); return; }
        for (size_t i = 0; i < a->nrules; i++) {
            const peg_parser *p = pgm_at(g, a->rules[i].id);
            if (p && p->kind == PEG_RULE && p->flag) names[k++] = &p->str;
        }
        qsort(names, k, sizeof *names, pgm_cmp);
        for (size_t i = 0; i < k; i++) {
            if (i) jbuf_puts(&body, " | ");
            jbuf_put(&body, names[i]->s, names[i]->n);
        }
        free(names);
        if (g->code == JSON_SCHEMA_OK && gbnf_builder_add_rule(g->b, "root", 4, body.p ? body.p : "", body.len, NULL))
            pgm_fail(g, JSON_SCHEMA_LIMIT, "out of memory", 13);
    } else if (a->root != PEG_INVALID && g->code == JSON_SCHEMA_OK) {
        pgm_gbnf(g, a->root, &body);
        if (g->code == JSON_SCHEMA_OK && gbnf_builder_add_rule(g->b, "root", 4, body.p ? body.p : "", body.len, NULL))
            pgm_fail(g, JSON_SCHEMA_LIMIT, "out of memory", 13);
    }
    jbuf_free(&body);
}

int peg_build_grammar(const peg_arena *a, int lazy, char **out, size_t *out_len)
{
    pgm g;
    memset(&g, 0, sizeof g);
    g.a = a;
    g.code = JSON_SCHEMA_OK;
    jbuf_init(&g.why);
    *out = NULL;
    if (out_len) *out_len = 0;
    g.b = gbnf_builder_new();
    g.reach = calloc(a->nrules ? a->nrules : 1, 1);
    g.visited = calloc(a->n ? a->n : 1, 1);
    if (!g.b || !g.reach || !g.visited) pgm_fail(&g, JSON_SCHEMA_LIMIT, "out of memory", 13);
    else pgm_run(&g, lazy);
    int code = g.code;
    if (code == JSON_SCHEMA_OK) {
        code = gbnf_builder_finish(g.b, out, out_len);
    } else {
        char *d = malloc(g.why.len + 1);
        if (d) {
            memcpy(d, g.why.p ? g.why.p : "", g.why.len);
            d[g.why.len] = 0;
            *out = d;
            if (out_len) *out_len = g.why.len;
        }
    }
    gbnf_builder_free(g.b);
    free(g.reach);
    free(g.visited);
    jbuf_free(&g.why);
    return code;
}
