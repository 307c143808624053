/*
 * test_regex.c -- sampling/regex.c (lazy grammars' trigger patterns) and the
 * lazy grammar's trigger logic in sampling/grammar.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "sampling/grammar.h"
#include "sampling/regex.h"

typedef struct {
    const char *pat, *text;
    int found;
    long start, pos, len;
} rx_case;

static const rx_case CASES[] = {
#include "test_regex_cases.h"
};

/* llama_grammar_trigger_pattern::find over one compiled pattern. */
static int find(const char *pat, size_t pl, const char *text, size_t tl, long *start, long *pos, long *len)
{
    rx *r;
    char err[256];
    if (rx_compile(pat, pl, &r, err, sizeof err) != RX_OK) return -2;
    long g[2 * 32];
    int whole = pl && pat[0] == '^' && pat[pl - 1] == '$';
    int m = whole ? rx_exec(r, text, tl, 1, g) : 0;
    if (m == 0) m = rx_exec(r, text, tl, 0, g);
    *start = *pos = *len = -1;
    if (m == 1) {
        for (size_t i = 1; i <= rx_groups(r) && *start < 0; i++)
            if (g[2 * i] >= 0 && g[2 * i + 1] > g[2 * i]) *start = g[2 * i];
        if (*start < 0) *start = g[0];
        *pos = g[0];
        *len = g[1] - g[0];
    }
    rx_free(r);
    return m;
}

TEST(regex_matches_as_libstdcxx)
{
    /* 280 cases recorded from std::regex (random patterns of every construct over short texts) */
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const rx_case *c = &CASES[i];
        long st, pos, len;
        int m = find(c->pat, strlen(c->pat), c->text, strlen(c->text), &st, &pos, &len);
        if (m != c->found || st != c->start || pos != c->pos || len != c->len)
            test_fail(__FILE__, __LINE__, "case %zu /%s/ on \"%s\": got %d %ld %ld %ld, want %d %ld %ld %ld", i,
                      c->pat, c->text, m, st, pos, len, c->found, c->start, c->pos, c->len);
    }
    /* by hand: the tool-call shapes chat formats use */
    long st, pos, len;
    const char *t = "Sure.\n<tool_call>{\"name\"";
    CHECK_INT(find("[\\s\\S]*?(<tool_call>)[\\s\\S]*", 28, t, strlen(t), &st, &pos, &len), 1);
    CHECK_INT(st, 6);
    CHECK_INT(pos, 0);
    CHECK_INT(len, (long)strlen(t));
    t = ">>>all\n>>>get_weather";
    CHECK_INT(find(">>>(?!all)", 10, t, strlen(t), &st, &pos, &len), 1);
    CHECK_INT(st, 7);
    t = "<|start|>assistant to=functions.x<|message|>";
    const char *p = "(?:^|<\\|start\\|>assistant)( to=(?!self<\\|message\\|>)(?!user<\\|message\\|>)[^<]*?<\\|message\\|>)";
    CHECK_INT(find(p, strlen(p), t, strlen(t), &st, &pos, &len), 1);
    CHECK_INT(st, 18);
    CHECK_INT(len, (long)strlen(t));
    /* bytes: '.' takes any byte but \n and \r, a NUL in the text included */
    CHECK_INT(find("a.c", 3, "a\0c", 3, &st, &pos, &len), 1);
    CHECK_INT(find("a.c", 3, "a\rc", 3, &st, &pos, &len), 0);
    CHECK_INT(find("\\xc3\\xa9", 8, "caf\xc3\xa9", 5, &st, &pos, &len), 1);
    CHECK_INT(st, 3);
}

static void refused(const char *pat, int code, const char *want)
{
    rx *r = NULL;
    char err[256];
    int rc = rx_compile(pat, strlen(pat), &r, err, sizeof err);
    if (rc != code || strcmp(err, want) != 0)
        test_fail(__FILE__, __LINE__, "/%s/: got %d \"%s\", want %d \"%s\"", pat, rc, err, code, want);
    rx_free(r);
}

