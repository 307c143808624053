/*
 * chat_spec_kimi3.c -- b11669's common_chat_params_init_kimi_k3
 * (common/parsers/kimi-k3.cpp): Kimi K3's XTML sections
 *   <|open|>think<|sep|>...<|close|>think<|sep|><|open|>response<|sep|>...<|close|>response<|sep|>
 *   <|open|>tools<|sep|><|open|>call tool="NAME" index="0"<|sep|>
 *   <|open|>argument key="K" type="string"<|sep|>VALUE<|close|>argument<|sep|>...
 *   <|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>
 * Argument values are raw text, typed by the tool schema's own "type"
 * (string, or a JSON value) as this init reads the raw schema.
 *
 * Measured on b11669 (its arenas through testing/kit_chat.cpp): rules are
 * named by the tool's index and the argument's (kimi-k3-tool-0,
 * kimi-k3-arg-1-2); a response_format schema gets no grammar.
 */
#include <stdio.h>
#include <string.h>

#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

#define K3_SEP "<|sep|>"
#define K3_ARG_END "<|close|>argument<|sep|>"

/* rule "kimi-k3-arg-<i>-<j>" */
static size_t k3_arg(peg_arena *a, const char *key, size_t klen, const json_value *prop, size_t i, size_t j)
{
    const json_value *t = json_get(prop, "type");
    int is_string = !(prop && prop->type == JSON_OBJECT && t && t->type == JSON_STRING) || !strcmp(t->str, "string");
    size_t value = chat_peg_tag(a, is_string ? "tool-arg-string-value" : "tool-arg-value",
                                peg_until(a, K3_ARG_END, strlen(K3_ARG_END)));
    /* tool_arg(tool_arg_open(literal(ARG_START)) + tool_arg_name(literal(key)) + literal("\"") + until(SEP) +
     *          literal(SEP) + value + tool_arg_close(literal(ARG_END))) */
    size_t close = chat_peg_tag(a, "tool-arg-close", peg_literal_c(a, K3_ARG_END));
    size_t sep = peg_literal_c(a, K3_SEP);
    size_t u = peg_until(a, K3_SEP, strlen(K3_SEP));
    size_t q = peg_literal_c(a, "\"");
    size_t nm = chat_peg_tag(a, "tool-arg-name", peg_literal(a, key, klen));
    size_t open = chat_peg_tag(a, "tool-arg-open", peg_literal_c(a, "<|open|>argument key=\""));
    size_t ids[7] = {open, nm, q, u, sep, value, close};
    size_t x = ids[0];
    for (size_t k = 1; k < 7; k++) x = peg_seq2(a, x, ids[k]);
    char rn[96];
    snprintf(rn, sizeof rn, "kimi-k3-arg-%zu-%zu", i, j);
    return peg_rule(a, rn, chat_peg_tag(a, "tool-arg", x), 0);
}

/* rule "kimi-k3-tool-<i>" */
static size_t k3_function(peg_arena *a, const json_value *fn, const char *name, size_t nlen, size_t i)
{
    const json_value *params = csp_parameters(fn), *props = json_get(params, "properties");
    size_t args = peg_eps(a);
    if (props && !((props->type == JSON_OBJECT || props->type == JSON_ARRAY) && props->n == 0) &&
        props->type != JSON_NULL) {
        size_t choice = peg_choice(a, NULL, 0);
        for (size_t j = 0; props->type == JSON_OBJECT && j < props->n; j++)
            choice = peg_alt2(a, choice, k3_arg(a, props->keys[j], props->key_lens[j], props->items[j], i, j));
        args = peg_zero_or_more(a, choice);
    }
    /* tool(tool_open(literal(CALL_START) + tool_name(literal(name)) + literal("\"") + until(SEP) + literal(SEP)) +
     *      tool_args(args) + tool_close(literal(CALL_END))) */
    size_t close = chat_peg_tag(a, "tool-close", peg_literal_c(a, "<|close|>call<|sep|>"));
    size_t targs = chat_peg_tag(a, "tool-args", args);
    size_t sep = peg_literal_c(a, K3_SEP);
    size_t u = peg_until(a, K3_SEP, strlen(K3_SEP));
    size_t q = peg_literal_c(a, "\"");
    size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
    size_t l = peg_literal_c(a, "<|open|>call tool=\"");
    size_t x = peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, l, tn), q), u), sep);
    size_t open = chat_peg_tag(a, "tool-open", x);
    size_t tool = chat_peg_tag(a, "tool", peg_seq2(a, peg_seq2(a, open, targs), close));
    char rn[64];
    snprintf(rn, sizeof rn, "kimi-k3-tool-%zu", i);
    return peg_rule(a, rn, tool, 0);
}

