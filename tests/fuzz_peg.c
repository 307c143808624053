/*
 * fuzz_peg.c -- libFuzzer target for the PEG parser, its grammar writer and the chat answer parser
 * (src/text/peg.c, peg_parse.c, chat_peg.c, src/sampling/peg_grammar.c).
 *
 * An input starting with '{' is an arena's text form: peg_load, and when it loads, peg_save must give
 * text that loads again and saves to the same bytes; then peg_build_grammar (lazy and not) must answer
 * with a text, peg_dump must end, and a fixed answer is parsed with it in every format, partial and
 * final. Any other input is a model answer, parsed by a fixed Qwen3-like arena (reasoning, content,
 * JSON tool calls) in every format, partial and final, and by the default content parser. Every call
 * must return with a message or a reason; ASan/UBSan catch the rest (overreads, leaks, recursion past
 * PEG_MAX_DEPTH).
 *
 *   make build/fuzz/fuzz_peg && build/fuzz/fuzz_peg -max_total_time=60 corpus tests/fuzz-seeds/fuzz_peg
 */
#include "sampling/peg_grammar.h"
#include "text/chat_peg.h"
#include "text/peg.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static peg_arena fz_arena;
static int fz_ready;

static void fz_build(void)
{
    peg_arena *a = &fz_arena;
    char err[128];
    peg_init(a);
    size_t v[6];
    v[0] = peg_literal_c(a, "<think>");
    v[1] = peg_tag(a, "reasoning", peg_until(a, "</think>", 8));
    v[2] = peg_literal_c(a, "</think>");
    v[3] = peg_space(a);
    size_t think = peg_optional(a, peg_sequence(a, v, 4));
    size_t content = peg_tag(a, "content", peg_until(a, "<tool_call>", 11));
    v[0] = peg_literal_c(a, "<tool_call>");
    v[1] = peg_space(a);
    v[2] = peg_atomic(a, peg_tag(a, "tool-open", peg_literal_c(a, "{\"name\": \"")));
    v[3] = peg_atomic(a, peg_tag(a, "tool-name", peg_chars(a, "[a-z_]", 1, 32)));
    v[4] = peg_literal_c(a, "\", \"arguments\": ");
    v[5] = peg_tag(a, "tool-args", peg_json(a));
    size_t head = peg_sequence(a, v, 6);
    v[0] = head;
    v[1] = peg_literal_c(a, "}");
    v[2] = peg_space(a);
    v[3] = peg_atomic(a, peg_tag(a, "tool-close", peg_literal_c(a, "</tool_call>")));
    size_t call = peg_rule(a, "tool-call", peg_tag(a, "tool", peg_sequence(a, v, 4)), 1);
    v[0] = think;
    v[1] = content;
    v[2] = peg_zero_or_more(a, peg_seq2(a, call, peg_space(a)));
    v[3] = peg_end(a);
    if (peg_build(a, peg_sequence(a, v, 4), err, sizeof err)) abort();
    fz_ready = 1;
}

static void fz_parse_all(const peg_arena *a, const char *t, size_t n)
{
    for (int f = 0; f < CHAT_FORMAT_COUNT; f++) {
        for (int partial = 0; partial < 2; partial++) {
            chat_msg m;
            char err[512] = "";
            int rc = chat_peg_parse(a, (chat_format)f, "", 0, t, n, partial, &m, err, sizeof err);
            if (rc != CHAT_PEG_OK && !err[0]) { fprintf(stderr, "a refusal without a reason\n"); abort(); }
            chat_msg_free(&m);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (!fz_ready) fz_build();
    const char *t = (const char *)d;
    if (n && t[0] == '{') {
        peg_arena a, b;
        char err[512];
        if (peg_load(&a, t, n, err, sizeof err)) return 0;
        jbuf s1, s2;
        jbuf_init(&s1);
        jbuf_init(&s2);
        peg_save(&a, &s1);
        if (peg_load(&b, s1.p ? s1.p : "", s1.len, err, sizeof err)) { fprintf(stderr, "saved text does not load: %s\n", err); abort(); }
        peg_save(&b, &s2);
        if (s1.len != s2.len || memcmp(s1.p, s2.p, s1.len)) { fprintf(stderr, "save(load(save)) differs\n"); abort(); }
        for (int lazy = 0; lazy < 2; lazy++) {
            char *g = NULL;
            size_t gl = 0;
            peg_build_grammar(&a, lazy, &g, &gl);
            if (!g) { fprintf(stderr, "no grammar text\n"); abort(); }
            free(g);
        }
        if (a.root != PEG_INVALID) {
            jbuf_reset(&s1);
            peg_dump(&a, a.root, &s1);
        }
        static const char answer[] = "<think>x</think>hi<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, \"b\"]}}</tool_call>";
        fz_parse_all(&a, answer, sizeof answer - 1);
        jbuf_free(&s1);
        jbuf_free(&s2);
        peg_free(&a);
        peg_free(&b);
        return 0;
    }
    fz_parse_all(&fz_arena, t, n);
    fz_parse_all(NULL, t, n);
    return 0;
}
