/*
 * json_schema_ollama.c -- Ollama v0.13.3's "format" (llm/server.go) and the
 * schema converter of the llama.cpp it vendors (17f7f4ba's
 * common/json-schema-to-grammar.cpp, the older SchemaConverter), as Ollama's
 * schema_to_grammar (llama/sampling_ext.cpp) runs it: see json_schema.h.
 *
 * That converter walks the raw JSON (nlohmann::ordered_json), not a typed
 * schema: what nlohmann's accessors do on a value of another type (a
 * type_error, a range-for over a scalar visiting it once, items() keys "" or
 * the index) is reproduced, because each decides a rule or a failure. Every
 * exception and every collected error is the same failure to Ollama
 * ("invalid JSON schema in format"). Where the C++ would crash (seq.back() of
 * an empty sequence, unbounded recursion) or loop forever (a pattern
 * character its literal scanner cannot take), bankml refuses with that reason.
 *
 * Its rules live in a std::unordered_map, and format_grammar writes them in
 * that map's iteration order: libstdc++'s (Ollama's Linux build, g++), which
 * ol_order replays from the insertion order, std::hash<std::string> and the
 * bucket counts libstdc++'s prime rehash policy picks (measured).
 */
#include "sampling/json_schema.h"
#include "sampling/json_schema_int.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    js_ctx c;                           /* first: js_* take &o->c */
    const json_value *root;
    js_map refs;                        /* _refs: ref text -> const json_value* */
    json_value *parsed;                 /* the schema parsed from the bytes alone (freed at the end) */
} ol_ctx;

static const json_value ol_null = { JSON_NULL, NULL, 0, 0, NULL, NULL, NULL };

static void ol_fail(ol_ctx *o, const char *what) __attribute__((noreturn));
static void ol_fail(ol_ctx *o, const char *what)      /* an exception: Ollama's schema_to_grammar returns 0 */
{
    js_throw(&o->c, JSON_SCHEMA_REFUSED, (js_str){ what, strlen(what) });
}

static void ol_refuse(ol_ctx *o, const char *why) __attribute__((noreturn));
static void ol_refuse(ol_ctx *o, const char *why)     /* what Ollama cannot answer (a crash, a hang) */
{
    js_throw(&o->c, JSON_SCHEMA_LIMIT, js_cat(&o->c, JS_S("format with a JSON schema: "), (js_str){ why, strlen(why) }));
}

/* ---- nlohmann's views of a value of any type ---- */

static int ol_is_null(const json_value *v) { return !v || v->type == JSON_NULL; }
static int ol_is_str(const json_value *v, const char *s) { return v && v->type == JSON_STRING && js_eqs((js_str){ v->str, v->len }, s); }

/* implicit conversion to std::string: a type_error unless a string */
static js_str ol_string(ol_ctx *o, const json_value *v)
{
    if (!v || v->type != JSON_STRING) ol_fail(o, "type must be string");
    return (js_str){ v->str, v->len };
}

/* size(): null 0, array/object its items, any other 1 */
static size_t ol_size(const json_value *v)
{
    if (ol_is_null(v)) return 0;
    return v->type == JSON_ARRAY || v->type == JSON_OBJECT ? v->n : 1;
}

/* a range-for (and items()) over v: element k of ol_size(v) */
static const json_value *ol_elem(const json_value *v, size_t k)
{
    return v->type == JSON_ARRAY || v->type == JSON_OBJECT ? v->items[k] : v;
}

/* items()'s key(): an object's key, an array's index, "" for a scalar */
static js_str ol_key(ol_ctx *o, const json_value *v, size_t k)
{
    if (v->type == JSON_OBJECT) return (js_str){ v->keys[k], v->key_lens[k] };
    if (v->type == JSON_ARRAY) return js_itoa(&o->c, (long long)k);
    return JS_S("");
}

static int ol_empty(const json_value *v)
{
    if (ol_is_null(v)) return 1;
    return (v->type == JSON_ARRAY || v->type == JSON_OBJECT) && v->n == 0;
}

/* get<int64_t>(): a number (number_integer_t's own conversion: a boolean is a type_error) */
static int64_t ol_get_i64(ol_ctx *o, const json_value *v)
{
    if (!v || v->type != JSON_NUMBER) ol_fail(o, "type must be number");
    js_num n = js_number(v);
    return n.kind == 0 ? n.i : n.kind == 1 ? (int64_t)n.u : js_d2i(n.d);
}

/* get<int>(): the generic arithmetic conversion, which also takes a boolean */
static int ol_get_int(ol_ctx *o, const json_value *v)
{
    if (v && (v->type == JSON_TRUE || v->type == JSON_FALSE)) return v->type == JSON_TRUE;
    if (v && v->type == JSON_NUMBER && js_number(v).kind == 2) {
        double d = js_number(v).d;                       /* static_cast<int>: cvttsd2si */
        return d > -2147483649.0 && d < 2147483648.0 ? (int)d : INT_MIN;
    }
    return (int)(uint32_t)(uint64_t)ol_get_i64(o, v);
}

/* ---- the rule table (PRIMITIVE_RULES, STRING_FORMAT_RULES): every body ends in space ---- */

static const js_builtin ol_builtins[] = {
    { "boolean", "(\"true\" | \"false\") space", { NULL } },
    { "decimal-part", "[0-9]{1,16}", { NULL } },
    { "integral-part", "[0] | [1-9] [0-9]{0,15}", { NULL } },
    { "number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space",
      { "integral-part", "decimal-part", NULL } },
    { "integer", "(\"-\"? integral-part) space", { "integral-part", NULL } },
    { "value", "object | array | string | number | boolean | null",
      { "object", "array", "string", "number", "boolean", "null", NULL } },
    { "object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space",
      { "string", "value", NULL } },
    { "array", "\"[\" space ( value (\",\" space value)* )? \"]\" space", { "value", NULL } },
    { "uuid", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
              "[0-9a-fA-F]{12} \"\\\"\" space", { NULL } },
    { "char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})", { NULL } },
    { "string", "\"\\\"\" char* \"\\\"\" space", { "char", NULL } },
    { "null", "\"null\" space", { NULL } },
    { "date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] )", { NULL } },
    { "time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | "
              "\"-\" ) ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )", { NULL } },
    { "date-time", "date \"T\" time", { "date", "time", NULL } },
    { "date-string", "\"\\\"\" date \"\\\"\" space", { "date", NULL } },
    { "time-string", "\"\\\"\" time \"\\\"\" space", { "time", NULL } },
    { "date-time-string", "\"\\\"\" date-time \"\\\"\" space", { "date-time", NULL } },
};
#define OL_NPRIM 12                     /* the first 12 are PRIMITIVE_RULES */
#define OL_NBUILTIN (sizeof ol_builtins / sizeof ol_builtins[0])

