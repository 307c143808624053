/*
 * llama_req.c -- every field of a llama-server request, read in one place
 * with llama-server b11669's rules and nlohmann's errors. See llama_json.h.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "api/llama_json.h"

int llama_reply_err(serve_resp *resp, int code, const char *msg)
{
    return serve_reply_error(resp, code, NULL, msg, NULL);
}

void llama_reply_exceed_ctx(serve_resp *resp, size_t n, size_t n_ctx)
{
    char msg[256], extra[128];
    snprintf(msg, sizeof msg, "request (%zu tokens) exceeds the available context size (%zu tokens), try increasing it",
             n, n_ctx);
    snprintf(extra, sizeof extra, "\"n_prompt_tokens\":%zu,\"n_ctx\":%zu", n, n_ctx);
    serve_reply_error(resp, 400, "exceed_context_size_error", msg, extra);
}

/* The entry a request's `model` names: the registry's names first (an
 * empty or absent name is the startup model), then the alias (the startup
 * model); any other name is the one model when only one is served, as
 * llama-server serves its model whatever name is asked, and -1 when several
 * are. */
static long find_named(engine *e, const char *asked)
{
    long idx = engine_find(e, asked);
    const char *alias = engine_alias(e);
    if (idx >= 0) return idx;
    if (alias && asked && !strcmp(asked, alias)) return (long)engine_default(e);
    return engine_n_entries(e) == 1 ? 0 : -1;
}

/* llama-server's router with no models (bankml serve without one): every
 * request that names a model, or should, is refused first, as the router
 * refuses before it hands a request on. 1 when it answered. */
static int router_refused(const engine *e, const json_value *body, serve_resp *resp)
{
    if (engine_n_entries(e) != 0) return 0;
    const char *asked = NULL;
    size_t al = 0;
    char msg[300];
    if (body && body->type == JSON_OBJECT) json_as_str(json_get(body, "model"), &asked, &al);
    if (!asked || !al) snprintf(msg, sizeof msg, "model name is missing from the request");
    else snprintf(msg, sizeof msg, "model '%.*s' not found", (int)(al < 200 ? al : 200), asked);
    llama_reply_err(resp, 400, msg);
    return 1;
}

engine_model *llama_lock_model(engine *e, const json_value *body, serve_resp *resp)
{
    const char *asked = NULL;
    size_t al;
    engine_error er = {0};
    if (body && body->type == JSON_OBJECT) json_as_str(json_get(body, "model"), &asked, &al);
    if (router_refused(e, body, resp)) return NULL;
    long idx = find_named(e, asked);
    if (idx < 0) {
        jbuf names, msg;
        engine_entry en;
        jbuf_init(&names);
        jbuf_init(&msg);
        for (size_t i = 0; engine_entry_get(e, i, &en) == 0; i++) jbuf_printf(&names, "%s%s", i ? ", " : "", en.name);
        jbuf_printf(&msg, "model '%s' not found: this bankml serves several pinned models, name one of them (%s)",
                    asked, names.p ? names.p : "");
        llama_reply_err(resp, 404, msg.oom ? "model not found" : msg.p);
        jbuf_free(&names);
        jbuf_free(&msg);
        return NULL;
    }
    engine_model *m = engine_acquire(e, (size_t)idx, NULL, &er);
    if (!m) llama_reply_err(resp, engine_status(er.kind), er.msg);
    return m;
}

const engine_model *llama_read_model(engine *e, const json_value *body, serve_resp *resp, int64_t keep_ms,
                                     int *peeked)
{
    const char *asked = NULL;
    size_t al;
    *peeked = 0;
    if (body && body->type == JSON_OBJECT) json_as_str(json_get(body, "model"), &asked, &al);
    long idx = router_refused(e, body, resp) ? -2 : find_named(e, asked);
    const engine_model *m = idx >= 0 ? engine_peek(e, (size_t)idx, keep_ms) : NULL;
    if (m) {
        *peeked = 1;
        return m;
    }
    if (idx == -2) return NULL;   /* answered */
    return llama_lock_model(e, body, resp);   /* not resident, changed, or not found: as before */
}

void llama_read_done(engine *e, int peeked, int64_t keep_ms)
{
    if (peeked) engine_unpeek(e, keep_ms);
    else engine_release(e, keep_ms);
}

