/*
 * peg.c -- the PEG arena: builder, text form, dump, and the code-point trie
 * (see peg.h). The parse is in peg_parse.c.
 */
#include "text/peg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ---- */

void peg_init(peg_arena *a)
{
    memset(a, 0, sizeof *a);
    a->root = PEG_INVALID;
}

static void pg_str_free(peg_str *s) { free(s->s); s->s = NULL; s->n = 0; }

void peg_free(peg_arena *a)
{
    for (size_t i = 0; i < a->n; i++) {
        peg_parser *p = &a->p[i];
        pg_str_free(&p->str);
        pg_str_free(&p->schema);
        free(p->kids);
        free(p->ranges);
        for (size_t k = 0; k < p->ndelims; k++) pg_str_free(&p->delims[k]);
        free(p->delims);
    }
    for (size_t i = 0; i < a->nrules; i++) pg_str_free(&a->rules[i].name);
    free(a->p);
    free(a->rules);
    peg_init(a);
}

static int pg_dup(peg_arena *a, peg_str *d, const char *s, size_t n)
{
    d->s = malloc(n + 1);
    if (!d->s) { a->oom = 1; d->n = 0; return -1; }
    if (n) memcpy(d->s, s, n);
    d->s[n] = 0;
    d->n = n;
    return 0;
}

static size_t pg_add(peg_arena *a, peg_kind kind)
{
    if (a->oom) return PEG_INVALID;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        peg_parser *p = realloc(a->p, cap * sizeof *p);
        if (!p) { a->oom = 1; return PEG_INVALID; }
        a->p = p;
        a->cap = cap;
    }
    peg_parser *p = &a->p[a->n];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->child = PEG_INVALID;
    return a->n++;
}

size_t peg_rule_id(const peg_arena *a, const char *name, size_t n)
{
    for (size_t i = 0; i < a->nrules; i++)
        if (a->rules[i].name.n == n && memcmp(a->rules[i].name.s, name, n) == 0) return a->rules[i].id;
    return PEG_INVALID;
}

/* rules_[name] = id: an existing entry keeps its place */
static void pg_set_rule(peg_arena *a, const char *name, size_t n, size_t id)
{
    for (size_t i = 0; i < a->nrules; i++)
        if (a->rules[i].name.n == n && memcmp(a->rules[i].name.s, name, n) == 0) { a->rules[i].id = id; return; }
    if (a->nrules == a->rcap) {
        size_t cap = a->rcap ? a->rcap * 2 : 16;
        peg_rule_entry *r = realloc(a->rules, cap * sizeof *r);
        if (!r) { a->oom = 1; return; }
        a->rules = r;
        a->rcap = cap;
    }
    if (pg_dup(a, &a->rules[a->nrules].name, name, n) == 0) a->rules[a->nrules++].id = id;
}

/* ---- builder ---- */

size_t peg_eps(peg_arena *a) { return pg_add(a, PEG_EPSILON); }
size_t peg_start(peg_arena *a) { return pg_add(a, PEG_START); }
size_t peg_end(peg_arena *a) { return pg_add(a, PEG_END); }
size_t peg_any(peg_arena *a) { return pg_add(a, PEG_ANY); }
size_t peg_space(peg_arena *a) { return pg_add(a, PEG_SPACE); }

static size_t pg_with_str(peg_arena *a, peg_kind kind, const char *s, size_t n)
{
    size_t id = pg_add(a, kind);
    if (id == PEG_INVALID) return id;
    if (pg_dup(a, &a->p[id].str, s, n)) return PEG_INVALID;
    return id;
}

size_t peg_literal(peg_arena *a, const char *s, size_t n) { return pg_with_str(a, PEG_LITERAL, s, n); }
size_t peg_literal_c(peg_arena *a, const char *s) { return peg_literal(a, s, strlen(s)); }
size_t peg_ref(peg_arena *a, const char *name) { return pg_with_str(a, PEG_REF, name, strlen(name)); }

static size_t pg_one(peg_arena *a, peg_kind kind, size_t child)
{
    if (child == PEG_INVALID) { a->oom = 1; return PEG_INVALID; }
    size_t id = pg_add(a, kind);
    if (id != PEG_INVALID) a->p[id].child = child;
    return id;
}

size_t peg_peek(peg_arena *a, size_t child) { return pg_one(a, PEG_AND, child); }
size_t peg_negate(peg_arena *a, size_t child) { return pg_one(a, PEG_NOT, child); }
size_t peg_atomic(peg_arena *a, size_t child) { return pg_one(a, PEG_ATOMIC, child); }

size_t peg_repeat(peg_arena *a, size_t child, int min, int max)
{
    size_t id = pg_one(a, PEG_REPETITION, child);
    if (id != PEG_INVALID) { a->p[id].min = min; a->p[id].max = max; }
    return id;
}

size_t peg_optional(peg_arena *a, size_t child) { return peg_repeat(a, child, 0, 1); }
size_t peg_zero_or_more(peg_arena *a, size_t child) { return peg_repeat(a, child, 0, -1); }
size_t peg_one_or_more(peg_arena *a, size_t child) { return peg_repeat(a, child, 1, -1); }

static size_t pg_list(peg_arena *a, peg_kind kind, const size_t *ids, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == PEG_INVALID || ids[i] >= a->n) { a->oom = 1; return PEG_INVALID; }
        total += a->p[ids[i]].kind == kind ? a->p[ids[i]].nkids : 1;
    }
    size_t *kids = malloc((total ? total : 1) * sizeof *kids);
    if (!kids) { a->oom = 1; return PEG_INVALID; }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const peg_parser *c = &a->p[ids[i]];
        if (c->kind == kind) {
            if (c->nkids) memcpy(kids + k, c->kids, c->nkids * sizeof *kids);
            k += c->nkids;
        } else {
            kids[k++] = ids[i];
        }
    }
    size_t id = pg_add(a, kind);
    if (id == PEG_INVALID) { free(kids); return id; }
    a->p[id].kids = kids;
    a->p[id].nkids = total;
    return id;
}

size_t peg_sequence(peg_arena *a, const size_t *ids, size_t n) { return pg_list(a, PEG_SEQUENCE, ids, n); }
size_t peg_choice(peg_arena *a, const size_t *ids, size_t n) { return pg_list(a, PEG_CHOICE, ids, n); }
size_t peg_seq2(peg_arena *a, size_t x, size_t y) { size_t v[2] = { x, y }; return peg_sequence(a, v, 2); }
size_t peg_alt2(peg_arena *a, size_t x, size_t y) { size_t v[2] = { x, y }; return peg_choice(a, v, 2); }

