/*
 * chat_gen.c -- b11669's autoparser generator (see chat_gen.h).
 *
 * The builder calls below follow the creation order b11669's code has when
 * GCC evaluates it: in `x + y` the right operand is built before the left,
 * so `a + b + c` creates c, then b, then a, then the two sequences; a string
 * operand (`x + "str"`) becomes a literal inside operator+, after x; a braced
 * list ({a, b}) is built left to right. Each comment gives the b11669
 * expression the lines reproduce.
 */
#include "text/chat_gen.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_gen_int.h"
#include "text/chat_peg.h"

typedef struct {
    peg_arena *a;
    const chat_analysis *an;
    const chat_gen_inputs *in;
    int extracting_reasoning;
    size_t reasoning_parser;
    int failed;                 /* a schema failed: err holds b11669's reason */
} cg_ctx;

/* trim_whitespace (chat-auto-parser-helpers.cpp): isspace at both ends; malloc'd */
static char *cg_trim(const ca_str *s)
{
    size_t b = 0, e = s->n;
    while (b < e && isspace((unsigned char)s->p[b])) b++;
    while (e > b && isspace((unsigned char)s->p[e - 1])) e--;
    char *r = malloc(e - b + 1);
    if (!r) return NULL;
    memcpy(r, s->p + b, e - b);
    r[e - b] = 0;
    return r;
}

static char *cg_dup(const char *s, size_t n)
{
    char *r = malloc(n + 1);
    if (!r) return NULL;
    if (n) memcpy(r, s, n);
    r[n] = 0;
    return r;
}

/* analyze_reasoning::build_parser */
static size_t cg_reasoning(cg_ctx *c)
{
    peg_arena *a = c->a;
    const chat_analysis *an = c->an;
    if (!c->extracting_reasoning) return peg_eps(a);
    if ((an->reasoning.mode == CA_REASONING_TAG_BASED || an->reasoning.mode == CA_REASONING_TOOLS_ONLY) &&
        an->reasoning.end.n) {
        char *end = cg_trim(&an->reasoning.end);
        if (!end) { a->oom = 1; return peg_eps(a); }
        size_t r;
        if (an->reasoning.start.n) {
            /* optional(optspace(start) + reasoning(until(trim(end))) + optspace(end)) */
            size_t oe = chat_peg_optspace(a, an->reasoning.end.p);
            size_t rs = chat_peg_tag(a, "reasoning", peg_until(a, end, strlen(end)));
            size_t os = chat_peg_optspace(a, an->reasoning.start.p);
            r = peg_optional(a, peg_seq2(a, peg_seq2(a, os, rs), oe));
        } else {
            /* optional(reasoning(until(trim(end))) + optspace(end)) */
            size_t oe = chat_peg_optspace(a, an->reasoning.end.p);
            size_t rs = chat_peg_tag(a, "reasoning", peg_until(a, end, strlen(end)));
            r = peg_optional(a, peg_seq2(a, rs, oe));
        }
        free(end);
        return r;
    }
    return peg_eps(a);
}

static int cg_always_wrapped(const chat_analysis *an)
{
    /* analyze_content::is_always_wrapped */
    return an->content.mode == CA_CONTENT_ALWAYS_WRAPPED && an->content.start.n && an->content.end.n;
}

/* analyze_content::build_parser */
static size_t cg_content(cg_ctx *c)
{
    peg_arena *a = c->a;
    const chat_analysis *an = c->an;
    const ca_str *st = &an->content.start, *en = &an->content.end;
    if (cg_always_wrapped(an)) {                      /* both markers non-empty */
        if (c->extracting_reasoning) {
            /* reasoning_parser + start + content(until(end)) + end + end() */
            size_t e = peg_end(a);
            size_t ce = chat_peg_tag(a, "content", peg_until(a, en->p, en->n));
            size_t x = peg_seq2(a, c->reasoning_parser, peg_literal(a, st->p, st->n));
            x = peg_seq2(a, x, ce);
            x = peg_seq2(a, x, peg_literal(a, en->p, en->n));
            return peg_seq2(a, x, e);
        }
        /* content(until(start)) + start + content(until(end)) + end + end() */
        size_t e = peg_end(a);
        size_t ce = chat_peg_tag(a, "content", peg_until(a, en->p, en->n));
        size_t cs = chat_peg_tag(a, "content", peg_until(a, st->p, st->n));
        size_t x = peg_seq2(a, cs, peg_literal(a, st->p, st->n));
        x = peg_seq2(a, x, ce);
        x = peg_seq2(a, x, peg_literal(a, en->p, en->n));
        return peg_seq2(a, x, e);
    }
    /* reasoning_parser + content(rest()) + end() */
    size_t e = peg_end(a);
    size_t cr = chat_peg_tag(a, "content", peg_rest(a));
    return peg_seq2(a, peg_seq2(a, c->reasoning_parser, cr), e);
}

