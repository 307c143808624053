/*
 * llama_json.h -- llama-server b11669's JSON, inside the api layer: reading
 * a request (llama_req.c: every field llama-server's routes read, with its
 * nlohmann errors, into one engine_request; llama_fields.c: the table of
 * every field, reproduced, accepted or refused) and writing its answers
 * (llama_out.c: timings, usage, probabilities, generation_settings). Used by
 * llama.c (the routes) and status.c.
 */
#ifndef BANKML_LLAMA_JSON_H
#define BANKML_LLAMA_JSON_H

#include "api/serve.h"
#include "api/llama.h"
#include "engine/engine.h"
#include "text/chat_gen.h"
#include "text/chat_peg.h"
#include "text/template.h"

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
/* The same for a read-only route (/tokenize, /detokenize, /apply-template):
 * the resident model peeked without the engine lock when it is the one
 * named (engine_peek: it never waits for a generation), else as
 * llama_lock_model (a load waits for the engine lock). *peeked says which;
 * llama_read_done gives it back with keep_ms (engine_unpeek or
 * engine_release). */
const engine_model *llama_read_model(engine *e, const json_value *body, serve_resp *resp, int64_t keep_ms,
                                     int *peeked);
void llama_read_done(engine *e, int peeked, int64_t keep_ms);
/* The `model` an answer reports: --alias for the startup model, else the
 * model's path as given (llama-server reports -m's argument). */
const char *llama_model_name(engine *e, const engine_model *m);

/* The request's JSON, or NULL after answering 400: first as llama-server's
 * nlohmann parser would take it (its exact error text; a byte order mark
 * skipped), then json.c's tree; with no models at all (the router with
 * none), the router's 400 for the request's `model` instead. */
json_value *llama_parse_body(const engine *e, serve_req *req, serve_resp *resp);
/* nlohmann's readings (defined in llama_fields.c, which llama_req.c calls):
 * the name of a value's type ("null", "boolean", "number", ...). */
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
    const char *route;         /* the route's name for the field table (llama_fields_check): llama_read_pre
                                * sets "/v1/chat/completions" or "/completion"; another route sets its own */
    const json_value *body;    /* the request's body (llama_read_pre) */
    const json_value *messages, *prompt;
    int32_t logprobs_n;
    int logprobs_set;
    template_opts topts;       /* the chat's template inputs (llama_read_chat_inputs; defaults otherwise) */
    int tool_choice;           /* LLAMA_TOOL_CHOICE_* */
    int has_tools;             /* tools is a non-empty array */
} llama_pre;

enum { LLAMA_TOOL_CHOICE_AUTO, LLAMA_TOOL_CHOICE_NONE, LLAMA_TOOL_CHOICE_REQUIRED };

/* oaicompat_chat_params_parse's template inputs, after the messages' checks:
 * tools (common_chat_tools_parse_oaicompat: its 500s, the tools dumped as
 * nlohmann's dump(2)), tool_choice ("auto", "none", "required"; another
 * string is its 400 "Invalid tool_choice: X", any other value auto),
 * add_generation_prompt (a boolean, else true), continue_final_message and
 * the prefill of a final assistant message (template_continuation's 400s),
 * tools beside a grammar (400), chat_template_kwargs (an object; another
 * value refused by bankml), reasoning_effort (a string). Into pre->topts,
 * tool_choice, has_tools. 0, or -1 with the status and message. */
int llama_read_chat_inputs(const json_value *body, llama_pre *pre, int *status, char *err, size_t errlen);

/* What llama-server checks on the model before it renders: with --no-jinja,
 * tools or a tool_choice other than "auto" (its 500s); with a template whose
 * caps take object arguments, each tool call's arguments text must be JSON
 * (func_args_not_string's 500, nlohmann's words). 0, or -1 with the 500. */
int llama_check_render(const engine_model *m, const json_value *body, const json_value *messages, char *err,
                       size_t errlen);
/* 0, or -1 with the status and llama-server's message. */
int llama_read_pre(const json_value *body, int chat, llama_pre *pre, int *status, char *err, size_t errlen);

/* The request's fields in llama-server's schema order (stream,
 * stream_options, cache_prompt, n_predict, n_cmpl, the sampler's, stop)
 * over the command line's defaults (lo, NULL: none) and the model's, into
 * rq (prompt apart), then the field table's (llama_fields_read with
 * pre->route, or "/completion" without pre). 0, or -1 with the 400 message. */
int llama_read_request(const engine_model *m, const llama_api_opts *lo, const json_value *body, const llama_pre *pre,
                       engine_request *rq, char *err, size_t errlen);

