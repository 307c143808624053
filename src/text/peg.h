/*
 * peg.h -- llama.cpp b11669's PEG parser (common/peg-parser.cpp): the arena of
 * parsers a chat format is made of, its builder, its text form, and the parse
 * of a (possibly partial) model answer into an AST.
 *
 * An arena holds parsers by id (size_t, in creation order) and named rules;
 * the builder functions below add one parser each and return its id, the way
 * b11669's common_peg_parser_builder does (sequence and choice flatten nested
 * sequences/choices, rule() cleans the name and returns a ref, peg_build()
 * resolves refs), so an arena built here has the ids b11669's has.
 *
 * Text form: v0.5.0's common_peg_arena::save() (to_json().dump()):
 *   {"parsers":[{"type":"literal","literal":"x"},...],"rules":{"name":id,...},"root":id}
 * b11669 no longer saves arenas (its library has no save/load); testing/kit_chat.cpp
 * writes b11669's in-memory arena in this form, with a schema parser's JSON schema
 * under "schema" (b11669 keeps a typed schema node there), and the rules ordered
 * by parser id (v0.5.0 wrote its unordered_map's order). peg_save writes that
 * form, so an arena built here saves the bytes the kit writes for the same arena
 * built by b11669, and a loaded one saves what was read.
 *
 * Parse (peg_parse): b11669's executor, one recursive descent with no memo
 * (b11669 has none), lenient or not: lenient (what the chat layer uses) lets a
 * parser that reaches the end of the input answer NEED_MORE_INPUT instead of
 * failing. The AST nodes are the rule and tag nodes, as b11669 records them,
 * with the runs of invalid UTF-8 under each. A parse is linear in the input
 * for the grammars chat formats build (choices commit at their first success;
 * until() scans once with a trie); recursion is bounded by PEG_MAX_DEPTH and
 * refused past it (b11669 recurses until its stack ends).
 *
 * Nothing here is shared between threads: an arena is read-only once built,
 * so any number of threads may parse with it at once, each with its own
 * peg_ast.
 */
#ifndef BANKML_PEG_H
#define BANKML_PEG_H

#include <stddef.h>
#include <stdint.h>

#include "base/json.h"

#define PEG_INVALID ((size_t)-1)
#define PEG_MAX_DEPTH 1000      /* parser frames deep before peg_parse refuses (about 400 bytes of
                                   stack each: 400 KB, under a server thread's 1 MiB; a JSON value
                                   nests about 7 frames a level) */

/* The parser kinds, in b11669's variant order. */
typedef enum {
    PEG_EPSILON, PEG_START, PEG_END, PEG_LITERAL, PEG_SEQUENCE, PEG_CHOICE, PEG_REPETITION,
    PEG_AND, PEG_NOT, PEG_ANY, PEG_SPACE, PEG_CHARS, PEG_STRING, PEG_UNTIL, PEG_SCHEMA,
    PEG_RULE, PEG_REF, PEG_ATOMIC, PEG_TAG, PEG_GBNF, PEG_AC, PEG_NKINDS
} peg_kind;

typedef struct { uint32_t start, end; } peg_range;

typedef struct {
    char *s;
    size_t n;
} peg_str;                      /* owned bytes (NUL-terminated; may hold NULs) */

typedef struct {
    peg_kind kind;
    peg_str str;                /* literal; chars pattern; rule/ref/schema name; tag; gbnf grammar */
    size_t *kids, nkids;        /* sequence, choice */
    size_t child;               /* repetition, and, not, schema, rule, atomic, tag, gbnf, ac */
    int min, max;               /* repetition, chars (max -1: unbounded) */
    peg_range *ranges;          /* chars */
    size_t nranges;
    int negated;                /* chars */
    char delim;                 /* string */
    peg_str *delims;            /* until, ac */
    size_t ndelims;
    int flag;                   /* rule: trigger; schema: raw */
    peg_str schema;             /* schema: JSON text of its schema, or s NULL (none) */
} peg_parser;

typedef struct {
    peg_str name;
    size_t id;
} peg_rule_entry;

typedef struct {
    peg_parser *p;
    size_t n, cap;
    peg_rule_entry *rules;      /* name -> id, in order (see the text form above) */
    size_t nrules, rcap;
    size_t root;                /* PEG_INVALID when unset */
    int oom;                    /* an allocation failed: the arena is unusable */
} peg_arena;

/* ---- arena and builder ---- */

