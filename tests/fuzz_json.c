/*
 * fuzz_json.c -- libFuzzer target for the JSON parser and writer.
 *
 * Any input: json_parse must either refuse it with a reason or return a tree.
 * A tree is written back with json_put_value; that text must parse again and
 * write back to the identical bytes (the writer's output is a fixed point),
 * and the error text of a refusal must be non-empty. ASan/UBSan catch the
 * rest (leaks on error paths, overreads, deep recursion).
 *
 *   clang -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc -g -O1 \
 *         -fsanitize=fuzzer,address,undefined -o /tmp/fj tests/fuzz_json.c src/base/json.c -lm
 *   /tmp/fj -max_total_time=120 /tmp/fjcorpus tests/fuzz-seeds/fuzz_json
 */
#include "base/json.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    char err[256];
    json_value *v, *v2;
    jbuf a, b;
    int64_t i;
    double x;

    err[0] = 0;
    v = json_parse((const char *)d, n, err, sizeof err);
    if (!v) {
        if (!err[0]) { fprintf(stderr, "refused without a reason\n"); abort(); }
        return 0;
    }
    if (v->type == JSON_NUMBER) { json_as_i64(v, &i); json_as_double(v, &x); }

    jbuf_init(&a);
    json_put_value(&a, v);
    if (a.oom) { json_free(v); jbuf_free(&a); return 0; }
    v2 = json_parse(a.p, a.len, err, sizeof err);
    if (!v2) {
        fprintf(stderr, "the writer's output does not parse: %s\n", err);
        abort();
    }
    jbuf_init(&b);
    json_put_value(&b, v2);
    if (!b.oom && (a.len != b.len || memcmp(a.p, b.p, a.len) != 0)) {
        fprintf(stderr, "re-written output differs\n");
        abort();
    }
    json_free(v);
    json_free(v2);
    jbuf_free(&a);
    jbuf_free(&b);
    return 0;
}
