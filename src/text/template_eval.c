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
            tpl_sb_put(R, out, v->u.s.p, v->u.s.n);
            out->parts += v->multipart ? 2 : 1;
        }
        break;
    case VT_INT: case VT_FLOAT: case VT_BOOL:
        tpl_put_string(R, out, v);
        out->parts++;
        break;
    case VT_ARRAY: case VT_TUPLE:
        for (size_t i = 0; i < v->u.a.n; i++) gather(R, out, v->u.a.v[i]);
        break;
    default:
        break;
    }
}

void tpl_exec_list(rt *R, env *E, const nlist *l, sbuf *out) {
    for (size_t i = 0; i < l->n; i++) exec(R, E, l->v[i], out);
}

static val *exec_capture(rt *R, env *E, const nlist *l) {
    sbuf b = {0};
    tpl_exec_list(R, E, l, &b);
    return tpl_mk_sb(R, &b);
}

/* ---- arguments */

/* ---- functions */

static val *mk_func(rt *R, const char *name, bfn fn, val *self) {
    val *f = tpl_mk(R, VT_FUNC);
    f->u.fn.kind = FN_BUILTIN;
    f->u.fn.name = name;
    f->u.fn.fn = fn;
    f->u.fn.self = self;
    return f;
}

/* try_builtin_func: a method bound to `input`, or undefined/error */
static val *try_builtin(rt *R, const char *name, val *input, int undef_on_missing) {
    tpl_mark_used(R, input, 0);
    tpl_mark_op(R, input, name);
    const builtin *b = tpl_find_builtin(tpl_type_builtins(R, input), name);
    if (b) return mk_func(R, b->name, b->fn, input);
    if (undef_on_missing) return tpl_mk_undef(R, tpl_rstrdup(R, name, strlen(name)));
    tpl_fail(R, "unknown filter or method '%s' for type %s", name, tpl_type_name(input));
}

static void bind_params(rt *R, const char *name, const nlist *params, args *A, env *E) {
    for (size_t i = 0; i < params->n; i++) {
        const node *p = params->v[i];
        if (i < A->n) {
            const char *pn;
            if (p->t == N_IDENT) pn = p->s;
            else if (p->t == N_KWARG && p->a->t == N_IDENT) pn = p->a->s;
            else tpl_fail(R, "invalid parameter in '%s'", name);
            tpl_env_set(R, E, pn, tpl_kwarg_or_pos(R, A, pn, i));
        } else if (p->t == N_KWARG) {
            if (p->a->t != N_IDENT) tpl_fail(R, "keyword argument key must be an identifier in '%s'", name);
            tpl_env_set(R, E, p->a->s, eval(R, A->ctx, p->b));
        } else {
            tpl_fail(R, "not enough arguments provided to '%s'", name);
        }
    }
}

