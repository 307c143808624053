/*
 * ollama.c -- Ollama's /api/ routes on the engine, and derived models
 * (`bankml create`, /api/create, /api/copy, /api/delete). See ollama.h and
 * docs/modules/ollama.md.
 *
 * A request flows one way: serve.c frames it, this file turns Ollama's
 * fields into one engine_request (messages, the sampler's fields, stop
 * list, limit), and the engine runs it in its slot under its lock. Nothing
 * here touches a model except through engine.h.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bankml.h"
#include "base/base.h"
#include "file/gguf.h"
#include "base/json.h"
#include "engine/engine.h"
#include "api/ollama.h"
#include "api/ollama_int.h"
#include "file/pin.h"
#include "sampling/json_schema.h"
#include "sampling/sampler.h"
#include "api/serve.h"
#include "base/sha256.h"

#define OL_NDJSON "application/x-ndjson"

/* ------------------------------------------------------------------ HTTP helpers */

static void reply_error(serve_resp *resp, int code, const char *msg)
{
    jbuf b;
    jbuf_init(&b);
    jbuf_puts(&b, "{\"error\":");
    json_put_cstr_go(&b, msg);
    jbuf_putc(&b, '}');
    serve_reply(resp, code, SERVE_JSON, b.p, b.len);
    jbuf_free(&b);
}

/* Null, false, "", [] and {} count as absent (Ollama's omitempty). */
static int present(const json_value *v)
{
    if (!v) return 0;
    switch (v->type) {
    case JSON_NULL: case JSON_FALSE: return 0;
    case JSON_STRING: return v->len > 0;
    case JSON_ARRAY: case JSON_OBJECT: return v->n > 0;
    default: return 1;
    }
}

static json_value *parse_body(serve_req *req, serve_resp *resp)
{
    char err[512];
    json_value *doc = json_parse(req->body ? req->body : "", req->body_len, err, sizeof err);
    if (!doc) reply_error(resp, 400, err);
    else if (doc->type != JSON_OBJECT) {
        reply_error(resp, 400, "the body must be a JSON object");
        json_free(doc);
        doc = NULL;
    }
    return doc;
}

/* A name sent with a NUL byte ("e\u0000vil"): C strings would cut it at
 * the NUL and name another model, so it stands for itself as a name that
 * no rule accepts and no model has. */
#define NAME_WITH_NUL "<a name holding a NUL byte>"

/* A JSON string member as a name: NULL when absent or empty, NAME_WITH_NUL
 * when it holds a NUL byte. */
static const char *name_member(const json_value *body, const char *key)
{
    const char *m = NULL;
    size_t l;
    if (!json_as_str(json_get(body, key), &m, &l) || !l) return NULL;
    return memchr(m, 0, l) ? NAME_WITH_NUL : m;
}

static const char *body_model(const json_value *body)
{
    const char *m = name_member(body, "model");
    return m ? m : name_member(body, "name");
}

/* What a request's model name means: a derived model (its layer copied, so
 * it outlives a concurrent delete) over a registry entry, or a pin. */
typedef struct {
    long idx;                  /* registry entry */
    char tag[300];             /* "<name>:latest" */
    char digest[80];
    char parent[300];
    char *layer;               /* NULL for a pin */
    json_value *ldoc;
} target;

static void target_free(target *t)
{
    free(t->layer);
    json_free(t->ldoc);
}

/* The route asking, for Ollama's error when the name is not found. */
enum { FOR_CHAT, FOR_GENERATE, FOR_SHOW };

/* Ollama v0.13.3's answer to a name it cannot find (server/routes.go):
 * every route says 404 "model '<name as typed>' not found" (GetModel fails
 * with ErrNotExist), except for a name model.ParseName rejects, which
 * /api/chat calls 400 "model is required" and /api/show answers with
 * GetModelInfo's ErrModelPathInvalid, a 500 "invalid model path". */
static void reply_not_found(serve_resp *resp, int route, const char *asked)
{
    char msg[1200];
    if (!ollama_name_valid(asked) && route == FOR_CHAT) {
        reply_error(resp, 400, "model is required");
    } else if (!ollama_name_valid(asked) && route == FOR_SHOW) {
        reply_error(resp, 500, "invalid model path");
    } else {
        snprintf(msg, sizeof msg, "model '%.1100s' not found", asked ? asked : "");
        reply_error(resp, 404, msg);
    }
}

/* An absent or empty model is the startup model (spec §2.7), as on
 * llama-server's routes; Ollama itself would refuse it. A name is looked up
 * first (bankml also takes a registry path) and Ollama's error chosen only
 * when nothing matches. */
static int resolve_target(const char *asked, int route, target *t, serve_resp *resp)
{
    char err[1024];
    memset(t, 0, sizeof *t);
    pthread_mutex_lock(&ol.mu);
    const derived *d = ol_find_derived(ol.d, ol.n_d, asked);
    if (d) {
        t->idx = engine_find(ol.e, d->base_name);
        snprintf(t->tag, sizeof t->tag, "%s:latest", d->name);
        snprintf(t->digest, sizeof t->digest, "%s", d->digest);
        snprintf(t->parent, sizeof t->parent, "%s:latest", d->base_name);
        t->layer = strdup(d->layer);
    }
    pthread_mutex_unlock(&ol.mu);
    if (d) {
        t->ldoc = t->layer ? json_parse(t->layer, strlen(t->layer), err, sizeof err) : NULL;
        if (t->idx < 0 || !t->ldoc) {
            reply_error(resp, 500, "the derived model's base is not in the registry");
            return -1;
        }
        return 0;
    }
    t->idx = engine_find(ol.e, asked);
    if (t->idx < 0) {
        reply_not_found(resp, route, asked);
        return -1;
    }
    engine_entry e;
    engine_entry_get(ol.e, (size_t)t->idx, &e);
    snprintf(t->tag, sizeof t->tag, "%s:latest", e.name);
    char sha[65] = "";
    ol_pinned_sha(e.fork, e.file, sha);
    snprintf(t->digest, sizeof t->digest, "%s", sha);
    return 0;
}

/* ------------------------------------------------------------------ /api/chat and /api/generate */

static const char *const SAMPLING_OPTS[] = {"temperature", "top_k", "top_p", "min_p", "seed", "repeat_penalty",
                                            "repeat_last_n", "presence_penalty", "frequency_penalty", "typical_p",
                                            "min_keep", NULL};

/* The request's options over the derived layer's parameters, split into
 * the sampler's JSON (llama-server's field names are Ollama's), the limit,
 * num_ctx and the stop list. */
typedef struct {
    char *keys[64];            /* the sampler's fields by llama-server's names (Ollama's), */
    size_t key_lens[64];
    json_value *nums[64];      /* with their numbers, for sampler_resolve */
    size_t n_nums;
    int32_t n_predict;
    long num_ctx;              /* 0: none */
    const char *stops[64];
    size_t stop_lens[64];
    size_t n_stops;
} opts;

static int add_stop(opts *o, const json_value *v, const char *what, char *err, size_t errlen)
{
    o->n_stops = 0;
    if (!v || v->type == JSON_NULL) return 0;
    if (v->type == JSON_STRING) {
        if (v->len) o->stops[0] = v->str, o->stop_lens[0] = v->len, o->n_stops = 1;
        return 0;
    }
    if (v->type == JSON_ARRAY) {
        for (size_t i = 0; i < v->n; i++)
            if (v->items[i]->type != JSON_STRING) goto bad;
        for (size_t i = 0; i < v->n && o->n_stops < 64; i++)
            if (v->items[i]->len) o->stops[o->n_stops] = v->items[i]->str, o->stop_lens[o->n_stops++] = v->items[i]->len;
        return 0;
    }
bad:
    bk_err(err, errlen, "%s must be a string or an array of strings", what);
    return -1;
}

static int read_options(const json_value *options, const json_value *layer, opts *o, char *err, size_t errlen)
{
    const json_value *lp = json_get(layer, "parameters");
    const json_value *num[64];
    const char *keys[64];
    size_t n = 0;
    o->n_predict = -1;
    o->num_ctx = 0;
    if (options && options->type != JSON_NULL && options->type != JSON_OBJECT) {
        bk_err(err, errlen, "options must be an object");
        return -1;
    }
    if (add_stop(o, json_get(layer, "stop"), "stop", err, errlen) != 0) return -1;
    /* the layer's parameters first, then the request's, key by key */
    for (int pass = 0; pass < 2; pass++) {
        const json_value *src = pass ? options : lp;
        for (size_t i = 0; src && src->type == JSON_OBJECT && i < src->n; i++) {
            const char *k = src->keys[i];
            const json_value *v = src->items[i];
            if (pass && !strcmp(k, "stop")) {
                if (add_stop(o, v, "options.stop", err, errlen) != 0) return -1;
                continue;
            }
            if (pass && ol_in_list(OL_RESOURCE_OPTS, k)) continue;
            if (pass && !strcmp(k, "penalize_newline")) continue;
            int known = ol_in_list(SAMPLING_OPTS, k) || !strcmp(k, "num_predict") || !strcmp(k, "num_ctx") ||
                        !strcmp(k, "mirostat") || !strcmp(k, "mirostat_eta") || !strcmp(k, "mirostat_tau") ||
                        !strcmp(k, "tfs_z");
            if (!known) {
                bk_err(err, errlen, "options.%s: not an option bankML knows; it refuses rather than ignore what "
                                     "might change the answer", k);
                return -1;
            }
            if (v->type == JSON_NULL) continue;
            if (v->type != JSON_NUMBER) {
                bk_err(err, errlen, "options.%s must be a number", k);
                return -1;
            }
            double d;
            json_as_double(v, &d);
            if (!strcmp(k, "mirostat")) {
                if (d != 0) {
                    bk_err(err, errlen, "mirostat: not reproduced; bankML reproduces llama-server's default sampler "
                                         "chain");
                    return -1;
                }
                continue;
            }
            if (!strcmp(k, "tfs_z")) {
                if (d != 1) {
                    bk_err(err, errlen, "tfs_z: tail-free sampling is not reproduced (llama.cpp removed it)");
                    return -1;
                }
                continue;
            }
            if (!strcmp(k, "mirostat_eta") || !strcmp(k, "mirostat_tau")) continue;
            if (!strcmp(k, "num_predict")) {
                o->n_predict = d > 0 && d < 2147483647.0 ? (int32_t)d : -1;
                continue;
            }
            if (!strcmp(k, "num_ctx")) {
                /* whole tokens, as Ollama's int; past the server's --ctx the caller refuses it with the figure */
                if (!(d >= 1)) {
                    bk_err(err, errlen, "options.num_ctx %g: a context holds at least 1 token", d);
                    return -1;
                }
                o->num_ctx = d < 1e18 ? (long)d : (long)1e18;
                continue;
            }
            size_t j = 0;   /* a later value of the same key replaces the earlier one */
            while (j < n && strcmp(keys[j], k)) j++;
            if (j == n && n < 64) n++;
            if (j < 64) keys[j] = k, num[j] = v;
        }
    }
    for (size_t i = 0; i < n; i++) {
        o->keys[i] = (char *)keys[i];
        o->key_lens[i] = strlen(keys[i]);
        o->nums[i] = (json_value *)num[i];
    }
    o->n_nums = n;
    return 0;
}

