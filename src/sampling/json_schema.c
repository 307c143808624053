/*
 * json_schema.c -- JSON schema to GBNF as llama.cpp b11669 writes it (see
 * json_schema.h). Read beside b11669's common/json-schema.cpp (the typed
 * schema and its refusals: "builder" below) and common/json-schema-to-
 * grammar.cpp (the rules: "converter" below); the structure follows theirs
 * step for step, because the order of every rule added decides the names.
 *
 * Memory: one arena per call, freed at the end; the C++ exceptions become a
 * longjmp to the call's top (or to the pattern translator's, for the two
 * pattern errors it catches itself), which owns nothing but the arena.
 */
#include "sampling/json_schema.h"
#include "sampling/json_schema_int.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* arena, strings, errors                                               */

void js_throw(js_ctx *c, int code, js_str msg) __attribute__((noreturn));
void js_throw(js_ctx *c, int code, js_str msg)
{
    c->code = code;
    c->msg = msg;
    longjmp(c->top, 1);
}

void js_oom(js_ctx *c) __attribute__((noreturn));
void js_oom(js_ctx *c)
{
    js_throw(c, JSON_SCHEMA_LIMIT, JS_S("out of memory converting the JSON schema"));
}

void *js_alloc(js_ctx *c, size_t n)
{
    js_chunk *k = c->arena;
    n = (n + 15) & ~(size_t)15;
    if (!k || k->cap - k->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        k = malloc(sizeof *k + cap);
        if (!k) js_oom(c);
        k->next = c->arena;
        k->used = 0;
        k->cap = cap;
        c->arena = k;
    }
    void *p = k->data + k->used;
    k->used += n;
    memset(p, 0, n);
    return p;
}

/* grows an arena array of elements of size sz to hold one more */
void *js_grow(js_ctx *c, void *arr, size_t n, size_t *cap, size_t sz)
{
    if (n < *cap) return arr;
    size_t nc = *cap ? *cap * 2 : 8;
    if (nc > SIZE_MAX / sz) js_oom(c);
    void *p = js_alloc(c, nc * sz);
    if (n) memcpy(p, arr, n * sz);
    *cap = nc;
    return p;
}

js_str js_dup(js_ctx *c, const char *p, size_t n)
{
    char *d = js_alloc(c, n + 1);
    if (n) memcpy(d, p, n);
    return (js_str){ d, n };
}

int js_eq(js_str a, js_str b) { return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0); }
int js_eqs(js_str a, const char *s) { return js_eq(a, (js_str){ s, strlen(s) }); }

/* std::string's operator<: bytes compared as unsigned, then the length */
int js_cmp(js_str a, js_str b)
{
    size_t n = a.n < b.n ? a.n : b.n;
    int r = n ? memcmp(a.p, b.p, n) : 0;
    if (r) return r;
    return a.n < b.n ? -1 : a.n > b.n;
}

js_sb js_sb_new(js_ctx *c) { return (js_sb){ c, NULL, 0, 0 }; }

void js_put(js_sb *b, const char *s, size_t n)
{
    if (!n) return;
    if (b->cap - b->n < n + 1) {
        size_t nc = b->cap ? b->cap : 64;
        while (nc - b->n < n + 1) {
            if (nc > SIZE_MAX / 2) js_oom(b->c);
            nc *= 2;
        }
        char *p = js_alloc(b->c, nc);
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void js_puts(js_sb *b, const char *s) { js_put(b, s, strlen(s)); }
void js_putc(js_sb *b, char ch) { js_put(b, &ch, 1); }
void js_putstr(js_sb *b, js_str s) { js_put(b, s.p, s.n); }
void js_putll(js_sb *b, long long v)
{
    char t[32];
    js_put(b, t, (size_t)snprintf(t, sizeof t, "%lld", v));
}
js_str js_done(js_sb *b) { return b->p ? (js_str){ b->p, b->n } : (js_str){ "", 0 }; }

/* a + b (+ c): the concatenations the converter is made of */
js_str js_cat3(js_ctx *c, js_str a, js_str b, js_str d)
{
    js_sb s = js_sb_new(c);
    js_putstr(&s, a);
    js_putstr(&s, b);
    js_putstr(&s, d);
    return js_done(&s);
}
js_str js_cat(js_ctx *c, js_str a, js_str b) { return js_cat3(c, a, b, JS_S("")); }
js_str js_cats(js_ctx *c, js_str a, const char *b) { return js_cat(c, a, (js_str){ b, strlen(b) }); }

js_str js_itoa(js_ctx *c, long long v)
{
    js_sb s = js_sb_new(c);
    js_putll(&s, v);
    return js_done(&s);
}

/* ---- string map ---- */

static uint64_t js_hash(js_str k)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < k.n; i++) h = (h ^ (unsigned char)k.p[i]) * 1099511628211ull;
    return h;
}

void **js_map_find(js_ctx *c, js_map *m, js_str k, int insert)
{
    if (insert && (m->n + 1) * 2 > m->cap) {
        js_map g = { NULL, NULL, m->cap ? m->cap * 2 : 16, 0 };
        if (g.cap > SIZE_MAX / sizeof(js_str) / 2) js_oom(c);
        g.keys = js_alloc(c, g.cap * sizeof *g.keys);
        g.vals = js_alloc(c, g.cap * sizeof *g.vals);
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i].p) {
                size_t j = js_hash(m->keys[i]) & (g.cap - 1);
                while (g.keys[j].p) j = (j + 1) & (g.cap - 1);
                g.keys[j] = m->keys[i];
                g.vals[j] = m->vals[i];
                g.n++;
            }
        *m = g;
    }
    if (!m->cap) return NULL;
    size_t j = js_hash(k) & (m->cap - 1);
    while (m->keys[j].p) {
        if (js_eq(m->keys[j], k)) return &m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    if (!insert) return NULL;
    m->keys[j] = k.p ? k : (js_str){ "", 0 };
    m->vals[j] = NULL;
    m->n++;
    return &m->vals[j];
}

/* ---- JSON views, as nlohmann's ordered_json sees the parsed value ---- */

const json_value *js_get_n(const json_value *v, const char *k, size_t kl)
{
    if (!v || v->type != JSON_OBJECT) return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (v->key_lens[i] == kl && (kl == 0 || memcmp(v->keys[i], k, kl) == 0)) return v->items[i];
    return NULL;
}
const json_value *js_get(const json_value *v, const char *k) { return js_get_n(v, k, strlen(k)); }


/* nlohmann's lexer: an integer literal is number_unsigned (no sign) or
 * number_integer (a minus), unless strtoull / strtoll overflow: then, as a
 * literal with a fraction or an exponent, number_float by strtod. */
js_num js_number(const json_value *v)
{
    js_num r = { 2, 0, 0, 0 };
    const char *s = v->str;
    if (!strpbrk(s, ".eE")) {
        errno = 0;
        if (s[0] == '-') {
            long long x = strtoll(s, NULL, 10);
            if (!errno) { r.kind = 0; r.i = x; return r; }
        } else {
            unsigned long long x = strtoull(s, NULL, 10);
            if (!errno) { r.kind = 1; r.u = x; return r; }
        }
    }
    r.d = strtod(s, NULL);
    return r;
}

int js_is_int(const json_value *v) { return v && v->type == JSON_NUMBER && js_number(v).kind != 2; }

/* get<int64_t>() of a number (an unsigned value wraps, a float truncates as cvttsd2si) */
int64_t js_d2i(double d)
{
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return INT64_MIN;
    return (int64_t)d;
}

/* nlohmann's dump() (indent -1): "," and ":" with no spaces, keys in order,
 * strings as nlohmann escapes valid UTF-8, doubles as its Grisu2 writer */
void js_dump(js_sb *b, const json_value *v)
{
    switch (v->type) {
    case JSON_NULL: js_puts(b, "null"); return;
    case JSON_TRUE: js_puts(b, "true"); return;
    case JSON_FALSE: js_puts(b, "false"); return;
    case JSON_NUMBER: {
        js_num x = js_number(v);
        char t[32];
        if (x.kind == 0) js_putll(b, x.i);
        else if (x.kind == 1) js_put(b, t, (size_t)snprintf(t, sizeof t, "%llu", (unsigned long long)x.u));
        else {
            jbuf j;
            jbuf_init(&j);
            json_put_double(&j, x.d);
            if (j.oom) { jbuf_free(&j); js_oom(b->c); }
            js_put(b, j.p, j.len);
            jbuf_free(&j);
        }
        return;
    }
    case JSON_STRING: {
        jbuf j;
        jbuf_init(&j);
        json_put_str_nl(&j, v->str, v->len);
        if (j.oom) { jbuf_free(&j); js_oom(b->c); }
        js_put(b, j.p, j.len);
        jbuf_free(&j);
        return;
    }
    case JSON_ARRAY:
    case JSON_OBJECT:
        js_putc(b, v->type == JSON_ARRAY ? '[' : '{');
        for (size_t i = 0; i < v->n; i++) {
            if (i) js_putc(b, ',');
            if (v->type == JSON_OBJECT) {
                json_value k = { JSON_STRING, v->keys[i], v->key_lens[i], 0, NULL, NULL, NULL };
                js_dump(b, &k);
                js_putc(b, ':');
            }
            js_dump(b, v->items[i]);
        }
        js_putc(b, v->type == JSON_ARRAY ? ']' : '}');
        return;
    }
}

