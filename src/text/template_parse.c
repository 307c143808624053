/*
 * template_parse.c -- template source to an AST (see template_int.h): the
 * lexer, with llama.cpp's whitespace control and lstrip quirks, and a
 * recursive-descent parser bounded by TPL_MAX_NEST. tpl_compile() is the entry.
 */
#include "text/template_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------------------- lexer */

enum {
    TK_EOF, TK_TEXT, TK_NUM, TK_STR, TK_IDENT, TK_EQUALS, TK_LPAREN, TK_RPAREN,
    TK_OPEN_STMT, TK_CLOSE_STMT, TK_OPEN_EXPR, TK_CLOSE_EXPR, TK_LBRACKET, TK_RBRACKET,
    TK_LBRACE, TK_RBRACE, TK_COMMA, TK_DOT, TK_COLON, TK_PIPE, TK_CALL,
    TK_ADD, TK_MUL, TK_CMP, TK_UNARY, TK_COMMENT
};

typedef struct {
    int t;
    const char *s;      /* NUL-terminated value */
    size_t n;
    size_t pos;
} token;

typedef struct {
    token *v;
    size_t n, cap;
    const char *src;    /* the normalized source */
    size_t len;
} toklist;

static void tok_push(rt *R, toklist *L, int t, const char *s, size_t n, size_t pos) {
    if (L->n == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        token *nv = tpl_ralloc(R, tpl_mul_sz(R, cap, sizeof *nv));
        if (L->n) memcpy(nv, L->v, L->n * sizeof *nv);
        L->v = nv;
        L->cap = cap;
    }
    L->v[L->n].t = t;
    L->v[L->n].s = tpl_rstrdup(R, s, n);
    L->v[L->n].n = n;
    L->v[L->n].pos = pos;
    L->n++;
}

/* the same ordered table as llama.cpp's lexer: longer and trimmed forms first */
static const struct { const char *seq; int t; } lex_table[] = {
    {"{%-", TK_OPEN_STMT}, {"-%}", TK_CLOSE_STMT}, {"{{-", TK_OPEN_EXPR}, {"-}}", TK_CLOSE_EXPR},
    {"{%", TK_OPEN_STMT}, {"%}", TK_CLOSE_STMT}, {"{{", TK_OPEN_EXPR}, {"}}", TK_CLOSE_EXPR},
    {"(", TK_LPAREN}, {")", TK_RPAREN}, {"{", TK_LBRACE}, {"}", TK_RBRACE},
    {"[", TK_LBRACKET}, {"]", TK_RBRACKET}, {",", TK_COMMA}, {".", TK_DOT}, {":", TK_COLON},
    {"|", TK_PIPE}, {"<=", TK_CMP}, {">=", TK_CMP}, {"==", TK_CMP}, {"!=", TK_CMP},
    {"<", TK_CMP}, {">", TK_CMP}, {"+", TK_ADD}, {"-", TK_ADD}, {"~", TK_ADD},
    {"*", TK_MUL}, {"/", TK_MUL}, {"%", TK_MUL}, {"=", TK_EQUALS},
};

static int is_word(char c) { return isalnum((unsigned char)c) || c == '_'; }
static int is_digit(char c) { return isdigit((unsigned char)c); }
static int is_space(char c) { return isspace((unsigned char)c); }

typedef struct {
    rt *R;
    const char *src;    /* NUL-padded */
    size_t len, pos;
} lexer;

/* next_pos_is(): the character n places ahead is one of `chars` */
static int lx_ahead(const lexer *X, size_t n, const char *chars) {
    if (X->pos + n >= X->len) return 0;
    return X->src[X->pos + n] && strchr(chars, X->src[X->pos + n]) != NULL;
}

/* consume_while with the escape handling llama.cpp applies everywhere */
static void lx_consume(lexer *X, sbuf *out, int (*pred)(char, char), char arg) {
    while (pred(X->src[X->pos], arg)) {
        if (X->src[X->pos] == '\\') {
            X->pos++;
            if (X->pos >= X->len) tpl_fail(X->R, "lexer: unexpected end of input after escape character");
            char e = X->src[X->pos++], c;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'v': c = '\v'; break;
            case '\\': c = '\\'; break;
            case '\'': c = '\''; break;
            case '"': c = '"'; break;
            default: tpl_fail(X->R, "lexer: unknown escape character \\%c", e);
            }
            tpl_sb_putc(X->R, out, c);
            continue;
        }
        tpl_sb_putc(X->R, out, X->src[X->pos++]);
        if (X->pos > X->len) tpl_fail(X->R, "lexer: unterminated string or token");
    }
}
static int pr_digit(char c, char a) { (void)a; return is_digit(c); }
static int pr_word(char c, char a) { (void)a; return is_word(c); }
static int pr_space(char c, char a) { (void)a; return is_space(c); }
static int pr_notq(char c, char q) { return c != q; }

