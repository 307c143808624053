/*
 * llama_anthropic.c -- llama-server b11669's Anthropic Messages route
 * (/v1/messages, /v1/messages/count_tokens) on both sides of the chat
 * layer: the request made into the chat request b11669 makes of it
 * (server_chat_convert_anthropic_to_oai: system, content blocks, tool_use
 * as tool_calls, tool_result as tool messages, thinking blocks as
 * reasoning_content, tools, tool_choice, stop_sequences, thinking's
 * budget), and the chat layer's parse written back as b11669's Messages
 * answer (server_task_result_cmpl_final::to_json_anthropic and
 * _stream, server_task_result_cmpl_partial::to_json_anthropic: thinking,
 * text and tool_use blocks, their stream events and indices). The route's
 * plumbing (the run, the envelope, message_start / message_delta) is
 * llama_compat.c's. See llama_json.h and docs/modules/llama.md.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/llama_json.h"
#include "base/base.h"

static int an_is(const json_value *v, const char *s)
{
    return v && v->type == JSON_STRING && v->len == strlen(s) && !memcmp(v->str, s, v->len);
}

/* json_value(o, key, std::string()): the member when it is a string, else "" (o not an object included). */
static void an_str(const json_value *o, const char *key, const char **s, size_t *n)
{
    const json_value *v = o && o->type == JSON_OBJECT ? json_get(o, key) : NULL;
    *s = v && v->type == JSON_STRING ? v->str : "";
    *n = v && v->type == JSON_STRING ? v->len : 0;
}

/* json_value(o, key, json()) / json::object(): the member unless it is absent or null. */
static const json_value *an_val(const json_value *o, const char *key)
{
    const json_value *v = o && o->type == JSON_OBJECT ? json_get(o, key) : NULL;
    return v && v->type != JSON_NULL ? v : NULL;
}

/* The string key:value member (a comma before it when more). */
static void an_member(jbuf *b, const char *key, const char *s, size_t n, int more)
{
    jbuf_printf(b, "%s\"%s\":", more ? "," : "", key);
    json_put_str(b, s, n);
}

/* Anthropic's billing header: its cch stamp made constant, as b11669 does
 * (normalize_anthropic_billing_header), so the prompt cache gets past it. */
static void an_system_text(jbuf *b, const char *s, size_t n)
{
    static const char head[] = "x-anthropic-billing-header:";
    size_t h = sizeof head - 1, at = b->len;
    jbuf_put(b, s, n);
    if (n < h || memcmp(s, head, h) || b->oom) return;
    for (size_t i = h; i + 4 <= n; i++)
        if (!memcmp(s + i, "cch=", 4)) {
            if (i + 4 + 5 < n && s[i + 9] == ';') memset(b->p + at + i + 4, 'f', 5);
            return;
        }
}

/* An image block's source as OpenAI's image_url part ({"type":"image_url","image_url":{"url":...}}), for a
 * source of type base64 (a data: URL, media_type image/jpeg unless a string) or url; 0 for another source (the
 * block is dropped). */
static int an_image(jbuf *b, const json_value *block)
{
    const json_value *src = an_val(block, "source");
    const json_value *st = src && src->type == JSON_OBJECT ? json_get(src, "type") : NULL;
    const char *s;
    size_t n;
    if (!an_is(st, "base64") && !an_is(st, "url")) return 0;
    jbuf url;
    jbuf_init(&url);
    if (an_is(st, "base64")) {
        const json_value *mt = json_get(src, "media_type");
        jbuf_puts(&url, "data:");
        if (mt && mt->type == JSON_STRING) jbuf_put(&url, mt->str, mt->len);
        else jbuf_puts(&url, "image/jpeg");
        jbuf_puts(&url, ";base64,");
        an_str(src, "data", &s, &n);
    } else {
        an_str(src, "url", &s, &n);
    }
    jbuf_put(&url, s, n);
    jbuf_puts(b, "{\"type\":\"image_url\",\"image_url\":{\"url\":");
    json_put_str(b, url.p ? url.p : "", url.len);
    jbuf_puts(b, "}}");
    jbuf_free(&url);
    return 1;
}

/* A tool_result block as the tool message b11669 makes of it: its content a string as it is, an array of blocks
 * its text blocks joined into one string (or, with an image among them, the text and image_url parts), anything
 * else "". */
