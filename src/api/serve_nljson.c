/*
 * serve_nljson.c -- llama-server's words for a body that is not JSON
 * (serve_llama_json_check in serve.h), apart from the transport so that
 * serve.c stays sockets and framing only.
 */
#include "api/serve.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// --------------------------------------------------------------------------
// llama-server's words for a body that is not JSON
//
// llama-server reads every body with nlohmann::json::parse (3.12.0) and
// answers its exception's text. This walks a body the way that parser does
// (a lexer that keeps the bytes read since the last string or number began,
// line and column counters that an unget steps back, no depth limit) only to
// say whether it stops, where and why; json.c still builds the tree.

enum { NL_EOF = -1 };
enum {
    NT_NONE, NT_TRUE, NT_FALSE, NT_NULL, NT_STRING, NT_NUMBER, NT_BEGIN_ARRAY, NT_BEGIN_OBJECT, NT_END_ARRAY,
    NT_END_OBJECT, NT_NAME_SEP, NT_VALUE_SEP, NT_ERROR, NT_END, NT_LITERAL_OR_VALUE
};

typedef struct {
    const unsigned char *p;
    size_t n, i;                /* the bytes, and how many have been read */
    int cur;                    /* the byte read last, or NL_EOF */
    size_t total, col, lines;   /* nlohmann's position_t */
    size_t tok0;                /* its token_string is p[tok0 .. i) */
    const char *why;            /* the lexer's error_message */
    char why_buf[112];
    int last;                   /* the parser's last token */
} nl_lex;

static const char *nl_token_name(int t)
{
    static const char *const names[] = {
        "<uninitialized>", "true literal", "false literal", "null literal", "string literal", "number literal",
        "'['", "'{'", "']'", "'}'", "':'", "','", "<parse error>", "end of input", "'[', '{', or a literal"};
    return names[t];
}

/* get(): the end of input is "read", and counted, as often as it is asked. */
static int nl_get(nl_lex *L)
{
    L->total++;
    L->col++;
    L->cur = L->i < L->n ? L->p[L->i++] : NL_EOF;
    if (L->cur == '\n') {
        L->lines++;
        L->col = 0;
    }
    return L->cur;
}

/* unget(): the byte goes back; after a newline the line count steps back
 * but the column stays 0, as nlohmann does it. */
static void nl_unget(nl_lex *L)
{
    L->total--;
    if (L->col == 0) {
        if (L->lines > 0) L->lines--;
    } else {
        L->col--;
    }
    if (L->cur != NL_EOF) L->i--;
}

/* reset(): token_string starts again at the byte just read. */
static void nl_reset(nl_lex *L) { L->tok0 = L->i ? L->i - 1 : 0; }

static int nl_hex4(nl_lex *L)
{
    int cp = 0;
    for (int k = 0; k < 4; k++) {
        int c = nl_get(L), d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else return -1;
        cp = cp * 16 + d;
    }
    return cp;
}

/* The bytes after a UTF-8 lead byte, each within its range. */
static int nl_utf8_tail(nl_lex *L, const unsigned char *ranges, int n_ranges)
{
    for (int k = 0; k < n_ranges; k++) {
        int c = nl_get(L);
        if (c < ranges[2 * k] || c > ranges[2 * k + 1]) {
            L->why = "invalid string: ill-formed UTF-8 byte";
            return -1;
        }
    }
    return 0;
}

