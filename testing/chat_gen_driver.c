/*
 * chat_gen_driver.c -- bankml's side of testing/oracle_chat_gen.py:
 * chat_specialized, then chat_gen_specialized (src/text/chat_spec*.c) or
 * chat_analyze + chat_gen (src/text/chat_gen.c), and
 * peg_build_grammar of the arena, in the fields testing/kit_chat.cpp prints.
 *
 * Input on stdin: frames "<decimal length>\n<JSON>", each {"template", "caps"
 * (the nine jinja::caps booleans), "bos", "eos", "generation_prompt",
 * "inputs": {"tools", "tool_choice", "parallel_tool_calls",
 * "reasoning_format", "json_schema", "enable_thinking"}}. Output per frame:
 *   "OK <n>\n{"format", "parser", "grammar", "grammar_lazy", "grammar_triggers",
 *     "preserved_tokens", "additional_stops", "supports_thinking",
 *     "thinking_start_tag", "thinking_end_tags", "generation_prompt"}\n"
 *   "UNSUP <n>\n<reason>\n"   chat_gen does not reproduce this yet
 *   "ERR <n>\n<reason>\n"     analysis or generation failed
 * A template chat_specialized names goes to chat_gen_specialized instead of
 * chat_analyze + chat_gen (caps unused).
 */
#include "base/json.h"
#include "sampling/peg_grammar.h"
#include "text/chat_analyze.h"
#include "text/chat_gen.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(const char *tag, const char *p, size_t n) {
    printf("%s %zu\n", tag, n);
    fwrite(p, 1, n, stdout);
    putchar('\n');
    fflush(stdout);
}

static int flag(const json_value *o, const char *k, int dflt) {
    int v = dflt;
    json_is_bool(json_get(o, k), &v);
    return v;
}

static const char *str(const json_value *o, const char *k, const char *dflt) {
    const char *s;
    size_t l;
    return json_as_str(json_get(o, k), &s, &l) ? s : dflt;
}

static void put_list(jbuf *b, const char *key, char **v, size_t n) {
    jbuf_printf(b, ",\"%s\":[", key);
    for (size_t i = 0; i < n; i++) {
        if (i) jbuf_putc(b, ',');
        json_put_cstr(b, v[i]);
    }
    jbuf_putc(b, ']');
}

