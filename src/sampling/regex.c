/*
 * regex.c -- ECMAScript regular expressions over bytes, as libstdc++'s
 * std::regex matches them (its depth-first executor), for lazy grammars'
 * triggers. See regex.h for the subset and the refusals.
 *
 * The pattern is parsed into a tree, checked, and compiled into a program
 * for a backtracking machine with an explicit stack (no recursion over the
 * text, so a long text cannot exhaust the thread's stack): SET (one byte in
 * a 256-bit set), SPLIT (try the first branch, keep the second), JMP, SAVE
 * (a group boundary, undone on backtracking), the assertions, LOOK (a
 * lookahead, run as its own search from the position) and MATCH.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "sampling/regex.h"

#define RX_MAX_COUNT 1000
#define RX_MAX_DEPTH 64
#define RX_MAX_PROG 200000

static const char RX_E_PAREN[] = "Mismatched '(' and ')' in regular expression";
static const char RX_E_ESCAPE_END[] = "Invalid escape at end of regular expression";
static const char RX_E_BRACE_RANGE[] = "Invalid range in '{}' in regular expression";
static const char RX_E_BRACE[] = "Mismatched '{' and '}' in regular expression";
static const char RX_E_XNN[] = "Invalid '\\xNN' control character in regular expression";
static const char RX_E_UNNNN[] = "Invalid '\\uNNNN' control character in regular expression";
static const char RX_E_CX[] = "invalid '\\cX' control character in regular expression";
static const char RX_E_ASSERT[] = "Invalid '(?...)' zero-width assertion in regular expression";
static const char RX_E_BRACKET[] = "Unexpected character within '[...]' in regular expression";
static const char RX_E_BRACKET_RANGE[] = "Invalid range in bracket expression.";
static const char RX_E_RANGE_START[] = "Invalid start of '[x-x]' range in regular expression";

/* ---- the tree ---- */

enum { RN_EMPTY, RN_SET, RN_BOL, RN_EOL, RN_WB, RN_NWB, RN_CAT, RN_ALT, RN_GROUP, RN_NCGROUP, RN_LOOK, RN_REP };

typedef struct rx_node {
    int kind;
    int set;                     /* RN_SET: index into the sets */
    int group;                   /* RN_GROUP: its number (1..) */
    int neg;                     /* RN_LOOK: (?! */
    int min, max, greedy;        /* RN_REP: max -1 unbounded */
    struct rx_node **kids;
    size_t n_kids;
} rx_node;

typedef struct {
    uint8_t bits[32];
} rx_set;

enum { RI_SET, RI_SPLIT, RI_JMP, RI_SAVE, RI_BOL, RI_EOL, RI_WB, RI_NWB, RI_LOOK, RI_MATCH };

typedef struct {
    int op;
    int a, b;                    /* SET: set; SPLIT: first, second; JMP: to; SAVE: slot; LOOK: neg, end */
} rx_inst;

struct rx {
    rx_set *sets;
    size_t n_sets;
    rx_inst *prog;
    size_t n_prog;
    size_t n_groups;
};

typedef struct {
    const unsigned char *s;
    size_t n, i;
    int depth, in_look;
    size_t n_groups;
    rx_set *sets;
    size_t n_sets, cap_sets;
    int code;                    /* RX_* of the first failure */
    char *err;
    size_t errlen;
} rx_parser;

static void rx_node_free(rx_node *nd)
{
    if (!nd) return;
    for (size_t i = 0; i < nd->n_kids; i++) rx_node_free(nd->kids[i]);
    free(nd->kids);
    free(nd);
}

static int rx_fail(rx_parser *p, int code, const char *msg)
{
    if (p->code == RX_OK) {
        p->code = code;
        bk_err(p->err, p->errlen, "%s", msg);
    }
    return -1;
}

