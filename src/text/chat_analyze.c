/*
 * chat_analyze.c -- b11669's differential template analysis
 * (autoparser::autoparser::analyze_template, common/chat-diff-analyzer.cpp)
 * and the specialised-template detection of its common_chat_template
 * constructor. See chat_analyze.h. The phases of reasoning, content and
 * start markers are here, the tool-call phase in chat_analyze_tools.c, the
 * probe renders in chat_analyze_probe.c, the tools (strings, diffs, the
 * tagged PEG matcher) in chat_analyze_util.c.
 */
#include "text/chat_analyze_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(x) ca_lit(x)

/* ------------------------------------------------------------ probes */

static const ca_params caa_base_tools = {CONV(M_ASST), 1, 0, 1};

/* ------------------------------------------------------------ reasoning */

static void caa_reasoning_presence(ca_ctx *C, chat_analysis *A_) {
    ca_params p = {CONV(M_ASST), 0, 0, 1};
    ca_cmp c = ca_compare(C, &p,
                            CONV("{\"role\":\"assistant\",\"content\":\"" ASSISTANT_MSG "\",\"reasoning_content\":\"" THINKING_CONTENT "\"}"),
                            -1);
    if (!c.ok || !c.diff.right.n || !ca_has(c.diff.right, THINKING_CONTENT)) return;
    ca_peg *P = ca_peg_new(C);
    int delim = ca_p_seq(P, 3, ca_p_lit_c(P, THINKING_CONTENT), ca_p_space(P),
                         ca_p_opt(P, ca_p_seq(P, 2, ca_p_tag(P, "post", ca_p_seq(P, 2, ca_p_marker(P), ca_p_space(P))),
                                              ca_p_rest(P))));
    int wrapped = ca_p_seq(P, 4, ca_p_tag(P, "pre", ca_p_seq(P, 2, ca_p_marker(P), ca_p_space(P))),
                           ca_p_lit_c(P, THINKING_CONTENT),
                           ca_p_tag(P, "post", ca_p_seq(P, 3, ca_p_space(P), ca_p_marker(P), ca_p_space(P))), ca_p_rest(P));
    int ok = ca_peg_parse_anywhere(P, wrapped, c.b);
    if (!ok) ok = ca_peg_parse_anywhere(P, delim, c.b);
    if (!ok) return;
    ca_str pre = ca_peg_tag(P, "pre"), post = ca_peg_tag(P, "post");
    if (pre.n && post.n) {
        A_->reasoning.mode = CA_REASONING_TAG_BASED;
        A_->reasoning.start = pre;
        A_->reasoning.end = post;
    } else if (post.n) {
        A_->reasoning.mode = CA_REASONING_TAG_BASED;
        A_->reasoning.end = post;
    }
}

static void caa_thinking_enabled(ca_ctx *C, chat_analysis *A_) {
    ca_params p = {"[" M_USER "]", 0, 1, 0};
    ca_cmp c = ca_compare(C, &p, NULL, 1);
    if (!c.ok) return;
    ca_str lt = ca_trim(C, c.diff.left), rt = ca_trim(C, c.diff.right);
    if (!lt.n && c.diff.right.n) {
        if (rt.n && ca_ends_with(c.b, rt) && !A_->reasoning.start.n) {
            A_->reasoning.start = c.diff.right;
            A_->reasoning.mode = CA_REASONING_TAG_BASED;
        }
    } else if (!rt.n && c.diff.left.n) {
        if (lt.n && ca_ends_with(c.a, lt) && !A_->reasoning.end.n) {
            size_t n;
            ca_seg *seg = ca_segmentize(C, c.a, &n);
            n = ca_prune_ws(C, seg, n);
            if (n >= 2 && ca_eq(seg[n - 1].v, lt) && seg[n - 2].marker) A_->reasoning.start = seg[n - 2].v;
            A_->reasoning.end = c.diff.left;
            A_->reasoning.mode = CA_REASONING_TAG_BASED;
        }
    } else if (lt.n && rt.n) {
        /* tail anchoring: one output's last 64 bytes found in the other, followed by two markers */
        for (int dir = 0; dir < 2; dir++) {
            ca_str base = dir == 0 ? c.b : c.a, ext = dir == 0 ? c.a : c.b;
            size_t len = base.n < 64 ? base.n : 64;
            ca_str anchor = {base.p + base.n - len, len};
            size_t pos = ca_rfind(ext, anchor);
            if (pos == CA_NPOS || pos + len >= ext.n) continue;
            ca_str extra = ca_trim(C, ca_sub(C, ext, pos + len, CA_NPOS));
            if (!extra.n) continue;
            size_t n;
            ca_seg *seg = ca_segmentize(C, extra, &n);
            n = ca_prune_ws(C, seg, n);
            if (n == 2 && seg[0].marker && seg[1].marker) {
                if (!A_->reasoning.start.n) A_->reasoning.start = seg[0].v;
                if (!A_->reasoning.end.n) A_->reasoning.end = seg[1].v;
                A_->reasoning.mode = CA_REASONING_TAG_BASED;
                break;
            }
        }
    }
    if (A_->reasoning.mode == CA_REASONING_NONE && !A_->reasoning.start.n && A_->reasoning.end.n) A_->reasoning.mode = CA_REASONING_TAG_BASED;
}