/* The sampler's fields as one object (the request's own values, not copied). */
static json_value options_object(opts *o)
{
    json_value obj = {.type = JSON_OBJECT, .n = o->n_nums, .items = o->nums, .keys = o->keys, .key_lens = o->key_lens};
    return obj;
}

/* Ollama's refusals, before anything loads. */
static int refusals(const json_value *body, int generate, char *err, size_t errlen)
{
    if (generate && present(json_get(body, "tools"))) {
        bk_err(err, errlen, "tools: /api/generate takes no tools (Ollama's GenerateRequest has none); send them "
                             "to /api/chat");
        return -1;
    }
    if (present(json_get(body, "images"))) {
        bk_err(err, errlen, "images: bankML's models are text-only; vision is out of scope");
        return -1;
    }
    if (generate && present(json_get(body, "suffix"))) {
        bk_err(err, errlen, "suffix: fill-in-the-middle is not reproduced; send the whole prompt");
        return -1;
    }
    if (present(json_get(body, "template"))) {
        bk_err(err, errlen, "template: bankML renders the pinned model's own chat template (byte-identical to "
                             "llama.cpp); a replacement template is not taken");
        return -1;
    }
    if (generate && present(json_get(body, "context"))) {
        bk_err(err, errlen, "context: send the conversation as /api/chat messages instead; the prompt cache reuses "
                             "the shared prefix");
        return -1;
    }
    int think;
    if (ol_read_think(body, &think, err, errlen) != 0) return -1;
    const json_value *tools = json_get(body, "tools");
    int layer = think >= 0 || (!generate && tools && tools->type == JSON_ARRAY && tools->n);
    if (layer && generate && json_get(body, "raw") && json_get(body, "raw")->type == JSON_TRUE) {
        bk_err(err, errlen, "think: a raw prompt is not rendered by the template, so thinking cannot be set; send "
                             "the prompt without raw");
        return -1;
    }
    if (layer && present(json_get(body, "format"))) {
        bk_err(err, errlen, "format beside tools or think: Ollama applies the format grammar only once thinking "
                             "ends (it restarts the answer), which bankML does not reproduce; send one of them");
        return -1;
    }
    const json_value *lp = json_get(body, "logprobs");
    if (layer && lp && lp->type == JSON_TRUE) {
        bk_err(err, errlen, "logprobs beside tools or think: the parsed answer's lines are not matched to tokens "
                             "yet; send the request without logprobs");
        return -1;
    }
    /* format: what Ollama v0.13.3 cannot answer itself (its converter would
     * crash or loop on the schema, or its grammar would be cut) is bankML's
     * refusal before the load; the grammar, Ollama's invalid-format and
     * invalid-schema errors wait for the model, as llmServer.Completion
     * reads format after the load */
    const json_value *fmt = json_get(body, "format");
    if (fmt && fmt->type != JSON_NULL) {
        char *out = NULL;
        size_t len = 0;
        if (ollama_format_to_gbnf(fmt, NULL, 0, &out, &len) == JSON_SCHEMA_LIMIT) {
            bk_err(err, errlen, "format: %s", out ? out : "out of memory");
            free(out);
            return -1;
        }
        free(out);
    }
    return 0;
}

/* logprobs (a bool) and top_logprobs (an int, 0 to 20, read only with
 * logprobs; spec §2.6, 0.4.2). 0 with *n_top set (-1: no logprobs), or -1
 * with the 400 message. */
static int read_logprobs(const json_value *body, int generate, int *n_top, char *err, size_t errlen)
{
    static const char *const jt[] = {"null", "bool", "bool", "number", "string", "array", "object"};
    const char *req = generate ? "GenerateRequest" : "ChatRequest";
    const json_value *lp = json_get(body, "logprobs"), *tl = json_get(body, "top_logprobs");
    *n_top = -1;
    if (lp && lp->type != JSON_NULL && lp->type != JSON_TRUE && lp->type != JSON_FALSE) {
        bk_err(err, errlen, "json: cannot unmarshal %s into Go struct field %s.logprobs of type bool", jt[lp->type],
               req);
        return -1;
    }
    long long k = 0;
    if (tl && tl->type != JSON_NULL) {
        /* Go reads an int with ParseInt of the literal: digits only (no fraction, no exponent), in range */
        int digits = tl->type == JSON_NUMBER && tl->len > 0;
        for (size_t i = 0; digits && i < tl->len; i++)
            digits = isdigit((unsigned char)tl->str[i]) || (i == 0 && tl->str[i] == '-' && tl->len > 1);
        errno = 0;
        if (digits) k = strtoll(tl->str, NULL, 10);
        if (!digits || errno) {
            bk_err(err, errlen, "json: cannot unmarshal %s%s%.*s into Go struct field %s.top_logprobs of type int",
                   jt[tl->type], tl->type == JSON_NUMBER ? " " : "", tl->type == JSON_NUMBER ? (int)tl->len : 0,
                   tl->type == JSON_NUMBER ? tl->str : "", req);
            return -1;
        }
    }
    if (!lp || lp->type != JSON_TRUE) return 0;
    if (k < 0 || k > 20) {
        bk_err(err, errlen, "top_logprobs must be between 0 and 20");
        return -1;
    }
    *n_top = (int)k;
    return 0;
}

/* One token's entry: {"token", "logprob", "bytes" (when any), "top_logprobs" (n_top of them, when any)}. */
static void ol_put_logprob(jbuf *b, const engine_model *m, const engine_token *t, int n_top)
{
    jbuf piece;
    jbuf_init(&piece);
    for (int k = -1; k < n_top && k < (int)t->n_top; k++) {
        int32_t id = k < 0 ? t->tok : t->top[k].id;
        float p = k < 0 ? t->p : t->top[k].p;
        if (k == 0) jbuf_puts(b, ",\"top_logprobs\":[");
        else if (k > 0) jbuf_putc(b, ',');
        jbuf_reset(&piece);
        engine_piece(m, id, 0, &piece);
        jbuf_puts(b, "{\"token\":");
        json_put_str_go(b, piece.p ? piece.p : "", piece.len);
        jbuf_puts(b, ",\"logprob\":");
        ol_put_float64(b, (double)(p == 0.0f ? -FLT_MAX : logf(p)));
        if (piece.len) {
            jbuf_puts(b, ",\"bytes\":[");
            for (size_t i = 0; i < piece.len; i++) jbuf_printf(b, i ? ",%u" : "%u", (unsigned char)piece.p[i]);
            jbuf_putc(b, ']');
        }
        if (k >= 0) jbuf_putc(b, '}');
    }
    if (n_top > 0 && t->n_top > 0) jbuf_putc(b, ']');
    jbuf_putc(b, '}');
    jbuf_free(&piece);
}

/* A message's tool members in the shape llama-server reads: tool_name as
 * name, tool_call_id, and tool_calls ({id?, function: {name, arguments: an
 * object}}) as OpenAI's, the arguments written as JSON text. */
