/*
 * engine.c -- the engine handle: the registry of pinned models, the one
 * resident model (verified, mapped, opened in §2.7's order), the lock, the
 * reaper, the counters and the queries front-ends make of a model. The
 * slot's generation and the host prompt cache are in slot.c. See engine.h.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/progress.h"
#include "bankml.h"
#include "base/base.h"
#include "base/sha256.h"
#include "engine/internal.h"
#include "file/ftype.h"
#include "text/template.h"

/* The meta of a model just loaded (header h, hyper-parameters hp), into its
 * registry entry. Tensor sizes come from gguf_tensor_span, which the plan
 * has already accepted for every tensor the graph reads; one it refuses
 * counts 0 bytes. */
static void keep_meta(engine *e, const engine_model *m, const gguf_header *h, const fw_hparams *hp)
{
    if (m->idx >= e->n_reg) return;
    engine_meta *mt = &e->reg[m->idx].meta;
    memset(mt, 0, sizeof *mt);
    mt->vocab_type = tok_type(m->vocab);
    mt->n_vocab = tok_n_tokens(m->vocab);
    mt->n_ctx = e->n_ctx_seq;
    mt->n_ctx_train = hp->n_ctx_train;
    mt->n_embd = hp->n_embd;
    for (size_t i = 0; i < h->n_tensors; i++) {
        uint64_t off, len;
        char why[8];
        mt->n_params += (uint64_t)h->tensors[i].nelem;
        if (gguf_tensor_span(h, &h->tensors[i], &off, &len, why, sizeof why) == 0) mt->size += len;
    }
    mt->ftype = m->ftype;
    e->reg[m->idx].has_meta = 1;
}

int engine_status(engine_kind k)
{
    switch (k) {
    case ENGINE_OK: return 200;
    case ENGINE_BAD_INPUT: return 400;
    case ENGINE_NOT_FOUND: return 404;
    case ENGINE_UNAVAILABLE: return 503;
    default: return 500;
    }
}

/* ------------------------------------------------------------------ models */

static void model_free(engine_model *m)
{
    if (!m) return;
    if (m->e) engine_view_tokens(m->e, NULL);   /* GET /slots: the slots hold nothing now */
    for (int i = 0; m->slots && i < m->n_slots; i++) {
        engine_slot_ckpt_clear(&m->slots[i]);
        fw_seq_free(m->slots[i].fw);
        free(m->slots[i].toks);
    }
    free(m->slots);
    fw_weights_close(m->fw_w);
    tok_free(m->vocab);
    m->vocab = NULL;
    gguf_map_close(&m->map);
    bankml_verified_free(m->ver);
    free(m->tmpl);
    free(m->bos_piece);
    free(m->eos_piece);
    sampler_params_free(&m->defaults);
    if (m->chat_state == 1 && m->chat_spec == CA_SPEC_NONE) chat_analysis_free(&m->chat);
    pthread_mutex_destroy(&m->chat_mu);
    engine_vocab_free(m);
    engine_pc_clear(m);
    free(m);
}

static char *piece_str(const tok_vocab *v, int32_t id, int special)
{
    jbuf b;
    jbuf_init(&b);
    if (id != TOK_NULL) tok_piece(v, id, special, &b);
    jbuf_put(&b, "", 0);
    if (b.oom) {
        jbuf_free(&b);
        return NULL;
    }
    return b.p ? b.p : strdup("");
}

/* Guard, pin, plan, map, vocabulary, weights: the order of §2.7, every
 * gate before the next step. */
