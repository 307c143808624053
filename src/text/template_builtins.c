/*
 * template_builtins.c -- what templates call (see template_int.h): global
 * functions (range, namespace, strftime_now, raise_exception, tojson), the
 * tests (`is string`, ...), and the filters and methods of each value type
 * (numbers, booleans, strings, arrays, objects, none, undefined), each table
 * listing the names llama.cpp's engine knows for that type.
 */
#include "text/template_int.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* -------------------------------------------------------------- builtins */

#define A0 (A->v[0])

static val *empty_arr(rt *R, args *A) { (void)A; return tpl_mk_arr(R, VT_ARRAY); }
static val *empty_str(rt *R, args *A) { (void)A; return tpl_mk_str(R, ""); }
static val *empty_int(rt *R, args *A) { (void)A; return tpl_mk_int(R, 0); }
static val *empty_undef(rt *R, args *A) { (void)A; return tpl_mk_undef(R, NULL); }

/* default(value, default_value, boolean=false): none counts as missing too */
static val *f_default(rt *R, args *A) {
    tpl_ensure_count(R, A, 2, 3);
    int check_bool = tpl_as_bool(R, tpl_kwarg_or_pos(R, A, "boolean", 2));
    val *in = tpl_get_pos(R, A, 0);
    int missing = check_bool ? !tpl_as_bool(R, in) : (in->t == VT_UNDEF || in->t == VT_NONE);
    return missing ? tpl_get_pos(R, A, 1) : in;
}

/* tojson(value, ensure_ascii, indent, separators, sort_keys) */
static void ensure_ascii(rt *R, sbuf *out, const char *s, size_t n) {
    int in_str = 0, esc = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (!in_str) { tpl_sb_putc(R, out, (char)c); in_str = c == '"'; i++; continue; }
        if (esc) { tpl_sb_putc(R, out, (char)c); esc = 0; i++; continue; }
        if (c == '\\') { tpl_sb_putc(R, out, '\\'); esc = 1; i++; continue; }
        if (c == '"') { tpl_sb_putc(R, out, '"'); in_str = 0; i++; continue; }
        if (c < 0x80) { tpl_sb_putc(R, out, (char)c); i++; continue; }
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
        if (!ok) { tpl_sb_puts(R, out, "\\ufffd"); i++; continue; }
        if (cp <= 0xffff) {
            tpl_sb_printf(R, out, "\\u%04x", cp);
        } else {
            cp -= 0x10000;
            tpl_sb_printf(R, out, "\\u%04x\\u%04x", 0xd800 + ((cp >> 10) & 0x3ff), 0xdc00 + (cp & 0x3ff));
        }
        i += len;
    }
}

static val *f_tojson(rt *R, args *A) {
    tpl_ensure_count(R, A, 1, 5);
    val *ascii = tpl_kwarg_or_pos(R, A, "ensure_ascii", 1);
    val *ind = tpl_kwarg_or_pos(R, A, "indent", 2);
    val *seps = tpl_kwarg_or_pos(R, A, "separators", 3);
    val *sort = tpl_kwarg_or_pos(R, A, "sort_keys", 4);
    tpl_mark_used(R, tpl_get_pos(R, A, 0), 1);
    int indent = ind->t == VT_INT ? (int)ind->u.i : -1;
    if (ind->t == VT_INT && (ind->u.i > 64 || ind->u.i < -1)) tpl_fail(R, "tojson: indent too large");
    if (tpl_as_bool(R, sort)) tpl_fail(R, "tojson sort_keys=true is not implemented (as in llama.cpp)");
    const char *isep = indent < 0 ? ", " : ",", *ksep = ": ";
    if (tpl_is_arr(seps)) {
        if (seps->u.a.n > 0) isep = tpl_to_str(R, seps->u.a.v[0])->u.s.p;
        if (seps->u.a.n > 1) ksep = tpl_to_str(R, seps->u.a.v[1])->u.s.p;
    }
    sbuf b = {0};
    tpl_put_json(R, &b, tpl_get_pos(R, A, 0), 0, indent, isep, ksep);
    if (tpl_as_bool(R, ascii)) {
        sbuf c = {0};
        ensure_ascii(R, &c, b.p, b.n);
        return tpl_mk_sb(R, &c);
    }
    return tpl_mk_sb(R, &b);
}

/* ---- globals */

/* raise_exception: llama.cpp's words, the CallExpression's place (line and
 * column counted in bytes) and 40 bytes of source either side of it, newlines
 * shown as U+21B5, a caret under it */
static val *g_raise(rt *R, args *A) {
    tpl_ensure_vals(R, A, "S");
    size_t pos = R->cur ? R->cur->pos : 0, line = 1, col = 1;
    const char *src = R->src ? R->src : "";
    size_t len = R->src ? R->srclen : 0;
    for (size_t i = 0; i < pos && i < len; i++) {
        if (src[i] == '\n') line++, col = 1;
        else col++;
    }
    sbuf b = {0};
    tpl_sb_printf(R, &b, "\n------------\nWhile executing CallExpression at line %zu, column %zu in source:\n", line, col);
    if (!len) {
        tpl_sb_puts(R, &b, "(no source available)");
    } else {
        size_t start = pos >= 40 ? pos - 40 : 0, end = pos + 40 < len ? pos + 40 : len;
        tpl_sb_puts(R, &b, "...");
        for (size_t i = start; i < end; i++) {
            if (src[i] == '\n') tpl_sb_puts(R, &b, "\xe2\x86\xb5");
            else tpl_sb_putc(R, &b, src[i]);
        }
        tpl_sb_puts(R, &b, "...\n");
        for (size_t i = 0; i < pos - start + 3; i++) tpl_sb_putc(R, &b, ' ');
        tpl_sb_putc(R, &b, '^');
    }
    R->raised = 1;
    tpl_fail(R, "%s\nError: Jinja Exception: %s", b.p ? b.p : "", A0->u.s.p);
}

