/*
 * fuzz_chat_spec.c -- libFuzzer target for b11669's specialised chat parsers (src/text/chat_spec*.c).
 *
 * Input: a byte naming the init, a byte of options (tool_choice, parallel calls, reasoning format, thinking), then JSON:
 * an array is the request's tools, an object its response_format schema. Every init must answer CHAT_GEN_OK
 * with a built arena whose grammar writes, or a refusal with a reason; an answer is parsed once with it (the
 * JSON text itself). ASan/UBSan catch the rest.
 *
 *   make build/fuzz/fuzz_chat_spec && build/fuzz/fuzz_chat_spec -max_total_time=60 corpus tests/fuzz-seeds/fuzz_chat_spec
 */
#include "base/json.h"
#include "sampling/peg_grammar.h"
#include "text/chat_gen.h"
#include "text/chat_peg.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (n < 2) return 0;
    unsigned o = d[1];
    char err[512];
    json_value *v = json_parse((const char *)d + 2, n - 2, err, sizeof err);
    if (!v) return 0;
    chat_gen_inputs in;
    memset(&in, 0, sizeof in);
    if (v->type == JSON_ARRAY) in.tools = v;
    else in.json_schema = v;
    in.tool_choice = (chat_tool_choice)((o >> 5) % 3);
    in.parallel_tool_calls = (o >> 7) & 1;
    in.reasoning_format = (o & 16) ? CHAT_REASONING_AUTO : CHAT_REASONING_NONE;
    in.thinking_disabled = (o >> 4) & (o >> 7) & 1;
    in.generation_prompt = "<think>";
    in.generation_prompt_len = 7;
    ca_specialized s = (ca_specialized)(1 + d[0] % CA_SPEC_QWEN3_CODER);
    chat_gen_params p;
    err[0] = 0;
    int rc = chat_gen_specialized(s, "<think> function_calls", 22, &in, &p, err, sizeof err);
    if (rc == CHAT_GEN_OK) {
        if (p.arena.root == PEG_INVALID) { fprintf(stderr, "no root\n"); abort(); }
        char *g = NULL;
        size_t gn = 0;
        if (p.has_grammar) peg_build_grammar(&p.arena, p.grammar_lazy, &g, &gn);
        free(g);
        chat_msg m;
        chat_peg_parse(&p.arena, p.format, p.generation_prompt, p.generation_prompt_len, (const char *)d + 2, n - 2, 1,
                       &m, err, sizeof err);
        chat_msg_free(&m);
    } else if (!err[0]) {
        fprintf(stderr, "refusal without a reason (rc %d)\n", rc);
        abort();
    }
    chat_gen_free(&p);
    json_free(v);
    return 0;
}
