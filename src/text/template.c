/*
 * template.c -- a Jinja-subset interpreter for chat templates: the entry
 * points of template.h and llama-server's chat layer.
 *
 * It reproduces llama.cpp's own Jinja engine (common/jinja at b11669), not
 * Python's Jinja2: where the two differ (output of none/objects, `none|default`,
 * dynamic scoping of macros, the lexer's lstrip quirks, ...), the engine does
 * what llama.cpp does, because the oracle is llama-server's /apply-template.
 *
 * The engine is five files sharing template_int.h, in the order a render
 * runs:
 *   template_value.c    runtime (an arena, limits, the error exit), values
 *                       (none/bool/int/float/string/array/tuple/object/func/
 *                       kwarg) and scopes
 *   template_parse.c    lexer (source text to tokens, with llama.cpp's
 *                       whitespace control) and parser (tokens to an AST)
 *   template_eval.c     evaluator: expressions, statements, scopes, macros, loops
 *   template_builtins.c filters, tests, methods, global functions
 *   template.c          (this file) entry glue: JSON to values, the base scope,
 *                       one run; the chat layer: llama-server's message
 *                       preparation and caps probing
 *
 * Memory: every allocation of a render goes to an arena freed at the end, so
 * errors can leave through longjmp without leaking, and a budget on the
 * arena bounds what a hostile template can take.
 */
#include "text/template.h"
#include "text/template_int.h"

#include <ctype.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ entry glue */



static void env_from_obj(rt *R, env *E, val *o) {
    for (size_t i = 0; i < o->u.o.n; i++) tpl_env_set(R, E, tpl_to_str(R, o->u.o.k[i])->u.s.p, o->u.o.v[i]);
}



/* common_chat_templates_init's default when the model has no template */
const char template_chatml_fallback[] =
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\n' -}}\n"
    "{%- endif -%}";

void template_opts_init(template_opts *o) {
    memset(o, 0, sizeof *o);
    o->add_generation_prompt = 1;
    o->enable_thinking = -1;
    o->preserve_reasoning = 1;
    o->prefill_assistant = 1;
}

int template_check(const char *tmpl, size_t tmpl_len, char *err, size_t errlen) {
    rt R;
    tpl_rt_init(&R, err, errlen, 0);
    jmp_buf jb;
    R.on_error = &jb;
    volatile int rc = 0;
    if (setjmp(jb)) {
        rc = -1;
    } else {
        nlist prog;
        tpl_compile(&R, tmpl, tmpl_len, &prog);
    }
    tpl_free_all(&R);
    return rc;
}

int template_render_globals(const char *tmpl, size_t tmpl_len, const json_value *globals,
                            int64_t now, jbuf *out, char *err, size_t errlen) {
    rt R;
    tpl_rt_init(&R, err, errlen, now);
    jmp_buf jb;
    R.on_error = &jb;
    volatile int rc = -1;
    if (setjmp(jb) == 0) {
        nlist prog;
        tpl_compile(&R, tmpl, tmpl_len, &prog);
        env *E = tpl_base_env(&R);
        if (globals && globals->type == JSON_OBJECT) env_from_obj(&R, E, tpl_from_json(&R, globals));
        sbuf o;
        if (tpl_run(&R, &prog, E, &o) == 0) {
            jbuf_put(out, o.p ? o.p : "", o.n);
            rc = out->oom ? -1 : 0;
            if (rc) snprintf(err, errlen, "out of memory");
        }
    }
    tpl_free_all(&R);
    return rc;
}

/* ------------------------------------------------------------ chat layer
 *
 * What llama-server does between the HTTP body and the Jinja engine
 * (tools/server/server-common.cpp oaicompat_chat_params_parse, then
 * common/chat.cpp common_chat_templates_apply_jinja and
 * common_chat_template_direct_apply_impl).
 */

static const json_value *jget(const json_value *o, const char *k) {
    return o && o->type == JSON_OBJECT ? json_get(o, k) : NULL;
}

static int jstr_is(const json_value *v, const char *s) {
    return v && v->type == JSON_STRING && v->len == strlen(s) && !memcmp(v->str, s, v->len);
}

/* a member that must be a string when present (nlohmann's get<std::string>) */
static const char *jstr_member(rt *R, const json_value *o, const char *k, size_t *n) {
    const json_value *v = json_get(o, k);
    if (!v) { *n = 0; return NULL; }
    if (v->type != JSON_STRING) tpl_fail(R, "failed to parse messages: '%s' must be a string", k);
    *n = v->len;
    return v->str;
}

/* std::isspace trim, as llama.cpp's trim_whitespace */
static val *trim_ws(rt *R, const char *p, size_t n) {
    size_t a = 0, b = n;
    while (a < b && isspace((unsigned char)p[a])) a++;
    while (b > a && isspace((unsigned char)p[b - 1])) b--;
    return tpl_mk_strn(R, p + a, b - a);
}

/* the i-th element of a message's tool_calls as nlohmann iterates it: an
 * array's items, an object's values, nothing for null, else the value itself */