/* b11669's parse_char_class_char: one (possibly escaped) character of a class */
static uint32_t pg_hex(const char *s, size_t n, size_t pos, int count, int *ok)
{
    uint32_t v = 0;
    *ok = 0;
    if (pos + (size_t)count > n) return 0;
    for (int i = 0; i < count; i++) {
        char c = s[pos + i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        v = (v << 4) + (uint32_t)d;
    }
    *ok = 1;
    return v;
}

static uint32_t pg_class_char(const char *s, size_t n, size_t pos, size_t *used)
{
    if (s[pos] == '\\' && pos + 1 < n) {
        int ok, cnt = 0;
        char e = s[pos + 1];
        *used = 2;
        switch (e) {
        case 'x': cnt = 2; break;
        case 'u': cnt = 4; break;
        case 'U': cnt = 8; break;
        case 'n': return '\n';
        case 't': return '\t';
        case 'r': return '\r';
        default: return (uint32_t)(unsigned char)e;     /* \\ \] \[ and any other */
        }
        uint32_t v = pg_hex(s, n, pos + 2, cnt, &ok);
        if (ok) { *used = 2 + (size_t)cnt; return v; }
        return (uint32_t)(unsigned char)e;
    }
    *used = 1;
    return (uint32_t)(unsigned char)s[pos];
}

static int pg_parse_classes(peg_arena *a, peg_parser *p, const char *cls, size_t n)
{
    size_t b = 0, e = n;
    if (e > b && cls[b] == '[') b++;
    if (e > b && cls[e - 1] == ']') e--;
    if (e > b && cls[b] == '^') { p->negated = 1; b++; }
    const char *s = cls + b;
    size_t len = e - b, i = 0, cap = 0;
    while (i < len) {
        size_t used;
        uint32_t lo = pg_class_char(s, len, i, &used), hi = lo;
        i += used;
        if (i + 1 < len && s[i] == '-') {
            hi = pg_class_char(s, len, i + 1, &used);
            i += 1 + used;
        }
        if (p->nranges == cap) {
            cap = cap ? cap * 2 : 8;
            peg_range *r = realloc(p->ranges, cap * sizeof *r);
            if (!r) { a->oom = 1; return -1; }
            p->ranges = r;
        }
        p->ranges[p->nranges].start = lo;
        p->ranges[p->nranges++].end = hi;
    }
    return 0;
}

size_t peg_chars(peg_arena *a, const char *classes, int min, int max)
{
    size_t n = strlen(classes);
    size_t id = pg_with_str(a, PEG_CHARS, classes, n);
    if (id == PEG_INVALID) return id;
    a->p[id].min = min;
    a->p[id].max = max;
    if (n && pg_parse_classes(a, &a->p[id], classes, n)) return PEG_INVALID;
    return id;
}

size_t peg_string_content(peg_arena *a, char delimiter)
{
    size_t id = pg_add(a, PEG_STRING);
    if (id != PEG_INVALID) a->p[id].delim = delimiter;
    return id;
}

static size_t pg_delims(peg_arena *a, peg_kind kind, size_t child, const peg_str *d, size_t n)
{
    size_t id = pg_add(a, kind);
    if (id == PEG_INVALID) return id;
    peg_parser *p = &a->p[id];
    p->child = child;
    if (n) {
        p->delims = calloc(n, sizeof *p->delims);
        if (!p->delims) { a->oom = 1; return PEG_INVALID; }
        for (size_t i = 0; i < n; i++) {
            if (pg_dup(a, &p->delims[i], d[i].s, d[i].n)) return PEG_INVALID;
            p->ndelims++;
        }
    }
    return id;
}

size_t peg_until(peg_arena *a, const char *delim, size_t n)
{
    peg_str d = { (char *)delim, n };
    return pg_delims(a, PEG_UNTIL, PEG_INVALID, &d, 1);
}

size_t peg_until_one_of(peg_arena *a, const peg_str *delims, size_t n) { return pg_delims(a, PEG_UNTIL, PEG_INVALID, delims, n); }
size_t peg_rest(peg_arena *a) { return pg_delims(a, PEG_UNTIL, PEG_INVALID, NULL, 0); }

size_t peg_ac(peg_arena *a, size_t child, const peg_str *delims, size_t n)
{
    if (n == 0 || child == PEG_INVALID) { a->oom = 1; return PEG_INVALID; }   /* b11669 throws */
    return pg_delims(a, PEG_AC, child, delims, n);
}

size_t peg_schema(peg_arena *a, size_t child, const char *name, const char *schema_json, size_t schema_len, int raw)
{
    size_t id = pg_one(a, PEG_SCHEMA, child);
    if (id == PEG_INVALID) return id;
    if (pg_dup(a, &a->p[id].str, name, strlen(name))) return PEG_INVALID;
    if (schema_json && pg_dup(a, &a->p[id].schema, schema_json, schema_len)) return PEG_INVALID;
    a->p[id].flag = raw ? 1 : 0;
    return id;
}

size_t peg_tag(peg_arena *a, const char *tag, size_t child)
{
    size_t id = pg_one(a, PEG_TAG, child);
    if (id != PEG_INVALID && pg_dup(a, &a->p[id].str, tag, strlen(tag))) return PEG_INVALID;
    return id;
}

size_t peg_gbnf(peg_arena *a, size_t child, const char *grammar)
{
    size_t id = pg_one(a, PEG_GBNF, child);
    if (id != PEG_INVALID && pg_dup(a, &a->p[id].str, grammar, strlen(grammar))) return PEG_INVALID;
    return id;
}

/* std::regex_replace(name, "[^a-zA-Z0-9-]+", "-") */
static char *pg_clean_name(const char *name, size_t *n_out)
{
    size_t n = strlen(name), k = 0;
    char *d = malloc(n + 1);
    if (!d) return NULL;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)name[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-') {
            d[k++] = (char)c;
            i++;
        } else {
            d[k++] = '-';
            while (i < n) {
                c = (unsigned char)name[i];
                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-') break;
                i++;
            }
        }
    }
    d[k] = 0;
    *n_out = k;
    return d;
}

static size_t pg_rule_node(peg_arena *a, const char *clean, size_t n, size_t child, int trigger)
{
    size_t id = pg_one(a, PEG_RULE, child);
    if (id == PEG_INVALID || pg_dup(a, &a->p[id].str, clean, n)) return PEG_INVALID;
    a->p[id].flag = trigger ? 1 : 0;
    return id;
}

size_t peg_rule(peg_arena *a, const char *name, size_t child, int trigger)
{
    size_t n;
    char *clean = pg_clean_name(name, &n);
    if (!clean) { a->oom = 1; return PEG_INVALID; }
    size_t id = pg_rule_node(a, clean, n, child, trigger), ref = PEG_INVALID;
    if (id != PEG_INVALID) {
        pg_set_rule(a, clean, n, id);
        ref = pg_with_str(a, PEG_REF, clean, n);
    }
    free(clean);
    return ref;
}