/* the response_format branch of autoparser::build_parser */
static size_t cg_response_format(cg_ctx *c, char *err, size_t errlen)
{
    peg_arena *a = c->a;
    jbuf sj;
    jbuf_init(&sj);
    if (chat_gen_schema_text(c->in->json_schema, &sj, err, errlen)) { jbuf_free(&sj); c->failed = 1; return peg_eps(a); }
    /* rule("response-format", content(schema(json(), "response-format-schema", schema))) */
    size_t js = peg_json(a);
    size_t sc = peg_schema(a, js, "response-format-schema", sj.p ? sj.p : "", sj.len, 0);
    jbuf_free(&sj);
    size_t rf = peg_rule(a, "response-format", chat_peg_tag(a, "content", sc), 0);
    /* reasoning_parser + space() + choice({ literal("```json") + space() + rf + space() + literal("```"),
     *                                       space() + rf + space() }) + end() */
    size_t e = peg_end(a);
    size_t l2 = peg_literal_c(a, "```");
    size_t s2 = peg_space(a);
    size_t s1 = peg_space(a);
    size_t l1 = peg_literal_c(a, "```json");
    size_t x = peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, l1, s1), rf), s2), l2);
    size_t s4 = peg_space(a);
    size_t s3 = peg_space(a);
    size_t y = peg_seq2(a, peg_seq2(a, s3, rf), s4);
    size_t alts[2] = {x, y};
    size_t ch = peg_choice(a, alts, 2);
    size_t sp = peg_space(a);
    size_t r = peg_seq2(a, peg_seq2(a, c->reasoning_parser, sp), ch);
    return peg_seq2(a, r, e);
}

/* a ca_str's text ("" for an unset one) */
#define CG_S(x) ((x).p ? (x).p : "")

static char *cg_cat(const ca_str *x, const char *dot, const ca_str *y)
{
    size_t n = x->n + strlen(dot) + y->n;
    char *r = malloc(n + 1);
    if (!r) return NULL;
    snprintf(r, n + 1, "%s%s%s", CG_S(*x), dot, CG_S(*y));
    return r;
}

/* analyze_tools::build_tool_parser_json_native */
static size_t cg_json_native(cg_ctx *c, cg_tools *t)
{
    peg_arena *a = c->a;
    const ca_tool_format_analysis *f = &c->an->tools.format;
    char *name = NULL, *args = NULL;
    if (f->function_field.n && strcmp(CG_S(f->function_field), "function") &&
        !(f->name_field.n && memchr(f->name_field.p, '.', f->name_field.n))) {
        name = cg_cat(&f->function_field, ".", &f->name_field);
        args = cg_cat(&f->function_field, ".", &f->args_field);
    } else {
        name = cg_dup(CG_S(f->name_field), f->name_field.n);
        args = cg_dup(CG_S(f->args_field), f->args_field.n);
    }
    if (!name || !args) { free(name); free(args); a->oom = 1; return peg_eps(a); }
    int force = c->in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED;
    size_t tools_parser = peg_eps(a);
    if (!f->section_start.n && f->per_call_start.n) {
        size_t one = chat_gen_json_tools(t, &f->per_call_start, &f->per_call_end, c->in->parallel_tool_calls, force, name,
                                         args, f->tools_array_wrapped, f->fun_name_is_key, CG_S(f->id_field), CG_S(f->gen_id_field),
                                         f->parameter_order, f->n_parameter_order, f->openai_wrapper_trigger);
        size_t sp = peg_space(a);
        tools_parser = peg_rule(a, "tool-calls", peg_one_or_more(a, peg_seq2(a, one, sp)), 1);
    } else {
        tools_parser = chat_gen_json_tools(t, &f->section_start, &f->section_end, c->in->parallel_tool_calls, force, name,
                                           args, f->tools_array_wrapped, f->fun_name_is_key, CG_S(f->id_field),
                                           CG_S(f->gen_id_field), f->parameter_order, f->n_parameter_order,
                                           f->openai_wrapper_trigger);
    }
    free(name);
    free(args);
    if (cg_always_wrapped(c->an)) {
        /* wrapped = optional(start + content(until(end)) + end); reasoning_parser + wrapped + tools + end() */
        const ca_str *st = &c->an->content.start, *en = &c->an->content.end;
        size_t ce = chat_peg_tag(a, "content", peg_until(a, en->p, en->n));
        size_t x = peg_seq2(a, peg_literal(a, st->p, st->n), ce);
        x = peg_seq2(a, x, peg_literal(a, en->p, en->n));
        size_t wrapped = peg_optional(a, x);
        size_t e = peg_end(a);
        size_t ids[4] = {c->reasoning_parser, wrapped, tools_parser, e};
        return peg_seq2(a, peg_seq2(a, peg_seq2(a, ids[0], ids[1]), ids[2]), ids[3]);
    }
    const ca_str *ts = f->section_start.n ? &f->section_start : f->per_call_start.n ? &f->per_call_start : NULL;
    /* reasoning_parser + optional(content(until(tool_start))) + tools_parser + end() */
    size_t e = peg_end(a);
    size_t oc = peg_optional(a, chat_peg_tag(a, "content", ts ? peg_until(a, ts->p, ts->n) : peg_until(a, "{", 1)));
    return peg_seq2(a, peg_seq2(a, peg_seq2(a, c->reasoning_parser, oc), tools_parser), e);
}