static engine_model *model_open(engine *e, const char *path, const char *fork, engine_error *er)
{
    engine_model *m = calloc(1, sizeof *m);
    fw_hparams hp;
    fw_opts o;
    char why[1024];
    pin_ident before;
    if (!m) {
        engine_err(er, ENGINE_INTERNAL, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&m->chat_mu, NULL);
    if (pin_ident_of(path, &before) != 0) {
        engine_err(er, ENGINE_NOT_FOUND, "cannot read %s: %s", path, strerror(errno));
        free(m);
        return NULL;
    }
    int rc = bankml_verify(path, fork, BANKML_ENGINE_MAINLINE, &m->ver, why, sizeof why);
    if (rc != BANKML_OK) {
        engine_err(er, ENGINE_BAD_INPUT, "refuse: %s", why);
        free(m);
        return NULL;
    }
    char *vj = bankml_verified_json(m->ver), *old;
    pthread_rwlock_wrlock(&e->res);   /* /bankml reads these under the residency lock */
    snprintf(e->last_sha, sizeof e->last_sha, "%s", bankml_verified_sha256(m->ver));
    old = e->last_verified_json;
    e->last_verified_json = vj;
    e->hashed_at = (int64_t)time(NULL);
    pthread_rwlock_unlock(&e->res);
    free(old);
    const gguf_header *h = &m->ver->report.header;
    char pg_label[300];
    const char *base = strrchr(path, '/');
    snprintf(pg_label, sizeof pg_label, "loading %s", base ? base + 1 : path);
    int pg = bk_progress_begin(pg_label, 0, NULL);   /* a terminal's line while the weights load */
    if (fw_plan(h, &hp, why, sizeof why) != 0) {
        engine_err(er, ENGINE_BAD_INPUT, "%s: bankML's native forward pass does not play it: %s", path, why);
        goto fail;
    }
    if (engine_swa_refused(e, hp.n_swa, why, sizeof why)) {
        engine_err(er, ENGINE_BAD_INPUT, "%s: %s", path, why);
        goto fail;
    }
    if (gguf_map_open(path, &m->map, why, sizeof why) != 0) {
        engine_err(er, ENGINE_INTERNAL, "%s", why);
        goto fail;
    }
    if (pin_ident_of(path, &m->ident) != 0 || !pin_ident_same(&before, &m->ident) ||
        !gguf_map_unchanged(&m->map, path)) {
        engine_err(er, ENGINE_UNAVAILABLE, "%s changed since bankml verified it: refused", path);
        goto fail;
    }
    m->vocab = tok_load_gguf(h, m->map.p, m->map.len, why, sizeof why);
    if (!m->vocab) {
        engine_err(er, ENGINE_BAD_INPUT, "%s: %s", path, why);
        goto fail;
    }
    memset(&o, 0, sizeof o);
    o.llama_threads = e->o.llama_threads;
    o.n_ubatch = e->n_ubatch;
    o.pool = e->pool;
    o.n_threads = e->o.threads;
    o.kv_type_k = e->o.kv_type_k;
    o.kv_type_v = e->o.kv_type_v;
    o.kv_rot_off = e->o.kv_rot_off;
    o.swa_small = !e->o.swa_full;   /* llama-server's default window cache (a window model only) */
    m->n_slots = e->o.n_parallel;
    m->slots = calloc((size_t)m->n_slots, sizeof *m->slots);
    if (!m->slots || fw_weights_open(&m->fw_w, &m->map, h, &o, why, sizeof why) != 0) {
        engine_err(er, ENGINE_INTERNAL, "%s: %s", path, m->slots ? why : "out of memory");
        goto fail;
    }
    for (int i = 0; i < m->n_slots; i++) {   /* N slots: N sequences over the one fw_weights */
        m->slots[i].t_last_used = -1;
        if (fw_seq_new(&m->slots[i].fw, m->fw_w, e->n_ctx_seq, why, sizeof why) != 0) {
            engine_err(er, ENGINE_INTERNAL, "%s: slot %d: %s", path, i, why);
            goto fail;
        }
    }
    size_t tl = 0;
    const char *t = engine_template_for(e, h, hp.n_layer, m->vocab, &tl);
    m->tmpl = malloc(tl + 1);
    m->ftype = gguf_ftype_name(&m->ver->report.header);
    m->bos_piece = piece_str(m->vocab, tok_bos(m->vocab), 1);
    m->eos_piece = piece_str(m->vocab, tok_eos(m->vocab), 1);
    if (!m->tmpl || !m->bos_piece || !m->eos_piece || sampler_params_init(&m->defaults) != 0) {
        engine_err(er, ENGINE_INTERNAL, "out of memory");
        goto fail;
    }
    memcpy(m->tmpl, t, tl);
    m->tmpl[tl] = 0;
    m->tmpl_len = tl;
    pthread_rwlock_wrlock(&e->res);   /* /v1/models reads the meta under the residency lock */
    keep_meta(e, m, h, &hp);
    pthread_rwlock_unlock(&e->res);
    m->no_jinja = e->o.no_jinja;
    m->legacy_fmt = m->no_jinja ? template_legacy_detect(m->tmpl) : -1;
    m->reasoning = !m->no_jinja && strstr(m->tmpl, "<think>") != NULL;
    if (template_caps(m->tmpl, m->tmpl_len, &m->caps, why, sizeof why) != 0) memset(&m->caps, 0, sizeof m->caps);
    if (sampler_gguf_defaults(&m->defaults, h, why, sizeof why) != 0) {
        engine_err(er, ENGINE_INTERNAL, "%s: %s", path, why);
        goto fail;
    }
    m->e = e;
    bk_progress_end(pg);
    return m;
fail:
    bk_progress_end(pg);
    model_free(m);
    return NULL;
}


/* ------------------------------------------------------------------ the handle */

static int drop_resident(engine *e, int only_expired);

/* llama_context's and llama-server's sizes from -c, -b, -ub, -np (b11669,
 * llama-context.cpp): n_batch = min(-c, -b) (causal attention), n_ubatch =
 * min(n_batch, -ub); -c rounded up to 256, split between the slots, each
 * share rounded up to 256 again. What is not reproduced is refused here. */
static int plan_slots(const engine_opts *o, engine *e, engine_error *er)
{
    e->o = *o;
    if (!e->o.n_ctx) e->o.n_ctx = 4096;
    if (!e->o.n_batch) e->o.n_batch = 2048;
    if (!e->o.n_ubatch) e->o.n_ubatch = 512;
    if (!e->o.n_parallel) e->o.n_parallel = 1;
    if (e->o.n_parallel < 0) {
        engine_err(er, ENGINE_BAD_INPUT, "-np auto (llama-server's default: 4 slots over one unified KV cache) is not "
                   "reproduced: the other slots' cells change which attention kernel runs; pass -np N (N slots, each "
                   "with its own share of -c)");
        return -1;
    }
    if (e->o.n_parallel > ENGINE_MAX_SLOTS) {
        engine_err(er, ENGINE_BAD_INPUT, "-np %d: at most %d slots", e->o.n_parallel, ENGINE_MAX_SLOTS);
        return -1;
    }
    if (e->o.n_batch > 65536 || e->o.n_ubatch > 65536) {
        engine_err(er, ENGINE_BAD_INPUT, "-b %zu -ub %zu: at most 65536 tokens per batch", e->o.n_batch,
                   e->o.n_ubatch);
        return -1;
    }
    size_t np = (size_t)e->o.n_parallel, c = (e->o.n_ctx + 255) / 256 * 256;
    e->n_ctx_seq = (c / np + 255) / 256 * 256;
    e->n_batch = e->o.n_ctx < e->o.n_batch ? e->o.n_ctx : e->o.n_batch;
    e->n_ubatch = e->n_batch < e->o.n_ubatch ? e->n_batch : e->o.n_ubatch;
    if (e->o.kv_unified && e->o.n_parallel > 1) {
        engine_err(er, ENGINE_BAD_INPUT, "--kv-unified with -np %d is not reproduced: in llama-server's one shared "
                   "cache a slot's cells are not in position order (a prompt restored from the host cache lands after "
                   "the other slot's cells, and its next tokens fill the cells freed before it), and the attention "
                   "adds them up in cell order, so the bits differ; drop --kv-unified (each slot then has its own %zu "
                   "cells, as llama-server gives them without it)", e->o.n_parallel, e->n_ctx_seq);
        return -1;
    }
    if (e->o.slot_prompt_similarity > 1.0f) {
        engine_err(er, ENGINE_BAD_INPUT, "--slot-prompt-similarity %g: a fraction of the prompt, 0 to 1",
                   (double)e->o.slot_prompt_similarity);
        return -1;
    }
    e->sps = e->o.slot_prompt_similarity == 0.0f ? 0.10f
           : e->o.slot_prompt_similarity < 0.0f ? 0.0f : e->o.slot_prompt_similarity;
    return 0;
}

int engine_default_threads(void)
{
    const char *v = getenv("BANKML_THREADS");
    long n = v ? strtol(v, NULL, 10) : 0;
    if (n > 0 && n <= PAR_MAX_THREADS) return (int)n;
    n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n <= PAR_MAX_THREADS ? (int)n : 1;
}

engine *engine_new(const engine_opts *o, engine_error *er)
{
    char why[256];
    engine *e = calloc(1, sizeof *e);
    if (!e) {
        engine_err(er, ENGINE_INTERNAL, "out of memory");
        return NULL;
    }
    if (plan_slots(o, e, er) != 0) {
        free(e);
        return NULL;
    }
    if (!e->o.llama_threads) e->o.llama_threads = 2;
    if (!e->o.threads) e->o.threads = engine_default_threads();
    pthread_mutex_init(&e->run, NULL);
    pthread_rwlock_init(&e->res, NULL);
    pthread_mutex_init(&e->met_mu, NULL);
    e->met.t_start = (int64_t)time(NULL);
    e->pool = par_create(e->o.threads, why, sizeof why);
    if (!e->pool) {
        engine_err(er, ENGINE_INTERNAL, "%s", why);
        free(e);
        return NULL;
    }
    return e;
}

void engine_free(engine *e)
{
    if (!e) return;
    if (e->have_reaper) {
        __atomic_store_n(&e->stop_reaper, 1, __ATOMIC_SEQ_CST);
        pthread_join(e->reaper, NULL);
    }
    pthread_mutex_lock(&e->run);
    drop_resident(e, 0);
    pthread_mutex_unlock(&e->run);
    par_destroy(e->pool);
    engine_view_free(e);
    free(e->reg);
    free(e->last_verified_json);
    pthread_mutex_destroy(&e->run);
    pthread_rwlock_destroy(&e->res);
    pthread_mutex_destroy(&e->met_mu);
    free(e);
}

/* ------------------------------------------------------------------ registry */

int engine_add(engine *e, const char *file, const char *path, const char *fork, int present)
{
    char name[256];
    engine_model_name(file, name, sizeof name);
    for (size_t i = 0; i < e->n_reg; i++)
        if (!strcmp(e->reg[i].name, name)) return 0;      /* first entry for a name wins */
    reg_entry *r = realloc(e->reg, (e->n_reg + 1) * sizeof *r);
    if (!r) return -1;
    e->reg = r;
    r = &e->reg[e->n_reg++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    const char *b = strrchr(file, '/');
    snprintf(r->file, sizeof r->file, "%s", b ? b + 1 : file);
    snprintf(r->path, sizeof r->path, "%s", path);
    snprintf(r->fork, sizeof r->fork, "%s", fork);
    r->present = present;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

void engine_add_fork(engine *e, const char *fork, const char *near, const char *dir)
{
    size_t len;
    char *text = json_read_file(fork, &len), err[256];
    json_value *doc = text ? json_parse(text, len, err, sizeof err) : NULL;
    const json_value *files = doc ? json_get(doc, "files") : NULL;
    for (size_t i = 0; files && files->type == JSON_ARRAY && i < files->n; i++) {
        const char *p;
        size_t pl;
        struct stat st;
        char cand[4096];
        if (!json_as_str(json_get(files->items[i], "path"), &p, &pl)) continue;
        if (pl < 5 || strcasecmp(p + pl - 5, ".gguf")) continue;
        const char *b = strrchr(p, '/');
        b = b ? b + 1 : p;
        int found = 0;
        const char *places[2] = {near, dir};
        for (int k = 0; k < 2 && !found; k++) {
            if (!places[k]) continue;
            snprintf(cand, sizeof cand, "%s/%s", places[k], b);
            found = stat(cand, &st) == 0;
        }
        if (!found) snprintf(cand, sizeof cand, "%s/%s", dir ? dir : (near ? near : "."), b);
        engine_add(e, b, cand, fork, found);
    }
    json_free(doc);
    free(text);
}

void engine_add_dir(engine *e, const char *dir, const char *near)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char **names = NULL;
    size_t n = 0;
    if (!d) return;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l > 10 && !strcmp(de->d_name + l - 10, ".FORK.json")) {
            char **nn = realloc(names, (n + 1) * sizeof *nn);
            if (!nn) break;
            names = nn;
            names[n] = strdup(de->d_name);
            if (names[n]) n++;
        }
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        engine_add_fork(e, p, near, dir);
        free(names[i]);
    }
    free(names);
}

