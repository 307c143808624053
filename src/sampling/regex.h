/*
 * regex.h -- the regular expressions of lazy grammars' triggers, matched as
 * llama.cpp b11669 matches them: std::regex (libstdc++, ECMAScript grammar,
 * no flags) over the bytes of the text generated so far, std::regex_search
 * (and std::regex_match for a pattern that starts with '^' and ends with
 * '$'), leftmost start, then the first match in backtracking order (greedy
 * and lazy quantifiers, ordered alternation), with the positions of the
 * capturing groups.
 *
 * The subset bankml reproduces (every other construct is refused with the
 * reason, never guessed):
 *   literal bytes (any byte but ^ $ \ . * + ? ( ) [ { |; ']' and '}' are
 *   literal as libstdc++ takes them), '.' (any byte but \n and \r), ^ and $
 *   (the whole text's start and end: no multiline), \b \B, classes [...] and
 *   [^...] of bytes and ASCII ranges with \d \D \s \S \w \W (the "C"
 *   locale's classes), the escapes \f \n \r \t \v \xHH and a backslash
 *   before any ASCII punctuation, groups ( ) and (?: ), lookaheads (?= ) and
 *   (?! ), alternation, and * + ? {m} {m,} {m,n} (m, n <= 1000), each
 *   greedy or lazy ('?' after it).
 * Refused as bankml's own: back-references, \0 \cX \uXXXX and identity
 * escapes of letters or digits, POSIX bracket classes, [] and [^], a
 * quantifier after a quantifier, a quantified assertion, a quantified atom
 * that can match the empty text or holds a capturing group (where
 * libstdc++'s repetition differs from ECMAScript's), ^ $ \b \B inside a
 * lookahead, ranges with a byte above 0x7F, nesting deeper than 64.
 * Errors libstdc++ raises are given with its words (RX_INVALID; llama-server
 * answers 400 "Failed to initialize samplers: " + those words).
 */
#ifndef BANKML_REGEX_H
#define BANKML_REGEX_H

#include <stddef.h>

enum {
    RX_OK = 0,
    RX_INVALID = 1,       /* libstdc++ throws std::regex_error: err holds its what() */
    RX_UNSUPPORTED = 2,   /* valid for libstdc++, not reproduced by bankml: err says why */
    RX_NOMEM = 3
};

typedef struct rx rx;

/* Compiles pat[0..len) (any bytes). RX_OK with *out set, or an RX_* code
 * with the reason in err. */
int rx_compile(const char *pat, size_t len, rx **out, char *err, size_t errlen);
void rx_free(rx *r);
/* The number of capturing groups. */
size_t rx_groups(const rx *r);

/* At most this many backtracking steps per rx_exec: past it rx_exec gives
 * -1 rather than run without bound (libstdc++ has no limit). */
#define RX_MAX_STEPS 50000000L

/* std::regex_search(s[0..n)) when exact is 0, std::regex_match when 1.
 * 1 on a match, with groups[2k], groups[2k+1] the start and end of group k
 * (0: the whole match; -1, -1 for a group that took no part), 0 when none,
 * -1 when the step limit was reached or memory ran out. groups holds
 * 2 * (rx_groups + 1) entries. */
int rx_exec(const rx *r, const char *s, size_t n, int exact, long *groups);

#endif
