/*
 * template_legacy.c -- llama-server's built-in chat formats, the ones it uses
 * without Jinja (--no-jinja): llama.cpp b11669's llm_chat_template_from_str,
 * llm_chat_detect_template and llm_chat_apply_template (src/llama-chat.cpp),
 * reached through common/chat.cpp's common_chat_templates_apply_legacy.
 *
 * Three steps, as llama.cpp takes them:
 *   the name      a built-in name ("llama3", "chatml", ...) picks its format;
 *   detection     any other text (a GGUF's Jinja source, a --chat-template-file)
 *                 is mapped to a format by the substrings it contains, in
 *                 llama.cpp's order (the first test that holds wins);
 *   rendering     each format writes role and content with its own markers,
 *                 trims where llama.cpp trims (std::isspace, "C" locale) and
 *                 adds the assistant prefix when asked (add_ass), where the
 *                 format has one.
 * Role and content are C strings there (llama_chat_message), so a NUL inside
 * either ends it; we cut them at the first NUL the same way.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "text/template.h"

/* ------------------------------------------------------------------ the formats */

/* Our ids, llama-chat.h's enum order. DOTS1 is detected but has no name. */
enum {
    TL_CHATML, TL_LLAMA_2, TL_LLAMA_2_SYS, TL_LLAMA_2_SYS_BOS, TL_LLAMA_2_SYS_STRIP, TL_MISTRAL_V1,
    TL_MISTRAL_V3, TL_MISTRAL_V3_TEKKEN, TL_MISTRAL_V7, TL_MISTRAL_V7_TEKKEN, TL_PHI_3, TL_PHI_4, TL_FALCON_3,
    TL_ZEPHYR, TL_MONARCH, TL_GEMMA, TL_ORION, TL_OPENCHAT, TL_VICUNA, TL_VICUNA_ORCA, TL_DEEPSEEK, TL_DEEPSEEK_2,
    TL_DEEPSEEK_3, TL_DEEPSEEK_OCR, TL_COMMAND_R, TL_LLAMA_3, TL_CHATGLM_3, TL_CHATGLM_4, TL_GLMEDGE, TL_MINICPM,
    TL_EXAONE_3, TL_EXAONE_4, TL_EXAONE_MOE, TL_RWKV_WORLD, TL_GRANITE_3_X, TL_GRANITE_4_0, TL_GRANITE_4_1,
    TL_GIGACHAT, TL_MEGREZ, TL_YANDEX, TL_BAILING, TL_BAILING_THINK, TL_BAILING2, TL_LLAMA4, TL_SMOLVLM, TL_DOTS1,
    TL_HUNYUAN_MOE, TL_OPENAI_MOE, TL_HUNYUAN_DENSE, TL_HUNYUAN_VL, TL_KIMI_K2, TL_SEED_OSS, TL_GROK_2,
    TL_PANGU_EMBED, TL_SOLAR_OPEN, TL_N_FORMATS
};

/* LLM_CHAT_TEMPLATES: name -> format, in std::map order (the order
 * llama_chat_builtin_templates and llama-server's --help list them in). */
static const struct { const char *name; int fmt; } tl_builtins[] = {
    {"bailing", TL_BAILING}, {"bailing-think", TL_BAILING_THINK}, {"bailing2", TL_BAILING2},
    {"chatglm3", TL_CHATGLM_3}, {"chatglm4", TL_CHATGLM_4}, {"chatml", TL_CHATML}, {"command-r", TL_COMMAND_R},
    {"deepseek", TL_DEEPSEEK}, {"deepseek-ocr", TL_DEEPSEEK_OCR}, {"deepseek2", TL_DEEPSEEK_2},
    {"deepseek3", TL_DEEPSEEK_3}, {"exaone-moe", TL_EXAONE_MOE}, {"exaone3", TL_EXAONE_3}, {"exaone4", TL_EXAONE_4},
    {"falcon3", TL_FALCON_3}, {"gemma", TL_GEMMA}, {"gigachat", TL_GIGACHAT}, {"glmedge", TL_GLMEDGE},
    {"gpt-oss", TL_OPENAI_MOE}, {"granite", TL_GRANITE_3_X}, {"granite-4.0", TL_GRANITE_4_0},
    {"granite-4.1", TL_GRANITE_4_1}, {"grok-2", TL_GROK_2}, {"hunyuan-dense", TL_HUNYUAN_DENSE},
    {"hunyuan-moe", TL_HUNYUAN_MOE}, {"hunyuan-vl", TL_HUNYUAN_VL}, {"kimi-k2", TL_KIMI_K2}, {"llama2", TL_LLAMA_2},
    {"llama2-sys", TL_LLAMA_2_SYS}, {"llama2-sys-bos", TL_LLAMA_2_SYS_BOS}, {"llama2-sys-strip", TL_LLAMA_2_SYS_STRIP},
    {"llama3", TL_LLAMA_3}, {"llama4", TL_LLAMA4}, {"megrez", TL_MEGREZ}, {"minicpm", TL_MINICPM},
    {"mistral-v1", TL_MISTRAL_V1}, {"mistral-v3", TL_MISTRAL_V3}, {"mistral-v3-tekken", TL_MISTRAL_V3_TEKKEN},
    {"mistral-v7", TL_MISTRAL_V7}, {"mistral-v7-tekken", TL_MISTRAL_V7_TEKKEN}, {"monarch", TL_MONARCH},
    {"openchat", TL_OPENCHAT}, {"orion", TL_ORION}, {"pangu-embedded", TL_PANGU_EMBED}, {"phi3", TL_PHI_3},
    {"phi4", TL_PHI_4}, {"rwkv-world", TL_RWKV_WORLD}, {"seed_oss", TL_SEED_OSS}, {"smolvlm", TL_SMOLVLM},
    {"solar-open", TL_SOLAR_OPEN}, {"vicuna", TL_VICUNA}, {"vicuna-orca", TL_VICUNA_ORCA}, {"yandex", TL_YANDEX},
    {"zephyr", TL_ZEPHYR},
};
#define TL_N_BUILTINS (sizeof tl_builtins / sizeof tl_builtins[0])