const char *llama_model_name(engine *e, const engine_model *m)
{
    engine_entry en;
    const char *alias = engine_alias(e);
    if (alias && engine_model_entry(m) == engine_default(e)) return alias;
    return engine_entry_get(e, engine_model_entry(m), &en) == 0 ? en.path : "";
}

/* The request's JSON, or NULL after answering 400: first as llama-server's
 * nlohmann parser would take it (its exact error text; a byte order mark
 * skipped), then json.c's tree (whose own refusal remains for what only it
 * refuses, such as nesting past JSON_MAX_DEPTH). */
json_value *llama_parse_body(const engine *e, serve_req *req, serve_resp *resp)
{
    char err[512];
    const char *text = req->body ? req->body : "";
    size_t a = 0, z = req->body_len;
    jbuf why;
    jbuf_init(&why);
    int rc = serve_llama_json_check(text, req->body_len, &why, &a, &z);
    if (rc == 1) {
        llama_reply_err(resp, 400, why.oom ? "invalid JSON" : why.p);
        jbuf_free(&why);
        return NULL;
    }
    jbuf_free(&why);
    if (rc != 0) {
        a = 0;
        z = req->body_len;
    }
    json_value *doc = json_parse(text + a, z - a, err, sizeof err);
    if (!doc) llama_reply_err(resp, 400, err);
    else if (router_refused(e, doc, resp)) {
        json_free(doc);
        return NULL;
    }
    return doc;
}

/* A field_num<int32_t> of llama-server's schema with hard limits: the first
 * present (non-null) name of names[] is read as nlohmann's get<int32_t>
 * reads it (booleans as 0/1, fractions truncated, other integers wrapped),
 * then refused outside [lo, hi] with llama-server's message. */
static int field_i32(const json_value *o, const char *const *names, int n_names, int32_t lo, int32_t hi,
                     int32_t *val, char *err, size_t errlen)
{
    for (int k = 0; k < n_names; k++) {
        const json_value *v = json_get(o, names[k]);
        if (!v || v->type == JSON_NULL) continue;
        int64_t x;
        if (v->type == JSON_TRUE || v->type == JSON_FALSE) {
            x = v->type == JSON_TRUE;
        } else if (v->type != JSON_NUMBER) {
            bk_err(err, errlen, "Field '%s': [json.exception.type_error.302] type must be number, but is %s",
                    names[k], llama_jtype(v));
            return -1;
        } else if (!json_as_i64(v, &x)) {
            double d = strtod(v->str, NULL);
            x = d > -2147483649.0 && d < 2147483648.0 ? (int64_t)d : INT32_MIN;
        } else if (x < INT32_MIN || x > INT32_MAX) {
            x = (int32_t)(uint32_t)(uint64_t)x;
        }
        if (x < lo || x > hi) {
            bk_err(err, errlen, "Field '%s': Value must be between %d <= value <= %d, but got %d", names[k],
                    (int)lo, (int)hi, (int)x);
            return -1;
        }
        *val = (int32_t)x;
        return 0;
    }
    return 0;
}

/* n_predict with its aliases and hard limits [-1, INT32_MAX]. */
static int field_n_predict(const json_value *o, int32_t *val, char *err, size_t errlen)
{
    static const char *const names[] = {"n_predict", "max_completion_tokens", "max_tokens"};
    return field_i32(o, names, 3, -1, INT32_MAX, val, err, errlen);
}

/* n_cmpl (alias n): completions per prompt, at most the slot count, which
 * is one here, as llama-server -np 1 limits it. */
static int field_n_cmpl(const json_value *o, char *err, size_t errlen)
{
    static const char *const names[] = {"n_cmpl", "n"};
    int32_t n = 1;
    return field_i32(o, names, 2, 1, 1, &n, err, errlen);
}

static void put_nl_dump(jbuf *b, const json_value *v) { json_put_nl_dump(b, v, -1); }

static int jis(const json_value *v, const char *s)
{
    return v && v->type == JSON_STRING && v->len == strlen(s) && !memcmp(v->str, s, v->len);
}

/* The checks llama-server makes on `messages` before any template runs
 * (oaicompat_chat_params_parse, then common_chat_msgs_parse_oaicompat), in
 * its order and with its words, so a malformed conversation gets the same
 * status and body: 400 for its invalid_argument, 500 for the ones it wraps
 * in "Failed to parse messages: ". 0 when llama-server would go on (the
 * template may still refuse what bankml cannot render). msgs is an array. */
