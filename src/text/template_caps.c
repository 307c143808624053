/*
 * template_caps.c -- what a chat template does with its inputs, found as
 * llama.cpp b11669 finds it (common/jinja/caps.cpp, jinja::caps_get): render
 * probe conversations with value stats on and watch which inputs the
 * template reads, how (as a string, as an array), and what reaches the
 * output. Errors in a probe are ignored, as caps_try_execute ignores them.
 *
 * Also the source common_chat_templates_init keeps (its two patches), which
 * is what both the caps and every render see.
 */
#include "text/template.h"
#include "text/template_int.h"

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ the source */

static char *caps_replace_all(rt *R, const char *s, const char *from, const char *to) {
    sbuf b = {0};
    size_t fl = strlen(from);
    const char *p = s, *h;
    while ((h = strstr(p, from)) != NULL) {
        tpl_sb_put(R, &b, p, (size_t)(h - p));
        tpl_sb_puts(R, &b, to);
        p = h + fl;
    }
    tpl_sb_puts(R, &b, p);
    return b.p ? b.p : tpl_rstrdup(R, "", 0);
}

char *tpl_chat_source(rt *R, const char *tmpl, size_t len) {
    char *src = tpl_rstrdup(R, tmpl, len);
    if (strlen(src) != len) tpl_fail(R, "template contains a NUL byte");
    if (strstr(src, "<|channel|>") && strstr(src, "in message.content or"))
        src = caps_replace_all(R, src,
                               "{%- if \"<|channel|>analysis<|message|>\" in message.content or "
                               "\"<|channel|>final<|message|>\" in message.content %}",
                               "{%- if false %}");
    if (strstr(src, "[TOOL_CALLS]") && strstr(src, "if (message['content'] is none or"))
        src = caps_replace_all(R, src,
                               "{%- if (message['content'] is none or message['content'] == '' or "
                               "message['content']|length == 0) and (message['tool_calls'] is not defined or "
                               "message['tool_calls'] is none or message['tool_calls']|length == 0) %}",
                               "{%- if false %}");
    return src;
}

/* ------------------------------------------------------------ the probes */

/* caps_try_execute's inputs: the probe's messages (JSON), tools (JSON or
 * NULL for []), and what its ctx_fn sets */
enum { CAPS_CTX_NONE, CAPS_CTX_PRESERVE, CAPS_CTX_EFFORT };

typedef struct {
    int ok;          /* the render did not raise */
    val *messages;   /* the values the template saw, with their stats */
    val *tools;
    val *effort;     /* reasoning_effort (CAPS_CTX_EFFORT) */
    sbuf out;
} caps_run;

static val *caps_json(rt *R, const char *text) {
    char e[128];
    json_value *j = json_parse(text, strlen(text), e, sizeof e);
    if (!j) tpl_fail(R, "caps probe: %s", e);
    val *v = tpl_from_json(R, j);
    json_free(j);
    return v;
}

static void caps_try(rt *R, const nlist *prog, const char *messages, const char *tools, int ctx, caps_run *r) {
    env *E = tpl_base_env(R);
    r->messages = caps_json(R, messages);
    r->tools = tools ? caps_json(R, tools) : tpl_mk_arr(R, VT_ARRAY);
    r->effort = NULL;
    tpl_env_set(R, E, "messages", r->messages);
    tpl_env_set(R, E, "tools", r->tools);
    tpl_env_set(R, E, "bos_token", tpl_mk_str(R, ""));
    tpl_env_set(R, E, "eos_token", tpl_mk_str(R, ""));
    tpl_env_set(R, E, "add_generation_prompt", tpl_mk_bool(R, 1));
    if (ctx != CAPS_CTX_NONE) tpl_env_set(R, E, "enable_thinking", tpl_mk_bool(R, 1));
    if (ctx == CAPS_CTX_PRESERVE) {
        tpl_env_set(R, E, "preserve_thinking", tpl_mk_bool(R, 1));
        tpl_env_set(R, E, "clear_thinking", tpl_mk_bool(R, 0));
        tpl_env_set(R, E, "truncate_history_thinking", tpl_mk_bool(R, 0));
        tpl_env_set(R, E, "drop_thinking", tpl_mk_bool(R, 0));
    } else if (ctx == CAPS_CTX_EFFORT) {
        r->effort = tpl_mk_str(R, "low");   /* one value under both names, for its stats */
        tpl_env_set(R, E, "reasoning_effort", r->effort);
        tpl_env_set(R, E, "reasoning_strength", r->effort);
    }
    R->stats = 1;
    char ebuf[256];
    char *se = R->err;
    size_t sl = R->errlen;
    R->err = ebuf;
    R->errlen = sizeof ebuf;
    r->ok = tpl_run(R, prog, E, &r->out) == 0;
    R->err = se;
    R->errlen = sl;
    R->stats = 0;
    if (!r->ok) memset(&r->out, 0, sizeof r->out);
}