static int put_tool_fields(jbuf *out, const json_value *m, char *err, size_t errlen)
{
    static const char *const strs[][2] = {{"tool_name", "name"}, {"tool_call_id", "tool_call_id"}};
    for (size_t i = 0; i < 2; i++) {
        const json_value *v = json_get(m, strs[i][0]);
        if (!present(v)) continue;
        if (v->type != JSON_STRING) {
            bk_err(err, errlen, "json: cannot unmarshal %s into Go struct field Message.messages.%s of type string",
                   v->type == JSON_NUMBER ? "number" : v->type == JSON_ARRAY ? "array" : v->type == JSON_OBJECT
                   ? "object" : "bool", strs[i][0]);
            return -1;
        }
        if (v->len) {
            jbuf_printf(out, ",\"%s\":", strs[i][1]);
            json_put_str(out, v->str, v->len);
        }
    }
    const json_value *tcs = json_get(m, "tool_calls");
    if (!present(tcs)) return 0;
    if (tcs->type != JSON_ARRAY) {
        bk_err(err, errlen, "tool_calls must be an array of {function: {name, arguments}}");
        return -1;
    }
    jbuf_puts(out, ",\"tool_calls\":[");
    for (size_t k = 0; k < tcs->n; k++) {
        const json_value *t = tcs->items[k], *f = json_get(t, "function");
        const json_value *name = json_get(f, "name"), *args = json_get(f, "arguments"), *id = json_get(t, "id");
        if (!f || f->type != JSON_OBJECT || (name && name->type != JSON_STRING) ||
            (present(args) && args->type != JSON_OBJECT)) {
            bk_err(err, errlen, "tool_calls[%zu]: a call is {function: {name: a string, arguments: an object}}", k);
            return -1;
        }
        jbuf_puts(out, k ? ",{\"type\":\"function\"" : "{\"type\":\"function\"");
        if (id && id->type == JSON_STRING && id->len) {
            jbuf_puts(out, ",\"id\":");
            json_put_str(out, id->str, id->len);
        }
        jbuf_puts(out, ",\"function\":{\"name\":");
        json_put_str(out, name ? name->str : "", name ? name->len : 0);
        jbuf arg;
        jbuf_init(&arg);
        if (present(args)) json_put_value(&arg, args);
        else jbuf_puts(&arg, "{}");
        jbuf_puts(out, ",\"arguments\":");
        json_put_str(out, arg.p, arg.len);
        jbuf_free(&arg);
        jbuf_puts(out, "}}");
    }
    jbuf_putc(out, ']');
    return 0;
}

/* The conversation the template sees, as a JSON array text: the derived
 * layer's SYSTEM (unless the request starts with one) and MESSAGEs, then
 * the request's messages (chat), or system + prompt (generate). */
static int build_messages(const json_value *body, const json_value *layer, int generate, jbuf *out, int *empty,
                          char *err, size_t errlen)
{
    const json_value *lsys = json_get(layer, "system"), *lmsgs = json_get(layer, "messages");
    size_t n = 0;
    *empty = 1;
    jbuf_putc(out, '[');
    if (!generate) {
        const json_value *msgs = json_get(body, "messages");
        if (msgs && msgs->type != JSON_NULL && msgs->type != JSON_ARRAY) {
            bk_err(err, errlen, "messages must be an array");
            return -1;
        }
        const char *r0 = NULL;
        size_t rl;
        if (msgs && msgs->n && json_as_str(json_get(msgs->items[0], "role"), &r0, &rl) && !strcmp(r0, "system")) lsys = NULL;
        if (lsys && lsys->type == JSON_STRING && lsys->len) {
            jbuf_puts(out, "{\"role\":\"system\",\"content\":");
            json_put_str(out, lsys->str, lsys->len);
            jbuf_putc(out, '}');
            n++;
        }
        for (size_t i = 0; lmsgs && lmsgs->type == JSON_ARRAY && i < lmsgs->n; i++) {
            if (n++) jbuf_putc(out, ',');
            json_put_value(out, lmsgs->items[i]);
        }
        for (size_t i = 0; msgs && msgs->type == JSON_ARRAY && i < msgs->n; i++) {
            const json_value *m = msgs->items[i], *c;
            const char *role;
            if (m->type != JSON_OBJECT || !json_as_str(json_get(m, "role"), &role, &rl)) {
                bk_err(err, errlen, "a message without a role");
                return -1;
            }
            if (present(json_get(m, "images"))) {
                bk_err(err, errlen, "images: bankML's models are text-only; vision is out of scope");
                return -1;
            }
            c = json_get(m, "content");
            if (c && c->type != JSON_NULL && c->type != JSON_STRING) {
                bk_err(err, errlen, "only text content is in scope");
                return -1;
            }
            if (n++) jbuf_putc(out, ',');
            jbuf_puts(out, "{\"role\":");
            json_put_str(out, role, rl);
            jbuf_puts(out, ",\"content\":");
            json_put_str(out, c && c->type == JSON_STRING ? c->str : "", c && c->type == JSON_STRING ? c->len : 0);
            const json_value *th = json_get(m, "thinking");
            if (!present(th)) th = json_get(m, "reasoning_content");
            if (th && th->type == JSON_STRING && th->len) {
                jbuf_puts(out, ",\"reasoning_content\":");
                json_put_str(out, th->str, th->len);
            }
            if (put_tool_fields(out, m, err, errlen) != 0) return -1;
            jbuf_putc(out, '}');
            *empty = 0;
        }
    } else {
        const json_value *p = json_get(body, "prompt"), *s = json_get(body, "system");
        if (p && p->type != JSON_NULL && p->type != JSON_STRING) {
            bk_err(err, errlen, "prompt must be a string");
            return -1;
        }
        if (!(s && s->type == JSON_STRING && s->len)) s = lsys;
        if (s && s->type == JSON_STRING && s->len) {
            jbuf_puts(out, "{\"role\":\"system\",\"content\":");
            json_put_str(out, s->str, s->len);
            jbuf_putc(out, '}');
            n++;
        }
        for (size_t i = 0; lmsgs && lmsgs->type == JSON_ARRAY && i < lmsgs->n; i++) {
            if (n++) jbuf_putc(out, ',');
            json_put_value(out, lmsgs->items[i]);
        }
        if (p && p->type == JSON_STRING && p->len) {
            if (n++) jbuf_putc(out, ',');
            jbuf_puts(out, "{\"role\":\"user\",\"content\":");
            json_put_str(out, p->str, p->len);
            jbuf_putc(out, '}');
            *empty = 0;
        }
    }
    jbuf_putc(out, ']');
    return 0;
}

/* Tokens of the conversation made of some of the messages (ollama_fit's
 * measure): rendered by the resident model's template, then tokenized. */
typedef struct {
    const json_value *msgs;
    const engine_model *m;
    const template_opts *topts;   /* the chat layer's (tools, enable_thinking), or NULL */
} fit_ctx;

static int count_tokens(void *ud, const size_t *idx, size_t n, size_t *tokens, char *err, size_t errlen)
{
    fit_ctx *f = ud;
    jbuf prompt;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = -1;
    json_value **items = malloc((n ? n : 1) * sizeof *items);
    if (!items) {
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) items[i] = f->msgs->items[idx[i]];
    json_value arr = {.type = JSON_ARRAY, .n = n, .items = items};   /* the messages themselves, not copied */
    jbuf_init(&prompt);
    if ((f->topts ? engine_render_chat(f->m, &arr, f->topts, &prompt, err, errlen)
                  : engine_render_jinja(f->m, &arr, &prompt, err, errlen)) == 0 &&
        engine_tokenize(f->m, prompt.p ? prompt.p : "", prompt.len, &ids, &n_ids, err, errlen) == 0) {
        *tokens = n_ids;
        rc = 0;
    }
    free(ids);
    free(items);
    jbuf_free(&prompt);
    return rc;
}

typedef struct {
    serve_req *req;
    serve_resp *resp;
    const engine_model *m;
    int generate, stream, began, failed;
    const char *tag;
    jbuf raw, sent, line;
    jbuf shown;   /* the sent pieces as a client decodes them (U+FFFD for bad bytes) */
    int n_top;    /* logprobs: top_logprobs (0 to 20); -1 none */
    ol_chat oc;   /* tools and think: the chat layer */
    ol_chat_out out;
} api_ctx;

static void line_head(api_ctx *c, jbuf *b)
{
    char ts[40];
    ollama_rfc3339(bk_wall_ns(), ts);
    jbuf_reset(b);
    jbuf_puts(b, "{\"model\":");
    json_put_cstr_go(b, c->tag);
    jbuf_printf(b, ",\"created_at\":\"%s\",", ts);
}

static void answer_error(api_ctx *c, int code, const char *msg);

/* The answer's text members; with the chat layer, thinking and the tool
 * calls of c->out too (Go's omitempty: none when empty). */
static void put_text_field(api_ctx *c, jbuf *b, const char *s, size_t n, const ol_chat_out *o)
{
    jbuf_puts(b, c->generate ? "\"response\":" : "\"message\":{\"role\":\"assistant\",\"content\":");
    json_put_str_go(b, s, n);
    if (o && o->thinking.len) {
        jbuf_puts(b, ",\"thinking\":");
        json_put_str_go(b, o->thinking.p, o->thinking.len);
    }
    if (o && o->n_calls && !c->generate) {
        jbuf_puts(b, ",\"tool_calls\":[");
        jbuf_put(b, o->calls.p, o->calls.len);
        jbuf_putc(b, ']');
    }
    if (!c->generate) jbuf_putc(b, '}');
}

/* A streamed line of what the chat layer's parse added, when it added any. */
static int chat_layer_line(api_ctx *c)
{
    ol_chat_out *o = &c->out;
    if (!o->content.len && !o->thinking.len && !o->n_calls) return 0;
    line_head(c, &c->line);
    put_text_field(c, &c->line, o->content.p ? o->content.p : "", o->content.len, o);
    jbuf_puts(&c->line, ",\"done\":false}");
    json_text_go(&c->shown, o->content.p ? o->content.p : "", o->content.len);
    return serve_ndjson_line(c->resp, c->line.p, c->line.len) != 0 ? -1 : 0;
}

/* Each released piece: the growth of the answer's parsed content, one
 * NDJSON line per piece with text (as /v1's stream sends deltas). */
