/*
 * chat_spec_gemma4.c -- b11669's common_chat_params_init_gemma4
 * (common/parsers/gemma4.cpp): Gemma 4's
 *   <|channel>thought\n...<channel|>content
 *   <|tool_call>call:NAME{key:<|"|>text<|"|>,n:1}<tool_call|>
 * parsed with the peg-gemma4 mapper (chat_peg.c), whose arguments are
 * Gemma's own value syntax (rules gemma4-*). The outdated templates
 * (CA_SPEC_GEMMA4_OUTDATED) take the same init after b11669 rewrites their
 * messages (convert_tool_responses_gemma4: the prompt side, the caller's).
 *
 * Measured on b11669 (its arenas through testing/kit_chat.cpp): rules are
 * named by the tool's index (tool-0); the trigger <|tool_call> is set
 * whenever a grammar is (response_format too, not lazy).
 */
#include <stdio.h>
#include <string.h>

#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

#define G4_Q "<|\"|>"

/* rule("gemma4-dict", ...): "{" ws ( "}" | kv ("," ws kv)* ws "}" ) */
static size_t g4_dict(peg_arena *a, void *ctx)
{
    (void)ctx;
    size_t ws = peg_space(a);
    size_t member = peg_ref(a, "gemma4-dict-kv");
    size_t in3[3] = {peg_literal_c(a, ","), ws, member};
    size_t in2[2] = {member, PEG_INVALID};
    in2[1] = peg_zero_or_more(a, peg_sequence(a, in3, 3));
    size_t members = peg_sequence(a, in2, 2);
    size_t lb = peg_literal_c(a, "{");
    size_t rb = peg_literal_c(a, "}");
    size_t tail[3] = {members, ws, peg_literal_c(a, "}")};
    size_t alts[2] = {rb, peg_sequence(a, tail, 3)};
    size_t all[3] = {lb, ws, peg_choice(a, alts, 2)};
    return peg_sequence(a, all, 3);
}

/* rule("gemma4-array", ...): "[" ws ( "]" | v ("," ws v)* ws "]" ) */
static size_t g4_array(peg_arena *a, void *ctx)
{
    (void)ctx;
    size_t ws = peg_space(a);
    size_t value = peg_ref(a, "gemma4-value");
    size_t in3[3] = {peg_literal_c(a, ","), ws, value};
    size_t in2[2] = {value, PEG_INVALID};
    in2[1] = peg_zero_or_more(a, peg_sequence(a, in3, 3));
    size_t elements = peg_sequence(a, in2, 2);
    size_t lb = peg_literal_c(a, "[");
    size_t rb = peg_literal_c(a, "]");
    size_t tail[3] = {elements, ws, peg_literal_c(a, "]")};
    size_t alts[2] = {rb, peg_sequence(a, tail, 3)};
    size_t all[3] = {lb, ws, peg_choice(a, alts, 2)};
    return peg_sequence(a, all, 3);
}

static size_t g4_value(peg_arena *a, void *ctx)
{
    (void)ctx;
    static const char *const names[6] = {"gemma4-string", "gemma4-dict", "gemma4-array", "gemma4-number",
                                         "gemma4-bool", "gemma4-null"};
    size_t alts[6];
    for (size_t i = 0; i < 6; i++) alts[i] = peg_ref(a, names[i]);
    return peg_choice(a, alts, 6);
}

