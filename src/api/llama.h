/*
 * llama.h -- llama-server b11669's HTTP API on the engine (api/llama.c):
 * its routes, their request fields (api/llama_req.c) and answer shapes
 * (api/llama_out.c), registered on a serve.c server.
 */
#ifndef BANKML_LLAMA_H
#define BANKML_LLAMA_H

#include "api/serve.h"
#include "engine/engine.h"

typedef struct llama_api llama_api;

/* Registers /v1/chat/completions, /completion, /tokenize, /detokenize,
 * /apply-template, /props, /health, /v1/models and the 404 handler on srv,
 * answering from e. The handle lives until llama_api_free (after the
 * server stops). NULL out of memory. */
llama_api *llama_api_register(serve_server *srv, engine *e);
void llama_api_free(llama_api *api);

/* api/llama_compat.c, registered by llama_api_register: /v1/completions,
 * /v1/responses, /v1/messages and /v1/messages/count_tokens on the same
 * slot, and llama-server's refusals of /embedding(s), /rerank, /infill
 * (without FIM tokens) and POST /props. The handle, freed
 * by llama_compat_free; NULL out of memory. lo: the command line's defaults
 * for these routes too (read at each request, so it may be set later). */
struct llama_api_opts_s;
void *llama_compat_register(serve_server *srv, engine *e, const struct llama_api_opts_s *lo);
void llama_compat_free(void *compat);

/* api/llama_slots.c, registered by llama_api_register: GET /slots (lo->slots
 * 0: llama-server's 501) and POST /slots/:id?action=save|restore|erase
 * (lo->slot_save_path NULL: its 501). NULL out of memory. */
void *llama_slots_register(serve_server *srv, engine *e, const struct llama_api_opts_s *lo);
void llama_slots_free(void *slots);

/* api/llama_gcp.c: llama-server's Vertex AI route (AIP_MODE=PREDICTION),
 * POST predict_route answering {"predictions": [...]} through the routes
 * registered on srv so far (llama-server's; not /api/ or /bankml). Called
 * by llama_api_configure. NULL with the reason in err: the route is one
 * already registered (b11669's start error), or out of memory. */
void *llama_gcp_register(serve_server *srv, engine *e, const char *predict_route, char *err, size_t errlen);
void llama_gcp_free(void *gcp);

/* What llama-server's command line sets for these routes (bankml serve's
 * flags, cli/serve_cmd.c). */
typedef struct llama_api_opts_s {
    /* The server-wide sampling defaults (--temp, --seed, --top-k, ...) as
     * request fields, a JSON object read over each model's GGUF defaults
     * before the request's own fields (so a flag beats general.sampling.*,
     * a request field beats both, as in llama-server); NULL: none. */
    const json_value *sampling;
    int dry_no_breakers;       /* --dry-sequence-breaker none: the defaults' breakers cleared */
    int32_t n_predict;         /* -n: the budget of a request without n_predict; -1 none */
    int64_t keep_ms;           /* the model's expiry after a llama-server route: -1 never (llama-server's);
                                  --sleep-idle-seconds N: N s; an explicit --keep-alive: its value */
    int models_max;            /* --models-max (router /props' max_instances; default 4) */
    int models_autoload;       /* --models-autoload (default on; router /props' models_autoload) */
    int sleep;                 /* --sleep-idle-seconds given: /props and /v1/models answer from what the last
                                  load showed while the model sleeps, and /props says is_sleeping */
    const json_value *aliases; /* --alias: the names, sorted, each once (an array of strings), or NULL */
    const json_value *tags;    /* --tags: the same for the informational tags */
    int metrics;               /* --metrics: /metrics is served; else llama-server's 501 */
    int slots;                 /* --slots (the default); --no-slots: GET /slots answers llama-server's 501 */
    int props;                 /* --props (refused by the command line today): POST /props allowed, else 501 */
    int reasoning_format;      /* --reasoning-format as a chat_reasoning_format (text/chat_gen.h): the chat
                                  parser's default (llama_api_opts_init: deepseek, b11669's default) */
    int32_t reasoning_budget;  /* --reasoning-budget: a chat's budget when the request gives none (-1 none) */
    const char *reasoning_budget_message;   /* --reasoning-budget-message, NULL none */
    const char *slot_save_path;   /* --slot-save-path / --slot-dir, ending with '/': slot files go there; NULL: 501 */
    /* --grammar / --grammar-file / -j / -jf: the server-wide grammar (a schema already converted to GBNF),
     * the grammar of every request that brings none (no non-empty `grammar`, no `json_schema` outside
     * chat), as common_params.sampling.grammar is in llama-server; NULL: none */
    const char *grammar;
    size_t grammar_len;
    int grammar_prefill;       /* -j / -jf: an output-format grammar, which llama-server feeds a chat's
                                  generation prompt before the answer (common_grammar_needs_prefill) */
    /* AIP_MODE=PREDICTION (Vertex AI): the predict route (AIP_PREDICT_ROUTE, default /predict) and the
     * extra health route (AIP_HEALTH_ROUTE, "" none); gcp_predict NULL: off */
    const char *gcp_predict, *gcp_health;
    /* -l/--logit-bias (each given once or more, in order, ids not checked: b11669 keeps an id outside the
     * vocabulary, which biases nothing): a request without logit_bias (or with null) gets these */
    const sampler_bias *logit_bias;
    size_t n_logit_bias;
    int verbose;               /* -v/--verbose or -lv over 9: a request's `verbose` defaults to true (b11669's
                                  params_base.verbosity > 9), so chat and /v1/completions answers carry __verbose */
} llama_api_opts;

/* With --sleep-idle-seconds: builds /props once with the startup model
 * (loading it if it is not resident), so /props can answer while it sleeps
 * before anyone asked it awake. Call before the server listens. 0, or -1. */
int llama_api_prime(llama_api *api);
/* llama-server's defaults: no sampling flags, n_predict -1, no expiry, no alias, slots on, metrics and props off. */
void llama_api_opts_init(llama_api_opts *o);
/* Takes o (copied; its pointers must outlive the server) and registers the
 * routes it switches: POST /props's 501 without --props, the Vertex AI
 * routes with o->gcp_predict. Call before the server listens, after the
 * other llama-server routes. 0, or -1 after printing why on stderr (out of
 * memory, a predict route that is taken). */
int llama_api_configure(llama_api *api, const llama_api_opts *o);
/* common_reasoning_format_from_name: 0 and *out (a chat_reasoning_format of
 * text/chat_gen.h: none, auto, deepseek, deepseek-legacy), or -1 for
 * another name (llama-server's "Unknown reasoning format"). */
int llama_reasoning_format_from_name(const char *s, int *out);
/* The command line's sampling defaults over the model's: into out
 * (uninitialised; free it with sampler_params_free whatever the result). 0,
 * or -1 with the reason. o may be NULL. */
int llama_defaults(const llama_api_opts *o, const engine_model *m, sampler_params *out, char *err, size_t errlen);

#endif