static int ol_on_token(void *ud, const engine_token *t, int stop_now, const engine_result *so_far)
{
    api_ctx *c = ud;
    const char *p;
    size_t pl;
    (void)stop_now;
    (void)so_far;
    if (!c->stream) return serve_client_gone(c->req) ? -1 : 0;
    jbuf_put(&c->raw, t->text, t->text_len);
    if (c->oc.on) {
        char err[512];
        ol_chat_out_reset(&c->out);
        if (ol_chat_update(&c->oc, c->raw.p, c->raw.len, 1, &c->out, err, sizeof err) != 0) {
            answer_error(c, 500, err);
            c->failed = 1;
            return -1;
        }
        return chat_layer_line(c);
    }
    engine_content(c->m, c->raw.p ? c->raw.p : "", c->raw.len, &p, &pl);
    int grew = pl > c->sent.len && !memcmp(p, c->sent.p ? c->sent.p : "", c->sent.len);
    if (!grew && c->n_top < 0) return 0;
    /* with logprobs every reported token has its line: its text, or none (a logprobs-only line) */
    line_head(c, &c->line);
    put_text_field(c, &c->line, grew ? p + c->sent.len : "", grew ? pl - c->sent.len : 0, NULL);
    jbuf_puts(&c->line, ",\"done\":false");
    if (c->n_top >= 0) {
        jbuf_puts(&c->line, ",\"logprobs\":[");
        ol_put_logprob(&c->line, c->m, t, c->n_top);
        jbuf_putc(&c->line, ']');
    }
    jbuf_putc(&c->line, '}');
    if (grew) {
        json_text_go(&c->shown, p + c->sent.len, pl - c->sent.len);
        jbuf_put(&c->sent, p + c->sent.len, pl - c->sent.len);
    }
    return serve_ndjson_line(c->resp, c->line.p, c->line.len) != 0 ? -1 : 0;
}

/* A whole answer or a stream's error line, depending on what was sent. */
static void answer_error(api_ctx *c, int code, const char *msg)
{
    if (c->began) {
        jbuf b;
        jbuf_init(&b);
        jbuf_puts(&b, "{\"error\":");
        json_put_cstr_go(&b, msg);
        jbuf_putc(&b, '}');
        serve_ndjson_line(c->resp, b.p, b.len);
        jbuf_free(&b);
    } else {
        reply_error(c->resp, code, msg);
    }
}

/* ps: the model whose request (re)loaded the weights, and its num_ctx. */
static void ps_note(const target *t, size_t num_ctx, int loaded)
{
    pthread_mutex_lock(&ol.mu);
    if (loaded || ol.ps_idx != t->idx || ol.ps_ctx != num_ctx) {
        ol.ps_idx = t->idx;
        ol.ps_ctx = num_ctx;
        snprintf(ol.ps_tag, sizeof ol.ps_tag, "%s", t->tag);
        snprintf(ol.ps_digest, sizeof ol.ps_digest, "%s", t->digest);
        snprintf(ol.ps_parent, sizeof ol.ps_parent, "%s", t->parent);
    }
    pthread_mutex_unlock(&ol.mu);
}

/* One /api/chat or /api/generate request on its way through. */
typedef struct {
    serve_req *req;
    serve_resp *resp;
    int generate;
    const json_value *body, *layer;
    target t;
    opts o;
    api_ctx c;
    int64_t keep_ms, t0, load_us;
    int stream, raw, truncate, loaded;
    json_value *msgs;
    int32_t *ids;
    size_t n_ids, dropped;
} gen_call;

/* A request with no messages: load or unload only, one final line. */
static void load_only(gen_call *g)
{
    engine_error er = {0};
    jbuf fin;
    if (g->keep_ms == 0) {
        engine_lock(ol.e);
        if (engine_resident(ol.e, NULL, NULL) == g->t.idx) engine_release(ol.e, 0);
        else engine_unlock(ol.e);
    } else if (!engine_acquire(ol.e, (size_t)g->t.idx, &g->loaded, &er)) {
        reply_error(g->resp, engine_status(er.kind), er.msg);
        return;
    } else {
        ps_note(&g->t, 0, g->loaded);
        engine_release(ol.e, g->keep_ms);
    }
    jbuf_init(&fin);
    line_head(&g->c, &fin);
    put_text_field(&g->c, &fin, "", 0, NULL);
    jbuf_printf(&fin, ",\"done\":true,\"done_reason\":\"%s\"}", g->keep_ms == 0 ? "unload" : "load");
    if (g->stream) {
        jbuf_putc(&fin, '\n');
        serve_resp_header(g->resp, "Cache-Control", "no-cache");
        serve_reply(g->resp, 200, OL_NDJSON, fin.p, fin.len);
    } else {
        serve_reply_json(g->resp, 200, &fin);
    }
    jbuf_free(&fin);
}

/* The request's flags (keep_alive, stream, shift, truncate, raw). 0, or -1
 * after answering. */
static int read_flags(gen_call *g)
{
    char err[1024];
    int shift = 0;
    if (ollama_keep_alive(json_get(g->body, "keep_alive"), ol.default_keep_ms, &g->keep_ms, err, sizeof err) != 0) {
        reply_error(g->resp, 400, err);
        return -1;
    }
    const json_value *sv = json_get(g->body, "stream");
    if (sv && sv->type != JSON_NULL && !json_is_bool(sv, &g->stream)) {
        reply_error(g->resp, 400, "stream must be true or false");
        return -1;
    }
    g->c.stream = g->stream;
    /* Ollama v0.13's `shift` (default true: when generation fills num_ctx,
     * the runner drops half the context after num_keep and goes on) and
     * `truncate` (default true: chatPrompt drops the oldest messages) */
    const json_value *shv = json_get(g->body, "shift"), *trv = json_get(g->body, "truncate");
    if (shv && shv->type != JSON_NULL && !json_is_bool(shv, &shift)) {
        reply_error(g->resp, 400, "shift must be true or false");
        return -1;
    }
    if (trv && trv->type != JSON_NULL && !json_is_bool(trv, &g->truncate)) {
        reply_error(g->resp, 400, "truncate must be true or false");
        return -1;
    }
    const json_value *rv = json_get(g->body, "raw");
    if (g->generate && rv && rv->type == JSON_TRUE) g->raw = 1;
    return shift;
}

/* The messages Ollama's chatPrompt keeps within num_ctx (oldest dropped,
 * the system messages and the last one kept), or all of them. NULL after
 * a failure (err). *fitted holds what the caller frees. */
static const json_value *fit_messages(gen_call *g, const engine_model *m, json_value *fitted, char *err,
                                      size_t errlen)
{
    const json_value *msgs = g->msgs;
    if (!(g->o.num_ctx > 0 && g->truncate && msgs->n > 1)) return msgs;
    int *is_sys = calloc(msgs->n, sizeof *is_sys);
    size_t *keep = calloc(msgs->n, sizeof *keep), n_keep = 0;
    fit_ctx f = {msgs, m, g->c.oc.on ? &g->c.oc.pre.topts : NULL};
    const json_value *use = NULL;
    int ok = is_sys && keep;
    for (size_t i = 0; ok && i < msgs->n; i++) {
        const char *role;
        size_t rl;
        is_sys[i] = json_as_str(json_get(msgs->items[i], "role"), &role, &rl) && !strcmp(role, "system");
    }
    if (!ok) {
        bk_err(err, errlen, "out of memory");
    } else if (ollama_fit(is_sys, msgs->n, (size_t)g->o.num_ctx, count_tokens, &f, keep, &n_keep, &g->dropped, err,
                          errlen) == 0) {
        fitted->items = malloc((n_keep ? n_keep : 1) * sizeof *fitted->items);
        if (fitted->items) {
            fitted->type = JSON_ARRAY;
            fitted->n = n_keep;
            for (size_t i = 0; i < n_keep; i++) fitted->items[i] = msgs->items[keep[i]];   /* not copied */
            use = fitted;
        } else {
            bk_err(err, errlen, "out of memory");
        }
    }
    free(is_sys);
    free(keep);
    return use;
}

/* The prompt's tokens: raw, or the (fitted) conversation through the
 * template; then Ollama's num_ctx rules. 0, or -1 after answering. */
static int prompt_tokens(gen_call *g, engine_model *m, engine_request *rq)
{
    char err[1024];
    int rc;
    if (g->raw) {
        const json_value *p = json_get(g->body, "prompt");
        rc = engine_tokenize(m, p->str, p->len, &g->ids, &g->n_ids, err, sizeof err);
    } else {
        json_value fitted = {.type = JSON_NULL};
        const json_value *use = fit_messages(g, m, &fitted, err, sizeof err);
        jbuf prompt;
        jbuf_init(&prompt);
        if (use && g->c.oc.on) rc = ol_chat_prepare(&g->c.oc, m, use, g->c.tag, rq, &prompt, err, sizeof err);
        else rc = use ? engine_render_jinja(m, use, &prompt, err, sizeof err) : -1;
        if (rc == 0) rc = engine_tokenize(m, prompt.p ? prompt.p : "", prompt.len, &g->ids, &g->n_ids, err, sizeof err);
        free(fitted.items);
        jbuf_free(&prompt);
    }
    if (rc != 0) {
        reply_error(g->resp, 400, err);
        return -1;
    }
    long num_ctx = g->o.num_ctx;
    if (num_ctx > 0 && !g->truncate && g->n_ids > (size_t)num_ctx) {
        reply_error(g->resp, 400, "the input length exceeds the context length");   /* Ollama's runner's words */
        return -1;
    }
    if (num_ctx > 0 && g->n_ids > (size_t)num_ctx) {
        char more[96] = "";
        if (g->dropped) snprintf(more, sizeof more, " with the %zu oldest messages dropped", g->dropped);
        snprintf(err, sizeof err, "the prompt is %zu tokens, more than num_ctx %ld%s: Ollama would cut tokens out of "
                                  "its middle (num_keep), which bankML does not reproduce; raise num_ctx or send a "
                                  "shorter conversation", g->n_ids, num_ctx, more);
        reply_error(g->resp, 400, err);
        return -1;
    }
    if (g->n_ids >= engine_model_n_ctx(m)) {
        snprintf(err, sizeof err, "the prompt has %zu tokens; the context is %zu", g->n_ids, engine_model_n_ctx(m));
        reply_error(g->resp, 400, err);
        return -1;
    }
    return 0;
}

