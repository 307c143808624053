/*
 * test_template_legacy.c -- llama-server's built-in (non-Jinja) chat formats
 * (template_legacy.c). Each expected string is what libllama b11669's
 * llama_chat_apply_template returns for the same messages (measured in
 * process under the oracle kit; testing/oracle_legacy_templates.py compares
 * every format on every conversation, and llama-server --no-jinja itself).
 */
#include <stdlib.h>

#include "base/json.h"
#include "text/template.h"
#include "test.h"

static char tl_out[8192];
static char tl_err[512];

/* the raw layer: a format by name or text, role/content pairs; the output or NULL */
static const char *A(const char *tmpl, int add, size_t n, const char *const *rc) {
    template_legacy_msg m[8];
    for (size_t i = 0; i < n; i++) m[i] = (template_legacy_msg){rc[2 * i], rc[2 * i + 1]};
    jbuf b;
    jbuf_init(&b);
    int fmt = template_legacy_detect(tmpl);
    const char *res = NULL;
    if (fmt >= 0 && template_legacy_apply(fmt, m, n, add, &b) == 0 && b.len < sizeof tl_out) {
        memcpy(tl_out, b.p ? b.p : "", b.len);
        tl_out[b.len] = 0;
        res = tl_out;
    }
    jbuf_free(&b);
    return res;
}

/* the JSON layer: messages through template_legacy_render; the output, or NULL with tl_err */
static const char *J(const char *name, int add, const char *messages) {
    json_value *ms = json_parse(messages, strlen(messages), tl_err, sizeof tl_err);
    if (!ms) return NULL;
    jbuf b;
    jbuf_init(&b);
    int rc = template_legacy_render(template_legacy_detect(name), ms, add, &b, tl_err, sizeof tl_err);
    json_free(ms);
    const char *res = NULL;
    if (rc == 0 && b.len < sizeof tl_out) {
        memcpy(tl_out, b.p ? b.p : "", b.len);
        tl_out[b.len] = 0;
        res = tl_out;
    }
    jbuf_free(&b);
    return res;
}

TEST(legacy_builtin_names) {
    const char *const *v;
    size_t n = template_legacy_builtins(&v);
    CHECK_INT((long)n, 54);
    CHECK_STR(v[0], "bailing");
    CHECK_STR(v[2], "bailing2");   /* std::map order: '-' before '2' */
    CHECK_STR(v[31], "llama3");
    CHECK_STR(v[n - 1], "zephyr");
    for (size_t i = 0; i + 1 < n; i++) CHECK(strcmp(v[i], v[i + 1]) < 0);
    for (size_t i = 0; i < n; i++) CHECK_STR(template_legacy_format_name(template_legacy_detect(v[i])), v[i]);
    CHECK(template_legacy_format_name(-1) == NULL);
    CHECK(template_legacy_format_name(999) == NULL);
}

TEST(legacy_detect) {
    CHECK_STR(template_legacy_format_name(template_legacy_detect("{{ '<|im_start|>' }}")), "chatml");
    CHECK_STR(template_legacy_format_name(template_legacy_detect("<|im_start|><|im_sep|>")), "phi4");
    CHECK_STR(template_legacy_format_name(template_legacy_detect("mistral anything")), "llama2");
    CHECK_STR(template_legacy_format_name(template_legacy_detect("[INST]<<SYS>>")), "llama2-sys");
    CHECK_STR(template_legacy_format_name(template_legacy_detect("[INST][AVAILABLE_TOOLS]\"[INST]\"")),
              "mistral-v3-tekken");
    CHECK_STR(template_legacy_format_name(template_legacy_detect("<|start_header_id|>x<|end_header_id|>")), "llama3");
    CHECK_STR(template_legacy_format_name(template_legacy_detect("<|endofuserprompt|>")), "dots1");
    CHECK_STR(template_legacy_format_name(template_legacy_detect("USER: ASSISTANT: SYSTEM: ")), "vicuna-orca");
    CHECK_INT(template_legacy_detect("nonsense"), -1);
    CHECK_INT(template_legacy_detect("Llama3"), -1);
    CHECK_INT(template_legacy_detect(""), -1);
}

