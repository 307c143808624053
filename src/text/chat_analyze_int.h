/*
 * chat_analyze_int.h -- what the files of the template analysis share:
 * chat_analyze.c (the phases, the workarounds, the specialised detection),
 * chat_analyze_tools.c (the tool-call phase), chat_analyze_probe.c (the
 * probe renders) and chat_analyze_util.c (strings, diffs, the small tagged
 * PEG matcher).
 *
 * Strings are immutable (pointer, length) pairs in one arena per analysis;
 * b11669's C++ exceptions (std::string::substr past the end, a JSON parse
 * error) leave through ca_throw() to chat_analyze(), which returns -1.
 */
#ifndef BANKML_CHAT_ANALYZE_INT_H
#define BANKML_CHAT_ANALYZE_INT_H

#include <setjmp.h>
#include <stddef.h>

#include "text/chat_analyze.h"

#define CA_NPOS ((size_t)-1)

typedef struct ca_block ca_block;

typedef struct {
    ca_block *blocks;      /* every allocation of one analysis */
    jmp_buf *on_error;     /* ca_throw() jumps here */
    char *err;
    size_t errlen;
    const char *tmpl;      /* the template text as given (rendered) */
    size_t tmpl_len;
    const char *tmpl_norm; /* as the lexer keeps it (the substring tests read it) */
    size_t tmpl_norm_len;
    const char *bos, *eos;
    tmpl_caps caps;
    unsigned long long steps;  /* parser steps so far (bounded by CA_MAX_STEPS) */
} ca_ctx;

/* What one analysis may spend in the PEG matcher: real templates take well
 * under a million steps; a render built to make the matcher quadratic or
 * cubic (long runs of '<' with no '>') is refused instead of hanging. */
#define CA_MAX_STEPS 200000000ULL

