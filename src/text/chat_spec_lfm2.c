/*
 * chat_spec_lfm2.c -- b11669's common_chat_params_init_lfm2
 * (common/parsers/lfm2.cpp), with tool_list_tokens (LFM2) or without
 * (LFM2.5): optional <think>reasoning</think>, then content, then
 *   <|tool_call_start|>[name(arg="v", n=1), other(...)]<|tool_call_end|>
 * the calls as common_chat_peg_builder::python_style_tool_calls builds them
 * (allow_json_literals: Python or JSON values, rules python-or-json-*).
 *
 * Measured on b11669 (its arenas through testing/kit_chat.cpp; the
 * python-or-json-* rules are not in v0.5.0's source): rules are named by the
 * tool's index (tool-0); python_or_json_value is python_value with JSON's
 * true / false / null beside Python's, its dict and array named
 * python-or-json-dict / -array.
 */
#include <stdio.h>
#include <string.h>

#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

typedef struct {
    size_t ws, value, members, elements;
} lf_ctx;

/* rule("python-or-json-dict", ...): "{" ws ("}" | members ws "}") ws */
static size_t lf_dict(peg_arena *a, void *u)
{
    lf_ctx *x = u;
    size_t open = peg_literal_c(a, "{");
    size_t close1 = peg_literal_c(a, "}");
    size_t tail[3] = {x->members, x->ws, peg_literal_c(a, "}")};
    size_t alts[2] = {close1, peg_sequence(a, tail, 3)};
    size_t all[4] = {open, x->ws, peg_choice(a, alts, 2), x->ws};
    return peg_sequence(a, all, 4);
}

/* rule("python-or-json-array", ...): "[" ws ("]" | elements ws "]") ws */
static size_t lf_array(peg_arena *a, void *u)
{
    lf_ctx *x = u;
    size_t open = peg_literal_c(a, "[");
    size_t close1 = peg_literal_c(a, "]");
    size_t tail[3] = {x->elements, x->ws, peg_literal_c(a, "]")};
    size_t alts[2] = {close1, peg_sequence(a, tail, 3)};
    size_t all[4] = {open, x->ws, peg_choice(a, alts, 2), x->ws};
    return peg_sequence(a, all, 4);
}

static size_t lf_value(peg_arena *a, void *u)
{
    (void)u;
    lf_ctx x;
    x.ws = peg_space(a);
    x.value = peg_ref(a, "python-or-json-value");
    size_t key = peg_python_string(a);
    size_t mv[5] = {key, x.ws, peg_literal_c(a, ":"), x.ws, x.value};
    size_t member = peg_sequence(a, mv, 5);
    size_t rv[4] = {x.ws, peg_literal_c(a, ","), x.ws, member};
    size_t more = peg_zero_or_more(a, peg_sequence(a, rv, 4));
    size_t m2[2] = {member, more};
    x.members = peg_sequence(a, m2, 2);
    size_t dict = peg_rule_fn(a, "python-or-json-dict", lf_dict, &x, 0);
    size_t ev[3] = {peg_literal_c(a, ","), x.ws, x.value};
    size_t emore = peg_zero_or_more(a, peg_sequence(a, ev, 3));
    size_t e2[2] = {x.value, emore};
    x.elements = peg_sequence(a, e2, 2);
    size_t array = peg_rule_fn(a, "python-or-json-array", lf_array, &x, 0);
    size_t v[8];
    v[0] = dict;
    v[1] = array;
    v[2] = peg_python_string(a);
    v[3] = peg_json_number(a);
    v[4] = peg_python_bool(a);
    v[5] = peg_python_null(a);
    v[6] = peg_json_bool(a);
    v[7] = peg_json_null(a);
    return peg_choice(a, v, 8);
}

/* one argument: tool_arg(tool_arg_open(tool_arg_name(literal(k)) + literal("=")) + value + tool_arg_close(eps())) */
static size_t lf_arg(peg_arena *a, const char *key, size_t klen, const json_value *def)
{
    const json_value *t = def && def->type == JSON_OBJECT ? json_get(def, "type") : NULL;
    int is_string = t && t->type == JSON_STRING && !strcmp(t->str, "string");
    size_t name = peg_literal(a, key, klen);
    size_t value = peg_eps(a);
    /* tool_arg_value(choice({ literal("\"") + string_content('"') + literal("\""),
     *                         literal("'") + string_content('\'') + literal("'") })) */
    size_t q2 = peg_literal_c(a, "\"");
    size_t s1 = peg_string_content(a, '"');
    size_t q1 = peg_literal_c(a, "\"");
    size_t alt1 = peg_seq2(a, peg_seq2(a, q1, s1), q2);
    size_t p2 = peg_literal_c(a, "'");
    size_t s2 = peg_string_content(a, '\'');
    size_t p1 = peg_literal_c(a, "'");
    size_t alts[2] = {alt1, peg_seq2(a, peg_seq2(a, p1, s2), p2)};
    size_t string_value = chat_peg_tag(a, "tool-arg-value", peg_choice(a, alts, 2));
    value = is_string ? string_value
                      : chat_peg_tag(a, "tool-arg-value", peg_rule_fn(a, "python-or-json-value", lf_value, NULL, 0));
    size_t close = chat_peg_tag(a, "tool-arg-close", peg_eps(a));
    size_t eq = peg_literal_c(a, "=");
    size_t open = chat_peg_tag(a, "tool-arg-open", peg_seq2(a, chat_peg_tag(a, "tool-arg-name", name), eq));
    return chat_peg_tag(a, "tool-arg", peg_seq2(a, peg_seq2(a, open, value), close));
}

