/*
 * json_double_driver.c -- bankml's side of testing/oracle_json_double.py:
 * json_put_double() (src/base/json.c) on each double read from stdin.
 *
 * Input: one double per line as 16 hex digits of its bit pattern. Output: one
 * line per input with what json_put_double appended. The same protocol as
 * testing/kit_nlohmann_double.cpp, so the two outputs compare line by line.
 * Exit 2 on a malformed line or an allocation failure.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

int main(void)
{
    char line[128];
    jbuf b;
    jbuf_init(&b);
    while (fgets(line, sizeof line, stdin)) {
        char *end;
        uint64_t bits = strtoull(line, &end, 16);
        double v;
        if (end == line || (*end != '\n' && *end != '\0')) {
            fprintf(stderr, "json-double-driver: bad line: %s", line);
            jbuf_free(&b);
            return 2;
        }
        memcpy(&v, &bits, sizeof v);
        json_put_double(&b, v);
        jbuf_putc(&b, '\n');
        if (b.oom) { fprintf(stderr, "json-double-driver: out of memory\n"); return 2; }
        if (b.len > (1u << 16)) { fwrite(b.p, 1, b.len, stdout); jbuf_reset(&b); }
    }
    fwrite(b.p, 1, b.len, stdout);
    jbuf_free(&b);
    return 0;
}
