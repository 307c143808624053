/*
 * llama_json.h -- llama-server b11669's JSON, inside the api layer: reading
 * a request (llama_req.c: every field llama-server's routes read, with its
 * nlohmann errors, into one engine_request) and writing its answers
 * (llama_out.c: timings, usage, probabilities, generation_settings). Used by
 * llama.c (the routes) and status.c.
 */
#ifndef BANKML_LLAMA_JSON_H
#define BANKML_LLAMA_JSON_H

#include "api/serve.h"
#include "api/llama.h"
#include "engine/engine.h"

#define LLAMA_FINGERPRINT "bankml-" BANKML_VERSION

/* ---- reading (llama_req.c) ---- */

/* serve_reply_error with llama-server's error shape. Returns 0. */
int llama_reply_err(serve_resp *resp, int code, const char *msg);
/* llama-server's 400 exceed_context_size_error for a prompt of n tokens. */
void llama_reply_exceed_ctx(serve_resp *resp, size_t n, size_t n_ctx);
/* The model a request's `model` names, resident and locked, or NULL after
 * answering the error. Names: the registry's (an empty or absent name is
 * the startup model), then --alias (the startup model); any other name is
 * the one model when one is served (llama-server's rule), a 404 listing
 * the names when several are. body may be NULL (the startup model). */
engine_model *llama_lock_model(engine *e, const json_value *body, serve_resp *resp);
/* The `model` an answer reports: --alias for the startup model, else the
 * model's path as given (llama-server reports -m's argument). */
const char *llama_model_name(engine *e, const engine_model *m);

/* The request's JSON, or NULL after answering 400: first as llama-server's
 * nlohmann parser would take it (its exact error text; a byte order mark
 * skipped), then json.c's tree. */
json_value *llama_parse_body(serve_req *req, serve_resp *resp);
/* nlohmann's name of a value's type ("null", "boolean", "number", ...). */
const char *llama_jtype(const json_value *v);
/* field_bool of llama-server's schema: null is absent. 0, or -1 with
 * nlohmann's type error. */
int llama_field_bool(const json_value *o, const char *name, int *val, char *err, size_t errlen);
/* A token id as nlohmann's get<llama_token>() reads a number or a boolean
 * (fractions truncated, wider integers cut to 32 bits); v is one of those. */
int32_t llama_token_id(const json_value *v);

/* The checks llama-server makes on `messages` before any template runs, in
 * its order and with its words: 0, or -1 with the status (400 or 500) and
 * the message. msgs is an array. */
int llama_check_messages(const json_value *msgs, int *status, char *err, size_t errlen);

/* What a completion request asks before a model is chosen: the chat
 * route's `messages` checks and OpenAI's logprobs/top_logprobs. */
typedef struct {
    int chat;
    const json_value *messages, *prompt;
    int32_t logprobs_n;
    int logprobs_set;
} llama_pre;
/* 0, or -1 with the status and llama-server's message. */
int llama_read_pre(const json_value *body, int chat, llama_pre *pre, int *status, char *err, size_t errlen);

/* The request's fields in llama-server's schema order (stream,
 * stream_options, cache_prompt, n_predict, n_cmpl, the sampler's, stop)
 * over the command line's defaults (lo, NULL: none) and the model's, into
 * rq (prompt apart). 0, or -1 with the 400 message. */
int llama_read_request(const engine_model *m, const llama_api_opts *lo, const json_value *body, const llama_pre *pre,
                       engine_request *rq, char *err, size_t errlen);

/* /completion's `prompt`: a string (tokenized as a prompt), or an array of
 * ids and strings mixed. *ids malloc'd. 0, or -1 with the 400 message. */
int llama_read_prompt(const engine_model *m, const json_value *pr, int32_t **ids, size_t *n, char *err,
                      size_t errlen);

/* ---- writing (llama_out.c) ---- */

/* n-1 random letters and digits and a NUL (llama-server's random_string
 * is 32 of them). */
void llama_random_id(char *out, size_t n);
void llama_put_timings(jbuf *b, const engine_result *r);
void llama_put_usage(jbuf *b, const engine_result *r);
/* A token's bytes as llama-server's `bytes`: [n, n, ...]. */
void llama_put_bytes(jbuf *b, const char *s, size_t n);
/* probs_vector_to_json over tokens t[a..z). */
void llama_put_probs(jbuf *b, const engine_model *m, const engine_token *t, size_t a, size_t z);
/* task_params::to_json as /completion and /props print generation_settings. */
void llama_put_gen_settings(jbuf *b, const engine_request *rq, int stream);
/* How many of the reported tokens llama-server keeps in a final answer's
 * probabilities: those of a matched stop word are dropped. */
size_t llama_probs_kept(const engine_model *m, const engine_request *rq, const engine_result *r);

#endif