static void an_tool_result(jbuf *b, const json_value *block)
{
    const char *id, *s;
    size_t idn, n;
    an_str(block, "tool_use_id", &id, &idn);
    jbuf_puts(b, "{\"role\":\"tool\"");
    an_member(b, "tool_call_id", id, idn, 1);
    jbuf_puts(b, ",\"content\":");
    const json_value *ct = an_val(block, "content");
    if (ct && ct->type == JSON_STRING) {
        json_put_str(b, ct->str, ct->len);
    } else if (ct && ct->type == JSON_ARRAY) {
        jbuf text, parts;
        size_t np = 0;
        int images = 0;
        jbuf_init(&text);
        jbuf_init(&parts);
        for (size_t i = 0; i < ct->n; i++) {
            const json_value *c = ct->items[i], *ty = c->type == JSON_OBJECT ? json_get(c, "type") : NULL;
            if (an_is(ty, "text")) {
                an_str(c, "text", &s, &n);
                jbuf_put(&text, s, n);
                jbuf_puts(&parts, np++ ? ",{\"type\":\"text\"" : "{\"type\":\"text\"");
                an_member(&parts, "text", s, n, 1);
                jbuf_putc(&parts, '}');
            } else if (an_is(ty, "image")) {
                images = 1;
                size_t at = parts.len;
                if (np) jbuf_putc(&parts, ',');
                if (an_image(&parts, c)) np++;
                else parts.len = at;
            }
        }
        if (!images) {
            json_put_str(b, text.p ? text.p : "", text.len);
        } else {
            jbuf_putc(b, '[');
            jbuf_put(b, parts.p ? parts.p : "", parts.len);
            jbuf_putc(b, ']');
        }
        jbuf_free(&text);
        jbuf_free(&parts);
    } else {
        jbuf_puts(b, "\"\"");
    }
    jbuf_putc(b, '}');
}

/* A tool_use block as an assistant tool call: id and name (strings, else ""), the input (an object when
 * absent or null) dumped as nlohmann's dump() prints it into the arguments string. */
static void an_tool_use(jbuf *b, const json_value *block)
{
    const char *s;
    size_t n;
    an_str(block, "id", &s, &n);
    jbuf_puts(b, "{");
    an_member(b, "id", s, n, 0);
    jbuf_puts(b, ",\"type\":\"function\",\"function\":{");
    an_str(block, "name", &s, &n);
    an_member(b, "name", s, n, 0);
    jbuf args;
    jbuf_init(&args);
    const json_value *in = an_val(block, "input");
    if (in) json_put_nl_dump(&args, in, -1);
    else jbuf_puts(&args, "{}");
    an_member(b, "arguments", args.p ? args.p : "", args.len, 1);
    jbuf_free(&args);
    jbuf_puts(b, "}}");
}

/* One message whose content is an array of blocks: the message (role, content parts or "", tool_calls,
 * reasoning_content) when it has text, images, tool calls or thinking, then a tool message per tool_result.
 * Other block types are dropped, as b11669 drops them. *first: no message written yet. */
static void an_blocks(jbuf *o, const json_value *msg, const json_value *content, int *first)
{
    jbuf parts, calls, results, reasoning;
    size_t np = 0, nc = 0, nr = 0;
    jbuf_init(&parts);
    jbuf_init(&calls);
    jbuf_init(&results);
    jbuf_init(&reasoning);
    for (size_t i = 0; i < content->n; i++) {
        const json_value *bl = content->items[i], *ty = bl->type == JSON_OBJECT ? json_get(bl, "type") : NULL;
        const char *s;
        size_t n;
        if (an_is(ty, "text")) {
            if (np++) jbuf_putc(&parts, ',');
            json_put_value(&parts, bl);
        } else if (an_is(ty, "thinking")) {
            an_str(bl, "thinking", &s, &n);
            jbuf_put(&reasoning, s, n);
        } else if (an_is(ty, "image")) {
            size_t at = parts.len;
            if (np) jbuf_putc(&parts, ',');
            if (an_image(&parts, bl)) np++;
            else parts.len = at;
        } else if (an_is(ty, "tool_use")) {
            if (nc++) jbuf_putc(&calls, ',');
            an_tool_use(&calls, bl);
        } else if (an_is(ty, "tool_result")) {
            if (nr++) jbuf_putc(&results, ',');
            an_tool_result(&results, bl);
        }
    }
    if (np || nc || reasoning.len) {
        const char *role;
        size_t rl;
        an_str(msg, "role", &role, &rl);
        jbuf_puts(o, *first ? "{" : ",{");
        *first = 0;
        an_member(o, "role", role, rl, 0);
        jbuf_puts(o, ",\"content\":");
        if (np) {
            jbuf_putc(o, '[');
            jbuf_put(o, parts.p, parts.len);
            jbuf_putc(o, ']');
        } else {
            jbuf_puts(o, "\"\"");
        }
        if (nc) {
            jbuf_puts(o, ",\"tool_calls\":[");
            jbuf_put(o, calls.p, calls.len);
            jbuf_putc(o, ']');
        }
        if (reasoning.len) an_member(o, "reasoning_content", reasoning.p, reasoning.len, 1);
        jbuf_putc(o, '}');
    }
    if (nr) {
        if (!*first) jbuf_putc(o, ',');
        *first = 0;
        jbuf_put(o, results.p, results.len);
    }
    jbuf_free(&parts);
    jbuf_free(&calls);
    jbuf_free(&results);
    jbuf_free(&reasoning);
}