static const char *const tl_names[TL_N_BUILTINS] = {
    "bailing", "bailing-think", "bailing2", "chatglm3", "chatglm4", "chatml", "command-r", "deepseek",
    "deepseek-ocr", "deepseek2", "deepseek3", "exaone-moe", "exaone3", "exaone4", "falcon3", "gemma", "gigachat",
    "glmedge", "gpt-oss", "granite", "granite-4.0", "granite-4.1", "grok-2", "hunyuan-dense", "hunyuan-moe",
    "hunyuan-vl", "kimi-k2", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip", "llama3", "llama4",
    "megrez", "minicpm", "mistral-v1", "mistral-v3", "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken",
    "monarch", "openchat", "orion", "pangu-embedded", "phi3", "phi4", "rwkv-world", "seed_oss", "smolvlm",
    "solar-open", "vicuna", "vicuna-orca", "yandex", "zephyr",
};

size_t template_legacy_builtins(const char *const **names)
{
    if (names) *names = tl_names;
    return TL_N_BUILTINS;
}

const char *template_legacy_format_name(int fmt)
{
    if (fmt == TL_DOTS1) return "dots1";
    for (size_t i = 0; i < TL_N_BUILTINS; i++)
        if (tl_builtins[i].fmt == fmt) return tl_builtins[i].name;
    return NULL;
}

/* ------------------------------------------------------------------ detection */

static int tl_has(const char *t, const char *s) { return strstr(t, s) != NULL; }

/* llm_chat_detect_template's mistral/llama2 branch */
static int tl_detect_inst(const char *t)
{
    if (tl_has(t, "[SYSTEM_PROMPT]")) return TL_MISTRAL_V7;
    if (tl_has(t, "' [INST] ' + system_message") || tl_has(t, "[AVAILABLE_TOOLS]")) {
        if (tl_has(t, " [INST]")) return TL_MISTRAL_V1;
        if (tl_has(t, "\"[INST]\"")) return TL_MISTRAL_V3_TEKKEN;
        return TL_MISTRAL_V3;
    }
    if (tl_has(t, "content.strip()")) return TL_LLAMA_2_SYS_STRIP;
    if (tl_has(t, "bos_token + '[INST]")) return TL_LLAMA_2_SYS_BOS;
    if (tl_has(t, "<<SYS>>")) return TL_LLAMA_2_SYS;
    return TL_LLAMA_2;
}

/* The tests after the first ones, in llama.cpp's order: {needle, needle, needle, format}; every
 * given needle must be present. (The rows that need "one but not another" are written out below.) */
static const struct { const char *a, *b, *c; int fmt; } tl_rules[] = {
    {"<|user|>", "<|endoftext|>", NULL, TL_ZEPHYR},
    {"bos_token + message['role']", NULL, NULL, TL_MONARCH},
    {"<start_of_turn>", NULL, NULL, TL_GEMMA},
    {"'\\n\\nAssistant: ' + eos_token", NULL, NULL, TL_ORION},
    {"GPT4 Correct ", NULL, NULL, TL_OPENCHAT},
    {NULL, NULL, NULL, -1},   /* vicuna: below */
    {"### Instruction:", "<|EOT|>", NULL, TL_DEEPSEEK},
    {"<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", NULL, TL_COMMAND_R},
    {"<|start_header_id|>", "<|end_header_id|>", NULL, TL_LLAMA_3},
    {"[gMASK]sop", NULL, NULL, TL_CHATGLM_3},
    {"<\xe7\x94\xa8\xe6\x88\xb7>", NULL, NULL, TL_MINICPM},   /* <用户> */
    {"'Assistant: ' + message['content'] + eos_token", NULL, NULL, TL_DEEPSEEK_2},
    {"<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>", "<\xef\xbd\x9cUser\xef\xbd\x9c>",
     "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", TL_DEEPSEEK_3},
    {NULL, NULL, NULL, -2},   /* exaone 3/4, rwkv, granite: below */
    {"message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]", NULL, NULL,
     TL_GIGACHAT},
    {"<|role_start|>", NULL, NULL, TL_MEGREZ},
    {" \xd0\x90\xd1\x81\xd1\x81\xd0\xb8\xd1\x81\xd1\x82\xd0\xb5\xd0\xbd\xd1\x82:", NULL, NULL, TL_YANDEX},  /*  Ассистент: */
    {"<role>ASSISTANT</role>", "'HUMAN'", NULL, TL_BAILING},
    {"<role>ASSISTANT</role>", "\"HUMAN\"", "<think>", TL_BAILING_THINK},
    {"<role>ASSISTANT</role>", "<role>HUMAN</role>", "<|role_end|>", TL_BAILING2},
    {"<|header_start|>", "<|header_end|>", NULL, TL_LLAMA4},
    {"<|endofuserprompt|>", NULL, NULL, TL_DOTS1},
    {"<|extra_0|>", "<|extra_4|>", NULL, TL_HUNYUAN_MOE},
    {"<|start|>", "<|channel|>", NULL, TL_OPENAI_MOE},
    {"<\xef\xbd\x9chy_Assistant\xef\xbd\x9c>", "<\xef\xbd\x9chy_begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
     NULL, TL_HUNYUAN_VL},
    {"<\xef\xbd\x9chy_Assistant\xef\xbd\x9c>",
     "<\xef\xbd\x9chy_place\xe2\x96\x81holder\xe2\x96\x81no\xe2\x96\x81" "3\xef\xbd\x9c>", NULL, TL_HUNYUAN_DENSE},
    {"<|im_assistant|>assistant<|im_middle|>", NULL, NULL, TL_KIMI_K2},
    {"<seed:bos>", NULL, NULL, TL_SEED_OSS},
    {"'Assistant: '  + message['content'] + '<|separator|>", NULL, NULL, TL_GROK_2},
    {"[unused9]\xe7\xb3\xbb\xe7\xbb\x9f\xef\xbc\x9a[unused10]", NULL, NULL, TL_PANGU_EMBED},   /* [unused9]系统：[unused10] */
    {"<|begin|>", "<|end|>", "<|content|>", TL_SOLAR_OPEN},
};

