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

typedef struct {
    int add_generation_prompt;      /* 1: ask the template for the assistant prefix */
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
 * no add_bos/add_eos, no tools, enable_thinking -1, now 0, preserve_reasoning 1. */
void template_opts_init(template_opts *o);

/* Renders messages (a JSON array of {role, content, ...}) exactly as
 * llama-server's /apply-template returns the "prompt". Appends to out.
 * Returns 0, or -1 with a reason in err (the template raised, used a feature
 * we do not implement, exceeded a limit, or the messages are invalid). */
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

#endif