size_t engine_n_entries(const engine *e) { return e->n_reg; }
size_t engine_default(const engine *e) { return e->def; }
void engine_set_default(engine *e, size_t i) { if (i < e->n_reg) e->def = i; }
size_t engine_n_ctx_opt(const engine *e) { return e->o.n_ctx; }
const char *engine_alias(const engine *e) { return e->o.alias && *e->o.alias ? e->o.alias : NULL; }
int64_t engine_keep_alive_ms(const engine *e) { return e->o.keep_alive_ms; }

int engine_entry_get(const engine *e, size_t i, engine_entry *out)
{
    if (i >= e->n_reg) return -1;
    out->name = e->reg[i].name;
    out->file = e->reg[i].file;
    out->path = e->reg[i].path;
    out->fork = e->reg[i].fork;
    out->present = e->reg[i].present;
    return 0;
}

int engine_entry_meta(const engine *e, size_t i, engine_meta *out)
{
    pthread_rwlock_t *res = (pthread_rwlock_t *)&e->res;   /* a load writes the meta under it */
    int rc = -1;
    if (i >= e->n_reg) return -1;
    pthread_rwlock_rdlock(res);
    if (e->reg[i].has_meta) {
        *out = e->reg[i].meta;
        rc = 0;
    }
    pthread_rwlock_unlock(res);
    return rc;
}