int chat_spec_kimi_k3(csp_ctx *c)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    out->supports_thinking = 1;
    if (csp_preserve(c, "<|open|>") || csp_preserve(c, "<|close|>") || csp_preserve(c, K3_SEP) ||
        csp_preserve(c, "<|end_of_msg|>") || !(out->thinking_start_tag = csp_strdup(c, "<|open|>think<|sep|>", 20)) ||
        csp_end_tag(c, "<|close|>think<|sep|>"))
        return CHAT_GEN_ERROR;
    int tool_parser = csp_has_tools(in) && in->tool_choice != CHAT_TOOL_CHOICE_NONE;

    size_t end = peg_end(a);
    size_t start = peg_optional(a, peg_literal_c(a, "<|open|>message role=\"assistant\"<|sep|>"));
    peg_str td[2] = {{"<|close|>think<|sep|>", 21}, {"<|open|>response<|sep|>", 23}};
    size_t body = chat_peg_tag(a, in->reasoning_format != CHAT_REASONING_NONE ? "reasoning" : "content",
                               peg_until_one_of(a, td, 2));
    /* optional(optional(literal(THINK_START)) + think_body + optional(literal(THINK_END))) */
    size_t ote = peg_optional(a, peg_literal_c(a, "<|close|>think<|sep|>"));
    size_t ots = peg_optional(a, peg_literal_c(a, "<|open|>think<|sep|>"));
    size_t reasoning = peg_optional(a, peg_seq2(a, peg_seq2(a, ots, body), ote));
    /* optional(literal(RESP_START)) + content(until_one_of({RESP_END, TOOLS_START, MSG_END})) + optional(literal(RESP_END)) */
    size_t ore = peg_optional(a, peg_literal_c(a, "<|close|>response<|sep|>"));
    peg_str rd[3] = {{"<|close|>response<|sep|>", 24}, {"<|open|>tools<|sep|>", 20}, {"<|close|>message<|sep|>", 23}};
    size_t rc = chat_peg_tag(a, "content", peg_until_one_of(a, rd, 3));
    size_t ors = peg_optional(a, peg_literal_c(a, "<|open|>response<|sep|>"));
    size_t response = peg_seq2(a, peg_seq2(a, ors, rc), ore);
    /* optional(literal(MSG_END)) + optional(literal(EOM_TOKEN)) */
    size_t oeom = peg_optional(a, peg_literal_c(a, "<|end_of_msg|>"));
    size_t ome = peg_optional(a, peg_literal_c(a, "<|close|>message<|sep|>"));
    size_t trailer = peg_seq2(a, ome, oeom);
    size_t root;
    if (!tool_parser) {
        root = peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, start, reasoning), response), trailer), end);
    } else {
        size_t choice = peg_choice(a, NULL, 0);
        for (size_t i = 0; i < in->tools->n; i++) {
            const char *name;
            size_t nlen;
            const json_value *fn = csp_function(in->tools->items[i], &name, &nlen);
            if (fn) choice = peg_alt2(a, choice, k3_function(a, fn, name, nlen, i));
        }
        /* literal(TOOLS_START) + one_or_more(tool_choices) + literal(TOOLS_END) + optional(literal(MSG_END)) +
         * optional(literal(EOM_TOKEN)) */
        size_t e5 = peg_optional(a, peg_literal_c(a, "<|end_of_msg|>"));
        size_t e4 = peg_optional(a, peg_literal_c(a, "<|close|>message<|sep|>"));
        size_t e3 = peg_literal_c(a, "<|close|>tools<|sep|>");
        size_t e2 = peg_one_or_more(a, choice);
        size_t e1 = peg_literal_c(a, "<|open|>tools<|sep|>");
        size_t x = peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, e1, e2), e3), e4), e5);
        size_t section = peg_rule(a, "kimi-k3-tool-call", x, 1);
        size_t tools = in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED ? section : peg_optional(a, section);
        size_t y = peg_seq2(a, peg_seq2(a, peg_seq2(a, start, reasoning), response), tools);
        root = peg_seq2(a, peg_seq2(a, y, trailer), end);
    }
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (tool_parser) {
        out->has_grammar = 1;
        out->grammar_lazy = in->tool_choice != CHAT_TOOL_CHOICE_REQUIRED;
        if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_WORD, "<|open|>tools<|sep|>", 20)) return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
