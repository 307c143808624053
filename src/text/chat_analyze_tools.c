/*
 * chat_analyze_tools.c -- the tool-call phase of b11669's template analysis
 * (analyze_tools in common/chat-diff-analyzer.cpp): where a tool call goes in
 * the rendered history, whether it is JSON or tags, the section / per-call /
 * function-name / argument / call-id markers. Runs only for a template whose
 * caps say it renders tool_calls.
 */
#include "text/chat_analyze_int.h"

#include <stdlib.h>
#include <string.h>

#define S(x) ca_lit(x)

static const ca_params cat_one_call = {CONV(M_CALLS(TC_FIRST)), 1, 0, 1};
static const ca_params cat_no_call = {CONV(M_ASST), 1, 0, 1};

/* ------------------------------------------------------------ JSON native */

/* value.dump() contains needle (an identifier: no escaping can split it) */
static int cat_dump_has(const json_value *v, const char *needle) {
    ca_str nd = ca_lit(needle);
    switch (v->type) {
    case JSON_STRING:
    case JSON_NUMBER:
        return ca_find((ca_str){v->str, v->len}, nd, 0) != CA_NPOS;
    case JSON_ARRAY:
    case JSON_OBJECT:
        for (size_t i = 0; i < v->n; i++) {
            if (v->type == JSON_OBJECT && ca_find((ca_str){v->keys[i], v->key_lens[i]}, nd, 0) != CA_NPOS) return 1;
            if (cat_dump_has(v->items[i], needle)) return 1;
        }
        return 0;
    default:
        return 0;
    }
}

static ca_str cat_field(ca_ctx *C, ca_str prefix, const char *key, size_t kn) {
    ca_str k = ca_s(C, key, kn);
    if (!prefix.n) return k;
    return ca_cat(C, ca_cat(C, prefix, S(".")), k);
}

static void cat_register(ca_ctx *C, chat_analysis *A, ca_str prefix, const char *key, size_t kn, const json_value *v) {
    ca_tool_format_analysis *f = &A->tools.format;
    int is_str = v->type == JSON_STRING;
    if (is_str && ca_find((ca_str){v->str, v->len}, S("call0000"), 0) != CA_NPOS) f->id_field = cat_field(C, prefix, key, kn);
    else if (is_str && ca_eq((ca_str){v->str, v->len}, S(FUN_FIRST))) f->name_field = cat_field(C, prefix, key, kn);
    else if (cat_dump_has(v, ARG_FIRST)) f->args_field = cat_field(C, prefix, key, kn);
    else if (ca_find((ca_str){key, kn}, S("id"), 0) != CA_NPOS) f->gen_id_field = cat_field(C, prefix, key, kn);
}