/* common_chat_msgs_parse_oaicompat over one message's tool_calls (iterated
 * as nlohmann iterates: an array's items, an object's values, nothing for
 * null, a scalar once): type, function, its name (a string), arguments, id
 * (a string), with its words. 0, or -1 with the 500 message. */
static int check_tool_calls(const json_value *tcs, char *err, size_t errlen)
{
    size_t n = !tcs || tcs->type == JSON_NULL ? 0 : tcs->type == JSON_ARRAY || tcs->type == JSON_OBJECT ? tcs->n : 1;
    for (size_t i = 0; i < n; i++) {
        const json_value *tc = tcs->type == JSON_ARRAY || tcs->type == JSON_OBJECT ? tcs->items[i] : tcs;
        const json_value *ty = json_get(tc, "type"), *fc = json_get(tc, "function");
        const json_value *name = json_get(fc, "name"), *id = json_get(tc, "id");
        const char *why = !ty ? "Missing tool call type: " : !jis(ty, "function") ? "Unsupported tool call type: "
                        : !fc ? "Missing tool call function: " : !name ? "Missing tool call name: " : NULL;
        if (why) {
            jbuf d;
            jbuf_init(&d);
            put_nl_dump(&d, tc);
            bk_err(err, errlen, "Failed to parse messages: %s%s", why, d.p ? d.p : "");
            jbuf_free(&d);
            return -1;
        }
        if (name->type != JSON_STRING) {
            bk_err(err, errlen, "Failed to parse messages: [json.exception.type_error.302] type must be string, "
                                 "but is %s", llama_jtype(name));
            return -1;
        }
        if (!json_get(fc, "arguments")) {
            bk_err(err, errlen, "Failed to parse messages: [json.exception.out_of_range.403] key 'arguments' not found");
            return -1;
        }
        if (id && id->type != JSON_STRING) {
            bk_err(err, errlen, "Failed to parse messages: [json.exception.type_error.302] type must be string, "
                                 "but is %s", llama_jtype(id));
            return -1;
        }
    }
    return 0;
}

int llama_check_messages(const json_value *msgs, int *status, char *err, size_t errlen)
{
    *status = 400;
    for (size_t i = 0; i < msgs->n; i++) {
        const json_value *m = msgs->items[i];
        const json_value *role = json_get(m, "role"), *content = json_get(m, "content");
        /* json_value(msg, "role", ""): a role of another type reads as "" */
        if (!jis(role, "assistant") && !content) {
            bk_err(err, errlen, "All non-assistant messages must contain 'content'");
            return -1;
        }
        if (jis(role, "assistant") && !content) {
            if (json_get(m, "tool_calls")) continue;
            bk_err(err, errlen, "Assistant message must contain either 'content' or 'tool_calls'!");
            return -1;
        }
        if (content->type == JSON_STRING || content->type == JSON_NULL) continue;
        if (content->type != JSON_ARRAY) {
            bk_err(err, errlen, "Expected 'content' to be a string or an array");
            return -1;
        }
        for (size_t k = 0; k < content->n; k++) {
            const json_value *ty = json_get(content->items[k], "type");
            static const char *const media[][2] = {{"image_url", "image"}, {"input_audio", "audio"},
                                                   {"input_video", "video"}, {"video_url", "video"}};
            for (size_t j = 0; j < sizeof media / sizeof media[0]; j++)
                if (jis(ty, media[j][0])) {
                    *status = 500;
                    bk_err(err, errlen, "%s input is not supported - hint: if this is unexpected, you may need "
                                         "to provide the mmproj", media[j][1]);
                    return -1;
                }
            if (!jis(ty, "text")) {
                bk_err(err, errlen, "unsupported content[].type");
                return -1;
            }
        }
    }
    /* common_chat_msgs_parse_oaicompat: every failure is a 500 */
    *status = 500;
    for (size_t i = 0; i < msgs->n; i++) {
        const json_value *m = msgs->items[i], *role = json_get(m, "role"), *content = json_get(m, "content");
        if (!role) {
            jbuf d;
            jbuf_init(&d);
            put_nl_dump(&d, m);
            bk_err(err, errlen, "Failed to parse messages: Missing 'role' in message: %s", d.p ? d.p : "");
            jbuf_free(&d);
            return -1;
        }
        if (role->type != JSON_STRING) {
            bk_err(err, errlen, "Failed to parse messages: [json.exception.type_error.302] type must be string, "
                                 "but is %s", llama_jtype(role));
            return -1;
        }
        for (size_t k = 0; content && content->type == JSON_ARRAY && k < content->n; k++) {
            const json_value *t = json_get(content->items[k], "text");
            if (!t) {
                bk_err(err, errlen, "Failed to parse messages: [json.exception.out_of_range.403] key 'text' "
                                     "not found");
                return -1;
            }
            if (t->type != JSON_STRING) {
                bk_err(err, errlen, "Failed to parse messages: [json.exception.type_error.302] type must be "
                                     "string, but is %s", llama_jtype(t));
                return -1;
            }
        }
        if (check_tool_calls(json_get(m, "tool_calls"), err, errlen) != 0) return -1;
        static const char *const strs[] = {"reasoning_content", "name", "tool_call_id"};
        for (size_t j = 0; j < 3; j++) {
            const json_value *v = json_get(m, strs[j]);
            if (v && v->type != JSON_STRING) {
                bk_err(err, errlen, "Failed to parse messages: [json.exception.type_error.302] type must be "
                                     "string, but is %s", llama_jtype(v));
                return -1;
            }
        }
    }
    return 0;
}

