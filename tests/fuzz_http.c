/*
 * fuzz_http.c -- libFuzzer target for serve.c's request reading (issue #22.6): the head parser, the
 * transport checks, the query reader, the Host/Origin/API-key gates and nlohmann's JSON check.
 *
 * Any input: serve_parse_head either asks for more, refuses with status 400 and a reason, or gives a head
 * no longer than the input; a parsed head then goes through serve_check_head (both Content-Type modes),
 * serve_query_get, the origin rules and the key gate; what follows the head goes through
 * serve_llama_json_check, whose refusal carries a text and whose acceptance a span inside the body.
 * ASan/UBSan catch the rest.
 *
 *   make build/fuzz/fuzz_http && build/fuzz/fuzz_http -max_total_time=60 corpus tests/fuzz-seeds/fuzz_http
 */
#include "api/serve.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);

static serve_req fz_req;

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    char err[256], q[512];
    size_t head_len = 0, body_len = 0;
    int status = 0;
    char *buf = malloc(n + 1);
    if (!buf) return 0;
    memcpy(buf, d, n);
    buf[n] = 0;
    memset(&fz_req, 0, sizeof fz_req);
    err[0] = 0;
    int rc = serve_parse_head(buf, n, &fz_req, &head_len, &status, err, sizeof err);
    if (rc == SERVE_PARSE_ERROR && (status != 400 || !err[0])) abort();
    if (rc == SERVE_PARSE_OK) {
        if (head_len > n || !fz_req.method || !fz_req.path || !fz_req.query) abort();
        for (int mode = 0; mode < 2; mode++) {
            err[0] = 0;
            int st = serve_check_head(&fz_req, mode, SERVE_MAX_BODY, &body_len, err, sizeof err);
            if (st != 0 && st != 400 && st != 403 && st != 413 && st != 415) abort();
            if (st == 0 && body_len > SERVE_MAX_BODY) abort();
        }
        serve_query_get(&fz_req, "action", q, sizeof q);
        serve_query_get(&fz_req, "", q, 4);
        const char *o = serve_header_get(&fz_req, "Origin");
        serve_origin_is_localhost(o);
        serve_ollama_origin_ok("http://a.example, https://b", o);
        serve_host_is_loopback(serve_header_get(&fz_req, "Host"));
        serve_api_key_ok("k1,k2", serve_header_get(&fz_req, "Authorization"), serve_header_get(&fz_req, "X-Api-Key"));
        const char *body = (const char *)d + head_len;
        size_t bn = n - head_len, s0 = 0, s1 = 0;
        jbuf msg;
        jbuf_init(&msg);
        int jr = serve_llama_json_check(body, bn, &msg, &s0, &s1);
        if (jr == 1 && (!msg.len || msg.oom)) abort();
        if (jr == 0 && (s0 > s1 || s1 > bn)) abort();
        jbuf_free(&msg);
    }
    free(buf);
    return 0;
}
