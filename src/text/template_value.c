/*
 * template_value.c -- the Jinja engine's runtime and values (see
 * template_int.h): one render's arena, limits and error exit; the value
 * kinds, their conversions, string and JSON forms as llama.cpp prints them
 * (value_to_string_repr, as_string, value_to_json), equality, objects; the
 * scopes (llama.cpp's context).
 */
#include "text/template_int.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --------------------------------------------------------------- runtime */

/* Formats the reason into the caller's buffer and leaves the render. */
void tpl_fail(rt *R, const char *fmt, ...) {
    if (R->err && R->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(R->err, R->errlen, fmt, ap);
        va_end(ap);
    }
    longjmp(*R->on_error, 1);
}

/* Arena allocation: a header links the block so tpl_free_all() finds it. */
void *tpl_ralloc(rt *R, size_t n) {
    if (n > TPL_MAX_MEM || R->mem + n > TPL_MAX_MEM)
        tpl_fail(R, "template needs more than %u MB of memory", TPL_MAX_MEM >> 20);
    ablk *b = malloc(sizeof(ablk) + n + 1);
    if (!b) tpl_fail(R, "out of memory");
    b->next = R->blocks;
    R->blocks = b;
    R->mem += n + sizeof(ablk);
    return (char *)(b + 1);
}

void *tpl_rzalloc(rt *R, size_t n) {
    void *p = tpl_ralloc(R, n);
    memset(p, 0, n);
    return p;
}

size_t tpl_mul_sz(rt *R, size_t a, size_t b) {
    if (b && a > SIZE_MAX / b) tpl_fail(R, "size overflow");
    return a * b;
}