static void lx_numeric(lexer *X, sbuf *num) {
    lx_consume(X, num, pr_digit, 0);
    if (X->pos < X->len && X->src[X->pos] == '.' && X->pos + 1 < X->len &&
        is_digit(X->src[X->pos + 1])) {
        X->pos++;
        tpl_sb_putc(X->R, num, '.');
        lx_consume(X, num, pr_digit, 0);
    }
}

static void strip_set(const char *s, size_t *a, size_t *b, int left, int right) {
    if (left) while (*a < *b && strchr(" \t\r\n", s[*a])) (*a)++;
    if (right) while (*b > *a && strchr(" \t\r\n", s[*b - 1])) (*b)--;
}

/* Source to tokens, with llama.cpp's defaults for chat templates:
 * lstrip_blocks and trim_blocks on, `-` trims, one trailing newline dropped. */
static void lex(rt *R, const char *source, size_t srclen, toklist *L) {
    memset(L, 0, sizeof *L);
    if (srclen == 0) { L->src = ""; return; }
    char *src = tpl_ralloc(R, srclen + 2);
    size_t n = 0;
    for (size_t i = 0; i < srclen; i++) {
        if (source[i] == '\r') {
            if (i + 1 < srclen && source[i + 1] == '\n') continue;
            src[n++] = '\n';
        } else {
            src[n++] = source[i];
        }
    }
    if (source[srclen - 1] == '\n') n--;
    src[n] = src[n + 1] = 0;
    L->src = src;
    L->len = n;

    lexer X = {R, src, n, 0};
    size_t depth = 0;          /* curly brackets open inside {{ }} (size_t, as upstream) */
    while (X.pos < X.len) {
        size_t start_pos = X.pos;
        int last = L->n ? L->v[L->n - 1].t : TK_CLOSE_STMT;
        if (last == TK_CLOSE_STMT || last == TK_CLOSE_EXPR || last == TK_COMMENT) {
            int rstrip = 0, rm_nl = 0;
            if (X.pos > 3) {
                char c0 = src[X.pos - 3], c1 = src[X.pos - 2], c2 = src[X.pos - 1];
                rstrip = c0 == '-' && (c1 == '%' || c1 == '}' || c1 == '#') && c2 == '}';
                rm_nl = (c1 == '#' || c1 == '%' || c1 == '-') && c2 == '}';
            }
            size_t start = X.pos, end = start;
            while (X.pos < X.len && !(src[X.pos] == '{' && lx_ahead(&X, 1, "%{#"))) end = ++X.pos;
            if (src[X.pos] == '{' && lx_ahead(&X, 1, "%#-")) {
                size_t cur = end;
                while (cur > start) {
                    char c = src[cur - 1];
                    if (cur == 1) { end = 0; break; }
                    if (c == '\n') { end = cur; break; }
                    if (!is_space(c)) break;
                    cur--;
                }
            }
            size_t a = start, b = end > start ? end : start;
            if (rm_nl && b > a && src[a] == '\n') a++;
            if (rstrip) strip_set(src, &a, &b, 1, 0);
            if (src[X.pos] == '{' && lx_ahead(&X, 1, "{%#") && lx_ahead(&X, 2, "-"))
                strip_set(src, &a, &b, 0, 1);
            if (b > a) {
                tok_push(R, L, TK_TEXT, src + a, b - a, start_pos);
                continue;
            }
        }
        if (src[X.pos] == '{' && lx_ahead(&X, 1, "#")) {
            start_pos = X.pos;
            X.pos += 2;
            size_t cs = X.pos;
            while (!(src[X.pos] == '#' && lx_ahead(&X, 1, "}"))) {
                if (X.pos + 2 >= X.len) tpl_fail(R, "lexer: missing end of comment tag");
                X.pos++;
            }
            tok_push(R, L, TK_COMMENT, src + cs, X.pos - cs, start_pos);
            X.pos += 2;
            continue;
        }
        if (src[X.pos] == '-' && (last == TK_OPEN_EXPR || last == TK_OPEN_STMT)) {
            X.pos++;
            if (X.pos >= X.len) break;
        }
        sbuf junk = {0};
        lx_consume(&X, &junk, pr_space, 0);
        if (X.pos >= X.len) break;
        char ch = src[X.pos];
        int closing = ch == '-' && lx_ahead(&X, 1, "%}");
        if (!closing && (ch == '-' || ch == '+')) {
            start_pos = X.pos;
            int lt = L->n ? L->v[L->n - 1].t : TK_EOF;
            if (lt == TK_TEXT || lt == TK_EOF) tpl_fail(R, "lexer: unexpected character: %c", ch);
            if (!(lt == TK_IDENT || lt == TK_NUM || lt == TK_STR || lt == TK_RPAREN ||
                  lt == TK_RBRACKET)) {
                X.pos++;
                sbuf num = {0};
                tpl_sb_putc(R, &num, ch);
                lx_numeric(&X, &num);
                tok_push(R, L, num.n > 1 ? TK_NUM : TK_UNARY, num.p, num.n, start_pos);
                continue;
            }
        }
        int matched = 0;
        for (size_t i = 0; i < sizeof lex_table / sizeof lex_table[0]; i++) {
            const char *seq = lex_table[i].seq;
            size_t sl = strlen(seq);
            if (lex_table[i].t == TK_CLOSE_EXPR && sl == 2 && depth > 0) continue;
            if (X.pos + sl <= X.len && !memcmp(src + X.pos, seq, sl)) {
                tok_push(R, L, lex_table[i].t, seq, sl, X.pos);
                if (lex_table[i].t == TK_OPEN_EXPR) depth = 0;
                else if (lex_table[i].t == TK_LBRACE) depth++;
                else if (lex_table[i].t == TK_RBRACE) depth--;
                X.pos += sl;
                matched = 1;
                break;
            }
        }
        if (matched) continue;
        if (ch == '\'' || ch == '"') {
            start_pos = X.pos++;
            sbuf s = {0};
            lx_consume(&X, &s, pr_notq, ch);
            tok_push(R, L, TK_STR, s.p ? s.p : "", s.n, start_pos);
            X.pos++;
            continue;
        }
        if (is_digit(ch)) {
            start_pos = X.pos;
            sbuf num = {0};
            lx_numeric(&X, &num);
            tok_push(R, L, TK_NUM, num.p, num.n, start_pos);
            continue;
        }
        if (is_word(ch)) {
            start_pos = X.pos;
            sbuf w = {0};
            lx_consume(&X, &w, pr_word, 0);
            tok_push(R, L, TK_IDENT, w.p, w.n, start_pos);
            continue;
        }
        if ((unsigned char)ch >= 0x20 && (unsigned char)ch < 0x7f)
            tpl_fail(R, "lexer: unexpected character: %c", ch);
        tpl_fail(R, "lexer: unexpected byte 0x%02x", (unsigned char)ch);
    }
}