/* the rows tl_rules marks -2: EXAONE, RWKV, Granite; -1 when none holds */
static int tl_detect_middle(const char *t)
{
    if (tl_has(t, "[|system|]") && tl_has(t, "[|assistant|]") && tl_has(t, "[|endofturn|]"))
        return tl_has(t, "[|tool|]") ? TL_EXAONE_4 : TL_EXAONE_3;
    if (tl_has(t, "rwkv-world") || tl_has(t, "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"))
        return TL_RWKV_WORLD;
    if (tl_has(t, "<|start_of_role|>")) {
        if (tl_has(t, "<tool_call>") || tl_has(t, "<tools>"))
            return tl_has(t, "g4_default_system_message") ? TL_GRANITE_4_0 : TL_GRANITE_4_1;
        return TL_GRANITE_3_X;
    }
    return -1;
}

int template_legacy_detect(const char *t)
{
    for (size_t i = 0; i < TL_N_BUILTINS; i++)
        if (!strcmp(t, tl_builtins[i].name)) return tl_builtins[i].fmt;
    if (tl_has(t, "<|im_start|>"))
        return tl_has(t, "<|im_sep|>") ? TL_PHI_4 : tl_has(t, "<end_of_utterance>") ? TL_SMOLVLM : TL_CHATML;
    if (!strncmp(t, "mistral", 7) || tl_has(t, "[INST]")) return tl_detect_inst(t);
    if (tl_has(t, "<|assistant|>") && tl_has(t, "<|end|>")) return TL_PHI_3;
    if (tl_has(t, "[gMASK]<sop>")) return TL_CHATGLM_4;
    if (tl_has(t, "<|assistant|>") && tl_has(t, "<|user|>")) {
        if (tl_has(t, "<|tool_declare|>")) return TL_EXAONE_MOE;
        return tl_has(t, "</s>") ? TL_FALCON_3 : TL_GLMEDGE;
    }
    if (tl_has(t, "<|{{ item['role'] }}|>") && tl_has(t, "<|begin_of_image|>")) return TL_GLMEDGE;
    for (size_t i = 0; i < sizeof tl_rules / sizeof tl_rules[0]; i++) {
        int f = tl_rules[i].fmt;
        if (f == -1) {
            if (tl_has(t, "USER: ") && tl_has(t, "ASSISTANT: "))
                return tl_has(t, "SYSTEM: ") ? TL_VICUNA_ORCA : TL_VICUNA;
            continue;
        }
        if (f == -2) {
            if ((f = tl_detect_middle(t)) >= 0) return f;
            continue;
        }
        if (tl_has(t, tl_rules[i].a) && (!tl_rules[i].b || tl_has(t, tl_rules[i].b)) &&
            (!tl_rules[i].c || tl_has(t, tl_rules[i].c)))
            return f;
    }
    return -1;
}

/* ------------------------------------------------------------------ rendering */

/* llama-chat.cpp's trim: std::isspace at both ends */
static void tl_put_trim(jbuf *o, const char *s)
{
    size_t a = 0, b = strlen(s);
    while (a < b && isspace((unsigned char)s[a])) a++;
    while (b > a && isspace((unsigned char)s[b - 1])) b--;
    jbuf_put(o, s + a, b - a);
}

/* s, trimmed when trim */
static void tl_put_c(jbuf *o, const char *s, int trim)
{
    if (trim) tl_put_trim(o, s);
    else jbuf_puts(o, s);
}

static void tl_put3(jbuf *o, const char *a, const char *b, const char *c)
{
    jbuf_puts(o, a);
    jbuf_puts(o, b);
    jbuf_puts(o, c);
}

/* The formats that are "prefix role middle content suffix" for every
 * message and one assistant prefix: {prefix, middle, suffix, assistant,
 * trim}. */
