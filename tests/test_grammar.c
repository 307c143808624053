/*
 * test_grammar.c -- the GBNF parser (the rules llama_grammar_parser builds,
 * element for element, and its refusals word for word), the automaton
 * (allowed tokens, partial UTF-8, the end token, token references) and
 * the sampler's resampling rule (common_sampler_sample: two draws of the
 * RNG when the first token is rejected).
 */
#include "test.h"

#include <math.h>
#include <stdlib.h>

#include "sampling/grammar.h"
#include "sampling/sampler.h"

static const char *const TYPE[] = {"END", "ALT", "REF", "CHAR", "NOT", "UPPER", "CALT", "ANY", "TOK", "TOKNOT"};

/* The rules as "R0: CHAR 97 REF 1 END | R1: ..." (values in decimal). */
static void dump(const gr_grammar *g, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = 0;
    for (size_t i = 0; i < gr_n_rules(g); i++) {
        size_t n;
        const gr_elem *e = gr_rule(g, i, &n);
        at += (size_t)snprintf(out + at, cap - at, "%sR%zu:", i ? " | " : "", i);
        for (size_t k = 0; k < n && at < cap; k++) {
            if (e[k].type == GR_END || e[k].type == GR_ALT) at += (size_t)snprintf(out + at, cap - at, " %s", TYPE[e[k].type]);
            else at += (size_t)snprintf(out + at, cap - at, " %s %u", TYPE[e[k].type], e[k].value);
        }
    }
}

static void parses_to(const char *text, size_t len, const char *want, uint32_t root)
{
    char err[256], got[2048];
    gr_grammar *g = gr_parse(text, len, NULL, err, sizeof err);
    if (!g) {
        test_fail(__FILE__, __LINE__, "%s: refused: %s", text, err);
        return;
    }
    dump(g, got, sizeof got);
    CHECK_STR(got, want);
    CHECK_INT(gr_root(g), root);
    gr_free(g);
}

#define PARSES(text, want, root) parses_to(text, sizeof(text) - 1, want, root)

static void refused(const char *text, const char *want)
{
    char err[256];
    gr_grammar *g = gr_parse(text, strlen(text), NULL, err, sizeof err);
    CHECK(g == NULL);
    gr_free(g);
    CHECK_STR(err, want);
}