/* json_value(thinking, "budget_tokens", 10000) read as an int: a number converted as static_cast<int> does on
 * x86-64 (integers wrapped to 32 bits, fractions truncated, a double out of range INT_MIN), a boolean 0 or 1,
 * anything else 10000. */
static int32_t an_budget(const json_value *thinking)
{
    const json_value *v = an_val(thinking, "budget_tokens");
    int64_t x;
    if (!v) return 10000;
    if (v->type == JSON_TRUE || v->type == JSON_FALSE) return v->type == JSON_TRUE;
    if (v->type != JSON_NUMBER) return 10000;
    if (!strpbrk(v->str, ".eE")) {   /* nlohmann's integers: int64, then uint64 */
        if (json_as_i64(v, &x)) return (int32_t)(uint32_t)(uint64_t)x;
        errno = 0;
        unsigned long long u = strtoull(v->str, NULL, 10);
        if (v->str[0] != '-' && errno == 0) return (int32_t)(uint32_t)u;
    }
    double d = strtod(v->str, NULL);
    if (isnan(d) || d >= 2147483648.0 || d <= -2147483649.0) return INT32_MIN;
    return (int32_t)d;
}

/* tools as OpenAI's function tools: name and description (strings, else ""), input_schema as the parameters
 * (when the tool has the member, null included; else {}). */
static void an_tools(jbuf *o, const json_value *tools)
{
    jbuf_puts(o, ",\"tools\":[");
    for (size_t i = 0; i < tools->n; i++) {
        const json_value *t = tools->items[i];
        const json_value *sch = t->type == JSON_OBJECT ? json_get(t, "input_schema") : NULL;
        const char *s;
        size_t n;
        jbuf_puts(o, i ? ",{\"type\":\"function\",\"function\":{" : "{\"type\":\"function\",\"function\":{");
        an_str(t, "name", &s, &n);
        an_member(o, "name", s, n, 0);
        an_str(t, "description", &s, &n);
        an_member(o, "description", s, n, 1);
        jbuf_puts(o, ",\"parameters\":");
        if (sch) json_put_value(o, sch);
        else jbuf_puts(o, "{}");
        jbuf_puts(o, "}}");
    }
    jbuf_putc(o, ']');
}