static const js_builtin *ol_builtin(js_str name, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (js_eqs(name, ol_builtins[i].name)) return &ol_builtins[i];
    return NULL;
}

static js_str ol_add_primitive(ol_ctx *o, js_str name, const js_builtin *b)
{
    js_str n = js_add_rule(&o->c, name, (js_str){ b->body, strlen(b->body) });
    for (int i = 0; b->deps[i]; i++) {
        js_str dep = { b->deps[i], strlen(b->deps[i]) };
        if (!js_rule_get(&o->c, dep)) ol_add_primitive(o, dep, ol_builtin(dep, 0, OL_NBUILTIN));
    }
    return n;
}
static js_str ol_prim(ol_ctx *o, const char *name)
{
    js_str n = { name, strlen(name) };
    return ol_add_primitive(o, n, ol_builtin(n, 0, OL_NBUILTIN));
}

static js_str ol_const_rule(ol_ctx *o, const json_value *v)
{
    js_sb b = js_sb_new(&o->c);
    js_dump(&b, v);
    return js_literal(&o->c, js_done(&b));
}

/* ---- _visit_pattern: errors collected, no plain-string fallback ---- */

typedef struct {
    ol_ctx *o;
    const char *p;
    size_t i, len;
    js_str name;
    js_map subs;                        /* sub_rule_ids */
} ol_pat;

static int ol_non_literal(char ch) { return ch && strchr("|.()[]{}*+?", ch) != NULL; }
static int ol_escaped(char ch) { return ch && strchr("^$.[]()|{}*+?", ch) != NULL; }

/* std::stoi: 0 ok, 1 invalid_argument (no digits), 2 out_of_range */
static int ol_stoi(ol_ctx *o, js_str s, int *out)
{
    js_str t = js_dup(&o->c, s.p, s.n);
    char *end;
    errno = 0;
    long v = strtol(t.p, &end, 10);
    if (end == t.p) return 1;
    if (errno == ERANGE || v < INT_MIN || v > INT_MAX) return 2;
    *out = (int)v;
    return 0;
}

static js_str ol_substr(const ol_pat *t, size_t at, size_t n)
{
    if (at >= t->len) return JS_S("");
    return (js_str){ t->p + at, n < t->len - at ? n : t->len - at };
}

/* the '{m,n}' branch; 1 when transform() returns ("", false) at once */
static int ol_pat_curly(ol_pat *t, js_item *seq, size_t n)
{
    js_ctx *c = &t->o->c;
    size_t start = ++t->i;
    while (t->i < t->len && t->p[t->i] != '}') t->i++;
    if (t->i >= t->len) js_error(c, JS_S("Unbalanced curly brackets"));
    js_str body = ol_substr(t, start, t->i - start);
    t->i++;
    js_str nums[3];
    size_t nn = 0, s0 = 0;
    for (size_t k = 0; k <= body.n; k++)
        if (k == body.n || body.p[k] == ',') {
            if (nn < 3) nums[nn] = (js_str){ body.p + s0, k - s0 };
            nn++;
            s0 = k + 1;
        }
    int mn = 0, mx = INT_MAX, r = 0;
    if (nn == 1) {
        r = ol_stoi(t->o, nums[0], &mn);
        mx = mn;
    } else if (nn != 2) {
        js_error(c, JS_S("Wrong number of values in curly brackets"));
    } else {
        if (nums[0].n) r = ol_stoi(t->o, nums[0], &mn);
        if (!r && nums[1].n) r = ol_stoi(t->o, nums[1], &mx);
    }
    if (r == 2) ol_fail(t->o, "stoi: out of range");
    if (r == 1) { js_error(c, JS_S("Invalid number in curly brackets")); return 1; }
    if (n == 0) ol_refuse(t->o, "Ollama v0.13.3 crashes on this pattern (a repetition with nothing before it: seq.back() of an empty sequence)");
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
    return 0;
}

static js_str ol_pat_class(ol_pat *t)
{
    js_sb b = js_sb_new(&t->o->c);
    js_putc(&b, '[');
    t->i++;
    while (t->i < t->len && t->p[t->i] != ']') {
        if (t->p[t->i] == '\\') {
            js_putstr(&b, ol_substr(t, t->i, 2));
            t->i += 2;
        } else {
            js_putc(&b, t->p[t->i++]);
        }
    }
    if (t->i >= t->len) js_error(&t->o->c, JS_S("Unbalanced square brackets"));
    js_putc(&b, ']');
    t->i++;
    return js_done(&b);
}

static js_str ol_pat_literal(ol_pat *t)
{
    js_sb b = js_sb_new(&t->o->c);
    const char *p = t->p;
    while (t->i < t->len) {
        size_t i = t->i;
        if (p[i] == '\\' && i < t->len - 1) {
            if (ol_escaped(p[i + 1])) { js_putc(&b, p[i + 1]); t->i += 2; }
            else { js_put(&b, p + i, 2); t->i += 2; }
        } else if (p[i] == '"') {
            js_puts(&b, "\\\"");
            t->i++;
        } else if (!ol_non_literal(p[i]) &&
                   (i == t->len - 1 || b.n == 0 || p[i + 1] == '.' || !ol_non_literal(p[i + 1]))) {
            js_putc(&b, p[i]);
            t->i++;
        } else {
            break;
        }
    }
    if (b.n == 0) ol_refuse(t->o, "Ollama v0.13.3 loops forever on this pattern (its literal scanner stops at a ']' or '}' "
                                  "it cannot take and never moves on)");
    return js_done(&b);
}

