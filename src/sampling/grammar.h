/*
 * grammar.h -- GBNF grammars as llama.cpp b11669 reads and applies them
 * (src/llama-grammar.cpp): the parser with its syntax and its refusals, the
 * pushdown automaton (the same stacks, advanced the same way, the same
 * left-recursion refusal) and the candidate rejection of
 * llama_grammar_apply_impl (partial UTF-8, the end-of-generation tokens,
 * token references), so a grammar allows exactly the tokens llama-server's
 * grammar sampler allows.
 *
 * Three objects:
 *   gr_grammar  the parsed rules (gr_parse); read-only once built.
 *   gr_vocab    every token's piece as llama_vocab::token_to_piece gives it
 *               (special = true), decoded once, and the end-of-generation
 *               set; built once per model and shared read-only by every slot.
 *   gr_state    one sequence's stacks and partial UTF-8 state (per request).
 *
 * Use, per request:
 *   g = gr_parse(text, len, &tokenizer, err, n);     NULL: llama-server's 400
 *   st = gr_state_new(g, vocab, err, n);
 *   each step: the sampler asks gr_allows(st, id) of its first draw and, on
 *   a rejection, gr_apply(st, candidates, n) over the whole vocabulary
 *   before drawing again (sampler_sample_constrained); then
 *   gr_accept(st, id) for each generated token (never a prompt token).
 *
 * Nothing here aborts on input: a grammar llama.cpp refuses gives NULL with
 * its reason, and a stack set that would outgrow GR_MAX_STACK_CELLS gives a
 * refusal with the reason instead of exhausting memory.
 */
#ifndef BANKML_GRAMMAR_H
#define BANKML_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "sampling/sampler.h"

/* llama_gretype */
enum {
    GR_END = 0,          /* end of a rule */
    GR_ALT = 1,          /* start of another alternative */
    GR_RULE_REF = 2,     /* a rule, by id */
    GR_CHAR = 3,         /* a code point (the first of a class) */
    GR_CHAR_NOT = 4,     /* the first of a negated class */
    GR_CHAR_RNG_UPPER = 5, /* makes the element before an inclusive range */
    GR_CHAR_ALT = 6,     /* another code point of the class */
    GR_CHAR_ANY = 7,     /* . */
    GR_TOKEN = 8,        /* <[id]> or <piece> */
    GR_TOKEN_NOT = 9     /* !<[id]> */
};

typedef struct {
    uint32_t type;       /* GR_* */
    uint32_t value;      /* code point, rule id or token id */
} gr_elem;

/* llama_grammar_parser's MAX_REPETITION_THRESHOLD */
#define GR_MAX_REPETITION 2000
/* The most stack cells (element positions) one stack set may hold before
 * bankml refuses to go on: llama.cpp has no limit and would use the memory. */
#define GR_MAX_STACK_CELLS ((size_t)1 << 24)

/* What the parser needs for a <piece> token reference: the text tokenized
 * with add_special false and parse_special true (*ids malloc'd, free()d by
 * the parser); 0, or -1 when it cannot be tokenized. NULL: <piece> is
 * refused as llama.cpp refuses it without a vocabulary. */
typedef struct {
    void *ctx;
    int (*tokenize)(void *ctx, const char *text, size_t len, int32_t **ids, size_t *n);
} gr_tokenizer;

typedef struct gr_grammar gr_grammar;

/* Parses GBNF text as llama_grammar_init_impl(vocab, text, "root", ...)
 * does: the text ends at its first NUL byte (llama.cpp reads a C string);
 * rules `name ::= alternatives`, literals with escapes \x \u \U \t \r \n
 * \\ \" \[ \] \-, classes [a-z] [^...], `.`, groups, * + ? {m} {m,} {m,n}
 * (at most 2000 repetitions, and at most 2000 rules times repetitions),
 * <[id]> and <piece> token references (! negates one), # comments. Then
 * every rule must be defined, `root` must exist, and no rule may be left
 * recursive. Returns the grammar, or NULL with llama.cpp's reason in err
 * ("expecting ::= at ...", "Undefined rule identifier 'x'", "grammar does
 * not contain a 'root' symbol", "unsupported grammar, left recursion
 * detected for nonterminal at index 0", ...; llama-server itself answers
 * every one of them with GR_PARSE_FAILED) or "out of memory". */
gr_grammar *gr_parse(const char *text, size_t len, const gr_tokenizer *tk, char *err, size_t errlen);
void gr_free(gr_grammar *g);

/* llama-server's 400 message for any grammar gr_parse refuses. */
#define GR_PARSE_FAILED "Failed to initialize samplers: failed to parse grammar"

/* The rules, for tests: rule i's elements (ending with GR_END) and the
 * number of rules; the root rule's id. */
const gr_elem *gr_rule(const gr_grammar *g, size_t i, size_t *n_elems);
size_t gr_n_rules(const gr_grammar *g);
uint32_t gr_root(const gr_grammar *g);

/* ---- the vocabulary ---- */

typedef struct gr_vocab gr_vocab;

/* Builds the grammar's view of n tokens: piece(ctx, id, &len) must give
 * llama_vocab::token_to_piece(id) (the cached piece, special = true: control
 * tokens show their text); only the bytes before a NUL count, as llama.cpp
 * decodes a C string. is_eog(ctx, id) is llama_vocab_is_eog. NULL with a
 * reason when memory runs out. */