/* ------------------------------------------------------------------ */
/* builder: the typed schema (common/json-schema.cpp)                   */

static js_node *js_build_node(js_ctx *c, const json_value *schema, const json_value *type_over, js_str path);

static void js_fail(js_ctx *c, js_str path, js_str msg) __attribute__((noreturn));
static void js_fail(js_ctx *c, js_str path, js_str msg)
{
    js_throw(c, JSON_SCHEMA_REFUSED, js_cat3(c, js_cat3(c, JS_S("JSON schema error at "), path, JS_S(": ")), msg, JS_S("")));
}
static void js_fails(js_ctx *c, js_str path, const char *msg) __attribute__((noreturn));
static void js_fails(js_ctx *c, js_str path, const char *msg) { js_fail(c, path, (js_str){ msg, strlen(msg) }); }

static js_node *js_new(js_ctx *c, int kind)
{
    js_node *n = js_alloc(c, sizeof *n);
    n->kind = kind;
    n->min = INT64_MIN;
    n->max = INT64_MAX;
    n->max_len = -1;
    return n;
}

/* get_count: a non-negative integer, read as get<int>() (truncated to 32 bits) */
static int js_count(js_ctx *c, const json_value *schema, const char *key, js_str path, int def)
{
    const json_value *v = js_get(schema, key);
    if (!v) return def;
    int x = 0;
    if (js_is_int(v)) {
        js_num n = js_number(v);
        x = n.kind == 0 ? (int)(uint32_t)(uint64_t)n.i : (int)(uint32_t)n.u;
    }
    if (!js_is_int(v) || x < 0) js_fail(c, path, js_cats(c, (js_str){ key, strlen(key) }, " must be a non-negative integer"));
    return x;
}

/* get_bound: a fractional bound rounds inwards */
static int64_t js_bound(js_ctx *c, const json_value *v, const char *key, js_str path, int round_up)
{
    if (js_is_int(v)) {
        js_num n = js_number(v);
        return n.kind == 0 ? n.i : (int64_t)n.u;
    }
    if (!v || v->type != JSON_NUMBER) js_fail(c, path, js_cats(c, (js_str){ key, strlen(key) }, " must be a number"));
    double d = js_number(v).d;
    return js_d2i(round_up ? ceil(d) : floor(d));
}

static int js_format(js_ctx *c, const json_value *schema, js_str path)
{
    const json_value *v = js_get(schema, "format");
    if (!v) return JS_FMT_NONE;
    if (v->type != JSON_STRING) js_fails(c, path, "format must be a string");
    js_str f = { v->str, v->len };
    if (js_eqs(f, "date")) return JS_FMT_DATE;
    if (js_eqs(f, "time")) return JS_FMT_TIME;
    if (js_eqs(f, "date-time")) return JS_FMT_DATE_TIME;
    if (js_eqs(f, "uuid") || (f.n == 5 && memcmp(f.p, "uuid", 4) == 0 && f.p[4] >= '1' && f.p[4] <= '5'))
        return JS_FMT_UUID;
    return JS_FMT_NONE;
}

/* std::stoull: strtoull of the text up to its first NUL; no digits or ERANGE throw */
static int js_stoull(js_ctx *c, js_str s, unsigned long long *out)
{
    js_str t = js_dup(c, s.p, s.n);
    char *end;
    errno = 0;
    *out = strtoull(t.p, &end, 10);
    return end != t.p && errno != ERANGE;
}

/* resolve_ref: "#/a/b/0" walked from the root, no JSON-pointer unescaping */
static const json_value *js_resolve_ref(js_ctx *c, js_str ref, js_str path)
{
    const json_value *t = c->root;
    size_t start = 1, end;
    int first = 1;
    for (;;) {                                  /* split ref.substr(1) on "/", skipping part 0 */
        end = start;
        while (end < ref.n && ref.p[end] != '/') end++;
        js_str sel = { ref.p + start, end - start };
        if (!first) {
            const json_value *m = t->type == JSON_OBJECT ? js_get_n(t, sel.p, sel.n) : NULL;
            if (m) {
                t = m;
            } else if (t->type == JSON_ARRAY) {
                unsigned long long idx;
                if (!js_stoull(c, sel, &idx)) idx = t->n;
                if (idx >= t->n)
                    js_fail(c, path, js_cat3(c, js_cat3(c, JS_S("cannot resolve $ref "), ref, JS_S(", ")), sel,
                                              JS_S(" is out of range")));
                t = t->items[idx];
            } else {
                js_fail(c, path, js_cat3(c, js_cat3(c, JS_S("cannot resolve $ref "), ref, JS_S(", ")), sel,
                                          JS_S(" not found")));
            }
        }
        first = 0;
        if (end >= ref.n) break;
        start = end + 1;
    }
    return t;
}

static js_node *js_build_ref(js_ctx *c, const json_value *v, js_str path)
{
    if (v->type != JSON_STRING) js_fails(c, path, "$ref must be a string");
    js_str ref = { v->str, v->len };
    if (ref.n < 2 || ref.p[0] != '#' || ref.p[1] != '/')
        js_fail(c, path, js_cat3(c, JS_S("unsupported $ref "), ref,
                                  JS_S(", only references into the same document are supported")));
    if (!js_map_find(c, &c->refs, ref, 0)) {
        js_map_find(c, &c->refs, ref, 1);           /* reserved: a cycle back here stops */
        js_node *t = js_build_node(c, js_resolve_ref(c, ref, path), NULL, ref);
        *js_map_find(c, &c->refs, ref, 1) = t;
    }
    js_node *n = js_new(c, JS_REF);
    n->ref = ref;
    c->pending = js_grow(c, c->pending, c->npending, &c->cap_pending, sizeof *c->pending);
    c->pending[c->npending++] = n;
    return n;
}

static js_node *js_build_alts(js_ctx *c, int kind, const json_value *alts, js_str path)
{
    if (alts->type != JSON_ARRAY) js_fails(c, path, "must be an array of schemas");
    if (alts->n == 0) js_fails(c, path, "must not be empty");
    js_node *n = js_new(c, kind);
    n->kids = js_alloc(c, alts->n * sizeof *n->kids);
    for (size_t i = 0; i < alts->n; i++)
        n->kids[n->nkids++] = js_build_node(c, alts->items[i], NULL, js_cat3(c, path, JS_S("/"), js_itoa(c, (long long)i)));
    return n;
}

static js_node *js_build_object(js_ctx *c, const json_value *schema, js_str path)
{
    js_node *n = js_new(c, JS_OBJECT);
    js_map req = { 0 };
    const json_value *r = js_get(schema, "required"), *props = js_get(schema, "properties");
    if (r && r->type == JSON_ARRAY)
        for (size_t i = 0; i < r->n; i++)
            if (r->items[i]->type == JSON_STRING)
                *js_map_find(c, &req, (js_str){ r->items[i]->str, r->items[i]->len }, 1) = (void *)1;
    if (props) {
        if (props->type != JSON_OBJECT) js_fails(c, path, "properties must be an object");
        n->props = js_alloc(c, (props->n ? props->n : 1) * sizeof *n->props);
        for (size_t i = 0; i < props->n; i++) {
            js_str name = { props->keys[i], props->key_lens[i] };
            js_prop *p = &n->props[n->nprops++];
            p->name = name;
            p->schema = js_build_node(c, props->items[i], NULL, js_cat3(c, path, JS_S("/properties/"), name));
            p->required = js_map_find(c, &req, name, 0) != NULL;
        }
    }
    const json_value *ap = js_get(schema, "additionalProperties");
    if (ap) {
        if (ap->type == JSON_TRUE) n->additional = js_new(c, JS_ANY);
        else if (ap->type == JSON_FALSE) n->additional = NULL;
        else if (ap->type == JSON_OBJECT) n->additional = js_build_node(c, ap, NULL, js_cats(c, path, "/additionalProperties"));
        else js_fails(c, path, "additionalProperties must be a boolean or a schema");
    } else if (!props) {
        n->additional = js_new(c, JS_ANY);          /* {"type": "object"} alone: any object */
    }
    return n;
}

static js_node *js_build_array(js_ctx *c, const json_value *schema, js_str path)
{
    js_node *n = js_new(c, JS_ARRAY);
    const json_value *items = js_get(schema, "items");
    const char *key = "items";
    if (!items) { items = js_get(schema, "prefixItems"); key = "prefixItems"; }
    if (items) {
        js_str kp = js_cat3(c, path, JS_S("/"), (js_str){ key, strlen(key) });
        if (items->type == JSON_ARRAY) {
            js_node *t = js_new(c, JS_TUPLE);
            t->kids = js_alloc(c, (items->n ? items->n : 1) * sizeof *t->kids);
            for (size_t i = 0; i < items->n; i++)
                t->kids[t->nkids++] = js_build_node(c, items->items[i], NULL, js_cat3(c, kp, JS_S("/"), js_itoa(c, (long long)i)));
            return t;
        }
        n->items = js_build_node(c, items, NULL, kp);
    } else {
        n->items = js_new(c, JS_ANY);
    }
    n->min_len = js_count(c, schema, "minItems", path, 0);
    n->max_len = js_count(c, schema, "maxItems", path, -1);
    return n;
}