long engine_find(const engine *e, const char *asked)
{
    if (e->n_reg == 0) return -1;   /* no models (llama-server's router with none): no default either */
    if (!asked || !*asked) return (long)e->def;
    for (size_t i = 0; i < e->n_reg; i++)
        if (engine_name_matches(e->reg[i].file, asked)) return (long)i;
    /* llama-server's clients often send the path they started it with */
    for (size_t i = 0; i < e->n_reg; i++)
        if (!strcmp(e->reg[i].path, asked)) return (long)i;
    /* §2.7: the name without its weight-type suffix (":latest" allowed) when exactly one pin has that base */
    size_t an = strlen(asked), hit = 0;
    long found = -1;
    if (an > 7 && !strcasecmp(asked + an - 7, ":latest")) an -= 7;
    for (size_t i = 0; i < e->n_reg && an; i++) {
        const char *nm = e->reg[i].name;
        size_t bn = engine_name_base(nm, strlen(nm));
        if (bn != strlen(nm) && bn == an && !strncasecmp(nm, asked, an)) {
            found = (long)i;
            hit++;
        }
    }
    return hit == 1 ? found : -1;
}

/* ------------------------------------------------------------------ residency */

static int64_t expiry_get(const engine *e) { return __atomic_load_n(&e->expires_us, __ATOMIC_SEQ_CST); }
static void expiry_set(engine *e, int64_t us) { __atomic_store_n(&e->expires_us, us, __ATOMIC_SEQ_CST); }