static size_t tool_calls_n(const json_value *tcs) {
    if (!tcs || tcs->type == JSON_NULL) return 0;
    return tcs->type == JSON_ARRAY || tcs->type == JSON_OBJECT ? tcs->n : 1;
}
static const json_value *tool_calls_at(const json_value *tcs, size_t i) {
    return tcs->type == JSON_ARRAY || tcs->type == JSON_OBJECT ? tcs->items[i] : tcs;
}

/* a message's tool_calls as common_chat_msg::to_json_oaicompat writes them:
 * {"type":"function","function":{"name","arguments"},"id"?}, arguments a
 * string (an object or other value as nlohmann's compact dump); NULL when
 * there are none. The API checked them with llama-server's words first. */
static val *prepare_tool_calls(rt *R, const json_value *tcs) {
    size_t n = tool_calls_n(tcs);
    if (!n) return NULL;
    val *out = tpl_mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < n; i++) {
        const json_value *tc = tool_calls_at(tcs, i);
        if (!jstr_is(jget(tc, "type"), "function")) tpl_fail(R, "Failed to parse messages: a tool call's type must be \"function\"");
        const json_value *fc = jget(tc, "function"), *name = jget(fc, "name"), *args = jget(fc, "arguments"),
                         *id = jget(tc, "id");
        if (!name || name->type != JSON_STRING) tpl_fail(R, "Failed to parse messages: a tool call needs a function name (a string)");
        if (!args) tpl_fail(R, "Failed to parse messages: a tool call needs function arguments");
        if (id && id->type != JSON_STRING) tpl_fail(R, "Failed to parse messages: a tool call's id must be a string");
        val *f = tpl_mk_obj(R);
        tpl_obj_set_s(R, f, "name", tpl_mk_strn(R, name->str, name->len));
        if (args->type == JSON_STRING) {
            tpl_obj_set_s(R, f, "arguments", tpl_mk_strn(R, args->str, args->len));
        } else {
            jbuf d;
            jbuf_init(&d);
            json_put_nl_dump(&d, args, -1);
            if (d.oom) tpl_fail(R, "out of memory");
            tpl_obj_set_s(R, f, "arguments", tpl_mk_strn(R, d.p ? d.p : "", d.len));
            jbuf_free(&d);
        }
        val *v = tpl_mk_obj(R);
        tpl_obj_set_s(R, v, "type", tpl_mk_str(R, "function"));
        tpl_obj_set_s(R, v, "function", f);
        if (id && id->len) tpl_obj_set_s(R, v, "id", tpl_mk_strn(R, id->str, id->len));
        tpl_arr_push(R, out, v);
    }
    return out;
}

/* func_args_not_string: with object-argument caps, each call's arguments
 * string parsed back into a value (the API sends nlohmann's words for text
 * that is not JSON before it gets here) */
static void args_to_objects(rt *R, val *ms) {
    for (size_t i = 0; i < ms->u.a.n; i++) {
        val *calls = tpl_obj_get_s(ms->u.a.v[i], "tool_calls");
        for (size_t k = 0; calls && tpl_is_arr(calls) && k < calls->u.a.n; k++) {
            val *f = tpl_obj_get_s(calls->u.a.v[k], "function"), *a = f ? tpl_obj_get_s(f, "arguments") : NULL;
            if (!a || a->t != VT_STR) continue;
            char e[256];
            json_value *j = json_parse(a->u.s.p, a->u.s.n, e, sizeof e);
            if (!j) tpl_fail(R, "Failed to parse tool call arguments as JSON: %s", e);
            tpl_obj_set_s(R, f, "arguments", tpl_from_json(R, j));
            json_free(j);
        }
    }
}