static void cat_json_native(ca_ctx *C, chat_analysis *A, ca_str hay) {
    ca_tool_format_analysis *f = &A->tools.format;
    /* int json_start = find_first_of('{'), json_end = find_last_of('}'), as b11669 keeps them */
    size_t fs = ca_find_c(hay, '{', 0), ls = CA_NPOS;
    for (size_t i = hay.n; i-- > 0;)
        if (hay.p[i] == '}') { ls = i; break; }
    int js = (int)fs, je = (int)ls;
    ca_str cut = ca_sub(C, hay, (size_t)js, (size_t)(je - js + 1));
    char perr[200];
    json_value *cs = json_parse(cut.p, cut.n, perr, sizeof perr);
    if (!cs) ca_throw(C, "the template's JSON tool call does not parse: %s", perr);
    if (cs->type == JSON_OBJECT) {
        for (size_t i = 0; i < cs->n; i++) {
            const char *k = cs->keys[i];
            size_t kn = cs->key_lens[i];
            const json_value *v = cs->items[i];
            if (ca_eq((ca_str){k, kn}, S(FUN_FIRST))) {
                f->fun_name_is_key = 1;
                f->name_field = S("");
                f->args_field = S("");
                continue;
            }
            if (v->type == JSON_OBJECT && !cat_dump_has(v, ARG_FIRST)) {
                ca_str key = ca_s(C, k, kn);
                f->function_field = key;
                for (size_t j = 0; j < v->n; j++) cat_register(C, A, key, v->keys[j], v->key_lens[j], v->items[j]);
            }
            cat_register(C, A, S(""), k, kn, v);
        }
    }
    json_free(cs);
    ca_peg *P = ca_peg_new(C);
    int root = ca_p_seq(P, 3, ca_p_tag(P, "pre", ca_p_seq(P, 2, ca_p_lit_c(P, "["), ca_p_space(P))), ca_p_lit(P, cut),
                        ca_p_tag(P, "post", ca_p_seq(P, 2, ca_p_space(P), ca_p_lit_c(P, "]"))));
    if (ca_peg_parse_anywhere(P, root, hay)) {
        f->tools_array_wrapped = 1;
        js -= (int)ca_peg_tag(P, "pre").n;
        je += (int)ca_peg_tag(P, "post").n;
    }
    je++;
    /* located_params: (position of the field's name in the haystack, name), sorted */
    ca_str fields[4] = {f->name_field, f->args_field, f->id_field, f->gen_id_field};
    size_t pos[4];
    ca_str names[4];
    size_t n = 0;
    for (int i = 0; i < 4; i++)
        if (fields[i].n) {
            pos[n] = ca_find(hay, fields[i], 0);
            names[n++] = fields[i];
        }
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0; j--) {
            size_t m = names[j - 1].n < names[j].n ? names[j - 1].n : names[j].n;
            int c = memcmp(names[j - 1].p, names[j].p, m);
            int gt = pos[j - 1] > pos[j] || (pos[j - 1] == pos[j] && (c > 0 || (c == 0 && names[j - 1].n > names[j].n)));
            if (!gt) break;
            size_t tp = pos[j]; pos[j] = pos[j - 1]; pos[j - 1] = tp;
            ca_str tn = names[j]; names[j] = names[j - 1]; names[j - 1] = tn;
        }
    if (n) {
        f->parameter_order = ca_alloc(C, n * sizeof *f->parameter_order);
        memcpy(f->parameter_order, names, n * sizeof *names);
        f->n_parameter_order = n;
    }
    f->section_start = ca_trim_leading(C, ca_sub(C, hay, 0, (size_t)js));
    f->section_end = ca_trim(C, ca_sub(C, hay, (size_t)je, CA_NPOS));
    if (f->tools_array_wrapped && ca_eq_c(f->section_end, "]")) f->section_end = S("");
}

static void cat_json_parallel(ca_ctx *C, chat_analysis *A) {
    ca_tool_format_analysis *f = &A->tools.format;
    ca_cmp c = ca_compare(C, &cat_one_call, CONV(M_CALLS(TC_FIRST "," TC_SECOND)), -1);
    if (!c.ok) return;
    if (f->section_start.n && ca_find(c.diff.right, f->section_start, 0) != CA_NPOS) {
        f->per_call_start = f->section_start;
        f->per_call_end = f->section_end;
        f->section_start = f->section_end = S("");
    }
}

/* ------------------------------------------------------------ tagged */

