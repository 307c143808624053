/*
 * ollama_chat.c -- tools and think on Ollama's /api/chat (and think on
 * /api/generate) through llama-server b11669's chat layer (llama_chat.c):
 * the request becomes the /v1/chat/completions body llama-server would get
 * (messages in OpenAI's shape, tools, chat_template_kwargs.enable_thinking),
 * the template renders it with the tools, the template's parser and lazy
 * grammar run, and the answer parsed after every token is written in
 * Ollama's shape (message.content, message.thinking, message.tool_calls with
 * arguments as an object, as Go's encoding/json writes a map). See
 * ollama_int.h and docs/modules/ollama.md.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/ollama_int.h"
#include "base/base.h"

void ol_chat_init(ol_chat *oc)
{
    memset(oc, 0, sizeof *oc);
    oc->think = -1;
    llama_chat_init(&oc->layer);
}

void ol_chat_free(ol_chat *oc)
{
    llama_chat_free(&oc->layer);
    json_free(oc->doc);
    memset(oc, 0, sizeof *oc);
}

int ol_read_think(const json_value *body, int *think, char *err, size_t errlen)
{
    const json_value *th = json_get(body, "think");
    *think = -1;
    if (!th || th->type == JSON_NULL) return 0;   /* Go: a null pointer, not set */
    if (th->type == JSON_TRUE || th->type == JSON_FALSE) {
        *think = th->type == JSON_TRUE;
        return 0;
    }
    if (th->type == JSON_STRING) {
        int lvl = (th->len == 4 && !memcmp(th->str, "high", 4)) || (th->len == 6 && !memcmp(th->str, "medium", 6)) ||
                  (th->len == 3 && !memcmp(th->str, "low", 3));
        if (!lvl) {
            char q[300];
            ollama_go_quote(th->str, q, sizeof q);
            bk_err(err, errlen, "invalid think value: %s (must be \"high\", \"medium\", \"low\", true, or false)", q);
            return -1;
        }
        /* Ollama v0.13.3 takes a level only for its harmony (gpt-oss) models, whose prompt and parser are Ollama's
         * own; every other model gets this 400, and bankml's GPT-OSS chat layer is not Ollama's renderer */
        bk_err(err, errlen, "think value \"%.*s\" is not supported for this model", (int)th->len, th->str);
        return -1;
    }
    bk_err(err, errlen, "think must be a boolean or string (\"high\", \"medium\", \"low\", true, or false)");
    return -1;
}

int ol_chat_begin(ol_chat *oc, const json_value *body, const json_value *msgs, int generate, int think, char *err,
                  size_t errlen)
{
    const json_value *tools = generate ? NULL : json_get(body, "tools");
    if (tools && tools->type == JSON_NULL) tools = NULL;
    if (tools && tools->type == JSON_ARRAY && !tools->n) tools = NULL;   /* Go: len(req.Tools) == 0 */
    oc->think = think;
    if (!tools && think < 0) return 0;
    /* the llama-server request this one stands for */
    jbuf b;
    jbuf_init(&b);
    jbuf_puts(&b, "{\"messages\":");
    json_put_value(&b, msgs);
    if (tools) {
        jbuf_puts(&b, ",\"tools\":");
        json_put_value(&b, tools);
    }
    if (think >= 0) jbuf_printf(&b, ",\"chat_template_kwargs\":{\"enable_thinking\":%s}", think ? "true" : "false");
    jbuf_putc(&b, '}');
    char perr[256];
    oc->doc = json_parse(b.p, b.len, perr, sizeof perr);
    jbuf_free(&b);
    if (!oc->doc) {
        bk_err(err, errlen, "out of memory");
        return -1;
    }
    int status;
    if (llama_read_pre(oc->doc, 1, &oc->pre, &status, err, errlen) != 0) return -1;
    oc->on = 1;
    return 0;
}

int ol_chat_prepare(ol_chat *oc, engine_model *m, const json_value *use, const char *tag, engine_request *rq,
                    jbuf *prompt, char *err, size_t errlen)
{
    int status;
    if (!engine_model_jinja(m)) {
        bk_err(err, errlen, "tools and think need the model's Jinja chat template, and this server runs --no-jinja");
        return -1;
    }
    oc->pre.messages = use;
    if (llama_chat_prepare(m, NULL, oc->doc, &oc->pre, rq, &oc->layer, &status, err, errlen) != 0) return -1;
    if (oc->think == 1 && !(oc->layer.active && oc->layer.p.thinking_end_tag)) {
        /* Ollama's capability check; bankml's measure is the template's parser having thinking tags */
        char q[600];
        ollama_go_quote(tag, q, sizeof q);
        bk_err(err, errlen, "%s does not support thinking", q);
        return -1;
    }
    if (oc->pre.has_tools && !oc->layer.active) {
        bk_err(err, errlen, "tools: this template has no chat parser bankml runs, so tool calls in the answer "
                            "would not be read as llama-server reads them; send the request without tools");
        return -1;
    }
    return engine_render_chat(m, use, &oc->pre.topts, prompt, err, errlen);
}

