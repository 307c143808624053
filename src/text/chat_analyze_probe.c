/*
 * chat_analyze_probe.c -- the probes of b11669's template analysis: a
 * template_params rendered as autoparser::apply_template renders it
 * (common_chat_template_direct_apply with the analysis' inputs), and
 * compare_variants, which renders two of them and splits the difference.
 *
 * The globals are the messages (string content turned into one text part
 * when the template takes only typed content: messages_inp_normalizer),
 * bos_token, eos_token, enable_thinking, tools when the probe has them, and
 * add_generation_prompt only when true; nothing else (no datetime, no
 * preserve_reasoning). A render that fails is b11669's ERR_TMPL: the
 * comparison fails and the caller skips its step.
 */
#include "text/chat_analyze_int.h"

#include <stdio.h>
#include <string.h>

static const char cap_schema[] =
    "{\"type\":\"object\",\"properties\":{\"" ARG_FIRST "\":{\"type\":\"string\",\"description\":\"First argument\"},"
    "\"" ARG_SECOND "\":{\"type\":\"string\",\"description\":\"Second argument\"}},\"required\":[]}";

static void cap_put_tools(jbuf *b) {
    jbuf_printf(b, "[{\"type\":\"function\",\"function\":{\"name\":\"" FUN_FIRST "\",\"description\":\"Test function foo\","
                   "\"parameters\":%s}},{\"type\":\"function\",\"function\":{\"name\":\"" FUN_SECOND
                   "\",\"description\":\"Test function bar\",\"parameters\":%s}}]",
                cap_schema, cap_schema);
}

/* messages_inp_normalizer: string content becomes one text part when only typed content works */
static void cap_put_messages(ca_ctx *C, jbuf *b, const char *ms) {
    int only_typed = !C->caps.supports_string_content && C->caps.supports_typed_content;
    if (!only_typed) { jbuf_puts(b, ms); return; }
    char err[128];
    json_value *j = json_parse(ms, strlen(ms), err, sizeof err);
    if (!j) ca_throw(C, "probe messages: %s", err);
    jbuf_putc(b, '[');
    for (size_t i = 0; i < j->n; i++) {
        const json_value *m = j->items[i];
        jbuf_puts(b, i ? ",{" : "{");
        for (size_t k = 0; k < m->n; k++) {
            if (k) jbuf_putc(b, ',');
            json_put_str(b, m->keys[k], m->key_lens[k]);
            jbuf_putc(b, ':');
            if (!strcmp(m->keys[k], "content") && m->items[k]->type == JSON_STRING) {
                jbuf_puts(b, "[{\"type\":\"text\",\"text\":");
                json_put_str(b, m->items[k]->str, m->items[k]->len);
                jbuf_puts(b, "}]");
            } else {
                json_put_value(b, m->items[k]);
            }
        }
        jbuf_putc(b, '}');
    }
    jbuf_putc(b, ']');
    json_free(j);
}

/* autoparser::apply_template: the output, or ok = 0 where b11669 gets ERR_TMPL */
static int cap_render(ca_ctx *C, const ca_params *p, ca_str *out) {
    jbuf g, o;
    jbuf_init(&g);
    jbuf_init(&o);
    jbuf_puts(&g, "{\"messages\":");
    cap_put_messages(C, &g, p->messages);
    jbuf_puts(&g, ",\"bos_token\":");
    json_put_cstr(&g, C->bos);
    jbuf_puts(&g, ",\"eos_token\":");
    json_put_cstr(&g, C->eos);
    jbuf_printf(&g, ",\"enable_thinking\":%s", p->enable_thinking ? "true" : "false");
    if (p->tools) {
        jbuf_puts(&g, ",\"tools\":");
        cap_put_tools(&g);
    }
    if (p->add_generation_prompt) jbuf_puts(&g, ",\"add_generation_prompt\":true");
    jbuf_putc(&g, '}');
    char err[256];
    json_value *j = g.oom ? NULL : json_parse(g.p, g.len, err, sizeof err);
    jbuf_free(&g);
    if (!j) ca_throw(C, "out of memory");
    int rc = template_render_globals(C->tmpl, C->tmpl_len, j, 0, &o, err, sizeof err);
    json_free(j);
    if (rc == 0 && !o.oom) *out = ca_s(C, o.p ? o.p : "", o.len);
    jbuf_free(&o);
    return rc == 0 && !o.oom;
}

/* compare_variants: A, and B = A with other messages (or enable_thinking) */
ca_cmp ca_compare(ca_ctx *C, const ca_params *a, const char *b_messages, int b_thinking) {
    ca_params b = *a;
    if (b_messages) b.messages = b_messages;
    if (b_thinking >= 0) b.enable_thinking = b_thinking;
    ca_cmp r;
    memset(&r, 0, sizeof r);
    if (!cap_render(C, a, &r.a) || !cap_render(C, &b, &r.b)) return r;
    r.ok = 1;
    r.diff = ca_diff_split(C, r.a, r.b);
    return r;
}
