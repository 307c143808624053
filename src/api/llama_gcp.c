/*
 * llama_gcp.c -- llama-server b11669's Vertex AI prediction route
 * (server-http.cpp's register_gcp_compat), on when AIP_MODE=PREDICTION:
 * POST AIP_PREDICT_ROUTE (default /predict) takes {"instances": [...]},
 * each instance an object naming the route it is for in "@requestFormat"
 * (a camelCase alias of a route's path, "chatCompletions", or the path
 * itself), runs that route's handler on the rest of the instance (stream
 * forced off) and answers {"predictions": [...]}, each the route's answer
 * body (its status is not kept) or an error object. See llama.h and
 * docs/modules/llama.md.
 *
 * b11669 starts one thread per instance; its slots then run them
 * concurrently. bankml runs them one after another in the array's order, as
 * it runs concurrent requests (one at a time).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/llama_json.h"

#define GCP_MAX_INSTANCES 128   /* b11669's MAX_INSTANCES */

typedef struct {
    serve_server *srv;
    engine *e;
} gcp_api;

/* path_to_gcp_format: "/v1/chat/completions" -> "chatCompletions",
 * "/apply-template" -> "applyTemplate": a leading "/v1" and then "/"
 * dropped, each '/', '-' or '_' dropped with the next byte upper-cased,
 * cut at the first ':' (a path parameter). */
static void gcp_alias(const char *path, char *out, size_t cap)
{
    size_t n = 0;
    int up = 0;
    if (path[0] == '/' && path[1] == 'v' && path[2] == '1' && path[3]) path += 3;
    if (*path == '/') path++;
    for (; *path && *path != ':' && n + 1 < cap; path++) {
        unsigned char c = (unsigned char)*path;
        if (c == '/' || c == '-' || c == '_') {
            up = 1;
            continue;
        }
        out[n++] = (char)(up ? toupper(c) : c);
        up = 0;
    }
    out[n] = 0;
}

/* llama-server's routes only: Ollama's /api/ (which has its own origin rule)
 * and bankml's /bankml pages are not reachable through /predict. */
static int gcp_routable(const char *pattern)
{
    return strncmp(pattern, "/api/", 5) && strcmp(pattern, "/api") && strncmp(pattern, "/bankml", 7);
}

/* How b11669's handler table (one handler per path) resolves a format,
 * measured: of the routes with this alias, a /v1/ path first ("completions"
 * is /v1/completions, not /completions), then GET ("props" is GET /props);
 * then a route whose path is the format itself. 1 with *method and *path
 * set, or 0. */
static int gcp_resolve(serve_server *srv, const char *format, const char **method, const char **path)
{
    const char *m, *p;
    char alias[256];
    int best = -1, i;
    for (int pass = 0; pass < 2 && best < 0; pass++) {
        for (i = 0; serve_route_at(srv, i, &m, &p); i++) {
            if (!gcp_routable(p)) continue;
            if (pass == 0) {
                gcp_alias(p, alias, sizeof alias);
                if (strcmp(alias, format)) continue;
            } else if (strcmp(p, format)) {
                continue;
            }
            int score = (strncmp(p, "/v1/", 4) == 0) * 2 + (strcmp(m, "GET") == 0);
            if (best < score) {
                best = score;
                *method = m;
                *path = p;
            }
        }
    }
    return best >= 0;
}

/* {"error": format_error_response(msg)} */
static void gcp_error(jbuf *out, int code, const char *msg)
{
    serve_error_json(out, code, NULL, msg, NULL);
}

/* The instance without "@requestFormat", "stream" (when present) false. */
static void gcp_payload(const json_value *inst, jbuf *out)
{
    int first = 1;
    jbuf_putc(out, '{');
    for (size_t i = 0; i < inst->n; i++) {
        if (!strcmp(inst->keys[i], "@requestFormat")) continue;
        if (!first) jbuf_putc(out, ',');
        first = 0;
        json_put_str(out, inst->keys[i], inst->key_lens[i]);
        jbuf_putc(out, ':');
        if (!strcmp(inst->keys[i], "stream")) jbuf_puts(out, "false");
        else json_put_value(out, inst->items[i]);
    }
    jbuf_putc(out, '}');
}

