/*
 * chat_spec_minicpm.c -- b11669's common_chat_params_init_minicpm5
 * (common/parsers/minicpm5.cpp): MiniCPM5's
 *   <think>reasoning</think> content <function name="NAME"><param name="K">VALUE</param></function>
 * a string value raw or inside <![CDATA[...]]>.
 *
 * Measured on b11669 (its arenas through testing/kit_chat.cpp): rules and
 * schemas are named by the tool's index and the argument's (tool-0,
 * tool-1-arg-0-schema).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_gen_int.h"
#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

static size_t mc_close(peg_arena *a) { return chat_peg_tag(a, "tool-arg-close", peg_literal_c(a, "</param>")); }

/* choice({ literal("<![CDATA[") + ac(tool_arg_string_value(until("]]>")) + literal("]]>"), "]]>") + arg_close,
 *          negate(literal("<![CDATA[")) + ac(tool_arg_string_value(until("</param>")) + arg_close, "</param>") }) */
static size_t mc_string_value(peg_arena *a)
{
    size_t c1 = mc_close(a);
    size_t e1 = peg_literal_c(a, "]]>");
    size_t v1 = chat_peg_tag(a, "tool-arg-string-value", peg_until(a, "]]>", 3));
    peg_str d1 = {"]]>", 3};
    size_t ac1 = peg_ac(a, peg_seq2(a, v1, e1), &d1, 1);
    size_t l1 = peg_literal_c(a, "<![CDATA[");
    size_t alt1 = peg_seq2(a, peg_seq2(a, l1, ac1), c1);
    size_t c2 = mc_close(a);
    size_t v2 = chat_peg_tag(a, "tool-arg-string-value", peg_until(a, "</param>", 8));
    peg_str d2 = {"</param>", 8};
    size_t ac2 = peg_ac(a, peg_seq2(a, v2, c2), &d2, 1);
    size_t n = peg_negate(a, peg_literal_c(a, "<![CDATA["));
    size_t alts[2] = {alt1, peg_seq2(a, n, ac2)};
    return peg_choice(a, alts, 2);
}

static size_t mc_arg(csp_ctx *c, const json_value *params, size_t i, size_t j, size_t string_value)
{
    peg_arena *a = &c->out->arena;
    const json_value *props = json_get(params, "properties");
    size_t value = peg_eps(a);
    if (chat_gen_schema_may_be_string(params, props->items[j])) {
        value = string_value;
    } else {
        size_t close = mc_close(a);
        char sn[112];
        snprintf(sn, sizeof sn, "tool-%zu-arg-%zu-schema", i, j);
        value = peg_seq2(a, chat_peg_tag(a, "tool-arg-value", csp_schema_json(c, sn, params, props->items[j])), close);
    }
    size_t l2 = peg_literal_c(a, "\">");
    size_t an = chat_peg_tag(a, "tool-arg-name", peg_literal(a, props->keys[j], props->key_lens[j]));
    size_t l1 = peg_literal_c(a, "<param name=\"");
    size_t open = chat_peg_tag(a, "tool-arg-open", peg_seq2(a, peg_seq2(a, l1, an), l2));
    return chat_peg_tag(a, "tool-arg", peg_seq2(a, open, value));
}

