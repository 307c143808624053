/*
 * ollama_store.c -- what Ollama's API lists and writes without loading a
 * model: header listings (/api/tags, /api/show), the pins, derived models
 * (manifests in --registry, built from a Modelfile or a request) and
 * `bankml create`. See ollama.h and ollama_int.h.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bankml.h"
#include "base/base.h"
#include "file/gguf.h"
#include "base/json.h"
#include "engine/engine.h"
#include "api/ollama.h"
#include "api/ollama_int.h"
#include "file/pin.h"
#include "sampling/sampler.h"
#include "api/serve.h"
#include "base/sha256.h"

ol_state ol = {.mu = PTHREAD_MUTEX_INITIALIZER, .ps_idx = -1, .default_keep_ms = 5 * 60 * 1000};

/* ------------------------------------------------------------------ headers (no load) */


static int read_header(const char *path, gguf_header *h, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    size_t cap = (size_t)1 << 20, have = 0;
    uint8_t *buf = NULL;
    if (!f) {
        bk_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    for (;;) {
        uint8_t *nb = realloc(buf, cap);
        if (!nb) {
            bk_err(err, errlen, "out of memory");
            break;
        }
        buf = nb;
        have += fread(buf + have, 1, cap - have, f);
        uint64_t need = 0;
        gguf_status st = gguf_parse(buf, have, h, &need, err, errlen);
        if (st == GGUF_OK) {
            free(buf);
            fclose(f);
            return 0;
        }
        if (st != GGUF_NEED_MORE || have < cap || need > ((uint64_t)1 << 32)) {
            if (st == GGUF_NEED_MORE) bk_err(err, errlen, "the GGUF header is truncated");
            break;
        }
        size_t want = (size_t)need > cap * 2 ? (size_t)need : cap * 2;
        cap = want;
    }
    free(buf);
    fclose(f);
    return -1;
}

static void put_kv_value(jbuf *b, const gguf_kv *kv)
{
    switch (kv->type) {
    case GGUF_VT_U8: case GGUF_VT_U16: case GGUF_VT_U32: case GGUF_VT_U64:
        jbuf_printf(b, "%llu", (unsigned long long)kv->u);
        break;
    case GGUF_VT_I8: case GGUF_VT_I16: case GGUF_VT_I32: case GGUF_VT_I64:
        jbuf_printf(b, "%lld", (long long)kv->i);
        break;
    case GGUF_VT_F32: case GGUF_VT_F64:
        json_put_double(b, kv->f);
        break;
    case GGUF_VT_BOOL:
        jbuf_puts(b, kv->u ? "true" : "false");
        break;
    default:
        json_put_str_go(b, kv->str ? kv->str : "", kv->str_len);
    }
}

static int cmp_kv(const void *a, const void *b)
{
    const gguf_kv *x = *(const gguf_kv *const *)a, *y = *(const gguf_kv *const *)b;
    return strcmp(x->key, y->key);
}

void ol_fmt_param(jbuf *b, const char *k, const char *v)
{
    if (b->len) jbuf_putc(b, '\n');
    jbuf_printf(b, "%-30s %s", k, v);
}

static void fmt_param_f(jbuf *b, const char *k, double v)
{
    char num[64];
    jbuf t;
    jbuf_init(&t);
    json_put_double(&t, v);
    snprintf(num, sizeof num, "%s", t.p ? t.p : "0");
    jbuf_free(&t);
    size_t l = strlen(num);   /* Go prints 0.5, not 0.50 nor 1.0 */
    if (l > 2 && !strcmp(num + l - 2, ".0")) num[l - 2] = 0;
    ol_fmt_param(b, k, num);
}

void ol_hinfo_fill(hinfo *hi, const char *path)
{
    gguf_header h;
    char err[256];
    struct stat st;
    jbuf b;
    hi->done = 1;
    memset(&h, 0, sizeof h);
    if (stat(path, &st) == 0) {
        hi->size = (int64_t)st.st_size;
        hi->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    }
    if (read_header(path, &h, err, sizeof err) != 0) return;
    size_t al = 0;
    const char *arch = gguf_kv_str(gguf_kv_find(&h, "general.architecture"), &al);
    if (!arch) arch = "";
    /* parameter size: the label, else the weights counted */
    char psize[64];
    size_t sl = 0;
    const char *label = gguf_kv_str(gguf_kv_find(&h, "general.size_label"), &sl);
    if (label && sl) {
        snprintf(psize, sizeof psize, "%s", label);
    } else {
        double total = 0;
        for (size_t i = 0; i < h.n_tensors; i++) total += (double)h.tensors[i].nelem;
        if (total >= 1e9) snprintf(psize, sizeof psize, "%.1fB", total / 1e9);
        else snprintf(psize, sizeof psize, "%.0fM", total / 1e6);
    }
    /* quantization: the most frequent type that is not F32 */
    uint32_t best = 0;
    size_t best_n = 0;
    for (size_t i = 0; i < h.n_tensors; i++) {
        uint32_t t = h.tensors[i].type;
        if (t == 0) continue;
        size_t c = 0;
        for (size_t j = 0; j < h.n_tensors; j++) c += h.tensors[j].type == t;
        if (c > best_n || (c == best_n && t < best)) best = t, best_n = c;
    }
    char tb[16];
    const char *qname = gguf_type_name(best_n ? best : 0, tb);
    jbuf_init(&b);
    jbuf_puts(&b, "\"format\":\"gguf\",\"family\":");
    json_put_cstr_go(&b, arch);
    jbuf_puts(&b, ",\"families\":[");
    json_put_cstr_go(&b, arch);
    jbuf_puts(&b, "],\"parameter_size\":");
    json_put_cstr_go(&b, psize);
    jbuf_puts(&b, ",\"quantization_level\":");
    json_put_cstr_go(&b, qname);
    hi->details = b.p ? b.p : strdup("");
    /* model_info: every key sorted, without the template, arrays, non-finite floats */
    const gguf_kv **kvs = malloc((h.n_kv ? h.n_kv : 1) * sizeof *kvs);
    size_t nk = 0;
    for (size_t i = 0; kvs && i < h.n_kv; i++) {
        const gguf_kv *kv = &h.kv[i];
        if (gguf_kv_find(&h, kv->key) != kv) continue;   /* a later duplicate wins */
        if (kv->type == GGUF_VT_ARRAY || !strcmp(kv->key, "tokenizer.chat_template")) continue;
        if ((kv->type == GGUF_VT_F32 || kv->type == GGUF_VT_F64) && !isfinite(kv->f)) continue;
        kvs[nk++] = kv;
    }
    if (kvs) qsort(kvs, nk, sizeof *kvs, cmp_kv);
    jbuf_init(&b);
    jbuf_putc(&b, '{');
    for (size_t i = 0; i < nk; i++) {
        if (i) jbuf_putc(&b, ',');
        json_put_str_go(&b, kvs[i]->key, kvs[i]->key_len);
        jbuf_putc(&b, ':');
        put_kv_value(&b, kvs[i]);
    }
    jbuf_putc(&b, '}');
    free(kvs);
    hi->model_info = b.p;
    size_t tl = 0;
    const char *t = gguf_kv_str(gguf_kv_find(&h, "tokenizer.chat_template"), &tl);
    hi->tmpl = ol_dup_n(t ? t : "", t ? tl : 0);
    char key[300];
    snprintf(key, sizeof key, "%s.context_length", arch);
    uint64_t cl = 0;
    if (gguf_kv_u64(gguf_kv_find(&h, key), &cl)) hi->ctx_len = (size_t)cl;
    sampler_params sp;
    jbuf_init(&b);
    if (sampler_params_init(&sp) == 0 && sampler_gguf_defaults(&sp, &h, err, sizeof err) == 0) {
        char num[32];
        fmt_param_f(&b, "temperature", sp.temp);
        snprintf(num, sizeof num, "%d", (int)sp.top_k);
        ol_fmt_param(&b, "top_k", num);
        fmt_param_f(&b, "top_p", sp.top_p);
        fmt_param_f(&b, "min_p", sp.min_p);
    }
    sampler_params_free(&sp);
    hi->params = b.p ? b.p : strdup("");
    hi->ok = hi->details && hi->model_info && hi->tmpl;
    gguf_header_free(&h);
}

void ol_hinfo_free(hinfo *hi)
{
    free(hi->details);
    free(hi->model_info);
    free(hi->tmpl);
    free(hi->params);
    free(hi->why);
    memset(hi, 0, sizeof *hi);
}

/* ------------------------------------------------------------------ pins and derived models */




/* The sha256 a FORK.json pins for a file's base name. */
int ol_pinned_sha(const char *fork, const char *file, char sha[65])
{
    size_t n;
    char *t = json_read_file(fork, &n);
    int rc = t ? pin_lookup(t, n, file, sha, NULL, NULL, 0) : -1;
    free(t);
    return rc == 1 ? 0 : -1;
}

static void sha_hex_of(const char *s, size_t n, char hex[65])
{
    uint8_t d[32];
    sha256(s, n, d);
    sha256_hex(d, hex);
}

/* A manifest's layer written back compactly; the digest is its sha256, so
 * names and times never change it and copies share it. */
static int canon_layer(const json_value *layer, jbuf *out, char digest[80])
{
    char hex[65];
    jbuf_reset(out);
    json_put_value(out, layer);
    if (out->oom) return -1;
    sha_hex_of(out->p ? out->p : "", out->len, hex);
    snprintf(digest, 80, "sha256:%s", hex);
    return 0;
}

const derived *ol_find_derived(const derived *d, size_t n, const char *asked)
{
    if (!asked) return NULL;
    for (size_t i = 0; i < n; i++)
        if (ollama_name_matches(d[i].name, asked)) return &d[i];
    return NULL;
}

void ol_derived_free(derived *d)
{
    free(d->layer);
    free(d->manifest);
}

/* A manifest's name as a file may claim it: what ollama_name_check makes
 * (letters, digits, '.', '_', '-', lower case: no '/', no NUL, never "." or
 * ".."), and the file's own, <name>.MODEL.json. A planted manifest naming
 * "../victim" would otherwise make DELETE remove a file outside the registry. */
static int manifest_name_ok(const char *path, const char *name, size_t n)
{
    char canon[132], why[256];
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    if (!n || ollama_name_check(name, canon, sizeof canon, why, sizeof why) != 0 || strcmp(canon, name) ||
        !strcmp(name, ".") || !strcmp(name, ".."))
        return 0;
    return !strncmp(base, name, n) && !strcmp(base + n, ".MODEL.json");
}

/* Reads one manifest; refuses one edited by hand, misnamed, or whose base pin moved. */
static int derived_read(const char *path, const pin_ent *pins, size_t n_pins, derived *out, char *err, size_t errlen)
{
    size_t len;
    char *text = json_read_file(path, &len);
    jbuf c;
    memset(out, 0, sizeof *out);
    if (!text) {
        bk_err(err, errlen, "cannot read %s", path);
        return -1;
    }
    json_value *doc = json_parse(text, len, err, errlen);
    const json_value *layer = json_get(doc, "layer"), *base = json_get(doc, "base");
    const char *name = NULL, *dg = NULL, *bn = NULL, *bs = NULL, *ca = NULL;
    size_t l;
    int rc = -1;
    jbuf_init(&c);
    if (!doc || !layer || layer->type != JSON_OBJECT || !json_as_str(json_get(doc, "name"), &name, &l) ||
        memchr(name, 0, l) ||
        !json_as_str(json_get(doc, "digest"), &dg, &l) || !json_as_str(json_get(base, "name"), &bn, &l) ||
        !json_as_str(json_get(base, "sha256"), &bs, &l)) {
        if (doc) bk_err(err, errlen, "%s: not a bankml derived-model manifest", path);
        goto out;
    }
    json_as_str(json_get(doc, "created_at"), &ca, &l);
    if (!manifest_name_ok(path, name, l = strlen(name))) {
        bk_err(err, errlen, "%s: its name is not the file's own, or not a model name: refused", path);
        goto out;
    }
    char digest[80];
    if (canon_layer(layer, &c, digest) != 0 || strcmp(digest, dg)) {
        bk_err(err, errlen, "%s: edited by hand, refused — create it again", path);
        goto out;
    }
    const pin_ent *p = NULL;
    for (size_t i = 0; i < n_pins; i++)
        if (!strcmp(pins[i].name, bn)) p = &pins[i];
    char sha[65];
    if (!p || ol_pinned_sha(p->fork, p->file, sha) != 0 || strcmp(sha, bs)) {
        bk_err(err, errlen, "%s: its base %s is no longer pinned with sha256 %.64s: refused — create it again", path,
                bn, bs);
        goto out;
    }
    snprintf(out->name, sizeof out->name, "%s", name);
    snprintf(out->created_at, sizeof out->created_at, "%s", ca ? ca : "");
    snprintf(out->digest, sizeof out->digest, "%s", digest);
    snprintf(out->base_name, sizeof out->base_name, "%s", bn);
    snprintf(out->base_sha, sizeof out->base_sha, "%s", bs);
    out->layer = c.p;
    c.p = NULL;
    out->manifest = text;
    text = NULL;
    rc = 0;
out:
    jbuf_free(&c);
    json_free(doc);
    free(text);
    return rc;
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* Every <dir>/<name>.MODEL.json that reads back whole. */
void ol_derived_load_dir(const char *dir, const pin_ent *pins, size_t n_pins, derived **out, size_t *n_out)
{
    DIR *d;
    struct dirent *e;
    if (dir) {
        int gone = pin_clean_temps(dir);
        if (gone > 0) fprintf(stderr, "bankml: %s: removed %d temporary file%s left by killed writes\n", dir, gone,
                              gone == 1 ? "" : "s");
    }
    d = dir ? opendir(dir) : NULL;
    while (d && (e = readdir(d))) {
        if (!ends_with(e->d_name, ".MODEL.json")) continue;
        char path[4096 + 300], err[1024];
        derived one;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (derived_read(path, pins, n_pins, &one, err, sizeof err) != 0) {
            fprintf(stderr, "bankml serve: %s\n", err);
            continue;
        }
        derived *nd = realloc(*out, (*n_out + 1) * sizeof *nd);
        if (!nd) {
            ol_derived_free(&one);
            break;
        }
        *out = nd;
        (*out)[(*n_out)++] = one;
    }
    if (d) closedir(d);
}

/* The pins create can name: the engine's registry while serving. */
size_t ol_pins_from_engine(pin_ent **out)
{
    size_t n = engine_n_entries(ol.e), k = 0;
    *out = calloc(n ? n : 1, sizeof **out);
    for (size_t i = 0; *out && i < n; i++) {
        engine_entry e;
        if (engine_entry_get(ol.e, i, &e) != 0) continue;
        snprintf((*out)[k].name, sizeof (*out)[k].name, "%s", e.name);
        snprintf((*out)[k].file, sizeof (*out)[k].file, "%s", e.file);
        snprintf((*out)[k].path, sizeof (*out)[k].path, "%s", e.path);
        snprintf((*out)[k].fork, sizeof (*out)[k].fork, "%s", e.fork);
        (*out)[k++].present = e.present;
    }
    return *out ? k : 0;
}

/* The pins of the registry folder's FORK.json files (the command line). */
size_t ol_pins_from_dir(const char *dir, pin_ent **out)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;
    *out = NULL;
    while (d && (e = readdir(d))) {
        if (!ends_with(e->d_name, ".FORK.json")) continue;
        char fork[4096], err[256];
        size_t len;
        if (snprintf(fork, sizeof fork, "%s/%s", dir, e->d_name) >= (int)sizeof fork) continue;
        char *text = json_read_file(fork, &len);
        json_value *doc = text ? json_parse(text, len, err, sizeof err) : NULL;
        const json_value *files = json_get(doc, "files");
        for (size_t i = 0; files && files->type == JSON_ARRAY && i < files->n; i++) {
            const char *p;
            size_t pl;
            if (!json_as_str(json_get(files->items[i], "path"), &p, &pl) || !ends_with(p, ".gguf")) continue;
            const char *b = strrchr(p, '/');
            b = b ? b + 1 : p;
            pin_ent *np = realloc(*out, (n + 1) * sizeof *np);
            if (!np) break;
            *out = np;
            pin_ent *pe = &(*out)[n++];
            memset(pe, 0, sizeof *pe);
            engine_model_name(b, pe->name, sizeof pe->name);
            snprintf(pe->file, sizeof pe->file, "%s", b);
            snprintf(pe->path, sizeof pe->path, "%s/%s", dir, b);
            snprintf(pe->fork, sizeof pe->fork, "%s", fork);
            struct stat st;
            pe->present = stat(pe->path, &st) == 0;
        }
        json_free(doc);
        free(text);
    }
    if (d) closedir(d);
    return n;
}

/* ---- building a layer (create) ---- */

/* The PARAMETERs a derived model may set: the sampler's, the limit, the
 * context; is_int as Ollama parses them (strconv.ParseInt). */
static const struct { const char *key; int is_int; } LAYER_PARAMS[] = {
    {"temperature", 0}, {"top_k", 1}, {"top_p", 0}, {"min_p", 0}, {"seed", 1}, {"num_ctx", 1},
    {"num_predict", 1}, {"repeat_penalty", 0}, {"repeat_last_n", 1}, {"presence_penalty", 0},
    {"frequency_penalty", 0}, {"typical_p", 0}, {"min_keep", 1}};
#define N_LAYER_PARAMS (sizeof LAYER_PARAMS / sizeof LAYER_PARAMS[0])

const char *const OL_RESOURCE_OPTS[] = {"num_thread", "num_gpu", "main_gpu", "num_batch", "use_mmap",
                                        "use_mlock", "low_vram", "numa", "f16_kv", "vocab_only",
                                        "logits_all", "num_keep", NULL};

int ol_in_list(const char *const *l, const char *s)
{
    for (size_t i = 0; l[i]; i++)
        if (!strcmp(l[i], s)) return 1;
    return 0;
}

typedef struct {
    int has_system;
    jbuf system;
    int set[N_LAYER_PARAMS];
    double val[N_LAYER_PARAMS];
    jbuf stops;                /* JSON items, comma-separated */
    size_t n_stops;
    int stops_new;             /* this create set stops (they replace the parent's) */
    jbuf messages;
    size_t n_messages;
    jbuf license;
    size_t n_license;
    jbuf requires;
    int has_requires;
} layer_b;

static void lb_init(layer_b *b)
{
    memset(b, 0, sizeof *b);
    jbuf_init(&b->system);
    jbuf_init(&b->stops);
    jbuf_init(&b->messages);
    jbuf_init(&b->license);
    jbuf_init(&b->requires);
}

static void lb_free(layer_b *b)
{
    jbuf_free(&b->system);
    jbuf_free(&b->stops);
    jbuf_free(&b->messages);
    jbuf_free(&b->license);
    jbuf_free(&b->requires);
}

static void lb_stop(layer_b *b, const char *s, size_t n)
{
    if (!b->stops_new) {   /* a new list replaces the inherited one */
        jbuf_reset(&b->stops);
        b->n_stops = 0;
        b->stops_new = 1;
    }
    if (b->n_stops++) jbuf_putc(&b->stops, ',');
    json_put_str(&b->stops, s, n);
}

/* PARAMETER key value, checked as the spec's create does (§2.9). */
static int lb_param(layer_b *b, const char *key, const char *value, char *err, size_t errlen)
{
    if (!strcmp(key, "stop")) {
        lb_stop(b, value, strlen(value));
        return 0;
    }
    size_t k = 0;
    while (k < N_LAYER_PARAMS && strcmp(LAYER_PARAMS[k].key, key)) k++;
    if (k == N_LAYER_PARAMS) {
        if (!strcmp(key, "mirostat") || !strcmp(key, "mirostat_eta") || !strcmp(key, "mirostat_tau") ||
            !strcmp(key, "tfs_z") || !strcmp(key, "penalize_newline"))
            bk_err(err, errlen, "PARAMETER %s: that sampler is not reproduced; bankML runs llama-server's default "
                                 "chain", key);
        else if (ol_in_list(OL_RESOURCE_OPTS, key))
            bk_err(err, errlen, "PARAMETER %s: a resource option; bankml serve decides it, not the model", key);
        else
            bk_err(err, errlen, "PARAMETER %s: not a parameter bankML knows", key);
        return -1;
    }
    char *end;
    errno = 0;
    double v;
    if (LAYER_PARAMS[k].is_int) {
        long long x = strtoll(value, &end, 10);
        v = (double)x;
        if (end == value || *end || errno) {
            bk_err(err, errlen, "PARAMETER %s: \"%s\" is not an integer", key, value);
            return -1;
        }
    } else {
        v = strtod(value, &end);
        if (end == value || *end || !isfinite(v)) {
            bk_err(err, errlen, "PARAMETER %s: \"%s\" is not a number", key, value);
            return -1;
        }
        v = (double)(float)v;   /* Ollama parses these at 32 bits */
    }
    int bad = 0;
    if (!strcmp(key, "num_ctx")) bad = v < 1;
    else if (!strcmp(key, "num_predict")) bad = v < -2;
    else if (!strcmp(key, "repeat_penalty")) bad = !(v > 0);
    else if (!strcmp(key, "presence_penalty") || !strcmp(key, "frequency_penalty") || !strcmp(key, "seed")) bad = 0;
    else bad = v < 0;
    if (bad) {
        bk_err(err, errlen, "PARAMETER %s %s: out of range", key, value);
        return -1;
    }
    b->set[k] = 1;
    b->val[k] = v;
    return 0;
}

static int lb_message(layer_b *b, const char *role, const char *content, char *err, size_t errlen)
{
    if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant")) {
        bk_err(err, errlen, "MESSAGE %s: the role must be system, user or assistant", role);
        return -1;
    }
    if (b->n_messages++) jbuf_putc(&b->messages, ',');
    jbuf_puts(&b->messages, "{\"role\":");
    json_put_cstr(&b->messages, role);
    jbuf_puts(&b->messages, ",\"content\":");
    json_put_cstr(&b->messages, content);
    jbuf_putc(&b->messages, '}');
    return 0;
}

