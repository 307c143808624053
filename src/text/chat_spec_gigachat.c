/*
 * chat_spec_gigachat.c -- b11669's common_chat_params_init_gigachat_v3
 * (common/parsers/gigachat-v3.cpp): GigaChat 3's
 *   content<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "NAME", "arguments": {...}}
 * one call at most (parallel calls are not supported there).
 *
 * Measured on b11669 (its arenas through testing/kit_chat.cpp): rules and
 * schemas are named by the tool's index (tool-0, tool-0-schema). This init
 * walks `tools` without foreach_function's filter: a tool without a
 * "function" (or without a string "name") is b11669's exception, here
 * CHAT_GEN_ERROR with nlohmann's text.
 */
#include <stdio.h>
#include <string.h>

#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

#define GC_CALL "<|message_sep|>\n\nfunction call<|role_sep|>\n"

/* rule "tool-<i>": tool_open(literal("{") << name member) << "," << arguments member << "}" */
static size_t gc_function(csp_ctx *c, const json_value *fn, const char *name, size_t nlen, size_t i)
{
    peg_arena *a = &c->out->arena;
    /* json_member("name", "\"" + tool_name(literal(name)) + "\"") */
    size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
    size_t nm = peg_json_member(a, "name", csp_ps(a, csp_sp(a, "\"", tn), "\""));
    /* json_member("arguments", tool_args(schema(json(), "tool-<i>-schema", parameters))) */
    size_t args = peg_json_member(a, "arguments", chat_peg_tag(a, "tool-args", csp_tool_schema(c, fn, i)));
    size_t open = chat_peg_tag(a, "tool-open", csp_shl(a, peg_literal_c(a, "{"), nm));
    size_t x = csp_shl(a, csp_shl_s(a, open, ","), args);
    char rn[64];
    snprintf(rn, sizeof rn, "tool-%zu", i);
    return peg_rule(a, rn, csp_shl_s(a, x, "}"), 0);
}

int chat_spec_gigachat_v3(csp_ctx *c)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    if (!(out->thinking_start_tag = csp_strdup(c, "", 0)) || csp_preserve(c, "<|message_sep|>\n\n") ||
        csp_preserve(c, "<|role_sep|>\n"))
        return CHAT_GEN_ERROR;
    int tool_parser = csp_has_tools(in) && in->tool_choice != CHAT_TOOL_CHOICE_NONE;
    size_t ret = peg_eps(a);
    if (tool_parser) {
        size_t choice = peg_choice(a, NULL, 0);
        for (size_t i = 0; i < in->tools->n && !c->failed; i++) {
            const json_value *fn = json_get(in->tools->items[i], "function"), *nv = json_get(fn, "name");
            if (!fn || !nv || nv->type != JSON_STRING) {
                snprintf(c->err, c->errlen, "%s", !fn ? "[json.exception.out_of_range.403] key 'function' not found"
                                                 : !nv ? "[json.exception.out_of_range.403] key 'name' not found"
                                                       : "[json.exception.type_error.302] type must be string, but is "
                                                         "not a string");
                c->failed = 1;
                break;
            }
            choice = peg_alt2(a, choice, gc_function(c, fn, nv->str, nv->len, i));
        }
        int min = in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED;
        size_t call = peg_rule(a, "tool-call", csp_sp(a, GC_CALL, choice), 0);
        size_t calls = peg_rule(a, "tool-call-root", peg_repeat(a, call, min, 1), 1);
        ret = csp_shl(a, chat_peg_tag(a, "content", peg_until(a, "<|message_sep|>\n\n", 17)), calls);
    } else {
        ret = chat_peg_tag(a, "content", peg_rest(a));
    }
    size_t root = csp_sp(a, "assistant<|role_sep|>\n", ret);
    if (c->failed) return CHAT_GEN_ERROR;
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (tool_parser) {
        out->has_grammar = 1;
        out->grammar_lazy = in->tool_choice == CHAT_TOOL_CHOICE_AUTO;
        if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_WORD, GC_CALL, strlen(GC_CALL))) return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