static int cg_has_tools(const chat_gen_inputs *in)
{
    return in->tools && in->tools->type == JSON_ARRAY && in->tools->n > 0;
}

static int cg_has_schema(const chat_gen_inputs *in)
{
    return in->json_schema && in->json_schema->type == JSON_OBJECT && in->json_schema->n > 0;
}

static int cg_push_str(char ***list, size_t *n, const char *s, size_t len)
{
    char **l = realloc(*list, (*n + 1) * sizeof *l);
    if (!l) return -1;
    *list = l;
    if (!(l[*n] = cg_dup(s, len))) return -1;
    (*n)++;
    return 0;
}

void chat_gen_free(chat_gen_params *p)
{
    peg_free(&p->arena);
    for (size_t i = 0; i < p->ntriggers; i++) free(p->triggers[i].value);
    free(p->triggers);
    for (size_t i = 0; i < p->npreserved; i++) free(p->preserved_tokens[i]);
    free(p->preserved_tokens);
    for (size_t i = 0; i < p->nstops; i++) free(p->additional_stops[i]);
    free(p->additional_stops);
    free(p->thinking_start_tag);
    free(p->thinking_end_tag);
    for (size_t i = 0; i < p->nthinking_end_tags; i++) free(p->thinking_end_tags[i]);
    free(p->thinking_end_tags);
    free(p->generation_prompt);
    memset(p, 0, sizeof *p);
    peg_init(&p->arena);
}

static int cg_fail(char *err, size_t errlen, const char *why)
{
    snprintf(err, errlen, "%s", why);
    return CHAT_GEN_ERROR;
}

