/*
 * chat_analyze_driver.c -- bankml's side of testing/oracle_chat_analyze.py:
 * src/text/chat_analyze.c's analysis of templates, in the frames
 * testing/kit_chat_analyze.cpp answers in.
 *
 * Input on stdin: frames "<decimal length>\n<that many bytes of JSON>", each
 * {"template": text, "caps": {the nine jinja::caps booleans}, "bos": s,
 * "eos": s}. Output per frame: "OK <n>\n<analysis JSON>\n" or
 * "ERR <n>\n{"caps":...,"specialized":...,"error":reason}\n".
 */
#include "base/json.h"
#include "text/chat_analyze.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put(const char *tag, const jbuf *b) {
    printf("%s %zu\n", tag, b->len);
    fwrite(b->p, 1, b->len, stdout);
    putchar('\n');
    fflush(stdout);
}

static int flag(const json_value *caps, const char *k) {
    int v = 0;
    json_is_bool(json_get(caps, k), &v);
    return v;
}

int main(void) {
    for (;;) {
        size_t n = 0;
        int c, digits = 0;
        while ((c = getchar()) != EOF && c >= '0' && c <= '9') { n = n * 10 + (size_t)(c - '0'); digits++; }
        if (c == EOF && digits == 0) break;
        if (c != '\n' || digits == 0) { fprintf(stderr, "chat-analyze-driver: bad frame\n"); return 2; }
        char *text = malloc(n + 1);
        if (!text || fread(text, 1, n, stdin) != n) { fprintf(stderr, "chat-analyze-driver: short frame\n"); return 2; }
        char err[512];
        json_value *j = json_parse(text, n, err, sizeof err);
        if (!j) { fprintf(stderr, "chat-analyze-driver: %s\n", err); return 2; }
        const json_value *t = json_get(j, "template"), *cj = json_get(j, "caps");
        const char *bos = "", *eos = "";
        size_t l;
        json_as_str(json_get(j, "bos"), &bos, &l);
        json_as_str(json_get(j, "eos"), &eos, &l);
        tmpl_caps caps = {flag(cj, "supports_tools"), flag(cj, "supports_tool_calls"), flag(cj, "supports_system_role"),
                          flag(cj, "supports_parallel_tool_calls"), flag(cj, "supports_preserve_reasoning"),
                          flag(cj, "supports_reasoning_effort"), flag(cj, "supports_string_content"),
                          flag(cj, "supports_typed_content"), flag(cj, "supports_object_arguments")};
        ca_specialized spec = chat_specialized(t->str, t->len);
        chat_analysis a;
        jbuf b;
        jbuf_init(&b);
        if (chat_analyze(t->str, t->len, &caps, bos, eos, &a, err, sizeof err) == 0) {
            chat_analysis_json(&a, spec, &b);
            chat_analysis_free(&a);
            put("OK", &b);
        } else {
            chat_analysis z;
            memset(&z, 0, sizeof z);
            z.jinja_caps = caps;
            chat_analysis_json(&z, spec, &b);
            b.len = b.len ? b.len - 1 : 0;
            jbuf_puts(&b, ",\"error\":");
            json_put_cstr(&b, err);
            jbuf_putc(&b, '}');
            put("ERR", &b);
        }
        jbuf_free(&b);
        json_free(j);
        free(text);
    }
    return 0;
}
