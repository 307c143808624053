/*
 * template_int.h -- the Jinja engine's internals, shared by the files of
 * src/text that implement template.h. Internal to src/text: nothing outside
 * this folder includes it (template.h is the contract).
 *
 * Who defines what:
 *   template_value.c     the runtime (arena, limits, error exit), values, scopes
 *   template_parse.c     source text to tokens to an AST (compile)
 *   template_eval.c      expressions, statements, calls, argument helpers
 *   template_builtins.c  filters, tests, methods and global functions
 *   template_caps.c      jinja::caps_get's probes, the template patches of
 *                        common_chat_templates_init
 *   template.c           the entry glue and llama-server's chat layer
 *
 * Errors leave a render by longjmp through tpl_fail(); every allocation lives in
 * the render's arena, so nothing here frees or returns an error code.
 */
#ifndef BANKML_TEMPLATE_INT_H
#define BANKML_TEMPLATE_INT_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "text/template.h"

/* ---------------------------------------------------------------- limits */

#define TPL_MAX_NEST      256          /* parser nesting (statements + expressions) */
#define TPL_MAX_CALLS     128          /* macro / caller recursion */
#define TPL_MAX_STEPS     20000000ull  /* statements + loop iterations + calls */
#define TPL_MAX_MEM       (256u << 20) /* arena budget in bytes */
#define TPL_MAX_OUT       (64u << 20)  /* one string's length */

/* ------------------------------------------------------- runtime (template_value.c) */

typedef struct ablk { struct ablk *next; } ablk;

typedef struct env env;
typedef struct val val;

typedef struct {
    ablk *blocks;          /* every allocation, freed together */
    size_t mem;            /* bytes allocated so far */
    jmp_buf *on_error;     /* where tpl_fail() goes */
    char *err;
    size_t errlen;
    jmp_buf *on_signal;    /* innermost for loop, for break/continue */
    int signal;            /* 1 break, 2 continue */
    unsigned long long steps;
    int calls;             /* current macro nesting */
    int nest;              /* parser nesting */
    int stats;             /* record value usage (caps probing) */
    time_t now;
    const char *src;       /* template source as compiled (tpl_compile), for error positions */
    size_t srclen;
    const struct node *cur; /* the innermost expression being evaluated (raise_exception's position) */
    int raised;            /* the error is the template's raise_exception, in llama.cpp's words */
} rt;