static val *g_namespace(rt *R, args *A) {
    val *o = tpl_mk_obj(R);
    for (size_t i = 0; i < A->n; i++) {
        if (A->v[i]->t != VT_KWARG) tpl_fail(R, "namespace() arguments must be kwargs");
        tpl_obj_set_s(R, o, A->v[i]->u.kw.key, A->v[i]->u.kw.v);
    }
    return o;
}

static val *g_strftime_now(rt *R, args *A) {
    tpl_ensure_vals(R, A, "S");
    char buf[100];
    struct tm tm;
    localtime_r(&R->now, &tm);
    size_t n = strftime(buf, sizeof buf, A0->u.s.p, &tm);
    if (!n) tpl_fail(R, "strftime_now: failed to format time");
    return tpl_mk_strn(R, buf, n);
}

static val *g_range(rt *R, args *A) {
    tpl_ensure_count(R, A, 1, 3);
    tpl_ensure_vals(R, A, "Iii");
    int64_t start = 0, stop, stepv = 1;
    if (A->n == 1) {
        stop = tpl_as_int(R, A0);
    } else {
        start = tpl_as_int(R, A0);
        stop = tpl_as_int(R, A->v[1]);
        if (A->n == 3) stepv = tpl_as_int(R, A->v[2]);
    }
    if (stepv == 0) tpl_fail(R, "range() step argument must not be zero");
    val *out = tpl_mk_arr(R, VT_ARRAY);
    for (int64_t i = start; stepv > 0 ? i < stop : i > stop; i += stepv) {
        tpl_step(R);
        tpl_arr_push(R, out, tpl_mk_int(R, i));
        if ((stepv > 0 && i > INT64_MAX - stepv) || (stepv < 0 && i < INT64_MIN - stepv)) break;
    }
    return out;
}

/* value_compare: the comparisons tests and sort use (not `==`) */
enum { CMP_EQ, CMP_GE, CMP_GT, CMP_LT, CMP_NE };
static int value_compare(rt *R, val *a, val *b, int op) {
    if (tpl_is_num(a) && tpl_is_num(b)) {
        double x = tpl_v_flt(a), y = tpl_v_flt(b);
        switch (op) {
        case CMP_EQ: return x == y;
        case CMP_GE: return x >= y;
        case CMP_GT: return x > y;
        case CMP_LT: return x < y;
        default: return x != y;
        }
    }
    if ((b->t == VT_STR && tpl_is_num(a)) || (a->t == VT_STR && tpl_is_num(b)) ||
        (a->t == VT_STR && b->t == VT_STR)) {
        val *x = tpl_to_str(R, a), *y = tpl_to_str(R, b);
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
        tpl_fail(R, "unsupported comparison operator for bool type");
    }
    return 0;
}

static val *t_cmp(rt *R, args *A, int op) {
    tpl_ensure_count(R, A, 2, 2);
    return tpl_mk_bool(R, value_compare(R, A0, A->v[1], op));
}
static val *t_eq(rt *R, args *A) { return t_cmp(R, A, CMP_EQ); }
static val *t_ge(rt *R, args *A) { return t_cmp(R, A, CMP_GE); }
static val *t_gt(rt *R, args *A) { return t_cmp(R, A, CMP_GT); }
static val *t_lt(rt *R, args *A) { return t_cmp(R, A, CMP_LT); }
static val *t_ne(rt *R, args *A) { return t_cmp(R, A, CMP_NE); }

