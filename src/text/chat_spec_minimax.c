/*
 * chat_spec_minimax.c -- b11669's common_chat_params_init_minimax_m3
 * (common/parsers/minimax-m3.cpp): MiniMax-M3's namespaced tool calls
 *   ]<]minimax[>[<tool_call>]<]minimax[>[<invoke name="NAME">
 *   ]<]minimax[>[<ARG>VALUE]<]minimax[>[</ARG>...]<]minimax[>[</invoke>]<]minimax[>[</tool_call>
 * with argument values expanded in XML as the template's to_xml() writes them:
 * a string raw, an object as its members' elements, an array as <item>
 * elements, an anyOf as its alternatives, anything else as JSON. Parsed with
 * the peg-minimax-m3 mapper (chat_peg.c).
 *
 * Measured on b11669 (its arenas through testing/kit_chat.cpp): rules and
 * schemas are named by the tool's index and each level's property or
 * alternative index (tool-1-arg-2, tool-1-arg-2-0-schema, tool-1-arg-2-item).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_gen_int.h"
#include "text/chat_peg.h"
#include "text/chat_spec_int.h"

#define MM_NS "]<]minimax[>["
#define MM_DEPTH 80

typedef struct {
    csp_ctx *c;
    const json_value *root;     /* the function's parameters (the document) */
    int depth;
} mm_ctx;

static size_t mm_value(mm_ctx *m, const json_value *sc, const json_value *ty, const char *rule, const char *close);

static char *mm_cat(mm_ctx *m, const char *a, const char *b, size_t bn, const char *c)
{
    size_t an = strlen(a), cn = strlen(c);
    char *r = malloc(an + bn + cn + 1);
    if (!r) { m->c->out->arena.oom = 1; return NULL; }
    memcpy(r, a, an);
    memcpy(r + an, b, bn);
    memcpy(r + an + bn, c, cn + 1);
    return r;
}

/* element_of: rule(rule, tool_arg(tool_arg_open(literal(NS + "<") + tool_arg_name(literal(tag)) + literal(">")) +
 *                                 value_of(schema, rule, NS + "</" + tag + ">"))) */
static size_t mm_element(mm_ctx *m, const char *tag, size_t tlen, const json_value *sc, const char *rule)
{
    peg_arena *a = &m->c->out->arena;
    char *close = mm_cat(m, MM_NS "</", tag, tlen, ">");
    if (!close) return peg_eps(a);
    size_t value = mm_value(m, sc, NULL, rule, close);
    free(close);
    size_t gt = peg_literal_c(a, ">");
    size_t nm = chat_peg_tag(a, "tool-arg-name", peg_literal(a, tag, tlen));
    size_t lt = peg_literal_c(a, MM_NS "<");
    size_t open = chat_peg_tag(a, "tool-arg-open", peg_seq2(a, peg_seq2(a, lt, nm), gt));
    return peg_rule(a, rule, chat_peg_tag(a, "tool-arg", peg_seq2(a, open, value)), 0);
}

/* members_of: the required properties in order (space between), then any optional ones in any order */
static size_t mm_members(mm_ctx *m, const json_value *obj, const char *prefix)
{
    peg_arena *a = &m->c->out->arena;
    const json_value *props = json_get(obj, "properties");
    size_t n = props && props->type == JSON_OBJECT ? props->n : 0;
    size_t *req = n ? malloc(n * sizeof *req) : NULL, *opt = n ? malloc(n * sizeof *opt) : NULL, nreq = 0, nopt = 0;
    if (n && (!req || !opt)) { free(req); free(opt); a->oom = 1; return peg_eps(a); }
    for (size_t j = 0; j < n && !m->c->failed && !a->oom; j++) {
        char num[24];
        snprintf(num, sizeof num, "-%zu", j);
        char *rn = mm_cat(m, prefix, num, strlen(num), "");
        if (!rn) break;
        size_t e = mm_element(m, props->keys[j], props->key_lens[j], props->items[j], rn);
        free(rn);
        if (csp_required(obj, props->keys[j], props->key_lens[j])) req[nreq++] = e;
        else opt[nopt++] = e;
    }
    size_t members = peg_eps(a);
    for (size_t k = 0; k < nreq; k++) {
        if (k) members = peg_seq2(a, members, peg_space(a));
        members = peg_seq2(a, members, req[k]);
    }
    if (nopt) {
        size_t any = peg_choice(a, NULL, 0);
        for (size_t k = 0; k < nopt; k++) any = peg_alt2(a, any, opt[k]);
        size_t sp = peg_space(a);
        members = peg_seq2(a, members, peg_repeat(a, peg_seq2(a, sp, any), 0, -1));
    }
    free(req);
    free(opt);
    return members;
}

