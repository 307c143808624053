/*
 * verify.c -- guard, then pin: the order every model passes before a byte of
 * its weights is used. The guard reads a header prefix only, so a wrong or
 * hostile file is refused before the whole-file sha256 runs.
 */
#include "file/verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file/pin.h"

int bankml_verify(const char *path, const char *fork_path, bankml_engine engine,
                  bankml_verified **out, char *err, size_t errlen)
{
    char why[512];
    bankml_verified *v;
    jbuf b;
    int rc;

    *out = NULL;
    v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(err, errlen, "cannot read %s: out of memory", path);
        return BANKML_EXIT_IO;
    }
    if (gguf_guard_file(path, (gguf_engine)engine, &v->report, why, sizeof why) != 0) {
        snprintf(err, errlen, "cannot read %s: %s", path, why);
        bankml_verified_free(v);
        return BANKML_EXIT_IO;
    }
    switch (v->report.verdict) {
    case GGUF_VERDICT_PLAY:
        break;
    case GGUF_VERDICT_NEED_MORE:
        snprintf(err, errlen, "guard needs %llu header bytes: file truncated",
                 (unsigned long long)v->report.bytes_needed);
        bankml_verified_free(v);
        return BANKML_NEED_MORE;
    default:
        jbuf_init(&b);
        jbuf_puts(&b, "guard refused: ");
        for (size_t i = 0; i < v->report.n_reasons; i++) {
            if (i) jbuf_puts(&b, "; ");
            jbuf_put(&b, v->report.reasons[i].text, v->report.reasons[i].len);
        }
        snprintf(err, errlen, "%s", b.oom ? "guard refused" : b.p);
        jbuf_free(&b);
        bankml_verified_free(v);
        return BANKML_REFUSE;
    }
    rc = pin_check(path, fork_path, v->sha256, err, errlen);
    if (rc != 0) {
        bankml_verified_free(v);
        return rc == 1 ? BANKML_EXIT_IO : BANKML_REFUSE;
    }
    *out = v;
    return BANKML_OK;
}

const char *bankml_verified_sha256(const bankml_verified *v)
{
    return v->sha256;
}

static void put_nullable(jbuf *b, const char *s, size_t n)
{
    if (s) json_put_str(b, s, n);
    else jbuf_puts(b, "null");
}

void verify_json(const bankml_verified *v, jbuf *b)
{
    const gguf_report *r = &v->report;
    char name[16];

    jbuf_puts(b, "{\"verdict\": \"play\", \"guard\": \"play\", \"engine\": ");
    json_put_cstr(b, gguf_engine_str(r->engine));
    jbuf_puts(b, ", \"model_sha256\": ");
    json_put_cstr(b, v->sha256);
    jbuf_puts(b, ", \"bankml\": \"" BANKML_VERSION "\", \"arch\": ");
    put_nullable(b, r->arch, r->arch_len);
    jbuf_puts(b, ", \"name\": ");
    put_nullable(b, r->name, r->name_len);
    jbuf_puts(b, ", \"types\": {");
    for (size_t i = 0; i < r->n_types; i++) {
        if (i) jbuf_puts(b, ", ");
        json_put_cstr(b, gguf_type_name(r->types[i].id, name));
        jbuf_printf(b, ": %llu", (unsigned long long)r->types[i].count);
    }
    jbuf_puts(b, "}}");
}

void verify_refusal_json(const char *reason, jbuf *b)
{
    jbuf_puts(b, "{\"verdict\": \"refuse\", \"reason\": ");
    json_put_cstr(b, reason);
    jbuf_puts(b, ", \"bankml\": \"" BANKML_VERSION "\"}");
}

char *bankml_verified_json(const bankml_verified *v)
{
    jbuf b;
    jbuf_init(&b);
    verify_json(v, &b);
    if (b.oom) {
        jbuf_free(&b);
        return NULL;
    }
    return b.p;
}

void bankml_verified_free(bankml_verified *v)
{
    if (!v) return;
    gguf_report_free(&v->report);
    free(v);
}