int llama_anthropic_to_chat(const json_value *b, jbuf *o, int *status, char *err, size_t errlen)
{
    static const char *const pass[] = {"temperature", "top_p", "top_k", "stream", "chat_template_kwargs"};
    const json_value *sys = an_val(b, "system"), *msgs = json_get(b, "messages"), *v;
    int first = 1;
    *status = 400;
    jbuf_puts(o, "{\"messages\":[");
    if (sys) {
        first = 0;
        jbuf sc;
        jbuf_init(&sc);
        if (sys->type == JSON_STRING) an_system_text(&sc, sys->str, sys->len);
        for (size_t i = 0; sys->type == JSON_ARRAY && i < sys->n; i++) {
            const char *s;
            size_t n;
            if (!an_is(sys->items[i]->type == JSON_OBJECT ? json_get(sys->items[i], "type") : NULL, "text")) continue;
            an_str(sys->items[i], "text", &s, &n);
            an_system_text(&sc, s, n);
        }
        jbuf_puts(o, "{\"role\":\"system\"");
        an_member(o, "content", sc.p ? sc.p : "", sc.len, 1);
        jbuf_putc(o, '}');
        jbuf_free(&sc);
    }
    if (!msgs) {
        *status = 500;
        bk_err(err, errlen, "'messages' is required");
        return -1;
    }
    for (size_t i = 0; msgs->type == JSON_ARRAY && i < msgs->n; i++) {
        const json_value *m = msgs->items[i];
        const json_value *ct = m->type == JSON_OBJECT ? json_get(m, "content") : NULL;
        if (!ct && an_is(m->type == JSON_OBJECT ? json_get(m, "role") : NULL, "assistant")) continue;
        if (!ct || ct->type != JSON_ARRAY) {   /* no content, a string or another value: the message as it is */
            if (!first) jbuf_putc(o, ',');
            first = 0;
            json_put_value(o, m);
        } else {
            an_blocks(o, m, ct, &first);
        }
    }
    jbuf_putc(o, ']');
    if ((v = json_get(b, "tools")) && v->type == JSON_ARRAY) an_tools(o, v);
    v = json_get(b, "tool_choice");
    if (v && v->type == JSON_OBJECT) {   /* auto; any and tool are "required"; none and the rest: absent (auto) */
        const json_value *t = json_get(v, "type");
        if (an_is(t, "auto")) jbuf_puts(o, ",\"tool_choice\":\"auto\"");
        else if (an_is(t, "any") || an_is(t, "tool")) jbuf_puts(o, ",\"tool_choice\":\"required\"");
    }
    if ((v = json_get(b, "stop_sequences"))) {
        jbuf_puts(o, ",\"stop\":");
        json_put_value(o, v);
    }
    jbuf_puts(o, ",\"max_tokens\":");
    if ((v = json_get(b, "max_tokens"))) json_put_value(o, v);
    else jbuf_puts(o, "4096");
    for (size_t k = 0; k < sizeof pass / sizeof pass[0]; k++)
        if ((v = json_get(b, pass[k]))) {
            jbuf_printf(o, ",\"%s\":", pass[k]);
            json_put_value(o, v);
        }
    if (json_get(b, "thinking")) {   /* type enabled: its budget (10000 by default) as thinking_budget_tokens */
        const json_value *th = an_val(b, "thinking");
        if (an_is(th && th->type == JSON_OBJECT ? json_get(th, "type") : NULL, "enabled"))
            jbuf_printf(o, ",\"thinking_budget_tokens\":%d", (int)an_budget(th));
    }
    /* metadata.user_id: b11669 keeps it as __metadata_user_id, which nothing reads; left out */
    jbuf_putc(o, '}');
    return 0;
}

/* ------------------------------------------------------------------ the answer */

static void an_event(jbuf *b, const char *name) { jbuf_printf(b, "event: %s\ndata: ", name); }

static void an_block_start(jbuf *b, size_t index, const char *type, const char *field)
{
    an_event(b, "content_block_start");
    jbuf_printf(b, "{\"type\":\"content_block_start\",\"index\":%zu,\"content_block\":{\"type\":\"%s\",\"%s\":\"\"}}"
                   "\n\n", index, type, field);
}

static void an_tool_start(jbuf *b, size_t index, const jbuf *id, const jbuf *name)
{
    an_event(b, "content_block_start");
    jbuf_printf(b, "{\"type\":\"content_block_start\",\"index\":%zu,\"content_block\":{\"type\":\"tool_use\",\"id\":",
                index);
    json_put_str_nl(b, id->p ? id->p : "", id->len);
    jbuf_puts(b, ",\"name\":");
    json_put_str_nl(b, name->p ? name->p : "", name->len);
    jbuf_puts(b, "}}\n\n");
}

/* A content_block_delta: {"type":KIND,FIELD:s}. */
static void an_delta(jbuf *b, size_t index, const char *kind, const char *field, const jbuf *s)
{
    an_event(b, "content_block_delta");
    jbuf_printf(b, "{\"type\":\"content_block_delta\",\"index\":%zu,\"delta\":{\"type\":\"%s\",\"%s\":", index, kind,
                field);
    json_put_str_nl(b, s->p ? s->p : "", s->len);
    jbuf_puts(b, "}}\n\n");
}

static void an_stop(jbuf *b, size_t index)
{
    an_event(b, "content_block_stop");
    jbuf_printf(b, "{\"type\":\"content_block_stop\",\"index\":%zu}\n\n", index);
}

/* One delta's reasoning and content: the thinking block (index 0) and the text block (index text_at), each
 * started at its first piece (*th, *tx remember it), then its delta event. */
static void an_text_deltas(jbuf *out, const chat_msg_delta *x, size_t text_at, int *th, int *tx)
{
    if (x->reasoning_delta.len) {
        if (!*th) an_block_start(out, 0, "thinking", "thinking");
        *th = 1;
        an_delta(out, 0, "thinking_delta", "thinking", &x->reasoning_delta);
    }
    if (x->content_delta.len) {
        if (!*tx) an_block_start(out, text_at, "text", "text");
        *tx = 1;
        an_delta(out, text_at, "text_delta", "text", &x->content_delta);
    }
}