static val *t_type(rt *R, args *A, int t1, int t2, int t3) {
    tpl_ensure_count(R, A, 1, 999);
    int t = A0->t;
    if (t == VT_TUPLE && (t1 == VT_ARRAY || t2 == VT_ARRAY)) t = VT_ARRAY;
    return tpl_mk_bool(R, t == t1 || t == t2 || t == t3);
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
static val *t_defined(rt *R, args *A) { tpl_ensure_count(R, A, 1, 999); return tpl_mk_bool(R, A0->t != VT_UNDEF); }
static val *t_odd(rt *R, args *A) { tpl_ensure_vals(R, A, "I"); return tpl_mk_bool(R, A0->u.i % 2 != 0); }
static val *t_even(rt *R, args *A) { tpl_ensure_vals(R, A, "I"); return tpl_mk_bool(R, A0->u.i % 2 == 0); }
static val *t_false(rt *R, args *A) { tpl_ensure_count(R, A, 1, 999); return tpl_mk_bool(R, A0->t == VT_BOOL && !A0->u.b); }
static val *t_true(rt *R, args *A) { tpl_ensure_count(R, A, 1, 999); return tpl_mk_bool(R, A0->t == VT_BOOL && A0->u.b); }
static val *t_divisibleby(rt *R, args *A) {
    tpl_ensure_vals(R, A, "II");
    if (A->v[1]->u.i == 0) tpl_fail(R, "divisibleby(0)");
    if (A->v[1]->u.i == -1) return tpl_mk_bool(R, 1);
    return tpl_mk_bool(R, A0->u.i % A->v[1]->u.i == 0);
}
static int str_all(const val *v, int (*bad)(int)) {
    for (size_t i = 0; i < v->u.s.n; i++)
        if (bad((unsigned char)v->u.s.p[i])) return 0;
    return 1;
}
static val *t_lower(rt *R, args *A) { tpl_ensure_vals(R, A, "S"); return tpl_mk_bool(R, str_all(A0, isupper)); }
static val *t_upper(rt *R, args *A) { tpl_ensure_vals(R, A, "S"); return tpl_mk_bool(R, str_all(A0, islower)); }
static val *t_in(rt *R, args *A) { tpl_ensure_count(R, A, 2, 999); return tpl_mk_bool(R, tpl_test_in(R, A0, A->v[1])); }
static val *t_test(rt *R, args *A) {
    tpl_ensure_vals(R, A, "S");
    char name[96];
    snprintf(name, sizeof name, "test_is_%s", A0->u.s.p);
    return tpl_mk_bool(R, tpl_find_builtin(tpl_global_builtins, name) != NULL);
}
static val *t_unimpl(rt *R, args *A) { tpl_fail(R, "test '%s' is not implemented (as in llama.cpp)", A->fname); }

const builtin tpl_global_builtins[] = {
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
    tpl_ensure_count(R, A, 1, 999);
    if (A0->t == VT_INT) return tpl_mk_int(R, A0->u.i < 0 ? (int64_t)(0 - (uint64_t)A0->u.i) : A0->u.i);
    tpl_ensure_vals(R, A, "F");
    return tpl_mk_float(R, A0->u.f < 0 ? -A0->u.f : A0->u.f);
}
static val *n_int(rt *R, args *A) {
    tpl_ensure_count(R, A, 1, 999);
    if (A0->t == VT_BOOL) return tpl_mk_int(R, A0->u.b);
    return tpl_mk_int(R, tpl_v_int(A0));
}
static val *n_float(rt *R, args *A) {
    tpl_ensure_count(R, A, 1, 999);
    if (A0->t == VT_INT) return tpl_mk_float(R, (double)A0->u.i);
    if (A0->t == VT_BOOL) return tpl_mk_float(R, A0->u.b ? 1.0 : 0.0);
    return tpl_mk_float(R, A0->u.f);
}
static val *b_string(rt *R, args *A) {
    tpl_ensure_vals(R, A, "B");
    return tpl_mk_str(R, A0->u.b ? "True" : "False");
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
    val *v = tpl_mk_strn(R, p, n);
    (void)src;
    return v;
}

static val *s_case(rt *R, args *A, int (*fn)(int)) {
    tpl_ensure_vals(R, A, "S");
    val *v = tpl_mk_strn(R, A0->u.s.p, A0->u.s.n);
    for (size_t i = 0; i < v->u.s.n; i++) v->u.s.p[i] = (char)fn((unsigned char)v->u.s.p[i]);
    v->multipart = A0->multipart;
    return v;
}
static val *s_upper(rt *R, args *A) { return s_case(R, A, toupper); }
static val *s_lower(rt *R, args *A) { return s_case(R, A, tolower); }

static val *s_title_cap(rt *R, args *A, int title) {
    tpl_ensure_vals(R, A, "S");
    if (A0->multipart)
        tpl_fail(R, "%s of a string built from several parts is not supported (llama.cpp applies it per part)",
             title ? "title" : "capitalize");
    val *v = tpl_mk_strn(R, A0->u.s.p, A0->u.s.n);
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
    val *chars = tpl_kwarg_or_pos(R, A, "chars", 1);
    const char *set = NULL;
    size_t setn = 0;
    if (chars->t != VT_UNDEF) {
        val *c = tpl_to_str(R, chars);
        set = c->u.s.p;
        setn = c->u.s.n;
    }
    const char *p = A0->u.s.p;
    size_t a = 0, b = A0->u.s.n;
#define STRIP_M(c) (set ? memchr(set, (c), setn) != NULL : isspace((unsigned char)(c)))
    if (left) while (a < b && STRIP_M(p[a])) a++;
    if (right) while (b > a && STRIP_M(p[b - 1])) b--;
#undef STRIP_M
    val *v = tpl_mk_strn(R, p + a, b - a);
    v->multipart = A0->multipart;
    return v;
}
static val *s_strip(rt *R, args *A) {
    if (A->n < 1 || A0->t != VT_STR) tpl_fail(R, "strip() first argument must be a string");
    return s_strip_gen(R, A, 1, 1);
}
static val *s_lstrip(rt *R, args *A) { tpl_ensure_vals(R, A, "S"); return s_strip_gen(R, A, 1, 0); }
static val *s_rstrip(rt *R, args *A) { tpl_ensure_vals(R, A, "S"); return s_strip_gen(R, A, 0, 1); }
static val *s_length(rt *R, args *A) { tpl_ensure_vals(R, A, "S"); return tpl_mk_int(R, (int64_t)A0->u.s.n); }
static val *s_startswith(rt *R, args *A) {
    tpl_ensure_vals(R, A, "SS");
    val *p = A->v[1];
    return tpl_mk_bool(R, A0->u.s.n >= p->u.s.n && !memcmp(A0->u.s.p, p->u.s.p, p->u.s.n));
}
static val *s_endswith(rt *R, args *A) {
    tpl_ensure_vals(R, A, "SS");
    val *p = A->v[1];
    return tpl_mk_bool(R, A0->u.s.n >= p->u.s.n &&
                          !memcmp(A0->u.s.p + A0->u.s.n - p->u.s.n, p->u.s.p, p->u.s.n));
}
static val *s_split_gen(rt *R, args *A, int rev) {
    tpl_ensure_count(R, A, 1, 3);
    if (A0->t != VT_STR) tpl_fail(R, "split() first argument must be a string");
    val *d = A->n > 1 ? tpl_to_str(R, A->v[1]) : tpl_mk_str(R, " ");
    if (!d->u.s.n) tpl_fail(R, "empty separator");
    int64_t maxsplit = A->n > 2 ? tpl_as_int(R, A->v[2]) : -1;
    const char *p = A0->u.s.p;
    size_t n = A0->u.s.n, dn = d->u.s.n;
    val *out = tpl_mk_arr(R, VT_ARRAY);
    if (!rev) {
        size_t s = 0;
        const char *hit;
        while (maxsplit != 0 && (hit = memmem(p + s, n - s, d->u.s.p, dn)) != NULL) {
            tpl_step(R);
            tpl_arr_push(R, out, tpl_mk_strn(R, p + s, (size_t)(hit - (p + s))));
            s = (size_t)(hit - p) + dn;
            maxsplit--;
        }
        tpl_arr_push(R, out, tpl_mk_strn(R, p + s, n - s));
        return out;
    }
    size_t e = n;
    while (maxsplit != 0) {
        const char *hit = NULL;
        for (size_t i = e >= dn ? e - dn + 1 : 0; i-- > 0;)
            if (!memcmp(p + i, d->u.s.p, dn)) { hit = p + i; break; }
        if (!hit) break;
        tpl_step(R);
        size_t pos = (size_t)(hit - p);
        tpl_arr_push(R, out, tpl_mk_strn(R, p + pos + dn, e - pos - dn));
        e = pos;
        maxsplit--;
    }
    tpl_arr_push(R, out, tpl_mk_strn(R, p, e));
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
    tpl_ensure_vals(R, A, "SSSi");
    if (A->n > 3 && tpl_as_int(R, A->v[3]) > 0)
        tpl_fail(R, "replace with a count argument is not implemented (as in llama.cpp)");
    val *s = A0, *o = A->v[1], *w = A->v[2];
    if (o->u.s.n == w->u.s.n && !memcmp(o->u.s.p, w->u.s.p, o->u.s.n))
        return tpl_mk_strn(R, s->u.s.p, s->u.s.n);
    sbuf b = {0};
    if (!o->u.s.n) {
        tpl_sb_put(R, &b, w->u.s.p, w->u.s.n);
        for (size_t i = 0; i < s->u.s.n; i++) {
            tpl_sb_putc(R, &b, s->u.s.p[i]);
            tpl_sb_put(R, &b, w->u.s.p, w->u.s.n);
        }
    } else {
        size_t i = 0;
        const char *hit;
        while ((hit = memmem(s->u.s.p + i, s->u.s.n - i, o->u.s.p, o->u.s.n)) != NULL) {
            size_t at = (size_t)(hit - s->u.s.p);
            tpl_sb_put(R, &b, s->u.s.p + i, at - i);
            tpl_sb_put(R, &b, w->u.s.p, w->u.s.n);
            i = at + o->u.s.n;
        }
        tpl_sb_put(R, &b, s->u.s.p + i, s->u.s.n - i);
    }
    return tpl_mk_sb(R, &b);
}

static val *s_format(rt *R, args *A) {
    if (A->n < 1 || A0->t != VT_STR) tpl_fail(R, "format() first argument must be a string");
    const char *p = A0->u.s.p;
    size_t n = A0->u.s.n, ai = 1;
    sbuf b = {0};
    size_t lit = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '{') continue;
        if (i + 1 >= n || p[i + 1] != '}') tpl_fail(R, "format() only supports '{}' placeholders");
        tpl_sb_put(R, &b, p + lit, i - lit);
        if (i > lit) b.parts++;
        val *x = tpl_to_str(R, tpl_get_pos(R, A, ai++));
        tpl_sb_put(R, &b, x->u.s.p, x->u.s.n);
        if (x->u.s.n) b.parts += x->multipart ? 2 : 1;
        i++;
        lit = i + 1;
    }
    tpl_sb_put(R, &b, p + lit, n - lit);
    if (n > lit) b.parts++;
    return tpl_mk_sb(R, &b);
}

