/*
 * chat_spec_kimi.c -- b11669's common_chat_params_init_kimi_k2
 * (common/parsers/kimi-k2.cpp): Kimi K2's
 *   <think>...</think>content<|tool_calls_section_begin|>
 *   <|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{args}<|tool_call_end|>...
 *   <|tool_calls_section_end|>
 * (the call id is the whole "functions.NAME:N").
 *
 * Measured on b11669 (its arenas through testing/kit_chat.cpp): rules and
 * schemas are named by the tool's index (tool-0, tool-0-schema); a
 * response_format schema gets no grammar and no parser of its own.
 */
#include <stdio.h>
#include <string.h>

#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

#define KK_SB "<|tool_calls_section_begin|>"
#define KK_SE "<|tool_calls_section_end|>"
#define KK_CB "<|tool_call_begin|>"
#define KK_AB "<|tool_call_argument_begin|>"
#define KK_CE "<|tool_call_end|>"
#define KK_LIT(s) (s), (sizeof(s) - 1)

/* rule "tool-<i>": tool(tool_open(tool_id + literal(ARGS_BEGIN)) + tool_args(schema) +
 *                       tool_close(optional(literal(CALL_END)))) */
static size_t kk_function(csp_ctx *c, const json_value *fn, const char *name, size_t nlen, size_t i)
{
    peg_arena *a = &c->out->arena;
    /* tool_id(literal("functions.") + tool_name(literal(name)) + literal(":") + chars("[0-9]", 1, -1)) */
    size_t digits = peg_chars(a, "[0-9]", 1, -1);
    size_t colon = peg_literal_c(a, ":");
    size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
    size_t fx = peg_literal_c(a, "functions.");
    size_t id = chat_peg_tag(a, "tool-id", peg_seq2(a, peg_seq2(a, peg_seq2(a, fx, tn), colon), digits));
    size_t close = chat_peg_tag(a, "tool-close", peg_optional(a, peg_literal(a, KK_LIT(KK_CE))));
    size_t args = chat_peg_tag(a, "tool-args", csp_tool_schema(c, fn, i));
    size_t open = chat_peg_tag(a, "tool-open", peg_seq2(a, id, peg_literal(a, KK_LIT(KK_AB))));
    size_t tool = chat_peg_tag(a, "tool", peg_seq2(a, peg_seq2(a, open, args), close));
    char rn[64];
    snprintf(rn, sizeof rn, "tool-%zu", i);
    return peg_rule(a, rn, tool, 0);
}

int chat_spec_kimi_k2(csp_ctx *c)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    out->supports_thinking = 1;
    static const char *const preserved[7] = {KK_SB, KK_SE, KK_CB, KK_AB, KK_CE, "<think>", "</think>"};
    for (size_t i = 0; i < 7; i++) if (csp_preserve(c, preserved[i])) return CHAT_GEN_ERROR;
    if (!(out->thinking_start_tag = csp_strdup(c, "<think>", 7)) || csp_end_tag(c, "</think>")) return CHAT_GEN_ERROR;
    int tool_parser = csp_has_tools(in) && in->tool_choice != CHAT_TOOL_CHOICE_NONE;

    size_t end = peg_end(a);
    size_t reasoning;
    if (in->reasoning_format != CHAT_REASONING_NONE) {
        /* optional(THINK_START + reasoning(until_one_of({THINK_END, SECTION_BEGIN, CALL_BEGIN})) +
         *          optional(literal(THINK_END))) */
        size_t oe = peg_optional(a, peg_literal_c(a, "</think>"));
        peg_str d[3] = {{"</think>", 8}, {KK_LIT(KK_SB)}, {KK_LIT(KK_CB)}};
        size_t rs = chat_peg_tag(a, "reasoning", peg_until_one_of(a, d, 3));
        reasoning = peg_optional(a, peg_seq2(a, csp_sp(a, "<think>", rs), oe));
    } else {
        reasoning = peg_eps(a);
    }
    size_t gp = peg_literal_c(a, "<|im_assistant|>assistant<|im_middle|>");
    size_t root;
    if (!tool_parser) {
        size_t ct = chat_peg_tag(a, "content", peg_rest(a));
        root = peg_seq2(a, peg_seq2(a, peg_seq2(a, gp, reasoning), ct), end);
    } else {
        size_t choice = peg_choice(a, NULL, 0);
        for (size_t i = 0; i < in->tools->n && !c->failed; i++) {
            const char *name;
            size_t nlen;
            const json_value *fn = csp_function(in->tools->items[i], &name, &nlen);
            if (fn) choice = peg_alt2(a, choice, kk_function(c, fn, name, nlen, i));
        }
        int min = in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED, max = in->parallel_tool_calls ? -1 : 1;
        /* rule("tool-calls", optional(literal(SECTION_BEGIN)) + trigger_rule("tool-call",
         *      repeat(CALL_BEGIN + tool_choice, min, max) + optional(literal(SECTION_END)))) */
        size_t ose = peg_optional(a, peg_literal(a, KK_LIT(KK_SE)));
        size_t rep = peg_repeat(a, csp_sp(a, KK_CB, choice), min, max);
        size_t call = peg_rule(a, "tool-call", peg_seq2(a, rep, ose), 1);
        size_t osb = peg_optional(a, peg_literal(a, KK_LIT(KK_SB)));
        size_t calls = peg_rule(a, "tool-calls", peg_seq2(a, osb, call), 0);
        peg_str d[2] = {{KK_LIT(KK_SB)}, {KK_LIT(KK_CB)}};
        size_t before = chat_peg_tag(a, "content", peg_until_one_of(a, d, 2));
        root = peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, gp, reasoning), before), calls), end);
    }
    if (c->failed) return CHAT_GEN_ERROR;
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (tool_parser) {
        out->has_grammar = 1;
        out->grammar_lazy = in->tool_choice == CHAT_TOOL_CHOICE_AUTO;
        if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_WORD, KK_LIT(KK_CB))) return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