static void caa_reasoning_scope(ca_ctx *C, chat_analysis *A_) {
    ca_params p = {CONV("{\"role\":\"assistant\",\"content\":\"" ASSISTANT_MSG "\",\"reasoning_content\":\"" THINKING_CONTENT "\"}"),
                    1, 0, 1};
    ca_cmp c = ca_compare(C, &p,
                            CONV("{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"" THINKING_CONTENT
                                 "\",\"tool_calls\":[" TC(FUN_FIRST, "{\"" ARG_FIRST "\":\"VVVV\",\"" ARG_SECOND "\":\"XXXX\"}",
                                                          CALL_ID_001) "]}"),
                            -1);
    if (!c.ok) return;
    if (ca_has(c.a, THINKING_CONTENT) || !ca_has(c.b, THINKING_CONTENT)) return;
    A_->reasoning.mode = CA_REASONING_TOOLS_ONLY;
    ca_peg *P = ca_peg_new(C);
    int wrapped = ca_p_seq(P, 4, ca_p_tag(P, "pre", ca_p_seq(P, 2, ca_p_marker(P), ca_p_space(P))),
                           ca_p_lit_c(P, THINKING_CONTENT), ca_p_space(P),
                           ca_p_tag(P, "post", ca_p_seq(P, 2, ca_p_marker(P), ca_p_space(P))));
    if (ca_peg_parse_anywhere(P, wrapped, c.b)) {
        A_->reasoning.start = ca_peg_tag(P, "pre");
        A_->reasoning.end = ca_peg_tag(P, "post");
        return;
    }
    int delim = ca_p_seq(P, 3, ca_p_lit_c(P, THINKING_CONTENT), ca_p_space(P),
                         ca_p_opt(P, ca_p_tag(P, "post", ca_p_seq(P, 2, ca_p_marker(P), ca_p_space(P)))));
    if (ca_peg_parse_anywhere(P, delim, c.b)) A_->reasoning.end = ca_peg_tag(P, "post");
    else A_->reasoning.mode = CA_REASONING_NONE;
}

/* ------------------------------------------------------------ content */