static js_node *js_build_string(js_ctx *c, const json_value *schema, js_str path)
{
    js_node *n = js_new(c, JS_STRING);
    const json_value *p = js_get(schema, "pattern");
    if (p) {
        if (p->type != JSON_STRING) js_fails(c, path, "pattern must be a string");
        n->pattern = (js_str){ p->str, p->len };
    }
    n->format = js_format(c, schema, path);
    n->min_len = js_count(c, schema, "minLength", path, 0);
    n->max_len = js_count(c, schema, "maxLength", path, -1);
    return n;
}

static js_node *js_build_integer(js_ctx *c, const json_value *schema, js_str path)
{
    js_node *n = js_new(c, JS_INTEGER);
    const json_value *v;
    if ((v = js_get(schema, "minimum"))) n->min = js_bound(c, v, "minimum", path, 1);
    else if ((v = js_get(schema, "exclusiveMinimum")))
        n->min = (int64_t)((uint64_t)js_bound(c, v, "exclusiveMinimum", path, 0) + 1);
    if ((v = js_get(schema, "maximum"))) n->max = js_bound(c, v, "maximum", path, 0);
    else if ((v = js_get(schema, "exclusiveMaximum")))
        n->max = (int64_t)((uint64_t)js_bound(c, v, "exclusiveMaximum", path, 1) - 1);
    return n;
}

/* build_node without the depth count; type_over is the "type" a type array put in */
static js_node *js_build_node2(js_ctx *c, const json_value *schema, const json_value *type_over, js_str path)
{
    const json_value *v, *type;
    if (schema->type != JSON_OBJECT) js_fails(c, path, "schema must be an object");
    if ((v = js_get(schema, "$ref"))) return js_build_ref(c, v, path);
    if ((v = js_get(schema, "oneOf")) || (v = js_get(schema, "anyOf"))) {
        const char *key = js_get(schema, "oneOf") ? "/oneOf" : "/anyOf";
        return js_build_alts(c, JS_ANY_OF, v, js_cats(c, path, key));
    }
    type = type_over ? type_over : js_get(schema, "type");
    if (type && type->type == JSON_ARRAY) {
        if (type->n == 0) js_fails(c, path, "type must not be empty");
        js_node *n = js_new(c, JS_ANY_OF);
        n->kids = js_alloc(c, type->n * sizeof *n->kids);
        for (size_t i = 0; i < type->n; i++)
            n->kids[n->nkids++] = js_build_node(c, schema, type->items[i],
                                                js_cat3(c, path, JS_S("/type/"), js_itoa(c, (long long)i)));
        return n;
    }
    if ((v = js_get(schema, "const"))) {
        js_node *n = js_new(c, JS_CONST);
        n->value = v;
        return n;
    }
    if ((v = js_get(schema, "enum"))) {
        if (v->type != JSON_ARRAY || v->n == 0) js_fails(c, path, "enum must be a non-empty array");
        js_node *n = js_new(c, JS_ENUM);
        n->values = (const json_value **)v->items;
        n->nvalues = v->n;
        return n;
    }
    if (type && type->type != JSON_NULL && type->type != JSON_STRING)
        js_fails(c, path, "type must be a string or an array of strings");
    js_str tn = type && type->type == JSON_STRING ? (js_str){ type->str, type->len } : JS_S("");
    const json_value *ap = js_get(schema, "additionalProperties");
    int has_props = js_get(schema, "properties") || (ap && ap->type != JSON_TRUE);
    const json_value *all = js_get(schema, "allOf");

    if (tn.n == 0) {                            /* the structural keywords decide */
        if (has_props) return js_build_object(c, schema, path);
        if (all) return js_build_alts(c, JS_ALL_OF, all, js_cats(c, path, "/allOf"));
        if (js_get(schema, "items") || js_get(schema, "prefixItems")) return js_build_array(c, schema, path);
        if (js_get(schema, "pattern") || js_get(schema, "minLength") || js_get(schema, "maxLength") ||
            js_format(c, schema, path) != JS_FMT_NONE)
            return js_build_string(c, schema, path);
        return js_new(c, JS_ANY);
    }
    if (js_eqs(tn, "object")) {
        if (!has_props && all) return js_build_alts(c, JS_ALL_OF, all, js_cats(c, path, "/allOf"));
        return js_build_object(c, schema, path);
    }
    if (js_eqs(tn, "string")) {
        if (all) return js_build_alts(c, JS_ALL_OF, all, js_cats(c, path, "/allOf"));
        return js_build_string(c, schema, path);
    }
    if (js_eqs(tn, "array")) return js_build_array(c, schema, path);
    if (js_eqs(tn, "integer")) return js_build_integer(c, schema, path);
    if (js_eqs(tn, "number")) return js_new(c, JS_NUMBER);
    if (js_eqs(tn, "boolean")) return js_new(c, JS_BOOLEAN);
    if (js_eqs(tn, "null")) return js_new(c, JS_NULL);
    js_fail(c, path, js_cat(c, JS_S("unrecognized type "), tn));
}

void js_enter(js_ctx *c)
{
    if (++c->depth > JSON_SCHEMA_MAX_DEPTH) {
        char t[160];
        snprintf(t, sizeof t, "the JSON schema nests deeper than %d levels (counting each $ref followed); "
                 "bankml refuses it", JSON_SCHEMA_MAX_DEPTH);
        js_throw(c, JSON_SCHEMA_LIMIT, js_dup(c, t, strlen(t)));
    }
}

static js_node *js_build_node(js_ctx *c, const json_value *schema, const json_value *type_over, js_str path)
{
    js_enter(c);
    js_node *n = js_build_node2(c, schema, type_over, path);
    c->depth--;
    return n;
}

/* ------------------------------------------------------------------ */
/* converter: the rules (common/json-schema-to-grammar.cpp)             */



/* PRIMITIVE_RULES, then STRING_FORMAT_RULES */
static const js_builtin js_builtins[] = {
    { "boolean", "(\"true\" | \"false\")", { NULL } },
    { "decimal-part", "[0-9]{1,16}", { NULL } },
    { "integral-part", "[0] | [1-9] [0-9]{0,15}", { NULL } },
    { "number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)?",
      { "integral-part", "decimal-part", NULL } },
    { "integer", "(\"-\"? integral-part)", { "integral-part", NULL } },
    { "value", "object | array | string | number | boolean | null",
      { "object", "array", "string", "number", "boolean", "null", NULL } },
    { "object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? space \"}\"",
      { "string", "value", NULL } },
    { "array", "\"[\" space ( value (\",\" space value)* )? space \"]\"", { "value", NULL } },
    { "uuid", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
              "[0-9a-fA-F]{12} \"\\\"\"", { NULL } },
    { "char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})", { NULL } },
    { "string", "\"\\\"\" char* \"\\\"\"", { "char", NULL } },
    { "null", "\"null\"", { NULL } },
    { "date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] )", { NULL } },
    { "time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | "
              "\"-\" ) ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )", { NULL } },
    { "date-time", "date \"T\" time", { "date", "time", NULL } },
    { "date-string", "\"\\\"\" date \"\\\"\"", { "date", NULL } },
    { "time-string", "\"\\\"\" time \"\\\"\"", { "time", NULL } },
    { "date-time-string", "\"\\\"\" date-time \"\\\"\"", { "date-time", NULL } },
};
#define JS_NBUILTIN (sizeof js_builtins / sizeof js_builtins[0])

static const js_builtin *js_builtin_of(const char *name)
{
    for (size_t i = 0; i < JS_NBUILTIN; i++)
        if (!strcmp(js_builtins[i].name, name)) return &js_builtins[i];
    return NULL;
}

int js_reserved(js_str name)
{
    if (js_eqs(name, "root")) return 1;
    for (size_t i = 0; i < JS_NBUILTIN; i++)
        if (js_eqs(name, js_builtins[i].name)) return 1;
    return 0;
}

static int js_rule_char(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-';
}

/* regex_replace(s, "[^a-zA-Z0-9-]+", "-") */
js_str js_rule_name(js_ctx *c, js_str s)
{
    js_sb b = js_sb_new(c);
    for (size_t i = 0; i < s.n;) {
        if (js_rule_char((unsigned char)s.p[i])) { js_putc(&b, s.p[i++]); continue; }
        while (i < s.n && !js_rule_char((unsigned char)s.p[i])) i++;
        js_putc(&b, '-');
    }
    return js_done(&b);
}

js_rule *js_rule_get(js_ctx *c, js_str name)
{
    void **v = js_map_find(c, &c->rule_ix, name, 0);
    return v ? &c->rules[(size_t)(uintptr_t)*v - 1] : NULL;
}

void js_rule_put(js_ctx *c, js_str name, js_str body)
{
    c->rules = js_grow(c, c->rules, c->nrules, &c->cap_rules, sizeof *c->rules);
    c->rules[c->nrules] = (js_rule){ name, body };
    c->nrules++;
    *js_map_find(c, &c->rule_ix, name, 1) = (void *)(uintptr_t)c->nrules;
}

