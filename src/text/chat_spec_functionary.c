/*
 * chat_spec_functionary.c -- b11669's common_chat_params_init_functionary_v3_2
 * (common/parsers/functionary-v3-2.cpp): Functionary v3.2's recipient format
 * after the generation prompt's ">>>": "all\n" then content, or
 * "NAME\n{json args}", calls separated by ">>>".
 *
 * Measured on b11669 (its arenas through testing/kit_chat.cpp): rules and
 * schemas are named by the tool's index (tool-0, tool-0-schema); a
 * response_format schema gets no grammar and no parser of its own (the
 * content parser), as in v0.5.0's source.
 */
#include <stdio.h>
#include <string.h>

#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

int chat_spec_functionary_v3_2(csp_ctx *c)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    if (!(out->thinking_start_tag = csp_strdup(c, "", 0)) || csp_preserve(c, ">>>all")) return CHAT_GEN_ERROR;
    int has_tools = csp_has_tools(in);
    int tool_parser = has_tools && in->tool_choice != CHAT_TOOL_CHOICE_NONE;

    /* literal("all\n") + content(until(">>>")), literal("all\n") + content(rest()) */
    size_t cu = chat_peg_tag(a, "content", peg_until(a, ">>>", 3));
    size_t until_tool = csp_sp(a, "all\n", cu);
    size_t ce = chat_peg_tag(a, "content", peg_rest(a));
    size_t until_end = csp_sp(a, "all\n", ce);
    size_t gp = peg_literal_c(a, "<|start_header_id|>assistant<|end_header_id|>\n\n>>>");
    size_t root;
    if (!tool_parser) {
        size_t e = peg_end(a);
        root = peg_seq2(a, peg_seq2(a, gp, until_end), e);
    } else {
        size_t choice = peg_choice(a, NULL, 0);
        for (size_t i = 0; i < in->tools->n && !c->failed; i++) {
            const char *name;
            size_t nlen;
            const json_value *fn = csp_function(in->tools->items[i], &name, &nlen);
            if (!fn) continue;
            /* tool(tool_open(tool_name(literal(name)) + literal("\n")) + tool_args(schema(...))) */
            size_t args = chat_peg_tag(a, "tool-args", csp_tool_schema(c, fn, i));
            size_t nl = peg_literal_c(a, "\n");
            size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
            size_t open = chat_peg_tag(a, "tool-open", peg_seq2(a, tn, nl));
            char rn[64];
            snprintf(rn, sizeof rn, "tool-%zu", i);
            choice = peg_alt2(a, choice, peg_rule(a, rn, chat_peg_tag(a, "tool", peg_seq2(a, open, args)), 0));
        }
        size_t tools_only = peg_rule(a, "tools", peg_one_or_more(a, choice), 1);
        size_t content_and_tools = peg_seq2(a, until_tool, tools_only);
        size_t ret = peg_eps(a);
        size_t alts[3];
        if (in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED) {
            size_t e = peg_end(a);
            alts[0] = in->parallel_tool_calls ? content_and_tools : peg_seq2(a, until_tool, choice);
            alts[1] = tools_only;
            ret = peg_seq2(a, peg_choice(a, alts, 2), e);
        } else if (in->parallel_tool_calls) {
            size_t e = peg_end(a);
            alts[0] = content_and_tools;
            alts[1] = until_end;
            alts[2] = tools_only;
            ret = peg_seq2(a, peg_choice(a, alts, 3), e);
        } else {
            size_t content_and_tool = peg_seq2(a, until_tool, choice);
            size_t e = peg_end(a);
            alts[0] = content_and_tool;
            alts[1] = until_end;
            alts[2] = choice;
            ret = peg_seq2(a, peg_choice(a, alts, 3), e);
        }
        root = peg_seq2(a, gp, ret);
    }
    if (c->failed) return CHAT_GEN_ERROR;
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (tool_parser) {
        out->has_grammar = 1;
        out->grammar_lazy = in->tool_choice == CHAT_TOOL_CHOICE_AUTO;
        if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_PATTERN, ">>>(?!all)", 10)) return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
