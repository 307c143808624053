/*
 * llama_chat.c -- the chat-format layer on /v1/chat/completions, as
 * llama-server b11669 runs it with --jinja: oaicompat_chat_params_parse's
 * chat inputs (tools, tool_choice, parallel_tool_calls, reasoning_format,
 * response_format / json_schema), common_chat_templates_apply_jinja's
 * parameters for the template (src/text/chat_gen.c for the templates that
 * take the differential autoparser), the llama_params they become (grammar,
 * grammar_lazy, grammar_triggers, preserved_tokens, the added stops, the
 * reasoning budget's tags, the generation prompt's prefill), and
 * task_result_state::update_chat_msg over the answer (common_chat_parse,
 * set_tool_call_ids, common_chat_msg_diff::compute_diffs) with the OpenAI
 * shapes it is written in. See llama_json.h.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "api/llama_json.h"
#include "sampling/json_schema.h"
#include "sampling/peg_grammar.h"

void llama_chat_init(llama_chat *c)
{
    memset(c, 0, sizeof *c);
    jbuf_init(&c->gp);
    chat_msg_init(&c->msg);
}

void llama_chat_free(llama_chat *c)
{
    if (c->has_params) chat_gen_free(&c->p);
    jbuf_free(&c->gp);
    chat_msg_free(&c->msg);
    for (size_t i = 0; i < c->n_ids; i++) free(c->ids[i]);
    free(c->ids);
    json_free(c->schema_doc);
    memset(c, 0, sizeof *c);
}

static int lc_is(const json_value *v, const char *s)
{
    return v && v->type == JSON_STRING && v->len == strlen(s) && !memcmp(v->str, s, v->len);
}

/* nlohmann's empty(): null, {} and [] are empty; other values are not */
static int lc_empty(const json_value *v)
{
    return !v || v->type == JSON_NULL || ((v->type == JSON_OBJECT || v->type == JSON_ARRAY) && v->n == 0);
}

/* oaicompat_chat_params_parse's json_schema: the body's json_schema, replaced
 * by response_format's (json_object: its schema, when it has one or there is
 * no json_schema; json_schema: json_schema.schema), {} made {"type":"object"}.
 * NULL for none (the type check is llama_fields_check's). */
static const json_value *lc_schema(const json_value *body, llama_chat *c)
{
    static const char OBJ[] = "{\"type\":\"object\"}";
    const json_value *js = json_get(body, "json_schema"), *rf = json_get(body, "response_format");
    if (rf) {
        const json_value *ty = rf->type == JSON_OBJECT ? json_get(rf, "type") : NULL;
        if (lc_is(ty, "json_object")) {
            const json_value *s = json_get(rf, "schema");
            if (s && s->type == JSON_NULL) s = NULL;
            if (s || lc_empty(js)) {
                js = s;
                if (!s) c->want_object = 1;   /* json_value's default: {} */
            }
        } else if (lc_is(ty, "json_schema")) {
            const json_value *w = json_get(rf, "json_schema");
            js = w && w->type == JSON_OBJECT ? json_get(w, "schema") : NULL;
            if (js && js->type == JSON_NULL) js = NULL;
            if (!js) c->want_object = 1;
        }
    }
    if ((js && js->type == JSON_OBJECT && js->n == 0) || c->want_object) {
        char e[64];
        if (!c->schema_doc) c->schema_doc = json_parse(OBJ, sizeof OBJ - 1, e, sizeof e);
        return c->schema_doc;
    }
    return js && js->type != JSON_NULL ? js : NULL;
}

/* The one place a template's parameters come from (common_chat_try_specialized_template, then the autoparser):
 * the specialised parsers (chat_specialized != CA_SPEC_NONE) are not ported, so a request that needs one is
 * refused with the reason; CHAT_GEN_OK with c->p filled, 1 when the template has no parser bankml runs (the
 * request is answered as before: content only), or -1 with *status and err. */
/* The specialised inits whose prompt side bankml renders as b11669 does: the others rewrite the messages
 * before the render or set their own generation prompt (docs/modules/chat_spec.md, the caller's part), which
 * is not reproduced yet. */