size_t peg_rule_fn(peg_arena *a, const char *name, size_t (*fn)(peg_arena *, void *), void *ctx, int trigger)
{
    size_t n, ref = PEG_INVALID;
    char *clean = pg_clean_name(name, &n);
    if (!clean) { a->oom = 1; return PEG_INVALID; }
    if (peg_rule_id(a, clean, n) != PEG_INVALID) {
        ref = pg_with_str(a, PEG_REF, clean, n);
    } else {
        size_t ph = peg_any(a);                          /* the placeholder b11669 adds */
        size_t pr = pg_rule_node(a, clean, n, ph, trigger);
        if (pr != PEG_INVALID) {
            pg_set_rule(a, clean, n, pr);
            size_t body = fn(a, ctx);
            size_t id = pg_rule_node(a, clean, n, body, trigger);
            if (id != PEG_INVALID) {
                pg_set_rule(a, clean, n, id);
                ref = pg_with_str(a, PEG_REF, clean, n);
            }
        }
    }
    free(clean);
    return ref;
}

/* ---- b11669's composite parsers ---- */

static size_t pg_b_dq(peg_arena *a, void *u)
{
    (void)u;
    size_t v[3];                                 /* C leaves initializer order open: one call a line */
    v[0] = peg_literal_c(a, "\"");
    v[1] = peg_string_content(a, '"');
    v[2] = peg_literal_c(a, "\"");
    return peg_sequence(a, v, 3);
}

static size_t pg_b_sq(peg_arena *a, void *u)
{
    (void)u;
    size_t v[3];
    v[0] = peg_literal_c(a, "'");
    v[1] = peg_string_content(a, '\'');
    v[2] = peg_literal_c(a, "'");
    return peg_sequence(a, v, 3);
}

static size_t pg_b_qs(peg_arena *a, void *u)
{
    (void)u;
    size_t v[2];
    v[0] = peg_double_quoted_string(a);
    v[1] = peg_single_quoted_string(a);
    return peg_choice(a, v, 2);
}

size_t peg_double_quoted_string(peg_arena *a) { return peg_rule_fn(a, "double-quoted-string", pg_b_dq, NULL, 0); }
size_t peg_single_quoted_string(peg_arena *a) { return peg_rule_fn(a, "single-quoted-string", pg_b_sq, NULL, 0); }
size_t peg_quoted_string(peg_arena *a) { return peg_rule_fn(a, "quoted-string", pg_b_qs, NULL, 0); }

static size_t pg_b_number(peg_arena *a, void *u)
{
    (void)u;
    size_t digit1_9 = peg_chars(a, "[1-9]", 1, 1);
    size_t digits = peg_chars(a, "[0-9]", 1, -1);
    size_t z = peg_literal_c(a, "0");
    size_t tail = peg_chars(a, "[0-9]", 0, -1);
    size_t int_part = peg_alt2(a, z, peg_seq2(a, digit1_9, tail));
    size_t frac = peg_seq2(a, peg_literal_c(a, "."), digits);
    size_t e1 = peg_literal_c(a, "e");
    size_t e2 = peg_literal_c(a, "E");
    size_t e = peg_alt2(a, e1, e2);
    size_t sign = peg_optional(a, peg_chars(a, "[+-]", 1, 1));
    size_t ev[3] = { e, sign, digits };
    size_t exp = peg_sequence(a, ev, 3);
    size_t notc = peg_negate(a, peg_chars(a, "[0-9.eE+-]", 1, 1));
    size_t minus = peg_optional(a, peg_literal_c(a, "-"));
    size_t fo = peg_optional(a, frac);
    size_t eo = peg_optional(a, exp);
    size_t v[5] = { minus, int_part, fo, eo, notc };
    return peg_sequence(a, v, 5);
}

static size_t pg_b_jstring(peg_arena *a, void *u) { return pg_b_dq(a, u); }

static size_t pg_b_bool(peg_arena *a, void *u)
{
    const char **w = u;
    size_t t = peg_literal_c(a, w[0]);
    size_t f = peg_literal_c(a, w[1]);
    return peg_alt2(a, t, f);
}

static size_t pg_b_lit(peg_arena *a, void *u) { return peg_literal_c(a, u); }

/* object / dict: "{" ws ("}" | members ws "}") [ws] */
typedef struct { int python; } pg_cont;

static size_t pg_b_object(peg_arena *a, void *u)
{
    int py = ((pg_cont *)u)->python;
    size_t ws = peg_space(a);
    size_t key = py ? peg_python_string(a) : peg_json_string(a);
    size_t colon = peg_literal_c(a, ":");
    size_t val = py ? peg_python_value(a) : peg_json(a);
    size_t mv[5] = { key, ws, colon, ws, val };
    size_t member = peg_sequence(a, mv, 5);
    size_t comma = peg_literal_c(a, ",");
    size_t rv[4] = { ws, comma, ws, member };
    size_t more = peg_zero_or_more(a, peg_sequence(a, rv, 4));
    size_t members = peg_seq2(a, member, more);
    size_t open = peg_literal_c(a, "{");
    size_t close1 = peg_literal_c(a, "}");
    size_t close2 = peg_literal_c(a, "}");
    size_t tv[3] = { members, ws, close2 };
    size_t body = peg_alt2(a, close1, peg_sequence(a, tv, 3));
    size_t v[4] = { open, ws, body, ws };
    return peg_sequence(a, v, py ? 4 : 3);
}

static size_t pg_b_array(peg_arena *a, void *u)
{
    int py = ((pg_cont *)u)->python;
    size_t ws = peg_space(a);
    size_t first = py ? peg_python_value(a) : peg_json(a);
    size_t comma = peg_literal_c(a, ",");
    size_t next = py ? peg_python_value(a) : peg_json(a);
    size_t more;
    if (py) {
        size_t rv[3] = { comma, ws, next };
        more = peg_zero_or_more(a, peg_sequence(a, rv, 3));
    } else {
        size_t rv[4] = { ws, comma, ws, next };
        more = peg_zero_or_more(a, peg_sequence(a, rv, 4));
    }
    size_t elements = peg_seq2(a, first, more);
    size_t open = peg_literal_c(a, "[");
    size_t close1 = peg_literal_c(a, "]");
    size_t close2 = peg_literal_c(a, "]");
    size_t tv[3] = { elements, ws, close2 };
    size_t body = peg_alt2(a, close1, peg_sequence(a, tv, 3));
    size_t v[4] = { open, ws, body, ws };
    return peg_sequence(a, v, py ? 4 : 3);
}

