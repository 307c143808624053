/*
 * legacy_driver.c -- llama-server's built-in (non-Jinja) chat formats, case by
 * case, for testing/oracle_legacy_templates.py. One source, two builds that
 * read the same input and print the same shapes:
 *
 *   build/legacy-driver      bankml's src/text/template_legacy.c
 *   build/kit-chat-legacy    (-DUSE_LLAMA) llama.cpp b11669's own
 *                            llama_chat_apply_template and
 *                            llama_chat_builtin_templates in libllama.so, run
 *                            under the oracle kit's sid-run
 *
 * Input on stdin, a sequence of:
 *   "L\n"                       prints the built-in names, one a line, then "END"
 *   "C TLEN ADD_ASS N\n" TEMPLATE then N times "RLEN CLEN\n" ROLE CONTENT
 *                               prints "R RES LEN\n" then LEN bytes of the
 *                               rendering and "\n" (RES -1, LEN 0: refused)
 * Template, roles and contents are handed over as C strings, as llama.cpp takes them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef USE_LLAMA
#include "llama.h"
#else
#include "base/json.h"
#include "text/template.h"
#endif

static char *read_n(size_t n)
{
    char *p = malloc(n + 1);
    if (!p || fread(p, 1, n, stdin) != n) {
        fprintf(stderr, "legacy_driver: short input\n");
        exit(2);
    }
    p[n] = 0;
    return p;
}

static void list_names(void)
{
#ifdef USE_LLAMA
    int32_t n = llama_chat_builtin_templates(NULL, 0);
    const char **v = calloc((size_t)n, sizeof *v);
    llama_chat_builtin_templates(v, (size_t)n);
    for (int32_t i = 0; i < n; i++) printf("%s\n", v[i]);
    free(v);
#else
    const char *const *v;
    size_t n = template_legacy_builtins(&v);
    for (size_t i = 0; i < n; i++) printf("%s\n", v[i]);
#endif
    printf("END\n");
}

static void one_case(size_t tlen, int add_ass, size_t n)
{
    char *tmpl = read_n(tlen);
    char **roles = calloc(n + 1, sizeof *roles), **contents = calloc(n + 1, sizeof *contents);
    for (size_t i = 0; i < n; i++) {
        size_t rl, cl;
        if (scanf("%zu %zu", &rl, &cl) != 2 || getchar() != '\n') exit(2);
        roles[i] = read_n(rl);
        contents[i] = read_n(cl);
    }
#ifdef USE_LLAMA
    llama_chat_message *ms = calloc(n + 1, sizeof *ms);
    for (size_t i = 0; i < n; i++) ms[i] = (llama_chat_message){roles[i], contents[i]};
    int32_t res = llama_chat_apply_template(tmpl, ms, n, add_ass, NULL, 0);
    char *buf = calloc(res > 0 ? (size_t)res + 1 : 1, 1);
    if (res > 0) llama_chat_apply_template(tmpl, ms, n, add_ass, buf, res + 1);
    size_t len = res > 0 ? (size_t)res : 0;
    free(ms);
#else
    template_legacy_msg *ms = calloc(n + 1, sizeof *ms);
    for (size_t i = 0; i < n; i++) ms[i] = (template_legacy_msg){roles[i], contents[i]};
    jbuf out;
    jbuf_init(&out);
    int fmt = template_legacy_detect(tmpl);
    int res = fmt >= 0 && template_legacy_apply(fmt, ms, n, add_ass, &out) == 0 ? (int)out.len : -1;
    char *buf = out.p;
    size_t len = res > 0 ? out.len : 0;
    free(ms);
#endif
    printf("R %d %zu\n", (int)res, len);
    fwrite(buf, 1, len, stdout);
    printf("\n");
    free(buf);
    for (size_t i = 0; i < n; i++) {
        free(roles[i]);
        free(contents[i]);
    }
    free(roles);
    free(contents);
    free(tmpl);
}

int main(void)
{
    char op[4];
    while (scanf("%3s", op) == 1) {
        if (!strcmp(op, "L")) {
            getchar();
            list_names();
        } else if (!strcmp(op, "C")) {
            size_t tlen, n;
            int add_ass;
            if (scanf("%zu %d %zu", &tlen, &add_ass, &n) != 3 || getchar() != '\n') return 2;
            one_case(tlen, add_ass, n);
        } else {
            return 2;
        }
        fflush(stdout);
    }
    return 0;
}
