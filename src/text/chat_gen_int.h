/* chat_gen_int.h -- shared inside chat_gen*.c only. */
#ifndef BANKML_CHAT_GEN_INT_H
#define BANKML_CHAT_GEN_INT_H

#include "base/json.h"

/* The JSON schema b11669's schema parser keeps for `schema` (its typed node,
 * written back in the arena's text form: see chat_gen_schema.c), appended to
 * out. Returns 0, or -1 with b11669's "JSON schema error at <path>: <why>". */
int chat_gen_schema_text(const json_value *schema, jbuf *out, char *err, size_t errlen);

#endif