static int rx_refuse(rx_parser *p, const char *what)
{
    if (p->code == RX_OK) {
        p->code = RX_UNSUPPORTED;
        bk_err(p->err, p->errlen, "the trigger pattern uses %s, which bankml does not reproduce", what);
    }
    return -1;
}

static rx_node *rx_new(rx_parser *p, int kind)
{
    rx_node *nd = calloc(1, sizeof *nd);
    if (!nd) rx_fail(p, RX_NOMEM, "out of memory");
    else nd->kind = kind;
    return nd;
}

static int rx_add_kid(rx_parser *p, rx_node *nd, rx_node *kid)
{
    rx_node **nk = realloc(nd->kids, (nd->n_kids + 1) * sizeof *nk);
    if (!nk) {
        rx_node_free(kid);
        return rx_fail(p, RX_NOMEM, "out of memory");
    }
    nd->kids = nk;
    nd->kids[nd->n_kids++] = kid;
    return 0;
}

static int rx_new_set(rx_parser *p, const rx_set *s)
{
    if (p->n_sets == p->cap_sets) {
        size_t nc = p->cap_sets ? p->cap_sets * 2 : 16;
        rx_set *ns = realloc(p->sets, nc * sizeof *ns);
        if (!ns) return rx_fail(p, RX_NOMEM, "out of memory");
        p->sets = ns;
        p->cap_sets = nc;
    }
    p->sets[p->n_sets] = *s;
    return (int)p->n_sets++;
}

static void rx_set_add(rx_set *s, unsigned c) { s->bits[c >> 3] |= (uint8_t)(1u << (c & 7)); }
static int rx_set_has(const rx_set *s, unsigned c) { return s->bits[c >> 3] >> (c & 7) & 1; }