gr_vocab *gr_vocab_new(int32_t n, const char *(*piece)(void *ctx, int32_t id, size_t *len),
                       int (*is_eog)(void *ctx, int32_t id), void *ctx, char *err, size_t errlen);
void gr_vocab_free(gr_vocab *v);
int32_t gr_vocab_n(const gr_vocab *v);

/* ---- one sequence ---- */

typedef struct gr_state gr_state;

/* The start stacks of g's root (each alternative advanced to its first
 * terminal), over vocabulary v (both must outlive the state). NULL with a
 * reason on memory or when the stacks outgrow GR_MAX_STACK_CELLS. */
gr_state *gr_state_new(const gr_grammar *g, const gr_vocab *v, char *err, size_t errlen);
void gr_state_free(gr_state *st);

/* llama_grammar_apply_impl over c[0..n): the logit of every candidate the
 * grammar cannot take next becomes -INFINITY (an end-of-generation token
 * unless a stack is empty, a token whose piece is empty or begins with a
 * NUL, one whose code points no stack accepts, one ending in a partial
 * UTF-8 sequence no stack can complete). Ids outside the vocabulary are
 * rejected. 0, or -1 when memory runs out (st keeps its reason). */
int gr_apply(gr_state *st, smp_token *c, size_t n);

/* The same for one token: 1 when gr_apply would leave it, 0 when not, -1
 * when memory runs out. */
int gr_allows(gr_state *st, int32_t id);

/* llama_grammar_accept_impl: the stacks advance over the token's piece
 * (an end-of-generation token leaves them as they are when one is empty).
 * 0, or -1 with the reason in err when the token leaves no stack
 * (llama.cpp throws "Unexpected empty grammar stack after accepting piece")
 * or memory runs out. */
int gr_accept(gr_state *st, int32_t id, char *err, size_t errlen);

/* ---- lazy grammars (grammar_lazy with grammar_triggers) ---- */

/* common_grammar_trigger_type, in its values (the request's "type"). */
enum { GR_TRIGGER_TOKEN = 0, GR_TRIGGER_WORD = 1, GR_TRIGGER_PATTERN = 2, GR_TRIGGER_PATTERN_FULL = 3 };

/* One trigger as the sampler receives it (common_grammar_trigger): a word
 * that is one preserved token arrives as GR_TRIGGER_TOKEN with its id (the
 * request reader converts it, as llama-server's grammar_triggers field
 * does); value[0..len) is the word or the pattern (any bytes). The chat
 * layer builds these from a template's format. */
typedef struct {
    int type;
    const char *value;
    size_t len;
    int32_t token;       /* GR_TRIGGER_TOKEN */
} gr_trigger;

typedef struct gr_lazy gr_lazy;

/* The triggers of a lazy grammar as common_sampler_init lowers them (a
 * word becomes its regex_escape'd pattern, a full pattern is anchored with
 * '^' and '$' where it lacks them, "^$" when empty; tokens stay ids) and
 * llama_grammar_init_impl compiles them (std::regex, ECMAScript: regex.h).
 * NULL with *code an RX_* of regex.h: RX_INVALID when libstdc++ refuses a
 * pattern (err has its words; llama-server answers 400 "Failed to
 * initialize samplers: " + them), RX_UNSUPPORTED when bankml does not
 * reproduce it or the type is unknown (llama-server b11669 aborts on an
 * unknown type), RX_NOMEM. Read-only once built; outlives its states. */
gr_lazy *gr_lazy_new(const gr_trigger *t, size_t n, int *code, char *err, size_t errlen);
void gr_lazy_free(gr_lazy *lz);

/* gr_state_new for a lazy grammar (lz NULL: not lazy). Until a trigger,
 * gr_apply and gr_allows constrain nothing and gr_accept only buffers each
 * token's whole piece (llama_grammar_accept_impl while awaiting_trigger):
 * a trigger token is accepted by the grammar as it comes; after each other
 * token every pattern is searched over the buffer (std::regex_match first
 * for one that begins with '^' and ends with '$', then std::regex_search),
 * and on the first that matches, the grammar is fed from the start of its
 * first capturing group that matched something (else the match's start):
 * every buffered token that ends after it, the first one cut. Then it
 * constrains as any grammar. gr_accept fails (-1 with llama.cpp's
 * "Unexpected empty grammar stack after accepting piece: ..." of the cut
 * piece) when the grammar cannot take that text, as llama-server's 500. */
gr_state *gr_state_new_lazy(const gr_grammar *g, const gr_vocab *v, const gr_lazy *lz, char *err, size_t errlen);
/* 1 while a lazy grammar awaits its trigger. */
int gr_awaiting(const gr_state *st);

/* The number of stacks, 1 when one of them is empty (the grammar may end
 * here), for tests. */
size_t gr_n_stacks(const gr_state *st);
int gr_can_end(const gr_state *st);
/* The last failure's reason ("" when none). */
const char *gr_error(const gr_state *st);

/* llama.cpp's decode_utf8 over a piece (a C string: it stops at s[n] or a
 * NUL) continuing from partial state (*value, *n_remain): writes the code
 * points and a terminating 0 to cps (n + 1 entries), returns their count
 * (without the 0), and leaves the new partial state. Exposed for tests. */
size_t gr_decode_utf8(const char *s, size_t n, uint32_t *value, int *n_remain, uint32_t *cps);

#endif
