/*
 * test_serve.c -- the HTTP framing of src/api/serve.c on hostile inputs: the
 * request head parser, the transport checks of §2.1 (Host, Transfer-
 * Encoding, Content-Length, Content-Type), the API key gate and the error
 * body writer. Sockets are tested black-box by testing/test_serve.py.
 */
#include "api/serve.h"
#include "test.h"

#include <stdlib.h>

/* Parses text (copied: the parser writes NULs into its buffer). */
static int parse(const char *text, size_t len, serve_req *r, size_t *head_len, int *status, char *err)
{
    static char buf[2 * 1024 * 1024];
    memcpy(buf, text, len);
    *head_len = 0;
    err[0] = 0;
    return serve_parse_head(buf, len, r, head_len, status, err, 256);
}

static serve_req *new_req(void)
{
    serve_req *r = calloc(1, sizeof *r);
    return r;
}

#define P(lit) parse(lit, sizeof(lit) - 1, r, &hl, &st, err)

TEST(serve_parse_simple_get)
{
    serve_req *r = new_req();
    size_t hl;
    int st;
    char err[256];
    CHECK_INT(P("GET /health?x=1&y=%41 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nX-A:  spaced value \t\r\n\r\n"), SERVE_PARSE_OK);
    CHECK_INT(hl, 78);
    CHECK_STR(r->method, "GET");
    CHECK_STR(r->target, "/health?x=1&y=%41");
    CHECK_STR(r->path, "/health");
    CHECK_STR(r->query, "x=1&y=%41");
    CHECK_INT(r->http_minor, 1);
    CHECK_INT(r->n_headers, 2);
    CHECK_STR(r->headers[0].name, "Host");
    CHECK_STR(r->headers[0].value, "127.0.0.1:8080");
    CHECK_STR(serve_header_get(r, "x-a"), "spaced value");
    CHECK_STR(serve_header_get(r, "HOST"), "127.0.0.1:8080");
    CHECK(serve_header_get(r, "Host2") == NULL);
    {
        char v[16];
        CHECK_INT(serve_query_get(r, "y", v, sizeof v), 1);
        CHECK_STR(v, "A");
        CHECK_INT(serve_query_get(r, "x", v, sizeof v), 1);
        CHECK_STR(v, "1");
        CHECK_INT(serve_query_get(r, "z", v, sizeof v), 0);
        CHECK_INT(serve_query_get(r, "y", v, 1), -1);
    }
    free(r);
}

TEST(serve_parse_path_decoding)
{
    serve_req *r = new_req();
    size_t hl;
    int st;
    char err[256];
    CHECK_INT(P("GET /a%20b/%zz/%4 HTTP/1.0\r\n\r\n"), SERVE_PARSE_OK);
    CHECK_STR(r->path, "/a b/%zz/%4");
    CHECK_INT(r->http_minor, 0);
    CHECK_INT(r->n_headers, 0);
    CHECK_INT(P("GET /a%00b HTTP/1.1\r\n\r\n"), SERVE_PARSE_ERROR);
    CHECK_INT(st, 400);
    CHECK_STR(err, "bad path: %00 in the request target");
    free(r);
}

TEST(serve_parse_bare_lf_accepted)
{
    serve_req *r = new_req();
    size_t hl;
    int st;
    char err[256];
    CHECK_INT(P("POST /x HTTP/1.1\nHost: localhost\nContent-Length: 2\n\n{}"), SERVE_PARSE_OK);
    CHECK_INT(hl, 52);
    CHECK_STR(serve_header_get(r, "content-length"), "2");
    free(r);
}

TEST(serve_parse_partial_needs_more)
{
    serve_req *r = new_req();
    size_t hl;
    int st;
    char err[256];
    CHECK_INT(P(""), SERVE_PARSE_MORE);
    CHECK_INT(P("GET / HT"), SERVE_PARSE_MORE);
    CHECK_INT(P("GET / HTTP/1.1\r\n"), SERVE_PARSE_MORE);
    CHECK_INT(P("GET / HTTP/1.1\r\nHost: localhost\r\n"), SERVE_PARSE_MORE);
    CHECK_INT(P("GET / HTTP/1.1\r\nHost: localhost\r\n\r"), SERVE_PARSE_MORE);
    CHECK_INT(P("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"), SERVE_PARSE_OK);
    free(r);
}