/* validates and rebuilds the messages as common_chat_msg::to_json_oaicompat */
static val *prepare_messages(rt *R, const json_value *messages, int trim) {
    if (!messages || messages->type != JSON_ARRAY) tpl_fail(R, "'messages' must be an array");
    val *out = tpl_mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < messages->n; i++) {
        const json_value *m = messages->items[i];
        if (m->type != JSON_OBJECT) tpl_fail(R, "failed to parse messages: a message is not an object");
        const json_value *role = json_get(m, "role"), *content = json_get(m, "content");
        const json_value *tcs = json_get(m, "tool_calls");
        int is_assistant = jstr_is(role, "assistant");
        if (!is_assistant && !content) tpl_fail(R, "all non-assistant messages must contain 'content'");
        if (is_assistant && !content && !tcs)
            tpl_fail(R, "assistant message must contain either 'content' or 'tool_calls'");
        if (content && content->type != JSON_STRING && content->type != JSON_NULL &&
            content->type != JSON_ARRAY)
            tpl_fail(R, "expected 'content' to be a string or an array");
        if (content && content->type == JSON_ARRAY)
            for (size_t k = 0; k < content->n; k++) {
                const json_value *ty = jget(content->items[k], "type");
                if (jstr_is(ty, "image_url") || jstr_is(ty, "input_audio") ||
                    jstr_is(ty, "input_video") || jstr_is(ty, "video_url"))
                    tpl_fail(R, "media input is not supported (no multimodal projector)");
                if (!jstr_is(ty, "text")) tpl_fail(R, "unsupported content[].type");
            }
        if (!role) tpl_fail(R, "failed to parse messages: missing 'role'");
        if (role->type != JSON_STRING) tpl_fail(R, "failed to parse messages: 'role' must be a string");

        val *jm = tpl_mk_obj(R);
        tpl_obj_set_s(R, jm, "role", tpl_mk_strn(R, role->str, role->len));
        if (content && content->type == JSON_STRING && content->len) {
            tpl_obj_set_s(R, jm, "content",
                      trim ? trim_ws(R, content->str, content->len) : tpl_mk_strn(R, content->str, content->len));
        } else if (content && content->type == JSON_ARRAY && content->n) {
            val *parts = tpl_mk_arr(R, VT_ARRAY);
            for (size_t k = 0; k < content->n; k++) {
                const json_value *t = json_get(content->items[k], "text");
                if (!t || t->type != JSON_STRING) tpl_fail(R, "failed to parse messages: content part text must be a string");
                val *p = tpl_mk_obj(R);
                tpl_obj_set_s(R, p, "type", tpl_mk_str(R, "text"));
                tpl_obj_set_s(R, p, "text", trim ? trim_ws(R, t->str, t->len) : tpl_mk_strn(R, t->str, t->len));
                tpl_arr_push(R, parts, p);
            }
            tpl_obj_set_s(R, jm, "content", parts);
        } else {
            tpl_obj_set_s(R, jm, "content", tpl_mk_str(R, ""));
        }
        size_t n;
        const char *s = jstr_member(R, m, "reasoning_content", &n);
        if (s && n) {
            val *rc = trim ? trim_ws(R, s, n) : tpl_mk_strn(R, s, n);
            if (!trim || rc->u.s.n) tpl_obj_set_s(R, jm, "reasoning_content", rc);
        }
        if ((s = jstr_member(R, m, "name", &n)) && n) tpl_obj_set_s(R, jm, "name", tpl_mk_strn(R, s, n));
        if ((s = jstr_member(R, m, "tool_call_id", &n)) && n) tpl_obj_set_s(R, jm, "tool_call_id", tpl_mk_strn(R, s, n));
        val *calls = prepare_tool_calls(R, tcs);
        if (calls) tpl_obj_set_s(R, jm, "tool_calls", calls);
        tpl_arr_push(R, out, jm);
    }
    return out;
}

/* messages_inp_normalizer: string <-> typed content by the template's caps */
static void normalize(rt *R, val *ms, tmpl_caps c) {
    int only_string = c.supports_string_content && !c.supports_typed_content;
    int only_typed = !c.supports_string_content && c.supports_typed_content;
    if (!only_string && !only_typed) return;
    for (size_t i = 0; i < ms->u.a.n; i++) {
        val *m = ms->u.a.v[i];
        val *ct = tpl_obj_get_s(m, "content");
        if (!ct) continue;
        if (only_typed && ct->t == VT_STR) {
            val *p = tpl_mk_obj(R);
            tpl_obj_set_s(R, p, "type", tpl_mk_str(R, "text"));
            tpl_obj_set_s(R, p, "text", ct);
            val *a = tpl_mk_arr(R, VT_ARRAY);
            tpl_arr_push(R, a, p);
            tpl_obj_set_s(R, m, "content", a);
        } else if (only_string && tpl_is_arr(ct)) {
            sbuf b = {0};
            for (size_t k = 0; k < ct->u.a.n; k++) {
                val *t = tpl_obj_get_s(ct->u.a.v[k], "text");
                if (b.n) tpl_sb_putc(R, &b, '\n');
                if (t && t->t == VT_STR) tpl_sb_put(R, &b, t->u.s.p, t->u.s.n);
            }
            tpl_obj_set_s(R, m, "content", tpl_mk_sb(R, &b));
        }
    }
}

static int has(const char *src, const char *s) { return strstr(src, s) != NULL; }
static const char *handler_of(const char *src);

static val *text_block(rt *R, const char *type, const char *key, val *text) {
    val *p = tpl_mk_obj(R);
    tpl_obj_set_s(R, p, "type", tpl_mk_str(R, type));
    tpl_obj_set_s(R, p, key, text);
    return p;
}

/* tools as common_chat_tools_parse_oaicompat reads them and
 * common_chat_tools_to_json_oaicompat rebuilds them: type, then function
 * {name, description ("" when absent), parameters ({} when absent; any JSON,
 * null too)}; NULL when there are none. The API refuses malformed tools
 * first with llama-server's words. */
