/*
 * chat_peg.h -- b11669's chat answer parser (common_chat_peg_parse in
 * common/chat.cpp with common_chat_peg_mapper in common/chat-peg-parser.cpp):
 * a model's answer so far, parsed with the chat format's PEG arena (peg.h),
 * becomes a message: content, reasoning_content and tool calls (name,
 * arguments text, id).
 *
 * How the engine will call it (not wired yet): once per request it has the
 * arena, format and generation prompt the template step gave (b11669's
 * common_chat_params: parser, format, generation_prompt); after every token
 * it calls chat_peg_parse(..., is_partial 1) on the whole answer so far and
 * diffs the message with the previous one for the stream's deltas (b11669's
 * common_chat_msg_diff), and at the end once with is_partial 0. One call is
 * linear in the answer for the arenas chat formats build, so the whole
 * stream is quadratic in the answer's length exactly as b11669's is.
 *
 * b11669's parse input is generation_prompt + answer (the template's
 * assistant prefix, e.g. "<|im_start|>assistant\n<think>\n", so the arena can
 * see an open reasoning block); the parse is always lenient. A failed parse
 * of a partial answer that got past its first byte yields the message of
 * what the failing result carried (b11669: the mapper over the failed
 * result, whose node list is empty: an empty assistant message); any other
 * failure is b11669's error "The model produced output that does not match
 * the expected <format> format".
 */
#ifndef BANKML_CHAT_PEG_H
#define BANKML_CHAT_PEG_H

#include <stddef.h>

#include "base/json.h"
#include "text/peg.h"

/* ---- b11669's common_chat_peg_builder helpers (the generator's vocabulary) ---- */

#define CHAT_PEG_MAX_PERMUTE 6      /* COMMON_CHAT_MAX_PERMUTE */

/* tag(name, p), inside atomic() for the tags b11669 builds atomic: tool-open, tool-close,
 * tool-id, tool-name, tool-arg-open, tool-arg-close, tool-arg-name. The mapper reads the
 * tags reasoning, content, tool, tool-open, tool-close, tool-id, tool-name, tool-args,
 * tool-arg, tool-arg-open, tool-arg-close, tool-arg-name, tool-arg-value,
 * tool-arg-string-value (and reasoning-block, which it ignores). */
size_t chat_peg_tag(peg_arena *a, const char *tag, size_t p);
/* tag_with_safe_content: (p | rule(name, content(!marker . until(marker))))*, or with an
 * empty marker (p | rule(name, content(.)))* */
size_t chat_peg_tag_with_safe_content(peg_arena *a, const char *tag_name, const char *marker, size_t p);
/* permute: every parser once, in any order (rules "<prefix>-<bits left>"); a plain sequence
 * for one parser or more than CHAT_PEG_MAX_PERMUTE; epsilon for none */
size_t chat_peg_permute(peg_arena *a, const char *rule_prefix, const size_t *parsers, size_t n);
/* prefix: literal(s up to the first delimiter; all of s when delimiter is empty); epsilon for "" */
size_t chat_peg_prefix(peg_arena *a, const char *s, const char *delimiter);
/* optspace: tag's text with its leading and trailing whitespace characters each optional */
size_t chat_peg_optspace(peg_arena *a, const char *tag);

/* b11669's common_chat_format */
typedef enum {
    CHAT_FORMAT_CONTENT_ONLY, CHAT_FORMAT_PEG_SIMPLE, CHAT_FORMAT_PEG_NATIVE,
    CHAT_FORMAT_PEG_GEMMA4, CHAT_FORMAT_PEG_MINIMAX_M3, CHAT_FORMAT_COUNT
} chat_format;

/* "Content-only", "peg-simple", "peg-native", "peg-gemma4", "peg-minimax-m3" */
const char *chat_format_name(chat_format f);
/* 0 and *out, or -1 for a name that is none of those */
int chat_format_from_name(const char *name, chat_format *out);

typedef struct {
    jbuf name, arguments, id;
} chat_tool_call;

typedef struct {
    jbuf content, reasoning;        /* role is always "assistant" */
    chat_tool_call *calls;
    size_t ncalls, cap;
} chat_msg;

void chat_msg_init(chat_msg *m);
void chat_msg_free(chat_msg *m);
/* {"role":"assistant","content":"...","reasoning_content":"...","tool_calls":[{"name","arguments","id"}]}
 * (the shape testing/kit_chat.cpp prints; not an API answer shape) */
void chat_msg_put_json(const chat_msg *m, jbuf *out);

enum { CHAT_PEG_OK = 0, CHAT_PEG_NO_MATCH = 1, CHAT_PEG_LIMIT = -1 };

/* Parses generation_prompt + text with arena (NULL or empty: b11669's default
 * content(rest()) + end() parser) as common_chat_peg_parse does, into *out
 * (initialised here; free with chat_msg_free in every case). Returns
 * CHAT_PEG_OK; CHAT_PEG_NO_MATCH with b11669's error text in err; or
 * CHAT_PEG_LIMIT with bankml's reason (nesting bound, out of memory). The
 * peg-gemma4 and peg-minimax-m3 formats use b11669's mappers of those names
 * (arguments rebuilt as JSON from the typed AST, no whitespace-only reasoning
 * cleanup); the others its common_chat_peg_mapper. */
int chat_peg_parse(const peg_arena *arena, chat_format format, const char *generation_prompt, size_t gp_len,
                   const char *text, size_t len, int is_partial, chat_msg *out, char *err, size_t errlen);

/* One step of a stream: b11669's common_chat_msg_diff. A delta carries either a
 * reasoning_content piece, a content piece, or a tool call (index, and name / id
 * when they changed or the call is new, and an arguments piece). */
typedef struct {
    jbuf reasoning_delta, content_delta;
    size_t tool_index;              /* PEG_INVALID: no tool call in this delta */
    chat_tool_call call;
} chat_msg_delta;

/* b11669's common_chat_msg_diff::compute_diffs(prev, cur): the deltas from the
 * message parsed for the previous token to this one, in its order (reasoning,
 * content, the last known call's growth, then each new call). Returns the
 * number of deltas with *out malloc'd (free with chat_msg_deltas_free), or -1
 * with b11669's exception text in *err (reset here): "Invalid diff: now finding
 * less tool calls!\n" and both lists, "Invalid diff: tool call mismatch!", or
 * "Invalid diff: '<old>' not found at start of '<new>'". */
int chat_msg_diffs(const chat_msg *prev, const chat_msg *cur, chat_msg_delta **out, jbuf *err);
void chat_msg_deltas_free(chat_msg_delta *d, size_t n);

#endif
