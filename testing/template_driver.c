/*
 * template_driver.c -- renders many conversations with one chat template, for
 * testing/oracle_templates.py (until `bankml chat-template` is wired in).
 *
 *   template_driver TEMPLATE.jinja CASES.json
 *
 * CASES.json: {"bos_token": "<s>", "eos_token": "</s>", "add_bos": true,
 *              "add_eos": false, "now": 1700000000,
 *              "cases": [{"messages": [...], "add_generation_prompt": true,
 *                         "chat_template_kwargs": {...}, "tools": [...]}, ...]}
 * Prints one JSON object per case and line: {"ok": true, "prompt": "..."} or
 * {"ok": false, "error": "..."}.
 *
 *   template_driver --caps TEMPLATE.jinja...
 *
 * Prints each template's template_caps as kit_caps.cpp prints b11669's: a
 * frame "OK <n>\n" + lines name=0|1 in the names' sorted order, or
 * "ERR <n>\n" + the reason, each frame ending in a newline. With
 * KIT_CAPS_THINKING set, a last line supports_enable_thinking=0|1 (bankml's
 * template_thinking_default, beside b11669's
 * common_chat_templates_support_enable_thinking in kit_caps.cpp).
 *
 * Build (with every .c file of src/text, as testing/oracle_templates.py does):
 *   gcc -std=gnu11 -D_GNU_SOURCE -Iinclude -Isrc -O2 -o template_driver \
 *       testing/template_driver.c src/text/EACH.c src/file/gguf.c src/base/json.c \
 *       src/base/base.c -lm
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "text/template.h"

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *p = malloc(cap);
    size_t r;
    while (p && (r = fread(p + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) {
            char *q = realloc(p, cap * 2);
            if (!q) { free(p); p = NULL; break; }
            p = q;
            cap *= 2;
        }
    }
    fclose(f);
    if (p) { p[n] = 0; *len = n; }
    return p;
}

static const char *str_or(const json_value *v, const char *d) {
    const char *s;
    size_t n;
    return json_as_str(v, &s, &n) ? s : d;
}

static int caps_main(int argc, char **argv) {
    for (int i = 2; i < argc; i++) {
        size_t tl;
        char *tmpl = slurp(argv[i], &tl), err[512], out[512];
        tmpl_caps c;
        if (!tmpl) {
            fprintf(stderr, "cannot read %s\n", argv[i]);
            return 2;
        }
        if (template_caps(tmpl, tl, &c, err, sizeof err) == 0) {
            int n = snprintf(out, sizeof out,
                             "supports_object_arguments=%d\nsupports_parallel_tool_calls=%d\n"
                             "supports_preserve_reasoning=%d\nsupports_reasoning_effort=%d\n"
                             "supports_string_content=%d\nsupports_system_role=%d\n"
                             "supports_tool_calls=%d\nsupports_tools=%d\nsupports_typed_content=%d\n",
                             c.supports_object_arguments, c.supports_parallel_tool_calls,
                             c.supports_preserve_reasoning, c.supports_reasoning_effort,
                             c.supports_string_content, c.supports_system_role, c.supports_tool_calls,
                             c.supports_tools, c.supports_typed_content);
            if (getenv("KIT_CAPS_THINKING") && n > 0 && (size_t)n < sizeof out)
                n += snprintf(out + n, sizeof out - (size_t)n, "supports_enable_thinking=%d\n",
                              template_thinking_default(tmpl, tl));
            printf("OK %d\n%s\n", n, out);
        } else {
            printf("ERR %zu\n%s\n", strlen(err), err);
        }
        free(tmpl);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "--caps")) return caps_main(argc, argv);
    if (argc != 3) {
        fprintf(stderr, "usage: %s TEMPLATE CASES.json\n", argv[0]);
        return 2;
    }
    size_t tl, cl;
    char *tmpl = slurp(argv[1], &tl), *cases = slurp(argv[2], &cl);
    if (!tmpl || !cases) {
        fprintf(stderr, "cannot read input files\n");
        return 2;
    }
    char err[512];
    json_value *root = json_parse(cases, cl, err, sizeof err);
    if (!root) {
        fprintf(stderr, "cases: %s\n", err);
        return 2;
    }
    template_opts base;
    template_opts_init(&base);
    base.bos_token = str_or(json_get(root, "bos_token"), "");
    base.eos_token = str_or(json_get(root, "eos_token"), "");
    json_is_bool(json_get(root, "add_bos"), &base.add_bos);
    json_is_bool(json_get(root, "add_eos"), &base.add_eos);
    int64_t now;
    if (json_as_i64(json_get(root, "now"), &now)) base.now = now;
    const json_value *list = json_get(root, "cases");
    jbuf line, out;
    jbuf_init(&line);
    jbuf_init(&out);
    for (size_t i = 0; list && i < list->n; i++) {
        const json_value *c = list->items[i];
        template_opts o = base;
        json_is_bool(json_get(c, "add_generation_prompt"), &o.add_generation_prompt);
        o.kwargs = json_get(c, "chat_template_kwargs");
        o.tools = json_get(c, "tools");
        jbuf_reset(&out);
        jbuf_reset(&line);
        if (template_render(tmpl, tl, json_get(c, "messages"), &o, &out, err, sizeof err) == 0) {
            jbuf_puts(&line, "{\"ok\": true, \"prompt\": ");
            json_put_str(&line, out.p ? out.p : "", out.len);
        } else {
            jbuf_puts(&line, "{\"ok\": false, \"error\": ");
            json_put_cstr(&line, err);
        }
        jbuf_puts(&line, "}\n");
        fwrite(line.p, 1, line.len, stdout);
    }
    jbuf_free(&line);
    jbuf_free(&out);
    json_free(root);
    free(tmpl);
    free(cases);
    return 0;
}
