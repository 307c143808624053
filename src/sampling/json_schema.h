/*
 * json_schema.h -- JSON schema to GBNF, the text llama.cpp b11669's
 * json_schema_to_grammar() writes, byte for byte, and its refusals with the
 * same words; and Ollama v0.13.3's "format" ("json", or a schema) as its server
 * hands it to its runner.
 *
 * b11669's converter runs in two steps (common/json-schema.cpp builds a typed
 * schema, refusing what falls outside its subset; common/json-schema-to-
 * grammar.cpp walks it into rules), and this module does the same two, in the
 * same order, so the rule names, their de-duplication (name, name0, name1,
 * ...) and the collected errors come out as b11669's do. The rules are
 * written sorted by name (its std::map), one "name ::= body\n" each.
 *
 * Pure text to text: no model, no globals, no locks; safe from any thread.
 * Recursion is bounded (JSON_SCHEMA_MAX_DEPTH schema levels, counting each
 * $ref followed), so a hostile schema is refused rather than overflowing a
 * 1 MiB server-thread stack; b11669 has no such bound (it recurses until the
 * stack ends) and loops forever on an allOf whose $ref points back at itself,
 * which is refused here too.
 */
#ifndef BANKML_JSON_SCHEMA_H
#define BANKML_JSON_SCHEMA_H

#include <stddef.h>

#include "base/json.h"

/* Schema levels (nested schemas plus $refs followed) before a refusal. */
#define JSON_SCHEMA_MAX_DEPTH 200

/* Return values of json_schema_to_gbnf and ollama_format_to_gbnf. */
enum {
    JSON_SCHEMA_OK = 0,       /* the grammar is in *out                            */
    JSON_SCHEMA_REFUSED = 1,  /* *out holds b11669's exception text, exactly       */
    JSON_SCHEMA_LIMIT = 2     /* *out holds bankml's reason (a bound of this module,
                                 out of memory, or what would crash b11669)        */
};

/* Flags of json_schema_to_gbnf. */
#define JSON_SCHEMA_FIELD 1u  /* as llama-server's "json_schema" request field: an empty
                                 object means {"type":"object"} (server-schema.cpp)   */

/* Converts schema (any JSON value; a non-object is refused as b11669 refuses
 * it) into GBNF. On JSON_SCHEMA_OK, *out (*out_len bytes) is the grammar (malloc'd,
 * NUL-terminated, free() it): exactly json_schema_to_grammar(schema) of
 * b11669 built without llguidance. On JSON_SCHEMA_REFUSED, *out is the what()
 * of the exception b11669 throws, e.g.
 *   "JSON schema conversion failed:\nJSON schema error at #/properties/a: unrecognized type strin"
 *   "JSON schema conversion failed:\nInvalid pattern ^(a$: unbalanced parentheses"
 * (llama-server's /completion puts `Field 'json_schema': "json_schema": ` before
 * it). On JSON_SCHEMA_LIMIT, *out is bankml's own one-line reason. *out is
 * NULL only when memory ran out for the message itself (then the return is
 * JSON_SCHEMA_LIMIT). Patterns b11669 cannot translate ('\d', lookarounds,
 * unanchored) become a plain JSON string rule, as there (b11669 prints a
 * warning on stderr; it is not returned). Object keys are taken in the
 * parsed order (json.h keeps first positions, the last duplicate's value, as
 * nlohmann's ordered_json does). */
int json_schema_to_gbnf(const json_value *schema, unsigned flags, char **out, size_t *out_len);

/* Ollama v0.13.3's "format" of /api/chat and /api/generate as its server turns it into the grammar the
 * runner gets (llm/server.go, llmServer.Completion), given the parsed value (format) and, when the caller
 * has them, the bytes the client sent for it (raw, raw_len; Go keeps them as a json.RawMessage, and Ollama
 * compares and quotes those bytes). Without raw, Go's compact encoding of format stands in (the same bytes
 * unless the client put spaces or escapes inside the value). Outcomes:
 *   absent (both NULL), null, ""          JSON_SCHEMA_OK, *out NULL: no grammar
 *   "json"                                JSON_SCHEMA_OK, *out = Ollama's grammarJSON, byte for byte
 *   any other non-object                  JSON_SCHEMA_REFUSED, *out = Ollama's message, e.g.
 *                                         invalid format: "\"xml\""; expected "json" or a valid JSON Schema object
 *                                         (Ollama answers it with status 500, {"error": message})
 *   an object (a schema)                  JSON_SCHEMA_OK, *out = the grammar of the converter of the llama.cpp
 *                                         Ollama vendors (17f7f4ba), byte for byte, its rules in libstdc++'s
 *                                         unordered_map order (json_schema_ollama.c); JSON_SCHEMA_REFUSED,
 *                                         *out = "invalid JSON schema in format", when it throws or collects an
 *                                         error; JSON_SCHEMA_LIMIT with bankml's reason where Ollama would crash,
 *                                         loop forever or cut the grammar (SchemaToGrammar's buffer).
 * With raw and no format, the bytes are parsed here.
 * The %q quoting is Go's strconv.Quote for ASCII and well-formed UTF-8, except that the non-ASCII code
 * points Go's unicode.IsPrint rejects (U+00A0, U+2028, format characters, unassigned ones) are written raw
 * where Go writes \u escapes. */
int ollama_format_to_gbnf(const json_value *format, const char *raw, size_t raw_len, char **out, size_t *out_len);

/* b11669's build_grammar(cb) (common/json-schema-to-grammar.cpp): one converter that
 * callers add rules and schemas to, written out sorted by name at the end. The
 * PEG grammar writer (peg_grammar.h) drives it as b11669's common_peg_arena::
 * build_grammar drives common_grammar_builder. Starts with the "space" rule. */
typedef struct gbnf_builder gbnf_builder;
gbnf_builder *gbnf_builder_new(void);                   /* NULL: out of memory */
void gbnf_builder_free(gbnf_builder *b);
/* add_rule: the escaped name (each run outside [a-zA-Z0-9-] becomes '-'), or name0,
 * name1, ... when that name holds another body; written to *out. 0, or -1 out of memory. */
int gbnf_builder_add_rule(gbnf_builder *b, const char *name, size_t name_len, const char *body, size_t body_len, jbuf *out);
/* add_schema: converts schema (a document of its own: its $refs only) under name
 * ("root" means "") and writes the rule text to reference it to *out. Returns
 * JSON_SCHEMA_OK, or JSON_SCHEMA_REFUSED / JSON_SCHEMA_LIMIT with the reason in *out. */
int gbnf_builder_add_schema(gbnf_builder *b, const char *name, size_t name_len, const json_value *schema, jbuf *out);
/* check_errors + format_grammar: the grammar (or the collected errors, JSON_SCHEMA_REFUSED)
 * in *out (malloc'd). Does not free b. */
int gbnf_builder_finish(gbnf_builder *b, char **out, size_t *out_len);
/* b11669's common_chat_schema::may_be_string of the typed schema built from schema:
 * JSON_SCHEMA_OK with *out 0/1, or the builder's refusal code. */
int json_schema_may_be_string(const json_value *schema, int *out);
/* b11669's gbnf_format_literal: "..." with \r \n \" \\ escaped. */
void gbnf_format_literal(jbuf *out, const char *s, size_t n);

#endif