/* python_style_tool_calls(tools, parallel, allow_json_literals = true); *failed set on a tool without a name */
static size_t lf_calls(csp_ctx *c)
{
    peg_arena *a = &c->out->arena;
    const chat_gen_inputs *in = c->in;
    size_t choices = peg_choice(a, NULL, 0);
    for (size_t i = 0; i < in->tools->n; i++) {
        const json_value *fn = json_get(in->tools->items[i], "function"), *nv = json_get(fn, "name");
        if (!fn) continue;
        if (!nv || nv->type != JSON_STRING) {
            snprintf(c->err, c->errlen, "%s", !nv ? "[json.exception.out_of_range.403] key 'name' not found"
                                                  : "[json.exception.type_error.302] type must be string");
            c->failed = 1;
            return peg_eps(a);
        }
        const json_value *params = csp_parameters(fn), *props = json_get(params, "properties");
        size_t args = peg_eps(a);
        if (props && props->type == JSON_OBJECT && props->n) {
            size_t ac = peg_choice(a, NULL, 0);
            for (size_t j = 0; j < props->n; j++)
                ac = peg_alt2(a, ac, lf_arg(a, props->keys[j], props->key_lens[j], props->items[j]));
            /* arg_choice + zero_or_more("," + space() + arg_choice) */
            size_t more = peg_zero_or_more(a, peg_seq2(a, csp_sp(a, ",", peg_space(a)), ac));
            args = peg_seq2(a, ac, more);
        }
        /* tool(tool_open(tool_name(literal(name)) + literal("(")) + space() + tool_args(args) + space() +
         *      tool_close(literal(")"))) */
        size_t close = chat_peg_tag(a, "tool-close", peg_literal_c(a, ")"));
        size_t sp2 = peg_space(a);
        size_t targs = chat_peg_tag(a, "tool-args", args);
        size_t sp1 = peg_space(a);
        size_t lp = peg_literal_c(a, "(");
        size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, nv->str, nv->len));
        size_t open = chat_peg_tag(a, "tool-open", peg_seq2(a, tn, lp));
        size_t x = peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, open, sp1), targs), sp2), close);
        char rn[64];
        snprintf(rn, sizeof rn, "tool-%zu", i);
        choices = peg_alt2(a, choices, peg_rule(a, rn, chat_peg_tag(a, "tool", x), 0));
    }
    size_t sp2 = peg_space(a);
    size_t x;
    if (in->parallel_tool_calls) {
        /* "[" + space() + tool_choices + zero_or_more("," + space() + tool_choices) + space() + "]" */
        size_t z = peg_zero_or_more(a, peg_seq2(a, csp_sp(a, ",", peg_space(a)), choices));
        x = peg_seq2(a, peg_seq2(a, csp_sp(a, "[", peg_space(a)), choices), z);
    } else {
        x = peg_seq2(a, csp_sp(a, "[", peg_space(a)), choices);
    }
    return csp_ps(a, peg_seq2(a, x, sp2), "]");
}

int chat_spec_lfm2(csp_ctx *c, int tool_list_tokens)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    out->supports_thinking = 1;
    if (csp_preserve(c, "<|tool_call_start|>") || csp_preserve(c, "<|tool_call_end|>") || csp_preserve(c, "<think>") ||
        csp_preserve(c, "</think>") ||
        (tool_list_tokens && (csp_preserve(c, "<|tool_list_start|>") || csp_preserve(c, "<|tool_list_end|>"))) ||
        !(out->thinking_start_tag = csp_strdup(c, "<think>", 7)) || csp_end_tag(c, "</think>"))
        return CHAT_GEN_ERROR;
    int has_tools = csp_has_tools(in);
    int has_schema = in->json_schema && in->json_schema->type == JSON_OBJECT;   /* an empty object too */
    int tool_parser = has_tools && in->tool_choice != CHAT_TOOL_CHOICE_NONE;
    int extract = in->reasoning_format != CHAT_REASONING_NONE && memmem(c->tmpl, c->tmpl_len, "<think>", 7);

    size_t gp = peg_literal_c(a, "<|im_start|>assistant\n");
    size_t end = peg_end(a);
    size_t reasoning = peg_eps(a);
    if (extract) {
        size_t rs = chat_peg_tag(a, "reasoning", peg_until(a, "</think>", 8));
        reasoning = peg_optional(a, csp_ps(a, csp_sp(a, "<think>", rs), "</think>"));
    }
    size_t root;
    if (!tool_parser) {
        size_t body = has_schema ? csp_schema_json(c, "response-format-schema", in->json_schema, in->json_schema)
                                 : peg_rest(a);
        size_t ct = chat_peg_tag(a, "content", body);
        root = peg_seq2(a, peg_seq2(a, peg_seq2(a, gp, reasoning), ct), end);
    } else {
        /* rule("tool-calls", trigger_rule("tool-call", literal(START) + python_style_tool_calls(...) + literal(END))) */
        size_t le = peg_literal_c(a, "<|tool_call_end|>");
        size_t calls = lf_calls(c);
        size_t ls = peg_literal_c(a, "<|tool_call_start|>");
        size_t call = peg_rule(a, "tool-call", peg_seq2(a, peg_seq2(a, ls, calls), le), 1);
        size_t tc = peg_rule(a, "tool-calls", call, 0);
        size_t ct = chat_peg_tag(a, "content", peg_until(a, "<|tool_call_start|>", 19));
        root = peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, gp, reasoning), ct), tc), end);
    }
    if (c->failed) return CHAT_GEN_ERROR;
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (has_schema || tool_parser) {
        out->has_grammar = 1;
        out->grammar_lazy = !(has_schema || (has_tools && in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED));
        if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_WORD, "<|tool_call_start|>", 19)) return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
