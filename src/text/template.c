/*
 * template.c -- a Jinja-subset interpreter for chat templates.
 *
 * It reproduces llama.cpp's own Jinja engine (common/jinja at b11669), not
 * Python's Jinja2: where the two differ (output of none/objects, `none|default`,
 * dynamic scoping of macros, the lexer's lstrip quirks, ...), this file does
 * what llama.cpp does, because the oracle is llama-server's /apply-template.
 *
 * Layout, top to bottom:
 *   runtime     -- one render's state: an arena, limits, the error exit
 *   values      -- none/bool/int/float/string/array/tuple/object/func/kwarg
 *   lexer       -- source text to tokens, with llama.cpp's whitespace control
 *   parser      -- tokens to an AST
 *   evaluator   -- expressions, statements, scopes, macros, loops
 *   builtins    -- filters, tests, methods, global functions
 *   chat layer  -- llama-server's message preparation and caps probing
 *
 * Memory: every allocation of a render goes to an arena freed at the end, so
 * errors can leave through longjmp without leaking, and a budget on the
 * arena bounds what a hostile template can take.
 */
#include "text/template.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------- limits */

#define TPL_MAX_NEST      256          /* parser nesting (statements + expressions) */
#define TPL_MAX_CALLS     128          /* macro / caller recursion */
#define TPL_MAX_STEPS     20000000ull  /* statements + loop iterations + calls */
#define TPL_MAX_MEM       (256u << 20) /* arena budget in bytes */
#define TPL_MAX_OUT       (64u << 20)  /* one string's length */

/* --------------------------------------------------------------- runtime */

typedef struct ablk { struct ablk *next; } ablk;

typedef struct env env;
typedef struct val val;

typedef struct {
    ablk *blocks;          /* every allocation, freed together */
    size_t mem;            /* bytes allocated so far */
    jmp_buf *on_error;     /* where fail() goes */
    char *err;
    size_t errlen;
    jmp_buf *on_signal;    /* innermost for loop, for break/continue */
    int signal;            /* 1 break, 2 continue */
    unsigned long long steps;
    int calls;             /* current macro nesting */
    int nest;              /* parser nesting */
    int stats;             /* record value usage (caps probing) */
    time_t now;
    const char *src;       /* template source, for error positions */
    size_t srclen;
} rt;