static val *prepare_tools(rt *R, const json_value *tools) {
    if (!tools || tools->type == JSON_NULL) return NULL;
    if (tools->type != JSON_ARRAY) tpl_fail(R, "Failed to parse tools: Expected 'tools' to be an array");
    if (!tools->n) return NULL;
    val *out = tpl_mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < tools->n; i++) {
        const json_value *t = tools->items[i];
        if (!jstr_is(jget(t, "type"), "function")) tpl_fail(R, "Failed to parse tools: unsupported or missing tool type");
        const json_value *f = jget(t, "function");
        if (!f) tpl_fail(R, "Failed to parse tools: missing tool function");
        const json_value *name = jget(f, "name"), *desc = jget(f, "description"),
                         *params = jget(f, "parameters");
        if (!name || name->type != JSON_STRING) tpl_fail(R, "Failed to parse tools: a tool's name must be a string");
        if (desc && desc->type != JSON_STRING) tpl_fail(R, "Failed to parse tools: a tool's description must be a string");
        val *fn = tpl_mk_obj(R);
        tpl_obj_set_s(R, fn, "name", tpl_from_json(R, name));
        tpl_obj_set_s(R, fn, "description", desc ? tpl_from_json(R, desc) : tpl_mk_str(R, ""));
        tpl_obj_set_s(R, fn, "parameters", params ? tpl_from_json(R, params) : tpl_mk_obj(R));
        val *tv = tpl_mk_obj(R);
        tpl_obj_set_s(R, tv, "type", tpl_mk_str(R, "function"));
        tpl_obj_set_s(R, tv, "function", fn);
        tpl_arr_push(R, out, tv);
    }
    return out;
}


static size_t count_of(const char *src, const char *s) {
    size_t n = 0;
    for (const char *h = src; (h = strstr(h, s)) != NULL; h += strlen(s)) n++;
    return n;
}

/* bankml's stand-in for b11669's default enable_thinking (the template's
 * supports_thinking, found by its analysis): a <think> tag, reasoning_content,
 * or "thinking" other than in the variable enable_thinking itself */
static int guess_thinking(const char *src) {
    return has(src, "<think>") || has(src, "reasoning_content") ||
           count_of(src, "thinking") > count_of(src, "enable_thinking");
}

/* reasoning markers a template may have (bankml's guess, for what it refuses) */
static int guess_reasoning(const char *src) { return strcasestr(src, "think") || strstr(src, "reasoning"); }

/* common_chat_msg::empty() of a message as the API checked it */
static int continue_is_empty(const json_value *m) {
    static const char *const strs[] = {"reasoning_content", "name", "tool_call_id"};
    const json_value *c = json_get(m, "content");
    if (c && ((c->type == JSON_STRING && c->len) || (c->type == JSON_ARRAY && c->n))) return 0;
    if (tool_calls_n(json_get(m, "tool_calls"))) return 0;
    for (size_t i = 0; i < 3; i++) {
        const json_value *v = json_get(m, strs[i]);
        if (v && v->type == JSON_STRING && v->len) return 0;
    }
    return 1;
}

/* COMMON_CHAT_CONTINUATION_AUTO resolved: the reasoning when the message has
 * reasoning and no content, else the content */
static int continue_auto(const json_value *m) {
    const json_value *c = json_get(m, "content"), *r = json_get(m, "reasoning_content");
    int has_content = c && ((c->type == JSON_STRING && c->len) || (c->type == JSON_ARRAY && c->n));
    return r && r->type == JSON_STRING && r->len && !has_content ? TEMPLATE_CONTINUE_REASONING
                                                                 : TEMPLATE_CONTINUE_CONTENT;
}

/* the context common_chat_template_direct_apply_impl builds: messages,
 * bos/eos, enable_thinking, tools (when there are any), the extra context
 * (datetime, date_string, then the server's and the request's kwargs, which
 * replace what they name); preserve_reasoning and reasoning_effort as
 * caps_apply_* set them beneath those */
static env *chat_env(rt *R, const char *src, val *ms, val *tools, const template_opts *o) {
    env *E = tpl_base_env(R);
    int think = o->enable_thinking >= 0 ? o->enable_thinking : guess_thinking(src);
    /* the server's default kwargs, then the request's on top */
    val *kw = tpl_mk_obj(R);
    if (o->preserve_reasoning >= 0) tpl_obj_set_s(R, kw, "preserve_reasoning", tpl_mk_bool(R, o->preserve_reasoning));
    if (o->kwargs && o->kwargs->type == JSON_OBJECT) {
        val *rk = tpl_from_json(R, o->kwargs);
        for (size_t i = 0; i < rk->u.o.n; i++) tpl_obj_set(R, kw, rk->u.o.k[i], rk->u.o.v[i]);
    }
    val *et = tpl_obj_get_s(kw, "enable_thinking");
    if (et && et->t == VT_BOOL) think = et->u.b;
    else if (et && et->t == VT_STR) tpl_fail(R, "invalid type for \"enable_thinking\" (expected boolean, got string)");
    /* reasoning_effort: "none" turns thinking off and drops the kwarg */
    if (o->reasoning_effort && !strcmp(o->reasoning_effort, "none")) {
        think = 0;
        val *nk = tpl_mk_obj(R);
        for (size_t i = 0; i < kw->u.o.n; i++)
            if (!(kw->u.o.k[i]->t == VT_STR && !strcmp(kw->u.o.k[i]->u.s.p, "reasoning_effort")))
                tpl_obj_set(R, nk, kw->u.o.k[i], kw->u.o.v[i]);
        kw = nk;
    } else if (o->reasoning_effort && o->reasoning_effort[0]) {
        tpl_obj_set_s(R, kw, "reasoning_effort", tpl_mk_str(R, o->reasoning_effort));
    }
    val *pr = tpl_obj_get_s(kw, "preserve_reasoning"), *re = tpl_obj_get_s(kw, "reasoning_effort");
    if (pr && pr->t == VT_BOOL) {
        tpl_env_set(R, E, "preserve_thinking", tpl_mk_bool(R, pr->u.b));
        tpl_env_set(R, E, "clear_thinking", tpl_mk_bool(R, !pr->u.b));
        tpl_env_set(R, E, "truncate_history_thinking", tpl_mk_bool(R, !pr->u.b));
        tpl_env_set(R, E, "drop_thinking", tpl_mk_bool(R, !pr->u.b));
    }
    if (re && re->t == VT_STR && re->u.s.n) {
        tpl_env_set(R, E, "reasoning_effort", re);
        tpl_env_set(R, E, "reasoning_strength", re);
    }
    tpl_env_set(R, E, "messages", ms);
    tpl_env_set(R, E, "bos_token", tpl_mk_str(R, o->bos_token ? o->bos_token : ""));
    tpl_env_set(R, E, "eos_token", tpl_mk_str(R, o->eos_token ? o->eos_token : ""));
    tpl_env_set(R, E, "enable_thinking", tpl_mk_bool(R, think));
    if (tools) tpl_env_set(R, E, "tools", tools);
    char date[64];
    struct tm tm;
    localtime_r(&R->now, &tm);
    strftime(date, sizeof date, "%b %d %Y", &tm);
    tpl_env_set(R, E, "datetime", tpl_mk_str(R, date));
    strftime(date, sizeof date, "%d %b %Y", &tm);
    tpl_env_set(R, E, "date_string", tpl_mk_str(R, date));
    env_from_obj(R, E, kw);
    return E;
}

