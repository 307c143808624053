/*
 * chat_spec_k2h.c -- b11669's common_chat_params_init_k2_horizon, which no
 * shared template takes and which v0.5.0's source lacks: written from the
 * arenas the kit gives for a template that passes its substring test
 * (testing/oracle_chat_spec.py's synthetic k2_horizon.jinja). The answer:
 *   <ifm|think>reasoning</ifm|think> content
 *   <ifm|tool_calls><ifm|tool_call>NAME\n
 *   <ifm|arg_key>K</ifm|arg_key><ifm|arg_value>V</ifm|arg_value>...</ifm|tool_call></ifm|tool_calls>
 * Argument values as Qwen3-Coder's (a string raw, other types as JSON under
 * their schema, unions both); required arguments in any order, then the
 * optional ones. With reasoning extraction off the think block stays
 * content where a schema or tool_choice required follows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_gen_int.h"
#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

#define KH_VEND "</ifm|arg_value>"
#define KH_TYPE(m, t) (((m) >> (t)) & 1u)

typedef struct {
    size_t arg_close, arg_string, arg_type;
} kh_shared;

/* rule "tool-<i>-arg-<j>": space() + tool_arg(open << (type + "<ifm|arg_value>" + value)) */
static size_t kh_arg(csp_ctx *c, const kh_shared *sh, const json_value *params, size_t i, size_t j)
{
    peg_arena *a = &c->out->arena;
    const json_value *props = json_get(params, "properties");
    char rn[96], sn[112];
    snprintf(rn, sizeof rn, "tool-%zu-arg-%zu", i, j);
    snprintf(sn, sizeof sn, "%s-schema", rn);
    unsigned types = chat_gen_schema_value_types(params, props->items[j]);
    size_t value;
    if (!KH_TYPE(types, CHAT_SCHEMA_STRING)) {
        value = peg_seq2(a, chat_peg_tag(a, "tool-arg-value", csp_schema_json(c, sn, params, props->items[j])), sh->arg_close);
    } else if (types == 1u << CHAT_SCHEMA_STRING) {
        value = sh->arg_string;
    } else {
        size_t jv = peg_choice(a, NULL, 0);
        if (KH_TYPE(types, CHAT_SCHEMA_OBJECT)) jv = peg_alt2(a, jv, peg_json_object(a));
        if (KH_TYPE(types, CHAT_SCHEMA_ARRAY)) jv = peg_alt2(a, jv, peg_json_array(a));
        if (KH_TYPE(types, CHAT_SCHEMA_NUMBER) || KH_TYPE(types, CHAT_SCHEMA_INTEGER))
            jv = peg_alt2(a, jv, peg_json_number(a));
        if (KH_TYPE(types, CHAT_SCHEMA_BOOLEAN)) jv = peg_alt2(a, jv, peg_json_bool(a));
        if (KH_TYPE(types, CHAT_SCHEMA_NULL)) jv = peg_alt2(a, jv, peg_json_null(a));
        size_t at = peg_atomic(a, peg_seq2(a, chat_peg_tag(a, "tool-arg-value", jv), sh->arg_close));
        value = peg_gbnf(a, peg_alt2(a, at, sh->arg_string), "xml-arg-string");
    }
    /* tool_arg_open("<ifm|arg_key>" + tool_arg_name(literal(name)) + "</ifm|arg_key>") */
    size_t nm = chat_peg_tag(a, "tool-arg-name", peg_literal(a, props->keys[j], props->key_lens[j]));
    size_t open = chat_peg_tag(a, "tool-arg-open", csp_ps(a, csp_sp(a, "<ifm|arg_key>", nm), "</ifm|arg_key>"));
    size_t x = peg_seq2(a, csp_ps(a, sh->arg_type, "<ifm|arg_value>"), value);
    size_t arg = chat_peg_tag(a, "tool-arg", csp_shl(a, open, x));
    size_t sp = peg_space(a);
    return peg_rule(a, rn, peg_seq2(a, sp, arg), 0);
}

typedef struct {
    const kh_shared *sh;
    size_t i;
} kh_tool;

static size_t kh_arg_of(csp_ctx *c, const json_value *params, size_t j, void *ud)
{
    const kh_tool *t = ud;
    return kh_arg(c, t->sh, params, t->i, j);
}

/* rule "tool-<i>": tool(tool_open("<ifm|tool_call>" + tool_name(literal(name)) + "\n") + tool_args(args))
 *                  << tool_close(literal("</ifm|tool_call>")) */
static size_t kh_function(csp_ctx *c, const kh_shared *sh, const json_value *fn, const char *name, size_t nlen, size_t i)
{
    peg_arena *a = &c->out->arena;
    const json_value *params = csp_parameters(fn);
    char rn[64];
    snprintf(rn, sizeof rn, "tool-%zu-args", i);
    kh_tool t = {sh, i};
    size_t args = csp_tagged_args(c, params, rn, kh_arg_of, &t);
    size_t targs = chat_peg_tag(a, "tool-args", args);
    size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
    size_t open = chat_peg_tag(a, "tool-open", csp_ps(a, csp_sp(a, "<ifm|tool_call>", tn), "\n"));
    size_t head = peg_seq2(a, open, targs);
    size_t close = chat_peg_tag(a, "tool-close", peg_literal_c(a, "</ifm|tool_call>"));
    snprintf(rn, sizeof rn, "tool-%zu", i);
    return peg_rule(a, rn, chat_peg_tag(a, "tool", csp_shl(a, head, close)), 0);
}