TEST(grammar_parses_llama_cpp_rules)
{
    PARSES("root ::= \"ab\" [c-e] | x\nx ::= .",
           "R0: CHAR 97 CHAR 98 CHAR 99 UPPER 101 ALT REF 1 END | R1: ANY 0 END", 0);
    /* S* -> S' ::= S S' | */
    PARSES("root ::= \"a\"*", "R0: REF 1 END | R1: CHAR 97 REF 1 ALT END", 0);
    /* S+ -> S S' */
    PARSES("root ::= \"a\"+", "R0: CHAR 97 REF 1 END | R1: CHAR 97 REF 1 ALT END", 0);
    /* S? -> S' ::= S | */
    PARSES("root ::= \"a\"?", "R0: REF 1 END | R1: CHAR 97 ALT END", 0);
    PARSES("root ::= \"a\"{2,3}", "R0: CHAR 97 CHAR 97 REF 1 END | R1: CHAR 97 ALT END", 0);
    PARSES("root ::= \"a\"{1,3}", "R0: CHAR 97 REF 2 END | R1: CHAR 97 ALT END | R2: CHAR 97 REF 1 ALT END", 0);
    PARSES("root ::= \"a\"{2}", "R0: CHAR 97 CHAR 97 END", 0);
    PARSES("root ::= \"a\"{0}", "R0: END", 0);
    PARSES("root ::= \"a\"{ 2 , }", "R0: CHAR 97 CHAR 97 REF 1 END | R1: CHAR 97 REF 1 ALT END", 0);
    /* over 2000 as the maximum: no maximum */
    PARSES("root ::= \"a\"{1,2001}", "R0: CHAR 97 REF 1 END | R1: CHAR 97 REF 1 ALT END", 0);
    PARSES("root ::= [^a-z0]", "R0: NOT 97 UPPER 122 CALT 48 END", 0);
    PARSES("root ::= [\\x41\\u00e9\\U0001F600\\]\\-\\n]",
           "R0: CHAR 65 CALT 233 CALT 128512 CALT 93 CALT 45 CALT 10 END", 0);
    /* a '-' before ']' is itself; UTF-8 in a literal is one code point */
    PARSES("root ::= [a-] \"\xc3\xa9\"", "R0: CHAR 97 CALT 45 CHAR 233 END", 0);
    /* groups make rules named after the rule; newlines inside them */
    PARSES("root ::= (\n \"a\" |\n \"b\" ) \"c\"", "R0: REF 1 CHAR 99 END | R1: CHAR 97 ALT CHAR 98 END", 0);
    /* `root ::= "a" |` is accepted: an empty last alternative */
    PARSES("root ::= \"a\" |", "R0: CHAR 97 ALT END", 0);
    PARSES("root ::= ", "R0: END", 0);
    /* comments, token references, a rule defined before root */
    PARSES("# c\nx ::= <[12]> !<[3]> # t\nroot ::= x", "R0: TOK 12 TOKNOT 3 END | R1: REF 0 END", 1);
    /* the text ends at a NUL, as llama.cpp's C string */
    PARSES("root ::= \"a\"\0 junk", "R0: CHAR 97 END", 0);
    /* CRLF ends a rule */
    PARSES("root ::= a\r\na ::= \"x\"\r\n", "R0: REF 1 END | R1: CHAR 120 END", 0);
}

TEST(grammar_refuses_with_llama_cpp_reasons)
{
    refused("root ::= x", "Undefined rule identifier 'x'");
    refused("foo ::= \"x\"", "grammar does not contain a 'root' symbol");
    refused("root ::= root \"x\" | \"y\"", "unsupported grammar, left recursion detected for nonterminal at index 0");
    /* hidden left recursion through a rule that may be empty */
    refused("root ::= e root \"x\" | \"y\"\ne ::= \"\" | \"z\"",
            "unsupported grammar, left recursion detected for nonterminal at index 0");
    refused("root ::= (", "expecting ')' at ");
    refused("root ::= \"\\q\"", "unknown escape at \\q\"");
    refused("root ::= \"\\x4\"", "expecting 2 hex chars at 4\"");
    refused("root ::= \"a\"{2001}", "number of repetitions exceeds sane defaults, please reduce the number of "
                                     "repetitions");
    refused("root ::= \"a\"{x}", "expecting an int at x}");
    refused("root ::= \"a\"{1 x}", "expecting ',' at x}");
    refused("root ::= \"a\"{1,x}", "expecting '}' at x}");
    refused("root ::= * \"a\"", "expecting preceding item to */+/?/{ at \"a\"");
    refused("root ::= \"a\"\n| \"b\"", "expecting name at | \"b\"");
    refused("root := \"a\"", "expecting ::= at := \"a\"");
    refused("root ::= \"a\" )", "expecting newline or end at )");
    refused("root ::= \"a", "unexpected end of input");
    refused("root ::= [a", "unexpected end of input");
    refused("root ::= <foo>", "no vocab to parse token at <foo>");
    refused("root ::= <[x]>", "expecting integer at x]>");
    refused("root ::= <[99999999999999999999]>", "stoul");
    refused("  \n", "failed to parse grammar");
    /* {m,n} with n < m: llama.cpp's max - min wraps and it builds rules until std::bad_alloc */
    refused("root ::= \"a\"{3,1}", "a repetition {3,1} has its maximum below its minimum: llama.cpp expands it "
                                    "until it runs out of memory");
    /* the group holds 38 rules (its own and the 37 of {3,40}): 38 * 60 > 2000 */
    refused("root ::= (\"a\"{3,40}){60}",
            "number of rules that are going to be repeated multiplied by the new repetition exceeds sane defaults, "
            "please reduce the number of repetitions or rule complexity");
}

