/*
 * chat_spec_deepseek.c -- b11669's common_chat_params_init_deepseek_v3_2
 * (common/parsers/deepseek.cpp): DeepSeek V3.2 / V4's DSML tool calls
 *   <｜DSML｜function_calls>
 *   <｜DSML｜invoke name="NAME">
 *   <｜DSML｜parameter name="ARG" string="true">VALUE</｜DSML｜parameter>
 *   </｜DSML｜invoke>
 *   </｜DSML｜function_calls>
 * (V4, whose template never says "function_calls": "tool_calls"), with a
 * reasoning block that may run straight into the tool calls.
 *
 * Measured on b11669 (its arenas through testing/kit_chat.cpp): rules and
 * schemas are named by the tool's index and the argument's
 * (tool-1-arg-0, tool-1-arg-0-schema). The prompt side (V4's tool results
 * in call order, response_format in the template's context) is the caller's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_gen_int.h"
#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

#define DS_BAR "\xef\xbd\x9c"                /* U+FF5C, b11669's "｜" */
#define DS_DSML DS_BAR "DSML" DS_BAR
#define DS_PARAM_END "</" DS_DSML "parameter>"

typedef struct {
    char fc_start[64], fc_end[64];
} ds_marks;

/* rule "tool-<i>-arg-<j>" */
static size_t ds_arg(csp_ctx *c, const json_value *params, size_t i, size_t j)
{
    peg_arena *a = &c->out->arena;
    const json_value *props = json_get(params, "properties");
    int is_string = chat_gen_schema_may_be_string(params, props->items[j]);
    char rn[96];
    snprintf(rn, sizeof rn, "tool-%zu-arg-%zu", i, j);
    /* tool_arg(tool_arg_open(literal(PARAM_START + " name=\"") + tool_arg_name(literal(name)) +
     *                        literal("\" string=\"true|false\">")) + value + tool_arg_close(literal(PARAM_END))) */
    size_t close = chat_peg_tag(a, "tool-arg-close", peg_literal_c(a, DS_PARAM_END));
    size_t value;
    if (is_string) {
        value = chat_peg_tag(a, "tool-arg-string-value", peg_until(a, DS_PARAM_END, strlen(DS_PARAM_END)));
    } else {
        char sn[112];
        snprintf(sn, sizeof sn, "%s-schema", rn);
        value = chat_peg_tag(a, "tool-arg-value", csp_schema_json(c, sn, params, props->items[j]));
    }
    size_t l2 = peg_literal_c(a, is_string ? "\" string=\"true\">" : "\" string=\"false\">");
    size_t an = chat_peg_tag(a, "tool-arg-name", peg_literal(a, props->keys[j], props->key_lens[j]));
    size_t l1 = peg_literal_c(a, "<" DS_DSML "parameter name=\"");
    size_t open = chat_peg_tag(a, "tool-arg-open", peg_seq2(a, peg_seq2(a, l1, an), l2));
    size_t arg = chat_peg_tag(a, "tool-arg", peg_seq2(a, peg_seq2(a, open, value), close));
    return peg_rule(a, rn, arg, 0);
}

