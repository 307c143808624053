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
        if (tcs) tpl_fail(R, "messages with tool_calls are not supported yet");

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

static val *text_block(rt *R, const char *type, const char *key, val *text) {
    val *p = tpl_mk_obj(R);
    tpl_obj_set_s(R, p, "type", tpl_mk_str(R, type));
    tpl_obj_set_s(R, p, key, text);
    return p;
}

/* tools as common_chat_tools_to_json_oaicompat rebuilds them */
static val *prepare_tools(rt *R, const json_value *tools) {
    if (!tools || tools->type == JSON_NULL) return NULL;
    if (tools->type != JSON_ARRAY) tpl_fail(R, "expected 'tools' to be an array");
    if (!tools->n) return NULL;
    val *out = tpl_mk_arr(R, VT_ARRAY);
    for (size_t i = 0; i < tools->n; i++) {
        const json_value *t = tools->items[i];
        if (!jstr_is(jget(t, "type"), "function")) tpl_fail(R, "unsupported or missing tool type");
        const json_value *f = jget(t, "function");
        if (!f) tpl_fail(R, "missing tool function");
        const json_value *name = jget(f, "name"), *desc = jget(f, "description"),
                         *params = jget(f, "parameters");
        if (!name || name->type != JSON_STRING) tpl_fail(R, "tool function name must be a string");
        if (desc && desc->type != JSON_STRING) tpl_fail(R, "tool description must be a string");
        val *fn = tpl_mk_obj(R);
        tpl_obj_set_s(R, fn, "name", tpl_from_json(R, name));
        tpl_obj_set_s(R, fn, "description", desc ? tpl_from_json(R, desc) : tpl_mk_str(R, ""));
        tpl_obj_set_s(R, fn, "parameters", params && params->type != JSON_NULL ? tpl_from_json(R, params) : tpl_mk_obj(R));
        val *tv = tpl_mk_obj(R);
        tpl_obj_set_s(R, tv, "type", tpl_mk_str(R, "function"));
        tpl_obj_set_s(R, tv, "function", fn);
        tpl_arr_push(R, out, tv);
    }
    return out;
}

static val *obj_get_s_env(env *E, const char *k) { return tpl_env_get(E, k); }

static int guess_thinking(const char *src) {
    return has(src, "enable_thinking") || has(src, "<think>") || has(src, "reasoning_content") ||
           has(src, "thinking");
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

    int stepfun = has(src, "You have access to the following functions in JSONSchema format");
    val *ms = prepare_messages(R, messages, stepfun);
    if (ms->u.a.n) {
        val *last = tpl_obj_get_s(ms->u.a.v[ms->u.a.n - 1], "role");
        if (last && last->t == VT_STR && !strcmp(last->u.s.p, "assistant"))
            tpl_fail(R, "a conversation ending with an assistant message (prefill) is not supported yet");
    }
    val *tools = prepare_tools(R, o->tools);
    normalize(R, ms, c);
    if (!has(src, "<|channel|>"))
        for (size_t i = 0; i < ms->u.a.n; i++) {
            val *role = tpl_obj_get_s(ms->u.a.v[i], "role");
            if (role && role->t == VT_STR && !strcmp(role->u.s.p, "developer"))
                tpl_obj_set_s(R, ms->u.a.v[i], "role", tpl_mk_str(R, "system"));
        }
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
        /* gpt-oss and LFM2: reasoning goes to a "thinking" field */
        for (size_t i = 0; i < ms->u.a.n; i++) {
            val *m = ms->u.a.v[i], *rcv = tpl_obj_get_s(m, "reasoning_content");
            if (rcv && rcv->t == VT_STR) tpl_obj_set_s(R, m, "thinking", rcv);
        }
    }

    env *E = tpl_base_env(R);
    tpl_env_set(R, E, "messages", ms);
    tpl_env_set(R, E, "bos_token", tpl_mk_str(R, o->bos_token ? o->bos_token : ""));
    tpl_env_set(R, E, "eos_token", tpl_mk_str(R, o->eos_token ? o->eos_token : ""));
    int think = o->enable_thinking >= 0 ? o->enable_thinking : guess_thinking(src);
    /* the server's default kwargs, then the request's on top */
    val *kw = tpl_mk_obj(R);
    if (o->preserve_reasoning >= 0) tpl_obj_set_s(R, kw, "preserve_reasoning", tpl_mk_bool(R, o->preserve_reasoning));
    if (o->kwargs && o->kwargs->type == JSON_OBJECT) {
        val *rk = tpl_from_json(R, o->kwargs);
        for (size_t i = 0; i < rk->u.o.n; i++) tpl_obj_set(R, kw, rk->u.o.k[i], rk->u.o.v[i]);
    }
    if (kw) {
        val *et = tpl_obj_get_s(kw, "enable_thinking");
        if (et && et->t == VT_BOOL) think = et->u.b;
        else if (et && et->t == VT_STR) tpl_fail(R, "invalid type for \"enable_thinking\" (expected boolean, got string)");
    }
    tpl_env_set(R, E, "enable_thinking", tpl_mk_bool(R, think));
    if (tools) tpl_env_set(R, E, "tools", tools);
    char date[64];
    struct tm tm;
    localtime_r(&R->now, &tm);
    strftime(date, sizeof date, "%b %d %Y", &tm);
    tpl_env_set(R, E, "datetime", tpl_mk_str(R, date));
    strftime(date, sizeof date, "%d %b %Y", &tm);
    tpl_env_set(R, E, "date_string", tpl_mk_str(R, date));
    if (kw) env_from_obj(R, E, kw);
    if (o->add_generation_prompt) tpl_env_set(R, E, "add_generation_prompt", tpl_mk_bool(R, 1));
    val *pr = obj_get_s_env(E, "preserve_reasoning");
    if (pr && pr->t == VT_BOOL) {
        tpl_env_set(R, E, "preserve_thinking", tpl_mk_bool(R, pr->u.b));
        tpl_env_set(R, E, "clear_thinking", tpl_mk_bool(R, !pr->u.b));
        tpl_env_set(R, E, "truncate_history_thinking", tpl_mk_bool(R, !pr->u.b));
        tpl_env_set(R, E, "drop_thinking", tpl_mk_bool(R, !pr->u.b));
    }
    val *re = obj_get_s_env(E, "reasoning_effort");
    if (re && re->t == VT_STR && re->u.s.n) tpl_env_set(R, E, "reasoning_strength", re);

    sbuf res;
    if (tpl_run(R, &prog, E, &res) != 0) longjmp(*R->on_error, 1);
    const char *p = res.p ? res.p : "";
    size_t n = res.n;
    const char *bos = o->bos_token ? o->bos_token : "", *eos = o->eos_token ? o->eos_token : "";
    size_t bl = strlen(bos), el = strlen(eos);
    if (o->add_bos && n >= bl && !memcmp(p, bos, bl)) { p += bl; n -= bl; }
    if (o->add_eos && n >= el && !memcmp(p + n - el, eos, el)) n -= el;
    /* gpt-oss: without a generation prompt the final <|return|> becomes <|end|> */
    const char *ret = NULL;
    if (has(src, "<|channel|>") && !o->add_generation_prompt)
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
    if (setjmp(jb) == 0) {
        render_chat(&R, tmpl, tmpl_len, messages, o, out);
        rc = 0;
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
    }
    int rc = template_render(tmpl, tmpl_len, ms, &opts, out, err, errlen);
    json_free(j);
    return rc;
}