/* The prompts of one request, each its ids (malloc'd). */
typedef struct {
    int32_t **ids;
    size_t *n;
    size_t count;
} llama_prompts;
void llama_prompts_free(llama_prompts *p);
/* /completion's `prompt` as b11669's tokenize_input_prompts reads it: an
 * array without integers is several prompts, one per element; anything
 * else is one. A prompt is a string (tokenized with BOS), an array of ids,
 * an array of strings and ids mixed (BOS only before a first string), or
 * an object with `prompt_string` (one of those); other shapes, [] and multimodal_data are refused with llama-server's
 * words. 0, or -1 with the 400 message (out left empty). */
int llama_read_prompts(const engine_model *m, const json_value *pr, llama_prompts *out, char *err, size_t errlen);
/* b11669's check as it launches a task (server_tokens::validate): every id
 * in the vocabulary. 1 when they are; else the task fails with "Prompt
 * contains invalid tokens" (400) after its slot was chosen. */
int llama_prompt_valid(const engine_model *m, const int32_t *ids, size_t n);
/* Several prompts in one request (two or more) as bankml runs them, one task
 * after another: refused with the reason when the model has more than one
 * slot (b11669 batches their tasks together) or when one of them exceeds
 * the context or has ids outside the vocabulary (b11669's answer then
 * depends on timing). 0, or -1 with the 400 message. */
int llama_prompts_check(const engine_model *m, const llama_prompts *ps, char *err, size_t errlen);
/* response_fields as b11669 reads it, json_value(body, key, vector<string>()): an array of strings, else
 * (null, a string, [1], []) the default, no selection: NULL. */
const json_value *llama_response_fields(const json_value *body);
/* A request's prompts: the conversation through the template (pre->chat:
 * always one) and tokenized, or llama_read_prompts'. 0, or -1 after
 * answering the error on resp. */
int llama_prompt_list(const engine_model *m, const llama_pre *pre, serve_resp *resp, llama_prompts *out);

/* ---- the field table (llama_fields.c) ---- */

/* The routes a field is read on. */
#define LLAMA_ROUTE_COMPLETION 1u          /* /completion, /completions */
#define LLAMA_ROUTE_CHAT 2u                /* /v1/chat/completions, /chat/completions */
#define LLAMA_ROUTE_OAI_COMPLETIONS 4u     /* /v1/completions */

typedef enum {
    LLAMA_FIELD_REPRODUCED,    /* bankml computes it as b11669 does (`words` says where) */
    LLAMA_FIELD_ACCEPTED,      /* it cannot change an answer (`words` says why) */
    LLAMA_FIELD_REFUSED        /* a value other than absent gets 400 with `words` */
} llama_field_kind;

/* One request field llama-server b11669 reads. */
typedef struct {
    const char *name;
    unsigned routes;           /* LLAMA_ROUTE_* bits */
    llama_field_kind kind;
    const char *words;         /* where it is reproduced, why it is accepted, or the refusal */
    int (*absent)(const json_value *v);   /* REFUSED: 1 when v (not null) acts as absent in b11669 */
} llama_field;

/* The table, in llama-server's reading order; *n its length. */
const llama_field *llama_fields(size_t *n);
/* LLAMA_ROUTE_* of a route name ("/completion", "/v1/chat/completions",
 * "/v1/completions", ...), 0 for a route the table does not know. */
unsigned llama_route_bit(const char *route);
/* The refusals for the request body of `route` (a route name as
 * llama_route_bit takes it; a new route that reads completion requests, e.g.
 * in llama_compat.c, calls this or llama_fields_read with its name): llama-
 * server's own errors for response_format's type and a lora that is not an
 * array, then the first refused field whose value is not absent. 0, or -1
 * with the 400 message (an unknown route is refused too). */
int llama_fields_check(const char *route, const json_value *body, char *err, size_t errlen);
/* llama_fields_check, then the fields reproduced here into rq (rq->stream
 * read already): timings_per_token, return_tokens, return_progress, n_keep,
 * n_discard, logit_bias (rq->bias, every form llama-server reads) and
 * ignore_eos (every end-of-generation token appended to rq->bias at -inf);
 * streamed per-token timings and progress events are refused. lo (NULL:
 * none) gives the server-wide grammar, taken when the body names none. 0, or
 * -1 with the 400 message. */
struct llama_api_opts_s;
int llama_fields_read(const engine_model *m, const char *route, const json_value *body,
                      const struct llama_api_opts_s *lo, engine_request *rq, char *err, size_t errlen);

/* The chat layer's llama_params (llama_chat.c) read as the completion
 * schema reads them, replacing what the body set: grammar (when o has one:
 * the chat's own, which replaces the body's), grammar_lazy,
 * preserved_tokens, grammar_triggers (a one-token word made a token
 * trigger), the reasoning budget's fields; then the grammar compiled and
 * the lazy grammar's triggers. 0, or -1 with the message. */
int llama_fields_read_chat(const engine_model *m, const json_value *o, engine_request *rq, char *err, size_t errlen);