void llama_anthropic_partial(jbuf *out, llama_anthropic_state *st, const chat_msg *msg, const chat_msg_delta *d,
                             size_t nd)
{
    size_t reasoned = msg->reasoning.len != 0;   /* anthropic_has_reasoning: the message so far has reasoning */
    int th = st->thinking_started, tx = st->text_started;
    for (size_t i = 0; i < nd; i++) {
        const chat_msg_delta *x = &d[i];
        an_text_deltas(out, x, reasoned, &th, &tx);
        if (x->tool_index != PEG_INVALID) {
            size_t idx = reasoned + (size_t)tx + x->tool_index;
            if (x->call.name.len) an_tool_start(out, idx, &x->call.id, &x->call.name);
            if (x->call.arguments.len) an_delta(out, idx, "input_json_delta", "partial_json", &x->call.arguments);
        }
    }
    st->thinking_started = th;
    st->text_started = tx;
}

void llama_anthropic_stream_blocks(jbuf *out, const chat_msg *msg, const chat_msg_delta *d, size_t nd)
{
    size_t has_thinking = msg->reasoning.len != 0, has_text = msg->content.len != 0;
    int th = 0, tx = 0;
    unsigned char *started = calloc(msg->ncalls ? msg->ncalls : 1, 1);
    if (!started) {
        out->oom = 1;
        return;
    }
    for (size_t i = 0; i < nd; i++) {
        const chat_msg_delta *x = &d[i];
        an_text_deltas(out, x, has_thinking, &th, &tx);
        if (x->tool_index != PEG_INVALID && x->tool_index < msg->ncalls) {
            size_t idx = has_thinking + has_text + x->tool_index;
            if (!started[x->tool_index]) {   /* the whole call's id and name, once per call in these deltas */
                const chat_tool_call *c = &msg->calls[x->tool_index];
                an_tool_start(out, idx, &c->id, &c->name);
                started[x->tool_index] = 1;
            }
            if (x->call.arguments.len) an_delta(out, idx, "input_json_delta", "partial_json", &x->call.arguments);
        }
    }
    free(started);
    if (has_thinking) {   /* an empty signature_delta before the thinking block closes */
        an_event(out, "content_block_delta");
        jbuf_puts(out, "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\","
                       "\"signature\":\"\"}}\n\n");
        an_stop(out, 0);
    }
    if (has_text) an_stop(out, has_thinking);
    for (size_t i = 0; i < msg->ncalls; i++) an_stop(out, has_thinking + has_text + i);
}

void llama_anthropic_blocks(jbuf *out, const chat_msg *msg, const char *raw, size_t raw_len)
{
    int any = 0;
    if (!msg->content.len && !msg->reasoning.len && !msg->ncalls) {   /* an empty parse: the raw text */
        if (!raw_len) return;
        jbuf_puts(out, "{\"type\":\"text\",\"text\":");
        json_put_str_nl(out, raw, raw_len);
        jbuf_putc(out, '}');
        return;
    }
    if (msg->reasoning.len) {
        jbuf_puts(out, "{\"type\":\"thinking\",\"thinking\":");
        json_put_str_nl(out, msg->reasoning.p, msg->reasoning.len);
        jbuf_puts(out, ",\"signature\":\"\"}");
        any = 1;
    }
    if (msg->content.len) {
        jbuf_puts(out, any ? ",{\"type\":\"text\",\"text\":" : "{\"type\":\"text\",\"text\":");
        json_put_str_nl(out, msg->content.p, msg->content.len);
        jbuf_putc(out, '}');
        any = 1;
    }
    for (size_t i = 0; i < msg->ncalls; i++) {
        const chat_tool_call *c = &msg->calls[i];
        char e[128];
        json_value *in = c->arguments.len ? json_parse(c->arguments.p, c->arguments.len, e, sizeof e) : NULL;
        jbuf_puts(out, any ? ",{\"type\":\"tool_use\",\"id\":" : "{\"type\":\"tool_use\",\"id\":");
        any = 1;
        json_put_str_nl(out, c->id.p ? c->id.p : "", c->id.len);
        jbuf_puts(out, ",\"name\":");
        json_put_str_nl(out, c->name.p ? c->name.p : "", c->name.len);
        jbuf_puts(out, ",\"input\":");
        if (in) json_put_nl_dump(out, in, -1);   /* json::parse(arguments), {} when it throws */
        else jbuf_puts(out, "{}");
        jbuf_putc(out, '}');
        json_free(in);
    }
}