int chat_gen(const chat_analysis *an, const chat_gen_inputs *in, chat_gen_params *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    peg_init(&out->arena);
    out->format = CHAT_FORMAT_PEG_NATIVE;
    int has_tools = cg_has_tools(in), has_schema = cg_has_schema(in);
    int tool_parser = !has_schema && has_tools && in->tool_choice != CHAT_TOOL_CHOICE_NONE &&
                      an->jinja_caps.supports_tool_calls;

    /* generate_parser: the analysis' preserved tokens and stops, the generation prompt */
    for (size_t i = 0; i < an->n_preserved_tokens; i++)
        if (cg_push_str(&out->preserved_tokens, &out->npreserved, an->preserved_tokens[i].p, an->preserved_tokens[i].n))
            return cg_fail(err, errlen, "out of memory");
    for (size_t i = 0; i < an->n_additional_stops; i++)
        if (cg_push_str(&out->additional_stops, &out->nstops, an->additional_stops[i].p, an->additional_stops[i].n))
            return cg_fail(err, errlen, "out of memory");
    out->generation_prompt = cg_dup(in->generation_prompt ? in->generation_prompt : "", in->generation_prompt_len);
    out->generation_prompt_len = in->generation_prompt_len;
    if (!out->generation_prompt) return cg_fail(err, errlen, "out of memory");

    /* build_parser */
    peg_arena *a = &out->arena;
    cg_ctx c = {a, an, in, 0, 0, 0};
    c.reasoning_parser = peg_eps(a);                 /* parser_build_context's reasoning_parser(p.eps()) */
    c.extracting_reasoning = in->reasoning_format != CHAT_REASONING_NONE && an->reasoning.mode != CA_REASONING_NONE;
    c.reasoning_parser = cg_reasoning(&c);
    size_t parser = peg_eps(a);
    int pure_content = an->reasoning.mode == CA_REASONING_NONE;
    if (has_schema) {
        parser = cg_response_format(&c, err, errlen);
        pure_content = 0;
    } else if (tool_parser) {
        cg_tools t = {a, in->tools, err, errlen, 0, 0};
        if (an->tools.format.mode == CA_TOOL_JSON_NATIVE) parser = cg_json_native(&c, &t);
        else if (an->tools.format.mode == CA_TOOL_TAG_WITH_JSON)
            parser = chat_gen_tag_json(&t, an, c.reasoning_parser, in->parallel_tool_calls,
                                       in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED);
        else if (an->tools.format.mode == CA_TOOL_TAG_WITH_TAGGED)
            parser = chat_gen_tag_tagged(&t, an, c.reasoning_parser, in->parallel_tool_calls,
                                         in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED);
        else parser = peg_eps(a);                     /* analyze_tools::build_parser's default: eps() */
        if (t.unsupported) return CHAT_GEN_UNSUPPORTED;
        if (t.failed) return CHAT_GEN_ERROR;
        pure_content = 0;
    } else {
        parser = cg_content(&c);
    }
    char *rstart = cg_trim(&an->reasoning.start);
    if (!rstart) return cg_fail(err, errlen, "out of memory");
    size_t pre = chat_peg_prefix(a, out->generation_prompt, rstart);
    free(rstart);
    size_t root;
    if (pure_content) {
        root = peg_seq2(a, pre, parser);
    } else {                                          /* prefix << parser */
        size_t sp = peg_space(a);
        size_t ids[3] = {pre, sp, parser};
        root = peg_sequence(a, ids, 3);
    }
    if (c.failed) return CHAT_GEN_ERROR;
    if (a->oom) return cg_fail(err, errlen, "out of memory");
    if (peg_build(a, root, err, errlen) != 0) return CHAT_GEN_ERROR;

    /* the grammar: generate_parser's include_grammar and grammar_lazy */
    const ca_str *ss = &an->tools.format.section_start, *pc = &an->tools.format.per_call_start;
    const ca_str *trigger = ss->n ? ss : pc;
    int tools_on = an->tools.format.mode != CA_TOOL_NONE && has_tools;
    out->has_grammar = has_schema || (tools_on && ((in->tool_choice == CHAT_TOOL_CHOICE_AUTO && trigger->n) ||
                                                   in->tool_choice == CHAT_TOOL_CHOICE_REQUIRED));
    if (out->has_grammar) {
        out->grammar_lazy = !has_schema && in->tool_choice == CHAT_TOOL_CHOICE_AUTO;
        if (out->grammar_lazy) {
            size_t nt = an->tools.format.openai_wrapper_trigger ? 2 : 1;
            out->triggers = calloc(nt, sizeof *out->triggers);
            if (!out->triggers) return cg_fail(err, errlen, "out of memory");
            out->ntriggers = nt;
            out->triggers[0].type = CHAT_GRAMMAR_TRIGGER_WORD;
            out->triggers[0].value = cg_dup(CG_S(*trigger), trigger->n);
            if (nt == 2) {
                out->triggers[1].type = CHAT_GRAMMAR_TRIGGER_WORD;
                out->triggers[1].value = cg_dup("{\"type\": \"function\",", 21);
            }
            for (size_t i = 0; i < nt; i++)
                if (!out->triggers[i].value) return cg_fail(err, errlen, "out of memory");
        }
    }

    /* common_chat_templates_apply_jinja after generate_parser */
    out->supports_thinking = an->reasoning.mode != CA_REASONING_NONE;
    out->thinking_start_tag = out->supports_thinking ? cg_trim(&an->reasoning.start) : cg_dup("", 0);
    if (!out->thinking_start_tag) return cg_fail(err, errlen, "out of memory");
    if (out->supports_thinking) {
        char *e = cg_trim(&an->reasoning.end);
        if (!e) return cg_fail(err, errlen, "out of memory");
        if (e[0]) {
            out->thinking_end_tag = e;
            if (cg_push_str(&out->thinking_end_tags, &out->nthinking_end_tags, e, strlen(e)))
                return cg_fail(err, errlen, "out of memory");
        } else {
            free(e);
        }
    }
    return CHAT_GEN_OK;
}