/* A float64 as Go's encoding/json writes it: the shortest digits that read
 * back, in plain notation unless |v| < 1e-6 or >= 1e21 (then 1.5e-07
 * becomes 1.5e-7, 3.4028234663852886e+38 stays). */
void ol_put_float64(jbuf *b, double v)
{
    char e[40], digits[24];
    int prec = 1, exp10;
    if (v == 0) {
        jbuf_puts(b, signbit(v) ? "-0" : "0");
        return;
    }
    for (; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, v);
        if (strtod(e, NULL) == v) break;
    }
    snprintf(e, sizeof e, "%.*e", prec - 1, v);
    const char *p = e + (v < 0), *x = strchr(e, 'e');
    size_t nd = 0;
    for (const char *q = p; x && q < x && nd + 1 < sizeof digits; q++)
        if (*q != '.') digits[nd++] = *q;
    digits[nd] = 0;
    exp10 = x ? atoi(x + 1) : 0;
    double a = fabs(v);
    if (v < 0) jbuf_putc(b, '-');
    if (a < 1e-6 || a >= 1e21) {
        /* strconv's 'e' writes two exponent digits at least; encoding/json drops the 0 of e-0N */
        jbuf_printf(b, "%c%s%se%c%s%d", digits[0], nd > 1 ? "." : "", digits + 1, exp10 < 0 ? '-' : '+',
                    exp10 >= 0 && exp10 < 10 ? "0" : "", exp10 < 0 ? -exp10 : exp10);
    } else if (exp10 >= 0) {
        for (int i = 0; i <= exp10; i++) jbuf_putc(b, i < (int)nd ? digits[i] : '0');
        if ((int)nd > exp10 + 1) jbuf_printf(b, ".%s", digits + exp10 + 1);
    } else {
        jbuf_puts(b, "0.");
        for (int i = 0; i < -exp10 - 1; i++) jbuf_putc(b, '0');
        jbuf_puts(b, digits);
    }
}

/* Go's sort.Strings order of an object's keys: bytes compared, a prefix first. */
static int key_less(const json_value *o, size_t a, size_t b)
{
    size_t la = o->key_lens[a], lb = o->key_lens[b], n = la < lb ? la : lb;
    int c = memcmp(o->keys[a], o->keys[b], n);
    return c < 0 || (c == 0 && la < lb);
}

/* A JSON value as Go's encoding/json writes the `any` it decodes to: objects as maps (keys sorted, a repeated
 * key's last value), numbers as float64, strings with Go's escapes. */
static int put_go_value(jbuf *b, const json_value *v, int depth)
{
    if (depth > JSON_MAX_DEPTH) return -1;
    switch (v->type) {
    case JSON_NULL: jbuf_puts(b, "null"); return 0;
    case JSON_TRUE: jbuf_puts(b, "true"); return 0;
    case JSON_FALSE: jbuf_puts(b, "false"); return 0;
    case JSON_NUMBER: {
        double d;
        if (!json_as_double(v, &d)) return -1;
        ol_put_float64(b, d);
        return 0;
    }
    case JSON_STRING: json_put_str_go(b, v->str, v->len); return 0;
    case JSON_ARRAY:
        jbuf_putc(b, '[');
        for (size_t i = 0; i < v->n; i++) {
            if (i) jbuf_putc(b, ',');
            if (put_go_value(b, v->items[i], depth + 1) != 0) return -1;
        }
        jbuf_putc(b, ']');
        return 0;
    case JSON_OBJECT: break;
    }
    size_t *ord = malloc((v->n ? v->n : 1) * sizeof *ord), k = 0;
    if (!ord) return -1;
    for (size_t i = 0; i < v->n; i++) {
        int later = 0;   /* a key seen again later: the map keeps the last */
        for (size_t j = i + 1; j < v->n && !later; j++)
            later = v->key_lens[i] == v->key_lens[j] && !memcmp(v->keys[i], v->keys[j], v->key_lens[i]);
        if (later) continue;
        size_t at = k++;
        while (at > 0 && key_less(v, i, ord[at - 1])) {
            ord[at] = ord[at - 1];
            at--;
        }
        ord[at] = i;
    }
    int rc = 0;
    jbuf_putc(b, '{');
    for (size_t i = 0; i < k && rc == 0; i++) {
        if (i) jbuf_putc(b, ',');
        json_put_str_go(b, v->keys[ord[i]], v->key_lens[ord[i]]);
        jbuf_putc(b, ':');
        rc = put_go_value(b, v->items[ord[i]], depth + 1);
    }
    jbuf_putc(b, '}');
    free(ord);
    return rc;
}

