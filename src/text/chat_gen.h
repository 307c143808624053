/*
 * chat_gen.h -- b11669's answer-parser generator for the templates that take
 * the differential autoparser path (autoparser::peg_generator::generate_parser
 * and autoparser::build_parser, common/chat-auto-parser-generator.cpp, plus
 * the fields common_chat_templates_apply_jinja adds after it in
 * common/chat.cpp): from a template's chat_analysis (chat_analyze.h) and the
 * request's inputs, the PEG arena (peg.h) with b11669's parser ids, whether a
 * grammar goes with it and whether it is lazy, the lazy grammar's triggers,
 * the preserved tokens, the additional stops, supports_thinking and the
 * thinking tags.
 *
 * The grammar text itself is peg_build_grammar(&out.arena, out.grammar_lazy)
 * of src/sampling/peg_grammar.h (a layer above this one), called when
 * out.has_grammar is set; b11669's apply returns exactly that string.
 *
 * Covered: content (plain or wrapped in markers), the reasoning block,
 * response_format's json_schema, and tool calls in the three formats the
 * analysis finds (JSON_NATIVE, TAG_WITH_JSON, TAG_WITH_TAGGED), with
 * tool_choice auto / required / none and parallel calls; schemas written as
 * b11669's typed schema nodes keep them (chat_gen_schema.c). Refused with
 * CHAT_GEN_UNSUPPORTED and the reason: JSON tool calls under nested dot keys
 * (no shared template's analysis gives them). Not taken: a continued final
 * message (continue_final_message changes the generation prompt; the caller
 * passes the plain one). The specialised parsers (chat_specialized() !=
 * CA_SPEC_NONE) are chat_gen_specialized's (chat_spec*.c), below.
 */
#ifndef BANKML_CHAT_GEN_H
#define BANKML_CHAT_GEN_H

#include <stddef.h>

#include "base/json.h"
#include "text/chat_analyze.h"
#include "text/chat_peg.h"
#include "text/peg.h"

/* b11669's common_chat_tool_choice */
typedef enum { CHAT_TOOL_CHOICE_AUTO, CHAT_TOOL_CHOICE_REQUIRED, CHAT_TOOL_CHOICE_NONE } chat_tool_choice;
/* b11669's common_reasoning_format (its enum order) */
typedef enum {
    CHAT_REASONING_NONE, CHAT_REASONING_AUTO, CHAT_REASONING_DEEPSEEK_LEGACY, CHAT_REASONING_DEEPSEEK
} chat_reasoning_format;

typedef struct {
    const json_value *tools;            /* the request's tools array (OpenAI shape), NULL or [] for none */
    chat_tool_choice tool_choice;
    int parallel_tool_calls;
    chat_reasoning_format reasoning_format;
    const json_value *json_schema;      /* response_format's schema, NULL for none */
    const char *generation_prompt;      /* common_chat_template_generation_prompt: the render with
                                           add_generation_prompt minus the render without it */
    size_t generation_prompt_len;
    int thinking_disabled;              /* b11669's enable_thinking false (the request's chat_template_kwargs
                                           enable_thinking: false); 0 is its default, true. Read by the
                                           specialised deepseek_v3_2 and minimax_m3 only (the others see it
                                           through the generation prompt) */
} chat_gen_inputs;

enum { CHAT_GRAMMAR_TRIGGER_WORD = 1, CHAT_GRAMMAR_TRIGGER_PATTERN = 2 };   /* b11669's type numbers */

typedef struct {
    int type;
    char *value;
} chat_gen_trigger;

typedef struct {
    peg_arena arena;                    /* built (peg_build done): read-only from here */
    chat_format format;                 /* chat_peg_parse's format (CHAT_FORMAT_PEG_NATIVE but for the
                                           specialised parsers with their own mapper) */
    int has_grammar;                    /* a grammar goes with the answer (tools or response_format) */
    int grammar_lazy;                   /* ... constraining only after a trigger */
    chat_gen_trigger *triggers;
    size_t ntriggers;
    char **preserved_tokens;            /* the analysis' markers, in its order */
    size_t npreserved;
    char **additional_stops;
    size_t nstops;
    int supports_thinking;
    char *thinking_start_tag;           /* "" when none */
    char *thinking_end_tag;             /* NULL: thinking_end_tags is []; else its first */
    char **thinking_end_tags;           /* b11669's thinking_end_tags, in its order (the autoparser gives
                                           one; Qwen3.5 "\n</think>", "</think>", "<tool_call>") */
    size_t nthinking_end_tags;
    char *generation_prompt;            /* as given (no continuation yet) */
    size_t generation_prompt_len;
} chat_gen_params;

enum { CHAT_GEN_OK = 0, CHAT_GEN_UNSUPPORTED = 1, CHAT_GEN_ERROR = -1 };

/* Builds the parameters for one request as generate_parser and
 * common_chat_templates_apply_jinja do, into *out (initialised here; free
 * with chat_gen_free in every case). Returns CHAT_GEN_OK; CHAT_GEN_UNSUPPORTED
 * with bankml's reason for what it does not reproduce yet (see above); or
 * CHAT_GEN_ERROR with the reason (out of memory, the arena does not build). */
int chat_gen(const chat_analysis *a, const chat_gen_inputs *in, chat_gen_params *out, char *err, size_t errlen);
void chat_gen_free(chat_gen_params *p);

/* b11669's common_chat_params_init_<s> (common/parsers/<name>.cpp) for a template
 * chat_specialized(tmpl, len) named s: the same fields as chat_gen, from the
 * template's source and the request's inputs (in->generation_prompt is the
 * caller's render, as for chat_gen; for ministral_3 b11669 renders it over
 * its adjusted messages -- the thinking blocks -- which the caller must do).
 * Every init is ported; a number that is none gives CHAT_GEN_UNSUPPORTED
 * with the reason (docs/modules/chat_spec.md lists what the caller renders
 * around each init: rewritten messages, the Gemma 4 generation-prompt
 * override).
 * CA_SPEC_NONE: CHAT_GEN_ERROR (chat_gen takes those). *out is initialised
 * here in every case; free it with chat_gen_free. */
int chat_gen_specialized(ca_specialized s, const char *tmpl, size_t len, const chat_gen_inputs *in,
                         chat_gen_params *out, char *err, size_t errlen);

#endif
