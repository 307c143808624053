/* chat_gen_int.h -- shared inside chat_gen*.c only. */
#ifndef BANKML_CHAT_GEN_INT_H
#define BANKML_CHAT_GEN_INT_H

#include "base/json.h"
#include "text/chat_analyze.h"
#include "text/peg.h"

/* what the tool builders share with chat_gen.c */
typedef struct {
    peg_arena *a;
    const json_value *tools;    /* an array with at least one item */
    char *err;
    size_t errlen;
    int failed;                 /* a schema failed: err holds b11669's reason */
    int unsupported;            /* a layout bankml does not reproduce yet: err says which */
} cg_tools;

/* common_chat_peg_builder::standard_json_tools (common/chat-peg-parser.cpp): the section
 * ss + calls + se as rule "tool-call" (a trigger), optional unless force; the calls in the
 * layout the flags give (function name as key, or flat keys in parameter_order's order,
 * the OpenAI wrapper's "type" accepted), comma separated when parallel, in [...] when
 * array_wrapped. Rules "tool-<index in tools>", schemas "tool-<index>-schema". */
size_t chat_gen_json_tools(cg_tools *t, const ca_str *ss, const ca_str *se, int parallel, int force,
                           const char *name_key, const char *args_key, int array_wrapped, int fun_is_key,
                           const char *id_key, const char *gen_key, const ca_str *order, size_t norder,
                           int openai_wrapper);

/* The JSON schema b11669's schema parser keeps for `schema` (its typed node,
 * written back in the arena's text form: see chat_gen_schema.c), appended to
 * out. Returns 0, or -1 with b11669's "JSON schema error at <path>: <why>". */
int chat_gen_schema_text(const json_value *schema, jbuf *out, char *err, size_t errlen);
/* The same for a node inside root (its $ref resolved in root, its own $defs collected). */
int chat_gen_schema_node_text(const json_value *root, const json_value *schema, jbuf *out, char *err, size_t errlen);
/* common_chat_schema::may_be_string of the node built from schema ($ref resolved in root; a
 * cycle is no string) */
int chat_gen_schema_may_be_string(const json_value *root, const json_value *schema);
/* common_chat_schema::value_type, as bit numbers of value_types' mask */
enum { CHAT_SCHEMA_NULL, CHAT_SCHEMA_BOOLEAN, CHAT_SCHEMA_NUMBER, CHAT_SCHEMA_INTEGER, CHAT_SCHEMA_STRING,
       CHAT_SCHEMA_ARRAY, CHAT_SCHEMA_OBJECT };
#define CHAT_SCHEMA_ALL_TYPES 0x7fu
/* common_chat_schema::value_types of the node built from schema ($ref resolved in root; a cycle
 * contributes no type; number is number|integer; an any node is every type): a mask of
 * 1 << CHAT_SCHEMA_* */
unsigned chat_gen_schema_value_types(const json_value *root, const json_value *schema);
/* common_chat_schema::node_kind of the node build_node makes from schema (a valid one), with
 * type_override standing for its "type" (an alternative of a type list: NULL for none) */
enum { CHAT_SK_ANY, CHAT_SK_REF, CHAT_SK_ANY_OF, CHAT_SK_ALL_OF, CHAT_SK_CONST, CHAT_SK_ENUM, CHAT_SK_NULL,
       CHAT_SK_BOOLEAN, CHAT_SK_NUMBER, CHAT_SK_INTEGER, CHAT_SK_STRING, CHAT_SK_ARRAY, CHAT_SK_TUPLE, CHAT_SK_OBJECT };
int chat_gen_schema_kind(const json_value *schema, const json_value *type_override);
/* may_be_string and the node's text for a type-list alternative (type_override NULL: the plain ones) */
int chat_gen_schema_may_be_string_typed(const json_value *root, const json_value *schema, const json_value *type_override);
int chat_gen_schema_node_text_typed(const json_value *root, const json_value *schema, const json_value *type_override,
                                    jbuf *out, char *err, size_t errlen);
/* the node built from a valid schema is an object (foreach_parameter's dynamic_cast) */
int chat_gen_schema_is_object(const json_value *schema);

/* analyze_tools::build_tool_parser_tag_json (with build_func_parser): each function as rule
 * "tool-<index>" (name markers, call id, arguments' schema, closer), the calls wrapped in the
 * per-call / section markers as rules "tool-call" / "tool-calls" (triggers), after the
 * reasoning parser and the content before the first marker. */
size_t chat_gen_tag_json(cg_tools *t, const chat_analysis *an, size_t reasoning_parser, int parallel, int require);

/* analyze_tools::build_tool_parser_tag_tagged: each argument as rule "tool-<i>-arg-<j>" (a string
 * value read up to the value suffix, any other value as JSON under its schema), the required ones
 * in order then the optional ones in any order, the function and call rules as tag_json's. */
size_t chat_gen_tag_tagged(cg_tools *t, const chat_analysis *an, size_t reasoning_parser, int parallel, int require);

#endif