static val *call_func(rt *R, val *f, args *A) {
    tpl_step(R);
    if (f->t != VT_FUNC) tpl_fail(R, "callee is not a function: got %s", tpl_type_name(f));
    A->fname = f->u.fn.name;
    if (f->u.fn.kind == FN_BUILTIN) {
        if (f->u.fn.self) {
            args B = *A;
            B.v = NULL;
            B.n = B.cap = 0;
            tpl_args_push(R, &B, f->u.fn.self);
            for (size_t i = 0; i < A->n; i++) tpl_args_push(R, &B, A->v[i]);
            return f->u.fn.fn(R, &B);
        }
        return f->u.fn.fn(R, A);
    }
    if (++R->calls > TPL_MAX_CALLS) tpl_fail(R, "macro recursion deeper than %d", TPL_MAX_CALLS);
    val *res;
    const node *def = f->u.fn.def;
    if (f->u.fn.kind == FN_MACRO) {
        env *M = tpl_env_copy(R, A->ctx);
        bind_params(R, f->u.fn.name, &def->l2, A, M);
        res = exec_capture(R, M, &def->l1);
    } else {
        env *M = tpl_env_copy(R, f->u.fn.cap);
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
            int64_t size = tpl_is_arr(obj) ? (int64_t)obj->u.a.n : obj->t == VT_STR ? (int64_t)obj->u.s.n : 0;
            val *stp = s->c ? eval(R, E, s->c) : tpl_mk_int(R, 1);
            val *st = s->a ? eval(R, E, s->a) : tpl_mk_int(R, tpl_as_int(R, stp) < 0 ? size - 1 : 0);
            val *sp = s->b ? eval(R, E, s->b) : tpl_mk_int(R, tpl_as_int(R, stp) < 0 ? -1 : size);
            val *f = try_builtin(R, "slice", obj, 0);
            args A = {0};
            A.ctx = E;
            tpl_args_push(R, &A, st);
            tpl_args_push(R, &A, sp);
            tpl_args_push(R, &A, stp);
            return call_func(R, f, &A);
        }
        prop = eval(R, E, n->b);
    } else if (n->b->t == N_INT) {
        if (n->b->i < 0) tpl_fail(R, "static member property cannot be negative");
        prop = tpl_mk_int(R, n->b->i);
    } else {
        if (n->b->t != N_IDENT) tpl_fail(R, "static member property must be an identifier");
        prop = tpl_mk_strn(R, n->b->s, n->b->sn);
        val *v = try_builtin(R, n->b->s, obj, 1);
        if (v->t != VT_UNDEF) return v;
    }
    val *v = tpl_mk_undef(R, "object_property");
    if (prop->t == VT_UNDEF) return v;
    if (!tpl_v_hashable(prop)) tpl_fail(R, "type %s is not allowed as object key", tpl_type_name(prop));
    if (obj->t == VT_UNDEF) return v;
    if (obj->t == VT_OBJECT) {
        val *key = tpl_to_str(R, prop);
        long i = tpl_obj_find(R, obj, prop);
        if (i >= 0) v = obj->u.o.v[i];
        else v = try_builtin(R, key->u.s.p, obj, 1);
    } else if (tpl_is_arr(obj) || obj->t == VT_STR) {
        if (prop->t == VT_INT) {
            int64_t idx = prop->u.i;
            if (tpl_is_arr(obj)) {
                if (idx < 0) idx += (int64_t)obj->u.a.n;
                if (idx >= 0 && idx < (int64_t)obj->u.a.n) v = obj->u.a.v[idx];
            } else if (idx >= 0 && idx < (int64_t)obj->u.s.n) {
                v = tpl_mk_strn(R, obj->u.s.p + idx, 1);
            }
        } else if (prop->t == VT_STR) {
            v = try_builtin(R, prop->u.s.p, obj, 1);
        } else {
            tpl_fail(R, "cannot access property with non-string/non-number: got %s", tpl_type_name(prop));
        }
    } else {
        if (prop->t != VT_STR) tpl_fail(R, "cannot access property with non-string: got %s", tpl_type_name(prop));
        v = try_builtin(R, prop->u.s.p, obj, 1);
    }
    if (R->stats) {
        tpl_mark_used(R, v, 0);
        tpl_mark_used(R, obj, 0);
        tpl_mark_used(R, prop, 0);
        if (prop->t == VT_INT) tpl_mark_op(R, obj, "array_access");
    }
    return v;
}

/* ---- binary operators */

static val *concat(rt *R, val *l, val *r) {
    sbuf b = {0};
    if (l->t != VT_NONE && l->t != VT_UNDEF) tpl_put_string(R, &b, l);
    size_t ln = b.n;
    if (r->t != VT_NONE && r->t != VT_UNDEF) tpl_put_string(R, &b, r);
    val *v = tpl_mk_sb(R, &b);
    v->multipart = (l->t == VT_STR && l->multipart) || (r->t == VT_STR && r->multipart) ||
                   (ln > 0 && b.n > ln);
    return v;
}