static void cat_non_json(ca_ctx *C, chat_analysis *A, ca_str hay) {
    ca_tool_format_analysis *f = &A->tools.format;
    ca_str fun = S(FUN_FIRST);
    ca_peg *P = ca_peg_new(C);
    int lt = ca_p_seq(P, 4, ca_p_tag(P, "fun_pre", ca_p_seq(P, 2, ca_p_lit_c(P, "<"), ca_p_until(P, 2, S(">"), fun))),
                      ca_p_lit(P, fun),
                      ca_p_tag(P, "fun_post", ca_p_seq(P, 3, ca_p_not(P, ca_p_seq(P, 2, ca_p_space(P), ca_p_lit_c(P, "<"))),
                                                      ca_p_until(P, 1, S(">")), ca_p_lit_c(P, ">"))),
                      ca_p_space(P));
    int sq = ca_p_seq(P, 3, ca_p_tag(P, "fun_pre", ca_p_seq(P, 2, ca_p_lit_c(P, "["), ca_p_until(P, 2, S("]"), fun))),
                      ca_p_lit(P, fun),
                      ca_p_tag(P, "fun_post",
                               ca_p_seq(P, 2,
                                        ca_p_not(P, ca_p_seq(P, 4, ca_p_space(P), ca_p_lit_c(P, "["), ca_p_until(P, 1, S("]")),
                                                             ca_p_lit_c(P, "]"))),
                                        ca_p_space(P))));
    int fm = ca_p_tag(P, "fun_marker", ca_p_choice(P, 2, lt, sq));
    ca_str marker = fun, fun_pre = S("");
    if (ca_peg_parse_anywhere(P, fm, hay)) {
        marker = ca_peg_tag(P, "fun_marker");
        fun_pre = ca_peg_tag(P, "fun_pre");
    }
    ca_peg *Q = ca_peg_new(C);
    int per_tool = ca_p_seq(Q, 5, ca_p_tag(Q, "sec_start", ca_p_seq(Q, 2, ca_p_marker(Q), ca_p_space(Q))),
                            ca_p_tag(Q, "call_start", ca_p_seq(Q, 2, ca_p_marker(Q), ca_p_space(Q))),
                            ca_p_tag(Q, "fun_pre", ca_p_until(Q, 1, marker)), ca_p_lit(Q, marker),
                            ca_p_tag(Q, "rest", ca_p_rest(Q)));
    ca_peg *E = ca_peg_new(C);
    ca_str sec_start, call_start, rest;
    if (ca_peg_parse_anywhere(Q, per_tool, hay)) {
        sec_start = ca_peg_tag(Q, "sec_start");
        call_start = ca_peg_tag(Q, "call_start");
        rest = ca_peg_tag(Q, "rest");
        int dbl = ca_p_seq(E, 3, ca_p_tag(E, "call_end", ca_p_seq(E, 2, ca_p_marker(E), ca_p_space(E))),
                           ca_p_tag(E, "sec_end", ca_p_seq(E, 2, ca_p_marker(E), ca_p_space(E))), ca_p_end(E));
        ca_peg_parse_anywhere(E, dbl, rest);
        A->tools.function.name_prefix = ca_cat(C, fun_pre, A->tools.function.name_prefix);
    } else {
        int sec = ca_p_seq(Q, 3, ca_p_tag(Q, "sec_start", ca_p_seq(Q, 2, ca_p_marker(Q), ca_p_space(Q))), ca_p_lit(Q, marker),
                           ca_p_tag(Q, "rest", ca_p_rest(Q)));
        ca_peg_parse_anywhere(Q, sec, hay);
        sec_start = ca_peg_tag(Q, "sec_start");
        call_start = ca_peg_tag(Q, "call_start");
        rest = ca_peg_tag(Q, "rest");
        int one = ca_p_seq(E, 2, ca_p_tag(E, "sec_end", ca_p_seq(E, 2, ca_p_marker(E), ca_p_space(E))), ca_p_end(E));
        ca_peg_parse_anywhere(E, one, rest);
    }
    f->per_call_start = call_start;
    f->per_call_end = ca_peg_tag(E, "call_end");
    f->section_start = sec_start;
    f->section_end = ca_peg_tag(E, "sec_end");
}

static size_t cat_count(ca_str h, ca_str nd) {
    size_t n = 0;
    for (size_t p = ca_find(h, nd, 0); p != CA_NPOS; p = ca_find(h, nd, p + nd.n)) n++;
    return n;
}