/* rule "tool-<i>" */
static size_t ds_function(csp_ctx *c, const json_value *fn, const char *name, size_t nlen, size_t i)
{
    peg_arena *a = &c->out->arena;
    const json_value *params = csp_parameters(fn);
    size_t *req = NULL, *opt = NULL, nreq = 0, nopt = 0;
    csp_check_params(c, params);                  /* common_chat_schema_from_json: b11669 throws */
    const json_value *props = params && !c->failed && chat_gen_schema_is_object(params) ? json_get(params, "properties") : NULL;
    if (props && props->type == JSON_OBJECT && props->n) {
        req = malloc(props->n * sizeof *req);
        opt = malloc(props->n * sizeof *opt);
        if (!req || !opt) { free(req); free(opt); a->oom = 1; return peg_eps(a); }
        for (size_t j = 0; j < props->n && !c->failed; j++) {
            size_t r = ds_arg(c, params, i, j);
            if (csp_required(params, props->keys[j], props->key_lens[j])) req[nreq++] = r;
            else opt[nopt++] = r;
        }
    }
    size_t args = peg_eps(a);
    for (size_t k = 0; k < nreq; k++) {
        if (k) args = peg_seq2(a, args, peg_space(a));
        args = peg_seq2(a, args, req[k]);
    }
    if (nopt) {
        size_t any = peg_choice(a, NULL, 0);
        for (size_t k = 0; k < nopt; k++) any = peg_alt2(a, any, opt[k]);
        size_t sp = peg_space(a);
        args = peg_seq2(a, args, peg_repeat(a, peg_seq2(a, sp, any), 0, -1));
    }
    free(req);
    free(opt);
    /* tool(tool_open(literal(INVOKE_START + " name=\"") + tool_name(literal(name)) + literal("\">\n")) +
     *      invoke_body + space() + tool_close(literal(INVOKE_END))) */
    size_t close = chat_peg_tag(a, "tool-close", peg_literal_c(a, "</" DS_DSML "invoke>"));
    size_t sp = peg_space(a);
    size_t l2 = peg_literal_c(a, "\">\n");
    size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
    size_t l1 = peg_literal_c(a, "<" DS_DSML "invoke name=\"");
    size_t open = chat_peg_tag(a, "tool-open", peg_seq2(a, peg_seq2(a, l1, tn), l2));
    size_t tool = chat_peg_tag(a, "tool", peg_seq2(a, peg_seq2(a, peg_seq2(a, open, args), sp), close));
    char rn[64];
    snprintf(rn, sizeof rn, "tool-%zu", i);
    return peg_rule(a, rn, tool, 0);
}

/* trigger_rule("tool-call", literal(FC_START) + space() + tool_choice [+ zero_or_more(space() + tool_choice)]
 *                           + space() + literal(FC_END)) */
static size_t ds_tool_calls(csp_ctx *c, const ds_marks *m, size_t choice)
{
    peg_arena *a = &c->out->arena;
    size_t le = peg_literal_c(a, m->fc_end);
    size_t s2 = peg_space(a);
    size_t z = PEG_INVALID;
    if (c->in->parallel_tool_calls) {
        size_t sp = peg_space(a);
        z = peg_zero_or_more(a, peg_seq2(a, sp, choice));
    }
    size_t s1 = peg_space(a);
    size_t ls = peg_literal_c(a, m->fc_start);
    size_t x = peg_seq2(a, peg_seq2(a, ls, s1), choice);
    if (z != PEG_INVALID) x = peg_seq2(a, x, z);
    return peg_rule(a, "tool-call", peg_seq2(a, peg_seq2(a, x, s2), le), 1);
}

