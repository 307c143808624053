/*
 * llama_compat.c -- llama-server b11669's other front doors on the same
 * slot: OpenAI's legacy completions (/v1/completions), OpenAI's Responses
 * (/v1/responses), Anthropic's Messages (/v1/messages and its
 * count_tokens), and the routes b11669 answers with a refusal on one model
 * without their flags (embeddings, reranking, /infill without FIM tokens,
 * POST /props). Responses and Messages are translated into a
 * chat request as b11669 translates them, then read by llama_req.c like
 * /v1/chat/completions; what bankml cannot reproduce (tools, tool calls,
 * thinking budgets, files) is refused with 400 and the reason. See
 * llama.h and docs/modules/llama.md.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/llama.h"
#include "api/llama_json.h"
#include "base/base.h"

typedef enum { CX_CMPL, CX_ANTHROPIC, CX_RESP } cx_kind;

/* One answer in the making. */
typedef struct {
    serve_resp *resp;
    serve_req *req;
    const engine_model *m;
    const engine_request *rq;
    cx_kind kind;
    int began, text_started;
    int created;               /* Responses: response.created was sent (b11669's oai_resp_created) */
    char id[48], item_id[48];
    const char *model_name;
    jbuf raw;                  /* text released so far */
    jbuf sent;                 /* parsed content sent so far */
    jbuf ev;
    int index;                 /* /v1/completions: the prompt's index (its choice's) */
    int more;                  /* /v1/completions, streamed: tasks follow this one (no [DONE] yet) */
    jbuf *choices;             /* /v1/completions, several prompts, not streamed: the choices joined here */
    jbuf *tail;                /* and the first task's members after them (usage, id, timings) */
    int has_new_line;          /* a released piece held a newline (__verbose's has_new_line) */
    const llama_pre *pre;
    const int32_t *ids;        /* the prompt */
    size_t n_ids;
    const json_value *vfields; /* response_fields for __verbose, or NULL */
    llama_chat *cl;            /* Messages: the chat layer (cl->active: the answer is parsed) */
    llama_anthropic_state ast; /* Messages through the chat layer: the stream's block state */
} cx;

/* ------------------------------------------------------------------ events */

static int cx_begin(cx *c)
{
    if (c->began) return 0;
    c->began = 1;
    return serve_sse_begin(c->resp);
}

/* c->ev as "data: ..." (completions) or "event: NAME\ndata: ..." (the
 * named events of Responses and Messages). */
static int cx_send(cx *c, const char *name)
{
    if (cx_begin(c) != 0) return -1;
    if (!name) return serve_sse_event(c->resp, c->ev.p, c->ev.len);
    jbuf f;
    jbuf_init(&f);
    jbuf_printf(&f, "event: %s\ndata: ", name);
    jbuf_put(&f, c->ev.p, c->ev.len);
    jbuf_puts(&f, "\n\n");
    int rc = f.oom ? -1 : serve_stream_write(c->resp, f.p, f.len);
    jbuf_free(&f);
    return rc;
}

static void cmpl_tail(cx *c)
{
    jbuf_printf(&c->ev, ",\"created\":%lld,\"model\":", (long long)time(NULL));
    json_put_cstr_nl(&c->ev, c->model_name);
    jbuf_puts(&c->ev, ",\"system_fingerprint\":\"" LLAMA_FINGERPRINT "\",\"object\":\"text_completion\"");
}

/* The parsed content's growth since the last event (chat kinds). */
static int content_delta(cx *c, const char **d, size_t *dn)
{
    const char *p;
    size_t n;
    engine_content(c->m, c->raw.p ? c->raw.p : "", c->raw.len, &p, &n);
    if (n <= c->sent.len || memcmp(p, c->sent.p ? c->sent.p : "", c->sent.len)) return 0;
    *d = p + c->sent.len;
    *dn = n - c->sent.len;
    jbuf_put(&c->sent, *d, *dn);
    return 1;
}

/* message_start's data into c->ev. */
static void anthropic_start(cx *c, const engine_result *g)
{
    jbuf_reset(&c->ev);
    jbuf_printf(&c->ev, "{\"type\":\"message_start\",\"message\":{\"id\":\"%s\",\"type\":\"message\","
                        "\"role\":\"assistant\",\"content\":[],\"model\":", c->id);
    json_put_cstr_nl(&c->ev, c->model_name);
    jbuf_printf(&c->ev, ",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"cache_read_input_tokens\":%zu,"
                        "\"input_tokens\":%zu,\"output_tokens\":0}}}", g->n_cached, g->n_prompt - g->n_cached);
}

/* The stream's error event when the chat layer's parse throws (b11669's exception while it reads a result):
 * format_error_response's server error as the data of an `error` event; the stream ends. */
static int anthropic_error_event(cx *c, const char *msg)
{
    jbuf_reset(&c->ev);
    jbuf_puts(&c->ev, "{\"code\":500,\"message\":");
    json_put_cstr_nl(&c->ev, msg);
    jbuf_puts(&c->ev, ",\"type\":\"server_error\"}");
    cx_send(c, "error");
    return -1;
}

/* Framed events (llama_anthropic.c's) as they are. */
static int cx_write(cx *c, const jbuf *f)
{
    if (f->oom) return -1;
    if (!f->len) return 0;
    if (cx_begin(c) != 0) return -1;
    return serve_stream_write(c->resp, f->p, f->len);
}

/* A partial through the chat layer: the answer so far parsed (an exception: the error event), message_start on
 * the first token, then the deltas' content-block events. */
static int anthropic_chat_partial(cx *c, const engine_result *g)
{
    chat_msg_delta *d = NULL;
    size_t nd = 0;
    char err[512];
    if (llama_chat_update(c->cl, c->raw.p, c->raw.len, 1, &d, &nd, err, sizeof err) != 0)
        return anthropic_error_event(c, err);
    int rc = 0;
    if (g->n_decoded == 1) {
        anthropic_start(c, g);
        rc = cx_send(c, "message_start");
    }
    jbuf f;
    jbuf_init(&f);
    llama_anthropic_partial(&f, &c->ast, &c->cl->msg, d, nd);
    if (rc == 0) rc = cx_write(c, &f);
    jbuf_free(&f);
    chat_msg_deltas_free(d, nd);
    return rc;
}