static size_t pg_b_value(peg_arena *a, void *u)
{
    int py = ((pg_cont *)u)->python;
    size_t v[6];
    if (py) {
        v[0] = peg_python_dict(a); v[1] = peg_python_array(a); v[2] = peg_python_string(a);
        v[3] = peg_json_number(a); v[4] = peg_python_bool(a); v[5] = peg_python_null(a);
    } else {
        v[0] = peg_json_object(a); v[1] = peg_json_array(a); v[2] = peg_json_string(a);
        v[3] = peg_json_number(a); v[4] = peg_json_bool(a); v[5] = peg_json_null(a);
    }
    return peg_choice(a, v, 6);
}

static pg_cont pg_json_c = { 0 }, pg_py_c = { 1 };
static const char *pg_jbool[2] = { "true", "false" }, *pg_pbool[2] = { "True", "False" };

size_t peg_json_number(peg_arena *a) { return peg_rule_fn(a, "json-number", pg_b_number, NULL, 0); }
size_t peg_json_string(peg_arena *a) { return peg_rule_fn(a, "json-string", pg_b_jstring, NULL, 0); }
size_t peg_json_bool(peg_arena *a) { return peg_rule_fn(a, "json-bool", pg_b_bool, (void *)pg_jbool, 0); }
size_t peg_json_null(peg_arena *a) { return peg_rule_fn(a, "json-null", pg_b_lit, (void *)"null", 0); }
size_t peg_json_object(peg_arena *a) { return peg_rule_fn(a, "json-object", pg_b_object, &pg_json_c, 0); }
size_t peg_json_array(peg_arena *a) { return peg_rule_fn(a, "json-array", pg_b_array, &pg_json_c, 0); }
size_t peg_json(peg_arena *a) { return peg_rule_fn(a, "json-value", pg_b_value, &pg_json_c, 0); }
size_t peg_python_string(peg_arena *a) { return peg_rule_fn(a, "python-string", pg_b_qs, NULL, 0); }
size_t peg_python_bool(peg_arena *a) { return peg_rule_fn(a, "python-bool", pg_b_bool, (void *)pg_pbool, 0); }
size_t peg_python_null(peg_arena *a) { return peg_rule_fn(a, "python-none", pg_b_lit, (void *)"None", 0); }
size_t peg_python_dict(peg_arena *a) { return peg_rule_fn(a, "python-dict", pg_b_object, &pg_py_c, 0); }
size_t peg_python_array(peg_arena *a) { return peg_rule_fn(a, "python-array", pg_b_array, &pg_py_c, 0); }
size_t peg_python_value(peg_arena *a) { return peg_rule_fn(a, "python-value", pg_b_value, &pg_py_c, 0); }

size_t peg_json_member(peg_arena *a, const char *key, size_t value)
{
    size_t kn = strlen(key);
    char *q = malloc(kn + 3);
    if (!q) { a->oom = 1; return PEG_INVALID; }
    q[0] = '"';
    memcpy(q + 1, key, kn);
    q[kn + 1] = '"';
    size_t ws = peg_space(a);
    size_t v[5];
    v[0] = peg_literal(a, q, kn + 2);
    v[1] = ws;
    v[2] = peg_literal_c(a, ":");
    v[3] = ws;
    v[4] = value;
    free(q);
    return peg_sequence(a, v, 5);
}

size_t peg_marker(peg_arena *a)
{
    /* literal("<") + until(">") + literal(">"): b11669's build (GCC) evaluates an
     * operator+ chain right to left, so the ids come out as: ">", until, "<",
     * Sequence("<", until), Sequence("<", until, ">") (measured on the library) */
    size_t close = peg_literal_c(a, ">");
    size_t body = peg_until(a, ">", 1);
    size_t open = peg_literal_c(a, "<");
    size_t sharp = peg_seq2(a, peg_seq2(a, open, body), close);
    close = peg_literal_c(a, "]");
    body = peg_until(a, "]", 1);
    open = peg_literal_c(a, "[");
    size_t square = peg_seq2(a, peg_seq2(a, open, body), close);
    return peg_alt2(a, sharp, square);
}

static int pg_err(char *err, size_t errlen, const char *msg)
{
    if (errlen) snprintf(err, errlen, "%s", msg);
    return -1;
}

static size_t pg_resolve(const peg_arena *a, size_t id, int *bad)
{
    if (id == PEG_INVALID || id >= a->n) return id;
    const peg_parser *p = &a->p[id];
    if (p->kind != PEG_REF) return id;
    size_t r = peg_rule_id(a, p->str.s, p->str.n);
    if (r == PEG_INVALID) *bad = 1;
    return r;
}

int peg_build(peg_arena *a, size_t root, char *err, size_t errlen)
{
    if (a->oom) return pg_err(err, errlen, "out of memory while building the PEG arena");
    a->root = root;
    int bad = 0;
    for (size_t i = 0; i < a->n && !bad; i++) {
        peg_parser *p = &a->p[i];
        for (size_t k = 0; k < p->nkids; k++) p->kids[k] = pg_resolve(a, p->kids[k], &bad);
        if (p->child != PEG_INVALID) p->child = pg_resolve(a, p->child, &bad);
    }
    if (!bad && a->root != PEG_INVALID) a->root = pg_resolve(a, a->root, &bad);
    if (bad) return pg_err(err, errlen, "Rule not found (a ref names no rule)");
    return 0;
}

/* ---- text form ---- */

static const char *pg_kind_names[PEG_NKINDS] = {
    "epsilon", "start", "end", "literal", "sequence", "choice", "repetition", "and", "not", "any", "space",
    "chars", "string", "until", "schema", "rule", "ref", "atomic", "tag", "gbnf", "ac"
};

static void pg_put_ids(jbuf *b, const size_t *ids, size_t n)
{
    jbuf_putc(b, '[');
    for (size_t i = 0; i < n; i++) jbuf_printf(b, i ? ",%zu" : "%zu", ids[i]);
    jbuf_putc(b, ']');
}

static void pg_put_child(jbuf *b, size_t child)
{
    /* nlohmann writes a size_t: PEG_INVALID is 18446744073709551615 */
    jbuf_printf(b, "\"child\":%zu", child);
}

static void pg_put_strs(jbuf *b, const peg_str *s, size_t n)
{
    jbuf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i) jbuf_putc(b, ',');
        json_put_str_nl(b, s[i].s, s[i].n);
    }
    jbuf_putc(b, ']');
}