/* The resident model unloaded (run held): cur cleared with the residency
 * lock written, so every reader that holds the model has let it go first
 * and none takes it after; then freed. only_expired: only when its expiry
 * has passed (checked again under the lock: a reader may have refreshed
 * it); 1 when it was unloaded. */
static int drop_resident(engine *e, int only_expired)
{
    pthread_rwlock_wrlock(&e->res);
    engine_model *m = e->cur;
    int64_t x = expiry_get(e);
    if (only_expired && !(m && x && bk_mono_us() > x)) m = NULL;
    if (m) e->cur = NULL;
    pthread_rwlock_unlock(&e->res);
    if (m && only_expired) engine_log(e, "%s: keep-alive expired; unloaded", e->reg[m->idx].name);
    model_free(m);
    return m != NULL;
}

static void set_resident(engine *e, engine_model *m)
{
    pthread_rwlock_wrlock(&e->res);
    e->cur = m;
    pthread_rwlock_unlock(&e->res);
}

/* The model for registry entry idx, resident afterwards (the caller holds
 * the lock). The resident one is reused when its file is unchanged; any
 * other is dropped first. */
static engine_model *make_resident(engine *e, size_t idx, engine_error *er)
{
    reg_entry *r = &e->reg[idx];
    if (e->cur && e->cur->idx == idx) {
        pin_ident now;
        if (pin_ident_of(r->path, &now) == 0 && pin_ident_same(&now, &e->cur->ident) &&
            gguf_map_unchanged(&e->cur->map, r->path))
            return e->cur;
        drop_resident(e, 0);
        engine_err(er, ENGINE_UNAVAILABLE, "%s changed since bankml verified it: unloaded, and refused; the next "
                   "request verifies it again", r->file);
        return NULL;
    }
    drop_resident(e, 0);
    if (!r->present) {
        engine_err(er, ENGINE_NOT_FOUND, "%s is pinned but not on this machine", r->file);
        return NULL;
    }
    engine_log(e, "%s: verifying (guard, sha256 pin); loading it", r->name);
    engine_model *m = model_open(e, r->path, r->fork, er);
    if (m) {
        m->idx = idx;
        set_resident(e, m);
        engine_view_open(e, m);
    }
    return m;
}

engine_model *engine_acquire(engine *e, size_t idx, int *loaded, engine_error *er)
{
    engine_met_busy(e, 0, 1);
    pthread_mutex_lock(&e->run);
    engine_met_busy(e, 0, -1);
    if (idx >= e->n_reg) {
        pthread_mutex_unlock(&e->run);
        engine_err(er, ENGINE_NOT_FOUND, "no such model");
        return NULL;
    }
    if (loaded) *loaded = !(e->cur && e->cur->idx == idx);
    engine_model *m = make_resident(e, idx, er);
    if (!m) pthread_mutex_unlock(&e->run);
    return m;
}

void engine_release(engine *e, int64_t keep_alive_ms)
{
    if (keep_alive_ms == ENGINE_KEEP_DEFAULT) {
        /* --keep-alive: the reaper unloads after it, even when it is 0 */
        keep_alive_ms = e->o.keep_alive_ms;
        expiry_set(e, keep_alive_ms < 0 ? 0 : bk_mono_us() + keep_alive_ms * 1000);
    } else if (keep_alive_ms == 0) {
        if (e->cur) engine_log(e, "%s: keep_alive 0; unloaded", e->reg[e->cur->idx].name);
        drop_resident(e, 0);
    } else {
        expiry_set(e, keep_alive_ms < 0 ? 0 : bk_mono_us() + keep_alive_ms * 1000);
    }
    pthread_mutex_unlock(&e->run);
}

/* A file's identity now against the one the resident model was verified
 * with (make_resident's check; run or res held). */
static int resident_unchanged(const engine *e, const engine_model *m)
{
    pin_ident now;
    const reg_entry *r = &e->reg[m->idx];
    return pin_ident_of(r->path, &now) == 0 && pin_ident_same(&now, &m->ident) && gguf_map_unchanged(&m->map, r->path);
}