/* common_chat_tools_parse_oaicompat's checks of one tool: the reason
 * (without the prefix), or NULL when it reads. */
static const char *tool_problem(const json_value *t, jbuf *why)
{
    const json_value *ty = json_get(t, "type"), *f = json_get(t, "function");
    const char *head = !ty ? "Missing tool type: " : !jis(ty, "function") ? "Unsupported tool type: "
                     : !f ? "Missing tool function: " : NULL;
    if (head) {
        jbuf_puts(why, head);
        put_nl_dump(why, t);
        return why->p;
    }
    if (f->type != JSON_OBJECT) {
        jbuf_printf(why, "[json.exception.type_error.304] cannot use at() with %s", llama_jtype(f));
        return why->p;
    }
    const json_value *name = json_get(f, "name"), *desc = json_get(f, "description");
    if (!name) jbuf_puts(why, "[json.exception.out_of_range.403] key 'name' not found");
    else if (name->type != JSON_STRING)
        jbuf_printf(why, "[json.exception.type_error.302] type must be string, but is %s", llama_jtype(name));
    else if (desc && desc->type != JSON_STRING)
        jbuf_printf(why, "[json.exception.type_error.302] type must be string, but is %s", llama_jtype(desc));
    return why->len ? why->p : NULL;
}

static int check_tools(const json_value *tools, char *err, size_t errlen)
{
    jbuf why;
    jbuf_init(&why);
    if (tools->type != JSON_ARRAY) {
        jbuf_puts(&why, "Expected 'tools' to be an array, got ");
        put_nl_dump(&why, tools);
    }
    for (size_t i = 0; !why.len && tools->type == JSON_ARRAY && i < tools->n; i++) tool_problem(tools->items[i], &why);
    int rc = 0;
    if (why.len) {
        jbuf_puts(&why, "; tools = ");
        json_put_nl_dump(&why, tools, 2);
        bk_err(err, errlen, "Failed to parse tools: %s", why.p ? why.p : "");
        rc = -1;
    }
    jbuf_free(&why);
    return rc;
}