TEST(legacy_formats) {
    static const char *const g[] = {"system", " S ", "user", "U", "assistant", " A ", "user", "V"};
    CHECK_STR(A("gemma", 1, 4, g), "<start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n"
                                   "<start_of_turn>user\nV<end_of_turn>\n<start_of_turn>model\n");
    static const char *const l2[] = {"system", "S", "user", "U", "assistant", "A", "user", "V"};
    CHECK_STR(A("llama2-sys", 1, 4, l2), "[INST] <<SYS>>\nS\n<</SYS>>\n\nU [/INST]A</s>[INST] V [/INST]");
    CHECK_STR(A("llama2-sys-bos", 0, 3, l2 + 2), "[INST] U [/INST]A</s><s>[INST] V [/INST]");
    CHECK_STR(A("mistral-v7", 1, 3, l2), "[SYSTEM_PROMPT] S[/SYSTEM_PROMPT][INST] U[/INST] A</s>");
    static const char *const m1[] = {"system", "S", "user", "U", "assistant", " A ", "user", "V"};
    CHECK_STR(A("mistral-v1", 1, 4, m1), " [INST] S\n\nU [/INST]  A </s> [INST] V [/INST]");
    CHECK_STR(A("chatglm3", 1, 0, NULL), "[gMASK]sop<|assistant|>");
    CHECK_STR(A("bailing2", 1, 0, NULL), "<role>SYSTEM</role>detailed thinking off<|role_end|><role>ASSISTANT</role>");
    CHECK_STR(A("orion", 1, 2, l2), "Human: S\n\nU\n\nAssistant: </s>");   /* no assistant prefix */
    CHECK_STR(A("openchat", 1, 3, l2), "S<|end_of_turn|>GPT4 Correct User: U<|end_of_turn|>GPT4 Correct Assistant: "
                                       "A<|end_of_turn|>GPT4 Correct Assistant:");
    static const char *const rw[] = {"user", " U "};
    CHECK_STR(A("rwkv-world", 0, 1, rw), "User: U\n\nAssistant:");
    CHECK_STR(A("gigachat", 1, 3, l2), "<s>S<|message_sep|>user<|role_sep|>U<|message_sep|>available functions"
                                       "<|role_sep|>[]<|message_sep|>assistant<|role_sep|>A<|message_sep|>"
                                       "assistant<|role_sep|>");
    CHECK_STR(A("{% mistral %}[INST]<<SYS>>", 1, 2, l2), "[INST] <<SYS>>\nS\n<</SYS>>\n\nU [/INST]");
    CHECK(A("nonsense", 1, 2, l2) == NULL);
}

/* measured on llama-server b11669 --no-jinja --chat-template llama3 (/apply-template) */
TEST(legacy_render_messages) {
    CHECK_STR(J("llama3", 0, "[{\"role\":\"system\",\"content\":\" S \"},{\"role\":\"user\",\"content\":"
                             "[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"\"},"
                             "{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":\"x\"}]"),
              "<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
              "a\n\nb<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nx<|eot_id|>");
    CHECK_STR(J("llama3", 1, "[{\"role\":\"user\",\"content\":\"a\\u0000b\"}]"),   /* a C string: cut at the NUL */
              "<|start_header_id|>user<|end_header_id|>\n\na<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    CHECK_STR(J("llama3", 1, "[]"), "<|start_header_id|>assistant<|end_header_id|>\n\n");
    CHECK_STR(J("chatml", 0, "[{\"role\":\"assistant\",\"content\":null}]"), "<|im_start|>assistant\n<|im_end|>\n");
    CHECK_STR(J("chatml", 0, "[{\"role\":\"developer\",\"content\":\"d\"}]"), "<|im_start|>developer\nd<|im_end|>\n");
    CHECK(J("chatml", 1, "[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{}}]}]") == NULL);
    CHECK_STR(tl_err, "media input is not supported (no multimodal projector)");
    CHECK(J("chatml", 1, "[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[]}]") == NULL);
    CHECK_STR(tl_err, "messages with tool_calls are not supported yet");
    CHECK(J("chatml", 1, "[{\"role\":1,\"content\":\"x\"}]") == NULL);
    CHECK_STR(tl_err, "failed to parse messages: 'role' must be a string");
    CHECK(J("chatml", 1, "[{\"role\":\"user\"}]") == NULL);
    CHECK_STR(tl_err, "all non-assistant messages must contain 'content'");
    CHECK(J("chatml", 1, "[{\"role\":\"user\",\"content\":3}]") == NULL);
    CHECK_STR(tl_err, "expected 'content' to be a string or an array");
    CHECK(J("nonsense", 1, "[]") == NULL);
    CHECK_STR(tl_err, "this custom template is not supported, try using --jinja");
    CHECK(J("chatml", 1, "{}") == NULL);
}