static void caa_content(ca_ctx *C, chat_analysis *A) {
    const chat_analysis *A_ = A;
    ca_cmp ct = ca_compare(C, &caa_base_tools, CONV(M_CALLS(TC("test_func", "{\"arg1\":\"value1\"}", CALL_ID_001))), -1);
    ca_cmp cr = ca_compare(C, &caa_base_tools,
                             CONV("{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"" THINKING_CONTENT "\"}"), -1);
    if (!ct.ok || !cr.ok) return;
    ca_str response = S(ASSISTANT_MSG);
    int plain = 0;
    if (ca_eq(ca_trim(C, ct.diff.left), response)) {
        ca_peg *P = ca_peg_new(C);
        int root = ca_p_seq(P, 6, ca_p_space(P), ca_p_lit(P, cr.diff.left), ca_p_space(P), ca_p_opt(P, ca_p_marker(P)),
                            ca_p_space(P), ca_p_end(P));
        if (ca_peg_parse(P, root, cr.diff.left)) {
            A->content.mode = CA_CONTENT_PLAIN;
            plain = 1;
        } else if (A_->reasoning.mode != CA_REASONING_NONE && A_->reasoning.end.n) {
            int post = ca_p_seq(P, 3, ca_p_lit(P, A_->reasoning.end), ca_p_space(P), ca_p_lit(P, response));
            if (ca_peg_parse_anywhere(P, post, cr.diff.left)) {
                A->content.mode = CA_CONTENT_PLAIN;
                plain = 1;
            }
        }
    }
    if (!plain) {
        ca_str rdiff = cr.diff.left;
        if (A_->reasoning.end.n) {
            size_t at = ca_find(rdiff, A_->reasoning.end, 0);
            if (at != CA_NPOS) rdiff = ca_sub(C, rdiff, at + A_->reasoning.end.n, CA_NPOS);
        }
        ca_str pure = rdiff.n > ct.diff.left.n ? rdiff : ct.diff.left;
        ca_peg *P = ca_peg_new(C);
        int root = ca_p_seq(P, 5, ca_p_tag(P, "pre", ca_p_seq(P, 2, ca_p_marker(P), ca_p_space(P))), ca_p_lit(P, response),
                            ca_p_space(P), ca_p_tag(P, "post", ca_p_seq(P, 2, ca_p_marker(P), ca_p_space(P))), ca_p_rest(P));
        ca_peg_parse_anywhere(P, root, pure);
        A->content.start = ca_peg_tag(P, "pre");
        A->content.end = ca_peg_tag(P, "post");
    }
    if (A->content.start.n || A->content.end.n) A->content.mode = CA_CONTENT_ALWAYS_WRAPPED;
}

/* ------------------------------------------------------------ start markers */

static ca_str caa_assistant_start(ca_ctx *C, const chat_analysis *A) {
    ca_params p = {"[" M_USER "]", 0, 0, 1};
    ca_cmp c = ca_compare(C, &p, CONV(M_ASST), -1);
    if (!c.ok) return S("");
    ca_str m = c.diff.right;
    ca_str pre = ca_sub(C, m, 0, ca_find(m, S(ASSISTANT_MSG), 0));
    if (A->reasoning.start.n) {
        ca_str t = ca_trim(C, A->reasoning.start);
        size_t at = ca_find(pre, t, 0);
        if (at != CA_NPOS) pre = ca_sub(C, pre, 0, at);
    }
    if (A->reasoning.end.n) {
        ca_str t = ca_trim(C, A->reasoning.end);
        size_t at = ca_find(pre, t, 0);
        if (at != CA_NPOS) pre = ca_sub(C, pre, 0, at);
    }
    return ca_trim(C, pre);
}

static ca_str caa_user_start(ca_ctx *C) {
    ca_params p = {"[]", 0, 0, 1};
    ca_cmp c = ca_compare(C, &p, "[" M_USER "]", -1);
    if (!c.ok) {
        p.messages = "[" M_USER_TWO "," M_ASST "]";
        c = ca_compare(C, &p, "[" M_USER_TWO "," M_ASST "," M_USER "]", -1);
        if (!c.ok) return S("");
    }
    ca_str m = c.diff.right;
    size_t at = ca_find(m, S(ASSISTANT_MSG), 0);
    if (at != CA_NPOS) m = ca_sub(C, m, at + strlen(ASSISTANT_MSG), CA_NPOS);
    ca_str cand = ca_sub(C, m, 0, ca_find(m, S(USER_MSG), 0));
    size_t n;
    ca_seg *seg = ca_segmentize(C, cand, &n);
    ca_str res = S("");
    int seen_marker = 0;
    for (size_t i = 0; i < n; i++) {
        if (seg[i].marker && !seen_marker) {
            char *low = ca_alloc(C, seg[i].v.n + 1);
            for (size_t k = 0; k < seg[i].v.n; k++) {
                unsigned char ch = (unsigned char)seg[i].v.p[k];
                low[k] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
            }
            low[seg[i].v.n] = 0;
            ca_str l = {low, seg[i].v.n};
            if (ca_has(l, "end") || ca_has(l, "close")) continue;
        }
        if (!seg[i].marker && !seen_marker && !ca_trim(C, seg[i].v).n) continue;
        seen_marker |= seg[i].marker;
        res = ca_cat(C, res, seg[i].v);
    }
    return ca_trim(C, res);
}

/* ------------------------------------------------------------ the whole */

