/*
 * llama_fields.c -- the one table of every request field llama-server
 * b11669 reads on its completion routes, each reproduced, accepted or
 * refused, and the reading of the fields bankml reproduces here
 * (logit_bias, ignore_eos, return_tokens, n_keep, n_discard,
 * timings_per_token, return_progress). See llama_json.h.
 *
 * Where the fields come from: server-schema.cpp's completion schema (every
 * route: /completion, /v1/completions, /v1/chat/completions after the
 * OpenAI mapping copies the body through), server-common.cpp's
 * oaicompat_chat_params_parse (the chat route's own), server-context.cpp
 * (id_slot, message_delimiters). A field a route does not read cannot
 * change that route's answer, so the table names the routes.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "api/llama.h"
#include "api/llama_json.h"
#include "sampling/json_schema.h"
#include "sampling/regex.h"

/* ---- nlohmann's readings, shared with llama_req.c ---- */

const char *llama_jtype(const json_value *v)
{
    switch (v->type) {
    case JSON_NULL: return "null";
    case JSON_FALSE: case JSON_TRUE: return "boolean";
    case JSON_NUMBER: return "number";
    case JSON_STRING: return "string";
    case JSON_ARRAY: return "array";
    default: return "object";
    }
}

/* field_bool of llama-server's schema: null is absent. */
int llama_field_bool(const json_value *o, const char *name, int *val, char *err, size_t errlen)
{
    const json_value *v = json_get(o, name);
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type != JSON_TRUE && v->type != JSON_FALSE) {
        bk_err(err, errlen, "Field '%s': [json.exception.type_error.302] type must be boolean, but is %s", name,
                llama_jtype(v));
        return -1;
    }
    *val = v->type == JSON_TRUE;
    return 0;
}

/* A token id as nlohmann's get<llama_token>() reads a number or a boolean
 * (fractions truncated, wider integers cut to 32 bits); v is one of those. */
int32_t llama_token_id(const json_value *v)
{
    int64_t x;
    if (v->type != JSON_NUMBER) return v->type == JSON_TRUE;
    if (json_as_i64(v, &x)) return (int32_t)(uint32_t)(uint64_t)x;
    double d = strtod(v->str, NULL);
    return d > -2147483649.0 && d < 2147483648.0 ? (int32_t)d : INT32_MIN;
}

/* ---- what "absent" is, per field (null is always absent) ---- */

static int is_false(const json_value *v) { return v->type == JSON_FALSE; }
static int is_empty_string(const json_value *v) { return v->type == JSON_STRING && v->len == 0; }
static int is_empty_array(const json_value *v) { return v->type == JSON_ARRAY && v->n == 0; }
static int never(const json_value *v) { (void)v; return 0; }
static int is_zero(const json_value *v) { return v->type == JSON_NUMBER && strtod(v->str, NULL) == 0.0; }
static int not_positive(const json_value *v) { return v->type == JSON_NUMBER && strtod(v->str, NULL) <= 0.0; }

static int field_str_is(const json_value *v, const char *s)
{
    return v && v->type == JSON_STRING && v->len == strlen(s) && !memcmp(v->str, s, v->len);
}

/* reasoning_format: the server's default, "deepseek", is what bankml prints */
static int is_deepseek(const json_value *v) { return field_str_is(v, "deepseek"); }


/* chat_format 0 is COMMON_CHAT_FORMAT_CONTENT_ONLY, the only one bankml has */
static int is_content_only(const json_value *v) { return is_zero(v) || is_false(v); }

#define R_CMPL LLAMA_ROUTE_COMPLETION
#define R_CHAT LLAMA_ROUTE_CHAT
#define R_OAI LLAMA_ROUTE_OAI_COMPLETIONS
#define R_ALL (R_CMPL | R_CHAT | R_OAI)

#define REP LLAMA_FIELD_REPRODUCED
#define ACC LLAMA_FIELD_ACCEPTED
#define REF LLAMA_FIELD_REFUSED

/* The table. `absent` is NULL for reproduced and accepted fields; for a
 * refused one it says which values llama-server treats as absent (those
 * pass), every other value is refused with `words`. */
