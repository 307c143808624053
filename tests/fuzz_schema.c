/*
 * fuzz_schema.c -- libFuzzer target for the JSON schema converter (src/sampling/json_schema.c).
 *
 * Any input: json_parse, then json_schema_to_gbnf (plain and with JSON_SCHEMA_FIELD) and
 * ollama_format_to_gbnf (on the bytes and on the value). Each answer must
 * carry a text (a grammar, b11669's error text or bankml's reason), never NULL, and an OK grammar must
 * hold a root rule and end with a newline. ASan/UBSan catch the rest (leaks on the longjmp paths,
 * overreads, deep recursion past the bound).
 *
 *   make build/fuzz/fuzz_schema && build/fuzz/fuzz_schema -max_total_time=60 corpus tests/fuzz-seeds/fuzz_schema
 */
#include "base/json.h"
#include "sampling/json_schema.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    char err[256];
    json_value *v = json_parse((const char *)d, n, err, sizeof err);
    if (!v) return 0;
    for (unsigned flags = 0; flags <= JSON_SCHEMA_FIELD; flags += JSON_SCHEMA_FIELD) {
        char *out = NULL;
        size_t len = 0;
        int rc = json_schema_to_gbnf(v, flags, &out, &len);
        if (!out) { fprintf(stderr, "no text (rc %d)\n", rc); abort(); }
        if (rc == JSON_SCHEMA_OK && (len == 0 || out[len - 1] != '\n' || !memmem(out, len, "root ::= ", 9))) {
            fprintf(stderr, "a grammar without a root rule\n");
            abort();
        }
        if (rc != JSON_SCHEMA_OK && len == 0) { fprintf(stderr, "a refusal without a reason\n"); abort(); }
        free(out);
    }
    char *o = NULL;                             /* Ollama's format: raw bytes, then the value */
    if (ollama_format_to_gbnf(NULL, (const char *)d, n, &o, NULL) != JSON_SCHEMA_OK && !o) abort();
    free(o);
    o = NULL;
    if (ollama_format_to_gbnf(v, NULL, 0, &o, NULL) != JSON_SCHEMA_OK && !o) abort();
    free(o);
    json_free(v);
    return 0;
}