/* the gemma4-* value rules, in b11669's order */
static void g4_value_rules(peg_arena *a)
{
    peg_rule(a, "gemma4-string-content", peg_until(a, G4_Q, strlen(G4_Q)), 0);
    /* literal(Q) + ref("gemma4-string-content") + literal(Q) */
    size_t q2 = peg_literal_c(a, G4_Q);
    size_t r = peg_ref(a, "gemma4-string-content");
    size_t q1 = peg_literal_c(a, G4_Q);
    peg_rule(a, "gemma4-string", peg_seq2(a, peg_seq2(a, q1, r), q2), 0);
    peg_rule(a, "gemma4-bool", peg_json_bool(a), 0);
    peg_rule(a, "gemma4-null", peg_json_null(a), 0);
    peg_rule(a, "gemma4-number", peg_json_number(a), 0);
    /* rule("gemma4-dict-key-name", chars("[^:}]", 1, -1)) + literal(":") */
    size_t colon = peg_literal_c(a, ":");
    size_t kn = peg_rule(a, "gemma4-dict-key-name", peg_chars(a, "[^:}]", 1, -1), 0);
    peg_rule(a, "gemma4-dict-key", peg_seq2(a, kn, colon), 0);
    /* ref("gemma4-dict-key") + space() + ref("gemma4-value") */
    size_t v = peg_ref(a, "gemma4-value");
    size_t sp = peg_space(a);
    size_t k = peg_ref(a, "gemma4-dict-key");
    peg_rule(a, "gemma4-dict-kv", peg_seq2(a, peg_seq2(a, k, sp), v), 0);
    peg_rule_fn(a, "gemma4-dict", g4_dict, NULL, 0);
    peg_rule_fn(a, "gemma4-array", g4_array, NULL, 0);
    peg_rule_fn(a, "gemma4-value", g4_value, NULL, 0);
}

/* rule "tool-<i>": tool(sequence({tool_open(tool_name(literal(name)) + peek(literal("{"))),
 *                                  tool_args(ref("gemma4-dict"))})) */
static size_t g4_function(peg_arena *a, const char *name, size_t nlen, size_t i)
{
    size_t pk = peg_peek(a, peg_literal_c(a, "{"));
    size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
    size_t open = chat_peg_tag(a, "tool-open", peg_seq2(a, tn, pk));
    size_t args = chat_peg_tag(a, "tool-args", peg_ref(a, "gemma4-dict"));
    size_t two[2] = {open, args};
    char rn[64];
    snprintf(rn, sizeof rn, "tool-%zu", i);
    return peg_rule(a, rn, chat_peg_tag(a, "tool", peg_sequence(a, two, 2)), 0);
}