/* ---------------------------------------------------------------- parser */

typedef struct {
    rt *R;
    toklist *L;
    size_t cur;
} parser;

static const token tok_eof = {TK_EOF, "", 0, 0};

static const token *pk(parser *P, size_t off) {
    return P->cur + off < P->L->n ? &P->L->v[P->cur + off] : &tok_eof;
}

static const token *nx(parser *P) {
    if (P->cur >= P->L->n) tpl_fail(P->R, "parser: unexpected end of template");
    return &P->L->v[P->cur++];
}

static void pfail_at(parser *P, const char *what) __attribute__((noreturn));
static void pfail_at(parser *P, const char *what) {
    const token *t = pk(P, 0);
    size_t line = 1;
    for (size_t i = 0; i < t->pos && i < P->L->len; i++) line += P->L->src[i] == '\n';
    tpl_fail(P->R, "parser: %s (got '%.40s') at line %zu", what, t->s, line);
}

static void expect(parser *P, int t, const char *what) {
    if (pk(P, 0)->t != t) pfail_at(P, what);
    P->cur++;
}

static int is_tok(parser *P, int t) { return pk(P, 0)->t == t; }
static int is_ident(parser *P, const char *name) {
    return pk(P, 0)->t == TK_IDENT && !strcmp(pk(P, 0)->s, name);
}
static void expect_ident(parser *P, const char *name) {
    if (!is_ident(P, name)) {
        char m[64];
        snprintf(m, sizeof m, "expected '%s'", name);
        pfail_at(P, m);
    }
    P->cur++;
}
/* {% name ... with name one of a space-separated list */
static int is_stmt(parser *P, const char *names) {
    if (pk(P, 0)->t != TK_OPEN_STMT || pk(P, 1)->t != TK_IDENT) return 0;
    const char *w = pk(P, 1)->s;
    size_t wl = strlen(w);
    for (const char *p = names; *p;) {
        const char *e = strchr(p, ' ');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == wl && !memcmp(p, w, l)) return 1;
        p += l;
        if (*p) p++;
    }
    return 0;
}

