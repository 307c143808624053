/*
 * chat_spec_mistral.c -- b11669's common_chat_params_init_ministral_3
 * (common/parsers/ministral3.cpp): Ministral 3 / Devstral's
 *   [THINK]reasoning[/THINK]content[TOOL_CALLS]NAME[ARGS]{json}...
 * with response_format's JSON in a ```json fence.
 *
 * Measured on b11669 (its arenas through testing/kit_chat.cpp): rules and
 * schemas are named by the tool's index (tool-0, tool-0-schema); the trigger
 * [TOOL_CALLS] is set whenever a grammar is (response_format too, not lazy).
 */
#include <stdio.h>
#include <string.h>

#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

int chat_spec_ministral_3(csp_ctx *c)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    out->supports_thinking = 1;
    if (!(out->thinking_start_tag = csp_strdup(c, "[THINK]", 7)) || csp_end_tag(c, "[/THINK]") ||
        csp_preserve(c, "[THINK]") || csp_preserve(c, "[/THINK]") || csp_preserve(c, "[TOOL_CALLS]") ||
        csp_preserve(c, "[ARGS]"))
        return CHAT_GEN_ERROR;
    int has_tools = csp_has_tools(in), has_schema = csp_has_schema(in);
    int include_grammar = 1;

    size_t gp = peg_eps(a);
    size_t reasoning;
    if (in->reasoning_format != CHAT_REASONING_NONE) {
        /* optional("[THINK]" + reasoning(until("[/THINK]")) + "[/THINK]") */
        size_t rs = chat_peg_tag(a, "reasoning", peg_until(a, "[/THINK]", 8));
        reasoning = peg_optional(a, csp_ps(a, csp_sp(a, "[THINK]", rs), "[/THINK]"));
    } else {
        reasoning = peg_eps(a);
    }
    size_t root;
    if (has_schema) {
        /* generation_prompt + (reasoning << "```json" << content(schema(json(), "response-format", ...)) << "```") */
        size_t x = csp_shl_s(a, reasoning, "```json");
        size_t ct = chat_peg_tag(a, "content", csp_schema_json(c, "response-format", in->json_schema, in->json_schema));
        root = peg_seq2(a, gp, csp_shl_s(a, csp_shl(a, x, ct), "```"));
    } else if (has_tools && in->tool_choice != CHAT_TOOL_CHOICE_NONE) {
        size_t choice = peg_choice(a, NULL, 0);
        for (size_t i = 0; i < in->tools->n && !c->failed; i++) {
            const char *name;
            size_t nlen;
            const json_value *fn = csp_function(in->tools->items[i], &name, &nlen);
            if (!fn) continue;
            /* rule("tool-" + name, tool_open(tool_name(literal(name)) + "[ARGS]") + tool_args(schema(...))) */
            size_t args = chat_peg_tag(a, "tool-args", csp_tool_schema(c, fn, i));
            size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
            size_t open = chat_peg_tag(a, "tool-open", csp_ps(a, tn, "[ARGS]"));
            char rn[64];
            snprintf(rn, sizeof rn, "tool-%zu", i);
            choice = peg_alt2(a, choice, peg_rule(a, rn, peg_seq2(a, open, args), 0));
        }
        int min = in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED, max = in->parallel_tool_calls ? -1 : 1;
        size_t calls = peg_rule(a, "tool-call", peg_repeat(a, csp_sp(a, "[TOOL_CALLS]", choice), min, max), 1);
        size_t ct = chat_peg_tag(a, "content", peg_until(a, "[TOOL_CALLS]", 12));
        root = peg_seq2(a, gp, csp_shl(a, csp_shl(a, reasoning, ct), calls));
    } else {
        include_grammar = 0;
        root = peg_seq2(a, gp, csp_shl(a, reasoning, chat_peg_tag(a, "content", peg_rest(a))));
    }
    if (c->failed) return CHAT_GEN_ERROR;
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (include_grammar) {
        out->has_grammar = 1;
        out->grammar_lazy = has_tools && in->tool_choice == CHAT_TOOL_CHOICE_AUTO;
        if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_WORD, "[TOOL_CALLS]", 12)) return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
