/*
 * chat_gen_tools.c -- the tool-call parsers of b11669's generator: the JSON
 * layouts of common_chat_peg_builder::standard_json_tools (function name as
 * key, nested "function.name" keys, flat keys in the template's field order;
 * common/chat-peg-parser.cpp) and analyze_tools' JSON_NATIVE and
 * TAG_WITH_JSON parsers (common/chat-auto-parser-generator.cpp). Creation
 * order as in chat_gen.c: in `x + y` y is built first; string operands become
 * literals inside operator+, after the parser beside them.
 */
#include "text/chat_gen_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat_peg.h"

/* seq fold: ids[0] + ids[1] + ... (the ids already built) */
static size_t ct_fold(peg_arena *a, const size_t *ids, size_t n)
{
    size_t x = ids[0];
    for (size_t i = 1; i < n; i++) x = peg_seq2(a, x, ids[i]);
    return x;
}

/* a ca_str's text ("" for an unset one) */
#define CT_S(x) ((x).p ? (x).p : "")

static size_t ct_lit(peg_arena *a, const ca_str *s) { return peg_literal(a, s->p ? s->p : "", s->n); }

/* literal("\"" + key + "\"") */
static size_t ct_qlit(peg_arena *a, const char *k, size_t n)
{
    char *q = malloc(n + 3);
    if (!q) { a->oom = 1; return peg_eps(a); }
    q[0] = '"';
    memcpy(q + 1, k, n);
    q[n + 1] = '"';
    q[n + 2] = 0;
    size_t r = peg_literal(a, q, n + 2);
    free(q);
    return r;
}

/* The tools b11669 iterates (foreach_function: type "function" with a "function"). flat/nested/key
 * modes skip only tools without "function"; *name gets the function's name. */
static const json_value *ct_func(const json_value *tool, int strict, const char **name, size_t *nlen)
{
    const json_value *f = json_get(tool, "function"), *t = json_get(tool, "type");
    if (!f) return NULL;
    if (strict && !(t && t->type == JSON_STRING && !strcmp(t->str, "function"))) return NULL;
    const json_value *n = json_get(f, "name");
    if (!n || n->type != JSON_STRING) return NULL;
    *name = n->str;
    *nlen = n->len;
    return f;
}

/* tool_args(schema(json(), "tool-<i>-schema", common_chat_tool_parameters(function))) */
static size_t ct_args_schema(cg_tools *t, const json_value *func, size_t index)
{
    peg_arena *a = t->a;
    const json_value *params = json_get(func, "parameters");
    jbuf sj;
    jbuf_init(&sj);
    int rc;
    if (params && params->type != JSON_NULL && !(params->type == JSON_OBJECT && params->n == 0)) {
        rc = chat_gen_schema_text(params, &sj, t->err, t->errlen);
    } else {
        jbuf_puts(&sj, "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}");
        rc = 0;
    }
    if (rc) t->failed = 1;
    char nm[64];
    snprintf(nm, sizeof nm, "tool-%zu-schema", index);
    size_t js = peg_json(a);
    size_t sc = peg_schema(a, js, nm, sj.p ? sj.p : "", sj.len, 0);
    jbuf_free(&sj);
    return chat_peg_tag(a, "tool-args", sc);
}

/* choice({ literal("\"") + tool_id(string_content('"')) + literal("\""), tool_id(json_number()) }) */
static size_t ct_id_value(peg_arena *a)
{
    size_t q2 = peg_literal_c(a, "\"");
    size_t id = chat_peg_tag(a, "tool-id", peg_string_content(a, '"'));
    size_t q1 = peg_literal_c(a, "\"");
    size_t s1 = peg_seq2(a, peg_seq2(a, q1, id), q2);
    size_t s2 = chat_peg_tag(a, "tool-id", peg_json_number(a));
    size_t alts[2] = {s1, s2};
    return peg_choice(a, alts, 2);
}