static js_str ol_pat_transform(ol_pat *t)
{
    js_ctx *c = &t->o->c;
    js_item *seq = NULL;
    size_t n = 0, cap = 0, start = t->i;
    js_enter(c);
    while (t->i < t->len) {
        char ch = t->p[t->i];
        js_item it = { JS_S(""), 0 };
        if (ch == '.') {
            it.s = js_add_rule(c, JS_S("dot"), JS_S("[^\\x0A\\x0D]"));
            t->i++;
        } else if (ch == '(') {
            t->i++;
            it.s = js_cat3(c, JS_S("("), ol_pat_transform(t), JS_S(")"));
        } else if (ch == ')') {
            t->i++;
            if (start > 0 && t->p[start - 1] != '(') js_error(c, JS_S("Unbalanced parentheses"));
            break;
        } else if (ch == '[') {
            it.s = ol_pat_class(t);
        } else if (ch == '|') {
            it.s = JS_S("|");
            t->i++;
        } else if (ch == '*' || ch == '+' || ch == '?') {
            if (n == 0) ol_refuse(t->o, "Ollama v0.13.3 crashes on this pattern (a quantifier with nothing before it: "
                                        "seq.back() of an empty sequence)");
            seq[n - 1].s = js_cat3(c, js_to_rule(c, seq[n - 1]), (js_str){ &t->p[t->i], 1 }, JS_S(""));
            seq[n - 1].lit = 0;
            t->i++;
            continue;
        } else if (ch == '{') {
            if (ol_pat_curly(t, seq, n)) { c->depth--; return JS_S(""); }
            continue;
        } else {
            it.s = ol_pat_literal(t);
            it.lit = 1;
        }
        seq = js_grow(c, seq, n, &cap, sizeof *seq);
        seq[n++] = it;
    }
    c->depth--;
    return js_join_seq(c, seq, n);
}

static js_str ol_visit_pattern(ol_ctx *o, js_str pattern, js_str name)
{
    if (!(pattern.n && pattern.p[0] == '^' && pattern.p[pattern.n - 1] == '$')) {
        js_error(&o->c, JS_S("Pattern must start with '^' and end with '$'"));
        return JS_S("");
    }
    ol_pat *t = js_alloc(&o->c, sizeof *t);
    t->o = o;
    t->name = name;
    t->p = pattern.p + 1;
    t->len = pattern.n - 2;
    js_str rule = ol_pat_transform(t);
    return js_add_rule(&o->c, name, js_cat3(&o->c, JS_S("\"\\\"\" ("), rule, JS_S(") \"\\\"\" space")));
}

/* ---- _not_strings over a byte trie (std::map<char, TrieNode>: signed char order) ---- */

typedef struct ol_tnode ol_tnode;
typedef struct { signed char ch; ol_tnode *child; } ol_tedge;
struct ol_tnode { ol_tedge *kids; size_t n, cap; int ends; };

static js_str ol_not_strings(ol_ctx *o, const js_str *words, size_t nw)
{
    js_ctx *c = &o->c;
    ol_tnode root = { NULL, 0, 0, 0 };
    for (size_t w = 0; w < nw; w++) {
        ol_tnode *cur = &root;
        for (size_t k = 0; k < words[w].n; k++) {
            signed char ch = (signed char)words[w].p[k];
            size_t lo = 0;
            while (lo < cur->n && cur->kids[lo].ch < ch) lo++;
            if (lo == cur->n || cur->kids[lo].ch != ch) {
                cur->kids = js_grow(c, cur->kids, cur->n, &cur->cap, sizeof *cur->kids);
                memmove(&cur->kids[lo + 1], &cur->kids[lo], (cur->n - lo) * sizeof *cur->kids);
                cur->kids[lo] = (ol_tedge){ ch, js_alloc(c, sizeof(ol_tnode)) };
                cur->n++;
            }
            cur = cur->kids[lo].child;
        }
        cur->ends = 1;
    }
    js_str chr = ol_prim(o, "char");
    js_sb out = js_sb_new(c);
    typedef struct { ol_tnode *n; size_t k; } frame;
    frame *st = NULL;
    size_t sn = 0, scap = 0;
    js_puts(&out, "[\"] ( ");
    st = js_grow(c, st, sn, &scap, sizeof *st);
    st[sn++] = (frame){ &root, 0 };
    while (sn) {
        frame *f = &st[sn - 1];
        if (f->k < f->n->n) {
            ol_tedge *e = &f->n->kids[f->k++];
            if (f->k > 1) js_puts(&out, " | ");
            js_putc(&out, '[');
            js_putc(&out, (char)e->ch);
            js_putc(&out, ']');
            if (e->child->n) {
                js_puts(&out, " (");
                st = js_grow(c, st, sn, &scap, sizeof *st);
                st[sn++] = (frame){ e->child, 0 };
            } else if (e->child->ends) {
                js_putc(&out, ' ');
                js_putstr(&out, chr);
                js_putc(&out, '+');
            }
            continue;
        }
        if (f->n->n) {
            js_puts(&out, " | [^\"");
            for (size_t k = 0; k < f->n->n; k++) js_putc(&out, (char)f->n->kids[k].ch);
            js_puts(&out, "] ");
            js_putstr(&out, chr);
            js_putc(&out, '*');
        }
        sn--;
        if (sn) js_putc(&out, ')');
    }
    js_puts(&out, " )");
    if (!root.ends) js_putc(&out, '?');
    js_puts(&out, " [\"] space");
    return js_done(&out);
}

/* ---- resolve_refs: every "$ref" found in the raw JSON, walked from the root ---- */

static int ol_starts(js_str s, const char *pre) { size_t n = strlen(pre); return s.n >= n && memcmp(s.p, pre, n) == 0; }

static const json_value *ol_ref_get(ol_ctx *o, js_str ref)
{
    void **v = js_map_find(&o->c, &o->refs, ref, 0);
    return v ? (const json_value *)*v : NULL;
}

static void ol_ref_put(ol_ctx *o, js_str ref, const json_value *v)
{
    *js_map_find(&o->c, &o->refs, ref, 1) = (void *)(uintptr_t)v;
}

/* std::stoul of a pointer token into an array of size n: the index, or n when it has no digits */
static size_t ol_stoul(ol_ctx *o, js_str s, size_t n)
{
    js_str t = js_dup(&o->c, s.p, s.n);
    char *end;
    errno = 0;
    unsigned long v = strtoul(t.p, &end, 10);
    if (end == t.p) return n;
    if (errno == ERANGE) ol_fail(o, "stoul: out of range");
    return (size_t)v;
}