static void fail(rt *R, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* Formats the reason into the caller's buffer and leaves the render. */
static void fail(rt *R, const char *fmt, ...) {
    if (R->err && R->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(R->err, R->errlen, fmt, ap);
        va_end(ap);
    }
    longjmp(*R->on_error, 1);
}

/* Arena allocation: a header links the block so free_all() finds it. */
static void *ralloc(rt *R, size_t n) {
    if (n > TPL_MAX_MEM || R->mem + n > TPL_MAX_MEM)
        fail(R, "template needs more than %u MB of memory", TPL_MAX_MEM >> 20);
    ablk *b = malloc(sizeof(ablk) + n + 1);
    if (!b) fail(R, "out of memory");
    b->next = R->blocks;
    R->blocks = b;
    R->mem += n + sizeof(ablk);
    return (char *)(b + 1);
}

static void *rzalloc(rt *R, size_t n) {
    void *p = ralloc(R, n);
    memset(p, 0, n);
    return p;
}

static size_t mul_sz(rt *R, size_t a, size_t b) {
    if (b && a > SIZE_MAX / b) fail(R, "size overflow");
    return a * b;
}

static char *rstrdup(rt *R, const char *s, size_t n) {
    char *p = ralloc(R, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

static void free_all(rt *R) {
    ablk *b = R->blocks;
    while (b) {
        ablk *nx = b->next;
        free(b);
        b = nx;
    }
    R->blocks = NULL;
    R->mem = 0;
}

static void step(rt *R) {
    if (++R->steps > TPL_MAX_STEPS)
        fail(R, "template runs too long (more than %llu steps)", TPL_MAX_STEPS);
}

/* A growable string in the arena. `parts` counts non-empty appended pieces;
 * llama.cpp keeps strings as lists of parts and applies capitalize/title per
 * part, so we need to know whether a string has more than one. */
typedef struct {
    char *p;
    size_t n, cap;
    int parts;
} sbuf;

static void sb_put(rt *R, sbuf *b, const char *s, size_t n) {
    if (!n) return;
    if (b->n + n > TPL_MAX_OUT) fail(R, "template output exceeds %u MB", TPL_MAX_OUT >> 20);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = ralloc(R, cap);
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_puts(rt *R, sbuf *b, const char *s) { sb_put(R, b, s, strlen(s)); }
static void sb_putc(rt *R, sbuf *b, char c) { sb_put(R, b, &c, 1); }

static void sb_printf(rt *R, sbuf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void sb_printf(rt *R, sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    sb_put(R, b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* ---------------------------------------------------------------- values */

enum {
    VT_UNDEF, VT_NONE, VT_BOOL, VT_INT, VT_FLOAT, VT_STR, VT_ARRAY, VT_TUPLE,
    VT_OBJECT, VT_FUNC, VT_KWARG
};

/* usage marks read by the caps probe (llama.cpp's value stats) */
enum { OP_TEST_IS_STRING = 1, OP_SELECTATTR = 2, OP_ARRAY_ACCESS = 4 };

typedef struct node node;
typedef struct args args;
typedef val *(*bfn)(rt *R, args *A);

enum { FN_BUILTIN, FN_MACRO, FN_CALLER };

struct val {
    unsigned char t;
    unsigned char used;         /* stats: value was read */
    unsigned char ops;          /* stats: OP_* */
    unsigned char multipart;    /* string made of 2+ parts (see sbuf) */
    unsigned char no_builtins;  /* object: context/loop objects have none */
    union {
        int b;
        int64_t i;
        double f;
        struct { char *p; size_t n; } s;
        struct { val **v; size_t n, cap; } a;           /* array, tuple */
        struct { val **k; val **v; size_t n, cap; } o;  /* object, in insertion order */
        struct { int kind; const char *name; bfn fn; val *self; const node *def; env *cap; } fn;
        struct { const char *key; val *v; } kw;
        const char *hint;                               /* undefined: where it came from */
    } u;
};

struct env {              /* a scope: ordered name -> value (llama.cpp's context) */
    const char **names;
    val **vals;
    size_t n, cap;
};

struct args {
    val **v;
    size_t n, cap;
    env *ctx;             /* the calling scope (macros run in a copy of it) */
    const char *fname;
};

static val *mk(rt *R, int t) {
    val *v = rzalloc(R, sizeof *v);
    v->t = (unsigned char)t;
    return v;
}
static val *mk_undef(rt *R, const char *hint) { val *v = mk(R, VT_UNDEF); v->u.hint = hint; return v; }
static val *mk_none(rt *R) { return mk(R, VT_NONE); }
static val *mk_bool(rt *R, int b) { val *v = mk(R, VT_BOOL); v->u.b = b != 0; return v; }
static val *mk_int(rt *R, int64_t i) { val *v = mk(R, VT_INT); v->u.i = i; return v; }
static val *mk_float(rt *R, double f) { val *v = mk(R, VT_FLOAT); v->u.f = f; return v; }
static val *mk_strn(rt *R, const char *s, size_t n) {
    if (n > TPL_MAX_OUT) fail(R, "string exceeds %u MB", TPL_MAX_OUT >> 20);
    val *v = mk(R, VT_STR);
    v->u.s.p = rstrdup(R, s, n);
    v->u.s.n = n;
    return v;
}
static val *mk_str(rt *R, const char *s) { return mk_strn(R, s, strlen(s)); }
static val *mk_sb(rt *R, const sbuf *b) {    /* takes the buffer's bytes */
    val *v = mk(R, VT_STR);
    v->u.s.p = b->p ? b->p : rstrdup(R, "", 0);
    v->u.s.n = b->n;
    v->multipart = b->parts > 1;
    return v;
}
static val *mk_arr(rt *R, int t) { return mk(R, t); }
static val *mk_obj(rt *R) { return mk(R, VT_OBJECT); }

static int is_arr(const val *v) { return v->t == VT_ARRAY || v->t == VT_TUPLE; }
static int is_num(const val *v) { return v->t == VT_INT || v->t == VT_FLOAT; }
/* llama.cpp's is_numeric() also counts booleans */
static int is_numeric_b(const val *v) { return v->t == VT_INT || v->t == VT_FLOAT || v->t == VT_BOOL; }

static const char *type_name(const val *v) {
    switch (v->t) {
    case VT_UNDEF: return "Undefined";
    case VT_NONE: return "None";
    case VT_BOOL: return "Boolean";
    case VT_INT: return "Integer";
    case VT_FLOAT: return "Float";
    case VT_STR: return "String";
    case VT_ARRAY: return "Array";
    case VT_TUPLE: return "Tuple";
    case VT_OBJECT: return "Object";
    case VT_FUNC: return "Function";
    default: return "KwArg";
    }
}

static void arr_push(rt *R, val *a, val *x) {
    if (a->u.a.n == a->u.a.cap) {
        size_t cap = a->u.a.cap ? a->u.a.cap * 2 : 4;
        val **nv = ralloc(R, mul_sz(R, cap, sizeof *nv));
        if (a->u.a.n) memcpy(nv, a->u.a.v, a->u.a.n * sizeof *nv);
        a->u.a.v = nv;
        a->u.a.cap = cap;
    }
    a->u.a.v[a->u.a.n++] = x;
}

/* integer as llama.cpp's value_int keeps its float twin: a value a double
 * cannot hold exactly becomes +-inf there, and comparisons see that */
static double int_as_float(int64_t i) {
    double d = (double)i;
    if (d >= 9223372036854775808.0 || d < -9223372036854775808.0 || (int64_t)d != i)
        return i < 0 ? -INFINITY : INFINITY;
    return d;
}
static int64_t float_as_int(double f) {
    if (!isfinite(f)) return 0;
    if (f >= 9223372036854775807.0) return INT64_MAX;
    if (f <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)f;
}
/* val_int / val_flt views as llama.cpp's value_t fields */
static int64_t v_int(const val *v) {
    if (v->t == VT_INT) return v->u.i;
    if (v->t == VT_FLOAT) return float_as_int(v->u.f);
    if (v->t == VT_BOOL) return v->u.b;
    return 0;
}
static double v_flt(const val *v) {
    if (v->t == VT_INT) return int_as_float(v->u.i);
    if (v->t == VT_FLOAT) return v->u.f;
    if (v->t == VT_BOOL) return v->u.b;
    return 0;
}

static int64_t as_int(rt *R, const val *v) {
    if (v->t == VT_INT || v->t == VT_FLOAT || v->t == VT_BOOL) return v_int(v);
    fail(R, "%s is not an int value", type_name(v));
}
static double as_float(rt *R, const val *v) {
    if (v->t == VT_INT || v->t == VT_FLOAT) return v_flt(v);
    fail(R, "%s is not a float value", type_name(v));
}

static int as_bool(rt *R, const val *v) {
    switch (v->t) {
    case VT_UNDEF: case VT_NONE: return 0;
    case VT_BOOL: return v->u.b;
    case VT_INT: return v->u.i != 0;
    case VT_FLOAT: return v->u.f != 0.0;
    case VT_STR: return v->u.s.n > 0;
    case VT_ARRAY: case VT_TUPLE: return v->u.a.n > 0;
    case VT_OBJECT: return v->u.o.n > 0;
    default: fail(R, "%s is not a bool value", type_name(v));
    }
}

/* std::to_string(double) with trailing zeros cut, one kept after the point */
static void put_float_str(rt *R, sbuf *b, double f) {
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%f", f);
    size_t n = strlen(tmp);
    while (n > 0 && tmp[n - 1] == '0') n--;
    if (n > 0 && tmp[n - 1] == '.') tmp[n++] = '0';
    sb_put(R, b, tmp, n);
}

static void put_json(rt *R, sbuf *b, const val *v, int lvl, int indent, const char *isep,
                     const char *ksep);
static void put_string(rt *R, sbuf *b, const val *v);

/* value_to_string_repr: strings quoted, everything else as its repr */
static void put_repr(rt *R, sbuf *b, const val *v) {
    if (v->t == VT_STR) {
        if (memchr(v->u.s.p, '\'', v->u.s.n)) {
            put_json(R, b, v, 0, -1, ", ", ": ");
        } else {
            sb_putc(R, b, '\'');
            sb_put(R, b, v->u.s.p, v->u.s.n);
            sb_putc(R, b, '\'');
        }
    } else if (v->t == VT_UNDEF) {
        if (v->u.hint) sb_printf(R, b, "Undefined (hint: '%s')", v->u.hint);
        else sb_puts(R, b, "Undefined");
    } else if (v->t == VT_FUNC) {
        sb_printf(R, b, "Function<%s>(", v->u.fn.name);
        if (v->u.fn.self) put_repr(R, b, v->u.fn.self);
        sb_putc(R, b, ')');
    } else if (v->t == VT_KWARG) {
        sb_puts(R, b, "KwArg");
    } else {
        put_string(R, b, v);
    }
}

/* as_string(): how a value reads when concatenated or coerced */
static void put_string(rt *R, sbuf *b, const val *v) {
    switch (v->t) {
    case VT_NONE: sb_puts(R, b, "None"); break;
    case VT_BOOL: sb_puts(R, b, v->u.b ? "True" : "False"); break;
    case VT_INT: sb_printf(R, b, "%lld", (long long)v->u.i); break;
    case VT_FLOAT: put_float_str(R, b, v->u.f); break;
    case VT_STR: sb_put(R, b, v->u.s.p, v->u.s.n); break;
    case VT_ARRAY: case VT_TUPLE: {
        int tup = v->t == VT_TUPLE;
        sb_putc(R, b, tup ? '(' : '[');
        for (size_t i = 0; i < v->u.a.n; i++) {
            if (i) sb_puts(R, b, ", ");
            put_repr(R, b, v->u.a.v[i]);
        }
        if (tup && v->u.a.n == 1) sb_putc(R, b, ',');
        sb_putc(R, b, tup ? ')' : ']');
        break;
    }
    case VT_OBJECT:
        sb_putc(R, b, '{');
        for (size_t i = 0; i < v->u.o.n; i++) {
            if (i) sb_puts(R, b, ", ");
            put_repr(R, b, v->u.o.k[i]);
            sb_puts(R, b, ": ");
            put_repr(R, b, v->u.o.v[i]);
        }
        sb_putc(R, b, '}');
        break;
    default:
        fail(R, "%s is not a string value", type_name(v));
    }
}

static val *to_str(rt *R, val *v) {
    if (v->t == VT_STR) return v;
    sbuf b = {0};
    put_string(R, &b, v);
    return mk_sb(R, &b);
}

/* value_to_json: llama.cpp's own serializer (not Python's json.dumps) */
static void put_json_str(rt *R, sbuf *b, const char *s, size_t n) {
    sb_putc(R, b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': sb_puts(R, b, "\\\""); break;
        case '\\': sb_puts(R, b, "\\\\"); break;
        case '\b': sb_puts(R, b, "\\b"); break;
        case '\f': sb_puts(R, b, "\\f"); break;
        case '\n': sb_puts(R, b, "\\n"); break;
        case '\r': sb_puts(R, b, "\\r"); break;
        case '\t': sb_puts(R, b, "\\t"); break;
        default:
            if (c < 0x20) sb_printf(R, b, "\\u%04x", c);
            else sb_putc(R, b, (char)c);
        }
    }
    sb_putc(R, b, '"');
}

static void put_indent(rt *R, sbuf *b, int n) {
    for (int i = 0; i < n; i++) sb_putc(R, b, ' ');
}

static void put_json(rt *R, sbuf *b, const val *v, int lvl, int indent, const char *isep,
                     const char *ksep) {
    step(R);
    const char *nl = indent >= 0 ? "\n" : "";
    int ind = indent > 0 ? indent : 0;
    if (lvl > 512) fail(R, "tojson: value nested too deeply");
    switch (v->t) {
    case VT_BOOL: sb_puts(R, b, v->u.b ? "true" : "false"); break;
    case VT_INT: sb_printf(R, b, "%lld", (long long)v->u.i); break;
    case VT_FLOAT: sb_printf(R, b, "%g", v->u.f); break;
    case VT_STR: put_json_str(R, b, v->u.s.p, v->u.s.n); break;
    case VT_ARRAY: case VT_TUPLE:
        sb_putc(R, b, '[');
        if (v->u.a.n) {
            sb_puts(R, b, nl);
            for (size_t i = 0; i < v->u.a.n; i++) {
                put_indent(R, b, lvl * ind + ind);
                put_json(R, b, v->u.a.v[i], lvl + 1, indent, isep, ksep);
                if (i + 1 < v->u.a.n) sb_puts(R, b, isep);
                sb_puts(R, b, nl);
            }
            put_indent(R, b, lvl * ind);
        }
        sb_putc(R, b, ']');
        break;
    case VT_OBJECT:
        sb_putc(R, b, '{');
        if (v->u.o.n) {
            sb_puts(R, b, nl);
            for (size_t i = 0; i < v->u.o.n; i++) {
                put_indent(R, b, lvl * ind + ind);
                sbuf k = {0};
                put_string(R, &k, v->u.o.k[i]);
                put_json_str(R, b, k.p ? k.p : "", k.n);
                sb_puts(R, b, ksep);
                put_json(R, b, v->u.o.v[i], lvl + 1, indent, isep, ksep);
                if (i + 1 < v->u.o.n) sb_puts(R, b, isep);
                sb_puts(R, b, nl);
            }
            put_indent(R, b, lvl * ind);
        }
        sb_putc(R, b, '}');
        break;
    default: sb_puts(R, b, "null"); break;
    }
}

/* is_immutable / is_hashable as llama.cpp defines them (object keys, ==) */
static int v_immutable(const val *v) { return v->t != VT_ARRAY && v->t != VT_OBJECT; }
static int v_hashable(const val *v) {
    switch (v->t) {
    case VT_UNDEF: case VT_FUNC: return 0;
    case VT_ARRAY: case VT_TUPLE:
        for (size_t i = 0; i < v->u.a.n; i++)
            if (!v_immutable(v->u.a.v[i]) || !v_hashable(v->u.a.v[i])) return 0;
        return 1;
    case VT_OBJECT:
        for (size_t i = 0; i < v->u.o.n; i++)
            if (!v_immutable(v->u.o.v[i]) || !v_hashable(v->u.o.v[i])) return 0;
        return 1;
    default: return 1;
    }
}

/* `==`: llama.cpp's value_t::equivalent */
static int v_equal(const val *a, const val *b) {
    switch (a->t) {
    case VT_INT: case VT_FLOAT: case VT_BOOL:
        return is_numeric_b(b) && v_int(a) == v_int(b) && v_flt(a) == v_flt(b);
    case VT_STR:
        return b->t == VT_STR && a->u.s.n == b->u.s.n && !memcmp(a->u.s.p, b->u.s.p, a->u.s.n);
    case VT_NONE: return b->t == VT_NONE;
    case VT_UNDEF: return b->t == VT_UNDEF;
    case VT_ARRAY: case VT_TUPLE:
        if (a->t != b->t || !v_hashable(a) || !v_hashable(b) || a->u.a.n != b->u.a.n) return 0;
        for (size_t i = 0; i < a->u.a.n; i++)
            if (!v_equal(a->u.a.v[i], b->u.a.v[i])) return 0;
        return 1;
    case VT_OBJECT:
        if (b->t != VT_OBJECT || !v_hashable(a) || !v_hashable(b) || a->u.o.n != b->u.o.n) return 0;
        for (size_t i = 0; i < a->u.o.n; i++)
            if (!v_equal(a->u.o.k[i], b->u.o.k[i]) || !v_equal(a->u.o.v[i], b->u.o.v[i])) return 0;
        return 1;
    case VT_FUNC:
        return b->t == VT_FUNC && a->u.fn.kind == FN_BUILTIN && b->u.fn.kind == FN_BUILTIN &&
               a->u.fn.fn == b->u.fn.fn;
    default: return 0;
    }
}

static void check_key(rt *R, const val *k) {
    if (!v_immutable(k) || !v_hashable(k)) fail(R, "Object key of unhashable type: %s", type_name(k));
}

static long obj_find(rt *R, const val *o, const val *k) {
    check_key(R, k);
    for (size_t i = 0; i < o->u.o.n; i++)
        if (v_equal(o->u.o.k[i], k)) return (long)i;
    return -1;
}

static long obj_find_s(const val *o, const char *k) {
    size_t n = strlen(k);
    for (size_t i = 0; i < o->u.o.n; i++) {
        const val *x = o->u.o.k[i];
        if (x->t == VT_STR && x->u.s.n == n && !memcmp(x->u.s.p, k, n)) return (long)i;
    }
    return -1;
}

static void obj_set(rt *R, val *o, val *k, val *v) {
    long i = obj_find(R, o, k);
    if (i >= 0) { o->u.o.v[i] = v; return; }
    if (o->u.o.n == o->u.o.cap) {
        size_t cap = o->u.o.cap ? o->u.o.cap * 2 : 4;
        val **nk = ralloc(R, mul_sz(R, cap, sizeof *nk));
        val **nv = ralloc(R, mul_sz(R, cap, sizeof *nv));
        if (o->u.o.n) {
            memcpy(nk, o->u.o.k, o->u.o.n * sizeof *nk);
            memcpy(nv, o->u.o.v, o->u.o.n * sizeof *nv);
        }
        o->u.o.k = nk;
        o->u.o.v = nv;
        o->u.o.cap = cap;
    }
    o->u.o.k[o->u.o.n] = k;
    o->u.o.v[o->u.o.n] = v;
    o->u.o.n++;
}

static void obj_set_s(rt *R, val *o, const char *k, val *v) { obj_set(R, o, mk_str(R, k), v); }

static val *obj_get_s(const val *o, const char *k) {
    long i = obj_find_s(o, k);
    return i >= 0 ? o->u.o.v[i] : NULL;
}

/* stats: llama.cpp marks values it reads; the caps probe reads the marks */
static void mark_used(rt *R, val *v, int deep) {
    if (!R->stats || !v) return;
    v->used = 1;
    if (!deep) return;
    if (is_arr(v))
        for (size_t i = 0; i < v->u.a.n; i++) mark_used(R, v->u.a.v[i], 1);
    else if (v->t == VT_OBJECT)
        for (size_t i = 0; i < v->u.o.n; i++) {
            mark_used(R, v->u.o.k[i], 1);
            mark_used(R, v->u.o.v[i], 1);
        }
}
static void mark_op(rt *R, val *v, const char *op) {
    if (!R->stats || !v) return;
    if (!strcmp(op, "test_is_string")) v->ops |= OP_TEST_IS_STRING;
    else if (!strcmp(op, "selectattr")) v->ops |= OP_SELECTATTR;
    else if (!strcmp(op, "array_access")) v->ops |= OP_ARRAY_ACCESS;
}

/* ------------------------------------------------------------------ env */

static env *env_new(rt *R) { return rzalloc(R, sizeof(env)); }

static long env_find(const env *E, const char *name) {
    for (size_t i = 0; i < E->n; i++)
        if (!strcmp(E->names[i], name)) return (long)i;
    return -1;
}

static void env_set(rt *R, env *E, const char *name, val *v) {
    long i = env_find(E, name);
    if (i >= 0) { E->vals[i] = v; return; }
    if (E->n == E->cap) {
        size_t cap = E->cap ? E->cap * 2 : 16;
        const char **nn = ralloc(R, mul_sz(R, cap, sizeof *nn));
        val **nv = ralloc(R, mul_sz(R, cap, sizeof *nv));
        if (E->n) {
            memcpy(nn, E->names, E->n * sizeof *nn);
            memcpy(nv, E->vals, E->n * sizeof *nv);
        }
        E->names = nn;
        E->vals = nv;
        E->cap = cap;
    }
    E->names[E->n] = name;
    E->vals[E->n] = v;
    E->n++;
}

static val *env_get(const env *E, const char *name) {
    long i = env_find(E, name);
    return i >= 0 ? E->vals[i] : NULL;
}

/* a new scope starts as a copy of its parent (values shared) */
static env *env_copy(rt *R, const env *P) {
    env *E = env_new(R);
    E->cap = P->n > 16 ? P->n : 16;
    E->names = ralloc(R, mul_sz(R, E->cap, sizeof *E->names));
    E->vals = ralloc(R, mul_sz(R, E->cap, sizeof *E->vals));
    if (P->n) {
        memcpy(E->names, P->names, P->n * sizeof *E->names);
        memcpy(E->vals, P->vals, P->n * sizeof *E->vals);
    }
    E->n = P->n;
    return E;
}

/* ----------------------------------------------------------------- lexer */

enum {
    TK_EOF, TK_TEXT, TK_NUM, TK_STR, TK_IDENT, TK_EQUALS, TK_LPAREN, TK_RPAREN,
    TK_OPEN_STMT, TK_CLOSE_STMT, TK_OPEN_EXPR, TK_CLOSE_EXPR, TK_LBRACKET, TK_RBRACKET,
    TK_LBRACE, TK_RBRACE, TK_COMMA, TK_DOT, TK_COLON, TK_PIPE, TK_CALL,
    TK_ADD, TK_MUL, TK_CMP, TK_UNARY, TK_COMMENT
};

typedef struct {
    int t;
    const char *s;      /* NUL-terminated value */
    size_t n;
    size_t pos;
} token;

typedef struct {
    token *v;
    size_t n, cap;
    const char *src;    /* the normalized source */
    size_t len;
} toklist;

static void tok_push(rt *R, toklist *L, int t, const char *s, size_t n, size_t pos) {
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        token *nv = ralloc(R, mul_sz(R, cap, sizeof *nv));
        if (L->n) memcpy(nv, L->v, L->n * sizeof *nv);
        L->v = nv;
        L->cap = cap;
    }
    L->v[L->n].t = t;
    L->v[L->n].s = rstrdup(R, s, n);
    L->v[L->n].n = n;
    L->v[L->n].pos = pos;
    L->n++;
}

/* the same ordered table as llama.cpp's lexer: longer and trimmed forms first */
static const struct { const char *seq; int t; } lex_table[] = {
    {"{%-", TK_OPEN_STMT}, {"-%}", TK_CLOSE_STMT}, {"{{-", TK_OPEN_EXPR}, {"-}}", TK_CLOSE_EXPR},
    {"{%", TK_OPEN_STMT}, {"%}", TK_CLOSE_STMT}, {"{{", TK_OPEN_EXPR}, {"}}", TK_CLOSE_EXPR},
    {"(", TK_LPAREN}, {")", TK_RPAREN}, {"{", TK_LBRACE}, {"}", TK_RBRACE},
    {"[", TK_LBRACKET}, {"]", TK_RBRACKET}, {",", TK_COMMA}, {".", TK_DOT}, {":", TK_COLON},
    {"|", TK_PIPE}, {"<=", TK_CMP}, {">=", TK_CMP}, {"==", TK_CMP}, {"!=", TK_CMP},
    {"<", TK_CMP}, {">", TK_CMP}, {"+", TK_ADD}, {"-", TK_ADD}, {"~", TK_ADD},
    {"*", TK_MUL}, {"/", TK_MUL}, {"%", TK_MUL}, {"=", TK_EQUALS},
};

static int is_word(char c) { return isalnum((unsigned char)c) || c == '_'; }
static int is_digit(char c) { return isdigit((unsigned char)c); }
static int is_space(char c) { return isspace((unsigned char)c); }

typedef struct {
    rt *R;
    const char *src;    /* NUL-padded */
    size_t len, pos;
} lexer;

/* next_pos_is(): the character n places ahead is one of `chars` */
static int lx_ahead(const lexer *X, size_t n, const char *chars) {
    if (X->pos + n >= X->len) return 0;
    return X->src[X->pos + n] && strchr(chars, X->src[X->pos + n]) != NULL;
}

/* consume_while with the escape handling llama.cpp applies everywhere */
static void lx_consume(lexer *X, sbuf *out, int (*pred)(char, char), char arg) {
    while (pred(X->src[X->pos], arg)) {
        if (X->src[X->pos] == '\\') {
            X->pos++;
            if (X->pos >= X->len) fail(X->R, "lexer: unexpected end of input after escape character");
            char e = X->src[X->pos++], c;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'v': c = '\v'; break;
            case '\\': c = '\\'; break;
            case '\'': c = '\''; break;
            case '"': c = '"'; break;
            default: fail(X->R, "lexer: unknown escape character \\%c", e);
            }
            sb_putc(X->R, out, c);
            continue;
        }
        sb_putc(X->R, out, X->src[X->pos++]);
        if (X->pos > X->len) fail(X->R, "lexer: unterminated string or token");
    }
}
static int pr_digit(char c, char a) { (void)a; return is_digit(c); }
static int pr_word(char c, char a) { (void)a; return is_word(c); }
static int pr_space(char c, char a) { (void)a; return is_space(c); }
static int pr_notq(char c, char q) { return c != q; }

static void lx_numeric(lexer *X, sbuf *num) {
    lx_consume(X, num, pr_digit, 0);
    if (X->pos < X->len && X->src[X->pos] == '.' && X->pos + 1 < X->len &&
        is_digit(X->src[X->pos + 1])) {
        X->pos++;
        sb_putc(X->R, num, '.');
        lx_consume(X, num, pr_digit, 0);
    }
}

static void strip_set(const char *s, size_t *a, size_t *b, int left, int right) {
    if (left) while (*a < *b && strchr(" \t\r\n", s[*a])) (*a)++;
    if (right) while (*b > *a && strchr(" \t\r\n", s[*b - 1])) (*b)--;
}

/* Source to tokens, with llama.cpp's defaults for chat templates:
 * lstrip_blocks and trim_blocks on, `-` trims, one trailing newline dropped. */
static void lex(rt *R, const char *source, size_t srclen, toklist *L) {
    memset(L, 0, sizeof *L);
    if (srclen == 0) { L->src = ""; return; }
    char *src = ralloc(R, srclen + 2);
    size_t n = 0;
    for (size_t i = 0; i < srclen; i++) {
        if (source[i] == '\r') {
            if (i + 1 < srclen && source[i + 1] == '\n') continue;
            src[n++] = '\n';
        } else {
            src[n++] = source[i];
        }
    }
    if (source[srclen - 1] == '\n') n--;
    src[n] = src[n + 1] = 0;
    L->src = src;
    L->len = n;

    lexer X = {R, src, n, 0};
    size_t depth = 0;          /* curly brackets open inside {{ }} (size_t, as upstream) */
    while (X.pos < X.len) {
        size_t start_pos = X.pos;
        int last = L->n ? L->v[L->n - 1].t : TK_CLOSE_STMT;
        if (last == TK_CLOSE_STMT || last == TK_CLOSE_EXPR || last == TK_COMMENT) {
            int rstrip = 0, rm_nl = 0;
            if (X.pos > 3) {
                char c0 = src[X.pos - 3], c1 = src[X.pos - 2], c2 = src[X.pos - 1];
                rstrip = c0 == '-' && (c1 == '%' || c1 == '}' || c1 == '#') && c2 == '}';
                rm_nl = (c1 == '#' || c1 == '%' || c1 == '-') && c2 == '}';
            }
            size_t start = X.pos, end = start;
            while (X.pos < X.len && !(src[X.pos] == '{' && lx_ahead(&X, 1, "%{#"))) end = ++X.pos;
            if (src[X.pos] == '{' && lx_ahead(&X, 1, "%#-")) {
                size_t cur = end;
                while (cur > start) {
                    char c = src[cur - 1];
                    if (cur == 1) { end = 0; break; }
                    if (c == '\n') { end = cur; break; }
                    if (!is_space(c)) break;
                    cur--;
                }
            }
            size_t a = start, b = end > start ? end : start;
            if (rm_nl && b > a && src[a] == '\n') a++;
            if (rstrip) strip_set(src, &a, &b, 1, 0);
            if (src[X.pos] == '{' && lx_ahead(&X, 1, "{%#") && lx_ahead(&X, 2, "-"))
                strip_set(src, &a, &b, 0, 1);
            if (b > a) {
                tok_push(R, L, TK_TEXT, src + a, b - a, start_pos);
                continue;
            }
        }
        if (src[X.pos] == '{' && lx_ahead(&X, 1, "#")) {
            start_pos = X.pos;
            X.pos += 2;
            size_t cs = X.pos;
            while (!(src[X.pos] == '#' && lx_ahead(&X, 1, "}"))) {
                if (X.pos + 2 >= X.len) fail(R, "lexer: missing end of comment tag");
                X.pos++;
            }
            tok_push(R, L, TK_COMMENT, src + cs, X.pos - cs, start_pos);
            X.pos += 2;
            continue;
        }
        if (src[X.pos] == '-' && (last == TK_OPEN_EXPR || last == TK_OPEN_STMT)) {
            X.pos++;
            if (X.pos >= X.len) break;
        }
        sbuf junk = {0};
        lx_consume(&X, &junk, pr_space, 0);
        if (X.pos >= X.len) break;
        char ch = src[X.pos];
        int closing = ch == '-' && lx_ahead(&X, 1, "%}");
        if (!closing && (ch == '-' || ch == '+')) {
            start_pos = X.pos;
            int lt = L->n ? L->v[L->n - 1].t : TK_EOF;
            if (lt == TK_TEXT || lt == TK_EOF) fail(R, "lexer: unexpected character: %c", ch);
            if (!(lt == TK_IDENT || lt == TK_NUM || lt == TK_STR || lt == TK_RPAREN ||
                  lt == TK_RBRACKET)) {
                X.pos++;
                sbuf num = {0};
                sb_putc(R, &num, ch);
                lx_numeric(&X, &num);
                tok_push(R, L, num.n > 1 ? TK_NUM : TK_UNARY, num.p, num.n, start_pos);
                continue;
            }
        }
        int matched = 0;
        for (size_t i = 0; i < sizeof lex_table / sizeof lex_table[0]; i++) {
            const char *seq = lex_table[i].seq;
            size_t sl = strlen(seq);
            if (lex_table[i].t == TK_CLOSE_EXPR && sl == 2 && depth > 0) continue;
            if (X.pos + sl <= X.len && !memcmp(src + X.pos, seq, sl)) {
                tok_push(R, L, lex_table[i].t, seq, sl, X.pos);
                if (lex_table[i].t == TK_OPEN_EXPR) depth = 0;
                else if (lex_table[i].t == TK_LBRACE) depth++;
                else if (lex_table[i].t == TK_RBRACE) depth--;
                X.pos += sl;
                matched = 1;
                break;
            }
        }
        if (matched) continue;
        if (ch == '\'' || ch == '"') {
            start_pos = X.pos++;
            sbuf s = {0};
            lx_consume(&X, &s, pr_notq, ch);
            tok_push(R, L, TK_STR, s.p ? s.p : "", s.n, start_pos);
            X.pos++;
            continue;
        }
        if (is_digit(ch)) {
            start_pos = X.pos;
            sbuf num = {0};
            lx_numeric(&X, &num);
            tok_push(R, L, TK_NUM, num.p, num.n, start_pos);
            continue;
        }
        if (is_word(ch)) {
            start_pos = X.pos;
            sbuf w = {0};
            lx_consume(&X, &w, pr_word, 0);
            tok_push(R, L, TK_IDENT, w.p, w.n, start_pos);
            continue;
        }
        if ((unsigned char)ch >= 0x20 && (unsigned char)ch < 0x7f)
            fail(R, "lexer: unexpected character: %c", ch);
        fail(R, "lexer: unexpected byte 0x%02x", (unsigned char)ch);
    }
}

/* ---------------------------------------------------------------- parser */

enum {
    N_TEXT, N_COMMENT, N_IF, N_FOR, N_BREAK, N_CONTINUE, N_NOOP, N_SET, N_MACRO,
    N_CALLBLOCK, N_FILTERBLOCK,
    N_IDENT, N_INT, N_FLOAT, N_STR, N_ARRAY, N_TUPLE, N_OBJECT, N_MEMBER, N_CALL,
    N_BINARY, N_FILTER, N_SELECT, N_TEST, N_UNARY, N_SLICE, N_KWARG, N_SPREAD,
    N_TERNARY, N_BLANK
};

typedef struct { node **v; size_t n, cap; } nlist;

struct node {
    int t;
    size_t pos;
    const char *s;      /* text, identifier, string literal, operator */
    size_t sn;
    int64_t i;
    double f;
    int flag;           /* member: computed; test: negate */
    node *a, *b, *c;    /* children (see each kind) */
    nlist l1, l2, l3;   /* body / alternate / args ... */
};

typedef struct {
    rt *R;
    toklist *L;
    size_t cur;
} parser;

static const token tok_eof = {TK_EOF, "", 0, 0};

static const token *pk(parser *P, size_t off) {
    return P->cur + off < P->L->n ? &P->L->v[P->cur + off] : &tok_eof;
}

static const token *nx(parser *P) {
    if (P->cur >= P->L->n) fail(P->R, "parser: unexpected end of template");
    return &P->L->v[P->cur++];
}

static void pfail_at(parser *P, const char *what) __attribute__((noreturn));
static void pfail_at(parser *P, const char *what) {
    const token *t = pk(P, 0);
    size_t line = 1;
    for (size_t i = 0; i < t->pos && i < P->L->len; i++) line += P->L->src[i] == '\n';
    fail(P->R, "parser: %s (got '%.40s') at line %zu", what, t->s, line);
}

static void expect(parser *P, int t, const char *what) {
    if (pk(P, 0)->t != t) pfail_at(P, what);
    P->cur++;
}

static int is_tok(parser *P, int t) { return pk(P, 0)->t == t; }
static int is_ident(parser *P, const char *name) {
    return pk(P, 0)->t == TK_IDENT && !strcmp(pk(P, 0)->s, name);
}
static void expect_ident(parser *P, const char *name) {
    if (!is_ident(P, name)) {
        char m[64];
        snprintf(m, sizeof m, "expected '%s'", name);
        pfail_at(P, m);
    }
    P->cur++;
}
/* {% name ... with name one of a space-separated list */
static int is_stmt(parser *P, const char *names) {
    if (pk(P, 0)->t != TK_OPEN_STMT || pk(P, 1)->t != TK_IDENT) return 0;
    const char *w = pk(P, 1)->s;
    size_t wl = strlen(w);
    for (const char *p = names; *p;) {
        const char *e = strchr(p, ' ');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == wl && !memcmp(p, w, l)) return 1;
        p += l;
        if (*p) p++;
    }
    return 0;
}

static node *mk_node(parser *P, int t, size_t tokidx) {
    node *n = rzalloc(P->R, sizeof *n);
    n->t = t;
    n->pos = tokidx < P->L->n ? P->L->v[tokidx].pos : 0;
    return n;
}

static void nl_push(rt *R, nlist *l, node *x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        node **nv = ralloc(R, mul_sz(R, cap, sizeof *nv));
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

static node *p_any(parser *P);
static node *p_expr(parser *P);
static node *p_primary(parser *P);
static node *p_call(parser *P, node *callee);
static void p_args(parser *P, nlist *out);

static void enter(parser *P) {
    if (++P->R->nest > TPL_MAX_NEST) fail(P->R, "parser: template nested too deeply");
}
static void leave(parser *P) { P->R->nest--; }

/* body statements until one of `names` opens */
static void p_body(parser *P, nlist *out, const char *names) {
    while (!is_stmt(P, names)) {
        if (is_tok(P, TK_EOF)) {
            char m[96];
            snprintf(m, sizeof m, "missing {%% %s %%}", names);
            pfail_at(P, m);
        }
        nl_push(P->R, out, p_any(P));
    }
}

static node *p_seq(parser *P, int primary) {
    size_t sp = P->cur;
    node *first = primary ? p_primary(P) : p_expr(P);
    if (!is_tok(P, TK_COMMA)) return first;
    node *t = mk_node(P, N_TUPLE, sp);
    nl_push(P->R, &t->l1, first);
    while (is_tok(P, TK_COMMA)) {
        P->cur++;
        nl_push(P->R, &t->l1, primary ? p_primary(P) : p_expr(P));
    }
    return t;
}

static node *p_if(parser *P, size_t sp) {
    node *n = mk_node(P, N_IF, sp);
    n->a = p_expr(P);
    expect(P, TK_CLOSE_STMT, "expected %}");
    p_body(P, &n->l1, "elif else endif");
    if (is_stmt(P, "elif")) {
        size_t p0 = P->cur;
        P->cur += 2;
        nl_push(P->R, &n->l2, p_if(P, p0));
    } else if (is_stmt(P, "else")) {
        P->cur += 2;
        expect(P, TK_CLOSE_STMT, "expected %}");
        p_body(P, &n->l2, "endif");
    }
    return n;
}

static void p_end(parser *P, const char *name) {
    expect(P, TK_OPEN_STMT, "expected {%");
    expect_ident(P, name);
    expect(P, TK_CLOSE_STMT, "expected %}");
}

static node *p_statement(parser *P) {
    expect(P, TK_OPEN_STMT, "expected {%");
    if (pk(P, 0)->t != TK_IDENT) pfail_at(P, "unknown statement");
    size_t sp = P->cur;
    const char *name = nx(P)->s;
    node *n;
    if (!strcmp(name, "set")) {
        n = mk_node(P, N_SET, sp);
        n->a = p_seq(P, 0);
        if (is_tok(P, TK_EQUALS)) {
            P->cur++;
            n->b = p_seq(P, 0);
        } else {
            expect(P, TK_CLOSE_STMT, "expected %}");
            p_body(P, &n->l1, "endset");
            expect(P, TK_OPEN_STMT, "expected {%");
            expect_ident(P, "endset");
        }
        expect(P, TK_CLOSE_STMT, "expected %}");
    } else if (!strcmp(name, "if")) {
        n = p_if(P, sp);
        p_end(P, "endif");
    } else if (!strcmp(name, "macro")) {
        n = mk_node(P, N_MACRO, sp);
        n->a = p_primary(P);
        p_args(P, &n->l2);
        expect(P, TK_CLOSE_STMT, "expected %}");
        p_body(P, &n->l1, "endmacro");
        p_end(P, "endmacro");
    } else if (!strcmp(name, "for")) {
        n = mk_node(P, N_FOR, sp);
        n->a = p_seq(P, 1);
        if (!is_ident(P, "in")) pfail_at(P, "expected 'in'");
        P->cur++;
        n->b = p_expr(P);
        expect(P, TK_CLOSE_STMT, "expected %}");
        p_body(P, &n->l1, "endfor else");
        if (is_stmt(P, "else")) {
            P->cur += 2;
            expect(P, TK_CLOSE_STMT, "expected %}");
            p_body(P, &n->l2, "endfor");
        }
        p_end(P, "endfor");
    } else if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        expect(P, TK_CLOSE_STMT, "expected %}");
        n = mk_node(P, name[0] == 'b' ? N_BREAK : N_CONTINUE, sp);
    } else if (!strcmp(name, "call")) {
        n = mk_node(P, N_CALLBLOCK, sp);
        if (is_tok(P, TK_LPAREN)) p_args(P, &n->l2);          /* caller's parameters */
        node *callee = p_primary(P);
        if (callee->t != N_IDENT) pfail_at(P, "expected identifier after call");
        node *call = mk_node(P, N_CALL, sp);
        call->a = callee;
        p_args(P, &call->l3);
        n->a = call;
        expect(P, TK_CLOSE_STMT, "expected %}");
        p_body(P, &n->l1, "endcall");
        p_end(P, "endcall");
    } else if (!strcmp(name, "filter")) {
        n = mk_node(P, N_FILTERBLOCK, sp);
        node *f = p_primary(P);
        if (f->t == N_IDENT && is_tok(P, TK_LPAREN)) f = p_call(P, f);
        n->a = f;
        expect(P, TK_CLOSE_STMT, "expected %}");
        p_body(P, &n->l1, "endfilter");
        p_end(P, "endfilter");
    } else if (!strcmp(name, "generation") || !strcmp(name, "endgeneration")) {
        n = mk_node(P, N_NOOP, sp);
        P->cur++;
    } else {
        char m[96];
        snprintf(m, sizeof m, "unknown statement '%.40s'", name);
        fail(P->R, "parser: %s", m);
    }
    return n;
}

static node *p_any(parser *P) {
    size_t sp = P->cur;
    node *n;
    enter(P);
    switch (pk(P, 0)->t) {
    case TK_COMMENT:
        n = mk_node(P, N_COMMENT, sp);
        nx(P);
        break;
    case TK_TEXT: {
        const token *t = nx(P);
        n = mk_node(P, N_TEXT, sp);
        n->s = t->s;
        n->sn = t->n;
        break;
    }
    case TK_OPEN_STMT:
        n = p_statement(P);
        break;
    case TK_OPEN_EXPR:
        P->cur++;
        n = p_expr(P);
        expect(P, TK_CLOSE_EXPR, "expected }}");
        break;
    default:
        pfail_at(P, "unexpected token");
    }
    leave(P);
    return n;
}

static node *p_or(parser *P);

static node *p_ifexpr(parser *P) {
    node *a = p_or(P);
    if (is_ident(P, "if")) {
        size_t sp = P->cur++;
        node *test = p_or(P);
        if (is_ident(P, "else")) {
            size_t p0 = P->cur++;
            node *n = mk_node(P, N_TERNARY, p0);
            n->a = test;
            n->b = a;
            n->c = p_ifexpr(P);
            return n;
        }
        node *n = mk_node(P, N_SELECT, sp);
        n->a = a;
        n->b = test;
        return n;
    }
    return a;
}

static node *p_expr(parser *P) {
    enter(P);
    node *n = p_ifexpr(P);
    leave(P);
    return n;
}

static node *mk_bin(parser *P, size_t sp, const char *op, node *l, node *r) {
    node *n = mk_node(P, N_BINARY, sp);
    n->s = op;
    n->a = l;
    n->b = r;
    return n;
}

static node *p_not(parser *P);
static node *p_and(parser *P) {
    node *l = p_not(P);
    while (is_ident(P, "and")) {
        size_t sp = P->cur++;
        l = mk_bin(P, sp, "and", l, p_not(P));
    }
    return l;
}
static node *p_or(parser *P) {
    node *l = p_and(P);
    while (is_ident(P, "or")) {
        size_t sp = P->cur++;
        l = mk_bin(P, sp, "or", l, p_and(P));
    }
    return l;
}
static node *p_cmp(parser *P);
static node *p_not(parser *P) {
    if (is_ident(P, "not")) {
        size_t sp = P->cur++;
        enter(P);
        node *n = mk_node(P, N_UNARY, sp);
        n->s = "not";
        n->a = p_not(P);
        leave(P);
        return n;
    }
    return p_cmp(P);
}
static node *p_add(parser *P);
static node *p_cmp(parser *P) {
    node *l = p_add(P);
    for (;;) {
        size_t sp = P->cur;
        const char *op;
        if (is_ident(P, "not") && pk(P, 1)->t == TK_IDENT && !strcmp(pk(P, 1)->s, "in")) {
            op = "not in";
            P->cur += 2;
        } else if (is_ident(P, "in")) {
            op = "in";
            P->cur++;
        } else if (is_tok(P, TK_CMP)) {
            op = nx(P)->s;
        } else {
            break;
        }
        l = mk_bin(P, sp, op, l, p_add(P));
    }
    return l;
}
static node *p_mul(parser *P);
static node *p_add(parser *P) {
    node *l = p_mul(P);
    while (is_tok(P, TK_ADD)) {
        size_t sp = P->cur;
        const char *op = nx(P)->s;
        l = mk_bin(P, sp, op, l, p_mul(P));
    }
    return l;
}
static node *p_test(parser *P);
static node *p_mul(parser *P) {
    node *l = p_test(P);
    while (is_tok(P, TK_MUL)) {
        size_t sp = P->cur;
        const char *op = nx(P)->s;
        l = mk_bin(P, sp, op, l, p_test(P));
    }
    return l;
}
static node *p_filter(parser *P);
static node *p_test(parser *P) {
    node *operand = p_filter(P);
    while (is_ident(P, "is")) {
        size_t sp = P->cur++;
        int neg = 0;
        if (is_ident(P, "not")) { P->cur++; neg = 1; }
        node *t = p_primary(P);
        if (is_tok(P, TK_LPAREN)) t = p_call(P, t);
        node *n = mk_node(P, N_TEST, sp);
        n->a = operand;
        n->b = t;
        n->flag = neg;
        operand = n;
    }
    return operand;
}
static node *p_unary(parser *P);
static node *p_filter(parser *P) {
    node *operand = p_unary(P);
    while (is_tok(P, TK_PIPE)) {
        size_t sp = P->cur++;
        node *f = p_primary(P);
        if (is_tok(P, TK_LPAREN)) f = p_call(P, f);
        node *n = mk_node(P, N_FILTER, sp);
        n->a = operand;
        n->b = f;
        operand = n;
    }
    return operand;
}
static node *p_member(parser *P, node *obj);
static node *p_unary(parser *P) {
    if (is_tok(P, TK_UNARY)) {
        size_t sp = P->cur;
        const char *op = nx(P)->s;
        enter(P);
        node *n = mk_node(P, N_UNARY, sp);
        n->s = op;
        n->a = p_unary(P);
        leave(P);
        return n;
    }
    node *m = p_member(P, p_primary(P));
    return is_tok(P, TK_LPAREN) ? p_call(P, m) : m;
}

static node *p_call(parser *P, node *callee) {
    enter(P);
    size_t sp = P->cur;
    node *n = mk_node(P, N_CALL, sp);
    n->a = callee;
    p_args(P, &n->l3);
    node *m = p_member(P, n);
    node *r = is_tok(P, TK_LPAREN) ? p_call(P, m) : m;
    leave(P);
    return r;
}

static void p_args(parser *P, nlist *out) {
    expect(P, TK_LPAREN, "expected (");
    while (!is_tok(P, TK_RPAREN)) {
        node *arg;
        if (is_tok(P, TK_EOF)) pfail_at(P, "expected )");
        if (pk(P, 0)->t == TK_MUL && !strcmp(pk(P, 0)->s, "*")) {
            size_t sp = P->cur++;
            arg = mk_node(P, N_SPREAD, sp);
            arg->a = p_expr(P);
        } else {
            arg = p_expr(P);
            if (is_tok(P, TK_EQUALS)) {
                size_t sp = P->cur++;
                node *kw = mk_node(P, N_KWARG, sp);
                kw->a = arg;
                kw->b = p_expr(P);
                arg = kw;
            }
        }
        nl_push(P->R, out, arg);
        if (is_tok(P, TK_COMMA)) P->cur++;
    }
    expect(P, TK_RPAREN, "expected )");
}

static node *p_subscript(parser *P) {
    node *sl[3] = {0};
    size_t ns = 0;
    int is_slice = 0;
    size_t sp = P->cur;
    while (!is_tok(P, TK_RBRACKET)) {
        if (is_tok(P, TK_EOF)) pfail_at(P, "expected ]");
        node *x = NULL;
        if (is_tok(P, TK_COLON)) {
            P->cur++;
            is_slice = 1;
        } else {
            x = p_expr(P);
            if (is_tok(P, TK_COLON)) { P->cur++; is_slice = 1; }
        }
        if (ns < 3) sl[ns] = x;
        ns++;
    }
    if (is_slice) {
        node *n = mk_node(P, N_SLICE, sp);
        n->a = sl[0];
        n->b = sl[1];
        n->c = sl[2];
        return n;
    }
    if (ns == 0) return mk_node(P, N_BLANK, sp);
    return sl[0];
}

static node *p_member(parser *P, node *obj) {
    size_t sp = P->cur;
    while (is_tok(P, TK_DOT) || is_tok(P, TK_LBRACKET)) {
        int computed = nx(P)->t == TK_LBRACKET;
        node *prop;
        if (computed) {
            prop = p_subscript(P);
            expect(P, TK_RBRACKET, "expected ]");
        } else {
            prop = p_primary(P);
        }
        node *n = mk_node(P, N_MEMBER, sp);
        n->a = obj;
        n->b = prop;
        n->flag = computed;
        obj = n;
    }
    return obj;
}

static node *p_primary(parser *P) {
    size_t sp = P->cur;
    const token *t = nx(P);
    node *n;
    enter(P);
    switch (t->t) {
    case TK_NUM:
        if (strchr(t->s, '.')) {
            n = mk_node(P, N_FLOAT, sp);
            n->f = strtod(t->s, NULL);
        } else {
            errno = 0;
            long long v = strtoll(t->s, NULL, 10);
            if (errno == ERANGE) fail(P->R, "parser: integer literal out of range: %.40s", t->s);
            n = mk_node(P, N_INT, sp);
            n->i = v;
        }
        break;
    case TK_STR: {
        sbuf s = {0};
        sb_put(P->R, &s, t->s, t->n);
        while (is_tok(P, TK_STR)) {
            const token *u = nx(P);
            sb_put(P->R, &s, u->s, u->n);
        }
        n = mk_node(P, N_STR, sp);
        n->s = s.p ? s.p : "";
        n->sn = s.n;
        break;
    }
    case TK_IDENT:
        n = mk_node(P, N_IDENT, sp);
        n->s = t->s;
        n->sn = t->n;
        break;
    case TK_LPAREN:
        n = p_seq(P, 0);
        expect(P, TK_RPAREN, "expected )");
        break;
    case TK_LBRACKET:
        n = mk_node(P, N_ARRAY, sp);
        while (!is_tok(P, TK_RBRACKET)) {
            if (is_tok(P, TK_EOF)) pfail_at(P, "expected ]");
            nl_push(P->R, &n->l1, p_expr(P));
            if (is_tok(P, TK_COMMA)) P->cur++;
        }
        P->cur++;
        break;
    case TK_LBRACE:
        n = mk_node(P, N_OBJECT, sp);
        while (!is_tok(P, TK_RBRACE)) {
            if (is_tok(P, TK_EOF)) pfail_at(P, "expected }");
            nl_push(P->R, &n->l1, p_expr(P));
            expect(P, TK_COLON, "expected :");
            nl_push(P->R, &n->l2, p_expr(P));
            if (is_tok(P, TK_COMMA)) P->cur++;
        }
        P->cur++;
        break;
    default:
        P->cur--;
        pfail_at(P, "unexpected token in expression");
    }
    leave(P);
    return n;
}

static void parse(rt *R, toklist *L, nlist *prog) {
    parser P = {R, L, 0};
    memset(prog, 0, sizeof *prog);
    while (P.cur < L->n) nl_push(R, prog, p_any(&P));
}

/* ------------------------------------------------------------- evaluator */

static val *eval(rt *R, env *E, const node *n);
static void exec(rt *R, env *E, const node *n, sbuf *out);
static val *call_func(rt *R, val *f, args *A);

/* llama.cpp's gather_string_parts: strings, numbers and booleans print;
 * arrays print their items; none, undefined, objects and functions print
 * nothing. */
static void gather(rt *R, sbuf *out, const val *v) {
    switch (v->t) {
    case VT_STR:
        if (v->u.s.n) {
            sb_put(R, out, v->u.s.p, v->u.s.n);
            out->parts += v->multipart ? 2 : 1;
        }
        break;
    case VT_INT: case VT_FLOAT: case VT_BOOL:
        put_string(R, out, v);
        out->parts++;
        break;
    case VT_ARRAY: case VT_TUPLE:
        for (size_t i = 0; i < v->u.a.n; i++) gather(R, out, v->u.a.v[i]);
        break;
    default:
        break;
    }
}

static void exec_list(rt *R, env *E, const nlist *l, sbuf *out) {
    for (size_t i = 0; i < l->n; i++) exec(R, E, l->v[i], out);
}

static val *exec_capture(rt *R, env *E, const nlist *l) {
    sbuf b = {0};
    exec_list(R, E, l, &b);
    return mk_sb(R, &b);
}

/* ---- arguments */

static void args_push(rt *R, args *A, val *v) {
    if (A->n == A->cap) {
        size_t cap = A->cap ? A->cap * 2 : 4;
        val **nv = ralloc(R, mul_sz(R, cap, sizeof *nv));
        if (A->n) memcpy(nv, A->v, A->n * sizeof *nv);
        A->v = nv;
        A->cap = cap;
    }
    A->v[A->n++] = v;
}

static val *get_pos(rt *R, args *A, size_t i) {
    if (i < A->n) return A->v[i];
    fail(R, "function '%s' expected at least %zu arguments, got %zu", A->fname, i + 1, A->n);
}
static val *get_pos_d(args *A, size_t i, val *d) { return i < A->n ? A->v[i] : d; }
static val *get_kwarg(args *A, const char *key, val *d) {
    for (size_t i = 0; i < A->n; i++)
        if (A->v[i]->t == VT_KWARG && !strcmp(A->v[i]->u.kw.key, key)) return A->v[i]->u.kw.v;
    return d;
}
static val *kwarg_or_pos(rt *R, args *A, const char *key, size_t pos) {
    val *v = get_kwarg(A, key, NULL);
    if (v && v->t != VT_UNDEF) return v;
    if (pos < A->n && A->v[pos]->t != VT_KWARG) return A->v[pos];
    return v ? v : mk_undef(R, NULL);
}
static void ensure_count(rt *R, args *A, size_t min, size_t max) {
    if (A->n < min || A->n > max)
        fail(R, "function '%s' expected between %zu and %zu arguments, got %zu", A->fname, min, max,
             A->n);
}
/* ensure_vals<...>: `types` holds one type letter per argument, upper case
 * when required: A array, S string, I int, F float, B bool, O object, '.' any */
static int type_ok(const val *v, char t) {
    switch (t | 0x20) {
    case 'a': return is_arr(v);
    case 's': return v->t == VT_STR;
    case 'i': return v->t == VT_INT;
    case 'f': return v->t == VT_FLOAT;
    case 'b': return v->t == VT_BOOL;
    case 'o': return v->t == VT_OBJECT;
    default: return 1;
    }
}
static void ensure_vals(rt *R, args *A, const char *types) {
    size_t req = 0;
    for (const char *p = types; *p; p++) req += (*p >= 'A' && *p <= 'Z');
    ensure_count(R, A, req, 999);
    for (size_t i = 0; types[i]; i++)
        if (types[i] >= 'A' && types[i] <= 'Z' && i < A->n && !type_ok(A->v[i], types[i]))
            fail(R, "function '%s' expected a different type, got %s", A->fname, type_name(A->v[i]));
}

/* ---- functions */

typedef struct { const char *name; bfn fn; } builtin;

static const builtin *find_builtin(const builtin *tab, const char *name) {
    for (; tab && tab->name; tab++)
        if (!strcmp(tab->name, name)) return tab;
    return NULL;
}

static const builtin *type_builtins(rt *R, const val *v);
extern const builtin global_builtins[];

static val *mk_func(rt *R, const char *name, bfn fn, val *self) {
    val *f = mk(R, VT_FUNC);
    f->u.fn.kind = FN_BUILTIN;
    f->u.fn.name = name;
    f->u.fn.fn = fn;
    f->u.fn.self = self;
    return f;
}

/* try_builtin_func: a method bound to `input`, or undefined/error */
static val *try_builtin(rt *R, const char *name, val *input, int undef_on_missing) {
    mark_used(R, input, 0);
    mark_op(R, input, name);
    const builtin *b = find_builtin(type_builtins(R, input), name);
    if (b) return mk_func(R, b->name, b->fn, input);
    if (undef_on_missing) return mk_undef(R, rstrdup(R, name, strlen(name)));
    fail(R, "unknown filter or method '%s' for type %s", name, type_name(input));
}

static void bind_params(rt *R, const char *name, const nlist *params, args *A, env *E) {
    for (size_t i = 0; i < params->n; i++) {
        const node *p = params->v[i];
        if (i < A->n) {
            const char *pn;
            if (p->t == N_IDENT) pn = p->s;
            else if (p->t == N_KWARG && p->a->t == N_IDENT) pn = p->a->s;
            else fail(R, "invalid parameter in '%s'", name);
            env_set(R, E, pn, kwarg_or_pos(R, A, pn, i));
        } else if (p->t == N_KWARG) {
            if (p->a->t != N_IDENT) fail(R, "keyword argument key must be an identifier in '%s'", name);
            env_set(R, E, p->a->s, eval(R, A->ctx, p->b));
        } else {
            fail(R, "not enough arguments provided to '%s'", name);
        }
    }
}

static val *call_func(rt *R, val *f, args *A) {
    step(R);
    if (f->t != VT_FUNC) fail(R, "callee is not a function: got %s", type_name(f));
    A->fname = f->u.fn.name;
    if (f->u.fn.kind == FN_BUILTIN) {
        if (f->u.fn.self) {
            args B = *A;
            B.v = NULL;
            B.n = B.cap = 0;
            args_push(R, &B, f->u.fn.self);
            for (size_t i = 0; i < A->n; i++) args_push(R, &B, A->v[i]);
            return f->u.fn.fn(R, &B);
        }
        return f->u.fn.fn(R, A);
    }
    if (++R->calls > TPL_MAX_CALLS) fail(R, "macro recursion deeper than %d", TPL_MAX_CALLS);
    val *res;
    const node *def = f->u.fn.def;
    if (f->u.fn.kind == FN_MACRO) {
        env *M = env_copy(R, A->ctx);
        bind_params(R, f->u.fn.name, &def->l2, A, M);
        res = exec_capture(R, M, &def->l1);
    } else {
        env *M = env_copy(R, f->u.fn.cap);
        bind_params(R, "caller", &def->l2, A, M);
        res = exec_capture(R, M, &def->l1);
    }
    R->calls--;
    return res;
}

/* ---- member access: obj.name, obj[expr], obj[a:b:c] */

static val *eval_member(rt *R, env *E, const node *n) {
    val *obj = eval(R, E, n->a);
    val *prop;
    if (n->flag) {
        if (n->b->t == N_SLICE) {
            const node *s = n->b;
            int64_t size = is_arr(obj) ? (int64_t)obj->u.a.n : obj->t == VT_STR ? (int64_t)obj->u.s.n : 0;
            val *stp = s->c ? eval(R, E, s->c) : mk_int(R, 1);
            val *st = s->a ? eval(R, E, s->a) : mk_int(R, as_int(R, stp) < 0 ? size - 1 : 0);
            val *sp = s->b ? eval(R, E, s->b) : mk_int(R, as_int(R, stp) < 0 ? -1 : size);
            val *f = try_builtin(R, "slice", obj, 0);
            args A = {0};
            A.ctx = E;
            args_push(R, &A, st);
            args_push(R, &A, sp);
            args_push(R, &A, stp);
            return call_func(R, f, &A);
        }
        prop = eval(R, E, n->b);
    } else if (n->b->t == N_INT) {
        if (n->b->i < 0) fail(R, "static member property cannot be negative");
        prop = mk_int(R, n->b->i);
    } else {
        if (n->b->t != N_IDENT) fail(R, "static member property must be an identifier");
        prop = mk_strn(R, n->b->s, n->b->sn);
        val *v = try_builtin(R, n->b->s, obj, 1);
        if (v->t != VT_UNDEF) return v;
    }
    val *v = mk_undef(R, "object_property");
    if (prop->t == VT_UNDEF) return v;
    if (!v_hashable(prop)) fail(R, "type %s is not allowed as object key", type_name(prop));
    if (obj->t == VT_UNDEF) return v;
    if (obj->t == VT_OBJECT) {
        val *key = to_str(R, prop);
        long i = obj_find(R, obj, prop);
        if (i >= 0) v = obj->u.o.v[i];
        else v = try_builtin(R, key->u.s.p, obj, 1);
    } else if (is_arr(obj) || obj->t == VT_STR) {
        if (prop->t == VT_INT) {
            int64_t idx = prop->u.i;
            if (is_arr(obj)) {
                if (idx < 0) idx += (int64_t)obj->u.a.n;
                if (idx >= 0 && idx < (int64_t)obj->u.a.n) v = obj->u.a.v[idx];
            } else if (idx >= 0 && idx < (int64_t)obj->u.s.n) {
                v = mk_strn(R, obj->u.s.p + idx, 1);
            }
        } else if (prop->t == VT_STR) {
            v = try_builtin(R, prop->u.s.p, obj, 1);
        } else {
            fail(R, "cannot access property with non-string/non-number: got %s", type_name(prop));
        }
    } else {
        if (prop->t != VT_STR) fail(R, "cannot access property with non-string: got %s", type_name(prop));
        v = try_builtin(R, prop->u.s.p, obj, 1);
    }
    if (R->stats) {
        mark_used(R, v, 0);
        mark_used(R, obj, 0);
        mark_used(R, prop, 0);
        if (prop->t == VT_INT) mark_op(R, obj, "array_access");
    }
    return v;
}

/* ---- binary operators */

static int test_in(rt *R, val *needle, val *hay) {
    if (hay->t == VT_UNDEF) return 0;
    if (is_arr(hay)) {
        for (size_t i = 0; i < hay->u.a.n; i++)
            if (v_equal(needle, hay->u.a.v[i])) return 1;
        return 0;
    }
    if (hay->t == VT_STR) {
        if (needle->t != VT_STR) fail(R, "'in' test expects a string needle, got %s", type_name(needle));
        return memmem(hay->u.s.p, hay->u.s.n, needle->u.s.p, needle->u.s.n) != NULL;
    }
    if (hay->t == VT_OBJECT) return obj_find(R, hay, needle) >= 0;
    fail(R, "'in' test expects an iterable, got %s", type_name(hay));
}

static val *concat(rt *R, val *l, val *r) {
    sbuf b = {0};
    if (l->t != VT_NONE && l->t != VT_UNDEF) put_string(R, &b, l);
    size_t ln = b.n;
    if (r->t != VT_NONE && r->t != VT_UNDEF) put_string(R, &b, r);
    val *v = mk_sb(R, &b);
    v->multipart = (l->t == VT_STR && l->multipart) || (r->t == VT_STR && r->multipart) ||
                   (ln > 0 && b.n > ln);
    return v;
}

static val *eval_binary(rt *R, env *E, const node *n) {
    const char *op = n->s;
    val *l = eval(R, E, n->a);
    if (!strcmp(op, "and")) return as_bool(R, l) ? eval(R, E, n->b) : l;
    if (!strcmp(op, "or")) return as_bool(R, l) ? l : eval(R, E, n->b);
    val *r = eval(R, E, n->b);
    if (!strcmp(op, "==")) return mk_bool(R, v_equal(l, r));
    if (!strcmp(op, "!=")) return mk_bool(R, !v_equal(l, r));
    int is_in = !strcmp(op, "in"), not_in = !strcmp(op, "not in");
    int is_cat = !strcmp(op, "+") || !strcmp(op, "~");
    if (l->t == VT_UNDEF || r->t == VT_UNDEF) {
        if (r->t == VT_UNDEF && (is_in || not_in)) return mk_bool(R, not_in);
        if (is_cat) {
            int ln = l->t == VT_NONE || l->t == VT_UNDEF, rn = r->t == VT_NONE || r->t == VT_UNDEF;
            if ((ln && r->t == VT_STR) || (rn && l->t == VT_STR)) return concat(R, l, r);
        }
        fail(R, "cannot perform operation %s on undefined values", op);
    }
    if (l->t == VT_NONE || r->t == VT_NONE) {
        if (r->t != VT_NONE && (is_in || not_in)) {
            int m = test_in(R, l, r);
            return mk_bool(R, is_in ? m : !m);
        }
        if (is_cat) {
            int ln = l->t == VT_NONE, rn = r->t == VT_NONE;
            if ((ln && r->t == VT_STR) || (rn && l->t == VT_STR)) return concat(R, l, r);
        }
        fail(R, "cannot perform operation %s on null values", op);
    }
    if (is_num(l) && is_num(r)) {
        double a = v_flt(l), b = v_flt(r);
        int isf = l->t == VT_FLOAT || r->t == VT_FLOAT;
        if (op[1] == 0 && (op[0] == '+' || op[0] == '-' || op[0] == '*')) {
            double res = op[0] == '+' ? a + b : op[0] == '-' ? a - b : a * b;
            return isf ? mk_float(R, res) : mk_int(R, float_as_int(res));
        }
        if (!strcmp(op, "/")) return mk_float(R, a / b);
        if (!strcmp(op, "%")) {
            double rem = fmod(a, b);
            return isf ? mk_float(R, rem) : mk_int(R, float_as_int(rem));
        }
        if (!strcmp(op, "<")) return mk_bool(R, a < b);
        if (!strcmp(op, ">")) return mk_bool(R, a > b);
        if (!strcmp(op, ">=")) return mk_bool(R, a >= b);
        if (!strcmp(op, "<=")) return mk_bool(R, a <= b);
    }
    if (is_arr(l) && is_arr(r)) {
        if (!strcmp(op, "+")) {
            val *res = mk_arr(R, VT_ARRAY);
            for (size_t i = 0; i < l->u.a.n; i++) arr_push(R, res, l->u.a.v[i]);
            for (size_t i = 0; i < r->u.a.n; i++) arr_push(R, res, r->u.a.v[i]);
            return res;
        }
    } else if (is_arr(r)) {
        int m = test_in(R, l, r);
        if (is_in) return mk_bool(R, m);
        if (not_in) return mk_bool(R, !m);
    }
    if ((l->t == VT_STR || r->t == VT_STR) && is_cat) return concat(R, l, r);
    if (!strcmp(op, "*") && ((l->t == VT_STR && r->t == VT_INT) || (l->t == VT_INT && r->t == VT_STR))) {
        val *s = l->t == VT_STR ? l : r;
        int64_t k = l->t == VT_INT ? l->u.i : r->u.i;
        sbuf b = {0};
        if (k > 0) {
            if (s->u.s.n && (uint64_t)k > TPL_MAX_OUT / s->u.s.n)
                fail(R, "string repetition exceeds %u MB", TPL_MAX_OUT >> 20);
            for (int64_t i = 0; i < k; i++) {
                if (!s->u.s.n) break;
                sb_put(R, &b, s->u.s.p, s->u.s.n);
            }
        }
        return mk_sb(R, &b);
    }
    if (l->t == VT_STR && r->t == VT_STR && (is_in || not_in)) {
        int m = test_in(R, l, r);
        return mk_bool(R, is_in ? m : !m);
    }
    if (r->t == VT_OBJECT && (is_in || not_in)) {
        int m = test_in(R, l, r);
        return mk_bool(R, is_in ? m : !m);
    }
    fail(R, "unknown operator \"%s\" between %s and %s", op, type_name(l), type_name(r));
}

/* ---- filters and tests */

static const char *filter_alias(const char *id) {
    if (!strcmp(id, "count")) return "length";
    if (!strcmp(id, "d")) return "default";
    if (!strcmp(id, "e")) return "escape";
    if (!strcmp(id, "trim")) return "strip";
    return id;
}

static val *apply_filter(rt *R, env *E, const node *f, val *input) {
    args A = {0};
    A.ctx = E;
    const char *id;
    if (f->t == N_IDENT) {
        id = filter_alias(f->s);
        static const char *const coerce[] = {"capitalize", "lower", "replace", "strip", "title",
                                             "upper", "wordcount", NULL};
        if (input->t != VT_UNDEF && input->t != VT_STR)
            for (int i = 0; coerce[i]; i++)
                if (!strcmp(id, coerce[i])) { input = to_str(R, input); break; }
    } else if (f->t == N_CALL) {
        if (f->a->t != N_IDENT) fail(R, "filter callee must be an identifier");
        id = filter_alias(f->a->s);
        for (size_t i = 0; i < f->l3.n; i++) args_push(R, &A, eval(R, E, f->l3.v[i]));
    } else {
        fail(R, "invalid filter expression");
    }
    return call_func(R, try_builtin(R, id, input, 0), &A);
}

static val *eval_test(rt *R, env *E, const node *n) {
    val *input = eval(R, E, n->a);
    args A = {0};
    A.ctx = E;
    args_push(R, &A, input);
    const node *t = n->b;
    const char *id;
    if (t->t == N_IDENT) {
        id = t->s;
    } else if (t->t == N_CALL && t->a->t == N_IDENT) {
        id = t->a->s;
        for (size_t i = 0; i < t->l3.n; i++) args_push(R, &A, eval(R, E, t->l3.v[i]));
    } else {
        fail(R, "invalid test expression");
    }
    char name[96];
    snprintf(name, sizeof name, "test_is_%s", id);
    const builtin *b = find_builtin(global_builtins, name);
    if (!b) fail(R, "unknown test '%s'", id);
    mark_used(R, input, 0);
    mark_op(R, input, name);
    A.fname = b->name;
    val *res = b->fn(R, &A);
    return n->flag ? mk_bool(R, !as_bool(R, res)) : res;
}

static val *eval_unary(rt *R, env *E, const node *n) {
    val *v = eval(R, E, n->a);
    if (!strcmp(n->s, "not")) return mk_bool(R, !as_bool(R, v));
    if (!strcmp(n->s, "-")) {
        if (v->t == VT_INT) return mk_int(R, (int64_t)(0 - (uint64_t)v->u.i));
        if (v->t == VT_FLOAT) return mk_float(R, -v->u.f);
        fail(R, "unary - operator requires a numeric operand");
    }
    if (is_num(v)) return v;
    fail(R, "unary + operator requires a numeric operand");
}

static val *eval_call(rt *R, env *E, const node *n) {
    args A = {0};
    A.ctx = E;
    for (size_t i = 0; i < n->l3.n; i++) args_push(R, &A, eval(R, E, n->l3.v[i]));
    val *f = eval(R, E, n->a);
    if (f->t != VT_FUNC) fail(R, "callee is not a function: got %s", type_name(f));
    return call_func(R, f, &A);
}

static val *eval(rt *R, env *E, const node *n) {
    switch (n->t) {
    case N_TEXT: case N_STR: return mk_strn(R, n->s, n->sn);
    case N_INT: return mk_int(R, n->i);
    case N_FLOAT: return mk_float(R, n->f);
    case N_IDENT: {
        val *v = env_get(E, n->s);
        if (v && v->t != VT_UNDEF) {
            mark_used(R, v, 0);
            return v;
        }
        const builtin *b = find_builtin(global_builtins, n->s);
        if (b) return mk_func(R, b->name, b->fn, NULL);
        return mk_undef(R, n->s);
    }
    case N_ARRAY: case N_TUPLE: {
        val *a = mk_arr(R, n->t == N_ARRAY ? VT_ARRAY : VT_TUPLE);
        for (size_t i = 0; i < n->l1.n; i++) arr_push(R, a, eval(R, E, n->l1.v[i]));
        return a;
    }
    case N_OBJECT: {
        val *o = mk_obj(R);
        for (size_t i = 0; i < n->l1.n; i++) {
            val *k = eval(R, E, n->l1.v[i]);
            val *v = eval(R, E, n->l2.v[i]);
            obj_set(R, o, k, v);
        }
        return o;
    }
    case N_MEMBER: return eval_member(R, E, n);
    case N_CALL: return eval_call(R, E, n);
    case N_BINARY: return eval_binary(R, E, n);
    case N_FILTER: return apply_filter(R, E, n->b, eval(R, E, n->a));
    case N_SELECT: {
        val *t = eval(R, E, n->b);
        if (!as_bool(R, t)) return mk_undef(R, NULL);
        return eval(R, E, n->a);
    }
    case N_TEST: return eval_test(R, E, n);
    case N_UNARY: return eval_unary(R, E, n);
    case N_TERNARY: return as_bool(R, eval(R, E, n->a)) ? eval(R, E, n->b) : eval(R, E, n->c);
    case N_KWARG: {
        if (n->a->t != N_IDENT) fail(R, "keyword argument key must be an identifier");
        val *k = mk(R, VT_KWARG);
        k->u.kw.key = n->a->s;
        k->u.kw.v = eval(R, E, n->b);
        return k;
    }
    case N_BLANK: case N_COMMENT: case N_NOOP: return mk_undef(R, NULL);
    case N_SLICE: fail(R, "a slice must be used as a subscript");
    case N_SPREAD: fail(R, "argument unpacking (*args) is not supported");
    default: fail(R, "statement used as an expression");
    }
}

/* ---- statements */

static void set_target(rt *R, env *E, const node *target, val *rhs) {
    if (target->t == N_IDENT) {
        env_set(R, E, target->s, rhs);
    } else if (target->t == N_TUPLE) {
        if (!is_arr(rhs)) fail(R, "cannot unpack non-iterable type in set: %s", type_name(rhs));
        if (rhs->u.a.n != target->l1.n)
            fail(R, "too %s items to unpack in set", target->l1.n > rhs->u.a.n ? "few" : "many");
        for (size_t i = 0; i < target->l1.n; i++) {
            if (target->l1.v[i]->t != N_IDENT) fail(R, "cannot unpack to a non-identifier in set");
            env_set(R, E, target->l1.v[i]->s, rhs->u.a.v[i]);
        }
    } else if (target->t == N_MEMBER) {
        if (target->flag) fail(R, "cannot assign to a computed member");
        if (target->b->t != N_IDENT) fail(R, "cannot assign to a member with a non-identifier property");
        val *obj = eval(R, E, target->a);
        if (obj->t != VT_OBJECT) fail(R, "cannot assign to a member of a non-object");
        obj_set_s(R, obj, target->b->s, rhs);
    } else {
        fail(R, "invalid left-hand side of set");
    }
}

/* binds the loop variable(s) of one item */
static void bind_loopvar(rt *R, env *E, const node *lv, val *item, int over_object) {
    if (lv->t == N_IDENT) {
        env_set(R, E, lv->s, over_object ? item->u.a.v[0] : item);
        return;
    }
    for (size_t j = 0; j < lv->l1.n; j++) {
        if (lv->l1.v[j]->t != N_IDENT) fail(R, "cannot unpack into a non-identifier");
        env_set(R, E, lv->l1.v[j]->s, item->u.a.v[j]);
    }
}

static void exec_for(rt *R, env *E, const node *n, sbuf *out) {
    env *scope = env_copy(R, E);
    const node *iter = n->b, *test = NULL, *lv = n->a;
    if (iter->t == N_SELECT) {
        test = iter->b;
        iter = iter->a;
    }
    val *it = eval(R, scope, iter);
    mark_used(R, it, 0);
    mark_op(R, it, "array_access");
    if (it->t == VT_UNDEF) it = mk_arr(R, VT_ARRAY);
    if (!is_arr(it) && it->t != VT_OBJECT)
        fail(R, "expected an iterable or object in for loop, got %s", type_name(it));
    int over_obj = it->t == VT_OBJECT;
    size_t total = over_obj ? it->u.o.n : it->u.a.n;
    val **items = ralloc(R, mul_sz(R, total + 1, sizeof *items));   /* what the loop binds */
    val **cur = ralloc(R, mul_sz(R, total + 1, sizeof *cur));       /* loop.previtem/nextitem */
    size_t nf = 0;
    for (size_t i = 0; i < total; i++) {
        val *item;
        if (over_obj) {
            item = mk_arr(R, VT_TUPLE);
            arr_push(R, item, it->u.o.k[i]);
            arr_push(R, item, it->u.o.v[i]);
        } else {
            item = it->u.a.v[i];
        }
        val *current = over_obj && lv->t == N_IDENT ? item->u.a.v[0] : item;
        if (lv->t == N_TUPLE) {
            if (!is_arr(item)) fail(R, "cannot unpack non-iterable type: %s", type_name(item));
            if (lv->l1.n != item->u.a.n)
                fail(R, "too %s items to unpack", lv->l1.n > item->u.a.n ? "few" : "many");
        } else if (lv->t != N_IDENT) {
            fail(R, "invalid loop variable");
        }
        if (test) {
            step(R);
            env *ls = env_copy(R, scope);
            bind_loopvar(R, ls, lv, item, over_obj);
            if (!as_bool(R, eval(R, ls, test))) continue;
        }
        items[nf] = item;
        cur[nf] = current;
        nf++;
    }

    jmp_buf jb;
    jmp_buf *saved = R->on_signal;
    int saved_calls = R->calls;
    volatile int no_iter = 1;
    volatile size_t i;
    R->on_signal = &jb;
    for (i = 0; i < nf; i++) {
        step(R);
        val *loop = mk_obj(R);
        loop->no_builtins = 1;
        obj_set_s(R, loop, "index", mk_int(R, (int64_t)i + 1));
        obj_set_s(R, loop, "index0", mk_int(R, (int64_t)i));
        obj_set_s(R, loop, "revindex", mk_int(R, (int64_t)(nf - i)));
        obj_set_s(R, loop, "revindex0", mk_int(R, (int64_t)(nf - i - 1)));
        obj_set_s(R, loop, "first", mk_bool(R, i == 0));
        obj_set_s(R, loop, "last", mk_bool(R, i == nf - 1));
        obj_set_s(R, loop, "length", mk_int(R, (int64_t)nf));
        obj_set_s(R, loop, "previtem", i > 0 ? cur[i - 1] : mk_undef(R, "previtem"));
        obj_set_s(R, loop, "nextitem", i + 1 < nf ? cur[i + 1] : mk_undef(R, "nextitem"));
        env_set(R, scope, "loop", loop);
        bind_loopvar(R, scope, lv, items[i], over_obj);
        volatile size_t k;
        volatile int sig = 0;
        for (k = 0; k < n->l1.n; k++) {
            size_t mark = out->n;
            int mparts = out->parts;
            if (setjmp(jb)) {
                out->n = mark;                /* the statement that raised loses its output */
                if (out->p) out->p[mark] = 0;
                out->parts = mparts;
                R->calls = saved_calls;
                R->on_signal = &jb;
                sig = R->signal;
                R->signal = 0;
                break;
            }
            exec(R, scope, n->l1.v[k], out);
        }
        if (sig == 1) break;
        if (sig == 2) continue;
        no_iter = 0;
    }
    R->on_signal = saved;
    if (no_iter) exec_list(R, E, &n->l2, out);
}

static void exec(rt *R, env *E, const node *n, sbuf *out) {
    step(R);
    switch (n->t) {
    case N_TEXT:
        sb_put(R, out, n->s, n->sn);
        out->parts++;
        break;
    case N_COMMENT: case N_NOOP:
        break;
    case N_IF:
        exec_list(R, E, as_bool(R, eval(R, E, n->a)) ? &n->l1 : &n->l2, out);
        break;
    case N_FOR:
        exec_for(R, E, n, out);
        break;
    case N_BREAK: case N_CONTINUE:
        if (!R->on_signal) fail(R, "%s outside a loop", n->t == N_BREAK ? "break" : "continue");
        R->signal = n->t == N_BREAK ? 1 : 2;
        longjmp(*R->on_signal, 1);
    case N_SET:
        set_target(R, E, n->a, n->b ? eval(R, E, n->b) : exec_capture(R, E, &n->l1));
        break;
    case N_MACRO: {
        if (n->a->t != N_IDENT) fail(R, "macro name must be an identifier");
        val *f = mk(R, VT_FUNC);
        f->u.fn.kind = FN_MACRO;
        f->u.fn.name = n->a->s;
        f->u.fn.def = n;
        env_set(R, E, n->a->s, f);
        break;
    }
    case N_CALLBLOCK: {
        const node *call = n->a;
        val *callee = eval(R, E, call->a);
        if (callee->t != VT_FUNC) fail(R, "callee is not a function: got %s", type_name(callee));
        val *caller = mk(R, VT_FUNC);
        caller->u.fn.kind = FN_CALLER;
        caller->u.fn.name = "caller";
        caller->u.fn.def = n;
        caller->u.fn.cap = env_copy(R, E);
        env *C = env_copy(R, E);
        env_set(R, C, "caller", caller);
        args A = {0};
        A.ctx = C;
        for (size_t i = 0; i < call->l3.n; i++) args_push(R, &A, eval(R, E, call->l3.v[i]));
        gather(R, out, call_func(R, callee, &A));
        break;
    }
    case N_FILTERBLOCK: {
        val *body = exec_capture(R, E, &n->l1);
        gather(R, out, apply_filter(R, E, n->a, body));
        break;
    }
    default:
        gather(R, out, eval(R, E, n));
        break;
    }
}

/* -------------------------------------------------------------- builtins */

#define A0 (A->v[0])

static val *empty_arr(rt *R, args *A) { (void)A; return mk_arr(R, VT_ARRAY); }
static val *empty_str(rt *R, args *A) { (void)A; return mk_str(R, ""); }
static val *empty_int(rt *R, args *A) { (void)A; return mk_int(R, 0); }
static val *empty_undef(rt *R, args *A) { (void)A; return mk_undef(R, NULL); }

/* default(value, default_value, boolean=false): none counts as missing too */
static val *f_default(rt *R, args *A) {
    ensure_count(R, A, 2, 3);
    int check_bool = as_bool(R, kwarg_or_pos(R, A, "boolean", 2));
    val *in = get_pos(R, A, 0);
    int missing = check_bool ? !as_bool(R, in) : (in->t == VT_UNDEF || in->t == VT_NONE);
    return missing ? get_pos(R, A, 1) : in;
}

/* tojson(value, ensure_ascii, indent, separators, sort_keys) */
static void ensure_ascii(rt *R, sbuf *out, const char *s, size_t n) {
    int in_str = 0, esc = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (!in_str) { sb_putc(R, out, (char)c); in_str = c == '"'; i++; continue; }
        if (esc) { sb_putc(R, out, (char)c); esc = 0; i++; continue; }
        if (c == '\\') { sb_putc(R, out, '\\'); esc = 1; i++; continue; }
        if (c == '"') { sb_putc(R, out, '"'); in_str = 0; i++; continue; }
        if (c < 0x80) { sb_putc(R, out, (char)c); i++; continue; }
        uint32_t cp = 0;
        size_t len = c >= 0xf0 && c < 0xf8 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
        int ok = len > 0 && i + len <= n && c < 0xf8;
        if (ok) {
            cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
            for (size_t j = 1; j < len; j++) {
                unsigned char d = (unsigned char)s[i + j];
                if ((d & 0xc0) != 0x80) { ok = 0; break; }
                cp = (cp << 6) | (d & 0x3f);
            }
        }
        if (!ok) { sb_puts(R, out, "\\ufffd"); i++; continue; }
        if (cp <= 0xffff) {
            sb_printf(R, out, "\\u%04x", cp);
        } else {
            cp -= 0x10000;
            sb_printf(R, out, "\\u%04x\\u%04x", 0xd800 + ((cp >> 10) & 0x3ff), 0xdc00 + (cp & 0x3ff));
        }
        i += len;
    }
}

static val *f_tojson(rt *R, args *A) {
    ensure_count(R, A, 1, 5);
    val *ascii = kwarg_or_pos(R, A, "ensure_ascii", 1);
    val *ind = kwarg_or_pos(R, A, "indent", 2);
    val *seps = kwarg_or_pos(R, A, "separators", 3);
    val *sort = kwarg_or_pos(R, A, "sort_keys", 4);
    mark_used(R, get_pos(R, A, 0), 1);
    int indent = ind->t == VT_INT ? (int)ind->u.i : -1;
    if (ind->t == VT_INT && (ind->u.i > 64 || ind->u.i < -1)) fail(R, "tojson: indent too large");
    if (as_bool(R, sort)) fail(R, "tojson sort_keys=true is not implemented (as in llama.cpp)");
    const char *isep = indent < 0 ? ", " : ",", *ksep = ": ";
    if (is_arr(seps)) {
        if (seps->u.a.n > 0) isep = to_str(R, seps->u.a.v[0])->u.s.p;
        if (seps->u.a.n > 1) ksep = to_str(R, seps->u.a.v[1])->u.s.p;
    }
    sbuf b = {0};
    put_json(R, &b, get_pos(R, A, 0), 0, indent, isep, ksep);
    if (as_bool(R, ascii)) {
        sbuf c = {0};
        ensure_ascii(R, &c, b.p, b.n);
        return mk_sb(R, &c);
    }
    return mk_sb(R, &b);
}

/* ---- globals */

static val *g_raise(rt *R, args *A) {
    ensure_vals(R, A, "S");
    fail(R, "template raised an exception: %s", A0->u.s.p);
}

static val *g_namespace(rt *R, args *A) {
    val *o = mk_obj(R);
    for (size_t i = 0; i < A->n; i++) {
        if (A->v[i]->t != VT_KWARG) fail(R, "namespace() arguments must be kwargs");
        obj_set_s(R, o, A->v[i]->u.kw.key, A->v[i]->u.kw.v);
    }
    return o;
}

static val *g_strftime_now(rt *R, args *A) {
    ensure_vals(R, A, "S");
    char buf[100];
    struct tm tm;
    localtime_r(&R->now, &tm);
    size_t n = strftime(buf, sizeof buf, A0->u.s.p, &tm);
    if (!n) fail(R, "strftime_now: failed to format time");
    return mk_strn(R, buf, n);
}

static val *g_range(rt *R, args *A) {
    ensure_count(R, A, 1, 3);
    ensure_vals(R, A, "Iii");
    int64_t start = 0, stop, stepv = 1;
    if (A->n == 1) {
        stop = as_int(R, A0);
    } else {
        start = as_int(R, A0);
        stop = as_int(R, A->v[1]);
        if (A->n == 3) stepv = as_int(R, A->v[2]);
    }
    if (stepv == 0) fail(R, "range() step argument must not be zero");
    val *out = mk_arr(R, VT_ARRAY);
    for (int64_t i = start; stepv > 0 ? i < stop : i > stop; i += stepv) {
        step(R);
        arr_push(R, out, mk_int(R, i));
        if ((stepv > 0 && i > INT64_MAX - stepv) || (stepv < 0 && i < INT64_MIN - stepv)) break;
    }
    return out;
}

/* value_compare: the comparisons tests and sort use (not `==`) */
enum { CMP_EQ, CMP_GE, CMP_GT, CMP_LT, CMP_NE };
static int value_compare(rt *R, val *a, val *b, int op) {
    if (is_num(a) && is_num(b)) {
        double x = v_flt(a), y = v_flt(b);
        switch (op) {
        case CMP_EQ: return x == y;
        case CMP_GE: return x >= y;
        case CMP_GT: return x > y;
        case CMP_LT: return x < y;
        default: return x != y;
        }
    }
    if ((b->t == VT_STR && is_num(a)) || (a->t == VT_STR && is_num(b)) ||
        (a->t == VT_STR && b->t == VT_STR)) {
        val *x = to_str(R, a), *y = to_str(R, b);
        size_t m = x->u.s.n < y->u.s.n ? x->u.s.n : y->u.s.n;
        int c = memcmp(x->u.s.p, y->u.s.p, m);
        if (c == 0) c = x->u.s.n < y->u.s.n ? -1 : x->u.s.n > y->u.s.n;
        switch (op) {
        case CMP_EQ: return c == 0;
        case CMP_GE: return c >= 0;
        case CMP_GT: return c > 0;
        case CMP_LT: return c < 0;
        default: return c != 0;
        }
    }
    if (a->t == VT_BOOL && b->t == VT_BOOL) {
        if (op == CMP_EQ) return a->u.b == b->u.b;
        if (op == CMP_NE) return a->u.b != b->u.b;
        fail(R, "unsupported comparison operator for bool type");
    }
    return 0;
}

static val *t_cmp(rt *R, args *A, int op) {
    ensure_count(R, A, 2, 2);
    return mk_bool(R, value_compare(R, A0, A->v[1], op));
}
static val *t_eq(rt *R, args *A) { return t_cmp(R, A, CMP_EQ); }
static val *t_ge(rt *R, args *A) { return t_cmp(R, A, CMP_GE); }
static val *t_gt(rt *R, args *A) { return t_cmp(R, A, CMP_GT); }
static val *t_lt(rt *R, args *A) { return t_cmp(R, A, CMP_LT); }
static val *t_ne(rt *R, args *A) { return t_cmp(R, A, CMP_NE); }

static val *t_type(rt *R, args *A, int t1, int t2, int t3) {
    ensure_count(R, A, 1, 999);
    int t = A0->t;
    if (t == VT_TUPLE && (t1 == VT_ARRAY || t2 == VT_ARRAY)) t = VT_ARRAY;
    return mk_bool(R, t == t1 || t == t2 || t == t3);
}
static val *t_boolean(rt *R, args *A) { return t_type(R, A, VT_BOOL, -1, -1); }
static val *t_callable(rt *R, args *A) { return t_type(R, A, VT_FUNC, -1, -1); }
static val *t_string(rt *R, args *A) { return t_type(R, A, VT_STR, -1, -1); }
static val *t_integer(rt *R, args *A) { return t_type(R, A, VT_INT, -1, -1); }
static val *t_float(rt *R, args *A) { return t_type(R, A, VT_FLOAT, -1, -1); }
static val *t_number(rt *R, args *A) { return t_type(R, A, VT_INT, VT_FLOAT, -1); }
static val *t_iterable(rt *R, args *A) { return t_type(R, A, VT_ARRAY, VT_STR, VT_UNDEF); }
static val *t_mapping(rt *R, args *A) { return t_type(R, A, VT_OBJECT, -1, -1); }
static val *t_none(rt *R, args *A) { return t_type(R, A, VT_NONE, -1, -1); }
static val *t_undefined(rt *R, args *A) { return t_type(R, A, VT_UNDEF, -1, -1); }
static val *t_defined(rt *R, args *A) { ensure_count(R, A, 1, 999); return mk_bool(R, A0->t != VT_UNDEF); }
static val *t_odd(rt *R, args *A) { ensure_vals(R, A, "I"); return mk_bool(R, A0->u.i % 2 != 0); }
static val *t_even(rt *R, args *A) { ensure_vals(R, A, "I"); return mk_bool(R, A0->u.i % 2 == 0); }
static val *t_false(rt *R, args *A) { ensure_count(R, A, 1, 999); return mk_bool(R, A0->t == VT_BOOL && !A0->u.b); }
static val *t_true(rt *R, args *A) { ensure_count(R, A, 1, 999); return mk_bool(R, A0->t == VT_BOOL && A0->u.b); }
static val *t_divisibleby(rt *R, args *A) {
    ensure_vals(R, A, "II");
    if (A->v[1]->u.i == 0) fail(R, "divisibleby(0)");
    if (A->v[1]->u.i == -1) return mk_bool(R, 1);
    return mk_bool(R, A0->u.i % A->v[1]->u.i == 0);
}
static int str_all(const val *v, int (*bad)(int)) {
    for (size_t i = 0; i < v->u.s.n; i++)
        if (bad((unsigned char)v->u.s.p[i])) return 0;
    return 1;
}
static val *t_lower(rt *R, args *A) { ensure_vals(R, A, "S"); return mk_bool(R, str_all(A0, isupper)); }
static val *t_upper(rt *R, args *A) { ensure_vals(R, A, "S"); return mk_bool(R, str_all(A0, islower)); }
static val *t_in(rt *R, args *A) { ensure_count(R, A, 2, 999); return mk_bool(R, test_in(R, A0, A->v[1])); }
static val *t_test(rt *R, args *A) {
    ensure_vals(R, A, "S");
    char name[96];
    snprintf(name, sizeof name, "test_is_%s", A0->u.s.p);
    return mk_bool(R, find_builtin(global_builtins, name) != NULL);
}
static val *t_unimpl(rt *R, args *A) { fail(R, "test '%s' is not implemented (as in llama.cpp)", A->fname); }

const builtin global_builtins[] = {
    {"raise_exception", g_raise}, {"namespace", g_namespace}, {"strftime_now", g_strftime_now},
    {"range", g_range}, {"tojson", f_tojson},
    {"test_is_boolean", t_boolean}, {"test_is_callable", t_callable}, {"test_is_odd", t_odd},
    {"test_is_even", t_even}, {"test_is_false", t_false}, {"test_is_true", t_true},
    {"test_is_divisibleby", t_divisibleby}, {"test_is_string", t_string},
    {"test_is_integer", t_integer}, {"test_is_float", t_float}, {"test_is_number", t_number},
    {"test_is_iterable", t_iterable}, {"test_is_sequence", t_iterable},
    {"test_is_mapping", t_mapping}, {"test_is_lower", t_lower}, {"test_is_upper", t_upper},
    {"test_is_none", t_none}, {"test_is_defined", t_defined}, {"test_is_undefined", t_undefined},
    {"test_is_eq", t_eq}, {"test_is_equalto", t_eq}, {"test_is_ge", t_ge}, {"test_is_gt", t_gt},
    {"test_is_greaterthan", t_gt}, {"test_is_lt", t_lt}, {"test_is_lessthan", t_lt},
    {"test_is_ne", t_ne}, {"test_is_in", t_in}, {"test_is_test", t_test},
    {"test_is_sameas", t_unimpl}, {"test_is_escaped", t_unimpl}, {"test_is_filter", t_unimpl},
    {NULL, NULL}
};

/* ---- numbers and booleans */

static val *n_abs(rt *R, args *A) {
    ensure_count(R, A, 1, 999);
    if (A0->t == VT_INT) return mk_int(R, A0->u.i < 0 ? (int64_t)(0 - (uint64_t)A0->u.i) : A0->u.i);
    ensure_vals(R, A, "F");
    return mk_float(R, A0->u.f < 0 ? -A0->u.f : A0->u.f);
}
static val *n_int(rt *R, args *A) {
    ensure_count(R, A, 1, 999);
    if (A0->t == VT_BOOL) return mk_int(R, A0->u.b);
    return mk_int(R, v_int(A0));
}
static val *n_float(rt *R, args *A) {
    ensure_count(R, A, 1, 999);
    if (A0->t == VT_INT) return mk_float(R, (double)A0->u.i);
    if (A0->t == VT_BOOL) return mk_float(R, A0->u.b ? 1.0 : 0.0);
    return mk_float(R, A0->u.f);
}
static val *b_string(rt *R, args *A) {
    ensure_vals(R, A, "B");
    return mk_str(R, A0->u.b ? "True" : "False");
}

static const builtin int_builtins[] = {
    {"default", f_default}, {"abs", n_abs}, {"int", n_int}, {"float", n_float},
    {"safe", f_tojson}, {"string", f_tojson}, {"tojson", f_tojson}, {NULL, NULL}
};
static const builtin bool_builtins[] = {
    {"default", f_default}, {"int", n_int}, {"float", n_float}, {"safe", b_string},
    {"string", b_string}, {"tojson", f_tojson}, {NULL, NULL}
};

/* ---- strings */

static val *str_like(rt *R, val *src, const char *p, size_t n) {
    val *v = mk_strn(R, p, n);
    (void)src;
    return v;
}

static val *s_case(rt *R, args *A, int (*fn)(int)) {
    ensure_vals(R, A, "S");
    val *v = mk_strn(R, A0->u.s.p, A0->u.s.n);
    for (size_t i = 0; i < v->u.s.n; i++) v->u.s.p[i] = (char)fn((unsigned char)v->u.s.p[i]);
    v->multipart = A0->multipart;
    return v;
}
static val *s_upper(rt *R, args *A) { return s_case(R, A, toupper); }
static val *s_lower(rt *R, args *A) { return s_case(R, A, tolower); }

static val *s_title_cap(rt *R, args *A, int title) {
    ensure_vals(R, A, "S");
    if (A0->multipart)
        fail(R, "%s of a string built from several parts is not supported (llama.cpp applies it per part)",
             title ? "title" : "capitalize");
    val *v = mk_strn(R, A0->u.s.p, A0->u.s.n);
    char *p = v->u.s.p;
    if (title) {
        int next = 1;
        for (size_t i = 0; i < v->u.s.n; i++) {
            unsigned char c = (unsigned char)p[i];
            if (isspace(c)) next = 1;
            else if (next) { p[i] = (char)toupper(c); next = 0; }
            else p[i] = (char)tolower(c);
        }
    } else if (v->u.s.n) {
        p[0] = (char)toupper((unsigned char)p[0]);
        for (size_t i = 1; i < v->u.s.n; i++) p[i] = (char)tolower((unsigned char)p[i]);
    }
    return v;
}
static val *s_title(rt *R, args *A) { return s_title_cap(R, A, 1); }
static val *s_capitalize(rt *R, args *A) { return s_title_cap(R, A, 0); }

static val *s_strip_gen(rt *R, args *A, int left, int right) {
    val *chars = kwarg_or_pos(R, A, "chars", 1);
    const char *set = NULL;
    size_t setn = 0;
    if (chars->t != VT_UNDEF) {
        val *c = to_str(R, chars);
        set = c->u.s.p;
        setn = c->u.s.n;
    }
    const char *p = A0->u.s.p;
    size_t a = 0, b = A0->u.s.n;
#define STRIP_M(c) (set ? memchr(set, (c), setn) != NULL : isspace((unsigned char)(c)))
    if (left) while (a < b && STRIP_M(p[a])) a++;
    if (right) while (b > a && STRIP_M(p[b - 1])) b--;
#undef STRIP_M
    val *v = mk_strn(R, p + a, b - a);
    v->multipart = A0->multipart;
    return v;
}
static val *s_strip(rt *R, args *A) {
    if (A->n < 1 || A0->t != VT_STR) fail(R, "strip() first argument must be a string");
    return s_strip_gen(R, A, 1, 1);
}
static val *s_lstrip(rt *R, args *A) { ensure_vals(R, A, "S"); return s_strip_gen(R, A, 1, 0); }
static val *s_rstrip(rt *R, args *A) { ensure_vals(R, A, "S"); return s_strip_gen(R, A, 0, 1); }
static val *s_length(rt *R, args *A) { ensure_vals(R, A, "S"); return mk_int(R, (int64_t)A0->u.s.n); }
static val *s_startswith(rt *R, args *A) {
    ensure_vals(R, A, "SS");
    val *p = A->v[1];
    return mk_bool(R, A0->u.s.n >= p->u.s.n && !memcmp(A0->u.s.p, p->u.s.p, p->u.s.n));
}
static val *s_endswith(rt *R, args *A) {
    ensure_vals(R, A, "SS");
    val *p = A->v[1];
    return mk_bool(R, A0->u.s.n >= p->u.s.n &&
                          !memcmp(A0->u.s.p + A0->u.s.n - p->u.s.n, p->u.s.p, p->u.s.n));
}
static val *s_split_gen(rt *R, args *A, int rev) {
    ensure_count(R, A, 1, 3);
    if (A0->t != VT_STR) fail(R, "split() first argument must be a string");
    val *d = A->n > 1 ? to_str(R, A->v[1]) : mk_str(R, " ");
    if (!d->u.s.n) fail(R, "empty separator");
    int64_t maxsplit = A->n > 2 ? as_int(R, A->v[2]) : -1;
    const char *p = A0->u.s.p;
    size_t n = A0->u.s.n, dn = d->u.s.n;
    val *out = mk_arr(R, VT_ARRAY);
    if (!rev) {
        size_t s = 0;
        const char *hit;
        while (maxsplit != 0 && (hit = memmem(p + s, n - s, d->u.s.p, dn)) != NULL) {
            step(R);
            arr_push(R, out, mk_strn(R, p + s, (size_t)(hit - (p + s))));
            s = (size_t)(hit - p) + dn;
            maxsplit--;
        }
        arr_push(R, out, mk_strn(R, p + s, n - s));
        return out;
    }
    size_t e = n;
    while (maxsplit != 0) {
        const char *hit = NULL;
        for (size_t i = e >= dn ? e - dn + 1 : 0; i-- > 0;)
            if (!memcmp(p + i, d->u.s.p, dn)) { hit = p + i; break; }
        if (!hit) break;
        step(R);
        size_t pos = (size_t)(hit - p);
        arr_push(R, out, mk_strn(R, p + pos + dn, e - pos - dn));
        e = pos;
        maxsplit--;
    }
    arr_push(R, out, mk_strn(R, p, e));
    for (size_t i = 0, j = out->u.a.n - 1; i < j; i++, j--) {
        val *t = out->u.a.v[i];
        out->u.a.v[i] = out->u.a.v[j];
        out->u.a.v[j] = t;
    }
    return out;
}
static val *s_split(rt *R, args *A) { return s_split_gen(R, A, 0); }
static val *s_rsplit(rt *R, args *A) { return s_split_gen(R, A, 1); }

static val *s_replace(rt *R, args *A) {
    ensure_vals(R, A, "SSSi");
    if (A->n > 3 && as_int(R, A->v[3]) > 0)
        fail(R, "replace with a count argument is not implemented (as in llama.cpp)");
    val *s = A0, *o = A->v[1], *w = A->v[2];
    if (o->u.s.n == w->u.s.n && !memcmp(o->u.s.p, w->u.s.p, o->u.s.n))
        return mk_strn(R, s->u.s.p, s->u.s.n);
    sbuf b = {0};
    if (!o->u.s.n) {
        sb_put(R, &b, w->u.s.p, w->u.s.n);
        for (size_t i = 0; i < s->u.s.n; i++) {
            sb_putc(R, &b, s->u.s.p[i]);
            sb_put(R, &b, w->u.s.p, w->u.s.n);
        }
    } else {
        size_t i = 0;
        const char *hit;
        while ((hit = memmem(s->u.s.p + i, s->u.s.n - i, o->u.s.p, o->u.s.n)) != NULL) {
            size_t at = (size_t)(hit - s->u.s.p);
            sb_put(R, &b, s->u.s.p + i, at - i);
            sb_put(R, &b, w->u.s.p, w->u.s.n);
            i = at + o->u.s.n;
        }
        sb_put(R, &b, s->u.s.p + i, s->u.s.n - i);
    }
    return mk_sb(R, &b);
}

static val *s_format(rt *R, args *A) {
    if (A->n < 1 || A0->t != VT_STR) fail(R, "format() first argument must be a string");
    const char *p = A0->u.s.p;
    size_t n = A0->u.s.n, ai = 1;
    sbuf b = {0};
    size_t lit = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '{') continue;
        if (i + 1 >= n || p[i + 1] != '}') fail(R, "format() only supports '{}' placeholders");
        sb_put(R, &b, p + lit, i - lit);
        if (i > lit) b.parts++;
        val *x = to_str(R, get_pos(R, A, ai++));
        sb_put(R, &b, x->u.s.p, x->u.s.n);
        if (x->u.s.n) b.parts += x->multipart ? 2 : 1;
        i++;
        lit = i + 1;
    }
    sb_put(R, &b, p + lit, n - lit);
    if (n > lit) b.parts++;
    return mk_sb(R, &b);
}

