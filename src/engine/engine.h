/*
 * engine.h -- the engine layer's contract: pinned models in a registry, one
 * resident at a time, its -np slots chosen and run by llama-server
 * b11669's rules (slot selection, prompt reuse, -b/-ub batches, stop
 * strings, context and budget limits, token accounting), the host prompt
 * cache (--cache-ram) and the counters behind /metrics. Every front-end -- the llama-server routes (api/llama.c), the
 * Ollama routes (api/ollama.c) and `bankml generate` (cli/) -- reaches a
 * model only through the calls below.
 *
 * The life of a completion:
 *
 *   engine_model *m = engine_acquire(e, idx, &loaded, &er);   lock + resident
 *   ... engine_render / engine_tokenize / engine_defaults (m) ...
 *   engine_select(e, m, prompt, n);        optional: the slot is chosen now
 *   engine_complete(e, m, &rq, &sink, &res, &er);
 *   engine_release(e, keep_ms);            expiry set, lock released
 *
 * Locking: engine_acquire takes the engine lock and engine_release (or
 * engine_unlock) gives it back; every call that takes an engine_model needs
 * it held, so requests are served one at a time (over the -np slots), and
 * a model switch never has two models in memory. The exception is reading:
 * engine_peek / engine_unpeek hold the resident model without the engine
 * lock (the residency lock, a reader/writer lock, held to read), so the
 * read-only routes answer while a generation runs; a reader may call only
 * the calls that take a const engine_model * (the vocabulary, template,
 * caps, defaults, pieces and sizes are fixed once the model is open).
 *
 * Lock order (a thread holding one may take only those after it):
 *   1. the engine lock (run)               engine_acquire .. engine_release
 *   2. the residency lock (res)            engine_peek .. engine_unpeek (read);
 *                                          written only with 1 held, briefly:
 *                                          the resident model set or cleared
 *                                          (an unload waits for its readers),
 *                                          the registry's meta, the last
 *                                          verification (/bankml)
 *   3. a model's chat mutex                engine_model_chat's lazy analysis
 *   4. the counters' lock (met_mu)         engine_metrics_get, engine_task_ids,
 *                                          GET /slots' views; a leaf
 * A reader never takes the engine lock while it holds the residency lock
 * (it lets the model go first, then engine_acquire), so a load that waits
 * for readers cannot wait for itself.
 *
 * Errors: a call that can fail fills an engine_error: a kind the API layer
 * maps to a status (ENGINE_BAD_INPUT 400, ENGINE_NOT_FOUND 404,
 * ENGINE_UNAVAILABLE 503, ENGINE_INTERNAL 500) and one line a user can act on.
 */
#ifndef BANKML_ENGINE_H
#define BANKML_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "base/json.h"
#include "sampling/grammar.h"
#include "sampling/sampler.h"
#include "text/chat_analyze.h"
#include "text/template.h"

#include "bankml.h"

/* What the engine says it is (/bankml, receipts). */
#define ENGINE_NAME "bankML " BANKML_VERSION " native: its own forward pass, token-identical to llama.cpp b11669 on its oracle"
#define ENGINE_MAX_STOPS 64

typedef enum {
    ENGINE_OK = 0,
    ENGINE_BAD_INPUT,          /* the request or the model file is refused (400) */
    ENGINE_NOT_FOUND,          /* no such model, or not on this machine (404) */
    ENGINE_UNAVAILABLE,        /* the file changed since it was verified (503) */
    ENGINE_INTERNAL            /* out of memory, a model that failed to run (500) */
} engine_kind;

typedef struct {
    engine_kind kind;
    char msg[1024];
} engine_error;

/* The HTTP status of an error kind (200 for ENGINE_OK). */
int engine_status(engine_kind k);

/* ---- the handle ---- */