static void ol_walk_ref(ol_ctx *o, js_str ref, const json_value *target)
{
    const char *h = memchr(ref.p, '#', ref.n);
    js_str ptr = { h + 1, ref.n - (size_t)(h + 1 - ref.p) };
    size_t k = 0, tok = 0;
    for (size_t j = 0; j <= ptr.n; j++) {
        if (j < ptr.n && ptr.p[j] != '/') continue;
        js_str sel = { ptr.p + k, j - k };
        k = j + 1;
        if (tok++ == 0) continue;                            /* tokens[0] is skipped */
        const json_value *next = target->type == JSON_OBJECT ? js_get_n(target, sel.p, sel.n) : NULL;
        if (next) {
            target = next;
        } else if (target->type == JSON_ARRAY) {
            size_t ix = ol_stoul(o, sel, target->n);
            if (ix >= target->n) { js_error(&o->c, JS_S("Error resolving ref")); return; }
            target = target->items[ix];
        } else {
            js_error(&o->c, JS_S("Error resolving ref"));
            return;
        }
    }
    ol_ref_put(o, ref, target);
}

static void ol_resolve_refs(ol_ctx *o, const json_value *n)
{
    if (n->type == JSON_ARRAY) {
        for (size_t i = 0; i < n->n; i++) ol_resolve_refs(o, n->items[i]);
        return;
    }
    if (n->type != JSON_OBJECT) return;
    const json_value *r = js_get(n, "$ref");
    if (!r) {
        for (size_t i = 0; i < n->n; i++) ol_resolve_refs(o, n->items[i]);
        return;
    }
    js_str ref = ol_string(o, r);
    if (js_map_find(&o->c, &o->refs, ref, 0)) return;
    if (ol_starts(ref, "https://")) {
        /* the remote fetch: Ollama's build_grammar passes a fetcher that returns null */
        const char *h = memchr(ref.p, '#', ref.n);
        js_str base = { ref.p, h ? (size_t)(h - ref.p) : ref.n };
        void **have = js_map_find(&o->c, &o->refs, base, 0);
        const json_value *target = have ? (const json_value *)*have : &ol_null;
        if (!have) ol_ref_put(o, base, &ol_null);
        if (!h || (size_t)(h + 1 - ref.p) == ref.n) return;
        ol_walk_ref(o, ref, target);
    } else if (ol_starts(ref, "#/")) {
        ol_walk_ref(o, ref, o->root);
    } else {
        js_error(&o->c, JS_S("Unsupported ref"));
    }
}

/* ---- the walk ---- */

static js_str ol_visit(ol_ctx *o, const json_value *s, js_str name);

static js_str ol_resolve(ol_ctx *o, js_str ref)
{
    js_ctx *c = &o->c;
    const char *h = memchr(ref.p, '#', ref.n);
    js_str frag = h ? (js_str){ h + 1, ref.n - (size_t)(h + 1 - ref.p) } : ref;
    js_str ref_name = js_cat(c, JS_S("ref"), js_rule_name(c, frag));
    int busy = 0;
    for (size_t i = 0; i < c->nresolving; i++) busy |= js_eq(c->resolving[i], ref);
    if (!js_rule_get(c, ref_name) && !busy) {
        c->resolving = js_grow(c, c->resolving, c->nresolving, &c->cap_resolving, sizeof *c->resolving);
        c->resolving[c->nresolving++] = ref;
        const json_value *t = ol_ref_get(o, ref);
        ref_name = ol_visit(o, t ? t : &ol_null, ref_name);
        c->nresolving--;
    }
    return ref_name;
}

typedef struct { js_str name; const json_value *schema; } ol_pp;

static js_str ol_join_name(ol_ctx *o, js_str name, js_str part)
{
    return name.n ? js_cat3(&o->c, name, JS_S("-"), part) : part;
}

/* get_recursive_refs(ks[0..n), false), its recursion unrolled from the last key back (each level's
 * "-rest" rule is added once the levels below it are written, as the recursion adds them) */
static js_str ol_rest(ol_ctx *o, const js_str *ks, size_t n, js_map *kv, js_str name)
{
    js_ctx *c = &o->c;
    js_str tail = JS_S("");
    for (size_t j = n; j-- > 0;) {
        js_str k = ks[j];
        void **v = js_map_find(c, kv, k, 0);
        js_str kvn = v ? *(js_str *)*v : JS_S("");
        js_str comma = js_cat3(c, JS_S("( \",\" space "), kvn, JS_S(" )"));
        int star = js_eqs(k, "*");
        js_str res = j > 0 ? js_cats(c, comma, star ? "*" : "?") : star ? js_cat3(c, kvn, JS_S(" "), js_cats(c, comma, "*")) : kvn;
        if (j + 1 < n) res = js_cat3(c, res, JS_S(" "), js_add_rule(c, js_cats(c, ol_join_name(o, name, k), "-rest"), tail));
        tail = res;
    }
    return tail;
}

/* _build_object_rule; required: names (a set), additional: NULL for json() */
static js_str ol_object_rule(ol_ctx *o, const ol_pp *props, size_t np, js_map *required, js_str name,
                             const json_value *additional)
{
    js_ctx *c = &o->c;
    js_map kv = { 0 };
    js_str *req = js_alloc(c, (np + 1) * sizeof *req), *opt = js_alloc(c, (np + 1) * sizeof *opt), *names = js_alloc(c, (np + 1) * sizeof *names);
    size_t nreq = 0, nopt = 0;
    for (size_t i = 0; i < np; i++) {
        js_str sub = ol_join_name(o, name, props[i].name);
        js_str prop_rule = ol_visit(o, props[i].schema, sub);
        js_sb key = js_sb_new(c);
        json_value kj = { JSON_STRING, (char *)props[i].name.p, props[i].name.n, 0, NULL, NULL, NULL };
        js_dump(&key, &kj);
        js_str body = js_cat3(c, js_literal(c, js_done(&key)), JS_S(" space \":\" space "), prop_rule);
        js_str *slot = js_alloc(c, sizeof *slot);
        *slot = js_add_rule(c, js_cats(c, sub, "-kv"), body);
        *js_map_find(c, &kv, props[i].name, 1) = slot;
        if (js_map_find(c, required, props[i].name, 0)) req[nreq++] = props[i].name;
        else opt[nopt++] = props[i].name;
        names[i] = props[i].name;
    }
    if (additional && (additional->type == JSON_TRUE || additional->type == JSON_OBJECT)) {
        js_str sub = ol_join_name(o, name, JS_S("additional"));
        js_str value_rule = additional->type == JSON_OBJECT ? ol_visit(o, additional, js_cats(c, sub, "-value")) : ol_prim(o, "value");
        js_str key_rule = np == 0 ? ol_prim(o, "string") : js_add_rule(c, js_cats(c, sub, "-k"), ol_not_strings(o, names, np));
        js_str *slot = js_alloc(c, sizeof *slot);
        *slot = js_add_rule(c, js_cats(c, sub, "-kv"), js_cat3(c, key_rule, JS_S(" \":\" space "), value_rule));
        *js_map_find(c, &kv, JS_S("*"), 1) = slot;
        opt[nopt++] = JS_S("*");
    }
    js_sb r = js_sb_new(c);
    js_puts(&r, "\"{\" space ");
    for (size_t i = 0; i < nreq; i++) {
        if (i) js_puts(&r, " \",\" space ");
        js_putstr(&r, *(js_str *)*js_map_find(c, &kv, req[i], 0));
    }
    if (nopt) {
        js_puts(&r, " (");
        if (nreq) js_puts(&r, " \",\" space ( ");
        for (size_t i = 0; i < nopt; i++) {
            if (i) js_puts(&r, " | ");
            js_putstr(&r, ol_rest(o, opt + i, nopt - i, &kv, name));
        }
        if (nreq) js_puts(&r, " )");
        js_puts(&r, " )?");
    }
    js_puts(&r, " \"}\" space");
    return js_done(&r);
}