static val *s_int(rt *R, args *A) {
    val *in = tpl_get_pos(R, A, 0);
    val *def = tpl_kwarg_or_pos(R, A, "default", 1);
    val *bv = tpl_kwarg_or_pos(R, A, "base", 2);
    int base = bv->t == VT_UNDEF ? 10 : (int)tpl_as_int(R, bv);
    if (base != 0 && (base < 2 || base > 36)) tpl_fail(R, "int() base must be 0 or between 2 and 36");
    if (in->t != VT_STR) tpl_fail(R, "int() first argument must be a string");
    char *end;
    errno = 0;
    long v = strtol(in->u.s.p, &end, base);
    if (end == in->u.s.p || errno == ERANGE || v > INT_MAX || v < INT_MIN)
        return tpl_mk_int(R, def->t == VT_UNDEF ? 0 : tpl_as_int(R, def));
    return tpl_mk_int(R, v);
}
static val *s_float(rt *R, args *A) {
    tpl_ensure_vals(R, A, "S");
    val *def = tpl_kwarg_or_pos(R, A, "default", 1);
    char *end;
    errno = 0;
    double v = strtod(A0->u.s.p, &end);
    if (end == A0->u.s.p || errno == ERANGE)
        return tpl_mk_float(R, def->t == VT_UNDEF ? 0.0 : tpl_as_float(R, def));
    return tpl_mk_float(R, v);
}
static val *s_string(rt *R, args *A) {
    tpl_ensure_vals(R, A, "S");
    val *v = tpl_mk_strn(R, A0->u.s.p, A0->u.s.n);
    v->multipart = A0->multipart;
    return v;
}
static val *s_safe(rt *R, args *A) { tpl_ensure_vals(R, A, "S"); return A0; }
static val *s_join(rt *R, args *A) { (void)A; tpl_fail(R, "join on a string is not implemented (as in llama.cpp)"); }

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
    tpl_ensure_count(R, A, 1, 4);
    val *a0 = tpl_get_pos(R, A, 1);
    val *a1 = tpl_get_pos_d(A, 2, NULL), *a2 = tpl_get_pos_d(A, 3, NULL);
    *stepv = 1;
    if (A->n == 2) { *start = 0; *stop = tpl_as_int(R, a0); }
    else if (A->n == 3) { *start = tpl_as_int(R, a0); *stop = tpl_as_int(R, a1); }
    else { *start = tpl_as_int(R, a0); *stop = tpl_as_int(R, a1); *stepv = tpl_as_int(R, a2); }
    if (*stepv == 0) tpl_fail(R, "slice step cannot be zero");
}