/* One instance's prediction, appended to out. */
static void gcp_one(gcp_api *api, serve_req *req, const json_value *inst, jbuf *out)
{
    const json_value *f = json_get(inst, "@requestFormat");
    const char *method, *path;
    if (inst->type != JSON_OBJECT) {
        gcp_error(out, 400, "each instance must be a JSON object");
        return;
    }
    if (!f || f->type != JSON_STRING) {
        gcp_error(out, 400, "each instance must include a string @requestFormat");
        return;
    }
    char format[256];
    snprintf(format, sizeof format, "%.*s", (int)(f->len < 255 ? f->len : 255), f->str);
    if (f->len >= sizeof format || memchr(f->str, 0, f->len) || !gcp_resolve(api->srv, format, &method, &path)) {
        jbuf msg;
        jbuf_init(&msg);
        jbuf_puts(&msg, "no handler registered for @requestFormat: ");
        jbuf_put(&msg, f->str, f->len);
        gcp_error(out, 400, msg.oom ? "no handler registered for @requestFormat" : msg.p);
        jbuf_free(&msg);
        return;
    }
    jbuf payload, body;
    jbuf_init(&payload);
    jbuf_init(&body);
    gcp_payload(inst, &payload);
    int status = 0;
    int rc = payload.oom ? -1 : serve_call(api->srv, req, method, path, payload.p, payload.len, &status, &body);
    if (rc == 1) {
        gcp_error(out, 400, "predict route does not support streaming responses");
    } else if (rc != 0 || body.oom) {
        gcp_error(out, 500, "empty response from internal handler");
    } else if (body.len == 0) {
        jbuf_puts(out, "null");
    } else {
        char err[64];
        json_value *v = json_parse(body.p, body.len, err, sizeof err);
        if (v) jbuf_put(out, body.p, body.len);   /* the handlers write compact JSON as b11669 dumps it */
        else json_put_str(out, body.p, body.len); /* not JSON: the text, as a string */
        json_free(v);
    }
    jbuf_free(&payload);
    jbuf_free(&body);
}

static void h_predict(serve_req *req, serve_resp *resp, void *ud)
{
    gcp_api *api = ud;
    json_value *doc = llama_parse_body(api->e, req, resp);
    if (!doc) return;
    const json_value *inst = json_get(doc, "instances");
    if (doc->type != JSON_OBJECT) {
        llama_reply_err(resp, 400, "request body must be a JSON object");
    } else if (!inst || inst->type != JSON_ARRAY) {
        llama_reply_err(resp, 400, "request body must include an array field named instances");
    } else if (inst->n > GCP_MAX_INSTANCES) {
        llama_reply_err(resp, 400, "instances array exceeds maximum size of 128");
    } else {
        jbuf out;
        jbuf_init(&out);
        jbuf_puts(&out, "{\"predictions\":[");
        for (size_t i = 0; i < inst->n; i++) {
            if (i) jbuf_putc(&out, ',');
            gcp_one(api, req, inst->items[i], &out);
        }
        jbuf_puts(&out, "]}");
        serve_reply_json(resp, 200, &out);
        jbuf_free(&out);
    }
    json_free(doc);
}

void *llama_gcp_register(serve_server *srv, engine *e, const char *predict_route, char *err, size_t errlen)
{
    const char *m, *p;
    for (int i = 0; serve_route_at(srv, i, &m, &p); i++)
        if (!strcmp(p, predict_route)) {
            snprintf(err, errlen, "AIP_PREDICT_ROUTE=%s conflicts with an existing llama-server route", predict_route);
            return NULL;
        }
    gcp_api *api = calloc(1, sizeof *api);
    if (!api) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    api->srv = srv;
    api->e = e;
    if (serve_route(srv, "POST", predict_route, h_predict, api, 0) != 0) {
        free(api);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return api;
}

void llama_gcp_free(void *gcp)
{
    free(gcp);
}