static int lc_spec_playable(int spec)
{
    switch (spec) {
    case CA_SPEC_QWEN3_CODER: case CA_SPEC_FUNCTIONARY_V3_2: case CA_SPEC_KIMI_K2: case CA_SPEC_KIMI_K3:
    case CA_SPEC_GIGACHAT_V3: case CA_SPEC_COHERE2MOE: case CA_SPEC_MINICPM5: case CA_SPEC_MINIMAX_M3:
    case CA_SPEC_LING3:
    case CA_SPEC_GPT_OSS:   /* thinking / content rewrite and <|return|>: template.c's render */
    case CA_SPEC_MINISTRAL_3:   /* thinking / text content blocks: template.c's render */
        return 1;
    }
    return 0;
}

static int lc_params(engine_model *m, const chat_gen_inputs *in, int need, llama_chat *c, int *status, char *err,
                     size_t errlen)
{
    int spec = 0;
    const char *why = NULL;
    char why2[512];
    const chat_analysis *a = engine_model_chat(m, &spec, &why);
    if (spec != CA_SPEC_NONE && !lc_spec_playable(spec)) {
        if (!need) return 1;
        *status = 400;
        bk_err(err, errlen, "this template takes b11669's specialised chat parser \"%s\" (common/parsers/), whose "
               "prompt side (the messages it rewrites, or its own generation prompt) bankml does not reproduce yet: "
               "tools (tool_choice other than \"none\") and response_format / json_schema on chat are refused for "
               "it; send the request without them", chat_specialized_name((ca_specialized)spec));
        return -1;
    }
    if (spec != CA_SPEC_NONE) {   /* common_chat_try_specialized_template: the template's own init */
        size_t tl = 0;
        const char *t = engine_model_template(m, &tl);
        int rc = chat_gen_specialized((ca_specialized)spec, t, tl, in, &c->p, why2, sizeof why2);
        c->has_params = 1;
        if (rc == CHAT_GEN_OK) return 0;
        if (!need && rc == CHAT_GEN_UNSUPPORTED) return 1;
        *status = 400;
        bk_err(err, errlen, "%s", why2);
        return -1;
    }
    if (!a) {
        if (!need) return 1;
        *status = 400;
        bk_err(err, errlen, "Unable to generate parser for this template. Automatic parser generation failed: %s",
               why ? why : "");
        return -1;
    }
    int rc = chat_gen(a, in, &c->p, why2, sizeof why2);
    c->has_params = 1;
    if (rc == CHAT_GEN_OK) return 0;
    *status = 400;
    if (rc == CHAT_GEN_UNSUPPORTED) bk_err(err, errlen, "%s", why2);
    else bk_err(err, errlen, "Unable to generate parser for this template. Automatic parser generation failed: %s",
                why2);
    return -1;
}

/* A JSON array of strings. */
static void lc_put_strs(jbuf *b, char *const *v, size_t n)
{
    jbuf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i) jbuf_putc(b, ',');
        json_put_cstr(b, v[i]);
    }
    jbuf_putc(b, ']');
}

/* A body member copied as it is (the fields llama_params takes through). */
static void lc_copy(jbuf *b, const json_value *body, const char *key)
{
    const json_value *v = json_get(body, key);
    if (!v) return;
    jbuf_printf(b, ",\"%s\":", key);
    json_put_value(b, v);
}

static const char *const LC_BUDGET[] = {"reasoning_budget_tokens", "reasoning_budget_start_tag",
                                        "reasoning_budget_end_tags", "reasoning_budget_end_tag",
                                        "reasoning_budget_message"};

/* The budget's fields as the body gives them (a template without thinking tags: b11669 copies them through). */
static void lc_copy_budget(jbuf *b, const json_value *body)
{
    for (size_t i = 0; i < sizeof LC_BUDGET / sizeof LC_BUDGET[0]; i++) lc_copy(b, body, LC_BUDGET[i]);
}

/* json_value(body, key, -1) of an int field */
static long lc_int(const json_value *body, const char *key, long dflt)
{
    const json_value *v = json_get(body, key);
    int64_t x;
    if (v && v->type == JSON_NUMBER && json_as_i64(v, &x)) return (long)x;
    return dflt;
}

