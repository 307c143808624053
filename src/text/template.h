/*
 * template.h -- chat templates: a Jinja-subset interpreter that renders the
 * way llama.cpp's own engine (common/jinja, build b11669) renders, and the
 * message preparation llama-server does before it renders (common/chat.cpp).
 *
 * Two levels:
 *   template_render_globals()  renders a template with a caller-built object of
 *                              global variables; nothing else happens (the bare
 *                              Jinja engine).
 *   template_render()          does what llama-server's /apply-template does with
 *                              a list of OpenAI-style messages: validates and
 *                              rebuilds them, probes the template's capabilities
 *                              (system role, typed content) as llama.cpp's caps
 *                              pass does, applies the same workarounds, builds the
 *                              context (messages, bos/eos, enable_thinking,
 *                              datetime, ...) and renders.
 *
 * Every function that takes untrusted input returns 0 on success or -1 with a
 * one-line reason in err. Hostile templates are bounded: nesting depth, macro
 * recursion, executed steps, memory and output size all have limits, and a
 * template that exceeds one fails with a reason instead of hanging.
 */
#ifndef BANKML_TEMPLATE_H
#define BANKML_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "base/json.h"

/* continue_final_message: none, true (auto), "content", "reasoning_content" */
enum { TEMPLATE_CONTINUE_NONE, TEMPLATE_CONTINUE_AUTO, TEMPLATE_CONTINUE_CONTENT, TEMPLATE_CONTINUE_REASONING };

typedef struct {
    int add_generation_prompt;      /* 1: ask the template for the assistant prefix */
    int continue_final;             /* TEMPLATE_CONTINUE_*: the last message is continued (it leaves
                                       the list; the generation prompt, then its content, follow the
                                       render); template_continuation sets it for a prefill */
    int prefill_assistant;          /* 1 (llama-server's default): a final assistant message is
                                       continued (template_continuation) */
    const char *reasoning_effort;   /* the request's reasoning_effort, NULL when absent: "none" turns
                                       thinking off, another non-empty value is the kwarg
                                       reasoning_effort (and reasoning_strength) */
    const char *bos_token;          /* the vocab's BOS piece ("" or NULL when none) */
    const char *eos_token;          /* the vocab's EOS piece */
    int add_bos, add_eos;           /* the vocab's add_bos/add_eos flags: llama-server strips a
                                       leading bos_token / trailing eos_token from the prompt
                                       when they are set (the tokenizer adds them again) */
    const json_value *tools;        /* OpenAI tools array, or NULL */
    int enable_thinking;            /* -1: let bankml guess (see template.md), 0, 1 */
    int64_t now;                    /* unix time for strftime_now, datetime, date_string;
                                       0 means time(NULL) */
    const json_value *kwargs;       /* chat_template_kwargs object, or NULL */
    int preserve_reasoning;         /* llama-server's default kwarg preserve_reasoning: 1 (its
                                       default), 0 (--no-reasoning-preserve), -1 (not passed) */
} template_opts;

/* Sets the defaults llama-server uses: add_generation_prompt 1, empty bos/eos,
 * no add_bos/add_eos, no tools, enable_thinking -1, now 0, preserve_reasoning 1,
 * no continuation, prefill_assistant 1, no reasoning_effort. */
void template_opts_init(template_opts *o);

/* common_chat_continuation_parse: true is AUTO, "content" and
 * "reasoning_content" name theirs, anything else (NULL too) is NONE. */
int template_continue_parse(const json_value *v);

/* oaicompat_chat_params_parse's continuation rules over the messages
 * (checked JSON) and o: a final assistant message with prefill_assistant
 * and no continue_final becomes AUTO without the generation prompt (two
 * assistant messages at the end refused); a continuation beside
 * add_generation_prompt, or of an assistant message with tool calls, is
 * refused. Updates o; 0, or -1 with llama-server's 400 text. */
int template_continuation(const json_value *messages, template_opts *o, char *err, size_t errlen);

/* The text a continuation puts after the generation prompt (o after
 * template_continuation): the continued message's content (its text parts
 * joined by a blank line) when it is continued as content, which b11669's
 * chat parser also puts at the start of a non-streamed answer's content.
 * Appends it to out and returns 1; 0 when there is none; -1 out of memory. */
int template_continued_content(const json_value *messages, const template_opts *o, jbuf *out);

/* The name of b11669's specialized chat handler for a template source
 * (common_chat_try_specialized_template's tests in its order: "GPT-OSS",
 * "Qwen3-Coder", "LFM2", ...), or NULL when it goes to the differential
 * autoparser. */
const char *template_handler(const char *src, size_t len);

/* The enable_thinking a request that does not set it renders with (its
 * enable_thinking -1): b11669 takes the template's supports_thinking from its
 * analysis, which bankml does not reproduce yet; this is bankml's guess (a
 * <think> tag, reasoning_content, or "thinking" other than the variable
 * enable_thinking), equal to b11669's for every template of ../shared/templates
 * that reads enable_thinking (testing/oracle_template_caps.py). */