static void cat_per_call_markers(ca_ctx *C, chat_analysis *A) {
    ca_tool_format_analysis *f = &A->tools.format;
    ca_cmp c = ca_compare(C, &cat_one_call, CONV(M_CALLS(TC_FIRST "," TC_SECOND)), -1);
    if (!c.ok) return;
    ca_diff d = ca_diff_split(C, c.diff.suffix, c.diff.right);
    ca_str second = ca_trim_leading(C, d.right);
    if (f->section_start.n && ca_find(second, f->section_start, 0) == 0) {
        f->per_call_start = f->section_start;
        f->per_call_end = f->section_end;
        f->section_start = f->section_end = S("");
    }
    if (f->per_call_end.n) {
        size_t one = cat_count(c.a, f->per_call_end), two = cat_count(c.b, f->per_call_end);
        if (one > 0 && one == two) {
            f->section_end = f->per_call_end;
            f->per_call_end = S("");
        }
    }
}

/* zero_or_more(!marker any): text up to the next marker */
static int cat_text(ca_peg *P) { return ca_p_star(P, ca_p_seq(P, 2, ca_p_not(P, ca_p_marker(P)), ca_p_any(P))); }

/* the last marker and the text after it, to the end */
static int cat_last_marker(ca_peg *P) { return ca_p_seq(P, 3, ca_p_marker(P), cat_text(P), ca_p_end(P)); }

static void cat_function_markers(ca_ctx *C, chat_analysis *A) {
    ca_tool_format_analysis *f = &A->tools.format;
    ca_tool_function_analysis *fn = &A->tools.function;
    ca_cmp c = ca_compare(C, &cat_one_call, CONV(M_CALLS(TC_SECOND)), -1);
    if (!c.ok) return;
    ca_diff d = c.diff;
    if (!ca_has(d.left, FUN_FIRST) || !ca_has(d.right, FUN_SECOND)) return;
    ca_str pm = f->per_call_start.n ? f->per_call_start : f->section_start;
    if (pm.n && ca_rfind(d.prefix, pm) != CA_NPOS) fn->name_prefix = ca_sub(C, d.prefix, ca_rfind(d.prefix, pm) + pm.n, CA_NPOS);
    ca_peg *P = ca_peg_new(C);
    int name = ca_p_seq(P, 3, ca_p_tag(P, "pre", ca_p_until(P, 1, S(FUN_FIRST))), ca_p_lit_c(P, FUN_FIRST),
                        ca_p_tag(P, "post", cat_text(P)));
    if (ca_peg_parse(P, name, d.left)) {
        fn->name_prefix = ca_cat(C, fn->name_prefix, ca_peg_tag(P, "pre"));
        fn->name_suffix = ca_peg_tag(P, "post");
    }
    if (f->mode == CA_TOOL_TAG_WITH_JSON) {
        ca_peg *Q = ca_peg_new(C);
        int non_json = ca_p_choice(Q, 2, ca_p_marker(Q),
                                   ca_p_seq(Q, 3, ca_p_not(Q, ca_p_lit_c(Q, "{")), ca_p_not(Q, ca_p_lit_c(Q, "[")), ca_p_any(Q)));
        int after = ca_p_seq(Q, 2, cat_text(Q), ca_p_marker(Q));
        int root = ca_p_seq(Q, 2, ca_p_tag(Q, "ext", ca_p_star(Q, non_json)), after);
        if (ca_peg_parse(Q, root, d.suffix)) fn->name_suffix = ca_cat(C, fn->name_suffix, ca_peg_tag(Q, "ext"));
    } else {
        ca_peg *Q = ca_peg_new(C);
        int root = ca_p_tag(Q, "ext", cat_text(Q));
        if (ca_peg_parse(Q, root, d.suffix)) {
            ca_str ext = ca_peg_tag(Q, "ext");
            fn->name_suffix = ca_cat(C, fn->name_suffix, ext);
            ca_peg *R = ca_peg_new(C);
            int arg_start = ca_p_seq(R, 3, ca_p_marker(R), ca_p_space(R),
                                     ca_p_choice(R, 2, ca_p_lit_c(R, ARG_FIRST), ca_p_lit_c(R, ARG_SECOND)));
            int sep = ca_p_seq(R, 2, ca_p_tag(R, "sep", ca_p_star(R, ca_p_seq(R, 2, ca_p_not(R, arg_start), ca_p_any(R)))),
                               arg_start);
            if (ca_peg_parse(R, sep, ca_sub(C, d.suffix, ext.n, CA_NPOS))) fn->args_separator = ca_trim(C, ca_peg_tag(R, "sep"));
        }
    }
    ca_str sm = f->per_call_end.n ? f->per_call_end : f->section_end;
    ca_str closer = S("");
    if (!sm.n) {
        ca_cmp nt = ca_compare(C, &cat_one_call, CONV(M_ASST), -1);
        if (nt.ok) closer = ca_sub(C, nt.diff.left, ca_find(nt.diff.left, S("YYYY"), 0) + 4, CA_NPOS);
    } else {
        closer = ca_sub(C, d.suffix, 0, ca_find(d.suffix, sm, 0));
    }
    if (closer.n) {
        ca_peg *Q = ca_peg_new(C);
        if (f->mode == CA_TOOL_TAG_WITH_TAGGED) {
            int root = ca_p_seq(Q, 6, ca_p_until(Q, 1, S("YYYY")), ca_p_lit_c(Q, "YYYY"), ca_p_space(Q), ca_p_marker(Q),
                                ca_p_space(Q), ca_p_tag(Q, "close", ca_p_rest(Q)));
            if (ca_peg_parse(Q, root, closer)) fn->close = ca_peg_tag(Q, "close");
        } else if (f->mode == CA_TOOL_TAG_WITH_JSON) {
            int root = ca_p_seq(Q, 3, ca_p_until(Q, 1, S("YYYY")), ca_p_lit_c(Q, "YYYY"), ca_p_tag(Q, "post_val", ca_p_rest(Q)));
            if (ca_peg_parse(Q, root, closer)) {
                ca_str post = ca_peg_tag(Q, "post_val");
                size_t pos = CA_NPOS;
                for (size_t i = post.n; i-- > 0;)
                    if (post.p[i] == '}' || post.p[i] == ']') { pos = i; break; }
                if (pos != CA_NPOS && pos < post.n - 1) fn->close = ca_trim_leading(C, ca_sub(C, post, pos + 1, CA_NPOS));
            }
        }
    }
    fn->close = ca_trim_leading(C, fn->close);
}

