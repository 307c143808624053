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

#include "base/json.h"

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

/* ---- engine entry points for ollama.c ---- */

#include "sampling/sampler.h"

struct serve_server;
struct serve_req;

/* Registers Ollama's /api/ routes (ollama.c) on the server native's serve
 * built; registry_dir (NULL when none) is where derived models live. */
int ollama_register(struct serve_server *srv, const char *registry_dir);

/* One registry entry; the strings live as long as the server. */
typedef struct {
    const char *name, *file, *path, *fork;
    int present;
} native_entry;

size_t native_n_entries(void);
size_t native_default_entry(void);
size_t native_served_ctx(void);                 /* --ctx */
int64_t native_keep_alive_ms(void);             /* --keep-alive in ms, < 0 forever */
int native_entry_get(size_t i, native_entry *e);  /* 0, or -1 when i is out of range */
long native_entry_find(const char *asked);      /* registry index, or -1 */

/* The engine lock: held for a whole load, completion or unload. Every
 * native_engine_* call below but lock needs it held. */
void native_engine_lock(void);
/* Makes entry idx resident (verifying and loading it when it is not);
 * *loaded says whether it had to be read. 0, or -1 with an HTTP status and
 * a reason. */
int native_engine_acquire(size_t idx, int *loaded, int *status, char *err, size_t errlen);
/* Sets the resident model's expiry (ms; 0 unloads now, < 0 never) and
 * releases the lock. */
void native_engine_release(int64_t keep_alive_ms);
/* Releases the lock and leaves the expiry as it is. */
void native_engine_unlock(void);
/* The resident entry (or -1) and the ms until it expires (-1: never). */
long native_engine_resident(int64_t *expires_in_ms);
size_t native_engine_n_ctx(void);
/* The resident model's GGUF sampling defaults. */
const sampler_params *native_engine_defaults(void);
/* The conversation through the resident model's template, and a prompt's
 * tokens (specials parsed, BOS as the vocabulary says). */
int native_engine_render(const json_value *messages, jbuf *out, char *err, size_t errlen);
int native_engine_tokenize(const char *text, size_t len, int32_t **ids, size_t *n, char *err, size_t errlen);
/* The answer's content as llama-server's chat parser gives it. */
void native_engine_content(const char *s, size_t n, const char **out, size_t *len);

/* One completion in the slot: in fields set by the caller, out fields by
 * native_engine_run (text malloc'd; the caller frees it). on_text gets each
 * released piece; nonzero from it stops the run (the client is gone). */
typedef struct {
    const int32_t *prompt;
    size_t n_prompt;
    const sampler_params *sp;
    int32_t n_predict;                  /* -1: none */
    const char *const *stops;
    const size_t *stop_lens;
    size_t n_stops;
    struct serve_req *http;             /* client-gone checks, or NULL */
    int (*on_text)(void *ud, const char *text, size_t n);
    void *ud;
    /* out */
    size_t n_cached, n_decoded;
    int stop;                           /* 1: end of generation or a stop word; 0: a limit */
    int gone;
    int64_t prompt_us, eval_us, ttft_us;
    char *text;
    size_t text_len;
} native_run;
int native_engine_run(native_run *r, char *err, size_t errlen);
/* The bankml_receipt object (§2.5) of a finished run. */
void native_engine_receipt(jbuf *b, const native_run *r, struct serve_req *req, const char *text, size_t tn);

#endif