/* The final line: counts, durations and the receipt. */
static void final_line(gen_call *g, const engine_model *m, const engine_result *res)
{
    const char *content = "";
    size_t cl = 0;
    jbuf fin;
    jbuf_init(&fin);
    ol_chat_out *o = NULL;
    if (g->c.oc.on) {   /* the final parse: a stream's last deltas and calls on their line, or the whole answer */
        char err[512];
        ol_chat_out_reset(&g->c.out);
        if (ol_chat_update(&g->c.oc, res->text.p, res->text.len, 0, &g->c.out, err, sizeof err) != 0) {
            answer_error(&g->c, 500, err);
            jbuf_free(&fin);
            return;
        }
        if (g->stream && chat_layer_line(&g->c) != 0) {
            jbuf_free(&fin);
            return;
        }
        if (!g->stream) {
            o = &g->c.out;
            content = o->content.p ? o->content.p : "";
            cl = o->content.len;
        }
    } else if (!g->stream) {
        engine_content(m, res->text.p ? res->text.p : "", res->text.len, &content, &cl);
        if (!cl) content = res->text.p ? res->text.p : "", cl = res->text.len;
    }
    line_head(&g->c, &fin);
    put_text_field(&g->c, &fin, content, cl, o);
    int64_t total_ns = serve_req_age_ms(g->req) * 1000000;
    int64_t own_ns = (bk_mono_us() - g->t0) * 1000;
    int64_t prompt_us = res->t_prompt_last ? res->t_prompt_last - res->t_start : 0;
    int64_t eval_us = res->t_gen_last && res->t_prompt_last ? res->t_gen_last - res->t_prompt_last : 0;
    if (own_ns > total_ns) total_ns = own_ns;
    /* a whole answer's logprobs: ChatResponse has them before the metrics, GenerateResponse after */
    jbuf lps;
    jbuf_init(&lps);
    if (!g->stream && g->c.n_top >= 0) {
        jbuf_puts(&lps, ",\"logprobs\":[");
        for (size_t i = 0; i < res->n_probs_out; i++) {
            if (i) jbuf_putc(&lps, ',');
            ol_put_logprob(&lps, m, &res->probs[i], g->c.n_top);
        }
        jbuf_putc(&lps, ']');
    }
    jbuf_printf(&fin, ",\"done\":true,\"done_reason\":\"%s\"", engine_finish(res));
    if (!g->generate) jbuf_put(&fin, lps.p ? lps.p : "", lps.len);
    jbuf_printf(&fin, ",\"total_duration\":%lld,\"load_duration\":%lld,"
                      "\"prompt_eval_count\":%zu,\"prompt_eval_duration\":%lld,\"eval_count\":%zu,"
                      "\"eval_duration\":%lld", (long long)total_ns, (long long)g->load_us * 1000, res->n_prompt,
                (long long)prompt_us * 1000, res->n_decoded, (long long)eval_us * 1000);
    if (g->generate) jbuf_put(&fin, lps.p ? lps.p : "", lps.len);
    jbuf_free(&lps);
    jbuf_printf(&fin, ",\"bankml_cache_n\":%zu,\"bankml_receipt\":", res->n_cached);
    /* response_sha256 is over the text as a client reads it */
    if (g->stream) {
        engine_receipt(&fin, m, res, g->req->body, g->req->body_len, serve_req_age_ms(g->req),
                       g->c.shown.p ? g->c.shown.p : "", g->c.shown.len, "", 0, 0);
    } else {
        jbuf shown;
        jbuf_init(&shown);
        json_text_go(&shown, content, cl);
        engine_receipt(&fin, m, res, g->req->body, g->req->body_len, serve_req_age_ms(g->req),
                       shown.p ? shown.p : "", shown.len, "", 0, 0);
        jbuf_free(&shown);
    }
    jbuf_putc(&fin, '}');
    if (g->stream) serve_ndjson_line(g->resp, fin.p, fin.len);
    else serve_reply_json(g->resp, 200, &fin);
    jbuf_free(&fin);
}

static int ol_client_gone(void *ud) { return serve_client_gone(((api_ctx *)ud)->req); }

/* The <piece> token references of a grammar: common_tokenize with
 * add_special false, parse_special true. */
static int ol_grammar_tokenize(void *ctx, const char *text, size_t len, int32_t **ids, size_t *n)
{
    char terr[128];
    return engine_tokenize_with(ctx, text, len, 0, 1, ids, n, terr, sizeof terr);
}

/* format, as llmServer.Completion turns it into the runner's grammar:
 * "json" is Ollama's grammarJSON, a schema the grammar of Ollama's vendored
 * converter (ollama_format_to_gbnf), constraining as the grammar sampler
 * does; null and "" none; any other non-object, and a schema the converter
 * fails on, is Ollama's 500 with its message. Ollama's double request for
 * a thinking model (routes.go, structuredOutputsState) needs a built-in
 * parser or think: true; bankML's models have no PARSER and think is
 * refused, so format applies from the first token, as there. 0, or -1 with
 * the answer sent. */
static int ol_format_grammar(gen_call *g, const engine_model *m, engine_request *rq)
{
    const json_value *fmt = json_get(g->body, "format");
    char *out = NULL;
    size_t len = 0;
    if (!fmt || fmt->type == JSON_NULL) return 0;
    int rc = ollama_format_to_gbnf(fmt, NULL, 0, &out, &len);
    if (rc != JSON_SCHEMA_OK) {
        answer_error(&g->c, rc == JSON_SCHEMA_REFUSED ? 500 : 400, out ? out : "format: out of memory");
        free(out);
        return -1;
    }
    if (!out) return 0;
    char why[512];
    gr_tokenizer tk = {(void *)m, ol_grammar_tokenize};
    rq->grammar = gr_parse(out, len, &tk, why, sizeof why);
    if (!rq->grammar) {
        char msg[600];
        bk_err(msg, sizeof msg, "format: the grammar Ollama v0.13.3 writes for this format does not parse (%s), so its "
                                "runner cannot use it either; change the schema (e.g. a pattern escape such as \\d, "
                                "which its converter copies raw)", why);
        answer_error(&g->c, 500, msg);
        free(out);
        return -1;
    }
    rq->grammar_text = out;
    rq->grammar_len = len;
    return 0;
}

/* With the model held: the sampler over its defaults, the prompt, the run
 * and the answer. */
static void generate_with(gen_call *g, engine_model *m)
{
    char err[1024];
    engine_request rq;
    engine_result res;
    engine_error er = {0};
    engine_request_init(&rq);
    memset(&res, 0, sizeof res);
    json_value sdoc = options_object(&g->o);
    sampler_params_free(&rq.sp);
    if (sampler_resolve(&rq.sp, engine_model_defaults(m), &sdoc, err, sizeof err) != 0) {
        reply_error(g->resp, 400, err);
        goto out;
    }
    rq.sp.n_probs = g->c.n_top < 0 ? 0 : g->c.n_top > 1 ? g->c.n_top : 1;   /* top_logprobs 0: the chosen one */
    rq.sp.post_sampling_probs = 0;
    if (prompt_tokens(g, m, &rq) != 0) goto out;
    if (ol_format_grammar(g, m, &rq) != 0) goto out;
    if (g->stream) {
        serve_resp_header(g->resp, "Cache-Control", "no-cache");
        if (serve_ndjson_begin(g->resp) != 0) goto out;
        g->c.began = 1;
    }
    rq.prompt = g->ids;
    rq.n_prompt = g->n_ids;
    rq.n_predict = g->o.n_predict;
    if (g->o.num_ctx > 0) {
        /* Ollama's runner with shift off (llamarunner, the one llama models
         * get) stops once prompt and answer fill num_ctx positions; the
         * token sampled from the last position is still sent, so at most
         * num_ctx - prompt + 1 tokens come, done_reason "length". */
        size_t room = (size_t)g->o.num_ctx - g->n_ids + 1;
        if (rq.n_predict < 0 || (size_t)rq.n_predict > room) rq.n_predict = (int32_t)room;
    }
    for (size_t i = 0; i < g->o.n_stops && i < ENGINE_MAX_STOPS; i++) {
        rq.stops[i] = g->o.stops[i];
        rq.stop_lens[i] = g->o.stop_lens[i];
        rq.n_stops++;
    }
    g->c.m = m;
    engine_sink sink = {ol_on_token, ol_client_gone, &g->c, NULL};
    if (engine_complete(ol.e, m, &rq, &sink, &res, &er) != 0) answer_error(&g->c, 500, er.msg);
    else if (!res.gone) {
        serve_resp_note(g->resp, g->c.tag, res.n_prompt, res.n_decoded, res.n_cached);   /* before the answer's line */
        final_line(g, m, &res);
    }
out:
    engine_result_free(&res);
    engine_request_free(&rq);
}