static int nl_string(nl_lex *L)
{
    static const char *const ctl[32] = {"NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS", "HT", "LF",
                                        "VT", "FF", "CR", "SO", "SI", "DLE", "DC1", "DC2", "DC3", "DC4", "NAK",
                                        "SYN", "ETB", "CAN", "EM", "SUB", "ESC", "FS", "GS", "RS", "US"};
    static const unsigned char r2[] = {0x80, 0xBF}, rE0[] = {0xA0, 0xBF, 0x80, 0xBF},
                               r3[] = {0x80, 0xBF, 0x80, 0xBF}, rED[] = {0x80, 0x9F, 0x80, 0xBF},
                               rF0[] = {0x90, 0xBF, 0x80, 0xBF, 0x80, 0xBF},
                               r4[] = {0x80, 0xBF, 0x80, 0xBF, 0x80, 0xBF},
                               rF4[] = {0x80, 0x8F, 0x80, 0xBF, 0x80, 0xBF};
    nl_reset(L);
    for (;;) {
        int c = nl_get(L), cp;
        if (c == NL_EOF) {
            L->why = "invalid string: missing closing quote";
            return NT_ERROR;
        }
        if (c == '"') return NT_STRING;
        if (c == '\\') {
            c = nl_get(L);
            if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't')
                continue;
            if (c != 'u') {
                L->why = "invalid string: forbidden character after backslash";
                return NT_ERROR;
            }
            if ((cp = nl_hex4(L)) < 0) goto bad_hex;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                L->why = "invalid string: surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF";
                return NT_ERROR;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (nl_get(L) != '\\' || nl_get(L) != 'u') goto bad_pair;
                if ((cp = nl_hex4(L)) < 0) goto bad_hex;
                if (cp < 0xDC00 || cp > 0xDFFF) goto bad_pair;
            }
            continue;
        }
        if (c < 0x20) {
            static const char alt[32] = {[8] = 'b', [9] = 't', [10] = 'n', [12] = 'f', [13] = 'r'};
            char tail[8] = "";
            if (alt[c]) snprintf(tail, sizeof tail, " or \\%c", alt[c]);
            snprintf(L->why_buf, sizeof L->why_buf,
                     "invalid string: control character U+%04X (%s) must be escaped to \\u%04X%s", c, ctl[c], c, tail);
            L->why = L->why_buf;
            return NT_ERROR;
        }
        if (c < 0x80) continue;
        int rc;
        if (c >= 0xC2 && c <= 0xDF) rc = nl_utf8_tail(L, r2, 1);
        else if (c == 0xE0) rc = nl_utf8_tail(L, rE0, 2);
        else if (c == 0xED) rc = nl_utf8_tail(L, rED, 2);
        else if (c >= 0xE1 && c <= 0xEF) rc = nl_utf8_tail(L, r3, 2);
        else if (c == 0xF0) rc = nl_utf8_tail(L, rF0, 3);
        else if (c >= 0xF1 && c <= 0xF3) rc = nl_utf8_tail(L, r4, 3);
        else if (c == 0xF4) rc = nl_utf8_tail(L, rF4, 3);
        else {
            L->why = "invalid string: ill-formed UTF-8 byte";
            rc = -1;
        }
        if (rc) return NT_ERROR;
    }
bad_hex:
    L->why = "invalid string: '\\u' must be followed by 4 hex digits";
    return NT_ERROR;
bad_pair:
    L->why = "invalid string: surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF";
    return NT_ERROR;
}

static int nl_digit(int c) { return c >= '0' && c <= '9'; }

/* RFC 8259's number; the byte after it is given back (unget). */
static int nl_number(nl_lex *L)
{
    int c = L->cur;
    nl_reset(L);
    if (c == '-' && !nl_digit(c = nl_get(L))) {
        L->why = "invalid number; expected digit after '-'";
        return NT_ERROR;
    }
    if (c != '0')
        while (nl_digit(c = nl_get(L))) {}
    else
        c = nl_get(L);
    if (c == '.') {
        if (!nl_digit(nl_get(L))) {
            L->why = "invalid number; expected digit after '.'";
            return NT_ERROR;
        }
        while (nl_digit(c = nl_get(L))) {}
    }
    if (c == 'e' || c == 'E') {
        c = nl_get(L);
        if (c == '+' || c == '-') {
            if (!nl_digit(nl_get(L))) {
                L->why = "invalid number; expected digit after exponent sign";
                return NT_ERROR;
            }
        } else if (!nl_digit(c)) {
            L->why = "invalid number; expected '+', '-', or digit after exponent";
            return NT_ERROR;
        }
        while (nl_digit(nl_get(L))) {}
    }
    nl_unget(L);
    return NT_NUMBER;
}