/* Formats the reason into R->err and longjmps to R->on_error. */
void tpl_fail(rt *R, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* Arena allocation of n bytes (uninitialised / zeroed), freed by tpl_free_all();
 * fails the render past TPL_MAX_MEM or when malloc fails. */
void *tpl_ralloc(rt *R, size_t n);
void *tpl_rzalloc(rt *R, size_t n);

/* a * b, failing the render on overflow. */
size_t tpl_mul_sz(rt *R, size_t a, size_t b);

/* A NUL-terminated arena copy of s[0..n). */
char *tpl_rstrdup(rt *R, const char *s, size_t n);

/* Frees every block of the arena (the end of a render or check). */
void tpl_free_all(rt *R);

/* Counts one unit of work; fails the render past TPL_MAX_STEPS. */
void tpl_step(rt *R);

/* A growable string in the arena. `parts` counts non-empty appended pieces;
 * llama.cpp keeps strings as lists of parts and applies capitalize/title per
 * part, so we need to know whether a string has more than one. */
typedef struct {
    char *p;
    size_t n, cap;
    int parts;
} sbuf;

/* Appends s[0..n) / the string s / one char / formatted text (at most 511
 * bytes) to b; fails the render past TPL_MAX_OUT. */
void tpl_sb_put(rt *R, sbuf *b, const char *s, size_t n);
void tpl_sb_puts(rt *R, sbuf *b, const char *s);
void tpl_sb_putc(rt *R, sbuf *b, char c);
void tpl_sb_printf(rt *R, sbuf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* -------------------------------------------------------- values (template_value.c) */

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

/* A new value of type t (VT_*), zeroed, in the arena. */
val *tpl_mk(rt *R, int t);
/* Constructors: undefined (hint: where it came from, or NULL), none, bool,
 * int, float, a string copied from s[0..n) / s, a string taking b's bytes
 * (multipart when b had 2+ parts), an empty array or tuple (t), an empty
 * object. */
val *tpl_mk_undef(rt *R, const char *hint);
val *tpl_mk_none(rt *R);
val *tpl_mk_bool(rt *R, int b);
val *tpl_mk_int(rt *R, int64_t i);
val *tpl_mk_float(rt *R, double f);
val *tpl_mk_strn(rt *R, const char *s, size_t n);
val *tpl_mk_str(rt *R, const char *s);
val *tpl_mk_sb(rt *R, const sbuf *b);
val *tpl_mk_arr(rt *R, int t);
val *tpl_mk_obj(rt *R);

/* 1 for an array or tuple / an int or float. */
int tpl_is_arr(const val *v);
int tpl_is_num(const val *v);

/* llama.cpp's type name of v ("Integer", "Array", ...), for messages. */
const char *tpl_type_name(const val *v);

/* Appends x to the array or tuple a. */
void tpl_arr_push(rt *R, val *a, val *x);

/* A double as llama.cpp's value_float turns it into an int64 (0 for inf/nan,
 * saturated at the ends). */
int64_t tpl_float_as_int(double f);
/* llama.cpp's value_t int / float views of an int, float or bool (0 else). */
int64_t tpl_v_int(const val *v);
double tpl_v_flt(const val *v);
/* tpl_as_int() / tpl_as_float() / tpl_as_bool(): the same, failing the render on a type
 * that has no such view (as llama.cpp throws). */
int64_t tpl_as_int(rt *R, const val *v);
double tpl_as_float(rt *R, const val *v);
int tpl_as_bool(rt *R, const val *v);

/* as_string(): appends how v reads when concatenated or coerced. */
void tpl_put_string(rt *R, sbuf *b, const val *v);
/* v as a string value (v itself when it is one). */
val *tpl_to_str(rt *R, val *v);
/* value_to_json: llama.cpp's serializer; lvl the nesting depth (0 at the
 * top), indent -1 for one line, isep / ksep the item and key separators. */
void tpl_put_json(rt *R, sbuf *b, const val *v, int lvl, int indent, const char *isep,
              const char *ksep);

/* is_hashable and == as llama.cpp defines them. */
int tpl_v_hashable(const val *v);
int tpl_v_equal(const val *a, const val *b);

/* Objects, in insertion order: the index of key k (-1; fails on an
 * unhashable key), set k (replacing), set / get by a C string key (get gives
 * NULL when absent). */
long tpl_obj_find(rt *R, const val *o, const val *k);
void tpl_obj_set(rt *R, val *o, val *k, val *v);
void tpl_obj_set_s(rt *R, val *o, const char *k, val *v);
val *tpl_obj_get_s(const val *o, const char *k);

/* Value stats for the caps probe (only while R->stats): mark v read (deep:
 * and everything in it), mark an operation ("test_is_string", "selectattr",
 * "array_access") done on it. */
void tpl_mark_used(rt *R, val *v, int deep);
void tpl_mark_op(rt *R, val *v, const char *op);

/* Entry helpers: a JSON tree as values (integers stay integers, as
 * llama.cpp's from_json); the base scope (true/false/none and their
 * capitalized names); a runtime ready for one render (err cleared, now 0
 * meaning time(NULL)). */
val *tpl_from_json(rt *R, const json_value *j);
env *tpl_base_env(rt *R);
void tpl_rt_init(rt *R, char *err, size_t errlen, int64_t now);

/* Scopes: a new empty one, set name (replacing), get name (NULL when
 * absent), a copy of P (values shared) for a new inner scope. */
env *tpl_env_new(rt *R);
void tpl_env_set(rt *R, env *E, const char *name, val *v);
val *tpl_env_get(const env *E, const char *name);
env *tpl_env_copy(rt *R, const env *P);

/* ----------------------------------------------------------- AST (template_parse.c) */

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

/* Lexes and parses tmpl[0..len) into prog (the top-level statements);
 * fails the render with the position on a syntax error. */
void tpl_compile(rt *R, const char *tmpl, size_t len, nlist *prog);

/* ------------------------------------------------------ evaluator (template_eval.c) */

/* Executes the statements of l in scope E, appending their output to out. */
void tpl_exec_list(rt *R, env *E, const nlist *l, sbuf *out);

/* One run of prog in E: 0 with the output in out, or -1 with the reason in
 * R->err (the error does not leave through R->on_error, which is restored). */
int tpl_run(rt *R, const nlist *prog, env *E, sbuf *out);

/* in: needle in an array, a string (substring) or an object (key); fails on
 * other haystacks. */
int tpl_test_in(rt *R, val *needle, val *hay);

/* Arguments of a builtin call (A->fname names the function in messages):
 * append one; the i-th positional (failing when missing) or d; keyword key
 * or d; keyword key else positional pos else undefined; fail unless the
 * count is in [min, max]; check the types, one letter per argument, upper
 * case when required: A array, S string, I int, F float, B bool, O object,
 * '.' any. */
void tpl_args_push(rt *R, args *A, val *v);
val *tpl_get_pos(rt *R, args *A, size_t i);
val *tpl_get_pos_d(args *A, size_t i, val *d);
val *tpl_get_kwarg(args *A, const char *key, val *d);
val *tpl_kwarg_or_pos(rt *R, args *A, const char *key, size_t pos);
void tpl_ensure_count(rt *R, args *A, size_t min, size_t max);
void tpl_ensure_vals(rt *R, args *A, const char *types);

/* A named builtin; tables end with {NULL, NULL}. */
typedef struct { const char *name; bfn fn; } builtin;

/* The entry of tab named name, or NULL. */
const builtin *tpl_find_builtin(const builtin *tab, const char *name);

/* ---------------------------------------------------- builtins (template_builtins.c) */

/* The global functions and tests ("range", "namespace", "test_is_string", ...). */
extern const builtin tpl_global_builtins[];

/* The methods and filters of v's type; fails for kinds that have none. */
const builtin *tpl_type_builtins(rt *R, const val *v);

/* ---------------------------------------------------- caps (template_caps.c) */

/* The template source common_chat_templates_init keeps: tmpl with its two
 * patches (gpt-oss's channel check, Mistral's empty-content raise); fails on
 * a NUL byte. */
char *tpl_chat_source(rt *R, const char *tmpl, size_t len);

/* jinja::caps_get over the compiled prog: its probe renders, with stats on. */
void tpl_caps_probe(rt *R, const nlist *prog, tmpl_caps *c);

#endif