static void pg_save_one(const peg_parser *p, jbuf *b)
{
    jbuf_puts(b, "{\"type\":\"");
    jbuf_puts(b, pg_kind_names[p->kind]);
    jbuf_putc(b, '"');
    switch (p->kind) {
    case PEG_LITERAL: jbuf_puts(b, ",\"literal\":"); json_put_str_nl(b, p->str.s, p->str.n); break;
    case PEG_SEQUENCE: case PEG_CHOICE: jbuf_puts(b, ",\"children\":"); pg_put_ids(b, p->kids, p->nkids); break;
    case PEG_REPETITION:
        jbuf_putc(b, ','); pg_put_child(b, p->child);
        jbuf_printf(b, ",\"min_count\":%d,\"max_count\":%d", p->min, p->max);
        break;
    case PEG_AND: case PEG_NOT: case PEG_ATOMIC: jbuf_putc(b, ','); pg_put_child(b, p->child); break;
    case PEG_CHARS:
        jbuf_puts(b, ",\"pattern\":"); json_put_str_nl(b, p->str.s, p->str.n);
        jbuf_puts(b, ",\"ranges\":[");
        for (size_t i = 0; i < p->nranges; i++)
            jbuf_printf(b, "%s{\"start\":%u,\"end\":%u}", i ? "," : "", p->ranges[i].start, p->ranges[i].end);
        jbuf_printf(b, "],\"negated\":%s,\"min_count\":%d,\"max_count\":%d", p->negated ? "true" : "false", p->min, p->max);
        break;
    case PEG_STRING: jbuf_puts(b, ",\"delimiter\":"); json_put_str_nl(b, &p->delim, 1); break;
    case PEG_UNTIL: jbuf_puts(b, ",\"delimiters\":"); pg_put_strs(b, p->delims, p->ndelims); break;
    case PEG_SCHEMA:
        jbuf_putc(b, ','); pg_put_child(b, p->child);
        jbuf_puts(b, ",\"name\":"); json_put_str_nl(b, p->str.s, p->str.n);
        jbuf_printf(b, ",\"raw\":%s", p->flag ? "true" : "false");
        if (p->schema.s) { jbuf_puts(b, ",\"schema\":"); jbuf_put(b, p->schema.s, p->schema.n); }
        break;
    case PEG_RULE:
        jbuf_puts(b, ",\"name\":"); json_put_str_nl(b, p->str.s, p->str.n);
        jbuf_putc(b, ','); pg_put_child(b, p->child);
        jbuf_printf(b, ",\"trigger\":%s", p->flag ? "true" : "false");
        break;
    case PEG_REF: jbuf_puts(b, ",\"name\":"); json_put_str_nl(b, p->str.s, p->str.n); break;
    case PEG_TAG:
        jbuf_putc(b, ','); pg_put_child(b, p->child);
        jbuf_puts(b, ",\"tag\":"); json_put_str_nl(b, p->str.s, p->str.n);
        break;
    case PEG_GBNF:
        jbuf_putc(b, ','); pg_put_child(b, p->child);
        jbuf_puts(b, ",\"grammar\":"); json_put_str_nl(b, p->str.s, p->str.n);
        break;
    case PEG_AC:
        jbuf_putc(b, ','); pg_put_child(b, p->child);
        jbuf_puts(b, ",\"delimiters\":"); pg_put_strs(b, p->delims, p->ndelims);
        break;
    default: break;
    }
    jbuf_putc(b, '}');
}

static int pg_rule_cmp(const void *x, const void *y)
{
    const peg_rule_entry *p = *(const peg_rule_entry *const *)x, *q = *(const peg_rule_entry *const *)y;
    if (p->id != q->id) return p->id < q->id ? -1 : 1;
    size_t n = p->name.n < q->name.n ? p->name.n : q->name.n;
    int c = memcmp(p->name.s, q->name.s, n);
    return c ? c : (p->name.n < q->name.n ? -1 : p->name.n > q->name.n);
}

void peg_save(const peg_arena *a, jbuf *out)
{
    jbuf_puts(out, "{\"parsers\":[");
    for (size_t i = 0; i < a->n; i++) {
        if (i) jbuf_putc(out, ',');
        pg_save_one(&a->p[i], out);
    }
    jbuf_puts(out, "],\"rules\":{");
    /* by parser id, then name (the kit's order) */
    const peg_rule_entry **ord = malloc((a->nrules ? a->nrules : 1) * sizeof *ord);
    if (!ord) { out->oom = 1; return; }
    for (size_t i = 0; i < a->nrules; i++) ord[i] = &a->rules[i];
    qsort(ord, a->nrules, sizeof *ord, pg_rule_cmp);
    for (size_t i = 0; i < a->nrules; i++) {
        if (i) jbuf_putc(out, ',');
        json_put_str_nl(out, ord[i]->name.s, ord[i]->name.n);
        jbuf_printf(out, ":%zu", ord[i]->id);
    }
    free(ord);
    jbuf_printf(out, "},\"root\":%zu}", a->root);
}

/* ---- load ---- */

static int pg_get_u(const json_value *v, size_t *out)
{
    if (!v || v->type != JSON_NUMBER) return -1;
    char *end;
    if (v->len == 0 || v->str[0] == '-') return -1;
    unsigned long long x = strtoull(v->str, &end, 10);
    if (end != v->str + v->len) return -1;
    *out = (size_t)x;
    return 0;
}

static int pg_get_i(const json_value *v, int *out)
{
    int64_t x;
    if (!v || !json_as_i64(v, &x) || x < INT32_MIN || x > INT32_MAX) return -1;
    *out = (int)x;
    return 0;
}

static int pg_get_b(const json_value *v, int *out)
{
    if (!v || (v->type != JSON_TRUE && v->type != JSON_FALSE)) return -1;
    *out = v->type == JSON_TRUE;
    return 0;
}

static int pg_get_s(peg_arena *a, const json_value *v, peg_str *out)
{
    if (!v || v->type != JSON_STRING) return -1;
    return pg_dup(a, out, v->str, v->len);
}

static int pg_get_strs(peg_arena *a, const json_value *v, peg_parser *p)
{
    if (!v || v->type != JSON_ARRAY) return -1;
    if (v->n) {
        p->delims = calloc(v->n, sizeof *p->delims);
        if (!p->delims) { a->oom = 1; return -1; }
    }
    for (size_t i = 0; i < v->n; i++) {
        if (pg_get_s(a, v->items[i], &p->delims[i])) return -1;
        p->ndelims++;
    }
    return 0;
}

static void pg_put_compact(jbuf *b, const json_value *v);