/* the parser; *include_grammar as b11669 sets it */
static size_t ds_build(csp_ctx *c, const ds_marks *m, int is_v4, int has_schema, int tool_parser)
{
    const chat_gen_inputs *in = c->in;
    peg_arena *a = &c->out->arena;
    int require = in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED;
    int extract = in->reasoning_format != CHAT_REASONING_NONE;
    size_t gp = peg_literal_c(a, "<" DS_BAR "Assistant" DS_BAR ">");
    size_t end = peg_end(a);
    size_t choice = peg_choice(a, NULL, 0);
    for (size_t i = 0; tool_parser && i < in->tools->n && !c->failed; i++) {
        const char *name;
        size_t nlen;
        const json_value *fn = csp_function(in->tools->items[i], &name, &nlen);
        if (fn) choice = peg_alt2(a, choice, ds_function(c, fn, name, nlen, i));
    }
    size_t tool_calls = peg_eps(a);
    tool_calls = ds_tool_calls(c, m, choice);
    size_t reasoning = peg_eps(a);
    size_t reasoning_tc = peg_eps(a);
    size_t obligatory = tool_calls;
    int with_tc = 0;
    if (!require) tool_calls = peg_optional(a, tool_calls);
    if (extract && !in->thinking_disabled) {
        /* optional(THINK_START + reasoning(until(THINK_END)) + THINK_END) */
        size_t rs = chat_peg_tag(a, "reasoning", peg_until(a, "</think>", 8));
        reasoning = peg_optional(a, csp_ps(a, csp_sp(a, "<think>", rs), "</think>"));
        /* THINK_START + reasoning(until_one_of({"\n\n" + FC_START, FC_START, THINK_END})) + space() + obligatory */
        size_t sp = peg_space(a);
        char sep[80];
        snprintf(sep, sizeof sep, "\n\n%s", m->fc_start);
        peg_str d[3] = {{sep, strlen(sep)}, {(char *)m->fc_start, strlen(m->fc_start)}, {"</think>", 8}};
        size_t r2 = chat_peg_tag(a, "reasoning", peg_until_one_of(a, d, 3));
        reasoning_tc = peg_seq2(a, peg_seq2(a, csp_sp(a, "<think>", r2), sp), obligatory);
        with_tc = 1;
    } else if (extract) {
        if (is_v4) {
            reasoning = peg_optional(a, peg_literal_c(a, "</think>"));
        } else {
            /* optional(literal(THINK_START) + until(THINK_END) + literal(THINK_END)) */
            size_t l2 = peg_literal_c(a, "</think>");
            size_t u = peg_until(a, "</think>", 8);
            size_t l1 = peg_literal_c(a, "<think>");
            reasoning = peg_optional(a, peg_seq2(a, peg_seq2(a, l1, u), l2));
        }
    }
    if (has_schema) {
        /* rule("response-format", literal("```json") + space() + content(schema(json(),
         *      "response-format-schema", json_schema)) + space() + literal("```")) */
        size_t l2 = peg_literal_c(a, "```");
        size_t s2 = peg_space(a);
        size_t ct = chat_peg_tag(a, "content",
                                 csp_schema_json(c, "response-format-schema", in->json_schema, in->json_schema));
        size_t s1 = peg_space(a);
        size_t l1 = peg_literal_c(a, "```json");
        size_t x = peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, l1, s1), ct), s2), l2);
        size_t rf = peg_rule(a, "response-format", x, 0);
        return peg_seq2(a, peg_seq2(a, peg_seq2(a, gp, reasoning), rf), end);
    }
    if (!tool_parser) {
        size_t ct = chat_peg_tag(a, "content", peg_rest(a));
        return peg_seq2(a, peg_seq2(a, peg_seq2(a, gp, reasoning), ct), end);
    }
    /* negate(literal(THINK_START)) + content(until_one_of({"\n\n" + FC_START, FC_START})) + space() */
    size_t sp = peg_space(a);
    char sep[80];
    snprintf(sep, sizeof sep, "\n\n%s", m->fc_start);
    peg_str d[2] = {{sep, strlen(sep)}, {(char *)m->fc_start, strlen(m->fc_start)}};
    size_t ct = chat_peg_tag(a, "content", peg_until_one_of(a, d, 2));
    size_t neg = peg_negate(a, peg_literal_c(a, "<think>"));
    size_t before = peg_seq2(a, peg_seq2(a, neg, ct), sp);
    if (with_tc) {
        /* generation_prompt + (reasoning_with_tc | (reasoning + content_before_tools + tool_calls)) + end */
        size_t y = peg_seq2(a, peg_seq2(a, reasoning, before), tool_calls);
        size_t x = peg_alt2(a, reasoning_tc, y);
        return peg_seq2(a, peg_seq2(a, gp, x), end);
    }
    return peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, gp, reasoning), before), tool_calls), end);
}

int chat_spec_deepseek_v3_2(csp_ctx *c)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    int is_v4 = memmem(c->tmpl, c->tmpl_len, "function_calls", 14) == NULL;
    ds_marks m;
    snprintf(m.fc_start, sizeof m.fc_start, "<" DS_DSML "%s>", is_v4 ? "tool_calls" : "function_calls");
    snprintf(m.fc_end, sizeof m.fc_end, "</" DS_DSML "%s>", is_v4 ? "tool_calls" : "function_calls");
    int has_tools = csp_has_tools(in);
    int has_schema = in->json_schema && in->json_schema->type == JSON_OBJECT;   /* an empty object too */
    int tool_parser = has_tools && in->tool_choice != CHAT_TOOL_CHOICE_NONE;
    out->supports_thinking = 1;
    if (!(out->thinking_start_tag = csp_strdup(c, "<think>", 7)) || csp_end_tag(c, "</think>") ||
        csp_end_tag(c, m.fc_start) || csp_preserve(c, DS_DSML) || csp_preserve(c, "<think>") ||
        csp_preserve(c, "</think>"))
        return CHAT_GEN_ERROR;
    size_t root = ds_build(c, &m, is_v4, has_schema, tool_parser);
    if (c->failed) return CHAT_GEN_ERROR;
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (has_schema || tool_parser) {
        out->has_grammar = 1;
        out->grammar_lazy = has_tools && in->tool_choice != CHAT_TOOL_CHOICE_REQUIRED;
        if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_WORD, m.fc_start, strlen(m.fc_start))) return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