/* one render of the prepared context, with or without the generation
 * prompt, and the bos/eos the tokenizer adds again stripped */
static void chat_run(rt *R, const nlist *prog, env *E0, int agp, const template_opts *o, sbuf *res) {
    env *E = tpl_env_copy(R, E0);
    if (agp) tpl_env_set(R, E, "add_generation_prompt", tpl_mk_bool(R, 1));
    R->raised = 0;
    if (tpl_run(R, prog, E, res) != 0) longjmp(*R->on_error, 1);
    const char *bos = o->bos_token ? o->bos_token : "", *eos = o->eos_token ? o->eos_token : "";
    size_t bl = strlen(bos), el = strlen(eos);
    if (o->add_bos && res->n >= bl && !memcmp(res->p, bos, bl)) {
        memmove(res->p, res->p + bl, res->n - bl);
        res->n -= bl;
    }
    if (o->add_eos && res->n >= el && !memcmp(res->p + res->n - el, eos, el)) res->n -= el;
}

/* common_chat_msg::render_content of the continued message: its content
 * string, else its text parts joined by a blank line */
static void continue_content(rt *R, const json_value *m, sbuf *out) {
    const json_value *c = json_get(m, "content");
    if (c && c->type == JSON_STRING) {
        tpl_sb_put(R, out, c->str, c->len);
    } else if (c && c->type == JSON_ARRAY) {
        int first = 1;
        for (size_t i = 0; i < c->n; i++) {
            const json_value *t = jget(c->items[i], "text");
            if (!jstr_is(jget(c->items[i], "type"), "text") || !t || t->type != JSON_STRING) continue;
            if (!first) tpl_sb_puts(R, out, "\n\n");
            first = 0;
            tpl_sb_put(R, out, t->str, t->len);
        }
    }
}