/* one parser; returns NULL or the reason */
static const char *pg_load_one(peg_arena *a, const json_value *j, peg_parser *p, char *tmp, size_t tmplen)
{
    const json_value *t = json_get(j, "type");
    if (j->type != JSON_OBJECT || !t || t->type != JSON_STRING) return "Parser variant JSON missing or invalid 'type' field";
    int k = -1;
    for (int i = 0; i < PEG_NKINDS; i++)
        if (strlen(pg_kind_names[i]) == t->len && memcmp(pg_kind_names[i], t->str, t->len) == 0) k = i;
    if (k < 0) { snprintf(tmp, tmplen, "Unknown parser type: %.*s", (int)(t->len > 200 ? 200 : t->len), t->str); return tmp; }
    p->kind = (peg_kind)k;
    p->child = PEG_INVALID;
    const json_value *ch = json_get(j, "child");
    switch (p->kind) {
    case PEG_LITERAL: if (pg_get_s(a, json_get(j, "literal"), &p->str)) return "literal parser missing or invalid 'literal' field"; break;
    case PEG_SEQUENCE: case PEG_CHOICE: {
        const json_value *c = json_get(j, "children");
        if (!c || c->type != JSON_ARRAY)
            return p->kind == PEG_SEQUENCE ? "sequence parser missing or invalid 'children' field" : "choice parser missing or invalid 'children' field";
        p->kids = malloc((c->n ? c->n : 1) * sizeof *p->kids);
        if (!p->kids) { a->oom = 1; return "out of memory"; }
        for (size_t i = 0; i < c->n; i++) if (pg_get_u(c->items[i], &p->kids[i])) return "a child id is not an unsigned integer";
        p->nkids = c->n;
        break;
    }
    case PEG_REPETITION:
        if (pg_get_u(ch, &p->child) || pg_get_i(json_get(j, "min_count"), &p->min) || pg_get_i(json_get(j, "max_count"), &p->max))
            return "repetition parser missing required fields";
        break;
    case PEG_AND: if (pg_get_u(ch, &p->child)) return "and parser missing 'child' field"; break;
    case PEG_NOT: if (pg_get_u(ch, &p->child)) return "not parser missing 'child' field"; break;
    case PEG_ATOMIC: if (pg_get_u(ch, &p->child)) return "tag parser missing required fields"; break;
    case PEG_CHARS: {
        const json_value *r = json_get(j, "ranges");
        if (pg_get_s(a, json_get(j, "pattern"), &p->str) || !r || r->type != JSON_ARRAY || pg_get_b(json_get(j, "negated"), &p->negated) ||
            pg_get_i(json_get(j, "min_count"), &p->min) || pg_get_i(json_get(j, "max_count"), &p->max))
            return "chars parser missing required fields";
        p->ranges = malloc((r->n ? r->n : 1) * sizeof *p->ranges);
        if (!p->ranges) { a->oom = 1; return "out of memory"; }
        for (size_t i = 0; i < r->n; i++) {
            size_t s, e;
            if (pg_get_u(json_get(r->items[i], "start"), &s) || pg_get_u(json_get(r->items[i], "end"), &e) || s > UINT32_MAX || e > UINT32_MAX)
                return "char_range missing 'start' or 'end' field";
            p->ranges[i].start = (uint32_t)s;
            p->ranges[i].end = (uint32_t)e;
        }
        p->nranges = r->n;
        break;
    }
    case PEG_STRING: {
        const json_value *d = json_get(j, "delimiter");
        if (!d || d->type != JSON_STRING) return "string parser missing delimiter field.";
        if (d->len == 0) return "string parser delimiter is empty.";
        p->delim = d->str[0];
        break;
    }
    case PEG_UNTIL: if (pg_get_strs(a, json_get(j, "delimiters"), p)) return "until parser missing or invalid 'delimiters' field"; break;
    case PEG_SCHEMA: {
        if (pg_get_u(ch, &p->child) || pg_get_s(a, json_get(j, "name"), &p->str) || pg_get_b(json_get(j, "raw"), &p->flag))
            return "schema parser missing required fields";
        const json_value *s = json_get(j, "schema");
        if (s) {
            jbuf b;
            jbuf_init(&b);
            pg_put_compact(&b, s);
            int rc = pg_dup(a, &p->schema, b.p ? b.p : "", b.len);
            jbuf_free(&b);
            if (rc) return "out of memory";
        }
        break;
    }
    case PEG_RULE:
        if (pg_get_s(a, json_get(j, "name"), &p->str) || pg_get_u(ch, &p->child) || pg_get_b(json_get(j, "trigger"), &p->flag))
            return "rule parser missing required fields";
        break;
    case PEG_REF: if (pg_get_s(a, json_get(j, "name"), &p->str)) return "ref parser missing or invalid 'name' field"; break;
    case PEG_TAG: if (pg_get_u(ch, &p->child) || pg_get_s(a, json_get(j, "tag"), &p->str)) return "tag parser missing required fields"; break;
    case PEG_GBNF: if (pg_get_u(ch, &p->child) || pg_get_s(a, json_get(j, "grammar"), &p->str)) return "gbnf parser missing required fields"; break;
    case PEG_AC:
        if (pg_get_u(ch, &p->child) || pg_get_strs(a, json_get(j, "delimiters"), p) || p->ndelims == 0)
            return "ac parser requires 'child' and a non-empty 'delimiters' array";
        break;
    default: break;
    }
    return NULL;
}

/* nlohmann's dump(): compact, no spaces; numbers as their text */
static void pg_put_compact(jbuf *b, const json_value *v)
{
    switch (v->type) {
    case JSON_NULL: jbuf_puts(b, "null"); break;
    case JSON_TRUE: jbuf_puts(b, "true"); break;
    case JSON_FALSE: jbuf_puts(b, "false"); break;
    case JSON_NUMBER: jbuf_put(b, v->str, v->len); break;
    case JSON_STRING: json_put_str_nl(b, v->str, v->len); break;
    case JSON_ARRAY:
        jbuf_putc(b, '[');
        for (size_t i = 0; i < v->n; i++) { if (i) jbuf_putc(b, ','); pg_put_compact(b, v->items[i]); }
        jbuf_putc(b, ']');
        break;
    case JSON_OBJECT:
        jbuf_putc(b, '{');
        for (size_t i = 0; i < v->n; i++) {
            if (i) jbuf_putc(b, ',');
            json_put_str_nl(b, v->keys[i], v->key_lens[i]);
            jbuf_putc(b, ':');
            pg_put_compact(b, v->items[i]);
        }
        jbuf_putc(b, '}');
        break;
    }
}