static node *mk_node(parser *P, int t, size_t tokidx) {
    node *n = tpl_rzalloc(P->R, sizeof *n);
    n->t = t;
    n->pos = tokidx < P->L->n ? P->L->v[tokidx].pos : 0;
    return n;
}

static void nl_push(rt *R, nlist *l, node *x) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        node **nv = tpl_ralloc(R, tpl_mul_sz(R, cap, sizeof *nv));
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

static node *p_any(parser *P);
static node *p_expr(parser *P);
static node *p_primary(parser *P);
static node *p_call(parser *P, node *callee);
static void p_args(parser *P, nlist *out);

static void enter(parser *P) {
    if (++P->R->nest > TPL_MAX_NEST) tpl_fail(P->R, "parser: template nested too deeply");
}
static void leave(parser *P) { P->R->nest--; }

/* body statements until one of `names` opens */
static void p_body(parser *P, nlist *out, const char *names) {
    while (!is_stmt(P, names)) {
        if (is_tok(P, TK_EOF)) {
            char m[96];
            snprintf(m, sizeof m, "missing {%% %s %%}", names);
            pfail_at(P, m);
        }
        nl_push(P->R, out, p_any(P));
    }
}

static node *p_seq(parser *P, int primary) {
    size_t sp = P->cur;
    node *first = primary ? p_primary(P) : p_expr(P);
    if (!is_tok(P, TK_COMMA)) return first;
    node *t = mk_node(P, N_TUPLE, sp);
    nl_push(P->R, &t->l1, first);
    while (is_tok(P, TK_COMMA)) {
        P->cur++;
        nl_push(P->R, &t->l1, primary ? p_primary(P) : p_expr(P));
    }
    return t;
}

static node *p_if(parser *P, size_t sp) {
    node *n = mk_node(P, N_IF, sp);
    n->a = p_expr(P);
    expect(P, TK_CLOSE_STMT, "expected %}");
    p_body(P, &n->l1, "elif else endif");
    if (is_stmt(P, "elif")) {
        size_t p0 = P->cur;
        P->cur += 2;
        nl_push(P->R, &n->l2, p_if(P, p0));
    } else if (is_stmt(P, "else")) {
        P->cur += 2;
        expect(P, TK_CLOSE_STMT, "expected %}");
        p_body(P, &n->l2, "endif");
    }
    return n;
}

static void p_end(parser *P, const char *name) {
    expect(P, TK_OPEN_STMT, "expected {%");
    expect_ident(P, name);
    expect(P, TK_CLOSE_STMT, "expected %}");
}

