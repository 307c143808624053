/*
 * chat_spec_ling3.c -- b11669's common_chat_params_init_ling3
 * (common/parsers/ling3.cpp): Ling 3.0 / Bailing V3's
 *   [<think>]reasoning</think>content<tool_call>NAME
 *   <arg_key>K</arg_key>\n<arg_value>V</arg_value>...</tool_call><|role_end|>
 * Whether the reasoning block is open (so a tool call may end it) is read
 * from the generation prompt, as b11669 reads it.
 *
 * b11669 differs from v0.5.0's source here: a response_format schema (a
 * non-empty object) has its parser, the think block in full then the JSON
 * as content, taken before the tools, with a grammar that is not lazy.
 *
 * Measured on b11669 (its arenas through testing/kit_chat.cpp): rules and
 * schemas are named by the tool's index and the argument's (ling3-tool-0,
 * ling3-arg-1-2, ling3-arg-1-2-schema, ling3-1-args-3).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_gen_int.h"
#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

#define L3_TYPE(m, t) (((m) >> (t)) & 1u)

/* the last <think> in s after its last </think> */
static int l3_think_open(const char *s, size_t n)
{
    size_t open = (size_t)-1, close = (size_t)-1;
    for (size_t i = 0; i + 7 <= n; i++) if (!memcmp(s + i, "<think>", 7)) open = i;
    for (size_t i = 0; i + 8 <= n; i++) if (!memcmp(s + i, "</think>", 8)) close = i;
    return open != (size_t)-1 && (close == (size_t)-1 || open > close);
}

/* rule "ling3-arg-<i>-<j>" */
static size_t l3_arg(csp_ctx *c, const json_value *params, size_t i, size_t j, size_t arg_close, size_t arg_string)
{
    peg_arena *a = &c->out->arena;
    const json_value *props = json_get(params, "properties");
    char rn[96], sn[112];
    snprintf(rn, sizeof rn, "ling3-arg-%zu-%zu", i, j);
    snprintf(sn, sizeof sn, "%s-schema", rn);
    size_t value = peg_eps(a);
    unsigned types = chat_gen_schema_value_types(params, props->items[j]);
    if (!L3_TYPE(types, CHAT_SCHEMA_STRING)) {
        value = peg_seq2(a, chat_peg_tag(a, "tool-arg-value", csp_schema_json(c, sn, params, props->items[j])), arg_close);
    } else if (types == 1u << CHAT_SCHEMA_STRING) {
        value = arg_string;
    } else {
        size_t jv = chat_peg_tag(a, "tool-arg-value", csp_schema_json(c, sn, params, props->items[j]));
        size_t at = peg_atomic(a, peg_seq2(a, jv, arg_close));
        value = peg_gbnf(a, peg_alt2(a, at, arg_string), "ling3-arg-string");
    }
    /* optional(space()) + tool_arg(tool_arg_open(literal(ARG_KEY) + tool_arg_name(literal(name)) +
     *   literal(ARG_KEY_END)) + optional(space()) + literal(ARG_VAL) + arg_value) */
    size_t lav = peg_literal_c(a, "<arg_value>");
    size_t os = peg_optional(a, peg_space(a));
    size_t l2 = peg_literal_c(a, "</arg_key>");
    size_t nm = chat_peg_tag(a, "tool-arg-name", peg_literal(a, props->keys[j], props->key_lens[j]));
    size_t l1 = peg_literal_c(a, "<arg_key>");
    size_t open = chat_peg_tag(a, "tool-arg-open", peg_seq2(a, peg_seq2(a, l1, nm), l2));
    size_t arg = chat_peg_tag(a, "tool-arg", peg_seq2(a, peg_seq2(a, peg_seq2(a, open, os), lav), value));
    size_t lead = peg_optional(a, peg_space(a));
    return peg_rule(a, rn, peg_seq2(a, lead, arg), 0);
}

typedef struct {
    size_t i, arg_close, arg_string;
} l3_tool;

static size_t l3_arg_of(csp_ctx *c, const json_value *params, size_t j, void *ud)
{
    const l3_tool *t = ud;
    return l3_arg(c, params, t->i, j, t->arg_close, t->arg_string);
}

/* rule "ling3-tool-<i>" */
static size_t l3_function(csp_ctx *c, const json_value *fn, const char *name, size_t nlen, size_t i, size_t arg_close,
                          size_t arg_string)
{
    peg_arena *a = &c->out->arena;
    const json_value *params = csp_parameters(fn);
    char rn[64];
    snprintf(rn, sizeof rn, "ling3-%zu-args", i);
    l3_tool t = {i, arg_close, arg_string};
    size_t args = csp_tagged_args(c, params, rn, l3_arg_of, &t);
    /* tool(tool_open(literal(CALL_START) + tool_name(literal(name)) + optional(space())) + tool_args(args) +
     *      tool_close(optional(space()) + literal(CALL_END))) */
    size_t lce = peg_literal_c(a, "</tool_call>");
    size_t os1 = peg_optional(a, peg_space(a));
    size_t close = chat_peg_tag(a, "tool-close", peg_seq2(a, os1, lce));
    size_t targs = chat_peg_tag(a, "tool-args", args);
    size_t os2 = peg_optional(a, peg_space(a));
    size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
    size_t lcs = peg_literal_c(a, "<tool_call>");
    size_t open = chat_peg_tag(a, "tool-open", peg_seq2(a, peg_seq2(a, lcs, tn), os2));
    size_t tool = chat_peg_tag(a, "tool", peg_seq2(a, peg_seq2(a, open, targs), close));
    snprintf(rn, sizeof rn, "ling3-tool-%zu", i);
    return peg_rule(a, rn, tool, 0);
}

