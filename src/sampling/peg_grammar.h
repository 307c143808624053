/*
 * peg_grammar.h -- the GBNF grammar of a PEG arena, byte for byte what
 * llama.cpp b11669 writes for it: build_grammar([&](builder) {
 * arena.build_grammar(builder, lazy); }) (common/peg-parser.cpp over
 * common/json-schema-to-grammar.cpp's builder).
 *
 * Non-lazy: the rules reachable from the root, and root ::= the root's text.
 * Lazy: only the trigger rules and what they reach, and root ::= the trigger
 * rules' names sorted, joined by " | " (the grammar a lazy sampler switches on
 * once a trigger appears). Rules come out sorted by name with b11669's "space"
 * rule; until() parsers become an Aho-Corasick exclusion automaton
 * (until-<id>-NN rules), ac() parsers its inclusion twin (ac-<id>-NN), schema
 * parsers the JSON schema converter's rules (json_schema.h). The text is what
 * src/sampling/grammar.c reads.
 *
 * How b11669's chat layer uses it (chat-auto-parser-generator.cpp and the
 * specialised common/parsers/): with tools and a tool_choice other than none
 * the grammar is built with lazy = (no response format) && tool_choice == auto,
 * and then the grammar triggers are the tool-call openings of the format (a
 * WORD trigger per opening, e.g. "<tool_call>"); with a json_schema and no
 * tools, it is that schema's grammar (not lazy).
 */
#ifndef BANKML_PEG_GRAMMAR_H
#define BANKML_PEG_GRAMMAR_H

#include <stddef.h>

#include "text/peg.h"

/* Writes the grammar of arena a (built or loaded) into *out (malloc'd, free it),
 * *out_len bytes. Returns JSON_SCHEMA_OK; JSON_SCHEMA_REFUSED with b11669's
 * exception text in *out (a schema the converter refuses); or JSON_SCHEMA_LIMIT
 * with bankml's reason (out of memory, a malformed arena). */
int peg_build_grammar(const peg_arena *a, int lazy, char **out, size_t *out_len);

#endif