static node *p_statement(parser *P) {
    expect(P, TK_OPEN_STMT, "expected {%");
    if (pk(P, 0)->t != TK_IDENT) pfail_at(P, "unknown statement");
    size_t sp = P->cur;
    const char *name = nx(P)->s;
    node *n;
    if (!strcmp(name, "set")) {
        n = mk_node(P, N_SET, sp);
        n->a = p_seq(P, 0);
        if (is_tok(P, TK_EQUALS)) {
            P->cur++;
            n->b = p_seq(P, 0);
        } else {
            expect(P, TK_CLOSE_STMT, "expected %}");
            p_body(P, &n->l1, "endset");
            expect(P, TK_OPEN_STMT, "expected {%");
            expect_ident(P, "endset");
        }
        expect(P, TK_CLOSE_STMT, "expected %}");
    } else if (!strcmp(name, "if")) {
        n = p_if(P, sp);
        p_end(P, "endif");
    } else if (!strcmp(name, "macro")) {
        n = mk_node(P, N_MACRO, sp);
        n->a = p_primary(P);
        p_args(P, &n->l2);
        expect(P, TK_CLOSE_STMT, "expected %}");
        p_body(P, &n->l1, "endmacro");
        p_end(P, "endmacro");
    } else if (!strcmp(name, "for")) {
        n = mk_node(P, N_FOR, sp);
        n->a = p_seq(P, 1);
        if (!is_ident(P, "in")) pfail_at(P, "expected 'in'");
        P->cur++;
        n->b = p_expr(P);
        expect(P, TK_CLOSE_STMT, "expected %}");
        p_body(P, &n->l1, "endfor else");
        if (is_stmt(P, "else")) {
            P->cur += 2;
            expect(P, TK_CLOSE_STMT, "expected %}");
            p_body(P, &n->l2, "endfor");
        }
        p_end(P, "endfor");
    } else if (!strcmp(name, "break") || !strcmp(name, "continue")) {
        expect(P, TK_CLOSE_STMT, "expected %}");
        n = mk_node(P, name[0] == 'b' ? N_BREAK : N_CONTINUE, sp);
    } else if (!strcmp(name, "call")) {
        n = mk_node(P, N_CALLBLOCK, sp);
        if (is_tok(P, TK_LPAREN)) p_args(P, &n->l2);          /* caller's parameters */
        node *callee = p_primary(P);
        if (callee->t != N_IDENT) pfail_at(P, "expected identifier after call");
        node *call = mk_node(P, N_CALL, sp);
        call->a = callee;
        p_args(P, &call->l3);
        n->a = call;
        expect(P, TK_CLOSE_STMT, "expected %}");
        p_body(P, &n->l1, "endcall");
        p_end(P, "endcall");
    } else if (!strcmp(name, "filter")) {
        n = mk_node(P, N_FILTERBLOCK, sp);
        node *f = p_primary(P);
        if (f->t == N_IDENT && is_tok(P, TK_LPAREN)) f = p_call(P, f);
        n->a = f;
        expect(P, TK_CLOSE_STMT, "expected %}");
        p_body(P, &n->l1, "endfilter");
        p_end(P, "endfilter");
    } else if (!strcmp(name, "generation") || !strcmp(name, "endgeneration")) {
        n = mk_node(P, N_NOOP, sp);
        P->cur++;
    } else {
        char m[96];
        snprintf(m, sizeof m, "unknown statement '%.40s'", name);
        tpl_fail(P->R, "parser: %s", m);
    }
    return n;
}

static node *p_any(parser *P) {
    size_t sp = P->cur;
    node *n;
    enter(P);
    switch (pk(P, 0)->t) {
    case TK_COMMENT:
        n = mk_node(P, N_COMMENT, sp);
        nx(P);
        break;
    case TK_TEXT: {
        const token *t = nx(P);
        n = mk_node(P, N_TEXT, sp);
        n->s = t->s;
        n->sn = t->n;
        break;
    }
    case TK_OPEN_STMT:
        n = p_statement(P);
        break;
    case TK_OPEN_EXPR:
        P->cur++;
        n = p_expr(P);
        expect(P, TK_CLOSE_EXPR, "expected }}");
        break;
    default:
        pfail_at(P, "unexpected token");
    }
    leave(P);
    return n;
}

static node *p_or(parser *P);

static node *p_ifexpr(parser *P) {
    node *a = p_or(P);
    if (is_ident(P, "if")) {
        size_t sp = P->cur++;
        node *test = p_or(P);
        if (is_ident(P, "else")) {
            size_t p0 = P->cur++;
            node *n = mk_node(P, N_TERNARY, p0);
            n->a = test;
            n->b = a;
            n->c = p_ifexpr(P);
            return n;
        }
        node *n = mk_node(P, N_SELECT, sp);
        n->a = a;
        n->b = test;
        return n;
    }
    return a;
}

static node *p_expr(parser *P) {
    enter(P);
    node *n = p_ifexpr(P);
    leave(P);
    return n;
}

static node *mk_bin(parser *P, size_t sp, const char *op, node *l, node *r) {
    node *n = mk_node(P, N_BINARY, sp);
    n->s = op;
    n->a = l;
    n->b = r;
    return n;
}