static const struct { int fmt; const char *pre, *mid, *suf, *ass; int trim; } tl_simple[] = {
    {TL_CHATML, "<|im_start|>", "\n", "<|im_end|>\n", "<|im_start|>assistant\n", 0},
    {TL_PHI_3, "<|", "|>\n", "<|end|>\n", "<|assistant|>\n", 0},
    {TL_PHI_4, "<|im_start|>", "<|im_sep|>", "<|im_end|>", "<|im_start|>assistant<|im_sep|>", 0},
    {TL_FALCON_3, "<|", "|>\n", "\n", "<|assistant|>\n", 0},
    {TL_ZEPHYR, "<|", "|>\n", "<|endoftext|>\n", "<|assistant|>\n", 0},
    {TL_LLAMA_3, "<|start_header_id|>", "<|end_header_id|>\n\n", "<|eot_id|>",
     "<|start_header_id|>assistant<|end_header_id|>\n\n", 1},
    {TL_GLMEDGE, "<|", "|>\n", "", "<|assistant|>", 0},
    {TL_MEGREZ, "<|role_start|>", "<|role_end|>", "<|turn_end|>", "<|role_start|>assistant<|role_end|>", 0},
    {TL_LLAMA4, "<|header_start|>", "<|header_end|>\n\n", "<|eot|>", "<|header_start|>assistant<|header_end|>\n\n", 1},
    {TL_SOLAR_OPEN, "<|begin|>", "<|content|>", "<|end|>", "<|begin|>assistant", 0},
};

/* Formats whose text depends on the role only: {role, prefix, suffix}
 * rows for each, NULL role = any other role; a role without a row writes
 * nothing. */
typedef struct { const char *role, *pre, *suf; int trim; } tl_row;
static const tl_row tl_rows_deepseek[] = {
    {"system", "", "", 0}, {"user", "### Instruction:\n", "\n", 0}, {"assistant", "### Response:\n", "\n<|EOT|>\n", 0},
    {NULL, NULL, NULL, 0}};