typedef struct {
    size_t n_ctx;              /* KV cells per slot (llama-server -c); 0 = 4096 */
    int llama_threads;         /* llama-server's -t (its split-KV chunks: bits); 0 = 2 */
    int threads;               /* our pool; 0 = BANKML_THREADS or the online cores */
    int64_t keep_alive_ms;     /* how long a model stays resident after a request; < 0 forever */
    int cache_on;              /* the host prompt cache (--cache-ram != 0) */
    size_t cache_limit;        /* its bytes; 0 = no limit */
    const char *log_name;      /* prefix of the load/unload lines on stderr; NULL: silent */
    size_t n_batch;            /* llama-server's -b: prompt tokens per decode call (min(-c, -b)); 0 = 2048 */
    size_t n_ubatch;           /* its -ub: micro-batch, min(-b, -ub) (decides kernels, so bits); 0 = 512 */
    int n_parallel;            /* its -np: slots, each with its own pad256(pad256(-c) / N) cells; 0 = 1;
                                  < 0 (llama-server's auto: 4 slots, unified KV) is refused */
    int kv_unified;            /* its -kvu: one cache for every slot; refused with -np > 1 */
    int swa_full;              /* its --swa-full: the window layers' cache full size, no context
                                  checkpoints; without it a sliding-window model (gemma3) keeps llama-server's
                                  smaller window cache and its prompt cuts, and is refused with the host prompt
                                  cache on (cache_on) */
    int no_checkpoints;        /* its --ctx-checkpoints <= 0: no context checkpoints, so a window model without
                                  --swa-full has its prompts fed without the checkpoint cuts; 0: its 32 */
    int ctx_checkpoints;       /* its --ctx-checkpoints when > 0: checkpoints kept per slot; 0 = 32 */
    int64_t checkpoint_min_step;   /* its -cms: their spacing in tokens; 0 = 8192 (its default), < 0 = 0 */
    float slot_prompt_similarity;   /* its -sps; 0 = 0.10 (its default); < 0 = its 0.0 (the rule off) */
    const char *alias;         /* llama-server's --alias: the startup model's name in answers; NULL: none */
    const char *chat_template; /* --chat-template / --chat-template-file: every model's template instead of its
                                  GGUF's ("chatml": llama-server's ChatML); NULL: the GGUF's. Not copied */
    size_t chat_template_len;
    int kv_type_k, kv_type_v;  /* llama-server's -ctk / -ctv: the KV cache's row types (kvq_type of
                                  ops/kvq.h); 0 = f16 */
    int kv_rot_off;            /* LLAMA_ATTN_ROT_DISABLE: no Hadamard rotation around a quantized cache */
    int no_jinja;              /* llama-server's --no-jinja: llama-server's routes render with its built-in format
                                  that the template's text names or contains (template_legacy_detect); Ollama's
                                  routes keep the Jinja engine */
    int reasoning_off;         /* --reasoning off: every Jinja render's enable_thinking is false unless the
                                  request's chat_template_kwargs say otherwise (b11669: enable_reasoning 0) */
} engine_opts;

#define ENGINE_MAX_SLOTS 256

typedef struct engine engine;
typedef struct engine_model engine_model;

/* A new engine with an empty registry and its thread pool. NULL with the
 * reason in er (ENGINE_BAD_INPUT for options not reproduced: -np auto,
 * --kv-unified with -np > 1, -b or -ub over 65536, -sps over 1). */
engine *engine_new(const engine_opts *o, engine_error *er);
/* Unloads the resident model and frees everything; the reaper is stopped. */
void engine_free(engine *e);
/* The threads the engine uses when engine_opts.threads is 0. */
int engine_default_threads(void);

/* ---- the registry ---- */

typedef struct {
    const char *name;          /* stem, lower-cased: what clients ask for */
    const char *file;          /* base name */
    const char *path;          /* where it is */
    const char *fork;          /* the FORK.json that pins it */
    int present;               /* the file is on this machine */
} engine_entry;

/* Adds file (at path, pinned by fork); a name already there is kept as it
 * is. 0, or -1 out of memory. */
int engine_add(engine *e, const char *file, const char *path, const char *fork, int present);
/* Every .gguf the FORK.json at fork pins, looked for beside near, then in dir. */
void engine_add_fork(engine *e, const char *fork, const char *near, const char *dir);
/* Every *.FORK.json in dir, in name order, through engine_add_fork. */
void engine_add_dir(engine *e, const char *dir, const char *near);
size_t engine_n_entries(const engine *e);
/* 0 with *out filled (strings live as long as the engine), -1 out of range. */
int engine_entry_get(const engine *e, size_t i, engine_entry *out);
/* The startup model (what an empty `model` means). */
size_t engine_default(const engine *e);
void engine_set_default(engine *e, size_t i);
/* The entry `asked` names: NULL or empty is the default; else a name,
 * name:latest or file name, case-insensitively, or the path as given. -1
 * when none. */
/* What llama-server's /v1/models says of a model ("meta"): read from its
 * header when the model is loaded, and kept for the entry after. */
typedef struct {
    int vocab_type;            /* llama_vocab_type: 1 SPM, 2 BPE, 3 WPM, 4 UGM */
    int32_t n_vocab;           /* the vocabulary's tokens */
    size_t n_ctx;              /* cells of one slot (engine_model_n_ctx) */
    uint32_t n_ctx_train;      /* {arch}.context_length */
    uint32_t n_embd;           /* {arch}.embedding_length */
    uint64_t n_params;         /* elements of every tensor in the file */
    uint64_t size;             /* bytes of every tensor */
    const char *ftype;         /* engine_model_ftype's name */
} engine_meta;
/* Entry i's meta: 0, or -1 when i is out of range or its model has not been
 * loaded yet in this process. */