/* the body of template_render; leaves through tpl_fail() on any error */
static void render_chat(rt *R, const char *tmpl, size_t tmpl_len, const json_value *messages,
                        const template_opts *o, jbuf *out) {
    /* common_chat_templates_init patches two known-broken templates */
    char *src = tpl_chat_source(R, tmpl, tmpl_len);
    nlist prog;
    tpl_compile(R, src, strlen(src), &prog);
    tmpl_caps c;
    tpl_caps_probe(R, &prog, &c);
    R->raised = 0;   /* a probe's raise_exception is not this render's */

    int stepfun = has(src, "You have access to the following functions in JSONSchema format");
    val *ms = prepare_messages(R, messages, stepfun);
    val *tools = prepare_tools(R, o->tools);
    normalize(R, ms, c);
    /* continue_final_message (or the prefill of a final assistant message):
     * the last message leaves the list and is continued after the render */
    int cont = o->continue_final, cont_empty = 1;
    if (cont != TEMPLATE_CONTINUE_NONE && ms->u.a.n) {
        const json_value *last = messages->items[messages->n - 1];
        cont_empty = continue_is_empty(last);
        if (cont == TEMPLATE_CONTINUE_AUTO) cont = continue_auto(last);
        ms->u.a.n--;
        const char *h = handler_of(src);
        if (!cont_empty && (h || guess_reasoning(src)))
            tpl_fail(R, "continuing a final message (continue_final_message, or a final assistant message) on %s "
                        "needs b11669's analysis of the template (where its reasoning starts and ends), which "
                        "bankml does not reproduce yet", h ? h : "a template with a reasoning block");
    }
    if (!has(src, "<|channel|>"))
        for (size_t i = 0; i < ms->u.a.n; i++) {
            val *role = tpl_obj_get_s(ms->u.a.v[i], "role");
            if (role && role->t == VT_STR && !strcmp(role->u.s.p, "developer"))
                tpl_obj_set_s(R, ms->u.a.v[i], "role", tpl_mk_str(R, "system"));
        }
    if (c.supports_object_arguments) args_to_objects(R, ms);
    const char *handler = handler_of(src);
    if (handler && !strcmp(handler, "Gemma4") && !has(src, "{#- OpenAI Chat Completions:"))
        for (size_t i = 0; i < ms->u.a.n; i++)
            if (tpl_obj_get_s(ms->u.a.v[i], "tool_calls"))
                tpl_fail(R, "tool calls in the history of an older Gemma 4 template: b11669 rewrites them with "
                            "their tool results into one model turn (convert_tool_responses_gemma4), which bankml "
                            "does not reproduce yet");
    if (!c.supports_system_role && ms->u.a.n) {
        val *first = ms->u.a.v[0], *role = tpl_obj_get_s(first, "role");
        if (role && role->t == VT_STR && !strcmp(role->u.s.p, "system")) {
            if (ms->u.a.n > 1) {
                val *a = tpl_obj_get_s(first, "content"), *b = tpl_obj_get_s(ms->u.a.v[1], "content");
                if (!a || !b || a->t != VT_STR || b->t != VT_STR)
                    tpl_fail(R, "cannot merge a non-string system message into the next message");
                sbuf s = {0};
                tpl_sb_put(R, &s, a->u.s.p, a->u.s.n);
                tpl_sb_putc(R, &s, '\n');
                tpl_sb_put(R, &s, b->u.s.p, b->u.s.n);
                tpl_obj_set_s(R, ms->u.a.v[1], "content", tpl_mk_sb(R, &s));
            }
            memmove(ms->u.a.v, ms->u.a.v + 1, (ms->u.a.n - 1) * sizeof(val *));
            ms->u.a.n--;
        }
    }
    /* the specialized handlers that reshape messages before rendering */
    if (has(src, "[SYSTEM_PROMPT]") && has(src, "[TOOL_CALLS]") && has(src, "[ARGS]") &&
        !has(src, "[CALL_ID]")) {
        for (size_t i = 0; i < ms->u.a.n; i++) {
            val *m = ms->u.a.v[i], *role = tpl_obj_get_s(m, "role");
            if (!role || role->t != VT_STR ||
                (strcmp(role->u.s.p, "system") && strcmp(role->u.s.p, "assistant")))
                continue;
            val *blocks = tpl_mk_arr(R, VT_ARRAY), *rcv = tpl_obj_get_s(m, "reasoning_content");
            if (rcv && rcv->t == VT_STR) tpl_arr_push(R, blocks, text_block(R, "thinking", "thinking", rcv));
            val *ct = tpl_obj_get_s(m, "content");
            if (ct && ct->t == VT_STR) tpl_arr_push(R, blocks, text_block(R, "text", "text", ct));
            else if (ct && tpl_is_arr(ct)) tpl_fail(R, "typed assistant content for this template is not supported");
            val *nm = tpl_mk_obj(R);
            for (size_t k = 0; k < m->u.o.n; k++) {
                val *key = m->u.o.k[k];
                if (key->t == VT_STR && !strcmp(key->u.s.p, "reasoning_content")) continue;
                tpl_obj_set(R, nm, key, key->t == VT_STR && !strcmp(key->u.s.p, "content") ? blocks : m->u.o.v[k]);
            }
            ms->u.a.v[i] = nm;
        }
    } else if (has(src, "<|channel|>") ||
               (!has(src, "<atem:function_calls>") &&
                !(has(src, ">>>all") && has(src, ">>>${recipient}")) &&
                !(has(src, "<|tool_calls_section_begin|>") && has(src, "<|tool_call_begin|>")) &&
                !(has(src, "<|open|>") && has(src, "<|close|>") && has(src, "<|end_of_msg|>")) &&
                !(has(src, "<role>ASSISTANT</role>") && has(src, "<arg_key>")) &&
                !(has(src, "<|START_TEXT|>") && has(src, "<|START_ACTION|>")) &&
                ((has(src, "<|tool_list_start|>") && has(src, "<|tool_list_end|>")) ||
                 (has(src, "List of tools: [") && !has(src, "<|tool_list_start|>"))))) {
        /* gpt-oss and LFM2: reasoning goes to a "thinking" field; gpt-oss (common_chat_params_init_gpt_oss)
         * also drops the content of a message that has both reasoning and tool calls */
        int harmony = has(src, "<|channel|>");
        for (size_t i = 0; i < ms->u.a.n; i++) {
            val *m = ms->u.a.v[i], *rcv = tpl_obj_get_s(m, "reasoning_content");
            if (!rcv || rcv->t != VT_STR) continue;
            tpl_obj_set_s(R, m, "thinking", rcv);
            val *tc = tpl_obj_get_s(m, "tool_calls");
            if (!harmony || !tc || !tpl_is_arr(tc) || !tc->u.a.n) continue;
            val *nm = tpl_mk_obj(R);
            for (size_t k = 0; k < m->u.o.n; k++)
                if (!(m->u.o.k[k]->t == VT_STR && !strcmp(m->u.o.k[k]->u.s.p, "content")))
                    tpl_obj_set(R, nm, m->u.o.k[k], m->u.o.v[k]);
            ms->u.a.v[i] = nm;
        }
    }

    env *E = chat_env(R, src, ms, tools, o);
    int agp = o->add_generation_prompt && o->continue_final == TEMPLATE_CONTINUE_NONE;
    sbuf res;
    chat_run(R, &prog, E, agp, o, &res);
    if (cont && !cont_empty) {
        /* the autoparser's continuation: the generation prompt (the
         * difference a generation prompt makes), then the content */
        sbuf with;
        chat_run(R, &prog, E, 1, o, &with);
        size_t i = 0;
        while (i < res.n && i < with.n && res.p[i] == with.p[i]) i++;
        tpl_sb_put(R, &res, with.p + i, with.n - i);
        if (cont == TEMPLATE_CONTINUE_CONTENT) continue_content(R, messages->items[messages->n - 1], &res);
    }
    /* Gemma 4: a generation prompt after a closed turn is the model's turn */
    if (handler && !strcmp(handler, "Gemma4") && agp && res.n >= 8 && !memcmp(res.p + res.n - 8, "<turn|>\n", 8))
        tpl_sb_puts(R, &res, "<|turn>model\n");
    const char *p = res.p ? res.p : "";
    size_t n = res.n;
    /* gpt-oss: without a generation prompt the final <|return|> becomes <|end|> */
    const char *ret = NULL;
    if (has(src, "<|channel|>") && !agp)
        for (const char *h = p; (h = memmem(h, n - (size_t)(h - p), "<|return|>", 10)) != NULL; h++) ret = h;
    if (ret) {
        jbuf_put(out, p, (size_t)(ret - p));
        jbuf_puts(out, "<|end|>");
        jbuf_put(out, ret + 10, n - (size_t)(ret - p) - 10);
    } else {
        jbuf_put(out, p, n);
    }
    if (out->oom) tpl_fail(R, "out of memory");
}

