/*
 * fuzz_gguf.c -- libFuzzer target for the GGUF parser, the guard and the
 * lazy array decoder.
 *
 * Any input is judged as a whole file named "f.gguf" (file size = input
 * length) on both engines, and printed as JSON and text. Invariants checked
 * (abort on violation): NEED_MORE asks for more than it was given; a
 * refusal carries a reason; the JSON is valid (json_parse accepts it, so
 * every string in it was repaired to UTF-8) and names the verdict; the text
 * ends in a newline. When the header parsed, every array entry is walked
 * with gguf_arr_*: string and scalar arrays must decode to the end without
 * an error (the parser already stepped over them in the same buffer), other
 * arrays must refuse by kind; every tensor span is computed and, when
 * accepted, must not wrap. ASan/UBSan catch the rest.
 *
 *   clang -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc -g -O1 \
 *         -fsanitize=fuzzer,address,undefined -o /tmp/fg tests/fuzz_gguf.c src/file/gguf.c src/base/json.c -lm
 *   /tmp/fg -max_total_time=120 /tmp/fgcorpus tests/fuzz-seeds/fuzz_gguf
 */
#include "file/gguf.h"
#include "base/json.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static void die(const char *what)
{
    fprintf(stderr, "fuzz_gguf: %s\n", what);
    abort();
}

/* Walks one array entry; returns normally only if the iterator behaved. */
static void walk_array(const gguf_kv *kv, const uint8_t *d, size_t n)
{
    gguf_arr_iter it;
    char err[256];
    const uint8_t *s;
    uint64_t len, count = 0;
    int64_t iv;
    double dv;
    int rc;
    int is_int = kv->arr_type <= GGUF_VT_I32 && kv->arr_type != GGUF_VT_F32;
    is_int = is_int || kv->arr_type == GGUF_VT_BOOL || kv->arr_type == GGUF_VT_U64 ||
             kv->arr_type == GGUF_VT_I64;

    if (gguf_arr_begin(&it, kv, d, n, err, sizeof err) != 0) die("arr_begin refused an array");
    if (kv->arr_type == GGUF_VT_STRING) {
        while ((rc = gguf_arr_next_str(&it, &s, &len, err, sizeof err)) == 1) {
            if (s < d || len > (uint64_t)(d + n - s)) die("string outside the buffer");
            count++;
        }
    } else if (kv->arr_type == GGUF_VT_F32 || kv->arr_type == GGUF_VT_F64 || is_int) {
        while ((rc = gguf_arr_next_f64(&it, &dv, err, sizeof err)) == 1) count++;
        if (rc == 0 && is_int) {
            gguf_arr_begin(&it, kv, d, n, err, sizeof err);
            /* a U64 above INT64_MAX is the one allowed refusal */
            while ((rc = gguf_arr_next_i64(&it, &iv, err, sizeof err)) == 1) {}
            if (rc == -1 && kv->arr_type != GGUF_VT_U64) die("integer array refused");
            rc = 0;
        }
    } else {
        rc = gguf_arr_next_str(&it, &s, &len, err, sizeof err);
        if (kv->arr_n && rc != -1) die("nested or unknown array decoded as strings");
        if (!kv->arr_n && rc != 0) die("empty array gave an element");
        return;
    }
    if (rc != 0) die(err);
    if (count != kv->arr_n) die("array count differs from the header");
}

static void check_report(const gguf_report *r, const uint8_t *d, size_t n)
{
    char err[256];
    jbuf j, t;
    json_value *v;
    const json_value *verdict;
    const char *vs;
    size_t vl;

    if (r->verdict == GGUF_VERDICT_NEED_MORE && r->bytes_needed <= n) die("need_more within the input");
    if (r->verdict == GGUF_VERDICT_REFUSE && r->n_reasons == 0) die("refusal without a reason");
    if (r->verdict == GGUF_VERDICT_PLAY && r->n_reasons != 0) die("play with reasons");

    jbuf_init(&j);
    jbuf_init(&t);
    gguf_report_json(r, &j);
    gguf_report_text(r, &t);
    if (j.oom || t.oom) die("out of memory while printing");
    v = json_parse(j.p, j.len, err, sizeof err);
    if (!v) die(err);
    verdict = json_get(v, "verdict");
    if (!json_as_str(verdict, &vs, &vl) || strcmp(vs, gguf_verdict_str(r->verdict)) != 0)
        die("JSON verdict differs");
    json_free(v);
    if (t.len == 0 || t.p[t.len - 1] != '\n') die("text does not end in a newline");
    jbuf_free(&j);
    jbuf_free(&t);

    if (!r->has_header) return;
    for (size_t i = 0; i < r->header.n_kv; i++)
        if (r->header.kv[i].type == GGUF_VT_ARRAY) walk_array(&r->header.kv[i], d, n);
    for (size_t i = 0; i < r->header.n_tensors; i++) {
        uint64_t off, len;
        if (gguf_tensor_span(&r->header, &r->header.tensors[i], &off, &len, err, sizeof err) == 0 &&
            off + len < off)
            die("span wraps");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    gguf_report r;
    if (gguf_judge(d, n, GGUF_ENGINE_MAINLINE, (int64_t)n, "f.gguf", &r) != 0) return 0;
    check_report(&r, d, n);
    gguf_report_free(&r);
    if (gguf_judge(d, n, GGUF_ENGINE_PRISM, -1, "f.gguf", &r) != 0) return 0;
    check_report(&r, d, n);
    gguf_report_free(&r);
    return 0;
}