static int pg_check_ids(const peg_arena *a, char *err, size_t errlen)
{
    for (size_t i = 0; i < a->n; i++) {
        const peg_parser *p = &a->p[i];
        int bad = p->child != PEG_INVALID && p->child >= a->n;
        for (size_t k = 0; k < p->nkids; k++) bad |= p->kids[k] >= a->n;
        if ((p->kind == PEG_REPETITION || p->kind == PEG_AND || p->kind == PEG_NOT || p->kind == PEG_SCHEMA || p->kind == PEG_RULE ||
             p->kind == PEG_ATOMIC || p->kind == PEG_TAG || p->kind == PEG_GBNF || p->kind == PEG_AC) && p->child == PEG_INVALID) bad = 1;
        if (p->kind == PEG_REF && peg_rule_id(a, p->str.s, p->str.n) == PEG_INVALID) {
            snprintf(err, errlen, "Rule not found: %.*s", (int)(p->str.n > 200 ? 200 : p->str.n), p->str.s);
            return -1;
        }
        if (bad) { snprintf(err, errlen, "parser %zu references an invalid parser ID", i); return -1; }
    }
    return 0;
}

int peg_load(peg_arena *a, const char *text, size_t len, char *err, size_t errlen)
{
    char jerr[160], tmp[256];
    peg_init(a);
    json_value *j = json_parse(text, len, jerr, sizeof jerr);
    if (!j) { snprintf(err, errlen, "%s", jerr); return -1; }
    const json_value *ps = json_get(j, "parsers"), *rs = json_get(j, "rules"), *root = json_get(j, "root");
    const char *why = NULL;
    if (j->type != JSON_OBJECT || !ps || ps->type != JSON_ARRAY) why = "JSON missing or invalid 'parsers' array";
    else if (!rs || rs->type != JSON_OBJECT) why = "JSON missing or invalid 'rules' object";
    else if (!root) why = "JSON missing 'root' field";
    if (!why && ps->n) {
        a->p = calloc(ps->n, sizeof *a->p);
        if (!a->p) why = "out of memory";
        a->cap = ps->n;
    }
    for (size_t i = 0; !why && i < ps->n; i++) {
        why = pg_load_one(a, ps->items[i], &a->p[i], tmp, sizeof tmp);
        a->n = i + 1;
    }
    for (size_t i = 0; !why && i < rs->n; i++) {
        size_t id;
        if (pg_get_u(rs->items[i], &id)) { why = "a rule id is not an unsigned integer"; break; }
        if (id >= a->n) {
            snprintf(tmp, sizeof tmp, "Rule '%.*s' references invalid parser ID: %zu", (int)(rs->key_lens[i] > 200 ? 200 : rs->key_lens[i]),
                     rs->keys[i], id);
            why = tmp;
            break;
        }
        pg_set_rule(a, rs->keys[i], rs->key_lens[i], id);
    }
    if (!why && pg_get_u(root, &a->root)) why = "the root is not an unsigned integer";
    if (!why && a->root != PEG_INVALID && a->root >= a->n) {
        snprintf(tmp, sizeof tmp, "Root references invalid parser ID: %zu", a->root);
        why = tmp;
    }
    if (!why && a->oom) why = "out of memory";
    json_free(j);
    if (!why && pg_check_ids(a, err, errlen)) { peg_free(a); return -1; }
    if (why) { snprintf(err, errlen, "%s", why); peg_free(a); return -1; }
    return 0;
}

/* ---- dump ---- */

static void pg_dump(const peg_arena *a, size_t id, unsigned char *seen, jbuf *o, int depth)
{
    if (id >= a->n) { jbuf_puts(o, "Unknown"); return; }
    if (depth > PEG_MAX_DEPTH || o->len > PEG_DUMP_MAX) { jbuf_puts(o, "..."); return; }
    if (seen[id]) { jbuf_puts(o, "[cycle]"); return; }
    seen[id] = 1;
    const peg_parser *p = &a->p[id];
    static const char *names[PEG_NKINDS] = { "Epsilon", "Start", "End", "Literal", "Sequence", "Choice", "Repetition", "And", "Not",
                                             "Any", "Space", "CharRepeat", "String", "Until", "Schema", "Rule", "Ref", "Atomic",
                                             "Tag", "Gbnf", "Ac" };
    jbuf_puts(o, names[p->kind]);
    switch (p->kind) {
    case PEG_EPSILON: case PEG_START: case PEG_END: case PEG_ANY: case PEG_SPACE: return;
    case PEG_LITERAL: case PEG_REF: jbuf_putc(o, '('); jbuf_put(o, p->str.s, p->str.n); jbuf_putc(o, ')'); return;
    case PEG_SEQUENCE: case PEG_CHOICE:
        jbuf_putc(o, '(');
        for (size_t i = 0; i < p->nkids; i++) { if (i) jbuf_puts(o, ", "); pg_dump(a, p->kids[i], seen, o, depth + 1); }
        jbuf_putc(o, ')');
        return;
    case PEG_REPETITION: case PEG_CHARS:
        jbuf_putc(o, '(');
        if (p->kind == PEG_CHARS) jbuf_put(o, p->str.s, p->str.n);
        else pg_dump(a, p->child, seen, o, depth + 1);
        if (p->max == -1) jbuf_printf(o, ", %d, unbounded)", p->min);
        else jbuf_printf(o, ", %d, %d)", p->min, p->max);
        return;
    case PEG_STRING: jbuf_printf(o, "(%c)", p->delim); return;
    case PEG_UNTIL: case PEG_AC:
        jbuf_putc(o, '(');
        for (size_t i = 0; i < p->ndelims; i++) { if (i) jbuf_puts(o, " | "); jbuf_put(o, p->delims[i].s, p->delims[i].n); }
        if (p->kind == PEG_AC) { jbuf_puts(o, ", "); pg_dump(a, p->child, seen, o, depth + 1); }
        jbuf_putc(o, ')');
        return;
    case PEG_SCHEMA:
        jbuf_putc(o, '('); pg_dump(a, p->child, seen, o, depth + 1); jbuf_puts(o, p->schema.s ? ", schema)" : ", null)");
        return;
    case PEG_RULE: case PEG_TAG: case PEG_GBNF:
        jbuf_putc(o, '('); jbuf_put(o, p->str.s, p->str.n); jbuf_puts(o, ", ");
        if (p->kind == PEG_TAG) {                   /* b11669's Tag dumps its child afresh */
            unsigned char *fresh = calloc(a->n, 1);
            if (fresh) { pg_dump(a, p->child, fresh, o, depth + 1); free(fresh); }
        } else {
            pg_dump(a, p->child, seen, o, depth + 1);
        }
        jbuf_putc(o, ')');
        return;
    case PEG_AND: case PEG_NOT: case PEG_ATOMIC:
        jbuf_putc(o, '('); pg_dump(a, p->child, seen, o, depth + 1); jbuf_putc(o, ')');
        return;
    default: return;
    }
}

void peg_dump(const peg_arena *a, size_t id, jbuf *out)
{
    unsigned char *seen = calloc(a->n ? a->n : 1, 1);
    if (!seen) return;
    pg_dump(a, id, seen, out, 0);
    free(seen);
}

/* ---- UTF-8 and the trie ---- */