TEST(regex_refuses_with_libstdcxx_words)
{
    /* libstdc++'s std::regex_error what(), as llama-server b11669 answers them (measured) */
    refused("(gi", RX_INVALID, "Mismatched '(' and ')' in regular expression");
    refused("a)", RX_INVALID, "Mismatched '(' and ')' in regular expression");
    refused("*a", RX_INVALID, "Mismatched '(' and ')' in regular expression");
    refused("{", RX_INVALID, "Mismatched '(' and ')' in regular expression");
    refused("(?", RX_INVALID, "Mismatched '(' and ')' in regular expression");
    refused("\\", RX_INVALID, "Invalid escape at end of regular expression");
    refused("a{,3}", RX_INVALID, "Invalid range in '{}' in regular expression");
    refused("a{2,1}", RX_INVALID, "Invalid range in '{}' in regular expression");
    refused("a{1,2", RX_INVALID, "Mismatched '{' and '}' in regular expression");
    refused("\\x4", RX_INVALID, "Invalid '\\xNN' control character in regular expression");
    refused("\\u12", RX_INVALID, "Invalid '\\uNNNN' control character in regular expression");
    refused("\\c", RX_INVALID, "invalid '\\cX' control character in regular expression");
    refused("[\\d-z]", RX_INVALID, "Invalid start of '[x-x]' range in regular expression");
    refused("[b-a]", RX_INVALID, "Invalid range in bracket expression.");
    refused("[a", RX_INVALID, "Unexpected character within '[...]' in regular expression");
    refused("(?<n>a)", RX_INVALID, "Invalid '(?...)' zero-width assertion in regular expression");
    /* bankml's own */
    refused("a**", RX_UNSUPPORTED, "the trigger pattern uses a quantifier right after a quantifier, which bankml "
                                   "does not reproduce");
    refused("(a)\\1", RX_UNSUPPORTED, "the trigger pattern uses a back-reference, which bankml does not reproduce");
    refused("(a)*", RX_UNSUPPORTED, "the trigger pattern uses a capturing group inside a quantified expression, "
                                    "which bankml does not reproduce");
    refused("(?:a?)+", RX_UNSUPPORTED, "the trigger pattern uses a quantified expression that can match the empty "
                                       "text, which bankml does not reproduce");
    refused("[]", RX_UNSUPPORTED, "the trigger pattern uses an empty class ([] or [^]), which bankml does not "
                                  "reproduce");
    refused("(?=^a)", RX_UNSUPPORTED, "the trigger pattern uses ^ or $ inside a lookahead, which bankml does not "
                                      "reproduce");
    refused("a{1001}", RX_UNSUPPORTED, "the trigger pattern uses a repetition count above 1000, which bankml does "
                                       "not reproduce");
    refused("[\\x00-\\xff]", RX_UNSUPPORTED, "the trigger pattern uses a range with a byte above 0x7F, which bankml "
                                             "does not reproduce");
}

/* A 6-token vocabulary: " a" "girl" "ir" "l" "x" and an end token. */
static const char *const PIECES[] = {" a", " g", "ir", "l", "x", "</s>"};
static const char *piece_fn(void *ctx, int32_t id, size_t *len)
{
    (void)ctx;
    *len = strlen(PIECES[id]);
    return PIECES[id];
}
static int eog_fn(void *ctx, int32_t id)
{
    (void)ctx;
    return id == 5;
}