static void ol_set_add(ol_ctx *o, js_map *set, js_str k) { *js_map_find(&o->c, set, k, 1) = (void *)1; }

static void ol_props_add(ol_ctx *o, ol_pp **pp, size_t *np, size_t *cap, const json_value *props, js_map *req)
{
    size_t n = ol_size(props);
    for (size_t k = 0; k < n; k++) {
        *pp = js_grow(&o->c, *pp, *np, cap, sizeof **pp);
        (*pp)[*np] = (ol_pp){ ol_key(o, props, k), ol_elem(props, k) };
        if (req) ol_set_add(o, req, (*pp)[*np].name);
        (*np)++;
    }
}

typedef struct {
    ol_pp *props;
    size_t np, cap;
    js_map required;
    js_str *enums;                      /* enum_values: a std::map<std::string, size_t> */
    size_t *counts, ne, cap_e, cap_c;
} ol_allof;

static void ol_allof_add(ol_ctx *o, ol_allof *a, const json_value *comp, int is_required)
{
    js_ctx *c = &o->c;
    js_enter(c);
    const json_value *v;
    if ((v = js_get(comp, "$ref"))) {
        const json_value *t = ol_ref_get(o, ol_string(o, v));
        if (!t) ol_ref_put(o, ol_string(o, v), t = &ol_null);      /* _refs[...] inserts a null */
        ol_allof_add(o, a, t, is_required);
    } else if ((v = js_get(comp, "properties"))) {
        ol_props_add(o, &a->props, &a->np, &a->cap, v, is_required ? &a->required : NULL);
    } else if ((v = js_get(comp, "enum"))) {
        for (size_t k = 0; k < ol_size(v); k++) {
            js_str rule = ol_const_rule(o, ol_elem(v, k));
            size_t lo = 0;
            while (lo < a->ne && js_cmp(a->enums[lo], rule) < 0) lo++;
            if (lo == a->ne || !js_eq(a->enums[lo], rule)) {
                a->enums = js_grow(c, a->enums, a->ne, &a->cap_e, sizeof *a->enums);
                a->counts = js_grow(c, a->counts, a->ne, &a->cap_c, sizeof *a->counts);
                memmove(&a->enums[lo + 1], &a->enums[lo], (a->ne - lo) * sizeof *a->enums);
                memmove(&a->counts[lo + 1], &a->counts[lo], (a->ne - lo) * sizeof *a->counts);
                a->enums[lo] = rule;
                a->counts[lo] = 0;
                a->ne++;
            }
            a->counts[lo]++;
        }
    }
    c->depth--;
}

static js_str ol_visit_all_of(ol_ctx *o, const json_value *s, js_str name, js_str rule_name)
{
    js_ctx *c = &o->c;
    ol_allof *a = js_alloc(c, sizeof *a);
    const json_value *all = js_get(s, "allOf");
    for (size_t k = 0; k < ol_size(all); k++) {
        const json_value *t = ol_elem(all, k), *any = js_get(t, "anyOf");
        if (any) for (size_t j = 0; j < ol_size(any); j++) ol_allof_add(o, a, ol_elem(any, j), 0);
        else ol_allof_add(o, a, t, 1);
    }
    if (a->ne) {
        js_sb b = js_sb_new(c);
        size_t m = 0;
        for (size_t k = 0; k < a->ne; k++)
            if (a->counts[k] == ol_size(all)) {
                if (m++) js_puts(&b, " | ");
                js_putstr(&b, a->enums[k]);
            }
        if (m) return js_add_rule(c, rule_name, js_cat3(c, JS_S("("), js_done(&b), JS_S(") space")));
    }
    return js_add_rule(c, rule_name, ol_object_rule(o, a->props, a->np, &a->required, name, NULL));
}

static js_str ol_union(ol_ctx *o, js_str name, const json_value *const *alts, size_t n)
{
    js_ctx *c = &o->c;
    js_sb b = js_sb_new(c);
    for (size_t i = 0; i < n; i++) {
        if (i) js_puts(&b, " | ");
        js_str sub = js_cat(c, name.n ? js_cats(c, name, "-") : JS_S("alternative-"), js_itoa(c, (long long)i));
        js_putstr(&b, ol_visit(o, alts[i], sub));
    }
    return js_done(&b);
}

/* the schema with "type" replaced by t, in its place (json schema_copy(schema); schema_copy["type"] = t) */
static const json_value *ol_with_type(ol_ctx *o, const json_value *s, const json_value *t)
{
    json_value *d = js_alloc(&o->c, sizeof *d);
    *d = *s;
    d->items = js_alloc(&o->c, s->n * sizeof *d->items);
    for (size_t i = 0; i < s->n; i++)
        d->items[i] = s->key_lens[i] == 4 && !memcmp(s->keys[i], "type", 4) ? (json_value *)t : s->items[i];
    return d;
}

static int ol_is_uuid(js_str f)
{
    return js_eqs(f, "uuid") || (f.n == 5 && !memcmp(f.p, "uuid", 4) && f.p[4] >= '1' && f.p[4] <= '5');
}

