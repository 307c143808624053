/*
 * serve_driver.c -- src/api/serve.c with a few demo routes, for the black-box
 * test testing/test_serve.py. No model: each route exercises one part of
 * the transport (JSON echo, SSE and NDJSON streams, a slow handler that
 * watches for its client to leave, a handler that answers nothing).
 *
 *   serve_driver --listen H:P [--upstream H:P] [--api-key K] [--allow-origin O,..]
 *                [--read-timeout-ms N] [--grace-ms N] [--max-conns N] [--any-post]
 *
 * Prints "listening PORT [PORT2]" on stdout once bound (port 0 = any free
 * port), then serves until SIGINT/SIGTERM, prints "stopped" and exits 0.
 */
#include "api/serve.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void health(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    serve_reply(resp, 200, SERVE_JSON, "{\"status\":\"ok\"}", 15);
}

static void root(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    serve_reply_text(resp, 200, "serve_driver is running");
}

/* Everything the server parsed, as JSON. */
static void echo(serve_req *req, serve_resp *resp, void *ud)
{
    jbuf b;
    size_t i;
    const char *ct = serve_header_get(req, "content-type");
    (void)ud;
    jbuf_init(&b);
    jbuf_puts(&b, "{\"method\": ");
    json_put_cstr(&b, req->method);
    jbuf_puts(&b, ", \"target\": ");
    json_put_cstr(&b, req->target);
    jbuf_puts(&b, ", \"path\": ");
    json_put_cstr(&b, req->path);
    jbuf_puts(&b, ", \"query\": ");
    json_put_cstr(&b, req->query);
    jbuf_puts(&b, ", \"content_type\": ");
    if (ct) json_put_cstr(&b, ct); else jbuf_puts(&b, "null");
    jbuf_printf(&b, ", \"body_len\": %zu, \"body\": ", req->body_len);
    json_put_str(&b, req->body, req->body_len);
    jbuf_puts(&b, ", \"peer\": ");
    json_put_cstr(&b, req->peer);
    jbuf_printf(&b, ", \"listener\": %d, \"n_headers\": %zu, \"params\": {", req->listener, req->n_headers);
    for (i = 0; i < req->n_params; i++) {
        if (i) jbuf_puts(&b, ", ");
        json_put_cstr(&b, req->param_names[i]);
        jbuf_puts(&b, ": ");
        json_put_cstr(&b, req->param_values[i]);
    }
    jbuf_puts(&b, "}}");
    serve_reply_json(resp, 200, &b);
    jbuf_free(&b);
}

/* Parses the body: 400 in llama-server's shape when it is not JSON. */
static void json_route(serve_req *req, serve_resp *resp, void *ud)
{
    char err[256];
    json_value *v = json_parse(req->body, req->body_len, err, sizeof err);
    (void)ud;
    if (!v) {
        serve_reply_error(resp, 400, NULL, err, NULL);
        return;
    }
    json_free(v);
    serve_reply(resp, 200, SERVE_JSON, "{\"ok\":true}", 11);
}

static int query_int(serve_req *req, const char *name, int dflt)
{
    char v[32];
    return serve_query_get(req, name, v, sizeof v) == 1 ? atoi(v) : dflt;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
    nanosleep(&ts, NULL);
}

/* n events {"i": k}, each ms apart, then [DONE]. */
static void sse(serve_req *req, serve_resp *resp, void *ud)
{
    int n = query_int(req, "n", 3), ms = query_int(req, "ms", 0), i;
    char ev[64];
    (void)ud;
    if (serve_sse_begin(resp) != 0) return;
    for (i = 0; i < n; i++) {
        int len = snprintf(ev, sizeof ev, "{\"i\": %d}", i);
        if (serve_sse_event(resp, ev, (size_t)len) != 0) return;
        if (ms) sleep_ms(ms);
    }
    serve_sse_event(resp, "[DONE]", 6);
}