static int nl_literal(nl_lex *L, const char *text, int type)
{
    for (size_t k = 1; text[k]; k++)
        if (nl_get(L) != (unsigned char)text[k]) {
            L->why = "invalid literal";
            return NT_ERROR;
        }
    return type;
}

static int nl_scan(nl_lex *L)
{
    int c;
    if (L->total == 0) {   /* a UTF-8 byte order mark may open the text */
        if (nl_get(L) == 0xEF) {
            if (nl_get(L) != 0xBB || nl_get(L) != 0xBF) {
                L->why = "invalid BOM; must be 0xEF 0xBB 0xBF if given";
                return L->last = NT_ERROR;
            }
        } else {
            nl_unget(L);
        }
    }
    do c = nl_get(L);
    while (c == ' ' || c == '\t' || c == '\n' || c == '\r');
    switch (c) {
    case '[': return L->last = NT_BEGIN_ARRAY;
    case ']': return L->last = NT_END_ARRAY;
    case '{': return L->last = NT_BEGIN_OBJECT;
    case '}': return L->last = NT_END_OBJECT;
    case ':': return L->last = NT_NAME_SEP;
    case ',': return L->last = NT_VALUE_SEP;
    case 't': return L->last = nl_literal(L, "true", NT_TRUE);
    case 'f': return L->last = nl_literal(L, "false", NT_FALSE);
    case 'n': return L->last = nl_literal(L, "null", NT_NULL);
    case '"': return L->last = nl_string(L);
    case 0: case NL_EOF: return L->last = NT_END;   /* a NUL byte ends the text too */
    }
    if (c == '-' || nl_digit(c)) return L->last = nl_number(L);
    L->why = "invalid literal";
    return L->last = NT_ERROR;
}

/* Appends the token string as nlohmann prints it: bytes below 0x20 as
 * <U+00XX>, and, as llama-server's reply writes invalid UTF-8, each broken
 * sequence as one U+FFFD (a byte that breaks a sequence starts the next). */
static void nl_put_token(jbuf *b, const nl_lex *L)
{
    const unsigned char *s = L->p + L->tok0;
    size_t n = L->i - L->tok0, k = 0;
    while (k < n) {
        unsigned c = s[k];
        int need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x20) {
            jbuf_printf(b, "<U+%04X>", c);
            k++;
            continue;
        }
        if (c < 0x80) { jbuf_putc(b, (char)c); k++; continue; }
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else { jbuf_puts(b, "\xEF\xBF\xBD"); k++; continue; }
        size_t j = 1;
        for (; j <= (size_t)need && k + j < n; j++) {
            unsigned t = s[k + j];
            if (t < (j == 1 ? lo : 0x80) || t > (j == 1 ? hi : 0xBF)) break;
        }
        if (j == (size_t)need + 1) jbuf_put(b, s + k, j);
        else jbuf_puts(b, "\xEF\xBF\xBD");
        k += j;
    }
}

/* exception_message() after "parse error at line L, column C: ". */
static int nl_fail(nl_lex *L, int expected, const char *context, jbuf *msg)
{
    jbuf_printf(msg, "[json.exception.parse_error.101] parse error at line %zu, column %zu: syntax error while "
                     "parsing %s - ", L->lines + 1, L->col, context);
    if (L->last == NT_ERROR) {
        jbuf_printf(msg, "%s; last read: '", L->why);
        nl_put_token(msg, L);
        jbuf_putc(msg, '\'');
    } else {
        jbuf_printf(msg, "unexpected %s", nl_token_name(L->last));
    }
    if (expected != NT_NONE) jbuf_printf(msg, "; expected %s", nl_token_name(expected));
    return 1;
}