/* the string and integer branches and the primitive fallback of visit */
static js_str ol_visit_scalar(ol_ctx *o, const json_value *s, const json_value *type, js_str rule_name)
{
    js_ctx *c = &o->c;
    int untyped = ol_is_null(type);
    if (ol_is_str(type, "string") && (js_get(s, "minLength") || js_get(s, "maxLength"))) {
        js_str chr = ol_prim(o, "char");
        int mn = js_get(s, "minLength") ? ol_get_int(o, js_get(s, "minLength")) : 0;
        int mx = js_get(s, "maxLength") ? ol_get_int(o, js_get(s, "maxLength")) : INT_MAX;
        return js_add_rule(c, rule_name, js_cat3(c, JS_S("\"\\\"\" "), js_repeat(c, chr, mn, mx, JS_S("")), JS_S(" \"\\\"\" space")));
    }
    if (ol_is_str(type, "integer") && (js_get(s, "minimum") || js_get(s, "exclusiveMinimum") || js_get(s, "maximum") ||
                                       js_get(s, "exclusiveMaximum"))) {
        int64_t mn = INT64_MIN, mx = INT64_MAX;
        if (js_get(s, "minimum")) mn = ol_get_i64(o, js_get(s, "minimum"));
        else if (js_get(s, "exclusiveMinimum")) mn = (int64_t)((uint64_t)ol_get_i64(o, js_get(s, "exclusiveMinimum")) + 1);
        if (js_get(s, "maximum")) mx = ol_get_i64(o, js_get(s, "maximum"));
        else if (js_get(s, "exclusiveMaximum")) mx = (int64_t)((uint64_t)ol_get_i64(o, js_get(s, "exclusiveMaximum")) - 1);
        js_sb b = js_sb_new(c);
        js_putc(&b, '(');
        js_min_max_int(&b, mn, mx, 16, 1);
        js_puts(&b, ") space");
        return js_add_rule(c, rule_name, js_done(&b));
    }
    if (ol_empty(s) || ol_is_str(type, "object")) return js_add_rule(c, rule_name, ol_prim(o, "object"));
    const js_builtin *b = type && type->type == JSON_STRING ? ol_builtin((js_str){ type->str, type->len }, 0, OL_NPRIM) : NULL;
    (void)untyped;
    if (!b) {
        js_sb d = js_sb_new(c);
        js_dump(&d, s);
        js_error(c, js_cat(c, JS_S("Unrecognized schema: "), js_done(&d)));
        return JS_S("");
    }
    return ol_add_primitive(o, js_eqs(rule_name, "root") ? JS_S("root") : (js_str){ type->str, type->len }, b);
}

static js_str ol_visit2(ol_ctx *o, const json_value *s, js_str name)
{
    js_ctx *c = &o->c;
    const json_value *type = js_get(s, "type"), *v, *w;
    js_str format = JS_S("");
    if ((v = js_get(s, "format"))) format = ol_string(o, v);
    js_str rule_name = js_reserved(name) ? js_cats(c, name, "-") : name.n ? name : JS_S("root");
    int untyped = ol_is_null(type);

    if ((v = js_get(s, "$ref"))) return js_add_rule(c, rule_name, ol_resolve(o, ol_string(o, v)));
    if ((v = js_get(s, "oneOf")) || (v = js_get(s, "anyOf"))) {
        if (v->type != JSON_ARRAY) ol_fail(o, "type must be array");
        return js_add_rule(c, rule_name, ol_union(o, name, (const json_value *const *)v->items, v->n));
    }
    if (type && type->type == JSON_ARRAY) {
        const json_value **alts = js_alloc(c, (type->n + 1) * sizeof *alts);
        for (size_t i = 0; i < type->n; i++) alts[i] = ol_with_type(o, s, type->items[i]);
        return js_add_rule(c, rule_name, ol_union(o, name, alts, type->n));
    }
    if ((v = js_get(s, "const"))) return js_add_rule(c, rule_name, js_cats(c, ol_const_rule(o, v), " space"));
    if ((v = js_get(s, "enum"))) {
        js_sb b = js_sb_new(c);
        js_putc(&b, '(');
        for (size_t k = 0; k < ol_size(v); k++) {
            if (k) js_puts(&b, " | ");
            js_putstr(&b, ol_const_rule(o, ol_elem(v, k)));
        }
        js_puts(&b, ") space");
        return js_add_rule(c, rule_name, js_done(&b));
    }
    w = js_get(s, "additionalProperties");
    if ((untyped || ol_is_str(type, "object")) && (js_get(s, "properties") || (w && w->type != JSON_TRUE))) {
        js_map required = { 0 };
        if ((v = js_get(s, "required")) && v->type == JSON_ARRAY)
            for (size_t k = 0; k < v->n; k++)
                if (v->items[k]->type == JSON_STRING) ol_set_add(o, &required, (js_str){ v->items[k]->str, v->items[k]->len });
        ol_pp *pp = NULL;
        size_t np = 0, cap = 0;
        if ((v = js_get(s, "properties"))) ol_props_add(o, &pp, &np, &cap, v, NULL);
        return js_add_rule(c, rule_name, ol_object_rule(o, pp, np, &required, name, w));
    }
    if ((untyped || ol_is_str(type, "object") || ol_is_str(type, "string")) && js_get(s, "allOf"))
        return ol_visit_all_of(o, s, name, rule_name);
    if ((untyped || ol_is_str(type, "array")) && ((v = js_get(s, "items")) || (v = js_get(s, "prefixItems")))) {
        js_sb b = js_sb_new(c);
        js_puts(&b, "\"[\" space ");
        if (v->type == JSON_ARRAY) {
            for (size_t i = 0; i < v->n; i++) {
                if (i) js_puts(&b, " \",\" space ");
                js_putstr(&b, ol_visit(o, v->items[i], ol_join_name(o, name, js_cat(c, JS_S("tuple-"), js_itoa(c, (long long)i)))));
            }
        } else {
            js_str item = ol_visit(o, v, ol_join_name(o, name, JS_S("item")));
            int mn = js_get(s, "minItems") ? ol_get_int(o, js_get(s, "minItems")) : 0;
            const json_value *mj = js_get(s, "maxItems");
            int mx = js_is_int(mj) ? ol_get_int(o, mj) : INT_MAX;
            js_putstr(&b, js_repeat(c, item, mn, mx, JS_S("\",\" space")));
        }
        js_puts(&b, " \"]\" space");
        return js_add_rule(c, rule_name, js_done(&b));
    }
    int stringy = untyped || ol_is_str(type, "string");
    if (stringy && (v = js_get(s, "pattern"))) return ol_visit_pattern(o, ol_string(o, v), rule_name);
    if (stringy && ol_is_uuid(format))
        return ol_add_primitive(o, js_eqs(rule_name, "root") ? JS_S("root") : format, ol_builtin(JS_S("uuid"), 0, OL_NPRIM));
    const js_builtin *fb = stringy && format.n ? ol_builtin(js_cats(c, format, "-string"), OL_NPRIM, OL_NBUILTIN) : NULL;
    if (fb) return js_add_rule(c, rule_name, ol_add_primitive(o, (js_str){ fb->name, strlen(fb->name) }, fb));
    return ol_visit_scalar(o, s, type, rule_name);
}