static int rx_is_space(unsigned c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static int rx_is_digit(unsigned c) { return c >= '0' && c <= '9'; }
static int rx_is_word(unsigned c)
{
    return rx_is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* \d \D \s \S \w \W into s (union). */
static void rx_class_escape(rx_set *s, int e)
{
    for (unsigned c = 0; c < 256; c++) {
        int in = e == 'd' || e == 'D' ? rx_is_digit(c) : e == 's' || e == 'S' ? rx_is_space(c) : rx_is_word(c);
        if (e == 'D' || e == 'S' || e == 'W') in = !in;
        if (in) rx_set_add(s, c);
    }
}

static int rx_hex(int c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; }

/* The escape after a backslash at p->i (already past the backslash), in
 * or out of a class: a class escape (*cls set to its letter), or one byte
 * in *byte. -1 on failure. */
static int rx_escape(rx_parser *p, int in_class, int *cls, unsigned *byte)
{
    *cls = 0;
    if (p->i >= p->n) return rx_fail(p, RX_INVALID, RX_E_ESCAPE_END);
    unsigned c = p->s[p->i++];
    switch (c) {
    case 'd': case 'D': case 's': case 'S': case 'w': case 'W': *cls = (int)c; return 0;
    case 'f': *byte = '\f'; return 0;
    case 'n': *byte = '\n'; return 0;
    case 'r': *byte = '\r'; return 0;
    case 't': *byte = '\t'; return 0;
    case 'v': *byte = '\v'; return 0;
    case 'x': {
        int h1 = p->i < p->n ? rx_hex(p->s[p->i]) : -1;
        int h2 = p->i + 1 < p->n ? rx_hex(p->s[p->i + 1]) : -1;
        if (h1 < 0 || h2 < 0) return rx_fail(p, RX_INVALID, RX_E_XNN);
        p->i += 2;
        *byte = (unsigned)(h1 * 16 + h2);
        return 0;
    }
    case 'u': {
        for (int k = 0; k < 4; k++)
            if (p->i + (size_t)k >= p->n || rx_hex(p->s[p->i + (size_t)k]) < 0) return rx_fail(p, RX_INVALID, RX_E_UNNNN);
        return rx_refuse(p, "a \\uXXXX escape");
    }
    case 'c':
        if (p->i >= p->n) return rx_fail(p, RX_INVALID, RX_E_CX);
        return rx_refuse(p, "a \\cX escape");
    case '0': return rx_refuse(p, "a \\0 escape");
    default: break;
    }
    if (c >= '1' && c <= '9') return rx_refuse(p, "a back-reference");
    if (c == 'b' || c == 'B') return in_class ? rx_refuse(p, "\\b inside a class") : rx_refuse(p, "\\b here");
    if (c < 0x80 && !rx_is_word(c) && c > ' ' && c != 0x7f) {
        *byte = c;
        return 0;
    }
    return rx_refuse(p, "an identity escape of a letter, digit, space or byte above 0x7F");
}

static rx_node *rx_set_node(rx_parser *p, const rx_set *s)
{
    int k = rx_new_set(p, s);
    if (k < 0) return NULL;
    rx_node *nd = rx_new(p, RN_SET);
    if (nd) nd->set = k;
    return nd;
}

/* [ ... ] with p->i past the '['. */
static rx_node *rx_parse_class(rx_parser *p)
{
    rx_set s;
    memset(&s, 0, sizeof s);
    int neg = 0;
    if (p->i < p->n && p->s[p->i] == '^') {
        neg = 1;
        p->i++;
    }
    if (p->i < p->n && p->s[p->i] == ']') {
        rx_refuse(p, "an empty class ([] or [^])");
        return NULL;
    }
    int after_range = 0;
    for (;;) {
        if (p->i >= p->n) {
            rx_fail(p, RX_INVALID, RX_E_BRACKET);
            return NULL;
        }
        unsigned c = p->s[p->i];
        if (c == ']') {
            p->i++;
            break;
        }
        int cls = 0;
        unsigned lo = 0;
        if (c == '[' && p->i + 1 < p->n && (p->s[p->i + 1] == ':' || p->s[p->i + 1] == '.' || p->s[p->i + 1] == '=')) {
            rx_refuse(p, "a POSIX bracket class");
            return NULL;
        }
        if (c == '-' && after_range) {
            rx_refuse(p, "a '-' right after a range in a class");
            return NULL;
        }
        p->i++;
        if (c == '\\') {
            if (rx_escape(p, 1, &cls, &lo)) return NULL;
        } else {
            lo = c;
        }
        after_range = 0;
        /* a range? '-' not last */
        if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
            if (cls) {
                rx_fail(p, RX_INVALID, RX_E_RANGE_START);
                return NULL;
            }
            p->i++;
            unsigned hi = p->s[p->i++];
            int hcls = 0;
            if (hi == '\\') {
                if (rx_escape(p, 1, &hcls, &hi)) return NULL;
                if (hcls) {
                    rx_refuse(p, "a class escape ending a range");
                    return NULL;
                }
            } else if (hi == '[') {
                rx_refuse(p, "'[' ending a range");
                return NULL;
            }
            if (lo > hi) {
                rx_fail(p, RX_INVALID, RX_E_BRACKET_RANGE);
                return NULL;
            }
            if (hi >= 0x80) {
                rx_refuse(p, "a range with a byte above 0x7F");
                return NULL;
            }
            for (unsigned x = lo; x <= hi; x++) rx_set_add(&s, x);
            after_range = 1;
            continue;
        }
        if (cls) rx_class_escape(&s, cls);
        else rx_set_add(&s, lo);
    }
    if (neg)
        for (int k = 0; k < 32; k++) s.bits[k] = (uint8_t)~s.bits[k];
    return rx_set_node(p, &s);
}

static rx_node *rx_parse_alt(rx_parser *p);

/* Whether nd can match the empty text; whether it holds a capturing group
 * or an assertion. */
static int rx_nullable(const rx_node *nd)
{
    switch (nd->kind) {
    case RN_SET: return 0;
    case RN_CAT:
        for (size_t i = 0; i < nd->n_kids; i++)
            if (!rx_nullable(nd->kids[i])) return 0;
        return 1;
    case RN_ALT:
        for (size_t i = 0; i < nd->n_kids; i++)
            if (rx_nullable(nd->kids[i])) return 1;
        return 0;
    case RN_GROUP: case RN_NCGROUP: return rx_nullable(nd->kids[0]);
    case RN_REP: return nd->min == 0 || rx_nullable(nd->kids[0]);
    default: return 1;
    }
}

static int rx_has_group(const rx_node *nd)
{
    if (nd->kind == RN_GROUP) return 1;
    for (size_t i = 0; i < nd->n_kids; i++)
        if (rx_has_group(nd->kids[i])) return 1;
    return 0;
}

/* {m} {m,} {m,n} with p->i at the '{'. */
static int rx_parse_braces(rx_parser *p, int *min, int *max)
{
    p->i++;
    if (p->i >= p->n || !rx_is_digit(p->s[p->i])) return rx_fail(p, RX_INVALID, RX_E_BRACE_RANGE);
    long a = 0, b = -1;
    while (p->i < p->n && rx_is_digit(p->s[p->i])) {
        if (a <= 100000) a = a * 10 + (p->s[p->i] - '0');
        p->i++;
    }
    b = a;
    if (p->i < p->n && p->s[p->i] == ',') {
        p->i++;
        b = -1;
        if (p->i < p->n && rx_is_digit(p->s[p->i])) {
            b = 0;
            while (p->i < p->n && rx_is_digit(p->s[p->i])) {
                if (b <= 100000) b = b * 10 + (p->s[p->i] - '0');
                p->i++;
            }
        }
    }
    if (p->i >= p->n) return rx_fail(p, RX_INVALID, RX_E_BRACE);
    if (p->s[p->i] != '}') return rx_refuse(p, "a malformed {m,n} quantifier");
    p->i++;
    if (b >= 0 && b < a) return rx_fail(p, RX_INVALID, RX_E_BRACE_RANGE);
    if (a > RX_MAX_COUNT || b > RX_MAX_COUNT) return rx_refuse(p, "a repetition count above 1000");
    *min = (int)a;
    *max = (int)b;
    return 0;
}

static int rx_is_quant(unsigned c) { return c == '*' || c == '+' || c == '?' || c == '{'; }

/* One term: an assertion, or an atom and its quantifier. */
static rx_node *rx_parse_term(rx_parser *p)
{
    unsigned c = p->s[p->i];
    rx_node *atom = NULL;
    int assertion = 0;
    if (rx_is_quant(c)) {
        rx_fail(p, RX_INVALID, RX_E_PAREN);
        return NULL;
    }
    p->i++;
    if (c == '^' || c == '$') {
        if (p->in_look) {
            rx_refuse(p, "^ or $ inside a lookahead");
            return NULL;
        }
        atom = rx_new(p, c == '^' ? RN_BOL : RN_EOL);
        assertion = 1;
    } else if (c == '.') {
        rx_set s;
        memset(&s, 0xff, sizeof s);
        s.bits['\n' >> 3] &= (uint8_t)~(1u << ('\n' & 7));
        s.bits['\r' >> 3] &= (uint8_t)~(1u << ('\r' & 7));
        atom = rx_set_node(p, &s);
    } else if (c == '[') {
        atom = rx_parse_class(p);
    } else if (c == '(') {
        int kind = RN_GROUP, neg = 0;
        if (p->i < p->n && p->s[p->i] == '?') {
            if (p->i + 1 >= p->n) {
                rx_fail(p, RX_INVALID, RX_E_PAREN);
                return NULL;
            }
            unsigned k = p->s[p->i + 1];
            if (k == ':') kind = RN_NCGROUP;
            else if (k == '=' || k == '!') kind = RN_LOOK, neg = k == '!';
            else {
                rx_fail(p, RX_INVALID, RX_E_ASSERT);
                return NULL;
            }
            p->i += 2;
        }
        if (++p->depth > RX_MAX_DEPTH) {
            rx_refuse(p, "groups nested deeper than 64");
            return NULL;
        }
        int group = kind == RN_GROUP ? (int)++p->n_groups : 0;
        if (kind == RN_LOOK) p->in_look++;
        rx_node *inner = rx_parse_alt(p);
        if (kind == RN_LOOK) p->in_look--;
        p->depth--;
        if (!inner) return NULL;
        if (p->i >= p->n || p->s[p->i] != ')') {
            rx_node_free(inner);
            rx_fail(p, RX_INVALID, RX_E_PAREN);
            return NULL;
        }
        p->i++;
        atom = rx_new(p, kind);
        if (!atom) {
            rx_node_free(inner);
            return NULL;
        }
        atom->group = group;
        atom->neg = neg;
        if (rx_add_kid(p, atom, inner)) {
            rx_node_free(atom);
            return NULL;
        }
        assertion = kind == RN_LOOK;
    } else if (c == '\\') {
        if (p->i < p->n && (p->s[p->i] == 'b' || p->s[p->i] == 'B')) {
            if (p->in_look) {
                rx_refuse(p, "\\b or \\B inside a lookahead");
                return NULL;
            }
            atom = rx_new(p, p->s[p->i] == 'b' ? RN_WB : RN_NWB);
            p->i++;
            assertion = 1;
        } else {
            int cls = 0;
            unsigned b = 0;
            if (rx_escape(p, 0, &cls, &b)) return NULL;
            rx_set s;
            memset(&s, 0, sizeof s);
            if (cls) rx_class_escape(&s, cls);
            else rx_set_add(&s, b);
            atom = rx_set_node(p, &s);
        }
    } else {
        rx_set s;
        memset(&s, 0, sizeof s);
        rx_set_add(&s, c);
        atom = rx_set_node(p, &s);
    }
    if (!atom) return NULL;
    if (p->i >= p->n || !rx_is_quant(p->s[p->i])) return atom;
    /* the quantifier */
    int min = 0, max = -1, greedy = 1;
    unsigned q = p->s[p->i];
    if (q == '{') {
        if (rx_parse_braces(p, &min, &max)) goto bad;
    } else {
        p->i++;
        min = q == '+' ? 1 : 0;
        max = q == '?' ? 1 : -1;
    }
    if (p->i < p->n && p->s[p->i] == '?') {
        greedy = 0;
        p->i++;
    }
    if (p->i < p->n && rx_is_quant(p->s[p->i])) {
        rx_refuse(p, "a quantifier right after a quantifier");
        goto bad;
    }
    if (assertion) {
        rx_refuse(p, "a quantified assertion");
        goto bad;
    }
    if (rx_nullable(atom)) {
        rx_refuse(p, "a quantified expression that can match the empty text");
        goto bad;
    }
    if (rx_has_group(atom)) {
        rx_refuse(p, "a capturing group inside a quantified expression");
        goto bad;
    }
    rx_node *rep = rx_new(p, RN_REP);
    if (!rep) goto bad;
    rep->min = min;
    rep->max = max;
    rep->greedy = greedy;
    if (rx_add_kid(p, rep, atom)) {
        rx_node_free(rep);
        return NULL;
    }
    return rep;
bad:
    rx_node_free(atom);
    return NULL;
}

static rx_node *rx_parse_alt(rx_parser *p)
{
    rx_node *alt = rx_new(p, RN_ALT);
    if (!alt) return NULL;
    for (;;) {
        rx_node *cat = rx_new(p, RN_CAT);
        if (!cat || rx_add_kid(p, alt, cat)) goto bad;
        while (p->i < p->n && p->s[p->i] != '|' && p->s[p->i] != ')') {
            rx_node *t = rx_parse_term(p);
            if (!t || rx_add_kid(p, cat, t)) goto bad;
        }
        if (p->i < p->n && p->s[p->i] == '|') {
            p->i++;
            continue;
        }
        return alt;
    }
bad:
    rx_node_free(alt);
    return NULL;
}

/* ---- the program ---- */

typedef struct {
    rx_inst *prog;
    size_t n, cap;
    int oom;
} rx_code;

static int rx_emit(rx_code *c, int op, int a, int b)
{
    if (c->n >= RX_MAX_PROG) {
        c->oom = 2;
        return -1;
    }
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 64;
        rx_inst *np = realloc(c->prog, nc * sizeof *np);
        if (!np) {
            c->oom = 1;
            return -1;
        }
        c->prog = np;
        c->cap = nc;
    }
    c->prog[c->n] = (rx_inst){op, a, b};
    return (int)c->n++;
}

