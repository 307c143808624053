/*
 * json.h -- a strict RFC 8259 parser and a small writer.
 *
 * Parser: UTF-8 in, a tree out. Refuses (NULL, with a reason in err) invalid
 * UTF-8, nesting deeper than JSON_MAX_DEPTH, trailing bytes, bad escapes and
 * every other deviation from RFC 8259. Duplicate object keys: the last value
 * wins, kept at the key's first position (as a Python dict). Numbers keep
 * their literal text, so 2 and 2.0 stay distinct. \uD8xx\uDCxx pairs are
 * joined into one code point; a lone surrogate becomes U+FFFD (EF BF BD).
 * Strings are NUL-terminated and also carry their length (they may hold
 * U+0000).
 *
 * Writer: a growable byte buffer (jbuf); json_put_str(), which escapes as
 * bankml's original did (its own files: FORK.json, manifests): '"' -> \",
 * '\\' -> \\, newline -> \n, other bytes below 0x20 -> \u00xx (lowercase
 * hex), everything else raw; and the answer writers, json_put_str_nl
 * (llama-server's nlohmann) and json_put_str_go (Ollama's Go), which never
 * write invalid UTF-8.
 */
#ifndef BANKML_JSON_H
#define BANKML_JSON_H

#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 128

typedef enum {
    JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT
} json_type;

typedef struct json_value json_value;
struct json_value {
    json_type type;
    char *str;          /* STRING: decoded bytes; NUMBER: the literal text */
    size_t len;         /* length of str in bytes */
    size_t n;           /* ARRAY/OBJECT: number of items */
    json_value **items; /* ARRAY/OBJECT: the values, in order */
    char **keys;        /* OBJECT: the keys (decoded, NUL-terminated) */
    size_t *key_lens;   /* OBJECT: their lengths */
};

/* Parses text[0..len). Returns a tree to free with json_free(), or NULL with
 * a one-line reason in err (e.g. "invalid JSON at byte 12: expected ':'"). */
json_value *json_parse(const char *text, size_t len, char *err, size_t errlen);
void json_free(json_value *v);

/* Trees built in code, freed with json_free() as parsed ones are.
 * json_new: a STRING of s[0..len) (bytes as they are), a NUMBER whose text
 * s[0..len) the parser reads as one JSON number (NULL if it does not: so a
 * command-line value is checked as a request's field would be), or an empty
 * ARRAY / OBJECT / NULL / TRUE / FALSE (s ignored). NULL when out of memory.
 * json_add: appends v to an ARRAY (key ignored) or under key to an OBJECT
 * (no check for a repeated key: callers add each key once). Takes v in
 * every case (freed on failure); 0, or -1 when out of memory or c is not a
 * container (or v is NULL, so calls can nest json_new). */
json_value *json_new(json_type t, const char *s, size_t len);
int json_add(json_value *c, const char *key, json_value *v);

/* Object member by key (NULL if v is not an object or has no such key). */
const json_value *json_get(const json_value *v, const char *key);
/* Typed views; each returns 0 (and leaves *out alone) when the type differs. */
int json_is_bool(const json_value *v, int *out);
int json_as_str(const json_value *v, const char **out, size_t *len);
/* NUMBER as double (strtod of the literal) / as an exact integer: json_as_i64
 * refuses fractions, exponents that leave a fraction, and values out of range. */
int json_as_double(const json_value *v, double *out);
int json_as_i64(const json_value *v, int64_t *out);

/* ---- writer ---- */
typedef struct {
    char *p;            /* NUL-terminated while oom == 0 */
    size_t len, cap;
    int oom;            /* set once an allocation failed; later writes are dropped */
} jbuf;

