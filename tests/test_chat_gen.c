/* tests/test_chat_gen.c -- src/text/chat_gen.c: arenas and fields b11669's generator gives
 * (values from testing/kit_chat.cpp on libllama-common b11669: Qwen3-0.6B's analysis,
 * reasoning_format auto, no tools), and the refusals of what is not reproduced yet. */
#include <string.h>

#include "test.h"
#include "text/chat_gen.h"
#include "text/chat_gen_int.h"

#define S(x) ((ca_str){x, sizeof(x) - 1})

static void tcg_qwen3(chat_analysis *a, ca_str *pres)
{
    memset(a, 0, sizeof *a);
    a->jinja_caps.supports_tool_calls = 1;
    a->reasoning.mode = CA_REASONING_TAG_BASED;
    a->reasoning.start = S("<think>\n");
    a->reasoning.end = S("\n</think>\n\n");
    a->content.mode = CA_CONTENT_PLAIN;
    a->content.start = S("");
    a->content.end = S("");
    a->tools.format.mode = CA_TOOL_JSON_NATIVE;
    a->tools.format.per_call_start = S("<tool_call>\n");
    a->tools.format.per_call_end = S("\n</tool_call>");
    pres[0] = S("<think>");
    pres[1] = S("</think>");
    a->preserved_tokens = pres;
    a->n_preserved_tokens = 2;
    a->analysis_complete = 1;
}

static const char TCG_QWEN3_REASONING[] =
    "{\"parsers\":[{\"type\":\"epsilon\"},{\"type\":\"epsilon\"},{\"type\":\"literal\",\"literal\":\"\\n\"},"
    "{\"type\":\"repetition\",\"child\":2,\"min_count\":0,\"max_count\":1},{\"type\":\"sequence\",\"children\":[1,3]},"
    "{\"type\":\"literal\",\"literal\":\"</think>\"},{\"type\":\"sequence\",\"children\":[1,3,5]},"
    "{\"type\":\"literal\",\"literal\":\"\\n\"},{\"type\":\"repetition\",\"child\":7,\"min_count\":0,\"max_count\":1},"
    "{\"type\":\"sequence\",\"children\":[1,3,5,8]},{\"type\":\"literal\",\"literal\":\"\\n\"},"
    "{\"type\":\"repetition\",\"child\":10,\"min_count\":0,\"max_count\":1},{\"type\":\"sequence\",\"children\":[1,3,5,8,11]},"
    "{\"type\":\"until\",\"delimiters\":[\"</think>\"]},{\"type\":\"tag\",\"child\":13,\"tag\":\"reasoning\"},"
    "{\"type\":\"epsilon\"},{\"type\":\"literal\",\"literal\":\"<think>\"},{\"type\":\"sequence\",\"children\":[15,16]},"
    "{\"type\":\"literal\",\"literal\":\"\\n\"},{\"type\":\"repetition\",\"child\":18,\"min_count\":0,\"max_count\":1},"
    "{\"type\":\"sequence\",\"children\":[15,16,19]},{\"type\":\"sequence\",\"children\":[15,16,19,14]},"
    "{\"type\":\"sequence\",\"children\":[15,16,19,14,1,3,5,8,11]},{\"type\":\"repetition\",\"child\":22,\"min_count\":0,"
    "\"max_count\":1},{\"type\":\"epsilon\"},{\"type\":\"end\"},{\"type\":\"until\",\"delimiters\":[]},"
    "{\"type\":\"tag\",\"child\":26,\"tag\":\"content\"},{\"type\":\"sequence\",\"children\":[23,27]},"
    "{\"type\":\"sequence\",\"children\":[23,27,25]},{\"type\":\"literal\",\"literal\":\"<|im_start|>assistant\\n\"},"
    "{\"type\":\"space\"},{\"type\":\"sequence\",\"children\":[30,31,23,27,25]}],\"rules\":{},\"root\":32}";