static js_str ol_visit(ol_ctx *o, const json_value *s, js_str name)
{
    js_enter(&o->c);
    js_str r = ol_visit2(o, s, name);
    o->c.depth--;
    return r;
}

/* ---- format_grammar: libstdc++'s unordered_map<std::string, std::string> iteration order ---- */

/* std::hash<std::string>: libstdc++'s _Hash_bytes (64-bit), seed 0xc70f6907 */
static uint64_t ol_hash(js_str k)
{
    const uint64_t mul = 0xc6a4a7935bd1e995ull;
    uint64_t h = 0xc70f6907ull ^ ((uint64_t)k.n * mul);
    size_t whole = k.n & ~(size_t)7, i;
    for (i = 0; i < whole; i += 8) {
        uint64_t d;
        memcpy(&d, k.p + i, 8);
        d *= mul;
        d = (d ^ (d >> 47)) * mul;
        h = (h ^ d) * mul;
    }
    if (k.n & 7) {
        uint64_t d = 0;
        for (size_t j = k.n & 7; j-- > 0;) d = (d << 8) + (unsigned char)k.p[whole + j];
        h = (h ^ d) * mul;
    }
    h = (h ^ (h >> 47)) * mul;
    return h ^ (h >> 47);
}

/* the bucket counts an unordered_map grows through as elements are inserted (libstdc++'s
 * _Prime_rehash_policy, max_load_factor 1: measured); it rehashes when a new size passes the count */
static const size_t ol_buckets[] = { 1, 13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273, 20753, 42043, 85229,
                                     172933, 351061, 712697, 1447153, 2938679, 5967347 };

#define OL_BB ((size_t)-2)              /* _M_before_begin */
#define OL_NIL ((size_t)-1)

typedef struct { size_t *next, *bucket, head, nb; uint64_t *hash; } ol_table;

static size_t *ol_next_of(ol_table *t, size_t at) { return at == OL_BB ? &t->head : &t->next[at]; }

static void ol_rehash(ol_ctx *o, ol_table *t, size_t nb)
{
    size_t *nbk = js_alloc(&o->c, nb * sizeof *nbk), p = t->head, bbegin = 0;
    for (size_t b = 0; b < nb; b++) nbk[b] = OL_NIL;
    t->head = OL_NIL;
    while (p != OL_NIL) {
        size_t nx = t->next[p], b = (size_t)(t->hash[p] % nb);
        if (nbk[b] == OL_NIL) {
            t->next[p] = t->head;
            t->head = p;
            nbk[b] = OL_BB;
            if (t->next[p] != OL_NIL) nbk[bbegin] = p;
            bbegin = b;
        } else {
            t->next[p] = *ol_next_of(t, nbk[b]);
            *ol_next_of(t, nbk[b]) = p;
        }
        p = nx;
    }
    t->bucket = nbk;
    t->nb = nb;
}

/* the rules, in insertion order, written in the order the map iterates them */
static void ol_write_rules(ol_ctx *o, js_sb *out)
{
    js_ctx *c = &o->c;
    size_t n = c->nrules, level = 0;
    if (n > ol_buckets[sizeof ol_buckets / sizeof ol_buckets[0] - 1]) ol_refuse(o, "too many rules");
    ol_table t = { js_alloc(c, (n + 1) * sizeof(size_t)), js_alloc(c, sizeof(size_t)), OL_NIL, 1,
                   js_alloc(c, (n + 1) * sizeof(uint64_t)) };
    t.bucket[0] = OL_NIL;
    for (size_t i = 0; i < n; i++) {
        t.hash[i] = ol_hash(c->rules[i].name);
        if (i + 1 > ol_buckets[level]) ol_rehash(o, &t, ol_buckets[++level]);
        size_t b = (size_t)(t.hash[i] % t.nb);
        if (t.bucket[b] != OL_NIL) {
            t.next[i] = *ol_next_of(&t, t.bucket[b]);
            *ol_next_of(&t, t.bucket[b]) = i;
        } else {
            t.next[i] = t.head;
            t.head = i;
            if (t.next[i] != OL_NIL) t.bucket[t.hash[t.next[i]] % t.nb] = i;
            t.bucket[b] = OL_BB;
        }
    }
    for (size_t p = t.head; p != OL_NIL; p = t.next[p]) {
        js_putstr(out, c->rules[p].name);
        js_puts(out, " ::= ");
        js_putstr(out, c->rules[p].body);
        js_putc(out, '\n');
    }
}

/* json_schema_to_grammar of 17f7f4ba: resolve_refs, visit, check_errors, format_grammar */
static int ol_convert(ol_ctx *o, const json_value *schema, js_str *text)
{
    js_ctx *c = &o->c;
    o->root = schema;
    js_rule_put(c, JS_S("space"), JS_S("| \" \" | \"\\n\"{1,2} [ \\t]{0,20}"));
    ol_resolve_refs(o, schema);
    ol_visit(o, schema, JS_S(""));
    if (c->nerrors) ol_fail(o, "JSON schema conversion failed");
    js_sb out = js_sb_new(c);
    ol_write_rules(o, &out);
    *text = js_done(&out);
    return JSON_SCHEMA_OK;
}

/* ------------------------------------------------------------------ */
/* Ollama v0.13.3's "format" (llm/server.go, llmServer.Completion)       */