/* atomic(literal("\"k\"") + space() + literal(":") + space() + value) with value built first */
static size_t ct_key_value(peg_arena *a, const char *k, size_t value)
{
    size_t s2 = peg_space(a), colon = peg_literal_c(a, ":"), s1 = peg_space(a);
    size_t key = ct_qlit(a, k, strlen(k));
    size_t ids[5] = {key, s1, colon, s2, value};
    return ct_fold(a, ids, 5);
}

/* literal("\"") + tool_name(literal(name)) + literal("\"") */
static size_t ct_quoted_name(peg_arena *a, const char *name, size_t n)
{
    size_t q2 = peg_literal_c(a, "\"");
    size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, n));
    size_t q1 = peg_literal_c(a, "\"");
    return peg_seq2(a, peg_seq2(a, q1, tn), q2);
}

static size_t ct_opt_comma(peg_arena *a, size_t x, int comma_optional)
{
    /* optional(x + space() + optional(literal(",") + space())) or optional(x + space() + literal(",") + space()) */
    if (comma_optional) {
        size_t s = peg_space(a), c = peg_literal_c(a, ",");
        size_t oc = peg_optional(a, peg_seq2(a, c, s));
        size_t s1 = peg_space(a);
        return peg_optional(a, peg_seq2(a, peg_seq2(a, x, s1), oc));
    }
    size_t s2 = peg_space(a), c = peg_literal_c(a, ","), s1 = peg_space(a);
    size_t ids[4] = {x, s1, c, s2};
    return peg_optional(a, ct_fold(a, ids, 4));
}

/* build_json_tools_function_is_key */
static size_t ct_function_is_key(cg_tools *t, const char *args_key, const char *eff_args, const char *id_key,
                                 const char *gen_key)
{
    peg_arena *a = t->a;
    size_t choices = peg_choice(a, NULL, 0);
    for (size_t i = 0; i < t->tools->n; i++) {
        const char *name;
        size_t nlen;
        const json_value *f = ct_func(t->tools->items[i], 0, &name, &nlen);
        if (!f) continue;
        size_t fields[3], nf = 0;
        if (id_key[0]) {
            size_t q2 = peg_literal_c(a, "\"");
            size_t id = chat_peg_tag(a, "tool-id", peg_string_content(a, '"'));
            size_t q1 = peg_literal_c(a, "\"");
            size_t s2 = peg_space(a), colon = peg_literal_c(a, ":"), s1 = peg_space(a);
            size_t key = ct_qlit(a, id_key, strlen(id_key));
            size_t ids[7] = {key, s1, colon, s2, q1, id, q2};
            fields[nf++] = ct_opt_comma(a, peg_atomic(a, ct_fold(a, ids, 7)), 1);
        }
        if (gen_key[0]) {
            size_t v = ct_id_value(a);
            fields[nf++] = ct_opt_comma(a, peg_atomic(a, ct_key_value(a, gen_key, v)), 1);
        }
        size_t args = peg_eps(a);                     /* args_parser = eps() */
        if (!args_key[0]) args = ct_args_schema(t, f, i);
        else {
            size_t ta = ct_args_schema(t, f, i);
            size_t s2 = peg_space(a), colon = peg_literal_c(a, ":"), s1 = peg_space(a);
            size_t key = ct_qlit(a, eff_args, strlen(eff_args));
            size_t ids[5] = {key, s1, colon, s2, ta};
            args = ct_fold(a, ids, 5);
        }
        fields[nf++] = args;
        size_t inner = peg_eps(a);                    /* inner_object = eps() */
        if (!args_key[0] && nf == 1) inner = fields[0];
        else {
            size_t s = peg_space(a);
            inner = peg_seq2(a, peg_literal_c(a, "{"), s);
            for (size_t k = 0; k < nf; k++) {
                inner = peg_seq2(a, inner, fields[k]);
                if (k + 1 < nf) inner = peg_seq2(a, inner, peg_space(a));
            }
            size_t close = peg_literal_c(a, "}");
            size_t s2 = peg_space(a);
            inner = peg_seq2(a, peg_seq2(a, inner, s2), close);
        }
        size_t tc = chat_peg_tag(a, "tool-close", peg_literal_c(a, "}"));
        size_t s4 = peg_space(a);
        size_t s3 = peg_space(a), colon = peg_literal_c(a, ":"), s2 = peg_space(a);
        size_t q2 = peg_literal_c(a, "\"");
        size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
        size_t q1 = peg_literal_c(a, "\"");
        size_t s1 = peg_space(a);
        size_t to = chat_peg_tag(a, "tool-open", peg_literal_c(a, "{"));
        size_t ids[11] = {to, s1, q1, tn, q2, s2, colon, s3, inner, s4, tc};
        size_t body = ct_fold(a, ids, 11);
        char rn[64];
        snprintf(rn, sizeof rn, "tool-%zu", i);
        choices = peg_alt2(a, choices, peg_rule(a, rn, chat_peg_tag(a, "tool", body), 0));
    }
    return choices;
}