int engine_entry_meta(const engine *e, size_t i, engine_meta *out);

long engine_find(const engine *e, const char *asked);
/* engine_opts.n_ctx and keep_alive_ms as in force. */
size_t engine_n_ctx_opt(const engine *e);
int64_t engine_keep_alive_ms(const engine *e);
/* engine_opts.alias, or NULL when none (or empty) was given. */
const char *engine_alias(const engine *e);

/* ---- what a file's header says (engine/header.c; no lock, nothing mapped) ---- */

/* Whether bankml plays the file at path, from its header alone (the seed's
 * header_info), with the gates model_open passes before it maps the
 * weights: the guard, the architecture / weight-type / graph plan, the
 * sliding-window rule of e's --swa-full, the tokenizer, the chat template
 * (--chat-template's when given) parsing. 1 plays (why ""); 0 with the
 * first reason in why ("the guard refuses it: ...", "bankML's native
 * forward pass does not play it: ...", "cannot read ..."). The sha256 pin
 * is not checked here (a listing does not hash). */
int engine_header_info(const engine *e, const char *path, char *why, size_t whylen);
/* 1 with the reason in why when e refuses a model with a sliding window of
 * n_swa (n_swa > 0 without --swa-full), else 0. */
int engine_swa_refused(const engine *e, unsigned n_swa, char *why, size_t whylen);

/* ---- residency and the lock ---- */

/* Takes the lock, then makes entry idx resident (guard, pin, plan, map,
 * vocabulary, weights, in that order, when it is not; *loaded says so).
 * The model, or NULL with the lock released and er filled. */
engine_model *engine_acquire(engine *e, size_t idx, int *loaded, engine_error *er);
/* Gives the lock back and sets the resident model's expiry: keep_alive_ms
 * from now, 0 unloads it now, < 0 never; ENGINE_KEEP_DEFAULT is the
 * engine's keep_alive_ms from now (the reaper unloads it then, also at 0). */
#define ENGINE_KEEP_DEFAULT INT64_MIN
void engine_release(engine *e, int64_t keep_alive_ms);
/* The resident model to read without the engine lock: entry idx when it
 * is resident and its file unchanged (make_resident's check), with the
 * residency lock held to read; else NULL and nothing held -- not resident
 * (loading it needs engine_acquire, which waits for the engine lock), its
 * file changed (engine_acquire unloads it and says why), or keep_alive_ms
 * 0 (the request unloads the model after: engine_acquire / engine_release).
 * Never waits for a generation; waits only while a model is set or
 * cleared. Only calls taking a const engine_model * may be made on it. */
const engine_model *engine_peek(engine *e, size_t idx, int64_t keep_alive_ms);
/* Lets the peeked model go; the expiry as engine_release sets it (never 0),
 * or left as it is with ENGINE_KEEP_SAME. */
#define ENGINE_KEEP_SAME (INT64_MIN + 1)
void engine_unpeek(engine *e, int64_t keep_alive_ms);
/* Takes or gives back the lock alone (the expiry stays as it is). */
void engine_lock(engine *e);
void engine_unlock(engine *e);
/* The resident entry or -1, the ms until it expires (-1 never) and its
 * context cells (each out may be NULL); takes the residency lock to read
 * (never waits for a generation; not with the residency lock written). */
long engine_resident(const engine *e, int64_t *expires_in_ms, size_t *n_ctx);
/* Starts the thread that unloads an expired model (serve); 0 or -1. */
int engine_start_reaper(engine *e);

/* ---- the resident model (lock held) ---- */

size_t engine_model_entry(const engine_model *m);
size_t engine_model_n_ctx(const engine_model *m);        /* cells of one slot, after rounding (/props n_ctx) */
int engine_model_n_slots(const engine_model *m);          /* slots (-np; /props total_slots) */
int32_t engine_model_n_vocab(const engine_model *m);      /* the output rows */
int32_t engine_model_n_tokens(const engine_model *m);     /* the vocabulary's tokens */
const sampler_params *engine_model_defaults(const engine_model *m);   /* the GGUF's */
const char *engine_model_template(const engine_model *m, size_t *len);
const char *engine_model_bos(const engine_model *m);     /* BOS and EOS pieces */
const char *engine_model_eos(const engine_model *m);
/* llama.cpp's name of the file type ("Q8_0", "(guessed) all F32"; gguf_ftype_name). */
const char *engine_model_ftype(const engine_model *m);
const char *engine_model_sha256(const engine_model *m);  /* the pinned file's, hex */
/* 1 when token id ends generation (llama_vocab_is_eog), else 0. */
int engine_model_is_eog(const engine_model *m, int32_t id);
/* The vocabulary's fill-in-the-middle tokens (-1 each when absent), and
 * 1 when all three of prefix, suffix and middle are there (llama-server's
 * /infill test). */