static val *eval_binary(rt *R, env *E, const node *n) {
    const char *op = n->s;
    val *l = eval(R, E, n->a);
    if (!strcmp(op, "and")) return tpl_as_bool(R, l) ? eval(R, E, n->b) : l;
    if (!strcmp(op, "or")) return tpl_as_bool(R, l) ? l : eval(R, E, n->b);
    val *r = eval(R, E, n->b);
    if (!strcmp(op, "==")) return tpl_mk_bool(R, tpl_v_equal(l, r));
    if (!strcmp(op, "!=")) return tpl_mk_bool(R, !tpl_v_equal(l, r));
    int is_in = !strcmp(op, "in"), not_in = !strcmp(op, "not in");
    int is_cat = !strcmp(op, "+") || !strcmp(op, "~");
    if (l->t == VT_UNDEF || r->t == VT_UNDEF) {
        if (r->t == VT_UNDEF && (is_in || not_in)) return tpl_mk_bool(R, not_in);
        if (is_cat) {
            int ln = l->t == VT_NONE || l->t == VT_UNDEF, rn = r->t == VT_NONE || r->t == VT_UNDEF;
            if ((ln && r->t == VT_STR) || (rn && l->t == VT_STR)) return concat(R, l, r);
        }
        tpl_fail(R, "cannot perform operation %s on undefined values", op);
    }
    if (l->t == VT_NONE || r->t == VT_NONE) {
        if (r->t != VT_NONE && (is_in || not_in)) {
            int m = tpl_test_in(R, l, r);
            return tpl_mk_bool(R, is_in ? m : !m);
        }
        if (is_cat) {
            int ln = l->t == VT_NONE, rn = r->t == VT_NONE;
            if ((ln && r->t == VT_STR) || (rn && l->t == VT_STR)) return concat(R, l, r);
        }
        tpl_fail(R, "cannot perform operation %s on null values", op);
    }
    if (tpl_is_num(l) && tpl_is_num(r)) {
        double a = tpl_v_flt(l), b = tpl_v_flt(r);
        int isf = l->t == VT_FLOAT || r->t == VT_FLOAT;
        if (op[1] == 0 && (op[0] == '+' || op[0] == '-' || op[0] == '*')) {
            double res = op[0] == '+' ? a + b : op[0] == '-' ? a - b : a * b;
            return isf ? tpl_mk_float(R, res) : tpl_mk_int(R, tpl_float_as_int(res));
        }
        if (!strcmp(op, "/")) return tpl_mk_float(R, a / b);
        if (!strcmp(op, "%")) {
            double rem = fmod(a, b);
            return isf ? tpl_mk_float(R, rem) : tpl_mk_int(R, tpl_float_as_int(rem));
        }
        if (!strcmp(op, "<")) return tpl_mk_bool(R, a < b);
        if (!strcmp(op, ">")) return tpl_mk_bool(R, a > b);
        if (!strcmp(op, ">=")) return tpl_mk_bool(R, a >= b);
        if (!strcmp(op, "<=")) return tpl_mk_bool(R, a <= b);
    }
    if (tpl_is_arr(l) && tpl_is_arr(r)) {
        if (!strcmp(op, "+")) {
            val *res = tpl_mk_arr(R, VT_ARRAY);
            for (size_t i = 0; i < l->u.a.n; i++) tpl_arr_push(R, res, l->u.a.v[i]);
            for (size_t i = 0; i < r->u.a.n; i++) tpl_arr_push(R, res, r->u.a.v[i]);
            return res;
        }
    } else if (tpl_is_arr(r)) {
        int m = tpl_test_in(R, l, r);
        if (is_in) return tpl_mk_bool(R, m);
        if (not_in) return tpl_mk_bool(R, !m);
    }
    if ((l->t == VT_STR || r->t == VT_STR) && is_cat) return concat(R, l, r);
    if (!strcmp(op, "*") && ((l->t == VT_STR && r->t == VT_INT) || (l->t == VT_INT && r->t == VT_STR))) {
        val *s = l->t == VT_STR ? l : r;
        int64_t k = l->t == VT_INT ? l->u.i : r->u.i;
        sbuf b = {0};
        if (k > 0) {
            if (s->u.s.n && (uint64_t)k > TPL_MAX_OUT / s->u.s.n)
                tpl_fail(R, "string repetition exceeds %u MB", TPL_MAX_OUT >> 20);
            for (int64_t i = 0; i < k; i++) {
                if (!s->u.s.n) break;
                tpl_sb_put(R, &b, s->u.s.p, s->u.s.n);
            }
        }
        return tpl_mk_sb(R, &b);
    }
    if (l->t == VT_STR && r->t == VT_STR && (is_in || not_in)) {
        int m = tpl_test_in(R, l, r);
        return tpl_mk_bool(R, is_in ? m : !m);
    }
    if (r->t == VT_OBJECT && (is_in || not_in)) {
        int m = tpl_test_in(R, l, r);
        return tpl_mk_bool(R, is_in ? m : !m);
    }
    tpl_fail(R, "unknown operator \"%s\" between %s and %s", op, tpl_type_name(l), tpl_type_name(r));
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
                if (!strcmp(id, coerce[i])) { input = tpl_to_str(R, input); break; }
    } else if (f->t == N_CALL) {
        if (f->a->t != N_IDENT) tpl_fail(R, "filter callee must be an identifier");
        id = filter_alias(f->a->s);
        for (size_t i = 0; i < f->l3.n; i++) tpl_args_push(R, &A, eval(R, E, f->l3.v[i]));
    } else {
        tpl_fail(R, "invalid filter expression");
    }
    return call_func(R, try_builtin(R, id, input, 0), &A);
}