/* Ollama's toolCallId: "call_" and 8 of [a-z0-9]. */
static void call_id(char out[14])
{
    static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    char r[40];
    llama_random_id(r, sizeof r);   /* random letters and digits: folded onto Ollama's alphabet */
    memcpy(out, "call_", 5);
    for (int i = 0; i < 8; i++) out[5 + i] = abc[((unsigned char)r[i] * 7u + (unsigned char)r[i + 8]) % 36u];
    out[13] = 0;
}

/* One call as api.ToolCall: {"id","function":{"index","name","arguments"}}. */
static int put_call(jbuf *b, const chat_tool_call *t, size_t index, char *err, size_t errlen)
{
    char perr[256], id[14];
    json_value *args = json_parse(t->arguments.p ? t->arguments.p : "", t->arguments.len, perr, sizeof perr);
    if (!args || args->type != JSON_OBJECT) {
        bk_err(err, errlen, "the answer's tool call %zu (%.*s) has arguments that are not a JSON object (%.*s): "
               "Ollama's tool_calls carry an object", index, (int)(t->name.len > 100 ? 100 : t->name.len),
               t->name.p ? t->name.p : "", (int)(t->arguments.len > 100 ? 100 : t->arguments.len),
               t->arguments.p ? t->arguments.p : "");
        json_free(args);
        return -1;
    }
    call_id(id);
    jbuf_printf(b, "{\"id\":\"%s\",\"function\":{\"index\":%zu,\"name\":", id, index);
    json_put_str_go(b, t->name.p ? t->name.p : "", t->name.len);
    jbuf_puts(b, ",\"arguments\":");
    int rc = put_go_value(b, args, 0);
    jbuf_puts(b, "}}");
    json_free(args);
    if (rc != 0) bk_err(err, errlen, "out of memory writing a tool call");
    return rc;
}

int ol_chat_update(ol_chat *oc, const char *raw, size_t n, int partial, ol_chat_out *out, char *err, size_t errlen)
{
    chat_msg_delta *d = NULL;
    size_t nd = 0;
    if (llama_chat_update(&oc->layer, raw, n, partial, &d, &nd, err, errlen) != 0) return -1;
    for (size_t i = 0; i < nd; i++) {
        jbuf_put(&out->content, d[i].content_delta.p ? d[i].content_delta.p : "", d[i].content_delta.len);
        jbuf_put(&out->thinking, d[i].reasoning_delta.p ? d[i].reasoning_delta.p : "", d[i].reasoning_delta.len);
    }
    chat_msg_deltas_free(d, nd);
    const chat_msg *m = &oc->layer.msg;
    /* Ollama sends a call once it is whole: while the answer grows, a call is whole when the next one began */
    size_t whole = partial ? (m->ncalls ? m->ncalls - 1 : 0) : m->ncalls;
    for (; oc->calls_sent < whole; oc->calls_sent++) {
        if (out->calls.len) jbuf_putc(&out->calls, ',');
        if (put_call(&out->calls, &m->calls[oc->calls_sent], oc->calls_sent, err, errlen) != 0) return -1;
        out->n_calls++;
    }
    if (!partial && !oc->streamed && !m->content.len && !m->reasoning.len && !m->ncalls)
        jbuf_put(&out->content, raw ? raw : "", n);   /* an empty parse: llama-server answers the raw text */
    return 0;
}

void ol_chat_out_init(ol_chat_out *o)
{
    memset(o, 0, sizeof *o);
    jbuf_init(&o->content);
    jbuf_init(&o->thinking);
    jbuf_init(&o->calls);
}

void ol_chat_out_reset(ol_chat_out *o)
{
    jbuf_reset(&o->content);
    jbuf_reset(&o->thinking);
    jbuf_reset(&o->calls);
    o->n_calls = 0;
}

void ol_chat_out_free(ol_chat_out *o)
{
    jbuf_free(&o->content);
    jbuf_free(&o->thinking);
    jbuf_free(&o->calls);
}