/* ---- the chat-format layer (llama_chat.c) ---- */

/* One chat request's chat format, as b11669's --jinja path runs it: the
 * template's parameters (chat_gen's, for a template that takes the
 * differential autoparser) and the answer parsed as it grows. */
typedef struct {
    int active;                /* the answer goes through the parser (else today's content-only path) */
    int has_params;
    chat_gen_params p;         /* the arena, grammar flags, triggers, preserved tokens, stops, thinking tags */
    chat_format format;        /* CHAT_FORMAT_PEG_NATIVE */
    jbuf gp;                   /* the generation prompt (common_chat_template_generation_prompt) */
    chat_msg msg;              /* the message parsed last (task_result_state::chat_msg) */
    char **ids;                /* the tool calls' ids by index (generated_tool_call_ids) */
    size_t n_ids;
    int want_object;           /* response_format asked for any object */
    json_value *schema_doc;    /* {"type":"object"} when it did */
} llama_chat;

void llama_chat_init(llama_chat *c);
void llama_chat_free(llama_chat *c);
/* For a chat with Jinja, after llama_read_request: the chat inputs as
 * oaicompat_chat_params_parse reads them (tools and tool_choice from pre,
 * parallel_tool_calls, reasoning_format over lo's --reasoning-format,
 * response_format / json_schema), the template's parameters (the one
 * dispatch point: a specialised template, chat_specialized != CA_SPEC_NONE,
 * is refused when the request needs its parser, else answered as today),
 * and the llama_params they set into rq (llama_fields_read_chat, the added
 * stops, the generation prompt's prefill tokens). c->active says the answer
 * is parsed. A continued final message keeps today's path (refused beside
 * tools or a schema). 0, or -1 with *status and err. */
int llama_chat_prepare(engine_model *m, const llama_api_opts *lo, const json_value *body, const llama_pre *pre,
                       engine_request *rq, llama_chat *c, int *status, char *err, size_t errlen);
/* task_result_state::update_chat_msg: the answer so far text[0..n) parsed
 * (common_chat_parse, is_partial), the tool calls' ids set, and the deltas
 * from the message before (none when the parse is an empty message, which
 * is then not kept). 0 with *d (free with chat_msg_deltas_free) and *nd, or
 * -1 with b11669's error (the parse's or the diff's). */
int llama_chat_update(llama_chat *c, const char *text, size_t n, int is_partial, chat_msg_delta **d, size_t *nd,
                      char *err, size_t errlen);
/* server_chat_msg_diff_to_json_oaicompat: a stream chunk's delta object. */
void llama_chat_put_delta(jbuf *b, const chat_msg_delta *d);
/* common_chat_msg::to_json_oaicompat of the final message (role, content,
 * reasoning_content, tool_calls with type, function and id); an empty
 * message answers the raw text as its content. */
void llama_chat_put_message(jbuf *b, const chat_msg *m, const char *raw, size_t raw_len);

/* ---- the Anthropic Messages route (llama_anthropic.c) ---- */

/* server_chat_convert_anthropic_to_oai: an Anthropic Messages body b as
 * the chat request b11669 makes of it, written to o as JSON: system (a
 * string, or its text blocks joined; the billing header's cch stamp made
 * constant), each message (content blocks: text as they are, images as
 * image_url parts, thinking joined into reasoning_content, tool_use as
 * tool_calls with the input dumped into arguments, tool_result as the tool
 * messages after it), tools (input_schema the parameters), tool_choice
 * (auto; any and tool "required"; other values absent), stop_sequences as
 * stop, max_tokens (4096 when absent), temperature, top_p, top_k, stream,
 * chat_template_kwargs, and thinking {type: enabled} as
 * thinking_budget_tokens (budget_tokens, 10000 by default). 0, or -1 with
 * the status (500 for "'messages' is required") and message. */
int llama_anthropic_to_chat(const json_value *b, jbuf *o, int *status, char *err, size_t errlen);

/* The stream's block state (task_result_state's thinking_block_started,
 * text_block_started); zero it before the first partial. */
typedef struct {
    int thinking_started, text_started;
} llama_anthropic_state;
/* A partial's content-block events (to_json_anthropic of a partial, after
 * message_start), framed as SSE ("event: NAME\ndata: JSON\n\n"), appended
 * to out: for the deltas d[0..nd) of llama_chat_update, msg the message
 * parsed so far: thinking at index 0, text at 1 when msg has reasoning
 * (else 0), tool_use at that plus the text block when started plus the
 * call's index (content_block_start when the delta names the call, then
 * input_json_delta); st updated. */
void llama_anthropic_partial(jbuf *out, llama_anthropic_state *st, const chat_msg *msg, const chat_msg_delta *d,
                             size_t nd);