static val *eval_test(rt *R, env *E, const node *n) {
    val *input = eval(R, E, n->a);
    args A = {0};
    A.ctx = E;
    tpl_args_push(R, &A, input);
    const node *t = n->b;
    const char *id;
    if (t->t == N_IDENT) {
        id = t->s;
    } else if (t->t == N_CALL && t->a->t == N_IDENT) {
        id = t->a->s;
        for (size_t i = 0; i < t->l3.n; i++) tpl_args_push(R, &A, eval(R, E, t->l3.v[i]));
    } else {
        tpl_fail(R, "invalid test expression");
    }
    char name[96];
    snprintf(name, sizeof name, "test_is_%s", id);
    const builtin *b = tpl_find_builtin(tpl_global_builtins, name);
    if (!b) tpl_fail(R, "unknown test '%s'", id);
    tpl_mark_used(R, input, 0);
    tpl_mark_op(R, input, name);
    A.fname = b->name;
    val *res = b->fn(R, &A);
    return n->flag ? tpl_mk_bool(R, !tpl_as_bool(R, res)) : res;
}

static val *eval_unary(rt *R, env *E, const node *n) {
    val *v = eval(R, E, n->a);
    if (!strcmp(n->s, "not")) return tpl_mk_bool(R, !tpl_as_bool(R, v));
    if (!strcmp(n->s, "-")) {
        if (v->t == VT_INT) return tpl_mk_int(R, (int64_t)(0 - (uint64_t)v->u.i));
        if (v->t == VT_FLOAT) return tpl_mk_float(R, -v->u.f);
        tpl_fail(R, "unary - operator requires a numeric operand");
    }
    if (tpl_is_num(v)) return v;
    tpl_fail(R, "unary + operator requires a numeric operand");
}

static val *eval_call(rt *R, env *E, const node *n) {
    args A = {0};
    A.ctx = E;
    for (size_t i = 0; i < n->l3.n; i++) tpl_args_push(R, &A, eval(R, E, n->l3.v[i]));
    val *f = eval(R, E, n->a);
    if (f->t != VT_FUNC) tpl_fail(R, "callee is not a function: got %s", tpl_type_name(f));
    return call_func(R, f, &A);
}

/* eval_node with R->cur naming n while it runs (llama.cpp reports the
 * innermost expression an exception leaves) */
static val *eval_node(rt *R, env *E, const node *n);
static val *eval(rt *R, env *E, const node *n) {
    const node *saved = R->cur;
    R->cur = n;
    val *v = eval_node(R, E, n);
    R->cur = saved;
    return v;
}

static val *eval_node(rt *R, env *E, const node *n) {
    switch (n->t) {
    case N_TEXT: case N_STR: return tpl_mk_strn(R, n->s, n->sn);
    case N_INT: return tpl_mk_int(R, n->i);
    case N_FLOAT: return tpl_mk_float(R, n->f);
    case N_IDENT: {
        val *v = tpl_env_get(E, n->s);
        if (v && v->t != VT_UNDEF) {
            tpl_mark_used(R, v, 0);
            return v;
        }
        const builtin *b = tpl_find_builtin(tpl_global_builtins, n->s);
        if (b) return mk_func(R, b->name, b->fn, NULL);
        return tpl_mk_undef(R, n->s);
    }
    case N_ARRAY: case N_TUPLE: {
        val *a = tpl_mk_arr(R, n->t == N_ARRAY ? VT_ARRAY : VT_TUPLE);
        for (size_t i = 0; i < n->l1.n; i++) tpl_arr_push(R, a, eval(R, E, n->l1.v[i]));
        return a;
    }
    case N_OBJECT: {
        val *o = tpl_mk_obj(R);
        for (size_t i = 0; i < n->l1.n; i++) {
            val *k = eval(R, E, n->l1.v[i]);
            val *v = eval(R, E, n->l2.v[i]);
            tpl_obj_set(R, o, k, v);
        }
        return o;
    }
    case N_MEMBER: return eval_member(R, E, n);
    case N_CALL: return eval_call(R, E, n);
    case N_BINARY: return eval_binary(R, E, n);
    case N_FILTER: return apply_filter(R, E, n->b, eval(R, E, n->a));
    case N_SELECT: {
        val *t = eval(R, E, n->b);
        if (!tpl_as_bool(R, t)) return tpl_mk_undef(R, NULL);
        return eval(R, E, n->a);
    }
    case N_TEST: return eval_test(R, E, n);
    case N_UNARY: return eval_unary(R, E, n);
    case N_TERNARY: return tpl_as_bool(R, eval(R, E, n->a)) ? eval(R, E, n->b) : eval(R, E, n->c);
    case N_KWARG: {
        if (n->a->t != N_IDENT) tpl_fail(R, "keyword argument key must be an identifier");
        val *k = tpl_mk(R, VT_KWARG);
        k->u.kw.key = n->a->s;
        k->u.kw.v = eval(R, E, n->b);
        return k;
    }
    case N_BLANK: case N_COMMENT: case N_NOOP: return tpl_mk_undef(R, NULL);
    case N_SLICE: tpl_fail(R, "a slice must be used as a subscript");
    case N_SPREAD: tpl_fail(R, "argument unpacking (*args) is not supported");
    default: tpl_fail(R, "statement used as an expression");
    }
}