/* value_of(schema, rule, close) */
static size_t mm_value_in(mm_ctx *m, const json_value *sc, const json_value *ty, const char *rule, const char *close)
{
    static json_value any_schema = {JSON_OBJECT, NULL, 0, 0, NULL, NULL, NULL};
    peg_arena *a = &m->c->out->arena;
    size_t close_tag = chat_peg_tag(a, "tool-arg-close", peg_literal_c(a, close));
    if (chat_gen_schema_may_be_string_typed(m->root, sc, ty)) {
        size_t sv = chat_peg_tag(a, "tool-arg-string-value", peg_until(a, close, strlen(close)));
        peg_str d = {(char *)close, strlen(close)};
        return peg_ac(a, peg_seq2(a, sv, close_tag), &d, 1);
    }
    int kind = chat_gen_schema_kind(sc, ty);
    const json_value *props = json_get(sc, "properties");
    if (kind == CHAT_SK_ANY_OF) {
        const json_value *alts = json_get(sc, "oneOf");
        if (!alts) alts = json_get(sc, "anyOf");
        const json_value *types = alts ? NULL : (ty ? ty : json_get(sc, "type"));
        size_t n = alts ? alts->n : types->n;
        size_t *ch = malloc((n ? n : 1) * sizeof *ch);
        if (!ch) { a->oom = 1; return peg_eps(a); }
        for (size_t k = 0; k < n; k++) {
            char num[24];
            snprintf(num, sizeof num, "-%zu", k);
            char *rn = mm_cat(m, rule, num, strlen(num), "");
            ch[k] = rn ? (alts ? mm_value(m, alts->items[k], NULL, rn, close) : mm_value(m, sc, types->items[k], rn, close))
                       : peg_eps(a);
            free(rn);
        }
        size_t r = peg_choice(a, ch, n);
        free(ch);
        return r;
    }
    if (kind == CHAT_SK_OBJECT && props && props->type == JSON_OBJECT && props->n) {
        size_t sp = peg_space(a);
        size_t obj = chat_peg_tag(a, "tool-arg-object", mm_members(m, sc, rule));
        return peg_seq2(a, peg_seq2(a, obj, sp), close_tag);
    }
    if (kind == CHAT_SK_ARRAY) {
        const json_value *items = json_get(sc, "items");
        char *in = mm_cat(m, rule, "-item", 5, "");
        if (!in) return peg_eps(a);
        size_t v = mm_value(m, items ? items : &any_schema, NULL, in, MM_NS "</item>");
        size_t item = peg_rule(a, in, chat_peg_tag(a, "tool-arg-item", csp_sp(a, MM_NS "<item>", v)), 0);
        free(in);
        size_t sp2 = peg_space(a);
        size_t sp1 = peg_space(a);
        size_t arr = chat_peg_tag(a, "tool-arg-array", peg_repeat(a, peg_seq2(a, sp1, item), 0, -1));
        return peg_seq2(a, peg_seq2(a, arr, sp2), close_tag);
    }
    /* tool_arg_json_value(schema(json(), rule + "-schema", doc, schema)) + close_tag */
    char *sn = mm_cat(m, rule, "-schema", 7, "");
    if (!sn) return peg_eps(a);
    jbuf sj;
    jbuf_init(&sj);
    if (chat_gen_schema_node_text_typed(m->root, sc, ty, &sj, m->c->err, m->c->errlen)) m->c->failed = 1;
    size_t js = peg_json(a);
    size_t s = peg_schema(a, js, sn, sj.p ? sj.p : "", sj.len, 0);
    jbuf_free(&sj);
    free(sn);
    return peg_seq2(a, chat_peg_tag(a, "tool-arg-value", s), close_tag);
}