TEST(chat_gen_reasoning_arena)
{
    chat_analysis a;
    ca_str pres[2];
    tcg_qwen3(&a, pres);
    chat_gen_inputs in;
    memset(&in, 0, sizeof in);
    in.reasoning_format = CHAT_REASONING_AUTO;
    in.generation_prompt = "<|im_start|>assistant\n";
    in.generation_prompt_len = strlen(in.generation_prompt);
    chat_gen_params p;
    char err[256];
    CHECK_INT(chat_gen(&a, &in, &p, err, sizeof err), CHAT_GEN_OK);
    jbuf b;
    jbuf_init(&b);
    peg_save(&p.arena, &b);
    jbuf_putc(&b, 0);
    CHECK_STR(b.p, TCG_QWEN3_REASONING);
    CHECK_INT(p.has_grammar, 0);
    CHECK_INT(p.ntriggers, 0);
    CHECK_INT(p.supports_thinking, 1);
    CHECK_STR(p.thinking_start_tag, "<think>");
    CHECK_STR(p.thinking_end_tag, "</think>");
    CHECK_INT(p.npreserved, 2);
    if (p.npreserved == 2) CHECK_STR(p.preserved_tokens[1], "</think>");
    CHECK_INT(p.nstops, 0);
    jbuf_free(&b);
    chat_gen_free(&p);
}

TEST(chat_gen_plain_without_reasoning_format)
{
    /* reasoning_format none: no reasoning parser; the template still thinks, so prefix << parser (the kit's
     * arena for Qwen3-0.6B with reasoning_format none, its generation prompt replaced by "A:") */
    chat_analysis a;
    ca_str pres[2];
    tcg_qwen3(&a, pres);
    chat_gen_inputs in;
    memset(&in, 0, sizeof in);
    in.generation_prompt = "A:";
    in.generation_prompt_len = 2;
    chat_gen_params p;
    char err[256];
    CHECK_INT(chat_gen(&a, &in, &p, err, sizeof err), CHAT_GEN_OK);
    jbuf b;
    jbuf_init(&b);
    peg_save(&p.arena, &b);
    jbuf_putc(&b, 0);
    CHECK_STR(b.p, "{\"parsers\":[{\"type\":\"epsilon\"},{\"type\":\"epsilon\"},{\"type\":\"epsilon\"},{\"type\":\"end\"},"
                   "{\"type\":\"until\",\"delimiters\":[]},{\"type\":\"tag\",\"child\":4,\"tag\":\"content\"},"
                   "{\"type\":\"sequence\",\"children\":[1,5]},{\"type\":\"sequence\",\"children\":[1,5,3]},"
                   "{\"type\":\"literal\",\"literal\":\"A:\"},{\"type\":\"space\"},"
                   "{\"type\":\"sequence\",\"children\":[8,9,1,5,3]}],\"rules\":{},\"root\":10}");
    jbuf_free(&b);
    chat_gen_free(&p);
}