/* build_json_tools_flat_keys */
static size_t ct_flat_keys(cg_tools *t, const char *name_key, const char *args_key, const char *id_key,
                           const char *gen_key, const ca_str *order, size_t norder, int openai_wrapper)
{
    peg_arena *a = t->a;
    size_t choices = peg_choice(a, NULL, 0);
    size_t nkp = ct_qlit(a, name_key, strlen(name_key));
    size_t akp = ct_qlit(a, args_key, strlen(args_key));
    for (size_t i = 0; i < t->tools->n; i++) {
        const char *name;
        size_t nlen;
        const json_value *f = ct_func(t->tools->items[i], 0, &name, &nlen);
        if (!f) continue;
        /* name_key + space() + ":" + space() + atomic("\"" + tool_name(name) + "\"") */
        size_t qn = peg_atomic(a, ct_quoted_name(a, name, nlen));
        size_t s2 = peg_space(a), colon = peg_literal_c(a, ":"), s1 = peg_space(a);
        size_t ids[5] = {nkp, s1, colon, s2, qn};
        size_t tname = ct_fold(a, ids, 5);
        size_t ta = ct_args_schema(t, f, i);
        s2 = peg_space(a); colon = peg_literal_c(a, ":"); s1 = peg_space(a);
        size_t ids2[5] = {akp, s1, colon, s2, ta};
        size_t targs = ct_fold(a, ids2, 5);
        size_t idp = peg_eps(a);
        if (id_key[0]) idp = peg_atomic(a, ct_key_value(a, id_key, ct_id_value(a)));
        size_t gidp = peg_eps(a);
        if (gen_key[0]) gidp = peg_atomic(a, ct_key_value(a, gen_key, ct_id_value(a)));
        size_t pp[4];
        const char *pk[4];
        size_t np = 0;
        pp[np] = tname; pk[np++] = name_key;
        pp[np] = targs; pk[np++] = args_key;
        if (id_key[0]) { pp[np] = peg_optional(a, idp); pk[np++] = id_key; }
        if (gen_key[0]) { pp[np] = peg_optional(a, gidp); pk[np++] = gen_key; }
        /* std::sort by position in parameter_order (insertion sort: stable, as GCC's for so few) */
        size_t rank[4];
        for (size_t k = 0; k < np; k++) {
            rank[k] = norder;
            for (size_t o = 0; o < norder; o++)
                if (strlen(pk[k]) == order[o].n && !memcmp(pk[k], order[o].p, order[o].n)) { rank[k] = o; break; }
        }
        for (size_t k = 1; k < np; k++)
            for (size_t m = k; m > 0 && rank[m] < rank[m - 1]; m--) {
                size_t tr = rank[m]; rank[m] = rank[m - 1]; rank[m - 1] = tr;
                size_t tp = pp[m]; pp[m] = pp[m - 1]; pp[m - 1] = tp;
            }
        size_t type_field = peg_eps(a);
        if (openai_wrapper) {
            size_t w[8];
            w[7] = peg_space(a); w[6] = peg_literal_c(a, ","); w[5] = peg_space(a);
            w[4] = peg_literal_c(a, "\"function\""); w[3] = peg_space(a); w[2] = peg_literal_c(a, ":");
            w[1] = peg_space(a); w[0] = peg_literal_c(a, "\"type\"");
            type_field = peg_optional(a, ct_fold(a, w, 8));
        }
        size_t sp = peg_space(a);
        size_t to = chat_peg_tag(a, "tool-open", peg_literal_c(a, "{"));
        size_t body = peg_seq2(a, peg_seq2(a, to, sp), type_field);
        for (size_t k = 0; k < np; k++) {
            body = peg_seq2(a, body, pp[k]);
            if (k + 1 < np) {
                size_t b2 = peg_space(a), c = peg_literal_c(a, ","), b1 = peg_space(a);
                body = peg_seq2(a, peg_seq2(a, peg_seq2(a, body, b1), c), b2);
            }
        }
        size_t tc = chat_peg_tag(a, "tool-close", peg_literal_c(a, "}"));
        size_t s = peg_space(a);
        body = peg_seq2(a, peg_seq2(a, body, s), tc);
        char rn[64];
        snprintf(rn, sizeof rn, "tool-%zu", i);
        choices = peg_alt2(a, choices, peg_rule(a, rn, chat_peg_tag(a, "tool", body), 0));
    }
    return choices;
}