/* A head that arrives a byte at a time is parsed again, in the same buffer,
 * after each byte: an attempt that found it incomplete must leave the
 * buffer as it was. */
TEST(serve_parse_trickled_in_place)
{
    static const char head[] = "POST /v1/chat/completions?a=b HTTP/1.1\r\nHost: localhost:8080\r\n"
                               "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
    static char buf[sizeof head];
    serve_req *r = new_req();
    size_t n, hl = 0, head_n = sizeof head - 1 - 2;
    int st, rc = SERVE_PARSE_MORE;
    char err[256];
    if (!r) SKIP("out of memory");
    memcpy(buf, head, sizeof head);
    for (n = 0; n < head_n; n++) {
        rc = serve_parse_head(buf, n, r, &hl, &st, err, sizeof err);
        if (rc != SERVE_PARSE_MORE) { test_fail(__FILE__, __LINE__, "prefix %zu: %d (%s)", n, rc, err); break; }
        if (memcmp(buf, head, sizeof head) != 0) { test_fail(__FILE__, __LINE__, "prefix %zu changed the buffer", n); break; }
    }
    CHECK_INT(serve_parse_head(buf, head_n, r, &hl, &st, err, sizeof err), SERVE_PARSE_OK);
    CHECK_INT(hl, head_n);
    CHECK_STR(r->path, "/v1/chat/completions");
    CHECK_STR(r->query, "a=b");
    CHECK_STR(serve_header_get(r, "content-length"), "2");
    CHECK_INT(r->n_headers, 3);
    free(r);
}

TEST(serve_parse_bad_request_lines)
{
    static const char *const bad[] = {
        "GET\r\n\r\n",                           /* no target */
        "GET /\r\n\r\n",                         /* no version */
        "GET  / HTTP/1.1\r\n\r\n",               /* two spaces */
        "GET / HTTP/1.1 \r\n\r\n",               /* trailing space */
        "GET x HTTP/1.1\r\n\r\n",                /* not origin-form */
        "GET http://a/ HTTP/1.1\r\n\r\n",        /* absolute-form */
        "G(T / HTTP/1.1\r\n\r\n",                /* method not a token */
        "VERYLONGMETHODNAME / HTTP/1.1\r\n\r\n", /* method > 15 */
        "\r\n\r\n",                              /* empty request line */
        "GET /a\rb HTTP/1.1\r\n\r\n",            /* bare CR */
        "GET /\x01 HTTP/1.1\r\n\r\n",            /* control byte in target */
    };
    serve_req *r = new_req();
    size_t i, hl;
    int st;
    char err[256];
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(bad[i], strlen(bad[i]), r, &hl, &st, err);
        if (rc != SERVE_PARSE_ERROR) test_fail(__FILE__, __LINE__, "case %zu parsed (%d)", i, rc);
        CHECK_INT(st, 400);
        CHECK_STR(err, "malformed request line");
    }
    CHECK_INT(P("GET / HTTP/2.0\r\n\r\n"), SERVE_PARSE_ERROR);
    CHECK_STR(err, "unsupported HTTP version (HTTP/1.0 and HTTP/1.1 are)");
    CHECK_INT(P("GET / http/1.1\r\n\r\n"), SERVE_PARSE_ERROR);
    CHECK_INT(st, 400);
    free(r);
}