char *tpl_rstrdup(rt *R, const char *s, size_t n) {
    char *p = tpl_ralloc(R, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void tpl_free_all(rt *R) {
    ablk *b = R->blocks;
    while (b) {
        ablk *nx = b->next;
        free(b);
        b = nx;
    }
    R->blocks = NULL;
    R->mem = 0;
}

void tpl_step(rt *R) {
    if (++R->steps > TPL_MAX_STEPS)
        tpl_fail(R, "template runs too long (more than %llu steps)", TPL_MAX_STEPS);
}

void tpl_sb_put(rt *R, sbuf *b, const char *s, size_t n) {
    if (!n) return;
    if (b->n + n > TPL_MAX_OUT) tpl_fail(R, "template output exceeds %u MB", TPL_MAX_OUT >> 20);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = tpl_ralloc(R, cap);
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void tpl_sb_puts(rt *R, sbuf *b, const char *s) { tpl_sb_put(R, b, s, strlen(s)); }
void tpl_sb_putc(rt *R, sbuf *b, char c) { tpl_sb_put(R, b, &c, 1); }

void tpl_sb_printf(rt *R, sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    tpl_sb_put(R, b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* ---------------------------------------------------------------- values */

val *tpl_mk(rt *R, int t) {
    val *v = tpl_rzalloc(R, sizeof *v);
    v->t = (unsigned char)t;
    return v;
}
val *tpl_mk_undef(rt *R, const char *hint) { val *v = tpl_mk(R, VT_UNDEF); v->u.hint = hint; return v; }
val *tpl_mk_none(rt *R) { return tpl_mk(R, VT_NONE); }
val *tpl_mk_bool(rt *R, int b) { val *v = tpl_mk(R, VT_BOOL); v->u.b = b != 0; return v; }
val *tpl_mk_int(rt *R, int64_t i) { val *v = tpl_mk(R, VT_INT); v->u.i = i; return v; }
val *tpl_mk_float(rt *R, double f) { val *v = tpl_mk(R, VT_FLOAT); v->u.f = f; return v; }
val *tpl_mk_strn(rt *R, const char *s, size_t n) {
    if (n > TPL_MAX_OUT) tpl_fail(R, "string exceeds %u MB", TPL_MAX_OUT >> 20);
    val *v = tpl_mk(R, VT_STR);
    v->u.s.p = tpl_rstrdup(R, s, n);
    v->u.s.n = n;
    return v;
}
val *tpl_mk_str(rt *R, const char *s) { return tpl_mk_strn(R, s, strlen(s)); }
val *tpl_mk_sb(rt *R, const sbuf *b) {    /* takes the buffer's bytes */
    val *v = tpl_mk(R, VT_STR);
    v->u.s.p = b->p ? b->p : tpl_rstrdup(R, "", 0);
    v->u.s.n = b->n;
    v->multipart = b->parts > 1;
    return v;
}
val *tpl_mk_arr(rt *R, int t) { return tpl_mk(R, t); }
val *tpl_mk_obj(rt *R) { return tpl_mk(R, VT_OBJECT); }

int tpl_is_arr(const val *v) { return v->t == VT_ARRAY || v->t == VT_TUPLE; }
int tpl_is_num(const val *v) { return v->t == VT_INT || v->t == VT_FLOAT; }
/* llama.cpp's is_numeric() also counts booleans */
static int is_numeric_b(const val *v) { return v->t == VT_INT || v->t == VT_FLOAT || v->t == VT_BOOL; }

const char *tpl_type_name(const val *v) {
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

void tpl_arr_push(rt *R, val *a, val *x) {
    if (a->u.a.n == a->u.a.cap) {
        size_t cap = a->u.a.cap ? a->u.a.cap * 2 : 4;
        val **nv = tpl_ralloc(R, tpl_mul_sz(R, cap, sizeof *nv));
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
int64_t tpl_float_as_int(double f) {
    if (!isfinite(f)) return 0;
    if (f >= 9223372036854775807.0) return INT64_MAX;
    if (f <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)f;
}
/* val_int / val_flt views as llama.cpp's value_t fields */
int64_t tpl_v_int(const val *v) {
    if (v->t == VT_INT) return v->u.i;
    if (v->t == VT_FLOAT) return tpl_float_as_int(v->u.f);
    if (v->t == VT_BOOL) return v->u.b;
    return 0;
}
double tpl_v_flt(const val *v) {
    if (v->t == VT_INT) return int_as_float(v->u.i);
    if (v->t == VT_FLOAT) return v->u.f;
    if (v->t == VT_BOOL) return v->u.b;
    return 0;
}

int64_t tpl_as_int(rt *R, const val *v) {
    if (v->t == VT_INT || v->t == VT_FLOAT || v->t == VT_BOOL) return tpl_v_int(v);
    tpl_fail(R, "%s is not an int value", tpl_type_name(v));
}
double tpl_as_float(rt *R, const val *v) {
    if (v->t == VT_INT || v->t == VT_FLOAT) return tpl_v_flt(v);
    tpl_fail(R, "%s is not a float value", tpl_type_name(v));
}

int tpl_as_bool(rt *R, const val *v) {
    switch (v->t) {
    case VT_UNDEF: case VT_NONE: return 0;
    case VT_BOOL: return v->u.b;
    case VT_INT: return v->u.i != 0;
    case VT_FLOAT: return v->u.f != 0.0;
    case VT_STR: return v->u.s.n > 0;
    case VT_ARRAY: case VT_TUPLE: return v->u.a.n > 0;
    case VT_OBJECT: return v->u.o.n > 0;
    default: tpl_fail(R, "%s is not a bool value", tpl_type_name(v));
    }
}

/* std::to_string(double) with trailing zeros cut, one kept after the point */
static void put_float_str(rt *R, sbuf *b, double f) {
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%f", f);
    size_t n = strlen(tmp);
    while (n > 0 && tmp[n - 1] == '0') n--;
    if (n > 0 && tmp[n - 1] == '.') tmp[n++] = '0';
    tpl_sb_put(R, b, tmp, n);
}

/* value_to_string_repr: strings quoted, everything else as its repr */
static void put_repr(rt *R, sbuf *b, const val *v) {
    if (v->t == VT_STR) {
        if (memchr(v->u.s.p, '\'', v->u.s.n)) {
            tpl_put_json(R, b, v, 0, -1, ", ", ": ");
        } else {
            tpl_sb_putc(R, b, '\'');
            tpl_sb_put(R, b, v->u.s.p, v->u.s.n);
            tpl_sb_putc(R, b, '\'');
        }
    } else if (v->t == VT_UNDEF) {
        if (v->u.hint) tpl_sb_printf(R, b, "Undefined (hint: '%s')", v->u.hint);
        else tpl_sb_puts(R, b, "Undefined");
    } else if (v->t == VT_FUNC) {
        tpl_sb_printf(R, b, "Function<%s>(", v->u.fn.name);
        if (v->u.fn.self) put_repr(R, b, v->u.fn.self);
        tpl_sb_putc(R, b, ')');
    } else if (v->t == VT_KWARG) {
        tpl_sb_puts(R, b, "KwArg");
    } else {
        tpl_put_string(R, b, v);
    }
}

/* as_string(): how a value reads when concatenated or coerced */
void tpl_put_string(rt *R, sbuf *b, const val *v) {
    switch (v->t) {
    case VT_NONE: tpl_sb_puts(R, b, "None"); break;
    case VT_BOOL: tpl_sb_puts(R, b, v->u.b ? "True" : "False"); break;
    case VT_INT: tpl_sb_printf(R, b, "%lld", (long long)v->u.i); break;
    case VT_FLOAT: put_float_str(R, b, v->u.f); break;
    case VT_STR: tpl_sb_put(R, b, v->u.s.p, v->u.s.n); break;
    case VT_ARRAY: case VT_TUPLE: {
        int tup = v->t == VT_TUPLE;
        tpl_sb_putc(R, b, tup ? '(' : '[');
        for (size_t i = 0; i < v->u.a.n; i++) {
            if (i) tpl_sb_puts(R, b, ", ");
            put_repr(R, b, v->u.a.v[i]);
        }
        if (tup && v->u.a.n == 1) tpl_sb_putc(R, b, ',');
        tpl_sb_putc(R, b, tup ? ')' : ']');
        break;
    }
    case VT_OBJECT:
        tpl_sb_putc(R, b, '{');
        for (size_t i = 0; i < v->u.o.n; i++) {
            if (i) tpl_sb_puts(R, b, ", ");
            put_repr(R, b, v->u.o.k[i]);
            tpl_sb_puts(R, b, ": ");
            put_repr(R, b, v->u.o.v[i]);
        }
        tpl_sb_putc(R, b, '}');
        break;
    default:
        tpl_fail(R, "%s is not a string value", tpl_type_name(v));
    }
}

val *tpl_to_str(rt *R, val *v) {
    if (v->t == VT_STR) return v;
    sbuf b = {0};
    tpl_put_string(R, &b, v);
    return tpl_mk_sb(R, &b);
}

/* value_to_json: llama.cpp's own serializer (not Python's json.dumps) */
static void put_json_str(rt *R, sbuf *b, const char *s, size_t n) {
    tpl_sb_putc(R, b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': tpl_sb_puts(R, b, "\\\""); break;
        case '\\': tpl_sb_puts(R, b, "\\\\"); break;
        case '\b': tpl_sb_puts(R, b, "\\b"); break;
        case '\f': tpl_sb_puts(R, b, "\\f"); break;
        case '\n': tpl_sb_puts(R, b, "\\n"); break;
        case '\r': tpl_sb_puts(R, b, "\\r"); break;
        case '\t': tpl_sb_puts(R, b, "\\t"); break;
        default:
            if (c < 0x20) tpl_sb_printf(R, b, "\\u%04x", c);
            else tpl_sb_putc(R, b, (char)c);
        }
    }
    tpl_sb_putc(R, b, '"');
}

static void put_indent(rt *R, sbuf *b, int n) {
    for (int i = 0; i < n; i++) tpl_sb_putc(R, b, ' ');
}

void tpl_put_json(rt *R, sbuf *b, const val *v, int lvl, int indent, const char *isep,
                     const char *ksep) {
    tpl_step(R);
    const char *nl = indent >= 0 ? "\n" : "";
    int ind = indent > 0 ? indent : 0;
    if (lvl > 512) tpl_fail(R, "tojson: value nested too deeply");
    switch (v->t) {
    case VT_BOOL: tpl_sb_puts(R, b, v->u.b ? "true" : "false"); break;
    case VT_INT: tpl_sb_printf(R, b, "%lld", (long long)v->u.i); break;
    case VT_FLOAT: tpl_sb_printf(R, b, "%g", v->u.f); break;
    case VT_STR: put_json_str(R, b, v->u.s.p, v->u.s.n); break;
    case VT_ARRAY: case VT_TUPLE:
        tpl_sb_putc(R, b, '[');
        if (v->u.a.n) {
            tpl_sb_puts(R, b, nl);
            for (size_t i = 0; i < v->u.a.n; i++) {
                put_indent(R, b, lvl * ind + ind);
                tpl_put_json(R, b, v->u.a.v[i], lvl + 1, indent, isep, ksep);
                if (i + 1 < v->u.a.n) tpl_sb_puts(R, b, isep);
                tpl_sb_puts(R, b, nl);
            }
            put_indent(R, b, lvl * ind);
        }
        tpl_sb_putc(R, b, ']');
        break;
    case VT_OBJECT:
        tpl_sb_putc(R, b, '{');
        if (v->u.o.n) {
            tpl_sb_puts(R, b, nl);
            for (size_t i = 0; i < v->u.o.n; i++) {
                put_indent(R, b, lvl * ind + ind);
                sbuf k = {0};
                tpl_put_string(R, &k, v->u.o.k[i]);
                put_json_str(R, b, k.p ? k.p : "", k.n);
                tpl_sb_puts(R, b, ksep);
                tpl_put_json(R, b, v->u.o.v[i], lvl + 1, indent, isep, ksep);
                if (i + 1 < v->u.o.n) tpl_sb_puts(R, b, isep);
                tpl_sb_puts(R, b, nl);
            }
            put_indent(R, b, lvl * ind);
        }
        tpl_sb_putc(R, b, '}');
        break;
    default: tpl_sb_puts(R, b, "null"); break;
    }
}

/* is_immutable / is_hashable as llama.cpp defines them (object keys, ==) */
static int v_immutable(const val *v) { return v->t != VT_ARRAY && v->t != VT_OBJECT; }
int tpl_v_hashable(const val *v) {
    switch (v->t) {
    case VT_UNDEF: case VT_FUNC: return 0;
    case VT_ARRAY: case VT_TUPLE:
        for (size_t i = 0; i < v->u.a.n; i++)
            if (!v_immutable(v->u.a.v[i]) || !tpl_v_hashable(v->u.a.v[i])) return 0;
        return 1;
    case VT_OBJECT:
        for (size_t i = 0; i < v->u.o.n; i++)
            if (!v_immutable(v->u.o.v[i]) || !tpl_v_hashable(v->u.o.v[i])) return 0;
        return 1;
    default: return 1;
    }
}

/* `==`: llama.cpp's value_t::equivalent */
int tpl_v_equal(const val *a, const val *b) {
    switch (a->t) {
    case VT_INT: case VT_FLOAT: case VT_BOOL:
        return is_numeric_b(b) && tpl_v_int(a) == tpl_v_int(b) && tpl_v_flt(a) == tpl_v_flt(b);
    case VT_STR:
        return b->t == VT_STR && a->u.s.n == b->u.s.n && !memcmp(a->u.s.p, b->u.s.p, a->u.s.n);
    case VT_NONE: return b->t == VT_NONE;
    case VT_UNDEF: return b->t == VT_UNDEF;
    case VT_ARRAY: case VT_TUPLE:
        if (a->t != b->t || !tpl_v_hashable(a) || !tpl_v_hashable(b) || a->u.a.n != b->u.a.n) return 0;
        for (size_t i = 0; i < a->u.a.n; i++)
            if (!tpl_v_equal(a->u.a.v[i], b->u.a.v[i])) return 0;
        return 1;
    case VT_OBJECT:
        if (b->t != VT_OBJECT || !tpl_v_hashable(a) || !tpl_v_hashable(b) || a->u.o.n != b->u.o.n) return 0;
        for (size_t i = 0; i < a->u.o.n; i++)
            if (!tpl_v_equal(a->u.o.k[i], b->u.o.k[i]) || !tpl_v_equal(a->u.o.v[i], b->u.o.v[i])) return 0;
        return 1;
    case VT_FUNC:
        return b->t == VT_FUNC && a->u.fn.kind == FN_BUILTIN && b->u.fn.kind == FN_BUILTIN &&
               a->u.fn.fn == b->u.fn.fn;
    default: return 0;
    }
}

static void check_key(rt *R, const val *k) {
    if (!v_immutable(k) || !tpl_v_hashable(k)) tpl_fail(R, "Object key of unhashable type: %s", tpl_type_name(k));
}

long tpl_obj_find(rt *R, const val *o, const val *k) {
    check_key(R, k);
    for (size_t i = 0; i < o->u.o.n; i++)
        if (tpl_v_equal(o->u.o.k[i], k)) return (long)i;
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

void tpl_obj_set(rt *R, val *o, val *k, val *v) {
    long i = tpl_obj_find(R, o, k);
    if (i >= 0) { o->u.o.v[i] = v; return; }
    if (o->u.o.n == o->u.o.cap) {
        size_t cap = o->u.o.cap ? o->u.o.cap * 2 : 4;
        val **nk = tpl_ralloc(R, tpl_mul_sz(R, cap, sizeof *nk));
        val **nv = tpl_ralloc(R, tpl_mul_sz(R, cap, sizeof *nv));
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

void tpl_obj_set_s(rt *R, val *o, const char *k, val *v) { tpl_obj_set(R, o, tpl_mk_str(R, k), v); }

val *tpl_obj_get_s(const val *o, const char *k) {
    long i = obj_find_s(o, k);
    return i >= 0 ? o->u.o.v[i] : NULL;
}

/* stats: llama.cpp marks values it reads; the caps probe reads the marks */
void tpl_mark_used(rt *R, val *v, int deep) {
    if (!R->stats || !v) return;
    v->used = 1;
    if (!deep) return;
    if (tpl_is_arr(v))
        for (size_t i = 0; i < v->u.a.n; i++) tpl_mark_used(R, v->u.a.v[i], 1);
    else if (v->t == VT_OBJECT)
        for (size_t i = 0; i < v->u.o.n; i++) {
            tpl_mark_used(R, v->u.o.k[i], 1);
            tpl_mark_used(R, v->u.o.v[i], 1);
        }
}
void tpl_mark_op(rt *R, val *v, const char *op) {
    if (!R->stats || !v) return;
    if (!strcmp(op, "test_is_string")) v->ops |= OP_TEST_IS_STRING;
    else if (!strcmp(op, "selectattr")) v->ops |= OP_SELECTATTR;
    else if (!strcmp(op, "array_access")) v->ops |= OP_ARRAY_ACCESS;
}

/* ------------------------------------------------------------------ env */

env *tpl_env_new(rt *R) { return tpl_rzalloc(R, sizeof(env)); }

static long env_find(const env *E, const char *name) {
    for (size_t i = 0; i < E->n; i++)
        if (!strcmp(E->names[i], name)) return (long)i;
    return -1;
}

void tpl_env_set(rt *R, env *E, const char *name, val *v) {
    long i = env_find(E, name);
    if (i >= 0) { E->vals[i] = v; return; }
    if (E->n == E->cap) {
        size_t cap = E->cap ? E->cap * 2 : 16;
        const char **nn = tpl_ralloc(R, tpl_mul_sz(R, cap, sizeof *nn));
        val **nv = tpl_ralloc(R, tpl_mul_sz(R, cap, sizeof *nv));
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

val *tpl_env_get(const env *E, const char *name) {
    long i = env_find(E, name);
    return i >= 0 ? E->vals[i] : NULL;
}

/* a new scope starts as a copy of its parent (values shared) */
env *tpl_env_copy(rt *R, const env *P) {
    env *E = tpl_env_new(R);
    E->cap = P->n > 16 ? P->n : 16;
    E->names = tpl_ralloc(R, tpl_mul_sz(R, E->cap, sizeof *E->names));
    E->vals = tpl_ralloc(R, tpl_mul_sz(R, E->cap, sizeof *E->vals));
    if (P->n) {
        memcpy(E->names, P->names, P->n * sizeof *E->names);
        memcpy(E->vals, P->vals, P->n * sizeof *E->vals);
    }
    E->n = P->n;
    return E;
}

void tpl_args_push(rt *R, args *A, val *v) {
    if (A->n == A->cap) {
        size_t cap = A->cap ? A->cap * 2 : 4;
        val **nv = tpl_ralloc(R, tpl_mul_sz(R, cap, sizeof *nv));
        if (A->n) memcpy(nv, A->v, A->n * sizeof *nv);
        A->v = nv;
        A->cap = cap;
    }
    A->v[A->n++] = v;
}

val *tpl_get_pos(rt *R, args *A, size_t i) {
    if (i < A->n) return A->v[i];
    tpl_fail(R, "function '%s' expected at least %zu arguments, got %zu", A->fname, i + 1, A->n);
}

val *tpl_get_pos_d(args *A, size_t i, val *d) { return i < A->n ? A->v[i] : d; }

val *tpl_get_kwarg(args *A, const char *key, val *d) {
    for (size_t i = 0; i < A->n; i++)
        if (A->v[i]->t == VT_KWARG && !strcmp(A->v[i]->u.kw.key, key)) return A->v[i]->u.kw.v;
    return d;
}

val *tpl_kwarg_or_pos(rt *R, args *A, const char *key, size_t pos) {
    val *v = tpl_get_kwarg(A, key, NULL);
    if (v && v->t != VT_UNDEF) return v;
    if (pos < A->n && A->v[pos]->t != VT_KWARG) return A->v[pos];
    return v ? v : tpl_mk_undef(R, NULL);
}

void tpl_ensure_count(rt *R, args *A, size_t min, size_t max) {
    if (A->n < min || A->n > max)
        tpl_fail(R, "function '%s' expected between %zu and %zu arguments, got %zu", A->fname, min, max,
             A->n);
}

/* ensure_vals<...>: `types` holds one type letter per argument, upper case
 * when required: A array, S string, I int, F float, B bool, O object, '.' any */
static int type_ok(const val *v, char t) {
    switch (t | 0x20) {
    case 'a': return tpl_is_arr(v);
    case 's': return v->t == VT_STR;
    case 'i': return v->t == VT_INT;
    case 'f': return v->t == VT_FLOAT;
    case 'b': return v->t == VT_BOOL;
    case 'o': return v->t == VT_OBJECT;
    default: return 1;
    }
}

void tpl_ensure_vals(rt *R, args *A, const char *types) {
    size_t req = 0;
    for (const char *p = types; *p; p++) req += (*p >= 'A' && *p <= 'Z');
    tpl_ensure_count(R, A, req, 999);
    for (size_t i = 0; types[i]; i++)
        if (types[i] >= 'A' && types[i] <= 'Z' && i < A->n && !type_ok(A->v[i], types[i]))
            tpl_fail(R, "function '%s' expected a different type, got %s", A->fname, tpl_type_name(A->v[i]));
}

int tpl_test_in(rt *R, val *needle, val *hay) {
    if (hay->t == VT_UNDEF) return 0;
    if (tpl_is_arr(hay)) {
        for (size_t i = 0; i < hay->u.a.n; i++)
            if (tpl_v_equal(needle, hay->u.a.v[i])) return 1;
        return 0;
    }
    if (hay->t == VT_STR) {
        if (needle->t != VT_STR) tpl_fail(R, "'in' test expects a string needle, got %s", tpl_type_name(needle));
        return memmem(hay->u.s.p, hay->u.s.n, needle->u.s.p, needle->u.s.n) != NULL;
    }
    if (hay->t == VT_OBJECT) return tpl_obj_find(R, hay, needle) >= 0;
    tpl_fail(R, "'in' test expects an iterable, got %s", tpl_type_name(hay));
}

/* ------------------------------------------------------------ entry helpers */

/* JSON tree to values (llama.cpp's from_json): integers stay integers */
val *tpl_from_json(rt *R, const json_value *j) {
    switch (j->type) {
    case JSON_NULL: return tpl_mk_none(R);
    case JSON_FALSE: return tpl_mk_bool(R, 0);
    case JSON_TRUE: return tpl_mk_bool(R, 1);
    case JSON_NUMBER: {
        int64_t i;
        if (!strpbrk(j->str, ".eE") && json_as_i64(j, &i)) return tpl_mk_int(R, i);
        return tpl_mk_float(R, strtod(j->str, NULL));
    }
    case JSON_STRING: return tpl_mk_strn(R, j->str, j->len);
    case JSON_ARRAY: {
        val *a = tpl_mk_arr(R, VT_ARRAY);
        for (size_t i = 0; i < j->n; i++) tpl_arr_push(R, a, tpl_from_json(R, j->items[i]));
        return a;
    }
    default: {
        val *o = tpl_mk_obj(R);
        for (size_t i = 0; i < j->n; i++)
            tpl_obj_set(R, o, tpl_mk_strn(R, j->keys[i], j->key_lens[i]), tpl_from_json(R, j->items[i]));
        return o;
    }
    }
}

env *tpl_base_env(rt *R) {
    env *E = tpl_env_new(R);
    tpl_env_set(R, E, "true", tpl_mk_bool(R, 1));
    tpl_env_set(R, E, "True", tpl_mk_bool(R, 1));
    tpl_env_set(R, E, "false", tpl_mk_bool(R, 0));
    tpl_env_set(R, E, "False", tpl_mk_bool(R, 0));
    tpl_env_set(R, E, "none", tpl_mk_none(R));
    tpl_env_set(R, E, "None", tpl_mk_none(R));
    return E;
}

void tpl_rt_init(rt *R, char *err, size_t errlen, int64_t now) {
    memset(R, 0, sizeof *R);
    R->err = err;
    R->errlen = errlen;
    R->now = now ? (time_t)now : time(NULL);
    if (err && errlen) err[0] = 0;
}