static val *s_int(rt *R, args *A) {
    val *in = get_pos(R, A, 0);
    val *def = kwarg_or_pos(R, A, "default", 1);
    val *bv = kwarg_or_pos(R, A, "base", 2);
    int base = bv->t == VT_UNDEF ? 10 : (int)as_int(R, bv);
    if (base != 0 && (base < 2 || base > 36)) fail(R, "int() base must be 0 or between 2 and 36");
    if (in->t != VT_STR) fail(R, "int() first argument must be a string");
    char *end;
    errno = 0;
    long v = strtol(in->u.s.p, &end, base);
    if (end == in->u.s.p || errno == ERANGE || v > INT_MAX || v < INT_MIN)
        return mk_int(R, def->t == VT_UNDEF ? 0 : as_int(R, def));
    return mk_int(R, v);
}
static val *s_float(rt *R, args *A) {
    ensure_vals(R, A, "S");
    val *def = kwarg_or_pos(R, A, "default", 1);
    char *end;
    errno = 0;
    double v = strtod(A0->u.s.p, &end);
    if (end == A0->u.s.p || errno == ERANGE)
        return mk_float(R, def->t == VT_UNDEF ? 0.0 : as_float(R, def));
    return mk_float(R, v);
}
static val *s_string(rt *R, args *A) {
    ensure_vals(R, A, "S");
    val *v = mk_strn(R, A0->u.s.p, A0->u.s.n);
    v->multipart = A0->multipart;
    return v;
}
static val *s_safe(rt *R, args *A) { ensure_vals(R, A, "S"); return A0; }
static val *s_join(rt *R, args *A) { (void)A; fail(R, "join on a string is not implemented (as in llama.cpp)"); }