/* optional("<ifm|think>" + space() + ac([reasoning(] until [)] + ends, {"</ifm|think>"})) */
static size_t kh_think(peg_arena *a, size_t until, size_t ends, int tagged)
{
    peg_str d = {"</ifm|think>", 12};
    size_t body = tagged ? chat_peg_tag(a, "reasoning", until) : until;
    size_t ac = peg_ac(a, peg_seq2(a, body, ends), &d, 1);
    return peg_optional(a, peg_seq2(a, csp_sp(a, "<ifm|think>", peg_space(a)), ac));
}

static size_t kh_build(csp_ctx *c, int extract, int has_schema, int tool_parser)
{
    const chat_gen_inputs *in = c->in;
    peg_arena *a = &c->out->arena;
    size_t gp = peg_literal_c(a, "<|ifm|im_start|>assistant\n");
    size_t ends = peg_choice(a, NULL, 0);
    ends = peg_alt2(a, ends, peg_literal_c(a, "</ifm|think>"));
    peg_str ed = {"</ifm|think>", 12};
    size_t until = peg_until_one_of(a, &ed, 1);
    size_t reasoning = extract ? kh_think(a, until, ends, 1) : peg_eps(a);
    if (has_schema) {
        if (!extract) reasoning = kh_think(a, until, ends, 0);
        size_t ct = chat_peg_tag(a, "content", csp_schema_json(c, "response-format", in->json_schema, in->json_schema));
        return peg_seq2(a, gp, csp_shl(a, reasoning, ct));
    }
    if (!tool_parser) return peg_seq2(a, gp, csp_shl(a, reasoning, chat_peg_tag(a, "content", peg_rest(a))));
    kh_shared sh;
    size_t choice = peg_choice(a, NULL, 0);
    sh.arg_close = chat_peg_tag(a, "tool-arg-close", peg_literal_c(a, KH_VEND));
    size_t sv = chat_peg_tag(a, "tool-arg-string-value", peg_until(a, KH_VEND, strlen(KH_VEND)));
    peg_str d = {KH_VEND, strlen(KH_VEND)};
    sh.arg_string = peg_rule(a, "xml-arg-string", peg_ac(a, peg_seq2(a, sv, sh.arg_close), &d, 1), 0);
    sh.arg_type = peg_eps(a);
    for (size_t i = 0; i < in->tools->n && !c->failed; i++) {
        const char *name;
        size_t nlen;
        const json_value *fn = csp_function(in->tools->items[i], &name, &nlen);
        if (fn) choice = peg_alt2(a, choice, kh_function(c, &sh, fn, name, nlen, i));
    }
    size_t calls = choice;
    if (in->parallel_tool_calls) {
        size_t sp = peg_space(a);
        calls = peg_seq2(a, choice, peg_zero_or_more(a, peg_seq2(a, sp, choice)));
    }
    /* trigger_rule("tool-calls", repeat(literal(START) << calls << literal(END), min, 1)) */
    size_t x = csp_shl(a, peg_literal_c(a, "<ifm|tool_calls>"), calls);
    x = csp_shl_s(a, x, "</ifm|tool_calls>");
    int required = in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED;
    size_t tool_calls = peg_rule(a, "tool-calls", peg_repeat(a, x, required, 1), 1);
    if (required) {
        if (!extract) reasoning = chat_peg_tag(a, "content", kh_think(a, until, ends, 0));
        size_t e = peg_eps(a);
        return peg_seq2(a, gp, csp_shl(a, csp_shl(a, reasoning, e), tool_calls));
    }
    size_t ct = chat_peg_tag(a, "content", peg_until(a, "<ifm|tool_calls>", 16));
    return peg_seq2(a, gp, csp_shl(a, csp_shl(a, reasoning, ct), tool_calls));
}

int chat_spec_k2_horizon(csp_ctx *c)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    static const char *const preserved[12] = {
        "</ifm|think>", "<ifm|think>", "<ifm|tool_calls>", "</ifm|tool_calls>", "<ifm|tool_call>", "</ifm|tool_call>",
        "<ifm|arg_key>", "</ifm|arg_key>", "<ifm|arg_type>", "</ifm|arg_type>", "<ifm|arg_value>", "</ifm|arg_value>"};
    out->supports_thinking = 1;
    for (size_t i = 0; i < 12; i++) if (csp_preserve(c, preserved[i])) return CHAT_GEN_ERROR;
    if (!(out->thinking_start_tag = csp_strdup(c, "<ifm|think>", 11)) || csp_end_tag(c, "</ifm|think>")) return CHAT_GEN_ERROR;
    int has_tools = csp_has_tools(in), has_schema = csp_has_schema(in);
    int tool_parser = has_tools && in->tool_choice != CHAT_TOOL_CHOICE_NONE;
    size_t root = kh_build(c, in->reasoning_format != CHAT_REASONING_NONE, has_schema, tool_parser);
    if (c->failed) return CHAT_GEN_ERROR;
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (has_schema || tool_parser) {
        out->has_grammar = 1;
        out->grammar_lazy = !has_schema && in->tool_choice == CHAT_TOOL_CHOICE_AUTO;
        if (out->grammar_lazy && csp_trigger(c, CHAT_GRAMMAR_TRIGGER_WORD, "<ifm|tool_calls>", 16)) return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