int llama_read_chat_inputs(const json_value *body, llama_pre *pre, int *status, char *err, size_t errlen)
{
    template_opts *o = &pre->topts;
    template_opts_init(o);
    const json_value *tools = json_get(body, "tools"), *tc = json_get(body, "tool_choice");
    *status = 500;
    if (tools && tools->type != JSON_NULL) {
        if (check_tools(tools, err, errlen) != 0) return -1;
        o->tools = tools;
        pre->has_tools = tools->n > 0;
    }
    *status = 400;
    pre->tool_choice = LLAMA_TOOL_CHOICE_AUTO;
    if (tc && tc->type == JSON_STRING) {
        if (jis(tc, "none")) pre->tool_choice = LLAMA_TOOL_CHOICE_NONE;
        else if (jis(tc, "required")) pre->tool_choice = LLAMA_TOOL_CHOICE_REQUIRED;
        else if (!jis(tc, "auto")) {
            bk_err(err, errlen, "Invalid tool_choice: %.*s", (int)tc->len, tc->str);
            return -1;
        }
    }
    int b;
    if (json_is_bool(json_get(body, "add_generation_prompt"), &b)) o->add_generation_prompt = b;
    o->continue_final = template_continue_parse(json_get(body, "continue_final_message"));
    if (template_continuation(pre->messages, o, err, errlen) != 0) return -1;
    if (pre->has_tools && pre->tool_choice != LLAMA_TOOL_CHOICE_NONE && json_get(body, "grammar")) {
        bk_err(err, errlen, "Cannot use custom grammar constraints with tools.");
        return -1;
    }
    const json_value *kw = json_get(body, "chat_template_kwargs"), *re = json_get(body, "reasoning_effort");
    if (kw && kw->type != JSON_NULL && kw->type != JSON_OBJECT) {
        bk_err(err, errlen, "chat_template_kwargs: bankml reads an object here (b11669 takes the items of this %s "
                            "as template arguments); send an object", llama_jtype(kw));
        return -1;
    }
    if (kw && kw->type == JSON_OBJECT) o->kwargs = kw;
    if (re && re->type == JSON_STRING) o->reasoning_effort = re->str;
    return 0;
}

/* each tool call's arguments text of the messages, as nlohmann::json::parse
 * reads it (func_args_not_string): 0, or -1 with the 500 message */
static int check_tool_args(const json_value *messages, char *err, size_t errlen)
{
    for (size_t i = 0; messages && messages->type == JSON_ARRAY && i < messages->n; i++) {
        const json_value *tcs = json_get(messages->items[i], "tool_calls");
        for (size_t k = 0; tcs && tcs->type == JSON_ARRAY && k < tcs->n; k++) {
            const json_value *a = json_get(json_get(tcs->items[k], "function"), "arguments");
            if (!a || a->type != JSON_STRING) continue;
            jbuf msg;
            size_t st, en;
            jbuf_init(&msg);
            int r = serve_llama_json_check(a->str, a->len, &msg, &st, &en);
            if (r == 1) bk_err(err, errlen, "Failed to parse tool call arguments as JSON: %s", msg.p ? msg.p : "");
            else if (r < 0) bk_err(err, errlen, "out of memory");
            jbuf_free(&msg);
            if (r != 0) return -1;
        }
    }
    return 0;
}

int llama_check_render(const engine_model *m, const json_value *body, const json_value *messages, char *err,
                       size_t errlen)
{
    if (!engine_model_jinja(m)) {
        const json_value *t = json_get(body, "tools"), *tc = json_get(body, "tool_choice");
        if (t && t->type == JSON_ARRAY && t->n) {
            bk_err(err, errlen, "tools param requires --jinja flag");
            return -1;
        }
        if (tc && tc->type == JSON_STRING && !jis(tc, "auto")) {
            bk_err(err, errlen, "tool_choice param requires --jinja flag");
            return -1;
        }
        return 0;
    }
    return engine_model_caps(m)->supports_object_arguments ? check_tool_args(messages, err, errlen) : 0;
}

int llama_read_pre(const json_value *body, int chat, llama_pre *pre, int *status, char *err, size_t errlen)
{
    memset(pre, 0, sizeof *pre);
    pre->chat = chat;
    pre->body = body;
    pre->route = chat ? "/v1/chat/completions" : "/completion";
    *status = 400;
    pre->messages = json_get(body, "messages");
    pre->prompt = json_get(body, "prompt");
    if (chat) {
        /* oaicompat_chat_params_parse, before it looks at the messages: a
         * json_schema (not null) beside a grammar (a non-empty string) */
        const json_value *js = json_get(body, "json_schema"), *g = json_get(body, "grammar");
        if (js && js->type != JSON_NULL && g && g->type == JSON_STRING && g->len) {
            *status = 500;
            bk_err(err, errlen, "Cannot use both json_schema and grammar");
            return -1;
        }
    }
    if (chat && !pre->messages) {
        bk_err(err, errlen, "'messages' is required");
        return -1;
    }
    if (chat && pre->messages->type != JSON_ARRAY) {
        bk_err(err, errlen, "Expected 'messages' to be an array");
        return -1;
    }
    if (!chat && !pre->prompt) {
        bk_err(err, errlen, "[json.exception.out_of_range.403] key 'prompt' not found");
        return -1;
    }
    if (chat && llama_check_messages(pre->messages, status, err, errlen) != 0) return -1;
    if (!chat) template_opts_init(&pre->topts);
    if (chat && llama_read_chat_inputs(body, pre, status, err, errlen) != 0) return -1;
    *status = 400;
    if (chat && sampler_oai_logprobs(body, &pre->logprobs_n, &pre->logprobs_set, err, errlen) != 0) return -1;
    return 0;
}