/* ---- a toy vocabulary ---- */

static const char *const PIECES[] = {
    "a", "b", "ab", "", "</s>", "\xc3", "\xa9", "\xc3\xa9", "\x80", "a\x80", "x", "\0z",
};
#define NV ((int32_t)(sizeof PIECES / sizeof PIECES[0]))

static const char *toy_piece(void *ctx, int32_t id, size_t *len)
{
    (void)ctx;
    *len = id == 11 ? 2 : strlen(PIECES[id]);
    return PIECES[id];
}

static int toy_eog(void *ctx, int32_t id)
{
    (void)ctx;
    return id == 4;
}

/* "1" where gr_apply leaves the token, "0" where it rejects it, for every
 * token of the toy vocabulary. */
static void allowed(gr_state *st, char *out)
{
    smp_token c[NV];
    for (int32_t i = 0; i < NV; i++) c[i] = (smp_token){i, 1.0f, 0.0f};
    CHECK_INT(gr_apply(st, c, (size_t)NV), 0);
    for (int32_t i = 0; i < NV; i++) {
        out[i] = c[i].logit == -INFINITY ? '0' : '1';
        CHECK_INT(gr_allows(st, i), out[i] == '1');
    }
    out[NV] = 0;
}

static gr_state *start(const char *text, gr_vocab *v, gr_grammar **g)
{
    char err[256];
    *g = gr_parse(text, strlen(text), NULL, err, sizeof err);
    if (!*g) {
        test_fail(__FILE__, __LINE__, "%s: %s", text, err);
        return NULL;
    }
    gr_state *st = gr_state_new(*g, v, err, sizeof err);
    CHECK(st != NULL);
    return st;
}

TEST(grammar_automaton_allows_what_llama_cpp_allows)
{
    char err[256], got[NV + 1];
    gr_vocab *v = gr_vocab_new(NV, toy_piece, toy_eog, NULL, err, sizeof err);
    CHECK(v != NULL);
    if (!v) return;
    gr_grammar *g;
    /*                            a b ab "" eos C3 A9 é 80 a80 x \0z */
    gr_state *st = start("root ::= \"ab\" | \"a\"", v, &g);
    if (!st) goto out;
    CHECK_INT(gr_n_stacks(st), 2);
    CHECK_INT(gr_can_end(st), 0);
    allowed(st, got);
    CHECK_STR(got, "101000000000");
    CHECK_INT(gr_accept(st, 0, err, sizeof err), 0);
    CHECK_INT(gr_can_end(st), 1);
    allowed(st, got);                  /* after "a": "b", or the end */
    CHECK_STR(got, "010010000000");
    CHECK_INT(gr_accept(st, 4, err, sizeof err), 0);   /* the end leaves the stacks */
    CHECK_INT(gr_n_stacks(st), 2);
    CHECK_INT(gr_accept(st, 10, err, sizeof err), -1);
    CHECK_STR(err, "Unexpected empty grammar stack after accepting piece: x (10)");
    gr_state_free(st);
    gr_free(g);

    /* partial UTF-8: a lone lead byte may go on to é; then only its
     * continuation */
    st = start("root ::= \"\xc3\xa9\" \"a\"", v, &g);
    if (!st) goto out;
    allowed(st, got);
    CHECK_STR(got, "000001010000");
    CHECK_INT(gr_accept(st, 5, err, sizeof err), 0);
    allowed(st, got);
    CHECK_STR(got, "000000100000");
    CHECK_INT(gr_accept(st, 6, err, sizeof err), 0);
    allowed(st, got);
    CHECK_STR(got, "100000000000");
    gr_state_free(st);
    gr_free(g);

    /* a negated class and `.` take any code point; an invalid byte none */
    st = start("root ::= [^b] .", v, &g);
    if (!st) goto out;
    allowed(st, got);
    CHECK_STR(got, "101001010010");
    gr_state_free(st);
    gr_free(g);

    /* token references: <[4]> allows the end token by its id, not as an end */
    st = start("root ::= \"a\" <[4]> | !<[0]>", v, &g);
    if (!st) goto out;
    allowed(st, got);
    CHECK_STR(got, "111000010010");
    CHECK_INT(gr_accept(st, 0, err, sizeof err), 0);
    allowed(st, got);
    CHECK_STR(got, "000000000000");   /* the end token is an end first: no stack is empty */
    gr_state_free(st);
    gr_free(g);
out:
    gr_vocab_free(v);
}