static int anthropic_partial(cx *c, const engine_result *g)
{
    const char *d;
    size_t dn;
    if (c->cl && c->cl->active) return anthropic_chat_partial(c, g);
    if (g->n_decoded == 1) {
        anthropic_start(c, g);
        if (cx_send(c, "message_start") != 0) return -1;
    }
    if (!content_delta(c, &d, &dn)) return 0;
    if (!c->text_started) {
        c->text_started = 1;
        jbuf_reset(&c->ev);
        jbuf_puts(&c->ev, "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}");
        if (cx_send(c, "content_block_start") != 0) return -1;
    }
    jbuf_reset(&c->ev);
    jbuf_puts(&c->ev, "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":");
    json_put_str_nl(&c->ev, d, dn);
    jbuf_puts(&c->ev, "}}");
    return cx_send(c, "content_block_delta");
}

static void resp_head(cx *c, const char *type)
{
    jbuf_reset(&c->ev);
    jbuf_printf(&c->ev, "{\"type\":\"%s\",\"response\":{\"id\":\"%s\",\"object\":\"response\",\"status\":\"in_progress\"}}",
                type, c->id);
}

/* The last event of a partial that a stop word ends carries the timings
 * (b11669 sets them on that partial). */
static void with_timings(cx *c, const engine_result *g)
{
    if (!c->ev.len || c->ev.p[c->ev.len - 1] != '}') return;
    c->ev.len--;
    jbuf_puts(&c->ev, ",\"timings\":");
    llama_put_timings(&c->ev, g);
    jbuf_putc(&c->ev, '}');
}

/* A progress partial's prompt_progress, the last member of its last event. */
static void with_progress(cx *c, const engine_progress *p)
{
    if (!c->ev.len || c->ev.p[c->ev.len - 1] != '}') return;
    c->ev.len--;
    jbuf_puts(&c->ev, ",\"prompt_progress\":");
    llama_put_progress(&c->ev, p);
    jbuf_putc(&c->ev, '}');
}

/* response.created then response.in_progress, the first events of a
 * Responses stream; tim: the timings on the second. */
static int resp_created(cx *c, const engine_result *g, int tim, const engine_progress *p)
{
    resp_head(c, "response.created");
    if (cx_send(c, "response.created") != 0) return -1;
    resp_head(c, "response.in_progress");
    if (tim) with_timings(c, g);
    if (p) with_progress(c, p);
    return cx_send(c, "response.in_progress");
}

/* One token's events. b11669 sends response.created and in_progress with
 * every partial until one with n_decoded 1 (or a progress event) has
 * marked the response created, then the content's events; the timings
 * ride on the last event. */
static int resp_partial(cx *c, const engine_result *g, int stop_now)
{
    const char *d = NULL;
    size_t dn = 0;
    int have = content_delta(c, &d, &dn);
    int tim = llama_partial_timed(c->rq, stop_now);
    int was = c->created;
    if (g->n_decoded == 1) c->created = 1;
    if (!was && resp_created(c, g, tim && !have, NULL) != 0) return -1;
    if (!have) return 0;
    if (!c->text_started) {
        c->text_started = 1;
        jbuf_reset(&c->ev);
        jbuf_printf(&c->ev, "{\"type\":\"response.output_item.added\",\"item\":{\"content\":[],\"id\":\"%s\","
                            "\"role\":\"assistant\",\"status\":\"in_progress\",\"type\":\"message\"}}", c->item_id);
        if (cx_send(c, "response.output_item.added") != 0) return -1;
        jbuf_reset(&c->ev);
        jbuf_printf(&c->ev, "{\"type\":\"response.content_part.added\",\"item_id\":\"%s\",\"part\":{\"type\":"
                            "\"output_text\",\"text\":\"\"}}", c->item_id);
        if (cx_send(c, "response.content_part.added") != 0) return -1;
    }
    jbuf_reset(&c->ev);
    jbuf_printf(&c->ev, "{\"type\":\"response.output_text.delta\",\"item_id\":\"%s\",\"delta\":", c->item_id);
    json_put_str_nl(&c->ev, d, dn);
    jbuf_putc(&c->ev, '}');
    if (tim) with_timings(c, g);
    return cx_send(c, "response.output_text.delta");
}

/* The engine's sink: one token, as b11669 streams it on each route. */
static int cx_on_token(void *ud, const engine_token *t, int stop_now, const engine_result *g)
{
    cx *c = ud;
    if (memchr(t->text, '\n', t->text_len)) c->has_new_line = 1;
    if (!c->rq->stream) return serve_client_gone(c->req) ? -1 : 0;
    jbuf_put(&c->raw, t->text, t->text_len);
    if (c->kind == CX_ANTHROPIC) return anthropic_partial(c, g);
    if (c->kind == CX_RESP) return resp_partial(c, g, stop_now);
    jbuf_reset(&c->ev);
    jbuf_puts(&c->ev, "{\"choices\":[{\"text\":");
    json_put_str_nl(&c->ev, t->text, t->text_len);
    jbuf_printf(&c->ev, ",\"index\":%d,\"logprobs\":", c->index);
    if (c->rq->sp.n_probs > 0) {
        jbuf_puts(&c->ev, "{\"content\":");
        llama_put_probs(&c->ev, c->m, t, 0, 1);
        jbuf_putc(&c->ev, '}');
    } else {
        jbuf_puts(&c->ev, "null");
    }
    jbuf_puts(&c->ev, ",\"finish_reason\":null}]");
    cmpl_tail(c);
    jbuf_printf(&c->ev, ",\"id\":\"%s\"}", c->id);
    if (c->rq->verbose) {   /* b11669's __verbose on each partial: /completion's partial object */
        c->ev.len--;
        jbuf_puts(&c->ev, ",\"__verbose\":");
        llama_put_native_partial(&c->ev, c->m, c->rq, t, stop_now, g, 0);
        jbuf_putc(&c->ev, '}');
    }
    if (llama_partial_timed(c->rq, stop_now)) with_timings(c, g);
    return cx_send(c, NULL);
}

static int cx_gone(void *ud) { return serve_client_gone(((cx *)ud)->req); }

/* The engine's progress sink: with stream and return_progress, b11669's
 * progress partial on each route: /v1/completions' empty-text chunk,
 * Responses' response.in_progress (after response.created when it was not
 * sent yet), nothing on Messages; the timings so far with
 * timings_per_token, then prompt_progress. */
static int cx_on_progress(void *ud, const engine_progress *p, const engine_result *g)
{
    cx *c = ud;
    int tim = c->rq->timings_per_token;
    if (!c->rq->stream || !c->rq->return_progress || c->kind == CX_ANTHROPIC) return 0;
    if (c->kind == CX_RESP) {
        if (!c->created) {
            c->created = 1;
            return resp_created(c, g, tim, p);
        }
        resp_head(c, "response.in_progress");
    } else {
        jbuf_reset(&c->ev);
        jbuf_printf(&c->ev, "{\"choices\":[{\"text\":\"\",\"index\":%d,\"logprobs\":null,\"finish_reason\":null}]",
                    c->index);
        cmpl_tail(c);
        jbuf_printf(&c->ev, ",\"id\":\"%s\"}", c->id);
        if (c->rq->verbose) {
            c->ev.len--;
            jbuf_puts(&c->ev, ",\"__verbose\":");
            llama_put_native_progress(&c->ev, c->rq, p, g, 0);
            jbuf_putc(&c->ev, '}');
        }
    }
    if (tim) with_timings(c, g);
    with_progress(c, p);
    return cx_send(c, c->kind == CX_RESP ? "response.in_progress" : NULL);
}

/* ------------------------------------------------------------------ final answers */

/* The message content of a chat kind's answer (the raw text when the
 * parse is empty, as b11669's final answers do). */
static void final_content(cx *c, const engine_result *g, const char **s, size_t *n)
{
    engine_content(c->m, g->text.p ? g->text.p : "", g->text.len, s, n);
    if (!*n) {
        *s = g->text.p ? g->text.p : "";
        *n = g->text.len;
    }
}

static void put_stop_sequence(cx *c, jbuf *b, const engine_result *g)
{
    jbuf_puts(b, "\"stop_sequence\":");
    if (g->stop == ENGINE_STOP_WORD) json_put_str_nl(b, c->rq->stops[g->stop_word], c->rq->stop_lens[g->stop_word]);
    else jbuf_puts(b, "null");
}

/* One choice of /v1/completions' final answer. */
static void cmpl_choice(cx *c, const engine_result *g, jbuf *b)
{
    jbuf_puts(b, "{\"text\":");
    if (c->rq->stream) jbuf_puts(b, "\"\"");
    else json_put_str_nl(b, g->text.p ? g->text.p : "", g->text.len);
    jbuf_printf(b, ",\"index\":%d,\"logprobs\":", c->index);
    if (!c->rq->stream && c->rq->sp.n_probs > 0 && g->n_probs_out) {
        jbuf_puts(b, "{\"content\":");
        llama_put_probs(b, c->m, g->probs, 0, llama_probs_kept(c->m, c->rq, g));
        jbuf_putc(b, '}');
    } else {
        jbuf_puts(b, "null");
    }
    jbuf_printf(b, ",\"finish_reason\":\"%s\"}", engine_finish(g));
}

/* The members after the choices: created, model, ..., usage, id, timings. */
static void cmpl_after(cx *c, const engine_result *g)
{
    cmpl_tail(c);
    jbuf_puts(&c->ev, ",\"usage\":");
    llama_put_usage(&c->ev, g);
    jbuf_printf(&c->ev, ",\"id\":\"%s\"", c->id);
    if (c->rq->verbose) {
        llama_final f = {c->m, c->pre, c->rq, g, c->ids, c->n_ids, 0, c->has_new_line, c->model_name, c->vfields};
        jbuf_puts(&c->ev, ",\"__verbose\":");
        llama_put_native_final(&c->ev, &f);
    }
    jbuf_puts(&c->ev, ",\"timings\":");
    llama_put_timings(&c->ev, g);
    jbuf_putc(&c->ev, '}');
}

static void cmpl_final(cx *c, const engine_result *g)
{
    jbuf_reset(&c->ev);
    if (c->choices) {   /* several prompts, not streamed: b11669 answers the first task's usage and timings */
        if (c->choices->len) jbuf_putc(c->choices, ',');
        cmpl_choice(c, g, c->choices);
        if (!c->tail->len) {
            cmpl_after(c, g);
            jbuf_put(c->tail, c->ev.p, c->ev.len);
        }
        return;
    }
    jbuf_puts(&c->ev, "{\"choices\":[");
    cmpl_choice(c, g, &c->ev);
    jbuf_putc(&c->ev, ']');
    cmpl_after(c, g);
    if (!c->rq->stream) {
        serve_reply_json(c->resp, 200, &c->ev);
        return;
    }
    if (cx_send(c, NULL) != 0 || c->more) return;
    jbuf_reset(&c->ev);
    jbuf_puts(&c->ev, "[DONE]");
    cx_send(c, NULL);
}

static void anthropic_final(cx *c, const engine_result *g)
{
    int ended = g->stop == ENGINE_STOP_WORD || g->stop == ENGINE_STOP_EOS;
    const char *reason = ended ? "end_turn" : "max_tokens";
    int chat = c->cl && c->cl->active;
    if (chat) {   /* the final result's update: the whole answer parsed (is_partial false) */
        chat_msg_delta *d = NULL;
        size_t nd = 0;
        char err[512];
        const char *text = c->rq->stream ? c->raw.p : g->text.p;
        size_t tn = c->rq->stream ? c->raw.len : g->text.len;
        if (llama_chat_update(c->cl, text, tn, 0, &d, &nd, err, sizeof err) != 0) {
            if (c->rq->stream) anthropic_error_event(c, err);
            else llama_reply_err(c->resp, 500, err);
            return;
        }
        if (ended && c->cl->msg.ncalls) reason = "tool_use";
        if (c->rq->stream) {
            jbuf f;
            jbuf_init(&f);
            llama_anthropic_stream_blocks(&f, &c->cl->msg, d, nd);
            int rc = cx_write(c, &f);
            jbuf_free(&f);
            chat_msg_deltas_free(d, nd);
            if (rc != 0) return;
        } else {
            chat_msg_deltas_free(d, nd);
        }
    }
    jbuf_reset(&c->ev);
    if (c->rq->stream) {
        if (!chat && c->text_started) {
            jbuf_puts(&c->ev, "{\"type\":\"content_block_stop\",\"index\":0}");
            if (cx_send(c, "content_block_stop") != 0) return;
            jbuf_reset(&c->ev);
        }
        jbuf_printf(&c->ev, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"%s\",", reason);
        put_stop_sequence(c, &c->ev, g);
        jbuf_printf(&c->ev, "},\"usage\":{\"output_tokens\":%zu}}", g->n_decoded);
        if (cx_send(c, "message_delta") != 0) return;
        jbuf_reset(&c->ev);
        jbuf_puts(&c->ev, "{\"type\":\"message_stop\"}");
        cx_send(c, "message_stop");
        return;
    }
    const char *s;
    size_t n;
    jbuf_printf(&c->ev, "{\"id\":\"%s\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[", c->id);
    if (chat) {
        llama_anthropic_blocks(&c->ev, &c->cl->msg, g->text.p ? g->text.p : "", g->text.len);
    } else {
        final_content(c, g, &s, &n);
        if (n) {
            jbuf_puts(&c->ev, "{\"type\":\"text\",\"text\":");
            json_put_str_nl(&c->ev, s, n);
            jbuf_putc(&c->ev, '}');
        }
    }
    jbuf_puts(&c->ev, "],\"model\":");
    json_put_cstr_nl(&c->ev, c->model_name);
    jbuf_printf(&c->ev, ",\"stop_reason\":\"%s\",", reason);
    put_stop_sequence(c, &c->ev, g);
    jbuf_printf(&c->ev, ",\"usage\":{\"cache_read_input_tokens\":%zu,\"input_tokens\":%zu,\"output_tokens\":%zu}}",
                g->n_cached, g->n_prompt - g->n_cached, g->n_decoded);
    serve_reply_json(c->resp, 200, &c->ev);
}

static void resp_usage(jbuf *b, const engine_result *g)
{
    jbuf_printf(b, "\"usage\":{\"input_tokens\":%zu,\"output_tokens\":%zu,\"total_tokens\":%zu,"
                   "\"input_tokens_details\":{\"cached_tokens\":%zu}}",
                g->n_prompt, g->n_decoded, g->n_prompt + g->n_decoded, g->n_cached);
}

static void resp_part(jbuf *b, const char *s, size_t n)
{
    jbuf_puts(b, "{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":");
    json_put_str_nl(b, s, n);
    jbuf_putc(b, '}');
}

static void resp_stream_end(cx *c, const engine_result *g)
{
    const char *s = c->sent.p ? c->sent.p : "";
    size_t n = c->sent.len;
    jbuf item;
    jbuf_init(&item);
    if (n) {
        jbuf_reset(&c->ev);
        jbuf_printf(&c->ev, "{\"type\":\"response.output_text.done\",\"item_id\":\"%s\",\"text\":", c->item_id);
        json_put_str_nl(&c->ev, s, n);
        jbuf_putc(&c->ev, '}');
        if (cx_send(c, "response.output_text.done") != 0) goto out;
        jbuf_reset(&c->ev);
        jbuf_printf(&c->ev, "{\"type\":\"response.content_part.done\",\"item_id\":\"%s\",\"part\":", c->item_id);
        resp_part(&c->ev, s, n);
        jbuf_putc(&c->ev, '}');
        if (cx_send(c, "response.content_part.done") != 0) goto out;
        jbuf_printf(&item, "{\"type\":\"message\",\"status\":\"completed\",\"id\":\"%s\",\"content\":[", c->item_id);
        resp_part(&item, s, n);
        jbuf_puts(&item, "],\"role\":\"assistant\"}");
        jbuf_reset(&c->ev);
        jbuf_puts(&c->ev, "{\"type\":\"response.output_item.done\",\"item\":");
        jbuf_put(&c->ev, item.p, item.len);
        jbuf_putc(&c->ev, '}');
        if (cx_send(c, "response.output_item.done") != 0) goto out;
    }
    jbuf_reset(&c->ev);
    jbuf_printf(&c->ev, "{\"type\":\"response.completed\",\"response\":{\"id\":\"%s\",\"object\":\"response\","
                        "\"created_at\":%lld,\"status\":\"completed\",\"model\":", c->id, (long long)time(NULL));
    json_put_cstr_nl(&c->ev, c->model_name);
    jbuf_puts(&c->ev, ",\"output\":[");
    jbuf_put(&c->ev, item.p ? item.p : "", item.len);
    jbuf_puts(&c->ev, "],");
    resp_usage(&c->ev, g);
    jbuf_puts(&c->ev, "},\"timings\":");
    llama_put_timings(&c->ev, g);
    jbuf_putc(&c->ev, '}');
    cx_send(c, "response.completed");
out:
    jbuf_free(&item);
}

static void resp_final(cx *c, const engine_result *g)
{
    if (c->rq->stream) {
        resp_stream_end(c, g);
        return;
    }
    const char *s;
    size_t n;
    long long t = (long long)time(NULL);
    final_content(c, g, &s, &n);
    jbuf_reset(&c->ev);
    jbuf_printf(&c->ev, "{\"completed_at\":%lld,\"created_at\":%lld,\"id\":\"%s\",\"model\":", t, t, c->id);
    json_put_cstr_nl(&c->ev, c->model_name);
    jbuf_puts(&c->ev, ",\"object\":\"response\",\"output\":[");
    if (n) {
        jbuf_puts(&c->ev, "{\"content\":[");
        resp_part(&c->ev, s, n);
        jbuf_printf(&c->ev, "],\"id\":\"%s\",\"role\":\"assistant\",\"status\":\"completed\",\"type\":\"message\"}",
                    c->item_id);
    }
    jbuf_puts(&c->ev, "],\"status\":\"completed\",");
    resp_usage(&c->ev, g);
    jbuf_putc(&c->ev, '}');
    serve_reply_json(c->resp, 200, &c->ev);
}

/* ------------------------------------------------------------------ the run */

/* Runs body (a completion request, or the chat request a translation
 * made) on the model `named` asks for, answering in kind's shape.
 * count_only: the prompt's length alone, 1 as /v1/messages/count_tokens
 * answers it, 2 as /chat/completions/input_tokens and
 * /v1/responses/input_tokens do ("object": "response.input_tokens"). */
/* One task of a run: its slot chosen, its checks, the engine's run and the
 * answer in kind's shape. 0, or -1 when it answered an error (the run
 * stops there). */
static int cx_task(engine *e, engine_model *m, const llama_pre *pre, engine_request *rq, const int32_t *ids,
                   size_t n_ids, cx *c, jbuf *tparams)
{
    engine_select(e, m, ids, n_ids, rq->id_slot);
    rq->selected = 1;
    jbuf_reset(tparams);
    llama_task_params(m, pre, rq, tparams);
    rq->task_params = tparams->p;
    rq->task_params_len = tparams->len;
    if (!llama_prompt_valid(m, ids, n_ids)) {
        engine_task_ids(e, 2);   /* the slot's launch refuses it: the task's id and one more, measured */
        llama_reply_err(c->resp, 400, "Prompt contains invalid tokens");
        return -1;
    }
    if (n_ids >= engine_model_n_ctx(m)) {
        engine_task_refused(e, m, rq);
        llama_reply_exceed_ctx(c->resp, n_ids, engine_model_n_ctx(m));
        return -1;
    }
    if (c->index > 0 && rq->stream && !rq->return_progress && n_ids) {
        /* the begin partial b11669 sends as a later task starts */
        jbuf_reset(&c->ev);
        jbuf_puts(&c->ev, "null");
        if (cx_send(c, NULL) != 0) return -1;
    }
    engine_result g;
    engine_error er = {0};
    engine_sink sink = {cx_on_token, cx_gone, c, cx_on_progress};
    jbuf_reset(&c->raw);
    jbuf_reset(&c->sent);
    c->has_new_line = 0;
    rq->prompt = ids;
    rq->n_prompt = n_ids;
    c->ids = ids;
    c->n_ids = n_ids;
    int rc = 0;
    int failed = engine_complete(e, m, rq, &sink, &g, &er) != 0;
    serve_resp_note(c->resp, c->model_name, g.n_prompt, g.n_decoded, g.n_cached);   /* the request's log line */
    if (failed) {
        if (!c->began) {
            llama_reply_err(c->resp, 500, er.msg);
        } else {
            jbuf_reset(&c->ev);
            jbuf_puts(&c->ev, "{\"error\":");
            json_put_cstr_nl(&c->ev, er.msg);
            jbuf_putc(&c->ev, '}');
            cx_send(c, c->kind == CX_CMPL ? NULL : "error");
        }
        rc = -1;
    } else if (!g.gone) {
        if (c->kind == CX_CMPL) cmpl_final(c, &g);
        else if (c->kind == CX_ANTHROPIC) anthropic_final(c, &g);
        else resp_final(c, &g);
    } else {
        rc = -1;
    }
    engine_result_free(&g);
    return rc;
}

/* The prompts' tasks one after another on the slot (/v1/completions' array
 * of prompts: b11669 -np 1 runs the tasks it posted at once in order, each
 * its choice with its index; not streamed, the choices joined with the
 * first task's usage and timings; streamed, each task's chunks in turn with
 * "data: null" before the later ones, one [DONE]). */
static void cx_tasks(engine *e, engine_model *m, const llama_pre *pre, engine_request *rq, const llama_prompts *ps,
                     cx *c, jbuf *tparams)
{
    jbuf choices, tail;
    jbuf_init(&choices);
    jbuf_init(&tail);
    int64_t first = ps->count > 1 ? engine_task_ids(e, (int)ps->count) : -1;
    if (ps->count > 1 && !rq->stream) {
        c->choices = &choices;
        c->tail = &tail;
    }
    int ok = 1;
    for (size_t i = 0; i < ps->count && ok; i++) {
        rq->id_task = first >= 0 ? first + (int64_t)i : -1;
        rq->n_tasks = (int)ps->count;
        c->index = (int)i;
        c->more = i + 1 < ps->count;
        ok = cx_task(e, m, pre, rq, ps->ids[i], ps->n[i], c, tparams) == 0;
    }
    if (ok && c->choices) {
        jbuf out;
        jbuf_init(&out);
        jbuf_puts(&out, "{\"choices\":[");
        jbuf_put(&out, choices.p ? choices.p : "", choices.len);
        jbuf_putc(&out, ']');
        jbuf_put(&out, tail.p ? tail.p : "", tail.len);
        serve_reply_json(c->resp, 200, &out);
        jbuf_free(&out);
    }
    jbuf_free(&choices);
    jbuf_free(&tail);
}

/* Runs body (a completion request, or the chat request a translation
 * made) on the model `named` asks for, answering in kind's shape.
 * count_only: the prompt's length alone, 1 as /v1/messages/count_tokens
 * answers it, 2 as /chat/completions/input_tokens and
 * /v1/responses/input_tokens do ("object": "response.input_tokens"). */
static void cx_run(engine *e, const llama_api_opts *lo, serve_req *req, serve_resp *resp, const json_value *body,
                   const json_value *named, cx_kind kind, int count_only)
{
    char err[1024];
    int status;
    llama_pre pre;
    engine_request rq;
    llama_prompts ps;
    engine_model *m;
    jbuf tparams;
    llama_chat layer;
    memset(&ps, 0, sizeof ps);
    jbuf_init(&tparams);
    engine_request_init(&rq);
    llama_chat_init(&layer);
    if (llama_read_pre(body, kind != CX_CMPL, &pre, &status, err, sizeof err) != 0) {
        llama_reply_err(resp, status, err);
        goto out;
    }

    if (!(m = llama_lock_model(e, named, resp))) goto out;
    if (llama_read_request(m, lo, body, &pre, &rq, err, sizeof err) != 0) {
        if (!count_only) engine_task_ids(e, 1);   /* b11669 takes the task's id before it reads the fields */
        llama_reply_err(resp, 400, err);
    } else if (!count_only && kind != CX_CMPL && engine_model_jinja(m) &&
               pre.topts.continue_final != TEMPLATE_CONTINUE_NONE) {
        llama_reply_err(resp, 400, "a conversation ending with an assistant message (prefill) is not reproduced on "
                                   "this route yet with Jinja (b11669's answer parser starts the content with the "
                                   "prefill); /v1/chat/completions answers it");
    } else if (kind == CX_ANTHROPIC && llama_chat_prepare(m, lo, body, &pre, &rq, &layer, &status, err, sizeof err) != 0) {
        llama_reply_err(resp, status, err);   /* the chat layer's reading (oaicompat_chat_params_parse's) */
    } else if (llama_prompt_list(m, &pre, resp, &ps) != 0) {
        /* answered */
    } else if (count_only) {
        jbuf out;
        jbuf_init(&out);
        jbuf_printf(&out, "{\"input_tokens\":%zu%s}", ps.count ? ps.n[0] : 0,
                    count_only == 2 ? ",\"object\":\"response.input_tokens\"" : "");
        serve_reply_json(resp, 200, &out);
        jbuf_free(&out);
    } else if (llama_prompts_check(m, &ps, err, sizeof err) != 0) {
        llama_reply_err(resp, 400, err);
    } else {
        cx c;
        memset(&c, 0, sizeof c);
        jbuf_init(&c.raw);
        jbuf_init(&c.sent);
        jbuf_init(&c.ev);
        c.resp = resp;
        c.req = req;
        c.m = m;
        c.rq = &rq;
        c.kind = kind;
        c.model_name = llama_model_name(e, m);
        memcpy(c.id, kind == CX_RESP ? "resp_" : "chatcmpl-", kind == CX_RESP ? 5 : 9);
        llama_random_id(c.id + (kind == CX_RESP ? 5 : 9), 33);
        memcpy(c.item_id, "msg_", 4);
        llama_random_id(c.item_id + 4, 33);
        c.pre = &pre;
        c.vfields = llama_response_fields(body);
        c.cl = &layer;
        cx_tasks(e, m, &pre, &rq, &ps, &c, &tparams);
        jbuf_free(&c.raw);
        jbuf_free(&c.sent);
        jbuf_free(&c.ev);
    }
    engine_release(e, lo->keep_ms);
out:
    engine_request_free(&rq);
    llama_chat_free(&layer);
    jbuf_free(&tparams);
    llama_prompts_free(&ps);
}

/* ------------------------------------------------------------------ translations */

static int cx_str_is(const json_value *v, const char *s)
{
    return v && v->type == JSON_STRING && v->len == strlen(s) && !memcmp(v->str, s, v->len);
}

/* json_value(o, key, std::string()): the string, or "" for another type. */
static void jstr_or_empty(const json_value *o, const char *key, const char **s, size_t *n)
{
    const json_value *v = o && o->type == JSON_OBJECT ? json_get(o, key) : NULL;
    *s = "";
    *n = 0;
    if (v && v->type == JSON_STRING) {
        *s = v->str;
        *n = v->len;
    }
}

/* The members of o but those named in skip[], each as "key":value, each
 * followed by a comma. */
static void put_members_but(jbuf *b, const json_value *o, const char *const *skip, size_t n_skip)
{
    for (size_t i = 0; o && o->type == JSON_OBJECT && i < o->n; i++) {
        int drop = 0;
        for (size_t k = 0; k < n_skip && !drop; k++)
            drop = strlen(skip[k]) == o->key_lens[i] && !memcmp(skip[k], o->keys[i], o->key_lens[i]);
        if (drop) continue;
        json_put_str(b, o->keys[i], o->key_lens[i]);
        jbuf_putc(b, ':');
        json_put_value(b, o->items[i]);
        jbuf_putc(b, ',');
    }
}

#define BANKML_NO_TOOLS "bankml does not reproduce tool calls yet"

/* The messages a Responses request makes, kept apart so that an output
 * message can be merged into the assistant message before it. */
typedef struct {
    int assistant;
    jbuf head;                 /* "role":...,(other members), */
    jbuf parts;                /* content parts, comma-separated */
    size_t n_parts;
} rmsg;

static void put_text_part(jbuf *b, size_t *n, const json_value *text)
{
    if ((*n)++) jbuf_putc(b, ',');
    jbuf_puts(b, "{\"text\":");
    json_put_value(b, text);
    jbuf_puts(b, ",\"type\":\"text\"}");
}

/* One input item (b11669's server_chat_convert_responses_to_chatcmpl).
 * 0, or -1 with the 400 message. */
static int resp_item(rmsg *ms, size_t *nm, const json_value *it, char *err, size_t errlen)
{
    const json_value *ct = it->type == JSON_OBJECT ? json_get(it, "content") : NULL;
    const json_value *role = it->type == JSON_OBJECT ? json_get(it, "role") : NULL;
    const json_value *ty = it->type == JSON_OBJECT ? json_get(it, "type") : NULL;
    int merge = *nm && ms[*nm - 1].assistant;
    int ct_str = ct && ct->type == JSON_STRING;
    static const char *const skip[] = {"type", "status", "content"};
    if (role && role->type == JSON_STRING && (ct_str || (ct && ct->type == JSON_ARRAY)) &&
        (cx_str_is(role, "user") || cx_str_is(role, "system") || cx_str_is(role, "developer"))) {
        rmsg *m = &ms[(*nm)++];
        put_members_but(&m->head, it, skip, 3);
        if (ct_str) put_text_part(&m->parts, &m->n_parts, ct);
        for (size_t i = 0; !ct_str && i < ct->n; i++) {
            const json_value *p = ct->items[i], *t = p->type == JSON_OBJECT ? json_get(p, "type") : NULL;
            if (cx_str_is(t, "input_text")) {
                if (!json_get(p, "text")) return bk_err(err, errlen, "'Input text' requires 'text'"), -1;
                put_text_part(&m->parts, &m->n_parts, json_get(p, "text"));
            } else if (cx_str_is(t, "input_image")) {
                if (!json_get(p, "image_url")) return bk_err(err, errlen, "'image_url' is required"), -1;
                if (m->n_parts++) jbuf_putc(&m->parts, ',');
                jbuf_puts(&m->parts, "{\"image_url\":{\"url\":");
                json_put_value(&m->parts, json_get(p, "image_url"));
                jbuf_puts(&m->parts, "},\"type\":\"image_url\"}");
            } else if (cx_str_is(t, "input_file")) {
                return bk_err(err, errlen, "'input_file' is not supported by llamacpp at this moment"), -1;
            } else {
                return bk_err(err, errlen, "'type' must be one of 'input_text', 'input_image', or 'input_file'"), -1;
            }
        }
        return 0;
    }
    if (cx_str_is(role, "assistant") && cx_str_is(ty, "message")) {
        rmsg *m = merge ? &ms[*nm - 1] : &ms[(*nm)++];
        if (!merge) {
            m->assistant = 1;
            put_members_but(&m->head, it, skip, 3);
        }
        if (ct_str) put_text_part(&m->parts, &m->n_parts, ct);
        for (size_t i = 0; ct && ct->type == JSON_ARRAY && i < ct->n; i++) {
            const json_value *p = ct->items[i], *t = p->type == JSON_OBJECT ? json_get(p, "type") : NULL;
            const json_value *tx = t ? json_get(p, "text") : NULL, *rf = t ? json_get(p, "refusal") : NULL;
            if (cx_str_is(t, "output_text") || cx_str_is(t, "input_text")) {
                if (!tx || tx->type != JSON_STRING) return bk_err(err, errlen, "'Output text' requires 'text'"), -1;
                put_text_part(&m->parts, &m->n_parts, tx);
            } else if (cx_str_is(t, "refusal")) {
                if (!rf || rf->type != JSON_STRING) return bk_err(err, errlen, "'Refusal' requires 'refusal'"), -1;
                if (m->n_parts++) jbuf_putc(&m->parts, ',');
                jbuf_puts(&m->parts, "{\"refusal\":");
                json_put_value(&m->parts, rf);
                jbuf_puts(&m->parts, ",\"type\":\"refusal\"}");
            } else {
                return bk_err(err, errlen, "'type' must be one of 'output_text' or 'refusal'"), -1;
            }
        }
        return 0;
    }
    if (cx_str_is(ty, "function_call") || cx_str_is(ty, "function_call_output") || cx_str_is(ty, "reasoning")) {
        bk_err(err, errlen, "input items of type '%.*s' are refused: bankml does not reproduce tool calls and "
                            "reasoning items yet", (int)ty->len, ty->str);
        return -1;
    }
    bk_err(err, errlen, "Cannot determine type of 'item'");
    return -1;
}

/* A Responses request as the chat request b11669 makes of it: the body's
 * other members kept. 0, or -1 with the 400 message. */
static int responses_to_chat(const json_value *b, jbuf *o, char *err, size_t errlen)
{
    static const char *const skip[] = {"input", "instructions", "tools", "max_output_tokens", "reasoning",
                                       "messages", "max_tokens"};
    const json_value *in = json_get(b, "input"), *v = json_get(b, "previous_response_id");
    const json_value *mo = json_get(b, "max_output_tokens");
    rmsg ms[256];
    size_t nm = 0, cap = sizeof ms / sizeof ms[0];
    int rc = -1;
    if (!in) return bk_err(err, errlen, "'input' is required"), -1;
    if (v && v->type == JSON_STRING && v->len)
        return bk_err(err, errlen, "llama.cpp does not support 'previous_response_id'."), -1;
    if (in->type != JSON_STRING && in->type != JSON_ARRAY)
        return bk_err(err, errlen, "'input' must be a string or array of objects"), -1;
    if (in->type == JSON_ARRAY && in->n + 1 > cap)
        return bk_err(err, errlen, "'input' has more than %zu items: bankml's limit", cap - 1), -1;
    memset(ms, 0, sizeof ms);
    for (size_t i = 0; i < cap; i++) {
        jbuf_init(&ms[i].head);
        jbuf_init(&ms[i].parts);
    }
    if (json_get(b, "instructions")) {
        const char *s;
        size_t n;
        jstr_or_empty(b, "instructions", &s, &n);
        jbuf_puts(&ms[nm].head, "\"role\":\"system\",");
        ms[nm].n_parts = (size_t)-1;   /* a string content */
        json_put_str(&ms[nm++].parts, s, n);
    }
    if (in->type == JSON_STRING) {
        jbuf_puts(&ms[nm].head, "\"role\":\"user\",");
        ms[nm].n_parts = (size_t)-1;
        json_put_value(&ms[nm++].parts, in);
    }
    for (size_t i = 0; in->type == JSON_ARRAY && i < in->n; i++)
        if (resp_item(ms, &nm, in->items[i], err, errlen) != 0) goto out;
    if ((v = json_get(b, "tools"))) {
        if (v->type != JSON_ARRAY) {
            bk_err(err, errlen, "'tools' must be an array of objects");
            goto out;
        }
        for (size_t i = 0; i < v->n; i++)
            if (cx_str_is(v->items[i]->type == JSON_OBJECT ? json_get(v->items[i], "type") : NULL, "function")) {
                bk_err(err, errlen, "function 'tools' are refused: " BANKML_NO_TOOLS);
                goto out;
            }
    }
    jbuf_putc(o, '{');
    put_members_but(o, b, skip, mo ? 7 : 6);
    jbuf_puts(o, "\"messages\":[");
    for (size_t i = 0; i < nm; i++) {
        jbuf_puts(o, i ? ",{" : "{");
        jbuf_put(o, ms[i].head.p, ms[i].head.len);
        jbuf_puts(o, "\"content\":");
        if (ms[i].n_parts == (size_t)-1) {
            jbuf_put(o, ms[i].parts.p, ms[i].parts.len);
        } else {
            jbuf_putc(o, '[');
            jbuf_put(o, ms[i].parts.p, ms[i].parts.len);
            jbuf_putc(o, ']');
        }
        jbuf_putc(o, '}');
    }
    jbuf_putc(o, ']');
    if (mo) {
        jbuf_puts(o, ",\"max_tokens\":");
        json_put_value(o, mo);
    }
    v = json_get(b, "reasoning");
    if (v && v->type == JSON_OBJECT && json_get(v, "effort")) {
        jbuf_puts(o, ",\"reasoning_effort\":");
        json_put_value(o, json_get(v, "effort"));
    }
    jbuf_putc(o, '}');
    rc = 0;
out:
    for (size_t i = 0; i < cap; i++) {
        jbuf_free(&ms[i].head);
        jbuf_free(&ms[i].parts);
    }
    return rc;
}

/* ------------------------------------------------------------------ the routes */

typedef struct {
    engine *e;
    const llama_api_opts *lo;  /* the command line's defaults (llama.c's, set before the server listens) */
} compat;

/* A translated route: the body parsed, translated, parsed again, run. */
static void translated(compat *api, serve_req *req, serve_resp *resp, cx_kind kind, int count_only)
{
    json_value *body = llama_parse_body(api->e, req, resp), *chat = NULL;
    char err[1024];
    int status = 400;
    jbuf t;
    if (!body) return;
    jbuf_init(&t);
    if (body->type != JSON_OBJECT) {
        /* nlohmann's contains() and at() on a value that is not an object */
        if (kind == CX_ANTHROPIC) llama_reply_err(resp, 500, "'messages' is required");
        else llama_reply_err(resp, 400, "'input' is required");
        goto out;
    }
    if ((kind == CX_ANTHROPIC ? llama_anthropic_to_chat(body, &t, &status, err, sizeof err)
                              : responses_to_chat(body, &t, err, sizeof err)) != 0) {
        llama_reply_err(resp, status, err);
        goto out;
    }
    if (t.oom || !(chat = json_parse(t.p, t.len, err, sizeof err))) {
        llama_reply_err(resp, 500, t.oom ? "out of memory" : err);
        goto out;
    }
    cx_run(api->e, api->lo, req, resp, chat, body, kind, count_only);
out:
    json_free(chat);
    json_free(body);
    jbuf_free(&t);
}

static void h_v1_completions(serve_req *req, serve_resp *resp, void *ud)
{
    compat *api = ud;
    json_value *body = llama_parse_body(api->e, req, resp);
    if (!body) return;
    if (body->type != JSON_OBJECT) {
        char err[128];
        bk_err(err, sizeof err, "[json.exception.type_error.304] cannot use at() with %s", llama_jtype(body));
        llama_reply_err(resp, 400, err);
    } else {
        cx_run(api->e, api->lo, req, resp, body, body, CX_CMPL, 0);
    }
    json_free(body);
}

static void h_messages(serve_req *req, serve_resp *resp, void *ud) { translated(ud, req, resp, CX_ANTHROPIC, 0); }
static void h_count_tokens(serve_req *req, serve_resp *resp, void *ud) { translated(ud, req, resp, CX_ANTHROPIC, 1); }
static void h_responses(serve_req *req, serve_resp *resp, void *ud) { translated(ud, req, resp, CX_RESP, 0); }
static void h_resp_tokens(serve_req *req, serve_resp *resp, void *ud) { translated(ud, req, resp, CX_RESP, 2); }

/* /chat/completions/input_tokens: a chat request's prompt length, the
 * request read as /v1/chat/completions reads it. */
static void h_chat_tokens(serve_req *req, serve_resp *resp, void *ud)
{
    compat *api = ud;
    json_value *body = llama_parse_body(api->e, req, resp);
    if (!body) return;
    cx_run(api->e, api->lo, req, resp, body, body, CX_RESP, 2);
    json_free(body);
}

/* b11669's 501s on one model started without the route's flag. */
static void h_no_embeddings(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    llama_reply_err(resp, 501, "This server does not support embeddings. Start it with `--embeddings`");
}

static void h_no_rerank(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    llama_reply_err(resp, 501, "This server does not support reranking. Start it with `--reranking`");
}

static void h_no_props(serve_req *req, serve_resp *resp, void *ud)
{
    (void)req;
    (void)ud;
    llama_reply_err(resp, 501, "This server does not support changing global properties. Start it with `--props`");
}

/* /infill: b11669's refusal on a model without FIM tokens, in its words;
 * on a model with them, bankml's own (the FIM prompt is not built yet). */
static void h_infill(serve_req *req, serve_resp *resp, void *ud)
{
    compat *api = ud;
    json_value *body = llama_parse_body(api->e, req, resp);
    if (!body) return;
    engine_model *m = llama_lock_model(api->e, body, resp);
    int32_t pre, suf, mid;
    json_free(body);
    if (!m) return;
    engine_model_fim(m, &pre, &suf, &mid);
    engine_release(api->e, api->lo->keep_ms);
    if (pre < 0 || suf < 0 || mid < 0) {
        char msg[256];
        bk_err(msg, sizeof msg, "Infill is not supported by this model: %s%s%s", pre < 0 ? "prefix token is missing. " : "",
               suf < 0 ? "suffix token is missing. " : "", mid < 0 ? "middle token is missing. " : "");
        llama_reply_err(resp, 501, msg);
        return;
    }
    llama_reply_err(resp, 501, "bankml does not run /infill yet: llama-server's fill-in-the-middle prompt (input_prefix, "
                               "input_suffix, input_extra) is not reproduced; use /completion with the FIM tokens");
}

void *llama_compat_register(serve_server *srv, engine *e, const llama_api_opts *lo)
{
    compat *api = calloc(1, sizeof *api);
    if (!api) return NULL;
    api->e = e;
    api->lo = lo;
    serve_route(srv, "POST", "/v1/completions", h_v1_completions, api, 0);
    serve_route(srv, "POST", "/v1/responses", h_responses, api, 0);
    serve_route(srv, "POST", "/responses", h_responses, api, 0);
    serve_route(srv, "POST", "/v1/messages", h_messages, api, 0);
    serve_route(srv, "POST", "/v1/messages/count_tokens", h_count_tokens, api, 0);
    serve_route(srv, "POST", "/chat/completions/input_tokens", h_chat_tokens, api, 0);
    serve_route(srv, "POST", "/v1/chat/completions/input_tokens", h_chat_tokens, api, 0);
    serve_route(srv, "POST", "/responses/input_tokens", h_resp_tokens, api, 0);
    serve_route(srv, "POST", "/v1/responses/input_tokens", h_resp_tokens, api, 0);
    static const char *const embd[] = {"/embedding", "/embeddings", "/v1/embeddings"};
    static const char *const rr[] = {"/rerank", "/reranking", "/v1/rerank", "/v1/reranking"};
    for (size_t i = 0; i < 3; i++) serve_route(srv, "POST", embd[i], h_no_embeddings, api, 0);
    for (size_t i = 0; i < 4; i++) serve_route(srv, "POST", rr[i], h_no_rerank, api, 0);
    serve_route(srv, "POST", "/infill", h_infill, api, 0);
    serve_route(srv, "POST", "/props", h_no_props, api, 0);
    return api;
}

void llama_compat_free(void *api) { free(api); }
