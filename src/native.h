/*
 * native.h -- bankml's engine behind `bankml serve` and `bankml generate`:
 * verified models from a registry, one resident at a time, one slot (as
 * llama-server -np 1) with llama-server b11669's prompt-cache rule, context
 * limit, stop strings and token accounting, and the llama-server routes
 * (/v1/chat/completions, /completion, /tokenize, /detokenize,
 * /apply-template, /props, /health, /v1/models) plus GET /bankml.
 *
 * The pure rules are exposed for the unit tests.
 */
#ifndef BANKML_NATIVE_H
#define BANKML_NATIVE_H

#include <stddef.h>
#include <stdint.h>

#include "json.h"

/* CLI entry points (argv holds the arguments after the command name). */
int native_cmd_generate(int argc, char **argv);
int native_cmd_serve(int argc, char **argv);

/* ---- pure parts, exposed for tests ---- */

/* llama-server's slot reuse: how many of the slot's tokens a new prompt
 * keeps. The longest common prefix, one less when it covers the whole
 * prompt (at least one token is evaluated), 0 when cache_prompt is off. */
size_t native_reuse(const int32_t *slot, size_t n_slot, const int32_t *prompt, size_t n_prompt,
                    int cache_prompt);

/* llama-server's validate_utf8: the length of the longest prefix of s[0..n)
 * that does not end inside an incomplete UTF-8 sequence. */
size_t native_utf8_complete(const char *s, size_t n);

/* string_find_partial_stop: the position where a suffix of text[0..n) that
 * is a proper-or-whole prefix of word begins, or (size_t)-1. */
size_t native_partial_stop(const char *text, size_t n, const char *word, size_t wn);

/* Stop-string state of one answer, as llama-server's process_token keeps
 * it: the generated text, how much of it was sent, the matched word. */
typedef struct {
    jbuf text;             /* slot.generated_text */
    size_t n_sent;         /* slot.n_sent_text */
    const char *const *stops;
    const size_t *stop_lens;
    size_t n_stops;
    int stopped;           /* a stop word matched */
    size_t stop_word;      /* its index */
} native_stopper;

void native_stopper_init(native_stopper *s, const char *const *stops, const size_t *lens, size_t n);
void native_stopper_free(native_stopper *s);
/* One token's piece appended (is_eog: the token ends generation, so nothing
 * is held back). Returns 1 and sets *send and *send_len to the text released
 * now (possibly empty) when the text has no incomplete UTF-8 at its end,
 * else 0 (nothing released; the token is not reported). After a stop word
 * matched, s->stopped is 1 and the text ends before it. */
int native_stopper_push(native_stopper *s, const char *piece, size_t n, int is_eog,
                        const char **send, size_t *send_len);

/* Registry names (§2.7): a file's name is its stem lower-cased. 1 when
 * `asked` names `file` (the name, the name + ":latest", or the file name,
 * case-insensitively), else 0. */
void native_model_name(const char *file, char *out, size_t outlen);
int native_name_matches(const char *file, const char *asked);

/* nlohmann's dump of a double (shortest round-trip, ".0" for integers). */
void native_put_double(jbuf *b, double v);

#endif
