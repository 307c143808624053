/*
 * header.c -- whether bankml plays a file, from its header alone (the
 * seed's header_info): the gates model_open passes before it maps the
 * weights, each with the reason a listing shows. See engine.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "engine/internal.h"
#include "text/template.h"

#define HDR_MAX_PREFIX ((uint64_t)256 << 20)   /* a tokenizer larger than this is not read for a listing */

const char *engine_template_for(const engine *e, const gguf_header *h, unsigned n_layer, const tok_vocab *v,
                                size_t *len)
{
    size_t tl = 0;
    const char *t = gguf_kv_str(gguf_kv_find(h, "tokenizer.chat_template"), &tl);
    if (e->o.chat_template) {   /* llama-server's --chat-template(-file): the text replaces the GGUF's */
        t = e->o.chat_template;
        tl = e->o.chat_template_len;
    }
    /* llama_model_chat_template's one-off: a tekken vocabulary in 40 layers (Mistral Small 3) without a
       template gets the name "mistral-v7-tekken" as its template text (measured on llama-server b11669:
       with --jinja every chat renders those 17 bytes; without, the legacy Mistral v7 tekken format) */
    if ((!t || !tl) && !e->o.chat_template && n_layer == 40 && strcmp(tok_pre_name(v), "tekken") == 0) {
        t = "mistral-v7-tekken";
        tl = strlen(t);
    }
    if (!t || !tl || (tl == 6 && !memcmp(t, "chatml", 6))) {
        t = template_chatml_fallback;
        tl = strlen(t);
    }
    *len = tl;
    return t;
}

int engine_swa_refused(const engine *e, unsigned n_swa, char *why, size_t whylen)
{
    if (n_swa == 0 || e->o.swa_full || !e->o.cache_on) return 0;
    bk_err(why, whylen, "a sliding-window model (window of %u): without --swa-full llama-server keeps the window "
                        "layers' cells in a smaller cache, and its host prompt cache saves and restores them with "
                        "their context checkpoints, which bankml does not reproduce; start with --cache-ram 0 (and "
                        "llama-server too), or with --swa-full, for token-identical answers", n_swa);
    return 1;
}

/* The guard's refusal as a listing says it. */
static void hdr_guard_why(const gguf_report *r, char *why, size_t whylen)
{
    size_t at = 0;
    if (r->verdict == GGUF_VERDICT_NEED_MORE) {
        bk_err(why, whylen, "the guard needs more header bytes: the file is truncated");
        return;
    }
    if (!r->has_header && r->n_reasons == 0) {
        bk_err(why, whylen, "no GGUF header");
        return;
    }
    at = (size_t)snprintf(why, whylen, "the guard refuses it: ");
    for (size_t i = 0; i < r->n_reasons && at < whylen; i++)
        at += (size_t)snprintf(why + at, whylen - at, "%s%s", i ? "; " : "", r->reasons[i].text);
}

/* The file's bytes up to its tensor data (every tokenizer array in it). */
static uint8_t *hdr_prefix(const char *path, uint64_t n, char *why, size_t whylen)
{
    FILE *f = fopen(path, "rb");
    uint8_t *b = f && n <= HDR_MAX_PREFIX ? malloc(n ? n : 1) : NULL;
    if (!f || !b || fread(b, 1, n, f) != n) {
        bk_err(why, whylen, !f ? "cannot read %s: %s" : !b ? "%s: its header is too large to read for a listing%s"
                                                           : "cannot read %s: short read%s",
               path, !f ? strerror(errno) : "");
        free(b);
        if (f) fclose(f);
        return NULL;
    }
    fclose(f);
    return b;
}

int engine_header_info(const engine *e, const char *path, char *why, size_t whylen)
{
    gguf_report r;
    char err[1024];
    fw_hparams hp;
    int plays = 0;
    if (gguf_guard_file(path, GGUF_ENGINE_MAINLINE, &r, err, sizeof err) != 0) {
        bk_err(why, whylen, "cannot read %s: %s", path, err);
        return 0;
    }
    const gguf_header *h = &r.header;
    if (r.verdict != GGUF_VERDICT_PLAY) {
        hdr_guard_why(&r, why, whylen);
    } else if (fw_plan(h, &hp, err, sizeof err) != 0) {
        bk_err(why, whylen, "bankML's native forward pass does not play it: %s", err);
    } else if (!engine_swa_refused(e, hp.n_swa, why, whylen)) {
        uint8_t *b = hdr_prefix(path, h->header_end, why, whylen);
        tok_vocab *v = b ? tok_load_gguf(h, b, (size_t)h->header_end, err, sizeof err) : NULL;
        if (b && !v) bk_err(why, whylen, "its tokenizer: %s", err);
        size_t tl = 0;
        const char *t = v ? engine_template_for(e, h, hp.n_layer, v, &tl) : NULL;
        if (v && template_check(t, tl, err, sizeof err) != 0) bk_err(why, whylen, "its chat template: %s", err);
        else if (v) plays = 1;
        tok_free(v);
        free(b);
    }
    gguf_report_free(&r);
    if (plays && whylen) why[0] = 0;
    return plays;
}