int template_render(const char *tmpl, size_t tmpl_len, const json_value *messages,
                    const template_opts *opts, jbuf *out, char *err, size_t errlen) {
    template_opts dflt;
    if (opts) dflt = *opts;
    else template_opts_init(&dflt);
    const template_opts *o = &dflt;
    rt R;
    tpl_rt_init(&R, err, errlen, o->now);
    jmp_buf jb;
    R.on_error = &jb;
    volatile int rc = -1;
    if (template_continuation(messages, &dflt, err, errlen) != 0) {
        tpl_free_all(&R);
        return -1;
    }
    if (setjmp(jb) == 0) {
        render_chat(&R, tmpl, tmpl_len, messages, o, out);
        rc = 0;
    } else if (R.raised && err && errlen) {
        /* the template's raise_exception: b11669's autoparser path wraps it
         * (invalid_argument, a 400); a dedicated handler lets it through (500) */
        if (template_handler(tmpl, tmpl_len)) {
            rc = -2;
        } else {
            static const char pre[] = "Unable to generate parser for this template. Automatic parser generation "
                                      "failed: ";
            size_t n = strlen(err), pl = sizeof pre - 1;
            if (n + pl >= errlen) n = errlen - 1 - pl;
            memmove(err + pl, err, n);
            memcpy(err, pre, pl);
            err[n + pl] = 0;
        }
    }
    tpl_free_all(&R);
    return rc;
}

int template_render_request(const char *tmpl, size_t tmpl_len, const char *input,
                            size_t input_len, const template_opts *o, jbuf *out,
                            char *err, size_t errlen) {
    json_value *j = json_parse(input, input_len, err, errlen);
    if (!j) return -1;
    template_opts opts;
    if (o) opts = *o;
    else template_opts_init(&opts);
    const json_value *ms = j;
    if (j->type == JSON_OBJECT) {
        ms = json_get(j, "messages");
        if (!ms) {
            snprintf(err, errlen, "'messages' is required");
            json_free(j);
            return -1;
        }
        const json_value *t = json_get(j, "tools");
        if (t) opts.tools = t;
        int b;
        if (json_is_bool(json_get(j, "add_generation_prompt"), &b)) opts.add_generation_prompt = b;
        const json_value *kw = json_get(j, "chat_template_kwargs");
        if (kw && kw->type == JSON_OBJECT) opts.kwargs = kw;
        const json_value *cf = json_get(j, "continue_final_message");
        if (cf) opts.continue_final = template_continue_parse(cf);
        const json_value *re = json_get(j, "reasoning_effort");
        if (re && re->type == JSON_STRING) opts.reasoning_effort = re->str;
    }
    int rc = template_render(tmpl, tmpl_len, ms, &opts, out, err, errlen);
    json_free(j);
    return rc;
}

/* ------------------------------------------------------------ the request's inputs */

int template_continue_parse(const json_value *v) {
    if (!v) return TEMPLATE_CONTINUE_NONE;
    if (v->type == JSON_TRUE) return TEMPLATE_CONTINUE_AUTO;
    if (jstr_is(v, "reasoning_content")) return TEMPLATE_CONTINUE_REASONING;
    if (jstr_is(v, "content")) return TEMPLATE_CONTINUE_CONTENT;
    return TEMPLATE_CONTINUE_NONE;
}