static int rx_gen(rx_code *c, const rx_node *nd);

static int rx_gen_rep(rx_code *c, const rx_node *nd)
{
    const rx_node *k = nd->kids[0];
    for (int i = 0; i < nd->min; i++)
        if (rx_gen(c, k)) return -1;
    if (nd->max < 0) {
        /* L: SPLIT body, out; body; JMP L */
        int l = rx_emit(c, RI_SPLIT, 0, 0);
        if (l < 0 || rx_gen(c, k) || rx_emit(c, RI_JMP, l, 0) < 0) return -1;
        int out = (int)c->n;
        c->prog[l].a = nd->greedy ? l + 1 : out;
        c->prog[l].b = nd->greedy ? out : l + 1;
        return 0;
    }
    int n_opt = nd->max - nd->min;
    int *splits = malloc((size_t)(n_opt ? n_opt : 1) * sizeof *splits);
    if (!splits) {
        c->oom = 1;
        return -1;
    }
    for (int i = 0; i < n_opt; i++) {
        splits[i] = rx_emit(c, RI_SPLIT, 0, 0);
        if (splits[i] < 0 || rx_gen(c, k)) {
            free(splits);
            return -1;
        }
    }
    int out = (int)c->n;
    for (int i = 0; i < n_opt; i++) {
        c->prog[splits[i]].a = nd->greedy ? splits[i] + 1 : out;
        c->prog[splits[i]].b = nd->greedy ? out : splits[i] + 1;
    }
    free(splits);
    return 0;
}