static void caa_preserve(ca_ctx *C, chat_analysis *A, ca_str tok, int trim_dedup) {
    if (trim_dedup) {
        tok = ca_trim(C, tok);
        if (!tok.n) return;
        for (size_t i = 0; i < A->n_preserved_tokens; i++)
            if (ca_eq(A->preserved_tokens[i], tok)) return;
    }
    ca_str *d = ca_alloc(C, (A->n_preserved_tokens + 1) * sizeof *d);
    if (A->n_preserved_tokens) memcpy(d, A->preserved_tokens, A->n_preserved_tokens * sizeof *d);
    d[A->n_preserved_tokens++] = tok;
    A->preserved_tokens = d;
}

static void caa_collect_preserved(ca_ctx *C, chat_analysis *A) {
    const ca_tool_format_analysis *f = &A->tools.format;
    const ca_tool_function_analysis *fn = &A->tools.function;
    const ca_tool_arguments_analysis *ar = &A->tools.arguments;
    ca_str all[] = {A->reasoning.start, A->reasoning.end, A->content.start, A->content.end, f->section_start,
                    f->section_end, f->per_call_start, f->per_call_end, fn->name_prefix, fn->name_suffix,
                    fn->args_separator, fn->close, ar->start, ar->end, ar->name_prefix, ar->name_suffix, ar->separator,
                    ar->value_prefix, ar->value_suffix, A->tools.call_id.prefix, A->tools.call_id.suffix};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) caa_preserve(C, A, all[i], 1);
}

static void caa_clear_preserved(chat_analysis *A) { A->n_preserved_tokens = 0; }
#define PRESERVE(s) caa_preserve(C, A, S(s), 0)