/* Python-style slice bounds, as llama.cpp's slice() computes them */
static size_t slice_idx(int64_t len, int64_t start, int64_t stop, int64_t stepv, int64_t *out, size_t cap) {
    int64_t dir = stepv > 0 ? 1 : stepv < 0 ? -1 : 0, a, b;
    if (dir >= 0) {
        a = start < 0 ? (len + start > 0 ? len + start : 0) : (start < len ? start : len);
        b = stop < 0 ? (len + stop > 0 ? len + stop : 0) : (stop < len ? stop : len);
    } else {
        a = start < 0 ? (len + start > 0 ? len + start : 0) : (start < len - 1 ? start : len - 1);
        b = stop < -1 ? (len + stop > -1 ? len + stop : -1) : (stop < len - 1 ? stop : len - 1);
    }
    size_t n = 0;
    if (dir == 0) return 0;
    for (int64_t i = a; dir * i < dir * b; i += stepv)
        if (i >= 0 && i < len && n < cap) out[n++] = i;
    return n;
}

static void slice_args(rt *R, args *A, int64_t *start, int64_t *stop, int64_t *stepv) {
    ensure_count(R, A, 1, 4);
    val *a0 = get_pos(R, A, 1);
    val *a1 = get_pos_d(A, 2, NULL), *a2 = get_pos_d(A, 3, NULL);
    *stepv = 1;
    if (A->n == 2) { *start = 0; *stop = as_int(R, a0); }
    else if (A->n == 3) { *start = as_int(R, a0); *stop = as_int(R, a1); }
    else { *start = as_int(R, a0); *stop = as_int(R, a1); *stepv = as_int(R, a2); }
    if (*stepv == 0) fail(R, "slice step cannot be zero");
}

