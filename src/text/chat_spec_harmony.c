/*
 * chat_spec_harmony.c -- b11669's common_chat_params_init_llm_jp_harmony,
 * which no shared template takes and which v0.5.0's source lacks: written
 * from the arenas the kit gives for a template that passes its substring
 * test (testing/oracle_chat_spec.py's synthetic llm_jp_harmony.jinja).
 * GPT-OSS's harmony format with blanks allowed after <|start|> and
 * <|channel|> and one after <|message|>, and no "unsolicited" message; the
 * triggers are GPT-OSS's with \s* where the blanks may be.
 */
#include <stdio.h>
#include <string.h>

#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

typedef struct {
    size_t ws, chan_open, msg, channel, constraint;
} hj_parts;

/* chan_open + literal(name) + msg */
static size_t hj_header(peg_arena *a, const hj_parts *h, const char *name)
{
    size_t l = peg_literal_c(a, name);
    return peg_seq2(a, peg_seq2(a, h->chan_open, l), h->msg);
}

/* rule "tool-<i>": tool(tool_open(func_name + channel + constraint + msg) + args)
 *                | tool(tool_open(channel + func_name + constraint + msg) + args) */
static size_t hj_function(csp_ctx *c, const hj_parts *h, const json_value *fn, const char *name, size_t nlen, size_t i)
{
    peg_arena *a = &c->out->arena;
    size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
    size_t func_name = csp_sp(a, " to=functions.", tn);
    size_t args = chat_peg_tag(a, "tool-args", csp_tool_schema(c, fn, i));
    size_t o1 = peg_seq2(a, peg_seq2(a, peg_seq2(a, func_name, h->channel), h->constraint), h->msg);
    size_t in_role = chat_peg_tag(a, "tool", peg_seq2(a, chat_peg_tag(a, "tool-open", o1), args));
    size_t o2 = peg_seq2(a, peg_seq2(a, peg_seq2(a, h->channel, func_name), h->constraint), h->msg);
    size_t in_channel = chat_peg_tag(a, "tool", peg_seq2(a, chat_peg_tag(a, "tool-open", o2), args));
    char rn[64];
    snprintf(rn, sizeof rn, "tool-%zu", i);
    return peg_rule(a, rn, peg_alt2(a, in_role, in_channel), 0);
}

static const char *const hj_triggers[4] = {
    "^\\s+to$",
    "^<\\|channel\\|>\\s*(?:commentary|analysis)\\s+to=functions$",
    "<\\|start\\|>\\s*assistant(\\s+to)",
    "<\\|start\\|>\\s*assistant(<\\|channel\\|>\\s*(?:commentary|analysis)\\s+to)",
};

static size_t hj_build(csp_ctx *c, int has_schema, int tool_parser)
{
    const chat_gen_inputs *in = c->in;
    peg_arena *a = &c->out->arena;
    hj_parts h;
    h.ws = peg_chars(a, "[ ]", 0, -1);
    h.chan_open = peg_seq2(a, peg_literal_c(a, "<|channel|>"), h.ws);
    size_t osp = peg_optional(a, peg_literal_c(a, " "));
    h.msg = peg_seq2(a, peg_literal_c(a, "<|message|>"), osp);
    /* rule("start", literal("<|start|>") + ws + literal("assistant")) */
    size_t la = peg_literal_c(a, "assistant");
    size_t start = peg_rule(a, "start", peg_seq2(a, peg_seq2(a, peg_literal_c(a, "<|start|>"), h.ws), la), 0);
    size_t end = peg_rule(a, "end", peg_literal_c(a, "<|end|>"), 0);
    size_t content = peg_rule(a, "message-content", peg_until(a, "<|end|>", 7), 0);
    size_t an = peg_literal_c(a, "analysis");
    size_t ch = peg_alt2(a, peg_literal_c(a, "commentary"), an);
    h.channel = peg_seq2(a, h.chan_open, ch);
    size_t constrain_type = peg_chars(a, "[A-Za-z0-9_-]", 1, -1);
    /* optional(space() + optional(literal("<|constrain|>") + ws) + constrain_type) */
    size_t oc = peg_optional(a, peg_seq2(a, peg_literal_c(a, "<|constrain|>"), h.ws));
    size_t sp = peg_space(a);
    h.constraint = peg_optional(a, peg_seq2(a, peg_seq2(a, sp, oc), constrain_type));
    size_t ah = hj_header(a, &h, "analysis");
    if (in->reasoning_format != CHAT_REASONING_NONE) {
        size_t rs = chat_peg_tag(a, "reasoning", content);
        peg_rule(a, "analysis", peg_seq2(a, peg_seq2(a, ah, rs), end), 0);
    } else {
        peg_rule(a, "analysis", chat_peg_tag(a, "content", peg_seq2(a, peg_seq2(a, ah, content), end)), 0);
    }
    size_t analysis = peg_ref(a, "analysis");
    size_t pc = chat_peg_tag(a, "content", content);
    size_t preamble = peg_rule(a, "preamble", peg_seq2(a, peg_seq2(a, hj_header(a, &h, "commentary"), pc), end), 0);
    size_t fc = chat_peg_tag(a, "content", content);
    size_t final_msg = peg_rule(a, "final", peg_seq2(a, hj_header(a, &h, "final"), fc), 0);
    size_t any = peg_rule(a, "any", peg_alt2(a, preamble, analysis), 0);
    if (has_schema) {
        /* rule("response-format", chan_open + literal("final") + constraint + msg + content(schema(...))) */
        size_t sc = chat_peg_tag(a, "content",
                                 csp_schema_json(c, "response-format-schema", in->json_schema, in->json_schema));
        size_t lf = peg_literal_c(a, "final");
        size_t x = peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, h.chan_open, lf), h.constraint), h.msg), sc);
        size_t rf = peg_rule(a, "response-format", x, 0);
        size_t z = peg_zero_or_more(a, peg_seq2(a, start, analysis));
        return peg_seq2(a, peg_seq2(a, z, start), rf);
    }
    size_t last;
    if (tool_parser) {
        size_t choice = peg_choice(a, NULL, 0);
        for (size_t i = 0; i < in->tools->n && !c->failed; i++) {
            const char *name;
            size_t nlen;
            const json_value *fn = csp_function(in->tools->items[i], &name, &nlen);
            if (fn) choice = peg_alt2(a, choice, hj_function(c, &h, fn, name, nlen, i));
        }
        size_t body = choice;
        if (in->parallel_tool_calls) {
            /* tool_choice + zero_or_more(end + start + tool_choice) */
            size_t more = peg_seq2(a, peg_seq2(a, end, start), choice);
            body = peg_seq2(a, choice, peg_zero_or_more(a, more));
        }
        size_t call = peg_rule(a, "tool-call", body, 1);
        last = in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED ? call : peg_alt2(a, call, final_msg);
    } else {
        last = final_msg;
    }
    size_t z = peg_zero_or_more(a, peg_seq2(a, start, any));
    return peg_seq2(a, peg_seq2(a, z, start), last);
}

int chat_spec_llm_jp_harmony(csp_ctx *c)
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
    size_t root = hj_build(c, has_schema, tool_parser);
    if (c->failed) return CHAT_GEN_ERROR;
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (has_schema || tool_parser) {
        out->has_grammar = 1;
        out->grammar_lazy = !(has_schema || (has_tools && in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED));
        for (size_t i = 0; i < 4; i++)
            if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_PATTERN, hj_triggers[i], strlen(hj_triggers[i]))) return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