static const llama_field FIELDS[] = {
    /* the prompt */
    {"prompt", R_CMPL | R_OAI, REP, "llama_req.c llama_read_prompts (tokenize_input_prompts): a string, ids, both "
                                    "mixed, {prompt_string}; an array without integers is several prompts, run one "
                                    "after another (llama.c run_prompts; -np 1 only)", NULL},
    {"messages", R_CHAT, REP, "llama_req.c llama_check_messages, then engine_render (the model's template)", NULL},
    {"model", R_ALL, ACC, "names the model in bankml's registry (engine_find); the answer is the model's", NULL},
    {"user", R_ALL, ACC, "an OpenAI label llama-server never reads", NULL},
    /* the transport */
    {"stream", R_ALL, REP, "llama.c: server-sent events as llama-server writes them", NULL},
    {"stream_options", R_ALL, REP, "include_usage: the usage chunk before [DONE] (llama.c)", NULL},
    {"cache_prompt", R_ALL, REP, "engine_reuse: the slot's common prefix", NULL},
    {"sse_ping_interval", R_ALL, ACC, "SSE comment lines while a stream is silent; clients skip them, "
                                      "the events are the same", NULL},
    {"verbose", R_CHAT | R_OAI, REP, "llama_req.c (default: -v/--verbose or -lv over 9): the answer's __verbose, "
                                     "/completion's object for the task (llama_put_native_final, llama_put_native_"
                                     "partial; response_fields selects its members), on the final answer and, "
                                     "streamed, on /v1/completions' every event and chat's finish chunk", NULL},
    {"verbose", R_CMPL, ACC, "b11669 adds no __verbose to /completion's answer, which is that object already", NULL},
    {"timings_per_token", R_ALL, REP, "streamed: `timings` on every partial event as b11669 places them "
                                      "(llama_partial_timed; progress events too); generation_settings."
                                      "timings_per_token (llama_put_gen_settings)", NULL},
    {"return_tokens", R_ALL, REP, "the final answer's `tokens`: every sampled id (engine_result.gen_ids)", NULL},
    {"return_progress", R_ALL, REP, "streamed: b11669's prompt_progress events before the first decode call "
                                    "and after each (engine_sink.on_progress); no effect without stream", NULL},
    {"response_fields", R_CMPL, REP, "the final answer's members selected by path (llama_select_fields), as "
                                     "json_get_nested_values; not an array of strings: no selection", NULL},
    {"response_fields", R_CHAT | R_OAI, ACC, "b11669 selects members of /completion's answer only", NULL},
    /* the budget and the context */
    {"n_predict", R_ALL, REP, "llama_req.c (aliases max_completion_tokens, max_tokens), the engine's budget", NULL},
    {"max_completion_tokens", R_ALL, REP, "alias of n_predict", NULL},
    {"max_tokens", R_ALL, REP, "alias of n_predict", NULL},
    {"n_cmpl", R_ALL, REP, "1, as llama-server -np 1 limits it (llama_req.c)", NULL},
    {"n", R_ALL, REP, "alias of n_cmpl", NULL},
    {"n_keep", R_ALL, REP, "generation_settings.n_keep; it acts only in context shift, off in b11669 by default "
                           "and absent from bankml", NULL},
    {"n_discard", R_ALL, REP, "generation_settings.n_discard; context shift only, as n_keep", NULL},
    {"n_indent", R_ALL, REF, "n_indent: stopping at an indentation limit is not reproduced yet; send the "
                             "request without it", is_zero},
    {"n_cache_reuse", R_ALL, REF, "n_cache_reuse: KV-shifted chunk reuse is not reproduced; send the request "
                                  "without it", is_zero},
    {"t_max_predict_ms", R_ALL, REF, "t_max_predict_ms: a time limit makes the answer depend on the machine's "
                                     "speed, so it is not reproduced; send the request without it", not_positive},
    {"id_slot", R_ALL, REP, "llama_read_request; engine_select takes slot (size_t)id_slot % -np, as "
                            "get_available_slot", NULL},
    {"stop", R_ALL, REP, "the engine's stop strings (engine_stopper)", NULL},
    /* the sampler (sampler.c sampler_resolve reads them in llama-server's order) */
    {"top_k", R_ALL, REP, "sampler_resolve", NULL},
    {"top_p", R_ALL, REP, "sampler_resolve", NULL},
    {"min_p", R_ALL, REP, "sampler_resolve", NULL},
    {"top_n_sigma", R_ALL, REP, "sampler_resolve", NULL},
    {"xtc_probability", R_ALL, REP, "sampler_resolve", NULL},
    {"xtc_threshold", R_ALL, REP, "sampler_resolve", NULL},
    {"typical_p", R_ALL, REP, "sampler_resolve", NULL},
    {"temperature", R_ALL, REP, "sampler_resolve", NULL},
    {"dynatemp_range", R_ALL, REP, "sampler_resolve", NULL},
    {"dynatemp_exponent", R_ALL, REP, "sampler_resolve", NULL},
    {"repeat_last_n", R_ALL, REP, "sampler_resolve", NULL},
    {"repeat_penalty", R_ALL, REP, "sampler_resolve", NULL},
    {"frequency_penalty", R_ALL, REP, "sampler_resolve", NULL},
    {"presence_penalty", R_ALL, REP, "sampler_resolve", NULL},
    {"dry_multiplier", R_ALL, REP, "sampler_resolve", NULL},
    {"dry_base", R_ALL, REP, "sampler_resolve", NULL},
    {"dry_allowed_length", R_ALL, REP, "sampler_resolve", NULL},
    {"dry_penalty_last_n", R_ALL, REP, "sampler_resolve", NULL},
    {"dry_sequence_breakers", R_ALL, REP, "sampler_resolve", NULL},
    {"mirostat", R_ALL, REP, "sampler_resolve: 0 reproduced, 1 and 2 refused there with the reason", NULL},
    {"mirostat_tau", R_ALL, REP, "sampler_resolve", NULL},
    {"mirostat_eta", R_ALL, REP, "sampler_resolve", NULL},
    {"adaptive_target", R_ALL, REP, "sampler_resolve", NULL},
    {"adaptive_decay", R_ALL, REP, "sampler_resolve", NULL},
    {"seed", R_ALL, REP, "sampler_resolve (mt19937 as llama.cpp)", NULL},
    {"n_probs", R_ALL, REP, "sampler_resolve, the answers' completion_probabilities", NULL},
    {"logprobs", R_ALL, REP, "chat: OpenAI's mapping (sampler_oai_logprobs); else alias of n_probs", NULL},
    {"top_logprobs", R_CHAT, REP, "sampler_oai_logprobs", NULL},
    {"min_keep", R_ALL, REP, "sampler_resolve", NULL},
    {"post_sampling_probs", R_ALL, REP, "sampler_resolve, sampler_post_probs", NULL},
    {"samplers", R_ALL, REP, "sampler_resolve: the default order reproduced, another refused there", NULL},
    {"backend_sampling", R_ALL, REF, "backend_sampling: sampling on the backend is not reproduced; send the "
                                     "request without it", is_false},
    {"logit_bias", R_ALL, REP, "llama_fields_read: every form llama-server reads, into the sampler's first "
                               "step (sampler_bias)", NULL},
    {"ignore_eos", R_ALL, REP, "llama_fields_read: every end-of-generation token biased to -inf after "
                               "logit_bias's, as llama-server appends them", NULL},
    {"lora", R_ALL, REF, "lora: LoRA adapters are not reproduced; send the request without it", is_empty_array},
    /* constrained generation (issue #16) */
    {"grammar", R_ALL, REP, "llama_fields_read: GBNF (sampling/grammar.c), applied as common_sampler_sample "
                            "applies it; a string, anything else is absent", NULL},
    {"json_schema", R_CMPL | R_OAI, REP, "llama_fields_read: converted by json_schema_to_gbnf (sampling/"
                                         "json_schema.c) into the grammar it reports; never read when the "
                                         "body has `grammar`", NULL},
    {"json_schema", R_CHAT, REP, "llama_chat.c llama_chat_prepare: the chat inputs' json_schema (response_format's "
                                 "replaces it), the template's parser and grammar (chat_gen)", NULL},
    {"grammar_lazy", R_CMPL | R_OAI, REP, "llama_fields_read: a boolean; with grammar_triggers the grammar "
                                          "awaits one before it constrains (gr_state_new_lazy); without, it "
                                          "never constrains; reported", NULL},
    {"grammar_lazy", R_CHAT, ACC, "the chat layer replaces it with the template's (llama_chat.c) before it is read",
     NULL},
    {"grammar_triggers", R_CMPL | R_OAI, REP, "llama_fields_read read_triggers: every type (token, word, "
                                              "pattern, full pattern) with b11669's errors, a one-token word "
                                              "made a token trigger; patterns matched as std::regex "
                                              "(sampling/regex.c), refused with the reason where bankml does not "
                                              "reproduce them; reported", NULL},
    {"grammar_triggers", R_CHAT, ACC, "the chat layer replaces them with the template's (llama_chat.c) before they are "
                                      "read", NULL},
    {"preserved_tokens", R_CMPL | R_OAI, REP, "llama_fields_read read_preserved: each one-token string's id; "
                                              "those tokens print their special text; reported", NULL},
    {"preserved_tokens", R_CHAT, ACC, "the chat layer replaces them with the template's before they are read",
     NULL},
    {"response_format", R_CHAT, REP, "llama_chat.c lc_schema: json_object (its schema, or any object) and "
                                     "json_schema (json_schema.schema), through the template's parser and grammar "
                                     "(chat_gen); the answer parsed (llama_chat_update)", NULL},
    /* the chat format and its parser */
    {"chat_format", R_ALL, REF, "chat_format: only the content-only format (0) is reproduced; send the request "
                                "without it", is_content_only},
    {"reasoning_format", R_CMPL | R_OAI, REF, "reasoning_format: only the server's default, \"deepseek\", is "
                                              "reproduced; send the request without it", is_deepseek},
    {"reasoning_format", R_CHAT, REP, "llama_chat.c llama_chat_prepare: none, auto, deepseek, deepseek-legacy "
                                      "(b11669's words for another), the parser's reasoning extraction", NULL},
    {"generation_prompt", R_ALL, REF, "generation_prompt: a generation prompt for the chat parser is not "
                                      "reproduced; send the request without it", is_empty_string},
    {"parse_tool_calls", R_CMPL | R_OAI, REF, "parse_tool_calls: tool calls are not parsed on this route; send "
                                              "the request without it", is_false},
    {"parse_tool_calls", R_CHAT, ACC, "b11669's PEG chat parser never reads it (the template's parser decides)",
     NULL},
    {"chat_parser", R_ALL, REF, "chat_parser: chat parsers are not reproduced yet; send the request without it",
     never},
    {"echo", R_ALL, REF, "echo: echoing the prompt is not reproduced; send the request without it", is_false},
    {"message_delimiters", R_ALL, REF, "message_delimiters: not reproduced; send the request without it",
     is_empty_array},
    {"reasoning_control", R_ALL, REF, "reasoning_control: ending the reasoning at run time (llama-server's "
                                      "reasoning_end control) is not reproduced yet; send the request without it",
     is_false},
    {"reasoning_budget_tokens", R_CMPL | R_OAI, REP, "llama_fields_read read_budget: -1..2147483647 (llama-server's "
                                                     "hard-limit words), the budget (sampling/budget.c)", NULL},
    {"reasoning_budget_tokens", R_CHAT, REP, "llama_chat.c lc_overlay: the budget with the template's thinking "
                                             "tags (else --reasoning-budget), as llama_params sets it", NULL},
    {"thinking_budget_tokens", R_CHAT, REP, "llama_chat.c lc_overlay: reasoning_budget_tokens' fallback", NULL},
    {"reasoning_budget_start_tag", R_CMPL | R_OAI, REP, "llama_fields_read read_budget: the start sequence's tokens "
                                                        "(specials parsed)", NULL},
    {"reasoning_budget_start_tag", R_CHAT, REP, "llama_chat.c lc_overlay: the template's thinking tags replace the "
        "budget's when it has them; else read as on /completion", NULL},
    {"reasoning_budget_end_tags", R_CMPL | R_OAI, REP, "llama_fields_read read_budget: the end sequences (empty ones "
                                                       "dropped); the first one is forced", NULL},
    {"reasoning_budget_end_tags", R_CHAT, REP, "llama_chat.c lc_overlay: the template's thinking tags replace the "
        "budget's when it has them; else read as on /completion", NULL},
    {"reasoning_budget_end_tag", R_CMPL | R_OAI, REP, "llama_fields_read read_budget: reasoning_budget_end_tags' "
                                                      "alias", NULL},
    {"reasoning_budget_end_tag", R_CHAT, REP, "llama_chat.c lc_overlay: the template's thinking tags replace the "
        "budget's when it has them; else read as on /completion", NULL},
    {"reasoning_budget_message", R_CMPL | R_OAI, REP, "llama_fields_read read_budget: its tokens before the first "
                                                      "end tag's make the forced sequence (absent: nothing forced)",
     NULL},
    {"reasoning_budget_message", R_CHAT, REP, "llama_chat.c lc_overlay: the template's thinking tags replace the "
        "budget's when it has them; else read as on /completion", NULL},
    /* the chat route's own (oaicompat_chat_params_parse) */
    {"tools", R_CHAT, REP, "llama_req.c llama_read_chat_inputs (common_chat_tools_parse_oaicompat), rendered by the "
                           "template; with tool_choice other than \"none\" the template's tool-call grammar and "
                           "parser (llama_chat.c; a template with a specialised parser refused there)", NULL},
    {"tool_choice", R_CHAT, REP, "llama_req.c llama_read_chat_inputs (auto, none, required; its 400)", NULL},
    {"parallel_tool_calls", R_CHAT, REP, "llama_chat.c llama_chat_prepare: a boolean, default the template's "
                                         "supports_parallel_tool_calls; the parser and grammar take it", NULL},
    {"add_generation_prompt", R_CHAT, REP, "llama_req.c llama_read_chat_inputs, then the template", NULL},
    {"continue_final_message", R_CHAT, REP, "llama_req.c llama_read_chat_inputs, template_continuation (a "
                                            "continuation on a template with reasoning markers or a dedicated "
                                            "handler is refused by the template layer with its reason)", NULL},
    {"chat_template_kwargs", R_CHAT, REP, "llama_req.c llama_read_chat_inputs: the template's extra context "
                                          "(enable_thinking among them)", NULL},
    {"reasoning_effort", R_CHAT, REP, "llama_req.c llama_read_chat_inputs: the template's reasoning_effort "
                                      "(\"none\": enable_thinking false)", NULL},
};