static void handle_gen(serve_req *req, serve_resp *resp, int generate)
{
    json_value *body = parse_body(req, resp);
    char err[1024];
    engine_error er = {0};
    jbuf mtext;
    int empty = 1;
    gen_call g;
    if (!body) return;
    memset(&g, 0, sizeof g);
    g.req = req;
    g.resp = resp;
    g.generate = generate;
    g.body = body;
    g.stream = 1;
    g.truncate = 1;
    g.t0 = bk_mono_us();
    jbuf_init(&mtext);
    jbuf_init(&g.c.raw);
    jbuf_init(&g.c.sent);
    jbuf_init(&g.c.shown);
    jbuf_init(&g.c.line);
    g.c.req = req;
    g.c.resp = resp;
    g.c.generate = generate;
    g.c.n_top = -1;
    ol_chat_init(&g.c.oc);
    ol_chat_out_init(&g.c.out);
    if (resolve_target(body_model(body), generate ? FOR_GENERATE : FOR_CHAT, &g.t, resp) != 0) goto out;
    g.c.tag = g.t.tag;
    g.layer = json_get(g.t.ldoc, "layer") ? json_get(g.t.ldoc, "layer") : g.t.ldoc;
    int shift = read_flags(&g);
    if (shift < 0) goto out;
    if (build_messages(body, g.layer, generate, &mtext, &empty, err, sizeof err) != 0) {
        reply_error(resp, 400, err);
        goto out;
    }
    if (empty) {
        load_only(&g);
        goto out;
    }
    if (shift) {
        /* only a generation can reach num_ctx: a load or unload takes it */
        reply_error(resp, 400, "shift: Ollama's context shift (half of the context after num_keep dropped, then "
                               "generation goes on over re-rotated keys) is not reproduced; bankML stops when "
                               "the answer fills num_ctx, as Ollama does with shift: false");
        goto out;
    }
    if (refusals(body, generate, err, sizeof err) != 0 || read_logprobs(body, generate, &g.c.n_top, err, sizeof err) ||
        read_options(json_get(body, "options"), g.layer, &g.o, err, sizeof err) != 0) {
        reply_error(resp, 400, err);
        goto out;
    }
    if (g.o.num_ctx > 0 && (size_t)g.o.num_ctx > engine_n_ctx_opt(ol.e)) {
        snprintf(err, sizeof err, "num_ctx %ld is larger than the context this server holds (%zu); restart bankml "
                                  "serve with --ctx %ld if it fits in memory", g.o.num_ctx, engine_n_ctx_opt(ol.e),
                 g.o.num_ctx);
        reply_error(resp, 400, err);
        goto out;
    }
    g.msgs = json_parse(mtext.p, mtext.len, err, sizeof err);
    if (!g.msgs) {
        reply_error(resp, 500, err);
        goto out;
    }
    int think = -1;
    ol_read_think(body, &think, err, sizeof err);   /* checked by refusals */
    if (!g.raw && ol_chat_begin(&g.c.oc, body, g.msgs, generate, think, err, sizeof err) != 0) {
        reply_error(resp, 400, err);
        goto out;
    }
    g.c.oc.streamed = g.stream;
    int64_t a = bk_mono_us();
    engine_model *m = engine_acquire(ol.e, (size_t)g.t.idx, &g.loaded, &er);
    if (!m) {
        reply_error(resp, engine_status(er.kind), er.msg);
        goto out;
    }
    if (g.loaded) g.load_us = bk_mono_us() - a;
    ps_note(&g.t, g.o.num_ctx > 0 ? (size_t)g.o.num_ctx : 0, g.loaded);
    generate_with(&g, m);
    engine_release(ol.e, g.keep_ms);
out:
    free(g.ids);
    target_free(&g.t);
    json_free(g.msgs);
    json_free(body);
    jbuf_free(&mtext);
    jbuf_free(&g.c.raw);
    jbuf_free(&g.c.sent);
    jbuf_free(&g.c.shown);
    jbuf_free(&g.c.line);
    ol_chat_free(&g.c.oc);
    ol_chat_out_free(&g.c.out);
}

static void h_api_chat(serve_req *req, serve_resp *resp, void *ud) { (void)ud; handle_gen(req, resp, 0); }
static void h_api_generate(serve_req *req, serve_resp *resp, void *ud) { (void)ud; handle_gen(req, resp, 1); }

/* ------------------------------------------------------------------ the other routes */

/* The header facts of registry entry i, read once. Caller holds ol.mu. */
static const hinfo *hinfo_of(size_t i)
{
    if (i >= ol.n_hi) {
        size_t n = engine_n_entries(ol.e);
        hinfo *nh = realloc(ol.hi, (n ? n : 1) * sizeof *nh);
        if (!nh) return NULL;
        for (size_t k = ol.n_hi; k < n; k++) memset(&nh[k], 0, sizeof nh[k]);
        ol.hi = nh;
        ol.n_hi = n;
        if (i >= n) return NULL;
    }
    if (!ol.hi[i].done) {
        engine_entry e;
        engine_entry_get(ol.e, i, &e);
        char why[1024];
        if (e.present) {
            ol_hinfo_fill(&ol.hi[i], e.path);
            ol.hi[i].native = engine_header_info(ol.e, e.path, why, sizeof why);
        } else {
            ol.hi[i].done = 1;
            snprintf(why, sizeof why, "pinned, but the file is not on this machine");
        }
        if (!ol.hi[i].native) ol.hi[i].why = strdup(why);
    }
    return &ol.hi[i];
}

/* bankML's verdict on a registry entry, as /api/tags lists it (and /api/show nests it):
 * {"native", "reason" (null when it plays), "file", "found"}. */
static void ol_put_native(jbuf *b, const engine_entry *e, const hinfo *hi)
{
    int native = e->present && hi && hi->native;
    jbuf_printf(b, "{\"native\":%s,\"reason\":", native ? "true" : "false");
    if (native) jbuf_puts(b, "null");
    else json_put_cstr_go(b, hi && hi->why ? hi->why : "pinned, but the file is not on this machine");
    jbuf_puts(b, ",\"file\":");
    json_put_cstr_go(b, e->file);
    jbuf_printf(b, ",\"found\":%s}", e->present ? "true" : "false");
}

static void put_details(jbuf *b, const hinfo *hi, const char *parent)
{
    jbuf_puts(b, "{\"parent_model\":");
    json_put_cstr_go(b, parent ? parent : "");
    if (hi && hi->details) {
        jbuf_putc(b, ',');
        jbuf_puts(b, hi->details);
    } else {
        jbuf_puts(b, ",\"format\":\"gguf\",\"family\":\"\",\"families\":[],\"parameter_size\":\"\","
                     "\"quantization_level\":\"\"");
    }
    jbuf_putc(b, '}');
}

static void h_version(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    serve_reply(resp, 200, SERVE_JSON, "{\"version\":\"" BANKML_VERSION "\",\"bankml\":true}",
                strlen("{\"version\":\"" BANKML_VERSION "\",\"bankml\":true}"));
}

static void h_tags(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    jbuf b;
    char ts[40];
    size_t n = engine_n_entries(ol.e), k = 0;
    jbuf_init(&b);
    jbuf_puts(&b, "{\"models\":[");
    pthread_mutex_lock(&ol.mu);
    for (size_t i = 0; i < n; i++) {
        engine_entry e;
        char sha[65] = "";
        engine_entry_get(ol.e, i, &e);
        const hinfo *hi = hinfo_of(i);
        ol_pinned_sha(e.fork, e.file, sha);
        ollama_rfc3339(hi ? hi->mtime_ns : 0, ts);
        jbuf_puts(&b, k++ ? ",{\"name\":\"" : "{\"name\":\"");
        jbuf_printf(&b, "%s:latest\",\"model\":\"%s:latest\",\"modified_at\":\"%s\",\"size\":%lld,\"digest\":\"%s\","
                        "\"details\":", e.name, e.name, ts, (long long)(hi ? hi->size : 0), sha);
        put_details(&b, hi, "");
        jbuf_puts(&b, ",\"bankml\":");
        ol_put_native(&b, &e, hi);
        jbuf_putc(&b, '}');
    }
    for (size_t i = 0; i < ol.n_d; i++) {
        const derived *d = &ol.d[i];
        long bi = engine_find(ol.e, d->base_name);
        const hinfo *hi = bi >= 0 ? hinfo_of((size_t)bi) : NULL;
        char parent[300];
        snprintf(parent, sizeof parent, "%s:latest", d->base_name);
        jbuf_puts(&b, k++ ? ",{\"name\":\"" : "{\"name\":\"");
        jbuf_printf(&b, "%s:latest\",\"model\":\"%s:latest\",\"modified_at\":\"%s\",\"size\":%lld,\"digest\":\"%s\","
                        "\"details\":", d->name, d->name, d->created_at, (long long)(hi ? hi->size : 0), d->digest);
        put_details(&b, hi, parent);
        jbuf_puts(&b, ",\"bankml\":{\"native\":true,\"reason\":null,\"derived\":true}}");
    }
    pthread_mutex_unlock(&ol.mu);
    jbuf_puts(&b, "]}");
    serve_reply_json(resp, 200, &b);
    jbuf_free(&b);
}