static void cat_argument_names(ca_ctx *C, chat_analysis *A) {
    ca_tool_arguments_analysis *ar = &A->tools.arguments;
    ca_params p = {CONV(M_CALLS(TC_ONE)), 1, 0, 1};
    ca_cmp c = ca_compare(C, &p, CONV(M_CALLS(TC_OTHER_ARG)), -1);
    if (!c.ok) return;
    ca_diff d = c.diff;
    if (!d.left.n || !d.right.n) return;
    ca_peg *L = ca_peg_new(C), *R = ca_peg_new(C);
    int lp = ca_p_seq(L, 3, ca_p_tag(L, "pre", ca_p_until(L, 1, S(ARG_FIRST))), ca_p_lit_c(L, ARG_FIRST),
                      ca_p_tag(L, "suffix", ca_p_until(L, 2, S("\""), S("X"))));
    int rp = ca_p_seq(R, 3, ca_p_tag(R, "pre", ca_p_until(R, 1, S(ARG_SECOND))), ca_p_lit_c(R, ARG_SECOND),
                      ca_p_tag(R, "suffix", ca_p_until(R, 2, S("\""), S("Y"))));
    int lok = ca_peg_parse_anywhere(L, lp, d.left), rok = ca_peg_parse_anywhere(R, rp, d.right);
    if (lok && rok && ca_peg_tag(L, "pre").n && ca_eq(ca_peg_tag(L, "pre"), ca_peg_tag(R, "pre")) &&
        ca_eq(ca_peg_tag(L, "suffix"), ca_peg_tag(R, "suffix"))) {
        ar->name_prefix = ca_peg_tag(L, "pre");
        ar->name_suffix = ca_peg_tag(L, "suffix");
        return;
    }
    size_t fl = strlen(ARG_FIRST), sl = strlen(ARG_SECOND);
    if (!ca_eq(ca_sub(C, d.left, 0, fl), S(ARG_FIRST)) || !ca_eq(ca_sub(C, d.right, 0, sl), S(ARG_SECOND))) return;
    ca_peg *P = ca_peg_new(C);
    int last = cat_last_marker(P);
    int pre = ca_p_seq(P, 2, ca_p_star(P, ca_p_seq(P, 2, ca_p_not(P, last), ca_p_any(P))), ca_p_tag(P, "name_prefix", last));
    ar->name_prefix = ca_peg_parse(P, pre, d.prefix) ? ca_peg_tag(P, "name_prefix") : d.prefix;
    ca_str after = ca_cat(C, ca_sub(C, d.left, fl, CA_NPOS), d.suffix);
    ca_peg *Q = ca_peg_new(C);
    int suf = ca_p_tag(Q, "suffix", ca_p_seq(Q, 3, cat_text(Q), ca_p_marker(Q), ca_p_space(Q)));
    if (ca_peg_parse_anywhere(Q, suf, after)) ar->name_suffix = ca_peg_tag(Q, "suffix");
}