static int rx_gen(rx_code *c, const rx_node *nd)
{
    switch (nd->kind) {
    case RN_EMPTY: return 0;
    case RN_SET: return rx_emit(c, RI_SET, nd->set, 0) < 0 ? -1 : 0;
    case RN_BOL: return rx_emit(c, RI_BOL, 0, 0) < 0 ? -1 : 0;
    case RN_EOL: return rx_emit(c, RI_EOL, 0, 0) < 0 ? -1 : 0;
    case RN_WB: return rx_emit(c, RI_WB, 0, 0) < 0 ? -1 : 0;
    case RN_NWB: return rx_emit(c, RI_NWB, 0, 0) < 0 ? -1 : 0;
    case RN_CAT:
        for (size_t i = 0; i < nd->n_kids; i++)
            if (rx_gen(c, nd->kids[i])) return -1;
        return 0;
    case RN_ALT: {
        if (nd->n_kids == 1) return rx_gen(c, nd->kids[0]);
        /* SPLIT a1, next; a1; JMP end; next: SPLIT a2, ... ; last */
        int *jumps = malloc(nd->n_kids * sizeof *jumps);
        if (!jumps) {
            c->oom = 1;
            return -1;
        }
        size_t nj = 0;
        for (size_t i = 0; i < nd->n_kids; i++) {
            int sp = -1;
            if (i + 1 < nd->n_kids && (sp = rx_emit(c, RI_SPLIT, 0, 0)) < 0) goto fail;
            if (sp >= 0) c->prog[sp].a = sp + 1;
            if (rx_gen(c, nd->kids[i])) goto fail;
            if (i + 1 < nd->n_kids) {
                int j = rx_emit(c, RI_JMP, 0, 0);
                if (j < 0) goto fail;
                jumps[nj++] = j;
                c->prog[sp].b = (int)c->n;
            }
        }
        for (size_t i = 0; i < nj; i++) c->prog[jumps[i]].a = (int)c->n;
        free(jumps);
        return 0;
    fail:
        free(jumps);
        return -1;
    }
    case RN_GROUP:
        if (rx_emit(c, RI_SAVE, 2 * nd->group, 0) < 0 || rx_gen(c, nd->kids[0]) ||
            rx_emit(c, RI_SAVE, 2 * nd->group + 1, 0) < 0)
            return -1;
        return 0;
    case RN_NCGROUP: return rx_gen(c, nd->kids[0]);
    case RN_LOOK: {
        /* LOOK neg, end; body; MATCH; end: */
        int l = rx_emit(c, RI_LOOK, nd->neg, 0);
        if (l < 0 || rx_gen(c, nd->kids[0]) || rx_emit(c, RI_MATCH, 0, 0) < 0) return -1;
        c->prog[l].b = (int)c->n;
        return 0;
    }
    case RN_REP: return rx_gen_rep(c, nd);
    default: return -1;
    }
}