TEST(serve_parse_bad_header_lines)
{
    static const char *const bad[] = {
        "GET / HTTP/1.1\r\nNoColon\r\n\r\n",
        "GET / HTTP/1.1\r\n: empty name\r\n\r\n",
        "GET / HTTP/1.1\r\nHost : localhost\r\n\r\n",     /* space before colon */
        "GET / HTTP/1.1\r\nHo(st: localhost\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",       /* obs-fold */
        "GET / HTTP/1.1\r\nA: b\x01\x02\r\n\r\n",          /* control bytes */
        "GET / HTTP/1.1\r\nA: b\rc\r\n\r\n",               /* bare CR */
        "GET / HTTP/1.1\r\nA: b\x7f\r\n\r\n",              /* DEL */
    };
    serve_req *r = new_req();
    size_t i, hl;
    int st;
    char err[256];
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(bad[i], strlen(bad[i]), r, &hl, &st, err);
        if (rc != SERVE_PARSE_ERROR) test_fail(__FILE__, __LINE__, "case %zu parsed (%d)", i, rc);
        CHECK_INT(st, 400);
        CHECK(strncmp(err, "malformed header line", 21) == 0);
    }
    /* UTF-8 (obs-text) in a value is fine */
    CHECK_INT(P("GET / HTTP/1.1\r\nX-Name: caf\xc3\xa9\r\n\r\n"), SERVE_PARSE_OK);
    CHECK_STR(serve_header_get(r, "X-Name"), "caf\xc3\xa9");
    /* an empty value is fine */
    CHECK_INT(P("GET / HTTP/1.1\r\nX-Empty:\r\n\r\n"), SERVE_PARSE_OK);
    CHECK_STR(serve_header_get(r, "X-Empty"), "");
    free(r);
}

TEST(serve_parse_nul_bytes)
{
    serve_req *r = new_req();
    size_t hl;
    int st;
    char err[256];
    CHECK_INT(P("GET /\0x HTTP/1.1\r\n\r\n"), SERVE_PARSE_ERROR);
    CHECK_STR(err, "NUL byte in the request head");
    CHECK_INT(P("GET / HTTP/1.1\r\nA: b\0c\r\n\r\n"), SERVE_PARSE_ERROR);
    CHECK_STR(err, "NUL byte in the request head");
    CHECK_INT(P("GET / HTTP/1.1\r\nA: b\0"), SERVE_PARSE_ERROR);   /* in a line still open */
    CHECK_STR(err, "NUL byte in the request head");
    /* a NUL in the body (after the head) is not the parser's business */
    CHECK_INT(P("POST / HTTP/1.1\r\n\r\n\0\0"), SERVE_PARSE_OK);
    CHECK_INT(hl, 19);
    free(r);
}

TEST(serve_parse_line_limits)
{
    serve_req *r = new_req();
    size_t hl, n;
    int st;
    char err[256];
    static char buf[3 * 1024 * 1024];
    if (!r) SKIP("out of memory");
    /* request line of exactly 16 KiB: fine; one byte more: refused */
    n = (size_t)sprintf(buf, "GET /");
    memset(buf + n, 'a', SERVE_MAX_LINE - n - 9);
    n = SERVE_MAX_LINE - 9;
    n += (size_t)sprintf(buf + n, " HTTP/1.1\r\nHost: localhost\r\n\r\n");
    CHECK_INT(parse(buf, n, r, &hl, &st, err), SERVE_PARSE_OK);
    CHECK_INT(strlen(r->target) + 4 + 9, SERVE_MAX_LINE);
    n = (size_t)sprintf(buf, "GET /");
    memset(buf + n, 'a', SERVE_MAX_LINE - n - 8);
    n = SERVE_MAX_LINE - 8;
    n += (size_t)sprintf(buf + n, " HTTP/1.1\r\n\r\n");
    CHECK_INT(parse(buf, n, r, &hl, &st, err), SERVE_PARSE_ERROR);
    CHECK_STR(err, "request line too long");
    /* an unfinished request line that is already too long: refused at once */
    memset(buf, 'a', SERVE_MAX_LINE + 2);
    CHECK_INT(parse(buf, SERVE_MAX_LINE + 2, r, &hl, &st, err), SERVE_PARSE_ERROR);
    CHECK_STR(err, "request line too long");
    CHECK_INT(parse(buf, SERVE_MAX_LINE + 1, r, &hl, &st, err), SERVE_PARSE_MORE);
    /* a header line over 16 KiB, finished or not */
    n = (size_t)sprintf(buf, "GET / HTTP/1.1\r\nX-Big: ");
    memset(buf + n, 'v', SERVE_MAX_LINE);
    n += SERVE_MAX_LINE;
    CHECK_INT(parse(buf, n, r, &hl, &st, err), SERVE_PARSE_ERROR);
    CHECK_STR(err, "request head too large");
    n += (size_t)sprintf(buf + n, "\r\n\r\n");
    CHECK_INT(parse(buf, n, r, &hl, &st, err), SERVE_PARSE_ERROR);
    CHECK_STR(err, "request head too large");
    CHECK_INT(st, 400);
    free(r);
}