static void cat_argument_values(ca_ctx *C, chat_analysis *A) {
    ca_tool_arguments_analysis *ar = &A->tools.arguments;
    ca_params p = {CONV(M_CALLS(TC_ONE)), 1, 0, 1};
    ca_cmp c = ca_compare(C, &p, CONV(M_CALLS(TC_ONE_OTHER_VAL)), -1);
    if (!c.ok) return;
    ca_diff d = c.diff;
    if (!ca_eq_c(d.left, "XXXX") || !ca_eq_c(d.right, "YYYY")) return;
    ca_str ending = ca_cat(C, S(ARG_FIRST), ar->name_suffix);
    ca_str prefix = d.prefix;
    if (ca_rfind(prefix, ending) != CA_NPOS) prefix = ca_sub(C, prefix, ca_rfind(prefix, ending) + ending.n, CA_NPOS);
    if (prefix.n) {
        ca_peg *P = ca_peg_new(C);
        int last = cat_last_marker(P);
        int root = ca_p_seq(P, 2, ca_p_star(P, ca_p_seq(P, 2, ca_p_not(P, last), ca_p_any(P))), ca_p_tag(P, "val_prefix", last));
        ar->value_prefix = ca_peg_parse(P, root, prefix) ? ca_peg_tag(P, "val_prefix") : prefix;
    }
    ca_str vs = d.suffix;
    const ca_tool_format_analysis *f = &A->tools.format;
    if (A->tools.function.close.n) {
        size_t at = ca_find(vs, A->tools.function.close, 0);
        if (at != CA_NPOS) vs = ca_sub(C, vs, 0, at);
    } else if (f->per_call_end.n || f->section_end.n) {
        ca_str em = f->per_call_end.n ? f->per_call_end : f->section_end;
        size_t at = ca_find(vs, em, 0);
        if (at != CA_NPOS) vs = ca_sub(C, vs, 0, at);
    }
    if (ca_trim(C, vs).n) ar->value_suffix = vs;
}

static void cat_argument_separator(ca_ctx *C, chat_analysis *A) {
    ca_params p = {CONV(M_CALLS(TC_ONE)), 1, 0, 1};
    ca_cmp c = ca_compare(C, &p, CONV(M_CALLS(TC_FIRST)), -1);
    if (!c.ok) return;
    if (c.diff.right.n) A->tools.arguments.separator = ca_until_common_prefix(C, c.diff.right, S(ARG_FIRST), S(ARG_SECOND));
}