static val *s_slice(rt *R, args *A) {
    ensure_count(R, A, 1, 4);
    ensure_vals(R, A, "SIii");
    int64_t st, sp, stp;
    slice_args(R, A, &st, &sp, &stp);
    size_t len = A0->u.s.n;
    int64_t *idx = ralloc(R, mul_sz(R, len + 1, sizeof *idx));
    size_t n = slice_idx((int64_t)len, st, sp, stp, idx, len);
    char *buf = ralloc(R, n + 1);
    for (size_t i = 0; i < n; i++) buf[i] = A0->u.s.p[idx[i]];
    return str_like(R, A0, buf, n);
}

static val *s_indent(rt *R, args *A) {
    ensure_count(R, A, 1, 4);
    val *in = get_pos(R, A, 0);
    val *w = kwarg_or_pos(R, A, "width", 1);
    int first = as_bool(R, kwarg_or_pos(R, A, "first", 2));
    int blank = as_bool(R, kwarg_or_pos(R, A, "blank", 3));
    if (in->t != VT_STR) fail(R, "indent() first argument must be a string");
    sbuf ind = {0};
    if (w->t == VT_INT) {
        if (w->u.i > 4096) fail(R, "indent width too large");
        for (int64_t i = 0; i < w->u.i; i++) sb_putc(R, &ind, ' ');
    } else if (w->t == VT_STR) {
        sb_put(R, &ind, w->u.s.p, w->u.s.n);
    } else {
        sb_puts(R, &ind, "    ");
    }
    sbuf b = {0};
    const char *p = in->u.s.p;
    size_t n = in->u.s.n, s = 0;
    while (s < n) {                         /* std::getline over the lines */
        const char *nlp = memchr(p + s, '\n', n - s);
        size_t e = nlp ? (size_t)(nlp - p) : n;
        int empty_out = b.n == 0;
        if (!empty_out) sb_putc(R, &b, '\n');
        if (empty_out ? first : (e > s || blank)) sb_put(R, &b, ind.p, ind.n);
        sb_put(R, &b, p + s, e - s);
        s = nlp ? e + 1 : n;
    }
    if (n && p[n - 1] == '\n') {
        sb_putc(R, &b, '\n');
        if (blank) sb_put(R, &b, ind.p, ind.n);
    }
    return mk_sb(R, &b);
}