void peg_init(peg_arena *a);
void peg_free(peg_arena *a);
/* The id of rule `name`, or PEG_INVALID. */
size_t peg_rule_id(const peg_arena *a, const char *name, size_t n);

size_t peg_eps(peg_arena *a);
size_t peg_start(peg_arena *a);
size_t peg_end(peg_arena *a);
size_t peg_literal(peg_arena *a, const char *s, size_t n);
size_t peg_literal_c(peg_arena *a, const char *s);
/* Sequences and choices take the children's ids; a child that is itself a
 * sequence (choice) is spliced in, as b11669's builder does. */
size_t peg_sequence(peg_arena *a, const size_t *ids, size_t n);
size_t peg_choice(peg_arena *a, const size_t *ids, size_t n);
size_t peg_seq2(peg_arena *a, size_t x, size_t y);             /* x + y */
size_t peg_alt2(peg_arena *a, size_t x, size_t y);             /* x | y */
size_t peg_repeat(peg_arena *a, size_t child, int min, int max);
size_t peg_optional(peg_arena *a, size_t child);               /* {0,1} */
size_t peg_zero_or_more(peg_arena *a, size_t child);
size_t peg_one_or_more(peg_arena *a, size_t child);
size_t peg_peek(peg_arena *a, size_t child);                   /* &child */
size_t peg_negate(peg_arena *a, size_t child);                 /* !child */
size_t peg_any(peg_arena *a);
size_t peg_space(peg_arena *a);
/* A character class "[a-z0-9]" / "[^...]" (b11669's escapes \x \u \U \n \t \r \\ \] \[),
 * repeated min..max times (max -1: unbounded). */
size_t peg_chars(peg_arena *a, const char *classes, int min, int max);
size_t peg_string_content(peg_arena *a, char delimiter);
size_t peg_until(peg_arena *a, const char *delim, size_t n);
size_t peg_until_one_of(peg_arena *a, const peg_str *delims, size_t n);
size_t peg_rest(peg_arena *a);                                 /* until_one_of({}) */
/* Wraps child with a JSON schema (its JSON text; NULL: none) for the grammar. */
size_t peg_schema(peg_arena *a, size_t child, const char *name, const char *schema_json, size_t schema_len, int raw);
/* Adds rule `name` (cleaned: each run of characters outside [a-zA-Z0-9-] becomes '-')
 * over child and returns a ref to it. */
size_t peg_rule(peg_arena *a, const char *name, size_t child, int trigger);
/* b11669's rule(name, builder_fn): returns a ref at once when the rule exists; else
 * adds a placeholder rule (so fn may refer to it), calls fn, and adds the real rule. */
size_t peg_rule_fn(peg_arena *a, const char *name, size_t (*fn)(peg_arena *, void *), void *ctx, int trigger);
size_t peg_ref(peg_arena *a, const char *name);
size_t peg_atomic(peg_arena *a, size_t child);
size_t peg_tag(peg_arena *a, const char *tag, size_t child);
size_t peg_gbnf(peg_arena *a, size_t child, const char *grammar);
size_t peg_ac(peg_arena *a, size_t child, const peg_str *delims, size_t n);   /* n >= 1 */
/* b11669's composite parsers (named rules json-value, json-object, ...). */
size_t peg_json(peg_arena *a);
size_t peg_json_object(peg_arena *a);
size_t peg_json_array(peg_arena *a);
size_t peg_json_string(peg_arena *a);
size_t peg_json_number(peg_arena *a);
size_t peg_json_bool(peg_arena *a);
size_t peg_json_null(peg_arena *a);
size_t peg_json_member(peg_arena *a, const char *key, size_t value);
size_t peg_double_quoted_string(peg_arena *a);
size_t peg_single_quoted_string(peg_arena *a);
size_t peg_quoted_string(peg_arena *a);
size_t peg_python_value(peg_arena *a);
size_t peg_python_dict(peg_arena *a);
size_t peg_python_array(peg_arena *a);
size_t peg_python_string(peg_arena *a);
size_t peg_python_bool(peg_arena *a);
size_t peg_python_null(peg_arena *a);
size_t peg_marker(peg_arena *a);
/* Sets the root and resolves every ref to its rule (b11669's build()).
 * Returns 0, or -1 with the reason ("Rule not found: x", out of memory). */
int peg_build(peg_arena *a, size_t root, char *err, size_t errlen);

/* ---- text form ---- */

