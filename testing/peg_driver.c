/*
 * peg_driver.c -- bankml's side of testing/oracle_peg.py: an arena's text
 * form read with peg_load (src/text/peg.c), written back with peg_save, its
 * grammar (src/sampling/peg_grammar.c, then read by src/sampling/grammar.c),
 * and answers parsed with chat_peg_parse (src/text/chat_peg.c).
 *
 * Input frames "<decimal length>\n<JSON>", each
 *   {"parser": "<arena text>" ("" for none), "lazy": bool, "format": "peg-native",
 *    "generation_prompt": "...", "answers": [...], "prefixes": bool}
 * Output, one frame per input: "OK <n>\n<JSON>\n" with
 *   {"save": text | {"error": reason}, "grammar": text | {"error"|"limit": reason},
 *    "grammar_ok": "" or grammar.c's refusal, "parses": [{"final", "partial", "prefixes"}]}
 * where a message is testing/kit_chat.cpp's shape, {"error": b11669's text} or
 * {"limit": bankml's reason}; or "PARSE <n>\n<reason>\n" for a bad frame.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "sampling/grammar.h"
#include "sampling/json_schema.h"
#include "sampling/peg_grammar.h"
#include "text/chat_peg.h"
#include "text/peg.h"

static void put(const char *tag, const char *s, size_t n)
{
    printf("%s %zu\n", tag, n);
    fwrite(s, 1, n, stdout);
    putchar('\n');
}

static void err_obj(jbuf *o, const char *key, const char *msg)
{
    jbuf_printf(o, "{\"%s\":", key);
    json_put_cstr_nl(o, msg);
    jbuf_putc(o, '}');
}

static void parse_one(jbuf *o, const peg_arena *a, chat_format f, const char *gp, size_t gpn, const char *t, size_t n, int partial)
{
    chat_msg m;
    char err[512];
    int rc = chat_peg_parse(a, f, gp, gpn, t, n, partial, &m, err, sizeof err);
    if (rc == CHAT_PEG_OK) chat_msg_put_json(&m, o);
    else err_obj(o, rc == CHAT_PEG_NO_MATCH ? "error" : "limit", err);
    chat_msg_free(&m);
}

static void put_stream(jbuf *o, const peg_arena *a, chat_format f, const char *gp, size_t gpn, const char *t, size_t n)
{
    chat_msg prev, cur;
    char err[512];
    jbuf derr;
    jbuf_init(&derr);
    chat_msg_init(&prev);
    jbuf_puts(o, "[");
    for (size_t k = 1; k <= n + 1; k++) {
        int fin = k == n + 1;
        if (k > 1) jbuf_putc(o, ',');
        int rc = chat_peg_parse(a, f, gp, gpn, t, fin ? n : k, !fin, &cur, err, sizeof err);
        if (rc != CHAT_PEG_OK) {
            err_obj(o, rc == CHAT_PEG_NO_MATCH ? "error" : "limit", err);
            chat_msg_free(&cur);
            continue;
        }
        chat_msg_delta *d;
        int nd = chat_msg_diffs(&prev, &cur, &d, &derr);
        if (nd < 0) {
            jbuf_puts(o, "{\"diff_error\":");
            json_put_str_nl(o, derr.p ? derr.p : "", derr.len);
            jbuf_putc(o, '}');
            chat_msg_free(&cur);
            continue;
        }
        jbuf_putc(o, '[');
        for (int i = 0; i < nd; i++) {
            if (i) jbuf_putc(o, ',');
            jbuf_puts(o, "{\"reasoning_content_delta\":");
            json_put_str_nl(o, d[i].reasoning_delta.p ? d[i].reasoning_delta.p : "", d[i].reasoning_delta.len);
            jbuf_puts(o, ",\"content_delta\":");
            json_put_str_nl(o, d[i].content_delta.p ? d[i].content_delta.p : "", d[i].content_delta.len);
            jbuf_printf(o, ",\"tool_call_index\":%lld,\"name\":", d[i].tool_index == PEG_INVALID ? -1LL : (long long)d[i].tool_index);
            json_put_str_nl(o, d[i].call.name.p ? d[i].call.name.p : "", d[i].call.name.len);
            jbuf_puts(o, ",\"arguments\":");
            json_put_str_nl(o, d[i].call.arguments.p ? d[i].call.arguments.p : "", d[i].call.arguments.len);
            jbuf_puts(o, ",\"id\":");
            json_put_str_nl(o, d[i].call.id.p ? d[i].call.id.p : "", d[i].call.id.len);
            jbuf_putc(o, '}');
        }
        jbuf_putc(o, ']');
        chat_msg_deltas_free(d, (size_t)nd);
        chat_msg_free(&prev);
        prev = cur;
    }
    jbuf_putc(o, ']');
    chat_msg_free(&prev);
    jbuf_free(&derr);
}

static void run(const json_value *req, jbuf *o)
{
    const json_value *pv = json_get(req, "parser"), *fv = json_get(req, "format"), *gv = json_get(req, "generation_prompt");
    const json_value *av = json_get(req, "answers");
    int lazy = 0, prefixes = 0;
    json_is_bool(json_get(req, "lazy"), &lazy);
    json_is_bool(json_get(req, "prefixes"), &prefixes);
    chat_format f = CHAT_FORMAT_CONTENT_ONLY;
    if (fv && fv->type == JSON_STRING) chat_format_from_name(fv->str, &f);
    const char *gp = gv && gv->type == JSON_STRING ? gv->str : "";
    size_t gpn = gv && gv->type == JSON_STRING ? gv->len : 0;
    peg_arena a;
    char err[512];
    int loaded = 0;
    peg_init(&a);
    jbuf_puts(o, "{\"save\":");
    if (pv && pv->type == JSON_STRING && pv->len) {
        if (peg_load(&a, pv->str, pv->len, err, sizeof err)) {
            err_obj(o, "error", err);
        } else {
            jbuf s;
            jbuf_init(&s);
            peg_save(&a, &s);
            json_put_str_nl(o, s.p ? s.p : "", s.len);
            jbuf_free(&s);
            loaded = 1;
        }
    } else {
        jbuf_puts(o, "\"\"");
    }
    jbuf_puts(o, ",\"grammar\":");
    const char *gr_err = "";
    char gbuf[512];
    if (loaded) {
        char *g = NULL;
        size_t gl = 0;
        int rc = peg_build_grammar(&a, lazy, &g, &gl);
        if (rc == JSON_SCHEMA_OK) {
            json_put_str_nl(o, g ? g : "", gl);
            gr_grammar *gg = gr_parse(g ? g : "", gl, NULL, gbuf, sizeof gbuf);
            if (gg) gr_free(gg);
            else gr_err = gbuf;
        } else {
            err_obj(o, rc == JSON_SCHEMA_REFUSED ? "error" : "limit", g ? g : "out of memory");
        }
        free(g);
    } else {
        jbuf_puts(o, "\"\"");
    }
    jbuf_puts(o, ",\"grammar_ok\":");
    json_put_cstr_nl(o, gr_err);
    jbuf_puts(o, ",\"parses\":[");
    for (size_t i = 0; av && av->type == JSON_ARRAY && i < av->n; i++) {
        const json_value *t = av->items[i];
        if (i) jbuf_putc(o, ',');
        jbuf_puts(o, "{\"final\":");
        parse_one(o, &a, f, gp, gpn, t->str, t->len, 0);
        jbuf_puts(o, ",\"partial\":");
        parse_one(o, &a, f, gp, gpn, t->str, t->len, 1);
        if (prefixes) {
            jbuf_puts(o, ",\"prefixes\":[");
            for (size_t k = 0; k < t->len; k++) {
                if (k) jbuf_putc(o, ',');
                parse_one(o, &a, f, gp, gpn, t->str, k, 1);
            }
            jbuf_puts(o, "],\"stream\":");
            put_stream(o, &a, f, gp, gpn, t->str, t->len);
        }
        jbuf_putc(o, '}');
    }
    jbuf_puts(o, "]}");
    peg_free(&a);
}

int main(void)
{
    for (;;) {
        size_t n = 0;
        int c, digits = 0;
        while ((c = getchar()) != EOF && c >= '0' && c <= '9') { n = n * 10 + (size_t)(c - '0'); digits++; }
        if (c == EOF && digits == 0) break;
        if (c != '\n' || digits == 0) { fprintf(stderr, "peg-driver: bad frame\n"); return 2; }
        char *text = malloc(n + 1), err[256];
        if (!text) return 2;
        if (n && fread(text, 1, n, stdin) != n) { fprintf(stderr, "peg-driver: short frame\n"); return 2; }
        json_value *v = json_parse(text, n, err, sizeof err);
        free(text);
        if (!v) { put("PARSE", err, strlen(err)); fflush(stdout); continue; }
        jbuf o;
        jbuf_init(&o);
        run(v, &o);
        json_free(v);
        put("OK", o.p ? o.p : "", o.len);
        jbuf_free(&o);
        fflush(stdout);
    }
    return 0;
}