static const tl_row tl_rows_command_r[] = {
    {"system", "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>", "<|END_OF_TURN_TOKEN|>", 1},
    {"user", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|END_OF_TURN_TOKEN|>", 1},
    {"assistant", "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>", 1}, {NULL, NULL, NULL, 0}};
static const tl_row tl_rows_deepseek2[] = {
    {"system", "", "\n\n", 0}, {"user", "User: ", "\n\n", 0},
    {"assistant", "Assistant: ", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", 0},
    {NULL, NULL, NULL, 0}};
static const tl_row tl_rows_deepseek3[] = {
    {"system", "", "\n\n", 0}, {"user", "<\xef\xbd\x9cUser\xef\xbd\x9c>", "", 0},
    {"assistant", "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>",
     "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", 0},
    {NULL, NULL, NULL, 0}};
static const tl_row tl_rows_exaone3[] = {
    {"system", "[|system|]", "[|endofturn|]\n", 1}, {"user", "[|user|]", "\n", 1},
    {"assistant", "[|assistant|]", "[|endofturn|]\n", 1}, {NULL, NULL, NULL, 0}};
static const tl_row tl_rows_exaone4[] = {
    {"system", "[|system|]", "[|endofturn|]\n", 1}, {"user", "[|user|]", "\n", 1},
    {"assistant", "[|assistant|]", "[|endofturn|]\n", 1}, {"tool", "[|tool|]", "[|endofturn|]\n", 1},
    {NULL, NULL, NULL, 0}};
static const tl_row tl_rows_exaone_moe[] = {
    {"system", "<|system|>\n", "<|endofturn|>\n", 1}, {"user", "<|user|>\n", "<|endofturn|>\n", 1},
    {"assistant", "<|assistant|>\n", "<|endofturn|>\n", 1}, {"tool", "<|tool|>\n", "<|endofturn|>\n", 1},
    {NULL, NULL, NULL, 0}};
static const tl_row tl_rows_dots1[] = {
    {"system", "<|system|>", "<|endofsystem|>", 0}, {"user", "<|userprompt|>", "<|endofuserprompt|>", 0},
    {NULL, "<|response|>", "<|endofresponse|>", 0}};
static const tl_row tl_rows_hunyuan_moe[] = {
    {"system", "<|startoftext|>", "<|extra_4|>", 0}, {"assistant", "", "<|eos|>", 0},
    {NULL, "<|startoftext|>", "<|extra_0|>", 0}};
static const tl_row tl_rows_grok2[] = {
    {"system", "System: ", "<|separator|>\n\n", 1}, {"user", "Human: ", "<|separator|>\n\n", 1},
    {"assistant", "Assistant: ", "<|separator|>\n\n", 0}, {NULL, NULL, NULL, 0}};
static const tl_row tl_rows_pangu[] = {
    {"system", "[unused9]\xe7\xb3\xbb\xe7\xbb\x9f\xef\xbc\x9a", "[unused10]", 0},
    {"user", "[unused9]\xe7\x94\xa8\xe6\x88\xb7\xef\xbc\x9a", "[unused10]", 0},
    {"assistant", "[unused9]\xe5\x8a\xa9\xe6\x89\x8b\xef\xbc\x9a", "[unused10]", 0},
    {"tool", "[unused9]\xe5\xb7\xa5\xe5\x85\xb7\xef\xbc\x9a", "[unused10]", 0},
    {"function", "[unused9]\xe6\x96\xb9\xe6\xb3\x95\xef\xbc\x9a", "[unused10]", 0}, {NULL, NULL, NULL, 0}};

static const struct { int fmt; const tl_row *rows; const char *ass; } tl_by_role[] = {
    {TL_DEEPSEEK, tl_rows_deepseek, "### Response:\n"},
    {TL_COMMAND_R, tl_rows_command_r, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
    {TL_DEEPSEEK_2, tl_rows_deepseek2, "Assistant:"},
    {TL_DEEPSEEK_3, tl_rows_deepseek3, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"},
    {TL_EXAONE_3, tl_rows_exaone3, "[|assistant|]"},
    {TL_EXAONE_4, tl_rows_exaone4, "[|assistant|]"},
    {TL_EXAONE_MOE, tl_rows_exaone_moe, "<|assistant|>\n"},
    {TL_DOTS1, tl_rows_dots1, "<|response|>"},
    {TL_HUNYUAN_MOE, tl_rows_hunyuan_moe, NULL},
    {TL_GROK_2, tl_rows_grok2, "Assistant:"},
};

static const tl_row *tl_row_for(const tl_row *rows, const char *role)
{
    for (;; rows++)
        if (!rows->role || !strcmp(rows->role, role)) return rows->pre ? rows : NULL;
}

static void tl_rows(jbuf *o, const tl_row *rows, const template_legacy_msg *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const tl_row *r = tl_row_for(rows, m[i].role);
        if (!r) continue;
        jbuf_puts(o, r->pre);
        tl_put_c(o, m[i].content, r->trim);
        jbuf_puts(o, r->suf);
    }
}

/* mistral v1, v3, v3-tekken */
static void tl_mistral(jbuf *o, int fmt, const template_legacy_msg *m, size_t n)
{
    const char *lead = fmt == TL_MISTRAL_V1 ? " " : "", *trail = fmt == TL_MISTRAL_V3_TEKKEN ? "" : " ";
    int inside = 0;
    for (size_t i = 0; i < n; i++) {
        if (!inside) {
            tl_put3(o, lead, "[INST]", trail);
            inside = 1;
        }
        if (!strcmp(m[i].role, "system")) {
            tl_put3(o, m[i].content, "\n\n", "");
        } else if (!strcmp(m[i].role, "user")) {
            tl_put3(o, m[i].content, lead, "[/INST]");
        } else {
            jbuf_puts(o, trail);
            tl_put_c(o, m[i].content, fmt == TL_MISTRAL_V3);
            jbuf_puts(o, "</s>");
            inside = 0;
        }
    }
}

/* llama2 and its -sys, -sys-bos, -sys-strip variants */
static void tl_llama2(jbuf *o, int fmt, const template_legacy_msg *m, size_t n)
{
    int sys = fmt != TL_LLAMA_2, bos = fmt == TL_LLAMA_2_SYS_BOS, strip = fmt == TL_LLAMA_2_SYS_STRIP, inside = 1;
    jbuf_puts(o, "[INST] ");
    for (size_t i = 0; i < n; i++) {
        if (!inside) {
            inside = 1;
            jbuf_puts(o, bos ? "<s>[INST] " : "[INST] ");
        }
        if (!strcmp(m[i].role, "system")) {
            jbuf_puts(o, sys ? "<<SYS>>\n" : "");
            tl_put_c(o, m[i].content, strip);
            jbuf_puts(o, sys ? "\n<</SYS>>\n\n" : "\n");
        } else if (!strcmp(m[i].role, "user")) {
            tl_put_c(o, m[i].content, strip);
            jbuf_puts(o, " [/INST]");
        } else {
            tl_put_c(o, m[i].content, strip);
            jbuf_puts(o, "</s>");
            inside = 0;
        }
    }
}

/* gemma: system merged (trimmed) into the next non-model turn; assistant is "model" */
static void tl_gemma(jbuf *o, const template_legacy_msg *m, size_t n, int add_ass)
{
    jbuf sys;
    jbuf_init(&sys);
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(m[i].role, "system")) {
            tl_put_trim(&sys, m[i].content);
            continue;
        }
        int model = !strcmp(m[i].role, "assistant") || !strcmp(m[i].role, "model");
        tl_put3(o, "<start_of_turn>", model ? "model" : m[i].role, "\n");
        if (sys.len && !model) {
            jbuf_put(o, sys.p, sys.len);
            jbuf_puts(o, "\n\n");
            sys.len = 0;
        }
        tl_put_trim(o, m[i].content);
        jbuf_puts(o, "<end_of_turn>\n");
    }
    if (sys.oom) o->oom = 1;
    jbuf_free(&sys);
    if (add_ass) jbuf_puts(o, "<start_of_turn>model\n");
}

/* orion: system merged into the next user turn; no assistant prefix */
static void tl_orion(jbuf *o, const template_legacy_msg *m, size_t n)
{
    jbuf sys;
    jbuf_init(&sys);
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(m[i].role, "system")) {
            jbuf_puts(&sys, m[i].content);
        } else if (!strcmp(m[i].role, "user")) {
            jbuf_puts(o, "Human: ");
            if (sys.len) {
                jbuf_put(o, sys.p, sys.len);
                jbuf_puts(o, "\n\n");
                sys.len = 0;
            }
            tl_put3(o, m[i].content, "\n\nAssistant: </s>", "");
        } else {
            tl_put3(o, m[i].content, "</s>", "");
        }
    }
    if (sys.oom) o->oom = 1;
    jbuf_free(&sys);
}