const engine_model *engine_peek(engine *e, size_t idx, int64_t keep_alive_ms)
{
    if (keep_alive_ms == 0 || idx >= e->n_reg) return NULL;   /* an unload, or no such entry: engine_acquire's */
    pthread_rwlock_rdlock(&e->res);
    engine_model *m = e->cur;
    if (m && m->idx == idx && resident_unchanged(e, m)) return m;
    pthread_rwlock_unlock(&e->res);
    return NULL;
}

void engine_unpeek(engine *e, int64_t keep_alive_ms)
{
    if (keep_alive_ms == ENGINE_KEEP_DEFAULT) keep_alive_ms = e->o.keep_alive_ms;
    if (keep_alive_ms != ENGINE_KEEP_SAME && keep_alive_ms != 0)
        expiry_set(e, keep_alive_ms < 0 ? 0 : bk_mono_us() + keep_alive_ms * 1000);
    pthread_rwlock_unlock(&e->res);
}

void engine_lock(engine *e) { pthread_mutex_lock(&e->run); }
void engine_unlock(engine *e) { pthread_mutex_unlock(&e->run); }

long engine_resident(const engine *e, int64_t *expires_in_ms, size_t *n_ctx)
{
    pthread_rwlock_t *res = (pthread_rwlock_t *)&e->res;
    long idx = -1;
    pthread_rwlock_rdlock(res);
    if (e->cur) {
        int64_t x = expiry_get(e);
        idx = (long)e->cur->idx;
        if (n_ctx) *n_ctx = fw_n_ctx(e->cur->slots[0].fw);
        if (expires_in_ms) {
            int64_t left = x ? (x - bk_mono_us()) / 1000 : -1;
            *expires_in_ms = !x ? -1 : left > 0 ? left : 0;
        }
    }
    pthread_rwlock_unlock(res);
    return idx;
}

static void *reaper_main(void *arg)
{
    engine *e = arg;
    while (!__atomic_load_n(&e->stop_reaper, __ATOMIC_SEQ_CST)) {
        sleep(1);
        if (pthread_mutex_trylock(&e->run) != 0) continue;
        int64_t x = expiry_get(e);
        if (e->cur && x && bk_mono_us() > x) drop_resident(e, 1);
        pthread_mutex_unlock(&e->run);
    }
    return NULL;
}

int engine_start_reaper(engine *e)
{
    if (e->have_reaper) return 0;
    e->have_reaper = pthread_create(&e->reaper, NULL, reaper_main, e) == 0;
    return e->have_reaper ? 0 : -1;
}

void engine_status_get(engine *e, engine_status_info *out)
{
    pthread_rwlock_rdlock(&e->res);   /* never the engine lock: /bankml answers while a generation runs */
    out->verified_json = e->last_verified_json ? strdup(e->last_verified_json) : NULL;
    snprintf(out->last_sha, sizeof out->last_sha, "%s", e->last_sha);
    out->hashed_at = e->hashed_at;
    out->resident = e->cur ? (long)e->cur->idx : -1;
    pthread_rwlock_unlock(&e->res);
}

/* ------------------------------------------------------------------ the resident model */

size_t engine_model_entry(const engine_model *m) { return m->idx; }
size_t engine_model_n_ctx(const engine_model *m) { return fw_n_ctx(m->slots[0].fw); }
int engine_model_n_slots(const engine_model *m) { return m->n_slots; }
int32_t engine_model_n_vocab(const engine_model *m) { return (int32_t)fw_weights_hp(m->fw_w)->n_vocab; }
int32_t engine_model_n_tokens(const engine_model *m) { return tok_n_tokens(m->vocab); }
const sampler_params *engine_model_defaults(const engine_model *m) { return &m->defaults; }
const char *engine_model_bos(const engine_model *m) { return m->bos_piece; }
const char *engine_model_eos(const engine_model *m) { return m->eos_piece; }
const char *engine_model_ftype(const engine_model *m) { return m->ftype; }
const char *engine_model_sha256(const engine_model *m) { return bankml_verified_sha256(m->ver); }
int engine_model_has_fim(const engine_model *m)
{
    return tok_fim_pre(m->vocab) >= 0 && tok_fim_suf(m->vocab) >= 0 && tok_fim_mid(m->vocab) >= 0;
}
void engine_model_fim(const engine_model *m, int32_t *pre, int32_t *suf, int32_t *mid)
{
    *pre = tok_fim_pre(m->vocab);
    *suf = tok_fim_suf(m->vocab);
    *mid = tok_fim_mid(m->vocab);
}
int engine_model_is_eog(const engine_model *m, int32_t id) { return tok_is_eog(m->vocab, id); }
size_t engine_model_n_slot(const engine_model *m) { return m->slots[m->cur].n; }
int engine_model_slot(const engine_model *m) { return m->cur; }

size_t engine_model_slot_tokens(const engine_model *m, int i)
{
    return i >= 0 && i < m->n_slots ? m->slots[i].n : 0;
}