/* stop: a string, or an array of strings (anything else: none, as
 * json_value's default). */
static void read_stops(const json_value *st, engine_request *rq)
{
    if (st && st->type == JSON_STRING && st->len) {
        rq->stops[0] = st->str;
        rq->stop_lens[0] = st->len;
        rq->n_stops = 1;
    } else if (st && st->type == JSON_ARRAY) {
        int all = 1;
        for (size_t i = 0; i < st->n; i++) all &= st->items[i]->type == JSON_STRING;
        for (size_t i = 0; all && i < st->n && rq->n_stops < ENGINE_MAX_STOPS; i++)
            if (st->items[i]->len) {
                rq->stops[rq->n_stops] = st->items[i]->str;
                rq->stop_lens[rq->n_stops++] = st->items[i]->len;
            }
    }
}

int llama_defaults(const llama_api_opts *o, const engine_model *m, sampler_params *out, char *err, size_t errlen)
{
    if (o && o->sampling) {
        if (sampler_resolve(out, engine_model_defaults(m), o->sampling, err, errlen) != 0) return -1;
    } else if (sampler_params_copy(out, engine_model_defaults(m)) != 0) {
        snprintf(err, errlen, "out of memory");
        sampler_params_init(out);
        return -1;
    }
    if (o && o->dry_no_breakers) sampler_params_no_breakers(out);
    return 0;
}

int llama_read_request(const engine_model *m, const llama_api_opts *lo, const json_value *body, const llama_pre *pre,
                       engine_request *rq, char *err, size_t errlen)
{
    const json_value *so = json_get(body, "stream_options");
    rq->verbose = lo ? lo->verbose : 0;   /* schema order: verbose is read first */
    if (llama_field_bool(body, "verbose", &rq->verbose, err, errlen)) return -1;
    if (llama_field_bool(body, "stream", &rq->stream, err, errlen)) return -1;
    if (so && so->type == JSON_OBJECT && llama_field_bool(so, "include_usage", &rq->include_usage, err, errlen))
        return -1;
    if (llama_field_bool(body, "cache_prompt", &rq->cache_prompt, err, errlen)) return -1;
    if (field_n_predict(body, &rq->n_predict, err, errlen)) return -1;
    if (lo && lo->n_predict >= 0 && rq->n_predict < 0) {
        /* llama-server (measured): without n_predict the request gets -n's; with an explicit -1 it stops at -n's
         * budget but reports -1, which engine_request cannot say */
        if (json_get(body, "n_predict") || json_get(body, "max_tokens") || json_get(body, "max_completion_tokens")) {
            snprintf(err, errlen, "n_predict -1 on a server started with -n %d is not reproduced (llama-server stops at "
                                  "%d tokens and reports -1): leave n_predict out, or give a budget",
                     (int)lo->n_predict, (int)lo->n_predict);
            return -1;
        }
        rq->n_predict = lo->n_predict;
    }
    if (field_n_cmpl(body, err, errlen)) return -1;
    /* json_value(data, "id_slot", -1): a number or boolean as get<int>, any other type the default */
    const json_value *ids = json_get(body, "id_slot");
    if (ids && (ids->type == JSON_NUMBER || ids->type == JSON_TRUE || ids->type == JSON_FALSE))
        rq->id_slot = llama_token_id(ids);
    sampler_params_free(&rq->sp);
    sampler_params d;
    if (llama_defaults(lo, m, &d, err, errlen) != 0) {
        sampler_params_free(&d);
        sampler_params_init(&rq->sp);
        return -1;
    }
    int rc = sampler_resolve(&rq->sp, &d, body, err, errlen);
    sampler_params_free(&d);
    if (rc != 0) return -1;
    if (pre && pre->logprobs_set) rq->sp.n_probs = pre->logprobs_n;
    read_stops(json_get(body, "stop"), rq);
    return llama_fields_read(m, pre ? pre->route : "/completion", body, lo, rq, err, errlen);
}