/* The final result's content-block events (to_json_anthropic_stream before
 * message_delta): the final parse's deltas with each block started afresh
 * (the indices from the whole message), then the empty signature_delta and
 * the stops: thinking, text, each tool call. Appended to out. */
void llama_anthropic_stream_blocks(jbuf *out, const chat_msg *msg, const chat_msg_delta *d, size_t nd);
/* The content array's blocks of a final answer, comma-separated (no
 * brackets): thinking (with an empty signature), text, then each tool_use
 * (id, name, the arguments parsed as its input, {} when they are not
 * JSON); an empty message gives the raw text as one text block (none when
 * raw is empty). */
void llama_anthropic_blocks(jbuf *out, const chat_msg *msg, const char *raw, size_t raw_len);

/* ---- writing (llama_out.c) ---- */

/* response_fields (server-common.cpp json_get_nested_values): out, a final
 * /completion answer, replaced by an object with one member per path of
 * paths (an array of strings) that leads to a value: the path split at
 * each '/' walks nested objects, the member named by the whole path; paths
 * that lead nowhere are left out, a repeated one kept once. Out of memory
 * or an unparsable out leaves out as it was. */
void llama_select_fields(jbuf *out, const json_value *paths);

/* n-1 random letters and digits and a NUL (llama-server's random_string
 * is 32 of them). */
void llama_random_id(char *out, size_t n);
/* b11669's timings object of r as it stands (server_slot_stats::to_json):
 * prompt_n is the tokens evaluated so far, prompt_ms 0.0 before the first
 * decode call, predicted_ms at least 0.001 once a token is out, the
 * per-token and per-second values 0.0 while their divisor is 0. */
void llama_put_timings(jbuf *b, const engine_result *r);
/* b11669's partial results carry `timings` when timings_per_token is on or
 * a stop word ended the answer (slot.stop set before the partial): 1 then. */
int llama_partial_timed(const engine_request *rq, int stop_now);
/* The prompt_progress object: {"total","cache","processed","time_ms"}. */
void llama_put_progress(jbuf *b, const engine_progress *p);
void llama_put_usage(jbuf *b, const engine_result *r);
/* A token's bytes as llama-server's `bytes`: [n, n, ...]. */
void llama_put_bytes(jbuf *b, const char *s, size_t n);
/* probs_vector_to_json over tokens t[a..z). */
void llama_put_probs(jbuf *b, const engine_model *m, const engine_token *t, size_t a, size_t z);
/* task_params::to_json as /completion prints generation_settings; props: the
 * only_metrics form /props prints (no dry_sequence_breakers, stop,
 * logit_bias, grammar, grammar_lazy, grammar_triggers, preserved_tokens;
 * reasoning_format "none"). */
void llama_put_gen_settings(jbuf *b, const engine_request *rq, int stream, int props);
/* The task's params as GET /slots shows them (task_params::to_json(true)):
 * the only-metrics form with the request's reasoning_format ("deepseek"),
 * for a chat "peg-native" and its template's generation prompt, else
 * "Content-only" and "". Appended to out; 0, or -1 out of memory. */
int llama_task_params(const engine_model *m, const llama_pre *pre, const engine_request *rq, jbuf *out);
/* What /completion's final object is made of (b11669's
 * server_task_result_cmpl_final::to_json_non_oaicompat), which is also the
 * __verbose member of a chat or /v1/completions answer. */
typedef struct {
    const engine_model *m;
    const llama_pre *pre;      /* the task's reading: a chat's generation_settings name its chat format
                                * ("peg-native") and generation prompt; NULL or not chat: "Content-only", "" */
    const engine_request *rq;
    const engine_result *g;
    const int32_t *ids;        /* the prompt, detokenized into `prompt` with its special tokens */
    size_t n_ids;
    int index, has_new_line;
    const char *model_name;
    const json_value *fields;  /* response_fields (an array of strings) or NULL: members selected */
} llama_final;
/* The final object, appended to b: content and tokens empty when streamed
 * (they went in the partials), completion_probabilities when not streamed. */
void llama_put_native_final(jbuf *b, const llama_final *f);
/* /completion's partial object for one token (to_json_non_oaicompat of a
 * partial): index, content, tokens, stop false, id_slot -1, counts, timings
 * when llama_partial_timed, completion_probabilities with n_probs. */
void llama_put_native_partial(jbuf *b, const engine_model *m, const engine_request *rq, const engine_token *t,
                              int stop_now, const engine_result *g, int index);
/* The progress partial's object (content "", tokens [0], timings with
 * timings_per_token, prompt_progress). */
void llama_put_native_progress(jbuf *b, const engine_request *rq, const engine_progress *p, const engine_result *g,
                               int index);

/* How many of the reported tokens llama-server keeps in a final answer's
 * probabilities: those of a matched stop word are dropped. */
size_t llama_probs_kept(const engine_model *m, const engine_request *rq, const engine_result *r);

#endif