static int ct_has_dot(const char *s) { return strchr(s, '.') != NULL; }

size_t chat_gen_json_tools(cg_tools *t, const ca_str *ss, const ca_str *se, int parallel, int force,
                           const char *name_key, const char *args_key, int array_wrapped, int fun_is_key,
                           const char *id_key, const char *gen_key, const ca_str *order, size_t norder,
                           int openai_wrapper)
{
    peg_arena *a = t->a;
    if (!t->tools || t->tools->type != JSON_ARRAY || !t->tools->n) return peg_eps(a);
    const char *enk = name_key[0] ? name_key : "name", *eak = args_key[0] ? args_key : "arguments";
    size_t choices = peg_eps(a);
    if (fun_is_key) choices = ct_function_is_key(t, args_key, eak, id_key, gen_key);
    else if (ct_has_dot(enk) || ct_has_dot(eak)) {
        snprintf(t->err, t->errlen, "JSON tool calls under nested keys (%s, %s) are not reproduced yet", enk, eak);
        t->unsupported = 1;
        return choices;
    } else choices = ct_flat_keys(t, enk, eak, id_key, gen_key, order, norder, openai_wrapper);
    size_t calls = choices;
    if (parallel) {
        size_t s2 = peg_space(a), c = peg_literal_c(a, ","), s1 = peg_space(a);
        size_t ids[4] = {s1, c, s2, choices};
        calls = peg_seq2(a, calls, peg_zero_or_more(a, ct_fold(a, ids, 4)));
    }
    if (array_wrapped) {
        size_t r = peg_literal_c(a, "]"), s2 = peg_space(a), s1 = peg_space(a), l = peg_literal_c(a, "[");
        size_t ids[5] = {l, s1, calls, s2, r};
        calls = ct_fold(a, ids, 5);
    }
    size_t le = ct_lit(a, se), s2 = peg_space(a), s1 = peg_space(a), ls = ct_lit(a, ss);
    size_t ids[5] = {ls, s1, calls, s2, le};
    size_t section = peg_rule(a, "tool-call", ct_fold(a, ids, 5), 1);
    return force ? section : peg_optional(a, section);
}

/* literal(s) + p, as operator+(std::string, parser): the literal is made after p */
static size_t ct_str_plus(peg_arena *a, const ca_str *s, size_t p)
{
    return peg_seq2(a, peg_literal(a, s->p ? s->p : "", s->n), p);
}

/* p + literal(s), as parser::operator+(std::string) */
static size_t ct_plus_str(peg_arena *a, size_t p, const ca_str *s)
{
    return peg_seq2(a, p, peg_literal(a, s->p ? s->p : "", s->n));
}