static val *s_slice(rt *R, args *A) {
    tpl_ensure_count(R, A, 1, 4);
    tpl_ensure_vals(R, A, "SIii");
    int64_t st, sp, stp;
    slice_args(R, A, &st, &sp, &stp);
    size_t len = A0->u.s.n;
    int64_t *idx = tpl_ralloc(R, tpl_mul_sz(R, len + 1, sizeof *idx));
    size_t n = slice_idx((int64_t)len, st, sp, stp, idx, len);
    char *buf = tpl_ralloc(R, n + 1);
    for (size_t i = 0; i < n; i++) buf[i] = A0->u.s.p[idx[i]];
    return str_like(R, A0, buf, n);
}

static val *s_indent(rt *R, args *A) {
    tpl_ensure_count(R, A, 1, 4);
    val *in = tpl_get_pos(R, A, 0);
    val *w = tpl_kwarg_or_pos(R, A, "width", 1);
    int first = tpl_as_bool(R, tpl_kwarg_or_pos(R, A, "first", 2));
    int blank = tpl_as_bool(R, tpl_kwarg_or_pos(R, A, "blank", 3));
    if (in->t != VT_STR) tpl_fail(R, "indent() first argument must be a string");
    sbuf ind = {0};
    if (w->t == VT_INT) {
        if (w->u.i > 4096) tpl_fail(R, "indent width too large");
        for (int64_t i = 0; i < w->u.i; i++) tpl_sb_putc(R, &ind, ' ');
    } else if (w->t == VT_STR) {
        tpl_sb_put(R, &ind, w->u.s.p, w->u.s.n);
    } else {
        tpl_sb_puts(R, &ind, "    ");
    }
    sbuf b = {0};
    const char *p = in->u.s.p;
    size_t n = in->u.s.n, s = 0;
    while (s < n) {                         /* std::getline over the lines */
        const char *nlp = memchr(p + s, '\n', n - s);
        size_t e = nlp ? (size_t)(nlp - p) : n;
        int empty_out = b.n == 0;
        if (!empty_out) tpl_sb_putc(R, &b, '\n');
        if (empty_out ? first : (e > s || blank)) tpl_sb_put(R, &b, ind.p, ind.n);
        tpl_sb_put(R, &b, p + s, e - s);
        s = nlp ? e + 1 : n;
    }
    if (n && p[n - 1] == '\n') {
        tpl_sb_putc(R, &b, '\n');
        if (blank) tpl_sb_put(R, &b, ind.p, ind.n);
    }
    return tpl_mk_sb(R, &b);
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

static val *a_copy_kind(rt *R, val *src) { return tpl_mk_arr(R, src->t == VT_TUPLE ? VT_TUPLE : VT_ARRAY); }

static val *a_list(rt *R, args *A) {
    tpl_ensure_vals(R, A, "A");
    val *o = tpl_mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < A0->u.a.n; i++) tpl_arr_push(R, o, A0->u.a.v[i]);
    return o;
}
static val *a_first(rt *R, args *A) {
    tpl_ensure_vals(R, A, "A");
    return A0->u.a.n ? A0->u.a.v[0] : tpl_mk_undef(R, NULL);
}
static val *a_last(rt *R, args *A) {
    tpl_ensure_vals(R, A, "A");
    return A0->u.a.n ? A0->u.a.v[A0->u.a.n - 1] : tpl_mk_undef(R, NULL);
}
static val *a_length(rt *R, args *A) { tpl_ensure_vals(R, A, "A"); return tpl_mk_int(R, (int64_t)A0->u.a.n); }
static val *a_slice(rt *R, args *A) {
    tpl_ensure_count(R, A, 1, 4);
    tpl_ensure_vals(R, A, "AIii");
    int64_t st, sp, stp;
    slice_args(R, A, &st, &sp, &stp);
    size_t len = A0->u.a.n;
    int64_t *idx = tpl_ralloc(R, tpl_mul_sz(R, len + 1, sizeof *idx));
    size_t n = slice_idx((int64_t)len, st, sp, stp, idx, len);
    val *o = a_copy_kind(R, A0);
    for (size_t i = 0; i < n; i++) tpl_arr_push(R, o, A0->u.a.v[idx[i]]);
    return o;
}