/* Appends ids[0..n) to *out. 0, or -1 out of memory. */
static int append_ids(int32_t **out, size_t *n_out, const int32_t *ids, size_t n)
{
    int32_t *nn = realloc(*out, (*n_out + n + 1) * sizeof *nn);
    if (!nn) return -1;
    *out = nn;
    if (n) memcpy(nn + *n_out, ids, n * sizeof *ids);
    *n_out += n;
    return 0;
}

/* nlohmann's is_number_integer: a literal without '.', 'e' or 'E' that fits
 * int64 or uint64 (a wider one parses as a double). */
static int prompt_is_int(const json_value *v)
{
    int64_t x;
    if (v->type != JSON_NUMBER || strpbrk(v->str, ".eE")) return 0;
    if (json_as_i64(v, &x)) return 1;
    if (v->str[0] == '-') return 0;
    errno = 0;
    (void)strtoull(v->str, NULL, 10);
    return errno == 0;
}

static const char PROMPT_SHAPES[] = "\"prompt\" elements must be a string, a list of tokens, a JSON object containing "
                                    "a prompt string, or a list of mixed strings & tokens.";

/* One id of a prompt: get<llama_token>() of a number or a boolean (its
 * range is the task's check, llama_prompt_valid). */
static int prompt_id(const json_value *v, int32_t **ids, size_t *n, char *err, size_t errlen)
{
    if (v->type != JSON_NUMBER && v->type != JSON_TRUE && v->type != JSON_FALSE) {
        bk_err(err, errlen, "[json.exception.type_error.302] type must be number, but is %s", llama_jtype(v));
        return -1;
    }
    int32_t id = llama_token_id(v);
    return append_ids(ids, n, &id, 1);
}

int llama_prompt_valid(const engine_model *m, const int32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= engine_model_n_tokens(m)) return 0;
    return 1;
}

int llama_prompts_check(const engine_model *m, const llama_prompts *ps, char *err, size_t errlen)
{
    if (ps->count < 2) return 0;
    if (engine_model_n_slots(m) > 1) {
        bk_err(err, errlen, "several prompts with more than one slot are not reproduced: llama-server runs their "
                            "tasks at once in shared batches, whose bits bankml does not reproduce; serve with -np 1 "
                            "or send one prompt per request");
        return -1;
    }
    for (size_t i = 0; i < ps->count; i++) {
        if (ps->n[i] < engine_model_n_ctx(m) && llama_prompt_valid(m, ps->ids[i], ps->n[i])) continue;
        bk_err(err, errlen, "prompt %zu of %zu %s: llama-server would run the prompts before it, answer that task's "
                            "error and cancel the others while its loop may already have started the next one (what "
                            "its slot holds afterwards depends on timing), so bankml refuses the request; send only "
                            "valid prompts", i + 1, ps->count,
               ps->n[i] >= engine_model_n_ctx(m) ? "exceeds the context" : "has invalid tokens");
        return -1;
    }
    return 0;
}

/* tokenize_mixed: a string tokenized with BOS; an array's strings
 * tokenized (BOS only for a string that comes first) and its other
 * elements read as ids. */
static int prompt_mixed(const engine_model *m, const json_value *v, int32_t **ids, size_t *n, char *err,
                        size_t errlen)
{
    if (v->type == JSON_STRING) return engine_tokenize(m, v->str, v->len, ids, n, err, errlen);
    if (v->type != JSON_ARRAY) {
        bk_err(err, errlen, "[json.exception.type_error.302] type must be string, but is %s", llama_jtype(v));
        return -1;
    }
    for (size_t i = 0; i < v->n; i++) {
        const json_value *it = v->items[i];
        if (it->type != JSON_STRING) {
            if (prompt_id(it, ids, n, err, errlen) != 0) return -1;
            continue;
        }
        int32_t *part = NULL;
        size_t np = 0;
        if (engine_tokenize_with(m, it->str, it->len, i == 0, 1, &part, &np, err, errlen) != 0) return -1;
        int rc = append_ids(ids, n, part, np);
        free(part);
        if (rc != 0) return -1;
    }
    return 0;
}

/* tokenize_input_subprompt: a string or an array of strings and integers
 * mixed (tokenize_mixed), an array of integers (the ids; [] is none), an
 * object with prompt_string (multimodal_data refused: no projector). */
