/*
 * chat_analyze.h -- how llama-server b11669 (--jinja) reads a chat template
 * before it can parse answers: which specialised parser (one of common/parsers/)
 * the template gets, and otherwise the differential analysis
 * autoparser::autoparser::analyze_template (common/chat-diff-analyzer.cpp,
 * chat-auto-parser-helpers.cpp) runs: it renders the template with probe
 * messages (plain answers, reasoning_content, tool_calls with one and two
 * calls, one and two arguments, other ids, ...) through our Jinja engine and
 * diffs the outputs to find the reasoning markers and mode, the content
 * markers, the tool-call format and its markers, the user/assistant start
 * markers and the preserved tokens.
 *
 * The structs mirror b11669's (names, nesting and enum names are llama.cpp's);
 * the generator that builds the PEG parser from them (peg_generator::
 * generate_parser) is the next step and reads nothing else.
 */
#ifndef BANKML_CHAT_ANALYZE_H
#define BANKML_CHAT_ANALYZE_H

#include <stddef.h>

#include "text/template.h"

/* b11669's autoparser::reasoning_mode */
typedef enum { CA_REASONING_NONE, CA_REASONING_TAG_BASED, CA_REASONING_TOOLS_ONLY } ca_reasoning_mode;
/* autoparser::content_mode */
typedef enum { CA_CONTENT_PLAIN, CA_CONTENT_ALWAYS_WRAPPED, CA_CONTENT_WRAPPED_WITH_REASONING } ca_content_mode;
/* autoparser::tool_format */
typedef enum { CA_TOOL_NONE, CA_TOOL_JSON_NATIVE, CA_TOOL_TAG_WITH_JSON, CA_TOOL_TAG_WITH_TAGGED } ca_tool_format;
/* autoparser::call_id_position */
typedef enum { CA_ID_NONE, CA_ID_PRE_FUNC_NAME, CA_ID_BETWEEN_FUNC_AND_ARGS, CA_ID_POST_ARGS } ca_call_id_position;

/* A string of the analysis: bytes (may hold NULs in principle) plus a NUL. */
typedef struct {
    const char *p;
    size_t n;
} ca_str;

typedef struct {
    ca_tool_format mode;
    ca_str section_start, section_end;      /* "<tool_call>", "[TOOL_CALLS]", "" */
    ca_str per_call_start, per_call_end;    /* for templates with markers around each call */
    int fun_name_is_key;                    /* JSON: {"<name>": {args}} */
    int tools_array_wrapped;                /* JSON calls inside [...] */
    int openai_wrapper_trigger;             /* model emits the OpenAI function wrapper */
    ca_str function_field, name_field, args_field, id_field, gen_id_field; /* "function", "name", "arguments", "", "" */
    ca_str *parameter_order;                /* JSON field names in the order they appear */
    size_t n_parameter_order;
} ca_tool_format_analysis;

typedef struct {
    ca_str name_prefix, name_suffix, args_separator, close;
} ca_tool_function_analysis;

typedef struct {
    ca_str start, end, name_prefix, name_suffix, value_prefix, value_suffix, separator;
    int tolerate_intertag_whitespace;
} ca_tool_arguments_analysis;

typedef struct {
    ca_call_id_position pos;
    ca_str prefix, suffix;
} ca_tool_id_analysis;

/* The specialised parser b11669's common_chat_template constructor detects
 * (its order of substring tests; common_chat_try_specialized_template then
 * uses it instead of the analysis). Named after common_chat_params_init_*. */
typedef enum {
    CA_SPEC_NONE,
    CA_SPEC_MINISTRAL_3,
    CA_SPEC_LLM_JP_HARMONY,
    CA_SPEC_GPT_OSS,
    CA_SPEC_MUSE_GLIMMER,
    CA_SPEC_FUNCTIONARY_V3_2,
    CA_SPEC_KIMI_K2,
    CA_SPEC_KIMI_K3,
    CA_SPEC_K2_HORIZON,
    CA_SPEC_LING3,
    CA_SPEC_COHERE2MOE,
    CA_SPEC_LFM2,             /* init_lfm2 with tool_list_tokens = true */
    CA_SPEC_LFM2_5,           /* init_lfm2 with tool_list_tokens = false */
    CA_SPEC_GIGACHAT_V3,
    CA_SPEC_MINIMAX_M3,
    CA_SPEC_DEEPSEEK_V3_2,
    CA_SPEC_GEMMA4,
    CA_SPEC_GEMMA4_OUTDATED,  /* gemma4 after convert_tool_responses_gemma4 */
    CA_SPEC_MINICPM5,
    CA_SPEC_TRANSLATE_GEMMA,
    CA_SPEC_QWEN3_CODER
} ca_specialized;

/* autoparser::autoparser, filled as analyze_template fills it. */
typedef struct {
    tmpl_caps jinja_caps;
    ca_str user_start, assistant_start;
    struct { ca_reasoning_mode mode; ca_str start, end; } reasoning;
    struct { ca_content_mode mode; ca_str start, end; int requires_nonnull_content; } content;
    struct {
        ca_tool_format_analysis format;
        ca_tool_function_analysis function;
        ca_tool_arguments_analysis arguments;
        ca_tool_id_analysis call_id;
    } tools;
    int analysis_complete;
    ca_str *preserved_tokens;     /* union of the non-empty markers, trimmed, then the workarounds' */
    size_t n_preserved_tokens;
    ca_str *additional_stops;     /* literal stop strings (Laguna's "</assistant>") */
    size_t n_additional_stops;
    void *mem_;                   /* owns every string above; chat_analysis_free() */
} chat_analysis;

/* The specialised parser for a template text (normalised as llama.cpp's lexer
 * keeps it: CRLF and CR as LF, one trailing LF dropped, then the substring
 * tests in b11669's order). */
ca_specialized chat_specialized(const char *tmpl, size_t len);

/* common_chat_params_init_<name> without the prefix ("gpt_oss"), "none", or
 * the kit's names for the two lambdas ("lfm2_5", "gemma4_outdated"). */
const char *chat_specialized_name(ca_specialized s);

/* Runs analyze_template on tmpl with caps (jinja::caps_get's answer for it),
 * bos/eos the strings the template sees as bos_token/eos_token (NULL: "").
 * Returns 0 with *out filled (free with chat_analysis_free), or -1 with the
 * reason where b11669 throws (a JSON tool call that does not parse, a
 * substring past the end) and *out freed. A probe the template refuses to
 * render is not an error: b11669 skips that step and so does this. */
int chat_analyze(const char *tmpl, size_t len, const tmpl_caps *caps, const char *bos, const char *eos,
                 chat_analysis *out, char *err, size_t errlen);

void chat_analysis_free(chat_analysis *a);

/* The enum names b11669 prints ("TAG_BASED", "ALWAYS_WRAPPED", "JSON_NATIVE", "POST_ARGS"). */
const char *chat_reasoning_mode_name(ca_reasoning_mode m);
const char *chat_content_mode_name(ca_content_mode m);
const char *chat_tool_format_name(ca_tool_format m);
const char *chat_call_id_position_name(ca_call_id_position m);

/* The analysis as one JSON object, fields named and nested as b11669's structs
 * (the shape testing/kit_chat_analyze.cpp prints; caps and specialized first). */
void chat_analysis_json(const chat_analysis *a, ca_specialized spec, jbuf *out);

#endif