/* analyze_tools::build_func_parser */
static size_t ct_func_parser(cg_tools *t, const chat_analysis *an, const char *name, size_t nlen, size_t cid,
                             int have_cid, size_t args, size_t peek)
{
    peg_arena *a = t->a;
    const ca_tool_function_analysis *fn = &an->tools.function;
    /* tool_open(name_prefix + tool_name(literal(name)) + name_suffix) */
    size_t tn = chat_peg_tag(a, "tool-name", peg_literal(a, name, nlen));
    size_t open = ct_plus_str(a, ct_str_plus(a, &fn->name_prefix, tn), &fn->name_suffix);
    open = chat_peg_tag(a, "tool-open", open);
    int matched = 0;
    size_t func = peg_eps(a);
    if (fn->args_separator.n) {
        size_t l = peg_literal(a, fn->args_separator.p, fn->args_separator.n), sp = peg_space(a);
        open = peg_seq2(a, peg_seq2(a, open, sp), l);
    }
    if (fn->name_suffix.n) {
        size_t sp = peg_space(a);
        func = peg_seq2(a, peg_seq2(a, peg_seq2(a, open, cid), sp), args);
        matched = 1;
    } else if (have_cid) {
        size_t sp = peg_space(a);
        size_t at = peg_atomic(a, peg_seq2(a, open, cid));
        func = peg_seq2(a, peg_seq2(a, at, sp), args);
        matched = 1;
    } else if (peek != PEG_INVALID) {
        size_t sp = peg_space(a);
        size_t at = peg_atomic(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, open, cid), sp), peek));
        func = peg_seq2(a, at, args);
        matched = 1;
    } else {
        size_t sp = peg_space(a);
        func = peg_seq2(a, peg_seq2(a, peg_seq2(a, open, cid), sp), args);
    }
    if (fn->close.n) {
        size_t tc = chat_peg_tag(a, "tool-close", peg_literal(a, fn->close.p, fn->close.n));
        size_t sp = peg_space(a);
        func = peg_seq2(a, peg_seq2(a, func, sp), tc);
    } else if (an->tools.format.per_call_end.n) {
        const ca_str *pce = &an->tools.format.per_call_end;
        size_t cp;
        if (an->tools.arguments.tolerate_intertag_whitespace) {
            size_t l = peg_literal(a, pce->p, pce->n), sp = peg_space(a);
            cp = peg_peek(a, peg_seq2(a, sp, l));
        } else {
            cp = peg_peek(a, peg_literal(a, pce->p, pce->n));
        }
        func = peg_seq2(a, func, chat_peg_tag(a, "tool-close", cp));
    } else {
        func = peg_seq2(a, func, chat_peg_tag(a, "tool-close", peg_space(a)));
    }
    if (!matched) func = peg_atomic(a, func);
    return func;
}

