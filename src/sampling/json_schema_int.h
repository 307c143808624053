/*
 * json_schema_int.h -- what the two JSON schema converters share: b11669's
 * (json_schema.c) and Ollama v0.13.3's vendored one (json_schema_ollama.c).
 * Internal to src/sampling/json_schema*.c; the contract is json_schema.h.
 */
#ifndef BANKML_JSON_SCHEMA_INT_H
#define BANKML_JSON_SCHEMA_INT_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "base/json.h"

typedef struct { const char *p; size_t n; } js_str;
#define JS_S(lit) ((js_str){ (lit), sizeof(lit) - 1 })

typedef struct js_chunk {
    struct js_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} js_chunk;

typedef struct js_ctx js_ctx;

typedef struct {                  /* a growing string in the arena */
    js_ctx *c;
    char *p;
    size_t n, cap;
} js_sb;

typedef struct {                  /* string -> pointer, open addressing, in the arena */
    js_str *keys;
    void **vals;
    size_t cap, n;
} js_map;

enum { JS_ANY, JS_REF, JS_ANY_OF, JS_ALL_OF, JS_CONST, JS_ENUM, JS_NULL, JS_BOOLEAN, JS_NUMBER,
       JS_INTEGER, JS_STRING, JS_ARRAY, JS_TUPLE, JS_OBJECT };
enum { JS_FMT_NONE, JS_FMT_UUID, JS_FMT_DATE, JS_FMT_TIME, JS_FMT_DATE_TIME };

typedef struct js_node js_node;
typedef struct { js_str name; js_node *schema; int required; } js_prop;

/* common_chat_schema and its kinds, in one struct */
struct js_node {
    int kind;
    js_str ref;                         /* REF: the "#/..." text */
    js_node *target;                    /* REF: what it points at (set once all are built) */
    js_node **kids;                     /* ANY_OF, ALL_OF, TUPLE */
    size_t nkids;
    const json_value *value;            /* CONST */
    const json_value **values;          /* ENUM */
    size_t nvalues;
    int64_t min, max;                   /* INTEGER: inclusive; INT64_MIN / INT64_MAX unbounded */
    js_str pattern;                     /* STRING: empty when absent */
    int format;                         /* STRING */
    int min_len, max_len;               /* STRING lengths, ARRAY item counts; max -1 unbounded */
    js_node *items;                     /* ARRAY */
    js_prop *props;                     /* OBJECT, in schema order */
    size_t nprops;
    js_node *additional;                /* OBJECT: NULL when not allowed */
};

typedef struct { js_str name, body; } js_rule;

struct js_ctx {
    js_chunk *arena;
    jmp_buf top;
    int code;                           /* JSON_SCHEMA_REFUSED or JSON_SCHEMA_LIMIT once thrown */
    js_str msg;
    int depth;
    /* builder */
    const json_value *root;
    js_map refs;                        /* "#/..." -> js_node* (NULL while being built) */
    js_node **pending;                  /* ref nodes waiting for their target */
    size_t npending, cap_pending;
    /* converter */
    js_rule *rules;                     /* in insertion order; never changed once added */
    size_t nrules, cap_rules;
    js_map rule_ix;                     /* name -> index + 1 */
    js_str *resolving;                  /* $refs being resolved (a stack) */
    size_t nresolving, cap_resolving;
    js_str *errors;
    size_t nerrors, cap_errors;
};

#define JS_SPACE_RULE "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}"
typedef struct { const char *name, *body, *deps[7]; } js_builtin;
typedef struct { js_str s; int lit; } js_item;

/* the arena, strings and errors (json_schema.c) */
void js_throw(js_ctx *c, int code, js_str msg) __attribute__((noreturn));
void js_oom(js_ctx *c) __attribute__((noreturn));
void *js_alloc(js_ctx *c, size_t n);
void *js_grow(js_ctx *c, void *arr, size_t n, size_t *cap, size_t sz);
js_str js_dup(js_ctx *c, const char *p, size_t n);
int js_eq(js_str a, js_str b);
int js_eqs(js_str a, const char *s);
int js_cmp(js_str a, js_str b);
js_sb js_sb_new(js_ctx *c);
void js_put(js_sb *b, const char *s, size_t n);
void js_puts(js_sb *b, const char *s);
void js_putc(js_sb *b, char ch);
void js_putstr(js_sb *b, js_str s);
void js_putll(js_sb *b, long long v);
js_str js_done(js_sb *b);
js_str js_cat3(js_ctx *c, js_str a, js_str b, js_str d);
js_str js_cat(js_ctx *c, js_str a, js_str b);
js_str js_cats(js_ctx *c, js_str a, const char *b);
js_str js_itoa(js_ctx *c, long long v);
void **js_map_find(js_ctx *c, js_map *m, js_str k, int insert);
void js_free_arena(js_ctx *c);
void js_enter(js_ctx *c);                      /* one schema level deeper (refused past JSON_SCHEMA_MAX_DEPTH) */
size_t js_utf8(const unsigned char *s, size_t n, uint32_t *cp);

/* JSON as nlohmann's ordered_json sees it */
typedef struct { int kind; int64_t i; uint64_t u; double d; } js_num;   /* kind 0 int, 1 unsigned, 2 float */
const json_value *js_get_n(const json_value *v, const char *k, size_t kl);
const json_value *js_get(const json_value *v, const char *k);
js_num js_number(const json_value *v);
int js_is_int(const json_value *v);
int64_t js_d2i(double d);
void js_dump(js_sb *b, const json_value *v);

/* the converter's pieces that both converters write the same */
int js_reserved(js_str name);
js_str js_rule_name(js_ctx *c, js_str s);
js_rule *js_rule_get(js_ctx *c, js_str name);
void js_rule_put(js_ctx *c, js_str name, js_str body);
js_str js_add_rule(js_ctx *c, js_str name, js_str body);
void js_error(js_ctx *c, js_str e);
js_str js_literal(js_ctx *c, js_str s);
js_str js_repeat(js_ctx *c, js_str item, int mn, int mx, js_str sep);
void js_min_max_int(js_sb *o, int64_t mn, int64_t mx, int decimals_left, int top);
js_str js_to_rule(js_ctx *c, js_item it);
js_str js_join_seq(js_ctx *c, const js_item *seq, size_t n);
int js_stoi(js_ctx *c, js_str s, int *out);

#endif