static size_t mc_function(csp_ctx *c, const json_value *fn, const char *name, size_t nlen, size_t i, size_t string_value)
{
    peg_arena *a = &c->out->arena;
    const json_value *params = csp_parameters(fn);
    size_t *rules = NULL, n = 0;
    csp_check_params(c, params);                  /* common_chat_schema_from_json: b11669 throws */
    const json_value *props = params && !c->failed && chat_gen_schema_is_object(params) ? json_get(params, "properties") : NULL;
    if (props && props->type == JSON_OBJECT && props->n) {
        if (!(rules = malloc(props->n * sizeof *rules))) { a->oom = 1; return peg_eps(a); }
        for (size_t j = 0; j < props->n && !c->failed; j++) rules[n++] = mc_arg(c, params, i, j, string_value);
    }
    size_t args = peg_eps(a);
    if (n) {
        size_t sp = peg_space(a);
        args = peg_zero_or_more(a, peg_seq2(a, peg_choice(a, rules, n), sp));
    }
    free(rules);
    /* tool(tool_open(literal("<function name=\"") + tool_name(literal(name)) + literal("\">")) << tool_args(args)
     *      << tool_close(literal("</function>"))) */
    size_t l2 = peg_literal_c(a, "\">");
    size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
    size_t l1 = peg_literal_c(a, "<function name=\"");
    size_t open = chat_peg_tag(a, "tool-open", peg_seq2(a, peg_seq2(a, l1, tn), l2));
    size_t x = csp_shl(a, open, chat_peg_tag(a, "tool-args", args));
    size_t tool = chat_peg_tag(a, "tool", csp_shl(a, x, chat_peg_tag(a, "tool-close", peg_literal_c(a, "</function>"))));
    char rn[64];
    snprintf(rn, sizeof rn, "tool-%zu", i);
    return peg_rule(a, rn, tool, 0);
}

int chat_spec_minicpm5(csp_ctx *c)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    static const char *const preserved[6] = {"<function", "<param", "</function>", "</param>", "<think>", "</think>"};
    out->supports_thinking = 1;
    for (size_t i = 0; i < 6; i++) if (csp_preserve(c, preserved[i])) return CHAT_GEN_ERROR;
    if (!(out->thinking_start_tag = csp_strdup(c, "<think>", 7)) || csp_end_tag(c, "</think>")) return CHAT_GEN_ERROR;
    int has_tools = csp_has_tools(in), has_schema = csp_has_schema(in);
    int tool_parser = has_tools && in->tool_choice != CHAT_TOOL_CHOICE_NONE;

    size_t gp = peg_literal_c(a, "<|im_start|>assistant\n");
    size_t reasoning = peg_eps(a);
    if (in->reasoning_format != CHAT_REASONING_NONE) {
        /* ("<think>" << reasoning(until("</think>")) << "</think>") + space() */
        size_t sp = peg_space(a);
        size_t rs = chat_peg_tag(a, "reasoning", peg_until(a, "</think>", 8));
        size_t x = csp_shl(a, peg_literal_c(a, "<think>"), rs);     /* "str" << x: x first */
        reasoning = peg_seq2(a, csp_shl_s(a, x, "</think>"), sp);
    }
    size_t root;
    if (has_schema) {
        size_t ct = chat_peg_tag(a, "content", csp_schema_json(c, "response-format", in->json_schema, in->json_schema));
        root = peg_seq2(a, peg_seq2(a, gp, reasoning), ct);
    } else if (tool_parser) {
        size_t string_value = mc_string_value(a);
        size_t choice = peg_choice(a, NULL, 0);
        for (size_t i = 0; i < in->tools->n && !c->failed; i++) {
            const char *name;
            size_t nlen;
            const json_value *fn = csp_function(in->tools->items[i], &name, &nlen);
            if (fn) choice = peg_alt2(a, choice, mc_function(c, fn, name, nlen, i, string_value));
        }
        size_t sp = peg_space(a);
        size_t calls = peg_rule(a, "tool-call", peg_repeat(a, peg_seq2(a, choice, sp), 1, in->parallel_tool_calls ? -1 : 1), 1);
        size_t content = chat_peg_tag(a, "content", peg_until(a, "<function", 9));
        size_t e = peg_end(a);
        root = peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, gp, reasoning), content), calls), e);
    } else {
        size_t e = peg_end(a);
        size_t ct = chat_peg_tag(a, "content", peg_rest(a));
        root = peg_seq2(a, peg_seq2(a, peg_seq2(a, gp, reasoning), ct), e);
    }
    if (c->failed) return CHAT_GEN_ERROR;
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (has_schema || tool_parser) {
        out->has_grammar = 1;
        out->grammar_lazy = !(has_schema || (has_tools && in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED));
        if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_WORD, "<function", 9)) return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