/* A parent derived model's layer as the starting point (FROM a derived
 * model inherits; new values win, a new stop list replaces its list). */
static void lb_inherit(layer_b *b, const char *layer_text)
{
    char err[128];
    json_value *l = json_parse(layer_text, strlen(layer_text), err, sizeof err);
    const json_value *v;
    if (!l) return;
    if ((v = json_get(l, "system")) && v->type == JSON_STRING) {
        b->has_system = 1;
        jbuf_put(&b->system, v->str, v->len);
    }
    if ((v = json_get(l, "parameters")) && v->type == JSON_OBJECT)
        for (size_t i = 0; i < v->n; i++)
            for (size_t k = 0; k < N_LAYER_PARAMS; k++)
                if (!strcmp(v->keys[i], LAYER_PARAMS[k].key) && json_as_double(v->items[i], &b->val[k])) b->set[k] = 1;
    if ((v = json_get(l, "stop")) && v->type == JSON_ARRAY)
        for (size_t i = 0; i < v->n; i++)
            if (v->items[i]->type == JSON_STRING) {
                if (b->n_stops++) jbuf_putc(&b->stops, ',');
                json_put_str(&b->stops, v->items[i]->str, v->items[i]->len);
            }
    if ((v = json_get(l, "messages")) && v->type == JSON_ARRAY)
        for (size_t i = 0; i < v->n; i++) {
            if (b->n_messages++) jbuf_putc(&b->messages, ',');
            json_put_value(&b->messages, v->items[i]);
        }
    if ((v = json_get(l, "license")) && v->type == JSON_ARRAY)
        for (size_t i = 0; i < v->n; i++) {
            if (b->n_license++) jbuf_putc(&b->license, ',');
            json_put_value(&b->license, v->items[i]);
        }
    json_free(l);
}

