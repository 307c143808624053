/*
 * test_chat_analyze.c -- src/text/chat_analyze*.c: the diff split, marker
 * segmentation and PEG rules the analysis relies on, and whole analyses with
 * the values b11669's analyze_template gives for the same templates (measured
 * with testing/kit_chat_analyze.cpp; testing/oracle_chat_analyze.py compares
 * every shared template the same way).
 */
#include "test.h"
#include "text/chat_analyze_int.h"

#include <stdlib.h>

static ca_ctx *ctx_new(jmp_buf *jb) {
    ca_ctx *C = calloc(1, sizeof *C);
    C->on_error = jb;
    return C;
}

static void ctx_free(ca_ctx *C) {
    ca_free_blocks(C->blocks);
    free(C);
}

#define CHECK_CA(got, want) CHECK_STR((got).p, (want))

TEST(chat_analyze_diff_split) {
    jmp_buf jb;
    ca_ctx *C = ctx_new(&jb);
    if (setjmp(jb)) { CHECK(!"threw"); ctx_free(C); return; }
    ca_diff d = ca_diff_split(C, ca_lit("<html><body><div></div></body></html>"),
                              ca_lit("<html><body><p>Something</p></body></html>"));
    CHECK_CA(d.prefix, "<html><body>");
    CHECK_CA(d.suffix, "</body></html>");
    CHECK_CA(d.left, "<div></div>");
    CHECK_CA(d.right, "<p>Something</p>");
    d = ca_diff_split(C, ca_lit("<html><body>Something</body></html>"), ca_lit("<html><body></body></html>"));
    CHECK_CA(d.prefix, "<html><body>");
    CHECK_CA(d.suffix, "</body></html>");
    CHECK_CA(d.left, "Something");
    CHECK_CA(d.right, "");
    /* left a prefix of right: the whole of left is the prefix, even when both end alike */
    d = ca_diff_split(C, ca_lit("<u>hi</u>\n"), ca_lit("<u>hi</u>\n<a>yo</a>\n"));
    CHECK_CA(d.prefix, "<u>hi</u>\n");
    CHECK_CA(d.suffix, "");
    CHECK_CA(d.right, "<a>yo</a>\n");
    /* no difference: all prefix */
    d = ca_diff_split(C, ca_lit("<a>x"), ca_lit("<a>x"));
    CHECK_CA(d.prefix, "<a>x");
    CHECK_CA(d.left, "");
    CHECK_CA(d.right, "");
    /* text on both ends shares its common characters */
    d = ca_diff_split(C, ca_lit("abcXYZdef"), ca_lit("abc123def"));
    CHECK_CA(d.prefix, "abc");
    CHECK_CA(d.suffix, "def");
    CHECK_CA(d.left, "XYZ");
    CHECK_CA(d.right, "123");
    ctx_free(C);
}

TEST(chat_analyze_segments) {
    jmp_buf jb;
    ca_ctx *C = ctx_new(&jb);
    if (setjmp(jb)) { CHECK(!"threw"); ctx_free(C); return; }
    size_t n;
    ca_seg *s = ca_segmentize(C, ca_lit("<|tool_call|>[args]{ are here }[/args]<|tool_call_end|>"), &n);
    CHECK_INT(n, 5);
    if (n == 5) {
        CHECK(s[0].marker && s[1].marker && !s[2].marker && s[3].marker && s[4].marker);
        CHECK_CA(s[1].v, "[args]");
        CHECK_CA(s[2].v, "{ are here }");
        CHECK_CA(s[4].v, "<|tool_call_end|>");
    }
    /* an unclosed marker is text; '[' inside <...> does not open one */
    s = ca_segmentize(C, ca_lit("a<b[c>d<e"), &n);
    CHECK_INT(n, 4);
    if (n == 4) {
        CHECK_CA(s[1].v, "<b[c>");
        CHECK(!s[3].marker);
        CHECK_CA(s[3].v, "<e");
    }
    s = ca_segmentize(C, ca_lit("<a>\n \n<b>"), &n);
    CHECK_INT(ca_prune_ws(C, s, n), 2);
    CHECK_CA(ca_until_common_prefix(C, ca_lit("really want a FUNCTION call"), ca_lit("FUNCTION alpha"), ca_lit("FUNCTION beta")),
             "really want a ");
    CHECK_CA(ca_until_common_prefix(C, ca_lit("<tool_call>"), ca_lit("<something>"), ca_lit("<something_else>")), "");
    CHECK_CA(ca_until_common_prefix(C, ca_lit("some text"), ca_lit("1234"), ca_lit("abcd")), "");
    ctx_free(C);
}