static void ndjson(serve_req *req, serve_resp *resp, void *ud)
{
    int n = query_int(req, "n", 3), i;
    char ev[64];
    (void)ud;
    if (serve_ndjson_begin(resp) != 0) return;
    for (i = 0; i < n; i++) {
        int len = snprintf(ev, sizeof ev, "{\"i\": %d, \"done\": %s}", i, i == n - 1 ? "true" : "false");
        if (serve_ndjson_line(resp, ev, (size_t)len) != 0) return;
    }
}

/* The slow handler: streams a tick every 20 ms for up to ms, and stops as
 * soon as serve_client_gone() says so. The outcome is kept for /slow/result. */
static pthread_mutex_t slow_mu = PTHREAD_MUTEX_INITIALIZER;
static int slow_gone = -1, slow_ticks = -1;

static void slow(serve_req *req, serve_resp *resp, void *ud)
{
    int ms = query_int(req, "ms", 10000), ticks = 0, gone = 0, t;
    (void)ud;
    pthread_mutex_lock(&slow_mu);
    slow_gone = slow_ticks = -1;
    pthread_mutex_unlock(&slow_mu);
    if (serve_sse_begin(resp) != 0) return;
    serve_sse_event(resp, "{\"started\": true}", 17);
    for (t = 0; t < ms; t += 20) {
        if (serve_client_gone(req)) { gone = 1; break; }
        sleep_ms(20);
        ticks++;
    }
    if (!gone) serve_sse_event(resp, "[DONE]", 6);
    pthread_mutex_lock(&slow_mu);
    slow_gone = gone;
    slow_ticks = ticks;
    pthread_mutex_unlock(&slow_mu);
}

static void slow_result(serve_req *req, serve_resp *resp, void *ud)
{
    jbuf b;
    (void)req;
    (void)ud;
    jbuf_init(&b);
    pthread_mutex_lock(&slow_mu);
    jbuf_printf(&b, "{\"gone\": %d, \"ticks\": %d}", slow_gone, slow_ticks);
    pthread_mutex_unlock(&slow_mu);
    serve_reply_json(resp, 200, &b);
    jbuf_free(&b);
}

/* n SSE events of size bytes each, as fast as the handler can write them
 * (a generation that never waits for its reader); how many went into the
 * stream, whether it was cut and how long the handler took are kept for
 * /flood/result. */
static int flood_done = -1, flood_cut = -1, flood_ms = -1;

static void flood(serve_req *req, serve_resp *resp, void *ud)
{
    int n = query_int(req, "n", 1000), size = query_int(req, "size", 1000), i, cut = 0;
    struct timespec t0, t1;
    char *ev = malloc((size_t)size + 16);
    (void)ud;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!ev || serve_sse_begin(resp) != 0) { free(ev); return; }
    for (i = 0; i < n; i++) {
        int k = snprintf(ev, 16, "%08d", i);
        memset(ev + k, 'x', (size_t)size - (size_t)k);
        if (serve_sse_event(resp, ev, (size_t)size) != 0) { cut = 1; break; }
    }
    if (!cut) serve_sse_event(resp, "[DONE]", 6);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    free(ev);
    pthread_mutex_lock(&slow_mu);
    flood_done = i;
    flood_cut = cut;
    flood_ms = (int)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
    pthread_mutex_unlock(&slow_mu);
}

static void flood_result(serve_req *req, serve_resp *resp, void *ud)
{
    jbuf b;
    (void)req;
    (void)ud;
    jbuf_init(&b);
    pthread_mutex_lock(&slow_mu);
    jbuf_printf(&b, "{\"done\": %d, \"cut\": %d, \"ms\": %d}", flood_done, flood_cut, flood_ms);
    pthread_mutex_unlock(&slow_mu);
    serve_reply_json(resp, 200, &b);
    jbuf_free(&b);
}

/* Holds the connection ms, then answers (concurrency and stop tests). */
static void hold(serve_req *req, serve_resp *resp, void *ud)
{
    int ms = query_int(req, "ms", 1000), t;
    (void)ud;
    for (t = 0; t < ms; t += 10) {
        if (serve_client_gone(req)) return;
        sleep_ms(10);
    }
    serve_reply_text(resp, 200, "held");
}

static void error_route(serve_req *req, serve_resp *resp, void *ud)
{
    (void)ud;
    serve_reply_error(resp, query_int(req, "code", 500), NULL, "demo error", NULL);
}