const llama_field *llama_fields(size_t *n)
{
    *n = sizeof FIELDS / sizeof FIELDS[0];
    return FIELDS;
}

unsigned llama_route_bit(const char *route)
{
    if (!route) return 0;
    if (!strcmp(route, "/completion") || !strcmp(route, "/completions")) return LLAMA_ROUTE_COMPLETION;
    if (!strcmp(route, "/v1/chat/completions") || !strcmp(route, "/chat/completions")) return LLAMA_ROUTE_CHAT;
    if (!strcmp(route, "/v1/completions")) return LLAMA_ROUTE_OAI_COMPLETIONS;
    return 0;
}

int llama_fields_check(const char *route, const json_value *body, char *err, size_t errlen)
{
    unsigned bit = llama_route_bit(route);
    if (!bit) {
        bk_err(err, errlen, "route %s has no entry in bankml's field table (llama_fields.c); its request "
                            "cannot be checked, so it is refused", route ? route : "(none)");
        return -1;
    }
    if (body->type != JSON_OBJECT) return 0;
    /* the chat route's own errors come first, as oaicompat_chat_params_parse
     * runs before the completion schema */
    if (bit == LLAMA_ROUTE_CHAT) {
        const json_value *rf = json_get(body, "response_format");
        const json_value *t = rf && rf->type == JSON_OBJECT ? json_get(rf, "type") : NULL;
        if (t && t->type == JSON_STRING && t->len && !field_str_is(t, "text") && !field_str_is(t, "json_object") &&
            !field_str_is(t, "json_schema")) {
            bk_err(err, errlen, "response_format type must be one of \"text\" or \"json_object\", but got: %.*s",
                   (int)(t->len > 200 ? 200 : t->len), t->str);
            return -1;
        }
    }
    const json_value *lora = json_get(body, "lora");
    if (lora && lora->type != JSON_NULL && lora->type != JSON_ARRAY) {
        bk_err(err, errlen, "Field 'lora': Error: 'lora' must be an array of objects with 'id' and 'scale' fields");
        return -1;
    }
    for (size_t i = 0; i < sizeof FIELDS / sizeof FIELDS[0]; i++) {
        const llama_field *f = &FIELDS[i];
        if (f->kind != LLAMA_FIELD_REFUSED || !(f->routes & bit)) continue;
        const json_value *v = json_get(body, f->name);
        if (!v || v->type == JSON_NULL || f->absent(v)) continue;
        /* /completion's schema handler takes `grammar` whenever the body has
         * the key (json_schema is then never read) */
        if (bit != LLAMA_ROUTE_CHAT && !strcmp(f->name, "json_schema") && json_get(body, "grammar")) continue;
        bk_err(err, errlen, "%s", f->words);
        return -1;
    }
    return 0;
}