/* messages[i], v[key] of the probe's values (they always exist: we built them) */
static val *caps_at(val *v, size_t i) { return tpl_is_arr(v) && i < v->u.a.n ? v->u.a.v[i] : NULL; }
static val *caps_key(val *v, const char *k) { return v && v->t == VT_OBJECT ? tpl_obj_get_s(v, k) : NULL; }
static int caps_used(const val *v) { return v && v->used; }

static int caps_has_out(const caps_run *r, const char *s) { return r->out.p && strstr(r->out.p, s) != NULL; }

#define CAPS_TOOLS \
    "[{\"name\":\"tool\",\"type\":\"function\",\"function\":{\"name\":\"tool1\"," \
    "\"description\":\"Tool description\",\"parameters\":{\"type\":\"object\",\"properties\":" \
    "{\"arg\":{\"type\":\"string\",\"description\":\"Arg description\"}},\"required\":[\"arg\"]}}}]"

#define CAPS_CALL(id, args) \
    "{\"id\":\"" id "\",\"type\":\"function\",\"function\":{\"name\":\"tool1\",\"arguments\":" args "}}"

#define CAPS_TOOL_CONV(calls) \
    "[{\"role\":\"user\",\"content\":\"User message\"}," \
    "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[" calls "]}," \
    "{\"role\":\"tool\",\"content\":\"Tool response\",\"tool_call_id\":\"call00001\"}," \
    "{\"role\":\"assistant\",\"content\":\"The tool response was 'tool response'\"}," \
    "{\"role\":\"user\",\"content\":\"User message\"}]"

#define CAPS_OBJ_ARGS "{\"arg\":\"value\"}"
#define CAPS_STR_ARGS "\"{\\\"arg\\\": \\\"value\\\"}\""