static size_t l3_build(csp_ctx *c, int think_open, int has_schema, int tool_parser)
{
    const chat_gen_inputs *in = c->in;
    peg_arena *a = &c->out->arena;
    size_t end = peg_end(a);
    /* optional(literal(ROLE) + optional(space())) */
    size_t osp = peg_optional(a, peg_space(a));
    size_t opener = peg_optional(a, peg_seq2(a, peg_literal_c(a, "<role>ASSISTANT</role>"), osp));
    peg_str bd[2] = {{"</think>", 8}, {"<tool_call>", 11}};
    size_t body_end = peg_until_one_of(a, bd, think_open ? 2 : 1);
    size_t body = chat_peg_tag(a, in->reasoning_format != CHAT_REASONING_NONE ? "reasoning" : "content", body_end);
    size_t ote = peg_optional(a, peg_literal_c(a, "</think>"));
    size_t ots = peg_optional(a, peg_literal_c(a, "<think>"));
    size_t reasoning = peg_optional(a, peg_seq2(a, peg_seq2(a, ots, body), ote));
    peg_str cd[1] = {{"<tool_call>", 11}};
    size_t content = peg_optional(a, chat_peg_tag(a, "content", peg_until_one_of(a, cd, 1)));
    /* optional(content(until(ROLE_END))) + optional(literal(ROLE_END)) */
    size_t ore = peg_optional(a, peg_literal_c(a, "<|role_end|>"));
    size_t oc = peg_optional(a, chat_peg_tag(a, "content", peg_until(a, "<|role_end|>", 12)));
    size_t tail = peg_seq2(a, oc, ore);
    if (has_schema) {
        /* opener + ((literal(THINK_START) + think_body + literal(THINK_END)) <<
         *           content(schema(json(), "response-format", json_schema))) + end */
        size_t l2 = peg_literal_c(a, "</think>");
        size_t l1 = peg_literal_c(a, "<think>");
        size_t think = peg_seq2(a, peg_seq2(a, l1, body), l2);
        size_t rf = chat_peg_tag(a, "content", csp_schema_json(c, "response-format", in->json_schema, in->json_schema));
        return peg_seq2(a, peg_seq2(a, opener, csp_shl(a, think, rf)), end);
    }
    if (!tool_parser) return peg_seq2(a, peg_seq2(a, peg_seq2(a, opener, reasoning), tail), end);
    size_t choice = peg_choice(a, NULL, 0);
    size_t arg_close = chat_peg_tag(a, "tool-arg-close", peg_literal_c(a, "</arg_value>"));
    size_t sv = chat_peg_tag(a, "tool-arg-string-value", peg_until(a, "</arg_value>", 12));
    size_t arg_string = peg_rule(a, "ling3-arg-string", peg_seq2(a, sv, arg_close), 0);
    for (size_t i = 0; i < in->tools->n && !c->failed; i++) {
        const char *name;
        size_t nlen;
        const json_value *fn = csp_function(in->tools->items[i], &name, &nlen);
        if (fn) choice = peg_alt2(a, choice, l3_function(c, fn, name, nlen, i, arg_close, arg_string));
    }
    size_t calls = choice;
    if (in->parallel_tool_calls) {
        size_t sp = peg_space(a);
        calls = peg_seq2(a, choice, peg_zero_or_more(a, peg_seq2(a, sp, choice)));
    }
    /* calls + space() + optional(content(until(ROLE_END))) + optional(literal(ROLE_END)) */
    size_t ol = peg_optional(a, peg_literal_c(a, "<|role_end|>"));
    size_t oc2 = peg_optional(a, chat_peg_tag(a, "content", peg_until(a, "<|role_end|>", 12)));
    size_t sp = peg_space(a);
    size_t section = peg_rule(a, "ling3-tool-call", peg_seq2(a, peg_seq2(a, peg_seq2(a, calls, sp), oc2), ol), 1);
    size_t tools = in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED ? section : peg_optional(a, section);
    size_t x = peg_seq2(a, peg_seq2(a, peg_seq2(a, opener, reasoning), content), tools);
    return peg_seq2(a, peg_seq2(a, x, tail), end);
}

int chat_spec_ling3(csp_ctx *c)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    static const char *const preserved[9] = {"<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>",
                                             "</arg_key>", "<arg_value>", "</arg_value>", "<|role_end|>"};
    out->supports_thinking = 1;
    for (size_t i = 0; i < 9; i++) if (csp_preserve(c, preserved[i])) return CHAT_GEN_ERROR;
    if (!(out->thinking_start_tag = csp_strdup(c, "<think>", 7)) || csp_end_tag(c, "</think>") ||
        csp_end_tag(c, "<tool_call>"))
        return CHAT_GEN_ERROR;
    char **st = malloc(sizeof *st);
    if (!st || !(st[0] = csp_strdup(c, "<|role_end|>", 12))) { free(st); snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    out->additional_stops = st;
    out->nstops = 1;
    int tool_parser = csp_has_tools(in) && in->tool_choice != CHAT_TOOL_CHOICE_NONE;
    int has_schema = csp_has_schema(in);
    size_t root = l3_build(c, l3_think_open(out->generation_prompt, out->generation_prompt_len), has_schema, tool_parser);
    if (c->failed) return CHAT_GEN_ERROR;
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (has_schema || tool_parser) {
        out->has_grammar = 1;
        out->grammar_lazy = !has_schema && in->tool_choice != CHAT_TOOL_CHOICE_REQUIRED;
        if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_WORD, "<tool_call>", 11)) return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