void engine_model_fim(const engine_model *m, int32_t *pre, int32_t *suf, int32_t *mid);
int engine_model_has_fim(const engine_model *m);
/* Tokens held in the slot the last selection chose (llama-server's
 * tokens_cached), that slot's id (0 before any), and slot i's tokens (0
 * out of range). */
size_t engine_model_n_slot(const engine_model *m);
int engine_model_slot(const engine_model *m);
size_t engine_model_slot_tokens(const engine_model *m, int i);

/* The conversation through the model's template as llama-server renders it
 * (/apply-template), appended to out: with Jinja, or with --no-jinja
 * (engine_opts.no_jinja) in its built-in format (a conversation ending with
 * an assistant message is then continued, without the generation prompt).
 * 0, or -1 with the reason (llama-server's 400), or -2 when --no-jinja has
 * no built-in format for the template (llama-server's 500 "this custom
 * template is not supported, try using --jinja", on every render). */
int engine_render(const engine_model *m, const json_value *messages, jbuf *out, char *err, size_t errlen);
/* The same with the request's template inputs (req: tools, add_generation_prompt, continue_final,
 * prefill_assistant, kwargs, reasoning_effort; its bos/eos members are the model's whatever req says).
 * With --no-jinja, tools are llama-server's 500 "tools param requires --jinja flag" (-2). */
int engine_render_chat(const engine_model *m, const json_value *messages, const template_opts *req, jbuf *out,
                       char *err, size_t errlen);
/* The model template's caps (template_caps, computed when the model was opened; all 0 when the
 * template does not parse), and 1 when the model renders with Jinja (no --no-jinja). */
const tmpl_caps *engine_model_caps(const engine_model *m);
int engine_model_jinja(const engine_model *m);
/* The template's chat format as b11669's common_chat_templates_apply_jinja
 * finds it, computed on first use and kept with the model (it depends on
 * the template only): *spec is chat_specialized(tmpl) (a ca_specialized);
 * for CA_SPEC_NONE the differential autoparser's analysis (chat_analyze
 * with the model's caps, BOS and EOS pieces), or NULL with the reason in
 * *why when the analysis failed (b11669 then refuses every Jinja chat:
 * "Unable to generate parser for this template. Automatic parser
 * generation failed: " + *why). NULL with *why NULL for a specialised
 * template. Lock held (the analysis itself is guarded by the model's
 * chat mutex: filled once, then never changed). */
const chat_analysis *engine_model_chat(engine_model *m, int *spec, const char **why);
/* The generation prompt the template adds to that conversation (llama.cpp's
 * common_chat_template_generation_prompt: the render with it past the
 * longest common prefix of the render without it), appended to out. 0, or
 * -1 with the reason. */
int engine_generation_prompt(const engine_model *m, const json_value *messages, jbuf *out, char *err, size_t errlen);
/* The same with the request's template inputs (engine_render_chat's req:
 * tools, kwargs, reasoning_effort; add_generation_prompt is set for the
 * first render and cleared for the second), as
 * common_chat_template_generation_prompt renders them. */
int engine_generation_prompt_with(const engine_model *m, const json_value *messages, const template_opts *req,
                                  jbuf *out, char *err, size_t errlen);
/* The same through the Jinja engine whatever --no-jinja says (Ollama's
 * routes, which have no such flag). */
int engine_render_jinja(const engine_model *m, const json_value *messages, jbuf *out, char *err, size_t errlen);
/* A prompt's tokens as llama-server tokenizes one: specials parsed, BOS/EOS
 * as the vocabulary says. *ids is malloc'd. */
int engine_tokenize(const engine_model *m, const char *text, size_t len, int32_t **ids, size_t *n, char *err,
                    size_t errlen);
/* Text to tokens with llama-server's /tokenize options: add_special (BOS
 * and EOS as the vocabulary says), parse_special (special-token texts
 * become their ids). *ids malloc'd. */
int engine_tokenize_with(const engine_model *m, const char *text, size_t len, int add_special, int parse_special,
                         int32_t **ids, size_t *n, char *err, size_t errlen);
/* A token's piece appended to out (special: control tokens print their
 * text), and ids[0..n) back to text as llama-server's detokenize does it. */
void engine_piece(const engine_model *m, int32_t id, int special, jbuf *out);
int engine_detokenize(const engine_model *m, const int32_t *ids, size_t n, int remove_special, int unparse_special,
                      jbuf *out, char *err, size_t errlen);

/* The answer's message content as llama-server's chat parser gives it
 * (templates with a <think> block drop leading whitespace; trailing
 * whitespace stays). */