int template_thinking_default(const char *tmpl, size_t len);

/* Renders messages (a JSON array of {role, content, tool_calls, ...}) exactly
 * as llama-server's /apply-template returns the "prompt" (the continuation
 * rules of template_continuation applied first). Appends to out.
 * Returns 0, or -1 with a reason in err (the template raised, used a feature
 * we do not implement, exceeded a limit, or the messages are invalid), or -2
 * when the template's raise_exception stops a template with a dedicated
 * b11669 handler (template_handler: llama-server's 500). A raise_exception's
 * reason is llama.cpp's text (the CallExpression's line and column, the
 * source around it, "Error: Jinja Exception: ..."), behind "Unable to
 * generate parser for this template. Automatic parser generation failed: "
 * on the autoparser's path (llama-server's 400). */
int template_render(const char *tmpl, size_t tmpl_len, const json_value *messages,
                    const template_opts *o, jbuf *out, char *err, size_t errlen);

/* The CLI entry: `input` is the text read from stdin, either a JSON array of
 * messages or an object with "messages" (and optionally "tools",
 * "add_generation_prompt", "chat_template_kwargs" which override o). */
int template_render_request(const char *tmpl, size_t tmpl_len, const char *input,
                            size_t input_len, const template_opts *o, jbuf *out,
                            char *err, size_t errlen);

/* The bare engine: renders tmpl with the members of `globals` (a JSON object)
 * as global variables, `now` for strftime_now. No message preparation. */
int template_render_globals(const char *tmpl, size_t tmpl_len, const json_value *globals,
                            int64_t now, jbuf *out, char *err, size_t errlen);

/* The template llama-server uses when a GGUF has no tokenizer.chat_template
 * (or it is the word "chatml"): plain ChatML with the generation prompt. */
extern const char template_chatml_fallback[];

/* Checks that tmpl lexes and parses. 0, or -1 with the reason. */
int template_check(const char *tmpl, size_t tmpl_len, char *err, size_t errlen);

/* ---- llama-server's built-in formats, used without Jinja (--no-jinja) ----
 * llama.cpp b11669's llm_chat_template_from_str, llm_chat_detect_template and
 * llm_chat_apply_template (src/llama-chat.cpp), as common/chat.cpp's
 * common_chat_templates_apply_legacy calls them (template_legacy.c). A format
 * is an int id >= 0; -1 is "none". */

/* One message as llama_chat_message holds it: two C strings. */
typedef struct {
    const char *role;
    const char *content;
} template_legacy_msg;

/* The built-in names in llama_chat_builtin_templates' order (sorted, as
 * llama-server's --help lists them); *names points at a static array when
 * names is not NULL. Returns how many (54 in b11669). */
size_t template_legacy_builtins(const char *const **names);

/* llm_chat_detect_template: the format a built-in name, else the text of a
 * template (a C string: llama.cpp stops at a NUL), stands for, by its
 * substrings in llama.cpp's order; -1 when none matches (llama-server's
 * "the supplied chat template is not supported"). */
int template_legacy_detect(const char *tmpl);

/* A format's built-in name ("dots1" for the one llama.cpp detects but does
 * not name); NULL for an id that is not a format. */
const char *template_legacy_format_name(int fmt);

/* llm_chat_apply_template: the n messages in format fmt, appended to out;
 * add_ass asks for the assistant prefix (formats without one ignore it).
 * 0, or -1 for an unknown id or when out ran out of memory. */
int template_legacy_apply(int fmt, const template_legacy_msg *msgs, size_t n, int add_ass, jbuf *out);

/* What llama-server's legacy path renders for an OpenAI-style messages
 * array: each message's role and content (a string, null as "", or text
 * parts joined by "\n"; each cut at its first NUL), then
 * template_legacy_apply. Refuses (-1, reason in err) what template_render
 * refuses too: tool_calls, media parts, malformed messages. Appends to out. */
int template_legacy_render(int fmt, const json_value *messages, int add_ass, jbuf *out, char *err, size_t errlen);

/* What a template does with its inputs, as b11669's jinja::caps_get finds it by rendering probes. */
typedef struct tmpl_caps {
    int supports_tools, supports_tool_calls, supports_system_role, supports_parallel_tool_calls;
    int supports_preserve_reasoning, supports_reasoning_effort;
    int supports_string_content, supports_typed_content, supports_object_arguments;
} tmpl_caps;

/* b11669's caps of tmpl (common_chat_templates_init's patched source, then
 * jinja::caps_get's eight probe renders: typed content, system role, tool
 * calls with object then string arguments, parallel calls, preserved
 * reasoning, reasoning effort), as /props' chat_template_caps reports them.
 * 0, or -1 with the reason (the template does not parse). */
int template_caps(const char *tmpl, size_t len, tmpl_caps *out, char *err, size_t errlen);

#endif