static void one(const json_value *j) {
    const json_value *t = json_get(j, "template"), *cj = json_get(j, "caps"), *in = json_get(j, "inputs");
    tmpl_caps caps = {flag(cj, "supports_tools", 0), flag(cj, "supports_tool_calls", 0), flag(cj, "supports_system_role", 0),
                      flag(cj, "supports_parallel_tool_calls", 0), flag(cj, "supports_preserve_reasoning", 0),
                      flag(cj, "supports_reasoning_effort", 0), flag(cj, "supports_string_content", 0),
                      flag(cj, "supports_typed_content", 0), flag(cj, "supports_object_arguments", 0)};
    ca_specialized spec = chat_specialized(t->str, t->len);
    char err[512];
    chat_gen_inputs gi;
    memset(&gi, 0, sizeof gi);
    gi.tools = json_get(in, "tools");
    const char *tc = str(in, "tool_choice", "auto");
    gi.tool_choice = !strcmp(tc, "required") ? CHAT_TOOL_CHOICE_REQUIRED : !strcmp(tc, "none") ? CHAT_TOOL_CHOICE_NONE
                                                                                                : CHAT_TOOL_CHOICE_AUTO;
    gi.parallel_tool_calls = flag(in, "parallel_tool_calls", 0);
    const char *rf = str(in, "reasoning_format", "none");
    gi.reasoning_format = !strcmp(rf, "auto") ? CHAT_REASONING_AUTO : !strcmp(rf, "deepseek") ? CHAT_REASONING_DEEPSEEK
                        : !strcmp(rf, "deepseek-legacy") ? CHAT_REASONING_DEEPSEEK_LEGACY : CHAT_REASONING_NONE;
    gi.json_schema = json_get(in, "json_schema");
    const json_value *gp = json_get(j, "generation_prompt");
    gi.generation_prompt = gp ? gp->str : "";
    gi.generation_prompt_len = gp ? gp->len : 0;
    gi.thinking_disabled = !flag(in, "enable_thinking", 1);
    chat_analysis a;
    memset(&a, 0, sizeof a);
    chat_gen_params p;
    int rc;
    if (spec != CA_SPEC_NONE) {
        rc = chat_gen_specialized(spec, t->str, t->len, &gi, &p, err, sizeof err);
    } else {
        if (chat_analyze(t->str, t->len, &caps, str(j, "bos", ""), str(j, "eos", ""), &a, err, sizeof err) != 0) {
            put("ERR", err, strlen(err));
            return;
        }
        rc = chat_gen(&a, &gi, &p, err, sizeof err);
    }
    if (rc != CHAT_GEN_OK) {
        put(rc == CHAT_GEN_UNSUPPORTED ? "UNSUP" : "ERR", err, strlen(err));
        chat_gen_free(&p);
        if (spec == CA_SPEC_NONE) chat_analysis_free(&a);
        return;
    }
    jbuf arena, b;
    jbuf_init(&arena);
    jbuf_init(&b);
    peg_save(&p.arena, &arena);
    jbuf_printf(&b, "{\"format\":\"%s\",\"parser\":", chat_format_name(p.format));
    json_put_str(&b, arena.p ? arena.p : "", arena.len);
    jbuf_puts(&b, ",\"grammar\":");
    char *g = NULL;
    size_t gn = 0;
    if (p.has_grammar && peg_build_grammar(&p.arena, p.grammar_lazy, &g, &gn) == 0) json_put_str(&b, g, gn);
    else json_put_cstr(&b, "");
    free(g);
    jbuf_printf(&b, ",\"grammar_lazy\":%s,\"grammar_triggers\":[", p.grammar_lazy ? "true" : "false");
    for (size_t i = 0; i < p.ntriggers; i++) {
        jbuf_printf(&b, "%s{\"type\":%d,\"value\":", i ? "," : "", p.triggers[i].type);
        json_put_cstr(&b, p.triggers[i].value);
        jbuf_puts(&b, ",\"token\":-1}");
    }
    jbuf_putc(&b, ']');
    put_list(&b, "preserved_tokens", p.preserved_tokens, p.npreserved);
    put_list(&b, "additional_stops", p.additional_stops, p.nstops);
    jbuf_printf(&b, ",\"supports_thinking\":%s,\"thinking_start_tag\":", p.supports_thinking ? "true" : "false");
    json_put_cstr(&b, p.thinking_start_tag);
    put_list(&b, "thinking_end_tags", p.thinking_end_tags, p.nthinking_end_tags);
    jbuf_puts(&b, ",\"generation_prompt\":");
    json_put_str(&b, p.generation_prompt, p.generation_prompt_len);
    jbuf_putc(&b, '}');
    put("OK", b.p, b.len);
    jbuf_free(&b);
    jbuf_free(&arena);
    chat_gen_free(&p);
    if (spec == CA_SPEC_NONE) chat_analysis_free(&a);
}

int main(void) {
    for (;;) {
        size_t n = 0;
        int c, digits = 0;
        while ((c = getchar()) != EOF && c >= '0' && c <= '9') { n = n * 10 + (size_t)(c - '0'); digits++; }
        if (c == EOF && digits == 0) break;
        if (c != '\n' || digits == 0) { fprintf(stderr, "chat-gen-driver: bad frame\n"); return 2; }
        char *text = malloc(n + 1);
        if (!text || fread(text, 1, n, stdin) != n) { fprintf(stderr, "chat-gen-driver: short frame\n"); return 2; }
        char err[512];
        json_value *j = json_parse(text, n, err, sizeof err);
        if (!j || !json_get(j, "template")) { fprintf(stderr, "chat-gen-driver: %s\n", j ? "no template" : err); return 2; }
        one(j);
        json_free(j);
        free(text);
    }
    return 0;
}
