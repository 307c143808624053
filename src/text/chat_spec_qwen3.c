/*
 * chat_spec_qwen3.c -- b11669's common_chat_params_init_qwen3_coder
 * (common/parsers/qwen3-coder.cpp): Qwen3-Coder's XML tool calls
 *   <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n</function>\n</tool_call>
 * with, for templates that mention <think> (Qwen3.5, Nemotron 3 Nano,
 * StepFun 3.5), a reasoning block that <tool_call> may also end.
 *
 * Measured on b11669 (its arenas through testing/kit_chat.cpp) where v0.5.0's
 * source differs: rules are named by the tool's index in `tools` and the
 * argument's in the parameters' properties (tool-0-arg-1, tool-1-args-3,
 * tool-1-arg-0-schema), not by their names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_gen_int.h"
#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

#define Q3_ARG_END "\n</parameter>\n"
#define Q3_TYPE(m, t) (((m) >> (t)) & 1u)

typedef struct {
    size_t arg_close;           /* tool_arg_close(literal("\n</parameter>\n")) */
    size_t arg_string;          /* rule xml-arg-string */
} q3_shared;

/* the required flag of property j: its name in the schema's "required" */
/* one parameter: rule "tool-<i>-arg-<j>" = tool_arg(arg_open + arg_value) */
static size_t q3_arg(csp_ctx *c, const q3_shared *sh, const json_value *params, size_t i, size_t j)
{
    peg_arena *a = &c->out->arena;
    const json_value *props = json_get(params, "properties");
    char rn[96];
    snprintf(rn, sizeof rn, "tool-%zu-arg-%zu", i, j);
    /* tool_arg_open("<parameter=" + tool_arg_name(literal(name)) + ">\n") */
    size_t nm = chat_peg_tag(a, "tool-arg-name", peg_literal(a, props->keys[j], props->key_lens[j]));
    size_t open = chat_peg_tag(a, "tool-arg-open", csp_ps(a, csp_sp(a, "<parameter=", nm), ">\n"));
    size_t value = peg_eps(a);                                    /* auto arg_value = p.eps(); */
    unsigned types = chat_gen_schema_value_types(params, props->items[j]);
    if (!Q3_TYPE(types, CHAT_SCHEMA_STRING)) {
        /* tool_arg_json_value(schema(json(), rule_name + "-schema", doc, *param.schema)) + arg_close */
        char sn[112];
        snprintf(sn, sizeof sn, "%s-schema", rn);
        size_t sc = csp_schema_json(c, sn, params, props->items[j]);
        value = peg_seq2(a, chat_peg_tag(a, "tool-arg-value", sc), sh->arg_close);
    } else if (types == 1u << CHAT_SCHEMA_STRING) {
        value = sh->arg_string;
    } else {
        /* the JSON alternatives the types allow, then the raw string */
        size_t jv = peg_choice(a, NULL, 0);
        if (Q3_TYPE(types, CHAT_SCHEMA_OBJECT)) jv = peg_alt2(a, jv, peg_json_object(a));
        if (Q3_TYPE(types, CHAT_SCHEMA_ARRAY)) jv = peg_alt2(a, jv, peg_json_array(a));
        if (Q3_TYPE(types, CHAT_SCHEMA_NUMBER) || Q3_TYPE(types, CHAT_SCHEMA_INTEGER))
            jv = peg_alt2(a, jv, peg_json_number(a));
        if (Q3_TYPE(types, CHAT_SCHEMA_BOOLEAN)) jv = peg_alt2(a, jv, peg_json_bool(a));
        if (Q3_TYPE(types, CHAT_SCHEMA_NULL)) jv = peg_alt2(a, jv, peg_json_null(a));
        /* gbnf(atomic(tool_arg_json_value(json_value) + arg_close) | arg_string, "xml-arg-string") */
        size_t at = peg_atomic(a, peg_seq2(a, chat_peg_tag(a, "tool-arg-value", jv), sh->arg_close));
        value = peg_gbnf(a, peg_alt2(a, at, sh->arg_string), "xml-arg-string");
    }
    return peg_rule(a, rn, chat_peg_tag(a, "tool-arg", peg_seq2(a, open, value)), 0);
}