/* the rules back to the first n (the pattern translator's snapshot) */
static void js_rules_truncate(js_ctx *c, size_t n)
{
    c->nrules = n;
    c->rule_ix = (js_map){ 0 };
    for (size_t i = 0; i < n; i++) *js_map_find(c, &c->rule_ix, c->rules[i].name, 1) = (void *)(uintptr_t)(i + 1);
}

/* _add_rule: the escaped name, or name0, name1, ... when it holds another body */
js_str js_add_rule(js_ctx *c, js_str name, js_str body)
{
    js_str esc = js_rule_name(c, name);
    js_rule *r = js_rule_get(c, esc);
    if (!r) { js_rule_put(c, esc, body); return esc; }
    if (js_eq(r->body, body)) return esc;
    for (long long i = 0;; i++) {
        js_str key = js_cat(c, esc, js_itoa(c, i));
        r = js_rule_get(c, key);
        if (!r) { js_rule_put(c, key, body); return key; }
        if (js_eq(r->body, body)) return key;
    }
}

static js_str js_add_primitive(js_ctx *c, js_str name, const js_builtin *b)
{
    js_str n = js_add_rule(c, name, (js_str){ b->body, strlen(b->body) });
    for (int i = 0; b->deps[i]; i++) {
        js_str dep = { b->deps[i], strlen(b->deps[i]) };
        if (!js_rule_get(c, dep)) js_add_primitive(c, dep, js_builtin_of(b->deps[i]));
    }
    return n;
}
static js_str js_prim(js_ctx *c, const char *name) { return js_add_primitive(c, (js_str){ name, strlen(name) }, js_builtin_of(name)); }

void js_error(js_ctx *c, js_str e)
{
    c->errors = js_grow(c, c->errors, c->nerrors, &c->cap_errors, sizeof *c->errors);
    c->errors[c->nerrors++] = e;
}

/* format_literal: "..." with \r \n " \ escaped */
js_str js_literal(js_ctx *c, js_str s)
{
    js_sb b = js_sb_new(c);
    js_putc(&b, '"');
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.p[i];
        if (ch == '\r') js_puts(&b, "\\r");
        else if (ch == '\n') js_puts(&b, "\\n");
        else if (ch == '"') js_puts(&b, "\\\"");
        else if (ch == '\\') js_puts(&b, "\\\\");
        else js_putc(&b, ch);
    }
    js_putc(&b, '"');
    return js_done(&b);
}

static js_str js_const_rule(js_ctx *c, const json_value *v)
{
    js_sb b = js_sb_new(c);
    js_dump(&b, v);
    return js_literal(c, js_done(&b));
}

/* build_repetition */
js_str js_repeat(js_ctx *c, js_str item, int mn, int mx, js_str sep)
{
    int has_max = mx != INT_MAX;
    js_sb b = js_sb_new(c);
    if (mx == 0) return JS_S("");
    if (mn == 0 && mx == 1) return js_cats(c, item, "?");
    if (sep.n == 0) {
        if (mn == 1 && !has_max) return js_cats(c, item, "+");
        if (mn == 0 && !has_max) return js_cats(c, item, "*");
        js_putstr(&b, item);
        js_putc(&b, '{');
        js_putll(&b, mn);
        js_putc(&b, ',');
        if (has_max) js_putll(&b, mx);
        js_putc(&b, '}');
        return js_done(&b);
    }
    js_str inner = js_cat3(c, js_cat3(c, JS_S("("), sep, JS_S(" ")), item, JS_S(")"));
    js_str res = js_cat3(c, item, JS_S(" "), js_repeat(c, inner, mn == 0 ? 0 : (int)((unsigned)mn - 1u), has_max ? (int)((unsigned)mx - 1u) : mx, JS_S("")));
    if (mn == 0) res = js_cat3(c, JS_S("("), res, JS_S(")?"));
    return res;
}

/* ---- build_min_max_int: integer bounds as digit ranges ---- */

static void js_digit_range(js_sb *o, char from, char to)
{
    js_putc(o, '[');
    js_putc(o, from);
    if (from != to) { js_putc(o, '-'); js_putc(o, to); }
    js_putc(o, ']');
}

static void js_more_digits(js_sb *o, int mn, int mx)
{
    js_puts(o, "[0-9]");
    if (mn == mx && mn == 1) return;
    js_putc(o, '{');
    js_putll(o, mn);
    if (mx != mn) {
        js_putc(o, ',');
        if (mx != INT_MAX) js_putll(o, mx);
    }
    js_putc(o, '}');
}

static js_str js_rep_char(js_ctx *c, char ch, size_t n)
{
    char *p = js_alloc(c, n + 1);
    memset(p, ch, n);
    return (js_str){ p, n };
}

static void js_uniform_range(js_sb *o, js_str from, js_str to)
{
    size_t i = 0;
    while (i < from.n && i < to.n && from.p[i] == to.p[i]) i++;
    if (i > 0) { js_putc(o, '"'); js_put(o, from.p, i); js_putc(o, '"'); }
    if (!(i < from.n && i < to.n)) return;
    if (i > 0) js_putc(o, ' ');
    size_t sub_len = from.n - i - 1;
    if (sub_len == 0) {
        js_putc(o, '[');
        js_putc(o, from.p[i]);
        js_putc(o, '-');
        js_putc(o, to.p[i]);
        js_putc(o, ']');
        return;
    }
    js_str from_sub = { from.p + i + 1, from.n - i - 1 }, to_sub = { to.p + i + 1, to.n - i - 1 };
    js_str zeros = js_rep_char(o->c, '0', sub_len), nines = js_rep_char(o->c, '9', sub_len);
    int to_reached = 0;
    js_putc(o, '(');
    if (js_eq(from_sub, zeros)) {
        js_digit_range(o, from.p[i], (char)(to.p[i] - 1));
        js_putc(o, ' ');
        js_more_digits(o, (int)sub_len, (int)sub_len);
    } else {
        js_putc(o, '[');
        js_putc(o, from.p[i]);
        js_puts(o, "] (");
        js_uniform_range(o, from_sub, nines);
        js_putc(o, ')');
        if (from.p[i] < to.p[i] - 1) {
            js_puts(o, " | ");
            if (js_eq(to_sub, nines)) {
                js_digit_range(o, (char)(from.p[i] + 1), to.p[i]);
                to_reached = 1;
            } else {
                js_digit_range(o, (char)(from.p[i] + 1), (char)(to.p[i] - 1));
            }
            js_putc(o, ' ');
            js_more_digits(o, (int)sub_len, (int)sub_len);
        }
    }
    if (!to_reached) {
        js_puts(o, " | ");
        js_digit_range(o, to.p[i], to.p[i]);
        js_putc(o, ' ');
        js_uniform_range(o, zeros, to_sub);
    }
    js_putc(o, ')');
}

static int64_t js_neg(int64_t v) { return (int64_t)(0 - (uint64_t)v); }

void js_min_max_int(js_sb *o, int64_t mn, int64_t mx, int decimals_left, int top)
{
    js_ctx *c = o->c;
    int has_min = mn != INT64_MIN, has_max = mx != INT64_MAX;
    if (has_min && has_max) {
        if (mn < 0 && mx < 0) {
            js_puts(o, "\"-\" (");
            js_min_max_int(o, js_neg(mx), js_neg(mn), decimals_left, 1);
            js_putc(o, ')');
            return;
        }
        if (mn < 0) {
            js_puts(o, "\"-\" (");
            js_min_max_int(o, 0, js_neg(mn), decimals_left, 1);
            js_puts(o, ") | ");
            mn = 0;
        }
        js_str min_s = js_itoa(c, mn), max_s = js_itoa(c, mx);
        for (size_t d = min_s.n; d < max_s.n; d++) {
            js_uniform_range(o, min_s, js_rep_char(c, '9', d));
            min_s = js_cat(c, JS_S("1"), js_rep_char(c, '0', d));
            js_puts(o, " | ");
        }
        js_uniform_range(o, min_s, max_s);
        return;
    }
    int less = decimals_left - 1 > 1 ? decimals_left - 1 : 1;
    if (has_min) {
        if (mn < 0) {
            js_puts(o, "\"-\" (");
            js_min_max_int(o, INT64_MIN, js_neg(mn), decimals_left, 0);
            js_puts(o, ") | [0] | [1-9] ");
            js_more_digits(o, 0, decimals_left - 1);
        } else if (mn == 0) {
            if (top) { js_puts(o, "[0] | [1-9] "); js_more_digits(o, 0, less); }
            else js_more_digits(o, 1, decimals_left);
        } else if (mn <= 9) {
            char ch = (char)('0' + mn), start = top ? '1' : '0';
            if (ch > start) {
                js_digit_range(o, start, (char)(ch - 1));
                js_putc(o, ' ');
                js_more_digits(o, 1, less);
                js_puts(o, " | ");
            }
            js_digit_range(o, ch, '9');
            js_putc(o, ' ');
            js_more_digits(o, 0, less);
        } else {
            js_str min_s = js_itoa(c, mn);
            int len = (int)min_s.n;
            char ch = min_s.p[0];
            if (ch > '1') {
                js_digit_range(o, top ? '1' : '0', (char)(ch - 1));
                js_putc(o, ' ');
                js_more_digits(o, len, less);
                js_puts(o, " | ");
            }
            js_digit_range(o, ch, ch);
            js_puts(o, " (");
            js_min_max_int(o, strtoll(min_s.p + 1, NULL, 10), INT64_MAX, less, 0);
            js_putc(o, ')');
            if (ch < '9') {
                js_puts(o, " | ");
                js_digit_range(o, (char)(ch + 1), '9');
                js_putc(o, ' ');
                js_more_digits(o, len - 1, less);
            }
        }
        return;
    }
    if (has_max) {
        if (mx >= 0) {
            if (top) {
                js_puts(o, "\"-\" [1-9] ");
                js_more_digits(o, 0, less);
                js_puts(o, " | ");
            }
            js_min_max_int(o, 0, mx, decimals_left, 1);
        } else {
            js_puts(o, "\"-\" (");
            js_min_max_int(o, js_neg(mx), INT64_MAX, decimals_left, 0);
            js_putc(o, ')');
        }
        return;
    }
    js_throw(c, JSON_SCHEMA_REFUSED, JS_S("At least one of min_value or max_value must be set"));
}