static int prompt_sub(const engine_model *m, const json_value *v, int32_t **ids, size_t *n, char *err, size_t errlen)
{
    int strs = 0, ints = 0;
    for (size_t i = 0; v->type == JSON_ARRAY && i < v->n; i++) {
        strs |= v->items[i]->type == JSON_STRING;
        ints |= prompt_is_int(v->items[i]);
    }
    if (v->type == JSON_STRING || (strs && ints)) return prompt_mixed(m, v, ids, n, err, errlen);
    if (v->type == JSON_ARRAY && (ints || !v->n) && !strs) {
        for (size_t i = 0; i < v->n; i++)   /* json_is_array_of_numbers first */
            if (!prompt_is_int(v->items[i])) {
                bk_err(err, errlen, "%s", PROMPT_SHAPES);
                return -1;
            }
        for (size_t i = 0; i < v->n; i++)
            if (prompt_id(v->items[i], ids, n, err, errlen) != 0) return -1;
        return append_ids(ids, n, NULL, 0);
    }
    const json_value *ps = json_get(v, "prompt_string");
    if (ps) {
        if (json_get(v, "multimodal_data")) {
            bk_err(err, errlen, "Multimodal data provided, but model does not support multimodal requests.");
            return -1;
        }
        return prompt_mixed(m, ps, ids, n, err, errlen);
    }
    bk_err(err, errlen, "%s", PROMPT_SHAPES);
    return -1;
}

void llama_prompts_free(llama_prompts *p)
{
    for (size_t i = 0; i < p->count; i++) free(p->ids[i]);
    free(p->ids);
    free(p->n);
    p->ids = NULL;
    p->n = NULL;
    p->count = 0;
}

int llama_read_prompts(const engine_model *m, const json_value *pr, llama_prompts *out, char *err, size_t errlen)
{
    int ints = 0;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; pr->type == JSON_ARRAY && i < pr->n; i++) ints |= prompt_is_int(pr->items[i]);
    size_t count = pr->type == JSON_ARRAY && !ints ? pr->n : 1;
    if (!count) {
        bk_err(err, errlen, "\"prompt\" must not be empty");
        return -1;
    }
    out->ids = calloc(count, sizeof *out->ids);
    out->n = calloc(count, sizeof *out->n);
    if (!out->ids || !out->n) {
        llama_prompts_free(out);
        bk_err(err, errlen, "out of memory reading the prompt");
        return -1;
    }
    out->count = count;
    for (size_t i = 0; i < count; i++) {
        const json_value *sub = pr->type == JSON_ARRAY && !ints ? pr->items[i] : pr;
        if (prompt_sub(m, sub, &out->ids[i], &out->n[i], err, errlen) != 0) {
            llama_prompts_free(out);
            return -1;
        }
    }
    return 0;
}

int llama_prompt_list(const engine_model *m, const llama_pre *pre, serve_resp *resp, llama_prompts *out)
{
    char err[1024];
    int rc;
    memset(out, 0, sizeof *out);
    if (pre->chat) {
        jbuf p;
        int32_t *ids = NULL;
        size_t n = 0;
        jbuf_init(&p);
        rc = llama_check_render(m, pre->body, pre->messages, err, sizeof err) != 0 ? -2
             : engine_render_chat(m, pre->messages, &pre->topts, &p, err, sizeof err);
        if (rc == 0) rc = engine_tokenize(m, p.p ? p.p : "", p.len, &ids, &n, err, sizeof err);
        jbuf_free(&p);
        if (rc == 0) {
            out->ids = malloc(sizeof *out->ids);
            out->n = malloc(sizeof *out->n);
            if (!out->ids || !out->n) {
                free(ids);
                llama_prompts_free(out);
                bk_err(err, sizeof err, "out of memory reading the prompt");
                rc = -1;
            } else {
                out->ids[0] = ids;
                out->n[0] = n;
                out->count = 1;
            }
        }
    } else {
        rc = llama_read_prompts(m, pre->prompt, out, err, sizeof err);
    }
    if (rc != 0) llama_reply_err(resp, rc == -2 ? 500 : 400, err);   /* -2: --no-jinja without a format */
    return rc;
}

const json_value *llama_response_fields(const json_value *body)
{
    const json_value *v = json_get(body, "response_fields");
    if (!v || v->type != JSON_ARRAY || !v->n) return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (v->items[i]->type != JSON_STRING) return NULL;
    return v;
}
