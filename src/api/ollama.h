/*
 * ollama.h -- Ollama's HTTP API (the /api/ routes) on the engine's registry
 * and slot, and `bankml create`. ollama.c only translates shapes: every
 * model touch goes through engine.h, so an Ollama client gets what
 * llama-server's routes would answer, in Ollama's JSON.
 *
 * The pure parts (durations, names, num_ctx fitting, Modelfiles) are
 * exposed for tests/test_ollama.c.
 */
#ifndef BANKML_OLLAMA_H
#define BANKML_OLLAMA_H

#include <stddef.h>
#include <stdint.h>

#include "base/json.h"

struct serve_server;
struct engine;

/* Registers Ollama's /api/ routes on srv, answering from e; registry_dir
 * (NULL when none) is where derived models live. 0, or -1. */
int ollama_register(struct serve_server *srv, struct engine *e, const char *registry_dir);

/* `bankml create NAME -f Modelfile [--registry DIR]` (argv after "create"). */
int ollama_cmd_create(int argc, char **argv);

/* ---- pure parts, exposed for tests ---- */

/* Go's time.ParseDuration ("5m", "1h30m", "2.5s", "-1m", "300ms", "0") or a
 * plain number of seconds ("30", "1.5"), in milliseconds (rounded toward
 * zero). 0, or -1 when s is neither. */
int ollama_parse_duration(const char *s, size_t n, int64_t *ms);

/* keep_alive of a request: absent/null/"" -> *ms = def_ms; a number ->
 * seconds; a string -> ollama_parse_duration. Negative means forever (-1).
 * 0, or -1 with Ollama-style reason in err. */
int ollama_keep_alive(const json_value *v, int64_t def_ms, int64_t *ms, char *err, size_t errlen);

/* A derived model's name as users type it matches `name`: case-insensitive,
 * with or without ":latest". */
int ollama_name_matches(const char *name, const char *asked);
/* A name create/copy may take: letters, digits, '.', '_', '-', at most 128,
 * an optional ":latest", not ending in ".gguf". Writes the bare name
 * lower-cased to out. 0, or -1 with a reason. */
int ollama_name_check(const char *asked, char *out, size_t outlen, char *err, size_t errlen);

/* Whether Ollama's model.ParseName(s).IsValid() (types/model/name.go):
 * [host/][namespace/]model[:tag], each part 1-80 characters (host 350),
 * starting with a letter, digit or '_'. Decides which of Ollama's errors an
 * unknown name gets. */
int ollama_name_valid(const char *s);
/* Go's %q of s (strconv.Quote; see ollama.c for the code points it
 * escapes), cut to fit out, for Ollama's messages that quote a name. */
void ollama_go_quote(const char *s, char *out, size_t outlen);

/* Ollama v0.13.3's chatPrompt truncation (server/prompt.go). is_system[i]
 * says whether message i is a system message. count(ud, idx, n, &tokens)
 * gives the tokens of the conversation made of messages idx[0..n). Writes
 * the kept messages' indices to keep (room for n_msgs) and their number to
 * *n_keep, and the messages dropped to *n_dropped. 0, or -1 when count
 * failed (its reason in err). */
typedef int (*ollama_count_fn)(void *ud, const size_t *idx, size_t n, size_t *tokens, char *err, size_t errlen);
int ollama_fit(const int *is_system, size_t n_msgs, size_t num_ctx, ollama_count_fn count, void *ud,
               size_t *keep, size_t *n_keep, size_t *n_dropped, char *err, size_t errlen);

/* One Modelfile instruction: name lower-cased ("from", "parameter", ...),
 * for PARAMETER the key in `key`, for MESSAGE the role, and the value. */
typedef struct {
    char name[16];
    char *key;
    char *value;
} ollama_cmd;

typedef struct {
    ollama_cmd *cmds;
    size_t n;
} ollama_modelfile;

/* Ollama's parser/parser.go over text[0..n): instructions case-insensitive,
 * '#' comments at a line's start, values to the end of the line or quoted
 * with "..." or """...""" (multi-line, no escapes); BOM and CRLF handled.
 * 0, or -1 with a reason ("line 3: ..."). Free with ollama_modelfile_free. */
int ollama_modelfile_parse(const char *text, size_t n, ollama_modelfile *mf, char *err, size_t errlen);
void ollama_modelfile_free(ollama_modelfile *mf);

/* RFC 3339 UTC with nine fractional digits for a wall-clock time in ns. */
void ollama_rfc3339(int64_t unix_ns, char out[40]);

#endif