static void silent(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)resp;
    (void)ud;
}

int main(int argc, char **argv)
{
    serve_opts o;
    serve_server *s;
    const char *listen = "127.0.0.1:0", *upstream = NULL;
    char err[512];
    int i, l0, l1 = -1;
    serve_opts_default(&o);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--any-post") == 0) { o.json_posts_only = 0; continue; }
        if (!v) { fprintf(stderr, "serve_driver: %s needs a value\n", a); return 2; }
        if (strcmp(a, "--listen") == 0) listen = v;
        else if (strcmp(a, "--upstream") == 0) upstream = v;
        else if (strcmp(a, "--api-key") == 0) o.api_keys = v;
        else if (strcmp(a, "--allow-origin") == 0) o.allow_origins = v;
        else if (strcmp(a, "--read-timeout-ms") == 0) o.read_timeout_ms = atoi(v);
        else if (strcmp(a, "--grace-ms") == 0) o.grace_ms = atoi(v);
        else if (strcmp(a, "--max-conns") == 0) o.max_conns = atoi(v);
        else if (strcmp(a, "--head-timeout-ms") == 0) o.head_timeout_ms = atoi(v);
        else if (strcmp(a, "--body-timeout-ms") == 0) o.body_timeout_ms = atoi(v);
        else if (strcmp(a, "--idle-per-peer") == 0) o.idle_per_peer = atoi(v);
        else if (strcmp(a, "--stream-buffer") == 0) o.stream_buffer = (size_t)atol(v);
        else { fprintf(stderr, "serve_driver: unknown option %s\n", a); return 2; }
        i++;
    }
    s = serve_new(&o, err, sizeof err);
    if (!s) { fprintf(stderr, "serve_driver: %s\n", err); return 1; }
    serve_route(s, "GET", "/health", health, NULL, SERVE_PUBLIC);
    serve_route(s, "GET", "/v1/health", health, NULL, SERVE_PUBLIC);
    serve_route(s, "GET", "/", root, NULL, SERVE_PUBLIC);
    serve_route(s, "GET", "/always", health, NULL, SERVE_PUBLIC | SERVE_ALWAYS);
    serve_route(s, "GET", "/echo", echo, NULL, 0);
    serve_route(s, "POST", "/echo", echo, NULL, 0);
    serve_route(s, "DELETE", "/echo", echo, NULL, 0);
    serve_route(s, "POST", "/json", json_route, NULL, 0);
    serve_route(s, "GET", "/sse", sse, NULL, 0);
    serve_route(s, "GET", "/ndjson", ndjson, NULL, 0);
    serve_route(s, "GET", "/slow/result", slow_result, NULL, 0);
    serve_route(s, "GET", "/flood/result", flood_result, NULL, 0);
    serve_route(s, "GET", "/flood", flood, NULL, 0);
    serve_route(s, "GET", "/slow", slow, NULL, 0);
    serve_route(s, "GET", "/hold", hold, NULL, 0);
    serve_route(s, "GET", "/error", error_route, NULL, 0);
    serve_route(s, "GET", "/silent", silent, NULL, 0);
    serve_route(s, "POST", "/slots/:id", echo, NULL, 0);
    serve_route(s, "GET", "/api/*", echo, NULL, 0);
    l0 = serve_listen(s, listen, err, sizeof err);
    if (l0 < 0) { fprintf(stderr, "serve_driver: %s\n", err); return 1; }
    if (upstream) {
        l1 = serve_listen(s, upstream, err, sizeof err);
        if (l1 < 0) { fprintf(stderr, "serve_driver: %s (is something running there?)\n", err); return 1; }
    }
    if (serve_install_signals(s) != 0) { perror("serve_driver: sigaction"); return 1; }
    if (l1 >= 0) printf("listening %d %d\n", serve_port(s, l0), serve_port(s, l1));
    else printf("listening %d\n", serve_port(s, l0));
    fflush(stdout);
    serve_run(s);
    serve_free(s);
    printf("stopped\n");
    fflush(stdout);
    return 0;
}