/* ---- patterns: an anchored regex to rules (_visit_pattern, _pattern_to_rule) ---- */


typedef struct {
    js_ctx *c;
    jmp_buf jb;
    int invalid;                        /* 1: invalid_pattern (an error), 0: unsupported (a plain string) */
    const char *why;                    /* the exception's what() */
    const char *p;
    size_t i, len;
    int depth;
    js_str name;
    js_map subs;                        /* sub-rule text -> its rule name */
} js_pat;

static void js_pat_throw(js_pat *t, int invalid, const char *why) __attribute__((noreturn));
static void js_pat_throw(js_pat *t, int invalid, const char *why)
{
    t->invalid = invalid;
    t->why = why;
    longjmp(t->jb, 1);
}

/* gbnf_escape_length: the escapes llama-grammar's parse_char reads */
static size_t js_escape_len(const char *p, size_t len, size_t pos)
{
    size_t hex = 0;
    if (pos + 1 >= len || p[pos] != '\\') return 0;
    switch (p[pos + 1]) {
    case 'x': hex = 2; break;
    case 'u': hex = 4; break;
    case 'U': hex = 8; break;
    case 't': case 'r': case 'n': case '\\': case '"': case '[': case ']': case '-': return 2;
    default: return 0;
    }
    if (pos + 2 + hex > len) return 0;
    for (size_t i = pos + 2; i < pos + 2 + hex; i++) {
        char h = p[i];
        if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return 0;
    }
    return 2 + hex;
}

static int js_non_literal(char ch) { return ch && strchr("|.()[]{}*+?^$", ch); }

js_str js_to_rule(js_ctx *c, js_item it) { return it.lit ? js_cat3(c, JS_S("\""), it.s, JS_S("\"")) : it.s; }

/* join_seq: consecutive literals merged, then joined by spaces */
js_str js_join_seq(js_ctx *c, const js_item *seq, size_t n)
{
    js_sb out = js_sb_new(c), lit = js_sb_new(c);
    int first = 1;
    for (size_t k = 0; k <= n; k++) {
        if (k < n && seq[k].lit) { js_putstr(&lit, seq[k].s); continue; }
        if (lit.n) {
            if (!first) js_putc(&out, ' ');
            first = 0;
            js_putstr(&out, js_to_rule(c, (js_item){ js_done(&lit), 1 }));
            lit = js_sb_new(c);
        }
        if (k < n) {
            if (!first) js_putc(&out, ' ');
            first = 0;
            js_putstr(&out, seq[k].s);
        }
    }
    return js_done(&out);
}

/* std::stoi: strtol of the text up to its first NUL, in int range */
int js_stoi(js_ctx *c, js_str s, int *out)
{
    js_str t = js_dup(c, s.p, s.n);
    char *end;
    errno = 0;
    long v = strtol(t.p, &end, 10);
    if (end == t.p || errno == ERANGE || v < INT_MIN || v > INT_MAX) return 0;
    *out = (int)v;
    return 1;
}

static void js_pat_curly(js_pat *t, js_item *seq, size_t n)
{
    js_ctx *c = t->c;
    size_t start = ++t->i;
    while (t->i < t->len && t->p[t->i] != '}') t->i++;
    if (t->i >= t->len) js_pat_throw(t, 0, "unterminated curly brackets");
    js_str body = { t->p + start, t->i - start };
    t->i++;
    js_str nums[2];
    size_t nn = 0, s0 = 0;
    for (size_t k = 0; k <= body.n; k++)
        if (k == body.n || body.p[k] == ',') {
            if (nn < 2) nums[nn] = (js_str){ body.p + s0, k - s0 };
            nn++;
            s0 = k + 1;
        }
    int mn = 0, mx = INT_MAX;
    if (nn != 1 && nn != 2) js_pat_throw(t, 0, "wrong number of values in curly brackets");
    if (nn == 1) {
        if (!js_stoi(c, nums[0], &mn)) js_pat_throw(t, 0, "invalid number in curly brackets");
        mx = mn;
    } else {
        if (nums[0].n && !js_stoi(c, nums[0], &mn)) js_pat_throw(t, 0, "invalid number in curly brackets");
        if (nums[1].n && !js_stoi(c, nums[1], &mx)) js_pat_throw(t, 0, "invalid number in curly brackets");
    }
    if (n == 0) js_pat_throw(t, 1, "nothing to repeat");
    js_item *last = &seq[n - 1];
    if (!last->lit) {
        void **id = js_map_find(c, &t->subs, last->s, 1);
        if (!*id) {
            js_str *nm = js_alloc(c, sizeof *nm);
            *nm = js_add_rule(c, js_cat3(c, t->name, JS_S("-"), js_itoa(c, (long long)t->subs.n)), last->s);
            *id = nm;
        }
        last->s = *(js_str *)*id;
    }
    last->s = js_repeat(c, last->lit ? js_cat3(c, JS_S("\""), last->s, JS_S("\"")) : last->s, mn, mx, JS_S(""));
    last->lit = 0;
}

static js_str js_pat_class(js_pat *t)
{
    js_sb b = js_sb_new(t->c);
    js_putc(&b, '[');
    t->i++;
    while (t->i < t->len && t->p[t->i] != ']') {
        if (t->p[t->i] == '\\') {
            size_t el = js_escape_len(t->p, t->len, t->i);
            if (!el) js_pat_throw(t, 0, "unsupported escape in character class");
            js_put(&b, t->p + t->i, el);
            t->i += el;
        } else {
            js_putc(&b, t->p[t->i++]);
        }
    }
    if (t->i >= t->len) js_pat_throw(t, 1, "unterminated character class");
    js_putc(&b, ']');
    t->i++;
    return js_done(&b);
}

static js_str js_pat_literal(js_pat *t)
{
    js_sb b = js_sb_new(t->c);
    const char *p = t->p;
    while (t->i < t->len) {
        size_t i = t->i;
        if (p[i] == '\\') {
            if (i == t->len - 1) js_pat_throw(t, 1, "trailing backslash");
            if (strchr("^$.[]()|{}*+?", p[i + 1]) && p[i + 1]) {
                js_putc(&b, p[i + 1]);
                t->i += 2;
            } else {
                size_t el = js_escape_len(p, t->len, i);
                if (!el) js_pat_throw(t, 0, "unsupported escape");
                js_put(&b, p + i, el);
                t->i += el;
            }
        } else if (p[i] == '"') {
            js_puts(&b, "\\\"");
            t->i++;
        } else if (!js_non_literal(p[i]) &&
                   (i == t->len - 1 || b.n == 0 || p[i + 1] == '.' || !js_non_literal(p[i + 1]))) {
            js_putc(&b, p[i]);
            t->i++;
        } else {
            break;
        }
    }
    if (b.n == 0) js_pat_throw(t, 0, "unsupported character");
    return js_done(&b);
}

static js_str js_pat_transform(js_pat *t)
{
    js_ctx *c = t->c;
    js_item *seq = NULL;
    size_t n = 0, cap = 0;
    while (t->i < t->len) {
        char ch = t->p[t->i];
        js_item it = { JS_S(""), 0 };
        if (ch == '.') {
            it.s = js_add_rule(c, JS_S("dot"), JS_S("[^\\x0A\\x0D]"));
            t->i++;
        } else if (ch == '(') {
            t->i++;
            if (t->i < t->len && t->p[t->i] == '?') {
                if (t->i + 1 < t->len && t->p[t->i + 1] == ':') t->i += 2;
                else js_pat_throw(t, 0, "unsupported group syntax");
            }
            if (++t->depth > 100) js_pat_throw(t, 0, "pattern nesting too deep");
            it.s = js_cat3(c, JS_S("("), js_pat_transform(t), JS_S(")"));
        } else if (ch == ')') {
            t->i++;
            if (t->depth == 0) js_pat_throw(t, 1, "unbalanced parentheses");
            t->depth--;
            return js_join_seq(c, seq, n);
        } else if (ch == '^' || ch == '$') {
            js_pat_throw(t, 0, "anchor inside the pattern");
        } else if (ch == '[') {
            it.s = js_pat_class(t);
        } else if (ch == '|') {
            it.s = JS_S("|");
            t->i++;
        } else if (ch == '*' || ch == '+' || ch == '?') {
            if (n == 0) js_pat_throw(t, 1, "nothing to repeat");
            seq[n - 1].s = js_cat3(c, js_to_rule(c, seq[n - 1]), (js_str){ &t->p[t->i], 1 }, JS_S(""));
            seq[n - 1].lit = 0;
            t->i++;
            continue;
        } else if (ch == '{') {
            js_pat_curly(t, seq, n);
            continue;
        } else {
            it.s = js_pat_literal(t);
            it.lit = 1;
        }
        seq = js_grow(c, seq, n, &cap, sizeof *seq);
        seq[n++] = it;
    }
    return js_join_seq(c, seq, n);
}