static val *run_test(rt *R, args *A, const char *name, val *x, val *extra) {
    char tn[96];
    snprintf(tn, sizeof tn, "test_is_%s", name);
    const builtin *b = tpl_find_builtin(tpl_global_builtins, tn);
    if (!b) tpl_fail(R, "selectattr: unknown test '%s'", name);
    args T = {0};
    T.ctx = A->ctx;
    T.fname = b->name;
    tpl_args_push(R, &T, x);
    tpl_args_push(R, &T, extra);
    return b->fn(R, &T);
}

static val *a_select_gen(rt *R, args *A, int reject) {
    tpl_ensure_count(R, A, 2, 4);
    tpl_ensure_vals(R, A, "ASss");
    val *arr = A0, *attr = A->v[1], *out = tpl_mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < arr->u.a.n; i++) {
        tpl_step(R);
        val *item = arr->u.a.v[i];
        int sel;
        if (A->n == 2) {
            if (item->t != VT_OBJECT) tpl_fail(R, "selectattr: item is not an object");
            long k = tpl_obj_find(R, item, attr);
            sel = k >= 0 && tpl_as_bool(R, item->u.o.v[k]);
        } else if (A->n == 3) {
            sel = tpl_as_bool(R, run_test(R, A, tpl_to_str(R, A->v[1])->u.s.p, item, A->v[2]));
        } else {
            if (item->t != VT_OBJECT) tpl_fail(R, "selectattr: item is not an object");
            long k = tpl_obj_find(R, item, attr);
            val *av = k >= 0 ? item->u.o.v[k] : tpl_mk_undef(R, NULL);
            sel = tpl_as_bool(R, run_test(R, A, tpl_to_str(R, A->v[2])->u.s.p, av, A->v[3]));
        }
        if (reject) sel = !sel;
        if (sel) tpl_arr_push(R, out, item);
    }
    return out;
}
static val *a_select(rt *R, args *A) { return a_select_gen(R, A, 0); }
static val *a_reject(rt *R, args *A) { return a_select_gen(R, A, 1); }

