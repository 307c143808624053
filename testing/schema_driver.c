/*
 * schema_driver.c -- bankml's side of testing/oracle_schema.py: the JSON
 * schema converter of src/sampling/json_schema.c on each frame read from
 * stdin (with the argument "field", as llama-server's json_schema field:
 * JSON_SCHEMA_FIELD).
 *
 * The protocol of testing/kit_schema.cpp: input frames
 * "<decimal length>\n<JSON text>"; one output frame per input,
 * "OK <n>\n<grammar>\n", "ERR <n>\n<b11669's exception text>\n",
 * "LIMIT <n>\n<bankml's reason>\n" or "PARSE <n>\n<json.c's reason>\n".
 * Exit 2 on a malformed frame or when memory runs out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "sampling/json_schema.h"

static void put(const char *tag, const char *s, size_t n)
{
    printf("%s %zu\n", tag, n);
    fwrite(s, 1, n, stdout);
    putchar('\n');
}

int main(int argc, char **argv)
{
    unsigned flags = argc > 1 && !strcmp(argv[1], "field") ? JSON_SCHEMA_FIELD : 0;
    for (;;) {
        size_t n = 0;
        int c, digits = 0;
        while ((c = getchar()) != EOF && c >= '0' && c <= '9') { n = n * 10 + (size_t)(c - '0'); digits++; }
        if (c == EOF && digits == 0) break;
        if (c != '\n' || digits == 0) { fprintf(stderr, "schema-driver: bad frame\n"); return 2; }
        char *text = malloc(n + 1), err[256], *out;
        size_t len;
        if (!text) return 2;
        if (n && fread(text, 1, n, stdin) != n) { fprintf(stderr, "schema-driver: short frame\n"); return 2; }
        json_value *v = json_parse(text, n, err, sizeof err);
        free(text);
        if (!v) { put("PARSE", err, strlen(err)); continue; }
        int rc = json_schema_to_gbnf(v, flags, &out, &len);
        json_free(v);
        if (!out && rc != JSON_SCHEMA_OK) { fprintf(stderr, "schema-driver: out of memory\n"); return 2; }
        put(rc == JSON_SCHEMA_OK ? (out ? "OK" : "NONE") : rc == JSON_SCHEMA_REFUSED ? "ERR" : "LIMIT",
            out ? out : "", out ? len : 0);
        free(out);
        fflush(stdout);
    }
    return 0;
}