void engine_content(const engine_model *m, const char *s, size_t n, const char **out, size_t *len);
/* 1 when that content (engine_content's) opens a reasoning block on a template with a <think> block: b11669's
 * chat parser answers it as reasoning_content (measured on Qwen3: "<think>abc</think>def" gives reasoning "abc",
 * content "def"; "abc</think>def" stays content), which bankml does not reproduce yet; 2 when it is a proper
 * prefix of "<think>" (a stream holds it back); else 0. */
int engine_reasoning_opened(const engine_model *m, const char *s, size_t n);
#define ENGINE_REASONING_REFUSED "the answer opens a reasoning block (<think>), which b11669's chat parser answers as " \
    "reasoning_content; bankml does not reproduce that parser yet (/completion answers the raw text)"

/* The bankml_receipt object (§2.5) of a finished answer: request_sha256 of
 * body[0..body_len), response_sha256 of text[0..tn), logprobs_sha256 of
 * lp[0..lpn) when has_lp, wall_ms as given. */
struct engine_result;
void engine_receipt(jbuf *b, const engine_model *m, const struct engine_result *r, const char *body, size_t body_len,
                    int64_t wall_ms, const char *text, size_t tn, const char *lp, size_t lpn, int has_lp);

/* ---- one completion ---- */

/* One request, whichever front-end filled it: the llama-server and OpenAI
 * fields (api/llama_req.c), Ollama's options (api/ollama.c) or the command
 * line's flags (cli/generate.c). The engine and the sampler read it;
 * `stream` and `include_usage` are the front-end's own. */
typedef struct {
    const int32_t *prompt;     /* the caller's tokens */
    size_t n_prompt;
    sampler_params sp;         /* resolved over the model's defaults; owned */
    int greedy;                /* plain argmax, no sampler (the CLI's default) */
    int32_t n_predict;         /* -1: no budget */
    const char *stops[ENGINE_MAX_STOPS];   /* stop strings (the caller's bytes) */
    size_t stop_lens[ENGINE_MAX_STOPS];
    size_t n_stops;
    int cache_prompt;          /* reuse the slot's common prefix (llama-server's default 1) */
    int32_t id_slot;           /* the slot asked for (llama-server's id_slot), -1 any */
    int selected;              /* engine_select ran for this prompt already */
    int stream, include_usage; /* the front-end's */
    int verbose;               /* the front-end's: llama-server's `verbose` (__verbose in the answer) */
    sampler_bias *bias;        /* the sampler's first step (logit_bias, ignore_eos's bans); owned */
    size_t n_bias;
    int return_tokens;         /* keep every sampled id in engine_result.gen_ids */
    int ignore_eos, timings_per_token;   /* the front-end's, reported (the bans are in bias) */
    int return_progress;       /* the front-end's: it writes engine_sink.on_progress's events */
    int32_t n_keep, n_discard; /* reported: they act only in context shift, which bankml does not do */
    gr_grammar *grammar;       /* the GBNF grammar the answer obeys (llama-server's `grammar`), NULL none;
                                  owned. It advances on each generated token, never on the prompt's */
    char *grammar_text;        /* the grammar as the request gave it (generation_settings.grammar); owned */
    size_t grammar_len;
    int grammar_lazy;          /* reported (a lazy grammar without triggers never constrains: grammar NULL) */
    gr_lazy *lazy;             /* a lazy grammar's triggers (grammar_lazy with grammar_triggers): the grammar
                                  awaits one before it constrains (gr_state_new_lazy); NULL not lazy; owned */
    gr_trigger *triggers;      /* the triggers as llama-server keeps and reports them (generation_settings.
                                  grammar_triggers; a one-token word became a token trigger); values owned */
    size_t n_triggers;
    int32_t *preserved;        /* preserved_tokens' ids, ascending, unique: each prints its special text
                                  (llama-server's accept_special_token); owned */
    size_t n_preserved;
    /* the reasoning budget (sampling/budget.h), as the completion schema's reasoning_budget_* fields set it:
       the start tag's tokens, the end tags' (empty ones dropped), the forced sequence (the message's tokens and
       the first end tag's; empty unless reasoning_budget_message was given) and the budget (-1 unlimited). The
       sampler exists when start and end are set and the budget is >= 0 or grammar_lazy is on; all owned */
    int32_t *rb_start;
    size_t n_rb_start;
    int32_t **rb_ends;
    size_t *rb_end_lens;
    size_t n_rb_ends;
    int32_t *rb_forced;
    size_t n_rb_forced;
    int32_t rb_tokens;
    int32_t *prefill;          /* the generation prompt's tokens (common_sampler_init's prefill_tokens: specials
                                  parsed, a first token whose piece starts with a space dropped when the prompt
                                  does not): the reasoning budget takes them before the first step, and so does
                                  the grammar when grammar_prefill; owned */
    size_t n_prefill;
    int grammar_prefill;       /* the grammar is the chat layer's (tool calls, response_format) and not lazy:
                                  common_grammar_needs_prefill */
    const char *task_params;   /* the task's params as GET /slots shows them (JSON, the front-end's; copied
                                  when the task starts); NULL: {} */
    size_t task_params_len;
    int64_t id_task;           /* llama-server's task id, taken when a request with several prompts posted all
                                  its tasks at once; -1: engine_complete takes one */
    int n_tasks;               /* the tasks the request's reader waits for (a cancel each); 0 or 1: one */
    int plain_prompt;          /* the prompt is the request's own (llama-server's /completion): no message
                                  spans, so b11669 cuts it only at its checkpoint offsets */
    int chat_delims;           /* the prompt is a Jinja chat of llama-server's /v1/chat/completions: b11669 finds
                                  its message spans by the autoparser's user_start / assistant_start tokens and
                                  cuts the prompt at user messages for checkpoints. A sliding-window model
                                  without --swa-full plays only these two kinds (a specialised template's are
                                  refused) */
} engine_request;