/* The llama_params the chat layer sets, as JSON the completion schema's readers take. */
static int lc_overlay(const llama_api_opts *lo, const json_value *body, llama_chat *c, jbuf *ov)
{
    const chat_gen_params *p = &c->p;
    jbuf_puts(ov, "{\"grammar_lazy\":");
    jbuf_puts(ov, p->has_grammar && p->grammar_lazy ? "true" : "false");
    if (p->has_grammar) {
        char *g = NULL;
        size_t gn = 0;
        if (peg_build_grammar(&p->arena, p->grammar_lazy, &g, &gn) != 0) return -1;
        jbuf_puts(ov, ",\"grammar\":");
        json_put_str(ov, g, gn);
        free(g);
    }
    jbuf_puts(ov, ",\"grammar_triggers\":[");
    for (size_t i = 0; p->has_grammar && p->grammar_lazy && i < p->ntriggers; i++) {
        jbuf_printf(ov, "%s{\"type\":%d,\"value\":", i ? "," : "", p->triggers[i].type);
        json_put_cstr(ov, p->triggers[i].value);
        jbuf_putc(ov, '}');
    }
    jbuf_puts(ov, "],\"preserved_tokens\":");
    lc_put_strs(ov, p->preserved_tokens, p->npreserved);
    if (p->thinking_end_tag) {
        /* json_value(body, "reasoning_budget_tokens", json_value(body, "thinking_budget_tokens", -1)), -1: the
         * server's --reasoning-budget */
        long budget = lc_int(body, "reasoning_budget_tokens", lc_int(body, "thinking_budget_tokens", -1));
        if (budget == -1) budget = lo ? lo->reasoning_budget : -1;
        jbuf_printf(ov, ",\"reasoning_budget_tokens\":%ld,\"reasoning_budget_start_tag\":", budget);
        json_put_cstr(ov, p->thinking_start_tag);
        jbuf_puts(ov, ",\"reasoning_budget_end_tags\":");
        lc_put_strs(ov, &p->thinking_end_tag, 1);
        /* json_value(body, "reasoning_budget_message", --reasoning-budget-message): always set, so the end tag
         * alone is forced when there is no message */
        const json_value *msg = json_get(body, "reasoning_budget_message");
        jbuf_puts(ov, ",\"reasoning_budget_message\":");
        if (msg && msg->type == JSON_STRING) json_put_str(ov, msg->str, msg->len);
        else json_put_cstr(ov, lo && lo->reasoning_budget_message ? lo->reasoning_budget_message : "");
        lc_copy(ov, body, "reasoning_budget_end_tag");
    } else {
        lc_copy_budget(ov, body);
    }
    jbuf_putc(ov, '}');
    return 0;
}

/* common_sampler_init's prefill tokens: the generation prompt tokenized (specials parsed), a first token
 * whose piece starts with a space dropped when the prompt does not. */
static int lc_prefill(const engine_model *m, const llama_chat *c, engine_request *rq, char *err, size_t errlen)
{
    if (!c->gp.len) return 0;
    int32_t *ids = NULL;
    size_t n = 0;
    if (engine_tokenize_with(m, c->gp.p, c->gp.len, 0, 1, &ids, &n, err, errlen) != 0) return -1;
    size_t k = 0;
    if (n) {
        jbuf pc;
        jbuf_init(&pc);
        engine_piece(m, ids[0], 1, &pc);
        if (pc.len && isspace((unsigned char)pc.p[0]) && !isspace((unsigned char)c->gp.p[0])) k = 1;
        jbuf_free(&pc);
    }
    memmove(ids, ids + k, (n - k) * sizeof *ids);
    rq->prefill = ids;
    rq->n_prefill = n - k;
    return 0;
}

/* --no-jinja (common_chat_templates_apply_legacy): the chat's JSON schema becomes the grammar through
 * json_schema_to_grammar (replacing the body's grammar), an answer that is not parsed; its refusal is
 * llama-server's 400 "JSON schema conversion failed:\n...". */