/* llm/server.go's grammarJSON, the grammar "format": "json" hands the runner, byte for byte */
static const char js_ollama_json_grammar[] =
    "\nroot   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::=\n"
    "  \"{\" ws (\n"
    "         string \":\" ws value\n"
    "    (\",\" ws string \":\" ws value)*\n"
    "  )? ws \"}\" \n"
    "array  ::=\n"
    "  \"[\" ws (\n"
    "            value\n"
    "    (\",\" ws value)*\n"
    "  )? ws \"]\" \n"
    "string ::=\n"
    "  \"\\\"\" (\n"
    "    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
    "    \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F]) # escapes\n"
    "  )* \"\\\"\" \n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]*)) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)? \n"
    "# Optional space: by convention, applied in this grammar after literal chars when allowed\n"
    "ws ::= ([ \\t\\n] ws)?\n";

/* Go's compact encoding of a value (what a RawMessage holds when the client wrote no spaces) */
static void js_go_compact(js_sb *b, const json_value *v)
{
    if (v->type == JSON_STRING) {
        jbuf j;
        jbuf_init(&j);
        json_put_str_go(&j, v->str, v->len);
        if (j.oom) { jbuf_free(&j); js_oom(b->c); }
        js_put(b, j.p, j.len);
        jbuf_free(&j);
    } else if (v->type == JSON_ARRAY || v->type == JSON_OBJECT) {
        js_putc(b, v->type == JSON_ARRAY ? '[' : '{');
        for (size_t i = 0; i < v->n; i++) {
            if (i) js_putc(b, ',');
            if (v->type == JSON_OBJECT) {
                json_value k = { JSON_STRING, v->keys[i], v->key_lens[i], 0, NULL, NULL, NULL };
                js_go_compact(b, &k);
                js_putc(b, ':');
            }
            js_go_compact(b, v->items[i]);
        }
        js_putc(b, v->type == JSON_ARRAY ? ']' : '}');
    } else if (v->type == JSON_NUMBER) {
        js_put(b, v->str, v->len);
    } else {
        js_puts(b, v->type == JSON_NULL ? "null" : v->type == JSON_TRUE ? "true" : "false");
    }
}

/* Go's %q of a byte slice (strconv.Quote): \a \b \f \n \r \t \v \\ \" as such, other ASCII controls and
 * DEL as \x.., printable ASCII and UTF-8 characters raw, an invalid byte as \x.. */
static void js_go_quote(js_sb *b, js_str s)
{
    static const char hex[] = "0123456789abcdef";
    js_putc(b, '"');
    for (size_t i = 0; i < s.n;) {
        unsigned char ch = (unsigned char)s.p[i];
        uint32_t cp;
        size_t len = ch >= 0x80 ? js_utf8((const unsigned char *)s.p + i, s.n - i, &cp) : 1;
        const char *e = NULL;
        switch (ch) {
        case '\a': e = "\\a"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        case '\v': e = "\\v"; break;
        case '\\': e = "\\\\"; break;
        case '"': e = "\\\""; break;
        }
        if (e) { js_puts(b, e); i++; continue; }
        if (ch < 0x20 || ch == 0x7F || len == 0) {
            char x[4] = { '\\', 'x', hex[ch >> 4], hex[ch & 15] };
            js_put(b, x, 4);
            i++;
            continue;
        }
        js_put(b, s.p + i, len);
        i += len;
    }
    js_putc(b, '"');
}

static int js_run_ollama(js_ctx *c, const json_value *format, const char *raw, size_t raw_len, js_str *text)
{
    if (setjmp(c->top)) {
        *text = c->msg;
        if (c->code == JSON_SCHEMA_REFUSED) *text = JS_S("invalid JSON schema in format");
        return c->code;
    }
    js_sb r = js_sb_new(c);
    if (raw) js_put(&r, raw, raw_len);
    else js_go_compact(&r, format);
    js_str rs = js_done(&r);
    if (rs.n == 0 || js_eqs(rs, "null") || js_eqs(rs, "\"\"")) { *text = (js_str){ NULL, 0 }; return JSON_SCHEMA_OK; }
    if (js_eqs(rs, "\"json\"")) { *text = JS_S(js_ollama_json_grammar); return JSON_SCHEMA_OK; }
    if (rs.p[0] != '{') {
        js_sb m = js_sb_new(c);
        js_puts(&m, "invalid format: ");
        js_go_quote(&m, rs);
        js_puts(&m, "; expected \"json\" or a valid JSON Schema object");
        *text = js_done(&m);
        return JSON_SCHEMA_REFUSED;
    }
    /* llama.SchemaToGrammar: the grammar into a buffer of max(32768, min(1 MiB, 4 x the bytes)), cut to fit */
    size_t cap = rs.n > (1u << 20) / 4 ? 1u << 20 : rs.n * 4;
    if (cap < 32768) cap = 32768;
    ol_ctx *o = (ol_ctx *)c;
    if (!format) {                      /* only the bytes: nlohmann parses them, a failure is the schema's */
        char perr[160];
        o->parsed = json_parse(rs.p, rs.n, perr, sizeof perr);
        if (!o->parsed) { *text = JS_S("invalid JSON schema in format"); return JSON_SCHEMA_REFUSED; }
    }
    int code = ol_convert(o, format ? format : o->parsed, text);
    if (code == JSON_SCHEMA_OK && text->n >= cap) {
        *text = JS_S("format with a JSON schema: its grammar is longer than the buffer Ollama v0.13.3 copies it into "
                     "(llama.SchemaToGrammar: max(32768, min(1 MiB, 4 x the schema's bytes))), which cuts it; "
                     "bankML does not answer with a cut grammar");
        return JSON_SCHEMA_LIMIT;
    }
    return code;
}

int ollama_format_to_gbnf(const json_value *format, const char *raw, size_t raw_len, char **out, size_t *out_len)
{
    js_str text = { NULL, 0 };
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!format && !raw) return JSON_SCHEMA_OK;
    ol_ctx *o = calloc(1, sizeof *o);
    if (!o) return JSON_SCHEMA_LIMIT;
    js_ctx *c = &o->c;
    int code = js_run_ollama(c, format, raw, raw_len, &text);
    if (text.p) {
        char *d = malloc(text.n + 1);
        if (d) {
            memcpy(d, text.p, text.n);
            d[text.n] = 0;
            *out = d;
            if (out_len) *out_len = text.n;
        } else {
            code = JSON_SCHEMA_LIMIT;
        }
    }
    js_free_arena(c);
    if (o->parsed) json_free(o->parsed);
    free(o);
    return code;
}