void engine_request_init(engine_request *rq);   /* defaults as llama-server's */
void engine_request_free(engine_request *rq);   /* the sampler params */
/* Frees and clears what a lazy grammar and preserved_tokens set (lazy,
 * triggers, preserved); engine_request_free does it too. */
void engine_request_free_lazy(engine_request *rq);

enum { ENGINE_STOP_NONE = 0, ENGINE_STOP_EOS, ENGINE_STOP_WORD, ENGINE_STOP_LIMIT };

typedef struct {
    int32_t id;
    float p;
} engine_prob;

/* One reported token (llama-server's completion_token_output). */
typedef struct {
    int32_t tok;
    float p;                   /* its probability (post: after the chain) */
    char *text;                /* text released with it (text_to_send) */
    size_t text_len;
    engine_prob *top;          /* the n_probs most likely, when asked */
    size_t n_top;
    int post;                  /* post_sampling_probs */
} engine_token;

/* What a completion did. The engine fills the counts, the stop and the
 * timestamps as it goes, so a sink sees them so far; text, n_sent,
 * stop_word and the reported tokens are filled when the run ends. */
typedef struct engine_result {
    size_t n_prompt, n_cached, n_processed, n_decoded;
    int id_slot;               /* the slot that ran it */
    int stop;                  /* ENGINE_STOP_* */
    int truncated;             /* the context filled */
    int gone;                  /* the sink asked to stop (the client left) */
    size_t stop_word;          /* which stop string matched */
    jbuf text;                 /* the answer (ends before a stop word) */
    size_t n_sent;             /* of it, released to the sink */
    engine_token *probs;       /* the reported tokens, when n_probs > 0 */
    size_t n_probs_out;
    int32_t *gen_ids;          /* every sampled id, when rq->return_tokens */
    size_t n_gen_ids;
    int64_t t_start, t_prompt_last, t_gen_last, t_first_text;   /* bk_mono_us */
} engine_result;

void engine_result_free(engine_result *r);
/* "stop" or "length", as OpenAI's finish_reason. */
const char *engine_finish(const engine_result *r);

/* The prompt's progress, as llama-server b11669's prompt_progress reports
 * it: the prompt's tokens (total), those kept from the slot (cache, its
 * n_prompt_cached), those in the slot now (processed: cache + evaluated so
 * far) and the ms since the completion started (time_ms, t_elapsed_us /
 * 1000, truncated). */
typedef struct {
    size_t total, cache, processed;
    int64_t time_ms;
} engine_progress;

/* Where the tokens go. on_token gets each token whose text is complete
 * (stop_now: a stop word already decided the end); nonzero stops the run
 * and sets gone. cancelled, polled between steps, does the same (may be
 * NULL). on_progress (may be NULL)
 * is called where b11669 sends a progress event: once before the prompt's
 * first decode call (processed = cache) and after each decode call of the
 * prompt (n_batch tokens; the last one before the first token's on_token);
 * so_far then holds n_cached, n_processed (the tokens evaluated so far) and
 * t_prompt_last (the end of the last call; 0 before the first), so
 * llama_put_timings gives the timings b11669 attaches to it. Nonzero
 * stops the run as on_token's does. */
typedef struct {
    int (*on_token)(void *ud, const engine_token *t, int stop_now, const engine_result *so_far);
    int (*cancelled)(void *ud);
    void *ud;
    int (*on_progress)(void *ud, const engine_progress *p, const engine_result *so_far);
} engine_sink;