int peg_utf8(const char *s, size_t n, size_t pos, uint32_t *cp, size_t *used)
{
    *cp = 0;
    *used = 0;
    if (pos >= n) return 1;
    unsigned char c = (unsigned char)s[pos];
    if (!(c & 0x80)) { *cp = c; *used = 1; return 0; }
    if (!(c & 0x40)) { *used = 1; return 2; }
    int len = !(c & 0x20) ? 2 : !(c & 0x10) ? 3 : !(c & 0x08) ? 4 : 0;
    if (!len) { *used = 1; return 2; }
    uint32_t v = len == 2 ? (c & 0x1fu) : len == 3 ? (c & 0x0fu) : (c & 0x07u);
    for (int i = 1; i < len; i++) {
        if (pos + (size_t)i >= n) { *used = (size_t)i; return 1; }
        unsigned char d = (unsigned char)s[pos + (size_t)i];
        if ((d & 0xc0) != 0x80) { *used = (size_t)i; return 2; }
        v = (v << 6) | (d & 0x3fu);
    }
    *cp = v;
    *used = (size_t)len;
    return 0;
}

static int pg_trie_node(peg_trie *t)
{
    if (t->nstates == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        peg_trie_node *nn = realloc(t->nodes, cap * sizeof *nn);
        if (!nn) return -1;
        t->nodes = nn;
        t->cap = cap;
    }
    memset(&t->nodes[t->nstates], 0, sizeof t->nodes[0]);
    t->nodes[t->nstates].pattern = -1;
    t->nstates++;
    return 0;
}

size_t peg_trie_child(const peg_trie *t, size_t state, uint32_t cp)
{
    const peg_trie_node *nd = &t->nodes[state];
    size_t lo = 0, hi = nd->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (nd->cp[mid] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < nd->n && nd->cp[lo] == cp ? nd->to[lo] : 0;
}

static size_t pg_trie_add_edge(peg_trie *t, size_t state, uint32_t cp)
{
    size_t id = t->nstates;
    if (pg_trie_node(t)) return 0;
    peg_trie_node *nd = &t->nodes[state];
    if (nd->n == nd->cap) {
        size_t cap = nd->cap ? nd->cap * 2 : 4;
        uint32_t *c = realloc(nd->cp, cap * sizeof *c);
        if (!c) return 0;
        nd->cp = c;
        size_t *to = realloc(nd->to, cap * sizeof *to);
        if (!to) return 0;
        nd->to = to;
        nd->cap = cap;
    }
    size_t i = nd->n;
    while (i > 0 && nd->cp[i - 1] > cp) { nd->cp[i] = nd->cp[i - 1]; nd->to[i] = nd->to[i - 1]; i--; }
    nd->cp[i] = cp;
    nd->to[i] = id;
    nd->n++;
    return id;
}

int peg_trie_build(peg_trie *t, const peg_str *words, size_t n)
{
    memset(t, 0, sizeof *t);
    if (pg_trie_node(t)) return -1;
    int32_t npat = 0;
    for (size_t w = 0; w < n; w++) {
        size_t cur = 0, pos = 0;
        while (pos < words[w].n) {
            uint32_t cp;
            size_t used;
            if (peg_utf8(words[w].s, words[w].n, pos, &cp, &used) != 0) break;
            size_t nx = peg_trie_child(t, cur, cp);
            if (!nx) { nx = pg_trie_add_edge(t, cur, cp); if (!nx) return -1; }
            cur = nx;
            pos += used;
        }
        if (t->nodes[cur].pattern < 0) t->nodes[cur].pattern = npat++;
    }
    return 0;
}

int peg_ac_build(peg_trie *t)
{
    size_t n = t->nstates, qh = 0, qt = 0;
    t->fail = calloc(n, sizeof *t->fail);
    t->match = malloc(n * sizeof *t->match);
    t->order = malloc(n * sizeof *t->order);
    if (!t->fail || !t->match || !t->order) return -1;
    t->order[qt++] = 0;
    while (qh < qt) {
        size_t u = t->order[qh++];
        const peg_trie_node *nd = &t->nodes[u];
        for (size_t e = 0; e < nd->n; e++) {
            size_t v = nd->to[e];
            if (u != 0) {
                size_t f = t->fail[u];
                while (f && !peg_trie_child(t, f, nd->cp[e])) f = t->fail[f];
                size_t it = peg_trie_child(t, f, nd->cp[e]);
                t->fail[v] = (it && it != v) ? it : 0;
            }
            t->order[qt++] = v;
        }
    }
    for (size_t i = 0; i < n; i++) {
        size_t u = t->order[i];
        t->match[u] = t->nodes[u].pattern >= 0 ? t->nodes[u].pattern : (u != 0 ? t->match[t->fail[u]] : -1);
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += t->nodes[i].n;
    t->alphabet = malloc((total ? total : 1) * sizeof *t->alphabet);
    if (!t->alphabet) return -1;
    for (size_t i = 0; i < n; i++)
        for (size_t e = 0; e < t->nodes[i].n; e++) t->alphabet[t->nalpha++] = t->nodes[i].cp[e];
    /* sort and unique */
    for (size_t i = 1; i < t->nalpha; i++) {
        uint32_t x = t->alphabet[i];
        size_t j = i;
        while (j > 0 && t->alphabet[j - 1] > x) { t->alphabet[j] = t->alphabet[j - 1]; j--; }
        t->alphabet[j] = x;
    }
    size_t k = 0;
    for (size_t i = 0; i < t->nalpha; i++)
        if (k == 0 || t->alphabet[k - 1] != t->alphabet[i]) t->alphabet[k++] = t->alphabet[i];
    t->nalpha = k;
    return 0;
}

size_t peg_ac_next(const peg_trie *t, size_t state, uint32_t cp)
{
    while (state && !peg_trie_child(t, state, cp)) state = t->fail[state];
    return peg_trie_child(t, state, cp);
}

void peg_trie_free(peg_trie *t)
{
    for (size_t i = 0; i < t->nstates; i++) { free(t->nodes[i].cp); free(t->nodes[i].to); }
    free(t->nodes);
    free(t->fail);
    free(t->match);
    free(t->order);
    free(t->alphabet);
    memset(t, 0, sizeof *t);
}

int peg_trie_check(const peg_trie *t, const char *s, size_t n, size_t pos)
{
    size_t cur = 0;
    while (pos < n) {
        uint32_t cp;
        size_t used;
        if (peg_utf8(s, n, pos, &cp, &used) != 0) break;
        size_t nx = peg_trie_child(t, cur, cp);
        if (!nx) return 0;
        cur = nx;
        pos += used;
        if (t->nodes[cur].pattern >= 0) return 2;
    }
    return cur != 0 ? 1 : 0;
}