/* the workarounds list of chat-diff-analyzer.cpp, in its order */
static void caa_workarounds(ca_ctx *C, chat_analysis *A) {
    ca_str src = {C->tmpl_norm, C->tmpl_norm_len};
    if (ca_has(src, "content.split('</think>')") && !ca_has(src, "reasoning_content") && !ca_has(src, "<SPECIAL_12>") &&
        A->reasoning.mode == CA_REASONING_NONE) {
        A->reasoning.mode = CA_REASONING_TAG_BASED;
        A->reasoning.start = S("<think>");
        A->reasoning.end = S("</think>");
        PRESERVE("<think>");
        PRESERVE("</think>");
    }
    if (ca_has(src, "Write your thoughts between <think></think> and write your response between <response></response>")) {
        A->reasoning.mode = CA_REASONING_TAG_BASED;
        A->reasoning.start = S("<think>");
        A->reasoning.end = S("</think>");
        PRESERVE("<think>");
        PRESERVE("</think>");
        A->content.mode = CA_CONTENT_WRAPPED_WITH_REASONING;
        A->content.start = S("<response>");
        A->content.end = S("</response>");
        PRESERVE("<response>");
        PRESERVE("</response>");
    }
    if (ca_has(src, "<|CHATBOT_TOKEN|>") && ca_has(src, "<|END_OF_TURN_TOKEN|>") && !A->content.start.n) {
        A->content.mode = CA_CONTENT_ALWAYS_WRAPPED;
        A->content.start = S("<|CHATBOT_TOKEN|>");
        A->content.end = S("<|END_OF_TURN_TOKEN|>");
        PRESERVE("<|CHATBOT_TOKEN|>");
        PRESERVE("<|END_OF_TURN_TOKEN|>");
        A->user_start = S("<|START_OF_TURN_TOKEN|><|USER_TOKEN|>");
    }
    if (ca_has(src, "set has_code_interpreter = tools | selectattr(\"type\", \"equalto\", \"code_interpreter\") | list | length > 0")) {
        A->content.mode = CA_CONTENT_PLAIN;
        A->content.end = S("");
        A->tools.function.name_prefix = S("");
        A->tools.format.section_start = S("");
        A->tools.format.section_end = S("");
        A->tools.format.per_call_start = S("<function=");
        A->tools.format.per_call_end = S("</function>");
        A->tools.function.close = S("");
        caa_clear_preserved(A);
        PRESERVE("<|eot_id|>");
        PRESERVE("<|eom_id|>");
        PRESERVE("<function=");
        PRESERVE(">");
        PRESERVE("</function>");
    }
    if (ca_has(src, "{{'<\xef\xbd\x9c" "Assistant\xef\xbd\x9c><\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>"
                    "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>' + tool['type'] + '<\xef\xbd\x9ctool\xe2\x96\x81"
                    "sep\xef\xbd\x9c>'")) {
        A->tools.format.section_start = S("<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>");
        A->tools.format.section_end = S("<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd\x9c>");
        A->tools.format.per_call_start = S("<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>function");
        A->tools.function.name_prefix = S("<\xef\xbd\x9ctool\xe2\x96\x81" "sep\xef\xbd\x9c>");
        A->tools.format.per_call_end = S("<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>");
        A->tools.function.close = S("```");
    }
    if (ca_has(src, "<SPECIAL_10>") && ca_has(src, "<SPECIAL_11>") && ca_has(src, "<SPECIAL_12>") && ca_has(src, "<TOOL_RESPONSE>")) {
        A->tools.format.mode = CA_TOOL_JSON_NATIVE;
        A->tools.format.section_start = S("");
        A->tools.format.section_end = S("");
        A->tools.format.per_call_start = S("<TOOLCALL>");
        A->tools.format.per_call_end = S("</TOOLCALL>");
        A->tools.format.tools_array_wrapped = 1;
        A->content.mode = CA_CONTENT_PLAIN;
        A->content.start = S("");
        A->content.end = S("");
        A->reasoning.mode = CA_REASONING_TAG_BASED;
        A->reasoning.start = S("<think>\n");
        A->reasoning.end = S("</think>");
        A->assistant_start = S("<SPECIAL_11>Assistant");
        A->user_start = S("<SPECIAL_11>User");
        caa_clear_preserved(A);
        PRESERVE("<SPECIAL_11>");
        PRESERVE("</think>");
        PRESERVE("<TOOLCALL>");
        PRESERVE("</TOOLCALL>");
    }
    if (ca_has(src, "{%- set system_prompt = '<|start_header_id|>' + 'system' + '<|end_header_id|>\\n\\n' + message['content'] | trim + "
                    "'\\n' + system_prompt_suffix + '<|eot_id|>' -%}")) {
        A->assistant_start = S("<|start_header_id|>assistant<|end_header_id|>");
        A->user_start = S("<|start_header_id|>user<|end_header_id|>");
    }
    if (ca_has(src, "<|begin|>assistant<|think|><|end|>")) A->assistant_start = S("<|begin|>assistant");
    if (ca_has(src, "if not loop.last and '[BEGIN FINAL RESPONSE]' in asst_text")) {
        A->user_start = S("<|begin_user|>");
        A->assistant_start = S("<|begin_assistant|>");
    }
    if (ca_has(src, "Respond in the format {\"name\": function name") && ca_has(src, "Do not use variables."))
        A->tools.format.openai_wrapper_trigger = 1;
    if (ca_has(src, "laguna_glm_thinking")) {
        A->reasoning.start = ca_trim(C, A->reasoning.start);
        A->reasoning.end = ca_trim(C, A->reasoning.end);
        A->tools.arguments.value_prefix = ca_trim(C, A->tools.arguments.value_prefix);
        A->tools.arguments.value_suffix = ca_trim(C, A->tools.arguments.value_suffix);
        A->tools.arguments.separator = ca_trim(C, A->tools.arguments.separator);
        A->tools.arguments.tolerate_intertag_whitespace = 1;
        ca_str *d = ca_alloc(C, (A->n_additional_stops + 1) * sizeof *d);
        if (A->n_additional_stops) memcpy(d, A->additional_stops, A->n_additional_stops * sizeof *d);
        d[A->n_additional_stops++] = S("</assistant>");
        A->additional_stops = d;
    }
    if (ca_has(src, "Bailing V3 chat template")) {
        A->tools.arguments.value_suffix = ca_trim(C, A->tools.arguments.value_suffix);
        A->tools.arguments.tolerate_intertag_whitespace = 1;
    }
}

static void caa_defaults(chat_analysis *A) {
    ca_str e = S("");
    A->user_start = A->assistant_start = e;
    A->reasoning.start = A->reasoning.end = e;
    A->content.start = A->content.end = e;
    ca_tool_format_analysis *f = &A->tools.format;
    f->section_start = f->section_end = f->per_call_start = f->per_call_end = e;
    f->function_field = S("function");
    f->name_field = S("name");
    f->args_field = S("arguments");
    f->id_field = f->gen_id_field = e;
    ca_tool_function_analysis *fn = &A->tools.function;
    fn->name_prefix = fn->name_suffix = fn->args_separator = fn->close = e;
    ca_tool_arguments_analysis *ar = &A->tools.arguments;
    ar->start = ar->end = ar->name_prefix = ar->name_suffix = ar->value_prefix = ar->value_suffix = ar->separator = e;
    A->tools.call_id.prefix = A->tools.call_id.suffix = e;
}

