/*
 * llama.c -- llama-server b11669's routes on the engine: /v1/chat/completions
 * and /completion (streamed and not), /tokenize, /detokenize,
 * /apply-template, /props, /health, /v1/models, and its 404s. Requests are
 * read by llama_req.c and answers shaped by llama_out.c. See llama.h and
 * docs/modules/llama.md.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/llama.h"
#include "api/llama_json.h"
#include "base/base.h"

struct llama_api {
    engine *e;
    serve_server *srv;
    void *compat;              /* llama_compat.c's routes */
    void *slots_api;           /* llama_slots.c's routes */
    void *gcp;                 /* llama_gcp.c's /predict, with AIP_MODE=PREDICTION */
    llama_api_opts o;
    char *props_sleeping;      /* /props while the model sleeps (props_mu held to touch it) */
    pthread_mutex_t props_mu;  /* a leaf: two /props may build the body at once, without the engine lock */
    char media_marker[64];     /* /props media_marker: $LLAMA_MEDIA_MARKER, else "<__media_" + 32 random + "__>" */
};

/* get_media_marker: fixed by the environment, else 32 random characters of
 * [0-9A-Za-z] once per server. */
static void make_media_marker(char *out, size_t n)
{
    static const char abc[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    const char *env = getenv("LLAMA_MEDIA_MARKER");
    if (env && *env) {
        snprintf(out, n, "%s", env);
        return;
    }
    unsigned char r[32];
    FILE *f = fopen("/dev/urandom", "rb");
    size_t got = f ? fread(r, 1, sizeof r, f) : 0;
    if (f) fclose(f);
    uint64_t x = (uint64_t)bk_wall_ns() ^ ((uint64_t)getpid() << 32);
    char mid[33];
    for (size_t i = 0; i < 32; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;   /* only where /dev/urandom gave nothing */
        mid[i] = abc[(i < got ? r[i] : (unsigned char)(x >> 56)) % (sizeof abc - 1)];
    }
    mid[32] = 0;
    snprintf(out, n, "<__media_%s__>", mid);
}

/* ------------------------------------------------------------------ completions */

/* One completion's answer in the making. */
typedef struct {
    serve_resp *resp;
    serve_req *req;
    const engine_model *m;
    const engine_request *rq;
    int chat, began, has_new_line;
    char id[48];
    long long created;
    const char *model_name;
    jbuf raw;                  /* text sent so far (partials) */
    jbuf sent;                 /* parsed content sent so far (chat deltas) */
    jbuf shown;                /* those deltas as a client decodes them (U+FFFD for bad bytes) */
    jbuf lp;                   /* streamed logprobs entries joined (receipt) */
    size_t n_lp;
    jbuf ev;
    const json_value *fields;  /* response_fields: an array of strings, or NULL */
    int index;                 /* the task's prompt among the request's */
    jbuf *collect;             /* several prompts, not streamed: the finals joined here, not sent */
    int replied;               /* an error was answered (or sent): nothing more goes out */
    jbuf prefill;              /* a continued message's content: the non-streamed content starts with it */
    const llama_pre *pre;      /* the request's reading (its route, a chat's messages) */
    const int32_t *ids;        /* the running task's prompt */
    size_t n_ids;
    const json_value *vfields; /* response_fields for a chat's __verbose (an array of strings), or NULL */
    llama_chat *cl;            /* the chat-format layer (cl->active: the answer is parsed), NULL none */
} sctx;

static int send_event(sctx *c)
{
    if (!c->began) {
        c->began = 1;
        if (serve_sse_begin(c->resp) != 0) return -1;
    }
    return serve_sse_event(c->resp, c->ev.p, c->ev.len);
}

static void chunk_head(sctx *c)
{
    jbuf_reset(&c->ev);
    jbuf_puts(&c->ev, "{\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":");
}

static void chunk_tail(sctx *c)
{
    jbuf_printf(&c->ev, ",\"created\":%lld,\"id\":\"%s\",\"model\":", c->created, c->id);
    json_put_cstr_nl(&c->ev, c->model_name);
    jbuf_puts(&c->ev, ",\"system_fingerprint\":\"" LLAMA_FINGERPRINT "\",\"object\":\"chat.completion.chunk\"");
}

/* /completion's partial result for one token. */
static int completion_partial(sctx *c, const engine_token *t, int stop_now, const engine_result *g)
{
    jbuf_reset(&c->ev);
    llama_put_native_partial(&c->ev, c->m, c->rq, t, stop_now, g, c->index);
    return send_event(c);
}

/* One chat error event (an exception while a stream's result was read). */
static int chat_error_event(sctx *c, const char *msg)
{
    jbuf_reset(&c->ev);
    jbuf_puts(&c->ev, "{\"error\":{\"code\":500,\"message\":");
    json_put_cstr_nl(&c->ev, msg);
    jbuf_puts(&c->ev, ",\"type\":\"server_error\"}}");
    send_event(c);
    c->replied = 1;
    return -1;
}

/* The stream chunks of the chat layer's deltas (to_json_oaicompat_chat of a
 * partial, or the final's deltas): the role delta first when `first`, then
 * one chunk per delta, the token's logprobs and the timings on the last. */
static int chat_layer_chunks(sctx *c, const engine_token *t, int first, const chat_msg_delta *d, size_t nd,
                             int timed, const engine_result *g)
{
    size_t total = (size_t)(first != 0) + nd;
    for (size_t i = 0; i < total; i++) {
        int last = i + 1 == total;
        chunk_head(c);
        if (first && i == 0) {
            jbuf_puts(&c->ev, "{\"role\":\"assistant\",\"content\":null}");
        } else {
            const chat_msg_delta *x = &d[i - (first != 0)];
            llama_chat_put_delta(&c->ev, x);
            if (x->content_delta.len) json_text_nl(&c->shown, x->content_delta.p, x->content_delta.len);
        }
        if (last && t && c->rq->sp.n_probs > 0) {
            jbuf_puts(&c->ev, ",\"logprobs\":{\"content\":");
            size_t s0 = c->ev.len;
            llama_put_probs(&c->ev, c->m, t, 0, 1);
            if (c->n_lp++) jbuf_puts(&c->lp, ", ");
            jbuf_put(&c->lp, c->ev.p + s0 + 1, c->ev.len - s0 - 2);
            jbuf_putc(&c->ev, '}');
        }
        jbuf_puts(&c->ev, "}]");
        chunk_tail(c);
        if (last && timed) {
            jbuf_puts(&c->ev, ",\"timings\":");
            llama_put_timings(&c->ev, g);
        }
        jbuf_putc(&c->ev, '}');
        if (send_event(c) != 0) return -1;
    }
    return 0;
}

/* A partial result through the chat layer: the answer so far parsed, its deltas sent. */
static int chat_layer_partial(sctx *c, const engine_token *t, int stop_now, const engine_result *g)
{
    chat_msg_delta *d = NULL;
    size_t nd = 0;
    char err[512];
    if (llama_chat_update(c->cl, c->raw.p, c->raw.len, 1, &d, &nd, err, sizeof err) != 0)
        return chat_error_event(c, err);
    int rc = chat_layer_chunks(c, t, g->n_decoded == 1, d, nd, llama_partial_timed(c->rq, stop_now), g);
    chat_msg_deltas_free(d, nd);
    return rc;
}

/* The chat stream's chunks for one token: a role delta first, then the
 * parsed content's growth. */
static int chat_partial(sctx *c, const engine_token *t, int stop_now, const engine_result *g)
{
    if (c->cl && c->cl->active) return chat_layer_partial(c, t, stop_now, g);
    const char *p;
    size_t n;
    int have_delta = 0, rc = 0;
    jbuf delta, text;
    jbuf_init(&delta);
    jbuf_init(&text);
    engine_content(c->m, c->raw.p ? c->raw.p : "", c->raw.len, &p, &n);
    int opened = engine_reasoning_opened(c->m, p, n);
    if (opened == 2 && !stop_now) n = 0;   /* it may still open one: nothing sent yet */
    if (opened == 1) {   /* refused, never answered differently: an error event, the end */
        jbuf_reset(&c->ev);
        jbuf_puts(&c->ev, "{\"error\":");
        json_put_cstr_nl(&c->ev, ENGINE_REASONING_REFUSED);
        jbuf_putc(&c->ev, '}');
        send_event(c);
        jbuf_free(&delta);
        jbuf_free(&text);
        return -1;
    }
    json_text_peg(&text, p, n);   /* the chat parser's UTF-8 walk */
    p = text.p ? text.p : "";
    n = text.len;
    if (n > c->sent.len && !memcmp(p, c->sent.p ? c->sent.p : "", c->sent.len)) {
        jbuf_puts(&delta, "{\"content\":");
        json_put_str_nl(&delta, p + c->sent.len, n - c->sent.len);
        jbuf_putc(&delta, '}');
        json_text_nl(&c->shown, p + c->sent.len, n - c->sent.len);
        jbuf_put(&c->sent, p + c->sent.len, n - c->sent.len);
        have_delta = 1;
    }
    if (g->n_decoded == 1) {
        chunk_head(c);
        jbuf_puts(&c->ev, "{\"role\":\"assistant\",\"content\":null}");
        if (!have_delta) goto extras;
        jbuf_puts(&c->ev, "}]");
        chunk_tail(c);
        jbuf_putc(&c->ev, '}');
        if (send_event(c) != 0) rc = -1;
    }
    if (!have_delta) goto done;
    chunk_head(c);
    jbuf_put(&c->ev, delta.p, delta.len);
extras:
    if (c->rq->sp.n_probs > 0) {
        jbuf_puts(&c->ev, ",\"logprobs\":{\"content\":");
        size_t s0 = c->ev.len;
        llama_put_probs(&c->ev, c->m, t, 0, 1);
        /* the receipt joins each chunk's entries without brackets */
        if (c->n_lp++) jbuf_puts(&c->lp, ", ");
        jbuf_put(&c->lp, c->ev.p + s0 + 1, c->ev.len - s0 - 2);
        jbuf_putc(&c->ev, '}');
    }
    jbuf_puts(&c->ev, "}]");
    chunk_tail(c);
    if (llama_partial_timed(c->rq, stop_now)) {
        jbuf_puts(&c->ev, ",\"timings\":");
        llama_put_timings(&c->ev, g);
    }
    jbuf_putc(&c->ev, '}');
    if (send_event(c) != 0) rc = -1;
done:
    jbuf_free(&delta);
    jbuf_free(&text);
    return rc;
}

/* The engine's sink: a partial result (one token), as llama-server streams it. */
static int on_token(void *ud, const engine_token *t, int stop_now, const engine_result *g)
{
    sctx *c = ud;
    if (memchr(t->text, '\n', t->text_len)) c->has_new_line = 1;
    if (!c->rq->stream) return serve_client_gone(c->req) ? -1 : 0;
    jbuf_put(&c->raw, t->text, t->text_len);
    return c->chat ? chat_partial(c, t, stop_now, g) : completion_partial(c, t, stop_now, g);
}

static int client_gone(void *ud) { return serve_client_gone(((sctx *)ud)->req); }

/* The engine's progress sink: with stream and return_progress, b11669's
 * progress partial (a result with is_progress and no token): /completion's
 * carries an empty content and "tokens":[0], chat's is a role chunk; both
 * with the timings so far when timings_per_token is on. */
static int on_progress(void *ud, const engine_progress *p, const engine_result *g)
{
    sctx *c = ud;
    if (!c->rq->stream || !c->rq->return_progress) return 0;
    if (c->chat) {
        chunk_head(c);
        jbuf_puts(&c->ev, "{\"role\":\"assistant\",\"content\":null}}]");
        chunk_tail(c);
    } else {
        jbuf_reset(&c->ev);
        llama_put_native_progress(&c->ev, c->rq, p, g, c->index);
        return send_event(c);
    }
    if (c->rq->timings_per_token) {
        jbuf_puts(&c->ev, ",\"timings\":");
        llama_put_timings(&c->ev, g);
    }
    jbuf_puts(&c->ev, ",\"prompt_progress\":");
    llama_put_progress(&c->ev, p);
    jbuf_putc(&c->ev, '}');
    return send_event(c);
}

/* The task's /completion object (llama_put_native_final) over c. */
static void put_native(sctx *c, jbuf *b, const engine_result *g, const json_value *fields)
{
    llama_final f = {c->m, c->pre, c->rq, g, c->ids, c->n_ids, c->index, c->has_new_line, c->model_name, fields};
    llama_put_native_final(b, &f);
}

/* b11669's __verbose member (the request's `verbose`): the task's
 * /completion object, response_fields applied. */
static void put_verbose(sctx *c, jbuf *b, const engine_result *g)
{
    if (!c->rq->verbose) return;
    jbuf_puts(b, ",\"__verbose\":");
    put_native(c, b, g, c->vfields);
}

/* /completion's final result (the last event when streaming). */
static void completion_final(sctx *c, const engine_result *g)
{
    jbuf out;
    jbuf_init(&out);
    put_native(c, &out, g, c->fields);
    if (c->rq->stream) {
        jbuf_reset(&c->ev);
        jbuf_put(&c->ev, out.p, out.len);
        send_event(c);
    } else if (c->collect) {
        if (c->collect->len) jbuf_putc(c->collect, ',');
        jbuf_put(c->collect, out.p, out.len);
    } else {
        serve_reply_json(c->resp, 200, &out);
    }
    jbuf_free(&out);
}

/* The chat answer, not streamed. */
static void chat_final(sctx *c, const engine_result *g)
{
    const engine_request *rq = c->rq;
    const char *content;
    size_t cl, lp0 = 0, lp1 = 0;
    jbuf out, text;
    jbuf_init(&out);
    jbuf_init(&text);
    const char *finish = engine_finish(g);
    if (c->cl && c->cl->active) {   /* the chat layer: the final parse */
        chat_msg_delta *d = NULL;
        size_t nd = 0;
        char err[512];
        if (llama_chat_update(c->cl, g->text.p, g->text.len, 0, &d, &nd, err, sizeof err) != 0) {
            llama_reply_err(c->resp, 500, err);
            jbuf_free(&out);
            jbuf_free(&text);
            return;
        }
        chat_msg_deltas_free(d, nd);
        if (c->cl->msg.ncalls && (g->stop == ENGINE_STOP_EOS || g->stop == ENGINE_STOP_WORD)) finish = "tool_calls";
        content = c->cl->msg.content.p ? c->cl->msg.content.p : "";
        cl = c->cl->msg.content.len;
        if (!c->cl->msg.content.len && !c->cl->msg.reasoning.len && !c->cl->msg.ncalls) {
            content = g->text.p ? g->text.p : "";
            cl = g->text.len;
        }
        jbuf_printf(&out, "{\"choices\":[{\"finish_reason\":\"%s\",\"index\":0,\"message\":", finish);
        llama_chat_put_message(&out, &c->cl->msg, g->text.p, g->text.len);
        goto message_done;
    }
    engine_content(c->m, g->text.p ? g->text.p : "", g->text.len, &content, &cl);
    if (engine_reasoning_opened(c->m, content, cl) == 1) {
        llama_reply_err(c->resp, 500, ENGINE_REASONING_REFUSED);
        jbuf_free(&out);
        jbuf_free(&text);
        return;
    }
    /* b11669 parses the generation prompt with a continuation's content after it (the content comes first) */
    json_text_peg(&text, c->prefill.p ? c->prefill.p : "", c->prefill.len);
    json_text_peg(&text, content, cl);   /* the chat parser's UTF-8 walk: a character cut at the end dropped */
    content = text.p ? text.p : "";
    cl = text.len;
    if (!cl) {   /* an empty parse: llama-server answers the raw text */
        content = g->text.p ? g->text.p : "";
        cl = g->text.len;
    }
    jbuf_printf(&out, "{\"choices\":[{\"finish_reason\":\"%s\",\"index\":0,\"message\":{\"role\":\"assistant\","
                      "\"content\":", finish);
    json_put_str_nl(&out, content, cl);
    jbuf_putc(&out, '}');
message_done:
    if (rq->sp.n_probs > 0 && g->n_probs_out) {
        jbuf_puts(&out, ",\"logprobs\":{\"content\":");
        lp0 = out.len;
        llama_put_probs(&out, c->m, g->probs, 0, llama_probs_kept(c->m, rq, g));
        lp1 = out.len;
        jbuf_putc(&out, '}');
    }
    jbuf_printf(&out, "}],\"created\":%lld,\"model\":", c->created);
    json_put_cstr_nl(&out, c->model_name);
    jbuf_puts(&out, ",\"system_fingerprint\":\"" LLAMA_FINGERPRINT "\",\"object\":\"chat.completion\",\"usage\":");
    llama_put_usage(&out, g);
    jbuf_printf(&out, ",\"id\":\"%s\"", c->id);
    put_verbose(c, &out, g);
    jbuf_puts(&out, ",\"timings\":");
    llama_put_timings(&out, g);
    jbuf_puts(&out, ",\"bankml_receipt\":");
    {
        jbuf lpc, shown;   /* response_sha256 is over the content as a client reads it */
        jbuf_init(&lpc);
        jbuf_init(&shown);
        if (lp1 > lp0) jbuf_put(&lpc, out.p + lp0, lp1 - lp0);
        json_text_nl(&shown, content, cl);
        engine_receipt(&out, c->m, g, c->req->body, c->req->body_len, serve_req_age_ms(c->req),
                       shown.p ? shown.p : "", shown.len, lpc.p ? lpc.p : "", lpc.len, lp1 > lp0);
        jbuf_free(&lpc);
        jbuf_free(&shown);
    }
    jbuf_putc(&out, '}');
    serve_reply_json(c->resp, 200, &out);
    jbuf_free(&out);
    jbuf_free(&text);
}

/* The chat stream's end: the final chunk, usage when asked, [DONE], as
 * llama-server sends them. The bankml_receipt rides in the last chunk before
 * [DONE] (the usage chunk when asked, else the finish_reason chunk) as one
 * extra member, so no event lacks `choices` (the openai SDK's stream()
 * helper, Vercel's AI SDK and llama.cpp's tests all read `choices` of every
 * event, and all ignore members they do not know) and the events are
 * llama-server's, one for one. */
static void chat_stream_end(sctx *c, const engine_result *g)
{
    const char *finish = engine_finish(g);
    if (g->n_decoded == 0) {   /* nothing was generated: the role delta was never sent */
        chunk_head(c);
        jbuf_puts(&c->ev, "{\"role\":\"assistant\",\"content\":null}}]");
        chunk_tail(c);
        jbuf_putc(&c->ev, '}');
        send_event(c);
    }
    if (c->cl && c->cl->active) {   /* the final result's update: the deltas of the full parse first */
        chat_msg_delta *d = NULL;
        size_t nd = 0;
        char err[512];
        if (llama_chat_update(c->cl, c->raw.p, c->raw.len, 0, &d, &nd, err, sizeof err) != 0) {
            chat_error_event(c, err);
            return;
        }
        int rc = chat_layer_chunks(c, NULL, 0, d, nd, 0, g);
        chat_msg_deltas_free(d, nd);
        if (rc != 0) return;
        if (c->cl->msg.ncalls && (g->stop == ENGINE_STOP_EOS || g->stop == ENGINE_STOP_WORD)) finish = "tool_calls";
    }
    jbuf_reset(&c->ev);
    jbuf_printf(&c->ev, "{\"choices\":[{\"finish_reason\":\"%s\",\"index\":0,\"delta\":{}}]", finish);
    chunk_tail(c);
    if (c->rq->include_usage) {
        put_verbose(c, &c->ev, g);   /* b11669: on the first of the final chunks, timings on the last */
        jbuf_putc(&c->ev, '}');
        if (send_event(c) != 0) return;
        jbuf_reset(&c->ev);
        jbuf_puts(&c->ev, "{\"choices\":[]");
        chunk_tail(c);
        jbuf_puts(&c->ev, ",\"usage\":");
        llama_put_usage(&c->ev, g);
    }
    jbuf_puts(&c->ev, ",\"timings\":");
    llama_put_timings(&c->ev, g);
    if (!c->rq->include_usage) put_verbose(c, &c->ev, g);
    jbuf_puts(&c->ev, ",\"bankml_receipt\":");
    {
        jbuf lpa;
        jbuf_init(&lpa);
        jbuf_putc(&lpa, '[');
        jbuf_put(&lpa, c->lp.p ? c->lp.p : "", c->lp.len);
        jbuf_putc(&lpa, ']');
        engine_receipt(&c->ev, c->m, g, c->req->body, c->req->body_len, serve_req_age_ms(c->req),
                       c->shown.p ? c->shown.p : "", c->shown.len, lpa.p, lpa.len, c->rq->sp.n_probs > 0);
        jbuf_free(&lpa);
    }
    jbuf_putc(&c->ev, '}');
    if (send_event(c) != 0) return;
    jbuf_reset(&c->ev);
    jbuf_puts(&c->ev, "[DONE]");
    send_event(c);
}

/* The completion in the slot, and its answer. */
static int run_completion(engine *e, engine_model *m, sctx *c, engine_request *rq, const int32_t *ids, size_t n_ids)
{
    c->ids = ids;
    c->n_ids = n_ids;
    engine_result g;
    engine_error er = {0};
    engine_sink sink = {on_token, client_gone, c, on_progress};
    int rc = 0;
    int failed = engine_complete(e, m, rq, &sink, &g, &er) != 0;
    serve_resp_note(c->resp, c->model_name, g.n_prompt, g.n_decoded, g.n_cached);   /* the request's log line */
    if (failed) {
        rc = -1;
        c->replied = 1;
        if (c->began) {
            /* /completion's stream (measured on b11669): the error object
             * llama-server answers with, as the last event */
            jbuf_reset(&c->ev);
            if (!c->chat) {
                jbuf_puts(&c->ev, "{\"error\":{\"code\":500,\"message\":");
                json_put_cstr_nl(&c->ev, er.msg);
                jbuf_puts(&c->ev, ",\"type\":\"server_error\"}}");
            } else {
                jbuf_puts(&c->ev, "{\"error\":");
                json_put_cstr_nl(&c->ev, er.msg);
                jbuf_putc(&c->ev, '}');
            }
            send_event(c);
        } else {
            llama_reply_err(c->resp, 500, er.msg);
        }
    } else if (!g.gone) {
        if (!c->chat) completion_final(c, &g);
        else if (!rq->stream) chat_final(c, &g);
        else chat_stream_end(c, &g);
    } else {
        rc = -1;
    }
    engine_result_free(&g);
    return rc;
}

/* The prompts' tasks, one after another in the slot as llama-server -np 1
 * runs the tasks it posted at once: each answer with its index; not
 * streamed, one object for one prompt and an array for several; streamed,
 * each task's events in turn, "data: null" (the begin partial b11669 sends
 * as a task starts, unsent for the first) before the others. A task over
 * the context ends the request with its error (an event once streaming). */
static void run_prompts(llama_api *api, engine_model *m, sctx *c, engine_request *rq, const llama_pre *pre,
                        const llama_prompts *ps, jbuf *tparams)
{
    char msg[600];
    if (llama_prompts_check(m, ps, msg, sizeof msg) != 0) {
        llama_reply_err(c->resp, 400, msg);
        return;
    }
    int64_t first = ps->count > 1 ? engine_task_ids(api->e, (int)ps->count) : -1;
    jbuf all;
    jbuf_init(&all);
    for (size_t i = 0; i < ps->count; i++) {
        const int32_t *ids = ps->ids[i];
        size_t n_ids = ps->n[i];
        rq->id_task = first >= 0 ? first + (int64_t)i : -1;
        rq->n_tasks = (int)ps->count;
        engine_select(api->e, m, ids, n_ids, rq->id_slot);   /* llama-server: at slot selection, before the context check */
        rq->selected = 1;
        if (!llama_prompt_valid(m, ids, n_ids)) {
            /* the slot's launch refuses it: the task's id (unless posted with others) and one more, measured */
            engine_task_ids(api->e, rq->id_task >= 0 ? 1 : 2);
            static const char bad[] = "{\"code\":400,\"message\":\"Prompt contains invalid tokens\",\"type\":"
                                      "\"invalid_request_error\"}";
            if (c->began) {
                jbuf_reset(&c->ev);
                jbuf_printf(&c->ev, "{\"error\":%s}", bad);
                send_event(c);
            } else {
                llama_reply_err(c->resp, 400, "Prompt contains invalid tokens");
            }
            c->replied = 1;
            break;
        }
        jbuf_reset(tparams);
        llama_task_params(m, pre, rq, tparams);
        rq->task_params = tparams->p;
        rq->task_params_len = tparams->len;
        if (n_ids >= engine_model_n_ctx(m)) {
            engine_task_refused(api->e, m, rq);
            if (c->began) {
                char msg[200];
                jbuf_reset(&c->ev);
                snprintf(msg, sizeof msg, "request (%zu tokens) exceeds the available context size (%zu tokens), try "
                                          "increasing it", n_ids, engine_model_n_ctx(m));
                jbuf_puts(&c->ev, "{\"error\":{\"code\":400,\"message\":");
                json_put_cstr_nl(&c->ev, msg);
                jbuf_printf(&c->ev, ",\"type\":\"exceed_context_size_error\",\"n_prompt_tokens\":%zu,\"n_ctx\":%zu}}",
                            n_ids, engine_model_n_ctx(m));
                send_event(c);
            } else {
                llama_reply_exceed_ctx(c->resp, n_ids, engine_model_n_ctx(m));
            }
            c->replied = 1;
            break;
        }
        if (i && rq->stream && !rq->return_progress && n_ids) {
            jbuf_reset(&c->ev);
            jbuf_puts(&c->ev, "null");
            if (send_event(c) != 0) break;
        }
        jbuf_reset(&c->raw);
        jbuf_reset(&c->sent);
        jbuf_reset(&c->shown);
        jbuf_reset(&c->lp);
        c->n_lp = 0;
        c->has_new_line = 0;
        c->index = (int)i;
        c->collect = ps->count > 1 && !rq->stream ? &all : NULL;
        rq->prompt = ids;
        rq->n_prompt = n_ids;
        if (run_completion(api->e, m, c, rq, ids, n_ids) != 0) break;
    }
    if (!c->replied && ps->count > 1 && !rq->stream) {
        jbuf out;
        jbuf_init(&out);
        jbuf_putc(&out, '[');
        jbuf_put(&out, all.p, all.len);
        jbuf_putc(&out, ']');
        serve_reply_json(c->resp, 200, &out);
        jbuf_free(&out);
    }
    jbuf_free(&all);
}

/* /v1/chat/completions (chat = 1) and /completion (chat = 0). */
static void handle_completion(llama_api *api, serve_req *req, serve_resp *resp, int chat)
{
    json_value *body = llama_parse_body(api->e, req, resp);
    char err[1024];
    int status;
    llama_pre pre;
    engine_request rq;
    llama_prompts ps;
    engine_model *m;
    jbuf tparams;
    llama_chat layer;
    if (!body) return;
    llama_chat_init(&layer);
    jbuf_init(&tparams);
    engine_request_init(&rq);
    rq.plain_prompt = !chat;   /* /completion: no message spans (engine.h) */
    if (body->type != JSON_OBJECT) {
        llama_reply_err(resp, 400, chat ? "'messages' is required" : "[json.exception.out_of_range.403] key 'prompt' not found");
        goto out;
    }
    if (llama_read_pre(body, chat, &pre, &status, err, sizeof err) != 0) {
        llama_reply_err(resp, status, err);
        goto out;
    }
    if (!(m = llama_lock_model(api->e, body, resp))) goto out;
    if (llama_read_request(m, &api->o, body, &pre, &rq, err, sizeof err) != 0) {
        engine_task_ids(api->e, 1);   /* b11669 takes the task's id before it reads the fields */
        llama_reply_err(resp, 400, err);
    } else if (llama_chat_prepare(m, &api->o, body, &pre, &rq, &layer, &status, err, sizeof err) != 0) {
        llama_reply_err(resp, status, err);
    } else if (llama_prompt_list(m, &pre, resp, &ps) == 0) {
        rq.chat_delims = chat && engine_model_jinja(m);   /* message_delimiters (engine.h) */
        sctx c;
        memset(&c, 0, sizeof c);
        jbuf_init(&c.raw);
        jbuf_init(&c.sent);
        jbuf_init(&c.shown);
        jbuf_init(&c.lp);
        jbuf_init(&c.ev);
        jbuf_init(&c.prefill);
        if (chat && engine_model_jinja(m)) template_continued_content(pre.messages, &pre.topts, &c.prefill);
        c.cl = &layer;
        c.resp = resp;
        c.req = req;
        c.m = m;
        c.rq = &rq;
        c.chat = chat;
        c.created = (long long)time(NULL);
        memcpy(c.id, "chatcmpl-", 9);
        llama_random_id(c.id + 9, 33);
        c.model_name = llama_model_name(api->e, m);
        c.vfields = llama_response_fields(body);
        c.fields = chat ? NULL : c.vfields;
        c.pre = &pre;
        run_prompts(api, m, &c, &rq, &pre, &ps, &tparams);
        jbuf_free(&c.raw);
        jbuf_free(&c.sent);
        jbuf_free(&c.shown);
        jbuf_free(&c.lp);
        jbuf_free(&c.ev);
        jbuf_free(&c.prefill);
        llama_prompts_free(&ps);
    }
    engine_release(api->e, api->o.keep_ms);
out:
    engine_request_free(&rq);
    llama_chat_free(&layer);
    jbuf_free(&tparams);
    json_free(body);
}

static void h_chat(serve_req *req, serve_resp *resp, void *ud) { handle_completion(ud, req, resp, 1); }
static void h_completion(serve_req *req, serve_resp *resp, void *ud) { handle_completion(ud, req, resp, 0); }

/* ------------------------------------------------------------------ the other routes */

/* /tokenize's content: a string, or strings and ids mixed (tokenize_mixed;
 * BOS only before a first element that is a string). 0, or -1 with err. */
static int tokenize_content(const engine_model *v, const json_value *ct, int add_special, int parse_special,
                            int32_t **ids, size_t *n, char *err, size_t errlen)
{
    if (ct->type == JSON_STRING) return engine_tokenize_with(v, ct->str, ct->len, add_special, parse_special, ids, n, err, errlen);
    int bad = 0;
    for (size_t i = 0; !bad && i < ct->n; i++) {
        const json_value *it = ct->items[i];
        int32_t *part = NULL, one;
        size_t np = 0;
        if (it->type == JSON_STRING) {
            bad = engine_tokenize_with(v, it->str, it->len, i == 0 && add_special, parse_special, &part, &np, err, errlen);
        } else {
            one = llama_token_id(it);
            part = &one;
            np = 1;
        }
        int32_t *nn = bad ? NULL : realloc(*ids, (*n + np + 1) * sizeof *nn);
        if (!bad && !nn) {
            bk_err(err, errlen, "out of memory");
            bad = -1;
        }
        if (nn) {
            *ids = nn;
            if (np) memcpy(*ids + *n, part, np * sizeof **ids);
            *n += np;
        }
        if (part != &one) free(part);
    }
    return bad;
}

/* llama-server's is_valid_utf8, which /tokenize's with_pieces uses to choose
 * a string or a byte array: only the lead bytes' shapes and the
 * continuation bytes' top bits are checked (overlongs, surrogates and F5..F7
 * pass; a piece that passes is then written by nlohmann, which replaces
 * what RFC 3629 refuses). */
static int lax_utf8(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, k, j;
    while (i < n) {
        if (s[i] <= 0x7F) k = 1;
        else if ((s[i] & 0xE0) == 0xC0) k = 2;
        else if ((s[i] & 0xF0) == 0xE0) k = 3;
        else if ((s[i] & 0xF8) == 0xF0) k = 4;
        else return 0;
        if (n - i < k) return 0;
        for (j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return 0;
        i += k;
    }
    return 1;
}

static void h_tokenize(serve_req *req, serve_resp *resp, void *ud)
{
    llama_api *api = ud;
    json_value *body = llama_parse_body(api->e, req, resp);
    char err[512];
    int add_special = 0, parse_special = 1, pieces = 0;
    if (!body) return;
    const json_value *ct = json_get(body, "content");
    /* content: absent (no tokens), a string, or strings and ids mixed;
     * anything else is nlohmann's get<std::string> error */
    for (size_t i = 0; ct && ct->type == JSON_ARRAY && i < ct->n; i++)
        if (ct->items[i]->type != JSON_STRING && ct->items[i]->type != JSON_NUMBER &&
            ct->items[i]->type != JSON_TRUE && ct->items[i]->type != JSON_FALSE) {
            bk_err(err, sizeof err, "[json.exception.type_error.302] type must be number, but is %s",
                   llama_jtype(ct->items[i]));
            llama_reply_err(resp, 400, err);
            json_free(body);
            return;
        }
    if (ct && ct->type != JSON_STRING && ct->type != JSON_ARRAY) {
        bk_err(err, sizeof err, "[json.exception.type_error.302] type must be string, but is %s", llama_jtype(ct));
        llama_reply_err(resp, 400, err);
        json_free(body);
        return;
    }
    llama_field_bool(body, "add_special", &add_special, err, sizeof err);
    llama_field_bool(body, "parse_special", &parse_special, err, sizeof err);
    llama_field_bool(body, "with_pieces", &pieces, err, sizeof err);
    int peeked;
    const engine_model *m = llama_read_model(api->e, NULL, resp, api->o.keep_ms, &peeked);
    if (!m) {
        json_free(body);
        return;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    jbuf out, pc;
    jbuf_init(&out);
    jbuf_init(&pc);
    if (ct && tokenize_content(m, ct, add_special, parse_special, &ids, &n, err, sizeof err)) {
        llama_reply_err(resp, 400, err);
    } else {
        jbuf_puts(&out, "{\"tokens\":[");
        for (size_t i = 0; i < n; i++) {
            if (i) jbuf_putc(&out, ',');
            if (!pieces) {
                jbuf_printf(&out, "%d", (int)ids[i]);
                continue;
            }
            jbuf_reset(&pc);
            engine_piece(m, ids[i], 1, &pc);
            jbuf_printf(&out, "{\"id\":%d,\"piece\":", (int)ids[i]);
            if (lax_utf8(pc.p ? pc.p : "", pc.len)) json_put_str_nl(&out, pc.p ? pc.p : "", pc.len);
            else llama_put_bytes(&out, pc.p, pc.len);
            jbuf_putc(&out, '}');
        }
        jbuf_puts(&out, "]}");
        serve_reply_json(resp, 200, &out);
    }
    llama_read_done(api->e, peeked, api->o.keep_ms);
    free(ids);
    jbuf_free(&out);
    jbuf_free(&pc);
    json_free(body);
}

static void h_detokenize(serve_req *req, serve_resp *resp, void *ud)
{
    llama_api *api = ud;
    json_value *body = llama_parse_body(api->e, req, resp);
    if (!body) return;
    int peeked;
    const engine_model *m = llama_read_model(api->e, NULL, resp, api->o.keep_ms, &peeked);
    if (!m) {
        json_free(body);
        return;
    }
    jbuf text, out;
    jbuf_init(&text);
    jbuf_init(&out);
    const json_value *t = json_get(body, "tokens");
    /* tokens: get<llama_tokens>(), nlohmann's errors for another shape */
    const json_value *badv = t && t->type != JSON_ARRAY ? t : NULL;
    for (size_t i = 0; t && !badv && t->type == JSON_ARRAY && i < t->n; i++)
        if (t->items[i]->type != JSON_NUMBER && t->items[i]->type != JSON_TRUE && t->items[i]->type != JSON_FALSE)
            badv = t->items[i];
    if (badv) {
        char err[160];
        bk_err(err, sizeof err, "[json.exception.type_error.302] type must be %s, but is %s",
               badv == t ? "array" : "number", llama_jtype(badv));
        llama_reply_err(resp, 400, err);
        t = NULL;
    }
    for (size_t i = 0; t && t->type == JSON_ARRAY && i < t->n; i++) {
        int32_t id = llama_token_id(t->items[i]);
        if (id >= 0 && id < engine_model_n_tokens(m)) engine_piece(m, id, 1, &text);
    }
    if (!badv) {
        jbuf_puts(&out, "{\"content\":");
        json_put_str_nl(&out, text.p ? text.p : "", text.len);
        jbuf_putc(&out, '}');
        serve_reply_json(resp, 200, &out);
    }
    llama_read_done(api->e, peeked, api->o.keep_ms);
    jbuf_free(&text);
    jbuf_free(&out);
    json_free(body);
}

static void h_apply_template(serve_req *req, serve_resp *resp, void *ud)
{
    llama_api *api = ud;
    json_value *body = llama_parse_body(api->e, req, resp);
    char err[1024];
    int st;
    if (!body) return;
    const json_value *msgs = json_get(body, "messages");
    if (!msgs || msgs->type != JSON_ARRAY) {
        llama_reply_err(resp, 400, msgs ? "Expected 'messages' to be an array" : "'messages' is required");
        json_free(body);
        return;
    }
    llama_pre pre;
    memset(&pre, 0, sizeof pre);
    pre.messages = msgs;
    if (llama_check_messages(msgs, &st, err, sizeof err) != 0 ||
        llama_read_chat_inputs(body, &pre, &st, err, sizeof err) != 0) {
        llama_reply_err(resp, st, err);
        json_free(body);
        return;
    }
    int peeked;
    const engine_model *m = llama_read_model(api->e, body, resp, api->o.keep_ms, &peeked);
    if (!m) {
        json_free(body);
        return;
    }
    jbuf p, out;
    jbuf_init(&p);
    jbuf_init(&out);
    int rc = llama_check_render(m, body, msgs, err, sizeof err) != 0
                 ? -2 : engine_render_chat(m, msgs, &pre.topts, &p, err, sizeof err);
    if (rc != 0) {
        llama_reply_err(resp, rc == -2 ? 500 : 400, err);
    } else {
        jbuf_puts(&out, "{\"prompt\":");
        json_put_str_nl(&out, p.p ? p.p : "", p.len);
        jbuf_putc(&out, '}');
        serve_reply_json(resp, 200, &out);
    }
    llama_read_done(api->e, peeked, api->o.keep_ms);
    jbuf_free(&p);
    jbuf_free(&out);
    json_free(body);
}

static void h_health(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    serve_reply(resp, 200, SERVE_JSON, "{\"status\":\"ok\"}", 15);
}

/* ,"chat_template_caps":{...}: the template's caps (engine_model_caps:
 * template_caps, b11669's jinja::caps_get) as common_chat_templates_get_caps's
 * std::map writes them, names sorted. */
static void llama_put_caps(jbuf *out, const engine_model *m)
{
    tmpl_caps c = *engine_model_caps(m);
    jbuf_printf(out, ",\"chat_template_caps\":{\"supports_object_arguments\":%s,\"supports_parallel_tool_calls\":%s,"
                     "\"supports_preserve_reasoning\":%s,\"supports_reasoning_effort\":%s,"
                     "\"supports_string_content\":%s,\"supports_system_role\":%s,\"supports_tool_calls\":%s,"
                     "\"supports_tools\":%s,\"supports_typed_content\":%s}",
                c.supports_object_arguments ? "true" : "false", c.supports_parallel_tool_calls ? "true" : "false",
                c.supports_preserve_reasoning ? "true" : "false", c.supports_reasoning_effort ? "true" : "false",
                c.supports_string_content ? "true" : "false", c.supports_system_role ? "true" : "false",
                c.supports_tool_calls ? "true" : "false", c.supports_tools ? "true" : "false",
                c.supports_typed_content ? "true" : "false");
}

/* /props' body for the resident model m, into out; it is also kept (under
 * props_mu) for the answers while the model sleeps. 0, or -1 with the
 * reason. */
static int props_body(llama_api *api, const engine_model *m, jbuf *out, char *err, size_t errlen)
{
    engine_request rq;
    engine_request_init(&rq);
    sampler_params_free(&rq.sp);
    if (llama_defaults(&api->o, m, &rq.sp, err, errlen) != 0) {
        engine_request_free(&rq);
        return -1;
    }
    size_t tl;
    engine_entry en;
    const char *tmpl = engine_model_template(m, &tl);
    const char *path = engine_entry_get(api->e, engine_model_entry(m), &en) == 0 ? en.path : "";
    /* get_res_props's members in its order; n_ctx at the top is bankML's own (Savante reads it) */
    jbuf_puts(out, "{\"default_generation_settings\":{\"params\":");
    llama_put_gen_settings(out, &rq, 0, 1);
    jbuf_printf(out, ",\"n_ctx\":%zu},\"total_slots\":%d,\"model_alias\":", engine_model_n_ctx(m),
                engine_model_n_slots(m));
    json_put_cstr_nl(out, llama_model_name(api->e, m));
    jbuf_puts(out, ",\"model_ftype\":");
    json_put_cstr_nl(out, engine_model_ftype(m));
    jbuf_puts(out, ",\"model_path\":");
    json_put_cstr_nl(out, path);
    jbuf_puts(out, ",\"modalities\":{\"vision\":false,\"video\":false,\"audio\":false},\"media_marker\":");
    json_put_cstr_nl(out, api->media_marker);
    /* ui: bankml serves no web UI (llama-server's --no-webui answer) */
    jbuf_printf(out, ",\"endpoint_slots\":%s,\"endpoint_props\":%s,\"endpoint_metrics\":%s,\"ui\":false,"
                     "\"ui_settings\":{},\"chat_template\":",
                api->o.slots ? "true" : "false", api->o.props ? "true" : "false", api->o.metrics ? "true" : "false");
    json_put_str_nl(out, tmpl, tl);
    llama_put_caps(out, m);
    jbuf_puts(out, ",\"bos_token\":");
    json_put_cstr_nl(out, engine_model_bos(m));
    jbuf_puts(out, ",\"eos_token\":");
    json_put_cstr_nl(out, engine_model_eos(m));
    jbuf_printf(out, ",\"n_ctx\":%zu,\"build_info\":\"bankML " BANKML_VERSION " native\",\"is_sleeping\":",
                engine_model_n_ctx(m));
    size_t at = out->len;   /* where "false" goes; "true" there while the model sleeps */
    jbuf_puts(out, "false,\"cors_proxy_enabled\":false}");
    engine_request_free(&rq);
    if (out->oom) {
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    char *keep = malloc(out->len + 1);
    if (keep) {
        memcpy(keep, out->p, at);
        memcpy(keep + at, "true", 4);
        memcpy(keep + at + 4, out->p + at + 5, out->len - at - 5);
        keep[out->len - 1] = 0;
        pthread_mutex_lock(&api->props_mu);
        char *old = api->props_sleeping;
        api->props_sleeping = keep;
        pthread_mutex_unlock(&api->props_mu);
        free(old);
    }
    return 0;
}

/* GET /props. It never wakes a sleeping model (--sleep-idle-seconds): the
 * last body with is_sleeping true; and it does not count as activity (the
 * expiry is left as it was), as llama-server answers it outside its tasks. */
static void h_props(serve_req *req, serve_resp *resp, void *ud)
{
    llama_api *api = ud;
    (void)req;
    if (engine_n_entries(api->e) == 0) {   /* llama-server's router with no models */
        jbuf out;
        jbuf_init(&out);
        jbuf_printf(&out, "{\"role\":\"router\",\"max_instances\":%d,\"models_autoload\":%s,\"model_alias\":"
                          "\"llama-server\",\"model_path\":\"none\",\"default_generation_settings\":{\"params\":null,"
                          "\"n_ctx\":0},\"ui_settings\":{},\"build_info\":\"bankML " BANKML_VERSION " native\","
                          "\"cors_proxy_enabled\":false}", api->o.models_max, api->o.models_autoload ? "true" : "false");
        serve_reply_json(resp, 200, &out);
        jbuf_free(&out);
        return;
    }
    jbuf out;
    char err[512];
    jbuf_init(&out);
    /* resident: read without the engine lock (a generation may run), the expiry left as it is */
    const engine_model *pm = engine_peek(api->e, engine_default(api->e), ENGINE_KEEP_SAME);
    if (pm) {
        int rc = props_body(api, pm, &out, err, sizeof err);
        engine_unpeek(api->e, ENGINE_KEEP_SAME);
        if (rc != 0) llama_reply_err(resp, 500, err);
        else serve_reply_json(resp, 200, &out);
        jbuf_free(&out);
        return;
    }
    int sleeping = 0;   /* the residency lock before props_mu, never inside it (props_body's order) */
    if (api->o.sleep && engine_resident(api->e, NULL, NULL) != (long)engine_default(api->e)) {
        pthread_mutex_lock(&api->props_mu);
        if (api->props_sleeping) {
            serve_reply(resp, 200, SERVE_JSON, api->props_sleeping, strlen(api->props_sleeping));
            sleeping = 1;
        }
        pthread_mutex_unlock(&api->props_mu);
    }
    if (sleeping) {
        jbuf_free(&out);
        return;
    }
    /* not resident (or its file changed): loaded for this answer, as a completion would */
    engine_model *m = llama_lock_model(api->e, NULL, resp);
    if (!m) {
        jbuf_free(&out);
        return;
    }
    if (props_body(api, m, &out, err, sizeof err) != 0) llama_reply_err(resp, 500, err);
    else serve_reply_json(resp, 200, &out);
    engine_release(api->e, api->o.keep_ms);
    jbuf_free(&out);
}

int llama_api_prime(llama_api *api)
{
    engine_error er = {0};
    engine_model *m = engine_acquire(api->e, engine_default(api->e), NULL, &er);
    if (!m) return -1;
    jbuf out;
    char err[256];
    jbuf_init(&out);
    int rc = props_body(api, m, &out, err, sizeof err);
    engine_release(api->e, api->o.keep_ms);
    jbuf_free(&out);
    return rc;
}

/* One model of /v1/models: llama-server's members, in its order; "meta"
 * once the model has been loaded (always for the startup model, which
 * serve loads first; a registry entry never loaded yet has none). */
static void put_names(jbuf *out, const json_value *names)
{
    for (size_t i = 0; names && i < names->n; i++) {
        if (i) jbuf_putc(out, ',');
        json_put_str_nl(out, names->items[i]->str, names->items[i]->len);
    }
}

/* aliases and tags: --alias's and --tags' sets for the startup model (its
 * name alone without --alias), NULL for the others */
static void put_model(jbuf *out, const char *name, long long now, const engine_meta *mt, const json_value *aliases,
                      const json_value *tags)
{
    jbuf_puts(out, "{\"id\":");
    json_put_cstr_nl(out, name);
    jbuf_puts(out, ",\"aliases\":[");
    if (aliases && aliases->n) put_names(out, aliases);
    else json_put_cstr_nl(out, name);
    jbuf_puts(out, "],\"tags\":[");
    put_names(out, tags);
    jbuf_printf(out, "],\"object\":\"model\",\"architecture\":{\"input_modalities\":[\"text\"],"
                     "\"output_modalities\":[\"text\"]},\"created\":%lld,\"owned_by\":\"llamacpp\"", now);
    if (mt) {
        jbuf_printf(out, ",\"meta\":{\"vocab_type\":%d,\"n_vocab\":%d,\"n_ctx\":%zu,\"n_ctx_train\":%u,\"n_embd\":%u,"
                         "\"n_params\":%llu,\"size\":%llu,\"ftype\":", mt->vocab_type, (int)mt->n_vocab, mt->n_ctx,
                    mt->n_ctx_train, mt->n_embd, (unsigned long long)mt->n_params, (unsigned long long)mt->size);
        json_put_cstr_nl(out, mt->ftype);
        jbuf_putc(out, '}');
    }
    jbuf_putc(out, '}');
}

/* /v1/models and /models as llama-server lists its model: Ollama's
 * "models" first, then OpenAI's "data". Names: --alias or the path for the
 * startup model, the registry's name for the others. */
static void h_models(serve_req *req, serve_resp *resp, void *ud)
{
    llama_api *api = ud;
    engine_entry en;
    jbuf out;
    long long now = (long long)time(NULL);
    const char *alias = engine_alias(api->e);
    (void)req;
    if (engine_n_entries(api->e) == 0) {   /* the router's list, with no models */
        static const char empty[] = "{\"data\":[],\"object\":\"list\"}";
        serve_reply(resp, 200, SERVE_JSON, empty, sizeof empty - 1);
        return;
    }
    jbuf_init(&out);
    for (int pass = 0; pass < 2; pass++) {
        jbuf_puts(&out, pass ? "],\"object\":\"list\",\"data\":[" : "{\"models\":[");
        for (size_t i = 0; engine_entry_get(api->e, i, &en) == 0; i++) {
            const char *name = i != engine_default(api->e) ? en.name : alias ? alias : en.path;
            if (i) jbuf_putc(&out, ',');
            if (pass) {
                engine_meta mt;
                int first = i == engine_default(api->e);
                put_model(&out, name, now, engine_entry_meta(api->e, i, &mt) == 0 ? &mt : NULL,
                          first ? api->o.aliases : NULL, first ? api->o.tags : NULL);
                continue;
            }
            jbuf_puts(&out, "{\"name\":");
            json_put_cstr_nl(&out, name);
            jbuf_puts(&out, ",\"model\":");
            json_put_cstr_nl(&out, name);
            jbuf_puts(&out, ",\"modified_at\":\"\",\"size\":\"\",\"digest\":\"\",\"type\":\"model\",\"description\":\"\","
                            "\"tags\":[\"\"],\"capabilities\":[\"completion\"],\"parameters\":\"\",\"details\":{"
                            "\"parent_model\":\"\",\"format\":\"gguf\",\"family\":\"\",\"families\":[\"\"],"
                            "\"parameter_size\":\"\",\"quantization_level\":\"\"}}");
        }
    }
    jbuf_puts(&out, "]}");
    serve_reply_json(resp, 200, &out);
    jbuf_free(&out);
}

llama_api *llama_api_register(serve_server *srv, engine *e)
{
    llama_api *api = calloc(1, sizeof *api);
    if (!api) return NULL;
    api->e = e;
    api->srv = srv;
    pthread_mutex_init(&api->props_mu, NULL);
    llama_api_opts_init(&api->o);
    make_media_marker(api->media_marker, sizeof api->media_marker);
    api->o.slots = 0;   /* what /props said before the command line set it: no /slots route yet */
    serve_route(srv, "GET", "/health", h_health, api, SERVE_PUBLIC | SERVE_ALWAYS);
    serve_route(srv, "GET", "/v1/health", h_health, api, SERVE_PUBLIC | SERVE_ALWAYS);
    serve_route(srv, "GET", "/props", h_props, api, 0);
    serve_route(srv, "GET", "/v1/models", h_models, api, 0);
    serve_route(srv, "GET", "/models", h_models, api, 0);
    serve_route(srv, "POST", "/v1/chat/completions", h_chat, api, 0);
    serve_route(srv, "POST", "/chat/completions", h_chat, api, 0);
    serve_route(srv, "POST", "/completion", h_completion, api, 0);
    serve_route(srv, "POST", "/completions", h_completion, api, 0);
    serve_route(srv, "POST", "/tokenize", h_tokenize, api, 0);
    serve_route(srv, "POST", "/detokenize", h_detokenize, api, 0);
    serve_route(srv, "POST", "/apply-template", h_apply_template, api, 0);
    if (!(api->compat = llama_compat_register(srv, e, &api->o)) ||
        !(api->slots_api = llama_slots_register(srv, e, &api->o))) {
        llama_compat_free(api->compat);
        free(api);
        return NULL;
    }
    return api;
}

void llama_api_free(llama_api *api)
{
    if (api) {
        llama_compat_free(api->compat);
        free(api->props_sleeping);
        pthread_mutex_destroy(&api->props_mu);
        llama_slots_free(api->slots_api);
        llama_gcp_free(api->gcp);
    }
    free(api);
}

void llama_api_opts_init(llama_api_opts *o)
{
    memset(o, 0, sizeof *o);
    o->n_predict = -1;
    o->keep_ms = -1;
    o->models_max = 4;
    o->models_autoload = 1;
    o->slots = 1;
    o->reasoning_format = CHAT_REASONING_DEEPSEEK;
    o->reasoning_budget = -1;
}

/* llama-server's 501 for a route its command line turned off; ud is the message. */
static void h_not_supported(serve_req *req, serve_resp *resp, void *ud)
{
    jbuf out;
    (void)req;
    jbuf_init(&out);
    jbuf_puts(&out, "{\"error\":{\"code\":501,\"message\":");
    json_put_cstr_nl(&out, ud);
    jbuf_puts(&out, ",\"type\":\"not_supported_error\"}}");
    serve_reply_json(resp, 501, &out);
    jbuf_free(&out);
}

int llama_api_configure(llama_api *api, const llama_api_opts *o)
{
    int rc = 0;
    api->o = *o;
    if (!o->props)
        rc |= serve_route(api->srv, "POST", "/props", h_not_supported,
                          (void *)"This server does not support changing global properties. Start it with `--props`", 0);
    if (o->gcp_health && *o->gcp_health)   /* another path for /health (not public: the key applies) */
        rc |= serve_route(api->srv, "GET", o->gcp_health, h_health, api, SERVE_ALWAYS);
    if (o->gcp_predict) {
        char err[512];
        if (!(api->gcp = llama_gcp_register(api->srv, api->e, o->gcp_predict, err, sizeof err))) {
            fprintf(stderr, "bankml serve: %s\n", err);
            return -1;
        }
    }
    return rc ? -1 : 0;
}