static size_t mm_value(mm_ctx *m, const json_value *sc, const json_value *ty, const char *rule, const char *close)
{
    if (++m->depth > MM_DEPTH) {
        m->depth--;
        if (!m->c->failed) snprintf(m->c->err, m->c->errlen, "the tool's parameters nest deeper than %d levels", MM_DEPTH);
        m->c->failed = 1;
        return peg_eps(&m->c->out->arena);
    }
    size_t r = mm_value_in(m, sc, ty, rule, close);
    m->depth--;
    return r;
}

/* rule "tool-<i>" */
static size_t mm_function(csp_ctx *c, const json_value *fn, const char *name, size_t nlen, size_t i)
{
    peg_arena *a = &c->out->arena;
    const json_value *params = csp_parameters(fn);
    csp_check_params(c, params);                  /* common_chat_schema_from_json: b11669 throws */
    size_t body = peg_eps(a);
    /* no parameters: common_chat_tool_parameters' {"type": "object", "properties": {}}, an object */
    if (!c->failed && (!params || chat_gen_schema_is_object(params))) {
        mm_ctx m = {c, params, 0};
        char prefix[48];
        snprintf(prefix, sizeof prefix, "tool-%zu-arg", i);
        body = mm_members(&m, params, prefix);
    }
    /* tool(tool_open(literal(NS + "<invoke name=\"") + tool_name(literal(name)) + literal("\">")) + space() +
     *      invoke_body + space() + tool_close(literal(INVOKE_END))) */
    size_t close = chat_peg_tag(a, "tool-close", peg_literal_c(a, MM_NS "</invoke>"));
    size_t s2 = peg_space(a);
    size_t s1 = peg_space(a);
    size_t l2 = peg_literal_c(a, "\">");
    size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
    size_t l1 = peg_literal_c(a, MM_NS "<invoke name=\"");
    size_t open = chat_peg_tag(a, "tool-open", peg_seq2(a, peg_seq2(a, l1, tn), l2));
    size_t x = peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, open, s1), body), s2), close);
    char rn[64];
    snprintf(rn, sizeof rn, "tool-%zu", i);
    return peg_rule(a, rn, chat_peg_tag(a, "tool", x), 0);
}