/* the text as common_chat_template keeps it (jinja::lexer's source) */
static ca_str caa_normalize(ca_ctx *C, const char *t, size_t n) {
    char *d = ca_alloc(C, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i] == '\r') {
            d[k++] = '\n';
            if (i + 1 < n && t[i + 1] == '\n') i++;
        } else {
            d[k++] = t[i];
        }
    }
    if (n && t[n - 1] == '\n') k--;
    d[k] = 0;
    return (ca_str){d, k};
}

int chat_analyze(const char *tmpl, size_t len, const tmpl_caps *caps, const char *bos, const char *eos,
                 chat_analysis *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    ca_ctx C;
    memset(&C, 0, sizeof C);
    jmp_buf jb;
    C.on_error = &jb;
    C.err = err;
    C.errlen = errlen;
    C.tmpl = tmpl;
    C.tmpl_len = len;
    C.bos = bos ? bos : "";
    C.eos = eos ? eos : "";
    C.caps = *caps;
    if (err && errlen) err[0] = 0;
    if (setjmp(jb)) {
        ca_free_blocks(C.blocks);
        memset(out, 0, sizeof *out);
        return -1;
    }
    ca_str norm = caa_normalize(&C, tmpl, len);
    C.tmpl_norm = norm.p;
    C.tmpl_norm_len = norm.n;
    chat_analysis *A = out;
    caa_defaults(A);
    A->jinja_caps = *caps;
    caa_reasoning_presence(&C, A);
    caa_thinking_enabled(&C, A);
    if (caps->supports_tool_calls) caa_reasoning_scope(&C, A);
    caa_content(&C, A);
    if (caps->supports_tool_calls) ca_analyze_tools(&C, A);
    A->assistant_start = caa_assistant_start(&C, A);
    A->user_start = caa_user_start(&C);
    caa_collect_preserved(&C, A);
    caa_workarounds(&C, A);
    A->analysis_complete = 1;
    out->mem_ = C.blocks;
    return 0;
}

void chat_analysis_free(chat_analysis *a) {
    if (!a) return;
    ca_free_blocks(a->mem_);
    memset(a, 0, sizeof *a);
}

/* ------------------------------------------------------------ specialised */

ca_specialized chat_specialized(const char *tmpl, size_t len) {
    ca_ctx C;
    memset(&C, 0, sizeof C);
    jmp_buf jb;
    C.on_error = &jb;
    if (setjmp(jb)) {
        ca_free_blocks(C.blocks);
        return CA_SPEC_NONE;
    }
    ca_str s = caa_normalize(&C, tmpl, len);
    ca_specialized r = CA_SPEC_NONE;
#define H(x) ca_has(s, x)
    if (H("[SYSTEM_PROMPT]") && H("[TOOL_CALLS]") && H("[ARGS]") && !H("[CALL_ID]")) r = CA_SPEC_MINISTRAL_3;
    else if (H("chat_format=llm-jp-harmony-v1")) r = CA_SPEC_LLM_JP_HARMONY;
    else if (H("<|channel|>")) r = CA_SPEC_GPT_OSS;
    else if (H("<atem:function_calls>") && H("<|eom|>")) r = CA_SPEC_MUSE_GLIMMER;
    else if (H(">>>all") && H(">>>${recipient}")) r = CA_SPEC_FUNCTIONARY_V3_2;
    else if (H("<|tool_calls_section_begin|>") && H("<|tool_call_begin|>")) r = CA_SPEC_KIMI_K2;
    else if (H("<|open|>") && H("<|close|>") && H("<|end_of_msg|>")) r = CA_SPEC_KIMI_K3;
    else if (H("<|ifm|im_start|>") && H("<ifm|tool_calls>")) r = CA_SPEC_K2_HORIZON;
    else if (H("<role>ASSISTANT</role>") && H("<arg_key>")) r = CA_SPEC_LING3;
    else if (H("<|START_TEXT|>") && H("<|START_ACTION|>")) r = CA_SPEC_COHERE2MOE;
    else if (H("<|tool_list_start|>") && H("<|tool_list_end|>")) r = CA_SPEC_LFM2;
    else if (H("List of tools: [") && !H("<|tool_list_start|>")) r = CA_SPEC_LFM2_5;
    else if (H("<|role_sep|>") && H("<|message_sep|>") && !H("<|function_call|>")) r = CA_SPEC_GIGACHAT_V3;
    else if (H("]<]minimax[>[") && H("<tool_call>") && H("<invoke name=")) r = CA_SPEC_MINIMAX_M3;
    else if (H("dsml_token") && H("DSML") && (H("function_calls") || H("tool_calls"))) r = CA_SPEC_DEEPSEEK_V3_2;
    else if (H("'<|tool_call>call:'")) r = H("{#- OpenAI Chat Completions:") ? CA_SPEC_GEMMA4 : CA_SPEC_GEMMA4_OUTDATED;
    else if (H("Tool usage guidelines:") && H("<function name=\"") && H("<param name=\"")) r = CA_SPEC_MINICPM5;
    else if (H("[source_lang_code]") && H("[target_lang_code]")) r = CA_SPEC_TRANSLATE_GEMMA;
    else if (H("<tool_call>") && H("<function=") && H("<parameter=") && !H("'<tool_call><function=' ~ tool_call.name ~ '>'"))
        r = CA_SPEC_QWEN3_CODER;
#undef H
    ca_free_blocks(C.blocks);
    return r;
}