void tpl_caps_probe(rt *R, const nlist *prog, tmpl_caps *c) {
    memset(c, 0, sizeof *c);
    c->supports_tools = c->supports_tool_calls = c->supports_system_role = 1;
    c->supports_parallel_tool_calls = c->supports_string_content = 1;
    caps_run r;

    /* typed content: a string content read as an array, or failing as one */
    int checks_for_string = 0;
    caps_try(R, prog, "[{\"role\":\"user\",\"content\":\"STRING_MARKER\"}]", NULL, CAPS_CTX_NONE, &r);
    val *content = caps_key(caps_at(r.messages, 0), "content");
    if (content->ops & OP_TEST_IS_STRING) checks_for_string = 1;
    int as_array = (content->ops & (OP_SELECTATTR | OP_ARRAY_ACCESS)) != 0;
    if (as_array) c->supports_typed_content = 1;
    if (!r.ok) c->supports_string_content = 0;
    else if (as_array && !caps_has_out(&r, "STRING_MARKER")) c->supports_string_content = 0;
    if (checks_for_string) {
        caps_try(R, prog, "[{\"role\":\"user\",\"content\":[]}]", NULL, CAPS_CTX_NONE, &r);
        content = caps_key(caps_at(r.messages, 0), "content");
        if ((content->ops & (OP_SELECTATTR | OP_ARRAY_ACCESS)) && r.ok) c->supports_typed_content = 1;
    }

    /* system role: the system message's content was read */
    caps_try(R, prog,
             "[{\"role\":\"system\",\"content\":\"System message\"},{\"role\":\"user\",\"content\":\"User message\"}]",
             NULL, CAPS_CTX_NONE, &r);
    if (!caps_used(caps_key(caps_at(r.messages, 0), "content"))) c->supports_system_role = 0;

    /* tools and one call with object arguments */
    caps_try(R, prog, CAPS_TOOL_CONV(CAPS_CALL("call00001", CAPS_OBJ_ARGS)), CAPS_TOOLS, CAPS_CTX_NONE, &r);
    if (r.ok) {
        if (!caps_used(caps_key(caps_key(caps_at(r.tools, 0), "function"), "name"))) c->supports_tools = 0;
        val *tcs = caps_key(caps_at(r.messages, 1), "tool_calls");
        if (!caps_used(tcs)) {
            c->supports_tool_calls = 0;
        } else {
            val *arg = caps_key(caps_key(caps_key(caps_at(tcs, 0), "function"), "arguments"), "arg");
            if (caps_used(arg)) c->supports_object_arguments = 1;
        }
    }
    /* the same with string arguments, when the object's were not read */
    if (!c->supports_object_arguments) {
        caps_try(R, prog, CAPS_TOOL_CONV(CAPS_CALL("call00001", CAPS_STR_ARGS)), CAPS_TOOLS, CAPS_CTX_NONE, &r);
        if (!r.ok) {
            c->supports_tool_calls = c->supports_tools = 0;
        } else {
            if (!caps_used(caps_key(caps_key(caps_at(r.tools, 0), "function"), "name"))) c->supports_tools = 0;
            if (!caps_used(caps_key(caps_at(r.messages, 1), "tool_calls"))) c->supports_tool_calls = 0;
        }
    }

    /* parallel calls: the second call's function was read */
    if (c->supports_object_arguments)
        caps_try(R, prog,
                 CAPS_TOOL_CONV(CAPS_CALL("call00001", CAPS_OBJ_ARGS) "," CAPS_CALL("call00002", CAPS_OBJ_ARGS)),
                 CAPS_TOOLS, CAPS_CTX_NONE, &r);
    else
        caps_try(R, prog,
                 CAPS_TOOL_CONV(CAPS_CALL("call00001", CAPS_STR_ARGS) "," CAPS_CALL("call00002", CAPS_STR_ARGS)),
                 CAPS_TOOLS, CAPS_CTX_NONE, &r);
    if (!r.ok) c->supports_parallel_tool_calls = 0;
    else if (!caps_used(caps_key(caps_at(caps_key(caps_at(r.messages, 1), "tool_calls"), 1), "function")))
        c->supports_parallel_tool_calls = 0;

    /* preserved reasoning: an earlier turn's reasoning reaches the output */
    caps_try(R, prog,
             "[{\"role\":\"user\",\"content\":\"User message\"},"
             "{\"role\":\"assistant\",\"content\":\"Assistant message\","
             "\"reasoning_content\":\"<REASONING_CONTENT_PLACEHOLDER>\"},"
             "{\"role\":\"user\",\"content\":\"User message\"},"
             "{\"role\":\"assistant\",\"content\":\"Assistant message\",\"reasoning_content\":\"Reasoning content\"},"
             "{\"role\":\"user\",\"content\":\"User message\"}]",
             NULL, CAPS_CTX_PRESERVE, &r);
    if (caps_has_out(&r, "<REASONING_CONTENT_PLACEHOLDER>")) c->supports_preserve_reasoning = 1;

    /* reasoning effort: the template read reasoning_effort (or reasoning_strength) */
    caps_try(R, prog, "[{\"role\":\"user\",\"content\":\"User message\"}]", NULL, CAPS_CTX_EFFORT, &r);
    c->supports_reasoning_effort = caps_used(r.effort);
}

int template_caps(const char *tmpl, size_t len, tmpl_caps *out, char *err, size_t errlen) {
    rt R;
    tpl_rt_init(&R, err, errlen, 0);
    jmp_buf jb;
    R.on_error = &jb;
    volatile int rc = -1;
    if (setjmp(jb) == 0) {
        char *src = tpl_chat_source(&R, tmpl, len);
        nlist prog;
        tpl_compile(&R, src, strlen(src), &prog);
        tpl_caps_probe(&R, &prog, out);
        rc = 0;
    }
    tpl_free_all(&R);
    return rc;
}
