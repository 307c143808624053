/*
 * chat_spec_muse.c -- b11669's common_chat_params_init_muse_glimmer
 * (common/parsers/muse-glimmer.cpp): messages
 *   <|start|>assistant to=self<|message|>reasoning<|eom|>
 *   <|start|>assistant to=user<|message|>answer<|eot|>
 * and ATEM tool calls on " to=<tool>" turns
 *   <|start|>assistant to=NAME<|message|><atem:function_calls>
 *   <atem:invoke name="NAME"><atem:parameter name="ARG">VALUE</atem:parameter></atem:invoke>
 *   </atem:function_calls>
 * Its generation prompt is always "<|start|>assistant" (set here, whatever
 * the caller passed).
 *
 * b11669 differs from v0.5.0's source here: response_format has its own
 * rule (the schema's JSON after <|message|>, bare or in a ```json fence),
 * taken before the tools, with a grammar that is not lazy; an empty schema
 * object counts.
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

#define MG_PEND "</atem:parameter>"

/* tool_arg(tool_arg_open(literal("<atem:parameter name=\"") + tool_arg_name(literal(name)) + literal("\">")) + value) */
static size_t mg_arg(csp_ctx *c, const json_value *params, size_t i, size_t j, size_t string_value)
{
    peg_arena *a = &c->out->arena;
    const json_value *props = json_get(params, "properties");
    size_t value = peg_eps(a);
    if (chat_gen_schema_may_be_string(params, props->items[j])) {
        value = string_value;
    } else {
        size_t close = chat_peg_tag(a, "tool-arg-close", peg_literal_c(a, MG_PEND));
        char sn[112];
        snprintf(sn, sizeof sn, "tool-%zu-arg-%zu-schema", i, j);
        value = peg_seq2(a, chat_peg_tag(a, "tool-arg-value", csp_schema_json(c, sn, params, props->items[j])), close);
    }
    size_t l2 = peg_literal_c(a, "\">");
    size_t an = chat_peg_tag(a, "tool-arg-name", peg_literal(a, props->keys[j], props->key_lens[j]));
    size_t l1 = peg_literal_c(a, "<atem:parameter name=\"");
    size_t open = chat_peg_tag(a, "tool-arg-open", peg_seq2(a, peg_seq2(a, l1, an), l2));
    return chat_peg_tag(a, "tool-arg", peg_seq2(a, open, value));
}

/* rule "tool-<i>" */
static size_t mg_function(csp_ctx *c, const json_value *fn, const char *name, size_t nlen, size_t i, size_t string_value)
{
    peg_arena *a = &c->out->arena;
    const json_value *params = csp_parameters(fn);
    size_t *rules = NULL, n = 0;
    csp_check_params(c, params);                  /* common_chat_schema_from_json: b11669 throws */
    const json_value *props = params && !c->failed && chat_gen_schema_is_object(params) ? json_get(params, "properties") : NULL;
    if (props && props->type == JSON_OBJECT && props->n) {
        if (!(rules = malloc(props->n * sizeof *rules))) { a->oom = 1; return peg_eps(a); }
        for (size_t j = 0; j < props->n && !c->failed; j++) rules[n++] = mg_arg(c, params, i, j, string_value);
    }
    size_t args = peg_eps(a);
    if (n) {
        size_t sp = peg_space(a);
        args = peg_zero_or_more(a, peg_seq2(a, peg_choice(a, rules, n), sp));
    }
    free(rules);
    /* tool_open(literal(" to=") + until("<|message|>") + literal("<|message|><atem:function_calls>") + space() +
     *           literal("<atem:invoke name=\"") + tool_name(literal(name)) + literal("\">") + space()) */
    size_t t[8];
    t[7] = peg_space(a);
    t[6] = peg_literal_c(a, "\">");
    t[5] = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
    t[4] = peg_literal_c(a, "<atem:invoke name=\"");
    t[3] = peg_space(a);
    t[2] = peg_literal_c(a, "<|message|><atem:function_calls>");
    t[1] = peg_until(a, "<|message|>", 11);
    t[0] = peg_literal_c(a, " to=");
    size_t x = t[0];
    for (size_t k = 1; k < 8; k++) x = peg_seq2(a, x, t[k]);
    size_t open = chat_peg_tag(a, "tool-open", x);
    size_t y = csp_shl(a, open, chat_peg_tag(a, "tool-args", args));
    /* << tool_close(literal("</atem:invoke>") + space() + literal("</atem:function_calls>")) */
    size_t lf = peg_literal_c(a, "</atem:function_calls>");
    size_t sp = peg_space(a);
    size_t li = peg_literal_c(a, "</atem:invoke>");
    size_t close = chat_peg_tag(a, "tool-close", peg_seq2(a, peg_seq2(a, li, sp), lf));
    size_t tool = chat_peg_tag(a, "tool", csp_shl(a, y, close));
    char rn[64];
    snprintf(rn, sizeof rn, "tool-%zu", i);
    return peg_rule(a, rn, tool, 0);
}

/* zero_or_more(start + analysis) + start + last */
static size_t mg_tail(peg_arena *a, size_t start, size_t analysis, size_t last)
{
    size_t z = peg_zero_or_more(a, peg_seq2(a, start, analysis));
    return peg_seq2(a, peg_seq2(a, z, start), last);
}