typedef struct {
    const q3_shared *sh;
    size_t i;
} q3_tool;

static size_t q3_arg_of(csp_ctx *c, const json_value *params, size_t j, void *ud)
{
    const q3_tool *t = ud;
    return q3_arg(c, t->sh, params, t->i, j);
}

/* one function: rule "tool-<i>" */
static size_t q3_function(csp_ctx *c, const q3_shared *sh, const json_value *fn, const char *name, size_t nlen, size_t i)
{
    peg_arena *a = &c->out->arena;
    const json_value *params = csp_parameters(fn);
    char rn[64];
    snprintf(rn, sizeof rn, "tool-%zu-args", i);
    q3_tool t = {sh, i};
    size_t args = csp_tagged_args(c, params, rn, q3_arg_of, &t);
    /* tool(tool_open("<function=" + tool_name(literal(name)) + ">\n") + tool_args(args) +
     *      tool_close(literal("</function>\n"))) */
    size_t close = chat_peg_tag(a, "tool-close", peg_literal_c(a, "</function>\n"));
    size_t targs = chat_peg_tag(a, "tool-args", args);
    size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
    size_t open = chat_peg_tag(a, "tool-open", csp_ps(a, csp_sp(a, "<function=", tn), ">\n"));
    size_t func = chat_peg_tag(a, "tool", peg_seq2(a, peg_seq2(a, open, targs), close));
    snprintf(rn, sizeof rn, "tool-%zu", i);
    return peg_rule(a, rn, func, 0);
}

/* the tool-call branch: generation_prompt + (reasoning << content(until_one_of(starts)) << tool_calls) */
static size_t q3_tools(csp_ctx *c, size_t gp, size_t reasoning, int coder, const peg_str *starts, size_t nstarts)
{
    peg_arena *a = &c->out->arena;
    const chat_gen_inputs *in = c->in;
    q3_shared sh;
    sh.arg_close = chat_peg_tag(a, "tool-arg-close", peg_literal_c(a, Q3_ARG_END));
    /* rule("xml-arg-string", ac(tool_arg_string_value(until(END)) + arg_close, END)) */
    size_t sv = chat_peg_tag(a, "tool-arg-string-value", peg_until(a, Q3_ARG_END, strlen(Q3_ARG_END)));
    peg_str d = {(char *)Q3_ARG_END, strlen(Q3_ARG_END)};
    sh.arg_string = peg_rule(a, "xml-arg-string", peg_ac(a, peg_seq2(a, sv, sh.arg_close), &d, 1), 0);
    size_t choice = peg_choice(a, NULL, 0);
    for (size_t i = 0; i < in->tools->n && !c->failed; i++) {
        const char *name;
        size_t nlen;
        const json_value *fn = csp_function(in->tools->items[i], &name, &nlen);
        if (fn) choice = peg_alt2(a, choice, q3_function(c, &sh, fn, name, nlen, i));
    }
    int min_calls = in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED;
    /* tool_call_body = tool_choice + "</tool_call>" + space() */
    size_t sp = peg_space(a);
    size_t body = peg_seq2(a, csp_ps(a, choice, "</tool_call>"), sp);
    size_t call = peg_rule(a, "tool-call", csp_sp(a, "<tool_call>\n", body), 0);
    size_t first = call;
    if (coder) {
        /* rule("tool-call-first", optional(literal("<tool_call>\n")) + tool_call_body) */
        size_t o = peg_optional(a, peg_literal_c(a, "<tool_call>\n"));
        first = peg_rule(a, "tool-call-first", peg_seq2(a, o, body), 0);
    }
    size_t calls = first;
    if (in->parallel_tool_calls) calls = peg_seq2(a, first, peg_zero_or_more(a, call));
    size_t tool_calls = peg_rule(a, "tool-call-root", peg_repeat(a, calls, min_calls, 1), 1);
    size_t content = chat_peg_tag(a, "content", peg_until_one_of(a, starts, nstarts));
    return peg_seq2(a, gp, csp_shl(a, csp_shl(a, reasoning, content), tool_calls));
}