/* Where FROM points: a derived model (inherited), a registry name or
 * alias, or a pinned GGUF path. 0 with the pin, or -1 with the reason. */
static int resolve_from(const char *from, const pin_ent *pins, size_t n_pins, const derived *ds, size_t n_ds,
                        const pin_ent **base, const derived **parent, char *err, size_t errlen)
{
    *parent = ol_find_derived(ds, n_ds, from);
    const char *want = *parent ? (*parent)->base_name : from;
    for (size_t i = 0; i < n_pins; i++)
        if ((*parent && !strcmp(pins[i].name, want)) || (!*parent && engine_name_matches(pins[i].file, want))) {
            *base = &pins[i];
            return 0;
        }
    struct stat st, st2;
    if (strchr(from, '/') || ends_with(from, ".gguf")) {
        /* One answer whether or not the path exists: a client learns nothing
         * of the file system beyond the registry's pins. */
        const char *b = strrchr(from, '/');
        b = b ? b + 1 : from;
        for (size_t i = 0; i < n_pins && stat(from, &st) == 0; i++)
            if (!strcmp(pins[i].file, b) && stat(pins[i].path, &st2) == 0 && st.st_dev == st2.st_dev &&
                st.st_ino == st2.st_ino) {
                *base = &pins[i];
                return 0;
            }
        bk_err(err, errlen, "FROM %s: the file is not pinned by a FORK.json of the registry: pin it "
                             "(bankml pin %s --fork <registry>/<name>.FORK.json --write) and name it", from, from);
        return -1;
    }
    jbuf names;
    jbuf_init(&names);
    for (size_t i = 0; i < n_pins; i++) jbuf_printf(&names, "%s%s", i ? ", " : "", pins[i].name);
    bk_err(err, errlen, "FROM %s: no pinned or derived model has that name (%s)", from, names.p ? names.p : "");
    jbuf_free(&names);
    return -1;
}