int rx_compile(const char *pat, size_t len, rx **out, char *err, size_t errlen)
{
    rx_parser p;
    memset(&p, 0, sizeof p);
    p.s = (const unsigned char *)pat;
    p.n = len;
    p.err = err;
    p.errlen = errlen;
    *out = NULL;
    if (errlen) err[0] = 0;
    rx_node *root = rx_parse_alt(&p);
    if (root && p.i < p.n) {   /* a ')' with no '(' */
        rx_fail(&p, RX_INVALID, RX_E_PAREN);
        rx_node_free(root);
        root = NULL;
    }
    if (!root) {
        free(p.sets);
        return p.code != RX_OK ? p.code : RX_NOMEM;
    }
    rx_code c = {0};
    int rc = rx_gen(&c, root);
    if (rc == 0) rc = rx_emit(&c, RI_MATCH, 0, 0) < 0 ? -1 : 0;
    rx_node_free(root);
    rx *r = rc == 0 ? calloc(1, sizeof *r) : NULL;
    if (!r) {
        free(c.prog);
        free(p.sets);
        if (c.oom == 2) {
            bk_err(err, errlen, "the trigger pattern's repetitions make a program over %d steps, which bankml does "
                   "not follow", RX_MAX_PROG);
            return RX_UNSUPPORTED;
        }
        bk_err(err, errlen, "out of memory");
        return RX_NOMEM;
    }
    r->sets = p.sets;
    r->n_sets = p.n_sets;
    r->prog = c.prog;
    r->n_prog = c.n;
    r->n_groups = p.n_groups;
    *out = r;
    return RX_OK;
}