const char *engine_model_template(const engine_model *m, size_t *len)
{
    if (len) *len = m->tmpl_len;
    return m->tmpl;
}

/* llama-server's legacy path (--no-jinja): a conversation ending with an
 * assistant message is continued (prefill: no generation prompt), two
 * assistant messages at the end are refused, as oaicompat_chat_params_parse
 * does; then the built-in format. */
static int render_legacy(const engine_model *m, const json_value *messages, const template_opts *req, jbuf *out,
                         char *err, size_t errlen)
{
    int add_ass = 1;
    if (req) {   /* the request's inputs: tools need Jinja; the continuation rules decide the prefix */
        template_opts o = *req;
        if (o.tools && o.tools->type == JSON_ARRAY && o.tools->n) {
            bk_err(err, errlen, "tools param requires --jinja flag");
            return -2;
        }
        if (template_continuation(messages, &o, err, errlen) != 0) return -1;
        if (m->legacy_fmt < 0) {
            bk_err(err, errlen, "this custom template is not supported, try using --jinja");
            return -2;
        }
        return template_legacy_render(m->legacy_fmt, messages, o.add_generation_prompt, out, err, errlen);
    }
    size_t n = messages && messages->type == JSON_ARRAY ? messages->n : 0;
    const json_value *r1 = n ? json_get(messages->items[n - 1], "role") : NULL;
    if (r1 && r1->type == JSON_STRING && r1->len == 9 && !memcmp(r1->str, "assistant", 9)) {
        const json_value *r2 = n > 1 ? json_get(messages->items[n - 2], "role") : NULL;
        if (r2 && r2->type == JSON_STRING && r2->len == 9 && !memcmp(r2->str, "assistant", 9)) {
            bk_err(err, errlen, "Cannot have 2 or more assistant messages at the end of the list.");
            return -1;
        }
        add_ass = 0;
    }
    if (m->legacy_fmt < 0) {   /* after the messages' checks, as llama-server renders */
        bk_err(err, errlen, "this custom template is not supported, try using --jinja");
        return -2;
    }
    return template_legacy_render(m->legacy_fmt, messages, add_ass, out, err, errlen);
}

int engine_render(const engine_model *m, const json_value *messages, jbuf *out, char *err, size_t errlen)
{
    if (m->no_jinja) return render_legacy(m, messages, NULL, out, err, errlen);
    return engine_render_jinja(m, messages, out, err, errlen);
}

int engine_render_chat(const engine_model *m, const json_value *messages, const template_opts *req, jbuf *out,
                       char *err, size_t errlen)
{
    if (m->no_jinja) return render_legacy(m, messages, req, out, err, errlen);
    template_opts o = *req;
    o.bos_token = m->bos_piece;
    o.eos_token = m->eos_piece;
    o.add_bos = tok_add_bos(m->vocab);
    o.add_eos = tok_add_eos(m->vocab);
    if (o.enable_thinking < 0 && m->e && m->e->o.reasoning_off) o.enable_thinking = 0;
    return template_render(m->tmpl, m->tmpl_len, messages, &o, out, err, errlen);
}

const tmpl_caps *engine_model_caps(const engine_model *m) { return &m->caps; }
int engine_model_jinja(const engine_model *m) { return !m->no_jinja; }

int engine_render_jinja(const engine_model *m, const json_value *messages, jbuf *out, char *err, size_t errlen)
{
    template_opts o;
    template_opts_init(&o);
    o.bos_token = m->bos_piece;
    o.eos_token = m->eos_piece;
    o.add_bos = tok_add_bos(m->vocab);
    o.add_eos = tok_add_eos(m->vocab);
    return template_render(m->tmpl, m->tmpl_len, messages, &o, out, err, errlen);
}

const chat_analysis *engine_model_chat(engine_model *m, int *spec, const char **why)
{
    const chat_analysis *a;
    pthread_mutex_lock(&m->chat_mu);
    if (!m->chat_state) {
        m->chat_spec = (int)chat_specialized(m->tmpl, m->tmpl_len);
        m->chat_state = 1;
        if (m->chat_spec == CA_SPEC_NONE &&
            chat_analyze(m->tmpl, m->tmpl_len, &m->caps, m->bos_piece, m->eos_piece, &m->chat, m->chat_err,
                         sizeof m->chat_err) != 0)
            m->chat_state = -1;
    }
    *spec = m->chat_spec;
    *why = m->chat_state < 0 ? m->chat_err : NULL;
    a = m->chat_state > 0 && m->chat_spec == CA_SPEC_NONE ? &m->chat : NULL;
    pthread_mutex_unlock(&m->chat_mu);
    return a;   /* filled once, never changed after: read without the mutex */
}