static node *p_not(parser *P);
static node *p_and(parser *P) {
    node *l = p_not(P);
    while (is_ident(P, "and")) {
        size_t sp = P->cur++;
        l = mk_bin(P, sp, "and", l, p_not(P));
    }
    return l;
}
static node *p_or(parser *P) {
    node *l = p_and(P);
    while (is_ident(P, "or")) {
        size_t sp = P->cur++;
        l = mk_bin(P, sp, "or", l, p_and(P));
    }
    return l;
}
static node *p_cmp(parser *P);
static node *p_not(parser *P) {
    if (is_ident(P, "not")) {
        size_t sp = P->cur++;
        enter(P);
        node *n = mk_node(P, N_UNARY, sp);
        n->s = "not";
        n->a = p_not(P);
        leave(P);
        return n;
    }
    return p_cmp(P);
}
static node *p_add(parser *P);
static node *p_cmp(parser *P) {
    node *l = p_add(P);
    for (;;) {
        size_t sp = P->cur;
        const char *op;
        if (is_ident(P, "not") && pk(P, 1)->t == TK_IDENT && !strcmp(pk(P, 1)->s, "in")) {
            op = "not in";
            P->cur += 2;
        } else if (is_ident(P, "in")) {
            op = "in";
            P->cur++;
        } else if (is_tok(P, TK_CMP)) {
            op = nx(P)->s;
        } else {
            break;
        }
        l = mk_bin(P, sp, op, l, p_add(P));
    }
    return l;
}
static node *p_mul(parser *P);
static node *p_add(parser *P) {
    node *l = p_mul(P);
    while (is_tok(P, TK_ADD)) {
        size_t sp = P->cur;
        const char *op = nx(P)->s;
        l = mk_bin(P, sp, op, l, p_mul(P));
    }
    return l;
}
static node *p_test(parser *P);
static node *p_mul(parser *P) {
    node *l = p_test(P);
    while (is_tok(P, TK_MUL)) {
        size_t sp = P->cur;
        const char *op = nx(P)->s;
        l = mk_bin(P, sp, op, l, p_test(P));
    }
    return l;
}
static node *p_filter(parser *P);
static node *p_test(parser *P) {
    node *operand = p_filter(P);
    while (is_ident(P, "is")) {
        size_t sp = P->cur++;
        int neg = 0;
        if (is_ident(P, "not")) { P->cur++; neg = 1; }
        node *t = p_primary(P);
        if (is_tok(P, TK_LPAREN)) t = p_call(P, t);
        node *n = mk_node(P, N_TEST, sp);
        n->a = operand;
        n->b = t;
        n->flag = neg;
        operand = n;
    }
    return operand;
}
static node *p_unary(parser *P);
static node *p_filter(parser *P) {
    node *operand = p_unary(P);
    while (is_tok(P, TK_PIPE)) {
        size_t sp = P->cur++;
        node *f = p_primary(P);
        if (is_tok(P, TK_LPAREN)) f = p_call(P, f);
        node *n = mk_node(P, N_FILTER, sp);
        n->a = operand;
        n->b = f;
        operand = n;
    }
    return operand;
}
static node *p_member(parser *P, node *obj);
static node *p_unary(parser *P) {
    if (is_tok(P, TK_UNARY)) {
        size_t sp = P->cur;
        const char *op = nx(P)->s;
        enter(P);
        node *n = mk_node(P, N_UNARY, sp);
        n->s = op;
        n->a = p_unary(P);
        leave(P);
        return n;
    }
    node *m = p_member(P, p_primary(P));
    return is_tok(P, TK_LPAREN) ? p_call(P, m) : m;
}

static node *p_call(parser *P, node *callee) {
    enter(P);
    size_t sp = P->cur;
    node *n = mk_node(P, N_CALL, sp);
    n->a = callee;
    p_args(P, &n->l3);
    node *m = p_member(P, n);
    node *r = is_tok(P, TK_LPAREN) ? p_call(P, m) : m;
    leave(P);
    return r;
}

static void p_args(parser *P, nlist *out) {
    expect(P, TK_LPAREN, "expected (");
    while (!is_tok(P, TK_RPAREN)) {
        node *arg;
        if (is_tok(P, TK_EOF)) pfail_at(P, "expected )");
        if (pk(P, 0)->t == TK_MUL && !strcmp(pk(P, 0)->s, "*")) {
            size_t sp = P->cur++;
            arg = mk_node(P, N_SPREAD, sp);
            arg->a = p_expr(P);
        } else {
            arg = p_expr(P);
            if (is_tok(P, TK_EQUALS)) {
                size_t sp = P->cur++;
                node *kw = mk_node(P, N_KWARG, sp);
                kw->a = arg;
                kw->b = p_expr(P);
                arg = kw;
            }
        }
        nl_push(P->R, out, arg);
        if (is_tok(P, TK_COMMA)) P->cur++;
    }
    expect(P, TK_RPAREN, "expected )");
}