int chat_spec_qwen3_coder(csp_ctx *c)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    int reasoning_tags = memmem(c->tmpl, c->tmpl_len, "<think>", 7) != NULL;
    int coder = !reasoning_tags;
    out->supports_thinking = reasoning_tags;
    if (csp_preserve(c, "<tool_call>") || csp_preserve(c, "</tool_call>")) return CHAT_GEN_ERROR;
    if (reasoning_tags) {
        if (!(out->thinking_start_tag = csp_strdup(c, "<think>", 7))) return CHAT_GEN_ERROR;
        if (csp_end_tag(c, "\n</think>") || csp_end_tag(c, "</think>") || csp_end_tag(c, "<tool_call>") ||
            csp_preserve(c, "<think>") || csp_preserve(c, "</think>"))
            return CHAT_GEN_ERROR;
    } else if (!(out->thinking_start_tag = csp_strdup(c, "", 0))) {
        return CHAT_GEN_ERROR;
    }
    int has_tools = csp_has_tools(in), has_schema = csp_has_schema(in);
    int tool_parser = has_tools && in->tool_choice != CHAT_TOOL_CHOICE_NONE;
    int include_grammar = has_schema || tool_parser;

    /* tool_call_starts: "<tool_call>", and for Qwen3-Coder "<function=NAME>" per function */
    size_t nstarts = 1;
    peg_str *starts = calloc(1 + (has_tools ? in->tools->n : 0), sizeof *starts);
    if (!starts) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    starts[0].s = "<tool_call>";
    starts[0].n = 11;
    for (size_t i = 0; coder && has_tools && i < in->tools->n; i++) {
        const char *name;
        size_t nlen;
        if (!csp_function(in->tools->items[i], &name, &nlen)) continue;
        char *s = malloc(nlen + 12);
        if (!s) { a->oom = 1; break; }
        memcpy(s, "<function=", 10);
        memcpy(s + 10, name, nlen);
        s[10 + nlen] = '>';
        s[11 + nlen] = 0;
        starts[nstarts].s = s;
        starts[nstarts++].n = nlen + 11;
    }

    size_t gp = peg_literal_c(a, "<|im_start|>assistant\n");
    size_t reasoning = peg_eps(a);
    if (reasoning_tags && in->reasoning_format != CHAT_REASONING_NONE) {
        /* optional("<think>" + space() + reasoning(until_one_of({"</think>", "<tool_call>"})) +
         *          (literal("</think>") | peek(literal("<tool_call>")))) */
        size_t pk = peg_peek(a, peg_literal_c(a, "<tool_call>"));
        size_t end = peg_alt2(a, peg_literal_c(a, "</think>"), pk);
        peg_str d[2] = {{"</think>", 8}, {"<tool_call>", 11}};
        size_t rs = chat_peg_tag(a, "reasoning", peg_until_one_of(a, d, 2));
        size_t x = csp_sp(a, "<think>", peg_space(a));
        reasoning = peg_optional(a, peg_seq2(a, peg_seq2(a, x, rs), end));
    }
    size_t root;
    if (has_schema) {
        size_t sc = csp_schema_json(c, "response-format", in->json_schema, in->json_schema);
        root = peg_seq2(a, gp, csp_shl(a, reasoning, chat_peg_tag(a, "content", sc)));
    } else if (tool_parser) {
        root = q3_tools(c, gp, reasoning, coder, starts, nstarts);
    } else {
        root = peg_seq2(a, gp, csp_shl(a, reasoning, chat_peg_tag(a, "content", peg_rest(a))));
    }
    int rc = CHAT_GEN_OK;
    if (c->failed) rc = CHAT_GEN_ERROR;
    else if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); rc = CHAT_GEN_ERROR; }
    else if (peg_build(a, root, c->err, c->errlen)) rc = CHAT_GEN_ERROR;
    if (rc == CHAT_GEN_OK && include_grammar) {
        out->has_grammar = 1;
        out->grammar_lazy = has_tools && in->tool_choice == CHAT_TOOL_CHOICE_AUTO;
        for (size_t i = 0; out->grammar_lazy && i < nstarts; i++)
            if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_WORD, starts[i].s, starts[i].n)) { rc = CHAT_GEN_ERROR; break; }
    }
    for (size_t i = 1; i < nstarts; i++) free(starts[i].s);
    free(starts);
    return rc;
}