/* role with its first byte upper-cased (toupper, "C" locale), or ASCII upper-cased whole */
static void tl_put_upper(jbuf *o, const char *role, int whole)
{
    for (size_t i = 0; role[i]; i++)
        jbuf_putc(o, (i == 0 || whole) ? (char)toupper((unsigned char)role[i]) : role[i]);
}

/* the formats with per-message logic of their own (openchat .. kimi-k2) */
static void tl_other(jbuf *o, int fmt, const template_legacy_msg *m, size_t n, int add_ass)
{
    /* what some write before the first message, written with no message too */
    if (fmt == TL_CHATGLM_3) jbuf_puts(o, "[gMASK]sop");
    if (fmt == TL_CHATGLM_4) jbuf_puts(o, "[gMASK]<sop>");
    if (fmt == TL_SMOLVLM) jbuf_puts(o, "<|im_start|>");
    if (fmt == TL_GIGACHAT) jbuf_puts(o, "<s>");
    if (fmt == TL_HUNYUAN_VL) jbuf_puts(o, "<\xef\xbd\x9chy_begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>");
    if (fmt == TL_BAILING2 && !(n && !strcmp(m[0].role, "system")))
        jbuf_puts(o, "<role>SYSTEM</role>detailed thinking off<|role_end|>");
    for (size_t i = 0; i < n; i++) {
        const char *r = m[i].role, *c = m[i].content;
        int sys = !strcmp(r, "system"), user = !strcmp(r, "user"), ass = !strcmp(r, "assistant");
        switch (fmt) {
        case TL_OPENCHAT:
            if (!sys) {
                jbuf_puts(o, "GPT4 Correct ");
                tl_put_upper(o, r, 0);
                jbuf_puts(o, ": ");
            }
            tl_put3(o, c, "<|end_of_turn|>", "");
            break;
        case TL_VICUNA: case TL_VICUNA_ORCA:
            if (sys) tl_put3(o, fmt == TL_VICUNA_ORCA ? "SYSTEM: " : "", c, fmt == TL_VICUNA_ORCA ? "\n" : "\n\n");
            else if (user) tl_put3(o, "USER: ", c, "\n");
            else if (ass) tl_put3(o, "ASSISTANT: ", c, "</s>\n");
            break;
        case TL_MONARCH:
            tl_put3(o, i ? "<s>" : "", r, "\n");
            tl_put3(o, c, "</s>\n", "");
            break;
        case TL_CHATGLM_3: case TL_CHATGLM_4:
            tl_put3(o, "<|", r, fmt == TL_CHATGLM_3 ? "|>\n " : "|>\n");
            jbuf_puts(o, c);
            break;
        case TL_MINICPM:
            if (user) jbuf_puts(o, "<\xe7\x94\xa8\xe6\x88\xb7>");
            tl_put_trim(o, c);
            if (user) jbuf_puts(o, "<AI>");
            break;
        case TL_DEEPSEEK_OCR:
            jbuf_puts(o, c);
            break;
        case TL_RWKV_WORLD:
            if (sys || user || ass) {
                jbuf_puts(o, sys ? "System: " : user ? "User: " : "Assistant: ");
                tl_put_trim(o, c);
                jbuf_puts(o, "\n\n");
                if (user && i == n - 1) jbuf_puts(o, "Assistant:");
            }
            break;
        case TL_GRANITE_3_X: case TL_GRANITE_4_0: case TL_GRANITE_4_1:
            if (fmt != TL_GRANITE_3_X && !strcmp(r, "assistant_tool_call")) {
                jbuf_puts(o, "<|start_of_role|>assistant<|end_of_role|><|tool_call|>");
            } else {
                tl_put3(o, "<|start_of_role|>", r, "<|end_of_role|>");
                if (!strcmp(r, "assistant_tool_call")) jbuf_puts(o, "<|tool_call|>");
            }
            tl_put3(o, c, "<|end_of_text|>\n", "");
            break;
        case TL_YANDEX:
            if (user || ass) tl_put3(o, user ? " \xd0\x9f\xd0\xbe\xd0\xbb\xd1\x8c\xd0\xb7\xd0\xbe\xd0\xb2\xd0\xb0"
                                               "\xd1\x82\xd0\xb5\xd0\xbb\xd1\x8c: "   /* " Пользователь: " */
                                        : " \xd0\x90\xd1\x81\xd1\x81\xd0\xb8\xd1\x81\xd1\x82\xd0\xb5\xd0\xbd\xd1\x82: ",
                                     c, "\n\n");
            break;
        case TL_BAILING: case TL_BAILING_THINK: case TL_BAILING2:
            jbuf_puts(o, "<role>");
            if (user) jbuf_puts(o, "HUMAN");
            else tl_put_upper(o, r, 1);
            tl_put3(o, "</role>", c, fmt == TL_BAILING2 ? "<|role_end|>" : "");
            break;
        case TL_SMOLVLM:
            if (sys) tl_put3(o, c, "\n\n", "");
            else tl_put3(o, user ? "User: " : "Assistant: ", c, "<end_of_utterance>\n");
            break;
        case TL_OPENAI_MOE:
            tl_put3(o, "<|start|>", r, "<|message|>");
            tl_put3(o, c, ass ? "<|return|>" : "<|end|>", "");
            break;
        case TL_HUNYUAN_DENSE:
            if (i == 0 && sys)
                tl_put3(o, c, "<\xef\xbd\x9chy_place\xe2\x96\x81holder\xe2\x96\x81no\xe2\x96\x81" "3\xef\xbd\x9c>", "");
            if (ass) tl_put3(o, "<\xef\xbd\x9chy_Assistant\xef\xbd\x9c>", c,
                             "<\xef\xbd\x9chy_place\xe2\x96\x81holder\xe2\x96\x81no\xe2\x96\x81" "2\xef\xbd\x9c>");
            else if (user) tl_put3(o, "<\xef\xbd\x9chy_User\xef\xbd\x9c>", c, "<\xef\xbd\x9chy_Assistant\xef\xbd\x9c>");
            break;
        case TL_HUNYUAN_VL:
            if (i == 0 && sys)
                tl_put3(o, c, "<\xef\xbd\x9chy_place\xe2\x96\x81holder\xe2\x96\x81no\xe2\x96\x81" "3\xef\xbd\x9c>", "");
            else if (user) tl_put3(o, c, "<\xef\xbd\x9chy_User\xef\xbd\x9c>", "");
            else if (ass) tl_put3(o, c, "<\xef\xbd\x9chy_Assistant\xef\xbd\x9c>", "");
            break;
        case TL_PANGU_EMBED:
            if (i == 0 && !sys) jbuf_puts(o, "[unused9]\xe7\xb3\xbb\xe7\xbb\x9f\xef\xbc\x9a[unused10]");
            tl_rows(o, tl_rows_pangu, m + i, 1);
            break;
        case TL_GIGACHAT:
            if (i == 0 && sys) tl_put3(o, c, "<|message_sep|>", "");
            else if (user) tl_put3(o, "user<|role_sep|>", c, "<|message_sep|>available functions<|role_sep|>[]<|message_sep|>");
            else if (ass) tl_put3(o, "assistant<|role_sep|>", c, "<|message_sep|>");
            break;
        case TL_MISTRAL_V7: case TL_MISTRAL_V7_TEKKEN: {
            const char *ts = fmt == TL_MISTRAL_V7 ? " " : "";
            tl_put3(o, sys ? "[SYSTEM_PROMPT]" : user ? "[INST]" : "", ts, c);
            jbuf_puts(o, sys ? "[/SYSTEM_PROMPT]" : user ? "[/INST]" : "</s>");
            break;
        }
        case TL_KIMI_K2:
            if (sys) jbuf_puts(o, "<|im_system|>system<|im_middle|>");
            else if (user) jbuf_puts(o, "<|im_user|>user<|im_middle|>");
            else if (ass) jbuf_puts(o, "<|im_assistant|>assistant<|im_middle|>");
            else if (!strcmp(r, "tool")) jbuf_puts(o, "<|im_system|>tool<|im_middle|>");
            tl_put3(o, c, "<|im_end|>", "");
            break;
        case TL_SEED_OSS:
            tl_put3(o, "<seed:bos>", r, "\n");
            tl_put_c(o, c, ass);
            jbuf_puts(o, "<seed:eos>");
            break;
        }
    }
    /* the prefix once, where there is one; the formats with none (hunyuan, minicpm) skip it */
    const char *ap = NULL;
    switch (fmt) {
    case TL_OPENCHAT: ap = "GPT4 Correct Assistant:"; break;
    case TL_VICUNA: case TL_VICUNA_ORCA: ap = "ASSISTANT:"; break;
    case TL_MONARCH: ap = "<s>assistant\n"; break;
    case TL_CHATGLM_3: ap = "<|assistant|>"; break;
    case TL_CHATGLM_4: ap = "<|assistant|>\n"; break;
    case TL_GRANITE_3_X: case TL_GRANITE_4_0: case TL_GRANITE_4_1: ap = "<|start_of_role|>assistant<|end_of_role|>"; break;
    case TL_YANDEX: ap = " \xd0\x90\xd1\x81\xd1\x81\xd0\xb8\xd1\x81\xd1\x82\xd0\xb5\xd0\xbd\xd1\x82:[SEP]"; break;
    case TL_BAILING: case TL_BAILING2: ap = "<role>ASSISTANT</role>"; break;
    case TL_BAILING_THINK: ap = "<role>ASSISTANT</role><think>"; break;
    case TL_SMOLVLM: ap = "Assistant:"; break;
    case TL_OPENAI_MOE: ap = "<|start|>assistant"; break;
    case TL_KIMI_K2: ap = "<|im_assistant|>assistant<|im_middle|>"; break;
    case TL_SEED_OSS: ap = "<seed:bos>assistant\n"; break;
    case TL_PANGU_EMBED: ap = "[unused9]\xe5\x8a\xa9\xe6\x89\x8b\xef\xbc\x9a"; break;
    case TL_GIGACHAT: ap = "assistant<|role_sep|>"; break;
    }
    if (add_ass && ap) jbuf_puts(o, ap);
}