size_t chat_gen_tag_json(cg_tools *t, const chat_analysis *an, size_t reasoning_parser, int parallel, int require)
{
    peg_arena *a = t->a;
    const ca_tool_format_analysis *f = &an->tools.format;
    const ca_tool_arguments_analysis *ar = &an->tools.arguments;
    const ca_tool_id_analysis *id = &an->tools.call_id;
    size_t choice = peg_choice(a, NULL, 0);
    for (size_t i = 0; i < t->tools->n; i++) {
        const char *name;
        size_t nlen;
        const json_value *fj = ct_func(t->tools->items[i], 1, &name, &nlen);
        if (!fj) continue;
        int have_cid = 0;
        size_t cid = peg_eps(a);
        if (id->pos == CA_ID_BETWEEN_FUNC_AND_ARGS && id->prefix.n && (id->suffix.n || ar->start.n)) {
            if (id->suffix.n) {
                /* optional(prefix + tool_id(until(suffix))) + suffix */
                size_t ti = chat_peg_tag(a, "tool-id", peg_until(a, id->suffix.p, id->suffix.n));
                cid = ct_plus_str(a, peg_optional(a, ct_str_plus(a, &id->prefix, ti)), &id->suffix);
            } else {
                size_t ti = chat_peg_tag(a, "tool-id", peg_until(a, ar->start.p, ar->start.n));
                cid = peg_optional(a, ct_str_plus(a, &id->prefix, ti));
            }
            have_cid = 1;
        }
        size_t args = ct_args_schema(t, fj, i);
        if (ar->start.n) args = peg_seq2(a, peg_literal(a, ar->start.p, ar->start.n), args);   /* literal made first */
        if (ar->end.n) { size_t l = peg_literal(a, ar->end.p, ar->end.n); args = peg_seq2(a, args, l); }
        size_t peek = ar->start.n ? peg_peek(a, peg_literal(a, ar->start.p, ar->start.n)) : PEG_INVALID;
        size_t fp = ct_func_parser(t, an, name, nlen, cid, have_cid, args, peek);
        char rn[64];
        snprintf(rn, sizeof rn, "tool-%zu", i);
        choice = peg_alt2(a, choice, peg_rule(a, rn, fp, 0));
    }
    size_t calls = peg_eps(a);
    if (f->per_call_start.n) {
        size_t wrapped = ct_plus_str(a, ct_str_plus(a, &f->per_call_start, choice), &f->per_call_end);
        if (parallel) {
            size_t sp = peg_space(a);
            size_t z = peg_zero_or_more(a, peg_seq2(a, sp, wrapped));
            calls = peg_rule(a, "tool-call", peg_seq2(a, wrapped, z), 1);
        } else {
            calls = peg_rule(a, "tool-call", wrapped, 1);
        }
        if (f->section_start.n) {
            size_t tail = f->section_end.n ? peg_literal(a, f->section_end.p, f->section_end.n) : peg_end(a);
            size_t s2 = peg_space(a), s1 = peg_space(a), ls = peg_literal(a, f->section_start.p, f->section_start.n);
            size_t x = peg_seq2(a, peg_seq2(a, peg_seq2(a, peg_seq2(a, ls, s1), calls), s2), tail);
            calls = peg_rule(a, "tool-calls", x, 1);
        }
    } else {
        static const ca_str sep = {", ", 2};
        size_t x;
        if (parallel) {
            size_t z = peg_zero_or_more(a, ct_str_plus(a, &sep, choice));
            x = peg_seq2(a, ct_str_plus(a, &f->section_start, choice), z);
        } else {
            x = ct_str_plus(a, &f->section_start, choice);
        }
        calls = peg_rule(a, "tool-call", ct_plus_str(a, x, &f->section_end), 1);
    }
    if (!require) calls = peg_optional(a, calls);
    const ca_str *tm = f->section_start.n ? &f->section_start : &f->per_call_start;
    size_t before = tm->n ? peg_until(a, tm->p, tm->n) : peg_eps(a);
    size_t e = peg_end(a);
    size_t oc = peg_optional(a, chat_peg_tag(a, "content", before));
    return peg_seq2(a, peg_seq2(a, peg_seq2(a, reasoning_parser, oc), calls), e);
}

/* one argument of build_tool_parser_tag_tagged: rule "tool-<i>-arg-<j>" */
static size_t ct_tagged_arg(cg_tools *t, const chat_analysis *an, const json_value *params, const char *pname,
                            size_t plen, const json_value *pschema, size_t ti, size_t pj, size_t until_suffix)
{
    peg_arena *a = t->a;
    const ca_tool_arguments_analysis *ar = &an->tools.arguments;
    size_t value;
    if (chat_gen_schema_may_be_string(params, pschema)) {
        /* ac(tool_arg_string_value(until_suffix) + tool_arg_close(literal(value_suffix)), value_suffix) */
        size_t close = chat_peg_tag(a, "tool-arg-close", ct_lit(a, &ar->value_suffix));
        size_t sv = chat_peg_tag(a, "tool-arg-string-value", until_suffix);
        peg_str d = {(char *)CT_S(ar->value_suffix), ar->value_suffix.n};
        value = peg_ac(a, peg_seq2(a, sv, close), &d, 1);
    } else {
        /* tool_arg_json_value(schema(json(), "tool-<i>-arg-<j>-schema", doc, node)) + tool_arg_close(...) */
        size_t close = chat_peg_tag(a, "tool-arg-close", ct_lit(a, &ar->value_suffix));
        jbuf sj;
        jbuf_init(&sj);
        if (chat_gen_schema_node_text(params, pschema, &sj, t->err, t->errlen)) t->failed = 1;
        char nm[96];
        snprintf(nm, sizeof nm, "tool-%zu-arg-%zu-schema", ti, pj);
        size_t js = peg_json(a);
        size_t sc = peg_schema(a, js, nm, sj.p ? sj.p : "", sj.len, 0);
        jbuf_free(&sj);
        value = peg_seq2(a, chat_peg_tag(a, "tool-arg-value", sc), close);
    }
    size_t an_ = chat_peg_tag(a, "tool-arg-name", peg_literal(a, pname, plen));
    size_t open = chat_peg_tag(a, "tool-arg-open", ct_plus_str(a, ct_str_plus(a, &ar->name_prefix, an_), &ar->name_suffix));
    size_t arg = chat_peg_tag(a, "tool-arg", peg_seq2(a, ct_plus_str(a, open, &ar->value_prefix), value));
    char rn[80];
    snprintf(rn, sizeof rn, "tool-%zu-arg-%zu", ti, pj);
    return peg_rule(a, rn, arg, 0);
}