static val *a_join(rt *R, args *A) {
    tpl_ensure_count(R, A, 1, 3);
    if (!tpl_is_arr(A0)) tpl_fail(R, "join() first argument must be an array");
    val *d = tpl_kwarg_or_pos(R, A, "d", 1);
    val *attr = tpl_kwarg_or_pos(R, A, "attribute", 2);
    int attr_int = attr->t == VT_INT;
    if (attr->t != VT_UNDEF && attr->t != VT_STR && !attr_int)
        tpl_fail(R, "join() attribute must be a string or an integer");
    val *ds = d->t == VT_UNDEF ? tpl_mk_str(R, "") : tpl_to_str(R, d);
    sbuf b = {0};
    for (size_t i = 0; i < A0->u.a.n; i++) {
        val *x = A0->u.a.v[i];
        if (attr->t != VT_UNDEF) {
            if (attr_int && tpl_is_arr(x)) {
                int64_t k = attr->u.i;
                if (k < 0) k += (int64_t)x->u.a.n;
                if (k < 0 || k >= (int64_t)x->u.a.n) tpl_fail(R, "join(): index out of bounds");
                x = x->u.a.v[k];
            } else if (!attr_int && x->t == VT_OBJECT) {
                long k = tpl_obj_find(R, x, attr);
                if (k < 0) tpl_fail(R, "join(): key not found");
                x = x->u.o.v[k];
            }
        }
        if (x->t != VT_STR && x->t != VT_INT && x->t != VT_FLOAT)
            tpl_fail(R, "join() can only join arrays of strings or numbers");
        tpl_put_string(R, &b, x);
        if (i + 1 < A0->u.a.n) tpl_sb_put(R, &b, ds->u.s.p, ds->u.s.n);
    }
    return tpl_mk_sb(R, &b);
}
static val *a_string(rt *R, args *A) {
    tpl_ensure_count(R, A, 1, 999);
    tpl_mark_used(R, A0, 1);
    return tpl_to_str(R, A0);
}
static val *a_map(rt *R, args *A) {
    tpl_ensure_count(R, A, 2, 999);
    if (!tpl_is_arr(A0)) tpl_fail(R, "map: first argument must be an array");
    if (A->v[1]->t != VT_KWARG) tpl_fail(R, "map with a filter name is not implemented (as in llama.cpp)");
    val *attr = tpl_kwarg_or_pos(R, A, "attribute", 1);
    int attr_int = attr->t == VT_INT;
    if (attr->t != VT_STR && !attr_int) tpl_fail(R, "map: attribute must be a string or an integer");
    val *def = tpl_get_kwarg(A, "default", NULL);
    if (!def) def = tpl_mk_undef(R, NULL);
    val *out = a_copy_kind(R, A0);
    for (size_t i = 0; i < A0->u.a.n; i++) {
        val *x = A0->u.a.v[i], *r = def;
        if (attr_int) {
            if (tpl_is_arr(x)) {
                int64_t k = attr->u.i;
                if (k < 0) k += (int64_t)x->u.a.n;
                if (k >= 0 && k < (int64_t)x->u.a.n) r = x->u.a.v[k];
            }
        } else if (x->t == VT_OBJECT) {
            long k = tpl_obj_find(R, x, attr);
            if (k >= 0) r = x->u.o.v[k];
        }
        tpl_arr_push(R, out, r);
    }
    return out;
}
static val *a_append(rt *R, args *A) {
    tpl_ensure_count(R, A, 2, 999);
    if (!tpl_is_arr(A0)) tpl_fail(R, "append: first argument must be an array");
    if (A0->t == VT_TUPLE) tpl_fail(R, "attempting to modify an immutable tuple");
    tpl_arr_push(R, A0, A->v[1]);
    return A0;
}
static val *a_pop(rt *R, args *A) {
    tpl_ensure_count(R, A, 1, 2);
    tpl_ensure_vals(R, A, "Ai");
    if (A0->t == VT_TUPLE) tpl_fail(R, "attempting to modify an immutable tuple");
    int64_t idx = A->n == 2 ? tpl_as_int(R, A->v[1]) : -1, n = (int64_t)A0->u.a.n;
    if (idx < 0) idx += n;
    if (idx < 0 || idx >= n) tpl_fail(R, "pop index out of range");
    val *x = A0->u.a.v[idx];
    memmove(A0->u.a.v + idx, A0->u.a.v + idx + 1, (size_t)(n - idx - 1) * sizeof(val *));
    A0->u.a.n--;
    return x;
}
static val *a_sort(rt *R, args *A) {
    tpl_ensure_count(R, A, 1, 4);
    if (!tpl_is_arr(A0)) tpl_fail(R, "sort: first argument must be an array");
    int rev = tpl_as_bool(R, tpl_kwarg_or_pos(R, A, "reverse", 1));
    val *attr = tpl_kwarg_or_pos(R, A, "attribute", 3);
    size_t n = A0->u.a.n;
    val **v = tpl_ralloc(R, tpl_mul_sz(R, n + 1, sizeof *v)), **key = tpl_ralloc(R, tpl_mul_sz(R, n + 1, sizeof *key));
    for (size_t i = 0; i < n; i++) {
        v[i] = key[i] = A0->u.a.v[i];
        if (attr->t != VT_UNDEF) {
            if (attr->t == VT_INT && tpl_is_arr(v[i])) {
                int64_t k = attr->u.i;
                if (k < 0) k += (int64_t)v[i]->u.a.n;
                if (k < 0 || k >= (int64_t)v[i]->u.a.n) tpl_fail(R, "sort: index out of bounds");
                key[i] = v[i]->u.a.v[k];
            } else if (attr->t != VT_INT && v[i]->t == VT_OBJECT) {
                long k = tpl_obj_find(R, v[i], attr);
                if (k < 0) tpl_fail(R, "sort: key not found");
                key[i] = v[i]->u.o.v[k];
            } else {
                tpl_fail(R, "sort: unsupported attribute comparison");
            }
        }
    }
    if (n > 16) tpl_fail(R, "sort of more than 16 items is not supported (std::sort order is not stable)");
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
    for (size_t i = 0; i < n; i++) tpl_arr_push(R, out, v[i]);
    return out;
}
static val *a_reverse(rt *R, args *A) {
    tpl_ensure_vals(R, A, "A");
    val *out = a_copy_kind(R, A0);
    for (size_t i = A0->u.a.n; i-- > 0;) tpl_arr_push(R, out, A0->u.a.v[i]);
    return out;
}
static val *a_minmax(rt *R, args *A, int op) {
    tpl_ensure_count(R, A, 1, 4);
    tpl_ensure_vals(R, A, "A");
    if (tpl_kwarg_or_pos(R, A, "attribute", 2)->t != VT_UNDEF) tpl_fail(R, "min/max with attribute is not implemented");
    if (!A0->u.a.n) return tpl_mk_undef(R, NULL);
    val *r = A0->u.a.v[0];
    for (size_t i = 1; i < A0->u.a.n; i++)
        if (value_compare(R, A0->u.a.v[i], r, op)) r = A0->u.a.v[i];
    return r;
}
static val *a_min(rt *R, args *A) { return a_minmax(R, A, CMP_LT); }
static val *a_max(rt *R, args *A) { return a_minmax(R, A, CMP_GT); }
static val *a_unique(rt *R, args *A) { (void)A; tpl_fail(R, "unique is not implemented (as in llama.cpp)"); }