/* the first marker of str, or the last one (no tags: "") */
static ca_str cat_marker_in(ca_ctx *C, ca_str str, int last) {
    ca_peg *P = ca_peg_new(C);
    int root;
    if (last) {
        int lm = cat_last_marker(P);
        root = ca_p_seq(P, 2, ca_p_star(P, ca_p_seq(P, 2, ca_p_not(P, lm), ca_p_any(P))), ca_p_tag(P, "m", ca_p_marker(P)));
    } else {
        root = ca_p_tag(P, "m", ca_p_marker(P));
    }
    return ca_peg_parse_anywhere(P, root, str) ? ca_peg_tag(P, "m") : S("");
}

static void cat_call_id(ca_ctx *C, chat_analysis *A) {
    ca_tool_id_analysis *id = &A->tools.call_id;
    ca_cmp c = ca_compare(C, &cat_one_call, CONV(M_CALLS(TC_ALT_ID)), -1);
    if (!c.ok) return;
    ca_diff d = c.diff;
    if (!d.left.n && !d.right.n) return;
    ca_str common = S("call"), fun = S(FUN_FIRST);
    size_t in_pre = ca_rfind(d.prefix, fun), in_suf = ca_find(d.suffix, fun, 0);
    if (in_pre != CA_NPOS && in_suf == CA_NPOS) {
        size_t args_pre = ca_find_c(d.prefix, '{', in_pre), args_suf = ca_find_c(d.suffix, '{', 0);
        if (args_suf != CA_NPOS && (args_pre == CA_NPOS || args_pre > d.prefix.n)) {
            id->pos = CA_ID_BETWEEN_FUNC_AND_ARGS;
            ca_str after = ca_sub(C, d.prefix, in_pre + fun.n, CA_NPOS);
            ca_peg *P = ca_peg_new(C);
            int root = ca_p_seq(P, 3, ca_p_tag(P, "prefix", ca_p_marker(P)),
                                ca_p_star(P, ca_p_seq(P, 3, ca_p_not(P, ca_p_marker(P)), ca_p_not(P, ca_p_lit(P, common)),
                                                      ca_p_any(P))),
                                ca_p_lit(P, common));
            id->prefix = ca_peg_parse_anywhere(P, root, after) ? ca_peg_tag(P, "prefix") : cat_marker_in(C, after, 1);
            ca_peg *Q = ca_peg_new(C);
            int suf = ca_p_seq(Q, 2,
                               ca_p_star(Q, ca_p_seq(Q, 3, ca_p_not(Q, ca_p_marker(Q)), ca_p_not(Q, ca_p_lit_c(Q, "{")),
                                                     ca_p_any(Q))),
                               ca_p_tag(Q, "suffix", ca_p_marker(Q)));
            if (ca_peg_parse_anywhere(Q, suf, d.suffix)) id->suffix = ca_peg_tag(Q, "suffix");
        } else if (args_pre != CA_NPOS) {
            id->pos = CA_ID_POST_ARGS;
            ca_str after = ca_sub(C, d.prefix, args_pre, CA_NPOS);
            size_t close = CA_NPOS;
            for (size_t i = after.n; i-- > 0;)
                if (after.p[i] == '}') { close = i; break; }
            if (close != CA_NPOS) id->prefix = cat_marker_in(C, ca_sub(C, after, close + 1, CA_NPOS), 1);
            id->suffix = cat_marker_in(C, d.suffix, 0);
        }
    } else if (in_suf != CA_NPOS && in_pre == CA_NPOS) {
        id->pos = CA_ID_PRE_FUNC_NAME;
        id->prefix = cat_marker_in(C, d.prefix, 1);
        id->suffix = cat_marker_in(C, ca_sub(C, d.suffix, 0, in_suf), 0);
    }
    if (ca_eq(id->prefix, A->tools.arguments.end)) id->prefix = S("");
    if (ca_eq(id->suffix, A->tools.arguments.start)) id->suffix = S("");
    if (id->pos != CA_ID_NONE && id->suffix.n && ca_find(A->tools.format.per_call_end, id->suffix, 0) == 0)
        A->tools.format.per_call_end = S("");
}