static void h_ps(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    jbuf b;
    int64_t left = 0;
    jbuf_init(&b);
    jbuf_puts(&b, "{\"models\":[");
    size_t n_ctx = 0;
    long idx = engine_resident(ol.e, &left, &n_ctx);   /* the residency lock only: never waits for a generation */
    if (idx >= 0) {
        engine_entry e;
        char ts[40], tag[300], digest[80], parent[300], sha[65] = "";
        engine_entry_get(ol.e, (size_t)idx, &e);
        pthread_mutex_lock(&ol.mu);
        const hinfo *hi = hinfo_of((size_t)idx);
        size_t ctx = n_ctx;
        ol_pinned_sha(e.fork, e.file, sha);
        snprintf(tag, sizeof tag, "%s:latest", e.name);
        snprintf(digest, sizeof digest, "%s", sha);
        parent[0] = 0;
        if (ol.ps_idx == idx) {
            snprintf(tag, sizeof tag, "%s", ol.ps_tag);
            snprintf(digest, sizeof digest, "%s", ol.ps_digest);
            snprintf(parent, sizeof parent, "%s", ol.ps_parent);
            if (ol.ps_ctx) ctx = ol.ps_ctx;
        }
        if (left < 0) {   /* kept for good: Ollama shows now + 292 years */
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            ol_rfc3339_parts((int64_t)now.tv_sec + (int64_t)292 * 365 * 86400 + 71 * 86400, now.tv_nsec, ts);
        } else {
            ollama_rfc3339(bk_wall_ns() + left * 1000000, ts);
        }
        jbuf_puts(&b, "{\"name\":");
        json_put_cstr_go(&b, tag);
        jbuf_puts(&b, ",\"model\":");
        json_put_cstr_go(&b, tag);
        jbuf_printf(&b, ",\"size\":%lld,\"digest\":", (long long)(hi ? hi->size : 0));
        json_put_cstr_go(&b, digest);
        jbuf_puts(&b, ",\"details\":");
        put_details(&b, hi, parent);
        jbuf_printf(&b, ",\"expires_at\":\"%s\",\"size_vram\":0,\"context_length\":%zu}", ts, ctx);
        pthread_mutex_unlock(&ol.mu);
    }
    jbuf_puts(&b, "]}");
    serve_reply_json(resp, 200, &b);
    jbuf_free(&b);
}

/* Ollama's Modelfile quoting for show: values with a newline or a quote
 * get """...""". */
static void mf_quote(jbuf *b, const char *s)
{
    if (strchr(s, '\n') || strchr(s, '"')) {
        jbuf_puts(b, "\"\"\"");
        jbuf_puts(b, s);
        jbuf_puts(b, "\"\"\"");
    } else {
        jbuf_puts(b, s);
    }
}

static void h_show(serve_req *req, serve_resp *resp, void *ud)
{
    (void)ud;
    json_value *body = parse_body(req, resp);
    target t;
    jbuf b, mf, params;
    if (!body) return;
    if (resolve_target(body_model(body), FOR_SHOW, &t, resp) != 0) {
        json_free(body);
        return;
    }
    engine_entry e;
    engine_entry_get(ol.e, (size_t)t.idx, &e);
    jbuf_init(&b);
    jbuf_init(&mf);
    jbuf_init(&params);
    pthread_mutex_lock(&ol.mu);
    const hinfo *hi = hinfo_of((size_t)t.idx);
    char sha[65] = "", ts[40];
    ol_pinned_sha(e.fork, e.file, sha);
    jbuf_printf(&mf, "# bankml %s: a pinned model (sha256 %s), verified before every load; not editable\nFROM %s\n",
                BANKML_VERSION, sha, e.path);
    if (hi && hi->params) jbuf_puts(&params, hi->params);
    const json_value *layer = t.ldoc;
    if (layer) {
        jbuf_reset(&mf);
        jbuf_printf(&mf, "# bankml %s: derived from %s (sha256 %s)\nFROM %s\n", BANKML_VERSION, e.name, sha, e.name);
        const json_value *v = json_get(layer, "system");
        if (v && v->type == JSON_STRING) {
            jbuf_puts(&mf, "SYSTEM ");
            mf_quote(&mf, v->str);
            jbuf_putc(&mf, '\n');
        }
        v = json_get(layer, "parameters");
        for (size_t i = 0; v && v->type == JSON_OBJECT && i < v->n; i++) {
            jbuf_printf(&mf, "PARAMETER %s %s\n", v->keys[i], v->items[i]->str);
            ol_fmt_param(&params, v->keys[i], v->items[i]->str);
        }
        v = json_get(layer, "stop");
        for (size_t i = 0; v && v->type == JSON_ARRAY && i < v->n; i++) {
            jbuf q;
            jbuf_init(&q);
            json_put_str_go(&q, v->items[i]->str, v->items[i]->len);
            jbuf_printf(&mf, "PARAMETER stop %s\n", q.p);
            ol_fmt_param(&params, "stop", q.p);
            jbuf_free(&q);
        }
        v = json_get(layer, "messages");
        for (size_t i = 0; v && v->type == JSON_ARRAY && i < v->n; i++) {
            const char *role = "", *content = "";
            size_t l;
            json_as_str(json_get(v->items[i], "role"), &role, &l);
            json_as_str(json_get(v->items[i], "content"), &content, &l);
            jbuf_printf(&mf, "MESSAGE %s ", role);
            mf_quote(&mf, content);
            jbuf_putc(&mf, '\n');
        }
    }
    jbuf_puts(&b, "{\"modelfile\":");
    json_put_str_go(&b, mf.p ? mf.p : "", mf.len);
    jbuf_puts(&b, ",\"parameters\":");
    json_put_str_go(&b, params.p ? params.p : "", params.len);
    jbuf_puts(&b, ",\"template\":");
    json_put_cstr_go(&b, hi && hi->tmpl ? hi->tmpl : "");
    if (layer) {
        const json_value *v = json_get(layer, "system");
        if (v && v->type == JSON_STRING) {
            jbuf_puts(&b, ",\"system\":");
            json_put_str_go(&b, v->str, v->len);
        }
        jbuf_puts(&b, ",\"license\":");
        json_put_value(&b, json_get(layer, "license"));
        jbuf_puts(&b, ",\"messages\":");
        json_put_value(&b, json_get(layer, "messages"));
    }
    jbuf_puts(&b, ",\"details\":");
    put_details(&b, hi, t.parent);
    jbuf_puts(&b, ",\"model_info\":");
    jbuf_puts(&b, hi && hi->model_info ? hi->model_info : "{}");
    ollama_rfc3339(hi ? hi->mtime_ns : 0, ts);
    int plays = e.present && hi && hi->native;
    jbuf_printf(&b, ",\"capabilities\":[%s],\"modified_at\":\"%s\",\"bankml\":{\"sha256\":\"%s\",\"native\":",
                plays ? "\"completion\"" : "", ts, sha);
    ol_put_native(&b, &e, hi);
    jbuf_printf(&b, ",\"n_ctx\":%zu", engine_n_ctx_opt(ol.e));
    if (layer) {
        jbuf_puts(&b, ",\"layer\":");
        json_put_value(&b, layer);
    }
    jbuf_puts(&b, "}}");
    pthread_mutex_unlock(&ol.mu);
    serve_reply_json(resp, 200, &b);
    jbuf_free(&b);
    jbuf_free(&mf);
    jbuf_free(&params);
    target_free(&t);
    json_free(body);
}

/* Adds or replaces a derived model in the served list. Caller holds ol.mu. */
static void derived_put(derived *d)
{
    for (size_t i = 0; i < ol.n_d; i++)
        if (!strcmp(ol.d[i].name, d->name)) {
            ol_derived_free(&ol.d[i]);
            ol.d[i] = *d;
            return;
        }
    derived *nd = realloc(ol.d, (ol.n_d + 1) * sizeof *nd);
    if (!nd) {
        ol_derived_free(d);
        return;
    }
    ol.d = nd;
    ol.d[ol.n_d++] = *d;
}

static void reply_status(serve_resp *resp, int stream, const char *const *lines, size_t n)
{
    jbuf b;
    jbuf_init(&b);
    for (size_t i = stream ? 0 : n - 1; i < n; i++) {
        jbuf_puts(&b, "{\"status\":");
        json_put_cstr_go(&b, lines[i]);
        jbuf_putc(&b, '}');
        if (stream) jbuf_putc(&b, '\n');
    }
    if (stream) serve_reply(resp, 200, OL_NDJSON, b.p, b.len);
    else serve_reply_json(resp, 200, &b);
    jbuf_free(&b);
}

static void h_create(serve_req *req, serve_resp *resp, void *ud)
{
    (void)ud;
    json_value *body = parse_body(req, resp);
    char err[1024];
    ollama_modelfile mf;
    pin_ent *pins = NULL;
    int stream = 1, have_mf = 0;
    if (!body) return;
    memset(&mf, 0, sizeof mf);
    const json_value *sv = json_get(body, "stream");
    if (sv && sv->type != JSON_NULL && !json_is_bool(sv, &stream)) {
        reply_error(resp, 400, "stream must be true or false");
        goto out;
    }
    if (present(json_get(body, "files")) || present(json_get(body, "adapters")) || present(json_get(body, "quantize"))) {
        reply_error(resp, 400, "files, adapters and quantize are not taken: a derived model is FROM a pinned model "
                               "(SYSTEM, PARAMETER, MESSAGE over it)");
        goto out;
    }
    const char *name = body_model(body), *text;
    size_t tl;
    if (!name || !ollama_name_valid(name)) {
        reply_error(resp, 400, "invalid model name");   /* Ollama's errtypes.InvalidModelNameErrMsg */
        goto out;
    }
    if (json_as_str(json_get(body, "modelfile"), &text, &tl) && tl) {
        if (ollama_modelfile_parse(text, tl, &mf, err, sizeof err) != 0) {
            reply_error(resp, 400, err);
            goto out;
        }
        have_mf = 1;
    }
    size_t n_pins = ol_pins_from_engine(&pins);
    derived made;
    pthread_mutex_lock(&ol.mu);
    int rc = ol_create_model(ol.dir, name, have_mf ? &mf : NULL, body, pins, n_pins, ol.d, ol.n_d, &made, err, sizeof err);
    if (rc == 0) derived_put(&made);
    pthread_mutex_unlock(&ol.mu);
    if (rc != 0) {
        reply_error(resp, 400, err);
        goto out;
    }
    {
        static const char *const lines[] = {"using the pinned base", "writing manifest", "success"};
        reply_status(resp, stream, lines, 3);
    }
out:
    ollama_modelfile_free(&mf);
    free(pins);
    json_free(body);
}