/* ---- the fields reproduced here ---- */

/* nlohmann's is_number_integer: a literal without '.', 'e' or 'E' that fits
 * int64 or uint64 (a wider one is a double). *id as get<llama_token>()
 * gives it (cut to 32 bits). */
static int nl_integer(const json_value *v, int32_t *id)
{
    int64_t x;
    if (v->type != JSON_NUMBER || strpbrk(v->str, ".eE")) return 0;
    if (json_as_i64(v, &x)) {
        *id = (int32_t)(uint32_t)(uint64_t)x;
        return 1;
    }
    if (v->str[0] == '-') return 0;
    errno = 0;
    unsigned long long u = strtoull(v->str, NULL, 10);
    if (errno) return 0;
    *id = (int32_t)(uint32_t)u;
    return 1;
}

/* parse_bias: a number as get<float>(), false as -inf; anything else skips. */
static int bias_of(const json_value *v, float *bias)
{
    int64_t x;
    if (v->type == JSON_NUMBER) {
        if (!strpbrk(v->str, ".eE") && json_as_i64(v, &x)) *bias = (float)x;
        else *bias = (float)strtod(v->str, NULL);
        return 1;
    }
    if (v->type == JSON_FALSE) {
        *bias = -INFINITY;
        return 1;
    }
    return 0;
}

static int push_bias(engine_request *rq, size_t *cap, int32_t tok, float bias)
{
    if (rq->n_bias == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        sampler_bias *nb = realloc(rq->bias, nc * sizeof *nb);
        if (!nb) return -1;
        rq->bias = nb;
        *cap = nc;
    }
    rq->bias[rq->n_bias].token = tok;
    rq->bias[rq->n_bias++].bias = bias;
    return 0;
}

/* A piece's tokens (common_tokenize with add_special and parse_special
 * off), each with the bias. */
static int push_piece(const engine_model *m, engine_request *rq, size_t *cap, const char *s, size_t n, float bias)
{
    int32_t *ids = NULL;
    size_t nids = 0;
    char terr[256];
    if (engine_tokenize_with(m, s, n, 0, 0, &ids, &nids, terr, sizeof terr) != 0) return 0;
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < nids; k++) rc = push_bias(rq, cap, ids[k], bias);
    free(ids);
    return rc;
}

/* logit_bias as llama-server's handler reads it: [[id|piece, bias|false]]
 * or {"id"|"piece": bias|false}; malformed entries are skipped, ids outside
 * the vocabulary dropped, never an error. */