TEST(lazy_grammar_waits_then_replays_from_the_match)
{
    char err[256];
    gr_vocab *v = gr_vocab_new(6, piece_fn, eog_fn, NULL, err, sizeof err);
    gr_grammar *g = gr_parse("root ::= [a-z]+", 15, NULL, err, sizeof err);
    CHECK(v && g);
    if (!v || !g) return;
    /* a pattern: nothing is constrained until "girl" is in the text; then the grammar takes "girl" from the
     * first group's start, the " g" token cut to "g" */
    gr_trigger t[] = {{GR_TRIGGER_PATTERN, "(girl)", 6, 0}};
    int code;
    gr_lazy *lz = gr_lazy_new(t, 1, &code, err, sizeof err);
    CHECK(lz != NULL);
    gr_state *st = gr_state_new_lazy(g, v, lz, err, sizeof err);
    CHECK_INT(gr_awaiting(st), 1);
    CHECK_INT(gr_allows(st, 0), 1);        /* " a": the grammar would refuse the space, yet it waits */
    CHECK_INT(gr_allows(st, 5), 1);        /* the end token too */
    CHECK_INT(gr_accept(st, 0, err, sizeof err), 0);
    CHECK_INT(gr_accept(st, 1, err, sizeof err), 0);
    CHECK_INT(gr_accept(st, 2, err, sizeof err), 0);
    CHECK_INT(gr_awaiting(st), 1);
    CHECK_INT(gr_accept(st, 3, err, sizeof err), 0);
    CHECK_INT(gr_awaiting(st), 0);
    CHECK_INT(gr_allows(st, 0), 0);        /* now constrained: no space */
    CHECK_INT(gr_allows(st, 4), 1);
    CHECK_INT(gr_can_end(st), 1);          /* "girl" is a whole [a-z]+ */
    gr_state_free(st);
    gr_lazy_free(lz);
    /* a word whose match the grammar cannot take: llama.cpp's exception on the cut piece */
    gr_grammar *gx = gr_parse("root ::= \"x\"", 12, NULL, err, sizeof err);
    gr_trigger w[] = {{GR_TRIGGER_WORD, "girl", 4, 0}};
    lz = gr_lazy_new(w, 1, &code, err, sizeof err);
    st = gr_state_new_lazy(gx, v, lz, err, sizeof err);
    CHECK_INT(gr_accept(st, 1, err, sizeof err), 0);
    CHECK_INT(gr_accept(st, 2, err, sizeof err), 0);
    CHECK_INT(gr_accept(st, 3, err, sizeof err), -1);
    CHECK_STR(err, "Unexpected empty grammar stack after accepting piece: g (1)");
    gr_state_free(st);
    gr_lazy_free(lz);
    /* a token trigger: the token itself is the grammar's first */
    gr_trigger tk[] = {{GR_TRIGGER_TOKEN, "x", 1, 4}, {GR_TRIGGER_PATTERN_FULL, "", 0, 0}};
    lz = gr_lazy_new(tk, 2, &code, err, sizeof err);
    st = gr_state_new_lazy(gx, v, lz, err, sizeof err);
    CHECK_INT(gr_accept(st, 0, err, sizeof err), 0);   /* "^$" never matches a text */
    CHECK_INT(gr_awaiting(st), 1);
    CHECK_INT(gr_accept(st, 4, err, sizeof err), 0);
    CHECK_INT(gr_awaiting(st), 0);
    CHECK_INT(gr_can_end(st), 1);
    gr_state_free(st);
    gr_lazy_free(lz);
    /* an invalid pattern and an unknown type */
    gr_trigger bad[] = {{GR_TRIGGER_PATTERN, "[b-a]", 5, 0}};
    CHECK(gr_lazy_new(bad, 1, &code, err, sizeof err) == NULL);
    CHECK_INT(code, RX_INVALID);
    CHECK_STR(err, "Invalid range in bracket expression.");
    gr_trigger unk[] = {{7, "a", 1, 0}};
    CHECK(gr_lazy_new(unk, 1, &code, err, sizeof err) == NULL);
    CHECK_INT(code, RX_UNSUPPORTED);
    gr_free(gx);
    gr_free(g);
    gr_vocab_free(v);
}