static size_t ct_tagged_function(cg_tools *t, const chat_analysis *an, const json_value *fj, const char *name,
                                 size_t nlen, size_t ti, size_t until_suffix)
{
    peg_arena *a = t->a;
    const ca_tool_arguments_analysis *ar = &an->tools.arguments;
    const ca_tool_id_analysis *id = &an->tools.call_id;
    const json_value *params = json_get(fj, "parameters");
    static json_value empty_obj = {JSON_OBJECT, NULL, 0, 0, NULL, NULL, NULL};
    if (!params || params->type == JSON_NULL || (params->type == JSON_OBJECT && params->n == 0)) params = &empty_obj;
    jbuf chk;
    jbuf_init(&chk);
    if (params != &empty_obj && chat_gen_schema_text(params, &chk, t->err, t->errlen)) t->failed = 1;
    jbuf_free(&chk);
    size_t *req = NULL, *opt = NULL, nreq = 0, nopt = 0;
    const json_value *props = chat_gen_schema_is_object(params) ? json_get(params, "properties") : NULL;
    const json_value *rq = json_get(params, "required");
    if (props && props->type == JSON_OBJECT && props->n) {
        req = malloc(props->n * sizeof *req);
        opt = malloc(props->n * sizeof *opt);
        if (!req || !opt) { free(req); free(opt); a->oom = 1; return peg_eps(a); }
        for (size_t j = 0; j < props->n && !t->failed; j++) {
            size_t r = ct_tagged_arg(t, an, params, props->keys[j], props->key_lens[j], props->items[j], ti, j, until_suffix);
            int is_req = 0;
            for (size_t k = 0; rq && rq->type == JSON_ARRAY && k < rq->n; k++)
                if (rq->items[k]->type == JSON_STRING && rq->items[k]->len == props->key_lens[j] &&
                    !memcmp(rq->items[k]->str, props->keys[j], props->key_lens[j])) is_req = 1;
            if (is_req) req[nreq++] = r; else opt[nopt++] = r;
        }
    }
    size_t seq = peg_eps(a);
    for (size_t k = 0; k < nreq; k++) {
        if (k) seq = peg_seq2(a, seq, peg_space(a));
        seq = peg_seq2(a, seq, req[k]);
    }
    if (nopt) {
        size_t any = peg_choice(a, NULL, 0);
        for (size_t k = 0; k < nopt; k++) any = peg_alt2(a, any, opt[k]);
        size_t sp = peg_space(a);
        seq = peg_seq2(a, seq, peg_repeat(a, peg_seq2(a, sp, any), 0, -1));
    }
    size_t has_req = nreq;
    free(req);
    free(opt);
    if (ar->start.n) seq = peg_seq2(a, ct_lit(a, &ar->start), seq);
    if (ar->end.n) seq = ct_plus_str(a, seq, &ar->end);
    size_t cid = peg_eps(a);
    int have_cid = 0;
    if (id->pos == CA_ID_BETWEEN_FUNC_AND_ARGS && id->prefix.n && (id->suffix.n || ar->start.n)) {
        have_cid = 1;
        if (id->suffix.n) {
            /* optional(prefix + tool_id(until(suffix)) + suffix) */
            size_t tid = chat_peg_tag(a, "tool-id", peg_until(a, id->suffix.p, id->suffix.n));
            cid = peg_optional(a, ct_plus_str(a, ct_str_plus(a, &id->prefix, tid), &id->suffix));
        } else {
            size_t tid = chat_peg_tag(a, "tool-id", peg_until(a, ar->start.p, ar->start.n));
            cid = peg_optional(a, ct_str_plus(a, &id->prefix, tid));
        }
    }
    size_t peek = ar->name_prefix.n && has_req ? peg_peek(a, ct_lit(a, &ar->name_prefix)) : PEG_INVALID;
    return ct_func_parser(t, an, name, nlen, cid, have_cid, seq, peek);
}