TEST(chat_analyze_strings) {
    jmp_buf jb;
    ca_ctx *C = ctx_new(&jb);
    volatile int threw = 0;
    if (setjmp(jb)) {
        threw = 1;
    } else {
        CHECK_INT(ca_find(ca_lit("abc"), ca_lit(""), 1), 1);      /* std::string::find("") */
        CHECK_INT(ca_find(ca_lit("abc"), ca_lit("c"), 3), (long long)CA_NPOS);
        CHECK_INT(ca_rfind(ca_lit("abcabc"), ca_lit("bc")), 4);
        CHECK_CA(ca_trim(C, ca_lit(" \t\n x y \v\f\r")), "x y");
        CHECK_CA(ca_sub(C, ca_lit("abc"), 3, CA_NPOS), "");
        ca_sub(C, ca_lit("abc"), 4, 1);                            /* past the end: std::out_of_range */
    }
    CHECK(threw);
    ctx_free(C);
}

TEST(chat_analyze_peg) {
    jmp_buf jb;
    ca_ctx *C = ctx_new(&jb);
    if (setjmp(jb)) { CHECK(!"threw"); ctx_free(C); return; }
    ca_peg *P = ca_peg_new(C);
    /* until() stops where the rest of the input is a proper prefix of a delimiter */
    int r = ca_p_seq(P, 2, ca_p_tag(P, "a", ca_p_until(P, 1, ca_lit("abc"))), ca_p_tag(P, "b", ca_p_rest(P)));
    CHECK(ca_peg_parse(P, r, ca_lit("xxab")));
    CHECK_CA(ca_peg_tag(P, "a"), "xx");
    CHECK_CA(ca_peg_tag(P, "b"), "ab");
    /* a failed parse keeps no tags; parse_anywhere finds the first start that matches */
    int m = ca_p_seq(P, 2, ca_p_tag(P, "m", ca_p_marker(P)), ca_p_lit_c(P, "!"));
    CHECK(!ca_peg_parse(P, m, ca_lit("x<a>!")));
    CHECK_CA(ca_peg_tag(P, "m"), "");
    CHECK(ca_peg_parse_anywhere(P, m, ca_lit("x<a>?<b>!")));
    CHECK_CA(ca_peg_tag(P, "m"), "<b>");
    /* tags inside a failed alternative or a negation are dropped; pre-order, last wins */
    int t = ca_p_seq(P, 3, ca_p_not(P, ca_p_tag(P, "x", ca_p_lit_c(P, "q"))),
                     ca_p_choice(P, 2, ca_p_seq(P, 2, ca_p_tag(P, "x", ca_p_lit_c(P, "a")), ca_p_lit_c(P, "z")),
                                 ca_p_tag(P, "y", ca_p_tag(P, "x", ca_p_lit_c(P, "ab")))),
                     ca_p_tag(P, "x", ca_p_lit_c(P, "c")));
    CHECK(ca_peg_parse(P, t, ca_lit("abc")));
    CHECK_CA(ca_peg_tag(P, "x"), "c");
    CHECK_CA(ca_peg_tag(P, "y"), "ab");
    /* any() is one UTF-8 code point and fails on a broken one */
    int a = ca_p_seq(P, 2, ca_p_any(P), ca_p_end(P));
    CHECK(ca_peg_parse(P, a, ca_lit("\xef\xbd\x9c")));
    CHECK(!ca_peg_parse(P, a, ca_lit("\xef\xbd")));
    ctx_free(C);
}

static const tmpl_caps caps_tools = {0, 1, 1, 1, 0, 0, 1, 0, 1};