void jbuf_init(jbuf *b);
void jbuf_free(jbuf *b);
void jbuf_reset(jbuf *b);                     /* len = 0, keeps the memory */
void jbuf_put(jbuf *b, const void *s, size_t n);
void jbuf_puts(jbuf *b, const char *s);
void jbuf_putc(jbuf *b, char c);
void jbuf_printf(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends everything read from f (to its end) to b. Returns 0, or -1 on a
 * read error (errno set) or when memory ran out (b->oom). b stays
 * NUL-terminated. The one place the project reads a stream or a small file
 * whole (FORK.json, manifests, Modelfiles, templates, stdin). */
#include <stdio.h>
int jbuf_read_stream(jbuf *b, FILE *f);
/* The whole file at path as a malloc'd NUL-terminated string (free() it),
 * its length in *len when len is not NULL; NULL with errno set on failure. */
char *json_read_file(const char *path, size_t *len);

/* Appends s[0..n) as a quoted JSON string with the escaping described above. */
void json_put_str(jbuf *b, const char *s, size_t n);
void json_put_cstr(jbuf *b, const char *s);
/* The writers of the servers bankml answers for. Neither ever writes a byte
 * that is not UTF-8, so every body parses (Python's json.loads, JS
 * JSON.parse).
 *
 * json_put_str_nl: exactly what llama-server b11669 writes for a string,
 * nlohmann::json's dump(-1, ' ', false, error_handler_t::replace) (its
 * safe_json_to_str): '"' and '\\' escaped, \b \t \n \f \r as such, the other
 * bytes below 0x20 as \u00xx (lowercase hex), DEL and valid UTF-8 raw
 * (ensure_ascii off), and each ill-formed sequence as one U+FFFD (EF BF BD):
 * an impossible byte (80..BF alone, C0, C1, F5..FF) alone; else the lead
 * and the continuation bytes that fit RFC 3629's table, up to the first
 * that does not (which starts afresh) or the end (so a character cut at
 * the end is one U+FFFD). That is Unicode's "maximal subpart" practice,
 * the same grouping as Python's bytes.decode('utf-8', 'replace'). */
void json_put_str_nl(jbuf *b, const char *s, size_t n);
void json_put_cstr_nl(jbuf *b, const char *s);
/* json_put_str_go: exactly what Go's encoding/json Marshal (Go >= 1.22, as
 * Ollama is built) writes: '"' '\\' \b \f \n \r \t escaped as such, the other
 * bytes below 0x20 as \u00xx, the HTML escapes \u003c \u003e \u0026 for < > &,
 * U+2028 and U+2029 as \u2028 and \u2029, DEL and valid UTF-8 raw, and each
 * byte that utf8.DecodeRuneInString rejects (RuneError of width 1: every
 * byte of an ill-formed sequence, one by one) as the six characters \ufffd. */
void json_put_str_go(jbuf *b, const char *s, size_t n);
void json_put_cstr_go(jbuf *b, const char *s);
/* The text a client decodes from what json_put_str_nl / json_put_str_go
 * wrote, unescaped: s[0..n) with the same U+FFFD replacements, appended to
 * b (for hashes over the answer as returned, e.g. response_sha256). */
void json_text_nl(jbuf *b, const char *s, size_t n);
void json_text_go(jbuf *b, const char *s, size_t n);
/* A chat answer's content as llama-server b11669's chat parser leaves it
 * (common_parse_utf8_codepoint's walk, measured on the binary): only the
 * shapes are checked (a lead's length, continuations' top bits), so
 * overlongs, surrogates and F5..F7 leads pass as they are (the writer then
 * replaces them); a continuation byte or an F8..FF byte alone, or a lead
 * with fewer continuations than its shape wants before another byte, is
 * one U+FFFD for the lead and the continuations it has; a lead cut by the
 * end of the text is dropped. Appended to b. */
void json_text_peg(jbuf *b, const char *s, size_t n);
/* How many leading bytes of s[0..n) are well-formed UTF-8 (RFC 3629). */
size_t json_utf8_valid_len(const char *s, size_t n);
/* Writes a parsed value back (compact: separators ", " and ": "). */
void json_put_value(jbuf *b, const json_value *v);
/* Appends v exactly as nlohmann::json 3.12.0's dump() prints a double, which
 * is what llama-server b11669 sends for probabilities, logprobs and timings:
 * Grisu2 digits (not always the shortest round-trip form: 0.1f widened to
 * double gives 0.10000000149011612), then plain notation for 1e-5 < |v| <
 * 1e15 with whole numbers as "1.0" / "-0.0", else "1e+20", "1.5e-07",
 * "1e+300" (exponent signed, at least two digits). NaN and +-inf give null.
 * At most 24 bytes. */
void json_put_double(jbuf *b, double v);
/* v as nlohmann::ordered_json's dump(indent) prints it, which llama-server
 * puts in some of its error messages: indent -1 compact (no spaces), else
 * one member or item a line, indent spaces a level, ": " after keys;
 * members in their order, integers as written, other numbers as its
 * doubles, strings with \b \f \n \r \t and \u00xx for the other control
 * bytes. */
void json_put_nl_dump(jbuf *b, const json_value *v, int indent);

#endif