static int read_logit_bias(const engine_model *m, const json_value *lb, engine_request *rq, size_t *cap)
{
    int32_t n_vocab = engine_model_n_tokens(m);
    float bias;
    int32_t tok;
    if (lb->type == JSON_ARRAY) {
        for (size_t i = 0; i < lb->n; i++) {
            const json_value *el = lb->items[i];
            if (el->type != JSON_ARRAY || el->n != 2 || !bias_of(el->items[1], &bias)) continue;
            if (nl_integer(el->items[0], &tok)) {
                if (tok >= 0 && tok < n_vocab && push_bias(rq, cap, tok, bias)) return -1;
            } else if (el->items[0]->type == JSON_STRING) {
                if (push_piece(m, rq, cap, el->items[0]->str, el->items[0]->len, bias)) return -1;
            }
        }
    } else if (lb->type == JSON_OBJECT) {
        for (size_t i = 0; i < lb->n; i++) {
            if (!bias_of(lb->items[i], &bias)) continue;
            /* strtol over the key as a C string: an empty key is token 0 */
            char key[64];
            size_t kl = lb->key_lens[i];
            char *end = NULL;
            long id = 0;
            int numeric = 0;
            if (kl < sizeof key && !memchr(lb->keys[i], 0, kl)) {
                memcpy(key, lb->keys[i], kl);
                key[kl] = 0;
                id = strtol(key, &end, 10);
                numeric = *end == 0;
            }
            if (numeric) {
                tok = (int32_t)id;
                if (tok >= 0 && tok < n_vocab && push_bias(rq, cap, tok, bias)) return -1;
            } else if (push_piece(m, rq, cap, lb->keys[i], kl, bias)) {
                return -1;
            }
        }
    }
    return 0;
}

/* A non-negative-bounded int32 field with llama-server's hard-limit words. */
static int read_limited(const json_value *body, const char *name, int32_t lo, int32_t *val, char *err,
                        size_t errlen)
{
    const json_value *v = json_get(body, name);
    if (!v || v->type == JSON_NULL) return 0;
    int64_t x;
    if (v->type == JSON_TRUE || v->type == JSON_FALSE) {
        x = v->type == JSON_TRUE;
    } else if (v->type != JSON_NUMBER) {
        bk_err(err, errlen, "Field '%s': [json.exception.type_error.302] type must be number, but is %s", name,
               llama_jtype(v));
        return -1;
    } else {
        x = llama_token_id(v);
    }
    if (x < lo) {
        bk_err(err, errlen, "Field '%s': Value must be between %d <= value <= %d, but got %d", name, (int)lo,
               INT32_MAX, (int)x);
        return -1;
    }
    *val = (int32_t)x;
    return 0;
}

/* The <piece> token references of a grammar: common_tokenize with
 * add_special false, parse_special true. */
static int grammar_tokenize(void *ctx, const char *text, size_t len, int32_t **ids, size_t *n)
{
    char terr[128];
    return engine_tokenize_with(ctx, text, len, 0, 1, ids, n, terr, sizeof terr);
}

/* The grammar's text, as the completion schema's "json_schema" handler
 * (alias "grammar") sets it: outside chat, a json_schema key that is not
 * null, with no "grammar" key in the body, is converted (an empty object
 * means {"type":"object"}; a conversion error is the 400 of the field);
 * otherwise a non-empty grammar string is llama-server's user grammar (any
 * other value leaves the server-wide grammar dflt, NULL for none: the
 * handler starts from the server's defaults). Kept in rq->grammar_text,
 * which generation_settings.grammar reports. 0, or -1 with the message. */