TEST(serve_parse_header_count_limit)
{
    serve_req *r = new_req();
    size_t hl, n;
    int st, i;
    char err[256];
    static char buf[64 * 1024];
    if (!r) SKIP("out of memory");
    n = (size_t)sprintf(buf, "GET / HTTP/1.1\r\n");
    for (i = 0; i < SERVE_MAX_HEADERS; i++) n += (size_t)sprintf(buf + n, "X-%d: v\r\n", i);
    memcpy(buf + n, "\r\n", 2);
    CHECK_INT(parse(buf, n + 2, r, &hl, &st, err), SERVE_PARSE_OK);
    CHECK_INT(r->n_headers, 100);
    CHECK_STR(r->headers[99].name, "X-99");
    n += (size_t)sprintf(buf + n, "X-100: v\r\n\r\n");
    CHECK_INT(parse(buf, n, r, &hl, &st, err), SERVE_PARSE_ERROR);
    CHECK_STR(err, "request head too large");
    free(r);
}

TEST(serve_parse_pipelining_ignored)
{
    serve_req *r = new_req();
    size_t hl;
    int st;
    char err[256];
    /* the head ends at the first blank line; what follows is not parsed */
    CHECK_INT(P("GET /a HTTP/1.1\r\nHost: localhost\r\n\r\nGET /b HTTP/1.1\r\nHost: evil\r\n\r\n"), SERVE_PARSE_OK);
    CHECK_INT(hl, 36);
    CHECK_STR(r->path, "/a");
    CHECK_INT(r->n_headers, 1);
    CHECK_STR(serve_header_get(r, "Host"), "localhost");
    free(r);
}

TEST(serve_host_loopback_variants)
{
    static const char *const good[] = {
        "127.0.0.1", "127.0.0.1:8080", "localhost", "LOCALHOST:1", "LocalHost", "[::1]", "[::1]:18093",
        "localhost:", "127.0.0.1:0",
    };
    static const char *const bad[] = {
        "", "evil.example", "127.0.0.2", "127.0.0.1.evil", "localhost.evil", "localhost:80x", "localhost:-1",
        "[::1", "::1", "[::2]", "0.0.0.0", "127.1", "localhost :80", "localhost:80:80", "xlocalhost",
        "[::1]x", "127.0.0.1 ",
    };
    size_t i;
    for (i = 0; i < sizeof good / sizeof good[0]; i++)
        if (serve_host_is_loopback(good[i]) != 1) test_fail(__FILE__, __LINE__, "refused %s", good[i]);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (serve_host_is_loopback(bad[i]) != 0) test_fail(__FILE__, __LINE__, "accepted %s", bad[i]);
    CHECK_INT(serve_host_is_loopback(NULL), 0);
}

TEST(serve_content_length_values)
{
    size_t v = 7;
    CHECK_INT(serve_parse_content_length("0", SERVE_MAX_BODY, &v), 0);
    CHECK_U64(v, 0);
    CHECK_INT(serve_parse_content_length("00012", SERVE_MAX_BODY, &v), 0);
    CHECK_U64(v, 12);
    CHECK_INT(serve_parse_content_length("16777216", SERVE_MAX_BODY, &v), 0);
    CHECK_U64(v, 16777216);
    v = 7;
    CHECK_INT(serve_parse_content_length("16777217", SERVE_MAX_BODY, &v), -2);
    CHECK_INT(serve_parse_content_length("99999999999999999999999999999", SERVE_MAX_BODY, &v), -2);
    CHECK_INT(serve_parse_content_length("18446744073709551616", SIZE_MAX, &v), -2);
    CHECK_INT(serve_parse_content_length("18446744073709551615", SIZE_MAX, &v), 0);
    CHECK_U64(v, 18446744073709551615ull);
    v = 7;
    CHECK_INT(serve_parse_content_length("", SERVE_MAX_BODY, &v), -1);
    CHECK_INT(serve_parse_content_length("-1", SERVE_MAX_BODY, &v), -1);
    CHECK_INT(serve_parse_content_length("+1", SERVE_MAX_BODY, &v), -1);
    CHECK_INT(serve_parse_content_length("1 2", SERVE_MAX_BODY, &v), -1);
    CHECK_INT(serve_parse_content_length("0x10", SERVE_MAX_BODY, &v), -1);
    CHECK_INT(serve_parse_content_length("5,5", SERVE_MAX_BODY, &v), -1);
    CHECK_INT(serve_parse_content_length("1e3", SERVE_MAX_BODY, &v), -1);
    CHECK_INT(serve_parse_content_length("99999999999999999999x", SERVE_MAX_BODY, &v), -1);
    CHECK_U64(v, 7);
}