/* ------------------------------------------------------------ the phase */

/* analyze_tool_calls + analyze_tool_call_format */
static void cat_tool_calls(ca_ctx *C, chat_analysis *A) {
    ca_tool_format_analysis *f = &A->tools.format;
    ca_cmp c = ca_compare(C, &cat_no_call, CONV(M_CALLS(TC_FIRST)), -1);
    if (!c.ok || !c.diff.right.n) return;
    ca_str hay = c.diff.right;
    ca_peg *P = ca_peg_new(C);
    int fun_q = ca_p_seq(P, 3, ca_p_choice(P, 2, ca_p_lit_c(P, "{"), ca_p_lit_c(P, ":")), ca_p_space(P),
                         ca_p_choice(P, 1, ca_p_tag(P, "dq", ca_p_seq(P, 3, ca_p_lit_c(P, "\""), ca_p_lit_c(P, FUN_FIRST),
                                                                     ca_p_lit_c(P, "\"")))));
    int arg_q = ca_p_seq(P, 3, ca_p_choice(P, 2, ca_p_lit_c(P, "{"), ca_p_lit_c(P, ":")), ca_p_space(P),
                         ca_p_choice(P, 1, ca_p_tag(P, "dq", ca_p_seq(P, 3, ca_p_lit_c(P, "\""), ca_p_lit_c(P, ARG_FIRST),
                                                                     ca_p_lit_c(P, "\"")))));
    if (ca_peg_parse_anywhere(P, fun_q, hay)) f->mode = CA_TOOL_JSON_NATIVE;
    else if (ca_peg_parse_anywhere(P, arg_q, hay)) f->mode = CA_TOOL_TAG_WITH_JSON;
    else f->mode = CA_TOOL_TAG_WITH_TAGGED;
    ca_str clean = hay;
    if (A->reasoning.start.n) {
        size_t at = ca_find(hay, A->reasoning.start, 0);
        if (at != CA_NPOS) clean = ca_cat(C, ca_sub(C, hay, 0, at), ca_sub(C, hay, at + A->reasoning.start.n, CA_NPOS));
    }
    if (A->reasoning.end.n) {
        size_t at = ca_find(clean, A->reasoning.end, 0);
        if (at != CA_NPOS) clean = ca_cat(C, ca_sub(C, clean, 0, at), ca_sub(C, clean, at + A->reasoning.end.n, CA_NPOS));
    }
    if (f->mode == CA_TOOL_JSON_NATIVE) {
        cat_json_native(C, A, clean);
        if (C->caps.supports_parallel_tool_calls) cat_json_parallel(C, A);
    } else {
        cat_non_json(C, A, clean);
    }
    f->section_end = ca_trim(C, f->section_end);
    f->per_call_end = ca_trim(C, f->per_call_end);
}

void ca_analyze_tools(ca_ctx *C, chat_analysis *A) {
    cat_tool_calls(C, A);
    ca_tool_format mode = A->tools.format.mode;
    if (mode == CA_TOOL_NONE || mode == CA_TOOL_JSON_NATIVE) return;
    if (C->caps.supports_parallel_tool_calls) cat_per_call_markers(C, A);
    cat_function_markers(C, A);
    if (mode == CA_TOOL_TAG_WITH_TAGGED) {
        cat_argument_names(C, A);
        cat_argument_values(C, A);
    }
    cat_argument_separator(C, A);
    /* extract_args_markers only acts on JSON_NATIVE, which never gets here */
    cat_call_id(C, A);
}