int template_legacy_apply(int fmt, const template_legacy_msg *m, size_t n, int add_ass, jbuf *o)
{
    if (fmt < 0 || fmt >= TL_N_FORMATS) return -1;
    for (size_t k = 0; k < sizeof tl_simple / sizeof tl_simple[0]; k++) {
        if (tl_simple[k].fmt != fmt) continue;
        for (size_t i = 0; i < n; i++) {
            tl_put3(o, tl_simple[k].pre, m[i].role, tl_simple[k].mid);
            tl_put_c(o, m[i].content, tl_simple[k].trim);
            jbuf_puts(o, tl_simple[k].suf);
        }
        if (add_ass) jbuf_puts(o, tl_simple[k].ass);
        return o->oom ? -1 : 0;
    }
    for (size_t k = 0; k < sizeof tl_by_role / sizeof tl_by_role[0]; k++) {
        if (tl_by_role[k].fmt != fmt) continue;
        tl_rows(o, tl_by_role[k].rows, m, n);
        if (add_ass && tl_by_role[k].ass) jbuf_puts(o, tl_by_role[k].ass);
        return o->oom ? -1 : 0;
    }
    switch (fmt) {
    case TL_MISTRAL_V1: case TL_MISTRAL_V3: case TL_MISTRAL_V3_TEKKEN: tl_mistral(o, fmt, m, n); break;
    case TL_LLAMA_2: case TL_LLAMA_2_SYS: case TL_LLAMA_2_SYS_BOS: case TL_LLAMA_2_SYS_STRIP:
        tl_llama2(o, fmt, m, n);
        break;
    case TL_GEMMA: tl_gemma(o, m, n, add_ass); break;
    case TL_ORION: tl_orion(o, m, n); break;
    default: tl_other(o, fmt, m, n, add_ass); break;
    }
    return o->oom ? -1 : 0;
}