int serve_llama_json_check(const char *body, size_t n, jbuf *msg, size_t *start, size_t *end)
{
    nl_lex L;
    unsigned char *stack = NULL;   /* 1 array, 0 object; nlohmann has no depth limit */
    size_t depth = 0, cap = 0;
    int skip = 0, rc = -1;
    memset(&L, 0, sizeof L);
    L.p = (const unsigned char *)body;
    L.n = n;
    L.cur = NL_EOF;
    nl_scan(&L);
    *start = n >= 3 && memcmp(body, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    for (;;) {
        if (!skip) {
            int push = -1;
            switch (L.last) {
            case NT_BEGIN_OBJECT:
                if (nl_scan(&L) == NT_END_OBJECT) break;
                if (L.last != NT_STRING) { rc = nl_fail(&L, NT_STRING, "object key", msg); goto out; }
                if (nl_scan(&L) != NT_NAME_SEP) { rc = nl_fail(&L, NT_NAME_SEP, "object separator", msg); goto out; }
                nl_scan(&L);
                push = 0;
                break;
            case NT_BEGIN_ARRAY:
                if (nl_scan(&L) == NT_END_ARRAY) break;
                push = 1;
                break;
            case NT_NUMBER: {
                /* a literal past double's range: out_of_range.406, no position */
                char tmp[512];
                size_t tl = L.i - L.tok0;
                double d = 0;
                if (tl < sizeof tmp) {
                    memcpy(tmp, body + L.tok0, tl);
                    tmp[tl] = 0;
                    d = strtod(tmp, NULL);
                } else {   /* a long literal: strtod needs it NUL-terminated */
                    char *t = strndup(body + L.tok0, tl);
                    if (t) d = strtod(t, NULL);
                    free(t);
                }
                if (!isfinite(d)) {
                    jbuf_puts(msg, "[json.exception.out_of_range.406] number overflow parsing '");
                    nl_put_token(msg, &L);
                    jbuf_putc(msg, '\'');
                    rc = 1;
                    goto out;
                }
                break;
            }
            case NT_TRUE: case NT_FALSE: case NT_NULL: case NT_STRING:
                break;
            case NT_ERROR:
                rc = nl_fail(&L, NT_NONE, "value", msg);
                goto out;
            case NT_END:
                if (L.total == 1) {
                    jbuf_puts(msg, "[json.exception.parse_error.101] parse error at line 1, column 1: attempting to "
                                   "parse an empty input; check that your input string or stream contains the "
                                   "expected JSON");
                    rc = 1;
                    goto out;
                }
                /* fall through */
            default:
                rc = nl_fail(&L, NT_LITERAL_OR_VALUE, "value", msg);
                goto out;
            }
            if (push >= 0) {
                if (depth == cap) {
                    size_t nc = cap ? cap * 2 : 64;
                    unsigned char *ns = realloc(stack, nc);
                    if (!ns) goto out;
                    stack = ns;
                    cap = nc;
                }
                stack[depth++] = (unsigned char)push;
                continue;
            }
        }
        skip = 0;
        if (depth == 0) {
            /* the whole text must be one value */
            if (nl_scan(&L) != NT_END) {
                rc = nl_fail(&L, NT_END, "value", msg);
                goto out;
            }
            *end = L.cur == 0 ? L.i - 1 : n;
            rc = 0;
            goto out;
        }
        if (stack[depth - 1]) {
            if (nl_scan(&L) == NT_VALUE_SEP) {
                nl_scan(&L);
                continue;
            }
            if (L.last != NT_END_ARRAY) { rc = nl_fail(&L, NT_END_ARRAY, "array", msg); goto out; }
        } else {
            if (nl_scan(&L) == NT_VALUE_SEP) {
                if (nl_scan(&L) != NT_STRING) { rc = nl_fail(&L, NT_STRING, "object key", msg); goto out; }
                if (nl_scan(&L) != NT_NAME_SEP) { rc = nl_fail(&L, NT_NAME_SEP, "object separator", msg); goto out; }
                nl_scan(&L);
                continue;
            }
            if (L.last != NT_END_OBJECT) { rc = nl_fail(&L, NT_END_OBJECT, "object", msg); goto out; }
        }
        depth--;
        skip = 1;
    }
out:
    free(stack);
    return rc;
}