/* llama-server's slot selection for a prompt (get_available_slot), and the
 * slot's id, which the next engine_complete runs in:
 *   - id_slot != -1 asks for slot (size_t)id_slot % n_slots (llama-server
 *     wraps any value; -3 of 2 slots is slot 1);
 *   - among the slots holding tokens (only the asked one when id_slot is in
 *     range, none when it is not), the one whose common prefix is the
 *     largest fraction of the prompt above --slot-prompt-similarity (0.10);
 *     the host prompt cache is updated when that slot would keep less than
 *     half of its tokens;
 *   - else the least recently used slot (never used first, then the lowest
 *     id), and the cache is updated;
 *   - updating the cache: the slot is saved, and a saved prompt that serves
 *     the new one better than the slot does is restored into it;
 *   - then every other slot is saved to the cache (--cache-idle-slots, on
 *     with --cache-ram).
 * engine_complete does it unless rq->selected. */
int engine_select(engine *e, engine_model *m, const int32_t *prompt, size_t n, int32_t id_slot);

/* Runs rq in the chosen slot: reuse, the prompt in decode calls of n_batch
 * tokens (min(-c, -b)), each in micro-batches of n_ubatch, then one token
 * per step with llama-server's stop-word, context and budget checks. 0 with
 * *res filled (also when the sink stopped it: res->gone), or -1 with er
 * (the model failed; the slot is then emptied). The caller frees res. */
int engine_complete(engine *e, engine_model *m, const engine_request *rq, const engine_sink *sink,
                    engine_result *res, engine_error *er);

/* ---- llama-server's task ids and GET /slots (the counters' lock: never waits for a generation) ---- */

/* Reserves n of llama-server's task ids (its queue's counter, from 0) and
 * returns the first. b11669 (measured) takes one for each GET /slots,
 * /metrics (with --metrics), slot action and completion task (also one
 * refused by its fields), one for each decode step while a slot works (its
 * NEXT_RESPONSE task), one for a cancel; engine_complete takes the
 * completion's own and its steps' ids, the front-ends the rest. */
int64_t engine_task_ids(engine *e, int n);

/* One slot as GET /slots shows it (server_slot::to_json). */
typedef struct {
    int processing;            /* a task runs in it */
    int has_task;              /* it ran one (task or task_prev): the members below are shown */
    int64_t id_task;
    size_t n_tokens;           /* tokens it holds (n_prompt_tokens) */
    size_t n_processed, n_cached, n_decoded;   /* the running task's; 0 once it ended (llama-server's reset) */
    int32_t n_remain;          /* n_predict - n_decoded while it runs, -1 when unbounded or ended */
    int has_next_token, has_new_line;
    char *params;              /* the task's params JSON (malloc'd copy), "{}" when the front-end gave none */
} engine_slot_info;

/* Every slot of the resident (or last resident) model, without the engine
 * lock: up to max into out, each slot's context cells in *n_ctx. The count
 * (0 before any model was loaded). Free with engine_slot_info_free. */
int engine_slots_info(engine *e, engine_slot_info *out, int max, size_t *n_ctx);
void engine_slot_info_free(engine_slot_info *s, int n);

/* A task refused after its slot was chosen (llama-server's context check:
 * the prompt does not fit): its id and the two b11669 takes after it, and
 * the slot shows it as its last task (lock held; after engine_select). */
void engine_task_refused(engine *e, engine_model *m, const engine_request *rq);

/* ---- slot files: llama-server's POST /slots/:id (engine/slotfile.c, lock held) ---- */

/* llama.cpp's fs_validate_filename (subdirectories not allowed): 1 when
 * name[0..len) may name a slot file, else 0. */
int engine_filename_valid(const char *name, size_t len);

typedef struct {
    size_t n_tokens;           /* n_saved / n_restored: the slot's tokens */
    size_t n_bytes;            /* n_written / n_read: the ggsq file's bytes */
    double ms;                 /* save_ms / restore_ms */
} engine_slot_io;

/* Slot (size_t)id % slots (llama-server wraps any id) written to path as
 * b11669's llama_state_seq_save_file writes it (ggsq v4: the packed token
 * list, then this sequence's cells and f16 K and V rows, one stream per
 * slot), atomically (a temporary name beside it, fsync, rename), then its
 * sidecar path + ".bankml.json" (the model's sha256, the slot context, the
 * cache type, the file's sha256), atomically too. 0, or -1 with er
 * (ENGINE_INTERNAL: "Unable to save slot: <reason>"). */
int engine_slot_save(engine *e, engine_model *m, int id, const char *path, engine_slot_io *out, engine_error *er);
/* Reads path back into the slot: b11669's structural checks, and bankml's
 * own (the sidecar's model sha256, context and cache type and the file's
 * sha256 when the sidecar is there; the cells in position order, as many
 * as the tokens, no trailing bytes, every token in the vocabulary). On any
 * refusal the slot is emptied and er says "Unable to restore slot: <reason>"
 * (ENGINE_BAD_INPUT). The restored tokens are the slot's cached prefix. */
int engine_slot_restore(engine *e, engine_model *m, int id, const char *path, engine_slot_io *out,
                        engine_error *er);
