/*
 * grammar.c -- GBNF grammars, parsed and applied as llama.cpp b11669's
 * src/llama-grammar.cpp does (see grammar.h). The parser follows
 * llama_grammar_parser step for step (its symbol table's std::map
 * semantics included: a generated name that collides with a user's takes
 * its id over), because the rules it builds, in their order, are the
 * automaton; the automaton keeps llama.cpp's stacks, built and deduplicated
 * in llama.cpp's order.
 *
 * The one liberty: gr_apply rejects a candidate whose first code point no
 * stack's top accepts without walking the stacks (llama.cpp walks every
 * stack for every candidate); such a candidate is rejected by every stack
 * in llama.cpp too, so the result is the same.
 */
#include "sampling/grammar.h"
#include "sampling/regex.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

/* ====================================================================== */
/* growable arrays                                                        */
/* ====================================================================== */

typedef struct {
    gr_elem *e;
    size_t n, cap;
} gr_rulebuf;

static int gr_rb_push(gr_rulebuf *r, uint32_t type, uint32_t value)
{
    if (r->n == r->cap && bk_grow((void **)&r->e, &r->cap, r->n + 1, sizeof *r->e)) return -1;
    r->e[r->n].type = type;
    r->e[r->n].value = value;
    r->n++;
    return 0;
}

static int gr_rb_append(gr_rulebuf *r, const gr_elem *e, size_t n)
{
    if (r->n + n > r->cap && bk_grow((void **)&r->e, &r->cap, r->n + n, sizeof *r->e)) return -1;
    if (n) memcpy(r->e + r->n, e, n * sizeof *e);
    r->n += n;
    return 0;
}

/* ====================================================================== */
/* the parser (llama_grammar_parser)                                      */
/* ====================================================================== */

#define GR_MAX_NESTING 512      /* groups inside groups: the parser recurses */
#define GR_MAX_LR_DEPTH 4096    /* rule chains the left-recursion walk follows */
#define GR_MAX_ELEMS ((size_t)1 << 24)   /* elements in all rules: llama.cpp stops only at std::bad_alloc */

typedef struct {
    char *name;
    size_t len;
    uint32_t id;
} gr_sym;

typedef struct {
    const gr_tokenizer *tk;
    gr_sym *syms;               /* symbol_ids, in insertion order */
    size_t n_syms, cap_syms;
    size_t *hash;               /* open addressing over syms (index + 1, 0 empty) */
    size_t hash_cap;
    gr_rulebuf *rules;          /* rules[id]; an empty one is undefined */
    size_t n_rules, cap_rules;
    int depth;
    size_t n_elems;             /* elements added to rules so far */
    int failed;
    char *err;
    size_t errlen;
} gr_parser;

struct gr_grammar {
    gr_elem *elems;             /* every rule, one after another */
    size_t *off;                /* rule i starts at elems + off[i] */
    size_t n_rules;
    uint32_t root;
};

