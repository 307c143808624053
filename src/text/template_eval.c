/*
 * template_eval.c -- the evaluator (see template_int.h): expressions, member
 * access, operators, filters and tests, calls (builtins, macros, caller),
 * statements, scopes and loops, as llama.cpp's common/jinja runs them
 * (dynamic scoping of macros included). Also the argument helpers the
 * builtins use.
 */
#include "text/template_int.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

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

void exec_list(rt *R, env *E, const nlist *l, sbuf *out) {
    for (size_t i = 0; i < l->n; i++) exec(R, E, l->v[i], out);
}

static val *exec_capture(rt *R, env *E, const nlist *l) {
    sbuf b = {0};
    exec_list(R, E, l, &b);
    return mk_sb(R, &b);
}

/* ---- arguments */

void args_push(rt *R, args *A, val *v) {
    if (A->n == A->cap) {
        size_t cap = A->cap ? A->cap * 2 : 4;
        val **nv = ralloc(R, mul_sz(R, cap, sizeof *nv));
        if (A->n) memcpy(nv, A->v, A->n * sizeof *nv);
        A->v = nv;
        A->cap = cap;
    }
    A->v[A->n++] = v;
}

val *get_pos(rt *R, args *A, size_t i) {
    if (i < A->n) return A->v[i];
    fail(R, "function '%s' expected at least %zu arguments, got %zu", A->fname, i + 1, A->n);
}
val *get_pos_d(args *A, size_t i, val *d) { return i < A->n ? A->v[i] : d; }
val *get_kwarg(args *A, const char *key, val *d) {
    for (size_t i = 0; i < A->n; i++)
        if (A->v[i]->t == VT_KWARG && !strcmp(A->v[i]->u.kw.key, key)) return A->v[i]->u.kw.v;
    return d;
}
val *kwarg_or_pos(rt *R, args *A, const char *key, size_t pos) {
    val *v = get_kwarg(A, key, NULL);
    if (v && v->t != VT_UNDEF) return v;
    if (pos < A->n && A->v[pos]->t != VT_KWARG) return A->v[pos];
    return v ? v : mk_undef(R, NULL);
}
void ensure_count(rt *R, args *A, size_t min, size_t max) {
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
void ensure_vals(rt *R, args *A, const char *types) {
    size_t req = 0;
    for (const char *p = types; *p; p++) req += (*p >= 'A' && *p <= 'Z');
    ensure_count(R, A, req, 999);
    for (size_t i = 0; types[i]; i++)
        if (types[i] >= 'A' && types[i] <= 'Z' && i < A->n && !type_ok(A->v[i], types[i]))
            fail(R, "function '%s' expected a different type, got %s", A->fname, type_name(A->v[i]));
}

/* ---- functions */

const builtin *find_builtin(const builtin *tab, const char *name) {
    for (; tab && tab->name; tab++)
        if (!strcmp(tab->name, name)) return tab;
    return NULL;
}

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

int test_in(rt *R, val *needle, val *hay) {
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
