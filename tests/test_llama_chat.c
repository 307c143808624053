/* tests/test_llama_chat.c -- src/api/llama_chat.c: the chat layer's answer side (b11669's update_chat_msg and
 * its OpenAI shapes): the deltas of an answer parsed as it grows with Qwen3's analysis (values as
 * testing/oracle_chat_tools.py measures them on llama-server b11669: "<think>\nab\n</think>\n\ncd" is reasoning
 * "ab\n", the text up to "</think>", then content "cd"), the tool-call ids kept per index, the delta and message JSON, the reasoning formats. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "api/llama_json.h"

#define S(x) ((ca_str){x, sizeof(x) - 1})

static void tlc_qwen3(chat_analysis *a, ca_str *pres)
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

/* The deltas of one update as text: "r:<piece>" / "c:<piece>" / "t<index>:<name>|<args>|<id length>". */
static void tlc_step(llama_chat *c, const char *text, int partial, char *out, size_t n)
{
    chat_msg_delta *d = NULL;
    size_t nd = 0;
    char err[256];
    out[0] = 0;
    if (llama_chat_update(c, text, strlen(text), partial, &d, &nd, err, sizeof err) != 0) {
        snprintf(out, n, "error: %s", err);
        return;
    }
    for (size_t i = 0; i < nd; i++) {
        size_t l = strlen(out);
        if (d[i].reasoning_delta.len)
            snprintf(out + l, n - l, "r:%.*s;", (int)d[i].reasoning_delta.len, d[i].reasoning_delta.p);
        else if (d[i].content_delta.len)
            snprintf(out + l, n - l, "c:%.*s;", (int)d[i].content_delta.len, d[i].content_delta.p);
        else if (d[i].tool_index != PEG_INVALID)
            snprintf(out + l, n - l, "t%zu:%.*s|%.*s|%zu;", d[i].tool_index, (int)d[i].call.name.len,
                     d[i].call.name.p ? d[i].call.name.p : "", (int)d[i].call.arguments.len,
                     d[i].call.arguments.p ? d[i].call.arguments.p : "", d[i].call.id.len);
    }
    chat_msg_deltas_free(d, nd);
}

TEST(llama_chat_reasoning_then_content)
{
    chat_analysis a;
    ca_str pres[2];
    tlc_qwen3(&a, pres);
    chat_gen_inputs in;
    memset(&in, 0, sizeof in);
    in.reasoning_format = CHAT_REASONING_DEEPSEEK;
    in.generation_prompt = "<|im_start|>assistant\n";
    in.generation_prompt_len = strlen(in.generation_prompt);
    llama_chat c;
    llama_chat_init(&c);
    char err[256], got[512];
    CHECK_INT(chat_gen(&a, &in, &c.p, err, sizeof err), CHAT_GEN_OK);
    c.has_params = 1;
    c.active = 1;
    c.format = CHAT_FORMAT_PEG_NATIVE;
    tlc_step(&c, "<think>\na", 1, got, sizeof got);
    CHECK_STR(got, "r:a;");
    tlc_step(&c, "<think>\nab", 1, got, sizeof got);
    CHECK_STR(got, "r:b;");
    tlc_step(&c, "<think>\nab\n</think>\n\ncd", 1, got, sizeof got);
    CHECK_STR(got, "r:\n;c:cd;");   /* the reasoning runs up to "</think>": its newline is reasoning */
    tlc_step(&c, "<think>\nab\n</think>\n\ncd", 0, got, sizeof got);
    CHECK_STR(got, "");
    jbuf b;
    jbuf_init(&b);
    llama_chat_put_message(&b, &c.msg, "raw", 3);
    jbuf_putc(&b, 0);
    CHECK_STR(b.p, "{\"role\":\"assistant\",\"content\":\"cd\",\"reasoning_content\":\"ab\\n\"}");
    jbuf_free(&b);
    llama_chat_free(&c);
}

TEST(llama_chat_shapes)
{
    chat_msg_delta d;
    memset(&d, 0, sizeof d);
    d.tool_index = PEG_INVALID;
    jbuf b;
    jbuf_init(&b);
    jbuf_puts(&d.reasoning_delta, "r\"");
    llama_chat_put_delta(&b, &d);
    jbuf_putc(&b, 0);
    CHECK_STR(b.p, "{\"reasoning_content\":\"r\\\"\"}");
    jbuf_free(&d.reasoning_delta);
    jbuf_init(&d.reasoning_delta);
    /* a new call: index, id and type, the name; then an arguments piece alone */
    d.tool_index = 1;
    jbuf_puts(&d.call.id, "abc");
    jbuf_puts(&d.call.name, "f");
    jbuf_reset(&b);
    llama_chat_put_delta(&b, &d);
    jbuf_putc(&b, 0);
    CHECK_STR(b.p, "{\"tool_calls\":[{\"index\":1,\"id\":\"abc\",\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}");
    jbuf_reset(&d.call.id);
    jbuf_reset(&d.call.name);
    jbuf_puts(&d.call.arguments, "{\"a\"");
    jbuf_reset(&b);
    llama_chat_put_delta(&b, &d);
    jbuf_putc(&b, 0);
    CHECK_STR(b.p, "{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"{\\\"a\\\"\"}}]}");
    jbuf_free(&d.call.id);
    jbuf_free(&d.call.name);
    jbuf_free(&d.call.arguments);
    /* a message with one call, and an empty message (the raw text answered) */
    chat_msg m;
    chat_msg_init(&m);
    m.calls = calloc(1, sizeof *m.calls);
    m.ncalls = m.cap = 1;
    jbuf_puts(&m.calls[0].name, "ping");
    jbuf_puts(&m.calls[0].arguments, "{}");
    jbuf_puts(&m.calls[0].id, "X1");
    jbuf_reset(&b);
    llama_chat_put_message(&b, &m, "raw", 3);
    jbuf_putc(&b, 0);
    CHECK_STR(b.p, "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"type\":\"function\",\"function\":"
                   "{\"name\":\"ping\",\"arguments\":\"{}\"},\"id\":\"X1\"}]}");
    chat_msg_free(&m);
    chat_msg_init(&m);
    jbuf_reset(&b);
    llama_chat_put_message(&b, &m, "raw", 3);
    jbuf_putc(&b, 0);
    CHECK_STR(b.p, "{\"role\":\"assistant\",\"content\":\"raw\"}");
    chat_msg_free(&m);
    jbuf_free(&b);
    int f = -1;
    CHECK_INT(llama_reasoning_format_from_name("none", &f), 0);
    CHECK_INT(f, CHAT_REASONING_NONE);
    CHECK_INT(llama_reasoning_format_from_name("deepseek-legacy", &f), 0);
    CHECK_INT(f, CHAT_REASONING_DEEPSEEK_LEGACY);
    CHECK_INT(llama_reasoning_format_from_name("auto", &f), 0);
    CHECK_INT(f, CHAT_REASONING_AUTO);
    CHECK_INT(llama_reasoning_format_from_name("Deepseek", &f), -1);
}