static const builtin str_builtins[] = {
    {"default", f_default}, {"upper", s_upper}, {"lower", s_lower}, {"strip", s_strip},
    {"rstrip", s_rstrip}, {"lstrip", s_lstrip}, {"title", s_title}, {"capitalize", s_capitalize},
    {"length", s_length}, {"startswith", s_startswith}, {"endswith", s_endswith},
    {"split", s_split}, {"rsplit", s_rsplit}, {"replace", s_replace}, {"format", s_format},
    {"int", s_int}, {"float", s_float}, {"string", s_string}, {"slice", s_slice},
    {"safe", s_safe}, {"tojson", f_tojson}, {"indent", s_indent}, {"join", s_join},
    {NULL, NULL}
};

/* ---- arrays */

static val *a_copy_kind(rt *R, val *src) { return mk_arr(R, src->t == VT_TUPLE ? VT_TUPLE : VT_ARRAY); }

static val *a_list(rt *R, args *A) {
    ensure_vals(R, A, "A");
    val *o = mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < A0->u.a.n; i++) arr_push(R, o, A0->u.a.v[i]);
    return o;
}
static val *a_first(rt *R, args *A) {
    ensure_vals(R, A, "A");
    return A0->u.a.n ? A0->u.a.v[0] : mk_undef(R, NULL);
}
static val *a_last(rt *R, args *A) {
    ensure_vals(R, A, "A");
    return A0->u.a.n ? A0->u.a.v[A0->u.a.n - 1] : mk_undef(R, NULL);
}
static val *a_length(rt *R, args *A) { ensure_vals(R, A, "A"); return mk_int(R, (int64_t)A0->u.a.n); }
static val *a_slice(rt *R, args *A) {
    ensure_count(R, A, 1, 4);
    ensure_vals(R, A, "AIii");
    int64_t st, sp, stp;
    slice_args(R, A, &st, &sp, &stp);
    size_t len = A0->u.a.n;
    int64_t *idx = ralloc(R, mul_sz(R, len + 1, sizeof *idx));
    size_t n = slice_idx((int64_t)len, st, sp, stp, idx, len);
    val *o = a_copy_kind(R, A0);
    for (size_t i = 0; i < n; i++) arr_push(R, o, A0->u.a.v[idx[i]]);
    return o;
}

static val *run_test(rt *R, args *A, const char *name, val *x, val *extra) {
    char tn[96];
    snprintf(tn, sizeof tn, "test_is_%s", name);
    const builtin *b = find_builtin(global_builtins, tn);
    if (!b) fail(R, "selectattr: unknown test '%s'", name);
    args T = {0};
    T.ctx = A->ctx;
    T.fname = b->name;
    args_push(R, &T, x);
    args_push(R, &T, extra);
    return b->fn(R, &T);
}

static val *a_select_gen(rt *R, args *A, int reject) {
    ensure_count(R, A, 2, 4);
    ensure_vals(R, A, "ASss");
    val *arr = A0, *attr = A->v[1], *out = mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < arr->u.a.n; i++) {
        step(R);
        val *item = arr->u.a.v[i];
        int sel;
        if (A->n == 2) {
            if (item->t != VT_OBJECT) fail(R, "selectattr: item is not an object");
            long k = obj_find(R, item, attr);
            sel = k >= 0 && as_bool(R, item->u.o.v[k]);
        } else if (A->n == 3) {
            sel = as_bool(R, run_test(R, A, to_str(R, A->v[1])->u.s.p, item, A->v[2]));
        } else {
            if (item->t != VT_OBJECT) fail(R, "selectattr: item is not an object");
            long k = obj_find(R, item, attr);
            val *av = k >= 0 ? item->u.o.v[k] : mk_undef(R, NULL);
            sel = as_bool(R, run_test(R, A, to_str(R, A->v[2])->u.s.p, av, A->v[3]));
        }
        if (reject) sel = !sel;
        if (sel) arr_push(R, out, item);
    }
    return out;
}
static val *a_select(rt *R, args *A) { return a_select_gen(R, A, 0); }
static val *a_reject(rt *R, args *A) { return a_select_gen(R, A, 1); }