int template_continuation(const json_value *messages, template_opts *o, char *err, size_t errlen) {
    size_t n = messages && messages->type == JSON_ARRAY ? messages->n : 0;
    const json_value *last = n ? messages->items[n - 1] : NULL;
    int last_assistant = last && jstr_is(json_get(last, "role"), "assistant");
    if (o->continue_final == TEMPLATE_CONTINUE_NONE && o->prefill_assistant && last_assistant) {
        if (n >= 2 && jstr_is(json_get(messages->items[n - 2], "role"), "assistant")) {
            snprintf(err, errlen, "Cannot have 2 or more assistant messages at the end of the list.");
            return -1;
        }
        o->continue_final = TEMPLATE_CONTINUE_AUTO;
        o->add_generation_prompt = 0;
    }
    if (o->continue_final != TEMPLATE_CONTINUE_NONE && o->add_generation_prompt) {
        snprintf(err, errlen, "Cannot set both add_generation_prompt and continue_final_message to true.");
        return -1;
    }
    if (o->continue_final != TEMPLATE_CONTINUE_NONE && last_assistant && tool_calls_n(json_get(last, "tool_calls"))) {
        snprintf(err, errlen, "Cannot continue an assistant message that contains tool calls.");
        return -1;
    }
    return 0;
}

static const char *handler_of(const char *src) {
    if (has(src, "[SYSTEM_PROMPT]") && has(src, "[TOOL_CALLS]") && has(src, "[ARGS]") && !has(src, "[CALL_ID]"))
        return "Ministral/Magistral Large 3";
    if (has(src, "<|channel|>")) return "GPT-OSS";
    if (has(src, "<atem:function_calls>") && has(src, "<|eom|>")) return "Muse Glimmer";
    if (has(src, ">>>all") && has(src, ">>>${recipient}")) return "Functionary v3.2";
    if (has(src, "<|tool_calls_section_begin|>") && has(src, "<|tool_call_begin|>")) return "Kimi K2 Thinking";
    if (has(src, "<|open|>") && has(src, "<|close|>") && has(src, "<|end_of_msg|>")) return "Kimi K3";
    if (has(src, "<role>ASSISTANT</role>") && has(src, "<arg_key>")) return "Ling 3.0";
    if (has(src, "<|START_TEXT|>") && has(src, "<|START_ACTION|>")) return "Cohere2 MoE";
    if (has(src, "<|tool_list_start|>") && has(src, "<|tool_list_end|>")) return "LFM2";
    if (has(src, "List of tools: [") && !has(src, "<|tool_list_start|>")) return "LFM2.5";
    if (has(src, "<|role_sep|>") && has(src, "<|message_sep|>") && !has(src, "<|function_call|>")) return "GigaChatV3";
    if (has(src, "]<]minimax[>[") && has(src, "<tool_call>") && has(src, "<invoke name=")) return "MiniMax-M3";
    if (has(src, "dsml_token") && has(src, "DSML") && (has(src, "function_calls") || has(src, "tool_calls")))
        return "DeepSeek V3.2/V4";
    if (has(src, "'<|tool_call>call:'")) return "Gemma4";
    if (has(src, "Tool usage guidelines:") && has(src, "<function name=\"") && has(src, "<param name=\""))
        return "MiniCPM5";
    if (has(src, "<tool_call>") && has(src, "<function=") && has(src, "<parameter=") &&
        !has(src, "'<tool_call><function=' ~ tool_call.name ~ '>'"))
        return "Qwen3-Coder";
    return NULL;
}

/* the public entry points take a length: the text need not end in a NUL
 * (a fuzzer's buffer, a slice of a GGUF string), so they search a copy */
const char *template_handler(const char *src, size_t len) {
    char *z = strndup(src, len);
    if (!z) return NULL;
    const char *h = handler_of(z);
    free(z);
    return h;
}

int template_thinking_default(const char *tmpl, size_t len) {
    char *z = strndup(tmpl, len);
    if (!z) return 0;
    int t = guess_thinking(z);
    free(z);
    return t;
}

int template_continued_content(const json_value *messages, const template_opts *o, jbuf *out) {
    size_t n = messages && messages->type == JSON_ARRAY ? messages->n : 0;
    if (!n || o->continue_final == TEMPLATE_CONTINUE_NONE) return 0;
    const json_value *last = messages->items[n - 1];
    int mode = o->continue_final == TEMPLATE_CONTINUE_AUTO ? continue_auto(last) : o->continue_final;
    if (mode != TEMPLATE_CONTINUE_CONTENT || continue_is_empty(last)) return 0;
    rt R;
    tpl_rt_init(&R, NULL, 0, 0);
    jmp_buf jb;
    R.on_error = &jb;
    volatile int rc = -1;
    if (setjmp(jb) == 0) {
        sbuf b = {0};
        continue_content(&R, last, &b);
        jbuf_put(out, b.p ? b.p : "", b.n);
        rc = 1;
    }
    tpl_free_all(&R);
    return rc;
}