static size_t mg_build(csp_ctx *c, int extract, int has_schema, int tool_parser)
{
    const chat_gen_inputs *in = c->in;
    peg_arena *a = &c->out->arena;
    size_t start = peg_rule(a, "start", peg_literal_c(a, "<|start|>assistant"), 0);
    if (!extract && !has_schema && !tool_parser) return peg_seq2(a, start, chat_peg_tag(a, "content", peg_rest(a)));
    /* rule("analysis", literal(" to=self<|message|>") + reasoning|content(until("<|eom|>")) + literal("<|eom|>")) */
    size_t le = peg_literal_c(a, "<|eom|>");
    size_t body = chat_peg_tag(a, extract ? "reasoning" : "content", peg_until(a, "<|eom|>", 7));
    size_t ls = peg_literal_c(a, " to=self<|message|>");
    peg_rule(a, "analysis", peg_seq2(a, peg_seq2(a, ls, body), le), 0);
    size_t analysis = peg_ref(a, "analysis");
    size_t recipient = peg_optional(a, peg_literal_c(a, " to=user"));
    peg_str d[2] = {{"<|eot|>", 7}, {"<|eom|>", 7}};
    size_t fc = chat_peg_tag(a, "content", peg_until_one_of(a, d, 2));
    size_t final_msg = peg_rule(a, "final", peg_seq2(a, csp_ps(a, recipient, "<|message|>"), fc), 0);
    if (has_schema) {
        /* rule("response-format", recipient + literal("<|message|>") +
         *      (literal("```json") + space() + response + space() + literal("```") | response)) */
        size_t rs = chat_peg_tag(a, "content",
                                 csp_schema_json(c, "response-format-schema", in->json_schema, in->json_schema));
        size_t l2 = peg_literal_c(a, "```");
        size_t s2 = peg_space(a);
        size_t s1 = peg_space(a);
        size_t l1 = peg_literal_c(a, "```json");
        size_t fenced = peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, l1, s1), rs), s2), l2);
        size_t body = peg_alt2(a, fenced, rs);
        size_t rf = peg_rule(a, "response-format", peg_seq2(a, csp_ps(a, recipient, "<|message|>"), body), 0);
        return mg_tail(a, start, analysis, rf);
    }
    if (!tool_parser) return mg_tail(a, start, analysis, final_msg);
    /* ac(tool_arg_string_value(until(END)) + tool_arg_close(literal(END)), END) */
    size_t close = chat_peg_tag(a, "tool-arg-close", peg_literal_c(a, MG_PEND));
    size_t sv = chat_peg_tag(a, "tool-arg-string-value", peg_until(a, MG_PEND, strlen(MG_PEND)));
    peg_str e = {MG_PEND, strlen(MG_PEND)};
    size_t string_value = peg_ac(a, peg_seq2(a, sv, close), &e, 1);
    size_t choice = peg_choice(a, NULL, 0);
    for (size_t i = 0; i < in->tools->n && !c->failed; i++) {
        const char *name;
        size_t nlen;
        const json_value *fn = csp_function(in->tools->items[i], &name, &nlen);
        if (fn) choice = peg_alt2(a, choice, mg_function(c, fn, name, nlen, i, string_value));
    }
    size_t calls;
    if (in->parallel_tool_calls) {
        size_t more = peg_seq2(a, csp_sp(a, "<|eom|>", start), choice);
        calls = peg_rule(a, "tool-call", peg_seq2(a, choice, peg_zero_or_more(a, more)), 1);
    } else {
        calls = peg_rule(a, "tool-call", choice, 1);
    }
    if (in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED) return mg_tail(a, start, analysis, calls);
    size_t trailing = peg_optional(a, peg_seq2(a, csp_sp(a, "<|eom|>", start), calls));
    size_t last = peg_alt2(a, calls, peg_seq2(a, final_msg, trailing));
    return mg_tail(a, start, analysis, last);
}

int chat_spec_muse_glimmer(csp_ctx *c)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    static const char *const preserved[10] = {
        "<|start|>", "<|message|>", "<|eom|>", "<|eot|>", "<atem:function_calls>", "<atem:invoke", "<atem:parameter",
        "</atem:parameter>", "</atem:invoke>", "</atem:function_calls>"};
    free(out->generation_prompt);
    out->generation_prompt_len = 18;
    out->supports_thinking = 1;
    if (!(out->generation_prompt = csp_strdup(c, "<|start|>assistant", 18)) ||
        !(out->thinking_start_tag = csp_strdup(c, "", 0)))
        return CHAT_GEN_ERROR;
    for (size_t i = 0; i < 10; i++) if (csp_preserve(c, preserved[i])) return CHAT_GEN_ERROR;
    int tool_parser = csp_has_tools(in) && in->tool_choice != CHAT_TOOL_CHOICE_NONE;
    int has_schema = in->json_schema && in->json_schema->type == JSON_OBJECT;   /* an empty object too */
    size_t root = mg_build(c, in->reasoning_format != CHAT_REASONING_NONE, has_schema, tool_parser);
    if (c->failed) return CHAT_GEN_ERROR;
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (has_schema || tool_parser) {
        static const char trig[] = "(?:^|<\\|start\\|>assistant)( to=(?!self<\\|message\\|>)(?!user<\\|message\\|>)"
                                   "[^<]*?<\\|message\\|>)";
        out->has_grammar = 1;
        out->grammar_lazy = !has_schema && in->tool_choice != CHAT_TOOL_CHOICE_REQUIRED;
        if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_PATTERN, trig, sizeof trig - 1)) return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