/* Empties the slot; the tokens it held. */
size_t engine_slot_erase(engine *e, engine_model *m, int id);

/* ---- counters (their own lock: a scrape never waits for a generation) ---- */

#define ENGINE_KEEP_RECORDS 256

typedef struct {
    int64_t at;                /* unix s */
    char model[256];
    size_t prompt, cached, completion;
    double prompt_ms, ttft_ms, eval_ms;   /* < 0: not measured */
    double energy_j;           /* the package's RAPL energy over the completion; < 0: not readable */
    const char *finish;
} engine_record;

typedef struct {
    uint64_t count, steps, us;
} engine_bucket;

typedef struct {
    int64_t t_start;           /* unix s */
    engine_bucket prompt, predict, prompt_win, predict_win;
    uint64_t cached, n_decode, n_busy, n_tokens_max;
    int processing, deferred;
    uint64_t tot_prompt, tot_completion;
    double tot_energy_j;       /* over the completions whose energy was read */
    uint64_t tot_energy_tokens;   /* their completion tokens */
    size_t n_rec;
    engine_record ring[ENGINE_KEEP_RECORDS];   /* oldest first */
} engine_metrics;

/* The package's RAPL energy counter in microjoules (intel-rapl:0's
 * energy_uj under /sys/class/powercap, or $BANKML_RAPL_DIR for tests) and,
 * in *range when not NULL, the value where it wraps (max_energy_range_uj, 0
 * when unknown). -1 when unreadable (no RAPL, no permission). */
long long engine_rapl_uj(long long *range);
/* A copy of the counters; reset_window empties the two rate buckets
 * (llama-server does at each /metrics scrape). */
void engine_metrics_get(engine *e, engine_metrics *out, int reset_window);
/* tokens per second of a bucket (0 when empty) */
double engine_bucket_rate(const engine_bucket *b);

/* What /bankml reports of the engine (the residency lock taken inside, to read; never the engine lock): the last
 * verification's JSON (malloc'd, the caller frees it; NULL before one), its
 * sha256 hex ("" before) and unix time (0 before), the resident entry. */
typedef struct {
    char *verified_json;
    char last_sha[65];
    int64_t hashed_at;
    long resident;             /* entry, or -1 */
} engine_status_info;
void engine_status_get(engine *e, engine_status_info *out);

/* ---- the pure rules, exposed for the unit tests ---- */

/* llama-server's slot reuse: how many of the slot's tokens a new prompt
 * keeps. The longest common prefix, one less when it covers the whole
 * prompt (at least one token is evaluated), 0 when cache_prompt is off. */
size_t engine_reuse(const int32_t *slot, size_t n_slot, const int32_t *prompt, size_t n_prompt, int cache_prompt);

/* llama-server's validate_utf8: the length of the longest prefix of s[0..n)
 * that does not end inside an incomplete UTF-8 sequence. */
size_t engine_utf8_complete(const char *s, size_t n);

/* string_find_partial_stop: the position where a suffix of text[0..n) that
 * is a proper-or-whole prefix of word begins, or (size_t)-1. */
size_t engine_partial_stop(const char *text, size_t n, const char *word, size_t wn);

/* Stop-string state of one answer, as llama-server's process_token keeps
 * it: the generated text, how much of it was sent, the matched word. */
typedef struct {
    jbuf text;                 /* slot.generated_text */
    size_t n_sent;             /* slot.n_sent_text */
    const char *const *stops;
    const size_t *stop_lens;
    size_t n_stops;
    int stopped;               /* a stop word matched */
    size_t stop_word;          /* its index */
} engine_stopper;

void engine_stopper_init(engine_stopper *s, const char *const *stops, const size_t *lens, size_t n);
void engine_stopper_free(engine_stopper *s);
/* One token's piece appended (is_eog: the token ends generation, so nothing
 * is held back). Returns 1 and sets *send and *send_len to the text released
 * now (possibly empty) when the text has no incomplete UTF-8 at its end,
 * else 0 (nothing released; the token is not reported). After a stop word
 * matched, s->stopped is 1 and the text ends before it. */
int engine_stopper_push(engine_stopper *s, const char *piece, size_t n, int is_eog, const char **send,
                        size_t *send_len);

/* Registry names (§2.7): a file's name is its stem lower-cased. 1 when
 * `asked` names `file` (the name, the name + ":latest", or the file name,
 * case-insensitively), else 0. */
void engine_model_name(const char *file, char *out, size_t outlen);
int engine_name_matches(const char *file, const char *asked);
/* The length of name without its weight-type suffix ("-q8_0", "-f16",
 * "-q4_k_m", "-bf16", ... case-insensitive; the seed's list and the types
 * bankml plays), or len when it has none. */
size_t engine_name_base(const char *name, size_t len);

#endif