static void h_copy(serve_req *req, serve_resp *resp, void *ud)
{
    (void)ud;
    json_value *body = parse_body(req, resp);
    char err[1024], name[132];
    const char *src = NULL, *dst = NULL;
    size_t l;
    if (!body) return;
    /* Ollama's checks and words first (CopyHandler): the source's name, the
     * destination's name, then whether the source exists; bankml's own
     * rules for a derived model's name after them */
    if (!json_as_str(json_get(body, "source"), &src, &l)) src = "";
    else if (memchr(src, 0, l)) src = NAME_WITH_NUL;
    if (!json_as_str(json_get(body, "destination"), &dst, &l)) dst = "";
    else if (memchr(dst, 0, l)) dst = NAME_WITH_NUL;
    if (!ollama_name_valid(src) || !ollama_name_valid(dst)) {
        char q[600];
        int bad_src = !ollama_name_valid(src);
        ollama_go_quote(bad_src ? src : dst, q, sizeof q);
        snprintf(err, sizeof err, "%s %s is invalid", bad_src ? "source" : "destination", q);
        reply_error(resp, 400, err);
        goto out;
    }
    pthread_mutex_lock(&ol.mu);
    int src_known = ol_find_derived(ol.d, ol.n_d, src) || engine_find(ol.e, src) >= 0;
    pthread_mutex_unlock(&ol.mu);
    if (!src_known) {
        char q[600];
        ollama_go_quote(src, q, sizeof q);
        snprintf(err, sizeof err, "model %s not found", q);
        reply_error(resp, 404, err);
        goto out;
    }
    if (ollama_name_check(dst, name, sizeof name, err, sizeof err) != 0) {
        reply_error(resp, 400, err);
        goto out;
    }
    {
        pin_ent *pins = NULL;
        size_t n_pins = ol_pins_from_engine(&pins);
        derived made;
        int rc = -1, code = 400;
        pthread_mutex_lock(&ol.mu);
        const derived *d = ol_find_derived(ol.d, ol.n_d, src);
        long pi = d ? -1 : engine_find(ol.e, src);
        if (!ol.dir) {
            bk_err(err, sizeof err, "bankml serve was started without --registry DIR: there is nowhere to write a "
                                     "derived model");
        } else if (!d && pi < 0) {
            code = 404;   /* deleted since the check above */
            char q[600];
            ollama_go_quote(src, q, sizeof q);
            bk_err(err, sizeof err, "model %s not found", q);
        } else {
            for (size_t i = 0; i < n_pins; i++)
                if (!strcmp(pins[i].name, name)) bk_err(err, sizeof err, "%s is a pinned model's name; choose another", name);
            int clash = 0;
            for (size_t i = 0; i < n_pins; i++) clash |= !strcmp(pins[i].name, name);
            const pin_ent *base = NULL;
            for (size_t i = 0; !clash && i < n_pins; i++)
                if (!strcmp(pins[i].name, d ? d->base_name : pins[pi].name)) base = &pins[i];
            char sha[65];
            if (!clash && base && ol_pinned_sha(base->fork, base->file, sha) == 0) {
                char empty[200];
                snprintf(empty, sizeof empty, "{\"base_sha256\":\"%s\",\"system\":null,\"parameters\":{},\"stop\":[],"
                                              "\"template_sha256\":null,\"license\":[],\"messages\":[],\"requires\":null}",
                         sha);
                rc = ol_write_manifest(ol.dir, name, base, sha, d ? d->layer : empty, &made, err, sizeof err);
                if (rc == 0) derived_put(&made);
            } else if (!clash) {
                bk_err(err, sizeof err, "%s: its base is not pinned", src);
            }
        }
        pthread_mutex_unlock(&ol.mu);
        free(pins);
        if (rc != 0) {
            reply_error(resp, code, err);
            goto out;
        }
        serve_reply(resp, 200, SERVE_JSON, "", 0);
    }
out:
    json_free(body);
}

static void h_delete(serve_req *req, serve_resp *resp, void *ud)
{
    (void)ud;
    json_value *body = parse_body(req, resp);
    char err[1024], path[4096 + 200];
    if (!body) return;
    const char *name = body_model(body);
    int code = 200;
    if (!name) name = "";
    pthread_mutex_lock(&ol.mu);
    size_t i = 0;
    while (i < ol.n_d && !ollama_name_matches(ol.d[i].name, name)) i++;
    if (i == ol.n_d) {
        /* Ollama's DeleteHandler: an invalid name is 400 `name %q is
         * invalid`, an unknown one 404 "model '<name>' not found"; a pin is
         * bankml's own case */
        if (!ollama_name_valid(name)) {
            char q[600];
            ollama_go_quote(name, q, sizeof q);
            code = 400;
            bk_err(err, sizeof err, "name %s is invalid", q);
        } else if (engine_find(ol.e, name) >= 0) {
            code = 400;
            bk_err(err, sizeof err, "bankml does not delete pins over HTTP: a pinned model is removed from its "
                                     "FORK.json");
        } else {
            code = 404;
            bk_err(err, sizeof err, "model '%.900s' not found", name);
        }
    } else {
        snprintf(path, sizeof path, "%s/%s.MODEL.json", ol.dir ? ol.dir : ".", ol.d[i].name);
        if (unlink(path) != 0 && errno != ENOENT) {
            code = 500;
            bk_err(err, sizeof err, "cannot remove %s: %s", path, strerror(errno));
        } else {
            ol_derived_free(&ol.d[i]);
            memmove(&ol.d[i], &ol.d[i + 1], (ol.n_d - i - 1) * sizeof *ol.d);
            ol.n_d--;
        }
    }
    pthread_mutex_unlock(&ol.mu);
    if (code != 200) reply_error(resp, code, err);
    else serve_reply(resp, 200, SERVE_JSON, "", 0);
    json_free(body);
}

static void h_refuse(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    reply_error(resp, 400, (const char *)ud);
}

static void h_api_404(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    reply_error(resp, 404, "bankml serve --native (Ollama API): GET /api/version /api/tags /api/ps, POST /api/show "
                           "/api/chat /api/generate /api/create /api/copy, DELETE /api/delete");
}

static const char MSG_EMBED[] = "embeddings need an encoder graph (bge-m3 is XLM-R: LayerNorm, bidirectional "
                                "attention, CLS pooling), which bankML does not have yet (docs/modules/ollama.md, "
                                "Limitations); keep Ollama for embeddings";
static const char MSG_PULL[] = "bankml does not pull: models are sha256-pinned files with open licences only; "
                               "put the GGUF on this machine, pin it (bankml pin FILE --fork F --write) and it is "
                               "served by name";
static const char MSG_PUSH[] = "not offered: bankml publishes nothing; a model is shared by its pinned file and "
                               "FORK.json";

int ollama_register(struct serve_server *srv, engine *e, const char *registry_dir)
{
    ol.e = e;
    pin_ent *pins = NULL;
    int64_t ka = engine_keep_alive_ms(ol.e);   /* `bankml serve --keep-alive D`, as Ollama's OLLAMA_KEEP_ALIVE */
    ol.default_keep_ms = ka < 0 ? -1 : ka;
    pthread_mutex_lock(&ol.mu);
    free(ol.dir);
    ol.dir = registry_dir ? strdup(registry_dir) : NULL;
    size_t n_pins = ol_pins_from_engine(&pins);
    ol_derived_load_dir(ol.dir, pins, n_pins, &ol.d, &ol.n_d);
    pthread_mutex_unlock(&ol.mu);
    free(pins);
    int rc = 0;
    rc |= serve_route(srv, "GET", "/api/version", h_version, NULL, 0);
    rc |= serve_route(srv, "GET", "/api/tags", h_tags, NULL, 0);
    rc |= serve_route(srv, "GET", "/api/ps", h_ps, NULL, 0);
    rc |= serve_route(srv, "POST", "/api/show", h_show, NULL, 0);
    rc |= serve_route(srv, "POST", "/api/chat", h_api_chat, NULL, 0);
    rc |= serve_route(srv, "POST", "/api/generate", h_api_generate, NULL, 0);
    rc |= serve_route(srv, "POST", "/api/create", h_create, NULL, 0);
    rc |= serve_route(srv, "POST", "/api/copy", h_copy, NULL, 0);
    rc |= serve_route(srv, "DELETE", "/api/delete", h_delete, NULL, 0);
    rc |= serve_route(srv, "POST", "/api/embed", h_refuse, (void *)MSG_EMBED, 0);
    rc |= serve_route(srv, "POST", "/api/embeddings", h_refuse, (void *)MSG_EMBED, 0);
    rc |= serve_route(srv, "POST", "/api/pull", h_refuse, (void *)MSG_PULL, 0);
    rc |= serve_route(srv, "POST", "/api/push", h_refuse, (void *)MSG_PUSH, 0);
    rc |= serve_route(srv, "GET", "/api/*", h_api_404, NULL, 0);
    rc |= serve_route(srv, "POST", "/api/*", h_api_404, NULL, 0);
    rc |= serve_route(srv, "DELETE", "/api/*", h_api_404, NULL, 0);
    return rc ? -1 : 0;
}