/* The manifest of a new derived model, written atomically to
 * <dir>/<name>.MODEL.json (a temporary file renamed over it). */
int ol_write_manifest(const char *dir, const char *name, const pin_ent *base, const char *base_sha,
                          const char *layer_text, derived *out, char *err, size_t errlen)
{
    char digest[80], ts[40], path[4096 + 200], tmp[4096 + 240];
    json_value *l = json_parse(layer_text, strlen(layer_text), err, errlen);
    jbuf c, m;
    int rc = -1;
    if (!l) return -1;
    jbuf_init(&c);
    jbuf_init(&m);
    canon_layer(l, &c, digest);
    ollama_rfc3339(bk_wall_ns(), ts);
    jbuf_puts(&m, "{\"kind\": \"bankml-derived-model\", \"bankml\": \"" BANKML_VERSION "\", \"name\": ");
    json_put_cstr(&m, name);
    jbuf_puts(&m, ", \"created_at\": ");
    json_put_cstr(&m, ts);
    jbuf_puts(&m, ", \"base\": {\"name\": ");
    json_put_cstr(&m, base->name);
    jbuf_puts(&m, ", \"file\": ");
    json_put_cstr(&m, base->file);
    jbuf_puts(&m, ", \"sha256\": ");
    json_put_cstr(&m, base_sha);
    jbuf_puts(&m, ", \"fork\": ");
    json_put_cstr(&m, base->fork);
    jbuf_puts(&m, ", \"path\": ");
    json_put_cstr(&m, base->path);
    jbuf_puts(&m, "}, \"layer\": ");
    jbuf_put(&m, c.p, c.len);
    jbuf_puts(&m, ", \"digest\": ");
    json_put_cstr(&m, digest);
    jbuf_puts(&m, "}\n");
    snprintf(path, sizeof path, "%s/%s.MODEL.json", dir, name);
    /* the temporary in the same folder, made O_EXCL (a planted file or
     * symlink at its name is never written through), fsynced, renamed, the
     * folder fsynced (pin_replace_file); named so pin_clean_temps knows it
     * for a killed writer's once its pid is gone */
    static unsigned seq;
    if (m.oom) {
        bk_err(err, errlen, "cannot write %s: out of memory", path);
        goto out;
    }
    int wrc = -1;
    for (int tries = 0; tries < 64 && wrc != 0; tries++) {   /* a name already taken: the next one */
        snprintf(tmp, sizeof tmp, "%s/.%s.MODEL.json.%ld.%u.tmp", dir, name, (long)getpid(),
                 __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
        wrc = pin_replace_file(path, tmp, m.p, m.len, 0644);
        if (wrc != 0 && errno != EEXIST) break;
    }
    if (wrc != 0) {
        bk_err(err, errlen, "cannot write %s: %s", path, strerror(errno));
        goto out;
    }
    if (out) {
        memset(out, 0, sizeof *out);
        snprintf(out->name, sizeof out->name, "%s", name);
        snprintf(out->created_at, sizeof out->created_at, "%s", ts);
        snprintf(out->digest, sizeof out->digest, "%s", digest);
        snprintf(out->base_name, sizeof out->base_name, "%s", base->name);
        snprintf(out->base_sha, sizeof out->base_sha, "%s", base_sha);
        out->layer = c.p;
        c.p = NULL;
        out->manifest = m.p;
        m.p = NULL;
    }
    rc = 0;
out:
    json_free(l);
    jbuf_free(&c);
    jbuf_free(&m);
    return rc;
}

/* The layer's canonical text from a builder. */
static void lb_text(const layer_b *b, const char *base_sha, jbuf *out)
{
    jbuf_puts(out, "{\"base_sha256\":");
    json_put_cstr(out, base_sha);
    jbuf_puts(out, ",\"system\":");
    if (b->has_system) json_put_str(out, b->system.p ? b->system.p : "", b->system.len);
    else jbuf_puts(out, "null");
    jbuf_puts(out, ",\"parameters\":{");
    int first = 1;
    for (size_t k = 0; k < N_LAYER_PARAMS; k++) {
        if (!b->set[k]) continue;
        jbuf_printf(out, "%s\"%s\":", first ? "" : ",", LAYER_PARAMS[k].key);
        if (LAYER_PARAMS[k].is_int) jbuf_printf(out, "%lld", (long long)b->val[k]);
        else json_put_double(out, b->val[k]);
        first = 0;
    }
    jbuf_puts(out, "},\"stop\":[");
    jbuf_put(out, b->stops.p ? b->stops.p : "", b->stops.len);
    jbuf_puts(out, "],\"template_sha256\":null,\"license\":[");
    jbuf_put(out, b->license.p ? b->license.p : "", b->license.len);
    jbuf_puts(out, "],\"messages\":[");
    jbuf_put(out, b->messages.p ? b->messages.p : "", b->messages.len);
    jbuf_puts(out, "],\"requires\":");
    if (b->has_requires) json_put_str(out, b->requires.p ? b->requires.p : "", b->requires.len);
    else jbuf_puts(out, "null");
    jbuf_putc(out, '}');
}

/* Everything create does but the HTTP: from a parsed Modelfile (mf) or the
 * structured request (req, Ollama's new /api/create form), the layer over
 * its base, checked, then written. */
int ol_create_model(const char *dir, const char *asked, const ollama_modelfile *mf, const json_value *req,
                        const pin_ent *pins, size_t n_pins, const derived *ds, size_t n_ds, derived *out,
                        char *err, size_t errlen)
{
    char name[132], base_sha[65];
    const char *from = NULL, *tmpl = NULL;
    const pin_ent *base = NULL;
    const derived *parent = NULL;
    layer_b b;
    jbuf text;
    int rc = -1, n_from = 0;
    if (!dir) {
        bk_err(err, errlen, "bankml serve was started without --registry DIR: there is nowhere to write a derived "
                             "model");
        return -1;
    }
    if (ollama_name_check(asked, name, sizeof name, err, errlen) != 0) return -1;
    for (size_t i = 0; i < n_pins; i++)
        if (!strcmp(pins[i].name, name)) {
            bk_err(err, errlen, "%s is a pinned model's name; choose another", name);
            return -1;
        }
    lb_init(&b);
    jbuf_init(&text);
    for (size_t i = 0; mf && i < mf->n; i++)
        if (!strcmp(mf->cmds[i].name, "from")) n_from++, from = mf->cmds[i].value;
    if (req) {
        const char *f;
        size_t fl;
        if (json_as_str(json_get(req, "from"), &f, &fl) && fl) n_from++, from = f;
        if (from == f && memchr(f, 0, fl)) {
            bk_err(err, errlen, "from holds a NUL byte: no model or file has such a name");
            goto out;
        }
    }
    if (n_from != 1) {
        bk_err(err, errlen, n_from ? "more than one FROM: a derived model has exactly one base"
                                    : "no FROM: name the pinned model this one derives from");
        goto out;
    }
    if (resolve_from(from, pins, n_pins, ds, n_ds, &base, &parent, err, errlen) != 0) goto out;
    if (ol_pinned_sha(base->fork, base->file, base_sha) != 0) {
        bk_err(err, errlen, "FROM %s: %s has no sha256 in %s", from, base->file, base->fork);
        goto out;
    }
    if (parent) lb_inherit(&b, parent->layer);
    for (size_t i = 0; mf && i < mf->n; i++) {
        const ollama_cmd *c = &mf->cmds[i];
        if (!strcmp(c->name, "system")) {
            b.has_system = 1;
            jbuf_reset(&b.system);
            jbuf_puts(&b.system, c->value);
        } else if (!strcmp(c->name, "parameter")) {
            if (lb_param(&b, c->key, c->value, err, errlen) != 0) goto out;
        } else if (!strcmp(c->name, "message")) {
            if (lb_message(&b, c->key, c->value, err, errlen) != 0) goto out;
        } else if (!strcmp(c->name, "license")) {
            if (b.n_license++) jbuf_putc(&b.license, ',');
            json_put_cstr(&b.license, c->value);
        } else if (!strcmp(c->name, "requires")) {
            b.has_requires = 1;
            jbuf_reset(&b.requires);
            jbuf_puts(&b.requires, c->value);
        } else if (!strcmp(c->name, "template")) {
            tmpl = c->value;
        } else if (!strcmp(c->name, "adapter")) {
            bk_err(err, errlen, "ADAPTER: LoRA adapters are not reproduced; bankML serves pinned weights as they are");
            goto out;
        }
    }
    if (req) {
        const json_value *v;
        const char *s;
        size_t sl;
        if (json_as_str(json_get(req, "system"), &s, &sl) && sl) {
            b.has_system = 1;
            jbuf_reset(&b.system);
            jbuf_put(&b.system, s, sl);
        }
        if (json_as_str(json_get(req, "template"), &s, &sl) && sl) {
            if (memchr(s, 0, sl)) {
                bk_err(err, errlen, "template holds a NUL byte, which no template renders");
                goto out;
            }
            tmpl = s;
        }
        if ((v = json_get(req, "license"))) {
            if (v->type == JSON_STRING && v->len) {
                if (b.n_license++) jbuf_putc(&b.license, ',');
                json_put_str(&b.license, v->str, v->len);
            } else if (v->type == JSON_ARRAY) {
                for (size_t i = 0; i < v->n; i++)
                    if (v->items[i]->type == JSON_STRING) {
                        if (b.n_license++) jbuf_putc(&b.license, ',');
                        json_put_str(&b.license, v->items[i]->str, v->items[i]->len);
                    }
            }
        }
        if ((v = json_get(req, "parameters")) && v->type != JSON_NULL) {
            if (v->type != JSON_OBJECT) {
                bk_err(err, errlen, "parameters must be an object");
                goto out;
            }
            for (size_t i = 0; i < v->n; i++) {
                const json_value *x = v->items[i];
                char num[64];
                if (!strcmp(v->keys[i], "stop")) {
                    if (x->type == JSON_STRING) lb_stop(&b, x->str, x->len);
                    else if (x->type == JSON_ARRAY) {
                        for (size_t k = 0; k < x->n; k++)
                            if (x->items[k]->type == JSON_STRING) lb_stop(&b, x->items[k]->str, x->items[k]->len);
                    } else {
                        bk_err(err, errlen, "parameters.stop must be a string or an array of strings");
                        goto out;
                    }
                    continue;
                }
                if (x->type != JSON_NUMBER) {
                    if (lb_param(&b, v->keys[i], "?", err, errlen) != 0) goto out;
                }
                snprintf(num, sizeof num, "%s", x->str);
                /* JSON numbers like 2.0 for an integer parameter are taken whole */
                for (size_t k = 0; k < N_LAYER_PARAMS; k++)
                    if (!strcmp(LAYER_PARAMS[k].key, v->keys[i]) && LAYER_PARAMS[k].is_int) {
                        double d = strtod(x->str, NULL);
                        if (d == floor(d) && fabs(d) < 9e15) snprintf(num, sizeof num, "%lld", (long long)d);
                    }
                if (lb_param(&b, v->keys[i], num, err, errlen) != 0) goto out;
            }
        }
        if ((v = json_get(req, "messages")) && v->type != JSON_NULL) {
            if (v->type != JSON_ARRAY) {
                bk_err(err, errlen, "messages must be an array");
                goto out;
            }
            for (size_t i = 0; i < v->n; i++) {
                const char *role, *content;
                size_t rl, cl;
                if (!json_as_str(json_get(v->items[i], "role"), &role, &rl) ||
                    !json_as_str(json_get(v->items[i], "content"), &content, &cl)) {
                    bk_err(err, errlen, "a message needs a role and a text content");
                    goto out;
                }
                if (lb_message(&b, role, content, err, errlen) != 0) goto out;
            }
        }
    }
    if (tmpl) {
        hinfo hi;
        memset(&hi, 0, sizeof hi);
        ol_hinfo_fill(&hi, base->path);
        int same = hi.tmpl && !strcmp(hi.tmpl, tmpl);
        ol_hinfo_free(&hi);
        if (!same) {
            bk_err(err, errlen, "template: bankML renders the pinned model's own chat template (byte-identical to "
                                 "llama.cpp); a replacement template is not taken");
            goto out;
        }
    }
    lb_text(&b, base_sha, &text);
    if (text.oom) {
        bk_err(err, errlen, "out of memory");
        goto out;
    }
    rc = ol_write_manifest(dir, name, base, base_sha, text.p, out, err, errlen);
out:
    lb_free(&b);
    jbuf_free(&text);
    return rc;
}

/* ------------------------------------------------------------------ bankml create */

int ollama_cmd_create(int argc, char **argv)
{
    const char *name = NULL, *file = NULL, *dir = ".";
    char err[1024];
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-f") && i + 1 < argc) file = argv[++i];
        else if (!strcmp(argv[i], "--registry") && i + 1 < argc) dir = argv[++i];
        else if (argv[i][0] != '-' && !name) name = argv[i];
        else {
            fprintf(stderr, "bankml create: unexpected argument %s\n", argv[i]);
            return BANKML_EXIT_IO;
        }
    }
    if (!name || !file) {
        fprintf(stderr, "usage: bankml create NAME -f Modelfile [--registry DIR]\n");
        return BANKML_EXIT_IO;
    }
    size_t len;
    char *text = json_read_file(file, &len);
    if (!text) {
        fprintf(stderr, "bankml create: cannot read %s: %s\n", file, strerror(errno));
        return BANKML_EXIT_IO;
    }
    ollama_modelfile mf;
    if (ollama_modelfile_parse(text, len, &mf, err, sizeof err) != 0) {
        fprintf(stderr, "bankml create: %s: %s\n", file, err);
        free(text);
        return BANKML_REFUSE;
    }
    pin_ent *pins = NULL;
    derived *ds = NULL, made;
    size_t n_ds = 0, n_pins = ol_pins_from_dir(dir, &pins);
    ol_derived_load_dir(dir, pins, n_pins, &ds, &n_ds);
    int rc = ol_create_model(dir, name, &mf, NULL, pins, n_pins, ds, n_ds, &made, err, sizeof err);
    if (rc == 0) {
        printf("bankml create: %s:latest written to %s/%s.MODEL.json (%s over %s)\n", made.name, dir, made.name,
               made.digest, made.base_name);
        ol_derived_free(&made);
    } else {
        fprintf(stderr, "bankml create: %s\n", err);
    }
    for (size_t i = 0; i < n_ds; i++) ol_derived_free(&ds[i]);
    free(ds);
    free(pins);
    ollama_modelfile_free(&mf);
    free(text);
    return rc == 0 ? BANKML_OK : BANKML_REFUSE;
}