static node *p_subscript(parser *P) {
    node *sl[3] = {0};
    size_t ns = 0;
    int is_slice = 0;
    size_t sp = P->cur;
    while (!is_tok(P, TK_RBRACKET)) {
        if (is_tok(P, TK_EOF)) pfail_at(P, "expected ]");
        node *x = NULL;
        if (is_tok(P, TK_COLON)) {
            P->cur++;
            is_slice = 1;
        } else {
            x = p_expr(P);
            if (is_tok(P, TK_COLON)) { P->cur++; is_slice = 1; }
        }
        if (ns < 3) sl[ns] = x;
        ns++;
    }
    if (is_slice) {
        node *n = mk_node(P, N_SLICE, sp);
        n->a = sl[0];
        n->b = sl[1];
        n->c = sl[2];
        return n;
    }
    if (ns == 0) return mk_node(P, N_BLANK, sp);
    return sl[0];
}

static node *p_member(parser *P, node *obj) {
    size_t sp = P->cur;
    while (is_tok(P, TK_DOT) || is_tok(P, TK_LBRACKET)) {
        int computed = nx(P)->t == TK_LBRACKET;
        node *prop;
        if (computed) {
            prop = p_subscript(P);
            expect(P, TK_RBRACKET, "expected ]");
        } else {
            prop = p_primary(P);
        }
        node *n = mk_node(P, N_MEMBER, sp);
        n->a = obj;
        n->b = prop;
        n->flag = computed;
        obj = n;
    }
    return obj;
}

static node *p_primary(parser *P) {
    size_t sp = P->cur;
    const token *t = nx(P);
    node *n;
    enter(P);
    switch (t->t) {
    case TK_NUM:
        if (strchr(t->s, '.')) {
            n = mk_node(P, N_FLOAT, sp);
            n->f = strtod(t->s, NULL);
        } else {
            errno = 0;
            long long v = strtoll(t->s, NULL, 10);
            if (errno == ERANGE) tpl_fail(P->R, "parser: integer literal out of range: %.40s", t->s);
            n = mk_node(P, N_INT, sp);
            n->i = v;
        }
        break;
    case TK_STR: {
        sbuf s = {0};
        tpl_sb_put(P->R, &s, t->s, t->n);
        while (is_tok(P, TK_STR)) {
            const token *u = nx(P);
            tpl_sb_put(P->R, &s, u->s, u->n);
        }
        n = mk_node(P, N_STR, sp);
        n->s = s.p ? s.p : "";
        n->sn = s.n;
        break;
    }
    case TK_IDENT:
        n = mk_node(P, N_IDENT, sp);
        n->s = t->s;
        n->sn = t->n;
        break;
    case TK_LPAREN:
        n = p_seq(P, 0);
        expect(P, TK_RPAREN, "expected )");
        break;
    case TK_LBRACKET:
        n = mk_node(P, N_ARRAY, sp);
        while (!is_tok(P, TK_RBRACKET)) {
            if (is_tok(P, TK_EOF)) pfail_at(P, "expected ]");
            nl_push(P->R, &n->l1, p_expr(P));
            if (is_tok(P, TK_COMMA)) P->cur++;
        }
        P->cur++;
        break;
    case TK_LBRACE:
        n = mk_node(P, N_OBJECT, sp);
        while (!is_tok(P, TK_RBRACE)) {
            if (is_tok(P, TK_EOF)) pfail_at(P, "expected }");
            nl_push(P->R, &n->l1, p_expr(P));
            expect(P, TK_COLON, "expected :");
            nl_push(P->R, &n->l2, p_expr(P));
            if (is_tok(P, TK_COMMA)) P->cur++;
        }
        P->cur++;
        break;
    default:
        P->cur--;
        pfail_at(P, "unexpected token in expression");
    }
    leave(P);
    return n;
}

static void parse(rt *R, toklist *L, nlist *prog) {
    parser P = {R, L, 0};
    memset(prog, 0, sizeof *prog);
    while (P.cur < L->n) nl_push(R, prog, p_any(&P));
}

void tpl_compile(rt *R, const char *tmpl, size_t len, nlist *prog) {
    toklist L;
    R->src = tmpl;
    R->srclen = len;
    lex(R, tmpl, len, &L);
    parse(R, &L, prog);
}