const char *chat_specialized_name(ca_specialized s) {
    static const char *const names[] = {
        "none", "ministral_3", "llm_jp_harmony", "gpt_oss", "muse_glimmer", "functionary_v3_2", "kimi_k2",
        "kimi_k3", "k2_horizon", "ling3", "cohere2moe", "lfm2", "lfm2_5", "gigachat_v3", "minimax_m3",
        "deepseek_v3_2", "gemma4", "gemma4_outdated", "minicpm5", "translate_gemma", "qwen3_coder"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "none";
}

/* ------------------------------------------------------------ names, JSON */

const char *chat_reasoning_mode_name(ca_reasoning_mode m) {
    return m == CA_REASONING_TAG_BASED ? "TAG_BASED" : m == CA_REASONING_TOOLS_ONLY ? "TOOLS_ONLY" : "NONE";
}

const char *chat_content_mode_name(ca_content_mode m) {
    return m == CA_CONTENT_ALWAYS_WRAPPED ? "ALWAYS_WRAPPED" : m == CA_CONTENT_WRAPPED_WITH_REASONING ? "WRAPPED_WITH_REASONING" : "PLAIN";
}

const char *chat_tool_format_name(ca_tool_format m) {
    return m == CA_TOOL_JSON_NATIVE ? "JSON_NATIVE" : m == CA_TOOL_TAG_WITH_JSON ? "TAG_WITH_JSON" : m == CA_TOOL_TAG_WITH_TAGGED ? "TAG_WITH_TAGGED" : "NONE";
}

const char *chat_call_id_position_name(ca_call_id_position m) {
    return m == CA_ID_PRE_FUNC_NAME ? "PRE_FUNC_NAME" : m == CA_ID_BETWEEN_FUNC_AND_ARGS ? "BETWEEN_FUNC_AND_ARGS" : m == CA_ID_POST_ARGS ? "POST_ARGS" : "NONE";
}

static void caa_js(jbuf *b, const char *key, ca_str v, int comma) {
    jbuf_printf(b, "%s\"%s\":", comma ? "," : "", key);
    json_put_str(b, v.p, v.n);
}

static void caa_jb(jbuf *b, const char *key, int v) { jbuf_printf(b, ",\"%s\":%s", key, v ? "true" : "false"); }

static void caa_jlist(jbuf *b, const char *key, const ca_str *v, size_t n) {
    jbuf_printf(b, ",\"%s\":[", key);
    for (size_t i = 0; i < n; i++) {
        if (i) jbuf_putc(b, ',');
        json_put_str(b, v[i].p, v[i].n);
    }
    jbuf_putc(b, ']');
}

void chat_analysis_json(const chat_analysis *a, ca_specialized spec, jbuf *b) {
    const tmpl_caps *c = &a->jinja_caps;
    jbuf_printf(b, "{\"caps\":{\"supports_tools\":%s", c->supports_tools ? "true" : "false");
    caa_jb(b, "supports_tool_calls", c->supports_tool_calls);
    caa_jb(b, "supports_system_role", c->supports_system_role);
    caa_jb(b, "supports_parallel_tool_calls", c->supports_parallel_tool_calls);
    caa_jb(b, "supports_preserve_reasoning", c->supports_preserve_reasoning);
    caa_jb(b, "supports_reasoning_effort", c->supports_reasoning_effort);
    caa_jb(b, "supports_string_content", c->supports_string_content);
    caa_jb(b, "supports_typed_content", c->supports_typed_content);
    caa_jb(b, "supports_object_arguments", c->supports_object_arguments);
    jbuf_printf(b, "},\"specialized\":\"%s\"", chat_specialized_name(spec));
    caa_js(b, "user_start", a->user_start, 1);
    caa_js(b, "assistant_start", a->assistant_start, 1);
    jbuf_printf(b, ",\"reasoning\":{\"mode\":\"%s\"", chat_reasoning_mode_name(a->reasoning.mode));
    caa_js(b, "start", a->reasoning.start, 1);
    caa_js(b, "end", a->reasoning.end, 1);
    jbuf_printf(b, "},\"content\":{\"mode\":\"%s\"", chat_content_mode_name(a->content.mode));
    caa_js(b, "start", a->content.start, 1);
    caa_js(b, "end", a->content.end, 1);
    caa_jb(b, "requires_nonnull_content", a->content.requires_nonnull_content);
    const ca_tool_format_analysis *f = &a->tools.format;
    jbuf_printf(b, "},\"tools\":{\"format\":{\"mode\":\"%s\"", chat_tool_format_name(f->mode));
    caa_js(b, "section_start", f->section_start, 1);
    caa_js(b, "section_end", f->section_end, 1);
    caa_js(b, "per_call_start", f->per_call_start, 1);
    caa_js(b, "per_call_end", f->per_call_end, 1);
    caa_jb(b, "fun_name_is_key", f->fun_name_is_key);
    caa_jb(b, "tools_array_wrapped", f->tools_array_wrapped);
    caa_jb(b, "openai_wrapper_trigger", f->openai_wrapper_trigger);
    caa_js(b, "function_field", f->function_field, 1);
    caa_js(b, "name_field", f->name_field, 1);
    caa_js(b, "args_field", f->args_field, 1);
    caa_js(b, "id_field", f->id_field, 1);
    caa_js(b, "gen_id_field", f->gen_id_field, 1);
    caa_jlist(b, "parameter_order", f->parameter_order, f->n_parameter_order);
    const ca_tool_function_analysis *fn = &a->tools.function;
    jbuf_puts(b, "},\"function\":{");
    caa_js(b, "name_prefix", fn->name_prefix, 0);
    caa_js(b, "name_suffix", fn->name_suffix, 1);
    caa_js(b, "args_separator", fn->args_separator, 1);
    caa_js(b, "close", fn->close, 1);
    const ca_tool_arguments_analysis *ar = &a->tools.arguments;
    jbuf_puts(b, "},\"arguments\":{");
    caa_js(b, "start", ar->start, 0);
    caa_js(b, "end", ar->end, 1);
    caa_js(b, "name_prefix", ar->name_prefix, 1);
    caa_js(b, "name_suffix", ar->name_suffix, 1);
    caa_js(b, "value_prefix", ar->value_prefix, 1);
    caa_js(b, "value_suffix", ar->value_suffix, 1);
    caa_js(b, "separator", ar->separator, 1);
    caa_jb(b, "tolerate_intertag_whitespace", ar->tolerate_intertag_whitespace);
    jbuf_printf(b, "},\"call_id\":{\"pos\":\"%s\"", chat_call_id_position_name(a->tools.call_id.pos));
    caa_js(b, "prefix", a->tools.call_id.prefix, 1);
    caa_js(b, "suffix", a->tools.call_id.suffix, 1);
    jbuf_puts(b, "}}");
    caa_jb(b, "analysis_complete", a->analysis_complete);
    caa_jlist(b, "preserved_tokens", a->preserved_tokens, a->n_preserved_tokens);
    caa_jlist(b, "additional_stops", a->additional_stops, a->n_additional_stops);
    jbuf_putc(b, '}');
}