/* ---- statements */

static void set_target(rt *R, env *E, const node *target, val *rhs) {
    if (target->t == N_IDENT) {
        tpl_env_set(R, E, target->s, rhs);
    } else if (target->t == N_TUPLE) {
        if (!tpl_is_arr(rhs)) tpl_fail(R, "cannot unpack non-iterable type in set: %s", tpl_type_name(rhs));
        if (rhs->u.a.n != target->l1.n)
            tpl_fail(R, "too %s items to unpack in set", target->l1.n > rhs->u.a.n ? "few" : "many");
        for (size_t i = 0; i < target->l1.n; i++) {
            if (target->l1.v[i]->t != N_IDENT) tpl_fail(R, "cannot unpack to a non-identifier in set");
            tpl_env_set(R, E, target->l1.v[i]->s, rhs->u.a.v[i]);
        }
    } else if (target->t == N_MEMBER) {
        if (target->flag) tpl_fail(R, "cannot assign to a computed member");
        if (target->b->t != N_IDENT) tpl_fail(R, "cannot assign to a member with a non-identifier property");
        val *obj = eval(R, E, target->a);
        if (obj->t != VT_OBJECT) tpl_fail(R, "cannot assign to a member of a non-object");
        tpl_obj_set_s(R, obj, target->b->s, rhs);
    } else {
        tpl_fail(R, "invalid left-hand side of set");
    }
}

/* binds the loop variable(s) of one item */
static void bind_loopvar(rt *R, env *E, const node *lv, val *item, int over_object) {
    if (lv->t == N_IDENT) {
        tpl_env_set(R, E, lv->s, over_object ? item->u.a.v[0] : item);
        return;
    }
    for (size_t j = 0; j < lv->l1.n; j++) {
        if (lv->l1.v[j]->t != N_IDENT) tpl_fail(R, "cannot unpack into a non-identifier");
        tpl_env_set(R, E, lv->l1.v[j]->s, item->u.a.v[j]);
    }
}