void ca_throw(ca_ctx *C, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
void *ca_alloc(ca_ctx *C, size_t n);
void ca_free_blocks(ca_block *b);

/* ---- strings (every result is NUL-terminated, in the arena) ---- */
ca_str ca_s(ca_ctx *C, const char *p, size_t n);
ca_str ca_lit(const char *s);                    /* a static C string, not copied */
ca_str ca_cat(ca_ctx *C, ca_str a, ca_str b);
/* std::string::substr: throws std::out_of_range's words when pos > size */
ca_str ca_sub(ca_ctx *C, ca_str s, size_t pos, size_t n);
size_t ca_find(ca_str h, ca_str needle, size_t from);    /* std::string::find */
size_t ca_rfind(ca_str h, ca_str needle);                /* std::string::rfind */
size_t ca_find_c(ca_str h, char c, size_t from);
int ca_eq(ca_str a, ca_str b);
int ca_eq_c(ca_str a, const char *s);
int ca_has(ca_str h, const char *needle);
int ca_ends_with(ca_str s, ca_str suffix);
ca_str ca_trim(ca_ctx *C, ca_str s);             /* trim_whitespace */
ca_str ca_trim_leading(ca_ctx *C, ca_str s);     /* trim_leading_whitespace */

/* ---- segments: markers <...> / [...] and text between ---- */
typedef struct {
    int marker;            /* 1: MARKER, 0: TEXT */
    ca_str v;
} ca_seg;

/* segmentize_markers; *n gets the count */
ca_seg *ca_segmentize(ca_ctx *C, ca_str text, size_t *n);
/* prune_whitespace_segments, in place; returns the new count */
size_t ca_prune_ws(ca_ctx *C, ca_seg *s, size_t n);

typedef struct {
    ca_str prefix, suffix, left, right;
} ca_diff;

ca_diff ca_diff_split(ca_ctx *C, ca_str left, ca_str right);       /* calculate_diff_split */
ca_str ca_until_common_prefix(ca_ctx *C, ca_str full, ca_str left, ca_str right);

/* ---- the tagged PEG matcher (common_peg_parser_builder's few parsers the
 * analysis uses, parsed as b11669 parses without the lenient flag) ---- */
typedef struct ca_peg ca_peg;
ca_peg *ca_peg_new(ca_ctx *C);
int ca_p_lit(ca_peg *P, ca_str s);
int ca_p_lit_c(ca_peg *P, const char *s);
int ca_p_seq(ca_peg *P, int n, ...);
int ca_p_choice(ca_peg *P, int n, ...);
int ca_p_rep(ca_peg *P, int child, int min, int max);     /* max -1: unbounded */
int ca_p_not(ca_peg *P, int child);
int ca_p_any(ca_peg *P);
int ca_p_space(ca_peg *P);
int ca_p_until(ca_peg *P, int n, ...);                    /* n ca_str delimiters; 0: rest() */
int ca_p_end(ca_peg *P);
int ca_p_tag(ca_peg *P, const char *tag, int child);
int ca_p_marker(ca_peg *P);
#define ca_p_opt(P, c) ca_p_rep((P), (c), 0, 1)
#define ca_p_star(P, c) ca_p_rep((P), (c), 0, -1)
#define ca_p_rest(P) ca_p_until((P), 0)

/* parse_and_extract (at 0) / parse_anywhere_and_extract with root; returns
 * success; ca_peg_tag() then reads a tag of that parse ("" when absent). */
int ca_peg_parse(ca_peg *P, int root, ca_str in);
int ca_peg_parse_anywhere(ca_peg *P, int root, ca_str in);
ca_str ca_peg_tag(ca_peg *P, const char *tag);

/* ---- probes (chat_analyze_probe.c) ---- */
#define FUN_FIRST "FFF_FIRST_FUN_F"
#define FUN_SECOND "SSS_SECOND_FUN_S"
#define ARG_FIRST "AA_ARG_FST_AA"
#define ARG_SECOND "BB_ARG_SND_BB"
#define USER_MSG "U_USER_MSG Hello END_U"
#define USER_MSG_TWO "V_USER_MSG Hello END_V"
#define ASSISTANT_MSG "A_ASST_MSG I can help END_A"
#define THINKING_CONTENT "REASON_PART I am thinking END_R"
#define CALL_ID_001 "call00001"
#define CALL_ID_002 "call00002"
#define CALL_ID_999 "call99999"

/* the probe messages, as JSON text */
#define M_USER "{\"role\":\"user\",\"content\":\"" USER_MSG "\"}"
#define M_USER_TWO "{\"role\":\"user\",\"content\":\"" USER_MSG_TWO "\"}"
#define M_ASST "{\"role\":\"assistant\",\"content\":\"" ASSISTANT_MSG "\"}"
#define TC(name, args, id) \
    "{\"id\":\"" id "\",\"type\":\"function\",\"function\":{\"name\":\"" name "\",\"arguments\":" args "}}"
#define ARGS_BOTH "{\"" ARG_FIRST "\":\"XXXX\",\"" ARG_SECOND "\":\"YYYY\"}"
#define TC_FIRST TC(FUN_FIRST, ARGS_BOTH, CALL_ID_001)
#define TC_SECOND TC(FUN_SECOND, ARGS_BOTH, CALL_ID_002)
#define TC_ALT_ID TC(FUN_FIRST, ARGS_BOTH, CALL_ID_999)
#define TC_ZERO TC(FUN_FIRST, "{}", CALL_ID_001)
#define TC_ONE TC(FUN_FIRST, "{\"" ARG_FIRST "\":\"XXXX\"}", CALL_ID_001)
#define TC_ONE_OTHER_VAL TC(FUN_FIRST, "{\"" ARG_FIRST "\":\"YYYY\"}", CALL_ID_001)
#define TC_OTHER_ARG TC(FUN_FIRST, "{\"" ARG_SECOND "\":\"YYYY\"}", CALL_ID_001)
#define M_CALLS(calls) "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[" calls "]}"
#define CONV(asst) "[" M_USER "," asst "]"

typedef struct {
    const char *messages;  /* JSON array text */
    int tools;             /* the two test functions */
    int add_generation_prompt;
    int enable_thinking;
} ca_params;

typedef struct {
    int ok;                /* both rendered */
    ca_diff diff;
    ca_str a, b;           /* the two outputs */
} ca_cmp;

/* compare_variants: renders p, then p with b_messages (when not NULL) and
 * enable_thinking b_thinking (when >= 0), and splits the difference */
ca_cmp ca_compare(ca_ctx *C, const ca_params *p, const char *b_messages, int b_thinking);

/* analyze_tools (chat_analyze_tools.c), with A->reasoning already found */
void ca_analyze_tools(ca_ctx *C, chat_analysis *A);

#endif