int chat_spec_gemma4(csp_ctx *c)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    out->format = CHAT_FORMAT_PEG_GEMMA4;
    out->supports_thinking = 1;
    if (!(out->thinking_start_tag = csp_strdup(c, "<|channel>thought", 17)) || csp_end_tag(c, "<channel|>") ||
        csp_preserve(c, "<|channel>") || csp_preserve(c, "<channel|>") || csp_preserve(c, "<|tool_call>") ||
        csp_preserve(c, "<tool_call|>") || csp_preserve(c, "<|turn>"))
        return CHAT_GEN_ERROR;
    int has_tools = csp_has_tools(in);
    int has_schema = in->json_schema && in->json_schema->type == JSON_OBJECT;   /* an empty object too */
    int tool_parser = has_tools && in->tool_choice != CHAT_TOOL_CHOICE_NONE;

    size_t start = peg_rule(a, "start", peg_optional(a, peg_literal_c(a, "<|turn>model\n")), 0);
    {
        size_t l2 = peg_literal_c(a, "<channel|>");
        if (in->reasoning_format != CHAT_REASONING_NONE) {
            /* literal("<|channel>thought") + space() + reasoning(until("<channel|>")) + literal("<channel|>") */
            size_t rs = chat_peg_tag(a, "reasoning", peg_until(a, "<channel|>", 10));
            size_t sp = peg_space(a);
            size_t l1 = peg_literal_c(a, "<|channel>thought");
            peg_rule(a, "thought", peg_seq2(a, peg_seq2(a, peg_seq2(a, l1, sp), rs), l2), 0);
        } else {
            /* content(literal("<|channel>thought") + space() + until("<channel|>") + literal("<channel|>")) */
            size_t u = peg_until(a, "<channel|>", 10);
            size_t sp = peg_space(a);
            size_t l1 = peg_literal_c(a, "<|channel>thought");
            peg_rule(a, "thought", chat_peg_tag(a, "content", peg_seq2(a, peg_seq2(a, peg_seq2(a, l1, sp), u), l2)), 0);
        }
    }
    /* gbnf(zero_or_more(literal("<|channel>") + negate(literal("thought"))), "") */
    size_t nt = peg_negate(a, peg_literal_c(a, "thought"));
    size_t consume = peg_gbnf(a, peg_zero_or_more(a, peg_seq2(a, peg_literal_c(a, "<|channel>"), nt)), "");
    /* (peek(literal("<|channel>")) + consume + ref("thought")) | negate(literal("<|channel>")) */
    size_t ng = peg_negate(a, peg_literal_c(a, "<|channel>"));
    size_t rt = peg_ref(a, "thought");
    size_t pk = peg_peek(a, peg_literal_c(a, "<|channel>"));
    size_t thought = peg_alt2(a, peg_seq2(a, peg_seq2(a, pk, consume), rt), ng);
    size_t root;
    if (has_schema) {
        /* literal("```json") << content(schema(json(), "response-format-schema", ...)) << literal("```") */
        size_t l1 = peg_literal_c(a, "```json");
        size_t ct = chat_peg_tag(a, "content",
                                 csp_schema_json(c, "response-format-schema", in->json_schema, in->json_schema));
        size_t x = csp_shl(a, l1, ct);
        size_t rf = csp_shl(a, x, peg_literal_c(a, "```"));
        root = peg_seq2(a, peg_seq2(a, start, peg_optional(a, thought)), rf);
    } else if (tool_parser) {
        g4_value_rules(a);
        size_t choice = peg_choice(a, NULL, 0);
        for (size_t i = 0; i < in->tools->n; i++) {
            const char *name;
            size_t nlen;
            if (csp_function(in->tools->items[i], &name, &nlen)) choice = peg_alt2(a, choice, g4_function(a, name, nlen, i));
        }
        /* repeat("<|tool_call>call:" + tool_choice + "<tool_call|>", min, max) */
        int min = in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED, max = in->parallel_tool_calls ? -1 : 1;
        size_t body = csp_ps(a, csp_sp(a, "<|tool_call>call:", choice), "<tool_call|>");
        size_t call = peg_rule(a, "tool-call", peg_repeat(a, body, min, max), 1);
        if (min) {
            root = peg_seq2(a, peg_seq2(a, start, thought), call);
        } else {
            size_t scan = peg_rule(a, "scan-to-toolcall", peg_until(a, "<|tool_call>", 12), 0);
            peg_str d[3] = {{"<|channel>", 10}, {"<channel|>", 10}, {"<|tool_call>", 12}};
            size_t content = peg_rule(a, "content", chat_peg_tag(a, "content", peg_until_one_of(a, d, 3)), 0);
            size_t message = peg_rule(a, "message", peg_seq2(a, thought, content), 0);
            size_t z = peg_zero_or_more(a, message);
            root = peg_seq2(a, peg_seq2(a, peg_seq2(a, start, z), scan), call);
        }
    } else {
        peg_str d[2] = {{"<|channel>", 10}, {"<channel|>", 10}};
        size_t content = peg_rule(a, "content", chat_peg_tag(a, "content", peg_until_one_of(a, d, 2)), 0);
        size_t message = peg_rule(a, "message", peg_seq2(a, thought, content), 0);
        root = peg_seq2(a, start, peg_one_or_more(a, message));
    }
    if (c->failed) return CHAT_GEN_ERROR;
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (has_schema || tool_parser) {
        out->has_grammar = 1;
        out->grammar_lazy = !(has_schema || (has_tools && in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED));
        if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_WORD, "<|tool_call>", 12)) return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