static int read_grammar_text(const json_value *body, unsigned bit, const llama_api_opts *lo, engine_request *rq,
                             char *err, size_t errlen)
{
    const json_value *g = json_get(body, "grammar");
    const json_value *js = json_get(body, "json_schema");
    gr_free(rq->grammar);
    rq->grammar = NULL;
    free(rq->grammar_text);
    rq->grammar_text = NULL;
    rq->grammar_len = 0;
    if (bit != LLAMA_ROUTE_CHAT && js && js->type != JSON_NULL && !g) {
        char *out = NULL;
        size_t len = 0;
        int rc = json_schema_to_gbnf(js, JSON_SCHEMA_FIELD, &out, &len);
        if (rc == JSON_SCHEMA_OK) {
            rq->grammar_text = out;
            rq->grammar_len = len;
            return 0;
        }
        if (rc == JSON_SCHEMA_REFUSED) bk_err(err, errlen, "Field 'json_schema': \"json_schema\": %s", out ? out : "");
        else bk_err(err, errlen, "json_schema: %s", out ? out : "out of memory");
        free(out);
        return -1;
    }
    const char *text = lo ? lo->grammar : NULL;
    size_t len = text ? lo->grammar_len : 0;
    if (g && g->type == JSON_STRING && g->len) {
        text = g->str;
        len = g->len;
    } else if (text && len && text[0] && lo->grammar_prefill && bit == LLAMA_ROUTE_CHAT) {
        /* b11669 feeds the chat's generation prompt to an output-format grammar before the answer; most
         * prompts do not match a schema's grammar ("Failed to initialize samplers: std::exception") */
        bk_err(err, errlen, "the server-wide -j/-jf grammar on chat is not reproduced yet (llama-server feeds it "
                            "the template's generation prompt first, and answers 400 when that does not match): "
                            "send a grammar with the request, or use /completion");
        return -1;
    }
    if (!text) return 0;
    rq->grammar_text = malloc(len + 1);
    if (!rq->grammar_text) {
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    memcpy(rq->grammar_text, text, len);
    rq->grammar_text[len] = 0;
    rq->grammar_len = len;
    return 0;
}

/* The grammar in rq->grammar_text parsed as common_sampler_init parses it:
 * a C string, so one starting with a NUL constrains nothing. 0, or -1 with
 * llama-server's 400 message. */
static int read_grammar(const engine_model *m, engine_request *rq, char *err, size_t errlen)
{
    if (!rq->grammar_text || rq->grammar_text[0] == 0) return 0;
    char why[512];
    gr_tokenizer tk = {(void *)m, grammar_tokenize};
    rq->grammar = gr_parse(rq->grammar_text, rq->grammar_len, &tk, why, sizeof why);
    if (!rq->grammar) {
        bk_err(err, errlen, "%s", GR_PARSE_FAILED);
        return -1;
    }
    return 0;
}

/* nlohmann's range-for over a value (llama-server's ordered_json): an
 * array's items, an object's values in the body's order, any other value
 * once, itself. *n is the count; the array is malloc'd (NULL with *n 0
 * for an empty one). */
static const json_value **nl_elements(const json_value *v, size_t *n, int *oom)
{
    *oom = 0;
    size_t k = v->type == JSON_ARRAY || v->type == JSON_OBJECT ? v->n : 1;
    *n = k;
    if (k == 0) return NULL;
    const json_value **out = malloc(k * sizeof *out);
    if (!out) {
        *oom = 1;
        *n = 0;
        return NULL;
    }
    if (v->type == JSON_ARRAY || v->type == JSON_OBJECT)
        for (size_t i = 0; i < k; i++) out[i] = v->items[i];
    else
        out[0] = v;
    return out;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

static int is_preserved_id(const engine_request *rq, int32_t id)
{
    for (size_t i = 0; i < rq->n_preserved; i++)
        if (rq->preserved[i] == id) return 1;
    return 0;
}

/* preserved_tokens (b11669 reads an array of strings): each string that
 * tokenizes (specials parsed) to exactly one token adds that id. */
static int read_preserved(const engine_model *m, const json_value *body, engine_request *rq, char *err,
                          size_t errlen)
{
    const json_value *pt = json_get(body, "preserved_tokens");
    if (!pt || pt->type == JSON_NULL) return 0;
    if (pt->type != JSON_ARRAY) {
        bk_err(err, errlen, "Field 'preserved_tokens': [json.exception.type_error.302] type must be array, but is %s",
               llama_jtype(pt));
        return -1;
    }
    for (size_t i = 0; i < pt->n; i++)
        if (pt->items[i]->type != JSON_STRING) {
            bk_err(err, errlen, "Field 'preserved_tokens': [json.exception.type_error.302] type must be string, "
                   "but is %s", llama_jtype(pt->items[i]));
            return -1;
        }
    rq->preserved = malloc((pt->n ? pt->n : 1) * sizeof *rq->preserved);
    if (!rq->preserved) goto oom;
    for (size_t i = 0; i < pt->n; i++) {
        int32_t *ids = NULL;
        size_t nids = 0;
        char terr[128];
        if (engine_tokenize_with(m, pt->items[i]->str, pt->items[i]->len, 0, 1, &ids, &nids, terr, sizeof terr))
            continue;
        if (nids == 1 && !is_preserved_id(rq, ids[0])) rq->preserved[rq->n_preserved++] = ids[0];
        free(ids);
    }
    qsort(rq->preserved, rq->n_preserved, sizeof *rq->preserved, cmp_i32);
    return 0;
oom:
    bk_err(err, errlen, "out of memory");
    return -1;
}

/* One trigger as server_grammar_trigger(json) reads it, a one-token word
 * made a token trigger (it must be preserved). 0, or -1 with the message. */
static int read_trigger(const engine_model *m, const json_value *t, engine_request *rq, char *err, size_t errlen)
{
    static const char F[] = "Field 'grammar_triggers': ";
    if (t->type != JSON_OBJECT) {
        bk_err(err, errlen, "%s[json.exception.type_error.304] cannot use at() with %s", F, llama_jtype(t));
        return -1;
    }
    const json_value *ty = json_get(t, "type"), *va = json_get(t, "value"), *tk = json_get(t, "token");
    if (!ty) {
        bk_err(err, errlen, "%s[json.exception.out_of_range.403] key 'type' not found", F);
        return -1;
    }
    if (ty->type != JSON_NUMBER && ty->type != JSON_TRUE && ty->type != JSON_FALSE) {
        bk_err(err, errlen, "%s[json.exception.type_error.302] type must be number, but is %s", F, llama_jtype(ty));
        return -1;
    }
    if (!va) {
        bk_err(err, errlen, "%s[json.exception.out_of_range.403] key 'value' not found", F);
        return -1;
    }
    if (va->type != JSON_STRING) {
        bk_err(err, errlen, "%s[json.exception.type_error.302] type must be string, but is %s", F, llama_jtype(va));
        return -1;
    }
    gr_trigger g = {llama_token_id(ty), NULL, va->len, 0};
    if (g.type == GR_TRIGGER_TOKEN) {
        if (!tk) {
            bk_err(err, errlen, "%s[json.exception.out_of_range.403] key 'token' not found", F);
            return -1;
        }
        if (tk->type != JSON_NUMBER && tk->type != JSON_TRUE && tk->type != JSON_FALSE) {
            bk_err(err, errlen, "%s[json.exception.type_error.302] type must be number, but is %s", F,
                   llama_jtype(tk));
            return -1;
        }
        g.token = llama_token_id(tk);
    }
    if (g.type == GR_TRIGGER_WORD) {
        int32_t *ids = NULL;
        size_t nids = 0;
        char terr[128];
        if (engine_tokenize_with(m, va->str, va->len, 0, 1, &ids, &nids, terr, sizeof terr) == 0 && nids == 1) {
            int32_t id = ids[0];
            free(ids);
            if (!is_preserved_id(rq, id)) {
                bk_err(err, errlen, "%sGrammar trigger word should be marked as preserved token: %.*s", F,
                       (int)(va->len > 300 ? 300 : va->len), va->str);
                return -1;
            }
            g.type = GR_TRIGGER_TOKEN;
            g.token = id;
        } else {
            free(ids);
        }
    }
    char *val = malloc(va->len + 1);
    gr_trigger *nt = realloc(rq->triggers, (rq->n_triggers + 1) * sizeof *nt);
    if (!val || !nt) {
        free(val);
        if (nt) rq->triggers = nt;
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    memcpy(val, va->str, va->len);
    val[va->len] = 0;
    g.value = val;
    rq->triggers = nt;
    rq->triggers[rq->n_triggers++] = g;
    return 0;
}

/* grammar_triggers, then the lazy grammar's check. */
static int read_triggers(const engine_model *m, const json_value *body, engine_request *rq, char *err,
                         size_t errlen)
{
    const json_value *tr = json_get(body, "grammar_triggers");
    if (tr && tr->type != JSON_NULL) {
        size_t n = 0;
        int oom = 0;
        const json_value **el = nl_elements(tr, &n, &oom);
        if (oom) {
            bk_err(err, errlen, "out of memory");
            return -1;
        }
        for (size_t i = 0; i < n; i++)
            if (read_trigger(m, el[i], rq, err, errlen)) {
                free(el);
                return -1;
            }
        free(el);
        if (rq->grammar_lazy && rq->n_triggers == 0) {
            bk_err(err, errlen, "Field 'grammar_triggers': Error: no triggers set for lazy grammar!");
            return -1;
        }
    }
    return 0;
}

/* A tag's tokens (common_tokenize: add_special false, parse_special true). */
static int budget_tokens(const engine_model *m, const char *s, size_t n, int32_t **ids, size_t *nids, char *err,
                         size_t errlen)
{
    char terr[128];
    *ids = NULL;
    *nids = 0;
    if (engine_tokenize_with(m, s, n, 0, 1, ids, nids, terr, sizeof terr) == 0) return 0;
    bk_err(err, errlen, "out of memory");
    return -1;
}

static int budget_push_end(const engine_model *m, engine_request *rq, const json_value *t, char *err, size_t errlen)
{
    if (t->len == 0) return 0;
    int32_t **ne = realloc(rq->rb_ends, (rq->n_rb_ends + 1) * sizeof *ne);
    if (ne) rq->rb_ends = ne;
    size_t *nl = ne ? realloc(rq->rb_end_lens, (rq->n_rb_ends + 1) * sizeof *nl) : NULL;
    if (nl) rq->rb_end_lens = nl;
    if (!ne || !nl) {
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    if (budget_tokens(m, t->str, t->len, &rq->rb_ends[rq->n_rb_ends], &rq->rb_end_lens[rq->n_rb_ends], err, errlen))
        return -1;
    rq->n_rb_ends++;
    return 0;
}

/* The reasoning budget's fields as the completion schema reads them:
 * reasoning_budget_tokens (-1..INT32_MAX), reasoning_budget_start_tag (a
 * string), reasoning_budget_end_tags (alias reasoning_budget_end_tag: the
 * first non-null names the field; with the plural key present, even null,
 * its elements are read as nlohmann iterates them), reasoning_budget_message
 * (prepended to the first end tag to make the forced sequence; a value that
 * is no string is ""; absent: nothing is forced). */
static int read_budget(const engine_model *m, const json_value *body, engine_request *rq, char *err, size_t errlen)
{
    if (read_limited(body, "reasoning_budget_tokens", -1, &rq->rb_tokens, err, errlen)) return -1;
    const json_value *st = json_get(body, "reasoning_budget_start_tag");
    if (st && st->type != JSON_NULL) {
        if (st->type != JSON_STRING) {
            bk_err(err, errlen, "Field 'reasoning_budget_start_tag': [json.exception.type_error.302] type must be "
                   "string, but is %s", llama_jtype(st));
            return -1;
        }
        free(rq->rb_start);
        if (budget_tokens(m, st->str, st->len, &rq->rb_start, &rq->n_rb_start, err, errlen)) return -1;
    }
    const json_value *ets = json_get(body, "reasoning_budget_end_tags"), *et = json_get(body, "reasoning_budget_end_tag");
    const char *fname = ets && ets->type != JSON_NULL ? "reasoning_budget_end_tags"
                      : et && et->type != JSON_NULL ? "reasoning_budget_end_tag" : NULL;
    if (fname) {
        if (ets) {
            size_t n = 0;
            int oom = 0;
            const json_value **el = ets->type == JSON_NULL ? NULL : nl_elements(ets, &n, &oom);
            if (oom) {
                bk_err(err, errlen, "out of memory");
                return -1;
            }
            for (size_t i = 0; i < n; i++) {
                if (el[i]->type != JSON_STRING) {
                    bk_err(err, errlen, "Field '%s': [json.exception.type_error.302] type must be string, but is %s",
                           fname, llama_jtype(el[i]));
                    free(el);
                    return -1;
                }
                if (budget_push_end(m, rq, el[i], err, errlen)) {
                    free(el);
                    return -1;
                }
            }
            free(el);
        } else {
            if (et->type != JSON_STRING) {
                bk_err(err, errlen, "Field '%s': [json.exception.type_error.302] type must be string, but is %s",
                       fname, llama_jtype(et));
                return -1;
            }
            if (budget_push_end(m, rq, et, err, errlen)) return -1;
        }
    }
    const json_value *msg = json_get(body, "reasoning_budget_message");
    if (msg && msg->type != JSON_NULL && rq->n_rb_ends) {
        int32_t *mt = NULL;
        size_t nm = 0;
        if (msg->type == JSON_STRING && msg->len && budget_tokens(m, msg->str, msg->len, &mt, &nm, err, errlen))
            return -1;
        size_t ne = rq->rb_end_lens[0];
        rq->rb_forced = malloc((nm + ne ? nm + ne : 1) * sizeof *rq->rb_forced);
        if (!rq->rb_forced) {
            free(mt);
            bk_err(err, errlen, "out of memory");
            return -1;
        }
        if (nm) memcpy(rq->rb_forced, mt, nm * sizeof *mt);
        memcpy(rq->rb_forced + nm, rq->rb_ends[0], ne * sizeof *rq->rb_forced);
        rq->n_rb_forced = nm + ne;
        free(mt);
    }
    return 0;
}

/* The lazy grammar's triggers compiled as common_sampler_init compiles them
 * (only with a grammar and grammar_lazy: a grammar that is not lazy never
 * sees its patterns). Every trigger's type is checked whatever the grammar:
 * b11669 lowers them all and aborts on an unknown one. */
static int build_lazy_types(const engine_request *rq, char *err, size_t errlen)
{
    for (size_t i = 0; i < rq->n_triggers; i++)
        if (rq->triggers[i].type < GR_TRIGGER_TOKEN || rq->triggers[i].type > GR_TRIGGER_PATTERN_FULL) {
            bk_err(err, errlen, "grammar_triggers: type %d is no trigger type (0 token, 1 word, 2 pattern, 3 full "
                   "pattern); llama-server b11669 aborts on it, bankml refuses it", rq->triggers[i].type);
            return -1;
        }
    return 0;
}

static int build_lazy(engine_request *rq, char *err, size_t errlen)
{
    if (!rq->grammar || !rq->grammar_lazy) return 0;
    int code = 0;
    char why[512];
    rq->lazy = gr_lazy_new(rq->triggers, rq->n_triggers, &code, why, sizeof why);
    if (rq->lazy) return 0;
    if (code == RX_INVALID) bk_err(err, errlen, "Failed to initialize samplers: %s", why);
    else if (code == RX_UNSUPPORTED) bk_err(err, errlen, "grammar_triggers: %s; send the request without it", why);
    else bk_err(err, errlen, "out of memory");
    return -1;
}

int llama_fields_read_chat(const engine_model *m, const json_value *o, engine_request *rq, char *err, size_t errlen)
{
    const json_value *g = json_get(o, "grammar");
    engine_request_free_lazy(rq);
    if (g && g->type == JSON_STRING) {
        gr_free(rq->grammar);
        rq->grammar = NULL;
        free(rq->grammar_text);
        rq->grammar_text = malloc(g->len + 1);
        if (!rq->grammar_text) {
            bk_err(err, errlen, "out of memory");
            return -1;
        }
        memcpy(rq->grammar_text, g->str, g->len);
        rq->grammar_text[g->len] = 0;
        rq->grammar_len = g->len;
    }
    rq->grammar_lazy = 0;
    if (llama_field_bool(o, "grammar_lazy", &rq->grammar_lazy, err, errlen)) return -1;
    if (read_preserved(m, o, rq, err, errlen)) return -1;
    if (read_triggers(m, o, rq, err, errlen)) return -1;
    if (read_budget(m, o, rq, err, errlen)) return -1;
    if (build_lazy_types(rq, err, errlen)) return -1;
    if (g && g->type == JSON_STRING && read_grammar(m, rq, err, errlen)) return -1;
    if (build_lazy(rq, err, errlen)) return -1;
    if (rq->grammar_lazy && rq->n_triggers == 0) {
        gr_free(rq->grammar);
        rq->grammar = NULL;
    }
    return 0;
}

int llama_fields_read(const engine_model *m, const char *route, const json_value *body,
                      const struct llama_api_opts_s *lo, engine_request *rq, char *err, size_t errlen)
{
    size_t cap = 0;
    if (llama_fields_check(route, body, err, errlen) != 0) return -1;
    if (llama_field_bool(body, "timings_per_token", &rq->timings_per_token, err, errlen)) return -1;
    if (llama_field_bool(body, "return_tokens", &rq->return_tokens, err, errlen)) return -1;
    if (llama_field_bool(body, "return_progress", &rq->return_progress, err, errlen)) return -1;
    if (read_limited(body, "n_keep", -1, &rq->n_keep, err, errlen)) return -1;
    if (read_limited(body, "n_discard", 0, &rq->n_discard, err, errlen)) return -1;
    free(rq->bias);
    rq->bias = NULL;
    rq->n_bias = 0;
    engine_request_free_lazy(rq);
    /* the json_schema/grammar field, converted where it stands in the schema */
    if (read_grammar_text(body, llama_route_bit(route), lo, rq, err, errlen)) return -1;
    /* grammar_lazy (after the schema field), preserved_tokens, then
     * grammar_triggers, as the completion schema reads them; the chat layer
     * overwrites all three with the template's */
    rq->grammar_lazy = 0;
    if (llama_route_bit(route) != LLAMA_ROUTE_CHAT) {
        if (llama_field_bool(body, "grammar_lazy", &rq->grammar_lazy, err, errlen)) return -1;
        if (read_preserved(m, body, rq, err, errlen)) return -1;
        if (read_triggers(m, body, rq, err, errlen)) return -1;
        if (read_budget(m, body, rq, err, errlen)) return -1;
    }
    const json_value *lb = json_get(body, "logit_bias");
    if (lb && lb->type != JSON_NULL) {
        if (read_logit_bias(m, lb, rq, &cap) != 0) goto oom;
    } else if (lo) {   /* the field's handler clears the list: without it, the command line's -l biases stay */
        for (size_t i = 0; i < lo->n_logit_bias; i++)
            if (push_bias(rq, &cap, lo->logit_bias[i].token, lo->logit_bias[i].bias)) goto oom;
    }
    if (llama_field_bool(body, "ignore_eos", &rq->ignore_eos, err, errlen)) return -1;
    if (rq->ignore_eos)
        for (int32_t id = 0; id < engine_model_n_tokens(m); id++)
            if (engine_model_is_eog(m, id) && push_bias(rq, &cap, id, -INFINITY)) goto oom;
    /* last: llama-server parses the grammar (then compiles the lazy
     * grammar's patterns) when it builds the slot's sampler */
    if (build_lazy_types(rq, err, errlen)) return -1;
    if (read_grammar(m, rq, err, errlen)) return -1;
    if (build_lazy(rq, err, errlen)) return -1;
    if (rq->grammar_lazy && rq->n_triggers == 0) {
        /* lazy without triggers: awaiting a trigger that cannot come, the
         * grammar never applies (nor advances) */
        gr_free(rq->grammar);
        rq->grammar = NULL;
    }
    return 0;
oom:
    bk_err(err, errlen, "out of memory");
    return -1;
}