/* Parses a head and runs the checks: returns the check's status. */
static int check(const char *text, size_t *body_len, char *err)
{
    serve_req *r = new_req();
    size_t hl;
    int st, rc;
    if (parse(text, strlen(text), r, &hl, &st, err) != SERVE_PARSE_OK) { free(r); return -1; }
    rc = serve_check_head(r, 1, SERVE_MAX_BODY, body_len, err, 256);
    free(r);
    return rc;
}

TEST(serve_check_host)
{
    size_t bl;
    char err[256];
    CHECK_INT(check("GET / HTTP/1.1\r\nHost: localhost:1\r\n\r\n", &bl, err), 0);
    CHECK_INT(bl, 0);
    CHECK_INT(check("GET / HTTP/1.1\r\nhOsT: [::1]:9\r\n\r\n", &bl, err), 0);
    CHECK_INT(check("GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n", &bl, err), 403);
    CHECK_STR(err, "bankml serve answers loopback clients only (Host must be 127.0.0.1, localhost or [::1])");
    CHECK_INT(check("GET / HTTP/1.1\r\n\r\n", &bl, err), 403);                          /* no Host */
    CHECK_INT(check("GET / HTTP/1.1\r\nHost: localhost\r\nHost: evil\r\n\r\n", &bl, err), 403);
    CHECK_INT(check("GET / HTTP/1.1\r\nHost: localhost\r\nHost: localhost\r\n\r\n", &bl, err), 403);
    CHECK_INT(check("GET / HTTP/1.1\r\nHost:\r\n\r\n", &bl, err), 403);
    /* the Host check comes before the others */
    CHECK_INT(check("POST / HTTP/1.1\r\nHost: evil\r\nTransfer-Encoding: chunked\r\n\r\n", &bl, err), 403);
}