static val *a_join(rt *R, args *A) {
    ensure_count(R, A, 1, 3);
    if (!is_arr(A0)) fail(R, "join() first argument must be an array");
    val *d = kwarg_or_pos(R, A, "d", 1);
    val *attr = kwarg_or_pos(R, A, "attribute", 2);
    int attr_int = attr->t == VT_INT;
    if (attr->t != VT_UNDEF && attr->t != VT_STR && !attr_int)
        fail(R, "join() attribute must be a string or an integer");
    val *ds = d->t == VT_UNDEF ? mk_str(R, "") : to_str(R, d);
    sbuf b = {0};
    for (size_t i = 0; i < A0->u.a.n; i++) {
        val *x = A0->u.a.v[i];
        if (attr->t != VT_UNDEF) {
            if (attr_int && is_arr(x)) {
                int64_t k = attr->u.i;
                if (k < 0) k += (int64_t)x->u.a.n;
                if (k < 0 || k >= (int64_t)x->u.a.n) fail(R, "join(): index out of bounds");
                x = x->u.a.v[k];
            } else if (!attr_int && x->t == VT_OBJECT) {
                long k = obj_find(R, x, attr);
                if (k < 0) fail(R, "join(): key not found");
                x = x->u.o.v[k];
            }
        }
        if (x->t != VT_STR && x->t != VT_INT && x->t != VT_FLOAT)
            fail(R, "join() can only join arrays of strings or numbers");
        put_string(R, &b, x);
        if (i + 1 < A0->u.a.n) sb_put(R, &b, ds->u.s.p, ds->u.s.n);
    }
    return mk_sb(R, &b);
}
static val *a_string(rt *R, args *A) {
    ensure_count(R, A, 1, 999);
    mark_used(R, A0, 1);
    return to_str(R, A0);
}
static val *a_map(rt *R, args *A) {
    ensure_count(R, A, 2, 999);
    if (!is_arr(A0)) fail(R, "map: first argument must be an array");
    if (A->v[1]->t != VT_KWARG) fail(R, "map with a filter name is not implemented (as in llama.cpp)");
    val *attr = kwarg_or_pos(R, A, "attribute", 1);
    int attr_int = attr->t == VT_INT;
    if (attr->t != VT_STR && !attr_int) fail(R, "map: attribute must be a string or an integer");
    val *def = get_kwarg(A, "default", NULL);
    if (!def) def = mk_undef(R, NULL);
    val *out = a_copy_kind(R, A0);
    for (size_t i = 0; i < A0->u.a.n; i++) {
        val *x = A0->u.a.v[i], *r = def;
        if (attr_int) {
            if (is_arr(x)) {
                int64_t k = attr->u.i;
                if (k < 0) k += (int64_t)x->u.a.n;
                if (k >= 0 && k < (int64_t)x->u.a.n) r = x->u.a.v[k];
            }
        } else if (x->t == VT_OBJECT) {
            long k = obj_find(R, x, attr);
            if (k >= 0) r = x->u.o.v[k];
        }
        arr_push(R, out, r);
    }
    return out;
}
static val *a_append(rt *R, args *A) {
    ensure_count(R, A, 2, 999);
    if (!is_arr(A0)) fail(R, "append: first argument must be an array");
    if (A0->t == VT_TUPLE) fail(R, "attempting to modify an immutable tuple");
    arr_push(R, A0, A->v[1]);
    return A0;
}
static val *a_pop(rt *R, args *A) {
    ensure_count(R, A, 1, 2);
    ensure_vals(R, A, "Ai");
    if (A0->t == VT_TUPLE) fail(R, "attempting to modify an immutable tuple");
    int64_t idx = A->n == 2 ? as_int(R, A->v[1]) : -1, n = (int64_t)A0->u.a.n;
    if (idx < 0) idx += n;
    if (idx < 0 || idx >= n) fail(R, "pop index out of range");
    val *x = A0->u.a.v[idx];
    memmove(A0->u.a.v + idx, A0->u.a.v + idx + 1, (size_t)(n - idx - 1) * sizeof(val *));
    A0->u.a.n--;
    return x;
}
static val *a_sort(rt *R, args *A) {
    ensure_count(R, A, 1, 4);
    if (!is_arr(A0)) fail(R, "sort: first argument must be an array");
    int rev = as_bool(R, kwarg_or_pos(R, A, "reverse", 1));
    val *attr = kwarg_or_pos(R, A, "attribute", 3);
    size_t n = A0->u.a.n;
    val **v = ralloc(R, mul_sz(R, n + 1, sizeof *v)), **key = ralloc(R, mul_sz(R, n + 1, sizeof *key));
    for (size_t i = 0; i < n; i++) {
        v[i] = key[i] = A0->u.a.v[i];
        if (attr->t != VT_UNDEF) {
            if (attr->t == VT_INT && is_arr(v[i])) {
                int64_t k = attr->u.i;
                if (k < 0) k += (int64_t)v[i]->u.a.n;
                if (k < 0 || k >= (int64_t)v[i]->u.a.n) fail(R, "sort: index out of bounds");
                key[i] = v[i]->u.a.v[k];
            } else if (attr->t != VT_INT && v[i]->t == VT_OBJECT) {
                long k = obj_find(R, v[i], attr);
                if (k < 0) fail(R, "sort: key not found");
                key[i] = v[i]->u.o.v[k];
            } else {
                fail(R, "sort: unsupported attribute comparison");
            }
        }
    }
    if (n > 16) fail(R, "sort of more than 16 items is not supported (std::sort order is not stable)");
    for (size_t i = 1; i < n; i++) {       /* insertion sort: what std::sort does for n <= 16 */
        val *x = v[i], *kx = key[i];
        size_t j = i;
        while (j > 0 && value_compare(R, kx, key[j - 1], rev ? CMP_GT : CMP_LT)) {
            v[j] = v[j - 1];
            key[j] = key[j - 1];
            j--;
        }
        v[j] = x;
        key[j] = kx;
    }
    val *out = a_copy_kind(R, A0);
    for (size_t i = 0; i < n; i++) arr_push(R, out, v[i]);
    return out;
}
static val *a_reverse(rt *R, args *A) {
    ensure_vals(R, A, "A");
    val *out = a_copy_kind(R, A0);
    for (size_t i = A0->u.a.n; i-- > 0;) arr_push(R, out, A0->u.a.v[i]);
    return out;
}
static val *a_minmax(rt *R, args *A, int op) {
    ensure_count(R, A, 1, 4);
    ensure_vals(R, A, "A");
    if (kwarg_or_pos(R, A, "attribute", 2)->t != VT_UNDEF) fail(R, "min/max with attribute is not implemented");
    if (!A0->u.a.n) return mk_undef(R, NULL);
    val *r = A0->u.a.v[0];
    for (size_t i = 1; i < A0->u.a.n; i++)
        if (value_compare(R, A0->u.a.v[i], r, op)) r = A0->u.a.v[i];
    return r;
}
static val *a_min(rt *R, args *A) { return a_minmax(R, A, CMP_LT); }
static val *a_max(rt *R, args *A) { return a_minmax(R, A, CMP_GT); }
static val *a_unique(rt *R, args *A) { (void)A; fail(R, "unique is not implemented (as in llama.cpp)"); }

static const builtin arr_builtins[] = {
    {"default", f_default}, {"list", a_list}, {"first", a_first}, {"last", a_last},
    {"length", a_length}, {"slice", a_slice}, {"selectattr", a_select}, {"select", a_select},
    {"rejectattr", a_reject}, {"reject", a_reject}, {"join", a_join}, {"string", a_string},
    {"tojson", f_tojson}, {"map", a_map}, {"append", a_append}, {"pop", a_pop}, {"sort", a_sort},
    {"reverse", a_reverse}, {"min", a_min}, {"max", a_max}, {"unique", a_unique}, {NULL, NULL}
};

/* ---- objects */

static val *o_get(rt *R, args *A) {
    ensure_count(R, A, 2, 3);
    if (A0->t != VT_OBJECT) fail(R, "get: first argument must be an object");
    if (A->v[1]->t != VT_STR) fail(R, "get: second argument must be a string (key)");
    long k = obj_find(R, A0, A->v[1]);
    if (k >= 0) return A0->u.o.v[k];
    return A->n == 3 ? A->v[2] : mk_none(R);
}
static val *o_keys(rt *R, args *A) {
    ensure_vals(R, A, "O");
    val *o = mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < A0->u.o.n; i++) arr_push(R, o, A0->u.o.k[i]);
    return o;
}
static val *o_values(rt *R, args *A) {
    ensure_vals(R, A, "O");
    val *o = mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < A0->u.o.n; i++) arr_push(R, o, A0->u.o.v[i]);
    return o;
}
static val *o_items(rt *R, args *A) {
    ensure_vals(R, A, "O");
    val *o = mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < A0->u.o.n; i++) {
        val *t = mk_arr(R, VT_TUPLE);
        arr_push(R, t, A0->u.o.k[i]);
        arr_push(R, t, A0->u.o.v[i]);
        arr_push(R, o, t);
    }
    return o;
}
static val *o_string(rt *R, args *A) {
    ensure_vals(R, A, "O");
    mark_used(R, A0, 1);
    return to_str(R, A0);
}
static val *o_length(rt *R, args *A) { ensure_vals(R, A, "O"); return mk_int(R, (int64_t)A0->u.o.n); }
static val *o_dictsort(rt *R, args *A) {
    val *in = get_pos(R, A, 0);
    if (in->t != VT_OBJECT) fail(R, "dictsort: input must be an object");
    val *by = kwarg_or_pos(R, A, "by", 2);
    int rev = as_bool(R, kwarg_or_pos(R, A, "reverse", 3));
    int by_value = by->t == VT_STR && !strcmp(by->u.s.p, "value");
    size_t n = in->u.o.n;
    if (n > 16) fail(R, "dictsort of more than 16 items is not supported (std::sort order is not stable)");
    val *out = mk_obj(R);
    size_t *ord = ralloc(R, mul_sz(R, n + 1, sizeof *ord));
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        val *ki = by_value ? in->u.o.v[i] : in->u.o.k[i];
        while (j > 0) {
            val *kj = by_value ? in->u.o.v[ord[j - 1]] : in->u.o.k[ord[j - 1]];
            if (!value_compare(R, ki, kj, rev ? CMP_GT : CMP_LT)) break;
            ord[j] = ord[j - 1];
            j--;
        }
        ord[j] = i;
    }
    for (size_t i = 0; i < n; i++) obj_set(R, out, in->u.o.k[ord[i]], in->u.o.v[ord[i]]);
    return out;
}
static val *o_join(rt *R, args *A) { (void)A; fail(R, "join on an object is not implemented (as in llama.cpp)"); }

static const builtin obj_builtins[] = {
    {"get", o_get}, {"keys", o_keys}, {"values", o_values}, {"items", o_items},
    {"tojson", f_tojson}, {"string", o_string}, {"length", o_length}, {"dictsort", o_dictsort},
    {"join", o_join}, {NULL, NULL}
};

/* ---- none and undefined */

static val *none_string(rt *R, args *A) { (void)A; return mk_str(R, "None"); }
static const builtin none_builtins[] = {
    {"default", f_default}, {"tojson", f_tojson}, {"string", none_string}, {"safe", none_string},
    {"items", empty_arr}, {"map", empty_arr}, {"reject", empty_arr}, {"rejectattr", empty_arr},
    {"select", empty_arr}, {"selectattr", empty_arr}, {"unique", empty_arr}, {NULL, NULL}
};
static const builtin undef_builtins[] = {
    {"default", f_default}, {"capitalize", empty_str}, {"first", empty_undef}, {"items", empty_arr},
    {"join", empty_str}, {"last", empty_undef}, {"length", empty_int}, {"list", empty_arr},
    {"lower", empty_str}, {"map", empty_arr}, {"max", empty_undef}, {"min", empty_undef},
    {"reject", empty_arr}, {"rejectattr", empty_arr}, {"replace", empty_str}, {"reverse", empty_arr},
    {"safe", empty_str}, {"select", empty_arr}, {"selectattr", empty_arr}, {"sort", empty_arr},
    {"string", empty_str}, {"strip", empty_str}, {"sum", empty_int}, {"title", empty_str},
    {"truncate", empty_str}, {"unique", empty_arr}, {"upper", empty_str}, {"wordcount", empty_int},
    {NULL, NULL}
};
static const builtin no_builtins[] = {{NULL, NULL}};

static const builtin *type_builtins(rt *R, const val *v) {
    switch (v->t) {
    case VT_UNDEF: return undef_builtins;
    case VT_NONE: return none_builtins;
    case VT_BOOL: return bool_builtins;
    case VT_INT: case VT_FLOAT: return int_builtins;
    case VT_STR: return str_builtins;
    case VT_ARRAY: case VT_TUPLE: return arr_builtins;
    case VT_OBJECT: return v->no_builtins ? no_builtins : obj_builtins;
    default: fail(R, "%s has no builtins", type_name(v));
    }
}

/* ------------------------------------------------------------ entry glue */

/* JSON tree to values (llama.cpp's from_json): integers stay integers */
static val *from_json(rt *R, const json_value *j) {
    switch (j->type) {
    case JSON_NULL: return mk_none(R);
    case JSON_FALSE: return mk_bool(R, 0);
    case JSON_TRUE: return mk_bool(R, 1);
    case JSON_NUMBER: {
        int64_t i;
        if (!strpbrk(j->str, ".eE") && json_as_i64(j, &i)) return mk_int(R, i);
        return mk_float(R, strtod(j->str, NULL));
    }
    case JSON_STRING: return mk_strn(R, j->str, j->len);
    case JSON_ARRAY: {
        val *a = mk_arr(R, VT_ARRAY);
        for (size_t i = 0; i < j->n; i++) arr_push(R, a, from_json(R, j->items[i]));
        return a;
    }
    default: {
        val *o = mk_obj(R);
        for (size_t i = 0; i < j->n; i++)
            obj_set(R, o, mk_strn(R, j->keys[i], j->key_lens[i]), from_json(R, j->items[i]));
        return o;
    }
    }
}

static env *base_env(rt *R) {
    env *E = env_new(R);
    env_set(R, E, "true", mk_bool(R, 1));
    env_set(R, E, "True", mk_bool(R, 1));
    env_set(R, E, "false", mk_bool(R, 0));
    env_set(R, E, "False", mk_bool(R, 0));
    env_set(R, E, "none", mk_none(R));
    env_set(R, E, "None", mk_none(R));
    return E;
}

static void env_from_obj(rt *R, env *E, val *o) {
    for (size_t i = 0; i < o->u.o.n; i++) env_set(R, E, to_str(R, o->u.o.k[i])->u.s.p, o->u.o.v[i]);
}

static void compile(rt *R, const char *tmpl, size_t len, nlist *prog) {
    toklist L;
    lex(R, tmpl, len, &L);
    parse(R, &L, prog);
}

/* runs prog with E; returns 0 or -1 (reason in R->err), output in out */
static int run(rt *R, const nlist *prog, env *E, sbuf *out) {
    jmp_buf jb, *saved = R->on_error;
    R->on_error = &jb;
    R->on_signal = NULL;
    R->signal = 0;
    R->calls = 0;
    R->steps = 0;
    memset(out, 0, sizeof *out);
    if (setjmp(jb)) {
        R->on_error = saved;
        return -1;
    }
    exec_list(R, E, prog, out);
    R->on_error = saved;
    return 0;
}

static void rt_init(rt *R, char *err, size_t errlen, int64_t now) {
    memset(R, 0, sizeof *R);
    R->err = err;
    R->errlen = errlen;
    R->now = now ? (time_t)now : time(NULL);
    if (err && errlen) err[0] = 0;
}

/* common_chat_templates_init's default when the model has no template */
const char template_chatml_fallback[] =
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\n' -}}\n"
    "{%- endif -%}";

void template_opts_init(template_opts *o) {
    memset(o, 0, sizeof *o);
    o->add_generation_prompt = 1;
    o->enable_thinking = -1;
    o->preserve_reasoning = 1;
}

int template_check(const char *tmpl, size_t tmpl_len, char *err, size_t errlen) {
    rt R;
    rt_init(&R, err, errlen, 0);
    jmp_buf jb;
    R.on_error = &jb;
    volatile int rc = 0;
    if (setjmp(jb)) {
        rc = -1;
    } else {
        nlist prog;
        compile(&R, tmpl, tmpl_len, &prog);
    }
    free_all(&R);
    return rc;
}

int template_render_globals(const char *tmpl, size_t tmpl_len, const json_value *globals,
                            int64_t now, jbuf *out, char *err, size_t errlen) {
    rt R;
    rt_init(&R, err, errlen, now);
    jmp_buf jb;
    R.on_error = &jb;
    volatile int rc = -1;
    if (setjmp(jb) == 0) {
        nlist prog;
        compile(&R, tmpl, tmpl_len, &prog);
        env *E = base_env(&R);
        if (globals && globals->type == JSON_OBJECT) env_from_obj(&R, E, from_json(&R, globals));
        sbuf o;
        if (run(&R, &prog, E, &o) == 0) {
            jbuf_put(out, o.p ? o.p : "", o.n);
            rc = out->oom ? -1 : 0;
            if (rc) snprintf(err, errlen, "out of memory");
        }
    }
    free_all(&R);
    return rc;
}

/* ------------------------------------------------------------ chat layer
 *
 * What llama-server does between the HTTP body and the Jinja engine
 * (tools/server/server-common.cpp oaicompat_chat_params_parse, then
 * common/chat.cpp common_chat_templates_apply_jinja and
 * common_chat_template_direct_apply_impl).
 */

typedef struct {
    int system_role;        /* reads messages[0].content of a system message */
    int string_content;
    int typed_content;
} caps;

static val *msg(rt *R, const char *role, val *content) {
    val *m = mk_obj(R);
    obj_set_s(R, m, "role", mk_str(R, role));
    obj_set_s(R, m, "content", content);
    return m;
}

/* one probe run, as caps_try_execute: stats on, errors ignored */
static int probe(rt *R, const nlist *prog, val *messages, sbuf *out) {
    env *E = base_env(R);
    env_set(R, E, "messages", messages);
    env_set(R, E, "tools", mk_arr(R, VT_ARRAY));
    env_set(R, E, "bos_token", mk_str(R, ""));
    env_set(R, E, "eos_token", mk_str(R, ""));
    env_set(R, E, "add_generation_prompt", mk_bool(R, 1));
    R->stats = 1;
    char ebuf[256];
    char *se = R->err;
    size_t sl = R->errlen;
    R->err = ebuf;
    R->errlen = sizeof ebuf;
    int rc = run(R, prog, E, out);
    R->err = se;
    R->errlen = sl;
    R->stats = 0;
    return rc == 0;
}

/* caps_get, for the capabilities that change how plain messages are prepared */
static caps caps_get(rt *R, const nlist *prog) {
    caps c = {1, 1, 0};
    sbuf out;
    int checks_for_string = 0;
    {
        val *content = mk_str(R, "STRING_MARKER");
        val *ms = mk_arr(R, VT_ARRAY);
        arr_push(R, ms, msg(R, "user", content));
        int ok = probe(R, prog, ms, &out);
        if (content->ops & OP_TEST_IS_STRING) checks_for_string = 1;
        int as_array = (content->ops & (OP_SELECTATTR | OP_ARRAY_ACCESS)) != 0;
        if (as_array) c.typed_content = 1;
        if (!ok) c.string_content = 0;
        else if (as_array && !(out.p && strstr(out.p, "STRING_MARKER"))) c.string_content = 0;
    }
    if (checks_for_string) {
        val *content = mk_arr(R, VT_ARRAY);
        val *ms = mk_arr(R, VT_ARRAY);
        arr_push(R, ms, msg(R, "user", content));
        int ok = probe(R, prog, ms, &out);
        if ((content->ops & (OP_SELECTATTR | OP_ARRAY_ACCESS)) && ok) c.typed_content = 1;
    }
    {
        val *content = mk_str(R, "System message");
        val *ms = mk_arr(R, VT_ARRAY);
        arr_push(R, ms, msg(R, "system", content));
        arr_push(R, ms, msg(R, "user", mk_str(R, "User message")));
        probe(R, prog, ms, &out);
        if (!content->used) c.system_role = 0;
    }
    return c;
}