static int lc_legacy_schema(const engine_model *m, const json_value *body, engine_request *rq, llama_chat *c,
                            char *err, size_t errlen)
{
    const json_value *js = lc_schema(body, c);
    char *g = NULL;
    size_t gn = 0;
    int rc = js ? json_schema_to_gbnf(js, 0, &g, &gn) : JSON_SCHEMA_OK;
    if (rc != JSON_SCHEMA_OK) {
        bk_err(err, errlen, "%s", g ? g : "out of memory");
        free(g);
        return -1;
    }
    jbuf ov;
    jbuf_init(&ov);
    jbuf_puts(&ov, "{\"grammar_triggers\":[],\"preserved_tokens\":[]");
    if (js) {
        jbuf_puts(&ov, ",\"grammar\":");
        json_put_str(&ov, g, gn);
    }
    lc_copy_budget(&ov, body);
    jbuf_putc(&ov, '}');
    free(g);
    char perr[128];
    json_value *o = json_parse(ov.p, ov.len, perr, sizeof perr);
    jbuf_free(&ov);
    if (!o) {
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    rc = llama_fields_read_chat(m, o, rq, err, errlen);
    json_free(o);
    return rc;
}

/* A chat answered without the template's parser (a specialised template, a continued message): the budget's
 * fields would take the template's thinking tags in b11669, which bankml does not have for it. */
static int lc_inactive(const json_value *body, char *err, size_t errlen)
{
    static const char *const more[] = {"thinking_budget_tokens"};
    for (size_t i = 0; i < sizeof LC_BUDGET / sizeof LC_BUDGET[0] + 1; i++) {
        const char *k = i < sizeof LC_BUDGET / sizeof LC_BUDGET[0] ? LC_BUDGET[i] : more[0];
        const json_value *v = json_get(body, k);
        if (!v || v->type == JSON_NULL || (strstr(k, "_tokens") && lc_int(body, k, 0) == -1)) continue;
        bk_err(err, errlen, "%s: the reasoning budget on chat takes the template's thinking tags, and bankml does "
               "not reproduce this template's chat format for this request (a specialised parser, or a continued "
               "final message); send the request without it", k);
        return -1;
    }
    return 0;
}

int llama_chat_prepare(engine_model *m, const llama_api_opts *lo, const json_value *body, const llama_pre *pre,
                       engine_request *rq, llama_chat *c, int *status, char *err, size_t errlen)
{
    *status = 400;
    if (!pre->chat) return 0;
    if (!engine_model_jinja(m)) return lc_legacy_schema(m, body, rq, c, err, errlen);
    chat_gen_inputs in;
    memset(&in, 0, sizeof in);
    int tools_on = pre->has_tools && pre->tool_choice != LLAMA_TOOL_CHOICE_NONE;
    in.tools = pre->has_tools ? pre->topts.tools : NULL;
    in.tool_choice = pre->tool_choice == LLAMA_TOOL_CHOICE_NONE ? CHAT_TOOL_CHOICE_NONE
                   : pre->tool_choice == LLAMA_TOOL_CHOICE_REQUIRED ? CHAT_TOOL_CHOICE_REQUIRED
                                                                    : CHAT_TOOL_CHOICE_AUTO;
    in.parallel_tool_calls = engine_model_caps(m)->supports_parallel_tool_calls;
    int b;
    if (json_is_bool(json_get(body, "parallel_tool_calls"), &b)) in.parallel_tool_calls = b;
    in.reasoning_format = lo ? (chat_reasoning_format)lo->reasoning_format : CHAT_REASONING_DEEPSEEK;
    const json_value *rf = json_get(body, "reasoning_format");
    if (rf) {
        int f;
        if (rf->type != JSON_STRING) {   /* nlohmann's type error: llama-server's 400 */
            bk_err(err, errlen, "[json.exception.type_error.302] type must be string, but is %s", llama_jtype(rf));
            return -1;
        }
        if (llama_reasoning_format_from_name(rf->str, &f) != 0) {
            *status = 500;
            bk_err(err, errlen, "Unknown reasoning format: %.*s", (int)(rf->len > 200 ? 200 : rf->len), rf->str);
            return -1;
        }
        in.reasoning_format = (chat_reasoning_format)f;
    }
    in.json_schema = lc_schema(body, c);
    in.thinking_disabled = pre->topts.enable_thinking == 0;
    int need = tools_on || (in.json_schema && in.json_schema->type == JSON_OBJECT && in.json_schema->n);
    if (pre->topts.continue_final != TEMPLATE_CONTINUE_NONE) {
        if (!need) return lc_inactive(body, err, errlen);   /* today's path: the continued content, the answer */
        bk_err(err, errlen, "a continued final message (continue_final_message, or an assistant prefill) beside "
               "tools or response_format changes b11669's parser's generation prompt, which bankml does not "
               "reproduce yet; send the request without one of them");
        return -1;
    }
    char gerr[512];
    if (engine_generation_prompt_with(m, pre->messages, &pre->topts, &c->gp, gerr, sizeof gerr) != 0) {
        if (!need) return lc_inactive(body, err, errlen);   /* the render's own error comes with the prompt */
        bk_err(err, errlen, "%s", gerr);
        return -1;
    }
    in.generation_prompt = c->gp.p ? c->gp.p : "";
    in.generation_prompt_len = c->gp.len;
    int rc = lc_params(m, &in, need, c, status, err, errlen);
    if (rc < 0) return -1;
    if (rc > 0) return lc_inactive(body, err, errlen);
    c->active = 1;
    c->format = c->p.format;   /* peg-native, or a specialised init's own mapper (gemma4, minimax-m3) */
    /* llama_params: the grammar and its triggers, the preserved tokens, the budget's tags, then the stops */
    jbuf ov;
    jbuf_init(&ov);
    char perr[256];
    json_value *o = NULL;
    int ok = lc_overlay(lo, body, c, &ov) == 0 && (o = json_parse(ov.p, ov.len, perr, sizeof perr)) != NULL;
    jbuf_free(&ov);
    if (!ok) {
        *status = 500;
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    rc = llama_fields_read_chat(m, o, rq, err, errlen);
    json_free(o);
    if (rc != 0) return -1;
    for (size_t i = 0; i < c->p.nstops && rq->n_stops < ENGINE_MAX_STOPS; i++)
        if (c->p.additional_stops[i][0]) {
            rq->stops[rq->n_stops] = c->p.additional_stops[i];
            rq->stop_lens[rq->n_stops++] = strlen(c->p.additional_stops[i]);
        }
    rq->grammar_prefill = c->p.has_grammar && !c->p.grammar_lazy;
    if (lc_prefill(m, c, rq, err, errlen) != 0) return -1;
    return 0;
}

int llama_reasoning_format_from_name(const char *s, int *out)
{
    if (!strcmp(s, "none")) *out = CHAT_REASONING_NONE;
    else if (!strcmp(s, "auto")) *out = CHAT_REASONING_AUTO;
    else if (!strcmp(s, "deepseek")) *out = CHAT_REASONING_DEEPSEEK;
    else if (!strcmp(s, "deepseek-legacy")) *out = CHAT_REASONING_DEEPSEEK_LEGACY;
    else return -1;
    return 0;
}

static int lc_msg_empty(const chat_msg *m) { return !m->content.len && !m->reasoning.len && !m->ncalls; }

/* set_tool_call_ids: each call's id is the one first seen at its index (the parser's, or a new random one). */
static int lc_ids(llama_chat *c, chat_msg *m)
{
    for (size_t i = 0; i < m->ncalls; i++) {
        if (c->n_ids <= i) {
            char **nn = realloc(c->ids, (c->n_ids + 1) * sizeof *nn);
            if (!nn) return -1;
            c->ids = nn;
            jbuf *id = &m->calls[i].id;
            char *s = malloc(id->len ? id->len + 1 : 33);
            if (!s) return -1;
            if (id->len) {
                memcpy(s, id->p, id->len);
                s[id->len] = 0;
            } else {
                llama_random_id(s, 33);
            }
            c->ids[c->n_ids++] = s;
        }
        jbuf_reset(&m->calls[i].id);
        jbuf_puts(&m->calls[i].id, c->ids[i]);
    }
    return 0;
}

int llama_chat_update(llama_chat *c, const char *text, size_t n, int is_partial, chat_msg_delta **d, size_t *nd,
                      char *err, size_t errlen)
{
    *d = NULL;
    *nd = 0;
    chat_msg m;
    const char *gp = c->p.generation_prompt ? c->p.generation_prompt : "";
    int rc = chat_peg_parse(&c->p.arena, c->format, gp, c->p.generation_prompt_len, text ? text : "", n, is_partial,
                            &m, err, errlen);
    if (rc != CHAT_PEG_OK) {
        chat_msg_free(&m);
        return -1;
    }
    if (lc_msg_empty(&m)) {
        chat_msg_free(&m);
        return 0;
    }
    if (lc_ids(c, &m) != 0) {
        chat_msg_free(&m);
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    jbuf e;
    jbuf_init(&e);
    int k = chat_msg_diffs(&c->msg, &m, d, &e);
    if (k < 0) {
        bk_err(err, errlen, "%.*s", (int)e.len, e.p ? e.p : "");
        jbuf_free(&e);
        chat_msg_free(&m);
        return -1;
    }
    jbuf_free(&e);
    *nd = (size_t)k;
    chat_msg_free(&c->msg);
    c->msg = m;
    return 0;
}

void llama_chat_put_delta(jbuf *b, const chat_msg_delta *d)
{
    int any = 0;
    jbuf_putc(b, '{');
    if (d->reasoning_delta.len) {
        jbuf_puts(b, "\"reasoning_content\":");
        json_put_str_nl(b, d->reasoning_delta.p, d->reasoning_delta.len);
        any = 1;
    }
    if (d->content_delta.len) {
        jbuf_puts(b, any ? ",\"content\":" : "\"content\":");
        json_put_str_nl(b, d->content_delta.p, d->content_delta.len);
        any = 1;
    }
    if (d->tool_index != PEG_INVALID) {
        const chat_tool_call *t = &d->call;
        jbuf_printf(b, "%s\"tool_calls\":[{\"index\":%zu", any ? "," : "", d->tool_index);
        if (t->id.len) {
            jbuf_puts(b, ",\"id\":");
            json_put_str_nl(b, t->id.p, t->id.len);
            jbuf_puts(b, ",\"type\":\"function\"");
        }
        if (t->name.len || t->arguments.len) {
            jbuf_puts(b, ",\"function\":{");
            if (t->name.len) {
                jbuf_puts(b, "\"name\":");
                json_put_str_nl(b, t->name.p, t->name.len);
            }
            if (t->arguments.len) {
                jbuf_puts(b, t->name.len ? ",\"arguments\":" : "\"arguments\":");
                json_put_str_nl(b, t->arguments.p, t->arguments.len);
            }
            jbuf_putc(b, '}');
        }
        jbuf_puts(b, "}]");
    }
    jbuf_putc(b, '}');
}

void llama_chat_put_message(jbuf *b, const chat_msg *m, const char *raw, size_t raw_len)
{
    jbuf_puts(b, "{\"role\":\"assistant\",\"content\":");
    if (lc_msg_empty(m)) {   /* an empty parse: the raw text */
        json_put_str_nl(b, raw ? raw : "", raw_len);
        jbuf_putc(b, '}');
        return;
    }
    json_put_str_nl(b, m->content.p ? m->content.p : "", m->content.len);
    if (m->reasoning.len) {
        jbuf_puts(b, ",\"reasoning_content\":");
        json_put_str_nl(b, m->reasoning.p, m->reasoning.len);
    }
    if (m->ncalls) {
        jbuf_puts(b, ",\"tool_calls\":[");
        for (size_t i = 0; i < m->ncalls; i++) {
            const chat_tool_call *t = &m->calls[i];
            jbuf_puts(b, i ? ",{\"type\":\"function\",\"function\":{\"name\":" : "{\"type\":\"function\",\"function\":"
                             "{\"name\":");
            json_put_str_nl(b, t->name.p ? t->name.p : "", t->name.len);
            jbuf_puts(b, ",\"arguments\":");
            json_put_str_nl(b, t->arguments.p ? t->arguments.p : "", t->arguments.len);
            jbuf_putc(b, '}');
            if (t->id.len) {
                jbuf_puts(b, ",\"id\":");
                json_put_str_nl(b, t->id.p, t->id.len);
            }
            jbuf_putc(b, '}');
        }
        jbuf_putc(b, ']');
    }
    jbuf_putc(b, '}');
}
