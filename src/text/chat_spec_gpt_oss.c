/*
 * chat_spec_gpt_oss.c -- b11669's common_chat_params_init_gpt_oss
 * (common/parsers/gpt-oss.cpp): OpenAI's harmony format, messages
 *   <|start|>assistant<|channel|>analysis<|message|>...<|end|>
 *   <|start|>assistant<|channel|>final<|message|>...
 * and tool calls with the recipient in the role or the channel header
 *   <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{args}
 *
 * Measured on b11669 (its arenas through testing/kit_chat.cpp): rules and
 * schemas are named by the tool's index (tool-0, tool-0-schema). The prompt
 * side (reasoning_content copied to "thinking", <|return|> as <|end|>) is the
 * caller's render.
 */
#include <stdio.h>
#include <string.h>

#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

/* optional(space() + optional(literal("<|constrain|>")) + constrain_type) */
static size_t go_constraint(peg_arena *a, size_t constrain_type)
{
    size_t oc = peg_optional(a, peg_literal_c(a, "<|constrain|>"));
    size_t sp = peg_space(a);
    return peg_optional(a, peg_seq2(a, peg_seq2(a, sp, oc), constrain_type));
}

/* rule "tool-<i>": tool_in_role | tool_in_channel */
static size_t go_function(csp_ctx *c, const json_value *fn, const char *name, size_t nlen, size_t i, size_t channel,
                          size_t constrain_type)
{
    peg_arena *a = &c->out->arena;
    /* literal(" to=functions.") + tool_name(literal(name)) */
    size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
    size_t func_name = csp_sp(a, " to=functions.", tn);
    size_t cons = go_constraint(a, constrain_type);
    size_t args = chat_peg_tag(a, "tool-args", csp_tool_schema(c, fn, i));
    /* tool(tool_open(func_name + channel + constraint + literal("<|message|>")) + args) */
    size_t l1 = peg_literal_c(a, "<|message|>");
    size_t o1 = chat_peg_tag(a, "tool-open", peg_seq2(a, peg_seq2(a, peg_seq2(a, func_name, channel), cons), l1));
    size_t in_role = chat_peg_tag(a, "tool", peg_seq2(a, o1, args));
    /* tool(tool_open(channel + func_name + constraint + literal("<|message|>")) + args) */
    size_t l2 = peg_literal_c(a, "<|message|>");
    size_t o2 = chat_peg_tag(a, "tool-open", peg_seq2(a, peg_seq2(a, peg_seq2(a, channel, func_name), cons), l2));
    size_t in_channel = chat_peg_tag(a, "tool", peg_seq2(a, o2, args));
    char rn[64];
    snprintf(rn, sizeof rn, "tool-%zu", i);
    return peg_rule(a, rn, peg_alt2(a, in_role, in_channel), 0);
}

static const char *const go_triggers[4] = {
    "^\\s+to$",
    "^<\\|channel\\|>(?:commentary|analysis)\\s+to=functions$",
    "<\\|start\\|>assistant(\\s+to)",
    "<\\|start\\|>assistant(<\\|channel\\|>(?:commentary|analysis)\\s+to)",
};