static const builtin arr_builtins[] = {
    {"default", f_default}, {"list", a_list}, {"first", a_first}, {"last", a_last},
    {"length", a_length}, {"slice", a_slice}, {"selectattr", a_select}, {"select", a_select},
    {"rejectattr", a_reject}, {"reject", a_reject}, {"join", a_join}, {"string", a_string},
    {"tojson", f_tojson}, {"map", a_map}, {"append", a_append}, {"pop", a_pop}, {"sort", a_sort},
    {"reverse", a_reverse}, {"min", a_min}, {"max", a_max}, {"unique", a_unique}, {NULL, NULL}
};

/* ---- objects */

static val *o_get(rt *R, args *A) {
    tpl_ensure_count(R, A, 2, 3);
    if (A0->t != VT_OBJECT) tpl_fail(R, "get: first argument must be an object");
    if (A->v[1]->t != VT_STR) tpl_fail(R, "get: second argument must be a string (key)");
    long k = tpl_obj_find(R, A0, A->v[1]);
    if (k >= 0) return A0->u.o.v[k];
    return A->n == 3 ? A->v[2] : tpl_mk_none(R);
}
static val *o_keys(rt *R, args *A) {
    tpl_ensure_vals(R, A, "O");
    val *o = tpl_mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < A0->u.o.n; i++) tpl_arr_push(R, o, A0->u.o.k[i]);
    return o;
}
static val *o_values(rt *R, args *A) {
    tpl_ensure_vals(R, A, "O");
    val *o = tpl_mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < A0->u.o.n; i++) tpl_arr_push(R, o, A0->u.o.v[i]);
    return o;
}
static val *o_items(rt *R, args *A) {
    tpl_ensure_vals(R, A, "O");
    val *o = tpl_mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < A0->u.o.n; i++) {
        val *t = tpl_mk_arr(R, VT_TUPLE);
        tpl_arr_push(R, t, A0->u.o.k[i]);
        tpl_arr_push(R, t, A0->u.o.v[i]);
        tpl_arr_push(R, o, t);
    }
    return o;
}
static val *o_string(rt *R, args *A) {
    tpl_ensure_vals(R, A, "O");
    tpl_mark_used(R, A0, 1);
    return tpl_to_str(R, A0);
}
static val *o_length(rt *R, args *A) { tpl_ensure_vals(R, A, "O"); return tpl_mk_int(R, (int64_t)A0->u.o.n); }
static val *o_dictsort(rt *R, args *A) {
    val *in = tpl_get_pos(R, A, 0);
    if (in->t != VT_OBJECT) tpl_fail(R, "dictsort: input must be an object");
    val *by = tpl_kwarg_or_pos(R, A, "by", 2);
    int rev = tpl_as_bool(R, tpl_kwarg_or_pos(R, A, "reverse", 3));
    int by_value = by->t == VT_STR && !strcmp(by->u.s.p, "value");
    size_t n = in->u.o.n;
    if (n > 16) tpl_fail(R, "dictsort of more than 16 items is not supported (std::sort order is not stable)");
    val *out = tpl_mk_obj(R);
    size_t *ord = tpl_ralloc(R, tpl_mul_sz(R, n + 1, sizeof *ord));
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
    for (size_t i = 0; i < n; i++) tpl_obj_set(R, out, in->u.o.k[ord[i]], in->u.o.v[ord[i]]);
    return out;
}
static val *o_join(rt *R, args *A) { (void)A; tpl_fail(R, "join on an object is not implemented (as in llama.cpp)"); }

static const builtin obj_builtins[] = {
    {"get", o_get}, {"keys", o_keys}, {"values", o_values}, {"items", o_items},
    {"tojson", f_tojson}, {"string", o_string}, {"length", o_length}, {"dictsort", o_dictsort},
    {"join", o_join}, {NULL, NULL}
};

/* ---- none and undefined */

static val *none_string(rt *R, args *A) { (void)A; return tpl_mk_str(R, "None"); }
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

const builtin *tpl_type_builtins(rt *R, const val *v) {
    switch (v->t) {
    case VT_UNDEF: return undef_builtins;
    case VT_NONE: return none_builtins;
    case VT_BOOL: return bool_builtins;
    case VT_INT: case VT_FLOAT: return int_builtins;
    case VT_STR: return str_builtins;
    case VT_ARRAY: case VT_TUPLE: return arr_builtins;
    case VT_OBJECT: return v->no_builtins ? no_builtins : obj_builtins;
    default: tpl_fail(R, "%s has no builtins", tpl_type_name(v));
    }
}

const builtin *tpl_find_builtin(const builtin *tab, const char *name) {
    for (; tab && tab->name; tab++)
        if (!strcmp(tab->name, name)) return tab;
    return NULL;
}