static void exec_for(rt *R, env *E, const node *n, sbuf *out) {
    env *scope = tpl_env_copy(R, E);
    const node *iter = n->b, *test = NULL, *lv = n->a;
    if (iter->t == N_SELECT) {
        test = iter->b;
        iter = iter->a;
    }
    val *it = eval(R, scope, iter);
    tpl_mark_used(R, it, 0);
    tpl_mark_op(R, it, "array_access");
    if (it->t == VT_UNDEF) it = tpl_mk_arr(R, VT_ARRAY);
    if (!tpl_is_arr(it) && it->t != VT_OBJECT)
        tpl_fail(R, "expected an iterable or object in for loop, got %s", tpl_type_name(it));
    int over_obj = it->t == VT_OBJECT;
    size_t total = over_obj ? it->u.o.n : it->u.a.n;
    val **items = tpl_ralloc(R, tpl_mul_sz(R, total + 1, sizeof *items));   /* what the loop binds */
    val **cur = tpl_ralloc(R, tpl_mul_sz(R, total + 1, sizeof *cur));       /* loop.previtem/nextitem */
    size_t nf = 0;
    for (size_t i = 0; i < total; i++) {
        val *item;
        if (over_obj) {
            item = tpl_mk_arr(R, VT_TUPLE);
            tpl_arr_push(R, item, it->u.o.k[i]);
            tpl_arr_push(R, item, it->u.o.v[i]);
        } else {
            item = it->u.a.v[i];
        }
        val *current = over_obj && lv->t == N_IDENT ? item->u.a.v[0] : item;
        if (lv->t == N_TUPLE) {
            if (!tpl_is_arr(item)) tpl_fail(R, "cannot unpack non-iterable type: %s", tpl_type_name(item));
            if (lv->l1.n != item->u.a.n)
                tpl_fail(R, "too %s items to unpack", lv->l1.n > item->u.a.n ? "few" : "many");
        } else if (lv->t != N_IDENT) {
            tpl_fail(R, "invalid loop variable");
        }
        if (test) {
            tpl_step(R);
            env *ls = tpl_env_copy(R, scope);
            bind_loopvar(R, ls, lv, item, over_obj);
            if (!tpl_as_bool(R, eval(R, ls, test))) continue;
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
        tpl_step(R);
        val *loop = tpl_mk_obj(R);
        loop->no_builtins = 1;
        tpl_obj_set_s(R, loop, "index", tpl_mk_int(R, (int64_t)i + 1));
        tpl_obj_set_s(R, loop, "index0", tpl_mk_int(R, (int64_t)i));
        tpl_obj_set_s(R, loop, "revindex", tpl_mk_int(R, (int64_t)(nf - i)));
        tpl_obj_set_s(R, loop, "revindex0", tpl_mk_int(R, (int64_t)(nf - i - 1)));
        tpl_obj_set_s(R, loop, "first", tpl_mk_bool(R, i == 0));
        tpl_obj_set_s(R, loop, "last", tpl_mk_bool(R, i == nf - 1));
        tpl_obj_set_s(R, loop, "length", tpl_mk_int(R, (int64_t)nf));
        tpl_obj_set_s(R, loop, "previtem", i > 0 ? cur[i - 1] : tpl_mk_undef(R, "previtem"));
        tpl_obj_set_s(R, loop, "nextitem", i + 1 < nf ? cur[i + 1] : tpl_mk_undef(R, "nextitem"));
        tpl_env_set(R, scope, "loop", loop);
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
    if (no_iter) tpl_exec_list(R, E, &n->l2, out);
}

static void exec(rt *R, env *E, const node *n, sbuf *out) {
    tpl_step(R);
    switch (n->t) {
    case N_TEXT:
        tpl_sb_put(R, out, n->s, n->sn);
        out->parts++;
        break;
    case N_COMMENT: case N_NOOP:
        break;
    case N_IF:
        tpl_exec_list(R, E, tpl_as_bool(R, eval(R, E, n->a)) ? &n->l1 : &n->l2, out);
        break;
    case N_FOR:
        exec_for(R, E, n, out);
        break;
    case N_BREAK: case N_CONTINUE:
        if (!R->on_signal) tpl_fail(R, "%s outside a loop", n->t == N_BREAK ? "break" : "continue");
        R->signal = n->t == N_BREAK ? 1 : 2;
        longjmp(*R->on_signal, 1);
    case N_SET:
        set_target(R, E, n->a, n->b ? eval(R, E, n->b) : exec_capture(R, E, &n->l1));
        break;
    case N_MACRO: {
        if (n->a->t != N_IDENT) tpl_fail(R, "macro name must be an identifier");
        val *f = tpl_mk(R, VT_FUNC);
        f->u.fn.kind = FN_MACRO;
        f->u.fn.name = n->a->s;
        f->u.fn.def = n;
        tpl_env_set(R, E, n->a->s, f);
        break;
    }
    case N_CALLBLOCK: {
        const node *call = n->a;
        val *callee = eval(R, E, call->a);
        if (callee->t != VT_FUNC) tpl_fail(R, "callee is not a function: got %s", tpl_type_name(callee));
        val *caller = tpl_mk(R, VT_FUNC);
        caller->u.fn.kind = FN_CALLER;
        caller->u.fn.name = "caller";
        caller->u.fn.def = n;
        caller->u.fn.cap = tpl_env_copy(R, E);
        env *C = tpl_env_copy(R, E);
        tpl_env_set(R, C, "caller", caller);
        args A = {0};
        A.ctx = C;
        for (size_t i = 0; i < call->l3.n; i++) tpl_args_push(R, &A, eval(R, E, call->l3.v[i]));
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

/* one run of prog in E (see template_int.h) */
int tpl_run(rt *R, const nlist *prog, env *E, sbuf *out) {
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
    tpl_exec_list(R, E, prog, out);
    R->on_error = saved;
    return 0;
}