int chat_spec_gpt_oss(csp_ctx *c)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    out->supports_thinking = 1;
    if (!(out->thinking_start_tag = csp_strdup(c, "<|channel|>analysis<|message|>", 30)) || csp_end_tag(c, "<|end|>") ||
        csp_preserve(c, "<|channel|>") || csp_preserve(c, "<|constrain|>") || csp_preserve(c, "<|message|>") ||
        csp_preserve(c, "<|start|>") || csp_preserve(c, "<|end|>"))
        return CHAT_GEN_ERROR;
    int has_tools = csp_has_tools(in);
    int has_schema = in->json_schema && in->json_schema->type == JSON_OBJECT;   /* an empty object too */
    int tool_parser = has_tools && in->tool_choice != CHAT_TOOL_CHOICE_NONE;

    size_t start = peg_rule(a, "start", peg_literal_c(a, "<|start|>assistant"), 0);
    size_t end = peg_rule(a, "end", peg_literal_c(a, "<|end|>"), 0);
    size_t content = peg_rule(a, "message-content", peg_until(a, "<|end|>", 7), 0);
    /* literal("<|channel|>") + (literal("commentary") | literal("analysis")) */
    size_t an = peg_literal_c(a, "analysis");
    size_t ch = peg_alt2(a, peg_literal_c(a, "commentary"), an);
    size_t channel = peg_seq2(a, peg_literal_c(a, "<|channel|>"), ch);
    size_t constrain_type = peg_chars(a, "[A-Za-z0-9_-]", 1, -1);
    /* optional(literal("<|channel|>commentary") + optional(literal(" to=assistant"))) */
    size_t ot = peg_optional(a, peg_literal_c(a, " to=assistant"));
    size_t stray = peg_optional(a, peg_seq2(a, peg_literal_c(a, "<|channel|>commentary"), ot));
    size_t start_analysis = csp_ps(a, stray, "<|channel|>analysis<|message|>");
    if (in->reasoning_format != CHAT_REASONING_NONE) {
        size_t rs = chat_peg_tag(a, "reasoning", content);
        peg_rule(a, "analysis", peg_seq2(a, peg_seq2(a, start_analysis, rs), end), 0);
    } else {
        peg_rule(a, "analysis", chat_peg_tag(a, "content", peg_seq2(a, peg_seq2(a, start_analysis, content), end)), 0);
    }
    size_t analysis = peg_ref(a, "analysis");
    /* rule("preamble", literal("<|channel|>commentary<|message|>") + content(content) + end) */
    size_t pc = chat_peg_tag(a, "content", content);
    size_t preamble = peg_rule(a, "preamble", peg_seq2(a, csp_sp(a, "<|channel|>commentary<|message|>", pc), end), 0);
    /* rule("final", stray_commentary + literal("<|channel|>final<|message|>") + content(content)) */
    size_t fc = chat_peg_tag(a, "content", content);
    size_t final_msg = peg_rule(a, "final", peg_seq2(a, csp_ps(a, stray, "<|channel|>final<|message|>"), fc), 0);
    /* rule("unsolicited", atomic(optional(channel) + literal(" to=") + content + end)) */
    size_t lto = peg_literal_c(a, " to=");
    size_t oc = peg_optional(a, channel);
    size_t un = peg_atomic(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, oc, lto), content), end));
    size_t unsolicited = peg_rule(a, "unsolicited", un, 0);
    size_t any = peg_rule(a, "any", peg_alt2(a, preamble, analysis), 0);
    size_t root;
    if (has_schema) {
        size_t cons = go_constraint(a, constrain_type);
        /* rule("response-format", literal("<|channel|>final") + constraint + literal("<|message|>") +
         *      content(schema(json(), "response-format-schema", json_schema))) */
        size_t sc = chat_peg_tag(a, "content",
                                 csp_schema_json(c, "response-format-schema", in->json_schema, in->json_schema));
        size_t l2 = peg_literal_c(a, "<|message|>");
        size_t l1 = peg_literal_c(a, "<|channel|>final");
        size_t rf = peg_rule(a, "response-format", peg_seq2(a, peg_seq2(a, peg_seq2(a, l1, cons), l2), sc), 0);
        /* zero_or_more(start + analysis) + start + response_format */
        size_t z = peg_zero_or_more(a, peg_seq2(a, start, analysis));
        root = peg_seq2(a, peg_seq2(a, z, start), rf);
    } else if (tool_parser) {
        size_t choice = peg_choice(a, NULL, 0);
        for (size_t i = 0; i < in->tools->n && !c->failed; i++) {
            const char *name;
            size_t nlen;
            const json_value *fn = csp_function(in->tools->items[i], &name, &nlen);
            if (fn) choice = peg_alt2(a, choice, go_function(c, fn, name, nlen, i, channel, constrain_type));
        }
        size_t call = peg_rule(a, "tool-call", choice, 1);
        size_t last = in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED ? call : peg_alt2(a, call, final_msg);
        size_t z = peg_zero_or_more(a, peg_seq2(a, start, any));
        root = peg_seq2(a, peg_seq2(a, z, start), last);
    } else {
        size_t last = peg_alt2(a, final_msg, unsolicited);
        size_t z = peg_zero_or_more(a, peg_seq2(a, start, any));
        root = peg_seq2(a, peg_seq2(a, z, start), last);
    }
    if (c->failed) return CHAT_GEN_ERROR;
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (has_schema || tool_parser) {
        out->has_grammar = 1;
        out->grammar_lazy = !(has_schema || (has_tools && in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED));
        for (size_t i = 0; i < 4; i++)
            if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_PATTERN, go_triggers[i], strlen(go_triggers[i]))) return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
