/*
 * chat_spec_cohere.c -- b11669's common_chat_params_init_cohere2moe
 * (common/parsers/cohere2moe.cpp): Cohere2 MoE's marker-wrapped turn
 *   <|START_THINKING|>...<|END_THINKING|> then <|START_TEXT|>...<|END_TEXT|>
 *   or <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {...}}]<|END_ACTION|>
 * with the calls as common_chat_peg_builder::standard_json_tools builds them
 * (chat_gen_json_tools, shared with the autoparser generator).
 */
#include <stdio.h>
#include <string.h>

#include "text/chat_gen_int.h"
#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

#define CO_LIT(s) (s), (sizeof(s) - 1)

int chat_spec_cohere2moe(csp_ctx *c)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    static const char *const preserved[13] = {
        "<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|CHATBOT_TOKEN|>", "<|USER_TOKEN|>", "<|SYSTEM_TOKEN|>",
        "<|START_THINKING|>", "<|END_THINKING|>", "<|START_TEXT|>", "<|END_TEXT|>", "<|START_ACTION|>",
        "<|END_ACTION|>", "<|START_TOOL_RESULT|>", "<|END_TOOL_RESULT|>"};
    out->supports_thinking = 1;
    if (!(out->thinking_start_tag = csp_strdup(c, CO_LIT("<|START_THINKING|>"))) || csp_end_tag(c, "<|END_THINKING|>"))
        return CHAT_GEN_ERROR;
    for (size_t i = 0; i < 13; i++) if (csp_preserve(c, preserved[i])) return CHAT_GEN_ERROR;
    int has_tools = csp_has_tools(in), has_schema = csp_has_schema(in);
    int tool_parser = has_tools && in->tool_choice != CHAT_TOOL_CHOICE_NONE;

    size_t gp = peg_literal_c(a, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
    size_t end = peg_end(a);
    size_t reasoning = peg_eps(a);
    {
        /* optional([content(] literal(THINK_START) + [reasoning(] until_one_of({THINK_END, TEXT_START,
         * ACTION_START}) [)] + optional(literal(THINK_END)) [)]) */
        size_t oe = peg_optional(a, peg_literal_c(a, "<|END_THINKING|>"));
        peg_str d[3] = {{CO_LIT("<|END_THINKING|>")}, {CO_LIT("<|START_TEXT|>")}, {CO_LIT("<|START_ACTION|>")}};
        size_t u = peg_until_one_of(a, d, 3);
        if (in->reasoning_format != CHAT_REASONING_NONE) {
            size_t rs = chat_peg_tag(a, "reasoning", u);
            size_t x = peg_seq2(a, peg_seq2(a, peg_literal_c(a, "<|START_THINKING|>"), rs), oe);
            reasoning = peg_optional(a, x);
        } else {
            size_t x = peg_seq2(a, peg_seq2(a, peg_literal_c(a, "<|START_THINKING|>"), u), oe);
            reasoning = peg_optional(a, chat_peg_tag(a, "content", x));
        }
    }
    /* literal(TEXT_START) + content(schema(...) | until(TEXT_END)) + optional(literal(TEXT_END)) */
    size_t ote = peg_optional(a, peg_literal_c(a, "<|END_TEXT|>"));
    size_t body = has_schema ? csp_schema_json(c, "response-format-schema", in->json_schema, in->json_schema)
                             : peg_until(a, CO_LIT("<|END_TEXT|>"));
    size_t ct = chat_peg_tag(a, "content", body);
    size_t text = peg_seq2(a, peg_seq2(a, peg_literal_c(a, "<|START_TEXT|>"), ct), ote);
    size_t main = text;
    int unsupported = 0;
    if (tool_parser) {
        cg_tools t = {a, in->tools, c->err, c->errlen, 0, 0};
        static const ca_str ss = {CO_LIT("<|START_ACTION|>")}, se = {CO_LIT("<|END_ACTION|>")};
        static const ca_str order[3] = {{CO_LIT("tool_call_id")}, {CO_LIT("tool_name")}, {CO_LIT("parameters")}};
        size_t calls = chat_gen_json_tools(&t, &ss, &se, in->parallel_tool_calls, 1, "tool_name", "parameters", 1, 0, "",
                                           "tool_call_id", order, 3, 0);
        if (t.failed) c->failed = 1;
        unsupported = t.unsupported;
        if (in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED) {
            main = calls;
        } else {
            size_t alts[2] = {calls, text};
            main = peg_choice(a, alts, 2);
        }
    }
    /* generation_prompt + reasoning + body + optional(literal(TURN_END)) + end */
    size_t ot = peg_optional(a, peg_literal_c(a, "<|END_OF_TURN_TOKEN|>"));
    size_t root = peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, gp, reasoning), main), ot), end);
    if (unsupported) return CHAT_GEN_UNSUPPORTED;
    if (c->failed) return CHAT_GEN_ERROR;
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (has_schema || tool_parser) {
        out->has_grammar = 1;
        out->grammar_lazy = !has_schema && in->tool_choice == CHAT_TOOL_CHOICE_AUTO;
        if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_WORD, CO_LIT("<|START_ACTION|>"))) return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