size_t chat_gen_tag_tagged(cg_tools *t, const chat_analysis *an, size_t reasoning_parser, int parallel, int require)
{
    peg_arena *a = t->a;
    const ca_tool_format_analysis *f = &an->tools.format;
    const ca_str *vs = &an->tools.arguments.value_suffix;
    size_t until_suffix = peg_rule(a, "until-suffix", peg_until(a, CT_S(*vs), vs->n), 0);
    size_t choice = peg_choice(a, NULL, 0);
    for (size_t i = 0; i < t->tools->n && !t->failed; i++) {
        const char *name;
        size_t nlen;
        const json_value *fj = ct_func(t->tools->items[i], 1, &name, &nlen);
        if (!fj) continue;
        size_t fp = ct_tagged_function(t, an, fj, name, nlen, i, until_suffix);
        char rn[64];
        snprintf(rn, sizeof rn, "tool-%zu", i);
        choice = peg_alt2(a, choice, peg_rule(a, rn, fp, 0));
    }
    size_t calls = peg_eps(a);
    if (f->per_call_start.n) {
        /* per_call_start + space() + choice + space() + per_call_end */
        size_t s2 = peg_space(a), s1 = peg_space(a);
        size_t w = ct_plus_str(a, peg_seq2(a, peg_seq2(a, ct_str_plus(a, &f->per_call_start, s1), choice), s2),
                               &f->per_call_end);
        if (parallel) {
            size_t last = peg_space(a);
            size_t sp = peg_space(a);
            size_t z = peg_zero_or_more(a, peg_seq2(a, sp, w));
            calls = peg_rule(a, "tool-call", peg_seq2(a, peg_seq2(a, w, z), last), 1);
        } else {
            size_t sp = peg_space(a);
            calls = peg_rule(a, "tool-call", peg_seq2(a, w, sp), 1);
        }
        if (f->section_start.n) {
            size_t tail;
            if (f->section_end.n) { size_t sp = peg_space(a); tail = peg_seq2(a, ct_lit(a, &f->section_end), sp); }
            else tail = peg_end(a);
            size_t s4 = peg_space(a), s3 = peg_space(a), ls = ct_lit(a, &f->section_start);
            size_t ids[5] = {ls, s3, calls, s4, tail};
            calls = peg_rule(a, "tool-calls", ct_fold(a, ids, 5), 1);
        }
    } else {
        static const ca_str sep = {", ", 2};
        size_t sp2 = peg_space(a);
        size_t x;
        if (parallel) {
            size_t z = peg_zero_or_more(a, ct_str_plus(a, &sep, choice));
            size_t sp1 = peg_space(a);
            x = peg_seq2(a, peg_seq2(a, ct_str_plus(a, &f->section_start, sp1), choice), z);
        } else {
            size_t sp1 = peg_space(a);
            x = peg_seq2(a, ct_str_plus(a, &f->section_start, sp1), choice);
        }
        calls = peg_rule(a, "tool-call", ct_plus_str(a, peg_seq2(a, x, sp2), &f->section_end), 1);
    }
    if (!require) calls = peg_optional(a, calls);
    const ca_str *tm = f->section_start.n ? &f->section_start : &f->per_call_start;
    size_t before = tm->n ? peg_until(a, tm->p, tm->n) : peg_eps(a);
    size_t e = peg_end(a);
    size_t oc = peg_optional(a, chat_peg_tag(a, "content", before));
    return peg_seq2(a, peg_seq2(a, peg_seq2(a, reasoning_parser, oc), calls), e);
}