TEST(grammar_decodes_utf8_as_llama_cpp)
{
    uint32_t cps[8], val = 0;
    int rem = 0;
    CHECK_INT(gr_decode_utf8("a\xc3\xa9", 3, &val, &rem, cps), 2);
    CHECK_INT(cps[0], 'a');
    CHECK_INT(cps[1], 0xE9);
    CHECK_INT(cps[2], 0);
    CHECK_INT(rem, 0);
    /* a partial sequence at the end: its bits so far, one byte to come */
    CHECK_INT(gr_decode_utf8("a\xe2\x82", 3, &val, &rem, cps), 1);
    CHECK_INT(val, (0x2 << 6) | 0x2);
    CHECK_INT(rem, 1);
    CHECK_INT(gr_decode_utf8("\xac", 1, &val, &rem, cps), 1);   /* ... completed: U+20AC */
    CHECK_INT(cps[0], 0x20AC);
    CHECK_INT(rem, 0);
    /* an invalid byte drops everything decoded before it */
    val = 0;
    rem = 0;
    CHECK_INT(gr_decode_utf8("ab\x80", 3, &val, &rem, cps), 0);
    CHECK_INT(cps[0], 0);
    CHECK_INT(rem, -1);
    /* a partial sequence met by a non-continuation byte */
    val = 3;
    rem = 1;
    CHECK_INT(gr_decode_utf8("a", 1, &val, &rem, cps), 0);
    CHECK_INT(rem, -1);
}

/* The constraint of the sampler test: only token 3. */
static int only3_allows(void *ctx, int32_t id)
{
    (void)ctx;
    return id == 3;
}

static int only3_apply(void *ctx, smp_token *c, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++)
        if (c[i].id != 3) c[i].logit = -INFINITY;
    return 0;
}

TEST(grammar_resampling_draws_twice)
{
    sampler_params p;
    sampler_params_init(&p);
    p.seed = 7;
    p.temp = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    char err[256];
    float logits[8] = {0.1f, 0.2f, 0.3f, 0.0f, 0.5f, 0.4f, 0.1f, 0.2f};
    sampler *a = sampler_new(&p, 8, NULL, NULL, 0, err, sizeof err);
    sampler *b = sampler_new(&p, 8, NULL, NULL, 0, err, sizeof err);
    CHECK(a && b);
    if (!a || !b) goto out;
    sampler_constraint c = {NULL, only3_allows, only3_apply};
    int resampled = -1;
    int32_t first = sampler_sample(b, logits);   /* what the unconstrained chain draws first */
    CHECK(first != 3);
    CHECK_INT(sampler_sample_constrained(a, logits, &c, &resampled), 3);
    CHECK_INT(resampled, 1);
    /* a then b: a's generator is two draws in, as llama.cpp's after a resample */
    (void)sampler_sample(b, logits);
    int same = 1;
    for (int i = 0; i < 16; i++) same &= sampler_sample(a, logits) == sampler_sample(b, logits);
    CHECK(same);
out:
    sampler_free(a);
    sampler_free(b);
    sampler_params_free(&p);
}