static js_str js_visit_pattern(js_ctx *c, js_str pattern, js_str name)
{
    size_t snapshot = c->nrules;
    js_pat *t = js_alloc(c, sizeof *t);
    t->c = c;
    t->name = name;
    if (setjmp(t->jb)) {
        js_rules_truncate(c, snapshot);
        if (!t->invalid) return js_add_rule(c, name, js_prim(c, "string"));
        js_error(c, js_cat3(c, js_cat3(c, JS_S("Invalid pattern "), pattern, JS_S(": ")), (js_str){ t->why, strlen(t->why) },
                            JS_S("")));
        return JS_S("");
    }
    if (pattern.n < 2 || pattern.p[0] != '^' || pattern.p[pattern.n - 1] != '$') js_pat_throw(t, 0, "not anchored with '^' and '$'");
    t->p = pattern.p + 1;
    t->len = pattern.n - 2;
    js_str rule = js_pat_transform(t);
    if (t->depth != 0) js_pat_throw(t, 1, "unbalanced parentheses");
    return js_add_rule(c, name, js_cat3(c, JS_S("\"\\\"\" ("), rule, JS_S(") \"\\\"\"")));
}

/* ---- _not_strings: a JSON string that is none of the given ones, over their trie ---- */

typedef struct js_tnode js_tnode;
typedef struct { uint32_t cp; const char *bytes; size_t nb; js_tnode *child; } js_tedge;
struct js_tnode {
    js_tedge *kids;                     /* sorted by code point (common_trie's std::map) */
    size_t n, cap;
    int ends;                           /* a word ends here */
};

/* one well-formed UTF-8 character at s (the input passed the JSON parser): its length, 0 if none */
size_t js_utf8(const unsigned char *s, size_t n, uint32_t *cp)
{
    if (!n) return 0;
    if (s[0] < 0x80) { *cp = s[0]; return 1; }
    size_t len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 0;
    if (!len || len > n || s[0] > 0xF4) return 0;
    uint32_t v = s[0] & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[i] & 0x3F);
    }
    *cp = v;
    return len;
}

static void js_trie_insert(js_ctx *c, js_tnode *root, js_str w)
{
    js_tnode *cur = root;
    size_t pos = 0, len;
    uint32_t cp;
    while (pos < w.n && (len = js_utf8((const unsigned char *)w.p + pos, w.n - pos, &cp))) {
        size_t lo = 0, hi = cur->n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (cur->kids[mid].cp < cp) lo = mid + 1; else hi = mid;
        }
        if (lo == cur->n || cur->kids[lo].cp != cp) {
            cur->kids = js_grow(c, cur->kids, cur->n, &cur->cap, sizeof *cur->kids);
            memmove(&cur->kids[lo + 1], &cur->kids[lo], (cur->n - lo) * sizeof *cur->kids);
            cur->kids[lo] = (js_tedge){ cp, w.p + pos, len, js_alloc(c, sizeof(js_tnode)) };
            cur->n++;
        }
        cur = cur->kids[lo].child;
        pos += len;
    }
    cur->ends = 1;
}

/* the walk of _not_strings, with an explicit stack (a long key would be a deep recursion) */
static js_str js_not_strings(js_ctx *c, const js_str *words, size_t nw)
{
    js_tnode root = { NULL, 0, 0, 0 };
    for (size_t i = 0; i < nw; i++) js_trie_insert(c, &root, words[i]);
    js_str ch = js_prim(c, "char");
    js_sb o = js_sb_new(c);
    typedef struct { js_tnode *n; size_t k; } frame;
    frame *st = NULL;
    size_t sn = 0, scap = 0;
    js_puts(&o, "[\"] ( ");
    st = js_grow(c, st, sn, &scap, sizeof *st);
    st[sn++] = (frame){ &root, 0 };
    while (sn) {
        frame *f = &st[sn - 1];
        if (f->k < f->n->n) {
            js_tedge *e = &f->n->kids[f->k++];
            if (f->k > 1) js_puts(&o, " | ");
            js_putc(&o, '[');
            js_put(&o, e->bytes, e->nb);
            js_putc(&o, ']');
            if (e->child->n) {
                js_puts(&o, " (");
                st = js_grow(c, st, sn, &scap, sizeof *st);
                st[sn++] = (frame){ e->child, 0 };
            } else {
                js_putc(&o, ' ');
                js_putstr(&o, ch);
                js_putc(&o, '+');
            }
            continue;
        }
        if (f->n->n) {
            js_puts(&o, " | [^\"");
            for (size_t k = 0; k < f->n->n; k++) js_put(&o, f->n->kids[k].bytes, f->n->kids[k].nb);
            js_puts(&o, "] ");
            js_putstr(&o, ch);
            js_putc(&o, '*');
        }
        sn--;
        if (sn) js_putc(&o, ')');
    }
    js_puts(&o, " )");
    if (!root.ends) js_putc(&o, '?');
    js_puts(&o, " [\"]");
    return js_done(&o);
}

/* ---- the walk ---- */

static js_str js_visit(js_ctx *c, const js_node *s, js_str name);

static js_str js_resolve(js_ctx *c, const js_node *s)
{
    const char *h = memchr(s->ref.p, '#', s->ref.n);
    js_str frag = h ? (js_str){ h + 1, s->ref.n - (size_t)(h + 1 - s->ref.p) } : s->ref;
    js_str ref_name = js_cat(c, JS_S("ref"), js_rule_name(c, frag));
    int busy = 0;
    for (size_t i = 0; i < c->nresolving; i++) busy |= js_eq(c->resolving[i], s->ref);
    if (!js_rule_get(c, ref_name) && !busy) {
        if (!s->target) {
            js_error(c, js_cat(c, JS_S("Unresolved $ref "), s->ref));
            return JS_S("");
        }
        c->resolving = js_grow(c, c->resolving, c->nresolving, &c->cap_resolving, sizeof *c->resolving);
        c->resolving[c->nresolving++] = s->ref;
        ref_name = js_visit(c, s->target, ref_name);
        c->nresolving--;
    }
    return ref_name;
}

typedef struct { js_str name; const js_node *schema; } js_pp;

/* _build_object_rule; required is a set of names, additional may be NULL */
static js_str js_object_rule(js_ctx *c, const js_pp *props, size_t np, js_map *required, js_str name,
                             const js_node *additional)
{
    js_str pre = name.n ? js_cats(c, name, "-") : JS_S("");
    js_map kv = { 0 };                                   /* prop_kv_rule_names */
    js_str *req = js_alloc(c, (np + 1) * sizeof *req), *opt = js_alloc(c, (np + 2) * sizeof *opt);
    js_str *names = js_alloc(c, (np + 1) * sizeof *names);
    size_t nreq = 0, nopt = 0;
    for (size_t i = 0; i < np; i++) {
        js_str pn = props[i].name;
        js_str prule = js_visit(c, props[i].schema, js_cat(c, pre, pn));
        js_sb d = js_sb_new(c);
        json_value key = { JSON_STRING, (char *)pn.p, pn.n, 0, NULL, NULL, NULL };
        js_dump(&d, &key);
        js_str body = js_cat3(c, js_literal(c, js_done(&d)), JS_S(" space \":\" space "), prule);
        js_str *slot = js_alloc(c, sizeof *slot);
        *slot = js_add_rule(c, js_cat3(c, pre, pn, JS_S("-kv")), body);
        *js_map_find(c, &kv, pn, 1) = slot;
        if (js_map_find(c, required, pn, 0)) req[nreq++] = pn; else opt[nopt++] = pn;
        names[i] = pn;
    }
    if (additional) {
        js_str sub = js_cats(c, pre, "additional");
        js_str value = additional->kind != JS_ANY ? js_visit(c, additional, js_cats(c, sub, "-value")) : js_prim(c, "value");
        js_str key = np == 0 ? js_prim(c, "string") : js_add_rule(c, js_cats(c, sub, "-k"), js_not_strings(c, names, np));
        js_str *slot = js_alloc(c, sizeof *slot);
        *slot = js_add_rule(c, js_cats(c, sub, "-kv"), js_cat3(c, key, JS_S(" \":\" space "), value));
        *js_map_find(c, &kv, JS_S("*"), 1) = slot;
        opt[nopt++] = JS_S("*");
    }
    if (nreq == 0 && nopt == 0) return JS_S("\"{\" space \"}\"");
    js_sb r = js_sb_new(c);
    js_puts(&r, "\"{\" space ");
    for (size_t i = 0; i < nreq; i++) {
        if (i) js_puts(&r, " \",\" space ");
        js_putstr(&r, *(js_str *)*js_map_find(c, &kv, req[i], 0));
    }
    if (nopt) {
        js_puts(&r, " (");
        if (nreq) js_puts(&r, " \",\" space ( ");
        /* get_recursive_refs: the "-rest" rule of optional j holds the choices after it; made once
         * each, from the last back (the order b11669's recursion first adds them in) */
        js_str *part0 = js_alloc(c, nopt * sizeof *part0), *part1 = js_alloc(c, nopt * sizeof *part1);
        js_str *rest = js_alloc(c, nopt * sizeof *rest);
        for (size_t j = 0; j < nopt; j++) {
            js_str k = opt[j], kvn = *(js_str *)*js_map_find(c, &kv, k, 0);
            int star = js_eqs(k, "*");
            js_str comma = js_cat3(c, JS_S("( \",\" space "), kvn, JS_S(" )"));
            part1[j] = js_cats(c, comma, star ? "*" : "?");
            part0[j] = star ? js_cat3(c, kvn, JS_S(" "), js_cats(c, comma, "*")) : kvn;
        }
        for (size_t j = nopt - 1; j-- > 0;) {
            js_str body = j + 2 < nopt ? js_cat3(c, part1[j + 1], JS_S(" "), rest[j + 1]) : part1[j + 1];
            rest[j] = js_add_rule(c, js_cat3(c, pre, opt[j], JS_S("-rest")), body);
        }
        for (size_t i = 0; i < nopt; i++) {
            if (i) js_puts(&r, " | ");
            js_putstr(&r, part0[i]);
            if (i + 1 < nopt) { js_putc(&r, ' '); js_putstr(&r, rest[i]); }
        }
        if (nreq) js_puts(&r, " )");
        js_puts(&r, " )?");
    }
    js_puts(&r, " space \"}\"");
    return js_done(&r);
}