static const json_value *jget(const json_value *o, const char *k) {
    return o && o->type == JSON_OBJECT ? json_get(o, k) : NULL;
}

static int jstr_is(const json_value *v, const char *s) {
    return v && v->type == JSON_STRING && v->len == strlen(s) && !memcmp(v->str, s, v->len);
}

/* a member that must be a string when present (nlohmann's get<std::string>) */
static const char *jstr_member(rt *R, const json_value *o, const char *k, size_t *n) {
    const json_value *v = json_get(o, k);
    if (!v) { *n = 0; return NULL; }
    if (v->type != JSON_STRING) fail(R, "failed to parse messages: '%s' must be a string", k);
    *n = v->len;
    return v->str;
}

/* std::isspace trim, as llama.cpp's trim_whitespace */
static val *trim_ws(rt *R, const char *p, size_t n) {
    size_t a = 0, b = n;
    while (a < b && isspace((unsigned char)p[a])) a++;
    while (b > a && isspace((unsigned char)p[b - 1])) b--;
    return mk_strn(R, p + a, b - a);
}

/* validates and rebuilds the messages as common_chat_msg::to_json_oaicompat */
static val *prepare_messages(rt *R, const json_value *messages, int trim) {
    if (!messages || messages->type != JSON_ARRAY) fail(R, "'messages' must be an array");
    val *out = mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < messages->n; i++) {
        const json_value *m = messages->items[i];
        if (m->type != JSON_OBJECT) fail(R, "failed to parse messages: a message is not an object");
        const json_value *role = json_get(m, "role"), *content = json_get(m, "content");
        const json_value *tcs = json_get(m, "tool_calls");
        int is_assistant = jstr_is(role, "assistant");
        if (!is_assistant && !content) fail(R, "all non-assistant messages must contain 'content'");
        if (is_assistant && !content && !tcs)
            fail(R, "assistant message must contain either 'content' or 'tool_calls'");
        if (content && content->type != JSON_STRING && content->type != JSON_NULL &&
            content->type != JSON_ARRAY)
            fail(R, "expected 'content' to be a string or an array");
        if (content && content->type == JSON_ARRAY)
            for (size_t k = 0; k < content->n; k++) {
                const json_value *ty = jget(content->items[k], "type");
                if (jstr_is(ty, "image_url") || jstr_is(ty, "input_audio") ||
                    jstr_is(ty, "input_video") || jstr_is(ty, "video_url"))
                    fail(R, "media input is not supported (no multimodal projector)");
                if (!jstr_is(ty, "text")) fail(R, "unsupported content[].type");
            }
        if (!role) fail(R, "failed to parse messages: missing 'role'");
        if (role->type != JSON_STRING) fail(R, "failed to parse messages: 'role' must be a string");
        if (tcs) fail(R, "messages with tool_calls are not supported yet");

        val *jm = mk_obj(R);
        obj_set_s(R, jm, "role", mk_strn(R, role->str, role->len));
        if (content && content->type == JSON_STRING && content->len) {
            obj_set_s(R, jm, "content",
                      trim ? trim_ws(R, content->str, content->len) : mk_strn(R, content->str, content->len));
        } else if (content && content->type == JSON_ARRAY && content->n) {
            val *parts = mk_arr(R, VT_ARRAY);
            for (size_t k = 0; k < content->n; k++) {
                const json_value *t = json_get(content->items[k], "text");
                if (!t || t->type != JSON_STRING) fail(R, "failed to parse messages: content part text must be a string");
                val *p = mk_obj(R);
                obj_set_s(R, p, "type", mk_str(R, "text"));
                obj_set_s(R, p, "text", trim ? trim_ws(R, t->str, t->len) : mk_strn(R, t->str, t->len));
                arr_push(R, parts, p);
            }
            obj_set_s(R, jm, "content", parts);
        } else {
            obj_set_s(R, jm, "content", mk_str(R, ""));
        }
        size_t n;
        const char *s = jstr_member(R, m, "reasoning_content", &n);
        if (s && n) {
            val *rc = trim ? trim_ws(R, s, n) : mk_strn(R, s, n);
            if (!trim || rc->u.s.n) obj_set_s(R, jm, "reasoning_content", rc);
        }
        if ((s = jstr_member(R, m, "name", &n)) && n) obj_set_s(R, jm, "name", mk_strn(R, s, n));
        if ((s = jstr_member(R, m, "tool_call_id", &n)) && n) obj_set_s(R, jm, "tool_call_id", mk_strn(R, s, n));
        arr_push(R, out, jm);
    }
    return out;
}

/* messages_inp_normalizer: string <-> typed content by the template's caps */
static void normalize(rt *R, val *ms, caps c) {
    int only_string = c.string_content && !c.typed_content;
    int only_typed = !c.string_content && c.typed_content;
    if (!only_string && !only_typed) return;
    for (size_t i = 0; i < ms->u.a.n; i++) {
        val *m = ms->u.a.v[i];
        val *ct = obj_get_s(m, "content");
        if (!ct) continue;
        if (only_typed && ct->t == VT_STR) {
            val *p = mk_obj(R);
            obj_set_s(R, p, "type", mk_str(R, "text"));
            obj_set_s(R, p, "text", ct);
            val *a = mk_arr(R, VT_ARRAY);
            arr_push(R, a, p);
            obj_set_s(R, m, "content", a);
        } else if (only_string && is_arr(ct)) {
            sbuf b = {0};
            for (size_t k = 0; k < ct->u.a.n; k++) {
                val *t = obj_get_s(ct->u.a.v[k], "text");
                if (b.n) sb_putc(R, &b, '\n');
                if (t && t->t == VT_STR) sb_put(R, &b, t->u.s.p, t->u.s.n);
            }
            obj_set_s(R, m, "content", mk_sb(R, &b));
        }
    }
}

static int has(const char *src, const char *s) { return strstr(src, s) != NULL; }

/* replaces every `from` in s by `to` (llama.cpp patches two known templates) */
static char *replace_all(rt *R, const char *s, const char *from, const char *to) {
    sbuf b = {0};
    size_t fl = strlen(from);
    const char *p = s, *h;
    while ((h = strstr(p, from)) != NULL) {
        sb_put(R, &b, p, (size_t)(h - p));
        sb_puts(R, &b, to);
        p = h + fl;
    }
    sb_puts(R, &b, p);
    return b.p ? b.p : rstrdup(R, "", 0);
}

static val *text_block(rt *R, const char *type, const char *key, val *text) {
    val *p = mk_obj(R);
    obj_set_s(R, p, "type", mk_str(R, type));
    obj_set_s(R, p, key, text);
    return p;
}

/* tools as common_chat_tools_to_json_oaicompat rebuilds them */
static val *prepare_tools(rt *R, const json_value *tools) {
    if (!tools || tools->type == JSON_NULL) return NULL;
    if (tools->type != JSON_ARRAY) fail(R, "expected 'tools' to be an array");
    if (!tools->n) return NULL;
    val *out = mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < tools->n; i++) {
        const json_value *t = tools->items[i];
        if (!jstr_is(jget(t, "type"), "function")) fail(R, "unsupported or missing tool type");
        const json_value *f = jget(t, "function");
        if (!f) fail(R, "missing tool function");
        const json_value *name = jget(f, "name"), *desc = jget(f, "description"),
                         *params = jget(f, "parameters");
        if (!name || name->type != JSON_STRING) fail(R, "tool function name must be a string");
        if (desc && desc->type != JSON_STRING) fail(R, "tool description must be a string");
        val *fn = mk_obj(R);
        obj_set_s(R, fn, "name", from_json(R, name));
        obj_set_s(R, fn, "description", desc ? from_json(R, desc) : mk_str(R, ""));
        obj_set_s(R, fn, "parameters", params && params->type != JSON_NULL ? from_json(R, params) : mk_obj(R));
        val *tv = mk_obj(R);
        obj_set_s(R, tv, "type", mk_str(R, "function"));
        obj_set_s(R, tv, "function", fn);
        arr_push(R, out, tv);
    }
    return out;
}

static val *obj_get_s_env(env *E, const char *k) { return env_get(E, k); }

static int guess_thinking(const char *src) {
    return has(src, "enable_thinking") || has(src, "<think>") || has(src, "reasoning_content") ||
           has(src, "thinking");
}

/* the body of template_render; leaves through fail() on any error */
static void render_chat(rt *R, const char *tmpl, size_t tmpl_len, const json_value *messages,
                        const template_opts *o, jbuf *out) {
    char *src = rstrdup(R, tmpl, tmpl_len);
    if (strlen(src) != tmpl_len) fail(R, "template contains a NUL byte");
    /* common_chat_templates_init patches two known-broken templates */
    if (has(src, "<|channel|>") && has(src, "in message.content or"))
        src = replace_all(R, src,
                          "{%- if \"<|channel|>analysis<|message|>\" in message.content or "
                          "\"<|channel|>final<|message|>\" in message.content %}",
                          "{%- if false %}");
    if (has(src, "[TOOL_CALLS]") && has(src, "if (message['content'] is none or"))
        src = replace_all(R, src,
                          "{%- if (message['content'] is none or message['content'] == '' or "
                          "message['content']|length == 0) and (message['tool_calls'] is not defined or "
                          "message['tool_calls'] is none or message['tool_calls']|length == 0) %}",
                          "{%- if false %}");
    nlist prog;
    compile(R, src, strlen(src), &prog);
    caps c = caps_get(R, &prog);

    int stepfun = has(src, "You have access to the following functions in JSONSchema format");
    val *ms = prepare_messages(R, messages, stepfun);
    if (ms->u.a.n) {
        val *last = obj_get_s(ms->u.a.v[ms->u.a.n - 1], "role");
        if (last && last->t == VT_STR && !strcmp(last->u.s.p, "assistant"))
            fail(R, "a conversation ending with an assistant message (prefill) is not supported yet");
    }
    val *tools = prepare_tools(R, o->tools);
    normalize(R, ms, c);
    if (!has(src, "<|channel|>"))
        for (size_t i = 0; i < ms->u.a.n; i++) {
            val *role = obj_get_s(ms->u.a.v[i], "role");
            if (role && role->t == VT_STR && !strcmp(role->u.s.p, "developer"))
                obj_set_s(R, ms->u.a.v[i], "role", mk_str(R, "system"));
        }
    if (!c.system_role && ms->u.a.n) {
        val *first = ms->u.a.v[0], *role = obj_get_s(first, "role");
        if (role && role->t == VT_STR && !strcmp(role->u.s.p, "system")) {
            if (ms->u.a.n > 1) {
                val *a = obj_get_s(first, "content"), *b = obj_get_s(ms->u.a.v[1], "content");
                if (!a || !b || a->t != VT_STR || b->t != VT_STR)
                    fail(R, "cannot merge a non-string system message into the next message");
                sbuf s = {0};
                sb_put(R, &s, a->u.s.p, a->u.s.n);
                sb_putc(R, &s, '\n');
                sb_put(R, &s, b->u.s.p, b->u.s.n);
                obj_set_s(R, ms->u.a.v[1], "content", mk_sb(R, &s));
            }
            memmove(ms->u.a.v, ms->u.a.v + 1, (ms->u.a.n - 1) * sizeof(val *));
            ms->u.a.n--;
        }
    }
    /* the specialized handlers that reshape messages before rendering */
    if (has(src, "[SYSTEM_PROMPT]") && has(src, "[TOOL_CALLS]") && has(src, "[ARGS]") &&
        !has(src, "[CALL_ID]")) {
        for (size_t i = 0; i < ms->u.a.n; i++) {
            val *m = ms->u.a.v[i], *role = obj_get_s(m, "role");
            if (!role || role->t != VT_STR ||
                (strcmp(role->u.s.p, "system") && strcmp(role->u.s.p, "assistant")))
                continue;
            val *blocks = mk_arr(R, VT_ARRAY), *rcv = obj_get_s(m, "reasoning_content");
            if (rcv && rcv->t == VT_STR) arr_push(R, blocks, text_block(R, "thinking", "thinking", rcv));
            val *ct = obj_get_s(m, "content");
            if (ct && ct->t == VT_STR) arr_push(R, blocks, text_block(R, "text", "text", ct));
            else if (ct && is_arr(ct)) fail(R, "typed assistant content for this template is not supported");
            val *nm = mk_obj(R);
            for (size_t k = 0; k < m->u.o.n; k++) {
                val *key = m->u.o.k[k];
                if (key->t == VT_STR && !strcmp(key->u.s.p, "reasoning_content")) continue;
                obj_set(R, nm, key, key->t == VT_STR && !strcmp(key->u.s.p, "content") ? blocks : m->u.o.v[k]);
            }
            ms->u.a.v[i] = nm;
        }
    } else if (has(src, "<|channel|>") ||
               (!has(src, "<atem:function_calls>") &&
                !(has(src, ">>>all") && has(src, ">>>${recipient}")) &&
                !(has(src, "<|tool_calls_section_begin|>") && has(src, "<|tool_call_begin|>")) &&
                !(has(src, "<|open|>") && has(src, "<|close|>") && has(src, "<|end_of_msg|>")) &&
                !(has(src, "<role>ASSISTANT</role>") && has(src, "<arg_key>")) &&
                !(has(src, "<|START_TEXT|>") && has(src, "<|START_ACTION|>")) &&
                ((has(src, "<|tool_list_start|>") && has(src, "<|tool_list_end|>")) ||
                 (has(src, "List of tools: [") && !has(src, "<|tool_list_start|>"))))) {
        /* gpt-oss and LFM2: reasoning goes to a "thinking" field */
        for (size_t i = 0; i < ms->u.a.n; i++) {
            val *m = ms->u.a.v[i], *rcv = obj_get_s(m, "reasoning_content");
            if (rcv && rcv->t == VT_STR) obj_set_s(R, m, "thinking", rcv);
        }
    }

    env *E = base_env(R);
    env_set(R, E, "messages", ms);
    env_set(R, E, "bos_token", mk_str(R, o->bos_token ? o->bos_token : ""));
    env_set(R, E, "eos_token", mk_str(R, o->eos_token ? o->eos_token : ""));
    int think = o->enable_thinking >= 0 ? o->enable_thinking : guess_thinking(src);
    /* the server's default kwargs, then the request's on top */
    val *kw = mk_obj(R);
    if (o->preserve_reasoning >= 0) obj_set_s(R, kw, "preserve_reasoning", mk_bool(R, o->preserve_reasoning));
    if (o->kwargs && o->kwargs->type == JSON_OBJECT) {
        val *rk = from_json(R, o->kwargs);
        for (size_t i = 0; i < rk->u.o.n; i++) obj_set(R, kw, rk->u.o.k[i], rk->u.o.v[i]);
    }
    if (kw) {
        val *et = obj_get_s(kw, "enable_thinking");
        if (et && et->t == VT_BOOL) think = et->u.b;
        else if (et && et->t == VT_STR) fail(R, "invalid type for \"enable_thinking\" (expected boolean, got string)");
    }
    env_set(R, E, "enable_thinking", mk_bool(R, think));
    if (tools) env_set(R, E, "tools", tools);
    char date[64];
    struct tm tm;
    localtime_r(&R->now, &tm);
    strftime(date, sizeof date, "%b %d %Y", &tm);
    env_set(R, E, "datetime", mk_str(R, date));
    strftime(date, sizeof date, "%d %b %Y", &tm);
    env_set(R, E, "date_string", mk_str(R, date));
    if (kw) env_from_obj(R, E, kw);
    if (o->add_generation_prompt) env_set(R, E, "add_generation_prompt", mk_bool(R, 1));
    val *pr = obj_get_s_env(E, "preserve_reasoning");
    if (pr && pr->t == VT_BOOL) {
        env_set(R, E, "preserve_thinking", mk_bool(R, pr->u.b));
        env_set(R, E, "clear_thinking", mk_bool(R, !pr->u.b));
        env_set(R, E, "truncate_history_thinking", mk_bool(R, !pr->u.b));
        env_set(R, E, "drop_thinking", mk_bool(R, !pr->u.b));
    }
    val *re = obj_get_s_env(E, "reasoning_effort");
    if (re && re->t == VT_STR && re->u.s.n) env_set(R, E, "reasoning_strength", re);

    sbuf res;
    if (run(R, &prog, E, &res) != 0) longjmp(*R->on_error, 1);
    const char *p = res.p ? res.p : "";
    size_t n = res.n;
    const char *bos = o->bos_token ? o->bos_token : "", *eos = o->eos_token ? o->eos_token : "";
    size_t bl = strlen(bos), el = strlen(eos);
    if (o->add_bos && n >= bl && !memcmp(p, bos, bl)) { p += bl; n -= bl; }
    if (o->add_eos && n >= el && !memcmp(p + n - el, eos, el)) n -= el;
    /* gpt-oss: without a generation prompt the final <|return|> becomes <|end|> */
    const char *ret = NULL;
    if (has(src, "<|channel|>") && !o->add_generation_prompt)
        for (const char *h = p; (h = memmem(h, n - (size_t)(h - p), "<|return|>", 10)) != NULL; h++) ret = h;
    if (ret) {
        jbuf_put(out, p, (size_t)(ret - p));
        jbuf_puts(out, "<|end|>");
        jbuf_put(out, ret + 10, n - (size_t)(ret - p) - 10);
    } else {
        jbuf_put(out, p, n);
    }
    if (out->oom) fail(R, "out of memory");
}

int template_render(const char *tmpl, size_t tmpl_len, const json_value *messages,
                    const template_opts *opts, jbuf *out, char *err, size_t errlen) {
    template_opts dflt;
    if (opts) dflt = *opts;
    else template_opts_init(&dflt);
    const template_opts *o = &dflt;
    rt R;
    rt_init(&R, err, errlen, o->now);
    jmp_buf jb;
    R.on_error = &jb;
    volatile int rc = -1;
    if (setjmp(jb) == 0) {
        render_chat(&R, tmpl, tmpl_len, messages, o, out);
        rc = 0;
    }
    free_all(&R);
    return rc;
}

int template_render_request(const char *tmpl, size_t tmpl_len, const char *input,
                            size_t input_len, const template_opts *o, jbuf *out,
                            char *err, size_t errlen) {
    json_value *j = json_parse(input, input_len, err, errlen);
    if (!j) return -1;
    template_opts opts;
    if (o) opts = *o;
    else template_opts_init(&opts);
    const json_value *ms = j;
    if (j->type == JSON_OBJECT) {
        ms = json_get(j, "messages");
        if (!ms) {
            snprintf(err, errlen, "'messages' is required");
            json_free(j);
            return -1;
        }
        const json_value *t = json_get(j, "tools");
        if (t) opts.tools = t;
        int b;
        if (json_is_bool(json_get(j, "add_generation_prompt"), &b)) opts.add_generation_prompt = b;
        const json_value *kw = json_get(j, "chat_template_kwargs");
        if (kw && kw->type == JSON_OBJECT) opts.kwargs = kw;
    }
    int rc = template_render(tmpl, tmpl_len, ms, &opts, out, err, errlen);
    json_free(j);
    return rc;
}