TEST(serve_check_framing)
{
    size_t bl;
    char err[256];
    CHECK_INT(check("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n", &bl, err), 400);
    CHECK_STR(err, "chunked requests are not accepted; send Content-Length");
    CHECK_INT(check("POST / HTTP/1.1\r\nHost: localhost\r\ntransfer-encoding: identity\r\nContent-Length: 2\r\n\r\n",
                    &bl, err), 400);
    CHECK_STR(err, "chunked requests are not accepted; send Content-Length");
    CHECK_INT(check("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    "Content-Length: 16777217\r\n\r\n", &bl, err), 413);
    CHECK_STR(err, "request too large");
    CHECK_INT(check("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    "Content-Length: 184467440737095516160\r\n\r\n", &bl, err), 413);
    CHECK_INT(check("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: -1\r\n\r\n", &bl, err), 400);
    CHECK_STR(err, "bad Content-Length");
    CHECK_INT(check("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: abc\r\n\r\n", &bl, err), 400);
    CHECK_INT(check("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length:\r\n\r\n", &bl, err), 400);
    /* duplicates: equal values are one length, different ones a refusal */
    CHECK_INT(check("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    "Content-Length: 2\r\nContent-Length: 2\r\n\r\n", &bl, err), 0);
    CHECK_INT(bl, 2);
    CHECK_INT(check("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    "Content-Length: 2\r\nContent-Length: 3\r\n\r\n", &bl, err), 400);
    CHECK_STR(err, "bad Content-Length");
    CHECK_INT(check("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    "Content-Length: 16777216\r\n\r\n", &bl, err), 0);
    CHECK_U64(bl, 16777216);
}

TEST(serve_check_content_type)
{
    size_t bl;
    char err[256];
    CHECK_INT(check("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n", &bl, err), 415);
    CHECK_STR(err, "POST bodies must be Content-Type: application/json");
    CHECK_INT(check("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\n\r\n", &bl, err), 415);
    CHECK_INT(check("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: Application/JSON; charset=utf-8\r\n"
                    "Content-Length: 2\r\n\r\n", &bl, err), 0);
    CHECK_INT(bl, 2);
    CHECK_INT(check("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", &bl, err), 0);   /* GET needs none */
    {
        serve_req *r = new_req();
        size_t hl;
        int st;
        CHECK_INT(P("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\n"), SERVE_PARSE_OK);
        CHECK_INT(serve_check_head(r, 0, SERVE_MAX_BODY, &bl, err, 256), 0);   /* option off */
        CHECK_INT(bl, 3);
        free(r);
    }
}

TEST(serve_api_key)
{
    CHECK_INT(serve_api_key_ok(NULL, NULL, NULL), 1);
    CHECK_INT(serve_api_key_ok("", NULL, NULL), 1);
    CHECK_INT(serve_api_key_ok("k1", NULL, NULL), 0);
    CHECK_INT(serve_api_key_ok("k1", "Bearer k1", NULL), 1);
    CHECK_INT(serve_api_key_ok("k1", "k1", NULL), 1);              /* llama-server: prefix optional */
    CHECK_INT(serve_api_key_ok("k1", "bearer k1", NULL), 0);       /* the prefix is case-sensitive */
    CHECK_INT(serve_api_key_ok("k1", "Bearer  k1", NULL), 0);
    CHECK_INT(serve_api_key_ok("k1", "Bearer k", NULL), 0);
    CHECK_INT(serve_api_key_ok("k1", "Bearer k12", NULL), 0);
    CHECK_INT(serve_api_key_ok("k1", NULL, "k1"), 1);
    CHECK_INT(serve_api_key_ok("k1", "", "Bearer k1"), 1);
    CHECK_INT(serve_api_key_ok("k1", "Bearer wrong", "k1"), 0);    /* Authorization wins when present */
    CHECK_INT(serve_api_key_ok("k1,k2", "Bearer k2", NULL), 1);
    CHECK_INT(serve_api_key_ok("k1,,k2", "Bearer ", NULL), 0);
    CHECK_INT(serve_api_key_ok("k1,k2", "Bearer k1,k2", NULL), 0);
}

TEST(serve_error_bodies)
{
    jbuf b;
    jbuf_init(&b);
    serve_error_json(&b, 400, NULL, "bad \"thing\"\n", NULL);
    CHECK_STR(b.p, "{\"error\":{\"code\":400,\"message\":\"bad \\\"thing\\\"\\n\",\"type\":\"invalid_request_error\"}}");
    jbuf_reset(&b);
    serve_error_json(&b, 400, "exceed_context_size_error",
                     "request (12 tokens) exceeds the available context size (8 tokens), try increasing it",
                     "\"n_prompt_tokens\":12,\"n_ctx\":8");
    CHECK_STR(b.p, "{\"error\":{\"code\":400,\"message\":\"request (12 tokens) exceeds the available context size "
                   "(8 tokens), try increasing it\",\"type\":\"exceed_context_size_error\",\"n_prompt_tokens\":12,"
                   "\"n_ctx\":8}}");
    jbuf_free(&b);
    CHECK_STR(serve_error_type(400), "invalid_request_error");
    CHECK_STR(serve_error_type(401), "authentication_error");
    CHECK_STR(serve_error_type(403), "permission_error");
    CHECK_STR(serve_error_type(404), "not_found_error");
    CHECK_STR(serve_error_type(500), "server_error");
    CHECK_STR(serve_error_type(501), "not_supported_error");
    CHECK_STR(serve_error_type(503), "unavailable_error");
    CHECK_STR(serve_error_type(502), "server_error");
    CHECK_STR(serve_reason(413), "Payload Too Large");
    CHECK_STR(serve_reason(415), "Unsupported Media Type");
    CHECK_STR(serve_reason(599), "Unknown");
    CHECK_INT(strlen(SERVE_BODY_401), 80);   /* llama-server's Content-Length for it */
    CHECK_INT(strlen(SERVE_BODY_404), 74);
}

TEST(serve_hostport)
{
    char host[64], err[256];
    int port = -1;
    CHECK_INT(serve_parse_hostport("127.0.0.1:18093", host, sizeof host, &port, err, sizeof err), 0);
    CHECK_STR(host, "127.0.0.1");
    CHECK_INT(port, 18093);
    CHECK_INT(serve_parse_hostport("[::1]:0", host, sizeof host, &port, err, sizeof err), 0);
    CHECK_STR(host, "::1");
    CHECK_INT(port, 0);
    CHECK_INT(serve_parse_hostport("localhost:65535", host, sizeof host, &port, err, sizeof err), 0);
    CHECK_INT(port, 65535);
    CHECK_INT(serve_parse_hostport("localhost:65536", host, sizeof host, &port, err, sizeof err), -1);
    CHECK_STR(err, "localhost:65536: bad port");
    CHECK_INT(serve_parse_hostport("localhost", host, sizeof host, &port, err, sizeof err), -1);
    CHECK_STR(err, "localhost: want HOST:PORT");
    CHECK_INT(serve_parse_hostport(":80", host, sizeof host, &port, err, sizeof err), -1);
    CHECK_STR(err, ":80: no host (want HOST:PORT)");
    CHECK_INT(serve_parse_hostport("h:-1", host, sizeof host, &port, err, sizeof err), -1);
    CHECK_INT(serve_parse_hostport("h:", host, sizeof host, &port, err, sizeof err), -1);
    CHECK_INT(serve_parse_hostport("::1:80", host, sizeof host, &port, err, sizeof err), -1);
    CHECK_INT(serve_parse_hostport("[::1]80", host, sizeof host, &port, err, sizeof err), -1);
}

static void nop_handler(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)resp;
    (void)ud;
}

TEST(serve_route_patterns)
{
    char err[256];
    serve_opts o;
    serve_server *s;
    serve_opts_default(&o);
    s = serve_new(&o, err, sizeof err);
    CHECK(s != NULL);
    if (!s) return;
    CHECK_INT(serve_route(s, "GET", "/health", nop_handler, NULL, SERVE_PUBLIC), 0);
    CHECK_INT(serve_route(s, "POST", "/v1/chat/completions", nop_handler, NULL, 0), 0);
    CHECK_INT(serve_route(s, "GET", "/bankml", nop_handler, NULL, 0), 0);
    CHECK_INT(serve_route(s, "DELETE", "/api/delete", nop_handler, NULL, 0), 0);
    CHECK_INT(serve_route(s, "GET", "no-slash", nop_handler, NULL, 0), -1);
    CHECK_INT(serve_run(s), -1);   /* no listener */
    serve_free(s);
}

/* serve_llama_json_check: llama-server b11669's own words for bodies its
 * JSON library refuses (taken from a running llama-server), and the span it
 * parses for bodies it takes. */
static void json_refusal(const char *body, size_t n, const char *want)
{
    jbuf msg;
    size_t s = 99, e = 99;
    jbuf_init(&msg);
    CHECK_INT(serve_llama_json_check(body, n, &msg, &s, &e), 1);
    CHECK_STR(msg.p ? msg.p : "", want);
    jbuf_free(&msg);
}

TEST(serve_llama_json_check_messages)
{
    json_refusal("{bad", 4, "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error while "
                 "parsing object key - invalid literal; last read: '{b'; expected string literal");
    json_refusal("", 0, "[json.exception.parse_error.101] parse error at line 1, column 1: attempting to parse an "
                 "empty input; check that your input string or stream contains the expected JSON");
    json_refusal("[1,2", 4, "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error while "
                 "parsing array - unexpected end of input; expected ']'");
    json_refusal("{\"a\":1}x", 8, "[json.exception.parse_error.101] parse error at line 1, column 8: syntax error "
                 "while parsing value - invalid literal; last read: '1}x'; expected end of input");
    json_refusal("1e999", 5, "[json.exception.out_of_range.406] number overflow parsing '1e999'");
    json_refusal("{\"a\":tru}", 9, "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error "
                 "while parsing value - invalid literal; last read: '\"a\":tru}'");
}

TEST(serve_llama_json_check_accepts)
{
    static const char bom[] = "\xef\xbb\xbf{\"messages\":5}";
    static const char nul[] = "{\"a\":1}\0garbage";
    jbuf msg;
    size_t s = 99, e = 99;
    jbuf_init(&msg);
    CHECK_INT(serve_llama_json_check(bom, sizeof bom - 1, &msg, &s, &e), 0);
    CHECK_INT((int)s, 3);
    CHECK_INT((int)e, (int)sizeof bom - 1);
    CHECK_INT(serve_llama_json_check(nul, sizeof nul - 1, &msg, &s, &e), 0);
    CHECK_INT((int)s, 0);
    CHECK_INT((int)e, 7);
    jbuf_free(&msg);
}

/* The shedding rule (issue #22.1): idle, not shed, old enough; a peer over
 * its cap loses its oldest; a full server loses anyone's oldest. */
TEST(serve_pick_shed_rule)
{
    const int64_t S = 1000000000;   /* 1 s in ns */
    serve_conn_info c[5] = {
        {1, 0, 10 * S, "127.0.0.1"},   /* idle since 10 s */
        {1, 0, 5 * S, "10.0.0.2"},     /* the oldest idle, another peer */
        {0, 0, 1 * S, "127.0.0.1"},    /* working: never shed */
        {1, 0, 12 * S, "127.0.0.1"},
        {1, 0, 13 * S + S / 2, "127.0.0.1"},   /* 0.5 s old at now = 14 s: too young */
    };
    int64_t now = 14 * S;
    CHECK_INT(serve_pick_shed(c, 5, "127.0.0.1", 16, 0, now), -1);   /* under the cap, not full */
    CHECK_INT(serve_pick_shed(c, 5, "127.0.0.1", 3, 0, now), 0);     /* 3 idle of 127.0.0.1: its oldest */
    CHECK_INT(serve_pick_shed(c, 5, "127.0.0.1", 4, 0, now), -1);
    CHECK_INT(serve_pick_shed(c, 5, "127.0.0.1", 16, 1, now), 1);    /* full: anyone's oldest */
    CHECK_INT(serve_pick_shed(c, 5, NULL, 0, 1, now), 1);
    c[1].shed = 1;                                                   /* already going */
    CHECK_INT(serve_pick_shed(c, 5, "10.0.0.2", 16, 1, now), 0);
    CHECK_INT(serve_pick_shed(c, 5, "127.0.0.1", 16, 1, 10 * S + S / 2), -1);   /* all too young then */
    c[0].shed = c[3].shed = 1;
    CHECK_INT(serve_pick_shed(c, 5, NULL, 0, 1, now), -1);          /* only the young one left */
    CHECK_INT(serve_pick_shed(c, 5, NULL, 0, 1, now + S), 4);
}

/* Ollama's origins for /api/ (issue #22.3), as gin-contrib/cors matches
 * OLLAMA_ORIGINS' defaults. */
TEST(serve_ollama_origins)
{
    static const char *const ok[] = {"http://localhost", "https://localhost", "http://localhost:3000",
                                     "http://127.0.0.1:11434", "https://0.0.0.0:1", "http://0.0.0.0",
                                     "app://x", "file://", "tauri://localhost", "vscode-webview://abc",
                                     "vscode-file://vscode-app"};
    static const char *const bad[] = {"http://evil.com", "null", "http://localhost.evil.com", "http://127.0.0.2",
                                      "https://localhostx", "http://[::1]:8080", "HTTP://localhost", "chrome-extension://x",
                                      "", "ftp://localhost", "http://127.0.0.1.nip.io"};
    size_t i;
    for (i = 0; i < sizeof ok / sizeof ok[0]; i++) CHECK_INT(serve_ollama_origin_ok(NULL, ok[i]), 1);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) CHECK_INT(serve_ollama_origin_ok(NULL, bad[i]), 0);
    CHECK_INT(serve_ollama_origin_ok("https://space.example, http://b", "https://space.example"), 1);
    CHECK_INT(serve_ollama_origin_ok("https://space.example, http://b", "http://b"), 1);
    CHECK_INT(serve_ollama_origin_ok("https://space.example", "https://space.example.evil"), 0);
    CHECK_INT(serve_ollama_origin_ok("https://space.example", NULL), 0);
}