static int js_str_order(const void *a, const void *b) { return js_cmp(*(const js_str *)a, *(const js_str *)b); }

typedef struct {
    js_pp *props;
    size_t np, cap;
    js_map required;
    js_str *enums;                      /* constant rules of every enum met, to count */
    size_t ne, cap_e;
} js_allof;

static void js_allof_add(js_ctx *c, js_allof *a, const js_node *comp, int is_required)
{
    js_enter(c);                                         /* a $ref cycle here has no end in b11669 */
    if (comp->kind == JS_REF) {
        if (comp->target) js_allof_add(c, a, comp->target, is_required);
    } else if (comp->kind == JS_OBJECT) {
        for (size_t i = 0; i < comp->nprops; i++) {
            a->props = js_grow(c, a->props, a->np, &a->cap, sizeof *a->props);
            a->props[a->np++] = (js_pp){ comp->props[i].name, comp->props[i].schema };
            if (is_required) *js_map_find(c, &a->required, comp->props[i].name, 1) = (void *)1;
        }
    } else if (comp->kind == JS_ENUM) {
        for (size_t i = 0; i < comp->nvalues; i++) {
            a->enums = js_grow(c, a->enums, a->ne, &a->cap_e, sizeof *a->enums);
            a->enums[a->ne++] = js_const_rule(c, comp->values[i]);
        }
    }
    c->depth--;
}

static js_str js_visit_all_of(js_ctx *c, const js_node *s, js_str name, js_str rule_name)
{
    js_allof a = { 0 };
    for (size_t i = 0; i < s->nkids; i++) {
        const js_node *k = s->kids[i];
        if (k->kind == JS_ANY_OF)
            for (size_t j = 0; j < k->nkids; j++) js_allof_add(c, &a, k->kids[j], 0);
        else
            js_allof_add(c, &a, k, 1);
    }
    if (a.ne) {                                          /* std::map<rule, count>: sorted, counted */
        qsort(a.enums, a.ne, sizeof *a.enums, js_str_order);
        js_sb r = js_sb_new(c);
        size_t kept = 0;
        for (size_t i = 0; i < a.ne;) {
            size_t j = i;
            while (j < a.ne && js_eq(a.enums[j], a.enums[i])) j++;
            if (j - i == s->nkids) {
                js_puts(&r, kept++ ? " | " : "(");
                js_putstr(&r, a.enums[i]);
            }
            i = j;
        }
        if (kept) {
            js_putc(&r, ')');
            return js_add_rule(c, rule_name, js_done(&r));
        }
    }
    return js_add_rule(c, rule_name, js_object_rule(c, a.props, a.np, &a.required, name, NULL));
}

static js_str js_visit_prim(js_ctx *c, js_str rule_name, const char *type)
{
    return js_add_primitive(c, js_eqs(rule_name, "root") ? JS_S("root") : (js_str){ type, strlen(type) }, js_builtin_of(type));
}

static js_str js_visit2(js_ctx *c, const js_node *s, js_str name)
{
    js_str rule_name = js_reserved(name) ? js_cats(c, name, "-") : name.n ? name : JS_S("root");
    js_str sub = name.n ? js_cats(c, name, "-") : JS_S("");
    switch (s->kind) {
    case JS_REF:
        return js_add_rule(c, rule_name, js_resolve(c, s));
    case JS_ANY_OF: {
        js_sb r = js_sb_new(c);
        js_str pre = name.n ? sub : JS_S("alternative-");
        for (size_t i = 0; i < s->nkids; i++) {
            if (i) js_puts(&r, " | ");
            js_putstr(&r, js_visit(c, s->kids[i], js_cat(c, pre, js_itoa(c, (long long)i))));
        }
        return js_add_rule(c, rule_name, js_done(&r));
    }
    case JS_ALL_OF:
        return js_visit_all_of(c, s, name, rule_name);
    case JS_CONST:
        return js_add_rule(c, rule_name, js_const_rule(c, s->value));
    case JS_ENUM: {
        js_sb r = js_sb_new(c);
        js_putc(&r, '(');
        for (size_t i = 0; i < s->nvalues; i++) {
            if (i) js_puts(&r, " | ");
            js_putstr(&r, js_const_rule(c, s->values[i]));
        }
        js_putc(&r, ')');
        return js_add_rule(c, rule_name, js_done(&r));
    }
    case JS_OBJECT: {
        if (s->nprops == 0 && s->additional && s->additional->kind == JS_ANY)
            return js_add_rule(c, rule_name, js_prim(c, "object"));
        js_pp *pp = js_alloc(c, (s->nprops + 1) * sizeof *pp);
        js_map req = { 0 };
        for (size_t i = 0; i < s->nprops; i++) {
            pp[i] = (js_pp){ s->props[i].name, s->props[i].schema };
            if (s->props[i].required) *js_map_find(c, &req, s->props[i].name, 1) = (void *)1;
        }
        return js_add_rule(c, rule_name, js_object_rule(c, pp, s->nprops, &req, name, s->additional));
    }
    case JS_TUPLE: {
        js_sb r = js_sb_new(c);
        js_puts(&r, "\"[\" space ");
        for (size_t i = 0; i < s->nkids; i++) {
            if (i) js_puts(&r, " \",\" space ");
            js_putstr(&r, js_visit(c, s->kids[i], js_cat(c, js_cats(c, sub, "tuple-"), js_itoa(c, (long long)i))));
        }
        js_puts(&r, " space \"]\"");
        return js_add_rule(c, rule_name, js_done(&r));
    }
    case JS_ARRAY: {
        if (s->items->kind == JS_ANY && s->min_len == 0 && s->max_len < 0) return js_visit_prim(c, rule_name, "array");
        js_str item = js_visit(c, s->items, js_cats(c, sub, "item"));
        int mx = s->max_len < 0 ? INT_MAX : s->max_len;
        return js_add_rule(c, rule_name, js_cat3(c, JS_S("\"[\" space "), js_repeat(c, item, s->min_len, mx, JS_S("\",\" space")),
                                                 JS_S(" space \"]\"")));
    }
    case JS_STRING: {
        if (s->pattern.n) return js_visit_pattern(c, s->pattern, rule_name);
        if (s->format == JS_FMT_UUID) return js_visit_prim(c, rule_name, "uuid");
        if (s->format != JS_FMT_NONE) {
            const char *pn = s->format == JS_FMT_DATE ? "date-string" : s->format == JS_FMT_TIME ? "time-string"
                                                                                             : "date-time-string";
            return js_add_rule(c, rule_name, js_prim(c, pn));
        }
        if (s->min_len > 0 || s->max_len >= 0) {
            js_str ch = js_prim(c, "char");
            int mx = s->max_len < 0 ? INT_MAX : s->max_len;
            return js_add_rule(c, rule_name, js_cat3(c, JS_S("\"\\\"\" "), js_repeat(c, ch, s->min_len, mx, JS_S("")), JS_S(" \"\\\"\"")));
        }
        return js_visit_prim(c, rule_name, "string");
    }
    case JS_INTEGER: {
        if (s->min == INT64_MIN && s->max == INT64_MAX) return js_visit_prim(c, rule_name, "integer");
        js_sb r = js_sb_new(c);
        js_putc(&r, '(');
        js_min_max_int(&r, s->min, s->max, 16, 1);
        js_putc(&r, ')');
        return js_add_rule(c, rule_name, js_done(&r));
    }
    case JS_NUMBER: return js_visit_prim(c, rule_name, "number");
    case JS_BOOLEAN: return js_visit_prim(c, rule_name, "boolean");
    case JS_NULL: return js_visit_prim(c, rule_name, "null");
    default: return js_add_rule(c, rule_name, js_prim(c, "value"));
    }
}