static int generation_prompt_of(const engine_model *m, const json_value *messages, template_opts o, jbuf *out,
                                char *err, size_t errlen)
{
    jbuf with, without;
    o.bos_token = m->bos_piece;
    o.eos_token = m->eos_piece;
    o.add_bos = tok_add_bos(m->vocab);
    o.add_eos = tok_add_eos(m->vocab);
    if (o.enable_thinking < 0 && m->e && m->e->o.reasoning_off) o.enable_thinking = 0;
    o.add_generation_prompt = 1;
    o.continue_final = TEMPLATE_CONTINUE_NONE;
    o.prefill_assistant = 0;
    jbuf_init(&with);
    jbuf_init(&without);
    int rc = template_render(m->tmpl, m->tmpl_len, messages, &o, &with, err, errlen);
    o.add_generation_prompt = 0;
    if (rc == 0) rc = template_render(m->tmpl, m->tmpl_len, messages, &o, &without, err, errlen);
    if (rc == 0) {
        size_t i = 0;
        while (i < with.len && i < without.len && with.p[i] == without.p[i]) i++;
        jbuf_put(out, with.p + i, with.len - i);
    }
    jbuf_free(&with);
    jbuf_free(&without);
    return rc;
}

int engine_generation_prompt(const engine_model *m, const json_value *messages, jbuf *out, char *err, size_t errlen)
{
    template_opts o;
    template_opts_init(&o);
    return generation_prompt_of(m, messages, o, out, err, errlen);
}

int engine_generation_prompt_with(const engine_model *m, const json_value *messages, const template_opts *req,
                                  jbuf *out, char *err, size_t errlen)
{
    return generation_prompt_of(m, messages, *req, out, err, errlen);
}

int engine_tokenize(const engine_model *m, const char *text, size_t len, int32_t **ids, size_t *n, char *err,
                    size_t errlen)
{
    return tok_tokenize(m->vocab, text, len, 1, 1, ids, n, err, errlen);
}

int engine_tokenize_with(const engine_model *m, const char *text, size_t len, int add_special, int parse_special,
                         int32_t **ids, size_t *n, char *err, size_t errlen)
{
    return tok_tokenize(m->vocab, text, len, add_special, parse_special, ids, n, err, errlen);
}

void engine_piece(const engine_model *m, int32_t id, int special, jbuf *out) { tok_piece(m->vocab, id, special, out); }

int engine_detokenize(const engine_model *m, const int32_t *ids, size_t n, int remove_special, int unparse_special,
                      jbuf *out, char *err, size_t errlen)
{
    return tok_detokenize(m->vocab, ids, n, remove_special, unparse_special, out, err, errlen);
}

void engine_content(const engine_model *m, const char *s, size_t n, const char **out, size_t *len)
{
    /* b11669's peg-native parser drops leading whitespace only: "  ab  "
     * answers "ab  " (measured with grammars that force the whitespace) */
    if (m->reasoning)
        while (n && isspace((unsigned char)*s)) s++, n--;
    *out = s;
    *len = n;
}

int engine_reasoning_opened(const engine_model *m, const char *s, size_t n)
{
    if (!m->reasoning || !n) return 0;
    if (n >= 7) return !memcmp(s, "<think>", 7);
    return memcmp(s, "<think>", n) ? 0 : 2;
}

static void put_sha_hex(jbuf *b, const void *p, size_t n)
{
    uint8_t d[32];
    char hex[65];
    sha256(p, n, d);
    sha256_hex(d, hex);
    json_put_cstr(b, hex);
}

void engine_receipt(jbuf *b, const engine_model *m, const engine_result *r, const char *body, size_t body_len,
                    int64_t wall_ms, const char *text, size_t tn, const char *lp, size_t lpn, int has_lp)
{
    jbuf_puts(b, "{\"bankml\":\"" BANKML_VERSION "\",\"engine\":\"" ENGINE_NAME "\",\"model_sha256\":");
    json_put_cstr(b, bankml_verified_sha256(m->ver));
    jbuf_printf(b, ",\"guard\":\"play\",\"prompt_tokens\":%zu,\"completion_tokens\":%zu,\"ttft_ms\":", r->n_prompt,
                r->n_decoded);
    if (r->t_first_text) jbuf_printf(b, "%lld", (long long)((r->t_first_text - r->t_start) / 1000));
    else jbuf_puts(b, "null");
    jbuf_printf(b, ",\"wall_ms\":%lld,\"response_sha256\":", (long long)wall_ms);
    put_sha_hex(b, text, tn);
    jbuf_puts(b, ",\"request_sha256\":");
    put_sha_hex(b, body ? body : "", body_len);
    if (has_lp) {
        jbuf_puts(b, ",\"logprobs_sha256\":");
        put_sha_hex(b, lp, lpn);
    }
    jbuf_puts(b, ",\"signed\":false}");
}