void rx_free(rx *r)
{
    if (!r) return;
    free(r->sets);
    free(r->prog);
    free(r);
}

size_t rx_groups(const rx *r) { return r->n_groups; }

/* ---- the machine ---- */

typedef struct {
    int kind;                    /* 0 a branch to try, 1 a slot to restore */
    int pc;
    long v;                      /* branch: the position; restore: the old value */
} rx_bt;

typedef struct {
    rx_bt *a;
    size_t n, cap;
} rx_stack;

static int rx_push(rx_stack *st, int kind, int pc, long v)
{
    if (st->n == st->cap) {
        size_t nc = st->cap ? st->cap * 2 : 256;
        if (nc > ((size_t)1 << 26)) return -1;
        rx_bt *na = realloc(st->a, nc * sizeof *na);
        if (!na) return -1;
        st->a = na;
        st->cap = nc;
    }
    st->a[st->n++] = (rx_bt){kind, pc, v};
    return 0;
}

/* Runs the program from pc at position sp until MATCH (up to the LOOK's
 * end for a lookahead). 1 matched (caps filled), 0 not, -1 limit. */
static int rx_run(const rx *r, const unsigned char *s, size_t n, int exact, int pc, long sp, long *caps,
                  long *steps, int depth)
{
    rx_stack st = {0};
    int res = 0;
    for (;;) {
        if (++*steps > RX_MAX_STEPS || depth > RX_MAX_DEPTH) {
            res = -1;
            break;
        }
        const rx_inst *in = &r->prog[pc];
        int ok = 1;
        switch (in->op) {
        case RI_SET:
            if ((size_t)sp < n && rx_set_has(&r->sets[in->a], s[sp])) {
                sp++;
                pc++;
            } else {
                ok = 0;
            }
            break;
        case RI_SPLIT:
            if (rx_push(&st, 0, in->b, sp)) {
                res = -1;
                goto out;
            }
            pc = in->a;
            break;
        case RI_JMP: pc = in->a; break;
        case RI_SAVE:
            if (rx_push(&st, 1, in->a, caps[in->a])) {
                res = -1;
                goto out;
            }
            caps[in->a] = sp;
            pc++;
            break;
        case RI_BOL: ok = sp == 0; pc++; break;
        case RI_EOL: ok = (size_t)sp == n; pc++; break;
        case RI_WB: case RI_NWB: {
            int l = sp > 0 && rx_is_word(s[sp - 1]);
            int rr = (size_t)sp < n && rx_is_word(s[sp]);
            ok = (l != rr) == (in->op == RI_WB);
            pc++;
            break;
        }
        case RI_LOOK: {
            size_t nc = 2 * (r->n_groups + 1);
            long *sub = malloc(nc * sizeof *sub);
            if (!sub) {
                res = -1;
                goto out;
            }
            memcpy(sub, caps, nc * sizeof *sub);
            int m = rx_run(r, s, n, 0, pc + 1, sp, sub, steps, depth + 1);
            if (m < 0) {
                free(sub);
                res = -1;
                goto out;
            }
            if (m == 1 && !in->a) {
                /* the lookahead's groups that matched are kept */
                for (size_t k = 2; k < nc; k++) {
                    if (sub[k] == caps[k]) continue;
                    if (rx_push(&st, 1, (int)k, caps[k])) {
                        free(sub);
                        res = -1;
                        goto out;
                    }
                    caps[k] = sub[k];
                }
            }
            free(sub);
            ok = (m == 1) != in->a;
            pc = in->b;
            break;
        }
        case RI_MATCH:
            if (exact && (size_t)sp != n) {
                ok = 0;
                break;
            }
            caps[1] = sp;
            res = 1;
            goto out;
        }
        if (ok) continue;
        /* backtrack */
        for (;;) {
            if (st.n == 0) goto out;
            rx_bt b = st.a[--st.n];
            if (b.kind == 1) {
                caps[b.pc] = b.v;
                continue;
            }
            pc = b.pc;
            sp = b.v;
            break;
        }
    }
out:
    free(st.a);
    return res;
}

int rx_exec(const rx *r, const char *s, size_t n, int exact, long *groups)
{
    size_t nc = 2 * (r->n_groups + 1);
    long steps = 0;
    for (size_t start = 0; start <= n; start++) {
        for (size_t k = 0; k < nc; k++) groups[k] = -1;
        groups[0] = (long)start;
        int m = rx_run(r, (const unsigned char *)s, n, exact, 0, (long)start, groups, &steps, 0);
        if (m != 0) {
            if (m == 1) {
                /* a group whose end was never saved took no part */
                for (size_t k = 1; k <= r->n_groups; k++)
                    if (groups[2 * k] < 0 || groups[2 * k + 1] < 0) groups[2 * k] = groups[2 * k + 1] = -1;
            }
            return m;
        }
        if (exact) break;
    }
    for (size_t k = 0; k < nc; k++) groups[k] = -1;
    return 0;
}