/* ------------------------------------------------------------------ the messages */

#define TL_FAIL(...) (bk_err(err, errlen, __VA_ARGS__), -1)

static int tl_is(const json_value *v, const char *s)
{
    return v && v->type == JSON_STRING && v->len == strlen(s) && !memcmp(v->str, s, v->len);
}

/* One message's role and content as common_chat_templates_apply_legacy
 * hands them over: the content string, or the text parts joined by "\n"
 * (a part adds the newline only after a non-empty start), each then cut at
 * its first NUL (they become C strings there). 0, or -1 with the reason. */
static int tl_message(const json_value *m, jbuf *role, jbuf *content, char *err, size_t errlen)
{
    if (!m || m->type != JSON_OBJECT) return TL_FAIL("failed to parse messages: a message is not an object");
    const json_value *r = json_get(m, "role"), *c = json_get(m, "content");
    if (json_get(m, "tool_calls")) return TL_FAIL("messages with tool_calls are not supported yet");
    if (!r) return TL_FAIL("failed to parse messages: missing 'role'");
    if (r->type != JSON_STRING) return TL_FAIL("failed to parse messages: 'role' must be a string");
    if (!c && !tl_is(r, "assistant")) return TL_FAIL("all non-assistant messages must contain 'content'");
    if (!c) return TL_FAIL("assistant message must contain either 'content' or 'tool_calls'");
    static const char *const strs[] = {"reasoning_content", "name", "tool_call_id"};
    for (size_t k = 0; k < 3; k++) {
        const json_value *v = json_get(m, strs[k]);
        if (v && v->type != JSON_STRING) return TL_FAIL("failed to parse messages: '%s' must be a string", strs[k]);
    }
    jbuf_put(role, r->str, strnlen(r->str, r->len));
    if (c->type == JSON_STRING) {
        jbuf_put(content, c->str, c->len);
    } else if (c->type == JSON_ARRAY) {
        for (size_t k = 0; k < c->n; k++) {
            const json_value *ty = c->items[k]->type == JSON_OBJECT ? json_get(c->items[k], "type") : NULL;
            const json_value *t = ty ? json_get(c->items[k], "text") : NULL;
            if (tl_is(ty, "image_url") || tl_is(ty, "input_audio") || tl_is(ty, "input_video") || tl_is(ty, "video_url"))
                return TL_FAIL("media input is not supported (no multimodal projector)");
            if (!tl_is(ty, "text")) return TL_FAIL("unsupported content[].type");
            if (!t || t->type != JSON_STRING)
                return TL_FAIL("failed to parse messages: content part text must be a string");
            if (content->len) jbuf_putc(content, '\n');
            jbuf_put(content, t->str, t->len);
        }
    } else if (c->type != JSON_NULL) {
        return TL_FAIL("expected 'content' to be a string or an array");
    }
    jbuf_put(role, "", 1);
    jbuf_put(content, "", 1);
    if (role->oom || content->oom) return TL_FAIL("out of memory");
    return 0;
}

int template_legacy_render(int fmt, const json_value *messages, int add_ass, jbuf *out, char *err, size_t errlen)
{
    if (!messages || messages->type != JSON_ARRAY) return TL_FAIL("'messages' must be an array");
    if (template_legacy_format_name(fmt) == NULL)
        return TL_FAIL("this custom template is not supported, try using --jinja");
    size_t n = messages->n;
    jbuf *bufs = calloc(2 * (n ? n : 1), sizeof *bufs);
    template_legacy_msg *ms = calloc(n ? n : 1, sizeof *ms);
    int rc = bufs && ms ? 0 : TL_FAIL("out of memory");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        jbuf_init(&bufs[2 * i]);
        jbuf_init(&bufs[2 * i + 1]);
        rc = tl_message(messages->items[i], &bufs[2 * i], &bufs[2 * i + 1], err, errlen);
        ms[i].role = bufs[2 * i].p;
        ms[i].content = bufs[2 * i + 1].p;
    }
    if (rc == 0 && template_legacy_apply(fmt, ms, n, add_ass, out) != 0) rc = TL_FAIL("out of memory");
    for (size_t i = 0; bufs && i < 2 * n; i++) jbuf_free(&bufs[i]);
    free(bufs);
    free(ms);
    return rc;
}