TEST(chat_analyze_json_calls) {
    /* b11669's analysis of this template (kit_chat_analyze) */
    const char *t =
        "{%- for m in messages -%}{%- if m.tool_calls -%}<calls>[{%- for c in m.tool_calls -%}{\"id\": \"{{ c.id }}\", "
        "\"name\": \"{{ c.function.name }}\", \"arguments\": {{ c.function.arguments | tojson }}}{{ ', ' if not loop.last }}"
        "{%- endfor -%}]</calls>{%- else -%}<|{{ m.role }}|>{{ m.content }}<|end|>{%- endif -%}{%- endfor -%}"
        "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}";
    chat_analysis a;
    char err[256];
    CHECK_INT(chat_analyze(t, strlen(t), &caps_tools, "", "", &a, err, sizeof err), 0);
    CHECK_CA(a.user_start, "<|user|>");
    CHECK_CA(a.assistant_start, "<|assistant|>");
    CHECK_INT(a.reasoning.mode, CA_REASONING_NONE);
    CHECK_INT(a.content.mode, CA_CONTENT_ALWAYS_WRAPPED);
    CHECK_CA(a.content.start, "<|assistant|>");
    CHECK_CA(a.content.end, "<|end|>");
    CHECK_INT(a.tools.format.mode, CA_TOOL_JSON_NATIVE);
    CHECK_CA(a.tools.format.section_start, "<calls>");
    CHECK_CA(a.tools.format.section_end, "</calls>");
    CHECK(a.tools.format.tools_array_wrapped);
    CHECK(!a.tools.format.fun_name_is_key);
    CHECK_CA(a.tools.format.id_field, "id");
    CHECK_INT(a.tools.format.n_parameter_order, 3);
    if (a.tools.format.n_parameter_order == 3) {
        CHECK_CA(a.tools.format.parameter_order[0], "id");
        CHECK_CA(a.tools.format.parameter_order[1], "name");
        CHECK_CA(a.tools.format.parameter_order[2], "arguments");
    }
    CHECK_INT(a.n_preserved_tokens, 4);
    if (a.n_preserved_tokens == 4) CHECK_CA(a.preserved_tokens[3], "</calls>");
    CHECK(a.analysis_complete);
    chat_analysis_free(&a);
}

TEST(chat_analyze_tagged_and_reasoning) {
    const char *t =
        "{%- for m in messages -%}{%- if m.tool_calls -%}{%- for c in m.tool_calls -%}[CALL]{{ c.function.name }}[ID]"
        "{{ c.id }}[ARGS]{%- for k, v in c.function.arguments.items() -%}<arg={{ k }}>{{ v }}</arg>{%- endfor -%}"
        "[/CALL]{%- endfor -%}{%- else -%}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{%- endif -%}{%- endfor -%}";
    chat_analysis a;
    char err[256];
    CHECK_INT(chat_analyze(t, strlen(t), &caps_tools, NULL, NULL, &a, err, sizeof err), 0);
    CHECK_INT(a.tools.format.mode, CA_TOOL_TAG_WITH_TAGGED);
    CHECK_CA(a.tools.format.per_call_start, "[CALL]");
    CHECK_CA(a.tools.format.per_call_end, "[/CALL]");
    CHECK_CA(a.tools.arguments.name_prefix, "<arg=");
    CHECK_CA(a.tools.arguments.name_suffix, ">");
    CHECK_CA(a.tools.arguments.value_suffix, "</arg>");
    CHECK_INT(a.tools.call_id.pos, CA_ID_NONE);
    CHECK_INT(a.n_preserved_tokens, 7);
    chat_analysis_free(&a);

    const char *r = "{%- for m in messages -%}<{{ m.role }}>{%- if m.reasoning_content -%}<think>{{ m.reasoning_content }}"
                    "</think>{%- endif -%}{{ m.content }}</{{ m.role }}>{%- endfor -%}{%- if add_generation_prompt -%}"
                    "<assistant>{%- if enable_thinking -%}<think>{%- endif -%}{%- endif -%}";
    tmpl_caps c = {0, 0, 1, 0, 1, 0, 1, 0, 0};
    CHECK_INT(chat_analyze(r, strlen(r), &c, NULL, NULL, &a, err, sizeof err), 0);
    CHECK_INT(a.reasoning.mode, CA_REASONING_TAG_BASED);
    CHECK_CA(a.reasoning.start, "<think>");
    CHECK_CA(a.reasoning.end, "</think>");
    CHECK_INT(a.content.mode, CA_CONTENT_PLAIN);
    CHECK_INT(a.tools.format.mode, CA_TOOL_NONE);
    CHECK_CA(a.user_start, "<user>");
    CHECK_CA(a.assistant_start, "<assistant>");
    jbuf j;
    jbuf_init(&j);
    chat_analysis_json(&a, CA_SPEC_NONE, &j);
    CHECK(j.p && strstr(j.p, "\"reasoning\":{\"mode\":\"TAG_BASED\",\"start\":\"<think>\",\"end\":\"</think>\"}"));
    CHECK(j.p && strstr(j.p, ",\"specialized\":\"none\","));
    jbuf_free(&j);
    chat_analysis_free(&a);
}