static void gr_fail(gr_parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void gr_fail(gr_parser *p, const char *fmt, ...)
{
    if (p->failed) return;
    p->failed = 1;
    if (!p->err || !p->errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, p->errlen, fmt, ap);
    va_end(ap);
}

static void gr_oom(gr_parser *p) { gr_fail(p, "out of memory"); }

static uint64_t gr_fnv(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

/* The symbol named s[0..n), or NULL. */
static gr_sym *gr_sym_find(gr_parser *p, const char *s, size_t n)
{
    if (!p->hash_cap) return NULL;
    size_t mask = p->hash_cap - 1;
    for (size_t h = (size_t)gr_fnv(s, n) & mask;; h = (h + 1) & mask) {
        size_t k = p->hash[h];
        if (!k) return NULL;
        gr_sym *y = &p->syms[k - 1];
        if (y->len == n && !memcmp(y->name, s, n)) return y;
    }
}

static int gr_sym_add(gr_parser *p, const char *s, size_t n, uint32_t id)
{
    if ((p->n_syms + 1) * 2 > p->hash_cap) {
        size_t nc = p->hash_cap ? p->hash_cap * 2 : 64;
        size_t *nh = calloc(nc, sizeof *nh);
        if (!nh) return -1;
        for (size_t i = 0; i < p->n_syms; i++) {
            size_t h = (size_t)gr_fnv(p->syms[i].name, p->syms[i].len) & (nc - 1);
            while (nh[h]) h = (h + 1) & (nc - 1);
            nh[h] = i + 1;
        }
        free(p->hash);
        p->hash = nh;
        p->hash_cap = nc;
    }
    if (p->n_syms == p->cap_syms && bk_grow((void **)&p->syms, &p->cap_syms, p->n_syms + 1, sizeof *p->syms))
        return -1;
    char *name = malloc(n + 1);
    if (!name) return -1;
    memcpy(name, s, n);
    name[n] = 0;
    p->syms[p->n_syms] = (gr_sym){name, n, id};
    size_t h = (size_t)gr_fnv(s, n) & (p->hash_cap - 1);
    while (p->hash[h]) h = (h + 1) & (p->hash_cap - 1);
    p->hash[h] = ++p->n_syms;
    return 0;
}

/* get_symbol_id: symbol_ids.emplace(name, size()) -> the id it holds. */
static uint32_t gr_symbol_id(gr_parser *p, const char *s, size_t n)
{
    gr_sym *y = gr_sym_find(p, s, n);
    if (y) return y->id;
    uint32_t id = (uint32_t)p->n_syms;
    if (gr_sym_add(p, s, n, id)) gr_oom(p);
    return id;
}

/* generate_symbol_id: symbol_ids[base + '_' + size()] = size(); a name
 * already there is given the new id (and the table does not grow). */
static uint32_t gr_generate_id(gr_parser *p, const char *base, size_t bn)
{
    uint32_t id = (uint32_t)p->n_syms;
    char suffix[24];
    int sl = snprintf(suffix, sizeof suffix, "_%u", id);
    char *name = malloc(bn + (size_t)sl + 1);
    if (!name) {
        gr_oom(p);
        return id;
    }
    memcpy(name, base, bn);
    memcpy(name + bn, suffix, (size_t)sl + 1);
    gr_sym *y = gr_sym_find(p, name, bn + (size_t)sl);
    if (y) y->id = id;
    else if (gr_sym_add(p, name, bn + (size_t)sl, id)) gr_oom(p);
    free(name);
    return id;
}

/* add_rule: rules.resize(id + 1) when needed, rules[id] = rule. */
static void gr_add_rule(gr_parser *p, uint32_t id, const gr_rulebuf *rule)
{
    if (p->failed) return;
    if ((size_t)id >= p->n_rules) {
        if ((size_t)id + 1 > p->cap_rules &&
            bk_grow((void **)&p->rules, &p->cap_rules, (size_t)id + 1, sizeof *p->rules)) {
            gr_oom(p);
            return;
        }
        memset(p->rules + p->n_rules, 0, ((size_t)id + 1 - p->n_rules) * sizeof *p->rules);
        p->n_rules = (size_t)id + 1;
    }
    gr_rulebuf *dst = &p->rules[id];
    p->n_elems += rule->n;
    if (p->n_elems > GR_MAX_ELEMS) {
        gr_fail(p, "the rules would hold more than %zu elements, which bankML does not build", GR_MAX_ELEMS);
        return;
    }
    dst->n = 0;
    if (gr_rb_append(dst, rule->e, rule->n)) gr_oom(p);
}

static int gr_is_digit(char c) { return c >= '0' && c <= '9'; }
static int gr_is_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || gr_is_digit(c);
}

/* decode_utf8 for the grammar's own text: the length from the first byte's
 * high bits (a stray continuation byte counts as one), no check of the
 * bytes that follow, stopping at a NUL. */
static const char *gr_decode_one(const char *src, uint32_t *cp)
{
    static const int lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    uint8_t first = (uint8_t)*src;
    int len = lookup[first >> 4];
    uint8_t mask = (uint8_t)((1 << (8 - len)) - 1);
    uint32_t value = first & mask;
    const char *end = src + len;
    const char *pos = src + 1;
    for (; pos < end && *pos; pos++) value = (value << 6) + ((uint8_t)*pos & 0x3F);
    *cp = value;
    return pos;
}

static const char *gr_parse_space(const char *src, int newline_ok)
{
    const char *pos = src;
    while (*pos == ' ' || *pos == '\t' || *pos == '#' || (newline_ok && (*pos == '\r' || *pos == '\n'))) {
        if (*pos == '#')
            while (*pos && *pos != '\r' && *pos != '\n') pos++;
        else
            pos++;
    }
    return pos;
}

static const char *gr_parse_name(gr_parser *p, const char *src)
{
    const char *pos = src;
    while (gr_is_word(*pos)) pos++;
    if (pos == src) {
        gr_fail(p, "expecting name at %s", src);
        return NULL;
    }
    return pos;
}

static const char *gr_parse_int(gr_parser *p, const char *src)
{
    const char *pos = src;
    while (gr_is_digit(*pos)) pos++;
    if (pos == src) {
        gr_fail(p, "expecting integer at %s", src);
        return NULL;
    }
    return pos;
}

/* std::stoull over digits s[0..n): -1 when it is out of range (stoul and
 * stoull throw std::out_of_range there). */
static int gr_stoull(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static const char *gr_parse_hex(gr_parser *p, const char *src, int size, uint32_t *out)
{
    const char *pos = src;
    const char *end = src + size;
    uint32_t value = 0;
    for (; pos < end && *pos; pos++) {
        value <<= 4;
        char c = *pos;
        if (c >= 'a' && c <= 'f') value += (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') value += (uint32_t)(c - 'A' + 10);
        else if (c >= '0' && c <= '9') value += (uint32_t)(c - '0');
        else break;
    }
    if (pos != end) {
        gr_fail(p, "expecting %d hex chars at %s", size, src);
        return NULL;
    }
    *out = value;
    return pos;
}

static const char *gr_parse_char(gr_parser *p, const char *src, uint32_t *out)
{
    if (*src == '\\') {
        switch (src[1]) {
        case 'x': return gr_parse_hex(p, src + 2, 2, out);
        case 'u': return gr_parse_hex(p, src + 2, 4, out);
        case 'U': return gr_parse_hex(p, src + 2, 8, out);
        case 't': *out = '\t'; return src + 2;
        case 'r': *out = '\r'; return src + 2;
        case 'n': *out = '\n'; return src + 2;
        case '\\': case '"': case '[': case ']': case '-':
            *out = (uint32_t)(unsigned char)src[1];
            return src + 2;
        default:
            gr_fail(p, "unknown escape at %s", src);
            return NULL;
        }
    } else if (*src) {
        return gr_decode_one(src, out);
    }
    gr_fail(p, "unexpected end of input");
    return NULL;
}

/* parse_token: <[id]> or <piece> (exactly one token, specials parsed). */
static const char *gr_parse_token(gr_parser *p, const char *src, uint32_t *out)
{
    const char *pos = src;
    if (*pos != '<') {
        gr_fail(p, "expecting '<' at %s", pos);
        return NULL;
    }
    pos++;
    if (*pos == '[') {
        pos++;
        const char *int_end = gr_parse_int(p, pos);
        if (!int_end) return NULL;
        uint64_t v;
        if (gr_stoull(pos, (size_t)(int_end - pos), &v)) {
            gr_fail(p, "stoul");
            return NULL;
        }
        pos = int_end;
        if (*pos != ']') {
            gr_fail(p, "expecting ']' at %s", pos);
            return NULL;
        }
        pos++;
        if (*pos != '>') {
            gr_fail(p, "expecting '>' at %s", pos);
            return NULL;
        }
        *out = (uint32_t)v;
        return pos + 1;
    }
    if (!p->tk || !p->tk->tokenize) {
        gr_fail(p, "no vocab to parse token at %s", src);
        return NULL;
    }
    while (*pos != 0 && *pos != '>') pos++;
    if (*pos != '>') {
        gr_fail(p, "expecting '>' at %s", pos);
        return NULL;
    }
    pos++;
    int32_t *ids = NULL;
    size_t n = 0;
    if (p->tk->tokenize(p->tk->ctx, src, (size_t)(pos - src), &ids, &n) != 0) n = 0;
    uint32_t id = n ? (uint32_t)ids[0] : 0;
    free(ids);
    if (n != 1) {
        gr_fail(p, "invalid token '%.*s'", (int)(pos - src), src);
        return NULL;
    }
    *out = id;
    return pos;
}

static const char *gr_parse_alternates(gr_parser *p, const char *src, const char *rname, size_t rlen,
                                       uint32_t rule_id, int nested);

/* handle_repetitions: the last symbol (rule[last..]) repeated min..max
 * times (max UINT64_MAX: no bound) by llama.cpp's rewrite into S' rules. */
static void gr_repeat(gr_parser *p, gr_rulebuf *rule, size_t last, uint64_t *n_prev, const char *pos,
                      const char *rname, size_t rlen, uint64_t min_t, uint64_t max_t)
{
    int no_max = max_t == UINT64_MAX;
    if (last == rule->n) {
        gr_fail(p, "expecting preceding item to */+/?/{ at %s", pos);
        return;
    }
    uint64_t total = 1;
    if (!no_max && max_t > 0) total = max_t;
    else if (min_t > 0) total = min_t;
    if (*n_prev * total > GR_MAX_REPETITION) {
        gr_fail(p, "number of rules that are going to be repeated multiplied by the new repetition exceeds sane "
                   "defaults, please reduce the number of repetitions or rule complexity");
        return;
    }
    size_t plen = rule->n - last;
    if (!no_max && max_t < min_t) {
        /* max - min wraps around: llama.cpp builds rules until std::bad_alloc
         * (measured: 400 "failed to parse grammar" after ~10 s under 3 GB) */
        gr_fail(p, "a repetition {%llu,%llu} has its maximum below its minimum: llama.cpp expands it until it "
                   "runs out of memory", (unsigned long long)min_t, (unsigned long long)max_t);
        return;
    }
    if (rule->n + plen * (min_t ? min_t - 1 : 0) > GR_MAX_ELEMS) {
        gr_fail(p, "the rules would hold more than %zu elements, which bankML does not build", GR_MAX_ELEMS);
        return;
    }
    gr_elem *prev = malloc(plen * sizeof *prev);
    gr_rulebuf rec = {0};
    if (!prev) goto oom;
    memcpy(prev, rule->e + last, plen * sizeof *prev);
    if (min_t == 0) {
        rule->n = last;
    } else {
        for (uint64_t i = 1; i < min_t; i++)
            if (gr_rb_append(rule, prev, plen)) goto oom;
    }
    uint32_t last_rec = 0;
    uint64_t n_opt = no_max ? 1 : max_t - min_t;
    if (gr_rb_append(&rec, prev, plen)) goto oom;
    for (uint64_t i = 0; i < n_opt && !p->failed; i++) {
        rec.n = plen;
        uint32_t rec_id = gr_generate_id(p, rname, rlen);
        if ((i > 0 || no_max) && gr_rb_push(&rec, GR_RULE_REF, no_max ? rec_id : last_rec)) goto oom;
        if (gr_rb_push(&rec, GR_ALT, 0) || gr_rb_push(&rec, GR_END, 0)) goto oom;
        gr_add_rule(p, rec_id, &rec);
        last_rec = rec_id;
    }
    if (n_opt > 0 && gr_rb_push(rule, GR_RULE_REF, last_rec)) goto oom;
    *n_prev *= total;
    free(prev);
    free(rec.e);
    return;
oom:
    free(prev);
    free(rec.e);
    gr_oom(p);
}

/* {m}, {m,}, {m,n}: pos is past the '{'. */
static const char *gr_parse_braces(gr_parser *p, const char *pos, int nested, uint64_t *min_t, uint64_t *max_t)
{
    pos = gr_parse_space(pos, nested);
    if (!gr_is_digit(*pos)) {
        gr_fail(p, "expecting an int at %s", pos);
        return NULL;
    }
    const char *int_end = gr_parse_int(p, pos);
    if (gr_stoull(pos, (size_t)(int_end - pos), min_t)) {
        gr_fail(p, "stoull");
        return NULL;
    }
    pos = gr_parse_space(int_end, nested);
    *max_t = UINT64_MAX;
    if (*pos == '}') {
        *max_t = *min_t;
        pos = gr_parse_space(pos + 1, nested);
    } else if (*pos == ',') {
        pos = gr_parse_space(pos + 1, nested);
        if (gr_is_digit(*pos)) {
            int_end = gr_parse_int(p, pos);
            if (gr_stoull(pos, (size_t)(int_end - pos), max_t)) {
                gr_fail(p, "stoull");
                return NULL;
            }
            pos = gr_parse_space(int_end, nested);
        }
        if (*pos != '}') {
            gr_fail(p, "expecting '}' at %s", pos);
            return NULL;
        }
        pos = gr_parse_space(pos + 1, nested);
    } else {
        gr_fail(p, "expecting ',' at %s", pos);
        return NULL;
    }
    if (*min_t > GR_MAX_REPETITION) {
        gr_fail(p, "number of repetitions exceeds sane defaults, please reduce the number of repetitions");
        return NULL;
    }
    if (*max_t != UINT64_MAX && *max_t > GR_MAX_REPETITION) *max_t = UINT64_MAX;
    return pos;
}

/* A literal "..." (pos at the quote) into rule. */
static const char *gr_parse_literal(gr_parser *p, const char *pos, gr_rulebuf *rule, int nested)
{
    pos++;
    while (*pos != '"') {
        if (!*pos) {
            gr_fail(p, "unexpected end of input");
            return NULL;
        }
        uint32_t c;
        pos = gr_parse_char(p, pos, &c);
        if (!pos) return NULL;
        if (gr_rb_push(rule, GR_CHAR, c)) goto oom;
    }
    return gr_parse_space(pos + 1, nested);
oom:
    gr_oom(p);
    return NULL;
}

/* A class [...] (pos at the bracket) into rule, from index last. */
static const char *gr_parse_class(gr_parser *p, const char *pos, gr_rulebuf *rule, size_t last, int nested)
{
    pos++;
    uint32_t start_type = GR_CHAR;
    if (*pos == '^') {
        pos++;
        start_type = GR_CHAR_NOT;
    }
    while (*pos != ']') {
        if (!*pos) {
            gr_fail(p, "unexpected end of input");
            return NULL;
        }
        uint32_t c;
        pos = gr_parse_char(p, pos, &c);
        if (!pos) return NULL;
        uint32_t type = last < rule->n ? GR_CHAR_ALT : start_type;
        if (gr_rb_push(rule, type, c)) goto oom;
        if (pos[0] == '-' && pos[1] != ']') {
            if (!pos[1]) {
                gr_fail(p, "unexpected end of input");
                return NULL;
            }
            uint32_t hi;
            pos = gr_parse_char(p, pos + 1, &hi);
            if (!pos) return NULL;
            if (gr_rb_push(rule, GR_CHAR_RNG_UPPER, hi)) goto oom;
        }
    }
    return gr_parse_space(pos + 1, nested);
oom:
    gr_oom(p);
    return NULL;
}

static const char *gr_parse_sequence(gr_parser *p, const char *src, const char *rname, size_t rlen,
                                     gr_rulebuf *rule, int nested)
{
    size_t last = rule->n;
    const char *pos = src;
    uint64_t n_prev = 1;
    while (*pos && !p->failed) {
        if (*pos == '"') {
            last = rule->n;
            n_prev = 1;
            pos = gr_parse_literal(p, pos, rule, nested);
        } else if (*pos == '[') {
            last = rule->n;
            n_prev = 1;
            pos = gr_parse_class(p, pos, rule, last, nested);
        } else if (*pos == '<' || *pos == '!') {
            uint32_t type = GR_TOKEN, id;
            if (*pos == '!') {
                type = GR_TOKEN_NOT;
                pos++;
            }
            pos = gr_parse_token(p, pos, &id);
            if (!pos) return NULL;
            last = rule->n;
            n_prev = 1;
            if (gr_rb_push(rule, type, id)) gr_oom(p);
            pos = gr_parse_space(pos, nested);
        } else if (gr_is_word(*pos)) {
            const char *name_end = gr_parse_name(p, pos);
            uint32_t ref = gr_symbol_id(p, pos, (size_t)(name_end - pos));
            pos = gr_parse_space(name_end, nested);
            last = rule->n;
            n_prev = 1;
            if (gr_rb_push(rule, GR_RULE_REF, ref)) gr_oom(p);
        } else if (*pos == '(') {
            if (p->depth >= GR_MAX_NESTING) {
                gr_fail(p, "groups nest deeper than %d levels, which bankML does not parse", GR_MAX_NESTING);
                return NULL;
            }
            pos = gr_parse_space(pos + 1, 1);
            size_t before = p->n_syms;
            uint32_t sub = gr_generate_id(p, rname, rlen);
            p->depth++;
            pos = gr_parse_alternates(p, pos, rname, rlen, sub, 1);
            p->depth--;
            if (!pos) return NULL;
            uint32_t added = (uint32_t)p->n_syms - (uint32_t)before;
            n_prev = added > 1 ? added : 1;
            last = rule->n;
            if (gr_rb_push(rule, GR_RULE_REF, sub)) gr_oom(p);
            if (*pos != ')') {
                gr_fail(p, "expecting ')' at %s", pos);
                return NULL;
            }
            pos = gr_parse_space(pos + 1, nested);
        } else if (*pos == '.') {
            last = rule->n;
            n_prev = 1;
            if (gr_rb_push(rule, GR_CHAR_ANY, 0)) gr_oom(p);
            pos = gr_parse_space(pos + 1, nested);
        } else if (*pos == '*' || *pos == '+' || *pos == '?') {
            char op = *pos;
            pos = gr_parse_space(pos + 1, nested);
            gr_repeat(p, rule, last, &n_prev, pos, rname, rlen, op == '+' ? 1 : 0, op == '?' ? 1 : UINT64_MAX);
        } else if (*pos == '{') {
            uint64_t min_t, max_t;
            pos = gr_parse_braces(p, pos + 1, nested, &min_t, &max_t);
            if (!pos) return NULL;
            gr_repeat(p, rule, last, &n_prev, pos, rname, rlen, min_t, max_t);
        } else {
            break;
        }
        if (!pos) return NULL;
    }
    return p->failed ? NULL : pos;
}

static const char *gr_parse_alternates(gr_parser *p, const char *src, const char *rname, size_t rlen,
                                       uint32_t rule_id, int nested)
{
    gr_rulebuf rule = {0};
    const char *pos = gr_parse_sequence(p, src, rname, rlen, &rule, nested);
    while (pos && *pos == '|') {
        if (gr_rb_push(&rule, GR_ALT, 0)) {
            gr_oom(p);
            break;
        }
        pos = gr_parse_space(pos + 1, 1);
        pos = gr_parse_sequence(p, pos, rname, rlen, &rule, nested);
    }
    if (pos && !p->failed) {
        if (gr_rb_push(&rule, GR_END, 0)) gr_oom(p);
        else gr_add_rule(p, rule_id, &rule);
    }
    free(rule.e);
    return p->failed ? NULL : pos;
}

static const char *gr_parse_rule(gr_parser *p, const char *src)
{
    const char *name_end = gr_parse_name(p, src);
    if (!name_end) return NULL;
    const char *pos = gr_parse_space(name_end, 0);
    size_t nlen = (size_t)(name_end - src);
    uint32_t id = gr_symbol_id(p, src, nlen);
    if (!(pos[0] == ':' && pos[1] == ':' && pos[2] == '=')) {
        gr_fail(p, "expecting ::= at %s", pos);
        return NULL;
    }
    pos = gr_parse_space(pos + 3, 1);
    pos = gr_parse_alternates(p, pos, src, nlen, id, 0);
    if (!pos) return NULL;
    if (*pos == '\r') {
        pos += pos[1] == '\n' ? 2 : 1;
    } else if (*pos == '\n') {
        pos++;
    } else if (*pos) {
        gr_fail(p, "expecting newline or end at %s", pos);
        return NULL;
    }
    return gr_parse_space(pos, 1);
}

/* parse()'s check that every rule is defined and every reference points at
 * a defined rule (named, as llama.cpp names it, by the first symbol in
 * name order holding the id). */
static void gr_check_defined(gr_parser *p)
{
    for (size_t i = 0; i < p->n_rules && !p->failed; i++) {
        const gr_rulebuf *r = &p->rules[i];
        if (r->n == 0) {
            gr_fail(p, "Undefined rule");
            return;
        }
        for (size_t k = 0; k < r->n; k++) {
            if (r->e[k].type != GR_RULE_REF) continue;
            uint32_t v = r->e[k].value;
            if ((size_t)v < p->n_rules && p->rules[v].n) continue;
            const gr_sym *best = NULL;
            for (size_t s = 0; s < p->n_syms; s++) {
                const gr_sym *y = &p->syms[s];
                if (y->id != v) continue;
                if (!best || strcmp(y->name, best->name) < 0) best = y;
            }
            if (best) {
                gr_fail(p, "Undefined rule identifier '%s'", best->name);
                return;
            }
        }
    }
}

static int gr_is_end(const gr_elem *e) { return e->type == GR_END || e->type == GR_ALT; }

/* llama_grammar_detect_left_recursion. -1 when the walk goes deeper than
 * bankml follows. */
static int gr_left_rec(const gr_grammar *g, size_t ri, uint8_t *visited, uint8_t *in_progress, uint8_t *may_empty,
                       int depth)
{
    if (in_progress[ri]) return 1;
    if (depth > GR_MAX_LR_DEPTH) return -1;
    in_progress[ri] = 1;
    const gr_elem *rule = g->elems + g->off[ri];
    int at_start = 1;
    for (size_t i = 0;; i++) {
        if (gr_is_end(&rule[i])) {
            if (at_start) {
                may_empty[ri] = 1;
                break;
            }
            at_start = 1;
        } else {
            at_start = 0;
        }
        if (rule[i].type == GR_END) break;
    }
    int recurse = 1;
    for (size_t i = 0;; i++) {
        if (rule[i].type == GR_RULE_REF && recurse) {
            int r = gr_left_rec(g, rule[i].value, visited, in_progress, may_empty, depth + 1);
            if (r) return r;
            if (!may_empty[rule[i].value]) recurse = 0;
        } else if (gr_is_end(&rule[i])) {
            recurse = 1;
        } else {
            recurse = 0;
        }
        if (rule[i].type == GR_END) break;
    }
    in_progress[ri] = 0;
    visited[ri] = 1;
    return 0;
}

static void gr_parser_free(gr_parser *p)
{
    for (size_t i = 0; i < p->n_syms; i++) free(p->syms[i].name);
    free(p->syms);
    free(p->hash);
    for (size_t i = 0; i < p->n_rules; i++) free(p->rules[i].e);
    free(p->rules);
}

/* The parser's rules into one block. */
static gr_grammar *gr_build(gr_parser *p, uint32_t root)
{
    size_t total = 0;
    for (size_t i = 0; i < p->n_rules; i++) total += p->rules[i].n;
    gr_grammar *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->elems = malloc((total ? total : 1) * sizeof *g->elems);
    g->off = malloc(p->n_rules * sizeof *g->off);
    if (!g->elems || !g->off) {
        gr_free(g);
        return NULL;
    }
    size_t at = 0;
    for (size_t i = 0; i < p->n_rules; i++) {
        g->off[i] = at;
        memcpy(g->elems + at, p->rules[i].e, p->rules[i].n * sizeof *g->elems);
        at += p->rules[i].n;
    }
    g->n_rules = p->n_rules;
    g->root = root;
    return g;
}

gr_grammar *gr_parse(const char *text, size_t len, const gr_tokenizer *tk, char *err, size_t errlen)
{
    gr_parser p;
    memset(&p, 0, sizeof p);
    p.tk = tk;
    p.err = err;
    p.errlen = errlen;
    if (err && errlen) err[0] = 0;
    /* llama.cpp reads a C string: the text ends at its first NUL */
    const char *nul = memchr(text, 0, len);
    size_t n = nul ? (size_t)(nul - text) : len;
    char *src = malloc(n + 1);
    if (!src) {
        bk_err(err, errlen, "out of memory");
        return NULL;
    }
    memcpy(src, text, n);
    src[n] = 0;
    gr_grammar *g = NULL;
    const char *pos = gr_parse_space(src, 1);
    while (pos && *pos) pos = gr_parse_rule(&p, pos);
    if (!p.failed) gr_check_defined(&p);
    if (!p.failed && p.n_rules == 0) gr_fail(&p, "failed to parse grammar");
    if (p.failed) goto out;
    const gr_sym *root = gr_sym_find(&p, "root", 4);
    if (!root) {
        gr_fail(&p, "grammar does not contain a 'root' symbol");
        goto out;
    }
    g = gr_build(&p, root->id);
    if (!g) {
        gr_fail(&p, "out of memory");
        goto out;
    }
    uint8_t *flags = calloc(g->n_rules ? g->n_rules * 3 : 1, 1);
    if (!flags) {
        gr_fail(&p, "out of memory");
        goto bad;
    }
    for (size_t i = 0; i < g->n_rules; i++) {
        if (flags[i]) continue;
        int r = gr_left_rec(g, i, flags, flags + g->n_rules, flags + 2 * g->n_rules, 0);
        if (r) {
            if (r > 0) gr_fail(&p, "unsupported grammar, left recursion detected for nonterminal at index %zu", i);
            else gr_fail(&p, "the rules chain deeper than %d levels, which bankML does not follow", GR_MAX_LR_DEPTH);
            free(flags);
            goto bad;
        }
    }
    free(flags);
    goto out;
bad:
    gr_free(g);
    g = NULL;
out:
    gr_parser_free(&p);
    free(src);
    return g;
}

void gr_free(gr_grammar *g)
{
    if (!g) return;
    free(g->elems);
    free(g->off);
    free(g);
}

const gr_elem *gr_rule(const gr_grammar *g, size_t i, size_t *n_elems)
{
    if (i >= g->n_rules) {
        if (n_elems) *n_elems = 0;
        return NULL;
    }
    if (n_elems) {
        size_t k = 0;
        while (g->elems[g->off[i] + k].type != GR_END) k++;
        *n_elems = k + 1;
    }
    return g->elems + g->off[i];
}

size_t gr_n_rules(const gr_grammar *g) { return g->n_rules; }
uint32_t gr_root(const gr_grammar *g) { return g->root; }

/* ====================================================================== */
/* UTF-8 as the automaton decodes it                                      */
/* ====================================================================== */

size_t gr_decode_utf8(const char *s, size_t n, uint32_t *value_io, int *n_remain_io, uint32_t *cps)
{
    static const int lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4};
    size_t i = 0, k = 0;
    uint32_t value = *value_io;
    int n_remain = *n_remain_io;
    const int start_remain = n_remain;
#define GR_AT(j) ((j) < n ? (uint8_t)s[j] : 0)
    while (GR_AT(i) != 0 && n_remain > 0) {
        uint8_t next = GR_AT(i);
        if ((next >> 6) != 2) {
            cps[k++] = 0;     /* an invalid sequence: stop */
            *value_io = 0;
            *n_remain_io = -1;
            return k - 1;
        }
        value = (value << 6) + (next & 0x3F);
        ++i;
        --n_remain;
    }
    if (start_remain > 0 && n_remain == 0) cps[k++] = value;
    while (GR_AT(i) != 0) {
        uint8_t first = GR_AT(i);
        n_remain = lookup[first >> 4] - 1;
        if (n_remain < 0) {
            cps[0] = 0;       /* invalid: everything decoded so far is dropped */
            *value_io = 0;
            *n_remain_io = n_remain;
            return 0;
        }
        uint8_t mask = (uint8_t)((1 << (7 - n_remain)) - 1);
        value = first & mask;
        ++i;
        while (GR_AT(i) != 0 && n_remain > 0) {
            value = (value << 6) + (GR_AT(i) & 0x3F);
            ++i;
            --n_remain;
        }
        if (n_remain == 0) cps[k++] = value;
    }
#undef GR_AT
    cps[k] = 0;
    *value_io = value;
    *n_remain_io = n_remain;
    return k;
}

/* ====================================================================== */
/* the vocabulary                                                         */
/* ====================================================================== */

struct gr_vocab {
    int32_t n;
    char *bytes;                /* every piece, NUL-terminated, one after another */
    size_t *off;                /* piece i at bytes + off[i] */
    uint32_t *plen;             /* its bytes before a NUL */
    uint32_t *flen;             /* all its bytes (a lazy grammar's trigger buffer takes them all) */
    uint8_t *eog;
    uint32_t *cps;              /* the pieces decoded from a fresh state, each 0-terminated */
    size_t *cps_off;
    uint32_t *p_value;          /* the partial state each fresh decode leaves */
    int8_t *p_remain;
};

void gr_vocab_free(gr_vocab *v)
{
    if (!v) return;
    free(v->bytes);
    free(v->off);
    free(v->plen);
    free(v->flen);
    free(v->eog);
    free(v->cps);
    free(v->cps_off);
    free(v->p_value);
    free(v->p_remain);
    free(v);
}

int32_t gr_vocab_n(const gr_vocab *v) { return v->n; }

gr_vocab *gr_vocab_new(int32_t n, const char *(*piece)(void *ctx, int32_t id, size_t *len),
                       int (*is_eog)(void *ctx, int32_t id), void *ctx, char *err, size_t errlen)
{
    if (n < 0) n = 0;
    size_t nv = (size_t)n;
    gr_vocab *v = calloc(1, sizeof *v);
    if (!v) goto oom;
    v->n = n;
    v->off = malloc((nv + 1) * sizeof *v->off);
    v->plen = malloc((nv + 1) * sizeof *v->plen);
    v->flen = malloc((nv + 1) * sizeof *v->flen);
    v->eog = malloc(nv + 1);
    v->cps_off = malloc((nv + 1) * sizeof *v->cps_off);
    v->p_value = malloc((nv + 1) * sizeof *v->p_value);
    v->p_remain = malloc(nv + 1);
    if (!v->off || !v->plen || !v->flen || !v->eog || !v->cps_off || !v->p_value || !v->p_remain) goto oom;
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *s = piece(ctx, i, &len);
        const char *z = s && len ? memchr(s, 0, len) : NULL;
        size_t pl = !s ? 0 : z ? (size_t)(z - s) : len;
        size_t fl = s ? len : 0;
        if (fl > UINT32_MAX) fl = UINT32_MAX;
        if (pl > fl) pl = fl;
        v->plen[i] = (uint32_t)pl;
        v->flen[i] = (uint32_t)fl;
        v->off[i] = total;
        total += fl + 1;
        v->eog[i] = is_eog(ctx, i) ? 1 : 0;
    }
    v->bytes = malloc(total ? total : 1);
    v->cps = malloc((total ? total : 1) * sizeof *v->cps);
    if (!v->bytes || !v->cps) goto oom;
    size_t ck = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *s = piece(ctx, i, &len);
        char *dst = v->bytes + v->off[i];
        if (v->flen[i]) memcpy(dst, s, v->flen[i]);
        dst[v->flen[i]] = 0;
        uint32_t val = 0;
        int rem = 0;
        v->cps_off[i] = ck;
        ck += gr_decode_utf8(dst, v->plen[i], &val, &rem, v->cps + ck) + 1;
        v->p_value[i] = val;
        v->p_remain[i] = (int8_t)rem;
    }
    return v;
oom:
    gr_vocab_free(v);
    bk_err(err, errlen, "out of memory building the grammar's vocabulary");
    return NULL;
}