static size_t mm_build(csp_ctx *c, int has_schema, int tool_parser)
{
    const chat_gen_inputs *in = c->in;
    peg_arena *a = &c->out->arena;
    size_t gp = chat_peg_prefix(a, c->out->generation_prompt, "<mm:think>");
    size_t end = peg_end(a);
    size_t reasoning = peg_eps(a);
    if (in->reasoning_format != CHAT_REASONING_NONE) {
        size_t block;
        peg_str d = {"</mm:think>", 11};
        size_t l2 = peg_literal_c(a, "</mm:think>");
        if (!in->thinking_disabled) {
            /* literal(THINK_START) + space() + ac(reasoning(until(THINK_END)) + literal(THINK_END), THINK_END) */
            size_t rs = chat_peg_tag(a, "reasoning", peg_until(a, "</mm:think>", 11));
            size_t ac = peg_ac(a, peg_seq2(a, rs, l2), &d, 1);
            size_t sp = peg_space(a);
            block = peg_seq2(a, peg_seq2(a, peg_literal_c(a, "<mm:think>"), sp), ac);
        } else {
            /* literal(THINK_START) + ac(until(THINK_END) + literal(THINK_END), THINK_END) */
            size_t u = peg_until(a, "</mm:think>", 11);
            size_t ac = peg_ac(a, peg_seq2(a, u, l2), &d, 1);
            block = peg_seq2(a, peg_literal_c(a, "<mm:think>"), ac);
        }
        size_t alts[2] = {block, peg_literal_c(a, "</mm:think>")};
        reasoning = peg_optional(a, peg_choice(a, alts, 2));
    }
    if (has_schema) {
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
    size_t choice = peg_choice(a, NULL, 0);
    for (size_t i = 0; i < in->tools->n && !c->failed && !a->oom; i++) {
        const char *name;
        size_t nlen;
        const json_value *fn = csp_function(in->tools->items[i], &name, &nlen);
        if (fn) choice = peg_alt2(a, choice, mm_function(c, fn, name, nlen, i));
    }
    size_t calls = peg_eps(a);
    {
        /* trigger_rule("tool-call", literal(FC_START) + space() + tool_choice
         *   [+ zero_or_more(space() + tool_choice)] + space() + literal(FC_END)) */
        size_t le = peg_literal_c(a, MM_NS "</tool_call>");
        size_t s2 = peg_space(a);
        size_t z = PEG_INVALID;
        if (in->parallel_tool_calls) {
            size_t sp = peg_space(a);
            z = peg_zero_or_more(a, peg_seq2(a, sp, choice));
        }
        size_t s1 = peg_space(a);
        size_t ls = peg_literal_c(a, MM_NS "<tool_call>");
        size_t x = peg_seq2(a, peg_seq2(a, ls, s1), choice);
        if (z != PEG_INVALID) x = peg_seq2(a, x, z);
        calls = peg_rule(a, "tool-call", peg_seq2(a, peg_seq2(a, x, s2), le), 1);
    }
    if (in->tool_choice != CHAT_TOOL_CHOICE_REQUIRED) calls = peg_optional(a, calls);
    size_t ct = chat_peg_tag(a, "content", peg_until(a, MM_NS "<tool_call>", strlen(MM_NS "<tool_call>")));
    return peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, gp, reasoning), ct), calls), end);
}

int chat_spec_minimax_m3(csp_ctx *c)
{
    const chat_gen_inputs *in = c->in;
    chat_gen_params *out = c->out;
    peg_arena *a = &out->arena;
    out->format = CHAT_FORMAT_PEG_MINIMAX_M3;
    out->supports_thinking = 1;
    if (!(out->thinking_start_tag = csp_strdup(c, "<mm:think>", 10)) || csp_end_tag(c, "</mm:think>") ||
        csp_preserve(c, MM_NS) || csp_preserve(c, "<tool_call>") || csp_preserve(c, "</tool_call>") ||
        csp_preserve(c, "<mm:think>") || csp_preserve(c, "</mm:think>"))
        return CHAT_GEN_ERROR;
    int has_tools = csp_has_tools(in);
    int has_schema = in->json_schema && in->json_schema->type == JSON_OBJECT;   /* an empty object too */
    int tool_parser = has_tools && in->tool_choice != CHAT_TOOL_CHOICE_NONE;
    size_t root = mm_build(c, has_schema, tool_parser);
    if (c->failed) return CHAT_GEN_ERROR;
    if (a->oom) { snprintf(c->err, c->errlen, "out of memory"); return CHAT_GEN_ERROR; }
    if (peg_build(a, root, c->err, c->errlen)) return CHAT_GEN_ERROR;
    if (has_schema || tool_parser) {
        out->has_grammar = 1;
        out->grammar_lazy = !(has_schema || (has_tools && in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED));
        if (csp_trigger(c, CHAT_GRAMMAR_TRIGGER_WORD, MM_NS "<tool_call>", strlen(MM_NS "<tool_call>")))
            return CHAT_GEN_ERROR;
    }
    return CHAT_GEN_OK;
}