TEST(chat_analyze_refusals) {
    chat_analysis a;
    char err[256];
    /* b11669 throws: the JSON tool call does not parse */
    const char *t = "{%- for m in messages -%}{%- if m.tool_calls -%}<tc>{\"name\": \"{{ m.tool_calls[0].function.name }}\", "
                    "oops}</tc>{%- else -%}[{{ m.role }}]{{ m.content }}{%- endif -%}{%- endfor -%}";
    CHECK_INT(chat_analyze(t, strlen(t), &caps_tools, "", "", &a, err, sizeof err), -1);
    CHECK(strstr(err, "does not parse") != NULL);
    CHECK(a.preserved_tokens == NULL && a.mem_ == NULL);
    /* b11669 throws std::out_of_range: no '{' before the name */
    t = "{%- for m in messages -%}{%- if m.tool_calls -%}<tc>name: \"{{ m.tool_calls[0].function.name }}\"</tc>"
        "{%- else -%}[{{ m.role }}]{{ m.content }}{%- endif -%}{%- endfor -%}";
    CHECK_INT(chat_analyze(t, strlen(t), &caps_tools, "", "", &a, err, sizeof err), -1);
    CHECK(strstr(err, "basic_string::substr") != NULL);
    /* a template that raises on every probe: every step skipped, the defaults */
    t = "{{ raise_exception('no') }}";
    CHECK_INT(chat_analyze(t, strlen(t), &caps_tools, "", "", &a, err, sizeof err), 0);
    CHECK_INT(a.tools.format.mode, CA_TOOL_NONE);
    CHECK_CA(a.tools.format.function_field, "function");
    CHECK_INT(a.n_preserved_tokens, 0);
    chat_analysis_free(&a);
    /* renders that would make the matcher cubic are refused, not analysed for hours */
    size_t n = 60000;
    char *big = malloc(n + 200);
    strcpy(big, "{% for m in messages %}{% if m.tool_calls %}");
    size_t k = strlen(big);
    memset(big + k, '<', n);
    strcpy(big + k + n, "{{ m.tool_calls[0].function.name }}{% else %}{{ m.content }}{% endif %}{% endfor %}");
    CHECK_INT(chat_analyze(big, strlen(big), &caps_tools, "", "", &a, err, sizeof err), -1);
    CHECK(strstr(err, "too large to analyse") != NULL);
    free(big);
}

TEST(chat_analyze_specialized) {
    CHECK_INT(chat_specialized("x <|channel|> y", 15), CA_SPEC_GPT_OSS);
    CHECK_STR(chat_specialized_name(CA_SPEC_GPT_OSS), "gpt_oss");
    /* Ministral's test comes first, and [CALL_ID] rules it out */
    const char *m = "[SYSTEM_PROMPT][TOOL_CALLS][ARGS]<|channel|>";
    CHECK_INT(chat_specialized(m, strlen(m)), CA_SPEC_MINISTRAL_3);
    m = "[SYSTEM_PROMPT][TOOL_CALLS][ARGS][CALL_ID]";
    CHECK_INT(chat_specialized(m, strlen(m)), CA_SPEC_NONE);
    m = "'<|tool_call>call:'";
    CHECK_INT(chat_specialized(m, strlen(m)), CA_SPEC_GEMMA4_OUTDATED);
    m = "<tool_call><function=<parameter=";
    CHECK_INT(chat_specialized(m, strlen(m)), CA_SPEC_QWEN3_CODER);
    m = "<tool_call><function=<parameter='<tool_call><function=' ~ tool_call.name ~ '>'";
    CHECK_INT(chat_specialized(m, strlen(m)), CA_SPEC_NONE);
    /* the lexer's CR -> LF happens before the tests */
    m = "List of tools: [\r";
    CHECK_INT(chat_specialized(m, strlen(m)), CA_SPEC_LFM2_5);
    CHECK_STR(chat_specialized_name(CA_SPEC_LFM2_5), "lfm2_5");
    CHECK_STR(chat_reasoning_mode_name(CA_REASONING_TOOLS_ONLY), "TOOLS_ONLY");
    CHECK_STR(chat_content_mode_name(CA_CONTENT_WRAPPED_WITH_REASONING), "WRAPPED_WITH_REASONING");
    CHECK_STR(chat_tool_format_name(CA_TOOL_TAG_WITH_JSON), "TAG_WITH_JSON");
    CHECK_STR(chat_call_id_position_name(CA_ID_BETWEEN_FUNC_AND_ARGS), "BETWEEN_FUNC_AND_ARGS");
}