/* Reads the text form into a (initialised here). Returns 0, or -1 with
 * v0.5.0's from_json message where it has one ("Unknown parser type: x",
 * "Rule 'r' references invalid parser ID: 9", ...) or the JSON error. Child
 * ids are checked too (b11669 does not: it would read out of bounds). */
int peg_load(peg_arena *a, const char *text, size_t len, char *err, size_t errlen);
/* Appends the text form of a. */
void peg_save(const peg_arena *a, jbuf *out);
/* Appends b11669's dump(id) ("Sequence(Literal(a), Rule(x, ...))"); a schema
 * parser's node kind is written "schema" rather than b11669's node kind name.
 * Past PEG_MAX_DEPTH levels or PEG_DUMP_MAX bytes it writes "..." (b11669's Tag
 * dumps its child with a fresh cycle set, so a hostile arena's dump can grow
 * without end there). */
#define PEG_DUMP_MAX (1u << 20)
void peg_dump(const peg_arena *a, size_t id, jbuf *out);

/* ---- parse ---- */

enum { PEG_FAIL = 0, PEG_SUCCESS = 1, PEG_NEED_MORE = 2 };
#define PEG_LENIENT 1u

typedef struct { size_t pos, len; } peg_bad_utf8;

typedef struct {
    const char *rule;           /* the rule's name, or "" */
    const char *tag;            /* the tag, or "" */
    size_t start, end;          /* bytes of the input */
    size_t *kids, nkids;        /* child node ids */
    int partial;                /* the node's parse needed more input */
    peg_bad_utf8 *bad;          /* invalid UTF-8 runs inside, ascending */
    size_t nbad;
} peg_ast_node;

typedef struct {
    peg_ast_node *nodes;
    size_t n, cap;
    void *mem;                  /* the parse's allocations (freed by peg_ast_free) */
} peg_ast;

typedef struct {
    int type;                   /* PEG_FAIL, PEG_SUCCESS, PEG_NEED_MORE */
    size_t start, end;
    size_t *nodes, nnodes;      /* the top-level AST node ids */
} peg_result;

/* Parses input[0..len) from byte `start` with the root parser. Returns 0 with
 * *res filled (any type: failing to match is a result, not an error), or -1
 * with a reason (no root, nesting past PEG_MAX_DEPTH, out of memory). ast is
 * initialised here; free it with peg_ast_free even after -1. */
int peg_parse(const peg_arena *a, const char *input, size_t len, size_t start, unsigned flags,
              peg_ast *ast, peg_result *res, char *err, size_t errlen);
void peg_ast_free(peg_ast *ast);
/* The node's text with each invalid UTF-8 run replaced by U+FFFD, appended to out. */
void peg_node_text(const peg_ast_node *node, const char *input, jbuf *out);

/* ---- shared with the grammar writer (src/sampling/peg_grammar.c) ---- */

/* b11669's common_parse_utf8_codepoint: 0 success, 1 incomplete, 2 invalid;
 * *used = bytes taken (for invalid/incomplete: the bytes looked at). */
int peg_utf8(const char *s, size_t n, size_t pos, uint32_t *cp, size_t *used);

/* b11669's common_trie (children sorted by code point) and its Aho-Corasick automaton. */
typedef struct {
    uint32_t *cp;               /* child edges, sorted by code point */
    size_t *to;
    size_t n, cap;
    int32_t pattern;            /* pattern index ending here, -1 none */
} peg_trie_node;

typedef struct {
    peg_trie_node *nodes;       /* state 0 is the root */
    size_t nstates, cap;
    size_t *fail;               /* automaton only (peg_ac_build) */
    int32_t *match;             /* longest pattern ending at the state, -1 none */
    size_t *order;              /* states in BFS order */
    uint32_t *alphabet;         /* every code point with an edge, sorted */
    size_t nalpha;
} peg_trie;

int peg_trie_build(peg_trie *t, const peg_str *words, size_t n);     /* 0, -1 out of memory */
int peg_ac_build(peg_trie *t);                                       /* adds fail/match/alphabet */
void peg_trie_free(peg_trie *t);
size_t peg_trie_child(const peg_trie *t, size_t state, uint32_t cp); /* 0: none */
size_t peg_ac_next(const peg_trie *t, size_t state, uint32_t cp);
/* 0 no match, 1 partial (the input ends inside a delimiter), 2 complete */
int peg_trie_check(const peg_trie *t, const char *s, size_t n, size_t pos);

#endif