TEST(chat_gen_tools_and_schemas)
{
    chat_analysis a;
    ca_str pres[2];
    tcg_qwen3(&a, pres);
    char err[256];
    const char *tt = "[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]";
    const char *st = "{\"type\":\"object\",\"properties\":{\"u\":{\"type\":\"string\",\"enum\":[\"c\",1.0]},"
                     "\"n\":{\"type\":[\"integer\",\"null\"],\"minimum\":1.5}},\"required\":[\"n\",\"zz\"]}";
    json_value *tools = json_parse(tt, strlen(tt), err, sizeof err);
    json_value *schema = json_parse(st, strlen(st), err, sizeof err);
    CHECK(tools && schema);
    /* the typed node written back (b11669's bytes through testing/kit_chat.cpp) */
    jbuf b;
    jbuf_init(&b);
    CHECK_INT(chat_gen_schema_text(schema, &b, err, sizeof err), 0);
    jbuf_putc(&b, 0);
    CHECK_STR(b.p, "{\"type\":\"object\",\"properties\":{\"u\":{\"enum\":[\"c\",1.0]},\"n\":{\"anyOf\":["
                   "{\"type\":\"integer\",\"minimum\":2},{\"type\":\"null\"}]}},\"required\":[\"n\"],"
                   "\"additionalProperties\":false}");
    CHECK(chat_gen_schema_may_be_string(schema, json_get(json_get(schema, "properties"), "u")));
    CHECK(!chat_gen_schema_may_be_string(schema, json_get(json_get(schema, "properties"), "n")));
    jbuf_free(&b);
    const char *bad = "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"frob\"}}}";
    json_value *bj = json_parse(bad, strlen(bad), err, sizeof err);
    jbuf_init(&b);
    CHECK_INT(chat_gen_schema_text(bj, &b, err, sizeof err), -1);
    CHECK_STR(err, "JSON schema error at #/properties/x: unrecognized type frob");
    jbuf_free(&b);

    chat_gen_inputs in;
    memset(&in, 0, sizeof in);
    in.tools = tools;
    in.generation_prompt = "";
    chat_gen_params p;
    CHECK_INT(chat_gen(&a, &in, &p, err, sizeof err), CHAT_GEN_OK);   /* auto: a lazy grammar on the marker */
    CHECK_INT(p.has_grammar, 1);
    CHECK_INT(p.grammar_lazy, 1);
    CHECK_INT(p.ntriggers, 1);
    if (p.ntriggers == 1) {
        CHECK_INT(p.triggers[0].type, CHAT_GRAMMAR_TRIGGER_WORD);
        CHECK_STR(p.triggers[0].value, "<tool_call>\n");
    }
    CHECK(peg_rule_id(&p.arena, "tool-0", 6) != PEG_INVALID);
    CHECK(peg_rule_id(&p.arena, "tool-calls", 10) != PEG_INVALID);
    chat_gen_free(&p);
    in.tool_choice = CHAT_TOOL_CHOICE_REQUIRED;                        /* required: not lazy, no trigger */
    CHECK_INT(chat_gen(&a, &in, &p, err, sizeof err), CHAT_GEN_OK);
    CHECK_INT(p.has_grammar, 1);
    CHECK_INT(p.grammar_lazy, 0);
    CHECK_INT(p.ntriggers, 0);
    chat_gen_free(&p);
    in.tool_choice = CHAT_TOOL_CHOICE_NONE;                            /* none: the content parser */
    CHECK_INT(chat_gen(&a, &in, &p, err, sizeof err), CHAT_GEN_OK);
    CHECK_INT(p.has_grammar, 0);
    CHECK(peg_rule_id(&p.arena, "tool-0", 6) == PEG_INVALID);
    chat_gen_free(&p);
    in.tools = NULL;
    in.json_schema = bj;                                               /* b11669 throws: the reason comes back */
    CHECK_INT(chat_gen(&a, &in, &p, err, sizeof err), CHAT_GEN_ERROR);
    CHECK_STR(err, "JSON schema error at #/properties/x: unrecognized type frob");
    chat_gen_free(&p);
    in.json_schema = schema;
    CHECK_INT(chat_gen(&a, &in, &p, err, sizeof err), CHAT_GEN_OK);
    CHECK_INT(p.has_grammar, 1);
    CHECK_INT(p.grammar_lazy, 0);
    CHECK(peg_rule_id(&p.arena, "response-format", 15) != PEG_INVALID);
    chat_gen_free(&p);
    a.tools.format.function_field = (ca_str){"fn", 2};                 /* nested keys: refused with the reason */
    in.json_schema = NULL;
    in.tools = tools;
    in.tool_choice = CHAT_TOOL_CHOICE_AUTO;
    CHECK_INT(chat_gen(&a, &in, &p, err, sizeof err), CHAT_GEN_UNSUPPORTED);
    CHECK(strstr(err, "nested keys") != NULL);
    chat_gen_free(&p);
    json_free(tools);
    json_free(schema);
    json_free(bj);
}