static js_str js_visit(js_ctx *c, const js_node *s, js_str name)
{
    js_enter(c);
    js_str r = js_visit2(c, s, name);
    c->depth--;
    return r;
}

static int js_rule_order(const void *a, const void *b)
{
    return js_cmp(((const js_rule *)a)->name, ((const js_rule *)b)->name);
}

/* ------------------------------------------------------------------ */

void js_free_arena(js_ctx *c)
{
    while (c->arena) {
        js_chunk *k = c->arena->next;
        free(c->arena);
        c->arena = k;
    }
}

/* check_errors, then format_grammar: the rules sorted by name */
static int js_write_rules(js_ctx *c, js_str *text)
{
    js_sb t = js_sb_new(c);
    if (c->nerrors) {
        js_puts(&t, "JSON schema conversion failed:\n");
        for (size_t i = 0; i < c->nerrors; i++) {
            if (i) js_putc(&t, '\n');
            js_putstr(&t, c->errors[i]);
        }
        *text = js_done(&t);
        return JSON_SCHEMA_REFUSED;
    }
    qsort(c->rules, c->nrules, sizeof *c->rules, js_rule_order);
    for (size_t i = 0; i < c->nrules; i++) {
        js_putstr(&t, c->rules[i].name);
        js_puts(&t, " ::= ");
        js_putstr(&t, c->rules[i].body);
        js_putc(&t, '\n');
    }
    *text = js_done(&t);
    return JSON_SCHEMA_OK;
}

/* the whole conversion; returns the code, the text in *text (in the arena) */
static int js_run(js_ctx *c, const json_value *schema, js_str *text)
{
    if (setjmp(c->top)) {
        *text = c->msg;
        if (c->code == JSON_SCHEMA_REFUSED) *text = js_cat(c, JS_S("JSON schema conversion failed:\n"), c->msg);
        return c->code;
    }
    c->root = schema;
    js_node *root = js_build_node(c, schema, NULL, JS_S("#"));
    for (size_t i = 0; i < c->npending; i++) c->pending[i]->target = *js_map_find(c, &c->refs, c->pending[i]->ref, 0);

    js_rule_put(c, JS_S("space"), JS_S(JS_SPACE_RULE));
    js_visit(c, root, JS_S(""));
    return js_write_rules(c, text);
}

int json_schema_to_gbnf(const json_value *schema, unsigned flags, char **out, size_t *out_len)
{
    static const json_value object_type = { JSON_STRING, "object", 6, 0, NULL, NULL, NULL };
    json_value wrap = { JSON_OBJECT, NULL, 0, 0, NULL, NULL, NULL };
    json_value *item = (json_value *)&object_type;
    char *key = "type";
    size_t key_len = 4;
    js_str text;

    *out = NULL;
    if (out_len) *out_len = 0;
    if ((flags & JSON_SCHEMA_FIELD) && schema->type == JSON_OBJECT && schema->n == 0) {
        wrap.n = 1;                             /* server-schema.cpp: {} is {"type": "object"} */
        wrap.items = &item;
        wrap.keys = &key;
        wrap.key_lens = &key_len;
        schema = &wrap;
    }
    js_ctx *c = calloc(1, sizeof *c);
    if (!c) return JSON_SCHEMA_LIMIT;
    int code = js_run(c, schema, &text);
    char *d = malloc(text.n + 1);
    if (d) {
        if (text.n) memcpy(d, text.p, text.n);
        d[text.n] = 0;
        *out = d;
        if (out_len) *out_len = text.n;
    } else {
        code = JSON_SCHEMA_LIMIT;
    }
    js_free_arena(c);
    free(c);
    return code;
}

/* ------------------------------------------------------------------ */
/* b11669's build_grammar(cb) builder (common_grammar_builder over one   */
/* converter), for the PEG grammar writer (peg_grammar.c)                 */

struct gbnf_builder {
    js_ctx c;
};

static int js_builder_start(gbnf_builder *b)
{
    if (setjmp(b->c.top)) return -1;
    js_rule_put(&b->c, JS_S("space"), JS_S(JS_SPACE_RULE));         /* the converter's constructor */
    return 0;
}

gbnf_builder *gbnf_builder_new(void)
{
    gbnf_builder *b = calloc(1, sizeof *b);
    if (b && js_builder_start(b)) { gbnf_builder_free(b); return NULL; }
    return b;
}

void gbnf_builder_free(gbnf_builder *b)
{
    if (!b) return;
    js_free_arena(&b->c);
    free(b);
}

static void js_out(jbuf *out, js_str s)
{
    if (out) { jbuf_reset(out); jbuf_put(out, s.p, s.n); }
}

int gbnf_builder_add_rule(gbnf_builder *b, const char *name, size_t name_len, const char *body, size_t body_len, jbuf *out)
{
    js_ctx *c = &b->c;
    if (setjmp(c->top)) return -1;
    js_str n = js_add_rule(c, js_dup(c, name, name_len), js_dup(c, body, body_len));
    js_out(out, n);
    return 0;
}

int gbnf_builder_add_schema(gbnf_builder *b, const char *name, size_t name_len, const json_value *schema, jbuf *out)
{
    js_ctx *c = &b->c;
    if (setjmp(c->top)) {
        js_str m = c->msg;
        if (c->code == JSON_SCHEMA_REFUSED) m = js_cat(c, JS_S("JSON schema conversion failed:\n"), c->msg);
        js_out(out, m);
        return c->code;
    }
    c->root = schema;                           /* a document of its own: its $refs only */
    c->refs = (js_map){ 0 };
    c->npending = 0;
    c->depth = 0;
    js_node *root = js_build_node(c, schema, NULL, JS_S("#"));
    for (size_t i = 0; i < c->npending; i++) c->pending[i]->target = *js_map_find(c, &c->refs, c->pending[i]->ref, 0);
    js_str nm = js_dup(c, name, name_len);
    if (js_eqs(nm, "root")) nm = JS_S("");     /* build_grammar's add_schema */
    js_out(out, js_visit(c, root, nm));
    return JSON_SCHEMA_OK;
}

static int js_builder_text(js_ctx *c, js_str *text)
{
    if (setjmp(c->top)) {
        *text = c->msg;
        return c->code;
    }
    return js_write_rules(c, text);
}

int gbnf_builder_finish(gbnf_builder *b, char **out, size_t *out_len)
{
    js_str text;
    *out = NULL;
    if (out_len) *out_len = 0;
    int code = js_builder_text(&b->c, &text);
    char *d = malloc(text.n + 1);
    if (!d) return JSON_SCHEMA_LIMIT;
    if (text.n) memcpy(d, text.p, text.n);
    d[text.n] = 0;
    *out = d;
    if (out_len) *out_len = text.n;
    return code;
}

void gbnf_format_literal(jbuf *out, const char *s, size_t n)
{
    jbuf_putc(out, '"');
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '\r') jbuf_puts(out, "\\r");
        else if (ch == '\n') jbuf_puts(out, "\\n");
        else if (ch == '"') jbuf_puts(out, "\\\"");
        else if (ch == '\\') jbuf_puts(out, "\\\\");
        else jbuf_putc(out, ch);
    }
    jbuf_putc(out, '"');
}

/* common_chat_schema::may_be_string (a $ref cycle counts as not a string) */
static int js_may_be_string(const js_node *s, int depth)
{
    if (depth > JSON_SCHEMA_MAX_DEPTH) return 0;
    switch (s->kind) {
    case JS_STRING: return 1;
    case JS_CONST: return s->value->type == JSON_STRING;
    case JS_ENUM:
        for (size_t i = 0; i < s->nvalues; i++) if (s->values[i]->type == JSON_STRING) return 1;
        return 0;
    case JS_REF: return s->target ? js_may_be_string(s->target, depth + 1) : 0;
    case JS_ANY_OF:
        for (size_t i = 0; i < s->nkids; i++) if (js_may_be_string(s->kids[i], depth + 1)) return 1;
        return 0;
    case JS_ALL_OF: {
        int any = 0;
        for (size_t i = 0; i < s->nkids; i++) {
            if (s->kids[i]->kind == JS_ANY) continue;
            if (!js_may_be_string(s->kids[i], depth + 1)) return 0;
            any = 1;
        }
        return any;
    }
    default: return 0;
    }
}

static int js_run_may(js_ctx *c, const json_value *schema, int *out)
{
    if (setjmp(c->top)) return c->code;
    c->root = schema;
    js_node *root = js_build_node(c, schema, NULL, JS_S("#"));
    for (size_t i = 0; i < c->npending; i++) c->pending[i]->target = *js_map_find(c, &c->refs, c->pending[i]->ref, 0);
    *out = js_may_be_string(root, 0);
    return JSON_SCHEMA_OK;
}

int json_schema_may_be_string(const json_value *schema, int *out)
{
    *out = 0;
    js_ctx *c = calloc(1, sizeof *c);
    if (!c) return JSON_SCHEMA_LIMIT;
    int code = js_run_may(c, schema, out);
    js_free_arena(c);
    free(c);
    return code;
}