/* ====================================================================== */
/* stacks                                                                 */
/* ====================================================================== */

/* A set of stacks, each a list of element positions (indices into the
 * grammar's elems), bottom first, in the order llama.cpp keeps them; a
 * hash over their contents stands in for std::find / std::set. */
typedef struct {
    uint32_t *cells;
    size_t n_cells, cap_cells;
    size_t *start;
    uint32_t *len;
    uint64_t *hv;
    size_t n, cap;
    size_t *tab;                /* index + 1, 0 empty */
    size_t tab_cap;
    int oom;
} gr_stacks;

static void gr_ss_free(gr_stacks *s)
{
    free(s->cells);
    free(s->start);
    free(s->len);
    free(s->hv);
    free(s->tab);
    memset(s, 0, sizeof *s);
}

static void gr_ss_clear(gr_stacks *s)
{
    s->n_cells = 0;
    s->n = 0;
    if (s->tab) memset(s->tab, 0, s->tab_cap * sizeof *s->tab);
}

static uint64_t gr_stack_hash(const uint32_t *c, size_t n)
{
    uint64_t h = 1469598103934665603ull ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static const uint32_t gr_no_cells[1];

static const uint32_t *gr_ss_at(const gr_stacks *s, size_t i, size_t *n)
{
    *n = s->len[i];
    return s->cells ? s->cells + s->start[i] : gr_no_cells;   /* only empty stacks so far */
}

static long gr_ss_find(const gr_stacks *s, const uint32_t *c, size_t n, uint64_t h)
{
    if (!s->tab_cap) return -1;
    size_t mask = s->tab_cap - 1;
    for (size_t k = (size_t)h & mask;; k = (k + 1) & mask) {
        size_t j = s->tab[k];
        if (!j) return -1;
        j--;
        if (s->hv[j] == h && s->len[j] == n && (!n || !memcmp(s->cells + s->start[j], c, n * sizeof *c)))
            return (long)j;
    }
}

static int gr_ss_rehash(gr_stacks *s)
{
    size_t nc = s->tab_cap ? s->tab_cap * 2 : 16;
    size_t *nt = calloc(nc, sizeof *nt);
    if (!nt) return -1;
    for (size_t j = 0; j < s->n; j++) {
        size_t k = (size_t)s->hv[j] & (nc - 1);
        while (nt[k]) k = (k + 1) & (nc - 1);
        nt[k] = j + 1;
    }
    free(s->tab);
    s->tab = nt;
    s->tab_cap = nc;
    return 0;
}

/* Appends stack c[0..n) unless the set holds it already: 1 added, 0 there,
 * -1 out of memory or over GR_MAX_STACK_CELLS (s->oom set). */
static int gr_ss_add(gr_stacks *s, const uint32_t *c, size_t n)
{
    uint64_t h = gr_stack_hash(c, n);
    if (gr_ss_find(s, c, n, h) >= 0) return 0;
    if (s->n_cells + n > GR_MAX_STACK_CELLS) goto bad;
    if ((s->n + 1) * 2 > s->tab_cap && gr_ss_rehash(s)) goto bad;
    if (s->n == s->cap) {
        size_t c1 = s->cap, c2 = s->cap, c3 = s->cap;
        if (bk_grow((void **)&s->start, &c1, s->n + 1, sizeof *s->start) ||
            bk_grow((void **)&s->len, &c2, s->n + 1, sizeof *s->len) ||
            bk_grow((void **)&s->hv, &c3, s->n + 1, sizeof *s->hv))
            goto bad;
        s->cap = c1 < c2 ? (c1 < c3 ? c1 : c3) : (c2 < c3 ? c2 : c3);
    }
    if (s->n_cells + n > s->cap_cells && bk_grow((void **)&s->cells, &s->cap_cells, s->n_cells + n, sizeof *s->cells))
        goto bad;
    /* c may point into s->cells: copy after the growth, from a stable place */
    if (n) memmove(s->cells + s->n_cells, c, n * sizeof *c);
    s->start[s->n] = s->n_cells;
    s->len[s->n] = (uint32_t)n;
    s->hv[s->n] = h;
    s->n_cells += n;
    size_t mask = s->tab_cap - 1;
    size_t k = (size_t)h & mask;
    while (s->tab[k]) k = (k + 1) & mask;
    s->tab[k] = ++s->n;
    return 1;
bad:
    s->oom = 1;
    return -1;
}

/* ====================================================================== */
/* the automaton                                                          */
/* ====================================================================== */

typedef struct {
    uint32_t *c;
    size_t n, cap;
} gr_vec;

static int gr_vec_set(gr_vec *v, const uint32_t *c, size_t n)
{
    if (n > v->cap && bk_grow((void **)&v->c, &v->cap, n, sizeof *v->c)) return -1;
    if (n) memcpy(v->c, c, n * sizeof *c);
    v->n = n;
    return 0;
}

static int gr_vec_push(gr_vec *v, uint32_t x)
{
    if (v->n == v->cap && bk_grow((void **)&v->c, &v->cap, v->n + 1, sizeof *v->c)) return -1;
    v->c[v->n++] = x;
    return 0;
}

/* A token's place in a lazy grammar's trigger buffer. */
typedef struct {
    int32_t tok;
    size_t start, end;
} gr_bpos;

struct gr_state {
    const gr_grammar *g;
    const gr_vocab *v;
    /* a lazy grammar: its triggers, whether it still awaits one, the text so far */
    const gr_lazy *lz;
    int awaiting;
    char *buf;
    size_t blen, bcap;
    gr_bpos *bpos;
    size_t n_bpos, cap_bpos;
    gr_stacks stacks;
    uint32_t p_value;           /* partial UTF-8 of the accepted tokens */
    int p_remain;
    /* llama_grammar_advance_stack's work lists, kept between calls */
    gr_stacks todo, seen;
    gr_vec tmp;
    char err[256];
};

/* A stack onto the work list (a LIFO, never deduplicated: llama.cpp's
 * todo vector). */
static int gr_todo_push(gr_stacks *todo, const uint32_t *c, size_t n)
{
    if (todo->n_cells + n > GR_MAX_STACK_CELLS) {
        todo->oom = 1;
        return -1;
    }
    if (todo->n == todo->cap) {
        size_t a = todo->cap, b = todo->cap;
        if (bk_grow((void **)&todo->start, &a, todo->n + 1, sizeof *todo->start) ||
            bk_grow((void **)&todo->len, &b, todo->n + 1, sizeof *todo->len))
            return -1;
        todo->cap = a < b ? a : b;
    }
    if (todo->n_cells + n > todo->cap_cells &&
        bk_grow((void **)&todo->cells, &todo->cap_cells, todo->n_cells + n, sizeof *todo->cells))
        return -1;
    todo->start[todo->n] = todo->n_cells;
    todo->len[todo->n] = (uint32_t)n;
    todo->n++;
    if (n) memcpy(todo->cells + todo->n_cells, c, n * sizeof *c);
    todo->n_cells += n;
    return 0;
}

/* llama_grammar_advance_stack: stack c0[0..n0) into the stacks that end at
 * a terminal (or are empty), appended to out (unless there already) in
 * llama.cpp's order: a LIFO work list, each stack expanded once (its
 * `seen` set), a rule reference replaced by one stack per alternative. */
static int gr_advance(gr_state *st, const uint32_t *c0, size_t n0, gr_stacks *out)
{
    const gr_elem *E = st->g->elems;
    gr_stacks *todo = &st->todo, *seen = &st->seen;
    gr_vec *cur = &st->tmp;
    gr_ss_clear(todo);
    gr_ss_clear(seen);
    todo->oom = seen->oom = 0;
    if (gr_todo_push(todo, c0, n0)) goto bad;
    while (todo->n) {
        todo->n--;
        size_t cn;
        const uint32_t *top = gr_ss_at(todo, todo->n, &cn);
        if (gr_vec_set(cur, top, cn)) goto bad;
        todo->n_cells = todo->start[todo->n];
        int ins = gr_ss_add(seen, cur->c, cn);
        if (ins < 0) goto bad;
        if (ins == 0) continue;
        if (cn == 0) {
            if (gr_ss_add(out, cur->c, 0) < 0) goto bad;
            continue;
        }
        uint32_t pos = cur->c[cn - 1];
        const gr_elem *pe = &E[pos];
        switch (pe->type) {
        case GR_RULE_REF: {
            size_t sub = st->g->off[pe->value];
            for (;;) {
                /* the stack without its top, then the element after the
                 * reference (unless it ends the alternative), then the
                 * alternative's first element (unless it is empty) */
                cur->n = cn - 1;
                if (!gr_is_end(&E[pos + 1]) && gr_vec_push(cur, pos + 1)) goto bad;
                if (!gr_is_end(&E[sub]) && gr_vec_push(cur, (uint32_t)sub)) goto bad;
                if (gr_todo_push(todo, cur->c, cur->n)) goto bad;
                while (!gr_is_end(&E[sub])) sub++;
                if (E[sub].type == GR_ALT) sub++;
                else break;
            }
            break;
        }
        case GR_CHAR: case GR_CHAR_NOT: case GR_CHAR_ANY: case GR_TOKEN: case GR_TOKEN_NOT:
            if (gr_ss_add(out, cur->c, cn) < 0) goto bad;
            break;
        default:
            bk_err(st->err, sizeof st->err, "the grammar's stack stopped inside a character class");
            return -1;
        }
    }
    return 0;
bad:
    if (out->oom || seen->oom || todo->oom)
        bk_err(st->err, sizeof st->err, "the grammar's stacks outgrew %zu cells, which bankML does not follow",
               GR_MAX_STACK_CELLS);
    else
        bk_err(st->err, sizeof st->err, "out of memory");
    return -1;
}

/* llama_grammar_match_char: (matched, the position after the class). */
static int gr_match_char(const gr_elem *E, uint32_t pos, uint32_t chr, uint32_t *after)
{
    int found = 0;
    int positive = E[pos].type == GR_CHAR || E[pos].type == GR_CHAR_ANY;
    do {
        if (E[pos + 1].type == GR_CHAR_RNG_UPPER) {
            found = found || (E[pos].value <= chr && chr <= E[pos + 1].value);
            pos += 2;
        } else if (E[pos].type == GR_CHAR_ANY) {
            found = 1;
            pos += 1;
        } else {
            found = found || E[pos].value == chr;
            pos += 1;
        }
    } while (E[pos].type == GR_CHAR_ALT);
    if (after) *after = pos;
    return found == positive;
}

/* llama_grammar_match_partial_char */
static int gr_match_partial(const gr_elem *E, uint32_t pos, uint32_t pvalue, int n_remain)
{
    int positive = E[pos].type == GR_CHAR || E[pos].type == GR_CHAR_ANY;
    if (n_remain < 0 || (n_remain == 1 && pvalue < 2)) return 0;
    uint32_t low = pvalue << (n_remain * 6);
    uint32_t high = low | ((1u << (n_remain * 6)) - 1);
    if (low == 0) {
        if (n_remain == 2) low = 1u << 11;
        else if (n_remain == 3) low = 1u << 16;
    }
    do {
        if (E[pos + 1].type == GR_CHAR_RNG_UPPER) {
            if (E[pos].value <= high && low <= E[pos + 1].value) return positive;
            pos += 2;
        } else if (E[pos].type == GR_CHAR_ANY) {
            return 1;
        } else {
            if (low <= E[pos].value && E[pos].value <= high) return positive;
            pos += 1;
        }
    } while (E[pos].type == GR_CHAR_ALT);
    return !positive;
}

static int gr_match_token(const gr_elem *e, int32_t id)
{
    if (e->type == GR_TOKEN) return e->value == (uint32_t)id;
    if (e->type == GR_TOKEN_NOT) return e->value != (uint32_t)id;
    return 0;
}

/* llama_grammar_candidate */
typedef struct {
    size_t index;
    const uint32_t *cps;
    uint32_t p_value;
    int p_remain;
    int32_t id;
} gr_cand;

typedef struct {
    gr_cand *c;
    size_t n, cap;
} gr_cands;

static int gr_cands_push(gr_cands *v, gr_cand c)
{
    if (v->n == v->cap && bk_grow((void **)&v->c, &v->cap, v->n + 1, sizeof *v->c)) return -1;
    v->c[v->n++] = c;
    return 0;
}

static int gr_reject(gr_state *st, const gr_stacks *stacks, const gr_cand *cands, size_t n, gr_cands *out);

/* llama_grammar_reject_candidates_for_stack: the candidates this stack
 * rejects, appended to out. */
static int gr_reject_for_stack(gr_state *st, const uint32_t *stack, size_t sn, const gr_cand *cands, size_t n,
                               gr_cands *out)
{
    const gr_elem *E = st->g->elems;
    if (sn == 0) {
        for (size_t i = 0; i < n; i++)
            if ((*cands[i].cps != 0 || cands[i].p_remain != 0) && gr_cands_push(out, cands[i])) return -1;
        return 0;
    }
    uint32_t top = stack[sn - 1];
    if (E[top].type == GR_TOKEN || E[top].type == GR_TOKEN_NOT) {
        for (size_t i = 0; i < n; i++) {
            const gr_cand *t = &cands[i];
            int rej = *t->cps == 0 ? t->p_remain != 0 : !gr_match_token(&E[top], t->id);
            if (rej && gr_cands_push(out, *t)) return -1;
        }
        return 0;
    }
    gr_cands next = {0};
    int rc = -1;
    for (size_t i = 0; i < n; i++) {
        const gr_cand *t = &cands[i];
        if (*t->cps == 0) {
            if (t->p_remain != 0 && !gr_match_partial(E, top, t->p_value, t->p_remain) && gr_cands_push(out, *t))
                goto done;
        } else if (gr_match_char(E, top, *t->cps, NULL)) {
            gr_cand c = *t;
            c.cps++;
            if (gr_cands_push(&next, c)) goto done;
        } else if (gr_cands_push(out, *t)) {
            goto done;
        }
    }
    if (next.n) {
        uint32_t after;
        gr_match_char(E, top, 0, &after);
        uint32_t *sa = malloc(sn * sizeof *sa);
        gr_stacks ns = {0};
        gr_cands nrej = {0};
        if (!sa) goto done;
        memcpy(sa, stack, (sn - 1) * sizeof *sa);
        size_t san = sn - 1;
        if (!gr_is_end(&E[after])) sa[san++] = after;
        int r = gr_advance(st, sa, san, &ns);
        if (r == 0) r = gr_reject(st, &ns, next.c, next.n, &nrej);
        for (size_t i = 0; r == 0 && i < nrej.n; i++) {
            gr_cand c = nrej.c[i];
            c.cps--;
            if (gr_cands_push(out, c)) r = -1;
        }
        free(sa);
        gr_ss_free(&ns);
        free(nrej.c);
        if (r) goto done;
    }
    rc = 0;
done:
    free(next.c);
    return rc;
}

/* llama_grammar_reject_candidates: what every stack rejects. */
static int gr_reject(gr_state *st, const gr_stacks *stacks, const gr_cand *cands, size_t n, gr_cands *out)
{
    if (n == 0) return 0;
    if (stacks->n == 0) {
        bk_err(st->err, sizeof st->err, "the grammar has no stack left");
        return -1;
    }
    gr_cands a = {0}, b = {0};
    size_t sn;
    const uint32_t *s0 = gr_ss_at(stacks, 0, &sn);
    if (gr_reject_for_stack(st, s0, sn, cands, n, &a)) goto bad;
    for (size_t i = 1; i < stacks->n && a.n; i++) {
        b.n = 0;
        const uint32_t *si = gr_ss_at(stacks, i, &sn);
        if (gr_reject_for_stack(st, si, sn, a.c, a.n, &b)) goto bad;
        gr_cands t = a;
        a = b;
        b = t;
    }
    for (size_t i = 0; i < a.n; i++)
        if (gr_cands_push(out, a.c[i])) goto bad;
    free(a.c);
    free(b.c);
    return 0;
bad:
    free(a.c);
    free(b.c);
    if (!st->err[0]) bk_err(st->err, sizeof st->err, "out of memory");
    return -1;
}

gr_state *gr_state_new(const gr_grammar *g, const gr_vocab *v, char *err, size_t errlen)
{
    gr_state *st = calloc(1, sizeof *st);
    if (!st) {
        bk_err(err, errlen, "out of memory");
        return NULL;
    }
    st->g = g;
    st->v = v;
    const gr_elem *E = g->elems;
    size_t pos = g->off[g->root];
    for (;;) {
        uint32_t one = (uint32_t)pos;
        if (gr_advance(st, &one, gr_is_end(&E[pos]) ? 0 : 1, &st->stacks)) {
            bk_err(err, errlen, "%s", st->err);
            gr_state_free(st);
            return NULL;
        }
        while (!gr_is_end(&E[pos])) pos++;
        if (E[pos].type == GR_ALT) pos++;
        else break;
    }
    return st;
}

void gr_state_free(gr_state *st)
{
    if (!st) return;
    gr_ss_free(&st->stacks);
    gr_ss_free(&st->todo);
    gr_ss_free(&st->seen);
    free(st->tmp.c);
    free(st->buf);
    free(st->bpos);
    free(st);
}

size_t gr_n_stacks(const gr_state *st) { return st->stacks.n; }
const char *gr_error(const gr_state *st) { return st->err; }

int gr_can_end(const gr_state *st)
{
    for (size_t i = 0; i < st->stacks.n; i++)
        if (st->stacks.len[i] == 0) return 1;
    return 0;
}

/* Whether some stack's top could take a candidate whose first code point is
 * cp (cp != 0): when none can, every stack rejects it. */
static int gr_first_ok(const gr_state *st, uint32_t cp, int32_t id)
{
    const gr_elem *E = st->g->elems;
    for (size_t i = 0; i < st->stacks.n; i++) {
        size_t sn = st->stacks.len[i];
        if (sn == 0) continue;
        uint32_t top = st->stacks.cells[st->stacks.start[i] + sn - 1];
        if (E[top].type == GR_TOKEN || E[top].type == GR_TOKEN_NOT) {
            if (gr_match_token(&E[top], id)) return 1;
        } else if (gr_match_char(E, top, cp, NULL)) {
            return 1;
        }
    }
    return 0;
}

int gr_apply(gr_state *st, smp_token *c, size_t n)
{
    if (st->awaiting) return 0;   /* llama_grammar_apply_impl: nothing is constrained before a trigger */
    const gr_vocab *v = st->v;
    int allow_eog = gr_can_end(st);
    int fresh = st->p_remain <= 0;    /* a decode from here is a decode from nothing */
    gr_cands cands = {0}, rej = {0};
    uint32_t *dec = NULL;
    size_t dec_n = 0, dec_cap = 0;
    size_t *dec_at = NULL;
    int rc = -1;
    st->err[0] = 0;
    if (!fresh) {
        size_t need = 0;
        for (size_t i = 0; i < n; i++)
            if (c[i].id >= 0 && c[i].id < v->n) need += v->plen[c[i].id] + 1;
        dec_cap = need ? need : 1;
        dec = malloc(dec_cap * sizeof *dec);
        dec_at = malloc((n ? n : 1) * sizeof *dec_at);
        if (!dec || !dec_at) goto oom;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t id = c[i].id;
        if (id < 0 || id >= v->n) {
            c[i].logit = -INFINITY;
            continue;
        }
        if (v->eog[id]) {
            if (!allow_eog) c[i].logit = -INFINITY;
            continue;
        }
        if (v->plen[id] == 0) {
            c[i].logit = -INFINITY;
            continue;
        }
        gr_cand t;
        t.index = i;
        t.id = id;
        if (fresh) {
            t.cps = v->cps + v->cps_off[id];
            t.p_value = v->p_value[id];
            t.p_remain = v->p_remain[id];
            if (*t.cps && !gr_first_ok(st, *t.cps, id)) {
                c[i].logit = -INFINITY;   /* every stack rejects it: no walk needed */
                continue;
            }
        } else {
            uint32_t val = st->p_value;
            int rem = st->p_remain;
            dec_at[i] = dec_n;
            dec_n += gr_decode_utf8(v->bytes + v->off[id], v->plen[id], &val, &rem, dec + dec_n) + 1;
            t.cps = NULL;
            t.p_value = val;
            t.p_remain = rem;
        }
        if (gr_cands_push(&cands, t)) goto oom;
    }
    if (!fresh)
        for (size_t k = 0; k < cands.n; k++) cands.c[k].cps = dec + dec_at[cands.c[k].index];
    if (gr_reject(st, &st->stacks, cands.c, cands.n, &rej)) goto out;
    for (size_t k = 0; k < rej.n; k++) c[rej.c[k].index].logit = -INFINITY;
    rc = 0;
    goto out;
oom:
    bk_err(st->err, sizeof st->err, "out of memory");
out:
    free(cands.c);
    free(rej.c);
    free(dec);
    free(dec_at);
    return rc;
}

int gr_allows(gr_state *st, int32_t id)
{
    smp_token t = {id, 1.0f, 0.0f};
    if (gr_apply(st, &t, 1)) return -1;
    return t.logit != -INFINITY;
}

/* llama_grammar_accept_chr for one stack, into out. */
static int gr_accept_chr(gr_state *st, const uint32_t *stack, size_t sn, uint32_t chr, gr_stacks *out)
{
    const gr_elem *E = st->g->elems;
    if (sn == 0) return 0;
    uint32_t top = stack[sn - 1];
    if (E[top].type == GR_TOKEN || E[top].type == GR_TOKEN_NOT) return 0;
    uint32_t after;
    if (!gr_match_char(E, top, chr, &after)) return 0;
    uint32_t *ns = malloc(sn * sizeof *ns);
    if (!ns) return -1;
    memcpy(ns, stack, (sn - 1) * sizeof *ns);
    size_t nn = sn - 1;
    if (!gr_is_end(&E[after])) ns[nn++] = after;
    int r = gr_advance(st, ns, nn, out);
    free(ns);
    return r;
}

/* llama_grammar_accept_token: the stacks advance over piece[0..plen) (a C
 * string: decoding stops at a NUL), token tops matched by id. */
static int gr_accept_token(gr_state *st, int32_t id, const char *piece, size_t plen, char *err, size_t errlen)
{
    const gr_elem *E = st->g->elems;
    uint32_t val = st->p_value;
    int rem = st->p_remain;
    uint32_t *cps = malloc((plen + 1) * sizeof *cps);
    gr_stacks nw = {0}, cur = {0}, nxt = {0};
    if (!cps) goto oom;
    size_t ncp = gr_decode_utf8(piece, plen, &val, &rem, cps);
    for (size_t i = 0; i < st->stacks.n; i++) {
        size_t sn;
        const uint32_t *s = gr_ss_at(&st->stacks, i, &sn);
        if (sn == 0) continue;
        uint32_t top = s[sn - 1];
        if (E[top].type == GR_TOKEN || E[top].type == GR_TOKEN_NOT) {
            if (!gr_match_token(&E[top], id)) continue;
            uint32_t *ns = malloc(sn * sizeof *ns);
            if (!ns) goto oom;
            memcpy(ns, s, (sn - 1) * sizeof *ns);
            size_t nn = sn - 1;
            if (!gr_is_end(&E[top + 1])) ns[nn++] = top + 1;
            int r = gr_advance(st, ns, nn, &nw);
            free(ns);
            if (r) goto fail;
            continue;
        }
        gr_ss_clear(&cur);
        if (gr_ss_add(&cur, s, sn) < 0) goto oom;
        for (size_t k = 0; k < ncp; k++) {
            gr_ss_clear(&nxt);
            for (size_t j = 0; j < cur.n; j++) {
                size_t cn;
                const uint32_t *cs = gr_ss_at(&cur, j, &cn);
                if (gr_accept_chr(st, cs, cn, cps[k], &nxt)) goto fail;
            }
            gr_stacks t = cur;
            cur = nxt;
            nxt = t;
            if (cur.n == 0) break;
        }
        for (size_t j = 0; j < cur.n; j++) {
            size_t cn;
            const uint32_t *cs = gr_ss_at(&cur, j, &cn);
            if (gr_ss_add(&nw, cs, cn) < 0) goto fail;
        }
    }
    free(cps);
    gr_ss_free(&cur);
    gr_ss_free(&nxt);
    gr_ss_free(&st->stacks);
    st->stacks = nw;
    st->p_value = val;
    st->p_remain = rem;
    if (st->stacks.n == 0) {
        size_t pl = strnlen(piece, plen);
        bk_err(err, errlen, "Unexpected empty grammar stack after accepting piece: %.*s (%d)", (int)pl, piece, (int)id);
        return -1;
    }
    return 0;
oom:
    bk_err(st->err, sizeof st->err, "out of memory");
fail:
    bk_err(err, errlen, "%s", st->err[0] ? st->err : "the grammar's stacks outgrew what bankML follows");
    free(cps);
    gr_ss_free(&nw);
    gr_ss_free(&cur);
    gr_ss_free(&nxt);
    return -1;
}

/* ====================================================================== */
/* lazy grammars                                                          */
/* ====================================================================== */

struct gr_lazy {
    rx **rx;                    /* the patterns, compiled */
    char **pat;                 /* as llama.cpp holds them (words escaped, full patterns anchored) */
    size_t *pat_len;
    uint8_t *whole;             /* begins with '^' and ends with '$': std::regex_match first */
    size_t n_pat;
    int32_t *tokens;
    size_t n_tokens;
};

void gr_lazy_free(gr_lazy *lz)
{
    if (!lz) return;
    for (size_t i = 0; i < lz->n_pat; i++) {
        rx_free(lz->rx[i]);
        free(lz->pat[i]);
    }
    free(lz->rx);
    free(lz->pat);
    free(lz->pat_len);
    free(lz->whole);
    free(lz->tokens);
    free(lz);
}

/* regex_escape: a backslash before each of . ^ $ | ( ) * + ? [ ] { } \ */
static char *gr_regex_escape(const char *w, size_t n, size_t *out_len)
{
    char *o = malloc(2 * n + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (strchr(".^$|()*+?[]{}\\", w[i]) && w[i]) o[k++] = '\\';
        o[k++] = w[i];
    }
    o[k] = 0;
    *out_len = k;
    return o;
}

/* COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN_FULL's anchoring: "^$" when empty,
 * else '^' before unless it begins with one, '$' after unless it ends
 * with one. */
static char *gr_anchor(const char *p, size_t n, size_t *out_len)
{
    char *o = malloc(n + 3);
    if (!o) return NULL;
    size_t k = 0;
    if (n == 0) {
        memcpy(o, "^$", 3);
        *out_len = 2;
        return o;
    }
    if (p[0] != '^') o[k++] = '^';
    memcpy(o + k, p, n);
    k += n;
    if (p[n - 1] != '$') o[k++] = '$';
    o[k] = 0;
    *out_len = k;
    return o;
}

gr_lazy *gr_lazy_new(const gr_trigger *t, size_t n, int *code, char *err, size_t errlen)
{
    *code = RX_NOMEM;
    gr_lazy *lz = calloc(1, sizeof *lz);
    if (!lz) goto oom;
    size_t cap = n ? n : 1;
    lz->rx = calloc(cap, sizeof *lz->rx);
    lz->pat = calloc(cap, sizeof *lz->pat);
    lz->pat_len = calloc(cap, sizeof *lz->pat_len);
    lz->whole = calloc(cap, 1);
    lz->tokens = calloc(cap, sizeof *lz->tokens);
    if (!lz->rx || !lz->pat || !lz->pat_len || !lz->whole || !lz->tokens) goto oom;
    /* common_sampler_init's lowering, in the triggers' order */
    for (size_t i = 0; i < n; i++) {
        size_t pl = 0;
        char *pat = NULL;
        switch (t[i].type) {
        case GR_TRIGGER_TOKEN: lz->tokens[lz->n_tokens++] = t[i].token; continue;
        case GR_TRIGGER_WORD: pat = gr_regex_escape(t[i].value, t[i].len, &pl); break;
        case GR_TRIGGER_PATTERN:
            pat = malloc(t[i].len + 1);
            if (pat) {
                memcpy(pat, t[i].value, t[i].len);
                pat[t[i].len] = 0;
                pl = t[i].len;
            }
            break;
        case GR_TRIGGER_PATTERN_FULL: pat = gr_anchor(t[i].value, t[i].len, &pl); break;
        default:
            *code = RX_UNSUPPORTED;
            bk_err(err, errlen, "grammar trigger type %d is unknown (llama-server b11669 aborts on it)", t[i].type);
            gr_lazy_free(lz);
            return NULL;
        }
        if (!pat) goto oom;
        lz->pat[lz->n_pat] = pat;
        lz->pat_len[lz->n_pat] = pl;
        lz->whole[lz->n_pat] = pl > 0 && pat[0] == '^' && pat[pl - 1] == '$';
        lz->n_pat++;
    }
    /* then llama_grammar_init_impl compiles them, in order */
    for (size_t i = 0; i < lz->n_pat; i++) {
        int rc = rx_compile(lz->pat[i], lz->pat_len[i], &lz->rx[i], err, errlen);
        if (rc != RX_OK) {
            *code = rc;
            gr_lazy_free(lz);
            return NULL;
        }
    }
    *code = RX_OK;
    return lz;
oom:
    gr_lazy_free(lz);
    bk_err(err, errlen, "out of memory");
    return NULL;
}

gr_state *gr_state_new_lazy(const gr_grammar *g, const gr_vocab *v, const gr_lazy *lz, char *err, size_t errlen)
{
    gr_state *st = gr_state_new(g, v, err, errlen);
    if (st && lz) {
        st->lz = lz;
        st->awaiting = 1;
    }
    return st;
}

int gr_awaiting(const gr_state *st) { return st->awaiting; }

/* llama_grammar_trigger_pattern::find: the start of the first capturing
 * group that matched something, else the match's; -1 none, -2 failure. */
static long gr_pattern_find(gr_state *st, size_t k, long *groups)
{
    const gr_lazy *lz = st->lz;
    size_t ng = rx_groups(lz->rx[k]);
    int m = 0;
    if (lz->whole[k]) m = rx_exec(lz->rx[k], st->buf, st->blen, 1, groups);
    if (m == 0) m = rx_exec(lz->rx[k], st->buf, st->blen, 0, groups);
    if (m < 0) return -2;
    if (m == 0) return -1;
    for (size_t i = 1; i <= ng; i++)
        if (groups[2 * i] >= 0 && groups[2 * i + 1] > groups[2 * i]) return groups[2 * i];
    return groups[0];
}

/* The awaiting half of llama_grammar_accept_impl. */
static int gr_accept_awaiting(gr_state *st, int32_t id, char *err, size_t errlen)
{
    const gr_vocab *v = st->v;
    const gr_lazy *lz = st->lz;
    const char *piece = v->bytes + v->off[id];
    for (size_t i = 0; i < lz->n_tokens; i++) {
        if (lz->tokens[i] != id) continue;
        st->awaiting = 0;
        st->blen = 0;   /* the buffer is cleared; its positions are kept, as llama.cpp keeps them */
        return gr_accept_token(st, id, piece, v->flen[id], err, errlen);
    }
    size_t fl = v->flen[id];
    if (st->blen + fl + 1 > st->bcap) {
        size_t nc = (st->blen + fl + 1) * 2;
        char *nb = realloc(st->buf, nc);
        if (!nb) goto oom;
        st->buf = nb;
        st->bcap = nc;
    }
    if (st->n_bpos == st->cap_bpos) {
        size_t nc = st->cap_bpos ? st->cap_bpos * 2 : 64;
        gr_bpos *np = realloc(st->bpos, nc * sizeof *np);
        if (!np) goto oom;
        st->bpos = np;
        st->cap_bpos = nc;
    }
    st->bpos[st->n_bpos++] = (gr_bpos){id, st->blen, st->blen + fl};
    memcpy(st->buf + st->blen, piece, fl);
    st->blen += fl;
    st->buf[st->blen] = 0;
    size_t maxg = 0;
    for (size_t k = 0; k < lz->n_pat; k++)
        if (rx_groups(lz->rx[k]) > maxg) maxg = rx_groups(lz->rx[k]);
    long *groups = malloc(2 * (maxg + 1) * sizeof *groups);
    if (!groups) goto oom;
    for (size_t k = 0; k < lz->n_pat; k++) {
        long start = gr_pattern_find(st, k, groups);
        if (start == -2) {
            free(groups);
            bk_err(err, errlen, "the grammar trigger pattern %s took more than %ld steps to match; bankml stops "
                   "there", lz->pat[k], RX_MAX_STEPS);
            bk_err(st->err, sizeof st->err, "%s", err);
            return -1;
        }
        if (start < 0) continue;
        free(groups);
        st->awaiting = 0;
        /* replay the tokens that overlap [start, end), the first one cut */
        size_t s0 = (size_t)start;
        for (size_t i = 0; i < st->n_bpos; i++) {
            gr_bpos b = st->bpos[i];
            if (b.end <= s0) continue;
            size_t ps = b.start < s0 ? s0 : b.start;
            if (gr_accept_token(st, b.tok, st->buf + ps, b.end - ps, err, errlen)) return -1;
        }
        st->blen = 0;
        st->n_bpos = 0;
        return 0;
    }
    free(groups);
    return 0;
oom:
    bk_err(err, errlen, "out of memory");
    bk_err(st->err, sizeof st->err, "out of memory");
    return -1;
}

int gr_accept(gr_state *st, int32_t id, char *err, size_t errlen)
{
    const gr_vocab *v = st->v;
    st->err[0] = 0;
    if (id < 0 || id >= v->n) {
        bk_err(err, errlen, "the grammar cannot accept token %d: it is outside the vocabulary", (int)id);
        return -1;
    }
    if (st->awaiting) return gr_accept_awaiting(st, id, err, errlen);
    if (v->eog[id]) {
        if (gr_can_end(st)) return 0;
        bk_err(err, errlen, "the grammar cannot end here, yet token %d ended the answer", (int)id);
        return -1;
    }
    return gr_accept_token(st, id, v->bytes + v->off[id], v->plen[id], err, errlen);
}
